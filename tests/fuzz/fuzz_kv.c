/*
 * fuzz_kv.c — libFuzzer target: arbitrary bytes through the KV store's two
 * parsers (src/consensus/kv.h): the RESP request parser a client reaches
 * over TCP, and the log-entry decoder every replica runs on each chosen
 * Paxos value.
 *
 *   input ──► kv_resp_parse (loop) ──► commands ──► kv_store_apply (store A)
 *         │                                    └──► kv_store_apply (store B)
 *         ├─► kv_entry_valid (as given, and behind a well-formed header,
 *         │                   u16 or u32 lengths)
 *         └─► kv_chunk_deliver (slices of it as chunk entries of large ones)
 *
 * Invariants: the parser never consumes more than it was given, returns 0
 * (incomplete) only on a prefix, fills argc within [0, max] (0: an empty line) with lengths that
 * fit the scratch buffer, and explains every refusal (a non-empty RESP error);
 * applying the same commands in the same order to two fresh stores gives the
 * same digest (replicas must agree) and every reply is a well-formed RESP
 * start byte; the entry decoder accepts or refuses without reading out of
 * bounds (ASan checks that); the chunk reassembly keeps at most KV_BIG_MAX
 * partials, never writes past one, and hands out only whole images.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

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
					     MAX_ARGS, SCRATCH / 2, scratch, sizeof(scratch), err,
					     sizeof(err));
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
	v[3] = size && (data[0] & 8) ? KV_ENTRY_F_WIDE : 0;
	v[4] = 0;
	v[5] = size ? (uint8_t)(data[0] & 7) : 0;
	if (size)
		memcpy(v + 6, data, size);
	(void)kv_entry_valid(v, (uint32_t)size + 6);
	free(v);
}

/* Slices of the input as chunk entries ('K' 'V' 1 CHUNK 0 0, then the
 * input's bytes: id, total, offset, data), with small totals so that images
 * complete: at most KV_BIG_MAX partials, whole images only. */
static void fuzz_chunks(const uint8_t *data, size_t size)
{
	static struct server s;
	uint8_t v[KV_CHUNK_HDR + 64];
	for (size_t off = 0; off + 17 <= size && off < 4096; off += 17) {
		size_t n = data[off + 16] % 48;
		if (off + 17 + n > size)
			n = size - off - 17;
		memcpy(v, "KV\1\2\0\0", 6);
		memcpy(v + KV_ENTRY_HDR, data + off, 16);
		v[KV_ENTRY_HDR + 8] = v[KV_ENTRY_HDR + 9] = v[KV_ENTRY_HDR + 10] = 0; /* total < 256 */
		v[KV_ENTRY_HDR + 12] = v[KV_ENTRY_HDR + 13] = v[KV_ENTRY_HDR + 14] = 0;
		memcpy(v + KV_CHUNK_HDR, data + off + 17, n);
		uint8_t *img = NULL;
		uint32_t len = 0;
		uint64_t id = 0;
		int rc = kv_chunk_deliver(&s, off, v, (uint32_t)(KV_CHUNK_HDR + n), &img, &len, &id);
		CHECK(rc >= -1 && rc <= 1);
		CHECK(s.n_bigs <= KV_BIG_MAX);
		if (rc == 1) {
			CHECK(img != NULL && len > 0 && len < 256 && id != 0);
			free(img);
		}
	}
	kv_chunk_reset(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_resp(data, size);
	fuzz_entry(data, size);
	fuzz_chunks(data, size);
	return 0;
}
