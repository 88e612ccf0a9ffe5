/*
 * agg/dataplane.c — the aggregation program (Trio): streaming all-reduce of
 * int32 vectors in the switch, SwitchML/DAIET style, with Trio-ML's
 * timer-driven straggler mitigation. Protocol: src/agg/wire.h,
 * docs/aggregation.md.
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
 *   count == n: set CLOSED            timer (timeout_us after the first claim):
 *                                     CAS CLOSED if still open with tag r
 *   then try_finish: CLOSED, !EMITTED and count == popcount(bitmap) (every
 *   claimant finished adding) ── CAS EMITTED (exactly one thread wins) ──
 *   the winner resets the OTHER copy to tag r + 1 (it held round r - 1, which
 *   everyone has seen: they all sent round r) and multicasts the result.
 *
 * Round r + 1 can only start after some worker received round r's result,
 * so a copy is never reset while anyone may still add into it; replies read
 * a copy seqlock-style (state before == state after, else STALE).
 *
 * THREAD SAFETY: handlers run on several workers and on_timer on the timer
 * thread, all concurrently; every shared access is an atomic register
 * helper. The checks that must see each other's writes (a closer reading the
 * count, an adder reading CLOSED) use RMW reads (fetch_add 0 / fetch_or 0),
 * which are sequentially consistent.
 *
 * Late packets of a straggler: a contribution for a copy that is CLOSED and
 * EMITTED is answered (to that worker only) with the result as it stands —
 * PARTIAL with the bitmap that excludes it; its elements are not added, so
 * every worker ends the round with the same values. A contribution for a
 * round whose copy was reused is answered STALE. One arriving while the copy
 * is CLOSED but not yet EMITTED is dropped (pending); the worker retransmits.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "agg/wire.h"

enum { R_STATE, R_COUNT, R_EXP, R_OFF, R_VAL, R_VAL2, R_ADDER, R_CALL };

#define ADDER_EXCL    0x1u
#define ADDER_B_USED  0x2u
enum { T_JOBS, T_MEMBERS };

enum agg_drop {
	AGG_TOO_SHORT = INNET_DROP_PROGRAM,
	AGG_BAD_MAGIC,
	AGG_BAD_VERSION,
	AGG_WRONG_SERVICE,
	AGG_IS_RESULT,
	AGG_BAD_OP,
	AGG_BAD_LENGTH,
	AGG_UNKNOWN_JOB,
	AGG_BAD_WORKER,
	AGG_BAD_SLOT,
	AGG_BAD_VER,
	AGG_SPOOFED,
	AGG_DUPLICATE,
	AGG_PENDING,
	AGG_EARLY,
	AGG_CONTENDED,
};

static const char *const agg_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "is_result", "bad_op",
	"bad_length", "unknown_job", "bad_worker", "bad_slot", "bad_ver", "spoofed",
	"duplicate", "pending", "early", "contended",
};

#define ST_BITMAP   ((1ull << INNET_AGG_MAX_WORKERS) - 1)
#define ST_CLOSED   (1ull << 48)
#define ST_EMITTED  (1ull << 49)
#define ST_TAG_SHIFT 50
#define ST_TAG_MASK  0x3fffu

/* A job, as stored in the jobs table (memory order, host byte order). */
struct agg_job {
	uint32_t slot_base;    /* first global slot of the job's range */
	uint32_t slots;        /* slots in the range */
	uint32_t timeout_us;   /* straggler timeout; 0 = wait forever */
	uint16_t group;        /* multicast group of the job's workers */
	uint8_t n_workers;     /* workers 0..n-1 */
	uint8_t reserved;
};
_Static_assert(sizeof(struct agg_job) == 16, "jobs table value");

/* A worker's address, as stored in the members table. */
struct agg_member {
	uint32_t ip;           /* host order */
	uint16_t udp;
	uint16_t port;         /* switch port it is reached by */
};
_Static_assert(sizeof(struct agg_member) == 8, "members table value");

/* A job from the settings (installed by init). */
struct agg_job_conf {
	uint16_t id;
	struct agg_job job;
	uint32_t n_members;
	struct agg_member members[INNET_AGG_MAX_WORKERS];
};

struct agg_conf {
	uint32_t k;            /* elements per packet */
	uint32_t slots;        /* pool size */
	uint32_t max_jobs;     /* jobs table capacity = multicast groups */
	uint32_t n_jobs;       /* jobs from the settings */
	struct agg_job_conf jobs[];
};

