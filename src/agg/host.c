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
 *
 * The hot path (measured: docs/aggregation.md, "Where the time goes"). One
 * loop iteration receives a batch of results (recvmmsg), and for each
 * result takes the elements and builds the slot's next packet in place;
 * the packets built in the iteration (and any retransmissions) go out
 * together: equal-size datagrams to one address, so one sendmsg carries up
 * to TX_SEGS of them as a UDP GSO "super-datagram" that the kernel cuts
 * back into the same datagrams (a kernel or device that refuses GSO: one
 * datagram per message from then on). Nothing is allocated per call or per
 * packet; quantization works on float/double with power-of-two scales (exact)
 * and one rounding, bit-identical to round(x * 2^(B - E)) in real numbers.
 *
 *   pkts     [slots][pkt_len]      the packet in flight per slot (resent as is)
 *   rx_bufs  [RX_BATCH][pkt_len+1, 8-aligned] receive buffers (+1: a longer datagram shows)
 *   tx_iov   [TX_MAX]              slots queued to send in this iteration
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/agg.h"
#include "innet/clock.h"
#include "agg/wire.h"

#define RX_BATCH 64
#define TX_SEGS_MAX 64u       /* datagrams per GSO send (the kernel's UDP_MAX_SEGMENTS >= 64) */
#define TX_GSO_BYTES 65000u   /* and payload bytes per GSO send (IPv4: < 65507) */
#define TX_MSGS 32u           /* messages per sendmmsg */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

struct slot_state {
	uint32_t round;       /* the slot's next round (persists across calls) */
	uint32_t use;         /* this call: uses of the slot so far */
	bool busy;            /* a packet is in flight */
	uint64_t sent_ns;     /* last (re)transmission */
	uint32_t rto_us;
	uint8_t next_exp;     /* float: agreed exponent (biased) for the slot's next chunk */
	bool retransmitted;   /* the packet in flight was sent more than once (Karn) */
	bool queued;          /* in tx_slots, to be sent at the end of this iteration */
};

struct innet_agg {
	struct innet_agg_conf conf;
	int fd;
	struct sockaddr_in to;
	struct slot_state *slots;   /* conf.slots */
	uint8_t *pkts;              /* per slot: the packet in flight (for retransmission) */
	uint32_t pkt_len;
	uint8_t *rx_bufs;           /* RX_BATCH receive buffers of pkt_len + 1 bytes */
	struct mmsghdr rx_msgs[RX_BATCH];
	struct iovec rx_iov[RX_BATCH];
	uint32_t *tx_slots;         /* slots queued to send (at most conf.slots) */
	uint32_t n_tx;
	struct iovec *tx_iov;       /* conf.slots */
	struct mmsghdr tx_msgs[TX_MSGS];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} tx_cmsg[TX_MSGS];
	uint32_t tx_segs;           /* datagrams per GSO message (1: GSO off) */
	int broken;                 /* sticky error after -ETIMEDOUT, -ESTALE, -ECONNRESET, -EBUSY
	                             * (until a join) */
	uint32_t nonce;             /* this handle's id in the job's run (random, never 0) */
	bool registered;            /* the switch knows this handle (START or a join) */
	uint8_t gen;                /* the job's generation (run), low 8 bits: in every CONTRIB */
	char err[256];              /* what the last failure was, and what to do */
	uint32_t call_no;           /* this call's number (calls started; innet_agg_join sets it) */
	bool joined;                /* the next call is the first after a join: its packets may
	                             * wait for the others (early), so its RTO backs off less */
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


