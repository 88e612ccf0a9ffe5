/*
 * test_agg.c — golden packets for the aggregation program
 * (src/agg/agg_dp.c, agg.c): contributions in → verdict and results out, through
 * the real pipeline with innet_switch_inject. Every case and every drop
 * reason; then the straggler timer on a started switch (the partial result
 * arrives on real loopback sockets, late packets get it unicast), and the
 * settings.
 *
 * Switch: ports 127.207.P.1 and .2 (P from the process id), agg on UDP 47810,
 * k = 64, pool of 8 slots.
 *   job 7: 3 workers 127.207.P.11-13 : 6001-6003 (port 0), slots [0, 2)
 *   job 9: 2 workers 127.207.P.21-22 : 6011-6012 (port 1), slots [2, 4),
 *          straggler timeout 30 ms
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/switch.h"
#include "agg/wire.h"

#define TEST_NET 207u
#define UDP_AGG  47810u
#define K        64u
#define PLEN     (INNET_AGG_HDR_LEN + 4 * K)

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static char args[1024];

static struct innet_switch *make_switch(void)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-agg");
	c.n_workers = 1;
	c.n_ports = 2;
	c.ports[0].ip = test_ip(1);
	c.ports[1].ip = test_ip(2);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "agg");
	c.progs[0].program = innet_program_find("agg");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_AGG;
	c.progs[0].n_udp = 1;
	unsigned p = (unsigned)getpid() & 0xffu;
	snprintf(args, sizeof(args),
		 "{\"k\": %u, \"slots\": 8, \"jobs\": ["
		 "{\"id\": 7, \"workers\": 3, \"slots\": 2, \"members\": [\"127.207.%u.11:6001\", "
		 "\"127.207.%u.12:6002\", \"127.207.%u.13:6003\"]},"
		 "{\"id\": 9, \"workers\": 2, \"slots\": 2, \"timeout_us\": 30000, \"members\": "
		 "[\"1@127.207.%u.21:6011\", \"1@127.207.%u.22:6012\"]}]}",
		 K, p, p, p, p, p);
	c.progs[0].args_json = args;
	char err[256];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	return sw;
}

struct contrib {
	uint16_t job;
	uint16_t slot;
	uint32_t round;
	uint8_t worker;
	uint32_t offset;
	uint8_t exp;
	int32_t base;      /* element i = base + i * step */
	int32_t step;
	uint8_t gen;       /* the job's generation the worker knows (0: the first) */
};

/* The generation results must carry (test_runs moves job 7 to the next). */
static uint8_t want_gen;

static uint32_t build(uint8_t *buf, const struct contrib *ct)
{
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG,
				 .src_node = htons(5) };
	*a = (struct innet_agg_hdr){ .op = INNET_AGG_CONTRIB, .job = htons(ct->job), .slot = htons(ct->slot),
				     .ver = (uint8_t)(ct->round & 1), .worker = ct->worker,
				     .round = htonl(ct->round), .offset = htonl(ct->offset), .exp = ct->exp,
				     .k = htons(K), .gen = ct->gen };
	uint32_t *el = (uint32_t *)(a + 1);
	for (uint32_t i = 0; i < K; i++)
		el[i] = htonl((uint32_t)(ct->base + (int32_t)i * ct->step));
	return PLEN;
}

static struct innet_switch *sw;
static struct innet_cp *cp;
static struct innet_inject_result res;

/* Inject ct from worker w's address (job 7: .11+w / 6001+w; job 9: .21+w / 6011+w). */
static void inject_from(const uint8_t *pkt, uint32_t len, uint16_t job, uint8_t w)
{
	struct innet_addr src = job == 9 ? (struct innet_addr){ test_ip(21u + w), (uint16_t)(6011 + w) }
					 : (struct innet_addr){ test_ip(11u + w), (uint16_t)(6001 + w) };
	memset(&res, 0xAB, sizeof(res));
	assert_int_equal(innet_switch_inject(sw, job == 9 ? 1 : 0, UDP_AGG, &src, pkt, len, &res), 0);
}

static void contribute(const struct contrib *ct)
{
	uint8_t buf[PLEN];
	build(buf, ct);
	inject_from(buf, PLEN, ct->job, ct->worker);
}

static void expect_drop(const char *why, const char *reason)
{
	if (res.action != INNET_DROP)
		fail_msg("%s: want drop %s, got %s", why, reason, innet_action_name(res.action));
	const char *name = innet_cp_drop_reason_name(cp, res.drop_reason);
	if (strcmp(name, reason) != 0)
		fail_msg("%s: want drop %s, got %s", why, reason, name);
	assert_int_equal(res.n_out, 0);
}

