/*
 * p4rt_pipe.h — the end of every generated P4 data path: simple_switch's
 * packet life around the generated parser, controls and deparser, and the
 * innet handler. Hand-written, the same for every program; what differs by
 * target is marked P4_XDP (docs/p4.md, "What goes to user space and why").
 *
 *   packet ─▶ parse ─▶ verify ─▶ ingress ─▶ traffic manager ─┬▶ egress ─▶ update, deparse ─▶ out
 *               ▲                             (clone I2E,     │   (clone E2E, mark_to_drop,
 *               │                              digest,         │    recirculate, truncate)
 *               └──── resubmit (the original) / recirculate (the deparsed copy):
 *                     innet's RECIRCULATE verdict, the next pass's state in scratch
 *
 * On the user-space engine the handler does all of it: every copy (multicast
 * member, clone) runs egress from the PHV ingress left, is deparsed into the
 * packet, sent with innet_emit, and the packet is restored for the next one.
 * On XDP the handler does what ends in one frame: unicast, drop, resubmit and
 * recirculation (tail calls, at most INNET_MAX_RECIRC). A clone, a multicast
 * group, or a deparse that grows the packet beyond its headroom goes to the
 * user-space engine with innet_hand_off — after ingress (at the traffic
 * manager) or after egress — carrying the PHV and flags, so that the engine
 * continues where XDP stopped and no pipeline runs twice on the same state.
 */
#ifndef INNET_P4RT_PIPE_H
#define INNET_P4RT_PIPE_H

/* Preserved fields (resubmit, recirculate, clone) serialized into s->hbuf
 * and back around a reset of the PHV. */
static void p4_restart(struct p4_st *s, uint32_t fl, uint32_t inst, uint32_t plen)
{
	uint32_t n = p4_flist_save(&s->phv, fl, s->hbuf);
	p4_zero(&s->phv, sizeof(s->phv));
	p4_flist_load(&s->phv, fl, s->hbuf, n);
	P4_SM_INSTANCE_TYPE(&s->phv) = inst;
	P4_SM_PACKET_LENGTH(&s->phv) = plen;
	s->plen = plen;
	s->ingress_len = plen;
}

static void p4_clear_flags(struct p4_st *s)
{
	s->exit = 0;
	s->assert_failed = 0;
	s->parser_loop = 0;
	s->clone = 0;
	s->clone_fl = 0;
	s->resubmit_fl = 0;
	s->recirc_fl = 0;
	s->digest = 0;
	s->trunc = 0;
}

/* A new packet's metadata (BMv2: metadata reset, standard metadata set). */
static P4_FN void p4_fresh(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	p4_zero(&s->phv, sizeof(s->phv));
	P4_SM_INGRESS_PORT(&s->phv) = pkt->in_port;
	P4_SM_PACKET_LENGTH(&s->phv) = pkt->len;
	P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_NORMAL;
#if P4_HAS_SM_INGRESS_TS
	{
		const struct p4_conf *cf = innet_conf(ctx);
		uint64_t now = innet_now(ctx), t0 = cf != (void *)0 ? cf->t0_ns : 0;
		P4_SM_INGRESS_TS(&s->phv) = now > t0 ? (now - t0) / 1000 : 0;
	}
#endif
	(void)ctx;
	s->plen = pkt->len;
	s->ingress_len = pkt->len;
	s->magic = P4_STATE_MAGIC;
}

/* Parser, verify_checksum and ingress on the packet in hand. */
static P4_FN void p4_ingress_pass(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	p4_clear_flags(s);
	p4_parse(ctx, pkt, s);
	if (s->parser_loop)
		return;
	p4_verify(ctx, pkt, s);
	p4_ingress(ctx, pkt, s);
	s->exit = 0;
}

/* The digest asked in ingress, to the ring (then forgotten: a hand-off must
 * not deliver it twice). */
static void p4_digest_out(struct innet_ctx *ctx, struct p4_st *s)
{
	if (s->digest == 0)
		return;
	uint32_t id = s->digest;
	s->digest = 0;
	uint32_t n = p4_digest_fill(&s->phv, id, s->rbuf);
	p4_ring_put(ctx, s, P4_RING_DIGEST, id, s->rbuf, n);
}

