/*
 * table.c — exact-match tables: fixed capacity, open addressing with a
 * bounded probe window (like a hardware hash table with a fixed number of
 * ways), safe for concurrent lookups and writes without locks on the read
 * side.
 *
 * Memory layout (n_slots = power of two >= 2 * capacity, so the load factor
 * stays <= 0.5 and probe windows stay short):
 *
 *   slots: | slot 0 | slot 1 | ... | slot n-1 |
 *   slot:  | seq u32 | state u32 | key (key_size) | value (value_size) | pad to 8 |
 *   locks: | u32 home lock per slot |
 *   shared counters: struct innet_table_shared (entries, insert_full, insert_busy)
 *
 * On the XDP target the three live in BPF array maps that the eBPF program
 * reads and writes with the same algorithm (innet/dp_xdp.h): the loader
 * rehomes an empty table onto them (innet_table_rehome), so lookups and
 * writes from either executor and from the control plane see one table.
 *
 *   seq    even = stable, odd = a writer is changing the slot (seqlock)
 *   state  EMPTY (never used), USED, or DEAD (deleted: probing continues)
 *
 * A key lives within PROBE slots of its home slot hash(key) & (n_slots-1).
 * Readers copy key and value between two reads of seq and retry (boundedly)
 * when they overlap a write. Writers first take the key's home lock (a flag
 * per home slot, so two writers of the same key serialise), then claim a
 * slot by moving its seq from even to odd with a compare-and-swap. Every
 * loop is bounded: a writer that cannot get the home lock after SPIN tries
 * gives up with -EBUSY rather than block the data plane.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "innet/xdp_abi.h"
#include "engine/switch_pvt.h"

#define PROBE      32u
#define SPIN       100000u

enum { SLOT_EMPTY = 0, SLOT_USED = 1, SLOT_DEAD = 2 };

struct slot_hdr {
	_Atomic uint32_t seq;
	_Atomic uint32_t state;
};

_Static_assert(sizeof(struct slot_hdr) == sizeof(struct innet_table_slot), "slot header layout");

struct innet_table {
	char name[INNET_NAME_MAX];
	uint32_t key_size;
	uint32_t value_size;
	uint32_t capacity;
	uint32_t n_slots;          /* power of two */
	uint32_t slot_size;        /* bytes per slot, multiple of 8 */
	uint8_t *slots;
	_Atomic uint32_t *home_lock; /* [n_slots] */
	struct innet_table_shared *sh; /* counters (atomics through __atomic) */
	bool own;                  /* slots, home_lock, sh are ours to free */
};

#define SH_LOAD(x)     __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define SH_ADD(x, n)   __atomic_fetch_add(&(x), (n), __ATOMIC_RELAXED)
#define SH_SUB(x, n)   __atomic_fetch_sub(&(x), (n), __ATOMIC_RELAXED)

static inline struct slot_hdr *slot_at(const struct innet_table *t, uint32_t i)
{
	return (struct slot_hdr *)(t->slots + (size_t)(i & (t->n_slots - 1)) * t->slot_size);
}

static inline uint8_t *slot_key(struct slot_hdr *s)
{
	return (uint8_t *)(s + 1);
}

static inline uint8_t *slot_val(const struct innet_table *t, struct slot_hdr *s)
{
	return (uint8_t *)(s + 1) + t->key_size;
}

static inline bool shared_equal(const uint8_t *shared, const uint8_t *key, uint32_t n)
{
	uint8_t copy[256];
	innet_shared_load(copy, shared, n);
	return memcmp(copy, key, n) == 0;
}

static inline uint32_t home_of(const struct innet_table *t, const void *key)
{
	return (uint32_t)innet_hash(key, t->key_size, 0) & (t->n_slots - 1);
}

