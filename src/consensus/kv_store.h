/*
 * kv_store.h — what the KV store's command files share (kv_store.c: the
 * keyspace, expiry, versions, replies, the command table; kv_string.c,
 * kv_keys.c, kv_hash.c: the commands). Nothing outside the store includes
 * it: the server sees the store through consensus/kv.h.
 *
 *   struct kv_store
 *   +-- db[16]  struct kv_dict of struct kv_obj (key -> typed value)
 *   |             kv_obj: node | type enc db | expire, heap slot | version
 *   |                     | string bytes (p, len, cap) or a kv_dict of kv_field
 *   +-- heap     the volatile keys, a binary min-heap on expire (ms)
 *   +-- now      log time (ms): the largest stamp of the entries applied
 *   +-- version  counts modifications; each key keeps the one that last
 *   |            touched it, del_ver[slot(db,key)] the last deletion there
 *   +-- rng      random replies (RANDOMKEY, HRANDFIELD): never state
 *
 * Every replica applies the same entries with the same stamps, so all of
 * this but rng (which reads may advance) is the same on every replica at
 * the same log position.
 */
#ifndef INNET_CONSENSUS_KV_STORE_H
#define INNET_CONSENSUS_KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consensus/kv.h"
#include "consensus/kv_dict.h"

#define KV_DEL_SLOTS   16384u           /* deletion versions, by hash of (db, key) */
#define KV_STRING_MAX  (512ull << 20)   /* the longest string a command may build (redis's
                                         * proto-max-bulk-len default): fixed, so that every
                                         * replica refuses the same APPEND/SETRANGE/SETBIT */

enum kv_type { KV_T_STRING = 0, KV_T_HASH = 1, KV_T_LIST = 2, KV_T_SET = 3 };
/* What OBJECT ENCODING answers: redis's encodings, kept by the same rules
 * (a hash leaves listpack when it outgrows hash-max-listpack-*, never back;
 * APPEND, SETRANGE and SETBIT leave a raw string). Cosmetic: no command's
 * effect depends on it. */
enum kv_enc {
	KV_ENC_RAW = 0, KV_ENC_EMBSTR, KV_ENC_INT, KV_ENC_LISTPACK, KV_ENC_HASHTABLE,
	KV_ENC_QUICKLIST, KV_ENC_INTSET,
};

/* A list element. */
struct kv_elem {
	char *p;                /* len bytes (malloc'd, at least 1) */
	size_t len;
};

struct kv_obj {
	struct kv_dnode node;   /* in its database's dict (node.key = key) */
	uint8_t type;           /* enum kv_type */
	uint8_t enc;            /* enum kv_enc */
	uint8_t db;             /* its database */
	size_t heap;            /* 1 + its index in the expiry heap; 0: no expire */
	int64_t expire;         /* unix ms when it expires (heap != 0) */
	uint64_t version;       /* store->version when it was last modified */
	char *p;                /* string: bytes (cap allocated), NULL when empty */
	size_t len, cap;
	struct kv_dict fields;  /* hash: struct kv_field nodes; set: the same, val NULL */
	struct kv_elem *items;  /* list: items[head .. head + n_items) of cap_items */
	size_t head, n_items, cap_items;
	char key[];
};

struct kv_field {
	struct kv_dnode node;   /* in the hash's dict (node.key = key) */
	char *val;              /* vlen bytes (malloc'd, at least 1) */
	size_t vlen;
	char key[];
};

struct kv_store {
	struct kv_dict db[KV_DBS];
	struct kv_obj **heap;   /* the volatile keys, min-heap on expire */
	size_t heap_n, heap_cap;
	int64_t now;            /* log time, unix ms */
	uint64_t version;       /* modifications so far */
	uint64_t *del_ver;      /* [KV_DEL_SLOTS] the version of the last deletion per slot */
	uint64_t rng;           /* random replies */
	uint64_t removed;       /* learner ids removed from the trim group (REPLICA REMOVE) */
	uint32_t n_learners;    /* replicas of the log (learner ids 0..n-1); 0 = not known */
	uint32_t hash_max_entries, hash_max_value; /* hash-max-listpack-* (encodings only) */
	uint32_t set_max_intset;                   /* set-max-intset-entries (encodings only) */
	bool active_expire;     /* ticks expire keys when log time is idle (DEBUG
	                         * SET-ACTIVE-EXPIRE, through the log: every replica) */
	uint64_t string_max;    /* the longest string a command may build: KV_STRING_MAX
	                         * (kv_store_set_string_max: tests only) */
	long long (*publish)(void *arg, const char *ch, size_t chl, const char *msg, size_t ml);
	void *publish_arg;      /* PUBLISH's delivery (the server's), or NULL */
	struct kv_buf *feed;    /* redis's replication stream of the changes (kv_feed.c), or NULL */
	int feed_db;            /* the database the feed last SELECTed (-1: none yet) */
	bool oom;               /* a write found no memory: this copy is no longer the log's */
};

