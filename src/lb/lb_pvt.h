/*
 * lb_pvt.h — the load balancer program's private definitions: its settings
 * after parsing (struct lb_conf, the program's priv), register and table
 * ids, the connection table's key and value, and the pure helpers
 * (maglev.c, frame.c, config.c) that the unit tests call directly.
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
#ifndef INNET_LB_PVT_H
#define INNET_LB_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include "innet/lb.h"
#include "innet/program.h"

#define LB_UNITS_PER_SERVER  INNET_LB_MAX_UNITS_PER_SERVER
#define LB_MAX_UNIT_SLOTS    (INNET_LB_MAX_SERVERS * LB_UNITS_PER_SERVER)
#define LB_NONE              0xffffu   /* "no backend" in Maglev/list entries */
#define LB_DIP_NONE          0xffu     /* DIP: no usable unit in the server */
#define LB_DIP_SPLIT         0xfeu     /* DIP: split by remaining capacity (CPU busy) */
#define LB_WRR_MAX           4096u     /* smooth WRR cycle length */
#define LB_DIP_STATES        65536u    /* busy bits << 8 | available bits */
#define LB_PROBES            16u       /* bounded probing past an unusable entry */

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

/* Counters in R_STATS (names in lb_stat_names). */
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
extern const char *const lb_stat_names[LB_ST_COUNT];

/* Program drop reasons (INNET_DROP_PROGRAM + i; names in lb_drop_names). */
enum lb_drop {
	LB_DR_REPORT_LENGTH = INNET_DROP_PROGRAM, /* report: bad_length */
	LB_DR_REPORT_MAGIC,      /* report: bad magic/version */
	LB_DR_REPORT_SERVICE,    /* report: not INNET_SVC_LB */
	LB_DR_REPORT_TYPE,       /* report: unknown type */
	LB_DR_REPORT_FIELD,      /* report: field out of range */
	LB_DR_REPORT_MAC,        /* report: MAC does not verify (spoofed) */
	LB_DR_REPORT_NO_KEY,     /* report: no key_file configured */
	LB_DR_REPORT_UNKNOWN,    /* report: unknown server or unit */
	LB_DR_REPORT_KIND,       /* report: kind differs from the configured unit */
	LB_DR_REPORT_REPLAY,     /* report: seq not above the last accepted */
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
	LB_DR_COUNT_END
};
#define LB_N_DROPS (LB_DR_COUNT_END - INNET_DROP_PROGRAM)
extern const char *const lb_drop_names[LB_N_DROPS];

/* Connection table key: one flow to one VIP (16 bytes). In proxy mode
 * vip_ip is 0 and proto 17. */