static void expect_consumed(const char *why)
{
	if (res.action != INNET_CONSUMED)
		fail_msg("%s: want consumed, got %s (%s)", why, innet_action_name(res.action),
			 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
	assert_int_equal(res.n_out, 0);
}

/* A result packet: header fields and elements expect[i] = base + i * step. */
static void check_result(const char *why, const uint8_t *d, uint32_t len, uint8_t status, uint16_t job,
			 uint16_t slot, uint32_t round, uint8_t worker, uint32_t offset, uint8_t exp,
			 uint64_t bitmap, int64_t base, int64_t step)
{
	if (len != PLEN)
		fail_msg("%s: result of %u bytes, want %u", why, len, PLEN);
	const struct innet_hdr *h = (const struct innet_hdr *)d;
	const struct innet_agg_hdr *a = (const struct innet_agg_hdr *)(h + 1);
	assert_int_equal(h->magic, INNET_MAGIC);
	assert_int_equal(h->version, INNET_VERSION);
	assert_int_equal(h->service, INNET_SVC_AGG);
	if (a->op != INNET_AGG_RESULT || a->status != status)
		fail_msg("%s: op %u status %u, want 2/%u", why, a->op, a->status, status);
	assert_int_equal(ntohs(a->job), job);
	assert_int_equal(ntohs(a->slot), slot);
	assert_int_equal(a->ver, round & 1);
	assert_int_equal(ntohl(a->round), round);
	assert_int_equal(a->worker, worker);
	assert_int_equal(ntohl(a->offset), offset);
	assert_int_equal(a->exp, exp);
	assert_int_equal(be64toh(a->bitmap), bitmap);
	assert_int_equal(a->gen, want_gen); /* the job's generation */
	assert_int_equal(ntohs(a->k), K);
	assert_int_equal(a->call, 0);
	const uint32_t *el = (const uint32_t *)(a + 1);
	for (uint32_t i = 0; i < K; i++) {
		int32_t want = (int32_t)(uint32_t)(uint64_t)(base + (int64_t)i * step);
		if ((int32_t)ntohl(el[i]) != want)
			fail_msg("%s: element %u = %d, want %d", why, i, (int32_t)ntohl(el[i]), want);
	}
}

/* The multicast of a job-7 result with `status` and `bitmap`: one copy to
 * each of its 3 workers. */
/* The multicast of a job-7 result to the workers in mask `to` (the others
 * deaf: agg.h, R_DEAF), in worker order. */
static void expect_multicast7_to(const char *why, uint32_t to, uint8_t status, uint64_t bitmap, uint16_t slot,
				 uint32_t round, uint32_t offset, uint8_t exp, int64_t base, int64_t step)
{
	if (res.action != INNET_MULTICAST)
		fail_msg("%s: want multicast, got %s (%s)", why, innet_action_name(res.action),
			 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
	assert_int_equal(res.n_out, (uint32_t)__builtin_popcount(to));
	uint32_t i = 0;
	for (uint32_t w = 0; w < 3; w++) {
		if (!(to & (1u << w)))
			continue;
		assert_int_equal(res.out[i].port, 0);
		assert_int_equal(res.out[i].dst.ip, test_ip(11 + w));
		assert_int_equal(res.out[i].dst.udp, 6001 + w);
		assert_int_equal(res.out[i].src_udp, UDP_AGG);
		check_result(why, res.out[i].data, res.out[i].len, status, 7, slot, round, 0xff,
			     offset, exp, bitmap, base, step);
		i++;
	}
}

static void expect_multicast7_of(const char *why, uint8_t status, uint64_t bitmap, uint16_t slot, uint32_t round,
				 uint32_t offset, uint8_t exp, int64_t base, int64_t step)
{
	expect_multicast7_to(why, 0x7, status, bitmap, slot, round, offset, exp, base, step);
}

/* The multicast of a complete job-7 result. */
static void expect_multicast7(const char *why, uint16_t slot, uint32_t round, uint32_t offset, uint8_t exp,
			      int64_t base, int64_t step)
{
	expect_multicast7_of(why, INNET_AGG_COMPLETE, 0x7, slot, round, offset, exp, base, step);
}

static void expect_reply(const char *why, uint8_t status, uint16_t job, uint16_t slot, uint32_t round,
			 uint8_t worker, uint32_t offset, uint8_t exp, uint64_t bitmap, int64_t base, int64_t step)
{
	if (res.action != INNET_REFLECT)
		fail_msg("%s: want reflect, got %s (%s)", why, innet_action_name(res.action),
			 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
	assert_int_equal(res.n_out, 1);
	uint32_t ip = job == 9 ? test_ip(21u + worker) : test_ip(11u + worker);
	assert_int_equal(res.out[0].dst.ip, ip);
	check_result(why, res.out[0].data, res.out[0].len, status, job, slot, round, worker, offset, exp,
		     bitmap, base, step);
}

static void expect_stale(const char *why, uint16_t job, uint16_t slot, uint32_t round, uint8_t worker,
			 uint32_t now_round)
{
	if (res.action != INNET_REFLECT)
		fail_msg("%s: want reflect (stale), got %s", why, innet_action_name(res.action));
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].len, INNET_AGG_HDR_LEN);
	const struct innet_agg_hdr *a = (const struct innet_agg_hdr *)(res.out[0].data + 8);
	assert_int_equal(a->op, INNET_AGG_RESULT);
	assert_int_equal(a->status, INNET_AGG_STALE);
	assert_int_equal(ntohs(a->job), job);
	assert_int_equal(ntohs(a->slot), slot);
	assert_int_equal(a->worker, worker);
	assert_int_equal(a->ver, round & 1);
	assert_int_equal(ntohl(a->round), now_round);
	assert_int_equal(a->k, 0);
}

/* Element idx of the agg program's register `name`. */
static uint64_t reg_get(const char *name, uint32_t idx)
{
	int r = innet_cp_reg_find(cp, name);
	if (r < 0)
		fail_msg("no register '%s'", name);
	uint64_t v = 0;
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)r, idx, &v), 0);
	return v;
}

static int setup(void **state)
{
	want_gen = 0;
	sw = make_switch();
	cp = innet_switch_prog(sw, "agg");
	return 0;
}

static int teardown(void **state)
{
	innet_switch_destroy(sw);
	sw = NULL;
	return 0;
}

/* The life of a slot: aggregation, completion, retransmission, reuse. */
static void test_slot_life(void **state)
{
	/* round 0 of slot 0: worker i sends 100*(i+1) + j for element j */
	struct contrib c0 = { .job = 7, .slot = 0, .round = 0, .worker = 0, .offset = 0, .exp = 130,
			      .base = 100, .step = 1 };
	contribute(&c0);
	expect_consumed("w0 round 0");
	contribute(&c0);
	expect_drop("w0 again while incomplete: changes nothing", "duplicate");
	struct contrib c1 = c0;
	c1.worker = 1, c1.base = 200, c1.exp = 140;
	contribute(&c1);
	expect_consumed("w1 round 0");
	struct contrib c2 = c0;
	c2.worker = 2, c2.base = 300, c2.exp = 120;
	contribute(&c2);
	/* sum = 600 + 3j; exp = max(130, 140, 120) */
	expect_multicast7("w2 completes round 0", 0, 0, 0, 140, 600, 3);
	contribute(&c1);
	expect_reply("w1 retransmits: the result to w1 only", INNET_AGG_COMPLETE, 7, 0, 0, 1, 0, 140, 0x7,
		     600, 3);
	contribute(&c0);
	expect_reply("w0 retransmits", INNET_AGG_COMPLETE, 7, 0, 0, 0, 0, 140, 0x7, 600, 3);

	/* round 1 (shadow copy 1): negative numbers, offset echoed */
	for (uint8_t w = 0; w < 3; w++) {
		struct contrib c = { .job = 7, .slot = 0, .round = 1, .worker = w, .offset = 128,
				     .exp = 0, .base = -1000 * (w + 1), .step = -2 };
		contribute(&c);
		if (w < 2)
			expect_consumed("round 1");
	}
	expect_multicast7("round 1 complete", 0, 1, 128, 0, -6000, -6);
	/* round 0's copy is intact until round 1 completes: it completed, so
	 * copy 0 now holds round 2, and a round-0 packet is stale */
	contribute(&c1);
	expect_stale("w1 round 0 after round 1 completed", 7, 0, 0, 1, 2);

	/* round 2 reuses copy 0: starts from zero, not from round 0's sums */
	struct contrib r2 = { .job = 7, .slot = 0, .round = 2, .worker = 2, .offset = 256, .exp = 1,
			      .base = 5, .step = 0 };
	contribute(&r2);
	expect_consumed("round 2 w2");
	struct contrib r4 = r2;
	r4.round = 4;
	contribute(&r4);
	expect_drop("round 4 before round 3 completed", "early");
	struct contrib r3 = r2;
	r3.round = 3;
	contribute(&r3);
	expect_drop("round 3 before round 2 completed", "early");
	r2.worker = 0;
	contribute(&r2);
	r2.worker = 1;
	contribute(&r2);
	expect_multicast7("round 2 complete, fresh sums", 0, 2, 256, 1, 15, 0);

	/* slot 1 is independent of slot 0; int32 sums wrap (two's complement) */
	for (uint8_t w = 0; w < 3; w++) {
		struct contrib c = { .job = 7, .slot = 1, .round = 0, .worker = w, .offset = 64,
				     .exp = 0, .base = 0x7fffff00, .step = 1 };
		contribute(&c);
	}
	expect_multicast7("slot 1 wraps", 1, 0, 64, 0, (int64_t)3 * 0x7fffff00, 3);

	/* on the XDP target the eBPF program handled every one of them (they
	 * fit one XDP buffer): none fell back to the user-space engine */
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	printf("slot life: %llu packets, %llu handled in XDP\n", (unsigned long long)st.rx_pkts,
	       (unsigned long long)st.xdp_rx_pkts);
	if (test_target_xdp()) {
		assert_true(st.xdp_rx_pkts > 0);
		assert_int_equal(st.xdp_rx_pkts, st.rx_pkts);
	}
}

