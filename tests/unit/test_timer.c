/*
 * test_timer.c — Trio timers (src/engine/timer.c) through a started switch:
 * a timer fires once, not before its delay and not much after it (a generous
 * bound: correctness, not speed), with the arg it was armed with; re-arming
 * replaces the deadline and the arg; cancelling prevents the firing; arming
 * a timer the program did not declare faults the packet; 10k timers all fire
 * exactly once; a callback can re-arm its own timer and emit packets; an arm
 * handed over the way the XDP target does it (slot written first, queued
 * later) does not undo a cancel or a newer arm made in between.
 *
 * The test program arms and cancels timers as packets injected with
 * innet_switch_inject ask (struct tmr_req); its on_timer counts each firing
 * in registers (how many times, when, with which arg) that the test polls
 * through innet_cp_reg_read.
 *
 * Ports use 127.204.P.x (P from the process id) and UDP ports 44000 and up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/clock.h"
#include "innet/switch.h"
#include "targets/user/user_pvt.h"

#define TEST_NET 204u
#define UDP_TMR  44000u

#define N_TIMERS 10240u
#define MS       1000000ull

/* Generous: a timer may fire this late (the machine may be loaded, and the
 * sanitizer builds are slow). */
#define LATE_NS  (200 * MS)

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ */
/* The program                                                                */

enum { R_FIRES, R_FIRE_NS, R_ARM_NS, R_ARG };

enum tmr_op { TMR_ARM = 1, TMR_CANCEL = 2 };

/* arg flags understood by on_timer */
#define ARG_EMIT  (1ull << 63)   /* emit {timer, arg} out of port 0 */
#define ARG_REARM (1ull << 62)   /* re-arm after 5 ms while the low bits are > 0, decrementing */
#define ARG_COUNT(a) ((a) & 0xffffffffull)

struct tmr_req {
	uint8_t op;
	uint32_t first;      /* timers first .. first + count - 1 */
	uint32_t count;
	uint64_t delay_ns;   /* delay of timer first + i: delay_ns + i * step_ns */
	uint64_t step_ns;
	uint64_t arg;
} __attribute__((packed));

static enum innet_action tmr_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct tmr_req r;
	if (pkt->len < sizeof(r))
		return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
	memcpy(&r, pkt->data, sizeof(r));
	for (uint32_t i = 0; i < r.count; i++) {
		uint32_t t = r.first + i;
		if (r.op == TMR_ARM) {
			if (t < N_TIMERS)
				innet_reg_write(ctx, R_ARM_NS, t, ctx->now_ns);
			innet_timer_arm(ctx, t, r.delay_ns + i * r.step_ns, r.arg);
		} else if (r.op == TMR_CANCEL) {
			innet_timer_cancel(ctx, t);
		}
	}
	return INNET_CONSUMED;
}

static void tmr_on_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	/* The time and arg first, the count last: the test reads the count and
	 * then the rest (release stores, acquire loads). */
	innet_reg_write(ctx, R_FIRE_NS, timer, ctx->now_ns);
	innet_reg_write(ctx, R_ARG, timer, arg);
	innet_reg_fetch_add(ctx, R_FIRES, timer, 1);
	if (arg & ARG_EMIT) {
		uint64_t msg[2] = { timer, arg };
		struct innet_out out = { .port = 0 };
		innet_emit(ctx, &out, false, msg, sizeof(msg));
	}
	if ((arg & ARG_REARM) && ARG_COUNT(arg) > 0)
		innet_timer_arm(ctx, timer, 5 * MS, arg - 1);
}

static int tmr_setup(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_reg(d, R_FIRES, "fires", 4, N_TIMERS);
	if (rc == 0)
		rc = innet_decl_reg(d, R_FIRE_NS, "fire_ns", 8, N_TIMERS);
	if (rc == 0)
		rc = innet_decl_reg(d, R_ARM_NS, "arm_ns", 8, N_TIMERS);
	if (rc == 0)
		rc = innet_decl_reg(d, R_ARG, "arg", 8, N_TIMERS);
	if (rc == 0)
		rc = innet_decl_timers(d, N_TIMERS);
	return rc;
}

