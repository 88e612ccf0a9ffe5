/*
 * fuzz_agg_host.c — libFuzzer target: the aggregation worker library
 * (src/agg/host.c, innet_agg_*) reading results from the network. The
 * target plays the switch on loopback: a worker thread runs
 * [innet_agg_join,] one or two all-reduce calls against it, and for every
 * datagram the worker sends, the next input byte picks the answer.
 *
 *   byte 0   bit 0: float32 (else int32); bits 1-2: n_workers 1 + value
 *            (this worker is the last); bit 3: rejoin first (JOIN, JOINED);
 *            bit 4: two calls
 *   byte 1   k = 1 + byte % 16; slots = 1 + (byte >> 4) % 4
 *   byte 2   elements n = 1 + byte % 64
 *   then     per datagram the worker sends, a byte m:
 *              m % 8 < 4   the right answer: a RESULT (COMPLETE) that sums
 *                          what every worker sent as if all sent this
 *                          worker's packet (a JOIN: JOINED records "nothing
 *                          finished")
 *              4           no answer (the worker retransmits)
 *              5           the right answer with one byte changed (the next
 *                          two bytes: offset, xor)
 *              6           garbage (the next byte: length, then that many
 *                          bytes), then the right answer
 *              7           STALE for a round the next byte moves (a JOIN:
 *                          JOINED with records from the next 12 bytes)
 *            once the input is used up (or after 256 choices), every
 *            answer is the right one.
 *
 * Invariants: every call ends (with 0 or a documented error: -ESTALE,
 * -ETIMEDOUT, -EPROTO from a join) within its timeout, never hangs or
 * crashes; when every answer was the right one (or none), the call
 * succeeds and its output is the sum — exact for int32, within
 * innet_agg_f32_error_bound for float32; the counters never count more
 * results than answers sent. ASan and UBSan watch every read.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "innet/agg.h"
#include "agg/wire.h"

#define CHECK(cond)                                                                            \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "fuzz_agg_host: %s:%d: check failed: %s\n", __FILE__,  \
				__LINE__, #cond);                                              \
			abort();                                                               \
		}                                                                              \
	} while (0)

#define N_MAX 64u
/* A call fails after this long without progress. Far above what a right
 * answer takes even on a loaded machine (a right answer always comes within
 * one retransmission), so a call that times out although every answer was
 * right is a finding, not the machine's load; and short enough that inputs
 * whose answers stall a call still run several per second. */
#define TIMEOUT_MS 400u
/* Answers chosen by the input at most (then right ones): with each "no
 * answer" costing a retransmission timeout (up to 2 ms), an input never
 * runs longer than about half a second. */
#define CHOICES_MAX 256u

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sw_fd;                 /* the "switch" */
static struct sockaddr_in sw_addr;
static uint8_t rx[65536], tx[65536];

struct worker {
	struct innet_agg *a;
	bool f32, join, two;
	size_t n;
	int32_t in_i[N_MAX], out_i[N_MAX];
	float in_f[N_MAX], out_f[N_MAX];
	int rc[2];                    /* each call's result */
	int join_rc;
	atomic_bool done;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	w->join_rc = 0;
	if (w->join) {
		uint32_t next;
		w->join_rc = innet_agg_join(w->a, w->n, w->f32, &next);
	}
	for (int c = 0; c < (w->two ? 2 : 1); c++) {
		w->rc[c] = w->f32 ? innet_agg_allreduce_f32(w->a, w->in_f, w->out_f, w->n)
				  : innet_agg_allreduce_i32(w->a, w->in_i, w->out_i, w->n);
		if (w->rc[c] != 0)
			break;
	}
	atomic_store(&w->done, true);
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sw_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sw_addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(sw_addr);
	int buf = 4 << 20;
	if (sw_fd < 0 || bind(sw_fd, (struct sockaddr *)&sw_addr, sizeof(sw_addr)) != 0 ||
	    getsockname(sw_fd, (struct sockaddr *)&sw_addr, &l) != 0) {
		perror("fuzz_agg_host: socket");
		abort();
	}
	setsockopt(sw_fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	return 0;
}

/* The right RESULT for contribution c (len bytes) into out: every one of
 * n_workers sent the same elements. Returns its length. */
static size_t right_result(const uint8_t *c, size_t len, uint32_t n_workers, uint8_t *out)
{
	memcpy(out, c, len);
	struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(out + sizeof(struct innet_hdr));
	ah->op = INNET_AGG_RESULT;
	ah->status = INNET_AGG_COMPLETE;
	ah->worker = 0xff;
	ah->bitmap = htobe64(n_workers >= 64 ? ~0ull : (1ull << n_workers) - 1);
	uint32_t *el = (uint32_t *)(out + INNET_AGG_HDR_LEN);
	uint32_t k = (uint32_t)(len - INNET_AGG_HDR_LEN) / 4;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t v;
		memcpy(&v, &el[i], 4);
		v = htonl(ntohl(v) * n_workers);
		memcpy(&el[i], &v, 4);
	}
	return len;
}

