/*
 * lb/ctl.c — the load balancer's control plane (control thread, ordinary C):
 * writing the unit registers at init, rebuilding a pool's Maglev tables,
 * eligible list, WRR cycle and DIP tables (double-buffered, see lb_dp.c),
 * the agent reports' verification and the connection sweep (on_cpu), and the
 * program's own commands (`innet ctl prog INSTANCE WORD...`):
 *
 *   help | show | stats
 *   unit add SERVER UNIT KIND IP:PORT [weight W] [mac MAC] [port P]
 *   unit del|drain|undrain SERVER UNIT      unit weight SERVER UNIT W
 *   conn count | conn list [N] | conn sweep
 *
 * Every reply carries structured JSON fields and a human-readable "text".
 * What the handler hands over (innet_to_cpu; pkt->meta32[0] says what, lb.h):
 *
 *   LB_CPU_REPORT  ─► innet_lb_report_open (length, magic, service, type, MAC
 *                     with the key, fields) ─► server and unit known, kind as
 *                     configured ─► seq > R_UNIT_SEQ (atomic fetch-max) ─►
 *                     R_UNIT_STATE, R_UNIT_LAT, R_UNIT_SEEN, reports_ok;
 *                     then a sweep if one is due. A rejected report is
 *                     counted under its drop reason (innet_cp_count_drop).
 *   LB_CPU_SWEEP   ─► the sweep (the timer's datagram)
 *   LB_CPU_FORWARD ─► send the rewritten frame, then the sweep (packet mode)
 *
 * The control thread runs init, on_cpu and on_ctl one at a time, so struct
 * lb_priv (pool_ver, ...) needs no locks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/lb.h"
#include "innet/parse.h"
#include "innet/switch.h"
#include "lb/lb_pvt.h"


/* Element idx of register r, for atomic access from the control thread. */
static void *elem(struct innet_cp *cp, unsigned r, uint32_t idx)
{
	const struct innet_reg *g = innet_cp_reg(cp, r);
	if (g == NULL || idx >= g->count)
		return NULL;
	return g->mem + (size_t)idx * g->width;
}

static uint64_t rd(struct innet_cp *cp, unsigned r, uint32_t idx)
{
	uint64_t v = 0;
	innet_cp_reg_read(cp, r, idx, &v);
	return v;
}

static void wr(struct innet_cp *cp, unsigned r, uint32_t idx, uint64_t v)
{
	innet_cp_reg_write(cp, r, idx, v);
}

static void stat_add(struct innet_cp *cp, unsigned st, uint64_t n)
{
	uint64_t *p = elem(cp, R_STATS, st);
	if (p != NULL)
		__atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}

static bool eligible(uint64_t m)
{
	return (LB_META_FLAGS(m) & (LB_UF_CONFIGURED | LB_UF_DRAINED | LB_UF_REMOVED)) ==
		       LB_UF_CONFIGURED && LB_META_WEIGHT(m) > 0;
}

/* Rebuild pool's tables into the idle halves, then flip its version. */
static int rebuild_pool(struct innet_cp *cp, struct lb_priv *p, uint32_t pool)
{
	const struct lb_conf *c = &p->conf;
	struct lb_backend units[LB_MAX_UNIT_SLOTS], servers[INNET_LB_MAX_SERVERS];
	uint32_t nu = 0, ns = 0;
	for (uint32_t s = 0; s < p->n_servers; s++) {
		if (p->servers[s].pool != pool)
			continue;
		bool any = false;
		uint8_t kinds[LB_UNITS_PER_SERVER] = { 0 }, elig = 0;
		for (uint32_t u = 0; u < LB_UNITS_PER_SERVER; u++) {
			uint32_t slot = s * LB_UNITS_PER_SERVER + u;
			uint64_t m = rd(cp, R_UNIT_META, slot);
			kinds[u] = LB_META_KIND(m);
			if (!eligible(m))
				continue;
			elig |= (uint8_t)(1u << u);
			units[nu].id = (uint64_t)p->servers[s].id << 8 | u;
			units[nu].weight = LB_META_WEIGHT(m);
			units[nu].index = slot;
			nu++;
			any = true;
		}
		if (any) {
			servers[ns].id = 1ull << 40 | p->servers[s].id;
			servers[ns].weight = p->servers[s].weight;
			servers[ns].index = s;
			ns++;
		}
		/* DIP table of this server: every (busy, available) state. */
		uint8_t *dip = elem(cp, R_DIP, s * LB_DIP_STATES);
		if (dip != NULL)
			for (uint32_t st = 0; st < LB_DIP_STATES; st++)
				__atomic_store_n(&dip[st], lb_dip_pick(kinds, elig, (uint8_t)st,
								       (uint8_t)(st >> 8)),
						 __ATOMIC_RELAXED);
	}
	uint32_t nb = (p->pool_ver[pool] + 1) & 1;
	uint32_t m = c->maglev_size;
	uint16_t *t_units = elem(cp, R_MAGLEV, (uint32_t)(((pool * 2 + LB_MG_UNITS) * 2 + nb) * (uint64_t)m));
	uint16_t *t_srv = elem(cp, R_MAGLEV, (uint32_t)(((pool * 2 + LB_MG_SERVERS) * 2 + nb) * (uint64_t)m));
	uint16_t *list = elem(cp, R_LIST, (pool * 2 + nb) * LB_MAX_UNIT_SLOTS);
	uint16_t *wrr = elem(cp, R_WRR, (pool * 2 + nb) * LB_WRR_MAX);
	if (t_units == NULL || t_srv == NULL || list == NULL || wrr == NULL)
		return -EINVAL;
	int rc;
	if ((rc = lb_maglev_build(units, nu, m, t_units)) != 0 ||
	    (rc = lb_maglev_build(servers, ns, m, t_srv)) != 0)
		return rc;
	for (uint32_t i = 0; i < nu; i++)
		list[i] = (uint16_t)units[i].index;
	wr(cp, R_LIST_N, pool * 2 + nb, nu);
	wr(cp, R_WRR_N, pool * 2 + nb, lb_wrr_build(units, nu, wrr, LB_WRR_MAX));
	/* Publish: a release store of the new version orders every table write
	 * above before it (no bare fence: ThreadSanitizer cannot model one). */
	p->pool_ver[pool]++;
	uint32_t *ver = elem(cp, R_POOL_VER, pool);
	if (ver == NULL)
		return -EINVAL;
	__atomic_store_n(ver, p->pool_ver[pool], __ATOMIC_RELEASE);
	return 0;
}

