/*
 * link.c — link emulation on a switch port: loss, duplication, reordering
 * and delay, for the services' fault tests.
 *
 * Each (worker, port) has its own xorshift PRNG seeded from the link's seed,
 * so a given sequence of packets through one worker meets the same fate in
 * every run (fault tests run switches with one worker to be reproducible).
 *
 * Reordering holds a packet back for delay + REORDER_HOLD_US (+ jitter), so
 * the packets sent after it overtake it. Held packets are copied into a
 * per-(worker, port) min-heap by due time, which the worker drains; the heap
 * has a fixed capacity (HELD_MAX): when full, the packet is dropped and
 * counted as link_queue_full.
 */
#include <jansson.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "targets/user/user_pvt.h"

#define REORDER_HOLD_US 300u
#define HELD_MAX        4096u

static inline double rnd01(struct innet_link_state *ls)
{
	uint64_t x = ls->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	ls->rng = x;
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

enum innet_link_fate innet_link_decide(const struct innet_link_conf *lc, struct innet_link_state *ls,
				       uint64_t now_ns, uint64_t *due_ns, uint32_t *flags)
{
	/* Draw every number every time, so one packet's fate does not shift the
	 * random sequence of the next depending on the branch taken. */
	double r_loss = rnd01(ls), r_dup = rnd01(ls), r_reorder = rnd01(ls), r_jit = rnd01(ls);
	*flags = r_dup < lc->dup ? INNET_LINK_F_DUP : 0;
	if (r_loss < lc->loss)
		return INNET_LINK_LOSE;
	uint64_t delay_us = lc->delay_us + (uint64_t)(r_jit * lc->jitter_us);
	if (r_reorder < lc->reorder) {
		delay_us += REORDER_HOLD_US;
		*flags |= INNET_LINK_F_REORDER;
	}
	if (delay_us > 0) {
		*due_ns = now_ns + delay_us * 1000;
		return INNET_LINK_HOLD;
	}
	return INNET_LINK_PASS;
}

static void heap_swap(struct innet_held **h, uint32_t a, uint32_t b)
{
	struct innet_held *t = h[a];
	h[a] = h[b];
	h[b] = t;
}

int innet_link_hold(struct innet_link_state *ls, uint64_t due_ns, const void *data, uint32_t len,
		    int fd, uint16_t port, uint16_t prog, uint16_t dst_udp, const struct sockaddr_in *addr)
{
	if (ls->n_held >= HELD_MAX)
		return -ENOSPC;
	if (ls->n_held == ls->cap_held) {
		uint32_t cap = ls->cap_held ? ls->cap_held * 2 : 64;
		struct innet_held **h = realloc(ls->heap, cap * sizeof(*h));
		if (h == NULL)
			return -ENOMEM;
		ls->heap = h;
		ls->cap_held = cap;
	}
	struct innet_held *p = malloc(sizeof(*p) + len);
	if (p == NULL)
		return -ENOMEM;
	p->due_ns = due_ns;
	p->len = len;
	p->fd = fd;
	p->port = port;
	p->prog = prog;
	p->dst_udp = dst_udp;
	p->addr = *addr;
	memcpy(p->data, data, len);
	/* sift up */
	uint32_t i = ls->n_held++;
	ls->heap[i] = p;
	while (i > 0 && ls->heap[(i - 1) / 2]->due_ns > ls->heap[i]->due_ns) {
		heap_swap(ls->heap, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	return 0;
}

struct innet_held *innet_link_pop_due(struct innet_link_state *ls, uint64_t now_ns)
{
	if (ls->n_held == 0 || ls->heap[0]->due_ns > now_ns)
		return NULL;
	struct innet_held *top = ls->heap[0];
	ls->heap[0] = ls->heap[--ls->n_held];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < ls->n_held && ls->heap[l]->due_ns < ls->heap[m]->due_ns)
			m = l;
		if (r < ls->n_held && ls->heap[r]->due_ns < ls->heap[m]->due_ns)
			m = r;
		if (m == i)
			break;
		heap_swap(ls->heap, i, m);
		i = m;
	}
	return top;
}

uint64_t innet_link_next_due(const struct innet_link_state *ls)
{
	return ls->n_held ? ls->heap[0]->due_ns : UINT64_MAX;
}

void innet_link_state_fini(struct innet_link_state *ls)
{
	for (uint32_t i = 0; i < ls->n_held; i++)
		free(ls->heap[i]);
	free(ls->heap);
	ls->heap = NULL;
	ls->n_held = ls->cap_held = 0;
}
