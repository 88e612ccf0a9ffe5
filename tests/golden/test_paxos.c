/*
 * test_paxos.c — golden packets for the Paxos programs (src/consensus/):
 * coordinator (PISA) and acceptor (Trio, serial), through the real pipeline
 * with innet_switch_inject. Every message type, every drop reason, the ring
 * window (ring_full, trimmed, slot reuse only below trim), ballots, and
 * values of every size (on XDP: which the eBPF program handles, which it
 * passes up).
 *
 *   coordinator switch: port 0 = .1 (clients), ports 1..3 = .2..4 (acceptors
 *                       at peers .12..14): group 0 = ports 1..3
 *   acceptor switch:    port 0 = .21 (peer .1: the coordinator), ports 1, 2 =
 *                       .22, .23 (learners at .31, .32, UDP 34953); ring 4
 * Addresses are 127.207.P.x, P from the process id.
 *
 * Every switch a test makes is tracked and destroyed by the teardown, also
 * when the test fails half-way (cmocka leaves it by longjmp, past its own
 * destroy): a failure must not leave addresses bound for the next test.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/clock.h"
#include "innet/switch.h"
#include "consensus/wire.h"
#include "engine/switch_pvt.h"
#include "engine/switch_pvt.h"

#define TEST_NET 207u
#define UDP_PX   46100u
#define LUDP     34953u

static uint32_t ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static struct paxos_msg msg(uint8_t type, uint32_t ballot, uint64_t inst, uint64_t req,
			    const char *value)
{
	struct paxos_msg m;
	memset(&m, 0, sizeof(m));
	m.h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				  .service = INNET_SVC_PAXOS, .dst_node = htons(1), .src_node = htons(100) };
	m.p.type = type;
	m.p.ballot = htonl(ballot);
	m.p.instance = htobe64(inst);
	m.p.req_id = htobe64(req);
	if (value) {
		m.p.vlen = htons((uint16_t)strlen(value));
		memcpy(m.value, value, strlen(value));
	}
	return m;
}

static uint32_t mlen(const struct paxos_msg *m)
{
	return PAXOS_HDR_LEN + ntohs(m->p.vlen);
}

static struct innet_switch *live[4]; /* switches of the running test */

static struct innet_switch *sw_track(struct innet_switch *sw)
{
	for (size_t i = 0; sw != NULL && i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] == NULL) {
			live[i] = sw;
			return sw;
		}
	if (sw != NULL)
		fail_msg("more than %zu switches in one test", sizeof(live) / sizeof(live[0]));
	return sw;
}

static void sw_free(struct innet_switch *sw)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] == sw)
			live[i] = NULL;
	innet_switch_destroy(sw);
}

static int teardown(void **state)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] != NULL)
			sw_free(live[i]);
	return 0;
}

static struct innet_switch *sw_make(const char *prog, const char *args, int kind)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-%s", prog);
	c.n_workers = 1;
	if (kind == 0) { /* coordinator */
		c.n_ports = 4;
		c.ports[0].ip = ip(1);
		for (int i = 1; i < 4; i++) {
			c.ports[i].ip = ip(1 + i);
			c.ports[i].peer_ip = ip(11 + i);
		}
	} else {
		c.n_ports = 3;
		c.ports[0].ip = ip(21);
		c.ports[0].peer_ip = ip(1);
		c.ports[1].ip = ip(22);
		c.ports[1].peer_ip = ip(31);
		c.ports[2].ip = ip(23);
		c.ports[2].peer_ip = ip(32);
	}
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "px");
	c.progs[0].program = innet_program_find(prog);
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_PX;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = (char *)args;
	char err[512];
	test_target(&c);
	struct innet_switch *sw = sw_track(innet_switch_create(&c, err, sizeof(err)));
	if (sw == NULL)
		fail_msg("create %s: %s", prog, err);
	return sw;
}

static struct innet_inject_result res;

static void inject(struct innet_switch *sw, uint16_t port, uint32_t src_ip, const void *data,
		   uint32_t len)
{
	struct innet_addr src = { .ip = src_ip, .udp = 40000 };
	memset(&res, 0xAB, sizeof(res));
	assert_int_equal(innet_switch_inject(sw, port, UDP_PX, &src, data, len, &res), 0);
}

static void expect_drop(struct innet_switch *sw, const char *reason, const char *desc)
{
	struct innet_cp *cp = innet_switch_prog(sw, "px");
	if (res.action != INNET_DROP)
		fail_msg("%s: want drop %s, got %s", desc, reason, innet_action_name(res.action));
	if (strcmp(innet_cp_drop_reason_name(cp, res.drop_reason), reason) != 0)
		fail_msg("%s: want drop %s, got %s", desc, reason,
			 innet_cp_drop_reason_name(cp, res.drop_reason));
	assert_int_equal(res.n_out, 0);
}