/* Jobs cannot see or touch each other's slots. */
static void test_isolation(void **state)
{
	/* job 9 slot 0 (global slot 2) and job 7 slot 0 (global 0) */
	struct contrib a7 = { .job = 7, .slot = 0, .round = 0, .worker = 0, .base = 1, .step = 0 };
	contribute(&a7);
	expect_consumed("job 7 w0");
	struct contrib a9 = { .job = 9, .slot = 0, .round = 0, .worker = 0, .base = 1000, .step = 1 };
	contribute(&a9);
	expect_consumed("job 9 w0");
	a9.worker = 1;
	a9.base = 2000;
	contribute(&a9);
	if (res.action != INNET_MULTICAST || res.n_out != 2)
		fail_msg("job 9 complete: want multicast to 2, got %s/%u", innet_action_name(res.action),
			 res.n_out);
	for (uint32_t w = 0; w < 2; w++) {
		assert_int_equal(res.out[w].port, 1);
		assert_int_equal(res.out[w].dst.ip, test_ip(21 + w));
		check_result("job 9 sums only its own", res.out[w].data, res.out[w].len, INNET_AGG_COMPLETE,
			     9, 0, 0, 0xff, 0, 0, 0x3, 3000, 2);
	}
	/* job 9 cannot name a slot outside its range (its slots are 0, 1) */
	struct contrib b9 = a9;
	b9.slot = 2;
	contribute(&b9);
	expect_drop("job 9 slot 2", "bad_slot");
	b9.slot = 0xffff;
	contribute(&b9);
	expect_drop("job 9 slot 65535", "bad_slot");
	/* job 9's worker cannot pose as job 7's worker 0 (address check) */
	uint8_t buf[PLEN];
	build(buf, &a7);
	inject_from(buf, PLEN, 9, 0);
	expect_drop("job 9's host sends as job 7 worker 0", "spoofed");
	/* job 7 worker 1 from worker 0's address */
	struct contrib s7 = a7;
	s7.worker = 1;
	build(buf, &s7);
	inject_from(buf, PLEN, 7, 0);
	expect_drop("worker 1 from worker 0's address", "spoofed");
	/* the drops changed nothing: job 7 completes with 1+2+3 contributions */
	s7.base = 2;
	contribute(&s7);
	expect_consumed("job 7 w1");
	s7.worker = 2;
	s7.base = 3;
	contribute(&s7);
	expect_multicast7("job 7 complete, untouched by job 9", 0, 0, 0, 0, 6, 0);
}

/* Every malformed packet is a named, counted drop. */
static void test_malformed(void **state)
{
	uint8_t buf[PLEN + 8];
	struct contrib c = { .job = 7, .slot = 0, .round = 0, .worker = 0, .base = 1, .step = 1 };
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(buf + 8);
	static const struct {
		const char *desc;
		int field;    /* what to break */
		const char *reason;
	} cases[] = {
		{ "empty", 0, "too_short" },
		{ "39 bytes", 1, "too_short" },
		{ "magic 0x1F", 2, "bad_magic" },
		{ "version 2", 3, "bad_version" },
		{ "service paxos", 4, "wrong_service" },
		{ "a result sent to the switch", 5, "is_result" },
		{ "op 0", 6, "bad_op" },
		{ "op 0x42", 7, "bad_op" },
		{ "k = 63", 8, "bad_length" },
		{ "one element short", 9, "bad_length" },
		{ "four bytes trailing", 10, "bad_length" },
		{ "k = 0, header only", 11, "bad_length" },
		{ "job 8 does not exist", 12, "unknown_job" },
		{ "worker 3 of 3", 13, "bad_worker" },
		{ "worker 255", 14, "bad_worker" },
		{ "slot 2 of 2", 15, "bad_slot" },
		{ "ver 1 with round 0", 16, "bad_ver" },
		{ "ver 2", 17, "bad_ver" },
		{ "right address, wrong UDP port", 18, "spoofed" },
	};
	struct innet_prog_stats before;
	innet_cp_stats(cp, &before);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t len = build(buf, &c);
		struct innet_addr src = { test_ip(11), 6001 };
		switch (cases[i].field) {
		case 0: len = 0; break;
		case 1: len = INNET_AGG_HDR_LEN - 1; break;
		case 2: buf[0] = 0x1F; break;
		case 3: buf[1] = 2; break;
		case 4: buf[2] = INNET_SVC_PAXOS; break;
		case 5: a->op = INNET_AGG_RESULT; break;
		case 6: a->op = 0; break;
		case 7: a->op = 0x42; break;
		case 8: a->k = htons(K - 1); len -= 4; break;
		case 9: len -= 4; break;
		case 10: len += 4; break;
		case 11: a->k = 0; len = INNET_AGG_HDR_LEN; break;
		case 12: a->job = htons(8); break;
		case 13: a->worker = 3; break;
		case 14: a->worker = 255; break;
		case 15: a->slot = htons(2); break;
		case 16: a->ver = 1; break;
		case 17: a->ver = 2; break;
		case 18: src.udp = 6002; break;
		}
		memset(&res, 0xAB, sizeof(res));
		assert_int_equal(innet_switch_inject(sw, 0, UDP_AGG, &src, buf, len, &res), 0);
		expect_drop(cases[i].desc, cases[i].reason);
	}
	struct innet_prog_stats after;
	innet_cp_stats(cp, &after);
	assert_int_equal(after.actions[INNET_DROP] - before.actions[INNET_DROP],
			 sizeof(cases) / sizeof(cases[0]));
	assert_int_equal(after.drops[INNET_DROP_PROGRAM + 11] - before.drops[INNET_DROP_PROGRAM + 11], 1);
	assert_string_equal(innet_cp_drop_reason_name(cp, INNET_DROP_PROGRAM + 11), "spoofed");
	/* and the slot is untouched: a valid round 0 from all three completes
	 * with exactly their sum */
	for (uint8_t w = 0; w < 3; w++) {
		c.worker = w;
		contribute(&c);
	}
	expect_multicast7("after the malformed packets", 0, 0, 0, 0, 3, 3);
}

/* A contribution that finds the copy closed but not yet emitted (another
 * worker is still adding, or the timer closed it meanwhile) is dropped as
 * pending; the worker's retransmission gets the result. Staged by writing
 * the state register the way such a moment looks. */
