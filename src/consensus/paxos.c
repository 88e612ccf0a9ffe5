/*
 * paxos.c — the host endpoint of in-network Paxos: learner (vote counting,
 * in-order delivery, deduplication, gap recovery, catch-up, trim) and
 * proposer (requests with ids, resends, completion). innet/consensus.h has
 * the contract; docs/consensus.md the protocol.
 *
 * Layout: a ring of `window` entries, one per instance in
 * [next, next + window); entry i % window holds instance i's votes.
 *
 *   entry: inst+1 | ballot (highest 2B seen) | votes (acceptor mask at that
 *          ballot) | empty (acceptors that reported no vote) | value
 *          | recovery: phase, ballot, promises, best 1B vote
 *
 * Recovery of instance i (the oldest undelivered one and up to 63 after it,
 * once it has waited recover_ms while later instances exist):
 *   1. RECOVER to every acceptor; their votes count like 2Bs;
 *   2. still not chosen after another period: phase 1 with a ballot above any
 *      seen (round << 8 | proposer_id); a majority of 1Bs -> 2A of the
 *      highest-vballot value, or of a no-op; NACK(ballot) -> phase 1 again
 *      at a higher round (also when it comes in phase 2).
 *
 * Proposer failover: when no own request was chosen for failover_ms while
 * some wait, requests go to the next of coordinator, backups[] (a backup is
 * an innet_paxos_leader, leader.c, which takes over on the first REQUEST).
 *
 * Read rounds (reads without a log entry): READ(round id) to every
 * acceptor; each READ_ACK carries the acceptor's read bound; a majority's
 * highest bound is the round's index (read_done), which also raises `hi`
 * so that the instances below it that this learner lacks are recovered.
 *   round: id | first_ns, sent_ns | acks (acceptor mask) | index
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "innet/consensus.h"
#include "consensus/wire.h"
#include "consensus/learnfilter.h"

_Static_assert(INNET_PAXOS_VALUE_MAX == PAXOS_VALUE_MAX, "one value limit");
_Static_assert(LF_F_QUORUM == PAXOS_F_QUORUM, "the filter's mark is the protocol's");

#define RECOVER_BATCH 64u
#define MAX_PENDING   256u
#define MAX_READS     64u     /* read rounds in flight */
/* Datagrams per recvmmsg: a learner gets one 2B per acceptor per command,
 * so at tens of thousands of commands a second one system call per datagram
 * was most of its time. */
#define RX_BURST      32u

enum rec_phase { REC_NONE = 0, REC_ASKED, REC_PHASE1, REC_PHASE2 };

struct entry {
	uint64_t inst1;           /* instance + 1; 0 = unused */
	uint32_t ballot;          /* highest ballot of a 2B seen */
	uint64_t votes;           /* acceptors that voted at `ballot` */
	uint64_t empty;           /* acceptors that reported no vote (RECOVER/1B) */
	bool chosen;
	uint64_t req;
	uint16_t vlen;
	uint8_t value[PAXOS_VALUE_MAX];
	/* recovery */
	uint8_t phase;            /* enum rec_phase */
	uint64_t phase_ns;        /* when the phase started (or was last retried) */
	uint64_t hold_ns;         /* and waits this much beyond recover_ms (phase1_hold) */
	uint32_t p1_ballot;
	uint64_t p1_promises;
	uint32_t p1_vballot;
	uint64_t p1_req;
	uint16_t p1_vlen;
	uint8_t p1_value[PAXOS_VALUE_MAX];
};

/* A request in flight. The values live apart (pend_values): the timers and
 * lookups scan every slot, and 256 slots of 40 bytes stay in a few cache
 * lines where 256 of 9 KB did not. */
struct pending {
	uint64_t req;             /* 0 = free */
	uint64_t first_ns, sent_ns;
	uint64_t backoff_ns;      /* resends back off from here: first_ns, or the last failover */
	uint32_t len;
	uint8_t *value;           /* PAXOS_VALUE_MAX bytes in pend_values */
};

/* A read round in flight. */
struct read_round {
	uint64_t id;              /* 0 = free */
	uint64_t first_ns, sent_ns;
	uint64_t acks;            /* acceptors that answered */
	uint64_t index;           /* highest bound among their answers */
};

struct dedup {
	uint32_t client;          /* 0 = free */
	uint32_t last;            /* highest seq delivered */
	uint64_t below;           /* bit k: seq last-1-k delivered */
};

