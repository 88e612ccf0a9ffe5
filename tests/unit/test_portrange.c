/*
 * test_portrange.c — UDP port ranges per program instance: the range syntax
 * and its checks (innet_udp_range_parse, innet_prog_conf_add_udp), ranges in
 * topology files (with the key path of every error), the switch's limits
 * (per program, per switch, RLIMIT_NOFILE), innet_decl_udp, and sending from
 * any port of a range (out.src_udp) — injected, and over real loopback
 * sockets with two workers.
 *
 *   client 127.63.0.10:any ──► port 0 = 127.63.0.1 ┐ switch: program "pool" on
 *          ◄── from 127.63.0.1:SRC (SRC from the payload)  UDP 5353, 20000-20255
 *                                                  ┘ (257 UDP ports)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/switch.h"
#include "innet/topology.h"

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((b) << 16) | ((c) << 8) | (d))
#define SW_IP     IP(127, 63, 0, 1)
#define CLIENT_IP IP(127, 63, 0, 10)

/* ---- the test program ---------------------------------------------------- */

/* What setup saw through innet_decl_udp. */
static uint32_t seen_n_udp;
static uint16_t seen_first, seen_second, seen_last;

static int pool_setup(struct innet_decl *d, struct innet_args *a)
{
	uint32_t n;
	const uint16_t *u = innet_decl_udp(d, &n);
	seen_n_udp = n;
	seen_first = n > 0 ? u[0] : 0;
	seen_second = n > 1 ? u[1] : 0;
	seen_last = n > 0 ? u[n - 1] : 0;
	return 0;
}

/* Reflect to the sender, from the local UDP port named by the first two
 * payload bytes (big endian; 0 = the port it arrived on). */
static enum innet_action pool_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	if (pkt->len < 2)
		return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
	pkt->out.src_udp = (uint16_t)(pkt->data[0] << 8 | pkt->data[1]);
	return innet_reflect(pkt);
}

static const struct innet_program prog_pool = {
	.name = "pool", .model = INNET_MODEL_PISA, .setup = pool_setup, .handle = pool_handle,
};

/* ---- helpers ----------------------------------------------------------- */

static struct innet_switch *cur_sw;
static int cur_fd = -1;

static int teardown(void **state)
{
	innet_switch_destroy(cur_sw);
	cur_sw = NULL;
	if (cur_fd >= 0)
		close(cur_fd);
	cur_fd = -1;
	return 0;
}

/* One port, one program "pool" on 5353 and 20000-20255. */
static void pool_conf(struct innet_switch_conf *c, uint32_t workers)
{
	char err[128];
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "portrange");
	c->n_workers = workers;
	c->n_ports = 1;
	c->ports[0].ip = SW_IP;
	c->n_progs = 1;
	snprintf(c->progs[0].name, sizeof(c->progs[0].name), "pool");
	c->progs[0].program = &prog_pool;
	assert_int_equal(innet_prog_conf_add_udp(&c->progs[0], 5353, 5353, err, sizeof(err)), 0);
	assert_int_equal(innet_prog_conf_add_udp(&c->progs[0], 20000, 20255, err, sizeof(err)), 0);
}

