/*
 * test_forward.c — golden packets for the forward program
 * (src/programs/forward.c): packet in (port, source, bytes) → verdict, drop
 * reason and packets out (port, destination, bytes), through the real
 * pipeline with innet_switch_inject.
 *
 * The switch under test has four ports and one forward instance:
 *
 *   port 0  127.205.P.1  peer .101            map: 0 → 1, 1 → 0, 2 → 3, 3 → (none)
 *   port 1  127.205.P.2  peer .102            routes: node 7  → [2]
 *   port 2  127.205.P.3  peer .103                    node 9  → [1, 2, 3] (ECMP)
 *   port 3  127.205.P.4  peer .104 udp 9999           node 11 → [0]
 *   port 4  127.205.P.5  no peer                      node 12 → [4]
 *
 * P is derived from the process id; UDP ports 45000 and 45001 (both bound
 * by the program). Addresses in the tables are the last byte of 127.205.P.x.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/switch.h"
#include "innet/wire.h"
#include "engine/switch_pvt.h"

#define TEST_NET 205u
#define UDP_A    45000u
#define UDP_B    45001u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

struct out_pkt {
	uint16_t port;
	uint8_t dst_host;     /* 127.205.P.dst_host */
	uint16_t dst_udp;
	uint16_t src_udp;
};

struct golden {
	const char *desc;
	uint16_t in_port;
	uint16_t dst_udp;
	uint8_t src_host;
	uint16_t src_udp;
	uint8_t in[32];
	uint32_t len;
	enum innet_action action;
	const char *drop;          /* reason name when action is INNET_DROP */
	uint32_t n_out;
	struct out_pkt out[1];     /* forward never changes the bytes */
};

/* innet base header: magic, version, service, flags, dst_node, src_node */
#define IH(ver, dst_hi, dst_lo) 0x1E, ver, 0x00, 0x00, dst_hi, dst_lo, 0x00, 0x2A

static const struct golden cases[] = {
	{ "map: raw bytes from port 0 leave by port 1 to its peer",
	  0, UDP_A, 201, 5000, { 'h', 'e', 'l', 'l', 'o' }, 5,
	  INNET_FORWARD, NULL, 1, { { 1, 102, UDP_A, UDP_A } } },
	{ "map: port 1 to port 0",
	  1, UDP_A, 202, 5001, { 0x00, 0xff, 0x10 }, 3,
	  INNET_FORWARD, NULL, 1, { { 0, 101, UDP_A, UDP_A } } },
	{ "map: port 2 to port 3, whose peer listens on UDP 9999",
	  2, UDP_A, 203, 5002, { 'x' }, 1,
	  INNET_FORWARD, NULL, 1, { { 3, 104, 9999, UDP_A } } },
	{ "map: port 3 has no entry",
	  3, UDP_A, 204, 5003, { 'y' }, 1,
	  INNET_DROP, "no_route", 0, { { 0 } } },
	{ "map: an empty payload is forwarded too",
	  0, UDP_A, 201, 5000, { 0 }, 0,
	  INNET_FORWARD, NULL, 1, { { 1, 102, UDP_A, UDP_A } } },
	{ "map: arriving on the second UDP port, sent from and to it",
	  0, UDP_B, 201, 5000, { 1, 2, 3, 4 }, 4,
	  INNET_FORWARD, NULL, 1, { { 1, 102, UDP_B, UDP_B } } },
	{ "map: innet header with dst_node 0 (no route asked)",
	  1, UDP_A, 202, 5000, { IH(1, 0, 0), 'p' }, 9,
	  INNET_FORWARD, NULL, 1, { { 0, 101, UDP_A, UDP_A } } },
	{ "the magic byte but shorter than a header: too_short, not raw data",
	  0, UDP_A, 201, 5000, { 0x1E, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00 }, 7,
	  INNET_DROP, "too_short", 0, { { 0 } } },
	{ "the magic byte alone",
	  0, UDP_A, 201, 5000, { 0x1E }, 1,
	  INNET_DROP, "too_short", 0, { { 0 } } },
	{ "map: not the innet magic, though shaped like a routed header",
	  0, UDP_A, 201, 5000, { 0x1F, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x2A }, 8,
	  INNET_FORWARD, NULL, 1, { { 1, 102, UDP_A, UDP_A } } },
	{ "route: node 7 by port 2",
	  0, UDP_A, 201, 5000, { IH(1, 0x00, 0x07), 0xde, 0xad }, 10,
	  INNET_FORWARD, NULL, 1, { { 2, 103, UDP_A, UDP_A } } },
	{ "route: node 7 from port 3, which has no map entry",
	  3, UDP_A, 204, 5000, { IH(1, 0x00, 0x07) }, 8,
	  INNET_FORWARD, NULL, 1, { { 2, 103, UDP_A, UDP_A } } },
	{ "route: node 11 back out of the port it came in by",
	  0, UDP_A, 201, 5000, { IH(1, 0x00, 0x0B) }, 8,
	  INNET_FORWARD, NULL, 1, { { 0, 101, UDP_A, UDP_A } } },
	{ "route: node 12 by port 4, which has no peer",
	  0, UDP_A, 201, 5000, { IH(1, 0x00, 0x0C) }, 8,
	  INNET_DROP, "no_peer", 0, { { 0 } } },
	{ "route: unknown node 8",
	  0, UDP_A, 201, 5000, { IH(1, 0x00, 0x08) }, 8,
	  INNET_DROP, "no_route", 0, { { 0 } } },
	{ "route: unknown node 65535 (byte order: 0x0700 is not node 7)",
	  0, UDP_A, 201, 5000, { IH(1, 0x07, 0x00) }, 8,
	  INNET_DROP, "no_route", 0, { { 0 } } },
	{ "route: version 2",
	  0, UDP_A, 201, 5000, { IH(2, 0x00, 0x07) }, 8,
	  INNET_DROP, "bad_version", 0, { { 0 } } },
	{ "route: version 0, even with dst_node 0",
	  0, UDP_A, 201, 5000, { IH(0, 0x00, 0x00) }, 8,
	  INNET_DROP, "bad_version", 0, { { 0 } } },
};

