/*
 * worker.c — the data-plane worker: receive a burst, run every packet
 * through its program, carry out the verdicts, send the burst.
 *
 *   epoll ─► recvmmsg(32) ─► [link ingress] ─► handler ─┬─ FORWARD/REFLECT ─┐
 *   (each ready socket,                                 ├─ MULTICAST (n×) ──┼─► tx queue ─► flush
 *    into the next of                                   ├─ RECIRCULATE ─► handler again
 *    INNET_RX_SETS buffer sets)                         ├─ TO_CPU ─► cpu ring ─► control thread
 *                                                       └─ DROP (reason counted)
 *
 *   flush (after the ready sockets are served, or before a buffer set is
 *   reused): every queued send in one io_uring_enter (txring.c), or one
 *   sendmmsg per run of sends on the same socket without io_uring.
 *
 * Why the sends of several bursts and sockets go out together: each datagram
 * sent on loopback wakes its receiver, which then preempts the worker at the
 * next system call boundary; sends issued one socket at a time turn into one
 * context switch per datagram (a load balancer talking to many NAT ports, a
 * DNS server answering one query per wake-up). One submission per flush lets
 * every receiver wake once and find its whole batch.
 *
 * Raw ports (AF_PACKET) take the same path with whole Ethernet frames: a
 * burst from a raw port's packet socket goes to the raw program, and frames
 * it forwards are queued on the egress raw port's packet socket (no address,
 * no GSO) in the same tx queue.
 *
 * Nothing here allocates, locks or logs per packet, except link emulation
 * holding a packet back (a copy; fault injection only) and pcap capture while
 * it is switched on. Counters are this worker's own and summed on request.
 * The same tx machinery serves the timer thread and the control thread, each
 * through its own struct innet_worker (INNET_TIMER_WORKER/CONTROL_WORKER).
 */
#include <errno.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "targets/user/user_pvt.h"

void innet_worker_set_now(struct innet_worker *w)
{
	w->now_ns = innet_now_ns();
}

static inline void sin_set(struct sockaddr_in *sin, uint32_t ip, uint16_t udp)
{
	sin->sin_family = AF_INET;
	sin->sin_port = htons(udp);
	sin->sin_addr.s_addr = htonl(ip);
}

/* ------------------------------------------------------------------------ */
/* Transmit                                                                   */

/* Injection: record the queued sends instead of sending them. */
static void flush_record(struct innet_worker *w)
{
	struct innet_inject_result *res = w->inject;
	for (uint32_t i = 0; i < w->n_tx; i++) {
		if (res->n_out == INNET_INJECT_MAX_OUT) {
			res->n_out_lost++;
			continue;
		}
		struct innet_inject_out *o = &res->out[res->n_out++];
		o->port = w->tx[i].port;
		o->dst.ip = ntohl(w->tx_addr[i].sin_addr.s_addr);
		o->dst.udp = ntohs(w->tx_addr[i].sin_port);
		struct sockaddr_in local;
		socklen_t sl = sizeof(local);
		o->src_udp = !w->tx[i].raw &&
					     getsockname(w->tx[i].fd, (struct sockaddr *)&local, &sl) == 0 ?
				     ntohs(local.sin_port) : 0;
		o->len = (uint32_t)w->tx_iov[i].iov_len;
		memcpy(o->data, w->tx_iov[i].iov_base, o->len);
	}
	w->n_tx = 0;
	w->n_emit = 0;
}

