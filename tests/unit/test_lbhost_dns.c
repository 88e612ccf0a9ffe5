/*
 * test_lbhost_dns.c — the DNS messages of the load-balancer host tools
 * (src/lbhost/dns.c) and the agent's decision model (src/lbhost/agent.c):
 * a query round-trips through the question parser and the answer builder
 * into the reply parser; bad names are refused; malformed questions
 * (truncations at every length, long labels, compression, qdcount 0) are
 * -EBADMSG and never read out of bounds (run under ASan); zone matching;
 * the busy bit's hysteresis and the graded level; sequence starts increase.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "unit/testutil.h"
#include "lbhost/dns.h"
#include "lbhost/lbhost.h"

static void test_roundtrip(void **state)
{
	(void)state;
	uint8_t q[LBH_DNS_MSG_MAX], a[LBH_DNS_MSG_MAX];
	int n = lbh_dns_build_query(q, sizeof(q), 0xbeef, "WWW.Lb.Test.", LBH_DNS_TYPE_A, true);
	assert_int_equal(n, 12 + 13 + 4);
	struct lbh_dns_question qq;
	assert_int_equal(lbh_dns_parse_question(q, (size_t)n, &qq), 0);
	assert_int_equal(qq.id, 0xbeef);
	assert_string_equal(qq.name, "www.lb.test");
	assert_int_equal(qq.qtype, LBH_DNS_TYPE_A);
	assert_int_equal(qq.qclass, LBH_DNS_CLASS_IN);
	assert_int_equal(qq.end, (size_t)n);
	assert_true(qq.flags & LBH_DNS_RD);

	int m = lbh_dns_build_answer(q, &qq, a, sizeof(a), LBH_DNS_NOERROR, 0xc0000202, 60);
	assert_int_equal(m, n + 16);
	struct lbh_dns_reply r;
	assert_int_equal(lbh_dns_parse_reply(a, (size_t)m, &r), 0);
	assert_int_equal(r.id, 0xbeef);
	assert_int_equal(r.rcode, 0);
	assert_int_equal(r.ancount, 1);
	assert_int_equal(r.a_addr, 0xc0000202);
	assert_true(r.flags & LBH_DNS_AA);
	assert_true(r.flags & LBH_DNS_RD);

	m = lbh_dns_build_answer(q, &qq, a, sizeof(a), LBH_DNS_NXDOMAIN, 0, 0);
	assert_int_equal(m, n);
	assert_int_equal(lbh_dns_parse_reply(a, (size_t)m, &r), 0);
	assert_int_equal(r.rcode, LBH_DNS_NXDOMAIN);
	assert_int_equal(r.a_addr, 0);
	/* A query is not a reply. */
	assert_int_equal(lbh_dns_parse_reply(q, (size_t)n, &r), -EBADMSG);
	/* Too small a buffer. */
	assert_int_equal(lbh_dns_build_answer(q, &qq, a, 20, LBH_DNS_NOERROR, 1, 1), -ENOSPC);
	assert_int_equal(lbh_dns_build_query(q, 20, 1, "www.lb.test", 1, false), -ENOSPC);
}

static void test_bad_names(void **state)
{
	(void)state;
	uint8_t q[LBH_DNS_MSG_MAX];
	char longlabel[80];
	memset(longlabel, 'a', 64);
	longlabel[64] = '\0';
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, longlabel, 1, false), -EINVAL);
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, "a..b", 1, false), -EINVAL);
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, ".a", 1, false), -EINVAL);
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, "a..", 1, false), -EINVAL);
	/* The root is a valid name. */
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, "", 1, false), 12 + 1 + 4);
	char huge[300];
	memset(huge, 'a', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	for (size_t i = 50; i < sizeof(huge) - 1; i += 51)
		huge[i] = '.';
	assert_int_equal(lbh_dns_build_query(q, sizeof(q), 1, huge, 1, false), -EINVAL);
}

