/*
 * innet/dp.h — the data-path API: everything a packet handler may use.
 *
 * A data-plane program is two sources (docs/programs.md, "The contract"):
 *
 *   NAME_dp.c   the data path: the handler, the timer callback and what they
 *               call. Restricted C, compiled twice by the build:
 *                 - for the user-space engine, freestanding (-ffreestanding
 *                   -nostdinc: no libc header can even be included), with a
 *                   stack frame limit of 512 bytes, and checked afterwards:
 *                   its only external symbols are innet_* (and the mem*
 *                   functions a compiler emits for struct copies), and it
 *                   defines no mutable global (state lives in declared
 *                   registers and tables, configuration in the config block);
 *                 - for the XDP target, with clang -target bpf (the kernel's
 *                   verifier then checks bounds, loops and stack at load).
 *               A violation fails the build.
 *   NAME.c      the control source: setup (declarations, settings), init,
 *               control commands, on_cpu — ordinary C, may allocate.
 *
 * This header is the whole API of the first. It includes no libc header. The
 * primitives (registers, tables, packet bounds, emit, timers) have one
 * implementation per target, in their own headers: innet/dp_user.h (the
 * user-space engine) and targets/xdp/dp_xdp.h (eBPF, chosen when __bpf__ is
 * defined). Both give the same results for the same state: the golden tests
 * run every program on both and compare verdicts and bytes.
 *
 * Rules a handler follows (and the build or the verifier enforce):
 *   - every header is read through innet_pkt_ptr() (pointer + length → pointer
 *     or NULL: the data_end check of XDP); innet_pkt_resize/push/pull are the
 *     only ways to change the packet's length, and they invalidate every
 *     pointer innet_pkt_ptr returned before;
 *   - loops have compile-time bounds; the stack stays under 512 bytes;
 *   - state only through the register, table and config helpers below;
 *   - every helper has a bounded cost (no retry loop without a bound: a
 *     contended RMW emulation gives up and faults with reg_contended).
 *
 * A handler fault (register index out of range, budget exceeded, a PISA
 * program emitting) never crashes anything: the helper records the fault and
 * returns a neutral value, and the runtime drops the packet with that reason
 * after the handler returns.
 */
#ifndef INNET_DP_H
#define INNET_DP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_LIKELY(x)   __builtin_expect(!!(x), 1)
#define INNET_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Largest packet (UDP payload) the runtime carries, and the headroom in front
 * of it that innet_pkt_push() can grow into (the same on both targets). */
#define INNET_PKT_MAX       9216u    /* a jumbo frame's payload (MTU 9000 and some) */
#define INNET_PKT_HEADROOM  64u
/* The shortest frame a raw port sends: a MAC header (INNET_DROP_SHORT_FRAME). */
#define INNET_FRAME_MIN     14u
/* Bytes of innet_scratch() memory (declared per target). */
#define INNET_SCRATCH_SIZE  32768u   /* the most a per-CPU map value holds (eBPF) */
/* Most calls one innet_loop() makes (bpf_loop's limit). */
#define INNET_LOOP_MAX      (1u << 23)
/* A span (innet_reg_span) never crosses a multiple of this many bytes of a
 * register (on XDP a register is an array map of pages this size). */
#define INNET_REG_PAGE      4096u

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
#define INNET_TABLE_KEY_MAX 256u     /* bytes of a table key */
#define INNET_TABLE_VALUE_MAX 4096u  /* bytes of a table value */
#define INNET_HASH_MAX      256u     /* innet_hash reads at most this many bytes */
#define INNET_CONF_MAX      (16u << 20) /* bytes of a program's config block: the DNN layer
                                      * keeps a pipeline's weights there (dnn/layer.h), and
                                      * the paper's AlexNet (examples/paper-alexnet.json) at
                                      * 4 pipelines, the fewest its convolutions fit, puts
                                      * 12 MiB in one (FC2: 512 units x 4096 inputs, as int8,
                                      * transposed and widened to int32). On XDP the block is
                                      * one array map value: 16 MiB loads on this kernel. */
#define INNET_RMW_TRIES     64u      /* CAS attempts of an emulated RMW before reg_contended */

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
	INNET_DROP_REG_CONTENDED,    /* an emulated RMW lost its CAS INNET_RMW_TRIES times */
	INNET_DROP_TABLE_KEY,        /* table key/value size differs from the declaration */
	INNET_DROP_TABLE_BUSY,       /* a table operation ran out of its bounded wait
	                              * (INNET_TABLE_BUSY) and the handler dropped the packet */
	INNET_DROP_SHORT_FRAME,      /* a frame under INNET_FRAME_MIN bytes (a MAC header)
	                              * out of a raw port: no device sends one (an
	                              * injection records it: a test port, not a wire) */
	INNET_DROP_RUNTIME_COUNT,
	INNET_DROP_PROGRAM = 32      /* first program-defined reason */
};

