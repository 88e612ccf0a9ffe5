/*
 * kv_store.c — the KV store's state and the frame its commands run in: 16
 * databases of typed values (strings, hashes: kv_store.h draws the layout),
 * expiry judged by log time, the versions WATCH compares, the command table
 * and its dispatch (with MULTI ... EXEC blocks applied as one), redis's
 * replies (RESP2 and RESP3), digests and snapshots of the state. The
 * commands themselves are kv_string.c, kv_keys.c, kv_hash.c.
 *
 * Deterministic: every replica that applies the same log (the same
 * commands with the same stamps) reaches the same state and gives the same
 * replies (kv_store_digest). Time is log time, never a replica's clock:
 * each entry carries its proposer's clock, kv_store_advance moves the store
 * to it (never backwards) and deletes the keys that expired by then, so a
 * key is never alive at one replica and gone at another at the same log
 * position, and between two entries nothing changes.
 *
 * The server around it is kv_server.c (snapshots: kv_snapshot.c), the RESP
 * parser kv_resp.c.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/kv_store.h"

/* ---- buffers ------------------------------------------------------------ */

int kv_buf_append(struct kv_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return -ENOMEM; /* short already: appending more would mislead */
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (np == NULL) {
			b->oom = true;
			return -ENOMEM;
		}
		b->p = np;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void kv_buf_str(struct kv_buf *b, const char *s)
{
	kv_buf_append(b, s, strlen(s));
}

/* A RESP header: prefix char, number, CRLF (":42\r\n", "$5\r\n", "*3\r\n"). */
void kv_buf_num(struct kv_buf *b, char prefix, long long v)
{
	char tmp[48];
	int n = snprintf(tmp, sizeof(tmp), "%c%lld\r\n", prefix, v);
	kv_buf_append(b, tmp, (size_t)n);
}

void kv_buf_bulk(struct kv_buf *b, const char *p, size_t n)
{
	kv_buf_num(b, '$', (long long)n);
	kv_buf_append(b, p, n);
	kv_buf_append(b, "\r\n", 2);
}

void kv_buf_free(struct kv_buf *b)
{
	free(b->p);
	*b = (struct kv_buf){ 0 };
}

void kv_buf_consume(struct kv_buf *b, size_t n)
{
	if (n == 0)
		return; /* b->p may still be NULL */
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

/* ---- replies ------------------------------------------------------------ */

void kv_reply_raw(struct kv_call *c, const char *resp)
{
	kv_buf_str(c->out, resp);
}

void kv_reply_ok(struct kv_call *c)
{
	kv_buf_append(c->out, "+OK\r\n", 5);
}

/* An error line: "-ERR " + the message, or the message as it is if it
 * starts with '-' and names its own code ("-WRONGTYPE ..."), as redis's
 * addReplyError; CR and LF become spaces. */
static void error_line(struct kv_buf *out, const char *msg)
{
	char line[512];
	size_t n = 0;
	line[n++] = '-';
	if (msg[0] == '-') {
		msg++;
	} else {
		memcpy(line + n, "ERR ", 4);
		n += 4;
	}
	for (const char *p = msg; *p && n < sizeof(line) - 3; p++)
		line[n++] = (*p == '\r' || *p == '\n') ? ' ' : *p;
	line[n++] = '\r';
	line[n++] = '\n';
	kv_buf_append(out, line, n);
}

void kv_reply_err(struct kv_call *c, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	error_line(c->out, msg);
}

void kv_reply_syntax(struct kv_call *c)
{
	kv_reply_raw(c, "-ERR syntax error\r\n");
}

void kv_reply_wrongtype(struct kv_call *c)
{
	kv_reply_raw(c, "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
}

void kv_reply_int(struct kv_call *c, long long v)
{
	kv_buf_num(c->out, ':', v);
}

void kv_reply_bulk(struct kv_call *c, const char *p, size_t n)
{
	kv_buf_bulk(c->out, p, n);
}

void kv_reply_bulk_ll(struct kv_call *c, long long v)
{
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v);
	kv_buf_bulk(c->out, tmp, (size_t)n);
}

void kv_reply_status(struct kv_call *c, const char *s)
{
	kv_buf_append(c->out, "+", 1);
	kv_buf_str(c->out, s);
	kv_buf_append(c->out, "\r\n", 2);
}

void kv_reply_null(struct kv_call *c)
{
	kv_reply_raw(c, c->resp == 3 ? "_\r\n" : "$-1\r\n");
}

void kv_reply_nullarray(struct kv_call *c)
{
	kv_reply_raw(c, c->resp == 3 ? "_\r\n" : "*-1\r\n");
}

void kv_reply_array(struct kv_call *c, long long n)
{
	kv_buf_num(c->out, '*', n);
}

void kv_reply_map(struct kv_call *c, long long n)
{
	if (c->resp == 3)
		kv_buf_num(c->out, '%', n);
	else
		kv_buf_num(c->out, '*', 2 * n);
}

void kv_reply_set(struct kv_call *c, long long n)
{
	kv_buf_num(c->out, c->resp == 3 ? '~' : '*', n);
}

void kv_reply_arity_error(struct kv_buf *out, const char *name)
{
	char msg[200];
	snprintf(msg, sizeof(msg), "wrong number of arguments for '%.128s' command", name);
	error_line(out, msg);
}

void kv_reply_arity(struct kv_call *c)
{
	char name[140];
	size_t n = c->lens[0] < 128 ? c->lens[0] : 128;
	for (size_t i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)c->argv[0][i]);
	name[n] = '\0';
	kv_reply_arity_error(c->out, name);
}

/* Printable bytes of an argument for an error message (at most max). */
static size_t printable(char *dst, const char *p, size_t n, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k < max; i++)
		dst[k++] = (p[i] == '\r' || p[i] == '\n' || p[i] == '\0') ? ' ' : p[i];
	dst[k] = '\0';
	return k;
}

void kv_reply_unknown_command(struct kv_buf *out, int argc, char *const *argv, const size_t *lens)
{
	char msg[420], name[132], arg[132];
	printable(name, argv[0], lens[0], 128);
	int n = snprintf(msg, sizeof(msg), "unknown command '%s', with args beginning with: ", name);
	size_t args = 0;
	for (int i = 1; i < argc && args < 128 && (size_t)n < sizeof(msg) - 4; i++) {
		size_t k = printable(arg, argv[i], lens[i], 128 - args);
		int w = snprintf(msg + n, sizeof(msg) - (size_t)n, "'%s' ", arg);
		if (w < 0 || (size_t)w >= sizeof(msg) - (size_t)n)
			break;
		n += w;
		args += k + 3;
	}
	error_line(out, msg);
}

/* ---- numbers ------------------------------------------------------------ */

bool kv_parse_ll(const char *p, size_t n, long long *out)
{
	if (n == 0 || n >= 21)
		return false;
	if (n == 1 && p[0] == '0') {
		*out = 0;
		return true;
	}
	size_t i = 0;
	bool neg = p[0] == '-';
	if (neg && ++i == n)
		return false;
	if (p[i] < '1' || p[i] > '9')
		return false;
	unsigned long long v = 0;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		unsigned d = (unsigned)(p[i] - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	if (neg) {
		if (v > (unsigned long long)LLONG_MAX + 1)
			return false;
		*out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
	} else {
		if (v > (unsigned long long)LLONG_MAX)
			return false;
		*out = (long long)v;
	}
	return true;
}

bool kv_str2ld(const char *p, size_t n, long double *out)
{
	char buf[5120];
	if (n == 0 || n >= sizeof(buf) || isspace((unsigned char)p[0]) || memchr(p, '\0', n))
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	long double v = strtold(buf, &end);
	if ((size_t)(end - buf) != n || isnan(v) || errno == EINVAL ||
	    (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || v == 0)))
		return false;
	*out = v;
	return true;
}

int kv_ld2str(char *buf, size_t len, long double v)
{
	if (isinf(v)) {
		int n = snprintf(buf, len, "%s", v > 0 ? "inf" : "-inf");
		return n < (int)len ? n : 0;
	}
	int l = snprintf(buf, len, "%.17Lf", v);
	if (l < 0 || (size_t)l + 1 > len)
		return 0;
	if (strchr(buf, '.') != NULL) {
		char *p = buf + l - 1;
		while (*p == '0') {
			p--;
			l--;
		}
		if (*p == '.')
			l--;
	}
	if (l == 2 && buf[0] == '-' && buf[1] == '0') {
		buf[0] = '0';
		l = 1;
	}
	buf[l] = '\0';
	return l;
}

