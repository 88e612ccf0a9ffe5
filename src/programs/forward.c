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
#include <jansson.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "innet/wire.h"

enum { R_PORT_MAP };
enum { T_ROUTES };

#define ROUTE_MAX_PORTS 8u
#define ROUTES_CAPACITY 4096u

struct route {
	uint16_t n;                       /* ports in use; ROUTE_GROUP: multicast */
	uint16_t ports[ROUTE_MAX_PORTS];  /* ROUTE_GROUP: ports[0] is the group */
} __attribute__((packed));

#define ROUTE_GROUP 0xFFFFu

enum fwd_drop {
	FWD_NO_ROUTE = INNET_DROP_PROGRAM,
	FWD_BAD_VERSION,
	FWD_BAD_ROUTE,
};

static const char *const fwd_drop_names[] = { "no_route", "bad_version", "bad_route" };

struct fwd_conf {
	struct route routes_init[ROUTES_CAPACITY];
	uint16_t route_nodes[ROUTES_CAPACITY];
	uint32_t n_routes;
	uint16_t map[INNET_MAX_PORTS];    /* out port + 1; 0 = unset */
	uint32_t n_groups;
};

static enum innet_action fwd_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	if (pkt->len >= sizeof(struct innet_hdr) && pkt->data[0] == INNET_MAGIC) {
		const struct innet_hdr *h = (const struct innet_hdr *)pkt->data;
		if (h->version != INNET_VERSION)
			return innet_drop(pkt, FWD_BAD_VERSION);
		uint16_t node = ntohs(h->dst_node);
		if (node != 0) {
			struct route r;
			uint16_t key = node;
			if (innet_table_lookup(ctx, T_ROUTES, &key, &r) != 0)
				return innet_drop(pkt, FWD_NO_ROUTE);
			if (r.n == ROUTE_GROUP)
				return innet_multicast(pkt, r.ports[0]);
			if (r.n == 0 || r.n > ROUTE_MAX_PORTS)
				return innet_drop(pkt, FWD_BAD_ROUTE);
			uint32_t pick = 0;
			if (r.n > 1) {
				uint64_t flow[2] = { ((uint64_t)pkt->src.ip << 16) | pkt->src.udp,
						     ((uint64_t)node << 16) | pkt->dst_udp };
				pick = (uint32_t)(innet_hash(flow, sizeof(flow), 0) % r.n);
				innet_alu(ctx, 2);
			}
			return innet_forward(pkt, r.ports[pick]);
		}
	}
	uint64_t out = innet_reg_read(ctx, R_PORT_MAP, pkt->in_port);
	if (out == 0)
		return innet_drop(pkt, FWD_NO_ROUTE);
	return innet_forward(pkt, (uint16_t)(out - 1));
}

static int parse_routes(struct innet_decl *d, json_t *routes, struct fwd_conf *c)
{
	if (json_is_string(routes) && !strcmp(json_string_value(routes), "auto"))
		return innet_decl_error(d, "\"routes\": \"auto\" is resolved by innet fabric; "
					   "run this switch from its topology file");
	if (!json_is_array(routes))
		return innet_decl_error(d, "setting 'routes' must be an array of {\"node\", \"ports\"}");
	if (json_array_size(routes) > ROUTES_CAPACITY)
		return innet_decl_error(d, "at most %u routes", ROUTES_CAPACITY);
	size_t i;
	json_t *r;
	json_array_foreach(routes, i, r) {
		json_t *node = json_object_get(r, "node"), *ports = json_object_get(r, "ports");
		json_t *group = json_object_get(r, "group");
		if (!json_is_object(r) || !json_is_integer(node) || json_integer_value(node) < 1 ||
		    json_integer_value(node) > 65535 || json_object_size(r) != 2 ||
		    (group == NULL && (!json_is_array(ports) || json_array_size(ports) < 1 ||
				       json_array_size(ports) > ROUTE_MAX_PORTS)))
			return innet_decl_error(d, "routes[%zu] must be {\"node\": 1..65535, \"ports\": "
						   "[1..%u port numbers]} or {\"node\", \"group\"}",
						i, ROUTE_MAX_PORTS);
		struct route *rt = &c->routes_init[c->n_routes];
		if (group != NULL) {
			if (!json_is_integer(group) || json_integer_value(group) < 0 ||
			    json_integer_value(group) >= (json_int_t)c->n_groups)
				return innet_decl_error(d, "routes[%zu].group must be a declared group "
							   "(0..%u; see \"groups\")", i,
							c->n_groups ? c->n_groups - 1 : 0);
			rt->n = ROUTE_GROUP;
			rt->ports[0] = (uint16_t)json_integer_value(group);
			c->route_nodes[c->n_routes++] = (uint16_t)json_integer_value(node);
			continue;
		}
		size_t j;
		json_t *p;
		json_array_foreach(ports, j, p) {
			if (!json_is_integer(p) || json_integer_value(p) < 0 ||
			    json_integer_value(p) >= INNET_MAX_PORTS)
				return innet_decl_error(d, "routes[%zu].ports[%zu] is not a port number", i, j);
			rt->ports[j] = (uint16_t)json_integer_value(p);
		}
		rt->n = (uint16_t)json_array_size(ports);
		c->route_nodes[c->n_routes++] = (uint16_t)json_integer_value(node);
	}
	return 0;
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
	c->n_groups = (uint32_t)groups;
	json_t *routes = innet_args_json(a, "routes");
	if (routes != NULL && (rc = parse_routes(d, routes, c)) != 0)
		return rc;
	if ((rc = innet_decl_reg(d, R_PORT_MAP, "port_map", 2, INNET_MAX_PORTS)) != 0)
		return rc;
	if ((rc = innet_decl_groups(d, c->n_groups)) != 0)
		return rc;
	return innet_decl_table(d, T_ROUTES, "routes", sizeof(uint16_t), sizeof(struct route),
				ROUTES_CAPACITY);
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
	for (uint32_t i = 0; i < c->n_routes; i++) {
		for (uint32_t j = 0; c->routes_init[i].n != ROUTE_GROUP && j < c->routes_init[i].n; j++)
			if (c->routes_init[i].ports[j] >= n_ports)
				return innet_cp_init_error(cp, "route to node %u uses port %u; the switch "
							       "has %u ports", c->route_nodes[i],
							   c->routes_init[i].ports[j], n_ports);
		int rc = innet_cp_table_add(cp, T_ROUTES, &c->route_nodes[i], &c->routes_init[i]);
		if (rc != 0)
			return rc;
	}
	return 0;
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
