/*
 * fuzz_kv.c — libFuzzer target: arbitrary bytes through the KV store's two
 * parsers (src/consensus/kv.h): the RESP request parser a client reaches
 * over TCP, and the log-entry decoder every replica runs on each chosen
 * Paxos value.
 *
 *   input ──► kv_resp_parse (loop) ──► commands ──► kv_store_apply (store A)
 *         │                                    └──► kv_store_apply (store B)
 *         └─► kv_entry_valid (as given, and behind a well-formed header)
 *
 * Invariants: the parser never consumes more than it was given, returns 0
 * (incomplete) only on a prefix, fills argc within [0, max] (0: an empty line) with lengths that
 * fit the scratch buffer, and explains every refusal (a non-empty RESP error);
 * applying the same commands in the same order to two fresh stores gives the
 * same digest (replicas must agree) and every reply is a well-formed RESP
 * start byte; the entry decoder accepts or refuses without reading out of
 * bounds (ASan checks that).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "consensus/kv.h"

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_kv: %s:%d: check failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                           \
			abort();                                                            \
		}                                                                           \
	} while (0)

#define MAX_ARGS 64
#define SCRATCH  (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char scratch[SCRATCH + 1];

static void replies_ok(const struct kv_buf *b)
{
	if (b->len == 0)
		return;
	char c = b->p[0];
	CHECK(c == '+' || c == '-' || c == ':' || c == '$' || c == '*');
}

static void fuzz_resp(const uint8_t *data, size_t size)
{
	struct kv_store *a = kv_store_create(), *b = kv_store_create();
	CHECK(a != NULL && b != NULL);
	size_t off = 0;
	for (int n = 0; n < 256 && off < size; n++) {
		int argc = 0;
		char *argv[MAX_ARGS];
		size_t lens[MAX_ARGS];
		char err[256] = "";
		ssize_t used = kv_resp_parse((const char *)data + off, size - off, &argc, argv, lens,
					     MAX_ARGS, scratch, sizeof(scratch), err, sizeof(err));
		if (used < 0) {
			CHECK(err[0] != '\0');
			break;
		}
		if (used == 0)
			break;
		CHECK((size_t)used <= size - off);
		CHECK(argc >= 0 && argc <= MAX_ARGS);
		for (int i = 0; i < argc; i++)
			CHECK(argv[i] >= scratch && argv[i] + lens[i] <= scratch + sizeof(scratch));
		off += (size_t)used;
		if (argc == 0)
			continue; /* an empty line or "*0": the server skips it too */

		struct kv_buf ra = { 0 }, rb = { 0 };
		kv_store_apply(a, argc, argv, lens, &ra);
		kv_store_apply(b, argc, argv, lens, &rb);
		replies_ok(&ra);
		CHECK(ra.len == rb.len && (ra.len == 0 || memcmp(ra.p, rb.p, ra.len) == 0));
		kv_buf_free(&ra);
		kv_buf_free(&rb);
	}
	CHECK(kv_store_digest(a) == kv_store_digest(b));
	kv_store_destroy(a);
	kv_store_destroy(b);
}

static void fuzz_entry(const uint8_t *data, size_t size)
{
	if (size > UINT32_MAX - 8)
		return;
	(void)kv_entry_valid(data, (uint32_t)size);
	/* Behind a well-formed header ('K' 'V' version 1, flags 0, n_groups from
	 * the first input byte) so the group and command walk is reached. */
	uint8_t *v = malloc(size + 6);
	CHECK(v != NULL);
	v[0] = 'K';
	v[1] = 'V';
	v[2] = 1;
	v[3] = 0;
	v[4] = 0;
	v[5] = size ? (uint8_t)(data[0] & 7) : 0;
	if (size)
		memcpy(v + 6, data, size);
	(void)kv_entry_valid(v, (uint32_t)size + 6);
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_resp(data, size);
	fuzz_entry(data, size);
	return 0;
}
