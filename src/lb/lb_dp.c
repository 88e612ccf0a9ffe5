/*
 * lb/lb_dp.c — the data path of the load balancer program "lb" (Trio): an
 * accelerator-aware L4 balancer in the style of P4Mite, with Maglev
 * consistent hashing, per-connection consistency and authenticated load
 * reports from agents. The handler and the sweep timer; the control side is
 * lb.c (setup, the program), config.c (settings), ctl.c (init, on_cpu: the
 * reports' verification and the sweep, commands). docs/lb.md is the user's
 * page; innet/lb.h the report format.
 *
 * One handler, dispatched on what arrives:
 *
 *   datagram to the report port ─► cheap checks (length, magic/version,
 *       service, type) ─► to_cpu ─► control thread: verify (MAC, fields, ids,
 *       kind, seq > last) ─► unit state registers        (ctl.c, lb_on_cpu)
 *   proxy: datagram to a VIP port ─► conn table / policy ─► NAT port ─► unit  (full NAT)
 *   proxy: datagram to a NAT port from a unit ─► reverse table ─► client, from the VIP port
 *   packet: frame for a VIP ─► conn table / policy ─► DNAT + checksums ─► unit's raw port
 *   packet: frame from a unit ─► reverse table ─► SNAT back to the VIP ─► client's port
 *   packet: frame with a report (UDP to the report port) ─► as a datagram's
 *   (packet mode, both ways: a partial TCP/UDP checksum from a sender with tx
 *   offload is completed first; TTL - 1; source MAC = the egress port's MAC)
 *
 * New connections (not in the table): the VIP's policy picks a unit —
 *
 *   none    the pool's first eligible unit (the no-balancing baseline)
 *   ecmp    hash(flow) mod eligible units
 *   maglev  weighted Maglev table over units (maglev.c)
 *   wrr     smooth weighted round robin: a precomputed cycle and an atomic counter
 *   p2c     two random eligible units, the less loaded (reported load)
 *   accel   P4Mite: Maglev over servers, then the DIP table (server, state) -> unit:
 *           the CPU while under its threshold; when it is busy, a random split of
 *           new connections over the server's usable units in proportion to their
 *           remaining capacity, weight x (256 - reported load level)
 *
 * "Eligible" is static (configured, not drained/removed, weight > 0) and is
 * what the control thread builds the tables from; "usable" adds the reported
 * state (available, not silent for down_after_ms; a unit whose agent never
 * reported is usable unless the "unreported" setting says otherwise:
 * lb_unit_health in lb.h). A table entry that names an unusable unit probes
 * up to LB_PROBES further entries, then falls back to hashing over the
 * eligible list: units going down never need a rebuild, and flows of the
 * others do not move.
 *
 * Connection table (per-connection consistency): T_CONN maps the flow to its
 * unit (and NAT port); the reverse table T_REV maps the unit's side back to
 * the client. A counting Bloom filter in R_BLOOM (3 hashes, u8 counters,
 * saturating) recognises most new flows without a table lookup. Entries age
 * out: lazily when their flow comes back after idle_timeout_ms (or
 * tcp_closing_ms after a FIN/RST), and by a sweep on the control thread every
 * sweep_ms (triggered by the timer's self-addressed sweep datagram in proxy
 * mode; in packet mode, whose raw ports have no address, by the first frame
 * that finds a sweep due: it is handed to the control thread, which sends it
 * and then sweeps; and by accepted agent reports in both modes, which the
 * control thread verifies anyway). A full table refuses new connections
 * (drop "conn_table_full", counted): translating replies needs the reverse
 * entry, so there is no stateless fallback. A connection never moves: not
 * when units are added, removed, drained, re-weighted or change state;
 * removed and drained units keep their connections until they idle out.
 *
 * Double buffering: the control thread builds the Maglev tables, eligible
 * list and WRR cycle of a pool into the idle half of each register and then
 * bumps R_POOL_VER[pool]; the handler reads the version before and after its
 * lookups and retries (boundedly) if it changed, so it never uses a half-built
 * table. DIP entries are single bytes rewritten in place; the handler
 * re-checks the unit it gets.
 *
 * Reports are not verified here: the MAC (HMAC-SHA256, libsodium) needs
 * what a data path cannot have. The handler refuses what it can see without
 * the key and hands the rest to the control thread (innet_to_cpu), which
 * verifies and writes the unit state registers the handler reads; its
 * rejections are counted under the same drop reasons (innet_cp_count_drop).
 *
 * Both targets run this file: the user-space engine, and XDP (compiled with
 * clang -target bpf; the kernel's verifier processes about 320K
 * instructions of it, and its deepest chain of frames takes 480 of the 512
 * bytes of stack: `innet switch --check`). What that takes:
 *   - loops whose bodies touch registers run in innet_loop (bpf_loop on XDP:
 *     the verifier checks a body a few times, not once per iteration and
 *     path), down to a Bloom counter's compare-and-swap retries;
 *   - the handler's steps, and each table operation, are functions of their
 *     own (LB_STEP; on XDP a BPF subprogram with its own stack frame), and a
 *     new connection is found and its unit picked in the handler's own frame
 *     (conn_get): the deepest chain (policy, probe loop, a server's units)
 *     has room;
 *   - the working state is in scratch memory (struct lb_scratch: one part
 *     per stage), not on the stack; what the verifier reads back from there
 *     is a value it need not follow exactly, so paths that differ only there
 *     look alike to it; a step's drop reason goes out through the caller's
 *     `why` (never in the same value as its result);
 *   - a pass stops at its first fault (LB_STOP_IF_FAULTED);
 *   - the frame code checks its packet pointers inside functions of its own
 *     (frame.h), so no checked range outlives them.
 *
 * THREAD SAFETY: handlers run on several workers (CPUs on XDP); flows reach
 * one worker, so one flow's entry has one writer in the data plane. A table
 * lookup that meets another writer (the control plane) stopped inside the
 * entry is BUSY: the packet is dropped (conn_busy), never balanced anew
 * (docs/lb.md, "Connection table"). The sweep
 * (control thread) and the handler's lazy expiry both delete entries:
 * whoever's delete succeeds releases the NAT port, Bloom counters and unit
 * count. The control thread writes unit registers with atomic stores and
 * frees NAT bits with an atomic and.
 */
#include "lb/wire.h"
#include "innet/dp.h"
#include "lb/lb.h"
#include "lb/frame.h"

/* The handler's steps: functions of their own, never inlined (on XDP a BPF
 * subprogram each, with its own stack frame); helpers of more than five
 * arguments (a BPF call takes five) and small ones are always inlined. */
#define LB_STEP __attribute__((noinline))
#define LB_INLINE static inline __attribute__((always_inline))

/* Stateless work (innet_alu; docs/resources.md, "What innet_alu counts"):
 * each step reports the ALU operations its eBPF code executes, as the ALU
 * check counts them (INNET_TEST_TARGET=alu build/tests/golden/test_lb fails
 * when a pass's report and its count drift apart; ALU_CHECK_VERBOSE=1 shows
 * every innet_alu call against the operations counted since the one
 * before). Loop bodies report per iteration. Completing a partial L4
 * checksum sums the segment: about 2 operations a byte. */
#define LB_ALU_CSUM(l4_len) (27u + 2u * (uint32_t)(l4_len))

/* The handler's working state: in innet_scratch() memory, not on the stack.
 * On XDP the engine's frame and the deepest chain of calls (a new
 * connection's pick: step, policy, probe loop, a server's units) share 512
 * bytes; and what the verifier reads back from memory is a value it need not
 * follow exactly, so the paths that lead to a step (a VIP index, say) do not
 * each need checking again. One part per stage of the handler, each written
 * by that stage before it reads it (contents are undefined on entry); the
 * loop bodies of a stage (innet_loop callbacks, which get only a pointer)
 * share its part. */