static struct innet_switch *create(const struct innet_switch_conf *c)
{
	char err[512];
	struct innet_switch *sw = innet_switch_create(c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("innet_switch_create: %s", err);
	cur_sw = sw;
	return sw;
}

static void expect_create_error(const struct innet_switch_conf *c, const char *msg)
{
	char err[512];
	struct innet_switch *sw = innet_switch_create(c, err, sizeof(err));
	if (sw != NULL) {
		innet_switch_destroy(sw);
		fail_msg("created a switch; expected '%s'", msg);
	}
	if (strstr(err, msg) == NULL)
		fail_msg("error '%s' does not contain '%s'", err, msg);
}

/* ---- syntax ------------------------------------------------------------ */

static void test_range_parse(void **state)
{
	static const struct {
		const char *s;
		int rc;
		uint32_t lo, hi;
	} cases[] = {
		{ "5353", 0, 5353, 5353 },   { "20000-20255", 0, 20000, 20255 },
		{ "1-65535", 0, 1, 65535 },  { "7-7", 0, 7, 7 },
		{ "", -EINVAL, 0, 0 },       { "-5", -EINVAL, 0, 0 },
		{ "5-", -EINVAL, 0, 0 },     { "a-b", -EINVAL, 0, 0 },
		{ "65536", -EINVAL, 0, 0 },  { "1-65536", -EINVAL, 0, 0 },
		{ "1 - 2", -EINVAL, 0, 0 },  { "1-2-3", -EINVAL, 0, 0 },
		{ "0x10", -EINVAL, 0, 0 },   { "99999999999999999999", -EINVAL, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t lo = 0, hi = 0;
		int rc = innet_udp_range_parse(cases[i].s, &lo, &hi);
		if (rc != cases[i].rc)
			fail_msg("'%s': rc %d, want %d", cases[i].s, rc, cases[i].rc);
		if (rc == 0 && (lo != cases[i].lo || hi != cases[i].hi))
			fail_msg("'%s': %u-%u, want %u-%u", cases[i].s, lo, hi, cases[i].lo, cases[i].hi);
	}
}

static void test_add_udp_checks(void **state)
{
	static struct innet_prog_conf pc;
	char err[160];
	memset(&pc, 0, sizeof(pc));
	assert_int_equal(innet_prog_conf_add_udp(&pc, 5353, 5353, err, sizeof(err)), 0);
	assert_int_equal(innet_prog_conf_add_udp(&pc, 20000, 20255, err, sizeof(err)), 0);
	assert_int_equal(pc.n_udp, 257);
	assert_int_equal(pc.udp[0], 5353);
	assert_int_equal(pc.udp[1], 20000);
	assert_int_equal(pc.udp[256], 20255);

	static const struct {
		uint32_t lo, hi;
		const char *msg;
	} bad[] = {
		{ 5353, 5353, "UDP port 5353 is listed twice" },
		{ 19990, 20000, "UDP port range 19990-20000 overlaps port 20000 listed before" },
		{ 20100, 20100, "UDP port 20100 is listed twice" },
		{ 30, 20, "UDP port range 30-20 is empty (first > last)" },
		{ 0, 5, "UDP port 0 is out of 1..65535" },
		{ 65535, 65536, "UDP port 65536 is out of 1..65535" },
		{ 30000, 33839, "more than 4096 UDP ports for one program" }, /* 257 + 3840 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(innet_prog_conf_add_udp(&pc, bad[i].lo, bad[i].hi, err, sizeof(err)),
				 -EINVAL);
		assert_string_equal(err, bad[i].msg);
		assert_int_equal(pc.n_udp, 257); /* nothing added */
	}
	/* exactly the limit */
	assert_int_equal(innet_prog_conf_add_udp(&pc, 30000, 33838, err, sizeof(err)), 0);
	assert_int_equal(pc.n_udp, INNET_MAX_PROG_UDP);
	assert_int_equal(innet_prog_conf_add_udp(&pc, 40000, 40000, err, sizeof(err)), -EINVAL);
}

/* ---- topology files ------------------------------------------------------ */

#define TOPO_FMT \
	"{\"name\": \"pr\", \"addr_base\": \"127.63.1.0\"," \
	" \"switches\": [{\"name\": \"s0\", \"node\": 1, \"programs\": [%s]}]," \
	" \"hosts\": [{\"name\": \"h0\", \"node\": 2, \"addr\": \"127.63.2.1\"}]," \
	" \"links\": [{\"a\": \"h0\", \"b\": \"s0\"}]}"

static struct innet_topology *topo_parse(const char *progs, char *err, size_t errlen)
{
	char text[2048];
	snprintf(text, sizeof(text), TOPO_FMT, progs);
	return innet_topology_parse(text, "t.json", err, errlen);
}

static void test_topology_ranges(void **state)
{
	char err[2048];
	struct innet_topology *t = topo_parse(
		"{\"program\": \"forward\", \"name\": \"lb\", \"udp\": [5353, \"20000-20255\"]},"
		"{\"program\": \"counter\", \"udp\": [\"9000-9000\", 9100]}", err, sizeof(err));
	if (t == NULL)
		fail_msg("parse: %s", err);
	const struct innet_switch_conf *c = t->nodes[0].conf;
	assert_int_equal(c->progs[0].n_udp, 257);
	assert_int_equal(c->progs[0].udp[0], 5353);
	assert_int_equal(c->progs[0].udp[1], 20000);
	assert_int_equal(c->progs[0].udp[256], 20255);
	assert_int_equal(c->progs[1].n_udp, 2);
	assert_int_equal(c->progs[1].udp[0], 9000);
	assert_int_equal(c->progs[1].udp[1], 9100);
	assert_false(c->progs[0].raw);
	innet_topology_free(t);

	static const struct {
		const char *progs;
		const char *msg;
	} bad[] = {
		{ "{\"program\": \"forward\", \"udp\": [\"20255-20000\"]}",
		  "t.json: $.switches[0].programs[0].udp[0]: UDP port range 20255-20000 is empty "
		  "(first > last)" },
		{ "{\"program\": \"forward\", \"udp\": [20005, \"20000-20010\"]}",
		  "t.json: $.switches[0].programs[0].udp[1]: UDP port range 20000-20010 overlaps port "
		  "20005 listed before" },
		{ "{\"program\": \"forward\", \"udp\": [\"20000-20010\", 20010]}",
		  "t.json: $.switches[0].programs[0].udp[1]: UDP port 20010 is listed twice" },
		{ "{\"program\": \"forward\", \"udp\": [\"20000-20010\", \"20005-20020\"]}",
		  "t.json: $.switches[0].programs[0].udp[1]: UDP port range 20005-20020 overlaps port "
		  "20005 listed before" },
		{ "{\"program\": \"forward\", \"udp\": [\"1-5000\"]}",
		  "t.json: $.switches[0].programs[0].udp[0]: more than 4096 UDP ports for one program" },
		{ "{\"program\": \"forward\", \"udp\": [\"abc\"]}",
		  "t.json: $.switches[0].programs[0].udp[0]: expected a UDP port (1-65535) or a range "
		  "\"A-B\"" },
		{ "{\"program\": \"forward\", \"udp\": [\"0-10\"]}",
		  "t.json: $.switches[0].programs[0].udp[0]: expected a UDP port (1-65535) or a range "
		  "\"A-B\"" },
		{ "{\"program\": \"forward\", \"udp\": [70000]}",
		  "t.json: $.switches[0].programs[0].udp[0]: expected a UDP port (1-65535) or a range "
		  "\"A-B\"" },
		{ "{\"program\": \"forward\", \"udp\": []}",
		  "t.json: $.switches[0].programs[0].udp: expected an array of 1 to 4096 UDP ports or "
		  "\"A-B\" ranges, got a longer or empty array" },
		{ "{\"program\": \"forward\", \"udp\": [\"20000-20255\"]},"
		  "{\"program\": \"counter\", \"udp\": [9000, \"20255-20300\"]}",
		  "t.json: $.switches[0].programs[1].udp: UDP port 20255 is already bound by program "
		  "'forward'" },
		{ "{\"program\": \"forward\", \"udp\": [\"1000-4999\"]},"
		  "{\"program\": \"counter\", \"udp\": [\"5000-8999\"]},"
		  "{\"program\": \"forward\", \"name\": \"f2\", \"udp\": [\"9000-9999\"]}",
		  "t.json: $.switches[0].programs[2].udp: the switch's programs bind 9000 UDP ports, "
		  "more than 8192 in all" },
		{ "{\"program\": \"forward\", \"udp\": [9000], \"raw\": 1}",
		  "t.json: $.switches[0].programs[0].raw: expected a boolean, got an integer" },
		{ "{\"program\": \"forward\", \"udp\": [9000], \"raw\": true},"
		  "{\"program\": \"counter\", \"raw\": true}",
		  "t.json: $.switches[0].programs[1].raw: program 'forward' is raw already: at most one "
		  "raw program per switch" },
		{ "{\"program\": \"forward\"}",
		  "t.json: $.switches[0].programs[0]: missing required key 'udp'" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		t = topo_parse(bad[i].progs, err, sizeof(err));
		if (t != NULL) {
			innet_topology_free(t);
			fail_msg("case %zu parsed; expected '%s'", i, bad[i].msg);
		}
		if (strstr(err, bad[i].msg) == NULL)
			fail_msg("case %zu: '%s' does not contain '%s'", i, err, bad[i].msg);
	}
	/* a raw program may bind no UDP port */
	t = topo_parse("{\"program\": \"forward\", \"raw\": true}", err, sizeof(err));
	if (t == NULL)
		fail_msg("raw without udp: %s", err);
	assert_true(t->nodes[0].conf->progs[0].raw);
	assert_int_equal(t->nodes[0].conf->progs[0].n_udp, 0);
	innet_topology_free(t);
}

/* Raw ports in a topology: a switch end of a link with "a_iface"/"b_iface". */
static void test_topology_raw_ports(void **state)
{
	char err[2048];
	static const char *ok_text =
		"{\"name\": \"raw\", \"addr_base\": \"127.63.3.0\","
		" \"switches\": [{\"name\": \"s0\", \"node\": 1, \"programs\": ["
		"  {\"program\": \"l2fwd\", \"raw\": true, \"args\": {\"map\": [1, 0]}},"
		"  {\"program\": \"forward\", \"udp\": [9000, \"20000-20003\"]}]}],"
		" \"hosts\": [{\"name\": \"h0\", \"node\": 2, \"addr\": \"127.63.4.1\"},"
		"  {\"name\": \"h1\", \"node\": 3, \"addr\": \"127.63.4.2\"},"
		"  {\"name\": \"h2\", \"node\": 4, \"addr\": \"127.63.4.3\"}],"
		" \"links\": [{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": \"ie-swa\"},"
		"  {\"a\": \"s0\", \"b\": \"h1\", \"a_iface\": \"ie-swb\"},"
		"  {\"a\": \"h2\", \"b\": \"s0\"}]}";
	struct innet_topology *t = innet_topology_parse(ok_text, "r.json", err, sizeof(err));
	if (t == NULL)
		fail_msg("parse: %s", err);
	const struct innet_switch_conf *c = t->nodes[0].conf;
	assert_int_equal(c->n_ports, 3);
	assert_string_equal(c->ports[0].iface, "ie-swa");
	assert_int_equal(c->ports[0].ip, 0);
	assert_int_equal(c->ports[0].peer_ip, 0);
	assert_string_equal(c->ports[1].iface, "ie-swb");
	assert_int_equal(c->ports[1].ip, 0);
	assert_string_equal(c->ports[2].iface, "");
	assert_int_equal(c->ports[2].ip, IP(127, 63, 3, 1)); /* the first automatic address */
	assert_int_equal(c->ports[2].peer_ip, IP(127, 63, 4, 3));
	assert_true(c->progs[0].raw);
	assert_int_equal(c->progs[0].n_udp, 0);
	assert_int_equal(c->progs[1].n_udp, 5);
	innet_topology_free(t);

	static const struct {
		const char *link, *msg;
	} bad[] = {
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"a_iface\": \"ie-x\"}",
		  "r.json: $.links[0].a_iface: 'h0' is a host: only a switch end can be a raw port" },
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": \"ie-x\", \"b_addr\": \"127.63.5.1\"}",
		  "r.json: $.links[0].b_iface: a raw port has no address: drop the b_addr of this end" },
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": \"a-much-too-long-name\"}",
		  "r.json: $.links[0].b_iface: 'a-much-too-long-name' is not an interface name" },
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": \"ie-x\", \"loss\": 0.5}",
		  "r.json: $.links[0].b_iface: link emulation is not supported on a raw port" },
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": \"ie-x\"},"
		  "{\"a\": \"s0\", \"b\": \"h0\", \"a_iface\": \"ie-x\"}",
		  "r.json: $.links[1].a_iface: switch 's0' already has a raw port on 'ie-x' (port 0)" },
		{ "{\"a\": \"h0\", \"b\": \"s0\", \"b_iface\": 7}",
		  "r.json: $.links[0].b_iface: expected a string" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[1024];
		snprintf(text, sizeof(text),
			 "{\"name\": \"raw\", \"switches\": [{\"name\": \"s0\", \"node\": 1,"
			 " \"programs\": [{\"program\": \"forward\", \"udp\": [9000]}]}],"
			 " \"hosts\": [{\"name\": \"h0\", \"node\": 2, \"addr\": \"127.63.4.1\"}],"
			 " \"links\": [%s]}", bad[i].link);
		err[0] = '\0';
		t = innet_topology_parse(text, "r.json", err, sizeof(err));
		if (t != NULL) {
			innet_topology_free(t);
			fail_msg("case %zu parsed; expected '%s'", i, bad[i].msg);
		}
		if (strstr(err, bad[i].msg) == NULL)
			fail_msg("case %zu: '%s' does not contain '%s'", i, err, bad[i].msg);
	}
}

