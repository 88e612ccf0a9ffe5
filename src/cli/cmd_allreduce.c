/*
 * cmd_allreduce.c — `innet allreduce`: one-off all-reduce runs through a
 * switch running the agg program (include/innet/agg.h, docs/aggregation.md).
 *
 *   innet allreduce --switch IP[:UDP] --bind IP:UDP --job ID --workers N
 *                   (--worker W | --all) [--slots S] [--k K]
 *                   [--type int32|float32] [--count ELEMS] [--iters I]
 *                   [--timeout-ms T] [--rto-us U] [--check]
 *                   [--delay-worker W --delay-ms D [--delay-every N]]
 *                   [--join] [--rejoin [--rejoin-except W]]
 *
 * Worker W binds IP:(UDP + W) (so --all, which runs every worker as a thread
 * of this process, and separate processes agree with the same member list).
 * The data are generated: worker w's element i is a fixed function of (w, i,
 * iteration), so every worker can compute the expected sum by itself;
 * --check compares (int32: bit-exact; float32: within the stated bound).
 * --delay-worker W sleeps D ms before every N-th iteration (N = 1 default:
 * every one; iterations 0, N, 2N, ...), outside the timed call: a straggler
 * for bench/stragglers.sh.
 * Each run is a run of the job on the switch: the workers' first calls start
 * it (the library's START; a previous run, ended or killed, is replaced).
 * --join: a restarted worker; before its first call it joins the job
 * (innet_agg_join) and starts at the iteration the others make next —
 * without it, a worker restarted alone while the others run fails at once
 * (-EBUSY, with a message that says to join).
 * --rejoin: a call that fails with -ESTALE (the worker fell a round behind
 * the straggler timer) rejoins and goes on at the others' next iteration;
 * --rejoin-except W: every worker but W (a straggler out for good while the
 * others stay robust: bench/stragglers.sh).
 * --check with partial results (straggler timer): a call that got partial
 * results must give, per block of k elements, exactly the sum of some subset
 * of the workers (int32, up to 12 workers; float32 partial calls are not
 * checked, counted in unchecked); a call without must give the full sum.
 * Prints one RESULT line per worker:
 *   RESULT worker=W type=T elems=N iters=I seconds=S elem_per_s=R gbit_s=G
 *          retransmits=X partial=P excluded=E check=ok|FAIL|skipped rc=RC
 *          median_s=M max_s=X done=D joined_at=J rejoins=R last_partial=L
 *          partial_blocks=B unchecked=U
 * (seconds: the sum over the timed calls; median_s, max_s: per call; done:
 * calls that succeeded; joined_at: the iteration --join started at, -1
 * without; last_partial: the last iteration with partial results, -1 none;
 * partial_blocks: blocks checked as a subset sum).
 * Exit status: 0 ok, 1 a call failed or a check failed, 2 usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "innet/switch.h"
#include "innet/parse.h"
#include "innet/agg.h"
#include "agg/wire.h"
#include "cli/cmds.h"

struct ar_opts {
	struct innet_agg_conf conf;   /* worker filled per thread */
	bool f32;
	size_t count;
	uint32_t iters;
	bool check;
	long delay_worker;    /* -1: none */
	uint32_t delay_ms;
	uint32_t delay_every;
	bool join, rejoin;
	long rejoin_except;   /* -1: none */
};

struct ar_worker {
	const struct ar_opts *o;
	uint32_t w;
	int rc;
	bool check_ok;
	double seconds;
	double *per_call;     /* [iters] seconds of each call */
	uint32_t done;        /* calls that succeeded */
	long joined_at;       /* --join: first iteration, else -1 */
	uint32_t rejoins;
	long last_partial;    /* last iteration with partial results, -1: none */
	uint64_t partial_blocks, unchecked;
	struct innet_agg_stats st;
	char why[256];        /* the library's explanation of a failure */
};

