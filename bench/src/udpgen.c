/*
 * udpgen — the UDP traffic generator of innet's benchmarks.
 *
 * Sends datagrams of one payload size to one destination in sendmmsg bursts,
 * as fast as it can or paced to --rate packets/s, until --duration seconds
 * have passed or --count packets have been sent. Every payload carries a
 * sequence number (big-endian, 4 or 8 bytes at --seq-offset) that udpsink
 * checks for loss, reordering and duplicates; the other payload bytes come
 * from a template file (repeated to fill the size) or a fixed pattern, so a
 * benchmark can send a service's real header with the sequence number
 * patched into a field of its choice.
 *
 * --gso N sends N datagrams per message with UDP_SEGMENT (the kernel splits
 * them, each with its own UDP header and sequence number): a cheap way to
 * offer more load than one core can with one syscall per datagram. The
 * receiver still sees N separate datagrams.
 *
 * Bounded: a duration or a count is required, and a hard alarm() kills the
 * process --alarm seconds after start whatever happens. SIGTERM/SIGINT stop
 * it early; the summary is printed either way.
 *
 * Output, one line on stdout at exit (key=value, for scripts):
 *   udpgen sent=N bytes=N send_errors=N elapsed_s=F pps=F mbps=F
 * (bytes and mbps count UDP payload bytes.)
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "now.h"

#define GEN_MAX_PAYLOAD 65507u
#define GEN_MAX_BURST 1024u
#define GEN_MAX_GSO 64u            /* UDP_MAX_SEGMENTS */
#define GEN_GSO_BYTES 65000u       /* payload bytes per GSO message, at most */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

struct gen_opts {
	struct sockaddr_in dst;   /* destination */
	struct sockaddr_in src;   /* local bind (0.0.0.0:0 = any) */
	bool bind_src;            /* --bind given */
	uint32_t size;            /* payload bytes */
	double duration;          /* seconds; 0 = no time limit (count required) */
	uint64_t count;           /* packets; 0 = no count limit */
	double rate;              /* packets/s; 0 = as fast as possible */
	uint32_t burst;           /* messages per sendmmsg */
	uint32_t gso;             /* datagrams per message (UDP_SEGMENT); 1 = off */
	const char *template_path; /* payload template file, or NULL */
	long seq_offset;          /* byte offset of the sequence number; -1 = none */
	uint32_t seq_bytes;       /* 4 or 8 */
	uint64_t seq_start;       /* first sequence number */
	int sndbuf;               /* SO_SNDBUF bytes */
	unsigned alarm_s;         /* hard limit in seconds (0 = derived) */
	bool quiet;               /* no progress on stderr */
};

static volatile sig_atomic_t gen_stop;

static void on_stop(int sig)
{
	(void)sig;
	gen_stop = 1;
}

static void on_alarm(int sig)
{
	static const char msg[] = "udpgen: hard time limit reached, exiting\n";
	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to do */
	}
	_exit(124);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: udpgen --dst IP:PORT [options]\n"
		"  -d, --dst IP:PORT        destination (required)\n"
		"  -b, --bind IP[:PORT]     local address to send from (default: any)\n"
		"  -s, --size BYTES         UDP payload size, 1..%u (default 64)\n"
		"  -t, --duration SEC       send for SEC seconds (default 1; 0 = use --count)\n"
		"  -n, --count N            stop after N packets (default 0 = no limit)\n"
		"  -r, --rate PPS           pace to PPS packets/s (default 0 = as fast as possible)\n"
		"  -B, --burst N            messages per sendmmsg, 1..%u (default 32)\n"
		"  -g, --gso N              datagrams per message with UDP_SEGMENT, 1..%u (default 1)\n"
		"  -T, --template FILE      payload bytes from FILE, repeated to fill --size\n"
		"  -o, --seq-offset OFF     where the sequence number goes (default 0; 'none')\n"
		"  -w, --seq-bytes 4|8      sequence number width, big-endian (default 8)\n"
		"      --seq-start N        first sequence number (default 0)\n"
		"      --sndbuf BYTES       SO_SNDBUF (default 4194304; SO_SNDBUFFORCE tried first)\n"
		"      --alarm SEC          hard kill after SEC s (default duration + 10)\n"
		"  -q, --quiet              no progress messages on stderr\n"
		"  -h, --help               this text\n"
		"prints: udpgen sent=N bytes=N send_errors=N elapsed_s=F pps=F mbps=F\n",
		GEN_MAX_PAYLOAD, GEN_MAX_BURST, GEN_MAX_GSO);
}

