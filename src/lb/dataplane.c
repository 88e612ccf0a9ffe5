/*
 * lb/dataplane.c — the load balancer program "lb" (Trio): an accelerator-
 * aware L4 balancer in the style of P4Mite, with Maglev consistent hashing,
 * per-connection consistency and authenticated load reports from agents.
 * docs/lb.md is the user's page; innet/lb.h the report format.
 *
 * One handler, dispatched on what arrives:
 *
 *   datagram to the report port ─► verify (MAC, ids, kind, seq > last) ─► unit state registers
 *   proxy: datagram to a VIP port ─► conn table / policy ─► NAT port ─► unit  (full NAT)
 *   proxy: datagram to a NAT port from a unit ─► reverse table ─► client, from the VIP port
 *   packet: frame for a VIP ─► conn table / policy ─► DNAT + checksums ─► unit's raw port
 *   packet: frame from a unit ─► reverse table ─► SNAT back to the VIP ─► client's port
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
 * lb_unit_health in lb_pvt.h). A table entry that names an
 * unusable unit probes up to LB_PROBES further entries, then falls back to
 * hashing over the eligible list: units going down never need a rebuild, and
 * flows of the others do not move.
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
 * and then sweeps; and by agent reports in both modes). A full table refuses
 * new connections (drop "conn_table_full", counted): translating replies
 * needs the reverse entry, so there is no stateless fallback. A connection
 * never moves: not when units are added, removed, drained, re-weighted or
 * change state; removed and drained units keep their connections until they
 * idle out.
 *
 * Double buffering: the control thread builds the Maglev tables, eligible
 * list and WRR cycle of a pool into the idle half of each register and then
 * bumps R_POOL_VER[pool]; the handler reads the version before and after its
 * lookups and retries (boundedly) if it changed, so it never uses a half-built
 * table. DIP entries are single bytes rewritten in place; the handler
 * re-checks the unit it gets.
 *
 * Reports are verified in the handler: HMAC-SHA256 with the key's pads
 * precomputed is two SHA-256 compressions (about 1 us), no allocation, no
 * system call; replay protection is one atomic fetch-max on R_UNIT_SEQ.
 *
 * THREAD SAFETY: handlers run on several workers; flows reach one worker, so
 * one flow's entry has one writer in the data plane. The sweep (control
 * thread) and the handler's lazy expiry both delete entries: whoever's delete
 * succeeds releases the NAT port, Bloom counters and unit count. The control
 * thread writes unit registers with atomic stores and frees NAT bits with an
 * atomic and.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "innet/lb.h"
#include "innet/switch.h"
#include "lb/lb_pvt.h"

const char *const lb_stat_names[LB_ST_COUNT] = {
	"reports_ok", "conn_new", "conn_expired", "conn_swept", "conn_table_full", "stateless",
	"bloom_new", "bloom_collisions", "tcp_closing", "fallback", "sweeps", "csum_completed",
};
_Static_assert(sizeof(lb_stat_names) / sizeof(lb_stat_names[0]) == LB_ST_COUNT, "stat names");

const char *const lb_drop_names[LB_N_DROPS] = {
	"report_bad_length", "report_bad_magic", "report_wrong_service", "report_bad_type",
	"report_bad_field", "report_bad_mac", "report_no_key", "report_unknown_unit",
	"report_bad_kind", "report_replayed", "no_backend", "nat_exhausted", "conn_table_full",
	"unknown_source", "no_connection", "not_a_vip", "bad_frame", "not_ipv4", "bad_ip",
	"ip_fragment", "bad_l4", "wrong_mode", "ttl_expired",
};
_Static_assert(sizeof(lb_drop_names) / sizeof(lb_drop_names[0]) == LB_N_DROPS, "drop names");

/* The sweep datagram the timer sends to the switch itself. */
struct lb_sweep_msg {
	struct innet_hdr h;
	uint8_t type;       /* INNET_LB_T_SWEEP */
	uint8_t pad[7];
	uint64_t nonce;     /* lb_conf.nonce: only this instance's timer sends it */
} __attribute__((packed));

#define SWEEP_TIMER 0u

/* ------------------------------------------------------------------------ */
/* Unit state                                                                 */

static inline uint32_t now_ms(const struct innet_ctx *ctx)
{
	return (uint32_t)(ctx->now_ns / 1000000u);
}

static inline void stat_inc(struct innet_ctx *ctx, unsigned st)
{
	innet_reg_fetch_add(ctx, R_STATS, st, 1);
}

/* Is the unit in slot usable for a new connection? *load gets its effective
 * load (256 added when busy) for least-loaded choices. */
