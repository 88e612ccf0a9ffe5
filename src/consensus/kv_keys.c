/*
 * kv_keys.c — the KV store's keyspace and expiry commands with redis 7's
 * replies and errors: DEL UNLINK EXISTS TYPE KEYS SCAN RENAME RENAMENX COPY
 * MOVE RANDOMKEY DBSIZE FLUSHDB FLUSHALL TOUCH OBJECT SWAPDB, and EXPIRE
 * PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT) TTL PTTL EXPIRETIME PEXPIRETIME
 * PERSIST.
 *
 * Expiry is judged by log time (kv_store.c): relative times count from the
 * stamp of the entry that carries the command, TTL answers expire minus
 * that log time, and an expire at or before it deletes the key at once.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/kv_store.h"

static bool arg_is(struct kv_call *c, int i, const char *name)
{
	return c->lens[i] == strlen(name) && !strncasecmp(c->argv[i], name, c->lens[i]);
}

static const char *type_name(int type)
{
	static const char *const names[] = { "string", "hash", "list", "set" };
	return type >= 0 && type <= KV_T_SET ? names[type] : "none";
}

/* A database index argument: false after the error (msg: the one for a
 * non-integer, NULL for redis's default). */
static bool db_arg(struct kv_call *c, int i, const char *msg, uint32_t *db)
{
	long long v;
	if (!kv_parse_ll(c->argv[i], c->lens[i], &v)) {
		kv_reply_err(c, "%s", msg ? msg : "value is not an integer or out of range");
		return false;
	}
	if (v < INT_MIN || v > INT_MAX) {
		kv_reply_err(c, "%s", msg ? msg : "value is out of range");
		return false;
	}
	if (v < 0 || v >= KV_DBS) {
		kv_reply_err(c, "DB index is out of range");
		return false;
	}
	*db = (uint32_t)v;
	return true;
}

void kv_cmd_del(struct kv_call *c)
{
	long long n = 0;
	for (int i = 1; i < c->argc; i++) {
		struct kv_obj *o = kv_lookup(c, i);
		if (o != NULL) {
			kv_obj_del(c->s, o);
			n++;
		}
	}
	kv_reply_int(c, n);
}

void kv_cmd_exists(struct kv_call *c)
{
	long long n = 0;
	for (int i = 1; i < c->argc; i++)
		n += kv_lookup(c, i) != NULL;
	kv_reply_int(c, n);
}

void kv_cmd_touch(struct kv_call *c)
{
	kv_cmd_exists(c);
}

void kv_cmd_type(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	kv_reply_status(c, o ? type_name(o->type) : "none");
}

void kv_cmd_dbsize(struct kv_call *c)
{
	kv_reply_int(c, (long long)c->db->n);
}

void kv_cmd_keys(struct kv_call *c)
{
	struct kv_buf keys = { 0 };
	struct kv_call kc = *c;
	kc.out = &keys;
	long long n = 0;
	bool all = c->lens[1] == 1 && c->argv[1][0] == '*';
	kv_dict_foreach(c->db, i, nd) {
		if (kv_expired(c->s, (const struct kv_obj *)nd))
			continue; /* past its expire (active expiry off): not listed */
		if (all || kv_glob(c->argv[1], c->lens[1], nd->key, nd->klen, false)) {
			kv_reply_bulk(&kc, nd->key, nd->klen);
			n++;
		}
	}
	kv_reply_array(c, n);
	if (keys.oom)
		c->out->oom = true;
	else
		kv_buf_append(c->out, keys.p, keys.len);
	kv_buf_free(&keys);
}

bool kv_scan_cursor(struct kv_call *c, int i, uint64_t *cursor)
{
	const char *p = c->argv[i];
	size_t n = c->lens[i];
	unsigned long long v = 0;
	bool ok = n > 0 && n <= 20;
	for (size_t k = 0; ok && k < n; k++) {
		if (p[k] < '0' || p[k] > '9' || v > (ULLONG_MAX - (unsigned)(p[k] - '0')) / 10)
			ok = false;
		else
			v = v * 10 + (unsigned)(p[k] - '0');
	}
	if (!ok) {
		kv_reply_err(c, "invalid cursor");
		return false;
	}
	*cursor = v;
	return true;
}

