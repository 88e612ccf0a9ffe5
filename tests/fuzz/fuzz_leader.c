/*
 * fuzz_leader.c — libFuzzer target: the Paxos leader as a host process
 * (src/consensus/leader.c, innet_paxos_leader_*: the backup coordinator and
 * the host baseline's coordinator) reading REQUESTs, 1Bs and NACKs from the
 * network. Each input is a fresh leader bound to loopback and a sequence of
 * datagrams (fuzz_paxos_input.h) sent to its socket; after each,
 * innet_paxos_leader_process reads them with its own recvmmsg path. Every
 * acceptor address is a sink socket of the target's, where what the leader
 * sends (1As, 2As) is read back and checked.
 *
 *   byte 0   n_acceptors 1 + bits 0-2 % 5; bit 3: active (takes over at
 *            once); bit 4: the ballot store fails the first time; bits 5-6:
 *            min_round
 *   then     datagrams; a selector's bit 0 calls innet_paxos_leader_takeover
 *            first, bit 1 puts the leader's current ballot in a built
 *            packet (a 1B or NACK the leader is waiting for)
 *
 * Invariants (Paxos, as a coordinator must keep it):
 *   - every ballot the leader's messages carry was stored first (ballot_new
 *     returned 0 for it), is round << 8 | its proposer id with a round above
 *     min_round, and none is stored twice;
 *   - it sends a 2A at ballot b only after a majority of distinct acceptor
 *     ids promised b (1B at b), and never two different values (request id,
 *     bytes) for one instance at one ballot;
 *   - a REQUEST is turned into a 2A at most once, and the counters never
 *     count more REQUESTs than were sent.
 * ASan and UBSan watch every read of the datagrams.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/consensus.h"
#include "fuzz_paxos_input.h"

#define NAME "fuzz_leader"
#define CHECK(cond) FPX_CHECK(NAME, cond)
#define PROPOSER 0xfeu
#define MAX_BALLOTS 64u
#define MAX_2A 1024u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sent_2a {
	uint32_t ballot;
	uint64_t inst;
	uint64_t req;
	uint16_t vlen;
	uint64_t digest;
};

static int tx_fd, sink_fd;
static struct sockaddr_in sink_addr;
static uint8_t buf[FPX_RAW_MAX], rx[65536];

static struct {
	uint32_t min_round;
	bool fail_store;                 /* the next ballot_new fails */
	uint32_t stored[MAX_BALLOTS];    /* ballots ballot_new stored */
	uint32_t n_stored;
	uint32_t majority;
	struct { uint32_t ballot; uint64_t ids; } promised[MAX_BALLOTS]; /* 1Bs sent, by ballot */
	uint32_t n_promised;
	struct sent_2a sent[MAX_2A];     /* 2As the leader sent */
	uint32_t n_sent;
	uint64_t requests;               /* valid REQUESTs with a request id sent to it */
	uint64_t requests_all;           /* valid REQUESTs, request id 0 too */
} s;

static uint64_t digest(const uint8_t *v, uint32_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ v[i]) * 1099511628211ull;
	return h ^ len;
}

static int ballot_new(void *arg, uint32_t ballot)
{
	(void)arg;
	if (s.fail_store) {
		s.fail_store = false;
		return -EIO;
	}
	CHECK((ballot & 0xff) == PROPOSER && (ballot >> 8) > s.min_round);
	for (uint32_t i = 0; i < s.n_stored; i++)
		CHECK(s.stored[i] != ballot);
	if (s.n_stored < MAX_BALLOTS)
		s.stored[s.n_stored++] = ballot;
	return 0;
}

static bool stored(uint32_t ballot)
{
	for (uint32_t i = 0; i < s.n_stored; i++)
		if (s.stored[i] == ballot)
			return true;
	return s.n_stored == MAX_BALLOTS; /* (past what we keep: not judged) */
}

static uint64_t *promises(uint32_t ballot)
{
	for (uint32_t i = 0; i < s.n_promised; i++)
		if (s.promised[i].ballot == ballot)
			return &s.promised[i].ids;
	if (s.n_promised == MAX_BALLOTS)
		return NULL;
	s.promised[s.n_promised].ballot = ballot;
	return &s.promised[s.n_promised++].ids;
}

/* Note what a datagram sent to the leader tells it (on_packet's checks). */
static void record(const uint8_t *d, int n)
{
	const struct paxos_msg *m = (const struct paxos_msg *)d;
	if (n < (int)PAXOS_HDR_LEN || m->h.magic != INNET_MAGIC || m->h.version != INNET_VERSION ||
	    m->h.service != INNET_SVC_PAXOS)
		return;
	uint32_t vlen = ntohs(m->p.vlen);
	if (vlen > PAXOS_VALUE_MAX || (uint32_t)n != PAXOS_HDR_LEN + vlen)
		return;
	if (m->p.type == PAXOS_REQUEST) {
		s.requests_all++;
		s.requests += m->p.req_id != 0;
	}
	if (m->p.type == PAXOS_1B && ntohs(m->p.node) < INNET_PAXOS_MAX_ACCEPTORS) {
		uint64_t *ids = promises(ntohl(m->p.ballot));
		if (ids != NULL)
			*ids |= 1ull << ntohs(m->p.node);
	}
}