struct innet_table *innet_table_create(const char *name, uint32_t key_size, uint32_t value_size,
				       uint32_t capacity)
{
	if (key_size == 0 || key_size > 256 || value_size > 4096 || capacity == 0 ||
	    capacity > (1u << 26)) {
		errno = EINVAL;
		return NULL;
	}
	struct innet_table *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->key_size = key_size;
	t->value_size = value_size;
	t->capacity = capacity;
	t->n_slots = 16;
	while (t->n_slots < 2 * capacity)
		t->n_slots <<= 1;
	t->slot_size = (uint32_t)((sizeof(struct slot_hdr) + key_size + value_size + 7) & ~7u);
	t->slots = calloc(t->n_slots, t->slot_size);
	t->home_lock = calloc(t->n_slots, sizeof(*t->home_lock));
	t->sh = calloc(1, sizeof(*t->sh));
	t->own = true;
	if (t->slots == NULL || t->home_lock == NULL || t->sh == NULL) {
		innet_table_destroy(t);
		errno = ENOMEM;
		return NULL;
	}
	return t;
}

bool innet_table_sizes_match(const struct innet_table *t, uint32_t key_size, uint32_t val_size)
{
	return key_size == t->key_size && (val_size == UINT32_MAX || val_size == t->value_size);
}

void innet_table_destroy(struct innet_table *t)
{
	if (t == NULL)
		return;
	if (t->own) {
		free(t->slots);
		free((void *)t->home_lock);
		free(t->sh);
	}
	free(t);
}

void innet_table_geometry(const struct innet_table *t, uint32_t *n_slots, uint32_t *slot_size)
{
	*n_slots = t->n_slots;
	*slot_size = t->slot_size;
}

int innet_table_rehome(struct innet_table *t, void *slots, void *locks, struct innet_table_shared *sh)
{
	if (SH_LOAD(t->sh->entries) != 0)
		return -EBUSY;
	if (t->own) {
		free(t->slots);
		free((void *)t->home_lock);
		free(t->sh);
	}
	t->slots = slots;
	t->home_lock = locks;
	t->sh = sh;
	t->own = false;
	return 0;
}

/* Copy a consistent (state, key, value) of slot s. Waits (boundedly) for a
 * writer in the slot to finish. Returns the state, or -1 when it kept
 * changing for SPIN rounds (a writer preempted inside the slot). */
static int slot_read(const struct innet_table *t, struct slot_hdr *s, uint8_t *key, uint8_t *val)
{
	for (uint32_t tries = 0; tries < SPIN; tries++) {
		uint32_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (seq & 1) {
			innet_cpu_relax();
			continue;
		}
		uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == SLOT_USED) {
			innet_shared_load(key, slot_key(s), t->key_size);
			if (val != NULL)
				innet_shared_load(val, slot_val(t, s), t->value_size);
		}
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) == seq)
			return (int)state;
	}
	return -1;
}

int innet_table_get(struct innet_table *t, const void *key, void *val)
{
	uint8_t k[256];
	uint8_t v[4096];
	uint32_t home = home_of(t, key);
	for (uint32_t i = 0; i < PROBE; i++) {
		struct slot_hdr *s = slot_at(t, home + i);
		int state = slot_read(t, s, k, val ? v : NULL);
		if (state == SLOT_EMPTY)
			return -ENOENT;
		if (state == SLOT_USED && !memcmp(k, key, t->key_size)) {
			if (val != NULL)
				memcpy(val, v, t->value_size);
			return 0;
		}
	}
	return -ENOENT;
}

static bool home_lock(struct innet_table *t, uint32_t home)
{
	for (uint32_t i = 0; i < SPIN; i++) {
		uint32_t expected = 0;
		if (atomic_compare_exchange_weak_explicit(&t->home_lock[home], &expected, 1,
							  memory_order_acquire, memory_order_relaxed))
			return true;
		innet_cpu_relax();
	}
	return false;
}

static void home_unlock(struct innet_table *t, uint32_t home)
{
	atomic_store_explicit(&t->home_lock[home], 0, memory_order_release);
}

/* Claim slot s for writing: seq even → odd. Bounded. */
static bool slot_claim(struct slot_hdr *s)
{
	for (uint32_t i = 0; i < SPIN; i++) {
		uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
		if (!(seq & 1) && atomic_compare_exchange_weak_explicit(&s->seq, &seq, seq + 1,
									 memory_order_acquire,
									 memory_order_relaxed))
			return true;
		innet_cpu_relax();
	}
	return false;
}