/* The packet's flow and its connection: the directions (proxy_flow,
 * frame_flow, the replies) and conn_get with its steps. */
struct lb_flow {
	struct lb_conn_key k;        /* the flow's connection */
	struct lb_conn_val v;        /* ... its entry */
	struct lb_rev_key rk;        /* the reverse entry's key */
	struct lb_rev_val rv;        /* a new connection's reverse entry; a reply's client */
	struct lb_uaddr_key uk;      /* a reply's source address */
	uint32_t unit;               /* ... its unit (T_UADDR's value) */
	uint32_t vip;                /* the VIP index */
	uint32_t may_create;         /* a new flow gets an entry (not: a TCP non-SYN) */
	uint64_t h;                  /* the flow hash */
};

/* A pick of a unit for a new connection: pick_unit, a policy's probe loop. */
struct lb_pick {
	uint32_t pool, buf;          /* the pool and its live half */
	uint32_t base, n;            /* list/cycle: first element, length */
	uint64_t start;              /* list/cycle: the first position looked at */
	uint32_t found;              /* a probe's unit, LB_NONE until found */
	uint32_t picked;             /* pick_unit's unit */
};

/* accel: the DIP table's choice inside one server (dip_pick, dip_split). */
struct lb_dip {
	uint32_t srv;                /* the server */
	uint32_t avail, busy;        /* bit u: unit u usable, busy */
	uint64_t levels;             /* unit u's reported level in bits 8u..8u+7 */
	uint64_t w_lo, w_hi;         /* unit u's weight in bits 16u.. of w_lo (u < 4), of w_hi */
	uint32_t total;              /* the split: sum of the remaining capacities */
	uint32_t x;                  /* the split: the draw, in [0, total) */
	uint32_t found;              /* the split's unit, LB_NONE until found */
};

/* A Bloom filter update (bloom_add). */
struct lb_bloom_op {
	int64_t delta;               /* +1 or -1 */
	uint32_t idx;                /* the counter being updated */
	uint64_t seen;               /* its value as last seen */
};

/* A NAT port allocation (nat_alloc). */
struct lb_nat_op {
	uint32_t unit;               /* the unit whose NAT ports are looked at */
	int32_t port;                /* the NAT port index taken, -1 until then */
};

struct lb_scratch {
	struct lb_frame fr;          /* packet mode: the frame as parsed (frame_parse) */
	struct lb_flow flow;
	struct lb_pick pick;
	struct lb_dip dip;
	struct lb_bloom_op bloom;
	struct lb_nat_op nat;
};
_Static_assert(sizeof(struct lb_scratch) <= INNET_SCRATCH_SIZE, "lb's state fits the scratch memory");

/* What steps and loop bodies get (innet_loop's arg): the pointers stay on
 * the stack, where the verifier keeps track of them. */
struct lb_cb {
	struct innet_ctx *ctx;
	const struct lb_conf *c;
	struct lb_scratch *s;
};

/* What conn_get (and conn_new) made of a flow to a VIP. A drop's reason goes
 * out through the caller's `why`, never in the same value. */
enum lb_conn {
	LB_CONN_ENTRY = 0,     /* its connection, in s->flow.v (found or made) */
	LB_CONN_STATELESS,     /* balanced without an entry (packet mode: a TCP segment
	                        * of an unknown connection): s->flow.v.unit only */
	LB_CONN_DROP,          /* drop the packet, for the reason in *why */
	LB_CONN_FAULT,         /* a helper faulted: the packet is dropped with the
	                        * fault's reason, whatever the verdict says */
};

/* A pass stops at its first fault: the packet is dropped with the fault's
 * reason whatever the handler returns, and on XDP the verifier then follows
 * no faulted state through the rest of the handler (each fault reason would
 * be one more copy of every path after it). */
#define LB_STOP_IF_FAULTED(ctx, ret)          \
	do {                                  \
		if (innet_faulted(ctx))       \
			return (ret);         \
	} while (0)

/* ------------------------------------------------------------------------ */
/* Unit state                                                                 */

LB_INLINE uint32_t now_ms(const struct innet_ctx *ctx)
{
	return (uint32_t)(innet_now(ctx) / 1000000u);
}

LB_INLINE void stat_inc(struct innet_ctx *ctx, unsigned st)
{
	innet_reg_fetch_add(ctx, R_STATS, st, 1);
}

/* Is the unit in slot usable for a new connection? 0 if not; else
 * LB_USABLE, LB_BUSY if it counts as busy, and its reported load level
 * (0..255) in bits 8..15 (a value, not pointers to locals: no stack). */
#define LB_USABLE 0x1u
#define LB_BUSY   0x2u
#define LB_LEVEL(u) (((u) >> 8) & 0xffu)
LB_INLINE uint32_t unit_state(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t slot)
{
	if (slot >= LB_MAX_UNIT_SLOTS)
		return 0;
	uint64_t m = innet_reg_read(ctx, R_UNIT_META, slot);
	if ((LB_META_FLAGS(m) & (LB_UF_CONFIGURED | LB_UF_DRAINED | LB_UF_REMOVED)) != LB_UF_CONFIGURED ||
	    LB_META_WEIGHT(m) == 0)
		return 0;
	uint32_t st = (uint32_t)innet_reg_read(ctx, R_UNIT_STATE, slot);
	int64_t silent_ns = 0; /* since its last report (or its configuration) */
	if (c->down_after_ms != 0)
		silent_ns = (int64_t)(innet_now(ctx) - innet_reg_read(ctx, R_UNIT_SEEN, slot));
	if (lb_unit_health(c, st, silent_ns) == LB_HEALTH_DOWN)
		return 0;
	uint32_t l = (st >> 8) & 0xff;
	uint32_t th = LB_META_KIND(m) == INNET_LB_KIND_ACCEL ? c->threshold[INNET_LB_KIND_ACCEL]
							     : c->threshold[INNET_LB_KIND_CPU];
	innet_alu(ctx, 8);
	bool busy = (st & INNET_LB_ST_BUSY) || l >= th;
	return LB_USABLE | (busy ? LB_BUSY : 0u) | l << 8;
}

/* ------------------------------------------------------------------------ */
/* Policies                                                                   */

LB_INLINE uint32_t maglev_at(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t pool,
			     uint32_t kind, uint32_t buf, uint64_t pos)
{
	uint64_t base = ((uint64_t)(pool * 2 + kind) * 2 + buf) * c->maglev_size;
	return (uint32_t)innet_reg_read(ctx, R_MAGLEV, (uint32_t)(base + pos % c->maglev_size));
}

/* A probe found a usable unit: stop there. */
LB_INLINE long found(struct lb_cb *a, uint32_t slot, bool fallback)
{
	if (fallback)
		stat_inc(a->ctx, LB_ST_FALLBACK);
	a->s->pick.found = slot;
	return 1;
}

/* The eligible list (s->pick.base, s->pick.n) from position s->pick.start:
 * the first usable unit. */
static long list_probe_one(uint32_t i, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	uint32_t n = s->pick.n;
	if (n == 0)
		return 1;
	uint32_t slot = (uint32_t)innet_reg_read(a->ctx, R_LIST,
						 s->pick.base + (uint32_t)((s->pick.start + i) % n));
	innet_alu(a->ctx, 16);
	if (unit_state(a->ctx, a->c, slot) != 0)
		return found(a, slot, i > 0);
	return innet_faulted(a->ctx);
}

