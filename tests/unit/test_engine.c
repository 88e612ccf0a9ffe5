/*
 * test_engine.c — the engine over real loopback sockets: multicast fan-out,
 * per-flow ordering with several workers, the to-CPU path (on_cpu replying
 * through innet_cp_send), Trio emission, and the count of what the kernel
 * dropped at the switch's sockets when it was not read in time.
 *
 *   senders (127.0.60.10:any) ──► port 0 = 127.0.60.1 ┐ switch ┌ port 1 = 127.0.60.2 ──► receivers
 *                                                     └────────┘      (127.0.60.20+i : 47000+i)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sock_diag.h>
#include <stdio.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/switch.h"

#define UDP_PROG  46900
#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((b) << 16) | ((c) << 8) | (d))

/* ---- test programs ------------------------------------------------------ */

static enum innet_action mc_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_multicast(pkt, pkt->len > 0 ? pkt->data[0] : 0);
}

static int mc_setup(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_groups(d, 4);
}

static const struct innet_program prog_mc = {
	.name = "mc", .model = INNET_MODEL_PISA, .setup = mc_setup, .handle = mc_handle,
};

static enum innet_action fwd1_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_forward(pkt, 1);
}

static const struct innet_program prog_fwd1 = {
	.name = "fwd1", .model = INNET_MODEL_PISA, .handle = fwd1_handle,
};

static enum innet_action cpu_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_to_cpu(pkt);
}

/* The control plane answers with the payload reversed, to the sender. */
static void cpu_on_cpu(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt)
{
	uint8_t buf[64];
	uint32_t n = pkt->len < sizeof(buf) ? pkt->len : sizeof(buf);
	for (uint32_t i = 0; i < n; i++)
		buf[i] = pkt->data[n - 1 - i];
	struct innet_out out = { .port = pkt->in_port, .ip = pkt->src.ip, .udp = pkt->src.udp };
	innet_cp_send(cp, &out, false, buf, n);
}

static const struct innet_program prog_cpu = {
	.name = "cpu", .model = INNET_MODEL_PISA, .handle = cpu_handle, .on_cpu = cpu_on_cpu,
};

/* Trio: emit two new packets ("A"+payload to group 0, "B"+payload back to
 * the sender), consume the original. */
static enum innet_action emit_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint8_t buf[64];
	uint32_t n = pkt->len < 63 ? pkt->len : 63;
	memcpy(buf + 1, pkt->data, n);
	buf[0] = 'A';
	struct innet_out g = { .group = 0 };
	innet_emit(ctx, &g, true, buf, n + 1);
	buf[0] = 'B';
	struct innet_out back = { .port = pkt->in_port, .ip = pkt->src.ip, .udp = pkt->src.udp };
	innet_emit(ctx, &back, false, buf, n + 1);
	return INNET_CONSUMED;
}

static const struct innet_program prog_emit = {
	.name = "emit", .model = INNET_MODEL_TRIO, .setup = mc_setup, .handle = emit_handle,
};

/* Trio: emit 300 small packets back to the sender (more than a worker's pool
 * of emit buffers), then reflect the original. */
static enum innet_action many_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint8_t small[8] = "emitted";
	struct innet_out back = { .port = pkt->in_port, .ip = pkt->src.ip, .udp = pkt->src.udp };
	for (int i = 0; i < 300; i++)
		innet_emit(ctx, &back, false, small, sizeof(small));
	return innet_reflect(pkt);
}

static const struct innet_program prog_many = {
	.name = "many", .model = INNET_MODEL_TRIO, .handle = many_handle,
};

/* ---- helpers ----------------------------------------------------------- */

static struct innet_switch *cur_sw; /* destroyed by the teardown, even after a failure */
static int open_fds[16];            /* closed by the teardown */
static int n_open_fds;

static int teardown(void **state)
{
	innet_switch_destroy(cur_sw);
	cur_sw = NULL;
	while (n_open_fds > 0)
		close(open_fds[--n_open_fds]);
	return 0;
}

/* A switch on 127.0.60.1/2 running p, created and not started; ctl: its
 * control socket path ("" for none). */