struct innet_paxos {
	struct innet_paxos_conf c;
	int fd;
	uint32_t majority;
	struct entry *ring;
	uint64_t next;            /* next instance to deliver */
	uint64_t hi;              /* 1 + highest instance known to exist */
	uint64_t stall_ns;        /* when `next` started waiting (0 = not waiting) */
	uint64_t probe_ns;        /* last catch-up probe */
	uint64_t rng;             /* xorshift state: phase1_hold's jitter */
	uint64_t stale_trim;      /* acceptors trimmed past next (0 = fine) */
	uint32_t round;           /* highest ballot round seen */
	uint32_t cur_coord;       /* 0 = coordinator, k = backups[k - 1] */
	uint64_t progress_ns;     /* last time one of our requests was chosen */
	uint32_t fo_streak;       /* failovers since the last own request chosen */
	uint32_t client;          /* own client id for submit */
	uint32_t seq;
	struct pending *pend;     /* MAX_PENDING */
	uint8_t *pend_values;     /* MAX_PENDING x PAXOS_VALUE_MAX */
	struct paxos_msg *rx;     /* RX_BURST receive buffers */
	uint32_t n_pend;
	struct dedup *dd;         /* open addressing, dd_cap a power of two */
	uint32_t dd_cap, dd_n;
	/* submit() waits for this one */
	uint64_t wait_req;
	int wait_status;
	uint64_t wait_inst;
	bool wait_done;
	bool trust_filter;        /* PAXOS_F_QUORUM on a 2B means a majority voted */
	struct read_round reads[MAX_READS];
	uint32_t n_reads;
	uint32_t read_client;     /* read rounds' ids: read_client << 32 | ++read_seq */
	uint32_t read_seq;
	struct innet_paxos_stats st;
};

static int send_to(struct innet_paxos *p, const struct innet_addr *a, const void *buf, uint32_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(a->ip),
				  .sin_port = htons(a->udp) };
	if (sendto(p->fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)len)
		return -errno;
	return 0;
}

static void msg_init(struct paxos_msg *m, uint8_t type, uint64_t inst)
{
	memset(m, 0, PAXOS_HDR_LEN);
	m->h.magic = INNET_MAGIC;
	m->h.version = INNET_VERSION;
	m->h.service = INNET_SVC_PAXOS;
	m->p.type = type;
	m->p.instance = htobe64(inst);
}

static void send_acceptors(struct innet_paxos *p, const struct paxos_msg *m, uint32_t len)
{
	for (uint32_t i = 0; i < p->c.n_acceptors; i++)
		send_to(p, &p->c.acceptors[i], m, len);
}

static struct entry *entry_get(struct innet_paxos *p, uint64_t inst)
{
	/* (instance 2^64 - 1 has no entry: inst1 would be 0, "unused", and
	 * the slot's last instance would pass for it) */
	if (inst < p->next || inst - p->next >= p->c.window || inst == UINT64_MAX)
		return NULL;
	struct entry *e = &p->ring[inst % p->c.window];
	if (e->inst1 != inst + 1) {
		memset(e, 0, offsetof(struct entry, value));
		e->phase = REC_NONE;
		e->p1_ballot = 0;
		e->p1_promises = 0;
		e->p1_vballot = 0;
		e->inst1 = inst + 1;
	}
	return e;
}

/* ---- deduplication (deterministic: depends only on the log) ------------- */

static struct dedup *dd_find(struct innet_paxos *p, uint32_t client, bool create)
{
	if (create && (p->dd_n + 1) * 2 > p->dd_cap) {
		uint32_t cap = p->dd_cap ? p->dd_cap * 2 : 1024;
		struct dedup *n = calloc(cap, sizeof(*n));
		if (n == NULL)
			return NULL;
		for (uint32_t i = 0; i < p->dd_cap; i++) {
			if (p->dd[i].client == 0)
				continue;
			uint32_t h = (p->dd[i].client * 2654435761u) & (cap - 1);
			while (n[h].client != 0)
				h = (h + 1) & (cap - 1);
			n[h] = p->dd[i];
		}
		free(p->dd);
		p->dd = n;
		p->dd_cap = cap;
	}
	if (p->dd_cap == 0)
		return NULL;
	uint32_t h = (client * 2654435761u) & (p->dd_cap - 1);
	while (p->dd[h].client != 0) {
		if (p->dd[h].client == client)
			return &p->dd[h];
		h = (h + 1) & (p->dd_cap - 1);
	}
	if (!create)
		return NULL;
	p->dd[h] = (struct dedup){ .client = client };
	p->dd_n++;
	return &p->dd[h];
}

/* True if req was delivered before; else records it. */
static bool dd_seen(struct innet_paxos *p, uint64_t req)
{
	uint32_t client = (uint32_t)(req >> 32), seq = (uint32_t)req;
	if (client == 0)
		return false; /* client 0: no deduplication */
	struct dedup *d = dd_find(p, client, true);
	if (d == NULL)
		return false;
	if (seq > d->last) {
		uint32_t shift = seq - d->last;
		d->below = shift >= 64 ? 0 : (d->below << shift) | (1ull << (shift - 1));
		d->last = seq;
		return false;
	}
	if (seq == d->last)
		return true;
	uint32_t k = d->last - 1 - seq;
	if (k >= 64)
		return true; /* too old to tell: treated as delivered */
	if (d->below & (1ull << k))
		return true;
	d->below |= 1ull << k;
	return false;
}

/* ---- proposer ----------------------------------------------------------- */

/* The pending request req, or NULL. Request id 0 is never one (a free slot
 * holds 0: a NACK or 2B naming request 0 must not end a free slot). */
static struct pending *pend_find(struct innet_paxos *p, uint64_t req)
{
	if (req == 0)
		return NULL;
	for (uint32_t i = 0; i < MAX_PENDING && p->n_pend > 0; i++)
		if (p->pend[i].req == req)
			return &p->pend[i];
	return NULL;
}

static void pend_done(struct innet_paxos *p, struct pending *pe, int status, uint64_t inst)
{
	uint64_t req = pe->req;
	pe->req = 0;
	p->n_pend--;
	if (req == p->wait_req) {
		p->wait_done = true;
		p->wait_status = status;
		p->wait_inst = inst;
	}
	if (p->c.done)
		p->c.done(p->c.arg, req, status, inst);
}