/* Egress on s->phv for the copy leaving by port (BMv2's egress thread). */
static P4_FN void p4_egress_pass(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
				 uint32_t port)
{
	s->eport = port;
	P4_SM_EGRESS_PORT(&s->phv) = port;
	P4_SM_EGRESS_SPEC(&s->phv) = P4_DROP_PORT_NUM + 1;
	P4_SM_PACKET_LENGTH(&s->phv) = s->plen_copy;
#if P4_HAS_SM_EGRESS_TS
	{
		const struct p4_conf *cf = innet_conf(ctx);
		uint64_t now = innet_now(ctx), t0 = cf != (void *)0 ? cf->t0_ns : 0;
		P4_SM_EGRESS_TS(&s->phv) = now > t0 ? (now - t0) / 1000 : 0;
	}
#endif
	s->exit = 0;
	s->clone = 0;
	s->clone_fl = 0;
	s->recirc_fl = 0;
	p4_egress(ctx, pkt, s);
	s->exit = 0;
}

/* The mirroring session's word (0: not configured). */
static uint64_t p4_session(struct innet_ctx *ctx, uint32_t sess)
{
	if (sess >= P4_MIRROR_SESSIONS)
		return 0;
	return innet_reg_read(ctx, P4R_WORDS, P4_MIRROR_WORD + sess);
}

#if P4_XDP
/* ------------------------------------------------------------------------ */
/* XDP                                                                        */

/* The frame deparsing will leave (the headers now hlen bytes, then any
 * truncate) is shorter than a MAC header: XDP cannot shrink a frame that far
 * and hands it to user space, whose transmit drops it for a real port
 * (short_frame, the engine's drop) and records it in an injection, as BMv2's
 * test port delivers it. */
static int p4_runt(const struct innet_pkt *pkt, const struct p4_st *s, uint32_t hlen)
{
	uint32_t len = pkt->len - s->parsed + hlen;
	if (s->trunc != 0 && s->trunc - 1 < len)
		len = s->trunc - 1;
	return len < INNET_FRAME_MIN;
}

static enum innet_action p4_handoff(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
				    uint8_t where)
{
	s->resume = where;
	return innet_hand_off(ctx, pkt, s, P4_HANDOFF_BYTES);
}

/* After egress: drop, deparse, recirculate or send. */
static enum innet_action p4_finish_xdp(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	if (s->clone & 0x80000000u)
		return p4_handoff(ctx, pkt, s, P4_RESUME_EGRESS);
	if (s->assert_failed)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_ASSERT);
	if (P4_SM_EGRESS_SPEC(&s->phv) == P4_DROP_PORT_NUM)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_EGRESS);
	uint32_t hlen = p4_hdr_len(s);
	/* more than the headroom, or less than a frame: user space finishes it */
	if ((hlen > s->parsed && hlen - s->parsed > pkt->headroom) || p4_runt(pkt, s, hlen))
		return p4_handoff(ctx, pkt, s, P4_RESUME_EGRESS);
	p4_update(ctx, pkt, s);
	if (hlen > s->parsed) {
		if (innet_pkt_push(ctx, pkt, hlen - s->parsed) != 0)
			return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_HEADROOM);
	} else if (hlen < s->parsed) {
		if (innet_pkt_pull(ctx, pkt, s->parsed - hlen) != 0)
			return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_COPY);
	}
	if (p4_emit_headers(pkt, s) != 0)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_COPY);
	s->parsed = hlen;
	if (s->trunc != 0 && s->trunc - 1 < pkt->len)
		innet_pkt_resize(ctx, pkt, s->trunc - 1);
	if (s->recirc_fl != 0) {
		p4_restart(s, s->recirc_fl, P4_INST_RECIRC, pkt->len);
		return innet_recirculate(pkt);
	}
	return innet_forward(pkt, (uint16_t)s->eport);
}

