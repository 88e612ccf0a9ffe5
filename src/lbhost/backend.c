/*
 * backend.c — `innet lb backend`: a UDP DNS service standing in for a
 * processing unit whose speed we choose (docs/lb.md).
 *
 * It answers every query for a name in its zone with one fixed A record,
 * NXDOMAIN for other names, NOTIMP for other opcodes and FORMERR for a
 * query it cannot parse; datagrams under 12 bytes and responses are counted
 * drops. The A record's address identifies the unit, so a client can tell
 * which unit answered (`innet lb load` counts replies per address).
 *
 * Capacity model (service_us > 0, or a busy file): one server, FIFO, a
 * bounded queue — a single-server queue as a slow accelerator behaves:
 *
 *    recv ──▶ [ q0 | q1 | ... | q(queue-1) ] ──▶ "server" ──▶ reply
 *              done(i) = max(arrival(i), done(i-1)) + service
 *
 * A request is answered when the clock reaches its done time; a request
 * that finds the queue full is dropped (counted). The unit therefore
 * serves at most 1e6/service_us requests per second whatever is offered,
 * and its latency grows with its queue — not "sleep per packet", which
 * would block receiving and let the kernel's socket buffer be the queue.
 * The service time is virtual (no CPU is burnt), like an accelerator's.
 * While busy_file exists (checked every 100 ms) the service time is
 * busy_service_us: a test makes a unit slow without restarting it.
 *
 * Fast mode (service_us 0, no busy file): `threads` threads, each with its
 * own SO_REUSEPORT socket, answer bursts of up to 32 with recvmmsg/sendmmsg.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lbhost/dns.h"
#include "lbhost/lbhost.h"

#define BURST 32

void lbh_backend_defaults(struct lbh_backend_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->bind.sin_family = AF_INET;
	c->bind.sin_port = htons(5353);
	c->bind.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c->queue = 256;
	c->threads = 1;
	c->zone = "lb.test";
	c->answer = 0xc0000201; /* 192.0.2.1 */
	c->ttl = 60;
}

int lbh_backend_answer(const struct lbh_backend_cfg *c, const uint8_t *req, size_t len, uint8_t *out,
		       struct lbh_backend_stats *st)
{
	struct lbh_dns_question q;
	int rc = lbh_dns_parse_question(req, len, &q);
	if (len < LBH_DNS_HDR_LEN || (q.flags & LBH_DNS_QR)) {
		st->drop_malformed++;
		return 0;
	}
	if (LBH_DNS_OPCODE(q.flags) != 0) {
		st->notimp++;
		int n = lbh_dns_build_formerr(req, out, LBH_DNS_MSG_MAX);
		out[3] = (uint8_t)((out[3] & 0xf0) | LBH_DNS_NOTIMP);
		return n;
	}
	if (rc != 0) {
		st->formerr++;
		return lbh_dns_build_formerr(req, out, LBH_DNS_MSG_MAX);
	}
	if (!lbh_dns_in_zone(q.name, c->zone)) {
		st->nxdomain++;
		return lbh_dns_build_answer(req, &q, out, LBH_DNS_MSG_MAX, LBH_DNS_NXDOMAIN, 0, 0);
	}
	st->answered++;
	bool a = (q.qtype == LBH_DNS_TYPE_A || q.qtype == LBH_DNS_TYPE_ANY) && q.qclass == LBH_DNS_CLASS_IN;
	rc = lbh_dns_build_answer(req, &q, out, LBH_DNS_MSG_MAX, LBH_DNS_NOERROR, a ? c->answer : 0, c->ttl);
	return rc > 0 ? rc : 0;
}

