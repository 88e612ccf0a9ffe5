/*
 * test_lb_contention.c — the load balancer's connection table under
 * contention on the user-space engine: a started switch with three workers
 * takes the datagrams of established flows over real loopback sockets (the
 * kernel spreads the flows over the workers) while a writer thread rewrites
 * the same flows' entries, as the control plane does. The two units are UDP
 * sockets of this test: every datagram that reaches one must be a flow of
 * that unit, from that flow's NAT port — a flow balanced anew would show up
 * at the other unit (wrr) or from another NAT port. And afterwards no
 * connection was made anew, no entry changed, every drop a conn_busy
 * (lb_contention.h). About two seconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit/lb_contention.h"

#define SENDS_PER_FLOW 400u

static struct lbc t = { .net = 214 };
static int unit_fd[2];
static int client_fd[LBC_FLOWS];
static int unit_of[LBC_FLOWS];     /* which unit socket the flow's datagrams reach */
static uint16_t nat_of[LBC_FLOWS]; /* from which switch port */

static int udp_socket(uint32_t ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	int buf = 4 << 20;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	return fd;
}

/* A datagram of flow f, sequence seq, to the VIP. */
static void send_flow(uint32_t f, uint32_t seq)
{
	uint32_t msg[2] = { f, seq };
	struct sockaddr_in vip = { .sin_family = AF_INET, .sin_port = htons(LBC_VIP),
				   .sin_addr.s_addr = htonl(lbc_ip(&t, 1)) };
	sendto(client_fd[f], msg, sizeof(msg), 0, (struct sockaddr *)&vip, sizeof(vip));
}

/* Receive on unit u: the flow and the switch port it came from; false when
 * nothing came for wait_ms. */
static bool recv_unit(int u, int wait_ms, uint32_t *flow, uint16_t *from)
{
	struct pollfd p = { .fd = unit_fd[u], .events = POLLIN };
	if (poll(&p, 1, wait_ms) != 1)
		return false;
	uint32_t msg[2];
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	ssize_t n = recvfrom(unit_fd[u], msg, sizeof(msg), 0, (struct sockaddr *)&a, &al);
	if (n != sizeof(msg) || msg[0] >= LBC_FLOWS)
		return false;
	*flow = msg[0];
	*from = ntohs(a.sin_port);
	return true;
}

struct receiver {
	pthread_t th;
	int unit;
	_Atomic bool *stop;
	uint64_t got, wrong;
	char first_wrong[128];
};

static void *receiver_main(void *arg)
{
	struct receiver *r = arg;
	while (!atomic_load(r->stop)) {
		uint32_t f;
		uint16_t from;
		if (!recv_unit(r->unit, 20, &f, &from))
			continue;
		r->got++;
		if (unit_of[f] != r->unit || nat_of[f] != from) {
			if (r->wrong++ == 0)
				snprintf(r->first_wrong, sizeof(r->first_wrong),
					 "flow %u reached unit %d from port %u (its unit %d, NAT port %u)",
					 f, r->unit, from, unit_of[f], nat_of[f]);
		}
	}
	return NULL;
}

struct sender {
	pthread_t th;
	uint32_t first;     /* flows first, first + 2, ... */
	uint64_t sent;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	while (atomic_load(&t.writes) < 100)
		sched_yield();
	for (uint32_t seq = 1; seq <= SENDS_PER_FLOW; seq++) {
		for (uint32_t f = s->first; f < LBC_FLOWS; f += 2) {
			send_flow(f, seq);
			s->sent++;
		}
		if (seq % 8 == 0)
			usleep(500);   /* (the workers keep up; nothing is lost to full buffers) */
	}
	return NULL;
}

static void test_workers_race_a_writer(void **state)
{
	for (int u = 0; u < 2; u++)
		unit_fd[u] = udp_socket(lbc_ip(&t, 10 + (uint32_t)u), (uint16_t)(7000 + u));
	lbc_switch(&t, false, 3);
	char err[256];
	if (innet_switch_start(t.sw, err, sizeof(err)) != 0)
		fail_msg("start: %s", err);
	for (uint32_t f = 0; f < LBC_FLOWS; f++) {
		client_fd[f] = udp_socket(lbc_ip(&t, 20), 0);
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		assert_int_equal(getsockname(client_fd[f], (struct sockaddr *)&a, &al), 0);
		t.client[f] = (struct innet_addr){ .ip = lbc_ip(&t, 20), .udp = ntohs(a.sin_port) };
		unit_of[f] = -1;
	}
	/* Each flow's first datagram makes its connection: learn where it went. */
	uint32_t known = 0;
	for (int round = 0; round < 50 && known < LBC_FLOWS; round++) {
		for (uint32_t f = 0; f < LBC_FLOWS; f++)
			if (unit_of[f] < 0)
				send_flow(f, 0);
		for (int u = 0; u < 2; u++) {
			uint32_t f;
			uint16_t from;
			while (recv_unit(u, 50, &f, &from))
				if (unit_of[f] < 0) {
					unit_of[f] = u;
					nat_of[f] = from;
					known++;
				}
		}
	}
	assert_int_equal(known, LBC_FLOWS);
	lbc_snapshot(&t);
	for (uint32_t f = 0; f < LBC_FLOWS; f++)
		assert_int_equal(LBC_NAT + t.val[f].nat, nat_of[f]);

	_Atomic bool stop = false;
	struct receiver r[2] = { { .unit = 0, .stop = &stop }, { .unit = 1, .stop = &stop } };
	struct sender s[2] = { { .first = 0 }, { .first = 1 } };
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&r[i].th, NULL, receiver_main, &r[i]), 0);
	lbc_writer_start(&t);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&s[i].th, NULL, sender_main, &s[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(s[i].th, NULL);
	usleep(200000);   /* what is in flight arrives */
	lbc_writer_stop(&t);
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i].th, NULL);
	innet_switch_stop(t.sw);

	uint64_t sent = s[0].sent + s[1].sent, got = r[0].got + r[1].got;
	printf("# %llu datagrams sent, %llu reached their units\n", (unsigned long long)sent,
	       (unsigned long long)got);
	for (int i = 0; i < 2; i++)
		if (r[i].wrong != 0)
			fail_msg("%llu datagrams reached the wrong unit or came from the wrong port: %s",
				 (unsigned long long)r[i].wrong, r[i].first_wrong);
	uint64_t drops = lbc_check(&t);
	assert_true(got > 0);
	assert_true(got + drops <= sent);
	for (uint32_t f = 0; f < LBC_FLOWS; f++)
		close(client_fd[f]);
	for (int u = 0; u < 2; u++)
		close(unit_fd[u]);
	innet_switch_destroy(t.sw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_workers_race_a_writer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
