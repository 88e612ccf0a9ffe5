/*
 * kv_list.c — the KV store's lists and sets, the basic commands of each
 * with redis 7's replies: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP (COUNT) LLEN
 * LRANGE LINDEX; SADD SREM SMEMBERS SCARD SISMEMBER SPOP SRANDMEMBER; and
 * MEMORY USAGE. Enough for applications' queues and tag sets and for the
 * type errors between them; the rest of redis's list and set commands
 * (blocking pops, LMOVE, SINTER...) are not here.
 *
 * A list is an array used as a deque (items[head .. head + n)); a set is a
 * kv_dict of members (struct kv_field without a value). SPOP's choice is a
 * write: it comes from kv_write_seed, the same on every replica.
 */
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

/* ---- lists ---- */

void kv_list_free_items(struct kv_obj *o)
{
	for (size_t i = 0; i < o->n_items; i++)
		free(o->items[o->head + i].p);
	free(o->items);
	o->items = NULL;
	o->head = o->n_items = o->cap_items = 0;
}

/* Room for one more item at the front (left) or the back; false on OOM. */
static bool list_room(struct kv_store *s, struct kv_obj *o, bool left)
{
	if (left ? o->head > 0 : o->head + o->n_items < o->cap_items)
		return true;
	size_t cap = o->cap_items ? o->cap_items * 2 : 8;
	struct kv_elem *v = malloc(cap * sizeof(*v));
	if (v == NULL) {
		s->oom = true;
		return false;
	}
	size_t head = left ? cap - o->n_items - (cap - o->n_items) / 4 : (cap - o->n_items) / 4;
	if (o->n_items > 0)
		memcpy(v + head, o->items + o->head, o->n_items * sizeof(*v));
	free(o->items);
	o->items = v;
	o->head = head;
	o->cap_items = cap;
	return true;
}

static void push_generic(struct kv_call *c, bool left, bool only_existing)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_LIST))
		return;
	if (o == NULL) {
		if (only_existing) {
			kv_reply_int(c, 0);
			return;
		}
		o = kv_obj_add(c->s, c->dbi, c->argv[1], c->lens[1], KV_T_LIST);
		if (o == NULL)
			return;
		o->enc = KV_ENC_QUICKLIST;
	}
	for (int i = 2; i < c->argc; i++) {
		char *p = malloc(c->lens[i] ? c->lens[i] : 1);
		if (p == NULL || !list_room(c->s, o, left)) {
			free(p);
			c->s->oom = true;
			break;
		}
		memcpy(p, c->argv[i], c->lens[i]);
		struct kv_elem e = { p, c->lens[i] };
		if (left)
			o->items[--o->head] = e;
		else
			o->items[o->head + o->n_items] = e;
		o->n_items++;
	}
	if (o->n_items == 0) {
		kv_obj_del(c->s, o); /* out of memory before the first */
		return;
	}
	kv_touch(c->s, o);
	kv_reply_int(c, (long long)o->n_items);
}

void kv_cmd_lpush(struct kv_call *c)
{
	push_generic(c, true, false);
}

void kv_cmd_rpush(struct kv_call *c)
{
	push_generic(c, false, false);
}

void kv_cmd_lpushx(struct kv_call *c)
{
	push_generic(c, true, true);
}

void kv_cmd_rpushx(struct kv_call *c)
{
	push_generic(c, false, true);
}

/* A positive count argument (redis's getPositiveLong). */
static bool positive_arg(struct kv_call *c, int i, long long *v)
{
	if (!kv_arg_ll(c, i, v))
		return false;
	if (*v < 0) {
		kv_reply_err(c, "value is out of range, must be positive");
		return false;
	}
	return true;
}