struct lb_conn_key {
	uint32_t cip;       /* client address (host order) */
	uint32_t vip_ip;    /* VIP address (packet mode) */
	uint16_t cport;     /* client port */
	uint16_t vport;     /* VIP port */
	uint8_t proto;      /* 6 or 17 */
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

/* Packet mode: on_cpu receives a rewritten frame to send (pkt->meta32[0] =
 * LB_CPU_FORWARD, pkt->meta16 = egress port) when the handler hands it to the
 * control thread because a connection sweep is due (see dataplane.c). */
#define LB_CPU_FORWARD  0x4c42fd01u

/* Reverse table: proxy {1, unit, nat}; packet {2, unit, cport, cip, proto}. */
struct lb_rev_key {
	uint8_t kind;
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

struct lb_vip {
	char name[32];
	uint32_t ip;        /* packet mode: the VIP address; proxy: 0 (any switch address) */
	uint16_t port;
	uint8_t proto;      /* 6 or 17 */
	uint8_t pool;
	uint8_t policy;     /* enum lb_policy */
};

struct lb_server {
	uint16_t id;
	uint16_t weight;    /* server-level weight (accel policy's Maglev) */
	uint8_t pool;
};

struct lb_unit_init {     /* a unit from the settings (init writes the registers) */
	uint16_t slot;
	uint8_t kind;
	uint16_t weight;
	uint32_t ip;
	uint16_t udp;
	uint16_t port;
	uint64_t mac;
	uint8_t pool;
};

struct lb_conf {
	uint8_t mode;                      /* enum lb_mode */
	uint16_t report_port;
	bool have_key;
	struct innet_lb_key key;
	uint32_t maglev_size;              /* prime */
	uint32_t conn_capacity;
	uint32_t idle_ms;
	uint32_t closing_ms;               /* TCP after FIN/RST */
	uint32_t down_after_ms;            /* 0 = never down for silence */
	uint8_t unreported;                /* enum lb_unreported */
	uint32_t sweep_ms;
	uint16_t threshold[INNET_LB_KIND_COUNT]; /* load level counted as busy (256: never) */
	uint32_t bloom_size;               /* power of two */
	uint32_t n_vips;
	struct lb_vip vips[INNET_LB_MAX_VIPS];
	uint32_t n_pools;
	char pool_names[INNET_LB_MAX_POOLS][32];
	uint32_t n_servers;
	struct lb_server servers[INNET_LB_MAX_SERVERS];
	uint32_t n_units;
	struct lb_unit_init units[LB_MAX_UNIT_SLOTS];
	/* NAT ports (proxy): every bound UDP port that is neither a VIP nor the
	 * report port. nat_of_port[p] = index + 1, 0 = not a NAT port. */
	uint32_t n_nat;
	uint32_t nat_words;
	uint16_t nat_ports[INNET_MAX_PROG_UDP];
	uint16_t nat_of_port[65536];
	uint8_t vip_of_port[65536];        /* proxy: VIP index + 1 */
	/* Control-thread state (never read by the handler). */
	uint32_t own_ip;                   /* port 0's address (sweep packets) */
	uint64_t nonce;                    /* authenticates sweep packets */
	uint32_t pool_ver[INNET_LB_MAX_POOLS];
};

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

/* config.c: parse and check the settings (errors via innet_decl_error). */
struct innet_decl;
struct innet_args;
int lb_conf_parse(struct innet_decl *d, struct innet_args *a, struct lb_conf *c);
int lb_policy_parse(const char *s);
const char *lb_policy_name(unsigned p);
int lb_parse_ipport(const char *s, uint32_t *ip, uint16_t *port);
int lb_parse_mac(const char *s, uint64_t *mac);

/* maglev.c */
struct lb_backend {
	uint64_t id;        /* stable identity (hashed for the preference list) */
	uint32_t weight;    /* 0 = absent */
	uint32_t index;     /* value stored in the table */
};
bool lb_is_prime(uint32_t n);
/* Fill table[0..m) with backend indexes (LB_NONE when no backend has weight).
 * m must be prime. 0 or -EINVAL/-ENOMEM. */
int lb_maglev_build(const struct lb_backend *b, uint32_t n, uint32_t m, uint16_t *table);
/* Smooth WRR cycle into seq (at most max entries); returns its length (0: none). */
uint32_t lb_wrr_build(const struct lb_backend *b, uint32_t n, uint16_t *seq, uint32_t max);
/* P4Mite's DIP decision for one server state: the index of a usable CPU
 * that is not busy (the preferred unit), LB_DIP_NONE (no usable unit), or
 * LB_DIP_SPLIT: the handler splits new connections over the usable units in
 * proportion to weight x (256 - reported load level). */
uint8_t lb_dip_pick(const uint8_t kind[LB_UNITS_PER_SERVER], uint8_t eligible, uint8_t avail,
		    uint8_t busy);

/* frame.c: packet mode's pure frame helpers. */
struct lb_frame {
	uint32_t l3_off;    /* IPv4 header offset (14, or 18 behind one VLAN tag) */
	uint32_t l4_off;    /* UDP/TCP header offset */
	uint32_t sip, dip;  /* host order */
	uint16_t sport, dport;
	uint32_t l4_len;    /* UDP: its length field; TCP: IPv4 total length - IHL */
	uint8_t proto;      /* 6 or 17 */
	uint8_t tcp_flags;  /* TCP: FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10 */
	uint8_t ttl;        /* IPv4 TTL */
};
/* Parse strictly. 0, or a drop reason (LB_DR_BAD_FRAME, NOT_IPV4, BAD_IP,
 * FRAGMENT, BAD_L4). */
int lb_frame_parse(const uint8_t *f, uint32_t len, struct lb_frame *out);
/* Rewrite the destination (DNAT: dst ip/port) or the source (SNAT) of a
 * parsed frame, with RFC 1624 incremental checksum updates of IPv4 and
 * UDP/TCP (a UDP checksum of 0 stays 0), and set the MAC addresses. */
void lb_frame_set_dst(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port);
void lb_frame_set_src(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port);
void lb_frame_set_macs(uint8_t *f, uint64_t dst, uint64_t src);
/* Decrement the TTL (the caller checked it is > 1), updating the IPv4
 * header checksum incrementally. */
void lb_frame_dec_ttl(uint8_t *f, struct lb_frame *fr);
/* Finish a partial TCP/UDP checksum (CHECKSUM_PARTIAL from a sender with tx
 * checksum offload: the field holds only the pseudo-header sum). Returns true
 * if it wrote the full checksum; a checksum that verifies is never touched. */
bool lb_frame_complete_csum(uint8_t *f, const struct lb_frame *fr);
uint64_t lb_frame_mac(const uint8_t *m);
/* Full checksum helpers (tests, and checking what the rewrite produced). */
uint16_t lb_csum_ipv4(const uint8_t *ip, uint32_t ihl_bytes);
uint16_t lb_csum_l4(const uint8_t *f, const struct lb_frame *fr, uint32_t l4_len);

#endif /* INNET_LB_PVT_H */
