/*
 * acceptor.c — a Paxos acceptor as a switch program (Trio, SERIAL).
 *
 * State: a ring of `ring` slots; instance i lives in slot i % ring. Each slot
 * holds (registers, one element per slot):
 *
 *   inst    i + 1 of the instance stored there (0 = never used)
 *   rnd     the highest ballot promised for it
 *   vrnd    the ballot of the vote (0 = not voted)
 *   vlen, req, value   the voted value (up to PAXOS_VALUE_MAX bytes)
 *
 * plus global registers: promised (a phase-1 promise covering every
 * instance, from a 1A with PAXOS_F_RANGE), trim (every instance below it was
 * delivered by every learner), hi (1 + highest instance a 2A named, voted or
 * refused as ring_full: learners recover up to it), and lwm[]
 * (each learner's reported watermark; trim = min of them).
 *
 * The ring rule: an instance i is accepted only in the window
 * trim <= i < trim + ring. So a slot is reused for i only when its previous
 * occupant i - ring is below trim — delivered by every learner — and never
 * while undecided or untrimmed. Below the window: NACK/trimmed; above it:
 * NACK/ring_full (the proposer retries after learners trim).
 *
 *   2A(b, i, v): b >= max(rnd[i], promised) -> rnd = vrnd = b, value = v;
 *                2B to the learner group (group 0). Else NACK/ballot.
 *   1A(b, i):    b >= max(rnd[i], promised) -> rnd = b (promised = b with
 *                RANGE); 1B back with vrnd and value. Else NACK/ballot.
 *   RECOVER(i):  2B back with the vote (status empty if none).
 *   TRIM(l, w):  lwm[l] = max(lwm[l], w); trim = max(trim, min(lwm)).
 *
 * Why Trio and SERIAL: a vote spans several registers (rnd, vrnd, value up to
 * PAXOS_VALUE_MAX = INNET_PKT_MAX - 56 bytes: over a thousand register words). That is far beyond a PISA pass (48
 * stateful operations) and beyond any Tofino SRAM word, whereas a Trio PFE
 * thread runs to completion over shared memory. The invariant "value and
 * vrnd change together, only if b >= rnd" spans those registers, so all of an
 * acceptor's packets are handled by one worker (INNET_PROG_SERIAL) rather
 * than a per-slot version with CAS: a CAS-locked slot would need a retry loop
 * (unbounded, not allowed in a handler) or a drop on contention. It costs
 * nothing in the common case: all 2As come from the coordinator, one flow,
 * which the runtime would put on one worker anyway.
 *
 * Anti-spoofing: with "check_peer" (default true) a packet must come from the
 * peer address of the port it arrived on — the node at the other end of that
 * link (uRPF-style); others are dropped as "spoofed".
 *
 * Restart with lost state ("join": true): an acceptor that comes back empty
 * may have voted or promised before it died; answering as if it had not
 * could let two values be chosen. It therefore starts silent: every 1A, 2A
 * and RECOVER gets NACK/joining (it votes, promises and reports nothing).
 * The control plane completes the join (docs/consensus.md, "Acceptor
 * restart") by writing join_inst J and join_ballot JB, then joining = 0;
 * from then on instances below J still get NACK/joining (it may have voted
 * there) and ballots below JB are refused as if promised (it may have
 * promised them).
 *
 * Settings: "id" (0..63, this acceptor's id, required), "ring" (slots,
 * default 1024), "learners" ([port, ...]: the 2B group), "learner_udp" (UDP
 * port of learners, default 34953), "trim_learners" (how many learner ids
 * report watermarks; default: the number of learner ports), "check_peer",
 * "join" (start silent, as above; default false).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "consensus/wire.h"

enum { R_INST, R_RND, R_VRND, R_VLEN, R_REQ, R_VALUE, R_PROMISED, R_TRIM, R_HI, R_LWM,
       R_JOINING, R_JOIN_INST, R_JOIN_BALLOT };

enum acc_drop {
	AC_TOO_SHORT = INNET_DROP_PROGRAM,
	AC_BAD_MAGIC,
	AC_BAD_VERSION,
	AC_WRONG_SERVICE,
	AC_BAD_LENGTH,
	AC_UNEXPECTED_TYPE,
	AC_SPOOFED,
	AC_BAD_LEARNER,
	AC_BAD_BALLOT,
};

static const char *const acc_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "bad_length",
	"unexpected_type", "spoofed", "bad_learner", "bad_ballot",
};

#define ACC_MAX_LEARNERS 64u

struct acc_conf {
	uint16_t id;
	uint32_t ring;
	uint16_t learners[INNET_MAX_GROUP_MEMBERS];
	uint32_t n_learners;
	uint16_t learner_udp;
	uint32_t trim_learners;
	bool check_peer;
	bool join;
};

static void swap_nodes(struct innet_hdr *h)
{
	uint16_t s = h->src_node;
	h->src_node = h->dst_node;
	h->dst_node = s;
}

/* Turn the packet into a NACK back to its sender. */
static enum innet_action nack(struct innet_ctx *ctx, struct innet_pkt *pkt, uint8_t status,
			      uint32_t ballot, uint64_t trim)
{
	const struct acc_conf *c = innet_conf(ctx);
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	p->type = PAXOS_NACK;
	p->status = status;
	p->node = htons(c->id);
	p->ballot = htonl(ballot);
	p->vballot = 0;
	p->vlen = 0;
	p->trim = htobe64(trim);
	p->hi = htobe64(innet_reg_read(ctx, R_HI, 0));
	swap_nodes(h);
	pkt->len = PAXOS_HDR_LEN;
	innet_alu(ctx, 6);
	return innet_reflect(pkt);
}

