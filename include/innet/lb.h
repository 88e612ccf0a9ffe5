/*
 * innet/lb.h — the load-balancing service (P4Mite-style, accelerator aware):
 * agent reports (sealing, opening and checking them with the keyed MAC), the
 * key file, and the constants the switch program "lb" (src/lb/) and
 * `innet lb agent` share.
 * docs/lb.md describes the service; docs/protocol.md section "LB" the header.
 *
 * An agent runs beside each processing unit (a CPU or an accelerator inside
 * a server) and tells the switch how that unit is doing: a report when the
 * unit crosses its threshold, and a heartbeat every so often. The switch
 * trusts a report only if its MAC verifies with the shared key and its
 * sequence number is larger than the last one it accepted from that
 * (server, unit): a spoofed, replayed or malformed report is dropped with a
 * named reason (`innet ctl stats`).
 *
 * The report datagram's layout (48 bytes: the innet base header, the
 * report, a 16-byte MAC) is src/lb/wire.h's, drawn there and in
 * docs/protocol.md; struct innet_lb_report below is its host form, which
 * innet_lb_report_seal encodes and innet_lb_report_open checks and decodes.
 *
 * Key file: 64 hexadecimal characters (the 32-byte key), optionally followed
 * by whitespace; nothing else. `head -c32 /dev/urandom | xxd -p -c64 > key`.
 *
 * Errors: functions return 0 (or a length) on success and a negative value
 * on failure: -errno for system errors, or -INNET_LB_E_* (named by
 * innet_lb_err_name()) for a report that does not verify.
 */
#ifndef INNET_LB_H
#define INNET_LB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default UDP port of the switch's report listener (the lb program's
 * "report_port" setting). */
#define INNET_LB_REPORT_UDP     47900u

/* Wire sizes. */
#define INNET_LB_REPORT_LEN     48u   /* whole report datagram (UDP payload) */
#define INNET_LB_MAC_LEN        16u   /* truncated HMAC-SHA256 */
#define INNET_LB_MAC_OFF        32u   /* MAC covers bytes [0, INNET_LB_MAC_OFF) */
#define INNET_LB_KEY_LEN        32u   /* shared key bytes (64 hex chars in the key file) */

/* Limits of the switch program (settings beyond them are rejected). */
#define INNET_LB_MAX_VIPS       16u
#define INNET_LB_MAX_POOLS      8u
#define INNET_LB_MAX_SERVERS    64u   /* per switch, all pools together */
#define INNET_LB_MAX_UNITS_PER_SERVER 8u
#define INNET_LB_MAX_UNITS      256u  /* per switch, all servers together */

/* LB header types (byte 8). */
enum innet_lb_type {
	INNET_LB_T_REPORT = 1,   /* agent -> switch: a unit's state */
	INNET_LB_T_SWEEP = 2,    /* switch -> itself: run the connection sweep (internal) */
};

/* Processing unit kinds. */
enum innet_lb_kind {
	INNET_LB_KIND_CPU = 0,
	INNET_LB_KIND_ACCEL = 1,
	INNET_LB_KIND_COUNT
};

/* State bits (P4Mite's per-unit bitmap, one unit's share of it). */
#define INNET_LB_ST_AVAILABLE   0x01u  /* the unit accepts work */
#define INNET_LB_ST_BUSY        0x02u  /* the unit is over its threshold */
#define INNET_LB_ST_MASK        0x03u

/* Report flags. */
#define INNET_LB_RF_HEARTBEAT   0x0001u  /* periodic */
#define INNET_LB_RF_THRESHOLD   0x0002u  /* the unit crossed its threshold */
#define INNET_LB_RF_MASK        0x0003u

