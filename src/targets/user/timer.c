/*
 * timer.c — one-shot timers for Trio programs (Trio's timer threads).
 *
 * Arming, from any worker (restricted C: no locks, no allocation):
 *   1. store the arg, then the deadline, into the program's timer slot;
 *   2. push (program, timer, deadline) into a bounded lock-free MPSC ring;
 *   3. if the deadline is earlier than the time the timer thread plans to
 *      wake up, kick its eventfd (rare: only when it sleeps longer).
 * On the XDP target the eBPF program does step 1 itself, on the mmap'ed
 * slots, and user space does 2 and 3 when it drains the hand-off ring
 * (innet_handoff_timer: innet_timerq_push) — maybe after the eBPF side
 * cancelled or re-armed.
 *
 * The timer thread drains the ring into a private min-heap and fires an
 * entry when its deadline passes and still equals the slot's deadline (a
 * later re-arm pushed a newer entry; a cancel zeroed the deadline; either
 * way the old entry is stale and skipped). Firing clears the deadline with a
 * compare-and-swap, so a concurrent re-arm is never lost: it either lands
 * before (the CAS fails and the newer entry fires later) or after (a new
 * arm). Callbacks run on the timer thread with its own struct innet_worker,
 * so they may emit packets; those are flushed after each round.
 *
 * The thread sets its timer slack to 1 ns (see shared/notes: the default
 * 50 us slack would make every timer late).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "targets/user/user_pvt.h"

#define RING_SIZE  65536u   /* power of two */
#define IDLE_NS    10000000ull

struct ring_cell {
	_Atomic uint64_t seq;
	uint64_t deadline_ns;
	uint32_t prog;
	uint32_t timer;
};

struct heap_ent {
	uint64_t deadline_ns;
	uint32_t prog;
	uint32_t timer;
};

struct innet_timerq {
	struct ring_cell *ring;
	_Atomic uint64_t enq_pos;
	uint64_t deq_pos;
	struct heap_ent *heap;
	uint32_t n_heap;
	uint32_t cap_heap;
	_Atomic uint64_t wake_at_ns;   /* when the thread will look next */
	int wake_fd;
	pthread_t thread;
	bool running;
	_Atomic uint64_t ring_full;
};

int innet_timerq_create(struct innet_user *u)
{
	struct innet_timerq *q = calloc(1, sizeof(*q));
	if (q == NULL)
		return -ENOMEM;
	q->ring = calloc(RING_SIZE, sizeof(*q->ring));
	q->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->ring == NULL || q->wake_fd < 0) {
		free(q->ring);
		if (q->wake_fd >= 0)
			close(q->wake_fd);
		free(q);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < RING_SIZE; i++)
		atomic_init(&q->ring[i].seq, i);
	u->timerq = q;
	return 0;
}

void innet_timerq_destroy(struct innet_user *u)
{
	struct innet_timerq *q = u->timerq;
	if (q == NULL)
		return;
	innet_timerq_stop(u);
	close(q->wake_fd);
	free(q->ring);
	free(q->heap);
	free(q);
	u->timerq = NULL;
}

/* Vyukov's bounded MPSC queue: producers claim a position with a CAS. */
static bool ring_push(struct innet_timerq *q, uint64_t deadline, uint32_t prog, uint32_t timer)
{
	uint64_t pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
	for (int tries = 0; tries < 1024; tries++) {
		struct ring_cell *c = &q->ring[pos & (RING_SIZE - 1)];
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t dif = (int64_t)seq - (int64_t)pos;
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&q->enq_pos, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				c->deadline_ns = deadline;
				c->prog = prog;
				c->timer = timer;
				atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
				return true;
			}
		} else if (dif < 0) {
			return false; /* full */
		} else {
			pos = atomic_load_explicit(&q->enq_pos, memory_order_relaxed);
		}
	}
	return false;
}