/* ---- the switch's checks ----------------------------------------------------- */

static void test_switch_limits(void **state)
{
	static struct innet_switch_conf c;
	char err[160];

	pool_conf(&c, 1);
	c.progs[0].n_udp = INNET_MAX_PROG_UDP + 1;
	expect_create_error(&c, "program 'pool' must bind 1..4096 UDP ports (got 4097)");

	pool_conf(&c, 1);
	c.progs[0].n_udp = 0;
	expect_create_error(&c, "program 'pool' must bind 1..4096 UDP ports (got 0)");

	/* more than INNET_MAX_SWITCH_UDP over three programs */
	pool_conf(&c, 1);
	c.n_progs = 3;
	for (uint32_t p = 0; p < 3; p++) {
		memset(&c.progs[p], 0, sizeof(c.progs[p]));
		snprintf(c.progs[p].name, sizeof(c.progs[p].name), "p%u", p);
		c.progs[p].program = &prog_pool;
		assert_int_equal(innet_prog_conf_add_udp(&c.progs[p], 30000 + p * 4096,
							 30000 + p * 4096 + 3999, err, sizeof(err)), 0);
	}
	expect_create_error(&c, "programs bind more than 8192 UDP ports in all (at 'p2')");

	/* a program that binds a port twice (a conf not built by add_udp) */
	pool_conf(&c, 1);
	c.progs[0].udp[5] = 5353;
	expect_create_error(&c, "program 'pool' lists UDP port 5353 twice");

	/* raw programs and raw ports go together */
	pool_conf(&c, 1);
	c.progs[0].raw = true;
	expect_create_error(&c, "a program is raw but the switch has no raw port (iface)");
	pool_conf(&c, 1);
	c.n_ports = 2;
	snprintf(c.ports[1].iface, sizeof(c.ports[1].iface), "lo");
	expect_create_error(&c, "the switch has raw ports but no raw program");
	c.ports[1].ip = IP(127, 63, 0, 2);
	c.progs[0].raw = true;
	expect_create_error(&c, "port 1 (): a raw port (iface lo) has no address and no peer");
}

