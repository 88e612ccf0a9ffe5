/*
 * innet/wire.h — the innet base header, carried first in the UDP payload of
 * every innet service packet (docs/protocol.md has the field-by-field spec).
 *
 *   0               1               2               3
 *   +---------------+---------------+---------------+---------------+
 *   |  magic 0x1E   |  version 1    |   service     |    flags      |
 *   +---------------+---------------+---------------+---------------+
 *   |          dst_node             |          src_node             |
 *   +-------------------------------+-------------------------------+
 *
 * All multi-byte fields are big-endian (network order). A service's own
 * header follows immediately (its own wire.h under src/<service>/).
 */
#ifndef INNET_WIRE_H
#define INNET_WIRE_H

#include <stdint.h>

#define INNET_MAGIC    0x1Eu
#define INNET_VERSION  1u

enum innet_service {
	INNET_SVC_RAW = 0,       /* no service header: routed by dst_node only */
	INNET_SVC_COUNTER = 1,   /* the example counter program */
	INNET_SVC_PAXOS = 2,
	INNET_SVC_AGG = 3,
	INNET_SVC_DNN = 4,
	INNET_SVC_LB = 5,
};

struct innet_hdr {
	uint8_t magic;      /* INNET_MAGIC */
	uint8_t version;    /* INNET_VERSION; others are dropped (bad_version) */
	uint8_t service;    /* enum innet_service */
	uint8_t flags;      /* service-defined */
	uint16_t dst_node;  /* fabric node id to route to; 0 = none */
	uint16_t src_node;  /* fabric node id of the sender; 0 = unknown */
} __attribute__((packed));

_Static_assert(sizeof(struct innet_hdr) == 8, "innet_hdr is 8 bytes on the wire");

/* The counter service (src/programs/counter.c): a register array in the
 * switch that clients increment and read. */
enum innet_counter_op {
	INNET_COUNTER_INC = 1,    /* value += delta; reply carries the new value */
	INNET_COUNTER_READ = 2,   /* reply carries the value */
	INNET_COUNTER_REPLY = 0x80, /* or'ed into op in replies */
};

enum innet_counter_status {
	INNET_COUNTER_OK = 0,
	INNET_COUNTER_BAD_INDEX = 1,
	INNET_COUNTER_BAD_OP = 2,
};

struct innet_counter_hdr {
	uint8_t op;         /* enum innet_counter_op */
	uint8_t status;     /* enum innet_counter_status (replies) */
	uint16_t reserved;  /* zero */
	uint32_t index;     /* counter index */
	uint64_t value;     /* INC: delta; reply: the counter's value */
} __attribute__((packed));

_Static_assert(sizeof(struct innet_counter_hdr) == 16, "counter header is 16 bytes");

#endif /* INNET_WIRE_H */
