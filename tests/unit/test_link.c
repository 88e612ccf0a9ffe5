/*
 * test_link.c — link emulation (src/engine/link.c): the fate of each packet
 * is a pure function of the seed (same seed, same sequence), loss,
 * duplication and reordering happen at the configured rates, delay and
 * jitter stay within their bounds, held packets come back in due order, and
 * the held queue refuses packets when full. Then end to end: a forwarding
 * switch with 20% loss on one port's egress, over real loopback UDP, loses
 * exactly the packets the seeded sequence says, and counts each one.
 *
 * Ports use 127.203.P.x (P from the process id) and UDP ports 43000 and up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/clock.h"

#include "unit/testutil.h"
#include "targets/user/user_pvt.h"

#define TEST_NET 203u
#define UDP_FWD  43000u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

#define NOW 1000000000ull   /* an arbitrary "now" for decisions, in ns */

struct fate {
	enum innet_link_fate fate;
	uint64_t due;
	uint32_t flags;
};

static void draw(const struct innet_link_conf *lc, uint64_t seed, struct fate *out, uint32_t n)
{
	struct innet_link_state ls = { .rng = seed };
	for (uint32_t i = 0; i < n; i++) {
		out[i].due = 0;
		out[i].fate = innet_link_decide(lc, &ls, NOW, &out[i].due, &out[i].flags);
	}
}

static void test_active(void **state)
{
	struct innet_link_conf lc = { 0 };
	assert_false(innet_link_active(&lc));
	lc.loss = 0.5;
	assert_false(innet_link_active(&lc)); /* neither direction */
	lc.on_egress = true;
	assert_true(innet_link_active(&lc));
	lc = (struct innet_link_conf){ .on_ingress = true };
	assert_false(innet_link_active(&lc)); /* a direction, no effect */
	lc.delay_us = 1;
	assert_true(innet_link_active(&lc));
	lc = (struct innet_link_conf){ .on_ingress = true, .jitter_us = 5 };
	assert_true(innet_link_active(&lc));
	lc = (struct innet_link_conf){ .on_ingress = true, .dup = 0.01 };
	assert_true(innet_link_active(&lc));
	lc = (struct innet_link_conf){ .on_ingress = true, .reorder = 0.01 };
	assert_true(innet_link_active(&lc));
}

static void test_same_seed_same_fates(void **state)
{
	enum { N = 20000 };
	static struct fate a[N], b[N], c[N];
	struct innet_link_conf lc = { .loss = 0.1, .dup = 0.1, .reorder = 0.1, .delay_us = 50,
				      .jitter_us = 30, .on_egress = true };
	draw(&lc, 0x1234, a, N);
	draw(&lc, 0x1234, b, N);
	draw(&lc, 0x1235, c, N);
	uint32_t differ = 0;
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(a[i].fate, b[i].fate);
		assert_int_equal(a[i].due, b[i].due);
		assert_int_equal(a[i].flags, b[i].flags);
		differ += a[i].fate != c[i].fate || a[i].flags != c[i].flags || a[i].due != c[i].due;
	}
	assert_true(differ > N / 10); /* another seed: another sequence */

	/* Every packet draws the same amount of randomness whatever its fate:
	 * changing the loss rate does not shift the dup decisions. */
	struct innet_link_conf lossless = lc;
	lossless.loss = 0;
	draw(&lossless, 0x1234, c, N);
	for (uint32_t i = 0; i < N; i++)
		assert_int_equal(a[i].flags & INNET_LINK_F_DUP, c[i].flags & INNET_LINK_F_DUP);
}

/* The seeds workers start from: the port's seed if set, else derived from
 * the switch seed and the port; never the same for two ports or workers. */