static const struct paxos_hdr *out_hdr(uint32_t i)
{
	assert_true(res.out[i].len >= PAXOS_HDR_LEN);
	return (const struct paxos_hdr *)(res.out[i].data + sizeof(struct innet_hdr));
}

/* ---- coordinator ---------------------------------------------------------- */

static void test_coordinator(void **state)
{
	struct innet_switch *sw = sw_make("paxos_coordinator",
					  "{\"acceptors\": [1, 2, 3], \"ballot\": 513, \"next\": 7}", 0);
	/* REQUEST -> 2A with instance 7, ballot 513, to each acceptor, byte for byte. */
	struct paxos_msg m = msg(PAXOS_REQUEST, 0, 0, 0x0000000500000001ull, "SET k v");
	m.p.trim = htobe64(99); /* junk from the client is cleared */
	inject(sw, 0, ip(50), &m, mlen(&m));
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 3);
	static const uint8_t want[] = {
		0x1E, 0x01, 0x02, 0x00, 0x00, 0x01, 0x00, 0x64,   /* base header */
		0x04, 0x00, 0x00, 0x00,                           /* 2A, ok, node 0 */
		0x00, 0x00, 0x02, 0x01,                           /* ballot 513 */
		0x00, 0x00, 0x00, 0x00,                           /* vballot */
		0x00, 0x07, 0x00, 0x00,                           /* vlen 7 */
		0, 0, 0, 0, 0, 0, 0, 7,                           /* instance 7 */
		0, 0, 0, 5, 0, 0, 0, 1,                           /* req_id */
		0, 0, 0, 0, 0, 0, 0, 0,                           /* trim */
		0, 0, 0, 0, 0, 0, 0, 0,                           /* hi */
		'S', 'E', 'T', ' ', 'k', ' ', 'v',
	};
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(res.out[i].port, i + 1);
		assert_int_equal(res.out[i].dst.ip, ip(12 + i));
		assert_int_equal(res.out[i].dst.udp, UDP_PX);
		assert_int_equal(res.out[i].len, sizeof(want));
		assert_memory_equal(res.out[i].data, want, sizeof(want));
	}
	/* The next request gets instance 8. */
	inject(sw, 0, ip(51), &m, mlen(&m));
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(be64toh(out_hdr(0)->instance), 8);
	/* An empty value is a value (req_id != 0). */
	struct paxos_msg e = msg(PAXOS_REQUEST, 0, 0, 77, NULL);
	inject(sw, 0, ip(51), &e, mlen(&e));
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(be64toh(out_hdr(0)->instance), 9);

	/* A value is at most one packet less the headers (PAXOS_VALUE_MAX =
	 * INNET_PKT_MAX - 56): a full-size one is ordered like any other; a
	 * bigger datagram never reaches the program (the runtime refuses it,
	 * and counts it as truncated off the wire), so the coordinator's
	 * NACK/too_big is only a guard. */
	static struct paxos_msg full;
	full = msg(PAXOS_REQUEST, 0, 0, 5, NULL);
	full.p.vlen = htons(PAXOS_VALUE_MAX);
	memset(full.value, 'q', PAXOS_VALUE_MAX);
	inject(sw, 0, ip(52), &full, mlen(&full));
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 3);
	assert_int_equal(res.out[0].len, INNET_PKT_MAX);
	assert_int_equal(be64toh(out_hdr(0)->instance), 10);
	assert_memory_equal(res.out[2].data + PAXOS_HDR_LEN, full.value, PAXOS_VALUE_MAX);
	static uint8_t bigbuf[INNET_PKT_MAX + 1];
	struct innet_addr bsrc = { .ip = ip(52), .udp = 40000 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_PX, &bsrc, bigbuf, sizeof(bigbuf), &res),
			 -EINVAL);

	/* Drops, one per reason. */
	inject(sw, 0, ip(50), &m, 55);
	expect_drop(sw, "too_short", "55 bytes");
	struct paxos_msg x = m;
	x.h.magic = 0x1F;
	inject(sw, 0, ip(50), &x, mlen(&x));
	expect_drop(sw, "bad_magic", "magic");
	x = m;
	x.h.version = 2;
	inject(sw, 0, ip(50), &x, mlen(&x));
	expect_drop(sw, "bad_version", "version");
	x = m;
	x.h.service = INNET_SVC_COUNTER;
	inject(sw, 0, ip(50), &x, mlen(&x));
	expect_drop(sw, "wrong_service", "service");
	inject(sw, 0, ip(50), &m, mlen(&m) - 1);
	expect_drop(sw, "bad_length", "vlen says 7, 6 bytes follow");
	inject(sw, 0, ip(50), &m, mlen(&m) + 1);
	expect_drop(sw, "bad_length", "trailing byte");
	x = msg(PAXOS_REQUEST, 0, 0, 0, "x");
	inject(sw, 0, ip(50), &x, mlen(&x));
	expect_drop(sw, "bad_request", "req_id 0");
	static const uint8_t types[] = { PAXOS_1A, PAXOS_1B, PAXOS_2A, PAXOS_2B, PAXOS_TRIM,
					 PAXOS_RECOVER, PAXOS_READ, PAXOS_READ_ACK, 0, 99 };
	for (size_t i = 0; i < sizeof(types); i++) {
		x = msg(types[i], 1, 0, 1, NULL);
		inject(sw, 0, ip(50), &x, mlen(&x));
		expect_drop(sw, "unexpected_type", "not a request");
	}
	x = msg(PAXOS_NACK, 9999, 0, 1, NULL);
	inject(sw, 1, ip(12), &x, mlen(&x));
	expect_drop(sw, "nacked", "acceptor refused our ballot");

	/* Four instances handed out, no more. */
	struct innet_cp *cp = innet_switch_prog(sw, "px");
	uint64_t v;
	assert_int_equal(innet_cp_reg_read(cp, 0, 0, &v), 0);
	assert_int_equal(v, 11);
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	assert_true(st.max_reg_ops <= 2); /* one stage's worth: fits PISA */
	test_assert_xdp_ran(cp);
	sw_free(sw);
}

