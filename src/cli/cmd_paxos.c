/*
 * cmd_paxos.c — `innet paxos`: the consensus roles as ordinary host processes
 * (the host-based baseline) and a load generator for both deployments.
 *
 *   innet paxos acceptor --bind IP:PORT --id N --learner IP:PORT... [--ring N]
 *       a host acceptor (src/consensus/hostacc.c), same protocol as the switch
 *   innet paxos leader --bind IP:PORT --acceptor IP:PORT... [--active] [--id N]
 *       a host coordinator (src/consensus/leader.c): --active orders requests
 *       at once (after phase 1); without it, a backup that takes over on the
 *       first request
 *   innet paxos bench (--topology FILE --name HOST |
 *                      --bind IP:PORT --coordinator IP:PORT --acceptor IP:PORT...)
 *                     [--duration S] [--outstanding W] [--size B]
 *                     [--learner-filter IFACE[,IFACE...]|all [--filter-mode M]]
 *       proposer + learner: W requests in flight (W client ids, one each, as
 *       KV connections), for S seconds; prints
 *       "cmds_per_s=X p50_us=Y p99_us=Z timeouts=N" as its last line.
 *       --learner-filter (root) attaches the learner filter
 *       (src/consensus/learnfilter.bpf.c, XDP) to the learner's interfaces
 *       for the run (in its namespace with --topology): mode quorum (default)
 *       passes one 2B per quorum, marked, and the learner trusts the mark;
 *       mode redundant only drops the 2Bs after a quorum. Its counters go to
 *       stderr at the end ("learner_filter seen=..."); it is detached on exit
 *       (also after SIGINT/SIGTERM), the interfaces' programs put back.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "consensus/hostacc.h"
#include "consensus/kv.h"
#include "consensus/learnfilter.h"
#include "consensus/wire.h"
#include "innet/parse.h"
#include "innet/consensus.h"
#include "innet/hist.h"
#include "innet/topology.h"
#include "cli/cmds.h"

static volatile sig_atomic_t px_stop;

static void px_on_signal(int sig)
{
	px_stop = 1;
}

static void px_usage(FILE *f)
{
	fprintf(f, "usage: innet paxos acceptor --bind IP:PORT --id N --learner IP:PORT... [--ring N]\n"
		   "       innet paxos leader --bind IP:PORT --acceptor IP:PORT... [--active] [--id N]\n"
		   "       innet paxos bench (--topology FILE --name HOST | --bind IP:PORT\n"
		   "                         --coordinator IP:PORT --acceptor IP:PORT...)\n"
		   "                         [--duration S] [--outstanding W] [--size B]\n"
		   "                         [--threads T (0-8: proposer threads, at most W)]\n"
		   "                         [--learner-filter IFACE[,IFACE...]|all\n"
		   "                          [--filter-mode quorum|redundant]]\n\n"
		   "Paxos roles as host processes (the host-based baseline) and a load generator.\n"
		   "See docs/consensus.md. Exit status: 0 ok, 1 failure, 2 usage.\n");
}

/* ---- bench -------------------------------------------------------------- */

#define BENCH_MAX_W 1024u

#define BENCH_MAX_T 8u       /* proposer threads (--threads) */
#define BENCH_BATCH 64u       /* REQUESTs per sendmmsg */

/* Client c's state. One thread (the endpoint) proposes: plain fields. With
 * --threads T, client c belongs to proposer thread c % T, which writes seq,
 * sent_ns and busy = 1 before it sends; the learner (main thread) reads them
 * when c's value is delivered and frees the slot (busy = 0, release), then
 * wakes the owner if it sleeps. */
struct bench {
	_Atomic uint64_t sent_ns[BENCH_MAX_W];
	_Atomic uint32_t seq[BENCH_MAX_W];
	_Atomic bool busy[BENCH_MAX_W];
	struct innet_hist lat;    /* ns, while measuring (innet/hist.h); learner thread only */
	uint64_t timeouts;
	_Atomic bool measuring;
	/* --threads */
	uint32_t threads;
	_Atomic bool sleeping[BENCH_MAX_T];
	int wake[BENCH_MAX_T];    /* eventfd per proposer thread */
	_Atomic bool stopping;    /* the proposer threads end (set by the main thread) */
	uint32_t client_base;     /* client c's id is client_base + c: fresh ids per run, so
	                           * a log that still holds an earlier run's requests (the
	                           * learners' deduplication) does not swallow this run's */
	_Atomic uint64_t resends;
	_Atomic uint64_t send_calls, sent;
};

