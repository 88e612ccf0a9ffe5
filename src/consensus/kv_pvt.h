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

#define KV_MAX_ARGS    65535     /* arguments of one command (u16 in a log entry) */
#define KV_INBUF_MAX   (1u << 20)
#define KV_MAX_CONNS   4096
#define KV_QUEUED      UINT64_MAX /* a write unit's entry: it waits for the next entry */
#define KV_CONN_UNITS  16u        /* units (runs of commands) of one connection at most */
#define KV_READ_SLOTS  64u        /* read rounds running or still referenced by units */
#define KV_READ_WINDOW 4u         /* read rounds of one replica in flight at most */
#define KV_ENTRY_MAGIC0  'K'
#define KV_ENTRY_MAGIC1  'V'
#define KV_ENTRY_VERSION 2u
#define KV_SNAPSHOT_VERSION 4u
#define KV_ENTRY_HDR   14u        /* 'K' 'V' version flags, u16 n_groups, u64 stamp (unix ms) */
#define KV_ENTRY_F_WIDE  0x01u    /* entry flags: argc and argument lengths are u32 */
#define KV_ENTRY_F_CHUNK 0x02u    /* a chunk of a larger entry (kv_chunk.c) */
#define KV_CHUNK_HDR   (KV_ENTRY_HDR + 16u) /* + u64 id, u32 total, u32 offset */
#define KV_BIG_MAX     8u         /* large entries being reassembled at once */
#define KV_BIG_TOTAL_MAX ((1u << 30) + (1u << 20)) /* bytes of one large entry at most */
#define KV_BULK_MAX_LIMIT (1ull << 30) /* proto-max-bulk-len at most */
#define KV_BULK_MAX_DEFAULT (512ull << 20) /* proto-max-bulk-len by default (redis's) */
#define KV_GROUP_HDR   8u         /* u32 client, u16 n_commands, u8 db, u8 flags */
#define KV_CONFIG_MAX  32u        /* CONFIG parameters kept per replica (kv_admin.c) */
#define KV_MAX_WATCH   255u       /* keys one connection may WATCH (4 arguments each in MULTI) */
#define KV_GROUP_MAX   (PAXOS_VALUE_MAX - KV_ENTRY_HDR - KV_GROUP_HDR) /* commands of one group */


/* kv_store.c's helpers the server and the RESP parser use. */
void kv_buf_str(struct kv_buf *b, const char *s);
void kv_buf_num(struct kv_buf *b, char prefix, long long v);
void kv_buf_bulk(struct kv_buf *b, const char *p, size_t n);
void kv_buf_consume(struct kv_buf *b, size_t n);
/* A decimal long long exactly as redis reads one (string2ll): no sign but
 * '-', no leading zero, no "-0", no spaces, every byte a digit. */
bool kv_parse_ll(const char *p, size_t n, long long *out);

/* The server (kv_server.c); kv_snapshot.c builds snapshots of it and
 * installs them into it, kv_admin.c answers the commands about it. One
 * thread: kv_serve's. */

/*
 * A connection's commands, in the order they came, as runs of one kind —
 * units — each answered in turn (kv_server.c; docs/consensus.md, "Order
 * within a connection"):
 *
 *   units[head] ... units[head + n_units - 1]   (a ring of KV_CONN_UNITS)
 *   LOCAL  PING, INFO, CLIENT, MULTI, errors...  answered when it is first
 *   READ   read-only commands                    wait for a read round begun
 *                                                after they were parsed, answered
 *                                                when first and the log reached
 *                                                the round's index
 *   WRITE  commands through the log (a group;    proposed when first, answered
 *          an EXEC block is one such group)      when its entry is applied
 *   ERROR  a protocol error: its text            answered when first, then close
 *   BIG    one write (or block) larger than an   as WRITE, but its own entry, sent
 *          entry                                 as chunks (kv_chunk.c)
 *   REPLY  errors found while parsing (unknown   answered when first
 *          command, arity, OOM...): the replies
 *
 * Every unit carries the database and the protocol its commands were parsed
 * with. A command that changes the connection's state (SELECT, HELLO,
 * MULTI and what is queued after it, EXEC, WATCH, CLIENT, CONFIG, SUBSCRIBE,
 * SYNC...) is a barrier: nothing after it is parsed until it is answered,
 * so the commands after it see its effect.
 */
