/*
 * targets/xdp/xdp_abi.h — the layouts that the XDP target's eBPF programs and the
 * user-space side (loader, engine, control plane) share: state shapes, the
 * hand-off records of the ring, per-CPU counters, port descriptions. Both
 * compilers see this one header, so the bytes agree by construction; any
 * change here is a change of both sides (they are built together).
 *
 * Plain C: included by targets/xdp/dp_xdp.h (clang -target bpf) and by the
 * user-space files of src/targets/xdp/ and src/engine/timer.c. The tables'
 * layout is src/engine/table_algo.h's (with their algorithm).
 */
#ifndef INNET_XDP_ABI_H
#define INNET_XDP_ABI_H

#include <stdint.h>

#define INNET_XDP_MAX_PROGS    16u       /* program instances per switch */
#define INNET_XDP_RING_BYTES   (1u << 22) /* hand-off ring (power of two) */
#define INNET_XDP_HANDOFF_MAX  3584u     /* payload bytes a ring record carries */
#define INNET_XDP_HDR_LEN      42u       /* Ethernet + IPv4 (no options) + UDP */
#define INNET_XDP_META_MAGIC   0x1e5eu   /* recirculation metadata marker */
/* innet_tmeta, one page per program instance, shared by every executor:
 *
 *   0     struct innet_table_shared [INNET_MAX_TABLES]  the tables' counters
 *                                                       (src/engine/table_algo.h)
 *   2048  uint32_t serial lock                          a SERIAL program's:
 *         0 free, 1 held — by the eBPF handler on one CPU, or by the
 *         user-space engine's worker (docs/xdp.md, "SERIAL programs")
 */
#define INNET_XDP_SERIAL_LOCK_OFF 2048u
#define INNET_XDP_SERIAL_TRIES 256u      /* eBPF: tries for the lock, then pass up */

/* A one-shot timer slot (src/engine/timer.c's struct innet_timer). */
struct innet_timer_slot {
	uint64_t deadline_ns;  /* 0 = not armed */
	uint64_t arg;
};

/* A switch port as the eBPF program sees it. MACs are the port device's and
 * its link peer's (static neighbours: docs/xdp.md). */
struct innet_xdp_port {
	uint32_t ifindex;
	uint32_t ip;           /* host order; 0 for a raw port */
	uint32_t peer_ip;      /* host order; 0 = none */
	uint16_t peer_udp;     /* 0 = the packet's UDP port */
	uint8_t raw;           /* a raw port (frames to/from the raw program) */
	uint8_t has_peer_mac;
	uint8_t mac[6];
	uint8_t peer_mac[6];
	uint32_t mtu;
};

/* What a multicast group's verdict does on XDP. */
enum innet_xdp_gmode {
	INNET_XDP_GROUP_EMPTY = 0,     /* no members: bad_group */
	INNET_XDP_GROUP_DEVMAP = 1,    /* devmap broadcast, one copy per member port */
	INNET_XDP_GROUP_SLOW = 2,      /* two members on one port: the user-space engine */
};

struct innet_xdp_gmeta {
	uint32_t n;            /* members */
	uint32_t mode;         /* enum innet_xdp_gmode */
};

struct innet_xdp_member {
	uint32_t ip;           /* host order; 0 = the port's peer */
	uint16_t udp;          /* 0 = the port's peer_udp or the packet's UDP port */
	uint16_t pad;
};

/* Why a packet left the fast path (counted per program and kind). */
enum innet_xdp_handoff {
	INNET_XDP_HANDOFF_TO_CPU = 0,  /* INNET_TO_CPU: on_cpu in user space */
	INNET_XDP_HANDOFF_EMIT,        /* innet_emit: sent by user space */
	INNET_XDP_HANDOFF_TIMER,       /* innet_timer_arm: the timer thread fires it */
	INNET_XDP_HANDOFF_MULTICAST,   /* a group XDP cannot broadcast */
	INNET_XDP_HANDOFF_NEIGH,       /* forward to an address with no known MAC */
	INNET_XDP_HANDOFF_OVERSIZE,    /* a reply beyond one buffer or frame (innet_pass_up): passed up */
	INNET_XDP_HANDOFF_USERSPACE,   /* a user-space-only program's packet: passed up */
	INNET_XDP_HANDOFF_SERIAL,      /* a SERIAL program's lock was held: passed up */
	INNET_XDP_HANDOFF_RESUME,      /* innet_hand_off: the engine carries on from the handler's state */
	INNET_XDP_HANDOFF_COUNT
};