struct scan_acc {
	struct kv_dnode **nodes;
	size_t n, cap;
	bool oom;
};

static void scan_collect(void *arg, struct kv_dnode *nd)
{
	struct scan_acc *a = arg;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 32;
		struct kv_dnode **p = realloc(a->nodes, cap * sizeof(*p));
		if (p == NULL) {
			a->oom = true;
			return;
		}
		a->nodes = p;
		a->cap = cap;
	}
	a->nodes[a->n++] = nd;
}

/* SCAN and HSCAN: dict d from the cursor in argv[ci], options after it;
 * fields: HSCAN (each node is a field: its value follows it). */
static void scan_generic(struct kv_call *c, const struct kv_dict *d, int ci, bool fields)
{
	uint64_t cursor;
	if (!kv_scan_cursor(c, ci, &cursor))
		return;
	long long count = 10;
	const char *pat = NULL, *type = NULL;
	size_t pl = 0, tl = 0;
	for (int i = ci + 1; i < c->argc; i += 2) {
		bool more = i + 1 < c->argc;
		if (arg_is(c, i, "count") && more) {
			long long v;
			if (!kv_arg_ll(c, i + 1, &v))
				return;
			if (v < 1) {
				kv_reply_syntax(c);
				return;
			}
			count = v < (1ll << 40) ? v : 1ll << 40;
		} else if (arg_is(c, i, "match") && more) {
			pat = c->argv[i + 1];
			pl = c->lens[i + 1];
			if (pl == 1 && pat[0] == '*')
				pat = NULL;
		} else if (arg_is(c, i, "type") && !fields && more) {
			type = c->argv[i + 1];
			tl = c->lens[i + 1];
		} else {
			kv_reply_syntax(c);
			return;
		}
	}
	struct scan_acc acc = { 0 };
	long long iterations = count * 10;
	do
		cursor = kv_dict_scan(d, cursor, scan_collect, &acc);
	while (cursor && iterations-- && (long long)acc.n < count && !acc.oom);
	if (acc.oom) {
		free(acc.nodes);
		c->out->oom = true;
		return;
	}
	size_t kept = 0;
	for (size_t i = 0; i < acc.n; i++) {
		struct kv_dnode *nd = acc.nodes[i];
		if (pat && !kv_glob(pat, pl, nd->key, nd->klen, false))
			continue;
		if (type) {
			const char *tn = type_name(((struct kv_obj *)nd)->type);
			if (tl != strlen(tn) || strncasecmp(type, tn, tl) != 0)
				continue;
		}
		if (!fields && kv_expire_if_needed(c, (struct kv_obj *)nd))
			continue; /* past its expire: deleted (from the log) and not listed */
		acc.nodes[kept++] = nd;
	}
	kv_reply_array(c, 2);
	kv_reply_bulk_ll(c, (long long)cursor);
	kv_reply_array(c, (long long)(fields ? kept * 2 : kept));
	for (size_t i = 0; i < kept; i++) {
		kv_reply_bulk(c, acc.nodes[i]->key, acc.nodes[i]->klen);
		if (fields) {
			const struct kv_field *f = (const struct kv_field *)acc.nodes[i];
			kv_reply_bulk(c, f->val, f->vlen);
		}
	}
	free(acc.nodes);
}

void kv_cmd_scan(struct kv_call *c)
{
	scan_generic(c, c->db, 1, false);
}

void kv_cmd_hscan(struct kv_call *c)
{
	uint64_t cursor;
	if (!kv_scan_cursor(c, 2, &cursor))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_raw(c, "*2\r\n$1\r\n0\r\n*0\r\n");
		return;
	}
	if (kv_check_type(c, o, KV_T_HASH))
		scan_generic(c, &o->fields, 2, true);
}