static int run_start(struct innet_agg *a);
static void run_leave(struct innet_agg *a);

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
	/* the handle's id in the job's run: another handle of the same worker
	 * (a restart) has another one */
	while (a->nonce == 0)
		if (getrandom(&a->nonce, sizeof(a->nonce), 0) != sizeof(a->nonce))
			a->nonce = (uint32_t)innet_now_ns() ^ ((uint32_t)getpid() << 16);
	a->pkt_len = INNET_AGG_HDR_LEN + 4 * conf->k;
	a->slots = calloc(conf->slots, sizeof(*a->slots));
	a->pkts = malloc((size_t)conf->slots * a->pkt_len);
	/* buffers 8-byte aligned (elements are read as uint32_t), a byte
	 * longer than a packet so that a longer datagram shows */
	size_t rx_stride = ((size_t)a->pkt_len + 1 + 7) & ~(size_t)7;
	a->rx_bufs = malloc((size_t)RX_BATCH * rx_stride);
	a->tx_slots = malloc((size_t)conf->slots * sizeof(*a->tx_slots));
	a->tx_iov = malloc((size_t)conf->slots * sizeof(*a->tx_iov));
	if (a->slots == NULL || a->pkts == NULL || a->rx_bufs == NULL || a->tx_slots == NULL ||
	    a->tx_iov == NULL)
		goto err_free;
	for (uint32_t i = 0; i < RX_BATCH; i++)
		a->rx_iov[i] = (struct iovec){ a->rx_bufs + (size_t)i * rx_stride, a->pkt_len + 1 };
	a->tx_segs = TX_GSO_BYTES / a->pkt_len;
	if (a->tx_segs > TX_SEGS_MAX)
		a->tx_segs = TX_SEGS_MAX;
	if (a->tx_segs == 0 || (conf->flags & INNET_AGG_NO_GSO))
		a->tx_segs = 1;
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
	free(a->rx_bufs);
	free(a->tx_slots);
	free(a->tx_iov);
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
	if (a->registered)
		run_leave(a);
	close(a->fd);
	free(a->slots);
	free(a->pkts);
	free(a->rx_bufs);
	free(a->tx_slots);
	free(a->tx_iov);
	free(a);
}

void innet_agg_get_stats(const struct innet_agg *a, struct innet_agg_stats *out)
{
	*out = a->st;
}

const char *innet_agg_error(const struct innet_agg *a)
{
	return a->err;
}