static void test_pending(void **state)
{
	struct contrib c = { .job = 7, .slot = 1, .round = 0, .worker = 0, .base = 10, .step = 0 };
	contribute(&c);
	expect_consumed("w0");
	int rs = innet_cp_reg_find(cp, "state");
	assert_true(rs >= 0);
	uint64_t st;
	uint32_t idx = 2 * 1 + 0; /* global slot 1, copy 0 */
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)rs, idx, &st), 0);
	assert_int_equal(st, 0x1); /* tag 0, open, w0's bit */
	/* w1 claimed but has not finished adding; the timer closed the round */
	assert_int_equal(innet_cp_reg_write(cp, (unsigned)rs, idx, st | 0x2 | (1ull << 48)), 0);
	c.worker = 2;
	contribute(&c);
	expect_drop("w2 while closed, not emitted", "pending");
	c.worker = 1;
	contribute(&c);
	expect_drop("w1 (claimed) retransmits while pending", "pending");
	/* restore: w1 never really claimed */
	assert_int_equal(innet_cp_reg_write(cp, (unsigned)rs, idx, st), 0);
	contribute(&c);
	expect_consumed("w1");
	c.worker = 2;
	contribute(&c);
	expect_multicast7("complete", 1, 0, 0, 0, 30, 0);
}

/* The two accumulator banks: a contributor that finds bank A held by
 * another switch thread (staged: the adder register's EXCL bit set by
 * hand) adds atomically into bank B; the result is A + B, wrapping; the
 * reset for the copy's next use zeroes B and the adder word. */
static void test_two_banks(void **state)
{
	int ra = innet_cp_reg_find(cp, "adder"), rb = innet_cp_reg_find(cp, "values_b");
	assert_true(ra >= 0 && rb >= 0);
	uint32_t idx = 2 * 0 + 0; /* job 7 slot 0 = global slot 0, copy 0 */
	uint64_t v;
	struct contrib c = { .job = 7, .slot = 0, .round = 0, .worker = 0, .base = 1000, .step = 1 };
	contribute(&c);
	expect_consumed("w0 into bank A");
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)ra, idx, &v), 0);
	assert_int_equal(v, 0); /* EXCL released, B unused */
	assert_int_equal(innet_cp_reg_write(cp, (unsigned)ra, idx, 0x1), 0); /* "another thread" */
	c = (struct contrib){ .job = 7, .slot = 0, .round = 0, .worker = 1, .base = INT32_MAX, .step = -3 };
	contribute(&c);
	expect_consumed("w1 into bank B");
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)ra, idx, &v), 0);
	assert_int_equal(v, 0x3); /* EXCL (not ours), B used */
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)rb, idx * K + 5, &v), 0);
	assert_int_equal(v, (uint32_t)(INT32_MAX - 15));
	assert_int_equal(innet_cp_reg_write(cp, (unsigned)ra, idx, 0x2), 0); /* "it" releases A */
	c = (struct contrib){ .job = 7, .slot = 0, .round = 0, .worker = 2, .base = -5, .step = 7 };
	contribute(&c);
	expect_multicast7("A + B, wrapped", 0, 0, 0, 0, 1000ll + INT32_MAX - 5, 1 - 3 + 7);
	/* round 1 (copy 1) completes: copy 0 is reset for round 2 */
	for (uint8_t w = 0; w < 3; w++) {
		c = (struct contrib){ .job = 7, .slot = 0, .round = 1, .worker = w, .base = 1, .step = 0 };
		contribute(&c);
	}
	expect_multicast7("round 1", 0, 1, 0, 0, 3, 0);
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)ra, idx, &v), 0);
	assert_int_equal(v, 0);
	for (uint32_t i = 0; i < K; i++) {
		assert_int_equal(innet_cp_reg_read(cp, (unsigned)rb, idx * K + i, &v), 0);
		assert_int_equal(v, 0);
	}
	/* round 2 in copy 0: nothing left over from round 0 */
	for (uint8_t w = 0; w < 3; w++) {
		c = (struct contrib){ .job = 7, .slot = 0, .round = 2, .worker = w, .base = -w, .step = 2 };
		contribute(&c);
	}
	expect_multicast7("round 2 after the reset", 0, 2, 0, 0, -3, 6);
}

/* ---- straggler timer, on a started switch with real member sockets ---- */

static int sock_bind(uint32_t ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static ssize_t recv_wait(int fd, void *buf, size_t len, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	return recv(fd, buf, len, 0);
}

static void test_straggler_timer(void **state)
{
	int fd[2] = { sock_bind(test_ip(21), 6011), sock_bind(test_ip(22), 6012) };
	assert_int_equal(test_start(sw), 0);
	uint8_t buf[INNET_PKT_MAX];

	/* job 9 slot 1 round 0: only worker 0 contributes; after 30 ms the
	 * timer multicasts the partial sum with bitmap 0b01 */
	struct contrib c = { .job = 9, .slot = 1, .round = 0, .worker = 0, .offset = 64, .exp = 131,
			     .base = 40, .step = 1 };
	contribute(&c);
	expect_consumed("job 9 w0");
	for (int w = 0; w < 2; w++) {
		ssize_t n = recv_wait(fd[w], buf, sizeof(buf), 2000);
		if (n < 0)
			fail_msg("worker %d: no partial result within 2 s", w);
		check_result("timer's partial result", buf, (uint32_t)n, INNET_AGG_PARTIAL, 9, 1, 0, 0xff, 64,
			     131, 0x1, 40, 1);
	}
	/* the straggler's late packet: answered with the partial result, to it
	 * only; its elements are not added */
	c.worker = 1;
	c.base = 7777;
	c.exp = 200;
	contribute(&c);
	expect_reply("straggler's late packet", INNET_AGG_PARTIAL, 9, 1, 0, 1, 64, 131, 0x1, 40, 1);
	contribute(&c);
	expect_reply("and again", INNET_AGG_PARTIAL, 9, 1, 0, 1, 64, 131, 0x1, 40, 1);

	/* worker 1 missed the round: the timer put it out of the run (job 9's
	 * `run` register, at its group 1: OUT bit 1), so the next rounds close on
	 * worker 0 alone, at once, without waiting for the timer */
	assert_int_equal(reg_get("run", 1), 0x2);
	/* ... and deaf (job 9's `deaf` register, generation 0: bit 1): round 0's
	 * result went to both (it told worker 1 it was left out), the next
	 * rounds' go to the others only (group "all but 1") */
	assert_int_equal(reg_get("deaf", 1), 0x2);
	struct contrib d = { .job = 9, .slot = 1, .round = 1, .worker = 0, .base = 1, .step = 0 };
	contribute(&d);
	if (res.action != INNET_MULTICAST || res.n_out != 1)
		fail_msg("round 1, worker 0 alone: want multicast to worker 0 only (worker 1 deaf), got %s to %u",
			 innet_action_name(res.action), res.n_out);
	assert_int_equal(res.out[0].dst.ip, test_ip(21));
	assert_int_equal(res.out[0].dst.udp, 6011);
	check_result("round 1 closed on the run's members", res.out[0].data, res.out[0].len, INNET_AGG_PARTIAL,
		     9, 1, 1, 0xff, 0, 0, 0x1, 1, 0);
	/* worker 1, in step again (it took round 0's result), is late for round
	 * 1 too: the partial result, to it only */
	d.worker = 1;
	d.base = 5;
	contribute(&d);
	expect_reply("worker 1 late for round 1", INNET_AGG_PARTIAL, 9, 1, 1, 1, 0, 0, 0x1, 1, 0);
	/* round 2: worker 1 in time: the round closes with both, and worker 1,
	 * in step with the others again, is back in the run */
	d.round = 2;
	contribute(&d);
	expect_consumed("round 2 worker 1");
	assert_int_equal(reg_get("run", 1), 0x2); /* out until the round goes out with it */
	d.worker = 0;
	d.base = 1;
	contribute(&d);
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 2); /* to both: worker 1 is heard from again */
	check_result("round 2 complete", res.out[0].data, res.out[0].len, INNET_AGG_COMPLETE, 9, 1, 2, 0xff, 0,
		     0, 0x3, 6, 0);
	assert_int_equal(reg_get("run", 1), 0); /* back in */
	assert_int_equal(reg_get("deaf", 1), 0); /* and not deaf */
	/* a straggler two rounds behind: its copy now holds round 2 */
	contribute(&c);
	expect_stale("round 0 after round 2 completed", 9, 1, 0, 1, 2);
	/* the timers of rounds 1 and 2 were cancelled (and would be ignored
	 * anyway): nothing more arrives */
	assert_int_equal(recv_wait(fd[0], buf, sizeof(buf), 100), -1);

	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	assert_int_equal(st.timer_fires, 1);
	assert_int_equal(st.emitted, 1);
	innet_switch_stop(sw);
	close(fd[0]);
	close(fd[1]);
}

