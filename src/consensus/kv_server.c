/*
 * kv_server.c — the replicated key-value store of `innet kv`: a RESP server
 * (redis-cli and redis-benchmark work unmodified) on top of the Paxos log.
 *
 * Every command that reads or writes keys goes through the log (the command
 * table, kv_store.c, says which); each replica applies the log in instance
 * order, so all replicas pass through the same states, and a reply is
 * computed when the replica that received the command applies it. Reads are
 * therefore linearizable: a GET is ordered in the log after every write
 * acknowledged before it was sent.
 *
 * Per connection, at most one group of commands is in flight: every command
 * the connection has pipelined so far (up to one value), so a pipelined
 * client gets its replies in order. Batching across connections: a replica
 * keeps at most `window` (--window, default 8) log entries of its own in
 * flight; groups that queue up while the window is full all go into the next
 * entry, up to PAXOS_VALUE_MAX (INNET_PKT_MAX - 56) bytes. The busier the
 * replica, the fuller the entries (~170 commands at redis-benchmark -P 16,
 * 50 clients); an idle one sends a lone command at once. Commands that need
 * no log (PING, ECHO, QUIT, SELECT, CLIENT, HELLO, INFO, CONFIG, COMMAND,
 * DEBUG, WATCH, MULTI and the queueing after it: kv_admin.c; SNAPSHOT; errors
 * found locally) are answered at once when nothing of the connection is in
 * flight, else after. MULTI ... EXEC is one group: the block (with the
 * versions of the WATCHed keys) goes into one entry and every replica applies
 * it whole (kv_store.c).
 *
 *   log entry value, KV batch version 2 (docs/protocol.md 2.2):
 *
 *   +-----+-----+---------+-------+-------------+----------------------+
 *   | 'K' | 'V' | version | flags | u16 n_groups| u64 stamp (unix ms)  |  flags 0
 *   +-----+-----+---------+-------+-------------+----------------------+
 *   n_groups x  +---------------------------+----------------+-------+-------+
 *               | u32 client (connection id)| u16 n_commands | u8 db | flags |
 *               +---------------------------+----------------+-------+-------+
 *               n_commands x: u16 argc, argc x (u16 length, bytes)
 *
 *   big-endian. The stamp is the proposer's clock: every replica advances
 *   the store's log time to it before applying the entry (never backwards)
 *   and expires the keys due by then, so expiry is the same everywhere. An
 *   entry with no group is a tick: a replica proposes one when a key is due
 *   and no entry came to advance log time past it (active expiry through the
 *   log). An entry that is not a well-formed version-2 batch is skipped
 *   whole by every replica (counted: entries_bad), so replicas stay equal;
 *   all replicas of a log run the same version.
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
	if (!c->closing && !c->eof && c->in.len < KV_INBUF_MAX)
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

/* Clear the connection's MULTI state and WATCHed keys. */
static void multi_reset(struct conn *c)
{
	c->multi = c->multi_err = c->multi_denyoom = c->multi_write = false;
	c->multi_n = 0;
	c->mq.len = 0;
	c->watch.len = 0;
	c->n_watch = 0;
}

/* WATCH key...: each key's database, the store's version now and whether it
 * is already stale (expired by this replica's clock: its expiry will not
 * fail EXEC) go into the connection's watch list; EXEC's block carries them.
 * Nothing of the connection is in flight, so the version is at least that
 * of everything it did before. */
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

/* Append one encoded command (u16 argc, per argument u16 length, bytes). */
static void encode_cmd(uint8_t *q, int argc, char *const *argv, const size_t *lens)
{
	put16(q, (size_t)argc);
	q += 2;
	for (int i = 0; i < argc; i++) {
		put16(q, lens[i]);
		memcpy(q + 2, argv[i], lens[i]);
		q += 2 + lens[i];
	}
}

/* Encode MULTI's block at q (the watch records, the queued commands,
 * EXEC); its length. */