int innet_paxos_request_encode(void *buf, size_t cap, uint64_t req_id, const void *value,
			       uint32_t len)
{
	if (len > PAXOS_VALUE_MAX)
		return -EMSGSIZE;
	if (req_id == 0)
		return -EINVAL;
	if (cap < PAXOS_HDR_LEN + len)
		return -ENOBUFS;
	struct paxos_msg *m = buf;
	msg_init(m, PAXOS_REQUEST, 0);
	m->p.req_id = htobe64(req_id);
	m->p.vlen = htons((uint16_t)len);
	if (len)
		memcpy(m->value, value, len);
	return (int)(PAXOS_HDR_LEN + len);
}

static int pend_send(struct innet_paxos *p, struct pending *pe)
{
	struct paxos_msg m;
	innet_paxos_request_encode(&m, sizeof(m), pe->req, pe->value, pe->len);
	pe->sent_ns = innet_now_ns();
	p->st.proposed++;
	const struct innet_addr *to = p->cur_coord == 0 ? &p->c.coordinator
							 : &p->c.backups[p->cur_coord - 1];
	return send_to(p, to, &m, PAXOS_HDR_LEN + pe->len);
}

int innet_paxos_propose(struct innet_paxos *p, uint64_t req_id, const void *value, uint32_t len)
{
	if (len > PAXOS_VALUE_MAX)
		return -EMSGSIZE;
	if (req_id == 0)
		return -EINVAL;
	if (pend_find(p, req_id) != NULL)
		return -EEXIST;
	if (p->n_pend >= MAX_PENDING)
		return -EAGAIN;
	/* The learners' dedup window is 64 sequence numbers per client: a
	 * request further ahead of one still pending could make the pending one
	 * look like an old duplicate when it is finally chosen. */
	for (uint32_t i = 0; i < MAX_PENDING && p->n_pend > 0; i++) {
		uint64_t q = p->pend[i].req;
		if (q != 0 && q >> 32 == req_id >> 32 && (uint32_t)req_id - (uint32_t)q >= 64)
			return -EAGAIN;
	}
	struct pending *pe = NULL;
	for (uint32_t i = 0; i < MAX_PENDING; i++)
		if (p->pend[i].req == 0) {
			pe = &p->pend[i];
			break;
		}
	pe->req = req_id;
	pe->len = len;
	if (len)
		memcpy(pe->value, value, len);
	pe->first_ns = pe->backoff_ns = innet_now_ns();
	if (p->n_pend == 0)
		p->progress_ns = pe->first_ns; /* the failover clock runs while requests wait */
	p->n_pend++;
	int rc = pend_send(p, pe);
	if (rc != 0) {
		pe->req = 0;
		p->n_pend--;
	}
	return rc;
}

uint32_t innet_paxos_client_new(struct innet_paxos *p)
{
	uint32_t c = 0;
	while (c == 0)
		if (getrandom(&c, sizeof(c), 0) != sizeof(c))
			c = (uint32_t)(innet_now_ns() ^ ((uint64_t)getpid() << 16));
	return c;
}

/* ---- learner ------------------------------------------------------------ */

static void chosen(struct innet_paxos *p, struct entry *e)
{
	e->chosen = true;
	if (e->req != 0 && p->n_pend > 0) {
		struct pending *pe = pend_find(p, e->req);
		if (pe != NULL) {
			p->progress_ns = innet_now_ns();
			p->fo_streak = 0;
			pend_done(p, pe, 0, e->inst1 - 1);
		}
	}
}

static void deliver_ready(struct innet_paxos *p)
{
	for (;;) {
		struct entry *e = &p->ring[p->next % p->c.window];
		if (e->inst1 != p->next + 1 || !e->chosen)
			break;
		uint64_t inst = p->next;
		e->inst1 = 0;
		e->chosen = false;   /* (a free slot must not pass for a chosen one) */
		p->next++;
		p->stall_ns = 0;
		if (e->req == 0) {
			p->st.noops++;
		} else if (dd_seen(p, e->req)) {
			p->st.duplicates++;
		} else {
			p->st.delivered++;
			if (p->c.deliver)
				p->c.deliver(p->c.arg, inst, e->req, e->value, e->vlen);
		}
	}
	if (p->next > p->hi)
		p->hi = p->next;
}

static void see_round(struct innet_paxos *p, uint32_t ballot)
{
	if ((ballot >> 8) > p->round)
		p->round = ballot >> 8;
}

