/*
 * test_topology.c — unit tests for the topology parser (src/topology/topology*.c):
 * the shipped examples resolve as documented (ports, addresses, peers,
 * emulation, ECMP routes), and every kind of bad input is refused with a
 * message that names the JSON path.
 *
 * The program registry is faked here (programs "forward" and "counter"), so
 * the parser is tested on its own. Example files are found relative to the
 * source tree: $INNET_SRCDIR if set, else the directory this file was
 * compiled from (make runs from the top of the tree).
 *
 * Test texts are written with single quotes for readability; json() turns
 * them into double quotes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/topology.h"
#include "consensus/kv.h"
#include "consensus/wire.h"

/* ------------------------------------------------------------------------ */
/* A fake registry.                                                          */

static const struct innet_program fake_forward = { .name = "forward" };
static const struct innet_program fake_counter = { .name = "counter" };
static const struct innet_program fake_p4 = { .name = "p4" };
static const struct innet_program *const fake_list[] = { &fake_forward, &fake_counter, &fake_p4,
							 NULL };

const struct innet_program *innet_program_find(const char *name)
{
	for (size_t i = 0; fake_list[i] != NULL; i++)
		if (!strcmp(fake_list[i]->name, name))
			return fake_list[i];
	return NULL;
}

const struct innet_program *const *innet_program_list(void)
{
	return fake_list;
}

int innet_program_registration_error(char *err, size_t errlen)
{
	return 0;
}

#include "unit/oom.h"

/* ------------------------------------------------------------------------ */
/* Helpers.                                                                  */

static char err[8192];

/* text with ' turned into " (a static buffer, one at a time). */
static const char *json(const char *text)
{
	static char buf[1 << 16];
	size_t i;

	for (i = 0; text[i] != '\0' && i + 1 < sizeof(buf); i++)
		buf[i] = text[i] == '\'' ? '"' : text[i];
	buf[i] = '\0';
	return buf;
}

static struct innet_topology *parse(const char *text)
{
	return innet_topology_parse(json(text), "test", err, sizeof(err));
}

static void example_path(const char *name, char *out, size_t len)
{
	const char *dir = getenv("INNET_SRCDIR");
	const char *self = __FILE__, *tail = strstr(self, "tests/unit/test_topology.c");

	if (dir != NULL)
		snprintf(out, len, "%s/examples/%s", dir, name);
	else
		snprintf(out, len, "%.*sexamples/%s", (int)(tail - self), self, name);
}

static struct innet_topology *load_example(const char *name)
{
	char path[4096];

	example_path(name, path, sizeof(path));
	struct innet_topology *t = innet_topology_load(path, err, sizeof(err));
	if (t == NULL)
		fail_msg("%s: %s", path, err);
	return t;
}

static uint32_t ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return ntohl(a.s_addr);
}

static uint32_t node(const struct innet_topology *t, const char *name)
{
	int i = innet_topology_find(t, name);

	assert_true(i >= 0);
	return (uint32_t)i;
}

static const struct innet_switch_conf *conf_of(const struct innet_topology *t, const char *name)
{
	return t->nodes[node(t, name)].conf;
}

/* The ports of the "routes" entry for node id in an expanded args_json, as
 * "p,q,..." ("" if there is no entry). */
static void route_ports(const char *args, unsigned id, char *out, size_t len)
{
	json_t *o = json_loads(args, 0, NULL), *r;
	size_t i, j;

	assert_non_null(o);
	out[0] = '\0';
	json_array_foreach(json_object_get(o, "routes"), i, r) {
		if (json_integer_value(json_object_get(r, "node")) != (json_int_t)id)
			continue;
		json_t *port;
		size_t off = 0;
		json_array_foreach(json_object_get(r, "ports"), j, port)
			off += (size_t)snprintf(out + off, len - off, "%s%lld", j ? "," : "",
						(long long)json_integer_value(port));
	}
	json_decref(o);
}

static size_t n_routes(const char *args)
{
	json_t *o = json_loads(args, 0, NULL);
	size_t n = json_array_size(json_object_get(o, "routes"));

	json_decref(o);
	return n;
}

/* ------------------------------------------------------------------------ */
/* Valid files.                                                              */

static void test_single(void **state)
{
	struct innet_topology *t = load_example("single.json");
	struct innet_switch_conf c;
	char ports[64];

	assert_string_equal(t->name, "single");
	assert_int_equal(t->n_switches, 1);
	assert_int_equal(t->n_hosts, 2);
	assert_int_equal(t->n_links, 2);
	assert_string_equal(t->state_dir, "/tmp/innet-single");

	const struct innet_switch_conf *s0 = conf_of(t, "s0");
	assert_int_equal(s0->node_id, 1);
	assert_int_equal(s0->n_workers, 1);
	assert_string_equal(s0->ctl_path, "/tmp/innet-single/s0.sock");
	assert_int_equal(s0->n_ports, 2);
	assert_string_equal(s0->ports[0].name, "h0");
	assert_int_equal(s0->ports[0].ip, ip("127.0.10.1"));
	assert_int_equal(s0->ports[0].peer_ip, ip("127.0.11.1"));
	assert_string_equal(s0->ports[1].name, "h1");
	assert_int_equal(s0->ports[1].ip, ip("127.0.10.2"));
	assert_int_equal(s0->ports[1].peer_ip, ip("127.0.11.2"));
	assert_false(s0->ports[0].link.on_egress); /* a perfect link */
	assert_int_equal(s0->n_progs, 1);
	assert_string_equal(s0->progs[0].name, "fwd");
	assert_ptr_equal(s0->progs[0].program, &fake_forward);
	assert_int_equal(s0->progs[0].n_udp, 1);
	assert_int_equal(s0->progs[0].udp[0], 9000);
	assert_string_equal(s0->progs[0].args_json, "{\"routes\":\"auto\"}");

	assert_int_equal(innet_topology_switch_conf(t, "s0", &c, err, sizeof(err)), 0);
	route_ports(c.progs[0].args_json, 101, ports, sizeof(ports));
	assert_string_equal(ports, "0");
	route_ports(c.progs[0].args_json, 102, ports, sizeof(ports));
	assert_string_equal(ports, "1");
	assert_int_equal(n_routes(c.progs[0].args_json), 2);
	innet_topology_conf_release(&c);
	innet_topology_conf_release(&c); /* idempotent */
	innet_topology_free(t);
}