static enum innet_action p4_tm_xdp(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	if (s->parser_loop)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_PARSER_LOOP);
	if (s->assert_failed)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_ASSERT);
	p4_digest_out(ctx, s);
	if (s->clone & 0x80000000u)
		return p4_handoff(ctx, pkt, s, P4_RESUME_TM);
	if (s->resubmit_fl != 0) {
		/* the packet is as it entered ingress: run ingress again */
		p4_restart(s, s->resubmit_fl, P4_INST_RESUBMIT, s->ingress_len);
		return innet_recirculate(pkt);
	}
	if (P4_HAS_SM_MCAST_GRP && P4_SM_MCAST_GRP(&s->phv) != 0)
		return p4_handoff(ctx, pkt, s, P4_RESUME_TM);
	if (P4_SM_EGRESS_SPEC(&s->phv) == P4_DROP_PORT_NUM)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_INGRESS);
	P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_NORMAL;
	s->plen_copy = s->plen;
	p4_egress_pass(ctx, pkt, s, P4_SM_EGRESS_SPEC(&s->phv));
	return p4_finish_xdp(ctx, pkt, s);
}

static enum innet_action p4_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct p4_st *s = innet_scratch(ctx);
	if (s == (void *)0)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_NO_STATE);
	/* a recirculated pass: its state is in scratch already (p4_restart) */
	if (pkt->recirc == 0 || s->magic != P4_STATE_MAGIC)
		p4_fresh(ctx, pkt, s);
	p4_ingress_pass(ctx, pkt, s);
	return p4_tm_xdp(ctx, pkt, s);
}

#else
/* ------------------------------------------------------------------------ */
/* The user-space engine                                                      */

/* Save the packet as ingress saw it (before any deparse), to restore it
 * between copies. */
static void p4_save_orig(struct innet_pkt *pkt, struct p4_st *s)
{
	s->orig_len = pkt->len;
	s->orig_parsed = s->parsed;
	s->orig_saved = s->parsed <= P4_ORIG_MAX;
	if (s->orig_saved && s->parsed > 0)
		__builtin_memcpy(s->orig, pkt->data, s->parsed);
}

/* Put the packet back as it was before the last deparse. */
static int p4_restore(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	if (!s->orig_saved)
		return -1;
	/* the headers now take s->parsed bytes; they took s->orig_parsed */
	uint32_t payload = pkt->len - s->parsed;
	if (s->parsed > s->orig_parsed) {
		if (innet_pkt_pull(ctx, pkt, s->parsed - s->orig_parsed) != 0)
			return -1;
	} else if (s->parsed < s->orig_parsed) {
		uint32_t d = s->orig_parsed - s->parsed;
		if (d <= (uint32_t)(pkt->data - pkt->buf_start)) {
			if (innet_pkt_push(ctx, pkt, d) != 0)
				return -1;
		} else {
			return -1;
		}
	}
	(void)payload;
	if (innet_pkt_resize(ctx, pkt, s->orig_len) != 0)
		return -1;
	if (s->orig_parsed > 0)
		__builtin_memcpy(pkt->data, s->orig, s->orig_parsed);
	s->parsed = s->orig_parsed;
	return 0;
}

/* update_checksum and the deparser into the packet. 0 or a drop reason. */
static int p4_deparse_user(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	uint32_t hlen = p4_hdr_len(s);
	p4_update(ctx, pkt, s);
	if (hlen > s->parsed) {
		uint32_t grow = hlen - s->parsed;
		if (grow <= (uint32_t)(pkt->data - pkt->buf_start)) {
			if (innet_pkt_push(ctx, pkt, grow) != 0)
				return P4_DROP_HEADROOM;
		} else {
			/* beyond the headroom: move the payload back */
			uint32_t payload = pkt->len - s->parsed;
			if (pkt->len + grow > INNET_PKT_MAX || innet_pkt_resize(ctx, pkt, pkt->len + grow) != 0)
				return P4_DROP_HEADROOM;
			__builtin_memmove(pkt->data + hlen, pkt->data + s->parsed, payload);
			/* (restore: the push path's inverse would not apply) */
			s->orig_saved = 0;
		}
	} else if (hlen < s->parsed) {
		if (innet_pkt_pull(ctx, pkt, s->parsed - hlen) != 0)
			return P4_DROP_COPY;
	}
	if (p4_emit_headers(pkt, s) != 0)
		return P4_DROP_COPY;
	s->parsed = hlen;
	if (s->trunc != 0 && s->trunc - 1 < pkt->len)
		innet_pkt_resize(ctx, pkt, s->trunc - 1);
	return 0;
}

struct p4_out {
	uint32_t sent;             /* copies emitted */
	uint32_t drop;             /* the first drop reason of a copy (+1), 0 none */
	uint32_t recirc;           /* a copy waits to recirculate */
};

