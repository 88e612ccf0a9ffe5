/*
 * rawrelay — the plain user-space UDP relay that innet's forwarding benchmark
 * compares the switch runtime against.
 *
 * One thread: recvmmsg a burst (up to --burst datagrams, blocking until at
 * least one) from a socket bound to --in, then send the same buffers to
 * --to from a second socket bound to --out, in one sendmmsg. No parsing, no
 * copies beyond the kernel's: this is the floor cost of moving a datagram
 * through user space with the socket API, which is what the runtime's port
 * layer also pays.
 *
 *    sender ──▶ [--in socket] ─ recvmmsg ─▶ buffers ─ sendmmsg ─▶ [--out socket] ──▶ --to
 *
 * UDP GSO on transmit, as the runtime does (src/targets/user/worker.c): a run of
 * equal-size datagrams of one burst (all go to --to) becomes ONE message whose
 * iovecs are the datagrams' buffers, with a UDP_SEGMENT control message
 * giving the size; the kernel splits it back into the same datagrams, in
 * order, for a fraction of the per-datagram cost. At most RELAY_GSO_SEGS
 * datagrams and RELAY_GSO_BYTES payload bytes per message (the runtime's
 * limits). A datagram of another size ends the run; a single datagram goes
 * without the control message. If the kernel refuses a GSO send (EIO: a
 * device without segmentation offload) its datagrams are sent one by one and
 * GSO stays off. --no-gso sends every datagram on its own (the relay as it
 * was before, for comparisons).
 *
 * Socket options match the runtime's: SO_RCVBUF/SO_SNDBUF of 4 MiB, with
 * SO_RCVBUFFORCE/SO_SNDBUFFORCE tried first. The transmit socket is not
 * connected (each message names its destination, as a switch port must,
 * since it sends to whoever the program picks); --connect connects it instead.
 *
 * Bounded: runs --duration seconds (default 60) or until SIGTERM/SIGINT, and
 * a hard alarm() kills it --alarm seconds after start. Prints
 * "rawrelay: ready ..." on stderr when both sockets are bound, and one line on
 * stdout at exit:
 *   rawrelay rx=N tx=N tx_errors=N rx_drops=N tx_msgs=N tx_gso=N gso=on|off elapsed_s=F
 * (rx_drops: datagrams the kernel dropped because the --in socket was full;
 * tx_msgs: messages handed to the kernel; tx_gso: datagrams sent inside
 * messages of two or more; gso: whether GSO was still on at the end.)
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <arpa/inet.h>
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

#define RELAY_MAX_BURST 1024u
#define RELAY_BUF 65536u
#define RELAY_GSO_SEGS 64u      /* datagrams per GSO message (UDP_MAX_SEGMENTS) */
#define RELAY_GSO_BYTES 65000u  /* and at most this many payload bytes */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

struct relay_opts {
	struct sockaddr_in in;    /* receive socket address */
	struct sockaddr_in out;   /* transmit socket address (port 0 = --in's port) */
	struct sockaddr_in to;    /* destination */
	uint32_t burst;           /* datagrams per recvmmsg/sendmmsg */
	double duration;          /* seconds; stop after (0 = until signal, alarm still applies) */
	int bufsize;              /* SO_RCVBUF / SO_SNDBUF bytes */
	bool connect_tx;          /* connect the transmit socket to --to */
	bool gso;                 /* coalesce equal-size runs with UDP_SEGMENT */
	unsigned alarm_s;         /* hard limit in seconds (0 = derived) */
	bool quiet;               /* no progress on stderr */
};

static volatile sig_atomic_t relay_stop;

static void on_stop(int sig)
{
	(void)sig;
	relay_stop = 1;
}

static void on_alarm(int sig)
{
	static const char msg[] = "rawrelay: hard time limit reached, exiting\n";
	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to do */
	}
	_exit(124);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rawrelay --in IP:PORT --out IP[:PORT] --to IP:PORT [options]\n"
		"  -i, --in IP:PORT         receive on this address (required)\n"
		"  -o, --out IP[:PORT]      send from this address (port defaults to --in's)\n"
		"  -d, --to IP:PORT         send to this address (required)\n"
		"  -B, --burst N            datagrams per recvmmsg/sendmmsg, 1..%u (default 32)\n"
		"  -t, --duration SEC       exit after SEC seconds (default 60; 0 = until signal)\n"
		"      --bufsize BYTES      SO_RCVBUF and SO_SNDBUF (default 4194304)\n"
		"      --connect            connect() the transmit socket to --to\n"
		"      --no-gso             send every datagram on its own (no UDP GSO)\n"
		"      --alarm SEC          hard kill after SEC s (default duration + 10, or 3600)\n"
		"  -q, --quiet              no progress messages on stderr\n"
		"  -h, --help               this text\n"
		"prints: rawrelay rx=N tx=N tx_errors=N rx_drops=N tx_msgs=N tx_gso=N gso=on|off elapsed_s=F\n",
		RELAY_MAX_BURST);
}