static void test_spine_leaf(void **state)
{
	struct innet_topology *t = load_example("spine-leaf.json");
	struct innet_switch_conf c;
	uint16_t hops[INNET_MAX_PORTS];
	char ports[64];

	assert_int_equal(t->n_switches, 12);
	assert_int_equal(t->n_hosts, 16);
	assert_int_equal(t->n_links, 48);
	assert_string_equal(t->state_dir, "/tmp/innet-spine-leaf");

	/* Every port: unique address in 127.0.20.0/24; peers agree both ways. */
	for (uint32_t i = 0; i < t->n_switches; i++) {
		const struct innet_topo_node *n = &t->nodes[i];
		assert_int_equal(n->conf->n_ports, n->name[0] == 's' ? 8 : 6);
		for (uint32_t k = 0; k < n->conf->n_ports; k++) {
			const struct innet_port_conf *pc = &n->conf->ports[k];
			const struct innet_topo_peer *pe = &n->peers[k];
			assert_int_equal(pc->ip >> 8, ip("127.0.20.0") >> 8);
			for (uint32_t j = 0; j < t->n_switches; j++)
				for (uint32_t q = 0; q < t->nodes[j].conf->n_ports; q++)
					if (j != i || q != k)
						assert_int_not_equal(t->nodes[j].conf->ports[q].ip, pc->ip);
			if (pe->port != INNET_TOPO_NO_PORT) {
				const struct innet_switch_conf *pc2 = t->nodes[pe->node].conf;
				assert_int_equal(pc->peer_ip, pc2->ports[pe->port].ip);
				assert_int_equal(pc2->ports[pe->port].peer_ip, pc->ip);
			} else {
				assert_int_equal(pc->peer_ip, t->nodes[pe->node].addr);
			}
		}
	}
	/* Leaf ports 0-3 are spine0-3, 4-5 its hosts; spine port i is leaf i. */
	const struct innet_switch_conf *leaf0 = conf_of(t, "leaf0");
	assert_string_equal(leaf0->ports[2].name, "spine2");
	assert_string_equal(leaf0->ports[5].name, "h1");
	assert_string_equal(conf_of(t, "spine3")->ports[5].name, "leaf5");

	/* leaf0 -> h10 (on leaf5): ECMP over all four spines. */
	assert_int_equal(innet_topology_next_hops(t, node(t, "leaf0"), node(t, "h10"), hops, 64), 4);
	for (uint16_t k = 0; k < 4; k++)
		assert_int_equal(hops[k], k);
	/* max limits what is written, not the count. */
	assert_int_equal(innet_topology_next_hops(t, node(t, "leaf0"), node(t, "h10"), hops, 1), 4);
	/* leaf0 -> its own host h1: port 5 only; -> spine2: port 2; -> itself: none. */
	assert_int_equal(innet_topology_next_hops(t, node(t, "leaf0"), node(t, "h1"), hops, 64), 1);
	assert_int_equal(hops[0], 5);
	assert_int_equal(innet_topology_next_hops(t, node(t, "leaf0"), node(t, "spine2"), hops, 64), 1);
	assert_int_equal(hops[0], 2);
	assert_int_equal(innet_topology_next_hops(t, node(t, "leaf0"), node(t, "leaf0"), hops, 64), 0);
	/* spine1 -> h10: leaf5 is its port 5; -> spine2: via any leaf (8 ports). */
	assert_int_equal(innet_topology_next_hops(t, node(t, "spine1"), node(t, "h10"), hops, 64), 1);
	assert_int_equal(hops[0], 5);
	assert_int_equal(innet_topology_next_hops(t, node(t, "spine1"), node(t, "spine2"), hops, 64), 8);
	/* Bad arguments: a host as the switch, an index out of range. */
	assert_int_equal(innet_topology_next_hops(t, node(t, "h0"), 0, hops, 64), -EINVAL);
	assert_int_equal(innet_topology_next_hops(t, 0, t->n_nodes, hops, 64), -EINVAL);

	/* The expanded conf: routes to all 27 other nodes. */
	assert_int_equal(innet_topology_switch_conf(t, "leaf0", &c, err, sizeof(err)), 0);
	assert_int_equal(c.n_workers, 1);
	assert_int_equal(n_routes(c.progs[0].args_json), 27);
	route_ports(c.progs[0].args_json, 111, ports, sizeof(ports)); /* h10 */
	assert_string_equal(ports, "0,1,2,3");
	route_ports(c.progs[0].args_json, 16, ports, sizeof(ports)); /* leaf5 */
	assert_string_equal(ports, "0,1,2,3");
	route_ports(c.progs[0].args_json, 102, ports, sizeof(ports)); /* h1 */
	assert_string_equal(ports, "5");
	route_ports(c.progs[0].args_json, 11, ports, sizeof(ports)); /* itself */
	assert_string_equal(ports, "");
	innet_topology_conf_release(&c);
	innet_topology_free(t);
}