/* Per program instance, per CPU; summed with the user-space engine's counters
 * by innet_cp_stats. Mirrors struct innet_prog_stats. */
struct innet_xdp_stats {
	uint64_t rx_pkts;
	uint64_t rx_bytes;
	uint64_t actions[8];           /* INNET_ACTION_COUNT */
	uint64_t drops[64];            /* INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS */
	uint64_t passes;
	uint64_t recirculations;
	uint64_t emitted;
	uint64_t tx_pkts;
	uint64_t reg_ops;
	uint64_t table_ops;
	uint64_t alu_ops;
	uint64_t max_reg_ops;
	uint64_t max_table_ops;
	uint64_t max_alu_ops;
	uint64_t max_recirc;
	uint64_t max_emitted;
	uint64_t handoffs[INNET_XDP_HANDOFF_COUNT];
	uint64_t ring_full;            /* hand-offs lost: the ring was full */
};

/* Frames the XDP program passes to the kernel stack unhandled, by reason
 * (per port, per CPU): not for any program of the switch. */
enum innet_xdp_pass {
	INNET_XDP_PASS_NOT_IPV4 = 0,   /* ARP, IPv6, VLAN ... */
	INNET_XDP_PASS_NOT_LOCAL,      /* IPv4 not addressed to the port */
	INNET_XDP_PASS_NOT_UDP,
	INNET_XDP_PASS_NO_PROGRAM,     /* UDP port no program binds */
	INNET_XDP_PASS_IP_OPTIONS,     /* IHL > 5: the user-space engine takes it */
	INNET_XDP_PASS_FRAGMENT,       /* IP fragment: reassembled by the kernel */
	INNET_XDP_PASS_BAD_LENGTH,     /* IP/UDP lengths disagree with the frame */
	INNET_XDP_PASS_USERSPACE,      /* for a user-space-only program: its sockets take it */
	INNET_XDP_PASS_COUNT
};

/* Frames the XDP programs drop outside any handler's verdict, by reason
 * (per port, per CPU; innet_xdp_drop_name): what a verdict drops is counted
 * under the program's drop reasons instead, as on the user-space engine. */
enum innet_xdp_drop {
	INNET_XDP_DROP_NO_RAW_PROGRAM = 0, /* a frame on a raw port, and no raw program */
	INNET_XDP_DROP_ADJUST,         /* the kernel refused to move the frame's head, tail or
	                                * metadata (bpf_xdp_adjust_*) */
	INNET_XDP_DROP_NO_CONF,        /* the program's config block could not be read */
	INNET_XDP_DROP_EGRESS_META,    /* a multicast copy without its group's metadata */
	INNET_XDP_DROP_EGRESS_SHORT,   /* a multicast copy too short for its headers */
	INNET_XDP_DROP_COUNT
};

struct innet_xdp_port_stats {
	uint64_t rx_pkts;              /* frames the XDP program took */
	uint64_t rx_bytes;
	uint64_t tx_pkts;              /* frames it sent (TX, redirect, broadcast copies) */
	uint64_t tx_bytes;
	uint64_t pass[INNET_XDP_PASS_COUNT];
	uint64_t drop[INNET_XDP_DROP_COUNT];
};

/* The last packet's verdict on this CPU (tests read it after
 * BPF_PROG_TEST_RUN: a redirect's target is not visible otherwise). */
struct innet_xdp_trace {
	uint32_t seq;                  /* bumped per packet */
	uint16_t action;               /* enum innet_action carried out */
	uint16_t reason;               /* drop reason */
	uint16_t port;                 /* egress port (forward, reflect) */
	uint16_t group;                /* multicast */
	uint16_t handoff;              /* enum innet_xdp_handoff + 1, 0 = none */
	uint16_t prog;                 /* the program instance that decided */
	uint32_t xdp_action;           /* XDP_* returned */
};

/* Hand-off records on innet_ring (eBPF → user space). */
enum innet_xdp_rec_kind {
	INNET_XDP_REC_TO_CPU = 1,      /* a packet for on_cpu */
	INNET_XDP_REC_EMIT,            /* send data to out / group */
	INNET_XDP_REC_SEND,            /* carry out a verdict XDP could not (multicast,
	                                * unresolved neighbour): data to out / group */
	INNET_XDP_REC_TIMER,           /* a timer was armed */
	INNET_XDP_REC_RESUME,          /* a packet and its handler's state (struct innet_xdp_resume) */
};

