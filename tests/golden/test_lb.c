/*
 * test_lb.c — golden tests of the load balancer program "lb" in proxy mode,
 * through the real pipeline with innet_switch_inject (packet in, verdict and
 * packets out), and its control commands (on_ctl, called as the control
 * thread would):
 *
 *   - PCC: 2000 flows keep their unit while units are added, drained,
 *     re-weighted, removed and change state (reports: busy, unavailable);
 *     new flows avoid drained/removed/unavailable units
 *   - policies: none, ecmp, wrr (exact 3:1), p2c (prefers the less loaded),
 *     accel (CPU first; when the CPU is busy a split of new flows by remaining
 *     capacity, weight x (256 - level), the busy CPU keeping its share; back
 *     to the CPU when it recovers): shares within 0.045 of the expected
 *     proportions over 2000 flows for six sets of levels, states and weights
 *   - reports: accepted, replayed, spoofed (wrong key), malformed, unknown
 *     unit, wrong kind, no key — each refused with its named reason, by the
 *     handler's cheap checks or by on_cpu's verification (the switch is not
 *     started: innet_switch_inject runs on_cpu), counted either way
 *   - full NAT: request out from a NAT port, reply back from the VIP port;
 *     replies from strangers or for unknown NAT ports dropped
 *   - a full connection table and exhausted NAT ports behave as documented
 *   - a busy lookup (a writer held inside a connection's entry, or its reverse
 *     entry) drops the flow's packets as conn_busy, never balances it anew
 *   - aging: lazy expiry and the sweep free the entry and its NAT port
 *   - units whose agent never reported: served and shown "unknown" however
 *     long (down_after_ms counts from a unit's first report); "grace" and
 *     "down" ("unreported") hold them down as asked; lb_unit_health's table
 *   - bad settings are refused with a message
 *   - packet mode through raw ports (root only; skipped otherwise): Ethernet
 *     frames in, rewritten frames out, each compared byte for byte with a
 *     frame this file builds from scratch (its own checksum code): DNAT of
 *     UDP and TCP to the unit's address, MAC and port, SNAT of the replies
 *     back to the VIP toward the client's MAC, TTL - 1, source MAC = the
 *     egress interface's; partial (offloaded) checksums completed; a UDP
 *     checksum of 0 kept; malformed frames dropped by name; and, without
 *     root, the checksum helpers on 2000 random frames
 *
 * Addresses: switch port 127.60.P.1 (P from the process id), units
 * 127.60.P.(10+i), clients 127.61.x.y (never contacted: nothing is sent).
 * The packet-mode test runs in a network namespace of its own (unshare)
 * with three veth interfaces as raw ports; nothing is sent on them either
 * (the switch is never started: innet_switch_inject only).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/lb.h"
#include "innet/switch.h"
#include "innet/clock.h"
#include "lb/lb_pvt.h"
#include "engine/switch_pvt.h"

#define VIP_PORT  5353u
#define REP_PORT  47900u
#define NAT_BASE  30000u

static uint32_t sub(void)
{
	return ((uint32_t)getpid() & 0xffu);
}

static uint32_t sw_ip(void)
{
	return (127u << 24) | (60u << 16) | (sub() << 8) | 1u;
}

static uint32_t unit_ip(uint32_t i)
{
	return (127u << 24) | (60u << 16) | (sub() << 8) | (10u + i);
}

static char key_path[64];
static struct innet_lb_key key;
static struct innet_switch *cur;

static int setup_key(void **state)
{
	uint8_t raw[32];
	for (int i = 0; i < 32; i++)
		raw[i] = (uint8_t)(i * 13 + 1);
	innet_lb_key_init(&key, raw);
	snprintf(key_path, sizeof(key_path), "/tmp/innet-lb-golden-%d.key", (int)getpid());
	FILE *f = fopen(key_path, "w");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%02x", raw[i]);
	fclose(f);
	return 0;
}

static int teardown_key(void **state)
{
	unlink(key_path);
	return 0;
}

static int teardown(void **state)
{
	innet_switch_destroy(cur);
	cur = NULL;
	return 0;
}

/* A switch running lb with `body` spliced into its settings. */
static struct innet_switch *make_lb(const char *body, uint32_t n_nat, char *err, size_t errlen)
{
	static struct innet_switch_conf c;
	static char args[8192];
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "lb-golden");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = sw_ip();
	snprintf(c.ports[0].name, sizeof(c.ports[0].name), "p0");
	snprintf(args, sizeof(args), "{\"key_file\": \"%s\", \"maglev_size\": 4099, %s}", key_path, body);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "lb");
	c.progs[0].program = innet_program_find("lb");
	c.progs[0].udp[0] = VIP_PORT;
	c.progs[0].udp[1] = REP_PORT;
	c.progs[0].n_udp = 2;
	for (uint32_t i = 0; i < n_nat; i++)
		c.progs[0].udp[c.progs[0].n_udp++] = (uint16_t)(NAT_BASE + i);
	c.progs[0].args_json = args;
	char e[512];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err ? err : e, err ? errlen : sizeof(e));
	if (sw == NULL && err == NULL)
		fail_msg("switch: %s", e);
	cur = sw;
	return sw;
}

/* Units "u0".."uN" of the settings: server 1+i with one unit 0 each. */
static const char *servers_json(uint32_t n, const char *kinds, char *buf, size_t len)
{
	int off = snprintf(buf, len, "\"pools\": [{\"name\": \"p\", \"servers\": [");
	for (uint32_t i = 0; i < n; i++)
		off += snprintf(buf + off, len - off,
				"%s{\"id\": %u, \"units\": [{\"id\": 0, \"kind\": \"%s\", "
				"\"address\": \"127.60.%u.%u:%u\"}]}", i ? "," : "", 1 + i,
				kinds && kinds[i] == 'a' ? "accelerator" : "cpu", sub(), 10 + i, 7000 + i);
	snprintf(buf + off, len - off, "]}]");
	return buf;
}

static struct innet_cp *lbcp(void)
{
	return innet_switch_prog(cur, "lb");
}

/* Run a control command (we are the only thread: the switch is not started). */
static int ctl(const char *line, json_t **out)
{
	char copy[256], *argv[16], err[256] = "";
	int argc = 0;
	snprintf(copy, sizeof(copy), "%s", line);
	for (char *t = strtok(copy, " "); t && argc < 16; t = strtok(NULL, " "))
		argv[argc++] = t;
	struct innet_cp *cp = lbcp();
	json_t *reply = json_object();
	int rc = cp->program->on_ctl(cp, cp->priv, argc, argv, reply, err, sizeof(err));
	if (rc != 0)
		printf("# ctl '%s': %s\n", line, err);
	if (out)
		*out = reply;
	else
		json_decref(reply);
	return rc;
}

static struct innet_inject_result res;

/* Why a packet was refused: by the handler (a DROP verdict), or by on_cpu
 * after the handler handed it over (TO_CPU; the switch is not started, so
 * the injection ran on_cpu). 0 if neither refused it. */
static unsigned reason_of(const struct innet_inject_result *r)
{
	if (r->action == INNET_DROP)
		return r->drop_reason;
	return r->action == INNET_TO_CPU ? r->cpu_drop_reason : 0;
}

/* A client datagram to the VIP. Returns the unit index it went to (by
 * destination address), -1 when dropped. */
static int send_client(uint32_t client, uint16_t cport)
{
	struct innet_addr src = { .ip = (127u << 24) | (61u << 16) | client, .udp = cport };
	uint8_t q[32] = "query";
	assert_int_equal(innet_switch_inject(cur, 0, VIP_PORT, &src, q, sizeof(q), &res), 0);
	if (res.action != INNET_FORWARD)
		return -1;
	assert_int_equal(res.n_out, 1);
	uint32_t host = res.out[0].dst.ip & 0xff;
	assert_true(host >= 10);
	assert_int_equal(res.out[0].dst.udp, 7000 + (host - 10));
	assert_true(res.out[0].src_udp >= NAT_BASE);
	return (int)(host - 10);
}

static uint64_t seqno = 1;

static int send_report(const struct innet_lb_key *k, uint16_t server, uint16_t unit, uint8_t kind,
		       uint8_t state, uint8_t load, uint64_t seq)
{
	struct innet_lb_report r = { .server = server, .unit = unit, .kind = kind, .state = state,
				     .load = load, .rflags = INNET_LB_RF_THRESHOLD, .seq = seq };
	uint8_t buf[64];
	assert_int_equal(innet_lb_report_seal(&r, k, buf, sizeof(buf)), 48);
	struct innet_addr src = { .ip = unit_ip(0), .udp = 9999 };
	assert_int_equal(innet_switch_inject(cur, 0, REP_PORT, &src, buf, 48, &res), 0);
	return res.action == INNET_DROP || res.cpu_drop_reason != 0 ? (int)reason_of(&res)
								     : -(int)res.action;
}