static void test_malformed_questions(void **state)
{
	(void)state;
	uint8_t q[LBH_DNS_MSG_MAX];
	int n = lbh_dns_build_query(q, sizeof(q), 7, "abc.lb.test", LBH_DNS_TYPE_A, false);
	struct lbh_dns_question qq;
	/* Every truncation fails cleanly; each copy is exactly that long so ASan sees overreads. */
	for (int len = 0; len < n; len++) {
		uint8_t *c = malloc(len ? (size_t)len : 1);
		memcpy(c, q, (size_t)len);
		assert_int_equal(lbh_dns_parse_question(c, (size_t)len, &qq), -EBADMSG);
		if (len >= 12)
			assert_int_equal(qq.id, 7);
		struct lbh_dns_reply r;
		lbh_dns_parse_reply(c, (size_t)len, &r);
		free(c);
	}
	uint8_t bad[64];
	memcpy(bad, q, (size_t)n);
	bad[5] = 0; /* qdcount 0 */
	assert_int_equal(lbh_dns_parse_question(bad, (size_t)n, &qq), -EBADMSG);
	memcpy(bad, q, (size_t)n);
	bad[12] = 0xc0; /* a compression pointer in a question */
	assert_int_equal(lbh_dns_parse_question(bad, (size_t)n, &qq), -EBADMSG);
	memcpy(bad, q, (size_t)n);
	bad[12] = 64; /* label longer than 63 */
	assert_int_equal(lbh_dns_parse_question(bad, (size_t)n, &qq), -EBADMSG);
	/* A name over 255 bytes on the wire. */
	uint8_t big[LBH_DNS_MSG_MAX];
	memset(big, 0, sizeof(big));
	big[5] = 1;
	size_t o = 12;
	for (int i = 0; i < 5; i++) {
		big[o++] = 63;
		memset(big + o, 'x', 63);
		o += 63;
	}
	big[o++] = 0;
	o += 4;
	assert_int_equal(lbh_dns_parse_question(big, o, &qq), -EBADMSG);
	/* Random garbage never crashes the reply parser. */
	uint64_t s = 42;
	for (int i = 0; i < 20000; i++) {
		uint8_t g[48];
		for (size_t k = 0; k < sizeof(g); k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			g[k] = (uint8_t)(s >> 56);
		}
		g[2] |= 0x80;
		size_t len = (size_t)(s >> 8) % sizeof(g);
		struct lbh_dns_reply r;
		(void)lbh_dns_parse_reply(g, len, &r);
		(void)lbh_dns_parse_question(g, len, &qq);
	}
}

static void test_formerr(void **state)
{
	(void)state;
	uint8_t req[12] = { 0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0 }, out[12];
	assert_int_equal(lbh_dns_build_formerr(req, out, sizeof(out)), 12);
	struct lbh_dns_reply r;
	assert_int_equal(lbh_dns_parse_reply(out, 12, &r), 0);
	assert_int_equal(r.id, 0x1234);
	assert_int_equal(r.rcode, LBH_DNS_FORMERR);
}

/* A label holding a NUL or a dot cannot be written as dotted text without
 * becoming another name: "lb.test<NUL>" + ".evil" was read as "lb.test" and
 * answered as a name of the zone (found by tests/fuzz/fuzz_dns.c). Such a
 * question is malformed: the backend answers FORMERR. */
static void test_nul_or_dot_in_label(void **state)
{
	(void)state;
	static const uint8_t hdr[12] = { 0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	static const uint8_t names[][24] = {
		/* "lb" "test\0" "evil": lb.test<NUL>.evil */
		{ 2, 'l', 'b', 5, 't', 'e', 's', 't', 0, 4, 'e', 'v', 'i', 'l', 0 },
		/* "lb.test" as one label, then "x" */
		{ 7, 'l', 'b', '.', 't', 'e', 's', 't', 1, 'x', 0 },
	};
	static const size_t lens[] = { 15, 11 };
	struct lbh_backend_cfg c;
	lbh_backend_defaults(&c);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t q[64], out[LBH_DNS_MSG_MAX];
		memcpy(q, hdr, 12);
		memcpy(q + 12, names[i], lens[i]);
		memcpy(q + 12 + lens[i], "\0\1\0\1", 4); /* A, IN */
		size_t n = 12 + lens[i] + 4;
		struct lbh_dns_question qq;
		assert_int_equal(lbh_dns_parse_question(q, n, &qq), -EBADMSG);
		assert_string_equal(qq.name, "");
		struct lbh_backend_stats st;
		memset(&st, 0, sizeof(st));
		int m = lbh_backend_answer(&c, q, n, out, &st);
		assert_int_equal(m, 12);
		assert_int_equal(st.formerr, 1);
		assert_int_equal(st.answered, 0);
		struct lbh_dns_reply r;
		assert_int_equal(lbh_dns_parse_reply(out, (size_t)m, &r), 0);
		assert_int_equal(r.rcode, LBH_DNS_FORMERR);
		assert_int_equal(r.a_addr, 0);
	}
}

