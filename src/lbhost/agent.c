/*
 * agent.c — `innet lb agent`: runs beside one processing unit, measures how
 * loaded it is and tells the switch (P4Mite's server agent; docs/lb.md).
 *
 * Every interval_ms the agent sends the unit a burst of `burst` DNS queries
 * (probes, the same kind of request clients send), one after the other, and
 * times each answer: the latency a new request would see now, queueing
 * included. The burst's median is the sample, which filters this host's
 * scheduling hiccups (a probe delayed by a descheduled agent) while keeping
 * queueing delay, which lasts across the burst. A probe unanswered within
 * probe_timeout_ms counts as that latency; three in a row mark the unit
 * unavailable. Optionally it also reads the unit process's CPU time from
 * /proc/PID/stat.
 *
 *   samples ──▶ EWMA (alpha) ──▶ busy bit, with hysteresis:
 *                                  set   when ewma > busy_us (or CPU > busy_cpu_pct)
 *                                  clear when ewma < idle_us (and CPU < busy_cpu_pct - 10)
 *          ├──▶ base: the idle latency, the lowest sample, forgotten slowly
 *          │    (base grows by 1/BASE_FORGET per sample until a lower one comes)
 *          ├──▶ util = EWMA of 1 - base / sample, weight alpha per interval_ms
 *          │    the sample took (1 - (1 - alpha)^(sample / interval), >= alpha)
 *          │    level 0..255 = 255 * util   (max with 255 * CPU share)
 *          └──▶ window ring  ──▶ p99 of the last `window` samples (reported in logs)
 *
 * The level is a utilisation estimate: for a single-server queue with
 * service time S and utilisation rho, the mean latency is S / (1 - rho)
 * (M/M/1), so 1 - S / latency = rho; with deterministic service it is
 * rho / (2 - rho) (M/D/1), lower but rising with rho the same way. The
 * switch splits new connections in proportion to weight x (256 - level), the
 * units' remaining capacity (docs/lb.md), so the level must be comparable
 * across units of different speeds: latency relative to the unit's own idle
 * latency is, an absolute latency is not. A unit that becomes slower (its
 * idle latency rises) reads as loaded until the base has caught up, which
 * takes minutes (BASE_FORGET): its capacity did drop. The level averages
 * per-sample estimates (each in 0..1) rather than latencies, so a stalled
 * probe cannot hold it near 255 for many samples after it, as it would a
 * latency average; and it averages over time rather than samples: a probe
 * that took k intervals to answer stands for k samples (a saturated unit
 * answers rarely, and must not be averaged with its earlier idle samples
 * for seconds). One stray slow probe of a few intervals moves the level
 * only a little; one that times out moves it near 255 for a few samples.
 *
 * Reports (include/innet/lb.h, HMAC-SHA256 sealed) go to the switch's
 * report port:
 *   - at once when the busy bit or availability flips, or the level moved by
 *     LEVEL_STEP or more since the last report (rflags THRESHOLD);
 *   - otherwise every heartbeat_ms (rflags HEARTBEAT), so the switch can
 *     tell a silent agent (its unit is treated as down) from a quiet one.
 * Sequence numbers start at the wall clock in microseconds and go up by one
 * per report: nothing is persisted, yet a restarted agent continues above
 * its predecessor (unless it sends over a million reports a second).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lbhost/dns.h"
#include "lbhost/lbhost.h"

#define LEVEL_STEP        16     /* report when the level moved this much */
#define BASE_FORGET       4096.0 /* base latency grows by 1/BASE_FORGET per sample */
#define DOWN_AFTER_MISSES 3

void lbh_agent_defaults(struct lbh_agent_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->sw.sin_family = AF_INET;
	c->probe.sin_family = AF_INET;
	c->kind = INNET_LB_KIND_CPU;
	c->interval_ms = 20;
	c->heartbeat_ms = 500;
	c->busy_us = 2000;
	c->idle_us = 1000;
	c->probe_timeout_ms = 200;
	c->alpha = 0.3;
	c->window = 64;
	c->burst = 3;
	c->busy_cpu_pct = 0;
	c->qname = "probe.lb.test";
}