static inline bool same_dst(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

static void count_sent(struct innet_worker *w, uint32_t first, uint32_t n)
{
	for (uint32_t k = first; k < first + n; k++) {
		struct innet_port_stats *ps = &w->portstats[w->tx[k].port];
		INNET_STAT_INC(ps->tx_pkts);
		INNET_STAT_ADD(ps->tx_bytes, w->tx_iov[k].iov_len);
	}
}

/* Build the kernel messages for tx entries [i, j), which share a socket:
 * runs of equal-size datagrams to one destination become one UDP GSO
 * message (the kernel splits it back into the same datagrams, in order, at
 * a fraction of the per-datagram cost); the rest go one per message.
 * Returns the number of messages. */
static uint32_t build_msgs(struct innet_worker *w, uint32_t i, uint32_t j, bool gso, uint32_t m0)
{
	uint32_t m = m0;
	for (uint32_t k = i; k < j; m++) {
		uint32_t e = k + 1;
		size_t len = w->tx_iov[k].iov_len;
		if (gso && len > 0)
			while (e < j && e - k < INNET_GSO_SEGS && w->tx_iov[e].iov_len == len &&
			       (e - k + 1) * len <= INNET_GSO_BYTES && same_dst(&w->tx_addr[e], &w->tx_addr[k]))
				e++;
		struct msghdr *mh = &w->gso_msgs[m].msg_hdr;
		*mh = w->tx_msgs[k].msg_hdr;
		mh->msg_iovlen = e - k;
		if (e - k > 1) {
			mh->msg_control = w->gso_cmsg[m].buf;
			mh->msg_controllen = sizeof(w->gso_cmsg[m].buf);
			struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			uint16_t seg = (uint16_t)len;
			memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		}
		w->gso_first[m] = k;
		w->gso_count[m] = e - k;
		k = e;
	}
	return m - m0;
}

/* A GSO message the kernel refused (a device without segmentation offload
 * says EIO): send its datagrams one by one and stop using GSO on the port. */
static void send_singly(struct innet_worker *w, uint32_t msg)
{
	uint32_t first = w->gso_first[msg], n = w->gso_count[msg];
	atomic_store_explicit(&w->u->gso_off[w->tx[first].port], true, memory_order_relaxed);
	for (uint32_t k = first; k < first + n; k++) {
		if (sendmsg(w->tx[k].fd, &w->tx_msgs[k].msg_hdr, 0) < 0)
			INNET_STAT_INC(w->portstats[w->tx[k].port].tx_errors);
		else
			count_sent(w, k, 1);
	}
}

static inline bool flush_gso(const struct innet_worker *w, uint32_t i)
{
	return !w->sw->conf.no_gso && !w->tx[i].raw &&
	       !atomic_load_explicit(&w->u->gso_off[w->tx[i].port], memory_order_relaxed);
}

/* Flush through the io_uring: every message of every socket in one system
 * call (txring.c says why), in chunks of the ring's size. */
static void flush_ring(struct innet_worker *w)
{
	uint32_t m = 0;
	for (uint32_t i = 0; i < w->n_tx;) {
		uint32_t j = i + 1;
		while (j < w->n_tx && w->tx[j].fd == w->tx[i].fd)
			j++;
		uint32_t k = build_msgs(w, i, j, flush_gso(w, i), m);
		for (uint32_t x = m; x < m + k; x++)
			w->ring_fd[x] = w->tx[i].fd;
		m += k;
		i = j;
	}
	for (uint32_t s = 0; s < m;) {
		uint32_t cap = w->txring != NULL ? innet_txring_size(w->txring) : m - s;
		uint32_t c = m - s < cap ? m - s : cap;
		if (w->txring != NULL) {
			if (innet_txring_send(w->txring, &w->ring_fd[s], &w->gso_msgs[s], c, &w->ring_res[s]) != 0) {
				innet_txring_free(w->txring); /* broken: sendmsg from now on */
				w->txring = NULL;
			}
		} else {
			for (uint32_t x = s; x < s + c; x++)
				w->ring_res[x] = INT32_MIN;
		}
		for (uint32_t x = s; x < s + c; x++) {
			int32_t r = w->ring_res[x];
			if (r == INT32_MIN) /* never submitted */
				r = sendmsg(w->ring_fd[x], &w->gso_msgs[x].msg_hdr, 0) < 0 ? -errno : 0;
			if (r >= 0) {
				count_sent(w, w->gso_first[x], w->gso_count[x]);
				if (w->gso_count[x] > 1)
					INNET_STAT_ADD(w->portstats[w->tx[w->gso_first[x]].port].tx_gso,
						       w->gso_count[x]);
			} else if (w->gso_count[x] > 1) {
				send_singly(w, x);
			} else {
				INNET_STAT_INC(w->portstats[w->tx[w->gso_first[x]].port].tx_errors);
			}
		}
		s += c;
	}
}

void innet_worker_flush(struct innet_worker *w)
{
	if (INNET_UNLIKELY(w->inject != NULL)) {
		flush_record(w);
		return;
	}
	if (w->txring != NULL && w->n_tx > 1) {
		flush_ring(w);
		w->n_tx = 0;
		w->n_emit = 0;
		return;
	}
	struct innet_switch *sw = w->sw;
	uint32_t i = 0;
	while (i < w->n_tx) {
		uint32_t j = i + 1;
		while (j < w->n_tx && w->tx[j].fd == w->tx[i].fd)
			j++;
		/* entries [i, j) share a socket: one sendmmsg (or a few) */
		bool gso = !sw->conf.no_gso && !w->tx[i].raw &&
			   !atomic_load_explicit(&w->u->gso_off[w->tx[i].port], memory_order_relaxed);
		uint32_t m = build_msgs(w, i, j, gso, 0);
		uint32_t s = 0;
		while (s < m) {
			int r = sendmmsg(w->tx[i].fd, &w->gso_msgs[s], m - s, 0);
			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				if (w->gso_count[s] > 1) {
					send_singly(w, s);
				} else {
					INNET_STAT_INC(w->portstats[w->tx[w->gso_first[s]].port].tx_errors);
				}
				s++;
				continue;
			}
			for (int k = 0; k < r; k++) {
				count_sent(w, w->gso_first[s + k], w->gso_count[s + k]);
				if (w->gso_count[s + k] > 1)
					INNET_STAT_ADD(w->portstats[w->tx[w->gso_first[s + k]].port].tx_gso,
						       w->gso_count[s + k]);
			}
			s += (uint32_t)r;
		}
		i = j;
	}
	w->n_tx = 0;
	w->n_emit = 0;
}

/* Queue one send, with no link emulation. dst NULL: a frame on a raw port's
 * packet socket (bound to its interface: no address). */
static void tx_push(struct innet_worker *w, int fd, uint16_t port, const void *data, uint32_t len,
		    const struct sockaddr_in *dst)
{
	if (INNET_UNLIKELY(w->n_tx == INNET_TX_MAX))
		innet_worker_flush(w);
	uint32_t i = w->n_tx++;
	w->tx[i].fd = fd;
	w->tx[i].port = port;
	w->tx[i].raw = dst == NULL;
	w->tx_iov[i].iov_base = (void *)data;
	w->tx_iov[i].iov_len = len;
	struct msghdr *mh = &w->tx_msgs[i].msg_hdr;
	if (INNET_LIKELY(dst != NULL)) {
		w->tx_addr[i] = *dst;
		mh->msg_name = &w->tx_addr[i];
		mh->msg_namelen = sizeof(struct sockaddr_in);
	} else {
		memset(&w->tx_addr[i], 0, sizeof(w->tx_addr[i]));
		mh->msg_name = NULL;
		mh->msg_namelen = 0;
	}
	mh->msg_iov = &w->tx_iov[i];
	mh->msg_iovlen = 1;
	mh->msg_control = NULL;
	mh->msg_controllen = 0;
	mh->msg_flags = 0;
}

/* A buffer for a copied packet, valid until the next flush. When the pool
 * runs out, the queued sends go out and the pool is reused — except the
 * buffer of the packet being processed, if it lives in the pool. */