struct input {
	const uint8_t *p;
	size_t left;
	unsigned choices;   /* answers chosen so far */
};

static int next_byte(struct input *in)
{
	if (in->left == 0)
		return -1;
	in->left--;
	return *in->p++;
}

/* An answer was withheld in this input (mode 4): the worker retransmits,
 * but a START withheld often enough can outlast its time limit. */
static bool withheld;

static void reply(const uint8_t *b, size_t len, const struct sockaddr_in *to)
{
	sendto(sw_fd, b, len, 0, (const struct sockaddr *)to, sizeof(*to));
}

/* Answer one datagram from the worker; *wrong is set when the answer could
 * be taken although it is not the right one. */
static void answer(const uint8_t *d, size_t len, const struct sockaddr_in *from, uint32_t n_workers,
		   struct input *in, bool *wrong, uint64_t *answers)
{
	if (len < INNET_AGG_HDR_LEN)
		return;
	const struct innet_agg_hdr *ah = (const struct innet_agg_hdr *)(d + sizeof(struct innet_hdr));
	int m = in->choices++ < CHOICES_MAX ? next_byte(in) : -1;
	int mode = m < 0 ? 0 : m % 8;
	if (ah->op == INNET_AGG_JOIN) {
		memcpy(tx, d, len);
		struct innet_agg_hdr *jh = (struct innet_agg_hdr *)(tx + sizeof(struct innet_hdr));
		jh->op = INNET_AGG_JOINED;
		/* the right answer: registered in run (generation) 0, every worker
		 * in it, nothing finished yet (records all zero) */
		jh->status = INNET_AGG_JOINED_OK;
		jh->round = 0;
		jh->gen = 0;
		jh->bitmap = htobe64(n_workers >= 64 ? ~0ull : (1ull << n_workers) - 1);
		if (mode == 7) {
			for (size_t i = INNET_AGG_HDR_LEN; i < len && i < INNET_AGG_HDR_LEN + 12; i++) {
				int b = next_byte(in);
				tx[i] = b < 0 ? 0 : (uint8_t)b;
			}
			*wrong = true;
		}
		if (mode != 4) {
			reply(tx, len, from);
			(*answers)++;
		} else {
			withheld = true;
		}
		return;
	}
	if (ah->op == INNET_AGG_LEAVE)
		return; /* the worker's handle closes: the switch answers nothing */
	CHECK(ah->op == INNET_AGG_CONTRIB);
	size_t n = right_result(d, len, n_workers, tx);
	switch (mode) {
	case 4:
		withheld = true;
		return;
	case 5: {
		int off = next_byte(in), x = next_byte(in);
		if (off >= 0 && x > 0) {
			tx[(size_t)off % n] ^= (uint8_t)x;
			*wrong = true;
		}
		break;
	}
	case 6: {
		int l = next_byte(in);
		uint8_t g[256];
		size_t gl = 0;
		while (l > 0 && gl < (size_t)l) {
			int b = next_byte(in);
			if (b < 0)
				break;
			g[gl++] = (uint8_t)b;
		}
		reply(g, gl, from);
		*wrong = true; /* (garbage that parses as a result is possible) */
		break;
	}
	case 7: {
		int dr = next_byte(in);
		struct innet_agg_hdr *rh = (struct innet_agg_hdr *)(tx + sizeof(struct innet_hdr));
		rh->status = INNET_AGG_STALE;
		rh->round = htonl(ntohl(rh->round) + (uint32_t)(dr < 0 ? 1 : dr));
		n = INNET_AGG_HDR_LEN;
		*wrong = true;
		break;
	}
	default:
		break;
	}
	reply(tx, n, from);
	(*answers)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	static struct worker w;
	memset(&w, 0, sizeof(w));
	uint8_t cfg = data[0];
	w.f32 = cfg & 1;
	uint32_t n_workers = 1 + ((cfg >> 1) & 3);
	w.join = (cfg & 8) != 0;
	w.two = (cfg & 0x10) != 0;
	struct innet_agg_conf c = {
		.switch_ip = INADDR_LOOPBACK, .switch_udp = ntohs(sw_addr.sin_port),
		.local_ip = INADDR_LOOPBACK, .job = 3, .worker = (uint8_t)(n_workers - 1),
		.n_workers = (uint8_t)n_workers, .k = 1 + data[1] % 16, .slots = 1 + (data[1] >> 4) % 4,
		.rto_us = 300, .rto_max_us = 2000, .timeout_ms = TIMEOUT_MS,
	};
	w.n = 1 + data[2] % N_MAX;
	for (size_t i = 0; i < w.n; i++) {
		w.in_i[i] = (int32_t)(i * 2654435761u);
		w.in_f[i] = (float)((double)(int32_t)(i * 2654435761u) / 65536.0);
	}
	w.a = innet_agg_open(&c);
	CHECK(w.a != NULL);
	struct input in = { data + 3, size - 3, 0 };
	bool wrong = false;
	withheld = false;
	uint64_t answers = 0;
	pthread_t th;
	CHECK(pthread_create(&th, NULL, worker_main, &w) == 0);
	/* serve until the worker is done (it must be, within its timeouts: a
	 * worker that hangs is caught by libFuzzer's -timeout, 5 s in tests/run) */
	while (!atomic_load(&w.done)) {
		struct pollfd pfd = { .fd = sw_fd, .events = POLLIN };
		poll(&pfd, 1, 2);
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t len;
		while ((len = recvfrom(sw_fd, rx, sizeof(rx), MSG_DONTWAIT, (struct sockaddr *)&from, &fl)) >= 0) {
			answer(rx, (size_t)len, &from, n_workers, &in, &wrong, &answers);
			fl = sizeof(from);
		}
	}
	pthread_join(th, NULL);
	while (recv(sw_fd, rx, sizeof(rx), MSG_DONTWAIT) >= 0)
		;

