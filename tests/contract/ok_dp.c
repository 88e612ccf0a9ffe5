/* A data path that keeps the contract: it must build both ways and load. */
#include "innet/dp.h"

static enum innet_action ok_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const uint8_t *b = innet_pkt_ptr(pkt, 0, 4);
	if (b == NULL)
		return innet_drop(pkt, INNET_DROP_PROGRAM);
	uint32_t sum = 0;
	for (uint32_t i = 0; i < 4; i++)
		sum += b[i];
	innet_alu(ctx, 4);
	return sum & 1 ? innet_reflect(pkt) : innet_forward(pkt, 0);
}

INNET_DATAPATH(contract_ok, ok_handle, NULL)