#define ROUTES "[{\"node\": 7, \"ports\": [2]}, {\"node\": 9, \"ports\": [1, 2, 3]}, " \
	       "{\"node\": 11, \"ports\": [0]}, {\"node\": 12, \"ports\": [4]}]"

static int fx_setup(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-forward");
	c.n_workers = 1;
	c.n_ports = 5;
	for (uint32_t i = 0; i < 5; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		c.ports[i].ip = test_ip(1 + i);
		c.ports[i].peer_ip = i < 4 ? test_ip(101 + i) : 0;
	}
	c.ports[3].peer_udp = 9999;
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_A;
	c.progs[0].udp[1] = UDP_B;
	c.progs[0].n_udp = 2;
	c.progs[0].args_json = "{\"map\": [1, 0, 3], \"routes\": " ROUTES "}";
	char err[256];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	*state = sw;
	return 0;
}

static int fx_teardown(void **state)
{
	innet_switch_destroy(*state);
	return 0;
}

static struct innet_inject_result res;

static void inject(struct innet_switch *sw, uint16_t port, uint16_t dst_udp, uint32_t src_ip,
		   uint16_t src_udp, const void *data, uint32_t len)
{
	struct innet_addr src = { .ip = src_ip, .udp = src_udp };
	memset(&res, 0xAB, sizeof(res));
	assert_int_equal(innet_switch_inject(sw, port, dst_udp, &src, data, len, &res), 0);
}

static void test_golden_packets(void **state)
{
	struct innet_switch *sw = *state;
	struct innet_cp *cp = innet_switch_prog(sw, "fwd");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct golden *g = &cases[i];
		inject(sw, g->in_port, g->dst_udp, test_ip(g->src_host), g->src_udp, g->in, g->len);
		if (res.action != g->action)
			fail_msg("%s: want %s, got %s (%s)", g->desc, innet_action_name(g->action),
				 innet_action_name(res.action),
				 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
		if (g->action == INNET_DROP) {
			const char *name = innet_cp_drop_reason_name(cp, res.drop_reason);
			if (strcmp(name, g->drop) != 0)
				fail_msg("%s: want drop %s, got %s", g->desc, g->drop, name);
		}
		if (res.n_out != g->n_out)
			fail_msg("%s: want %u packets out, got %u", g->desc, g->n_out, res.n_out);
		assert_int_equal(res.n_out_lost, 0);
		for (uint32_t k = 0; k < g->n_out; k++) {
			const struct out_pkt *o = &g->out[k];
			const struct innet_inject_out *r = &res.out[k];
			if (r->port != o->port || r->dst.ip != test_ip(o->dst_host) ||
			    r->dst.udp != o->dst_udp || r->src_udp != o->src_udp)
				fail_msg("%s: out %u: want port %u to .%u:%u from :%u, got port %u to "
					 "%08x:%u from :%u", g->desc, k, o->port, o->dst_host, o->dst_udp,
					 o->src_udp, r->port, r->dst.ip, r->dst.udp, r->src_udp);
			assert_int_equal(r->len, g->len);
			assert_memory_equal(r->data, g->in, g->len);
		}
	}
	/* Every case was counted once, and every drop by its reason. */
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	size_t n = sizeof(cases) / sizeof(cases[0]), drops = 0, fwd = 0;
	for (size_t i = 0; i < n; i++) {
		drops += cases[i].action == INNET_DROP;
		fwd += cases[i].action == INNET_FORWARD;
	}
	assert_int_equal(st.rx_pkts, n);
	assert_int_equal(st.actions[INNET_DROP], drops);
	assert_int_equal(st.actions[INNET_FORWARD], fwd);
	assert_int_equal(st.tx_pkts, fwd);
	/* PISA: at most one register read or table lookup per packet. */
	assert_int_equal(st.max_reg_ops, 1);
	assert_int_equal(st.max_table_ops, 1);
	test_assert_xdp_ran(cp);
}

