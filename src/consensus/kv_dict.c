/*
 * kv_dict.c — the KV store's hash table (kv_dict.h): chained buckets,
 * doubling and halving, redis's reverse-binary scan cursor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "consensus/kv_dict.h"

#define DICT_MIN_CAP 4u

uint64_t kv_hash(const char *p, size_t n)
{
	return XXH3_64bits(p, n);
}

uint64_t kv_rand(uint64_t *state)
{
	/* splitmix64: every bit of the output is good (callers take it modulo) */
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct kv_dnode *kv_dict_find(const struct kv_dict *d, const char *k, size_t kl, uint64_t h)
{
	if (d->cap == 0)
		return NULL;
	for (struct kv_dnode *nd = d->tab[h & (d->cap - 1)]; nd != NULL; nd = nd->next)
		if (nd->hash == h && nd->klen == kl && memcmp(nd->key, k, kl) == 0)
			return nd;
	return NULL;
}

/* Move every node into a table of cap buckets; on failure keep the old one. */
static void rehash(struct kv_dict *d, size_t cap)
{
	struct kv_dnode **t = calloc(cap, sizeof(*t));
	if (t == NULL)
		return;
	for (size_t i = 0; i < d->cap; i++)
		for (struct kv_dnode *nd = d->tab[i], *nx; nd != NULL; nd = nx) {
			nx = nd->next;
			nd->next = t[nd->hash & (cap - 1)];
			t[nd->hash & (cap - 1)] = nd;
		}
	free(d->tab);
	d->tab = t;
	d->cap = cap;
}

int kv_dict_add(struct kv_dict *d, struct kv_dnode *nd)
{
	if (d->cap == 0) {
		d->tab = calloc(DICT_MIN_CAP, sizeof(*d->tab));
		if (d->tab == NULL)
			return -ENOMEM;
		d->cap = DICT_MIN_CAP;
	}
	struct kv_dnode **b = &d->tab[nd->hash & (d->cap - 1)];
	nd->next = *b;
	*b = nd;
	if (++d->n > d->cap)
		rehash(d, d->cap * 2);
	return 0;
}

struct kv_dnode *kv_dict_unlink(struct kv_dict *d, const char *k, size_t kl, uint64_t h)
{
	if (d->cap == 0)
		return NULL;
	for (struct kv_dnode **pp = &d->tab[h & (d->cap - 1)]; *pp != NULL; pp = &(*pp)->next) {
		struct kv_dnode *nd = *pp;
		if (nd->hash == h && nd->klen == kl && memcmp(nd->key, k, kl) == 0) {
			*pp = nd->next;
			nd->next = NULL;
			d->n--;
			if (d->cap > DICT_MIN_CAP && d->n * 8 < d->cap)
				rehash(d, d->cap / 2);
			return nd;
		}
	}
	return NULL;
}

void kv_dict_fini(struct kv_dict *d)
{
	free(d->tab);
	*d = (struct kv_dict){ 0 };
}

static uint64_t rev64(uint64_t v)
{
	v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
	v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
	v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
	return __builtin_bswap64(v);
}

uint64_t kv_dict_scan(const struct kv_dict *d, uint64_t v,
		      void (*fn)(void *arg, struct kv_dnode *nd), void *arg)
{
	if (d->cap == 0)
		return 0;
	uint64_t m = d->cap - 1;
	for (struct kv_dnode *nd = d->tab[v & m], *nx; nd != NULL; nd = nx) {
		nx = nd->next;
		fn(arg, nd);
	}
	/* increment the reversed cursor over the bits of the mask */
	v |= ~m;
	v = rev64(v);
	v++;
	return rev64(v);
}

size_t kv_dict_nodes(const struct kv_dict *d, struct kv_dnode **out)
{
	size_t k = 0;
	kv_dict_foreach(d, i, nd)
		out[k++] = nd;
	return k;
}

struct kv_dnode *kv_dict_random(const struct kv_dict *d, uint64_t *rng)
{
	if (d->n == 0)
		return NULL;
	struct kv_dnode *nd;
	do
		nd = d->tab[kv_rand(rng) & (d->cap - 1)];
	while (nd == NULL);
	size_t len = 0;
	for (struct kv_dnode *p = nd; p != NULL; p = p->next)
		len++;
	for (size_t k = kv_rand(rng) % len; k > 0; k--)
		nd = nd->next;
	return nd;
}