/* JOIN: a JOIN packet of `want` records for slots from `slot`. */
static uint32_t build_join(uint8_t *buf, uint16_t job, uint8_t worker, uint16_t slot, uint16_t want)
{
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
	*a = (struct innet_agg_hdr){ .op = INNET_AGG_JOIN, .job = htons(job), .slot = htons(slot),
				     .worker = worker, .k = htons(want) };
	memset(a + 1, 0, 12u * want);
	return INNET_AGG_HDR_LEN + 12u * want;
}

/* Send JOIN from job 7's worker w; expect a JOINED of the same length with
 * n records; recs[i] = { state, offset, call } expected per record. */
static void expect_joined(const char *why, uint8_t w, uint16_t slot, uint16_t want, uint16_t n,
			  const uint32_t (*recs)[3])
{
	uint8_t buf[INNET_AGG_HDR_LEN + 12 * 8];
	uint32_t len = build_join(buf, 7, w, slot, want);
	inject_from(buf, len, 7, w);
	if (res.action != INNET_REFLECT)
		fail_msg("%s: want reflect, got %s (%s)", why, innet_action_name(res.action),
			 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].dst.ip, test_ip(11u + w));
	assert_int_equal(res.out[0].dst.udp, 6001u + w);
	assert_int_equal(res.out[0].len, len); /* never larger than the request */
	const struct innet_agg_hdr *a = (const struct innet_agg_hdr *)(res.out[0].data + 8);
	assert_int_equal(a->op, INNET_AGG_JOINED);
	assert_int_equal(a->status, 0);
	assert_int_equal(ntohs(a->job), 7);
	assert_int_equal(ntohs(a->slot), slot);
	assert_int_equal(a->worker, w);
	assert_int_equal(ntohs(a->k), n);
	assert_int_equal(ntohl(a->round), want_gen); /* the job's generation */
	assert_int_equal(a->gen, want_gen);
	assert_int_equal(be64toh(a->bitmap), 0x7); /* every member in the run */
	const uint8_t *r = res.out[0].data + INNET_AGG_HDR_LEN;
	for (uint32_t i = 0; i < want; i++) {
		struct innet_agg_join_rec jr;
		memcpy(&jr, r + 12 * i, sizeof(jr));
		uint32_t got[3] = { ntohl(jr.state), ntohl(jr.offset), ntohl(jr.call) };
		for (int f = 0; f < 3; f++) {
			uint32_t want_v = i < n ? recs[i][f] : 0;
			if (got[f] != want_v)
				fail_msg("%s: record %u field %d = 0x%x, want 0x%x", why, i, f, got[f], want_v);
		}
	}
}

/* JOIN answers, per slot, the newest finished round with the offset and the
 * call its contributors sent; rounds in progress do not count; records past
 * the job's slots are zero; the result echoes the call. Bad JOINs dropped. */
static void test_join(void **state)
{
	static const uint32_t none[2][3] = { { 0, 0, 0 }, { 0, 0, 0 } };
	expect_joined("fresh job: nothing finished", 0, 0, 4, 2, none);

	uint8_t buf[PLEN];
	for (uint8_t w = 0; w < 3; w++) {
		struct contrib c = { .job = 7, .slot = 0, .round = 0, .worker = w, .offset = 0, .base = 1, .step = 0 };
		build(buf, &c);
		((struct innet_agg_hdr *)(buf + 8))->call = htonl(5);
		inject_from(buf, PLEN, 7, w);
	}
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(ntohl(((const struct innet_agg_hdr *)(res.out[0].data + 8))->call), 5);
	static const uint32_t r0[2][3] = { { INNET_AGG_JOIN_DONE | 0, 0, 5 }, { 0, 0, 0 } };
	expect_joined("slot 0 round 0 done (call 5)", 1, 0, 2, 2, r0);

	for (uint8_t w = 0; w < 3; w++) {
		struct contrib c = { .job = 7, .slot = 0, .round = 1, .worker = w, .offset = 128, .base = 1, .step = 0 };
		build(buf, &c);
		((struct innet_agg_hdr *)(buf + 8))->call = htonl(6);
		inject_from(buf, PLEN, 7, w);
	}
	assert_int_equal(res.action, INNET_MULTICAST);
	/* in progress, not finished: slot 0 round 2 and slot 1 round 0, one claim each */
	struct contrib p2 = { .job = 7, .slot = 0, .round = 2, .worker = 0, .offset = 256, .base = 1, .step = 0 };
	contribute(&p2);
	expect_consumed("slot 0 round 2 w0");
	struct contrib p1 = { .job = 7, .slot = 1, .round = 0, .worker = 2, .offset = 64, .base = 1, .step = 0 };
	contribute(&p1);
	expect_consumed("slot 1 round 0 w2");
	static const uint32_t r1[2][3] = { { INNET_AGG_JOIN_DONE | 1, 128, 6 }, { 0, 0, 0 } };
	expect_joined("slot 0: round 1 is the newest finished", 2, 0, 2, 2, r1);
	for (uint8_t w = 1; w < 3; w++) {
		p2.worker = w;
		contribute(&p2);
	}
	assert_int_equal(res.action, INNET_MULTICAST);
	static const uint32_t r2[1][3] = { { INNET_AGG_JOIN_DONE | 2, 256, 0 } };
	expect_joined("slot 0 round 2 done; one record asked", 0, 0, 1, 1, r2);
	static const uint32_t s1[1][3] = { { 0, 0, 0 } };
	expect_joined("from slot 1: 3 asked, 1 filled", 0, 1, 3, 1, s1);

	/* bad JOINs: counted drops, nothing answered */
	uint8_t jb[INNET_AGG_HDR_LEN + 24];
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(jb + 8);
	uint32_t len = build_join(jb, 7, 0, 0, 2);
	struct innet_addr src = { test_ip(11), 6002 };
	memset(&res, 0xAB, sizeof(res));
	assert_int_equal(innet_switch_inject(sw, 0, UDP_AGG, &src, jb, len, &res), 0);
	expect_drop("JOIN from another worker's port", "spoofed");
	inject_from(jb, len - 12, 7, 0);
	expect_drop("JOIN shorter than its k records", "bad_length");
	a->k = 0;
	inject_from(jb, INNET_AGG_HDR_LEN, 7, 0);
	expect_drop("JOIN of 0 records", "bad_length");
	len = build_join(jb, 7, 0, 2, 2);
	inject_from(jb, len, 7, 0);
	expect_drop("JOIN from slot 2 of 2", "bad_slot");
	len = build_join(jb, 8, 0, 0, 2);
	inject_from(jb, len, 7, 0);
	expect_drop("JOIN for job 8", "unknown_job");
	len = build_join(jb, 7, 3, 0, 2);
	inject_from(jb, len, 7, 0);
	expect_drop("JOIN of worker 3 of 3", "bad_worker");
	len = build_join(jb, 7, 0, 0, 2);
	a->op = INNET_AGG_JOINED;
	inject_from(jb, len, 7, 0);
	expect_drop("a JOINED sent to the switch", "is_result");
}

