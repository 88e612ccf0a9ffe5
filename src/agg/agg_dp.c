/*
 * agg/agg_dp.c — the aggregation program's data path (Trio): streaming
 * all-reduce of int32 vectors in the switch, SwitchML/DAIET style, with
 * Trio-ML's timer-driven straggler mitigation. Protocol: src/agg/wire.h,
 * docs/aggregation.md; settings and setup: agg.c.
 *
 * State. A pool of `slots` slots, each with two shadow copies (ver 0/1). A
 * job owns a contiguous range of the pool [slot_base, slot_base + slots);
 * packets name a job-relative slot, so a job can only ever touch its own
 * range. Copy index idx = 2 * global_slot + ver; per copy:
 *
 *   R_STATE  u64   bits  0..47  bitmap of workers whose elements were claimed
 *                  bit   48     CLOSED  (no more contributions: complete or timed out)
 *                  bit   49     EMITTED (the result went out; copy readable for replies)
 *                  bits 50..63  round tag (round mod 2^14) the copy holds
 *   R_COUNT  u32   contributions fully added (incremented after the adds)
 *   R_EXP    u8    max of the contributors' exponent proposals (biased)
 *   R_OFF    u32   element offset the contributors sent (echoed in results)
 *   R_VAL    u32   k accumulators at [idx * k, idx * k + k)      bank A
 *   R_VAL2   u32   k more at the same indices                    bank B
 *   R_ADDER  u8    bit 0 EXCL: a contributor is adding into bank A
 *                  bit 1 B_USED: some contributor added into bank B
 *   R_CALL   u32   call number the contributors sent (echoed; read by JOIN)
 *
 * and per job (index: its group), per worker (group * 48 + worker):
 *
 *   R_RUN    u64   the job's run (agg.h): OUT (members the rounds do not wait
 *                  for), generation, RESETTING
 *   R_INC    u64   the worker's registered handle: nonce, generation, PENDING
 *   R_DEAF   u64   members out of the run the results no longer go to (agg.h),
 *                  generation
 *
 * Two banks, because an atomic add costs ~8 ns here and a plain one a
 * fraction of that (measured, docs/aggregation.md): a contributor that
 * takes EXCL (fetch_or on R_ADDER: exactly one holder at a time) adds into
 * bank A with plain loads and stores, then releases EXCL; one that finds
 * EXCL held (another switch thread is adding into the same copy right now)
 * adds into bank B with atomic adds. The result is A + B (B only if used).
 * With one switch thread, or threads on different slots, every add is
 * plain. The hand-over of bank A is ordered by the RMWs on R_ADDER, and
 * every add happens before the count++ that the emitter reads, so the
 * emitter sees all of them.
 *
 * The life of round r of a slot (ver = r & 1):
 *
 *   copy tag r, open ── claim bit (CAS on R_STATE: tag checked atomically with
 *     the claim) ── add k elements, max exp ── count++ ──┐
 *   claims ∪ OUT cover the job: CLOSED   timer (timeout_us after the first claim):
 *   (the last claimant sees every        CAS CLOSED if still open with tag r; the
 *   claim; a retransmission closes a     members that missed it go OUT
 *   round a member's exclusion made
 *   complete)
 *   then try_finish: tag r, CLOSED, !EMITTED, a claimant, and count ==
 *   popcount(bitmap) (every claimant finished adding) ── CAS EMITTED (exactly
 *   one thread wins) ── the winner writes the result, puts the claimants that
 *   were OUT back in, resets the OTHER copy to tag r + 1 (it held round
 *   r - 1, which everyone in the run has seen: they all sent round r) and
 *   multicasts the result.
 *
 * Round r + 1 can only start after some worker received round r's result,
 * so a copy is never reset while anyone may still add into it; replies read
 * a copy seqlock-style (state before == state after, else STALE).
 *
 * Runs (docs/aggregation.md, "Runs"): every packet carries the job's
 * generation (low 8 bits); a CONTRIB of another is answered RESTARTED. A
 * JOIN with a nonce registers the handle (agg_register); the START that
 * finds no member of the run left advances the generation and arms the
 * job's reset timer (2 * slots + group), which closes every copy of the job
 * and, once no claimant is adding, zeroes it (round 0, open); meanwhile
 * contributions are dropped (resetting). A contribution that passed the
 * generation check before the advance and claimed after re-reads R_RUN
 * after its claim and takes the claim back (agg_unclaim).
 *
 * THREAD SAFETY: handlers run on several workers (or CPUs, on XDP) and
 * on_timer on the timer thread (in user space on both targets), all
 * concurrently; every shared access is an atomic register helper. The checks
 * that must see each other's writes (a closer reading the count, an adder
 * reading CLOSED) use RMW reads (fetch_add 0 / fetch_or 0), which are
 * sequentially consistent.
 *
 * Late packets of a straggler: a contribution for a copy that is CLOSED and
 * EMITTED is answered (to that worker only) with the result as it stands —
 * PARTIAL with the bitmap that excludes it; its elements are not added, so
 * every worker ends the round with the same values. A contribution for a
 * round whose copy was reused is answered STALE. One arriving while the copy
 * is CLOSED but not yet EMITTED is dropped (pending); the worker retransmits.
 *
 * On XDP the eBPF program handles every packet that fits one XDP buffer (k
 * up to about 870); jumbo packets reach the user-space engine, which runs
 * this same code on the same state.
 */
#include "innet/dp.h"
#include "agg/agg.h"
#include "agg/wire.h"

/* The per-element work (k up to 2294 per packet) is the program's hot path.
 * It runs in innet_loop (on XDP bpf_loop: the verifier checks each body once,
 * not once per run of elements) over spans (below); `flatten` inlines the
 * helpers into the bodies (gcc and clang otherwise keep them as calls:
 * measured 3x slower). */
#define AGG_HOT __attribute__((flatten))

/* The handler's steps are functions of their own, never inlined: on XDP
 * each is a BPF subprogram, so its locals are not on the stack of the other
 * steps (512 bytes for the deepest chain of calls, the engine's frame
 * included), and the verifier does not carry one step's inner paths (a table
 * lookup has dozens of ways out) into the steps after it. A few calls per
 * packet on the user-space engine. */
#define AGG_STEP __attribute__((noinline))

/* The per-element work goes through spans (innet_reg_span): many
 * accumulators and packet elements at a time with plain loads and stores,
 * where each register helper costs a map lookup and its checks on XDP
 * (measured: docs/aggregation.md, "On the XDP target"). A copy's
 * accumulators start at idx * k, anywhere in a register page, so a span is
 * aligned to its length in the register and never crosses a page: a call's
 * k elements are a head of pieces (1, 2, 4, 8 or 16 elements, each aligned
 * to its length) up to a multiple of AGG_RUN in the register, runs of
 * AGG_RUN, and a tail of pieces. */
#define AGG_RUN 32u
/* Stateless work (innet_alu; docs/resources.md, "What innet_alu counts"):
 * each span reports the ALU operations its eBPF code executes per element
 * and per span, a piece the choice of its length; the ALU check
 * (INNET_TEST_TARGET=alu build/tests/golden/test_agg) fails when a pass's
 * report and its count drift apart. */
#define AGG_ALU_PIECE 8u

/* A straggler timer whose job lookup was busy looks again this much later. */
#define AGG_BUSY_RETRY_NS 1000000u
_Static_assert(INNET_REG_PAGE % (4u * AGG_RUN) == 0, "an aligned run never crosses a register page");

/* What the element loops work on (innet_loop's arg). */
struct agg_elems {
	struct innet_ctx *ctx;
	struct innet_pkt *pkt;     /* elements after the headers */
	uint32_t base;             /* the copy's first accumulator (idx * k) */
	uint32_t k;                /* elements per packet */
	uint32_t p;                /* pieces: the next one's first element */
	uint32_t end;              /* pieces: up to here */
	uint32_t head;             /* elements before the first aligned run */
	bool b_used;               /* put_sum: bank B is in use */
};

/* The k elements of e: fn_piece for the head, fn_run for the aligned runs,
 * fn_piece for the tail (a macro: bpf_loop wants each callback by name). */
