/*
 * agg/agg.h — what the aggregation program's two sources share: its state
 * ids, drop reasons, table values and config block. agg_dp.c (the data path:
 * handler, straggler timer) reads them; agg.c (settings, setup, init) fills
 * them in. The state and the protocol are described in agg_dp.c.
 */
#ifndef INNET_AGG_AGG_H
#define INNET_AGG_AGG_H

#include "innet/dp.h"
#include "agg/wire.h"

/* Registers (one element per shadow copy unless said otherwise; agg_dp.c). */
enum { R_STATE, R_COUNT, R_EXP, R_OFF, R_VAL, R_VAL2, R_ADDER, R_CALL, R_RUN, R_INC, R_DEAF };
/* Tables. */
enum { T_JOBS, T_MEMBERS };

/* R_ADDER bits. */
#define ADDER_EXCL    0x1u
#define ADDER_B_USED  0x2u

/* R_STATE: bitmap of claimed workers, CLOSED, EMITTED, round tag. */
#define ST_BITMAP    ((1ull << INNET_AGG_MAX_WORKERS) - 1)
#define ST_CLOSED    (1ull << 48)
#define ST_EMITTED   (1ull << 49)
#define ST_TAG_SHIFT 50
#define ST_TAG_MASK  0x3fffu

/* R_RUN (one per job, at the job's group index): the job's run.
 *   bits  0..47  OUT: members the rounds do not wait for (excluded by the
 *                timer, rejoining, left, or gone with the previous run)
 *   bits 48..62  generation (INNET_AGG_GEN_MASK)
 *   bit  63      RESETTING: a new generation's reset of the job's slots runs */
#define RUN_OUT        ((1ull << INNET_AGG_MAX_WORKERS) - 1)
#define RUN_GEN_SHIFT  48
#define RUN_RESETTING  (1ull << 63)

/* R_DEAF (one per job, at the job's group index): members out of the run
 * that the results no longer go to.
 *   bits  0..47  the members: put out by the straggler timer (after the
 *                timed-out round's result, which still goes to everyone:
 *                that is how a straggler learns it was left out) or by their
 *                LEAVE; a member leaves the set when it is heard from again
 *                (a JOIN, or a round that goes out with its contribution)
 *   bits 48..62  the generation the set belongs to (another: empty)
 * While exactly one member is deaf, results go to the job's group without
 * it (agg_conf.but_base + group * but_stride + worker): no copy to a worker that is not waiting
 * for one (and, if it has ended, no port-unreachable ICMP for each). */

/* R_INC (one per job and worker: group * INNET_AGG_MAX_WORKERS + worker): the
 * worker's registered handle.
 *   bits  0..31  its nonce (0: none registered)
 *   bits 32..46  the generation it registered in
 *   bit  47      PENDING: it STARTed a new run, waiting for the previous
 *                run's members to be gone */
#define INC_GEN_SHIFT  32
#define INC_PENDING    (1ull << 47)

enum agg_drop {
	AGG_TOO_SHORT = INNET_DROP_PROGRAM,
	AGG_BAD_MAGIC,
	AGG_BAD_VERSION,
	AGG_WRONG_SERVICE,
	AGG_IS_RESULT,
	AGG_BAD_OP,
	AGG_BAD_LENGTH,
	AGG_UNKNOWN_JOB,
	AGG_BAD_WORKER,
	AGG_BAD_SLOT,
	AGG_BAD_VER,
	AGG_SPOOFED,
	AGG_DUPLICATE,
	AGG_PENDING,
	AGG_EARLY,
	AGG_CONTENDED,
	AGG_RESETTING,      /* the job's slots are being reset for a new run */
	AGG_NOT_REGISTERED, /* a LEAVE from a handle the job's run does not have */
};

/* A job, as stored in the jobs table (memory order, host byte order). */
struct agg_job {
	uint32_t slot_base;    /* first global slot of the job's range */
	uint32_t slots;        /* slots in the range */
	uint32_t timeout_us;   /* straggler timeout; 0 = wait forever */
	uint16_t group;        /* multicast group of the job's workers; also the job's index
	                        * in the per-job registers (R_RUN, R_INC): < max_jobs */
	uint8_t n_workers;     /* workers 0..n-1 */
	uint8_t reserved;
};
_Static_assert(sizeof(struct agg_job) == 16, "jobs table value");

/* A worker's address, as stored in the members table (key: member_key). */
struct agg_member {
	uint32_t ip;           /* host order */
	uint16_t udp;
	uint16_t port;         /* switch port it is reached by */
};
_Static_assert(sizeof(struct agg_member) == 8, "members table value");

static inline uint32_t agg_member_key(uint16_t job, uint8_t worker)
{
	return ((uint32_t)job << 8) | worker;
}

/* The config block (what the data path reads; the jobs from the settings
 * stay on the control side until init installs them in the tables). */
struct agg_conf {
	uint32_t k;            /* elements per packet */
	uint32_t slots;        /* pool size: timers 0 .. 2 * slots - 1 are the copies',
	                        * 2 * slots + group the job reset of that job */
	uint16_t but_base;     /* group but_base + group * but_stride + w: job `group`'s */
	uint16_t but_stride;   /* workers but w (R_DEAF); stride 0: no such groups */
};

/* The group of job `group`'s workers but w (agg_conf.but_base, but_stride). */
static inline uint16_t agg_but_group(uint32_t base, uint32_t stride, uint32_t group, uint32_t w)
{
	return (uint16_t)(base + group * stride + w);
}

INNET_DATAPATH_DECL(agg);

#endif /* INNET_AGG_AGG_H */
