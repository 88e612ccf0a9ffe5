/*
 * table.c — exact-match tables: fixed capacity, open addressing with a
 * bounded probe window (like a hardware hash table with a fixed number of
 * ways), safe for concurrent lookups and writes without locks on the read
 * side. The algorithm and the memory layout are engine/table_algo.h's, the
 * one copy that the XDP target's eBPF programs compile too (targets/xdp/dp_xdp.h);
 * this file is its native executor: the memory, the atomics, and the two
 * faces of the table —
 *
 *   innet_table_try_get/put/del   the data path's: one bounded attempt, an
 *                                 enum innet_table_rc (BUSY when a wait ran out)
 *   innet_table_get/put/del       the control plane's: 0 or -errno; BUSY is
 *                                 waited out (retried, yielding, for up to
 *                                 TABLE_WAIT_NS) before it becomes -EBUSY
 *
 * On the XDP target the slots, the home locks and the counters live in BPF
 * array maps: the loader rehomes an empty table onto them
 * (innet_table_rehome), so lookups and writes from either executor and from
 * the control plane see one table.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "innet/clock.h"
#include "engine/switch_pvt.h"

struct innet_table;

/* The executor's half of engine/table_algo.h: atomics as the C11 model has
 * them (acquire loads, release stores: on x86 plain moves), the pause
 * instruction inside waits. */
struct innet__tbl_ref {
	struct innet_table *t;
	bool walk;         /* innet_table_iter: every used slot matches, its key copied */
	uint8_t *kdst;     /* to here */
};
#define innet__tbl_ld(p)       __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define innet__tbl_st(p, v)    __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define innet__tbl_add(p, n)   __atomic_fetch_add((p), (n), __ATOMIC_ACQ_REL)
#define innet__tbl_cas(p, o, n)                                                           \
	({                                                                                \
		__typeof__(*(p)) o_ = (o);                                                \
		__atomic_compare_exchange_n((p), &o_, (n), false, __ATOMIC_ACQUIRE,       \
					    __ATOMIC_RELAXED);                            \
	})
#define innet__tbl_relax()     innet_cpu_relax()
#define INNET__TBL_EXECUTOR
#include "engine/table_algo.h"

/* How long the control plane waits out INNET_TABLE_BUSY: a writer preempted
 * inside a slot comes back within a scheduler tick or two. */
#define TABLE_WAIT_NS (200u * 1000000u)

struct innet_table {
	char name[INNET_NAME_MAX];
	uint32_t key_size;
	uint32_t value_size;
	uint32_t capacity;
	uint32_t n_slots;          /* power of two */
	uint32_t slot_size;        /* bytes per slot, multiple of 8 */
	uint8_t *slots;
	uint32_t *home_lock;       /* [n_slots] */
	struct innet_table_shared *sh; /* counters (atomics through __atomic) */
	bool own;                  /* slots, home_lock, sh are ours to free */
};

#define SH_LOAD(x)     __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------------ */
/* The accessors engine/table_algo.h asks for.                                */

static inline struct innet_table_slot *innet__tbl_slot(const struct innet__tbl_op *op, uint32_t k)
{
	const struct innet_table *t = op->ref.t;
	return (struct innet_table_slot *)(t->slots + (size_t)(k & (t->n_slots - 1)) * t->slot_size);
}

static inline uint32_t *innet__tbl_lock(const struct innet__tbl_op *op)
{
	return &op->ref.t->home_lock[op->home];
}

static inline struct innet_table_shared *innet__tbl_shared(const struct innet__tbl_op *op)
{
	return op->ref.t->sh;
}

static inline bool innet__tbl_key_eq(const struct innet__tbl_op *op, const struct innet_table_slot *s)
{
	if (op->ref.walk) {   /* innet_table_iter: any key, copied out */
		innet_shared_load(op->ref.kdst, s->kv, (uint32_t)op->ks);
		return true;
	}
	uint8_t copy[INNET_TABLE_KEY_MAX];
	innet_shared_load(copy, s->kv, (uint32_t)op->ks);
	return memcmp(copy, op->key, op->ks) == 0;
}

static inline void innet__tbl_val_out(const struct innet__tbl_op *op, const struct innet_table_slot *s)
{
	if (op->val != NULL)
		innet_shared_load(op->val, s->kv + op->ks, (uint32_t)op->vs);
}

static inline void innet__tbl_kv_in(const struct innet__tbl_op *op, struct innet_table_slot *s,
				    bool key_too)
{
	if (key_too)
		innet_shared_store(s->kv, op->key, (uint32_t)op->ks);
	innet_shared_store(s->kv + op->ks, op->val, (uint32_t)op->vs);
}

/* ------------------------------------------------------------------------ */

static void op_init(struct innet__tbl_op *op, struct innet_table *t, const void *key)
{
	memset(op, 0, sizeof(*op));
	op->ref.t = t;
	op->key = key;
	op->ks = t->key_size;
	op->vs = t->value_size;
	op->mask = t->n_slots - 1;
	op->home = (uint32_t)innet_hash(key, t->key_size, 0) & (t->n_slots - 1);
}

