/*
 * udpsink — the UDP receiver of innet's benchmarks.
 *
 * Binds one address, receives with recvmmsg bursts, and measures what
 * arrives during a window: it starts at the first packet plus --warmup
 * seconds and lasts --duration seconds. Packets, payload bytes and the rate
 * are counted inside the window only. When the payload carries a sequence
 * number (as udpgen writes it: big-endian, 4 or 8 bytes at --seq-offset), the
 * sink also counts, for one sender:
 *
 *   lost  sequence numbers skipped and not (yet) seen late
 *   late  packets that arrived after a higher sequence number (reordered)
 *   dup   packets whose sequence number was already seen (last 64Ki numbers)
 *
 * loss_pct = lost / (received unique + lost). The socket's own overflow drops
 * (SO_RXQ_OVFL) are reported as sink_drops: if they are not zero, the sink,
 * not the system under test, was too slow.
 *
 * --cpu-pid PID (repeatable) also measures the CPU time the process PID (all
 * its threads) used during the window, summed from each thread's schedstat:
 * cpu_s in the summary. A benchmark divides packets by it to get a
 * per-packet cost that does not depend on how much of a shared CPU the
 * process was given.
 *
 * --busy polls the socket instead of sleeping in recvmmsg: the sender then
 * never pays for waking the sink up (an inter-processor interrupt when they
 * run on different CPUs), at the price of a CPU kept busy.
 *
 * Bounded: it gives up --wait seconds after start if nothing arrives (exit 1),
 * stops at the end of the window, and a hard alarm() kills it after --alarm
 * seconds. SIGTERM/SIGINT end the window early (the summary is printed).
 * Prints "udpsink: ready ..." on stderr once bound.
 *
 * Output, one line on stdout at exit (key=value, for scripts):
 *   udpsink pkts=N bytes=N elapsed_s=F pps=F mbps=F lost=N late=N dup=N
 *           loss_pct=F bad=N sink_drops=N total_pkts=N cpu_s=F
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <dirent.h>
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

#define SINK_MAX_PAYLOAD 65536u
#define SINK_MAX_BURST 1024u
#define SINK_SEEN_BITS (1u << 16)  /* sequence numbers remembered for dup/late */
#define SINK_MAX_CPU_PIDS 8u

struct sink_opts {
	struct sockaddr_in addr;  /* bind address */
	double duration;          /* measurement window, seconds */
	double warmup;            /* skipped after the first packet, seconds */
	double wait;              /* give up if no packet by then, seconds */
	long seq_offset;          /* byte offset of the sequence number; -1 = none */
	uint32_t seq_bytes;       /* 4 or 8 */
	uint32_t expect_size;     /* 0 = any; else other sizes count as bad */
	uint32_t burst;           /* datagrams per recvmmsg */
	uint32_t buf_size;        /* receive buffer per datagram */
	int rcvbuf;               /* SO_RCVBUF bytes */
	unsigned alarm_s;         /* hard limit in seconds (0 = derived) */
	bool busy;                /* poll without sleeping (no wakeups to pay for) */
	int cpu_pids[SINK_MAX_CPU_PIDS]; /* processes whose CPU time is measured */
	uint32_t n_cpu_pids;
	bool quiet;               /* no progress on stderr */
};

/* Counters; a snapshot at the window's start is subtracted at its end. */
struct sink_counts {
	uint64_t pkts;        /* datagrams received */
	uint64_t bytes;       /* payload bytes received */
	uint64_t gaps;        /* sequence numbers skipped over */
	uint64_t late;        /* arrived behind a higher number, filling a gap */
	uint64_t dup;         /* number already seen */
	uint64_t bad;         /* too short for the sequence number, or wrong size */
	uint64_t drops;       /* socket overflow drops (SO_RXQ_OVFL, cumulative) */
};

/* Sequence tracking for one sender: next expected number and a bitmap of the
 * last SINK_SEEN_BITS numbers below it that did arrive. */
struct sink_seq {
	bool started;
	uint64_t expected;
	uint64_t seen[SINK_SEEN_BITS / 64];
};