static size_t encode_block(struct conn *c, uint8_t *q)
{
	size_t pos = 0;
	put16(q, 1 + 4 * (size_t)c->n_watch);
	pos += 2;
	put16(q + pos, 5);
	memcpy(q + pos + 2, "MULTI", 5);
	pos += 7;
	for (size_t w = 0; w < c->watch.len;) {
		const uint8_t *r = (const uint8_t *)c->watch.p + w;
		uint64_t ver = (uint64_t)kv_get32(r + 1) << 32 | kv_get32(r + 5);
		size_t kl = kv_get32(r + 10);
		char num[24];
		int n = snprintf(num, sizeof(num), "%u", r[0]);
		put16(q + pos, (size_t)n);
		memcpy(q + pos + 2, num, (size_t)n);
		pos += 2 + (size_t)n;
		n = snprintf(num, sizeof(num), "%llu", (unsigned long long)ver);
		put16(q + pos, (size_t)n);
		memcpy(q + pos + 2, num, (size_t)n);
		pos += 2 + (size_t)n;
		put16(q + pos, 1);
		q[pos + 2] = (char)('0' + (r[9] & 3));
		pos += 3;
		put16(q + pos, kl);
		memcpy(q + pos + 2, r + 14, kl);
		pos += 2 + kl;
		w += 14 + kl;
	}
	memcpy(q + pos, c->mq.p, c->mq.len);
	pos += c->mq.len;
	put16(q + pos, 1);
	put16(q + pos + 2, 4);
	memcpy(q + pos + 4, "EXEC", 4);
	return pos + 8;
}

static size_t block_len(const struct conn *c)
{
	/* MULTI + per watch record its four arguments, the block, EXEC */
	size_t n = 2 + 7 + c->mq.len + 8;
	for (size_t w = 0; w < c->watch.len;) {
		size_t kl = kv_get32((const uint8_t *)c->watch.p + w + 10);
		n += (2 + 3) + (2 + 20) + 3 + 2 + kl; /* db, version (at most 20 digits), flags, key */
		w += 14 + kl;
	}
	return n;
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

/* A command while MULTI is open: queued (+QUEUED), or refused. */
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
		/* refused here: EXEC goes to the log otherwise */
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
		/* MULTI, the block, EXEC: all in one group, one entry */
		size_t el = encoded_len(argc, lens);
		if (block_len(c) + el > KV_GROUP_MAX) {
			char msg[160];
			snprintf(msg, sizeof(msg), "-ERR innet kv: a transaction must fit one log entry "
						   "(at most %u bytes encoded)\r\n", (unsigned)KV_GROUP_MAX);
			kv_buf_str(&c->out, msg);
			c->multi_err = true;
			return;
		}
		uint8_t *q = malloc(el);
		if (q == NULL) {
			c->out.oom = true;
			return;
		}
		encode_cmd(q, argc, argv, lens);
		kv_buf_append(&c->mq, q, el);
		free(q);
		c->multi_n++;
		if (cmd->flags & KV_CMD_DENYOOM)
			c->multi_denyoom = true;
		if (cmd->flags & KV_CMD_WRITE)
			c->multi_write = true;
		kv_buf_str(&c->out, "+QUEUED\r\n");
	}
}