static uint8_t *emit_buf(struct innet_worker *w)
{
	for (;;) {
		if (w->n_emit == INNET_EMIT_MAX)
			innet_worker_flush(w); /* n_emit = 0 */
		if ((int32_t)w->n_emit != w->pinned_emit)
			break;
		w->n_emit++;
	}
	return w->emit_bufs + (size_t)(w->n_emit++) * INNET_BUF_SIZE + INNET_PKT_HEADROOM;
}

/* Take an emit buffer for a packet about to be processed, and pin it. */
static uint8_t *emit_buf_pinned(struct innet_worker *w)
{
	uint8_t *b = emit_buf(w);
	w->pinned_emit = (int32_t)(w->n_emit - 1);
	return b;
}

static void capture(struct innet_worker *w, uint16_t port, bool egress, const struct sockaddr_in *peer,
		    uint16_t local_udp, const void *data, uint32_t len)
{
	struct sockaddr_in local;
	sin_set(&local, w->sw->ports[port].conf.ip, local_udp);
	if (egress)
		innet_capture_packet(w->sw, port, true, &local, peer, data, len);
	else
		innet_capture_packet(w->sw, port, false, peer, &local, data, len);
}

/* Link emulation for one packet on `port`: draws its fate, counts it, holds
 * delayed copies back (fd < 0: an ingress packet for program `prog`), and
 * returns how many copies to pass on now: 0, 1, or 2 when duplicated. */
static uint32_t link_apply(struct innet_worker *w, uint16_t port, const void *data, uint32_t len, int fd,
			   uint16_t prog, uint16_t udp, const struct sockaddr_in *addr)
{
	struct innet_port_stats *ps = &w->portstats[port];
	uint64_t due = 0;
	uint32_t flags = 0;
	enum innet_link_fate fate = innet_link_decide(&w->sw->ports[port].conf.link, &w->links[port],
						      w->now_ns, &due, &flags);
	uint32_t copies = (flags & INNET_LINK_F_DUP) ? 2 : 1;
	if (flags & INNET_LINK_F_REORDER)
		INNET_STAT_INC(ps->link_reordered);
	if (fate == INNET_LINK_LOSE) {
		INNET_STAT_INC(ps->link_lost);
		return 0;
	}
	if (copies == 2)
		INNET_STAT_INC(ps->link_duplicated);
	if (fate == INNET_LINK_PASS)
		return copies;
	INNET_STAT_INC(ps->link_delayed);
	for (uint32_t c = 0; c < copies; c++)
		if (innet_link_hold(&w->links[port], due, data, len, fd, port, prog, udp, addr) != 0)
			INNET_STAT_INC(ps->link_queue_full);
	return 0;
}

/* Queue a send through the port's egress link emulation. */
static void tx_send(struct innet_worker *w, int fd, uint16_t port, uint16_t local_udp, const void *data,
		    uint32_t len, const struct sockaddr_in *dst)
{
	struct innet_port *pt = &w->sw->ports[port];
	if (INNET_UNLIKELY(atomic_load_explicit(&pt->capture, memory_order_relaxed) != NULL))
		capture(w, port, true, dst, local_udp, data, len);
	const struct innet_link_conf *lc = &pt->conf.link;
	if (INNET_LIKELY(!lc->on_egress || !innet_link_active(lc) || w->inject != NULL)) {
		tx_push(w, fd, port, data, len, dst);
		return;
	}
	for (uint32_t c = link_apply(w, port, data, len, fd, 0, local_udp, dst); c > 0; c--)
		tx_push(w, fd, port, data, len, dst);
}

/* The slot of local UDP port udp in cp's list (O(1): u->udp_slot), or 0
 * (the first) if cp does not bind it. */
static inline uint32_t src_slot(const struct innet_user *u, const struct innet_cp *cp, uint16_t udp)
{
	return u->sw->udp_to_prog[udp] == cp->index + 1 ? u->udp_slot[udp] : 0;
}

/* What send_out is given: a UDP payload, a raw frame, or (emit, control-plane
 * sends) whatever the egress port carries. */
enum send_kind {
	SEND_DATAGRAM,
	SEND_FRAME,
	SEND_ANY,
};

/* A frame out of raw port `port`. */
static void send_frame(struct innet_worker *w, uint16_t port, const void *data, uint32_t len)
{
	struct innet_port *pt = &w->sw->ports[port];
	if (INNET_UNLIKELY(atomic_load_explicit(&pt->capture, memory_order_relaxed) != NULL)) {
		struct sockaddr_in none = { .sin_family = AF_INET };
		innet_capture_packet(w->sw, port, true, &none, &none, data, len);
	}
	tx_push(w, w->rawfd[port], port, data, len, NULL);
}

/* Send data out of `port` for program cp. Returns 0 or a drop reason. */
static unsigned send_out(struct innet_worker *w, struct innet_cp *cp, uint16_t port, uint32_t ip,
			 uint16_t udp, uint16_t src_udp, uint16_t dst_udp_default, const void *data,
			 uint32_t len, enum send_kind kind)
{
	struct innet_switch *sw = w->sw;
	if (INNET_UNLIKELY(port >= sw->n_ports))
		return INNET_DROP_BAD_PORT;
	const struct innet_port_conf *pc = &sw->ports[port].conf;
	if (INNET_UNLIKELY(pc->iface[0] != '\0')) {
		if (kind == SEND_DATAGRAM)
			return INNET_DROP_DATAGRAM_TO_RAW_PORT;
		/* (a frame shorter than a MAC header leaves no device; an
		 * injection's outputs are recorded, as a test port's: the
		 * injection worker's, whether it runs the packet or carries out
		 * an XDP hand-off, and the control worker's while it runs an
		 * injection's on_cpu) */
		if (INNET_UNLIKELY(len < INNET_FRAME_MIN) && w->inject == NULL && w != INNET_INJECT_WORKER(w->u))
			return INNET_DROP_SHORT_FRAME;
		send_frame(w, port, data, len);
		return 0;
	}
	if (INNET_UNLIKELY(kind == SEND_FRAME))
		return INNET_DROP_FRAME_TO_UDP_PORT;
	if (INNET_UNLIKELY(cp->n_udp == 0))
		return INNET_DROP_NO_UDP_SOCKET;
	if (ip == 0)
		ip = pc->peer_ip;
	if (INNET_UNLIKELY(ip == 0))
		return INNET_DROP_NO_PEER;
	if (udp == 0)
		udp = pc->peer_udp ? pc->peer_udp : dst_udp_default;
	uint32_t slot = src_slot(w->u, cp, src_udp ? src_udp : dst_udp_default);
	int fd = w->txfd[(size_t)port * w->u->udp_stride + w->u->txfd_base[cp->index] + slot];
	struct sockaddr_in dst;
	sin_set(&dst, ip, udp);
	tx_send(w, fd, port, cp->udp[slot], data, len, &dst);
	return 0;
}

