/*
 * hostacc.c — a Paxos acceptor as a host process: the baseline against which
 * the in-network acceptor (acceptor.c) is measured. The rules are the switch
 * program's, line for line (see acceptor.c for why they are safe):
 *
 *   window: trim <= i < trim + ring, else NACK(trimmed) / NACK(ring_full)
 *   2A(b, i, v): b >= max(rnd[i], promised) -> vote, 2B to every learner
 *   1A(b, i):    same test -> promise (RANGE: for all), 1B with the vote
 *   RECOVER(i):  2B with the vote or status empty;  TRIM(l, w): trim = min
 *   READ:        READ_ACK with the read bound (hi: it never restarts with a join)
 *
 * One thread: recvmmsg a burst of up to 32, handle each, sendmmsg the replies.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "consensus/hostacc.h"
#include "consensus/wire.h"

#define BURST 32u
#define MAX_OUT (BURST * 65u)

struct slot {
	uint64_t inst1;
	uint32_t rnd, vrnd;
	uint64_t req;
	uint16_t vlen;
	uint8_t value[PAXOS_VALUE_MAX];
};

struct acc {
	const struct hostacc_conf *c;
	struct slot *ring;
	uint32_t promised;
	uint64_t trim, hi;
	uint64_t lwm[64];
	/* output batch */
	struct mmsghdr out[MAX_OUT];
	struct iovec iov[MAX_OUT];
	struct sockaddr_in to[MAX_OUT];
	uint32_t n_out;
};

static void queue(struct acc *a, const void *buf, uint32_t len, struct sockaddr_in to)
{
	if (a->n_out >= MAX_OUT)
		return;
	uint32_t k = a->n_out++;
	a->to[k] = to;
	a->iov[k] = (struct iovec){ (void *)buf, len };
	a->out[k].msg_hdr = (struct msghdr){ .msg_name = &a->to[k], .msg_namelen = sizeof(a->to[k]),
					     .msg_iov = &a->iov[k], .msg_iovlen = 1 };
}

static void reply(struct acc *a, struct paxos_msg *m, uint32_t len, struct sockaddr_in from)
{
	uint16_t s = m->h.src_node;
	m->h.src_node = m->h.dst_node;
	m->h.dst_node = s;
	m->p.node = htons(a->c->id);
	m->p.trim = htobe64(a->trim);
	m->p.hi = htobe64(a->hi);
	queue(a, m, len, from);
}

static uint32_t put_vote(struct paxos_msg *m, const struct slot *s)
{
	uint32_t vlen = s ? s->vlen : 0;
	m->p.vballot = htonl(s ? s->vrnd : 0);
	m->p.req_id = htobe64(s ? s->req : 0);
	m->p.status = s && s->vrnd ? PAXOS_OK : PAXOS_ST_EMPTY;
	m->p.vlen = htons((uint16_t)vlen);
	if (vlen)
		memcpy(m->value, s->value, vlen);
	return PAXOS_HDR_LEN + vlen;
}

