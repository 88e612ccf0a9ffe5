/*
 * l2fwd_dp.c — the l2fwd program's data path (PISA): every Ethernet frame
 * that comes in on raw port i goes out, unchanged, on port map[i], counted
 * per port in the rx_frames and tx_frames registers.
 */
#include "innet/dp.h"
#include "programs/l2fwd.h"

static enum innet_action l2fwd_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct l2fwd_conf *c = innet_conf(ctx);
	if (!(pkt->flags & INNET_PKT_F_RAW))
		return innet_drop(pkt, L2_NOT_A_FRAME);
	innet_reg_fetch_add(ctx, L2_R_RX, pkt->in_port, 1);
	if (innet_pkt_ptr(pkt, 0, L2_ETH_HDR_LEN) == NULL)
		return innet_drop(pkt, L2_RUNT);
	uint16_t out = pkt->in_port < INNET_MAX_PORTS ? c->map[innet_index(pkt->in_port, INNET_MAX_PORTS)]
						      : L2_UNMAPPED;
	if (out == L2_UNMAPPED)
		return innet_drop(pkt, L2_NOT_MAPPED);
	innet_reg_fetch_add(ctx, L2_R_TX, out, 1);
	return innet_forward(pkt, out);
}

INNET_DATAPATH(l2fwd, l2fwd_handle, NULL)