/* The per-element loops (k up to 2294 per packet) are the program's hot
 * path; `flatten` inlines the register helpers into them (gcc and clang
 * otherwise keep innet_reg_read/write as calls: measured 3x slower). */
#define AGG_HOT __attribute__((flatten))

/* Bank A, held exclusively: el[0..k) (big-endian) added with plain loads
 * and stores, wrapping modulo 2^32. */
static AGG_HOT void add_plain(struct innet_ctx *ctx, uint32_t base, const uint32_t *el, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		innet_reg_write(ctx, R_VAL, base + i, innet_reg_read(ctx, R_VAL, base + i) + ntohl(el[i]));
}

/* Bank B, shared: atomic adds. */
static AGG_HOT void add_atomic(struct innet_ctx *ctx, uint32_t base, const uint32_t *el, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		innet_reg_fetch_add(ctx, R_VAL2, base + i, ntohl(el[i]));
}

/* el[0..k) = the sums (big-endian): bank A, plus bank B if it was used. */
static AGG_HOT void read_sums(struct innet_ctx *ctx, uint32_t base, uint32_t *el, uint32_t k, bool b_used)
{
	if (b_used) {
		for (uint32_t i = 0; i < k; i++)
			el[i] = htonl((uint32_t)(innet_reg_read(ctx, R_VAL, base + i) +
						 innet_reg_read(ctx, R_VAL2, base + i)));
	} else {
		for (uint32_t i = 0; i < k; i++)
			el[i] = htonl((uint32_t)innet_reg_read(ctx, R_VAL, base + i));
	}
}

/* Zero k elements of register r from base. */
static AGG_HOT void zero_vals(struct innet_ctx *ctx, unsigned r, uint32_t base, uint32_t k)
{
	for (uint32_t i = 0; i < k; i++)
		innet_reg_write(ctx, r, base + i, 0);
}

static inline uint32_t member_key(uint16_t job, uint8_t worker)
{
	return ((uint32_t)job << 8) | worker;
}

static inline uint32_t st_tag(uint64_t w)
{
	return (uint32_t)(w >> ST_TAG_SHIFT) & ST_TAG_MASK;
}

static inline uint64_t st_make_tag(uint32_t round)
{
	return (uint64_t)(round & ST_TAG_MASK) << ST_TAG_SHIFT;
}

static inline uint64_t all_workers(uint8_t n)
{
	return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* Fill buf (room for the full packet) with the result held by copy idx,
 * whose state word is w. Returns the packet length. */
static uint32_t fill_result(struct innet_ctx *ctx, const struct agg_conf *c, uint8_t *buf,
			    uint16_t job_id, const struct agg_job *job, uint16_t slot, uint32_t round,
			    uint8_t worker, uint64_t w, uint32_t idx)
{
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	uint64_t bitmap = w & ST_BITMAP;
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_AGG };
	a->op = INNET_AGG_RESULT;
	a->status = bitmap == all_workers(job->n_workers) ? INNET_AGG_COMPLETE : INNET_AGG_PARTIAL;
	a->job = htons(job_id);
	a->slot = htons(slot);
	a->ver = (uint8_t)(round & 1);
	a->worker = worker;
	a->round = htonl(round);
	a->offset = htonl((uint32_t)innet_reg_read(ctx, R_OFF, idx));
	a->exp = (uint8_t)innet_reg_read(ctx, R_EXP, idx);
	a->n_contrib = (uint8_t)__builtin_popcountll(bitmap);
	a->k = htons((uint16_t)c->k);
	a->call = htonl((uint32_t)innet_reg_read(ctx, R_CALL, idx));
	a->bitmap = htobe64(bitmap);
	uint32_t *el = (uint32_t *)(a + 1);
	uint32_t base = idx * c->k;
	bool b_used = innet_reg_read(ctx, R_ADDER, idx) & ADDER_B_USED;
	read_sums(ctx, base, el, c->k, b_used);
	innet_alu(ctx, 12 + (b_used ? 2 : 1) * c->k);
	return INNET_AGG_HDR_LEN + 4 * c->k;
}

/* A STALE answer: header only; round = the round the copy holds now (the
 * worker fell behind it). */