static void p4_out_drop(struct p4_out *o, uint32_t reason)
{
	if (o->drop == 0)
		o->drop = reason + 1;
}

/* Send the deparsed copy in the packet out of port, or keep it to
 * recirculate; then put the packet back for the next copy. */
static void p4_send_copy(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s, struct p4_out *o)
{
	if (s->recirc_fl != 0) {
		if (o->recirc) {
			p4_out_drop(o, P4_DROP_RECIRC);
		} else {
			o->recirc = 1;
			s->recirc_len = pkt->len;
			__builtin_memcpy(s->recirc_buf, pkt->data, pkt->len);
			s->recirc_phv = s->phv;
			s->recirc_fl_next = s->recirc_fl;
			s->recirc_plen = pkt->len;
		}
	} else {
		struct innet_out out = { .port = (uint16_t)s->eport };
		if (innet_emit(ctx, &out, false, pkt->data, pkt->len) == 0)
			o->sent++;
		else
			p4_out_drop(o, P4_DROP_COPY);
	}
	if (p4_restore(ctx, pkt, s) != 0)
		p4_out_drop(o, P4_DROP_COPY);
}

/* Clone targets of session word sw for the copy in s->phv (already set up as
 * the clone): each a copy through egress. A multicast session replicates. */
static void p4_egress_copy(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
			   struct p4_out *o, uint32_t port);

static void p4_clone_targets(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
			     struct p4_out *o, uint64_t sw, const struct p4_phv *base)
{
	/* a clone is a new packet in BMv2 (Packet::clone_*): no truncation
	 * carries over to it, only its own egress's */
	s->trunc = 0;
	if (sw & P4_MIRROR_MGID_VALID) {
		uint32_t mgid = (uint32_t)((sw >> 16) & 0xffff);
		struct p4_mk { uint8_t b[8]; } *k = (struct p4_mk *)s->kbuf;
		struct p4_mv { struct p4_mcast_group g; } *v = (struct p4_mv *)s->rbuf;
		__builtin_memset(k, 0, 8);
		__builtin_memcpy(k->b, &mgid, 4);
		if (innet_table_lookup(ctx, P4T_MCAST, k, v) == 0) {
			struct p4_mcast_group grp = v->g;
			for (uint32_t i = 0; i < grp.n && i < P4_MC_MAX; i++) {
				s->phv = *base;
				s->trunc = 0;
				P4_SM_EGRESS_RID(&s->phv) = grp.m[i].rid;
				p4_egress_copy(ctx, pkt, s, o, grp.m[i].port);
			}
		}
	}
	if (sw & P4_MIRROR_PORT_VALID) {
		s->phv = *base;
		s->trunc = 0;
		p4_egress_copy(ctx, pkt, s, o, (uint32_t)(sw & 0xffff));
	}
}

/* After egress (s->phv): an egress-to-egress clone waits its turn, the copy
 * is dropped, or deparsed and sent (or kept to recirculate). */
static void p4_finish_user(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s, struct p4_out *o)
{
	if (s->clone & 0x80000000u) {
		uint64_t sw = p4_session(ctx, s->clone & 0xffffu);
		if (sw != 0) {
			if (s->n_e2e >= P4_E2E_MAX) {
				p4_out_drop(o, P4_DROP_CLONE_DEPTH);
			} else {
				uint32_t k = s->n_e2e++;
				s->e2e[k] = s->phv;
				uint32_t n = p4_flist_save(&s->phv, s->clone_fl, s->hbuf);
				p4_zero(&s->e2e[k], __builtin_offsetof(struct p4_phv, meta_end));
				p4_flist_load(&s->e2e[k], s->clone_fl, s->hbuf, n);
				P4_SM_INSTANCE_TYPE(&s->e2e[k]) = P4_INST_EGRESS_CLONE;
				s->e2e_sw[k] = sw;
				s->e2e_plen[k] = s->plen_copy;
			}
		}
		s->clone = 0;
	}
	if (s->assert_failed) {
		p4_out_drop(o, P4_DROP_ASSERT);
	} else if (P4_SM_EGRESS_SPEC(&s->phv) == P4_DROP_PORT_NUM) {
		p4_out_drop(o, P4_DROP_EGRESS);
	} else {
		int r = p4_deparse_user(ctx, pkt, s);
		if (r != 0) {
			p4_out_drop(o, (uint32_t)r);
			if (p4_restore(ctx, pkt, s) != 0)
				p4_out_drop(o, P4_DROP_COPY);
		} else {
			p4_send_copy(ctx, pkt, s, o);
		}
	}
	/* egress-to-egress clones: each through egress in turn */
	while (s->n_e2e > 0) {
		uint32_t k = --s->n_e2e;
		uint64_t sw = s->e2e_sw[k];
		s->plen_copy = s->e2e_plen[k];
		/* (the clone's own egress may queue another into the slot freed) */
		s->e2e_base = s->e2e[k];
		p4_clone_targets(ctx, pkt, s, o, sw, &s->e2e_base);
	}
}