/* A report that passes the handler's cheap checks goes to the control thread
 * (TO_CPU), which verifies its MAC and the rest; the switch is not started,
 * so the injection ran on_cpu before returning: accepted if on_cpu counted
 * no drop reason. */
#define ACCEPTED 1
static int norm(int rc)
{
	return rc == -(int)INNET_TO_CPU ? ACCEPTED : rc;
}

static void ok_report(uint16_t server, uint8_t kind, uint8_t state, uint8_t load)
{
	int rc = send_report(&key, server, 0, kind, state, load, seqno++);
	assert_int_equal(norm(rc), ACCEPTED);
}

static uint64_t prog_drops(unsigned reason)
{
	struct innet_prog_stats st;
	innet_cp_stats(lbcp(), &st);
	return st.drops[reason];
}

static uint64_t lb_stat(unsigned st)
{
	uint64_t v = 0;
	innet_cp_reg_read(lbcp(), innet_cp_reg_find(lbcp(), "lb_stats"), st, &v);
	return v;
}

/* On the XDP target, the eBPF program took every packet of the test
 * (nothing was passed up to the user-space engine: the verdicts and bytes
 * checked are the eBPF program's). */
static void assert_all_in_xdp(void)
{
	test_assert_xdp_ran(lbcp());
	if (!test_target_xdp())
		return;
	struct innet_prog_stats st;
	innet_cp_stats(lbcp(), &st);
	printf("# xdp: %llu of %llu packets handled by the eBPF program\n",
	       (unsigned long long)st.xdp_rx_pkts, (unsigned long long)st.rx_pkts);
	assert_int_equal(st.xdp_rx_pkts, st.rx_pkts);
}

#define NFLOWS 2000

static void test_pcc(void **state)
{
	char sj[2048], body[4096];
	/* 4 configured units (servers 1..4) and server 5 with none yet. */
	int off = snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", "
			   "\"policy\": \"maglev\"}], %s", VIP_PORT, servers_json(4, NULL, sj, sizeof(sj)));
	body[off - 3] = '\0'; /* reopen the servers array */
	snprintf(body + strlen(body), sizeof(body) - strlen(body),
		 ", {\"id\": 5, \"units\": []}]}], \"conn_capacity\": 8192");
	make_lb(body, 1024, NULL, 0);
	static int unit_of[NFLOWS];
	int count[8] = { 0 };
	for (int f = 0; f < NFLOWS; f++) {
		unit_of[f] = send_client((uint32_t)f / 200 + 1, (uint16_t)(10000 + f));
		assert_true(unit_of[f] >= 0 && unit_of[f] < 4);
		count[unit_of[f]]++;
	}
	for (int u = 0; u < 4; u++)
		assert_true(count[u] > NFLOWS / 8); /* Maglev spreads them */

	static const char *const steps[] = {
		"unit add 5 0 cpu 127.60.SUB.14:7004",
		"unit drain 1 0",
		"unit weight 2 0 5",
		"unit del 3 0",
		"report-busy 4",
		"report-down 2",
		"unit undrain 1 0",
	};
	for (unsigned s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
		char line[128];
		snprintf(line, sizeof(line), "%s", steps[s]);
		char *at = strstr(line, "SUB");
		if (at != NULL) {
			char tail[64];
			snprintf(tail, sizeof(tail), "%s", at + 3);
			snprintf(at, sizeof(line) - (size_t)(at - line), "%u%s", sub(), tail);
		}
		if (!strcmp(line, "report-busy 4"))
			ok_report(4, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY, 250);
		else if (!strcmp(line, "report-down 2"))
			ok_report(2, INNET_LB_KIND_CPU, 0, 0);
		else
			assert_int_equal(ctl(line, NULL), 0);
		int moved = 0;
		for (int f = 0; f < NFLOWS; f++)
			moved += send_client((uint32_t)f / 200 + 1, (uint16_t)(10000 + f)) != unit_of[f];
		printf("# step '%s': %d of %d connections moved\n", line, moved, NFLOWS);
		assert_int_equal(moved, 0);
	}
	/* New flows: units 0 (undrained) and 4 (added) and 3 (busy, but maglev
	 * ignores load) are usable; 2 is removed, 1 reported down. */
	int newc[8] = { 0 };
	for (int f = 0; f < 1000; f++) {
		int u = send_client(200 + (uint32_t)f / 200, (uint16_t)(20000 + f));
		assert_true(u >= 0);
		newc[u]++;
	}
	printf("# new flows after the steps: %d %d %d %d %d\n", newc[0], newc[1], newc[2], newc[3],
	       newc[4]);
	assert_int_equal(newc[1], 0);
	assert_int_equal(newc[2], 0);
	assert_true(newc[0] > 100 && newc[3] > 100 && newc[4] > 100);
	json_t *j;
	assert_int_equal(ctl("show", &j), 0);
	assert_non_null(strstr(json_string_value(json_object_get(j, "text")), "removed"));
	json_decref(j);
	assert_all_in_xdp();
}

static void test_policies(void **state)
{
	char sj[2048], body[4096];
	/* none, ecmp, wrr on pool p (units 0..1, weights 3:1). */
	servers_json(2, NULL, sj, sizeof(sj));
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
		 "\"wrr\"}], %s", VIP_PORT, sj);
	make_lb(body, 512, NULL, 0);
	assert_int_equal(ctl("unit weight 1 0 3", NULL), 0);
	int c[2] = { 0 };
	for (int f = 0; f < 400; f++)
		c[send_client(1, (uint16_t)(1000 + f))]++;
	assert_int_equal(c[0], 300);
	assert_int_equal(c[1], 100);
	teardown(NULL);

	static const char *const pols[] = { "none", "ecmp" };
	for (int p = 0; p < 2; p++) {
		snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
			 "\"%s\"}], %s", VIP_PORT, pols[p], sj);
		make_lb(body, 64, NULL, 0);
		c[0] = c[1] = 0;
		for (int f = 0; f < 60; f++)
			c[send_client(2, (uint16_t)(1000 + f))]++;
		if (p == 0)
			assert_int_equal(c[0], 60);
		else
			assert_true(c[0] > 10 && c[1] > 10);
		teardown(NULL);
	}

	/* p2c: unit 0 loaded, unit 1 idle. */
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
		 "\"p2c\"}], %s", VIP_PORT, sj);
	make_lb(body, 64, NULL, 0);
	ok_report(1, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 150);
	ok_report(2, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 10);
	c[0] = c[1] = 0;
	for (int f = 0; f < 60; f++)
		c[send_client(3, (uint16_t)(1000 + f))]++;
	printf("# p2c: loaded %d, idle %d\n", c[0], c[1]);
	assert_true(c[1] > 35 && c[0] < 25); /* both picks loaded: 1/4 of the time */
	teardown(NULL);
}

static void test_accel(void **state)
{
	char body[2048];
	snprintf(body, sizeof(body),
		 "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": \"accel\"}], "
		 "\"thresholds\": {\"cpu\": 200, \"accelerator\": 220}, "
		 "\"pools\": [{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": ["
		 "{\"id\": 0, \"kind\": \"cpu\", \"address\": \"127.60.%u.10:7000\"},"
		 "{\"id\": 1, \"kind\": \"accelerator\", \"address\": \"127.60.%u.11:7001\"}]}]}]",
		 VIP_PORT, sub(), sub());
	make_lb(body, 512, NULL, 0);
	uint16_t port = 1000;
	/* No reports: the CPU. */
	for (int f = 0; f < 20; f++)
		assert_int_equal(send_client(1, port++), 0);
	int first = send_client(9, 999);
	/* CPU over its threshold: new connections split by remaining capacity,
	 * CPU 1 x (256 - 210) = 46 against the accelerator's 256 (no report:
	 * level 0): the accelerator takes most, the CPU keeps a share. */
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 210, seqno++)),
			 ACCEPTED);
	int c[2] = { 0 };
	for (int f = 0; f < 200; f++)
		c[send_client(1, port++)]++;
	printf("# accel, CPU busy: cpu %d accelerator %d (expected 15 %% cpu)\n", c[0], c[1]);
	assert_true(c[0] >= 10 && c[0] <= 55);
	assert_int_equal(send_client(9, 999), first); /* the old connection stays */
	/* CPU recovers: back to it. */
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 20, seqno++)),
			 ACCEPTED);
	for (int f = 0; f < 10; f++)
		assert_int_equal(send_client(1, port++), 0);
	/* Accelerator unavailable and CPU busy: still the CPU (the only one). */
	assert_int_equal(norm(send_report(&key, 1, 1, INNET_LB_KIND_ACCEL, 0, 0, seqno++)),
			 ACCEPTED);
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 255, seqno++)),
			 ACCEPTED);
	for (int f = 0; f < 10; f++)
		assert_int_equal(send_client(1, port++), 0);
	assert_int_equal(send_client(9, 999), first);
}

