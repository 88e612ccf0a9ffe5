/*
 * test_agg.c — the all-reduce host library (src/agg/host.c) against a real
 * switch running the agg program over loopback UDP: int32 results bit-exact
 * against a reference, float results within the stated bound, both under
 * 5% loss, duplication and reordering; 32 workers on one slot pool with four
 * switch threads; a worker that dies (timeout, not a hang); a straggler with
 * the switch's timer (partial results, then back in step); two jobs at once;
 * the asynchronous calls.
 *
 * Addresses: switch port 127.208.P.1 (P from the process id), worker w of
 * job J at 127.208.P.(10 + w) : 21000 + 100 * J + w.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/clock.h"
#include "innet/agg.h"
#include "innet/switch.h"
#include "agg/wire.h"

#define TEST_NET 208u
#define UDP_AGG  47820u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static struct innet_switch *cur_sw;

static int teardown(void **state)
{
	innet_switch_destroy(cur_sw);
	cur_sw = NULL;
	return 0;
}

struct job_def {
	uint16_t id;
	uint32_t workers;
	uint32_t slots;
	uint32_t timeout_us;
};

/* A started switch with the given jobs (members as in the header comment). */
static struct innet_switch *make_switch(uint32_t k, const struct job_def *jobs, uint32_t n_jobs,
					uint32_t threads, double fault)
{
	static struct innet_switch_conf c;
	static char args[16384];
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "agg-unit");
	c.n_workers = threads;
	c.seed = 42;
	c.n_ports = 1;
	c.ports[0].ip = test_ip(1);
	if (fault > 0) {
		c.ports[0].link = (struct innet_link_conf){ .loss = fault, .dup = fault, .reorder = fault,
							    .on_egress = true, .on_ingress = true };
	}
	unsigned p = (unsigned)getpid() & 0xffu;
	int off = snprintf(args, sizeof(args), "{\"k\": %u, \"slots\": 2048, \"jobs\": [", k);
	for (uint32_t j = 0; j < n_jobs; j++) {
		off += snprintf(args + off, sizeof(args) - off,
				"%s{\"id\": %u, \"workers\": %u, \"slots\": %u, \"timeout_us\": %u, \"members\": [",
				j ? "," : "", jobs[j].id, jobs[j].workers, jobs[j].slots, jobs[j].timeout_us);
		for (uint32_t w = 0; w < jobs[j].workers; w++)
			off += snprintf(args + off, sizeof(args) - off, "%s\"127.208.%u.%u:%u\"", w ? "," : "",
					p, 10 + w, 21000 + 100 * jobs[j].id + w);
		off += snprintf(args + off, sizeof(args) - off, "]}");
	}
	snprintf(args + off, sizeof(args) - off, "]}");
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "agg");
	c.progs[0].program = innet_program_find("agg");
	c.progs[0].udp[0] = UDP_AGG;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = args;
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	cur_sw = sw;
	assert_int_equal(test_start(sw), 0);
	return sw;
}

static struct innet_agg *open_worker(const struct job_def *j, uint32_t w, uint32_t k, uint32_t timeout_ms)
{
	struct innet_agg_conf c = {
		.switch_ip = test_ip(1), .switch_udp = UDP_AGG,
		.local_ip = test_ip(10 + w), .local_udp = (uint16_t)(21000 + 100 * j->id + w),
		.job = j->id, .worker = (uint8_t)w, .n_workers = (uint8_t)j->workers,
		.slots = j->slots, .k = k, .rto_us = 1000, .rto_max_us = 20000, .timeout_ms = timeout_ms,
	};
	struct innet_agg *a = innet_agg_open(&c);
	if (a == NULL)
		fail_msg("innet_agg_open: %s", strerror(errno));
	return a;
}

/* Deterministic inputs: worker w, call c, element i. */
static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

static int32_t in_i32(uint32_t job, uint32_t w, uint32_t call, size_t i)
{
	return (int32_t)mix((uint32_t)i * 2654435761u ^ (w << 24) ^ (call << 16) ^ job);
}