static void pop_generic(struct kv_call *c, bool left)
{
	if (c->argc > 3) {
		kv_reply_arity(c);
		return;
	}
	bool has_count = c->argc == 3;
	long long count = 1;
	if (has_count && !positive_arg(c, 2, &count))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		if (has_count)
			kv_reply_nullarray(c);
		else
			kv_reply_null(c);
		return;
	}
	if (!kv_check_type(c, o, KV_T_LIST))
		return;
	if (has_count && count == 0) {
		kv_reply_raw(c, "*0\r\n");
		return;
	}
	size_t n = (unsigned long long)count < o->n_items ? (size_t)count : o->n_items;
	if (has_count)
		kv_reply_array(c, (long long)n);
	for (size_t k = 0; k < n; k++) {
		struct kv_elem e = left ? o->items[o->head++] : o->items[o->head + o->n_items - 1];
		o->n_items--;
		kv_reply_bulk(c, e.p, e.len);
		free(e.p);
	}
	if (o->n_items == 0)
		kv_obj_del(c->s, o);
	else
		kv_touch(c->s, o);
}

void kv_cmd_lpop(struct kv_call *c)
{
	pop_generic(c, true);
}

void kv_cmd_rpop(struct kv_call *c)
{
	pop_generic(c, false);
}

void kv_cmd_llen(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (kv_check_type(c, o, KV_T_LIST))
		kv_reply_int(c, o ? (long long)o->n_items : 0);
}

void kv_cmd_lrange(struct kv_call *c)
{
	long long start, end;
	if (!kv_arg_ll(c, 2, &start) || !kv_arg_ll(c, 3, &end))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_LIST))
		return;
	long long len = o ? (long long)o->n_items : 0;
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (start > end || start >= len) {
		kv_reply_raw(c, "*0\r\n");
		return;
	}
	if (end >= len)
		end = len - 1;
	kv_reply_array(c, end - start + 1);
	for (long long i = start; i <= end; i++) {
		const struct kv_elem *e = &o->items[o->head + (size_t)i];
		kv_reply_bulk(c, e->p, e->len);
	}
}

void kv_cmd_lindex(struct kv_call *c)
{
	long long i;
	if (!kv_arg_ll(c, 2, &i))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_LIST))
		return;
	long long len = o ? (long long)o->n_items : 0;
	if (i < 0)
		i += len;
	if (i < 0 || i >= len) {
		kv_reply_null(c);
		return;
	}
	const struct kv_elem *e = &o->items[o->head + (size_t)i];
	kv_reply_bulk(c, e->p, e->len);
}

/* ---- sets ---- */

static struct kv_field *member_get(const struct kv_obj *o, const char *m, size_t ml)
{
	return o ? (struct kv_field *)kv_dict_find(&o->fields, m, ml, kv_hash(m, ml)) : NULL;
}

static void member_free(struct kv_dnode *nd)
{
	struct kv_field *f = (struct kv_field *)nd;
	free(f->val);
	free(f);
}

void kv_cmd_sadd(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_SET))
		return;
	if (o == NULL) {
		o = kv_obj_add(c->s, c->dbi, c->argv[1], c->lens[1], KV_T_SET);
		if (o == NULL)
			return;
		o->enc = KV_ENC_INTSET;
	}
	long long added = 0;
	for (int i = 2; i < c->argc; i++) {
		const char *m = c->argv[i];
		size_t ml = c->lens[i];
		uint64_t h = kv_hash(m, ml);
		if (kv_dict_find(&o->fields, m, ml, h) != NULL)
			continue;
		struct kv_field *f = calloc(1, sizeof(*f) + (ml ? ml : 1));
		if (f == NULL) {
			c->s->oom = true;
			break;
		}
		memcpy(f->key, m, ml);
		f->node.key = f->key;
		f->node.klen = ml;
		f->node.hash = h;
		if (kv_dict_add(&o->fields, &f->node) != 0) {
			free(f);
			c->s->oom = true;
			break;
		}
		long long v;
		if (o->enc == KV_ENC_INTSET && (!kv_parse_ll(m, ml, &v) || o->fields.n > c->s->set_max_intset))
			o->enc = KV_ENC_HASHTABLE;
		added++;
	}
	if (o->fields.n == 0) {
		kv_obj_del(c->s, o);
		return;
	}
	if (added > 0)
		kv_touch(c->s, o);
	kv_reply_int(c, added);
}

