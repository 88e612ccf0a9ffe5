/*
 * lb_contention.h — what the two connection-table contention tests of the
 * load balancer share (test_lb_contention.c: the user-space engine with
 * several workers over real sockets; test_lb_contention_xdp.c: the eBPF
 * program through BPF_PROG_TEST_RUN on several CPUs): an lb switch in proxy
 * mode whose policy would move a re-balanced flow (wrr over two units), its
 * established connections as the table holds them, a writer thread that
 * rewrites those entries in place (as the control plane does: `innet ctl
 * table`, the sweep) while packets of the same flows are looked up, and the
 * checks afterwards.
 *
 * What a false miss would do, and what the checks look for: a lookup that
 * gave up on an entry being written and called the flow new would pick a
 * unit again (wrr: most likely the other one), take a NAT port and insert
 * the entry anew over the live one — a lookup that found nothing
 * (bloom_collisions: every flow here has an entry), a new connection counted
 * (conn_new), a changed entry, or an insert refused as conn_table_full (or
 * as conn_busy, which the checks then cannot tell from a busy lookup: the
 * first count tells). The table's bounded
 * wait may run out (a writer preempted mid-write); that packet must be
 * dropped as conn_busy and nothing else may change.
 */
#ifndef LB_CONTENTION_H
#define LB_CONTENTION_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "unit/testutil.h"
#include "innet/clock.h"
#include "innet/switch.h"
#include "lb/lb_pvt.h"
#include "engine/switch_pvt.h"

#define LBC_VIP   5353u
#define LBC_REP   47900u
#define LBC_NAT   30000u
#define LBC_N_NAT 64u
#define LBC_FLOWS 32u

struct lbc {
	struct innet_switch *sw;
	struct innet_cp *cp;
	uint32_t net;                        /* 127.NET.P.x: the test's addresses */
	struct lb_conn_key key[LBC_FLOWS];   /* the flows' connections */
	struct lb_conn_val val[LBC_FLOWS];   /* as established */
	struct innet_addr client[LBC_FLOWS];
	_Atomic bool stop;
	_Atomic uint64_t writes;             /* entries rewritten by the writer */
	uint64_t conn_new0;                  /* lb's conn_new after the setup */
	uint64_t bloom_collisions0;          /* ... and its bloom_collisions: a lookup that
	                                      * found no entry after the filter said maybe */
	pthread_t writer;
};

static inline uint32_t lbc_ip(const struct lbc *t, uint32_t host)
{
	return (127u << 24) | (t->net << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

/* The lb switch: proxy mode, wrr over units at .10:7000 (port 0) and .11:7001 (port 1). */
static inline struct innet_switch *lbc_switch(struct lbc *t, bool xdp, uint32_t workers)
{
	static struct innet_switch_conf c;
	static char args[2048];
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "lbc-%s", xdp ? "xdp" : "udp");
	c.n_workers = workers;
	/* a port toward each unit, the unit its link peer (on XDP a peer's MAC
	 * is known: a forward leaves by XDP itself, not by the engine) */
	c.n_ports = 2;
	for (uint32_t i = 0; i < 2; i++) {
		c.ports[i].ip = lbc_ip(t, 1 + i);
		c.ports[i].peer_ip = lbc_ip(t, 10 + i);
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
	}
	if (xdp) {
		c.target = INNET_TARGET_XDP;
		c.xdp_no_attach = true;
	}
	uint32_t p = (uint32_t)getpid() & 0xffu;
	snprintf(args, sizeof(args),
		 "{\"idle_timeout_ms\": 3600000, \"conn_capacity\": 4096, \"maglev_size\": 251, "
		 "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": \"wrr\"}], "
		 "\"pools\": [{\"name\": \"p\", \"servers\": ["
		 "{\"id\": 1, \"units\": [{\"id\": 0, \"kind\": \"cpu\", \"address\": \"127.%u.%u.10:7000\", \"port\": 0}]},"
		 "{\"id\": 2, \"units\": [{\"id\": 0, \"kind\": \"cpu\", \"address\": \"127.%u.%u.11:7001\", \"port\": 1}]}]}]}",
		 LBC_VIP, t->net, p, t->net, p);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "lb");
	c.progs[0].program = innet_program_find("lb");
	c.progs[0].udp[0] = LBC_VIP;
	c.progs[0].udp[1] = LBC_REP;
	c.progs[0].n_udp = 2;
	for (uint32_t i = 0; i < LBC_N_NAT; i++)
		c.progs[0].udp[c.progs[0].n_udp++] = (uint16_t)(LBC_NAT + i);
	c.progs[0].args_json = args;
	char err[512];
	t->sw = innet_switch_create(&c, err, sizeof(err));
	if (t->sw == NULL)
		fail_msg("switch: %s", err);
	t->cp = innet_switch_prog(t->sw, "lb");
	return t->sw;
}

static inline uint64_t lbc_stat(const struct lbc *t, unsigned st)
{
	uint64_t v = 0;
	innet_cp_reg_read(t->cp, innet_cp_reg_find(t->cp, "lb_stats"), st, &v);
	return v;
}

