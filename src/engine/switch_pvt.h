/*
 * switch_pvt.h — the switch runtime's private structures, shared by the
 * engine's files (switch.c, worker.c, decl.c, dp_user.c, cp.c, table.c, timer.c, link.c,
 * control.c, capture.c). Not installed; programs never see these.
 *
 * Ownership and threads
 * ---------------------
 *   struct innet_switch      built by the control thread at create time;
 *    ├─ ports[n_ports]       read-only after create
 *    ├─ progs[n_progs]       struct innet_cp: declarations, state memory,
 *    │   ├─ regs[]           register arrays   (shared by all threads: atomics)
 *    │   ├─ tables[]         exact-match tables (seqlock per entry)
 *    │   ├─ groups[]         multicast groups   (seqlock per group, cp writes)
 *    │   └─ timers[]         one-shot timers    (atomic deadline/arg)
 *    ├─ socks[n_socks]       one UDP socket per (port, program, udp[, worker]),
 *    │                       one AF_PACKET socket per (raw port[, worker])
 *    ├─ workers[n_workers+3] data-plane threads, then the timer thread's, the
 *    │                       control thread's and the injector's own "worker"
 *    │                       (tx queue, contexts, counters); each on its own
 *    │                       cache lines
 *    └─ cpu queue            per-worker SPSC rings of packets for on_cpu
 *
 * Counters live in each worker (no sharing, no atomics on the hot path) and
 * are summed when someone asks (innet_cp_stats). Torn reads of a 64-bit
 * counter cannot happen on x86-64; readers use relaxed atomic loads.
 *
 * Packet buffers (per worker):
 *
 *   rx_bufs[RX_SETS][BURST]  each  | headroom 64 | payload ... up to INNET_PKT_MAX |
 *   emit pool       EMIT_MAX buffers of the same shape, for innet_emit
 *
 * A burst is received into one set of rx_bufs, every packet is run through
 * its program, its sends are queued as tx entries that point into those same
 * buffers (forward, reflect and multicast copy nothing). The next burst (from
 * the same or another ready socket) takes the next set, so the sends of
 * several bursts accumulate; the tx queue is flushed when every set has been
 * used once (before one is reused) and when the worker has served all the
 * sockets epoll reported, through the worker's io_uring (txring.c: all
 * sockets in one system call) or with one sendmmsg per run of entries on the
 * same socket. Link emulation that holds a packet back (delay,
 * reorder) copies it into its own queue.
 */
#ifndef INNET_SWITCH_PVT_H
#define INNET_SWITCH_PVT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "innet/switch.h"

#define INNET_BURST       32u     /* packets per recvmmsg */
#define INNET_RX_SETS     4u      /* bursts whose sends are flushed together */
#define INNET_TX_MAX      2048u   /* queued sends per worker before a forced flush */
#define INNET_EMIT_MAX    256u    /* emitted packets per worker per burst */
#define INNET_CPU_RING    256u    /* punted packets queued per worker */
#define INNET_BUF_SIZE    (INNET_PKT_HEADROOM + INNET_PKT_MAX)
#define INNET_N_REASONS   (INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS)
#define INNET_CACHELINE   64

/* Inside a spin-wait: tell the CPU (a pause on x86, a yield hint on Arm),
 * or at least the compiler, that this is a busy loop. */
static inline void innet_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ volatile("yield" ::: "memory");
#else
	__asm__ volatile("" ::: "memory");
#endif
}
#define INNET_GSO_SEGS    64u     /* datagrams coalesced into one UDP GSO send */
#define INNET_GSO_BYTES   65000u  /* and at most this many payload bytes */

/* A multicast group: written by the control plane under seq (odd = writing). */
struct innet_group {
	_Atomic uint32_t seq;
	uint32_t n;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
};

/* A one-shot timer (Trio). deadline 0 = not armed. */
struct innet_timer {
	_Atomic uint64_t deadline_ns;
	_Atomic uint64_t arg;
};