bool kv_arg_ll(struct kv_call *c, int i, long long *v)
{
	if (kv_parse_ll(c->argv[i], c->lens[i], v))
		return true;
	kv_reply_raw(c, "-ERR value is not an integer or out of range\r\n");
	return false;
}

/* ---- glob --------------------------------------------------------------- */

static int fold(int ch, bool nocase)
{
	return nocase ? tolower(ch) : ch;
}

/* Does the single-character token at pat[*pi] match ch? Advances *pi past it. */
static bool glob_token(const char *pat, size_t pl, size_t *pi, unsigned char ch, bool nocase)
{
	size_t i = *pi;
	if (pat[i] == '?') {
		*pi = i + 1;
		return true;
	}
	if (pat[i] == '\\' && i + 1 < pl) {
		*pi = i + 2;
		return fold(pat[i + 1], nocase) == fold(ch, nocase);
	}
	if (pat[i] != '[') {
		*pi = i + 1;
		return fold((unsigned char)pat[i], nocase) == fold(ch, nocase);
	}
	i++;
	bool neg = i < pl && pat[i] == '^', match = false;
	if (neg)
		i++;
	while (i < pl && pat[i] != ']') {
		if (pat[i] == '\\' && i + 1 < pl) {
			if ((unsigned char)pat[i + 1] == ch)
				match = true;
			i += 2;
		} else if (i + 2 < pl && pat[i + 1] == '-') {
			int lo = fold((unsigned char)pat[i], nocase), hi = fold((unsigned char)pat[i + 2], nocase);
			int x = fold(ch, nocase);
			if (lo > hi) {
				int t = lo;
				lo = hi;
				hi = t;
			}
			if (x >= lo && x <= hi)
				match = true;
			i += 3;
		} else {
			if (fold((unsigned char)pat[i], nocase) == fold(ch, nocase))
				match = true;
			i++;
		}
	}
	*pi = i < pl ? i + 1 : pl; /* past ']' (an unclosed class ends with the pattern) */
	return neg ? !match : match;
}

bool kv_glob(const char *pat, size_t pl, const char *s, size_t sl, bool nocase)
{
	/* greedy with one backtrack point: the last star (linear per star) */
	size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
	while (si < sl) {
		if (pi < pl && pat[pi] == '*') {
			while (pi < pl && pat[pi] == '*')
				pi++;
			if (pi == pl)
				return true;
			star_p = pi;
			star_s = si;
			continue;
		}
		size_t np = pi;
		if (pi < pl && glob_token(pat, pl, &np, (unsigned char)s[si], nocase)) {
			pi = np;
			si++;
			continue;
		}
		if (star_p == SIZE_MAX)
			return false;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < pl && pat[pi] == '*')
		pi++;
	return pi == pl;
}

/* ---- the store ------------------------------------------------------------ */

struct kv_store *kv_store_create(void)
{
	struct kv_store *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->del_ver = calloc(KV_DEL_SLOTS, sizeof(*s->del_ver));
	if (s->del_ver == NULL) {
		free(s);
		return NULL;
	}
	s->hash_max_entries = 128;
	s->hash_max_value = 64;
	s->set_max_intset = 512;
	s->string_max = KV_STRING_MAX;
	s->active_expire = true;
	s->rng = 0x2545f4914f6cdd1dull;
	return s;
}

void kv_hash_free_fields(struct kv_obj *o)
{
	for (size_t i = 0; i < o->fields.cap; i++)
		for (struct kv_dnode *nd = o->fields.tab[i], *nx; nd != NULL; nd = nx) {
			nx = nd->next;
			struct kv_field *f = (struct kv_field *)nd;
			free(f->val);
			free(f);
		}
	kv_dict_fini(&o->fields);
}

void kv_obj_clear_value(struct kv_obj *o)
{
	free(o->p);
	o->p = NULL;
	o->len = o->cap = 0;
	kv_hash_free_fields(o);
	kv_list_free_items(o);
}

void kv_obj_free(struct kv_obj *o)
{
	if (o == NULL)
		return;
	kv_obj_clear_value(o);
	free(o);
}

static void free_db(struct kv_dict *d)
{
	for (size_t i = 0; i < d->cap; i++)
		for (struct kv_dnode *nd = d->tab[i], *nx; nd != NULL; nd = nx) {
			nx = nd->next;
			kv_obj_free((struct kv_obj *)nd);
		}
	kv_dict_fini(d);
}

void kv_store_destroy(struct kv_store *s)
{
	if (s == NULL)
		return;
	for (uint32_t i = 0; i < KV_DBS; i++)
		free_db(&s->db[i]);
	free(s->heap);
	free(s->del_ver);
	free(s);
}

static uint32_t del_slot(uint32_t db, uint64_t hash)
{
	return (uint32_t)((hash ^ (db * 0x9e3779b97f4a7c15ull)) & (KV_DEL_SLOTS - 1));
}

void kv_del_mark(struct kv_store *s, uint32_t db, uint64_t hash)
{
	s->del_ver[del_slot(db, hash)] = ++s->version;
}

/* ---- the expiry heap ---- */

static void heap_place(struct kv_store *s, size_t i, struct kv_obj *o)
{
	s->heap[i] = o;
	o->heap = i + 1;
}

static void heap_up(struct kv_store *s, size_t i)
{
	struct kv_obj *o = s->heap[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (s->heap[p]->expire <= o->expire)
			break;
		heap_place(s, i, s->heap[p]);
		i = p;
	}
	heap_place(s, i, o);
}

static void heap_down(struct kv_store *s, size_t i)
{
	struct kv_obj *o = s->heap[i];
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		int64_t me = o->expire;
		if (l < s->heap_n && s->heap[l]->expire < me) {
			m = l;
			me = s->heap[l]->expire;
		}
		if (l + 1 < s->heap_n && s->heap[l + 1]->expire < me)
			m = l + 1;
		if (m == i)
			break;
		heap_place(s, i, s->heap[m]);
		i = m;
	}
	heap_place(s, i, o);
}

static void heap_remove(struct kv_store *s, struct kv_obj *o)
{
	if (o->heap == 0)
		return;
	size_t i = o->heap - 1;
	o->heap = 0;
	o->expire = 0;
	struct kv_obj *last = s->heap[--s->heap_n];
	if (i == s->heap_n)
		return;
	heap_place(s, i, last);
	heap_up(s, i);
	heap_down(s, last->heap - 1);
}

static bool heap_insert(struct kv_store *s, struct kv_obj *o, int64_t when);

bool kv_set_expire_raw(struct kv_store *s, struct kv_obj *o, int64_t when)
{
	heap_remove(s, o);
	return heap_insert(s, o, when);
}

bool kv_set_expire(struct kv_store *s, struct kv_obj *o, int64_t when)
{
	if (when == 0) {
		heap_remove(s, o);
		return false;
	}
	if (when <= s->now) {
		kv_obj_del(s, o);
		return true;
	}
	if (o->heap != 0) {
		bool later = when > o->expire;
		o->expire = when;
		if (later)
			heap_down(s, o->heap - 1);
		else
			heap_up(s, o->heap - 1);
		return false;
	}
	heap_insert(s, o, when);
	return false;
}

/* o (not in the heap) into it with expire when; false when out of memory. */
static bool heap_insert(struct kv_store *s, struct kv_obj *o, int64_t when)
{
	if (s->heap_n == s->heap_cap) {
		size_t cap = s->heap_cap ? s->heap_cap * 2 : 64;
		struct kv_obj **h = realloc(s->heap, cap * sizeof(*h));
		if (h == NULL) {
			s->oom = true;
			return false;
		}
		s->heap = h;
		s->heap_cap = cap;
	}
	o->expire = when;
	s->heap[s->heap_n++] = o;
	heap_up(s, s->heap_n - 1);
	return true;
}

/* ---- objects ---- */

struct kv_obj *kv_lookup_db(struct kv_store *s, uint32_t db, const char *k, size_t kl)
{
	return (struct kv_obj *)kv_dict_find(&s->db[db], k, kl, kv_hash(k, kl));
}

bool kv_expired(const struct kv_store *s, const struct kv_obj *o)
{
	return o->heap != 0 && o->expire <= s->now;
}

/* A key past its expire while active expiry is off: gone to every command;
 * deleted (and DEL fed) when the command runs from the log, only hidden
 * when it is a read answered outside it (ctx->read_only). */
static struct kv_obj *lazy_expire(struct kv_call *c, struct kv_obj *o)
{
	if (o == NULL || !kv_expired(c->s, o))
		return o;
	if (c->ctx == NULL || !c->ctx->read_only) {
		kv_feed_expired(c->s, o);
		kv_obj_del(c->s, o);
	}
	return NULL;
}