/* Copy the members of a group consistently; returns the count. */
static uint32_t group_snapshot(struct innet_cp *cp, uint16_t group, struct innet_member *m)
{
	struct innet_group *g = &cp->groups[group];
	for (uint32_t tries = 0; tries < 100000; tries++) {
		uint32_t seq = atomic_load_explicit(&g->seq, memory_order_acquire);
		if (seq & 1) {
			innet_cpu_relax();
			continue;
		}
		uint32_t n = __atomic_load_n(&g->n, __ATOMIC_ACQUIRE);
		if (n > INNET_MAX_GROUP_MEMBERS)
			n = INNET_MAX_GROUP_MEMBERS;
		innet_shared_load(m, g->m, n * (uint32_t)sizeof(*m));
		if (atomic_load_explicit(&g->seq, memory_order_relaxed) == seq)
			return n;
	}
	return 0;
}

static unsigned send_group(struct innet_worker *w, struct innet_cp *cp, uint16_t group, uint16_t src_udp,
			   uint16_t dst_udp_default, const void *data, uint32_t len, uint64_t *sent,
			   enum send_kind kind)
{
	if (INNET_UNLIKELY(group >= cp->n_groups))
		return INNET_DROP_BAD_GROUP;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	uint32_t n = group_snapshot(cp, group, m);
	if (INNET_UNLIKELY(n == 0))
		return INNET_DROP_BAD_GROUP;
	unsigned first_err = 0;
	for (uint32_t i = 0; i < n; i++) {
		unsigned r = send_out(w, cp, m[i].port, m[i].ip, m[i].udp, src_udp, dst_udp_default, data,
				      len, kind);
		if (r == 0)
			(*sent)++;
		else if (first_err == 0)
			first_err = r;
	}
	return *sent ? 0 : first_err;
}

int innet_worker_send_copy(struct innet_worker *w, struct innet_cp *cp, const struct innet_out *out,
			   bool is_group, const void *data, uint32_t len, uint16_t src_udp)
{
	if (len > INNET_PKT_MAX)
		return -EMSGSIZE;
	uint8_t *buf = emit_buf(w);
	memcpy(buf, data, len);
	uint64_t sent = 0;
	uint16_t def_udp = cp->n_udp ? cp->udp[0] : 0;
	unsigned r = is_group ? send_group(w, cp, out->group, src_udp, def_udp, buf, len, &sent, SEND_ANY)
			      : send_out(w, cp, out->port, out->ip, out->udp, src_udp, def_udp, buf, len,
					 SEND_ANY);
	if (!is_group && r == 0)
		sent = 1;
	INNET_STAT_ADD(w->pstats[cp->index].tx_pkts, sent);
	if (r != 0) {
		INNET_STAT_INC(w->pstats[cp->index].drops[r]);
		return -EINVAL;
	}
	return 0;
}

int innet_emit(struct innet_ctx *ctx, const struct innet_out *out, bool is_group, const void *data,
	       uint32_t len)
{
	if (INNET_UNLIKELY(ctx->model != INNET_MODEL_TRIO)) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return -1;
	}
	if (INNET_UNLIKELY(len > INNET_PKT_MAX)) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	ctx->use.emitted++;
	struct innet_worker *w = ctx->worker;
	INNET_STAT_INC(w->pstats[ctx->prog->index].emitted);
	return innet_worker_send_copy(w, ctx->prog, out, is_group, data, len, out->src_udp) == 0 ? 0 : -1;
}

/* The worker's scratch memory: its handlers and timer callbacks run one at a
 * time, each until it returns (innet/dp_user.h). */
void *innet_scratch(struct innet_ctx *ctx)
{
	return ctx->worker->scratch;
}

/* ------------------------------------------------------------------------ */
/* The pipeline                                                               */

void innet_worker_punt(struct innet_worker *w, struct innet_cp *cp, const struct innet_pkt *pkt)
{
	struct innet_cpu_ring *r = &w->cpu;
	uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (head - tail >= INNET_CPU_RING || r->slots == NULL) {
		INNET_STAT_INC(w->pstats[cp->index].drops[INNET_DROP_CPU_QUEUE_FULL]);
		INNET_STAT_INC(w->pstats[cp->index].actions[INNET_DROP]);
		return;
	}
	struct innet_cpu_slot *s = &r->slots[head % INNET_CPU_RING];
	s->pkt = *pkt;
	s->pkt.buf_start = s->buf;
	s->pkt.buf_end = s->buf + INNET_BUF_SIZE;
	s->pkt.data = s->buf + INNET_PKT_HEADROOM;
	memcpy(s->pkt.data, pkt->data, pkt->len);
	s->prog = (uint16_t)cp->index;
	INNET_STAT_INC(w->pstats[cp->index].actions[INNET_TO_CPU]); /* before the control thread can see it */
	atomic_store_explicit(&r->head, head + 1, memory_order_release);
	uint64_t one = 1;
	if (write(w->sw->cpu_wake_fd, &one, sizeof(one)) < 0) {
		/* the eventfd counter is saturated: the control thread is awake anyway */
	}
}