/* ---- acceptor ------------------------------------------------------------- */

#define ACC_ARGS "{\"id\": 2, \"ring\": 4, \"learners\": [1, 2], \"trim_learners\": 2}"

static void expect_2b_mc(uint64_t inst, uint32_t ballot, const char *value)
{
	if (res.action != INNET_MULTICAST)
		fail_msg("inst %lu: want 2B multicast, got %s", (unsigned long)inst,
			 innet_action_name(res.action));
	assert_int_equal(res.n_out, 2);
	for (uint32_t i = 0; i < 2; i++) {
		const struct paxos_hdr *p = out_hdr(i);
		assert_int_equal(res.out[i].port, i + 1);
		assert_int_equal(res.out[i].dst.ip, ip(31 + i));
		assert_int_equal(res.out[i].dst.udp, LUDP);
		assert_int_equal(p->type, PAXOS_2B);
		assert_int_equal(p->status, PAXOS_OK);
		assert_int_equal(ntohs(p->node), 2);
		assert_int_equal(ntohl(p->ballot), ballot);
		assert_int_equal(ntohl(p->vballot), ballot);
		assert_int_equal(be64toh(p->instance), inst);
		assert_int_equal(ntohs(p->vlen), strlen(value));
		assert_int_equal(res.out[i].len, PAXOS_HDR_LEN + strlen(value));
		assert_memory_equal(res.out[i].data + PAXOS_HDR_LEN, value, strlen(value));
	}
}

static void expect_reply(uint8_t type, uint8_t status, uint32_t dst_ip)
{
	if (res.action != INNET_REFLECT)
		fail_msg("want reflect (type %u status %u), got %s", type, status,
			 innet_action_name(res.action));
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].dst.ip, dst_ip);
	const struct paxos_hdr *p = out_hdr(0);
	if (p->type != type || p->status != status)
		fail_msg("want type %u status %u, got type %u status %u", type, status, p->type,
			 p->status);
	assert_int_equal(ntohs(p->node), 2);
	/* replies swap the nodes */
	const struct innet_hdr *h = (const struct innet_hdr *)res.out[0].data;
	assert_int_equal(ntohs(h->dst_node), 100);
	assert_int_equal(ntohs(h->src_node), 1);
}

static void a2(struct innet_switch *sw, uint32_t b, uint64_t inst, const char *v)
{
	struct paxos_msg m = msg(PAXOS_2A, b, inst, inst + 1000, v);
	inject(sw, 0, ip(1), &m, mlen(&m));
}

static void trim(struct innet_switch *sw, uint16_t learner, uint64_t w, uint64_t want)
{
	struct paxos_msg m = msg(PAXOS_TRIM, 0, 0, 0, NULL);
	m.p.node = htons(learner);
	m.p.trim = htobe64(w);
	inject(sw, 1 + learner, ip(31 + learner), &m, mlen(&m));
	expect_reply(PAXOS_TRIM, PAXOS_OK, ip(31 + learner));
	assert_int_equal(be64toh(out_hdr(0)->trim), want);
}