/* One command being applied. */
struct kv_call {
	struct kv_store *s;
	struct kv_ctx *ctx;
	struct kv_dict *db;     /* the database it runs in */
	uint32_t dbi;
	int argc;
	char *const *argv;
	const size_t *lens;
	struct kv_buf *out;     /* its reply */
	int resp;               /* 2 or 3 */
	bool propagated;        /* it wrote its own form into the feed (kv_propagate) */
};

/* ---- replies (kv_store.c) ---- */
void kv_reply_ok(struct kv_call *c);
void kv_reply_raw(struct kv_call *c, const char *resp);         /* a complete RESP reply */
void kv_reply_err(struct kv_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kv_reply_syntax(struct kv_call *c);
void kv_reply_wrongtype(struct kv_call *c);
void kv_reply_int(struct kv_call *c, long long v);
void kv_reply_bulk(struct kv_call *c, const char *p, size_t n);
void kv_reply_status(struct kv_call *c, const char *s);
void kv_reply_null(struct kv_call *c);        /* $-1 / _ */
void kv_reply_nullarray(struct kv_call *c);   /* *-1 / _ */
void kv_reply_array(struct kv_call *c, long long n);
void kv_reply_map(struct kv_call *c, long long n);   /* n pairs: *2n / %n */
void kv_reply_set(struct kv_call *c, long long n);   /* *n / ~n */
void kv_reply_bulk_ll(struct kv_call *c, long long v);
void kv_reply_arity(struct kv_call *c);       /* wrong number of arguments for '<cmd>' */

/* ---- numbers, as redis reads and writes them (kv_store.c) ---- */
bool kv_str2ld(const char *p, size_t n, long double *out);  /* no spaces, NaN, NUL */
/* "%.17Lf" without trailing zeros (redis's LD_STR_HUMAN); the length, 0 if
 * it does not fit. */
int kv_ld2str(char *buf, size_t len, long double v);
/* Argument i as a long long; else the error reply, false. */
bool kv_arg_ll(struct kv_call *c, int i, long long *v);

/* ---- the keyspace (kv_store.c) ---- */
/* Key argv[i] in c's db (kv_lookup_in: key k in db), or NULL — also when it
 * is past its expire (active expiry off), which deletes it unless c is a
 * read outside the log. */
struct kv_obj *kv_lookup(struct kv_call *c, int i);
struct kv_obj *kv_lookup_in(struct kv_call *c, uint32_t db, const char *k, size_t kl);
/* o is past its expire: deleted as kv_lookup does; true then. */
bool kv_expire_if_needed(struct kv_call *c, struct kv_obj *o);
bool kv_expired(const struct kv_store *s, const struct kv_obj *o);
/* The raw form, without lookup's expiry (WATCH's check, loading). */
struct kv_obj *kv_lookup_db(struct kv_store *s, uint32_t db, const char *k, size_t kl);
/* A new key argv-like (k, kl) of type t in database db (absent before);
 * NULL when out of memory (the store is marked). */
struct kv_obj *kv_obj_add(struct kv_store *s, uint32_t db, const char *k, size_t kl, int type);
/* Delete it (its version goes to the deletion slot). */
void kv_obj_del(struct kv_store *s, struct kv_obj *o);
/* Unlink it from its db without freeing (RENAME, MOVE), counted as a deletion. */
void kv_obj_unlink(struct kv_store *s, struct kv_obj *o);
/* Put an unlinked object into db under key (k, kl): it becomes a new node.
 * Returns the (possibly moved) object, NULL when out of memory (freed). */
struct kv_obj *kv_obj_relink(struct kv_store *s, struct kv_obj *o, uint32_t db, const char *k,
			     size_t kl);
void kv_obj_free(struct kv_obj *o);
/* Free o's value, whatever its type (SET over a hash). */
void kv_obj_clear_value(struct kv_obj *o);
/* A deep copy (COPY) under another key, not linked anywhere; NULL on OOM. */
struct kv_obj *kv_obj_dup(struct kv_store *s, const struct kv_obj *o, const char *k, size_t kl);
/* A deletion of a key with this hash in db (WATCH sees it). */
void kv_del_mark(struct kv_store *s, uint32_t db, uint64_t hash);
/* o was modified (WATCH sees it). */
void kv_touch(struct kv_store *s, struct kv_obj *o);
/* Set o's expire (unix ms) or remove it (0); an expire at or before now deletes o
 * (returns true then). */
bool kv_set_expire(struct kv_store *s, struct kv_obj *o, int64_t when);
/* The same without deleting an o already past when (loading a state with
 * active expiry off); false when out of memory. */
bool kv_set_expire_raw(struct kv_store *s, struct kv_obj *o, int64_t when);
/* Replace o's string value with a copy of (p, n) and encoding; false on OOM. */
bool kv_str_set(struct kv_store *s, struct kv_obj *o, const char *p, size_t n);
/* Make room for n bytes of string (zero-filled beyond len); false on OOM. */
bool kv_str_reserve(struct kv_store *s, struct kv_obj *o, size_t n);
/* The encoding a freshly set string gets (int, embstr, raw). */
int kv_str_encoding(const char *p, size_t n);
void kv_hash_free_fields(struct kv_obj *o);
void kv_list_free_items(struct kv_obj *o);
/* A generator for a write's random choice (SPOP): seeded from the state, so
 * every replica makes the same one. */
uint64_t kv_write_seed(const struct kv_store *s, const struct kv_obj *o);
void kv_db_flush(struct kv_store *s, uint32_t db);
bool kv_check_type(struct kv_call *c, struct kv_obj *o, int type); /* else WRONGTYPE */

/* ---- commands: one handler per command, the table in kv_store.c ---- */
#define KV_CMD(name) void kv_cmd_##name(struct kv_call *c)
/* strings (kv_string.c) */
KV_CMD(get); KV_CMD(set); KV_CMD(setnx); KV_CMD(setex); KV_CMD(psetex); KV_CMD(getset);
KV_CMD(getdel); KV_CMD(getex); KV_CMD(append); KV_CMD(strlen); KV_CMD(getrange);
KV_CMD(setrange); KV_CMD(mget); KV_CMD(mset); KV_CMD(msetnx); KV_CMD(incr); KV_CMD(decr);
KV_CMD(incrby); KV_CMD(decrby); KV_CMD(incrbyfloat); KV_CMD(setbit); KV_CMD(getbit);
KV_CMD(bitcount); KV_CMD(lcs);
/* keys and expiry (kv_keys.c) */
KV_CMD(del); KV_CMD(exists); KV_CMD(type); KV_CMD(keys); KV_CMD(scan); KV_CMD(rename);
KV_CMD(renamenx); KV_CMD(copy); KV_CMD(move); KV_CMD(randomkey); KV_CMD(dbsize);
KV_CMD(flushdb); KV_CMD(flushall); KV_CMD(touch); KV_CMD(object); KV_CMD(swapdb);
KV_CMD(expire); KV_CMD(pexpire); KV_CMD(expireat); KV_CMD(pexpireat); KV_CMD(ttl);
KV_CMD(pttl); KV_CMD(expiretime); KV_CMD(pexpiretime); KV_CMD(persist); KV_CMD(select);
KV_CMD(ping); KV_CMD(echo); KV_CMD(debug); KV_CMD(publish); KV_CMD(time); KV_CMD(lastsave); KV_CMD(replica);
/* lists and sets (kv_list.c) */
KV_CMD(lpush); KV_CMD(rpush); KV_CMD(lpushx); KV_CMD(rpushx); KV_CMD(lpop); KV_CMD(rpop);
KV_CMD(llen); KV_CMD(lrange); KV_CMD(lindex); KV_CMD(sadd); KV_CMD(srem); KV_CMD(smembers);
KV_CMD(scard); KV_CMD(sismember); KV_CMD(spop); KV_CMD(srandmember); KV_CMD(memory);
/* hashes (kv_hash.c) */
KV_CMD(hset); KV_CMD(hsetnx); KV_CMD(hget); KV_CMD(hmget); KV_CMD(hdel); KV_CMD(hlen);
KV_CMD(hstrlen); KV_CMD(hexists); KV_CMD(hkeys); KV_CMD(hvals); KV_CMD(hgetall);
KV_CMD(hincrby); KV_CMD(hincrbyfloat); KV_CMD(hscan); KV_CMD(hrandfield);

/* ---- redis's replication stream (kv_feed.c) ---- */
/* Feed the change c made, as the command (argc, argv, lens) that makes it
 * on a redis replica (SET k v PXAT ms for SET k v EX s...); a command that
 * changed the store and fed nothing is fed as it came. Inside a MULTI block
 * the block's changes go out together at EXEC. No-op without a feed. */
void kv_propagate(struct kv_call *c, int argc, const char *const *argv, const size_t *lens);
/* The same with the arguments as C strings, NULL-terminated. */
void kv_propagatef(struct kv_call *c, ...);
/* A key deleted by log time: DEL key in its database. */
void kv_feed_expired(struct kv_store *s, const struct kv_obj *o);
/* EXEC: the block's changes (ctx->multi_feed), one alone, several inside
 * MULTI ... EXEC. */
void kv_feed_block(struct kv_store *s, struct kv_ctx *ctx);

/* SCAN's cursor argument; false after the error reply. */
bool kv_scan_cursor(struct kv_call *c, int i, uint64_t *cursor);

#endif /* INNET_CONSENSUS_KV_STORE_H */
