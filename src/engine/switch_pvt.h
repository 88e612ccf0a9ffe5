/*
 * engine/switch_pvt.h — the engine-neutral runtime's private structures: a
 * switch, its ports and its program instances with their state. Shared by
 * the engine's files (switch.c, decl.c, cp.c, table.c) and the targets that
 * implement engine/target.h (src/targets/NAME). The control part sees a
 * switch through innet/switch.h and the narrow engine/switch_ctl.h; the
 * topology, through innet/switch.h alone. Not installed; programs never
 * see it.
 *
 * Ownership and threads
 * ---------------------
 *   struct innet_switch      built by the caller's thread at create time;
 *    ├─ ports[n_ports]       read-only after create (capture: capture_lock)
 *    ├─ progs[n_progs]       struct innet_cp: declarations, state memory,
 *    │   ├─ regs[]           register arrays   (shared by all threads: atomics)
 *    │   ├─ tables[]         exact-match tables (seqlock per entry)
 *    │   ├─ groups[]         multicast groups   (seqlock per group, cp writes)
 *    │   └─ timers[]         one-shot timers    (atomic deadline/arg)
 *    ├─ target               what runs the programs: its ops and own state
 *    │                       (engine/target.h; the user-space engine's are
 *    │                       targets/user/user_pvt.h)
 *    └─ control              the control thread (src/control/control.c)
 *
 * The state is the engine's: whichever target runs the programs reads and
 * writes the same bytes (a target may move them onto memory its executor
 * maps, as XDP does with BPF maps, before the programs' init runs).
 */
#ifndef INNET_SWITCH_PVT_H
#define INNET_SWITCH_PVT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "innet/switch.h"
#include "engine/target.h"

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
	 * (innet_decl_datapath: built outside innet, or at run time) */
	enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt);
	void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg);
	void *bpf_obj;                        /* its own eBPF object (malloc'd bytes), or NULL */
	size_t bpf_len;
	bool own_dp;                          /* innet_decl_datapath was called */
	struct innet_switch *sw;
	uint32_t index;                       /* in sw->progs */
	uint16_t *udp;                        /* [n_udp] bound UDP ports (NULL if none) */
	uint32_t n_udp;
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
	_Atomic uint32_t *serial_lock;        /* SERIAL on the XDP target: the lock the eBPF
	                                       * handler takes too (innet_tmeta); else NULL */
	pthread_mutex_t cp_lock;              /* serialises control-plane writers */
};

struct innet_port {
	struct innet_port_conf conf;
	struct sockaddr_in peer;              /* peer address, udp filled per packet */
	_Atomic(struct innet_capture *) capture;
};


struct innet_switch {
	struct innet_switch_conf conf;
	struct innet_port ports[INNET_MAX_PORTS];
	uint32_t n_ports;
	struct innet_cp progs[16];
	uint32_t n_progs;
	uint8_t udp_to_prog[65536];            /* program index + 1, 0 = none */
	int32_t raw_prog;                      /* the raw program's index, or -1 */
	uint32_t n_raw_ports;
	struct innet_target_dev target;            /* what runs the programs (engine/target.h) */
	bool target_created;                   /* target.ops->create succeeded */
	struct innet_control *control;
	_Atomic bool running;
	bool started;
	int cpu_wake_fd;                       /* eventfd: packets queued for on_cpu */
	pthread_mutex_t capture_lock;          /* capture start/stop and file writes */
	pthread_mutex_t inject_lock;           /* serialises innet_switch_inject */
	char *init_err;                        /* during create: the caller's message buffer */
	size_t init_errlen;
};

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
/* The eBPF object of instance cp: its own (innet_decl_datapath; described in
 * *own), or its program's from the build (engine/bpf_objects.h), or NULL
 * (a program of no tree that brought none). */
struct innet_bpf_object;
const struct innet_bpf_object *innet_cp_bpf_object(const struct innet_cp *cp,
						   struct innet_bpf_object *own);

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

/* table.c (the algorithm: engine/table_algo.h) */
struct innet_table *innet_table_create(const char *name, uint32_t key_size, uint32_t value_size,
				       uint32_t capacity);
void innet_table_destroy(struct innet_table *t);
/* The data path's calls: one bounded attempt, an enum innet_table_rc
 * (innet/dp.h): OK, ABSENT, BUSY (a wait ran out: unknown), FULL. */
int innet_table_try_get(struct innet_table *t, const void *key, void *val);
int innet_table_try_put(struct innet_table *t, const void *key, const void *val);
int innet_table_try_del(struct innet_table *t, const void *key);
/* The control plane's: 0, -ENOENT, -ENOSPC, or -EBUSY when a writer stayed
 * in the way for longer than the wait (BUSY is retried, yielding, first). */
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
/* Tests: stop as a writer would in the middle of a write to key's entry —
 * inside its slot (seq left odd), or holding its home lock (lock) — or go on
 * (hold false). 0, -ENOENT (the key is not there), -EBUSY (already so). */
int innet_table_test_hold(struct innet_table *t, const void *key, bool lock, bool hold);
/* Move an empty table onto memory someone else provides (the XDP target's
 * maps): n_slots * slot_size bytes of zeroed slots, n_slots u32 locks, the
 * counters. 0, or -EBUSY if the table has entries. */
struct innet_table_shared;
int innet_table_rehome(struct innet_table *t, void *slots, void *locks, struct innet_table_shared *sh);

/* switch.c: run on_cpu for every packet the target queued for the CPU
 * (the control thread, when sw->cpu_wake_fd fires). */
void innet_switch_cpu_drain(struct innet_switch *sw);

/* The control part's calls (start, stop, capture): control/control.h. */
#include "control/control.h"

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
