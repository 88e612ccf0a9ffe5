/*
 * consensus/kv.h — the replicated key-value store behind `innet kv`: a RESP
 * (Redis protocol) server whose writes and reads go through the Paxos log
 * (innet/consensus.h), applied in log order by every replica.
 */
#ifndef INNET_CONSENSUS_KV_H
#define INNET_CONSENSUS_KV_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/consensus.h"

#define KV_MAX_PEERS      16u  /* other replicas to ask for a snapshot */
#define KV_MAX_WINDOW     32u  /* entries of one replica in flight (< the dedup window 64) */
#define KV_WINDOW_DEFAULT 8u

struct kv_conf {
	uint32_t listen_ip;                 /* RESP clients connect here (host order) */
	uint16_t listen_port;
	struct innet_paxos_conf paxos;      /* the replica's learner/proposer */
	uint32_t trim_ms;                   /* report the watermark this often (default 50) */
	uint32_t window;                    /* entries of this replica in flight, 1..KV_MAX_WINDOW
	                                     * (0: kv_window_default(entry_max)) */
	uint32_t entry_max;                 /* bytes of one log entry at most, batching stops
	                                     * there (0: PAXOS_VALUE_MAX); a single connection's
	                                     * group larger than it still goes, alone */
	uint32_t n_learners;                /* replicas of the log: learner ids 0..n-1 (REPLICA
	                                     * REMOVE|ADD); 0 = not known, 64 accepted */
	struct innet_addr peers[KV_MAX_PEERS]; /* other replicas' RESP addresses (ip, TCP port):
	                                     * a snapshot comes from one of them when the
	                                     * acceptors trimmed the log past this replica */
	uint32_t n_peers;
	volatile sig_atomic_t *stop;        /* serve until *stop != 0 */
	bool metrics;                       /* serve the INFO counters in the Prometheus text
	                                     * format over HTTP (innet/metrics.h) on */
	uint32_t metrics_ip;                /* metrics_ip:metrics_port (host order; port 0: */
	uint16_t metrics_port;              /* any free port, printed on stderr) */
	const char *name;                   /* the replica's name (its host): the metrics'
	                                     * "replica" label; NULL: "learner<ID>" */
	bool reads_log;                     /* read-only commands through the log, as writes
	                                     * (else from a read index: docs/consensus.md) */
	bool trust_filter;                  /* the caller attached the learner filter (quorum
	                                     * mode) to every interface 2Bs arrive on */
	uint64_t max_bulk;                  /* proto-max-bulk-len: an argument longer is a
	                                     * protocol error (0: 512 MiB, redis's default;
	                                     * 1 MiB .. 1 GiB) */
};

/* Serve until *stop. 0, or -errno (with a message on stderr) if it cannot start. */
int kv_serve(const struct kv_conf *c);
/* A memory amount as redis writes one ("64mb", "1gb", "1048576"; k = 1000,
 * kb = 1024, m, mb, g, gb): 0 or -EINVAL. */
int kv_parse_memory(const char *p, size_t n, unsigned long long *out);

/* ---- the KV store in a topology file (kv_topology.c) ----------------------- */

struct innet_topology;
/* The Paxos endpoints of host `host`: coordinator, acceptors and backup
 * coordinators as seen from it, its learner id. 0, or -EINVAL with the
 * reason in err. */
int kv_topology_paxos_conf(const struct innet_topology *t, int host, struct innet_paxos_conf *pc,
			   char *err, size_t errlen);
/* Host h is a replica (linked to the acceptors and one of their learners)... */
bool kv_topology_is_replica(const struct innet_topology *t, uint32_t h);
/* ... or a backup coordinator (linked to them, not a learner). */
bool kv_topology_is_leader_host(const struct innet_topology *t, uint32_t h);
/* The acceptors as host h reaches them (up to INNET_PAXOS_MAX_ACCEPTORS
 * into out); how many. */
uint32_t kv_topology_acceptors(const struct innet_topology *t, uint32_t h, struct innet_addr *out);
/* The learner ids the acceptors keep a watermark for (their trim group). */
uint32_t kv_topology_trim_learners(const struct innet_topology *t);
/* Backup coordinator h's proposer id: 0xfe, 0xfd, ... in topology order,
 * so that two backups never use the same ballot. */
/* Netns mode: the largest log entry that fits one frame of the topology's
 * smallest link MTU (IP, UDP and the Paxos header taken off), so that no
 * entry is fragmented — fragments cost reassembly at every hop and, on the
 * XDP target, leave the fast path. 0 (no limit) on loopback. */
uint32_t kv_topology_entry_max(const struct innet_topology *t);
/* A replica's entries in flight when not set: KV_WINDOW_DEFAULT full-size
 * entries' worth of bytes. When entries stop at entry_max (netns mode: one
 * frame of the smallest link), more of them — the same bytes in flight, up
 * to KV_MAX_WINDOW — so that small entries do not cap a replica's
 * throughput at window x entry / round trip. */
uint32_t kv_window_default(uint32_t entry_max);
uint8_t kv_topology_leader_id(const struct innet_topology *t, uint32_t h);

/* ---- exposed for tests ---------------------------------------------------- */

struct kv_store;
struct kv_buf {
	char *p;
	size_t len, cap;
	bool oom;       /* an append failed for want of memory: the contents are short */
};

struct kv_store *kv_store_create(void);
void kv_store_destroy(struct kv_store *s);
/* Apply one command (argv/lens, argc >= 1) and append its RESP reply to out.
 * Deterministic: the same commands in the same order give the same state. */
void kv_store_apply(struct kv_store *s, int argc, char *const *argv, const size_t *lens,
		    struct kv_buf *out);
uint64_t kv_store_digest(const struct kv_store *s);
/* A write found no memory: this copy missed part of the log and must not
 * serve any more (kv_serve then stops with -ENOMEM). */
bool kv_store_oom(const struct kv_store *s);
/* The number of replicas of the log (learner ids 0..n-1), for REPLICA
 * REMOVE|ADD's checks; and the mask of learner ids removed from the trim
 * group (docs/consensus.md, "Removing a replica"). */
void kv_store_set_learners(struct kv_store *s, uint32_t n_learners);
uint64_t kv_store_removed(const struct kv_store *s);

/* Parse one command from buf[0..len): returns bytes consumed (> 0) with
 * argc/argv/lens filled (pointers into scratch), 0 if incomplete, or -1 with
 * a RESP error message in err (protocol error: the connection closes). A
 * bulk string longer than max_bulk (proto-max-bulk-len) is an error. */
ssize_t kv_resp_parse(const char *buf, size_t len, int *argc, char **argv, size_t *lens,
		      int max_args, size_t max_bulk, char *scratch, size_t scratch_len, char *err,
		      size_t errlen);

/* True if v[0..len) is a complete, well-formed log entry of the KV batch
 * format (docs/protocol.md 2.2); replicas skip any other entry whole. */
bool kv_entry_valid(const uint8_t *v, uint32_t len);

/* Append n bytes: 0, or -ENOMEM (nothing appended, b->oom set: the owner
 * drops what it was building — the connection, the snapshot). */
int kv_buf_append(struct kv_buf *b, const void *p, size_t n);
void kv_buf_free(struct kv_buf *b);

#endif