static int set_unit(struct innet_cp *cp, const struct lb_unit_init *u, uint8_t flags)
{
	struct lb_uaddr_key uk = { .ip = u->ip, .udp = u->udp };
	uint32_t slot = u->slot;
	int rc = innet_cp_table_add(cp, T_UADDR, &uk, &slot);
	if (rc != 0)
		return rc;
	wr(cp, R_UNIT_ADDR, slot, lb_addr(u->ip, u->udp, u->port));
	wr(cp, R_UNIT_MAC, slot, u->mac);
	wr(cp, R_UNIT_STATE, slot, LB_US_UNKNOWN); /* until its agent reports */
	wr(cp, R_UNIT_SEEN, slot, innet_now_ns());      /* "unreported": "grace" counts from now */
	wr(cp, R_UNIT_META, slot, lb_meta(flags, u->kind, u->weight, u->pool));
	return 0;
}

/* A raw port's MAC address (its interface's, SIOCGIFHWADDR), 0 if unknown. */
static uint64_t iface_mac(const char *iface)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	uint64_t mac = 0;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0 && ifr.ifr_hwaddr.sa_family == ARPHRD_ETHER)
		mac = lb_frame_mac((const uint8_t *)ifr.ifr_hwaddr.sa_data);
	close(fd);
	return mac;
}