#define AGG_ELEMENTS(e, fn_piece, fn_run)                                          \
	do {                                                                       \
		uint32_t h_ = (AGG_RUN - (e)->base % AGG_RUN) % AGG_RUN;           \
		(e)->head = h_ < (e)->k ? h_ : (e)->k;                             \
		(e)->p = 0;                                                        \
		(e)->end = (e)->head;                                              \
		innet_loop(2 * 5, (fn_piece), (e)); /* at most 2 per power of two */ \
		innet_loop(((e)->k - (e)->head) / AGG_RUN, (fn_run), (e));         \
		(e)->p = (e)->k - ((e)->k - (e)->head) % AGG_RUN;                  \
		(e)->end = (e)->k;                                                 \
		innet_loop(5, (fn_piece), (e));                                    \
	} while (0)

/* The next piece's length: the largest power of two up to AGG_RUN / 2 that
 * fits before e->end and to which the piece's first accumulator is aligned;
 * 0 when the pieces are done. */
static inline uint32_t agg_piece(const struct agg_elems *e)
{
	uint32_t rem = e->end > e->p ? e->end - e->p : 0, x = e->base + e->p, n = AGG_RUN / 2;
	if (rem == 0)
		return 0;
	for (uint32_t t = 0; t < 4; t++)
		if (n > rem || (x & (n - 1)) != 0)
			n >>= 1;
	return n;
}

/* One piece or run of each operation, a constant n elements from element p:
 * false when the packet or the register refused the span (a fault: the
 * packet is dropped; the handler checked the length). */
static inline __attribute__((always_inline)) bool add_plain_span(struct agg_elems *e, uint32_t p,
								 uint32_t n)
{
	/* bank A, held exclusively: plain adds, wrapping modulo 2^32 */
	const uint32_t *el = innet_pkt_ptr(e->pkt, INNET_AGG_HDR_LEN + 4u * p, 4u * n);
	uint32_t *acc = el != NULL ? innet_reg_span(e->ctx, R_VAL, e->base + p, n) : NULL;
	if (acc == NULL)
		return false;
	for (uint32_t i = 0; i < n; i++)
		acc[i] += innet_be32(el[i]);
	innet_alu(e->ctx, 2 * n + 6);
	return true;
}

static inline __attribute__((always_inline)) bool add_atomic_span(struct agg_elems *e, uint32_t p,
								  uint32_t n)
{
	/* bank B, shared: atomic adds */
	const uint32_t *el = innet_pkt_ptr(e->pkt, INNET_AGG_HDR_LEN + 4u * p, 4u * n);
	uint32_t *acc = el != NULL ? innet_reg_span(e->ctx, R_VAL2, e->base + p, n) : NULL;
	if (acc == NULL)
		return false;
	for (uint32_t i = 0; i < n; i++)
		__atomic_fetch_add(&acc[i], innet_be32(el[i]), __ATOMIC_RELAXED);
	innet_alu(e->ctx, n + 6);
	return true;
}

/* The sums (bank A, plus bank B if used), big-endian, into the packet. (A
 * reply may read a copy while it is being reset for a later round: the
 * caller's check of the state word afterwards catches that; volatile keeps
 * the compiler from reading an element twice or not at all.) */
static inline __attribute__((always_inline)) bool put_sum_span(struct agg_elems *e, uint32_t p,
							       uint32_t n)
{
	uint32_t *el = innet_pkt_ptr(e->pkt, INNET_AGG_HDR_LEN + 4u * p, 4u * n);
	const volatile uint32_t *a = el != NULL ? innet_reg_span(e->ctx, R_VAL, e->base + p, n) : NULL;
	if (a == NULL)
		return false;
	if (!e->b_used) {
		for (uint32_t i = 0; i < n; i++)
			el[i] = innet_be32(a[i]);
		innet_alu(e->ctx, n + 6);
		return true;
	}
	const volatile uint32_t *b = innet_reg_span(e->ctx, R_VAL2, e->base + p, n);
	if (b == NULL)
		return false;
	for (uint32_t i = 0; i < n; i++)
		el[i] = innet_be32(a[i] + b[i]);
	innet_alu(e->ctx, 2 * n + 9);
	return true;
}

/* Zero accumulators of bank A (bank B). The register is in the code, not in
 * the arg: the verifier must know which map each one uses. */
static inline __attribute__((always_inline)) bool zero_a_span(struct agg_elems *e, uint32_t p,
							      uint32_t n)
{
	volatile uint32_t *a = innet_reg_span(e->ctx, R_VAL, e->base + p, n);
	if (a == NULL)
		return false;
	for (uint32_t i = 0; i < n; i++)
		a[i] = 0;
	innet_alu(e->ctx, 2);
	return true;
}

static inline __attribute__((always_inline)) bool zero_b_span(struct agg_elems *e, uint32_t p,
							      uint32_t n)
{
	volatile uint32_t *b = innet_reg_span(e->ctx, R_VAL2, e->base + p, n);
	if (b == NULL)
		return false;
	for (uint32_t i = 0; i < n; i++)
		b[i] = 0;
	innet_alu(e->ctx, 2);
	return true;
}

/* The loop bodies of operation OP: OP_piece (head and tail: the next piece,
 * 1 when they are done) and OP_run (aligned run j). */
#define AGG_LOOPS(op)                                                              \
	static AGG_HOT long op##_piece(uint32_t i, void *arg)                      \
	{                                                                          \
		struct agg_elems *e = arg;                                         \
		uint32_t n = agg_piece(e);                                         \
		innet_alu(e->ctx, AGG_ALU_PIECE);                                  \
		bool ok;                                                           \
		switch (n) {                                                       \
		case 0: return 1;                                                  \
		case 16: ok = op##_span(e, e->p, 16); break;                       \
		case 8: ok = op##_span(e, e->p, 8); break;                         \
		case 4: ok = op##_span(e, e->p, 4); break;                         \
		case 2: ok = op##_span(e, e->p, 2); break;                         \
		default: ok = op##_span(e, e->p, 1); break;                        \
		}                                                                  \
		e->p += n;                                                         \
		return ok ? 0 : 1;                                                 \
	}                                                                          \
	static AGG_HOT long op##_run(uint32_t j, void *arg)                        \
	{                                                                          \
		struct agg_elems *e = arg;                                         \
		return op##_span(e, e->head + j * AGG_RUN, AGG_RUN) ? 0 : 1;       \
	}

AGG_LOOPS(add_plain)
AGG_LOOPS(add_atomic)
AGG_LOOPS(put_sum)
AGG_LOOPS(zero_a)
AGG_LOOPS(zero_b)

/* Sum i of a copy whose values start at base: bank A, plus bank B if used
 * (the straggler timer's result, in user space). */
static inline uint32_t sum_at(struct innet_ctx *ctx, uint32_t base, uint32_t i, bool b_used)
{
	if (b_used)
		return (uint32_t)(innet_reg_read(ctx, R_VAL, base + i) +
				  innet_reg_read(ctx, R_VAL2, base + i));
	return (uint32_t)innet_reg_read(ctx, R_VAL, base + i);
}

static inline uint32_t st_tag(uint64_t w)
{
	return (uint32_t)(w >> ST_TAG_SHIFT) & ST_TAG_MASK;
}

static inline uint64_t st_make_tag(uint32_t round)
{
	return (uint64_t)(round & ST_TAG_MASK) << ST_TAG_SHIFT;
}

/* Bits set in x (the bit-parallel count: __builtin_popcountll may become a
 * libgcc call, which a data path cannot make). */
