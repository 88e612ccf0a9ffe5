/*
 * test_lb_maglev.c — the load balancer's pure helpers (src/lb/maglev.c,
 * src/lb/frame.c): Maglev shares within 1% of the weights when the table is
 * over 100x the backends, the fraction of entries that move when a backend
 * is added or removed (Maglev's minimal disruption), the smooth WRR cycle,
 * P4Mite's DIP decisions, and the frame parser and NAT rewrites (checksums
 * after an incremental update equal a full recomputation; UDP checksum 0
 * stays 0; malformed frames get their named reason).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "lb/lb_pvt.h"

static void make_backends(struct lb_backend *b, uint32_t n, const uint32_t *w)
{
	for (uint32_t i = 0; i < n; i++) {
		b[i].id = 1000 + i;
		b[i].weight = w ? w[i] : 1;
		b[i].index = i;
	}
}

/* Largest |share - weight share| over backends, in percentage points. */
static double share_error(const uint16_t *t, uint32_t m, const struct lb_backend *b, uint32_t n)
{
	uint32_t cnt[64] = { 0 };
	uint64_t wsum = 0;
	for (uint32_t i = 0; i < n; i++)
		wsum += b[i].weight;
	for (uint32_t s = 0; s < m; s++) {
		assert_true(t[s] < n);
		cnt[t[s]]++;
	}
	double worst = 0;
	for (uint32_t i = 0; i < n; i++) {
		double e = 100.0 * cnt[i] / m - 100.0 * b[i].weight / (double)wsum;
		if (e < 0)
			e = -e;
		if (e > worst)
			worst = e;
	}
	return worst;
}

static void test_shares(void **state)
{
	uint32_t m = 65537;
	uint16_t *t = malloc(m * sizeof(*t));
	struct lb_backend b[64];
	static const uint32_t w8[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint32_t w40[40];
	for (int i = 0; i < 40; i++)
		w40[i] = 1 + (uint32_t)(i % 5) * 10;
	struct { uint32_t n; const uint32_t *w; } cases[] = {
		{ 2, NULL }, { 8, NULL }, { 8, w8 }, { 40, w40 }, { 64, NULL },
	};
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		make_backends(b, cases[c].n, cases[c].w);
		assert_int_equal(lb_maglev_build(b, cases[c].n, m, t), 0);
		double e = share_error(t, m, b, cases[c].n);
		printf("# maglev M=%u N=%u weighted=%d: max share error %.4f%%\n", m, cases[c].n,
		       cases[c].w != NULL, e);
		assert_true(e < 1.0);
	}
	/* Zero weight: no entries. No backends: all LB_NONE. */
	make_backends(b, 3, NULL);
	b[1].weight = 0;
	assert_int_equal(lb_maglev_build(b, 3, 251, t), 0);
	for (uint32_t s = 0; s < 251; s++)
		assert_true(t[s] == 0 || t[s] == 2);
	assert_int_equal(lb_maglev_build(b, 0, 251, t), 0);
	for (uint32_t s = 0; s < 251; s++)
		assert_int_equal(t[s], LB_NONE);
	assert_int_equal(lb_maglev_build(b, 3, 250, t), -EINVAL); /* not prime */
	free(t);
}

static void test_disruption(void **state)
{
	uint32_t m = 65537, n = 10;
	uint16_t *a = malloc(m * sizeof(*a)), *bt = malloc(m * sizeof(*bt));
	struct lb_backend b[11];
	make_backends(b, n + 1, NULL);
	assert_int_equal(lb_maglev_build(b, n, m, a), 0);
	/* Remove backend 3: entries that were not 3's and still moved. */
	struct lb_backend r[10];
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (i != 3)
			r[k++] = b[i];
	assert_int_equal(lb_maglev_build(r, k, m, bt), 0);
	uint32_t moved = 0, owned = 0;
	for (uint32_t s = 0; s < m; s++) {
		if (a[s] == 3) {
			owned++;
			assert_true(bt[s] != 3);
			continue;
		}
		moved += a[s] != bt[s];
	}
	double frac = (double)moved / m;
	printf("# maglev remove 1 of %u: %.2f%% of entries of the others moved (%u owned by it)\n",
	       n, 100 * frac, owned);
	assert_true(frac < 0.02);
	/* Add backend 10: entries that moved to something other than the new one. */
	assert_int_equal(lb_maglev_build(b, n + 1, m, bt), 0);
	uint32_t to_new = 0, other = 0;
	for (uint32_t s = 0; s < m; s++) {
		if (a[s] == bt[s])
			continue;
		if (bt[s] == 10)
			to_new++;
		else
			other++;
	}
	printf("# maglev add 1 to %u: %.2f%% moved to it, %.2f%% moved elsewhere\n", n,
	       100.0 * to_new / m, 100.0 * other / m);
	assert_true(to_new > m / 12 && to_new < m / 10);
	assert_true((double)other / m < 0.02);
	free(a);
	free(bt);
}

