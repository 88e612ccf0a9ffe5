/*
 * kv.c — the replicated key-value store of `innet kv`: a RESP server
 * (redis-cli and redis-benchmark work unmodified) on top of the Paxos log.
 *
 * Every command that reads or writes keys goes through the log; each replica
 * applies the log in instance order, so all replicas pass through the same
 * states, and a reply is computed when the replica that received the
 * command applies it. Reads are therefore linearizable: a GET is ordered in
 * the log after every write acknowledged before it was sent.
 *
 * Per connection, at most one group of commands is in flight: every command
 * the connection has pipelined so far (up to one packet), so a pipelined
 * client gets its replies in order. The groups of all connections that are
 * ready in one event-loop pass go into one log entry (cross-connection
 * batching: with 50 clients and no pipelining, one consensus instance serves
 * up to ~35 commands instead of one), at most KV_MAX_BATCHES entries of a
 * replica in flight. Commands that need no log (PING, ECHO, QUIT, CONFIG,
 * COMMAND, errors found locally) are answered at once when nothing of the
 * connection is in flight, else after.
 *
 *   log entry value: u16 0xFFFF, u16 n_groups, then per group: u32 client
 *   (the connection's id), u16 n_commands, then per command: u16 argc, then
 *   per argument: u16 length, bytes (big-endian). (An entry starting with
 *   any other u16 n is the older single-group form: n commands.)
 *
 * Request ids: each replica has a random client id and counts seq from 1 per
 * entry, so a resend chosen twice is applied once (the learner
 * deduplicates). The replica that proposed an entry answers each group's
 * connection when it applies the entry.
 *
 * Not done: snapshots / state transfer (a replica that restarts replays the
 * log from the acceptors, which works while the log is not trimmed past it).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "consensus/kv.h"
#include "consensus/wire.h"

#define KV_MAX_ARGS    1024
#define KV_INBUF_MAX   (1u << 20)
#define KV_MAX_CONNS   4096
#define KV_MAX_BATCHES 16        /* entries of one replica in flight (< the dedup window 64) */
#define KV_QUEUED      UINT64_MAX /* conn.inflight: its group waits for the next entry */
#define KV_ENTRY_HDR   4u         /* u16 0xFFFF, u16 n_groups */
#define KV_GROUP_HDR   6u         /* u32 client, u16 n_commands */
#define KV_GROUP_MAX   (PAXOS_VALUE_MAX - KV_ENTRY_HDR - KV_GROUP_HDR) /* commands of one group */

/* ---- buffers ------------------------------------------------------------ */

void kv_buf_append(struct kv_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (np == NULL)
			abort(); /* out of memory in a server: nothing sane to do */
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_str(struct kv_buf *b, const char *s)
{
	kv_buf_append(b, s, strlen(s));
}

/* A RESP header: prefix char, number, CRLF (":42\r\n", "$5\r\n", "*3\r\n"). */
static void buf_num(struct kv_buf *b, char prefix, long long v)
{
	char tmp[48];
	int n = snprintf(tmp, sizeof(tmp), "%c%lld\r\n", prefix, v);
	kv_buf_append(b, tmp, (size_t)n);
}

static void buf_bulk(struct kv_buf *b, const char *p, size_t n)
{
	buf_num(b, '$', (long long)n);
	kv_buf_append(b, p, n);
	kv_buf_append(b, "\r\n", 2);
}

void kv_buf_free(struct kv_buf *b)
{
	free(b->p);
	*b = (struct kv_buf){ 0 };
}

static void buf_consume(struct kv_buf *b, size_t n)
{
	if (n == 0)
		return; /* b->p may still be NULL */
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

/* ---- the store: a chained hash map of byte strings ---------------------- */

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
};

static uint64_t fnv(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
	return h;
}

struct kv_store *kv_store_create(void)
{
	struct kv_store *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->cap = 1024;
	s->tab = calloc(s->cap, sizeof(*s->tab));
	if (s->tab == NULL) {
		free(s);
		return NULL;
	}
	return s;
}

void kv_store_destroy(struct kv_store *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->cap; i++)
		for (struct kv_item *it = s->tab[i], *nx; it; it = nx) {
			nx = it->next;
			free(it->val);
			free(it);
		}
	free(s->tab);
	free(s);
}

