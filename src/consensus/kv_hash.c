/*
 * kv_hash.c — the KV store's hash commands with redis 7's replies and
 * errors: HSET HMSET HSETNX HGET HMGET HDEL HLEN HSTRLEN HEXISTS HKEYS HVALS
 * HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD (HSCAN is kv_keys.c's SCAN over
 * the fields). A hash is a kv_dict of fields; an empty hash never exists
 * (the last HDEL deletes the key). WRONGTYPE against any other type.
 */
#include <limits.h>
#include <math.h>
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

static struct kv_field *field_get(const struct kv_obj *o, const char *f, size_t fl)
{
	return o ? (struct kv_field *)kv_dict_find(&o->fields, f, fl, kv_hash(f, fl)) : NULL;
}

/* The hash at argv[1] for reading: NULL if absent; false after WRONGTYPE. */
static bool hash_read(struct kv_call *c, struct kv_obj **o)
{
	*o = kv_lookup(c, 1);
	return kv_check_type(c, *o, KV_T_HASH);
}

/* The hash at argv[1] for writing, created if absent; NULL after WRONGTYPE
 * or when out of memory. */
static struct kv_obj *hash_write(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL)
		return kv_obj_add(c->s, c->dbi, c->argv[1], c->lens[1], KV_T_HASH);
	return kv_check_type(c, o, KV_T_HASH) ? o : NULL;
}

/* Set field f to v (copies): 1 if the field is new, 0 if updated, -1 on OOM. */
static int field_set(struct kv_store *s, struct kv_obj *o, const char *f, size_t fl, const char *v,
		     size_t vl)
{
	char *nv = malloc(vl ? vl : 1);
	if (nv == NULL) {
		s->oom = true;
		return -1;
	}
	memcpy(nv, v, vl);
	if (o->enc == KV_ENC_LISTPACK && (fl > s->hash_max_value || vl > s->hash_max_value))
		o->enc = KV_ENC_HASHTABLE;
	uint64_t h = kv_hash(f, fl);
	struct kv_field *fd = (struct kv_field *)kv_dict_find(&o->fields, f, fl, h);
	if (fd != NULL) {
		free(fd->val);
		fd->val = nv;
		fd->vlen = vl;
		return 0;
	}
	fd = malloc(sizeof(*fd) + (fl ? fl : 1));
	if (fd == NULL) {
		free(nv);
		s->oom = true;
		return -1;
	}
	memcpy(fd->key, f, fl);
	fd->node.key = fd->key;
	fd->node.klen = fl;
	fd->node.hash = h;
	fd->val = nv;
	fd->vlen = vl;
	if (kv_dict_add(&o->fields, &fd->node) != 0) {
		free(nv);
		free(fd);
		s->oom = true;
		return -1;
	}
	if (o->enc == KV_ENC_LISTPACK && o->fields.n > s->hash_max_entries)
		o->enc = KV_ENC_HASHTABLE;
	return 1;
}

/* A hash left without fields by a failed first write is not kept. */
static void drop_if_empty(struct kv_store *s, struct kv_obj *o)
{
	if (o != NULL && o->fields.n == 0)
		kv_obj_del(s, o);
}

void kv_cmd_hset(struct kv_call *c)
{
	if (c->argc % 2 == 1) {
		kv_reply_arity(c);
		return;
	}
	struct kv_obj *o = hash_write(c);
	if (o == NULL)
		return;
	long long created = 0;
	for (int i = 2; i < c->argc; i += 2) {
		int r = field_set(c->s, o, c->argv[i], c->lens[i], c->argv[i + 1], c->lens[i + 1]);
		if (r < 0) {
			drop_if_empty(c->s, o);
			return;
		}
		created += r;
	}
	kv_touch(c->s, o);
	if (c->argv[0][1] == 's' || c->argv[0][1] == 'S')
		kv_reply_int(c, created);
	else
		kv_reply_ok(c);
}

void kv_cmd_hsetnx(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_HASH))
		return;
	if (field_get(o, c->argv[2], c->lens[2]) != NULL) {
		kv_reply_int(c, 0);
		return;
	}
	if (o == NULL && (o = hash_write(c)) == NULL)
		return;
	if (field_set(c->s, o, c->argv[2], c->lens[2], c->argv[3], c->lens[3]) < 0) {
		drop_if_empty(c->s, o);
		return;
	}
	kv_touch(c->s, o);
	kv_reply_int(c, 1);
}

