/*
 * leader.c — the Paxos coordinator role as a host process: the backup that
 * takes over when the coordinator switch dies (failover), and the
 * coordinator of the host-based baseline. innet/consensus.h has the
 * contract, docs/consensus.md ("Coordinator failover") the argument.
 *
 *   phase     what it sends                         leaves when
 *   IDLE      nothing (a backup waiting)            a REQUEST arrives / takeover()
 *   RANGE     1A(b, lo, RANGE) to each acceptor     a majority promised b for all
 *             (REQUESTs are held, ordered first when serving starts)
 *   SERVING   REQUEST -> 2A(b, next++, v);          (stays; NACK(ballot) in RANGE
 *             meanwhile recovery of [lo, hi):        restarts at a higher ballot)
 *             1A(b, i) -> majority of 1Bs -> 2A(b, i, highest vote | no-op)
 *
 * Why serving may start before recovery ends: after a majority Q promised b
 * for every instance, no member of Q votes below b any more, and none of
 * them had voted at or above hi (= 1 + the highest instance any 2A named at
 * any of them), so nothing can be chosen at an instance >= hi in a ballot
 * below b: handing out hi, hi + 1, ... at ballot b is safe at once.
 * Instances in [lo, hi) are decided only by phase 2 with the highest-ballot
 * vote found in a majority of 1Bs — the Paxos rule — so a value once chosen
 * is proposed again, never replaced.
 *
 * Recovery keeps at most REC_WINDOW instances asked at a time (so as not to
 * flood the acceptors' sockets) and resends 1As every retry_ms. An instance
 * that answers NACK(trimmed) is decided (delivered everywhere); one that
 * answers NACK(ballot) is being decided by someone with a higher ballot (a
 * learner's gap recovery): it is left to them.
 *
 * I/O, batched as the switch runtime's workers batch (the baseline of
 * bench/consensus.sh must not pay a system call per datagram when innet
 * does not):
 *
 *   recvmmsg(RX_BURST) ─► handle each ─► sends queued in `out` ─► sendmmsg
 *
 * A 2A made from a REQUEST is sent from the receive buffer it arrived in
 * (rewritten in place, copied nowhere: one queued datagram per acceptor
 * pointing at it); messages built on the stack (1As, recovery 2As) are
 * copied into one of OUT_MSGS buffers. The queue is flushed after every
 * receive burst, after the timers, and when it is full — never later than
 * the receive buffers it points into are reused.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "innet/consensus.h"
#include "consensus/wire.h"

#define REC_WINDOW  256u
#define REC_MAX     (1u << 20)   /* instances [lo, hi) recovered at most */
#define HELD_MAX    1024u        /* REQUESTs held while phase 1 runs */
#define RX_BURST    32u          /* datagrams per recvmmsg */
#define OUT_MSGS    32u          /* messages built here (1A, recovery 2A) queued at most */
#define OUT_SENDS   512u         /* datagrams queued at most (a message to each acceptor) */

enum lphase { L_IDLE, L_RANGE, L_SERVING };
enum rstate { R_TODO = 0, R_ASKED, R_DONE };

struct lrec {
	uint64_t promises;   /* acceptors that sent a 1B at our ballot */
	uint64_t sent_ns;
	uint32_t vballot;    /* highest vote among the 1Bs */
	uint64_t req;
	uint16_t vlen;
	uint8_t state;       /* enum rstate */
	uint8_t *value;      /* malloc'ed when a vote arrives */
};

struct innet_paxos_leader {
	struct innet_paxos_leader_conf c;
	int fd;
	uint32_t majority;
	enum lphase phase;
	uint32_t round;          /* highest round seen */
	uint32_t ballot;
	uint64_t lo, hi, next;
	uint64_t range_promises;
	uint64_t range_ns;
	struct lrec *rec;        /* [lo, lo + n_rec) */
	uint64_t n_rec;
	uint64_t first_open;     /* lowest index not done */
	uint64_t scan;           /* next index to ask */
	struct paxos_msg *held[HELD_MAX]; /* REQUESTs that came before serving (malloc'ed) */
	uint32_t n_held;
	struct innet_paxos_leader_stats st;
	/* receive burst */
	struct paxos_msg *rx;    /* RX_BURST buffers */
	struct mmsghdr rx_hdr[RX_BURST];
	struct iovec rx_iov[RX_BURST];
	/* send queue: datagram k is iov[k] (into rx[] or msgs[]) to acceptor to[k] */
	struct paxos_msg *msgs;  /* OUT_MSGS copies of built messages */
	uint32_t n_msgs;
	struct mmsghdr out[OUT_SENDS];
	struct iovec out_iov[OUT_SENDS];
	uint32_t n_out;
	struct sockaddr_in *acc_sa; /* each acceptor's address, for msg_name */
};