static void test_worker_seeds(void **state)
{
	const struct innet_program *fwd = innet_program_find("forward");
	assert_non_null(fwd);
	uint64_t rng[2][3][2]; /* [run][port][worker] */
	for (int run = 0; run < 2; run++) {
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 2;
		c.seed = 99;
		c.n_ports = 3;
		for (uint32_t p = 0; p < 3; p++)
			c.ports[p].ip = test_ip(20 + p);
		c.ports[2].link.seed = 777;
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
		c.progs[0].program = fwd;
		c.progs[0].udp[0] = UDP_FWD + 5;
		c.progs[0].n_udp = 1;
		char err[256];
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw == NULL)
			fail_msg("create: %s", err);
		for (uint32_t p = 0; p < 3; p++)
			for (uint32_t w = 0; w < 2; w++)
				rng[run][p][w] = ((struct innet_user *)sw->target.priv)->workers[w].links[p].rng;
		innet_switch_destroy(sw);
	}
	for (uint32_t p = 0; p < 3; p++)
		for (uint32_t w = 0; w < 2; w++) {
			assert_int_equal(rng[0][p][w], rng[1][p][w]); /* reproducible */
			assert_true(rng[0][p][w] != 0);
			for (uint32_t q = 0; q < 3; q++)
				for (uint32_t v = 0; v < 2; v++)
					if (p != q || w != v)
						assert_true(rng[0][p][w] != rng[0][q][v]);
		}
	assert_int_equal(rng[0][2][0], 777); /* worker 0 uses the port's seed as given */
}

static void test_rates(void **state)
{
	enum { N = 100000 };
	static struct fate f[N];
	static const struct {
		double loss, dup, reorder;
	} cases[] = {
		{ 0.2, 0.1, 0.05 }, { 0, 0, 0 }, { 1, 0, 0 }, { 0.5, 0.5, 0.5 }, { 0.01, 0.3, 0 },
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct innet_link_conf lc = { .loss = cases[k].loss, .dup = cases[k].dup,
					      .reorder = cases[k].reorder, .on_egress = true };
		draw(&lc, 42 + k, f, N);
		uint32_t lost = 0, dup = 0, reordered = 0, held = 0, kept = 0, lost_and_dup = 0;
		for (uint32_t i = 0; i < N; i++) {
			bool is_dup = f[i].flags & INNET_LINK_F_DUP;
			dup += is_dup;
			if (f[i].fate == INNET_LINK_LOSE) {
				lost++;
				lost_and_dup += is_dup;
				continue;
			}
			kept++;
			if (f[i].flags & INNET_LINK_F_REORDER) {
				reordered++;
				assert_int_equal(f[i].fate, INNET_LINK_HOLD);
				/* held back 300 us so that later packets overtake it */
				assert_int_equal(f[i].due, NOW + 300000);
			}
			held += f[i].fate == INNET_LINK_HOLD;
		}
		/* Binomial: 5 standard deviations is at most 0.0079 for N = 100k. */
		double tol = 0.008;
		assert_true(fabs((double)lost / N - cases[k].loss) <= tol);
		assert_true(fabs((double)dup / N - cases[k].dup) <= tol);
		if (kept > 1000)
			assert_true(fabs((double)reordered / kept - cases[k].reorder) <= 2 * tol);
		assert_int_equal(held, reordered); /* no delay: only reordering holds */
		/* Independent draws: P(lost and dup) = loss * dup. */
		assert_true(fabs((double)lost_and_dup / N - cases[k].loss * cases[k].dup) <= tol);
		if (cases[k].loss == 0)
			assert_int_equal(lost, 0);
		if (cases[k].loss == 1)
			assert_int_equal(lost, N);
	}
}

static void test_delay_and_jitter(void **state)
{
	enum { N = 50000 };
	static struct fate f[N];
	struct innet_link_conf lc = { .delay_us = 100, .jitter_us = 50, .reorder = 0.1,
				      .on_ingress = true };
	draw(&lc, 5, f, N);
	uint64_t lo = UINT64_MAX, hi = 0, sum = 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(f[i].fate, INNET_LINK_HOLD); /* everything is delayed */
		uint64_t d = f[i].due - NOW;
		if (f[i].flags & INNET_LINK_F_REORDER) {
			assert_true(d >= 400000 && d <= 450000);
			continue;
		}
		assert_true(d >= 100000 && d <= 150000);
		lo = d < lo ? d : lo;
		hi = d > hi ? d : hi;
		sum += d;
		n++;
	}
	/* Jitter is uniform over [0, 50] us: the extremes are reached, the mean is 25. */
	assert_true(lo < 101000);
	assert_true(hi >= 149000);
	assert_true(fabs((double)sum / n - 125000.0) < 1000.0);
}

/* ------------------------------------------------------------------------ */
/* The held queue                                                             */

