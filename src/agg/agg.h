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
enum { R_STATE, R_COUNT, R_EXP, R_OFF, R_VAL, R_VAL2, R_ADDER, R_CALL };
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
};

/* A job, as stored in the jobs table (memory order, host byte order). */
struct agg_job {
	uint32_t slot_base;    /* first global slot of the job's range */
	uint32_t slots;        /* slots in the range */
	uint32_t timeout_us;   /* straggler timeout; 0 = wait forever */
	uint16_t group;        /* multicast group of the job's workers */
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
};

INNET_DATAPATH_DECL(agg);

#endif /* INNET_AGG_AGG_H */
