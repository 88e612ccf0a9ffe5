/* Breaks the contract: mutable state in a global, not a declared register. */
#include "innet/dp.h"

uint64_t packets_seen;

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	packets_seen++;
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_global, h, NULL)
