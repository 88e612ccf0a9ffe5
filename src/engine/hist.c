/*
 * hist.c — the log-linear latency histogram (layout and error bound in
 * hist.h). Recording is a count-leading-zeros, a shift and an increment;
 * percentiles walk the bins once.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "innet/hist.h"

static inline uint32_t bin_of(uint32_t s, uint64_t v)
{
	uint64_t count = 1ull << s, half = count >> 1;
	if (v < count)
		return (uint32_t)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - s + 1;
	uint64_t sub = v >> shift;
	return (uint32_t)(count + (uint64_t)(shift - 1) * half + (sub - half));
}

uint32_t innet_hist_bin(const struct innet_hist *h, uint64_t v)
{
	return bin_of(h->sub_bits, v);
}

uint64_t innet_hist_bin_low(const struct innet_hist *h, uint32_t bin)
{
	uint64_t count = 1ull << h->sub_bits, half = count >> 1;
	if (bin < count)
		return bin;
	uint64_t k = bin - count;
	unsigned shift = (unsigned)(k / half) + 1;
	return (half + k % half) << shift;
}

uint64_t innet_hist_bin_high(const struct innet_hist *h, uint32_t bin)
{
	uint64_t count = 1ull << h->sub_bits, half = count >> 1;
	if (bin < count)
		return bin;
	uint64_t k = bin - count;
	unsigned shift = (unsigned)(k / half) + 1;
	/* At the very top (sub + 1) << shift is 2^64: wraps to 0, minus 1 is
	 * UINT64_MAX, which is the right answer. */
	return ((half + k % half + 1) << shift) - 1;
}

int innet_hist_init(struct innet_hist *h, uint64_t max_value, unsigned sub_bucket_bits)
{
	memset(h, 0, sizeof(*h));
	if (max_value < 1 || sub_bucket_bits < 2 || sub_bucket_bits > 20)
		return -EINVAL;
	h->sub_bits = sub_bucket_bits;
	h->max_value = max_value;
	h->nbins = bin_of(sub_bucket_bits, max_value) + 1;
	h->counts = calloc(h->nbins, sizeof(*h->counts));
	if (!h->counts)
		return -ENOMEM;
	h->min = UINT64_MAX;
	return 0;
}

void innet_hist_fini(struct innet_hist *h)
{
	free(h->counts);
	h->counts = NULL;
	h->nbins = 0;
}

void innet_hist_reset(struct innet_hist *h)
{
	memset(h->counts, 0, (size_t)h->nbins * sizeof(*h->counts));
	h->total = h->clamped = 0;
	h->min = UINT64_MAX;
	h->max = 0;
	h->sum = 0;
}

void innet_hist_record_n(struct innet_hist *h, uint64_t v, uint64_t n)
{
	if (n == 0)
		return;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->sum += (long double)v * (long double)n;
	h->total += n;
	if (v > h->max_value) {
		h->clamped += n;
		v = h->max_value;
	}
	h->counts[bin_of(h->sub_bits, v)] += n;
}

int innet_hist_merge(struct innet_hist *dst, const struct innet_hist *src)
{
	if (dst->sub_bits != src->sub_bits || dst->nbins != src->nbins)
		return -EINVAL;
	if (src->total == 0)
		return 0;
	for (uint32_t i = 0; i < src->nbins; i++)
		dst->counts[i] += src->counts[i];
	dst->total += src->total;
	dst->clamped += src->clamped;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	return 0;
}

uint64_t innet_hist_percentile(const struct innet_hist *h, double p)
{
	if (h->total == 0)
		return 0;
	if (!(p > 0))
		return h->min;
	if (p >= 100)
		return h->max;
	uint64_t rank = (uint64_t)ceill((long double)p / 100.0L * (long double)h->total);
	if (rank < 1)
		rank = 1;
	if (rank > h->total)
		rank = h->total;
	uint64_t cum = 0;
	for (uint32_t i = 0; i < h->nbins; i++) {
		cum += h->counts[i];
		if (cum >= rank) {
			uint64_t hi = innet_hist_bin_high(h, i);
			if (hi > h->max)
				hi = h->max;
			if (hi < h->min)
				hi = h->min;
			return hi;
		}
	}
	return h->max;
}

double innet_hist_mean(const struct innet_hist *h)
{
	return h->total ? (double)(h->sum / (long double)h->total) : 0.0;
}
