/*
 * kv_store.c — the KV store's state and commands: a chained hash map of byte
 * strings, the commands that go through the log (GET SET DEL INCR DECR
 * INCRBY EXISTS MGET MSET DBSIZE, REPLICA REMOVE|ADD) applied in log order
 * with redis's replies, and the reply buffers (kv.h). Deterministic: every
 * replica that applies the same log reaches the same state (kv_store_digest).
 * The server around it is kv_server.c (snapshots: kv_snapshot.c), the RESP
 * parser kv_resp.c.
 */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

/* ---- buffers ------------------------------------------------------------ */

int kv_buf_append(struct kv_buf *b, const void *p, size_t n)
{
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

/* ---- the store: a chained hash map of byte strings ---------------------- */

static uint64_t fnv(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h;
}

struct kv_store *kv_store_create(void)
{
	struct kv_store *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->cap = 1024;
	s->tab = calloc(s->cap, sizeof(*s->tab));
	if (s->tab == NULL) {
		free(s);
		return NULL;
	}
	return s;
}

void kv_store_destroy(struct kv_store *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->cap; i++)
		for (struct kv_item *it = s->tab[i], *nx; it; it = nx) {
			nx = it->next;
			free(it->val);
			free(it);
		}
	free(s->tab);
	free(s);
}

static struct kv_item **find(struct kv_store *s, const char *k, size_t kl, uint64_t h)
{
	struct kv_item **pp = &s->tab[h & (s->cap - 1)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == h && (*pp)->klen == kl && memcmp((*pp)->key, k, kl) == 0)
			return pp;
	return pp;
}

static void grow(struct kv_store *s)
{
	size_t cap = s->cap * 2;
	struct kv_item **t = calloc(cap, sizeof(*t));
	if (t == NULL)
		return; /* stay at this size: longer chains, still correct */
	for (size_t i = 0; i < s->cap; i++)
		for (struct kv_item *it = s->tab[i], *nx; it; it = nx) {
			nx = it->next;
			it->next = t[it->hash & (cap - 1)];
			t[it->hash & (cap - 1)] = it;
		}
	free(s->tab);
	s->tab = t;
	s->cap = cap;
}

static struct kv_item *get(struct kv_store *s, const char *k, size_t kl)
{
	return *find(s, k, kl, fnv(k, kl));
}

void kv_store_set(struct kv_store *s, const char *k, size_t kl, const char *v, size_t vl)
{
	uint64_t h = fnv(k, kl);
	struct kv_item **pp = find(s, k, kl, h);
	char *nv = malloc(vl ? vl : 1);
	if (nv == NULL) {
		s->oom = true;   /* kv_store_oom(): the server stops */
		return;
	}
	memcpy(nv, v, vl);
	if (*pp) {
		free((*pp)->val);
		(*pp)->val = nv;
		(*pp)->vlen = vl;
		return;
	}
	struct kv_item *it = malloc(sizeof(*it) + kl);
	if (it == NULL) {
		free(nv);
		s->oom = true;
		return;
	}
	it->hash = h;
	it->klen = kl;
	memcpy(it->key, k, kl);
	it->val = nv;
	it->vlen = vl;
	it->next = NULL;
	*pp = it;
	if (++s->n > s->cap)
		grow(s);
}

static bool del(struct kv_store *s, const char *k, size_t kl)
{
	struct kv_item **pp = find(s, k, kl, fnv(k, kl));
	if (*pp == NULL)
		return false;
	struct kv_item *it = *pp;
	*pp = it->next;
	free(it->val);
	free(it);
	s->n--;
	return true;
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

uint64_t kv_store_digest(const struct kv_store *s)
{
	uint64_t d = s->n + s->removed * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < s->cap; i++)
		for (const struct kv_item *it = s->tab[i]; it; it = it->next)
			d += it->hash * 31 + fnv(it->val, it->vlen); /* order-independent */
	return d;
}

bool kv_parse_ll(const char *p, size_t n, long long *out)
{
	if (n == 0 || n > 20)
		return false;
	char tmp[24];
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	if (tmp[0] == '+' || isspace((unsigned char)tmp[0]) || (n > 1 && tmp[0] == '0') ||
	    (n > 2 && tmp[0] == '-' && tmp[1] == '0'))
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(tmp, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* Commands that read or write the store, with redis's arity (negative: at
 * least) and whether they only read it (KV_CMD_READ: answered from a read
 * index, without a log entry; docs/consensus.md). */
static const struct {
	const char *name;
	int arity;
	uint32_t flags;
} logged[] = {
	{ "get", 2, KV_CMD_READ }, { "set", 3, 0 }, { "del", -2, 0 }, { "incr", 2, 0 },
	{ "decr", 2, 0 }, { "incrby", 3, 0 }, { "exists", -2, KV_CMD_READ },
	{ "mget", -2, KV_CMD_READ }, { "mset", -3, 0 }, { "dbsize", 1, KV_CMD_READ },
	{ "replica", 3, 0 },
};

bool kv_logged_readonly(int li)
{
	return (logged[li].flags & KV_CMD_READ) != 0;
}

int kv_logged_index(const char *name)
{
	for (size_t i = 0; i < sizeof(logged) / sizeof(logged[0]); i++)
		if (!strcasecmp(name, logged[i].name))
			return (int)i;
	return -1;
}

/* True if argc fits the arity of logged command li (MSET: key value pairs). */
bool kv_arity_ok(int li, int argc)
{
	int ar = logged[li].arity;
	if (ar < 0 && argc < -ar)
		return false;
	if (ar > 0 && argc != ar)
		return false;
	return strcmp(logged[li].name, "mset") != 0 || argc % 2 == 1;
}

/* Redis's reply to a wrong number of arguments. */
void kv_arity_error(struct kv_buf *out, int li)
{
	char msg[96];
	snprintf(msg, sizeof(msg), "-ERR wrong number of arguments for '%s' command\r\n",
		 logged[li].name);
	kv_buf_append(out, msg, strlen(msg));
}

static void incr_by(struct kv_store *s, const char *k, size_t kl, long long by, struct kv_buf *out)
{
	struct kv_item *it = get(s, k, kl);
	long long v = 0;
	if (it && !kv_parse_ll(it->val, it->vlen, &v)) {
		kv_buf_str(out, "-ERR value is not an integer or out of range\r\n");
		return;
	}
	if ((by > 0 && v > LLONG_MAX - by) || (by < 0 && v < LLONG_MIN - by)) {
		kv_buf_str(out, "-ERR increment or decrement would overflow\r\n");
		return;
	}
	v += by;
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v);
	kv_store_set(s, k, kl, tmp, (size_t)n);
	kv_buf_num(out, ':', v);
}