/* Say what failed (and what to do) in a->err; returns rc. */
__attribute__((format(printf, 3, 4))) static int fail(struct innet_agg *a, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(a->err, sizeof(a->err), "job %u worker %u: ", a->conf.job, a->conf.worker);
	if (n > 0 && (size_t)n < sizeof(a->err))
		vsnprintf(a->err + n, sizeof(a->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

/* "0,2,3": the workers in bitmap (for messages). */
static const char *workers_list(uint64_t bitmap, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (uint32_t w = 0; w < 64 && off < len; w++)
		if (bitmap & (1ull << w)) {
			int n = snprintf(buf + off, len - off, "%s%u", off ? "," : "", w);
			if (n < 0)
				break;
			off += (size_t)n;
		}
	return buf;
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
	/* max |x| of finite floats = max of their bits without the sign */
	uint32_t mb = 0;
	for (size_t i = 0; i < cnt; i++) {
		uint32_t u;
		memcpy(&u, &x[i], sizeof(u));
		u &= 0x7fffffffu;
		mb = u > mb ? u : mb;
	}
	float m;
	memcpy(&m, &mb, sizeof(m));
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
				      .offset = htonl(j < 0 ? INNET_AGG_OFFSET_PRIMING : (uint32_t)((size_t)j * k)),
				      .k = htons((uint16_t)k), .call = htonl(a->call_no), .gen = a->gen };
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
		if (ss->next_exp == 0) {
			/* agreed "all zero" (only after an exclusion can we have more) */
			for (size_t i = 0; i < cnt; i++) {
				a->st.clipped += x[i] != 0;
				el[i] = 0;
			}
		} else {
			/* x * 2^(B - E) is exact in double (a power-of-two scale of
			 * a float), so lrint rounds once, half to even: q is
			 * round(x * 2^(B - E)). |v| <= lim + 1/2 rounds into range. */
			int e = (int)ss->next_exp - INNET_AGG_EXP_BIAS;
			const double scale = ldexp(1.0, a->qbits - e);
			const double lim = ldexp(1.0, a->qbits), over = lim + 0.5;
			for (size_t i = 0; i < cnt; i++) {
				double v = (double)x[i] * scale;
				if (INNET_UNLIKELY(v > over || v < -over)) {
					a->st.clipped++;
					v = v > 0 ? lim : -lim;
				}
				el[i] = htonl((uint32_t)(int32_t)lrint(v));
			}
		}
	}
	for (size_t i = cnt; i < k; i++)
		el[i] = 0;
}

/* Queue slot s's packet for the next flush_tx; its RTO runs from now. */
static void send_slot(struct call *c, uint32_t s, uint64_t now)
{
	struct innet_agg *a = c->a;
	struct slot_state *ss = &a->slots[s];
	ss->sent_ns = now;
	if (ss->queued)
		return;
	ss->queued = true;
	a->tx_slots[a->n_tx++] = s;
}

/* Errors that lose the datagrams in hand (the RTO resends them): a full
 * buffer, an ICMP error from an earlier send (the switch is not there). */
static bool tx_transient(int err)
{
	return err == EAGAIN || err == ENOBUFS || err == ECONNREFUSED || err == EINTR ||
	       err == EHOSTUNREACH || err == ENETUNREACH;
}

/* Send the queued packets: messages of tx_segs datagrams (UDP GSO when
 * more than one), TX_MSGS messages per sendmmsg. 0 or -errno. */
static int flush_tx(struct innet_agg *a)
{
	uint32_t i = 0;
	while (i < a->n_tx) {
		uint32_t m = 0;
		for (; m < TX_MSGS && i < a->n_tx; m++) {
			uint32_t segs = a->n_tx - i < a->tx_segs ? a->n_tx - i : a->tx_segs;
			for (uint32_t j = i; j < i + segs; j++) {
				a->tx_iov[j] = (struct iovec){ a->pkts + (size_t)a->tx_slots[j] * a->pkt_len,
							       a->pkt_len };
				a->slots[a->tx_slots[j]].queued = false;
			}
			struct msghdr *mh = &a->tx_msgs[m].msg_hdr;
			*mh = (struct msghdr){ .msg_name = &a->to, .msg_namelen = sizeof(a->to),
					       .msg_iov = &a->tx_iov[i], .msg_iovlen = segs };
			if (segs > 1) {
				mh->msg_control = a->tx_cmsg[m].buf;
				mh->msg_controllen = sizeof(a->tx_cmsg[m].buf);
				struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
				cm->cmsg_level = SOL_UDP;
				cm->cmsg_type = UDP_SEGMENT;
				cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
				uint16_t seg = (uint16_t)a->pkt_len;
				memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
			}
			i += segs;
		}
		uint32_t sent = 0;
		while (sent < m) {
			int r = sendmmsg(a->fd, &a->tx_msgs[sent], m - sent, 0);
			if (r > 0) {
				sent += (uint32_t)r;
				continue;
			}
			int err = errno;
			struct msghdr *mh = &a->tx_msgs[sent].msg_hdr;
			if (mh->msg_iovlen > 1 && (err == EIO || err == EINVAL || err == EOPNOTSUPP || err == EMSGSIZE)) {
				/* no GSO here (EMSGSIZE: a segment larger than the route's
				 * MTU, which GSO cannot fragment — a jumbo k over an XDP
				 * switch's 3500-byte links): these one by one (the kernel
				 * fragments what exceeds the MTU), and none from now on */
				a->tx_segs = 1;
				for (size_t j = 0; j < mh->msg_iovlen; j++) {
					struct msghdr one = { .msg_name = &a->to, .msg_namelen = sizeof(a->to),
							      .msg_iov = &mh->msg_iov[j], .msg_iovlen = 1 };
					if (sendmsg(a->fd, &one, 0) < 0 && !tx_transient(errno))
						return -errno;
				}
			} else if (!tx_transient(err)) {
				a->n_tx = 0;
				return -err;
			}
			sent++; /* lost (the RTO resends it), or sent singly */
		}
	}
	a->n_tx = 0;
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
	send_slot(c, s, now);
	return 0;
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
		} else if (ss->next_exp == 0) {
			memset((float *)c->out + first, 0, cnt * sizeof(float));
		} else {
			/* sum * 2^(E - B) is exact in double: one rounding, to float */
			float *y = (float *)c->out + first;
			const double scale = ldexp(1.0, (int)ss->next_exp - INNET_AGG_EXP_BIAS - a->qbits);
			for (size_t i = 0; i < cnt; i++)
				y[i] = (float)((double)(int32_t)ntohl(el[i]) * scale);
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
	if (!a->registered) {
		/* the handle's first call: it begins the job's run, or takes part
		 * in the one its peers began */
		int rc = run_start(a);
		if (rc != 0) {
			if (rc == -ETIMEDOUT || rc == -ESTALE || rc == -EBUSY)
				a->broken = rc;
			return rc;
		}
	}
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
	uint64_t now = innet_now_ns();
	uint64_t last_progress = now;
	uint32_t done = 0;
	int rc = 0;
	a->n_tx = 0;
	for (uint32_t s = 0; s < c->w; s++) {
		a->slots[s].use = 0;
		a->slots[s].next_exp = 0;
		a->slots[s].queued = false;
		if ((rc = advance(c, s, now, &done)) != 0)
			goto out;
	}
	if ((rc = flush_tx(a)) != 0)
		goto out;
	struct mmsghdr *msgs = a->rx_msgs;
	uint64_t next_check = now + (uint64_t)a->conf.rto_us * 1000u;
	while (done < c->w) {
		now = innet_now_ns();
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
			for (int i = 0; i < RX_BATCH; i++)
				msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &a->rx_iov[i], .msg_iovlen = 1 } };
			int m = recvmmsg(a->fd, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
			if (m <= 0)
				break;
			now = innet_now_ns();
			for (int i = 0; i < m; i++) {
				uint32_t len = msgs[i].msg_len;
				const struct innet_hdr *h = (const struct innet_hdr *)a->rx_iov[i].iov_base;
				const struct innet_agg_hdr *ah = (const struct innet_agg_hdr *)(h + 1);
				if (len < INNET_AGG_HDR_LEN || h->magic != INNET_MAGIC ||
				    h->version != INNET_VERSION || h->service != INNET_SVC_AGG ||
				    ah->op != INNET_AGG_RESULT || ntohs(ah->job) != a->conf.job) {
					a->st.results_ignored++;
					continue;
				}
				if (ah->gen != a->gen) {
					/* another run's packet: a result of an earlier one is
					 * ignored; RESTARTED says ours is over */
					if (ah->status == INNET_AGG_RESTARTED) {
						rc = fail(a, -ECONNRESET, "a new run of the job began on the switch "
							  "(generation %u): this worker's run is over", ah->gen);
						goto out;
					}
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
				uint32_t ahead = (ntohl(ah->round) - a->slots[s].round) & INNET_AGG_ROUND_MASK;
				if (ah->status == INNET_AGG_STALE && ah->ver == (a->slots[s].round & 1) &&
				    ahead != 0 && ahead <= INNET_AGG_ROUND_MASK / 2) {
					rc = fail(a, -ESTALE, "call %u: this worker fell more than a round behind the "
						  "others on slot %u (the straggler timer closed it out): it must "
						  "rejoin (innet_agg_join; innet allreduce --rejoin)", a->call_no, s);
					goto out;
				}
				if (ah->status > INNET_AGG_STALE) {
					a->st.results_ignored++;
					continue;
				}
				/* rounds compare as the switch does: modulo 2^14 (a
				 * joined worker knows its rounds modulo 2^14 only) */
				if (ah->status == INNET_AGG_STALE || ahead != 0) {
					/* after a join our first packets wait for the others
					 * (dropped as early); the others' result for the
					 * slot's round before ours (we are in the job's group)
					 * says ours just opened: send it again now, as they
					 * send theirs, rather than on the RTO — the run does
					 * not wait for a joined worker until a round goes out
					 * with it, so it must be there in time */
					if (a->joined && ah->status != INNET_AGG_STALE &&
					    ahead == INNET_AGG_ROUND_MASK && !a->slots[s].queued) {
						a->st.retransmits++;
						a->slots[s].retransmitted = true;
						send_slot(c, s, now);
					}
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
			if ((rc = flush_tx(a)) != 0)
				goto out;
			if (m < RX_BATCH)
				break;
		}
		now = innet_now_ns();
		if (now >= next_check) {
			next_check = UINT64_MAX;
			for (uint32_t s = 0; s < c->w; s++) {
				struct slot_state *ss = &a->slots[s];
				if (!ss->busy)
					continue;
				uint64_t due = ss->sent_ns + (uint64_t)ss->rto_us * 1000u;
				if (due <= now) {
					/* after a join the first packets wait for the others to
					 * reach our call: back off to 4 x rto_us at most, so a
					 * round that opens is claimed well before its timer */
					uint32_t cap = a->conf.rto_max_us;
					if (a->joined && cap > 4 * a->conf.rto_us)
						cap = 4 * a->conf.rto_us;
					ss->rto_us = ss->rto_us * 2 > cap ? cap : ss->rto_us * 2;
					a->st.retransmits++;
					ss->retransmitted = true;
					send_slot(c, s, now);
					due = now + (uint64_t)ss->rto_us * 1000u;
				}
				if (due < next_check)
					next_check = due;
			}
			if ((rc = flush_tx(a)) != 0)
				goto out;
		}
		if (done < c->w && now - last_progress > (uint64_t)a->conf.timeout_ms * 1000000u) {
			rc = fail(a, -ETIMEDOUT, "call %u made no progress for %u ms: a worker of the job or the "
				  "switch is gone (without a straggler timer the others wait for every worker)",
				  a->call_no, a->conf.timeout_ms);
			goto out;
		}
		/* check at least every timeout's worth */
		uint64_t tmo = last_progress + (uint64_t)a->conf.timeout_ms * 1000000u + 1000000u;
		if (tmo < next_check)
			next_check = tmo;
	}
	a->st.calls++;
	a->joined = false;
out:
	a->n_tx = 0;
	for (uint32_t s = 0; s < c->w; s++) {
		a->slots[s].busy = false;
		a->slots[s].queued = false;
	}
	if (rc == -ETIMEDOUT || rc == -ESTALE || rc == -ECONNRESET)
		a->broken = rc;
	a->call_no++;
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

/* ---- rejoin ---------------------------------------------------------------- */

#define JOIN_BATCH 100u   /* slot records per JOIN: 1240-byte datagrams fit a 1500-byte MTU */
#define JOIN_ASK_MAX_NS 50000000ull   /* asks of a waiting START: at least every 50 ms */

/* Send a JOIN for slots [first, first + cnt) (buffer q), with this handle's
 * nonce: START or REJOIN. 0 or -errno. */
static int join_send(struct innet_agg *a, uint8_t *q, uint32_t first, uint32_t cnt, uint8_t how)
{
	struct innet_hdr *h = (struct innet_hdr *)q;
	struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
	*ah = (struct innet_agg_hdr){ .op = INNET_AGG_JOIN, .status = how, .job = htons(a->conf.job),
				      .slot = htons((uint16_t)first), .worker = a->conf.worker,
				      .offset = htonl(a->nonce), .k = htons((uint16_t)cnt) };
	memset(ah + 1, 0, 12u * cnt);
	if (sendto(a->fd, q, INNET_AGG_HDR_LEN + 12u * cnt, 0, (struct sockaddr *)&a->to, sizeof(a->to)) < 0 &&
	    !tx_transient(errno))
		return -errno;
	return 0;
}

/* What a JOINED answer says (besides its records). */
struct joined {
	uint32_t first;      /* its first slot */
	uint32_t cnt;        /* records */
	uint8_t status;      /* INNET_AGG_JOINED_OK or _WAIT */
	uint32_t gen;        /* the job's generation */
	uint64_t in;         /* the members the job's rounds wait for */
	bool busy;           /* a record was BUSY (a slot moved while read) */
};

/* The JOINED in rx (len bytes) for this handle, its records into recs (host
 * order); false if it is something else (the others' results pass by: we are
 * in the job's group). */
static bool joined_parse(const struct innet_agg *a, const uint8_t *rx, ssize_t len,
			 struct innet_agg_join_rec *recs, struct joined *j)
{
	const struct innet_hdr *h = (const struct innet_hdr *)rx;
	const struct innet_agg_hdr *ah = (const struct innet_agg_hdr *)(h + 1);
	uint32_t S = a->conf.slots;
	if (len < (ssize_t)INNET_AGG_HDR_LEN || h->magic != INNET_MAGIC || h->version != INNET_VERSION ||
	    h->service != INNET_SVC_AGG || ah->op != INNET_AGG_JOINED || ntohs(ah->job) != a->conf.job ||
	    ah->worker != a->conf.worker)
		return false;
	j->first = ntohs(ah->slot);
	j->cnt = ntohs(ah->k);
	if (j->first % JOIN_BATCH != 0 || j->first >= S ||
	    j->cnt != (S - j->first < JOIN_BATCH ? S - j->first : JOIN_BATCH) ||
	    (size_t)len < INNET_AGG_HDR_LEN + 12u * j->cnt || ah->status > INNET_AGG_JOINED_WAIT)
		return false;
	j->status = ah->status;
	j->gen = ntohl(ah->round) & INNET_AGG_GEN_MASK;
	j->in = be64toh(ah->bitmap);
	j->busy = false;
	for (uint32_t i = 0; i < j->cnt; i++) {
		struct innet_agg_join_rec r;
		memcpy(&r, rx + INNET_AGG_HDR_LEN + 12u * i, sizeof(r));
		recs[j->first + i] = (struct innet_agg_join_rec){ ntohl(r.state), ntohl(r.offset), ntohl(r.call) };
		j->busy |= (recs[j->first + i].state & INNET_AGG_JOIN_BUSY) != 0;
	}
	return true;
}

/* REJOIN: register with the job's run where it is, and ask for every slot's
 * newest finished round: recs[0..slots). */
static int join_query(struct innet_agg *a, struct innet_agg_join_rec *recs)
{
	uint32_t S = a->conf.slots, n_batches = (S + JOIN_BATCH - 1) / JOIN_BATCH;
	size_t qlen = INNET_AGG_HDR_LEN + 12u * JOIN_BATCH;
	uint8_t *q = malloc(qlen), *rx = malloc(INNET_PKT_MAX + 1), *got = calloc(n_batches, 1);
	int rc = 0;
	if (q == NULL || rx == NULL || got == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t start = innet_now_ns(), rto_ns = (uint64_t)a->conf.rto_us * 1000u, next_send = 0;
	uint32_t left = n_batches, gen = 0;
	bool have_gen = false;
	while (left > 0) {
		uint64_t now = innet_now_ns();
		if (now - start > (uint64_t)a->conf.timeout_ms * 1000000u) {
			rc = fail(a, -ETIMEDOUT, "join: no answer from the switch within %u ms", a->conf.timeout_ms);
			goto out;
		}
		if (now >= next_send) {
			for (uint32_t b = 0; b < n_batches; b++) {
				uint32_t first = b * JOIN_BATCH;
				if (!got[b] && (rc = join_send(a, q, first, S - first < JOIN_BATCH ? S - first : JOIN_BATCH,
							      INNET_AGG_JOIN_REJOIN)) != 0)
					goto out;
			}
			next_send = now + rto_ns;
			rto_ns = rto_ns * 2 > (uint64_t)a->conf.rto_max_us * 1000u ? (uint64_t)a->conf.rto_max_us * 1000u
										     : rto_ns * 2;
		}
		int wait_ms = (int)((next_send - now + 999999) / 1000000);
		struct pollfd pfd = { .fd = a->fd, .events = POLLIN };
		if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		for (;;) {
			ssize_t len = recv(a->fd, rx, INNET_PKT_MAX + 1, MSG_DONTWAIT);
			if (len < 0)
				break;
			struct joined j;
			if (!joined_parse(a, rx, len, recs, &j) || got[j.first / JOIN_BATCH])
				continue;
			if (j.busy || j.status != INNET_AGG_JOINED_OK)
				continue; /* a slot moved while read, or the job is being reset: again */
			if (have_gen && j.gen != gen) {
				/* a new run began between two batches: all of them again */
				memset(got, 0, n_batches);
				left = n_batches;
			}
			gen = j.gen;
			have_gen = true;
			got[j.first / JOIN_BATCH] = 1;
			left--;
		}
	}
	a->gen = (uint8_t)gen;
	a->registered = true;
out:
	free(q);
	free(rx);
	free(got);
	return rc;
}

/* START, the handle's first call: register with the job's run — the one its
 * peers began, or a new one once every member of the previous run is gone
 * (docs/aggregation.md, "Runs"). The switch answers WAIT while the previous
 * run still has members in it; asked again (every RTO, doubling, at most
 * 50 ms) until the handle is registered, or timeout_ms. 0 (the run is at its
 * first call), -ESTALE (it has moved on: a late worker joins), -EBUSY (the
 * previous run is still there), -ETIMEDOUT (no answer), with a->err. */
static int run_start(struct innet_agg *a)
{
	uint32_t S = a->conf.slots, cnt = S < JOIN_BATCH ? S : JOIN_BATCH;
	uint8_t *q = malloc(INNET_AGG_HDR_LEN + 12u * JOIN_BATCH), *rx = malloc(INNET_PKT_MAX + 1);
	struct innet_agg_join_rec *recs = calloc(S, sizeof(*recs));
	char who[200];
	int rc = 0;
	if (q == NULL || rx == NULL || recs == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	uint64_t start = innet_now_ns(), rto_ns = (uint64_t)a->conf.rto_us * 1000u, next_send = 0;
	bool waited = false, have_sig = false, moving = false;
	uint32_t changes = 0;
	uint64_t waited_in = 0, sig = 0;
	uint32_t sig_gen = 0;
	for (;;) {
		uint64_t now = innet_now_ns();
		if (now - start > (uint64_t)a->conf.timeout_ms * 1000000u || moving) {
			if (!waited)
				rc = fail(a, -ETIMEDOUT, "no answer from the switch %u.%u.%u.%u:%u within %u ms (is it "
					  "running the agg program, with this job, and this worker's address as its "
					  "member?)", a->conf.switch_ip >> 24, (a->conf.switch_ip >> 16) & 255,
					  (a->conf.switch_ip >> 8) & 255, a->conf.switch_ip & 255, a->conf.switch_udp,
					  a->conf.timeout_ms);
			else if (moving)
				rc = fail(a, -EBUSY, "another run of the job is in progress on the switch (workers %s "
					  "are in it, and its rounds are moving): a restarted worker joins it "
					  "(innet_agg_join; innet allreduce --join), or stop that run first",
					  workers_list(waited_in, who, sizeof(who)));
			else
				rc = fail(a, -EBUSY, "the job's previous run still has workers %s in it, and they did "
					  "not start this run within %u ms: start every worker of the job (each "
					  "one's first call begins the new run); if that run is still going, stop "
					  "it or join it (innet_agg_join)",
					  workers_list(waited_in, who, sizeof(who)), a->conf.timeout_ms);
			goto out;
		}
		if (now >= next_send) {
			if ((rc = join_send(a, q, 0, cnt, INNET_AGG_JOIN_START)) != 0)
				goto out;
			next_send = now + rto_ns;
			rto_ns *= 2;
			if (rto_ns > JOIN_ASK_MAX_NS)
				rto_ns = JOIN_ASK_MAX_NS;
		}
		int wait_ms = (int)((next_send - now + 999999) / 1000000);
		struct pollfd pfd = { .fd = a->fd, .events = POLLIN };
		if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR) {
			rc = -errno;
			goto out;
		}
		for (;;) {
			ssize_t len = recv(a->fd, rx, INNET_PKT_MAX + 1, MSG_DONTWAIT);
			if (len < 0)
				break;
			struct joined j;
			if (!joined_parse(a, rx, len, recs, &j) || j.first != 0)
				continue;
			/* what the records say: their newest finished call, and a
			 * signature that changes as rounds finish */
			uint64_t h = 1469598103934665603ull;
			bool done_past_0 = false;
			uint32_t newest = 0;
			for (uint32_t i = 0; i < j.cnt; i++) {
				const struct innet_agg_join_rec *r = &recs[i];
				h = (h ^ r->state ^ ((uint64_t)r->call << 32)) * 1099511628211ull;
				if ((r->state & INNET_AGG_JOIN_DONE) && r->call != 0) {
					done_past_0 = true;
					newest = r->call > newest ? r->call : newest;
				}
			}
			if (j.status == INNET_AGG_JOINED_WAIT) {
				/* the previous run has members in it (or the job is being
				 * reset: none); rounds that keep finishing mean it is alive */
				waited = true;
				if (j.in != 0) {
					/* twice: a dead run's last rounds may still be closed
					 * once by their timers */
					changes += have_sig && sig_gen == j.gen && h != sig;
					moving = changes >= 2;
					waited_in = j.in;
					sig = h;
					sig_gen = j.gen;
					have_sig = true;
				}
				continue;
			}
			if (j.busy)
				continue;
			a->gen = (uint8_t)j.gen;
			a->registered = true;
			if (done_past_0)
				rc = fail(a, -ESTALE, "this worker started after the job's run had moved on (call %u "
					  "done): a late or restarted worker joins the run (innet_agg_join; innet "
					  "allreduce --join or --rejoin)", newest);
			goto out;
		}
	}
out:
	free(q);
	free(rx);
	free(recs);
	return rc;
}

/* LEAVE (closing): the job's run stops waiting for this worker. One
 * datagram, not answered: if it is lost, the straggler timer (or the next
 * run's START) does the same. */
static void run_leave(struct innet_agg *a)
{
	uint8_t q[INNET_AGG_HDR_LEN];
	struct innet_hdr *h = (struct innet_hdr *)q;
	struct innet_agg_hdr *ah = (struct innet_agg_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_AGG };
	*ah = (struct innet_agg_hdr){ .op = INNET_AGG_LEAVE, .job = htons(a->conf.job), .worker = a->conf.worker,
				      .offset = htonl(a->nonce), .gen = a->gen };
	(void)sendto(a->fd, q, sizeof(q), 0, (struct sockaddr *)&a->to, sizeof(a->to));
	a->registered = false;
}

int innet_agg_join(struct innet_agg *a, size_t n, int f32, uint32_t *next_call)
{
	if (a->async_busy)
		return -EBUSY;
	uint32_t k = a->conf.k, S = a->conf.slots;
	if (n == 0 || (uint64_t)n > (uint64_t)UINT32_MAX)
		return -EINVAL;
	struct innet_agg_join_rec *recs = calloc(S, sizeof(*recs));
	if (recs == NULL)
		return -ENOMEM;
	int rc = join_query(a, recs);
	if (rc != 0)
		goto out;
	uint32_t chunks = (uint32_t)((n + k - 1) / k), w = chunks < S ? chunks : S, pr = f32 ? 1 : 0;
	/* the newest call any finished round belongs to */
	bool any = false;
	uint32_t newest = 0;
	for (uint32_t s = 0; s < S; s++) {
		if (!(recs[s].state & INNET_AGG_JOIN_DONE))
			continue;
		if (!any || (int32_t)(recs[s].call - newest) > 0)
			newest = recs[s].call;
		any = true;
	}
	uint32_t next = any ? newest + 1 : 0;
	for (uint32_t s = 0; s < S; s++) {
		uint32_t uses = s < w ? (chunks - s + w - 1) / w + pr : 0, round;
		const struct innet_agg_join_rec *r = &recs[s];
		uint32_t tag = r->state & INNET_AGG_ROUND_MASK;
		if (!(r->state & INNET_AGG_JOIN_DONE)) {
			/* no round of the slot finished: only possible in the first call */
			if (any && newest != 0 && uses > 0) {
				rc = -EPROTO;
				goto out;
			}
			round = next * uses;
		} else if (uses == 0) {
			round = tag + 1; /* a slot calls of n elements do not use */
		} else {
			/* which use of its call the finished round was */
			uint32_t u;
			if (r->offset == INNET_AGG_OFFSET_PRIMING) {
				if (!f32) {
					rc = -EPROTO;
					goto out;
				}
				u = 0;
			} else {
				uint32_t j = r->offset / k;
				if (r->offset % k != 0 || j < s || j >= chunks || (j - s) % w != 0) {
					rc = -EPROTO; /* the job's calls are not of n elements */
					goto out;
				}
				u = pr + (j - s) / w;
			}
			/* the slot's first round of call `next` */
			round = tag - u + (next - r->call) * uses;
		}
		a->slots[s].round = round & INNET_AGG_ROUND_MASK;
		a->slots[s].next_exp = 0;
	}
	a->call_no = next;
	a->broken = 0;
	a->joined = true;
	a->st.joins++;
	if (next_call != NULL)
		*next_call = next;
out:
	free(recs);
	return rc;
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
