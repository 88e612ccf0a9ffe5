/*
 * engine/target.h — the target interface: how the engine-neutral runtime
 * drives whatever runs packets through programs, as DPDK's generic ethdev
 * layer drives a NIC only through its driver's struct eth_dev_ops.
 *
 *   engine-neutral runtime    src/engine    switch lifecycle (switch.c), state: registers,
 *                                           tables, groups, timer slots, config (decl.c, cp.c,
 *                                           table.c), the program registry, routes
 *                             src/control   control socket, ctl commands, metrics, capture,
 *                                           the resource model
 *                             src/topology  topology files, netns fabrics
 *          │
 *          │  sw->target.ops->  create · start · stop · destroy        (lifecycle)
 *          │                    group_sync · send · count_drop ·       (control plane)
 *          │                    cpu_drain · inject
 *          │                    prog_stats · port_stats · stats_reset · (observability)
 *          │                    prog_info
 *          │
 *          ├── "udp"  src/targets/user   the user-space engine: worker threads over UDP
 *          │                             and AF_PACKET sockets, the timer thread, the
 *          │                             to-CPU rings, link emulation
 *          └── "xdp"  src/targets/xdp    each program's eBPF object on the port devices,
 *                │                       the maps as the program's state; for what eBPF
 *                │                       cannot finish it stacks on a "udp" instance of
 *                │                       its own (created, started, stopped through
 *                │                       that target's ops) and gives it work only
 *                └─▶ the hand-off API    innet_handoff_*: send, to the CPU, arm a timer,
 *                    (below)             flush — carried out by the user-space engine
 *
 * The engine never asks which target it drives: it calls the ops of the one
 * the configuration names (struct innet_switch_conf.target) and reads what
 * a target is through its public description (innet_target_info,
 * innet/switch.h: the topology and the metrics use that, not a comparison).
 *
 * Adding a target: a folder src/targets/NAME/ with a struct innet_target_ops
 * filled in, and one line in src/targets/targets.c (the registration). The
 * user-space engine is a target like any other; a target that needs user
 * space for some packets stacks on it as XDP does.
 *
 * What a target may use of the engine: the switch's configuration and
 * program instances (engine/switch_pvt.h: struct innet_switch, struct
 * innet_cp — read-only except the state a target moves onto memory of its
 * own: innet_state_reg_release, innet_table_rehome, cp->conf, cp->timers,
 * cp->serial_lock), the control thread's wake-up for packets queued for
 * on_cpu (sw->cpu_wake_fd), capture (innet_capture_packet) — and, for a
 * target stacked on the user-space engine, the hand-off API below.
 *
 * Lifecycle (innet/switch.h): create builds everything and attaches or runs
 * nothing; start makes the switch handle packets; stop makes it handle none
 * (threads joined, programs detached); start again works; destroy frees.
 *
 *   innet_switch_create   setup() of every program → ops->create → init() of every program
 *   innet_switch_start    ops->start → the control thread
 *   innet_switch_stop     the control thread → ops->stop
 *   innet_switch_destroy  stop → ops->destroy → the programs' state
 */
#ifndef INNET_ENGINE_TARGET_H
#define INNET_ENGINE_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/resources.h"
#include "innet/switch.h"

struct innet_target_ops {
	struct innet_target_info info;   /* name, id, what it needs (innet/switch.h) */

	/* After every program's setup (its state declared and allocated),
	 * before any init: build what runs the programs (threads not started,
	 * nothing attached) and move state where the executor reads it. *priv:
	 * the target's own state, passed to every other op. 0 or -errno with a
	 * message in err; on failure the target has freed what it built. */
	int (*create)(struct innet_switch *sw, void **priv, char *err, size_t errlen);
	/* Handle packets from now on. 0 or -errno with a message in err; on
	 * failure nothing runs. */
	int (*start)(void *priv, char *err, size_t errlen);
	/* Handle none from now on: threads joined, programs detached
	 * (idempotent; a stopped switch may start again). */
	void (*stop)(void *priv);
	/* Free everything create built (stopped first). */
	void (*destroy)(void *priv);

	/* Control plane (innet/switch.h's innet_cp_* calls, after the engine's
	 * checks). A multicast group of cp changed: mirror it. */
	int (*group_sync)(void *priv, struct innet_cp *cp, uint32_t group,
			  const struct innet_member *m, uint32_t n);
	/* innet_cp_send: send data out as innet_emit would. 0 or -errno. */
	int (*send)(void *priv, struct innet_cp *cp, const struct innet_out *out, bool is_group,
		    const void *data, uint32_t len);
	/* innet_cp_count_drop: count one drop of cp under a valid reason. */
	void (*count_drop)(void *priv, struct innet_cp *cp, unsigned reason);
	/* The control thread saw sw->cpu_wake_fd: run on_cpu for every packet
	 * the target queued for the CPU (on the calling thread). */
	void (*cpu_drain)(void *priv);
	/* innet_switch_inject, checked and serialised by the engine, with res's
	 * outputs and cpu_drop_reason zeroed. 0 or -errno. */
	int (*inject)(void *priv, uint16_t port, uint16_t dst_udp, const struct innet_addr *src,
		      const void *data, uint32_t len, struct innet_inject_result *res);
	/* Tests (optional, NULL: none): run the target's data path `runs` times
	 * on one datagram on the calling thread, unserialised — several threads
	 * at once, against writers of the state (the contention tests). The
	 * verdicts show in the counters only. 0, or -EINVAL (not a datagram the
	 * target runs), -errno. */
	int (*test_run)(void *priv, uint16_t port, uint16_t dst_udp, const struct innet_addr *src,
			const void *data, uint32_t len, uint32_t runs);