/* Handle one packet in m (a receive buffer the replies may point into). */
static void handle(struct acc *a, struct paxos_msg *m, ssize_t n, struct sockaddr_in from)
{
	const struct hostacc_conf *c = a->c;
	if (n < (ssize_t)PAXOS_HDR_LEN || m->h.magic != INNET_MAGIC ||
	    m->h.version != INNET_VERSION || m->h.service != INNET_SVC_PAXOS)
		return;
	uint8_t type = m->p.type;
	uint32_t vlen = ntohs(m->p.vlen);
	if (vlen > PAXOS_VALUE_MAX || (uint32_t)n != PAXOS_HDR_LEN + vlen)
		return;
	if (type == PAXOS_TRIM) {
		uint16_t l = ntohs(m->p.node);
		if (l >= c->trim_learners)
			return;
		uint64_t w = be64toh(m->p.trim), min = UINT64_MAX;
		if (w > a->lwm[l])
			a->lwm[l] = w;
		for (uint32_t i = 0; i < c->trim_learners; i++)
			min = a->lwm[i] < min ? a->lwm[i] : min;
		if (min > a->trim)
			a->trim = min;
		m->p.status = PAXOS_OK;
		reply(a, m, PAXOS_HDR_LEN, from);
		return;
	}
	if (type == PAXOS_READ) {
		if (vlen != 0)
			return;
		m->p.type = PAXOS_READ_ACK;
		m->p.status = PAXOS_OK;
		m->p.ballot = 0;
		m->p.vballot = 0;
		m->p.instance = htobe64(a->hi);
		m->h.flags = 0;
		reply(a, m, PAXOS_HDR_LEN, from);
		return;
	}
	if (type != PAXOS_2A && type != PAXOS_1A && type != PAXOS_RECOVER)
		return;
	uint64_t inst = be64toh(m->p.instance);
	uint32_t ballot = ntohl(m->p.ballot);
	if (inst < a->trim) {
		m->p.type = PAXOS_NACK;
		m->p.status = PAXOS_ST_TRIMMED;
		m->p.ballot = 0;
		m->p.vlen = 0;
		reply(a, m, PAXOS_HDR_LEN, from);
		return;
	}
	bool in_window = inst - a->trim < c->ring;
	struct slot *s = &a->ring[inst % c->ring];
	bool fresh = !in_window || s->inst1 != inst + 1;
	if (type == PAXOS_RECOVER) {
		uint32_t len = put_vote(m, fresh ? NULL : s);
		m->p.type = PAXOS_2B;
		m->p.ballot = m->p.vballot;
		reply(a, m, len, from);
		return;
	}
	if (ballot == 0)
		return;
	uint32_t promised = a->promised;
	if (!in_window) {
		if (type == PAXOS_1A && (m->h.flags & PAXOS_F_RANGE) && ballot >= promised) {
			a->promised = ballot;
			uint32_t len = put_vote(m, NULL);
			m->p.type = PAXOS_1B;
			reply(a, m, len, from);
			return;
		}
		if (type == PAXOS_2A && inst + 1 > a->hi)
			a->hi = inst + 1;
		m->p.type = PAXOS_NACK;
		m->p.status = PAXOS_ST_RING_FULL;
		m->p.ballot = 0;
		m->p.vlen = 0;
		reply(a, m, PAXOS_HDR_LEN, from);
		return;
	}
	if (!fresh && s->rnd > promised)
		promised = s->rnd;
	if (ballot < promised) {
		m->p.type = PAXOS_NACK;
		m->p.status = PAXOS_ST_BALLOT;
		m->p.ballot = htonl(promised);
		m->p.vlen = 0;
		reply(a, m, PAXOS_HDR_LEN, from);
		return;
	}
	if (fresh) {
		s->inst1 = inst + 1;
		s->vrnd = 0;
		s->vlen = 0;
		s->req = 0;
	}
	s->rnd = ballot;
	if (type == PAXOS_1A) {
		if ((m->h.flags & PAXOS_F_RANGE) && ballot > a->promised)
			a->promised = ballot;
		uint32_t len = put_vote(m, s);
		m->p.type = PAXOS_1B;
		m->p.ballot = htonl(ballot);
		reply(a, m, len, from);
		return;
	}
	s->vrnd = ballot;
	s->vlen = (uint16_t)vlen;
	s->req = be64toh(m->p.req_id);
	memcpy(s->value, m->value, vlen);
	if (inst + 1 > a->hi)
		a->hi = inst + 1;
	m->p.type = PAXOS_2B;
	m->p.status = PAXOS_OK;
	m->p.node = htons(c->id);
	m->p.vballot = htonl(ballot);
	m->p.trim = htobe64(a->trim);
	m->p.hi = htobe64(a->hi);
	m->h.flags = 0;
	for (uint32_t i = 0; i < c->n_learners; i++) {
		struct sockaddr_in to = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(c->learners[i].ip),
					  .sin_port = htons(c->learners[i].udp) };
		queue(a, m, PAXOS_HDR_LEN + vlen, to);
	}
}

int hostacc_serve(const struct hostacc_conf *conf)
{
	struct hostacc_conf c = *conf;
	if (c.ring == 0)
		c.ring = 1024;
	if (c.trim_learners == 0)
		c.trim_learners = c.n_learners ? c.n_learners : 1;
	if (c.trim_learners > 64 || c.n_learners > 64)
		return -EINVAL;
	struct acc *a = calloc(1, sizeof(*a));
	struct paxos_msg *bufs = calloc(BURST, sizeof(*bufs));
	if (a == NULL || bufs == NULL) {
		free(a);
		free(bufs);
		return -ENOMEM;
	}
	a->c = &c;
	a->ring = calloc(c.ring, sizeof(*a->ring));
	int rc = -ENOMEM;
	if (a->ring == NULL)
		goto err_free;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int sz = 8 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(c.bind_ip),
				  .sin_port = htons(c.bind_udp) };
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		rc = -errno;
		fprintf(stderr, "innet paxos acceptor: bind %s:%u: %s\n", inet_ntoa(me.sin_addr),
			c.bind_udp, strerror(errno));
		close(fd);
		goto err_free;
	}
	fprintf(stderr, "innet paxos acceptor %u: listening on %s:%u\n", c.id,
		inet_ntoa(me.sin_addr), c.bind_udp);
	struct mmsghdr in[BURST];
	struct iovec iov[BURST];
	struct sockaddr_in from[BURST];
	while (!*c.stop) {
		for (uint32_t i = 0; i < BURST; i++) {
			iov[i] = (struct iovec){ &bufs[i], sizeof(bufs[i]) };
			in[i].msg_hdr = (struct msghdr){ .msg_name = &from[i],
							 .msg_namelen = sizeof(from[i]),
							 .msg_iov = &iov[i], .msg_iovlen = 1 };
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		int n = recvmmsg(fd, in, BURST, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		a->n_out = 0;
		for (int i = 0; i < n; i++)
			handle(a, &bufs[i], in[i].msg_len, from[i]);
		for (uint32_t k = 0; k < a->n_out;) {
			int s = sendmmsg(fd, a->out + k, a->n_out - k, 0);
			if (s <= 0)
				break;
			k += (uint32_t)s;
		}
	}
	close(fd);
	rc = 0;
err_free:
	free(a->ring);
	free(a);
	free(bufs);
	return rc;
}