static inline uint32_t popcount64(uint64_t x)
{
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

static inline uint64_t all_workers(uint8_t n)
{
	return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* What a RESULT answers: copy idx of (job, slot, round) in state w. */
struct agg_res {
	uint64_t w;            /* the copy's state word */
	uint32_t idx;          /* copy index */
	uint32_t round;
	uint16_t job_id;
	uint16_t slot;         /* job-relative */
	uint8_t worker;        /* the worker answered, 0xff for a multicast */
	uint8_t n_workers;     /* of the job */
	uint8_t gen;           /* the job's generation, low 8 bits (on the wire) */
};

/* Write the RESULT header for r at h. Returns whether bank B of the copy is
 * in use (read once, here). */
static bool put_result_hdr(struct innet_ctx *ctx, const struct agg_conf *c, struct innet_hdr *h,
			   const struct agg_res *r)
{
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	uint64_t bitmap = r->w & ST_BITMAP;
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_AGG };
	a->op = INNET_AGG_RESULT;
	a->status = bitmap == all_workers(r->n_workers) ? INNET_AGG_COMPLETE : INNET_AGG_PARTIAL;
	a->job = innet_be16(r->job_id);
	a->slot = innet_be16(r->slot);
	a->ver = (uint8_t)(r->round & 1);
	a->worker = r->worker;
	a->round = innet_be32(r->round);
	a->offset = innet_be32((uint32_t)innet_reg_read(ctx, R_OFF, r->idx));
	a->exp = (uint8_t)innet_reg_read(ctx, R_EXP, r->idx);
	a->gen = r->gen;
	a->k = innet_be16((uint16_t)c->k);
	a->call = innet_be32((uint32_t)innet_reg_read(ctx, R_CALL, r->idx));
	a->bitmap = innet_be64(bitmap);
	return innet_reg_read(ctx, R_ADDER, r->idx) & ADDER_B_USED;
}

/* Turn the packet in hand (a contribution: INNET_AGG_HDR_LEN + 4k bytes, the
 * handler checked) into the RESULT r. Returns the result's length (the
 * same). */
static uint32_t fill_result(struct innet_ctx *ctx, const struct agg_conf *c, struct innet_pkt *pkt,
			    const struct agg_res *r)
{
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, INNET_AGG_HDR_LEN);
	if (h == NULL)
		return pkt->len;
	struct agg_elems e = { .ctx = ctx, .pkt = pkt, .base = r->idx * c->k, .k = c->k };
	e.b_used = put_result_hdr(ctx, c, h, r);
	AGG_ELEMENTS(&e, put_sum_piece, put_sum_run);
	innet_alu(ctx, 4);
	return INNET_AGG_HDR_LEN + 4 * c->k;
}

/* The same into buf (room for INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX
 * bytes): the straggler timer's result, which has no packet to become. */
static AGG_HOT uint32_t fill_result_buf(struct innet_ctx *ctx, const struct agg_conf *c, uint8_t *buf,
					const struct agg_res *r)
{
	bool b_used = put_result_hdr(ctx, c, (struct innet_hdr *)buf, r);
	uint32_t *el = (uint32_t *)(buf + INNET_AGG_HDR_LEN);
	uint32_t base = r->idx * c->k, k = c->k;
	for (uint32_t i = 0; i < INNET_AGG_K_MAX; i++) {
		if (i >= k)
			break;
		el[i] = innet_be32(sum_at(ctx, base, i, b_used));
	}
	innet_alu(ctx, 12 + (b_used ? 2 : 1) * k);
	return INNET_AGG_HDR_LEN + 4 * k;
}

/* A STALE answer in the packet in hand: header only; round = the round the
 * copy holds now (the worker fell behind it). Returns its length. */
static uint32_t fill_stale(struct innet_pkt *pkt, const struct agg_res *r, uint32_t copy_tag)
{
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, INNET_AGG_HDR_LEN);
	if (h == NULL)
		return pkt->len;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_AGG };
	/* The copy's full round: the packet's round moved to the copy's tag. */
	uint32_t now = r->round + ((copy_tag - r->round) & ST_TAG_MASK);
	*a = (struct innet_agg_hdr){ .op = INNET_AGG_RESULT, .status = INNET_AGG_STALE,
				     .job = innet_be16(r->job_id), .slot = innet_be16(r->slot),
				     .ver = (uint8_t)(r->round & 1), .worker = r->worker,
				     .round = innet_be32(now), .gen = r->gen };
	return INNET_AGG_HDR_LEN;
}

/* A RESTARTED answer in the packet in hand: header only, the packet's round
 * echoed, gen = the job's generation now (the sender's run is over). */
static uint32_t fill_restarted(struct innet_pkt *pkt, const struct agg_res *r)
{
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, INNET_AGG_HDR_LEN);
	if (h == NULL)
		return pkt->len;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_AGG };
	*a = (struct innet_agg_hdr){ .op = INNET_AGG_RESULT, .status = INNET_AGG_RESTARTED,
				     .job = innet_be16(r->job_id), .slot = innet_be16(r->slot),
				     .ver = (uint8_t)(r->round & 1), .worker = r->worker,
				     .round = innet_be32(r->round), .gen = r->gen };
	return INNET_AGG_HDR_LEN;
}

/* The packet in hand answers with len bytes (a result is as long as the
 * contribution; a STALE answer is the header alone). */
static void answer_len(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t len)
{
	if (len != pkt->len)
		innet_pkt_resize(ctx, pkt, len);
}

/* Prepare copy idx for round `round`: closed while being zeroed, so nobody
 * claims it and readers of the old contents see the state change. */
static void reset_copy(struct innet_ctx *ctx, const struct agg_conf *c, uint32_t idx, uint32_t round)
{
	innet_reg_write(ctx, R_STATE, idx, st_make_tag(round) | ST_CLOSED);
	innet_reg_write(ctx, R_COUNT, idx, 0);
	innet_reg_write(ctx, R_EXP, idx, 0);
	innet_reg_write(ctx, R_OFF, idx, 0);
	innet_reg_write(ctx, R_CALL, idx, 0);
	struct agg_elems e = { .ctx = ctx, .base = idx * c->k, .k = c->k };
	AGG_ELEMENTS(&e, zero_a_piece, zero_a_run);
	if (innet_reg_read(ctx, R_ADDER, idx) & ADDER_B_USED)
		AGG_ELEMENTS(&e, zero_b_piece, zero_b_run);
	innet_reg_write(ctx, R_ADDER, idx, 0);
	innet_reg_write(ctx, R_STATE, idx, st_make_tag(round));
}

/* If copy idx holds round `tag`, closed, not yet emitted, and every claimant
 * has finished adding, claim the emission. True for exactly one caller per
 * round; that caller gets the final state word in *wout and must emit the
 * result. A caller may come late — the copy moved on to a later round, or
 * is being reset (closed, no claimant: reset_copy's zeroing) — and must then
 * not emit: hence the tag and the bitmap checks. */
static bool try_finish(struct innet_ctx *ctx, uint32_t idx, uint32_t tag, uint64_t *wout)
{
	uint64_t w = innet_reg_fetch_or(ctx, R_STATE, idx, 0);   /* seq-cst read */
	if (st_tag(w) != (tag & ST_TAG_MASK) || !(w & ST_CLOSED) || (w & ST_EMITTED) || !(w & ST_BITMAP))
		return false;
	uint64_t count = innet_reg_fetch_add(ctx, R_COUNT, idx, 0); /* seq-cst read */
	if (count != (uint64_t)popcount64(w & ST_BITMAP))
		return false; /* an adder is still at work: it will finish */
	if (!innet_reg_cas(ctx, R_STATE, idx, &w, w | ST_EMITTED))
		return false; /* only EMITTED can change a closed word: someone else won */
	*wout = w | ST_EMITTED;
	innet_alu(ctx, 23);
	return true;
}

/* The emission winner's work before sending: cancel the straggler timer and
 * open the other copy for the next round. */
static void finish_round(struct innet_ctx *ctx, const struct agg_conf *c, uint32_t idx, uint32_t round)
{
	innet_timer_cancel(ctx, idx);
	reset_copy(ctx, c, idx ^ 1u, round + 1);
}

/* ---- the job's run: generation and the members the rounds wait for ---- */

static inline uint32_t run_gen(uint64_t run)
{
	return (uint32_t)(run >> RUN_GEN_SHIFT) & INNET_AGG_GEN_MASK;
}

/* The members of a job of n workers that its rounds wait for. */
static inline uint64_t run_in(uint64_t run, uint8_t n)
{
	return all_workers(n) & ~(run & RUN_OUT);
}

/* Set and clear bits of the job's OUT set while the run is generation gen
 * (and not being reset). False if it is not, or the CAS kept losing. (The
 * straggler timer's: user space only; the handler's changes of OUT are one
 * CAS or a few, inline, for the eBPF verifier's sake.) */
