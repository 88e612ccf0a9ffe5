/*
 * kv_server.c — the replicated key-value store of `innet kv`: a RESP server
 * (redis-cli and redis-benchmark work unmodified) on top of the Paxos log.
 *
 * Every command that writes keys goes through the log; each replica applies
 * the log in instance order, so all replicas pass through the same states,
 * and a write's reply is computed when the replica that received it applies
 * it. A read-only command does not: the replica asks the acceptors for a
 * read index (a read round, shared by every read waiting at the replica)
 * and answers from its own copy once it has applied every instance below
 * the index — linearizable without a log entry (docs/consensus.md, "Reads
 * without a log entry"; --reads log sends reads through the log instead).
 *
 * A connection's commands are runs of one kind (units, kv_pvt.h: local,
 * read, write) answered in order; several are under way at once. A run of
 * writes is one group in an entry: every write the connection pipelined so
 * far (up to one value). Batching across connections: a replica keeps at
 * most `window` (--window, default 8) log entries of its own in flight;
 * groups that queue up while the window is full all go into the next entry,
 * up to PAXOS_VALUE_MAX (INNET_PKT_MAX - 56) bytes. The busier the replica,
 * the fuller the entries (~170 commands at redis-benchmark -P 16, 50
 * clients); an idle one sends a lone command at once. Which command goes
 * where is the command table's (kv_store.c: KV_CMD_WRITE, KV_CMD_READONLY,
 * KV_CMD_LOCAL). Commands that need no log (PING, ECHO, QUIT, SELECT,
 * CLIENT, HELLO, INFO, CONFIG, COMMAND, WATCH, MULTI and the queueing after
 * it: kv_admin.c; SNAPSHOT; errors found locally) are answered in their
 * turn. MULTI ... EXEC is one group: the block (with the versions of the
 * WATCHed keys) goes into one entry (or one large entry, in chunks) and
 * every replica applies it whole (kv_store.c). DEBUG and PUBLISH are writes:
 * through the log, so every replica does the same.
 *
 *   log entry value, KV batch version 2 (docs/protocol.md 2.2):
 *
 *   +-----+-----+---------+-------+-------------+----------------------+
 *   | 'K' | 'V' | version | flags | u16 n_groups| u64 stamp (unix ms)  |
 *   +-----+-----+---------+-------+-------------+----------------------+
 *   n_groups x  +---------------------------+----------------+-------+-------+
 *               | u32 client (connection id)| u16 n_commands | u8 db | 0     |
 *               +---------------------------+----------------+-------+-------+
 *               n_commands x: u16 argc, argc x (u16 length, bytes)
 *
 *   big-endian. flags: 0; WIDE (u32 argc and lengths: a large entry put
 *   back together from its chunks); CHUNK (a piece of one: kv_chunk.c). The
 *   stamp is the proposer's clock: every replica advances the store's log
 *   time to it before applying the entry (never backwards) and expires the
 *   keys due by then, so expiry is the same everywhere. An entry with no
 *   group is a tick: a replica proposes one when a key is due and no entry
 *   came to advance log time past it (active expiry through the log). An
 *   entry that is not a well-formed version-2 batch is skipped whole by
 *   every replica (counted: entries_bad), so replicas stay equal; all
 *   replicas of a log run the same version.
 *
 * Per-stage counters (INFO; stderr at exit; with --metrics, the Prometheus
 * text format over HTTP, served from this same event loop) say where a
 * replica's time goes: waiting, reading clients, proposing, learning,
 * applying, replying.
 *
 * Request ids: each replica has a random client id and counts seq from 1 per
 * entry, so a resend chosen twice is applied once (the learner
 * deduplicates). The replica that proposed an entry answers each group's
 * connection when it applies the entry.
 *
 * Snapshots (state transfer: a replica whose next instance the acceptors
 * trimmed away asks a peer with the RESP command SNAPSHOT) are
 * kv_snapshot.c; this file answers SNAPSHOT and notices the trim. The store
 * is kv_store.c, the RESP parser kv_resp.c; they share kv_pvt.h.
 *
 * Membership of the trim group: REPLICA REMOVE|ADD id goes through the log
 * like any write; from the entry on, every replica reports its own
 * watermark to the acceptors also under each removed learner id, so their
 * trim (the minimum over learner ids) no longer waits for a replica that is
 * down for good. docs/consensus.md, "Removing a replica".
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/wire.h"
#include "innet/metrics.h"


/* ---- the server --------------------------------------------------------- */

static struct kv_unit *unit_head(struct conn *c)
{
	return &c->units[c->head % KV_CONN_UNITS];
}

static struct kv_unit *unit_last(struct conn *c)
{
	return c->n_units ? &c->units[(c->head + c->n_units - 1) % KV_CONN_UNITS] : NULL;
}

static size_t encoded_len(int argc, const size_t *lens)
{
	size_t n = 2;
	for (int i = 0; i < argc; i++)
		n += 2 + lens[i];
	return n;
}

static void put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

void kv_put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

static uint32_t get16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

uint32_t kv_get32(const uint8_t *p)
{
	return get16(p) << 16 | get16(p + 2);
}

uint64_t kv_used_memory(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

int64_t kv_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct conn *conn_by_client(struct server *s, uint32_t client)
{
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->client == client)
			return s->conns[i];
	return NULL;
}

void kv_conn_want_write(struct server *s, struct conn *c)
{
	uint32_t ev = c->events | EPOLLOUT;
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };
		epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &e);
		c->events = ev;
	}
}

void kv_server_store_init(struct server *s, struct kv_store *st)
{
	kv_store_set_learners(st, s->c->n_learners);
	kv_store_set_publish(st, kv_pubsub_publish, s);
}

static void conn_update(struct server *s, struct conn *c)
{
	uint32_t ev = 0;
	if ((!c->quit && !c->eof && c->in.len < s->query_max) || c->draining)
		ev |= EPOLLIN;
	if (c->out.len > 0)
		ev |= EPOLLOUT;
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };
		epoll_ctl(s->ep, EPOLL_CTL_MOD, c->fd, &e);
		c->events = ev;
	}
}

static uint64_t trim_proxied(const struct server *s, uint64_t now);

static void info_field(struct kv_buf *b, const char *name, uint64_t v)
{
	char tmp[96];
	int n = snprintf(tmp, sizeof(tmp), "%s:%llu\r\n", name, (unsigned long long)v);
	kv_buf_append(b, tmp, (size_t)n);
}

/* "name:1,4" (the set bits of m), "name:" if none. */
static void info_mask(struct kv_buf *b, const char *name, uint64_t m)
{
	kv_buf_str(b, name);
	kv_buf_str(b, ":");
	for (uint32_t i = 0, first = 1; i < 64; i++)
		if (m & (1ull << i)) {
			char tmp[8];
			snprintf(tmp, sizeof(tmp), "%s%u", first ? "" : ",", i);
			kv_buf_str(b, tmp);
			first = 0;
		}
	kv_buf_str(b, "\r\n");
}

/* INFO's innet sections: redis-style "name:value" lines; the per-stage
 * counters (kv_admin.c writes redis's own sections before them). */
void kv_info_innet(struct server *s, struct kv_buf *b)
{
	const struct kv_stats *t = &s->st;
	struct innet_paxos_stats ps;
	innet_paxos_get_stats(s->px, &ps);
	kv_buf_str(b, "# innet kv\r\n");
	info_field(b, "entry_version", KV_ENTRY_VERSION);
	info_field(b, "value_max", PAXOS_VALUE_MAX);
	info_field(b, "entry_max", s->entry_max);
	info_field(b, "window", s->window);
	info_field(b, "connected_clients", s->n_conns);
	info_field(b, "log_next", innet_paxos_delivered(s->px));
	info_field(b, "keys", kv_store_keys(s->store));
	info_field(b, "digest", kv_store_digest(s->store));
	info_field(b, "log_time_ms", (uint64_t)kv_store_now(s->store));
	info_field(b, "store_version", kv_store_version(s->store));
	kv_buf_str(b, "# replicas\r\n");
	info_field(b, "learner_id", s->c->paxos.learner_id);
	info_field(b, "replicas", s->c->n_learners);
	info_mask(b, "replicas_removed", kv_store_removed(s->store));
	info_mask(b, "trim_reported_for", trim_proxied(s, innet_now_ns()));
	kv_buf_str(b, "# batching\r\n");
	info_field(b, "loops", t->loops);
	info_field(b, "entries_proposed", t->entries_proposed);
	info_field(b, "groups_proposed", t->groups_proposed);
	info_field(b, "commands_proposed", t->cmds_proposed);
	info_field(b, "bytes_proposed", t->bytes_proposed);
	info_field(b, "window_full", t->window_full);
	info_field(b, "entries_applied", t->entries_applied);
	info_field(b, "commands_applied", t->cmds_applied);
	info_field(b, "entries_bad", t->entries_bad);
	info_field(b, "ticks_proposed", t->ticks_proposed);
	info_field(b, "commands_local", t->cmds_local);
	kv_buf_str(b, "# reads\r\n");
	kv_buf_str(b, s->reads_log ? "reads:log\r\n" : "reads:index\r\n");
	info_field(b, "reads_local", t->reads_local);
	info_field(b, "read_rounds", t->read_rounds);
	info_field(b, "read_rounds_failed", t->read_rounds_failed);
	kv_buf_str(b, "# large values\r\n");
	info_field(b, "proto_max_bulk_len", s->max_bulk);
	info_field(b, "chunks_proposed", t->chunks_proposed);
	info_field(b, "chunks_applied", t->chunks_applied);
	info_field(b, "large_entries_applied", t->bigs_applied);
	info_field(b, "large_entries_partial", s->n_bigs);
	kv_buf_str(b, "# snapshots\r\n");
	info_field(b, "stale", s->stale);
	info_field(b, "snapshots_served", t->snapshots_served);
	info_field(b, "conns_oom", t->conns_oom);
	info_field(b, "snapshots_installed", t->snapshots_installed);
	info_field(b, "snapshot_failures", t->snapshot_failures);
	kv_buf_str(b, "# time_us\r\n");
	info_field(b, "us_wait", t->ns_wait / 1000);
	info_field(b, "us_clients", t->ns_clients / 1000);
	info_field(b, "us_propose", t->ns_propose / 1000);
	info_field(b, "us_learn", t->ns_learn / 1000);
	info_field(b, "us_apply", t->ns_apply / 1000);
	info_field(b, "us_reply", t->ns_reply / 1000);
	kv_buf_str(b, "# paxos\r\n");
	info_field(b, "delivered", ps.delivered);
	info_field(b, "noops", ps.noops);
	info_field(b, "duplicates", ps.duplicates);
	info_field(b, "votes", ps.votes);
	info_field(b, "recover_sent", ps.recover_sent);
	info_field(b, "phase1_started", ps.phase1_started);
	info_field(b, "proposed", ps.proposed);
	info_field(b, "resent", ps.resent);
	info_field(b, "nacks", ps.nacks);
	info_field(b, "bad_packets", ps.bad_packets);
	info_field(b, "failovers", ps.failovers);
}

