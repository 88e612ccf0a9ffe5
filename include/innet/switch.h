/*
 * innet/switch.h — the switch runtime: configuration, lifecycle, and the
 * control-plane calls (registers, tables, multicast groups, stats, capture).
 *
 * A switch has ports and programs. A port is one IPv4 address of the switch
 * (an "interface"; on loopback, 127.x.y.z) and, optionally, the address of the
 * peer at the other end of its link. A program is bound to one or more UDP
 * port numbers (single ports or ranges, up to INNET_MAX_PROG_UDP) and listens
 * on every port's address with each of them: a datagram arriving at
 * ADDR(port i):U enters the switch on port i and is handed to the program
 * bound to U (the parser's dispatch on the UDP destination port).
 *
 * A port may instead be raw: a network interface (conf.iface) read and
 * written whole frames at a time through AF_PACKET (root only). Every frame
 * received on any raw port goes to the one program instance with conf.raw
 * set, with pkt->data at the Ethernet header and INNET_PKT_F_RAW in
 * pkt->flags; its verdicts send frames out of raw ports (docs/runtime.md).
 *
 *      peer 127.0.2.1 ──link── port 0 = 127.0.1.1 ┐            ┌ program "agg"   (udp 48879)
 *      peer 127.0.1.9 ──link── port 1 = 127.0.1.2 ├─ parser ───┤ program "paxos" (udp 34952)
 *                                                 ┘ (dst udp)  └ ...
 *
 * Threads: n_workers worker threads (receive burst → program → transmit
 * burst), one timer thread (Trio timer callbacks), one control thread (the
 * control socket, the metrics HTTP server, packets handed to the CPU).
 *
 * Errors follow one convention: actions return 0 or -errno; constructors
 * return NULL and set errno, with a readable message in the caller's buffer.
 */
#ifndef INNET_SWITCH_H
#define INNET_SWITCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/program.h"
#include "innet/clock.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_NAME_MAX 64u
#define INNET_IFACE_MAX 16u            /* IFNAMSIZ: interface name with its NUL */
#define INNET_MAX_SWITCH_UDP 8192u     /* UDP ports bound by all programs of a switch */

/* Link emulation on a port (fault injection). Probabilities in [0, 1]. */
struct innet_link_conf {
	double loss;          /* drop probability */
	double dup;           /* duplicate probability */
	double reorder;       /* probability a packet is held back behind later ones */
	uint32_t delay_us;    /* added one-way delay */
	uint32_t jitter_us;   /* uniform extra delay in [0, jitter_us] */
	bool on_egress;       /* apply to packets the switch sends on this port */
	bool on_ingress;      /* apply to packets the switch receives on this port */
	uint64_t seed;        /* PRNG seed (0: derived from the switch seed and port) */
};

/* The link has fault settings (loss, dup, reorder, delay or jitter)... */
bool innet_link_faulty(const struct innet_link_conf *lc);
/* ... and they apply on this switch's engine (egress or ingress). */
bool innet_link_active(const struct innet_link_conf *lc);
/* The settings as JSON (jansson), the one rendering (ctl info, fabric show
 * --json, fabric.json): {loss, dup, reorder, delay_us, jitter_us, on_egress,
 * on_ingress, seed, active}. NULL when out of memory. */
struct json_t;
struct json_t *innet_link_json(const struct innet_link_conf *lc);

struct innet_port_conf {
	char name[INNET_NAME_MAX];    /* e.g. "p0" or the neighbour's name */
	char iface[INNET_IFACE_MAX];  /* raw port: the interface (AF_PACKET); "" = UDP port */
	char dev[INNET_IFACE_MAX];    /* XDP target: the network device carrying this port
	                               * (ip is its address; raw ports: = iface) */
	uint8_t peer_mac[6];          /* XDP target: the link peer's MAC (static neighbour) */
	bool has_peer_mac;            /* else looked up in the kernel's neighbour table */
	uint32_t ip;                  /* local address (host order); 0 for a raw port */
	uint32_t peer_ip;             /* other end of the link; 0 = none */
	uint16_t peer_udp;            /* 0 = same UDP port as the packet */
	struct innet_link_conf link;  /* emulation; all zero = a perfect link */
};