static volatile sig_atomic_t sink_stop;

static void on_stop(int sig)
{
	(void)sig;
	sink_stop = 1;
}

static void on_alarm(int sig)
{
	static const char msg[] = "udpsink: hard time limit reached, exiting\n";
	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to do */
	}
	_exit(124);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: udpsink --bind IP:PORT [options]\n"
		"  -l, --bind IP:PORT       address to receive on (required)\n"
		"  -t, --duration SEC       measurement window (default 1)\n"
		"  -W, --warmup SEC         skip SEC after the first packet (default 0)\n"
		"      --wait SEC           give up if nothing arrives within SEC (default 10)\n"
		"  -o, --seq-offset OFF     sequence number offset (default 0; 'none' = no checks)\n"
		"  -w, --seq-bytes 4|8      sequence number width, big-endian (default 8)\n"
		"  -s, --expect-size BYTES  count other payload sizes as bad (default: any)\n"
		"  -B, --burst N            datagrams per recvmmsg, 1..%u (default 64)\n"
		"      --rcvbuf BYTES       SO_RCVBUF (default 4194304; SO_RCVBUFFORCE tried first)\n"
		"      --alarm SEC          hard kill after SEC s (default wait+warmup+duration+10)\n"
		"      --cpu-pid PID        measure PID's CPU time in the window (repeatable, <= %u)\n"
		"      --busy               busy-poll (MSG_DONTWAIT) instead of sleeping in recvmmsg\n"
		"  -q, --quiet              no progress messages on stderr\n"
		"  -h, --help               this text\n"
		"prints: udpsink pkts=N bytes=N elapsed_s=F pps=F mbps=F lost=N late=N dup=N\n"
		"        loss_pct=F bad=N sink_drops=N total_pkts=N cpu_s=F\n",
		SINK_MAX_BURST, SINK_MAX_CPU_PIDS);
}

static int bad_arg(const char *what, const char *val)
{
	fprintf(stderr, "udpsink: bad %s '%s'\n", what, val ? val : "");
	usage(stderr);
	return 2;
}

static bool parse_addr(const char *s, struct sockaddr_in *out)
{
	char ip[64];
	const char *colon = strchr(s, ':');
	unsigned long port;
	char *end;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || end == colon + 1 || port > 65535)
		return false;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, ip, &out->sin_addr) == 1;
}

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

static bool parse_double(const char *s, double max, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || end == s || !isfinite(v) || v < 0 || v > max)
		return false;
	*out = v;
	return true;
}