static void test_lossy(void **state)
{
	struct innet_topology *t = load_example("lossy.json");
	struct innet_topology *t2 = load_example("lossy.json");
	const struct innet_switch_conf *s0 = conf_of(t, "s0");
	const struct innet_link_conf *l0 = &s0->ports[0].link, *l1 = &s0->ports[1].link;

	assert_true(l0->loss == 0.05);
	assert_int_equal(l0->delay_us, 200);
	assert_int_equal(l0->jitter_us, 100);
	assert_true(l0->on_egress && l0->on_ingress); /* host link: both ways on the switch */
	assert_true(l1->dup == 0.01 && l1->reorder == 0.02);
	assert_true(l1->on_egress && l1->on_ingress);
	/* Seeds: deterministic, different per port. */
	assert_int_not_equal(l0->seed, 0);
	assert_int_not_equal(l0->seed, l1->seed);
	assert_int_equal(l0->seed, conf_of(t2, "s0")->ports[0].link.seed);
	assert_int_equal(s0->seed, conf_of(t2, "s0")->seed);
	innet_topology_free(t);
	innet_topology_free(t2);
}

/* Switch-switch emulation, explicit addresses, defaults and overrides,
 * several links between the same pair, comments, external addresses. */
static void test_features(void **state)
{
	struct innet_topology *t = parse(
		"{'name': 'f', 'seed': 3, 'state_dir': '/tmp/x', 'comment': 'c',"
		" 'defaults': {'workers': 3, 'programs': [{'program': 'counter', 'udp': [7000]}]},"
		" 'switches': [{'name': 'a', 'node': 1, 'comment': 'c'},"
		"   {'name': 'b', 'node': 2, 'workers': 2, 'machine': 'm1',"
		"    'programs': [{'name': 'f1', 'program': 'forward', 'udp': [9000, 9001],"
		"                  'args': {'routes': 'auto', 'x': [1]}},"
		"                 {'program': 'counter', 'udp': [7000]}]}],"
		" 'hosts': [{'name': 'h', 'node': 9, 'addr': '127.0.0.9', 'machine': 'm1'}],"
		" 'links': [{'a': 'a', 'b': 'b', 'a_addr': '127.0.0.1', 'b_addr': '127.0.0.2',"
		"            'loss': 0.5, 'delay_us': 10},"
		"           {'a': 'a', 'b': 'b'}, {'a': 'h', 'b': 'a', 'comment': 'c'}]}");
	struct innet_switch_conf c;
	char ports[64];

	if (t == NULL)
		fail_msg("%s", err);
	const struct innet_switch_conf *a = conf_of(t, "a"), *b = conf_of(t, "b");
	assert_string_equal(t->state_dir, "/tmp/x");
	assert_string_equal(a->ctl_path, "/tmp/x/a.sock");
	assert_int_equal(a->n_workers, 3);
	assert_int_equal(b->n_workers, 2);
	assert_string_equal(t->nodes[node(t, "b")].machine, "m1");
	assert_string_equal(a->progs[0].name, "counter");
	assert_null(a->progs[0].args_json);
	assert_int_equal(b->n_progs, 2);
	assert_int_equal(b->progs[0].udp[1], 9001);
	/* Explicit addresses; the next automatic one skips taken ones. */
	assert_int_equal(a->ports[0].ip, ip("127.0.0.1"));
	assert_int_equal(a->ports[0].peer_ip, ip("127.0.0.2"));
	assert_int_equal(b->ports[0].peer_ip, ip("127.0.0.1"));
	assert_int_equal(a->ports[1].ip, ip("127.1.0.1"));
	assert_int_equal(b->ports[1].ip, ip("127.1.0.2"));
	assert_int_equal(a->ports[2].peer_ip, ip("127.0.0.9"));
	/* Names: a second link to the same neighbour is "b#2". */
	assert_string_equal(a->ports[0].name, "b");
	assert_string_equal(a->ports[1].name, "b#2");
	/* Switch-switch emulation: egress only, on both ends; seeds differ. */
	assert_true(a->ports[0].link.on_egress && !a->ports[0].link.on_ingress);
	assert_true(b->ports[0].link.on_egress && !b->ports[0].link.on_ingress);
	assert_true(b->ports[0].link.loss == 0.5);
	assert_int_not_equal(a->ports[0].link.seed, b->ports[0].link.seed);
	assert_false(a->ports[1].link.on_egress);
	/* Routes from b: h (node 9) is 2 hops via either link to a. */
	assert_int_equal(innet_topology_switch_conf(t, "b", &c, err, sizeof(err)), 0);
	route_ports(c.progs[0].args_json, 9, ports, sizeof(ports));
	assert_string_equal(ports, "0,1");
	assert_non_null(strstr(c.progs[0].args_json, "\"x\":[1]"));
	assert_null(c.progs[1].args_json);
	innet_topology_conf_release(&c);
	/* Not a switch / unknown. */
	assert_int_equal(innet_topology_switch_conf(t, "h", &c, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no switch called 'h'"));
	assert_int_equal(innet_topology_switch_conf(t, "zz", &c, err, sizeof(err)), -ENOENT);
	assert_int_equal(innet_topology_find(t, "zz"), -ENOENT);
	innet_topology_free(t);

	/* External addresses when allowed. */
	t = parse("{'name': 'e', 'external_addrs': true, 'addr_base': '10.1.0.0',"
		  " 'switches': [{'name': 's', 'node': 1, 'programs': [{'program': 'forward', 'udp': [1]}]}],"
		  " 'hosts': [{'name': 'h', 'node': 2, 'addr': '10.0.0.1'}],"
		  " 'links': [{'a': 's', 'b': 'h'}]}");
	if (t == NULL)
		fail_msg("%s", err);
	assert_int_equal(conf_of(t, "s")->ports[0].ip, ip("10.1.0.1"));
	innet_topology_free(t);
	innet_topology_free(NULL);
}

/* ------------------------------------------------------------------------ */
/* Bad input: each case must fail with a message containing `expect`.       */

#define PROG "'programs': [{'program': 'forward', 'udp': [9000]}]"
#define SW0 "{'name': 's0', 'node': 1, " PROG "}"
#define H0 "{'name': 'h0', 'node': 101, 'addr': '127.0.11.1'}"
#define L0 "{'a': 'h0', 'b': 's0'}"
/* A valid topology with one switch, one host, one link, and extra text. */
#define TOPO(extra, sws, hosts, links) \
	"{'name': 't'" extra ", 'switches': [" sws "], 'hosts': [" hosts "], 'links': [" links "]}"

struct bad_case {
	const char *what;
	const char *text;
	const char *expect;
};

static const struct bad_case bad_cases[] = {
	{ "unknown top-level key", TOPO(", 'nmae': 1", SW0, H0, L0),
	  "test: $.nmae: unknown key (expected one of: name, seed," },
	{ "unknown switch key", TOPO("", "{'name': 's0', 'node': 1, 'wrokers': 2, " PROG "}", H0, L0),
	  "$.switches[0].wrokers: unknown key" },
	{ "unknown link key", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'los': 0.1}"),
	  "$.links[0].los: unknown key" },
	{ "unknown program key", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
				       "'forward', 'udp': [1], 'arg': {}}]}", H0, L0),
	  "$.switches[0].programs[0].arg: unknown key" },
	{ "node id as a string", TOPO("", "{'name': 's0', 'node': '1', " PROG "}", H0, L0),
	  "$.switches[0].node: expected an integer, got a string" },
	{ "node id 0", TOPO("", "{'name': 's0', 'node': 0, " PROG "}", H0, L0),
	  "$.switches[0].node: 0 is out of range [1, 65535]" },
	{ "node id too big", TOPO("", SW0, "{'name': 'h0', 'node': 65536, 'addr': '127.0.11.1'}", L0),
	  "$.hosts[0].node: 65536 is out of range" },
	{ "switches not an array", "{'name': 't', 'switches': {}}",
	  "$.switches: expected a non-empty array of switches, got an object" },
	{ "no switches", "{'name': 't', 'switches': []}", "$.switches: expected a non-empty array" },
	{ "trailing garbage", TOPO("", SW0, H0, L0) "x", "malformed JSON: end of file expected" },
	{ "top level not an object", "[1]", "test: $: expected a topology object, got an array" },
	{ "missing name", "{'switches': [" SW0 "]}", "test: $: missing required key 'name'" },
	{ "bad name", TOPO("", "{'name': 'a/b', 'node': 1, " PROG "}", H0, L0),
	  "$.switches[0].name: bad name 'a/b'" },
	{ "workers 0", TOPO("", "{'name': 's0', 'node': 1, 'workers': 0, " PROG "}", H0, L0),
	  "$.switches[0].workers: 0 is out of range [1, 256]" },
	{ "seed negative", TOPO(", 'seed': -1", SW0, H0, L0), "$.seed: -1 is out of range" },
	{ "external_addrs not a bool", TOPO(", 'external_addrs': 1", SW0, H0, L0),
	  "$.external_addrs: expected a boolean, got an integer" },
	{ "duplicate switch/host name", TOPO("", SW0, "{'name': 's0', 'node': 2, 'addr': '127.0.11.1'}", L0),
	  "$.hosts[0].name: duplicate name 's0' (also $.switches[0])" },
	{ "duplicate node id", TOPO("", SW0, "{'name': 'h0', 'node': 1, 'addr': '127.0.11.1'}", L0),
	  "$.hosts[0].node: duplicate node id 1 (also $.switches[0])" },
	{ "link to unknown node", TOPO("", SW0, H0, L0 ", {'a': 's0', 'b': 'nope'}"),
	  "$.links[1].b: link to unknown node 'nope'" },
	{ "link without b", TOPO("", SW0, H0, L0 ", {'a': 's0'}"),
	  "$.links[1]: missing required key 'b'" },
	{ "link to itself", TOPO("", SW0, H0, L0 ", {'a': 's0', 'b': 's0'}"),
	  "$.links[1]: link from 's0' to itself" },
	{ "host-host link", TOPO("", SW0, H0 ", {'name': 'h1', 'node': 102, 'addr': '127.0.11.2'}",
				 L0 ", {'a': 'h0', 'b': 'h1'}"),
	  "$.links[1]: link between two hosts ('h0', 'h1')" },
	{ "unlinked host", TOPO("", SW0, H0 ", {'name': 'h1', 'node': 102, 'addr': '127.0.11.2'}", L0),
	  "$.hosts[1]: host 'h1' is not linked to anything" },
	{ "unlinked switch", TOPO("", SW0 ", {'name': 's1', 'node': 2, " PROG "}", H0, L0),
	  "$.switches[1]: switch 's1' is not linked to anything" },
	{ "bad address", TOPO("", SW0, "{'name': 'h0', 'node': 101, 'addr': '127.0.0.300'}", L0),
	  "$.hosts[0].addr: bad address '127.0.0.300'" },
	{ "address not a string", TOPO("", SW0, "{'name': 'h0', 'node': 101, 'addr': 17}", L0),
	  "$.hosts[0].addr: expected a string, got an integer" },
	{ "multicast address", TOPO(", 'external_addrs': true", SW0,
				    "{'name': 'h0', 'node': 101, 'addr': '224.0.0.1'}", L0),
	  "$.hosts[0].addr: bad address 224.0.0.1: not a unicast address" },
	{ "address outside loopback", TOPO("", SW0, "{'name': 'h0', 'node': 101, 'addr': '10.0.0.1'}", L0),
	  "$.hosts[0].addr: address 10.0.0.1 is outside 127.0.0.0/8" },
	{ "addr_base outside loopback", TOPO(", 'addr_base': '192.168.0.0'", SW0, H0, L0),
	  "$.addr_base: address 192.168.0.0 is outside 127.0.0.0/8" },
	{ "duplicate address", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'b_addr': '127.0.11.1'}"),
	  "$.links[0].b_addr: address 127.0.11.1 is already used by $.hosts[0].addr" },
	{ "address on a host end", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'a_addr': '127.0.11.9'}"),
	  "$.links[0].a_addr: 'h0' is a host: its address is its \"addr\"" },
	{ "addresses run out", TOPO(", 'addr_base': '127.255.255.253'", SW0, H0, L0 "," L0),
	  "$.addr_base: ran out of automatic addresses in 127.0.0.0/8" },
	{ "loss above 1", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'loss': 1.5}"),
	  "$.links[0].loss: probability 1.5 is out of [0, 1]" },
	{ "dup below 0", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'dup': -0.1}"),
	  "$.links[0].dup: probability -0.1 is out of [0, 1]" },
	{ "reorder not a number", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'reorder': 'x'}"),
	  "$.links[0].reorder: expected a probability (a number in [0, 1]), got a string" },
	{ "delay as a real", TOPO("", SW0, H0, "{'a': 'h0', 'b': 's0', 'delay_us': 1.5}"),
	  "$.links[0].delay_us: expected an integer, got a number" },
	{ "missing program", TOPO("", "{'name': 's0', 'node': 1}", H0, L0),
	  "$.switches[0]: missing program: no 'programs' here and none in $.defaults" },
	{ "empty programs", TOPO("", "{'name': 's0', 'node': 1, 'programs': []}", H0, L0),
	  "$.switches[0].programs: expected a non-empty array of programs, got an empty array" },
	{ "unknown program", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': 'nope', "
				  "'udp': [1]}]}", H0, L0),
	  "$.switches[0].programs[0].program: unknown program 'nope' (known: forward, counter, p4)" },
	{ "program without udp", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
				      "'forward'}]}", H0, L0),
	  "$.switches[0].programs[0]: missing required key 'udp'" },
	{ "udp port 0", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': 'forward', "
			     "'udp': [0]}]}", H0, L0),
	  "$.switches[0].programs[0].udp[0]: expected a UDP port (1-65535)" },
	{ "too many udp ports", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
				    "'forward', 'udp': [9, '1-4096']}]}", H0, L0),
	  "$.switches[0].programs[0].udp[1]: more than 4096 UDP ports for one program" },
	{ "udp port bound twice", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
				       "'forward', 'udp': [5]}, {'program': 'counter', 'udp': [5]}]}",
				       H0, L0),
	  "$.switches[0].programs[1].udp: UDP port 5 is already bound by program 'forward'" },
	{ "duplicate program name", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
					 "'forward', 'udp': [5]}, {'program': 'forward', 'udp': [6]}]}",
					 H0, L0),
	  "$.switches[0].programs[1].name: duplicate program name 'forward'" },
	{ "args not an object", TOPO("", "{'name': 's0', 'node': 1, 'programs': [{'program': "
				     "'forward', 'udp': [5], 'args': [1]}]}", H0, L0),
	  "$.switches[0].programs[0].args: expected an object, got an array" },
	{ "bad default program", "{'name': 't', 'defaults': {'programs': [{'program': 'x', 'udp': [1]}]},"
				 " 'switches': [{'name': 's0', 'node': 1}]}",
	  "$.defaults.programs[0].program: unknown program 'x'" },
	{ "state_dir relative", TOPO(", 'state_dir': 'tmp/x'", SW0, H0, L0),
	  "$.state_dir: 'tmp/x' is not an absolute path" },
	{ "ctl path too long", TOPO(", 'state_dir': '/tmp/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'", SW0, H0, L0),
	  "$.switches[0]: control socket path '/tmp/aaaa" },
	{ "malformed JSON", "{'name': 't',\n 'switches': [\n  {'name' 's0'}]}",
	  "test:3:14: malformed JSON: ':' expected near '\"s0\"'" },
	{ "duplicate JSON key", "{'name': 't', 'name': 'u'}", "malformed JSON: duplicate object key" },
	{ "empty text", "", "test:1:0: malformed JSON" },
	{ "bad target", TOPO(", 'target': 'dpdk'", SW0, H0, L0),
	  "$.target: 'dpdk' is not a target" },
	{ "xdp without netns", TOPO(", 'target': 'xdp', 'netns': false", SW0, H0, L0),
	  "$.netns: a switch with \"target\": \"xdp\" needs network devices" },
	{ "xdp jumbo link", TOPO(", 'target': 'xdp'", SW0, H0, "{'a': 'h0', 'b': 's0', 'mtu': 9000}"),
	  "$.links[0].mtu: MTU 9000 on a port of XDP switch 's0'" },
	{ "mtu out of range", TOPO(", 'netns': true, 'mtu': 20", SW0, H0, L0), "$.mtu" },
	{ "metrics not a string", TOPO("", "{'name': 's0', 'node': 1, 'metrics': 9464, " PROG "}", H0, L0),
	  "$.switches[0].metrics: expected a string, got an integer" },
	{ "metrics no port", TOPO("", "{'name': 's0', 'node': 1, 'metrics': '127.0.0.1', " PROG "}", H0, L0),
	  "$.switches[0].metrics: bad metrics address '127.0.0.1': expected IPv4:PORT" },
	{ "metrics bad ip", TOPO("", "{'name': 's0', 'node': 1, 'metrics': 'localhost:9464', " PROG "}",
				 H0, L0),
	  "$.switches[0].metrics: bad metrics address 'localhost:9464': 'localhost' is not an IPv4" },
	{ "metrics bad port", TOPO("", "{'name': 's0', 'node': 1, 'metrics': '127.0.0.1:70000', " PROG "}",
				   H0, L0),
	  "port 70000 is out of range 0..65535" },
	{ "metrics port not a number", TOPO("", "{'name': 's0', 'node': 1, 'metrics': '127.0.0.1:9x', "
					    PROG "}", H0, L0),
	  "port '9x' is not a number" },
	{ "metrics clash", TOPO("", "{'name': 's0', 'node': 1, 'metrics': '0.0.0.0:9464', " PROG "},"
				"{'name': 's1', 'node': 2, 'metrics': '127.0.0.1:9464', " PROG "}",
				H0, L0 ", {'a': 's0', 'b': 's1'}"),
	  "$.switches[1].metrics: metrics address 127.0.0.1:9464 clashes with $.switches[0].metrics" },
};