static struct kv_item **find(struct kv_store *s, const char *k, size_t kl, uint64_t h)
{
	struct kv_item **pp = &s->tab[h & (s->cap - 1)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == h && (*pp)->klen == kl && memcmp((*pp)->key, k, kl) == 0)
			return pp;
	return pp;
}

static void grow(struct kv_store *s)
{
	size_t cap = s->cap * 2;
	struct kv_item **t = calloc(cap, sizeof(*t));
	if (t == NULL)
		return; /* stay at this size: longer chains, still correct */
	for (size_t i = 0; i < s->cap; i++)
		for (struct kv_item *it = s->tab[i], *nx; it; it = nx) {
			nx = it->next;
			it->next = t[it->hash & (cap - 1)];
			t[it->hash & (cap - 1)] = it;
		}
	free(s->tab);
	s->tab = t;
	s->cap = cap;
}

static struct kv_item *get(struct kv_store *s, const char *k, size_t kl)
{
	return *find(s, k, kl, fnv(k, kl));
}

static void set(struct kv_store *s, const char *k, size_t kl, const char *v, size_t vl)
{
	uint64_t h = fnv(k, kl);
	struct kv_item **pp = find(s, k, kl, h);
	char *nv = malloc(vl ? vl : 1);
	if (nv == NULL)
		abort();
	memcpy(nv, v, vl);
	if (*pp) {
		free((*pp)->val);
		(*pp)->val = nv;
		(*pp)->vlen = vl;
		return;
	}
	struct kv_item *it = malloc(sizeof(*it) + kl);
	if (it == NULL)
		abort();
	it->hash = h;
	it->klen = kl;
	memcpy(it->key, k, kl);
	it->val = nv;
	it->vlen = vl;
	it->next = NULL;
	*pp = it;
	if (++s->n > s->cap)
		grow(s);
}

static bool del(struct kv_store *s, const char *k, size_t kl)
{
	struct kv_item **pp = find(s, k, kl, fnv(k, kl));
	if (*pp == NULL)
		return false;
	struct kv_item *it = *pp;
	*pp = it->next;
	free(it->val);
	free(it);
	s->n--;
	return true;
}

uint64_t kv_store_digest(const struct kv_store *s)
{
	uint64_t d = s->n;
	for (size_t i = 0; i < s->cap; i++)
		for (const struct kv_item *it = s->tab[i]; it; it = it->next)
			d += it->hash * 31 + fnv(it->val, it->vlen); /* order-independent */
	return d;
}