static void on_vote(struct innet_paxos *p, const struct paxos_msg *m, uint32_t vlen)
{
	uint64_t inst = be64toh(m->p.instance);
	uint32_t ballot = ntohl(m->p.ballot);
	uint16_t a = ntohs(m->p.node);
	/* An empty answer (RECOVER of an instance nobody voted in, e.g. the
	 * idle probe at `next`) says nothing about the instance existing:
	 * counting it would make learners fill the log head with no-ops ahead
	 * of the coordinator. */
	if (m->p.status != PAXOS_ST_EMPTY && inst + 1 > p->hi)
		p->hi = inst + 1;
	if (a >= 64)
		return;
	struct entry *e = entry_get(p, inst);
	if (e == NULL || e->chosen)
		return;
	see_round(p, ballot);
	if (m->p.status == PAXOS_ST_EMPTY) {
		e->empty |= 1ull << a;
		return;
	}
	p->st.votes++;
	/* The local filter saw a majority at (inst, ballot) and dropped the
	 * other 2Bs. If this learner saw a higher ballot meanwhile, a value
	 * chosen at `ballot` is also the one of every higher ballot (Paxos),
	 * so it is this packet's either way. */
	bool quorum = p->trust_filter && (m->h.flags & PAXOS_F_QUORUM) != 0;
	if (ballot > e->ballot || (quorum && ballot != e->ballot)) {
		e->ballot = ballot;
		e->votes = 0;
		e->req = be64toh(m->p.req_id);
		e->vlen = (uint16_t)vlen;
		memcpy(e->value, m->value, vlen);
	}
	if (ballot == e->ballot) {
		e->votes |= 1ull << a;
		if (quorum || (uint32_t)__builtin_popcountll(e->votes) >= p->majority)
			chosen(p, e);
	}
}

static uint32_t next_ballot(struct innet_paxos *p)
{
	p->round++;
	return (p->round << 8) | p->c.proposer_id;
}

/* How long beyond recover_ms a learner holds back its next phase 1 on an
 * instance. Learners that lack the same instance would otherwise take it
 * through phase 1 together and pre-empt each other, each NACK starting a
 * higher ballot at once: a duel that, under loss and reordering, held every
 * replica's delivery (and so every client) for over a second after a
 * coordinator failover. The learner with id k first waits k periods more,
 * so the lowest usually fills the hole and the others learn its value from
 * the 2Bs; after a pre-emption, a random part of a period as well. */
static uint64_t phase1_hold(struct innet_paxos *p, uint64_t period, bool preempted)
{
	uint64_t k = p->c.learner_id == INNET_PAXOS_NO_TRIM ? 0 : p->c.learner_id % 8u;
	uint64_t h = k * period;
	if (preempted) {
		p->rng ^= p->rng << 13;
		p->rng ^= p->rng >> 7;
		p->rng ^= p->rng << 17;
		h += p->rng % (period + 1);
	}
	return h;
}

static void start_phase1(struct innet_paxos *p, struct entry *e, uint64_t t)
{
	e->phase = REC_PHASE1;
	e->phase_ns = t;
	e->hold_ns = 0;
	e->p1_ballot = next_ballot(p);
	e->p1_promises = 0;
	e->p1_vballot = 0;
	e->p1_req = 0;
	e->p1_vlen = 0;
	p->st.phase1_started++;
	struct paxos_msg m;
	msg_init(&m, PAXOS_1A, e->inst1 - 1);
	m.p.ballot = htonl(e->p1_ballot);
	send_acceptors(p, &m, PAXOS_HDR_LEN);
}

static void send_phase2(struct innet_paxos *p, struct entry *e)
{
	struct paxos_msg m;
	msg_init(&m, PAXOS_2A, e->inst1 - 1);
	m.p.ballot = htonl(e->p1_ballot);
	m.p.req_id = htobe64(e->p1_vballot ? e->p1_req : 0);
	uint16_t vlen = e->p1_vballot ? e->p1_vlen : 0;
	m.p.vlen = htons(vlen);
	memcpy(m.value, e->p1_value, vlen);
	send_acceptors(p, &m, PAXOS_HDR_LEN + vlen);
}

static void on_1b(struct innet_paxos *p, const struct paxos_msg *m, uint32_t vlen)
{
	uint64_t inst = be64toh(m->p.instance);
	uint16_t a = ntohs(m->p.node);
	struct entry *e = entry_get(p, inst);
	if (e == NULL || e->chosen || e->phase != REC_PHASE1 || a >= 64 ||
	    ntohl(m->p.ballot) != e->p1_ballot)
		return;
	uint32_t vb = ntohl(m->p.vballot);
	if (m->p.status == PAXOS_OK && vb > e->p1_vballot) {
		e->p1_vballot = vb;
		e->p1_req = be64toh(m->p.req_id);
		e->p1_vlen = (uint16_t)vlen;
		memcpy(e->p1_value, m->value, vlen);
	}
	e->p1_promises |= 1ull << a;
	if ((uint32_t)__builtin_popcountll(e->p1_promises) >= p->majority) {
		e->phase = REC_PHASE2;
		e->phase_ns = innet_now_ns();
		send_phase2(p, e);
	}
}

