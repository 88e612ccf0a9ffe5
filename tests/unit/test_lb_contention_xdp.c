/*
 * test_lb_contention_xdp.c — the load balancer's connection table under
 * contention on the XDP target: the eBPF program runs the packets of
 * established flows through BPF_PROG_TEST_RUN on two CPUs at once (a thread
 * pinned to each), while a writer thread rewrites the same flows' entries in
 * the shared maps from user space, as the control plane does. No lookup may
 * take an entry being written for a missing one: no connection made anew, no
 * entry changed, every drop a conn_busy (lb_contention.h says why). Under
 * the old bound (4 tries, then "not found") this failed within milliseconds.
 *
 * Needs root (BPF) and two CPUs; skips (77) otherwise. About a second.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "unit/lb_contention.h"
#include "engine/target.h"

#define RUN_NS   600000000ull   /* each reader, once the writer is going */
#define RUN_MAX  400000u        /* and at most this many runs */

static struct lbc t = { .net = 215 };

struct reader {
	pthread_t th;
	uint32_t first;       /* flows first, first + 2, ... */
	uint64_t runs;
	int err;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	uint8_t q[32] = "query";
	while (atomic_load(&t.writes) < 100)
		sched_yield();
	uint64_t end = innet_now_ns() + RUN_NS;
	for (uint32_t i = 0; r->runs < RUN_MAX && (r->runs % 64 != 0 || innet_now_ns() < end); i++) {
		uint32_t f = (r->first + 2 * i) % LBC_FLOWS;
		int rc = t.sw->target.ops->test_run(t.sw->target.priv, 0, LBC_VIP, &t.client[f], q,
						     sizeof(q), 1);
		if (rc != 0) {
			r->err = rc;
			break;
		}
		r->runs++;
	}
	return NULL;
}

static void test_xdp_lookups_race_a_writer(void **state)
{
	lbc_switch(&t, true, 1);
	assert_non_null(t.sw->target.ops->test_run);
	/* The flows' first packets make their connections (one at a time). */
	static struct innet_inject_result res;
	uint8_t q[32] = "query";
	for (uint32_t f = 0; f < LBC_FLOWS; f++) {
		t.client[f] = (struct innet_addr){ .ip = lbc_ip(&t, 20), .udp = (uint16_t)(40000 + f) };
		assert_int_equal(innet_switch_inject(t.sw, 0, LBC_VIP, &t.client[f], q, sizeof(q), &res), 0);
		assert_int_equal(res.action, INNET_FORWARD);
	}
	lbc_snapshot(&t);
	struct innet_prog_stats st0;
	innet_cp_stats(t.cp, &st0);

	lbc_writer_start(&t);
	struct reader r[2] = { { .first = 0 }, { .first = 1 } };
	for (int i = 0; i < 2; i++) {
		pthread_attr_t attr;
		assert_true(lbc_attr_cpu(&attr, i));
		assert_int_equal(pthread_create(&r[i].th, &attr, reader_main, &r[i]), 0);
		pthread_attr_destroy(&attr);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(r[i].th, NULL);
	lbc_writer_stop(&t);
	for (int i = 0; i < 2; i++)
		assert_int_equal(r[i].err, 0);

	uint64_t runs = r[0].runs + r[1].runs;
	uint64_t drops = lbc_check(&t);
	struct innet_prog_stats st;
	innet_cp_stats(t.cp, &st);
	uint64_t fwd = st.actions[INNET_FORWARD] - st0.actions[INNET_FORWARD];
	printf("# %llu runs on 2 CPUs: %llu forwarded, %llu dropped\n", (unsigned long long)runs,
	       (unsigned long long)fwd, (unsigned long long)drops);
	/* every run was the eBPF program's, and each either went to its
	 * connection or was dropped as busy */
	assert_int_equal(st.xdp_rx_pkts - st0.xdp_rx_pkts, runs);
	assert_int_equal(fwd + drops, runs);
	innet_switch_destroy(t.sw);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skip: the XDP target needs root (BPF_PROG_TEST_RUN)\n");
		return 77;
	}
	if (lbc_cpus() < 2) {
		printf("skip: needs two CPUs (lookups on both at once)\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xdp_lookups_race_a_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
