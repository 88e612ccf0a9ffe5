/*
 * forward.c — the forward program's control source: settings, state
 * declarations, initial state. The per-packet handler is forward_dp.c.
 *
 * Settings:
 *   "map":    [out port for in port 0, for in port 1, ...]  (default: none)
 *   "routes": [{"node": N, "ports": [p, ...]}, ...]          (innet fabric
 *             computes these from the topology with "routes": "auto"), or
 *             {"node": N, "group": G}: replicate to multicast group G (a
 *             group node: one address, many receivers)
 *   "groups": number of multicast groups (default 0); members are set by
 *             the control plane (innet ctl group set)
 *   "peer_only": drop packets whose source is not the ingress port's peer
 *             (default false: a port accepts what arrives at its address,
 *             as the generators of the benchmarks rely on)
 */
#include <errno.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/routes.h"
#include "innet/switch.h"
#include "innet/wire.h"
#include "programs/forward.h"

static const char *const fwd_drop_names[] = {
	"no_route", "bad_version", "bad_route", "too_short", "bad_magic", "not_peer",
};

/* Control-side state: the parsed settings, kept until init installs them. */
struct fwd_setup {
	struct innet_routes routes;
	uint16_t map[INNET_MAX_PORTS];    /* out port + 1; 0 = unset */
};

static int fwd_setup(struct innet_decl *d, struct innet_args *a)
{
	struct fwd_setup *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	innet_decl_priv(d, s);
	struct fwd_conf *c = innet_decl_conf(d, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	uint64_t map[INNET_MAX_PORTS];
	uint32_t n_map = 0;
	int rc = innet_args_u64_array(a, "map", map, INNET_MAX_PORTS, &n_map);
	if (rc != 0)
		return rc;
	for (uint32_t i = 0; i < n_map; i++) {
		if (map[i] >= INNET_MAX_PORTS)
			return innet_decl_error(d, "map[%u] = %lu is not a port number", i,
						(unsigned long)map[i]);
		s->map[i] = (uint16_t)(map[i] + 1);
	}
	c->has_map = n_map > 0;
	bool peer_only;
	if ((rc = innet_args_bool(a, "peer_only", false, &peer_only)) != 0)
		return rc;
	c->peer_only = peer_only;
	uint64_t groups;
	if ((rc = innet_args_u64(a, "groups", 0, 0, INNET_MAX_GROUPS, &groups)) != 0)
		return rc;
	if ((rc = innet_routes_parse(d, innet_args_json(a, "routes"), (uint32_t)groups, &s->routes)) != 0)
		return rc;
	if ((rc = innet_decl_reg(d, FWD_R_PORT_MAP, "port_map", 2, INNET_MAX_PORTS)) != 0)
		return rc;
	if ((rc = innet_decl_groups(d, (uint32_t)groups)) != 0)
		return rc;
	return innet_routes_decl_table(d, FWD_T_ROUTES);
}

static int fwd_init(struct innet_cp *cp, void *priv)
{
	struct fwd_setup *s = priv;
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	for (uint32_t i = 0; i < INNET_MAX_PORTS; i++) {
		if (s->map[i] == 0)
			continue;
		if (s->map[i] - 1u >= n_ports || i >= n_ports)
			return innet_cp_init_error(cp, "map entry %u -> %u names a port this switch "
						       "does not have (%u ports)", i, s->map[i] - 1u, n_ports);
		innet_cp_reg_write(cp, FWD_R_PORT_MAP, i, s->map[i]);
	}
	return innet_routes_install(cp, FWD_T_ROUTES, &s->routes);
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
	.handle = innet_dp_forward_handle,
};

INNET_PROGRAM_REGISTER(innet_prog_forward)