static bool parse_ll(const char *p, size_t n, long long *out)
{
	if (n == 0 || n > 20)
		return false;
	char tmp[24];
	memcpy(tmp, p, n);
	tmp[n] = '\0';
	if (tmp[0] == '+' || isspace((unsigned char)tmp[0]) || (n > 1 && tmp[0] == '0') ||
	    (n > 2 && tmp[0] == '-' && tmp[1] == '0'))
		return false;
	char *end;
	errno = 0;
	long long v = strtoll(tmp, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* Commands that go through the log, with redis's arity (negative: at least). */
static const struct {
	const char *name;
	int arity;
} logged[] = {
	{ "get", 2 }, { "set", 3 }, { "del", -2 }, { "incr", 2 }, { "decr", 2 },
	{ "incrby", 3 }, { "exists", -2 }, { "mget", -2 }, { "mset", -3 }, { "dbsize", 1 },
};

static int logged_index(const char *name)
{
	for (size_t i = 0; i < sizeof(logged) / sizeof(logged[0]); i++)
		if (!strcasecmp(name, logged[i].name))
			return (int)i;
	return -1;
}

static void incr_by(struct kv_store *s, const char *k, size_t kl, long long by, struct kv_buf *out)
{
	struct kv_item *it = get(s, k, kl);
	long long v = 0;
	if (it && !parse_ll(it->val, it->vlen, &v)) {
		buf_str(out, "-ERR value is not an integer or out of range\r\n");
		return;
	}
	if ((by > 0 && v > LLONG_MAX - by) || (by < 0 && v < LLONG_MIN - by)) {
		buf_str(out, "-ERR increment or decrement would overflow\r\n");
		return;
	}
	v += by;
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v);
	set(s, k, kl, tmp, (size_t)n);
	buf_num(out, ':', v);
}

void kv_store_apply(struct kv_store *s, int argc, char *const *argv, const size_t *lens,
		    struct kv_buf *out)
{
	const char *cmd = argv[0];
	if (!strcasecmp(cmd, "get")) {
		struct kv_item *it = get(s, argv[1], lens[1]);
		if (it)
			buf_bulk(out, it->val, it->vlen);
		else
			buf_str(out, "$-1\r\n");
	} else if (!strcasecmp(cmd, "set")) {
		if (argc != 3) {
			buf_str(out, "-ERR syntax error (innet kv supports SET key value only)\r\n");
			return;
		}
		set(s, argv[1], lens[1], argv[2], lens[2]);
		buf_str(out, "+OK\r\n");
	} else if (!strcasecmp(cmd, "del") || !strcasecmp(cmd, "exists")) {
		bool is_del = (cmd[0] | 0x20) == 'd';
		long long n = 0;
		for (int i = 1; i < argc; i++)
			n += is_del ? del(s, argv[i], lens[i]) : get(s, argv[i], lens[i]) != NULL;
		buf_num(out, ':', n);
	} else if (!strcasecmp(cmd, "incr")) {
		incr_by(s, argv[1], lens[1], 1, out);
	} else if (!strcasecmp(cmd, "decr")) {
		incr_by(s, argv[1], lens[1], -1, out);
	} else if (!strcasecmp(cmd, "incrby")) {
		long long by;
		if (!parse_ll(argv[2], lens[2], &by))
			buf_str(out, "-ERR value is not an integer or out of range\r\n");
		else
			incr_by(s, argv[1], lens[1], by, out);
	} else if (!strcasecmp(cmd, "mget")) {
		buf_num(out, '*', argc - 1);
		for (int i = 1; i < argc; i++) {
			struct kv_item *it = get(s, argv[i], lens[i]);
			if (it)
				buf_bulk(out, it->val, it->vlen);
			else
				buf_str(out, "$-1\r\n");
		}
	} else if (!strcasecmp(cmd, "mset")) {
		if (argc % 2 != 1) {
			buf_str(out, "-ERR wrong number of arguments for 'mset' command\r\n");
			return;
		}
		for (int i = 1; i < argc; i += 2)
			set(s, argv[i], lens[i], argv[i + 1], lens[i + 1]);
		buf_str(out, "+OK\r\n");
	} else if (!strcasecmp(cmd, "dbsize")) {
		buf_num(out, ':', (long long)s->n);
	} else {
		buf_str(out, "-ERR unknown command\r\n");
	}
}

/* ---- RESP parsing ------------------------------------------------------- */

/* A line ending in \r\n starting at p; returns its length (without \r\n), or
 * -1 if incomplete. */
static ssize_t line_at(const char *p, size_t len)
{
	const char *nl = memchr(p, '\n', len);
	if (nl == NULL)
		return -1;
	return nl - p;
}

static bool parse_count(const char *p, size_t n, long long min, long long max, long long *out)
{
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return parse_ll(p, n, out) && *out >= min && *out <= max;
}

ssize_t kv_resp_parse(const char *buf, size_t len, int *argc, char **argv, size_t *lens,
		      int max_args, char *scratch, size_t scratch_len, char *err, size_t errlen)
{
	if (len == 0)
		return 0;
	size_t used = 0;
	if (buf[0] != '*') {
		/* inline command: words separated by spaces, up to \n */
		ssize_t ln = line_at(buf, len);
		if (ln < 0) {
			if (len > 65536) {
				snprintf(err, errlen, "-ERR Protocol error: too big inline request\r\n");
				return -1;
			}
			return 0;
		}
		size_t end = (size_t)ln;
		if (end > 0 && buf[end - 1] == '\r')
			end--;
		if (end + 1 > scratch_len) {
			snprintf(err, errlen, "-ERR Protocol error: too big inline request\r\n");
			return -1;
		}
		int n = 0;
		size_t i = 0;
		while (i < end) {
			while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
				i++;
			if (i >= end)
				break;
			if (n >= max_args) {
				snprintf(err, errlen, "-ERR Protocol error: too many arguments\r\n");
				return -1;
			}
			size_t st = i;
			while (i < end && buf[i] != ' ' && buf[i] != '\t')
				i++;
			argv[n] = scratch + used;
			lens[n] = i - st;
			memcpy(scratch + used, buf + st, i - st);
			scratch[used + i - st] = '\0';
			used += i - st + 1;
			n++;
		}
		*argc = n;
		return ln + 1;
	}
	ssize_t ln = line_at(buf, len);
	if (ln < 0)
		return len > 64 ? (snprintf(err, errlen, "-ERR Protocol error: invalid multibulk length\r\n"), -1) : 0;
	long long n;
	if (!parse_count(buf + 1, (size_t)ln - 1, -1, max_args, &n)) {
		snprintf(err, errlen, "-ERR Protocol error: invalid multibulk length\r\n");
		return -1;
	}
	size_t pos = (size_t)ln + 1;
	if (n <= 0) {
		*argc = 0;
		return (ssize_t)pos;
	}
	for (long long i = 0; i < n; i++) {
		if (pos >= len)
			return 0;
		if (buf[pos] != '$') {
			snprintf(err, errlen, "-ERR Protocol error: expected '$', got '%c'\r\n",
				 isprint((unsigned char)buf[pos]) ? buf[pos] : '?');
			return -1;
		}
		ln = line_at(buf + pos, len - pos);
		if (ln < 0)
			return len - pos > 64 ? (snprintf(err, errlen, "-ERR Protocol error: invalid bulk length\r\n"), -1) : 0;
		long long bl;
		if (!parse_count(buf + pos + 1, (size_t)ln - 1, 0, KV_INBUF_MAX, &bl)) {
			snprintf(err, errlen, "-ERR Protocol error: invalid bulk length\r\n");
			return -1;
		}
		pos += (size_t)ln + 1;
		if (len - pos < (size_t)bl + 2)
			return 0;
		if (buf[pos + bl] != '\r' || buf[pos + bl + 1] != '\n') {
			snprintf(err, errlen, "-ERR Protocol error: bulk string not terminated by CRLF\r\n");
			return -1;
		}
		if (used + (size_t)bl + 1 > scratch_len) {
			snprintf(err, errlen, "-ERR Protocol error: request too large\r\n");
			return -1;
		}
		argv[i] = scratch + used;
		lens[i] = (size_t)bl;
		memcpy(scratch + used, buf + pos, (size_t)bl);
		scratch[used + bl] = '\0';
		used += (size_t)bl + 1;
		pos += (size_t)bl + 2;
	}
	*argc = (int)n;
	return (ssize_t)pos;
}

/* ---- the server --------------------------------------------------------- */

struct conn {
	int fd;
	uint32_t client;
	uint32_t seq;
	uint64_t inflight;        /* entry in flight with its group (0 = none, KV_QUEUED) */
	uint32_t inflight_cmds;   /* commands in its group */
	uint32_t qlen;            /* encoded commands of the group */
	uint8_t q[KV_GROUP_MAX];
	bool closing;             /* protocol error or QUIT: close once out is flushed */
	bool eof;                 /* the client stopped sending: close once answered */
	uint32_t events;
	struct kv_buf in, out;
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
	struct conn *queue[KV_MAX_CONNS]; /* groups waiting for an entry, in order */
	uint32_t n_queue;
	uint64_t batches[KV_MAX_BATCHES]; /* entries in flight (0 = free) */
	uint32_t n_batches;
};

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

static struct conn *conn_by_client(struct server *s, uint32_t client)
{
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->client == client)
			return s->conns[i];
	return NULL;
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

/* Answer a command that needs no log. Returns false if it is not one. */
static bool local_command(struct conn *c, int argc, char **argv, size_t *lens)
{
	const char *cmd = argv[0];
	if (!strcasecmp(cmd, "ping")) {
		if (argc == 1)
			buf_str(&c->out, "+PONG\r\n");
		else if (argc == 2)
			buf_bulk(&c->out, argv[1], lens[1]);
		else
			buf_str(&c->out, "-ERR wrong number of arguments for 'ping' command\r\n");
	} else if (!strcasecmp(cmd, "echo")) {
		if (argc == 2)
			buf_bulk(&c->out, argv[1], lens[1]);
		else
			buf_str(&c->out, "-ERR wrong number of arguments for 'echo' command\r\n");
	} else if (!strcasecmp(cmd, "quit")) {
		buf_str(&c->out, "+OK\r\n");
		c->closing = true;
	} else if (!strcasecmp(cmd, "config") || !strcasecmp(cmd, "command")) {
		buf_str(&c->out, "*0\r\n"); /* nothing to configure; redis-benchmark asks */
	} else if (!strcasecmp(cmd, "select")) {
		if (argc == 2 && lens[1] == 1 && argv[1][0] == '0')
			buf_str(&c->out, "+OK\r\n");
		else
			buf_str(&c->out, "-ERR DB index is out of range\r\n");
	} else {
		int li = logged_index(cmd);
		if (li < 0) {
			char name[65], msg[160];
			size_t k;
			for (k = 0; k < 64 && k < lens[0]; k++) /* no CR/LF/NUL in a reply line */
				name[k] = isprint((unsigned char)cmd[k]) ? cmd[k] : ' ';
			name[k] = '\0';
			snprintf(msg, sizeof(msg), "-ERR unknown command '%s'\r\n", name);
			buf_str(&c->out, msg);
			return true;
		}
		int ar = logged[li].arity;
		if ((ar > 0 && argc != ar) || (ar < 0 && argc < -ar)) {
			char msg[96];
			snprintf(msg, sizeof(msg), "-ERR wrong number of arguments for '%s' command\r\n",
				 logged[li].name);
			buf_str(&c->out, msg);
			return true;
		}
		if (encoded_len(argc, lens) > KV_GROUP_MAX) {
			char msg[128];
			snprintf(msg, sizeof(msg), "-ERR command too large for one consensus packet "
						   "(at most %u bytes encoded)\r\n", KV_GROUP_MAX);
			buf_str(&c->out, msg);
			return true;
		}
		return false;
	}
	return true;
}

/* Parse what the connection sent; answer local commands, batch logged ones
 * and propose the batch. Stops while a batch is in flight. */
static void conn_work(struct server *s, struct conn *c)
{
	if (c->inflight || c->closing)
		return;
	size_t blen = 2, consumed = 0;
	uint32_t n_cmds = 0;
	while (!c->closing && consumed < c->in.len) {
		int argc = 0;
		char err[128];
		ssize_t r = kv_resp_parse(c->in.p + consumed, c->in.len - consumed, &argc, s->argv,
					  s->lens, KV_MAX_ARGS, s->scratch, KV_INBUF_MAX + 1, err,
					  sizeof(err));
		if (r == 0) {
			if (c->in.len >= KV_INBUF_MAX) {
				buf_str(&c->out, "-ERR Protocol error: request too large\r\n");
				c->closing = true;
			}
			break;
		}
		if (r < 0) {
			if (n_cmds > 0)
				break; /* answer the batch first */
			buf_str(&c->out, err);
			c->closing = true;
			break;
		}
		if (argc == 0) {
			consumed += (size_t)r;
			continue;
		}
		bool is_logged = logged_index(s->argv[0]) >= 0;
		size_t el = encoded_len(argc, s->lens);
		if (n_cmds > 0 && (!is_logged || blen - 2 + el > KV_GROUP_MAX))
			break; /* keep order: after the batch */
		if (n_cmds == 0 && local_command(c, argc, s->argv, s->lens)) {
			consumed += (size_t)r;
			continue;
		}
		if (n_cmds > 0 && local_command(c, argc, s->argv, s->lens)) {
			/* cannot happen: is_logged and fits were checked */
			consumed += (size_t)r;
			break;
		}
		put16(s->batch + blen, (size_t)argc);
		blen += 2;
		for (int i = 0; i < argc; i++) {
			put16(s->batch + blen, s->lens[i]);
			memcpy(s->batch + blen + 2, s->argv[i], s->lens[i]);
			blen += 2 + s->lens[i];
		}
		n_cmds++;
		consumed += (size_t)r;
	}
	buf_consume(&c->in, consumed);
	if (n_cmds > 0) {
		/* queued: server_propose puts it in the next entry */
		c->qlen = (uint32_t)(blen - 2);
		memcpy(c->q, s->batch + 2, c->qlen);
		c->inflight = KV_QUEUED;
		c->inflight_cmds = n_cmds;
		s->queue[s->n_queue++] = c;
	}
	conn_update(s, c);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v & 0xffff);
}