/* A command answered without the log (or an error found locally). */
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
	if (kv_pubsub_mode(c) && !kv_pubsub_allowed(cmd->name)) {
		char msg[200];
		snprintf(msg, sizeof(msg), "-ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
					   "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
					   "context\r\n", cmd->name);
		kv_buf_str(&c->out, msg);
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
	if ((cmd->flags & KV_CMD_DENYOOM) && over_memory(s)) {
		kv_buf_str(&c->out, "-" OOM_ERROR "\r\n");
		return;
	}
	if ((cmd->flags & KV_CMD_WRITE) && too_few_followers(s)) {
		kv_buf_str(&c->out, "-" NOREPLICAS_ERROR "\r\n");
		return;
	}
	if (!(cmd->flags & KV_CMD_LOCAL)) {
		char msg[128];
		snprintf(msg, sizeof(msg), "-ERR command too large for one consensus packet "
					   "(at most %u bytes encoded)\r\n", (unsigned)KV_GROUP_MAX);
		kv_buf_str(&c->out, msg);
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
		struct kv_ctx ctx = { .db = c->db, .resp = c->resp };
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

/* Where a command goes: into the group (the log), or answered here. */
static bool goes_to_log(struct server *s, const struct conn *c, const struct kv_command *cmd,
			int argc, const size_t *lens)
{
	if (cmd == NULL || !kv_command_arity_ok(cmd, argc))
		return false;
	if (kv_pubsub_mode(c) && !kv_pubsub_allowed(cmd->name))
		return false;
	if (c->multi)
		return !strcmp(cmd->name, "exec") && !c->multi_err &&
		       !(c->multi_denyoom && over_memory(s)) &&
		       !(c->multi_write && too_few_followers(s));
	if ((cmd->flags & KV_CMD_DENYOOM) && over_memory(s))
		return false;
	if ((cmd->flags & KV_CMD_WRITE) && too_few_followers(s))
		return false;
	return !(cmd->flags & KV_CMD_LOCAL) && encoded_len(argc, lens) <= KV_GROUP_MAX;
}

/* Parse what the connection sent; answer local commands and queue the
 * logged ones as the connection's group (server_propose puts it into an
 * entry). Stops while a group is queued or in flight. */
static void conn_work(struct server *s, struct conn *c)
{
	if (c->inflight || c->closing)
		return;
	if (c->follower) {
		c->in.len = 0; /* REPLCONF ACK: nothing to answer */
		return;
	}
	size_t blen = 0, consumed = 0;
	uint32_t n_cmds = 0, n_replies = 0;
	while (!c->closing && consumed < c->in.len) {
		int argc = 0;
		char err[128];
		ssize_t r = kv_resp_parse(c->in.p + consumed, c->in.len - consumed, &argc, s->argv,
					  s->lens, KV_MAX_ARGS, s->scratch, KV_INBUF_MAX + 1, err,
					  sizeof(err));
		if (r == 0) {
			if (c->in.len >= KV_INBUF_MAX) {
				kv_buf_str(&c->out, "-ERR Protocol error: request too large\r\n");
				c->closing = true;
			}
			break;
		}
		if (r < 0) {
			if (n_cmds > 0)
				break; /* answer the group first */
			kv_buf_str(&c->out, err);
			c->closing = true;
			break;
		}
		if (argc == 0) {
			consumed += (size_t)r;
			continue;
		}
		/* Only a logged command that passes the local checks (arity,
		 * size) joins a group that has started; anything else (a local
		 * command, or an error to answer locally) ends the group and is
		 * handled after its replies, which keeps the replies in order. */
		const struct kv_command *cmd = kv_command_find(s->argv[0], s->lens[0]);
		if (!goes_to_log(s, c, cmd, argc, s->lens)) {
			if (n_cmds > 0)
				break; /* keep order: after the group */
			local_command(s, c, cmd, argc, s->argv, s->lens);
			c->last_ns = innet_now_ns();
			snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", cmd ? cmd->name : "NULL");
			consumed += (size_t)r;
			continue;
		}
		if (c->multi) {
			/* EXEC: the block is one unit of the group */
			size_t el = block_len(c);
			if (el > KV_GROUP_MAX - blen) {
				if (n_cmds > 0)
					break;
				kv_buf_str(&c->out, "-ERR innet kv: a transaction must fit one log entry\r\n");
				multi_reset(c);
				consumed += (size_t)r;
				continue;
			}
			blen += encode_block(c, c->q + blen);
			n_cmds += 2 + c->multi_n;
			n_replies++;
			multi_reset(c);
		} else {
			size_t el = encoded_len(argc, s->lens);
			if (blen + el > KV_GROUP_MAX)
				break; /* the next group */
			if (argc == 3 && !strcasecmp(s->argv[0], "replica") &&
			    !strcasecmp(s->argv[1], "remove"))
				replica_remove_received(s, s->argv[2], s->lens[2]);
			encode_cmd(c->q + blen, argc, s->argv, s->lens);
			blen += el;
			n_cmds++;
			n_replies++;
		}
		c->last_ns = innet_now_ns();
		snprintf(c->last_cmd, sizeof(c->last_cmd), "%s", cmd->name);
		consumed += (size_t)r;
	}
	kv_buf_consume(&c->in, consumed);
	if (n_cmds > 0) {
		c->qlen = (uint32_t)blen;
		c->inflight = KV_QUEUED;
		c->q_cmds = n_cmds;
		c->inflight_cmds = n_replies;
		s->queue[s->n_queue++] = c;
	}
	conn_update(s, c);
}

static void conn_flush(struct server *s, struct conn *c);
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

/* Fail every group of entry req (our proposal was refused or timed out). */
void kv_entry_failed(struct server *s, uint64_t req, const char *msg)
{
	struct conn *failed[KV_MAX_CONNS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->inflight == req)
			failed[n++] = s->conns[i];
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < failed[i]->inflight_cmds; k++)
			kv_buf_str(&failed[i]->out, msg);
		failed[i]->inflight = 0;
		conn_flush(s, failed[i]);
	}
}