static const struct innet_program prog_tmr = {
	.name = "tmr", .model = INNET_MODEL_TRIO, .setup = tmr_setup, .handle = tmr_handle,
	.on_timer = tmr_on_timer,
};

/* ------------------------------------------------------------------------ */
/* Fixture                                                                    */

struct fx {
	struct innet_switch *sw;
	struct innet_cp *cp;
	int rx_fd;   /* the peer of port 0: receives what timers emit */
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->rx_fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(f->rx_fd >= 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(UDP_TMR),
				   .sin_addr.s_addr = htonl(test_ip(100)) };
	assert_int_equal(bind(f->rx_fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(f->rx_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));

	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "timer-test");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = test_ip(1);
	c.ports[0].peer_ip = test_ip(100);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "tmr");
	c.progs[0].program = &prog_tmr;
	c.progs[0].udp[0] = UDP_TMR;
	c.progs[0].n_udp = 1;
	char err[256];
	f->sw = innet_switch_create(&c, err, sizeof(err));
	if (f->sw == NULL)
		fail_msg("create: %s", err);
	f->cp = innet_switch_prog(f->sw, "tmr");
	assert_int_equal(innet_cp_n_timers(f->cp), N_TIMERS);
	assert_int_equal(test_start(f->sw), 0);
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	innet_switch_destroy(f->sw);
	close(f->rx_fd);
	free(f);
	return 0;
}

/* Send one request; returns the verdict. */
static struct innet_inject_result *req(struct fx *f, uint8_t op, uint32_t first, uint32_t count,
				       uint64_t delay_ns, uint64_t step_ns, uint64_t arg)
{
	static struct innet_inject_result res;
	struct tmr_req r = { .op = op, .first = first, .count = count, .delay_ns = delay_ns,
			     .step_ns = step_ns, .arg = arg };
	struct innet_addr src = { .ip = test_ip(200), .udp = 1000 };
	assert_int_equal(innet_switch_inject(f->sw, 0, UDP_TMR, &src, &r, sizeof(r), &res), 0);
	return &res;
}

static void arm(struct fx *f, uint32_t timer, uint64_t delay_ns, uint64_t arg)
{
	struct innet_inject_result *res = req(f, TMR_ARM, timer, 1, delay_ns, 0, arg);
	assert_int_equal(res->action, INNET_CONSUMED);
}

static uint64_t reg(struct fx *f, unsigned r, uint32_t idx)
{
	uint64_t v = 0;
	assert_int_equal(innet_cp_reg_read(f->cp, r, idx, &v), 0);
	return v;
}

/* Wait until timer t has fired at least `times` times; returns the test's
 * clock when it saw it, or 0 after timeout_ms. */
