/*
 * test_kv_store.c — the KV store (src/consensus/kv_store.c) when memory runs out:
 * no abort, no crash, no half-made state. Every allocation of a SET, an
 * MSET and an INCR is made to fail in turn (tests/unit/oom.h): each either
 * completes — the value is there, the store is healthy — or leaves the
 * store marked out of memory (kv_store_oom: the server then stops, since
 * its copy of the log is no longer the others'), with every earlier key
 * intact and nothing leaked. A reply buffer that cannot grow says so
 * (kv_buf.oom) instead of growing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "unit/oom.h"
#include "unit/testutil.h"
#include "consensus/kv.h"

static void apply(struct kv_store *s, struct kv_buf *out, int argc, ...)
{
	char *argv[8];
	size_t lens[8];
	va_list ap;
	va_start(ap, argc);
	for (int i = 0; i < argc; i++) {
		argv[i] = va_arg(ap, char *);
		lens[i] = strlen(argv[i]);
	}
	va_end(ap);
	kv_store_apply(s, argc, argv, lens, out);
}

/* GET key's reply: the bulk string's contents, or "(nil)". */
static const char *get(struct kv_store *s, const char *key)
{
	static char v[256];
	struct kv_buf out = { 0 };
	apply(s, &out, 2, "GET", key);
	assert_false(out.oom);
	assert_true(out.len > 0);
	if (out.p[0] == '$' && out.p[1] == '-') {
		strcpy(v, "(nil)");
	} else {
		char *body = memchr(out.p, '\n', out.len) + 1;
		size_t n = (size_t)(out.p + out.len - body) - 2;
		memcpy(v, body, n);
		v[n] = '\0';
	}
	kv_buf_free(&out);
	return v;
}

static void test_writes_under_oom(void **state)
{
	if (!OOM_INJECTION)
		test_skip("no allocation failure injection under a sanitizer's allocator (tests/unit/oom.h)");
	static const struct {
		int argc;
		const char *argv[5];
		const char *key, *want;
	} writes[] = {
		{ 3, { "SET", "new", "value" }, "new", "value" },
		{ 3, { "SET", "old", "changed" }, "old", "changed" },
		{ 5, { "MSET", "m1", "x", "m2", "y" }, "m2", "y" },
		{ 2, { "INCR", "n" }, "n", "8" },
	};
	for (size_t w = 0; w < sizeof(writes) / sizeof(writes[0]); w++) {
		int completed = 0, refused = 0;
		for (long k = 0; k < 64; k++) {
			long live0 = oom_live;
			struct kv_store *s = kv_store_create();
			assert_non_null(s);
			struct kv_buf out = { 0 };
			apply(s, &out, 3, "SET", "old", "kept");
			apply(s, &out, 3, "SET", "n", "7");
			kv_buf_free(&out);
			memset(&out, 0, sizeof(out));
			oom_countdown = k;
			kv_store_apply(s, writes[w].argc, (char *const *)writes[w].argv,
				       (size_t[]){ strlen(writes[w].argv[0]),
						   strlen(writes[w].argv[1]),
						   writes[w].argc > 2 ? strlen(writes[w].argv[2]) : 0,
						   writes[w].argc > 3 ? strlen(writes[w].argv[3]) : 0,
						   writes[w].argc > 4 ? strlen(writes[w].argv[4]) : 0 },
				       &out);
			oom_countdown = -1;
			bool oom = kv_store_oom(s);
			if (oom) {
				refused++;
				/* what was there before is still there */
				if (strcmp(writes[w].key, "old") != 0)
					assert_string_equal(get(s, "old"), "kept");
			} else {
				completed++;
				assert_string_equal(get(s, writes[w].key), writes[w].want);
			}
			kv_buf_free(&out);
			kv_store_destroy(s);
			assert_int_equal(oom_live, live0);   /* nothing leaked either way */
			if (!oom && k > 8)
				break;   /* past its last allocation */
		}
		assert_true(refused > 0);     /* some allocation of it did fail */
		assert_true(completed > 0);   /* and with enough memory it works */
	}
}

static void test_buffer_oom(void **state)
{
	if (!OOM_INJECTION)
		test_skip("no allocation failure injection under a sanitizer's allocator (tests/unit/oom.h)");
	struct kv_buf b = { 0 };
	assert_int_equal(kv_buf_append(&b, "abc", 3), 0);
	oom_countdown = 0;
	char big[1024];
	memset(big, 'x', sizeof(big));
	assert_int_equal(kv_buf_append(&b, big, sizeof(big)), -ENOMEM);
	oom_countdown = -1;
	assert_true(b.oom);
	assert_int_equal(b.len, 3);   /* nothing of it appended */
	assert_memory_equal(b.p, "abc", 3);
	kv_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writes_under_oom),
		cmocka_unit_test(test_buffer_oom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
