/* Breaks the contract in a way only the verifier sees: a loop whose bound
 * depends on the packet (compiles both ways; the kernel refuses to load it). */
#include "innet/dp.h"

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	volatile uint64_t x = pkt->len;   /* (volatile: a loop without effects may be deleted) */
	while (x != 1)
		x = (x & 1) ? 3 * x + 1 : x / 2;   /* Collatz: no bound anyone can prove */
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_loop, h, NULL)
