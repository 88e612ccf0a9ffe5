/*
 * innet/program.h — the data-plane program API.
 *
 * A data-plane program is a pure function over one packet and the state the
 * program declared up front (register arrays, exact-match tables, multicast
 * groups, timers). The runtime allocates that state, calls the handler once
 * per packet, and carries out the verdict the handler returns.
 *
 * Handlers are restricted C: no allocation, no system calls, no locks, no
 * unbounded loops (loop bounds are compile-time constants or declared sizes),
 * and every access to state goes through the helpers below. The helpers count
 * what a packet uses (register operations, table lookups, ALU operations,
 * emitted packets), which the resource model (innet/resources.h) compares
 * against Tofino and Trio profiles.
 *
 * Two execution models, chosen per program (struct innet_program.model):
 *
 *   INNET_MODEL_PISA  match-action pipeline (Tofino/RMT). The handler may only
 *                     modify and route the packet in hand. At most
 *                     pisa_reg_ops_per_pass register operations per pass; to do
 *                     more, return INNET_RECIRCULATE. innet_emit, timers and
 *                     data-plane table writes are refused (the packet is
 *                     dropped with INNET_DROP_MODEL_VIOLATION).
 *   INNET_MODEL_TRIO  run-to-completion threads (Juniper Trio). State is shared
 *                     across worker threads through atomic read-modify-write
 *                     (the RMW engine); the handler may emit new packets, write
 *                     tables and arm timers whose callbacks run on the timer
 *                     thread (Trio's timer threads).
 *
 * Concurrency: unless a program sets INNET_PROG_SERIAL, its packets are
 * handled by several worker threads at once; packets of one flow (same source
 * address and port, same destination port) always reach the same worker, in
 * order. Register helpers are atomic per element; tables are safe for
 * concurrent lookups and writes. A SERIAL program's packets are all handled by
 * one worker thread (its timers still run on the timer thread).
 *
 * A handler fault (register index out of range, budget exceeded, a PISA
 * program emitting) does not crash anything: the helper records the fault,
 * returns a neutral value, and the runtime drops the packet with that reason
 * after the handler returns.
 */
#ifndef INNET_PROGRAM_H
#define INNET_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_LIKELY(x)   __builtin_expect(!!(x), 1)
#define INNET_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Largest packet (UDP payload) the runtime carries, and the headroom in front
 * of it that innet_pkt_push() can grow into. */
#define INNET_PKT_MAX       9216u    /* a jumbo frame's payload (MTU 9000 and some) */
#define INNET_PKT_HEADROOM  64u

/* Limits on declarations. */
#define INNET_MAX_REGS      32u
#define INNET_MAX_TABLES    8u
#define INNET_MAX_GROUPS    1024u
#define INNET_MAX_GROUP_MEMBERS 64u
#define INNET_MAX_TIMERS    (1u << 20)
#define INNET_MAX_PORTS     64u
#define INNET_MAX_PROG_UDP  4096u    /* UDP ports one program may bind (ranges included) */
#define INNET_MAX_DROP_REASONS 32u   /* program-defined reasons */
#define INNET_MAX_RECIRC    16u      /* hard cap on recirculations per packet */

enum innet_model {
	INNET_MODEL_PISA = 0,
	INNET_MODEL_TRIO = 1,
};

/* What the handler asks the runtime to do with the packet in hand. The
 * arguments (port, group, address) travel in pkt->out; the inline verdict
 * helpers below fill them in. */
enum innet_action {
	INNET_DROP = 0,        /* drop; reason in pkt->out.reason */
	INNET_FORWARD,         /* send out of pkt->out.port to out.ip:out.udp
	                        * (0 = the port's peer / the packet's dst UDP port) */
	INNET_MULTICAST,       /* send a copy to every member of pkt->out.group */
	INNET_REFLECT,         /* send back to the sender, from the ingress port */
	INNET_RECIRCULATE,     /* run the pipeline again (dispatch by pkt->dst_udp) */
	INNET_TO_CPU,          /* hand to the program's control-plane callback */
	INNET_CONSUMED,        /* the handler is done with it (Trio: it emitted
	                        * what it needed); counted, not a drop */
	INNET_ACTION_COUNT
};

/*
 * Drop reasons. The runtime's own come first; a program's declared reasons
 * (struct innet_program.drop_reasons) are numbered from INNET_DROP_PROGRAM
 * on: reason INNET_DROP_PROGRAM + i is drop_reasons[i].
 */