static uint32_t fill_stale(uint8_t *buf, uint16_t job_id, uint16_t slot, uint32_t round,
			   uint8_t worker, uint32_t copy_tag)
{
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_AGG };
	/* The copy's full round: the packet's round moved to the copy's tag. */
	uint32_t now = round + ((copy_tag - round) & ST_TAG_MASK);
	*a = (struct innet_agg_hdr){ .op = INNET_AGG_RESULT, .status = INNET_AGG_STALE,
				     .job = htons(job_id), .slot = htons(slot),
				     .ver = (uint8_t)(round & 1), .worker = worker,
				     .round = htonl(now) };
	return INNET_AGG_HDR_LEN;
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
	uint32_t base = idx * c->k;
	zero_vals(ctx, R_VAL, base, c->k);
	if (innet_reg_read(ctx, R_ADDER, idx) & ADDER_B_USED)
		zero_vals(ctx, R_VAL2, base, c->k);
	innet_reg_write(ctx, R_ADDER, idx, 0);
	innet_reg_write(ctx, R_STATE, idx, st_make_tag(round));
}

/* If copy idx is closed, not yet emitted and every claimant has finished
 * adding, claim the emission. True for exactly one caller per round; that
 * caller gets the final state word in *wout and must emit the result. */
static bool try_finish(struct innet_ctx *ctx, uint32_t idx, uint64_t *wout)
{
	uint64_t w = innet_reg_fetch_or(ctx, R_STATE, idx, 0);   /* seq-cst read */
	if (!(w & ST_CLOSED) || (w & ST_EMITTED))
		return false;
	uint64_t count = innet_reg_fetch_add(ctx, R_COUNT, idx, 0); /* seq-cst read */
	if (count != (uint64_t)__builtin_popcountll(w & ST_BITMAP))
		return false; /* an adder is still at work: it will finish */
	if (!innet_reg_cas(ctx, R_STATE, idx, &w, w | ST_EMITTED))
		return false; /* only EMITTED can change a closed word: someone else won */
	*wout = w | ST_EMITTED;
	return true;
}

/* The emission winner's work before sending: cancel the straggler timer and
 * open the other copy for the next round. */
