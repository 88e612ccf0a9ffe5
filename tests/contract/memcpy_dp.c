/* Breaks the contract in a way only the eBPF object shows: memcpy declared
 * by hand and called with a length the compiler cannot know. */
#include "innet/dp.h"

void *memcpy(void *dst, const void *src, size_t n);

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint8_t *b = innet_pkt_ptr(pkt, 0, 64);
	if (b == NULL)
		return innet_drop(pkt, INNET_DROP_PROGRAM);
	memcpy(b, b + 32, b[0] & 31);
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_memcpy, h, NULL)