static bool run_update_out(struct innet_ctx *ctx, uint32_t jx, uint32_t gen, uint64_t set, uint64_t clear)
{
	uint64_t run = innet_reg_read(ctx, R_RUN, jx);
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2; tries++) {
		if (run_gen(run) != gen || (run & RUN_RESETTING) || innet_faulted(ctx))
			return false;
		uint64_t next = (run | (set & RUN_OUT)) & ~(clear & RUN_OUT);
		if (next == run || innet_reg_cas(ctx, R_RUN, jx, &run, next))
			return true;
	}
	return false;
}

/* R_DEAF (agg.h): the job's deaf members in generation gen (another
 * generation's set is empty). */
static inline uint64_t deaf_read(struct innet_ctx *ctx, uint32_t jx, uint32_t gen)
{
	uint64_t d = innet_reg_read(ctx, R_DEAF, jx);
	return run_gen(d) == gen ? d & RUN_OUT : 0;
}

/* Add `set` to, and take `clear` from, the job's deaf members in generation
 * gen: two CASes at most (a step of its own: on XDP a subprogram, its locals
 * off its callers' stacks). False if both lost: a member left deaf a little
 * longer gets the result it misses by its retransmission's answer; the
 * timer, in user space, tries again. */
static AGG_STEP bool deaf_update(struct innet_ctx *ctx, uint32_t jx, uint32_t gen, uint64_t set, uint64_t clear)
{
	uint64_t d = innet_reg_read(ctx, R_DEAF, jx);
	for (uint32_t t = 0; t < 2; t++) {
		innet_alu(ctx, 6);
		uint64_t cur = run_gen(d) == gen ? d & RUN_OUT : 0;
		uint64_t next = ((uint64_t)gen << RUN_GEN_SHIFT) | ((cur | set) & ~clear & RUN_OUT);
		if (next == d || innet_faulted(ctx))
			return true;
		if (innet_reg_cas(ctx, R_DEAF, jx, &d, next))
			return true;
	}
	return false;
}

/* The group a result of copy state r->w goes to, the job's run being `run`:
 * the job's, or while exactly one member that did not contribute is deaf,
 * the job's group without it. A deaf member is out of the run, so the deaf
 * set is read only when some member that did not contribute is out (not on
 * the common path, everyone in). */
static inline __attribute__((always_inline)) uint16_t result_group(struct innet_ctx *ctx,
								  const struct agg_conf *c, uint16_t group,
								  uint64_t run, const struct agg_res *r)
{
	uint64_t out = run & RUN_OUT & ~r->w & all_workers(r->n_workers);
	innet_alu(ctx, 4);
	if (c->but_stride == 0 || out == 0)
		return group;
	uint64_t m = deaf_read(ctx, group, run_gen(run)) & out;
	innet_alu(ctx, 4);
	if (m == 0 || (m & (m - 1)) != 0)
		return group;
	innet_alu(ctx, 16);
	/* the member's index: the bits below its bit, counted (no ctz on BPF) */
	uint64_t x = m - 1;
	x = x - ((x >> 1) & 0x5555555555555555ull);
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return agg_but_group(c->but_base, c->but_stride, group, (uint32_t)((x * 0x0101010101010101ull) >> 56));
}

/* What close_try works on. */
struct agg_close {
	struct innet_ctx *ctx;
	uint64_t w;                /* the state word as last seen */
	uint64_t all;              /* the job's workers */
	uint64_t out;              /* members out of the run */
	uint32_t idx;
	uint32_t tag;
};

static long close_try(uint32_t i, void *arg)
{
	struct agg_close *z = arg;
	if (i == 0)
		z->w = innet_reg_read(z->ctx, R_STATE, z->idx);
	uint64_t w = z->w;
	innet_alu(z->ctx, 4);
	if (st_tag(w) != z->tag || (w & ST_CLOSED) || (((w & ST_BITMAP) | z->out) & z->all) != z->all ||
	    innet_faulted(z->ctx))
		return 1;
	return innet_reg_cas(z->ctx, R_STATE, z->idx, &z->w, w | ST_CLOSED) ? 1 : 0;
}

/* Round `tag` in copy idx: close it if every member the rounds wait for has
 * claimed (the last claimant sees every claim: the claims are CASes on the
 * word it read after its own). Members out of the run (`out`) are not waited
 * for; a timer that excluded one, or a leave, can so complete an open round,
 * which the next contribution or retransmission to it closes. */
static void close_if_covered(struct innet_ctx *ctx, uint32_t idx, uint32_t tag, uint64_t all, uint64_t out)
{
	struct agg_close z = { .ctx = ctx, .all = all, .out = out, .idx = idx, .tag = tag };
	innet_loop(INNET_AGG_MAX_WORKERS + 2, close_try, &z);
}

/* The newest finished round of global slot g as a join record (host order):
 * of the slot's two copies, the EMITTED one (both: the later tag). The
 * offset and call registers of a copy are written before its count++, so
 * they are final once EMITTED; the copy is re-read after them, and a copy
 * reset meanwhile (the slot moved on) is reported BUSY. */
static void join_rec(struct innet_ctx *ctx, uint32_t g, struct innet_agg_join_rec *r)
{
	uint64_t w0 = innet_reg_read(ctx, R_STATE, 2 * g), w1 = innet_reg_read(ctx, R_STATE, 2 * g + 1);
	bool e0 = w0 & ST_EMITTED, e1 = w1 & ST_EMITTED;
	*r = (struct innet_agg_join_rec){ 0 };
	if (!e0 && !e1)
		return;
	uint32_t ver = e1 ? 1u : 0u;
	if (e0 && e1)
		ver = ((st_tag(w1) - st_tag(w0)) & ST_TAG_MASK) < (ST_TAG_MASK + 1) / 2 ? 1u : 0u;
	uint32_t idx = 2 * g + ver;
	uint64_t w = ver ? w1 : w0;
	r->offset = (uint32_t)innet_reg_read(ctx, R_OFF, idx);
	r->call = (uint32_t)innet_reg_read(ctx, R_CALL, idx);
	if (innet_reg_fetch_or(ctx, R_STATE, idx, 0) != w) { /* seq-cst re-read */
		*r = (struct innet_agg_join_rec){ .state = INNET_AGG_JOIN_BUSY };
		return;
	}
	r->state = INNET_AGG_JOIN_DONE | st_tag(w);
}

/* What join_one works on. */
struct agg_join_recs {
	struct innet_ctx *ctx;
	struct innet_pkt *pkt;
	uint32_t g;                /* global slot of record 0 */
	uint32_t n;                /* records to fill; the rest are zero */
};

/* Record i of a JOINED answer (big-endian), in place of the request's. */
static long join_one(uint32_t i, void *arg)
{
	struct agg_join_recs *j = arg;
	uint8_t *rec = innet_pkt_ptr(j->pkt, INNET_AGG_HDR_LEN + 12u * i, 12);
	if (rec == NULL || innet_faulted(j->ctx))
		return 1;
	struct innet_agg_join_rec r = { 0 };
	if (i < j->n)
		join_rec(j->ctx, j->g + i, &r);
	struct innet_agg_join_rec be = { innet_be32(r.state), innet_be32(r.offset), innet_be32(r.call) };
	__builtin_memcpy(rec, &be, sizeof(be));
	return 0;
}

/* The sender of a CONTRIB, JOIN or LEAVE (whose length was checked): its
 * job, its worker id and slot in the job's range, for a CONTRIB the shadow
 * copy its round names, and its address against the members table — in that
 * order. Fills *job; 0, or the drop reason. */
static AGG_STEP unsigned agg_sender(struct innet_ctx *ctx, struct innet_pkt *pkt, bool contrib,
				    struct agg_job *job)
{
	const struct innet_agg_hdr *a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return AGG_TOO_SHORT;
	uint16_t job_id = innet_be16(a->job);
	uint32_t jkey = job_id;
	int rc = innet_table_lookup(ctx, T_JOBS, &jkey, job);
	if (rc != INNET_TABLE_OK)
		return rc == INNET_TABLE_BUSY ? INNET_DROP_TABLE_BUSY : AGG_UNKNOWN_JOB;
	if (a->worker >= job->n_workers)
		return AGG_BAD_WORKER;
	if (innet_be16(a->slot) >= job->slots)
		return AGG_BAD_SLOT;
	if (contrib && a->ver != (innet_be32(a->round) & 1))
		return AGG_BAD_VER;
	uint32_t mkey = agg_member_key(job_id, a->worker);
	struct agg_member m;
	rc = innet_table_lookup(ctx, T_MEMBERS, &mkey, &m);
	if (rc == INNET_TABLE_BUSY)
		return INNET_DROP_TABLE_BUSY;
	if (rc != INNET_TABLE_OK || m.ip != pkt->src.ip || m.udp != pkt->src.udp)
		return AGG_SPOOFED;
	return 0;
}