/*
 * What the table helpers return. Every wait inside them is bounded (the same
 * bound on both targets: src/engine/table_algo.h), so a lookup can end
 * without an answer: INNET_TABLE_BUSY — a writer (the control plane, another
 * worker or CPU) stayed inside the key's slot, or held its home lock, for the
 * whole wait. The key may or may not be there; nothing was changed. BUSY is
 * not a miss: a handler that answered it like ABSENT (make a new entry) could
 * overwrite a live one. Drop the packet with a named reason of the program's
 * (lb: conn_busy) or the runtime's INNET_DROP_TABLE_BUSY, or leave the state
 * alone. It is rare: only a writer stopped in the middle of a write (a
 * preempted thread) makes a wait run out.
 */
enum innet_table_rc {
	INNET_TABLE_OK = 0,       /* found (*val holds the value), inserted, deleted */
	INNET_TABLE_ABSENT = -1,  /* lookup, delete: the key is not in the table */
	INNET_TABLE_BUSY = -2,    /* the bounded wait ran out: unknown, nothing changed (counted) */
	INNET_TABLE_FULL = -3,    /* insert: no room for a new key (counted: insert_full) */
	INNET_TABLE_FAULT = -4,   /* the packet faulted (bad table id, key or value size,
	                           * a PISA program writing): it is dropped with that reason */
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

#define INNET_PKT_F_EMULATED 0x01 /* delivered by link emulation (dup/reorder) */
#define INNET_PKT_F_RAW      0x02 /* a whole Ethernet frame from a raw port (data = MAC header) */
#define INNET_PKT_F_RESUMED  0x04 /* handed over by the XDP program with innet_hand_off: the
                                   * user-space engine runs the handler on, its state at the
                                   * start of innet_scratch() */

/* Per-packet accounting, filled in by the helpers. */
struct innet_usage {
	uint32_t reg_ops;     /* register operations (stateful ALU) this pass */
	uint32_t table_ops;   /* table lookups/writes this pass */
	uint32_t alu_ops;     /* stateless ALU operations reported by innet_alu() */
	uint32_t emitted;     /* packets emitted by innet_emit() */
};

/* Byte order (the wire is big-endian; both targets are little-endian hosts
 * here, and the build refuses any other). */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "innet data paths assume a little-endian target"
#endif
/* Make x opaque to the optimiser: a bounds check the compiler could prove
 * redundant (and drop) stays in the code for the eBPF verifier, which proves
 * less. Costs no instruction. */
#define innet_opaque(x) __asm__ volatile("" : "+r"(x))

/* An index i, already checked to be below the power of two n, in a form the
 * verifier accepts for an array access (a compiler may compare one copy of
 * i and index with another): opaque, then masked. A no-op for any i < n. */
#define innet_index(i, n)                                                        \
	({                                                                       \
		_Static_assert(((n) & ((n) - 1)) == 0, "innet_index: n is a power of two"); \
		uint32_t i_ = (uint32_t)(i);                                     \
		innet_opaque(i_);                                                \
		i_ & ((uint32_t)(n) - 1u);                                       \
	})

static inline uint16_t innet_be16(uint16_t x) { return __builtin_bswap16(x); }
static inline uint32_t innet_be32(uint32_t x) { return __builtin_bswap32(x); }
static inline uint64_t innet_be64(uint64_t x) { return __builtin_bswap64(x); }

/*
 * innet_hash: XXH64 (the classic 64-bit xxHash, as libxxhash's XXH64) of the
 * first min(len, INNET_HASH_MAX) bytes, with seed. One implementation for
 * both targets, so tables, ECMP and Maglev pick the same slots everywhere;
 * tests/unit/test_hash.c checks it against libxxhash. Loops are bounded by
 * INNET_HASH_MAX; with a constant len the compiler unrolls them.
 */
#define INNET__P1 0x9E3779B185EBCA87ull
#define INNET__P2 0xC2B2AE3D27D4EB4Full
#define INNET__P3 0x165667B19E3779F9ull
#define INNET__P4 0x85EBCA77C2B2AE63ull
#define INNET__P5 0x27D4EB2F165667C5ull

static inline uint64_t innet__rotl64(uint64_t x, unsigned r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t innet__xxh_round(uint64_t acc, uint64_t in)
{
	acc += in * INNET__P2;
	acc = innet__rotl64(acc, 31);
	return acc * INNET__P1;
}

static inline uint64_t innet__xxh_merge(uint64_t acc, uint64_t v)
{
	acc ^= innet__xxh_round(0, v);
	return acc * INNET__P1 + INNET__P4;
}

static inline uint64_t innet__rd64(const uint8_t *p)
{
	uint64_t v;
	__builtin_memcpy(&v, p, 8);
	return v;
}

static inline uint32_t innet__rd32(const uint8_t *p)
{
	uint32_t v;
	__builtin_memcpy(&v, p, 4);
	return v;
}

static inline __attribute__((always_inline)) uint64_t innet_hash(const void *data, size_t len,
								 uint64_t seed)
{
	const uint8_t *p = (const uint8_t *)data;
	uint64_t n = len > INNET_HASH_MAX ? INNET_HASH_MAX : len;
	uint64_t h, i = 0;
	if (n >= 32) {
		uint64_t v1 = seed + INNET__P1 + INNET__P2, v2 = seed + INNET__P2, v3 = seed,
			 v4 = seed - INNET__P1;
		for (uint32_t s = 0; s < INNET_HASH_MAX / 32; s++) {
			if (i + 32 > n)
				break;
			v1 = innet__xxh_round(v1, innet__rd64(p + i));
			v2 = innet__xxh_round(v2, innet__rd64(p + i + 8));
			v3 = innet__xxh_round(v3, innet__rd64(p + i + 16));
			v4 = innet__xxh_round(v4, innet__rd64(p + i + 24));
			i += 32;
		}
		h = innet__rotl64(v1, 1) + innet__rotl64(v2, 7) + innet__rotl64(v3, 12) +
		    innet__rotl64(v4, 18);
		h = innet__xxh_merge(h, v1);
		h = innet__xxh_merge(h, v2);
		h = innet__xxh_merge(h, v3);
		h = innet__xxh_merge(h, v4);
	} else {
		h = seed + INNET__P5;
	}
	h += (uint64_t)len;
	for (uint32_t s = 0; s < 4; s++) {      /* at most 3 words remain after the stripes */
		if (i + 8 > n)
			break;
		h ^= innet__xxh_round(0, innet__rd64(p + i));
		h = innet__rotl64(h, 27) * INNET__P1 + INNET__P4;
		i += 8;
	}
	if (i + 4 <= n) {
		h ^= (uint64_t)innet__rd32(p + i) * INNET__P1;
		h = innet__rotl64(h, 23) * INNET__P2 + INNET__P3;
		i += 4;
	}
	for (uint32_t s = 0; s < 3; s++) {
		if (i >= n)
			break;
		h ^= (uint64_t)p[i] * INNET__P5;
		h = innet__rotl64(h, 11) * INNET__P1;
		i++;
	}
	h ^= h >> 33;
	h *= INNET__P2;
	h ^= h >> 29;
	h *= INNET__P3;
	h ^= h >> 32;
	return h;
}

/*
 * Loops over many elements. innet_loop(n, fn, arg) calls fn(i, arg) for
 * i = 0, 1, ... n - 1 in order until fn returns 1 (0: go on; no other value),
 * and returns the number of calls made (0 if n > INNET_LOOP_MAX). fn is a
 * static function of the data path, `long fn(uint32_t i, void *arg)`; arg
 * points to the caller's locals (the context, the packet, ...).
 *
 * On the user-space engine it is a plain loop (fn is inlined). On XDP it is
 * bpf_loop(): the verifier checks fn's body a few times whatever n is, where
 * the body of a for loop is checked once per iteration it could run — a loop
 * over a thousand register elements, each a map lookup with its checks, does
 * not fit the verifier's million instructions as a for loop. Use it when
 * the body works on registers and the count is large; a for loop with a
 * compile-time bound stays the choice for a handful of iterations.
 */
typedef long (*innet_loop_fn)(uint32_t i, void *arg);

/*
 * Spans. innet_reg_span(ctx, r, idx, n) gives elements idx .. idx + n - 1 of
 * register r (1-, 2-, 4- or 8-byte elements) as memory — `uint32_t *` for a
 * 4-byte register — for a loop of plain loads and stores: on XDP each
 * innet_reg_read/write is a map lookup with its checks (some 40 eBPF
 * instructions), a span is one lookup for n elements. n must be a
 * compile-time constant (the verifier checks each access through the pointer
 * against it). It returns NULL without a fault where the span would cross a
 * multiple of INNET_REG_PAGE bytes of the register (the same place on both
 * targets): the caller then goes element by element with the helpers. It
 * faults (reg_out_of_range) and returns NULL if the span leaves the register.
 * It counts n register operations. Loads and stores through it are plain,
 * not atomic: use it for elements no other executor writes meanwhile (agg's
 * bank A, which a contributor holds under its EXCL bit) or where a version
 * check catches a concurrent writer (agg's answers read a copy, then check
 * its state word). Keep the pointer only until the handler returns.
 */

#ifdef __cplusplus
}
#endif

/* The target's struct innet_pkt, struct innet_ctx and primitives. (The ALU
 * check compiles a data path for eBPF with the user-space engine's:
 * INNET_DP_USER_PRIMITIVES, tests/alu/dp_alu.c.) */
#if defined(__bpf__) && !defined(INNET_DP_USER_PRIMITIVES)
#include "targets/xdp/dp_xdp.h"
#else
#include "innet/dp_user.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

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
	(void)p;
	return INNET_REFLECT;
}

