/*
 * innet/dp_user.h — the data-path API's primitives on the user-space engine.
 * Included by innet/dp.h; never include it directly.
 *
 * The engine's worker threads call the handler with a struct innet_ctx of
 * their own (one per worker and program) and a packet in one of their
 * receive buffers:
 *
 *   buf_start            data                          data + len      buf_end
 *   | headroom (64 B)    | payload (UDP) or frame (raw)  |   room up to   |
 *                                                           INNET_PKT_MAX
 *
 * Register memory (struct innet_reg.mem) is the same bytes whichever target
 * executes the program: anonymous memory on the user-space target, the
 * mmap'ed BPF array map on the XDP target (docs/xdp.md, "One state"). Element
 * i of a register lives at mem + i * stride: stride = width for elements of
 * 1, 2, 4 or 8 bytes, width rounded up to 8 for wider byte blobs.
 */
#ifndef INNET_DP_USER_H
#define INNET_DP_USER_H

#ifndef INNET_DP_H
#error "include innet/dp.h, not innet/dp_user.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The packet in hand. */
struct innet_pkt {
	uint8_t *data;            /* first byte of the UDP payload (raw: of the frame) */
	uint32_t len;             /* payload bytes (raw: frame bytes); change it only
	                           * with innet_pkt_resize/push/pull */
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

/* A register array. Elements of 1, 2, 4 or 8 bytes support the atomic RMW
 * helpers; any other width is a byte blob (innet_reg_read_bytes/write_bytes). */
struct innet_reg {
	uint8_t *mem;        /* count * stride bytes, page-aligned, zeroed */
	uint32_t width;      /* bytes per element */
	uint32_t stride;     /* bytes between elements (see the file comment) */
	uint32_t count;      /* elements */
	const char *name;
};

struct innet_table;    /* exact-match table (opaque) */
struct innet_cp;       /* a program instance on a switch (opaque; innet/switch.h) */
struct innet_worker;   /* the thread running the handler (opaque) */

/* The handler's view of its program's state, one per (worker, program). */
struct innet_ctx {
	struct innet_reg *regs;          /* declared register arrays, by id */
	struct innet_table **tables;     /* declared tables, by id */
	const void *conf;                /* the config block (read-only here) */
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

void innet__fault(struct innet_ctx *ctx, unsigned reason);

/* ------------------------------------------------------------------------ */
/* The packet.                                                                */

/* A pointer to the n bytes at offset off of the packet, or NULL when the
 * packet is shorter than off + n. The checked accessor for every header. */
static inline void *innet_pkt_ptr(struct innet_pkt *p, uint32_t off, uint32_t n)
{
	if (INNET_UNLIKELY(off > p->len || n > p->len - off))
		return NULL;
	return p->data + off;
}

/* Grow the front by n bytes (prepend a header; at most INNET_PKT_HEADROOM in
 * all). 0, or -1 (and the packet faults with pkt_bounds). */
static inline int innet_pkt_push(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n)
{
	if (INNET_UNLIKELY(n > (uint32_t)(p->data - p->buf_start))) {
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

/* Set the length (grow with unspecified bytes, or trim). */
static inline int innet_pkt_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len)
{
	if (INNET_UNLIKELY(len > INNET_PKT_MAX || len > (uint32_t)(p->buf_end - p->data))) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	p->len = len;
	return 0;
}

/* Set the length like innet_pkt_resize, but a length this target cannot
 * hold in place is no fault: -1, the packet unchanged. The handler then
 * hands the packet on with innet_pass_up (below). On this engine the
 * buffer holds any length up to INNET_PKT_MAX. */
static inline int innet_pkt_try_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len)
{
	(void)ctx;
	if (INNET_UNLIKELY(len > INNET_PKT_MAX || len > (uint32_t)(p->buf_end - p->data)))
		return -1;
	p->len = len;
	return 0;
}

/* The verdict for a packet this target cannot finish in place (a reply
 * innet_pkt_try_resize could not make room for): on XDP the packet goes,
 * untouched, to the user-space engine, which runs the handler again. Return
 * it before changing the packet or any state. This is the user-space engine
 * already: nothing bigger exists, so the packet is dropped (pkt_bounds). */
static inline enum innet_action innet_pass_up(struct innet_ctx *ctx, struct innet_pkt *p)
{
	(void)p;
	innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
	return INNET_DROP;
}

/* Continue the packet in the user-space engine with n bytes of the
 * handler's state (src/targets/xdp/dp_xdp.h): on XDP the way to finish work eBPF cannot
 * (a P4 program's clones and multicast copies, docs/p4.md) without running
 * again what already ran. This is the user-space engine already: a handler
 * that calls it here is wrong, and the packet faults (model_violation). */
static inline enum innet_action innet_hand_off(struct innet_ctx *ctx, struct innet_pkt *p,
					       const void *state, uint32_t n)
{
	(void)p;
	(void)state;
	(void)n;
	innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
	return INNET_DROP;
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

/* gcc 12.2 at -O2 miscompiles `innet_reg_fetch_add(...) + v` after the
 * switch on the width below: it turns the pair into an add-and-fetch and
 * emits `lock xadd %r, (mem); add %r, %r` (old + old instead of old + v;
 * tests/golden/test_counter.c, "INC ... carries the new value", caught it). Making
 * the loaded value opaque to the optimiser stops that rewrite; it costs no
 * instruction. */
#define INNET__OPAQUE(x) __asm__("" : "+r"(x))

#define INNET__REG_RMW(ctx, r, idx, op, v)                                              \
	({                                                                              \
		struct innet_reg *reg_ = innet__reg((ctx), (r), (idx));                 \
		uint64_t old_ = 0;                                                      \
		if (INNET_LIKELY(reg_ != NULL)) {                                       \
			void *p_ = reg_->mem + (size_t)(idx) * reg_->stride;            \
			switch (reg_->width) {                                          \
			case 8: old_ = op((uint64_t *)p_, (uint64_t)(v), __ATOMIC_SEQ_CST); break; \
			case 4: old_ = op((uint32_t *)p_, (uint32_t)(v), __ATOMIC_SEQ_CST); break; \
			case 2: old_ = op((uint16_t *)p_, (uint16_t)(v), __ATOMIC_SEQ_CST); break; \
			case 1: old_ = op((uint8_t *)p_, (uint8_t)(v), __ATOMIC_SEQ_CST); break;   \
			default: innet__fault((ctx), INNET_DROP_REG_OOB); break;        \
			}                                                               \
		}                                                                       \
		INNET__OPAQUE(old_);                                                    \
		old_;                                                                   \
	})

/* Read element idx of register r. */
static inline uint64_t innet_reg_read(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return 0;
	void *p = reg->mem + (size_t)idx * reg->stride;
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
	void *p = reg->mem + (size_t)idx * reg->stride;
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
	void *p = reg->mem + (size_t)idx * reg->stride;
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
 * One register operation, whether or not it stores. At most INNET_RMW_TRIES
 * compare-and-swap attempts: a writer that keeps losing faults the packet
 * with reg_contended rather than spin (the same bound on both targets). */
static inline uint64_t innet_reg_fetch_max(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (INNET_UNLIKELY(reg == NULL))
		return 0;
	void *p = reg->mem + (size_t)idx * reg->stride;
	switch (reg->width) {
#define INNET__MAX(T)                                                                   \
	{                                                                               \
		T cur_ = __atomic_load_n((T *)p, __ATOMIC_ACQUIRE);                     \
		for (uint32_t t_ = 0; t_ < INNET_RMW_TRIES; t_++) {                     \
			if (cur_ >= (T)v || __atomic_compare_exchange_n((T *)p, &cur_, (T)v, false, \
									__ATOMIC_SEQ_CST, \
									__ATOMIC_ACQUIRE)) \
				return cur_;                                            \
		}                                                                       \
		innet__fault(ctx, INNET_DROP_REG_CONTENDED);                            \
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

/* Span: elements idx .. idx + n - 1 of register r (1-, 2-, 4- or 8-byte
 * elements) as memory, for a loop of plain loads and stores over many
 * elements (innet/dp.h, "Spans"). NULL without a fault when the span crosses
 * a 4 KiB boundary of the register's memory (a page of the register's map
 * on XDP: the caller goes element by element there); NULL with a fault
 * (reg_out_of_range) when it leaves the register or n is 0. Counts n register
 * operations, when it succeeds. */
static inline void *innet_reg_span(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t n)
{
	if (INNET_UNLIKELY(r >= ctx->n_regs || n == 0 || ctx->regs[r].width > 8 ||
			   idx >= ctx->regs[r].count || n > ctx->regs[r].count - idx ||
			   n > INNET_REG_PAGE)) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return NULL;
	}
	struct innet_reg *reg = &ctx->regs[r];
	size_t off = (size_t)idx * reg->width, bytes = (size_t)n * reg->width;
	if ((off & (INNET_REG_PAGE - 1)) + bytes > INNET_REG_PAGE)
		return NULL;
	ctx->use.reg_ops += n;
	if (INNET_UNLIKELY(ctx->use.reg_ops > ctx->reg_ops_budget)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return NULL;
	}
	return reg->mem + off;
}

/* Copy the n-byte element idx of a blob register to dst (n <= width). */
void innet_reg_read_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, void *dst, uint32_t n);
/* Copy n bytes from src into element idx of a blob register (n <= width). Not
 * atomic with respect to concurrent writers of the same element: programs that
 * write one element from several workers order them through an RMW register
 * (for example a version or ballot updated with innet_reg_cas) or are SERIAL. */
void innet_reg_write_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, const void *src, uint32_t n);
/* Copy n bytes between element idx of a blob register and the packet at
 * offset off (n <= width, off + n <= pkt->len): the variable-length copies a
 * handler needs (a Paxos value into an acceptor slot and back). */
void innet_reg_to_pkt(struct innet_ctx *ctx, unsigned r, uint32_t idx, struct innet_pkt *pkt,
		      uint32_t off, uint32_t n);
void innet_pkt_to_reg(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t off, unsigned r,
		      uint32_t idx, uint32_t n);

/* ------------------------------------------------------------------------ */
/* Tables (use the innet_table_* macros of innet/dp.h).                       */

int innet__table_lookup(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size,
			void *val, uint32_t val_size);
int innet__table_insert(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size,
			const void *val, uint32_t val_size);
int innet__table_delete(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size);

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
/* Configuration, randomness, ports.                                          */

/* The program's config block (innet_decl_conf), read-only to handlers. */
static inline const void *innet_conf(const struct innet_ctx *ctx)
{
	return ctx->conf;
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

/* A port's peer address (0 if none or no such port). */
uint32_t innet_port_peer_ip(struct innet_ctx *ctx, uint16_t port);

/* Scratch memory: INNET_SCRATCH_SIZE bytes that belong to the running
 * handler or timer callback alone (its worker thread's; on XDP a per-CPU
 * map), contents undefined on entry, valid until it returns. For what the
 * 512-byte stack cannot hold, such as a packet a timer callback builds to
 * emit (it has no packet in hand). Never NULL here. */
void *innet_scratch(struct innet_ctx *ctx);

/* innet_loop (innet/dp.h): a plain loop here. */
static inline __attribute__((always_inline)) uint32_t innet_loop(uint32_t n, innet_loop_fn fn, void *arg)
{
	if (n > INNET_LOOP_MAX)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (fn(i, arg) != 0)
			return i + 1;
	return n;
}

/* NAME_dp.c's last line (see innet/dp.h). */
#define INNET_DATAPATH(name, handle_fn, timer_fn)                                        \
	INNET_DATAPATH_DECL(name);                                                       \
	enum innet_action innet_dp_##name##_handle(struct innet_ctx *ctx, struct innet_pkt *pkt) \
	{                                                                                \
		return handle_fn(ctx, pkt);                                              \
	}                                                                                \
	void innet_dp_##name##_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg) \
	{                                                                                \
		void (*fn_)(struct innet_ctx *, uint32_t, uint64_t) = timer_fn;          \
		if (fn_ != NULL)                                                         \
			fn_(ctx, timer, arg);                                            \
	}
#define INNET_DATAPATH_USERSPACE(name, handle_fn, timer_fn, reason) \
	INNET_DATAPATH(name, handle_fn, timer_fn)

#ifdef __cplusplus
}
#endif
#endif /* INNET_DP_USER_H */