static void test_zone(void **state)
{
	(void)state;
	assert_true(lbh_dns_in_zone("lb.test", "lb.test"));
	assert_true(lbh_dns_in_zone("www.lb.test", "lb.test"));
	assert_false(lbh_dns_in_zone("xlb.test", "lb.test"));
	assert_false(lbh_dns_in_zone("test", "lb.test"));
	assert_false(lbh_dns_in_zone("www.lb.test.org", "lb.test"));
	assert_true(lbh_dns_in_zone("anything", ""));
}

static void test_agent_hysteresis(void **state)
{
	(void)state;
	struct lbh_agent_cfg c;
	lbh_agent_defaults(&c);
	c.busy_us = 2000;
	c.idle_us = 1000;
	c.alpha = 1.0; /* the EWMA is the last sample: the thresholds alone decide */
	struct lbh_agent_model m;
	assert_int_equal(lbh_agent_model_init(&m, 8), 0);
	assert_false(lbh_agent_model_sample(&m, &c, 100, -1));
	assert_false(m.busy);
	assert_int_equal(m.level, 0); /* the first sample is the idle latency */
	assert_false(lbh_agent_model_sample(&m, &c, 2000, -1)); /* at the threshold: not over */
	assert_true(lbh_agent_model_sample(&m, &c, 2001, -1));
	assert_true(m.busy);
	/* Between the thresholds: stays busy. */
	assert_false(lbh_agent_model_sample(&m, &c, 1500, -1));
	assert_true(m.busy);
	assert_false(lbh_agent_model_sample(&m, &c, 1000, -1));
	assert_true(m.busy);
	assert_true(lbh_agent_model_sample(&m, &c, 999, -1));
	assert_false(m.busy);
	/* Between the thresholds again: stays idle. */
	assert_false(lbh_agent_model_sample(&m, &c, 1900, -1));
	assert_false(m.busy);
	/* Saturation: the level approaches 255 (1 - 100 / 100000). */
	lbh_agent_model_sample(&m, &c, 100000, -1);
	assert_int_equal(m.level, 254);
	/* Windowed p99 of the last 8 samples (1500 1000 999 1900 100000 + earlier 100 2000 2001). */
	assert_int_equal(lbh_agent_model_p99(&m), 100000);
	lbh_agent_model_fini(&m);

	/* With an EWMA one slow sample does not flip the bit. */
	c.alpha = 0.3;
	assert_int_equal(lbh_agent_model_init(&m, 4), 0);
	for (int i = 0; i < 20; i++)
		lbh_agent_model_sample(&m, &c, 500, -1);
	assert_false(lbh_agent_model_sample(&m, &c, 5000, -1)); /* 0.3*5000 + 0.7*500 = 1850 */
	assert_false(m.busy);
	assert_true(lbh_agent_model_sample(&m, &c, 5000, -1));
	lbh_agent_model_fini(&m);

	/* CPU: busy above busy_cpu_pct even with low latency; idle only 10 points below. */
	c.alpha = 1.0;
	c.busy_cpu_pct = 80;
	assert_int_equal(lbh_agent_model_init(&m, 4), 0);
	assert_true(lbh_agent_model_sample(&m, &c, 100, 90));
	assert_int_equal(m.level, (uint8_t)(255.0 * 90 / 100));
	assert_false(lbh_agent_model_sample(&m, &c, 100, 75));
	assert_true(m.busy);
	assert_true(lbh_agent_model_sample(&m, &c, 100, 60));
	assert_false(m.busy);
	lbh_agent_model_fini(&m);
	assert_int_equal(lbh_agent_model_init(&m, 0), -EINVAL);
}

/* The graded level: a utilisation estimate from latency relative to the
 * unit's idle latency (the lowest sample, forgotten slowly). */