/* Fill the reply with slot's vote (vballot, req, value); status EMPTY if none. */
static int put_vote(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t slot, bool fresh)
{
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	uint32_t vrnd = fresh ? 0 : (uint32_t)innet_reg_read(ctx, R_VRND, slot);
	uint32_t vlen = 0;
	p->req_id = 0;
	if (vrnd != 0) {
		vlen = (uint32_t)innet_reg_read(ctx, R_VLEN, slot);
		if (vlen > PAXOS_VALUE_MAX)
			vlen = 0; /* cannot happen: written only from checked packets */
		p->req_id = htobe64(innet_reg_read(ctx, R_REQ, slot));
	}
	if (innet_pkt_resize(ctx, pkt, PAXOS_HDR_LEN + vlen) != 0)
		return -1;
	if (vlen > 0)
		innet_reg_read_bytes(ctx, R_VALUE, slot, pkt->data + PAXOS_HDR_LEN, vlen);
	p->status = vrnd != 0 ? PAXOS_OK : PAXOS_ST_EMPTY;
	p->vballot = htonl(vrnd);
	p->vlen = htons((uint16_t)vlen);
	return 0;
}

static enum innet_action acc_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct acc_conf *c = innet_conf(ctx);
	if (pkt->len < PAXOS_HDR_LEN)
		return innet_drop(pkt, AC_TOO_SHORT);
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, AC_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, AC_BAD_VERSION);
	if (h->service != INNET_SVC_PAXOS)
		return innet_drop(pkt, AC_WRONG_SERVICE);
	uint8_t type = p->type;
	if (type != PAXOS_2A && type != PAXOS_1A && type != PAXOS_RECOVER && type != PAXOS_TRIM)
		return innet_drop(pkt, AC_UNEXPECTED_TYPE);
	uint32_t vlen = ntohs(p->vlen);
	if (vlen > PAXOS_VALUE_MAX || pkt->len != PAXOS_HDR_LEN + vlen ||
	    (type != PAXOS_2A && vlen != 0))
		return innet_drop(pkt, AC_BAD_LENGTH);
	if (c->check_peer && pkt->src.ip != innet_port_peer_ip(ctx, pkt->in_port))
		return innet_drop(pkt, AC_SPOOFED);
	innet_alu(ctx, 10);

	uint64_t trim = innet_reg_read(ctx, R_TRIM, 0);
	if (type == PAXOS_TRIM) {
		uint16_t l = ntohs(p->node);
		if (l >= c->trim_learners)
			return innet_drop(pkt, AC_BAD_LEARNER);
		innet_reg_fetch_max(ctx, R_LWM, l, be64toh(p->trim));
		uint64_t min = UINT64_MAX;
		for (uint32_t i = 0; i < c->trim_learners && i < ACC_MAX_LEARNERS; i++) {
			uint64_t w = innet_reg_read(ctx, R_LWM, i);
			min = w < min ? w : min;
		}
		innet_alu(ctx, c->trim_learners);
		uint64_t before = innet_reg_fetch_max(ctx, R_TRIM, 0, min);
		p->trim = htobe64(before > min ? before : min);
		p->hi = htobe64(innet_reg_read(ctx, R_HI, 0));
		p->node = htons(c->id);
		p->status = PAXOS_OK;
		swap_nodes(h);
		return innet_reflect(pkt);
	}

	uint64_t inst = be64toh(p->instance);
	uint32_t ballot = ntohl(p->ballot);
	if (inst < trim)
		return nack(ctx, pkt, PAXOS_ST_TRIMMED, 0, trim);
	if (innet_reg_read(ctx, R_JOINING, 0) != 0 || inst < innet_reg_read(ctx, R_JOIN_INST, 0))
		return nack(ctx, pkt, PAXOS_ST_JOINING, 0, trim);
	bool in_window = inst - trim < c->ring;
	uint32_t slot = (uint32_t)(inst % c->ring);
	bool fresh = true;
	if (in_window)
		fresh = innet_reg_read(ctx, R_INST, slot) != inst + 1;

	if (type == PAXOS_RECOVER) {
		if (put_vote(ctx, pkt, slot, fresh || !in_window) != 0)
			return INNET_DROP;
		p->type = PAXOS_2B;
		p->node = htons(c->id);
		p->ballot = p->vballot;
		p->trim = htobe64(trim);
		p->hi = htobe64(innet_reg_read(ctx, R_HI, 0));
		swap_nodes(h);
		return innet_reflect(pkt);
	}

	if (ballot == 0)
		return innet_drop(pkt, AC_BAD_BALLOT);
	uint32_t promised = (uint32_t)innet_reg_read(ctx, R_PROMISED, 0);
	uint32_t join_ballot = (uint32_t)innet_reg_read(ctx, R_JOIN_BALLOT, 0);
	promised = join_ballot > promised ? join_ballot : promised;
	if (!in_window) {
		/* No slot for it yet. A leader's range promise needs none: nothing
		 * was voted there. Everything else waits for trim. */
		if (type == PAXOS_1A && (h->flags & PAXOS_F_RANGE) && ballot >= promised) {
			innet_reg_fetch_max(ctx, R_PROMISED, 0, ballot);
			put_vote(ctx, pkt, slot, true);
			goto reply_1b;
		}
		/* Remember that the instance exists, so learners fill the holes
		 * the coordinator leaves behind refused 2As (with no-ops) once the
		 * window moves. */
		if (type == PAXOS_2A)
			innet_reg_fetch_max(ctx, R_HI, 0, inst + 1);
		return nack(ctx, pkt, PAXOS_ST_RING_FULL, 0, trim);
	}
	if (!fresh) {
		uint32_t rnd = (uint32_t)innet_reg_read(ctx, R_RND, slot);
		promised = rnd > promised ? rnd : promised;
	}
	if (ballot < promised)
		return nack(ctx, pkt, PAXOS_ST_BALLOT, promised, trim);
	if (fresh) {
		/* The previous occupant (inst - ring) is below trim: reuse. */
		innet_reg_write(ctx, R_INST, slot, inst + 1);
		innet_reg_write(ctx, R_VRND, slot, 0);
		innet_reg_write(ctx, R_VLEN, slot, 0);
		innet_reg_write(ctx, R_REQ, slot, 0);
	}
	innet_reg_write(ctx, R_RND, slot, ballot);
	if (type == PAXOS_1A) {
		if (h->flags & PAXOS_F_RANGE)
			innet_reg_fetch_max(ctx, R_PROMISED, 0, ballot);
		if (put_vote(ctx, pkt, slot, false) != 0)
			return INNET_DROP;
	reply_1b:
		p->type = PAXOS_1B;
		p->node = htons(c->id);
		p->ballot = htonl(ballot);
		p->trim = htobe64(trim);
		p->hi = htobe64(innet_reg_read(ctx, R_HI, 0));
		swap_nodes(h);
		return innet_reflect(pkt);
	}

	/* 2A: vote. */
	innet_reg_write(ctx, R_VRND, slot, ballot);
	innet_reg_write(ctx, R_VLEN, slot, vlen);
	innet_reg_write(ctx, R_REQ, slot, be64toh(p->req_id));
	if (vlen > 0)
		innet_reg_write_bytes(ctx, R_VALUE, slot, pkt->data + PAXOS_HDR_LEN, vlen);
	uint64_t hi = innet_reg_fetch_max(ctx, R_HI, 0, inst + 1);
	p->type = PAXOS_2B;
	p->status = PAXOS_OK;
	p->node = htons(c->id);
	p->vballot = htonl(ballot);
	p->trim = htobe64(trim);
	p->hi = htobe64(hi > inst + 1 ? hi : inst + 1);
	h->flags = 0;
	innet_alu(ctx, 8);
	return innet_multicast(pkt, 0);
}

