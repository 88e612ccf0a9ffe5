/*
 * engine/table_algo.h — the exact-match table algorithm, written once for
 * every executor of it: the control plane and the user-space engine's data
 * path (src/engine/table.c, native code) and the XDP target's eBPF programs
 * (targets/xdp/dp_xdp.h, clang -target bpf). Both compile this file over the same
 * bytes — on XDP the slots, locks and counters are BPF array maps that the
 * user-space side mmaps — so the layout, the probe order, the retry bounds
 * and what each result means agree by construction.
 *
 * Layout (n_slots: the smallest power of two >= max(16, 2 * capacity), so the
 * load factor stays <= 0.5 and probe windows stay short):
 *
 *   slots:   | slot 0 | slot 1 | ... | slot n_slots-1 |
 *   slot:    | seq u32 | state u32 | key (key_size) | value (value_size) | pad to 8 |
 *   locks:   | u32 home lock per slot |                  0 free, 1 held
 *   shared:  struct innet_table_shared                   entries, insert_full, busy
 *
 *   seq      even: stable; odd: a writer is in the slot (a seqlock)
 *   state    EMPTY (never used), USED, or DEAD (deleted: a search goes on past it)
 *
 * A key lives within INNET_TABLE_PROBE slots of its home slot
 * innet_hash(key, key_size, 0) & (n_slots - 1), in the first slot that was
 * not USED when it was inserted. Slots only go EMPTY -> USED -> DEAD -> USED
 * ..., never back to EMPTY, so every slot between a key's home and the key is
 * USED or DEAD, and a search stops at the first EMPTY slot.
 *
 * Readers (lookups) take no lock: a slot is read between two reads of its
 * seq, and read again while a writer is in it. Writers take the home lock of
 * the key (a flag per home slot: two writers of one key take turns), then
 * claim a slot by moving its seq from even to odd with a compare-and-swap,
 * write, and move it on to even.
 *
 * THREAD SAFETY AND BOUNDS. Any number of readers and writers, on any CPU
 * and in any executor, at once. The waits are bounded by INNET_TABLE_TRIES,
 * the same on every executor: a lookup's reading one slot that a writer is
 * in, a writer's taking the home lock. When a wait runs out (a writer
 * preempted inside a slot or holding the lock: the control plane, or the
 * user-space engine's worker on a busy machine) the operation returns
 * INNET_TABLE_BUSY — the key may or may not be in the table, nothing was
 * changed — never INNET_TABLE_ABSENT: a caller that took BUSY for a miss
 * could insert over a live entry (lb's per-connection consistency). A writer
 * claims a slot with one try (its key's slot is written by no one else; a
 * free slot another writer holds is passed by). The control plane waits BUSY
 * out (table.c retries for a while); a data path decides what to do with the
 * packet (drop it with a named reason, or leave its state alone).
 *
 * How an executor plugs in: this file gives the layout and the constants to
 * whoever includes it; included with INNET__TBL_EXECUTOR defined it gives the
 * algorithm too, and the includer defines, before that include,
 *
 *   struct innet__tbl_ref                 what names the table to it
 *   innet__tbl_ld(p), innet__tbl_st(p, v) load (acquire) / store (release) *p
 *   innet__tbl_cas(p, old, new)           compare-and-swap: true if it swapped
 *   innet__tbl_add(p, n)                  atomic *p += n
 *   innet__tbl_relax()                    a pause inside a wait
 *
 * and after it the accessors declared below (innet__tbl_slot, _lock, _shared,
 * _key_eq, _val_out, _kv_in). Loops go through innet_loop (innet/dp.h): a
 * plain loop natively, bpf_loop on XDP, where the verifier then checks each
 * step's body a few times rather than once per slot and retry.
 */
#ifndef INNET_TABLE_ALGO_H
#define INNET_TABLE_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/dp.h"

#define INNET_TABLE_PROBE  32u    /* slots from its home a key may live in */
#define INNET_TABLE_TRIES  256u   /* every bounded wait: reads of a slot a writer is
                                   * in, attempts at a home lock, at claiming a slot */
#define INNET_TABLE_MIN_SLOTS 16u

