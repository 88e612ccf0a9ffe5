/*
 * test_kv_chunk.c — large log entries in chunks (src/consensus/kv_chunk.c):
 * what a proposer cuts, every replica puts back together the same way.
 *
 *   - an image cut into chunks (kv_chunk_next) and delivered in any order
 *     comes back whole, once, when its last byte comes;
 *   - a replica that installs a snapshot taken mid-image (kv_chunk_save /
 *     kv_chunk_load) completes the image with the remaining chunks exactly
 *     as the replica that saw them all;
 *   - a newer image of the same proposer drops its older partial, and a
 *     late chunk of the older one changes nothing; with KV_BIG_MAX partials
 *     a new one drops the one begun earliest;
 *   - malformed chunks (a total over the limit, bytes past the total, a
 *     total that differs from the image's) are refused, and a snapshot
 *     section cut short or lying about its sizes is refused whole.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

static struct server proposer, r1, r2; /* large: static */

/* Cut image (len bytes) as proposer `client` with chunks of at most cap
 * bytes of entry: *n chunk entries, each malloc'ed, lengths in lens. */
static uint8_t **cut(uint32_t client, uint32_t seq, const uint8_t *image, uint32_t len, size_t cap,
		     size_t *lens, uint32_t *n)
{
	proposer.big_id = (uint64_t)client << 32 | seq;
	proposer.big_off = 0;
	uint8_t **out = calloc(1024, sizeof(*out));
	assert_non_null(out);
	*n = 0;
	for (;;) {
		uint8_t *e = malloc(cap);
		assert_non_null(e);
		size_t l = kv_chunk_next(&proposer, image, len, e, cap);
		if (l == 0) {
			free(e);
			break;
		}
		assert_true(l <= cap && *n < 1024);
		lens[*n] = l;
		out[(*n)++] = e;
	}
	return out;
}

static void free_chunks(uint8_t **c, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(c[i]);
	free(c);
}

static void test_reassembly(void **state)
{
	static uint8_t image[100000];
	for (size_t i = 0; i < sizeof(image); i++)
		image[i] = (uint8_t)(i * 7 + (i >> 9));
	size_t lens[1024];
	uint32_t n;
	uint8_t **c = cut(0xabcd, 1, image, sizeof(image), 1416, lens, &n);
	assert_int_equal(n, (sizeof(image) + 1416 - KV_CHUNK_HDR - 1) / (1416 - KV_CHUNK_HDR));
	/* r1 in order; r2 in another order, with a snapshot of r1 mid-image
	 * installed in a third replica */
	uint8_t *img = NULL;
	uint32_t len = 0;
	uint64_t id = 0;
	static struct server r3;
	for (uint32_t i = 0; i < n; i++) {
		int rc = kv_chunk_deliver(&r1, 100 + i, c[i], (uint32_t)lens[i], &img, &len, &id);
		assert_int_equal(rc, i + 1 == n ? 1 : 0);
		if (i == n / 2) {
			struct kv_buf b = { 0 };
			kv_chunk_save(&r1, &b);
			size_t used = 0;
			assert_int_equal(kv_chunk_load(&r3, (const uint8_t *)b.p, b.len, &used), 0);
			assert_int_equal(used, b.len);
			assert_int_equal(r3.n_bigs, 1);
			/* cut short or with a length that lies: refused, nothing changed */
			assert_int_equal(kv_chunk_load(&r2, (const uint8_t *)b.p, b.len - 1, &used),
					 -EINVAL);
			((uint8_t *)b.p)[3] = KV_BIG_MAX + 1;
			assert_int_equal(kv_chunk_load(&r2, (const uint8_t *)b.p, b.len, &used), -EINVAL);
			assert_int_equal(r2.n_bigs, 0);
			kv_buf_free(&b);
		}
	}
	assert_int_equal(id, 0xabcdull << 32 | 1);
	assert_int_equal(len, sizeof(image));
	assert_memory_equal(img, image, sizeof(image));
	free(img);
	assert_int_equal(r1.n_bigs, 0);
	/* r3 completes from the snapshot with the rest */
	for (uint32_t i = n / 2 + 1; i < n; i++) {
		int rc = kv_chunk_deliver(&r3, 100 + i, c[i], (uint32_t)lens[i], &img, &len, &id);
		assert_int_equal(rc, i + 1 == n ? 1 : 0);
	}
	assert_int_equal(len, sizeof(image));
	assert_memory_equal(img, image, sizeof(image));
	free(img);
	/* r2: backwards */
	for (uint32_t i = n; i-- > 0;) {
		int rc = kv_chunk_deliver(&r2, 500 + n - i, c[i], (uint32_t)lens[i], &img, &len, &id);
		assert_int_equal(rc, i == 0 ? 1 : 0);
	}
	assert_memory_equal(img, image, sizeof(image));
	free(img);
	free_chunks(c, n);
	kv_chunk_reset(&r3);
}

