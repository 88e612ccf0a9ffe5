/*
 * kvbench — a RESP load generator for the key-value benchmarks, for what
 * redis-benchmark cannot do: a write followed by WAIT (synchronous
 * replication, the way Redis users get it), and a mix closer to
 * applications (bench/kv.sh --mix). The same tool drives every peer of a
 * run, so each is measured the same way.
 *
 *   C connections, each with up to P operations in flight (one batch: sent
 *   in one write, the next batch once every reply of this one came):
 *
 *   --mode set      SET key value
 *          get      GET key
 *          setwait  SET key value, WAIT R 0          (one operation: two replies)
 *          mix      per 12 operations: SET key value EX 3600, 10 x GET key, and one of
 *                   HSET hash field value / HGET hash field (in turn) — over --keys keys
 *                   and --hashes hashes of --fields fields; --load writes every key and
 *                   field first (not timed), so that reads hit
 *          mixwait  mix with WAIT R 0 after each write (the SET, the HSET)
 *
 * Keys are uniform over --keys ("key:%08u"). An error reply is counted; a
 * run with errors exits 1 (a benchmark that measured errors is no figure).
 * Latency is each batch's, from its send to its last reply, for each of its
 * operations (as redis-benchmark counts pipelined requests).
 *
 * Bounded: --duration seconds after --warmup, and alarm(--alarm) kills it.
 * Output, one line on stdout (key=value, for scripts):
 *   kvbench mode=M clients=C pipeline=P ops=N errors=N elapsed_s=F ops_per_s=F
 *           p50_ms=F p99_ms=F
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "now.h"

enum mode { M_SET, M_GET, M_SETWAIT, M_MIX, M_MIXWAIT };

struct cn {
	int fd;
	uint64_t rng;
	uint32_t n;          /* operations issued (the mix's position) */
	uint32_t want;       /* replies still due for the batch in flight */
	uint32_t ops;        /* operations in it */
	double sent;         /* when it was sent */
	char *in;            /* replies received, not yet parsed */
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_cap;
	size_t out_off;      /* sent so far */
};

static struct {
	const char *host;
	int port, clients, pipeline, replicas;
	enum mode mode;
	uint32_t keys, hashes, fields, vsize;
	double duration, warmup;
	bool load;
	char *value;
} o = { "127.0.0.1", 6379, 50, 1, 2, M_SET, 100000, 100, 100, 3, 5, 0.3, false, NULL };

/* latency histogram: bucket b = [2^(b/8) us ...), 8 per octave */
#define HB 256
static uint64_t hist[HB], h_n, ops, errors;
static volatile sig_atomic_t stop_now;

static void on_signal(int sig)
{
	(void)sig;
	stop_now = 1;
}

static uint64_t rnd(struct cn *c)
{
	uint64_t x = c->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return c->rng = x;
}

static void put(struct cn *c, const char *p, size_t n)
{
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap * 2 : 4096;
		while (cap < c->out_len + n)
			cap *= 2;
		if ((c->out = realloc(c->out, cap)) == NULL) {
			fprintf(stderr, "kvbench: out of memory\n");
			exit(2);
		}
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, n);
	c->out_len += n;
}

/* One command as a RESP array. */
static void cmd(struct cn *c, int argc, const char *const *argv, const size_t *lens)
{
	char t[32];
	int n = snprintf(t, sizeof(t), "*%d\r\n", argc);
	put(c, t, (size_t)n);
	for (int i = 0; i < argc; i++) {
		n = snprintf(t, sizeof(t), "$%zu\r\n", lens[i]);
		put(c, t, (size_t)n);
		put(c, argv[i], lens[i]);
		put(c, "\r\n", 2);
	}
}