static void test_wrr(void **state)
{
	struct lb_backend b[3];
	static const uint32_t w[3] = { 5, 1, 1 };
	make_backends(b, 3, w);
	uint16_t seq[LB_WRR_MAX];
	uint32_t n = lb_wrr_build(b, 3, seq, LB_WRR_MAX);
	assert_int_equal(n, 7);
	/* nginx's smooth sequence for 5,1,1: a a b a c a a. */
	static const uint16_t want[7] = { 0, 0, 1, 0, 2, 0, 0 };
	assert_memory_equal(seq, want, sizeof(want));
	/* Too long a cycle is scaled down, keeping proportions roughly. */
	static const uint32_t big[3] = { 60000, 30000, 10 };
	make_backends(b, 3, big);
	n = lb_wrr_build(b, 3, seq, LB_WRR_MAX);
	assert_true(n > 0 && n <= LB_WRR_MAX);
	uint32_t c[3] = { 0 };
	for (uint32_t i = 0; i < n; i++)
		c[seq[i]]++;
	assert_true(c[2] >= 1 && c[0] > c[1] && c[1] > c[2]);
	b[0].weight = b[1].weight = b[2].weight = 0;
	assert_int_equal(lb_wrr_build(b, 3, seq, LB_WRR_MAX), 0);
}

static void test_dip(void **state)
{
	const uint8_t kinds[8] = { INNET_LB_KIND_CPU, INNET_LB_KIND_ACCEL, INNET_LB_KIND_ACCEL };
	/* Both available, none busy: the CPU. */
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x3, 0x0), 0);
	/* CPU busy: split by remaining capacity over the usable units (the busy
	 * CPU included; the handler draws per connection). */
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x3, 0x1), LB_DIP_SPLIT);
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x7, 0x3), LB_DIP_SPLIT);
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x7, 0x7), LB_DIP_SPLIT);
	/* A busy CPU that is the only usable unit: the CPU. */
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x1, 0x1), 0);
	/* CPU not available: the accelerator, even if the CPU is "not busy". */
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x2, 0x0), 1);
	/* CPU not available, two accelerators: split between them. */
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x6, 0x0), LB_DIP_SPLIT);
	/* CPU drained (not eligible): the other two split. */
	assert_int_equal(lb_dip_pick(kinds, 0x6, 0x7, 0x0), LB_DIP_SPLIT);
	assert_int_equal(lb_dip_pick(kinds, 0x2, 0x7, 0x7), 1);
	/* A second CPU (unit 3) takes over while the first is busy. */
	const uint8_t two_cpus[8] = { INNET_LB_KIND_CPU, INNET_LB_KIND_ACCEL, INNET_LB_KIND_ACCEL,
				      INNET_LB_KIND_CPU };
	assert_int_equal(lb_dip_pick(two_cpus, 0xf, 0xf, 0x1), 3);
	assert_int_equal(lb_dip_pick(two_cpus, 0xf, 0xf, 0x9), LB_DIP_SPLIT);
	assert_int_equal(lb_dip_pick(kinds, 0x7, 0x0, 0x0), LB_DIP_NONE);
}

/* ------------------------------------------------------------------------ */

static uint32_t build_frame(uint8_t *f, uint8_t proto, uint32_t sip, uint32_t dip, uint16_t sp,
			    uint16_t dp, uint32_t payload, bool udp_csum)
{
	memset(f, 0, 1600);
	static const uint8_t macs[12] = { 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2 };
	memcpy(f, macs, 12);
	f[12] = 0x08;
	uint8_t *ip = f + 14;
	uint32_t l4len = (proto == 17 ? 8 : 20) + payload;
	ip[0] = 0x45;
	ip[2] = (uint8_t)((20 + l4len) >> 8);
	ip[3] = (uint8_t)(20 + l4len);
	ip[6] = 0x40; /* DF */
	ip[8] = 64;
	ip[9] = proto;
	for (int i = 0; i < 4; i++) {
		ip[12 + i] = (uint8_t)(sip >> (24 - 8 * i));
		ip[16 + i] = (uint8_t)(dip >> (24 - 8 * i));
	}
	uint16_t c = lb_csum_ipv4(ip, 20);
	ip[10] = (uint8_t)(c >> 8);
	ip[11] = (uint8_t)c;
	uint8_t *l4 = ip + 20;
	l4[0] = (uint8_t)(sp >> 8); l4[1] = (uint8_t)sp;
	l4[2] = (uint8_t)(dp >> 8); l4[3] = (uint8_t)dp;
	uint8_t *pl = l4 + (proto == 17 ? 8 : 20);
	for (uint32_t i = 0; i < payload; i++)
		pl[i] = (uint8_t)(i * 7 + 3);
	struct lb_frame fr = { .l3_off = 14, .l4_off = 34, .proto = proto };
	if (proto == 17) {
		l4[4] = (uint8_t)(l4len >> 8);
		l4[5] = (uint8_t)l4len;
		if (udp_csum) {
			c = lb_csum_l4(f, &fr, l4len);
			l4[6] = (uint8_t)(c >> 8);
			l4[7] = (uint8_t)c;
		}
	} else {
		l4[12] = 5 << 4;
		l4[13] = 0x02; /* SYN */
		c = lb_csum_l4(f, &fr, l4len);
		l4[16] = (uint8_t)(c >> 8);
		l4[17] = (uint8_t)c;
	}
	return 14 + 20 + l4len;
}

