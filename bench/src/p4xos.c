/*
 * p4xos.c — the host side of a consensus fabric built from P4xos's own P4
 * programs (usi-systems/p4xos-public, p4-16/p4src: leader, acceptor,
 * learner): a proposer and a learner application in one process, speaking
 * P4xos's header, for bench/run p4-paxos and tests/integration/p4xos_*.sh.
 *
 * P4xos's header (p4-16/p4src/includes/header.p4), after UDP, big-endian:
 *
 *   0       2               6       8      10      12              16
 *   +-------+---------------+-------+-------+-------+---------------+
 *   |msgtype|     inst      |  rnd  | vrnd  |acptid |   paxoslen    |
 *   +-------+---------------+-------+-------+-------+---------------+
 *   |                 paxosval (32 bytes)                          |
 *   +---------------------------------------------------------------+
 *
 * msgtype 0 1A, 1 1B, 2 2A, 3 2B. A proposer sends a 2A with inst 0 to the
 * leader's UDP port (0x8888); the leader numbers it (inst), the acceptors
 * vote (2B to the learner switch), the learner switch forwards the value
 * once a majority of the three acceptors voted (to the application's UDP
 * port). The value here carries the request:
 *
 *   paxosval = | req id (8) | client (4) | pad (20) |
 *
 * Instances: P4xos's acceptors and learner keep per-instance state in
 * registers of 65536 entries, and the leader numbers requests from 1 without
 * end. Every PX_EPOCH instances (requests sent, resends included) the tool
 * lets its window drain, sends the leader a reset (msgtype 5: the leader's
 * instance back to 0) and moves to the next round (rnd + 1), which the
 * acceptors accept (rnd >= their round) and for which the learner starts
 * each instance's vote count afresh. A run begins with a reset too, so a
 * run after another on the same fabric starts at instance 1; it must then
 * use a round above the last one's (--rnd: a run ends at most a few rounds
 * above where it began, one per epoch).
 *
 * The tool keeps --window requests in flight; a request not delivered after
 * --timeout-ms is sent again (P4xos has no retransmission of its own; the
 * leader gives the copy a new instance, so a value can be delivered twice:
 * the learner side keeps the first and counts the duplicate). UDP checksums
 * are off (SO_NO_CHECK): the switches rewrite the UDP port and the Paxos
 * fields without updating one.
 *
 * The proposer's socket and the learner's may live in two network
 * namespaces (--send-ns, --recv-ns: names under /var/run/netns); both use
 * CLOCK_MONOTONIC, so latency is delivery time minus first send time.
 *
 *   p4xos --dst IP:PORT --listen IP:PORT [--send-ns NS] [--recv-ns NS]
 *         [--bind IP] [--window W] [--count N | --seconds S] [--warmup S]
 *         [--timeout-ms T] [--rnd R] [--client C] [--deadline S]
 *
 * Output, one line on stdout at the end:
 *   p4xos sent=N resent=N delivered=N dups=N missing=N seconds=F
 *         cmds_per_s=F p50_us=F p99_us=F
 * delivered counts distinct requests in the measured window (after
 * --warmup); with --count, missing is how many of the N never arrived
 * (the exit status is 1 if any is missing at --deadline).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "now.h"

#define PX_HDR_LEN 48u
#define PX_2A 2u
#define PX_2B 3u
#define PX_RESET 5u
#define PX_EPOCH 60000u
#define PX_WINDOW_MAX 4096u
#define PX_LAT_MAX (1u << 22)

struct px_opts {
	struct sockaddr_in dst;
	struct sockaddr_in listen;
	struct sockaddr_in bind;
	const char *send_ns;
	const char *recv_ns;
	unsigned window;
	uint64_t count;          /* 0: run --seconds */
	double seconds;
	double warmup;
	double timeout;
	double deadline;
	uint16_t rnd;
	uint32_t client;
};

struct px_req {
	uint64_t id;             /* 0: free slot */
	double first;            /* first send */
	double last;             /* last send */
};

static volatile sig_atomic_t px_stop;

static void on_signal(int sig)
{
	(void)sig;
	px_stop = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "p4xos: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void usage(void)
{
	fprintf(stderr, "usage: p4xos --dst IP:PORT --listen IP:PORT [--send-ns NS] [--recv-ns NS]\n"
			"             [--bind IP] [--window W] [--count N | --seconds S] [--warmup S]\n"
			"             [--timeout-ms T] [--rnd R] [--client C] [--deadline S]\n");
	exit(2);
}

static int parse_addr(const char *s, struct sockaddr_in *a)
{
	char buf[64];
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(buf))
		return -1;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = '\0';
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (inet_pton(AF_INET, buf, &a->sin_addr) != 1)
		return -1;
	long p = strtol(colon + 1, NULL, 10);
	if (p <= 0 || p > 65535)
		return -1;
	a->sin_port = htons((uint16_t)p);
	return 0;
}