static int parse_opts(int argc, char **argv, struct sink_opts *o)
{
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, 'l' },
		{ "duration", required_argument, NULL, 't' },
		{ "warmup", required_argument, NULL, 'W' },
		{ "wait", required_argument, NULL, 1 },
		{ "seq-offset", required_argument, NULL, 'o' },
		{ "seq-bytes", required_argument, NULL, 'w' },
		{ "expect-size", required_argument, NULL, 's' },
		{ "burst", required_argument, NULL, 'B' },
		{ "rcvbuf", required_argument, NULL, 2 },
		{ "alarm", required_argument, NULL, 3 },
		{ "busy", no_argument, NULL, 4 },
		{ "cpu-pid", required_argument, NULL, 5 },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_addr = false;
	uint64_t u;
	int c;

	*o = (struct sink_opts){
		.duration = 1.0, .wait = 10.0, .seq_offset = 0, .seq_bytes = 8,
		.burst = 64, .buf_size = SINK_MAX_PAYLOAD, .rcvbuf = 4 << 20,
	};
	while ((c = getopt_long(argc, argv, "l:t:W:o:w:s:B:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (!parse_addr(optarg, &o->addr))
				return bad_arg("--bind", optarg);
			have_addr = true;
			break;
		case 't':
			if (!parse_double(optarg, 86400, &o->duration) || o->duration == 0)
				return bad_arg("--duration", optarg);
			break;
		case 'W':
			if (!parse_double(optarg, 3600, &o->warmup))
				return bad_arg("--warmup", optarg);
			break;
		case 1:
			if (!parse_double(optarg, 3600, &o->wait) || o->wait == 0)
				return bad_arg("--wait", optarg);
			break;
		case 'o':
			if (strcmp(optarg, "none") == 0) {
				o->seq_offset = -1;
			} else {
				if (!parse_u64(optarg, SINK_MAX_PAYLOAD, &u))
					return bad_arg("--seq-offset", optarg);
				o->seq_offset = (long)u;
			}
			break;
		case 'w':
			if (!parse_u64(optarg, 8, &u) || (u != 4 && u != 8))
				return bad_arg("--seq-bytes", optarg);
			o->seq_bytes = (uint32_t)u;
			break;
		case 's':
			if (!parse_u64(optarg, SINK_MAX_PAYLOAD, &u))
				return bad_arg("--expect-size", optarg);
			o->expect_size = (uint32_t)u;
			break;
		case 'B':
			if (!parse_u64(optarg, SINK_MAX_BURST, &u) || u == 0)
				return bad_arg("--burst", optarg);
			o->burst = (uint32_t)u;
			break;
		case 2:
			if (!parse_u64(optarg, INT_MAX, &u))
				return bad_arg("--rcvbuf", optarg);
			o->rcvbuf = (int)u;
			break;
		case 3:
			if (!parse_u64(optarg, 86400, &u) || u == 0)
				return bad_arg("--alarm", optarg);
			o->alarm_s = (unsigned)u;
			break;
		case 4:
			o->busy = true;
			break;
		case 5:
			if (!parse_u64(optarg, INT_MAX, &u) || u == 0 ||
			    o->n_cpu_pids == SINK_MAX_CPU_PIDS)
				return bad_arg("--cpu-pid", optarg);
			o->cpu_pids[o->n_cpu_pids++] = (int)u;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc)
		return bad_arg("argument", argv[optind]);
	if (!have_addr)
		return bad_arg("--bind", "(missing)");
	/* Only the bytes we need are kept when the size is known. */
	if (o->expect_size)
		o->buf_size = o->expect_size + 1;
	if (o->alarm_s == 0)
		o->alarm_s = (unsigned)ceil(o->wait + o->warmup + o->duration) + 10;
	return 0;
}

/* CPU time (ns) used so far by all threads of the given processes; threads
 * or processes that are gone count as 0. */
static uint64_t cpu_ns(const struct sink_opts *o)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < o->n_cpu_pids; i++) {
		char path[64];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%d/task", o->cpu_pids[i]);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			char sp[96];
			unsigned long long ns;
			FILE *f;

			if (de->d_name[0] == '.')
				continue;
			snprintf(sp, sizeof(sp), "/proc/%d/task/%.16s/schedstat", o->cpu_pids[i],
				 de->d_name);
			f = fopen(sp, "r");
			if (!f)
				continue;
			if (fscanf(f, "%llu", &ns) == 1)
				total += ns;
			fclose(f);
		}
		closedir(d);
	}
	return total;
}

static uint64_t get_seq(const uint8_t *p, uint32_t bytes)
{
	uint64_t v = 0;

	for (uint32_t i = 0; i < bytes; i++)
		v = (v << 8) | p[i];
	return v;
}

/* A 4-byte number wraps: take the 64-bit number nearest the expected one
 * (serial number arithmetic), so that 0xffffffff → 0 is one step forward. */
static uint64_t seq_widen(const struct sink_seq *s, uint64_t seq, uint32_t bytes)
{
	int32_t delta;

	if (bytes == 8 || !s->started)
		return seq;
	delta = (int32_t)((uint32_t)seq - (uint32_t)s->expected);
	if (delta < 0 && (uint64_t)-(int64_t)delta > s->expected)
		return seq; /* would go below zero: early in the stream */
	return s->expected + (uint64_t)(int64_t)delta;
}

