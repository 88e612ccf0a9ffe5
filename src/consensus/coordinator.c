/*
 * coordinator.c — the Paxos coordinator's control source (the handler is
 * coordinator_dp.c), a switch program (PISA) as in P4xos: it turns each client REQUEST into a phase-2A message by stamping it
 * with the next instance number and the current ballot, and multicasts it to
 * the acceptor group (group 0). It keeps no per-instance state: two
 * registers, read and fetch-added once per packet, which fits one Tofino
 * stage. That is why it is PISA: the packet in hand is all it touches.
 *
 * Phase 1 is not needed for the coordinator's own ballot as long as no lower
 * ballot was ever used (the initial coordinator) or a leader ran phase 1 for
 * it over every untrimmed instance and then wrote "ballot" and "next" (the
 * control plane: innet ctl reg write) — docs/consensus.md, failover.
 *
 * Settings:
 *   "acceptors": [port, ...]  egress ports of the acceptor group (group 0,
 *                              sent to each port's peer at the same UDP port)
 *   "ballot":    initial ballot (default 0x100: round 1, proposer id 0)
 *   "next":      first instance to hand out (default 0)
 *
 * Drops (counted): too_short, bad_magic, bad_version, wrong_service,
 * bad_length (len != headers + vlen), bad_request (req_id 0: no-ops come
 * from leaders, not clients), unexpected_type (anything but REQUEST),
 * nacked (an acceptor refused our ballot: a newer leader exists).
 * A value longer than PAXOS_VALUE_MAX is answered with NACK/too_big.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "consensus/coordinator.h"
#include "consensus/wire.h"

static const char *const coord_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service",
	"bad_length", "bad_request", "unexpected_type", "nacked",
};

/* Control-side state: the settings, until init writes them. */
struct coord_conf {
	uint16_t acceptors[INNET_MAX_GROUP_MEMBERS];
	uint32_t n_acceptors;
	uint32_t ballot;
	uint64_t next;
};

static int coord_setup(struct innet_decl *d, struct innet_args *a)
{
	struct coord_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	innet_decl_priv(d, c);
	uint64_t ports[INNET_MAX_GROUP_MEMBERS], ballot, next;
	int rc = innet_args_u64_array(a, "acceptors", ports, INNET_MAX_GROUP_MEMBERS, &c->n_acceptors);
	if (rc != 0)
		return rc;
	for (uint32_t i = 0; i < c->n_acceptors; i++) {
		if (ports[i] >= INNET_MAX_PORTS)
			return innet_decl_error(d, "acceptors[%u] = %lu is not a port number", i,
						(unsigned long)ports[i]);
		c->acceptors[i] = (uint16_t)ports[i];
	}
	if ((rc = innet_args_u64(a, "ballot", 0x100, 1, UINT32_MAX, &ballot)) != 0)
		return rc;
	if ((rc = innet_args_u64(a, "next", 0, 0, UINT64_MAX >> 1, &next)) != 0)
		return rc;
	c->ballot = (uint32_t)ballot;
	c->next = next;
	if ((rc = innet_decl_reg(d, CO_R_NEXT, "next", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, CO_R_BALLOT, "ballot", 4, 1)) != 0)
		return rc;
	return innet_decl_groups(d, 1);
}

static int coord_init(struct innet_cp *cp, void *priv)
{
	struct coord_conf *c = priv;
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	for (uint32_t i = 0; i < c->n_acceptors; i++) {
		if (c->acceptors[i] >= n_ports) {
			return innet_cp_init_error(cp, "acceptor port %u does not exist (%u ports)",
						   c->acceptors[i], n_ports);
		}
		m[i] = (struct innet_member){ .port = c->acceptors[i] };
	}
	int rc = innet_cp_group_set(cp, 0, m, c->n_acceptors);
	if (rc == 0)
		rc = innet_cp_reg_write(cp, CO_R_NEXT, 0, c->next);
	if (rc == 0)
		rc = innet_cp_reg_write(cp, CO_R_BALLOT, 0, c->ballot);
	return rc;
}

const struct innet_program innet_prog_paxos_coordinator = {
	.name = "paxos_coordinator",
	.summary = "Paxos coordinator (P4xos): stamp client requests with instance and ballot, 2A to acceptors",
	.model = INNET_MODEL_PISA,
	.parse_bytes = PAXOS_HDR_LEN,
	.drop_reasons = coord_drop_names,
	.n_drop_reasons = sizeof(coord_drop_names) / sizeof(coord_drop_names[0]),
	.setup = coord_setup,
	.init = coord_init,
	.handle = innet_dp_paxos_coordinator_handle,
};

INNET_PROGRAM_REGISTER(innet_prog_paxos_coordinator)