/* A START, REJOIN or LEAVE of job 7's worker w with handle `nonce`; the
 * answer in res. */
static void run_ask(uint8_t op, uint8_t status, uint8_t w, uint32_t nonce)
{
	uint8_t buf[INNET_AGG_HDR_LEN + 12 * 2];
	uint32_t len = build_join(buf, 7, w, 0, 2);
	struct innet_agg_hdr *a = (struct innet_agg_hdr *)(buf + 8);
	a->op = op;
	a->status = status;
	a->offset = htonl(nonce);
	if (op == INNET_AGG_LEAVE) {
		a->k = 0;
		len = INNET_AGG_HDR_LEN;
	}
	inject_from(buf, len, 7, w);
}

/* A JOINED answer to job 7's worker w: status, generation, the members in
 * the run; its two records (slots 0, 1) are not checked here. */
static void expect_run(const char *why, uint8_t w, uint8_t status, uint32_t gen, uint64_t in)
{
	if (res.action != INNET_REFLECT)
		fail_msg("%s: want reflect, got %s (%s)", why, innet_action_name(res.action),
			 res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, res.drop_reason) : "-");
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].dst.ip, test_ip(11u + w));
	assert_int_equal(res.out[0].len, INNET_AGG_HDR_LEN + 24);
	const struct innet_agg_hdr *a = (const struct innet_agg_hdr *)(res.out[0].data + 8);
	if (a->op != INNET_AGG_JOINED || a->status != status || ntohl(a->round) != gen || a->gen != (uint8_t)gen ||
	    be64toh(a->bitmap) != in)
		fail_msg("%s: JOINED op %u status %u gen %u/%u in 0x%llx, want status %u gen %u in 0x%llx", why,
			 a->op, a->status, ntohl(a->round), a->gen, (unsigned long long)be64toh(a->bitmap), status,
			 gen, (unsigned long long)in);
	assert_int_equal(a->worker, w);
	assert_int_equal(ntohs(a->k), 2);
}

/* Runs: a job runs program after program on one switch (docs/aggregation.md,
 * "Runs"). A run dies mid-call (its rounds claimed, never finished); the
 * next run's STARTs wait until each member of the old run has started
 * again, the last one begins generation 1, which resets the job's slots;
 * then the new run sums from a clean state, and the old run's packets are
 * answered RESTARTED. A LEAVE takes a member out of the run: the rounds stop
 * waiting for it (an open one closes on a retransmission); a REJOIN puts it
 * back once it contributes in time. Malformed asks are counted drops. */