static void reply_field(struct kv_call *c, const struct kv_obj *o, int i)
{
	const struct kv_field *f = field_get(o, c->argv[i], c->lens[i]);
	if (f == NULL)
		kv_reply_null(c);
	else
		kv_reply_bulk(c, f->val, f->vlen);
}

void kv_cmd_hget(struct kv_call *c)
{
	struct kv_obj *o;
	if (hash_read(c, &o))
		reply_field(c, o, 2);
}

void kv_cmd_hmget(struct kv_call *c)
{
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	kv_reply_array(c, c->argc - 2);
	for (int i = 2; i < c->argc; i++)
		reply_field(c, o, i);
}

void kv_cmd_hdel(struct kv_call *c)
{
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	long long n = 0;
	for (int i = 2; o != NULL && i < c->argc; i++) {
		struct kv_dnode *nd = kv_dict_unlink(&o->fields, c->argv[i], c->lens[i],
						     kv_hash(c->argv[i], c->lens[i]));
		if (nd == NULL)
			continue;
		struct kv_field *f = (struct kv_field *)nd;
		free(f->val);
		free(f);
		n++;
		if (o->fields.n == 0) {
			kv_obj_del(c->s, o);
			o = NULL;
		}
	}
	if (n > 0 && o != NULL)
		kv_touch(c->s, o);
	kv_reply_int(c, n);
}

void kv_cmd_hlen(struct kv_call *c)
{
	struct kv_obj *o;
	if (hash_read(c, &o))
		kv_reply_int(c, o ? (long long)o->fields.n : 0);
}

void kv_cmd_hstrlen(struct kv_call *c)
{
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	const struct kv_field *f = field_get(o, c->argv[2], c->lens[2]);
	kv_reply_int(c, f ? (long long)f->vlen : 0);
}

void kv_cmd_hexists(struct kv_call *c)
{
	struct kv_obj *o;
	if (hash_read(c, &o))
		kv_reply_int(c, field_get(o, c->argv[2], c->lens[2]) != NULL);
}

/* HKEYS, HVALS, HGETALL. */
static void hash_all(struct kv_call *c, bool keys, bool vals)
{
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	long long n = o ? (long long)o->fields.n : 0;
	if (keys && vals)
		kv_reply_map(c, n);
	else
		kv_reply_array(c, n);
	if (o == NULL)
		return;
	kv_dict_foreach(&o->fields, i, nd) {
		const struct kv_field *f = (const struct kv_field *)nd;
		if (keys)
			kv_reply_bulk(c, nd->key, nd->klen);
		if (vals)
			kv_reply_bulk(c, f->val, f->vlen);
	}
}

void kv_cmd_hkeys(struct kv_call *c)
{
	hash_all(c, true, false);
}

void kv_cmd_hvals(struct kv_call *c)
{
	hash_all(c, false, true);
}

void kv_cmd_hgetall(struct kv_call *c)
{
	hash_all(c, true, true);
}

void kv_cmd_hincrby(struct kv_call *c)
{
	long long by, v = 0;
	if (!kv_arg_ll(c, 3, &by))
		return;
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	const struct kv_field *f = field_get(o, c->argv[2], c->lens[2]);
	if (f != NULL && !kv_parse_ll(f->val, f->vlen, &v)) {
		kv_reply_err(c, "hash value is not an integer");
		return;
	}
	if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v)) {
		kv_reply_err(c, "increment or decrement would overflow");
		return;
	}
	v += by;
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v);
	if (o == NULL && (o = hash_write(c)) == NULL)
		return;
	if (field_set(c->s, o, c->argv[2], c->lens[2], tmp, (size_t)n) < 0) {
		drop_if_empty(c->s, o);
		return;
	}
	kv_touch(c->s, o);
	kv_reply_int(c, v);
}