/* A report in host form (what seal encodes and open decodes). */
struct innet_lb_report {
	uint16_t server;       /* server id */
	uint16_t unit;         /* unit id within the server */
	uint8_t kind;          /* enum innet_lb_kind */
	uint8_t state;         /* INNET_LB_ST_* */
	uint8_t load;          /* 0..255 */
	uint16_t rflags;       /* INNET_LB_RF_* */
	uint64_t seq;          /* strictly increasing per (server, unit); >= 1 */
	uint32_t latency_us;   /* measured latency */
	uint16_t src_node;     /* base header src_node (0 = unknown) */
	uint16_t dst_node;     /* base header dst_node (0 = none) */
};

/* Why a report does not verify (returned negated). */
enum innet_lb_err {
	INNET_LB_E_OK = 0,
	INNET_LB_E_TOO_SHORT,    /* not INNET_LB_REPORT_LEN bytes (shorter or longer) */
	INNET_LB_E_BAD_MAGIC,    /* base header magic/version wrong */
	INNET_LB_E_WRONG_SERVICE,/* base header service is not INNET_SVC_LB */
	INNET_LB_E_BAD_TYPE,     /* LB type is not INNET_LB_T_REPORT */
	INNET_LB_E_BAD_FIELD,    /* kind, state, rflags, reserved or seq out of range */
	INNET_LB_E_BAD_MAC,      /* MAC does not verify: spoofed or corrupted */
	INNET_LB_E_COUNT
};

/* Name of an error ("bad_mac", ...): err may be positive or negated; never NULL. */
const char *innet_lb_err_name(int err);

/* A shared key, expanded once (the HMAC inner/outer pads are precomputed so
 * verifying a report costs two SHA-256 compressions). Plain data: copy it,
 * keep it in a config; wipe it with innet_lb_key_wipe(). */
struct innet_lb_key {
	uint8_t raw[INNET_LB_KEY_LEN];
	uint8_t state[256] __attribute__((aligned(16))); /* crypto_auth_hmacsha256_state */
};

/* Expand a raw 32-byte key. 0, or -ENOSYS if libsodium cannot initialise. */
int innet_lb_key_init(struct innet_lb_key *k, const uint8_t raw[INNET_LB_KEY_LEN]);
/* Read a key file (64 hex chars + optional whitespace) and expand it. 0, or
 * -errno (-EINVAL for bad content) with a message in err. */
int innet_lb_key_load(struct innet_lb_key *k, const char *path, char *err, size_t errlen);
/* Parse 64 hex chars (+ optional trailing whitespace) into raw. 0 or -EINVAL. */
int innet_lb_key_parse(const char *text, uint8_t raw[INNET_LB_KEY_LEN]);
/* Zero a key. */
void innet_lb_key_wipe(struct innet_lb_key *k);

/* Compute the truncated MAC of len bytes. */
void innet_lb_mac(const struct innet_lb_key *k, const void *data, size_t len,
		  uint8_t mac[INNET_LB_MAC_LEN]);
/* Constant-time check of a truncated MAC over len bytes. */
bool innet_lb_mac_ok(const struct innet_lb_key *k, const void *data, size_t len,
		     const uint8_t mac[INNET_LB_MAC_LEN]);

/* Encode r and append its MAC into buf (>= INNET_LB_REPORT_LEN bytes).
 * Returns INNET_LB_REPORT_LEN, -ENOSPC (buf too small) or -INNET_LB_E_BAD_FIELD
 * (a field out of range: kind, state, rflags, seq 0). */
int innet_lb_report_seal(const struct innet_lb_report *r, const struct innet_lb_key *k,
			 void *buf, size_t buflen);
/* Verify and decode a received datagram of len bytes. Returns 0 and fills r,
 * or -INNET_LB_E_* (r untouched). Checks everything that needs no switch
 * state; the switch also checks the ids are known, the kind matches the
 * configured unit, and seq is above the last accepted (replay). */
int innet_lb_report_open(const void *buf, size_t len, const struct innet_lb_key *k,
			 struct innet_lb_report *r);

#ifdef __cplusplus
}
#endif
#endif /* INNET_LB_H */