static uint64_t wait_fires(struct fx *f, uint32_t t, uint64_t times, uint64_t timeout_ms)
{
	uint64_t end = innet_now_ns() + timeout_ms * MS;
	while (innet_now_ns() < end) {
		if (reg(f, R_FIRES, t) >= times)
			return innet_now_ns();
		sleep_ms(1);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */

static void test_fires_once_after_delay(void **state)
{
	struct fx *f = *state;
	const uint64_t delay = 50 * MS;
	uint64_t t0 = innet_now_ns();
	arm(f, 5, delay, 0xABCD);
	uint64_t seen = wait_fires(f, 5, 1, 3000);
	assert_true(seen != 0);
	/* not before its delay, by the test's own clock ... */
	if (seen - t0 < delay)
		fail_msg("fired after %llu us, armed for %llu us", (unsigned long long)(seen - t0) / 1000,
			 (unsigned long long)delay / 1000);
	/* ... nor by the switch's, and not much after */
	uint64_t armed = reg(f, R_ARM_NS, 5), fired = reg(f, R_FIRE_NS, 5);
	assert_true(armed >= t0);
	assert_true(fired >= armed + delay);
	assert_true(fired - (armed + delay) < LATE_NS);
	assert_int_equal(reg(f, R_ARG, 5), 0xABCD);
	sleep_ms(100);
	assert_int_equal(reg(f, R_FIRES, 5), 1); /* once */
	for (uint32_t t = 0; t < 16; t++)
		if (t != 5)
			assert_int_equal(reg(f, R_FIRES, t), 0);

	innet_switch_stop(f->sw);
	struct innet_prog_stats st;
	innet_cp_stats(f->cp, &st);
	assert_int_equal(st.timer_fires, 1);
	assert_int_equal(st.rx_pkts, 1);
	assert_int_equal(st.actions[INNET_CONSUMED], 1);
}

static void test_rearm_replaces_deadline(void **state)
{
	struct fx *f = *state;
	/* Timer 1: 300 ms, re-armed at once for 30 ms with another arg. */
	arm(f, 1, 300 * MS, 111);
	arm(f, 1, 30 * MS, 222);
	/* Timer 2: 30 ms, re-armed at once for 250 ms. */
	uint64_t t0 = innet_now_ns();
	arm(f, 2, 30 * MS, 333);
	arm(f, 2, 250 * MS, 444);

	assert_true(wait_fires(f, 1, 1, 3000) != 0);
	assert_int_equal(reg(f, R_ARG, 1), 222);
	uint64_t seen2 = wait_fires(f, 2, 1, 3000);
	assert_true(seen2 != 0);
	if (seen2 - t0 < 250 * MS)
		fail_msg("timer 2 fired %llu ms after arming: the replaced 30 ms deadline fired",
			 (unsigned long long)(seen2 - t0) / MS);
	assert_int_equal(reg(f, R_ARG, 2), 444);
	assert_true(reg(f, R_FIRE_NS, 2) >= reg(f, R_ARM_NS, 2) + 250 * MS);
	/* Wait past the first deadline of timer 1: neither fires again. */
	while (innet_now_ns() - t0 < 400 * MS)
		sleep_ms(10);
	assert_int_equal(reg(f, R_FIRES, 1), 1);
	assert_int_equal(reg(f, R_FIRES, 2), 1);

	/* Re-arming after it fired arms it again. */
	arm(f, 1, 10 * MS, 555);
	assert_true(wait_fires(f, 1, 2, 3000) != 0);
	assert_int_equal(reg(f, R_ARG, 1), 555);
	sleep_ms(50);
	assert_int_equal(reg(f, R_FIRES, 1), 2);
}

static void test_cancel(void **state)
{
	struct fx *f = *state;
	arm(f, 3, 50 * MS, 1);
	arm(f, 4, 50 * MS, 1);
	struct innet_inject_result *res = req(f, TMR_CANCEL, 3, 1, 0, 0, 0);
	assert_int_equal(res->action, INNET_CONSUMED);
	assert_true(wait_fires(f, 4, 1, 3000) != 0); /* the other one fires */
	sleep_ms(150);
	assert_int_equal(reg(f, R_FIRES, 3), 0);

	/* A cancelled timer can be armed again. */
	arm(f, 3, 10 * MS, 7);
	assert_true(wait_fires(f, 3, 1, 3000) != 0);
	assert_int_equal(reg(f, R_ARG, 3), 7);

	/* Cancelling a timer that is not armed, or does not exist, is harmless. */
	res = req(f, TMR_CANCEL, 9, 1, 0, 0, 0);
	assert_int_equal(res->action, INNET_CONSUMED);
	res = req(f, TMR_CANCEL, N_TIMERS, 3, 0, 0, 0);
	assert_int_equal(res->action, INNET_CONSUMED);
	sleep_ms(30);
	assert_int_equal(reg(f, R_FIRES, 9), 0);
	assert_int_equal(reg(f, R_FIRES, 3), 1);
	assert_int_equal(reg(f, R_FIRES, 4), 1);
}

/* The XDP target's arm: the eBPF program writes the slot (arg, then the
 * deadline) and hands (timer, deadline) over through its ring; user space
 * queues it when it drains the ring (the hand-off API: innet_handoff_timer),
 * maybe after the eBPF program cancelled the timer (the round finished) or
 * armed it again. */
static void slot_store(struct fx *f, uint32_t t, uint64_t deadline, uint64_t arg)
{
	atomic_store(&f->cp->timers[t].arg, arg);
	atomic_store(&f->cp->timers[t].deadline_ns, deadline);
}

static int handed_over(struct fx *f, uint32_t t, uint64_t deadline)
{
	struct innet_user *u = f->sw->target.priv;   /* the udp target's engine */
	return innet_handoff_timer(innet_handoff_seat(u, INNET_HANDOFF_RING), f->cp, t, deadline);
}

static void test_handed_over_arm(void **state)
{
	struct fx *f = *state;
	/* armed, cancelled, then the arm reaches the queue: stays cancelled */
	uint64_t d6 = innet_now_ns() + 20 * MS;
	slot_store(f, 6, d6, 66);
	struct innet_inject_result *res = req(f, TMR_CANCEL, 6, 1, 0, 0, 0);
	assert_int_equal(res->action, INNET_CONSUMED);
	assert_int_equal(handed_over(f, 6, d6), 0);
	/* armed twice before either arm is queued: the newer one fires, once */
	uint64_t t0 = innet_now_ns(), d7a = t0 + 20 * MS, d7b = t0 + 120 * MS;
	slot_store(f, 7, d7a, 71);
	slot_store(f, 7, d7b, 72);
	assert_int_equal(handed_over(f, 7, d7a), 0);
	assert_int_equal(handed_over(f, 7, d7b), 0);
	/* armed and queued: fires with its arg */
	uint64_t d8 = innet_now_ns() + 20 * MS;
	slot_store(f, 8, d8, 88);
	assert_int_equal(handed_over(f, 8, d8), 0);

	assert_true(wait_fires(f, 8, 1, 3000) != 0);
	assert_int_equal(reg(f, R_ARG, 8), 88);
	assert_true(wait_fires(f, 7, 1, 3000) != 0);
	assert_true(reg(f, R_FIRE_NS, 7) >= d7b);
	assert_int_equal(reg(f, R_ARG, 7), 72);
	sleep_ms(50);
	assert_int_equal(reg(f, R_FIRES, 6), 0);
	assert_int_equal(reg(f, R_FIRES, 7), 1);
	assert_int_equal(reg(f, R_FIRES, 8), 1);
}

static void test_arm_out_of_range_faults(void **state)
{
	struct fx *f = *state;
	struct innet_inject_result *res = req(f, TMR_ARM, N_TIMERS, 1, MS, 0, 0);
	assert_int_equal(res->action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(f->cp, res->drop_reason), "reg_out_of_range");
	res = req(f, TMR_ARM, UINT32_MAX, 1, MS, 0, 0);
	assert_int_equal(res->action, INNET_DROP);
	assert_int_equal(res->drop_reason, INNET_DROP_REG_OOB);
	/* The last declared timer is fine. */
	arm(f, N_TIMERS - 1, MS, 9);
	assert_true(wait_fires(f, N_TIMERS - 1, 1, 3000) != 0);
	innet_switch_stop(f->sw);
	struct innet_prog_stats st;
	innet_cp_stats(f->cp, &st);
	assert_int_equal(st.drops[INNET_DROP_REG_OOB], 2);
	assert_int_equal(st.timer_fires, 1);
}

static void test_many_timers_fire_once(void **state)
{
	struct fx *f = *state;
	const uint32_t n = 10000;
	/* Ten packets of 1000 timers each; delays from 10 ms to 60 ms, so the
	 * firings interleave with the arming. */
	for (uint32_t p = 0; p < 10; p++) {
		struct innet_inject_result *res =
			req(f, TMR_ARM, p * 1000, 1000, 10 * MS + p * MS, 50 * MS / 1000, p);
		assert_int_equal(res->action, INNET_CONSUMED);
	}
	uint64_t end = innet_now_ns() + 10000 * MS;
	uint64_t total = 0;
	while (innet_now_ns() < end) {
		total = 0;
		for (uint32_t t = 0; t < n; t++)
			total += reg(f, R_FIRES, t);
		if (total >= n)
			break;
		sleep_ms(10);
	}
	sleep_ms(50);
	uint32_t missing = 0, extra = 0, early = 0, late = 0;
	for (uint32_t t = 0; t < n; t++) {
		uint64_t fires = reg(f, R_FIRES, t);
		missing += fires == 0;
		extra += fires > 1;
		uint32_t p = t / 1000, i = t % 1000;
		uint64_t due = reg(f, R_ARM_NS, t) + 10 * MS + p * MS + i * (50 * MS / 1000);
		uint64_t fired = reg(f, R_FIRE_NS, t);
		if (fires) {
			early += fired < due;
			late += fired >= due && fired - due > 2 * LATE_NS;
			assert_int_equal(reg(f, R_ARG, t), p);
		}
	}
	if (missing || extra || early || late)
		fail_msg("of %u timers: %u never fired, %u fired more than once, %u early, %u very late",
			 n, missing, extra, early, late);
	for (uint32_t t = n; t < N_TIMERS; t++)
		assert_int_equal(reg(f, R_FIRES, t), 0);
	innet_switch_stop(f->sw);
	struct innet_prog_stats st;
	innet_cp_stats(f->cp, &st);
	assert_int_equal(st.timer_fires, n);
}

static void test_callback_rearms_and_emits(void **state)
{
	struct fx *f = *state;
	/* Timer 6 fires, re-arms itself 4 more times (5 firings in all). */
	arm(f, 6, 5 * MS, ARG_REARM | 4);
	assert_true(wait_fires(f, 6, 5, 3000) != 0);
	sleep_ms(50);
	assert_int_equal(reg(f, R_FIRES, 6), 5);
	assert_int_equal(reg(f, R_ARG, 6), ARG_REARM | 0);

	/* Timer 7 emits {7, arg} to port 0's peer when it fires. */
	arm(f, 7, 20 * MS, ARG_EMIT | 42);
	uint64_t msg[2] = { 0, 0 };
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t got = recvfrom(f->rx_fd, msg, sizeof(msg), 0, (struct sockaddr *)&from, &fl);
	assert_int_equal(got, (ssize_t)sizeof(msg));
	assert_int_equal(msg[0], 7);
	assert_int_equal(msg[1], ARG_EMIT | 42);
	assert_int_equal(ntohl(from.sin_addr.s_addr), test_ip(1));
	assert_int_equal(ntohs(from.sin_port), UDP_TMR);
	assert_int_equal(reg(f, R_FIRES, 7), 1);
	/* Exactly one packet. */
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	setsockopt(f->rx_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_true(recv(f->rx_fd, msg, sizeof(msg), 0) < 0);

	innet_switch_stop(f->sw);
	struct innet_prog_stats st;
	innet_cp_stats(f->cp, &st);
	assert_int_equal(st.timer_fires, 6);
	assert_int_equal(st.emitted, 1);
	assert_int_equal(st.tx_pkts, 1);
	struct innet_port_stats ps;
	assert_int_equal(innet_switch_port_stats(f->sw, 0, &ps), 0);
	assert_int_equal(ps.tx_pkts, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fires_once_after_delay, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rearm_replaces_deadline, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cancel, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_handed_over_arm, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_arm_out_of_range_faults, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_many_timers_fire_once, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_callback_rearms_and_emits, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