static void hdr_init(struct paxos_msg *m, uint8_t type, uint32_t ballot, uint64_t inst)
{
	memset(m, 0, PAXOS_HDR_LEN);
	m->h.magic = INNET_MAGIC;
	m->h.version = INNET_VERSION;
	m->h.service = INNET_SVC_PAXOS;
	m->p.type = type;
	m->p.ballot = htonl(ballot);
	m->p.instance = htobe64(inst);
}

/* Send every queued datagram (sendmmsg until done or an error: a datagram
 * the kernel refuses is lost, as a dropped packet would be — every message
 * of the protocol is resent). Forgets the built messages. */
static void out_flush(struct innet_paxos_leader *l)
{
	for (uint32_t k = 0; k < l->n_out;) {
		int n = sendmmsg(l->fd, l->out + k, l->n_out - k, 0);
		l->st.tx_calls++;
		if (n <= 0) {
			k++; /* skip the datagram that failed (ENOBUFS, ...) */
			continue;
		}
		k += (uint32_t)n;
		l->st.tx_datagrams += (uint32_t)n;
	}
	l->n_out = 0;
	l->n_msgs = 0;
}

/* Queue buf to every acceptor not in skip. buf must stay valid until the
 * next out_flush (a receive buffer does: see the file comment); built
 * messages are passed with copy = true. */
static void send_all_buf(struct innet_paxos_leader *l, const void *buf, uint32_t len, uint64_t skip,
			 bool copy)
{
	if (l->n_out + l->c.n_acceptors > OUT_SENDS || (copy && l->n_msgs == OUT_MSGS))
		out_flush(l);
	if (copy) {
		struct paxos_msg *m = &l->msgs[l->n_msgs++];
		memcpy(m, buf, len);
		buf = m;
	}
	for (uint32_t a = 0; a < l->c.n_acceptors; a++) {
		if (skip & (1ull << a))
			continue;
		uint32_t k = l->n_out++;
		l->out_iov[k] = (struct iovec){ (void *)buf, len };
		l->out[k].msg_hdr = (struct msghdr){ .msg_name = &l->acc_sa[a],
						     .msg_namelen = sizeof(l->acc_sa[a]),
						     .msg_iov = &l->out_iov[k], .msg_iovlen = 1 };
	}
}

/* A message built here (copied into the send queue). */
static void send_all(struct innet_paxos_leader *l, const void *buf, uint32_t len, uint64_t skip)
{
	send_all_buf(l, buf, len, skip, true);
}

static void rec_free(struct innet_paxos_leader *l)
{
	for (uint64_t i = 0; i < l->n_rec; i++)
		free(l->rec[i].value);
	free(l->rec);
	l->rec = NULL;
	l->n_rec = 0;
}

static void send_range(struct innet_paxos_leader *l)
{
	struct paxos_msg m;
	hdr_init(&m, PAXOS_1A, l->ballot, l->lo);
	m.h.flags = PAXOS_F_RANGE;
	send_all(l, &m, PAXOS_HDR_LEN, l->range_promises);
	l->range_ns = innet_now_ns();
}

static void takeover(struct innet_paxos_leader *l)
{
	uint32_t r = l->round > (l->ballot >> 8) ? l->round : l->ballot >> 8;
	uint32_t b = ((r + 1) << 8) | l->c.proposer_id;
	if (l->c.ballot_new != NULL && l->c.ballot_new(l->c.arg, b) != 0) {
		l->st.ballot_failures++;
		return; /* not stored: a restart could reuse it */
	}
	l->round = r + 1;
	l->ballot = b;
	l->phase = L_RANGE;
	l->range_promises = 0;
	l->hi = l->lo;
	rec_free(l);
	l->st.takeovers++;
	send_range(l);
}

void innet_paxos_leader_takeover(struct innet_paxos_leader *l)
{
	takeover(l);
	out_flush(l);
}

static void see_round(struct innet_paxos_leader *l, uint32_t ballot)
{
	if ((ballot >> 8) > l->round)
		l->round = ballot >> 8;
}

static void ask(struct innet_paxos_leader *l, uint64_t idx, uint64_t t)
{
	struct lrec *r = &l->rec[idx];
	struct paxos_msg m;
	hdr_init(&m, PAXOS_1A, l->ballot, l->lo + idx);
	m.h.flags = PAXOS_F_RANGE;
	send_all(l, &m, PAXOS_HDR_LEN, r->promises);
	r->state = R_ASKED;
	r->sent_ns = t;
}