int lb_init(struct innet_cp *cp, void *priv)
{
	struct lb_priv *p = priv;
	const struct innet_switch_conf *sc = innet_switch_conf(innet_cp_switch(cp));
	/* The first sweep is one interval after start. */
	wr(cp, R_SWEEP, 1, innet_now_ns());
	/* Packet mode sends frames from the egress port's own MAC. */
	for (uint32_t pt = 0; pt < sc->n_ports && pt < INNET_MAX_PORTS; pt++)
		if (sc->ports[pt].iface[0] != '\0')
			wr(cp, R_PORT_MAC, pt, iface_mac(sc->ports[pt].iface));
	for (uint32_t s = 0; s < p->n_servers; s++)
		wr(cp, R_SRV_BY_ID, p->servers[s].id, s + 1);
	for (uint32_t i = 0; i < p->n_units; i++) {
		int rc = set_unit(cp, &p->units[i], LB_UF_CONFIGURED);
		if (rc != 0)
			return innet_cp_init_error(cp, "unit table: %s", strerror(-rc));
	}
	for (uint32_t pl = 0; pl < p->n_pools; pl++) {
		int rc = rebuild_pool(cp, p, pl);
		if (rc != 0)
			return innet_cp_init_error(cp, "building pool '%s': %s", p->pool_names[pl],
						   strerror(-rc));
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Sweep                                                                      */

struct sweep_item {
	struct lb_conn_key k;
	struct lb_conn_val v;
};

struct sweep_ctx {
	const struct lb_conf *c;
	uint32_t now;
	struct sweep_item *items;
	uint32_t n, max;
};

/* Idle past its timeout (idle_timeout_ms, or tcp_closing_ms after FIN/RST)
 * plus a margin of an eighth of that timeout (at least 100 ms): the handler
 * refreshes last-seen only every timeout/16, so an entry inside the margin may
 * still be in use. */
static bool idle_for(const struct lb_conf *c, const struct lb_conn_val *v, uint32_t now)
{
	uint32_t limit = v->closing ? c->closing_ms : c->idle_ms;
	uint32_t margin = limit / 8 > 100 ? limit / 8 : 100;
	/* Signed: an entry refreshed after this sweep read the clock is younger
	 * than "now" (a negative age), not 49 days old. */
	return (int32_t)(now - v->seen_ms) > (int32_t)(limit + margin);
}

static int sweep_collect(const void *key, const void *val, void *arg)
{
	struct sweep_ctx *s = arg;
	const struct lb_conn_val *v = val;
	if (!idle_for(s->c, v, s->now))
		return 0;
	if (s->n == s->max)
		return 1;
	memcpy(&s->items[s->n].k, key, sizeof(struct lb_conn_key));
	memcpy(&s->items[s->n].v, val, sizeof(struct lb_conn_val));
	s->n++;
	return 0;
}

/* Remove idle entries; returns how many. The margin keeps the sweep away
 * from entries a handler may be refreshing right now. */
static uint32_t lb_sweep(struct innet_cp *cp, const struct lb_conf *c)
{
	struct sweep_ctx s = {
		.c = c, .now = (uint32_t)(innet_now_ns() / 1000000u),
		.max = 65536,
	};
	s.items = malloc(sizeof(*s.items) * s.max);
	if (s.items == NULL)
		return 0;
	innet_cp_table_foreach(cp, T_CONN, sweep_collect, &s);
	uint32_t removed = 0;
	for (uint32_t i = 0; i < s.n; i++) {
		struct lb_conn_key *k = &s.items[i].k;
		struct lb_conn_val v;
		if (innet_cp_table_get(cp, T_CONN, k, &v) != 0 || !idle_for(c, &v, s.now))
			continue;
		if (innet_cp_table_del(cp, T_CONN, k) != 0)
			continue; /* the handler expired it first */
		struct lb_rev_key rk;
		memset(&rk, 0, sizeof(rk));
		rk.unit = v.unit;
		if (c->mode == LB_MODE_PROXY) {
			rk.kind = LB_REV_PROXY;
			rk.proto = LB_PROTO_UDP;
			rk.port = v.nat;
			uint64_t *w = elem(cp, R_NATMAP, v.unit * c->nat_words + v.nat / 64);
			if (w != NULL)
				__atomic_fetch_and(w, ~(1ull << (v.nat % 64)), __ATOMIC_SEQ_CST);
		} else {
			rk.kind = LB_REV_PACKET;
			rk.proto = k->proto;
			rk.port = k->cport;
			rk.cip = k->cip;
		}
		innet_cp_table_del(cp, T_REV, &rk);
		uint64_t h = innet_hash(k, sizeof(*k), LB_FLOW_SEED);
		for (unsigned j = 0; j < 3; j++) {
			uint8_t *b = elem(cp, R_BLOOM, (uint32_t)(h >> (21 * j)) & (c->bloom_size - 1));
			uint8_t cur = b ? __atomic_load_n(b, __ATOMIC_ACQUIRE) : 0;
			while (b != NULL && cur != 0 && cur != 255 &&
			       !__atomic_compare_exchange_n(b, &cur, (uint8_t)(cur - 1), false,
							    __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
				;
		}
		uint32_t *cn = elem(cp, R_UNIT_CONNS, v.unit);
		if (cn != NULL)
			__atomic_fetch_sub(cn, 1, __ATOMIC_SEQ_CST);
		removed++;
	}
	free(s.items);
	stat_add(cp, LB_ST_CONN_SWEPT, removed);
	stat_add(cp, LB_ST_SWEEPS, 1);
	return removed;
}

/* Is a sweep due? Claims it (one caller per interval), as the handler's
 * sweep_due does on the same register. */
static bool sweep_due(struct innet_cp *cp, const struct lb_conf *c)
{
	uint64_t *last = elem(cp, R_SWEEP, 1);
	if (last == NULL)
		return false;
	uint64_t now = innet_now_ns(), seen = __atomic_load_n(last, __ATOMIC_ACQUIRE);
	if (now - seen < (uint64_t)c->sweep_ms * 1000000u)
		return false;
	return __atomic_compare_exchange_n(last, &seen, now, false, __ATOMIC_SEQ_CST,
					   __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------ */
/* Reports                                                                    */

/* Atomic unsigned maximum of a u64 register element; returns the value
 * before (UINT64_MAX for an element that does not exist). */
static uint64_t fetch_max(struct innet_cp *cp, unsigned r, uint32_t idx, uint64_t v)
{
	uint64_t *e = elem(cp, r, idx);
	if (e == NULL)
		return UINT64_MAX;
	uint64_t cur = __atomic_load_n(e, __ATOMIC_ACQUIRE);
	while (cur < v &&
	       !__atomic_compare_exchange_n(e, &cur, v, false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
		;
	return cur;
}

/* innet_lb_report_open's error (negated INNET_LB_E_*) as the drop reason
 * counted for it: one row per error, so neither list's order matters. */
static unsigned report_drop_reason(int rc)
{
	switch (-rc) {
	case INNET_LB_E_TOO_SHORT:     return LB_DR_REPORT_LENGTH;
	case INNET_LB_E_BAD_MAGIC:     return LB_DR_REPORT_MAGIC;
	case INNET_LB_E_WRONG_SERVICE: return LB_DR_REPORT_SERVICE;
	case INNET_LB_E_BAD_TYPE:      return LB_DR_REPORT_TYPE;
	case INNET_LB_E_BAD_MAC:       return LB_DR_REPORT_MAC;
	case INNET_LB_E_BAD_FIELD:
	default:                       return LB_DR_REPORT_FIELD;
	}
}

/* An agent report the handler passed on (its cheap checks done): verify it
 * and, accepted, write the unit's state. 0, or the drop reason to count. */
static unsigned report_apply(struct innet_cp *cp, struct lb_priv *p, const uint8_t *data,
			     uint32_t len)
{
	if (!p->conf.have_key)
		return LB_DR_REPORT_NO_KEY;
	struct innet_lb_report r;
	int rc = innet_lb_report_open(data, len, &p->key, &r);
	if (rc != 0)
		return report_drop_reason(rc);
	uint32_t srv = (uint32_t)rd(cp, R_SRV_BY_ID, r.server);
	if (srv == 0 || r.unit >= LB_UNITS_PER_SERVER)
		return LB_DR_REPORT_UNKNOWN;
	uint32_t slot = (srv - 1) * LB_UNITS_PER_SERVER + r.unit;
	uint64_t m = rd(cp, R_UNIT_META, slot);
	if (!(LB_META_FLAGS(m) & LB_UF_CONFIGURED))
		return LB_DR_REPORT_UNKNOWN;
	if (LB_META_KIND(m) != r.kind)
		return LB_DR_REPORT_KIND;
	/* Replay protection: one atomic max; only a larger seq gets through. */
	if (fetch_max(cp, R_UNIT_SEQ, slot, r.seq) >= r.seq)
		return LB_DR_REPORT_REPLAY;
	wr(cp, R_UNIT_STATE, slot, LB_US_REPORTED | (uint32_t)r.load << 8 | r.state);
	wr(cp, R_UNIT_LAT, slot, r.latency_us);
	wr(cp, R_UNIT_SEEN, slot, innet_now_ns());
	stat_add(cp, LB_ST_REPORTS_OK, 1);
	return 0;
}

/* The control thread's packets (lb.h, LB_CPU_*): an agent report to verify
 * (then a sweep, if one is due: reports are the sweep's clock too), the
 * timer's sweep datagram, or in packet mode a rewritten frame that the
 * handler passed here to be sent first because a sweep is due. */
void lb_on_cpu(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt)
{
	struct lb_priv *p = priv;
	switch (pkt->meta32[0]) {
	case LB_CPU_REPORT: {
		uint32_t off = pkt->meta32[1];
		unsigned reason = LB_DR_REPORT_LENGTH;
		if (off <= pkt->len && pkt->len - off >= INNET_LB_REPORT_LEN)
			reason = report_apply(cp, p, pkt->data + off, INNET_LB_REPORT_LEN);
		if (reason != 0) {
			innet_cp_count_drop(cp, reason);
			return;
		}
		if (sweep_due(cp, &p->conf))
			lb_sweep(cp, &p->conf);
		return;
	}
	case LB_CPU_FORWARD:
		if (pkt->flags & INNET_PKT_F_RAW) {
			struct innet_out out = { .port = pkt->meta16 };
			innet_cp_send(cp, &out, false, pkt->data, pkt->len);
		}
		lb_sweep(cp, &p->conf);
		return;
	case LB_CPU_SWEEP:
		lb_sweep(cp, &p->conf);
		return;
	}
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                   */

struct text {
	char *buf;
	size_t len;
	FILE *f;
};

static int find_server(const struct lb_priv *p, const char *s, uint32_t *slot)
{
	char *end;
	unsigned long id = strtoul(s, &end, 10);
	if (*s == '\0' || *end != '\0' || id > 65535)
		return -EINVAL;
	for (uint32_t i = 0; i < p->n_servers; i++)
		if (p->servers[i].id == id) {
			*slot = i;
			return 0;
		}
	return -ENOENT;
}

static const char *kind_name(uint8_t k)
{
	return k == INNET_LB_KIND_ACCEL ? "accelerator" : "cpu";
}

/* `prog lb show`'s unit table: one format for the header and the rows, so
 * the columns line up. */
#define UNIT_HDR_FMT "  %-11s %-11s %-21s %6s %-7s %-7s %-4s %4s %8s %8s %6s %8s %7s\n"
#define UNIT_ROW_FMT "  %-11s %-11s %-21s %6u %-7s %-7s %-4s %4u %8u %8s %6d %8llu %6.2f%%\n"

static json_t *unit_json(struct innet_cp *cp, const struct lb_priv *p, uint32_t slot,
			 const uint32_t *share, uint64_t now, FILE *t)
{
	const struct lb_conf *c = &p->conf;
	uint64_t m = rd(cp, R_UNIT_META, slot);
	uint64_t a = rd(cp, R_UNIT_ADDR, slot);
	uint32_t st = (uint32_t)rd(cp, R_UNIT_STATE, slot);
	uint64_t seen = rd(cp, R_UNIT_SEEN, slot);
	uint32_t srv = slot / LB_UNITS_PER_SERVER;
	char addr[32];
	struct in_addr in = { .s_addr = htonl((uint32_t)(a >> 32)) };
	snprintf(addr, sizeof(addr), "%s:%u", inet_ntoa(in), (unsigned)(uint16_t)(a >> 16));
	uint8_t fl = LB_META_FLAGS(m), kind = LB_META_KIND(m);
	static const char *const health_name[] = { "unknown", "up", "down" };
	static const char *const health_text[] = { "unknown", "up", "DOWN" };
	enum lb_health h = lb_unit_health(c, st, (int64_t)(now - seen));
	uint32_t load = (st >> 8) & 0xff;
	bool busy = (st & INNET_LB_ST_BUSY) || load >= c->threshold[kind < 2 ? kind : 0];
	const char *admin = fl & LB_UF_REMOVED ? "removed" : fl & LB_UF_DRAINED ? "drained" : "active";
	double age_ms = (st & LB_US_REPORTED) ? (double)(int64_t)(now - seen) / 1e6 : -1;
	double sh = 100.0 * share[slot] / c->maglev_size;
	json_t *u = json_pack("{s:i,s:i,s:s,s:s,s:i,s:s,s:s,s:b,s:i,s:i,s:f,s:i,s:I,s:I,s:f}",
			      "server", p->servers[srv].id, "unit", slot % LB_UNITS_PER_SERVER,
			      "kind", kind_name(kind), "address", addr, "weight", LB_META_WEIGHT(m),
			      "admin", admin, "state", health_name[h], "busy", busy,
			      "load", load, "latency_us", (int)rd(cp, R_UNIT_LAT, slot),
			      "report_age_ms", age_ms, "conns", (int)(int32_t)rd(cp, R_UNIT_CONNS, slot),
			      "new_conns", (json_int_t)rd(cp, R_UNIT_NEW, slot),
			      "pkts", (json_int_t)rd(cp, R_UNIT_PKTS, slot), "maglev_share_pct", sh);
	if (t != NULL) {
		char su[16], age[32];
		snprintf(su, sizeof(su), "%u/%u", p->servers[srv].id, slot % LB_UNITS_PER_SERVER);
		if (age_ms < 0)
			snprintf(age, sizeof(age), "never");
		else
			snprintf(age, sizeof(age), "%.0fms", age_ms);
		fprintf(t, UNIT_ROW_FMT, su, kind_name(kind), addr, LB_META_WEIGHT(m), admin,
			health_text[h], busy ? "BUSY" : "-", load, (unsigned)rd(cp, R_UNIT_LAT, slot),
			age, (int)(int32_t)rd(cp, R_UNIT_CONNS, slot),
			(unsigned long long)rd(cp, R_UNIT_NEW, slot), sh);
	}
	return u;
}

static json_t *stats_json(struct innet_cp *cp, FILE *t)
{
	json_t *o = json_object();
	if (t != NULL)
		fprintf(t, "counters:");
	for (unsigned i = 0; i < LB_ST_COUNT; i++) {
		uint64_t v = rd(cp, R_STATS, i);
		json_object_set_new(o, lb_stat_names[i], json_integer((json_int_t)v));
		if (t != NULL)
			fprintf(t, " %s=%llu", lb_stat_names[i], (unsigned long long)v);
	}
	struct innet_table_info ti;
	if (innet_cp_table_info(cp, T_CONN, &ti) == 0) {
		json_object_set_new(o, "conn_entries", json_integer(ti.entries));
		json_object_set_new(o, "conn_capacity", json_integer(ti.capacity));
		if (t != NULL)
			fprintf(t, " conn_entries=%u/%u", ti.entries, ti.capacity);
	}
	if (t != NULL)
		fprintf(t, "\n");
	return o;
}

static int cmd_show(struct innet_cp *cp, struct lb_priv *p, json_t *reply, FILE *t)
{
	const struct lb_conf *c = &p->conf;
	uint64_t now = innet_now_ns();
	fprintf(t, "lb '%s': mode %s, report port %u, key %s, maglev %u, conn capacity %u, "
		"idle %u ms, down after %u ms, unreported units %s\n", innet_cp_name(cp),
		c->mode == LB_MODE_PROXY ? "proxy" : "packet", c->report_port,
		c->have_key ? "set" : "NONE (reports refused)", c->maglev_size, p->conn_capacity,
		c->idle_ms, c->down_after_ms,
		c->unreported == LB_UNREP_DOWN ? "down" :
		c->unreported == LB_UNREP_GRACE ? "served for down_after_ms" : "served");
	json_t *vips = json_array();
	fprintf(t, "vips:\n");
	for (uint32_t i = 0; i < c->n_vips; i++) {
		const struct lb_vip *v = &c->vips[i];
		char ip[20] = "*";
		if (v->ip) {
			struct in_addr in = { .s_addr = htonl(v->ip) };
			snprintf(ip, sizeof(ip), "%s", inet_ntoa(in));
		}
		json_array_append_new(vips, json_pack("{s:s,s:s,s:i,s:s,s:s,s:s}", "name", v->name,
						       "address", ip, "port", v->port, "proto",
						       v->proto == LB_PROTO_TCP ? "tcp" : "udp", "pool",
						       p->pool_names[v->pool], "policy",
						       lb_policy_name(v->policy)));
		fprintf(t, "  %-12s %s:%u/%s -> pool %s, policy %s\n", v->name, ip, v->port,
			v->proto == LB_PROTO_TCP ? "tcp" : "udp", p->pool_names[v->pool], lb_policy_name(v->policy));
	}
	json_object_set_new(reply, "vips", vips);
	json_t *pools = json_array();
	for (uint32_t pl = 0; pl < p->n_pools; pl++) {
		uint32_t buf = p->pool_ver[pl] & 1;
		uint32_t share[LB_MAX_UNIT_SLOTS] = { 0 };
		const uint16_t *mg = elem(cp, R_MAGLEV, (uint32_t)(((pl * 2 + LB_MG_UNITS) * 2 + buf) *
								 (uint64_t)c->maglev_size));
		for (uint32_t s = 0; mg != NULL && s < c->maglev_size; s++)
			if (mg[s] < LB_MAX_UNIT_SLOTS)
				share[mg[s]]++;
		fprintf(t, "pool %s (version %u):\n", p->pool_names[pl], p->pool_ver[pl]);
		fprintf(t, UNIT_HDR_FMT, "server/unit", "kind", "address", "weight", "admin", "state",
			"busy", "load", "lat_us", "report", "conns", "new", "share");
		json_t *units = json_array();
		for (uint32_t s = 0; s < p->n_servers; s++) {
			if (p->servers[s].pool != pl)
				continue;
			for (uint32_t u = 0; u < LB_UNITS_PER_SERVER; u++) {
				uint32_t slot = s * LB_UNITS_PER_SERVER + u;
				if (LB_META_FLAGS(rd(cp, R_UNIT_META, slot)) & LB_UF_CONFIGURED)
					json_array_append_new(units, unit_json(cp, p, slot, share, now, t));
			}
		}
		json_array_append_new(pools, json_pack("{s:s,s:i,s:o}", "name", p->pool_names[pl],
						       "version", p->pool_ver[pl], "units", units));
	}
	json_object_set_new(reply, "pools", pools);
	json_object_set_new(reply, "counters", stats_json(cp, t));
	return 0;
}

static int cmd_unit(struct innet_cp *cp, struct lb_priv *p, int argc, char **argv,
		    json_t *reply, FILE *t, char *err, size_t errlen)
{
	const struct lb_conf *c = &p->conf;
	if (argc < 3) {
		snprintf(err, errlen, "usage: unit add|del|drain|undrain|weight SERVER UNIT ...");
		return -EINVAL;
	}
	const char *op = argv[0];
	uint32_t srv;
	uint64_t uid;
	if (find_server(p, argv[1], &srv) != 0) {
		snprintf(err, errlen, "unknown server '%s' (servers are fixed in the settings)", argv[1]);
		return -EINVAL;
	}
	if (innet_parse_u64(argv[2], 0, LB_UNITS_PER_SERVER - 1, &uid) != 0) {
		snprintf(err, errlen, "unit id must be 0..%u, not '%s'", LB_UNITS_PER_SERVER - 1, argv[2]);
		return -EINVAL;
	}
	uint32_t slot = srv * LB_UNITS_PER_SERVER + (uint32_t)uid;
	uint64_t m = rd(cp, R_UNIT_META, slot);
	uint8_t fl = LB_META_FLAGS(m);
	uint32_t pool = p->servers[srv].pool;
	if (!strcmp(op, "add")) {
		if (argc < 5 || (argc - 5) % 2 != 0) {
			snprintf(err, errlen, "usage: unit add SERVER UNIT cpu|accelerator IP:PORT "
				 "[weight W] [mac MAC] [port P]");
			return -EINVAL;
		}
		if ((fl & LB_UF_CONFIGURED) && !(fl & LB_UF_REMOVED)) {
			snprintf(err, errlen, "unit %s/%lu exists (del it first)", argv[1], uid);
			return -EINVAL;
		}
		if ((fl & LB_UF_REMOVED) && (int32_t)rd(cp, R_UNIT_CONNS, slot) > 0) {
			snprintf(err, errlen, "unit %s/%lu was removed and still has %d connections; "
				 "wait for them to idle out", argv[1], uid, (int32_t)rd(cp, R_UNIT_CONNS, slot));
			return -EINVAL;
		}
		struct lb_unit_init u = { .slot = (uint16_t)slot, .weight = 1, .pool = (uint8_t)pool };
		if (!strcmp(argv[3], "cpu"))
			u.kind = INNET_LB_KIND_CPU;
		else if (!strcmp(argv[3], "accelerator"))
			u.kind = INNET_LB_KIND_ACCEL;
		else {
			snprintf(err, errlen, "kind must be cpu or accelerator, not '%s'", argv[3]);
			return -EINVAL;
		}
		struct innet_addr ua;
		if (innet_parse_addr(argv[4], 0, &ua) != 0) {
			snprintf(err, errlen, "address must be IPv4:PORT, not '%s'", argv[4]);
			return -EINVAL;
		}
		u.ip = ua.ip;
		u.udp = ua.udp;
		for (int i = 5; i + 1 < argc; i += 2) {
			uint64_t v;
			if (!strcmp(argv[i], "weight") && innet_parse_u64(argv[i + 1], 0, 65535, &v) == 0)
				u.weight = (uint16_t)v;
			else if (!strcmp(argv[i], "port") &&
				 innet_parse_u64(argv[i + 1], 0, innet_switch_conf(innet_cp_switch(cp))->n_ports - 1,
					 &v) == 0)
				u.port = (uint16_t)v;
			else if (!strcmp(argv[i], "mac") && lb_parse_mac(argv[i + 1], &u.mac) == 0)
				;
			else {
				snprintf(err, errlen, "bad option '%s %s' (weight 0..65535, port < ports, "
					 "mac aa:bb:cc:dd:ee:ff)", argv[i], argv[i + 1]);
				return -EINVAL;
			}
		}
		if (c->mode == LB_MODE_PACKET && u.mac == 0) {
			snprintf(err, errlen, "packet mode needs 'mac MAC' for a unit");
			return -EINVAL;
		}
		struct lb_uaddr_key uk = { .ip = u.ip, .udp = u.udp };
		uint32_t other;
		if (innet_cp_table_get(cp, T_UADDR, &uk, &other) == 0 && other != slot) {
			snprintf(err, errlen, "address %s belongs to another unit", argv[4]);
			return -EINVAL;
		}
		if (fl & LB_UF_CONFIGURED) { /* the removed unit's old address */
			uint64_t a = rd(cp, R_UNIT_ADDR, slot);
			struct lb_uaddr_key ok = { .ip = (uint32_t)(a >> 32), .udp = (uint16_t)(a >> 16) };
			innet_cp_table_del(cp, T_UADDR, &ok);
		}
		wr(cp, R_UNIT_SEQ, slot, 0);
		wr(cp, R_UNIT_NEW, slot, 0);
		wr(cp, R_UNIT_PKTS, slot, 0);
		if (set_unit(cp, &u, LB_UF_CONFIGURED) != 0) {
			snprintf(err, errlen, "unit address table full");
			return -EINVAL;
		}
	} else {
		if (!(fl & LB_UF_CONFIGURED) || ((fl & LB_UF_REMOVED) && strcmp(op, "del"))) {
			snprintf(err, errlen, "no unit %s/%lu", argv[1], uid);
			return -EINVAL;
		}
		uint16_t w = LB_META_WEIGHT(m);
		if (!strcmp(op, "del"))
			fl |= LB_UF_REMOVED;
		else if (!strcmp(op, "drain"))
			fl |= LB_UF_DRAINED;
		else if (!strcmp(op, "undrain"))
			fl &= (uint8_t)~LB_UF_DRAINED;
		else if (!strcmp(op, "weight")) {
			uint64_t v;
			if (argc != 4 || innet_parse_u64(argv[3], 0, 65535, &v) != 0) {
				snprintf(err, errlen, "usage: unit weight SERVER UNIT W (0..65535)");
				return -EINVAL;
			}
			w = (uint16_t)v;
		} else {
			snprintf(err, errlen, "unknown unit command '%s' (add, del, drain, undrain, weight)",
				 op);
			return -EINVAL;
		}
		wr(cp, R_UNIT_META, slot, lb_meta(fl, LB_META_KIND(m), w, LB_META_POOL(m)));
	}
	int rc = rebuild_pool(cp, p, pool);
	if (rc != 0) {
		snprintf(err, errlen, "rebuilding pool: %s", strerror(-rc));
		return -EINVAL;
	}
	fprintf(t, "unit %s/%lu: %s done; pool %s version %u\n", argv[1], uid, op,
		p->pool_names[pool], p->pool_ver[pool]);
	json_object_set_new(reply, "pool_version", json_integer(p->pool_ver[pool]));
	return 0;
}

struct list_ctx {
	json_t *arr;
	FILE *t;
	uint32_t n, max;
	const struct lb_conf *c;
	const struct lb_priv *p;
};

static int list_one(const void *key, const void *val, void *arg)
{
	struct list_ctx *l = arg;
	const struct lb_conn_key *k = key;
	const struct lb_conn_val *v = val;
	if (l->n++ >= l->max)
		return 1;
	struct in_addr in = { .s_addr = htonl(k->cip) };
	char cl[32];
	snprintf(cl, sizeof(cl), "%s:%u", inet_ntoa(in), k->cport);
	uint32_t srv = v->unit / LB_UNITS_PER_SERVER;
	uint32_t now = (uint32_t)(innet_now_ns() / 1000000u);
	json_array_append_new(l->arr, json_pack("{s:s,s:s,s:s,s:i,s:i,s:i,s:i}", "client", cl,
						"vip", l->c->vips[k->vip % l->c->n_vips].name, "proto",
						k->proto == LB_PROTO_TCP ? "tcp" : "udp", "server",
						l->p->servers[srv % INNET_LB_MAX_SERVERS].id, "unit",
						v->unit % LB_UNITS_PER_SERVER, "idle_ms",
						(int)(now - v->seen_ms), "closing", v->closing));
	fprintf(l->t, "  %-21s %-10s %s -> %u/%u idle %u ms%s\n", cl,
		l->c->vips[k->vip % l->c->n_vips].name, k->proto == LB_PROTO_TCP ? "tcp" : "udp",
		l->p->servers[srv % INNET_LB_MAX_SERVERS].id, v->unit % LB_UNITS_PER_SERVER,
		now - v->seen_ms, v->closing ? " (closing)" : "");
	return 0;
}

static const char help_text[] =
	"lb commands (innet ctl prog INSTANCE ...):\n"
	"  show                               VIPs, pools, units (state, load, report age, share)\n"
	"  stats                              the balancer's counters\n"
	"  unit add SERVER UNIT cpu|accelerator IP:PORT [weight W] [mac MAC] [port P]\n"
	"  unit del SERVER UNIT               no new connections; slot freed when idle\n"
	"  unit drain|undrain SERVER UNIT     stop/resume new connections; existing ones stay\n"
	"  unit weight SERVER UNIT W          change the weight (Maglev, WRR)\n"
	"  conn count                         connection table entries\n"
	"  conn list [N]                      up to N connections (default 20, at most 1000)\n"
	"  conn sweep                         remove idle connections now\n";

int lb_on_ctl(struct innet_cp *cp, void *priv, int argc, char **argv, struct json_t *reply,
	      char *err, size_t errlen)
{
	struct lb_priv *p = priv;
	const struct lb_conf *c = &p->conf;
	char *buf = NULL;
	size_t len = 0;
	FILE *t = open_memstream(&buf, &len);
	if (t == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = 0;
	const char *w0 = argc > 0 ? argv[0] : "help";
	if (!strcmp(w0, "help")) {
		fputs(help_text, t);
	} else if (!strcmp(w0, "show") && argc == 1) {
		rc = cmd_show(cp, p, reply, t);
	} else if (!strcmp(w0, "stats") && argc == 1) {
		json_object_set_new(reply, "counters", stats_json(cp, t));
	} else if (!strcmp(w0, "unit")) {
		rc = cmd_unit(cp, p, argc - 1, argv + 1, reply, t, err, errlen);
	} else if (!strcmp(w0, "conn") && argc >= 2 && !strcmp(argv[1], "count") && argc == 2) {
		struct innet_table_info ti;
		innet_cp_table_info(cp, T_CONN, &ti);
		json_object_set_new(reply, "count", json_integer(ti.entries));
		json_object_set_new(reply, "capacity", json_integer(ti.capacity));
		fprintf(t, "%u connections (capacity %u)\n", ti.entries, ti.capacity);
	} else if (!strcmp(w0, "conn") && argc >= 2 && !strcmp(argv[1], "list") && argc <= 3) {
		uint64_t n = 20;
		if (argc == 3 && innet_parse_u64(argv[2], 0, 1000, &n) != 0) {
			snprintf(err, errlen, "conn list N: N must be 0..1000");
			rc = -EINVAL;
		} else {
			struct list_ctx l = { .arr = json_array(), .t = t, .max = (uint32_t)n, .c = c,
						 .p = p };
			innet_cp_table_foreach(cp, T_CONN, list_one, &l);
			json_object_set_new(reply, "conns", l.arr);
		}
	} else if (!strcmp(w0, "conn") && argc == 2 && !strcmp(argv[1], "sweep")) {
		uint32_t n = lb_sweep(cp, c);
		json_object_set_new(reply, "removed", json_integer(n));
		fprintf(t, "removed %u idle connections\n", n);
	} else {
		snprintf(err, errlen, "unknown lb command '%s' (try: help)", w0);
		rc = -EINVAL;
	}
	fclose(t);
	if (rc == 0)
		json_object_set_new(reply, "text", json_string(buf ? buf : ""));
	free(buf);
	return rc;
}
