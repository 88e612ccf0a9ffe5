/*
 * fuzz_learner.c — libFuzzer target: the Paxos learner and proposer
 * endpoint (src/consensus/paxos.c, innet_paxos_*) reading datagrams from the
 * network. Each input is a fresh endpoint (a small window, so the ring
 * wraps) bound to loopback and a sequence of datagrams (fuzz_paxos_input.h)
 * sent to its socket from another; after each, innet_paxos_process reads
 * them with its own recvmmsg path. What the endpoint sends (RECOVER, 1A,
 * 2A, REQUEST) goes to a sink socket of the target's, drained.
 *
 *   byte 0   n_acceptors 1 + bits 0-2 % 5; bit 3: trust the learner
 *            filter's QUORUM flag; bit 4: proposer only (no deliver
 *            callback); bits 5-6: start instance (0, 1000, 2^63, 2^64 - 40)
 *   then     datagrams; a selector's bit 0 proposes a request first
 *            (innet_paxos_propose: req_id from bits 1-3, so a later 2B or
 *            NACK can name it), bit 1 loads a deduplication state (a
 *            snapshot's, from the datagram's bytes instead of sending it),
 *            bit 4 waits 1.2 ms before the endpoint processes (its recovery
 *            period is 1 ms: RECOVER, then phase 1 of a gap, then phase 2)
 *
 * Invariants (the learner's contract, innet/consensus.h):
 *   - values are delivered in instance order, each instance once, and a
 *     request id of a client other than 0 at most once;
 *   - a delivered (instance, request, value) is one that some 2B sent for
 *     that instance carried, at a ballot at which a majority of distinct
 *     acceptor ids voted — or, when the filter is trusted, at which a 2B had
 *     the QUORUM flag;
 *   - a proposal ends (done) at most once, and only for a request proposed;
 *     the same id may be proposed again once its proposal ended (-EEXIST
 *     exactly while one is open);
 *   - innet_paxos_process returns 0 or -ESTALE, and -ESTALE only with the
 *     delivered-only learner told of a trim past it.
 * ASan and UBSan watch every read of the datagrams.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "innet/consensus.h"
#include "fuzz_paxos_input.h"

#define NAME "fuzz_learner"
#define CHECK(cond) FPX_CHECK(NAME, cond)
#define MAX_VOTES 512u
#define MAX_REQS  64u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a 2B the target sent */
struct vote {
	uint64_t inst;
	uint32_t ballot;
	uint16_t node;
	bool quorum;         /* PAXOS_F_QUORUM set */
	bool empty;          /* status EMPTY: no vote */
	uint64_t req;
	uint16_t vlen;
	uint64_t digest;     /* of the value */
};

static int tx_fd, sink_fd;
static struct sockaddr_in sink_addr;
static uint8_t buf[FPX_RAW_MAX];

static struct {
	struct vote votes[MAX_VOTES];
	uint32_t n_votes;
	uint32_t majority;
	bool trust;
	bool have_last;
	uint64_t last_inst;
	uint64_t delivered_reqs[MAX_REQS];
	uint32_t n_delivered_reqs;
	uint32_t n_proposed;        /* proposals accepted (at most MAX_REQS) */
	uint64_t open[MAX_REQS];    /* request ids proposed and not yet done */
	uint32_t n_open;
} s;

static uint64_t digest(const uint8_t *v, uint32_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h ^ len;
}

/* Record a datagram as the learner will judge it (on_packet's checks). */
static void record(const uint8_t *d, int n)
{
	const struct paxos_msg *m = (const struct paxos_msg *)d;
	if (n < (int)PAXOS_HDR_LEN || m->h.magic != INNET_MAGIC || m->h.version != INNET_VERSION ||
	    m->h.service != INNET_SVC_PAXOS || m->p.type != PAXOS_2B)
		return;
	uint32_t vlen = ntohs(m->p.vlen);
	if (vlen > PAXOS_VALUE_MAX || (uint32_t)n != PAXOS_HDR_LEN + vlen || s.n_votes == MAX_VOTES)
		return;
	s.votes[s.n_votes++] = (struct vote){
		.inst = be64toh(m->p.instance), .ballot = ntohl(m->p.ballot), .node = ntohs(m->p.node),
		.quorum = (m->h.flags & PAXOS_F_QUORUM) != 0, .empty = m->p.status == PAXOS_ST_EMPTY,
		.req = be64toh(m->p.req_id), .vlen = (uint16_t)vlen, .digest = digest(m->value, vlen) };
}

/* Was (inst, ballot) chosen as far as the 2Bs sent tell: a majority of
 * distinct acceptor ids voted it, or (the filter trusted) a 2B of it carried
 * the QUORUM mark? (Which value: any of that ballot's — in Paxos a ballot
 * has one value; a sender that puts two in one ballot breaks the protocol,
 * not the learner.) */
static bool chosen_at(uint64_t inst, uint32_t ballot)
{
	uint64_t ids = 0;
	for (uint32_t i = 0; i < s.n_votes; i++) {
		const struct vote *v = &s.votes[i];
		if (v->inst != inst || v->ballot != ballot || v->empty || v->node >= 64)
			continue;
		if (s.trust && v->quorum)
			return true;
		ids |= 1ull << v->node;
	}
	return (uint32_t)__builtin_popcountll(ids) >= s.majority;
}

