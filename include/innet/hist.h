/*
 * innet/hist.h — a log-linear latency histogram in the manner of HdrHistogram
 * (Gil Tene): constant relative precision over a huge range, O(1) record,
 * fixed memory, mergeable across threads.
 *
 * Values are unsigned 64-bit integers (innet records nanoseconds). With
 * S = sub_bucket_bits, a value below 2^S is counted exactly; above that the
 * range [2^e, 2^(e+1)) is cut into 2^(S-1) equal bins, so a bin's width over
 * its lowest value is at most 2^-(S-1). innet_hist_percentile returns the
 * highest value of the bin holding the wanted rank, hence:
 *
 *     true value  <=  reported value  <=  true value * (1 + 2^-(S-1))
 *
 * (S = 11, the default: 0.098 %, better than HdrHistogram's "3 significant
 * digits").
 *
 * Bin layout (HALF = 2^(S-1), COUNT = 2^S):
 *
 *   index:  0 ........ COUNT-1 | COUNT ..... COUNT+HALF-1 | ... next HALF ...
 *   values: 0 ........ COUNT-1 | [COUNT, 2*COUNT) step 2  | [2*COUNT, 4*COUNT) step 4
 *           (exact, width 1)     (shift 1)                  (shift 2)
 *
 *   v >= COUNT:  shift = msb(v) - S + 1,  sub = v >> shift  (HALF <= sub < COUNT)
 *                index = COUNT + (shift - 1) * HALF + (sub - HALF)
 *
 * Values above max_value (rounded up to the end of its bin) are recorded as
 * max_value and counted in `clamped`, never dropped silently.
 *
 * Not thread-safe: one histogram per thread, innet_hist_merge at the end.
 */
#ifndef INNET_HIST_H
#define INNET_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define INNET_HIST_DEFAULT_BITS 11

struct innet_hist {
	uint64_t *counts;      /* nbins counters */
	uint32_t nbins;        /* bins up to and including max_value's */
	uint32_t sub_bits;     /* S: precision, 2^-(S-1) relative */
	uint64_t max_value;    /* the largest value recorded as itself */
	uint64_t total;        /* values recorded */
	uint64_t clamped;      /* values above max_value (recorded as max_value) */
	uint64_t min;          /* smallest value recorded (exact) */
	uint64_t max;          /* largest value recorded (exact, before clamping) */
	long double sum;       /* for the mean (exact values) */
};

/* Set up for values 0..max_value (>= 1) with sub_bucket_bits 2..20. 0 or
 * -EINVAL / -ENOMEM. */
int innet_hist_init(struct innet_hist *h, uint64_t max_value, unsigned sub_bucket_bits);
void innet_hist_fini(struct innet_hist *h);
void innet_hist_reset(struct innet_hist *h);

/* Count value v (n times). */
void innet_hist_record_n(struct innet_hist *h, uint64_t v, uint64_t n);
static inline void innet_hist_record(struct innet_hist *h, uint64_t v)
{
	innet_hist_record_n(h, v, 1);
}

/* Add src's counts into dst: 0, or -EINVAL when the layouts differ. */
int innet_hist_merge(struct innet_hist *dst, const struct innet_hist *src);

/* The value at percentile p (0..100): the highest value of the bin holding
 * the ceil(p/100 * total)-th smallest value, capped by the exact maximum;
 * 0 when empty. p = 100 gives the exact maximum. */
uint64_t innet_hist_percentile(const struct innet_hist *h, double p);
double innet_hist_mean(const struct innet_hist *h);

/* Bin helpers (exposed for the tests): the bin of v, and a bin's range. */
uint32_t innet_hist_bin(const struct innet_hist *h, uint64_t v);
uint64_t innet_hist_bin_low(const struct innet_hist *h, uint32_t bin);
uint64_t innet_hist_bin_high(const struct innet_hist *h, uint32_t bin);

#endif