static void test_acceptor(void **state)
{
	struct innet_switch *sw = sw_make("paxos_acceptor", ACC_ARGS, 1);
	struct paxos_msg m;

	/* 2A -> 2B to both learners. */
	a2(sw, 0x100, 0, "v0");
	expect_2b_mc(0, 0x100, "v0");
	assert_int_equal(be64toh(out_hdr(0)->hi), 1);
	assert_int_equal(be64toh(out_hdr(0)->req_id), 1000);
	a2(sw, 0x100, 0, "v0"); /* duplicate: idempotent */
	expect_2b_mc(0, 0x100, "v0");
	a2(sw, 0x100, 3, "v3");
	expect_2b_mc(3, 0x100, "v3");
	assert_int_equal(be64toh(out_hdr(0)->hi), 4);

	/* Ring of 4, trim 0: instance 4 is outside the window. */
	a2(sw, 0x100, 4, "v4");
	expect_reply(PAXOS_NACK, PAXOS_ST_RING_FULL, ip(1));
	assert_int_equal(be64toh(out_hdr(0)->trim), 0);
	assert_int_equal(be64toh(out_hdr(0)->hi), 5); /* refused, but known to exist */

	/* READ (a read round) -> READ_ACK back to the learner, byte for byte: the
	 * read bound max(hi, join_inst) = 5 in `instance` (the refused 2A at 4
	 * counts: it was named), junk in the request's other fields cleared; no
	 * state changes. */
	m = msg(PAXOS_READ, 0x777, 0, 0x0102030405060708ull, NULL);
	m.p.vballot = htonl(9);
	m.h.flags = 0x80;
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_READ_ACK, PAXOS_OK, ip(31));
	static const uint8_t want_ack[] = {
		0x1E, 0x01, 0x02, 0x00, 0x00, 0x64, 0x00, 0x01,   /* base header, nodes swapped */
		0x0a, 0x00, 0x00, 0x02,                           /* READ_ACK, ok, acceptor 2 */
		0, 0, 0, 0,                                       /* ballot */
		0, 0, 0, 0,                                       /* vballot */
		0, 0, 0, 0,                                       /* vlen, reserved */
		0, 0, 0, 0, 0, 0, 0, 5,                           /* the read bound */
		1, 2, 3, 4, 5, 6, 7, 8,                           /* the round's id */
		0, 0, 0, 0, 0, 0, 0, 0,                           /* trim */
		0, 0, 0, 0, 0, 0, 0, 5,                           /* hi */
	};
	assert_int_equal(res.out[0].len, sizeof(want_ack));
	assert_memory_equal(res.out[0].data, want_ack, sizeof(want_ack));
	assert_int_equal(res.out[0].port, 1);
	/* a READ carries no value */
	m = msg(PAXOS_READ, 0, 0, 1, "x");
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_drop(sw, "bad_length", "a READ with a value");
	/* from a stranger on a learner's port */
	m = msg(PAXOS_READ, 0, 0, 1, NULL);
	inject(sw, 1, ip(99), &m, mlen(&m));
	expect_drop(sw, "spoofed", "a READ from an unknown source");

	/* RECOVER: the vote at 3; nothing at 1; outside the window: empty. */
	m = msg(PAXOS_RECOVER, 0, 3, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(31));
	assert_int_equal(ntohl(out_hdr(0)->vballot), 0x100);
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x100);
	assert_int_equal(be64toh(out_hdr(0)->req_id), 1003);
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN + 2);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, "v3", 2);
	m = msg(PAXOS_RECOVER, 0, 1, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_ST_EMPTY, ip(31));
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN);
	m = msg(PAXOS_RECOVER, 0, 100, 0, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_ST_EMPTY, ip(32));

	/* 1A with a higher ballot at 3: promise, 1B carries the vote. */
	m = msg(PAXOS_1A, 0x201, 3, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_1B, PAXOS_OK, ip(31));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x201);
	assert_int_equal(ntohl(out_hdr(0)->vballot), 0x100);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, "v3", 2);
	/* the old coordinator's 2A at 3 is now refused, with the promised ballot */
	a2(sw, 0x100, 3, "late");
	expect_reply(PAXOS_NACK, PAXOS_ST_BALLOT, ip(1));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x201);
	/* a lower 1A too */
	m = msg(PAXOS_1A, 0x101, 3, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_NACK, PAXOS_ST_BALLOT, ip(31));
	/* the leader's 2A at the promised ballot is accepted (new value) */
	m = msg(PAXOS_2A, 0x201, 3, 0, "");
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_2b_mc(3, 0x201, "");
	/* 1A at 2 (nothing voted): 1B empty */
	m = msg(PAXOS_1A, 0x201, 2, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_1B, PAXOS_ST_EMPTY, ip(31));
	assert_int_equal(ntohl(out_hdr(0)->vballot), 0);
	/* instance 1 was never promised: the old ballot still works there */
	a2(sw, 0x100, 1, "v1");
	expect_2b_mc(1, 0x100, "v1");

	/* A range promise (new leader) covers every instance, in or out of the window. */
	m = msg(PAXOS_1A, 0x301, 9, 0, NULL);
	m.h.flags = PAXOS_F_RANGE;
	inject(sw, 0, ip(1), &m, mlen(&m));
	expect_reply(PAXOS_1B, PAXOS_ST_EMPTY, ip(1));
	a2(sw, 0x201, 2, "v2");
	expect_reply(PAXOS_NACK, PAXOS_ST_BALLOT, ip(1));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x301);
	a2(sw, 0x301, 2, "v2");
	expect_2b_mc(2, 0x301, "v2");

	/* Trim: min over both learners. Learner 0 at 3, learner 1 at 0: trim 0. */
	trim(sw, 0, 3, 0);
	a2(sw, 0x301, 4, "v4");
	expect_reply(PAXOS_NACK, PAXOS_ST_RING_FULL, ip(1));
	/* Learner 1 reaches 2: trim 2; instances 4, 5 fit, 6 does not. */
	trim(sw, 1, 2, 2);
	trim(sw, 1, 1, 2); /* watermarks never go back */
	a2(sw, 0x301, 4, "v4");
	expect_2b_mc(4, 0x301, "v4");
	a2(sw, 0x301, 5, "v5");
	expect_2b_mc(5, 0x301, "v5");
	a2(sw, 0x301, 6, "v6");
	expect_reply(PAXOS_NACK, PAXOS_ST_RING_FULL, ip(1));
	/* Slot 0 now holds instance 4: RECOVER 0 says trimmed, not v4. */
	m = msg(PAXOS_RECOVER, 0, 0, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_NACK, PAXOS_ST_TRIMMED, ip(31));
	assert_int_equal(be64toh(out_hdr(0)->trim), 2);
	a2(sw, 0x301, 1, "again");
	expect_reply(PAXOS_NACK, PAXOS_ST_TRIMMED, ip(1));
	/* The reused slot starts fresh: no promise carried over from instance 0. */
	m = msg(PAXOS_RECOVER, 0, 4, 0, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(32));
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, "v4", 2);
	/* The untrimmed instance 3 (slot 3) is intact: "" at 0x201. */
	m = msg(PAXOS_RECOVER, 0, 3, 0, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(32));
	assert_int_equal(ntohl(out_hdr(0)->vballot), 0x201);
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN);

	/* A full-size value round-trips. */
	static char big[PAXOS_VALUE_MAX + 1];
	memset(big, 'z', PAXOS_VALUE_MAX);
	big[0] = 'A';
	big[PAXOS_VALUE_MAX - 1] = 'Z';
	a2(sw, 0x301, 5, big);
	expect_2b_mc(5, 0x301, big);

	/* Drops, one per reason. */
	m = msg(PAXOS_2A, 0x301, 5, 1, "x");
	inject(sw, 0, ip(1), &m, 55);
	expect_drop(sw, "too_short", "55 bytes");
	struct paxos_msg x = m;
	x.h.magic = 0;
	inject(sw, 0, ip(1), &x, mlen(&x));
	expect_drop(sw, "bad_magic", "magic");
	x = m;
	x.h.version = 0;
	inject(sw, 0, ip(1), &x, mlen(&x));
	expect_drop(sw, "bad_version", "version");
	x = m;
	x.h.service = INNET_SVC_AGG;
	inject(sw, 0, ip(1), &x, mlen(&x));
	expect_drop(sw, "wrong_service", "service");
	inject(sw, 0, ip(1), &m, mlen(&m) + 3);
	expect_drop(sw, "bad_length", "trailing bytes");
	static uint8_t over[INNET_PKT_MAX];
	x = m;
	x.p.vlen = htons(PAXOS_VALUE_MAX + 1);
	memcpy(over, &x, PAXOS_HDR_LEN);
	inject(sw, 0, ip(1), over, sizeof(over));
	expect_drop(sw, "bad_length", "vlen above the maximum in a full-size packet");
	x = msg(PAXOS_1A, 0x401, 5, 0, "v");
	inject(sw, 0, ip(1), &x, mlen(&x));
	expect_drop(sw, "bad_length", "a 1A with a value");
	static const uint8_t types[] = { PAXOS_REQUEST, PAXOS_1B, PAXOS_2B, PAXOS_NACK,
					 PAXOS_READ_ACK, 0, 200 };
	for (size_t i = 0; i < sizeof(types); i++) {
		x = msg(types[i], 0x401, 5, 1, NULL);
		inject(sw, 0, ip(1), &x, mlen(&x));
		expect_drop(sw, "unexpected_type", "not for an acceptor");
	}
	/* spoofed: a 2A claiming to be on the coordinator's port from elsewhere,
	 * and a learner's address on the coordinator's port */
	inject(sw, 0, ip(99), &m, mlen(&m));
	expect_drop(sw, "spoofed", "unknown source");
	inject(sw, 0, ip(31), &m, mlen(&m));
	expect_drop(sw, "spoofed", "learner address on the coordinator link");
	x = msg(PAXOS_TRIM, 0, 0, 0, NULL);
	x.p.node = htons(2);
	x.p.trim = htobe64(1000);
	inject(sw, 1, ip(31), &x, mlen(&x));
	expect_drop(sw, "bad_learner", "learner id 2 of 2");
	x = msg(PAXOS_2A, 0, 5, 1, "x");
	inject(sw, 0, ip(1), &x, mlen(&x));
	expect_drop(sw, "bad_ballot", "ballot 0");

	/* None of the drops changed state: instance 5 still holds the big value. */
	m = msg(PAXOS_RECOVER, 0, 5, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(31));
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN + PAXOS_VALUE_MAX);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, big, PAXOS_VALUE_MAX);
	test_assert_xdp_ran(innet_switch_prog(sw, "px"));
	sw_free(sw);
}