/* The timer argument of a copy's straggler timer (round) or of a job's reset
 * (tries so far), for job job_id in generation gen. */
static inline uint64_t timer_arg(uint32_t gen, uint16_t job_id, uint32_t low)
{
	return ((uint64_t)gen << 48) | ((uint64_t)job_id << 32) | low;
}

/* Register worker w's handle `nonce` with the job's run (START or REJOIN;
 * docs/aggregation.md, "Runs"). *st: JOINED OK, or WAIT (ask again). 0, or a
 * drop reason.
 *   REJOIN: the handle joins the run where it is, replacing any other of w;
 *           w is out of the run (not waited for) until it contributes.
 *   START:  the handle's first call. If w has no handle in this generation
 *           and the run is not over, it takes part in it. Otherwise w's
 *           earlier handle is gone: w is out, the handle waits (PENDING); when
 *           no member of the run is left in it, a new generation begins: every
 *           member in, the job's slots reset (the job's timer, in user
 *           space), and the waiting handles register in it on their next ask. */
/* What agg_register works on. */
struct agg_reg {
	struct innet_ctx *ctx;
	const struct agg_job *job;
	uint32_t nonce;            /* the handle's */
	uint32_t st;               /* out: JOINED OK or WAIT */
	uint16_t job_id;
	uint8_t worker;
	bool start;                /* START, else REJOIN */
	bool done;                 /* an outcome (st) */
};

/* One try of agg_register: each CAS that loses sends it round again (a
 * bpf_loop body on XDP). */
static long register_try(uint32_t i, void *arg)
{
	struct agg_reg *q = arg;
	struct innet_ctx *ctx = q->ctx;
	const struct agg_conf *c = innet_conf(ctx);
	uint32_t jx = q->job->group, ix = jx * INNET_AGG_MAX_WORKERS + (q->worker & 63);
	uint64_t bit = 1ull << (q->worker & 63), all = all_workers(q->job->n_workers);
	uint64_t run = innet_reg_read(ctx, R_RUN, jx), inc = innet_reg_read(ctx, R_INC, ix);
	q->st = INNET_AGG_JOINED_WAIT;
	q->done = true;
	if (innet_faulted(ctx) || (run & RUN_RESETTING))
		return 1; /* dropped with the fault's reason; or WAIT */
	q->done = false;
	innet_alu(ctx, 7);
	uint32_t g = run_gen(run);
	uint64_t mine = ((uint64_t)g << INC_GEN_SHIFT) | q->nonce;
	bool here = (uint32_t)inc != 0 && ((inc >> INC_GEN_SHIFT) & INNET_AGG_GEN_MASK) == g;
	if (!q->start) {
		/* REJOIN: this handle is w's; w out until it contributes */
		if (inc != mine && !innet_reg_cas(ctx, R_INC, ix, &inc, mine))
			return 0;
		if ((run | bit) != run && !innet_reg_cas(ctx, R_RUN, jx, &run, run | bit))
			return 0;
		q->st = INNET_AGG_JOINED_OK;
		q->done = true;
		return 1;
	}
	if (inc == mine) {
		q->st = INNET_AGG_JOINED_OK; /* registered by an earlier ask */
		q->done = true;
		return 1;
	}
	bool over = (run & RUN_OUT & all) == all;
	if (!here && !over) {
		/* w's first handle in this run: it takes part */
		if (!innet_reg_cas(ctx, R_INC, ix, &inc, mine))
			return 0;
		uint64_t again = innet_reg_read(ctx, R_RUN, jx);
		if (run_gen(again) != g || (again & RUN_RESETTING))
			return 0; /* a new run began meanwhile: register in that one */
		q->st = INNET_AGG_JOINED_OK;
		q->done = true;
		return 1;
	}
	/* w's earlier handle is gone (or the run is over): w is out */
	uint64_t next = run | bit;
	if ((next & RUN_OUT & all) == all) {
		/* nobody of this run is left in it: a new generation */
		uint32_t g1 = (g + 1) & INNET_AGG_GEN_MASK;
		if (!innet_reg_cas(ctx, R_RUN, jx, &run, ((uint64_t)g1 << RUN_GEN_SHIFT) | RUN_RESETTING))
			return 0;
		innet_reg_write(ctx, R_INC, ix, ((uint64_t)g1 << INC_GEN_SHIFT) | q->nonce);
		innet_timer_arm(ctx, 2 * c->slots + jx, 1000, timer_arg(g1, q->job_id, 0));
		q->done = true;
		return 1;
	}
	if (next != run && !innet_reg_cas(ctx, R_RUN, jx, &run, next))
		return 0;
	if (inc != (mine | INC_PENDING) && !innet_reg_cas(ctx, R_INC, ix, &inc, mine | INC_PENDING))
		return 0;
	q->done = true;
	return 1;
}

/* Register worker w's handle `nonce` with the job's run (START or REJOIN;
 * docs/aggregation.md, "Runs"). q->st: JOINED OK, or WAIT (ask again). 0, or
 * a drop reason.
 *   REJOIN: the handle joins the run where it is, replacing any other of w;
 *           w is out of the run (not waited for) until it contributes.
 *   START:  the handle's first call. If w has no handle in this generation
 *           and the run is not over, it takes part in it. Otherwise w's
 *           earlier handle is gone: w is out, the handle waits (PENDING); when
 *           no member of the run is left in it, a new generation begins: every
 *           member in, the job's slots reset (the job's timer, in user
 *           space), and the waiting handles register in it on their next ask. */
static AGG_STEP unsigned agg_register(struct innet_ctx *ctx, struct agg_reg *q)
{
	innet_loop(8, register_try, q);
	if (q->done && q->st == INNET_AGG_JOINED_OK) {
		/* heard from: the results go to it again (R_DEAF; here, not in
		 * agg_join, whose stack is on the eBPF limit's edge) */
		uint64_t run = innet_reg_read(ctx, R_RUN, q->job->group);
		innet_alu(ctx, 4);
		if (!(run & RUN_RESETTING))
			deaf_update(ctx, q->job->group, run_gen(run), 0, 1ull << (q->worker & 63));
	}
	return q->done ? 0 : AGG_CONTENDED;
}

/* LEAVE: the handle `nonce` of worker w is done; the run stops waiting for w. */
static AGG_STEP enum innet_action agg_leave(struct innet_ctx *ctx, struct innet_pkt *pkt,
					    const struct agg_job *job, uint8_t w, uint32_t nonce)
{
	uint32_t jx = job->group;
	uint64_t run = innet_reg_read(ctx, R_RUN, jx);
	uint64_t inc = innet_reg_read(ctx, R_INC, jx * INNET_AGG_MAX_WORKERS + (w & 63));
	uint32_t g = run_gen(run);
	if (nonce == 0 || inc != (((uint64_t)g << INC_GEN_SHIFT) | nonce) || (run & RUN_RESETTING))
		return innet_drop(pkt, AGG_NOT_REGISTERED);
	/* a few tries (contended only by membership changes of the same job;
	 * if all lose, the straggler timer puts w out instead) */
	uint64_t bit = 1ull << (w & 63);
	bool out = false;
	for (uint32_t tries = 0; tries < 4 && !out; tries++) {
		if (run_gen(run) != g || (run & RUN_RESETTING))
			break;
		out = (run & bit) || innet_reg_cas(ctx, R_RUN, jx, &run, run | bit);
	}
	/* gone: the results no longer go to it (a JOIN makes it hear again) */
	if (out)
		deaf_update(ctx, jx, g, bit, 0);
	innet_alu(ctx, 8);
	return INNET_CONSUMED;
}