static inline void account(struct innet_prog_stats *ps, const struct innet_usage *u)
{
	INNET_STAT_INC(ps->passes);
	INNET_STAT_ADD(ps->reg_ops, u->reg_ops);
	INNET_STAT_ADD(ps->table_ops, u->table_ops);
	INNET_STAT_ADD(ps->alu_ops, u->alu_ops);
	INNET_STAT_MAX(ps->max_reg_ops, u->reg_ops);
	INNET_STAT_MAX(ps->max_table_ops, u->table_ops);
	INNET_STAT_MAX(ps->max_alu_ops, u->alu_ops);
}

static inline unsigned valid_reason(const struct innet_cp *cp, unsigned reason)
{
	if (reason == 0)
		return INNET_DROP_PROGRAM_VERDICT;
	if (reason < INNET_DROP_RUNTIME_COUNT)
		return reason;
	if (reason >= INNET_DROP_PROGRAM && reason < INNET_DROP_PROGRAM + cp->program->n_drop_reasons)
		return reason;
	return INNET_DROP_BAD_VERDICT;
}

static inline void drop(struct innet_worker *w, struct innet_cp *cp, unsigned reason)
{
	struct innet_prog_stats *ps = &w->pstats[cp->index];
	INNET_STAT_INC(ps->actions[INNET_DROP]);
	INNET_STAT_INC(ps->drops[reason]);
}

/* A SERIAL program on the XDP target: its handler also runs in eBPF, on any
 * CPU, under the same lock word (src/targets/xdp/engine.bpf.h, "SERIAL programs").
 * An eBPF holder is never preempted and holds it for one handler run: wait. */
