/*
 * targets/user/user_pvt.h — the user-space engine's private structures (the
 * "udp" target: src/targets/user/). Shared by its files: user.c (the target's
 * ops: sockets, workers, lifecycle, counters, injection), worker.c (the data
 * plane), timer.c (Trio timers), link.c (link emulation), txring.c (the
 * transmit io_uring), handoff.c (the hand-off API other targets stack on).
 * The engine-neutral runtime never includes it (engine/target.h is how it
 * drives this target).
 *
 * Ownership and threads
 * ---------------------
 *   struct innet_user        the target's state, one per switch (created by
 *    │                       the udp target's create; another target that
 *    │                       stacks on it, XDP, holds one of its own)
 *    ├─ socks[n_socks]       one UDP socket per (port, program, udp[, worker]),
 *    │                       one AF_PACKET socket per (raw port[, worker])
 *    ├─ workers[n_workers+4] data-plane threads, then the timer thread's, the
 *    │                       control thread's, the injector's and the hand-off
 *    │                       thread's own "worker" (tx queue, contexts,
 *    │                       counters); each on its own cache lines
 *    ├─ timerq               Trio timers: arm ring, heap, the timer thread
 *    └─ cpu queue            per-worker SPSC rings of packets for on_cpu
 *
 * Counters live in each worker (no sharing, no atomics on the hot path) and
 * are summed when someone asks (the target's prog_stats). Torn reads of a
 * 64-bit counter cannot happen on x86-64; readers use relaxed atomic loads.
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
#ifndef INNET_USER_PVT_H
#define INNET_USER_PVT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "engine/switch_pvt.h"
#include "engine/target.h"

#define INNET_BURST       32u     /* packets per recvmmsg */
#define INNET_RX_SETS     4u      /* bursts whose sends are flushed together */
#define INNET_TX_MAX      2048u   /* queued sends per worker before a forced flush */
#define INNET_EMIT_MAX    256u    /* emitted packets per worker per burst */
#define INNET_CPU_RING    256u    /* punted packets queued per worker */
#define INNET_BUF_SIZE    (INNET_PKT_HEADROOM + INNET_PKT_MAX)

#define INNET_GSO_SEGS    64u     /* datagrams coalesced into one UDP GSO send */
#define INNET_GSO_BYTES   65000u  /* and at most this many payload bytes */