/* Floats with magnitudes that vary from block to block (1e-6 .. 1e4). */
static float in_f32(uint32_t w, uint32_t call, size_t i, uint32_t k)
{
	uint32_t r = mix((uint32_t)i * 40503u ^ (w << 20) ^ (call << 12));
	double mag = pow(10.0, (double)(mix((uint32_t)(i / k) + call) % 11) - 6.0);
	return (float)(((double)(r % 2000001) / 1000000.0 - 1.0) * mag);
}

/* ---- a job's run: one thread per worker -------------------------------- */

struct run {
	const struct job_def *job;
	uint32_t k;
	uint32_t w;
	const size_t *lens;      /* one call per entry */
	uint32_t n_calls;
	bool f32;
	uint32_t timeout_ms;
	uint32_t start_delay_ms; /* this worker starts late */
	int skip;                /* this worker never runs (dead) */
	int rc[16];
	double max_err_ratio;    /* float: max |err| / bound over all elements */
	uint64_t bad;            /* int32: elements that differ from the reference */
	struct innet_agg_stats st;
	bool use_async;
};

static void *worker_main(void *arg)
{
	struct run *r = arg;
	if (r->skip)
		return NULL;
	if (r->start_delay_ms)
		usleep(r->start_delay_ms * 1000u);
	struct innet_agg *a = open_worker(r->job, r->w, r->k, r->timeout_ms);
	for (uint32_t c = 0; c < r->n_calls; c++) {
		size_t n = r->lens[c];
		if (!r->f32) {
			int32_t *x = malloc(n * sizeof(*x) + 1);
			for (size_t i = 0; i < n; i++)
				x[i] = in_i32(r->job->id, r->w, c, i);
			if (r->use_async) {
				r->rc[c] = innet_agg_start_i32(a, x, x, n);
				if (r->rc[c] == 0)
					r->rc[c] = innet_agg_wait(a);
			} else {
				r->rc[c] = innet_agg_allreduce_i32(a, x, x, n); /* in place */
			}
			if (r->rc[c] == 0)
				for (size_t i = 0; i < n; i++) {
					uint32_t want = 0;
					for (uint32_t w = 0; w < r->job->workers; w++)
						want += (uint32_t)in_i32(r->job->id, w, c, i);
					if ((uint32_t)x[i] != want)
						r->bad++;
				}
			free(x);
		} else {
			float *x = malloc(n * sizeof(*x) + 1), *y = malloc(n * sizeof(*y) + 1);
			for (size_t i = 0; i < n; i++)
				x[i] = in_f32(r->w, c, i, r->k);
			r->rc[c] = innet_agg_allreduce_f32(a, x, y, n);
			if (r->rc[c] == 0)
				for (size_t i = 0; i < n; i++) {
					double exact = 0, m = 0;
					size_t b0 = i / r->k * r->k;
					for (uint32_t w = 0; w < r->job->workers; w++) {
						exact += in_f32(w, c, i, r->k);
						for (size_t j = b0; j < b0 + r->k && j < n; j++)
							m = fmax(m, fabs(in_f32(w, c, j, r->k)));
					}
					double bound = innet_agg_f32_error_bound(r->job->workers, m) +
						       ldexp(fabs(y[i]), -24);
					double err = fabs((double)y[i] - exact);
					double ratio = bound > 0 ? err / bound : (err > 0 ? INFINITY : 0);
					if (ratio > r->max_err_ratio)
						r->max_err_ratio = ratio;
				}
			free(x);
			free(y);
		}
	}
	innet_agg_get_stats(a, &r->st);
	innet_agg_close(a);
	return NULL;
}