enum { KV_U_LOCAL = 1, KV_U_READ, KV_U_WRITE, KV_U_ERROR, KV_U_BIG, KV_U_REPLY };

struct kv_unit {
	uint8_t kind;             /* KV_U_* */
	uint8_t slot;             /* READ: its round's slot + 1 (0: no round yet) */
	uint8_t db;               /* the database its commands run in */
	uint8_t resp;             /* and the reply protocol (2 or 3) */
	bool barrier;             /* a state-changing command: parsing waits for its answer */
	uint32_t n_cmds;          /* commands (an EXEC block: MULTI, the block, EXEC) */
	uint32_t n_replies;       /* replies it owes (an EXEC block owes one) */
	int64_t t_ms;             /* READ: this replica's clock when its last command came */
	uint64_t entry;           /* WRITE: 0 (not its turn yet), KV_QUEUED, or the entry;
	                           * BIG: 0, KV_QUEUED, or its image's id */
	struct kv_buf cmds;       /* WRITE: encoded as an entry's group (u16 lengths);
	                           * READ, LOCAL: u32 argc, u32 lengths, a NUL after each
	                           * argument; ERROR: the reply; BIG: the whole image (entry
	                           * header, group, commands with u32 lengths) */
};

/* A client connection. */
struct conn {
	int fd;
	uint32_t client;          /* its id in log entries (groups) */
	uint64_t id;              /* CLIENT ID: 1, 2, ... in order of connection */
	struct kv_unit units[KV_CONN_UNITS];
	uint32_t head, n_units;
	bool barrier;             /* a barrier unit is not answered yet: parsing waits */
	uint8_t db;               /* SELECTed database */
	uint8_t resp;             /* reply protocol: 2, or 3 after HELLO 3 */
	bool multi;               /* between MULTI and EXEC/DISCARD: commands are queued */
	bool multi_err;           /* a command was refused while queueing: EXEC aborts */
	bool multi_denyoom;       /* a queued command may grow the data (maxmemory at EXEC) */
	bool multi_write;         /* a queued command writes (min-replicas-to-write at EXEC) */
	uint32_t multi_n;         /* commands queued */
	uint32_t multi_lens;      /* and their argc and lengths (a block's size, narrow) */
	struct kv_buf mq;         /* and their encoding (u32 argc, u32 lengths, bytes) */
	struct kv_buf watch;      /* WATCHed keys: u8 db, u64 version, u8 flags, u32 klen, key */
	uint32_t n_watch;
	struct kv_buf name;       /* CLIENT SETNAME */
	struct kv_buf subs, psubs; /* SUBSCRIBEd channels, PSUBSCRIBEd patterns (kv_pubsub.c) */
	uint32_t n_subs, n_psubs;
	uint64_t created_ns, last_ns; /* CLIENT LIST's age and idle */
	char last_cmd[24];        /* and cmd */
	bool follower;            /* SYNC/PSYNC: it follows redis's replication stream; what
	                           * it sends (REPLCONF ACK) gets no answer */
	bool quit;                /* QUIT or a protocol error parsed: nothing after it */
	bool closing;             /* ... answered: close once out is flushed */
	bool drain;               /* a protocol error: once answered, read and drop what the
	                           * client still sends until it closes (or for 2 s, or
	                           * query_max bytes), so that it reads the error rather
	                           * than a reset */
	bool draining;
	uint64_t drain_ns;        /* when draining began */
	size_t drained;
	bool eof;                 /* the client stopped sending: close once answered */
	bool in_rq, in_rwait;     /* in the server's rq / rwait lists */
	uint32_t events;
	struct kv_buf in, out;
};

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
	uint64_t ticks_proposed;   /* empty entries proposed to advance log time (a key due) */
	uint64_t expired_keys;     /* keys deleted at their expire (by log time) */
	uint64_t cmds_local;       /* commands answered without the log */
	uint64_t conns_total;      /* connections accepted */
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
	uint64_t tick_req;        /* our tick in flight (an empty entry: log time), 0 = none */
	int64_t tick_want;        /* a read waits for log time to reach this (unix ms) */
	uint64_t next_conn_id;    /* CLIENT ID of the next connection - 1 */
	struct kv_buf feed;       /* the store's replication stream since it was last sent */
	uint32_t n_followers;     /* connections following it (SYNC/PSYNC) */
	uint64_t ping_ns;         /* when the followers last got a PING */
	char replid[41];          /* PSYNC's replication id: random per run */
	uint64_t start_ns;        /* when it started serving (INFO uptime) */
	int64_t start_ms;         /* and in unix ms (LASTSAVE) */
	uint64_t maxmemory;       /* CONFIG maxmemory (bytes, 0: none): commands that may grow
	                           * the data are refused above it (noeviction), before the log */
	char config[KV_CONFIG_MAX][64]; /* CONFIG values of this replica, by kv_admin.c's table
	                           * ("" = the default) */
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
/* kv_server.c: the innet sections of INFO. */
void kv_info_innet(struct server *s, struct kv_buf *b);
/* kv_admin.c: the commands about the server and the connection (CLIENT
 * HELLO INFO COMMAND CONFIG DEBUG FUNCTION TIME LASTSAVE AUTH), answered
 * into out; false if cmd is none of them. */
