/* Breaks the contract: a libc header (there is none in a data path). */
#include <string.h>
#include "innet/dp.h"

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint8_t *b = innet_pkt_ptr(pkt, 0, 8);
	if (b != NULL)
		memset(b, 0, 8);
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_libc, h, NULL)