struct innet_table *innet_table_create(const char *name, uint32_t key_size, uint32_t value_size,
				       uint32_t capacity)
{
	if (key_size == 0 || key_size > INNET_TABLE_KEY_MAX || value_size > INNET_TABLE_VALUE_MAX ||
	    capacity == 0 || capacity > (1u << 26)) {
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
	t->n_slots = innet_table_n_slots(capacity);
	t->slot_size = innet_table_slot_size(key_size, value_size);
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
		free(t->home_lock);
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
		free(t->home_lock);
		free(t->sh);
	}
	t->slots = slots;
	t->home_lock = locks;
	t->sh = sh;
	t->own = false;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The data path's face: one bounded attempt.                                 */

int innet_table_try_get(struct innet_table *t, const void *key, void *val)
{
	struct innet__tbl_op op;
	op_init(&op, t, key);
	op.val = val;
	return innet__tbl_lookup(&op);
}

int innet_table_try_put(struct innet_table *t, const void *key, const void *val)
{
	struct innet__tbl_op op;
	op_init(&op, t, key);
	op.val = (uint8_t *)(uintptr_t)val;   /* (read, never written) */
	return innet__tbl_write(&op, t->capacity, false);
}

int innet_table_try_del(struct innet_table *t, const void *key)
{
	struct innet__tbl_op op;
	op_init(&op, t, key);
	return innet__tbl_write(&op, t->capacity, true);
}

/* ------------------------------------------------------------------------ */
/* The control plane's face: BUSY waited out, results as -errno.              */

static int table_errno(int rc)
{
	switch (rc) {
	case INNET_TABLE_OK: return 0;
	case INNET_TABLE_ABSENT: return -ENOENT;
	case INNET_TABLE_FULL: return -ENOSPC;
	case INNET_TABLE_BUSY: return -EBUSY;
	default: return -EFAULT;
	}
}

/* Whether a BUSY result is worth another attempt (the wait started at *t0;
 * 0: not yet). Yields the CPU: the writer we wait for may need it. */
static bool wait_more(uint64_t *t0)
{
	uint64_t now = innet_now_ns();
	if (*t0 == 0)
		*t0 = now;
	if (now - *t0 > TABLE_WAIT_NS)
		return false;
	sched_yield();
	return true;
}

int innet_table_get(struct innet_table *t, const void *key, void *val)
{
	uint64_t t0 = 0;
	int rc;
	while ((rc = innet_table_try_get(t, key, val)) == INNET_TABLE_BUSY && wait_more(&t0))
		;
	return table_errno(rc);
}

int innet_table_put(struct innet_table *t, const void *key, const void *val)
{
	uint64_t t0 = 0;
	int rc;
	while ((rc = innet_table_try_put(t, key, val)) == INNET_TABLE_BUSY && wait_more(&t0))
		;
	return table_errno(rc);
}

int innet_table_del(struct innet_table *t, const void *key)
{
	uint64_t t0 = 0;
	int rc;
	while ((rc = innet_table_try_del(t, key)) == INNET_TABLE_BUSY && wait_more(&t0))
		;
	return table_errno(rc);
}

void innet_table_info_get(const struct innet_table *t, struct innet_table_info *info)
{
	info->name = t->name;
	info->key_size = t->key_size;
	info->value_size = t->value_size;
	info->capacity = t->capacity;
	info->entries = SH_LOAD(t->sh->entries);
	info->insert_full = SH_LOAD(t->sh->insert_full);
	info->busy = SH_LOAD(t->sh->busy);
}

int innet_table_iter(struct innet_table *t, int (*fn)(const void *key, const void *val, void *arg),
		     void *arg)
{
	uint8_t k[INNET_TABLE_KEY_MAX];
	uint8_t *v = malloc(t->value_size ? t->value_size : 1);
	if (v == NULL)
		return -ENOMEM;
	struct innet__tbl_op op;
	memset(&op, 0, sizeof(op));
	op.ref.t = t;
	op.ref.walk = true;
	op.ref.kdst = k;
	op.ks = t->key_size;
	op.vs = t->value_size;
	op.val = v;
	int rc = 0;
	for (uint32_t i = 0; i < t->n_slots && rc == 0; i++) {
		const struct innet_table_slot *s = innet__tbl_slot(&op, i);
		int seen;
		uint64_t t0 = 0;
		/* a slot a writer stays in is waited out, as the other calls do */
		while ((seen = innet__tbl_look(&op, s)) == INNET__SEEN_WRITER && wait_more(&t0))
			;
		if (seen == INNET__SEEN_MATCH)
			rc = fn(k, v, arg);
	}
	free(v);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Tests: a writer stopped in the middle of its work.                          */

int innet_table_test_hold(struct innet_table *t, const void *key, bool lock, bool hold)
{
	struct innet__tbl_op op;
	op_init(&op, t, key);
	if (lock) {
		uint32_t *l = innet__tbl_lock(&op);
		return innet__tbl_cas(l, hold ? 0u : 1u, hold ? 1u : 0u) ? 0 : -EBUSY;
	}
	op.at = -1;
	op.rc = INNET_TABLE_OK;
	innet_loop(INNET_TABLE_PROBE, innet__tbl_find_step, &op);
	if (op.at < 0)
		return -ENOENT;
	struct innet_table_slot *s = innet__tbl_slot(&op, (uint32_t)op.at);
	if (hold)
		return innet__tbl_claim(s) ? 0 : -EBUSY;
	innet__tbl_release(s);
	return 0;
}