static void run_job(struct run *runs, uint32_t n)
{
	pthread_t t[64];
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &runs[i]), 0);
	for (uint32_t i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static void setup_runs(struct run *runs, const struct job_def *j, uint32_t k, const size_t *lens,
		       uint32_t n_calls, bool f32, uint32_t timeout_ms)
{
	for (uint32_t w = 0; w < j->workers; w++)
		runs[w] = (struct run){ .job = j, .k = k, .w = w, .lens = lens, .n_calls = n_calls, .f32 = f32,
					.timeout_ms = timeout_ms };
}

static void expect_all_ok(struct run *runs, uint32_t n, const char *what)
{
	for (uint32_t w = 0; w < n; w++) {
		if (runs[w].skip)
			continue;
		for (uint32_t c = 0; c < runs[w].n_calls; c++)
			if (runs[w].rc[c] != 0)
				fail_msg("%s: worker %u call %u: %s", what, w, c, strerror(-runs[w].rc[c]));
		if (runs[w].bad != 0)
			fail_msg("%s: worker %u: %llu elements differ from the reference", what, w,
				 (unsigned long long)runs[w].bad);
		if (runs[w].max_err_ratio > 1.0)
			fail_msg("%s: worker %u: float error %.3f x the bound", what, w, runs[w].max_err_ratio);
	}
}

/* ---- tests --------------------------------------------------------------- */

static const size_t lens_mixed[] = { 1, 63, 64, 65, 1000, 20000, 100003 };

static void test_i32_exact(void **state)
{
	struct job_def j = { .id = 1, .workers = 4, .slots = 64 };
	make_switch(64, &j, 1, 2, 0);
	struct run runs[4];
	setup_runs(runs, &j, 64, lens_mixed, 7, false, 5000);
	run_job(runs, 4);
	expect_all_ok(runs, 4, "int32");
	assert_int_equal(runs[0].st.calls, 7);
	assert_int_equal(runs[0].st.partial, 0);
}

static void test_f32_bound(void **state)
{
	struct job_def j = { .id = 2, .workers = 4, .slots = 32 };
	make_switch(256, &j, 1, 2, 0);
	static const size_t lens[] = { 1, 255, 256, 257, 5000, 65536 };
	struct run runs[4];
	setup_runs(runs, &j, 256, lens, 6, true, 5000);
	run_job(runs, 4);
	expect_all_ok(runs, 4, "float");
	assert_int_equal(runs[0].st.clipped, 0);
	/* the bound is not vacuous: the errors are of its order */
	assert_true(runs[0].max_err_ratio > 0.001);
}

/* 5% loss, 5% duplication, 5% reordering, in both directions of the link. */
static void test_faults(void **state)
{
	/* a second job for the float run: new handles start at round 0, and
	 * job 3's slots have moved on (a new handle on them would get -ESTALE) */
	struct job_def jobs[2] = { { .id = 3, .workers = 4, .slots = 32 }, { .id = 10, .workers = 4, .slots = 32 } };
	const struct job_def j = jobs[0];
	struct innet_switch *sw = make_switch(256, jobs, 2, 1, 0.05);
	static const size_t lens[] = { 30000, 777, 50000 };
	struct run runs[4];
	setup_runs(runs, &j, 256, lens, 3, false, 10000);
	run_job(runs, 4);
	if (getenv("AGG_DEBUG")) {
		struct innet_prog_stats d;
		struct innet_cp *dcp = innet_switch_prog(sw, "agg");
		innet_cp_stats(dcp, &d);
		for (unsigned r = 0; r < INNET_DROP_PROGRAM + 16; r++)
			if (d.drops[r])
				fprintf(stderr, "drop %s: %llu\n", innet_cp_drop_reason_name(dcp, r),
					(unsigned long long)d.drops[r]);
		for (int w = 0; w < 4; w++)
			fprintf(stderr, "w%d rc %d %d %d rtx %llu ign %llu\n", w, runs[w].rc[0], runs[w].rc[1],
				runs[w].rc[2], (unsigned long long)runs[w].st.retransmits,
				(unsigned long long)runs[w].st.results_ignored);
	}
	expect_all_ok(runs, 4, "int32 under faults");
	setup_runs(runs, &jobs[1], 256, lens, 3, true, 10000);
	run_job(runs, 4);
	expect_all_ok(runs, 4, "float under faults");
	struct innet_port_stats ps;
	innet_switch_port_stats(sw, 0, &ps);
	assert_true(ps.link_lost > 50);
	assert_true(ps.link_duplicated > 50);
	assert_true(ps.link_reordered > 50);
	uint64_t rtx = 0;
	for (int w = 0; w < 4; w++)
		rtx += runs[w].st.retransmits;
	assert_true(rtx > 10);
	/* duplicates reached the switch and were dropped or answered, never summed */
	struct innet_prog_stats st;
	innet_cp_stats(innet_switch_prog(sw, "agg"), &st);
	assert_true(st.drops[INNET_DROP_PROGRAM + 12] > 0); /* duplicate */
	assert_int_equal(st.drops[INNET_DROP_PROGRAM + 11], 0); /* spoofed */
}

/* Jumbo packets: k = INNET_AGG_K_MAX (a 9216-byte datagram), sent in UDP
 * GSO batches, under 5% loss, duplication and reordering both ways, two
 * switch threads (both accumulator banks in use): int32 bit-exact, float
 * within the bound. */
static void test_jumbo_faults(void **state)
{
	const uint32_t k = INNET_AGG_K_MAX;
	struct job_def jobs[2] = { { .id = 4, .workers = 4, .slots = 48 }, { .id = 11, .workers = 4, .slots = 48 } };
	struct innet_switch *sw = make_switch(k, jobs, 2, 2, 0.05);
	static const size_t lens_i[] = { 100 * INNET_AGG_K_MAX + 7, 1, INNET_AGG_K_MAX };
	static const size_t lens_f[] = { INNET_AGG_K_MAX + 17 };
	struct run runs[4];
	setup_runs(runs, &jobs[0], k, lens_i, 3, false, 10000);
	run_job(runs, 4);
	expect_all_ok(runs, 4, "jumbo int32 under faults");
	uint64_t rtx = 0;
	for (int w = 0; w < 4; w++)
		rtx += runs[w].st.retransmits;
	assert_true(rtx > 0);
	setup_runs(runs, &jobs[1], k, lens_f, 1, true, 10000);
	run_job(runs, 4);
	expect_all_ok(runs, 4, "jumbo float under faults");
	struct innet_port_stats ps;
	innet_switch_port_stats(sw, 0, &ps);
	assert_true(ps.link_lost > 10);
	assert_int_equal(ps.rx_pkts > 0, true);
	struct innet_prog_stats st;
	innet_cp_stats(innet_switch_prog(sw, "agg"), &st);
	assert_int_equal(st.drops[INNET_DROP_TRUNCATED], 0);
	assert_int_equal(st.drops[INNET_DROP_PROGRAM + 6], 0); /* bad_length */
}

/* 32 workers, one job, four switch threads adding into the same slots. */
static void test_32_workers_concurrent(void **state)
{
	struct job_def j = { .id = 4, .workers = 32, .slots = 16 };
	make_switch(64, &j, 1, 4, 0);
	static const size_t lens[] = { 64 * 16 * 8, 4096 + 17 };
	static struct run runs[32];
	setup_runs(runs, &j, 64, lens, 2, false, 10000);
	run_job(runs, 32);
	if (getenv("AGG_DEBUG")) {
		struct innet_prog_stats d;
		struct innet_cp *dcp = innet_switch_prog(cur_sw, "agg");
		innet_cp_stats(dcp, &d);
		for (unsigned r = 0; r < INNET_DROP_PROGRAM + 18; r++)
			if (d.drops[r])
				fprintf(stderr, "drop %s: %llu\n", innet_cp_drop_reason_name(dcp, r),
					(unsigned long long)d.drops[r]);
		int rs = innet_cp_reg_find(dcp, "state"), rr = innet_cp_reg_find(dcp, "run"),
		    rh = innet_cp_reg_find(dcp, "handles"), rc = innet_cp_reg_find(dcp, "count");
		uint64_t v, v2;
		for (uint32_t i = 0; i < 32; i++) {
			innet_cp_reg_read(dcp, (unsigned)rs, i, &v);
			innet_cp_reg_read(dcp, (unsigned)rc, i, &v2);
			fprintf(stderr, "copy %u state %016llx count %llu\n", i, (unsigned long long)v, (unsigned long long)v2);
		}
		innet_cp_reg_read(dcp, (unsigned)rr, 0, &v);
		fprintf(stderr, "run %016llx\n", (unsigned long long)v);
		for (uint32_t i = 0; i < 32; i++) {
			innet_cp_reg_read(dcp, (unsigned)rh, i, &v);
			fprintf(stderr, "handle %u %016llx\n", i, (unsigned long long)v);
		}
		for (int w = 0; w < 32; w++)
			fprintf(stderr, "w%d rc %d %d rtx %llu ign %llu res %llu\n", w, runs[w].rc[0], runs[w].rc[1],
				(unsigned long long)runs[w].st.retransmits,
				(unsigned long long)runs[w].st.results_ignored, (unsigned long long)runs[w].st.results);
	}
	expect_all_ok(runs, 32, "32 workers");
	for (int w = 0; w < 32; w++)
		assert_int_equal(runs[w].st.partial, 0);
}

/* Two jobs at once on one switch: each gets its own sums. */
static void test_two_jobs(void **state)
{
	struct job_def j[2] = { { .id = 5, .workers = 3, .slots = 8 }, { .id = 6, .workers = 2, .slots = 8 } };
	make_switch(64, j, 2, 2, 0);
	static const size_t lens[] = { 5000, 3 };
	struct run runs[5];
	setup_runs(runs, &j[0], 64, lens, 2, false, 5000);
	setup_runs(runs + 3, &j[1], 64, lens, 2, false, 5000);
	runs[4].use_async = true;
	run_job(runs, 5);
	expect_all_ok(runs, 5, "two jobs");
}

/* A worker that never shows up, no straggler timer: the others fail with
 * -ETIMEDOUT in bounded time, and stay failed. */
static void test_dead_worker(void **state)
{
	struct job_def j = { .id = 7, .workers = 3, .slots = 8 };
	make_switch(64, &j, 1, 1, 0);
	static const size_t lens[] = { 1000, 10 };
	struct run runs[3];
	setup_runs(runs, &j, 64, lens, 2, false, 300);
	runs[2].skip = 1;
	uint64_t t0 = innet_now_ns();
	run_job(runs, 3);
	double s = (double)(innet_now_ns() - t0) * 1e-9;
	for (int w = 0; w < 2; w++) {
		assert_int_equal(runs[w].rc[0], -ETIMEDOUT);
		assert_int_equal(runs[w].rc[1], -ETIMEDOUT); /* sticky, immediate */
		assert_true(runs[w].st.retransmits > 0);
	}
	assert_true(s < 3.0);
}

/* With the straggler timer: a dead worker costs one timeout per slot, once;
 * the others get the partial sums (the dead worker excluded). */
static void test_straggler_dead(void **state)
{
	struct job_def j = { .id = 8, .workers = 4, .slots = 8 };
	j.timeout_us = 50000; /* well above a prompt worker's scheduling delays (sanitizer builds) */
	make_switch(64, &j, 1, 1, 0);
	static const size_t lens[] = { 64 * 8 * 3 };
	struct run runs[4];
	setup_runs(runs, &j, 64, lens, 1, false, 5000);
	runs[3].skip = 1;
	run_job(runs, 4);
	for (int w = 0; w < 3; w++) {
		assert_int_equal(runs[w].rc[0], 0);
		/* the result is the sum of the three that took part */
		assert_int_equal(runs[w].st.partial, 24);
		assert_int_equal(runs[w].st.excluded, 0);
	}
	/* the first round of each of the 8 slots waited for the timer, which
	 * put worker 3 out of the run; the later rounds (2 per slot) closed on
	 * the three at once (until 2026-11-28 every round waited: 24 fires) */
	struct innet_prog_stats st;
	innet_cp_stats(innet_switch_prog(cur_sw, "agg"), &st);
	print_message("timer fires: %llu for 24 rounds\n", (unsigned long long)st.timer_fires);
	assert_true(st.timer_fires >= 8 && st.timer_fires <= 16);
}

/* A slow worker (starts 150 ms late; timer 50 ms): the others finish with
 * partial results; the straggler's packets are answered with the same
 * partial results (it is excluded, its elements not added), and it is out
 * of the run. In the next call its contributions come first: the rounds go
 * out with it — complete and exact — and it is back in the run; so the call
 * after, everyone at once, waits for it and is complete too. */
static int32_t straggler_out[4][64 * 4];

struct slow_run {
	const struct job_def *j;
	uint32_t w;
	int rc1, rc2;
	struct innet_agg_stats st;
	pthread_barrier_t *bar;
};

static void *slow_main(void *arg)
{
	struct slow_run *r = arg;
	if (r->w == 3)
		usleep(150000);
	struct innet_agg *a = open_worker(r->j, r->w, 64, 5000);
	int32_t x[64 * 4];
	for (int i = 0; i < 64 * 4; i++)
		x[i] = (int32_t)(r->w + 1) * 1000 + i;
	r->rc1 = innet_agg_allreduce_i32(a, x, straggler_out[r->w], 64 * 4);
	pthread_barrier_wait(r->bar);
	/* call 2: the straggler first (the others 15 ms later): its contributions
	 * are in the rounds when the others close them — back in step, back in
	 * the run; call 3: everyone at once, and the rounds wait for it again */
	for (int c = 0; c < 2; c++) {
		if (c == 0 && r->w != 3)
			usleep(15000); /* well below the 50 ms timer */
		for (int i = 0; i < 64 * 4; i++)
			x[i] = (int32_t)(r->w + 1);
		int rc = innet_agg_allreduce_i32(a, x, x, 64 * 4);
		for (int i = 0; i < 64 * 4 && rc == 0; i++)
			if (x[i] != 10)
				rc = -EPROTO;
		if (r->rc2 == 0)
			r->rc2 = rc;
	}
	innet_agg_get_stats(a, &r->st);
	innet_agg_close(a);
	return NULL;
}

static void test_straggler_slow(void **state)
{
	struct job_def j = { .id = 9, .workers = 4, .slots = 4, .timeout_us = 50000 };
	make_switch(64, &j, 1, 2, 0);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 4);
	struct slow_run r[4];
	pthread_t t[4];
	for (uint32_t w = 0; w < 4; w++) {
		r[w] = (struct slow_run){ .j = &j, .w = w, .bar = &bar };
		pthread_create(&t[w], NULL, slow_main, &r[w]);
	}
	for (int w = 0; w < 4; w++)
		pthread_join(t[w], NULL);
	pthread_barrier_destroy(&bar);
	for (int w = 0; w < 4; w++) {
		assert_int_equal(r[w].rc1, 0);
		assert_int_equal(r[w].rc2, 0);
		assert_int_equal(r[w].st.partial, 4);
		/* everyone, the straggler too, holds the same values: 1000+2000+3000 + 3i */
		for (int i = 0; i < 64 * 4; i++)
			assert_int_equal(straggler_out[w][i], 6000 + 3 * i);
	}
	assert_int_equal(r[3].st.excluded, 4);
	assert_int_equal(r[0].st.excluded, 0);
}