/* RLIMIT_NOFILE too small for the sockets: a clear message with the numbers,
 * not EMFILE halfway. In a child: lowering the hard limit is for good. */
static void test_nofile_limit(void **state)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		struct rlimit rl = { .rlim_cur = 100, .rlim_max = 300 };
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			_exit(3);
		static struct innet_switch_conf c;
		pool_conf(&c, 2); /* 257 UDP ports x 1 port x 2 workers = 514 sockets */
		char err[512];
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL)
			_exit(4);
		int e = errno;
		if (write(pfd[1], err, strlen(err)) < 0)
			_exit(5);
		struct rlimit now;
		getrlimit(RLIMIT_NOFILE, &now);
		/* the soft limit was raised to the hard one */
		_exit(e == EMFILE && now.rlim_cur == 300 ? 0 : 6);
	}
	close(pfd[1]);
	char msg[512] = { 0 };
	ssize_t n = 0, r;
	while ((r = read(pfd[0], msg + n, sizeof(msg) - 1 - (size_t)n)) > 0)
		n += r;
	close(pfd[0]);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("child status %d, message '%s'", st, msg);
	if (strstr(msg, "514 sockets") == NULL || strstr(msg, "RLIMIT_NOFILE is 300") == NULL ||
	    strstr(msg, "needs about") == NULL)
		fail_msg("unclear message: '%s'", msg);
}