/* The threaded generator's completion: the learner delivered req. */
static void bench_deliver(void *arg, uint64_t inst, uint64_t req, const uint8_t *value,
			  uint32_t len)
{
	struct bench *b = arg;
	uint32_t c = (uint32_t)(req >> 32) - b->client_base;
	(void)inst, (void)value, (void)len;
	if (c >= BENCH_MAX_W || !atomic_load_explicit(&b->busy[c], memory_order_acquire) ||
	    atomic_load_explicit(&b->seq[c], memory_order_relaxed) != (uint32_t)req)
		return; /* not ours, or an older request of c delivered late */
	uint64_t sent = atomic_load_explicit(&b->sent_ns[c], memory_order_relaxed);
	if (atomic_load_explicit(&b->measuring, memory_order_relaxed))
		innet_hist_record(&b->lat, innet_now_ns() - sent);
	atomic_store_explicit(&b->busy[c], false, memory_order_seq_cst);
	uint32_t t = c % b->threads;
	if (atomic_exchange(&b->sleeping[t], false)) {
		uint64_t one = 1;
		if (write(b->wake[t], &one, sizeof(one)) < 0) {
			/* the counter is full: the thread is awake anyway */
		}
	}
}

struct proposer {
	struct bench *b;
	uint32_t t, w, size, retry_ms;
	struct innet_addr coord;
	uint32_t bind_ip;
	int fd;
	pthread_t tid;
	bool started;             /* tid is a thread to join */
};

/* A proposer thread: keeps its clients' requests in flight, REQUESTs sent in
 * one sendmmsg per pass, resent with the same id after retry_ms (the learner
 * delivers each id once). Sleeps on its eventfd when every client waits. On
 * a veth the receivers' XDP runs in the sender's system call, so T threads
 * spread the in-network path over T CPUs. */
static void *proposer_main(void *arg)
{
	struct proposer *pr = arg;
	struct bench *b = pr->b;
	uint8_t(*bufs)[PAXOS_HDR_LEN + INNET_PAXOS_VALUE_MAX] = malloc(BENCH_BATCH * sizeof(*bufs));
	if (bufs == NULL) {
		fprintf(stderr, "innet paxos bench: proposer %u: out of memory\n", pr->t);
		return NULL; /* its clients never send: fewer commands, said above */
	}
	struct mmsghdr mm[BENCH_BATCH];
	struct iovec iov[BENCH_BATCH];
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(pr->coord.ip),
				  .sin_port = htons(pr->coord.udp) };
	uint8_t value[INNET_PAXOS_VALUE_MAX];
	memset(value, 'v', sizeof(value));
	uint64_t retry_ns = (uint64_t)pr->retry_ms * 1000000ull;
	uint64_t last_sent[BENCH_MAX_W];
	memset(last_sent, 0, sizeof(last_sent));
	while (!atomic_load(&b->stopping)) {
		uint64_t now = innet_now_ns();
		uint32_t n = 0;
		bool all_busy = true;
		for (uint32_t c = pr->t; c < pr->w && n < BENCH_BATCH; c += b->threads) {
			uint32_t seq;
			if (!atomic_load_explicit(&b->busy[c], memory_order_acquire)) {
				seq = atomic_load_explicit(&b->seq[c], memory_order_relaxed) + 1;
				atomic_store_explicit(&b->seq[c], seq, memory_order_relaxed);
				atomic_store_explicit(&b->sent_ns[c], now, memory_order_relaxed);
				atomic_store_explicit(&b->busy[c], true, memory_order_release);
			} else if (now - last_sent[c] >= retry_ns) {
				seq = atomic_load_explicit(&b->seq[c], memory_order_relaxed);
				atomic_fetch_add(&b->resends, 1);
			} else {
				continue;
			}
			all_busy = false;
			last_sent[c] = now;
			int len = innet_paxos_request_encode(bufs[n], sizeof(bufs[n]),
							     innet_paxos_req_id(b->client_base + c, seq), value,
							     pr->size);
			iov[n] = (struct iovec){ .iov_base = bufs[n], .iov_len = (size_t)len };
			mm[n] = (struct mmsghdr){ .msg_hdr = { .msg_name = &to, .msg_namelen = sizeof(to),
							       .msg_iov = &iov[n], .msg_iovlen = 1 } };
			n++;
		}
		for (uint32_t off = 0; off < n;) {
			int k = sendmmsg(pr->fd, mm + off, n - off, 0);
			atomic_fetch_add(&b->send_calls, 1);
			if (k <= 0)
				break; /* dropped: resent after retry_ms */
			atomic_fetch_add(&b->sent, (uint64_t)k);
			off += (uint32_t)k;
		}
		if (!all_busy)
			continue;
		/* Sleep until the learner frees one of ours (or a resend is due). */
		atomic_store(&b->sleeping[pr->t], true);
		bool any_free = false;
		for (uint32_t c = pr->t; c < pr->w; c += b->threads)
			if (!atomic_load(&b->busy[c]))
				any_free = true;
		if (any_free) {
			atomic_store(&b->sleeping[pr->t], false);
			continue;
		}
		struct pollfd pf = { .fd = b->wake[pr->t], .events = POLLIN };
		if (poll(&pf, 1, (int)pr->retry_ms) > 0) {
			uint64_t v;
			if (read(b->wake[pr->t], &v, sizeof(v)) < 0) {
				/* nothing to read: woken by the timeout's race */
			}
		}
		atomic_store(&b->sleeping[pr->t], false);
	}
	free(bufs);
	return NULL;
}

