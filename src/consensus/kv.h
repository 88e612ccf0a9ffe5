/*
 * consensus/kv.h — the replicated key-value store behind `innet kv`: a RESP
 * (Redis protocol) server whose writes go through the Paxos log
 * (innet/consensus.h), applied in log order by every replica, and whose
 * reads are answered at a read index (docs/consensus.md).
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

/* ---- the store and its commands (kv_store.c; the commands in kv_string.c,
 * kv_keys.c, kv_hash.c) ---------------------------------------------------- */

#define KV_DBS 16u   /* databases (SELECT 0..15) */

struct kv_store;
struct kv_buf {
	char *p;
	size_t len, cap;
	bool oom;       /* an append failed for want of memory: the contents are short */
};

/* What the server knows of a command: its arity (redis's: negative = at
 * least), where it runs, and for COMMAND INFO its keys and flags. */
enum {
	KV_CMD_WRITE    = 1u << 0,  /* may change the store: through the log */
	KV_CMD_READONLY = 1u << 1,  /* reads the store only: through the log (or a read index) */
	KV_CMD_LOCAL    = 1u << 2,  /* answered by the replica that received it, no log
	                             * (inside MULTI it is queued and run at EXEC like the rest) */
	KV_CMD_ADMIN    = 1u << 3,
	KV_CMD_FAST     = 1u << 4,
	KV_CMD_NOMULTI  = 1u << 5,  /* refused inside MULTI, which it aborts (SAVE, SHUTDOWN) */
	KV_CMD_RANDOM   = 1u << 6,  /* replies differ between calls (RANDOMKEY, HRANDFIELD) */
	KV_CMD_DENYOOM  = 1u << 7,  /* may grow the data: refused while the replica is over
	                             * CONFIG maxmemory (noeviction), before the log */
};

struct kv_call;
struct kv_command {
	const char *name;          /* lower case */
	int arity;
	uint32_t flags;            /* KV_CMD_* */
	int first_key, last_key, key_step; /* COMMAND INFO (last -1: to the end) */
	const char *group;         /* COMMAND DOCS: string, hash, generic, ... */
	const char *since;         /* the redis version that brought it */
	const char *summary;
	void (*fn)(struct kv_call *c); /* the store's handler; NULL: the server's own */
};

/* The command named (name, len) (any case), or NULL. */
const struct kv_command *kv_command_find(const char *name, size_t len);
/* All of them, for COMMAND (i < kv_command_count()). */
size_t kv_command_count(void);
const struct kv_command *kv_command_at(size_t i);
/* argc fits its arity (and MSET's, MSETNX's, HSET's key-value pairs). */
bool kv_command_arity_ok(const struct kv_command *cmd, int argc);
/* "-ERR wrong number of arguments for 'NAME' command". */
void kv_reply_arity_error(struct kv_buf *out, const char *name);
/* Redis's error for an unknown command, with the arguments it began with. */
void kv_reply_unknown_command(struct kv_buf *out, int argc, char *const *argv, const size_t *lens);

/* How one connection's commands are applied: its database, its protocol,
 * and a MULTI ... EXEC block while one is being applied. A group of
 * commands from the log is applied with one context; kv_ctx_end after it. */
struct kv_ctx {
	uint32_t db;               /* database (SELECT inside a block changes it) */
	uint8_t resp;              /* reply protocol: 2, or 3 (HELLO 3) */
	bool read_only;            /* a read answered outside the log (at a read index): it
	                            * must change nothing, not even delete a key past its
	                            * expire (active expiry off) — it only hides it */
	bool multi;                /* inside MULTI ... EXEC */
	bool multi_skip;           /* a watched key changed: EXEC answers nil, nothing runs */
	uint32_t multi_n;          /* replies gathered for EXEC */
	struct kv_buf multi_out;   /* and the replies themselves */
	struct kv_buf multi_feed;  /* the block's changes for the replication feed: u8 db,
	                            * u32 length, the command in RESP; per change */
	uint32_t multi_feed_n;
	/* Commands the store does not run itself (KV_CMD_LOCAL without a
	 * handler: INFO, CLIENT, CONFIG...) inside a block: the server's hook, or
	 * NULL (a replica applying another replica's block: the reply goes
	 * nowhere). */
	void (*local)(void *arg, int argc, char *const *argv, const size_t *lens,
		      struct kv_buf *out);
	void *local_arg;
};

struct kv_store *kv_store_create(void);
void kv_store_destroy(struct kv_store *s);
/* Apply one command (argc >= 1) with context ctx (NULL: database 0, RESP2)
 * and append its reply to out. Deterministic: the same commands with the
 * same log times give the same state and the same replies. A command
 * neither the store nor ctx->local knows gets redis's unknown-command error.
 *
 * A MULTI ... EXEC block in the log is the group's commands
 *   MULTI [db version flags key]...  (the keys the connection WATCHes;
 *                                     flags KV_WATCH_STALE | KV_WATCH_EXISTED)
 *   command... EXEC
 * MULTI answers nothing, the commands answer into ctx, EXEC answers the
 * array of their replies (or nil when a watched key changed since its
 * version). */
void kv_store_exec(struct kv_store *s, struct kv_ctx *ctx, int argc, char *const *argv,
		   const size_t *lens, struct kv_buf *out);
void kv_store_apply(struct kv_store *s, int argc, char *const *argv, const size_t *lens,
		    struct kv_buf *out);
/* The end of a group applied with ctx: a block left open is dropped (a
 * malformed entry), its buffer freed. */
void kv_ctx_end(struct kv_ctx *ctx);

