/*
 * agg/wire.h — the aggregation service's packet (service INNET_SVC_AGG = 3):
 * streaming all-reduce of int32 vectors in the switch (SwitchML / DAIET),
 * with Trio-ML's timer-driven partial results for stragglers.
 * docs/protocol.md section 2.3 and docs/aggregation.md have the full spec.
 *
 * UDP payload:
 *   struct innet_hdr (8, service 3) | struct innet_agg_hdr (32) | int32 elems[k]
 *
 *   0               1               2               3
 *   +---------------+---------------+-------------------------------+
 *   |      op       |    status     |              job              |
 *   +---------------+---------------+---------------+---------------+
 *   |             slot              |      ver      |    worker     |
 *   +-------------------------------+---------------+---------------+
 *   |                             round                             |
 *   +---------------------------------------------------------------+
 *   |                            offset                             |
 *   +---------------+---------------+-------------------------------+
 *   |      exp      |      gen      |               k               |
 *   +---------------+---------------+-------------------------------+
 *   |                             call                              |
 *   +---------------------------------------------------------------+
 *   |                        bitmap (64 bits)                       |
 *   +---------------------------------------------------------------+
 *   |                  k x int32 elements ...                       |
 *
 * All fields big-endian, elements two's-complement int32 big-endian.
 *
 * JOIN (a worker that restarted or fell behind asks where the job's slots
 * are): header with k = number of slot records asked for, starting at
 * `slot`, then 12 x k zero bytes; the switch answers JOINED in place (same
 * length, never larger) with k = records filled and that many
 * struct innet_agg_join_rec, the rest zero. With a nonce (`offset`, the
 * worker handle's random 32-bit id) a JOIN also registers the handle with
 * the job's run: status START (a handle's first call: it begins a run, or
 * takes part in the one its peers began) or REJOIN (it joins the run where
 * it is). LEAVE (a handle closes): header only, its nonce in `offset`.
 *
 * Runs and generations (docs/aggregation.md, "Runs"): the switch keeps per
 * job a generation (15 bits) that the START of a new run advances (the job's
 * slots are then reset), and the set of members the rounds wait for. Every
 * packet carries the generation's low 8 bits in `gen`; a CONTRIB of another
 * generation is answered RESTARTED.
 */
#ifndef INNET_AGG_WIRE_H
#define INNET_AGG_WIRE_H

#include <stdint.h>

#include "innet/dp.h"
#include "innet/wire.h"

/* The default UDP port of the aggregation program. */
#define INNET_AGG_UDP         47800u

/* Limits. */
#define INNET_AGG_MAX_WORKERS 48u     /* bits of the contributor bitmap the switch keeps */
#define INNET_AGG_K_MAX       2294u   /* (INNET_PKT_MAX - 40) / 4: a 9216-byte datagram */
#define INNET_AGG_K_MTU9000   2232u   /* largest k whose datagram (+ IP, UDP) fits a 9000-byte MTU */
#define INNET_AGG_K_MTU1500   358u    /* the same for a 1500-byte MTU */
#define INNET_AGG_EXP_BIAS    127     /* exp on the wire = E + 127; 0 = "no exponent" */

enum innet_agg_op {
	INNET_AGG_CONTRIB = 1,   /* worker -> switch: my k elements for (slot, round) */
	INNET_AGG_RESULT = 2,    /* switch -> worker(s): the aggregate, or a status */
	INNET_AGG_JOIN = 3,      /* worker -> switch: where are slots [slot, slot + k)? */
	INNET_AGG_JOINED = 4,    /* switch -> worker: k join records (unicast) */
	INNET_AGG_LEAVE = 5,     /* worker -> switch: this handle is done (closing) */
};

enum innet_agg_status {
	INNET_AGG_COMPLETE = 0,  /* every worker of the job contributed */
	INNET_AGG_PARTIAL = 1,   /* not every worker is in the sum (the straggler timer closed
	                          * the round, or it closed on the members in the run):
	                          * bitmap says who is */
	INNET_AGG_STALE = 2,     /* the slot copy was already reused: no elements follow;
	                          * round carries the round the copy now holds */
	INNET_AGG_RESTARTED = 3, /* the contribution's generation is not the job's: a new run
	                          * began (no elements; gen = the job's generation now) */
};