void kv_cmd_srem(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_SET))
		return;
	long long n = 0;
	for (int i = 2; o != NULL && i < c->argc; i++) {
		struct kv_dnode *nd = kv_dict_unlink(&o->fields, c->argv[i], c->lens[i],
						     kv_hash(c->argv[i], c->lens[i]));
		if (nd == NULL)
			continue;
		member_free(nd);
		n++;
	}
	if (o != NULL && n > 0) {
		if (o->fields.n == 0)
			kv_obj_del(c->s, o);
		else
			kv_touch(c->s, o);
	}
	kv_reply_int(c, n);
}

void kv_cmd_smembers(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_SET))
		return;
	kv_reply_set(c, o ? (long long)o->fields.n : 0);
	if (o != NULL)
		kv_dict_foreach(&o->fields, i, nd)
			kv_reply_bulk(c, nd->key, nd->klen);
}

void kv_cmd_scard(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (kv_check_type(c, o, KV_T_SET))
		kv_reply_int(c, o ? (long long)o->fields.n : 0);
}

void kv_cmd_sismember(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (kv_check_type(c, o, KV_T_SET))
		kv_reply_int(c, member_get(o, c->argv[2], c->lens[2]) != NULL);
}

struct pick {
	uint64_t score;
	struct kv_dnode *nd;
};

static uint64_t score(uint64_t h, uint64_t seed)
{
	h ^= seed;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static int pick_cmp(const void *a, const void *b)
{
	const struct pick *x = a, *y = b;
	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	size_t n = x->nd->klen < y->nd->klen ? x->nd->klen : y->nd->klen;
	int r = memcmp(x->nd->key, y->nd->key, n);
	if (r != 0)
		return r;
	return x->nd->klen < y->nd->klen ? -1 : x->nd->klen > y->nd->klen;
}

uint64_t kv_write_seed(const struct kv_store *s, const struct kv_obj *o)
{
	return (s->version * 0x9e3779b97f4a7c15ull) ^ o->node.hash ^ (uint64_t)s->now;
}

void kv_cmd_spop(struct kv_call *c)
{
	if (c->argc > 3) {
		kv_reply_syntax(c);
		return;
	}
	bool has_count = c->argc == 3;
	long long count = 1;
	if (has_count && !positive_arg(c, 2, &count))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		if (has_count)
			kv_reply_set(c, 0);
		else
			kv_reply_null(c);
		return;
	}
	if (!kv_check_type(c, o, KV_T_SET))
		return;
	if (has_count && count == 0) {
		kv_reply_set(c, 0);
		return;
	}
	/* The members with the lowest scores go: a score mixes the member's
	 * hash with the state's seed, so the choice depends on the state alone
	 * (not on the table's layout, which a snapshot does not keep). */
	uint64_t seed = kv_write_seed(c->s, o);
	size_t size = o->fields.n, k = 0;
	size_t n = (unsigned long long)count < size ? (size_t)count : size;
	struct pick *all = malloc(size * sizeof(*all));
	if (all == NULL) {
		c->s->oom = true;
		return;
	}
	kv_dict_foreach(&o->fields, i, nd)
		all[k++] = (struct pick){ score(nd->hash, seed), nd };
	qsort(all, size, sizeof(*all), pick_cmp);
	if (has_count)
		kv_reply_set(c, (long long)n);
	/* fed as SREM key member... (the choice made here, not again) */
	const char **av = malloc((n + 2) * sizeof(*av));
	size_t *al = malloc((n + 2) * sizeof(*al));
	char **keep = malloc((n + 1) * sizeof(*keep));
	bool feed = c->s->feed != NULL && av != NULL && al != NULL && keep != NULL &&
		    n + 2 <= 65535;
	if (feed) {
		av[0] = "SREM";
		al[0] = 4;
		av[1] = c->argv[1];
		al[1] = c->lens[1];
	}
	for (size_t i = 0; i < n; i++) {
		struct kv_dnode *nd = all[i].nd;
		kv_reply_bulk(c, nd->key, nd->klen);
		nd = kv_dict_unlink(&o->fields, nd->key, nd->klen, nd->hash);
		if (feed) {
			keep[i] = (char *)nd; /* freed after feeding */
			av[2 + i] = nd->key;
			al[2 + i] = nd->klen;
		} else {
			member_free(nd);
		}
	}
	if (feed) {
		if (n > 0)
			kv_propagate(c, (int)n + 2, av, al);
		for (size_t i = 0; i < n; i++)
			member_free((struct kv_dnode *)keep[i]);
	}
	free(av);
	free(al);
	free(keep);
	free(all);
	if (o->fields.n == 0)
		kv_obj_del(c->s, o);
	else
		kv_touch(c->s, o);
}