/* A restarted acceptor ("join": true) is silent until the control plane
 * writes its join instance and ballot; then it refuses what it may have
 * voted or promised before it lost its state. */
static void test_acceptor_join(void **state)
{
	struct innet_switch *sw = sw_make("paxos_acceptor",
		"{\"id\": 2, \"ring\": 4, \"learners\": [1, 2], \"join\": true}", 1);
	struct innet_cp *cp = innet_switch_prog(sw, "px");
	struct paxos_msg m;
	a2(sw, 0x100, 0, "v0");
	expect_reply(PAXOS_NACK, PAXOS_ST_JOINING, ip(1));
	m = msg(PAXOS_1A, 0x500, 0, 0, NULL);
	m.h.flags = PAXOS_F_RANGE;
	inject(sw, 0, ip(1), &m, mlen(&m));
	expect_reply(PAXOS_NACK, PAXOS_ST_JOINING, ip(1));
	m = msg(PAXOS_RECOVER, 0, 0, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_NACK, PAXOS_ST_JOINING, ip(31));
	/* a read round is not answered with a bound while silent */
	m = msg(PAXOS_READ, 0, 0, 42, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_READ_ACK, PAXOS_ST_JOINING, ip(31));
	assert_int_equal(be64toh(out_hdr(0)->instance), 0);
	assert_int_equal(be64toh(out_hdr(0)->req_id), 42);
	/* join at instance 2, ballot 0x300 */
	assert_int_equal(innet_cp_reg_write(cp, innet_cp_reg_find(cp, "join_inst"), 0, 2), 0);
	assert_int_equal(innet_cp_reg_write(cp, innet_cp_reg_find(cp, "join_ballot"), 0, 0x300), 0);
	assert_int_equal(innet_cp_reg_write(cp, innet_cp_reg_find(cp, "joining"), 0, 0), 0);
	/* its read bound is the join instance (it may have voted below it
	 * before it lost its state, and its hi is 0 now) */
	m = msg(PAXOS_READ, 0, 0, 43, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_READ_ACK, PAXOS_OK, ip(32));
	assert_int_equal(be64toh(out_hdr(0)->instance), 2);
	a2(sw, 0x300, 1, "v1");                       /* below the join instance */
	expect_reply(PAXOS_NACK, PAXOS_ST_JOINING, ip(1));
	a2(sw, 0x200, 2, "v2");                       /* below the join ballot */
	expect_reply(PAXOS_NACK, PAXOS_ST_BALLOT, ip(1));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x300);
	a2(sw, 0x300, 2, "v2");
	expect_2b_mc(2, 0x300, "v2");
	m = msg(PAXOS_RECOVER, 0, 2, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(31));
	/* then hi (3) is above the join instance */
	m = msg(PAXOS_READ, 0, 0, 44, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_READ_ACK, PAXOS_OK, ip(31));
	assert_int_equal(be64toh(out_hdr(0)->instance), 3);
	test_assert_xdp_ran(cp);
	sw_free(sw);
}

