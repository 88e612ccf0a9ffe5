/*
 * coordinator.c — the Paxos coordinator as a switch program (PISA), as in
 * P4xos: it turns each client REQUEST into a phase-2A message by stamping it
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
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "consensus/wire.h"

enum { R_NEXT, R_BALLOT };

enum coord_drop {
	CO_TOO_SHORT = INNET_DROP_PROGRAM,
	CO_BAD_MAGIC,
	CO_BAD_VERSION,
	CO_WRONG_SERVICE,
	CO_BAD_LENGTH,
	CO_BAD_REQUEST,
	CO_UNEXPECTED_TYPE,
	CO_NACKED,
};

static const char *const coord_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service",
	"bad_length", "bad_request", "unexpected_type", "nacked",
};

struct coord_conf {
	uint16_t acceptors[INNET_MAX_GROUP_MEMBERS];
	uint32_t n_acceptors;
	uint32_t ballot;
	uint64_t next;
};

static enum innet_action coord_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	if (pkt->len < PAXOS_HDR_LEN)
		return innet_drop(pkt, CO_TOO_SHORT);
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, CO_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, CO_BAD_VERSION);
	if (h->service != INNET_SVC_PAXOS)
		return innet_drop(pkt, CO_WRONG_SERVICE);
	if (p->type == PAXOS_NACK)
		return innet_drop(pkt, CO_NACKED);
	if (p->type != PAXOS_REQUEST)
		return innet_drop(pkt, CO_UNEXPECTED_TYPE);
	uint32_t vlen = ntohs(p->vlen);
	if (pkt->len != PAXOS_HDR_LEN + vlen)
		return innet_drop(pkt, CO_BAD_LENGTH);
	if (p->req_id == 0)
		return innet_drop(pkt, CO_BAD_REQUEST);
	innet_alu(ctx, 8);
	if (vlen > PAXOS_VALUE_MAX) {
		/* A clear error rather than a silent drop: the value is too big
		 * for an acceptor slot. */
		p->type = PAXOS_NACK;
		p->status = PAXOS_ST_TOO_BIG;
		p->vlen = 0;
		uint16_t s = h->src_node;
		h->src_node = h->dst_node;
		h->dst_node = s;
		pkt->len = PAXOS_HDR_LEN;
		return innet_reflect(pkt);
	}
	uint64_t inst = innet_reg_fetch_add(ctx, R_NEXT, 0, 1);
	uint32_t ballot = (uint32_t)innet_reg_read(ctx, R_BALLOT, 0);
	p->type = PAXOS_2A;
	p->status = PAXOS_OK;
	p->node = 0;
	p->ballot = htonl(ballot);
	p->vballot = 0;
	p->reserved = 0;
	p->instance = htobe64(inst);
	p->trim = 0;
	p->hi = 0;
	h->flags = 0;
	innet_alu(ctx, 8);
	return innet_multicast(pkt, 0);
}

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
	if ((rc = innet_decl_reg(d, R_NEXT, "next", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_BALLOT, "ballot", 4, 1)) != 0)
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
			fprintf(stderr, "innet: program '%s': acceptor port %u does not exist (%u ports)\n",
				innet_cp_name(cp), c->acceptors[i], n_ports);
			return -EINVAL;
		}
		m[i] = (struct innet_member){ .port = c->acceptors[i] };
	}
	int rc = innet_cp_group_set(cp, 0, m, c->n_acceptors);
	if (rc == 0)
		rc = innet_cp_reg_write(cp, R_NEXT, 0, c->next);
	if (rc == 0)
		rc = innet_cp_reg_write(cp, R_BALLOT, 0, c->ballot);
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
	.handle = coord_handle,
};