/* JOIN (and START): where are slots [slot, slot + k) of the job? Answered in
 * place, unicast, never longer than the request; with a nonce the handle is
 * registered with the run first (agg_register). LEAVE: agg_leave. Records
 * only read: at most INNET_AGG_JOIN_MAX slots (the packet's size bounds the
 * loop). */
static AGG_STEP enum innet_action agg_join(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct innet_agg_hdr *a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return innet_drop(pkt, AGG_TOO_SHORT);
	bool leave = a->op == INNET_AGG_LEAVE;
	uint32_t want = innet_be16(a->k);
	if (leave ? (want != 0 || pkt->len != INNET_AGG_HDR_LEN)
		  : (want == 0 || pkt->len != INNET_AGG_HDR_LEN + 12u * want))
		return innet_drop(pkt, AGG_BAD_LENGTH);
	if (!leave && a->status > INNET_AGG_JOIN_START)
		return innet_drop(pkt, AGG_BAD_OP);
	struct agg_job job;
	unsigned why = agg_sender(ctx, pkt, false, &job);
	if (why != 0)
		return innet_drop(pkt, why);
	a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return innet_drop(pkt, AGG_TOO_SHORT);
	uint16_t job_id = innet_be16(a->job);
	uint8_t worker = a->worker;
	uint32_t nonce = innet_be32(a->offset);
	if (leave)
		return agg_leave(ctx, pkt, &job, worker, nonce);
	uint32_t st = INNET_AGG_JOINED_OK;
	if (nonce != 0) {
		struct agg_reg q = { .ctx = ctx, .job = &job, .nonce = nonce, .job_id = job_id, .worker = worker,
				     .start = a->status == INNET_AGG_JOIN_START };
		why = agg_register(ctx, &q);
		if (why != 0)
			return innet_drop(pkt, why);
		st = q.st;
	}
	uint64_t run = innet_reg_read(ctx, R_RUN, job.group);
	if (run & RUN_RESETTING)
		st = INNET_AGG_JOINED_WAIT;
	a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return innet_drop(pkt, AGG_TOO_SHORT);
	uint16_t slot = innet_be16(a->slot);
	struct agg_join_recs jr = { .ctx = ctx, .pkt = pkt, .g = job.slot_base + slot,
				    .n = job.slots - slot < want ? job.slots - slot : want };
	innet_loop(want, join_one, &jr);
	a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return innet_drop(pkt, AGG_TOO_SHORT);
	a->op = INNET_AGG_JOINED;
	a->status = (uint8_t)st;
	a->ver = 0;
	a->round = innet_be32(run_gen(run));
	a->offset = 0;
	a->exp = 0;
	a->gen = (uint8_t)run_gen(run);
	a->k = innet_be16((uint16_t)jr.n);
	a->call = 0;
	a->bitmap = innet_be64((run & RUN_RESETTING) ? 0 : run_in(run, job.n_workers));
	innet_alu(ctx, 18 + 7 * jr.n);
	return innet_reflect(pkt);
}

/* What claiming the worker's bit in its copy found. */
enum agg_claim {
	CLAIM_OK,          /* claimed: *w is the state word before the claim */
	CLAIM_EARLY,       /* the copy holds an earlier round (not opened yet) */
	CLAIM_STALE,       /* the copy was reused for a later round: *w */
	CLAIM_DUPLICATE,   /* open, and the worker's bit is set already */
	CLAIM_CONTENDED,   /* lost every CAS */
	CLAIM_PENDING,     /* closed, the result not out yet */
	CLAIM_FINISHED,    /* closed and emitted: *w, the result stands */
};

/* A claim in progress. */
struct agg_claim_try {
	struct innet_ctx *ctx;
	uint64_t w;                /* the state word as last seen */
	uint64_t bit;              /* the worker's */
	uint32_t idx;
	uint32_t tag;              /* the round's */
	enum agg_claim got;
};

/* One try: the copy's state word decides, or a CAS sets the worker's bit.
 * False when the CAS failed (another worker claimed, or the timer closed:
 * try again), true when c->got is the outcome. A fault ends the claim (the
 * packet is dropped with it). */
static inline bool claim_try(struct agg_claim_try *c)
{
	uint64_t w = c->w;
	uint32_t t = st_tag(w);
	if (t != c->tag)
		c->got = ((c->tag - t) & ST_TAG_MASK) < (ST_TAG_MASK + 1) / 2 ? CLAIM_EARLY : CLAIM_STALE;
	else if (w & ST_CLOSED)
		c->got = (w & ST_EMITTED) ? CLAIM_FINISHED : CLAIM_PENDING;
	else if (w & c->bit)
		c->got = CLAIM_DUPLICATE;
	else if (innet_reg_cas(c->ctx, R_STATE, c->idx, &c->w, w | c->bit))
		c->got = CLAIM_OK;
	else if (!innet_faulted(c->ctx))
		return false;
	return true;
}

/* Claim the worker's bit, atomically with the round and CLOSED checks. Each
 * failed CAS means another worker claimed (or the timer closed): bounded by
 * the number of workers. *wout: the state word the outcome is about. */
static AGG_STEP enum agg_claim agg_claim(struct innet_ctx *ctx, const struct agg_res *r, uint64_t *wout)
{
	struct agg_claim_try c = { .ctx = ctx, .bit = 1ull << (r->worker & 63), .idx = r->idx,
				   .tag = r->round & ST_TAG_MASK, .got = CLAIM_CONTENDED };
	c.w = innet_reg_read(ctx, R_STATE, r->idx);
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2; tries++)
		if (claim_try(&c))
			break;
	*wout = c.w;
	return c.got;
}

/* What agg_add did with a claimed contribution. */
enum agg_added {
	ADDED,             /* aggregated; the result comes later */
	ADDED_EMIT,        /* aggregated, and this packet won the emission */
	ADDED_NOT,         /* not: a new run began meanwhile (agg_unclaim) */
};

/* The claimed contribution. First the job's run again, read after the
 * claim's CAS (a reset of this copy that came before the CAS is seen here):
 * another generation now means the contribution raced with a new run's
 * reset (ADDED_NOT). Then: start the straggler timer if this is the round's first
 * claim, echo its offset and call, add its elements (bank A if free, else
 * B), max its exponent, count it; close the round if every member the run
 * waits for has claimed. ADDED_EMIT: this packet won the emission (the
 * final state word in r->w). */
static AGG_STEP enum agg_added agg_add(struct innet_ctx *ctx, struct innet_pkt *pkt, struct agg_res *r,
				       const struct agg_job *job, uint64_t w)
{
	const struct agg_conf *c = innet_conf(ctx);
	uint64_t run = innet_reg_read(ctx, R_RUN, job->group);
	if ((uint8_t)run_gen(run) != r->gen || (run & RUN_RESETTING))
		return ADDED_NOT;
	const struct innet_agg_hdr *a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return ADDED;
	uint32_t idx = r->idx, k = c->k;
	if ((w & ST_BITMAP) == 0 && job->timeout_us != 0)
		innet_timer_arm(ctx, idx, (uint64_t)job->timeout_us * 1000u,
				timer_arg(run_gen(run), r->job_id, r->round));
	innet_reg_write(ctx, R_OFF, idx, innet_be32(a->offset));
	innet_reg_write(ctx, R_CALL, idx, innet_be32(a->call));
	uint8_t exp = a->exp;
	struct agg_elems e = { .ctx = ctx, .pkt = pkt, .base = idx * k, .k = k };
	if (!(innet_reg_fetch_or(ctx, R_ADDER, idx, ADDER_EXCL) & ADDER_EXCL)) {
		/* bank A is ours until we release it: plain adds (wrapping) */
		AGG_ELEMENTS(&e, add_plain_piece, add_plain_run);
		innet_reg_fetch_and(ctx, R_ADDER, idx, ~(uint64_t)ADDER_EXCL);
	} else {
		/* another thread holds bank A right now: atomic adds into B */
		innet_reg_fetch_or(ctx, R_ADDER, idx, ADDER_B_USED);
		AGG_ELEMENTS(&e, add_atomic_piece, add_atomic_run);
	}
	innet_reg_fetch_max(ctx, R_EXP, idx, exp);
	innet_reg_fetch_add(ctx, R_COUNT, idx, 1);
	innet_alu(ctx, 4); /* the elements are counted by their spans */
	close_if_covered(ctx, idx, r->round & ST_TAG_MASK, all_workers(job->n_workers), run & RUN_OUT);
	return try_finish(ctx, idx, r->round, &r->w) ? ADDED_EMIT : ADDED;
}

