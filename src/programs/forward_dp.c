/*
 * forward_dp.c — the forward program's data path (PISA): choose the egress
 * port of each packet, per packet, in one of two ways.
 *
 *   1. route: a payload that starts with an innet base header (wire.h) whose
 *      dst_node is not 0 is looked up in the "routes" table by dst_node; the
 *      entry lists up to 8 equal-cost ports and one is picked by a hash of
 *      the flow (ECMP), so a flow stays on one path; or it names a multicast
 *      group (a group node).
 *   2. map: otherwise, the "port_map" register gives the egress port for the
 *      ingress port (a patch panel, as DPDK l2fwd pairs ports).
 *
 * What counts as garbage (docs/programs.md, "forward"): a payload that starts
 * with the innet magic must be a whole base header (else too_short) of the
 * right version (else bad_version); one that does not is a raw datagram for
 * the port map, or, on an instance without a port map (a fabric switch that
 * only routes), bad_magic. With "peer_only", a packet whose source is not the
 * ingress port's peer is dropped as not_peer.
 *
 * Per packet: one table lookup or one register read, a hash for ECMP.
 */
#include "innet/dp.h"
#include "innet/routes.h"
#include "innet/wire.h"
#include "programs/forward.h"

static enum innet_action fwd_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct fwd_conf *c = innet_conf(ctx);
	if (c->peer_only) {
		uint32_t peer = innet_port_peer_ip(ctx, pkt->in_port);
		if (peer != 0 && pkt->src.ip != peer)
			return innet_drop(pkt, FWD_NOT_PEER);
	}
	const uint8_t *magic = innet_pkt_ptr(pkt, 0, 1);
	if (magic != NULL && *magic == INNET_MAGIC) {
		const struct innet_hdr *h = innet_pkt_ptr(pkt, 0, sizeof(*h));
		if (h == NULL)
			return innet_drop(pkt, FWD_TOO_SHORT);
		if (h->version != INNET_VERSION)
			return innet_drop(pkt, FWD_BAD_VERSION);
		uint16_t node = innet_be16(h->dst_node);
		if (node != 0) {
			struct innet_route r;
			int rc = innet_route_get(ctx, FWD_T_ROUTES, node, &r);
			if (rc != INNET_ROUTE_OK)
				return innet_drop(pkt, rc == INNET_ROUTE_NONE ? FWD_NO_ROUTE
						       : rc == INNET_ROUTE_BUSY ? INNET_DROP_TABLE_BUSY
						       : FWD_BAD_ROUTE);
			if (r.n == INNET_ROUTE_GROUP)
				return innet_multicast(pkt, r.ports[0]);
			uint64_t hash = 0;
			if (r.n > 1) {
				uint64_t flow[2] = { ((uint64_t)pkt->src.ip << 16) | pkt->src.udp,
						     ((uint64_t)node << 16) | pkt->dst_udp };
				hash = innet_hash(flow, sizeof(flow), 0);
				innet_alu(ctx, 5); /* innet_route_pick's choice among r.n */
			}
			return innet_forward(pkt, innet_route_pick(&r, hash));
		}
	} else if (!c->has_map) {
		return innet_drop(pkt, FWD_BAD_MAGIC);
	}
	uint64_t out = innet_reg_read(ctx, FWD_R_PORT_MAP, pkt->in_port);
	if (out == 0)
		return innet_drop(pkt, FWD_NO_ROUTE);
	return innet_forward(pkt, (uint16_t)(out - 1));
}

INNET_DATAPATH(forward, fwd_handle, NULL)