static int32_t gen_i32(uint32_t w, uint32_t it, size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u ^ (w * 0x9E3779B9u) ^ (it << 20);
	x ^= x >> 15;
	x *= 0x2c1b3c6dU;
	x ^= x >> 12;
	return (int32_t)x;
}

static float gen_f32(uint32_t w, uint32_t it, size_t i)
{
	return (float)((double)(gen_i32(w, it, i) % 1000000) * 1e-6);
}

/* int32 block [lo, hi) of iteration it: the full sum, or (partial) the sum
 * of some subset of the workers. 1 full, 2 subset, 0 neither. */
static int check_block_i32(const int32_t *out, uint32_t n_workers, uint32_t it, size_t lo, size_t hi,
			   bool partial)
{
	bool full = true;
	for (size_t i = lo; i < hi && full; i++) {
		uint32_t want = 0;
		for (uint32_t w = 0; w < n_workers; w++)
			want += (uint32_t)gen_i32(w, it, i);
		full = (uint32_t)out[i] == want;
	}
	if (full)
		return 1;
	if (!partial || n_workers > 12)
		return 0;
	for (uint32_t mask = 1; mask < (1u << n_workers) - 1; mask++) {
		bool ok = true;
		for (size_t i = lo; i < hi && ok; i++) {
			uint32_t want = 0;
			for (uint32_t w = 0; w < n_workers; w++)
				if (mask & (1u << w))
					want += (uint32_t)gen_i32(w, it, i);
			ok = (uint32_t)out[i] == want;
		}
		if (ok)
			return 2;
	}
	return 0;
}

static void *ar_main(void *arg)
{
	struct ar_worker *r = arg;
	const struct ar_opts *o = r->o;
	struct innet_agg_conf c = o->conf;
	c.worker = (uint8_t)r->w;
	c.local_udp = (uint16_t)(o->conf.local_udp + r->w);
	r->joined_at = -1;
	r->last_partial = -1;
	struct innet_agg *a = innet_agg_open(&c);
	if (a == NULL) {
		fprintf(stderr, "innet allreduce: worker %u: %s\n", r->w, strerror(errno));
		r->rc = -errno;
		return NULL;
	}
	size_t n = o->count;
	void *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4);
	if (in == NULL || out == NULL) {
		r->rc = -ENOMEM;
		goto done;
	}
	r->check_ok = true;
	double secs = 0;
	uint32_t it = 0;
	if (o->join) {
		uint32_t next;
		r->rc = innet_agg_join(a, n, o->f32, &next);
		if (r->rc != 0) {
			fprintf(stderr, "innet allreduce: worker %u: join: %s\n", r->w, strerror(-r->rc));
			goto done;
		}
		it = next;
		r->joined_at = (long)next;
	}
	for (; it < o->iters && r->rc == 0; it++) {
		for (size_t i = 0; i < n; i++) {
			if (o->f32)
				((float *)in)[i] = gen_f32(r->w, it, i);
			else
				((int32_t *)in)[i] = gen_i32(r->w, it, i);
		}
		if ((long)r->w == o->delay_worker && it % o->delay_every == 0) {
			struct timespec d = { .tv_sec = o->delay_ms / 1000, .tv_nsec = (long)(o->delay_ms % 1000) * 1000000 };
			nanosleep(&d, NULL);
		}
		struct innet_agg_stats before, after;
		innet_agg_get_stats(a, &before);
		uint64_t t0 = innet_now_ns();
		r->rc = o->f32 ? innet_agg_allreduce_f32(a, in, out, n)
			       : innet_agg_allreduce_i32(a, in, out, n);
		uint64_t t1 = innet_now_ns();
		innet_agg_get_stats(a, &after);
		bool partial = after.partial != before.partial;
		if (partial)
			r->last_partial = (long)it;
		double dt = (double)(t1 - t0) * 1e-9;
		secs += dt;
		if (r->rc == -ESTALE && o->rejoin && (long)r->w != o->rejoin_except) {
			/* out of step: join the others' next call and go on from there */
			uint32_t next;
			r->rc = innet_agg_join(a, n, o->f32, &next);
			if (r->rc != 0) {
				fprintf(stderr, "innet allreduce: worker %u: rejoin: %s\n", r->w, strerror(-r->rc));
				continue;
			}
			r->rejoins++;
			it = next - 1; /* the loop's it++ */
			continue;
		}
		if (r->rc == 0) {
			if (r->per_call != NULL)
				r->per_call[r->done] = dt; /* [0, done): what median_s, max_s read */
			r->done++;
		}
		if (r->rc != 0 || !o->check)
			continue;
		if (!o->f32) {
			for (size_t lo = 0; lo < n && r->check_ok; lo += c.k) {
				size_t hi = lo + c.k < n ? lo + c.k : n;
				int v = check_block_i32(out, c.n_workers, it, lo, hi, partial);
				if (v == 0)
					r->check_ok = false;
				r->partial_blocks += v == 2;
			}
			continue;
		}
		if (partial) {
			r->unchecked++; /* float partial sums: not checked */
			continue;
		}
		double block_max = 0;
		for (size_t i = 0; i < n && r->check_ok; i++) {
			/* The bound depends on the block's largest |input| over
			 * all workers: computed once per block of k elements. */
			if (i % c.k == 0) {
				block_max = 0;
				for (uint32_t w = 0; w < c.n_workers; w++)
					for (size_t j = i; j < i + c.k && j < n; j++)
						block_max = fmax(block_max, fabs(gen_f32(w, it, j)));
			}
			double want = 0;
			for (uint32_t w = 0; w < c.n_workers; w++)
				want += gen_f32(w, it, i);
			float y = ((float *)out)[i];
			if (fabs(y - want) > innet_agg_f32_error_bound(c.n_workers, block_max) + ldexp(fabs(y), -24))
				r->check_ok = false;
		}
	}
	r->seconds = secs;