/* A program instance: what the control plane calls struct innet_cp. */
struct innet_cp {
	char name[INNET_NAME_MAX];
	const struct innet_program *program;
	/* The data path: the program's, or the instance's own
	 * (innet_decl_datapath: built at run time, as a P4 program's) */
	enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt);
	void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg);
	void *bpf_obj;                        /* its own eBPF object (malloc'd bytes), or NULL */
	size_t bpf_len;
	bool own_dp;                          /* innet_decl_datapath was called */
	struct innet_switch *sw;
	uint32_t index;                       /* in sw->progs */
	uint16_t *udp;                        /* [n_udp] bound UDP ports (NULL if none) */
	uint32_t n_udp;
	uint32_t txfd_base;                   /* its first slot in a txfd row (see worker) */
	bool raw;                             /* receives the raw ports' frames */
	void *priv;                           /* control-side state (init, on_cpu, on_ctl) */
	void (*priv_free)(void *priv);        /* NULL: free() */
	void *conf;                           /* config block (innet_decl_conf), or NULL */
	uint32_t conf_size;
	void (*conf_release)(struct innet_cp *cp); /* who frees conf (NULL: munmap) */
	struct innet_reg regs[INNET_MAX_REGS];
	char reg_names[INNET_MAX_REGS][INNET_NAME_MAX];
	uint32_t n_regs;
	struct innet_table *tables[INNET_MAX_TABLES];
	uint32_t n_tables;
	struct innet_group *groups;
	uint32_t n_groups;
	struct innet_timer *timers;
	uint32_t n_timers;
	size_t timers_mapped;                 /* bytes mmap'ed by the XDP target, 0 = calloc */
	uint32_t reg_ops_budget;              /* per pass */
	uint32_t serial_worker;               /* SERIAL: the one worker that polls it */
	_Atomic uint32_t *serial_lock;        /* SERIAL on the XDP target: the lock the eBPF
	                                       * handler takes too (innet_tmeta); else NULL */
	pthread_mutex_t cp_lock;              /* serialises control-plane writers */
};

struct innet_port {
	struct innet_port_conf conf;
	_Atomic bool gso_off;                 /* the kernel refused a GSO send here */
	struct sockaddr_in peer;              /* peer address, udp filled per packet */
	_Atomic(struct innet_capture *) capture;
};

/* One bound UDP socket, or one AF_PACKET socket of a raw port. */
struct innet_sock {
	int fd;
	uint16_t port;        /* switch port index */
	uint16_t prog;        /* program index */
	uint16_t udp;         /* bound UDP port; 0 for a raw port */
	uint16_t worker;      /* worker that receives on it */
	bool raw;             /* AF_PACKET socket of a raw port */
};

/* One queued send. */
struct innet_tx {
	int fd;
	uint16_t port;
	bool raw;             /* a frame on a packet socket: no address, no GSO */
};

/* A packet held back by link emulation (delay or reorder). */
struct innet_held {
	uint64_t due_ns;
	uint32_t len;
	int fd;                  /* egress: socket to send on; ingress: -1 */
	uint16_t port;
	uint16_t prog;           /* ingress: program; egress: unused */
	uint16_t dst_udp;        /* ingress */
	struct sockaddr_in addr; /* egress: destination; ingress: source */
	uint8_t data[];          /* len bytes */
};

/* Link emulation state of one port as seen by one worker. */
struct innet_link_state {
	uint64_t rng;            /* xorshift state, from the link seed */
	struct innet_held **heap;/* min-heap by due_ns */
	uint32_t n_held;
	uint32_t cap_held;
};

/* A packet handed to the control plane. */
struct innet_cpu_slot {
	struct innet_pkt pkt;    /* data points into buf */
	uint16_t prog;
	uint8_t buf[INNET_BUF_SIZE];
};

struct innet_cpu_ring {
	_Atomic uint32_t head;   /* producer (worker) */
	_Atomic uint32_t tail;   /* consumer (control thread) */
	struct innet_cpu_slot *slots; /* INNET_CPU_RING */
};