static void rec_done(struct innet_paxos_leader *l, struct lrec *r)
{
	r->state = R_DONE;
	free(r->value);
	r->value = NULL;
	while (l->first_open < l->n_rec && l->rec[l->first_open].state == R_DONE)
		l->first_open++;
	if (l->first_open == l->n_rec)
		rec_free(l);
}

static void order(struct innet_paxos_leader *l, struct paxos_msg *m, uint32_t vlen, bool copy);

/* Phase 1 is done: serve from hi — first the requests held meanwhile, in
 * arrival order — and recover [lo, hi) alongside. */
static void start_serving(struct innet_paxos_leader *l)
{
	l->phase = L_SERVING;
	if (l->next < l->hi)
		l->next = l->hi;
	for (uint32_t i = 0; i < l->n_held; i++) {
		order(l, l->held[i], ntohs(l->held[i]->p.vlen), true);
		free(l->held[i]);
	}
	l->n_held = 0;
	uint64_t n = l->hi - l->lo;
	if (n > REC_MAX) {
		fprintf(stderr, "innet: leader: %lu instances to recover, recovering the last %u\n",
			(unsigned long)n, REC_MAX);
		l->lo = l->hi - REC_MAX;
		n = REC_MAX;
	}
	l->first_open = l->scan = 0;
	if (n == 0)
		return;
	l->rec = calloc(n, sizeof(*l->rec));
	if (l->rec == NULL)
		return; /* cannot recover: learners fill the holes themselves */
	l->n_rec = n;
	uint64_t t = innet_now_ns();
	while (l->scan < l->n_rec && l->scan < REC_WINDOW)
		ask(l, l->scan++, t);
}

static void on_1b(struct innet_paxos_leader *l, const struct paxos_msg *m, uint32_t vlen)
{
	uint16_t a = ntohs(m->p.node);
	if (a >= INNET_PAXOS_MAX_ACCEPTORS || ntohl(m->p.ballot) != l->ballot)
		return;
	uint64_t inst = be64toh(m->p.instance), hi = be64toh(m->p.hi), trim = be64toh(m->p.trim);
	if (l->phase == L_RANGE) {
		l->range_promises |= 1ull << a;
		if (hi > l->hi)
			l->hi = hi;
		if (trim > l->lo)
			l->lo = trim;
		if (l->hi < l->lo)
			l->hi = l->lo;
		if ((uint32_t)__builtin_popcountll(l->range_promises) >= l->majority)
			start_serving(l);
		return;
	}
	if (l->phase != L_SERVING || inst < l->lo || inst - l->lo >= l->n_rec)
		return;
	struct lrec *r = &l->rec[inst - l->lo];
	if (r->state != R_ASKED)
		return;
	uint32_t vb = ntohl(m->p.vballot);
	if (m->p.status == PAXOS_OK && vb > r->vballot) {
		uint8_t *v = vlen ? realloc(r->value, vlen) : r->value;
		if (vlen && v == NULL)
			return; /* not counted: asked again */
		r->value = v;
		r->vballot = vb;
		r->req = be64toh(m->p.req_id);
		r->vlen = (uint16_t)vlen;
		if (vlen)
			memcpy(r->value, m->value, vlen);
	}
	r->promises |= 1ull << a;
	if ((uint32_t)__builtin_popcountll(r->promises) < l->majority)
		return;
	struct paxos_msg out;
	hdr_init(&out, PAXOS_2A, l->ballot, inst);
	uint16_t n = r->vballot ? r->vlen : 0;
	out.p.req_id = htobe64(r->vballot ? r->req : 0);
	out.p.vlen = htons(n);
	if (n)
		memcpy(out.value, r->value, n);
	if (r->vballot && r->req)
		l->st.recovered++;
	else
		l->st.noops++;
	send_all(l, &out, PAXOS_HDR_LEN + n, 0);
	rec_done(l, r);
}