static void test_bad_input(void **state)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];
		errno = 0;
		struct innet_topology *t = parse(b->text);
		if (t != NULL)
			fail_msg("%s: parsed, expected \"%s\"", b->what, b->expect);
		if (errno != EINVAL)
			fail_msg("%s: errno %d, expected EINVAL", b->what, errno);
		if (strstr(err, b->expect) == NULL)
			fail_msg("%s: got\n%s\nexpected \"%s\"", b->what, err, b->expect);
	}
}

/* "metrics": kept as written; the same port on two machines, or on two
 * addresses, or port 0 twice, is fine (the clashes are in bad_cases). */
static void test_metrics_key(void **state)
{
	struct innet_switch_conf c;
	struct innet_topology *t = parse(TOPO("", "{'name': 's0', 'node': 1, 'metrics': '127.0.0.1:9464', " PROG "},"
		       "{'name': 's1', 'node': 2, 'metrics': '127.0.0.2:9464', " PROG "},"
		       "{'name': 's2', 'node': 3, 'metrics': '127.0.0.1:9464', 'machine': 'm', " PROG "},"
		       "{'name': 's3', 'node': 4, 'metrics': '127.0.0.1:0', " PROG "},"
		       "{'name': 's4', 'node': 5, 'metrics': '127.0.0.1:0', " PROG "},"
		       "{'name': 's5', 'node': 6, " PROG "}",
		       H0, L0 ", {'a': 's0', 'b': 's1'}, {'a': 's1', 'b': 's2'}, {'a': 's2', 'b': 's3'},"
		       " {'a': 's3', 'b': 's4'}, {'a': 's4', 'b': 's5'}"));
	if (t == NULL)
		fail_msg("%s", err);
	assert_string_equal(conf_of(t, "s0")->metrics_addr, "127.0.0.1:9464");
	assert_string_equal(conf_of(t, "s3")->metrics_addr, "127.0.0.1:0");
	assert_string_equal(conf_of(t, "s5")->metrics_addr, "");
	assert_int_equal(innet_topology_switch_conf(t, "s2", &c, err, sizeof(err)), 0);
	assert_string_equal(c.metrics_addr, "127.0.0.1:9464");
	innet_topology_conf_release(&c);
	innet_topology_free(t);
}