static void serial_lock(_Atomic uint32_t *lock)
{
	for (uint32_t spins = 0;; spins++) {
		uint32_t free_ = 0;
		if (atomic_load_explicit(lock, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(lock, &free_, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
		if (spins < 4096)
			innet_cpu_relax();
		else
			sched_yield();
	}
}

/* Run pkt through program `prog` (and on, if it recirculates) and carry out
 * the verdict. pkt->data stays valid until the next flush. */
static void process(struct innet_worker *w, uint32_t prog, struct innet_pkt *pkt)
{
	struct innet_switch *sw = w->sw;
	struct innet_cp *cp = &sw->progs[prog];
	struct innet_prog_stats *ps = &w->pstats[prog];
	if (!(pkt->flags & INNET_PKT_F_RESUMED)) {   /* (a hand-off was received in XDP) */
		INNET_STAT_INC(ps->rx_pkts);
		INNET_STAT_ADD(ps->rx_bytes, pkt->len);
	}
	uint32_t emitted = 0;
	enum innet_action act;
	for (;;) {
		struct innet_ctx *ctx = &w->ctx[cp->index];
		ctx->use = (struct innet_usage){ 0 };
		ctx->fault = 0;
		ctx->now_ns = w->now_ns;
		memset(&pkt->out, 0, sizeof(pkt->out));
		if (INNET_UNLIKELY(cp->serial_lock != NULL)) {
			serial_lock(cp->serial_lock);
			act = cp->handle(ctx, pkt);
			atomic_store_explicit(cp->serial_lock, 0, memory_order_release);
		} else {
			act = cp->handle(ctx, pkt);
		}
		account(&w->pstats[cp->index], &ctx->use);
		emitted += ctx->use.emitted;
		if (INNET_UNLIKELY(ctx->fault != 0)) {
			act = INNET_DROP;
			pkt->out.reason = ctx->fault;
		}
		if (INNET_LIKELY(act != INNET_RECIRCULATE))
			break;
		if (pkt->recirc >= INNET_MAX_RECIRC) {
			act = INNET_DROP;
			pkt->out.reason = INNET_DROP_RECIRC_BUDGET;
			break;
		}
		INNET_STAT_INC(w->pstats[cp->index].recirculations);
		pkt->recirc++;
		uint32_t next = (pkt->flags & INNET_PKT_F_RAW) ? (uint32_t)(sw->raw_prog + 1)
							       : sw->udp_to_prog[pkt->dst_udp];
		if (next == 0) {
			act = INNET_DROP;
			pkt->out.reason = INNET_DROP_NO_PROGRAM;
			break;
		}
		cp = &sw->progs[next - 1];
	}
	ps = &w->pstats[cp->index];
	INNET_STAT_MAX(ps->max_recirc, pkt->recirc);
	INNET_STAT_MAX(ps->max_emitted, emitted);

	unsigned r = 0;
	uint64_t sent = 0;
	enum send_kind kind = (pkt->flags & INNET_PKT_F_RAW) ? SEND_FRAME : SEND_DATAGRAM;
	w->last_action = (uint8_t)act;
	w->last_reason = 0;
	switch (act) {
	case INNET_DROP:
		w->last_reason = (uint16_t)valid_reason(cp, pkt->out.reason);
		drop(w, cp, w->last_reason);
		return;
	case INNET_FORWARD:
		r = send_out(w, cp, pkt->out.port, pkt->out.ip, pkt->out.udp, pkt->out.src_udp,
			     pkt->dst_udp, pkt->data, pkt->len, kind);
		sent = (r == 0);
		break;
	case INNET_REFLECT:
		r = send_out(w, cp, pkt->in_port, pkt->src.ip, pkt->src.udp, pkt->out.src_udp,
			     pkt->dst_udp, pkt->data, pkt->len, kind);
		sent = (r == 0);
		break;
	case INNET_MULTICAST:
		r = send_group(w, cp, pkt->out.group, pkt->out.src_udp, pkt->dst_udp, pkt->data, pkt->len,
			       &sent, kind);
		break;
	case INNET_TO_CPU:
		innet_worker_punt(w, cp, pkt);
		return;
	case INNET_CONSUMED:
		INNET_STAT_INC(ps->actions[INNET_CONSUMED]);
		return;
	default:
		r = INNET_DROP_BAD_VERDICT;
		break;
	}
	if (r != 0) {
		w->last_action = INNET_DROP;
		w->last_reason = (uint16_t)r;
		drop(w, cp, r);
		return;
	}
	INNET_STAT_INC(ps->actions[act]);
	INNET_STAT_ADD(ps->tx_pkts, sent);
}


void innet_worker_resume(struct innet_worker *w, uint32_t prog, struct innet_pkt *pkt)
{
	process(w, prog, pkt);
}

/* Hand one received datagram (already in a stable buffer) to its program. */
static void deliver(struct innet_worker *w, uint32_t prog, uint16_t port, uint16_t dst_udp, uint8_t *data,
		    uint32_t len, const struct sockaddr_in *src, uint8_t flags)
{
	struct innet_pkt pkt;
	pkt.data = data;
	pkt.len = len;
	pkt.in_port = port;
	pkt.dst_udp = dst_udp;
	pkt.src.ip = ntohl(src->sin_addr.s_addr);
	pkt.src.udp = ntohs(src->sin_port);
	pkt.recirc = 0;
	pkt.flags = flags;
	pkt.meta16 = 0;
	memset(pkt.meta32, 0, sizeof(pkt.meta32));
	pkt.buf_start = data - INNET_PKT_HEADROOM;
	pkt.buf_end = data + INNET_PKT_MAX;
	process(w, prog, &pkt);
}

static void rx_one(struct innet_worker *w, const struct innet_sock *s, uint8_t *data, uint32_t len,
		   const struct sockaddr_in *src)
{
	struct innet_port *pt = &w->sw->ports[s->port];
	if (INNET_UNLIKELY(atomic_load_explicit(&pt->capture, memory_order_relaxed) != NULL))
		capture(w, s->port, false, src, s->udp, data, len);
	const struct innet_link_conf *lc = &pt->conf.link;
	if (INNET_LIKELY(!lc->on_ingress || !innet_link_active(lc))) {
		deliver(w, s->prog, s->port, s->udp, data, len, src, 0);
		return;
	}
	uint32_t copies = link_apply(w, s->port, data, len, -1, s->prog, s->udp, src);
	if (copies == 2) {
		uint8_t *dup = emit_buf_pinned(w);
		memcpy(dup, data, len);
		deliver(w, s->prog, s->port, s->udp, dup, len, src, INNET_PKT_F_EMULATED);
		w->pinned_emit = -1;
	}
	if (copies >= 1)
		deliver(w, s->prog, s->port, s->udp, data, len, src, 0);
}

/* Point the receive vectors at the next set of rx buffers. The sends queued
 * by earlier bursts may still point into the other sets; before a set is
 * used again, they are flushed. */
static void rx_set_next(struct innet_worker *w)
{
	if (w->rx_set >= INNET_RX_SETS) {
		innet_worker_flush(w);
		w->rx_set = 0;
	}
	uint8_t *base = w->rx_bufs + (size_t)w->rx_set++ * INNET_BURST * INNET_BUF_SIZE;
	for (uint32_t i = 0; i < INNET_BURST; i++)
		w->rx_iov[i].iov_base = base + (size_t)i * INNET_BUF_SIZE + INNET_PKT_HEADROOM;
}

/* The sends of every burst received so far go out; all rx sets are free. */
static void rx_flush(struct innet_worker *w)
{
	innet_worker_flush(w);
	w->rx_set = 0;
}

/* One recvmmsg of up to a burst from fd into the next receive-buffer set,
 * keeping up to namelen bytes of each sender's address. */
static int rx_recv(struct innet_worker *w, int fd, socklen_t namelen)
{
	rx_set_next(w);
	for (uint32_t i = 0; i < INNET_BURST; i++) {
		w->rx_msgs[i].msg_hdr.msg_namelen = namelen;
		w->rx_msgs[i].msg_hdr.msg_flags = 0;
		w->rx_iov[i].iov_len = INNET_PKT_MAX;
	}
	return recvmmsg(fd, w->rx_msgs, INNET_BURST, MSG_DONTWAIT, NULL);
}

/* Receive and process one burst of frames from a raw port's packet socket. */
static int rx_burst_raw(struct innet_worker *w, const struct innet_sock *s)
{
	int n = rx_recv(w, s->fd, 0); /* the sockaddr_ll is not needed */
	if (n <= 0)
		return 0;
	innet_worker_set_now(w);
	struct innet_port_stats *ps = &w->portstats[s->port];
	struct innet_port *pt = &w->sw->ports[s->port];
	static const struct sockaddr_in none = { .sin_family = AF_INET };
	for (int i = 0; i < n; i++) {
		uint32_t len = w->rx_msgs[i].msg_len;
		uint8_t *data = w->rx_iov[i].iov_base;
		INNET_STAT_INC(ps->rx_pkts);
		INNET_STAT_ADD(ps->rx_bytes, len);
		if (INNET_UNLIKELY(w->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
			INNET_STAT_INC(w->pstats[s->prog].rx_pkts);
			drop(w, &w->sw->progs[s->prog], INNET_DROP_TRUNCATED);
			continue;
		}
		if (INNET_UNLIKELY(atomic_load_explicit(&pt->capture, memory_order_relaxed) != NULL))
			innet_capture_packet(w->sw, s->port, false, &none, &none, data, len);
		deliver(w, s->prog, s->port, 0, data, len, &none, INNET_PKT_F_RAW);
	}
	return n;
}

/* Receive and process one burst from s; returns the number of datagrams. */
static int rx_burst(struct innet_worker *w, const struct innet_sock *s)
{
	if (INNET_UNLIKELY(s->raw))
		return rx_burst_raw(w, s);
	int n = rx_recv(w, s->fd, sizeof(struct sockaddr_in));
	if (n <= 0)
		return 0;
	innet_worker_set_now(w);
	struct innet_port_stats *ps = &w->portstats[s->port];
	for (int i = 0; i < n; i++) {
		uint32_t len = w->rx_msgs[i].msg_len;
		INNET_STAT_INC(ps->rx_pkts);
		INNET_STAT_ADD(ps->rx_bytes, len);
		if (INNET_UNLIKELY(w->rx_msgs[i].msg_hdr.msg_flags & MSG_TRUNC)) {
			INNET_STAT_INC(w->pstats[s->prog].rx_pkts);
			drop(w, &w->sw->progs[s->prog], INNET_DROP_TRUNCATED);
			continue;
		}
		rx_one(w, s, w->rx_iov[i].iov_base, len, &w->rx_addr[i]);
	}
	return n;
}

/* Release held packets that are due. Returns the earliest remaining due time. */
static uint64_t release_held(struct innet_worker *w)
{
	struct innet_switch *sw = w->sw;
	uint64_t next = UINT64_MAX;
	for (uint32_t p = 0; p < sw->n_ports; p++) {
		struct innet_link_state *ls = &w->links[p];
		if (ls->n_held == 0)
			continue;
		struct innet_held *h;
		while ((h = innet_link_pop_due(ls, w->now_ns)) != NULL) {
			if (h->fd < 0) {
				uint8_t *buf = emit_buf_pinned(w);
				memcpy(buf, h->data, h->len);
				deliver(w, h->prog, h->port, h->dst_udp, buf, h->len, &h->addr,
					INNET_PKT_F_EMULATED);
				w->pinned_emit = -1;
			} else {
				uint8_t *buf = emit_buf(w);
				memcpy(buf, h->data, h->len);
				tx_push(w, h->fd, h->port, buf, h->len, &h->addr);
			}
			free(h);
		}
		uint64_t d = innet_link_next_due(ls);
		if (d < next)
			next = d;
	}
	innet_worker_flush(w);
	return next;
}

void *innet_worker_main(void *arg)
{
	struct innet_worker *w = arg;
	struct epoll_event ev[64];
	char name[16];
	snprintf(name, sizeof(name), "innet-w%u", w->id);
	pthread_setname_np(pthread_self(), name);

	while (!atomic_load_explicit(&w->u->stopping, memory_order_relaxed)) {
		innet_worker_set_now(w);
		uint64_t next = release_held(w);
		struct timespec ts, *tsp = NULL;
		if (next != UINT64_MAX) {
			uint64_t now = innet_now_ns();
			uint64_t wait = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000000ull);
			ts.tv_nsec = (long)(wait % 1000000000ull);
			tsp = &ts;
		}
		int n = epoll_pwait2(w->epfd, ev, 64, tsp, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("innet: epoll_pwait2");
			break;
		}
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == NULL) { /* wake_fd */
				uint64_t v;
				if (read(w->wake_fd, &v, sizeof(v)) < 0) {
					/* nothing to read: a spurious wake-up */
				}
				continue;
			}
			const struct innet_sock *s = ev[i].data.ptr;
			/* Drain a few bursts while the socket has data, then
			 * give the other sockets their turn. */
			for (int b = 0; b < 8; b++)
				if (rx_burst(w, s) < (int)INNET_BURST)
					break;
		}
		/* Everything the ready sockets held has been processed: send. */
		rx_flush(w);
	}
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                      */

int innet_worker_init(struct innet_user *u, struct innet_worker *w, uint32_t id)
{
	struct innet_switch *sw = u->sw;
	w->sw = sw;
	w->u = u;
	w->id = id;
	w->epfd = -1;
	w->wake_fd = -1;
	w->pinned_emit = -1;
	w->rx_set = 0;
	w->ctx = calloc(sw->n_progs ? sw->n_progs : 1, sizeof(*w->ctx));
	w->pstats = aligned_alloc(INNET_CACHELINE,
				  ((sizeof(*w->pstats) * (sw->n_progs ? sw->n_progs : 1)) + 63) & ~(size_t)63);
	w->portstats = calloc(sw->n_ports ? sw->n_ports : 1, sizeof(*w->portstats));
	w->links = calloc(sw->n_ports ? sw->n_ports : 1, sizeof(*w->links));
	size_t n_txfd = (size_t)sw->n_ports * u->udp_stride;
	w->txfd = malloc((n_txfd ? n_txfd : 1) * sizeof(int));
	w->rawfd = malloc((sw->n_ports ? sw->n_ports : 1) * sizeof(int));
	w->rx_bufs = aligned_alloc(INNET_CACHELINE, (size_t)INNET_RX_SETS * INNET_BURST * INNET_BUF_SIZE);
	w->emit_bufs = aligned_alloc(INNET_CACHELINE, (size_t)INNET_EMIT_MAX * INNET_BUF_SIZE);
	w->cpu.slots = calloc(INNET_CPU_RING, sizeof(*w->cpu.slots));
	w->scratch = aligned_alloc(INNET_CACHELINE, INNET_SCRATCH_SIZE);
	if (!w->ctx || !w->pstats || !w->portstats || !w->links || !w->txfd || !w->rawfd ||
	    !w->rx_bufs || !w->emit_bufs || !w->cpu.slots || !w->scratch)
		return -ENOMEM;
	for (size_t i = 0; i < n_txfd; i++)
		w->txfd[i] = -1;     /* filled in by the switch once its sockets are bound */
	for (uint32_t p = 0; p < sw->n_ports; p++)
		w->rawfd[p] = -1;
	memset(w->pstats, 0, sizeof(*w->pstats) * sw->n_progs);
	for (uint32_t i = 0; i < INNET_BURST; i++) {
		w->rx_iov[i].iov_base = w->rx_bufs + (size_t)i * INNET_BUF_SIZE + INNET_PKT_HEADROOM;
		w->rx_iov[i].iov_len = INNET_PKT_MAX;
		struct msghdr *mh = &w->rx_msgs[i].msg_hdr;
		mh->msg_name = &w->rx_addr[i];
		mh->msg_namelen = sizeof(struct sockaddr_in);
		mh->msg_iov = &w->rx_iov[i];
		mh->msg_iovlen = 1;
	}
	for (uint32_t p = 0; p < sw->n_ports; p++) {
		uint64_t seed = sw->ports[p].conf.link.seed;
		if (seed == 0)
			seed = sw->conf.seed * 0x9E3779B97F4A7C15ull + p + 1;
		seed ^= (uint64_t)id * 0xBF58476D1CE4E5B9ull;
		w->links[p].rng = seed ? seed : 0x2545F4914F6CDD1Dull;
	}
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		struct innet_cp *cp = &sw->progs[i];
		struct innet_ctx *c = &w->ctx[i];
		c->regs = cp->regs;
		c->tables = cp->tables;
		c->conf = cp->conf;
		c->n_regs = (uint16_t)cp->n_regs;
		c->n_tables = (uint16_t)cp->n_tables;
		c->n_groups = (uint16_t)cp->n_groups;
		c->n_ports = (uint16_t)sw->n_ports;
		c->model = (uint8_t)cp->program->model;
		c->reg_ops_budget = cp->reg_ops_budget;
		c->prog = cp;
		c->worker = w;
		c->rng = (sw->conf.seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)id << 32 | i) ^ 0x5DEECE66Dull;
		if (c->rng == 0)
			c->rng = 1;
	}
	w->txring = innet_txring_new(256);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->epfd < 0 || w->wake_fd < 0)
		return -errno;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0)
		return -errno;
	return 0;
}