static void test_partials(void **state)
{
	static uint8_t image[5000];
	memset(image, 'x', sizeof(image));
	size_t lens[1024];
	uint32_t n;
	uint8_t *img = NULL;
	uint32_t len;
	uint64_t id;
	/* proposer 7's image 1 half delivered, then its image 2 begins: 1 dropped */
	uint8_t **a = cut(7, 1, image, sizeof(image), 1000, lens, &n);
	assert_int_equal(kv_chunk_deliver(&r1, 1, a[0], (uint32_t)lens[0], &img, &len, &id), 0);
	uint8_t **b = cut(7, 2, image, sizeof(image), 1000, lens, &n);
	assert_int_equal(kv_chunk_deliver(&r1, 2, b[0], (uint32_t)lens[0], &img, &len, &id), 0);
	assert_int_equal(r1.n_bigs, 1);
	assert_int_equal(r1.bigs[0].id, 7ull << 32 | 2);
	/* late chunks of image 1 (given up) change nothing: image 2 completes */
	for (uint32_t i = 1; i < n; i++)
		assert_int_equal(kv_chunk_deliver(&r1, 10 + i, a[i], (uint32_t)lens[i], &img, &len, &id),
				 0);
	assert_int_equal(r1.n_bigs, 1);
	assert_int_equal(r1.bigs[0].id, 7ull << 32 | 2);
	for (uint32_t i = 1; i < n; i++)
		assert_int_equal(kv_chunk_deliver(&r1, 20 + i, b[i], (uint32_t)lens[i], &img, &len, &id),
				 i + 1 == n ? 1 : 0);
	assert_int_equal(id, 7ull << 32 | 2);
	assert_memory_equal(img, image, sizeof(image));
	free(img);
	assert_int_equal(r1.n_bigs, 0);
	free_chunks(a, n);
	free_chunks(b, n);
	kv_chunk_reset(&r1);

	/* KV_BIG_MAX proposers' partials, then one more: the earliest goes */
	for (uint32_t p = 0; p <= KV_BIG_MAX; p++) {
		uint8_t **c = cut(100 + p, 1, image, sizeof(image), 1000, lens, &n);
		assert_int_equal(kv_chunk_deliver(&r1, 1000 + p, c[0], (uint32_t)lens[0], &img, &len,
						  &id), 0);
		free_chunks(c, n);
	}
	assert_int_equal(r1.n_bigs, KV_BIG_MAX);
	for (uint32_t i = 0; i < r1.n_bigs; i++)
		assert_true(r1.bigs[i].first > 1000); /* proposer 100 went */
	kv_chunk_reset(&r1);

	/* malformed */
	uint8_t **c = cut(9, 1, image, sizeof(image), 1000, lens, &n);
	uint8_t bad[1000];
	memcpy(bad, c[1], lens[1]);
	kv_put32(bad + KV_ENTRY_HDR + 8, KV_BIG_TOTAL_MAX + 1); /* total over the limit */
	assert_int_equal(kv_chunk_deliver(&r1, 1, bad, (uint32_t)lens[1], &img, &len, &id), -1);
	memcpy(bad, c[1], lens[1]);
	kv_put32(bad + KV_ENTRY_HDR + 12, sizeof(image) - 10); /* bytes past the total */
	assert_int_equal(kv_chunk_deliver(&r1, 1, bad, (uint32_t)lens[1], &img, &len, &id), -1);
	assert_int_equal(kv_chunk_deliver(&r1, 1, c[1], 10, &img, &len, &id), -1); /* short */
	assert_int_equal(kv_chunk_deliver(&r1, 1, c[1], (uint32_t)lens[1], &img, &len, &id), 0);
	memcpy(bad, c[2], lens[2]);
	kv_put32(bad + KV_ENTRY_HDR + 8, sizeof(image) + 1);       /* another total, same id */
	assert_int_equal(kv_chunk_deliver(&r1, 2, bad, (uint32_t)lens[2], &img, &len, &id), -1);
	assert_int_equal(r1.n_bigs, 1);
	free_chunks(c, n);
	kv_chunk_reset(&r1);
	assert_int_equal(r1.n_bigs, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reassembly),
		cmocka_unit_test(test_partials),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