/* ---- values of every size, on both targets -------------------------------- */

/* Packets of cp the eBPF program took so far (0 on the user-space target). */
static uint64_t xdp_rx(struct innet_cp *cp)
{
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	return st.xdp_rx_pkts;
}

static uint64_t handoffs(struct innet_cp *cp, const char *kind)
{
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	for (unsigned k = 0; innet_handoff_name(k) != NULL; k++)
		if (strcmp(innet_handoff_name(k), kind) == 0)
			return st.handoffs[k];
	fail_msg("no hand-off kind '%s'", kind);
	return 0;
}

/* On the XDP target, did the eBPF program handle the last packet itself
 * (took: xdp_rx_pkts went up) or pass it up to the user-space engine? */
static void expect_xdp(struct innet_cp *cp, uint64_t rx_before, bool took, const char *desc)
{
	if (!test_target_xdp())
		return;
	if ((xdp_rx(cp) > rx_before) != took)
		fail_msg("%s: want it %s", desc,
			 took ? "handled in eBPF" : "passed up to the user-space engine");
}

/*
 * The value travels between the packet and a slot (innet_pkt_to_reg,
 * innet_reg_to_pkt), on both targets. On XDP (test mode: ports of MTU 1500)
 * the eBPF program grows a reply in place only within one frame of the
 * link: a 1416-byte value (reply frame 14 + 20 + 8 + 56 + 1416 = 1514) is
 * recovered in eBPF, a 1417-byte one is not. Then the request — taken by
 * eBPF, small — is passed up untouched (innet_pass_up) and the user-space
 * engine answers, with the whole value (the kernel fragments); so is one
 * whose reply would not fit one XDP buffer. A full-size 2A arrives in a
 * frame too big for XDP: the user-space engine votes. A 1A passed up makes
 * its promise once, there. Every packet is counted once.
 */