/* REPLICA REMOVE|ADD id: the trim group's membership, part of the state
 * (so every replica changes it at the same log position, and snapshots
 * carry it). Removing the last member is refused. :1 changed, :0 already so. */
static void replica_apply(struct kv_store *s, char *const *argv, const size_t *lens,
			  struct kv_buf *out)
{
	bool rm = !strcasecmp(argv[1], "remove"), add = !strcasecmp(argv[1], "add");
	long long id;
	uint32_t max = s->n_learners ? s->n_learners : 64;
	if ((!rm && !add) || !kv_parse_ll(argv[2], lens[2], &id) || id < 0 || id >= (long long)max) {
		char msg[96];
		snprintf(msg, sizeof(msg), "-ERR usage: REPLICA REMOVE|ADD learner-id (0..%u)\r\n",
			 max - 1);
		kv_buf_str(out, msg);
		return;
	}
	uint64_t bit = 1ull << id;
	uint64_t all = max >= 64 ? ~0ull : (1ull << max) - 1;
	if (rm && !(s->removed & bit) && ((s->removed | bit) & all) == all) {
		kv_buf_str(out, "-ERR cannot remove the last replica\r\n");
		return;
	}
	bool change = rm ? !(s->removed & bit) : (s->removed & bit) != 0;
	s->removed = rm ? s->removed | bit : s->removed & ~bit;
	kv_buf_num(out, ':', change);
}

void kv_store_apply(struct kv_store *s, int argc, char *const *argv, const size_t *lens,
		    struct kv_buf *out)
{
	const char *cmd = argv[0];
	/* Arity is checked here too, not only where clients' commands enter: a
	 * log entry from elsewhere (kv_entry_valid checks its framing only) must
	 * not make a replica read past argv. */
	int li = kv_logged_index(cmd);
	if (li >= 0 && !kv_arity_ok(li, argc)) {
		kv_arity_error(out, li);
		return;
	}
	if (!strcasecmp(cmd, "get")) {
		struct kv_item *it = get(s, argv[1], lens[1]);
		if (it)
			kv_buf_bulk(out, it->val, it->vlen);
		else
			kv_buf_str(out, "$-1\r\n");
	} else if (!strcasecmp(cmd, "set")) {
		if (argc != 3) {
			kv_buf_str(out, "-ERR syntax error (innet kv supports SET key value only)\r\n");
			return;
		}
		kv_store_set(s, argv[1], lens[1], argv[2], lens[2]);
		kv_buf_str(out, "+OK\r\n");
	} else if (!strcasecmp(cmd, "del") || !strcasecmp(cmd, "exists")) {
		bool is_del = (cmd[0] | 0x20) == 'd';
		long long n = 0;
		for (int i = 1; i < argc; i++)
			n += is_del ? del(s, argv[i], lens[i]) : get(s, argv[i], lens[i]) != NULL;
		kv_buf_num(out, ':', n);
	} else if (!strcasecmp(cmd, "incr")) {
		incr_by(s, argv[1], lens[1], 1, out);
	} else if (!strcasecmp(cmd, "decr")) {
		incr_by(s, argv[1], lens[1], -1, out);
	} else if (!strcasecmp(cmd, "incrby")) {
		long long by;
		if (!kv_parse_ll(argv[2], lens[2], &by))
			kv_buf_str(out, "-ERR value is not an integer or out of range\r\n");
		else
			incr_by(s, argv[1], lens[1], by, out);
	} else if (!strcasecmp(cmd, "mget")) {
		kv_buf_num(out, '*', argc - 1);
		for (int i = 1; i < argc; i++) {
			struct kv_item *it = get(s, argv[i], lens[i]);
			if (it)
				kv_buf_bulk(out, it->val, it->vlen);
			else
				kv_buf_str(out, "$-1\r\n");
		}
	} else if (!strcasecmp(cmd, "mset")) {
		if (argc % 2 != 1) {
			kv_buf_str(out, "-ERR wrong number of arguments for 'mset' command\r\n");
			return;
		}
		for (int i = 1; i < argc; i += 2)
			kv_store_set(s, argv[i], lens[i], argv[i + 1], lens[i + 1]);
		kv_buf_str(out, "+OK\r\n");
	} else if (!strcasecmp(cmd, "dbsize")) {
		kv_buf_num(out, ':', (long long)s->n);
	} else if (!strcasecmp(cmd, "replica")) {
		replica_apply(s, argv, lens, out);
	} else {
		kv_buf_str(out, "-ERR unknown command\r\n");
	}
}

