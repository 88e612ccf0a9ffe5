/* Declares itself user-space only: the build must say so and skip eBPF. */
#include "innet/dp.h"

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_reflect(pkt);
}

INNET_DATAPATH_USERSPACE(contract_userspace, h, NULL, "a test of the declaration")
