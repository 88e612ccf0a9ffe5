/*
 * fuzz_kv.c — libFuzzer target: arbitrary bytes through the KV store's two
 * parsers (src/consensus/kv.h): the RESP request parser a client reaches
 * over TCP, and the log-entry decoder every replica runs on each chosen
 * Paxos value.
 *
 *   input ──► kv_resp_parse (loop) ──► commands ──► kv_store_exec (store A, feed A)
 *         │                                    └──► kv_store_exec (store B, feed B)
 *         │        (log time advanced between commands, database and RESP
 *         │         version switched, by bytes of the input)
 *         ├─► store A saved and loaded (snapshot), and written as an RDB
 *         ├─► kv_entry_valid (as given, and behind a well-formed header,
 *         │                   u16 or u32 lengths)
 *         └─► kv_chunk_deliver (slices of it as chunk entries of large ones)
 *
 * Invariants: the parser never consumes more than it was given, returns 0
 * (incomplete) only on a prefix, fills argc within [0, max] (0: an empty line) with lengths that
 * fit the scratch buffer, and explains every refusal (a non-empty RESP error);
 * applying the same commands with the same log times to two fresh stores
 * gives the same replies, the same replication feed and the same digest
 * (replicas must agree), every reply is a well-formed RESP start byte, and
 * a store loaded from the other's snapshot has its digest; the entry
 * decoder accepts or refuses without reading out of bounds (ASan checks
 * that); the chunk reassembly keeps at most KV_BIG_MAX partials, never
 * writes past one, and hands out only whole images. Strings are capped at
 * 1 MB here (kv_store_set_string_max), so that SETRANGE/SETBIT far out
 * cannot allocate the 512 MB a server allows.
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
	kv_store_set_string_max(a, 1u << 20);
	kv_store_set_string_max(b, 1u << 20);
	struct kv_buf fa = { 0 }, fb = { 0 };
	kv_store_set_feed(a, &fa);
	kv_store_set_feed(b, &fb);
	struct kv_ctx ca = { .resp = 2 }, cb = { .resp = 2 };
	int64_t now = 1700000000000ll;
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
		/* the byte after the command: log time and context for the next */
		uint8_t k = data[off + (size_t)used - 1];
		off += (size_t)used;
		if (argc == 0)
			continue; /* an empty line or "*0": the server skips it too */
		if (k & 1) {
			now += (int64_t)(k >> 1) * 7;   /* an entry's stamp, sometimes later */
			kv_store_advance(a, now);
			kv_store_advance(b, now);
		}
		if ((k & 0x0e) == 0x0e) {              /* a group's end: context reset */
			kv_ctx_end(&ca);
			kv_ctx_end(&cb);
			ca.db = cb.db = (uint32_t)(k >> 4) % KV_DBS;
			ca.resp = cb.resp = (k & 0x10) ? 3 : 2;
		}

		struct kv_buf ra = { 0 }, rb = { 0 };
		kv_store_exec(a, &ca, argc, argv, lens, &ra);
		kv_store_exec(b, &cb, argc, argv, lens, &rb);
		replies_ok(&ra);
		CHECK(ra.len == rb.len && (ra.len == 0 || memcmp(ra.p, rb.p, ra.len) == 0));
		kv_buf_free(&ra);
		kv_buf_free(&rb);
		CHECK(fa.len == fb.len && (fa.len == 0 || memcmp(fa.p, fb.p, fa.len) == 0));
		CHECK(!kv_store_oom(a));
	}
	kv_ctx_end(&ca);
	kv_ctx_end(&cb);
	CHECK(kv_store_digest(a) == kv_store_digest(b));

	/* a snapshot of A loads into a store with A's digest; A as an RDB */
	struct kv_buf snap = { 0 };
	kv_store_save(a, &snap);
	char err[128];
	struct kv_store *c = kv_store_load((const uint8_t *)snap.p, snap.len, err, sizeof(err));
	CHECK(c != NULL);
	CHECK(kv_store_digest(c) == kv_store_digest(a));
	kv_store_destroy(c);
	kv_buf_free(&snap);
	struct kv_buf rdb = { 0 };
	kv_store_rdb(a, &rdb);
	CHECK(rdb.len >= 18 && memcmp(rdb.p, "REDIS0009", 9) == 0);
	kv_buf_free(&rdb);

	kv_store_destroy(a);
	kv_store_destroy(b);
	kv_buf_free(&fa);
	kv_buf_free(&fb);
}

static void fuzz_entry(const uint8_t *data, size_t size)
{
	if (size > UINT32_MAX - 8)
		return;
	(void)kv_entry_valid(data, (uint32_t)size);
	/* Behind a well-formed header ('K' 'V' version 2, flags 0, n_groups from
	 * the first input byte, a stamp) so the group and command walk is
	 * reached. */
	uint8_t *v = malloc(size + 14);
	CHECK(v != NULL);
	memset(v, 0, 14);
	v[0] = 'K';
	v[1] = 'V';
	v[2] = 2;
	v[3] = size && (data[0] & 8) ? KV_ENTRY_F_WIDE : 0;
	v[5] = size ? (uint8_t)(data[0] & 7) : 0;
	if (size)
		memcpy(v + 14, data, size);
	(void)kv_entry_valid(v, (uint32_t)size + 14);
	free(v);
}

/* Slices of the input as chunk entries ('K' 'V' 2 CHUNK 0 0, stamp 0, then the
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
		memset(v, 0, KV_CHUNK_HDR);
		memcpy(v, "KV\2\2\0\0", 6);
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
