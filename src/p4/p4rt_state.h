/*
 * p4rt_state.h — the per-packet state of a generated P4 data path and the
 * helpers its actions and tables call (the digest / log ring, meters, a
 * checksum's payload, parse value sets). Included by the generated source
 * after its struct p4_phv and its constants (P4R_*, P4_KBUF, ...), before
 * its functions; restricted C like the rest (p4rt_dp.h).
 *
 * struct p4_st lives in innet_scratch(): one per worker thread (user space)
 * or per CPU (XDP), the packet's alone while its handler runs, and kept
 * between the passes of a packet that recirculates (innet's RECIRCULATE
 * verdict re-runs the handler at once, on the same worker or CPU):
 *
 *   | flags, lengths | phv |  kbuf kbuf2 vbuf rbuf hbuf | user space: saved PHV, E2E clones,
 *   '-- a hand-off carries this --'                      | the packet's original headers, a
 *   (P4_HANDOFF_BYTES)                                    | recirculated copy waiting
 */
#ifndef INNET_P4RT_STATE_H
#define INNET_P4RT_STATE_H

#define P4_PARSE_STEPS 256     /* parser states per packet before it gives up */
#define P4_ORIG_MAX    512     /* header bytes saved to restore the packet between copies */
#define P4_E2E_MAX     2       /* egress-to-egress clones pending at once */
#define P4_STATE_MAGIC 0x70347374u

#define P4_RESUME_TM     1     /* hand-off after ingress: the traffic manager's turn */
#define P4_RESUME_EGRESS 2     /* hand-off after egress: clone / deparse / send */

/* Helpers are separate functions on XDP (eBPF subprograms keep the program
 * small); inlined where the compiler likes on the user-space engine. */
#if P4_XDP
#define P4_FN __attribute__((noinline))
#else
#define P4_FN
#endif

P4_INLINE uint64_t p4_rd64(const uint8_t *p)
{
	uint64_t v;
	__builtin_memcpy(&v, p, 8);
	return v;
}

#define P4_RBUF_SIZE (P4_RBUF > sizeof(struct p4_mcast_group) ? P4_RBUF : sizeof(struct p4_mcast_group))

struct p4_st {
	/* ---- carried by a hand-off to the user-space engine ---- */
	uint32_t magic;
	uint8_t resume;            /* P4_RESUME_* in a hand-off */
	uint8_t exit;              /* exit: the pipeline stops before its next node */
	uint8_t assert_failed;     /* an assert or assume failed: the packet is dropped */
	uint8_t parser_loop;       /* the parser gave up (P4_PARSE_STEPS) */
	uint32_t parsed;           /* bytes the parser consumed: the payload's start */
	uint32_t plen;             /* simple_switch's packet length register */
	uint32_t ingress_len;      /* the packet's length when it entered ingress */
	uint32_t clone;            /* session | 0x80000000 when a clone was asked */
	uint32_t clone_fl;         /* its field list */
	uint32_t resubmit_fl;      /* field list of a resubmit; 0 = none (as BMv2) */
	uint32_t recirc_fl;        /* field list of a recirculate; 0 = none */
	uint32_t digest;           /* learn list of a digest; 0 = none */
	uint32_t trunc;            /* truncate length + 1; 0 = none */
	uint32_t eport;            /* the egress port of the copy in egress */
	uint32_t plen_copy;        /* the packet length register of the copy in egress */
	struct p4_phv phv;
	/* ---- this executor's own ---- */
	uint8_t kbuf[P4_KBUF];     /* a lookup's key */
	uint8_t kbuf2[P4_KBUF];    /* lpm: the unmasked key */
	uint8_t vbuf[P4_VBUF];     /* a lookup's value */
	uint8_t rbuf[P4_RBUF_SIZE]; /* a ternary record, a value set member, a
	                            * multicast group */
	uint8_t hbuf[P4_HBUF + P4_RING_SIZE]; /* a calculation's input, a ring record */
	uint64_t lpm_bits[P4_LPM_WORDS]; /* an lpm lookup's prefix lengths in use */
	uint32_t t_hit;            /* the last table applied: hit, */
	int32_t t_act;             /* and the action it ran (-1 none) */
#if !P4_XDP
	struct p4_phv saved;       /* after ingress: every copy starts from it */
	struct p4_phv clone_base;  /* an ingress clone, re-parsed: its targets start from it */
	struct p4_phv e2e[P4_E2E_MAX]; /* egress-to-egress clones waiting */
	struct p4_phv e2e_base;    /* the one going through its targets */
	uint64_t e2e_sw[P4_E2E_MAX];   /* their sessions' words */
	uint32_t e2e_plen[P4_E2E_MAX];
	uint32_t n_e2e;
	uint32_t orig_len;         /* the packet as it entered ingress: its length, */
	uint32_t orig_parsed;      /* its parsed bytes, */
	uint8_t orig[P4_ORIG_MAX]; /* and their copy (restored after each deparse) */
	uint8_t orig_saved;
	uint32_t n_copies;         /* copies sent so far */
	uint32_t recirc_len;       /* a recirculated copy waiting (its bytes, its state) */
	uint32_t recirc_fl_next;
	uint32_t recirc_plen;
	struct p4_phv recirc_phv;
	uint8_t recirc_buf[INNET_PKT_MAX];
#endif
};

