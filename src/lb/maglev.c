/*
 * maglev.c — the load balancer's pure control-plane helpers: Maglev's
 * consistent-hash table with weights, the smooth weighted round-robin
 * sequence, and the DIP table (a server's unit state -> destination unit,
 * or "split by remaining capacity", decided per connection in the handler).
 * All run on the control thread (program init and on_ctl); the data plane
 * only reads what they produce, from registers.
 *
 * Maglev (Eisenbud et al., NSDI'16, section 3.4): backend i has a preference
 * list over the M slots, the permutation
 *
 *     offset_i = h1(id_i) mod M,  skip_i = h2(id_i) mod (M - 1) + 1,
 *     pref_i(j) = (offset_i + j * skip_i) mod M        (M prime: a permutation)
 *
 * and the backends take turns claiming their next preferred free slot until
 * the table is full. Weights: in each round backend i earns weight_i / w_max
 * of a turn (a credit counter), so backends claim slots at rates proportional
 * to their weights and end with M * w_i / W slots, give or take one per round
 * boundary — within 1% of the weight share when M > 100 * N. A backend's
 * preference list depends only on its own id, so adding or removing one
 * backend moves few slots between the others (measured in test_lb_maglev).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "lb/lb_pvt.h"

bool lb_is_prime(uint32_t n)
{
	if (n < 2)
		return false;
	if (n % 2 == 0)
		return n == 2;
	for (uint32_t d = 3; (uint64_t)d * d <= n; d += 2)
		if (n % d == 0)
			return false;
	return true;
}

int lb_maglev_build(const struct lb_backend *b, uint32_t n, uint32_t m, uint16_t *table)
{
	if (m < 2 || !lb_is_prime(m) || n > 0xfffe)
		return -EINVAL;
	for (uint32_t s = 0; s < m; s++)
		table[s] = LB_NONE;
	uint32_t w_max = 0, live = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (b[i].weight > w_max)
			w_max = b[i].weight;
		if (b[i].weight > 0)
			live++;
	}
	if (live == 0)
		return 0;
	uint32_t *offset = calloc(n, sizeof(*offset));
	uint32_t *skip = calloc(n, sizeof(*skip));
	uint32_t *next = calloc(n, sizeof(*next));
	uint64_t *credit = calloc(n, sizeof(*credit));
	if (offset == NULL || skip == NULL || next == NULL || credit == NULL) {
		free(offset);
		free(skip);
		free(next);
		free(credit);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		offset[i] = (uint32_t)(XXH3_64bits_withSeed(&b[i].id, sizeof(b[i].id), 0x6d61676c) % m);
		skip[i] = (uint32_t)(XXH3_64bits_withSeed(&b[i].id, sizeof(b[i].id), 0x65763221) % (m - 1)) + 1;
	}
	uint32_t filled = 0;
	while (filled < m) {
		for (uint32_t i = 0; i < n && filled < m; i++) {
			if (b[i].weight == 0)
				continue;
			credit[i] += b[i].weight;
			while (credit[i] >= w_max && filled < m) {
				credit[i] -= w_max;
				uint32_t s;
				do {
					s = (uint32_t)((offset[i] + (uint64_t)next[i] * skip[i]) % m);
					next[i]++;
				} while (table[s] != LB_NONE);
				table[s] = (uint16_t)b[i].index;
				filled++;
			}
		}
	}
	free(offset);
	free(skip);
	free(next);
	free(credit);
	return 0;
}

uint32_t lb_wrr_build(const struct lb_backend *b, uint32_t n, uint16_t *seq, uint32_t max)
{
	/* Scale weights down (keeping every positive weight >= 1) until the
	 * cycle fits in max entries. */
	uint64_t total = 0;
	uint32_t div = 1;
	for (;;) {
		total = 0;
		for (uint32_t i = 0; i < n; i++)
			if (b[i].weight > 0)
				total += b[i].weight / div > 0 ? b[i].weight / div : 1;
		if (total <= max || div > (1u << 20))
			break;
		div *= 2;
	}
	if (total == 0 || total > max)
		return 0;
	/* nginx's smooth weighted round robin: each step every backend gains its
	 * weight, the largest current value wins and pays the total. */
	int64_t cur[LB_MAX_UNIT_SLOTS] = { 0 };
	for (uint32_t k = 0; k < total; k++) {
		int64_t best = INT64_MIN;
		uint32_t bi = 0;
		for (uint32_t i = 0; i < n && i < LB_MAX_UNIT_SLOTS; i++) {
			if (b[i].weight == 0)
				continue;
			uint32_t w = b[i].weight / div > 0 ? b[i].weight / div : 1;
			cur[i] += w;
			if (cur[i] > best) {
				best = cur[i];
				bi = i;
			}
		}
		cur[bi] -= (int64_t)total;
		seq[k] = (uint16_t)b[bi].index;
	}
	return (uint32_t)total;
}

uint8_t lb_dip_pick(const uint8_t kind[LB_UNITS_PER_SERVER], uint8_t eligible, uint8_t avail,
		    uint8_t busy)
{
	uint8_t usable = (uint8_t)(eligible & avail);
	if (usable == 0)
		return LB_DIP_NONE;
	/* P4Mite: the CPU while it is under its threshold, ... */
	for (unsigned u = 0; u < LB_UNITS_PER_SERVER; u++)
		if ((usable >> u & 1) && !(busy >> u & 1) && kind[u] == INNET_LB_KIND_CPU)
			return (uint8_t)u;
	/* ... the only usable unit if there is one, ... */
	if ((usable & (usable - 1)) == 0)
		return (uint8_t)__builtin_ctz(usable);
	/* ... and otherwise (the CPU busy, or no usable CPU) a split of the new
	 * connections over every usable unit, busy ones included, in proportion
	 * to its remaining capacity, weight x (256 - load level): decided per
	 * connection in the handler from the reported levels, so a busy CPU
	 * keeps a share matching its headroom and an accelerator's share
	 * shrinks as its own queue grows (lb_dp.c, dip_split). */
	return LB_DIP_SPLIT;
}
