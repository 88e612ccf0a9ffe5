/*
 * test_xdp_lifecycle.c — the switch lifecycle of innet/switch.h on the XDP
 * target, on a real device: a switch created but not started has nothing
 * attached and handles no packet; start attaches its program and the
 * switch handles packets (in eBPF, and in the user-space engine what queued
 * on its sockets meanwhile); stop detaches it and the switch handles none;
 * start again, on the same devices, works.
 *
 * Root only (eBPF, network namespaces): skipped (77) otherwise. The test
 * process moves into a network namespace of its own (unshare), with one
 * veth pair whose far end lives in a second namespace (ip netns, named for
 * this process) that the test sends from:
 *
 *   netns ixl-PID: socket 10.93.1.1 ── xl1 ──veth── xl0 = port 0, 10.93.1.2 (this process's netns)
 *                                                    switch: counter on UDP 9400 (XDP target)
 *
 * The datagrams are one byte: counter drops them as too_short, in eBPF or in
 * the engine — what tells the two apart is the port's xdp_rx_pkts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "testutil.h"
#include "innet/switch.h"

#define UDP_CNT 9400
#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((b) << 16) | ((c) << 8) | (d))

static char peer_ns[32];
static int tx_fd = -1;

static int sh(const char *cmd)
{
	return system(cmd) == 0 ? 0 : -1;
}

static int setup(void **state)
{
	snprintf(peer_ns, sizeof(peer_ns), "ixl-%d", (int)getpid());
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0 || unshare(CLONE_NEWNET) != 0)
		return -1;
	close(self);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
		 "ip link set lo up && ip netns add %1$s && "
		 "ip link add xl0 address 02:69:00:00:00:02 type veth peer name xl1 netns %1$s "
		 "address 02:69:00:00:00:01 && "
		 "ip addr add 10.93.1.2/24 dev xl0 && ip link set xl0 up && "
		 "ip -n %1$s link set lo up && ip -n %1$s addr add 10.93.1.1/24 dev xl1 && "
		 "ip -n %1$s link set xl1 up && "
		 "ip -n %1$s neigh replace 10.93.1.2 lladdr 02:69:00:00:00:02 dev xl1 nud permanent && "
		 "ip neigh replace 10.93.1.1 lladdr 02:69:00:00:00:01 dev xl0 nud permanent",
		 peer_ns);
	if (sh(cmd) != 0) {
		fprintf(stderr, "test_xdp_lifecycle: cannot set up the veth pair\n");
		return -1;
	}
	/* the sender's socket, in the peer's namespace */
	snprintf(cmd, sizeof(cmd), "/var/run/netns/%s", peer_ns);
	int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int there = open(cmd, O_RDONLY | O_CLOEXEC);
	if (here < 0 || there < 0 || setns(there, CLONE_NEWNET) != 0)
		return -1;
	tx_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(IP(10, 93, 1, 1)) };
	int rc = tx_fd >= 0 ? bind(tx_fd, (struct sockaddr *)&me, sizeof(me)) : -1;
	if (setns(here, CLONE_NEWNET) != 0)
		return -1;
	close(here);
	close(there);
	return rc;
}

static int teardown(void **state)
{
	if (tx_fd >= 0)
		close(tx_fd);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "ip netns del %s", peer_ns);
	sh(cmd);
	return 0;
}

static void send_n(int n)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(UDP_CNT),
				  .sin_addr.s_addr = htonl(IP(10, 93, 1, 2)) };
	for (int i = 0; i < n; i++)
		assert_int_equal(sendto(tx_fd, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
}

struct counts {
	uint64_t rx;        /* the program's packets, whoever ran it */
	uint64_t xdp_rx;    /* of them, in eBPF */
};

static struct counts counts(struct innet_switch *sw)
{
	struct innet_prog_stats ps;
	struct innet_port_stats pt;
	innet_cp_stats(innet_switch_prog(sw, "cnt"), &ps);
	innet_switch_port_stats(sw, 0, &pt);
	return (struct counts){ .rx = ps.rx_pkts, .xdp_rx = pt.xdp_rx_pkts };
}

/* Wait (up to 5 s) until the counts are want; then they must stay so. */
static void expect(struct innet_switch *sw, uint64_t rx, uint64_t xdp_rx)
{
	struct counts c = counts(sw);
	for (int i = 0; i < 500 && (c.rx != rx || c.xdp_rx != xdp_rx); i++) {
		usleep(10000);
		c = counts(sw);
	}
	if (c.rx != rx || c.xdp_rx != xdp_rx)
		fail_msg("rx_pkts %llu (want %llu), xdp_rx_pkts %llu (want %llu)",
			 (unsigned long long)c.rx, (unsigned long long)rx,
			 (unsigned long long)c.xdp_rx, (unsigned long long)xdp_rx);
}

/* Nothing more within 200 ms. */
static void expect_still(struct innet_switch *sw, uint64_t rx, uint64_t xdp_rx)
{
	usleep(200000);
	struct counts c = counts(sw);
	assert_int_equal(c.rx, rx);
	assert_int_equal(c.xdp_rx, xdp_rx);
}

static bool attached(void)
{
	uint32_t id = 0;
	int ifi = (int)if_nametoindex("xl0");
	assert_true(ifi > 0);
	assert_int_equal(bpf_xdp_query_id(ifi, 0, &id), 0);
	return id != 0;
}

static void test_lifecycle(void **state)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "xl");
	c.target = INNET_TARGET_XDP;
	c.n_workers = 1;
	c.n_ports = 1;
	snprintf(c.ports[0].name, sizeof(c.ports[0].name), "p0");
	snprintf(c.ports[0].dev, sizeof(c.ports[0].dev), "xl0");
	c.ports[0].ip = IP(10, 93, 1, 2);
	c.ports[0].peer_ip = IP(10, 93, 1, 1);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "cnt");
	c.progs[0].program = innet_program_find("counter");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_CNT;
	c.progs[0].n_udp = 1;
	char err[2048];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("innet_switch_create: %s", err);

	/* created: nothing attached, nothing handled (the engine's socket
	 * queues what the kernel delivers) */
	assert_false(attached());
	send_n(3);
	expect_still(sw, 0, 0);

	/* started: attached; the queued three go through the engine, new ones
	 * through eBPF */
	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), 0);
	assert_true(attached());
	expect(sw, 3, 0);
	send_n(5);
	expect(sw, 8, 5);

	/* stopped: detached, nothing handled */
	innet_switch_stop(sw);
	assert_false(attached());
	send_n(2);
	expect_still(sw, 8, 5);

	/* started again on the same device */
	assert_int_equal(innet_switch_start(sw, err, sizeof(err)), 0);
	assert_true(attached());
	expect(sw, 10, 5);
	send_n(4);
	expect(sw, 14, 9);
	struct innet_prog_stats ps;
	innet_cp_stats(innet_switch_prog(sw, "cnt"), &ps);
	assert_int_equal(ps.actions[INNET_DROP], 14);

	innet_switch_destroy(sw);
	assert_false(attached());
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skip: needs root (eBPF, network namespaces)\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lifecycle),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