static int bad_arg(const char *what, const char *val)
{
	fprintf(stderr, "udpgen: bad %s '%s'\n", what, val ? val : "");
	usage(stderr);
	return 2;
}

/* Parse "IP" or "IP:PORT" (need_port: the port is required). */
static bool parse_addr(const char *s, bool need_port, struct sockaddr_in *out)
{
	char ip[64];
	const char *colon = strchr(s, ':');
	size_t iplen = colon ? (size_t)(colon - s) : strlen(s);
	unsigned long port = 0;

	if (iplen == 0 || iplen >= sizeof(ip))
		return false;
	memcpy(ip, s, iplen);
	ip[iplen] = '\0';
	if (colon) {
		char *end;

		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || port > 65535)
			return false;
	} else if (need_port) {
		return false;
	}
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

static int parse_opts(int argc, char **argv, struct gen_opts *o)
{
	static const struct option longopts[] = {
		{ "dst", required_argument, NULL, 'd' },
		{ "bind", required_argument, NULL, 'b' },
		{ "size", required_argument, NULL, 's' },
		{ "duration", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'n' },
		{ "rate", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'B' },
		{ "gso", required_argument, NULL, 'g' },
		{ "template", required_argument, NULL, 'T' },
		{ "seq-offset", required_argument, NULL, 'o' },
		{ "seq-bytes", required_argument, NULL, 'w' },
		{ "seq-start", required_argument, NULL, 1 },
		{ "sndbuf", required_argument, NULL, 2 },
		{ "alarm", required_argument, NULL, 3 },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_dst = false;
	uint64_t u;
	int c;

	*o = (struct gen_opts){
		.size = 64, .duration = 1.0, .burst = 32, .gso = 1, .seq_offset = 0,
		.seq_bytes = 8, .sndbuf = 4 << 20,
	};
	o->src.sin_family = AF_INET;
	while ((c = getopt_long(argc, argv, "d:b:s:t:n:r:B:g:T:o:w:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (!parse_addr(optarg, true, &o->dst))
				return bad_arg("--dst", optarg);
			have_dst = true;
			break;
		case 'b':
			if (!parse_addr(optarg, false, &o->src))
				return bad_arg("--bind", optarg);
			o->bind_src = true;
			break;
		case 's':
			if (!parse_u64(optarg, GEN_MAX_PAYLOAD, &u) || u == 0)
				return bad_arg("--size", optarg);
			o->size = (uint32_t)u;
			break;
		case 't':
			if (!parse_double(optarg, 86400, &o->duration))
				return bad_arg("--duration", optarg);
			break;
		case 'n':
			if (!parse_u64(optarg, UINT64_MAX, &o->count))
				return bad_arg("--count", optarg);
			break;
		case 'r':
			if (!parse_double(optarg, 1e9, &o->rate))
				return bad_arg("--rate", optarg);
			break;
		case 'B':
			if (!parse_u64(optarg, GEN_MAX_BURST, &u) || u == 0)
				return bad_arg("--burst", optarg);
			o->burst = (uint32_t)u;
			break;
		case 'g':
			if (!parse_u64(optarg, GEN_MAX_GSO, &u) || u == 0)
				return bad_arg("--gso", optarg);
			o->gso = (uint32_t)u;
			break;
		case 'T':
			o->template_path = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "none") == 0) {
				o->seq_offset = -1;
			} else {
				if (!parse_u64(optarg, GEN_MAX_PAYLOAD, &u))
					return bad_arg("--seq-offset", optarg);
				o->seq_offset = (long)u;
			}
			break;
		case 'w':
			if (!parse_u64(optarg, 8, &u) || (u != 4 && u != 8))
				return bad_arg("--seq-bytes", optarg);
			o->seq_bytes = (uint32_t)u;
			break;
		case 1:
			if (!parse_u64(optarg, UINT64_MAX, &o->seq_start))
				return bad_arg("--seq-start", optarg);
			break;
		case 2:
			if (!parse_u64(optarg, INT_MAX, &u))
				return bad_arg("--sndbuf", optarg);
			o->sndbuf = (int)u;
			break;
		case 3:
			if (!parse_u64(optarg, 86400, &u) || u == 0)
				return bad_arg("--alarm", optarg);
			o->alarm_s = (unsigned)u;
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
	if (!have_dst)
		return bad_arg("--dst", "(missing)");
	if (o->duration == 0 && o->count == 0)
		return bad_arg("limits", "need --duration > 0 or --count > 0");
	if (o->gso > 1 && (uint64_t)o->gso * o->size > GEN_GSO_BYTES)
		return bad_arg("--gso", "--gso x --size must stay under 65000 bytes");
	if (o->seq_offset >= 0 && (uint64_t)o->seq_offset + o->seq_bytes > o->size)
		return bad_arg("--seq-offset", "sequence number does not fit in --size");
	if (o->alarm_s == 0) {
		double lim = o->duration > 0 ? o->duration : 3600;

		o->alarm_s = (unsigned)ceil(lim) + 10;
	}
	return 0;
}

/* Fill buf (size bytes) from the template file, repeating it, or with a
 * recognisable pattern when there is none. 0 or -1 with a message. */
static int fill_payload(const struct gen_opts *o, uint8_t *buf)
{
	uint8_t tmpl[GEN_MAX_PAYLOAD];
	ssize_t n;
	size_t len = 0;
	int fd;

	if (!o->template_path) {
		for (uint32_t i = 0; i < o->size; i++)
			buf[i] = (uint8_t)(0xa5 ^ i);
		return 0;
	}
	fd = open(o->template_path, O_RDONLY);
	if (fd < 0) {
		fprintf(stderr, "udpgen: %s: %s\n", o->template_path, strerror(errno));
		return -1;
	}
	while (len < sizeof(tmpl) && (n = read(fd, tmpl + len, sizeof(tmpl) - len)) > 0)
		len += (size_t)n;
	close(fd);
	if (len == 0) {
		fprintf(stderr, "udpgen: %s: empty template\n", o->template_path);
		return -1;
	}
	for (uint32_t i = 0; i < o->size; i++)
		buf[i] = tmpl[i % len];
	return 0;
}

static void put_seq(uint8_t *p, uint32_t bytes, uint64_t seq)
{
	for (uint32_t i = 0; i < bytes; i++)
		p[i] = (uint8_t)(seq >> (8 * (bytes - 1 - i)));
}

static int open_socket(const struct gen_opts *o)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0) {
		perror("udpgen: socket");
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &o->sndbuf, sizeof(o->sndbuf)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o->sndbuf, sizeof(o->sndbuf));
	if (o->bind_src && bind(fd, (const struct sockaddr *)&o->src, sizeof(o->src)) < 0) {
		perror("udpgen: bind");
		goto err_close;
	}
	if (o->gso > 1) {
		int seg = (int)o->size;

		if (setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) < 0) {
			perror("udpgen: UDP_SEGMENT");
			goto err_close;
		}
	}
	if (connect(fd, (const struct sockaddr *)&o->dst, sizeof(o->dst)) < 0) {
		perror("udpgen: connect");
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

/* Sleep until time t (monotonic seconds), spinning for the last 50 us. */
static void wait_until(double t)
{
	double d = t - now_s();

	if (d > 100e-6) {
		struct timespec ts = { 0, (long)((d - 50e-6) * 1e9) };

		nanosleep(&ts, NULL);
	}
	while (now_s() < t && !gen_stop)
		;
}

int main(int argc, char **argv)
{
	struct gen_opts o;
	struct mmsghdr *msgs = NULL;
	struct iovec *iov = NULL;
	uint8_t *bufs = NULL;
	uint64_t sent = 0, errors = 0;
	uint32_t max_pkts;
	double t0, t_end, elapsed;
	char dst[INET_ADDRSTRLEN];
	int rc, fd, ret = 1;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	signal(SIGALRM, on_alarm);
	alarm(o.alarm_s);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);
	signal(SIGPIPE, SIG_IGN);
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	/* Datagram k of a send is at bufs + k * size; message i carries
	 * datagrams i*gso .. i*gso+gso-1 (contiguous, as UDP_SEGMENT wants). */
	max_pkts = o.burst * o.gso;
	msgs = calloc(o.burst, sizeof(*msgs));
	iov = calloc(o.burst, sizeof(*iov));
	bufs = malloc((size_t)max_pkts * o.size);
	if (!msgs || !iov || !bufs) {
		fprintf(stderr, "udpgen: out of memory\n");
		goto out_free;
	}
	if (fill_payload(&o, bufs) < 0)
		goto out_free;
	for (uint32_t k = 1; k < max_pkts; k++)
		memcpy(bufs + (size_t)k * o.size, bufs, o.size);
	for (uint32_t i = 0; i < o.burst; i++) {
		iov[i].iov_base = bufs + (size_t)i * o.gso * o.size;
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	fd = open_socket(&o);
	if (fd < 0)
		goto out_free;

	inet_ntop(AF_INET, &o.dst.sin_addr, dst, sizeof(dst));
	if (!o.quiet)
		fprintf(stderr, "udpgen: sending %u B to %s:%u, burst %u x gso %u, rate %s%.0f, %gs%s\n",
			o.size, dst, ntohs(o.dst.sin_port), o.burst, o.gso, o.rate > 0 ? "" : "max ",
			o.rate, o.duration, o.count ? " or count" : "");
	t0 = now_s();
	t_end = o.duration > 0 ? t0 + o.duration : INFINITY;
	while (!gen_stop) {
		double now = now_s();
		uint32_t n = max_pkts, n_msgs;
		int r;

		if (now >= t_end)
			break;
		if (o.count) {
			if (sent >= o.count)
				break;
			if (o.count - sent < n)
				n = (uint32_t)(o.count - sent);
		}
		if (o.rate > 0) {
			double due = (now - t0) * o.rate - (double)sent;

			if (due < 1) {
				wait_until(t0 + (double)(sent + 1) / o.rate);
				continue;
			}
			if (due < n)
				n = (uint32_t)due;
		}
		if (o.seq_offset >= 0)
			for (uint32_t i = 0; i < n; i++)
				put_seq(bufs + (size_t)i * o.size + o.seq_offset, o.seq_bytes,
					o.seq_start + sent + i);
		n_msgs = (n + o.gso - 1) / o.gso;
		for (uint32_t i = 0; i < n_msgs; i++) {
			uint32_t left = n - i * o.gso;

			iov[i].iov_len = (size_t)(left < o.gso ? left : o.gso) * o.size;
		}
		r = sendmmsg(fd, msgs, n_msgs, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED) {
				errors++;
				continue;
			}
			perror("udpgen: sendmmsg");
			goto out_close;
		}
		for (int i = 0; i < r; i++)
			sent += iov[i].iov_len / o.size;
	}
	elapsed = now_s() - t0;
	printf("udpgen sent=%" PRIu64 " bytes=%" PRIu64 " send_errors=%" PRIu64
	       " elapsed_s=%.6f pps=%.0f mbps=%.3f\n",
	       sent, sent * o.size, errors, elapsed, (double)sent / elapsed,
	       (double)sent * o.size * 8 / elapsed / 1e6);
	fflush(stdout);
	ret = 0;

out_close:
	close(fd);
out_free:
	free(bufs);
	free(iov);
	free(msgs);
	return ret;
}