static int bad_arg(const char *what, const char *val)
{
	fprintf(stderr, "rawrelay: bad %s '%s'\n", what, val ? val : "");
	usage(stderr);
	return 2;
}

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

static int parse_opts(int argc, char **argv, struct relay_opts *o)
{
	static const struct option longopts[] = {
		{ "in", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "to", required_argument, NULL, 'd' },
		{ "burst", required_argument, NULL, 'B' },
		{ "duration", required_argument, NULL, 't' },
		{ "bufsize", required_argument, NULL, 1 },
		{ "connect", no_argument, NULL, 2 },
		{ "alarm", required_argument, NULL, 3 },
		{ "no-gso", no_argument, NULL, 4 },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_in = false, have_out = false, have_to = false;
	uint64_t u;
	char *end;
	int c;

	*o = (struct relay_opts){ .burst = 32, .duration = 60, .bufsize = 4 << 20,
				 .gso = true };
	while ((c = getopt_long(argc, argv, "i:o:d:B:t:qh", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			if (!parse_addr(optarg, true, &o->in))
				return bad_arg("--in", optarg);
			have_in = true;
			break;
		case 'o':
			if (!parse_addr(optarg, false, &o->out))
				return bad_arg("--out", optarg);
			have_out = true;
			break;
		case 'd':
			if (!parse_addr(optarg, true, &o->to))
				return bad_arg("--to", optarg);
			have_to = true;
			break;
		case 'B':
			if (!parse_u64(optarg, RELAY_MAX_BURST, &u) || u == 0)
				return bad_arg("--burst", optarg);
			o->burst = (uint32_t)u;
			break;
		case 't':
			errno = 0;
			o->duration = strtod(optarg, &end);
			if (errno || *end || end == optarg || !isfinite(o->duration) ||
			    o->duration < 0 || o->duration > 86400)
				return bad_arg("--duration", optarg);
			break;
		case 1:
			if (!parse_u64(optarg, INT_MAX, &u))
				return bad_arg("--bufsize", optarg);
			o->bufsize = (int)u;
			break;
		case 2:
			o->connect_tx = true;
			break;
		case 3:
			if (!parse_u64(optarg, 86400, &u) || u == 0)
				return bad_arg("--alarm", optarg);
			o->alarm_s = (unsigned)u;
			break;
		case 4:
			o->gso = false;
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
	if (!have_in || !have_out || !have_to)
		return bad_arg("arguments", "--in, --out and --to are required");
	if (o->out.sin_port == 0)
		o->out.sin_port = o->in.sin_port;
	if (o->alarm_s == 0)
		o->alarm_s = o->duration > 0 ? (unsigned)ceil(o->duration) + 10 : 3600;
	return 0;
}

/* A UDP socket bound to addr with the benchmark's buffer sizes. */
static int open_socket(const struct sockaddr_in *addr, int bufsize, bool rx)
{
	struct timeval tv = { 0, 100 * 1000 };
	int one = 1;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0) {
		perror("rawrelay: socket");
		return -1;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bufsize, sizeof(bufsize)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bufsize, sizeof(bufsize)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
	if (rx) {
		(void)setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
		/* Wake up now and then to notice a stop request or the deadline. */
		if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
			perror("rawrelay: SO_RCVTIMEO");
			goto err_close;
		}
	}
	if (bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) < 0) {
		char ip[INET_ADDRSTRLEN];

		inet_ntop(AF_INET, &addr->sin_addr, ip, sizeof(ip));
		fprintf(stderr, "rawrelay: bind %s:%u: %s\n", ip, ntohs(addr->sin_port),
			strerror(errno));
		goto err_close;
	}
	return fd;

err_close:
	close(fd);
	return -1;
}

/* The transmit side of one burst: the datagrams' iovecs (txiov[i] is
 * received datagram i) grouped into kernel messages. */
struct relay_tx {
	struct mmsghdr *msgs;      /* one per message */
	uint32_t *first;           /* first datagram of each message */
	uint32_t *count;           /* datagrams in it */
	uint8_t *ctl;              /* one UDP_SEGMENT control buffer per message */
	struct iovec *iov;         /* one per datagram: its buffer and length */
	const struct sockaddr_in *to; /* destination (NULL: connected socket) */
	bool gso;                  /* coalescing on (cleared for good on EIO) */
	uint64_t n_tx;             /* datagrams sent */
	uint64_t n_msgs;           /* messages the kernel accepted */
	uint64_t n_gso;            /* datagrams sent in messages of two or more */
	uint64_t errors;           /* datagrams not sent */
};

#define RELAY_CTL_LEN CMSG_SPACE(sizeof(uint16_t))

/* Group datagrams [0, n) into messages: a run of equal-size datagrams (at
 * most RELAY_GSO_SEGS and RELAY_GSO_BYTES) is one message with UDP_SEGMENT,
 * anything else one message per datagram. Returns the number of messages. */
static uint32_t relay_build(struct relay_tx *t, uint32_t n)
{
	uint32_t m = 0;

	for (uint32_t k = 0; k < n; m++) {
		uint32_t e = k + 1;
		size_t len = t->iov[k].iov_len;
		struct msghdr *mh = &t->msgs[m].msg_hdr;

		if (t->gso && len > 0)
			while (e < n && e - k < RELAY_GSO_SEGS && t->iov[e].iov_len == len &&
			       (e - k + 1) * len <= RELAY_GSO_BYTES)
				e++;
		*mh = (struct msghdr){
			.msg_name = (void *)t->to,
			.msg_namelen = t->to ? sizeof(*t->to) : 0,
			.msg_iov = &t->iov[k],
			.msg_iovlen = e - k,
		};
		if (e - k > 1) {
			struct cmsghdr *cm;
			uint16_t seg = (uint16_t)len;

			mh->msg_control = t->ctl + (size_t)m * RELAY_CTL_LEN;
			mh->msg_controllen = RELAY_CTL_LEN;
			cm = CMSG_FIRSTHDR(mh);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
		}
		t->first[m] = k;
		t->count[m] = e - k;
		k = e;
	}
	return m;
}

/* A GSO message the kernel refused: its datagrams one by one, GSO off. */
static void relay_send_singly(struct relay_tx *t, int fd, uint32_t m)
{
	t->gso = false;
	for (uint32_t k = t->first[m]; k < t->first[m] + t->count[m]; k++) {
		struct msghdr mh = {
			.msg_name = (void *)t->to,
			.msg_namelen = t->to ? sizeof(*t->to) : 0,
			.msg_iov = &t->iov[k],
			.msg_iovlen = 1,
		};

		if (sendmsg(fd, &mh, 0) < 0) {
			t->errors++;
		} else {
			t->n_tx++;
			t->n_msgs++;
		}
	}
}

/* Send datagrams [0, n) of the burst: one sendmmsg (more if the kernel
 * takes part of it). A message the kernel refuses is dropped (ENOBUFS,
 * ECONNREFUSED on a connected socket, ...), or resent singly (EIO on GSO). */
static void relay_send(struct relay_tx *t, int fd, uint32_t n)
{
	uint32_t m = relay_build(t, n), s = 0;

	while (s < m) {
		int r = sendmmsg(fd, t->msgs + s, m - s, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EIO && t->count[s] > 1)
				relay_send_singly(t, fd, s);
			else
				t->errors += t->count[s];
			s++;
			continue;
		}
		for (int i = 0; i < r; i++) {
			uint32_t c = t->count[s + (uint32_t)i];

			t->n_tx += c;
			if (c > 1)
				t->n_gso += c;
		}
		t->n_msgs += (uint64_t)r;
		s += (uint32_t)r;
	}
}

int main(int argc, char **argv)
{
	struct relay_opts o;
	struct mmsghdr *rx = NULL;
	struct iovec *iov = NULL;
	uint8_t *bufs = NULL, *ctl = NULL;
	struct relay_tx t = { 0 };
	const size_t ctl_len = CMSG_SPACE(sizeof(uint32_t));
	uint64_t n_rx = 0, rx_drops = 0;
	double t0, t_end;
	int rc, rfd = -1, tfd = -1, ret = 1;
	int got_rcv = 0, got_snd = 0;
	socklen_t len;

	rc = parse_opts(argc, argv, &o);
	if (rc)
		return rc;
	signal(SIGALRM, on_alarm);
	alarm(o.alarm_s);
	signal(SIGTERM, on_stop);
	signal(SIGINT, on_stop);

	rx = calloc(o.burst, sizeof(*rx));
	iov = calloc(o.burst, sizeof(*iov));
	bufs = malloc((size_t)o.burst * RELAY_BUF);
	ctl = calloc(o.burst, ctl_len);
	t.msgs = calloc(o.burst, sizeof(*t.msgs));
	t.first = calloc(o.burst, sizeof(*t.first));
	t.count = calloc(o.burst, sizeof(*t.count));
	t.ctl = calloc(o.burst, RELAY_CTL_LEN);
	t.iov = calloc(o.burst, sizeof(*t.iov));
	if (!rx || !iov || !bufs || !ctl || !t.msgs || !t.first || !t.count || !t.ctl || !t.iov) {
		fprintf(stderr, "rawrelay: out of memory\n");
		goto out_free;
	}
	t.to = o.connect_tx ? NULL : &o.to;
	t.gso = o.gso;
	for (uint32_t i = 0; i < o.burst; i++) {
		iov[i].iov_base = bufs + (size_t)i * RELAY_BUF;
		iov[i].iov_len = RELAY_BUF;
		t.iov[i].iov_base = iov[i].iov_base;
	}
	rfd = open_socket(&o.in, o.bufsize, true);
	if (rfd < 0)
		goto out_free;
	tfd = open_socket(&o.out, o.bufsize, false);
	if (tfd < 0)
		goto out_close;
	if (o.connect_tx && connect(tfd, (const struct sockaddr *)&o.to, sizeof(o.to)) < 0) {
		perror("rawrelay: connect");
		goto out_close;
	}
	len = sizeof(got_rcv);
	getsockopt(rfd, SOL_SOCKET, SO_RCVBUF, &got_rcv, &len);
	len = sizeof(got_snd);
	getsockopt(tfd, SOL_SOCKET, SO_SNDBUF, &got_snd, &len);
	if (!o.quiet)
		fprintf(stderr, "rawrelay: ready burst=%u rcvbuf=%d sndbuf=%d gso=%s%s\n", o.burst,
			got_rcv, got_snd, o.gso ? "on" : "off", o.connect_tx ? " connected" : "");

	t0 = now_s();
	t_end = o.duration > 0 ? t0 + o.duration : INFINITY;
	while (!relay_stop) {
		int r;

		for (uint32_t i = 0; i < o.burst; i++) {
			rx[i].msg_hdr = (struct msghdr){
				.msg_iov = &iov[i], .msg_iovlen = 1,
				.msg_control = ctl + i * ctl_len, .msg_controllen = ctl_len,
			};
		}
		r = recvmmsg(rfd, rx, o.burst, MSG_WAITFORONE, NULL);
		if (r <= 0) {
			if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				perror("rawrelay: recvmmsg");
				goto out_close;
			}
			if (now_s() >= t_end)
				break;
			continue;
		}
		n_rx += (uint64_t)r;
		for (int i = 0; i < r; i++) {
			struct cmsghdr *cm = CMSG_FIRSTHDR(&rx[i].msg_hdr);

			t.iov[i].iov_len = rx[i].msg_len;
			if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SO_RXQ_OVFL) {
				uint32_t d;

				memcpy(&d, CMSG_DATA(cm), sizeof(d));
				if (d > rx_drops)
					rx_drops = d;
			}
		}
		relay_send(&t, tfd, (uint32_t)r);
		/* Checking the clock once per burst costs ~30 ns: negligible. */
		if (now_s() >= t_end)
			break;
	}
	printf("rawrelay rx=%" PRIu64 " tx=%" PRIu64 " tx_errors=%" PRIu64 " rx_drops=%" PRIu64
	       " tx_msgs=%" PRIu64 " tx_gso=%" PRIu64 " gso=%s elapsed_s=%.6f\n",
	       n_rx, t.n_tx, t.errors, rx_drops, t.n_msgs, t.n_gso, t.gso ? "on" : "off",
	       now_s() - t0);
	fflush(stdout);
	ret = 0;

out_close:
	if (tfd >= 0)
		close(tfd);
	close(rfd);
out_free:
	free(t.iov);
	free(t.ctl);
	free(t.count);
	free(t.first);
	free(t.msgs);
	free(ctl);
	free(bufs);
	free(iov);
	free(rx);
	return ret;
}