/* Netns mode: targets, namespaces, devices, MACs, 10.x addresses, faults
 * moved off the switches (onto netem). */
static void test_netns_mode(void **state)
{
	struct innet_topology *t = parse(TOPO(", 'target': 'xdp', 'mtu': 3000",
					      SW0 ", {'name': 's1', 'node': 2, " PROG ", 'target': 'udp'}",
					      H0, "{'a': 'h0', 'b': 's0', 'loss': 0.1}, {'a': 's0', 'b': 's1'}"));
	if (t == NULL)
		fail_msg("%s", err);
	assert_true(t->netns);
	assert_int_equal(t->nodes[0].target, INNET_TARGET_XDP);
	assert_int_equal(t->nodes[1].target, INNET_TARGET_UDP);
	assert_int_equal(t->nodes[0].conf->target, INNET_TARGET_XDP);
	const struct innet_port_conf *p0 = &t->nodes[0].conf->ports[0];
	assert_string_equal(p0->dev, "p0");
	assert_int_equal(p0->peer_ip, (10u << 24) | (0u << 16) | (11u << 8) | 1u);  /* 127.0.11.1 */
	assert_int_equal(p0->ip >> 24, 10u);
	assert_true(p0->has_peer_mac);
	uint8_t mac[6];
	innet_topology_mac(101, 0, mac);   /* h0's eth0 */
	assert_memory_equal(p0->peer_mac, mac, 6);
	assert_true(p0->link.loss == 0);   /* the loss is netem's now */
	assert_int_equal(t->links[0].mtu, 3000);
	/* innet kv's log entries fit one frame: no fragments on any hop */
	assert_int_equal(kv_topology_entry_max(t), 3000 - 20 - 8 - PAXOS_HDR_LEN);
	/* and a replica keeps as many bytes in flight as with full entries:
	 * 8 x 9160 bytes by default, so ceil(8 x 9160 / 2916) = 26 entries */
	assert_int_equal(kv_window_default(kv_topology_entry_max(t)), 26);
	assert_int_equal(kv_window_default(PAXOS_VALUE_MAX / 2), 16);
	assert_int_equal(kv_window_default(1500 - 20 - 8 - PAXOS_HDR_LEN), KV_MAX_WINDOW);
	assert_true(t->links[0].emu.loss > 0.09);
	/* s1's port 0 faces s0's port 1 */
	const struct innet_port_conf *q = &t->nodes[1].conf->ports[0];
	innet_topology_mac(1, 1, mac);
	assert_memory_equal(q->peer_mac, mac, 6);
	assert_int_equal(q->peer_ip, t->nodes[0].conf->ports[1].ip);
	char buf[128];
	innet_topology_netns_name(t, 2, buf, sizeof(buf));
	assert_string_equal(buf, "innet-t-h0");
	innet_topology_dev(t, 2, 0, buf, sizeof(buf));
	assert_string_equal(buf, "eth0");
	innet_topology_free(t);
	/* without a target or netns: loopback as always */
	t = parse(TOPO("", SW0, H0, L0));
	assert_non_null(t);
	assert_false(t->netns);
	assert_string_equal(t->nodes[0].conf->ports[0].dev, "");
	assert_int_equal(kv_topology_entry_max(t), 0);   /* loopback: up to PAXOS_VALUE_MAX */
	assert_int_equal(kv_window_default(0), KV_WINDOW_DEFAULT);
	assert_int_equal(kv_window_default(PAXOS_VALUE_MAX), KV_WINDOW_DEFAULT);
	innet_topology_free(t);
}