static void test_runs(void **state)
{
	char err[256];
	if (innet_switch_start(sw, err, sizeof(err)) != 0) /* the reset runs on the timer thread */
		fail_msg("start: %s", err);
	const uint64_t P = 1ull << 47; /* a handle waiting (PENDING) */
	const struct innet_agg_hdr *ah;
	/* run 1: three handles START on a fresh job: generation 0, every member in */
	for (uint8_t w = 0; w < 3; w++) {
		run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, w, 0xA0u + w);
		expect_run("run 1 START", w, INNET_AGG_JOINED_OK, 0, 0x7);
		assert_int_equal(reg_get("handles", w), 0xA0u + w); /* group 0: job 7; generation 0 */
	}
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, 0, 0xA0);
	expect_run("a START asked again: the same answer", 0, INNET_AGG_JOINED_OK, 0, 0x7);
	/* run 1 dies in its first call: round 0 of slot 0 claimed by workers 0
	 * and 1, slot 1 by worker 0; worker 2 never sends */
	struct contrib c = { .job = 7, .slot = 0, .round = 0, .worker = 0, .base = 1000, .step = 1 };
	contribute(&c);
	expect_consumed("run 1 w0 slot 0");
	c.worker = 1;
	contribute(&c);
	expect_consumed("run 1 w1 slot 0");
	c.slot = 1;
	c.worker = 0;
	contribute(&c);
	expect_consumed("run 1 w0 slot 1");

	/* run 2: each new handle's worker had a handle in generation 0, now
	 * gone: it is out, and waits for the others of run 1 */
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, 0, 0xB0);
	expect_run("run 2 w0 START: waits for 1 and 2", 0, INNET_AGG_JOINED_WAIT, 0, 0x6);
	assert_int_equal(reg_get("run", 0), 0x1);
	assert_int_equal(reg_get("handles", 0), P | 0xB0);
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, 0, 0xB0);
	expect_run("again: still waiting", 0, INNET_AGG_JOINED_WAIT, 0, 0x6);
	c = (struct contrib){ .job = 7, .slot = 0, .round = 0, .worker = 1, .base = 2000, .step = 1 };
	contribute(&c);
	expect_drop("run 1's w1 retransmits: its round still waits for w2", "duplicate");
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, 1, 0xB1);
	expect_run("run 2 w1 START", 1, INNET_AGG_JOINED_WAIT, 0, 0x4);
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, 2, 0xB2);
	/* (the answer's members: none while the reset runs, all once it is done
	 * — the timer thread may have finished it before the answer was made) */
	ah = (const struct innet_agg_hdr *)(res.out[0].data + 8);
	expect_run("run 2 w2 START: nobody of run 1 left: generation 1, being reset", 2, INNET_AGG_JOINED_WAIT, 1,
		   be64toh(ah->bitmap) == 0x7 ? 0x7 : 0);
	assert_int_equal(reg_get("handles", 2), (1ull << 32) | 0xB2);
	/* while the reset runs: contributions dropped, asks answered WAIT (the
	 * reset may be done already: then the first drop is not seen) */
	uint64_t run = reg_get("run", 0);
	if (run & (1ull << 63)) {
		assert_int_equal(run, (1ull << 63) | (1ull << 48));
		contribute(&c);
		/* (the timer thread may finish the reset between the read above and
		 * this packet: then run 1's contribution is answered RESTARTED) */
		if (res.action == INNET_REFLECT && !(reg_get("run", 0) & (1ull << 63)))
			assert_int_equal(res.n_out, 1);
		else
			expect_drop("a contribution while the job is reset", "resetting");
	}
	for (int t = 0; t < 2000 && (reg_get("run", 0) & (1ull << 63)); t++)
		usleep(1000);
	assert_int_equal(reg_get("run", 0), 1ull << 48); /* generation 1, every member in */
	/* the job's copies are a fresh switch's: round 0, open, zero sums */
	for (uint32_t idx = 0; idx < 4; idx++) {
		assert_int_equal(reg_get("state", idx), 0);
		assert_int_equal(reg_get("count", idx), 0);
		assert_int_equal(reg_get("values", idx * K + 5), 0);
	}
	want_gen = 1;
	for (uint8_t w = 0; w < 3; w++) {
		run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_START, w, 0xB0u + w);
		expect_run("run 2 START after the reset", w, INNET_AGG_JOINED_OK, 1, 0x7);
		assert_int_equal(reg_get("handles", w), (1ull << 32) | (0xB0u + w));
	}
	/* run 1's packets: RESTARTED (header only, the job's generation now) */
	contribute(&c);
	assert_int_equal(res.action, INNET_REFLECT);
	assert_int_equal(res.out[0].len, INNET_AGG_HDR_LEN);
	ah = (const struct innet_agg_hdr *)(res.out[0].data + 8);
	assert_int_equal(ah->op, INNET_AGG_RESULT);
	assert_int_equal(ah->status, INNET_AGG_RESTARTED);
	assert_int_equal(ah->gen, 1);
	assert_int_equal(ntohl(ah->round), 0);
	assert_int_equal(ah->worker, 1);
	/* run 2 sums from scratch: nothing of run 1's claims */
	for (uint8_t w = 0; w < 3; w++) {
		c = (struct contrib){ .job = 7, .slot = 0, .round = 0, .worker = w, .base = 10 * (w + 1), .step = 1,
				      .gen = 1 };
		contribute(&c);
		if (w < 2)
			expect_consumed("run 2 round 0");
	}
	expect_multicast7("run 2 round 0: exact", 0, 0, 0, 0, 60, 3);

	/* LEAVE: worker 2 is done; an open round stops waiting for it */
	run_ask(INNET_AGG_LEAVE, 0, 2, 0xA2);
	expect_drop("LEAVE of run 1's handle", "not_registered");
	run_ask(INNET_AGG_LEAVE, 0, 2, 0);
	expect_drop("LEAVE without a handle", "not_registered");
	uint8_t lb[INNET_AGG_HDR_LEN + 12];
	uint32_t ll = build_join(lb, 7, 2, 0, 1);
	((struct innet_agg_hdr *)(lb + 8))->op = INNET_AGG_LEAVE;
	((struct innet_agg_hdr *)(lb + 8))->offset = htonl(0xB2);
	inject_from(lb, ll, 7, 2);
	expect_drop("LEAVE with records", "bad_length");
	c = (struct contrib){ .job = 7, .slot = 0, .round = 1, .worker = 0, .base = 10, .step = 1, .gen = 1 };
	contribute(&c);
	expect_consumed("round 1 w0");
	c.worker = 1;
	c.base = 20;
	contribute(&c);
	expect_consumed("round 1 w1: waits for w2");
	run_ask(INNET_AGG_LEAVE, 0, 2, 0xB2);
	expect_consumed("LEAVE of w2");
	assert_int_equal(reg_get("run", 0), (1ull << 48) | 0x4);
	assert_int_equal(reg_get("deaf", 0), (1ull << 48) | 0x4); /* gone: no more results to it */
	c.worker = 0;
	c.base = 10;
	contribute(&c);
	expect_multicast7_to("w0's retransmission closes round 1 on the run's members", 0x3, INNET_AGG_PARTIAL, 0x3,
			     0, 1, 0, 0, 30, 2);
	c = (struct contrib){ .job = 7, .slot = 0, .round = 2, .worker = 0, .base = 1, .step = 0, .gen = 1 };
	contribute(&c);
	expect_consumed("round 2 w0");
	c.worker = 1;
	contribute(&c);
	expect_multicast7_to("round 2 closes at once without w2", 0x3, INNET_AGG_PARTIAL, 0x3, 0, 2, 0, 0, 2, 0);

	/* REJOIN: a new handle of worker 2 joins the run where it is; out until
	 * it contributes in time, then the rounds wait for it again */
	run_ask(INNET_AGG_JOIN, INNET_AGG_JOIN_REJOIN, 2, 0xC2);
	expect_run("w2 REJOIN", 2, INNET_AGG_JOINED_OK, 1, 0x3);
	const struct innet_agg_join_rec *jr = (const struct innet_agg_join_rec *)(res.out[0].data + INNET_AGG_HDR_LEN);
	assert_int_equal(ntohl(jr[0].state), INNET_AGG_JOIN_DONE | 2);
	assert_int_equal(reg_get("handles", 2), (1ull << 32) | 0xC2);
	assert_int_equal(reg_get("deaf", 0), 1ull << 48); /* heard from: the results go to it again */
	c = (struct contrib){ .job = 7, .slot = 0, .round = 3, .worker = 2, .base = 3, .step = 0, .gen = 1 };
	contribute(&c);
	expect_consumed("round 3 w2 in time");
	for (uint8_t w = 0; w < 2; w++) {
		c.worker = w;
		contribute(&c);
	}
	expect_multicast7("round 3: all three again", 0, 3, 0, 0, 9, 0);
	assert_int_equal(reg_get("run", 0), 1ull << 48); /* w2 back in */

	/* malformed asks */
	run_ask(INNET_AGG_JOIN, 2, 0, 0xB0);
	expect_drop("JOIN with status 2", "bad_op");
	/* on XDP, every ask, leave and contribution was handled in eBPF (the
	 * reset ran on the timer thread, in user space) */
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	if (test_target_xdp())
		assert_int_equal(st.xdp_rx_pkts, st.rx_pkts);
	innet_switch_stop(sw);
}

/* Jumbo contributions (k = 2294, a 9216-byte datagram) do not fit one XDP
 * buffer: on the XDP target they go to the user-space engine, while a JOIN
 * (small) is answered by the eBPF program — on the same registers. The
 * round the user-space engine completed is the one the JOIN reports. */
