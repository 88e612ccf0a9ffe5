/*
 * consensus/acceptor.h — what the Paxos acceptor's two sources share: the
 * data path (acceptor_dp.c: the handler) and the control source (acceptor.c:
 * settings, declarations, init). acceptor.c's header comment describes the
 * program.
 */
#ifndef INNET_CONSENSUS_ACCEPTOR_H
#define INNET_CONSENSUS_ACCEPTOR_H

#include "innet/dp.h"

/* Registers. Per slot (count = ring): inst, rnd, vrnd, vlen, req, value.
 * Global (count 1): promised, trim, hi, joining, join_inst, join_ballot.
 * Per learner (count = trim_learners): lwm. */
enum {
	ACC_R_INST,         /* 8 B: instance + 1 held in the slot (0 = never used) */
	ACC_R_RND,          /* 4 B: highest ballot promised for the slot's instance */
	ACC_R_VRND,         /* 4 B: ballot of the vote (0 = not voted) */
	ACC_R_VLEN,         /* 2 B: bytes of the voted value */
	ACC_R_REQ,          /* 8 B: request id of the voted value */
	ACC_R_VALUE,        /* blob of PAXOS_VALUE_MAX bytes: the voted value */
	ACC_R_PROMISED,     /* 4 B: range promise (every instance) */
	ACC_R_TRIM,         /* 8 B: every instance below it was delivered everywhere */
	ACC_R_HI,           /* 8 B: 1 + highest instance a 2A named */
	ACC_R_LWM,          /* 8 B: each learner's reported watermark */
	ACC_R_JOINING,      /* 1 B: restarted, silent until the join completes */
	ACC_R_JOIN_INST,    /* 8 B: NACK/joining below it */
	ACC_R_JOIN_BALLOT,  /* 4 B: ballots below it are refused as if promised */
};

enum acc_drop {
	AC_TOO_SHORT = INNET_DROP_PROGRAM,
	AC_BAD_MAGIC,
	AC_BAD_VERSION,
	AC_WRONG_SERVICE,
	AC_BAD_LENGTH,
	AC_UNEXPECTED_TYPE,
	AC_SPOOFED,
	AC_BAD_LEARNER,
	AC_BAD_BALLOT,
};

#define ACC_MAX_LEARNERS 64u   /* learner ids that may report watermarks */

/* The config block: what the handler reads of the settings. */
struct acc_conf {
	uint32_t ring;            /* slots (1..65536) */
	uint32_t trim_learners;   /* learner ids 0..trim_learners-1 report (1..64) */
	uint16_t id;              /* this acceptor's id (0..63), in every reply */
	bool check_peer;          /* drop packets not from the ingress port's peer */
};

INNET_DATAPATH_DECL(paxos_acceptor);

#endif /* INNET_CONSENSUS_ACCEPTOR_H */
