/*
 * test_paxos_wire.c — the host Paxos endpoint (src/consensus/paxos.c)
 * against hand-made datagrams, no switch: the cases the fuzz targets
 * (tests/fuzz/fuzz_learner.c) found, each as the exchange that showed it.
 *
 *   test socket (127.0.0.1, any port) ──2B / NACK──▶ endpoint (127.0.0.1, any port)
 *        ▲                                                │
 *        └──────────── REQUEST, RECOVER, 1A ──────────────┘  (coordinator and
 *                                                             acceptors = the test socket)
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/consensus.h"
#include "consensus/wire.h"

struct fx {
	int fd;                        /* the test's socket: acceptors and coordinator */
	struct sockaddr_in me;
	struct innet_paxos *p;
	struct sockaddr_in ep;         /* the endpoint's address */
	uint64_t inst[32], req[32];    /* deliveries */
	char val[32][16];
	uint32_t n;
	uint64_t done_req[8];          /* proposals ended */
	int done_status[8];
	uint32_t n_done;
};

static void on_deliver(void *arg, uint64_t inst, uint64_t req, const uint8_t *v, uint32_t len)
{
	struct fx *f = arg;
	assert_true(f->n < 32);
	f->inst[f->n] = inst;
	f->req[f->n] = req;
	snprintf(f->val[f->n], sizeof(f->val[0]), "%.*s", (int)len, (const char *)v);
	f->n++;
}

static void on_done(void *arg, uint64_t req, int status, uint64_t inst)
{
	struct fx *f = arg;
	(void)inst;
	assert_true(f->n_done < 8);
	f->done_req[f->n_done] = req;
	f->done_status[f->n_done++] = status;
}

/* An endpoint with one acceptor (a majority is one vote) and a window of 8. */
static void fx_init(struct fx *f, uint64_t start)
{
	memset(f, 0, sizeof(*f));
	f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(f->fd >= 0);
	f->me = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(f->me);
	assert_int_equal(bind(f->fd, (struct sockaddr *)&f->me, sizeof(f->me)), 0);
	assert_int_equal(getsockname(f->fd, (struct sockaddr *)&f->me, &l), 0);
	struct innet_paxos_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = INADDR_LOOPBACK;
	struct innet_addr me = { INADDR_LOOPBACK, ntohs(f->me.sin_port) };
	c.coordinator = me;
	c.acceptors[0] = me;
	c.n_acceptors = 1;
	c.learner_id = INNET_PAXOS_NO_TRIM;
	c.window = 8;
	c.start = start;
	c.deliver = on_deliver;
	c.done = on_done;
	c.arg = f;
	char err[256];
	f->p = innet_paxos_create(&c, err, sizeof(err));
	if (f->p == NULL)
		fail_msg("innet_paxos_create: %s", err);
	l = sizeof(f->ep);
	assert_int_equal(getsockname(innet_paxos_fd(f->p), (struct sockaddr *)&f->ep, &l), 0);
}

static void fx_fini(struct fx *f)
{
	innet_paxos_destroy(f->p);
	close(f->fd);
}

/* Send a Paxos message of type t to the endpoint and let it process. */
static void send_msg(struct fx *f, uint8_t t, uint8_t status, uint64_t inst, uint64_t req, const char *value)
{
	struct paxos_msg m;
	memset(&m, 0, PAXOS_HDR_LEN);
	m.h.magic = INNET_MAGIC;
	m.h.version = INNET_VERSION;
	m.h.service = INNET_SVC_PAXOS;
	m.p.type = t;
	m.p.status = status;
	m.p.ballot = htonl(1u << 8 | 1u);
	m.p.instance = htobe64(inst);
	m.p.req_id = htobe64(req);
	uint16_t vlen = value ? (uint16_t)strlen(value) : 0;
	m.p.vlen = htons(vlen);
	if (vlen)
		memcpy(m.value, value, vlen);
	ssize_t n = sendto(f->fd, &m, PAXOS_HDR_LEN + vlen, 0, (struct sockaddr *)&f->ep, sizeof(f->ep));
	assert_int_equal(n, (ssize_t)(PAXOS_HDR_LEN + vlen));
	int rc = innet_paxos_process(f->p);
	assert_true(rc == 0 || rc == -ESTALE);
}

/* A NACK (too big) naming request 0 while a request waits: request 0 is no
 * request. It ended a free pending slot instead — done(0) was called, the
 * count of pending requests fell to 0 with one still waiting, which then
 * could never complete (nor be resent, nor time out); a second such NACK
 * made the count wrap and every later proposal fail with -EAGAIN. */
static void test_nack_naming_request_0(void **state)
{
	(void)state;
	struct fx f;
	fx_init(&f, 0);
	uint64_t req = innet_paxos_req_id(5, 1);
	assert_int_equal(innet_paxos_propose(f.p, req, "a", 1), 0);
	send_msg(&f, PAXOS_NACK, PAXOS_ST_TOO_BIG, 0, 0, NULL);
	send_msg(&f, PAXOS_NACK, PAXOS_ST_TOO_BIG, 0, 0, NULL);
	assert_int_equal(f.n_done, 0);                                /* nothing ended */
	assert_int_equal(innet_paxos_propose(f.p, req, "a", 1), -EEXIST); /* still pending */
	/* chosen: it completes */
	send_msg(&f, PAXOS_2B, PAXOS_OK, 0, req, "a");
	assert_int_equal(f.n_done, 1);
	assert_true(f.done_req[0] == req);
	assert_int_equal(f.done_status[0], 0);
	assert_int_equal(f.n, 1);
	/* and proposing goes on */
	assert_int_equal(innet_paxos_propose(f.p, innet_paxos_req_id(5, 2), "b", 1), 0);
	fx_fini(&f);
}

/* Instance 2^64 - 1: a slot freed by a delivery kept its chosen mark and
 * inst1 = 0, which is also what instance 2^64 - 1's inst1 (inst + 1) wraps
 * to: once the log reached it, the learner delivered the slot's previous
 * value again as instance 2^64 - 1. It now stops before that instance. */
/* (client 0: no deduplication, so a value delivered twice shows) */
static void test_last_instance(void **state)
{
	(void)state;
	struct fx f;
	const uint64_t start = UINT64_MAX - 9;
	fx_init(&f, start);
	for (uint64_t i = start; i < UINT64_MAX; i++) {
		char v[16];
		snprintf(v, sizeof(v), "v%u", (unsigned)(i - start));
		send_msg(&f, PAXOS_2B, PAXOS_OK, i, innet_paxos_req_id(0, (uint32_t)(i - start) + 1), v);
	}
	send_msg(&f, PAXOS_2B, PAXOS_OK, UINT64_MAX, innet_paxos_req_id(0, 100), "last");
	assert_int_equal(f.n, 9);
	for (uint32_t k = 0; k < f.n; k++) {
		char v[16];
		snprintf(v, sizeof(v), "v%u", k);
		assert_true(f.inst[k] == start + k);
		assert_string_equal(f.val[k], v);
	}
	assert_true(innet_paxos_delivered(f.p) == UINT64_MAX);
	fx_fini(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nack_naming_request_0),
		cmocka_unit_test(test_last_instance),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