static void test_agent_level(void **state)
{
	(void)state;
	struct lbh_agent_cfg c;
	lbh_agent_defaults(&c);
	c.busy_us = 100000;
	c.idle_us = 50000;
	c.alpha = 1.0;
	struct lbh_agent_model m;
	assert_int_equal(lbh_agent_model_init(&m, 16), 0);
	for (int i = 0; i < 10; i++)
		lbh_agent_model_sample(&m, &c, 500, -1);
	assert_int_equal(m.level, 0);
	/* M/M/1: latency = S / (1 - rho); 1 - S / latency = rho. */
	lbh_agent_model_sample(&m, &c, 1000, -1);  /* rho 0.5 */
	assert_true(m.level >= 126 && m.level <= 127);
	lbh_agent_model_sample(&m, &c, 2000, -1);  /* rho 0.75 */
	assert_true(m.level >= 190 && m.level <= 191);
	lbh_agent_model_sample(&m, &c, 10000, -1); /* rho 0.95 */
	assert_true(m.level >= 241 && m.level <= 242);
	/* The level is relative: a unit 4x slower at the same utilisation
	 * reads the same once its idle latency is known. */
	struct lbh_agent_model slow;
	assert_int_equal(lbh_agent_model_init(&slow, 16), 0);
	lbh_agent_model_sample(&slow, &c, 2000, -1);
	lbh_agent_model_sample(&slow, &c, 8000, -1);
	assert_true(slow.level >= 190 && slow.level <= 191);
	lbh_agent_model_fini(&slow);
	/* A lower sample lowers the idle latency at once. */
	lbh_agent_model_sample(&m, &c, 400, -1);
	assert_true(m.base_us == 400 && m.level == 0);
	/* The idle latency is forgotten slowly: after 2000 samples of 800 us it
	 * has grown by (1 + 1/4096)^2000, about 63 %, not to 800. */
	for (int i = 0; i < 2000; i++)
		lbh_agent_model_sample(&m, &c, 800, -1);
	printf("# idle latency after 2000 samples of 800 us: %.0f us, level %u\n", m.base_us, m.level);
	assert_true(m.base_us > 640 && m.base_us < 660);
	assert_true(m.level > 45 && m.level < 55);
	/* ... and catches up after enough of them (it never exceeds a sample). */
	for (int i = 0; i < 3000; i++)
		lbh_agent_model_sample(&m, &c, 800, -1);
	assert_true(m.base_us == 800 && m.level == 0);
	/* With the EWMA (alpha 0.3, probes every 20 ms) a slow probe within
	 * one interval (10 ms, 12x the idle latency) moves the level by alpha:
	 * 0.3 * (1 - 800 / 10000) * 255 = 70. */
	c.alpha = 0.3;
	c.interval_ms = 20;
	lbh_agent_model_sample(&m, &c, 10000, -1);
	assert_int_equal(m.level, 70);
	/* A probe that took 10 intervals (200 ms) counts as 10 samples:
	 * weight 1 - 0.7^10 = 0.97. */
	lbh_agent_model_sample(&m, &c, 200000, -1);
	assert_true(m.level >= 247 && m.level <= 249);
	for (int i = 0; i < 40; i++)
		lbh_agent_model_sample(&m, &c, 800, -1);
	assert_int_equal(m.level, 0);
	/* ... and steady load moves it to the utilisation estimate. */
	for (int i = 0; i < 40; i++)
		lbh_agent_model_sample(&m, &c, 3200, -1); /* 1 - 800 / 3200 = 0.75 */
	assert_true(m.level >= 190 && m.level <= 192);
	lbh_agent_model_fini(&m);
}

static void test_seq_start(void **state)
{
	(void)state;
	uint64_t a = lbh_agent_seq_start();
	struct timespec ts = { 0, 2000000 };
	nanosleep(&ts, NULL);
	uint64_t b = lbh_agent_seq_start();
	assert_true(a > 1000000000000000ull); /* microseconds since 1970: after 2001 */
	assert_true(b > a);
}

static void test_parse_addr(void **state)
{
	(void)state;
	struct sockaddr_in s;
	assert_int_equal(lbh_parse_addr("127.61.0.1:53", 0, &s), 0);
	assert_int_equal(ntohs(s.sin_port), 53);
	assert_int_equal(lbh_parse_addr("127.61.0.1", 47900, &s), 0);
	assert_int_equal(ntohs(s.sin_port), 47900);
	assert_int_equal(lbh_parse_addr("127.61.0.1", 0, &s), -EINVAL);
	assert_int_equal(lbh_parse_addr("127.61.0.1:0", 0, &s), -EINVAL);
	assert_int_equal(lbh_parse_addr("127.61.0.1:65536", 0, &s), -EINVAL);
	assert_int_equal(lbh_parse_addr("127.61.0.1:5x", 0, &s), -EINVAL);
	assert_int_equal(lbh_parse_addr("host:53", 0, &s), -EINVAL);
	assert_int_equal(lbh_parse_addr(NULL, 0, &s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_malformed_questions),
		cmocka_unit_test(test_formerr),
		cmocka_unit_test(test_nul_or_dot_in_label),
		cmocka_unit_test(test_zone),
		cmocka_unit_test(test_agent_hysteresis),
		cmocka_unit_test(test_agent_level),
		cmocka_unit_test(test_seq_start),
		cmocka_unit_test(test_parse_addr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