static void on_nack(struct innet_paxos *p, const struct paxos_msg *m)
{
	p->st.nacks++;
	uint64_t trim = be64toh(m->p.trim);
	uint64_t hi = be64toh(m->p.hi);
	if (hi > p->hi)
		p->hi = hi;
	switch (m->p.status) {
	case PAXOS_ST_BALLOT: {
		see_round(p, ntohl(m->p.ballot));
		struct entry *e = entry_get(p, be64toh(m->p.instance));
		if (e != NULL && (e->phase == REC_PHASE1 || e->phase == REC_PHASE2) &&
		    ntohl(m->p.ballot) > e->p1_ballot) {
			/* Pre-empted: phase 1 again with a higher ballot (resending
			 * the 2A at the refused ballot would livelock), after a
			 * hold that keeps learners from duelling (phase1_hold). */
			uint64_t period = (uint64_t)p->c.recover_ms * 1000000ull;
			e->phase = REC_PHASE1;
			e->phase_ns = innet_now_ns() - period;
			e->hold_ns = phase1_hold(p, period, true);
		}
		break;
	}
	case PAXOS_ST_TRIMMED:
		if (trim > p->next) {
			if (p->c.deliver == NULL)
				innet_paxos_restart_at(p, trim); /* proposer only: skip ahead */
			else
				p->stale_trim = trim;
		}
		break;
	case PAXOS_ST_TOO_BIG: {
		struct pending *pe = pend_find(p, be64toh(m->p.req_id));
		if (pe != NULL)
			pend_done(p, pe, -EMSGSIZE, 0);
		break;
	}
	}
}

/* ---- read rounds -------------------------------------------------------- */

static void read_send(struct innet_paxos *p, struct read_round *r, uint64_t t)
{
	struct paxos_msg m;
	msg_init(&m, PAXOS_READ, 0);
	m.p.req_id = htobe64(r->id);
	r->sent_ns = t;
	for (uint32_t i = 0; i < p->c.n_acceptors; i++)
		if (!(r->acks & (1ull << i)))
			send_to(p, &p->c.acceptors[i], &m, PAXOS_HDR_LEN);
}

int innet_paxos_read_index(struct innet_paxos *p, uint64_t *round)
{
	if (p->n_reads >= MAX_READS)
		return -EAGAIN;
	struct read_round *r = NULL;
	for (uint32_t i = 0; i < MAX_READS; i++)
		if (p->reads[i].id == 0) {
			r = &p->reads[i];
			break;
		}
	if (++p->read_seq == 0)
		p->read_seq = 1;
	*r = (struct read_round){ .id = innet_paxos_req_id(p->read_client, p->read_seq) };
	r->first_ns = innet_now_ns();
	p->n_reads++;
	p->st.read_rounds++;
	read_send(p, r, r->first_ns);
	*round = r->id;
	return 0;
}

static void read_end(struct innet_paxos *p, struct read_round *r, int status)
{
	uint64_t id = r->id, index = r->index;
	r->id = 0;
	p->n_reads--;
	if (status == 0 && index > p->hi)
		p->hi = index; /* recover below it what this learner lacks */
	if (status != 0)
		p->st.read_failed++;
	if (p->c.read_done)
		p->c.read_done(p->c.arg, id, status, index);
}

static void on_read_ack(struct innet_paxos *p, const struct paxos_msg *m)
{
	uint64_t id = be64toh(m->p.req_id);
	uint16_t a = ntohs(m->p.node);
	if (id == 0 || m->p.status != PAXOS_OK || a >= 64 || p->n_reads == 0)
		return; /* joining: no bound to count */
	for (uint32_t i = 0; i < MAX_READS; i++) {
		struct read_round *r = &p->reads[i];
		if (r->id != id)
			continue;
		uint64_t bound = be64toh(m->p.instance);
		r->acks |= 1ull << a;
		if (bound > r->index)
			r->index = bound;
		if ((uint32_t)__builtin_popcountll(r->acks) >= p->majority)
			read_end(p, r, 0);
		return;
	}
}

static void read_timers(struct innet_paxos *p, uint64_t t)
{
	if (p->n_reads == 0)
		return;
	uint64_t every = (uint64_t)p->c.recover_ms * 1000000ull;
	for (uint32_t i = 0; i < MAX_READS; i++) {
		struct read_round *r = &p->reads[i];
		if (r->id == 0)
			continue;
		if (t - r->first_ns >= (uint64_t)p->c.deadline_ms * 1000000ull) {
			read_end(p, r, -ETIMEDOUT);
			continue;
		}
		/* back off up to 8x, as the proposer does */
		uint64_t age = r->sent_ns - r->first_ns, wait = every;
		if (age > wait)
			wait = age < 8 * every ? age : 8 * every;
		if (t - r->sent_ns >= wait) {
			p->st.read_resent++;
			read_send(p, r, t);
		}
	}
}

static void on_packet(struct innet_paxos *p, const struct paxos_msg *m, ssize_t n)
{
	if (n < (ssize_t)PAXOS_HDR_LEN || m->h.magic != INNET_MAGIC || m->h.version != INNET_VERSION ||
	    m->h.service != INNET_SVC_PAXOS) {
		p->st.bad_packets++;
		return;
	}
	uint32_t vlen = ntohs(m->p.vlen);
	if (vlen > PAXOS_VALUE_MAX || (uint32_t)n != PAXOS_HDR_LEN + vlen) {
		p->st.bad_packets++;
		return;
	}
	uint64_t hi = be64toh(m->p.hi);
	switch (m->p.type) {
	case PAXOS_2B:
		if (hi > p->hi)
			p->hi = hi;
		on_vote(p, m, vlen);
		break;
	case PAXOS_1B:
		if (hi > p->hi)
			p->hi = hi;
		on_1b(p, m, vlen);
		break;
	case PAXOS_NACK:
		on_nack(p, m);
		break;
	case PAXOS_TRIM:
		if (hi > p->hi)
			p->hi = hi;
		break;
	case PAXOS_READ_ACK:
		if (hi > p->hi)
			p->hi = hi;
		on_read_ack(p, m);
		break;
	default:
		p->st.bad_packets++;
	}
}