LB_INLINE uint32_t list_probe(struct lb_cb *a, uint32_t pool, uint32_t buf, uint64_t start)
{
	struct lb_scratch *s = a->s;
	uint32_t n = (uint32_t)innet_reg_read(a->ctx, R_LIST_N, pool * 2 + buf);
	if (n == 0 || n > LB_MAX_UNIT_SLOTS)
		return LB_NONE;
	s->pick.base = (pool * 2 + buf) * LB_MAX_UNIT_SLOTS;
	s->pick.n = n;
	s->pick.start = start;
	s->pick.found = LB_NONE;
	innet_loop(n < LB_PROBES ? n : LB_PROBES, list_probe_one, a);
	return s->pick.found;
}

/* maglev: the flow's entry, then LB_PROBES - 1 more, 7919 apart. */
static long maglev_probe_one(uint32_t k, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	uint32_t slot = maglev_at(a->ctx, a->c, s->pick.pool, LB_MG_UNITS, s->pick.buf,
				  s->flow.h + (uint64_t)k * 7919u);
	innet_alu(a->ctx, 13);
	if (slot != LB_NONE && unit_state(a->ctx, a->c, slot) != 0)
		return found(a, slot, k > 0);
	return innet_faulted(a->ctx);
}

/* wrr: the cycle (s->pick.base, s->pick.n) from the counter's position
 * s->pick.start. */
static long wrr_probe_one(uint32_t i, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	uint32_t n = s->pick.n;
	if (n == 0)
		return 1;
	uint32_t slot = (uint32_t)innet_reg_read(a->ctx, R_WRR,
						 s->pick.base + (uint32_t)((s->pick.start + i) % n));
	innet_alu(a->ctx, 14);
	if (unit_state(a->ctx, a->c, slot) != 0)
		return found(a, slot, false);
	return innet_faulted(a->ctx);
}

/* Unit u of server s->dip.srv: usable? busy? its level. */
static long dip_unit_one(uint32_t u, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	u &= LB_UNITS_PER_SERVER - 1;
	uint32_t us = unit_state(a->ctx, a->c, s->dip.srv * LB_UNITS_PER_SERVER + u);
	if (us != 0) {
		s->dip.avail |= 1u << u;
		s->dip.busy |= (uint32_t)((us & LB_BUSY) != 0) << u;
		s->dip.levels |= (uint64_t)LB_LEVEL(us) << (8u * u);
		innet_alu(a->ctx, 9);
	}
	return innet_faulted(a->ctx);
}

/* Unit u's remaining capacity, weight x (256 - level), from the weights
 * dip_weight_one read (0 for an unusable unit). */
LB_INLINE uint32_t dip_rem(const struct lb_scratch *s, uint32_t u)
{
	if (!(s->dip.avail >> u & 1))
		return 0;
	uint64_t w = u < 4 ? s->dip.w_lo >> (16u * u) : s->dip.w_hi >> (16u * (u - 4));
	return (uint32_t)(w & 0xffffu) * (256u - (uint32_t)((s->dip.levels >> (8u * u)) & 0xffu));
}

static long dip_weight_one(uint32_t u, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	u &= LB_UNITS_PER_SERVER - 1;
	if (!(s->dip.avail >> u & 1))
		return 0;
	uint64_t w = LB_META_WEIGHT(innet_reg_read(a->ctx, R_UNIT_META,
						   s->dip.srv * LB_UNITS_PER_SERVER + u));
	if (u < 4)
		s->dip.w_lo |= w << (16u * u);
	else
		s->dip.w_hi |= w << (16u * (u - 4));
	s->dip.total += dip_rem(s, u);
	innet_alu(a->ctx, 18);
	return innet_faulted(a->ctx);
}

static long dip_draw_one(uint32_t u, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	u &= LB_UNITS_PER_SERVER - 1;
	uint32_t rem = dip_rem(s, u);
	innet_alu(a->ctx, 9);
	if (s->dip.x < rem) {
		s->dip.found = s->dip.srv * LB_UNITS_PER_SERVER + u;
		return 1;
	}
	s->dip.x -= rem;
	return 0;
}

/* The DIP table's LB_DIP_SPLIT: one new connection goes to usable unit u
 * of server srv with probability
 *
 *     rem(u) / sum of rem,   rem(u) = weight(u) x (256 - load level(u))
 *
 * (its remaining capacity: a unit's weight is its capacity share, the level
 * its agent's utilisation estimate, 0..255). One draw of innet_random per
 * new connection; the connection table keeps the choice, so no existing
 * connection moves when levels change. At most 8 x 65535 x 256 < 2^32. */
LB_INLINE uint32_t dip_split(struct lb_cb *a)
{
	struct lb_scratch *s = a->s;
	s->dip.w_lo = s->dip.w_hi = 0;
	s->dip.total = 0;
	innet_loop(LB_UNITS_PER_SERVER, dip_weight_one, a);
	LB_STOP_IF_FAULTED(a->ctx, LB_NONE);
	if (s->dip.total == 0)
		return LB_NONE;
	s->dip.x = (uint32_t)(((uint64_t)innet_random(a->ctx) * s->dip.total) >> 32);
	innet_alu(a->ctx, 31);
	s->dip.found = LB_NONE;
	innet_loop(LB_UNITS_PER_SERVER, dip_draw_one, a);
	return s->dip.found;
}

/* P4Mite's choice inside server s->dip.srv: the DIP table indexed by the units'
 * available and busy bits: a unit (the CPU, not busy), or a split by
 * remaining capacity. */
LB_INLINE uint32_t dip_pick(struct lb_cb *a)
{
	struct lb_scratch *s = a->s;
	s->dip.avail = s->dip.busy = 0;
	s->dip.levels = 0;
	innet_loop(LB_UNITS_PER_SERVER, dip_unit_one, a);
	LB_STOP_IF_FAULTED(a->ctx, LB_NONE);
	uint32_t srv = s->dip.srv, avail = s->dip.avail;
	if (avail == 0 || srv >= INNET_LB_MAX_SERVERS)
		return LB_NONE;
	uint32_t dv = (uint32_t)innet_reg_read(a->ctx, R_DIP,
					       srv * LB_DIP_STATES + (s->dip.busy << 8 | avail));
	innet_alu(a->ctx, 28);
	if (dv == LB_DIP_SPLIT)
		return dip_split(a);
	if (dv >= LB_UNITS_PER_SERVER || !(avail >> dv & 1))
		return LB_NONE; /* no usable unit, or an entry being rewritten */
	return srv * LB_UNITS_PER_SERVER + dv;
}

/* accel: a server from the Maglev table over servers, then its DIP table. */
static long accel_probe_one(uint32_t k, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	uint32_t srv = maglev_at(a->ctx, a->c, s->pick.pool, LB_MG_SERVERS, s->pick.buf,
				 s->flow.h + (uint64_t)k * 7919u);
	innet_alu(a->ctx, 15);
	if (srv >= INNET_LB_MAX_SERVERS)
		return innet_faulted(a->ctx);
	s->dip.srv = srv;
	uint32_t slot = dip_pick(a);
	if (slot != LB_NONE)
		return found(a, slot, k > 0);
	return innet_faulted(a->ctx);
}