static void test_acceptor_values(void **state)
{
	struct innet_switch *sw = sw_make("paxos_acceptor", ACC_ARGS, 1);
	struct innet_cp *cp = innet_switch_prog(sw, "px");
	static char edge[1417], over[1418], mid[3001], full[PAXOS_VALUE_MAX + 1];
	static const struct {
		char *v;
		uint32_t len;
	} vals[] = { { edge, 1416 }, { mid, 3000 }, { full, PAXOS_VALUE_MAX }, { over, 1417 } };
	for (int i = 0; i < 4; i++) {
		memset(vals[i].v, 'a' + i, vals[i].len);
		vals[i].v[0] = '<';
		vals[i].v[vals[i].len - 1] = '>';
	}
	struct paxos_msg m;
	uint64_t rx, up = handoffs(cp, "oversize");

	/* 2A at instance i with vals[i]: eBPF takes all but the full-size frame. */
	for (int i = 0; i < 4; i++) {
		rx = xdp_rx(cp);
		a2(sw, 0x100, (uint64_t)i, vals[i].v);
		expect_2b_mc((uint64_t)i, 0x100, vals[i].v);
		expect_xdp(cp, rx, i != 2, "2A");
	}
	/* RECOVER i: the value comes back whole; eBPF answers only the 1416 bytes. */
	for (int i = 0; i < 4; i++) {
		rx = xdp_rx(cp);
		m = msg(PAXOS_RECOVER, 0, (uint64_t)i, 0, NULL);
		inject(sw, 2, ip(32), &m, mlen(&m));
		expect_reply(PAXOS_2B, PAXOS_OK, ip(32));
		assert_int_equal(res.out[0].len, PAXOS_HDR_LEN + vals[i].len);
		assert_int_equal(ntohs(out_hdr(0)->vlen), vals[i].len);
		assert_int_equal(ntohl(out_hdr(0)->vballot), 0x100);
		assert_int_equal(be64toh(out_hdr(0)->req_id), 1000 + i);
		assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, vals[i].v, vals[i].len);
		expect_xdp(cp, rx, i == 0, "RECOVER");
	}

	/* 1A: the promise is made once, by whichever engine answers. */
	rx = xdp_rx(cp);
	m = msg(PAXOS_1A, 0x201, 2, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_1B, PAXOS_OK, ip(31));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x201);
	assert_int_equal(ntohl(out_hdr(0)->vballot), 0x100);
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN + PAXOS_VALUE_MAX);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, full, PAXOS_VALUE_MAX);
	expect_xdp(cp, rx, false, "1A answered with a full-size value");
	a2(sw, 0x100, 2, "late");
	expect_reply(PAXOS_NACK, PAXOS_ST_BALLOT, ip(1));
	assert_int_equal(ntohl(out_hdr(0)->ballot), 0x201);
	rx = xdp_rx(cp);
	m = msg(PAXOS_1A, 0x201, 0, 0, NULL);
	inject(sw, 1, ip(31), &m, mlen(&m));
	expect_reply(PAXOS_1B, PAXOS_OK, ip(31));
	assert_int_equal(res.out[0].len, PAXOS_HDR_LEN + 1416);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, edge, 1416);
	expect_xdp(cp, rx, true, "1A answered with 1416 bytes");

	/* Every packet once: 11 in, 11 verdicts; four went up on XDP. */
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	uint64_t verdicts = 0;
	for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
		verdicts += st.actions[a];
	assert_int_equal(st.rx_pkts, 11);
	assert_int_equal(verdicts, 11);
	assert_int_equal(handoffs(cp, "oversize") - up, test_target_xdp() ? 4 : 0);
	/* a read round's READ is answered in eBPF: the bound is hi = 4 */
	rx = xdp_rx(cp);
	m = msg(PAXOS_READ, 0, 0, 7, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_READ_ACK, PAXOS_OK, ip(32));
	assert_int_equal(be64toh(out_hdr(0)->instance), 4);
	expect_xdp(cp, rx, true, "READ");
	test_assert_xdp_ran(cp);
	sw_free(sw);
}

/* ---- SERIAL on XDP: one handler run at a time across executors ------------ */

static void *release_later(void *arg)
{
	usleep(100 * 1000);
	atomic_store((_Atomic uint32_t *)arg, 0);
	return NULL;
}

