/*
 * innet/consensus.h — the host side of in-network Paxos: one endpoint that is
 * a learner and, optionally, a proposer (docs/consensus.md).
 *
 *   proposer ──REQUEST──► coordinator (switch) ──2A──► acceptors (switches)
 *                                                         │ 2B (multicast)
 *   learner  ◄────────────────────────────────────────────┘
 *            ──RECOVER / 1A / 2A / TRIM──► acceptors (gap recovery, trim)
 *
 * Learner: counts 2B votes per instance for the highest ballot seen; an
 * instance is chosen when a majority of the N acceptors voted for it in one
 * ballot (any N up to 64). Chosen values are delivered in instance order,
 * each exactly once; a value whose request id was already delivered (a retry
 * chosen twice) is skipped (at most 64 requests in flight per client id).
 * A gap (instance not chosen while later ones are, or acceptors report a
 * higher `hi`) is recovered: first by asking the acceptors what they voted
 * (RECOVER), then, if no value is chosen, by phase 1 at a higher ballot and
 * a 2A of the highest-ballot vote found, or of a no-op. A learner that starts
 * late (or restarts) catches up the same way. innet_paxos_trim() reports the
 * delivered watermark so acceptors can reuse slots below it.
 *
 * Proposer: innet_paxos_propose() sends a value to the coordinator with a
 * request id (client << 32 | seq) and resends it with the same id until it is
 * chosen or the deadline passes; the `done` callback says at which instance.
 *
 * Reads without a log entry: innet_paxos_read_index() starts a read round
 * (READ to every acceptor); `read_done` gives its index once a majority
 * answered — every instance chosen before the call is below it, so a state
 * machine that has applied everything below the index may answer reads that
 * began before the call (docs/consensus.md, "Reads without a log entry").
 *
 * Threading: an endpoint is used by one thread. Errors: 0 or -errno;
 * innet_paxos_create returns NULL with errno and a message.
 */
#ifndef INNET_CONSENSUS_H
#define INNET_CONSENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest value: one innet packet less 56 bytes of headers (1992 with
 * INNET_PKT_MAX 2048) = PAXOS_VALUE_MAX (src/consensus/wire.h). */
#define INNET_PAXOS_VALUE_MAX  (INNET_PKT_MAX - 56u)
#define INNET_PAXOS_MAX_ACCEPTORS 64u
#define INNET_PAXOS_NO_TRIM    0xFFFFu  /* learner_id of an endpoint that never reports */
#define INNET_PAXOS_MAX_BACKUPS 4u      /* backup coordinators a proposer fails over to */

struct innet_paxos_conf {
	uint32_t bind_ip;                     /* this endpoint's address (host order) */
	uint16_t bind_udp;                    /* where 2Bs arrive (the acceptors' learner_udp) */
	struct innet_addr coordinator;        /* where REQUESTs go */
	struct innet_addr acceptors[INNET_PAXOS_MAX_ACCEPTORS]; /* for RECOVER/1A/2A/TRIM */
	uint32_t n_acceptors;                 /* N; a majority is N/2 + 1 */
	uint16_t learner_id;                  /* id in TRIM, or INNET_PAXOS_NO_TRIM */
	uint8_t proposer_id;                  /* low 8 bits of this endpoint's ballots (1..255;
	                                       * the coordinator's is in its "ballot") */
	uint32_t window;                      /* instances buffered ahead of delivery (default 1024) */
	uint32_t retry_ms;                    /* proposer: resend after (default 100) */
	uint32_t deadline_ms;                 /* proposer: give up after (default 5000) */
	uint32_t recover_ms;                  /* learner: recover a gap this old (default 30) */
	uint64_t start;                       /* first instance to deliver (default 0) */
	/* Coordinator failover (proposer side): when none of this endpoint's
	 * requests has been chosen for failover_ms (default 4 * retry_ms) while
	 * some are pending, it sends to the next of coordinator, backups[0], ...
	 * (round robin). A backup (innet_paxos_leader) takes over on the first
	 * REQUEST it receives. */
	struct innet_addr backups[INNET_PAXOS_MAX_BACKUPS];
	uint32_t n_backups;
	uint32_t failover_ms;
	/* A chosen value, in instance order, once per request id. req_id 0 is
	 * never delivered (no-ops). May be NULL. */
	void (*deliver)(void *arg, uint64_t instance, uint64_t req_id, const uint8_t *value,
			uint32_t len);
	/* A proposal ended: status 0 (chosen at instance), -ETIMEDOUT, -EMSGSIZE. */
	void (*done)(void *arg, uint64_t req_id, int status, uint64_t instance);
	/* A read round ended: status 0 with its index, or -ETIMEDOUT (no
	 * majority of acceptors answered within deadline_ms). May be NULL. */
	void (*read_done)(void *arg, uint64_t round, int status, uint64_t index);
	void *arg;
};