done:
	innet_agg_get_stats(a, &r->st);
	if (r->rc != 0)
		snprintf(r->why, sizeof(r->why), "%s", innet_agg_error(a));
	innet_agg_close(a);
	free(in);
	free(out);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Median of the first n entries (sorts them); 0 for none or no array. */
static double median(double *v, uint32_t n)
{
	if (v == NULL || n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Largest of v[0..n) (n > 0), once sorted by median(). */
static double max_of(const double *v, uint32_t n)
{
	return v == NULL ? 0 : v[n - 1];
}

static void ar_usage(FILE *f)
{
	fprintf(f, "usage: innet allreduce --switch IP[:UDP] --bind IP:UDP --job ID --workers N\n"
		   "                       (--worker W | --all) [options]\n"
		   "\n"
		   "All-reduce (sum) generated int32/float32 arrays through a switch running the\n"
		   "agg program: one worker, or with --all every worker as a thread of this process.\n"
		   "\n"
		   "  --switch IP[:UDP]   the switch's address and agg port (default UDP %u)\n"
		   "  --bind IP:UDP       local address: worker W binds IP:(UDP+W)\n"
		   "  --job ID            the job id configured in the switch's agg settings\n"
		   "  --workers N         workers in the job (1..%u)\n"
		   "  --worker W          run worker W (0..N-1)            | --all  run all N\n"
		   "  --slots S           aggregator slots of the job (default 64)\n"
		   "  --k K               elements per packet (default 256)\n"
		   "  --type T            int32 (default) or float32\n"
		   "  --count ELEMS       elements per array (default 1048576)\n"
		   "  --iters I           all-reduce calls, timed (default 1)\n"
		   "  --timeout-ms T      a call's deadline (default: the library's)\n"
		   "  --rto-us U          retransmission timeout (default: the library's)\n"
		   "  --check             compare with the expected sum (int32: exact; float32: bound)\n"
		   "  --delay-worker W --delay-ms D [--delay-every N]\n"
		   "                      worker W sleeps D ms before every N-th call (a straggler)\n"
		   "  --join              join the job before the first call (a restarted worker)\n"
		   "  --rejoin            join again after a call fails with -ESTALE (excluded)\n"
		   "  --rejoin-except W   with --rejoin: every worker but W\n"
		   "  -h, --help          this text\n"
		   "\n"
		   "Prints one line per worker: RESULT worker=W type=T elems=N ... check=ok|FAIL|skipped.\n"
		   "Exit status: 0 ok, 1 a call or a check failed, 2 usage. docs/aggregation.md.\n",
		INNET_AGG_UDP, INNET_AGG_MAX_WORKERS);
}

/* A usage error: what is wrong, and where help is. Returns 2. */
__attribute__((format(printf, 1, 2))) static int ar_bad(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "innet allreduce: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n'innet allreduce --help' lists the options\n");
	va_end(ap);
	return 2;
}

int cmd_allreduce(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "switch", required_argument, NULL, 's' }, { "bind", required_argument, NULL, 'b' },
		{ "job", required_argument, NULL, 'j' },    { "workers", required_argument, NULL, 'n' },
		{ "worker", required_argument, NULL, 'w' }, { "all", no_argument, NULL, 'a' },
		{ "slots", required_argument, NULL, 'S' },  { "k", required_argument, NULL, 'k' },
		{ "type", required_argument, NULL, 't' },   { "count", required_argument, NULL, 'c' },
		{ "iters", required_argument, NULL, 'i' },  { "timeout-ms", required_argument, NULL, 'T' },
		{ "rto-us", required_argument, NULL, 'r' }, { "check", no_argument, NULL, 'C' },
		{ "delay-worker", required_argument, NULL, 'D' }, { "delay-ms", required_argument, NULL, 'M' },
		{ "delay-every", required_argument, NULL, 'E' },
		{ "join", no_argument, NULL, 'J' },         { "rejoin", no_argument, NULL, 'R' },
		{ "rejoin-except", required_argument, NULL, 'X' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct ar_opts o = { .conf = { .switch_udp = INNET_AGG_UDP, .slots = 64, .k = 256 }, .count = 1 << 20,
			     .iters = 1, .delay_worker = -1, .delay_every = 1, .rejoin_except = -1 };
	long worker = -1, n_workers = 0;
	bool all = false, have_switch = false, have_bind = false;
	struct innet_addr addr;
	int ch;
	optind = 1;
	opterr = 0; /* ar_bad says what is wrong */
	while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		switch (ch) {
		case 's':
			if (innet_parse_addr(optarg, INNET_AGG_UDP, &addr) != 0)
				goto bad;
			o.conf.switch_ip = addr.ip;
			o.conf.switch_udp = addr.udp;
			have_switch = true;
			break;
		case 'b':
			if (innet_parse_addr(optarg, 0, &addr) != 0)
				goto bad;
			o.conf.local_ip = addr.ip;
			o.conf.local_udp = addr.udp;
			have_bind = true;
			break;
		case 'j': o.conf.job = (uint16_t)strtoul(optarg, &end, 10); break;
		case 'n': n_workers = strtol(optarg, &end, 10); break;
		case 'w': worker = strtol(optarg, &end, 10); break;
		case 'a': all = true; break;
		case 'S': o.conf.slots = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'k': o.conf.k = (uint32_t)strtoul(optarg, &end, 10); break;
		case 't':
			if (!strcmp(optarg, "float32") || !strcmp(optarg, "float"))
				o.f32 = true;
			else if (strcmp(optarg, "int32") && strcmp(optarg, "int"))
				goto bad;
			break;
		case 'c': o.count = strtoull(optarg, &end, 10); break;
		case 'i': o.iters = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'T': o.conf.timeout_ms = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'r': o.conf.rto_us = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'C': o.check = true; break;
		case 'D': o.delay_worker = strtol(optarg, &end, 10); break;
		case 'M': o.delay_ms = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'E': o.delay_every = (uint32_t)strtoul(optarg, &end, 10); break;
		case 'J': o.join = true; break;
		case 'R': o.rejoin = true; break;
		case 'X': o.rejoin_except = strtol(optarg, &end, 10); break;
		case 'h': ar_usage(stdout); return 0;
		default: return ar_bad("unknown option or missing value: '%s'", argv[optind - 1]);
		}
		if (end != NULL && (*end != '\0' || end == optarg))
			goto bad;
	}
	if (optind < argc)
		return ar_bad("unexpected argument '%s'", argv[optind]);
	if (!have_switch)
		return ar_bad("%s", "missing --switch IP[:UDP]");
	if (!have_bind)
		return ar_bad("%s", "missing --bind IP:UDP");
	if (n_workers < 1 || n_workers > (long)INNET_AGG_MAX_WORKERS)
		return ar_bad("--workers N is required, N in 1..%u", INNET_AGG_MAX_WORKERS);
	if (all == (worker >= 0))
		return ar_bad("%s", "give either --worker W or --all");
	if (worker >= n_workers)
		return ar_bad("%s", "--worker W must be below --workers N");
	if (o.iters < 1 || o.iters > 1000000)
		return ar_bad("%s", "--iters wants 1..1000000");
	if (o.rejoin_except >= 0 && (!o.rejoin || o.rejoin_except >= n_workers))
		return ar_bad("%s", "--rejoin-except W wants --rejoin and W below --workers N");
	if (o.delay_every < 1 || o.delay_ms > 600000)
		return ar_bad("%s", "--delay-every wants >= 1 and --delay-ms <= 600000");
	o.conf.n_workers = (uint8_t)n_workers;
	uint32_t first = all ? 0 : (uint32_t)worker, last = all ? (uint32_t)n_workers : (uint32_t)worker + 1;
	struct ar_worker *rs = calloc(last - first, sizeof(*rs));
	pthread_t *th = calloc(last - first, sizeof(*th));
	if (rs == NULL || th == NULL) {
		free(rs);
		free(th);
		return 1;
	}
	for (uint32_t w = first; w < last; w++) {
		rs[w - first] = (struct ar_worker){ .o = &o, .w = w, .per_call = calloc(o.iters, sizeof(double)) };
		pthread_create(&th[w - first], NULL, ar_main, &rs[w - first]);
	}
	int status = 0;
	for (uint32_t w = first; w < last; w++) {
		pthread_join(th[w - first], NULL);
		struct ar_worker *r = &rs[w - first];
		double elems = (double)o.count * o.iters;
		double med = median(r->per_call, r->done); /* sorts per_call */
		double mx = r->done ? max_of(r->per_call, r->done) : 0.0;
		if (r->rc != 0) {
			fprintf(stderr, "innet allreduce: worker %u: %s%s%s%s\n", w, strerror(-r->rc),
				r->why[0] ? " (" : "", r->why, r->why[0] ? ")" : "");
			status = 1;
		}
		if (o.check && !r->check_ok)
			status = 1;
		printf("RESULT worker=%u type=%s elems=%zu iters=%u seconds=%.6f elem_per_s=%.0f gbit_s=%.3f "
		       "retransmits=%llu partial=%llu excluded=%llu check=%s rc=%d median_s=%.6f max_s=%.6f done=%u "
		       "joined_at=%ld rejoins=%u last_partial=%ld partial_blocks=%llu unchecked=%llu\n",
		       w, o.f32 ? "float32" : "int32", o.count, o.iters, r->seconds,
		       r->seconds > 0 ? elems / r->seconds : 0, r->seconds > 0 ? elems * 32 / r->seconds / 1e9 : 0,
		       (unsigned long long)r->st.retransmits, (unsigned long long)r->st.partial,
		       (unsigned long long)r->st.excluded,
		       !o.check ? "skipped" : r->check_ok && r->rc == 0 ? "ok" : "FAIL", r->rc,
		       med, mx, r->done, r->joined_at, r->rejoins, r->last_partial,
		       (unsigned long long)r->partial_blocks, (unsigned long long)r->unchecked);
		free(r->per_call);
	}
	free(rs);
	free(th);
	return status;
bad:
	return ar_bad("bad argument '%s'", optarg);
}
