/*
 * consensus/wire.h — the Paxos service's packet format (service 2), shared by
 * the switch programs (coordinator.c, acceptor.c) and the host library
 * (paxos.c). docs/protocol.md §2.2 is the field-by-field spec.
 *
 * Every Paxos packet is the innet base header (include/innet/wire.h, service
 * INNET_SVC_PAXOS) then this 48-byte header, then vlen bytes of value:
 *
 *   0               1               2               3
 *   +---------------+---------------+---------------+---------------+
 *   |     type      |    status     |            node (id)          |
 *   +---------------+---------------+-------------------------------+
 *   |                            ballot                             |
 *   +---------------------------------------------------------------+
 *   |                            vballot                            |
 *   +-------------------------------+-------------------------------+
 *   |             vlen              |           reserved            |
 *   +-------------------------------+-------------------------------+
 *   |                      instance (64 bits)                       |
 *   |                                                               |
 *   +---------------------------------------------------------------+
 *   |                 req_id (64 bits: client << 32 | seq)          |
 *   |                                                               |
 *   +---------------------------------------------------------------+
 *   |            trim (64 bits: the acceptor's / a learner's        |
 *   |                  delivered watermark)                         |
 *   +---------------------------------------------------------------+
 *   |            hi (64 bits: 1 + highest instance voted)           |
 *   |                                                               |
 *   +---------------------------------------------------------------+
 *   |  value (vlen bytes, at most PAXOS_VALUE_MAX) ...
 *
 * Reads without a log entry (docs/consensus.md): READ(req_id) from a learner
 * to every acceptor; each reflects READ_ACK with its read bound in
 * `instance` (max of hi and its join instance). The highest bound of a
 * majority is above every instance chosen before the READ was sent.
 *
 * Base header flags (innet_hdr.flags) for service 2: PAXOS_F_RANGE on a 1A
 * makes the promise cover every instance, not only `instance` (a new leader's
 * phase 1).
 *
 * Ballots are 32 bits: round << 8 | proposer id, so two proposers never use
 * the same ballot. 0 means "none".
 */
#ifndef INNET_CONSENSUS_WIRE_H
#define INNET_CONSENSUS_WIRE_H

#include <stdint.h>

#include "innet/dp.h"
#include "innet/wire.h"

#define PAXOS_UDP_DEFAULT  34952u   /* switches' Paxos programs */
/* Bytes of value one packet carries: whatever an innet packet has left after
 * the 56 bytes of headers (INNET_PKT_MAX - 56: 1992 with 2048-byte packets).
 * Above a link's MTU the kernel fragments the datagram (loopback's MTU is
 * 64 KiB; on 1500-byte veths a full value travels as two IP fragments). */
#define PAXOS_VALUE_MAX    (INNET_PKT_MAX - 56u)
#define PAXOS_MAX_ACCEPTORS 64u     /* learners track votes in a 64-bit mask */

enum paxos_type {
	PAXOS_REQUEST = 1,  /* client -> coordinator: a value to order */
	PAXOS_1A = 2,       /* leader -> acceptor: prepare(ballot, instance) */
	PAXOS_1B = 3,       /* acceptor -> leader: promise + voted ballot/value */
	PAXOS_2A = 4,       /* coordinator/leader -> acceptors: accept(ballot, instance, value) */
	PAXOS_2B = 5,       /* acceptor -> learners: accepted(ballot, instance, value) */
	PAXOS_NACK = 6,     /* acceptor -> sender: refused; status says why */
	PAXOS_TRIM = 7,     /* learner -> acceptor: my delivered watermark; reply: TRIM with acceptor's trim */
	PAXOS_RECOVER = 8,  /* learner -> acceptor: what did you vote at instance? reply: 2B (or NACK) */
	PAXOS_READ = 9,     /* learner -> acceptor: a read round (req_id = its id); reply: READ_ACK */
	PAXOS_READ_ACK = 10, /* acceptor -> learner: instance = its read bound max(hi, join_inst) */
	PAXOS_TYPE_MAX = 10,
};

enum paxos_status {
	PAXOS_OK = 0,
	PAXOS_ST_BALLOT = 1,     /* NACK: ballot lower than promised; `ballot` = the acceptor's */
	PAXOS_ST_RING_FULL = 2,  /* NACK: instance >= trim + ring size; retry after trim */
	PAXOS_ST_TRIMMED = 3,    /* NACK: instance < trim; the log no longer has it */
	PAXOS_ST_TOO_BIG = 4,    /* NACK from the coordinator: vlen > PAXOS_VALUE_MAX */
	PAXOS_ST_EMPTY = 5,      /* 2B answering RECOVER / 1B: nothing voted at this instance */
	PAXOS_ST_JOINING = 6,    /* NACK: a restarted acceptor that does not know this instance
	                          * (still joining, or instance < its join instance);
	                          * READ_ACK: still joining (no bound: not counted) */
};

#define PAXOS_F_RANGE 0x01u  /* 1A: promise for all instances */
/* 2B: a majority of acceptors voted (instance, ballot), seen by the learner's
 * own XDP filter (learnfilter.bpf.c), which dropped the other 2Bs. Set only
 * by that filter, which clears it on every other 2B it passes; a learner
 * trusts it only when it attached the filter (innet_paxos_trust_filter). */
#define PAXOS_F_QUORUM 0x02u

struct paxos_hdr {
	uint8_t type;       /* enum paxos_type */
	uint8_t status;     /* enum paxos_status */
	uint16_t node;      /* acceptor id (1B, 2B, NACK, TRIM reply) or learner id (TRIM) */
	uint32_t ballot;    /* 1A/2A: proposer's; 1B: promised; 2B: accepted; NACK: acceptor's */
	uint32_t vballot;   /* 1B / 2B answering RECOVER: ballot the value was voted in (0 none) */
	uint16_t vlen;      /* value bytes after the header */
	uint16_t reserved;  /* zero */
	uint64_t instance;  /* log position (READ_ACK: the read bound) */
	uint64_t req_id;    /* client << 32 | seq; 0 = no-op */
	uint64_t trim;      /* TRIM request: learner watermark; replies: acceptor's trim */
	uint64_t hi;        /* replies: 1 + highest instance the acceptor voted in */
} __attribute__((packed));

_Static_assert(sizeof(struct paxos_hdr) == 48, "paxos header is 48 bytes on the wire");

struct paxos_msg {
	struct innet_hdr h;
	struct paxos_hdr p;
	uint8_t value[PAXOS_VALUE_MAX];
} __attribute__((packed));

#define PAXOS_HDR_LEN ((uint32_t)(sizeof(struct innet_hdr) + sizeof(struct paxos_hdr)))
_Static_assert(sizeof(struct innet_hdr) + sizeof(struct paxos_hdr) == 56, "56 bytes of headers");
_Static_assert(PAXOS_HDR_LEN + PAXOS_VALUE_MAX == INNET_PKT_MAX, "one value fits one innet packet");
_Static_assert(PAXOS_VALUE_MAX <= 0xFFFFu, "vlen is 16 bits");

#endif /* INNET_CONSENSUS_WIRE_H */