void innet_worker_fini(struct innet_worker *w)
{
	if (w->sw != NULL)
		for (uint32_t p = 0; p < w->sw->n_ports && w->links; p++)
			innet_link_state_fini(&w->links[p]);
	innet_txring_free(w->txring);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	free(w->ctx);
	free(w->pstats);
	free(w->portstats);
	free(w->links);
	free(w->txfd);
	free(w->rawfd);
	free(w->rx_bufs);
	free(w->emit_bufs);
	free(w->cpu.slots);
	free(w->scratch);
	memset(w, 0, sizeof(*w));
	w->epfd = w->wake_fd = -1;
}

/* ------------------------------------------------------------------------ */
/* Packets handed to the control plane                                        */

/* Run on_cpu for every packet waiting in worker w's cpu ring. */
void innet_worker_cpu_drain(struct innet_user *u, struct innet_worker *w)
{
	struct innet_switch *sw = u->sw;
	struct innet_worker *cw = INNET_CONTROL_WORKER(u);
	struct innet_cpu_ring *r = &w->cpu;
	uint32_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	while (tail != head) {
		struct innet_cpu_slot *s = &r->slots[tail % INNET_CPU_RING];
		struct innet_cp *cp = &sw->progs[s->prog];
		INNET_STAT_INC(cw->pstats[cp->index].cpu_pkts); /* counted first: on_cpu may answer at once */
		if (cp->program->on_cpu != NULL)
			cp->program->on_cpu(cp, cp->priv, &s->pkt);
		tail++;
		atomic_store_explicit(&r->tail, tail, memory_order_release);
	}
}

