/* Breaks the contract: a libc function declared by hand (no header needed
 * to call one) — the user-space object then refers to it. */
#include "innet/dp.h"

size_t strlen(const char *s);

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const char *b = innet_pkt_ptr(pkt, 0, 16);
	if (b == NULL || strlen(b) > 8)
		return innet_drop(pkt, INNET_DROP_PROGRAM);
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_externlibc, h, NULL)