struct innet_worker {
	struct innet_switch *sw;
	uint32_t id;
	pthread_t thread;
	int epfd;
	int wake_fd;             /* eventfd: stop / wake */
	struct innet_ctx *ctx;                 /* [n_progs] */
	struct innet_prog_stats *pstats;       /* [n_progs] */
	struct innet_port_stats *portstats;    /* [n_ports] */
	struct innet_link_state *links;        /* [n_ports] */
	/* The socket to send from, per (port, program, local UDP port): a row
	 * per switch port, and in it each program's slots from its txfd_base,
	 * one per bound UDP port in cp->udp order (sw->udp_slot maps a UDP
	 * port to its slot):
	 *
	 *   txfd: | port 0: prog0 udp[0..n0) | prog1 udp[0..n1) | ... | port 1: ...
	 *           ^ row = port * sw->udp_stride, + cp->txfd_base + slot
	 */
	int *txfd;               /* [n_ports * udp_stride] */
	int *rawfd;              /* [n_ports]: raw port's packet socket to send on, or -1 */
	/* rx */
	struct mmsghdr rx_msgs[INNET_BURST];
	struct iovec rx_iov[INNET_BURST];
	struct sockaddr_in rx_addr[INNET_BURST];
	uint8_t *rx_bufs;        /* INNET_RX_SETS * INNET_BURST * INNET_BUF_SIZE */
	uint32_t rx_set;         /* the set the next burst is received into */
	/* tx */
	uint32_t n_tx;
	struct innet_tx tx[INNET_TX_MAX];
	struct mmsghdr tx_msgs[INNET_TX_MAX];
	struct iovec tx_iov[INNET_TX_MAX];
	struct sockaddr_in tx_addr[INNET_TX_MAX];
	/* the same sends coalesced for the kernel: one message per run of
	 * equal-size datagrams to one destination (UDP GSO), or per datagram */
	struct mmsghdr gso_msgs[INNET_TX_MAX];
	uint32_t gso_first[INNET_TX_MAX];      /* first tx entry of each message */
	uint32_t gso_count[INNET_TX_MAX];      /* tx entries in it */
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} gso_cmsg[INNET_TX_MAX];
	/* the io_uring that sends a whole flush in one system call (txring.c),
	 * NULL: sendmmsg per socket */
	struct innet_txring *txring;
	int ring_fd[INNET_TX_MAX];             /* socket of each message */
	int32_t ring_res[INNET_TX_MAX];        /* its result */
	/* emitted packets and packets released by link emulation */
	uint8_t *emit_bufs;      /* INNET_EMIT_MAX * INNET_BUF_SIZE */
	uint32_t n_emit;
	int32_t pinned_emit;     /* emit buffer holding the packet in hand, or -1:
	                          * a pool recycled mid-packet skips it */
	struct innet_cpu_ring cpu;
	uint8_t *scratch;        /* INNET_SCRATCH_SIZE: innet_scratch() of its callbacks */
	uint64_t now_ns;
	/* injection (INNET_INJECT_WORKER; the control worker while an injection
	 * runs on_cpu on a switch not started: innet_switch_inject) */
	struct innet_inject_result *inject;    /* non-NULL: flush records, sends nothing */
	uint8_t last_action;                   /* verdict of the last packet processed */
	uint16_t last_reason;
} __attribute__((aligned(INNET_CACHELINE)));

/* txring.c: a worker's transmit io_uring (NULL when unavailable). */
struct innet_txring;
struct innet_txring *innet_txring_new(uint32_t entries);
void innet_txring_free(struct innet_txring *r);
uint32_t innet_txring_size(const struct innet_txring *r);
int innet_txring_send(struct innet_txring *r, const int *fds, struct mmsghdr *msgs, uint32_t n,
		      int32_t *res);

struct innet_switch {
	struct innet_switch_conf conf;
	struct innet_port ports[INNET_MAX_PORTS];
	uint32_t n_ports;
	struct innet_cp progs[16];
	uint32_t n_progs;
	uint8_t udp_to_prog[65536];            /* program index + 1, 0 = none */
	uint16_t udp_slot[65536];              /* index of the UDP port in its program's udp[] */
	uint32_t udp_stride;                   /* UDP ports bound by all programs: a txfd row */
	int32_t raw_prog;                      /* the raw program's index, or -1 */
	uint32_t n_raw_ports;
	struct innet_sock *socks;
	uint32_t n_socks;
	uint32_t n_workers;                    /* data-plane workers */
	struct innet_worker *workers;          /* n_workers + 3 (timer, control, inject) */
	struct innet_timerq *timerq;
	struct innet_control *control;
	_Atomic bool running;
	_Atomic bool stopping;
	bool started;
	int cpu_wake_fd;                       /* eventfd: punted packets waiting */
	pthread_mutex_t capture_lock;          /* capture start/stop and file writes */
	pthread_mutex_t cp_send_lock;          /* recursive: the control worker's tx queue */
	pthread_mutex_t inject_lock;           /* serialises innet_switch_inject */
	char *init_err;                        /* during create: the caller's message buffer */
	size_t init_errlen;
	struct innet_xdp *xdp;                 /* the XDP target (src/targets/xdp/), or NULL */
};

/* Per-thread counters: one writer (the owning thread), read by anyone with
 * relaxed loads. A relaxed store of the incremented value costs the same as a
 * plain increment on x86-64 and keeps the contract visible (and TSan quiet). */