static int open_socket(const struct lbh_backend_cfg *c, bool reuseport, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	int one = 1, buf = 4 << 20;
	if (reuseport)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(fd, (const struct sockaddr *)&c->bind, sizeof(c->bind)) < 0) {
		int e = errno;
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &c->bind.sin_addr, a, sizeof(a));
		snprintf(err, errlen, "bind %s:%u: %s", a, ntohs(c->bind.sin_port), strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

static bool file_exists(const char *p)
{
	struct stat sb;
	return stat(p, &sb) == 0;
}

/* ---------------------------------------------------------------------- */
/* The queueing server                                                      */

struct qent {
	uint64_t done_ns;              /* when the server finishes it */
	struct sockaddr_in peer;       /* who asked */
	uint16_t len;                  /* request bytes */
	uint8_t buf[LBH_DNS_MSG_MAX];  /* the request */
};

static int run_queue(const struct lbh_backend_cfg *c, int fd, volatile sig_atomic_t *stop,
		     struct lbh_backend_stats *st, FILE *log)
{
	struct qent *q = calloc(c->queue, sizeof(*q));
	if (!q)
		return -ENOMEM;
	uint32_t head = 0, len = 0;
	uint64_t t0 = innet_now_ns(), end = c->duration_s > 0 ? t0 + (uint64_t)(c->duration_s * 1e9) : UINT64_MAX;
	uint64_t last_done = 0, next_check = 0;
	bool busy = false;
	uint64_t service_ns = (uint64_t)c->service_us * 1000;
	uint8_t out[LBH_DNS_MSG_MAX];

	while (!*stop) {
		uint64_t now = innet_now_ns();
		if (now >= end)
			break;
		if (c->busy_file && now >= next_check) {
			bool b = file_exists(c->busy_file);
			if (b != busy && log)
				fprintf(log, "innet lb backend: %s (service %u us)\n", b ? "busy" : "not busy",
					b ? c->busy_service_us : c->service_us);
			busy = b;
			service_ns = (uint64_t)(busy ? c->busy_service_us : c->service_us) * 1000;
			next_check = now + 100000000ull;
		}
		/* Serve what is done. */
		while (len > 0 && q[head].done_ns <= now) {
			struct qent *e = &q[head];
			int n = lbh_backend_answer(c, e->buf, e->len, out, st);
			if (n > 0 && sendto(fd, out, (size_t)n, MSG_DONTWAIT, (struct sockaddr *)&e->peer,
					    sizeof(e->peer)) < 0)
				st->tx_errors++;
			head = (head + 1) % c->queue;
			len--;
		}
		/* Sleep until the next completion, a datagram, or a check. */
		uint64_t wake = now + 100000000ull;
		if (len > 0 && q[head].done_ns < wake)
			wake = q[head].done_ns;
		if (c->busy_file && next_check < wake)
			wake = next_check;
		if (end < wake)
			wake = end;
		uint64_t dt = wake > now ? wake - now : 0;
		struct timespec ts = { (time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull) };
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int pr = ppoll(&pfd, 1, &ts, NULL);
		if (pr <= 0)
			continue;
		/* Take what arrived, each into the queue with its done time. */
		for (int i = 0; i < 256; i++) {
			struct qent tmp;
			socklen_t sl = sizeof(tmp.peer);
			ssize_t n = recvfrom(fd, tmp.buf, sizeof(tmp.buf), MSG_DONTWAIT, (struct sockaddr *)&tmp.peer,
					     &sl);
			if (n < 0)
				break;
			st->rx++;
			if (len == c->queue) {
				st->drop_queue_full++;
				continue;
			}
			uint64_t arr = innet_now_ns();
			uint64_t start = last_done > arr ? last_done : arr;
			struct qent *e = &q[(head + len) % c->queue];
			*e = tmp;
			e->len = (uint16_t)n;
			e->done_ns = start + service_ns;
			last_done = e->done_ns;
			len++;
			if (len > st->max_queue)
				st->max_queue = len;
		}
	}
	free(q);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* The fast server                                                          */

struct fast_arg {
	const struct lbh_backend_cfg *c;
	int fd;
	volatile sig_atomic_t *stop;
	uint64_t end;
	struct lbh_backend_stats st;
};

static void *run_fast(void *p)
{
	struct fast_arg *a = p;
	static __thread uint8_t in[BURST][LBH_DNS_MSG_MAX], out[BURST][LBH_DNS_MSG_MAX];
	struct mmsghdr rm[BURST], sm[BURST];
	struct iovec riov[BURST], siov[BURST];
	struct sockaddr_in peers[BURST];
	while (!*a->stop && innet_now_ns() < a->end) {
		struct pollfd pfd = { .fd = a->fd, .events = POLLIN };
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		for (int i = 0; i < BURST; i++) {
			riov[i] = (struct iovec){ in[i], sizeof(in[i]) };
			rm[i].msg_hdr = (struct msghdr){ .msg_name = &peers[i], .msg_namelen = sizeof(peers[i]),
							 .msg_iov = &riov[i], .msg_iovlen = 1 };
		}
		int n = recvmmsg(a->fd, rm, BURST, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		int k = 0;
		for (int i = 0; i < n; i++) {
			a->st.rx++;
			int l = lbh_backend_answer(a->c, in[i], rm[i].msg_len, out[k], &a->st);
			if (l <= 0)
				continue;
			siov[k] = (struct iovec){ out[k], (size_t)l };
			sm[k].msg_hdr = (struct msghdr){ .msg_name = &peers[i], .msg_namelen = sizeof(peers[i]),
							 .msg_iov = &siov[k], .msg_iovlen = 1 };
			k++;
		}
		int off = 0;
		while (off < k) {
			int s = sendmmsg(a->fd, sm + off, (unsigned)(k - off), MSG_DONTWAIT);
			if (s <= 0) {
				a->st.tx_errors += (uint64_t)(k - off);
				break;
			}
			off += s;
		}
	}
	return NULL;
}

static void add_stats(struct lbh_backend_stats *d, const struct lbh_backend_stats *s)
{
	d->rx += s->rx;
	d->answered += s->answered;
	d->nxdomain += s->nxdomain;
	d->formerr += s->formerr;
	d->notimp += s->notimp;
	d->drop_malformed += s->drop_malformed;
	d->drop_queue_full += s->drop_queue_full;
	d->tx_errors += s->tx_errors;
	if (s->max_queue > d->max_queue)
		d->max_queue = s->max_queue;
}

int lbh_backend_run(const struct lbh_backend_cfg *c, volatile sig_atomic_t *stop,
		    struct lbh_backend_stats *st, FILE *log, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (c->threads < 1 || c->threads > LBH_MAX_THREADS || c->queue < 1) {
		snprintf(err, errlen, "threads must be 1..%u and queue >= 1", LBH_MAX_THREADS);
		return -EINVAL;
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* ppoll wakes within ~4 us, not ~50 */
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &c->bind.sin_addr, a, sizeof(a));
	bool queued = c->service_us > 0 || c->busy_file;
	if (queued) {
		int fd = open_socket(c, false, err, errlen);
		if (fd < 0)
			return fd;
		if (log) {
			fprintf(log, "innet lb backend: ready on %s:%u (service %u us, queue %u%s%s)\n", a,
				ntohs(c->bind.sin_port), c->service_us, c->queue, c->busy_file ? ", busy file " : "",
				c->busy_file ? c->busy_file : "");
			fflush(log);
		}
		int rc = run_queue(c, fd, stop, st, log);
		close(fd);
		if (rc)
			snprintf(err, errlen, "%s", strerror(-rc));
		return rc;
	}
	struct fast_arg args[LBH_MAX_THREADS];
	pthread_t tids[LBH_MAX_THREADS];
	uint64_t end = c->duration_s > 0 ? innet_now_ns() + (uint64_t)(c->duration_s * 1e9) : UINT64_MAX;
	uint32_t i;
	int rc = 0;
	for (i = 0; i < c->threads; i++) {
		args[i] = (struct fast_arg){ .c = c, .stop = stop, .end = end };
		args[i].fd = open_socket(c, true, err, errlen);
		if (args[i].fd < 0) {
			rc = args[i].fd;
			break;
		}
	}
	if (rc) {
		while (i-- > 0)
			close(args[i].fd);
		return rc;
	}
	if (log) {
		fprintf(log, "innet lb backend: ready on %s:%u (fast, %u threads)\n", a, ntohs(c->bind.sin_port),
			c->threads);
		fflush(log);
	}
	uint32_t started = 0;
	for (i = 0; i < c->threads; i++) {
		if (pthread_create(&tids[i], NULL, run_fast, &args[i]) != 0) {
			*stop = 1; /* let the ones running end */
			rc = -EAGAIN;
			snprintf(err, errlen, "pthread_create failed");
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < c->threads; i++) {
		add_stats(st, &args[i].st);
		close(args[i].fd);
	}
	return rc;
}
