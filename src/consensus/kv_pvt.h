/*
 * kv_pvt.h — what the KV store's sources share (kv_store.c, kv_resp.c,
 * kv_server.c, kv_snapshot.c): limits, the log entry's layout (kv_server.c's
 * header comment draws it), the store, and the server's state, which
 * kv_snapshot.c reads and replaces.
 */
#ifndef INNET_CONSENSUS_KV_PVT_H
#define INNET_CONSENSUS_KV_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consensus/kv.h"
#include "consensus/wire.h"

#define KV_MAX_ARGS    1024
#define KV_INBUF_MAX   (1u << 20)
#define KV_MAX_CONNS   4096
#define KV_QUEUED      UINT64_MAX /* a write unit's entry: it waits for the next entry */
#define KV_CONN_UNITS  16u        /* units (runs of commands) of one connection at most */
#define KV_READ_SLOTS  64u        /* read rounds running or still referenced by units */
#define KV_READ_WINDOW 4u         /* read rounds of one replica in flight at most */
#define KV_ENTRY_MAGIC0  'K'
#define KV_ENTRY_MAGIC1  'V'
#define KV_ENTRY_VERSION 1u
#define KV_SNAPSHOT_VERSION 3u
#define KV_ENTRY_HDR   6u         /* 'K' 'V' version flags, u16 n_groups */
#define KV_ENTRY_F_WIDE  0x01u    /* entry flags: argc and argument lengths are u32 */
#define KV_ENTRY_F_CHUNK 0x02u    /* a chunk of a larger entry (kv_chunk.c) */
#define KV_CHUNK_HDR   (KV_ENTRY_HDR + 16u) /* + u64 id, u32 total, u32 offset */
#define KV_BIG_MAX     8u         /* large entries being reassembled at once */
#define KV_BIG_TOTAL_MAX ((1u << 30) + (1u << 20)) /* bytes of one large entry at most */
#define KV_BULK_MAX_LIMIT (1ull << 30) /* proto-max-bulk-len at most */
#define KV_BULK_MAX_DEFAULT (512ull << 20) /* proto-max-bulk-len by default (redis's) */
#define KV_GROUP_HDR   6u         /* u32 client, u16 n_commands */
#define KV_GROUP_MAX   (PAXOS_VALUE_MAX - KV_ENTRY_HDR - KV_GROUP_HDR) /* commands of one group */


/* The store (kv_store.c); the server reads it for snapshots. */
struct kv_item {
	struct kv_item *next;
	uint64_t hash;
	size_t klen, vlen;
	char *val;
	char key[];
};

struct kv_store {
	struct kv_item **tab;
	size_t cap, n;
	uint64_t removed;      /* learner ids removed from the trim group (REPLICA REMOVE) */
	uint32_t n_learners;   /* replicas of the log (learner ids 0..n-1); 0 = not known */
	bool oom;              /* a write found no memory: this copy is no longer the log's */
};

/* kv_store.c's helpers the server and the RESP parser use. */
void kv_buf_str(struct kv_buf *b, const char *s);
void kv_buf_num(struct kv_buf *b, char prefix, long long v);
void kv_buf_bulk(struct kv_buf *b, const char *p, size_t n);
void kv_buf_consume(struct kv_buf *b, size_t n);
bool kv_parse_ll(const char *p, size_t n, long long *out);
/* The index of a command that goes through the log, or -1; its arity; the
 * arity error redis answers. */
int kv_logged_index(const char *name);
/* Command li only reads the store (KV_CMD_READ): a replica may answer it
 * from a read index instead of a log entry. */
#define KV_CMD_READ 0x1u
bool kv_logged_readonly(int li);
bool kv_arity_ok(int li, int argc);
void kv_arity_error(struct kv_buf *out, int li);
/* Set key k to v (a copy); out of memory marks the store (kv_store_oom). */
void kv_store_set(struct kv_store *s, const char *k, size_t kl, const char *v, size_t vl);

/* The server (kv_server.c); kv_snapshot.c builds snapshots of it and
 * installs them into it. One thread: kv_serve's. */