/* ---- packets --------------------------------------------------------------- */

static void inject_one(struct innet_switch *sw, uint16_t dst_udp, uint16_t src_udp,
		       struct innet_inject_result *res)
{
	uint8_t msg[4] = { (uint8_t)(src_udp >> 8), (uint8_t)src_udp, 'h', 'i' };
	struct innet_addr from = { CLIENT_IP, 40000 };
	assert_int_equal(innet_switch_inject(sw, 0, dst_udp, &from, msg, sizeof(msg), res), 0);
}

static void test_inject_range(void **state)
{
	static struct innet_switch_conf c;
	static struct innet_inject_result res;
	pool_conf(&c, 1);
	seen_n_udp = 0;
	struct innet_switch *sw = create(&c);
	/* innet_decl_udp: all the instance's ports, in order */
	assert_int_equal(seen_n_udp, 257);
	assert_int_equal(seen_first, 5353);
	assert_int_equal(seen_second, 20000);
	assert_int_equal(seen_last, 20255);

	static const struct {
		uint16_t dst_udp, src_udp, want_src;
	} cases[] = {
		{ 20100, 20001, 20001 },  /* in the range, from another port of it */
		{ 20100, 0, 20100 },      /* 0: the port it arrived on */
		{ 20255, 5353, 5353 },    /* last of the range, from the single port */
		{ 5353, 20255, 20255 },   /* the single port, from the end of the range */
		{ 20000, 20128, 20128 },
		{ 20050, 19999, 5353 },   /* not a port of the program: its first port */
		{ 20050, 9, 5353 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		inject_one(sw, cases[i].dst_udp, cases[i].src_udp, &res);
		assert_int_equal(res.action, INNET_REFLECT);
		assert_int_equal(res.n_out, 1);
		assert_int_equal(res.out[0].port, 0);
		assert_int_equal(res.out[0].dst.ip, CLIENT_IP);
		assert_int_equal(res.out[0].dst.udp, 40000);
		if (res.out[0].src_udp != cases[i].want_src)
			fail_msg("case %zu: sent from %u, want %u", i, res.out[0].src_udp,
				 cases[i].want_src);
	}
	/* a port outside the range has no program */
	uint8_t msg[2] = { 0, 0 };
	struct innet_addr from = { CLIENT_IP, 40000 };
	assert_int_equal(innet_switch_inject(sw, 0, 20256, &from, msg, 2, &res), -EINVAL);
	assert_int_equal(innet_switch_inject(sw, 0, 19999, &from, msg, 2, &res), -EINVAL);
}

static ssize_t recv_from(int fd, void *buf, size_t len, struct sockaddr_in *from, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	socklen_t fl = sizeof(*from);
	return recvfrom(fd, buf, len, 0, (struct sockaddr *)from, &fl);
}

/* Real sockets, two workers (each with its own socket per UDP port): every
 * reply leaves from the asked-for port of the range. */
static void test_loopback_range(void **state)
{
	static struct innet_switch_conf c;
	pool_conf(&c, 2);
	struct innet_switch *sw = create(&c);
	assert_int_equal(test_start(sw), 0);

	cur_fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(cur_fd >= 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(CLIENT_IP) };
	assert_int_equal(bind(cur_fd, (struct sockaddr *)&me, sizeof(me)), 0);

	static const struct {
		uint16_t dst_udp, src_udp;
	} cases[] = {
		{ 20200, 20042 }, { 20042, 20200 }, { 5353, 20255 }, { 20255, 5353 },
		{ 20000, 20000 }, { 20001, 20254 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t msg[4] = { (uint8_t)(cases[i].src_udp >> 8), (uint8_t)cases[i].src_udp, 'x',
				   (uint8_t)i };
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(cases[i].dst_udp),
					  .sin_addr.s_addr = htonl(SW_IP) };
		assert_int_equal(sendto(cur_fd, msg, sizeof(msg), 0, (struct sockaddr *)&to, sizeof(to)),
				 sizeof(msg));
		uint8_t buf[16];
		struct sockaddr_in from;
		ssize_t n = recv_from(cur_fd, buf, sizeof(buf), &from, 3000);
		if (n != (ssize_t)sizeof(msg))
			fail_msg("case %zu: no reply (%zd)", i, n);
		assert_memory_equal(buf, msg, sizeof(msg));
		assert_int_equal(ntohl(from.sin_addr.s_addr), SW_IP);
		if (ntohs(from.sin_port) != cases[i].src_udp)
			fail_msg("case %zu: reply from port %u, want %u", i, ntohs(from.sin_port),
				 cases[i].src_udp);
	}
	struct innet_prog_stats ps;
	assert_int_equal(innet_cp_stats(innet_switch_prog(sw, "pool"), &ps), 0);
	assert_int_equal(ps.rx_pkts, 6);
	assert_int_equal(ps.actions[INNET_REFLECT], 6);
	assert_int_equal(ps.tx_pkts, 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_range_parse),
		cmocka_unit_test(test_add_udp_checks),
		cmocka_unit_test(test_topology_ranges),
		cmocka_unit_test(test_topology_raw_ports),
		cmocka_unit_test_teardown(test_switch_limits, teardown),
		cmocka_unit_test(test_nofile_limit),
		cmocka_unit_test_teardown(test_inject_range, teardown),
		cmocka_unit_test_teardown(test_loopback_range, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