enum innet_drop_reason {
	INNET_DROP_NONE = 0,
	INNET_DROP_PROGRAM_VERDICT,  /* handler returned INNET_DROP without a reason */
	INNET_DROP_NO_PROGRAM,       /* no program bound to the destination UDP port */
	INNET_DROP_TRUNCATED,        /* datagram larger than INNET_PKT_MAX */
	INNET_DROP_REG_OOB,          /* register index out of range */
	INNET_DROP_REG_BUDGET,       /* PISA: too many register ops in one pass */
	INNET_DROP_MODEL_VIOLATION,  /* PISA program used a Trio-only facility */
	INNET_DROP_RECIRC_BUDGET,    /* recirculated more than allowed */
	INNET_DROP_BAD_PORT,         /* verdict names a port that does not exist */
	INNET_DROP_BAD_GROUP,        /* verdict names an unknown or empty group */
	INNET_DROP_NO_PEER,          /* forward to a port with no peer and no address */
	INNET_DROP_BAD_VERDICT,      /* handler returned an unknown action */
	INNET_DROP_PKT_BOUNDS,       /* push/pull/resize beyond the buffer */
	INNET_DROP_TX_FULL,          /* emit/tx queue full */
	INNET_DROP_CPU_QUEUE_FULL,   /* control-plane queue full */
	INNET_DROP_LINK_LOSS,        /* link emulation dropped it */
	INNET_DROP_TX_ERROR,         /* the kernel refused to send it */
	INNET_DROP_FRAME_TO_UDP_PORT,    /* a raw frame sent to a UDP port */
	INNET_DROP_DATAGRAM_TO_RAW_PORT, /* a UDP datagram sent to a raw port */
	INNET_DROP_NO_UDP_SOCKET,    /* datagram from a program that binds no UDP port */
	INNET_DROP_RUNTIME_COUNT,
	INNET_DROP_PROGRAM = 32      /* first program-defined reason */
};

/* IPv4 address and UDP port, both in host byte order. */
struct innet_addr {
	uint32_t ip;
	uint16_t udp;
};

/* Where a verdict or an emitted packet goes. */
struct innet_out {
	uint16_t port;     /* egress port index */
	uint16_t group;    /* multicast group (INNET_MULTICAST) */
	uint32_t ip;       /* destination IPv4 (host order); 0 = the port's peer */
	uint16_t udp;      /* destination UDP port; 0 = the packet's dst_udp */
	uint16_t src_udp;  /* send from this local UDP port of the program; 0 = dst_udp */
	uint16_t reason;   /* drop reason for INNET_DROP */
};

/* The packet in hand. data points into a buffer with INNET_PKT_HEADROOM bytes
 * in front of it and room up to INNET_PKT_MAX behind it. */
struct innet_pkt {
	uint8_t *data;            /* first byte of the UDP payload (raw: of the frame) */
	uint32_t len;             /* payload bytes (raw: frame bytes) */
	uint16_t in_port;         /* ingress port index */
	uint16_t dst_udp;         /* destination UDP port (selects the program) */
	struct innet_addr src;    /* who sent it */
	uint8_t recirc;           /* recirculations so far */
	uint8_t flags;            /* INNET_PKT_F_* */
	uint16_t meta16;          /* scratch carried across recirculation */
	uint32_t meta32[4];       /* scratch carried across recirculation */
	struct innet_out out;     /* verdict arguments */
	uint8_t *buf_start;       /* buffer bounds (runtime use) */
	uint8_t *buf_end;
};

#define INNET_PKT_F_EMULATED 0x01 /* delivered by link emulation (dup/reorder) */
#define INNET_PKT_F_RAW      0x02 /* a whole Ethernet frame from a raw port (data = MAC header) */

/* A register array. Elements of 1, 2, 4 or 8 bytes support the atomic RMW
 * helpers; any other width is a byte blob (innet_reg_read_bytes/write_bytes). */
struct innet_reg {
	uint8_t *mem;        /* count * width bytes, page-aligned, zeroed */
	uint32_t width;      /* bytes per element */
	uint32_t count;      /* elements */
	const char *name;
};

struct innet_table;    /* exact-match table (opaque) */
struct innet_cp;       /* a program instance on a switch (opaque; innet/switch.h) */
struct innet_worker;   /* the thread running the handler (opaque) */