/* An injection on a switch not started: no control thread will run on_cpu
 * for what the packet handed over (TO_CPU), so run it here, as the control
 * thread would, collecting its sends (innet_cp_send: the control worker's
 * queue) and the drop reason it counts in res. */
void innet_worker_inject_on_cpu(struct innet_user *u, struct innet_worker *w,
				struct innet_inject_result *res)
{
	struct innet_cpu_ring *r = &w->cpu;
	if (atomic_load_explicit(&r->head, memory_order_acquire) ==
	    atomic_load_explicit(&r->tail, memory_order_relaxed))
		return;
	struct innet_worker *cw = INNET_CONTROL_WORKER(u);
	pthread_mutex_lock(&u->cp_send_lock);
	cw->inject = res;
	innet_worker_cpu_drain(u, w);
	cw->inject = NULL;
	pthread_mutex_unlock(&u->cp_send_lock);
}

/* ------------------------------------------------------------------------ */
/* Injection (golden-packet tests, fuzzing, dry runs)                         */

/* The target's inject (innet_switch_inject checked the arguments, took
 * the injection lock and zeroed res's outputs). */
int innet_worker_inject(struct innet_user *u, uint16_t port, uint16_t dst_udp,
			const struct innet_addr *src, const void *data, uint32_t len,
			struct innet_inject_result *res)
{
	struct innet_switch *sw = u->sw;
	bool raw = sw->ports[port].conf.iface[0] != '\0';
	struct innet_worker *w = INNET_INJECT_WORKER(u);
	innet_worker_set_now(w);
	w->inject = res;
	uint8_t *buf = emit_buf_pinned(w);
	memcpy(buf, data, len);
	struct sockaddr_in sin;
	if (raw)
		sin_set(&sin, 0, 0);
	else
		sin_set(&sin, src->ip, src->udp);
	w->last_action = INNET_DROP;
	w->last_reason = 0;
	if (raw)
		deliver(w, (uint32_t)sw->raw_prog, port, 0, buf, len, &sin, INNET_PKT_F_RAW);
	else
		deliver(w, sw->udp_to_prog[dst_udp] - 1u, port, dst_udp, buf, len, &sin, 0);
	w->pinned_emit = -1;
	innet_worker_flush(w);
	res->action = (enum innet_action)w->last_action;
	res->drop_reason = w->last_reason;
	w->inject = NULL;
	if (!sw->started)
		innet_worker_inject_on_cpu(u, w, res);
	return 0;
}