/* Rejoin, float32: worker 3 makes 5 calls, leaves (its handle closed: the
 * others go on without it), and a new handle on the same address joins
 * (innet_agg_join) while the others go on with the straggler timer. It
 * resumes at the others' next call and from then on holds the same values as
 * they do, bit for bit (block floating point: priming packets, exponents);
 * the last call is the full sum (within the bound: worker 3 is back). A join
 * for calls of another length is refused (-EPROTO). */
#define RJ_CALLS 40
#define RJ_N     (64 * 10)
static float rj_out[4][RJ_CALLS][RJ_N];

struct rj_run {
	const struct job_def *j;
	uint32_t w;
	int rc;
	uint32_t joined_at;  /* of the last join */
	uint32_t rejoins;    /* joins again after a call that fell behind (-ESTALE) */
	struct innet_agg_stats st;
	char err[256];
};

/* The others' progress (calls done by worker 0), and whether worker 3 is
 * back: worker 3 rejoins once the others are past call 8, and they wait at
 * call 25 until it has (so that it joins mid-job however the threads are
 * scheduled: the others do not wait for a worker that left). A joined worker
 * is not waited for until a round goes out with it: if its thread is held
 * back for two of the others' rounds (a sanitizer build on 2 cores: 1 run in
 * 20) a call fails -ESTALE, and it joins again, as the library's contract
 * says (innet/agg.h; innet allreduce --rejoin) — at most RJ_REJOINS times.
 * rj_hold: worker 3 is held back after its first join until the others are
 * at call 24 (they wait at 25 for its second join). */