/* The bytes a hand-off carries: the flags and the PHV. */
#define P4_HANDOFF_BYTES ((uint32_t)__builtin_offsetof(struct p4_st, kbuf))

_Static_assert(sizeof(struct p4_st) <= INNET_SCRATCH_SIZE,
	       "the P4 program's per-packet state does not fit innet's scratch memory");

/* The argument of the lookups' loops (innet_loop callbacks: on the stack,
 * which the eBPF program shares with the engine's frames, so small; the lpm
 * table's prefix-length bitmap is in s->lpm_bits). */
struct p4_scan {
	struct innet_ctx *ctx;
	struct p4_st *s;
	uint64_t base, n;
	int64_t found;
};

/* ------------------------------------------------------------------------ */
/* The digest / log ring: a record per event, in the p4_ring register; the    */
/* control plane reads them by sequence number (p4_words' seq word of a slot  */
/* is its sequence + 1, written last).                                        */

static P4_FN void p4_ring_put(struct innet_ctx *ctx, struct p4_st *s, uint32_t kind, uint32_t id,
			      const uint8_t *data, uint32_t len)
{
	uint64_t seq = innet_reg_fetch_add(ctx, P4R_WORDS, P4_RING_HEAD_WORD, 1);
	uint32_t slot = (uint32_t)(seq % P4_RING_SLOTS);
	uint8_t *rec = s->hbuf + P4_HBUF;
	struct p4_ring_hdr *h = (struct p4_ring_hdr *)rec;
	uint32_t room = P4_RING_SIZE - (uint32_t)sizeof(*h);
	if (len > room)
		len = room;
	h->kind = kind;
	h->id = id;
	h->len = len;
	h->pad = 0;
	for (uint32_t i = 0; i < P4_RING_SIZE - sizeof(*h); i++) {
		if (i >= len)
			break;
		rec[sizeof(*h) + i] = data[i];
	}
	innet_reg_write(ctx, P4R_WORDS, P4_RING_SEQ_WORD + slot, 0);
	innet_reg_write_bytes(ctx, P4R_RING, slot, rec, P4_RING_SIZE);
	innet_reg_write(ctx, P4R_WORDS, P4_RING_SEQ_WORD + slot, seq + 1);
}

/* ------------------------------------------------------------------------ */
/* The two-rate three-colour meter at words w .. w + P4_METER_WORDS - 1.      */