uint64_t lbh_agent_seq_start(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t us = (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
	return us ? us : 1;
}

int lbh_agent_model_init(struct lbh_agent_model *m, uint32_t window)
{
	memset(m, 0, sizeof(*m));
	if (window < 1)
		return -EINVAL;
	m->ring = calloc(window, sizeof(*m->ring));
	if (!m->ring)
		return -ENOMEM;
	m->window = window;
	m->ewma_us = -1;
	m->base_us = -1;
	m->util = -1;
	return 0;
}

void lbh_agent_model_fini(struct lbh_agent_model *m)
{
	free(m->ring);
	m->ring = NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

uint32_t lbh_agent_model_p99(const struct lbh_agent_model *m)
{
	if (m->n == 0)
		return 0;
	uint32_t tmp[1024], n = m->n < 1024 ? m->n : 1024;
	memcpy(tmp, m->ring, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_u32);
	uint32_t rank = (uint32_t)ceil(0.99 * n);
	return tmp[rank ? rank - 1 : 0];
}

bool lbh_agent_model_sample(struct lbh_agent_model *m, const struct lbh_agent_cfg *c, uint32_t lat_us,
			    double cpu_pct)
{
	m->ewma_us = m->ewma_us < 0 ? lat_us : c->alpha * lat_us + (1 - c->alpha) * m->ewma_us;
	/* The idle latency: the lowest sample (a scheduling hiccup only ever
	 * adds latency), slowly forgotten so a unit that became slower for good
	 * is eventually measured against its new speed. */
	if (m->base_us < 0 || lat_us < m->base_us * (1 + 1 / BASE_FORGET))
		m->base_us = lat_us;
	else
		m->base_us *= 1 + 1 / BASE_FORGET;
	m->ring[m->head] = lat_us;
	m->head = (m->head + 1) % m->window;
	if (m->n < m->window)
		m->n++;
	bool cpu_known = cpu_pct >= 0 && c->busy_cpu_pct > 0;
	bool was = m->busy;
	if (!m->busy) {
		if (m->ewma_us > c->busy_us || (cpu_known && cpu_pct > c->busy_cpu_pct))
			m->busy = true;
	} else {
		bool lat_ok = m->ewma_us < c->idle_us;
		bool cpu_ok = !cpu_known || cpu_pct < (double)c->busy_cpu_pct - 10;
		if (lat_ok && cpu_ok)
			m->busy = false;
	}
	double u = lat_us > 0 && m->base_us > 0 ? 1 - m->base_us / lat_us : 0;
	double k = c->interval_ms > 0 ? lat_us / (1000.0 * c->interval_ms) : 1;
	double a = k > 1 ? 1 - pow(1 - c->alpha, k) : c->alpha;
	m->util = m->util < 0 ? u : a * u + (1 - a) * m->util;
	double lv = 255.0 * m->util;
	if (cpu_known && 255.0 * cpu_pct / 100.0 > lv)
		lv = 255.0 * cpu_pct / 100.0;
	m->level = lv >= 255 ? 255 : lv <= 0 ? 0 : (uint8_t)lv;
	return m->busy != was;
}

/* CPU time (utime + stime, clock ticks) of pid, or -1. */
static long long proc_cpu_ticks(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Fields after the command name, which is in parentheses and may hold spaces. */
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	unsigned long long ut, st;
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* One probe: its latency in us, or the timeout (and *timed_out). */
static uint32_t probe_once(int fd, const struct lbh_agent_cfg *c, uint16_t id, bool *timed_out,
			   const volatile sig_atomic_t *stop)
{
	uint8_t q[LBH_DNS_MSG_MAX], r[LBH_DNS_MSG_MAX];
	*timed_out = false;
	int n = lbh_dns_build_query(q, sizeof(q), id, c->qname, LBH_DNS_TYPE_A, false);
	uint64_t t0 = innet_now_ns(), deadline = t0 + (uint64_t)c->probe_timeout_ms * 1000000ull;
	if (n < 0 || send(fd, q, (size_t)n, MSG_DONTWAIT) != n) {
		*timed_out = true;
		return c->probe_timeout_ms * 1000;
	}
	while (!*stop) {
		uint64_t now = innet_now_ns();
		if (now >= deadline)
			break;
		uint64_t dt = deadline - now;
		struct timespec ts = { (time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull) };
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (ppoll(&pfd, 1, &ts, NULL) <= 0)
			continue;
		ssize_t k;
		while ((k = recv(fd, r, sizeof(r), MSG_DONTWAIT)) >= 0) {
			struct lbh_dns_reply rep;
			if (lbh_dns_parse_reply(r, (size_t)k, &rep) == 0 && rep.id == id)
				return (uint32_t)((innet_now_ns() - t0) / 1000);
		}
	}
	*timed_out = true;
	return c->probe_timeout_ms * 1000;
}

static int open_udp(uint32_t bind_ip, const struct sockaddr_in *peer)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(bind_ip) };
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (const struct sockaddr *)peer, sizeof(*peer)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int lbh_agent_run(const struct lbh_agent_cfg *c, volatile sig_atomic_t *stop, struct lbh_agent_stats *st,
		  FILE *log, char *err, size_t errlen)
{
	memset(st, 0, sizeof(*st));
	if (c->interval_ms < 1 || c->heartbeat_ms < 1 || c->idle_us >= c->busy_us || c->probe_timeout_ms < 1 ||
	    !(c->alpha > 0 && c->alpha <= 1) || c->kind >= INNET_LB_KIND_COUNT || c->burst < 1 ||
	    c->burst > LBH_AGENT_MAX_BURST) {
		snprintf(err, errlen, "bad settings (need idle_us < busy_us, 0 < alpha <= 1, intervals >= 1 ms)");
		return -EINVAL;
	}
	struct lbh_agent_model m;
	int rc = lbh_agent_model_init(&m, c->window);
	if (rc) {
		snprintf(err, errlen, "window: %s", strerror(-rc));
		return rc;
	}
	int pfd = open_udp(c->bind_ip, &c->probe);
	if (pfd < 0) {
		rc = pfd;
		snprintf(err, errlen, "probe socket: %s", strerror(-rc));
		goto err_model;
	}
	int sfd = open_udp(c->bind_ip, &c->sw);
	if (sfd < 0) {
		rc = sfd;
		snprintf(err, errlen, "report socket: %s", strerror(-rc));
		goto err_probe;
	}
	uint64_t seq = lbh_agent_seq_start();
	uint64_t t0 = innet_now_ns();
	uint64_t end = c->duration_s > 0 ? t0 + (uint64_t)(c->duration_s * 1e9) : UINT64_MAX;
	uint64_t last_report = 0, next_probe = t0;
	bool reported = false, available = true, rep_busy = false;
	uint8_t rep_level = 0;
	uint32_t misses = 0;
	uint16_t id = (uint16_t)(seq & 0xffff);
	long long cpu_last = c->pid ? proc_cpu_ticks(c->pid) : -1;
	uint64_t cpu_t = t0;
	long hz = sysconf(_SC_CLK_TCK);
	if (log) {
		char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &c->probe.sin_addr, a, sizeof(a));
		inet_ntop(AF_INET, &c->sw.sin_addr, b, sizeof(b));
		fprintf(log, "innet lb agent: ready: server %u unit %u (%s) probing %s:%u, reporting to %s:%u\n",
			c->server, c->unit, c->kind == INNET_LB_KIND_ACCEL ? "accel" : "cpu", a,
			ntohs(c->probe.sin_port), b, ntohs(c->sw.sin_port));
		fflush(log);
	}
	while (!*stop) {
		uint64_t now = innet_now_ns();
		if (now >= end)
			break;
		if (now < next_probe) {
			uint64_t dt = next_probe - now;
			struct timespec ts = { (time_t)(dt / 1000000000ull), (long)(dt % 1000000000ull) };
			nanosleep(&ts, NULL);
			continue;
		}
		next_probe += (uint64_t)c->interval_ms * 1000000ull;
		if (next_probe < now)
			next_probe = now + (uint64_t)c->interval_ms * 1000000ull;
		/* A burst of probes, one after the other; the sample is their
		 * median: queueing delay persists across the burst, a stray
		 * scheduling hiccup on this host does not. A timeout ends the
		 * burst (the unit is not answering: no need to wait more). */
		uint32_t lats[LBH_AGENT_MAX_BURST], nl = 0;
		bool to = false;
		while (nl < c->burst && !to && !*stop) {
			lats[nl++] = probe_once(pfd, c, ++id, &to, stop);
			st->probes++;
		}
		if (*stop)
			break;
		qsort(lats, nl, sizeof(lats[0]), cmp_u32);
		uint32_t lat = lats[nl / 2];
		if (to) {
			lat = c->probe_timeout_ms * 1000;
			st->probe_timeouts++;
			misses++;
		} else {
			misses = 0;
		}
		double cpu = -1;
		if (c->pid) {
			long long ticks = proc_cpu_ticks(c->pid);
			uint64_t tn = innet_now_ns();
			if (ticks >= 0 && cpu_last >= 0 && tn > cpu_t && hz > 0)
				cpu = 100.0 * (double)(ticks - cpu_last) / (double)hz / ((double)(tn - cpu_t) / 1e9);
			cpu_last = ticks;
			cpu_t = tn;
		}
		bool flipped = lbh_agent_model_sample(&m, c, lat, cpu);
		if (flipped)
			st->busy_transitions++;
		bool avail_now = misses < DOWN_AFTER_MISSES;
		bool avail_flip = avail_now != available;
		available = avail_now;
		if ((flipped || avail_flip) && log) {
			fprintf(log, "innet lb agent: server %u unit %u %s%s (ewma %.0f us, idle %.0f us, p99 %u us, level %u%s)\n",
				c->server, c->unit, available ? "" : "unavailable, ", m.busy ? "busy" : "not busy",
				m.ewma_us, m.base_us, lbh_agent_model_p99(&m), m.level, cpu >= 0 ? ", cpu measured" : "");
			fflush(log);
		}
		now = innet_now_ns();
		uint16_t rflags = 0;
		int dl = (int)m.level - (int)rep_level;
		if (!reported || m.busy != rep_busy || avail_flip || dl >= LEVEL_STEP || dl <= -LEVEL_STEP)
			rflags |= INNET_LB_RF_THRESHOLD;
		if (now >= last_report + (uint64_t)c->heartbeat_ms * 1000000ull)
			rflags |= INNET_LB_RF_HEARTBEAT;
		if (!rflags)
			continue;
		struct innet_lb_report r = {
			.server = c->server,
			.unit = c->unit,
			.kind = c->kind,
			.state = (uint8_t)((available ? INNET_LB_ST_AVAILABLE : 0) | (m.busy ? INNET_LB_ST_BUSY : 0)),
			.load = available ? m.level : 255,
			.rflags = rflags,
			.seq = seq,
			.latency_us = (uint32_t)(m.ewma_us > 4e9 ? 4e9 : m.ewma_us),
		};
		uint8_t buf[INNET_LB_REPORT_LEN];
		int n = innet_lb_report_seal(&r, &c->key, buf, sizeof(buf));
		if (n < 0) {
			rc = -EINVAL;
			snprintf(err, errlen, "sealing a report: %s", innet_lb_err_name(n));
			break;
		}
		if (send(sfd, buf, (size_t)n, MSG_DONTWAIT) != n)
			st->send_errors++;
		st->last_seq = seq++;
		st->reports++;
		if (rflags & INNET_LB_RF_THRESHOLD)
			st->threshold_reports++;
		else
			st->heartbeats++;
		reported = true;
		rep_busy = m.busy;
		rep_level = m.level;
		last_report = now;
	}
	st->ewma_us = m.ewma_us < 0 ? 0 : (uint32_t)m.ewma_us;
	st->p99_us = lbh_agent_model_p99(&m);
	st->busy = m.busy;
	close(sfd);
err_probe:
	close(pfd);
err_model:
	lbh_agent_model_fini(&m);
	return rc;
}