/* "p4": the switch runs the raw program "p4" with its files made absolute
 * (relative to the topology file), netns mode follows, every port is raw
 * and its address becomes the neighbour's gateway (a_gw/b_gw); mistakes are
 * named. */
static void test_p4_switch(void **state)
{
	char dir[] = "/tmp/innet-test-topo-p4-XXXXXX", path[4200], text[2048];
	assert_non_null(mkdtemp(dir));
	const char *files[] = { "prog.json", "cmds.txt" };
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs("{}\n", f);
		fclose(f);
	}
	snprintf(text, sizeof(text), "{'name': 't', 'switches': [{'name': 's0', 'node': 1, "
		 "'p4': 'prog.json', 'commands': 'cmds.txt'}, {'name': 's1', 'node': 2, " PROG "}], "
		 "'hosts': [" H0 "], 'links': [{'a': 'h0', 'b': 's0'}, {'a': 's0', 'b': 's1'}]}");
	snprintf(path, sizeof(path), "%s/topo.json", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(json(text), f);
	fclose(f);
	struct innet_topology *t = innet_topology_load(path, err, sizeof(err));
	if (t == NULL)
		fail_msg("%s", err);
	assert_true(t->netns);
	const struct innet_topo_node *n = &t->nodes[0];
	assert_true(n->p4);
	assert_false(t->nodes[1].p4);
	assert_int_equal(n->conf->n_progs, 1);
	assert_string_equal(n->conf->progs[0].name, "p4");
	assert_ptr_equal(n->conf->progs[0].program, &fake_p4);
	assert_true(n->conf->progs[0].raw);
	char want[4400];
	snprintf(want, sizeof(want), "{\"json\":\"%s/prog.json\",\"commands\":\"%s/cmds.txt\"}", dir,
		 dir);
	assert_string_equal(n->conf->progs[0].args_json, want);
	for (uint32_t k = 0; k < 2; k++) {
		const struct innet_port_conf *pc = &n->conf->ports[k];
		char dev[8];
		snprintf(dev, sizeof(dev), "p%u", k);
		assert_string_equal(pc->iface, dev);
		assert_string_equal(pc->dev, dev);
		assert_int_equal(pc->ip, 0);
		assert_int_equal(pc->peer_ip, 0);
		assert_true(pc->has_peer_mac);
	}
	/* h0 routes through 10.1.0.1; s1's port faces the gateway of s0's port 1 */
	assert_int_equal(t->links[0].b_gw, ip("10.1.0.1"));
	assert_int_equal(t->links[0].a_gw, 0);
	assert_int_equal(t->links[1].a_gw, ip("10.1.0.2"));
	assert_int_equal(t->nodes[1].conf->ports[0].peer_ip, ip("10.1.0.2"));
	assert_int_equal(t->nodes[1].conf->ports[0].iface[0], '\0');
	innet_topology_free(t);

	static const struct { const char *sw, *extra, *expect; } bad[] = {
		{ "'p4': 'prog.json', " PROG, "", "a P4 switch runs its P4 program only" },
		{ "'commands': 'cmds.txt', " PROG, "", "\"commands\" is for a P4 switch" },
		{ "'p4': 'nothere.json'", "", "nothere.json': No such file" },
		{ "'p4': 7", "", "$.switches[0].p4" },
		{ "'p4': 'prog.json'", "'netns': false, ", "a P4 program (\"p4\")" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "{'name': 't', %s'switches': [{'name': 's0', 'node': 1, %s}], "
			 "'hosts': [" H0 "], 'links': [" L0 "]}", bad[i].extra, bad[i].sw);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(json(text), f);
		fclose(f);
		t = innet_topology_load(path, err, sizeof(err));
		if (t != NULL)
			fail_msg("case %zu: loaded, expected \"%s\"", i, bad[i].expect);
		if (strstr(err, bad[i].expect) == NULL)
			fail_msg("case %zu: got\n%s\nexpected \"%s\"", i, err, bad[i].expect);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/topo.json", dir);
	unlink(path);
	rmdir(dir);
}

static void test_too_many_ports(void **state)
{
	static char text[1 << 16];
	size_t off = 0;
	unsigned i;

	off += (size_t)snprintf(text + off, sizeof(text) - off,
				"{'name': 't', 'switches': [" SW0 "], 'hosts': [");
	for (i = 0; i < 65; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off,
					"%s{'name': 'h%u', 'node': %u, 'addr': '127.0.11.%u'}",
					i ? ", " : "", i, 100 + i, 1 + i);
	off += (size_t)snprintf(text + off, sizeof(text) - off, "], 'links': [");
	for (i = 0; i < 65; i++)
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s{'a': 'h%u', 'b': 's0'}",
					i ? ", " : "", i);
	snprintf(text + off, sizeof(text) - off, "]}");
	assert_null(parse(text));
	assert_non_null(strstr(err, "$.links[64]: too many ports: switch 's0' already has 64"));
}