/* Put the queued groups into entries, in order, as many as one value holds,
 * and propose them while fewer than `window` of ours are in flight. Groups
 * that arrive while the window is full wait here and go out together in the
 * next entry: the fuller the window, the larger the batch. */
static void entry_header(struct server *s, uint32_t n_groups)
{
	uint64_t stamp = (uint64_t)kv_wall_ms();
	s->entry[0] = KV_ENTRY_MAGIC0;
	s->entry[1] = KV_ENTRY_MAGIC1;
	s->entry[2] = KV_ENTRY_VERSION;
	s->entry[3] = 0; /* flags */
	put16(s->entry + 4, n_groups);
	kv_put32(s->entry + 6, (uint32_t)(stamp >> 32));
	kv_put32(s->entry + 10, (uint32_t)stamp);
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

/* Active expiry through the log: when a key is due by this replica's clock
 * and no entry has moved log time past it, propose an empty entry (a tick)
 * whose stamp does. Replica k waits k x 20 ms more, so that normally one
 * replica ticks, and another does when it is down. One tick of ours in
 * flight at a time. */
static void server_tick(struct server *s)
{
	int64_t due = kv_store_next_expiry(s->store);
	if (due == 0 || !kv_store_active_expire(s->store) || s->tick_req != 0 || s->n_batches >= s->window || s->stale)
		return;
	int64_t now = kv_wall_ms();
	if (now < due + 20 * (int64_t)(s->c->paxos.learner_id % 16) || kv_store_now(s->store) >= due)
		return;
	uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
	entry_header(s, 0);
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

/* Put the queued groups into entries, in order, as many as one value holds,
 * and propose them while fewer than `window` of ours are in flight. Groups
 * that arrive while the window is full wait here and go out together in the
 * next entry: the fuller the window, the larger the batch. Each entry
 * carries this replica's clock (the log time of its commands). */
static void server_propose(struct server *s)
{
	while (s->n_queue > 0) {
		if (s->n_batches >= s->window) {
			s->st.window_full++;
			return;
		}
		uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
		size_t pos = KV_ENTRY_HDR;
		uint32_t ng = 0, ncmds = 0;
		/* the first group always goes (a group fits PAXOS_VALUE_MAX) */
		while (ng < s->n_queue &&
		       pos + KV_GROUP_HDR + s->queue[ng]->qlen <= (ng == 0 ? PAXOS_VALUE_MAX : s->entry_max)) {
			struct conn *c = s->queue[ng++];
			kv_put32(s->entry + pos, c->client);
			put16(s->entry + pos + 4, c->q_cmds);
			s->entry[pos + 6] = c->db;
			s->entry[pos + 7] = 0; /* flags */
			memcpy(s->entry + pos + KV_GROUP_HDR, c->q, c->qlen);
			pos += KV_GROUP_HDR + c->qlen;
			ncmds += c->q_cmds;
		}
		entry_header(s, ng);
		int rc = innet_paxos_propose(s->px, req, s->entry, (uint32_t)pos);
		if (rc == -EAGAIN)
			return; /* an older entry holds the dedup window: later */
		s->seq++;
		for (uint32_t i = 0; i < ng; i++)
			s->queue[i]->inflight = req;
		memmove(s->queue, s->queue + ng, (s->n_queue - ng) * sizeof(s->queue[0]));
		s->n_queue -= ng;
		if (rc != 0) {
			kv_entry_failed(s, req, "-ERR cannot propose to the coordinator\r\n");
			continue;
		}
		s->st.entries_proposed++;
		s->st.groups_proposed += ng;
		s->st.cmds_proposed += ncmds;
		s->st.bytes_proposed += pos;
		batch_add(s, req);
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
		if (s->queue[i] == c) {
			memmove(s->queue + i, s->queue + i + 1, (s->n_queue - i - 1) * sizeof(s->queue[0]));
			s->n_queue--;
			break;
		}
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
	if (INNET_UNLIKELY(c->in.oom || c->out.oom || c->mq.oom || c->watch.oom || c->name.oom)) {
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
	if (c->out.len == 0 && (c->closing || c->eof) && c->inflight == 0) {
		conn_close(s, c);
		return;
	}
	conn_update(s, c);
}

/* Walk n commands encoded at v[*pos..len): true if well-formed. */
static bool check_cmds(const uint8_t *v, uint32_t len, size_t *pos, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++) {
		if (*pos + 2 > len)
			return false;
		uint32_t argc = get16(v + *pos);
		*pos += 2;
		if (argc == 0 || argc > KV_MAX_ARGS)
			return false;
		for (uint32_t i = 0; i < argc; i++) {
			if (*pos + 2 > len || *pos + 2 + get16(v + *pos) > len)
				return false;
			*pos += 2 + get16(v + *pos);
		}
	}
	return true;
}

/* True if v is a complete, well-formed entry of the KV batch format. */
bool kv_entry_valid(const uint8_t *v, uint32_t len)
{
	if (len < KV_ENTRY_HDR || v[0] != KV_ENTRY_MAGIC0 || v[1] != KV_ENTRY_MAGIC1 ||
	    v[2] != KV_ENTRY_VERSION || v[3] != 0)
		return false;
	uint32_t ng = get16(v + 4);
	size_t pos = KV_ENTRY_HDR;
	for (uint32_t g = 0; g < ng; g++) {
		if (pos + KV_GROUP_HDR > len || v[pos + 6] >= KV_DBS || v[pos + 7] != 0)
			return false;
		uint32_t cmds = get16(v + pos + 4);
		pos += KV_GROUP_HDR;
		if (!check_cmds(v, len, &pos, cmds))
			return false;
	}
	return pos == len;
}

/* Apply n (checked) commands encoded at v[*pos..), replies to out. */
static void apply_cmds(struct server *s, const uint8_t *v, size_t *pos, uint32_t n,
		       struct kv_ctx *ctx, struct kv_buf *out)
{
	for (uint32_t k = 0; k < n; k++) {
		int argc = (int)get16(v + *pos);
		*pos += 2;
		size_t used = 0;
		for (int i = 0; i < argc; i++) {
			size_t l = get16(v + *pos);
			s->argv[i] = s->scratch + used;
			s->lens[i] = l;
			memcpy(s->scratch + used, v + *pos + 2, l);
			s->scratch[used + l] = '\0';
			used += l + 1;
			*pos += 2 + l;
		}
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

/* A log entry: apply every command; reply to our connections' groups. An
 * entry not in the KV batch format (malformed, or another version) is
 * skipped as a whole — by every replica alike, so their states stay equal —
 * counted and logged once. */
static void on_deliver(void *arg, uint64_t instance, uint64_t req, const uint8_t *v, uint32_t len)
{
	struct server *s = arg;
	bool ours = (uint32_t)(req >> 32) == s->client;
	if (ours)
		kv_batch_end(s, req);
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
			kv_entry_failed(s, req, "-ERR internal error: malformed log entry\r\n");
		return;
	}
	uint64_t t0 = innet_now_ns();
	s->st.entries_applied++;
	uint64_t stamp = (uint64_t)kv_get32(v + 6) << 32 | kv_get32(v + 10);
	s->st.expired_keys += kv_store_advance(s->store, (int64_t)stamp);
	uint32_t ng = get16(v + 4);
	size_t pos = KV_ENTRY_HDR;
	struct conn *answered[KV_MAX_CONNS];
	uint32_t n_ans = 0;
	for (uint32_t g = 0; g < ng; g++) {
		uint32_t client = kv_get32(v + pos);
		uint32_t cmds = get16(v + pos + 4);
		struct kv_ctx ctx = { .db = v[pos + 6], .resp = 2 };
		pos += KV_GROUP_HDR;
		struct conn *c = ours ? conn_by_client(s, client) : NULL;
		if (c != NULL && c->inflight != req)
			c = NULL;
		struct block_hook hook = { s, c };
		if (c != NULL) {
			ctx.resp = c->resp;
			ctx.local = block_local;
			ctx.local_arg = &hook;
		}
		apply_cmds(s, v, &pos, cmds, &ctx, c ? &c->out : &s->scratch_out);
		kv_ctx_end(&ctx);
		if (c != NULL)
			c->db = (uint8_t)ctx.db;
		s->scratch_out.len = 0;
		s->scratch_out.oom = false;
		if (c != NULL && n_ans < KV_MAX_CONNS)
			answered[n_ans++] = c;
	}
	uint64_t t1 = innet_now_ns();
	for (uint32_t i = 0; i < n_ans; i++) {
		struct conn *c = answered[i];
		c->inflight = 0;
		conn_work(s, c); /* the next pipelined commands */
		conn_flush(s, c);
	}
	kv_followers_send(s);
	s->st.ns_apply += t1 - t0;
	s->st.ns_reply += innet_now_ns() - t1;
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
	for (;;) {
		size_t room = KV_INBUF_MAX - c->in.len;
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
	s->scratch = malloc(KV_INBUF_MAX + 1);
	s->store = kv_store_create();
	if (s->scratch == NULL || s->store == NULL)
		goto err_free;
	kv_server_store_init(s, s->store);
	struct innet_paxos_conf pc = conf->paxos;
	pc.deliver = on_deliver;
	pc.done = on_done;
	pc.arg = s;
	char err[256];
	s->px = innet_paxos_create(&pc, err, sizeof(err));
	if (s->px == NULL) {
		rc = -errno;
		fprintf(stderr, "innet kv: %s\n", err);
		goto err_free;
	}
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
			"values up to %u)\n", inet_ntoa(a.sin_addr), conf->listen_port, s->window,
		s->entry_max, (unsigned)PAXOS_VALUE_MAX);
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
		uint64_t t4 = innet_now_ns();
		if (t4 - last_trim >= trim_ms * 1000000ull) {
			innet_paxos_trim(s->px);
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
		if (INNET_UNLIKELY(kv_store_oom(s->store))) {
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
	kv_buf_free(&s->scratch_out);
	kv_buf_free(&s->feed);
	free(s->scratch);
	free(s);
	return rc;
}