struct innet_paxos_stats {
	uint64_t delivered;        /* values delivered (excluding no-ops and duplicates) */
	uint64_t noops;            /* no-op instances skipped */
	uint64_t duplicates;       /* values skipped: request id already delivered */
	uint64_t votes;            /* 2B messages counted */
	uint64_t recover_sent;     /* RECOVER messages sent */
	uint64_t phase1_started;   /* instances taken through phase 1 by this learner */
	uint64_t proposed;         /* REQUESTs sent, including resends */
	uint64_t resent;
	uint64_t nacks;            /* NACKs received */
	uint64_t bad_packets;      /* received packets that were not valid Paxos replies */
	uint64_t failovers;        /* proposer moved to the next coordinator */
	uint64_t read_rounds;      /* read rounds started (innet_paxos_read_index) */
	uint64_t read_resent;      /* READs sent again (no majority yet) */
	uint64_t read_failed;      /* read rounds that timed out */
};

struct innet_paxos;

/* Create an endpoint: binds bind_ip:bind_udp. NULL + errno on failure, with a
 * message in err. */
struct innet_paxos *innet_paxos_create(const struct innet_paxos_conf *conf, char *err,
				       size_t errlen);
void innet_paxos_destroy(struct innet_paxos *p);

/* The socket to wait on (readable: call innet_paxos_process). */
int innet_paxos_fd(const struct innet_paxos *p);
/* Handle every waiting packet and every due timer, without blocking;
 * callbacks run from here. 0, or -ESTALE when the acceptors trimmed the log
 * below this learner's next instance (it needs a snapshot: see
 * innet_paxos_restart_at). */
int innet_paxos_process(struct innet_paxos *p);
/* Milliseconds until the next timer (for poll/epoll), or -1 if none. */
int innet_paxos_timeout_ms(const struct innet_paxos *p);
/* Wait up to timeout_ms for packets, then process. As innet_paxos_process. */
int innet_paxos_step(struct innet_paxos *p, int timeout_ms);

/* A fresh client id (random, so a restarted process never reuses one). */
uint32_t innet_paxos_client_new(struct innet_paxos *p);
/* Propose value with request id (client << 32 | seq); seq must grow per
 * client. 0, -EMSGSIZE (len > INNET_PAXOS_VALUE_MAX), -EINVAL (req_id 0),
 * -EEXIST (already in flight), -EAGAIN (256 in flight, or seq 64 or more
 * ahead of a pending request of the same client: the learners' dedup window),
 * -errno from send. */
int innet_paxos_propose(struct innet_paxos *p, uint64_t req_id, const void *value, uint32_t len);
/* A REQUEST datagram (for the coordinator's UDP port) carrying req_id and
 * value, written to buf: its length, or -EMSGSIZE (len above
 * INNET_PAXOS_VALUE_MAX), -EINVAL (req_id 0), -ENOBUFS (cap too small).
 * For proposers that send from sockets of their own (a load generator's
 * threads); innet_paxos_propose sends the same bytes. */
int innet_paxos_request_encode(void *buf, size_t cap, uint64_t req_id, const void *value,
			       uint32_t len);
/* Propose and wait: 0 with *instance where it was chosen, -ETIMEDOUT,
 * -EMSGSIZE. Uses this endpoint's own client id. */
int innet_paxos_submit(struct innet_paxos *p, const void *value, uint32_t len, uint64_t *instance);