static bool unit_usable(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t slot,
			uint32_t *load, bool *busy)
{
	if (slot >= LB_MAX_UNIT_SLOTS)
		return false;
	uint64_t m = innet_reg_read(ctx, R_UNIT_META, slot);
	if ((LB_META_FLAGS(m) & (LB_UF_CONFIGURED | LB_UF_DRAINED | LB_UF_REMOVED)) != LB_UF_CONFIGURED ||
	    LB_META_WEIGHT(m) == 0)
		return false;
	uint32_t st = (uint32_t)innet_reg_read(ctx, R_UNIT_STATE, slot);
	int64_t silent_ns = 0; /* since its last report (or its configuration) */
	if (c->down_after_ms != 0)
		silent_ns = (int64_t)(ctx->now_ns - innet_reg_read(ctx, R_UNIT_SEEN, slot));
	if (lb_unit_health(c, st, silent_ns) == LB_HEALTH_DOWN)
		return false;
	uint8_t kind = LB_META_KIND(m);
	uint32_t l = (st >> 8) & 0xff;
	bool b = (st & INNET_LB_ST_BUSY) || l >= c->threshold[kind < INNET_LB_KIND_COUNT ? kind : 0];
	innet_alu(ctx, 6);
	if (load != NULL)
		*load = l + (b ? 256u : 0u);
	if (busy != NULL)
		*busy = b;
	return true;
}

/* ------------------------------------------------------------------------ */
/* Policies                                                                   */

static uint32_t list_probe(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t pool,
			   uint32_t buf, uint32_t start)
{
	uint32_t n = (uint32_t)innet_reg_read(ctx, R_LIST_N, pool * 2 + buf);
	if (n == 0 || n > LB_MAX_UNIT_SLOTS)
		return LB_NONE;
	uint32_t base = (pool * 2 + buf) * LB_MAX_UNIT_SLOTS;
	uint32_t lim = n < LB_PROBES ? n : LB_PROBES;
	for (uint32_t i = 0; i < lim; i++) {
		uint32_t slot = (uint32_t)innet_reg_read(ctx, R_LIST, base + (start + i) % n);
		if (unit_usable(ctx, c, slot, NULL, NULL)) {
			if (i > 0)
				stat_inc(ctx, LB_ST_FALLBACK);
			return slot;
		}
	}
	return LB_NONE;
}