/* The accel policy's split, through the pipeline: one server with a CPU
 * (unit 0) and one or two accelerators (units 1, 2), reports with given
 * states and levels, then SPLIT_FLOWS new flows; each unit's share must be
 * within SPLIT_TOL of weight x (256 - level) / sum. The switch's PRNG seed
 * is fixed (0), so the draws, and the counts printed, are the same on every
 * run (and the same sequence in every case: their errors are correlated);
 * the tolerance is 4 standard deviations of a binomial share
 * (sqrt(p (1 - p) / 2000) <= 0.0112), so any seed would pass too. */
#define SPLIT_FLOWS 2000
#define SPLIT_TOL   0.045

struct split_case {
	const char *what;
	uint32_t n_units;                 /* 2 or 3 */
	uint32_t weight[3];
	uint8_t state[3];                 /* reported state bits; 0xff = no report */
	uint8_t load[3];                  /* reported level */
	bool cpu_all;                     /* the CPU is not busy: it takes every flow */
};

static void run_split(const struct split_case *sc)
{
	static const char *const kind_name[3] = { "cpu", "accelerator", "accelerator" };
	static const uint8_t kind[3] = { INNET_LB_KIND_CPU, INNET_LB_KIND_ACCEL, INNET_LB_KIND_ACCEL };
	char units[1024], body[2048];
	int off = 0;
	for (uint32_t u = 0; u < sc->n_units; u++)
		off += snprintf(units + off, sizeof(units) - (size_t)off,
				"%s{\"id\": %u, \"kind\": \"%s\", \"weight\": %u, \"address\": \"127.60.%u.%u:%u\"}",
				u ? "," : "", u, kind_name[u], sc->weight[u], sub(), 10 + u, 7000 + u);
	snprintf(body, sizeof(body),
		 "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": \"accel\"}], "
		 "\"thresholds\": {\"cpu\": 200, \"accelerator\": 220}, \"conn_capacity\": 8192, "
		 "\"pools\": [{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": [%s]}]}]",
		 VIP_PORT, units);
	make_lb(body, SPLIT_FLOWS + 48, NULL, 0); /* NAT ports are per unit */
	double rem[3] = { 0 }, total = 0;
	for (uint32_t u = 0; u < sc->n_units; u++) {
		if (sc->state[u] != 0xff)
			assert_int_equal(norm(send_report(&key, 1, (uint16_t)u, kind[u], sc->state[u],
							  sc->load[u], seqno++)), ACCEPTED);
		rem[u] = sc->weight[u] * (256.0 - (sc->state[u] == 0xff ? 0 : sc->load[u]));
		if (sc->cpu_all)
			rem[u] = u == 0 ? 1 : 0;
		total += rem[u];
	}
	int c[3] = { 0 };
	for (int f = 0; f < SPLIT_FLOWS; f++) {
		int u = send_client(20 + (uint32_t)f / 500, (uint16_t)(2000 + f));
		assert_true(u >= 0 && u < (int)sc->n_units);
		c[u]++;
	}
	for (uint32_t u = 0; u < sc->n_units; u++) {
		double share = (double)c[u] / SPLIT_FLOWS, want = rem[u] / total;
		printf("# split, %s: unit %u %d of %d (%.3f, expected %.3f)\n", sc->what, u, c[u],
		       SPLIT_FLOWS, share, want);
		assert_true(share >= want - SPLIT_TOL && share <= want + SPLIT_TOL);
	}
	teardown(NULL);
}

static void test_accel_split(void **state)
{
	static const struct split_case cases[] = {
		/* A busy CPU spills a proportion, not everything: 46 : 256. */
		{ "cpu over its threshold", 2, { 1, 1 }, { INNET_LB_ST_AVAILABLE, 0xff }, { 210, 0 }, false },
		/* Busy by the agent's bit at a moderate level: 156 : 128. */
		{ "cpu busy bit, accelerator half loaded", 2, { 1, 1 },
		  { INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY, INNET_LB_ST_AVAILABLE }, { 100, 128 }, false },
		/* Weights are capacities: 3 x 46 : 1 x 128. */
		{ "weights 3:1", 2, { 3, 1 }, { INNET_LB_ST_AVAILABLE, INNET_LB_ST_AVAILABLE }, { 210, 128 }, false },
		/* Both busy: still by remaining capacity, 46 : 26. */
		{ "both busy", 2, { 1, 1 },
		  { INNET_LB_ST_AVAILABLE, INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY }, { 210, 230 }, false },
		/* Two accelerators: 1 : 256 : 64. */
		{ "cpu saturated, two accelerators", 3, { 1, 1, 1 },
		  { INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY, INNET_LB_ST_AVAILABLE, INNET_LB_ST_AVAILABLE },
		  { 255, 0, 192 }, false },
		/* The CPU under its threshold takes everything (P4Mite), whatever
		 * the accelerators' levels. */
		{ "cpu under its threshold", 3, { 1, 1, 1 },
		  { INNET_LB_ST_AVAILABLE, INNET_LB_ST_AVAILABLE, INNET_LB_ST_AVAILABLE }, { 199, 0, 0 },
		  true },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_split(&cases[i]);
}

static void test_reports(void **state)
{
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s", VIP_PORT,
		 servers_json(2, "ca", sj, sizeof(sj)));
	make_lb(body, 8, NULL, 0);
	uint64_t s = 1000;
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, 1, 5, s)), ACCEPTED);
	/* Replays: the same seq, and an older one. */
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, 1, 5, s)), LB_DR_REPORT_REPLAY);
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, 1, 5, s - 1)), LB_DR_REPORT_REPLAY);
	/* Per (server, unit): server 2's sequence is its own. */
	assert_int_equal(norm(send_report(&key, 2, 0, INNET_LB_KIND_ACCEL, 1, 5, 3)), ACCEPTED);
	/* Spoofed: another key. */
	struct innet_lb_key bad;
	uint8_t raw[32] = { 9 };
	innet_lb_key_init(&bad, raw);
	assert_int_equal(norm(send_report(&bad, 1, 0, INNET_LB_KIND_CPU, 1, 5, s + 10)), LB_DR_REPORT_MAC);
	/* ... which did not advance the sequence: */
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, 1, 5, s + 1)), ACCEPTED);
	/* Unknown server, unknown unit, wrong kind. */
	assert_int_equal(norm(send_report(&key, 77, 0, INNET_LB_KIND_CPU, 1, 5, s + 2)), LB_DR_REPORT_UNKNOWN);
	assert_int_equal(norm(send_report(&key, 1, 3, INNET_LB_KIND_CPU, 1, 5, s + 2)), LB_DR_REPORT_UNKNOWN);
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_ACCEL, 1, 5, s + 2)), LB_DR_REPORT_KIND);
	/* Malformed: short, bit-flipped, wrong service. */
	struct innet_lb_report r = { .server = 1, .kind = 0, .state = 1, .seq = s + 3 };
	uint8_t buf[64];
	innet_lb_report_seal(&r, &key, buf, sizeof(buf));
	struct innet_addr src = { .ip = unit_ip(0), .udp = 9 };
	innet_switch_inject(cur, 0, REP_PORT, &src, buf, 40, &res);
	assert_int_equal(res.action, INNET_DROP); /* the handler's own checks */
	assert_int_equal(res.drop_reason, LB_DR_REPORT_LENGTH);
	buf[20] ^= 1;
	innet_switch_inject(cur, 0, REP_PORT, &src, buf, 48, &res);
	assert_int_equal(res.action, INNET_TO_CPU); /* the MAC: the control thread's */
	assert_int_equal(reason_of(&res), LB_DR_REPORT_MAC);
	buf[20] ^= 1;
	buf[2] = INNET_SVC_AGG;
	innet_switch_inject(cur, 0, REP_PORT, &src, buf, 48, &res);
	assert_int_equal(res.action, INNET_DROP);
	assert_int_equal(res.drop_reason, LB_DR_REPORT_SERVICE);
	/* Counted under their names, whichever side refused them. */
	assert_int_equal(prog_drops(LB_DR_REPORT_REPLAY), 2);
	assert_int_equal(prog_drops(LB_DR_REPORT_MAC), 2);
	assert_int_equal(prog_drops(LB_DR_REPORT_UNKNOWN), 2);
	assert_int_equal(prog_drops(LB_DR_REPORT_KIND), 1);
	assert_int_equal(prog_drops(LB_DR_REPORT_LENGTH), 1);
	assert_int_equal(prog_drops(LB_DR_REPORT_SERVICE), 1);
	assert_int_equal(lb_stat(LB_ST_REPORTS_OK), 3);
	/* The views agree: every report the handler passed on is a to_cpu verdict
	 * and one on_cpu call (3 accepted, 7 refused there); the two the handler
	 * refused are drop verdicts. */
	struct innet_prog_stats st;
	innet_cp_stats(lbcp(), &st);
	assert_int_equal(st.actions[INNET_TO_CPU], 10);
	assert_int_equal(st.cpu_pkts, 10);
	assert_int_equal(st.actions[INNET_DROP], 2);
	assert_all_in_xdp();
	assert_string_equal(innet_cp_drop_reason_name(lbcp(), LB_DR_REPORT_MAC), "report_bad_mac");
	assert_string_equal(innet_cp_drop_reason_name(lbcp(), LB_DR_REPORT_REPLAY), "report_replayed");
	teardown(NULL);

	/* No key configured: every report refused. */
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(body, sizeof(body), "{\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s}", VIP_PORT, sj);
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = sw_ip();
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "lb");
	c.progs[0].program = innet_program_find("lb");
	uint16_t ports[] = { VIP_PORT, REP_PORT, NAT_BASE };
	memcpy(c.progs[0].udp, ports, sizeof(ports));
	c.progs[0].n_udp = 3;
	c.progs[0].args_json = body;
	char err[256];
	test_target(&c);
	cur = innet_switch_create(&c, err, sizeof(err));
	assert_non_null(cur);
	assert_int_equal(norm(send_report(&key, 1, 0, INNET_LB_KIND_CPU, 1, 5, 5)), LB_DR_REPORT_NO_KEY);
}

