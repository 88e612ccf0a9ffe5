/*
 * acceptor_dp.c — the Paxos acceptor's data path (Trio, SERIAL): ballots and
 * votes in a ring of slots, reused only below the learners' trim. The
 * control source is acceptor.c (settings, registers, the learner group, the
 * join flag); its header comment is the program's description, and
 * docs/consensus.md the protocol.
 *
 * Per packet (each message is the innet header + struct paxos_hdr + value):
 *
 *   checks       too_short, bad_magic, bad_version, wrong_service,
 *                unexpected_type, bad_length, spoofed
 *   TRIM         lwm[l] = max(lwm[l], w); trim = max(trim, min(lwm)); reply
 *   below trim   NACK/trimmed
 *   joining      NACK/joining (silent restart, or instance < join_inst)
 *   READ         READ_ACK back with the read bound max(hi, join_inst), or
 *                status joining (no state changes: a read round's answer)
 *   RECOVER(i)   2B back with the slot's vote (status empty if none)
 *   1A / 2A      ballot 0: bad_ballot; outside the window: NACK/ring_full
 *                (a range 1A is promised anyway); ballot below the promise:
 *                NACK/ballot; else promise (1B with the vote) or vote (2B to
 *                the learner group)
 *
 * Values travel between the packet and a slot's blob register with
 * innet_pkt_to_reg / innet_reg_to_pkt (variable length, bounded by the
 * register's width). A reply carrying a vote (1B, 2B answering RECOVER) is
 * sized before any state changes: where the packet cannot grow that far in
 * place — on XDP, a value longer than one XDP buffer holds — the handler
 * passes the packet up untouched (innet_pass_up) and the user-space engine
 * runs it again natively.
 */
#include "innet/dp.h"
#include "consensus/acceptor.h"
#include "consensus/wire.h"

static void swap_nodes(struct innet_hdr *h)
{
	uint16_t s = h->src_node;
	h->src_node = h->dst_node;
	h->dst_node = s;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Turn the packet into a NACK back to its sender. */
static enum innet_action nack(struct innet_ctx *ctx, struct innet_pkt *pkt, uint8_t status,
			      uint32_t ballot, uint64_t trim)
{
	const struct acc_conf *c = innet_conf(ctx);
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, PAXOS_HDR_LEN);
	if (h == NULL)
		return INNET_DROP; /* cannot happen: checked by the caller */
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	p->type = PAXOS_NACK;
	p->status = status;
	p->node = innet_be16(c->id);
	p->ballot = innet_be32(ballot);
	p->vballot = 0;
	p->vlen = 0;
	p->trim = innet_be64(trim);
	p->hi = innet_be64(innet_reg_read(ctx, ACC_R_HI, 0));
	swap_nodes(h);
	innet_pkt_resize(ctx, pkt, PAXOS_HDR_LEN);
	innet_alu(ctx, 3); /* the window and the slot, on most paths here */
	return innet_reflect(pkt);
}

/* A slot's vote, as a reply reports it. */
struct acc_vote {
	uint32_t vrnd;   /* 0: nothing voted */
	uint32_t vlen;
};

/* The vote held in slot into *v (none if the slot does not hold the
 * instance). */
static void vote_get(struct innet_ctx *ctx, uint32_t slot, bool fresh, struct acc_vote *v)
{
	v->vrnd = fresh ? 0 : (uint32_t)innet_reg_read(ctx, ACC_R_VRND, slot);
	v->vlen = 0;
	if (v->vrnd != 0) {
		v->vlen = (uint32_t)innet_reg_read(ctx, ACC_R_VLEN, slot);
		if (v->vlen > PAXOS_VALUE_MAX)
			v->vlen = 0; /* cannot happen: written only from checked packets */
	}
}

/* Fill the reply (already sized PAXOS_HDR_LEN + v.vlen) with slot's vote:
 * status (OK, or EMPTY if none), vballot, vlen, req_id and the value. The
 * reply's headers, or NULL (the packet faulted). */
static struct innet_hdr *vote_put(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t slot,
				  const struct acc_vote *v)
{
	if (v->vlen > 0)
		innet_reg_to_pkt(ctx, ACC_R_VALUE, slot, pkt, PAXOS_HDR_LEN, v->vlen);
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, PAXOS_HDR_LEN);
	if (h == NULL)
		return NULL;
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	p->req_id = v->vrnd != 0 ? innet_be64(innet_reg_read(ctx, ACC_R_REQ, slot)) : 0;
	p->status = v->vrnd != 0 ? PAXOS_OK : PAXOS_ST_EMPTY;
	p->vballot = innet_be32(v->vrnd);
	p->vlen = innet_be16((uint16_t)v->vlen);
	return h;
}

/* The common fields of a reply back to the sender (1B, 2B, TRIM). */
static enum innet_action reply(struct innet_ctx *ctx, struct innet_pkt *pkt, struct innet_hdr *h,
			       uint8_t type, uint64_t trim)
{
	const struct acc_conf *c = innet_conf(ctx);
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	p->type = type;
	p->node = innet_be16(c->id);
	p->trim = innet_be64(trim);
	p->hi = innet_be64(innet_reg_read(ctx, ACC_R_HI, 0));
	swap_nodes(h);
	return innet_reflect(pkt);
}