static void test_ecmp(void **state)
{
	struct innet_switch *sw = *state;
	const uint8_t pkt[] = { IH(1, 0x00, 0x09), 'e', 'c', 'm', 'p' };
	uint32_t per_port[4] = { 0 };
	const uint32_t flows = 600;
	for (uint32_t f = 0; f < flows; f++) {
		uint32_t src_ip = test_ip(150 + f % 50);
		uint16_t src_udp = (uint16_t)(20000 + f);
		uint16_t first = UINT16_MAX;
		for (int rep = 0; rep < 3; rep++) { /* the same flow: the same port */
			inject(sw, (uint16_t)(f % 4), UDP_A, src_ip, src_udp, pkt, sizeof(pkt));
			assert_int_equal(res.action, INNET_FORWARD);
			assert_int_equal(res.n_out, 1);
			uint16_t p = res.out[0].port;
			assert_true(p >= 1 && p <= 3);
			if (first == UINT16_MAX)
				first = p;
			else if (p != first)
				fail_msg("flow %u went out of port %u, then %u", f, first, p);
			/* the ingress port is not part of the flow */
			static const uint16_t peer_udp[4] = { UDP_A, UDP_A, UDP_A, 9999 };
			assert_int_equal(res.out[0].dst.ip, test_ip(101 + p));
			assert_int_equal(res.out[0].dst.udp, peer_udp[p]);
			assert_memory_equal(res.out[0].data, pkt, sizeof(pkt));
		}
		/* The same flow entering by another port still takes the same path. */
		inject(sw, (uint16_t)((f + 1) % 4), UDP_A, src_ip, src_udp, pkt, sizeof(pkt));
		assert_int_equal(res.out[0].port, first);
		per_port[first]++;
	}
	/* Different flows spread: each of the 3 ports gets a fair share
	 * (expected 200 each; binomial sd ~11.5, so 120 is ~7 sd away). */
	for (uint32_t p = 1; p <= 3; p++)
		if (per_port[p] < 120)
			fail_msg("port %u got %u of %u flows", p, per_port[p], flows);
	assert_int_equal(per_port[0], 0);
}

/* Routes changed by the control plane apply to the next packet. */
static void test_route_updates(void **state)
{
	struct innet_switch *sw = *state;
	struct innet_cp *cp = innet_switch_prog(sw, "fwd");
	int t = innet_cp_table_find(cp, "routes");
	assert_true(t >= 0);
	struct route {
		uint16_t n;
		uint16_t ports[8];
	} __attribute__((packed)) r = { 0 };
	struct innet_table_info info;
	assert_int_equal(innet_cp_table_info(cp, (unsigned)t, &info), 0);
	assert_int_equal(info.key_size, 2);
	assert_int_equal(info.value_size, sizeof(r));
	assert_int_equal(info.entries, 4);

	const uint8_t to8[] = { IH(1, 0x00, 0x08) };
	uint16_t node = 8;
	r.n = 1;
	r.ports[0] = 3;
	assert_int_equal(innet_cp_table_add(cp, (unsigned)t, &node, &r), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].port, 3);
	assert_int_equal(res.out[0].dst.udp, 9999);

	/* A route with no ports, or too many, is refused per packet. */
	r.n = 0;
	assert_int_equal(innet_cp_table_add(cp, (unsigned)t, &node, &r), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "bad_route");
	r.n = 9;
	assert_int_equal(innet_cp_table_add(cp, (unsigned)t, &node, &r), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "bad_route");
	/* A route to a port the switch does not have. */
	r.n = 1;
	r.ports[0] = 17;
	assert_int_equal(innet_cp_table_add(cp, (unsigned)t, &node, &r), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "bad_port");

	/* A writer stopped inside the route's entry: the lookup is busy, and
	 * the packet is dropped as table_busy, not as no_route. */
	r.ports[0] = 2;
	assert_int_equal(innet_cp_table_add(cp, (unsigned)t, &node, &r), 0);
	assert_int_equal(innet_table_test_hold(cp->tables[t], &node, false, true), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "table_busy");
	assert_int_equal(innet_table_test_hold(cp->tables[t], &node, false, false), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].port, 2);

	assert_int_equal(innet_cp_table_del(cp, (unsigned)t, &node), 0);
	inject(sw, 0, UDP_A, test_ip(201), 5000, to8, sizeof(to8));
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "no_route");

	/* The map is a register: rewire port 3 to port 0. */
	int m = innet_cp_reg_find(cp, "port_map");
	assert_true(m >= 0);
	assert_int_equal(innet_cp_reg_write(cp, (unsigned)m, 3, 0 + 1), 0);
	inject(sw, 3, UDP_A, test_ip(204), 5000, "z", 1);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].port, 0);
}

