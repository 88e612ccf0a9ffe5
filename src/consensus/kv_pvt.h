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
#define KV_QUEUED      UINT64_MAX /* conn.inflight: its group waits for the next entry */
#define KV_ENTRY_MAGIC0  'K'
#define KV_ENTRY_MAGIC1  'V'
#define KV_ENTRY_VERSION 2u
#define KV_SNAPSHOT_VERSION 3u
#define KV_ENTRY_HDR   14u        /* 'K' 'V' version flags, u16 n_groups, u64 stamp (unix ms) */
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

/* A client connection. */
struct conn {
	int fd;
	uint32_t client;          /* its id in log entries (groups) */
	uint64_t id;              /* CLIENT ID: 1, 2, ... in order of connection */
	uint64_t inflight;        /* entry in flight with its group (0 = none, KV_QUEUED) */
	uint32_t inflight_cmds;   /* replies its group owes (an EXEC block owes one) */
	uint32_t q_cmds;          /* commands encoded in the group */
	uint32_t qlen;            /* encoded commands of the group */
	uint8_t q[KV_GROUP_MAX];
	uint8_t db;               /* SELECTed database */
	uint8_t resp;             /* reply protocol: 2, or 3 after HELLO 3 */
	bool multi;               /* between MULTI and EXEC/DISCARD: commands are queued */
	bool multi_err;           /* a command was refused while queueing: EXEC aborts */
	bool multi_denyoom;       /* a queued command may grow the data (maxmemory at EXEC) */
	bool multi_write;         /* a queued command writes (min-replicas-to-write at EXEC) */
	uint32_t multi_n;         /* commands queued */
	struct kv_buf mq;         /* and their encoding, as in a log entry */
	struct kv_buf watch;      /* WATCHed keys: u8 db, u64 version, u8 flags, u32 klen, key */
	uint32_t n_watch;
	struct kv_buf name;       /* CLIENT SETNAME */
	struct kv_buf subs, psubs; /* SUBSCRIBEd channels, PSUBSCRIBEd patterns (kv_pubsub.c) */
	uint32_t n_subs, n_psubs;
	uint64_t created_ns, last_ns; /* CLIENT LIST's age and idle */
	char last_cmd[24];        /* and cmd */
	bool follower;            /* SYNC/PSYNC: it follows redis's replication stream; what
	                           * it sends (REPLCONF ACK) gets no answer */
	bool closing;             /* protocol error or QUIT: close once out is flushed */
	bool eof;                 /* the client stopped sending: close once answered */
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
	uint64_t conns_oom;        /* connections closed: a request or answer found no memory */
	uint64_t ns_wait;          /* epoll_wait */
	uint64_t ns_clients;       /* reading and parsing RESP, local replies */
	uint64_t ns_propose;       /* encoding entries, sending REQUESTs */
	uint64_t ns_learn;         /* innet_paxos_process: 2B/NACK handling, delivery (incl. apply, reply) */
	uint64_t ns_apply;         /* applying entries to the store */
	uint64_t ns_reply;         /* sending replies to the connections of applied groups */
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
	uint64_t batches[KV_MAX_WINDOW]; /* entries in flight (0 = free) */
	uint64_t tick_req;        /* our tick in flight (an empty entry: log time), 0 = none */
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
void kv_snapshot_catch_up(struct server *s);

#endif /* INNET_CONSENSUS_KV_PVT_H */