/* Per-packet accounting, filled in by the helpers. */
struct innet_usage {
	uint32_t reg_ops;     /* register operations (stateful ALU) this pass */
	uint32_t table_ops;   /* table lookups/writes this pass */
	uint32_t alu_ops;     /* stateless ALU operations reported by innet_alu() */
	uint32_t emitted;     /* packets emitted by innet_emit() */
};

/* The handler's view of its program's state, one per (worker, program). */
struct innet_ctx {
	struct innet_reg *regs;          /* declared register arrays, by id */
	struct innet_table **tables;     /* declared tables, by id */
	void *priv;                      /* the program's config from setup (read-only here) */
	uint64_t now_ns;                 /* CLOCK_MONOTONIC at the start of the batch */
	uint64_t rng;                    /* per-worker PRNG state (innet_random) */
	struct innet_usage use;          /* this pass */
	uint32_t reg_ops_budget;         /* per pass (PISA), or UINT32_MAX */
	uint16_t n_regs;
	uint16_t n_tables;
	uint16_t n_groups;
	uint16_t n_ports;
	uint8_t model;                   /* enum innet_model */
	uint8_t in_timer;                /* running a timer callback */
	uint16_t fault;                  /* first fault this pass (drop reason) */
	struct innet_cp *prog;           /* runtime use */
	struct innet_worker *worker;     /* runtime use */
};

/* ------------------------------------------------------------------------ */
/* Verdict helpers: fill pkt->out and return the action.                     */

static inline enum innet_action innet_drop(struct innet_pkt *p, unsigned reason)
{
	p->out.reason = (uint16_t)reason;
	return INNET_DROP;
}

static inline enum innet_action innet_forward(struct innet_pkt *p, uint16_t port)
{
	p->out.port = port;
	p->out.ip = 0;
	p->out.udp = 0;
	return INNET_FORWARD;
}

/* Forward out of `port` to an explicit address (ip/udp in host order). */
static inline enum innet_action innet_forward_to(struct innet_pkt *p, uint16_t port,
						 uint32_t ip, uint16_t udp)
{
	p->out.port = port;
	p->out.ip = ip;
	p->out.udp = udp;
	return INNET_FORWARD;
}

static inline enum innet_action innet_multicast(struct innet_pkt *p, uint16_t group)
{
	p->out.group = group;
	return INNET_MULTICAST;
}

static inline enum innet_action innet_reflect(struct innet_pkt *p)
{
	return INNET_REFLECT;
}

static inline enum innet_action innet_recirculate(struct innet_pkt *p)
{
	return INNET_RECIRCULATE;
}

static inline enum innet_action innet_to_cpu(struct innet_pkt *p)
{
	return INNET_TO_CPU;
}

/* ------------------------------------------------------------------------ */
/* Packet buffer helpers. Each returns 0 or -1 (and faults the packet).      */

void innet__fault(struct innet_ctx *ctx, unsigned reason);

/* Grow the front by n bytes (prepend a header). */
static inline int innet_pkt_push(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n)
{
	if (INNET_UNLIKELY(p->data - n < p->buf_start)) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	p->data -= n;
	p->len += n;
	return 0;
}

/* Remove n bytes from the front. */
static inline int innet_pkt_pull(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n)
{
	if (INNET_UNLIKELY(n > p->len)) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	p->data += n;
	p->len -= n;
	return 0;
}