static uint64_t xrand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_held_heap_order(void **state)
{
	struct innet_link_state ls = { .rng = 1 };
	enum { N = 3000 };
	uint64_t seed = 77;
	for (uint32_t i = 0; i < N; i++) {
		uint64_t due = 1000 + xrand(&seed) % 100000;
		if (i % 10 == 0)
			due = 50000; /* ties */
		uint8_t data[12];
		memcpy(data, &i, 4);
		memcpy(data + 4, &due, 8);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)i),
					 .sin_addr.s_addr = htonl(test_ip(1)) };
		assert_int_equal(innet_link_hold(&ls, due, data, 4 + (i % 9), (int)i, (uint16_t)(i % 7),
						 (uint16_t)(i % 5), (uint16_t)(i * 3), &a), 0);
	}
	assert_int_equal(ls.n_held, N);
	/* Nothing is due before the earliest deadline. */
	assert_null(innet_link_pop_due(&ls, 999));
	uint64_t first = innet_link_next_due(&ls);
	assert_true(first >= 1000);

	/* Release in steps: each step returns exactly what is due, in order. */
	uint64_t last = 0;
	uint32_t released = 0;
	for (uint64_t now = 10000; now <= 110000; now += 10000) {
		struct innet_held *h;
		while ((h = innet_link_pop_due(&ls, now)) != NULL) {
			assert_true(h->due_ns <= now);
			assert_true(h->due_ns >= last);
			last = h->due_ns;
			uint32_t id;
			memcpy(&id, h->data, 4);
			assert_true(id < N);
			assert_int_equal(h->len, 4 + (id % 9));
			assert_int_equal(h->fd, (int)id);
			assert_int_equal(h->port, id % 7);
			assert_int_equal(h->prog, id % 5);
			assert_int_equal(h->dst_udp, (uint16_t)(id * 3));
			assert_int_equal(ntohs(h->addr.sin_port), (uint16_t)id);
			if (h->len >= 12) {
				uint64_t due;
				memcpy(&due, h->data + 4, 8);
				assert_int_equal(due, h->due_ns);
			}
			free(h);
			released++;
		}
		assert_true(innet_link_next_due(&ls) > now);
	}
	assert_int_equal(released, N);
	assert_int_equal(innet_link_next_due(&ls), UINT64_MAX);
	assert_null(innet_link_pop_due(&ls, UINT64_MAX));
	innet_link_state_fini(&ls);
}