/* Settings the program refuses, with the message the user sees. */
/* Garbage and strangers on a routing-only instance with "peer_only": a
 * payload without the magic is bad_magic (no port map to take it), a packet
 * from an address other than the port's peer is not_peer. */
static struct innet_inject_result gres;

static void test_garbage_and_strangers(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-forward-strict");
	c.n_workers = 1;
	c.n_ports = 3;
	for (uint32_t i = 0; i < 3; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		c.ports[i].ip = test_ip(41 + i);
		c.ports[i].peer_ip = test_ip(141 + i);
	}
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	c.progs[0].udp[0] = UDP_A;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = "{\"peer_only\": true, \"routes\": [{\"node\": 7, \"ports\": [2]}]}";
	c.n_progs = 1;
	char err[256];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	struct innet_cp *cp = innet_switch_prog(sw, "fwd");
	static const uint8_t routed[] = { IH(1, 0x00, 0x07), 'x' };
	static const uint8_t garbage[] = { 'G', 'E', 'T', ' ', '/' };
	struct innet_addr peer = { test_ip(141), 5000 }, stranger = { test_ip(99), 5000 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_A, &peer, routed, sizeof(routed), &gres), 0);
	assert_int_equal(gres.action, INNET_FORWARD);
	assert_int_equal(gres.out[0].port, 2);
	assert_int_equal(innet_switch_inject(sw, 0, UDP_A, &stranger, routed, sizeof(routed), &gres), 0);
	assert_int_equal(gres.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, gres.drop_reason), "not_peer");
	assert_int_equal(innet_switch_inject(sw, 0, UDP_A, &peer, garbage, sizeof(garbage), &gres), 0);
	assert_int_equal(gres.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, gres.drop_reason), "bad_magic");
	test_assert_xdp_ran(cp);
	innet_switch_destroy(sw);
}

static void test_bad_settings(void **state)
{
	/* Checks made in setup and in init (which knows the switch's ports)
	 * both come back in full. */
	static const struct {
		const char *args;
		const char *msg;
	} cases_bad[] = {
		{ "{\"map\": [1, 7]}", "program 'fwd': map entry 1 -> 7 names a port this switch does not have (2 ports)" },
		{ "{\"map\": [64]}", "map[0] = 64 is not a port number" },
		{ "{\"routes\": \"auto\"}", "is resolved by innet fabric" },
		{ "{\"routes\": {}}", "setting 'routes' must be an array" },
		{ "{\"routes\": [{\"node\": 0, \"ports\": [0]}]}", "routes[0] must be" },
		{ "{\"routes\": [{\"node\": 3, \"ports\": []}]}", "routes[0] must be" },
		{ "{\"routes\": [{\"node\": 3, \"ports\": [0], \"x\": 1}]}", "routes[0] must be" },
		{ "{\"routes\": [{\"node\": 3, \"ports\": [-1]}]}", "routes[0].ports[0] is not a port number" },
		{ "{\"routes\": [{\"node\": 3, \"ports\": [5]}]}", "program 'fwd': route to node 3 uses port 5; the switch has 2 ports" },
		{ "{\"mapp\": [0]}", "unknown setting 'mapp'" },
	};
	for (size_t i = 0; i < sizeof(cases_bad) / sizeof(cases_bad[0]); i++) {
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 2;
		c.ports[0].ip = test_ip(31);
		c.ports[1].ip = test_ip(32);
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
		c.progs[0].program = innet_program_find("forward");
		c.progs[0].udp[0] = UDP_A + 10;
		c.progs[0].n_udp = 1;
		c.progs[0].args_json = (char *)cases_bad[i].args;
		char err[512] = "";
		test_target(&c);
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL) {
			innet_switch_destroy(sw);
			fail_msg("%s: accepted", cases_bad[i].args);
		}
		if (strstr(err, cases_bad[i].msg) == NULL)
			fail_msg("%s: want \"%s\", got \"%s\"", cases_bad[i].args, cases_bad[i].msg, err);
	}
}

int main(void)
{
	test_target_require();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_golden_packets, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_ecmp, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_route_updates, fx_setup, fx_teardown),
		cmocka_unit_test(test_garbage_and_strangers),
		cmocka_unit_test(test_bad_settings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
