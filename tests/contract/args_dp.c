/* Breaks the contract in a way only the eBPF compiler sees: a call with six
 * arguments (eBPF passes five in registers). */
#include "innet/dp.h"

static __attribute__((noinline)) uint32_t mix(uint32_t a, uint32_t b, uint32_t c, uint32_t d,
					      uint32_t e, uint32_t f)
{
	return a ^ b ^ c ^ d ^ e ^ f;
}

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint32_t l = pkt->len;
	return mix(l, l + 1, l + 2, l + 3, l + 4, l + 5) & 1 ? innet_reflect(pkt)
							       : innet_drop(pkt, INNET_DROP_PROGRAM);
}

INNET_DATAPATH(contract_args, h, NULL)