static bool ring_pop(struct innet_timerq *q, struct heap_ent *e)
{
	struct ring_cell *c = &q->ring[q->deq_pos & (RING_SIZE - 1)];
	uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	if ((int64_t)seq - (int64_t)(q->deq_pos + 1) < 0)
		return false;
	e->deadline_ns = c->deadline_ns;
	e->prog = c->prog;
	e->timer = c->timer;
	atomic_store_explicit(&c->seq, q->deq_pos + RING_SIZE, memory_order_release);
	q->deq_pos++;
	return true;
}

int innet_timerq_arm(struct innet_user *u, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns,
		     uint64_t arg)
{
	struct innet_timer *t = &cp->timers[timer];
	atomic_store_explicit(&t->arg, arg, memory_order_relaxed);
	atomic_store_explicit(&t->deadline_ns, deadline_ns, memory_order_release);
	return innet_timerq_push(u, cp, timer, deadline_ns);
}

/* Steps 2 and 3 alone, for an arm whose slot is written already: the XDP
 * target's eBPF program stores arg and deadline into the (mmap'ed) slot
 * itself and hands the rest over through its ring, which user space drains
 * later. Storing the slot again here would undo what the eBPF side did
 * meanwhile — a cancel (the round finished first: the timer would fire
 * anyway) or a newer arm (the older deadline would come back). */
int innet_timerq_push(struct innet_user *u, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns)
{
	struct innet_timerq *q = u->timerq;
	if (!ring_push(q, deadline_ns, cp->index, timer)) {
		atomic_fetch_add_explicit(&q->ring_full, 1, memory_order_relaxed);
		return -ENOSPC;
	}
	if (deadline_ns < atomic_load_explicit(&q->wake_at_ns, memory_order_acquire)) {
		uint64_t one = 1;
		if (write(q->wake_fd, &one, sizeof(one)) < 0) {
			/* saturated counter: the thread is being woken anyway */
		}
	}
	return 0;
}

int innet_timer_arm(struct innet_ctx *ctx, uint32_t timer, uint64_t delay_ns, uint64_t arg)
{
	struct innet_cp *cp = ctx->prog;
	if (INNET_UNLIKELY(ctx->model != INNET_MODEL_TRIO)) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return -1;
	}
	if (INNET_UNLIKELY(timer >= cp->n_timers)) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return -1;
	}
	uint64_t now = ctx->in_timer ? innet_now_ns() : ctx->now_ns;
	uint64_t deadline = now + (delay_ns ? delay_ns : 1);
	return innet_timerq_arm(ctx->worker->u, cp, timer, deadline, arg) == 0 ? 0 : -1;
}

void innet_timer_cancel(struct innet_ctx *ctx, uint32_t timer)
{
	struct innet_cp *cp = ctx->prog;
	if (timer < cp->n_timers)
		atomic_store_explicit(&cp->timers[timer].deadline_ns, 0, memory_order_release);
}

static int heap_push(struct innet_timerq *q, const struct heap_ent *e)
{
	if (q->n_heap == q->cap_heap) {
		uint32_t cap = q->cap_heap ? q->cap_heap * 2 : 1024;
		struct heap_ent *h = realloc(q->heap, (size_t)cap * sizeof(*h));
		if (h == NULL)
			return -ENOMEM;
		q->heap = h;
		q->cap_heap = cap;
	}
	uint32_t i = q->n_heap++;
	q->heap[i] = *e;
	while (i > 0 && q->heap[(i - 1) / 2].deadline_ns > q->heap[i].deadline_ns) {
		struct heap_ent t = q->heap[i];
		q->heap[i] = q->heap[(i - 1) / 2];
		q->heap[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
	return 0;
}

static void heap_pop(struct innet_timerq *q)
{
	q->heap[0] = q->heap[--q->n_heap];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < q->n_heap && q->heap[l].deadline_ns < q->heap[m].deadline_ns)
			m = l;
		if (r < q->n_heap && q->heap[r].deadline_ns < q->heap[m].deadline_ns)
			m = r;
		if (m == i)
			break;
		struct heap_ent t = q->heap[i];
		q->heap[i] = q->heap[m];
		q->heap[m] = t;
		i = m;
	}
}

