/* Breaks the contract: calls a function outside the innet_* API (declared
 * by hand, so the compile alone does not notice). */
#include "innet/dp.h"

void *malloc(size_t n);

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return malloc(16) ? innet_reflect(pkt) : innet_drop(pkt, INNET_DROP_PROGRAM);
}

INNET_DATAPATH(contract_call, h, NULL)
