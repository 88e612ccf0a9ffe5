/*
 * kv_feed.c — the KV store as redis's replication sees it: the RDB file a
 * follower starts from (SYNC/PSYNC's payload) and the stream of changes
 * after it, each change written as the command that makes it on a redis
 * replica. With it a redis-server can be a read replica of an innet kv
 * replica (REPLICAOF), and a tool that tails redis's replication stream
 * can tail innet kv's log. The server side (followers, PSYNC's reply,
 * PINGs) is kv_server.c and kv_admin.c.
 *
 * The stream follows redis 7.0's propagation rules for the commands the
 * store has: relative expire times become absolute (SET k v PXAT ms,
 * PEXPIREAT), GETDEL is DEL, GETEX is PEXPIREAT, PERSIST or DEL, GETSET is
 * SET, INCRBYFLOAT is SET k v KEEPTTL, HINCRBYFLOAT is HSET, SPOP is SREM,
 * a key deleted by log time is DEL, a command that changed nothing is not
 * fed, SELECT precedes a change in another database, and a MULTI block
 * whose changes are several goes out inside MULTI ... EXEC (one change
 * alone, none: nothing). Every replica of the log produces the same stream
 * from the same log.
 *
 *   RDB (version 9):  "REDIS0009" | FA aux "redis-ver" | per database with
 *   keys: FE db, FB size expires, per key [FC ms(u64 LE)] type key value |
 *   FF | CRC-64 (u64 LE)      types: 0 string, 1 list, 2 set, 4 hash
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/kv_store.h"

void kv_store_set_feed(struct kv_store *s, struct kv_buf *feed)
{
	s->feed = feed;
	s->feed_db = -1;
}

void kv_store_feed_select(struct kv_store *s)
{
	s->feed_db = -1;
}

static void resp_cmd(struct kv_buf *b, int argc, const char *const *argv, const size_t *lens)
{
	kv_buf_num(b, '*', argc);
	for (int i = 0; i < argc; i++)
		kv_buf_bulk(b, argv[i], lens[i]);
}

static void feed_select(struct kv_store *s, int db)
{
	if (db == s->feed_db)
		return;
	char n[8];
	int l = snprintf(n, sizeof(n), "%d", db);
	resp_cmd(s->feed, 2, (const char *const[]){ "SELECT", n }, (const size_t[]){ 6, (size_t)l });
	s->feed_db = db;
}

void kv_propagate(struct kv_call *c, int argc, const char *const *argv, const size_t *lens)
{
	c->propagated = true;
	struct kv_store *s = c->s;
	if (s->feed == NULL)
		return;
	if (c->ctx != NULL && c->ctx->multi) {
		/* held for EXEC: u8 db, u32 length, the command */
		struct kv_buf cmd = { 0 };
		resp_cmd(&cmd, argc, argv, lens);
		uint8_t hdr[5] = { (uint8_t)c->dbi, (uint8_t)(cmd.len >> 24), (uint8_t)(cmd.len >> 16),
				   (uint8_t)(cmd.len >> 8), (uint8_t)cmd.len };
		kv_buf_append(&c->ctx->multi_feed, hdr, sizeof(hdr));
		kv_buf_append(&c->ctx->multi_feed, cmd.p, cmd.len);
		if (cmd.oom)
			c->ctx->multi_feed.oom = true;
		kv_buf_free(&cmd);
		c->ctx->multi_feed_n++;
		return;
	}
	feed_select(s, (int)c->dbi);
	resp_cmd(s->feed, argc, argv, lens);
}

void kv_propagatef(struct kv_call *c, ...)
{
	const char *argv[8];
	size_t lens[8];
	int argc = 0;
	va_list ap;
	va_start(ap, c);
	for (const char *a; argc < 8 && (a = va_arg(ap, const char *)) != NULL; argc++) {
		argv[argc] = a;
		lens[argc] = strlen(a);
	}
	va_end(ap);
	kv_propagate(c, argc, argv, lens);
}

void kv_feed_expired(struct kv_store *s, const struct kv_obj *o)
{
	if (s->feed == NULL)
		return;
	feed_select(s, o->db);
	resp_cmd(s->feed, 2, (const char *const[]){ "DEL", o->node.key },
		 (const size_t[]){ 3, o->node.klen });
}