#define INNET_STAT_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define INNET_STAT_INC(x)    INNET_STAT_ADD(x, 1)
#define INNET_STAT_MAX(x, v) do { if ((v) > (x)) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED); } while (0)

#define INNET_TIMER_WORKER(sw)   (&(sw)->workers[(sw)->n_workers])
#define INNET_CONTROL_WORKER(sw) (&(sw)->workers[(sw)->n_workers + 1])
#define INNET_INJECT_WORKER(sw)  (&(sw)->workers[(sw)->n_workers + 2])
#define INNET_XDP_WORKER(sw)     (&(sw)->workers[(sw)->n_workers + 3]) /* hand-offs */
#define INNET_EXTRA_WORKERS 4u

/* decl.c: declarations, settings, allocation (dp_user.c: register blobs). */
struct innet_decl {
	struct innet_cp *cp;
	char *err;
	size_t errlen;
	int failed;
};
int innet_state_setup(struct innet_cp *cp, const struct innet_prog_conf *pc, char *err,
		      size_t errlen);
void innet_state_free(struct innet_cp *cp);
void innet_state_reg_release(struct innet_cp *cp, uint32_t id);

/* Bytes between a register's elements: the width for 1, 2, 4 and 8, wider
 * blobs rounded up to 8 (the layout of a BPF array map's elements, so both
 * targets address the same bytes). */
static inline uint32_t innet_reg_stride(uint32_t width)
{
	return width <= 8 ? width : (width + 7u) & ~7u;
}

static inline size_t innet_reg_bytes(const struct innet_reg *r)
{
	return (size_t)r->stride * r->count;
}

/* table.c */
struct innet_table *innet_table_create(const char *name, uint32_t key_size, uint32_t value_size,
				       uint32_t capacity);
void innet_table_destroy(struct innet_table *t);
int innet_table_get(struct innet_table *t, const void *key, void *val);
int innet_table_put(struct innet_table *t, const void *key, const void *val);
int innet_table_del(struct innet_table *t, const void *key);
void innet_table_info_get(const struct innet_table *t, struct innet_table_info *info);
int innet_table_iter(struct innet_table *t, int (*fn)(const void *key, const void *val, void *arg),
		     void *arg);
/* Does the table take keys of key_size and values of val_size bytes
 * (val_size UINT32_MAX: any)? */
bool innet_table_sizes_match(const struct innet_table *t, uint32_t key_size, uint32_t val_size);
void innet_table_geometry(const struct innet_table *t, uint32_t *n_slots, uint32_t *slot_size);
/* Move an empty table onto memory someone else provides (the XDP target's
 * maps): n_slots * slot_size bytes of zeroed slots, n_slots u32 locks, the
 * counters. 0, or -EBUSY if the table has entries. */
struct innet_table_shared;
int innet_table_rehome(struct innet_table *t, void *slots, void *locks, struct innet_table_shared *sh);

/* worker.c */
int innet_worker_init(struct innet_switch *sw, struct innet_worker *w, uint32_t id);
void innet_worker_fini(struct innet_worker *w);
void *innet_worker_main(void *arg);
/* Hand pkt to the control plane's on_cpu through w's ring (counted). */
void innet_worker_punt(struct innet_worker *w, struct innet_cp *cp, const struct innet_pkt *pkt);
/* Queue a copy of data (emit / control-plane send) on w; 0 or -1. */
int innet_worker_send_copy(struct innet_worker *w, struct innet_cp *cp, const struct innet_out *out,
			   bool is_group, const void *data, uint32_t len, uint16_t src_udp);
void innet_worker_flush(struct innet_worker *w);
/* Run a packet the XDP program handed over with innet_hand_off through its
 * program on w (the state already in w's scratch; INNET_PKT_F_RESUMED set):
 * the handler, the verdict, the counters (not the receive counts: XDP's). */
void innet_worker_resume(struct innet_worker *w, uint32_t prog, struct innet_pkt *pkt);
void innet_worker_set_now(struct innet_worker *w);

/* timer.c */
int innet_timerq_create(struct innet_switch *sw);
void innet_timerq_destroy(struct innet_switch *sw);
int innet_timerq_start(struct innet_switch *sw);
void innet_timerq_stop(struct innet_switch *sw);
int innet_timerq_arm(struct innet_switch *sw, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns,
		     uint64_t arg);
int innet_timerq_push(struct innet_switch *sw, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns);