static void fire(struct innet_switch *sw, struct innet_worker *w, const struct heap_ent *e)
{
	struct innet_cp *cp = &sw->progs[e->prog];
	struct innet_timer *t = &cp->timers[e->timer];
	uint64_t d = e->deadline_ns;
	uint64_t arg = atomic_load_explicit(&t->arg, memory_order_acquire);
	if (!atomic_compare_exchange_strong_explicit(&t->deadline_ns, &d, 0, memory_order_acq_rel,
						     memory_order_acquire))
		return; /* re-armed or cancelled since: stale */
	struct innet_ctx *ctx = &w->ctx[cp->index];
	ctx->use = (struct innet_usage){ 0 };
	ctx->fault = 0;
	ctx->now_ns = w->now_ns;
	ctx->in_timer = 1;
	cp->on_timer(ctx, e->timer, arg);
	struct innet_prog_stats *ps = &w->pstats[cp->index];
	INNET_STAT_INC(ps->timer_fires);
	INNET_STAT_ADD(ps->reg_ops, ctx->use.reg_ops);
	INNET_STAT_ADD(ps->table_ops, ctx->use.table_ops);
	INNET_STAT_ADD(ps->alu_ops, ctx->use.alu_ops);
	if (ctx->fault != 0)
		INNET_STAT_INC(ps->drops[ctx->fault]);
}

static void *timer_main(void *arg)
{
	struct innet_user *u = arg;
	struct innet_switch *sw = u->sw;
	struct innet_timerq *q = u->timerq;
	struct innet_worker *w = INNET_TIMER_WORKER(u);
	pthread_setname_np(pthread_self(), "innet-timer");
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	while (!atomic_load_explicit(&u->stopping, memory_order_relaxed)) {
		struct heap_ent e;
		while (ring_pop(q, &e))
			if (heap_push(q, &e) != 0)
				atomic_fetch_add_explicit(&q->ring_full, 1, memory_order_relaxed);
		innet_worker_set_now(w);
		while (q->n_heap > 0 && q->heap[0].deadline_ns <= w->now_ns) {
			e = q->heap[0];
			heap_pop(q);
			fire(sw, w, &e);
		}
		innet_worker_flush(w);
		uint64_t next = q->n_heap ? q->heap[0].deadline_ns : w->now_ns + IDLE_NS;
		if (next > w->now_ns + IDLE_NS)
			next = w->now_ns + IDLE_NS;
		atomic_store_explicit(&q->wake_at_ns, next, memory_order_release);
		/* An arm that raced with the store above is in the ring: look again. */
		struct ring_cell *c = &q->ring[q->deq_pos & (RING_SIZE - 1)];
		if ((int64_t)atomic_load_explicit(&c->seq, memory_order_acquire) - (int64_t)(q->deq_pos + 1) >= 0)
			continue;
		uint64_t now = innet_now_ns();
		if (next <= now)
			continue;
		uint64_t wait = next - now;
		struct timespec ts = { .tv_sec = (time_t)(wait / 1000000000ull),
				       .tv_nsec = (long)(wait % 1000000000ull) };
		struct pollfd pfd = { .fd = q->wake_fd, .events = POLLIN };
		if (ppoll(&pfd, 1, &ts, NULL) > 0) {
			uint64_t v;
			if (read(q->wake_fd, &v, sizeof(v)) < 0) {
				/* spurious */
			}
		}
	}
	return NULL;
}

int innet_timerq_start(struct innet_user *u)
{
	struct innet_timerq *q = u->timerq;
	int rc = pthread_create(&q->thread, NULL, timer_main, u);
	if (rc != 0)
		return -rc;
	q->running = true;
	return 0;
}

void innet_timerq_stop(struct innet_user *u)
{
	struct innet_timerq *q = u->timerq;
	if (q == NULL || !q->running)
		return;
	uint64_t one = 1;
	if (write(q->wake_fd, &one, sizeof(one)) < 0) {
		/* already signalled */
	}
	pthread_join(q->thread, NULL);
	q->running = false;
}