void kv_cmd_randomkey(struct kv_call *c)
{
	struct kv_dnode *nd = NULL;
	/* a pick past its expire (active expiry off) is expired and picked again */
	for (int tries = 0; tries < 100; tries++) {
		nd = kv_dict_random(c->db, &c->s->rng);
		if (nd == NULL || !kv_expire_if_needed(c, (struct kv_obj *)nd))
			break;
		nd = NULL;
	}
	if (nd == NULL)
		kv_reply_null(c);
	else
		kv_reply_bulk(c, nd->key, nd->klen);
}

static void rename_generic(struct kv_call *c, bool nx)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_raw(c, "-ERR no such key\r\n");
		return;
	}
	bool same = c->lens[1] == c->lens[2] && memcmp(c->argv[1], c->argv[2], c->lens[1]) == 0;
	if (same) {
		kv_reply_raw(c, nx ? ":0\r\n" : "+OK\r\n");
		return;
	}
	struct kv_obj *d = kv_lookup(c, 2);
	if (d != NULL) {
		if (nx) {
			kv_reply_int(c, 0);
			return;
		}
		kv_obj_del(c->s, d);
	}
	int64_t expire = o->heap ? o->expire : 0;
	kv_obj_unlink(c->s, o);
	o = kv_obj_relink(c->s, o, c->dbi, c->argv[2], c->lens[2]);
	if (o == NULL)
		return;
	if (expire)
		kv_set_expire(c->s, o, expire);
	kv_reply_raw(c, nx ? ":1\r\n" : "+OK\r\n");
}

void kv_cmd_rename(struct kv_call *c)
{
	rename_generic(c, false);
}

void kv_cmd_renamenx(struct kv_call *c)
{
	rename_generic(c, true);
}

void kv_cmd_move(struct kv_call *c)
{
	uint32_t db;
	if (!db_arg(c, 2, NULL, &db))
		return;
	if (db == c->dbi) {
		kv_reply_raw(c, "-ERR source and destination objects are the same\r\n");
		return;
	}
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL || kv_lookup_in(c, db, c->argv[1], c->lens[1]) != NULL) {
		kv_reply_int(c, 0);
		return;
	}
	int64_t expire = o->heap ? o->expire : 0;
	kv_obj_unlink(c->s, o);
	o = kv_obj_relink(c->s, o, db, c->argv[1], c->lens[1]);
	if (o == NULL)
		return;
	if (expire)
		kv_set_expire(c->s, o, expire);
	kv_reply_int(c, 1);
}

void kv_cmd_copy(struct kv_call *c)
{
	uint32_t db = c->dbi;
	bool replace = false;
	for (int j = 3; j < c->argc; j++) {
		if (arg_is(c, j, "replace")) {
			replace = true;
		} else if (arg_is(c, j, "db") && j + 1 < c->argc) {
			if (!db_arg(c, ++j, NULL, &db))
				return;
		} else {
			kv_reply_syntax(c);
			return;
		}
	}
	if (db == c->dbi && c->lens[1] == c->lens[2] &&
	    memcmp(c->argv[1], c->argv[2], c->lens[1]) == 0) {
		kv_reply_raw(c, "-ERR source and destination objects are the same\r\n");
		return;
	}
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_int(c, 0);
		return;
	}
	struct kv_obj *d = kv_lookup_in(c, db, c->argv[2], c->lens[2]);
	if (d != NULL) {
		if (!replace) {
			kv_reply_int(c, 0);
			return;
		}
	}
	struct kv_obj *n = kv_obj_dup(c->s, o, c->argv[2], c->lens[2]);
	if (n == NULL)
		return;
	if (d != NULL)
		kv_obj_del(c->s, d);
	int64_t expire = o->heap ? o->expire : 0;
	n = kv_obj_relink(c->s, n, db, c->argv[2], c->lens[2]);
	if (n == NULL)
		return;
	if (expire)
		kv_set_expire(c->s, n, expire);
	kv_reply_int(c, 1);
}

/* FLUSHDB/FLUSHALL [ASYNC|SYNC]: false after the syntax error. */
static bool flush_args(struct kv_call *c)
{
	if (c->argc > 2 || (c->argc == 2 && !arg_is(c, 1, "async") && !arg_is(c, 1, "sync"))) {
		kv_reply_syntax(c);
		return false;
	}
	return true;
}