static uint32_t maglev_at(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t pool,
			  uint32_t kind, uint32_t buf, uint64_t pos)
{
	uint64_t base = ((uint64_t)(pool * 2 + kind) * 2 + buf) * c->maglev_size;
	return (uint32_t)innet_reg_read(ctx, R_MAGLEV, (uint32_t)(base + pos % c->maglev_size));
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
static uint32_t dip_split(struct innet_ctx *ctx, uint32_t srv, uint32_t avail,
			  const uint32_t load[LB_UNITS_PER_SERVER])
{
	uint32_t rem[LB_UNITS_PER_SERVER], total = 0;
	for (uint32_t u = 0; u < LB_UNITS_PER_SERVER; u++) {
		rem[u] = 0;
		if (avail >> u & 1) {
			uint64_t m = innet_reg_read(ctx, R_UNIT_META, srv * LB_UNITS_PER_SERVER + u);
			rem[u] = (uint32_t)LB_META_WEIGHT(m) * (256u - (load[u] & 0xffu));
			total += rem[u];
		}
	}
	innet_alu(ctx, 3 * LB_UNITS_PER_SERVER);
	if (total == 0)
		return LB_NONE;
	uint32_t x = (uint32_t)(((uint64_t)innet_random(ctx) * total) >> 32);
	for (uint32_t u = 0; u < LB_UNITS_PER_SERVER; u++) {
		if (x < rem[u])
			return srv * LB_UNITS_PER_SERVER + u;
		x -= rem[u];
	}
	return LB_NONE;
}

/* P4Mite's choice inside one server: the DIP table indexed by the units'
 * available and busy bits: a unit (the CPU, not busy), or a split by
 * remaining capacity. */
static uint32_t dip_pick(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t srv)
{
	uint32_t avail = 0, busy = 0, load[LB_UNITS_PER_SERVER];
	for (uint32_t u = 0; u < LB_UNITS_PER_SERVER; u++) {
		bool b = false;
		load[u] = 0;
		if (unit_usable(ctx, c, srv * LB_UNITS_PER_SERVER + u, &load[u], &b)) {
			avail |= 1u << u;
			busy |= (uint32_t)b << u;
		}
	}
	if (avail == 0)
		return LB_NONE;
	uint32_t d = (uint32_t)innet_reg_read(ctx, R_DIP, srv * LB_DIP_STATES + (busy << 8 | avail));
	if (d == LB_DIP_SPLIT)
		return dip_split(ctx, srv, avail, load);
	if (d >= LB_UNITS_PER_SERVER || !(avail >> d & 1))
		return LB_NONE; /* no usable unit, or an entry being rewritten */
	return srv * LB_UNITS_PER_SERVER + d;
}

static uint32_t pick_once(struct innet_ctx *ctx, const struct lb_conf *c, const struct lb_vip *v,
			  uint64_t h, uint32_t buf)
{
	uint32_t pool = v->pool, slot;
	switch (v->policy) {
	case LB_POL_NONE:
		return list_probe(ctx, c, pool, buf, 0);
	case LB_POL_ECMP:
		break;
	case LB_POL_MAGLEV:
		slot = maglev_at(ctx, c, pool, LB_MG_UNITS, buf, h);
		if (slot != LB_NONE && unit_usable(ctx, c, slot, NULL, NULL))
			return slot;
		for (uint32_t k = 1; k < LB_PROBES; k++) {
			slot = maglev_at(ctx, c, pool, LB_MG_UNITS, buf, h + (uint64_t)k * 7919u);
			if (slot != LB_NONE && unit_usable(ctx, c, slot, NULL, NULL)) {
				stat_inc(ctx, LB_ST_FALLBACK);
				return slot;
			}
		}
		break;
	case LB_POL_WRR: {
		uint32_t n = (uint32_t)innet_reg_read(ctx, R_WRR_N, pool * 2 + buf);
		if (n == 0 || n > LB_WRR_MAX)
			break;
		uint64_t k = innet_reg_fetch_add(ctx, R_WRR_CTR, pool, 1);
		uint32_t base = (pool * 2 + buf) * LB_WRR_MAX;
		for (uint32_t i = 0; i < LB_PROBES; i++) {
			slot = (uint32_t)innet_reg_read(ctx, R_WRR, base + (uint32_t)((k + i) % n));
			if (unit_usable(ctx, c, slot, NULL, NULL))
				return slot;
		}
		break;
	}
	case LB_POL_P2C: {
		uint32_t n = (uint32_t)innet_reg_read(ctx, R_LIST_N, pool * 2 + buf);
		if (n == 0 || n > LB_MAX_UNIT_SLOTS)
			break;
		uint32_t base = (pool * 2 + buf) * LB_MAX_UNIT_SLOTS;
		uint32_t a = (uint32_t)innet_reg_read(ctx, R_LIST, base + innet_random(ctx) % n);
		uint32_t b = (uint32_t)innet_reg_read(ctx, R_LIST, base + innet_random(ctx) % n);
		uint32_t la = UINT32_MAX, lb = UINT32_MAX;
		bool ua = unit_usable(ctx, c, a, &la, NULL), ub = unit_usable(ctx, c, b, &lb, NULL);
		if (ua && ub) {
			/* Equal load: fewer connections wins. */
			if (la == lb)
				return innet_reg_read(ctx, R_UNIT_CONNS, a) <=
				       innet_reg_read(ctx, R_UNIT_CONNS, b) ? a : b;
			return la < lb ? a : b;
		}
		if (ua || ub)
			return ua ? a : b;
		break;
	}
	case LB_POL_ACCEL:
		for (uint32_t k = 0; k < LB_PROBES; k++) {
			uint32_t srv = maglev_at(ctx, c, pool, LB_MG_SERVERS, buf, h + (uint64_t)k * 7919u);
			if (srv >= INNET_LB_MAX_SERVERS)
				continue;
			slot = dip_pick(ctx, c, srv);
			if (slot != LB_NONE) {
				if (k > 0)
					stat_inc(ctx, LB_ST_FALLBACK);
				return slot;
			}
		}
		break;
	}
	/* ecmp, and the fallback of the others: hash over the eligible list. */
	uint32_t n = (uint32_t)innet_reg_read(ctx, R_LIST_N, pool * 2 + buf);
	return n == 0 ? LB_NONE : list_probe(ctx, c, pool, buf, (uint32_t)((h >> 17) % n));
}

/* Pick a unit for a new connection to VIP v, on a consistent view of the
 * pool's tables (retry if the control thread flipped them meanwhile). */
static uint32_t pick_unit(struct innet_ctx *ctx, const struct lb_conf *c, const struct lb_vip *v,
			  uint64_t h)
{
	uint32_t slot = LB_NONE;
	for (int tries = 0; tries < 3; tries++) {
		uint32_t ver = (uint32_t)innet_reg_read(ctx, R_POOL_VER, v->pool);
		slot = pick_once(ctx, c, v, h, ver & 1);
		if ((uint32_t)innet_reg_read(ctx, R_POOL_VER, v->pool) == ver)
			break;
	}
	return slot;
}

/* ------------------------------------------------------------------------ */
/* Bloom filter and NAT ports                                                 */

static inline uint32_t bloom_idx(const struct lb_conf *c, uint64_t h, unsigned i)
{
	return (uint32_t)(h >> (21 * i)) & (c->bloom_size - 1);
}

static bool bloom_maybe(struct innet_ctx *ctx, const struct lb_conf *c, uint64_t h)
{
	for (unsigned i = 0; i < 3; i++)
		if (innet_reg_read(ctx, R_BLOOM, bloom_idx(c, h, i)) == 0)
			return false;
	return true;
}

static void bloom_add(struct innet_ctx *ctx, const struct lb_conf *c, uint64_t h, int delta)
{
	for (unsigned i = 0; i < 3; i++) {
		uint32_t idx = bloom_idx(c, h, i);
		uint64_t v = innet_reg_read(ctx, R_BLOOM, idx);
		/* Saturated counters stay (they can no longer be decremented safely). */
		for (int tries = 0; tries < 8 && v != 255 && !(delta < 0 && v == 0); tries++)
			if (innet_reg_cas(ctx, R_BLOOM, idx, &v, (uint64_t)((int64_t)v + delta)))
				break;
	}
}

static inline uint64_t nat_mask(const struct lb_conf *c, uint32_t w)
{
	uint32_t rem = c->n_nat - w * 64;
	return rem >= 64 ? ~0ull : (1ull << rem) - 1;
}

static int nat_alloc(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t slot, uint64_t h)
{
	uint32_t nw = c->nat_words;
	for (uint32_t i = 0; i < nw && i < 64; i++) {
		uint32_t w = (uint32_t)((h + i) % nw);
		uint32_t idx = slot * nw + w;
		uint64_t v = innet_reg_read(ctx, R_NATMAP, idx);
		for (int tries = 0; tries < 4; tries++) {
			uint64_t free_ = ~v & nat_mask(c, w);
			if (free_ == 0)
				break;
			unsigned bit = (unsigned)__builtin_ctzll(free_);
			if (innet_reg_cas(ctx, R_NATMAP, idx, &v, v | 1ull << bit))
				return (int)(w * 64 + bit);
		}
	}
	return -1;
}

static void nat_free(struct innet_ctx *ctx, const struct lb_conf *c, uint32_t slot, uint32_t nat)
{
	innet_reg_fetch_and(ctx, R_NATMAP, slot * c->nat_words + nat / 64, ~(1ull << (nat % 64)));
}

static inline uint64_t flow_hash(const struct lb_conn_key *k)
{
	return innet_hash(k, sizeof(*k), 0x6c62);
}

static void rev_key_of(const struct lb_conf *c, const struct lb_conn_key *k,
		       const struct lb_conn_val *v, struct lb_rev_key *rk)
{
	memset(rk, 0, sizeof(*rk));
	rk->unit = v->unit;
	if (c->mode == LB_MODE_PROXY) {
		rk->kind = 1;
		rk->proto = 17;
		rk->port = v->nat;
	} else {
		rk->kind = 2;
		rk->proto = k->proto;
		rk->port = k->cport;
		rk->cip = k->cip;
	}
}

/* The handler's expiry of an idle entry: release what it held if our delete
 * is the one that removed it. */
static void conn_release(struct innet_ctx *ctx, const struct lb_conf *c,
			 const struct lb_conn_key *k, const struct lb_conn_val *v, uint64_t h)
{
	if (innet_table_delete(ctx, T_CONN, k) != 0)
		return; /* the sweep got it first */
	struct lb_rev_key rk;
	rev_key_of(c, k, v, &rk);
	innet_table_delete(ctx, T_REV, &rk);
	if (c->mode == LB_MODE_PROXY)
		nat_free(ctx, c, v->unit, v->nat);
	bloom_add(ctx, c, h, -1);
	innet_reg_fetch_add(ctx, R_UNIT_CONNS, v->unit, (uint32_t)-1);
	stat_inc(ctx, LB_ST_CONN_EXPIRED);
}

static inline bool conn_idle(const struct lb_conf *c, const struct lb_conn_val *v, uint32_t now,
			     uint32_t margin)
{
	uint32_t limit = v->closing ? c->closing_ms : c->idle_ms;
	/* Signed age: another worker may have refreshed the entry with a clock
	 * read after ours (a negative age, not an idle one). Timeouts are at
	 * most a day, far inside int32 milliseconds. */
	return (int32_t)(now - v->seen_ms) > (int32_t)(limit + margin);
}

/* Find the flow's connection, or create it. Returns 0 with *v filled, or a
 * drop reason. rv: the reverse entry to insert for a new connection (its
 * client fields; the handler fills the rest). */
static int conn_get(struct innet_ctx *ctx, const struct lb_conf *c, const struct lb_vip *vip,
		    const struct lb_conn_key *k, struct lb_conn_val *v, struct lb_rev_val *rv,
		    bool may_create)
{
	uint64_t h = flow_hash(k);
	uint32_t now = now_ms(ctx);
	innet_alu(ctx, 8);
	if (bloom_maybe(ctx, c, h)) {
		if (innet_table_lookup(ctx, T_CONN, k, v) == 0) {
			if (!conn_idle(c, v, now, 0)) {
				/* Refresh last-seen every timeout/16 (not on every
				 * packet: a table write); closing entries by their
				 * own, shorter timeout. */
				uint32_t limit = v->closing ? c->closing_ms : c->idle_ms;
				uint32_t refresh = limit / 16 ? limit / 16 : 1;
				if ((int32_t)(now - v->seen_ms) >= (int32_t)refresh) {
					v->seen_ms = now;
					innet_table_insert(ctx, T_CONN, k, v);
				}
				return 0;
			}
			conn_release(ctx, c, k, v, h);
		} else {
			stat_inc(ctx, LB_ST_BLOOM_COLLISIONS);
		}
	} else {
		stat_inc(ctx, LB_ST_BLOOM_NEW);
	}
	if (!may_create)
		return -1;
	uint32_t slot = pick_unit(ctx, c, vip, h);
	if (slot == LB_NONE)
		return LB_DR_NO_BACKEND;
	memset(v, 0, sizeof(*v));
	v->unit = (uint16_t)slot;
	v->seen_ms = now;
	if (c->mode == LB_MODE_PROXY) {
		int nat = nat_alloc(ctx, c, slot, h);
		if (nat < 0)
			return LB_DR_NAT_EXHAUSTED;
		v->nat = (uint16_t)nat;
	}
	struct lb_rev_key rk;
	rev_key_of(c, k, v, &rk);
	if (innet_table_insert(ctx, T_CONN, k, v) != 0)
		goto full;
	if (innet_table_insert(ctx, T_REV, &rk, rv) != 0) {
		innet_table_delete(ctx, T_CONN, k);
		goto full;
	}
	bloom_add(ctx, c, h, +1);
	innet_reg_fetch_add(ctx, R_UNIT_CONNS, slot, 1);
	innet_reg_fetch_add(ctx, R_UNIT_NEW, slot, 1);
	stat_inc(ctx, LB_ST_CONN_NEW);
	return 0;
full:
	if (c->mode == LB_MODE_PROXY)
		nat_free(ctx, c, slot, v->nat);
	stat_inc(ctx, LB_ST_CONN_TABLE_FULL);
	return LB_DR_CONN_FULL;
}

/* ------------------------------------------------------------------------ */
/* Reports                                                                    */

static void maybe_arm_sweep(struct innet_ctx *ctx, const struct lb_conf *c)
{
	if (c->own_ip == 0 || innet_reg_read(ctx, R_SWEEP, 0) != 0)
		return;
	uint64_t zero = 0;
	if (innet_reg_cas(ctx, R_SWEEP, 0, &zero, 1))
		innet_timer_arm(ctx, SWEEP_TIMER, (uint64_t)c->sweep_ms * 1000000u, 0);
}

/* Is a sweep due? Claims it (one caller per interval). */
static bool sweep_due(struct innet_ctx *ctx, const struct lb_conf *c)
{
	uint64_t last = innet_reg_read(ctx, R_SWEEP, 1);
	if (ctx->now_ns - last < (uint64_t)c->sweep_ms * 1000000u)
		return false;
	return innet_reg_cas(ctx, R_SWEEP, 1, &last, ctx->now_ns);
}

static enum innet_action handle_report(struct innet_ctx *ctx, const struct lb_conf *c,
				       struct innet_pkt *pkt, const uint8_t *data, uint32_t len)
{
	if (len == sizeof(struct lb_sweep_msg) && data[8] == INNET_LB_T_SWEEP) {
		struct lb_sweep_msg m;
		memcpy(&m, data, sizeof(m));
		if (m.h.magic == INNET_MAGIC && m.h.service == INNET_SVC_LB && m.nonce == c->nonce)
			return innet_to_cpu(pkt);
		return innet_drop(pkt, LB_DR_REPORT_TYPE);
	}
	if (!c->have_key)
		return innet_drop(pkt, LB_DR_REPORT_NO_KEY);
	struct innet_lb_report r;
	int rc = innet_lb_report_open(data, len, &c->key, &r);
	innet_alu(ctx, 64); /* two SHA-256 compressions, roughly */
	if (rc != 0)
		return innet_drop(pkt, LB_DR_REPORT_LENGTH + (unsigned)(-rc) - INNET_LB_E_TOO_SHORT);
	uint32_t srv = (uint32_t)innet_reg_read(ctx, R_SRV_BY_ID, r.server);
	if (srv == 0 || r.unit >= LB_UNITS_PER_SERVER)
		return innet_drop(pkt, LB_DR_REPORT_UNKNOWN);
	uint32_t slot = (srv - 1) * LB_UNITS_PER_SERVER + r.unit;
	uint64_t m = innet_reg_read(ctx, R_UNIT_META, slot);
	if (!(LB_META_FLAGS(m) & LB_UF_CONFIGURED))
		return innet_drop(pkt, LB_DR_REPORT_UNKNOWN);
	if (LB_META_KIND(m) != r.kind)
		return innet_drop(pkt, LB_DR_REPORT_KIND);
	/* Replay protection: one atomic max; only a larger seq gets through. */
	if (innet_reg_fetch_max(ctx, R_UNIT_SEQ, slot, r.seq) >= r.seq)
		return innet_drop(pkt, LB_DR_REPORT_REPLAY);
	innet_reg_write(ctx, R_UNIT_STATE, slot, LB_US_REPORTED | (uint32_t)r.load << 8 | r.state);
	innet_reg_write(ctx, R_UNIT_LAT, slot, r.latency_us);
	innet_reg_write(ctx, R_UNIT_SEEN, slot, ctx->now_ns);
	stat_inc(ctx, LB_ST_REPORTS_OK);
	/* Reports are the sweep's clock too: hand one to the control thread
	 * when a sweep is due. */
	if (sweep_due(ctx, c))
		return innet_to_cpu(pkt);
	return INNET_CONSUMED;
}

/* ------------------------------------------------------------------------ */
/* Proxy mode                                                                 */

static enum innet_action handle_proxy(struct innet_ctx *ctx, const struct lb_conf *c,
				      struct innet_pkt *pkt)
{
	uint32_t vi = c->vip_of_port[pkt->dst_udp];
	if (vi != 0) { /* client -> VIP */
		const struct lb_vip *vip = &c->vips[vi - 1];
		struct lb_conn_key k = {
			.cip = pkt->src.ip, .cport = pkt->src.udp, .vport = vip->port,
			.proto = 17, .vip = (uint8_t)(vi - 1),
		};
		struct lb_rev_val rv = {
			.cip = pkt->src.ip, .cport = pkt->src.udp, .vip = (uint8_t)(vi - 1),
			.swport = (uint8_t)pkt->in_port,
		};
		struct lb_conn_val v;
		int rc = conn_get(ctx, c, vip, &k, &v, &rv, true);
		if (rc != 0)
			return innet_drop(pkt, (unsigned)rc);
		uint64_t a = innet_reg_read(ctx, R_UNIT_ADDR, v.unit);
		innet_reg_fetch_add(ctx, R_UNIT_PKTS, v.unit, 1);
		innet_forward_to(pkt, (uint16_t)a, (uint32_t)(a >> 32), (uint16_t)(a >> 16));
		pkt->out.src_udp = c->nat_ports[v.nat % c->n_nat];
		return INNET_FORWARD;
	}
	uint32_t ni = c->nat_of_port[pkt->dst_udp];
	if (ni == 0)
		return innet_drop(pkt, LB_DR_NOT_VIP);
	/* unit -> NAT port: back to the client, from the VIP port. */
	struct lb_uaddr_key uk = { .ip = pkt->src.ip, .udp = pkt->src.udp };
	uint32_t slot;
	if (innet_table_lookup(ctx, T_UADDR, &uk, &slot) != 0)
		return innet_drop(pkt, LB_DR_UNKNOWN_SOURCE);
	struct lb_rev_key rk = { .kind = 1, .proto = 17, .unit = (uint16_t)slot,
				 .port = (uint16_t)(ni - 1) };
	struct lb_rev_val rv;
	if (innet_table_lookup(ctx, T_REV, &rk, &rv) != 0)
		return innet_drop(pkt, LB_DR_NO_CONNECTION);
	innet_forward_to(pkt, rv.swport, rv.cip, rv.cport);
	pkt->out.src_udp = c->vips[rv.vip % c->n_vips].port;
	return INNET_FORWARD;
}

/* ------------------------------------------------------------------------ */
/* Packet mode                                                                */

/* Send a frame whose addresses are rewritten out of `port` toward dmac: the
 * source MAC is the egress port's (read from its interface at init; if it is
 * unknown, the MAC the frame was sent to), the TTL is decremented as by any
 * router. When a connection sweep is due, the frame takes the slow path: the
 * control thread sends it and then sweeps (packet mode has no self-addressed
 * sweep datagram: raw ports have no address). */
static enum innet_action frame_out(struct innet_ctx *ctx, const struct lb_conf *c,
				   struct innet_pkt *pkt, struct lb_frame *fr, uint16_t port,
				   uint64_t dmac)
{
	uint8_t *f = pkt->data;
	uint64_t smac = port < INNET_MAX_PORTS ? innet_reg_read(ctx, R_PORT_MAC, port) : 0;
	if (smac == 0)
		smac = lb_frame_mac(f);
	lb_frame_set_macs(f, dmac, smac);
	lb_frame_dec_ttl(f, fr);
	innet_alu(ctx, 16);
	if (sweep_due(ctx, c)) {
		pkt->meta16 = port;
		pkt->meta32[0] = LB_CPU_FORWARD;
		return innet_to_cpu(pkt);
	}
	return innet_forward(pkt, port);
}

static enum innet_action handle_frame(struct innet_ctx *ctx, const struct lb_conf *c,
				      struct innet_pkt *pkt)
{
	struct lb_frame fr;
	uint8_t *f = pkt->data;
	int rc = lb_frame_parse(f, pkt->len, &fr);
	innet_alu(ctx, 24);
	if (rc != 0)
		return innet_drop(pkt, (unsigned)rc);
	if (fr.proto == 17 && fr.dport == c->report_port) {
		pkt->meta32[0] = 0;
		return handle_report(ctx, c, pkt, f + fr.l4_off + 8, fr.l4_len - 8);
	}
	for (uint32_t i = 0; i < c->n_vips && i < INNET_LB_MAX_VIPS; i++) {
		const struct lb_vip *vip = &c->vips[i];
		if (vip->ip != fr.dip || vip->port != fr.dport || vip->proto != fr.proto)
			continue;
		if (fr.ttl <= 1)
			return innet_drop(pkt, LB_DR_TTL_EXPIRED);
		struct lb_conn_key k = {
			.cip = fr.sip, .vip_ip = fr.dip, .cport = fr.sport, .vport = fr.dport,
			.proto = fr.proto, .vip = (uint8_t)i,
		};
		struct lb_rev_val rv = {
			.cip = fr.sip, .cport = fr.sport, .vip = (uint8_t)i,
			.swport = (uint8_t)pkt->in_port,
		};
		memcpy(rv.cmac, f + 6, 6);
		/* TCP: only a SYN opens a connection; a segment of an unknown
		 * connection is still balanced (consistently, by the policy's
		 * hash) but leaves no entry. */
		bool syn = fr.proto == 6 && (fr.tcp_flags & 0x12) == 0x02;
		struct lb_conn_val v;
		rc = conn_get(ctx, c, vip, &k, &v, &rv, fr.proto == 17 || syn);
		if (rc < 0) {
			uint32_t slot = pick_unit(ctx, c, vip, flow_hash(&k));
			if (slot == LB_NONE)
				return innet_drop(pkt, LB_DR_NO_BACKEND);
			stat_inc(ctx, LB_ST_STATELESS);
			memset(&v, 0, sizeof(v));
			v.unit = (uint16_t)slot;
		} else if (rc != 0) {
			return innet_drop(pkt, (unsigned)rc);
		} else if (fr.proto == 6 && (fr.tcp_flags & 0x05) && !v.closing) {
			v.closing = 1; /* FIN or RST: age out soon */
			innet_table_insert(ctx, T_CONN, &k, &v);
			stat_inc(ctx, LB_ST_TCP_CLOSING);
		}
		uint64_t a = innet_reg_read(ctx, R_UNIT_ADDR, v.unit);
		uint64_t mac = innet_reg_read(ctx, R_UNIT_MAC, v.unit);
		if (lb_frame_complete_csum(f, &fr))
			stat_inc(ctx, LB_ST_CSUM_COMPLETED);
		lb_frame_set_dst(f, &fr, (uint32_t)(a >> 32), (uint16_t)(a >> 16));
		innet_reg_fetch_add(ctx, R_UNIT_PKTS, v.unit, 1);
		return frame_out(ctx, c, pkt, &fr, (uint16_t)a, mac);
	}
	/* From a unit? SNAT its reply back to the VIP. */
	struct lb_uaddr_key uk = { .ip = fr.sip, .udp = fr.sport };
	uint32_t slot;
	if (innet_table_lookup(ctx, T_UADDR, &uk, &slot) != 0)
		return innet_drop(pkt, LB_DR_NOT_VIP);
	struct lb_rev_key rk = { .kind = 2, .proto = fr.proto, .unit = (uint16_t)slot,
				 .port = fr.dport, .cip = fr.dip };
	struct lb_rev_val rv;
	if (innet_table_lookup(ctx, T_REV, &rk, &rv) != 0)
		return innet_drop(pkt, LB_DR_NO_CONNECTION);
	if (fr.ttl <= 1)
		return innet_drop(pkt, LB_DR_TTL_EXPIRED);
	const struct lb_vip *vip = &c->vips[rv.vip % c->n_vips];
	if (lb_frame_complete_csum(f, &fr))
		stat_inc(ctx, LB_ST_CSUM_COMPLETED);
	lb_frame_set_src(f, &fr, vip->ip, vip->port);
	if (fr.proto == 6 && (fr.tcp_flags & 0x05)) {
		struct lb_conn_key k = {
			.cip = rv.cip, .vip_ip = vip->ip, .cport = rv.cport, .vport = vip->port,
			.proto = 6, .vip = rv.vip,
		};
		struct lb_conn_val v;
		if (innet_table_lookup(ctx, T_CONN, &k, &v) == 0 && !v.closing) {
			v.closing = 1;
			innet_table_insert(ctx, T_CONN, &k, &v);
			stat_inc(ctx, LB_ST_TCP_CLOSING);
		}
	}
	return frame_out(ctx, c, pkt, &fr, rv.swport, lb_frame_mac(rv.cmac));
}

static enum innet_action lb_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct lb_conf *c = innet_conf(ctx);
	maybe_arm_sweep(ctx, c);
	if (pkt->flags & INNET_PKT_F_RAW) {
		if (c->mode != LB_MODE_PACKET)
			return innet_drop(pkt, LB_DR_WRONG_MODE);
		return handle_frame(ctx, c, pkt);
	}
	if (pkt->dst_udp == c->report_port)
		return handle_report(ctx, c, pkt, pkt->data, pkt->len);
	if (c->mode != LB_MODE_PROXY)
		return innet_drop(pkt, LB_DR_WRONG_MODE);
	return handle_proxy(ctx, c, pkt);
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
	innet_timer_arm(ctx, SWEEP_TIMER, (uint64_t)c->sweep_ms * 1000000u, 0);
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                      */

static void conf_free(void *p)
{
	struct lb_conf *c = p;
	if (c == NULL)
		return;
	innet_lb_key_wipe(&c->key);
	free(c);
}

static int lb_setup(struct innet_decl *d, struct innet_args *a)
{
	struct lb_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	innet_decl_priv_with(d, c, conf_free);
	int rc = lb_conf_parse(d, a, c);
	if (rc != 0)
		return rc;
	uint32_t np = c->n_pools, ms = c->maglev_size;
	if ((rc = innet_decl_reg(d, R_UNIT_ADDR, "unit_addr", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_MAC, "unit_mac", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_META, "unit_meta", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_STATE, "unit_state", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_LAT, "unit_latency_us", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_SEQ, "unit_seq", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_SEEN, "unit_seen_ns", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_CONNS, "unit_conns", 4, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_NEW, "unit_new_conns", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_UNIT_PKTS, "unit_pkts", 8, LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_SRV_BY_ID, "server_by_id", 1, 65536)) ||
	    (rc = innet_decl_reg(d, R_POOL_VER, "pool_version", 4, np)) ||
	    (rc = innet_decl_reg(d, R_MAGLEV, "maglev", 2, np * 4 * ms)) ||
	    (rc = innet_decl_reg(d, R_LIST, "eligible", 2, np * 2 * LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_reg(d, R_LIST_N, "eligible_n", 4, np * 2)) ||
	    (rc = innet_decl_reg(d, R_WRR, "wrr", 2, np * 2 * LB_WRR_MAX)) ||
	    (rc = innet_decl_reg(d, R_WRR_N, "wrr_n", 4, np * 2)) ||
	    (rc = innet_decl_reg(d, R_WRR_CTR, "wrr_counter", 8, np)) ||
	    (rc = innet_decl_reg(d, R_DIP, "dip", 1, c->n_servers * LB_DIP_STATES)) ||
	    (rc = innet_decl_reg(d, R_NATMAP, "nat_ports", 8, LB_MAX_UNIT_SLOTS * c->nat_words)) ||
	    (rc = innet_decl_reg(d, R_BLOOM, "bloom", 1, c->bloom_size)) ||
	    (rc = innet_decl_reg(d, R_STATS, "lb_stats", 8, LB_ST_COUNT)) ||
	    (rc = innet_decl_reg(d, R_SWEEP, "sweep", 8, 2)) ||
	    (rc = innet_decl_reg(d, R_PORT_MAC, "port_mac", 8, INNET_MAX_PORTS)) ||
	    (rc = innet_decl_table(d, T_CONN, "conn", sizeof(struct lb_conn_key),
				   sizeof(struct lb_conn_val), c->conn_capacity)) ||
	    (rc = innet_decl_table(d, T_REV, "conn_rev", sizeof(struct lb_rev_key),
				   sizeof(struct lb_rev_val), c->conn_capacity)) ||
	    (rc = innet_decl_table(d, T_UADDR, "unit_by_addr", sizeof(struct lb_uaddr_key), 4,
				   LB_MAX_UNIT_SLOTS)) ||
	    (rc = innet_decl_timers(d, 1)))
		return rc;
	return 0;
}

/* lb_init, lb_on_cpu and lb_on_ctl live in control.c. */
int lb_init(struct innet_cp *cp, void *priv);
void lb_on_cpu(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt);
int lb_on_ctl(struct innet_cp *cp, void *priv, int argc, char **argv, struct json_t *reply,
	      char *err, size_t errlen);

const struct innet_program innet_prog_lb = {
	.name = "lb",
	.summary = "load balancer: Maglev, P4Mite accelerator-aware policy, agent reports (docs/lb.md)",
	.model = INNET_MODEL_TRIO,
	.parse_bytes = 14 + 60 + 60,
	.drop_reasons = lb_drop_names,
	.n_drop_reasons = LB_N_DROPS,
	.setup = lb_setup,
	.init = lb_init,
	.handle = lb_handle,
	.on_timer = lb_on_timer,
	.on_cpu = lb_on_cpu,
	.on_ctl = lb_on_ctl,
};

INNET_PROGRAM_REGISTER(innet_prog_lb)
