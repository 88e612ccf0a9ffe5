/*
 * kv_chunk.c — log entries larger than one consensus value: a write whose
 * encoding does not fit one entry (a value up to proto-max-bulk-len) goes
 * through the log as chunks, one entry each, and every replica puts the
 * chunks back together and applies the whole where its last chunk lands in
 * the log (docs/consensus.md, "Large values").
 *
 *   the whole (the image): a KV batch with flag WIDE (u32 argc and lengths)
 *     +-----+-----+---+------+-----------+----------+  +-----------+----------+-------+---+
 *     | 'K' | 'V' | 2 | WIDE | n_groups 1| u64 stamp|  | u32 client| u16 n    | u8 db | 0 |
 *     +-----+-----+---+------+-----------+----------+  +-----------+----------+-------+---+
 *     then n commands: u32 argc, per argument u32 length, bytes (n = 1, or a
 *     MULTI ... EXEC block)
 *
 *   chunk k of it: a log entry of its own
 *     +-----+-----+---+-------+-----------+----------+--------+-----------+------------+-------+
 *     | 'K' | 'V' | 2 | CHUNK | n_groups 0| u64 stamp| u64 id | u32 total | u32 offset | bytes |
 *     +-----+-----+---+-------+-----------+----------+--------+-----------+------------+-------+
 *
 *   Every chunk moves log time to its stamp like any entry (expiring the
 *   keys due); the image, applied where its last chunk lands, carries the
 *   stamp of when its first chunk went out.
 *
 *   id = the proposing replica's client id << 32 | its own count of large
 *   entries. A replica keeps each image being reassembled (a partial) as
 *   replicated state — a snapshot carries the partials (kv_snapshot.c), so a
 *   replica that installs one mid-image completes it like the others — and:
 *
 *   - applies the image when `total` bytes came (chunks may land in any
 *     order; the learner's request-id deduplication keeps a chunk chosen
 *     twice from counting twice);
 *   - drops a partial when a chunk of a newer image of the same proposer
 *     arrives (a proposer sends one image at a time, the next only once the
 *     previous was applied or failed: a partial left behind is one the
 *     proposer gave up), and a late chunk of an older image than a partial
 *     of the same proposer; when KV_BIG_MAX partials exist and another
 *     begins, the one whose first chunk came earliest — all decided by the
 *     log alone, so every replica drops the same.
 *
 * The proposing side (kv_server.c) sends an image's chunks through its
 * window of entries like any other entry, and answers the connection when
 * the image is applied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)kv_get32(p) << 32 | kv_get32(p + 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	kv_put32(p, (uint32_t)(v >> 32));
	kv_put32(p + 4, (uint32_t)v);
}

static void big_free(struct server *s, uint32_t i)
{
	free(s->bigs[i].buf);
	s->bigs[i] = s->bigs[--s->n_bigs];
}

int kv_chunk_deliver(struct server *s, uint64_t instance, const uint8_t *v, uint32_t len,
		     uint8_t **img, uint32_t *img_len, uint64_t *id)
{
	if (len < KV_CHUNK_HDR || v[4] != 0 || v[5] != 0)
		return -1;
	uint64_t cid = get64(v + KV_ENTRY_HDR);
	uint32_t total = kv_get32(v + KV_ENTRY_HDR + 8), off = kv_get32(v + KV_ENTRY_HDR + 12);
	uint32_t n = len - KV_CHUNK_HDR;
	if (cid == 0 || total == 0 || total > KV_BIG_TOTAL_MAX || off > total || n > total - off)
		return -1;
	struct kv_big *b = NULL;
	for (uint32_t i = 0; i < s->n_bigs; i++)
		if (s->bigs[i].id == cid)
			b = &s->bigs[i];
	if (b == NULL) {
		/* another image of the same proposer: it sends one at a time, in
		 * order (the low half of the id counts them), so of the two the
		 * older was given up — its partial goes, or, if this chunk is the
		 * older's (a late one), the chunk does */
		for (uint32_t i = 0; i < s->n_bigs; i++)
			if (s->bigs[i].id >> 32 == cid >> 32 && (uint32_t)s->bigs[i].id > (uint32_t)cid)
				return 0;
		for (uint32_t i = 0; i < s->n_bigs;)
			if (s->bigs[i].id >> 32 == cid >> 32)
				big_free(s, i);
			else
				i++;
		if (s->n_bigs == KV_BIG_MAX) {
			uint32_t oldest = 0;
			for (uint32_t i = 1; i < s->n_bigs; i++)
				if (s->bigs[i].first < s->bigs[oldest].first)
					oldest = i;
			big_free(s, oldest);
		}
		uint8_t *buf = calloc(1, total);
		if (buf == NULL)
			return -ENOMEM;
		b = &s->bigs[s->n_bigs++];
		*b = (struct kv_big){ .id = cid, .first = instance, .total = total, .buf = buf };
	}
	if (b->total != total)
		return -1; /* not the image this id began: counted, ignored */
	memcpy(b->buf + off, v + KV_CHUNK_HDR, n);
	b->got += n;
	if (b->got < b->total)
		return 0;
	*img = b->buf;
	*img_len = b->total;
	*id = b->id;
	b->buf = NULL;
	big_free(s, (uint32_t)(b - s->bigs));
	return 1;
}