#define RJ_REJOINS 5
static uint32_t rj_progress, rj_back;
static bool rj_hold;

/* Worker 3 joins: true if it has calls left to make (from r->joined_at). */
static bool rj_join(struct rj_run *r, struct innet_agg *a)
{
	r->rc = innet_agg_join(a, RJ_N, 1, &r->joined_at);
	return r->rc == 0 && r->joined_at < RJ_CALLS;
}

static void *rj_main(void *arg)
{
	struct rj_run *r = arg;
	struct innet_agg *a = open_worker(r->j, r->w, 64, 5000);
	static _Thread_local float x[RJ_N];
	for (uint32_t c = 0; c < RJ_CALLS && r->rc == 0; c++) {
		if (r->w == 0)
			__atomic_store_n(&rj_progress, c, __ATOMIC_RELEASE);
		if (r->w != 3 && c == 25)
			for (int t = 0; t < 5000 && !__atomic_load_n(&rj_back, __ATOMIC_ACQUIRE); t++)
				usleep(1000);
		if (r->w == 3 && c == 5) {
			innet_agg_close(a);
			for (int t = 0; t < 5000 && __atomic_load_n(&rj_progress, __ATOMIC_ACQUIRE) < 8; t++)
				usleep(1000);
			a = open_worker(r->j, r->w, 64, 5000);
			bool in = rj_join(r, a);
			if (!rj_hold)
				__atomic_store_n(&rj_back, 1, __ATOMIC_RELEASE);
			if (!in)
				break;
			c = r->joined_at;
			for (int t = 0; rj_hold && t < 5000 && __atomic_load_n(&rj_progress, __ATOMIC_ACQUIRE) < 24; t++)
				usleep(1000);
		}
		for (size_t i = 0; i < RJ_N; i++)
			x[i] = in_f32(r->w, c, i, 64);
		r->rc = innet_agg_allreduce_f32(a, x, rj_out[r->w][c], RJ_N);
		if (r->rc == -ESTALE && r->w == 3 && r->rejoins < RJ_REJOINS) {
			r->rejoins++;
			bool in = rj_join(r, a);
			__atomic_store_n(&rj_back, 1, __ATOMIC_RELEASE);
			if (!in)
				break;
			c = r->joined_at - 1; /* (c++) */
		}
	}
	if (r->rc != 0)
		snprintf(r->err, sizeof(r->err), "%s", innet_agg_error(a));
	innet_agg_get_stats(a, &r->st);
	innet_agg_close(a);
	return NULL;
}

