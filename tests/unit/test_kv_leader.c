/*
 * test_kv_leader.c — a KV fabric's backup coordinator's status socket and
 * round file (src/consensus/kv_leader.c), around a real innet_paxos_leader
 * bound to loopback:
 *
 *   query thread ──"status"──▶ status socket ◀── serve() in the test's loop ── leader
 *                                                  (1Bs from the test ──▶ leader socket)
 *
 * idle, after a takeover (phase 1), serving after a majority's promises;
 * an unknown request; a client that never sends a line is dropped; close
 * removes the socket. The round file: none, stored, read back, garbage,
 * too large, a directory that is not there.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/clock.h"
#include "innet/consensus.h"
#include "innet/ctl_client.h"
#include "consensus/kv_leader.h"
#include "consensus/wire.h"

static char dir[64], sock[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/innet-kv-leader.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(sock, sizeof(sock), "%s/kv-b0.sock", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

struct query {
	pthread_t th;
	int rc;
	struct kv_leader_status st;
	char err[512];
	atomic_bool done;
};

static void *query_main(void *arg)
{
	struct query *q = arg;
	q->rc = kv_leader_status_query(sock, &q->st, q->err, sizeof(q->err));
	atomic_store(&q->done, true);
	return NULL;
}

/* Ask the status socket from a thread while this one serves it. */
static int ask(struct kv_leader_status_srv *srv, struct innet_paxos_leader *l,
	       struct kv_leader_status *st)
{
	struct query q = { .rc = 0 };
	assert_int_equal(pthread_create(&q.th, NULL, query_main, &q), 0);
	uint64_t t0 = innet_now_ns();
	while (!atomic_load(&q.done) && innet_now_ns() - t0 < 10000000000ull) {
		kv_leader_status_serve(srv, l);
		usleep(1000);
	}
	pthread_join(q.th, NULL);
	if (q.rc != 0)
		fprintf(stderr, "query: %s\n", q.err);
	*st = q.st;
	return q.rc;
}

static void send_1b(int fd, const struct sockaddr_in *to, uint16_t node, uint32_t ballot)
{
	struct paxos_msg m;
	memset(&m, 0, PAXOS_HDR_LEN);
	m.h.magic = INNET_MAGIC;
	m.h.version = INNET_VERSION;
	m.h.service = INNET_SVC_PAXOS;
	m.p.type = PAXOS_1B;
	m.p.node = htons(node);
	m.p.ballot = htonl(ballot);
	m.p.hi = htobe64(5);
	assert_int_equal(sendto(fd, &m, PAXOS_HDR_LEN, 0, (const struct sockaddr *)to, sizeof(*to)),
			 (ssize_t)PAXOS_HDR_LEN);
}

static void test_status_socket(void **state)
{
	/* a leader of 3 acceptors (nobody listens there: its 1As go nowhere) */
	struct innet_paxos_leader_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = INADDR_LOOPBACK;
	c.n_acceptors = 3;
	for (uint32_t i = 0; i < 3; i++)
		c.acceptors[i] = (struct innet_addr){ INADDR_LOOPBACK, (uint16_t)(9 + i) };
	c.proposer_id = 0xfe;
	c.min_round = 4;
	char err[512];
	struct innet_paxos_leader *l = innet_paxos_leader_create(&c, err, sizeof(err));
	assert_non_null(l);
	struct kv_leader_status_srv srv;
	assert_int_equal(kv_leader_status_open(&srv, sock, err, sizeof(err)), 0);
	assert_true(innet_ctl_answers(sock));

	/* idle: a backup waiting */
	struct kv_leader_status st;
	assert_int_equal(ask(&srv, l, &st), 0);
	assert_false(st.serving);
	assert_int_equal(st.takeovers, 0);

	/* phase 1: a ballot above min_round, not serving yet */
	innet_paxos_leader_takeover(l);
	assert_int_equal(ask(&srv, l, &st), 0);
	assert_false(st.serving);
	assert_int_equal(st.takeovers, 1);
	assert_int_equal(st.ballot, 5u << 8 | 0xfe);

	/* promises from two of three: serving from their hi */
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in to;
	socklen_t tl = sizeof(to);
	assert_int_equal(getsockname(innet_paxos_leader_fd(l), (struct sockaddr *)&to, &tl), 0);
	send_1b(fd, &to, 0, st.ballot);
	send_1b(fd, &to, 1, st.ballot);
	for (int i = 0; i < 100 && !innet_paxos_leader_serving(l); i++) {
		usleep(1000);
		innet_paxos_leader_process(l);
	}
	close(fd);
	assert_int_equal(ask(&srv, l, &st), 0);
	assert_true(st.serving);
	assert_int_equal(st.next, 5);

	kv_leader_status_close(&srv);
	assert_false(innet_ctl_answers(sock));
	assert_int_equal(access(sock, F_OK), -1);    /* the file is gone */
	innet_paxos_leader_destroy(l);
}