void kv_cmd_hincrbyfloat(struct kv_call *c)
{
	long double by, v = 0;
	if (!kv_str2ld(c->argv[3], c->lens[3], &by)) {
		kv_reply_err(c, "value is not a valid float");
		return;
	}
	if (isnan(by) || isinf(by)) {
		kv_reply_err(c, "value is NaN or Infinity");
		return;
	}
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	const struct kv_field *f = field_get(o, c->argv[2], c->lens[2]);
	if (f != NULL && !kv_str2ld(f->val, f->vlen, &v)) {
		kv_reply_err(c, "hash value is not a float");
		return;
	}
	v += by;
	if (isnan(v) || isinf(v)) {
		kv_reply_err(c, "increment would produce NaN or Infinity");
		return;
	}
	char buf[5120];
	int n = kv_ld2str(buf, sizeof(buf), v);
	if (o == NULL && (o = hash_write(c)) == NULL)
		return;
	if (field_set(c->s, o, c->argv[2], c->lens[2], buf, (size_t)n) < 0) {
		drop_if_empty(c->s, o);
		return;
	}
	kv_touch(c->s, o);
	kv_reply_bulk(c, buf, (size_t)n);
	kv_propagate(c, 4, (const char *const[]){ "HSET", c->argv[1], c->argv[2], buf },
		     (const size_t[]){ 4, c->lens[1], c->lens[2], (size_t)n });
}

static void reply_pair(struct kv_call *c, const struct kv_dnode *nd, bool withvalues)
{
	if (withvalues && c->resp == 3)
		kv_reply_array(c, 2);
	kv_reply_bulk(c, nd->key, nd->klen);
	if (withvalues) {
		const struct kv_field *f = (const struct kv_field *)nd;
		kv_reply_bulk(c, f->val, f->vlen);
	}
}

void kv_cmd_hrandfield(struct kv_call *c)
{
	if (c->argc == 2) {
		struct kv_obj *o;
		if (!hash_read(c, &o))
			return;
		if (o == NULL) {
			kv_reply_null(c);
			return;
		}
		struct kv_dnode **all = malloc(o->fields.n * sizeof(*all));
		if (all == NULL) {
			c->out->oom = true;
			return;
		}
		size_t n = kv_dict_nodes(&o->fields, all);
		struct kv_dnode *nd = all[kv_rand(&c->s->rng) % n];
		kv_reply_bulk(c, nd->key, nd->klen);
		free(all);
		return;
	}
	long long l;
	if (!kv_arg_ll(c, 2, &l))
		return;
	if (l < -LLONG_MAX) {
		kv_reply_err(c, "value is out of range, value must between %lld and %lld", -LLONG_MAX,
			     LLONG_MAX);
		return;
	}
	bool withvalues = false;
	if (c->argc > 4 || (c->argc == 4 && !arg_is(c, 3, "withvalues"))) {
		kv_reply_syntax(c);
		return;
	}
	if (c->argc == 4) {
		withvalues = true;
		if (l < -LLONG_MAX / 2 || l > LLONG_MAX / 2) {
			kv_reply_err(c, "value is out of range");
			return;
		}
	}
	struct kv_obj *o;
	if (!hash_read(c, &o))
		return;
	if (o == NULL || l == 0) {
		kv_reply_raw(c, "*0\r\n");
		return;
	}
	bool unique = l > 0;
	unsigned long long count = unique ? (unsigned long long)l : (unsigned long long)-l;
	size_t size = o->fields.n;
	struct kv_dnode **all = malloc(size * sizeof(*all));
	if (all == NULL) {
		c->out->oom = true;
		return;
	}
	kv_dict_nodes(&o->fields, all);
	if (!unique) {
		/* with repetition: uniform picks */
		kv_reply_array(c, (long long)(withvalues && c->resp == 2 ? count * 2 : count));
		for (unsigned long long k = 0; k < count && !c->out->oom; k++) {
			if (c->out->len > c->s->string_max) {
				c->out->oom = true; /* a reply this long closes the connection */
				break;
			}
			reply_pair(c, all[kv_rand(&c->s->rng) % size], withvalues);
		}
		free(all);
		return;
	}
	/* distinct fields: a partial shuffle */
	size_t n = count < size ? (size_t)count : size;
	for (size_t i = 0; i < n && n < size; i++) {
		size_t j = i + (size_t)(kv_rand(&c->s->rng) % (size - i));
		struct kv_dnode *t = all[i];
		all[i] = all[j];
		all[j] = t;
	}
	kv_reply_array(c, (long long)(withvalues && c->resp == 2 ? n * 2 : n));
	for (size_t i = 0; i < n; i++)
		reply_pair(c, all[i], withvalues);
	free(all);
}