static void test_full_nat(void **state)
{
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s", VIP_PORT,
		 servers_json(1, NULL, sj, sizeof(sj)));
	make_lb(body, 8, NULL, 0);
	struct innet_addr cl = { .ip = (127u << 24) | (61u << 16) | 5, .udp = 4444 };
	uint8_t q[8] = "abc";
	innet_switch_inject(cur, 0, VIP_PORT, &cl, q, sizeof(q), &res);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].dst.ip, unit_ip(0));
	uint16_t nat = res.out[0].src_udp;
	assert_true(nat >= NAT_BASE && nat < NAT_BASE + 8);
	/* The unit answers to the NAT port: back to the client from the VIP. */
	struct innet_addr un = { .ip = unit_ip(0), .udp = 7000 };
	uint8_t a[8] = "ans";
	innet_switch_inject(cur, 0, nat, &un, a, sizeof(a), &res);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].dst.ip, cl.ip);
	assert_int_equal(res.out[0].dst.udp, cl.udp);
	assert_int_equal(res.out[0].src_udp, VIP_PORT);
	assert_memory_equal(res.out[0].data, a, sizeof(a));
	/* A stranger on the NAT port; the unit on an unused NAT port. */
	struct innet_addr st = { .ip = unit_ip(5), .udp = 7000 };
	innet_switch_inject(cur, 0, nat, &st, a, sizeof(a), &res);
	assert_int_equal(res.drop_reason, LB_DR_UNKNOWN_SOURCE);
	innet_switch_inject(cur, 0, nat == NAT_BASE ? NAT_BASE + 1 : NAT_BASE, &un, a, sizeof(a), &res);
	assert_int_equal(res.drop_reason, LB_DR_NO_CONNECTION);
	/* 8 NAT ports toward the one unit: the 9th flow finds none. */
	for (int f = 1; f < 8; f++)
		assert_int_equal(send_client(6, (uint16_t)(100 + f)), 0);
	assert_int_equal(send_client(6, 200), -1);
	assert_int_equal(res.drop_reason, LB_DR_NAT_EXHAUSTED);
	/* The old flows still work. */
	assert_int_equal(send_client(6, 101), 0);
	assert_all_in_xdp();
}

/* A busy lookup: a writer stopped inside a connection's entry (the control
 * plane, preempted in the middle of a write) outlasts the table's bounded
 * wait. The flow may have a connection, so its packets are dropped as
 * conn_busy — never balanced anew (wrr over two units would move it to the
 * other one) — and so are the unit's replies while the reverse entry is
 * held. Once the writer goes on, the connection is as it was. */
static void test_busy_lookup(void **state)
{
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": \"wrr\"}], %s",
		 VIP_PORT, servers_json(2, NULL, sj, sizeof(sj)));
	make_lb(body, 8, NULL, 0);
	struct innet_cp *cp = lbcp();
	struct innet_addr cl = { .ip = (127u << 24) | (61u << 16) | 9, .udp = 5555 };
	int unit = send_client(9, 5555);
	assert_true(unit >= 0);
	uint16_t nat = res.out[0].src_udp;
	struct lb_conn_key k = { .cip = cl.ip, .cport = cl.udp, .vport = VIP_PORT, .proto = 17 };
	struct lb_conn_val v;
	assert_int_equal(innet_cp_table_get(cp, T_CONN, &k, &v), 0);
	uint64_t conn_new = lb_stat(LB_ST_CONN_NEW);

	assert_int_equal(innet_table_test_hold(cp->tables[T_CONN], &k, false, true), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(send_client(9, 5555), -1);
		assert_int_equal(res.drop_reason, LB_DR_CONN_BUSY);
	}
	assert_int_equal(innet_table_test_hold(cp->tables[T_CONN], &k, false, false), 0);
	assert_int_equal(lb_stat(LB_ST_CONN_NEW), conn_new);
	assert_int_equal(prog_drops(LB_DR_CONN_BUSY), 3);
	struct innet_table_info ti;
	assert_int_equal(innet_cp_table_info(cp, T_CONN, &ti), 0);
	assert_int_equal(ti.busy, 3);

	/* The reply side: the reverse entry held. */
	struct lb_rev_key rk = { .kind = 1, .proto = 17, .unit = v.unit, .port = v.nat };
	struct innet_addr un = { .ip = unit_ip((uint32_t)unit), .udp = (uint16_t)(7000 + unit) };
	uint8_t a[8] = "ans";
	assert_int_equal(innet_table_test_hold(cp->tables[T_REV], &rk, false, true), 0);
	assert_int_equal(innet_switch_inject(cur, 0, nat, &un, a, sizeof(a), &res), 0);
	assert_int_equal(res.action, INNET_DROP);
	assert_int_equal(res.drop_reason, LB_DR_CONN_BUSY);
	assert_int_equal(innet_table_test_hold(cp->tables[T_REV], &rk, false, false), 0);
	assert_int_equal(innet_switch_inject(cur, 0, nat, &un, a, sizeof(a), &res), 0);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].dst.ip, cl.ip);

	/* The writer went on: the flow keeps its unit and NAT port. */
	assert_int_equal(send_client(9, 5555), unit);
	assert_int_equal(res.out[0].src_udp, nat);
	assert_int_equal(lb_stat(LB_ST_CONN_NEW), conn_new);
	assert_all_in_xdp();
}

static void test_full_table(void **state)
{
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s, "
		 "\"conn_capacity\": 16", VIP_PORT, servers_json(2, NULL, sj, sizeof(sj)));
	make_lb(body, 64, NULL, 0);
	int ok = 0, full = 0;
	for (int f = 0; f < 40; f++) {
		int u = send_client(7, (uint16_t)(100 + f));
		if (u >= 0)
			ok++;
		else if (res.drop_reason == LB_DR_CONN_FULL)
			full++;
	}
	printf("# capacity 16: %d admitted, %d refused as conn_table_full\n", ok, full);
	assert_int_equal(ok + full, 40);
	assert_true(ok >= 16 - 2 && ok <= 16); /* a probe window may fill first */
	assert_int_equal(lb_stat(LB_ST_CONN_TABLE_FULL), (uint64_t)full);
	assert_int_equal(prog_drops(LB_DR_CONN_FULL), (uint64_t)full);
	/* NAT ports of refused flows were given back: 64 - admitted in use. */
	uint64_t used = 0, w;
	for (uint32_t s = 0; s < 2 * LB_UNITS_PER_SERVER; s++) {
		innet_cp_reg_read(lbcp(), innet_cp_reg_find(lbcp(), "nat_ports"), s, &w);
		used += (uint64_t)__builtin_popcountll(w);
	}
	assert_int_equal(used, (uint64_t)ok);
}

/* Lazy expiry and the sweep (idle_timeout_ms 40: the sweep removes what is
 * idle past 40 + 100 ms). Each step waits at least as long as it needs and
 * then acts at once; the one thing a stalled process can change — the
 * refreshed flow aging past the sweep's margin before the sweep runs — is
 * measured, and such a round is run again (at most 3 times). */