#define CMD(c, ...)                                                                         \
	do {                                                                                \
		const char *a_[] = { __VA_ARGS__ };                                         \
		size_t l_[sizeof(a_) / sizeof(a_[0])];                                      \
		for (size_t i_ = 0; i_ < sizeof(a_) / sizeof(a_[0]); i_++)                  \
			l_[i_] = a_[i_] == o.value ? o.vsize : strlen(a_[i_]);              \
		cmd(c, (int)(sizeof(a_) / sizeof(a_[0])), a_, l_);                          \
	} while (0)

/* Append one operation; the replies it is due. */
static uint32_t op(struct cn *c)
{
	char key[32], hk[32], fk[32], rep[16];
	snprintf(key, sizeof(key), "key:%08u", (uint32_t)(rnd(c) % o.keys));
	switch (o.mode) {
	case M_SET:
		CMD(c, "SET", key, o.value);
		return 1;
	case M_GET:
		CMD(c, "GET", key);
		return 1;
	case M_SETWAIT:
		snprintf(rep, sizeof(rep), "%d", o.replicas);
		CMD(c, "SET", key, o.value);
		CMD(c, "WAIT", rep, "0");
		return 2;
	case M_MIX:
	case M_MIXWAIT: {
		uint32_t k = c->n++ % 12;
		snprintf(rep, sizeof(rep), "%d", o.replicas);
		if (k == 0) {
			CMD(c, "SET", key, o.value, "EX", "3600");
		} else if (k == 1) {
			snprintf(hk, sizeof(hk), "hash:%04u", (uint32_t)(rnd(c) % o.hashes));
			snprintf(fk, sizeof(fk), "f%04u", (uint32_t)(rnd(c) % o.fields));
			if ((c->n / 12) % 2 == 0) {
				CMD(c, "HSET", hk, fk, o.value);
			} else {
				CMD(c, "HGET", hk, fk);
				return 1;
			}
		} else {
			CMD(c, "GET", key);
			return 1;
		}
		if (o.mode == M_MIXWAIT) {
			CMD(c, "WAIT", rep, "0");
			return 2;
		}
		return 1;
	}
	}
	return 0;
}

/* Bytes of one complete RESP reply at p (nested arrays too), 0 if not all
 * there yet, -1 if malformed. *err: it was an error reply. */
static long reply_len(const char *p, size_t n, bool *err)
{
	const char *nl = memchr(p, '\n', n);
	if (nl == NULL)
		return 0;
	long hdr = nl - p + 1;
	if (p[0] == '-')
		*err = true;
	if (p[0] == '+' || p[0] == '-' || p[0] == ':')
		return hdr;
	long v = strtol(p + 1, NULL, 10);
	if (p[0] == '$')
		return v < 0 ? hdr : ((size_t)(hdr + v + 2) <= n ? hdr + v + 2 : 0);
	if (p[0] != '*')
		return -1;
	long pos = hdr;
	for (long i = 0; i < v; i++) {
		long l = reply_len(p + pos, n - (size_t)pos, err);
		if (l <= 0)
			return l;
		pos += l;
	}
	return pos;
}