/* Start a read round: READ to every acceptor, resent every recover_ms
 * (backing off to 8x) until a majority answered, given up after
 * deadline_ms. 0 with *round set (read_done names it), -EAGAIN (64 rounds
 * in flight), -errno. The index it ends with is above every instance chosen
 * before this call (an acceptor's `hi` is above every instance it voted in,
 * and the majority that chose one shares an acceptor with the majority that
 * answered); innet_paxos_delivered() reaching it means every such instance
 * was delivered. The learner also recovers the instances below the index
 * that it lacks, as for any gap. */
int innet_paxos_read_index(struct innet_paxos *p, uint64_t *round);

/* Next instance to deliver: everything below was delivered. */
uint64_t innet_paxos_delivered(const struct innet_paxos *p);
/* After -ESTALE: the acceptors' trim (a snapshot must reach at least this
 * instance); 0 when not stale. */
uint64_t innet_paxos_stale_trim(const struct innet_paxos *p);
/* Report the delivered watermark to every acceptor (TRIM). 0 or -errno. */
int innet_paxos_trim(struct innet_paxos *p);
/* Report this endpoint's delivered watermark under another learner's id:
 * for a learner removed from the group (down for good), so the acceptors'
 * trim — the minimum over learner ids — no longer waits for it. That learner
 * will need a snapshot if it comes back. 0, -EINVAL (id >= 0xffff). */
int innet_paxos_trim_as(struct innet_paxos *p, uint16_t learner_id);
/* Continue from instance `next` (after installing a snapshot that covers
 * everything below it); forgets buffered votes. */
void innet_paxos_restart_at(struct innet_paxos *p, uint64_t next);
void innet_paxos_get_stats(const struct innet_paxos *p, struct innet_paxos_stats *out);
/* Trust the quorum mark on 2Bs (PAXOS_F_QUORUM, docs/protocol.md): a 2B
 * carrying it counts as a majority's votes. Only for a learner whose every
 * 2B comes through the learner filter it attached itself (innet paxos bench
 * --learner-filter: an XDP program that counts the 2Bs, passes one per
 * quorum with the mark and clears it on the others); otherwise anyone could
 * forge it. Off by default. */
void innet_paxos_trust_filter(struct innet_paxos *p, bool on);

/* The learner's deduplication state (per client id: the highest sequence
 * delivered and the 64 below it), which a snapshot taken at
 * innet_paxos_delivered() must carry: a resend chosen again after the
 * snapshot point is skipped only if the new replica knows it was delivered.
 * Format: u32 n, then n x (u32 client, u32 last, u64 window), big-endian.
 * _size: bytes needed; _save: bytes written (0 if len is too small); _load:
 * replaces the state, 0 or -EINVAL (malformed) / -ENOMEM. */
size_t innet_paxos_dedup_size(const struct innet_paxos *p);
size_t innet_paxos_dedup_save(const struct innet_paxos *p, void *buf, size_t len);
int innet_paxos_dedup_load(struct innet_paxos *p, const void *buf, size_t len);

/* ---- Leader: a coordinator as a host process ------------------------------
 *
 * The coordinator role (REQUEST -> 2A with the next instance and its ballot)
 * run by a host, as the backup of the coordinator switch (failover) or as the
 * host-based baseline. Before it orders anything it runs phase 1:
 *
 *   1. 1A(b, lo) with PAXOS_F_RANGE to every acceptor: a majority promising
 *      b for every instance. Their replies carry trim and hi; lo moves up to
 *      the highest trim (below it everything was delivered everywhere).
 *   2. 1A(b, i) for every i in [lo, hi) (hi: max over the replies): with a
 *      majority of 1Bs, 2A(b, i, highest-vballot value) — or a no-op if no
 *      acceptor of the majority voted. A NACK(trimmed) means i is decided.
 *   3. Serve: REQUEST -> 2A(b, next++, value), next starting at hi.
 *
 * A NACK(ballot) during 1 or 2 restarts at a higher ballot. A backup
 * (active = false) starts this on the first REQUEST it receives (proposers
 * fail over to it when the coordinator stops answering), or on
 * innet_paxos_leader_takeover(). */