/* p2c: two random eligible units, the less loaded (then fewer connections). */
static LB_STEP uint32_t p2c_pick(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t pool,
				 uint32_t buf)
{
	uint32_t n = (uint32_t)innet_reg_read(ctx, R_LIST_N, pool * 2 + buf);
	if (n == 0 || n > LB_MAX_UNIT_SLOTS)
		return LB_NONE;
	uint32_t base = (pool * 2 + buf) * LB_MAX_UNIT_SLOTS;
	uint32_t a = (uint32_t)innet_reg_read(ctx, R_LIST, base + innet_random(ctx) % n);
	uint32_t b = (uint32_t)innet_reg_read(ctx, R_LIST, base + innet_random(ctx) % n);
	innet_alu(ctx, 16);
	uint32_t sa = unit_state(ctx, c, a), sb = unit_state(ctx, c, b);
	bool ua = sa != 0, ub = sb != 0;
	if (ua && ub) {
		/* effective load: the level, plus 256 when busy */
		uint32_t la = LB_LEVEL(sa) + (sa & LB_BUSY ? 256u : 0u);
		uint32_t lbv = LB_LEVEL(sb) + (sb & LB_BUSY ? 256u : 0u);
		/* Equal load: fewer connections wins. */
		if (la == lbv)
			return innet_reg_read(ctx, R_UNIT_CONNS, a) <= innet_reg_read(ctx, R_UNIT_CONNS, b) ? a : b;
		return la < lbv ? a : b;
	}
	if (ua || ub)
		return ua ? a : b;
	return LB_NONE;
}

/* One pick for the flow (s->flow.h) to VIP v on half buf of its pool's tables. */
static LB_STEP uint32_t pick_once(struct lb_cb *a, const struct lb_vip *v, uint32_t buf)
{
	struct innet_ctx *ctx = a->ctx;
	struct lb_scratch *s = a->s;
	uint32_t pool = v->pool;
	s->pick.pool = pool;
	s->pick.buf = buf;
	s->pick.found = LB_NONE;
	switch (v->policy) {
	case LB_POL_NONE:
		return list_probe(a, pool, buf, 0);
	case LB_POL_ECMP:
		break;
	case LB_POL_MAGLEV:
		innet_loop(LB_PROBES, maglev_probe_one, a);
		LB_STOP_IF_FAULTED(ctx, LB_NONE);
		if (s->pick.found != LB_NONE)
			return s->pick.found;
		break;
	case LB_POL_WRR:
		s->pick.n = (uint32_t)innet_reg_read(ctx, R_WRR_N, pool * 2 + buf);
		if (s->pick.n == 0 || s->pick.n > LB_WRR_MAX)
			break;
		s->pick.start = innet_reg_fetch_add(ctx, R_WRR_CTR, pool, 1);
		s->pick.base = (pool * 2 + buf) * LB_WRR_MAX;
		innet_loop(LB_PROBES, wrr_probe_one, a);
		LB_STOP_IF_FAULTED(ctx, LB_NONE);
		if (s->pick.found != LB_NONE)
			return s->pick.found;
		break;
	case LB_POL_P2C: {
		uint32_t slot = p2c_pick(ctx, a->c, pool, buf);
		LB_STOP_IF_FAULTED(ctx, LB_NONE);
		if (slot != LB_NONE)
			return slot;
		break;
	}
	case LB_POL_ACCEL:
		innet_loop(LB_PROBES, accel_probe_one, a);
		LB_STOP_IF_FAULTED(ctx, LB_NONE);
		if (s->pick.found != LB_NONE)
			return s->pick.found;
		break;
	}
	/* ecmp, and the fallback of the others: hash over the eligible list. */
	uint32_t n = (uint32_t)innet_reg_read(ctx, R_LIST_N, pool * 2 + buf);
	LB_STOP_IF_FAULTED(ctx, LB_NONE);
	return n == 0 ? LB_NONE : list_probe(a, pool, buf, (s->flow.h >> 17) % n);
}

/* pick_unit's loop: one pick on the live half of the pool's tables; done
 * unless the control thread flipped them meanwhile (then again, at most 3
 * tries). */
static long pick_try_one(uint32_t t, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	const struct lb_vip *v = &a->c->vips[innet_index(s->flow.vip, INNET_LB_MAX_VIPS)];
	uint32_t ver = (uint32_t)innet_reg_read(a->ctx, R_POOL_VER, v->pool);
	s->pick.picked = pick_once(a, v, ver & 1);
	if (innet_faulted(a->ctx))
		return 1;
	return (uint32_t)innet_reg_read(a->ctx, R_POOL_VER, v->pool) == ver;
}

/* Pick a unit for a new connection (flow hash s->flow.h) to VIP s->flow.vip,
 * on a consistent view of the pool's tables (retry if the control thread
 * flipped them meanwhile). */
static LB_STEP uint32_t pick_unit(struct lb_cb *a)
{
	a->s->pick.picked = LB_NONE;
	innet_loop(3, pick_try_one, a);
	LB_STOP_IF_FAULTED(a->ctx, LB_NONE);
	return a->s->pick.picked;
}

/* ------------------------------------------------------------------------ */
/* Bloom filter and NAT ports                                                 */

LB_INLINE uint32_t bloom_idx(const struct lb_conf *c, uint64_t h, unsigned i)
{
	return (uint32_t)(h >> (21 * i)) & (c->bloom_size - 1);
}

LB_INLINE bool bloom_maybe(struct innet_ctx *ctx, const struct lb_conf *c, uint64_t h)
{
	for (unsigned i = 0; i < 3; i++) {
		innet_alu(ctx, 2);
		if (innet_reg_read(ctx, R_BLOOM, bloom_idx(c, h, i)) == 0)
			return false;
	}
	return true;
}

/* One try to move counter s->bloom.idx (value s->bloom.seen) by
 * s->bloom.delta: saturated counters stay (they can no longer be decremented
 * safely), and so do empty ones asked to go down. */
static long bloom_try_one(uint32_t t, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	int64_t delta = s->bloom.delta;
	uint64_t v = s->bloom.seen;
	if (v == 255 || (delta < 0 && v == 0))
		return 1;
	if (innet_reg_cas(a->ctx, R_BLOOM, s->bloom.idx, &v, (uint64_t)((int64_t)v + delta)))
		return 1;
	s->bloom.seen = v;
	return innet_faulted(a->ctx);
}

/* bloom_add's loop: counter i of the flow s->flow.h, at most 8 tries (a loop of
 * its own: on XDP a 1-byte compare-and-swap is a loop on the word that holds
 * it). */
static long bloom_add_one(uint32_t i, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	s->bloom.idx = bloom_idx(a->c, s->flow.h, i);
	innet_alu(a->ctx, 6);
	s->bloom.seen = innet_reg_read(a->ctx, R_BLOOM, s->bloom.idx);
	if (innet_faulted(a->ctx))
		return 1;
	innet_loop(8, bloom_try_one, a);
	return innet_faulted(a->ctx);
}

LB_INLINE void bloom_add(struct lb_cb *a, int delta)
{
	a->s->bloom.delta = delta;
	innet_loop(3, bloom_add_one, a);
}

LB_INLINE uint64_t nat_mask(const struct lb_conf *c, uint32_t w)
{
	uint32_t rem = c->n_nat - w * 64;
	return rem >= 64 ? ~0ull : (1ull << rem) - 1;
}

/* The index of the lowest set bit of x != 0 (__builtin_ctzll may become a
 * library call, which a data path cannot make). */