static int proposers_start(struct bench *b, struct proposer *pr, const struct innet_paxos_conf *pc,
			   uint32_t w, uint32_t size)
{
	for (uint32_t t = 0; t < b->threads; t++)
		pr[t] = (struct proposer){ .b = b, .t = t, .w = w, .size = size,
					   .retry_ms = pc->retry_ms, .coord = pc->coordinator,
					   .bind_ip = pc->bind_ip, .fd = -1 };
	for (uint32_t t = 0; t < b->threads; t++) {
		b->wake[t] = eventfd(0, EFD_CLOEXEC);
		pr[t].fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(pc->bind_ip) };
		if (b->wake[t] < 0 || pr[t].fd < 0 || bind(pr[t].fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			fprintf(stderr, "innet paxos bench: proposer socket: %s\n", strerror(errno));
			return -1;
		}
		int e = pthread_create(&pr[t].tid, NULL, proposer_main, &pr[t]);
		if (e != 0) {
			fprintf(stderr, "innet paxos bench: thread: %s\n", strerror(e));
			return -1;
		}
		pr[t].started = true;
	}
	return 0;
}

static void proposers_stop(struct bench *b, struct proposer *pr)
{
	atomic_store(&b->stopping, true);
	for (uint32_t t = 0; t < b->threads; t++) {
		if (b->wake[t] >= 0) {
			uint64_t one = 1;
			if (write(b->wake[t], &one, sizeof(one)) < 0) {
				/* the thread wakes on its poll timeout */
			}
		}
		if (pr[t].started)
			pthread_join(pr[t].tid, NULL);
		if (pr[t].fd >= 0)
			close(pr[t].fd);
		if (b->wake[t] >= 0)
			close(b->wake[t]);
	}
}

static void bench_done(void *arg, uint64_t req, int status, uint64_t inst)
{
	struct bench *b = arg;
	uint32_t c = (uint32_t)(req >> 32) - 1;
	if (c >= BENCH_MAX_W)
		return;
	b->busy[c] = false;
	if (status != 0) {
		b->timeouts++;
		return;
	}
	if (!b->measuring)
		return;
	innet_hist_record(&b->lat, innet_now_ns() - b->sent_ns[c]);
}