/* One bound UDP socket, or one AF_PACKET socket of a raw port. */
struct innet_sock {
	int fd;
	uint16_t port;        /* switch port index */
	uint16_t prog;        /* program index */
	uint16_t udp;         /* bound UDP port; 0 for a raw port */
	uint16_t worker;      /* worker that receives on it */
	bool raw;             /* AF_PACKET socket of a raw port */
	_Atomic uint32_t drops_base; /* the kernel's drop count at the last stats reset */
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
	struct innet_user *u;     /* the engine it belongs to */
	uint32_t id;
	pthread_t thread;
	int epfd;
	int wake_fd;             /* eventfd: stop / wake */
	struct innet_ctx *ctx;                 /* [n_progs] */
	struct innet_prog_stats *pstats;       /* [n_progs] */
	struct innet_port_stats *portstats;    /* [n_ports] */
	struct innet_link_state *links;        /* [n_ports] */
	/* The socket to send from, per (port, program, local UDP port): a row
	 * per switch port, and in it each program's slots from its u->txfd_base[prog],
	 * one per bound UDP port in cp->udp order (u->udp_slot maps a UDP
	 * port to its slot):
	 *
	 *   txfd: | port 0: prog0 udp[0..n0) | prog1 udp[0..n1) | ... | port 1: ...
	 *           ^ row = port * u->udp_stride, + u->txfd_base[prog] + slot
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

/* A seat of the hand-off API (engine/target.h): a worker of the engine's own
 * that a stacked target's thread hands work to. */
struct innet_handoff {
	struct innet_worker *w;
};

/* The user-space engine of one switch: the udp target's private state. */
struct innet_user {
	struct innet_switch *sw;
	uint32_t n_workers;                    /* data-plane workers */
	struct innet_worker *workers;          /* n_workers + INNET_EXTRA_WORKERS */
	struct innet_sock *socks;
	uint32_t n_socks;
	uint32_t udp_stride;                   /* UDP ports bound by all programs: a txfd row */
	uint32_t txfd_base[16];                /* per program: its first slot in a txfd row */
	uint32_t serial_worker[16];            /* per SERIAL program: the one worker that polls it */
	uint16_t udp_slot[65536];              /* index of the UDP port in its program's udp[] */
	_Atomic bool gso_off[INNET_MAX_PORTS]; /* the kernel refused a GSO send on the port */
	struct innet_timerq *timerq;
	_Atomic bool stopping;                 /* workers and the timer thread: leave */
	bool started;
	pthread_mutex_t cp_send_lock;          /* recursive: the control worker's tx queue */
	struct innet_handoff seats[2];         /* by enum innet_handoff_seat */
};

/* Per-thread counters: one writer (the owning thread), read by anyone with
 * relaxed loads. A relaxed store of the incremented value costs the same as a
 * plain increment on x86-64 and keeps the contract visible (and TSan quiet). */
#define INNET_STAT_ADD(x, n) __atomic_store_n(&(x), (x) + (n), __ATOMIC_RELAXED)
#define INNET_STAT_INC(x)    INNET_STAT_ADD(x, 1)
#define INNET_STAT_MAX(x, v) do { if ((v) > (x)) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED); } while (0)

#define INNET_TIMER_WORKER(u)    (&(u)->workers[(u)->n_workers])
#define INNET_CONTROL_WORKER(u)  (&(u)->workers[(u)->n_workers + 1])
#define INNET_INJECT_WORKER(u)   (&(u)->workers[(u)->n_workers + 2])
#define INNET_HANDOFF_WORKER(u)  (&(u)->workers[(u)->n_workers + 3]) /* a stacked target's hand-offs */
#define INNET_EXTRA_WORKERS 4u

/* worker.c */
int innet_worker_init(struct innet_user *u, struct innet_worker *w, uint32_t id);
void innet_worker_fini(struct innet_worker *w);
void *innet_worker_main(void *arg);
/* Hand pkt to the control plane's on_cpu through w's ring (counted). */
void innet_worker_punt(struct innet_worker *w, struct innet_cp *cp, const struct innet_pkt *pkt);
/* Queue a copy of data (emit / control-plane send) on w; 0 or -1. */
int innet_worker_send_copy(struct innet_worker *w, struct innet_cp *cp, const struct innet_out *out,
			   bool is_group, const void *data, uint32_t len, uint16_t src_udp);
void innet_worker_flush(struct innet_worker *w);
void innet_worker_set_now(struct innet_worker *w);
/* Run a packet a stacked target handed over with innet_hand_off through its
 * program on w (the state already in w's scratch; INNET_PKT_F_RESUMED set):
 * the handler, the verdict, the counters (not the receive counts: XDP's). */
void innet_worker_resume(struct innet_worker *w, uint32_t prog, struct innet_pkt *pkt);
/* Run on_cpu for every packet waiting in w's cpu ring (the control thread,
 * or an injection on a switch not started). */
void innet_worker_cpu_drain(struct innet_user *u, struct innet_worker *w);
/* Inject one packet through the user-space engine (the target's inject). */
int innet_worker_inject(struct innet_user *u, uint16_t port, uint16_t dst_udp,
			const struct innet_addr *src, const void *data, uint32_t len,
			struct innet_inject_result *res);
/* An injection's sends were recorded in res: on a switch not started, run
 * on_cpu for what it handed over (as the control thread would). */
void innet_worker_inject_on_cpu(struct innet_user *u, struct innet_worker *w,
				struct innet_inject_result *res);

/* timer.c */
int innet_timerq_create(struct innet_user *u);
void innet_timerq_destroy(struct innet_user *u);
int innet_timerq_start(struct innet_user *u);
void innet_timerq_stop(struct innet_user *u);
int innet_timerq_arm(struct innet_user *u, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns,
		     uint64_t arg);
int innet_timerq_push(struct innet_user *u, struct innet_cp *cp, uint32_t timer, uint64_t deadline_ns);

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

#endif /* INNET_USER_PVT_H */