static void finish_round(struct innet_ctx *ctx, const struct agg_conf *c, uint32_t idx, uint32_t round)
{
	innet_timer_cancel(ctx, idx);
	reset_copy(ctx, c, idx ^ 1u, round + 1);
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

/* JOIN: where are slots [slot, slot + k) of the job? Answered in place,
 * unicast, never longer than the request. Reads only: at most
 * INNET_AGG_JOIN_MAX slots (the packet's size bounds the loop). */
static enum innet_action agg_join(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(pkt->data + sizeof(struct innet_hdr));
	uint32_t want = ntohs(a->k);
	if (want == 0 || pkt->len != INNET_AGG_HDR_LEN + 12u * want)
		return innet_drop(pkt, AGG_BAD_LENGTH);
	uint16_t job_id = ntohs(a->job);
	uint32_t jkey = job_id;
	struct agg_job job;
	if (innet_table_lookup(ctx, T_JOBS, &jkey, &job) != 0)
		return innet_drop(pkt, AGG_UNKNOWN_JOB);
	uint8_t wid = a->worker;
	if (wid >= job.n_workers)
		return innet_drop(pkt, AGG_BAD_WORKER);
	uint16_t slot = ntohs(a->slot);
	if (slot >= job.slots)
		return innet_drop(pkt, AGG_BAD_SLOT);
	uint32_t mkey = member_key(job_id, wid);
	struct agg_member m;
	if (innet_table_lookup(ctx, T_MEMBERS, &mkey, &m) != 0 || m.ip != pkt->src.ip ||
	    m.udp != pkt->src.udp)
		return innet_drop(pkt, AGG_SPOOFED);
	uint32_t n = job.slots - slot < want ? job.slots - slot : want;
	uint8_t *recs = pkt->data + INNET_AGG_HDR_LEN;
	for (uint32_t i = 0; i < want; i++) {
		struct innet_agg_join_rec r = { 0 };
		if (i < n)
			join_rec(ctx, job.slot_base + slot + i, &r);
		struct innet_agg_join_rec be = { htonl(r.state), htonl(r.offset), htonl(r.call) };
		__builtin_memcpy(recs + 12u * i, &be, sizeof(be));
	}
	a->op = INNET_AGG_JOINED;
	a->status = 0;
	a->ver = 0;
	a->round = 0;
	a->offset = 0;
	a->exp = 0;
	a->n_contrib = 0;
	a->k = htons((uint16_t)n);
	a->call = 0;
	a->bitmap = 0;
	innet_alu(ctx, 16 + 6 * n);
	return innet_reflect(pkt);
}

static enum innet_action agg_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct agg_conf *c = innet_conf(ctx);
	if (pkt->len < INNET_AGG_HDR_LEN)
		return innet_drop(pkt, AGG_TOO_SHORT);
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, AGG_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, AGG_BAD_VERSION);
	if (h->service != INNET_SVC_AGG)
		return innet_drop(pkt, AGG_WRONG_SERVICE);
	if (a->op == INNET_AGG_RESULT || a->op == INNET_AGG_JOINED)
		return innet_drop(pkt, AGG_IS_RESULT); /* never answer an answer */
	if (a->op == INNET_AGG_JOIN)
		return agg_join(ctx, pkt);
	if (a->op != INNET_AGG_CONTRIB)
		return innet_drop(pkt, AGG_BAD_OP);
	if (ntohs(a->k) != c->k || pkt->len != INNET_AGG_HDR_LEN + 4 * c->k)
		return innet_drop(pkt, AGG_BAD_LENGTH);

	uint16_t job_id = ntohs(a->job);
	uint32_t jkey = job_id;
	struct agg_job job;
	if (innet_table_lookup(ctx, T_JOBS, &jkey, &job) != 0)
		return innet_drop(pkt, AGG_UNKNOWN_JOB);
	uint8_t wid = a->worker;
	if (wid >= job.n_workers)
		return innet_drop(pkt, AGG_BAD_WORKER);
	uint16_t slot = ntohs(a->slot);
	if (slot >= job.slots)
		return innet_drop(pkt, AGG_BAD_SLOT);
	uint32_t round = ntohl(a->round);
	if (a->ver != (round & 1))
		return innet_drop(pkt, AGG_BAD_VER);
	uint32_t mkey = member_key(job_id, wid);
	struct agg_member m;
	if (innet_table_lookup(ctx, T_MEMBERS, &mkey, &m) != 0 || m.ip != pkt->src.ip ||
	    m.udp != pkt->src.udp)
		return innet_drop(pkt, AGG_SPOOFED);
	innet_alu(ctx, 16);

	uint32_t idx = 2 * (job.slot_base + slot) + a->ver;
	uint32_t tag = round & ST_TAG_MASK;
	uint64_t bit = 1ull << wid;

	/* Claim the worker's bit, atomically with the round and CLOSED checks.
	 * Each failed CAS means another worker claimed (or the timer closed):
	 * bounded by the number of workers. */
	uint64_t w = innet_reg_read(ctx, R_STATE, idx);
	bool claimed = false;
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2; tries++) {
		uint32_t t = st_tag(w);
		if (t != tag) {
			if (((tag - t) & ST_TAG_MASK) < (ST_TAG_MASK + 1) / 2)
				return innet_drop(pkt, AGG_EARLY); /* not opened yet */
			pkt->len = fill_stale(pkt->data, job_id, slot, round, wid, t);
			return innet_reflect(pkt);
		}
		if (w & ST_CLOSED)
			break;
		if (w & bit)
			return innet_drop(pkt, AGG_DUPLICATE); /* open, already counted */
		if (innet_reg_cas(ctx, R_STATE, idx, &w, w | bit)) {
			claimed = true;
			break;
		}
	}
	if (!claimed) {
		if (!(w & ST_CLOSED))
			return innet_drop(pkt, AGG_CONTENDED);
		if (!(w & ST_EMITTED))
			return innet_drop(pkt, AGG_PENDING);
		/* A retransmission (or a straggler's late packet) for a finished
		 * round: the result as it stands, to this worker only. */
		uint32_t len = fill_result(ctx, c, pkt->data, job_id, &job, slot, round, wid, w, idx);
		if (innet_reg_read(ctx, R_STATE, idx) != w) {
			uint32_t t = st_tag(innet_reg_read(ctx, R_STATE, idx));
			len = fill_stale(pkt->data, job_id, slot, round, wid, t);
		}
		pkt->len = len;
		return innet_reflect(pkt);
	}

	/* First contribution of the round: start the straggler timer. */
	if ((w & ST_BITMAP) == 0 && job.timeout_us != 0)
		innet_timer_arm(ctx, idx, (uint64_t)job.timeout_us * 1000u,
				((uint64_t)job_id << 32) | round);
	innet_reg_write(ctx, R_OFF, idx, ntohl(a->offset));
	innet_reg_write(ctx, R_CALL, idx, ntohl(a->call));
	const uint32_t *el = (const uint32_t *)(a + 1);
	uint32_t base = idx * c->k;
	if (!(innet_reg_fetch_or(ctx, R_ADDER, idx, ADDER_EXCL) & ADDER_EXCL)) {
		/* bank A is ours until we release it: plain adds (wrapping) */
		add_plain(ctx, base, el, c->k);
		innet_reg_fetch_and(ctx, R_ADDER, idx, ~(uint64_t)ADDER_EXCL);
	} else {
		/* another thread holds bank A right now: atomic adds into B */
		innet_reg_fetch_or(ctx, R_ADDER, idx, ADDER_B_USED);
		add_atomic(ctx, base, el, c->k);
	}
	innet_reg_fetch_max(ctx, R_EXP, idx, a->exp);
	uint64_t done = innet_reg_fetch_add(ctx, R_COUNT, idx, 1) + 1;
	innet_alu(ctx, 2 * c->k + 4);
	if (done == job.n_workers)
		innet_reg_fetch_or(ctx, R_STATE, idx, ST_CLOSED); /* complete: nobody else can claim */
	uint64_t wf;
	if (!try_finish(ctx, idx, &wf))
		return INNET_CONSUMED; /* aggregated; the result comes later */
	finish_round(ctx, c, idx, round);
	pkt->len = fill_result(ctx, c, pkt->data, job_id, &job, slot, round, 0xff, wf, idx);
	return innet_multicast(pkt, job.group);
}