static void recover(struct innet_paxos *p, uint64_t t)
{
	uint64_t period = (uint64_t)p->c.recover_ms * 1000000ull;
	if (p->hi <= p->next) {
		/* Nothing known beyond: probe now and then (catch-up after a
		 * restart, or a tail lost everywhere). */
		if (t - p->probe_ns >= 10 * period) {
			p->probe_ns = t;
			struct paxos_msg m;
			msg_init(&m, PAXOS_RECOVER, p->next);
			send_acceptors(p, &m, PAXOS_HDR_LEN);
		}
		return;
	}
	if (p->stall_ns == 0) {
		p->stall_ns = t;
		return;
	}
	if (t - p->stall_ns < period)
		return;
	uint64_t end = p->hi;
	if (end - p->next > RECOVER_BATCH)
		end = p->next + RECOVER_BATCH;
	if (end - p->next > p->c.window)
		end = p->next + p->c.window;
	for (uint64_t i = p->next; i < end; i++) {
		struct entry *e = entry_get(p, i);
		if (e == NULL || e->chosen)
			continue;
		if (e->phase != REC_NONE && t - e->phase_ns < period + e->hold_ns)
			continue;
		struct paxos_msg m;
		switch (e->phase) {
		case REC_NONE:
			e->phase = REC_ASKED;
			e->phase_ns = t;
			e->hold_ns = phase1_hold(p, period, false);
			msg_init(&m, PAXOS_RECOVER, i);
			send_acceptors(p, &m, PAXOS_HDR_LEN);
			p->st.recover_sent += p->c.n_acceptors;
			break;
		case REC_ASKED:
			/* Asked once and still not chosen: take it through phase 1. */
			start_phase1(p, e, t);
			break;
		case REC_PHASE1:
			start_phase1(p, e, t); /* no majority in time: a higher ballot */
			break;
		case REC_PHASE2:
			e->phase_ns = t;
			send_phase2(p, e);   /* resend the 2A: the 2Bs may be lost */
			break;
		}
	}
}

/* How long the proposer waits for progress before it moves on: failover_ms,
 * and twice that on a coordinator it has just failed over to (which needs a
 * phase 1 first: under heavy loss, 1As, 1Bs and the first 2As can take more
 * than one failover_ms, and moving on to the dead one would cost a whole
 * failover_ms more). */
static uint64_t failover_wait_ns(const struct innet_paxos *p)
{
	return (uint64_t)p->c.failover_ms * 1000000ull * (p->fo_streak == 1 ? 2 : 1);
}

/* The probe (proposer_timers): nothing of ours chosen for half the failover
 * wait while some wait; the oldest request is then resent every probe_ns. */
static bool proposer_suspects(const struct innet_paxos *p, uint64_t t)
{
	return p->n_pend > 0 && p->c.n_backups > 0 && t - p->progress_ns >= failover_wait_ns(p) / 2;
}

static uint64_t probe_ns(const struct innet_paxos *p)
{
	uint64_t q = (uint64_t)p->c.retry_ms * 1000000ull / 4;
	return q > 5000000ull ? q : 5000000ull;
}

static void proposer_timers(struct innet_paxos *p, uint64_t t)
{
	if (p->n_pend == 0)
		return;
	if (p->c.n_backups > 0 && t - p->progress_ns >= failover_wait_ns(p)) {
		/* Nothing of ours chosen for a while: the coordinator may be
		 * gone. Try the next one; resend everything to it now, and then
		 * every retry_ms as for new requests: the backoff was for the old
		 * coordinator (kept, the next resend would come up to 8 x retry_ms
		 * later — longer than failover_ms, so the proposer would move on
		 * again before the new coordinator ever saw a second copy). */
		p->cur_coord = (p->cur_coord + 1) % (p->c.n_backups + 1);
		p->progress_ns = t;
		p->fo_streak++;
		p->st.failovers++;
		for (uint32_t i = 0; i < MAX_PENDING; i++)
			if (p->pend[i].req != 0) {
				p->pend[i].sent_ns = 0;
				p->pend[i].backoff_ns = t;
			}
	}
	/* Suspicion: nothing of ours chosen for half the failover wait. Before
	 * the proposer moves on, the silence must be the coordinator's and not
	 * a lossy path's: on XDP a backup's REQUESTs cross two faulty links
	 * (~10% lost at 5% each), and with the backoff a lone request got four
	 * tries in failover_ms, all lost in ~1 of 10,000, which sent its
	 * proposer to the dead coordinator for 2 x failover_ms (a 1.2 s wait
	 * in about one kill of seven). So the oldest request is resent every
	 * retry_ms / 4 from then on: about eight tries more, one datagram per
	 * period to a coordinator that may be dead. */
	struct pending *probe = NULL;
	if (proposer_suspects(p, t))
		for (uint32_t i = 0; i < MAX_PENDING; i++)
			if (p->pend[i].req != 0 && (probe == NULL || p->pend[i].first_ns < probe->first_ns))
				probe = &p->pend[i];
	for (uint32_t i = 0; i < MAX_PENDING; i++) {
		struct pending *pe = &p->pend[i];
		if (pe->req == 0)
			continue;
		if (t - pe->first_ns >= (uint64_t)p->c.deadline_ms * 1000000ull) {
			pend_done(p, pe, -ETIMEDOUT, 0);
			continue;
		}
		/* Back off (up to 8x): every resend costs the coordinator an
		 * instance, which learners must fill if it is not chosen. Not
		 * after a failover, until something of ours is chosen: then a
		 * lost REQUEST (or 2A, or 2B) must be resent every retry_ms, or
		 * the backoff alone (100, 200, 400 ms ...) outlasts the pause. */
		uint64_t age = pe->sent_ns > pe->backoff_ns ? pe->sent_ns - pe->backoff_ns : 0;
		uint64_t every = p->c.retry_ms * 1000000ull;
		if (age > every && p->fo_streak == 0)
			every = age < 8 * every ? age : 8 * every;
		if (pe == probe)
			every = probe_ns(p);
		if (t - pe->sent_ns >= every) {
			p->st.resent++;
			pend_send(p, pe);
		}
	}
}