static void conn_flush(struct server *s, struct conn *c);

/* Fail every group of entry req (our proposal was refused or timed out). */
static void entry_failed(struct server *s, uint64_t req, const char *msg)
{
	struct conn *failed[KV_MAX_CONNS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->inflight == req)
			failed[n++] = s->conns[i];
	for (uint32_t i = 0; i < n; i++) {
		for (uint32_t k = 0; k < failed[i]->inflight_cmds; k++)
			buf_str(&failed[i]->out, msg);
		failed[i]->inflight = 0;
		conn_flush(s, failed[i]);
	}
}

/* Put the queued groups into entries and propose them (up to KV_MAX_BATCHES
 * in flight). */
static void server_propose(struct server *s)
{
	while (s->n_queue > 0 && s->n_batches < KV_MAX_BATCHES) {
		uint64_t req = innet_paxos_req_id(s->client, s->seq + 1);
		size_t pos = KV_ENTRY_HDR;
		uint32_t ng = 0;
		while (ng < s->n_queue && pos + KV_GROUP_HDR + s->queue[ng]->qlen <= PAXOS_VALUE_MAX) {
			struct conn *c = s->queue[ng++];
			put32(s->entry + pos, c->client);
			put16(s->entry + pos + 4, c->inflight_cmds);
			memcpy(s->entry + pos + KV_GROUP_HDR, c->q, c->qlen);
			pos += KV_GROUP_HDR + c->qlen;
		}
		put16(s->entry, 0xFFFF);
		put16(s->entry + 2, ng);
		int rc = innet_paxos_propose(s->px, req, s->entry, (uint32_t)pos);
		if (rc == -EAGAIN)
			return; /* an older entry holds the dedup window: later */
		s->seq++;
		for (uint32_t i = 0; i < ng; i++)
			s->queue[i]->inflight = req;
		memmove(s->queue, s->queue + ng, (s->n_queue - ng) * sizeof(s->queue[0]));
		s->n_queue -= ng;
		if (rc != 0) {
			entry_failed(s, req, "-ERR cannot propose to the coordinator\r\n");
			continue;
		}
		for (uint32_t i = 0; i < KV_MAX_BATCHES; i++)
			if (s->batches[i] == 0) {
				s->batches[i] = req;
				break;
			}
		s->n_batches++;
	}
}