struct kv_obj *kv_lookup(struct kv_call *c, int i)
{
	return lazy_expire(c, kv_lookup_db(c->s, c->dbi, c->argv[i], c->lens[i]));
}

struct kv_obj *kv_lookup_in(struct kv_call *c, uint32_t db, const char *k, size_t kl)
{
	return lazy_expire(c, kv_lookup_db(c->s, db, k, kl));
}

bool kv_expire_if_needed(struct kv_call *c, struct kv_obj *o)
{
	return lazy_expire(c, o) == NULL;
}

bool kv_check_type(struct kv_call *c, struct kv_obj *o, int type)
{
	if (o != NULL && o->type != type) {
		kv_reply_wrongtype(c);
		return false;
	}
	return true;
}

void kv_touch(struct kv_store *s, struct kv_obj *o)
{
	o->version = ++s->version;
}

static struct kv_obj *obj_new(const char *k, size_t kl, int type)
{
	struct kv_obj *o = calloc(1, sizeof(*o) + (kl ? kl : 1));
	if (o == NULL)
		return NULL;
	memcpy(o->key, k, kl);
	o->node.key = o->key;
	o->node.klen = kl;
	o->node.hash = kv_hash(k, kl);
	o->type = (uint8_t)type;
	o->enc = type == KV_T_HASH ? KV_ENC_LISTPACK : type == KV_T_LIST ? KV_ENC_QUICKLIST :
		 type == KV_T_SET ? KV_ENC_INTSET : KV_ENC_EMBSTR;
	return o;
}

struct kv_obj *kv_obj_add(struct kv_store *s, uint32_t db, const char *k, size_t kl, int type)
{
	struct kv_obj *o = obj_new(k, kl, type);
	if (o == NULL || kv_dict_add(&s->db[db], &o->node) != 0) {
		free(o);
		s->oom = true;
		return NULL;
	}
	o->db = (uint8_t)db;
	kv_touch(s, o);
	return o;
}

void kv_obj_unlink(struct kv_store *s, struct kv_obj *o)
{
	heap_remove(s, o);
	kv_dict_unlink(&s->db[o->db], o->node.key, o->node.klen, o->node.hash);
	s->del_ver[del_slot(o->db, o->node.hash)] = ++s->version;
}

void kv_obj_del(struct kv_store *s, struct kv_obj *o)
{
	kv_obj_unlink(s, o);
	kv_obj_free(o);
}

struct kv_obj *kv_obj_relink(struct kv_store *s, struct kv_obj *o, uint32_t db, const char *k,
			     size_t kl)
{
	struct kv_obj *n = o;
	if (kl != o->node.klen || memcmp(k, o->key, kl) != 0) {
		n = realloc(o, sizeof(*o) + (kl ? kl : 1));
		if (n == NULL) {
			kv_obj_free(o);
			s->oom = true;
			return NULL;
		}
		memcpy(n->key, k, kl);
		n->node.klen = kl;
		n->node.hash = kv_hash(k, kl);
		/* the hash's dict points at nothing inside the object: only
		 * node.key needs fixing */
	}
	n->node.key = n->key;
	n->db = (uint8_t)db;
	n->heap = 0;
	if (kv_dict_add(&s->db[db], &n->node) != 0) {
		kv_obj_free(n);
		s->oom = true;
		return NULL;
	}
	kv_touch(s, n);
	return n;
}

struct kv_obj *kv_obj_dup(struct kv_store *s, const struct kv_obj *o, const char *k, size_t kl)
{
	struct kv_obj *n = obj_new(k, kl, o->type);
	if (n == NULL)
		goto oom;
	n->enc = o->enc;
	if (o->type == KV_T_STRING) {
		if (o->len > 0) {
			n->p = malloc(o->len);
			if (n->p == NULL)
				goto oom;
			memcpy(n->p, o->p, o->len);
			n->len = n->cap = o->len;
		}
		return n;
	}
	if (o->type == KV_T_LIST) {
		if (o->n_items > 0) {
			n->items = calloc(o->n_items, sizeof(*n->items));
			if (n->items == NULL)
				goto oom;
			n->cap_items = o->n_items;
			for (size_t i = 0; i < o->n_items; i++) {
				const struct kv_elem *e = &o->items[o->head + i];
				char *p = malloc(e->len ? e->len : 1);
				if (p == NULL)
					goto oom;
				memcpy(p, e->p, e->len);
				n->items[i] = (struct kv_elem){ p, e->len };
				n->n_items++;
			}
		}
		return n;
	}
	kv_dict_foreach(&o->fields, i, nd) {
		const struct kv_field *f = (const struct kv_field *)nd;
		struct kv_field *g = malloc(sizeof(*g) + (nd->klen ? nd->klen : 1));
		char *v = f->val ? malloc(f->vlen ? f->vlen : 1) : NULL;
		if (g == NULL || (f->val && v == NULL)) {
			free(g);
			free(v);
			goto oom;
		}
		memcpy(g->key, nd->key, nd->klen);
		g->node.key = g->key;
		g->node.klen = nd->klen;
		g->node.hash = nd->hash;
		if (v != NULL)
			memcpy(v, f->val, f->vlen);
		g->val = v;
		g->vlen = f->vlen;
		if (kv_dict_add(&n->fields, &g->node) != 0) {
			free(v);
			free(g);
			goto oom;
		}
	}
	return n;
oom:
	kv_obj_free(n);
	s->oom = true;
	return NULL;
}

int kv_str_encoding(const char *p, size_t n)
{
	long long v;
	if (n <= 20 && kv_parse_ll(p, n, &v))
		return KV_ENC_INT;
	return n <= 44 ? KV_ENC_EMBSTR : KV_ENC_RAW;
}

bool kv_str_set(struct kv_store *s, struct kv_obj *o, const char *p, size_t n)
{
	char *np = NULL;
	if (n > 0) {
		np = malloc(n);
		if (np == NULL) {
			s->oom = true;
			return false;
		}
		memcpy(np, p, n);
	}
	free(o->p);
	o->p = np;
	o->len = o->cap = n;
	o->enc = (uint8_t)kv_str_encoding(p, n);
	return true;
}

bool kv_str_reserve(struct kv_store *s, struct kv_obj *o, size_t n)
{
	if (n <= o->cap)
		return true;
	size_t cap = o->cap < 64 ? 64 : o->cap;
	while (cap < n)
		cap = cap > SIZE_MAX / 2 ? n : cap * 2;
	if (cap > n && cap - n > (1u << 20) && n > (1u << 20))
		cap = n + (1u << 20); /* past 1 MB grow by 1 MB at most beyond the need */
	char *np = realloc(o->p, cap);
	if (np == NULL) {
		s->oom = true;
		return false;
	}
	memset(np + o->len, 0, cap - o->len);
	o->p = np;
	o->cap = cap;
	return true;
}

void kv_db_flush(struct kv_store *s, uint32_t db)
{
	struct kv_dict *d = &s->db[db];
	for (size_t i = 0; i < d->cap; i++)
		for (struct kv_dnode *nd = d->tab[i], *nx; nd != NULL; nd = nx) {
			nx = nd->next;
			struct kv_obj *o = (struct kv_obj *)nd;
			heap_remove(s, o);
			s->del_ver[del_slot(db, nd->hash)] = ++s->version;
			kv_obj_free(o);
		}
	kv_dict_fini(d);
}

/* ---- time, versions, state -------------------------------------------------- */

size_t kv_store_advance(struct kv_store *s, int64_t stamp)
{
	if (stamp > s->now)
		s->now = stamp;
	size_t n = 0;
	/* with active expiry off (DEBUG SET-ACTIVE-EXPIRE 0, on every replica)
	 * keys past their time stay until a command touches them */
	while (s->active_expire && s->heap_n > 0 && s->heap[0]->expire <= s->now) {
		kv_feed_expired(s, s->heap[0]);
		kv_obj_del(s, s->heap[0]);
		n++;
	}
	return n;
}

int64_t kv_store_now(const struct kv_store *s)
{
	return s->now;
}

int64_t kv_store_next_expiry(const struct kv_store *s)
{
	return s->heap_n > 0 ? s->heap[0]->expire : 0;
}

bool kv_store_active_expire(const struct kv_store *s)
{
	return s->active_expire;
}

uint64_t kv_store_version(const struct kv_store *s)
{
	return s->version;
}

size_t kv_store_keys(const struct kv_store *s)
{
	size_t n = 0;
	for (uint32_t i = 0; i < KV_DBS; i++)
		n += s->db[i].n;
	return n;
}