void kv_chunk_save(const struct server *s, struct kv_buf *b)
{
	uint8_t t[24];
	kv_put32(t, s->n_bigs);
	kv_buf_append(b, t, 4);
	for (uint32_t i = 0; i < s->n_bigs; i++) {
		const struct kv_big *g = &s->bigs[i];
		put64(t, g->id);
		put64(t + 8, g->first);
		kv_put32(t + 16, g->total);
		kv_put32(t + 20, g->got);
		kv_buf_append(b, t, 24);
		kv_buf_append(b, g->buf, g->total);
	}
}

int kv_chunk_parse(const uint8_t *p, size_t len, struct kv_big *out, uint32_t *n_out,
		   size_t *used)
{
	if (len < 4)
		return -EINVAL;
	uint32_t n = kv_get32(p);
	size_t pos = 4;
	if (n > KV_BIG_MAX)
		return -EINVAL;
	uint32_t k = 0;
	int rc = 0;
	for (; k < n; k++) {
		if (len - pos < 24) {
			rc = -EINVAL;
			break;
		}
		struct kv_big g = { .id = get64(p + pos), .first = get64(p + pos + 8),
				    .total = kv_get32(p + pos + 16), .got = kv_get32(p + pos + 20) };
		pos += 24;
		if (g.id == 0 || g.total == 0 || g.total > KV_BIG_TOTAL_MAX || g.got >= g.total ||
		    len - pos < g.total) {
			rc = -EINVAL;
			break;
		}
		if ((g.buf = malloc(g.total)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		memcpy(g.buf, p + pos, g.total);
		pos += g.total;
		out[k] = g;
	}
	if (rc != 0) {
		kv_chunk_free(out, k);
		return rc;
	}
	*n_out = n;
	*used = pos;
	return 0;
}

void kv_chunk_free(struct kv_big *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		free(b[i].buf);
}

void kv_chunk_install(struct server *s, const struct kv_big *b, uint32_t n)
{
	kv_chunk_reset(s);
	memcpy(s->bigs, b, n * sizeof(b[0]));
	s->n_bigs = n;
}

int kv_chunk_load(struct server *s, const uint8_t *p, size_t len, size_t *used)
{
	struct kv_big in[KV_BIG_MAX];
	uint32_t n = 0;
	int rc = kv_chunk_parse(p, len, in, &n, used);
	if (rc == 0)
		kv_chunk_install(s, in, n);
	return rc;
}

void kv_chunk_reset(struct server *s)
{
	while (s->n_bigs > 0)
		big_free(s, 0);
}

/* ---- the proposing side -------------------------------------------------- */

size_t kv_chunk_next(struct server *s, const uint8_t *image, uint32_t total, uint8_t *entry,
		     size_t cap)
{
	if (s->big_off >= total || cap <= KV_CHUNK_HDR)
		return 0;
	uint32_t n = total - s->big_off;
	if (n > cap - KV_CHUNK_HDR)
		n = (uint32_t)(cap - KV_CHUNK_HDR);
	entry[0] = KV_ENTRY_MAGIC0;
	entry[1] = KV_ENTRY_MAGIC1;
	entry[2] = KV_ENTRY_VERSION;
	entry[3] = KV_ENTRY_F_CHUNK;
	entry[4] = entry[5] = 0;  /* n_groups */
	put64(entry + 6, (uint64_t)kv_wall_ms()); /* log time, as every entry */
	put64(entry + KV_ENTRY_HDR, s->big_id);
	kv_put32(entry + KV_ENTRY_HDR + 8, total);
	kv_put32(entry + KV_ENTRY_HDR + 12, s->big_off);
	memcpy(entry + KV_CHUNK_HDR, image + s->big_off, n);
	s->big_off += n;
	return KV_CHUNK_HDR + n;
}
