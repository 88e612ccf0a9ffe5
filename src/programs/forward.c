/*
 * forward.c — the trivial forwarding program (PISA).
 *
 * Two ways to choose the egress port, per packet:
 *   1. route: a packet that starts with an innet base header (wire.h) whose
 *      dst_node is not 0 is looked up in the "routes" table by dst_node; the
 *      entry lists up to 8 equal-cost ports and one is picked by a hash of
 *      the flow (ECMP), so a flow stays on one path.
 *   2. map: otherwise, the "port_map" register gives the egress port for the
 *      ingress port (a patch panel, as DPDK l2fwd pairs ports).
 *
 * Settings:
 *   "map":    [out port for in port 0, for in port 1, ...]  (default: none)
 *   "routes": [{"node": N, "ports": [p, ...]}, ...]          (innet fabric
 *             computes these from the topology with "routes": "auto"), or
 *             {"node": N, "group": G}: replicate to multicast group G (a
 *             group node: one address, many receivers)
 *   "groups": number of multicast groups (default 0); members are set by
 *             the control plane (innet ctl group set)
 *
 * Per packet: one table lookup or one register read, a hash for ECMP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/routes.h"
#include "innet/switch.h"
#include "innet/wire.h"

enum { R_PORT_MAP };
enum { T_ROUTES };

enum fwd_drop {
	FWD_NO_ROUTE = INNET_DROP_PROGRAM,
	FWD_BAD_VERSION,
	FWD_BAD_ROUTE,
};

static const char *const fwd_drop_names[] = { "no_route", "bad_version", "bad_route" };

struct fwd_conf {
	struct innet_routes routes;       /* from the settings, installed by init */
	uint16_t map[INNET_MAX_PORTS];    /* out port + 1; 0 = unset */
};

static enum innet_action fwd_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	if (pkt->len >= sizeof(struct innet_hdr) && pkt->data[0] == INNET_MAGIC) {
		const struct innet_hdr *h = (const struct innet_hdr *)pkt->data;
		if (h->version != INNET_VERSION)
			return innet_drop(pkt, FWD_BAD_VERSION);
		uint16_t node = ntohs(h->dst_node);
		if (node != 0) {
			struct innet_route r;
			int rc = innet_route_get(ctx, T_ROUTES, node, &r);
			if (rc != 0)
				return innet_drop(pkt, rc == -1 ? FWD_NO_ROUTE : FWD_BAD_ROUTE);
			if (r.n == INNET_ROUTE_GROUP)
				return innet_multicast(pkt, r.ports[0]);
			uint64_t hash = 0;
			if (r.n > 1) {
				uint64_t flow[2] = { ((uint64_t)pkt->src.ip << 16) | pkt->src.udp,
						     ((uint64_t)node << 16) | pkt->dst_udp };
				hash = innet_hash(flow, sizeof(flow), 0);
				innet_alu(ctx, 2);
			}
			return innet_forward(pkt, innet_route_pick(&r, hash));
		}
	}
	uint64_t out = innet_reg_read(ctx, R_PORT_MAP, pkt->in_port);
	if (out == 0)
		return innet_drop(pkt, FWD_NO_ROUTE);
	return innet_forward(pkt, (uint16_t)(out - 1));
}

static int fwd_setup(struct innet_decl *d, struct innet_args *a)
{
	struct fwd_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	innet_decl_priv(d, c);
	uint64_t map[INNET_MAX_PORTS];
	uint32_t n_map = 0;
	int rc = innet_args_u64_array(a, "map", map, INNET_MAX_PORTS, &n_map);
	if (rc != 0)
		return rc;
	for (uint32_t i = 0; i < n_map; i++) {
		if (map[i] >= INNET_MAX_PORTS)
			return innet_decl_error(d, "map[%u] = %lu is not a port number", i,
						(unsigned long)map[i]);
		c->map[i] = (uint16_t)(map[i] + 1);
	}
	uint64_t groups;
	if ((rc = innet_args_u64(a, "groups", 0, 0, INNET_MAX_GROUPS, &groups)) != 0)
		return rc;
	if ((rc = innet_routes_parse(d, innet_args_json(a, "routes"), (uint32_t)groups, &c->routes)) != 0)
		return rc;
	if ((rc = innet_decl_reg(d, R_PORT_MAP, "port_map", 2, INNET_MAX_PORTS)) != 0)
		return rc;
	if ((rc = innet_decl_groups(d, (uint32_t)groups)) != 0)
		return rc;
	return innet_routes_decl_table(d, T_ROUTES);
}

static int fwd_init(struct innet_cp *cp, void *priv)
{
	struct fwd_conf *c = priv;
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	for (uint32_t i = 0; i < INNET_MAX_PORTS; i++) {
		if (c->map[i] == 0)
			continue;
		if (c->map[i] - 1u >= n_ports || i >= n_ports)
			return innet_cp_init_error(cp, "map entry %u -> %u names a port this switch "
						       "does not have (%u ports)", i, c->map[i] - 1u, n_ports);
		innet_cp_reg_write(cp, R_PORT_MAP, i, c->map[i]);
	}
	return innet_routes_install(cp, T_ROUTES, &c->routes);
}

const struct innet_program innet_prog_forward = {
	.name = "forward",
	.summary = "forward by innet dst_node route (ECMP or multicast group) or a static port map",
	.model = INNET_MODEL_PISA,
	.parse_bytes = sizeof(struct innet_hdr),
	.drop_reasons = fwd_drop_names,
	.n_drop_reasons = sizeof(fwd_drop_names) / sizeof(fwd_drop_names[0]),
	.setup = fwd_setup,
	.init = fwd_init,
	.handle = fwd_handle,
};