/* The INFO counters as Prometheus metric families (docs/consensus.md,
 * "Metrics"); the render callback of the metrics HTTP server, which runs on
 * this server's own thread, so the counters are read where they are kept. */
static void kv_metrics(void *arg, struct innet_prom *w)
{
	struct server *s = arg;
	const struct kv_stats *t = &s->st;
	struct innet_paxos_stats ps;
	innet_paxos_get_stats(s->px, &ps);
	const char *base[] = { "replica", s->replica };
	innet_prom_base_labels(w, 1, base);

	static const struct {
		const char *name, *help;
		size_t off;
	} counters[] = {
#define KV_C(n, f, h) { "innet_kv_" n, h, offsetof(struct kv_stats, f) }
		KV_C("loops_total", loops, "Event-loop passes."),
		KV_C("entries_proposed_total", entries_proposed, "Log entries this replica proposed."),
		KV_C("groups_proposed_total", groups_proposed,
		     "Connection groups (a connection's pipelined commands) in the entries proposed."),
		KV_C("commands_proposed_total", cmds_proposed, "Commands in the entries proposed."),
		KV_C("proposed_bytes_total", bytes_proposed, "Value bytes of the entries proposed."),
		KV_C("window_full_total", window_full,
		     "Proposals deferred because the window of entries in flight was full."),
		KV_C("entries_applied_total", entries_applied, "Log entries applied (every replica's)."),
		KV_C("commands_applied_total", cmds_applied, "Commands applied."),
		KV_C("entries_bad_total", entries_bad,
		     "Log entries skipped whole: not the KV batch format."),
		KV_C("snapshots_served_total", snapshots_served, "SNAPSHOT requests answered."),
		KV_C("snapshots_installed_total", snapshots_installed,
		     "Snapshots installed from a peer replica."),
		KV_C("snapshot_failures_total", snapshot_failures,
		     "Snapshot attempts that got none, or an unusable one."),
		KV_C("reads_local_total", reads_local,
		     "Read-only commands answered from a read index, without a log entry."),
		KV_C("read_rounds_total", read_rounds,
		     "Read rounds begun (a read index asked of the acceptors)."),
		KV_C("read_rounds_failed_total", read_rounds_failed,
		     "Read rounds that timed out: no majority of acceptors answered."),
#undef KV_C
	};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)t + counters[i].off, sizeof(v));
		innet_prom_family(w, counters[i].name, INNET_PROM_COUNTER, counters[i].help);
		innet_prom_u64(w, v, (char *)NULL);
	}
	innet_prom_family(w, "innet_kv_stage_seconds_total", INNET_PROM_COUNTER,
			  "Wall-clock time of the event loop by stage: wait (epoll), clients "
			  "(reading RESP, local replies), propose, learn (2B/NACK handling and "
			  "delivery); apply and reply are parts of learn.");
	static const char *const stages[] = { "wait", "clients", "propose", "learn", "apply", "reply" };
	const uint64_t ns[] = { t->ns_wait, t->ns_clients, t->ns_propose, t->ns_learn, t->ns_apply,
				t->ns_reply };
	for (size_t i = 0; i < 6; i++)
		innet_prom_f64(w, (double)ns[i] / 1e9, "stage", stages[i], (char *)NULL);

	innet_prom_family(w, "innet_kv_connected_clients", INNET_PROM_GAUGE,
			  "RESP client connections.");
	innet_prom_u64(w, s->n_conns, (char *)NULL);
	innet_prom_family(w, "innet_kv_keys", INNET_PROM_GAUGE, "Keys in the store.");
	innet_prom_u64(w, kv_store_keys(s->store), (char *)NULL);
	innet_prom_family(w, "innet_kv_log_next", INNET_PROM_GAUGE,
			  "The next log instance to apply (every one below it is applied).");
	innet_prom_u64(w, innet_paxos_delivered(s->px), (char *)NULL);
	innet_prom_family(w, "innet_kv_window_entries", INNET_PROM_GAUGE,
			  "The most log entries of this replica in flight (--window).");
	innet_prom_u64(w, s->window, (char *)NULL);
	innet_prom_family(w, "innet_kv_stale", INNET_PROM_GAUGE,
			  "1 while the acceptors have trimmed the log past this replica and it waits "
			  "for a snapshot.");
	innet_prom_u64(w, s->stale ? 1 : 0, (char *)NULL);

	static const struct {
		const char *name, *help;
		size_t off;
	} paxos[] = {
#define PX_C(n, f, h) { "innet_kv_paxos_" n, h, offsetof(struct innet_paxos_stats, f) }
		PX_C("delivered_total", delivered, "Values delivered by the learner (no no-ops, no "
						   "duplicates)."),
		PX_C("noops_total", noops, "No-op instances skipped."),
		PX_C("duplicates_total", duplicates, "Values skipped: request id already delivered."),
		PX_C("votes_total", votes, "2B messages counted."),
		PX_C("recover_sent_total", recover_sent, "RECOVER messages sent."),
		PX_C("phase1_started_total", phase1_started,
		     "Instances taken through phase 1 by this learner."),
		PX_C("proposed_total", proposed, "REQUESTs sent, resends included."),
		PX_C("resent_total", resent, "REQUESTs resent."),
		PX_C("nacks_total", nacks, "NACKs received."),
		PX_C("bad_packets_total", bad_packets,
		     "Received packets that were not valid Paxos replies."),
		PX_C("failovers_total", failovers, "Times the proposer moved to the next coordinator."),
#undef PX_C
	};
	for (size_t i = 0; i < sizeof(paxos) / sizeof(paxos[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)&ps + paxos[i].off, sizeof(v));
		innet_prom_family(w, paxos[i].name, INNET_PROM_COUNTER, paxos[i].help);
		innet_prom_u64(w, v, (char *)NULL);
	}
	innet_prom_base_labels(w, 0, NULL);
}

/* A memory amount as redis writes one ("64mb", "1gb", "1048576"; k = 1000,
 * kb = 1024, ...): 0 or -EINVAL. */