/* A STALE answer for the copy now in state word w. */
static AGG_STEP enum innet_action agg_stale(struct innet_ctx *ctx, struct innet_pkt *pkt,
					    const struct agg_res *r, uint64_t w)
{
	answer_len(ctx, pkt, fill_stale(pkt, r, st_tag(w)));
	innet_alu(ctx, 5);
	return innet_reflect(pkt);
}

/* A contribution of an earlier generation (its run is over): RESTARTED. */
static AGG_STEP enum innet_action agg_restarted(struct innet_ctx *ctx, struct innet_pkt *pkt,
						const struct agg_res *r)
{
	answer_len(ctx, pkt, fill_restarted(pkt, r));
	innet_alu(ctx, 5);
	return innet_reflect(pkt);
}

/* A retransmission (or a straggler's late packet) for a finished round: the
 * result as it stands, to this worker only (STALE if the copy moved on
 * while being read). */
static AGG_STEP enum innet_action agg_resend(struct innet_ctx *ctx, struct innet_pkt *pkt,
					     struct agg_res *r)
{
	const struct agg_conf *c = innet_conf(ctx);
	uint32_t len = fill_result(ctx, c, pkt, r);
	if (innet_reg_read(ctx, R_STATE, r->idx) != r->w) {
		uint32_t t = st_tag(innet_reg_read(ctx, R_STATE, r->idx));
		len = fill_stale(pkt, r, t);
	}
	answer_len(ctx, pkt, len);
	return innet_reflect(pkt);
}

/* This packet won the emission of round r->round: turn the packet into the
 * result for the job's workers, cancel the timer, and open the other copy
 * for the next round. */
static AGG_STEP enum innet_action agg_emit(struct innet_ctx *ctx, struct innet_pkt *pkt,
					   struct agg_res *r, uint16_t group)
{
	const struct agg_conf *c = innet_conf(ctx);
	/* members out of the run whose contributions are in this round took
	 * part in it with the others: they are in step again, back in the run
	 * (one CAS: if it loses, the next round's emission does it), and heard
	 * from (not deaf) */
	uint64_t run = innet_reg_read(ctx, R_RUN, group), back = run & r->w & RUN_OUT;
	bool now = (uint8_t)run_gen(run) == r->gen && !(run & RUN_RESETTING);
	if (back != 0 && now) {
		innet_reg_cas(ctx, R_RUN, group, &run, run & ~back);
		deaf_update(ctx, group, run_gen(run), 0, back);
	}
	uint16_t to = now ? result_group(ctx, c, group, run, r) : group;
	/* the sums first, then the next round's copy: once it is open, a worker
	 * that got this result early (a retransmission's answer) can start the
	 * next round, whose end (a timer, or the members in) resets this copy */
	r->worker = 0xff;
	innet_alu(ctx, 2);
	answer_len(ctx, pkt, fill_result(ctx, c, pkt, r));
	finish_round(ctx, c, r->idx, r->round);
	return innet_multicast(pkt, to);
}

/* One try to take a claim back (a bpf_loop body). */
static long unclaim_try(uint32_t i, void *arg)
{
	struct agg_claim_try *u = arg;
	if (i == 0)
		u->w = innet_reg_read(u->ctx, R_STATE, u->idx);
	uint64_t w = u->w;
	if (st_tag(w) != u->tag || !(w & u->bit) || innet_faulted(u->ctx))
		return 1;
	return innet_reg_cas(u->ctx, R_STATE, u->idx, &u->w, w & ~u->bit) ? 1 : 0;
}

/* A contribution claimed while a new run began (it passed the generation
 * check before the job was reset, and claimed after): take the claim back,
 * and let a round it held up finish. True if this packet now wins that
 * round's emission (a round of the new run: r->gen is set to it); else the
 * sender's run is over (RESTARTED). */
static AGG_STEP bool agg_unclaim(struct innet_ctx *ctx, struct agg_res *r, const struct agg_job *job)
{
	struct agg_claim_try u = { .ctx = ctx, .bit = 1ull << (r->worker & 63), .idx = r->idx,
				   .tag = r->round & ST_TAG_MASK };
	innet_loop(INNET_AGG_MAX_WORKERS + 2, unclaim_try, &u);
	uint64_t run = innet_reg_read(ctx, R_RUN, job->group);
	r->gen = (uint8_t)run_gen(run);
	return !(run & RUN_RESETTING) && try_finish(ctx, r->idx, r->round, &r->w);
}

/* A duplicate for an open round, or a packet for a closed round whose
 * result is not out: if every member the run waits for is in the round now
 * (a member was excluded or left meanwhile), close it. True if the round is
 * ready and this packet won its emission. */
static AGG_STEP bool agg_nudge(struct innet_ctx *ctx, struct agg_res *r, const struct agg_job *job)
{
	uint64_t run = innet_reg_read(ctx, R_RUN, job->group);
	if ((uint8_t)run_gen(run) != r->gen || (run & RUN_RESETTING))
		return false;
	close_if_covered(ctx, r->idx, r->round & ST_TAG_MASK, all_workers(job->n_workers), run & RUN_OUT);
	return try_finish(ctx, r->idx, r->round, &r->w);
}

/* The job's run before the claim: the job's generation into r->gen; 0, a
 * drop reason (the job is being reset), or AGG_RESTARTED_ANSWER (the
 * contribution is of another generation: its run is over). */
#define AGG_RESTARTED_ANSWER 0xffffu
static AGG_STEP unsigned agg_run_check(struct innet_ctx *ctx, struct innet_pkt *pkt, struct agg_res *r,
				       const struct agg_job *job)
{
	const struct innet_agg_hdr *a = innet_pkt_ptr(pkt, sizeof(struct innet_hdr), sizeof(*a));
	if (a == NULL)
		return AGG_TOO_SHORT;
	uint64_t run = innet_reg_read(ctx, R_RUN, job->group);
	if (run & RUN_RESETTING)
		return AGG_RESETTING;
	r->gen = (uint8_t)run_gen(run);
	return a->gen != r->gen ? AGG_RESTARTED_ANSWER : 0;
}

static enum innet_action agg_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct agg_conf *c = innet_conf(ctx);
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, INNET_AGG_HDR_LEN);
	if (h == NULL)
		return innet_drop(pkt, AGG_TOO_SHORT);
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, AGG_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, AGG_BAD_VERSION);
	if (h->service != INNET_SVC_AGG)
		return innet_drop(pkt, AGG_WRONG_SERVICE);
	if (a->op == INNET_AGG_RESULT || a->op == INNET_AGG_JOINED)
		return innet_drop(pkt, AGG_IS_RESULT); /* never answer an answer */
	if (a->op == INNET_AGG_JOIN || a->op == INNET_AGG_LEAVE)
		return agg_join(ctx, pkt);
	if (a->op != INNET_AGG_CONTRIB)
		return innet_drop(pkt, AGG_BAD_OP);
	if (innet_be16(a->k) != c->k || pkt->len != INNET_AGG_HDR_LEN + 4 * c->k)
		return innet_drop(pkt, AGG_BAD_LENGTH);
	struct agg_res r = { .job_id = innet_be16(a->job), .slot = innet_be16(a->slot),
			     .round = innet_be32(a->round), .worker = a->worker };
	struct agg_job job;
	unsigned why = agg_sender(ctx, pkt, true, &job);
	if (why != 0)
		return innet_drop(pkt, why);
	innet_alu(ctx, 3);
	r.n_workers = job.n_workers;
	r.idx = 2 * (job.slot_base + r.slot) + (r.round & 1);
	/* the job's run: a contribution of another generation is from a run
	 * that is over (agg_add checks again after the claim: a reset may
	 * start meanwhile) */
	why = agg_run_check(ctx, pkt, &r, &job);
	if (why == AGG_RESTARTED_ANSWER)
		return agg_restarted(ctx, pkt, &r);
	if (why != 0)
		return innet_drop(pkt, why);
	uint64_t w;
	enum agg_claim got = agg_claim(ctx, &r, &w);
	innet_alu(ctx, 10);
	switch (got) {
	case CLAIM_OK:
		break;
	case CLAIM_EARLY:
		return innet_drop(pkt, AGG_EARLY); /* not opened yet */
	case CLAIM_STALE:
		return agg_stale(ctx, pkt, &r, w);
	case CLAIM_DUPLICATE:
		/* open, counted; but a member may have left the run meanwhile */
		if (agg_nudge(ctx, &r, &job))
			return agg_emit(ctx, pkt, &r, job.group);
		innet_alu(ctx, 8); /* the run read, the covered check's tail, try_finish's */
		return innet_drop(pkt, AGG_DUPLICATE);
	case CLAIM_CONTENDED:
		return innet_drop(pkt, AGG_CONTENDED);
	case CLAIM_PENDING:
		if (agg_nudge(ctx, &r, &job))
			return agg_emit(ctx, pkt, &r, job.group);
		innet_alu(ctx, 16);
		return innet_drop(pkt, AGG_PENDING);
	case CLAIM_FINISHED:
		r.w = w;
		return agg_resend(ctx, pkt, &r);
	}
	switch (agg_add(ctx, pkt, &r, &job, w)) {
	case ADDED:
		return INNET_CONSUMED; /* aggregated; the result comes later */
	case ADDED_EMIT:
		return agg_emit(ctx, pkt, &r, job.group);
	case ADDED_NOT:
		break;
	}
	if (agg_unclaim(ctx, &r, &job))
		return agg_emit(ctx, pkt, &r, job.group);
	return agg_restarted(ctx, pkt, &r);
}