static bool aging_round(void)
{
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s, "
		 "\"idle_timeout_ms\": 40", VIP_PORT, servers_json(2, NULL, sj, sizeof(sj)));
	make_lb(body, 64, NULL, 0);
	for (int f = 0; f < 10; f++)
		assert_true(send_client(8, (uint16_t)(100 + f)) >= 0);
	json_t *j;
	assert_int_equal(ctl("conn count", &j), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 10);
	json_decref(j);
	usleep(150 * 1000); /* every flow idle past the timeout and the sweep's margin */
	/* Lazy: flow 0 comes back after its idle timeout: a new connection. */
	assert_true(send_client(8, 100) >= 0);
	uint64_t t_back = innet_now_ns();
	assert_int_equal(lb_stat(LB_ST_CONN_EXPIRED), 1);
	/* The sweep takes the other 9 and keeps flow 0's new entry... */
	assert_int_equal(ctl("conn sweep", &j), 0);
	long removed = (long)json_integer_value(json_object_get(j, "removed"));
	json_decref(j);
	if (innet_now_ns() - t_back >= 140000000ull) {
		/* ...unless the process stalled for the sweep's margin in between */
		printf("# aging: %.0f ms between flow 0's return and the sweep (margin 140): again\n",
		       (double)(innet_now_ns() - t_back) / 1e6);
		teardown(NULL);
		return false;
	}
	assert_int_equal(removed, 9);
	assert_int_equal(ctl("conn count", &j), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "count")), 1);
	json_decref(j);
	usleep(150 * 1000); /* flow 0's entry idle past the margin too */
	assert_int_equal(ctl("conn sweep", &j), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "removed")), 1);
	json_decref(j);
	uint64_t used = 0, w;
	for (uint32_t s = 0; s < 2 * LB_UNITS_PER_SERVER; s++) {
		innet_cp_reg_read(lbcp(), innet_cp_reg_find(lbcp(), "nat_ports"), s, &w);
		used += (uint64_t)__builtin_popcountll(w);
	}
	assert_int_equal(used, 0);
	assert_int_equal(ctl("conn list 5", NULL), 0);
	return true;
}

static void test_aging(void **state)
{
	for (int attempt = 0; attempt < 3; attempt++)
		if (aging_round())
			return;
	fail_msg("aging: the process stalled for 140 ms at the same step three times");
}

/* ------------------------------------------------------------------------ */
/* Units whose agent never reported ("unreported"), and down_after_ms         */

/* lb_unit_health, table-driven: (setting, state register, silence) -> health. */
static void test_health_table(void **state)
{
	static const struct {
		uint8_t unrep;
		uint32_t down_ms;
		uint32_t st;
		int64_t silent_ms;
		enum lb_health want;
	} cases[] = {
		/* never reported: served (unknown) however long, unless asked otherwise */
		{ LB_UNREP_SERVE, 1500, LB_US_UNKNOWN, 0, LB_HEALTH_UNKNOWN },
		{ LB_UNREP_SERVE, 1500, LB_US_UNKNOWN, 3600000, LB_HEALTH_UNKNOWN },
		{ LB_UNREP_SERVE, 0, LB_US_UNKNOWN, 3600000, LB_HEALTH_UNKNOWN },
		{ LB_UNREP_GRACE, 1500, LB_US_UNKNOWN, 1000, LB_HEALTH_UNKNOWN },
		{ LB_UNREP_GRACE, 1500, LB_US_UNKNOWN, 1501, LB_HEALTH_DOWN },
		{ LB_UNREP_GRACE, 0, LB_US_UNKNOWN, 3600000, LB_HEALTH_UNKNOWN },
		{ LB_UNREP_DOWN, 1500, LB_US_UNKNOWN, 0, LB_HEALTH_DOWN },
		{ LB_UNREP_DOWN, 0, LB_US_UNKNOWN, 0, LB_HEALTH_DOWN },
		/* reported: available and recent = up; unavailable or silent = down */
		{ LB_UNREP_SERVE, 1500, LB_US_REPORTED | INNET_LB_ST_AVAILABLE, 1000, LB_HEALTH_UP },
		{ LB_UNREP_SERVE, 1500, LB_US_REPORTED | INNET_LB_ST_AVAILABLE, 1501, LB_HEALTH_DOWN },
		{ LB_UNREP_SERVE, 0, LB_US_REPORTED | INNET_LB_ST_AVAILABLE, 3600000, LB_HEALTH_UP },
		{ LB_UNREP_SERVE, 1500, LB_US_REPORTED, 0, LB_HEALTH_DOWN },
		{ LB_UNREP_DOWN, 1500, LB_US_REPORTED | INNET_LB_ST_AVAILABLE | INNET_LB_ST_BUSY | 200u << 8,
		  10, LB_HEALTH_UP },
		{ LB_UNREP_GRACE, 1500, LB_US_REPORTED | INNET_LB_ST_AVAILABLE, 2000, LB_HEALTH_DOWN },
	};
	static struct lb_conf c; /* large: not on the stack */
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c.unreported = cases[i].unrep;
		c.down_after_ms = cases[i].down_ms;
		enum lb_health h = lb_unit_health(&c, cases[i].st, cases[i].silent_ms * 1000000);
		if (h != cases[i].want)
			fail_msg("case %u: health %d, want %d", i, (int)h, (int)cases[i].want);
	}
}

/* `prog lb show`'s state of unit i (pool p's units in order). */
static const char *show_state(unsigned i)
{
	static char st[16];
	json_t *j;
	assert_int_equal(ctl("show", &j), 0);
	json_t *u = json_array_get(json_object_get(json_array_get(json_object_get(j, "pools"), 0),
						   "units"), i);
	assert_non_null(u);
	snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(u, "state")));
	json_decref(j);
	return st;
}

/* Flows 0..n-1 of client `client`: how many went to each unit (-1: dropped). */
static void spread(uint32_t client, uint16_t base, int n, int c[2], int *dropped)
{
	c[0] = c[1] = *dropped = 0;
	for (int f = 0; f < n; f++) {
		int u = send_client(client, (uint16_t)(base + f));
		if (u < 0) {
			assert_int_equal(res.drop_reason, LB_DR_NO_BACKEND);
			(*dropped)++;
		} else {
			c[u]++;
		}
	}
}

/* down_after_ms in these cases: a step that must happen before it runs out
 * (a report's "up" seen, the grace period's first datagrams) has that long,
 * so it is long enough for a loaded machine; the waits for it to run out
 * are twice it. */
#define DOWN_MS 250u

/* Through the pipeline: with down_after_ms set and no agent ever reporting
 * (docs/lb.md's quick start), every unit keeps serving and shows "unknown";
 * down_after_ms starts with a unit's first report. "grace" and "down" ask
 * for the stricter behaviours. */
static void test_unreported(void **state)
{
	char sj[2048], body[4096];
	int c[2], dropped;
	servers_json(2, NULL, sj, sizeof(sj));

	/* Default ("serve"). */
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
		 "\"ecmp\"}], \"down_after_ms\": %u, %s", VIP_PORT, DOWN_MS, sj);
	make_lb(body, 512, NULL, 0);
	assert_string_equal(show_state(0), "unknown");
	usleep(2 * DOWN_MS * 1000); /* twice down_after_ms, no report */
	spread(20, 1000, 40, c, &dropped);
	printf("# serve, no agent, 2 x down_after_ms: unit0 %d, unit1 %d, dropped %d\n", c[0], c[1],
	       dropped);
	assert_int_equal(dropped, 0);
	assert_true(c[0] > 5 && c[1] > 5);
	assert_string_equal(show_state(0), "unknown");
	assert_string_equal(show_state(1), "unknown");
	/* Unit 0's agent reports: up; then silent past down_after_ms: down,
	 * while unit 1 (no agent) keeps serving. */
	ok_report(1, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 10);
	assert_string_equal(show_state(0), "up");
	usleep(2 * DOWN_MS * 1000);
	assert_string_equal(show_state(0), "down");
	assert_string_equal(show_state(1), "unknown");
	spread(21, 1000, 40, c, &dropped);
	assert_int_equal(dropped, 0);
	assert_int_equal(c[0], 0);
	assert_int_equal(c[1], 40);
	/* It reports again: up and used; it reports unavailable: down. */
	ok_report(1, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 10);
	assert_string_equal(show_state(0), "up");
	spread(22, 1000, 40, c, &dropped);
	assert_true(c[0] > 5 && c[1] > 5);
	ok_report(1, INNET_LB_KIND_CPU, 0, 10);
	assert_string_equal(show_state(0), "down");
	spread(23, 1000, 20, c, &dropped);
	assert_int_equal(c[0], 0);
	assert_int_equal(c[1], 20);
	teardown(NULL);

	/* "grace": served for down_after_ms from start, then no_backend. */
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
		 "\"ecmp\"}], \"down_after_ms\": %u, \"unreported\": \"grace\", %s", VIP_PORT, DOWN_MS, sj);
	make_lb(body, 512, NULL, 0);
	spread(24, 1000, 10, c, &dropped);
	assert_int_equal(dropped, 0);
	assert_string_equal(show_state(0), "unknown");
	usleep(2 * DOWN_MS * 1000);
	spread(25, 1000, 10, c, &dropped);
	assert_int_equal(dropped, 10);
	assert_string_equal(show_state(0), "down");
	ok_report(2, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 10);
	spread(26, 1000, 10, c, &dropped);
	assert_int_equal(c[1], 10);
	teardown(NULL);

	/* "down": nothing until an agent reports the unit available. */
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\", \"policy\": "
		 "\"ecmp\"}], \"unreported\": \"down\", %s", VIP_PORT, sj);
	make_lb(body, 512, NULL, 0);
	spread(27, 1000, 10, c, &dropped);
	assert_int_equal(dropped, 10);
	assert_int_equal(prog_drops(LB_DR_NO_BACKEND), 10);
	assert_string_equal(show_state(1), "down");
	ok_report(2, INNET_LB_KIND_CPU, INNET_LB_ST_AVAILABLE, 10);
	assert_string_equal(show_state(1), "up");
	spread(28, 1000, 10, c, &dropped);
	assert_int_equal(c[1], 10);
}