struct innet_xdp_rec {
	uint16_t kind;                 /* enum innet_xdp_rec_kind */
	uint16_t prog;                 /* program instance index */
	uint16_t in_port;
	uint16_t dst_udp;
	uint32_t src_ip;
	uint16_t src_udp;
	uint8_t is_group;
	uint8_t flags;                 /* INNET_PKT_F_* of the packet */
	uint32_t timer;
	uint32_t len;                  /* bytes of data */
	uint16_t meta16;               /* TO_CPU: the packet's pkt->meta16 and meta32, */
	uint16_t pad16;                /* which the handler may have set for on_cpu */
	uint32_t meta32[4];
	uint64_t deadline_ns;          /* TIMER */
	uint64_t arg;                  /* TIMER */
	struct {
		uint16_t port;
		uint16_t group;
		uint32_t ip;
		uint16_t udp;
		uint16_t src_udp;
		uint16_t reason;
		uint16_t pad;
	} out;
	uint8_t data[INNET_XDP_HANDOFF_MAX];
};

/* innet_hand_off's record: the packet as it is and the state the handler
 * left, for the user-space engine to run the handler on from (the handler
 * finds the state at the start of its scratch memory, INNET_PKT_F_RESUMED
 * set). The same first fields as struct innet_xdp_rec. */
#define INNET_XDP_STATE_MAX    8192u     /* bytes of handler state a hand-off carries */
struct innet_xdp_resume {
	uint16_t kind;                 /* INNET_XDP_REC_RESUME */
	uint16_t prog;
	uint16_t in_port;
	uint16_t dst_udp;
	uint32_t src_ip;
	uint16_t src_udp;
	uint8_t recirc;                /* recirculations so far */
	uint8_t flags;                 /* INNET_PKT_F_* of the packet */
	uint32_t len;                  /* packet bytes in data */
	uint32_t state_len;            /* bytes in state */
	uint16_t meta16;
	uint16_t pad16;
	uint32_t meta32[4];
	uint8_t state[INNET_XDP_STATE_MAX];
	uint8_t data[INNET_XDP_HANDOFF_MAX];
};

/* Recirculation metadata (in front of the frame, bpf_xdp_adjust_meta). */
struct innet_xdp_meta {
	uint16_t magic;                /* INNET_XDP_META_MAGIC */
	uint8_t recirc;
	uint8_t flags;
	uint16_t in_port;
	uint16_t dst_udp;
	uint32_t src_ip;
	uint16_t src_udp;
	uint16_t meta16;
	uint32_t meta32[4];
	uint32_t len;                  /* payload bytes */
	uint32_t headroom;
	uint8_t src_mac[6];
	uint16_t group;                /* multicast: the group (egress program) */
};

/* The object's state layout (the read-only global innet_layout). */
struct innet_xdp_reg_layout {
	uint32_t width;                /* bytes per element */
	uint32_t stride;               /* bytes between elements */
	uint32_t count;
	uint32_t shift;                /* log2(width) for widths 1..8 */
};

struct innet_xdp_table_layout {
	uint32_t key_size;
	uint32_t value_size;
	uint32_t slot_size;
	uint32_t n_slots;              /* power of two */
	uint32_t capacity;
};

struct innet_xdp_layout {
	uint32_t self;                 /* this program instance's index */
	uint32_t model;                /* enum innet_model */
	uint32_t reg_ops_budget;
	uint32_t n_drop_reasons;
	uint32_t n_regs;
	uint32_t n_tables;
	uint32_t n_groups;
	uint32_t n_timers;
	uint32_t n_ports;
	uint32_t n_udp;                /* UDP ports the program binds (0: raw only) */
	uint16_t first_udp;            /* its first UDP port (the default source) */
	uint16_t raw;                  /* the switch's raw program */
	uint32_t test_mode;            /* write innet_trace for every packet */
	uint32_t serial;               /* INNET_PROG_SERIAL: the handler runs under the lock */
	struct innet_xdp_reg_layout regs[32];
	struct innet_xdp_table_layout tables[8];
};

#endif /* INNET_XDP_ABI_H */