/* Set the payload length (grow with uninitialised bytes, or trim). */
static inline int innet_pkt_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len)
{
	if (INNET_UNLIKELY(p->data + len > p->buf_end)) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	p->len = len;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Register helpers. `r` is a register id (the program's enum). Each call is  */
/* one stateful ALU operation. Values are the element zero-extended to 64    */
/* bits; stores truncate to the element width. RMW helpers are atomic.       */

static inline struct innet_reg *innet__reg(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	if (INNET_UNLIKELY(++ctx->use.reg_ops > ctx->reg_ops_budget)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return NULL;
	}
	if (INNET_UNLIKELY(r >= ctx->n_regs || idx >= ctx->regs[r].count)) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return NULL;
	}
	return &ctx->regs[r];
}

#define INNET__REG_RMW(ctx, r, idx, op, v)                                              \
	({                                                                              \
		struct innet_reg *reg_ = innet__reg((ctx), (r), (idx));                 \
		uint64_t old_ = 0;                                                      \
		if (INNET_LIKELY(reg_ != NULL)) {                                       \
			void *p_ = reg_->mem + (size_t)(idx) * reg_->width;             \
			switch (reg_->width) {                                          \
			case 8: old_ = op((uint64_t *)p_, (uint64_t)(v), __ATOMIC_SEQ_CST); break; \
			case 4: old_ = op((uint32_t *)p_, (uint32_t)(v), __ATOMIC_SEQ_CST); break; \
			case 2: old_ = op((uint16_t *)p_, (uint16_t)(v), __ATOMIC_SEQ_CST); break; \
			case 1: old_ = op((uint8_t *)p_, (uint8_t)(v), __ATOMIC_SEQ_CST); break;   \
			default: innet__fault((ctx), INNET_DROP_REG_OOB); break;        \
			}                                                               \
		}                                                                       \
		old_;                                                                   \
	})

/* Read element idx of register r. */
static inline uint64_t innet_reg_read(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return 0;
	void *p = reg->mem + (size_t)idx * reg->width;
	switch (reg->width) {
	case 8: return __atomic_load_n((uint64_t *)p, __ATOMIC_ACQUIRE);
	case 4: return __atomic_load_n((uint32_t *)p, __ATOMIC_ACQUIRE);
	case 2: return __atomic_load_n((uint16_t *)p, __ATOMIC_ACQUIRE);
	case 1: return __atomic_load_n((uint8_t *)p, __ATOMIC_ACQUIRE);
	}
	innet__fault(ctx, INNET_DROP_REG_OOB);
	return 0;
}

/* Write element idx of register r. */
static inline void innet_reg_write(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return;
	void *p = reg->mem + (size_t)idx * reg->width;
	switch (reg->width) {
	case 8: __atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE); return;
	case 4: __atomic_store_n((uint32_t *)p, (uint32_t)v, __ATOMIC_RELEASE); return;
	case 2: __atomic_store_n((uint16_t *)p, (uint16_t)v, __ATOMIC_RELEASE); return;
	case 1: __atomic_store_n((uint8_t *)p, (uint8_t)v, __ATOMIC_RELEASE); return;
	}
	innet__fault(ctx, INNET_DROP_REG_OOB);
}

/* Atomic add (wraps at the element width); returns the value before. */
static inline uint64_t innet_reg_fetch_add(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return INNET__REG_RMW(ctx, r, idx, __atomic_fetch_add, v);
}

/* Atomic bitwise or; returns the value before. */
static inline uint64_t innet_reg_fetch_or(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return INNET__REG_RMW(ctx, r, idx, __atomic_fetch_or, v);
}

/* Atomic bitwise and; returns the value before. */
static inline uint64_t innet_reg_fetch_and(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return INNET__REG_RMW(ctx, r, idx, __atomic_fetch_and, v);
}

/* Atomic exchange; returns the value before. */
static inline uint64_t innet_reg_swap(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return INNET__REG_RMW(ctx, r, idx, __atomic_exchange_n, v);
}

/* Atomic compare-and-swap: if the element equals *expected, store desired and
 * return true; otherwise load the current value into *expected, return false. */
static inline bool innet_reg_cas(struct innet_ctx *ctx, unsigned r, uint32_t idx,
				 uint64_t *expected, uint64_t desired)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return false;
	void *p = reg->mem + (size_t)idx * reg->width;
	bool ok = false;
	switch (reg->width) {
#define INNET__CAS(T)                                                                   \
	{                                                                               \
		T e_ = (T)*expected;                                                    \
		ok = __atomic_compare_exchange_n((T *)p, &e_, (T)desired, false,        \
						 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);   \
		*expected = e_;                                                         \
		break;                                                                  \
	}
	case 8: INNET__CAS(uint64_t)
	case 4: INNET__CAS(uint32_t)
	case 2: INNET__CAS(uint16_t)
	case 1: INNET__CAS(uint8_t)
#undef INNET__CAS
	default: innet__fault(ctx, INNET_DROP_REG_OOB); break;
	}
	return ok;
}

/* Atomic unsigned maximum: element = max(element, v); returns the value before.
 * One register operation, whether or not it stores. */