enum innet_table_slot_state {
	INNET_SLOT_EMPTY = 0,
	INNET_SLOT_USED = 1,
	INNET_SLOT_DEAD = 2,
};

struct innet_table_slot {
	uint32_t seq;          /* even = stable, odd = a writer is in the slot */
	uint32_t state;        /* enum innet_table_slot_state */
	uint8_t kv[];          /* key (key_size) then value (value_size), 8-aligned */
};

/* A table's shared counters (on XDP one per table in innet_tmeta's page). */
struct innet_table_shared {
	uint32_t entries;      /* keys in the table */
	uint32_t pad;
	uint64_t insert_full;  /* inserts refused: the table or the key's window full */
	uint64_t busy;         /* operations that ran out of INNET_TABLE_TRIES */
};

/* What executors compiled apart must agree on (the eBPF objects and the
 * library: each compiler checks its own view against the same numbers). */
_Static_assert(sizeof(struct innet_table_slot) == 8 && offsetof(struct innet_table_slot, kv) == 8,
	       "a slot's key starts 8-aligned after seq and state");
_Static_assert(sizeof(struct innet_table_shared) == 24, "the counters' layout is shared");
_Static_assert((INNET_TABLE_MIN_SLOTS & (INNET_TABLE_MIN_SLOTS - 1)) == 0, "n_slots a power of two");
_Static_assert(INNET_TABLE_TRIES >= 1 && INNET_TABLE_TRIES <= INNET_LOOP_MAX &&
	       INNET_TABLE_PROBE <= INNET_LOOP_MAX, "bounded waits are innet_loop counts");
_Static_assert(INNET_TABLE_KEY_MAX <= INNET_HASH_MAX, "innet_hash covers the whole key");
_Static_assert(INNET_TABLE_KEY_MAX % 8 == 0, "keys are compared a word at a time");

/* The geometry of a table of `capacity` entries: its slots and their size. */
static inline uint32_t innet_table_n_slots(uint32_t capacity)
{
	uint32_t n = INNET_TABLE_MIN_SLOTS;
	while (n < 2 * capacity)
		n <<= 1;
	return n;
}

static inline uint32_t innet_table_slot_size(uint32_t key_size, uint32_t value_size)
{
	return (uint32_t)((sizeof(struct innet_table_slot) + key_size + value_size + 7) & ~7u);
}

#endif /* INNET_TABLE_ALGO_H */

/* The algorithm: once per executor (it may include this file for the layout
 * first, and again with INNET__TBL_EXECUTOR defined). */
#if defined(INNET__TBL_EXECUTOR) && !defined(INNET_TABLE_ALGO_EXECUTOR)
#define INNET_TABLE_ALGO_EXECUTOR

#define INNET__TBL_INLINE static inline __attribute__((always_inline))

/* One table operation in progress: the state its loop steps share. On XDP it
 * sits on the caller's stack, in 8-byte fields, where the verifier keeps a
 * constant exact (the table, the key and value sizes select the map and bound
 * every access). No field counts: a loop's turns are numbered by innet_loop
 * (unknown to the verifier), so a loop's states converge after a turn or two;
 * a count kept in the state would make every turn a state of its own. */
struct innet__tbl_op {
	struct innet__tbl_ref ref;      /* the table, as the executor names it */
	const uint8_t *key;
	uint8_t *val;                   /* lookup: the value goes here (NULL: nowhere);
	                                 * insert: it comes from here */
	uint64_t ks, vs;                /* key and value bytes */
	uint32_t home, mask;            /* the key's home slot; n_slots - 1 */
	union {
		struct innet_table_slot *slot;  /* lookup: the slot being read */
		uint32_t *lock;                 /* write: the key's home lock */
	};
	int64_t at;                     /* write: the slot holding the key, -1 none */
	int64_t rc;                     /* a loop's result, INNET_TABLE_* */
};

/* The executor's accessors (defined after including this file). */
static inline struct innet_table_slot *innet__tbl_slot(const struct innet__tbl_op *op, uint32_t k);
static inline uint32_t *innet__tbl_lock(const struct innet__tbl_op *op);
static inline struct innet_table_shared *innet__tbl_shared(const struct innet__tbl_op *op);
/* Does slot s hold op->key? (s may be changing: the caller knows whether
 * that matters.) */
