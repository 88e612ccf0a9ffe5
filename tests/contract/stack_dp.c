/* Breaks the contract: 1 KiB on the stack (eBPF allows 512 bytes). */
#include "innet/dp.h"

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	volatile uint8_t scratch[1024];
	for (uint32_t i = 0; i < sizeof(scratch); i++)
		scratch[i] = (uint8_t)i;
	return scratch[pkt->len & 1023] ? innet_reflect(pkt) : innet_drop(pkt, INNET_DROP_PROGRAM);
}

INNET_DATAPATH(contract_stack, h, NULL)