static inline uint64_t innet_reg_fetch_max(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return 0;
	void *p = reg->mem + (size_t)idx * reg->width;
	switch (reg->width) {
#define INNET__MAX(T)                                                                   \
	{                                                                               \
		T cur_ = __atomic_load_n((T *)p, __ATOMIC_ACQUIRE);                     \
		while (cur_ < (T)v && !__atomic_compare_exchange_n((T *)p, &cur_, (T)v, true, \
								   __ATOMIC_SEQ_CST,    \
								   __ATOMIC_ACQUIRE))   \
			;                                                               \
		return cur_;                                                            \
	}
	case 8: INNET__MAX(uint64_t)
	case 4: INNET__MAX(uint32_t)
	case 2: INNET__MAX(uint16_t)
	case 1: INNET__MAX(uint8_t)
#undef INNET__MAX
	}
	innet__fault(ctx, INNET_DROP_REG_OOB);
	return 0;
}

/* Copy the n-byte element idx of a blob register to dst (n <= width). */
void innet_reg_read_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, void *dst, uint32_t n);
/* Copy n bytes from src into element idx of a blob register (n <= width). Not
 * atomic with respect to concurrent writers of the same element: programs that
 * write one element from several workers order them through an RMW register
 * (for example a version or ballot updated with innet_reg_cas) or are SERIAL. */
void innet_reg_write_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, const void *src, uint32_t n);

/* ------------------------------------------------------------------------ */
/* Exact-match tables. Keys and values are byte strings of the declared      */
/* sizes. Lookups are safe against concurrent writers (seqlock per entry).   */

/* Copy the value for key into val; 0 if found, -1 if not. */
int innet_table_lookup(struct innet_ctx *ctx, unsigned t, const void *key, void *val);
/* Insert or replace (Trio only): 0, or -1 when the table is full (counted). */
int innet_table_insert(struct innet_ctx *ctx, unsigned t, const void *key, const void *val);
/* Delete (Trio only): 0, or -1 when absent. */
int innet_table_delete(struct innet_ctx *ctx, unsigned t, const void *key);

/* ------------------------------------------------------------------------ */
/* Trio-only facilities.                                                      */

/* Emit a new packet (copied) to `out` (out->port/ip/udp as for FORWARD, or a
 * group when is_group). Returns 0, or -1 (PISA, or queue full: counted). */
int innet_emit(struct innet_ctx *ctx, const struct innet_out *out, bool is_group,
	       const void *data, uint32_t len);

/* Arm timer `timer` (0..n_timers-1) to call the program's on_timer(ctx,
 * timer, arg) after delay_ns; re-arming replaces the deadline and arg.
 * Returns 0, or -1 (PISA, or bad timer id). */
int innet_timer_arm(struct innet_ctx *ctx, uint32_t timer, uint64_t delay_ns, uint64_t arg);
/* Cancel timer `timer` if armed. */
void innet_timer_cancel(struct innet_ctx *ctx, uint32_t timer);

/* ------------------------------------------------------------------------ */
/* Other helpers.                                                             */

/* Account n stateless ALU operations (the runtime cannot see plain C
 * arithmetic; programs report it so the resource model can check it). */
static inline void innet_alu(struct innet_ctx *ctx, uint32_t n)
{
	ctx->use.alu_ops += n;
}

/* A per-worker pseudo-random 32-bit number (xorshift; not cryptographic). */
static inline uint32_t innet_random(struct innet_ctx *ctx)
{
	uint64_t x = ctx->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	ctx->rng = x;
	return (uint32_t)(x >> 32);
}

/* 64-bit hash of len bytes (xxh3 with seed). */
uint64_t innet_hash(const void *data, size_t len, uint64_t seed);

/* Port count and a port's peer address (0 if none). */
uint32_t innet_port_peer_ip(struct innet_ctx *ctx, uint16_t port);

/* ------------------------------------------------------------------------ */
/* Declaring a program.                                                       */

struct innet_decl;   /* collects declarations during setup (opaque) */
struct innet_args;   /* the program's settings from the topology (opaque) */

/* Declare register array `id` (ids are dense, in order from 0). width is the
 * element size in bytes; 1, 2, 4, 8 allow atomic RMW, others are blobs.
 * Returns 0 or -errno (and the setup fails with a message). */
int innet_decl_reg(struct innet_decl *d, unsigned id, const char *name, uint32_t width, uint32_t count);
/* Declare exact-match table `id` (dense ids from 0). */
int innet_decl_table(struct innet_decl *d, unsigned id, const char *name, uint32_t key_size,
		     uint32_t value_size, uint32_t capacity);
/* Declare the number of multicast groups (ids 0..n-1). */
int innet_decl_groups(struct innet_decl *d, uint32_t n);
/* Declare the number of one-shot timers (ids 0..n-1; Trio only). */
int innet_decl_timers(struct innet_decl *d, uint32_t n);
/* Set the program's private config, passed to handlers as ctx->priv and freed
 * with free() when the program is destroyed. */