static int conn_open(void)
{
	char port[16];
	snprintf(port, sizeof(port), "%d", o.port);
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	if (getaddrinfo(o.host, port, &hints, &ai) != 0)
		return -1;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		freeaddrinfo(ai);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	freeaddrinfo(ai);
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* Blocking: send what is queued, read `want` replies. 0, or -1. */
static int sync_round(struct cn *c, uint32_t want)
{
	for (size_t off = 0; off < c->out_len;) {
		ssize_t n = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	c->out_len = 0;
	char buf[65536];
	size_t have = 0;
	static char acc[1 << 20];
	while (want > 0) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
		if (n <= 0 || have + (size_t)n > sizeof(acc))
			return -1;
		memcpy(acc + have, buf, (size_t)n);
		have += (size_t)n;
		size_t pos = 0;
		for (;;) {
			bool e = false;
			long l = reply_len(acc + pos, have - pos, &e);
			if (l < 0)
				return -1;
			if (l == 0)
				break;
			if (e)
				return -1;
			pos += (size_t)l;
			want--;
		}
		memmove(acc, acc + pos, have - pos);
		have -= pos;
	}
	return 0;
}

/* --load: every key and hash field written before the run. */
static int preload(struct cn *c)
{
	uint32_t due = 0;
	char k[32], f[32];
	for (uint32_t i = 0; i < o.keys; i++) {
		snprintf(k, sizeof(k), "key:%08u", i);
		CMD(c, "SET", k, o.value);
		if (++due == 256 || i + 1 == o.keys) {
			if (sync_round(c, due) != 0)
				return -1;
			due = 0;
		}
	}
	for (uint32_t h = 0; h < o.hashes && (o.mode == M_MIX || o.mode == M_MIXWAIT); h++) {
		snprintf(k, sizeof(k), "hash:%04u", h);
		for (uint32_t i = 0; i < o.fields; i++) {
			snprintf(f, sizeof(f), "f%04u", i);
			CMD(c, "HSET", k, f, o.value);
		}
		if (sync_round(c, o.fields) != 0)
			return -1;
	}
	return 0;
}

static void batch(struct cn *c)
{
	c->out_len = c->out_off = 0;
	c->want = 0;
	for (int i = 0; i < o.pipeline; i++)
		c->want += op(c);
	c->ops = (uint32_t)o.pipeline;
	c->sent = now_s();
}

/* Send what is queued; false: the connection failed. */
static bool flush(struct cn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (n <= 0)
			return false;
		c->out_off += (size_t)n;
	}
	return true;
}

static void record(double lat_s, uint32_t n)
{
	double us = lat_s * 1e6;
	int b = 0;
	while (b < HB - 1 && us >= __builtin_exp2((double)(b + 1) / 8))
		b++;
	hist[b] += n;
	h_n += n;
}

