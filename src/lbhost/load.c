/*
 * load.c — `innet lb load`: an open-loop DNS load generator that does not
 * suffer from coordinated omission (docs/lb.md).
 *
 * Each of T threads owns F UDP sockets ("flows") and sends its share of the
 * rate R on a fixed schedule: query k of thread t is due at
 *
 *     start + (t + k * T) * 1e9 / R   nanoseconds,
 *
 * whatever happened to earlier queries. If the thread falls behind (the
 * machine is busy), it sends the overdue queries at once, and each query's
 * latency is still measured from its *scheduled* time: a stall shows up as
 * latency, as a user would see it, instead of silently lowering the rate
 * (the "coordinated omission" of closed-loop clients). How far sending fell
 * behind is reported (max_lag).
 *
 * Matching: the DNS id is the query's sequence number mod 65536; a slot
 * table indexed by id remembers each outstanding query's scheduled time and
 * socket. A reply is matched by (socket, id); the oldest outstanding query
 * is retired once its timeout passes (lost), amortised O(1):
 *
 *   slots[65536]:  [ id ] -> { sched_ns, sock, state: FREE | WAIT | EXPIRED }
 *                     ^ oldest (first not yet retired)       ^ seq (next to send)
 *
 * Flows: the balancer pins a flow (5-tuple) to a unit. With flow_ms > 0 a
 * socket is replaced by a fresh one (a new source port: a new flow) after
 * that lifetime; the old socket is retired into a FIFO ring where it stays
 * open for timeout_ms to collect its replies (if the ring is full, the
 * oldest is closed early and counted). Sockets' lifetimes are staggered so
 * new flows arrive steadily. All sockets of a thread sit in one epoll set
 * (the event carries fd and flow index):
 *
 *   flows[F]:  fd (current)                retired ring: [fd, flow, until] ...
 *                   │ after flow_ms ──────────▶ tail            head ──▶ close at until
 *                   └ new socket
 *
 * Replies are counted per A-record address (the test backends answer with
 * an address naming the unit), which shows where the balancer sent them.
 * Latencies go into a per-thread log-linear histogram (innet/hist.h, 0.1 %
 * precision, up to 100 s), merged at the end. With a warm-up, queries
 * scheduled in its first warmup_s seconds are sent but not counted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lbhost/dns.h"
#include "lbhost/lbhost.h"

#define NSLOTS        65536u
#define MAX_FLOWS     1024u
#define HIST_MAX_NS   100000000000ull   /* 100 s */
#define SEND_BATCH    64                /* overdue sends before looking at replies */

enum { SLOT_FREE = 0, SLOT_WAIT, SLOT_EXPIRED };

struct lslot {
	uint64_t sched_ns;   /* scheduled send time */
	uint16_t sock;       /* flow index */
	uint8_t state;       /* SLOT_* */
	uint8_t measured;    /* scheduled after the warm-up: counted */
};

struct lflow {
	int fd;              /* current socket */
	uint64_t born_ns;    /* when fd was opened (staggered at start) */
};

struct lretired {
	int fd;              /* a replaced socket, still collecting replies */
	uint64_t until;      /* close it then */
};

struct lthread {
	const struct lbh_load_cfg *c;
	volatile sig_atomic_t *stop;
	uint32_t index;
	uint64_t start_ns, end_ns, interval_ns;
	uint64_t warm_ns;                      /* queries scheduled before are not counted */
	struct lflow *flows;
	struct lslot *slots;
	int epfd;                              /* every socket of the thread */
	struct lretired *ret;                  /* retired sockets, FIFO ring */
	uint32_t ret_cap, ret_head, ret_len;
	uint64_t seq, oldest;
	struct lbh_load_result r;              /* this thread's part (hist included) */
	_Atomic uint64_t p_sent, p_recv, p_lost;  /* progress, read by the main thread */
	_Atomic uint32_t p_addr[LBH_MAX_ANSWERS];
	_Atomic uint64_t p_count[LBH_MAX_ANSWERS];
	int rc;
	char err[128];
};

void lbh_load_defaults(struct lbh_load_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->target.sin_family = AF_INET;
	c->target.sin_port = htons(53);
	c->rate = 1000;
	c->duration_s = 5;
	c->threads = 1;
	c->flows = 16;
	c->timeout_ms = 1000;
}