struct conn;                       /* a client connection (kv_server.c) */

/* Per-stage counters of one replica (INFO, and stderr at exit). The times
 * are wall-clock nanoseconds spent in each stage of the event loop. */
struct kv_stats {
	uint64_t loops;            /* event-loop passes */
	uint64_t entries_proposed; /* log entries this replica proposed */
	uint64_t groups_proposed;  /* connection groups in them */
	uint64_t cmds_proposed;    /* commands in them */
	uint64_t bytes_proposed;   /* value bytes in them */
	uint64_t window_full;      /* proposals deferred: `window` entries already in flight */
	uint64_t entries_applied;  /* log entries applied (every replica's) */
	uint64_t cmds_applied;
	uint64_t entries_bad;      /* entries skipped: not the KV batch format (counted, logged) */
	uint64_t snapshots_served; /* SNAPSHOT answered */
	uint64_t snapshots_installed;
	uint64_t snapshot_failures; /* a peer gave none, or one that was unusable */
	uint64_t reads_local;      /* read-only commands answered from a read index */
	uint64_t read_rounds;      /* read rounds begun */
	uint64_t read_rounds_failed; /* read rounds that timed out */
	uint64_t chunks_proposed;  /* chunk entries of large writes proposed */
	uint64_t chunks_applied;   /* chunk entries applied (every replica's) */
	uint64_t bigs_applied;     /* large entries put back together and applied */
	uint64_t conns_oom;        /* connections closed: a request or answer found no memory */
	uint64_t ns_wait;          /* epoll_wait */
	uint64_t ns_clients;       /* reading and parsing RESP, local replies */
	uint64_t ns_propose;       /* encoding entries, sending REQUESTs */
	uint64_t ns_learn;         /* innet_paxos_process: 2B/NACK handling, delivery (incl. apply, reply) */
	uint64_t ns_apply;         /* applying entries to the store */
	uint64_t ns_reply;         /* sending replies to the connections of applied groups */
};

/* A read round of the server: the reads of every connection parsed before
 * it began wait for its index (docs/consensus.md, "Reads without a log
 * entry"). Units refer to it by slot until they are answered. */
struct kv_read_round {
	uint64_t id;              /* the library's round id */
	uint64_t index;           /* status 0: every instance below it applied first */
	int status;               /* 0 or -ETIMEDOUT once ended */
	uint8_t state;            /* KV_RR_FREE, KV_RR_RUNNING, KV_RR_DONE */
	uint32_t refs;            /* units waiting on it */
};
enum { KV_RR_FREE = 0, KV_RR_RUNNING, KV_RR_DONE };

/* A large entry being reassembled from its chunks (kv_chunk.c): replicated
 * state, in snapshots. */
struct kv_big {
	uint64_t id;              /* proposer's client id << 32 | its count */
	uint64_t first;           /* instance of the first chunk applied */
	uint32_t total, got;      /* bytes of the whole, bytes come */
	uint8_t *buf;             /* total bytes */
};

