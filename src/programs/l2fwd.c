/*
 * l2fwd.c — the control source of l2fwd (handler: l2fwd_dp.c), a layer-2
 * patch panel for raw ports (PISA): every Ethernet frame
 * that comes in on raw port i goes out, unchanged, on port map[i]. It is the
 * smallest real user of raw ports (docs/runtime.md, "Raw ports"), and what the
 * raw-port integration test (tests/integration/engine_raw_netns.sh) runs:
 *
 *   ie-a0 ──veth── ie-swa = raw port 0 ┐ l2fwd  ┌ raw port 1 = ie-swb ──veth── ie-b0
 *                                      └ map [1, 0] ┘
 *
 * The instance must be the switch's raw program ("raw": true in a topology,
 * `--program l2fwd@raw` on the command line); it needs no UDP port.
 *
 * Settings: "map": [E0, E1, ...] — the egress port of frames that arrive on
 * port 0, 1, ... (required; each a port of the switch; a port may map to
 * itself). Ports past the end of the array are not mapped: their frames are
 * dropped as "not_mapped".
 *
 * Registers (one 64-bit counter per switch port, `innet ctl reg`):
 *   rx_frames[p]  frames received on port p
 *   tx_frames[p]  frames forwarded out of port p
 *
 * Drops: "not_mapped" (ingress port without a map entry), "runt" (shorter
 * than an Ethernet header), "not_a_frame" (a UDP datagram, should the instance
 * also bind UDP ports).
 */
#include <errno.h>

#include "innet/program.h"
#include "programs/l2fwd.h"

static const char *const l2fwd_drop_names[] = {
	"not_mapped", "runt", "not_a_frame",
};

static int l2fwd_setup(struct innet_decl *d, struct innet_args *a)
{
	uint64_t map[INNET_MAX_PORTS];
	uint32_t n_map = 0, n_ports = innet_decl_n_ports(d);
	int rc = innet_args_u64_array(a, "map", map, INNET_MAX_PORTS, &n_map);
	if (rc != 0)
		return rc;
	if (n_map == 0)
		return innet_decl_error(d, "\"map\" is required: the egress port of each ingress "
					"port, e.g. [1, 0]");
	if (n_map > n_ports)
		return innet_decl_error(d, "\"map\" has %u entries but the switch has %u ports", n_map,
					n_ports);
	struct l2fwd_conf *c = innet_decl_conf(d, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < INNET_MAX_PORTS; i++)
		c->map[i] = L2_UNMAPPED;
	for (uint32_t i = 0; i < n_map; i++) {
		if (map[i] >= n_ports)
			return innet_decl_error(d, "map[%u] = %llu is not a port of the switch (%u ports)",
						i, (unsigned long long)map[i], n_ports);
		c->map[i] = (uint16_t)map[i];
	}
	if ((rc = innet_decl_reg(d, L2_R_RX, "rx_frames", 8, n_ports)) != 0)
		return rc;
	return innet_decl_reg(d, L2_R_TX, "tx_frames", 8, n_ports);
}

const struct innet_program innet_prog_l2fwd = {
	.name = "l2fwd",
	.summary = "raw ports: forward Ethernet frames by a static ingress->egress port map",
	.model = INNET_MODEL_PISA,
	.parse_bytes = L2_ETH_HDR_LEN,
	.drop_reasons = l2fwd_drop_names,
	.n_drop_reasons = sizeof(l2fwd_drop_names) / sizeof(l2fwd_drop_names[0]),
	.setup = l2fwd_setup,
	.handle = innet_dp_l2fwd_handle,
};

INNET_PROGRAM_REGISTER(innet_prog_l2fwd)