static int open_flow(const struct lbh_load_cfg *c)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int buf = 1 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(c->bind_ip) };
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void count_answer(struct lthread *t, uint32_t addr)
{
	struct lbh_load_result *r = &t->r;
	if (addr) {
		for (uint32_t i = 0; i < r->nanswers; i++)
			if (r->answer_addr[i] == addr) {
				r->answer_count[i]++;
				atomic_fetch_add_explicit(&t->p_count[i], 1, memory_order_relaxed);
				return;
			}
		if (r->nanswers < LBH_MAX_ANSWERS) {
			uint32_t i = r->nanswers++;
			r->answer_addr[i] = addr;
			r->answer_count[i] = 1;
			atomic_store_explicit(&t->p_addr[i], addr, memory_order_relaxed);
			atomic_fetch_add_explicit(&t->p_count[i], 1, memory_order_relaxed);
			return;
		}
	}
	r->answer_other++;
}

static void send_one(struct lthread *t, uint64_t sched)
{
	const struct lbh_load_cfg *c = t->c;
	uint64_t k = t->seq++;
	struct lslot *s = &t->slots[k % NSLOTS];
	if (s->state == SLOT_WAIT && s->measured) { /* 65536 in flight: the oldest is lost */
		t->r.lost++;
		atomic_fetch_add_explicit(&t->p_lost, 1, memory_order_relaxed);
	}
	bool measured = sched >= t->warm_ns;
	s->state = SLOT_FREE;
	if (t->oldest + NSLOTS < t->seq)
		t->oldest = t->seq - NSLOTS;
	uint8_t buf[LBH_DNS_MSG_MAX];
	uint32_t fi = (uint32_t)(k % c->flows);
	int n = lbh_dns_build_query(buf, sizeof(buf), (uint16_t)(k % NSLOTS), c->qnames[k % c->nqnames],
				    LBH_DNS_TYPE_A, false);
	if (measured) {
		t->r.sent++;
		atomic_fetch_add_explicit(&t->p_sent, 1, memory_order_relaxed);
	}
	if (n < 0 || send(t->flows[fi].fd, buf, (size_t)n, MSG_DONTWAIT) != n) {
		if (measured) {
			t->r.send_errors++;
			t->r.lost++;
			atomic_fetch_add_explicit(&t->p_lost, 1, memory_order_relaxed);
		}
		return;
	}
	s->measured = measured;
	s->sched_ns = sched;
	s->sock = (uint16_t)fi;
	s->state = SLOT_WAIT;
}

static void receive(struct lthread *t, int fd, uint32_t fi)
{
	uint8_t buf[LBH_DNS_MSG_MAX];
	for (int i = 0; i < 256; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			return;
		uint64_t now = innet_now_ns();
		struct lbh_dns_reply rep;
		if (lbh_dns_parse_reply(buf, (size_t)n, &rep) != 0) {
			t->r.unmatched++;
			continue;
		}
		struct lslot *s = &t->slots[rep.id];
		if (s->sock != fi || s->state == SLOT_FREE) {
			t->r.unmatched++;
			continue;
		}
		if (s->state == SLOT_EXPIRED) {
			t->r.late += s->measured;
			s->state = SLOT_FREE;
			continue;
		}
		s->state = SLOT_FREE;
		if (!s->measured)
			continue;
		t->r.received++;
		t->r.rcode[rep.rcode & 0xf]++;
		atomic_fetch_add_explicit(&t->p_recv, 1, memory_order_relaxed);
		innet_hist_record(&t->r.hist, now > s->sched_ns ? now - s->sched_ns : 0);
		count_answer(t, rep.a_addr);
	}
}

/* Retire the oldest queries whose time is up. */
static void sweep(struct lthread *t, uint64_t now)
{
	uint64_t to = (uint64_t)t->c->timeout_ms * 1000000ull;
	while (t->oldest < t->seq) {
		struct lslot *s = &t->slots[t->oldest % NSLOTS];
		if (s->state == SLOT_WAIT) {
			if (s->sched_ns + to > now)
				break;
			s->state = SLOT_EXPIRED;
			if (s->measured) {
				t->r.lost++;
				atomic_fetch_add_explicit(&t->p_lost, 1, memory_order_relaxed);
			}
		}
		t->oldest++;
	}
}