/* link.c: link emulation. */
enum innet_link_fate {
	INNET_LINK_PASS,       /* send / process now (*copies times: 2 = duplicated) */
	INNET_LINK_LOSE,       /* drop */
	INNET_LINK_HOLD,       /* copy into the held queue until *due_ns (*copies times) */
};
#define INNET_LINK_F_DUP      0x1u  /* send/process twice */
#define INNET_LINK_F_REORDER  0x2u  /* held back so later packets overtake it */
enum innet_link_fate innet_link_decide(const struct innet_link_conf *lc, struct innet_link_state *ls,
				       uint64_t now_ns, uint64_t *due_ns, uint32_t *flags);
int innet_link_hold(struct innet_link_state *ls, uint64_t due_ns, const void *data, uint32_t len,
		    int fd, uint16_t port, uint16_t prog, uint16_t dst_udp, const struct sockaddr_in *addr);
/* The earliest due held packet if due by now_ns (caller frees it), or NULL. */
struct innet_held *innet_link_pop_due(struct innet_link_state *ls, uint64_t now_ns);
uint64_t innet_link_next_due(const struct innet_link_state *ls); /* UINT64_MAX if none */
void innet_link_state_fini(struct innet_link_state *ls);
/* The link has fault settings (loss, dup, reorder, delay or jitter)... */
bool innet_link_faulty(const struct innet_link_conf *lc);
/* topology.c: free the args of a switch's program configurations. */
void innet_topology_progs_release(struct innet_prog_conf *progs, uint32_t n);
/* ... and they apply on this switch's engine (egress or ingress). */
bool innet_link_active(const struct innet_link_conf *lc);
/* The settings as JSON, the one rendering (ctl info, fabric show --json,
 * fabric.json): {loss, dup, reorder, delay_us, jitter_us, on_egress,
 * on_ingress, seed, active}. NULL when out of memory. */
struct json_t;
struct json_t *innet_link_json(const struct innet_link_conf *lc);

/* control.c: the control thread (started by innet_switch_start) serves the
 * control socket and, whenever sw->cpu_wake_fd is readable, calls
 * innet_cpu_drain() to run on_cpu for punted packets. */
int innet_control_start(struct innet_switch *sw);
void innet_control_stop(struct innet_switch *sw);
/* Answer one control request line (len bytes, no newline) as the control
 * socket would; returns malloc'd JSON text, or NULL when out of memory.
 * For tests and fuzzing. */
char *innet_control_request(struct innet_switch *sw, const char *line, size_t len);
/* The same on a line the caller owns (len bytes, modified in place; the
 * byte after it must be writable): the response object (ctl_request.c). */
struct json_t;
struct json_t *innet_control_run(struct innet_switch *sw, char *line, size_t len);
/* worker.c: run on_cpu for every queued punted packet (control thread). */
void innet_cpu_drain(struct innet_switch *sw);

/* capture.c: called by workers for every packet on a port being captured. */
struct innet_capture;
void innet_capture_packet(struct innet_switch *sw, uint32_t port, bool egress,
			  const struct sockaddr_in *src, const struct sockaddr_in *dst, const void *data,
			  uint32_t len);
void innet_capture_close_all(struct innet_switch *sw);


#include <string.h>
/* Seqlock data copies (tables, groups): bytes that readers may race with, as atomics (release on
 * store, acquire on load; plain moves on x86), 8 bytes at a time where
 * aligned: a reader that sees any byte of a new write also sees the odd seq
 * the writer set before it, and neither the C11 memory model nor
 * ThreadSanitizer sees a data race. */
static inline void innet_shared_load(void *dst_, const void *src_, uint32_t n)
{
	uint8_t *dst = dst_;
	const uint8_t *src = src_;
	uint32_t i = 0;
	for (; i < n && ((uintptr_t)(src + i) & 7); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
	for (; i + 8 <= n; i += 8) {
		uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(src + i), __ATOMIC_ACQUIRE);
		memcpy(dst + i, &w, 8);
	}
	for (; i < n; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_ACQUIRE);
}

static inline void innet_shared_store(void *dst_, const void *src_, uint32_t n)
{
	uint8_t *dst = dst_;
	const uint8_t *src = src_;
	uint32_t i = 0;
	for (; i < n && ((uintptr_t)(dst + i) & 7); i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, src + i, 8);
		__atomic_store_n((uint64_t *)(void *)(dst + i), w, __ATOMIC_RELEASE);
	}
	for (; i < n; i++)
		__atomic_store_n(&dst[i], src[i], __ATOMIC_RELEASE);
}

#endif /* INNET_SWITCH_PVT_H */