/* Entry req of ours is no longer in flight. */
static void batch_end(struct server *s, uint64_t req)
{
	for (uint32_t i = 0; i < KV_MAX_BATCHES; i++)
		if (s->batches[i] == req) {
			s->batches[i] = 0;
			s->n_batches--;
		}
}

static void conn_close(struct server *s, struct conn *c)
{
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
	free(c);
}

static void conn_flush(struct server *s, struct conn *c)
{
	while (c->out.len > 0) {
		ssize_t n = send(c->fd, c->out.p, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0)
			break;
		buf_consume(&c->out, (size_t)n);
	}
	if (c->out.len == 0 && (c->closing || c->eof) && c->inflight == 0) {
		conn_close(s, c);
		return;
	}
	conn_update(s, c);
}

/* Apply n commands encoded at v[*pos..len), replies to out. False if malformed. */
static bool apply_cmds(struct server *s, const uint8_t *v, uint32_t len, size_t *pos, uint32_t n,
		       struct kv_buf *out)
{
	for (uint32_t k = 0; k < n; k++) {
		if (*pos + 2 > len)
			return false;
		int argc = v[*pos] << 8 | v[*pos + 1];
		*pos += 2;
		size_t used = 0;
		if (argc <= 0 || argc > KV_MAX_ARGS)
			return false;
		for (int i = 0; i < argc; i++) {
			if (*pos + 2 > len)
				return false;
			size_t l = (size_t)v[*pos] << 8 | v[*pos + 1];
			if (*pos + 2 + l > len)
				return false;
			s->argv[i] = s->scratch + used;
			s->lens[i] = l;
			memcpy(s->scratch + used, v + *pos + 2, l);
			s->scratch[used + l] = '\0';
			used += l + 1;
			*pos += 2 + l;
		}
		kv_store_apply(s->store, argc, s->argv, s->lens, out);
	}
	return true;
}

