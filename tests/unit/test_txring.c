/*
 * test_txring.c — the worker's transmit io_uring (src/targets/user/txring.c), on
 * real loopback sockets:
 *
 *   - one submission sends many datagrams over several sockets; each result
 *     is the byte count, every datagram arrives once, and per socket in the
 *     order submitted (per-flow order is the engine's promise);
 *   - a message the kernel refuses (not a socket, a bad descriptor, a
 *     datagram over 64 KiB) gets its -errno and nothing else is affected:
 *     the messages around it are sent, nothing stays in flight, and the next
 *     submission works (a full socket buffer is the same case: MSG_DONTWAIT
 *     makes it complete with -EAGAIN at once; loopback cannot be made to
 *     show it, the sender's buffer is released at transmit);
 *   - more messages than fit in the ring are the caller's job (flush_ring
 *     chunks them): the ring's size is reported;
 *   - INNET_TX_URING=0 disables it (NULL).
 *
 * Without io_uring (an old kernel, a seccomp filter), innet_txring_new
 * returns NULL and the engine uses sendmmsg; the tests are then skipped.
 * Addresses: 127.67.200.1 (senders) and 127.67.200.2 (receivers).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "targets/user/user_pvt.h"

#define N_SOCK 4
#define PER_SOCK 24

static uint32_t ip4(const char *s)
{
	struct in_addr a;
	inet_pton(AF_INET, s, &a);
	return a.s_addr;
}

static int udp_bound(const char *ip, uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = ip4(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	socklen_t l = sizeof(a);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

struct batch {
	int fds[256];
	struct mmsghdr msgs[256];
	struct iovec iov[256];
	struct sockaddr_in dst[256];
	uint8_t data[256][64];
	int32_t res[256];
};

static void set_msg(struct batch *b, uint32_t i, int fd, uint16_t dport, const void *p, size_t len)
{
	b->fds[i] = fd;
	memcpy(b->data[i], p, len);
	b->iov[i] = (struct iovec){ b->data[i], len };
	b->dst[i] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(dport),
					  .sin_addr.s_addr = ip4("127.67.200.2") };
	memset(&b->msgs[i], 0, sizeof(b->msgs[i]));
	b->msgs[i].msg_hdr.msg_name = &b->dst[i];
	b->msgs[i].msg_hdr.msg_namelen = sizeof(b->dst[i]);
	b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
	b->msgs[i].msg_hdr.msg_iovlen = 1;
}

static struct innet_txring *ring_or_skip(void)
{
	struct innet_txring *r = innet_txring_new(128);
	if (r == NULL) {
		test_skip("io_uring is unavailable here");
	}
	return r;
}

static void test_many_sockets_in_order(void **state)
{
	(void)state;
	struct innet_txring *r = ring_or_skip();
	assert_true(innet_txring_size(r) >= 128);
	int tx[N_SOCK], rx[N_SOCK];
	uint16_t txp[N_SOCK], rxp[N_SOCK];
	for (int s = 0; s < N_SOCK; s++) {
		tx[s] = udp_bound("127.67.200.1", &txp[s]);
		rx[s] = udp_bound("127.67.200.2", &rxp[s]);
	}
	struct batch *b = calloc(1, sizeof(*b));
	assert_non_null(b);
	/* interleaved: socket k%N_SOCK, sequence k/N_SOCK, varying sizes */
	uint32_t n = N_SOCK * PER_SOCK;
	assert_true(n <= innet_txring_size(r));
	for (uint32_t k = 0; k < n; k++) {
		uint8_t p[40];
		memset(p, (int)k, sizeof(p));
		p[0] = (uint8_t)(k % N_SOCK);
		p[1] = (uint8_t)(k / N_SOCK);
		set_msg(b, k, tx[k % N_SOCK], rxp[k % N_SOCK], p, 8 + k % 32);
	}
	assert_int_equal(innet_txring_send(r, b->fds, b->msgs, n, b->res), 0);
	for (uint32_t k = 0; k < n; k++)
		assert_int_equal(b->res[k], (int32_t)(8 + k % 32));
	for (int s = 0; s < N_SOCK; s++) {
		for (int q = 0; q < PER_SOCK; q++) {
			uint8_t buf[64];
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t got = recvfrom(rx[s], buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
			assert_true(got >= 8);
			assert_int_equal(buf[0], s);
			assert_int_equal(buf[1], q);           /* in submission order */
			assert_int_equal(ntohs(from.sin_port), txp[s]);
			uint32_t k = (uint32_t)(q * N_SOCK + s);
			assert_int_equal(got, (ssize_t)(8 + k % 32));
		}
		uint8_t buf[64];
		assert_int_equal(recv(rx[s], buf, sizeof(buf), MSG_DONTWAIT), -1); /* no more */
	}
	for (int s = 0; s < N_SOCK; s++) {
		close(tx[s]);
		close(rx[s]);
	}
	free(b);
	innet_txring_free(r);
}

static void test_errors_are_per_message(void **state)
{
	(void)state;
	struct innet_txring *r = ring_or_skip();
	uint16_t tp, rp;
	int tx = udp_bound("127.67.200.1", &tp), rx = udp_bound("127.67.200.2", &rp);
	int bad = open("/dev/null", O_RDONLY);
	assert_true(bad >= 0);
	struct batch *b = calloc(1, sizeof(*b));
	assert_non_null(b);
	set_msg(b, 0, tx, rp, "first", 5);
	set_msg(b, 1, bad, rp, "notasocket", 10);     /* -ENOTSOCK */
	set_msg(b, 2, 1000000, rp, "badfd", 5);       /* -EBADF */
	set_msg(b, 3, tx, rp, "last", 4);
	assert_int_equal(innet_txring_send(r, b->fds, b->msgs, 4, b->res), 0);
	assert_int_equal(b->res[0], 5);
	assert_int_equal(b->res[1], -ENOTSOCK);
	assert_int_equal(b->res[2], -EBADF);
	assert_int_equal(b->res[3], 4);
	char buf[32];
	assert_int_equal(recv(rx, buf, sizeof(buf), MSG_DONTWAIT), 5);
	assert_memory_equal(buf, "first", 5);
	assert_int_equal(recv(rx, buf, sizeof(buf), MSG_DONTWAIT), 4);
	assert_memory_equal(buf, "last", 4);

	/* a datagram the socket cannot take completes with an error at once
	 * (it is never parked in the ring), and the ring goes on working */
	static uint8_t big[70000];
	set_msg(b, 0, tx, rp, "x", 1);
	b->iov[0] = (struct iovec){ big, sizeof(big) };
	assert_int_equal(innet_txring_send(r, b->fds, b->msgs, 1, b->res), 0);
	assert_int_equal(b->res[0], -EMSGSIZE);
	set_msg(b, 0, tx, rp, "again", 5);
	assert_int_equal(innet_txring_send(r, b->fds, b->msgs, 1, b->res), 0);
	assert_int_equal(b->res[0], 5);
	assert_int_equal(recv(rx, buf, sizeof(buf), MSG_DONTWAIT), 5);
	close(bad);
	close(tx);
	close(rx);
	free(b);
	innet_txring_free(r);
}

static void test_env_disables(void **state)
{
	(void)state;
	setenv("INNET_TX_URING", "0", 1);
	assert_null(innet_txring_new(64));
	unsetenv("INNET_TX_URING");
	innet_txring_free(NULL); /* no-op */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_many_sockets_in_order),
		cmocka_unit_test(test_errors_are_per_message),
		cmocka_unit_test(test_env_disables),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
