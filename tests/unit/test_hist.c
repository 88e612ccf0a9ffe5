/*
 * test_hist.c — the log-linear latency histogram (src/engine/hist.c):
 * bins tile the value range without gaps or overlaps; every value's bin
 * contains it; percentiles are within the documented relative error bound
 * (true <= reported <= true * (1 + 2^-(S-1))) against an exact sort, for
 * uniform, log-uniform and heavy-tailed data and several precisions; merge
 * equals recording everything into one; clamping above max_value is counted;
 * bad settings are refused.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "unit/testutil.h"
#include "innet/hist.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: deterministic across runs */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_bins_tile(void **state)
{
	(void)state;
	for (unsigned s = 2; s <= 14; s += 3) {
		struct innet_hist h;
		assert_int_equal(innet_hist_init(&h, UINT64_MAX, s), 0);
		assert_int_equal(innet_hist_bin_low(&h, 0), 0);
		for (uint32_t b = 0; b + 1 < h.nbins; b++) {
			uint64_t lo = innet_hist_bin_low(&h, b), hi = innet_hist_bin_high(&h, b);
			assert_true(lo <= hi);
			assert_int_equal(innet_hist_bin_low(&h, b + 1), hi + 1);
			assert_int_equal(innet_hist_bin(&h, lo), b);
			assert_int_equal(innet_hist_bin(&h, hi), b);
			/* (highest - lowest) over the lowest value: at most 2^-(S-1). */
			if (lo > 0)
				assert_true((long double)(hi - lo) / lo <= 1.0L / (1ull << (s - 1)));
		}
		assert_int_equal(innet_hist_bin_high(&h, h.nbins - 1), UINT64_MAX);
		innet_hist_fini(&h);
	}
}

static void test_exact_below_count(void **state)
{
	(void)state;
	struct innet_hist h;
	assert_int_equal(innet_hist_init(&h, 1000000, 11), 0);
	for (uint64_t v = 1; v <= 2000; v++)
		innet_hist_record(&h, v);
	assert_int_equal(innet_hist_percentile(&h, 50), 1000);
	assert_int_equal(innet_hist_percentile(&h, 99), 1980);
	assert_int_equal(innet_hist_percentile(&h, 100), 2000);
	assert_int_equal(innet_hist_percentile(&h, 0), 1);
	assert_int_equal(h.total, 2000);
	assert_true(fabs(innet_hist_mean(&h) - 1000.5) < 1e-9);
	innet_hist_fini(&h);
}

/* The bound, checked against an exact order statistic. */
static void check_bound(const uint64_t *sorted, size_t n, const struct innet_hist *h, unsigned s)
{
	static const double ps[] = { 1, 10, 50, 75, 90, 99, 99.9, 99.99, 100 };
	long double eps = 1.0L / (1ull << (s - 1));
	for (size_t i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		size_t rank = (size_t)ceill(ps[i] / 100.0L * n);
		if (rank < 1)
			rank = 1;
		uint64_t truth = sorted[rank - 1], got = innet_hist_percentile(h, ps[i]);
		if (!(got >= truth && (long double)got <= (long double)truth * (1 + eps))) {
			print_error("p%g: got %lu, truth %lu (S=%u)\n", ps[i], (unsigned long)got, (unsigned long)truth, s);
			fail();
		}
	}
}

static void test_percentile_bound(void **state)
{
	(void)state;
	enum { N = 200000 };
	uint64_t *v = malloc(N * sizeof(*v));
	assert_non_null(v);
	for (unsigned s = 4; s <= 14; s += 5) {
		for (int dist = 0; dist < 3; dist++) {
			struct innet_hist h;
			assert_int_equal(innet_hist_init(&h, 1ull << 40, s), 0);
			for (size_t i = 0; i < N; i++) {
				uint64_t x;
				if (dist == 0) /* uniform 0..10 ms in ns */
					x = rnd() % 10000000ull;
				else if (dist == 1) /* log-uniform 1 ns .. 2^36 ns */
					x = 1 + (rnd() >> (64 - 36 + (rnd() % 36)));
				else /* heavy tail: mostly ~20 us, 1 % near a second */
					x = rnd() % 100 ? 20000 + rnd() % 5000 : 900000000ull + rnd() % 200000000ull;
				v[i] = x;
				innet_hist_record(&h, x);
			}
			qsort(v, N, sizeof(*v), cmp_u64);
			check_bound(v, N, &h, s);
			assert_int_equal(h.min, v[0]);
			assert_int_equal(h.max, v[N - 1]);
			innet_hist_fini(&h);
		}
	}
	free(v);
}

static void test_merge(void **state)
{
	(void)state;
	struct innet_hist a, b, all;
	assert_int_equal(innet_hist_init(&a, 1ull << 36, 11), 0);
	assert_int_equal(innet_hist_init(&b, 1ull << 36, 11), 0);
	assert_int_equal(innet_hist_init(&all, 1ull << 36, 11), 0);
	for (int i = 0; i < 50000; i++) {
		uint64_t x = rnd() % 50000000ull;
		innet_hist_record(i % 3 ? &a : &b, x);
		innet_hist_record(&all, x);
	}
	assert_int_equal(innet_hist_merge(&a, &b), 0);
	assert_int_equal(a.total, all.total);
	assert_int_equal(a.min, all.min);
	assert_int_equal(a.max, all.max);
	assert_memory_equal(a.counts, all.counts, all.nbins * sizeof(uint64_t));
	for (double p = 0; p <= 100; p += 0.5)
		assert_int_equal(innet_hist_percentile(&a, p), innet_hist_percentile(&all, p));
	/* Different layouts do not merge. */
	struct innet_hist c;
	assert_int_equal(innet_hist_init(&c, 1ull << 36, 10), 0);
	assert_int_equal(innet_hist_merge(&a, &c), -EINVAL);
	innet_hist_fini(&a);
	innet_hist_fini(&b);
	innet_hist_fini(&all);
	innet_hist_fini(&c);
}

static void test_clamp_and_empty(void **state)
{
	(void)state;
	struct innet_hist h;
	assert_int_equal(innet_hist_init(&h, 100000, 11), 0);
	assert_int_equal(innet_hist_percentile(&h, 99), 0);
	assert_true(innet_hist_mean(&h) == 0);
	innet_hist_record(&h, 5);
	innet_hist_record_n(&h, 10000000, 3);
	assert_int_equal(h.total, 4);
	assert_int_equal(h.clamped, 3);
	assert_int_equal(h.max, 10000000);
	/* The clamped values sit in max_value's bin; percentiles never exceed the true max. */
	uint64_t p = innet_hist_percentile(&h, 90);
	assert_true(p >= 100000 && p <= 10000000);
	assert_int_equal(innet_hist_percentile(&h, 100), 10000000);
	innet_hist_reset(&h);
	assert_int_equal(h.total, 0);
	assert_int_equal(innet_hist_percentile(&h, 50), 0);
	innet_hist_fini(&h);
}

static void test_bad_settings(void **state)
{
	(void)state;
	struct innet_hist h;
	assert_int_equal(innet_hist_init(&h, 0, 11), -EINVAL);
	assert_int_equal(innet_hist_init(&h, 1000, 1), -EINVAL);
	assert_int_equal(innet_hist_init(&h, 1000, 21), -EINVAL);
	innet_hist_fini(&h); /* safe after a failed init */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bins_tile),
		cmocka_unit_test(test_exact_below_count),
		cmocka_unit_test(test_percentile_bound),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_clamp_and_empty),
		cmocka_unit_test(test_bad_settings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