static bool seen_test(const struct sink_seq *s, uint64_t seq)
{
	uint32_t b = (uint32_t)(seq % SINK_SEEN_BITS);

	return s->seen[b / 64] >> (b % 64) & 1;
}

static void seen_set(struct sink_seq *s, uint64_t seq, bool on)
{
	uint32_t b = (uint32_t)(seq % SINK_SEEN_BITS);
	uint64_t bit = 1ull << (b % 64);

	if (on)
		s->seen[b / 64] |= bit;
	else
		s->seen[b / 64] &= ~bit;
}

/* Account one sequence number: in order, a jump forward (gap), or behind
 * (late or duplicate). */
static void seq_track(struct sink_seq *s, struct sink_counts *c, uint64_t seq)
{
	if (!s->started) {
		s->started = true;
		s->expected = seq + 1;
		seen_set(s, seq, true);
		return;
	}
	if (seq >= s->expected) {
		uint64_t skip = seq - s->expected;

		if (skip >= SINK_SEEN_BITS)
			memset(s->seen, 0, sizeof(s->seen));
		else
			for (uint64_t x = s->expected; x < seq; x++)
				seen_set(s, x, false);
		c->gaps += skip;
		seen_set(s, seq, true);
		s->expected = seq + 1;
	} else if (s->expected - seq > SINK_SEEN_BITS || !seen_test(s, seq)) {
		/* A hole filled late (or one too old to remember: assume late). */
		c->late++;
		if (s->expected - seq <= SINK_SEEN_BITS)
			seen_set(s, seq, true);
	} else {
		c->dup++;
	}
}

static int open_socket(const struct sink_opts *o)
{
	struct timeval tv = { 0, 100 * 1000 };
	int one = 1, got = 0;
	socklen_t len = sizeof(got);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0) {
		perror("udpsink: socket");
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &o->rcvbuf, sizeof(o->rcvbuf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o->rcvbuf, sizeof(o->rcvbuf));
	(void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		perror("udpsink: SO_RCVTIMEO");
		goto err_close;
	}
	if (bind(fd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) < 0) {
		perror("udpsink: bind");
		goto err_close;
	}
	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &len);
	if (!o->quiet) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &o->addr.sin_addr, ip, sizeof(ip));
		fprintf(stderr, "udpsink: ready on %s:%u rcvbuf=%d\n", ip,
			ntohs(o->addr.sin_port), got);
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