static inline bool innet__tbl_key_eq(const struct innet__tbl_op *op, const struct innet_table_slot *s);
/* Copy slot s's value to op->val. */
static inline void innet__tbl_val_out(const struct innet__tbl_op *op, const struct innet_table_slot *s);
/* Write op->val (and op->key, if key_too) into slot s, claimed. */
static inline void innet__tbl_kv_in(const struct innet__tbl_op *op, struct innet_table_slot *s,
				    bool key_too);

/* What a look at a slot saw. */
enum innet__tbl_seen {
	INNET__SEEN_WRITER = 0,  /* a writer is in it, or came in meanwhile */
	INNET__SEEN_EMPTY,       /* never used: a search ends here */
	INNET__SEEN_OTHER,       /* another key, or a deleted one: look on */
	INNET__SEEN_MATCH,       /* the key, its value copied out */
};

/* ------------------------------------------------------------------------ */
/* Steps: the bodies of innet_loop (1: done, 0: go round again).              */

/* One try at a seqlock read of slot s: INNET__SEEN_WRITER while a writer is
 * in it (or came in meanwhile), else what it holds. A match's value is copied
 * out before the second read of seq, so a copy that overlapped a write is not
 * used (op->val may then keep torn bytes: a lookup promises a value only
 * with INNET_TABLE_OK). */
INNET__TBL_INLINE int innet__tbl_look(const struct innet__tbl_op *op, const struct innet_table_slot *s)
{
	uint32_t seq = innet__tbl_ld(&s->seq);
	if (seq & 1)
		return INNET__SEEN_WRITER;
	uint32_t state = innet__tbl_ld(&s->state);
	if (state == INNET_SLOT_EMPTY)
		return INNET__SEEN_EMPTY;   /* (a slot never goes back to empty) */
	if (state != INNET_SLOT_USED)
		return INNET__SEEN_OTHER;   /* (deleted: nothing in it to read) */
	bool eq = innet__tbl_key_eq(op, s);
	if (eq)
		innet__tbl_val_out(op, s);
	if (innet__tbl_ld(&s->seq) != seq)
		return INNET__SEEN_WRITER;
	return eq ? INNET__SEEN_MATCH : INNET__SEEN_OTHER;
}

/* A lookup's result while its probe loop goes on. */
#define INNET__TBL_LOOK_ON 1

/* A lookup's read of op->slot: a try per turn while a writer is in it; then
 * op->rc says what the slot decided (INNET_TABLE_OK, _ABSENT), or that the
 * search goes on (INNET__TBL_LOOK_ON). If the writer stays, op->rc keeps
 * INNET_TABLE_BUSY. */
static inline long innet__tbl_read_step(uint32_t t, void *arg)
{
	struct innet__tbl_op *op = arg;
	(void)t;
	if (op->slot == NULL)
		return 1;
	switch (innet__tbl_look(op, op->slot)) {
	case INNET__SEEN_WRITER:
		innet__tbl_relax();
		return 0;
	case INNET__SEEN_MATCH:
		op->rc = INNET_TABLE_OK;
		return 1;
	case INNET__SEEN_EMPTY:
		op->rc = INNET_TABLE_ABSENT;
		return 1;
	}
	op->rc = INNET__TBL_LOOK_ON;
	return 1;
}

/* A lookup's look at slot home + i of the window: the first slot that holds
 * the key (INNET_TABLE_OK) or is empty (INNET_TABLE_ABSENT) decides, and so
 * does one that a writer stays in for INNET_TABLE_TRIES tries
 * (INNET_TABLE_BUSY: the key may be the one being written). */
static inline long innet__tbl_probe_step(uint32_t i, void *arg)
{
	struct innet__tbl_op *op = arg;
	op->slot = innet__tbl_slot(op, (op->home + i) & op->mask);
	if (op->slot == NULL) {
		op->rc = INNET_TABLE_FAULT;
		return 1;
	}
	op->rc = INNET_TABLE_BUSY;
	innet_loop(INNET_TABLE_TRIES, innet__tbl_read_step, op);
	return op->rc != INNET__TBL_LOOK_ON;
}

