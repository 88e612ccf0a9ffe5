/*
 * kv_dict.h — the hash table under the KV store: a database's keys and a
 * hash value's fields. Intrusive (a node is the first member of what it
 * indexes: struct kv_obj, struct kv_field), chained, a power-of-two number
 * of buckets that doubles when the table is fuller than one node per bucket
 * and halves when it is emptier than one in eight. SCAN and HSCAN walk it
 * with redis's reverse-binary cursor, which returns every node present for
 * the whole walk at least once even if the table grows or shrinks between
 * calls:
 *
 *   buckets, cap 8:  [0] [1] [2] [3] [4] [5] [6] [7]
 *   cursor order:     0   4   2   6   1   5   3   7   (bit-reversed increment)
 *
 * Not thread-safe; the store is applied by one thread.
 */
#ifndef INNET_CONSENSUS_KV_DICT_H
#define INNET_CONSENSUS_KV_DICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_dnode {
	struct kv_dnode *next;  /* the bucket's chain */
	uint64_t hash;          /* kv_hash(key) */
	const char *key;        /* the node's key bytes (inside the containing allocation) */
	size_t klen;
};

struct kv_dict {
	struct kv_dnode **tab;  /* cap buckets (NULL until the first add) */
	size_t cap;             /* a power of two, or 0 */
	size_t n;               /* nodes */
};

/* The hash of a key (XXH3, the same on every replica). */
uint64_t kv_hash(const char *p, size_t n);

/* The node with key k (hash h), or NULL. */
struct kv_dnode *kv_dict_find(const struct kv_dict *d, const char *k, size_t kl, uint64_t h);
/* Add node nd (its key absent; nd->hash set). 0, or -ENOMEM when the first
 * table cannot be allocated (nothing added); a failed growth keeps the
 * table as it is (longer chains, still correct). */
int kv_dict_add(struct kv_dict *d, struct kv_dnode *nd);
/* Unlink and return the node with key k, or NULL. May shrink the table. */
struct kv_dnode *kv_dict_unlink(struct kv_dict *d, const char *k, size_t kl, uint64_t h);
/* Free the table (not the nodes: the owner walks them first). */
void kv_dict_fini(struct kv_dict *d);
/* Call fn for every node of one bucket step from cursor; the next cursor,
 * 0 when the walk is complete. */
uint64_t kv_dict_scan(const struct kv_dict *d, uint64_t cursor,
		      void (*fn)(void *arg, struct kv_dnode *nd), void *arg);
/* A node picked at random (a random bucket, then a random node of its
 * chain: nodes of short chains are a little likelier), NULL if empty. */
struct kv_dnode *kv_dict_random(const struct kv_dict *d, uint64_t *rng);
/* Every node into out (d->n of them): for uniform picks. */
size_t kv_dict_nodes(const struct kv_dict *d, struct kv_dnode **out);

/* Every node: for (i...) for (nd = d->tab[i]...) — safe only without unlinking. */
#define kv_dict_foreach(d, i, nd)                                                 \
	for (size_t i = 0; i < (d)->cap; i++)                                      \
		for (struct kv_dnode *nd = (d)->tab[i]; nd != NULL; nd = nd->next)

/* xorshift64*: the store's random numbers (replies only, never state). */
uint64_t kv_rand(uint64_t *state);

#endif /* INNET_CONSENSUS_KV_DICT_H */