struct innet_prog_conf {
	char name[INNET_NAME_MAX];             /* instance name, e.g. "fwd" */
	const struct innet_program *program;   /* from innet_program_find() */
	uint16_t udp[INNET_MAX_PROG_UDP];      /* bound UDP ports, ranges expanded (inline:
	                                        * the conf stays a plain copyable value) */
	uint32_t n_udp;                        /* 1..INNET_MAX_PROG_UDP (0 allowed if raw) */
	bool raw;                              /* receives every frame of the raw ports */
	char *args_json;                       /* settings as a JSON object text, or NULL */
};

/* Append UDP ports lo..hi (one port when lo == hi) to pc->udp. 0, or -EINVAL
 * with a message in err: a port outside 1..65535, lo > hi, a port already in
 * the list (named), more than INNET_MAX_PROG_UDP ports in all. */
int innet_prog_conf_add_udp(struct innet_prog_conf *pc, uint32_t lo, uint32_t hi, char *err,
			    size_t errlen);
/* Parse "N" or "A-B" (decimal) into *lo, *hi (no range checks). 0 or -EINVAL. */
int innet_udp_range_parse(const char *s, uint32_t *lo, uint32_t *hi);

/* Where a switch's data paths run (docs/runtime.md "Targets", docs/xdp.md). */
enum innet_target {
	INNET_TARGET_UDP = 0,     /* the user-space engine over UDP sockets / AF_PACKET */
	INNET_TARGET_XDP = 1,     /* eBPF on the port devices, the engine for hand-offs */
};

/* What a target is, for those who configure, describe or report it (the
 * topology, the command line, the metrics): the runtime asks these, never
 * which target it is. */
struct innet_target_info {
	enum innet_target id;
	const char *name;         /* "udp", "xdp": the word topology files and --target use */
	const char *summary;      /* one line */
	bool needs_root;          /* a switch on it needs root (loading eBPF, attaching) */
	bool needs_devices;       /* every port is a network device: a fabric runs in netns mode */
	bool attaches_xdp;        /* it attaches XDP programs of its own to its port devices
	                           * (netns mode puts no XDP_PASS program there for it) */
	uint32_t mtu_max;         /* the largest link MTU its ports take; 0: no limit */
	const char *mtu_why;      /* ... and why (for the message) */
	bool xdp_counters;        /* it fills the xdp_* counters and the hand-off counts */
};
/* The target with id t, or NULL if none is built in. */
const struct innet_target_info *innet_target_info(enum innet_target t);
/* The target called name ("udp", "xdp"), or NULL. */
const struct innet_target_info *innet_target_find(const char *name);
/* The names of all targets, "udp|xdp" (for messages and usage lines). */
const char *innet_target_names(void);

struct innet_switch_conf {
	char name[INNET_NAME_MAX];
	enum innet_target target;              /* INNET_TARGET_UDP (default) or _XDP */
	bool xdp_no_attach;                    /* XDP: load and map, attach nothing (tests:
	                                        * innet_switch_inject runs the eBPF program
	                                        * with BPF_PROG_TEST_RUN) */
	bool no_sockets;                       /* open no socket (a raw port's interface
	                                        * need not exist): the switch runs only the
	                                        * packets innet_switch_inject gives it
	                                        * (innet p4 run, tests) */
	uint16_t node_id;                      /* fabric node id (innet_hdr.dst_node) */
	uint32_t n_workers;                    /* worker threads (>= 1) */
	char ctl_path[108];                    /* control socket path; "" = none */
	char metrics_addr[24];                 /* serve Prometheus metrics over HTTP on
	                                        * "IPv4:PORT" (innet/metrics.h); "" = none.
	                                        * Port 0: any free port, written back here
	                                        * once the switch has started */
	uint64_t seed;                         /* seed for link emulation and PRNGs */
	bool no_gso;                           /* never coalesce sends with UDP GSO */
	struct innet_port_conf ports[INNET_MAX_PORTS];
	uint32_t n_ports;
	struct innet_prog_conf progs[16];
	uint32_t n_progs;
};

struct innet_switch;

/* innet_now_ns(): innet/clock.h, included above. */

/* Build a switch from conf: runs every program's setup (settings are checked
 * here), allocates state, has the target build what runs the programs (the
 * user-space engine binds its sockets; the XDP target loads the eBPF
 * objects and maps the state), runs every program's init. Nothing runs and
 * nothing is attached until start: a packet that arrives meanwhile is not
 * handled (a socket may queue it). Returns NULL with errno set and a
 * message in err on failure. */