/* The straggler timer of copy `timer` (= idx): close the round if it is
 * still open, and emit the partial result if every claimant has finished. */
static void agg_on_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	const struct agg_conf *c = innet_conf(ctx);
	uint16_t job_id = (uint16_t)(arg >> 32);
	uint32_t round = (uint32_t)arg;
	uint32_t jkey = job_id;
	struct agg_job job;
	if (innet_table_lookup(ctx, T_JOBS, &jkey, &job) != 0)
		return;
	uint32_t idx = timer;
	if (idx / 2 < job.slot_base || idx / 2 >= job.slot_base + job.slots)
		return; /* the job was redefined since */
	uint64_t w = innet_reg_read(ctx, R_STATE, idx);
	for (uint32_t tries = 0; tries < INNET_AGG_MAX_WORKERS + 2; tries++) {
		if (st_tag(w) != (round & ST_TAG_MASK) || (w & ST_CLOSED))
			return; /* finished in time, or another round by now */
		if (innet_reg_cas(ctx, R_STATE, idx, &w, w | ST_CLOSED))
			break;
	}
	uint64_t wf;
	if (!try_finish(ctx, idx, &wf))
		return; /* an adder in flight will emit */
	finish_round(ctx, c, idx, round);
	uint8_t buf[INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX];
	uint16_t slot = (uint16_t)(idx / 2 - job.slot_base);
	uint32_t len = fill_result(ctx, c, buf, job_id, &job, slot, round, 0xff, wf, idx);
	struct innet_out out = { .group = job.group };
	innet_emit(ctx, &out, true, buf, len);
}

/* ------------------------------------------------------------------------ */
/* Settings                                                                   */

/* "IP:UDP" or "PORT@IP:UDP". */
static int parse_member(const char *s, struct agg_member *m)
{
	char ip[64];
	unsigned port = 0, udp;
	const char *at = strchr(s, '@');
	if (at != NULL) {
		if (sscanf(s, "%u@", &port) != 1 || port >= INNET_MAX_PORTS)
			return -1;
		s = at + 1;
	}
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	struct in_addr in;
	char *end;
	unsigned long u = strtoul(colon + 1, &end, 10);
	if (inet_pton(AF_INET, ip, &in) != 1 || *end != '\0' || colon[1] == '\0' || u == 0 || u > 65535)
		return -1;
	udp = (unsigned)u;
	m->ip = ntohl(in.s_addr);
	m->udp = (uint16_t)udp;
	m->port = (uint16_t)port;
	return 0;
}