/* A promise (1B for ballot) back to the proposer, the slot's vote already
 * in the reply (vote_put). */
static enum innet_action promise(struct innet_ctx *ctx, struct innet_pkt *pkt, struct innet_hdr *h,
				 uint32_t ballot, uint64_t trim)
{
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	p->ballot = innet_be32(ballot);
	return reply(ctx, pkt, h, PAXOS_1B, trim);
}

/* TRIM(l, w) from learner l: its watermark, and the acceptor's trim back. */
static enum innet_action acc_trim(struct innet_ctx *ctx, struct innet_pkt *pkt, struct innet_hdr *h)
{
	const struct acc_conf *c = innet_conf(ctx);
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	uint16_t l = innet_be16(p->node);
	if (l >= c->trim_learners)
		return innet_drop(pkt, AC_BAD_LEARNER);
	innet_reg_fetch_max(ctx, ACC_R_LWM, l, innet_be64(p->trim));
	uint64_t min = UINT64_MAX;
	for (uint32_t i = 0; i < ACC_MAX_LEARNERS; i++) {
		if (i >= c->trim_learners)
			break;
		uint64_t w = innet_reg_read(ctx, ACC_R_LWM, i);
		min = w < min ? w : min;
	}
	innet_alu(ctx, c->trim_learners);
	uint64_t before = innet_reg_fetch_max(ctx, ACC_R_TRIM, 0, min);
	p->status = PAXOS_OK;
	return reply(ctx, pkt, h, PAXOS_TRIM, max_u64(before, min));
}

/* READ from a learner (a read round): READ_ACK with this acceptor's read
 * bound, max(hi, join_inst) — above every instance it ever voted in, also
 * across a restart (its join instance is above those: docs/consensus.md,
 * "Acceptor restart") — or status joining while it is silent. Changes
 * nothing. */
static enum innet_action acc_read(struct innet_ctx *ctx, struct innet_pkt *pkt, struct innet_hdr *h,
				  uint64_t trim)
{
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	uint64_t bound = 0;
	p->status = PAXOS_OK;
	if (innet_reg_read(ctx, ACC_R_JOINING, 0) != 0)
		p->status = PAXOS_ST_JOINING;
	else
		bound = max_u64(innet_reg_read(ctx, ACC_R_HI, 0),
				innet_reg_read(ctx, ACC_R_JOIN_INST, 0));
	p->ballot = 0;
	p->vballot = 0;
	p->reserved = 0;
	p->instance = innet_be64(bound);
	h->flags = 0;
	innet_alu(ctx, 4);
	return reply(ctx, pkt, h, PAXOS_READ_ACK, trim);
}