/* A UDP socket created inside network namespace ns (NULL: the current one);
 * the thread returns to its own namespace afterwards. */
static int socket_in(const char *ns)
{
	int self = -1, target = -1, s;
	if (ns != NULL) {
		char path[256];
		snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		target = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || target < 0)
			die(path);
		if (setns(target, CLONE_NEWNET) != 0)
			die("setns");
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket");
	if (ns != NULL) {
		if (setns(self, CLONE_NEWNET) != 0)
			die("setns back");
		close(self);
		close(target);
	}
	return s;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void send_msg(int s, const struct px_opts *o, uint16_t type, uint64_t id)
{
	uint8_t m[PX_HDR_LEN];
	memset(m, 0, sizeof(m));
	put16(m, type);            /* msgtype */
	put32(m + 2, 0);           /* inst: the leader's to give */
	put16(m + 6, o->rnd);      /* rnd */
	put16(m + 8, 0);           /* vrnd */
	put16(m + 10, 0);          /* acptid */
	put32(m + 12, 32);         /* paxoslen */
	put64(m + 16, id);
	put32(m + 24, o->client);
	if (send(s, m, sizeof(m), 0) < 0 && errno != ENOBUFS && errno != EAGAIN)
		die("send");
}

int main(int argc, char **argv)
{
	struct px_opts o = { .window = 1, .seconds = 5, .warmup = 0, .timeout = 0.2, .deadline = 0,
			     .rnd = 1, .client = 1 };
	bool have_dst = false, have_listen = false, have_bind = false;
	static const struct option lo[] = {
		{ "dst", 1, 0, 'd' }, { "listen", 1, 0, 'l' }, { "send-ns", 1, 0, 's' },
		{ "recv-ns", 1, 0, 'r' }, { "window", 1, 0, 'w' }, { "count", 1, 0, 'n' },
		{ "seconds", 1, 0, 'S' }, { "warmup", 1, 0, 'W' }, { "timeout-ms", 1, 0, 't' },
		{ "rnd", 1, 0, 'R' }, { "client", 1, 0, 'c' }, { "deadline", 1, 0, 'D' },
		{ "bind", 1, 0, 'b' }, { 0, 0, 0, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd': have_dst = parse_addr(optarg, &o.dst) == 0; if (!have_dst) usage(); break;
		case 'l': have_listen = parse_addr(optarg, &o.listen) == 0; if (!have_listen) usage(); break;
		case 'b':
			memset(&o.bind, 0, sizeof(o.bind));
			o.bind.sin_family = AF_INET;
			if (inet_pton(AF_INET, optarg, &o.bind.sin_addr) != 1)
				usage();
			have_bind = true;
			break;
		case 's': o.send_ns = optarg; break;
		case 'r': o.recv_ns = optarg; break;
		case 'w': o.window = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': o.count = strtoull(optarg, NULL, 10); break;
		case 'S': o.seconds = strtod(optarg, NULL); break;
		case 'W': o.warmup = strtod(optarg, NULL); break;
		case 't': o.timeout = strtod(optarg, NULL) / 1000.0; break;
		case 'R': o.rnd = (uint16_t)strtoul(optarg, NULL, 10); break;
		case 'c': o.client = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'D': o.deadline = strtod(optarg, NULL); break;
		default: usage();
		}
	}
	if (!have_dst || !have_listen || o.window == 0 || o.window > PX_WINDOW_MAX ||
	    o.timeout <= 0 || (o.count == 0 && o.seconds <= 0))
		usage();
	if (o.deadline <= 0)
		o.deadline = o.count ? 30 : o.seconds + o.warmup + 5;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	int tx = socket_in(o.send_ns), rx = socket_in(o.recv_ns);
	int one = 1, big = 4 << 20;
	if (setsockopt(tx, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one)) != 0)
		die("SO_NO_CHECK");
	setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(tx, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (have_bind) {
		o.bind.sin_port = 0;
		if (bind(tx, (struct sockaddr *)&o.bind, sizeof(o.bind)) != 0)
			die("bind");
	}
	if (connect(tx, (struct sockaddr *)&o.dst, sizeof(o.dst)) != 0)
		die("connect");
	if (bind(rx, (struct sockaddr *)&o.listen, sizeof(o.listen)) != 0)
		die("bind --listen");
	fcntl(rx, F_SETFL, O_NONBLOCK);

	struct px_req *slots = calloc(o.window, sizeof(*slots));
	double *lat = malloc(sizeof(double) * PX_LAT_MAX);
	uint8_t *seen = NULL;   /* with --count: which request ids arrived */
	if (slots == NULL || lat == NULL)
		die("malloc");
	if (o.count) {
		seen = calloc(o.count + 1, 1);
		if (seen == NULL)
			die("calloc");
	}
	uint64_t next_id = 1, sent = 0, resent = 0, delivered = 0, dups = 0, got_total = 0;
	uint64_t epoch = 0;     /* instances the leader gave since its last reset */
	size_t nlat = 0;
	double t0 = now_s(), t_meas = t0 + o.warmup, t_end = t0 + o.warmup + o.seconds;
	double t_dead = t0 + o.deadline;

	/* the leader's numbering from 0 (a previous run's may be near the end) */
	send_msg(tx, &o, PX_RESET, 0);
	struct timespec settle = { 0, 1000000 };
	nanosleep(&settle, NULL);
	fprintf(stderr, "p4xos: ready\n");
	for (;;) {
		double now = now_s();
		if (px_stop || now >= t_dead)
			break;
		bool sending = o.count ? next_id <= o.count : now < t_end;
		if (!o.count && !sending)
			break;
		if (epoch + o.window >= PX_EPOCH) {
			/* drain the window, then a new epoch: reset the leader, next round */
			bool busy = false;
			for (unsigned i = 0; i < o.window; i++)
				busy |= slots[i].id != 0;
			sending = false;
			if (!busy) {
				send_msg(tx, &o, PX_RESET, 0);
				o.rnd++;
				epoch = 0;
				struct timespec ms = { 0, 1000000 };
				nanosleep(&ms, NULL);
				continue;
			}
		}
		if (o.count && got_total >= o.count)
			break;
		/* fill the window, resend the late */
		for (unsigned i = 0; i < o.window; i++) {
			struct px_req *r = &slots[i];
			if (r->id == 0 && sending && (!o.count || next_id <= o.count)) {
				r->id = next_id++;
				r->first = r->last = now;
				send_msg(tx, &o, PX_2A, r->id);
				sent++;
				epoch++;
			} else if (r->id != 0 && now - r->last > o.timeout) {
				r->last = now;
				send_msg(tx, &o, PX_2A, r->id);
				resent++;
				epoch++;
			}
		}
		struct pollfd p = { .fd = rx, .events = POLLIN };
		if (poll(&p, 1, 5) <= 0)
			continue;
		uint8_t m[2048];
		ssize_t n;
		while ((n = recv(rx, m, sizeof(m), 0)) >= (ssize_t)PX_HDR_LEN) {
			uint64_t id = get64(m + 16);
			if (get32(m + 24) != o.client || id == 0 || id >= next_id)
				continue;
			double t = now_s();
			struct px_req *r = NULL;
			for (unsigned i = 0; i < o.window; i++) {
				if (slots[i].id == id) {
					r = &slots[i];
					break;
				}
			}
			if (r == NULL) {
				dups++;
				continue;
			}
			got_total++;
			if (seen != NULL && id <= o.count)
				seen[id] = 1;
			if (r->first >= t_meas && (o.count || t <= t_end)) {
				delivered++;
				if (nlat < PX_LAT_MAX)
					lat[nlat++] = (t - r->first) * 1e6;
			}
			r->id = 0;
		}
	}
	double t_stop = now_s();
	double window = o.count ? t_stop - t_meas : o.seconds;
	if (window <= 0)
		window = 1e-9;
	qsort(lat, nlat, sizeof(double), cmp_double);
	double p50 = nlat ? lat[nlat / 2] : 0, p99 = nlat ? lat[(nlat * 99) / 100] : 0;
	uint64_t missing = 0;
	if (seen != NULL)
		for (uint64_t i = 1; i <= o.count; i++)
			missing += seen[i] == 0;
	printf("p4xos sent=%llu resent=%llu delivered=%llu dups=%llu missing=%llu seconds=%.3f "
	       "cmds_per_s=%.1f p50_us=%.1f p99_us=%.1f\n",
	       (unsigned long long)sent, (unsigned long long)resent, (unsigned long long)delivered,
	       (unsigned long long)dups, (unsigned long long)missing, window,
	       (double)delivered / window, p50, p99);
	free(slots);
	free(lat);
	free(seen);
	return missing ? 1 : 0;
}