/* A log entry: apply every command; reply to our connections' groups. */
static void on_deliver(void *arg, uint64_t instance, uint64_t req, const uint8_t *v, uint32_t len)
{
	struct server *s = arg;
	if (len < 2)
		return;
	uint32_t n = (uint32_t)v[0] << 8 | v[1];
	size_t pos = 2;
	if (n != 0xFFFF) {
		/* single-group form: the request id names the connection */
		struct conn *c = conn_by_client(s, (uint32_t)(req >> 32));
		if (c != NULL && c->inflight != req)
			c = NULL;
		apply_cmds(s, v, len, &pos, n, c ? &c->out : &s->scratch_out);
		s->scratch_out.len = 0;
		if (c != NULL) {
			c->inflight = 0;
			conn_work(s, c);
			conn_flush(s, c);
		}
		return;
	}
	bool ours = (uint32_t)(req >> 32) == s->client;
	if (ours)
		batch_end(s, req);
	if (len < KV_ENTRY_HDR)
		return;
	uint32_t ng = (uint32_t)v[2] << 8 | v[3];
	pos = KV_ENTRY_HDR;
	struct conn *answered[KV_MAX_CONNS];
	uint32_t n_ans = 0;
	for (uint32_t g = 0; g < ng; g++) {
		if (pos + KV_GROUP_HDR > len)
			break;
		uint32_t client = (uint32_t)v[pos] << 24 | (uint32_t)v[pos + 1] << 16 |
				  (uint32_t)v[pos + 2] << 8 | v[pos + 3];
		uint32_t cmds = (uint32_t)v[pos + 4] << 8 | v[pos + 5];
		pos += KV_GROUP_HDR;
		struct conn *c = ours ? conn_by_client(s, client) : NULL;
		if (c != NULL && c->inflight != req)
			c = NULL;
		bool ok = apply_cmds(s, v, len, &pos, cmds, c ? &c->out : &s->scratch_out);
		s->scratch_out.len = 0;
		if (c != NULL && n_ans < KV_MAX_CONNS)
			answered[n_ans++] = c;
		if (!ok)
			break; /* a malformed entry cannot come from a replica; skip the rest */
	}
	for (uint32_t i = 0; i < n_ans; i++) {
		struct conn *c = answered[i];
		c->inflight = 0;
		conn_work(s, c); /* the next pipelined commands */
		conn_flush(s, c);
	}
}