/* What reset_one works on: a job's copies, for a new generation. */
struct agg_reset {
	struct innet_ctx *ctx;
	const struct agg_conf *c;
	uint32_t first;            /* the job's first copy */
	bool force;                /* reset copies with adders in flight too */
	bool busy;                 /* a copy had an adder in flight: try again */
};

/* Copy first + i of a job starting a new generation: closed (no claim can
 * land any more), and once every claimant has finished adding, back to a
 * fresh switch's state (round 0, open, zero). */
static long reset_one(uint32_t i, void *arg)
{
	struct agg_reset *z = arg;
	uint32_t idx = z->first + i;
	innet_timer_cancel(z->ctx, idx);
	uint64_t w = innet_reg_read(z->ctx, R_STATE, idx);
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2 && !(w & ST_CLOSED); tries++)
		if (innet_reg_cas(z->ctx, R_STATE, idx, &w, w | ST_CLOSED))
			w |= ST_CLOSED;
	uint64_t count = innet_reg_fetch_add(z->ctx, R_COUNT, idx, 0);
	w = innet_reg_fetch_or(z->ctx, R_STATE, idx, 0);
	if (!z->force && (!(w & ST_CLOSED) || count != (uint64_t)popcount64(w & ST_BITMAP))) {
		z->busy = true;
		return 0;
	}
	reset_copy(z->ctx, z->c, idx, 0);
	return innet_faulted(z->ctx) ? 1 : 0;
}

/* Tries of a job reset before it resets copies whose adders never finished
 * (a packet that faulted mid-add), 1 ms apart. */
#define AGG_RESET_TRIES 100u

/* The job reset timer (2 * slots + group): a new generation of job
 * (arg >> 32) began (agg_register); reset its copies, then open the run. */
static AGG_STEP void agg_reset_job(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	const struct agg_conf *c = innet_conf(ctx);
	uint32_t jx = timer - 2 * c->slots, gen = (uint32_t)(arg >> 48) & INNET_AGG_GEN_MASK;
	uint32_t jkey = (uint16_t)(arg >> 32), tries = (uint32_t)arg;
	struct agg_job job;
	if (innet_table_lookup(ctx, T_JOBS, &jkey, &job) != 0 || job.group != jx)
		return; /* the job was removed or redefined since */
	uint64_t run = innet_reg_read(ctx, R_RUN, jx);
	if (!(run & RUN_RESETTING) || run_gen(run) != gen)
		return; /* done, or a newer reset took over */
	struct agg_reset z = { .ctx = ctx, .c = c, .first = 2 * job.slot_base, .force = tries >= AGG_RESET_TRIES };
	innet_loop(2 * job.slots, reset_one, &z);
	if (innet_faulted(ctx))
		return;
	if (z.busy) {
		innet_timer_arm(ctx, timer, 1000000, timer_arg(gen, (uint16_t)jkey, tries + 1));
		return;
	}
	for (uint32_t t = 0; t < INNET_AGG_MAX_WORKERS + 2; t++) {
		if (!(run & RUN_RESETTING) || run_gen(run) != gen)
			return;
		if (innet_reg_cas(ctx, R_RUN, jx, &run, run & ~RUN_RESETTING))
			return;
	}
}

/* The straggler timer of copy `timer` (= idx): close the round if it is
 * still open, put the members that did not claim out of the run (the run's
 * rounds stop waiting for them), and emit the partial result if every
 * claimant has finished. Timers from 2 * slots on are the jobs' resets.
 * Runs in user space on both targets; the result is built in scratch memory
 * (up to INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX bytes: more than a stack
 * frame may hold). */
static void agg_on_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	const struct agg_conf *c = innet_conf(ctx);
	if (timer >= 2 * c->slots) {
		agg_reset_job(ctx, timer, arg);
		return;
	}
	_Static_assert(INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX <= INNET_SCRATCH_SIZE, "result in scratch");
	uint8_t *buf = innet_scratch(ctx);
	if (buf == NULL)
		return;
	uint32_t gen = (uint32_t)(arg >> 48) & INNET_AGG_GEN_MASK;
	struct agg_res r = { .job_id = (uint16_t)(arg >> 32), .round = (uint32_t)arg, .worker = 0xff,
			     .gen = (uint8_t)gen };
	uint32_t jkey = r.job_id;
	struct agg_job job;
	int rc = innet_table_lookup(ctx, T_JOBS, &jkey, &job);
	if (rc == INNET_TABLE_BUSY) {
		/* the job may be there: look again shortly (a timer can wait) */
		innet_timer_arm(ctx, timer, AGG_BUSY_RETRY_NS, arg);
		return;
	}
	if (rc != INNET_TABLE_OK)
		return;
	uint32_t idx = timer;
	if (idx / 2 < job.slot_base || idx / 2 >= job.slot_base + job.slots)
		return; /* the job was redefined since */
	uint64_t run = innet_reg_read(ctx, R_RUN, job.group);
	if (run_gen(run) != gen || (run & RUN_RESETTING))
		return; /* a round of a run that is over */
	uint64_t w = innet_reg_read(ctx, R_STATE, idx);
	bool closed = false;
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2 && !closed; tries++) {
		if (st_tag(w) != (r.round & ST_TAG_MASK) || (w & ST_CLOSED) || innet_faulted(ctx))
			return; /* finished in time, or another round by now */
		closed = innet_reg_cas(ctx, R_STATE, idx, &w, w | ST_CLOSED); /* w: the word closed */
	}
	if (!closed)
		return;
	/* the members that missed the round are out: later rounds close
	 * without them, until they contribute in time again or rejoin; and
	 * those that were in until now are deaf after this round's result
	 * (which still goes to them: it tells them they were left out). A
	 * member already out (rejoining, say) is not made deaf: it times its
	 * sends by the others' results. */
	uint64_t missed = all_workers(job.n_workers) & ~(w & ST_BITMAP);
	if (run_update_out(ctx, job.group, gen, missed, w & ST_BITMAP))
		for (uint32_t t = 0; t < 8 && !deaf_update(ctx, job.group, gen, missed & ~(run & RUN_OUT), 0); t++)
			;
	if (!try_finish(ctx, idx, r.round, &r.w))
		return; /* an adder in flight will emit */
	r.idx = idx;
	r.slot = (uint16_t)(idx / 2 - job.slot_base);
	r.n_workers = job.n_workers;
	uint32_t len = fill_result_buf(ctx, c, buf, &r); /* before the next round opens (agg_emit) */
	finish_round(ctx, c, idx, r.round);
	struct innet_out out = { .group = job.group };
	innet_emit(ctx, &out, true, buf, len);
}

INNET_DATAPATH(agg, agg_handle, agg_on_timer)