struct innet_paxos_leader_conf {
	uint32_t bind_ip;                     /* requests arrive, 1B/NACKs return here */
	uint16_t bind_udp;
	struct innet_addr acceptors[INNET_PAXOS_MAX_ACCEPTORS];
	uint32_t n_acceptors;
	uint8_t proposer_id;                  /* low 8 bits of its ballots (default 0xfe) */
	bool active;                          /* take over at once (else: on first REQUEST) */
	uint32_t retry_ms;                    /* resend phase-1 messages after (default 20) */
	/* A ballot must never be used twice: a restarted leader that took its
	 * old ballot again could have two values chosen in one instance. Its
	 * takeovers use rounds above min_round (the highest round it used
	 * before), and ballot_new (if set) is called with each new ballot
	 * before any message carries it — to store its round durably; non-zero
	 * = not stored: the takeover is abandoned (counted, retried on the next
	 * trigger). */
	uint32_t min_round;
	int (*ballot_new)(void *arg, uint32_t ballot);
	void *arg;
};

struct innet_paxos_leader_stats {
	uint64_t takeovers;        /* phase 1 started (incl. restarts at a higher ballot) */
	uint64_t ballot_failures;  /* takeovers abandoned: ballot_new could not store the ballot */
	uint64_t recovered;        /* instances re-proposed with a value found in phase 1 */
	uint64_t noops;            /* holes filled with a no-op */
	uint64_t requests;         /* REQUESTs turned into 2As */
	uint64_t held;             /* REQUESTs held during phase 1, ordered when it ended */
	uint64_t dropped;          /* REQUESTs dropped (invalid, or over 1024 held) */
	uint64_t nacks;
	uint64_t rx_datagrams;     /* datagrams received ... */
	uint64_t rx_calls;         /* ... in this many recvmmsg calls that returned some */
	uint64_t tx_datagrams;     /* datagrams sent ... */
	uint64_t tx_calls;         /* ... in this many sendmmsg calls */
};

struct innet_paxos_leader;

struct innet_paxos_leader *innet_paxos_leader_create(const struct innet_paxos_leader_conf *conf,
						     char *err, size_t errlen);
void innet_paxos_leader_destroy(struct innet_paxos_leader *l);
int innet_paxos_leader_fd(const struct innet_paxos_leader *l);
/* Handle waiting packets and timers without blocking. 0. */
int innet_paxos_leader_process(struct innet_paxos_leader *l);
/* Wait up to timeout_ms, then process. */
int innet_paxos_leader_step(struct innet_paxos_leader *l, int timeout_ms);
/* Start phase 1 now (with a ballot above any seen). */
void innet_paxos_leader_takeover(struct innet_paxos_leader *l);
/* True once phase 1 is done and requests are ordered. */
bool innet_paxos_leader_serving(const struct innet_paxos_leader *l);
/* Its ballot (0 before the first takeover) and the next instance it hands out. */
uint32_t innet_paxos_leader_ballot(const struct innet_paxos_leader *l);
uint64_t innet_paxos_leader_next(const struct innet_paxos_leader *l);
void innet_paxos_leader_get_stats(const struct innet_paxos_leader *l,
				  struct innet_paxos_leader_stats *out);

/* Complete the join of a restarted acceptor switch program (setting
 * "join": true, which starts it silent) from the control plane: it will
 * answer nothing below J = max(coord_next; over the others: hi, trim and the
 * highest instance in any slot) and refuse ballots below JB = the highest
 * range promise of the others. `others` must be at least n_acceptors -
 * majority + 1 of the other acceptors' program instances (alive);
 * coord_next and coord_ballot are those of the coordinator in charge, read
 * after the joiner stopped answering: the coordinator switch's "next" and
 * "ballot" registers, or, after a backup leader took over,
 * innet_paxos_leader_next and _ballot of the serving leader. 0, -EINVAL
 * (too few others), -ESTALE (the others promised a ballot above
 * coord_ballot: that coordinator was superseded; nothing written), -errno.
 * docs/consensus.md, "Acceptor restart", has why this never lets it vote
 * twice in an instance or break a promise it gave before it died. */
struct innet_cp;
int innet_paxos_acceptor_join(struct innet_cp *joiner, struct innet_cp *const *others,
			      uint32_t n_others, uint32_t n_acceptors, uint64_t coord_next,
			      uint32_t coord_ballot);

/* Request id helpers. */
static inline uint64_t innet_paxos_req_id(uint32_t client, uint32_t seq)
{
	return ((uint64_t)client << 32) | seq;
}

#ifdef __cplusplus
}
#endif
#endif /* INNET_CONSENSUS_H */
