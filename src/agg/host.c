/*
 * agg/host.c — the worker side of in-network all-reduce (innet/agg.h).
 *
 * An array of n elements is cut into C = ceil(n / k) chunks of k elements
 * (the last one zero-padded). The call uses W = min(slots, C) of the job's
 * slots; chunk j goes to slot j % W, so each slot carries a sequence of
 * chunks j, j + W, j + 2W, ... one at a time: the next one is sent when the
 * result of the previous one arrives (the sending window is W packets).
 * Every use of a slot advances that slot's round, which the switch checks.
 *
 * Floats (block floating point, as SwitchML): each packet also carries this
 * worker's exponent proposal for the NEXT chunk of the same slot, and the
 * result returns the max over the workers, so when a slot's chunk j + W is
 * sent, its scale is already agreed. The first use of each slot is a
 * priming packet (zero elements, proposal for its first chunk); a float call
 * sends C + W packets per worker, an int32 call C.
 *
 * Quantization of a block with agreed exponent E (every |x| < 2^E):
 *   q = round(x * 2^(B - E)),  B = 30 - ceil(log2(n_workers))
 * so |q| <= 2^B and the sum of n workers stays within 2^30 < 2^31. Result
 * x' = sum * 2^(E - B); each worker's rounding error is at most 2^(E-B-1).
 *
 * Reliability: a slot whose result has not come back within its RTO is sent
 * again (RTO doubles up to rto_max); the switch answers a retransmission of
 * a finished round with the result (only to us) and ignores one for a round
 * in progress. No progress for timeout_ms: -ETIMEDOUT.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/agg.h"
#include "agg/wire.h"

#define RX_BATCH 64

struct slot_state {
	uint32_t round;       /* the slot's next round (persists across calls) */
	uint32_t use;         /* this call: uses of the slot so far */
	bool busy;            /* a packet is in flight */
	uint64_t sent_ns;     /* last (re)transmission */
	uint32_t rto_us;
	uint8_t next_exp;     /* float: agreed exponent (biased) for the slot's next chunk */
	bool retransmitted;   /* the packet in flight was sent more than once (Karn) */
};