static int json_uint(json_t *o, const char *key, uint64_t def, uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
	    (uint64_t)json_integer_value(v) > max)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_jobs(struct innet_decl *d, json_t *jobs, struct agg_conf *c)
{
	size_t i;
	json_t *j;
	uint32_t next_base = 0;
	json_array_foreach(jobs, i, j) {
		struct agg_job_conf *jc = &c->jobs[i];
		uint64_t id, workers, slots, base, timeout;
		if (!json_is_object(j))
			return innet_decl_error(d, "jobs[%zu] must be an object", i);
		const char *key;
		json_t *v;
		json_object_foreach(j, key, v) {
			if (strcmp(key, "id") && strcmp(key, "workers") && strcmp(key, "slots") &&
			    strcmp(key, "slot_base") && strcmp(key, "timeout_us") && strcmp(key, "members"))
				return innet_decl_error(d, "jobs[%zu]: unknown key '%s'", i, key);
		}
		if (json_object_get(j, "id") == NULL || json_object_get(j, "workers") == NULL)
			return innet_decl_error(d, "jobs[%zu] needs 'id' and 'workers'", i);
		if (json_uint(j, "id", 0, 0, 65535, &id) != 0)
			return innet_decl_error(d, "jobs[%zu].id must be in [0, 65535]", i);
		if (json_uint(j, "workers", 0, 1, INNET_AGG_MAX_WORKERS, &workers) != 0)
			return innet_decl_error(d, "jobs[%zu].workers must be in [1, %u]", i,
						INNET_AGG_MAX_WORKERS);
		if (json_uint(j, "slots", 64, 1, 65535, &slots) != 0)
			return innet_decl_error(d, "jobs[%zu].slots must be in [1, 65535]", i);
		if (json_uint(j, "slot_base", next_base, 0, c->slots, &base) != 0)
			return innet_decl_error(d, "jobs[%zu].slot_base must be in [0, %u]", i, c->slots);
		if (json_uint(j, "timeout_us", 0, 0, 60000000, &timeout) != 0)
			return innet_decl_error(d, "jobs[%zu].timeout_us must be in [0, 60000000]", i);
		if (base + slots > c->slots)
			return innet_decl_error(d, "jobs[%zu]: slots [%llu, %llu) beyond the pool of %u", i,
						(unsigned long long)base, (unsigned long long)(base + slots),
						c->slots);
		for (size_t p = 0; p < i; p++) {
			const struct agg_job_conf *o = &c->jobs[p];
			if (o->id == id)
				return innet_decl_error(d, "jobs[%zu]: job id %llu defined twice", i,
							(unsigned long long)id);
			if (base < o->job.slot_base + o->job.slots && o->job.slot_base < base + slots)
				return innet_decl_error(d, "jobs[%zu]: slots overlap job %u's", i, o->id);
		}
		jc->id = (uint16_t)id;
		jc->job = (struct agg_job){ .slot_base = (uint32_t)base, .slots = (uint32_t)slots,
					    .timeout_us = (uint32_t)timeout, .group = (uint16_t)i,
					    .n_workers = (uint8_t)workers };
		next_base = (uint32_t)(base + slots);
		json_t *mem = json_object_get(j, "members");
		if (mem != NULL) {
			if (!json_is_array(mem) || json_array_size(mem) != workers)
				return innet_decl_error(d, "jobs[%zu].members must list all %llu workers", i,
							(unsigned long long)workers);
			size_t mi;
			json_t *ms;
			json_array_foreach(mem, mi, ms) {
				if (!json_is_string(ms) || parse_member(json_string_value(ms), &jc->members[mi]) != 0)
					return innet_decl_error(d, "jobs[%zu].members[%zu]: expected \"IP:UDP\" "
								"or \"PORT@IP:UDP\"", i, mi);
			}
			jc->n_members = (uint32_t)workers;
		}
	}
	return 0;
}