static enum innet_action acc_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct acc_conf *c = innet_conf(ctx);
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, PAXOS_HDR_LEN);
	if (h == NULL)
		return innet_drop(pkt, AC_TOO_SHORT);
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, AC_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, AC_BAD_VERSION);
	if (h->service != INNET_SVC_PAXOS)
		return innet_drop(pkt, AC_WRONG_SERVICE);
	uint8_t type = p->type;
	if (type != PAXOS_2A && type != PAXOS_1A && type != PAXOS_RECOVER && type != PAXOS_TRIM &&
	    type != PAXOS_READ)
		return innet_drop(pkt, AC_UNEXPECTED_TYPE);
	uint32_t vlen = innet_be16(p->vlen);
	if (vlen > PAXOS_VALUE_MAX || pkt->len != PAXOS_HDR_LEN + vlen ||
	    (type != PAXOS_2A && vlen != 0))
		return innet_drop(pkt, AC_BAD_LENGTH);
	if (c->check_peer && pkt->src.ip != innet_port_peer_ip(ctx, pkt->in_port))
		return innet_drop(pkt, AC_SPOOFED);
	innet_alu(ctx, 3);

	uint64_t trim = innet_reg_read(ctx, ACC_R_TRIM, 0);
	if (type == PAXOS_TRIM)
		return acc_trim(ctx, pkt, h);
	if (type == PAXOS_READ)
		return acc_read(ctx, pkt, h, trim);

	uint64_t inst = innet_be64(p->instance);
	uint32_t ballot = innet_be32(p->ballot);
	bool range = (h->flags & PAXOS_F_RANGE) != 0;
	if (inst < trim)
		return nack(ctx, pkt, PAXOS_ST_TRIMMED, 0, trim);
	if (innet_reg_read(ctx, ACC_R_JOINING, 0) != 0 ||
	    inst < innet_reg_read(ctx, ACC_R_JOIN_INST, 0))
		return nack(ctx, pkt, PAXOS_ST_JOINING, 0, trim);
	bool in_window = inst - trim < c->ring;
	uint32_t slot = (uint32_t)(inst % c->ring);
	bool fresh = true;
	if (in_window)
		fresh = innet_reg_read(ctx, ACC_R_INST, slot) != inst + 1;

	if (type == PAXOS_RECOVER) {
		struct acc_vote v;
		vote_get(ctx, slot, fresh || !in_window, &v);
		if (innet_pkt_try_resize(ctx, pkt, PAXOS_HDR_LEN + v.vlen) != 0)
			return innet_pass_up(ctx, pkt);
		if ((h = vote_put(ctx, pkt, slot, &v)) == NULL)
			return INNET_DROP;
		p = (struct paxos_hdr *)(h + 1);
		p->ballot = p->vballot;
		innet_alu(ctx, 10); /* the window, the slot, the reply's length */
		return reply(ctx, pkt, h, PAXOS_2B, trim);
	}

	if (ballot == 0) {
		innet_alu(ctx, 5); /* the window, the slot */
		return innet_drop(pkt, AC_BAD_BALLOT);
	}
	uint32_t promised = (uint32_t)innet_reg_read(ctx, ACC_R_PROMISED, 0);
	uint32_t join_ballot = (uint32_t)innet_reg_read(ctx, ACC_R_JOIN_BALLOT, 0);
	promised = join_ballot > promised ? join_ballot : promised;
	if (!in_window) {
		/* No slot for it yet. A leader's range promise needs none: nothing
		 * was voted there (the 1B says empty). Everything else waits for
		 * trim. */
		if (type == PAXOS_1A && range && ballot >= promised) {
			innet_reg_fetch_max(ctx, ACC_R_PROMISED, 0, ballot);
			struct acc_vote none = { 0, 0 };
			if ((h = vote_put(ctx, pkt, slot, &none)) == NULL)
				return INNET_DROP;
			innet_alu(ctx, 5); /* the window, the slot */
			return promise(ctx, pkt, h, ballot, trim);
		}
		/* Remember that the instance exists, so learners fill the holes
		 * the coordinator leaves behind refused 2As (with no-ops) once the
		 * window moves. */
		if (type == PAXOS_2A)
			innet_reg_fetch_max(ctx, ACC_R_HI, 0, inst + 1);
		return nack(ctx, pkt, PAXOS_ST_RING_FULL, 0, trim);
	}
	if (!fresh) {
		uint32_t rnd = (uint32_t)innet_reg_read(ctx, ACC_R_RND, slot);
		promised = rnd > promised ? rnd : promised;
	}
	if (ballot < promised)
		return nack(ctx, pkt, PAXOS_ST_BALLOT, promised, trim);

	/* A 1B carries the slot's vote: size the reply before promising (the
	 * packet goes up untouched if it cannot be that long here). A fresh
	 * slot has none. */
	struct acc_vote v = { 0, 0 };
	if (type == PAXOS_1A) {
		vote_get(ctx, slot, fresh, &v);
		if (innet_pkt_try_resize(ctx, pkt, PAXOS_HDR_LEN + v.vlen) != 0)
			return innet_pass_up(ctx, pkt);
		if ((h = innet_pkt_ptr(pkt, 0, PAXOS_HDR_LEN)) == NULL)
			return INNET_DROP;
		p = (struct paxos_hdr *)(h + 1);
	}
	if (fresh) {
		/* The previous occupant (inst - ring) is below trim: reuse. */
		innet_reg_write(ctx, ACC_R_INST, slot, inst + 1);
		innet_reg_write(ctx, ACC_R_VRND, slot, 0);
		innet_reg_write(ctx, ACC_R_VLEN, slot, 0);
		innet_reg_write(ctx, ACC_R_REQ, slot, 0);
	}
	innet_reg_write(ctx, ACC_R_RND, slot, ballot);
	if (type == PAXOS_1A) {
		if (range)
			innet_reg_fetch_max(ctx, ACC_R_PROMISED, 0, ballot);
		if ((h = vote_put(ctx, pkt, slot, &v)) == NULL)
			return INNET_DROP;
		innet_alu(ctx, 10); /* the window, the slot, the reply's length */
		return promise(ctx, pkt, h, ballot, trim);
	}

	/* 2A: vote. */
	innet_reg_write(ctx, ACC_R_VRND, slot, ballot);
	innet_reg_write(ctx, ACC_R_VLEN, slot, vlen);
	innet_reg_write(ctx, ACC_R_REQ, slot, innet_be64(p->req_id));
	if (vlen > 0)
		innet_pkt_to_reg(ctx, pkt, PAXOS_HDR_LEN, ACC_R_VALUE, slot, vlen);
	uint64_t hi = max_u64(innet_reg_fetch_max(ctx, ACC_R_HI, 0, inst + 1), inst + 1);
	p->type = PAXOS_2B;
	p->status = PAXOS_OK;
	p->node = innet_be16(c->id);
	p->vballot = innet_be32(ballot);
	p->trim = innet_be64(trim);
	p->hi = innet_be64(hi);
	h->flags = 0;
	innet_alu(ctx, 10); /* the window, the slot, inst + 1 */
	return innet_multicast(pkt, 0);
}

INNET_DATAPATH(paxos_acceptor, acc_handle, NULL)
