/*
 * lb/wire.h — the load balancer's wire format: the agent report datagram
 * (docs/protocol.md, "LB"). The API over it — sealing, opening, the key —
 * is innet/lb.h; the switch program checks it in lb_dp.c and ctl.c.
 *
 * Report datagram (UDP payload, sent to the switch's report port,
 * INNET_LB_REPORT_UDP unless configured; 48 bytes, all big-endian):
 *
 *   0               1               2               3
 *   +---------------+---------------+---------------+---------------+
 *   |  magic 0x1E   |  version 1    |  service 5    |   flags 0     |  innet_hdr
 *   +---------------+---------------+---------------+---------------+  (wire.h)
 *   |          dst_node             |          src_node             |
 *   +===============+===============+===============+===============+
 *   |   type (1)    |     kind      |    state      |     load      |  8
 *   +---------------+---------------+---------------+---------------+
 *   |            server             |             unit              |  12
 *   +-------------------------------+-------------------------------+
 *   |                                                               |  16
 *   +                      seq (u64, big-endian)                    +
 *   |                                                               |
 *   +---------------------------------------------------------------+
 *   |                          latency_us                           |  24
 *   +-------------------------------+-------------------------------+
 *   |          rflags               |        reserved (0)           |  28
 *   +===============================+===============================+
 *   |                                                               |  32
 *   +         mac: HMAC-SHA256(key, bytes 0..31), first 16 bytes    +
 *   |                                                               |
 *   +                                                               +
 *   |                                                               |
 *   +---------------------------------------------------------------+  48
 *
 *   type        INNET_LB_T_REPORT (other values are not reports)
 *   kind        enum innet_lb_kind: the unit's kind, as configured on the switch
 *   state       INNET_LB_ST_* bits: AVAILABLE (accepting work), BUSY (over its
 *               threshold: P4Mite's bit); other bits must be 0
 *   load        graded load level, 0 (idle) .. 255 (saturated)
 *   server      server id (as in the switch's pool settings)
 *   unit        unit id within that server
 *   seq         strictly increasing per (server, unit): the switch drops a
 *               report whose seq is not larger than the last accepted one
 *               (replay protection). Agents start from the wall clock in
 *               microseconds so a restarted agent continues above the old
 *               sequence; 0 is never valid.
 *   latency_us  the unit's measured request latency (agent's estimate)
 *   rflags      INNET_LB_RF_* : HEARTBEAT (periodic) and/or THRESHOLD
 *               (sent because the unit crossed its threshold); other bits 0
 *   reserved    0
 *   mac         HMAC-SHA256 (RFC 2104) keyed with the 32-byte shared key over
 *               bytes 0..31 (base header included), truncated to 16 bytes
 *
 */
#ifndef INNET_LB_WIRE_H
#define INNET_LB_WIRE_H

#include <stdint.h>

#include "innet/lb.h"
#include "innet/wire.h"

/* The report header after the innet base header (bytes 8..47), as on the
 * wire (big-endian fields). */
struct innet_lb_report_hdr {
	uint8_t type;          /* INNET_LB_T_REPORT */
	uint8_t kind;          /* enum innet_lb_kind */
	uint8_t state;         /* INNET_LB_ST_* */
	uint8_t load;          /* 0..255 */
	uint16_t server;       /* server id */
	uint16_t unit;         /* unit id within the server */
	uint64_t seq;          /* > last accepted for (server, unit); never 0 */
	uint32_t latency_us;   /* measured request latency */
	uint16_t rflags;       /* INNET_LB_RF_* */
	uint16_t reserved;     /* 0 */
	uint8_t mac[INNET_LB_MAC_LEN];
} __attribute__((packed));

_Static_assert(sizeof(struct innet_hdr) + sizeof(struct innet_lb_report_hdr) == INNET_LB_REPORT_LEN,
	       "lb report is 48 bytes on the wire");

#endif /* INNET_LB_WIRE_H */