static void on_nack(struct innet_paxos_leader *l, const struct paxos_msg *m)
{
	l->st.nacks++;
	if (m->p.status == PAXOS_ST_JOINING)
		return; /* a restarted acceptor that knows nothing: the others answer */
	uint16_t a = ntohs(m->p.node);
	uint64_t inst = be64toh(m->p.instance), trim = be64toh(m->p.trim);
	if (l->phase == L_RANGE) {
		if (m->p.status == PAXOS_ST_BALLOT && ntohl(m->p.ballot) > l->ballot) {
			see_round(l, ntohl(m->p.ballot));
			takeover(l);
		} else if (m->p.status == PAXOS_ST_TRIMMED && trim > l->lo && a < l->c.n_acceptors) {
			l->lo = trim; /* promise at the acceptor's trim */
			send_range(l);
		}
		return;
	}
	if (l->phase != L_SERVING)
		return;
	/* Instances at or above `next` are used by someone else already (a
	 * learner filled them, the acceptors trimmed them): never hand them out. */
	uint64_t hi = be64toh(m->p.hi);
	if (m->p.status == PAXOS_ST_TRIMMED && trim > l->next)
		l->next = trim;
	if (m->p.status != PAXOS_ST_TRIMMED && inst >= l->hi && hi > l->next)
		l->next = hi;
	if (inst < l->lo || inst - l->lo >= l->n_rec)
		return;
	struct lrec *r = &l->rec[inst - l->lo];
	if (r->state != R_ASKED)
		return;
	/* trimmed: decided and delivered everywhere. ballot / ring_full: a
	 * higher ballot owns the instance (a learner recovering it). */
	see_round(l, ntohl(m->p.ballot));
	rec_done(l, r);
}

/* REQUEST m (vlen bytes of value) -> 2A(ballot, next++) to every acceptor.
 * copy: m does not outlive this call (else it is a receive buffer). */
static void order(struct innet_paxos_leader *l, struct paxos_msg *m, uint32_t vlen, bool copy)
{
	uint64_t req = m->p.req_id;
	hdr_init(m, PAXOS_2A, l->ballot, l->next++);
	m->p.req_id = req;
	m->p.vlen = htons((uint16_t)vlen);
	l->st.requests++;
	send_all_buf(l, m, PAXOS_HDR_LEN + vlen, 0, copy);
}

/* A REQUEST before serving: kept (once per request id, up to HELD_MAX) and
 * ordered as soon as phase 1 is done, so the proposers that failed over
 * are served then rather than at their next resend (which their backoff may
 * put hundreds of milliseconds later). */
static void hold(struct innet_paxos_leader *l, const struct paxos_msg *m, uint32_t vlen)
{
	for (uint32_t i = 0; i < l->n_held; i++)
		if (l->held[i]->p.req_id == m->p.req_id)
			return; /* a resend */
	struct paxos_msg *c = l->n_held < HELD_MAX ? malloc(PAXOS_HDR_LEN + vlen) : NULL;
	if (c == NULL) {
		l->st.dropped++; /* the proposer resends it */
		return;
	}
	memcpy(c, m, PAXOS_HDR_LEN + vlen);
	l->held[l->n_held++] = c;
	l->st.held++;
}

static void on_request(struct innet_paxos_leader *l, struct paxos_msg *m, uint32_t vlen)
{
	if (m->p.req_id == 0) {
		l->st.dropped++;
		return;
	}
	if (l->phase != L_SERVING) {
		hold(l, m, vlen);
		if (l->phase == L_IDLE)
			takeover(l);
		return;
	}
	order(l, m, vlen, false); /* m is a receive buffer */
}

static void on_packet(struct innet_paxos_leader *l, struct paxos_msg *m, ssize_t n)
{
	if (n < (ssize_t)PAXOS_HDR_LEN || m->h.magic != INNET_MAGIC ||
	    m->h.version != INNET_VERSION || m->h.service != INNET_SVC_PAXOS)
		return;
	uint32_t vlen = ntohs(m->p.vlen);
	if (vlen > PAXOS_VALUE_MAX || (uint32_t)n != PAXOS_HDR_LEN + vlen)
		return;
	switch (m->p.type) {
	case PAXOS_REQUEST: on_request(l, m, vlen); break;
	case PAXOS_1B: on_1b(l, m, vlen); break;
	case PAXOS_NACK: on_nack(l, m); break;
	default: break;
	}
}

static void timers(struct innet_paxos_leader *l, uint64_t t)
{
	uint64_t period = (uint64_t)l->c.retry_ms * 1000000ull;
	if (l->phase == L_RANGE && t - l->range_ns >= period) {
		send_range(l);
		return;
	}
	if (l->phase != L_SERVING || l->rec == NULL)
		return;
	for (uint64_t i = l->first_open; i < l->scan; i++) {
		struct lrec *r = &l->rec[i];
		if (r->state == R_ASKED && t - r->sent_ns >= period)
			ask(l, i, t);
	}
	while (l->rec != NULL && l->scan < l->n_rec && l->scan - l->first_open < REC_WINDOW)
		ask(l, l->scan++, t);
}