int kv_parse_memory(const char *p, size_t n, unsigned long long *out)
{
	size_t d = 0;
	while (d < n && isdigit((unsigned char)p[d]))
		d++;
	if (d == 0 || d > 19)
		return -EINVAL;
	unsigned long long v = strtoull(p, NULL, 10), mul = 1;
	char u[4] = "";
	if (n - d > 2)
		return -EINVAL;
	for (size_t i = d; i < n; i++)
		u[i - d] = (char)tolower((unsigned char)p[i]);
	if (!strcmp(u, "") || !strcmp(u, "b"))
		mul = 1;
	else if (!strcmp(u, "k"))
		mul = 1000;
	else if (!strcmp(u, "kb"))
		mul = 1024;
	else if (!strcmp(u, "m"))
		mul = 1000 * 1000;
	else if (!strcmp(u, "mb"))
		mul = 1024 * 1024;
	else if (!strcmp(u, "g"))
		mul = 1000ull * 1000 * 1000;
	else if (!strcmp(u, "gb"))
		mul = 1024ull * 1024 * 1024;
	else
		return -EINVAL;
	if (v > ULLONG_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

static bool scratch_fit(struct server *s, size_t need);

/* proto-max-bulk-len = v: the longest argument a client may send (a write
 * over one log entry goes in chunks). 0, or -ERANGE (1 MiB .. 1 GiB, the
 * most one large entry holds) / -ENOMEM (scratch for a command that long). */
int kv_set_max_bulk(struct server *s, unsigned long long v)
{
	if (v < KV_INBUF_MAX || v > KV_BULK_MAX_LIMIT)
		return -ERANGE;
	size_t q = (size_t)v + KV_INBUF_MAX;
	if (!scratch_fit(s, q + 1))
		return -ENOMEM;
	s->max_bulk = v;
	s->query_max = q;
	return 0;
}

/* Clear the connection's MULTI state and WATCHed keys. */
static void multi_reset(struct conn *c)
{
	c->multi = c->multi_err = c->multi_denyoom = c->multi_write = false;
	c->multi_n = 0;
	c->multi_lens = 0;
	c->mq.len = 0;
	c->watch.len = 0;
	c->n_watch = 0;
}

/* WATCH key...: each key's database, the store's version now and whether it
 * is already stale (expired by this replica's clock: its expiry will not
 * fail EXEC) go into the connection's watch list; EXEC's block carries them.
 * WATCH is answered in its turn (every unit before it answered), so the
 * version is at least that of everything the connection did before. */
static void watch_keys(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		       struct kv_buf *out)
{
	if (c->n_watch + (uint32_t)(argc - 1) > KV_MAX_WATCH) {
		char msg[128];
		snprintf(msg, sizeof(msg), "-ERR innet kv: at most %u watched keys per connection\r\n",
			 KV_MAX_WATCH);
		kv_buf_str(out, msg);
		return;
	}
	uint64_t ver = kv_store_version(s->store);
	int64_t now = kv_wall_ms();
	for (int i = 1; i < argc; i++) {
		uint8_t rec[14];
		rec[0] = c->db;
		kv_put32(rec + 1, (uint32_t)(ver >> 32));
		kv_put32(rec + 5, (uint32_t)ver);
		rec[9] = (uint8_t)kv_store_watch_flags(s->store, c->db, argv[i], lens[i], now);
		kv_put32(rec + 10, (uint32_t)lens[i]);
		kv_buf_append(&c->watch, rec, sizeof(rec));
		kv_buf_append(&c->watch, argv[i], lens[i]);
		c->n_watch++;
	}
	kv_buf_str(out, "+OK\r\n");
}

/* A command's encoded size: u16 (entry) or u32 (WIDE) argc and lengths. */
static size_t cmd_size(bool wide, int argc, const size_t *lens)
{
	size_t w = wide ? 4 : 2, n = w;
	for (int i = 0; i < argc; i++)
		n += w + lens[i];
	return n;
}

/* MULTI's block as the commands of one group: MULTI with the watch records
 * (db, version, flags, key per watched key), the queued commands, EXEC —
 * its size encoded with u16 (wide false) or u32 lengths. */
static size_t block_size(const struct conn *c, bool wide)
{
	size_t w = wide ? 4 : 2;
	size_t n = 2 * w + 5 + 2 * w + 4; /* MULTI's argc, length, name; EXEC's */
	for (size_t p = 0; p < c->watch.len;) {
		size_t kl = kv_get32((const uint8_t *)c->watch.p + p + 10);
		n += 4 * w + 3 + 20 + 1 + kl; /* db, version (at most 20 digits), flags, key */
		p += 14 + kl;
	}
	/* the queued commands are kept wide (mq): narrower by 2 per argc and
	 * length */
	return n + c->mq.len - (wide ? 0 : 2 * (size_t)c->multi_lens);
}

static void put_arg(struct kv_buf *b, bool wide, const void *p, size_t n)
{
	uint8_t l[4];
	if (wide)
		kv_put32(l, (uint32_t)n);
	else
		kv_put32(l, (uint32_t)n << 16);
	kv_buf_append(b, l, wide ? 4 : 2);
	kv_buf_append(b, p, n);
}

static void put_argc(struct kv_buf *b, bool wide, uint32_t n)
{
	uint8_t l[4];
	kv_put32(l, wide ? n : n << 16);
	kv_buf_append(b, l, wide ? 4 : 2);
}

/* Append MULTI's block (block_size's layout) to b. */
static void encode_block(const struct conn *c, bool wide, struct kv_buf *b)
{
	put_argc(b, wide, 1 + 4 * c->n_watch);
	put_arg(b, wide, "MULTI", 5);
	for (size_t p = 0; p < c->watch.len;) {
		const uint8_t *r = (const uint8_t *)c->watch.p + p;
		uint64_t ver = (uint64_t)kv_get32(r + 1) << 32 | kv_get32(r + 5);
		size_t kl = kv_get32(r + 10);
		char num[24];
		int n = snprintf(num, sizeof(num), "%u", r[0]);
		put_arg(b, wide, num, (size_t)n);
		n = snprintf(num, sizeof(num), "%llu", (unsigned long long)ver);
		put_arg(b, wide, num, (size_t)n);
		num[0] = (char)('0' + (r[9] & 3));
		put_arg(b, wide, num, 1);
		put_arg(b, wide, r + 14, kl);
		p += 14 + kl;
	}
	for (size_t p = 0; p < c->mq.len;) {
		const uint8_t *q = (const uint8_t *)c->mq.p + p;
		uint32_t argc = kv_get32(q);
		size_t k = 4;
		put_argc(b, wide, argc);
		for (uint32_t i = 0; i < argc; i++) {
			size_t l = kv_get32(q + k);
			put_arg(b, wide, q + k + 4, l);
			k += 4 + l;
		}
		p += k;
	}
	put_argc(b, wide, 1);
	put_arg(b, wide, "EXEC", 4);
}

#define OOM_ERROR "OOM command not allowed when used memory > 'maxmemory'."

#define NOREPLICAS_ERROR "NOREPLICAS Not enough good replicas to write."

/* Fewer followers of the replication stream (redis replicas of this
 * replica) than CONFIG min-replicas-to-write: writes are refused. */
static bool too_few_followers(struct server *s)
{
	long long min = kv_config_ll(s, "min-replicas-to-write", 0);
	return min > 0 && s->n_followers < (uint64_t)min;
}

/* Over CONFIG maxmemory: a command that may grow the data is refused. */
static bool over_memory(const struct server *s)
{
	return s->maxmemory != 0 && kv_used_memory() > s->maxmemory;
}

/* The most a MULTI block may hold: one large entry's bytes, and commands
 * that a group's u16 count holds (MULTI and EXEC with them). */
#define KV_BLOCK_MAX ((size_t)KV_BIG_TOTAL_MAX - KV_ENTRY_HDR - KV_GROUP_HDR)
#define KV_BLOCK_CMDS_MAX 65533u

/* A command while MULTI is open: queued (+QUEUED), or refused. EXEC comes
 * here only when it cannot go to the log (an error queued, maxmemory,
 * min-replicas-to-write). */
static void multi_queue(struct server *s, struct conn *c, const struct kv_command *cmd, int argc,
			char **argv, size_t *lens)
{
	const char *name = cmd ? cmd->name : "";
	if (cmd == NULL) {
		kv_reply_unknown_command(&c->out, argc, argv, lens);
		c->multi_err = true;
	} else if (!kv_command_arity_ok(cmd, argc)) {
		kv_reply_arity_error(&c->out, cmd->name);
		c->multi_err = true;
	} else if (!strcmp(name, "exec")) {
		if (c->multi_err)
			kv_buf_str(&c->out, "-EXECABORT Transaction discarded because of previous "
					    "errors.\r\n");
		else if (c->multi_denyoom && over_memory(s))
			kv_buf_str(&c->out, "-EXECABORT Transaction discarded because of: " OOM_ERROR
					    "\r\n");
		else
			kv_buf_str(&c->out, "-EXECABORT Transaction discarded because of: "
					    NOREPLICAS_ERROR "\r\n");
		multi_reset(c);
	} else if ((cmd->flags & KV_CMD_DENYOOM) && over_memory(s)) {
		kv_buf_str(&c->out, "-" OOM_ERROR "\r\n");
		c->multi_err = true;
	} else if ((cmd->flags & KV_CMD_WRITE) && too_few_followers(s)) {
		kv_buf_str(&c->out, "-" NOREPLICAS_ERROR "\r\n");
		c->multi_err = true;
	} else if (cmd->flags & KV_CMD_NOMULTI) {
		kv_buf_str(&c->out, "-ERR Command not allowed inside a transaction\r\n");
		c->multi_err = true;
	} else if (!strcmp(name, "discard")) {
		multi_reset(c);
		kv_buf_str(&c->out, "+OK\r\n");
	} else if (!strcmp(name, "multi")) {
		kv_buf_str(&c->out, "-ERR MULTI calls can not be nested\r\n");
	} else if (!strcmp(name, "watch")) {
		kv_buf_str(&c->out, "-ERR WATCH inside MULTI is not allowed\r\n");
	} else if (!strcmp(name, "quit")) {
		kv_buf_str(&c->out, "+OK\r\n");
		c->closing = true;
	} else if (!strcmp(name, "reset")) {
		multi_reset(c);
		c->db = 0;
		c->resp = 2;
		c->name.len = 0;
		kv_buf_str(&c->out, "+RESET\r\n");
	} else {
		/* MULTI, the block, EXEC: all in one group, one entry (a large
		 * entry, in chunks, if it is larger than one) */
		size_t el = cmd_size(true, argc, lens);
		if (block_size(c, true) + el > KV_BLOCK_MAX || c->multi_n >= KV_BLOCK_CMDS_MAX) {
			char msg[160];
			snprintf(msg, sizeof(msg), "-ERR innet kv: a transaction must fit one large log "
						   "entry (%u bytes, %u commands)\r\n",
				 (unsigned)KV_BLOCK_MAX, KV_BLOCK_CMDS_MAX);
			kv_buf_str(&c->out, msg);
			c->multi_err = true;
			return;
		}
		put_argc(&c->mq, true, (uint32_t)argc);
		for (int i = 0; i < argc; i++)
			put_arg(&c->mq, true, argv[i], lens[i]);
		c->multi_n++;
		c->multi_lens += (uint32_t)argc + 1;
		if (cmd->flags & KV_CMD_DENYOOM)
			c->multi_denyoom = true;
		if (cmd->flags & KV_CMD_WRITE)
			c->multi_write = true;
		kv_buf_str(&c->out, "+QUEUED\r\n");
	}
}

/* A command answered without the log, in its turn (a LOCAL unit at the
 * head of the connection's units). */
static void local_command(struct server *s, struct conn *c, const struct kv_command *cmd, int argc,
			  char **argv, size_t *lens)
{
	s->st.cmds_local++;
	if (c->multi) {
		multi_queue(s, c, cmd, argc, argv, lens);
		return;
	}
	if (cmd == NULL) {
		kv_reply_unknown_command(&c->out, argc, argv, lens);
		return;
	}
	if (!kv_command_arity_ok(cmd, argc)) {
		kv_reply_arity_error(&c->out, cmd->name);
		return;
	}
	if (kv_pubsub_mode(c) && !strcmp(cmd->name, "ping")) {
		kv_buf_str(&c->out, "*2\r\n$4\r\npong\r\n");
		if (argc == 2)
			kv_buf_bulk(&c->out, argv[1], lens[1]);
		else
			kv_buf_str(&c->out, "$0\r\n\r\n");
		return;
	}
	const char *name = cmd->name;
	if (!strcmp(name, "quit")) {
		kv_buf_str(&c->out, "+OK\r\n");
		c->closing = true;
	} else if (!strcmp(name, "multi")) {
		c->multi = true;
		c->multi_err = false;
		c->multi_n = 0;
		c->multi_lens = 0;
		c->mq.len = 0;
		kv_buf_str(&c->out, "+OK\r\n");
	} else if (!strcmp(name, "exec")) {
		kv_buf_str(&c->out, "-ERR EXEC without MULTI\r\n");
	} else if (!strcmp(name, "discard")) {
		kv_buf_str(&c->out, "-ERR DISCARD without MULTI\r\n");
	} else if (!strcmp(name, "watch")) {
		watch_keys(s, c, argc, argv, lens, &c->out);
	} else if (!strcmp(name, "unwatch")) {
		c->watch.len = 0;
		c->n_watch = 0;
		kv_buf_str(&c->out, "+OK\r\n");
	} else if (!strcmp(name, "reset")) {
		multi_reset(c);
		c->db = 0;
		c->resp = 2;
		c->name.len = 0;
		c->subs.len = c->psubs.len = 0;
		c->n_subs = c->n_psubs = 0;
		kv_buf_str(&c->out, "+RESET\r\n");
	} else if (!strcmp(name, "select")) {
		long long db;
		if (!kv_parse_ll(argv[1], lens[1], &db))
			kv_buf_str(&c->out, "-ERR value is not an integer or out of range\r\n");
		else if (db < 0 || db >= KV_DBS)
			kv_buf_str(&c->out, "-ERR DB index is out of range\r\n");
		else {
			c->db = (uint8_t)db;
			kv_buf_str(&c->out, "+OK\r\n");
		}
	} else if (!strcmp(name, "snapshot")) {
		if (s->stale) {
			kv_buf_str(&c->out, "-ERR this replica is waiting for a snapshot itself\r\n");
		} else {
			struct kv_buf b = { 0 };
			kv_snapshot_build(s, &b);
			if (b.oom) {
				kv_buf_str(&c->out, "-ERR out of memory building the snapshot\r\n");
			} else {
				kv_buf_bulk(&c->out, b.p, b.len);
				s->st.snapshots_served++;
			}
			kv_buf_free(&b);
		}
	} else if (cmd->fn != NULL) {
		/* PING, ECHO: the store's, no state */
		struct kv_ctx ctx = { .db = c->db, .resp = c->resp, .read_only = true };
		kv_store_exec(s->store, &ctx, argc, argv, lens, &c->out);
		kv_ctx_end(&ctx);
	} else if (!kv_admin_command(s, c, argc, argv, lens, &c->out)) {
		kv_reply_unknown_command(&c->out, argc, argv, lens);
	}
}

/* A REPLICA REMOVE on its way to the log. Its entry needs an instance, and
 * when the member to remove is down the acceptors' ring may be full already
 * (trim waits for it): so this replica reports for it at once, for 10 s
 * (twice the proposal deadline), after which the log's decision — applied
 * by every replica at the same position — rules. Reporting for a learner
 * that stays a member only makes it need a snapshot (it was trimmed past),
 * never loses anything: trim stays at or below every reporting replica's
 * own watermark. */
static void replica_remove_received(struct server *s, const char *id, size_t len)
{
	long long v;
	if (!kv_parse_ll(id, len, &v) || v < 0 || v >= 64 || (uint64_t)v == s->c->paxos.learner_id ||
	    (s->c->n_learners && v >= (long long)s->c->n_learners))
		return; /* the log answers the error */
	s->tentative_until[v] = innet_now_ns() + 10000000000ull;
}

/* Learner ids this replica reports its watermark for besides its own: the
 * ones removed (by the log), and the ones being removed (tentatively). */
static uint64_t trim_proxied(const struct server *s, uint64_t now)
{
	uint64_t m = kv_store_removed(s->store);
	for (uint32_t i = 0; i < 64; i++)
		if (s->tentative_until[i] > now)
			m |= 1ull << i;
	if (s->c->paxos.learner_id < 64)
		m &= ~(1ull << s->c->paxos.learner_id);
	return m;
}

/* ---- units: a connection's commands in order ------------------------------ */

/* How a unit keeps its commands: as an entry's group (u16 lengths), as a
 * large entry's command (u32 lengths: the WIDE format), or, for the units
 * answered here (reads, local commands), u32 lengths with a NUL after each
 * argument so that they are used where they lie (cmd_local). */
enum { KV_ENC_ENTRY, KV_ENC_WIDE, KV_ENC_LOCAL };

/* Append a command to b in format f. */
static void cmd_encode(struct kv_buf *b, int f, int argc, char *const *argv, const size_t *lens)
{
	size_t w = f == KV_ENC_ENTRY ? 2 : 4, n = w;
	for (int i = 0; i < argc; i++)
		n += w + lens[i] + (f == KV_ENC_LOCAL);
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (np == NULL) {
			b->oom = true; /* the connection is closed (conn_flush) */
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	uint8_t *p = (uint8_t *)b->p + b->len;
	if (w == 2)
		put16(p, (size_t)argc);
	else
		kv_put32(p, (uint32_t)argc);
	p += w;
	for (int i = 0; i < argc; i++) {
		if (w == 2)
			put16(p, lens[i]);
		else
			kv_put32(p, (uint32_t)lens[i]);
		memcpy(p + w, argv[i], lens[i]);
		p += w + lens[i];
		if (f == KV_ENC_LOCAL)
			*p++ = '\0';
	}
	b->len += n;
}

/* Decode the command at v[*pos..) (an entry's or a WIDE one) into s->argv,
 * s->lens (copies in s->scratch, NUL-terminated): its argc. */
static int cmd_decode(struct server *s, const uint8_t *v, size_t *pos, bool wide)
{
	int argc = (int)(wide ? kv_get32(v + *pos) : get16(v + *pos));
	*pos += wide ? 4 : 2;
	size_t used = 0;
	for (int i = 0; i < argc; i++) {
		size_t l = wide ? kv_get32(v + *pos) : get16(v + *pos);
		*pos += wide ? 4 : 2;
		s->argv[i] = s->scratch + used;
		s->lens[i] = l;
		memcpy(s->scratch + used, v + *pos, l);
		s->scratch[used + l] = '\0';
		used += l + 1;
		*pos += l;
	}
	return argc;
}

/* The command at u->cmds[*pos..) of a unit answered here (KV_ENC_LOCAL):
 * s->argv, s->lens point into the unit, no copy. Its argc. */
static int cmd_local(struct server *s, struct kv_unit *u, size_t *pos)
{
	uint8_t *v = (uint8_t *)u->cmds.p;
	int argc = (int)kv_get32(v + *pos);
	*pos += 4;
	for (int i = 0; i < argc; i++) {
		size_t l = kv_get32(v + *pos);
		s->argv[i] = (char *)v + *pos + 4;
		s->lens[i] = l;
		*pos += 4 + l + 1;
	}
	return argc;
}

/* Local commands that change nothing of the connection or the server
 * (every other local command is a barrier: kv_pvt.h, struct kv_unit). */
static bool local_stateless(const char *name)
{
	static const char *const names[] = { "auth", "command", "echo", "eval", "evalsha",
					     "fcall", "info", "lastsave", "ping", "pubsub",
					     "save", "script", "shutdown", "snapshot", "time" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* What a parsed command is: answered here (LOCAL), a read from a read index
 * (READ), through the log (WRITE, or BIG when larger than one entry), or
 * an error found here, its reply made now (REPLY, into err). *barrier: the
 * connection's state may change when it is answered. */
static int cmd_kind(struct server *s, struct conn *c, const struct kv_command *cmd, int argc,
		    char *const *argv, const size_t *lens, struct kv_buf *err, bool *barrier)
{
	*barrier = false;
	if (c->multi) {
		/* every command queued in turn (MULTI was answered before it was
		 * parsed); EXEC to the log when nothing stops it */
		*barrier = true;
		if (cmd != NULL && !strcmp(cmd->name, "exec") && argc == 1 && !c->multi_err &&
		    !(c->multi_denyoom && over_memory(s)) && !(c->multi_write && too_few_followers(s)))
			return block_size(c, false) <= KV_GROUP_MAX ? KV_U_WRITE : KV_U_BIG;
		return KV_U_LOCAL;
	}
	if (cmd == NULL) {
		kv_reply_unknown_command(err, argc, argv, lens);
		return KV_U_REPLY;
	}
	if (!kv_command_arity_ok(cmd, argc)) {
		kv_reply_arity_error(err, cmd->name);
		return KV_U_REPLY;
	}
	if (kv_pubsub_mode(c) && !kv_pubsub_allowed(cmd->name)) {
		char msg[200];
		snprintf(msg, sizeof(msg), "-ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
					   "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
					   "context\r\n", cmd->name);
		kv_buf_str(err, msg);
		return KV_U_REPLY;
	}
	if ((cmd->flags & KV_CMD_DENYOOM) && over_memory(s)) {
		kv_buf_str(err, "-" OOM_ERROR "\r\n");
		return KV_U_REPLY;
	}
	if ((cmd->flags & KV_CMD_WRITE) && too_few_followers(s)) {
		kv_buf_str(err, "-" NOREPLICAS_ERROR "\r\n");
		return KV_U_REPLY;
	}
	if (cmd->flags & KV_CMD_LOCAL) {
		*barrier = !local_stateless(cmd->name);
		return KV_U_LOCAL;
	}
	if ((cmd->flags & KV_CMD_READONLY) && !s->reads_log)
		return KV_U_READ;
	if (encoded_len(argc, lens) <= KV_GROUP_MAX)
		return KV_U_WRITE;
	return KV_U_BIG; /* its own entry, in chunks (each argument fit proto-max-bulk-len) */
}

static void rq_add(struct server *s, struct conn *c)
{
	if (!c->in_rq) {
		c->in_rq = true;
		s->rq[s->n_rq++] = c;
	}
}

static void rwait_add(struct server *s, struct conn *c)
{
	if (!c->in_rwait) {
		c->in_rwait = true;
		s->rwait[s->n_rwait++] = c;
	}
}

static void list_del(struct conn **list, uint32_t *n, struct conn *c)
{
	for (uint32_t i = 0; i < *n; i++)
		if (list[i] == c) {
			list[i] = list[--*n];
			return;
		}
}

/* The header of the large entry a BIG unit will be (WIDE, one group of n
 * commands), into b; its stamp is set when its first chunk goes out. */
static void big_header(struct conn *c, uint32_t n, struct kv_buf *b)
{
	uint8_t h[KV_ENTRY_HDR + KV_GROUP_HDR] = { KV_ENTRY_MAGIC0, KV_ENTRY_MAGIC1,
						   KV_ENTRY_VERSION, KV_ENTRY_F_WIDE, 0, 1 };
	kv_put32(h + KV_ENTRY_HDR, c->client);
	put16(h + KV_ENTRY_HDR + 4, n);
	h[KV_ENTRY_HDR + 6] = c->db;
	kv_buf_append(b, h, sizeof(h));
}

/* Add a command of kind k to the connection's units: to the last one if it
 * is of that kind and has not started (and neither is a barrier), else to
 * a new one. A REPLY unit takes the reply in argv[0]; an EXEC (c->multi)
 * takes the connection's block. False: no room (the command stays unparsed
 * until a unit is answered). */
static bool unit_add(struct server *s, struct conn *c, int k, bool barrier, int argc,
		     char *const *argv, const size_t *lens)
{
	struct kv_unit *u = unit_last(c);
	bool exec = c->multi && (k == KV_U_WRITE || k == KV_U_BIG);
	bool join = u != NULL && u->kind == k && !u->barrier && !barrier && !exec &&
		    u->db == c->db && u->resp == c->resp && k != KV_U_BIG && k != KV_U_ERROR &&
		    ((k == KV_U_LOCAL || k == KV_U_REPLY) || (k == KV_U_READ && u->slot == 0) ||
		     (k == KV_U_WRITE && (u->entry == 0 || u->entry == KV_QUEUED) &&
		      u->cmds.len + encoded_len(argc, lens) <= KV_GROUP_MAX));
	if (!join) {
		if (c->n_units == KV_CONN_UNITS)
			return false;
		u = &c->units[(c->head + c->n_units++) % KV_CONN_UNITS];
		u->kind = (uint8_t)k;
		u->slot = 0;
		u->db = c->db;
		u->resp = c->resp;
		u->barrier = barrier;
		u->n_cmds = 0;
		u->n_replies = 0;
		u->entry = 0;
		u->cmds.len = 0;
	}
	if (k == KV_U_READ)
		u->t_ms = kv_wall_ms();
	if (exec) {
		/* MULTI, the block, EXEC: one group, one reply */
		if (k == KV_U_BIG)
			big_header(c, 2 + c->multi_n, &u->cmds);
		encode_block(c, k == KV_U_BIG, &u->cmds);
		u->n_cmds += 2 + c->multi_n;
		u->n_replies++;
		multi_reset(c);
	} else if (k == KV_U_ERROR || k == KV_U_REPLY) {
		kv_buf_append(&u->cmds, argv[0], lens[0]);
		u->n_cmds++;
		u->n_replies++;
	} else {
		if (k == KV_U_BIG)
			big_header(c, 1, &u->cmds);
		cmd_encode(&u->cmds, k == KV_U_WRITE ? KV_ENC_ENTRY :
				     k == KV_U_BIG ? KV_ENC_WIDE : KV_ENC_LOCAL, argc, argv, lens);
		u->n_cmds++;
		u->n_replies++;
	}
	if (barrier)
		c->barrier = true;
	if (k == KV_U_READ)
		rq_add(s, c);
	return true;
}

static void round_release(struct server *s, struct kv_unit *u)
{
	if (u->kind != KV_U_READ || u->slot == 0)
		return;
	struct kv_read_round *r = &s->rounds[u->slot - 1];
	if (--r->refs == 0 && r->state == KV_RR_DONE)
		r->state = KV_RR_FREE;
	u->slot = 0;
}

/* The head unit is answered: the next one's turn (and parsing goes on if
 * it was a barrier: it was the last unit). */
static void unit_pop(struct server *s, struct conn *c)
{
	struct kv_unit *u = unit_head(c);
	round_release(s, u);
	if (u->barrier)
		c->barrier = false;
	u->kind = 0;
	u->barrier = false;
	u->cmds.len = 0;
	c->head++;
	c->n_units--;
}

/* Answer the head unit's replies with msg (a failed write or read). */
static void unit_fail(struct server *s, struct conn *c, const char *msg)
{
	for (uint32_t k = 0; k < unit_head(c)->n_replies; k++)
		kv_buf_str(&c->out, msg);
	unit_pop(s, c);
}

/* Whether read unit u may see a key whose expire lies between log time and
 * the read's time u->t_ms (it would answer with a key already past its
 * time): its commands' keys (the command table's key positions), or any
 * key for a command without (KEYS, SCAN, DBSIZE, RANDOMKEY...). */
static bool read_sees_due(struct server *s, struct kv_unit *u)
{
	int64_t now = kv_store_now(s->store), due = kv_store_next_expiry(s->store);
	if (due == 0 || due > u->t_ms || now >= u->t_ms)
		return false; /* no key due before the read: nothing to wait for */
	size_t pos = 0;
	for (uint32_t k = 0; k < u->n_cmds; k++) {
		int argc = cmd_local(s, u, &pos);
		const struct kv_command *cmd = kv_command_find(s->argv[0], s->lens[0]);
		if (cmd == NULL || cmd->first_key <= 0 || cmd->key_step <= 0)
			return true;
		int last = cmd->last_key < 0 ? argc + cmd->last_key : cmd->last_key;
		for (int i = cmd->first_key; i <= last && i < argc; i += cmd->key_step) {
			int64_t e = kv_store_expire_of(s->store, u->db, s->argv[i], s->lens[i]);
			if (e > now && e <= u->t_ms)
				return true; /* (e <= now: past it, hidden already) */
		}
	}
	return false;
}

/* Answer what can be answered at the head of the connection's units, in
 * order; queue its write when it is first; note where it waits. */
static void conn_advance(struct server *s, struct conn *c)
{
	while (c->n_units > 0 && !c->closing) {
		struct kv_unit *u = unit_head(c);
		size_t pos = 0;
		if (u->kind == KV_U_ERROR) {
			kv_buf_append(&c->out, u->cmds.p, u->cmds.len);
			c->closing = true;
			c->drain = true;
			unit_pop(s, c);
		} else if (u->kind == KV_U_REPLY) {
			kv_buf_append(&c->out, u->cmds.p, u->cmds.len);
			s->st.cmds_local += u->n_cmds;
			unit_pop(s, c);
		} else if (u->kind == KV_U_LOCAL) {
			for (uint32_t k = 0; k < u->n_cmds && !c->closing; k++) {
				int argc = cmd_local(s, u, &pos);
				const struct kv_command *cmd = kv_command_find(s->argv[0], s->lens[0]);
				local_command(s, c, cmd, argc, s->argv, s->lens);
			}
			unit_pop(s, c);
		} else if (u->kind == KV_U_READ) {
			if (u->slot == 0)
				return; /* its round has not begun: rq */
			struct kv_read_round *r = &s->rounds[u->slot - 1];
			if (r->state == KV_RR_DONE && r->status != 0) {
				unit_fail(s, c, "-ERR read timed out: no majority of acceptors answered "
						"(this replica may be partitioned from them)\r\n");
				continue;
			}
			if (r->state != KV_RR_DONE || innet_paxos_delivered(s->px) < r->index) {
				rwait_add(s, c);
				return;
			}
			/* A key the read touches was due by this replica's clock
			 * before the read came, and log time is not past it: the read
			 * waits for log time to reach the read's own time (a tick, or
			 * any entry), so that the key is gone for it (as at every
			 * replica at that position), not seen until the next entry. */
			if (read_sees_due(s, u)) {
				if (s->tick_want < u->t_ms)
					s->tick_want = u->t_ms;
				rwait_add(s, c);
				return;
			}
			/* the store as of the read index: read-only, nothing changes
			 * (a key past its expire by log time is hidden, not deleted) */
			struct kv_ctx ctx = { .db = u->db, .resp = u->resp, .read_only = true };
			for (uint32_t k = 0; k < u->n_cmds; k++) {
				int argc = cmd_local(s, u, &pos);
				kv_store_exec(s->store, &ctx, argc, s->argv, s->lens, &c->out);
			}
			kv_ctx_end(&ctx);
			s->st.reads_local += u->n_cmds;
			unit_pop(s, c);
		} else if (u->kind == KV_U_BIG) {
			if (u->entry == 0) {
				u->entry = KV_QUEUED;
				s->bigq[s->n_bigq++] = c;
			}
			return; /* answered when its image is applied */
		} else {
			if (u->entry == 0) {
				u->entry = KV_QUEUED;
				s->queue[s->n_queue++] = c;
			}
			return; /* answered when its entry is applied */
		}
	}
}

/* Parse what the connection sent into units (conn_advance answers them);
 * not past a barrier until it is answered. */
static void conn_parse(struct server *s, struct conn *c)
{
	if (c->follower) {
		c->in.len = 0; /* REPLCONF ACK: nothing to answer */
		return;
	}
	size_t consumed = 0;
	struct kv_buf err_reply = { 0 };
	while (!c->quit && !c->barrier && consumed < c->in.len) {
		int argc = 0;
		char err[160];
		ssize_t r = kv_resp_parse(c->in.p + consumed, c->in.len - consumed, &argc, s->argv,
					  s->lens, KV_MAX_ARGS, s->max_bulk, s->scratch, s->scratch_cap,
					  err, sizeof(err));
		if (r == 0 && consumed == 0 && c->in.len >= s->query_max)
			snprintf(err, sizeof(err), "-ERR Protocol error: request too large\r\n");
		else if (r == 0)
			break;
		if (r <= 0) {
			char *e[1] = { err };
			size_t el[1] = { strlen(err) };
			if (!unit_add(s, c, KV_U_ERROR, false, 1, e, el))
				break;
			c->quit = true;
			break;
		}
		if (argc == 0) {
			consumed += (size_t)r;
			continue;
		}
		const struct kv_command *cmd = kv_command_find(s->argv[0], s->lens[0]);
		bool barrier;
		err_reply.len = 0;
		int k = cmd_kind(s, c, cmd, argc, s->argv, s->lens, &err_reply, &barrier);
		if (k == KV_U_LOCAL && barrier && c->n_units == 0) {
			/* nothing of the connection pending: answered now, and
			 * parsing goes on (a long MULTI block costs no pass each) */
			local_command(s, c, cmd, argc, s->argv, s->lens);
			if (c->closing)
				c->quit = true;
			if (c->follower) { /* SYNC: what it sends next gets no answer */
				consumed = c->in.len;
				break;
			}
			c->last_ns = innet_now_ns();
			snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", cmd ? cmd->name : "NULL");
			consumed += (size_t)r;
			continue;
		}
		bool ok;
		if (k == KV_U_REPLY) {
			char *e[1] = { err_reply.p };
			size_t el[1] = { err_reply.len };
			ok = !err_reply.oom && unit_add(s, c, k, false, 1, e, el);
		} else {
			ok = unit_add(s, c, k, barrier, argc, s->argv, s->lens);
		}
		if (!ok)
			break; /* every unit in use: parse the rest when one is answered */
		if (k == KV_U_WRITE && argc == 3 && !strcasecmp(s->argv[0], "replica") &&
		    !strcasecmp(s->argv[1], "remove"))
			replica_remove_received(s, s->argv[2], s->lens[2]);
		if (k == KV_U_LOCAL && cmd != NULL && !strcmp(cmd->name, "quit"))
			c->quit = true;
		c->last_ns = innet_now_ns();
		snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", cmd ? cmd->name : "NULL");
		consumed += (size_t)r;
	}
	kv_buf_free(&err_reply);
	kv_buf_consume(&c->in, consumed);
}

/* Parse, answer what can be answered (and parse again while that made
 * room for commands left unparsed, or answered a barrier). The caller sends
 * (conn_flush), which also sets what the connection waits for: one
 * epoll_ctl at most, after the replies went out (here, before, it would
 * often be two: EPOLLOUT on, off). */
static void conn_work(struct server *s, struct conn *c)
{
	for (;;) {
		conn_parse(s, c);
		uint64_t head = c->head;
		conn_advance(s, c);
		if (c->head == head || c->quit || c->in.len == 0 || c->closing)
			break;
	}
}

static void conn_flush(struct server *s, struct conn *c);

/* ---- read rounds -------------------------------------------------------- */

/* Begin a read round for every read parsed and not in a round yet, while
 * fewer than KV_READ_WINDOW rounds are under way (the reads that come
 * meanwhile wait for the next: the fuller the replica, the more reads a
 * round serves). */
static void reads_begin(struct server *s)
{
	if (s->n_rq == 0 || s->rounds_running >= KV_READ_WINDOW)
		return;
	uint32_t slot = 0;
	while (slot < KV_READ_SLOTS && s->rounds[slot].state != KV_RR_FREE)
		slot++;
	if (slot == KV_READ_SLOTS)
		return; /* every slot waited on: later */
	struct kv_read_round *r = &s->rounds[slot];
	if (innet_paxos_read_index(s->px, &r->id) != 0)
		return;
	r->state = KV_RR_RUNNING;
	r->status = 0;
	r->index = 0;
	r->refs = 0;
	s->rounds_running++;
	s->st.read_rounds++;
	for (uint32_t i = 0; i < s->n_rq; i++) {
		struct conn *c = s->rq[i];
		c->in_rq = false;
		rwait_add(s, c); /* looked at when the round ends */
		for (uint32_t k = 0; k < c->n_units; k++) {
			struct kv_unit *u = &c->units[(c->head + k) % KV_CONN_UNITS];
			if (u->kind == KV_U_READ && u->slot == 0) {
				u->slot = (uint8_t)(slot + 1);
				r->refs++;
			}
		}
	}
	s->n_rq = 0;
}

static void on_read_done(void *arg, uint64_t id, int status, uint64_t index)
{
	struct server *s = arg;
	for (uint32_t i = 0; i < KV_READ_SLOTS; i++) {
		struct kv_read_round *r = &s->rounds[i];
		if (r->state != KV_RR_RUNNING || r->id != id)
			continue;
		r->state = r->refs > 0 ? KV_RR_DONE : KV_RR_FREE;
		r->status = status;
		r->index = index;
		s->rounds_running--;
		if (status != 0)
			s->st.read_rounds_failed++;
		s->reads_moved = true;
		return;
	}
}

/* The connections whose next reply is a read: answer those whose round
 * ended and whose index the log reached. */
static void reads_answer(struct server *s)
{
	uint64_t next = innet_paxos_delivered(s->px);
	if (!s->reads_moved && next == s->rwait_next)
		return;
	s->reads_moved = false;
	s->rwait_next = next;
	uint32_t n = s->n_rwait;
	struct conn *w[KV_MAX_CONNS];
	memcpy(w, s->rwait, n * sizeof(w[0]));
	s->n_rwait = 0;
	for (uint32_t i = 0; i < n; i++)
		w[i]->in_rwait = false;
	for (uint32_t i = 0; i < n; i++) {
		conn_work(s, w[i]);
		conn_flush(s, w[i]);
	}
}

/* ---- redis's replication stream (SYNC/PSYNC followers) ------------------ */

static void conn_close(struct server *s, struct conn *c);

#define KV_FOLLOWER_OUT_MAX (256u << 20) /* a follower this far behind is dropped (redis's
                                          * client-output-buffer-limit replica) */

void kv_followers_send(struct server *s)
{
	if (s->n_followers == 0)
		return;
	uint64_t now = innet_now_ns();
	long long period = kv_config_ll(s, "repl-ping-replica-period", 10);
	if (period > 0 && now - s->ping_ns >= (uint64_t)period * 1000000000ull) {
		kv_buf_str(&s->feed, "*1\r\n$4\r\nPING\r\n");
		s->ping_ns = now;
	}
	if (s->feed.len == 0)
		return;
	struct conn *f[KV_MAX_CONNS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->follower)
			f[n++] = s->conns[i];
	for (uint32_t i = 0; i < n; i++) {
		if (s->feed.oom || f[i]->out.len + s->feed.len > KV_FOLLOWER_OUT_MAX) {
			fprintf(stderr, "innet kv: a follower of the replication stream fell %zu bytes "
					"behind: dropped\n", f[i]->out.len);
			conn_close(s, f[i]);
			continue;
		}
		kv_buf_append(&f[i]->out, s->feed.p, s->feed.len);
		conn_flush(s, f[i]);
	}
	s->feed.len = 0;
	s->feed.oom = false;
}

void kv_followers_drop(struct server *s)
{
	for (uint32_t i = 0; i < s->n_conns;) {
		if (s->conns[i]->follower)
			conn_close(s, s->conns[i]); /* moves the last one here */
		else
			i++;
	}
}

/* ---- writes: groups into entries ---------------------------------------- */

static uint64_t big_req_end(struct server *s, uint64_t req);

/* Fail every group of entry req (our proposal was refused or timed out); a
 * chunk of a large entry fails the large write (its other chunks may still
 * be chosen: the replicas drop the partial image when this replica's next
 * large entry begins). */
void kv_entry_failed(struct server *s, uint64_t req, const char *msg)
{
	struct conn *failed[KV_MAX_CONNS];
	uint32_t n = 0;
	uint64_t big = big_req_end(s, req);
	if (big != 0 && big == s->big_id && s->big_conn != NULL) {
		req = s->big_id;
		s->big_conn = NULL;
	}
	for (uint32_t i = 0; i < s->n_conns; i++) {
		struct conn *c = s->conns[i];
		if (c->n_units > 0 &&
		    (unit_head(c)->kind == KV_U_WRITE || unit_head(c)->kind == KV_U_BIG) &&
		    unit_head(c)->entry == req)
			failed[n++] = c;
	}
	for (uint32_t i = 0; i < n; i++) {
		unit_fail(s, failed[i], msg);
		conn_work(s, failed[i]);
		conn_flush(s, failed[i]);
	}
}

static void batch_add(struct server *s, uint64_t req)
{
	for (uint32_t i = 0; i < KV_MAX_WINDOW; i++)
		if (s->batches[i] == 0) {
			s->batches[i] = req;
			break;
		}
	s->n_batches++;
}

static void put64(uint8_t *p, uint64_t v)
{
	kv_put32(p, (uint32_t)(v >> 32));
	kv_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)kv_get32(p) << 32 | kv_get32(p + 4);
}

/* An entry's header at e: n_groups, flags, this replica's clock as its
 * stamp (the log time of its commands). */
static void entry_header(uint8_t *e, uint32_t n_groups, uint8_t flags)
{
	e[0] = KV_ENTRY_MAGIC0;
	e[1] = KV_ENTRY_MAGIC1;
	e[2] = KV_ENTRY_VERSION;
	e[3] = flags;
	put16(e + 4, n_groups);
	put64(e + 6, (uint64_t)kv_wall_ms());
}

/* Active expiry through the log: when a key is due by this replica's clock
 * and no entry has moved log time past it, propose an empty entry (a tick)
 * whose stamp does. Replica k waits k x 20 ms more, so that normally one
 * replica ticks, and another does when it is down. And at once when a read
 * waits for log time (tick_want: a key was due before the read came; with
 * active expiry off too, where a tick only moves log time). One tick of
 * ours in flight at a time. */
static void server_tick(struct server *s)
{
	if (s->tick_req != 0 || s->n_batches >= s->window || s->stale)
		return;
	int64_t now = kv_wall_ms();
	if (s->tick_want <= kv_store_now(s->store) || now < s->tick_want) {
		/* no read waits for log time (or this clock has not reached
		 * what it waits for: it stepped back) */
		int64_t due = kv_store_next_expiry(s->store);
		if (due == 0 || !kv_store_active_expire(s->store) ||
		    now < due + 20 * (int64_t)(s->c->paxos.learner_id % 16) ||
		    kv_store_now(s->store) >= due)
			return;
	}
	uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
	entry_header(s->entry, 0, 0);
	int rc = innet_paxos_propose(s->px, req, s->entry, KV_ENTRY_HDR);
	if (rc == -EAGAIN)
		return;
	s->seq++;
	if (rc != 0)
		return;
	s->tick_req = req;
	s->st.ticks_proposed++;
	batch_add(s, req);
}

/* One entry of the queued groups, in order, as many as one value holds:
 * 1 proposed, 0 not now (the dedup window), -1 nothing queued. */
static int propose_batch(struct server *s)
{
	if (s->n_queue == 0)
		return -1;
	uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
	size_t pos = KV_ENTRY_HDR;
	uint32_t ng = 0, ncmds = 0;
	/* the first group always goes (a group fits PAXOS_VALUE_MAX) */
	while (ng < s->n_queue &&
	       pos + KV_GROUP_HDR + unit_head(s->queue[ng])->cmds.len <=
		       (ng == 0 ? PAXOS_VALUE_MAX : s->entry_max)) {
		struct conn *c = s->queue[ng++];
		struct kv_unit *u = unit_head(c);
		kv_put32(s->entry + pos, c->client);
		put16(s->entry + pos + 4, u->n_cmds);
		s->entry[pos + 6] = u->db;
		s->entry[pos + 7] = 0; /* flags */
		memcpy(s->entry + pos + KV_GROUP_HDR, u->cmds.p, u->cmds.len);
		pos += KV_GROUP_HDR + u->cmds.len;
		ncmds += u->n_cmds;
	}
	entry_header(s->entry, ng, 0);
	int rc = innet_paxos_propose(s->px, req, s->entry, (uint32_t)pos);
	if (rc == -EAGAIN)
		return 0; /* an older entry holds the dedup window: later */
	s->seq++;
	for (uint32_t i = 0; i < ng; i++)
		unit_head(s->queue[i])->entry = req;
	memmove(s->queue, s->queue + ng, (s->n_queue - ng) * sizeof(s->queue[0]));
	s->n_queue -= ng;
	if (rc != 0) {
		kv_entry_failed(s, req, "-ERR cannot propose to the coordinator\r\n");
		return 1;
	}
	s->st.entries_proposed++;
	s->st.groups_proposed += ng;
	s->st.cmds_proposed += ncmds;
	s->st.bytes_proposed += pos;
	batch_add(s, req);
	return 1;
}

/* The next chunk of the large write whose turn it is (one at a time: the
 * next begins once this one's image was applied or failed, since replicas
 * drop a proposer's older partial image when a newer one begins): 1
 * proposed, 0 not now, -1 nothing to send. */
static int propose_chunk(struct server *s)
{
	if (s->big_conn == NULL) {
		if (s->n_bigq == 0)
			return -1;
		s->big_conn = s->bigq[0];
		memmove(s->bigq, s->bigq + 1, (--s->n_bigq) * sizeof(s->bigq[0]));
		if (++s->big_seq == 0)
			s->big_seq = 1;
		s->big_id = innet_paxos_req_id(s->client, s->big_seq);
		s->big_off = 0;
		struct kv_unit *bu = unit_head(s->big_conn);
		bu->entry = s->big_id;
		/* the image's log time: when its first chunk goes out */
		put64((uint8_t *)bu->cmds.p + 6, (uint64_t)kv_wall_ms());
	}
	struct kv_unit *u = unit_head(s->big_conn);
	uint32_t slot = 0;
	while (slot < KV_MAX_WINDOW && s->big_reqs[slot] != 0)
		slot++;
	if (s->big_off >= u->cmds.len || slot == KV_MAX_WINDOW)
		return -1; /* every chunk sent: its image is applied when the last lands */
	uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
	uint32_t off = s->big_off;
	size_t len = kv_chunk_next(s, (const uint8_t *)u->cmds.p, (uint32_t)u->cmds.len, s->entry,
				   s->entry_max);
	int rc = innet_paxos_propose(s->px, req, s->entry, (uint32_t)len);
	if (rc == -EAGAIN) {
		s->big_off = off;
		return 0;
	}
	s->seq++;
	s->big_reqs[slot] = req;
	s->big_req_of[slot] = s->big_id;
	if (rc != 0) {
		kv_entry_failed(s, req, "-ERR cannot propose to the coordinator\r\n");
		return 1;
	}
	s->st.chunks_proposed++;
	s->st.bytes_proposed += len;
	batch_add(s, req);
	return 1;
}

/* Put the queued groups into entries and the large writes into chunks, and
 * propose them while fewer than `window` of ours are in flight (a batch and
 * a chunk in turn, so that a large value streaming out does not hold up the
 * small writes of other connections). Groups that arrive while the window
 * is full wait and go out together in the next entry: the fuller the
 * window, the larger the batch. */
static void server_propose(struct server *s)
{
	for (;;) {
		if (s->n_batches >= s->window) {
			if (s->n_queue > 0 || s->big_conn != NULL || s->n_bigq > 0)
				s->st.window_full++;
			return;
		}
		int b = propose_batch(s);
		if (s->n_batches >= s->window)
			continue;
		int c = propose_chunk(s);
		if (b <= 0 && c <= 0)
			break;
	}
	server_tick(s);
}

/* Entry req of ours is no longer in flight. */
void kv_batch_end(struct server *s, uint64_t req)
{
	if (req == s->tick_req)
		s->tick_req = 0;
	for (uint32_t i = 0; i < KV_MAX_WINDOW; i++)
		if (s->batches[i] == req) {
			s->batches[i] = 0;
			s->n_batches--;
		}
}

static void conn_close(struct server *s, struct conn *c)
{
	if (c->follower && --s->n_followers == 0) {
		kv_store_set_feed(s->store, NULL);
		s->feed.len = 0;
	}
	for (uint32_t i = 0; i < s->n_queue; i++)
		if (s->queue[i] == c) { /* the queue is an order: close the gap */
			memmove(s->queue + i, s->queue + i + 1, (s->n_queue - i - 1) * sizeof(s->queue[0]));
			s->n_queue--;
			break;
		}
	for (uint32_t i = 0; i < s->n_bigq; i++)
		if (s->bigq[i] == c) {
			memmove(s->bigq + i, s->bigq + i + 1, (s->n_bigq - i - 1) * sizeof(s->bigq[0]));
			s->n_bigq--;
			break;
		}
	if (s->big_conn == c)
		s->big_conn = NULL; /* its chunks stop; the replicas drop the partial image
		                     * when this replica's next large entry begins */
	if (c->in_rq)
		list_del(s->rq, &s->n_rq, c);
	if (c->in_rwait)
		list_del(s->rwait, &s->n_rwait, c);
	while (c->n_units > 0)
		unit_pop(s, c);
	for (uint32_t k = 0; k < KV_CONN_UNITS; k++)
		kv_buf_free(&c->units[k].cmds);
	epoll_ctl(s->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i] == c) {
			s->conns[i] = s->conns[--s->n_conns];
			break;
		}
	kv_buf_free(&c->in);
	kv_buf_free(&c->out);
	kv_buf_free(&c->mq);
	kv_buf_free(&c->watch);
	kv_buf_free(&c->name);
	kv_buf_free(&c->subs);
	kv_buf_free(&c->psubs);
	free(c);
}

static void conn_flush(struct server *s, struct conn *c)
{
	bool oom = c->in.oom || c->out.oom || c->mq.oom || c->watch.oom || c->name.oom;
	for (uint32_t k = 0; k < KV_CONN_UNITS; k++)
		oom |= c->units[k].cmds.oom;
	if (INNET_UNLIKELY(oom)) {
		/* a request or its answer would not fit in memory: the client
		 * gets a closed connection, the server goes on */
		s->st.conns_oom++;
		conn_close(s, c);
		return;
	}
	while (c->out.len > 0) {
		ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0)
			break;
		kv_buf_consume(&c->out, (size_t)n);
	}
	/* QUIT or a protocol error: once answered (nothing was parsed after it);
	 * the client stopped sending: once every unit is answered (a write in
	 * flight may still be applied) */
	if (c->out.len == 0 && c->closing && c->drain && !c->eof) {
		if (!c->draining) {
			shutdown(c->fd, SHUT_WR); /* the client reads the error, then EOF */
			c->draining = true;
			c->drain_ns = innet_now_ns();
			kv_buf_free(&c->in);
		}
		conn_update(s, c);
		return;
	}
	if (c->out.len == 0 && (c->closing || (c->eof && c->n_units == 0))) {
		conn_close(s, c);
		return;
	}
	conn_update(s, c);
}

/* Walk n commands encoded at v[*pos..len) (u16 lengths, or u32 if wide):
 * true if well-formed. */
static bool check_cmds(const uint8_t *v, uint32_t len, size_t *pos, uint32_t n, bool wide)
{
	size_t w = wide ? 4 : 2;
	for (uint32_t k = 0; k < n; k++) {
		if (*pos + w > len)
			return false;
		uint32_t argc = wide ? kv_get32(v + *pos) : get16(v + *pos);
		*pos += w;
		if (argc == 0 || argc > KV_MAX_ARGS)
			return false;
		for (uint32_t i = 0; i < argc; i++) {
			if (*pos + w > len)
				return false;
			size_t l = wide ? kv_get32(v + *pos) : get16(v + *pos);
			if (l > len - *pos - w)
				return false;
			*pos += w + l;
		}
	}
	return true;
}

/* True if v is a complete, well-formed entry of the KV batch format (flags:
 * WIDE or none; a chunk is taken apart by kv_chunk.c before). */
bool kv_entry_valid(const uint8_t *v, uint32_t len)
{
	if (len < KV_ENTRY_HDR || v[0] != KV_ENTRY_MAGIC0 || v[1] != KV_ENTRY_MAGIC1 ||
	    v[2] != KV_ENTRY_VERSION || (v[3] & ~KV_ENTRY_F_WIDE) != 0)
		return false;
	bool wide = (v[3] & KV_ENTRY_F_WIDE) != 0;
	uint32_t ng = get16(v + 4);
	size_t pos = KV_ENTRY_HDR;
	for (uint32_t g = 0; g < ng; g++) {
		if (pos + KV_GROUP_HDR > len || v[pos + 6] >= KV_DBS || v[pos + 7] != 0)
			return false;
		uint32_t cmds = get16(v + pos + 4);
		pos += KV_GROUP_HDR;
		if (!check_cmds(v, len, &pos, cmds, wide))
			return false;
	}
	return pos == len;
}

/* scratch holds at least need bytes (a large entry from another replica may
 * be larger than this one's own limit). False: out of memory. */
static bool scratch_fit(struct server *s, size_t need)
{
	if (need <= s->scratch_cap)
		return true;
	char *p = realloc(s->scratch, need);
	if (p == NULL)
		return false;
	s->scratch = p;
	s->scratch_cap = need;
	return true;
}

/* Apply n (checked) commands encoded at v[*pos..), replies to out. */
static void apply_cmds(struct server *s, const uint8_t *v, size_t *pos, uint32_t n, bool wide,
		       struct kv_ctx *ctx, struct kv_buf *out)
{
	for (uint32_t k = 0; k < n; k++) {
		size_t start = *pos, need = 0;
		int argc = (int)(wide ? kv_get32(v + start) : get16(v + start));
		if (wide) { /* its arguments' bytes, for scratch */
			size_t q = start + 4;
			for (int i = 0; i < argc; i++) {
				size_t l = kv_get32(v + q);
				need += l + 1;
				q += 4 + l;
			}
			if (!scratch_fit(s, need)) {
				s->oom = true;
				return;
			}
		}
		argc = cmd_decode(s, v, pos, wide);
		kv_store_exec(s->store, ctx, argc, s->argv, s->lens, out);
	}
	s->st.cmds_applied += n;
}

struct block_hook {
	struct server *s;
	struct conn *c;
};

/* A server command inside a MULTI block of one of our connections, run
 * when the block is applied. */
static void block_local(void *arg, int argc, char *const *argv, const size_t *lens,
			struct kv_buf *out)
{
	struct block_hook *h = arg;
	if (kv_admin_command(h->s, h->c, argc, (char **)argv, (size_t *)lens, out))
		return;
	if (lens[0] == 7 && !strncasecmp(argv[0], "unwatch", 7))
		kv_buf_str(out, "+OK\r\n");
	else
		kv_buf_str(out, "-ERR innet kv: this command cannot run inside MULTI\r\n");
}

/* Log entry v, chosen at instance, applied: every command in it; our
 * connections' groups answered. `owner` is the request id whose client
 * part says which replica proposed it (a large entry: its image's id, whose
 * units carry it in `entry`). An entry not in the KV batch format
 * (malformed, or another version) is skipped as a whole — by every replica
 * alike, so their states stay equal — counted and logged once. */
static void entry_apply(struct server *s, uint64_t instance, uint64_t owner, const uint8_t *v,
			uint32_t len)
{
	bool ours = (uint32_t)(owner >> 32) == s->client;
	if (!kv_entry_valid(v, len)) {
		s->st.entries_bad++;
		if (!s->bad_logged) {
			fprintf(stderr, "innet kv: instance %llu: not a KV batch entry of version %u "
					"(first bytes %02x %02x %02x %02x): skipped (counted as "
					"entries_bad)\n", (unsigned long long)instance,
				KV_ENTRY_VERSION, len > 0 ? v[0] : 0, len > 1 ? v[1] : 0,
				len > 2 ? v[2] : 0, len > 3 ? v[3] : 0);
			s->bad_logged = true;
		}
		if (ours)
			kv_entry_failed(s, owner, "-ERR internal error: malformed log entry\r\n");
		return;
	}
	uint64_t t0 = innet_now_ns();
	s->st.entries_applied++;
	s->st.expired_keys += kv_store_advance(s->store, (int64_t)get64(v + 6));
	bool wide = (v[3] & KV_ENTRY_F_WIDE) != 0;
	uint32_t ng = get16(v + 4);
	size_t pos = KV_ENTRY_HDR;
	struct conn *answered[KV_MAX_CONNS];
	uint32_t n_ans = 0;
	for (uint32_t g = 0; g < ng; g++) {
		uint32_t client = kv_get32(v + pos);
		uint32_t cmds = get16(v + pos + 4);
		uint8_t db = v[pos + 6];
		struct kv_ctx ctx = { .db = db, .resp = 2 };
		pos += KV_GROUP_HDR;
		struct conn *c = ours ? conn_by_client(s, client) : NULL;
		if (c != NULL && (c->n_units == 0 ||
				  (unit_head(c)->kind != KV_U_WRITE && unit_head(c)->kind != KV_U_BIG) ||
				  unit_head(c)->entry != owner))
			c = NULL;
		struct block_hook hook = { s, c };
		if (c != NULL) {
			ctx.resp = unit_head(c)->resp;
			ctx.local = block_local;
			ctx.local_arg = &hook;
		}
		apply_cmds(s, v, &pos, cmds, wide, &ctx, c ? &c->out : &s->scratch_out);
		kv_ctx_end(&ctx);
		s->scratch_out.len = 0;
		s->scratch_out.oom = false;
		if (c != NULL) {
			if (ctx.db != db)
				c->db = (uint8_t)ctx.db; /* SELECT in an EXEC block (a barrier) */
			if (c == s->big_conn)
				s->big_conn = NULL; /* its image is applied: the next one's turn */
			unit_pop(s, c);
			answered[n_ans++] = c;
		}
	}
	uint64_t t1 = innet_now_ns();
	for (uint32_t i = 0; i < n_ans; i++) {
		struct conn *c = answered[i];
		conn_work(s, c); /* its next units */
		conn_flush(s, c);
	}
	kv_followers_send(s);
	s->st.ns_apply += t1 - t0;
	s->st.ns_reply += innet_now_ns() - t1;
}

/* Chunk entry req of ours is no longer in flight: the id of the large
 * entry it was a chunk of, 0 if it was none. */
static uint64_t big_req_end(struct server *s, uint64_t req)
{
	for (uint32_t i = 0; i < KV_MAX_WINDOW; i++)
		if (s->big_reqs[i] == req) {
			s->big_reqs[i] = 0;
			return s->big_req_of[i];
		}
	return 0;
}

/* A chosen value, in log order (the learner's deliver callback). */
static void on_deliver(void *arg, uint64_t instance, uint64_t req, const uint8_t *v, uint32_t len)
{
	struct server *s = arg;
	if ((uint32_t)(req >> 32) == s->client) {
		kv_batch_end(s, req);
		big_req_end(s, req);
	}
	if (len < KV_ENTRY_HDR || v[0] != KV_ENTRY_MAGIC0 || v[1] != KV_ENTRY_MAGIC1 ||
	    v[2] != KV_ENTRY_VERSION || v[3] != KV_ENTRY_F_CHUNK) {
		entry_apply(s, instance, req, v, len);
		return;
	}
	uint8_t *img = NULL;
	uint32_t img_len = 0;
	uint64_t id = 0;
	int rc = kv_chunk_deliver(s, instance, v, len, &img, &img_len, &id);
	if (rc == -ENOMEM) {
		s->oom = true;
		return;
	}
	if (rc < 0) {
		s->st.entries_bad++;
		return;
	}
	s->st.chunks_applied++;
	/* a chunk moves log time like any entry (every replica alike) */
	s->st.expired_keys += kv_store_advance(s->store, (int64_t)get64(v + 6));
	if (rc == 1) {
		s->st.bigs_applied++;
		entry_apply(s, instance, id, img, img_len);
		free(img);
	}
}

static void on_done(void *arg, uint64_t req, int status, uint64_t instance)
{
	struct server *s = arg;
	if (status == 0)
		return; /* the reply is sent when it is applied */
	if ((uint32_t)(req >> 32) != s->client)
		return;
	kv_batch_end(s, req);
	kv_entry_failed(s, req, status == -ETIMEDOUT
					? "-ERR consensus timed out: the command may or may not have been applied\r\n"
					: "-ERR command refused by the coordinator\r\n");
}

static void accept_all(struct server *s)
{
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (s->n_conns >= KV_MAX_CONNS) {
			static const char msg[] = "-ERR max number of clients reached\r\n";
			if (send(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				/* nothing more to tell it */
			}
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn *c = calloc(1, sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		c->fd = fd;
		do
			c->client = innet_paxos_client_new(s->px);
		while (conn_by_client(s, c->client) != NULL);
		c->id = ++s->next_conn_id;
		c->resp = 2;
		c->created_ns = c->last_ns = innet_now_ns();
		snprintf(c->last_cmd, sizeof(c->last_cmd), "NULL");
		s->st.conns_total++;
		c->events = EPOLLIN;
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &e);
		s->conns[s->n_conns++] = c;
	}
}

static void conn_read(struct server *s, struct conn *c)
{
	char buf[65536];
	while (c->draining) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0 || (c->drained += (size_t)n) > s->query_max) {
			conn_close(s, c);
			return;
		}
	}
	for (;;) {
		size_t room = s->query_max > c->in.len ? s->query_max - c->in.len : 0;
		if (room == 0)
			break;
		ssize_t n = recv(c->fd, buf, room < sizeof(buf) ? room : sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			/* Answer what it sent first (and wait for an entry in flight:
			 * it may still be applied). */
			c->eof = true;
			break;
		}
		if (n < 0)
			break;
		kv_buf_append(&c->in, buf, (size_t)n);
		if ((size_t)n < sizeof(buf))
			break; /* drained: save the recv that would say EAGAIN */
	}
	conn_work(s, c);
	conn_flush(s, c);
}