void kv_cmd_srandmember(struct kv_call *c)
{
	if (c->argc > 3) {
		kv_reply_syntax(c);
		return;
	}
	long long l = 1;
	if (c->argc == 3) {
		if (!kv_arg_ll(c, 2, &l))
			return;
		if (l < -LLONG_MAX) {
			kv_reply_err(c, "value is out of range, value must between %lld and %lld",
				     -LLONG_MAX, LLONG_MAX);
			return;
		}
	}
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_SET))
		return;
	if (o == NULL) {
		if (c->argc == 2)
			kv_reply_null(c);
		else
			kv_reply_raw(c, "*0\r\n");
		return;
	}
	if (l == 0) {
		kv_reply_raw(c, "*0\r\n");
		return;
	}
	size_t size = o->fields.n;
	struct kv_dnode **all = malloc(size * sizeof(*all));
	if (all == NULL) {
		c->out->oom = true;
		return;
	}
	kv_dict_nodes(&o->fields, all);
	if (c->argc == 2 || l < 0) {
		/* uniform picks, with repetition */
		long long count = c->argc == 2 ? 1 : -l;
		if (c->argc == 3)
			kv_reply_array(c, count);
		for (long long k = 0; k < count && !c->out->oom; k++) {
			if (c->out->len > c->s->string_max) {
				c->out->oom = true; /* a reply this long closes the connection */
				break;
			}
			struct kv_dnode *nd = all[kv_rand(&c->s->rng) % size];
			kv_reply_bulk(c, nd->key, nd->klen);
		}
		free(all);
		return;
	}
	size_t n = (unsigned long long)l < size ? (size_t)l : size;
	for (size_t i = 0; i < n && n < size; i++) {
		size_t j = i + (size_t)(kv_rand(&c->s->rng) % (size - i));
		struct kv_dnode *t = all[i];
		all[i] = all[j];
		all[j] = t;
	}
	kv_reply_array(c, (long long)n);
	for (size_t i = 0; i < n; i++)
		kv_reply_bulk(c, all[i]->key, all[i]->klen);
	free(all);
}

/* ---- MEMORY ---- */

/* The bytes a value takes (allocations, roughly: what malloc was asked). */
static size_t obj_bytes(const struct kv_obj *o)
{
	size_t n = sizeof(*o) + o->node.klen + o->cap;
	n += o->fields.cap * sizeof(void *) + o->cap_items * sizeof(struct kv_elem);
	kv_dict_foreach(&o->fields, i, nd)
		n += sizeof(struct kv_field) + nd->klen + ((const struct kv_field *)nd)->vlen;
	for (size_t i = 0; i < o->n_items; i++)
		n += o->items[o->head + i].len;
	return n;
}

void kv_cmd_memory(struct kv_call *c)
{
	if (arg_is(c, 1, "usage") && c->argc >= 3) {
		if (c->argc != 3 && !(c->argc == 5 && arg_is(c, 3, "samples"))) {
			kv_reply_syntax(c);
			return;
		}
		long long samples;
		if (c->argc == 5 && !kv_arg_ll(c, 4, &samples))
			return;
		struct kv_obj *o = kv_lookup(c, 2);
		if (o == NULL)
			kv_reply_null(c);
		else
			kv_reply_int(c, (long long)obj_bytes(o));
	} else if (arg_is(c, 1, "help") && c->argc == 2) {
		kv_reply_raw(c, "*3\r\n+MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
				"+USAGE <key> [SAMPLES <count>]\r\n"
				"+    Return memory in bytes used by <key> and its value.\r\n");
	} else {
		char sub[132];
		size_t n = c->lens[1] < 128 ? c->lens[1] : 128;
		memcpy(sub, c->argv[1], n);
		sub[n] = '\0';
		kv_reply_err(c, "unknown subcommand '%s'. Try MEMORY HELP.", sub);
	}
}