static struct innet_switch *make_switch_created(const struct innet_program *p, uint32_t workers,
						const char *ctl)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "engine");
	c.n_workers = workers;
	c.seed = 1;
	c.n_ports = 2;
	c.ports[0].ip = IP(127, 0, 60, 1);
	c.ports[1].ip = IP(127, 0, 60, 2);
	c.ports[1].peer_ip = IP(127, 0, 60, 20);
	c.ports[1].peer_udp = 47000;
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "%s", p->name);
	c.progs[0].program = p;
	c.progs[0].udp[0] = UDP_PROG;
	c.progs[0].n_udp = 1;
	snprintf(c.ctl_path, sizeof(c.ctl_path), "%s", ctl);
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("innet_switch_create: %s", err);
	cur_sw = sw;
	return sw;
}

static struct innet_switch *make_switch(const struct innet_program *p, uint32_t workers)
{
	struct innet_switch *sw = make_switch_created(p, workers, "");
	assert_int_equal(test_start(sw), 0);
	return sw;
}

static int udp_bind(uint32_t ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	/* 8 MiB, so a slow (sanitized) reader never overflows it: FORCE
	 * passes rmem_max as root; plain SO_RCVBUF is capped by it. */
	int buf = 8 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	if (n_open_fds < 16)
		open_fds[n_open_fds++] = fd;
	return fd;
}

static void send_to_switch(int fd, const void *data, size_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(UDP_PROG),
				  .sin_addr.s_addr = htonl(IP(127, 0, 60, 1)) };
	ssize_t n = sendto(fd, data, len, 0, (struct sockaddr *)&to, sizeof(to));
	if (n != (ssize_t)len)
		fail_msg("sendto: %zd (%s)", n, strerror(errno));
}

/* Receive one datagram within ms; returns its length or -1. */
static ssize_t recv_wait(int fd, void *buf, size_t len, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, ms) <= 0)
		return -1;
	return recv(fd, buf, len, 0);
}

/* ---- tests ------------------------------------------------------------- */

static uint64_t rx_pkts(struct innet_cp *cp)
{
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	return st.rx_pkts;
}

/* innet/switch.h's lifecycle: a switch created and not started handles no
 * packet (its sockets queue them); start handles them; stop handles none
 * again; start again works; a second start and a start that cannot open
 * its control socket fail with a message. */
static void test_lifecycle(void **state)
{
	struct innet_switch *sw = make_switch_created(&prog_fwd1, 1, "");
	struct innet_cp *cp = innet_switch_prog(sw, "fwd1");
	int rx = udp_bind(IP(127, 0, 60, 20), 47000);
	int tx = udp_bind(IP(127, 0, 60, 10), 0);
	uint8_t msg[] = { 'a' }, buf[16];
	char err[256];

	send_to_switch(tx, msg, 1);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 200), -1);
	assert_int_equal(rx_pkts(cp), 0);

	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), 0);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 5000), 1);   /* the one queued */
	send_to_switch(tx, msg, 1);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 5000), 1);
	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), -EALREADY);
	assert_non_null(strstr(err, "running already"));

	innet_switch_stop(sw);
	innet_switch_stop(sw);   /* idempotent */
	send_to_switch(tx, msg, 1);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 200), -1);
	assert_int_equal(rx_pkts(cp), 2);

	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), 0);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 5000), 1);   /* queued while stopped */
	assert_int_equal(rx_pkts(cp), 3);
	innet_switch_destroy(sw);
	cur_sw = NULL;

	/* a control socket path that is a regular file: start fails, says why,
	 * and leaves nothing running */
	char path[] = "/tmp/innet-test-engine-ctl.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	sw = make_switch_created(&prog_fwd1, 1, path);
	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "is not a socket"));
	send_to_switch(tx, msg, 1);
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 200), -1);
	assert_int_equal(rx_pkts(innet_switch_prog(sw, "fwd1")), 0);
	unlink(path);
	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), 0);   /* the path is free now */
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 5000), 1);
}