/* A frame whose checksums verify (sum over header/pseudo-header = 0). */
static void assert_checksums_ok(const uint8_t *f, uint32_t len)
{
	struct lb_frame fr;
	assert_int_equal(lb_frame_parse(f, len, &fr), 0);
	uint32_t l4len = (uint32_t)(f[16] << 8 | f[17]) - 20;
	if (fr.proto == 17 && f[fr.l4_off + 6] == 0 && f[fr.l4_off + 7] == 0)
		return; /* no UDP checksum */
	assert_int_equal(lb_csum_l4(f, &fr, l4len), 0);
}

static void test_frame_nat(void **state)
{
	uint8_t f[1600];
	uint32_t seed = 12345;
	for (int iter = 0; iter < 2000; iter++) {
		seed = seed * 1103515245u + 12345u;
		uint8_t proto = (seed >> 8) & 1 ? 6 : 17;
		uint32_t sip = seed * 2654435761u, dip = seed ^ 0x0a000001u;
		uint16_t sp = (uint16_t)(seed >> 3), dp = (uint16_t)(seed >> 13);
		uint32_t len = build_frame(f, proto, sip, dip, sp, dp, (seed >> 20) % 200, true);
		struct lb_frame fr;
		assert_int_equal(lb_frame_parse(f, len, &fr), 0);
		assert_true(fr.sip == sip && fr.dip == dip && fr.sport == sp && fr.dport == dp);
		uint32_t nip = seed * 40503u + 7;
		uint16_t np = (uint16_t)(seed * 31u);
		lb_frame_set_dst(f, &fr, nip, np);
		assert_checksums_ok(f, len);
		lb_frame_set_src(f, &fr, nip ^ 0xffff0000u, (uint16_t)~np);
		assert_checksums_ok(f, len);
		struct lb_frame g;
		lb_frame_parse(f, len, &g);
		assert_true(g.dip == nip && g.dport == np && g.sip == (nip ^ 0xffff0000u));
	}
	/* UDP without checksum stays without. */
	uint32_t len = build_frame(f, 17, 0x0a000001, 0x0a000002, 1000, 53, 10, false);
	struct lb_frame fr;
	assert_int_equal(lb_frame_parse(f, len, &fr), 0);
	lb_frame_set_dst(f, &fr, 0x0a000009, 5353);
	assert_int_equal(f[34 + 6], 0);
	assert_int_equal(f[34 + 7], 0);
	assert_checksums_ok(f, len);
	lb_frame_set_macs(f, 0x020000000009ull, 0x0200000000aaull);
	assert_true(lb_frame_mac(f) == 0x020000000009ull && lb_frame_mac(f + 6) == 0x0200000000aaull);
}

static void test_frame_malformed(void **state)
{
	uint8_t f[1600], g[1600];
	uint32_t len = build_frame(f, 17, 0x0a000001, 0x0a000002, 1000, 53, 10, true);
	struct lb_frame fr;
	for (uint32_t l = 0; l < 14 + 20; l++)
		assert_int_not_equal(lb_frame_parse(f, l, &fr), 0);
	assert_int_equal(lb_frame_parse(f, 10, &fr), LB_DR_BAD_FRAME);
	memcpy(g, f, len); g[12] = 0x86; g[13] = 0xdd;
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_NOT_IPV4);
	memcpy(g, f, len); g[14] = 0x46; /* IHL 6 without options: checksum/len off */
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_BAD_IP);
	memcpy(g, f, len); g[14 + 8] = 1; /* TTL changed, checksum not */
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_BAD_IP);
	memcpy(g, f, len); g[14 + 3] += 100; /* total length beyond the frame */
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_BAD_IP);
	/* A fragment (MF), with a fixed-up header checksum. */
	memcpy(g, f, len); g[14 + 6] = 0x20; g[24] = g[25] = 0;
	uint16_t c = lb_csum_ipv4(g + 14, 20); g[24] = (uint8_t)(c >> 8); g[25] = (uint8_t)c;
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_FRAGMENT);
	/* UDP length larger than the IP payload. */
	memcpy(g, f, len); g[34 + 5] = 200;
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_BAD_L4);
	/* TCP data offset too small. */
	len = build_frame(f, 6, 0x0a000001, 0x0a000002, 1000, 80, 0, true);
	memcpy(g, f, len); g[34 + 12] = 4 << 4;
	assert_int_equal(lb_frame_parse(g, len, &fr), LB_DR_BAD_L4);
	assert_int_equal(lb_frame_parse(f, len, &fr), 0);
	assert_int_equal(fr.tcp_flags, 0x02);
	/* Ethernet padding after the IP packet is fine. */
	assert_int_equal(lb_frame_parse(f, len + 6, &fr), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shares),
		cmocka_unit_test(test_disruption),
		cmocka_unit_test(test_wrr),
		cmocka_unit_test(test_dip),
		cmocka_unit_test(test_frame_nat),
		cmocka_unit_test(test_frame_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