/* JOIN's status (a request) and JOINED's (the answer). */
enum innet_agg_join_status {
	INNET_AGG_JOIN_REJOIN = 0,  /* JOIN: join the job's run where it is (or, without a
	                             * nonce, only read the records); JOINED: done */
	INNET_AGG_JOIN_START = 1,   /* JOIN: this handle's first call; JOINED: WAIT (the
	                             * previous run has members in it (bitmap), or the job is
	                             * being reset: ask again) */
};
#define INNET_AGG_JOINED_OK   0u
#define INNET_AGG_JOINED_WAIT 1u

struct innet_agg_hdr {
	uint8_t op;          /* enum innet_agg_op */
	uint8_t status;      /* RESULT: enum innet_agg_status; JOIN, JOINED: enum
	                      * innet_agg_join_status; 0 in CONTRIB and LEAVE */
	uint16_t job;        /* job id (switch's jobs table) */
	uint16_t slot;       /* slot, relative to the job's slot range */
	uint8_t ver;         /* shadow copy: must equal round & 1 */
	uint8_t worker;      /* worker id 0..n-1 (0xff in multicast results) */
	uint32_t round;      /* how many times this slot was used before by the job;
	                      * JOINED: the job's generation (15 bits) */
	uint32_t offset;     /* element offset of elems[0] in the worker's array (echoed);
	                      * JOIN, LEAVE: the handle's nonce (0 = a JOIN that only reads) */
	uint8_t exp;         /* CONTRIB: biased exponent proposal; RESULT: max of contributors' */
	uint8_t gen;         /* the job's generation (run) mod 256: CONTRIB as the worker
	                      * learned it (START/JOINED), every answer the job's now */
	uint16_t k;          /* number of elements that follow */
	uint32_t call;       /* CONTRIB: the worker's call number (the same on every worker for
	                      * the same call); RESULT: the round's (echoed); JOIN: zero */
	uint64_t bitmap;     /* RESULT: bit i set = worker i's elements are in the sum;
	                      * JOINED: the members the job's rounds wait for */
} __attribute__((packed));

_Static_assert(sizeof(struct innet_agg_hdr) == 32, "agg header is 32 bytes on the wire");
_Static_assert(sizeof(struct innet_hdr) + sizeof(struct innet_agg_hdr) + 4 * INNET_AGG_K_MAX <= INNET_PKT_MAX,
	       "a packet of K_MAX elements fits INNET_PKT_MAX");

#define INNET_AGG_HDR_LEN ((uint32_t)(sizeof(struct innet_hdr) + sizeof(struct innet_agg_hdr)))

/* The switch keeps a slot's round as a 14-bit tag: rounds are compared
 * modulo 2^14 (a worker more than 2^13 rounds behind is not told apart). */
#define INNET_AGG_ROUND_MASK  0x3fffu

/* A job's generation (run) is 15 bits in the switch (JOINED's round);
 * packets carry its low 8 bits. */
#define INNET_AGG_GEN_MASK    0x7fffu

/* A priming packet (float calls: no elements, only an exponent proposal)
 * carries this offset. */
#define INNET_AGG_OFFSET_PRIMING 0xffffffffu

/* One slot in a JOINED answer: the latest round of the slot that finished
 * (its result went out), with the offset and call its contributors sent. */
struct innet_agg_join_rec {
	uint32_t state;      /* bit 31 DONE: the slot has a finished round (else the record
	                      * is all zero: no round of the slot finished yet); bit 30 BUSY:
	                      * the slot moved while being read, ask again; bits 0..13 the
	                      * finished round's tag (round mod 2^14) */
	uint32_t offset;     /* that round's offset field */
	uint32_t call;       /* that round's call field */
} __attribute__((packed));

_Static_assert(sizeof(struct innet_agg_join_rec) == 12, "join record is 12 bytes");

#define INNET_AGG_JOIN_DONE  0x80000000u
#define INNET_AGG_JOIN_BUSY  0x40000000u
#define INNET_AGG_JOIN_MAX   ((INNET_PKT_MAX - INNET_AGG_HDR_LEN) / 12u) /* records per packet */

_Static_assert(INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MTU9000 + 28 <= 9000, "k for MTU 9000");
_Static_assert(INNET_AGG_HDR_LEN + 4 * INNET_AGG_K_MTU1500 + 28 <= 1500, "k for MTU 1500");

#endif /* INNET_AGG_WIRE_H */