	/* what a call may say of a switch that answers anything (src/agg/host.c):
	 * -EBUSY and -ECONNRESET since the job's runs (START's WAIT, RESTARTED),
	 * -EPROTO for an answer of another shape */
	for (int k = 0; k < 2; k++)
		CHECK(w.rc[k] == 0 || w.rc[k] == -ESTALE || w.rc[k] == -ETIMEDOUT || w.rc[k] == -EBUSY ||
		      w.rc[k] == -ECONNRESET || w.rc[k] == -EPROTO);
	CHECK(w.join_rc == 0 || w.join_rc == -EPROTO || w.join_rc == -ETIMEDOUT);
	struct innet_agg_stats st;
	innet_agg_get_stats(w.a, &st);
	CHECK(st.results <= answers);
	if (!wrong) {
		/* only right answers (or none): every call worked, and summed — or,
		 * where answers were withheld, timed out (never another error) */
		bool ok = w.join_rc == 0 && w.rc[0] == 0 && w.rc[1] == 0;
		if (withheld)
			ok = (w.join_rc == 0 || w.join_rc == -ETIMEDOUT) &&
			     (w.rc[0] == 0 || w.rc[0] == -ETIMEDOUT) && (w.rc[1] == 0 || w.rc[1] == -ETIMEDOUT);
		if (!ok)
			fprintf(stderr, "fuzz_agg_host: right answers only, yet join %d, calls %d %d\n", w.join_rc,
				w.rc[0], w.rc[1]);
		CHECK(ok);
		for (size_t i = 0; w.join_rc == 0 && w.rc[0] == 0 && w.rc[1] == 0 && i < w.n; i++) {
			if (!w.f32) {
				CHECK(w.out_i[i] == (int32_t)((uint32_t)w.in_i[i] * n_workers));
				continue;
			}
			/* the block's largest |x| bounds the error */
			size_t b0 = i / c.k * c.k;
			double m = 0;
			for (size_t j = b0; j < b0 + c.k && j < w.n; j++)
				m = fabs(w.in_f[j]) > m ? fabs(w.in_f[j]) : m;
			double want = (double)w.in_f[i] * n_workers;
			double bound = innet_agg_f32_error_bound(n_workers, m) + ldexp(fabs(want), -23);
			CHECK(fabs((double)w.out_f[i] - want) <= bound);
		}
	}
	innet_agg_close(w.a);
	return 0;
}