static void stats_print(const struct server *s)
{
	const struct kv_stats *t = &s->st;
	fprintf(stderr, "innet kv: entries proposed %llu (groups %llu, commands %llu, bytes %llu, "
			"window full %llu), applied %llu (commands %llu, bad %llu); time us: wait %llu "
			"clients %llu propose %llu learn %llu (apply %llu reply %llu)\n",
		(unsigned long long)t->entries_proposed, (unsigned long long)t->groups_proposed,
		(unsigned long long)t->cmds_proposed, (unsigned long long)t->bytes_proposed,
		(unsigned long long)t->window_full, (unsigned long long)t->entries_applied,
		(unsigned long long)t->cmds_applied, (unsigned long long)t->entries_bad,
		(unsigned long long)t->ns_wait / 1000, (unsigned long long)t->ns_clients / 1000,
		(unsigned long long)t->ns_propose / 1000, (unsigned long long)t->ns_learn / 1000,
		(unsigned long long)t->ns_apply / 1000, (unsigned long long)t->ns_reply / 1000);
}

int kv_serve(const struct kv_conf *conf)
{
	if (conf->window > KV_MAX_WINDOW) {
		fprintf(stderr, "innet kv: window %u is over %u\n", conf->window, KV_MAX_WINDOW);
		return -EINVAL;
	}
	struct server *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	int rc = -ENOMEM;
	s->c = conf;
	s->start_ns = innet_now_ns();
	s->start_ms = kv_wall_ms();
	{
		uint64_t r = s->start_ns ^ ((uint64_t)getpid() << 32);
		for (int i = 0; i < 40; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			s->replid[i] = "0123456789abcdef"[(r >> 59) & 15];
		}
	}
	s->entry_max = conf->entry_max && conf->entry_max < PAXOS_VALUE_MAX ? conf->entry_max : PAXOS_VALUE_MAX;
	s->window = conf->window ? conf->window : kv_window_default(conf->entry_max);
	s->max_bulk = conf->max_bulk ? conf->max_bulk : KV_BULK_MAX_DEFAULT;
	s->query_max = s->max_bulk + KV_INBUF_MAX;
	s->scratch_cap = s->query_max + 1;
	s->scratch = malloc(s->scratch_cap); /* touched only as far as commands go */
	s->store = kv_store_create();
	if (s->scratch == NULL || s->store == NULL)
		goto err_free;
	kv_server_store_init(s, s->store);
	struct innet_paxos_conf pc = conf->paxos;
	pc.deliver = on_deliver;
	pc.done = on_done;
	pc.read_done = on_read_done;
	pc.arg = s;
	s->reads_log = conf->reads_log;
	char err[256];
	s->px = innet_paxos_create(&pc, err, sizeof(err));
	if (s->px == NULL) {
		rc = -errno;
		fprintf(stderr, "innet kv: %s\n", err);
		goto err_free;
	}
	innet_paxos_trust_filter(s->px, conf->trust_filter);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(conf->listen_ip),
				 .sin_port = htons(conf->listen_port) };
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s->lfd, 512) < 0) {
		rc = -errno;
		fprintf(stderr, "innet kv: listen %s:%u: %s\n", inet_ntoa(a.sin_addr),
			conf->listen_port, strerror(errno));
		goto err_px;
	}
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(s->ep, EPOLL_CTL_ADD, s->lfd, &e);
	static int px_tag;
	e.data.ptr = &px_tag;
	epoll_ctl(s->ep, EPOLL_CTL_ADD, innet_paxos_fd(s->px), &e);
	s->client = innet_paxos_client_new(s->px);
	static int metrics_tag;
	if (conf->name != NULL)
		snprintf(s->replica, sizeof(s->replica), "%s", conf->name);
	else
		snprintf(s->replica, sizeof(s->replica), "learner%u", conf->paxos.learner_id);
	if (conf->metrics) {
		s->metrics = innet_metrics_http_create(conf->metrics_ip, conf->metrics_port, kv_metrics,
						       s, err, sizeof(err));
		if (s->metrics == NULL) {
			rc = -errno;
			fprintf(stderr, "innet kv: %s\n", err);
			goto err_listen;
		}
		e.data.ptr = &metrics_tag;
		epoll_ctl(s->ep, EPOLL_CTL_ADD, innet_metrics_http_fd(s->metrics), &e);
		struct in_addr ma = { htonl(conf->metrics_ip) };
		fprintf(stderr, "innet kv: metrics on http://%s:%u/metrics\n", inet_ntoa(ma),
			innet_metrics_http_port(s->metrics));
	}
	fprintf(stderr, "innet kv: serving RESP on %s:%u (window %u, entries up to %u bytes, "
			"arguments up to %llu bytes: proto-max-bulk-len)\n", inet_ntoa(a.sin_addr),
		conf->listen_port, s->window, s->entry_max, (unsigned long long)s->max_bulk);
	uint32_t trim_ms = conf->trim_ms ? conf->trim_ms : 50;
	uint64_t last_trim = innet_now_ns();
	while (!*conf->stop) {
		struct epoll_event evs[64];
		int to = innet_paxos_timeout_ms(s->px);
		if (to < 0 || to > 100)
			to = 100;
		uint64_t t0 = innet_now_ns();
		int n = epoll_wait(s->ep, evs, 64, to);
		uint64_t t1 = innet_now_ns();
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == NULL) {
				accept_all(s);
			} else if (tag == &px_tag) {
				continue;
			} else if (tag == &metrics_tag) {
				innet_metrics_http_run(s->metrics);
			} else {
				struct conn *c = tag;
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					conn_read(s, c);
				else if (evs[i].events & EPOLLOUT)
					conn_flush(s, c);
			}
		}
		uint64_t t2 = innet_now_ns();
		reads_begin(s);
		server_propose(s);
		uint64_t t3 = innet_now_ns();
		if (innet_paxos_process(s->px) == -ESTALE) {
			if (!s->stale)
				fprintf(stderr, "innet kv: the acceptors trimmed the log past this "
						"replica (at %llu, trim %llu): asking peers for a snapshot\n",
					(unsigned long long)innet_paxos_delivered(s->px),
					(unsigned long long)innet_paxos_stale_trim(s->px));
			s->stale = true;
			kv_snapshot_catch_up(s);
		}
		reads_answer(s);
		reads_begin(s);
		uint64_t t4 = innet_now_ns();
		if (t4 - last_trim >= trim_ms * 1000000ull) {
			innet_paxos_trim(s->px);
			/* connections draining after a protocol error: 2 s at most */
			for (uint32_t i = 0; i < s->n_conns;) {
				struct conn *c = s->conns[i];
				if (c->draining && t4 - c->drain_ns > 2000000000ull)
					conn_close(s, c); /* conns[i] is another one now */
				else
					i++;
			}
			/* and for the replicas removed from the trim group: their
			 * watermark is ours, so the acceptors' trim no longer waits
			 * for them (docs/consensus.md, "Removing a replica") */
			uint64_t proxied = trim_proxied(s, t4);
			for (uint16_t id = 0; proxied != 0; id++, proxied >>= 1)
				if (proxied & 1)
					innet_paxos_trim_as(s->px, id);
			last_trim = t4;
		}
		server_propose(s);
		kv_followers_send(s);
		uint64_t t5 = innet_now_ns();
		s->st.loops++;
		s->st.ns_wait += t1 - t0;
		s->st.ns_clients += t2 - t1;
		s->st.ns_propose += (t3 - t2) + (t5 - t4);
		s->st.ns_learn += t4 - t3;
		if (INNET_UNLIKELY(kv_store_oom(s->store) || s->oom)) {
			fprintf(stderr, "innet kv: out of memory applying the log at instance %llu: this "
					"replica stops (its copy would differ from the others')\n",
				(unsigned long long)innet_paxos_delivered(s->px));
			rc = -ENOMEM;
			goto out_stop;
		}
	}
	rc = 0;
out_stop:
	stats_print(s);
	while (s->n_conns > 0)
		conn_close(s, s->conns[0]);
	innet_metrics_http_destroy(s->metrics);
	close(s->ep);
	close(s->lfd);
	goto out_px;
err_listen:
	close(s->ep);
err_px:
	close(s->lfd);
out_px:
	innet_paxos_destroy(s->px);
err_free:
	kv_store_destroy(s->store);
	kv_chunk_reset(s);
	kv_buf_free(&s->scratch_out);
	kv_buf_free(&s->feed);
	free(s->scratch);
	free(s);
	return rc;
}