void kv_cmd_flushdb(struct kv_call *c)
{
	if (!flush_args(c))
		return;
	kv_db_flush(c->s, c->dbi);
	kv_reply_ok(c);
}

void kv_cmd_flushall(struct kv_call *c)
{
	if (!flush_args(c))
		return;
	for (uint32_t db = 0; db < KV_DBS; db++)
		kv_db_flush(c->s, db);
	kv_reply_ok(c);
}

/* Every key of database d modified now (SWAPDB), and a deletion recorded
 * under database other for each (the key left it) — but for keys past their
 * expire (active expiry off), which are no change to WATCH, as in redis. */
static void swap_touch(struct kv_store *s, uint32_t d, uint32_t other)
{
	kv_dict_foreach(&s->db[d], i, nd) {
		struct kv_obj *o = (struct kv_obj *)nd;
		o->db = (uint8_t)d;
		if (kv_expired(s, o))
			continue;
		kv_touch(s, o);
		kv_del_mark(s, other, nd->hash);
	}
}

void kv_cmd_swapdb(struct kv_call *c)
{
	uint32_t a, b;
	if (!db_arg(c, 1, "invalid first DB index", &a) || !db_arg(c, 2, "invalid second DB index", &b))
		return;
	if (a != b) {
		struct kv_dict t = c->s->db[a];
		c->s->db[a] = c->s->db[b];
		c->s->db[b] = t;
		swap_touch(c->s, a, b);
		swap_touch(c->s, b, a);
	}
	kv_reply_ok(c);
}

static const char *enc_name(int enc)
{
	static const char *const names[] = { "raw", "embstr", "int", "listpack", "hashtable",
					     "quicklist", "intset" };
	return enc >= 0 && enc <= KV_ENC_INTSET ? names[enc] : "unknown";
}

void kv_cmd_object(struct kv_call *c)
{
	if (arg_is(c, 1, "help") && c->argc == 2) {
		static const char *const help[] = {
			"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"ENCODING <key>", "    Return the kind of internal representation used in order to store the value",
			"    associated with a <key>.",
			"FREQ <key>", "    Return the access frequency index of the <key>. The returned integer is",
			"    proportional to the logarithm of the recent access frequency of the key.",
			"IDLETIME <key>", "    Return the idle time of the <key>, that is the approximated number of",
			"    seconds elapsed since the last access to the key.",
			"REFCOUNT <key>", "    Return the number of references of the value associated with the specified",
			"    <key>.",
			"HELP", "    Print this help.",
		};
		kv_reply_array(c, sizeof(help) / sizeof(help[0]));
		for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
			kv_reply_status(c, help[i]);
		return;
	}
	bool enc = arg_is(c, 1, "encoding"), ref = arg_is(c, 1, "refcount"),
	     idle = arg_is(c, 1, "idletime"), freq = arg_is(c, 1, "freq");
	if (!enc && !ref && !idle && !freq) {
		char sub[132];
		size_t n = c->lens[1] < 128 ? c->lens[1] : 128;
		memcpy(sub, c->argv[1], n);
		sub[n] = '\0';
		kv_reply_err(c, "unknown subcommand '%s'. Try OBJECT HELP.", sub);
		return;
	}
	if (c->argc != 3) {
		char name[32];
		snprintf(name, sizeof(name), "object|%s", enc ? "encoding" : ref ? "refcount" :
							   idle ? "idletime" : "freq");
		kv_reply_arity_error(c->out, name);
		return;
	}
	struct kv_obj *o = kv_lookup(c, 2);
	if (o == NULL) {
		kv_reply_null(c);
		return;
	}
	if (enc)
		kv_reply_bulk(c, enc_name(o->enc), strlen(enc_name(o->enc)));
	else if (ref)
		kv_reply_int(c, 1);
	else if (idle)
		kv_reply_int(c, 0);
	else
		kv_reply_err(c, "An LFU maxmemory policy is not selected, access frequency not tracked. "
				"Please note that when switching between policies at runtime LRU and LFU "
				"data will take some time to adjust.");
}

/* ---- expiry ---- */

enum { EXP_NX = 1, EXP_XX = 2, EXP_GT = 4, EXP_LT = 8 };