LB_INLINE unsigned lowest_bit(uint64_t x)
{
	uint64_t b = (x & (~x + 1)) - 1; /* the bits below the lowest set one */
	b = b - ((b >> 1) & 0x5555555555555555ull);
	b = (b & 0x3333333333333333ull) + ((b >> 2) & 0x3333333333333333ull);
	b = (b + (b >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (unsigned)((b * 0x0101010101010101ull) >> 56);
}

/* nat_alloc's loop: word (s->flow.h + i) mod words of unit s->nat.unit's NAT
 * bitmap. */
static long nat_word_one(uint32_t i, void *arg)
{
	struct lb_cb *a = arg;
	struct lb_scratch *s = a->s;
	uint32_t nw = a->c->nat_words;
	if (nw == 0)
		return 1;
	uint32_t w = (uint32_t)((s->flow.h + i) % nw);
	uint32_t idx = s->nat.unit * nw + w;
	innet_alu(a->ctx, 4);
	uint64_t v = innet_reg_read(a->ctx, R_NATMAP, idx);
	for (int tries = 0; tries < 4; tries++) {
		uint64_t free_ = ~v & nat_mask(a->c, w);
		innet_alu(a->ctx, 7);
		if (free_ == 0)
			break;
		unsigned bit = lowest_bit(free_);
		innet_alu(a->ctx, 4);
		if (innet_reg_cas(a->ctx, R_NATMAP, idx, &v, v | 1ull << bit)) {
			s->nat.port = (int32_t)(w * 64 + bit);
			return 1;
		}
	}
	return innet_faulted(a->ctx);
}

/* A free NAT port toward unit slot for the flow s->flow.h: its index, or -1. */
LB_INLINE int nat_alloc(struct lb_cb *a, uint32_t slot)
{
	uint32_t nw = a->c->nat_words;
	a->s->nat.unit = slot;
	a->s->nat.port = -1;
	innet_loop(nw < 64 ? nw : 64, nat_word_one, a);
	return a->s->nat.port;
}

LB_INLINE void nat_free(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t slot, uint32_t nat)
{
	innet_reg_fetch_and(ctx, R_NATMAP, slot * c->nat_words + nat / 64, ~(1ull << (nat % 64)));
}

/* ------------------------------------------------------------------------ */
/* Table operations on the scratch entries: functions of their own, so that
 * the table helpers' state (on XDP their probe loop's arg) is on a stack
 * frame of its own, not on the frames of the steps that call them (the
 * deepest chain of frames, a new connection's pick, has little room). An
 * enum innet_table_rc, as the table helpers: INNET_TABLE_BUSY (a writer
 * stopped in the entry's slot) is never taken for a miss — a flow whose
 * lookup is busy may have a connection, and balancing it anew would
 * overwrite that connection — so it drops the packet (conn_busy).           */

static LB_STEP int conn_lookup(struct lb_cb *a)
{
	return innet_table_lookup(a->ctx, T_CONN, &a->s->flow.k, &a->s->flow.v);
}

static LB_STEP int conn_insert(struct lb_cb *a)
{
	return innet_table_insert(a->ctx, T_CONN, &a->s->flow.k, &a->s->flow.v);
}

static LB_STEP int conn_delete(struct lb_cb *a)
{
	return innet_table_delete(a->ctx, T_CONN, &a->s->flow.k);
}

static LB_STEP int rev_lookup(struct lb_cb *a)
{
	return innet_table_lookup(a->ctx, T_REV, &a->s->flow.rk, &a->s->flow.rv);
}

static LB_STEP int rev_insert(struct lb_cb *a)
{
	return innet_table_insert(a->ctx, T_REV, &a->s->flow.rk, &a->s->flow.rv);
}

static LB_STEP int rev_delete(struct lb_cb *a)
{
	return innet_table_delete(a->ctx, T_REV, &a->s->flow.rk);
}

static LB_STEP int uaddr_lookup(struct lb_cb *a)
{
	return innet_table_lookup(a->ctx, T_UADDR, &a->s->flow.uk, &a->s->flow.unit);
}

/* ------------------------------------------------------------------------ */
/* Connections                                                                */

/* The reverse key of connection (k, v). */
LB_INLINE void rev_key_of(const struct lb_conf *c, const struct lb_conn_key *k,
			  const struct lb_conn_val *v, struct lb_rev_key *rk)
{
	*rk = (struct lb_rev_key){ .unit = v->unit };
	if (c->mode == LB_MODE_PROXY) {
		rk->kind = LB_REV_PROXY;
		rk->proto = LB_PROTO_UDP;
		rk->port = v->nat;
	} else {
		rk->kind = LB_REV_PACKET;
		rk->proto = k->proto;
		rk->port = k->cport;
		rk->cip = k->cip;
	}
}

/* The handler's expiry of an idle entry (s->flow.k, s->flow.v): release what
 * it held if our delete is the one that removed it. The delete's answer:
 * INNET_TABLE_OK, _ABSENT (the sweep got it first) or _BUSY (still there). */
static LB_STEP int conn_release(struct lb_cb *a)
{
	struct innet_ctx *ctx = a->ctx;
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	int rc = conn_delete(a);
	if (rc != INNET_TABLE_OK)
		return rc;
	rev_key_of(c, &s->flow.k, &s->flow.v, &s->flow.rk);
	rev_delete(a);
	if (c->mode == LB_MODE_PROXY)
		nat_free(ctx, c, s->flow.v.unit, s->flow.v.nat);
	if (innet_faulted(ctx))
		return rc;
	bloom_add(a, -1);
	if (innet_faulted(ctx))
		return rc;
	innet_reg_fetch_add(ctx, R_UNIT_CONNS, s->flow.v.unit, (uint32_t)-1);
	stat_inc(ctx, LB_ST_CONN_EXPIRED);
	return rc;
}

LB_INLINE bool conn_idle(const struct lb_conf *c, const struct lb_conn_val *v, uint32_t now)
{
	uint32_t limit = v->closing ? c->closing_ms : c->idle_ms;
	/* Signed age: another worker may have refreshed the entry with a clock
	 * read after ours (a negative age, not an idle one). Timeouts are at
	 * most a day, far inside int32 milliseconds. */
	return (int32_t)(now - v->seen_ms) > (int32_t)limit;
}

/* What conn_find found. */
enum lb_find {
	LB_FIND_LIVE = 0,   /* the flow's live connection, in s->flow.v */
	LB_FIND_NONE,       /* none: a new flow */
	LB_FIND_IDLE,       /* an idle entry, in s->flow.v: the caller expires it (conn_release) */
	LB_FIND_BUSY,       /* the lookup was busy: there may be a connection */
};

/* The live connection of the flow (s->flow.k, s->flow.h) into s->flow.v
 * (last-seen refreshed every timeout/16: a table write): an enum lb_find. */
static LB_STEP int conn_find(struct lb_cb *a)
{
	struct innet_ctx *ctx = a->ctx;
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	uint32_t now = now_ms(ctx);
	bool maybe = bloom_maybe(ctx, c, s->flow.h);
	LB_STOP_IF_FAULTED(ctx, LB_FIND_NONE);
	if (!maybe) {
		stat_inc(ctx, LB_ST_BLOOM_NEW);
		return LB_FIND_NONE;
	}
	int rc = conn_lookup(a);
	LB_STOP_IF_FAULTED(ctx, LB_FIND_NONE);
	if (rc == INNET_TABLE_BUSY)
		return LB_FIND_BUSY;
	if (rc != INNET_TABLE_OK) {
		stat_inc(ctx, LB_ST_BLOOM_COLLISIONS);
		return LB_FIND_NONE;
	}
	if (conn_idle(c, &s->flow.v, now))
		return LB_FIND_IDLE; /* the caller releases it (a step of its own: the stack) */
	/* closing entries by their own, shorter timeout */
	uint32_t limit = s->flow.v.closing ? c->closing_ms : c->idle_ms;
	uint32_t refresh = limit / 16 ? limit / 16 : 1;
	if ((int32_t)(now - s->flow.v.seen_ms) >= (int32_t)refresh) {
		s->flow.v.seen_ms = now;
		conn_insert(a);   /* (busy: refreshed another time) */
	}
	innet_alu(ctx, 6);
	return LB_FIND_LIVE;
}

/* A flow to VIP s->flow.vip without a live connection, to the unit in slot
 * the policy picked: if s->flow.may_create, a new connection (a NAT port in
 * proxy mode, both table entries). An enum lb_conn (LB_CONN_DROP: *why says
 * why). */
static LB_STEP int conn_new(struct lb_cb *a, uint32_t slot, unsigned *why)
{
	struct innet_ctx *ctx = a->ctx;
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	s->flow.v = (struct lb_conn_val){ .unit = (uint16_t)slot, .seen_ms = now_ms(ctx) };
	if (!s->flow.may_create) {
		s->flow.v.seen_ms = 0;
		stat_inc(ctx, LB_ST_STATELESS);
		return LB_CONN_STATELESS;
	}
	if (c->mode == LB_MODE_PROXY) {
		int nat = nat_alloc(a, slot);
		LB_STOP_IF_FAULTED(ctx, LB_CONN_FAULT);
		if (nat < 0) {
			*why = LB_DR_NAT_EXHAUSTED;
			return LB_CONN_DROP;
		}
		s->flow.v.nat = (uint16_t)nat;
	}
	rev_key_of(c, &s->flow.k, &s->flow.v, &s->flow.rk);
	innet_alu(ctx, c->mode == LB_MODE_PROXY ? 16 : 1);
	int rc = conn_insert(a);
	if (rc == INNET_TABLE_OK) {
		rc = rev_insert(a);
		if (rc != INNET_TABLE_OK)
			conn_delete(a);
	}
	if (rc != INNET_TABLE_OK)
		goto err_free_nat;
	LB_STOP_IF_FAULTED(ctx, LB_CONN_FAULT);
	bloom_add(a, +1);
	LB_STOP_IF_FAULTED(ctx, LB_CONN_FAULT);
	innet_reg_fetch_add(ctx, R_UNIT_CONNS, slot, 1);
	innet_reg_fetch_add(ctx, R_UNIT_NEW, slot, 1);
	stat_inc(ctx, LB_ST_CONN_NEW);
	innet_alu(ctx, 1);
	return LB_CONN_ENTRY;
err_free_nat:
	if (c->mode == LB_MODE_PROXY) {
		nat_free(ctx, c, slot, s->flow.v.nat);
		innet_alu(ctx, 8);
	}
	if (rc == INNET_TABLE_BUSY) {
		*why = LB_DR_CONN_BUSY;
	} else {
		stat_inc(ctx, LB_ST_CONN_TABLE_FULL);
		*why = LB_DR_CONN_FULL;
	}
	return LB_CONN_DROP;
}

/* The connection of the flow to VIP s->flow.vip (s->flow.k, and s->flow.rv
 * for a new one's reverse entry), found or made: an enum lb_conn
 * (LB_CONN_DROP: *why says why). Inlined in the handler, and the pick is
 * called from here, so that the deepest chain of frames (a new connection's
 * pick) starts at the engine's frame. */
LB_INLINE int conn_get(struct lb_cb *a, unsigned *why)
{
	a->s->flow.h = innet_hash(&a->s->flow.k, sizeof(a->s->flow.k), LB_FLOW_SEED);
	int found = conn_find(a);
	if (found == LB_FIND_IDLE && conn_release(a) == INNET_TABLE_BUSY)
		found = LB_FIND_BUSY;   /* the idle entry is still there: not a new flow yet */
	LB_STOP_IF_FAULTED(a->ctx, LB_CONN_FAULT);
	if (found == LB_FIND_LIVE)
		return LB_CONN_ENTRY;
	if (found == LB_FIND_BUSY) {
		*why = LB_DR_CONN_BUSY;
		return LB_CONN_DROP;
	}
	uint32_t slot = pick_unit(a);
	LB_STOP_IF_FAULTED(a->ctx, LB_CONN_FAULT);
	if (slot == LB_NONE) {
		*why = LB_DR_NO_BACKEND;
		return LB_CONN_DROP;
	}
	return conn_new(a, slot, why);
}

/* ------------------------------------------------------------------------ */
/* Reports and the sweep                                                      */

LB_INLINE void maybe_arm_sweep(struct innet_ctx *ctx, const struct lb_conf *c)
{
	if (c->own_ip == 0 || innet_reg_read(ctx, R_SWEEP, 0) != 0)
		return;
	uint64_t zero = 0;
	if (innet_reg_cas(ctx, R_SWEEP, 0, &zero, 1))
		innet_timer_arm(ctx, LB_SWEEP_TIMER, (uint64_t)c->sweep_ms * 1000000u, 0);
}

/* Is a sweep due? Claims it (one caller per interval). */
LB_INLINE bool sweep_due(struct innet_ctx *ctx, const struct lb_conf *c)
{
	uint64_t last = innet_reg_read(ctx, R_SWEEP, 1);
	if (innet_now(ctx) - last < (uint64_t)c->sweep_ms * 1000000u)
		return false;
	return innet_reg_cas(ctx, R_SWEEP, 1, &last, innet_now(ctx));
}

/* A datagram to the report port (len bytes at off: the payload, or in
 * packet mode the UDP payload inside the frame). The timer's sweep datagram
 * (nonce checked) and reports that pass the checks needing no key go to the
 * control thread, marked in pkt->meta32 (lb.h, LB_CPU_*). */
static LB_STEP enum innet_action handle_report(const struct lb_conf *c, struct innet_pkt *pkt,
					       uint32_t off, uint32_t len)
{
	if (len == sizeof(struct lb_sweep_msg)) {
		const struct lb_sweep_msg *m = innet_pkt_ptr(pkt, off, sizeof(struct lb_sweep_msg));
		if (m != NULL && m->type == INNET_LB_T_SWEEP) {
			uint64_t nonce;
			__builtin_memcpy(&nonce, &m->nonce, sizeof(nonce));
			if (m->h.magic == INNET_MAGIC && m->h.service == INNET_SVC_LB && nonce == c->nonce) {
				pkt->meta32[0] = LB_CPU_SWEEP;
				return innet_to_cpu(pkt);
			}
			return innet_drop(pkt, LB_DR_REPORT_TYPE);
		}
	}
	if (!c->have_key)
		return innet_drop(pkt, LB_DR_REPORT_NO_KEY);
	/* The checks of innet_lb_report_open that need no key, in its order;
	 * the MAC and the rest are the control thread's (ctl.c). */
	const struct innet_hdr *h = innet_pkt_ptr(pkt, off, INNET_LB_REPORT_LEN);
	if (len != INNET_LB_REPORT_LEN || h == NULL)
		return innet_drop(pkt, LB_DR_REPORT_LENGTH);
	const struct innet_lb_report_hdr *rh = (const struct innet_lb_report_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC || h->version != INNET_VERSION)
		return innet_drop(pkt, LB_DR_REPORT_MAGIC);
	if (h->service != INNET_SVC_LB)
		return innet_drop(pkt, LB_DR_REPORT_SERVICE);
	if (rh->type != INNET_LB_T_REPORT)
		return innet_drop(pkt, LB_DR_REPORT_TYPE);
	pkt->meta32[0] = LB_CPU_REPORT;
	pkt->meta32[1] = off;
	return innet_to_cpu(pkt);
}

/* ------------------------------------------------------------------------ */
/* Proxy mode                                                                 */

/* Client -> VIP s->flow.vip: the flow's key and a new connection's reverse
 * entry (the handler then finds or makes the connection: conn_get). */
LB_INLINE void proxy_flow(struct lb_cb *a, struct innet_pkt *pkt)
{
	struct lb_scratch *s = a->s;
	uint32_t i = innet_index(s->flow.vip, INNET_LB_MAX_VIPS);
	const struct lb_vip *vip = &a->c->vips[i];
	s->flow.k = (struct lb_conn_key){ .cip = pkt->src.ip, .cport = pkt->src.udp,
					  .vport = vip->port, .proto = LB_PROTO_UDP, .vip = (uint8_t)i };
	s->flow.rv = (struct lb_rev_val){ .cip = pkt->src.ip, .cport = pkt->src.udp,
					  .vip = (uint8_t)i, .swport = (uint8_t)pkt->in_port };
	s->flow.may_create = 1;
	innet_alu(a->ctx, 5);
}

/* Client -> VIP, its connection in s->flow.v: to the unit, from its NAT port. */
static LB_STEP enum innet_action proxy_to_unit(struct lb_cb *a, struct innet_pkt *pkt)
{
	struct innet_ctx *ctx = a->ctx;
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	uint32_t unit = s->flow.v.unit, n_nat = c->n_nat;
	uint64_t addr = innet_reg_read(ctx, R_UNIT_ADDR, unit);
	innet_reg_fetch_add(ctx, R_UNIT_PKTS, unit, 1);
	LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	if (n_nat == 0 || n_nat > INNET_MAX_PROG_UDP)
		return innet_drop(pkt, LB_DR_NAT_EXHAUSTED); /* (setup refuses it) */
	innet_forward_to(pkt, (uint16_t)addr, (uint32_t)(addr >> 32), (uint16_t)(addr >> 16));
	pkt->out.src_udp = c->nat_ports[innet_index(s->flow.v.nat % n_nat, INNET_MAX_PROG_UDP)];
	innet_alu(ctx, 5);
	return INNET_FORWARD;
}

/* Unit -> NAT port: back to the client, from the VIP port. */
static LB_STEP enum innet_action proxy_to_client(struct lb_cb *a, struct innet_pkt *pkt)
{
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	uint32_t ni = c->nat_of_port[pkt->dst_udp], n_vips = c->n_vips;
	if (ni == 0)
		return innet_drop(pkt, LB_DR_NOT_VIP);
	s->flow.uk = (struct lb_uaddr_key){ .ip = pkt->src.ip, .udp = pkt->src.udp };
	int rc = uaddr_lookup(a);
	if (rc != INNET_TABLE_OK)
		return innet_drop(pkt, rc == INNET_TABLE_BUSY ? INNET_DROP_TABLE_BUSY : LB_DR_UNKNOWN_SOURCE);
	s->flow.rk = (struct lb_rev_key){ .kind = LB_REV_PROXY, .proto = LB_PROTO_UDP,
					  .unit = (uint16_t)s->flow.unit, .port = (uint16_t)(ni - 1) };
	innet_alu(a->ctx, 5);
	rc = rev_lookup(a);
	if (rc != INNET_TABLE_OK)
		return innet_drop(pkt, rc == INNET_TABLE_BUSY ? LB_DR_CONN_BUSY : LB_DR_NO_CONNECTION);
	if (n_vips == 0 || n_vips > INNET_LB_MAX_VIPS)
		return innet_drop(pkt, LB_DR_NOT_VIP); /* (setup refuses it) */
	innet_forward_to(pkt, s->flow.rv.swport, s->flow.rv.cip, s->flow.rv.cport);
	pkt->out.src_udp = c->vips[innet_index(s->flow.rv.vip % n_vips, INNET_LB_MAX_VIPS)].port;
	innet_alu(a->ctx, 5);
	return INNET_FORWARD;
}

/* ------------------------------------------------------------------------ */
/* Packet mode                                                                */

/* Send the frame, its addresses rewritten, out of `port` toward dmac: the
 * source MAC is the egress port's (read from its interface at init; if it is
 * unknown, the MAC the frame was sent to), the TTL is decremented as by any
 * router. When a connection sweep is due, the frame takes the slow path: the
 * control thread sends it and then sweeps (packet mode has no self-addressed
 * sweep datagram: raw ports have no address). */
LB_INLINE enum innet_action frame_out(struct lb_cb *a, struct innet_pkt *pkt, uint16_t port,
				      uint64_t dmac)
{
	struct innet_ctx *ctx = a->ctx;
	uint64_t smac = port < INNET_MAX_PORTS ? innet_reg_read(ctx, R_PORT_MAC, port) : 0;
	LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	if (smac == 0) {
		const uint8_t *to = innet_pkt_ptr(pkt, 0, 6);
		smac = to != NULL ? lb_mac48(to) : 0;
	}
	lb_fr_set_macs(pkt, dmac, smac);
	lb_fr_dec_ttl(pkt, &a->s->fr);
	innet_alu(ctx, 10);
	bool due = sweep_due(ctx, a->c);
	LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	if (due) {
		pkt->meta16 = port;
		pkt->meta32[0] = LB_CPU_FORWARD;
		return innet_to_cpu(pkt);
	}
	return innet_forward(pkt, port);
}

/* A frame for VIP s->flow.vip: the flow's key and a new connection's reverse
 * entry; a new flow gets a connection if it is UDP or a TCP SYN (a segment
 * of an unknown connection is still balanced, consistently by the policy's
 * hash, but leaves no entry). */
static LB_STEP void frame_flow(struct lb_cb *a, struct innet_pkt *pkt)
{
	struct lb_scratch *s = a->s;
	struct lb_frame *fr = &s->fr;
	uint32_t i = innet_index(s->flow.vip, INNET_LB_MAX_VIPS);
	uint8_t proto = fr->proto, flags = fr->tcp_flags;
	s->flow.k = (struct lb_conn_key){ .cip = fr->sip, .vip_ip = fr->dip, .cport = fr->sport,
					  .vport = fr->dport, .proto = proto, .vip = (uint8_t)i };
	s->flow.rv = (struct lb_rev_val){ .cip = fr->sip, .cport = fr->sport, .vip = (uint8_t)i,
					  .swport = (uint8_t)pkt->in_port };
	const uint8_t *cmac = innet_pkt_ptr(pkt, 6, 6);
	if (cmac != NULL)
		__builtin_memcpy(s->flow.rv.cmac, cmac, 6);
	s->flow.may_create = proto == LB_PROTO_UDP ||
			     (proto == LB_PROTO_TCP && (flags & (LB_TCP_SYN | LB_TCP_ACK)) == LB_TCP_SYN);
	innet_alu(a->ctx, 5);
}

/* A frame for a VIP, its connection in s->flow.v (conn LB_CONN_ENTRY, or
 * LB_CONN_STATELESS: s->flow.v.unit only): DNAT to its unit (a FIN or RST
 * shortens its entry's life). */
static LB_STEP enum innet_action frame_to_unit(struct lb_cb *a, struct innet_pkt *pkt, int conn)
{
	struct innet_ctx *ctx = a->ctx;
	struct lb_scratch *s = a->s;
	struct lb_frame *fr = &s->fr;
	if (conn == LB_CONN_ENTRY && fr->proto == LB_PROTO_TCP &&
	    (fr->tcp_flags & (LB_TCP_FIN | LB_TCP_RST)) && !s->flow.v.closing) {
		s->flow.v.closing = 1; /* FIN or RST: age out soon */
		conn_insert(a);
		stat_inc(ctx, LB_ST_TCP_CLOSING);
	}
	uint32_t unit = s->flow.v.unit;
	uint64_t addr = innet_reg_read(ctx, R_UNIT_ADDR, unit);
	uint64_t mac = innet_reg_read(ctx, R_UNIT_MAC, unit);
	LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	if (lb_fr_complete_csum(pkt, fr)) {
		stat_inc(ctx, LB_ST_CSUM_COMPLETED);
		innet_alu(ctx, LB_ALU_CSUM(fr->l4_len));
	}
	bool l4_csum = lb_fr_l4_csum(pkt, fr) != NULL;
	lb_fr_set_dst(pkt, fr, (uint32_t)(addr >> 32), (uint16_t)(addr >> 16));
	innet_alu(ctx, l4_csum ? 45 : 15);
	innet_reg_fetch_add(ctx, R_UNIT_PKTS, unit, 1);
	return frame_out(a, pkt, (uint16_t)addr, mac);
}

/* A frame from a unit: SNAT its reply back to the VIP, toward the client. */
static LB_STEP enum innet_action frame_from_unit(struct lb_cb *a, struct innet_pkt *pkt)
{
	struct innet_ctx *ctx = a->ctx;
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	struct lb_frame *fr = &s->fr;
	s->flow.uk = (struct lb_uaddr_key){ .ip = fr->sip, .udp = fr->sport };
	int rc = uaddr_lookup(a);
	if (rc != INNET_TABLE_OK)
		return innet_drop(pkt, rc == INNET_TABLE_BUSY ? INNET_DROP_TABLE_BUSY : LB_DR_NOT_VIP);
	s->flow.rk = (struct lb_rev_key){ .kind = LB_REV_PACKET, .proto = fr->proto,
					  .unit = (uint16_t)s->flow.unit, .port = fr->dport, .cip = fr->dip };
	rc = rev_lookup(a);
	if (rc != INNET_TABLE_OK)
		return innet_drop(pkt, rc == INNET_TABLE_BUSY ? LB_DR_CONN_BUSY : LB_DR_NO_CONNECTION);
	uint32_t n_vips = c->n_vips;
	if (fr->ttl <= 1)
		return innet_drop(pkt, LB_DR_TTL_EXPIRED);
	if (n_vips == 0 || n_vips > INNET_LB_MAX_VIPS)
		return innet_drop(pkt, LB_DR_NOT_VIP); /* (setup refuses it) */
	const struct lb_vip *vip = &c->vips[innet_index(s->flow.rv.vip % n_vips, INNET_LB_MAX_VIPS)];
	if (lb_fr_complete_csum(pkt, fr)) {
		stat_inc(ctx, LB_ST_CSUM_COMPLETED);
		innet_alu(ctx, LB_ALU_CSUM(fr->l4_len));
	}
	bool l4_csum = lb_fr_l4_csum(pkt, fr) != NULL;
	lb_fr_set_src(pkt, fr, vip->ip, vip->port);
	innet_alu(ctx, l4_csum ? 52 : 22);
	if (fr->proto == LB_PROTO_TCP && (fr->tcp_flags & (LB_TCP_FIN | LB_TCP_RST))) {
		s->flow.k = (struct lb_conn_key){ .cip = s->flow.rv.cip, .vip_ip = vip->ip,
						  .cport = s->flow.rv.cport, .vport = vip->port,
						  .proto = LB_PROTO_TCP, .vip = s->flow.rv.vip };
		if (conn_lookup(a) == INNET_TABLE_OK && !s->flow.v.closing) {   /* (busy: not shortened) */
			s->flow.v.closing = 1;
			conn_insert(a);
			stat_inc(ctx, LB_ST_TCP_CLOSING);
		}
		LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	}
	return frame_out(a, pkt, s->flow.rv.swport, lb_mac48(s->flow.rv.cmac));
}

/* What a parsed frame is (frame_parse). */
enum lb_frame_kind {
	LB_FRAME_BAD = 0,   /* malformed (or not IPv4): dropped, for the reason in *why */
	LB_FRAME_REPORT,    /* an agent's report, or the sweep datagram */
	LB_FRAME_VIP,       /* for a VIP (s->flow.vip) */
	LB_FRAME_UNIT,      /* anything else: from a unit? */
};

/* Parse the frame into s->fr and tell what it is: an enum lb_frame_kind
 * (LB_FRAME_BAD: *why says why). */
static LB_STEP int frame_parse(struct lb_cb *a, struct innet_pkt *pkt, unsigned *why)
{
	const struct lb_conf *c = a->c;
	struct lb_scratch *s = a->s;
	struct lb_frame *fr = &s->fr;
	unsigned bad = lb_fr_parse(pkt, fr);
	innet_alu(a->ctx, fr->parse_alu);
	if (bad != 0) {
		*why = bad;
		return LB_FRAME_BAD;
	}
	uint32_t dip = fr->dip, dport = fr->dport, proto = fr->proto;
	if (proto == LB_PROTO_UDP && dport == c->report_port)
		return LB_FRAME_REPORT;
	for (uint32_t i = 0; i < c->n_vips && i < INNET_LB_MAX_VIPS; i++) {
		const struct lb_vip *vip = &c->vips[i];
		if (vip->ip == dip && vip->port == dport && vip->proto == proto) {
			s->flow.vip = i;
			return LB_FRAME_VIP;
		}
	}
	return LB_FRAME_UNIT;
}

/* ------------------------------------------------------------------------ */
/* The handler and the timer                                                  */

static enum innet_action lb_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct lb_conf *c = innet_conf(ctx);
	struct lb_cb a = { .ctx = ctx, .c = c, .s = innet_scratch(ctx) };
	unsigned why = INNET_DROP_PROGRAM_VERDICT;   /* a step's drop reason */
	if (a.s == NULL)
		return innet_drop(pkt, INNET_DROP_PKT_BOUNDS); /* (never: the scratch memory exists) */
	maybe_arm_sweep(ctx, c);
	LB_STOP_IF_FAULTED(ctx, INNET_DROP);
	if (pkt->flags & INNET_PKT_F_RAW) {
		if (c->mode != LB_MODE_PACKET)
			return innet_drop(pkt, LB_DR_WRONG_MODE);
		switch (frame_parse(&a, pkt, &why)) {
		case LB_FRAME_REPORT:
			return handle_report(c, pkt, a.s->fr.l4_off + 8, a.s->fr.l4_len - 8);
		case LB_FRAME_UNIT:
			return frame_from_unit(&a, pkt);
		case LB_FRAME_VIP:
			break;
		default:
			return innet_drop(pkt, why);
		}
		if (a.s->fr.ttl <= 1)
			return innet_drop(pkt, LB_DR_TTL_EXPIRED);
		frame_flow(&a, pkt);
		int conn = conn_get(&a, &why);
		if (conn == LB_CONN_FAULT)
			return INNET_DROP;   /* (with the fault's reason) */
		if (conn == LB_CONN_DROP)
			return innet_drop(pkt, why);
		return frame_to_unit(&a, pkt, conn);
	}
	if (pkt->dst_udp == c->report_port)
		return handle_report(c, pkt, 0, pkt->len);
	if (c->mode != LB_MODE_PROXY)
		return innet_drop(pkt, LB_DR_WRONG_MODE);
	uint32_t vi = c->vip_of_port[pkt->dst_udp];
	if (vi != 0 && vi <= INNET_LB_MAX_VIPS) { /* client -> VIP */
		a.s->flow.vip = vi - 1;
		proxy_flow(&a, pkt);
		int conn = conn_get(&a, &why);
		if (conn == LB_CONN_FAULT)
			return INNET_DROP;   /* (with the fault's reason) */
		if (conn != LB_CONN_ENTRY)
			return innet_drop(pkt, why);   /* (proxy flows always may make an entry) */
		return proxy_to_unit(&a, pkt);
	}
	return proxy_to_client(&a, pkt);
}

/* The sweep timer: send the switch itself a sweep datagram (the control
 * thread does the table walk), and re-arm. */
static void lb_on_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	const struct lb_conf *c = innet_conf(ctx);
	struct lb_sweep_msg m = {
		.h = { .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_LB },
		.type = INNET_LB_T_SWEEP,
		.nonce = c->nonce,
	};
	struct innet_out out = { .port = 0, .ip = c->own_ip, .udp = c->report_port,
				 .src_udp = c->report_port };
	if (sweep_due(ctx, c))
		innet_emit(ctx, &out, false, &m, sizeof(m));
	innet_timer_arm(ctx, LB_SWEEP_TIMER, (uint64_t)c->sweep_ms * 1000000u, 0);
}

INNET_DATAPATH(lb, lb_handle, lb_on_timer)