int innet_paxos_process(struct innet_paxos *p)
{
	struct paxos_msg *m = p->rx;
	struct mmsghdr mh[RX_BURST];
	struct iovec iov[RX_BURST];
	for (int k = 0; k < 4096 / (int)RX_BURST; k++) {
		for (uint32_t i = 0; i < RX_BURST; i++) {
			iov[i] = (struct iovec){ .iov_base = &m[i], .iov_len = sizeof(m[i]) };
			mh[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
		}
		int n = recvmmsg(p->fd, mh, RX_BURST, MSG_DONTWAIT, NULL);
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++)
			on_packet(p, &m[i], (ssize_t)mh[i].msg_len);
		if ((uint32_t)n < RX_BURST)
			break;
	}
	deliver_ready(p);
	uint64_t t = innet_now_ns();
	recover(p, t);
	proposer_timers(p, t);
	read_timers(p, t);
	if (p->stale_trim > p->next)
		return -ESTALE;
	return 0;
}

int innet_paxos_timeout_ms(const struct innet_paxos *p)
{
	int t = -1;
	if (p->n_pend > 0)
		t = (int)p->c.retry_ms;
	if (proposer_suspects(p, innet_now_ns())) {
		int q = (int)(probe_ns(p) / 1000000ull);
		t = q < t ? q : t;
	}
	if (p->n_pend > 0 && p->c.n_backups > 0) {
		/* Wake up for the failover deadline itself, not at the next
		 * resend after it (up to retry_ms later). */
		uint64_t due = p->progress_ns + failover_wait_ns(p), now = innet_now_ns();
		int f = due > now ? (int)((due - now + 999999) / 1000000) : 0;
		t = f < t ? f : t;
	}
	int r = (int)p->c.recover_ms;
	if (p->hi <= p->next && p->n_reads == 0)
		r *= 10;
	return t < 0 || r < t ? r : t;
}

int innet_paxos_step(struct innet_paxos *p, int timeout_ms)
{
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };
	poll(&pfd, 1, timeout_ms);
	return innet_paxos_process(p);
}

int innet_paxos_submit(struct innet_paxos *p, const void *value, uint32_t len, uint64_t *instance)
{
	uint64_t req = innet_paxos_req_id(p->client, ++p->seq);
	int rc = innet_paxos_propose(p, req, value, len);
	if (rc != 0)
		return rc;
	p->wait_req = req;
	p->wait_done = false;
	while (!p->wait_done) {
		int to = innet_paxos_timeout_ms(p);
		rc = innet_paxos_step(p, to < 0 || to > 10 ? 10 : to);
		if (rc == -ESTALE && !p->wait_done)
			break;
	}
	p->wait_req = 0;
	if (!p->wait_done)
		return rc;
	if (instance)
		*instance = p->wait_inst;
	return p->wait_status;
}

uint64_t innet_paxos_delivered(const struct innet_paxos *p)
{
	return p->next;
}

uint64_t innet_paxos_stale_trim(const struct innet_paxos *p)
{
	return p->stale_trim > p->next ? p->stale_trim : 0;
}

int innet_paxos_trim_as(struct innet_paxos *p, uint16_t learner_id)
{
	if (learner_id == INNET_PAXOS_NO_TRIM)
		return -EINVAL;
	struct paxos_msg m;
	msg_init(&m, PAXOS_TRIM, 0);
	m.p.node = htons(learner_id);
	m.p.trim = htobe64(p->next);
	send_acceptors(p, &m, PAXOS_HDR_LEN);
	return 0;
}

int innet_paxos_trim(struct innet_paxos *p)
{
	return innet_paxos_trim_as(p, p->c.learner_id);
}

void innet_paxos_restart_at(struct innet_paxos *p, uint64_t next)
{
	for (uint32_t i = 0; i < p->c.window; i++)
		p->ring[i].inst1 = 0;
	p->next = next;
	if (p->hi < next)
		p->hi = next;
	p->stall_ns = 0;
	p->stale_trim = 0;
}

/* Dedup state on the wire of a snapshot: u32 n, then n x (u32 client,
 * u32 last, u64 below), big-endian. */
size_t innet_paxos_dedup_size(const struct innet_paxos *p)
{
	return 4 + (size_t)p->dd_n * 16;
}