static void print_summary(const struct sink_opts *o, const struct sink_counts *a,
			  const struct sink_counts *b, double elapsed, uint64_t total, double cpu_s)
{
	uint64_t pkts = b->pkts - a->pkts, bytes = b->bytes - a->bytes;
	uint64_t gaps = b->gaps - a->gaps, late = b->late - a->late, dup = b->dup - a->dup;
	uint64_t lost = gaps > late ? gaps - late : 0;
	uint64_t uniq = pkts - dup;
	double loss_pct = uniq + lost ? 100.0 * (double)lost / (double)(uniq + lost) : 0;

	if (elapsed <= 0)
		elapsed = 1e-9;
	(void)o;
	printf("udpsink pkts=%" PRIu64 " bytes=%" PRIu64 " elapsed_s=%.6f pps=%.0f mbps=%.3f"
	       " lost=%" PRIu64 " late=%" PRIu64 " dup=%" PRIu64 " loss_pct=%.3f bad=%" PRIu64
	       " sink_drops=%" PRIu64 " total_pkts=%" PRIu64 " cpu_s=%.6f\n",
	       pkts, bytes, elapsed, (double)pkts / elapsed, (double)bytes * 8 / elapsed / 1e6,
	       lost, late, dup, loss_pct, b->bad - a->bad, b->drops - a->drops, total, cpu_s);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	enum { WAITING, WARMUP, WINDOW } phase = WAITING;
	struct sink_opts o;
	struct sink_counts c = { 0 }, at_start = { 0 };
	struct sink_seq *seq = NULL;
	struct mmsghdr *msgs = NULL;
	struct iovec *iov = NULL;
	uint8_t *bufs = NULL, *ctl = NULL;
	const size_t ctl_len = CMSG_SPACE(sizeof(uint32_t));
	double t_start, t_win0 = 0, t_win1 = 0, now;
	uint64_t cpu0 = 0, cpu1 = 0;
	int rc, fd, ret = 1;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	signal(SIGALRM, on_alarm);
	alarm(o.alarm_s);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);

	seq = calloc(1, sizeof(*seq));
	msgs = calloc(o.burst, sizeof(*msgs));
	iov = calloc(o.burst, sizeof(*iov));
	bufs = malloc((size_t)o.burst * o.buf_size);
	ctl = calloc(o.burst, ctl_len);
	if (!seq || !msgs || !iov || !bufs || !ctl) {
		fprintf(stderr, "udpsink: out of memory\n");
		goto out_free;
	}
	for (uint32_t i = 0; i < o.burst; i++) {
		iov[i].iov_base = bufs + (size_t)i * o.buf_size;
		iov[i].iov_len = o.buf_size;
	}
	fd = open_socket(&o);
	if (fd < 0)
		goto out_free;

	t_start = now_s();
	while (!sink_stop) {
		int r;

		for (uint32_t i = 0; i < o.burst; i++) {
			msgs[i].msg_hdr = (struct msghdr){
				.msg_iov = &iov[i], .msg_iovlen = 1,
				.msg_control = ctl + i * ctl_len, .msg_controllen = ctl_len,
			};
		}
		r = recvmmsg(fd, msgs, o.burst, o.busy ? MSG_DONTWAIT : MSG_WAITFORONE, NULL);
		now = now_s();
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			perror("udpsink: recvmmsg");
			goto out_close;
		}
		if (r > 0 && phase == WAITING) {
			phase = WARMUP;
			t_win0 = now + o.warmup;
		}
		if (phase == WARMUP && now >= t_win0) {
			at_start = c;
			cpu0 = cpu_ns(&o);
			t_win0 = now;
			t_win1 = now + o.duration;
			phase = WINDOW;
		}
		if (phase == WINDOW && now >= t_win1) {
			cpu1 = cpu_ns(&o);
			t_win1 = now;
			break;
		}
		if (r <= 0) {
			if (phase == WAITING && now - t_start > o.wait) {
				fprintf(stderr, "udpsink: nothing received in %.1fs\n", o.wait);
				print_summary(&o, &c, &c, 0, 0, 0);
				goto out_close;
			}
			continue;
		}
		for (int i = 0; i < r; i++) {
			uint32_t len = msgs[i].msg_len;
			const uint8_t *p = iov[i].iov_base;
			struct cmsghdr *cm;

			c.pkts++;
			c.bytes += len;
			for (cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm;
			     cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm)) {
				if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
					uint32_t d;

					memcpy(&d, CMSG_DATA(cm), sizeof(d));
					if (d > c.drops)
						c.drops = d;
				}
			}
			if (o.expect_size && len != o.expect_size) {
				c.bad++;
				continue;
			}
			if (o.seq_offset < 0)
				continue;
			if ((uint64_t)o.seq_offset + o.seq_bytes > len) {
				c.bad++;
				continue;
			}
			seq_track(seq, &c, seq_widen(seq, get_seq(p + o.seq_offset, o.seq_bytes),
						     o.seq_bytes));
		}
	}
	if (phase != WINDOW) {
		/* Stopped by a signal before the window: report what there is. */
		at_start = (struct sink_counts){ 0 };
		t_win0 = t_start;
		t_win1 = now_s();
	} else if (sink_stop) {
		cpu1 = cpu_ns(&o);
		t_win1 = now_s();
	}
	print_summary(&o, &at_start, &c, t_win1 - t_win0, c.pkts,
		      cpu1 > cpu0 ? (double)(cpu1 - cpu0) * 1e-9 : 0);
	ret = phase == WINDOW ? 0 : 1;

out_close:
	close(fd);
out_free:
	free(ctl);
	free(bufs);
	free(iov);
	free(msgs);
	free(seq);
	return ret;
}
