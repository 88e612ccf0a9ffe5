/*
 * lb_pvt.h — the load balancer's control side, private: the parsed settings
 * and control-thread state (struct lb_priv, the program's priv), and the
 * helpers of config.c, maglev.c and frame.c that the unit tests call
 * directly. What the data path shares with it (ids, the config block, the
 * table entries) is lb/lb.h; the frame code both run is lb/frame.h.
 */
#ifndef INNET_LB_PVT_H
#define INNET_LB_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include "innet/lb.h"
#include "innet/program.h"
#include "lb/lb.h"
#include "lb/frame.h"

extern const char *const lb_stat_names[LB_ST_COUNT];
extern const char *const lb_drop_names[LB_N_DROPS];

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

/* The program's priv (innet_decl_priv): the settings after parsing and the
 * control thread's state. init, on_cpu and on_ctl run one at a time on the
 * control thread, so none of it needs a lock. */
struct lb_priv {
	struct lb_conf conf;               /* what setup wrote into the config block (the
	                                    * block itself moves into a BPF map on XDP) */
	struct innet_lb_key key;           /* conf.have_key: the agents' shared key */
	uint32_t conn_capacity;
	uint32_t n_pools;
	char pool_names[INNET_LB_MAX_POOLS][32];
	uint32_t n_servers;
	struct lb_server servers[INNET_LB_MAX_SERVERS];
	uint32_t n_units;
	struct lb_unit_init units[LB_MAX_UNIT_SLOTS];
	uint32_t pool_ver[INNET_LB_MAX_POOLS];
};

/* config.c: parse and check the settings into p (errors via
 * innet_decl_error). */
int lb_conf_parse(struct innet_decl *d, struct innet_args *a, struct lb_priv *p);
int lb_policy_parse(const char *s);
const char *lb_policy_name(unsigned p);
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

/* frame.c: packet mode's frame code (lb/frame.h, what the handler runs) on
 * plain byte buffers, for the tests and the control side. Parse strictly:
 * 0, or a drop reason (LB_DR_BAD_FRAME, NOT_IPV4, BAD_IP, FRAGMENT, BAD_L4). */
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

/* ctl.c: the program's init, on_cpu and on_ctl. */
int lb_init(struct innet_cp *cp, void *priv);
void lb_on_cpu(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt);
int lb_on_ctl(struct innet_cp *cp, void *priv, int argc, char **argv, struct json_t *reply,
	      char *err, size_t errlen);

#endif /* INNET_LB_PVT_H */