struct innet_agg {
	struct innet_agg_conf conf;
	int fd;
	struct sockaddr_in to;
	struct slot_state *slots;   /* conf.slots */
	uint8_t *pkts;              /* per slot: the packet in flight (for retransmission) */
	uint32_t pkt_len;
	int broken;                 /* sticky error after -ETIMEDOUT / -ESTALE */
	int qbits;                  /* B */
	uint64_t srtt_ns;           /* smoothed round trip (RFC 6298), 0 = no sample yet */
	uint64_t rttvar_ns;
	struct innet_agg_stats st;
	/* asynchronous call */
	pthread_t thread;
	bool async_busy;
	int async_rc;
	bool async_f32;
	const void *async_in;
	void *async_out;
	size_t async_n;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int ceil_log2(uint32_t n)
{
	int b = 0;
	while ((1u << b) < n)
		b++;
	return b;
}

double innet_agg_f32_error_bound(uint32_t n_workers, double max_abs)
{
	if (max_abs == 0)
		return 0;
	int e;
	frexp(max_abs, &e); /* max_abs < 2^e */
	if (e < -126)
		e = -126;
	int b = 30 - ceil_log2(n_workers ? n_workers : 1);
	return (double)n_workers * ldexp(1.0, e - b - 1);
}

struct innet_agg *innet_agg_open(const struct innet_agg_conf *conf)
{
	if (conf->n_workers == 0 || conf->n_workers > INNET_AGG_MAX_WORKERS ||
	    conf->worker >= conf->n_workers || conf->slots == 0 || conf->slots > 65535 ||
	    conf->k == 0 || conf->k > INNET_AGG_K_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct innet_agg *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return NULL;
	a->conf = *conf;
	if (a->conf.switch_udp == 0)
		a->conf.switch_udp = INNET_AGG_UDP;
	if (a->conf.rto_us == 0)
		a->conf.rto_us = 2000;
	if (a->conf.rto_max_us == 0)
		a->conf.rto_max_us = 200000;
	if (a->conf.timeout_ms == 0)
		a->conf.timeout_ms = 5000;
	a->qbits = 30 - ceil_log2(conf->n_workers);
	a->pkt_len = INNET_AGG_HDR_LEN + 4 * conf->k;
	a->slots = calloc(conf->slots, sizeof(*a->slots));
	a->pkts = malloc((size_t)conf->slots * a->pkt_len);
	if (a->slots == NULL || a->pkts == NULL)
		goto err_free;
	a->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (a->fd < 0)
		goto err_free;
	/* room for a whole window of results (FORCE passes rmem_max as root) */
	int buf = (int)((size_t)conf->slots * a->pkt_len * 2 + (1 << 20));
	if (setsockopt(a->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(a->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(a->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(conf->local_udp),
				  .sin_addr.s_addr = htonl(conf->local_ip) };
	if (bind(a->fd, (struct sockaddr *)&me, sizeof(me)) < 0)
		goto err_close;
	a->to = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons(a->conf.switch_udp),
				      .sin_addr.s_addr = htonl(conf->switch_ip) };
	return a;

err_close:;
	int e = errno;
	close(a->fd);
	errno = e;
err_free:
	e = errno;
	free(a->slots);
	free(a->pkts);
	free(a);
	errno = e;
	return NULL;
}

void innet_agg_close(struct innet_agg *a)
{
	if (a == NULL)
		return;
	if (a->async_busy)
		innet_agg_wait(a);
	close(a->fd);
	free(a->slots);
	free(a->pkts);
	free(a);
}

void innet_agg_get_stats(const struct innet_agg *a, struct innet_agg_stats *out)
{
	*out = a->st;
}

/* ---- one call ------------------------------------------------------------ */

struct call {
	struct innet_agg *a;
	bool f32;
	const void *in;
	void *out;
	size_t n;
	uint32_t chunks;    /* C */
	uint32_t w;         /* slots used */
	uint32_t priming;   /* 1 for floats (first use of a slot primes the exponent), else 0 */
};

/* Chunk carried by use u of slot s, or -1 (a priming use). */
static int64_t use_chunk(const struct call *c, uint32_t s, uint32_t u)
{
	if (u < c->priming)
		return -1;
	return (int64_t)s + (int64_t)(u - c->priming) * c->w;
}

/* Uses of slot s in this call. */
static uint32_t slot_uses(const struct call *c, uint32_t s)
{
	uint32_t chunks = s < c->chunks ? (c->chunks - s + c->w - 1) / c->w : 0;
	return chunks + c->priming;
}

/* Biased exponent proposal of this worker for chunk j (0: all zero). */
static uint8_t chunk_exp(const struct call *c, int64_t j)
{
	if (j < 0 || j >= c->chunks)
		return 0;
	const float *x = (const float *)c->in + (size_t)j * c->a->conf.k;
	size_t cnt = c->n - (size_t)j * c->a->conf.k;
	if (cnt > c->a->conf.k)
		cnt = c->a->conf.k;
	float m = 0;
	for (size_t i = 0; i < cnt; i++)
		m = fmaxf(m, fabsf(x[i]));
	if (m == 0)
		return 0;
	int e;
	frexpf(m, &e);
	if (e < -126)
		e = -126;
	return (uint8_t)(e + INNET_AGG_EXP_BIAS);
}

/* Build the packet for the slot's current use into its buffer. */
static void build_packet(struct call *c, uint32_t s)
{
	struct innet_agg *a = c->a;
	struct slot_state *ss = &a->slots[s];
	uint8_t *p = a->pkts + (size_t)s * a->pkt_len;
	struct innet_hdr *h = (struct innet_hdr *)p;
	struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(h + 1);
	uint32_t k = a->conf.k;
	int64_t j = use_chunk(c, s, ss->use);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
	*ah = (struct innet_agg_hdr){ .op = INNET_AGG_CONTRIB, .job = htons(a->conf.job), .slot = htons((uint16_t)s),
				      .ver = (uint8_t)(ss->round & 1), .worker = a->conf.worker,
				      .round = htonl(ss->round),
				      .offset = htonl(j < 0 ? 0 : (uint32_t)((size_t)j * k)),
				      .k = htons((uint16_t)k) };
	uint32_t *el = (uint32_t *)(ah + 1);
	size_t first = j < 0 ? 0 : (size_t)j * k;
	size_t cnt = j < 0 ? 0 : (c->n - first < k ? c->n - first : k);
	if (!c->f32) {
		const int32_t *x = (const int32_t *)c->in + first;
		for (size_t i = 0; i < cnt; i++)
			el[i] = htonl((uint32_t)x[i]);
	} else {
		ah->exp = chunk_exp(c, use_chunk(c, s, ss->use + 1));
		const float *x = (const float *)c->in + first;
		int e = (int)ss->next_exp - INNET_AGG_EXP_BIAS;
		int32_t lim = (int32_t)1 << a->qbits;
		for (size_t i = 0; i < cnt; i++) {
			int32_t q;
			if (ss->next_exp == 0) {
				q = 0;
				if (x[i] != 0)
					a->st.clipped++;
			} else {
				double v = rint(ldexp((double)x[i], a->qbits - e));
				if (v > lim || v < -lim) {
					a->st.clipped++;
					v = v > 0 ? lim : -lim;
				}
				q = (int32_t)v;
			}
			el[i] = htonl((uint32_t)q);
		}
	}
	for (size_t i = cnt; i < k; i++)
		el[i] = 0;
}

static int send_slot(struct call *c, uint32_t s, uint64_t now)
{
	struct innet_agg *a = c->a;
	const uint8_t *p = a->pkts + (size_t)s * a->pkt_len;
	a->slots[s].sent_ns = now;
	ssize_t r = sendto(a->fd, p, a->pkt_len, 0, (struct sockaddr *)&a->to, sizeof(a->to));
	if (r < 0 && errno != EAGAIN && errno != ENOBUFS && errno != ECONNREFUSED && errno != EINTR)
		return -errno;
	/* a full send buffer is a loss: the RTO resends it */
	return 0;
}

/* The first RTO of a packet: max(rto_us, srtt + 4 rttvar), capped. */
static uint32_t rto_now(const struct innet_agg *a)
{
	uint64_t us = (a->srtt_ns + 4 * a->rttvar_ns) / 1000;
	if (us < a->conf.rto_us)
		us = a->conf.rto_us;
	return us > a->conf.rto_max_us ? a->conf.rto_max_us : (uint32_t)us;
}

static void rtt_sample(struct innet_agg *a, uint64_t rtt)
{
	if (a->srtt_ns == 0) {
		a->srtt_ns = rtt;
		a->rttvar_ns = rtt / 2;
		return;
	}
	uint64_t d = rtt > a->srtt_ns ? rtt - a->srtt_ns : a->srtt_ns - rtt;
	a->rttvar_ns = (3 * a->rttvar_ns + d) / 4;
	a->srtt_ns = (7 * a->srtt_ns + rtt) / 8;
}

/* Start the slot's next use, or mark it done. */
static int advance(struct call *c, uint32_t s, uint64_t now, uint32_t *done)
{
	struct slot_state *ss = &c->a->slots[s];
	if (ss->use >= slot_uses(c, s)) {
		ss->busy = false;
		(*done)++;
		return 0;
	}
	build_packet(c, s);
	ss->busy = true;
	ss->retransmitted = false;
	ss->rto_us = rto_now(c->a);
	c->a->st.packets_sent++;
	return send_slot(c, s, now);
}

/* A result for slot s (validated): take the elements, go on. */
static void take_result(struct call *c, uint32_t s, const struct innet_agg_hdr *ah)
{
	struct innet_agg *a = c->a;
	struct slot_state *ss = &a->slots[s];
	uint32_t k = a->conf.k;
	uint64_t bitmap = be64toh(ah->bitmap);
	uint64_t all = a->conf.n_workers >= 64 ? ~0ull : (1ull << a->conf.n_workers) - 1;
	if (bitmap != all) {
		a->st.partial++;
		if (!(bitmap & (1ull << a->conf.worker)))
			a->st.excluded++;
	}
	int64_t j = use_chunk(c, s, ss->use);
	const uint32_t *el = (const uint32_t *)(ah + 1);
	if (j >= 0) {
		size_t first = (size_t)j * k;
		size_t cnt = c->n - first < k ? c->n - first : k;
		if (!c->f32) {
			int32_t *y = (int32_t *)c->out + first;
			for (size_t i = 0; i < cnt; i++)
				y[i] = (int32_t)ntohl(el[i]);
		} else {
			float *y = (float *)c->out + first;
			int e = (int)ss->next_exp - INNET_AGG_EXP_BIAS;
			for (size_t i = 0; i < cnt; i++)
				y[i] = ss->next_exp == 0 ? 0.0f
							 : (float)ldexp((double)(int32_t)ntohl(el[i]), e - a->qbits);
		}
	}
	ss->next_exp = ah->exp;
	ss->round++;
	ss->use++;
	a->st.results++;
}

static int run_call(struct call *c)
{
	struct innet_agg *a = c->a;
	if (a->broken)
		return a->broken;
	uint32_t k = a->conf.k;
	c->chunks = (uint32_t)((c->n + k - 1) / k);
	if (c->n == 0)
		return 0;
	if ((uint64_t)c->n > (uint64_t)UINT32_MAX)
		return -E2BIG;
	c->w = c->chunks < a->conf.slots ? c->chunks : a->conf.slots;
	c->priming = c->f32 ? 1 : 0;
	if (c->f32) {
		const float *x = c->in;
		for (size_t i = 0; i < c->n; i++)
			if (!isfinite(x[i]))
				return -EDOM;
	}
	/* The output may alias the input: chunk j's result overwrites chunk j
	 * only, after chunk j's packet was built; the exponent of chunk j + W is
	 * read before, its elements after, and neither is chunk j. */
	uint64_t now = mono_ns();
	uint64_t last_progress = now;
	uint32_t done = 0;
	int rc = 0;
	for (uint32_t s = 0; s < c->w; s++) {
		a->slots[s].use = 0;
		a->slots[s].next_exp = 0;
		if ((rc = advance(c, s, now, &done)) != 0)
			goto out;
	}
	uint8_t bufs[RX_BATCH][INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MAX];
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint64_t next_check = now + (uint64_t)a->conf.rto_us * 1000u;
	while (done < c->w) {
		now = mono_ns();
		int wait_ms = 0;
		if (next_check > now)
			wait_ms = (int)((next_check - now + 999999) / 1000000);
		struct pollfd pfd = { .fd = a->fd, .events = POLLIN };
		int pr = poll(&pfd, 1, wait_ms);
		if (pr < 0 && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		for (;;) {
			for (int i = 0; i < RX_BATCH; i++) {
				iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
				msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
			}
			int m = recvmmsg(a->fd, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
			if (m <= 0)
				break;
			now = mono_ns();
			for (int i = 0; i < m; i++) {
				uint32_t len = msgs[i].msg_len;
				const struct innet_hdr *h = (const struct innet_hdr *)bufs[i];
				const struct innet_agg_hdr *ah = (const struct innet_agg_hdr *)(h + 1);
				if (len < INNET_AGG_HDR_LEN || h->magic != INNET_MAGIC ||
				    h->version != INNET_VERSION || h->service != INNET_SVC_AGG ||
				    ah->op != INNET_AGG_RESULT || ntohs(ah->job) != a->conf.job) {
					a->st.results_ignored++;
					continue;
				}
				uint32_t s = ntohs(ah->slot);
				if (s >= c->w || !a->slots[s].busy) {
					a->st.results_ignored++;
					continue;
				}
				/* STALE carries the round the copy holds now. We fell
				 * behind only if the copy of our current round holds a
				 * later round; an old duplicate of ours (the other copy,
				 * or an earlier round) is answered STALE too. */
				if (ah->status == INNET_AGG_STALE && ah->ver == (a->slots[s].round & 1) &&
				    (int32_t)(ntohl(ah->round) - a->slots[s].round) > 0) {
					rc = -ESTALE;
					goto out;
				}
				if (ah->status == INNET_AGG_STALE || ntohl(ah->round) != a->slots[s].round) {
					a->st.results_ignored++;
					continue;
				}
				if (len != a->pkt_len || ntohs(ah->k) != k) {
					a->st.results_ignored++;
					continue;
				}
				if (!a->slots[s].retransmitted)
					rtt_sample(a, now - a->slots[s].sent_ns);
				take_result(c, s, ah);
				last_progress = now;
				if ((rc = advance(c, s, now, &done)) != 0)
					goto out;
			}
			if (m < RX_BATCH)
				break;
		}
		now = mono_ns();
		if (now >= next_check) {
			next_check = UINT64_MAX;
			for (uint32_t s = 0; s < c->w; s++) {
				struct slot_state *ss = &a->slots[s];
				if (!ss->busy)
					continue;
				uint64_t due = ss->sent_ns + (uint64_t)ss->rto_us * 1000u;
				if (due <= now) {
					ss->rto_us = ss->rto_us * 2 > a->conf.rto_max_us ? a->conf.rto_max_us
											  : ss->rto_us * 2;
					a->st.retransmits++;
					ss->retransmitted = true;
					if ((rc = send_slot(c, s, now)) != 0)
						goto out;
					due = now + (uint64_t)ss->rto_us * 1000u;
				}
				if (due < next_check)
					next_check = due;
			}
		}
		if (done < c->w && now - last_progress > (uint64_t)a->conf.timeout_ms * 1000000u) {
			rc = -ETIMEDOUT;
			goto out;
		}
		/* check at least every timeout's worth */
		uint64_t tmo = last_progress + (uint64_t)a->conf.timeout_ms * 1000000u + 1000000u;
		if (tmo < next_check)
			next_check = tmo;
	}
	a->st.calls++;
out:
	for (uint32_t s = 0; s < c->w; s++)
		a->slots[s].busy = false;
	if (rc == -ETIMEDOUT || rc == -ESTALE)
		a->broken = rc;
	return rc;
}

int innet_agg_allreduce_i32(struct innet_agg *a, const int32_t *in, int32_t *out, size_t n)
{
	struct call c = { .a = a, .f32 = false, .in = in, .out = out, .n = n };
	return run_call(&c);
}

int innet_agg_allreduce_f32(struct innet_agg *a, const float *in, float *out, size_t n)
{
	struct call c = { .a = a, .f32 = true, .in = in, .out = out, .n = n };
	return run_call(&c);
}

/* ---- asynchronous calls ---------------------------------------------------- */

static void *async_main(void *arg)
{
	struct innet_agg *a = arg;
	a->async_rc = a->async_f32 ? innet_agg_allreduce_f32(a, a->async_in, a->async_out, a->async_n)
				   : innet_agg_allreduce_i32(a, a->async_in, a->async_out, a->async_n);
	return NULL;
}

static int start(struct innet_agg *a, bool f32, const void *in, void *out, size_t n)
{
	if (a->async_busy)
		return -EBUSY;
	a->async_f32 = f32;
	a->async_in = in;
	a->async_out = out;
	a->async_n = n;
	int rc = pthread_create(&a->thread, NULL, async_main, a);
	if (rc != 0)
		return -rc;
	a->async_busy = true;
	return 0;
}

int innet_agg_start_i32(struct innet_agg *a, const int32_t *in, int32_t *out, size_t n)
{
	return start(a, false, in, out, n);
}

int innet_agg_start_f32(struct innet_agg *a, const float *in, float *out, size_t n)
{
	return start(a, true, in, out, n);
}

int innet_agg_wait(struct innet_agg *a)
{
	if (!a->async_busy)
		return -EINVAL;
	pthread_join(a->thread, NULL);
	a->async_busy = false;
	return a->async_rc;
}