/* Claim slot s for writing, one try: seq even -> odd. */
INNET__TBL_INLINE bool innet__tbl_claim(struct innet_table_slot *s)
{
	uint32_t seq = innet__tbl_ld(&s->seq);
	return !(seq & 1) && innet__tbl_cas(&s->seq, seq, seq + 1);
}

/* Leave a claimed slot: seq odd -> even (release: the writes come first). */
INNET__TBL_INLINE void innet__tbl_release(struct innet_table_slot *s)
{
	innet__tbl_add(&s->seq, 1u);
}

/* The key's home lock: a try per turn. */
static inline long innet__tbl_lock_step(uint32_t t, void *arg)
{
	struct innet__tbl_op *op = arg;
	(void)t;
	if (op->lock == NULL)
		return 1;
	if (innet__tbl_cas(op->lock, 0u, 1u)) {
		op->rc = INNET_TABLE_OK;
		return 1;
	}
	innet__tbl_relax();
	return 0;
}

/* A writer's search for its key (home lock held): the slot that holds it
 * (op->at), or none (an empty slot, or the whole window). No seqlock read is
 * needed: only writers of this key, who take turns on its home lock, ever
 * write its slot; other keys' slots may be changing as they are read, but
 * none of them becomes this key meanwhile, and no slot becomes EMPTY. */
static inline long innet__tbl_find_step(uint32_t i, void *arg)
{
	struct innet__tbl_op *op = arg;
	uint32_t k = (op->home + i) & op->mask;
	struct innet_table_slot *s = innet__tbl_slot(op, k);
	if (s == NULL) {
		op->rc = INNET_TABLE_FAULT;
		return 1;
	}
	uint32_t state = innet__tbl_ld(&s->state);
	if (state == INNET_SLOT_EMPTY)
		return 1;
	if (state != INNET_SLOT_USED || !innet__tbl_key_eq(op, s))
		return 0;
	op->at = k;
	return 1;
}

/* Insert of a new key: the first slot of the window not in use, claimed and
 * written. A free slot that another writer holds is passed by (it is
 * becoming another key's: writers claim a free slot only to fill it), and
 * noted in op->rc: if the key finds no slot, the answer is BUSY, not FULL. */