static inline enum innet_action innet_recirculate(struct innet_pkt *p)
{
	(void)p;
	return INNET_RECIRCULATE;
}

static inline enum innet_action innet_to_cpu(struct innet_pkt *p)
{
	(void)p;
	return INNET_TO_CPU;
}

/* ------------------------------------------------------------------------ */
/* Tables: keys and values are byte strings of the declared sizes; the       */
/* macros pass the sizes of the objects pointed to, which must equal the     */
/* declaration (else the packet faults with table_key). Lookups are safe     */
/* against concurrent writers (seqlock per slot), and every wait is bounded. */

/* Copy the value for *key into *val: an enum innet_table_rc, INNET_TABLE_OK
 * if found (*val is only written then, or left unspecified). */
/* (A key or value larger than any table holds is refused at compile time:
 * on XDP a table's slots are a map's values, and such a value never fits.) */
#define INNET__TABLE_SIZES(key, val)                                                     \
	_Static_assert(sizeof(*(key)) <= INNET_TABLE_KEY_MAX,                            \
		       "table key larger than INNET_TABLE_KEY_MAX bytes");               \
	_Static_assert(sizeof(*(val)) <= INNET_TABLE_VALUE_MAX,                          \
		       "table value larger than INNET_TABLE_VALUE_MAX bytes")