void kv_feed_block(struct kv_store *s, struct kv_ctx *ctx)
{
	struct kv_buf *b = &ctx->multi_feed;
	uint32_t n = ctx->multi_feed_n;
	ctx->multi_feed_n = 0;
	if (s->feed == NULL || n == 0 || b->oom) {
		b->len = 0;
		b->oom = false;
		return;
	}
	const uint8_t *p = (const uint8_t *)b->p;
	bool wrap = n > 1;
	for (size_t pos = 0; pos + 5 <= b->len;) {
		size_t len = (size_t)p[pos + 1] << 24 | (size_t)p[pos + 2] << 16 |
			     (size_t)p[pos + 3] << 8 | p[pos + 4];
		feed_select(s, p[pos]);
		if (wrap) {
			kv_buf_str(s->feed, "*1\r\n$5\r\nMULTI\r\n");
			wrap = false;
		}
		kv_buf_append(s->feed, p + pos + 5, len);
		pos += 5 + len;
	}
	if (n > 1)
		kv_buf_str(s->feed, "*1\r\n$4\r\nEXEC\r\n");
	b->len = 0;
}

/* ---- RDB ---- */

uint64_t kv_crc64(uint64_t crc, const void *p, size_t n)
{
	static uint64_t table[256];
	if (table[1] == 0) {
		for (int i = 0; i < 256; i++) {
			uint64_t r = (uint64_t)i;
			for (int k = 0; k < 8; k++)
				r = r & 1 ? (r >> 1) ^ 0x95ac9329ac4bc9b5ull : r >> 1; /* 0xad93d23594c935a9 reflected */
			table[i] = r;
		}
	}
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		crc = table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
	return crc;
}

static void rdb_len(struct kv_buf *b, uint64_t n)
{
	uint8_t t[9];
	size_t k;
	if (n < 64) {
		t[0] = (uint8_t)n;
		k = 1;
	} else if (n < 16384) {
		t[0] = (uint8_t)(0x40 | (n >> 8));
		t[1] = (uint8_t)n;
		k = 2;
	} else if (n <= UINT32_MAX) {
		t[0] = 0x80;
		for (int i = 0; i < 4; i++)
			t[1 + i] = (uint8_t)(n >> (24 - 8 * i));
		k = 5;
	} else {
		t[0] = 0x81;
		for (int i = 0; i < 8; i++)
			t[1 + i] = (uint8_t)(n >> (56 - 8 * i));
		k = 9;
	}
	kv_buf_append(b, t, k);
}

static void rdb_str(struct kv_buf *b, const char *p, size_t n)
{
	rdb_len(b, n);
	kv_buf_append(b, p, n);
}

void kv_store_rdb(const struct kv_store *s, struct kv_buf *b)
{
	size_t start = b->len;
	kv_buf_str(b, "REDIS0009");
	uint8_t op = 0xfa;
	kv_buf_append(b, &op, 1);
	rdb_str(b, "redis-ver", 9);
	rdb_str(b, "7.0.15", 6);
	for (uint32_t db = 0; db < KV_DBS; db++) {
		size_t keys, expires;
		kv_store_db_info(s, db, &keys, &expires);
		if (keys == 0)
			continue;
		op = 0xfe;
		kv_buf_append(b, &op, 1);
		rdb_len(b, db);
		op = 0xfb;
		kv_buf_append(b, &op, 1);
		rdb_len(b, keys);
		rdb_len(b, expires);
		kv_dict_foreach(&s->db[db], i, nd) {
			const struct kv_obj *o = (const struct kv_obj *)nd;
			if (o->heap != 0) {
				uint8_t t[9] = { 0xfc };
				for (int k = 0; k < 8; k++)
					t[1 + k] = (uint8_t)((uint64_t)o->expire >> (8 * k));
				kv_buf_append(b, t, 9);
			}
			static const uint8_t types[] = { 0, 4, 1, 2 }; /* string hash list set */
			kv_buf_append(b, &types[o->type], 1);
			rdb_str(b, nd->key, nd->klen);
			if (o->type == KV_T_STRING) {
				rdb_str(b, o->p ? o->p : "", o->len);
			} else if (o->type == KV_T_LIST) {
				rdb_len(b, o->n_items);
				for (size_t k = 0; k < o->n_items; k++)
					rdb_str(b, o->items[o->head + k].p, o->items[o->head + k].len);
			} else {
				rdb_len(b, o->fields.n);
				kv_dict_foreach(&o->fields, j, fn) {
					rdb_str(b, fn->key, fn->klen);
					if (o->type == KV_T_HASH)
						rdb_str(b, ((const struct kv_field *)fn)->val,
							((const struct kv_field *)fn)->vlen);
				}
			}
		}
	}
	op = 0xff;
	kv_buf_append(b, &op, 1);
	if (b->oom)
		return;
	uint64_t crc = kv_crc64(0, b->p + start, b->len - start);
	uint8_t t[8];
	for (int k = 0; k < 8; k++)
		t[k] = (uint8_t)(crc >> (8 * k));
	kv_buf_append(b, t, 8);
}