struct call {
	pthread_t th;
	const char *line;
	json_t *j;
	char err[512];
	atomic_bool done;
};

static void *call_main(void *arg)
{
	struct call *c = arg;
	c->j = innet_ctl_call(sock, c->line, 5, c->err, sizeof(c->err));
	atomic_store(&c->done, true);
	return NULL;
}

static void test_bad_requests(void **state)
{
	struct innet_paxos_leader_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = INADDR_LOOPBACK;
	c.n_acceptors = 1;
	c.acceptors[0] = (struct innet_addr){ INADDR_LOOPBACK, 9 };
	char err[512];
	struct innet_paxos_leader *l = innet_paxos_leader_create(&c, err, sizeof(err));
	assert_non_null(l);
	struct kv_leader_status_srv srv;
	assert_int_equal(kv_leader_status_open(&srv, sock, err, sizeof(err)), 0);

	/* an unknown request */
	struct call k = { .line = "frob" };
	assert_int_equal(pthread_create(&k.th, NULL, call_main, &k), 0);
	while (!atomic_load(&k.done)) {
		kv_leader_status_serve(&srv, l);
		usleep(1000);
	}
	pthread_join(k.th, NULL);
	assert_null(k.j);
	assert_non_null(strstr(k.err, "unknown request (this socket answers: status)"));

	/* a client that connects and says nothing: dropped after a second */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	uint64_t t0 = innet_now_ns();
	bool closed = false;
	while (!closed && innet_now_ns() - t0 < 20000000000ull) {
		kv_leader_status_serve(&srv, l);
		char b;
		closed = recv(fd, &b, 1, MSG_DONTWAIT) == 0;
		usleep(5000);
	}
	close(fd);
	assert_true(closed);
	assert_true(innet_now_ns() - t0 >= 900000000ull); /* not before its second */

	/* a second server on the same path replaces the old socket file */
	kv_leader_status_close(&srv);
	assert_int_equal(kv_leader_status_open(&srv, sock, err, sizeof(err)), 0);
	kv_leader_status_close(&srv);
	innet_paxos_leader_destroy(l);

	/* a path too long, a directory that is not there */
	char longp[200];
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(kv_leader_status_open(&srv, longp, err, sizeof(err)), -ENAMETOOLONG);
	assert_int_equal(kv_leader_status_open(&srv, "/nonexistent-dir/x.sock", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent-dir/x.sock"));
	struct kv_leader_status st;
	assert_int_equal(kv_leader_status_query("/nonexistent-dir/x.sock", &st, err, sizeof(err)), -ENOENT);
}

static void test_round_file(void **state)
{
	char path[128], err[512];
	snprintf(path, sizeof(path), "%s/kv-b0.round", dir);
	assert_int_equal(kv_leader_round_load(path), 0);               /* none yet */
	assert_int_equal(kv_leader_round_store(path, 0x5fe, err, sizeof(err)), 0);
	assert_int_equal(kv_leader_round_load(path), 5);
	assert_int_equal(kv_leader_round_store(path, 0x7ffe, err, sizeof(err)), 0);
	assert_int_equal(kv_leader_round_load(path), 0x7f);
	FILE *f = fopen(path, "w");
	fputs("not a round\n", f);
	fclose(f);
	assert_int_equal(kv_leader_round_load(path), 0);
	f = fopen(path, "w");
	fputs("99999999999\n", f);
	fclose(f);
	assert_int_equal(kv_leader_round_load(path), 0xffffff);        /* at most 24 bits */
	assert_int_equal(kv_leader_round_store("/nonexistent-dir/kv-b0.round", 0x100, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "cannot store round 1 in /nonexistent-dir/kv-b0.round"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_socket),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_round_file),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