int innet_paxos_leader_process(struct innet_paxos_leader *l)
{
	for (int burst = 0; burst < 128; burst++) {
		for (uint32_t i = 0; i < RX_BURST; i++) {
			l->rx_iov[i] = (struct iovec){ &l->rx[i], sizeof(l->rx[i]) };
			l->rx_hdr[i].msg_hdr = (struct msghdr){ .msg_iov = &l->rx_iov[i],
								.msg_iovlen = 1 };
		}
		int n = recvmmsg(l->fd, l->rx_hdr, RX_BURST, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		l->st.rx_calls++;
		l->st.rx_datagrams += (uint32_t)n;
		for (int i = 0; i < n; i++)
			on_packet(l, &l->rx[i], (ssize_t)l->rx_hdr[i].msg_len);
		out_flush(l); /* before the receive buffers are reused */
		if ((uint32_t)n < RX_BURST)
			break;
	}
	timers(l, innet_now_ns());
	out_flush(l);
	return 0;
}

int innet_paxos_leader_step(struct innet_paxos_leader *l, int timeout_ms)
{
	struct pollfd pfd = { .fd = l->fd, .events = POLLIN };
	poll(&pfd, 1, timeout_ms);
	return innet_paxos_leader_process(l);
}

bool innet_paxos_leader_serving(const struct innet_paxos_leader *l)
{
	return l->phase == L_SERVING;
}

uint32_t innet_paxos_leader_ballot(const struct innet_paxos_leader *l)
{
	return l->ballot;
}

uint64_t innet_paxos_leader_next(const struct innet_paxos_leader *l)
{
	return l->next;
}

int innet_paxos_leader_fd(const struct innet_paxos_leader *l)
{
	return l->fd;
}

void innet_paxos_leader_get_stats(const struct innet_paxos_leader *l,
				  struct innet_paxos_leader_stats *out)
{
	*out = l->st;
}

struct innet_paxos_leader *innet_paxos_leader_create(const struct innet_paxos_leader_conf *conf,
						     char *err, size_t errlen)
{
	int e = EINVAL;
	if (conf->n_acceptors == 0 || conf->n_acceptors > INNET_PAXOS_MAX_ACCEPTORS) {
		snprintf(err, errlen, "need 1..%u acceptors, got %u", INNET_PAXOS_MAX_ACCEPTORS,
			 conf->n_acceptors);
		goto err;
	}
	struct innet_paxos_leader *l = calloc(1, sizeof(*l));
	if (l == NULL) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto err;
	}
	l->c = *conf;
	l->round = conf->min_round;
	if (l->c.proposer_id == 0)
		l->c.proposer_id = 0xfe;
	if (l->c.retry_ms == 0)
		l->c.retry_ms = 20;
	l->majority = conf->n_acceptors / 2 + 1;
	l->rx = calloc(RX_BURST, sizeof(*l->rx));
	l->msgs = calloc(OUT_MSGS, sizeof(*l->msgs));
	l->acc_sa = calloc(conf->n_acceptors, sizeof(*l->acc_sa));
	if (l->rx == NULL || l->msgs == NULL || l->acc_sa == NULL) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto err_free;
	}
	for (uint32_t a = 0; a < conf->n_acceptors; a++)
		l->acc_sa[a] = (struct sockaddr_in){ .sin_family = AF_INET,
						     .sin_addr.s_addr = htonl(conf->acceptors[a].ip),
						     .sin_port = htons(conf->acceptors[a].udp) };
	l->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (l->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		goto err_free;
	}
	int buf = 8 << 20;
	setsockopt(l->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(conf->bind_ip),
				  .sin_port = htons(conf->bind_udp) };
	if (bind(l->fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		e = errno;
		snprintf(err, errlen, "bind %s:%u: %s", inet_ntoa(me.sin_addr), conf->bind_udp,
			 strerror(e));
		goto err_close;
	}
	setsockopt(l->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (l->c.active)
		innet_paxos_leader_takeover(l);
	return l;
err_close:
	close(l->fd);
err_free:
	free(l->rx);
	free(l->msgs);
	free(l->acc_sa);
	free(l);
err:
	errno = e;
	return NULL;
}

void innet_paxos_leader_destroy(struct innet_paxos_leader *l)
{
	if (l == NULL)
		return;
	close(l->fd);
	rec_free(l);
	for (uint32_t i = 0; i < l->n_held; i++)
		free(l->held[i]);
	free(l->rx);
	free(l->msgs);
	free(l->acc_sa);
	free(l);
}