/*
 * The acceptor is SERIAL. On XDP the kernel runs its handler on any CPU and
 * the user-space engine runs it for what is passed up; a lock word in the
 * program's shared page makes the runs one at a time (docs/xdp.md). Held by
 * someone else (here: this test, standing in for a worker inside the
 * handler), the eBPF program does not wait: the 2A goes up untouched, counted
 * as a "serial" hand-off, and the engine's worker votes once the lock is free
 * — 100 ms later. With the lock free, eBPF votes itself. On the user-space
 * engine there is no lock (one worker runs the program).
 */
static void test_acceptor_serial(void **state)
{
	struct innet_switch *sw = sw_make("paxos_acceptor", ACC_ARGS, 1);
	struct innet_cp *cp = innet_switch_prog(sw, "px");
	if (!test_target_xdp()) {
		assert_null(cp->serial_lock);
		a2(sw, 0x100, 0, "free");
		expect_2b_mc(0, 0x100, "free");
		sw_free(sw);
		return;
	}
	assert_non_null(cp->serial_lock);
	uint64_t up = handoffs(cp, "serial"), rx = xdp_rx(cp);
	a2(sw, 0x100, 0, "free");
	expect_2b_mc(0, 0x100, "free");
	expect_xdp(cp, rx, true, "2A with the lock free");
	assert_int_equal(handoffs(cp, "serial"), up);

	atomic_store(cp->serial_lock, 1);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, release_later, (void *)cp->serial_lock), 0);
	double t0 = ((double)innet_now_ns() / 1e9);
	rx = xdp_rx(cp);
	a2(sw, 0x100, 1, "held");
	double waited = ((double)innet_now_ns() / 1e9) - t0;
	pthread_join(t, NULL);
	expect_2b_mc(1, 0x100, "held");
	expect_xdp(cp, rx, false, "2A with the lock held");
	assert_int_equal(handoffs(cp, "serial"), up + 1);
	assert_true(waited >= 0.09);   /* the worker waited for the lock */
	assert_int_equal(atomic_load(cp->serial_lock), 0);

	/* the vote was made once, by the worker: a RECOVER finds it */
	struct paxos_msg m = msg(PAXOS_RECOVER, 0, 1, 0, NULL);
	inject(sw, 2, ip(32), &m, mlen(&m));
	expect_reply(PAXOS_2B, PAXOS_OK, ip(32));
	assert_int_equal(ntohs(out_hdr(0)->vlen), 4);
	assert_memory_equal(res.out[0].data + PAXOS_HDR_LEN, "held", 4);
	test_assert_xdp_ran(cp);
	sw_free(sw);
}

static void test_settings(void **state)
{
	static const struct {
		const char *prog, *args, *msg;
	} cases[] = {
		{ "paxos_acceptor", "{}", "setting 'id'" },
		{ "paxos_acceptor", "{\"id\": 64}", "out of range" },
		{ "paxos_acceptor", "{\"id\": 0, \"ring\": 0}", "out of range" },
		{ "paxos_acceptor", "{\"id\": 0, \"learners\": [9]}", "learner port 9 does not exist (4 ports)" },
		{ "paxos_acceptor", "{\"id\": 0, \"rign\": 4}", "unknown setting 'rign'" },
		{ "paxos_coordinator", "{\"acceptors\": [7]}", "acceptor port 7 does not exist (4 ports)" },
		{ "paxos_coordinator", "{\"ballot\": 0}", "out of range" },
		{ "paxos_acceptor", "{\"id\": 1, \"ring\": 8, \"learners\": [1, 2]}", NULL },
		{ "paxos_coordinator", "{\"acceptors\": [1, 2, 3]}", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 4;
		for (int p = 0; p < 4; p++)
			c.ports[p].ip = ip(60 + p);
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "px");
		c.progs[0].program = innet_program_find(cases[i].prog);
		c.progs[0].udp[0] = UDP_PX + 1;
		c.progs[0].n_udp = 1;
		c.progs[0].args_json = (char *)cases[i].args;
		char err[512] = "";
		test_target(&c);
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (cases[i].msg == NULL) {
			if (sw == NULL)
				fail_msg("%s %s: %s", cases[i].prog, cases[i].args, err);
			sw_free(sw);
			continue;
		}
		if (sw != NULL) {
			sw_free(sw);
			fail_msg("%s %s: accepted", cases[i].prog, cases[i].args);
		}
		if (strstr(err, cases[i].msg) == NULL)
			fail_msg("%s %s: want \"%s\", got \"%s\"", cases[i].prog, cases[i].args,
				 cases[i].msg, err);
	}
}

int main(void)
{
	test_target_require();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_coordinator, teardown),
		cmocka_unit_test_teardown(test_acceptor, teardown),
		cmocka_unit_test_teardown(test_acceptor_join, teardown),
		cmocka_unit_test_teardown(test_acceptor_values, teardown),
		cmocka_unit_test_teardown(test_acceptor_serial, teardown),
		cmocka_unit_test_teardown(test_settings, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
