/*
 * innet/agg.h — the aggregation service's host library: all-reduce (sum) of
 * int32 and float32 arrays through the switch's "agg" program
 * (src/agg/agg_dp.c and agg.c; protocol in docs/aggregation.md).
 *
 * One struct innet_agg is one worker of one job: a UDP socket bound to the
 * address the switch knows the worker by (the job's member list), and the
 * per-slot round counters the worker shares with the switch and the other
 * workers. Every worker of a job must make the same sequence of calls with
 * the same lengths (as with MPI_Allreduce).
 *
 * THREAD SAFETY: a handle is used by one thread at a time (one call in
 * flight, blocking or asynchronous). Several threads use several handles
 * (several jobs, or one job each with its own worker ids).
 *
 * Runs (docs/aggregation.md, "Runs"). A handle's first call registers it
 * with the job's run on the switch (START): it begins a new run of the job —
 * once every member of the previous run is gone: closed, or started again —
 * or takes part in the run its peers began. So a job runs program after
 * program on one switch, whether the previous one ended cleanly or was
 * killed. innet_agg_close tells the switch the handle is done (LEAVE): the
 * run's rounds stop waiting for it.
 *
 * Errors: 0 or -errno. -ETIMEDOUT: no answer from the switch, or no progress
 * for conf.timeout_ms (a worker died, the switch is gone, straggler
 * mitigation is off); -ESTALE: this worker fell more than a round behind the
 * others (its slot's copy was reused after a straggler timeout), or started
 * after its run had moved on; -ECONNRESET: a new run of the job began (this
 * handle's run is over); -EBUSY (first call): the job's previous run still
 * has members in it that did not start again, or another run is in
 * progress. After any of them the handle is out of step with the job and
 * every later call fails the same way, until innet_agg_join puts it back in
 * step. innet_agg_error says what happened and what to do.
 */
#ifndef INNET_AGG_H
#define INNET_AGG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct innet_agg_conf {
	uint32_t switch_ip;     /* switch port address to send to (host order) */
	uint16_t switch_udp;    /* the agg program's UDP port; 0 = INNET_AGG_UDP (47800) */
	uint32_t local_ip;      /* address to bind (host order): as in the job's member list */
	uint16_t local_udp;     /* UDP port to bind: as in the job's member list */
	uint16_t job;           /* job id */
	uint8_t worker;         /* this worker's id, 0..n_workers-1 */
	uint8_t n_workers;      /* workers in the job (<= 48) */
	uint32_t slots;         /* the job's slots on the switch = the sending window */
	uint32_t k;             /* elements per packet: the switch's "k" */
	uint32_t rto_us;        /* first retransmission timeout; 0 = 2000 */
	uint32_t rto_max_us;    /* backoff cap; 0 = 200000 */
	uint32_t timeout_ms;    /* fail a call after this long without progress; 0 = 5000 */
	uint32_t flags;         /* INNET_AGG_* below; 0 = defaults */
};

/* conf.flags */
#define INNET_AGG_NO_GSO 0x1u   /* one datagram per send (no UDP GSO batching) */

struct innet_agg_stats {
	uint64_t calls;             /* all-reduce calls completed */
	uint64_t packets_sent;      /* contributions sent, first transmissions */
	uint64_t retransmits;       /* contributions sent again after a timeout */
	uint64_t results;           /* results accepted */
	uint64_t results_ignored;   /* duplicate or unexpected results */
	uint64_t partial;           /* results accepted without every worker (straggler timer) */
	uint64_t excluded;          /* of those, results without this worker's elements */
	uint64_t clipped;           /* float elements saturated (larger than the negotiated
	                             * exponent allowed: only after an exclusion) */
	uint64_t joins;             /* successful innet_agg_join calls */
};

struct innet_agg;

/* Open a worker: bind the socket. NULL with errno on failure. */
struct innet_agg *innet_agg_open(const struct innet_agg_conf *conf);
/* Close (NULL allowed). Must not be called while an asynchronous call runs. */
void innet_agg_close(struct innet_agg *a);

/* Sum in[0..n) over all workers into out (in == out allowed). Blocking.
 * int32: exact, wrapping modulo 2^32 as two's complement. */
int innet_agg_allreduce_i32(struct innet_agg *a, const int32_t *in, int32_t *out, size_t n);
/* float32: block floating point (docs/aggregation.md). Per element,
 * |out - exact sum| <= innet_agg_f32_error_bound(n_workers, m) where m is the
 * largest |value| any worker had in that element's block of k elements.
 * Non-finite inputs: -EDOM, nothing sent. */
int innet_agg_allreduce_f32(struct innet_agg *a, const float *in, float *out, size_t n);

/* The float error bound for a block whose largest |input| over all workers
 * is max_abs (see docs/aggregation.md), excluding the final rounding to
 * float of the result (add 2^-24 |out|). */
double innet_agg_f32_error_bound(uint32_t n_workers, double max_abs);

/* Asynchronous variants: start the call on a helper thread and return; the
 * buffers must stay valid until innet_agg_wait returns its result. One call
 * in flight per handle (-EBUSY otherwise). */
int innet_agg_start_i32(struct innet_agg *a, const int32_t *in, int32_t *out, size_t n);
int innet_agg_start_f32(struct innet_agg *a, const float *in, float *out, size_t n);
/* Wait for the call started last; returns its result (-EINVAL: none). */
int innet_agg_wait(struct innet_agg *a);

/* Rejoin the job: a worker that restarted (a new handle on the same member
 * address) or whose calls failed with -ESTALE asks the switch where the
 * job's slots are (JOIN) and adopts the rounds at which the others' NEXT
 * call starts; that call's number (counting the job's calls from 0) goes to
 * *next_call — the caller resumes its sequence of calls there, skipping the
 * ones the others made meanwhile. The others must be making calls of n
 * elements of the same type (f32: 1 for float32, 0 for int32) at the time;
 * other calls: -EPROTO. Needs the job's straggler timer (timeout_us) so that
 * the others get through their current call without this worker. The first
 * call after a join waits (its packets are dropped as early) until the
 * others reach it. 0, -ETIMEDOUT (no answer within timeout_ms), -EPROTO,
 * -EINVAL (n = 0), -EBUSY (an asynchronous call runs), -ENOMEM. */
int innet_agg_join(struct innet_agg *a, size_t n, int f32, uint32_t *next_call);

void innet_agg_get_stats(const struct innet_agg *a, struct innet_agg_stats *out);

/* What the handle's last failure was and what to do about it, one line
 * ("" if none): for the messages of programs built on the library. */
const char *innet_agg_error(const struct innet_agg *a);

#ifdef __cplusplus
}
#endif
#endif /* INNET_AGG_H */