#define innet_table_lookup(ctx, t, key, val)                                             \
	({                                                                               \
		INNET__TABLE_SIZES(key, val);                                            \
		innet__table_lookup((ctx), (t), (key), sizeof(*(key)), (val), sizeof(*(val))); \
	})
/* Insert or replace (Trio only): INNET_TABLE_OK, _FULL, _BUSY or _FAULT. */
#define innet_table_insert(ctx, t, key, val)                                             \
	({                                                                               \
		INNET__TABLE_SIZES(key, val);                                            \
		innet__table_insert((ctx), (t), (key), sizeof(*(key)), (val), sizeof(*(val))); \
	})
/* Delete (Trio only): INNET_TABLE_OK, _ABSENT, _BUSY or _FAULT. */
#define innet_table_delete(ctx, t, key)                                                  \
	({                                                                               \
		INNET__TABLE_SIZES(key, key);                                            \
		innet__table_delete((ctx), (t), (key), sizeof(*(key)));                  \
	})

/* ------------------------------------------------------------------------ */
/* Other helpers.                                                             */

/* Account n stateless ALU operations (the runtime cannot see plain C
 * arithmetic; programs report it so the resource model can check it): the
 * computing eBPF instructions of the handler's own code — not moves, byte
 * swaps, address arithmetic, byte-lane moves or the primitives' work
 * (docs/resources.md, "What innet_alu counts"). The golden tests check each
 * pass's report against the code under INNET_TEST_TARGET=alu (tests/alu). */
static inline void innet_alu(struct innet_ctx *ctx, uint32_t n)
{
	ctx->use.alu_ops += n;
}

/* Whether a helper has faulted this pass (the packet will be dropped with
 * that reason whatever the handler returns). A loop over many elements
 * stops at the first fault: the rest of its work would be thrown away, and
 * the eBPF verifier then need not follow a faulted path through the rest of
 * the loop. */
static inline bool innet_faulted(const struct innet_ctx *ctx)
{
	return ctx->fault != 0;
}

/* The batch's time: CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns on XDP,
 * the same clock). */
static inline uint64_t innet_now(const struct innet_ctx *ctx)
{
	return ctx->now_ns;
}

/* ------------------------------------------------------------------------ */
/* Naming a program's data path.                                              */

/*
 * At the end of NAME_dp.c:
 *
 *   INNET_DATAPATH(NAME, handle_fn, timer_fn_or_NULL)
 *
 * exports innet_dp_NAME_handle (and innet_dp_NAME_timer) for the control
 * source's struct innet_program, and on the XDP target makes handle_fn the
 * handler of the program's eBPF object. A data path that cannot meet the eBPF
 * limits (say, a handler whose work per packet is far beyond them) says so
 * instead, and the build prints the reason rather than compile it for XDP:
 *
 *   INNET_DATAPATH_USERSPACE(NAME, handle_fn, timer_fn_or_NULL, "reason")
 */
#define INNET_DATAPATH_DECL(name)                                                        \
	enum innet_action innet_dp_##name##_handle(struct innet_ctx *ctx, struct innet_pkt *pkt); \
	void innet_dp_##name##_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)

#ifdef __cplusplus
}
#endif
#endif /* INNET_DP_H */