static inline long innet__tbl_place_step(uint32_t i, void *arg)
{
	struct innet__tbl_op *op = arg;
	struct innet_table_slot *s = innet__tbl_slot(op, (op->home + i) & op->mask);
	if (s == NULL) {
		op->rc = INNET_TABLE_FAULT;
		return 1;
	}
	if (innet__tbl_ld(&s->state) == INNET_SLOT_USED)
		return 0;
	if (!innet__tbl_claim(s)) {
		op->rc = INNET_TABLE_BUSY;
		return 0;
	}
	if (innet__tbl_ld(&s->state) == INNET_SLOT_USED) {
		/* another key's writer filled it between the look and the claim */
		innet__tbl_release(s);
		return 0;
	}
	innet__tbl_kv_in(op, s, true);
	innet__tbl_st(&s->state, (uint32_t)INNET_SLOT_USED);
	innet__tbl_release(s);
	op->rc = INNET_TABLE_OK;
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Operations. The executor fills op (ref, key, val, ks, vs, home, mask;     */
/* zero elsewhere) and calls one of these.                                   */

/* Lookup: INNET_TABLE_OK (the value copied to op->val), _ABSENT, _BUSY
 * (counted), or _FAULT (the executor's memory is not there: a loader bug). */
INNET__TBL_INLINE int innet__tbl_lookup(struct innet__tbl_op *op)
{
	/* The home slot first, without a loop: it decides most lookups (the key
	 * in its home slot, or an empty one). Another key or a writer there: the
	 * loops below, from the home slot again (on XDP an innet_loop is a
	 * bpf_loop call, two nested per lookup; this saves both). */
	op->slot = innet__tbl_slot(op, op->home & op->mask);
	if (op->slot != NULL) {
		int seen = innet__tbl_look(op, op->slot);
		if (seen == INNET__SEEN_MATCH || seen == INNET__SEEN_EMPTY) {
			op->rc = seen == INNET__SEEN_MATCH ? INNET_TABLE_OK : INNET_TABLE_ABSENT;
			return (int)op->rc;
		}
	}
	op->rc = INNET__TBL_LOOK_ON;
	innet_loop(INNET_TABLE_PROBE, innet__tbl_probe_step, op);
	if (op->rc == INNET__TBL_LOOK_ON)
		op->rc = INNET_TABLE_ABSENT;   /* the whole window, and no key */
	if (op->rc == INNET_TABLE_BUSY) {
		struct innet_table_shared *sh = innet__tbl_shared(op);
		if (sh != NULL)
			innet__tbl_add(&sh->busy, 1u);
	}
	return (int)op->rc;
}

/* A write with the home lock held: replace the key's value in place, or
 * delete it; or insert it. */
INNET__TBL_INLINE int innet__tbl_write_locked(struct innet__tbl_op *op, struct innet_table_shared *sh,
					      uint32_t capacity, bool del)
{
	op->at = -1;
	op->rc = INNET_TABLE_OK;
	innet_loop(INNET_TABLE_PROBE, innet__tbl_find_step, op);
	if (op->rc != INNET_TABLE_OK)
		return (int)op->rc;    /* a fault */
	if (op->at >= 0) {
		struct innet_table_slot *s = innet__tbl_slot(op, (uint32_t)op->at);
		if (s == NULL)
			return INNET_TABLE_FAULT;
		/* (nobody else writes this key's slot: one try; only a writer
		 * that died inside it could make it fail) */
		if (!innet__tbl_claim(s))
			return INNET_TABLE_BUSY;
		if (del)
			innet__tbl_st(&s->state, (uint32_t)INNET_SLOT_DEAD);
		else
			innet__tbl_kv_in(op, s, false);
		innet__tbl_release(s);
		if (del)
			innet__tbl_add(&sh->entries, (uint32_t)-1);
		return INNET_TABLE_OK;
	}
	if (del)
		return INNET_TABLE_ABSENT;
	if (innet__tbl_add(&sh->entries, 1u) >= capacity) {
		innet__tbl_add(&sh->entries, (uint32_t)-1);
		innet__tbl_add(&sh->insert_full, 1u);
		return INNET_TABLE_FULL;
	}
	op->rc = INNET_TABLE_FULL;   /* (until a slot takes the key) */
	innet_loop(INNET_TABLE_PROBE, innet__tbl_place_step, op);
	if (op->rc == INNET_TABLE_OK || op->rc == INNET_TABLE_FAULT)
		return (int)op->rc;
	innet__tbl_add(&sh->entries, (uint32_t)-1);
	if (op->rc == INNET_TABLE_BUSY)
		return INNET_TABLE_BUSY;  /* a slot was free, but another writer held it */
	innet__tbl_add(&sh->insert_full, 1u);
	return INNET_TABLE_FULL;      /* the key's probe window is full */
}

/* Insert or replace (del false), or delete (del true): INNET_TABLE_OK,
 * _ABSENT (delete), _FULL (insert: counted in insert_full), _BUSY (counted
 * in busy), or _FAULT. */
INNET__TBL_INLINE int innet__tbl_write(struct innet__tbl_op *op, uint32_t capacity, bool del)
{
	struct innet_table_shared *sh = innet__tbl_shared(op);
	op->lock = innet__tbl_lock(op);
	if (sh == NULL || op->lock == NULL)
		return INNET_TABLE_FAULT;
	op->rc = INNET_TABLE_BUSY;
	innet_loop(INNET_TABLE_TRIES, innet__tbl_lock_step, op);
	int rc = INNET_TABLE_BUSY;
	if (op->rc == INNET_TABLE_OK) {
		rc = innet__tbl_write_locked(op, sh, capacity, del);
		innet__tbl_st(op->lock, 0u);
	}
	if (rc == INNET_TABLE_BUSY)
		innet__tbl_add(&sh->busy, 1u);
	return rc;
}

#endif /* INNET__TBL_EXECUTOR */
