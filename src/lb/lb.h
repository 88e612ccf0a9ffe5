/*
 * lb/lb.h — what the load balancer's two sources share: the data path
 * (lb_dp.c: the handler and the sweep timer) and the control side (lb.c:
 * setup and the program; config.c: settings; ctl.c: init, on_cpu with the
 * report verification, commands, the sweep). Register, table and drop-reason
 * ids, the connection table's key and value, the config block (struct
 * lb_conf) and the pure helpers both sides call. Contract-clean: innet/dp.h,
 * innet/lb.h and nothing else (docs/programs.md, "The contract").
 *
 * Unit slots: every processing unit lives in a fixed slot
 *
 *     slot = server_slot * LB_UNITS_PER_SERVER + unit_id      (unit_id < 8)
 *
 * so a server's units are 8 consecutive slots and the DIP table can index a
 * server's state with one byte per bit position. Per-slot registers hold
 * everything the data plane reads about a unit (address, weight, flags,
 * reported state); the control thread writes them, the handler reads them.
 */
#ifndef INNET_LB_LB_H
#define INNET_LB_LB_H

#include "innet/dp.h"
#include "innet/lb.h"

#define LB_UNITS_PER_SERVER  INNET_LB_MAX_UNITS_PER_SERVER
#define LB_MAX_UNIT_SLOTS    (INNET_LB_MAX_SERVERS * LB_UNITS_PER_SERVER)
#define LB_NONE              0xffffu   /* "no backend" in Maglev/list entries */
#define LB_DIP_NONE          0xffu     /* DIP: no usable unit in the server */
#define LB_DIP_SPLIT         0xfeu     /* DIP: split by remaining capacity (CPU busy) */
#define LB_WRR_MAX           4096u     /* smooth WRR cycle length */
#define LB_DIP_STATES        65536u    /* busy bits << 8 | available bits */
#define LB_PROBES            16u       /* bounded probing past an unusable entry */

_Static_assert((LB_MAX_UNIT_SLOTS & (LB_MAX_UNIT_SLOTS - 1)) == 0, "unit slots: a power of two");
_Static_assert((INNET_LB_MAX_VIPS & (INNET_LB_MAX_VIPS - 1)) == 0, "VIPs: a power of two");
_Static_assert((INNET_LB_MAX_SERVERS & (INNET_LB_MAX_SERVERS - 1)) == 0, "servers: a power of two");

/* The IP protocols lb balances, and the TCP flags it reads. */
#define LB_PROTO_TCP 6u
#define LB_PROTO_UDP 17u
#define LB_TCP_FIN   0x01u
#define LB_TCP_SYN   0x02u
#define LB_TCP_RST   0x04u
#define LB_TCP_ACK   0x10u

/* Per-unit flags in R_UNIT_META bits 0..7 (control plane writes). */
#define LB_UF_CONFIGURED  0x01u  /* slot in use */
#define LB_UF_DRAINED     0x02u  /* no new connections; existing ones stay */
#define LB_UF_REMOVED     0x04u  /* deleted: as drained, slot freed when idle */

/* R_UNIT_META layout (u64): flags | kind << 8 | weight << 16 | pool << 32. */
static inline uint64_t lb_meta(uint8_t flags, uint8_t kind, uint16_t weight, uint8_t pool)
{
	return (uint64_t)flags | (uint64_t)kind << 8 | (uint64_t)weight << 16 | (uint64_t)pool << 32;
}
#define LB_META_FLAGS(m)   ((uint8_t)(m))
#define LB_META_KIND(m)    ((uint8_t)((m) >> 8))
#define LB_META_WEIGHT(m)  ((uint16_t)((m) >> 16))
#define LB_META_POOL(m)    ((uint8_t)((m) >> 32))

/* R_UNIT_STATE (u32): LB_US_UNKNOWN until the unit's agent first reports
 * (set when the unit is configured), then state bits | load << 8 |
 * LB_US_REPORTED. */
#define LB_US_UNKNOWN     0u
#define LB_US_REPORTED    0x10000u

/* What a unit whose agent has never reported gets (setting "unreported"). */
enum lb_unreported {
	LB_UNREP_SERVE = 0, /* new connections, as HAProxy and Katran do (default) */
	LB_UNREP_GRACE,     /* new connections for down_after_ms after it was configured */
	LB_UNREP_DOWN,      /* none until its agent reports it available */
};

/* A unit's health as the handler acts on it and `prog lb show` prints it. */
enum lb_health {
	LB_HEALTH_UNKNOWN = 0, /* never reported: serving unless "unreported" says otherwise */
	LB_HEALTH_UP,          /* reported available, within down_after_ms */
	LB_HEALTH_DOWN,        /* reported unavailable, silent too long, or unreported and held down */
};

