/*
 * handoff.c — the hand-off API (engine/target.h): what a target stacked on
 * the user-space engine (XDP) gives it to carry out — sends, packets for
 * on_cpu, timer arms — through a seat: one of the engine's own workers
 * (INNET_HANDOFF_WORKER for the stacked target's thread, INNET_INJECT_WORKER
 * for injections), with its transmit queue, to-CPU ring and counters.
 */
#include <errno.h>
#include <string.h>

#include "targets/user/user_pvt.h"

struct innet_handoff *innet_handoff_seat(struct innet_user *u, enum innet_handoff_seat seat)
{
	return &u->seats[seat == INNET_HANDOFF_INJECT ? INNET_HANDOFF_INJECT : INNET_HANDOFF_RING];
}

void innet_handoff_begin(struct innet_handoff *h)
{
	innet_worker_set_now(h->w);
	h->w->last_action = INNET_DROP;
	h->w->last_reason = 0;
}

int innet_handoff_send(struct innet_handoff *h, struct innet_cp *cp, const struct innet_out *out,
		       bool is_group, const void *data, uint32_t len)
{
	return innet_worker_send_copy(h->w, cp, out, is_group, data, len, out->src_udp);
}

void innet_handoff_to_cpu(struct innet_handoff *h, struct innet_cp *cp, const struct innet_pkt *pkt)
{
	innet_worker_punt(h->w, cp, pkt);
}

int innet_handoff_timer(struct innet_handoff *h, struct innet_cp *cp, uint32_t timer,
			uint64_t deadline_ns)
{
	return innet_timerq_push(h->w->u, cp, timer, deadline_ns);
}

int innet_handoff_resume(struct innet_handoff *h, struct innet_cp *cp, struct innet_pkt *pkt,
			 const void *state, uint32_t state_len)
{
	if (state_len > INNET_SCRATCH_SIZE)
		return -EINVAL;
	memcpy(h->w->scratch, state, state_len);
	pkt->flags |= INNET_PKT_F_RESUMED;
	innet_worker_resume(h->w, cp->index, pkt);
	return 0;
}

void innet_handoff_verdict(const struct innet_handoff *h, enum innet_action *action, uint16_t *reason)
{
	*action = (enum innet_action)h->w->last_action;
	*reason = h->w->last_reason;
}

void innet_handoff_flush(struct innet_handoff *h, struct innet_inject_result *res)
{
	struct innet_worker *w = h->w;
	if (res == NULL) {
		innet_worker_flush(w);
		return;
	}
	w->inject = res;
	innet_worker_flush(w);
	w->inject = NULL;
	if (!w->sw->started)
		innet_worker_inject_on_cpu(w->u, w, res);
}