/* Log time. Each log entry carries the proposer's clock (unix ms); before
 * applying it a replica advances the store to max(now, stamp) and deletes
 * every key whose expire is at or before it. Returns the keys expired. */
size_t kv_store_advance(struct kv_store *s, int64_t stamp_ms);
int64_t kv_store_now(const struct kv_store *s);
/* The earliest expire of any key (unix ms), 0 if none is volatile; and
 * whether a replica should propose ticks for it (DEBUG SET-ACTIVE-EXPIRE 0,
 * through the log, turns them off on every replica: keys then expire when
 * the next entry moves log time past them). */
int64_t kv_store_next_expiry(const struct kv_store *s);
bool kv_store_active_expire(const struct kv_store *s);
/* The modification counter (WATCH records it), keys in all databases. */
uint64_t kv_store_version(const struct kv_store *s);
size_t kv_store_keys(const struct kv_store *s);
/* For WATCH: whether key (db, k) exists, and whether it is stale (its
 * expire at or before now_ms or log time: its expiry will not fail EXEC). */
#define KV_WATCH_STALE   1u
#define KV_WATCH_EXISTED 2u
unsigned kv_store_watch_flags(const struct kv_store *s, uint32_t db, const char *k, size_t kl,
			      int64_t now_ms);
/* An order-independent hash of the data: every key with its database, type,
 * value, expire and version, the trim group, active expiry — not log time
 * (reads move it). Equal on replicas at the same log position, and across
 * positions that only reads separate. */
uint64_t kv_store_digest(const struct kv_store *s);
/* One key's value digest (0 if absent), its type, encoding and length, and
 * where its object is in memory (DEBUG OBJECT / DIGEST-VALUE): false if
 * absent. addr may be NULL. */
bool kv_store_key_info(const struct kv_store *s, uint32_t db, const char *k, size_t kl,
		       uint64_t *digest, const char **type, const char **encoding, size_t *len,
		       uint64_t *addr);
/* Key (db, k)'s expire (unix ms), 0 if it has none or is absent. */
int64_t kv_store_expire_of(const struct kv_store *s, uint32_t db, const char *k, size_t kl);
/* Keys and volatile keys of database db (INFO keyspace). */
void kv_store_db_info(const struct kv_store *s, uint32_t db, size_t *keys, size_t *expires);
/* A write found no memory: this copy missed part of the log and must not
 * serve any more (kv_serve then stops with -ENOMEM). */
bool kv_store_oom(const struct kv_store *s);
/* The longest string a command may build, below redis's 512 MB (for tests
 * and the fuzzer, which must not allocate that much; a server never sets
 * it: every replica must refuse the same commands). */
void kv_store_set_string_max(struct kv_store *s, uint64_t n);
/* The number of replicas of the log (learner ids 0..n-1), for REPLICA
 * REMOVE|ADD's checks; and the mask of learner ids removed from the trim
 * group (docs/consensus.md, "Removing a replica"). */
void kv_store_set_learners(struct kv_store *s, uint32_t n_learners);
uint64_t kv_store_removed(const struct kv_store *s);
/* The store's state for a snapshot (docs/protocol.md 2.2), appended to b;
 * and a new store from one (NULL with the reason in err). */
void kv_store_save(const struct kv_store *s, struct kv_buf *b);
struct kv_store *kv_store_load(const uint8_t *p, size_t len, char *err, size_t errlen);
/* redis's replication stream (SYNC, PSYNC: a redis replica, or any tool
 * that speaks it, follows the store): while feed is set, every change the
 * store applies is appended to it as the command that makes it on a redis
 * replica (absolute expire times, DEL for expired keys, SELECT when the
 * database changes, MULTI/EXEC around a block of several). NULL: no feed.
 * kv_store_feed_select forces a SELECT before the next change (a new
 * follower). kv_store_rdb: the whole state as an RDB file (version 9) for a
 * follower's start. */
void kv_store_set_feed(struct kv_store *s, struct kv_buf *feed);
void kv_store_feed_select(struct kv_store *s);
void kv_store_rdb(const struct kv_store *s, struct kv_buf *b);
/* redis's CRC-64 (Jones, reflected): RDB checksums. */
uint64_t kv_crc64(uint64_t crc, const void *p, size_t n);

/* PUBLISH applied from the log calls fn (the server's delivery to its own
 * subscribers; it answers the receivers); NULL: no subscribers here. */
void kv_store_set_publish(struct kv_store *s,
			  long long (*fn)(void *arg, const char *ch, size_t chl, const char *msg,
					  size_t ml),
			  void *arg);

/* CONFIG GET/SET of the store's parameters (hash-max-listpack-entries,
 * hash-max-listpack-value and their ziplist aliases): 0, or -ENOENT. */
int kv_store_config_get(const struct kv_store *s, const char *name, long long *v);
int kv_store_config_set(struct kv_store *s, const char *name, long long v);

/* redis's glob (KEYS, SCAN MATCH, CONFIG GET): * ? [a-z] [^..] and \\
 * escapes; nocase: letters of either case match. */
bool kv_glob(const char *pat, size_t pl, const char *s, size_t sl, bool nocase);

/* Parse one command from buf[0..len): returns bytes consumed (> 0) with
 * argc/argv/lens filled (pointers into scratch), 0 if incomplete, or -1 with
 * a RESP error message in err (protocol error: the connection closes). A
 * bulk string longer than max_bulk (proto-max-bulk-len) is an error.
 * Inline commands are split as redis does ("double" and 'single' quotes,
 * escapes \n \r \t \b \a \xHH in double quotes). */
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