/* R_UNIT_ADDR (u64): ip << 32 | udp << 16 | switch port. */
static inline uint64_t lb_addr(uint32_t ip, uint16_t udp, uint16_t port)
{
	return (uint64_t)ip << 32 | (uint64_t)udp << 16 | port;
}

enum lb_policy {
	LB_POL_NONE = 0,   /* everything to the pool's first unit (baseline) */
	LB_POL_ECMP,       /* hash mod active units */
	LB_POL_MAGLEV,     /* weighted consistent hash over units */
	LB_POL_WRR,        /* smooth weighted round robin */
	LB_POL_P2C,        /* least loaded of two random choices */
	LB_POL_ACCEL,      /* P4Mite: Maglev over servers, DIP table within */
	LB_POL_COUNT
};

enum lb_mode {
	LB_MODE_PROXY = 0, /* UDP sockets, full NAT (unprivileged) */
	LB_MODE_PACKET,    /* raw Ethernet frames, DNAT/SNAT (root, netns) */
};

/* Registers. */
enum lb_reg {
	R_UNIT_ADDR, R_UNIT_MAC, R_UNIT_META, R_UNIT_STATE, R_UNIT_LAT, R_UNIT_SEQ,
	R_UNIT_SEEN, R_UNIT_CONNS, R_UNIT_NEW, R_UNIT_PKTS,
	R_SRV_BY_ID,      /* u8 [65536]: server id -> slot + 1 (0 = unknown) */
	R_POOL_VER,       /* u32 [pools]: which half of the double buffers is live */
	R_MAGLEV,         /* u16 [pools][2 kinds][2 bufs][M] */
	R_LIST,           /* u16 [pools][2 bufs][LB_MAX_UNIT_SLOTS]: eligible units */
	R_LIST_N,         /* u32 [pools][2 bufs] */
	R_WRR,            /* u16 [pools][2 bufs][LB_WRR_MAX] */
	R_WRR_N,          /* u32 [pools][2 bufs] */
	R_WRR_CTR,        /* u64 [pools] */
	R_DIP,            /* u8 [servers][LB_DIP_STATES] */
	R_NATMAP,         /* u64 [unit slots][nat words]: NAT ports in use */
	R_BLOOM,          /* u8 [bloom size]: counting Bloom filter of live flows */
	R_STATS,          /* u64 [LB_ST_COUNT] */
	R_SWEEP,          /* u64 [2]: timer armed, last sweep (ns) */
	R_PORT_MAC,       /* u64 [INNET_MAX_PORTS]: raw ports' MACs (packet mode's source MAC) */
	LB_N_REGS
};
enum { LB_MG_UNITS = 0, LB_MG_SERVERS = 1 };

enum lb_table { T_CONN, T_REV, T_UADDR, LB_N_TABLES };

/* Counters in R_STATS (names in lb_stat_names, lb.c). */
enum lb_stat {
	LB_ST_REPORTS_OK,        /* reports accepted */
	LB_ST_CONN_NEW,          /* connections created */
	LB_ST_CONN_EXPIRED,      /* idle entries removed when their flow came back */
	LB_ST_CONN_SWEPT,        /* idle entries removed by the sweep */
	LB_ST_CONN_TABLE_FULL,   /* new flows that found the table full */
	LB_ST_STATELESS,         /* of those, served without an entry (packet mode) */
	LB_ST_BLOOM_NEW,         /* new flows the Bloom filter recognised at once */
	LB_ST_BLOOM_COLLISIONS,  /* filter said "maybe", the table had no entry */
	LB_ST_TCP_CLOSING,       /* entries shortened by FIN/RST */
	LB_ST_FALLBACK,          /* picks that probed past an unusable unit */
	LB_ST_SWEEPS,            /* sweep runs */
	LB_ST_CSUM_COMPLETED,    /* packet mode: partial TCP/UDP checksums finished in software */
	LB_ST_COUNT
};

/* Program drop reasons (INNET_DROP_PROGRAM + i; names in lb_drop_names,
 * lb.c). The handler drops what its cheap checks refuse; the control thread
 * counts the rest of a report's rejections under the same names
 * (innet_cp_count_drop: ctl.c, lb_on_cpu). */