	/* Observability: add the target's counters to out (zeroed by the
	 * engine); zero them. */
	void (*prog_stats)(void *priv, struct innet_cp *cp, struct innet_prog_stats *out);
	void (*port_stats)(void *priv, uint32_t port, struct innet_port_stats *out);
	void (*stats_reset)(void *priv);
	/* The eBPF column of the resource report, measured from what runs cp
	 * (e zeroed and its userspace reason filled by the engine). NULL: the
	 * target runs no eBPF. */
	void (*prog_info)(void *priv, struct innet_cp *cp, struct innet_res_ebpf *e);
};

/* A switch's target: its ops and its own state. */
struct innet_target_dev {
	const struct innet_target_ops *ops;
	void *priv;
};

/* src/targets/targets.c: the registered target of id t, or NULL. */
const struct innet_target_ops *innet_target_ops(enum innet_target t);

/* ------------------------------------------------------------------------ */
/* The hand-off API: how a target stacked on the user-space engine gives it  */
/* what its own executor could not finish (src/targets/user/handoff.c).      */
/*                                                                            */
/*   XDP's ring thread          innet_handoff_begin(h)                        */
/*     for each record:         innet_handoff_send / _to_cpu / _timer / _resume */
/*                              innet_handoff_flush(h, NULL)   the sends go out */
/*   XDP's inject               ... innet_handoff_flush(h, res) recorded in res */
/*                                                                            */
/* One struct innet_handoff is one thread's seat in the engine (its transmit  */
/* queue, its to-CPU ring, its counters): one thread uses it at a time.       */

struct innet_user;      /* a user-space engine (the "udp" target's priv) */
struct innet_handoff;   /* a seat in it */

enum innet_handoff_seat {
	INNET_HANDOFF_RING,     /* a thread of the stacked target's own (XDP's ring thread) */
	INNET_HANDOFF_INJECT,   /* innet_switch_inject (the engine serialises it) */
};
struct innet_handoff *innet_handoff_seat(struct innet_user *u, enum innet_handoff_seat seat);
/* Before a batch: the time its sends and packets are stamped with. */
void innet_handoff_begin(struct innet_handoff *h);
/* Send a copy of data as innet_emit would (counted as cp's tx_pkts; a
 * verdict that cannot be carried out is a counted drop). 0 or -errno. */
int innet_handoff_send(struct innet_handoff *h, struct innet_cp *cp, const struct innet_out *out,
		       bool is_group, const void *data, uint32_t len);
/* Queue pkt for cp's on_cpu (the control thread's, or the injection's);
 * counted as a TO_CPU verdict, or a cpu_queue_full drop. */
void innet_handoff_to_cpu(struct innet_handoff *h, struct innet_cp *cp, const struct innet_pkt *pkt);
/* cp's timer `timer` was armed for deadline_ns in its slot (by the stacked
 * target, on the shared slot): make the timer thread fire it then. 0 or
 * -ENOSPC (the timer queue is full: counted). */
int innet_handoff_timer(struct innet_handoff *h, struct innet_cp *cp, uint32_t timer,
			uint64_t deadline_ns);
/* Run pkt through cp's handler on from where the stacked target's handler
 * handed it over (innet_hand_off): state_len bytes of the handler's state
 * go to the start of the seat's innet_scratch(), INNET_PKT_F_RESUMED is set,
 * and the verdict and counters are the engine's (not the receive counts:
 * the stacked target counted the packet in). -EINVAL when state_len is more
 * than the scratch holds. */
int innet_handoff_resume(struct innet_handoff *h, struct innet_cp *cp, struct innet_pkt *pkt,
			 const void *state, uint32_t state_len);
/* The verdict and drop reason of the last packet resumed on h since
 * innet_handoff_begin (INNET_DROP, 0 if none). */
void innet_handoff_verdict(const struct innet_handoff *h, enum innet_action *action, uint16_t *reason);
/* Carry out what was handed over: send it (res NULL), or record it in res
 * (an injection; on a switch not started, on_cpu then runs for what was
 * queued for it, as innet_switch_inject documents). */
void innet_handoff_flush(struct innet_handoff *h, struct innet_inject_result *res);

#endif /* INNET_ENGINE_TARGET_H */
