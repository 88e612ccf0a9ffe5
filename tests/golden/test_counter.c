/*
 * test_counter.c — golden packets for the counter program
 * (src/programs/counter.c): request in → reply out, byte for byte, through
 * the real pipeline with innet_switch_inject. The cases run in order on one
 * switch, so INC and READ see the effects of the cases before them.
 *
 * Switch: two ports (127.206.P.1 and .2, P from the process id), one
 * counter instance with 16 counters on UDP 46000. Clients are 127.206.P.x;
 * the tables give the last byte.
 *
 * Request/reply layout (wire.h): innet header (8 bytes) then
 *   op | status | reserved(2) | index (4, BE) | value (8, BE)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/switch.h"
#include "innet/wire.h"

#define TEST_NET 206u
#define UDP_CNT  46000u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

struct golden {
	const char *desc;
	uint16_t in_port;
	uint8_t src_host;
	uint16_t src_udp;
	uint8_t in[40];
	uint32_t len;
	enum innet_action action;
	const char *drop;          /* reason name when dropped */
	uint8_t out[24];           /* the reply, when reflected */
};

/* innet header: magic, version, service, flags, dst_node (BE), src_node (BE) */
#define HDR(magic, ver, svc, flags) magic, ver, svc, flags, 0x00, 0x01, 0x00, 0x64
#define REQ_HDR  HDR(0x1E, 0x01, 0x01, 0x00)
/* reply header: src and dst nodes swapped */
#define REP_HDR  0x1E, 0x01, 0x01, 0x00, 0x00, 0x64, 0x00, 0x01
#define IDX(i)   0x00, 0x00, 0x00, i
#define U64(b7, b6, b5, b4, b3, b2, b1, b0) b7, b6, b5, b4, b3, b2, b1, b0
#define V(x)     U64(0, 0, 0, 0, 0, 0, 0, x)