/* Read back what the leader sent to its acceptors, and judge it. */
static void check_sent(void)
{
	ssize_t n;
	while ((n = recv(sink_fd, rx, sizeof(rx), MSG_DONTWAIT)) >= 0) {
		const struct paxos_msg *m = (const struct paxos_msg *)rx;
		CHECK(n >= (ssize_t)PAXOS_HDR_LEN && m->h.magic == INNET_MAGIC &&
		      m->h.service == INNET_SVC_PAXOS);
		uint32_t vlen = ntohs(m->p.vlen), ballot = ntohl(m->p.ballot);
		CHECK(vlen <= PAXOS_VALUE_MAX && (size_t)n == PAXOS_HDR_LEN + vlen);
		CHECK(m->p.type == PAXOS_1A || m->p.type == PAXOS_2A);
		CHECK(stored(ballot));
		if (m->p.type != PAXOS_2A)
			continue;
		uint64_t *ids = promises(ballot);
		if (ids != NULL && (uint32_t)__builtin_popcountll(*ids) < s.majority) {
			fprintf(stderr, NAME ": a 2A at ballot %#x with promises from %d ids (majority %u)\n",
				ballot, __builtin_popcountll(*ids), s.majority);
			CHECK(0);
		}
		struct sent_2a a = { ballot, be64toh(m->p.instance), be64toh(m->p.req_id), (uint16_t)vlen,
				     digest(m->value, vlen) };
		bool seen = false;
		for (uint32_t i = 0; i < s.n_sent; i++) {
			const struct sent_2a *o = &s.sent[i];
			if (o->ballot != a.ballot || o->inst != a.inst)
				continue;
			if (o->req != a.req || o->vlen != a.vlen || o->digest != a.digest)
				fprintf(stderr, NAME ": two values for instance %llu at ballot %#x\n",
					(unsigned long long)a.inst, a.ballot);
			CHECK(o->req == a.req && o->vlen == a.vlen && o->digest == a.digest);
			seen = true;
		}
		if (!seen && s.n_sent < MAX_2A)
			s.sent[s.n_sent++] = a;
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	tx_fd = fpx_socket(NULL, 0);
	sink_fd = fpx_socket(&sink_addr, 8 << 20);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	memset(&s, 0, sizeof(s));
	fpx_drain(sink_fd);
	struct fpx_in in = { data + 1, size - 1 };
	uint8_t cfg = data[0];
	struct innet_paxos_leader_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = INADDR_LOOPBACK;
	c.n_acceptors = 1 + (cfg & 7) % 5;
	for (uint32_t i = 0; i < c.n_acceptors; i++)
		c.acceptors[i] = (struct innet_addr){ ntohl(sink_addr.sin_addr.s_addr), ntohs(sink_addr.sin_port) };
	c.proposer_id = PROPOSER;
	c.active = (cfg & 8) != 0;
	c.retry_ms = 1;     /* resends within an input */
	c.min_round = (cfg >> 5) & 3;
	c.ballot_new = ballot_new;
	s.min_round = c.min_round;
	s.fail_store = (cfg & 0x10) != 0;
	s.majority = c.n_acceptors / 2 + 1;
	char err[256];
	struct innet_paxos_leader *l = innet_paxos_leader_create(&c, err, sizeof(err));
	if (l == NULL) {
		fprintf(stderr, NAME ": innet_paxos_leader_create: %s\n", err);
		abort();
	}
	struct sockaddr_in to;
	socklen_t tl = sizeof(to);
	CHECK(getsockname(innet_paxos_leader_fd(l), (struct sockaddr *)&to, &tl) == 0);
	check_sent();

	uint8_t sel;
	int n;
	while ((n = fpx_next(&in, 0, buf, &sel)) >= 0) {
		if (sel & 1) {
			innet_paxos_leader_takeover(l);
			check_sent();
		}
		if ((sel & 2) && !(sel & 0x80))
			((struct paxos_msg *)buf)->p.ballot = htonl(innet_paxos_leader_ballot(l));
		record(buf, n);
		CHECK(sendto(tx_fd, buf, (size_t)n, 0, (struct sockaddr *)&to, sizeof(to)) == n);
		CHECK(innet_paxos_leader_process(l) == 0);
		check_sent();
	}
	struct innet_paxos_leader_stats st;
	innet_paxos_leader_get_stats(l, &st);
	/* a REQUEST is ordered (a 2A) at most once — at once, or when phase 1
	 * ends if it was held meanwhile — or dropped (request id 0, too many
	 * held), or forgotten as a resend of one held */
	CHECK(st.requests <= s.requests && st.held <= s.requests);
	CHECK(st.dropped <= s.requests_all);
	CHECK(st.requests == 0 || st.takeovers > 0);
	innet_paxos_leader_destroy(l);
	fpx_drain(sink_fd);
	return 0;
}