enum lb_drop {
	LB_DR_REPORT_LENGTH = INNET_DROP_PROGRAM, /* report: bad_length (handler) */
	LB_DR_REPORT_MAGIC,      /* report: bad magic/version (handler) */
	LB_DR_REPORT_SERVICE,    /* report: not INNET_SVC_LB (handler) */
	LB_DR_REPORT_TYPE,       /* report: unknown type; a sweep datagram with a bad nonce (handler) */
	LB_DR_REPORT_FIELD,      /* report: field out of range (control thread) */
	LB_DR_REPORT_MAC,        /* report: MAC does not verify, spoofed (control thread) */
	LB_DR_REPORT_NO_KEY,     /* report: no key_file configured (handler) */
	LB_DR_REPORT_UNKNOWN,    /* report: unknown server or unit (control thread) */
	LB_DR_REPORT_KIND,       /* report: kind differs from the configured unit (control thread) */
	LB_DR_REPORT_REPLAY,     /* report: seq not above the last accepted (control thread) */
	LB_DR_NO_BACKEND,        /* no usable unit for a new connection */
	LB_DR_NAT_EXHAUSTED,     /* proxy: no free NAT port toward the unit */
	LB_DR_CONN_FULL,         /* proxy: connection table full (needs state to NAT) */
	LB_DR_UNKNOWN_SOURCE,    /* datagram on a NAT port not from a unit */
	LB_DR_NO_CONNECTION,     /* reply for a connection that is gone */
	LB_DR_NOT_VIP,           /* frame/datagram for no configured VIP */
	LB_DR_BAD_FRAME,         /* frame: truncated Ethernet/IPv4/L4 header */
	LB_DR_NOT_IPV4,          /* frame: not IPv4 (ARP, IPv6: the kernel's business) */
	LB_DR_BAD_IP,            /* frame: bad IPv4 version/IHL/length/checksum */
	LB_DR_FRAGMENT,          /* frame: IPv4 fragment (not balanced) */
	LB_DR_BAD_L4,            /* frame: bad UDP/TCP length or offset */
	LB_DR_WRONG_MODE,        /* frame in proxy mode or datagram on a VIP in packet mode */
	LB_DR_TTL_EXPIRED,       /* frame: TTL <= 1, cannot be forwarded (no ICMP is sent) */
	LB_DR_CONN_BUSY,         /* a connection table's answer was INNET_TABLE_BUSY (a writer
	                          * stopped in the entry's slot): the connection may exist, so
	                          * the packet is dropped, never balanced anew */
	LB_DR_COUNT_END
};
#define LB_N_DROPS (LB_DR_COUNT_END - INNET_DROP_PROGRAM)

/* Connection table key: one flow to one VIP (16 bytes). In proxy mode
 * vip_ip is 0 and proto 17. */
struct lb_conn_key {
	uint32_t cip;       /* client address (host order) */
	uint32_t vip_ip;    /* VIP address (packet mode) */
	uint16_t cport;     /* client port */
	uint16_t vport;     /* VIP port */
	uint8_t proto;      /* LB_PROTO_TCP or LB_PROTO_UDP */
	uint8_t vip;        /* VIP index */
	uint16_t zero;      /* 0 */
};

/* Connection table value (16 bytes). */
struct lb_conn_val {
	uint16_t unit;      /* unit slot */
	uint16_t nat;       /* proxy: NAT port index; packet: unused */
	uint32_t seen_ms;   /* last packet, ms of CLOCK_MONOTONIC (wraps: compared by difference) */
	uint8_t closing;    /* TCP FIN or RST seen: short idle timeout */
	uint8_t pad[7];
};

/* Reverse table: proxy {LB_REV_PROXY, unit, nat}; packet {LB_REV_PACKET, unit,
 * cport, cip, proto}. */
enum lb_rev_kind {
	LB_REV_PROXY = 1,   /* a reply to a NAT port: the unit and the port's index */
	LB_REV_PACKET = 2,  /* a reply frame: the unit, the client's address and port */
};

struct lb_rev_key {
	uint8_t kind;       /* enum lb_rev_kind */
	uint8_t proto;
	uint16_t unit;
	uint16_t port;      /* proxy: NAT port index; packet: client port */
	uint16_t zero;
	uint32_t cip;       /* packet: client address */
	uint32_t zero2;
};

struct lb_rev_val {
	uint32_t cip;       /* client address */
	uint16_t cport;     /* client port */
	uint8_t vip;        /* VIP index */
	uint8_t swport;     /* packet: switch port toward the client */
	uint8_t cmac[6];    /* packet: next hop MAC toward the client */
	uint16_t pad;
};

/* Unit address table: (ip, port, proto) -> slot. */
struct lb_uaddr_key {
	uint32_t ip;
	uint16_t udp;
	uint16_t zero;
};

/* The flow hash of a connection key (Bloom filter, policies, the sweep). */
#define LB_FLOW_SEED 0x6c62u