struct innet_switch *innet_switch_create(const struct innet_switch_conf *conf, char *err,
					 size_t errlen);
/* Start handling packets: the target's threads (and, on XDP, its programs
 * attached to the port devices), the control thread. 0, or -errno with a
 * message in err (-EALREADY if started). A stopped switch may start again. */
int innet_switch_start(struct innet_switch *sw, char *err, size_t errlen);
/* Stop handling packets (idempotent): threads joined, XDP programs
 * detached. Packets in flight are dropped. */
void innet_switch_stop(struct innet_switch *sw);
/* Free everything (stops first). NULL is allowed. */
void innet_switch_destroy(struct innet_switch *sw);

const struct innet_switch_conf *innet_switch_conf(const struct innet_switch *sw);

/* ------------------------------------------------------------------------ */
/* Control plane. struct innet_cp is a program instance seen from the        */
/* control plane; these calls are thread-safe against the data plane.        */

/* The program instance named `name`, or NULL. */
struct innet_cp *innet_switch_prog(struct innet_switch *sw, const char *name);
/* The i-th program instance (i < n_progs), or NULL. */
struct innet_cp *innet_switch_prog_at(struct innet_switch *sw, uint32_t i);

const char *innet_cp_name(const struct innet_cp *cp);
/* From a program's init: record why it fails (printf-style) for the
 * message innet_switch_create returns; returns -EINVAL. */