unsigned kv_store_watch_flags(const struct kv_store *s, uint32_t db, const char *k, size_t kl,
			      int64_t now_ms)
{
	if (db >= KV_DBS)
		return 0;
	const struct kv_obj *o = (const struct kv_obj *)kv_dict_find(&s->db[db], k, kl, kv_hash(k, kl));
	if (o == NULL)
		return 0;
	bool stale = o->heap != 0 && (o->expire <= now_ms || o->expire <= s->now);
	return KV_WATCH_EXISTED | (stale ? KV_WATCH_STALE : 0);
}

void kv_store_set_string_max(struct kv_store *s, uint64_t n)
{
	s->string_max = n < KV_STRING_MAX ? n : KV_STRING_MAX;
}

void kv_store_set_learners(struct kv_store *s, uint32_t n_learners)
{
	s->n_learners = n_learners;
}

uint64_t kv_store_removed(const struct kv_store *s)
{
	return s->removed;
}

bool kv_store_oom(const struct kv_store *s)
{
	return s->oom;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

static uint64_t obj_digest(const struct kv_obj *o);

uint64_t kv_store_digest(const struct kv_store *s)
{
	/* not log time: reads move it (their entries' stamps) without changing
	 * any data, and replicas are compared across reads */
	uint64_t d = kv_store_keys(s) + s->removed * 0x9e3779b97f4a7c15ull + mix(s->version) +
		     (s->active_expire ? 0 : 0x5bd1e995ull);
	for (uint32_t db = 0; db < KV_DBS; db++)
		kv_dict_foreach(&s->db[db], i, nd) {
			const struct kv_obj *o = (const struct kv_obj *)nd;
			d += mix(mix(nd->hash + db) ^ mix(o->version) ^ obj_digest(o));
		}
	return d;
}

static uint64_t obj_digest(const struct kv_obj *o)
{
	uint64_t h = mix(o->type + 7) ^ mix((uint64_t)(o->heap ? o->expire : 0));
	if (o->type == KV_T_STRING)
		return h + kv_hash(o->p ? o->p : "", o->len);
	if (o->type == KV_T_LIST) {
		for (size_t i = 0; i < o->n_items; i++) /* in order */
			h = mix(h ^ kv_hash(o->items[o->head + i].p, o->items[o->head + i].len));
		return h;
	}
	kv_dict_foreach(&o->fields, j, fn) {
		const struct kv_field *f = (const struct kv_field *)fn;
		h += mix(fn->hash ^ (f->val ? kv_hash(f->val, f->vlen) : 0)); /* order-independent */
	}
	return h;
}

int64_t kv_store_expire_of(const struct kv_store *s, uint32_t db, const char *k, size_t kl)
{
	const struct kv_obj *o = db < KV_DBS ?
		(const struct kv_obj *)kv_dict_find(&s->db[db], k, kl, kv_hash(k, kl)) : NULL;
	return o != NULL && o->heap != 0 ? o->expire : 0;
}

bool kv_store_key_info(const struct kv_store *s, uint32_t db, const char *k, size_t kl,
		       uint64_t *digest, const char **type, const char **encoding, size_t *len,
		       uint64_t *addr)
{
	static const char *const encs[] = { "raw", "embstr", "int", "listpack", "hashtable",
					    "quicklist", "intset" };
	static const char *const types[] = { "string", "hash", "list", "set" };
	const struct kv_obj *o = db < KV_DBS ?
		(const struct kv_obj *)kv_dict_find(&s->db[db], k, kl, kv_hash(k, kl)) : NULL;
	if (o == NULL) {
		*digest = 0;
		return false;
	}
	*digest = obj_digest(o);
	*type = types[o->type <= KV_T_SET ? o->type : 0];
	*encoding = encs[o->enc <= KV_ENC_INTSET ? o->enc : 0];
	*len = o->type == KV_T_STRING ? o->len : o->type == KV_T_LIST ? o->n_items : o->fields.n;
	if (addr != NULL)
		*addr = (uintptr_t)o;
	return true;
}

void kv_store_db_info(const struct kv_store *s, uint32_t db, size_t *keys, size_t *expires)
{
	*keys = db < KV_DBS ? s->db[db].n : 0;
	*expires = 0;
	for (size_t i = 0; i < s->heap_n; i++)
		*expires += s->heap[i]->db == db;
}

int kv_store_config_get(const struct kv_store *s, const char *name, long long *v)
{
	if (!strcasecmp(name, "hash-max-listpack-entries") ||
	    !strcasecmp(name, "hash-max-ziplist-entries"))
		*v = s->hash_max_entries;
	else if (!strcasecmp(name, "hash-max-listpack-value") ||
		 !strcasecmp(name, "hash-max-ziplist-value"))
		*v = s->hash_max_value;
	else if (!strcasecmp(name, "set-max-intset-entries"))
		*v = s->set_max_intset;
	else
		return -ENOENT;
	return 0;
}

int kv_store_config_set(struct kv_store *s, const char *name, long long v)
{
	if (v < 0 || v > UINT32_MAX)
		return -ERANGE;
	if (!strcasecmp(name, "hash-max-listpack-entries") ||
	    !strcasecmp(name, "hash-max-ziplist-entries"))
		s->hash_max_entries = (uint32_t)v;
	else if (!strcasecmp(name, "hash-max-listpack-value") ||
		 !strcasecmp(name, "hash-max-ziplist-value"))
		s->hash_max_value = (uint32_t)v;
	else if (!strcasecmp(name, "set-max-intset-entries"))
		s->set_max_intset = (uint32_t)v;
	else
		return -ENOENT;
	return 0;
}

/* ---- snapshots of the state ------------------------------------------------- */

static void put_u8(struct kv_buf *b, uint8_t v)
{
	kv_buf_append(b, &v, 1);
}

static void put_u32(struct kv_buf *b, uint32_t v)
{
	uint8_t t[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
	kv_buf_append(b, t, 4);
}

static void put_u64(struct kv_buf *b, uint64_t v)
{
	put_u32(b, (uint32_t)(v >> 32));
	put_u32(b, (uint32_t)v);
}

static void put_bytes(struct kv_buf *b, const char *p, size_t n)
{
	put_u32(b, (uint32_t)n);
	kv_buf_append(b, p, n);
}

/*
 * The state (docs/protocol.md 2.2, the snapshot after the dedup state):
 *   u64 removed | u64 now | u64 version | u64 rng | u8 active expiry (ticks) on
 *   | u32 n, n x (u32 slot, u64 version)          deletion versions not 0
 *   | u64 n_keys, per key: u8 db, u8 type, u8 encoding, u64 expire (0 none),
 *     u64 version, u32 klen, key, then
 *       string: u32 len, bytes
 *       hash:   u32 n_fields, per field u32 flen, field, u32 vlen, value
 *       list:   u32 n, per item u32 len, bytes (head first)
 *       set:    u32 n, per member u32 len, bytes
 * all big-endian.
 */
void kv_store_save(const struct kv_store *s, struct kv_buf *b)
{
	put_u64(b, s->removed);
	put_u64(b, (uint64_t)s->now);
	put_u64(b, s->version);
	put_u64(b, s->rng);
	put_u8(b, s->active_expire ? 1 : 0);
	uint32_t nz = 0;
	for (uint32_t i = 0; i < KV_DEL_SLOTS; i++)
		nz += s->del_ver[i] != 0;
	put_u32(b, nz);
	for (uint32_t i = 0; i < KV_DEL_SLOTS; i++)
		if (s->del_ver[i] != 0) {
			put_u32(b, i);
			put_u64(b, s->del_ver[i]);
		}
	put_u64(b, kv_store_keys(s));
	for (uint32_t db = 0; db < KV_DBS; db++)
		kv_dict_foreach(&s->db[db], i, nd) {
			const struct kv_obj *o = (const struct kv_obj *)nd;
			put_u8(b, (uint8_t)db);
			put_u8(b, o->type);
			put_u8(b, o->enc);
			put_u64(b, o->heap ? (uint64_t)o->expire : 0);
			put_u64(b, o->version);
			put_bytes(b, nd->key, nd->klen);
			if (o->type == KV_T_STRING) {
				put_bytes(b, o->p ? o->p : "", o->len);
				continue;
			}
			if (o->type == KV_T_LIST) {
				put_u32(b, (uint32_t)o->n_items);
				for (size_t j = 0; j < o->n_items; j++)
					put_bytes(b, o->items[o->head + j].p, o->items[o->head + j].len);
				continue;
			}
			put_u32(b, (uint32_t)o->fields.n);
			kv_dict_foreach(&o->fields, j, fn) {
				const struct kv_field *f = (const struct kv_field *)fn;
				put_bytes(b, fn->key, fn->klen);
				if (o->type == KV_T_HASH)
					put_bytes(b, f->val, f->vlen);
			}
		}
}

struct reader {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

static uint64_t rd(struct reader *r, int bytes)
{
	if (r->bad || r->len - r->pos < (size_t)bytes) {
		r->bad = true;
		return 0;
	}
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | r->p[r->pos++];
	return v;
}

static const char *rd_bytes(struct reader *r, size_t *n)
{
	*n = (size_t)rd(r, 4);
	if (r->bad || r->len - r->pos < *n) {
		r->bad = true;
		return NULL;
	}
	const char *p = (const char *)r->p + r->pos;
	r->pos += *n;
	return p;
}

struct kv_store *kv_store_load(const uint8_t *p, size_t len, char *err, size_t errlen)
{
	struct reader r = { .p = p, .len = len };
	struct kv_store *s = kv_store_create();
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->removed = rd(&r, 8);
	s->now = (int64_t)rd(&r, 8);
	uint64_t version = rd(&r, 8);
	s->rng = rd(&r, 8);
	s->active_expire = rd(&r, 1) != 0;
	uint32_t nz = (uint32_t)rd(&r, 4);
	for (uint32_t i = 0; i < nz && !r.bad; i++) {
		uint32_t slot = (uint32_t)rd(&r, 4);
		uint64_t v = rd(&r, 8);
		if (slot >= KV_DEL_SLOTS)
			r.bad = true;
		else
			s->del_ver[slot] = v;
	}
	uint64_t n = rd(&r, 8);
	for (uint64_t i = 0; i < n && !r.bad && !s->oom; i++) {
		uint32_t db = (uint32_t)rd(&r, 1), type = (uint32_t)rd(&r, 1), enc = (uint32_t)rd(&r, 1);
		int64_t expire = (int64_t)rd(&r, 8);
		uint64_t over = rd(&r, 8);
		size_t kl;
		const char *k = rd_bytes(&r, &kl);
		if (r.bad || db >= KV_DBS || type > KV_T_SET || enc > KV_ENC_INTSET ||
		    kv_lookup_db(s, db, k, kl) != NULL) {
			r.bad = true;
			break;
		}
		struct kv_obj *o = kv_obj_add(s, db, k, kl, (int)type);
		if (o == NULL)
			break;
		o->version = over;
		o->enc = (uint8_t)enc;
		if (expire != 0 && expire <= s->now) {
			/* kept past its time: active expiry off, or just turned on
			 * again (DEBUG SET-ACTIVE-EXPIRE 1 deletes nothing; the next
			 * entry does) — straight into the heap, as in the source */
			if (!kv_set_expire_raw(s, o, expire))
				break;
		} else if (expire != 0) {
			kv_set_expire(s, o, expire);
		}
		if (type == KV_T_STRING) {
			size_t vl;
			const char *v = rd_bytes(&r, &vl);
			if (v != NULL && !kv_str_set(s, o, v, vl))
				break;
			o->enc = (uint8_t)enc;
			continue;
		}
		uint32_t nf = (uint32_t)rd(&r, 4);
		if (type == KV_T_LIST) {
			if (nf > len - r.pos) {
				r.bad = true;
				break;
			}
			o->items = calloc(nf ? nf : 1, sizeof(*o->items));
			if (o->items == NULL) {
				s->oom = true;
				break;
			}
			o->cap_items = nf;
			for (uint32_t j = 0; j < nf && !r.bad; j++) {
				size_t vl;
				const char *v = rd_bytes(&r, &vl);
				char *e = v ? malloc(vl ? vl : 1) : NULL;
				if (e == NULL) {
					s->oom = s->oom || v != NULL;
					break;
				}
				memcpy(e, v, vl);
				o->items[o->n_items++] = (struct kv_elem){ e, vl };
			}
			if (!r.bad && o->n_items == 0)
				r.bad = true; /* no empty list exists */
			continue;
		}
		for (uint32_t j = 0; j < nf && !r.bad; j++) {
			size_t fl, vl = 0;
			const char *f = rd_bytes(&r, &fl);
			const char *v = type == KV_T_HASH ? rd_bytes(&r, &vl) : NULL;
			if (r.bad)
				break;
			uint64_t h = kv_hash(f, fl);
			struct kv_field *fd = malloc(sizeof(*fd) + (fl ? fl : 1));
			char *val = type == KV_T_HASH ? malloc(vl ? vl : 1) : NULL;
			if (fd == NULL || (type == KV_T_HASH && val == NULL) ||
			    kv_dict_find(&o->fields, f, fl, h) != NULL) {
				if (fd == NULL || (type == KV_T_HASH && val == NULL))
					s->oom = true;
				else
					r.bad = true;
				free(fd);
				free(val);
				break;
			}
			memcpy(fd->key, f, fl);
			fd->node.key = fd->key;
			fd->node.klen = fl;
			fd->node.hash = h;
			if (val != NULL)
				memcpy(val, v, vl);
			fd->val = val;
			fd->vlen = vl;
			if (kv_dict_add(&o->fields, &fd->node) != 0) {
				free(val);
				free(fd);
				s->oom = true;
				break;
			}
		}
		if (!r.bad && o->fields.n == 0)
			r.bad = true; /* no empty hash or set exists */
	}
	/* loading touched versions: put back the saved counter */
	if (!r.bad && !s->oom && r.pos == len) {
		s->version = version;
		return s;
	}
	snprintf(err, errlen, s->oom ? "out of memory" : "malformed store state");
	kv_store_destroy(s);
	return NULL;
}

/* ---- the command table ------------------------------------------------------ */

#define W   KV_CMD_WRITE
#define R   KV_CMD_READONLY
#define L   KV_CMD_LOCAL
#define F   KV_CMD_FAST
#define A   KV_CMD_ADMIN
#define NM  KV_CMD_NOMULTI
#define RND KV_CMD_RANDOM
#define DOM KV_CMD_DENYOOM
#define C(n, ar, fl, fk, lk, st, grp, since, sum, fn)                                       \
	{ n, ar, fl, fk, lk, st, grp, since, sum, fn }

/* Sorted by name (kv_command_find bisects). */
static const struct kv_command commands[] = {
	C("append", 3, W | DOM, 1, 1, 1, "string", "2.0.0", "Append a value to a key", kv_cmd_append),
	C("auth", -2, L | F, 0, 0, 0, "connection", "1.0.0", "Authenticate to the server", NULL),
	C("bitcount", -2, R, 1, 1, 1, "bitmap", "2.6.0", "Count set bits in a string", kv_cmd_bitcount),
	C("client", -2, L, 0, 0, 0, "connection", "2.4.0", "A container for client connection commands", NULL),
	C("command", -1, L, 0, 0, 0, "server", "2.8.13", "Get array of Redis command details", NULL),
	C("config", -2, L | A, 0, 0, 0, "server", "2.0.0", "A container for server configuration commands", NULL),
	C("copy", -3, W | DOM, 1, 2, 1, "generic", "6.2.0", "Copy a key", kv_cmd_copy),
	C("dbsize", 1, R | F, 0, 0, 0, "server", "1.0.0", "Return the number of keys in the selected database", kv_cmd_dbsize),
	C("debug", -2, W | A, 0, 0, 0, "server", "1.0.0", "A container for debugging commands", kv_cmd_debug),
	C("decr", 2, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Decrement the integer value of a key by one", kv_cmd_decr),
	C("decrby", 3, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Decrement the integer value of a key by the given number", kv_cmd_decrby),
	C("del", -2, W, 1, -1, 1, "generic", "1.0.0", "Delete a key", kv_cmd_del),
	C("discard", 1, L | F, 0, 0, 0, "transactions", "2.0.0", "Discard all commands issued after MULTI", NULL),
	C("echo", 2, L | F, 0, 0, 0, "connection", "1.0.0", "Echo the given string", kv_cmd_echo),
	C("eval", -3, L, 0, 0, 0, "scripting", "2.6.0", "Execute a Lua script server side (refused: no scripting)", NULL),
	C("evalsha", -3, L, 0, 0, 0, "scripting", "2.6.0", "Execute a Lua script server side (refused: no scripting)", NULL),
	C("exec", 1, L, 0, 0, 0, "transactions", "1.2.0", "Execute all commands issued after MULTI", NULL),
	C("exists", -2, R | F, 1, -1, 1, "generic", "1.0.0", "Determine if a key exists", kv_cmd_exists),
	C("expire", -3, W | F, 1, 1, 1, "generic", "1.0.0", "Set a key's time to live in seconds", kv_cmd_expire),
	C("expireat", -3, W | F, 1, 1, 1, "generic", "1.2.0", "Set the expiration for a key as a UNIX timestamp", kv_cmd_expireat),
	C("expiretime", 2, R | F, 1, 1, 1, "generic", "7.0.0", "Get the expiration Unix timestamp for a key", kv_cmd_expiretime),
	C("fcall", -3, L, 0, 0, 0, "scripting", "7.0.0", "Invoke a function (refused: no scripting)", NULL),
	C("flushall", -1, W, 0, 0, 0, "server", "1.0.0", "Remove all keys from all databases", kv_cmd_flushall),
	C("flushdb", -1, W, 0, 0, 0, "server", "1.0.0", "Remove all keys from the current database", kv_cmd_flushdb),
	C("function", -2, L, 0, 0, 0, "scripting", "7.0.0", "A container for function commands", NULL),
	C("get", 2, R | F, 1, 1, 1, "string", "1.0.0", "Get the value of a key", kv_cmd_get),
	C("getbit", 3, R | F, 1, 1, 1, "bitmap", "2.2.0", "Returns the bit value at offset in the string value stored at key", kv_cmd_getbit),
	C("getdel", 2, W | F, 1, 1, 1, "string", "6.2.0", "Get the value of a key and delete the key", kv_cmd_getdel),
	C("getex", -2, W | F, 1, 1, 1, "string", "6.2.0", "Get the value of a key and optionally set its expiration", kv_cmd_getex),
	C("getrange", 4, R, 1, 1, 1, "string", "2.4.0", "Get a substring of the string stored at a key", kv_cmd_getrange),
	C("getset", 3, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Set the string value of a key and return its old value", kv_cmd_getset),
	C("hdel", -3, W | F, 1, 1, 1, "hash", "2.0.0", "Delete one or more hash fields", kv_cmd_hdel),
	C("hello", -1, L | F, 0, 0, 0, "connection", "6.0.0", "Handshake with Redis", NULL),
	C("hexists", 3, R | F, 1, 1, 1, "hash", "2.0.0", "Determine if a hash field exists", kv_cmd_hexists),
	C("hget", 3, R | F, 1, 1, 1, "hash", "2.0.0", "Get the value of a hash field", kv_cmd_hget),
	C("hgetall", 2, R, 1, 1, 1, "hash", "2.0.0", "Get all the fields and values in a hash", kv_cmd_hgetall),
	C("hincrby", 4, W | F | DOM, 1, 1, 1, "hash", "2.0.0", "Increment the integer value of a hash field by the given number", kv_cmd_hincrby),
	C("hincrbyfloat", 4, W | F | DOM, 1, 1, 1, "hash", "2.6.0", "Increment the float value of a hash field by the given amount", kv_cmd_hincrbyfloat),
	C("hkeys", 2, R, 1, 1, 1, "hash", "2.0.0", "Get all the fields in a hash", kv_cmd_hkeys),
	C("hlen", 2, R | F, 1, 1, 1, "hash", "2.0.0", "Get the number of fields in a hash", kv_cmd_hlen),
	C("hmget", -3, R | F, 1, 1, 1, "hash", "2.0.0", "Get the values of all the given hash fields", kv_cmd_hmget),
	C("hmset", -4, W | F | DOM, 1, 1, 1, "hash", "2.0.0", "Set multiple hash fields to multiple values", kv_cmd_hset),
	C("hrandfield", -2, R | RND, 1, 1, 1, "hash", "6.2.0", "Get one or multiple random fields from a hash", kv_cmd_hrandfield),
	C("hscan", -3, R | RND, 1, 1, 1, "hash", "2.8.0", "Incrementally iterate hash fields and associated values", kv_cmd_hscan),
	C("hset", -4, W | F | DOM, 1, 1, 1, "hash", "2.0.0", "Set the string value of a hash field", kv_cmd_hset),
	C("hsetnx", 4, W | F | DOM, 1, 1, 1, "hash", "2.0.0", "Set the value of a hash field, only if the field does not exist", kv_cmd_hsetnx),
	C("hstrlen", 3, R | F, 1, 1, 1, "hash", "3.2.0", "Get the length of the value of a hash field", kv_cmd_hstrlen),
	C("hvals", 2, R, 1, 1, 1, "hash", "2.0.0", "Get all the values in a hash", kv_cmd_hvals),
	C("incr", 2, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Increment the integer value of a key by one", kv_cmd_incr),
	C("incrby", 3, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Increment the integer value of a key by the given amount", kv_cmd_incrby),
	C("incrbyfloat", 3, W | F | DOM, 1, 1, 1, "string", "2.6.0", "Increment the float value of a key by the given amount", kv_cmd_incrbyfloat),
	C("info", -1, L, 0, 0, 0, "server", "1.0.0", "Get information and statistics about the server", NULL),
	C("keys", 2, R, 0, 0, 0, "generic", "1.0.0", "Find all keys matching the given pattern", kv_cmd_keys),
	C("lastsave", 1, L | F, 0, 0, 0, "server", "1.0.0", "Get the UNIX time stamp of the last successful save to disk", NULL),
	C("lcs", -3, R, 1, 2, 1, "string", "7.0.0", "Find longest common substring", kv_cmd_lcs),
	C("lindex", 3, R, 1, 1, 1, "list", "1.0.0", "Get an element from a list by its index", kv_cmd_lindex),
	C("llen", 2, R | F, 1, 1, 1, "list", "1.0.0", "Get the length of a list", kv_cmd_llen),
	C("lpop", -2, W | F, 1, 1, 1, "list", "1.0.0", "Remove and get the first elements in a list", kv_cmd_lpop),
	C("lpush", -3, W | F | DOM, 1, 1, 1, "list", "1.0.0", "Prepend one or multiple elements to a list", kv_cmd_lpush),
	C("lpushx", -3, W | F | DOM, 1, 1, 1, "list", "2.2.0", "Prepend an element to a list, only if the list exists", kv_cmd_lpushx),
	C("lrange", 4, R, 1, 1, 1, "list", "1.0.0", "Get a range of elements from a list", kv_cmd_lrange),
	C("memory", -2, R, 0, 0, 0, "server", "4.0.0", "A container for memory diagnostics commands", kv_cmd_memory),
	C("mget", -2, R | F, 1, -1, 1, "string", "1.0.0", "Get the values of all the given keys", kv_cmd_mget),
	C("move", 3, W | F, 1, 1, 1, "generic", "1.0.0", "Move a key to another database", kv_cmd_move),
	C("mset", -3, W | DOM, 1, -1, 2, "string", "1.0.1", "Set multiple keys to multiple values", kv_cmd_mset),
	C("msetnx", -3, W | DOM, 1, -1, 2, "string", "1.0.1", "Set multiple keys to multiple values, only if none of the keys exist", kv_cmd_msetnx),
	C("multi", 1, L | F, 0, 0, 0, "transactions", "1.2.0", "Mark the start of a transaction block", NULL),
	C("object", -2, R, 2, 2, 1, "generic", "2.2.3", "A container for object introspection commands", kv_cmd_object),
	C("persist", 2, W | F, 1, 1, 1, "generic", "2.2.0", "Remove the expiration from a key", kv_cmd_persist),
	C("pexpire", -3, W | F, 1, 1, 1, "generic", "2.6.0", "Set a key's time to live in milliseconds", kv_cmd_pexpire),
	C("pexpireat", -3, W | F, 1, 1, 1, "generic", "2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds", kv_cmd_pexpireat),
	C("pexpiretime", 2, R | F, 1, 1, 1, "generic", "7.0.0", "Get the expiration Unix timestamp for a key in milliseconds", kv_cmd_pexpiretime),
	C("ping", -1, L | F, 0, 0, 0, "connection", "1.0.0", "Ping the server", kv_cmd_ping),
	C("psetex", 4, W | DOM, 1, 1, 1, "string", "2.6.0", "Set the value and expiration in milliseconds of a key", kv_cmd_psetex),
	C("psubscribe", -2, L, 0, 0, 0, "pubsub", "2.0.0", "Listen for messages published to channels matching the given patterns", NULL),
	C("psync", -3, L | A | NM, 0, 0, 0, "server", "2.8.0", "Start redis's replication stream from this replica (full resynchronization)", NULL),
	C("pttl", 2, R | F, 1, 1, 1, "generic", "2.6.0", "Get the time to live for a key in milliseconds", kv_cmd_pttl),
	C("publish", 3, W | F, 0, 0, 0, "pubsub", "2.0.0", "Post a message to a channel", kv_cmd_publish),
	C("pubsub", -2, L, 0, 0, 0, "pubsub", "2.8.0", "A container for Pub/Sub commands", NULL),
	C("punsubscribe", -1, L, 0, 0, 0, "pubsub", "2.0.0", "Stop listening for messages posted to channels matching the given patterns", NULL),
	C("quit", -1, L | F, 0, 0, 0, "connection", "1.0.0", "Close the connection", NULL),
	C("randomkey", 1, R | RND, 0, 0, 0, "generic", "1.0.0", "Return a random key from the keyspace", kv_cmd_randomkey),
	C("rename", 3, W, 1, 2, 1, "generic", "1.0.0", "Rename a key", kv_cmd_rename),
	C("renamenx", 3, W | F, 1, 2, 1, "generic", "1.0.0", "Rename a key, only if the new key does not exist", kv_cmd_renamenx),
	C("replconf", -1, L | A, 0, 0, 0, "server", "3.0.0", "A replica's replication settings and acknowledgements", NULL),
	C("replica", 3, W | A, 0, 0, 0, "server", "innet", "Remove a replica from, or add it back to, the log's trim group", kv_cmd_replica),
	C("replicaof", 3, L | A, 0, 0, 0, "server", "5.0.0", "Make the server a replica of another instance, or promote it as master", NULL),
	C("reset", 1, L | F, 0, 0, 0, "connection", "6.2.0", "Reset the connection", NULL),
	C("rpop", -2, W | F, 1, 1, 1, "list", "1.0.0", "Remove and get the last elements in a list", kv_cmd_rpop),
	C("rpush", -3, W | F | DOM, 1, 1, 1, "list", "1.0.0", "Append one or multiple elements to a list", kv_cmd_rpush),
	C("rpushx", -3, W | F | DOM, 1, 1, 1, "list", "2.2.0", "Append an element to a list, only if the list exists", kv_cmd_rpushx),
	C("sadd", -3, W | F | DOM, 1, 1, 1, "set", "1.0.0", "Add one or more members to a set", kv_cmd_sadd),
	C("save", 1, L | A | NM, 0, 0, 0, "server", "1.0.0", "Synchronously save the dataset to disk", NULL),
	C("scan", -2, R | RND, 0, 0, 0, "generic", "2.8.0", "Incrementally iterate the keys space", kv_cmd_scan),
	C("scard", 2, R | F, 1, 1, 1, "set", "1.0.0", "Get the number of members in a set", kv_cmd_scard),
	C("script", -2, L, 0, 0, 0, "scripting", "2.6.0", "A container for Lua scripts management commands (refused: no scripting)", NULL),
	C("select", 2, L | F, 0, 0, 0, "connection", "1.0.0", "Change the selected database for the current connection", kv_cmd_select),
	C("set", -3, W | DOM, 1, 1, 1, "string", "1.0.0", "Set the string value of a key", kv_cmd_set),
	C("setbit", 4, W | DOM, 1, 1, 1, "bitmap", "2.2.0", "Sets or clears the bit at offset in the string value stored at key", kv_cmd_setbit),
	C("setex", 4, W | DOM, 1, 1, 1, "string", "2.0.0", "Set the value and expiration of a key", kv_cmd_setex),
	C("setnx", 3, W | F | DOM, 1, 1, 1, "string", "1.0.0", "Set the value of a key, only if the key does not exist", kv_cmd_setnx),
	C("setrange", 4, W | DOM, 1, 1, 1, "string", "2.2.0", "Overwrite part of a string at key starting at the specified offset", kv_cmd_setrange),
	C("shutdown", -1, L | A | NM, 0, 0, 0, "server", "1.0.0", "Synchronously save the dataset to disk and then shut down the server", NULL),
	C("sismember", 3, R | F, 1, 1, 1, "set", "1.0.0", "Determine if a given value is a member of a set", kv_cmd_sismember),
	C("slaveof", 3, L | A, 0, 0, 0, "server", "1.0.0", "Make the server a replica of another instance, or promote it as master", NULL),
	C("smembers", 2, R, 1, 1, 1, "set", "1.0.0", "Get all the members in a set", kv_cmd_smembers),
	C("snapshot", 1, L | A, 0, 0, 0, "server", "innet", "This replica's state, for a replica catching up", NULL),
	C("spop", -2, W | F, 1, 1, 1, "set", "1.0.0", "Remove and return one or multiple random members from a set", kv_cmd_spop),
	C("srandmember", -2, R | RND, 1, 1, 1, "set", "1.0.0", "Get one or multiple random members from a set", kv_cmd_srandmember),
	C("srem", -3, W | F, 1, 1, 1, "set", "1.0.0", "Remove one or more members from a set", kv_cmd_srem),
	C("strlen", 2, R | F, 1, 1, 1, "string", "2.2.0", "Get the length of the value stored in a key", kv_cmd_strlen),
	C("subscribe", -2, L, 0, 0, 0, "pubsub", "2.0.0", "Listen for messages published to the given channels", NULL),
	C("substr", 4, R, 1, 1, 1, "string", "1.0.0", "Get a substring of the string stored at a key", kv_cmd_getrange),
	C("swapdb", 3, W | F, 0, 0, 0, "server", "4.0.0", "Swaps two Redis databases", kv_cmd_swapdb),
	C("sync", 1, L | A | NM, 0, 0, 0, "server", "1.0.0", "Start redis's replication stream from this replica", NULL),
	C("time", 1, L | F | RND, 0, 0, 0, "server", "2.6.0", "Return the current server time", NULL),
	C("touch", -2, R | F, 1, -1, 1, "generic", "3.2.1", "Alters the last access time of a key(s). Returns the number of existing keys specified.", kv_cmd_touch),
	C("ttl", 2, R | F, 1, 1, 1, "generic", "1.0.0", "Get the time to live for a key in seconds", kv_cmd_ttl),
	C("type", 2, R | F, 1, 1, 1, "generic", "1.0.0", "Determine the type stored at key", kv_cmd_type),
	C("unlink", -2, W | F, 1, -1, 1, "generic", "4.0.0", "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", kv_cmd_del),
	C("unsubscribe", -1, L, 0, 0, 0, "pubsub", "2.0.0", "Stop listening for messages posted to the given channels", NULL),
	C("unwatch", 1, L | F, 0, 0, 0, "transactions", "2.2.0", "Forget about all watched keys", NULL),
	C("wait", 3, L, 0, 0, 0, "generic", "3.0.0", "Wait for the synchronous replication of all the write commands sent in the context of the current connection", NULL),
	C("watch", -2, L | F, 1, -1, 1, "transactions", "2.2.0", "Watch the given keys to determine execution of the MULTI/EXEC block", NULL),
};

#undef C

size_t kv_command_count(void)
{
	return sizeof(commands) / sizeof(commands[0]);
}

const struct kv_command *kv_command_at(size_t i)
{
	return i < kv_command_count() ? &commands[i] : NULL;
}

const struct kv_command *kv_command_find(const char *name, size_t len)
{
	char low[24];
	if (len == 0 || len >= sizeof(low))
		return NULL;
	for (size_t i = 0; i < len; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	low[len] = '\0';
	size_t lo = 0, hi = kv_command_count();
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int cmp = strcmp(low, commands[mid].name);
		if (cmp == 0)
			return &commands[mid];
		if (cmp < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

bool kv_command_arity_ok(const struct kv_command *cmd, int argc)
{
	if (cmd->arity > 0 ? argc != cmd->arity : argc < -cmd->arity)
		return false;
	/* key-value pairs: redis checks them in the command, with the same error */
	if (cmd->fn == kv_cmd_mset || cmd->fn == kv_cmd_msetnx)
		return argc % 2 == 1;
	if (cmd->fn == kv_cmd_hset)
		return argc % 2 == 0;
	return true;
}

/* ---- applying commands ------------------------------------------------------ */

/* MULTI's watch records (db version flags key): has any watched key changed
 * since its version? Flags bit 0: the key was stale when watched (expired by
 * the watcher's clock), so its expiry is no change. */
static bool watch_dirty(struct kv_store *s, int argc, char *const *argv, const size_t *lens)
{
	for (int i = 1; i + 3 < argc; i += 4) {
		long long db, ver, flags;
		if (!kv_parse_ll(argv[i], lens[i], &db) || db < 0 || db >= KV_DBS ||
		    !kv_parse_ll(argv[i + 1], lens[i + 1], &ver) || ver < 0 ||
		    !kv_parse_ll(argv[i + 2], lens[i + 2], &flags))
			return true; /* not ours to understand: refuse rather than guess */
		const struct kv_obj *o = kv_lookup_db(s, (uint32_t)db, argv[i + 3], lens[i + 3]);
		bool stale = flags & KV_WATCH_STALE, existed = flags & KV_WATCH_EXISTED;
		if (o != NULL && kv_expired(s, o)) {
			/* past its expire, still there (active expiry off): a change
			 * if it was alive when watched (it expired since), or if it is
			 * another key than the stale or absent one watched */
			if ((existed && !stale) || o->version > (uint64_t)ver)
				return true;
		} else if (o != NULL) {
			if (o->version > (uint64_t)ver)
				return true;
		} else if (!stale &&
			   s->del_ver[del_slot((uint32_t)db, kv_hash(argv[i + 3], lens[i + 3]))] >
				   (uint64_t)ver) {
			return true; /* deleted since (an expired key's deletion: no change) */
		}
	}
	return false;
}

static void run(struct kv_store *s, struct kv_ctx *ctx, int argc, char *const *argv,
		const size_t *lens, struct kv_buf *out)
{
	const struct kv_command *cmd = kv_command_find(argv[0], lens[0]);
	if (cmd == NULL) {
		kv_reply_unknown_command(out, argc, argv, lens);
		return;
	}
	if (!kv_command_arity_ok(cmd, argc)) {
		kv_reply_arity_error(out, cmd->name);
		return;
	}
	if (cmd->fn == NULL) {
		if (ctx->local != NULL)
			ctx->local(ctx->local_arg, argc, argv, lens, out);
		else
			kv_buf_str(out, "+OK\r\n"); /* another replica's: its reply goes nowhere */
		return;
	}
	if (ctx->db >= KV_DBS)
		ctx->db = 0;
	struct kv_call c = {
		.s = s, .ctx = ctx, .db = &s->db[ctx->db], .dbi = ctx->db, .argc = argc,
		.argv = argv, .lens = lens, .out = out, .resp = ctx->resp == 3 ? 3 : 2,
	};
	uint64_t v0 = s->version;
	cmd->fn(&c);
	/* the replication feed: a change the command did not describe itself
	 * goes as the command came (FLUSH* and SWAPDB always, as redis) */
	bool forced = cmd->fn == kv_cmd_flushall || cmd->fn == kv_cmd_flushdb ||
		      cmd->fn == kv_cmd_swapdb;
	if (s->feed != NULL && !c.propagated && (s->version != v0 || forced) &&
	    (cmd->flags & KV_CMD_WRITE))
		kv_propagate(&c, argc, (const char *const *)argv, lens);
}

static bool is(const char *a, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp(a, name, n);
}

void kv_store_exec(struct kv_store *s, struct kv_ctx *ctx, int argc, char *const *argv,
		   const size_t *lens, struct kv_buf *out)
{
	struct kv_ctx def = { .resp = 2 };
	if (ctx == NULL)
		ctx = &def;
	if (argc < 1)
		return;
	if (ctx->read_only) {
		/* a read answered outside the log (a read index): a command that
		 * may change the store, or a block, must never run here */
		const struct kv_command *cmd = kv_command_find(argv[0], lens[0]);
		if (cmd == NULL || (cmd->flags & KV_CMD_WRITE) || ctx->multi ||
		    is(argv[0], lens[0], "multi") || is(argv[0], lens[0], "exec")) {
			kv_buf_str(out, "-ERR innet kv: not a read-only command (internal error)\r\n");
			return;
		}
		run(s, ctx, argc, argv, lens, out);
		return;
	}
	if (ctx->multi) {
		if (is(argv[0], lens[0], "exec") && argc == 1) {
			if (ctx->multi_skip) {
				kv_buf_str(out, ctx->resp == 3 ? "_\r\n" : "*-1\r\n");
			} else {
				kv_feed_block(s, ctx);
				kv_buf_num(out, '*', ctx->multi_n);
				if (ctx->multi_out.oom)
					out->oom = true;
				else
					kv_buf_append(out, ctx->multi_out.p, ctx->multi_out.len);
			}
			ctx->multi = ctx->multi_skip = false;
			ctx->multi_n = 0;
			ctx->multi_out.len = 0;
			return;
		}
		if (ctx->multi_skip)
			return;
		if (is(argv[0], lens[0], "multi")) {
			kv_buf_str(&ctx->multi_out, "-ERR MULTI calls can not be nested\r\n");
		} else {
			run(s, ctx, argc, argv, lens, &ctx->multi_out);
		}
		ctx->multi_n++;
		return;
	}
	if (is(argv[0], lens[0], "multi")) {
		/* the start of a block from the log; its watch records follow */
		ctx->multi = true;
		ctx->multi_n = 0;
		ctx->multi_out.len = 0;
		ctx->multi_out.oom = false;
		ctx->multi_feed.len = 0;
		ctx->multi_feed.oom = false;
		ctx->multi_feed_n = 0;
		ctx->multi_skip = watch_dirty(s, argc, argv, lens);
		return;
	}
	if (is(argv[0], lens[0], "exec")) {
		kv_buf_str(out, "-ERR EXEC without MULTI\r\n");
		return;
	}
	run(s, ctx, argc, argv, lens, out);
}

void kv_store_apply(struct kv_store *s, int argc, char *const *argv, const size_t *lens,
		    struct kv_buf *out)
{
	struct kv_ctx ctx = { .resp = 2 };
	kv_store_exec(s, &ctx, argc, argv, lens, out);
	kv_ctx_end(&ctx);
}

void kv_ctx_end(struct kv_ctx *ctx)
{
	ctx->multi = ctx->multi_skip = false;
	ctx->multi_n = 0;
	ctx->multi_feed_n = 0;
	kv_buf_free(&ctx->multi_out);
	kv_buf_free(&ctx->multi_feed);
}

/* ---- commands of no type ------------------------------------------------------- */

void kv_cmd_ping(struct kv_call *c)
{
	if (c->argc > 2)
		kv_reply_arity(c);
	else if (c->argc == 2)
		kv_reply_bulk(c, c->argv[1], c->lens[1]);
	else
		kv_reply_raw(c, "+PONG\r\n");
}

void kv_cmd_echo(struct kv_call *c)
{
	kv_reply_bulk(c, c->argv[1], c->lens[1]);
}

void kv_store_set_publish(struct kv_store *s,
			  long long (*fn)(void *arg, const char *ch, size_t chl, const char *msg,
					  size_t ml),
			  void *arg)
{
	s->publish = fn;
	s->publish_arg = arg;
}

/* PUBLISH, from the log: every replica delivers to its subscribers; the
 * reply is the receivers on this one. Fed to the replication stream, as
 * redis does (a redis replica's subscribers get it too). */
void kv_cmd_publish(struct kv_call *c)
{
	long long n = 0;
	if (c->s->publish != NULL && !(c->ctx != NULL && c->ctx->read_only))
		n = c->s->publish(c->s->publish_arg, c->argv[1], c->lens[1], c->argv[2], c->lens[2]);
	kv_reply_int(c, n);
	kv_propagate(c, 3, (const char *const *)c->argv, c->lens);
}

/* SELECT inside a block (outside, the server answers it for the connection). */
void kv_cmd_select(struct kv_call *c)
{
	long long db;
	if (!kv_arg_ll(c, 1, &db))
		return;
	if (db < 0 || db >= KV_DBS) {
		kv_reply_raw(c, "-ERR DB index is out of range\r\n");
		return;
	}
	c->ctx->db = (uint32_t)db;
	kv_reply_ok(c);
}

/* REPLICA REMOVE|ADD id: the trim group's membership, part of the state
 * (so every replica changes it at the same log position, and snapshots
 * carry it). Removing the last member is refused. :1 changed, :0 already so. */
void kv_cmd_replica(struct kv_call *c)
{
	struct kv_store *s = c->s;
	bool rm = is(c->argv[1], c->lens[1], "remove"), add = is(c->argv[1], c->lens[1], "add");
	long long id;
	uint32_t max = s->n_learners ? s->n_learners : 64;
	if ((!rm && !add) || !kv_parse_ll(c->argv[2], c->lens[2], &id) || id < 0 ||
	    id >= (long long)max) {
		kv_reply_err(c, "usage: REPLICA REMOVE|ADD learner-id (0..%u)", max - 1);
		return;
	}
	uint64_t bit = 1ull << id;
	uint64_t all = max >= 64 ? ~0ull : (1ull << max) - 1;
	if (rm && !(s->removed & bit) && ((s->removed | bit) & all) == all) {
		kv_reply_err(c, "cannot remove the last replica");
		return;
	}
	bool change = rm ? !(s->removed & bit) : (s->removed & bit) != 0;
	s->removed = rm ? s->removed | bit : s->removed & ~bit;
	kv_reply_int(c, change);
}