static const struct golden cases[] = {
	{ "INC counter 5 by 3: the reply carries the new value",
	  0, 201, 7001, { REQ_HDR, 0x01, 0x00, 0x00, 0x00, IDX(5), V(3) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x81, 0x00, 0x00, 0x00, IDX(5), V(3) } },
	{ "INC counter 5 by 4 from another client",
	  1, 202, 7002, { REQ_HDR, 0x01, 0x00, 0x00, 0x00, IDX(5), V(4) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x81, 0x00, 0x00, 0x00, IDX(5), V(7) } },
	{ "READ counter 5: whatever the request's value field held",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, IDX(5), U64(0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x00, 0x00, 0x00, IDX(5), V(7) } },
	{ "READ counter 6, never touched",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, IDX(6), V(0) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x00, 0x00, 0x00, IDX(6), V(0) } },
	{ "INC counter 15 (the last) by a 64-bit delta",
	  0, 201, 7001, { REQ_HDR, 0x01, 0x00, 0x00, 0x00, IDX(15), U64(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x81, 0x00, 0x00, 0x00, IDX(15), U64(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe) } },
	{ "INC counter 15 by 3: wraps around 2^64",
	  0, 201, 7001, { REQ_HDR, 0x01, 0x00, 0x00, 0x00, IDX(15), V(3) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x81, 0x00, 0x00, 0x00, IDX(15), V(1) } },
	{ "INC counter 16, one past the end: bad_index, value echoed, nothing counted",
	  0, 201, 7001, { REQ_HDR, 0x01, 0x00, 0x00, 0x00, IDX(16), V(9) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x81, 0x01, 0x00, 0x00, IDX(16), V(9) } },
	{ "READ counter 0xffffffff: bad_index",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, V(0) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x01, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, V(0) } },
	{ "index in network byte order: 0x05000000 is out of range, not counter 5",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, V(0) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, V(0) } },
	{ "op 3: bad_op",
	  0, 201, 7001, { REQ_HDR, 0x03, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x83, 0x02, 0x00, 0x00, IDX(5), V(1) } },
	{ "op 0: bad_op",
	  0, 201, 7001, { REQ_HDR, 0x00, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x80, 0x02, 0x00, 0x00, IDX(5), V(1) } },
	{ "status, reserved and flags in a request: status overwritten, the rest echoed",
	  0, 201, 7001, { HDR(0x1E, 0x01, 0x01, 0x5A), 0x02, 0x33, 0xAB, 0xCD, IDX(5), V(0) }, 24,
	  INNET_REFLECT, NULL, { 0x1E, 0x01, 0x01, 0x5A, 0x00, 0x64, 0x00, 0x01, 0x82, 0x00, 0xAB, 0xCD, IDX(5), V(7) } },
	{ "trailing bytes are trimmed from the reply",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, IDX(5), V(0), 't', 'r', 'a', 'i', 'l', 'e', 'r', 0, 1, 2 }, 34,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x00, 0x00, 0x00, IDX(5), V(7) } },
	{ "23 bytes: too_short",
	  0, 201, 7001, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, IDX(5), 0, 0, 0, 0, 0, 0, 0 }, 23,
	  INNET_DROP, "too_short", { 0 } },
	{ "empty: too_short",
	  0, 201, 7001, { 0 }, 0,
	  INNET_DROP, "too_short", { 0 } },
	{ "wrong magic",
	  0, 201, 7001, { HDR(0x1F, 0x01, 0x01, 0x00), 0x01, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_DROP, "bad_magic", { 0 } },
	{ "version 2",
	  0, 201, 7001, { HDR(0x1E, 0x02, 0x01, 0x00), 0x01, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_DROP, "bad_version", { 0 } },
	{ "another service (paxos)",
	  0, 201, 7001, { HDR(0x1E, 0x01, 0x02, 0x00), 0x01, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_DROP, "wrong_service", { 0 } },
	{ "a reply (op 0x81) is never answered",
	  0, 201, 7001, { REQ_HDR, 0x81, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_DROP, "is_reply", { 0 } },
	{ "a reply to a bad op (0x83) either",
	  0, 201, 7001, { REQ_HDR, 0x83, 0x00, 0x00, 0x00, IDX(5), V(1) }, 24,
	  INNET_DROP, "is_reply", { 0 } },
	{ "READ counter 5 again: the drops above changed nothing",
	  1, 203, 7003, { REQ_HDR, 0x02, 0x00, 0x00, 0x00, IDX(5), V(0) }, 24,
	  INNET_REFLECT, NULL, { REP_HDR, 0x82, 0x00, 0x00, 0x00, IDX(5), V(7) } },
};

static void test_golden_packets(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-counter");
	c.n_workers = 1;
	c.n_ports = 2;
	c.ports[0].ip = test_ip(1);
	c.ports[0].peer_ip = test_ip(101);
	c.ports[1].ip = test_ip(2);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "cnt");
	c.progs[0].program = innet_program_find("counter");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_CNT;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = "{\"size\": 16}";
	char err[256];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	struct innet_cp *cp = innet_switch_prog(sw, "cnt");
	static struct innet_inject_result res;

	size_t n = sizeof(cases) / sizeof(cases[0]), replies = 0, drops = 0;
	for (size_t i = 0; i < n; i++) {
		const struct golden *g = &cases[i];
		struct innet_addr src = { .ip = test_ip(g->src_host), .udp = g->src_udp };
		memset(&res, 0xAB, sizeof(res));
		assert_int_equal(innet_switch_inject(sw, g->in_port, UDP_CNT, &src, g->in, g->len, &res), 0);
		if (res.action != g->action)
			fail_msg("%s: want %s, got %s (%s)", g->desc, innet_action_name(g->action),
				 innet_action_name(res.action),
				 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
		if (g->action == INNET_DROP) {
			drops++;
			const char *name = innet_cp_drop_reason_name(cp, res.drop_reason);
			if (strcmp(name, g->drop) != 0)
				fail_msg("%s: want drop %s, got %s", g->desc, g->drop, name);
			assert_int_equal(res.n_out, 0);
			continue;
		}
		replies++;
		assert_int_equal(res.n_out, 1);
		const struct innet_inject_out *o = &res.out[0];
		/* back to the sender, by the port it came in on, from the counter's port */
		assert_int_equal(o->port, g->in_port);
		assert_int_equal(o->dst.ip, test_ip(g->src_host));
		assert_int_equal(o->dst.udp, g->src_udp);
		assert_int_equal(o->src_udp, UDP_CNT);
		if (o->len != 24 || memcmp(o->data, g->out, 24) != 0) {
			char got[3 * 40 + 1] = "", want[3 * 24 + 1] = "";
			for (uint32_t k = 0; k < o->len && k < 40; k++)
				snprintf(got + 3 * k, 4, "%02x ", o->data[k]);
			for (uint32_t k = 0; k < 24; k++)
				snprintf(want + 3 * k, 4, "%02x ", g->out[k]);
			fail_msg("%s:\n  want %s\n  got  %s(%u bytes)", g->desc, want, got, o->len);
		}
	}

	/* The registers hold what the replies said. */
	uint64_t v;
	assert_int_equal(innet_cp_reg_read(cp, 0, 5, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(innet_cp_reg_read(cp, 0, 15, &v), 0);
	assert_int_equal(v, 1);
	for (uint32_t i = 0; i < 16; i++) {
		assert_int_equal(innet_cp_reg_read(cp, 0, i, &v), 0);
		if (i != 5 && i != 15)
			assert_int_equal(v, 0);
	}
	assert_int_equal(innet_cp_reg_read(cp, 0, 16, &v), -ERANGE); /* size 16 */

	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	assert_int_equal(st.rx_pkts, n);
	assert_int_equal(st.actions[INNET_REFLECT], replies);
	assert_int_equal(st.actions[INNET_DROP], drops);
	assert_int_equal(st.tx_pkts, replies);
	assert_int_equal(st.max_reg_ops, 1); /* one register operation per packet */
	test_assert_xdp_ran(cp);
	innet_switch_destroy(sw);
}

/* The counter's one setting. */
static void test_settings(void **state)
{
	static const struct {
		const char *args;
		const char *msg; /* NULL: accepted */
	} cases_s[] = {
		{ NULL, NULL },
		{ "{\"size\": 1}", NULL },
		{ "{\"size\": 65536}", NULL },
		{ "{\"size\": 0}", "setting 'size' = 0 is out of range [1, 16777216]" },
		{ "{\"size\": 16777217}", "out of range" },
		{ "{\"size\": \"big\"}", "setting 'size' must be a non-negative integer" },
		{ "{\"sise\": 4}", "unknown setting 'sise'" },
	};
	for (size_t i = 0; i < sizeof(cases_s) / sizeof(cases_s[0]); i++) {
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 1;
		c.ports[0].ip = test_ip(30);
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "cnt");
		c.progs[0].program = innet_program_find("counter");
		c.progs[0].udp[0] = UDP_CNT + 1;
		c.progs[0].n_udp = 1;
		c.progs[0].args_json = (char *)cases_s[i].args;
		char err[256] = "";
		test_target(&c);
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (cases_s[i].msg == NULL) {
			if (sw == NULL)
				fail_msg("%s: %s", cases_s[i].args ? cases_s[i].args : "(none)", err);
			const struct innet_reg *r = innet_cp_reg(innet_switch_prog(sw, "cnt"), 0);
			uint32_t want = cases_s[i].args == NULL ? 1024 : (i == 1 ? 1 : 65536);
			assert_int_equal(r->count, want);
			assert_int_equal(r->width, 8);
			innet_switch_destroy(sw);
		} else {
			if (sw != NULL) {
				innet_switch_destroy(sw);
				fail_msg("%s: accepted", cases_s[i].args);
			}
			if (strstr(err, cases_s[i].msg) == NULL)
				fail_msg("%s: want \"%s\", got \"%s\"", cases_s[i].args, cases_s[i].msg, err);
		}
	}
}

int main(void)
{
	test_target_require();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_packets),
		cmocka_unit_test(test_settings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