int innet_cp_init_error(struct innet_cp *cp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const struct innet_program *innet_cp_program(const struct innet_cp *cp);
/* The control-side state the instance's setup gave (innet_decl_priv), or NULL. */
void *innet_cp_priv(const struct innet_cp *cp);
struct innet_switch *innet_cp_switch(struct innet_cp *cp);

/* Register id by name, or -ENOENT. */
int innet_cp_reg_find(const struct innet_cp *cp, const char *name);
/* The register's declaration (NULL if id is invalid). */
const struct innet_reg *innet_cp_reg(const struct innet_cp *cp, unsigned id);
/* Read/write one element (1/2/4/8-byte registers). 0 or -EINVAL/-ERANGE. */
int innet_cp_reg_read(struct innet_cp *cp, unsigned id, uint32_t idx, uint64_t *val);
int innet_cp_reg_write(struct innet_cp *cp, unsigned id, uint32_t idx, uint64_t val);
/* Blob registers: copy n <= width bytes. */
int innet_cp_reg_read_bytes(struct innet_cp *cp, unsigned id, uint32_t idx, void *dst, uint32_t n);
int innet_cp_reg_write_bytes(struct innet_cp *cp, unsigned id, uint32_t idx, const void *src,
			     uint32_t n);

/* Table id by name, or -ENOENT. */
int innet_cp_table_find(const struct innet_cp *cp, const char *name);
struct innet_table_info {
	const char *name;
	uint32_t key_size;
	uint32_t value_size;
	uint32_t capacity;
	uint32_t entries;        /* current */
	uint64_t insert_full;    /* inserts refused: full */
	uint64_t busy;           /* data-path operations that ran out of their bounded
	                          * wait (INNET_TABLE_BUSY: a writer in the way) */
};
int innet_cp_table_info(const struct innet_cp *cp, unsigned id, struct innet_table_info *info);
/* Add or replace; -ENOSPC when full. These three wait for a data-path writer
 * in the entry's way (bounded: 0.2 s), then give up with -EBUSY. */
int innet_cp_table_add(struct innet_cp *cp, unsigned id, const void *key, const void *val);
/* Delete; -ENOENT when absent (or -EBUSY). */
int innet_cp_table_del(struct innet_cp *cp, unsigned id, const void *key);
/* Look up; 0 or -ENOENT (or -EBUSY). */
int innet_cp_table_get(struct innet_cp *cp, unsigned id, const void *key, void *val);
/* Call fn for every entry (a consistent copy of each); stops when fn returns
 * non-zero and returns that value. */
int innet_cp_table_foreach(struct innet_cp *cp, unsigned id,
			   int (*fn)(const void *key, const void *val, void *arg), void *arg);

/* A multicast group member: the port to send on, and optionally an explicit
 * destination (ip/udp 0 = the port's peer / the packet's UDP port). */
struct innet_member {
	uint16_t port;
	uint32_t ip;
	uint16_t udp;
};
/* Replace group `group`'s members (n <= INNET_MAX_GROUP_MEMBERS). */
int innet_cp_group_set(struct innet_cp *cp, uint32_t group, const struct innet_member *m,
		       uint32_t n);
/* Copy up to max members of group into m; returns the count or -errno. */
int innet_cp_group_get(struct innet_cp *cp, uint32_t group, struct innet_member *m,
		       uint32_t max);
uint32_t innet_cp_n_groups(const struct innet_cp *cp);
/* Declared register arrays and tables (ids 0..n-1: innet_cp_reg,
 * innet_cp_table_info). */
uint32_t innet_cp_n_regs(const struct innet_cp *cp);
uint32_t innet_cp_n_tables(const struct innet_cp *cp);
/* Declared timers (Trio). */
uint32_t innet_cp_n_timers(const struct innet_cp *cp);

/* Send a packet from the control plane (not counted as emitted by the data
 * plane). out as for innet_emit. 0 or -errno. */
int innet_cp_send(struct innet_cp *cp, const struct innet_out *out, bool is_group,
		  const void *data, uint32_t len);

/* Count a packet the control side refused under drop reason `reason` (one
 * of the program's, INNET_DROP_PROGRAM + i, or a runtime reason): what
 * on_cpu decides about a packet the handler handed over (innet_to_cpu), such
 * as the load balancer's agent reports, whose MAC only the control thread
 * can check. Counted in the program's drops by reason (`innet ctl stats`),
 * not as a verdict: the packet's verdict was TO_CPU. Call it from the control
 * thread (init, on_cpu, on_ctl). 0, or -EINVAL for a reason the program
 * does not have. */
int innet_cp_count_drop(struct innet_cp *cp, unsigned reason);

/* Name of a drop reason (runtime or this program's), never NULL. */
const char *innet_cp_drop_reason_name(const struct innet_cp *cp, unsigned reason);
const char *innet_drop_reason_name(unsigned reason); /* runtime reasons only */
const char *innet_action_name(unsigned action);

/* ------------------------------------------------------------------------ */
/* Statistics: per-thread counters summed on request.                         */

#define INNET_HANDOFF_KINDS 9u

struct innet_prog_stats {
	uint64_t rx_pkts;                         /* packets into the handler (first pass) */
	uint64_t rx_bytes;
	uint64_t actions[INNET_ACTION_COUNT];     /* final verdicts */
	uint64_t drops[INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS]; /* by reason */
	uint64_t passes;                          /* handler invocations incl. recirculation */
	uint64_t recirculations;
	uint64_t emitted;                         /* packets emitted (Trio) */
	uint64_t tx_pkts;                         /* copies sent (multicast counts each) */
	uint64_t timer_fires;
	uint64_t cpu_pkts;                        /* handled by on_cpu */
	uint64_t reg_ops;                         /* totals over all passes */
	uint64_t table_ops;
	uint64_t alu_ops;
	uint32_t max_reg_ops;                     /* per pass */
	uint32_t max_table_ops;
	uint32_t max_alu_ops;
	uint32_t max_recirc;                      /* per packet */
	uint32_t max_emitted;                     /* per packet */
	/* XDP target: what left the fast path for the user-space engine, by kind
	 * (innet_handoff_name), and hand-offs lost to a full ring. The packets
	 * themselves are counted above like any other, whoever handled them. */
	uint64_t handoffs[INNET_HANDOFF_KINDS];
	uint64_t handoff_ring_full;
	uint64_t xdp_rx_pkts;                     /* of rx_pkts, handled in XDP */
};

/* Name of hand-off kind k (to_cpu, emit, timer, multicast, neighbour,
 * oversize, userspace, serial, resume), or NULL past the last. */
const char *innet_handoff_name(unsigned k);

struct innet_port_stats {
	uint64_t rx_pkts;
	uint64_t rx_bytes;
	uint64_t tx_pkts;
	uint64_t tx_bytes;
	uint64_t tx_errors;
	uint64_t tx_gso;           /* of tx_pkts, sent coalesced in UDP GSO messages */
	uint64_t rx_sock_drops;    /* dropped by the kernel at the port's sockets, mostly
				    * a full receive buffer: arrived faster than read */
	uint64_t link_lost;        /* dropped by link emulation */
	uint64_t link_duplicated;
	uint64_t link_reordered;
	uint64_t link_delayed;
	uint64_t link_queue_full;  /* delay queue full: dropped */
	/* XDP target: of rx_pkts/tx_pkts, those the eBPF program handled, and
	 * frames it passed to the kernel unhandled, by reason
	 * (innet_xdp_pass_name). */
	uint64_t xdp_rx_pkts;
	uint64_t xdp_tx_pkts;
	uint64_t xdp_pass[8];
	/* XDP target: frames its programs dropped outside any handler's
	 * verdict, by reason (innet_xdp_drop_name): every other drop is a
	 * program's, counted by its drop reason. */
	uint64_t xdp_drop[8];
};

/* Name of XDP pass reason k (not_ipv4, not_local, not_udp, no_program,
 * ip_options, fragment, bad_length, userspace), or NULL past the last. */
const char *innet_xdp_pass_name(unsigned k);
/* Name of XDP drop reason k (no_raw_program, adjust, no_conf, egress_meta,
 * egress_short), or NULL past the last. */
const char *innet_xdp_drop_name(unsigned k);

int innet_cp_stats(struct innet_cp *cp, struct innet_prog_stats *out);
int innet_switch_port_stats(struct innet_switch *sw, uint32_t port, struct innet_port_stats *out);
/* Zero all counters (ports and programs). */
void innet_switch_stats_reset(struct innet_switch *sw);

/* ------------------------------------------------------------------------ */
/* Capture: write a port's traffic (both directions) to a pcap file with     */
/* synthesized IPv4/UDP headers (LINKTYPE_RAW), readable by tshark.          */

/* Start capturing on port into path; stop after max_pkts (0 = unlimited). */
int innet_switch_capture_start(struct innet_switch *sw, uint32_t port, const char *path,
			       uint64_t max_pkts);
/* Stop and close the file; -ENOENT if not capturing. */
int innet_switch_capture_stop(struct innet_switch *sw, uint32_t port);

/* ------------------------------------------------------------------------ */
/* Injection: run one packet through the real pipeline on the calling thread */
/* and collect what would be sent instead of sending it (golden-packet tests, */
/* fuzzing, dry runs). Works whether or not the switch is started; calls are  */
/* serialised. Link emulation and capture are bypassed. Emitted packets are  */
/* collected too. Timers armed by the packet fire on the timer thread only   */
/* if the switch is started.                                                 */
/*                                                                            */
/* A packet the handler hands to the control plane (TO_CPU) is queued for    */
/* the control thread, which runs the program's on_cpu — if the switch is    */
/* started. If it is not, no control thread exists: the injection runs      */
/* on_cpu itself, on the calling thread, before it returns (as the control   */
/* thread would: the packet is counted in cpu_pkts, what on_cpu sends with   */
/* innet_cp_send is collected in the result like the data plane's sends,     */
/* and the first drop reason it counts with innet_cp_count_drop is reported  */
/* in cpu_drop_reason). The verdict stays TO_CPU.                            */

#define INNET_INJECT_MAX_OUT 64u

struct innet_inject_out {
	uint16_t port;             /* egress port */
	struct innet_addr dst;     /* destination */
	uint16_t src_udp;          /* local UDP port it would be sent from */
	uint32_t len;
	uint8_t data[INNET_PKT_MAX];
};

struct innet_inject_result {
	enum innet_action action;  /* final verdict (DROP if an error turned it into one) */
	unsigned drop_reason;      /* when action == INNET_DROP */
	unsigned cpu_drop_reason;  /* TO_CPU on a switch not started: the drop reason
	                            * on_cpu counted for the packet (innet_cp_count_drop),
	                            * 0 if none */
	uint32_t n_out;            /* packets that would be sent */
	uint32_t n_out_lost;       /* more than INNET_INJECT_MAX_OUT */
	struct innet_inject_out out[INNET_INJECT_MAX_OUT];
};

/* Inject data as if it arrived on `port` at UDP port dst_udp from src. On a
 * raw port, dst_udp must be 0: data is a whole frame for the raw program
 * (src is ignored; outputs to raw ports have dst and src_udp 0).
 * 0, or -EINVAL (bad port, no program on dst_udp, dst_udp on a raw port,
 * len too large). */
int innet_switch_inject(struct innet_switch *sw, uint16_t port, uint16_t dst_udp,
			const struct innet_addr *src, const void *data, uint32_t len,
			struct innet_inject_result *res);

#ifdef __cplusplus
}
#endif
#endif /* INNET_SWITCH_H */