static void test_jumbo(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-agg-jumbo");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = test_ip(1);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "agg");
	c.progs[0].program = innet_program_find("agg");
	c.progs[0].udp[0] = UDP_AGG;
	c.progs[0].n_udp = 1;
	unsigned p = (unsigned)getpid() & 0xffu;
	char a[256];
	snprintf(a, sizeof(a), "{\"k\": %u, \"slots\": 2, \"jobs\": [{\"id\": 3, \"workers\": 2, \"slots\": 2, "
		 "\"members\": [\"127.207.%u.11:6001\", \"127.207.%u.12:6002\"]}]}", INNET_AGG_K_MAX, p, p);
	c.progs[0].args_json = a;
	char err[256];
	test_target(&c);
	struct innet_switch *s = innet_switch_create(&c, err, sizeof(err));
	if (s == NULL)
		fail_msg("create: %s", err);
	struct innet_cp *jc = innet_switch_prog(s, "agg");
	const uint32_t len = INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX;
	static uint8_t buf[INNET_PKT_MAX];
	printf("two workers, k = %u (%u-byte datagrams), slot 1 round 0\n", INNET_AGG_K_MAX, len);
	for (uint8_t w = 0; w < 2; w++) {
		struct innet_hdr *h = (struct innet_hdr *)buf;
		struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(h + 1);
		*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
		*ah = (struct innet_agg_hdr){ .op = INNET_AGG_CONTRIB, .job = htons(3), .slot = htons(1), .worker = w,
					      .offset = htonl(4096), .call = htonl(11), .k = htons(INNET_AGG_K_MAX) };
		uint32_t *el = (uint32_t *)(ah + 1);
		for (uint32_t i = 0; i < INNET_AGG_K_MAX; i++)
			el[i] = htonl((uint32_t)((int32_t)i * (w ? -3 : 1) + 1000 * w));
		struct innet_addr src = { test_ip(11u + w), (uint16_t)(6001 + w) };
		memset(&res, 0xAB, sizeof(res));
		assert_int_equal(innet_switch_inject(s, 0, UDP_AGG, &src, buf, len, &res), 0);
	}
	/* the second completed the round: its sums multicast, el[i] = 1000 - 2i */
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 2);
	assert_int_equal(res.out[0].len, len);
	const uint32_t *got = (const uint32_t *)(res.out[0].data + INNET_AGG_HDR_LEN);
	for (uint32_t i = 0; i < INNET_AGG_K_MAX; i++)
		assert_int_equal((int32_t)ntohl(got[i]), 1000 - 2 * (int32_t)i);
	printf("JOIN for slots 0-1 from worker 0: slot 1 reports round 0 done, offset 4096, call 11\n");
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
	*ah = (struct innet_agg_hdr){ .op = INNET_AGG_JOIN, .job = htons(3), .slot = 0, .worker = 0, .k = htons(2) };
	memset(ah + 1, 0, 24);
	struct innet_addr src = { test_ip(11), 6001 };
	memset(&res, 0xAB, sizeof(res));
	assert_int_equal(innet_switch_inject(s, 0, UDP_AGG, &src, buf, INNET_AGG_HDR_LEN + 24, &res), 0);
	assert_int_equal(res.action, INNET_REFLECT);
	const struct innet_agg_join_rec *r = (const struct innet_agg_join_rec *)(res.out[0].data + INNET_AGG_HDR_LEN);
	assert_int_equal(ntohl(r[0].state), 0);
	assert_int_equal(ntohl(r[1].state), INNET_AGG_JOIN_DONE | 0);
	assert_int_equal(ntohl(r[1].offset), 4096);
	assert_int_equal(ntohl(r[1].call), 11);
	struct innet_prog_stats st;
	innet_cp_stats(jc, &st);
	printf("%llu packets, %llu handled in XDP\n", (unsigned long long)st.rx_pkts,
	       (unsigned long long)st.xdp_rx_pkts);
	assert_int_equal(st.rx_pkts, 3);
	/* on XDP: the JOIN in eBPF, the jumbo contributions in user space */
	assert_int_equal(st.xdp_rx_pkts, test_target_xdp() ? 1 : 0);
	innet_switch_destroy(s);
}

static void test_settings(void **state)
{
	static const struct {
		const char *args;
		const char *msg; /* NULL: accepted */
	} cases_s[] = {
		{ NULL, NULL },
		{ "{\"k\": 256, \"slots\": 4096}", NULL },
		{ "{\"k\": 2294}", NULL },  /* INNET_AGG_K_MAX: a 9216-byte datagram */
		{ "{\"k\": 2295}", "out of range" },
		{ "{\"k\": 0}", "out of range" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 48}]}", NULL },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 49}]}", "workers must be in [1, 48]" },
		{ "{\"jobs\": [{\"id\": 1}]}", "needs 'id' and 'workers'" },
		{ "{\"jobs\": {\"id\": 1}}", "must be an array" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 2, \"slot\": 3}]}", "unknown key 'slot'" },
		{ "{\"slots\": 8, \"jobs\": [{\"id\": 1, \"workers\": 2, \"slots\": 9}]}", "beyond the pool" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 2, \"slots\": 4}, {\"id\": 2, \"workers\": 2, "
		  "\"slots\": 4, \"slot_base\": 3}]}", "overlap" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 2}, {\"id\": 1, \"workers\": 2}]}", "defined twice" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 2, \"members\": [\"127.0.0.1:5\"]}]}",
		  "must list all 2 workers" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 1, \"members\": [\"127.0.0.1\"]}]}", "members[0]" },
		{ "{\"jobs\": [{\"id\": 1, \"workers\": 1, \"members\": [\"9@127.0.0.1:5\"]}]}",
		  "uses port 9" },
		{ "{\"max_jobs\": 1, \"jobs\": [{\"id\": 1, \"workers\": 1}, {\"id\": 2, \"workers\": 1}]}",
		  "more than max_jobs" },
		{ "{\"kk\": 4}", "unknown setting 'kk'" },
	};
	for (size_t i = 0; i < sizeof(cases_s) / sizeof(cases_s[0]); i++) {
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 1;
		c.ports[0].ip = test_ip(40);
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "agg");
		c.progs[0].program = innet_program_find("agg");
		c.progs[0].udp[0] = UDP_AGG + 1;
		c.progs[0].n_udp = 1;
		c.progs[0].args_json = (char *)cases_s[i].args;
		char err[256] = "";
		test_target(&c);
		struct innet_switch *s = innet_switch_create(&c, err, sizeof(err));
		if (cases_s[i].msg == NULL) {
			if (s == NULL)
				fail_msg("%s: %s", cases_s[i].args ? cases_s[i].args : "(none)", err);
			innet_switch_destroy(s);
		} else {
			if (s != NULL) {
				innet_switch_destroy(s);
				fail_msg("%s: accepted", cases_s[i].args);
			}
			/* init's errors go to stderr, setup's into err */
			if (strstr(err, cases_s[i].msg) == NULL && strcmp(cases_s[i].msg, "uses port 9") != 0)
				fail_msg("%s: want \"%s\", got \"%s\"", cases_s[i].args, cases_s[i].msg, err);
		}
	}
}

int main(void)
{
	test_target_require();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_slot_life, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_banks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_straggler_timer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_join, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runs, setup, teardown),
		cmocka_unit_test(test_jumbo),
		cmocka_unit_test(test_settings),
	};
	if (getenv("AGG_TEST") != NULL)
		cmocka_set_test_filter(getenv("AGG_TEST")); /* one test, when debugging */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