static int acc_setup(struct innet_decl *d, struct innet_args *a)
{
	struct acc_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	innet_decl_priv(d, c);
	uint64_t id, ring, udp, tl, ports[INNET_MAX_GROUP_MEMBERS];
	int rc;
	if ((rc = innet_args_u64(a, "id", UINT64_MAX, 0, UINT64_MAX, &id)) != 0)
		return rc;
	if (id == UINT64_MAX)
		return innet_decl_error(d, "setting 'id' (this acceptor's id, 0..%u) is required",
					PAXOS_MAX_ACCEPTORS - 1);
	if (id >= PAXOS_MAX_ACCEPTORS)
		return innet_decl_error(d, "setting 'id' = %lu is out of range [0, %u]",
					(unsigned long)id, PAXOS_MAX_ACCEPTORS - 1);
	if ((rc = innet_args_u64(a, "ring", 1024, 1, 65536, &ring)) != 0 ||
	    (rc = innet_args_u64(a, "learner_udp", 34953, 1, 65535, &udp)) != 0 ||
	    (rc = innet_args_u64_array(a, "learners", ports, INNET_MAX_GROUP_MEMBERS,
				       &c->n_learners)) != 0 ||
	    (rc = innet_args_bool(a, "check_peer", true, &c->check_peer)) != 0 ||
	    (rc = innet_args_bool(a, "join", false, &c->join)) != 0)
		return rc;
	for (uint32_t i = 0; i < c->n_learners; i++) {
		if (ports[i] >= INNET_MAX_PORTS)
			return innet_decl_error(d, "learners[%u] = %lu is not a port number", i,
						(unsigned long)ports[i]);
		c->learners[i] = (uint16_t)ports[i];
	}
	if ((rc = innet_args_u64(a, "trim_learners", c->n_learners ? c->n_learners : 1, 1,
				 ACC_MAX_LEARNERS, &tl)) != 0)
		return rc;
	c->id = (uint16_t)id;
	c->ring = (uint32_t)ring;
	c->learner_udp = (uint16_t)udp;
	c->trim_learners = (uint32_t)tl;
	if ((rc = innet_decl_reg(d, R_INST, "inst", 8, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_RND, "rnd", 4, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_VRND, "vrnd", 4, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_VLEN, "vlen", 2, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_REQ, "req", 8, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_VALUE, "value", PAXOS_VALUE_MAX, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, R_PROMISED, "promised", 4, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_TRIM, "trim", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_HI, "hi", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_LWM, "lwm", 8, c->trim_learners)) != 0 ||
	    (rc = innet_decl_reg(d, R_JOINING, "joining", 1, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_JOIN_INST, "join_inst", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, R_JOIN_BALLOT, "join_ballot", 4, 1)) != 0)
		return rc;
	return innet_decl_groups(d, 1);
}