static int run_bench(struct innet_paxos_conf *pc, double duration, uint32_t w, uint32_t size,
		     const char *filter, bool quorum_mark, uint32_t threads)
{
	static struct bench b;
	static struct proposer pr[BENCH_MAX_T];
	if (innet_hist_init(&b.lat, 60000000000ull, INNET_HIST_DEFAULT_BITS) != 0) {
		fprintf(stderr, "innet paxos bench: out of memory\n");
		return 1;
	}
	b.threads = threads;
	for (uint32_t t = 0; t < BENCH_MAX_T; t++)
		b.wake[t] = -1;
	pc->done = threads ? NULL : bench_done;
	pc->deliver = threads ? bench_deliver : NULL;
	pc->arg = &b;
	pc->retry_ms = pc->retry_ms ? pc->retry_ms : 50;
	pc->window = 8192;
	char err[256];
	struct innet_paxos *p = innet_paxos_create(pc, err, sizeof(err));
	if (p == NULL) {
		fprintf(stderr, "innet paxos bench: %s\n", err);
		return 1;
	}
	struct learnfilter *lf = NULL;
	if (filter != NULL) {
		lf = learnfilter_attach(filter, pc->bind_udp, pc->n_acceptors, quorum_mark, err,
					sizeof(err));
		if (lf == NULL) {
			fprintf(stderr, "innet paxos bench: learner filter: %s\n", err);
			innet_paxos_destroy(p);
			return 1;
		}
		/* Every 2B to this socket now comes through the filter. */
		innet_paxos_trust_filter(p, quorum_mark);
		fprintf(stderr, "innet paxos bench: learner filter on %s (mode %s)\n", filter,
			quorum_mark ? "quorum" : "redundant");
	}
	static uint8_t value[INNET_PAXOS_VALUE_MAX];
	memset(value, 'v', sizeof(value));
	uint64_t t0 = innet_now_ns(), warm = t0 + 500000000ull;
	uint64_t end = warm + (uint64_t)(duration * 1e9), last_trim = 0;
	uint64_t start_n = 0;
	int rc = 0;
	if (threads) {
		/* a random base with room for BENCH_MAX_W clients, never 0 */
		b.client_base = (innet_paxos_client_new(p) & ~(uint32_t)(BENCH_MAX_W - 1)) | BENCH_MAX_W;
		if (b.client_base > UINT32_MAX - BENCH_MAX_W)
			b.client_base = BENCH_MAX_W;
		if (proposers_start(&b, pr, pc, w, size) != 0)
			rc = 1;
	}
	while (!px_stop && rc == 0) {
		uint64_t t = innet_now_ns();
		if (!b.measuring && t >= warm) {
			b.measuring = true;
			start_n = 0;
		}
		if (t >= end)
			break;
		for (uint32_t c = 0; c < w && !threads; c++) {
			if (b.busy[c])
				continue;
			b.busy[c] = true;
			b.sent_ns[c] = t;
			if (innet_paxos_propose(p, innet_paxos_req_id(c + 1, ++b.seq[c]), value, size) != 0)
				b.busy[c] = false;
		}
		/* threads: nobody proposes through the endpoint, so nothing moves
		 * a learner the acceptors trimmed past (a fabric used before) on */
		if (innet_paxos_step(p, 1) == -ESTALE && threads)
			innet_paxos_restart_at(p, innet_paxos_stale_trim(p));
		if (t - last_trim > 10000000ull) {
			innet_paxos_trim(p);
			last_trim = t;
		}
	}
	(void)start_n;
	if (threads) {
		proposers_stop(&b, pr);
		/* Still waiting at the end after more than a second: lost. */
		uint64_t now = innet_now_ns();
		for (uint32_t c = 0; c < w; c++)
			if (atomic_load(&b.busy[c]) && now - atomic_load(&b.sent_ns[c]) > 1000000000ull)
				b.timeouts++;
		fprintf(stderr, "innet paxos bench: %u proposer threads: %llu REQUESTs in %llu sendmmsg, "
				"%llu resent\n", threads, (unsigned long long)b.sent,
			(unsigned long long)b.send_calls, (unsigned long long)b.resends);
	}
	double secs = (double)(end - warm) / 1e9;
	uint64_t n = b.lat.total;
	printf("cmds=%llu seconds=%.2f cmds_per_s=%.0f p50_us=%llu p99_us=%llu timeouts=%lu\n",
	       (unsigned long long)n, secs, (double)n / secs,
	       (unsigned long long)(innet_hist_percentile(&b.lat, 50) / 1000),
	       (unsigned long long)(innet_hist_percentile(&b.lat, 99) / 1000),
	       (unsigned long)b.timeouts);
	fflush(stdout);
	if (rc == 0)
		rc = n > 0 ? 0 : 1;
	if (lf != NULL) {
		innet_paxos_trust_filter(p, false);
		struct lf_stats fs;
		learnfilter_stats(lf, &fs);
		int drc = learnfilter_detach(lf);
		fprintf(stderr, "learner_filter seen=%llu passed_quorum=%llu dropped_before=%llu "
				"dropped_redundant=%llu passed_before=%llu passed_other=%llu "
				"mark_cleared=%llu detached=%s\n",
			(unsigned long long)fs.seen, (unsigned long long)fs.passed_quorum,
			(unsigned long long)fs.dropped_before, (unsigned long long)fs.dropped_redundant,
			(unsigned long long)fs.passed_before, (unsigned long long)fs.passed_other,
			(unsigned long long)fs.mark_cleared, drc == 0 ? "yes" : strerror(-drc));
		if (drc != 0)
			rc = 1;
	}
	innet_paxos_destroy(p);
	innet_hist_fini(&b.lat);
	return rc;
}