static void test_multicast_fanout(void **state)
{
	struct innet_switch *sw = make_switch(&prog_mc, 1);
	struct innet_cp *cp = innet_switch_prog(sw, "mc");
	int rx[3];
	struct innet_member m[3];
	for (int i = 0; i < 3; i++) {
		rx[i] = udp_bind(IP(127, 0, 60, 20 + i), (uint16_t)(47000 + i));
		m[i] = (struct innet_member){ .port = 1, .ip = IP(127, 0, 60, 20 + i), .udp = (uint16_t)(47000 + i) };
	}
	assert_int_equal(innet_cp_group_set(cp, 1, m, 3), 0);
	assert_int_equal(innet_cp_group_set(cp, 9, m, 3), -ENOENT);
	m[0].port = 7;
	assert_int_equal(innet_cp_group_set(cp, 2, m, 1), -EINVAL); /* no port 7 */

	int tx = udp_bind(IP(127, 0, 60, 10), 0);
	uint8_t msg[] = { 1, 'h', 'i' };
	send_to_switch(tx, msg, sizeof(msg));
	for (int i = 0; i < 3; i++) {
		uint8_t buf[16];
		assert_int_equal(recv_wait(rx[i], buf, sizeof(buf), 2000), 3);
		assert_memory_equal(buf, msg, 3);
	}
	/* Group 3 is empty: a counted bad_group drop. */
	uint8_t empty[] = { 3 };
	send_to_switch(tx, empty, 1);
	struct innet_prog_stats st;
	for (int i = 0; i < 200; i++) {
		innet_cp_stats(cp, &st);
		if (st.rx_pkts == 2)
			break;
		usleep(5000);
	}
	assert_int_equal(st.rx_pkts, 2);
	assert_int_equal(st.actions[INNET_MULTICAST], 1);
	assert_int_equal(st.tx_pkts, 3);
	assert_int_equal(st.drops[INNET_DROP_BAD_GROUP], 1);
	struct innet_port_stats ps;
	innet_switch_port_stats(sw, 1, &ps);
	assert_int_equal(ps.tx_pkts, 3);
}

#define FLOWS 8
#define PER_FLOW 3000

struct flow_arg {
	int id;
};

static void *flow_sender(void *p)
{
	struct flow_arg *a = p;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(IP(127, 0, 60, 10)) };
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0)
		return NULL;
	for (uint32_t s = 0; s < PER_FLOW; s++) {
		uint32_t msg[2] = { (uint32_t)a->id, s };
		send_to_switch(fd, msg, sizeof(msg));
		if (s % 32 == 31)
			usleep(500); /* stay under the receiver's socket buffer */
	}
	close(fd);
	return NULL;
}

static void test_per_flow_order_with_workers(void **state)
{
	make_switch(&prog_fwd1, 2);
	int rx = udp_bind(IP(127, 0, 60, 20), 47000);
	pthread_t th[FLOWS];
	struct flow_arg fa[FLOWS];
	for (int i = 0; i < FLOWS; i++) {
		fa[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, flow_sender, &fa[i]), 0);
	}
	int64_t last[FLOWS];
	uint32_t got[FLOWS] = { 0 };
	for (int i = 0; i < FLOWS; i++)
		last[i] = -1;
	uint32_t total = 0, reordered = 0;
	uint32_t msg[2];
	while (total < FLOWS * PER_FLOW && recv_wait(rx, msg, sizeof(msg), 1000) == sizeof(msg)) {
		assert_true(msg[0] < FLOWS);
		if ((int64_t)msg[1] <= last[msg[0]])
			reordered++;
		last[msg[0]] = msg[1];
		got[msg[0]]++;
		total++;
	}
	for (int i = 0; i < FLOWS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(reordered, 0);
	/* Every flow got through (the kernel may drop some datagrams under
	 * load, more so in sanitizer builds; ordering is what is tested). */
	assert_true(total > FLOWS * PER_FLOW / 4);
	for (int i = 0; i < FLOWS; i++)
		assert_true(got[i] > 0);
}

static void test_to_cpu_and_cp_send(void **state)
{
	struct innet_switch *sw = make_switch(&prog_cpu, 1);
	int fd = udp_bind(IP(127, 0, 60, 10), 0);
	send_to_switch(fd, "abc", 3);
	char buf[16];
	assert_int_equal(recv_wait(fd, buf, sizeof(buf), 2000), 3);
	assert_memory_equal(buf, "cba", 3);
	struct innet_prog_stats st;
	innet_cp_stats(innet_switch_prog(sw, "cpu"), &st);
	assert_int_equal(st.actions[INNET_TO_CPU], 1);
	assert_int_equal(st.cpu_pkts, 1);
}

static void test_trio_emit(void **state)
{
	struct innet_switch *sw = make_switch(&prog_emit, 2);
	struct innet_cp *cp = innet_switch_prog(sw, "emit");
	int rx = udp_bind(IP(127, 0, 60, 21), 47001);
	struct innet_member m = { .port = 1, .ip = IP(127, 0, 60, 21), .udp = 47001 };
	assert_int_equal(innet_cp_group_set(cp, 0, &m, 1), 0);
	int fd = udp_bind(IP(127, 0, 60, 10), 0);
	send_to_switch(fd, "xy", 2);
	char buf[16];
	assert_int_equal(recv_wait(rx, buf, sizeof(buf), 2000), 3);
	assert_memory_equal(buf, "Axy", 3);
	assert_int_equal(recv_wait(fd, buf, sizeof(buf), 2000), 3);
	assert_memory_equal(buf, "Bxy", 3);
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	assert_int_equal(st.emitted, 2);
	assert_int_equal(st.max_emitted, 2);
	assert_int_equal(st.actions[INNET_CONSUMED], 1);
}