size_t innet_paxos_dedup_save(const struct innet_paxos *p, void *buf, size_t len)
{
	if (len < innet_paxos_dedup_size(p))
		return 0;
	uint8_t *b = buf;
	uint32_t n = htonl(p->dd_n);
	memcpy(b, &n, 4);
	size_t pos = 4;
	for (uint32_t i = 0; i < p->dd_cap; i++) {
		const struct dedup *d = &p->dd[i];
		if (d->client == 0)
			continue;
		uint32_t c = htonl(d->client), l = htonl(d->last);
		uint64_t w = htobe64(d->below);
		memcpy(b + pos, &c, 4);
		memcpy(b + pos + 4, &l, 4);
		memcpy(b + pos + 8, &w, 8);
		pos += 16;
	}
	return pos;
}

int innet_paxos_dedup_load(struct innet_paxos *p, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	uint32_t n;
	if (len < 4)
		return -EINVAL;
	memcpy(&n, b, 4);
	n = ntohl(n);
	if (len != 4 + (size_t)n * 16)
		return -EINVAL;
	free(p->dd);
	p->dd = NULL;
	p->dd_cap = p->dd_n = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c, l;
		uint64_t w;
		memcpy(&c, b + 4 + 16 * (size_t)i, 4);
		memcpy(&l, b + 8 + 16 * (size_t)i, 4);
		memcpy(&w, b + 12 + 16 * (size_t)i, 8);
		if (c == 0)
			return -EINVAL;
		struct dedup *d = dd_find(p, ntohl(c), true);
		if (d == NULL)
			return -ENOMEM;
		d->last = ntohl(l);
		d->below = be64toh(w);
	}
	return 0;
}

void innet_paxos_trust_filter(struct innet_paxos *p, bool on)
{
	p->trust_filter = on;
}

void innet_paxos_get_stats(const struct innet_paxos *p, struct innet_paxos_stats *out)
{
	*out = p->st;
}

int innet_paxos_fd(const struct innet_paxos *p)
{
	return p->fd;
}

struct innet_paxos *innet_paxos_create(const struct innet_paxos_conf *conf, char *err,
				       size_t errlen)
{
	int e = EINVAL;
	if (conf->n_acceptors == 0 || conf->n_acceptors > INNET_PAXOS_MAX_ACCEPTORS) {
		snprintf(err, errlen, "need 1..%u acceptors, got %u", INNET_PAXOS_MAX_ACCEPTORS,
			 conf->n_acceptors);
		goto err;
	}
	struct innet_paxos *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory");
		goto err;
	}
	p->c = *conf;
	if (p->c.window == 0)
		p->c.window = 1024;
	if (p->c.retry_ms == 0)
		p->c.retry_ms = 100;
	if (p->c.deadline_ms == 0)
		p->c.deadline_ms = 5000;
	if (p->c.recover_ms == 0)
		p->c.recover_ms = 30;
	if (p->c.proposer_id == 0)
		p->c.proposer_id = 0xff;
	if (p->c.n_backups > INNET_PAXOS_MAX_BACKUPS)
		p->c.n_backups = INNET_PAXOS_MAX_BACKUPS;
	if (p->c.failover_ms == 0)
		p->c.failover_ms = 4 * p->c.retry_ms;
	if (getrandom(&p->rng, sizeof(p->rng), 0) != sizeof(p->rng) || p->rng == 0)
		p->rng = innet_now_ns() | 1;
	p->majority = conf->n_acceptors / 2 + 1;
	p->next = p->hi = conf->start;
	p->ring = calloc(p->c.window, sizeof(*p->ring));
	p->pend = calloc(MAX_PENDING, sizeof(*p->pend));
	p->pend_values = malloc((size_t)MAX_PENDING * PAXOS_VALUE_MAX);
	p->rx = malloc(RX_BURST * sizeof(*p->rx));
	if (p->ring == NULL || p->pend == NULL || p->pend_values == NULL || p->rx == NULL) {
		e = ENOMEM;
		snprintf(err, errlen, "out of memory (window %u)", p->c.window);
		goto err_free;
	}
	p->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		e = errno;
		snprintf(err, errlen, "socket: %s", strerror(e));
		goto err_free;
	}
	int buf = 8 << 20;
	setsockopt(p->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(conf->bind_ip),
				  .sin_port = htons(conf->bind_udp) };
	if (bind(p->fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		e = errno;
		snprintf(err, errlen, "bind %s:%u: %s", inet_ntoa(me.sin_addr), conf->bind_udp,
			 strerror(e));
		goto err_close;
	}
	for (uint32_t i = 0; i < MAX_PENDING; i++)
		p->pend[i].value = p->pend_values + (size_t)i * PAXOS_VALUE_MAX;
	p->client = innet_paxos_client_new(p);
	p->read_client = innet_paxos_client_new(p);
	return p;
err_close:
	close(p->fd);
err_free:
	free(p->ring);
	free(p->pend);
	free(p->pend_values);
	free(p->rx);
	free(p);
err:
	errno = e;
	return NULL;
}

void innet_paxos_destroy(struct innet_paxos *p)
{
	if (p == NULL)
		return;
	close(p->fd);
	free(p->ring);
	free(p->pend);
	free(p->pend_values);
	free(p->rx);
	free(p->dd);
	free(p);
}