static void expire_generic(struct kv_call *c, bool relative, bool secs)
{
	int flags = 0;
	for (int j = 3; j < c->argc; j++) {
		if (arg_is(c, j, "nx"))
			flags |= EXP_NX;
		else if (arg_is(c, j, "xx"))
			flags |= EXP_XX;
		else if (arg_is(c, j, "gt"))
			flags |= EXP_GT;
		else if (arg_is(c, j, "lt"))
			flags |= EXP_LT;
		else {
			char opt[132];
			size_t n = c->lens[j] < 128 ? c->lens[j] : 128;
			memcpy(opt, c->argv[j], n);
			opt[n] = '\0';
			kv_reply_err(c, "Unsupported option %s", opt);
			return;
		}
	}
	if ((flags & EXP_NX) && (flags & (EXP_XX | EXP_GT | EXP_LT))) {
		kv_reply_err(c, "NX and XX, GT or LT options at the same time are not compatible");
		return;
	}
	if ((flags & EXP_GT) && (flags & EXP_LT)) {
		kv_reply_err(c, "GT and LT options at the same time are not compatible");
		return;
	}
	long long when;
	if (!kv_arg_ll(c, 2, &when))
		return;
	char name[16];
	size_t nl = c->lens[0] < sizeof(name) - 1 ? c->lens[0] : sizeof(name) - 1;
	for (size_t i = 0; i < nl; i++)
		name[i] = (char)tolower((unsigned char)c->argv[0][i]);
	name[nl] = '\0';
	if (secs) {
		if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) {
			kv_reply_err(c, "invalid expire time in '%s' command", name);
			return;
		}
		when *= 1000;
	}
	long long base = relative ? c->s->now : 0;
	if (when > LLONG_MAX - base) {
		kv_reply_err(c, "invalid expire time in '%s' command", name);
		return;
	}
	when += base;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_int(c, 0);
		return;
	}
	long long cur = o->heap ? o->expire : -1;
	if (((flags & EXP_NX) && cur != -1) || ((flags & EXP_XX) && cur == -1) ||
	    ((flags & EXP_GT) && (when <= cur || cur == -1)) ||
	    ((flags & EXP_LT) && cur != -1 && when >= cur)) {
		kv_reply_int(c, 0);
		return;
	}
	if (when <= c->s->now) {
		kv_obj_del(c->s, o);
		kv_propagate(c, 2, (const char *const[]){ "DEL", c->argv[1] },
			     (const size_t[]){ 3, c->lens[1] });
	} else {
		kv_set_expire(c->s, o, when);
		kv_touch(c->s, o);
		char ms[24];
		int n = snprintf(ms, sizeof(ms), "%lld", when);
		kv_propagate(c, 3, (const char *const[]){ "PEXPIREAT", c->argv[1], ms },
			     (const size_t[]){ 9, c->lens[1], (size_t)n });
	}
	kv_reply_int(c, 1);
}

void kv_cmd_expire(struct kv_call *c)
{
	expire_generic(c, true, true);
}

void kv_cmd_pexpire(struct kv_call *c)
{
	expire_generic(c, true, false);
}

void kv_cmd_expireat(struct kv_call *c)
{
	expire_generic(c, false, true);
}

void kv_cmd_pexpireat(struct kv_call *c)
{
	expire_generic(c, false, false);
}

static void ttl_generic(struct kv_call *c, bool ms, bool absolute)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_int(c, -2);
		return;
	}
	if (o->heap == 0) {
		kv_reply_int(c, -1);
		return;
	}
	long long t = absolute ? o->expire : o->expire - c->s->now;
	if (t < 0)
		t = 0;
	kv_reply_int(c, ms ? t : (t + 500) / 1000);
}

void kv_cmd_ttl(struct kv_call *c)
{
	ttl_generic(c, false, false);
}

void kv_cmd_pttl(struct kv_call *c)
{
	ttl_generic(c, true, false);
}

void kv_cmd_expiretime(struct kv_call *c)
{
	ttl_generic(c, false, true);
}