static void p4_egress_copy(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
			   struct p4_out *o, uint32_t port)
{
	p4_egress_pass(ctx, pkt, s, port);
	p4_finish_user(ctx, pkt, s, o);
}

/* The verdict once every copy is out. */
static enum innet_action p4_verdict(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
				    struct p4_out *o, uint32_t none_reason)
{
	if (o->recirc) {
		if (innet_pkt_resize(ctx, pkt, s->recirc_len) != 0)
			return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_COPY);
		__builtin_memcpy(pkt->data, s->recirc_buf, s->recirc_len);
		s->phv = s->recirc_phv;
		p4_restart(s, s->recirc_fl_next, P4_INST_RECIRC, s->recirc_plen);
		return innet_recirculate(pkt);
	}
	if (o->sent > 0)
		return INNET_CONSUMED;
	return innet_drop(pkt, INNET_DROP_PROGRAM + (o->drop ? o->drop - 1 : none_reason));
}

/* The traffic manager: clones, digest, resubmit, multicast or unicast. */
static enum innet_action p4_tm_user(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	if (s->parser_loop)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_PARSER_LOOP);
	if (s->assert_failed)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_ASSERT);
	p4_digest_out(ctx, s);
	struct p4_out o = { 0 };
	s->n_e2e = 0;
	uint32_t clone = s->clone, clone_fl = s->clone_fl, resubmit = s->resubmit_fl;
	uint32_t plen = s->plen;
	/* the common case: one copy, no clone — egress on the PHV in place */
	if (!(clone & 0x80000000u) && resubmit == 0 &&
	    !(P4_HAS_SM_MCAST_GRP && P4_SM_MCAST_GRP(&s->phv) != 0)) {
		if (P4_SM_EGRESS_SPEC(&s->phv) == P4_DROP_PORT_NUM)
			return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_INGRESS);
		P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_NORMAL;
		s->plen_copy = plen;
		uint32_t port = P4_SM_EGRESS_SPEC(&s->phv);
		p4_egress_pass(ctx, pkt, s, port);
		if (!(s->clone & 0x80000000u) && !s->assert_failed &&
		    P4_SM_EGRESS_SPEC(&s->phv) != P4_DROP_PORT_NUM) {
			int r = p4_deparse_user(ctx, pkt, s);
			if (r != 0)
				return innet_drop(pkt, INNET_DROP_PROGRAM + (uint32_t)r);
			if (s->recirc_fl != 0) {
				p4_restart(s, s->recirc_fl, P4_INST_RECIRC, pkt->len);
				return innet_recirculate(pkt);
			}
			return innet_forward(pkt, (uint16_t)port);
		}
		p4_save_orig(pkt, s);
		p4_finish_user(ctx, pkt, s, &o);
		return p4_verdict(ctx, pkt, s, &o, P4_DROP_EGRESS);
	}
	p4_save_orig(pkt, s);
	s->saved = s->phv;
	/* a truncate in ingress stays with the packet itself (BMv2 keeps it in
	 * the Packet): the unicast copy; clones and replicas are new packets */
	uint32_t trunc_in = s->trunc;
	/* ingress clone: the packet as ingress saw it, parsed again */
	if (clone & 0x80000000u) {
		uint64_t sw = p4_session(ctx, clone & 0xffffu);
		if (sw != 0) {
			uint32_t in_port = P4_SM_INGRESS_PORT(&s->saved);
			p4_zero(&s->phv, sizeof(s->phv));
			P4_SM_INGRESS_PORT(&s->phv) = in_port;
			p4_parse(ctx, pkt, s);
			p4_zero(&s->phv, __builtin_offsetof(struct p4_phv, meta_end));
			uint32_t n = p4_flist_save(&s->saved, clone_fl, s->hbuf);
			p4_flist_load(&s->phv, clone_fl, s->hbuf, n);
			P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_INGRESS_CLONE;
			s->plen_copy = s->ingress_len;
			s->clone_base = s->phv;
			p4_clone_targets(ctx, pkt, s, &o, sw, &s->clone_base);
		}
	}
	if (resubmit != 0) {
		s->phv = s->saved;
		p4_restart(s, resubmit, P4_INST_RESUBMIT, s->ingress_len);
		if (o.recirc)
			p4_out_drop(&o, P4_DROP_RECIRC);
		return innet_recirculate(pkt);
	}
	uint32_t mgid = P4_HAS_SM_MCAST_GRP ? (uint32_t)P4_SM_MCAST_GRP(&s->saved) : 0;
	if (mgid != 0) {
		struct p4_mk { uint8_t b[8]; } *k = (struct p4_mk *)s->kbuf;
		struct p4_mv { struct p4_mcast_group g; } *v = (struct p4_mv *)s->rbuf;
		__builtin_memset(k, 0, 8);
		__builtin_memcpy(k->b, &mgid, 4);
		if (innet_table_lookup(ctx, P4T_MCAST, k, v) == 0 && v->g.n > 0) {
			struct p4_mcast_group grp = v->g;
			for (uint32_t i = 0; i < grp.n && i < P4_MC_MAX; i++) {
				s->phv = s->saved;
				s->trunc = 0;
				P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_REPLICATION;
				P4_SM_EGRESS_RID(&s->phv) = grp.m[i].rid;
				s->plen_copy = plen;
				p4_egress_copy(ctx, pkt, s, &o, grp.m[i].port);
			}
		} else {
			p4_out_drop(&o, P4_DROP_NO_GROUP);
		}
		return p4_verdict(ctx, pkt, s, &o, P4_DROP_NO_GROUP);
	}
	if (P4_SM_EGRESS_SPEC(&s->saved) == P4_DROP_PORT_NUM)
		return p4_verdict(ctx, pkt, s, &o, P4_DROP_INGRESS);
	s->phv = s->saved;
	s->trunc = trunc_in;
	P4_SM_INSTANCE_TYPE(&s->phv) = P4_INST_NORMAL;
	s->plen_copy = plen;
	p4_egress_copy(ctx, pkt, s, &o, P4_SM_EGRESS_SPEC(&s->saved));
	return p4_verdict(ctx, pkt, s, &o, P4_DROP_EGRESS);
}