/* What the handler hands to the control thread (innet_to_cpu), told apart
 * by pkt->meta32[0] (on XDP the hand-off record carries the metadata):
 *
 *   LB_CPU_SWEEP    the timer's sweep datagram (nonce checked): sweep
 *   LB_CPU_REPORT   an agent report that passed the handler's cheap checks
 *                   (length, magic/version, service, type); the report is
 *                   the INNET_LB_REPORT_LEN bytes at meta32[1] of the packet
 *                   (0 for a datagram, past the headers of a frame). The
 *                   control thread verifies its MAC, fields, ids, kind and
 *                   sequence, and writes the unit's state registers
 *   LB_CPU_FORWARD  packet mode: a rewritten frame to send out of port
 *                   meta16, handed over because a connection sweep is due:
 *                   the control thread sends it, then sweeps */
#define LB_CPU_SWEEP    0x4c42fd00u
#define LB_CPU_FORWARD  0x4c42fd01u
#define LB_CPU_REPORT   0x4c42fd02u

/* The sweep datagram the timer sends to the switch itself (24 bytes). */
struct lb_sweep_msg {
	struct innet_hdr h;
	uint8_t type;       /* INNET_LB_T_SWEEP */
	uint8_t pad[7];
	uint64_t nonce;     /* lb_conf.nonce: only this instance's timer sends it */
} __attribute__((packed));

#define LB_SWEEP_TIMER 0u

struct lb_vip {
	char name[32];
	uint32_t ip;        /* packet mode: the VIP address; proxy: 0 (any switch address) */
	uint16_t port;
	uint8_t proto;      /* 6 or 17 */
	uint8_t pool;
	uint8_t policy;     /* enum lb_policy */
};

/*
 * The config block (innet_decl_conf): everything the handler and the timer
 * callback read of the settings, plain data. setup (lb.c) fills it from the
 * parsed settings; the control thread keeps its own copy (struct lb_priv's
 * conf, lb_pvt.h), since on the XDP target the block moves into a BPF map.
 */
struct lb_conf {
	uint8_t mode;                      /* enum lb_mode */
	uint8_t unreported;                /* enum lb_unreported */
	bool have_key;                     /* a key_file: reports go to the control thread */
	uint16_t report_port;
	uint16_t threshold[INNET_LB_KIND_COUNT]; /* load level counted as busy (256: never) */
	uint32_t maglev_size;              /* prime */
	uint32_t idle_ms;
	uint32_t closing_ms;               /* TCP after FIN/RST */
	uint32_t down_after_ms;            /* 0 = never down for silence */
	uint32_t sweep_ms;
	uint32_t bloom_size;               /* power of two */
	uint32_t own_ip;                   /* port 0's address: the timer's sweep datagrams
	                                    * (0, packet mode: no timer) */
	uint64_t nonce;                    /* authenticates sweep datagrams */
	uint32_t n_vips;
	struct lb_vip vips[INNET_LB_MAX_VIPS];
	/* NAT ports (proxy): every bound UDP port that is neither a VIP nor the
	 * report port. nat_of_port[p] = index + 1, 0 = not a NAT port. */
	uint32_t n_nat;
	uint32_t nat_words;                /* u64 words of R_NATMAP per unit */
	uint16_t nat_ports[INNET_MAX_PROG_UDP];
	uint16_t nat_of_port[65536];
	uint8_t vip_of_port[65536];        /* proxy: VIP index + 1 */
};

_Static_assert((INNET_MAX_PROG_UDP & (INNET_MAX_PROG_UDP - 1)) == 0, "NAT ports: a power of two");

/* The health of a unit whose R_UNIT_STATE is st and whose last report (or,
 * never reported, its configuration) is silent_ns old. Pure; the handler
 * serves a unit unless this says LB_HEALTH_DOWN:
 *
 *   never reported  -> UNKNOWN (serving); "grace": DOWN once silent for
 *                      down_after_ms; "down": DOWN
 *   reported        -> DOWN if not AVAILABLE or silent for down_after_ms
 *                      (0: never), else UP */
static inline enum lb_health lb_unit_health(const struct lb_conf *c, uint32_t st, int64_t silent_ns)
{
	bool silent = c->down_after_ms != 0 && silent_ns > (int64_t)c->down_after_ms * 1000000;
	if (!(st & LB_US_REPORTED)) {
		if (c->unreported == LB_UNREP_DOWN || (c->unreported == LB_UNREP_GRACE && silent))
			return LB_HEALTH_DOWN;
		return LB_HEALTH_UNKNOWN;
	}
	if (!(st & INNET_LB_ST_AVAILABLE) || silent)
		return LB_HEALTH_DOWN;
	return LB_HEALTH_UP;
}

INNET_DATAPATH_DECL(lb);

#endif /* INNET_LB_LB_H */