static void slot_release(struct slot_hdr *s)
{
	atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
}

/* Find the slot holding key (home lock held: the key cannot move). */
static struct slot_hdr *find_locked(struct innet_table *t, uint32_t home, const void *key)
{
	for (uint32_t i = 0; i < PROBE; i++) {
		struct slot_hdr *s = slot_at(t, home + i);
		uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
		if (state == SLOT_EMPTY)
			return NULL;
		if (state == SLOT_USED && shared_equal(slot_key(s), key, t->key_size))
			return s;
	}
	return NULL;
}

int innet_table_put(struct innet_table *t, const void *key, const void *val)
{
	uint32_t home = home_of(t, key);
	if (!home_lock(t, home)) {
		SH_ADD(t->sh->insert_busy, 1);
		return -EBUSY;
	}
	int rc = 0;
	struct slot_hdr *s = find_locked(t, home, key);
	if (s != NULL) { /* replace the value in place */
		if (!slot_claim(s)) {
			rc = -EBUSY;
			goto out_unlock;
		}
		innet_shared_store(slot_val(t, s), val, t->value_size);
		slot_release(s);
		goto out_unlock;
	}
	if (SH_ADD(t->sh->entries, 1) >= t->capacity) {
		SH_SUB(t->sh->entries, 1);
		SH_ADD(t->sh->insert_full, 1);
		rc = -ENOSPC;
		goto out_unlock;
	}
	for (uint32_t i = 0; i < PROBE; i++) {
		s = slot_at(t, home + i);
		if (atomic_load_explicit(&s->state, memory_order_relaxed) == SLOT_USED)
			continue;
		if (!slot_claim(s))
			continue;
		/* Another key's writer may have taken it between the check and the claim. */
		if (atomic_load_explicit(&s->state, memory_order_relaxed) == SLOT_USED) {
			slot_release(s);
			continue;
		}
		innet_shared_store(slot_key(s), key, t->key_size);
		innet_shared_store(slot_val(t, s), val, t->value_size);
		atomic_store_explicit(&s->state, SLOT_USED, memory_order_release);
		slot_release(s);
		goto out_unlock;
	}
	/* The probe window around this key's home is full. */
	SH_SUB(t->sh->entries, 1);
	SH_ADD(t->sh->insert_full, 1);
	rc = -ENOSPC;
out_unlock:
	home_unlock(t, home);
	return rc;
}

int innet_table_del(struct innet_table *t, const void *key)
{
	uint32_t home = home_of(t, key);
	if (!home_lock(t, home))
		return -EBUSY;
	int rc = -ENOENT;
	struct slot_hdr *s = find_locked(t, home, key);
	if (s != NULL && !slot_claim(s))
		rc = -EBUSY;
	else if (s != NULL) {
		atomic_store_explicit(&s->state, SLOT_DEAD, memory_order_release);
		slot_release(s);
		SH_SUB(t->sh->entries, 1);
		rc = 0;
	}
	home_unlock(t, home);
	return rc;
}

void innet_table_info_get(const struct innet_table *t, struct innet_table_info *info)
{
	info->name = t->name;
	info->key_size = t->key_size;
	info->value_size = t->value_size;
	info->capacity = t->capacity;
	info->entries = SH_LOAD(t->sh->entries);
	info->insert_full = SH_LOAD(t->sh->insert_full);
}

int innet_table_iter(struct innet_table *t, int (*fn)(const void *key, const void *val, void *arg),
		     void *arg)
{
	uint8_t k[256];
	uint8_t *v = malloc(t->value_size ? t->value_size : 1);
	if (v == NULL)
		return -ENOMEM;
	int rc = 0;
	for (uint32_t i = 0; i < t->n_slots && rc == 0; i++)
		if (slot_read(t, slot_at(t, i), k, v) == SLOT_USED)
			rc = fn(k, v, arg);
	free(v);
	return rc;
}