/* All problems are reported, one per line; a small buffer is cut with "...". */
static void test_all_errors_reported(void **state)
{
	const char *text = TOPO(", 'bogus': 1", "{'name': 's0', 'node': 'x', " PROG "}", H0,
				"{'a': 'h0', 'b': 's0', 'loss': 2}");
	char small[40];

	assert_null(parse(text));
	assert_non_null(strstr(err, "test: $.bogus: unknown key"));
	assert_non_null(strstr(err, "\ntest: $.switches[0].node: expected an integer"));
	assert_non_null(strstr(err, "\ntest: $.links[0].loss: probability 2 is out of [0, 1]"));

	/* A rejected link does not also make its nodes "not linked". */
	assert_null(parse(TOPO("", SW0, H0, "{'a': 'h0', 'b': 'zz'}")));
	assert_non_null(strstr(err, "$.links[0].b: link to unknown node 'zz'"));
	assert_null(strchr(err, '\n'));

	assert_null(innet_topology_parse(json(text), "test", small, sizeof(small)));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_string_equal(small + sizeof(small) - 4, "...");
	assert_null(innet_topology_parse(json(text), "test", NULL, 0));
	assert_int_equal(errno, EINVAL);
}

static void test_load_errors(void **state)
{
	char path[] = "/tmp/innet-test-topo-XXXXXX";
	int fd;

	errno = 0;
	assert_null(innet_topology_load("/nonexistent/topo.json", err, sizeof(err)));
	assert_int_equal(errno, ENOENT);
	assert_string_equal(err, "/nonexistent/topo.json: cannot read: No such file or directory");

	assert_null(innet_topology_load("/tmp", err, sizeof(err)));
	assert_int_equal(errno, EISDIR);

	/* A NUL byte in the file. */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\0}", 3), 3);
	close(fd);
	assert_null(innet_topology_load(path, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(err, "contains a NUL byte"));
	unlink(path);
}