/* UDP GSO coalescing of sends (runs of equal-size datagrams to one peer)
 * must deliver exactly the datagrams that were forwarded: same boundaries,
 * sizes and order, with sizes changing mid-burst. With and without GSO. */
static void gso_roundtrip(bool no_gso)
{
	make_switch(&prog_fwd1, 1);
	/* Rebuild it unstarted, so the datagrams queue up first and arrive in
	 * full bursts: coalescing then happens for sure. */
	struct innet_switch_conf c = *innet_switch_conf(cur_sw);
	innet_switch_destroy(cur_sw);
	c.no_gso = no_gso;
	char err[256];
	cur_sw = innet_switch_create(&c, err, sizeof(err));
	assert_non_null(cur_sw);
	int rx = udp_bind(IP(127, 0, 60, 20), 47000);
	int tx = udp_bind(IP(127, 0, 60, 10), 0);
	enum { N = 300 };
	static const uint16_t sizes[] = { 100, 100, 100, 1400, 1400, 64, 100, 100, 7, 2000, 100 };
	uint8_t buf[2048];
	for (uint32_t i = 0; i < N; i++) {
		uint16_t len = sizes[(i / 5) % (sizeof(sizes) / sizeof(sizes[0]))];
		memset(buf, (int)(i & 0xff), len);
		memcpy(buf, &i, sizeof(i) < len ? sizeof(i) : len);
		send_to_switch(tx, buf, len);
	}
	assert_int_equal(test_start(cur_sw), 0);
	uint32_t got = 0;
	ssize_t n;
	while (got < N && (n = recv_wait(rx, buf, sizeof(buf), 2000)) > 0) {
		uint16_t want = sizes[(got / 5) % (sizeof(sizes) / sizeof(sizes[0]))];
		assert_int_equal(n, want);
		if (want >= 4) {
			uint32_t seq;
			memcpy(&seq, buf, sizeof(seq));
			assert_int_equal(seq, got);
			assert_int_equal(buf[want - 1], (uint8_t)(got & 0xff));
		}
		got++;
	}
	struct innet_port_stats ps, ps0;
	/* The worker counts a send once sendmmsg returns, which may be after
	 * the datagram has already arrived here. */
	for (int i = 0; i < 400; i++) {
		innet_switch_port_stats(cur_sw, 1, &ps);
		if (ps.tx_pkts >= N)
			break;
		usleep(5000);
	}
	innet_switch_port_stats(cur_sw, 0, &ps0);
	if (got != N)
		fail_msg("received %u of %u: switch port 0 rx %lu, port 1 tx %lu (errors %lu, gso %lu)",
			 got, N, (unsigned long)ps0.rx_pkts, (unsigned long)ps.tx_pkts,
			 (unsigned long)ps.tx_errors, (unsigned long)ps.tx_gso);
	assert_int_equal(ps.tx_pkts, N);
	assert_int_equal(ps.tx_errors, 0);
	if (no_gso)
		assert_int_equal(ps.tx_gso, 0);
	else
		assert_true(ps.tx_gso > N / 2); /* runs of 5 equal sizes: most coalesce */
}

static void test_gso_preserves_datagrams(void **state)
{
	gso_roundtrip(false);
}

static void test_no_gso_same_datagrams(void **state)
{
	gso_roundtrip(true);
}

/* The packet in hand may itself live in an emit buffer (an ingress duplicate
 * made by link emulation); emitting more packets than the pool holds must
 * not recycle that buffer under it. */