static P4_FN uint64_t p4_meter(struct innet_ctx *ctx, struct p4_st *s, uint32_t w, uint64_t input)
{
	const struct p4_conf *cf = innet_conf(ctx);
	uint64_t color = P4_METER_GREEN;
	(void)s;
	if (innet_reg_read(ctx, P4R_WORDS, w + 1) == 0)
		return color;   /* not configured: green, as BMv2 */
	uint64_t free_ = 0;
	uint32_t t;
	for (t = 0; t < 8; t++) {
		free_ = 0;
		if (innet_reg_cas(ctx, P4R_WORDS, w, &free_, 1))
			break;
	}
	if (t == 8)
		return color;
	uint64_t now = innet_now(ctx), t0 = cf != (void *)0 ? cf->t0_ns : 0;
	uint64_t us = now > t0 ? (now - t0) / 1000 : 0;
	for (uint32_t r = 0; r < 2; r++) {
		uint32_t b = w + 2 + 4 * r;
		uint64_t rate = innet_reg_read(ctx, P4R_WORDS, b);
		uint64_t burst = innet_reg_read(ctx, P4R_WORDS, b + 1);
		uint64_t tokens = innet_reg_read(ctx, P4R_WORDS, b + 2);
		uint64_t last = innet_reg_read(ctx, P4R_WORDS, b + 3);
		/* rate: units per microsecond in 32.32 fixed point */
		uint64_t since = (uint64_t)(((p4_u128)us * rate) >> 32);
		uint64_t add = since > last ? since - last : 0;
		if (since > last)
			last = since;
		tokens = tokens + add > burst ? burst : tokens + add;
		bool short_ = tokens < input;
		if (!short_)
			tokens -= input;
		innet_reg_write(ctx, P4R_WORDS, b + 2, tokens);
		innet_reg_write(ctx, P4R_WORDS, b + 3, last);
		if (short_) {
			color = r == 0 ? P4_METER_RED : P4_METER_YELLOW;
			break;
		}
	}
	innet_reg_write(ctx, P4R_WORDS, w, 0);
	return color;
}

/* ------------------------------------------------------------------------ */
/* A calculation over the payload (the bytes after the parsed headers).       */

struct p4_pay {
	struct innet_pkt *pkt;
	struct p4_hash *h;
	uint64_t off, end;
	int64_t algo;
};

static long p4_pay_chunk(uint32_t i, void *arg)
{
	struct p4_pay *a = arg;
	(void)i;
	if (a->off >= a->end)
		return 1;
	if (a->end - a->off >= 32) {
		const uint8_t *p = innet_pkt_ptr(a->pkt, (uint32_t)a->off, 32);
		if (p == (void *)0)
			return 1;
		p4_hash_bytes(a->h, (int)a->algo, p, 32, 32);
		a->off += 32;
		return 0;
	}
	const uint8_t *p = innet_pkt_ptr(a->pkt, (uint32_t)a->off, 1);
	if (p == (void *)0)
		return 1;
	p4_hash_bytes(a->h, (int)a->algo, p, 1, 1);
	a->off += 1;
	return 0;
}

static P4_FN void p4_hash_payload(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s,
				  struct p4_hash *h, int algo)
{
	struct p4_pay a = { .pkt = pkt, .h = h, .off = s->parsed, .end = pkt->len, .algo = algo };
	(void)ctx;
	innet_loop(INNET_PKT_MAX / 32 + 32, p4_pay_chunk, &a);
}

/* ------------------------------------------------------------------------ */
/* Parse value sets: the members of set v (value, mask) against s->kbuf.      */

#if P4R_VSETS >= 0
struct p4_vscan {
	struct innet_ctx *ctx;
	struct p4_st *s;
	uint64_t base, n, kb;
	int64_t found;
};

static long p4_vs_one(uint32_t i, void *arg)
{
	struct p4_vscan *a = arg;
	struct p4_st *s = a->s;
	if (i >= a->n)
		return 1;
	innet_reg_read_bytes(a->ctx, P4R_VSETS, (uint32_t)a->base + i, s->rbuf, P4_VSET_ENTRY);
	uint32_t kb = (uint32_t)a->kb;
	if (kb > P4_VSET_ENTRY / 2)
		return 1;
	for (uint32_t b = 0; b < P4_VSET_ENTRY / 2; b++) {
		if (b >= kb)
			break;
		/* the member's value against the key, under the transition's
		 * mask (kbuf[kb..2kb), all ones without one) */
		if (((s->kbuf[b] ^ s->rbuf[b]) & s->kbuf[kb + b]) != 0)
			return 0;
	}
	a->found = i;
	return 1;
}

static P4_FN int p4_vset_match(struct innet_ctx *ctx, struct p4_st *s, uint32_t v, uint32_t kb,
			       uint32_t masked)
{
	(void)masked;
	uint64_t n = innet_reg_read(ctx, P4R_WORDS, P4_VSET_WORD + v);
	struct p4_vscan a = { .ctx = ctx, .s = s, .base = (uint64_t)v * P4_VSET_MAX,
			      .n = n > P4_VSET_MAX ? P4_VSET_MAX : n, .kb = kb, .found = -1 };
	innet_loop((uint32_t)a.n, p4_vs_one, &a);
	return a.found >= 0;
}
#endif

#endif /* INNET_P4RT_STATE_H */