void kv_cmd_pexpiretime(struct kv_call *c)
{
	ttl_generic(c, true, true);
}

void kv_cmd_persist(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL || o->heap == 0) {
		kv_reply_int(c, 0);
		return;
	}
	kv_set_expire(c->s, o, 0);
	kv_touch(c->s, o);
	kv_reply_int(c, 1);
}

/* ---- DEBUG (through the log: SET-ACTIVE-EXPIRE is replicated state, and
 * the digests are those of the log position) ---- */

static void debug_hex(struct kv_call *c, uint64_t d)
{
	char hex[48];
	if (d == 0)
		snprintf(hex, sizeof(hex), "%040d", 0);
	else
		snprintf(hex, sizeof(hex), "%016llx%016llx%08llx", (unsigned long long)d,
			 (unsigned long long)(d * 0x9e3779b97f4a7c15ull), (unsigned long long)(d >> 32));
	kv_reply_status(c, hex);
}

void kv_cmd_debug(struct kv_call *c)
{
	if (arg_is(c, 1, "set-active-expire") && c->argc == 3) {
		long long on;
		if (!kv_arg_ll(c, 2, &on))
			return;
		c->s->active_expire = on != 0;
		kv_reply_ok(c);
	} else if (arg_is(c, 1, "object") && c->argc == 3) {
		struct kv_obj *o = kv_lookup(c, 2);
		if (o == NULL) {
			kv_reply_raw(c, "-ERR no such key\r\n");
			return;
		}
		uint64_t d;
		const char *type, *enc;
		size_t len;
		kv_store_key_info(c->s, c->dbi, c->argv[2], c->lens[2], &d, &type, &enc, &len, NULL);
		char line[200];
		/* "at": the object itself, which commands modify in place */
		snprintf(line, sizeof(line), "Value at:%p refcount:1 encoding:%s serializedlength:%zu "
					     "lru:0 lru_seconds_idle:0", (void *)o, enc, len);
		kv_reply_status(c, line);
	} else if (arg_is(c, 1, "digest") && c->argc == 2) {
		debug_hex(c, kv_store_keys(c->s) ? kv_store_digest(c->s) : 0);
	} else if (arg_is(c, 1, "digest-value")) {
		kv_reply_array(c, c->argc - 2);
		for (int i = 2; i < c->argc; i++) {
			uint64_t d = 0;
			const char *type, *enc;
			size_t len;
			kv_store_key_info(c->s, c->dbi, c->argv[i], c->lens[i], &d, &type, &enc, &len, NULL);
			debug_hex(c, d);
		}
	} else if (arg_is(c, 1, "help") && c->argc == 2) {
		static const char *const help[] = {
			"DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"DIGEST", "    Output a hex signature representing the current DB content.",
			"DIGEST-VALUE <key> [<key> ...]", "    Output a hex signature of the values of all the specified keys.",
			"OBJECT <key>", "    Show low level info about the key and associated value.",
			"SET-ACTIVE-EXPIRE <0|1>", "    Ticks that expire keys of an idle log off/on (every replica).",
			"HELP", "    Print this help.",
		};
		kv_reply_array(c, sizeof(help) / sizeof(help[0]));
		for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
			kv_reply_status(c, help[i]);
	} else if (arg_is(c, 1, "reload") || arg_is(c, 1, "loadaof")) {
		kv_reply_err(c, "DEBUG %s is not supported: innet kv keeps no RDB or AOF file (the "
				"replicated log is its durability)", arg_is(c, 1, "reload") ? "RELOAD" :
				"LOADAOF");
	} else if (arg_is(c, 1, "sleep")) {
		kv_reply_err(c, "DEBUG SLEEP is not supported: a replica that stops would stall its "
				"peers' log");
	} else {
		char sub[132];
		size_t n = c->lens[1] < 128 ? c->lens[1] : 128;
		memcpy(sub, c->argv[1], n);
		sub[n] = '\0';
		for (size_t i = 0; i < n; i++)
			if (sub[i] == '\r' || sub[i] == '\n')
				sub[i] = ' ';
		kv_reply_err(c, "unknown subcommand '%s'. Try DEBUG HELP.", sub);
	}
}