static void test_emit_pool_keeps_packet_in_hand(void **state)
{
	make_switch(&prog_many, 1);
	struct innet_switch_conf c = *innet_switch_conf(cur_sw);
	innet_switch_destroy(cur_sw);
	c.ports[0].link = (struct innet_link_conf){ .dup = 1.0, .on_ingress = true, .seed = 7 };
	char err[256];
	cur_sw = innet_switch_create(&c, err, sizeof(err));
	assert_non_null(cur_sw);
	assert_int_equal(test_start(cur_sw), 0);
	int fd = udp_bind(IP(127, 0, 60, 10), 0);
	const char orig[] = "ORIGINAL-PAYLOAD-0123";
	send_to_switch(fd, orig, sizeof(orig));
	uint32_t small = 0, originals = 0;
	char buf[64];
	ssize_t n;
	while (small + originals < 2 * 301 && (n = recv_wait(fd, buf, sizeof(buf), 2000)) > 0) {
		if (n == 8) {
			small++;
		} else {
			assert_int_equal(n, sizeof(orig));
			assert_memory_equal(buf, orig, sizeof(orig));
			originals++;
		}
	}
	assert_int_equal(originals, 2); /* the packet and its duplicate, intact */
	assert_int_equal(small, 600);
}

/* The kernel's drop count at a socket (SO_MEMINFO). */
static uint32_t meminfo_drops(int fd)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len), 0);
	return mem[SK_MEMINFO_DROPS];
}

/* Datagrams that arrive faster than the switch reads them are dropped by
 * the kernel at its socket: rx_sock_drops counts them, so that every
 * datagram sent is accounted for (forwarded, or dropped at the switch's
 * socket, or at the receiver's), and a stats reset zeroes the count. */
static void test_socket_drops_counted(void **state)
{
	struct innet_switch *sw = make_switch_created(&prog_fwd1, 1, "");
	int rx = udp_bind(IP(127, 0, 60, 20), 47000);
	int tx = udp_bind(IP(127, 0, 60, 10), 0);
	struct innet_port_stats ps;
	innet_switch_port_stats(sw, 0, &ps);
	assert_int_equal(ps.rx_sock_drops, 0);
	/* 64 B datagrams cost ~1 KiB of receive buffer each: 30000 overflow
	 * the switch's (8 MiB at most) while nothing reads it */
	enum { N = 30000 };
	uint8_t msg[64] = { 0 };
	for (uint32_t i = 0; i < N; i++)
		send_to_switch(tx, msg, sizeof(msg));
	innet_switch_port_stats(sw, 0, &ps);
	uint64_t dropped = ps.rx_sock_drops;
	assert_true(dropped > 0 && dropped < N);
	innet_switch_port_stats(sw, 1, &ps);
	assert_int_equal(ps.rx_sock_drops, 0); /* port 1 received nothing */

	/* now read: what was queued comes out of port 1 */
	assert_int_equal(test_start(sw), 0);
	uint64_t got = 0;
	uint8_t buf[128];
	while (recv_wait(rx, buf, sizeof(buf), 1000) == (ssize_t)sizeof(msg))
		got++;
	uint64_t rx_dropped = meminfo_drops(rx); /* a small receive buffer without root */
	assert_int_equal(got + rx_dropped + dropped, N);
	innet_switch_port_stats(sw, 0, &ps);
	assert_int_equal(ps.rx_sock_drops, dropped); /* the switch kept up since */

	/* (stopped first: a reset races with the workers' counting, which
	 * statistics tolerate and the thread sanitizer build reports) */
	innet_switch_stop(sw);
	innet_switch_stats_reset(sw);
	innet_switch_port_stats(sw, 0, &ps);
	assert_int_equal(ps.rx_sock_drops, 0);
	assert_int_equal(ps.rx_pkts, 0);
}

/* A second switch on the same addresses is refused, not silently joined. */
static void test_address_in_use(void **state)
{
	struct innet_switch *sw = make_switch(&prog_fwd1, 2);
	struct innet_switch_conf c = *innet_switch_conf(sw);
	char err[256];
	struct innet_switch *dup = innet_switch_create(&c, err, sizeof(err));
	assert_null(dup);
	assert_int_equal(errno, EADDRINUSE);
	assert_non_null(strstr(err, "127.0.60.1:46900"));
	innet_switch_destroy(sw);
	cur_sw = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_lifecycle, teardown),
		cmocka_unit_test_teardown(test_multicast_fanout, teardown),
		cmocka_unit_test_teardown(test_per_flow_order_with_workers, teardown),
		cmocka_unit_test_teardown(test_to_cpu_and_cp_send, teardown),
		cmocka_unit_test_teardown(test_trio_emit, teardown),
		cmocka_unit_test(test_address_in_use),
		cmocka_unit_test_teardown(test_gso_preserves_datagrams, teardown),
		cmocka_unit_test_teardown(test_no_gso_same_datagrams, teardown),
		cmocka_unit_test_teardown(test_emit_pool_keeps_packet_in_hand, teardown),
		cmocka_unit_test_teardown(test_socket_drops_counted, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