/* Worker 3 leaves at call 5 and joins again past call 8; every worker ends
 * with the same sums from its join on, the last call with all four's values.
 * hold: worker 3 is held back after the join until the others are at call
 * 24: its calls fall behind (-ESTALE; the first may still take the others'
 * result, received while it was held) and it joins again. */
static void rejoin_run(bool hold)
{
	struct job_def j = { .id = 11, .workers = 4, .slots = 4, .timeout_us = 2000000 };
	/* (worker 3 leaves: the others do not wait for it; the timer only covers a
	 * prompt worker held back by the scheduler, long in a sanitizer build on a
	 * busy machine: at 200 ms a worker was closed out once (-ESTALE) in an
	 * address-sanitizer run with two other busy processes on 2 cores) */
	make_switch(64, &j, 1, 2, 0);
	rj_progress = rj_back = 0;
	rj_hold = hold;
	struct rj_run r[4];
	pthread_t t[4];
	for (uint32_t w = 0; w < 4; w++) {
		r[w] = (struct rj_run){ .j = &j, .w = w };
		pthread_create(&t[w], NULL, rj_main, &r[w]);
	}
	for (int w = 0; w < 4; w++)
		pthread_join(t[w], NULL);
	for (int w = 0; w < 4; w++)
		if (r[w].rc != 0)
			print_message("worker %d: rc %d: %s\n", w, r[w].rc, r[w].err);
	for (int w = 0; w < 4; w++)
		assert_int_equal(r[w].rc, 0);
	uint32_t jn = r[3].joined_at;
	print_message("worker 3 rejoined at call %u of %u (joined again %u times after a call "
		      "fell behind); others: %llu partial results\n", jn, RJ_CALLS, r[3].rejoins,
		      (unsigned long long)r[0].st.partial);
	assert_true(jn >= 8 && jn < RJ_CALLS);
	assert_int_equal(r[3].st.joins, 1 + r[3].rejoins);
	assert_true(r[0].st.partial > 0);
	for (uint32_t c = jn; c < RJ_CALLS; c++)
		for (int w = 0; w < 3; w++)
			assert_memory_equal(rj_out[w][c], rj_out[3][c], sizeof(rj_out[3][c]));
	/* the last call: every worker's values in the sum */
	uint32_t c = RJ_CALLS - 1;
	for (size_t b = 0; b < RJ_N; b += 64) {
		double m = 0;
		for (uint32_t w = 0; w < 4; w++)
			for (size_t i = b; i < b + 64; i++)
				m = fmax(m, fabs(in_f32(w, c, i, 64)));
		for (size_t i = b; i < b + 64; i++) {
			double want = 0;
			for (uint32_t w = 0; w < 4; w++)
				want += in_f32(w, c, i, 64);
			double y = rj_out[3][c][i];
			assert_true(fabs(y - want) <= innet_agg_f32_error_bound(4, m) + ldexp(fabs(y), -24));
		}
	}
	if (hold) {
		assert_true(r[3].rejoins >= 1);
		assert_true(jn >= 24);
	}
}