static double pct(double q)
{
	uint64_t want = (uint64_t)(q * (double)h_n), acc = 0;
	for (int b = 0; b < HB; b++) {
		acc += hist[b];
		if (acc > want)
			return __builtin_exp2((double)b / 8) / 1000.0;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: kvbench [-h HOST] [-p PORT] [-c CLIENTS] [-P PIPELINE] [-d SECONDS]\n"
		   "               [--mode set|get|setwait|mix|mixwait] [--replicas R] [--keys K]\n"
		   "               [--hashes H] [--fields F] [--value-size B] [--warmup S] [--load]\n"
		   "               [--alarm S]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },     { "replicas", required_argument, NULL, 'r' },
		{ "keys", required_argument, NULL, 'k' },     { "hashes", required_argument, NULL, 'H' },
		{ "fields", required_argument, NULL, 'F' },   { "value-size", required_argument, NULL, 'V' },
		{ "warmup", required_argument, NULL, 'w' },   { "load", no_argument, NULL, 'L' },
		{ "alarm", required_argument, NULL, 'A' },    { "help", no_argument, NULL, '?' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned alarm_s = 120;
	int ch;
	while ((ch = getopt_long(argc, argv, "h:p:c:P:d:", opts, NULL)) != -1) {
		switch (ch) {
		case 'h': o.host = optarg; break;
		case 'p': o.port = atoi(optarg); break;
		case 'c': o.clients = atoi(optarg); break;
		case 'P': o.pipeline = atoi(optarg); break;
		case 'd': o.duration = atof(optarg); break;
		case 'r': o.replicas = atoi(optarg); break;
		case 'k': o.keys = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'H': o.hashes = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'F': o.fields = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'V': o.vsize = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'w': o.warmup = atof(optarg); break;
		case 'L': o.load = true; break;
		case 'A': alarm_s = (unsigned)atoi(optarg); break;
		case 'm':
			if (!strcmp(optarg, "set")) o.mode = M_SET;
			else if (!strcmp(optarg, "get")) o.mode = M_GET;
			else if (!strcmp(optarg, "setwait")) o.mode = M_SETWAIT;
			else if (!strcmp(optarg, "mix")) o.mode = M_MIX;
			else if (!strcmp(optarg, "mixwait")) o.mode = M_MIXWAIT;
			else { usage(stderr); return 2; }
			break;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || o.clients < 1 || o.clients > 4096 || o.pipeline < 1 ||
	    o.pipeline > 1024 || o.duration <= 0 || o.keys == 0 || o.hashes == 0 || o.fields == 0 ||
	    o.vsize == 0 || o.vsize > (1u << 20)) {
		usage(stderr);
		return 2;
	}
	alarm(alarm_s);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	o.value = malloc(o.vsize);
	memset(o.value, 'x', o.vsize);
	struct cn *cs = calloc((size_t)o.clients, sizeof(*cs));
	int ep = epoll_create1(0);
	if (cs == NULL || ep < 0)
		return 2;
	for (int i = 0; i < o.clients; i++) {
		cs[i].fd = conn_open();
		if (cs[i].fd < 0) {
			fprintf(stderr, "kvbench: cannot connect to %s:%d: %s\n", o.host, o.port,
				strerror(errno));
			return 1;
		}
		cs[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
	}
	if (o.load && preload(&cs[0]) != 0) {
		fprintf(stderr, "kvbench: --load failed (an error reply, or the connection)\n");
		return 1;
	}
	for (int i = 0; i < o.clients; i++) {
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = &cs[i] };
		epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
		batch(&cs[i]);
		if (!flush(&cs[i]))
			return 1;
	}
	double t0 = now_s(), start = t0 + o.warmup, end = start + o.duration;
	bool counting = false;
	struct epoll_event evs[256];
	char buf[1 << 16];
	while (!stop_now) {
		double t = now_s();
		if (!counting && t >= start) {
			counting = true;
			ops = errors = h_n = 0;
			memset(hist, 0, sizeof(hist));
		}
		if (t >= end)
			break;
		int n = epoll_wait(ep, evs, 256, 50);
		for (int i = 0; i < n; i++) {
			struct cn *c = evs[i].data.ptr;
			ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
				fprintf(stderr, "kvbench: the server closed a connection\n");
				return 1;
			}
			if (r < 0)
				continue;
			if (c->in_len + (size_t)r > c->in_cap) {
				c->in_cap = (c->in_len + (size_t)r) * 2;
				if ((c->in = realloc(c->in, c->in_cap)) == NULL)
					return 2;
			}
			memcpy(c->in + c->in_len, buf, (size_t)r);
			c->in_len += (size_t)r;
			size_t pos = 0;
			for (;;) {
				bool e = false;
				long l = reply_len(c->in + pos, c->in_len - pos, &e);
				if (l < 0) {
					fprintf(stderr, "kvbench: malformed reply\n");
					return 1;
				}
				if (l == 0)
					break;
				if (e && errors++ == 0)
					fprintf(stderr, "kvbench: error reply: %.*s\n",
						(int)(l > 120 ? 120 : l - 2), c->in + pos);
				pos += (size_t)l;
				if (--c->want == 0) {
					ops += c->ops;
					record(now_s() - c->sent, c->ops);
					batch(c);
					if (!flush(c))
						return 1;
				}
			}
			memmove(c->in, c->in + pos, c->in_len - pos);
			c->in_len -= pos;
			if (!flush(c))
				return 1;
		}
	}
	double el = now_s() - start;
	if (!counting || el <= 0)
		el = 1e-9;
	printf("kvbench mode=%s clients=%d pipeline=%d ops=%llu errors=%llu elapsed_s=%.3f "
	       "ops_per_s=%.0f p50_ms=%.3f p99_ms=%.3f\n",
	       (const char *[]){ "set", "get", "setwait", "mix", "mixwait" }[o.mode], o.clients, o.pipeline,
	       (unsigned long long)ops, (unsigned long long)errors, el, (double)ops / el, pct(0.5),
	       pct(0.99));
	return errors ? 1 : 0;
}