static void on_deliver(void *arg, uint64_t inst, uint64_t req, const uint8_t *value, uint32_t len)
{
	(void)arg;
	/* in order, each instance once */
	CHECK(!s.have_last || inst > s.last_inst);
	s.have_last = true;
	s.last_inst = inst;
	/* a request id once (client 0 is never deduplicated) */
	CHECK(req != 0);
	if (req >> 32 != 0) {
		for (uint32_t i = 0; i < s.n_delivered_reqs; i++)
			CHECK(s.delivered_reqs[i] != req);
		if (s.n_delivered_reqs < MAX_REQS)
			s.delivered_reqs[s.n_delivered_reqs++] = req;
	}
	/* chosen: carried by a 2B of a ballot a majority voted (or a trusted
	 * QUORUM mark) */
	uint64_t dg = digest(value, len);
	bool ok = false;
	for (uint32_t i = 0; i < s.n_votes && !ok; i++) {
		const struct vote *v = &s.votes[i];
		if (v->inst != inst || v->empty || v->req != req || v->vlen != len || v->digest != dg)
			continue;
		ok = chosen_at(inst, v->ballot);
	}
	if (!ok)
		fprintf(stderr, NAME ": instance %llu delivered request %llx (%u bytes) that no majority chose\n",
			(unsigned long long)inst, (unsigned long long)req, len);
	CHECK(ok);
}

static void on_done(void *arg, uint64_t req, int status, uint64_t inst)
{
	(void)arg;
	(void)inst;
	CHECK(status == 0 || status == -ETIMEDOUT || status == -EMSGSIZE);
	/* a proposal open (an id may be proposed again once its last proposal
	 * ended: each proposal ends once) */
	uint32_t i = 0;
	while (i < s.n_open && s.open[i] != req)
		i++;
	CHECK(i < s.n_open);
	s.open[i] = s.open[--s.n_open];
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tx_fd = fpx_socket(NULL, 0);
	sink_fd = fpx_socket(&sink_addr, 1 << 20);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t starts[4] = { 0, 1000, 1ull << 63, UINT64_MAX - 40 };
	if (size < 1)
		return 0;
	memset(&s, 0, sizeof(s));
	struct fpx_in in = { data + 1, size - 1 };
	uint8_t cfg = data[0];
	struct innet_paxos_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = INADDR_LOOPBACK;
	c.n_acceptors = 1 + (cfg & 7) % 5;
	struct innet_addr sink = { ntohl(sink_addr.sin_addr.s_addr), ntohs(sink_addr.sin_port) };
	c.coordinator = sink;
	for (uint32_t i = 0; i < c.n_acceptors; i++)
		c.acceptors[i] = sink;
	c.learner_id = 1;
	c.proposer_id = 7;
	c.window = 8;
	c.recover_ms = 1;   /* recovery runs within an input */
	c.retry_ms = 1;
	c.start = starts[(cfg >> 5) & 3];
	bool learner = !(cfg & 0x10);
	if (learner)
		c.deliver = on_deliver;
	c.done = on_done;
	char err[256];
	struct innet_paxos *p = innet_paxos_create(&c, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, NAME ": innet_paxos_create: %s\n", err);
		abort();
	}
	s.majority = c.n_acceptors / 2 + 1;
	s.trust = (cfg & 8) != 0;
	innet_paxos_trust_filter(p, s.trust);
	struct sockaddr_in to;
	socklen_t tl = sizeof(to);
	CHECK(getsockname(innet_paxos_fd(p), (struct sockaddr *)&to, &tl) == 0);

	uint8_t sel;
	int n;
	while ((n = fpx_next(&in, c.start, buf, &sel)) >= 0) {
		if ((sel & 1) && s.n_proposed < MAX_REQS) {
			uint64_t req = innet_paxos_req_id(1 + (sel >> 1 & 1), (sel >> 2 & 3) + 1);
			int rc = innet_paxos_propose(p, req, "fuzz", 4);
			CHECK(rc == 0 || rc == -EEXIST || rc == -EAGAIN);
			/* -EEXIST exactly while a proposal of that id is open */
			bool open = false;
			for (uint32_t i = 0; i < s.n_open; i++)
				open |= s.open[i] == req;
			CHECK(open == (rc == -EEXIST));
			if (rc == 0) {
				s.n_proposed++;
				s.open[s.n_open++] = req;
			}
		}
		if (sel & 2) {
			/* a snapshot's deduplication state, from the bytes as given */
			int rc = innet_paxos_dedup_load(p, buf, (size_t)n);
			CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
			s.n_delivered_reqs = 0; /* the snapshot decides what was delivered */
			continue;
		}
		record(buf, n);
		CHECK(sendto(tx_fd, buf, (size_t)n, 0, (struct sockaddr *)&to, sizeof(to)) == n);
		if (sel & 0x10)
			nanosleep(&(struct timespec){ 0, 1200000 }, NULL);
		int rc = innet_paxos_process(p);
		CHECK(rc == 0 || (rc == -ESTALE && learner && innet_paxos_stale_trim(p) != 0));
		fpx_drain(sink_fd);
	}
	struct innet_paxos_stats st;
	innet_paxos_get_stats(p, &st);
	CHECK(st.delivered <= s.n_votes);
	innet_paxos_destroy(p);
	fpx_drain(sink_fd);
	return 0;
}