/* A connected flow socket for flow fi, in the thread's epoll set. */
static int flow_socket(struct lthread *t, uint32_t fi)
{
	int fd = open_flow(t->c);
	if (fd < 0)
		return fd;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)fi << 32 | (uint32_t)fd };
	if (connect(fd, (const struct sockaddr *)&t->c->target, sizeof(t->c->target)) < 0 ||
	    epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int rotate(struct lthread *t, uint64_t now)
{
	const struct lbh_load_cfg *c = t->c;
	while (t->ret_len > 0 && t->ret[t->ret_head].until <= now) {
		close(t->ret[t->ret_head].fd);
		t->ret_head = (t->ret_head + 1) % t->ret_cap;
		t->ret_len--;
	}
	for (uint32_t i = 0; c->flow_ms && i < c->flows; i++) {
		struct lflow *f = &t->flows[i];
		if (now < f->born_ns + (uint64_t)c->flow_ms * 1000000ull)
			continue;
		int fd = flow_socket(t, i);
		if (fd < 0)
			return fd;
		if (t->ret_len == t->ret_cap) { /* full: close the oldest early */
			close(t->ret[t->ret_head].fd);
			t->ret_head = (t->ret_head + 1) % t->ret_cap;
			t->ret_len--;
			t->r.early_closes++;
		}
		t->ret[(t->ret_head + t->ret_len) % t->ret_cap] =
			(struct lretired){ .fd = f->fd, .until = now + (uint64_t)c->timeout_ms * 1000000ull };
		t->ret_len++;
		f->fd = fd;
		f->born_ns = now;
	}
	return 0;
}

static void *thread_main(void *p)
{
	struct lthread *t = p;
	const struct lbh_load_cfg *c = t->c;
	uint64_t next = t->start_ns + t->interval_ns * t->index / c->threads;
	uint64_t drain_end = 0, next_rotate = t->start_ns, to = (uint64_t)c->timeout_ms * 1000000ull;
	bool sending = true;
	for (;;) {
		uint64_t now = innet_now_ns();
		if (sending && (now >= t->end_ns || *t->stop)) {
			sending = false;
			drain_end = now + to;
		}
		if (sending) {
			for (int b = 0; b < SEND_BATCH && next <= now && next < t->end_ns; b++) {
				uint64_t lag = now - next;
				if (lag > t->r.max_lag_ns)
					t->r.max_lag_ns = lag;
				send_one(t, next);
				next += t->interval_ns;
			}
			if (now >= next_rotate) {
				t->rc = rotate(t, now);
				if (t->rc) {
					snprintf(t->err, sizeof(t->err), "opening a flow socket: %s", strerror(-t->rc));
					goto out;
				}
				next_rotate = now + 1000000ull; /* look again in 1 ms */
			}
		} else if (t->oldest >= t->seq || now >= drain_end) {
			break;
		}
		/* Wait for replies until the next send is due (at most 10 ms). */
		now = innet_now_ns();
		uint64_t wake = now + 10000000ull;
		if (sending && next < wake)
			wake = next;
		uint64_t dt = wake > now ? wake - now : 0;
		struct timespec ts = { (time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull) };
		struct epoll_event ev[64];
		int pr = epoll_pwait2(t->epfd, ev, 64, &ts, NULL);
		for (int i = 0; i < pr; i++)
			receive(t, (int)(uint32_t)ev[i].data.u64, (uint32_t)(ev[i].data.u64 >> 32));
		sweep(t, innet_now_ns());
	}
	/* Whatever is still outstanding is lost. */
	while (t->oldest < t->seq) {
		struct lslot *s = &t->slots[t->oldest % NSLOTS];
		if (s->state == SLOT_WAIT) {
			s->state = SLOT_EXPIRED;
			t->r.lost += s->measured;
		}
		t->oldest++;
	}
out:
	return NULL;
}

static void fmt_addr(uint32_t a, char *buf, size_t len)
{
	struct in_addr ia = { htonl(a) };
	inet_ntop(AF_INET, &ia, buf, (socklen_t)len);
}

static void progress(struct lthread *ts, uint32_t nt, double t_s, uint64_t *last, uint64_t last_cnt[][LBH_MAX_ANSWERS],
		     FILE *log)
{
	uint64_t sent = 0, recv = 0, lost = 0;
	uint32_t addrs[LBH_MAX_ANSWERS * LBH_MAX_THREADS];
	uint64_t cnts[LBH_MAX_ANSWERS * LBH_MAX_THREADS];
	uint32_t na = 0;
	for (uint32_t i = 0; i < nt; i++) {
		sent += atomic_load_explicit(&ts[i].p_sent, memory_order_relaxed);
		recv += atomic_load_explicit(&ts[i].p_recv, memory_order_relaxed);
		lost += atomic_load_explicit(&ts[i].p_lost, memory_order_relaxed);
		for (uint32_t j = 0; j < LBH_MAX_ANSWERS; j++) {
			uint32_t a = atomic_load_explicit(&ts[i].p_addr[j], memory_order_relaxed);
			uint64_t cnow = atomic_load_explicit(&ts[i].p_count[j], memory_order_relaxed);
			uint64_t d = cnow - last_cnt[i][j];
			last_cnt[i][j] = cnow;
			if (!a)
				continue;
			uint32_t k;
			for (k = 0; k < na && addrs[k] != a; k++)
				;
			if (k == na) {
				addrs[na] = a;
				cnts[na++] = 0;
			}
			cnts[k] += d;
		}
	}
	fprintf(log, "progress t=%.2f sent=%lu recv=%lu lost=%lu units=", t_s, (unsigned long)(sent - last[0]),
		(unsigned long)(recv - last[1]), (unsigned long)(lost - last[2]));
	for (uint32_t k = 0; k < na; k++) {
		char a[INET_ADDRSTRLEN];
		fmt_addr(addrs[k], a, sizeof(a));
		fprintf(log, "%s%s:%lu", k ? "," : "", a, (unsigned long)cnts[k]);
	}
	fprintf(log, "\n");
	fflush(log);
	last[0] = sent;
	last[1] = recv;
	last[2] = lost;
}

int lbh_load_run(const struct lbh_load_cfg *c, volatile sig_atomic_t *stop, struct lbh_load_result *r,
		 FILE *log, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	int rc = innet_hist_init(&r->hist, HIST_MAX_NS, INNET_HIST_DEFAULT_BITS);
	if (rc) {
		snprintf(err, errlen, "histogram: %s", strerror(-rc));
		return rc;
	}
	if (c->threads < 1 || c->threads > LBH_MAX_THREADS || c->flows < 1 || c->flows > MAX_FLOWS ||
	    !(c->rate > 0) || !(c->duration_s > 0) || c->nqnames < 1 || c->timeout_ms < 1) {
		snprintf(err, errlen, "bad settings (threads 1..%u, flows 1..%u, rate > 0, duration > 0)",
			 LBH_MAX_THREADS, MAX_FLOWS);
		return -EINVAL;
	}
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	struct lthread *ts = calloc(c->threads, sizeof(*ts));
	if (!ts) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	uint32_t nt = c->threads, made = 0, started = 0;
	uint64_t interval = (uint64_t)(1e9 * nt / c->rate);
	if (interval == 0)
		interval = 1;
	uint64_t start = innet_now_ns() + 20000000ull; /* 20 ms to set everything up */
	uint64_t warm = start + (uint64_t)(c->warmup_s * 1e9);
	uint64_t end = warm + (uint64_t)(c->duration_s * 1e9);
	/* Retired sockets stay open up to timeout_ms: allow as many files as we may. */
	struct rlimit rl;
	uint64_t max_retired = 4096;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		uint64_t per = rl.rlim_cur > 64 + (uint64_t)nt * c->flows ? (rl.rlim_cur - 64) / nt - c->flows : 1;
		if (per < max_retired)
			max_retired = per ? per : 1;
	}
	for (made = 0; made < nt;) {
		struct lthread *t = &ts[made];
		*t = (struct lthread){ .c = c, .stop = stop, .index = made, .start_ns = start, .end_ns = end,
				       .interval_ns = interval, .warm_ns = warm, .rc = 0 };
		t->flows = calloc(c->flows, sizeof(*t->flows));
		t->slots = calloc(NSLOTS, sizeof(*t->slots));
		/* Retired sockets: a flow_ms-old socket every flow_ms per flow, each kept timeout_ms. */
		uint64_t rc_cap = c->flow_ms ? (uint64_t)c->flows * (c->timeout_ms / c->flow_ms + 2) : 1;
		t->ret_cap = (uint32_t)(rc_cap < max_retired ? rc_cap : max_retired);
		t->ret = calloc(t->ret_cap ? t->ret_cap : 1, sizeof(*t->ret));
		t->epfd = epoll_create1(EPOLL_CLOEXEC);
		rc = (t->flows && t->slots && t->ret) ? innet_hist_init(&t->r.hist, HIST_MAX_NS, INNET_HIST_DEFAULT_BITS)
						      : -ENOMEM;
		if (!rc && t->epfd < 0)
			rc = -errno;
		for (uint32_t i = 0; i < c->flows && t->flows; i++)
			t->flows[i].fd = -1;
		made++;
		if (rc) {
			snprintf(err, errlen, "setting up thread %u: %s", made - 1, strerror(-rc));
			goto err_free_threads;
		}
		for (uint32_t i = 0; i < c->flows; i++) {
			struct lflow *f = &t->flows[i];
			f->fd = flow_socket(t, i);
			if (f->fd < 0) {
				rc = f->fd;
				snprintf(err, errlen, "flow socket: %s%s", strerror(-rc),
					 rc == -EMFILE ? " (too many open files: fewer --flows or a shorter --timeout-ms)" : "");
				goto err_free_threads;
			}
			/* Stagger lifetimes: flow i is "born" i/F of a lifetime ago. */
			f->born_ns = start - (uint64_t)c->flow_ms * 1000000ull * i / c->flows;
		}
	}
	pthread_t tids[LBH_MAX_THREADS];
	for (; started < nt; started++)
		if (pthread_create(&tids[started], NULL, thread_main, &ts[started]) != 0) {
			*stop = 1;
			rc = -EAGAIN;
			snprintf(err, errlen, "pthread_create failed");
			break;
		}
	if (c->report_ms && log && started == nt) {
		uint64_t last[3] = { 0 };
		uint64_t last_cnt[LBH_MAX_THREADS][LBH_MAX_ANSWERS];
		memset(last_cnt, 0, sizeof(last_cnt));
		uint64_t tick = start + (uint64_t)c->report_ms * 1000000ull;
		while (!*stop) {
			uint64_t now = innet_now_ns();
			if (now >= end + 1000000ull * c->timeout_ms)
				break;
			if (now < tick) {
				uint64_t dt = tick - now;
				struct timespec s = { (time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull) };
				nanosleep(&s, NULL);
				continue;
			}
			progress(ts, nt, (double)(tick - start) / 1e9, last, last_cnt, log);
			tick += (uint64_t)c->report_ms * 1000000ull;
			if (tick > end)
				break;
		}
	}
	for (uint32_t i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	r->elapsed_s = (double)(end - warm) / 1e9;
	for (uint32_t i = 0; i < nt; i++) {
		struct lthread *t = &ts[i];
		if (t->rc && !rc) {
			rc = t->rc;
			snprintf(err, errlen, "%s", t->err);
		}
		r->sent += t->r.sent;
		r->received += t->r.received;
		r->lost += t->r.lost;
		r->late += t->r.late;
		r->unmatched += t->r.unmatched;
		r->send_errors += t->r.send_errors;
		r->early_closes += t->r.early_closes;
		for (int k = 0; k < 16; k++)
			r->rcode[k] += t->r.rcode[k];
		if (t->r.max_lag_ns > r->max_lag_ns)
			r->max_lag_ns = t->r.max_lag_ns;
		r->answer_other += t->r.answer_other;
		for (uint32_t j = 0; j < t->r.nanswers; j++) {
			uint32_t k;
			for (k = 0; k < r->nanswers && r->answer_addr[k] != t->r.answer_addr[j]; k++)
				;
			if (k == r->nanswers) {
				if (r->nanswers == LBH_MAX_ANSWERS) {
					r->answer_other += t->r.answer_count[j];
					continue;
				}
				r->answer_addr[r->nanswers++] = t->r.answer_addr[j];
			}
			r->answer_count[k] += t->r.answer_count[j];
		}
		innet_hist_merge(&r->hist, &t->r.hist);
	}
	if (*stop && rc == 0) {
		uint64_t now = innet_now_ns();
		if (now < end)
			r->elapsed_s = now > warm ? (double)(now - warm) / 1e9 : 0;
	}
err_free_threads:
	for (uint32_t i = 0; i < made; i++) {
		struct lthread *t = &ts[i];
		for (uint32_t j = 0; t->flows && j < c->flows; j++)
			if (t->flows[j].fd >= 0)
				close(t->flows[j].fd);
		for (uint32_t j = 0; t->ret && j < t->ret_len; j++)
			close(t->ret[(t->ret_head + j) % t->ret_cap].fd);
		if (t->epfd >= 0)
			close(t->epfd);
		free(t->flows);
		free(t->slots);
		free(t->ret);
		innet_hist_fini(&t->r.hist);
	}
	free(ts);
	return rc;
}

void lbh_load_result_fini(struct lbh_load_result *r)
{
	innet_hist_fini(&r->hist);
}

void lbh_load_print(const struct lbh_load_cfg *c, const struct lbh_load_result *r, bool json, FILE *f)
{
	const struct innet_hist *h = &r->hist;
	double el = r->elapsed_s > 0 ? r->elapsed_s : 1;
	double us[6] = {
		innet_hist_percentile(h, 50) / 1e3, innet_hist_percentile(h, 90) / 1e3, innet_hist_percentile(h, 99) / 1e3,
		innet_hist_percentile(h, 99.9) / 1e3, h->max / 1e3, innet_hist_mean(h) / 1e3,
	};
	double loss = r->sent ? 100.0 * (double)r->lost / (double)r->sent : 0;
	char a[INET_ADDRSTRLEN];
	if (json) {
		fprintf(f, "{\"offered_qps\": %.1f, \"rate_qps\": %.1f, \"achieved_qps\": %.1f, \"sent\": %lu, "
			   "\"received\": %lu, \"lost\": %lu, \"loss_pct\": %.4f, \"late\": %lu, \"unmatched\": %lu, "
			   "\"send_errors\": %lu, \"early_closes\": %lu, \"noerror\": %lu, \"nxdomain\": %lu, \"other_rcode\": %lu, "
			   "\"p50_us\": %.1f, \"p90_us\": %.1f, \"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f, "
			   "\"mean_us\": %.1f, \"max_lag_us\": %.1f, \"elapsed_s\": %.3f, \"answers\": {",
			(double)r->sent / el, c->rate, (double)r->received / el, (unsigned long)r->sent,
			(unsigned long)r->received, (unsigned long)r->lost, loss, (unsigned long)r->late,
			(unsigned long)r->unmatched, (unsigned long)r->send_errors, (unsigned long)r->early_closes,
			(unsigned long)r->rcode[0], (unsigned long)r->rcode[3],
			(unsigned long)(r->received - r->rcode[0] - r->rcode[3]), us[0], us[1], us[2], us[3], us[4],
			us[5], r->max_lag_ns / 1e3, r->elapsed_s);
		for (uint32_t i = 0; i < r->nanswers; i++) {
			fmt_addr(r->answer_addr[i], a, sizeof(a));
			fprintf(f, "%s\"%s\": %lu", i ? ", " : "", a, (unsigned long)r->answer_count[i]);
		}
		fprintf(f, "%s\"other\": %lu}}\n", r->nanswers ? ", " : "", (unsigned long)r->answer_other);
		return;
	}
	fprintf(f, "sent %lu queries in %.2f s (%.0f/s offered, %.0f/s scheduled); %lu replies (%.0f/s), "
		   "%lu lost (%.3f %%), %lu late, %lu unmatched, %lu send errors, %lu flows closed early\n",
		(unsigned long)r->sent, r->elapsed_s, (double)r->sent / el, c->rate, (unsigned long)r->received,
		(double)r->received / el, (unsigned long)r->lost, loss, (unsigned long)r->late,
		(unsigned long)r->unmatched, (unsigned long)r->send_errors, (unsigned long)r->early_closes);
	fprintf(f, "latency from scheduled send (us): p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  "
		   "mean %.1f  (sender max lag %.1f us)\n",
		us[0], us[1], us[2], us[3], us[4], us[5], r->max_lag_ns / 1e3);
	fprintf(f, "rcodes: noerror %lu nxdomain %lu other %lu; answers by address:", (unsigned long)r->rcode[0],
		(unsigned long)r->rcode[3], (unsigned long)(r->received - r->rcode[0] - r->rcode[3]));
	for (uint32_t i = 0; i < r->nanswers; i++) {
		fmt_addr(r->answer_addr[i], a, sizeof(a));
		fprintf(f, " %s=%lu", a, (unsigned long)r->answer_count[i]);
	}
	fprintf(f, " other=%lu\n", (unsigned long)r->answer_other);
}