static void test_held_queue_full(void **state)
{
	struct innet_link_state ls = { .rng = 1 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	uint8_t data[64] = { 0 };
	uint32_t n = 0;
	while (innet_link_hold(&ls, 1000 + n, data, sizeof(data), -1, 0, 0, 0, &a) == 0) {
		n++;
		assert_true(n <= 1u << 20);
	}
	assert_int_equal(n, 4096); /* HELD_MAX */
	assert_int_equal(innet_link_hold(&ls, 1, data, sizeof(data), -1, 0, 0, 0, &a), -ENOSPC);
	struct innet_held *h = innet_link_pop_due(&ls, UINT64_MAX);
	assert_non_null(h);
	assert_int_equal(h->due_ns, 1000);
	free(h);
	assert_int_equal(innet_link_hold(&ls, 1, data, sizeof(data), -1, 0, 0, 0, &a), 0);
	h = innet_link_pop_due(&ls, UINT64_MAX);
	assert_int_equal(h->due_ns, 1); /* the newcomer is the earliest */
	free(h);
	innet_link_state_fini(&ls); /* frees the 4095 still held */
	assert_int_equal(ls.n_held, 0);
	assert_null(ls.heap);
}

/* ------------------------------------------------------------------------ */
/* End to end over loopback UDP                                              */

struct receiver {
	pthread_t th;
	int fd;
	_Atomic uint32_t count;
	_Atomic bool stop;
	uint32_t bad;
};

static void *receiver_main(void *arg)
{
	struct receiver *r = arg;
	uint8_t buf[2048];
	while (!atomic_load(&r->stop)) {
		ssize_t n = recv(r->fd, buf, sizeof(buf), 0);
		if (n < 0)
			continue; /* timeout: look at stop again */
		if (n != 64 || buf[0] != 'L')
			r->bad++;
		atomic_fetch_add(&r->count, 1);
	}
	return NULL;
}

static int udp_socket(uint32_t ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	int buf = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	struct timeval tv = { .tv_sec = 0, .tv_usec = 50000 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void test_end_to_end_loss(void **state)
{
	enum { N = 3000 };
	const uint64_t link_seed = 0xC0FFEE;
	const uint32_t sender_ip = test_ip(100), receiver_ip = test_ip(101);
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "link-test");
	c.n_workers = 1;
	c.seed = 3;
	c.n_ports = 2;
	c.ports[0].ip = test_ip(1);
	c.ports[0].peer_ip = sender_ip;
	c.ports[1].ip = test_ip(2);
	c.ports[1].peer_ip = receiver_ip;
	c.ports[1].link = (struct innet_link_conf){ .loss = 0.2, .on_egress = true, .seed = link_seed };
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	c.progs[0].udp[0] = UDP_FWD;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = "{\"map\": [1, 0]}";
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	static struct receiver rcv;
	memset(&rcv, 0, sizeof(rcv));
	rcv.fd = udp_socket(receiver_ip, UDP_FWD);
	int tx = udp_socket(sender_ip, 0);
	assert_int_equal(pthread_create(&rcv.th, NULL, receiver_main, &rcv), 0);
	assert_int_equal(test_start(sw), 0);

	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(UDP_FWD),
				   .sin_addr.s_addr = htonl(test_ip(1)) };
	uint8_t payload[64];
	memset(payload, 'L', sizeof(payload));
	for (uint32_t i = 0; i < N; i++) {
		memcpy(payload + 4, &i, 4);
		assert_int_equal(sendto(tx, payload, sizeof(payload), 0, (struct sockaddr *)&dst,
					sizeof(dst)), (ssize_t)sizeof(payload));
		if (i % 100 == 99) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	/* Wait for the receiver to go quiet (300 ms without a packet), at most 10 s. */
	uint32_t last = UINT32_MAX;
	uint64_t last_change = (innet_now_ns() / 1000000), deadline = (innet_now_ns() / 1000000) + 10000;
	while ((innet_now_ns() / 1000000) < deadline) {
		uint32_t n = atomic_load(&rcv.count);
		if (n != last) {
			last = n;
			last_change = (innet_now_ns() / 1000000);
		} else if ((innet_now_ns() / 1000000) - last_change > 300) {
			break;
		}
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
	}
	innet_switch_stop(sw);
	atomic_store(&rcv.stop, true);
	pthread_join(rcv.th, NULL);
	close(tx);
	close(rcv.fd);

	struct innet_port_stats in, out;
	struct innet_prog_stats st;
	assert_int_equal(innet_switch_port_stats(sw, 0, &in), 0);
	assert_int_equal(innet_switch_port_stats(sw, 1, &out), 0);
	innet_cp_stats(innet_switch_prog(sw, "fwd"), &st);
	uint32_t received = atomic_load(&rcv.count);
	assert_int_equal(rcv.bad, 0);

	/* What entered the switch was all forwarded to port 1 ... */
	assert_true(in.rx_pkts >= N * 9 / 10); /* the kernel may drop a few under load */
	assert_int_equal(st.rx_pkts, in.rx_pkts);
	assert_int_equal(st.actions[INNET_FORWARD], in.rx_pkts);
	/* ... where the link lost some and sent the rest, which all arrived. */
	assert_int_equal(out.tx_errors, 0);
	assert_int_equal(out.tx_pkts + out.link_lost, in.rx_pkts);
	assert_int_equal(received, out.tx_pkts);
	assert_int_equal(out.link_duplicated + out.link_reordered + out.link_delayed + out.link_queue_full, 0);
	/* The lost fraction is the configured one ... */
	double lost = (double)out.link_lost / (double)in.rx_pkts;
	if (fabs(lost - 0.2) > 0.04)
		fail_msg("lost %.3f of the packets, configured 0.2", lost);
	/* ... and exactly the packets the seeded sequence says (one worker,
	 * worker 0: the port's seed is used as given). */
	struct innet_link_state ls = { .rng = link_seed };
	uint64_t expect_lost = 0, due;
	uint32_t flags;
	for (uint64_t i = 0; i < in.rx_pkts; i++)
		expect_lost += innet_link_decide(&c.ports[1].link, &ls, 0, &due, &flags) == INNET_LINK_LOSE;
	assert_int_equal(out.link_lost, expect_lost);
	/* Port 0 has no emulation and sent nothing. */
	assert_int_equal(in.link_lost, 0);
	assert_int_equal(in.tx_pkts, 0);
	innet_switch_destroy(sw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_active),
		cmocka_unit_test(test_same_seed_same_fates),
		cmocka_unit_test(test_worker_seeds),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_delay_and_jitter),
		cmocka_unit_test(test_held_heap_order),
		cmocka_unit_test(test_held_queue_full),
		cmocka_unit_test(test_end_to_end_loss),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