bool kv_admin_command(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		      struct kv_buf *out);
int64_t kv_wall_ms(void);
/* kv_server.c: send the store's feed to the followers (and a PING every
 * repl-ping-replica-period); drop every follower (a snapshot replaced the
 * state under them: they must start again). */
void kv_followers_send(struct server *s);
void kv_followers_drop(struct server *s);
/* kv_server.c: the connection has output: let the event loop send it. */
void kv_conn_want_write(struct server *s, struct conn *c);
/* kv_server.c: a store the server is to use (its learners, the publish hook). */
void kv_server_store_init(struct server *s, struct kv_store *st);
/* kv_pubsub.c: (P)SUBSCRIBE, (P)UNSUBSCRIBE, PUBSUB (false if none of
 * them); RESP2's subscribed mode and the commands it allows; a PUBLISH
 * applied from the log (the store's hook): the receivers here. */
bool kv_pubsub_command(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		       struct kv_buf *out);
bool kv_pubsub_mode(const struct conn *c);
bool kv_pubsub_allowed(const char *name);
long long kv_pubsub_publish(void *arg, const char *ch, size_t chl, const char *msg, size_t ml);
/* kv_admin.c: CONFIG's value of name as a number (def if unset/unknown). */
long long kv_config_ll(struct server *s, const char *name, long long def);
/* This replica's heap in use (INFO used_memory, maxmemory). */
uint64_t kv_used_memory(void);
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
/* The same in two steps, for a snapshot checked whole before anything
 * changes: parse (n_out partials into out, KV_BIG_MAX at most; nothing of s
 * touched), then install them in place of s's (or free them). */
int kv_chunk_parse(const uint8_t *p, size_t len, struct kv_big *out, uint32_t *n_out,
		   size_t *used);
void kv_chunk_install(struct server *s, const struct kv_big *b, uint32_t n);
void kv_chunk_free(struct kv_big *b, uint32_t n);
void kv_chunk_reset(struct server *s);
/* The next chunk entry of image (total bytes, id s->big_id, from
 * s->big_off) into entry (cap bytes at most): its length, 0 if none left. */
size_t kv_chunk_next(struct server *s, const uint8_t *image, uint32_t total, uint8_t *entry,
		     size_t cap);
void kv_snapshot_catch_up(struct server *s);

#endif /* INNET_CONSENSUS_KV_PVT_H */