/* Fail the n-th allocation (and all after it) for n = 0, 1, ...: loading and
 * expanding must fail cleanly with ENOMEM, never crash or leak. */
static void test_out_of_memory(void **state)
{
	char path[4096];
	unsigned failures = 0;
	long n;

	const char *preload = getenv("LD_PRELOAD");
	if (!OOM_INJECTION || (preload != NULL && strstr(preload, "vgpreload") != NULL))
		test_skip("no allocation failure injection under a sanitizer's allocator or valgrind");
	example_path("spine-leaf.json", path, sizeof(path));
	for (n = 0; n < 1000000; n++) {
		struct innet_switch_conf c;
		int r = -1;
		long live = oom_live;
		oom_countdown = n;
		struct innet_topology *t = innet_topology_load(path, err, sizeof(err));
		int e = errno;
		if (t != NULL)
			r = innet_topology_switch_conf(t, "leaf0", &c, err, sizeof(err));
		bool injected = oom_countdown == 0;
		oom_countdown = -1;
		/* jansson's lexer reports some of its allocation failures as syntax
		 * errors: accept that, the topology is refused either way. */
		if (t == NULL && e != ENOMEM && !(e == EINVAL && strstr(err, "malformed JSON")))
			fail_msg("allocation %ld: load failed with errno %d: %s", n, e, err);
		if (t != NULL && r != 0 && r != -ENOMEM)
			fail_msg("allocation %ld: switch_conf returned %d", n, r);
		if (r == 0)
			innet_topology_conf_release(&c);
		innet_topology_free(t);
		if (oom_live != live)
			fail_msg("allocation %ld: %ld blocks leaked (load %s, conf %d)", n, oom_live - live, t ? "ok" : "failed", r);
		if (!injected)
			break; /* everything succeeded: all allocations were covered */
		failures++;
	}
	assert_true(n > 0);
	print_message("  %u allocation failures injected\n", failures);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single),
		cmocka_unit_test(test_spine_leaf),
		cmocka_unit_test(test_lossy),
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_metrics_key),
		cmocka_unit_test(test_too_many_ports),
		cmocka_unit_test(test_netns_mode),
		cmocka_unit_test(test_p4_switch),
		cmocka_unit_test(test_all_errors_reported),
		cmocka_unit_test(test_load_errors),
		cmocka_unit_test(test_out_of_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