static int agg_setup(struct innet_decl *d, struct innet_args *a)
{
	uint64_t k, slots, max_jobs;
	int rc;
	if ((rc = innet_args_u64(a, "k", 256, 1, INNET_AGG_K_MAX, &k)) != 0 ||
	    (rc = innet_args_u64(a, "slots", 1024, 1, 65536, &slots)) != 0 ||
	    (rc = innet_args_u64(a, "max_jobs", 16, 1, INNET_MAX_GROUPS, &max_jobs)) != 0)
		return rc;
	json_t *jobs = innet_args_json(a, "jobs");
	size_t n_jobs = 0;
	if (jobs != NULL) {
		if (!json_is_array(jobs))
			return innet_decl_error(d, "setting 'jobs' must be an array of job objects");
		n_jobs = json_array_size(jobs);
		if (n_jobs > max_jobs)
			return innet_decl_error(d, "%zu jobs, more than max_jobs = %llu", n_jobs,
						(unsigned long long)max_jobs);
	}
	if (slots * 2 * k > (1ull << 26))
		return innet_decl_error(d, "slots x k too large (%llu x %llu)", (unsigned long long)slots,
					(unsigned long long)k);
	struct agg_conf *c = calloc(1, sizeof(*c) + n_jobs * sizeof(c->jobs[0]));
	if (c == NULL)
		return -ENOMEM;
	c->k = (uint32_t)k;
	c->slots = (uint32_t)slots;
	c->max_jobs = (uint32_t)max_jobs;
	c->n_jobs = (uint32_t)n_jobs;
	innet_decl_priv(d, c);
	if (jobs != NULL && (rc = parse_jobs(d, jobs, c)) != 0)
		return rc;
	uint32_t copies = 2 * c->slots;
	if ((rc = innet_decl_reg(d, R_STATE, "state", 8, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_COUNT, "count", 4, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_EXP, "exp", 1, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_OFF, "offset", 4, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_VAL, "values", 4, copies * c->k)) != 0 ||
	    (rc = innet_decl_reg(d, R_VAL2, "values_b", 4, copies * c->k)) != 0 ||
	    (rc = innet_decl_reg(d, R_ADDER, "adder", 1, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_CALL, "call", 4, copies)) != 0 ||
	    (rc = innet_decl_table(d, T_JOBS, "jobs", 4, sizeof(struct agg_job), c->max_jobs)) != 0 ||
	    (rc = innet_decl_table(d, T_MEMBERS, "members", 4, sizeof(struct agg_member),
				   c->max_jobs * INNET_AGG_MAX_WORKERS)) != 0 ||
	    (rc = innet_decl_groups(d, c->max_jobs)) != 0 ||
	    (rc = innet_decl_timers(d, copies)) != 0)
		return rc;
	return 0;
}

static int agg_init(struct innet_cp *cp, void *priv)
{
	struct agg_conf *c = priv;
	const struct innet_switch_conf *sc = innet_switch_conf(innet_cp_switch(cp));
	for (uint32_t i = 0; i < c->n_jobs; i++) {
		struct agg_job_conf *jc = &c->jobs[i];
		uint32_t key = jc->id;
		int rc = innet_cp_table_add(cp, T_JOBS, &key, &jc->job);
		if (rc != 0)
			return rc;
		struct innet_member gm[INNET_AGG_MAX_WORKERS];
		for (uint32_t w = 0; w < jc->n_members; w++) {
			if (jc->members[w].port >= sc->n_ports) {
				fprintf(stderr, "innet: program '%s': job %u member %u uses port %u; the "
						"switch has %u ports\n", innet_cp_name(cp), jc->id, w,
					jc->members[w].port, sc->n_ports);
				return -EINVAL;
			}
			uint32_t mkey = member_key(jc->id, (uint8_t)w);
			if ((rc = innet_cp_table_add(cp, T_MEMBERS, &mkey, &jc->members[w])) != 0)
				return rc;
			gm[w] = (struct innet_member){ .port = jc->members[w].port, .ip = jc->members[w].ip,
						       .udp = jc->members[w].udp };
		}
		if (jc->n_members > 0 && (rc = innet_cp_group_set(cp, jc->job.group, gm, jc->n_members)) != 0)
			return rc;
	}
	return 0;
}

const struct innet_program innet_prog_agg = {
	.name = "agg",
	.summary = "in-network all-reduce of int32 vectors (SwitchML/DAIET) with straggler timers",
	.model = INNET_MODEL_TRIO,
	.parse_bytes = INNET_AGG_HDR_LEN,
	.drop_reasons = agg_drop_names,
	.n_drop_reasons = sizeof(agg_drop_names) / sizeof(agg_drop_names[0]),
	.setup = agg_setup,
	.init = agg_init,
	.handle = agg_handle,
	.on_timer = agg_on_timer,
};