int cmd_paxos(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bind", required_argument, NULL, 'b' },     { "id", required_argument, NULL, 'i' },
		{ "learner", required_argument, NULL, 'l' },  { "ring", required_argument, NULL, 'r' },
		{ "acceptor", required_argument, NULL, 'a' }, { "active", no_argument, NULL, 'A' },
		{ "coordinator", required_argument, NULL, 'c' },
		{ "topology", required_argument, NULL, 't' }, { "name", required_argument, NULL, 'n' },
		{ "duration", required_argument, NULL, 'd' },
		{ "outstanding", required_argument, NULL, 'w' },
		{ "size", required_argument, NULL, 's' },     { "help", no_argument, NULL, 'h' },
		{ "learner-filter", required_argument, NULL, 'F' },
		{ "filter-mode", required_argument, NULL, 'M' },
		{ "threads", required_argument, NULL, 'T' },
		{ NULL, 0, NULL, 0 },
	};
	struct innet_addr bind_a = { 0 }, coord = { 0 }, acc[INNET_PAXOS_MAX_ACCEPTORS], lrn[64];
	uint32_t n_acc = 0, n_lrn = 0, ring = 1024, w = 16, size = 16, threads = 0;
	unsigned long id = 0;
	bool active = false;
	double duration = 3;
	const char *topo = NULL, *name = NULL, *filter = NULL;
	bool quorum_mark = true;
	uint64_t u;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'b': if (innet_parse_addr(optarg, 0, &bind_a)) goto bad; break;
		case 'c': if (innet_parse_addr(optarg, 0, &coord)) goto bad; break;
		case 'a':
			if (n_acc >= INNET_PAXOS_MAX_ACCEPTORS || innet_parse_addr(optarg, 0, &acc[n_acc++]))
				goto bad;
			break;
		case 'l':
			if (n_lrn >= 64 || innet_parse_addr(optarg, 0, &lrn[n_lrn++]))
				goto bad;
			break;
		case 'i': id = strtoul(optarg, NULL, 10); if (id > 255) goto bad; break;
		case 'r': ring = (uint32_t)strtoul(optarg, NULL, 10); if (!ring || ring > 1u << 20) goto bad; break;
		case 'A': active = true; break;
		case 't': topo = optarg; break;
		case 'n': name = optarg; break;
		case 'd': duration = strtod(optarg, NULL); if (duration <= 0 || duration > 3600) goto bad; break;
		case 'w': w = (uint32_t)strtoul(optarg, NULL, 10); if (!w || w > BENCH_MAX_W) goto bad; break;
		case 's': size = (uint32_t)strtoul(optarg, NULL, 10); if (size > INNET_PAXOS_VALUE_MAX) goto bad; break;
		case 'F': filter = optarg; break;
		case 'T':
			if (innet_parse_u64(optarg, 0, BENCH_MAX_T, &u) != 0)
				goto bad;
			threads = (uint32_t)u;
			break;
		case 'M':
			if (!strcmp(optarg, "quorum"))
				quorum_mark = true;
			else if (!strcmp(optarg, "redundant"))
				quorum_mark = false;
			else
				goto bad;
			break;
		case 'h': px_usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind + 1 != argc)
		goto bad;
	struct sigaction sa = { .sa_handler = px_on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	const char *verb = argv[optind];
	if (!strcmp(verb, "acceptor")) {
		if (bind_a.ip == 0 || n_lrn == 0 || id >= 64)
			goto bad;
		struct hostacc_conf hc = { .bind_ip = bind_a.ip, .bind_udp = bind_a.udp,
					   .id = (uint16_t)id, .ring = ring, .n_learners = n_lrn,
					   .stop = &px_stop };
		memcpy(hc.learners, lrn, n_lrn * sizeof(lrn[0]));
		return hostacc_serve(&hc) == 0 ? 0 : 1;
	}
	if (!strcmp(verb, "leader")) {
		if (bind_a.ip == 0 || n_acc == 0)
			goto bad;
		struct innet_paxos_leader_conf lc = { .bind_ip = bind_a.ip, .bind_udp = bind_a.udp,
						      .n_acceptors = n_acc, .active = active,
						      .proposer_id = (uint8_t)id };
		memcpy(lc.acceptors, acc, n_acc * sizeof(acc[0]));
		char err[256];
		struct innet_paxos_leader *l = innet_paxos_leader_create(&lc, err, sizeof(err));
		if (l == NULL) {
			fprintf(stderr, "innet paxos leader: %s\n", err);
			return 1;
		}
		fprintf(stderr, "innet paxos leader: listening on %s (%s)\n", argv[optind], active ? "active" : "backup");
		bool said = false;
		while (!px_stop) {
			innet_paxos_leader_step(l, 20);
			if (!said && innet_paxos_leader_serving(l)) {
				said = true;
				fprintf(stderr, "innet paxos leader: serving with ballot 0x%x from %lu\n",
					innet_paxos_leader_ballot(l), (unsigned long)innet_paxos_leader_next(l));
			}
		}
		struct innet_paxos_leader_stats st;
		innet_paxos_leader_get_stats(l, &st);
		fprintf(stderr, "innet paxos leader: requests %lu; %lu datagrams in %lu recvmmsg, "
				"%lu datagrams in %lu sendmmsg\n", (unsigned long)st.requests,
			(unsigned long)st.rx_datagrams, (unsigned long)st.rx_calls,
			(unsigned long)st.tx_datagrams, (unsigned long)st.tx_calls);
		innet_paxos_leader_destroy(l);
		return 0;
	}
	if (!strcmp(verb, "bench")) {
		struct innet_paxos_conf pc;
		memset(&pc, 0, sizeof(pc));
		if (topo != NULL) {
			char err[8192];
			struct innet_topology *t = innet_topology_load(topo, err, sizeof(err));
			if (t == NULL) {
				fprintf(stderr, "innet paxos: %s\n", err);
				return 2;
			}
			int h = name ? innet_topology_find(t, name) : -1;
			char why[512] = "";
			int rc = h < 0 ? -1 : kv_topology_paxos_conf(t, h, &pc, why, sizeof(why));
			if (why[0] != '\0')
				fprintf(stderr, "innet paxos: %s\n", why);
			/* netns mode: the host's sockets live in its namespace */
			int ns_rc = rc == 0 && t->netns ? innet_topology_enter(t, (uint32_t)h) : 0;
			innet_topology_free(t);
			if (rc != 0) {
				fprintf(stderr, "innet paxos: no usable host '%s' in %s\n", name ? name : "", topo);
				return 2;
			}
			if (ns_rc != 0) {
				fprintf(stderr, "innet paxos: cannot enter the namespace of %s: %s%s\n", name,
					strerror(-ns_rc), ns_rc == -ENOENT ? " (is the fabric up?)" : "");
				return 1;
			}
		} else {
			if (bind_a.ip == 0 || coord.ip == 0 || n_acc == 0)
				goto bad;
			pc.bind_ip = bind_a.ip;
			pc.bind_udp = bind_a.udp;
			pc.coordinator = coord;
			pc.n_acceptors = n_acc;
			memcpy(pc.acceptors, acc, n_acc * sizeof(acc[0]));
			pc.learner_id = 0;
			pc.proposer_id = 1;
		}
		if (threads > w)
			threads = w; /* a thread owns at least one client */
		return run_bench(&pc, duration, w, size, filter, quorum_mark, threads);
	}
bad:
	px_usage(stderr);
	return 2;
}