/* A packet XDP handed over: its state is in scratch (P4_HANDOFF_BYTES of it). */
static enum innet_action p4_resumed(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)
{
	if (s->magic != P4_STATE_MAGIC)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_NO_STATE);
	if (s->resume == P4_RESUME_TM)
		return p4_tm_user(ctx, pkt, s);
	if (s->resume == P4_RESUME_EGRESS) {
		/* egress ran in XDP on this copy; the packet is as ingress left it */
		struct p4_out o = { 0 };
		s->n_e2e = 0;
		p4_save_orig(pkt, s);
		p4_finish_user(ctx, pkt, s, &o);
		return p4_verdict(ctx, pkt, s, &o, P4_DROP_EGRESS);
	}
	return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_NO_STATE);
}

static enum innet_action p4_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct p4_st *s = innet_scratch(ctx);
	if (s == (void *)0)
		return innet_drop(pkt, INNET_DROP_PROGRAM + P4_DROP_NO_STATE);
	if (pkt->flags & INNET_PKT_F_RESUMED)
		return p4_resumed(ctx, pkt, s);
	if (pkt->recirc == 0 || s->magic != P4_STATE_MAGIC)
		p4_fresh(ctx, pkt, s);
	p4_ingress_pass(ctx, pkt, s);
	return p4_tm_user(ctx, pkt, s);
}
#endif

/* (one more macro level: P4_DP_NAME is expanded before INNET_DATAPATH pastes it) */
#define P4_DATAPATH(name, h, t) INNET_DATAPATH(name, h, t)
P4_DATAPATH(P4_DP_NAME, p4_handle, NULL)

#endif /* INNET_P4RT_PIPE_H */