static void test_bad_settings(void **state)
{
	static const struct { const char *body; const char *msg; } cases[] = {
		{ "\"vips\": [], \"pools\": []", "pools" },
		{ "\"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": [{\"name\": \"p\", \"servers\": "
		  "[{\"id\": 1, \"units\": [{\"id\": 0, \"address\": \"1.2.3.4\"}]}]}]", "address" },
		{ "\"vips\": [{\"port\": 5353, \"pool\": \"q\"}], \"pools\": [{\"name\": \"p\", \"servers\": "
		  "[{\"id\": 1, \"units\": []}]}]", "no pool named" },
		{ "\"vips\": [{\"port\": 5353, \"pool\": \"p\", \"policy\": \"magic\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "policy" },
		{ "\"bogus\": 1, \"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "bogus" },
		{ "\"maglev_size\": 1000, \"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "prime" },
		{ "\"vips\": [{\"port\": 5354, \"pool\": \"p\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "not among" },
		{ "\"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": [{\"name\": \"p\", \"servers\": "
		  "[{\"id\": 1, \"units\": [{\"id\": 9, \"address\": \"1.2.3.4:5\"}]}]}]", "id" },
		{ "\"vips\": [{\"port\": 5353, \"pool\": \"p\", \"proto\": \"tcp\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "packet mode" },
		{ "\"unreported\": \"maybe\", \"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": "
		  "[{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", "'unreported'" },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[512] = "";
		struct innet_switch *sw = make_lb(cases[i].body, 4, err, sizeof(err));
		assert_null(sw);
		printf("# refused: %s\n", err);
		assert_non_null(strstr(err, cases[i].msg));
	}
	/* A bad key file. */
	char err[512] = "";
	char saved[64];
	snprintf(saved, sizeof(saved), "%s", key_path);
	snprintf(key_path, sizeof(key_path), "/nonexistent/key");
	assert_null(make_lb("\"vips\": [{\"port\": 5353, \"pool\": \"p\"}], \"pools\": [{\"name\": "
			    "\"p\", \"servers\": [{\"id\": 1, \"units\": []}]}]", 4, err, sizeof(err)));
	assert_non_null(strstr(err, "key_file"));
	snprintf(key_path, sizeof(key_path), "%s", saved);
	/* Control command errors. */
	char sj[2048], body[4096];
	snprintf(body, sizeof(body), "\"vips\": [{\"port\": %u, \"pool\": \"p\"}], %s", VIP_PORT,
		 servers_json(1, NULL, sj, sizeof(sj)));
	make_lb(body, 4, NULL, 0);
	assert_int_not_equal(ctl("unit drain 9 0", NULL), 0);
	assert_int_not_equal(ctl("unit drain 1 8", NULL), 0);
	assert_int_not_equal(ctl("unit add 1 0 cpu 1.2.3.4:5", NULL), 0); /* exists */
	assert_int_not_equal(ctl("unit add 1 1 gpu 1.2.3.4:5", NULL), 0);
	assert_int_not_equal(ctl("unit add 1 1 cpu 1.2.3.4", NULL), 0);
	assert_int_not_equal(ctl("unit weight 1 0 x", NULL), 0);
	assert_int_not_equal(ctl("conn list 5000", NULL), 0);
	assert_int_not_equal(ctl("frobnicate", NULL), 0);
	assert_int_equal(ctl("help", NULL), 0);
	assert_int_equal(ctl("stats", NULL), 0);
}

/* ------------------------------------------------------------------------ */
/* Packet mode through raw ports                                              */

/*   client 10.98.1.2 (02:77:00:00:01:02) ── port 0 "ilg-c"  (02:77:00:00:01:01)
 *   unit 1/0 10.98.2.10:5300, 3/0 :8080 (02:77:00:00:02:0a) ── port 1 "ilg-s0" (02:77:00:00:02:01)
 *   unit 2/0 10.98.3.10:5300, 4/0 :8080 (02:77:00:00:03:0a) ── port 2 "ilg-s1" (02:77:00:00:03:01)
 *   VIPs 10.98.0.100:53/udp, 10.98.0.100:8080/tcp */
#define PK_VIP     0x0a620064u
#define PK_CLIENT  0x0a620102u
static const uint64_t pk_port_mac[3] = { 0x027700000101ull, 0x027700000201ull, 0x027700000301ull };
static const uint64_t pk_unit_mac[3] = { 0, 0x02770000020aull, 0x02770000030aull };
static const uint32_t pk_unit_ip[3] = { 0, 0x0a62020au, 0x0a62030au };
#define PK_CLIENT_MAC 0x027700000102ull
static int pk_oldns = -1;

/* Our own checksum code (not lb's), for the expected frames. */
static uint32_t ck_sum(const uint8_t *p, uint32_t n, uint32_t acc)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		acc += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		acc += (uint32_t)p[n - 1] << 8;
	return acc;
}

static uint16_t ck_fold(uint32_t acc)
{
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint16_t)acc;
}

static void put16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xffff); }
static void putmac(uint8_t *p, uint64_t m)
{
	for (int i = 0; i < 6; i++)
		p[i] = (uint8_t)(m >> (40 - 8 * i));
}

enum { CK_FULL, CK_PARTIAL, CK_ZERO };

/* An Ethernet/IPv4/UDP or TCP frame with the given fields; returns its length. */
static uint32_t pk_frame(uint8_t *f, uint64_t dmac, uint64_t smac, uint32_t sip, uint32_t dip,
			 uint8_t ttl, uint8_t proto, uint16_t sport, uint16_t dport, uint8_t tcp_flags,
			 const char *payload, int ck)
{
	uint32_t plen = (uint32_t)strlen(payload), l4h = proto == 6 ? 20 : 8, l4len = l4h + plen;
	memset(f, 0, 14 + 20 + l4len);
	putmac(f, dmac);
	putmac(f + 6, smac);
	put16(f + 12, 0x0800);
	uint8_t *ip = f + 14, *l4 = ip + 20;
	ip[0] = 0x45;
	put16(ip + 2, 20 + l4len);
	put16(ip + 4, 0x1234);
	put16(ip + 6, 0x4000); /* DF */
	ip[8] = ttl;
	ip[9] = proto;
	put32(ip + 12, sip);
	put32(ip + 16, dip);
	put16(ip + 10, (uint16_t)~ck_fold(ck_sum(ip, 20, 0)));
	put16(l4, sport);
	put16(l4 + 2, dport);
	uint8_t *csum;
	if (proto == 6) {
		put32(l4 + 4, 1000);
		put32(l4 + 8, tcp_flags & 0x10 ? 2000 : 0);
		l4[12] = 5 << 4;
		l4[13] = tcp_flags;
		put16(l4 + 14, 65535);
		csum = l4 + 16;
	} else {
		put16(l4 + 4, l4len);
		csum = l4 + 6;
	}
	memcpy(l4 + l4h, payload, plen);
	uint32_t pseudo = ck_sum(ip + 12, 8, 0) + proto + l4len;
	if (ck == CK_PARTIAL) {
		put16(csum, ck_fold(pseudo));
	} else if (ck == CK_FULL) {
		uint16_t c = (uint16_t)~ck_fold(ck_sum(l4, l4len, pseudo));
		put16(csum, proto == 17 && c == 0 ? 0xffff : c);
	}
	return 14 + 20 + l4len;
}

/* Does the frame's IPv4 header and L4 checksum verify? */
static bool pk_verifies(const uint8_t *f)
{
	const uint8_t *ip = f + 14, *l4 = ip + 20;
	uint32_t l4len = (uint32_t)(ip[2] << 8 | ip[3]) - 20;
	if (ck_fold(ck_sum(ip, 20, 0)) != 0xffff)
		return false;
	if (ip[9] == 17 && l4[6] == 0 && l4[7] == 0)
		return true;
	return ck_fold(ck_sum(l4, l4len, ck_sum(ip + 12, 8, 0) + ip[9] + l4len)) == 0xffff;
}

/* Inject a frame on a raw port. */
static void pk_inject(uint16_t port, const uint8_t *f, uint32_t len)
{
	assert_int_equal(innet_switch_inject(cur, port, 0, NULL, f, len, &res), 0);
}

/* The one forwarded frame must be exactly `want` (len bytes) out of port. */
static void pk_expect(uint16_t port, const uint8_t *want, uint32_t len)
{
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, port);
	assert_int_equal(res.out[0].len, len);
	assert_true(pk_verifies(res.out[0].data));
	if (memcmp(res.out[0].data, want, len) != 0) {
		for (uint32_t i = 0; i < len; i++)
			if (res.out[0].data[i] != want[i])
				printf("# byte %u: got %02x, want %02x\n", i, res.out[0].data[i], want[i]);
		fail_msg("the rewritten frame differs from the expected one");
	}
}

static int pk_setup(void **state)
{
	if (geteuid() != 0)
		return 0;
	pk_oldns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (pk_oldns < 0 || unshare(CLONE_NEWNET) != 0) {
		printf("# unshare(CLONE_NEWNET): %s\n", strerror(errno));
		if (pk_oldns >= 0)
			close(pk_oldns);
		pk_oldns = -1;
		return 0;
	}
	static const char *const names[3] = { "ilg-c", "ilg-s0", "ilg-s1" };
	for (int i = 0; i < 3; i++) {
		char cmd[160];
		snprintf(cmd, sizeof(cmd), "ip link add %s address 02:77:00:00:0%d:01 type veth peer "
			 "name %s-p && ip link set %s up", names[i], i + 1, names[i], names[i]);
		if (system(cmd) != 0) {
			printf("# '%s' failed: no veth interfaces\n", cmd);
			setns(pk_oldns, CLONE_NEWNET);
			close(pk_oldns);
			pk_oldns = -1;
			return 0;
		}
	}
	return 0;
}

static int pk_teardown(void **state)
{
	teardown(state);
	if (pk_oldns >= 0) {
		/* The namespace and its interfaces go away with its last user. */
		if (setns(pk_oldns, CLONE_NEWNET) != 0)
			printf("# setns back: %s\n", strerror(errno));
		close(pk_oldns);
		pk_oldns = -1;
	}
	return 0;
}

static struct innet_switch *make_packet_lb(void)
{
	static struct innet_switch_conf c;
	static char args[4096];
	static const char *const names[3] = { "ilg-c", "ilg-s0", "ilg-s1" };
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "lb-golden-pk");
	c.n_workers = 1;
	c.n_ports = 3;
	for (int i = 0; i < 3; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%d", i);
		snprintf(c.ports[i].iface, sizeof(c.ports[i].iface), "%s", names[i]);
	}
	snprintf(args, sizeof(args),
		 "{\"mode\": \"packet\", \"key_file\": \"%s\", \"maglev_size\": 4099,"
		 " \"vips\": [{\"address\": \"10.98.0.100\", \"port\": 53, \"proto\": \"udp\", \"pool\": \"dns\"},"
		 "            {\"address\": \"10.98.0.100\", \"port\": 8080, \"proto\": \"tcp\", \"pool\": \"web\"}],"
		 " \"pools\": [{\"name\": \"dns\", \"servers\": ["
		 "   {\"id\": 1, \"units\": [{\"id\": 0, \"address\": \"10.98.2.10:5300\", \"mac\": \"02:77:00:00:02:0a\", \"port\": 1}]},"
		 "   {\"id\": 2, \"units\": [{\"id\": 0, \"address\": \"10.98.3.10:5300\", \"mac\": \"02:77:00:00:03:0a\", \"port\": 2}]}]},"
		 "  {\"name\": \"web\", \"servers\": ["
		 "   {\"id\": 3, \"units\": [{\"id\": 0, \"address\": \"10.98.2.10:8080\", \"mac\": \"02:77:00:00:02:0a\", \"port\": 1}]},"
		 "   {\"id\": 4, \"units\": [{\"id\": 0, \"address\": \"10.98.3.10:8080\", \"mac\": \"02:77:00:00:03:0a\", \"port\": 2}]}]}]}",
		 key_path);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "lb");
	c.progs[0].program = innet_program_find("lb");
	c.progs[0].raw = true;
	c.progs[0].args_json = args;
	char err[512];
	test_target(&c);
	cur = innet_switch_create(&c, err, sizeof(err));
	if (cur == NULL)
		fail_msg("packet-mode switch: %s", err);
	return cur;
}

/* One request/reply exchange through the VIP: the request is DNATed to a
 * unit (returned: 1 or 2), the unit's reply SNATed back to the client; both
 * compared byte for byte with frames built here. */
static int pk_exchange(uint8_t proto, uint16_t cport, uint16_t vport, uint16_t uport,
		       uint8_t flags, uint8_t rflags, int ck)
{
	uint8_t in[256], want[256];
	const char *q = proto == 6 ? "GET / HTTP/1.0\r\n\r\n" : "query?";
	uint32_t n = pk_frame(in, pk_port_mac[0], PK_CLIENT_MAC, PK_CLIENT, PK_VIP, 64, proto,
			      cport, vport, flags, q, ck);
	pk_inject(0, in, n);
	assert_int_equal(res.action, INNET_FORWARD);
	int u = res.out[0].port;
	assert_true(u == 1 || u == 2);
	pk_frame(want, pk_unit_mac[u], pk_port_mac[u], PK_CLIENT, pk_unit_ip[u], 63, proto, cport,
		 uport, flags, q, ck == CK_ZERO ? CK_ZERO : CK_FULL);
	pk_expect((uint16_t)u, want, n);
	/* The unit answers the client (its kernel routes via the switch port). */
	const char *a = proto == 6 ? "HTTP/1.0 200 OK\r\n\r\nhello" : "answer!";
	n = pk_frame(in, pk_port_mac[u], pk_unit_mac[u], pk_unit_ip[u], PK_CLIENT, 64, proto, uport,
		     cport, rflags, a, ck);
	pk_inject((uint16_t)u, in, n);
	pk_frame(want, PK_CLIENT_MAC, pk_port_mac[0], PK_VIP, PK_CLIENT, 63, proto, vport, cport,
		 rflags, a, ck == CK_ZERO ? CK_ZERO : CK_FULL);
	pk_expect(0, want, n);
	return u;
}

static void test_packet_mode(void **state)
{
	if (pk_oldns < 0)
		test_skip("needs root (a network namespace with veth interfaces)");
	make_packet_lb();
	/* The port MACs were read from the interfaces. */
	for (uint32_t p = 0; p < 3; p++) {
		uint64_t m = 0;
		innet_cp_reg_read(lbcp(), innet_cp_reg_find(lbcp(), "port_mac"), p, &m);
		assert_true(m == pk_port_mac[p]);
	}
	/* UDP flows: both units used, each flow stays. */
	int seen[3] = { 0 }, first[40];
	for (int i = 0; i < 40; i++) {
		first[i] = pk_exchange(17, (uint16_t)(40000 + i), 53, 5300, 0, 0, CK_FULL);
		seen[first[i]]++;
	}
	printf("# 40 UDP flows: unit 1/0 %d, unit 2/0 %d\n", seen[1], seen[2]);
	assert_true(seen[1] > 0 && seen[2] > 0);
	for (int i = 0; i < 40; i++)
		assert_int_equal(pk_exchange(17, (uint16_t)(40000 + i), 53, 5300, 0, 0, CK_FULL), first[i]);
	assert_int_equal(lb_stat(LB_ST_CSUM_COMPLETED), 0);
	/* Partial checksums (tx offload at the sender) come out complete. */
	pk_exchange(17, 40100, 53, 5300, 0, 0, CK_PARTIAL);
	assert_int_equal(lb_stat(LB_ST_CSUM_COMPLETED), 2);
	/* A UDP checksum of 0 (none) stays 0. */
	pk_exchange(17, 40101, 53, 5300, 0, 0, CK_ZERO);
	assert_int_equal(lb_stat(LB_ST_CSUM_COMPLETED), 2);
	/* TCP: SYN / SYN-ACK, data / ACK, FIN / FIN-ACK, with partial checksums too. */
	int u = pk_exchange(6, 50000, 8080, 8080, 0x02, 0x12, CK_FULL);
	assert_int_equal(pk_exchange(6, 50000, 8080, 8080, 0x18, 0x10, CK_PARTIAL), u);
	assert_int_equal(pk_exchange(6, 50000, 8080, 8080, 0x11, 0x11, CK_FULL), u);
	assert_int_equal(lb_stat(LB_ST_TCP_CLOSING), 1);
	assert_int_equal(lb_stat(LB_ST_CONN_NEW), 40 + 2 + 1);
	/* Drain the TCP connection's unit: it keeps the connection; a new one goes
	 * to the other unit. */
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "unit drain %d 0", u + 2);
	assert_int_equal(ctl(cmd, NULL), 0);
	assert_int_equal(pk_exchange(6, 50000, 8080, 8080, 0x10, 0x10, CK_FULL), u);
	for (int i = 0; i < 10; i++)
		assert_int_equal(pk_exchange(6, (uint16_t)(50001 + i), 8080, 8080, 0x02, 0x12, CK_FULL),
				 3 - u);

	/* Malformed and unwanted frames: dropped, by name. */
	uint8_t f[256];
	uint32_t n = pk_frame(f, pk_port_mac[0], PK_CLIENT_MAC, PK_CLIENT, PK_VIP, 1, 17, 40000, 53, 0,
			      "x", CK_FULL);
	pk_inject(0, f, n);
	assert_int_equal(res.action, INNET_DROP);
	assert_int_equal(res.drop_reason, LB_DR_TTL_EXPIRED);
	n = pk_frame(f, pk_port_mac[0], PK_CLIENT_MAC, PK_CLIENT, PK_VIP, 64, 17, 40000, 53, 0, "x",
		     CK_FULL);
	f[14 + 10] ^= 0x40; /* IPv4 header checksum */
	pk_inject(0, f, n);
	assert_int_equal(res.drop_reason, LB_DR_BAD_IP);
	n = pk_frame(f, pk_port_mac[0], PK_CLIENT_MAC, PK_CLIENT, PK_VIP, 64, 6, 40000, 8080, 0x02, "",
		     CK_FULL);
	pk_inject(0, f, n - 4); /* frame shorter than the IPv4 total length */
	assert_int_equal(res.drop_reason, LB_DR_BAD_IP);
	put16(f + 14 + 2, 20 + 10); /* a consistent IPv4 header around 10 bytes of TCP */
	put16(f + 14 + 10, 0);
	put16(f + 14 + 10, (uint16_t)~ck_fold(ck_sum(f + 14, 20, 0)));
	pk_inject(0, f, 14 + 20 + 10);
	assert_int_equal(res.drop_reason, LB_DR_BAD_L4);
	n = pk_frame(f, pk_port_mac[0], PK_CLIENT_MAC, PK_CLIENT, PK_VIP + 1, 64, 17, 40000, 53, 0,
		     "x", CK_FULL);
	pk_inject(0, f, n);
	assert_int_equal(res.drop_reason, LB_DR_NOT_VIP);
	/* A unit's "reply" to a client it never heard from. */
	n = pk_frame(f, pk_port_mac[1], pk_unit_mac[1], pk_unit_ip[1], PK_CLIENT + 7, 64, 17, 5300,
		     1234, 0, "x", CK_FULL);
	pk_inject(1, f, n);
	assert_int_equal(res.drop_reason, LB_DR_NO_CONNECTION);
	f[12] = 0x86; /* IPv6 ethertype */
	f[13] = 0xdd;
	pk_inject(1, f, n);
	assert_int_equal(res.drop_reason, LB_DR_NOT_IPV4);
	assert_int_equal(prog_drops(LB_DR_TTL_EXPIRED), 1);
	assert_int_equal(prog_drops(LB_DR_BAD_IP), 2);
	/* A report as a frame (UDP to the report port, any address). */
	struct innet_lb_report r = { .server = 1, .unit = 0, .kind = INNET_LB_KIND_CPU,
				     .state = INNET_LB_ST_AVAILABLE, .load = 9,
				     .rflags = INNET_LB_RF_HEARTBEAT, .seq = 77 };
	uint8_t rep[64];
	assert_int_equal(innet_lb_report_seal(&r, &key, rep, sizeof(rep)), 48);
	rep[48] = '\0';
	n = pk_frame(f, pk_port_mac[1], pk_unit_mac[1], pk_unit_ip[1], 0x0a620201u, 64, 17, 40000,
		     REP_PORT, 0, "", CK_FULL);
	/* append the 48 report bytes: rebuild with them as payload */
	memcpy(f + n, rep, 48);
	put16(f + 14 + 2, 20 + 8 + 48);
	put16(f + 14 + 10, 0);
	put16(f + 14 + 10, (uint16_t)~ck_fold(ck_sum(f + 14, 20, 0)));
	put16(f + 14 + 20 + 4, 8 + 48);
	put16(f + 14 + 20 + 6, 0);
	pk_inject(1, f, n + 48);
	assert_int_equal(res.action, INNET_TO_CPU);
	assert_int_equal(res.cpu_drop_reason, 0);
	assert_int_equal(lb_stat(LB_ST_REPORTS_OK), 1);
	pk_inject(1, f, n + 48);
	assert_int_equal(res.action, INNET_TO_CPU);
	assert_int_equal(reason_of(&res), LB_DR_REPORT_REPLAY);
	assert_all_in_xdp();
}

/* The pure helpers behind packet mode's checksum handling, on 2000 random
 * frames (no root needed): a complete checksum is never touched, a partial
 * one becomes exactly the full one, and a TTL decrement keeps the IPv4
 * header checksum valid. */
static void test_frame_csum_property(void **state)
{
	uint32_t rnd = 12345;
	for (int i = 0; i < 2000; i++) {
		char payload[200];
		rnd = rnd * 1103515245u + 12345u;
		uint32_t plen = (rnd >> 8) % sizeof(payload);
		for (uint32_t k = 0; k < plen; k++) {
			rnd = rnd * 1103515245u + 12345u;
			payload[k] = (char)(1 + (rnd >> 16) % 255); /* no NUL: strlen is the length */
		}
		payload[plen] = '\0';
		uint8_t proto = (i & 1) ? 6 : 17;
		uint32_t sip = rnd ^ 0x0a000000u, dip = rnd * 7u + (uint32_t)i;
		uint16_t sp = (uint16_t)(rnd >> 3), dp = (uint16_t)(i * 31 + 1);
		uint8_t full[300], part[300];
		uint32_t n = pk_frame(full, 1, 2, sip, dip, (uint8_t)(2 + i % 250), proto, sp, dp, 0x18,
				      payload, CK_FULL);
		pk_frame(part, 1, 2, sip, dip, (uint8_t)(2 + i % 250), proto, sp, dp, 0x18, payload,
			 CK_PARTIAL);
		struct lb_frame fr;
		uint8_t copy[300];
		memcpy(copy, full, n);
		assert_int_equal(lb_frame_parse(copy, n, &fr), 0);
		assert_false(lb_frame_complete_csum(copy, &fr));
		assert_memory_equal(copy, full, n);
		assert_int_equal(lb_frame_parse(part, n, &fr), 0);
		bool done = lb_frame_complete_csum(part, &fr);
		/* A partial field that happens to be the full checksum stays, too. */
		assert_true(done || memcmp(part, full, n) == 0);
		assert_memory_equal(part, full, n);
		lb_frame_dec_ttl(part, &fr);
		assert_true(pk_verifies(part));
		assert_int_equal(part[14 + 8], full[14 + 8] - 1);
	}
}

int main(void)
{
	test_target_require();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_pcc, teardown),
		cmocka_unit_test_teardown(test_policies, teardown),
		cmocka_unit_test_teardown(test_accel, teardown),
		cmocka_unit_test_teardown(test_accel_split, teardown),
		cmocka_unit_test_teardown(test_reports, teardown),
		cmocka_unit_test_teardown(test_full_nat, teardown),
		cmocka_unit_test_teardown(test_busy_lookup, teardown),
		cmocka_unit_test_teardown(test_full_table, teardown),
		cmocka_unit_test_teardown(test_aging, teardown),
		cmocka_unit_test(test_health_table),
		cmocka_unit_test_teardown(test_unreported, teardown),
		cmocka_unit_test_teardown(test_bad_settings, teardown),
		cmocka_unit_test(test_frame_csum_property),
		cmocka_unit_test_setup_teardown(test_packet_mode, pk_setup, pk_teardown),
	};
	return cmocka_run_group_tests(tests, setup_key, teardown_key);
}