void innet_decl_priv(struct innet_decl *d, void *priv);
/* The same, freed with priv_free(priv) instead (a config of several
 * allocations, or shared between instances with a reference count). */
void innet_decl_priv_with(struct innet_decl *d, void *priv, void (*priv_free)(void *priv));
/* The switch the program is being declared on: its fabric node id and its
 * number of ports (to check settings that name ports during setup). */
uint16_t innet_decl_node_id(const struct innet_decl *d);
uint32_t innet_decl_n_ports(const struct innet_decl *d);
/* The UDP ports the instance binds (all of them, ranges expanded, in the
 * order configured), *n set to their count (0 for a raw-only instance). Valid
 * for the instance's lifetime: a program may keep the pointer (for example a
 * load balancer's pool of source ports for out.src_udp). */
const uint16_t *innet_decl_udp(const struct innet_decl *d, uint32_t *n);
/* Fail the setup with a message (printf-style); returns -EINVAL. */
int innet_decl_error(struct innet_decl *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Settings: look up key; if absent, *out = def and 0. Wrong type or out of
 * [min, max] is an error (-EINVAL, with a message recorded for the user).
 * Every key a program does not ask for is reported as unknown. */
int innet_args_u64(struct innet_args *a, const char *key, uint64_t def, uint64_t min,
		   uint64_t max, uint64_t *out);
int innet_args_bool(struct innet_args *a, const char *key, bool def, bool *out);
/* *out points into the args (valid during setup) or is def. */
int innet_args_str(struct innet_args *a, const char *key, const char *def, const char **out);
/* Array of unsigned integers: up to max entries into out, count in *n. */
int innet_args_u64_array(struct innet_args *a, const char *key, uint64_t *out, uint32_t max,
			 uint32_t *n);
/* A structured setting as a jansson value (borrowed; valid during setup), or
 * NULL if absent. For settings the typed getters cannot express. */
struct json_t;
struct json_t *innet_args_json(struct innet_args *a, const char *key);

struct innet_program {
	const char *name;             /* registry name, e.g. "forward" */
	const char *summary;          /* one line for --list-programs */
	enum innet_model model;
	uint32_t flags;               /* INNET_PROG_* */
	/* PISA: register operations allowed per pass (0 = profile default, 48). */
	uint32_t pisa_reg_ops_per_pass;
	/* Bytes of header the parser extracts (checked against the PHV / Trio
	 * local memory by the resource model). */
	uint32_t parse_bytes;
	/* Names of the program's drop reasons; reason INNET_DROP_PROGRAM + i. */
	const char *const *drop_reasons;
	uint32_t n_drop_reasons;

	/* Declare state and read settings. Runs once, before any packet. */
	int (*setup)(struct innet_decl *d, struct innet_args *args);
	/* Initialise state (tables, registers, groups) after allocation; may be
	 * NULL. Control-plane context: may allocate. On failure, return -errno
	 * after innet_cp_init_error() to say why (innet/switch.h). */
	int (*init)(struct innet_cp *cp, void *priv);
	/* The per-packet handler (restricted C). */
	enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt);
	/* Trio: a timer fired (timer thread; restricted C). */
	void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg);
	/* A packet handed to the control plane (INNET_TO_CPU), on the control
	 * thread: ordinary C, may allocate and use the innet_cp_* calls. */
	void (*on_cpu)(struct innet_cp *cp, void *priv, const struct innet_pkt *pkt);
	/* A program-specific control command, `innet ctl prog INSTANCE WORD...`
	 * (control thread, ordinary C; may be NULL). argv holds the words after
	 * the instance name. Fill reply (a JSON object, struct json_t from
	 * jansson) and return 0, or write a message to err and return -1. */
	int (*on_ctl)(struct innet_cp *cp, void *priv, int argc, char **argv,
		      struct json_t *reply, char *err, size_t errlen);
};

#define INNET_PROG_SERIAL 0x1u  /* all packets on one worker thread */

/* The registry of programs compiled into innet (src/programs/registry.c). */
const struct innet_program *innet_program_find(const char *name);
/* NULL-terminated list of all registered programs. */
const struct innet_program *const *innet_program_list(void);

#ifdef __cplusplus
}
#endif
#endif /* INNET_PROGRAM_H */