/* Flow f's connection key (proxy mode: client address and port, the VIP). */
static inline void lbc_key_of(struct lbc *t, uint32_t f)
{
	t->key[f] = (struct lb_conn_key){ .cip = t->client[f].ip, .cport = t->client[f].udp,
					  .vport = LBC_VIP, .proto = 17, .vip = 0 };
}

/* After the flows are established: their entries as the table holds them. */
static inline void lbc_snapshot(struct lbc *t)
{
	for (uint32_t f = 0; f < LBC_FLOWS; f++) {
		lbc_key_of(t, f);
		assert_int_equal(innet_cp_table_get(t->cp, T_CONN, &t->key[f], &t->val[f]), 0);
	}
	t->conn_new0 = lbc_stat(t, LB_ST_CONN_NEW);
	t->bloom_collisions0 = lbc_stat(t, LB_ST_BLOOM_COLLISIONS);
	assert_int_equal(t->conn_new0, LBC_FLOWS);
}

/* The writer: rewrites every flow's entry in place, with the value it has,
 * until told to stop (a replace: the entry's slot is odd while it writes). */
static void *lbc_writer_main(void *arg)
{
	struct lbc *t = arg;
	while (!atomic_load(&t->stop))
		for (uint32_t f = 0; f < LBC_FLOWS; f++)
			if (innet_cp_table_add(t->cp, T_CONN, &t->key[f], &t->val[f]) == 0)
				atomic_fetch_add(&t->writes, 1);
	return NULL;
}

static inline void lbc_writer_start(struct lbc *t)
{
	atomic_store(&t->stop, false);
	assert_int_equal(pthread_create(&t->writer, NULL, lbc_writer_main, t), 0);
}

static inline void lbc_writer_stop(struct lbc *t)
{
	atomic_store(&t->stop, true);
	pthread_join(t->writer, NULL);
}

/* After the race: no connection was made anew, no entry changed, and every
 * packet lb dropped was dropped as conn_busy (a busy lookup), none refused as
 * a new connection would be. Returns the conn_busy drops. */
static inline uint64_t lbc_check(struct lbc *t)
{
	struct innet_prog_stats st;
	innet_cp_stats(t->cp, &st);
	uint64_t drops = 0;
	for (unsigned r = 0; r < INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS; r++) {
		drops += st.drops[r];
		if (st.drops[r] != 0 && r != LB_DR_CONN_BUSY)
			fail_msg("%llu packets dropped as '%s' (only conn_busy may be)",
				 (unsigned long long)st.drops[r], innet_cp_drop_reason_name(t->cp, r));
	}
	/* every flow has an entry: a lookup that found none was a false miss */
	uint64_t misses = lbc_stat(t, LB_ST_BLOOM_COLLISIONS) - t->bloom_collisions0;
	if (misses != 0)
		fail_msg("%llu lookups of live connections found nothing", (unsigned long long)misses);
	assert_int_equal(lbc_stat(t, LB_ST_CONN_NEW), t->conn_new0);
	assert_int_equal(lbc_stat(t, LB_ST_CONN_TABLE_FULL), 0);
	assert_int_equal(lbc_stat(t, LB_ST_CONN_EXPIRED), 0);
	for (uint32_t f = 0; f < LBC_FLOWS; f++) {
		struct lb_conn_val v;
		assert_int_equal(innet_cp_table_get(t->cp, T_CONN, &t->key[f], &v), 0);
		if (v.unit != t->val[f].unit || v.nat != t->val[f].nat)
			fail_msg("flow %u's connection changed: unit %u nat %u, was unit %u nat %u", f,
				 v.unit, v.nat, t->val[f].unit, t->val[f].nat);
	}
	struct innet_table_info ti;
	assert_int_equal(innet_cp_table_info(t->cp, T_CONN, &ti), 0);
	assert_int_equal(ti.entries, LBC_FLOWS);
	printf("# %llu entries rewritten meanwhile; %llu packets dropped as conn_busy, table busy "
	       "count %llu\n", (unsigned long long)atomic_load(&t->writes),
	       (unsigned long long)st.drops[LB_DR_CONN_BUSY], (unsigned long long)ti.busy);
	assert_true(atomic_load(&t->writes) > 1000);   /* the writer really raced the lookups */
	return drops;
}

/* Bind thread attributes to the cpu-th CPU this process may use. */
static inline bool lbc_attr_cpu(pthread_attr_t *attr, int cpu)
{
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		return false;
	CPU_ZERO(&one);
	for (int c = 0, seen = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed) && seen++ == cpu)
			CPU_SET(c, &one);
	if (CPU_COUNT(&one) == 0)
		return false;
	pthread_attr_init(attr);
	return pthread_attr_setaffinity_np(attr, sizeof(one), &one) == 0;
}

static inline int lbc_cpus(void)
{
	cpu_set_t allowed;
	return sched_getaffinity(0, sizeof(allowed), &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
}

#endif /* LB_CONTENTION_H */