static void test_rejoin_f32(void **state)
{
	(void)state;
	rejoin_run(false);
	/* a join for calls of another length: the slots' offsets do not fit */
	struct job_def j = { .id = 11, .workers = 4, .slots = 4, .timeout_us = 2000000 };
	struct innet_agg *a = open_worker(&j, 3, 64, 2000);
	uint32_t next = 12345;
	assert_int_equal(innet_agg_join(a, 64 * 7, 1, &next), -EPROTO);
	assert_int_equal(next, 12345);
	assert_int_equal(innet_agg_join(a, 0, 1, &next), -EINVAL);
	assert_int_equal(innet_agg_join(a, RJ_N, 1, &next), 0);
	assert_int_equal(next, RJ_CALLS);
	innet_agg_close(a);
}

/* A joined worker held back past two of the others' rounds before its first
 * call: -ESTALE, and a join again puts it in step (innet/agg.h). */
static void test_rejoin_held(void **state)
{
	(void)state;
	rejoin_run(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_i32_exact, teardown),
		cmocka_unit_test_teardown(test_f32_bound, teardown),
		cmocka_unit_test_teardown(test_faults, teardown),
		cmocka_unit_test_teardown(test_jumbo_faults, teardown),
		cmocka_unit_test_teardown(test_32_workers_concurrent, teardown),
		cmocka_unit_test_teardown(test_two_jobs, teardown),
		cmocka_unit_test_teardown(test_dead_worker, teardown),
		cmocka_unit_test_teardown(test_straggler_dead, teardown),
		cmocka_unit_test_teardown(test_straggler_slow, teardown),
		cmocka_unit_test_teardown(test_rejoin_f32, teardown),
		cmocka_unit_test_teardown(test_rejoin_held, teardown),
	};
	if (getenv("AGG_TEST") != NULL)
		cmocka_set_test_filter(getenv("AGG_TEST")); /* one test, when debugging */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