static int acc_init(struct innet_cp *cp, void *priv)
{
	struct acc_conf *c = priv;
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	for (uint32_t i = 0; i < c->n_learners; i++) {
		if (c->learners[i] >= n_ports) {
			fprintf(stderr, "innet: program '%s': learner port %u does not exist (%u ports)\n",
				innet_cp_name(cp), c->learners[i], n_ports);
			return -EINVAL;
		}
		m[i] = (struct innet_member){ .port = c->learners[i], .udp = c->learner_udp };
	}
	int rc = innet_cp_reg_write(cp, R_JOINING, 0, c->join ? 1 : 0);
	if (rc != 0)
		return rc;
	return innet_cp_group_set(cp, 0, m, c->n_learners);
}

const struct innet_program innet_prog_paxos_acceptor = {
	.name = "paxos_acceptor",
	.summary = "Paxos acceptor: ballots and votes in a ring of slots, reused only below the learners' trim",
	.model = INNET_MODEL_TRIO,
	.flags = INNET_PROG_SERIAL,
	.parse_bytes = PAXOS_HDR_LEN,
	.drop_reasons = acc_drop_names,
	.n_drop_reasons = sizeof(acc_drop_names) / sizeof(acc_drop_names[0]),
	.setup = acc_setup,
	.init = acc_init,
	.handle = acc_handle,
};