static void on_done(void *arg, uint64_t req, int status, uint64_t instance)
{
	struct server *s = arg;
	if (status == 0)
		return; /* the reply is sent when it is applied */
	if ((uint32_t)(req >> 32) != s->client)
		return;
	batch_end(s, req);
	entry_failed(s, req, status == -ETIMEDOUT
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
	}
	conn_work(s, c);
	conn_flush(s, c);
}

int kv_serve(const struct kv_conf *conf)
{
	struct server *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	int rc = -ENOMEM;
	s->c = conf;
	s->scratch = malloc(KV_INBUF_MAX + 1);
	s->store = kv_store_create();
	if (s->scratch == NULL || s->store == NULL)
		goto err_free;
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
	fprintf(stderr, "innet kv: serving RESP on %s:%u\n", inet_ntoa(a.sin_addr), conf->listen_port);
	uint32_t trim_ms = conf->trim_ms ? conf->trim_ms : 50;
	struct timespec last_trim;
	clock_gettime(CLOCK_MONOTONIC, &last_trim);
	bool stale_reported = false;
	while (!*conf->stop) {
		struct epoll_event evs[64];
		int to = innet_paxos_timeout_ms(s->px);
		if (to < 0 || to > 100)
			to = 100;
		int n = epoll_wait(s->ep, evs, 64, to);
		for (int i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			if (tag == NULL) {
				accept_all(s);
			} else if (tag == &px_tag) {
				continue;
			} else {
				struct conn *c = tag;
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					conn_read(s, c);
				else if (evs[i].events & EPOLLOUT)
					conn_flush(s, c);
			}
		}
		server_propose(s);
		if (innet_paxos_process(s->px) == -ESTALE && !stale_reported) {
			fprintf(stderr, "innet kv: the acceptors trimmed the log past this replica; "
					"it needs a snapshot (not implemented)\n");
			stale_reported = true;
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - last_trim.tv_sec) * 1000 + (t.tv_nsec - last_trim.tv_nsec) / 1000000 >=
		    trim_ms) {
			innet_paxos_trim(s->px);
			last_trim = t;
		}
		server_propose(s);
	}
	rc = 0;
	while (s->n_conns > 0)
		conn_close(s, s->conns[0]);
	close(s->ep);
	close(s->lfd);
err_px:
	if (rc != 0)
		close(s->lfd);
	innet_paxos_destroy(s->px);
err_free:
	kv_store_destroy(s->store);
	kv_buf_free(&s->scratch_out);
	free(s->scratch);
	free(s);
	return rc;
}