struct server {
	const struct kv_conf *c;
	int ep, lfd;
	struct innet_paxos *px;
	struct kv_store *store;
	struct conn *conns[KV_MAX_CONNS];
	uint32_t n_conns;
	struct kv_buf scratch_out;
	char *scratch;
	char *argv[KV_MAX_ARGS];
	size_t lens[KV_MAX_ARGS];
	uint8_t batch[PAXOS_VALUE_MAX];
	uint8_t entry[PAXOS_VALUE_MAX];
	uint32_t client;          /* this replica's client id (entries' request ids) */
	uint32_t seq;
	uint32_t window;          /* entries of ours in flight at most */
	uint32_t entry_max;       /* bytes of one entry at most (batching stops there) */
	struct conn *queue[KV_MAX_CONNS]; /* groups waiting for an entry, in order */
	uint32_t n_queue;
	bool reads_log;           /* read-only commands through the log (--reads log) */
	struct kv_read_round rounds[KV_READ_SLOTS];
	uint32_t rounds_running;
	struct conn *rq[KV_MAX_CONNS];    /* connections with reads not in a round yet */
	uint32_t n_rq;
	struct conn *rwait[KV_MAX_CONNS]; /* connections whose next reply is a read waiting
	                                   * for its round or for the log to reach its index */
	uint32_t n_rwait;
	bool reads_moved;         /* a round ended: look at rwait */
	uint64_t rwait_next;      /* the log position rwait was last looked at */
	uint64_t max_bulk;        /* proto-max-bulk-len: an argument longer is a protocol error */
	size_t query_max;         /* one command's bytes at most (max_bulk + 1 MiB) */
	size_t scratch_cap;       /* bytes of scratch (query_max + 1) */
	struct kv_big bigs[KV_BIG_MAX]; /* large entries being reassembled */
	uint32_t n_bigs;
	struct conn *bigq[KV_MAX_CONNS]; /* connections whose large write waits its turn */
	uint32_t n_bigq;
	struct conn *big_conn;    /* the one whose chunks go out now (or NULL) */
	uint64_t big_id;          /* its image's id */
	uint32_t big_off;         /* bytes of it in chunks proposed so far */
	uint32_t big_seq;         /* this replica's count of large entries */
	uint64_t big_reqs[KV_MAX_WINDOW]; /* chunk entries of ours in flight (0 = free) */
	uint64_t big_req_of[KV_MAX_WINDOW]; /* ... and the large entry each is part of */
	bool oom;                 /* out of memory applying the log: this copy stops */
	uint64_t batches[KV_MAX_WINDOW]; /* entries in flight (0 = free) */
	uint32_t n_batches;
	bool bad_logged;
	uint64_t tentative_until[64]; /* REPLICA REMOVE received, not applied yet: report for
	                               * that learner id until then (ns) */
	bool stale;               /* the acceptors trimmed past us: waiting for a snapshot */
	uint64_t snap_try_ns;     /* last snapshot attempt */
	struct kv_stats st;
	struct innet_metrics_http *metrics; /* the metrics HTTP server, or NULL */
	char replica[64];         /* the metrics' "replica" label */
};

/* kv_server.c's helpers kv_snapshot.c uses: big-endian u32; end and fail an
 * entry of ours (each of its groups gets msg). */
void kv_put32(uint8_t *p, uint32_t v);
uint32_t kv_get32(const uint8_t *p);
void kv_batch_end(struct server *s, uint64_t req);
void kv_entry_failed(struct server *s, uint64_t req, const char *msg);
/* kv_snapshot.c: the state at innet_paxos_delivered() into b (b->oom when
 * out of memory), for SNAPSHOT; and, while stale, trying every peer for a
 * snapshot (at most once a second). */
void kv_snapshot_build(struct server *s, struct kv_buf *b);
/* kv_server.c: set proto-max-bulk-len: 0, -ERANGE, -ENOMEM. */
int kv_set_max_bulk(struct server *s, unsigned long long v);
/* kv_chunk.c. A chunk entry applied at instance: 0 taken (the image is not
 * whole yet), 1 the image is whole (*img, malloc'ed: the caller applies and
 * frees it; *id its id), -1 malformed, -ENOMEM. */
int kv_chunk_deliver(struct server *s, uint64_t instance, const uint8_t *v, uint32_t len,
		     uint8_t **img, uint32_t *img_len, uint64_t *id);
/* The partials into / from a snapshot (u32 n, then per partial u64 id, u64
 * first, u32 total, u32 got, total bytes); load: 0 with *used, or -EINVAL /
 * -ENOMEM (nothing changed). */
void kv_chunk_save(const struct server *s, struct kv_buf *b);
int kv_chunk_load(struct server *s, const uint8_t *p, size_t len, size_t *used);
void kv_chunk_reset(struct server *s);
/* The next chunk entry of image (total bytes, id s->big_id, from
 * s->big_off) into entry (cap bytes at most): its length, 0 if none left. */
size_t kv_chunk_next(struct server *s, const uint8_t *image, uint32_t total, uint8_t *entry,
		     size_t cap);
void kv_snapshot_catch_up(struct server *s);

#endif /* INNET_CONSENSUS_KV_PVT_H */
