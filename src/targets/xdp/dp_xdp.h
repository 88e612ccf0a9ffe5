/*
 * targets/xdp/dp_xdp.h — the data-path API's primitives on the XDP target (eBPF).
 * Included by innet/dp.h when compiling with clang -target bpf; never include
 * it directly. The engine around the handler (parsing, dispatch, verdicts,
 * hand-offs) is src/targets/xdp/engine.bpf.h; docs/xdp.md tells the whole story.
 *
 * One BPF object per program (src/targets/xdp/prog.bpf.c includes NAME_dp.c and the
 * engine). Its state, in the same bytes the user-space engine and the
 * control plane use (they mmap the maps):
 *
 *   map                  type / layout                          who sizes it
 *   innet_reg0..31       ARRAY, BPF_F_MMAPABLE. Elements of 1-8 bytes: 4 KiB
 *                        pages holding the packed array (element i at byte
 *                        i * width); blobs: one element per map entry
 *                        (value_size = stride = width rounded up to 8)     loader, from setup
 *   innet_tslots0..7     ARRAY, MMAPABLE: a table's slots (table_algo.h:
 *                        seq u32 | state u32 | key | value | pad to 8)     loader
 *   innet_tlock0..7      ARRAY, MMAPABLE: 4 KiB pages of u32 home locks    loader
 *   innet_tmeta          ARRAY, MMAPABLE, one page: per table entries u32,
 *                        insert_full u64, busy u64                         fixed
 *   innet_confmap        ARRAY, MMAPABLE, one element: the config block    loader
 *   innet_timers         ARRAY, MMAPABLE: {deadline_ns u64, arg u64} each  loader
 *   innet_groups         ARRAY_OF_MAPS of DEVMAP_HASH (ifindex -> port dev
 *                        + the egress program): a group's members          control plane
 *   innet_gmeta          ARRAY: per group {members, mode}                  control plane
 *   innet_members        HASH (group << 16 | port) -> {ip, udp}            control plane
 *   innet_stats          PERCPU_ARRAY, one struct innet_xdp_stats          -
 *   innet_trace          PERCPU_ARRAY: the last packet's verdict (tests)   -
 *   innet_scratch_map    PERCPU_ARRAY, one INNET_SCRATCH_SIZE value:
 *                        innet_scratch()                                   -
 *  shared by all programs of a switch (the loader reuses one fd):
 *   innet_ports          ARRAY [64] struct innet_xdp_port                  loader
 *   innet_if2port        HASH ifindex -> port                              loader
 *   innet_portdevs       DEVMAP [64]: port -> its device                   loader
 *   innet_udp2prog       ARRAY, one 64 KiB element: UDP port -> program    loader
 *   innet_progs          PROG_ARRAY [16]: program index -> entry           loader
 *   innet_ring           RINGBUF: hand-offs to the user-space engine       -
 *   innet_port_stats     PERCPU_ARRAY [64] struct innet_xdp_port_stats     -
 *
 * The layout of the object's state (widths, counts, table shapes, the
 * program's index and model) is a read-only global (innet_layout, its own
 * .rodata section) that the loader fills in before the verifier runs, so the
 * verifier sees it as constants: it knows every register's width, prunes the
 * branches for the others and checks every offset against the real sizes.
 */
#ifndef INNET_DP_XDP_H
#define INNET_DP_XDP_H

#ifndef INNET_DP_H
#error "include innet/dp.h, not innet/dp_xdp.h"
#endif

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "targets/xdp/xdp_abi.h"
#include "engine/table_algo.h"   /* the tables' layout (their algorithm: below) */

#define INNET__INLINE static inline __attribute__((always_inline))

/* n as a 64-bit value in [0, max] that the verifier can see on the very
 * register a helper then gets: opaque first, so that the compiler keeps the
 * clamp (it may believe the value bounded already; the verifier may not). */
#define INNET__CLAMP64(n, max)                                                   \
	({                                                                       \
		uint64_t n_ = (n);                                               \
		innet_opaque(n_);                                                \
		if (n_ > (uint64_t)(max))                                        \
			n_ = (uint64_t)(max);                                    \
		n_;                                                              \
	})

/* The same for a size n already checked to be at least 1, in [1, max]: what
 * a helper whose size argument may not be zero needs to see (the compiler
 * may test n == 0 on one copy and pass another). */
#define INNET__CLAMP64_NZ(n, max)                                                \
	({                                                                       \
		uint64_t m_ = (uint64_t)(n) - 1u;                                \
		innet_opaque(m_);                                                \
		if (m_ > (uint64_t)(max) - 1u)                                   \
			m_ = (uint64_t)(max) - 1u;                               \
		m_ + 1u;                                                         \
	})

/* The packet in hand (the same public fields as on the user-space engine). */
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
	/* runtime use */
	uint8_t *data_end;        /* the frame's end (the verifier's data_end) */
	struct xdp_md *xdp;
	uint32_t hdr_len;         /* frame bytes before data: 42 (Eth+IPv4+UDP) or 0 */
	uint32_t headroom;        /* what innet_pkt_push may still take (64 at first) */
	uint8_t src_mac[6];       /* the frame's source MAC (reflect answers it) */
	uint16_t pad;
};

/* The handler's view of its program's state. */
struct innet_ctx {
	uint64_t now_ns;                 /* bpf_ktime_get_ns at the packet's start */
	struct innet_usage use;          /* this pass */
	uint32_t reg_ops_budget;         /* per pass (PISA), or UINT32_MAX */
	uint16_t fault;                  /* first fault this pass (drop reason) */
	uint8_t model;                   /* enum innet_model */
	uint8_t in_timer;                /* never on XDP (timers run in user space) */
	uint8_t pass_up;                 /* innet_pass_up: the user-space engine's turn */
	uint32_t handoff_len;            /* innet_hand_off: bytes of state at handoff_state */
	const void *handoff_state;
	const void *conf;                /* the config block (map value) */
	struct innet_pkt *pkt;           /* the packet being handled */
};

/* ------------------------------------------------------------------------ */
/* Maps.                                                                      */

#define INNET__PAGE 4096u

#define INNET__ARRAY_MMAP(name)                                                  \
	struct {                                                                 \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                \
		__uint(map_flags, BPF_F_MMAPABLE);                               \
		__uint(key_size, 4);                                             \
		__uint(value_size, 8);                                           \
		__uint(max_entries, 1);                                          \
	} name SEC(".maps")

INNET__ARRAY_MMAP(innet_reg0);  INNET__ARRAY_MMAP(innet_reg1);  INNET__ARRAY_MMAP(innet_reg2);
INNET__ARRAY_MMAP(innet_reg3);  INNET__ARRAY_MMAP(innet_reg4);  INNET__ARRAY_MMAP(innet_reg5);
INNET__ARRAY_MMAP(innet_reg6);  INNET__ARRAY_MMAP(innet_reg7);  INNET__ARRAY_MMAP(innet_reg8);
INNET__ARRAY_MMAP(innet_reg9);  INNET__ARRAY_MMAP(innet_reg10); INNET__ARRAY_MMAP(innet_reg11);
INNET__ARRAY_MMAP(innet_reg12); INNET__ARRAY_MMAP(innet_reg13); INNET__ARRAY_MMAP(innet_reg14);
INNET__ARRAY_MMAP(innet_reg15); INNET__ARRAY_MMAP(innet_reg16); INNET__ARRAY_MMAP(innet_reg17);
INNET__ARRAY_MMAP(innet_reg18); INNET__ARRAY_MMAP(innet_reg19); INNET__ARRAY_MMAP(innet_reg20);
INNET__ARRAY_MMAP(innet_reg21); INNET__ARRAY_MMAP(innet_reg22); INNET__ARRAY_MMAP(innet_reg23);
INNET__ARRAY_MMAP(innet_reg24); INNET__ARRAY_MMAP(innet_reg25); INNET__ARRAY_MMAP(innet_reg26);
INNET__ARRAY_MMAP(innet_reg27); INNET__ARRAY_MMAP(innet_reg28); INNET__ARRAY_MMAP(innet_reg29);
INNET__ARRAY_MMAP(innet_reg30); INNET__ARRAY_MMAP(innet_reg31);
INNET__ARRAY_MMAP(innet_tslots0); INNET__ARRAY_MMAP(innet_tslots1); INNET__ARRAY_MMAP(innet_tslots2);
INNET__ARRAY_MMAP(innet_tslots3); INNET__ARRAY_MMAP(innet_tslots4); INNET__ARRAY_MMAP(innet_tslots5);
INNET__ARRAY_MMAP(innet_tslots6); INNET__ARRAY_MMAP(innet_tslots7);
INNET__ARRAY_MMAP(innet_tlock0); INNET__ARRAY_MMAP(innet_tlock1); INNET__ARRAY_MMAP(innet_tlock2);
INNET__ARRAY_MMAP(innet_tlock3); INNET__ARRAY_MMAP(innet_tlock4); INNET__ARRAY_MMAP(innet_tlock5);
INNET__ARRAY_MMAP(innet_tlock6); INNET__ARRAY_MMAP(innet_tlock7);
INNET__ARRAY_MMAP(innet_tmeta);
INNET__ARRAY_MMAP(innet_confmap);
INNET__ARRAY_MMAP(innet_timers);

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_gmeta));
	__uint(max_entries, 1);
} innet_gmeta SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_member));
	__uint(max_entries, INNET_MAX_GROUP_MEMBERS);
} innet_members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(key_size, 4);
	__uint(max_entries, 1);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
		__uint(key_size, 4);
		__uint(value_size, sizeof(struct bpf_devmap_val));
		__uint(max_entries, INNET_MAX_PORTS);
	});
} innet_groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_stats));
	__uint(max_entries, 1);
} innet_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_trace));
	__uint(max_entries, 1);
} innet_trace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, INNET_SCRATCH_SIZE);
	__uint(max_entries, 1);
} innet_scratch_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_port));
	__uint(max_entries, INNET_MAX_PORTS);
} innet_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(key_size, 4);
	__uint(value_size, 4);
	__uint(max_entries, 256);
} innet_if2port SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct bpf_devmap_val));
	__uint(max_entries, INNET_MAX_PORTS);
} innet_portdevs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, 65536);
	__uint(max_entries, 1);
} innet_udp2prog SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, 4);
	__uint(max_entries, INNET_XDP_MAX_PROGS);
} innet_progs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, INNET_XDP_RING_BYTES);
} innet_ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct innet_xdp_port_stats));
	__uint(max_entries, INNET_MAX_PORTS);
} innet_port_stats SEC(".maps");

/* The object's layout, filled in by the loader before the verifier runs. */
const volatile struct innet_xdp_layout innet_layout
	__attribute__((section(".rodata.innet"))) = { .n_regs = 0 };
#define INNET__L innet_layout

/* ------------------------------------------------------------------------ */
/* Faults and stats.                                                          */

INNET__INLINE void innet__fault(struct innet_ctx *ctx, unsigned reason)
{
	if (ctx->fault == 0)
		ctx->fault = (uint16_t)reason;
}

INNET__INLINE struct innet_xdp_stats *innet__stats(void)
{
	uint32_t zero = 0;
	return bpf_map_lookup_elem(&innet_stats, &zero);
}

/* ------------------------------------------------------------------------ */
/* The packet.                                                                */

/* A pointer to the n bytes at offset off of the packet, or NULL when the
 * packet is shorter than off + n. n must be a compile-time constant here (the
 * verifier checks every packet access against data_end).
 *
 * data_end is the packet's end: data + len, always (the engine trims a
 * datagram's frame to its UDP length, a raw frame's len is the frame, and
 * push/pull/resize move both). So the check is against data_end alone, not
 * len as well: comparing len with the offsets of a handler's headers would
 * leave different bounds on pkt->len along each path (an IPv4 header with
 * options or not, a VLAN tag or not), and the verifier would check every
 * step after them once for each. */
INNET__INLINE void *innet_pkt_ptr(struct innet_pkt *p, uint32_t off, uint32_t n)
{
	if (off > INNET_PKT_MAX || n > INNET_PKT_MAX)
		return NULL;
	uint8_t *q = p->data + off;
	if (q + n > p->data_end)
		return NULL;
	return q;
}

/* Reload the packet pointers after a helper that moved the frame's bounds. */
INNET__INLINE void innet__pkt_reload(struct innet_pkt *p)
{
	/* hdr_len is 0 or 42; bounded here because the verifier may have lost
	 * the constant (a 4-byte spill beside headroom's, which push/pull
	 * rewrite), and a packet pointer with an unbounded offset is checked
	 * against data_end in vain */
	uint32_t h = p->hdr_len;
	if (h > INNET_XDP_HDR_LEN)
		h = INNET_XDP_HDR_LEN;
	p->data = (uint8_t *)(long)p->xdp->data + h;
	p->data_end = (uint8_t *)(long)p->xdp->data_end;
}

INNET__INLINE int innet_pkt_push(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n)
{
	if (n > p->headroom || bpf_xdp_adjust_head(p->xdp, -(int)n) != 0) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		innet__pkt_reload(p);
		return -1;
	}
	p->headroom -= n;
	p->len += n;
	innet__pkt_reload(p);
	return 0;
}

INNET__INLINE int innet_pkt_pull(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n)
{
	if (n > p->len || bpf_xdp_adjust_head(p->xdp, (int)n) != 0) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		innet__pkt_reload(p);
		return -1;
	}
	p->headroom += n;
	p->len -= n;
	innet__pkt_reload(p);
	return 0;
}

INNET__INLINE int innet_pkt_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len)
{
	if (len > INNET_PKT_MAX ||
	    bpf_xdp_adjust_tail(p->xdp, (int)len - (int)p->len) != 0) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		innet__pkt_reload(p);
		return -1;
	}
	p->len = len;
	innet__pkt_reload(p);
	return 0;
}

/* innet_pkt_resize without the fault: -1 and the packet unchanged when it
 * cannot grow to len bytes in place — beyond the frame's buffer (one page
 * less the headroom and the kernel's tail: about 3.5 KB of frame), or beyond
 * one frame of the ingress port's link (its MTU: XDP does not fragment, and
 * a reply goes back that way). */
INNET__INLINE int innet_pkt_try_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len)
{
	(void)ctx;
	if (len > INNET_PKT_MAX)
		return -1;
	if (len > p->len) {
		uint32_t k = p->in_port;
		const struct innet_xdp_port *pi = bpf_map_lookup_elem(&innet_ports, &k);
		/* the frame: headers (42, raw: 0) + len; the MTU leaves out Ethernet's 14 */
		if (pi == (void *)0 || p->hdr_len + len > pi->mtu + 14u)
			return -1;
	}
	if (bpf_xdp_adjust_tail(p->xdp, (int)len - (int)p->len) != 0) {
		innet__pkt_reload(p);
		return -1;
	}
	p->len = len;
	innet__pkt_reload(p);
	return 0;
}

/* The packet goes up to the user-space engine untouched (XDP_PASS), whose
 * worker runs the handler again natively (engine.bpf.h, innet__pass_up). */
INNET__INLINE enum innet_action innet_pass_up(struct innet_ctx *ctx, struct innet_pkt *p)
{
	(void)p;
	ctx->pass_up = 1;
	return INNET_DROP;
}

/* Continue the packet in the user-space engine, after the handler changed
 * state: the packet (as it is now) and the n bytes at state (a pointer into
 * innet_scratch() memory, n <= INNET_XDP_STATE_MAX) go over the ring, counted
 * as a `resume` hand-off, and the engine calls the handler again with
 * INNET_PKT_F_RESUMED in pkt->flags and those bytes at the start of its
 * innet_scratch(). The handler there carries on from its state: nothing that
 * ran here runs twice. Return its value. */
INNET__INLINE enum innet_action innet_hand_off(struct innet_ctx *ctx, struct innet_pkt *p,
					       const void *state, uint32_t n)
{
	(void)p;
	ctx->handoff_state = state;
	ctx->handoff_len = n;
	return INNET_DROP;
}

/* ------------------------------------------------------------------------ */
/* Registers.                                                                 */

INNET__INLINE void *innet__reg_map(unsigned r)
{
	switch (r) {
	case 0: return &innet_reg0;   case 1: return &innet_reg1;   case 2: return &innet_reg2;
	case 3: return &innet_reg3;   case 4: return &innet_reg4;   case 5: return &innet_reg5;
	case 6: return &innet_reg6;   case 7: return &innet_reg7;   case 8: return &innet_reg8;
	case 9: return &innet_reg9;   case 10: return &innet_reg10; case 11: return &innet_reg11;
	case 12: return &innet_reg12; case 13: return &innet_reg13; case 14: return &innet_reg14;
	case 15: return &innet_reg15; case 16: return &innet_reg16; case 17: return &innet_reg17;
	case 18: return &innet_reg18; case 19: return &innet_reg19; case 20: return &innet_reg20;
	case 21: return &innet_reg21; case 22: return &innet_reg22; case 23: return &innet_reg23;
	case 24: return &innet_reg24; case 25: return &innet_reg25; case 26: return &innet_reg26;
	case 27: return &innet_reg27; case 28: return &innet_reg28; case 29: return &innet_reg29;
	case 30: return &innet_reg30; case 31: return &innet_reg31;
	}
	return (void *)0;
}

/* Whether the pass has used more register operations than its budget.
 * Only a PISA program has a budget (Trio's is UINT32_MAX, which a u32 count
 * never exceeds): the test is skipped for the others on a constant of the
 * layout, so the verifier never compares the running count. (Compared, the
 * count becomes a value it must track exactly, and no two paths through a
 * handler with loops ever look alike to it again: a Trio handler of long
 * loops then exhausts its budget of a million instructions.) */
INNET__INLINE bool innet__over_budget(const struct innet_ctx *ctx)
{
	return INNET__L.reg_ops_budget != 0xffffffffu && ctx->use.reg_ops > INNET__L.reg_ops_budget;
}

/* Register r's element width, read afresh at each use: innet_layout is
 * volatile, so the verifier sees a constant every time, where a copy in a
 * local may be spilled to the stack and lost to it (a 4-byte spill shares its
 * 8-byte slot with the next 4-byte store, and the slot then reads as
 * unknown bytes). */
#define INNET__W(r) (INNET__L.regs[r].width)

/* Account one register operation and check r and idx. */
INNET__INLINE bool innet__reg_check(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	ctx->use.reg_ops++;
	if (innet__over_budget(ctx)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return false;
	}
	if (r >= INNET_MAX_REGS || r >= INNET__L.n_regs || idx >= INNET__L.regs[r].count) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return false;
	}
	return true;
}

/* Element idx of a register of 1..8-byte elements: a pointer into its page
 * (align 1), or to the aligned 32-bit word that holds it (align 4: the word
 * a 1- or 2-byte element's read-modify-write works on; computed from the
 * page, as the verifier cannot follow an element pointer moved back). */
INNET__INLINE uint8_t *innet__reg_at(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t align)
{
	uint64_t off = (uint64_t)idx << INNET__L.regs[r].shift;
	uint32_t page = (uint32_t)(off >> 12);
	uint8_t *base = bpf_map_lookup_elem(innet__reg_map(r), &page);
	if (base == (void *)0) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return (void *)0;
	}
	return base + (off & (INNET__PAGE - align));
}

INNET__INLINE uint8_t *innet__reg_word(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	return innet__reg_at(ctx, r, idx, 1);
}

/* Element idx of a blob register (its own map entry). */
INNET__INLINE uint8_t *innet__reg_blob(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	uint8_t *e = bpf_map_lookup_elem(innet__reg_map(r), &idx);
	if (e == (void *)0)
		innet__fault(ctx, INNET_DROP_REG_OOB);
	return e;
}

/* innet/dp.h's span: elements idx .. idx + n - 1 of register r within one
 * page of its map (n a compile-time constant: the verifier checks every
 * access through the pointer against the page's bounds). */
INNET__INLINE void *innet_reg_span(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t n)
{
	if (r >= INNET_MAX_REGS || r >= INNET__L.n_regs || n == 0 || INNET__W(r) > 8 ||
	    idx >= INNET__L.regs[r].count || n > INNET__L.regs[r].count - idx ||
	    n > INNET_REG_PAGE) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return (void *)0;
	}
	uint64_t off = (uint64_t)idx << INNET__L.regs[r].shift;
	uint32_t bytes = n << INNET__L.regs[r].shift;
	uint32_t in = (uint32_t)(off & (INNET__PAGE - 1));
	if (bytes > INNET__PAGE || in > INNET__PAGE - bytes)
		return (void *)0;
	ctx->use.reg_ops += n;
	if (innet__over_budget(ctx)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return (void *)0;
	}
	uint32_t page = (uint32_t)(off >> 12);
	uint8_t *base = bpf_map_lookup_elem(innet__reg_map(r), &page);
	if (base == (void *)0) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return (void *)0;
	}
	return base + in;
}

INNET__INLINE uint64_t innet_reg_read(struct innet_ctx *ctx, unsigned r, uint32_t idx)
{
	if (!innet__reg_check(ctx, r, idx))
		return 0;
	if (INNET__W(r) > 8) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return 0;
	}
	uint8_t *p = innet__reg_word(ctx, r, idx);
	if (p == (void *)0)
		return 0;
	switch (INNET__W(r)) {
	case 8: return *(volatile uint64_t *)p;
	case 4: return *(volatile uint32_t *)p;
	case 2: return *(volatile uint16_t *)p;
	case 1: return *(volatile uint8_t *)p;
	}
	innet__fault(ctx, INNET_DROP_REG_OOB);
	return 0;
}

INNET__INLINE void innet_reg_write(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	if (!innet__reg_check(ctx, r, idx))
		return;
	if (INNET__W(r) > 8) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return;
	}
	uint8_t *p = innet__reg_word(ctx, r, idx);
	if (p == (void *)0)
		return;
	switch (INNET__W(r)) {
	case 8: *(volatile uint64_t *)p = v; return;
	case 4: *(volatile uint32_t *)p = (uint32_t)v; return;
	case 2: *(volatile uint16_t *)p = (uint16_t)v; return;
	case 1: *(volatile uint8_t *)p = (uint8_t)v; return;
	}
	innet__fault(ctx, INNET_DROP_REG_OOB);
}

enum innet__rmw_op {
	INNET__ADD, INNET__OR, INNET__AND, INNET__SWAP, INNET__MAX, INNET__CAS,
};

INNET__INLINE uint64_t innet__rmw_apply(enum innet__rmw_op op, uint64_t old, uint64_t v)
{
	switch (op) {
	case INNET__ADD: return old + v;
	case INNET__OR: return old | v;
	case INNET__AND: return old & v;
	case INNET__MAX: return old > v ? old : v;
	default: return v;   /* SWAP */
	}
}

/*
 * A read-modify-write of element idx. eBPF has atomic add/or/and/xchg/cmpxchg
 * of 32 and 64 bits: those map one to one, and or/and of 1- or 2-byte
 * elements are or/and of the 32-bit word that holds them. add and swap of
 * 1- or 2-byte elements, and the maximum at any width, are a compare-and-swap
 * loop on the aligned 32-bit (or 64-bit) word, at most INNET_RMW_TRIES rounds (the same
 * bound the user-space engine uses for fetch_max); a writer that keeps losing
 * faults the packet with reg_contended.
 */
INNET__INLINE uint64_t innet__rmw(struct innet_ctx *ctx, unsigned r, uint32_t idx,
				  enum innet__rmw_op op, uint64_t v)
{
	if (!innet__reg_check(ctx, r, idx))
		return 0;
	if (INNET__W(r) > 8) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return 0;
	}
	/* (elements of 8 bytes: the element; else the 32-bit word holding it) */
	uint8_t *p = innet__reg_at(ctx, r, idx, INNET__W(r) == 8 ? 1 : 4);
	if (p == (void *)0)
		return 0;
	if (INNET__W(r) == 8 && op != INNET__MAX) {
		uint64_t *q = (uint64_t *)p;
		switch (op) {
		case INNET__ADD: return __sync_fetch_and_add(q, v);
		case INNET__OR: return __sync_fetch_and_or(q, v);
		case INNET__AND: return __sync_fetch_and_and(q, v);
		default: return __sync_lock_test_and_set(q, v);
		}
	}
	if (INNET__W(r) == 4 && op != INNET__MAX) {
		uint32_t *q = (uint32_t *)p;
		switch (op) {
		case INNET__ADD: return __sync_fetch_and_add(q, (uint32_t)v);
		case INNET__OR: return __sync_fetch_and_or(q, (uint32_t)v);
		case INNET__AND: return __sync_fetch_and_and(q, (uint32_t)v);
		default: return __sync_lock_test_and_set(q, (uint32_t)v);
		}
	}
	if (INNET__W(r) < 4 && (op == INNET__OR || op == INNET__AND)) {
		/* or/and of a 1- or 2-byte element: the same on the 32-bit word
		 * that holds it, the other bytes or-ed with 0 / and-ed with 1s */
		uint32_t sh = (((uint32_t)idx << INNET__L.regs[r].shift) & 3u) * 8u;
		uint32_t mask = (1u << (INNET__W(r) * 8u)) - 1u;
		uint32_t bits = ((uint32_t)v & mask) << sh;
		uint32_t old = op == INNET__OR ? __sync_fetch_and_or((uint32_t *)p, bits)
					       : __sync_fetch_and_and((uint32_t *)p, bits | ~(mask << sh));
		return (old >> sh) & mask;
	}
	if (INNET__W(r) == 8) {   /* max of a 64-bit element */
		uint64_t *q = (uint64_t *)p;
		uint64_t cur = *(volatile uint64_t *)q;
		for (uint32_t t = 0; t < INNET_RMW_TRIES; t++) {
			if (cur >= v)
				return cur;
			uint64_t seen = __sync_val_compare_and_swap(q, cur, v);
			if (seen == cur)
				return cur;
			cur = seen;
		}
		innet__fault(ctx, INNET_DROP_REG_CONTENDED);
		return cur;
	}
	/* 1, 2 or 4 bytes through the aligned 32-bit word that holds them */
	uint32_t in_word = ((uint32_t)idx << INNET__L.regs[r].shift) & 3u;
	uint32_t *q = (uint32_t *)p;
	uint32_t sh = in_word * 8u;
	uint32_t mask = INNET__W(r) == 4 ? 0xffffffffu : ((1u << (INNET__W(r) * 8u)) - 1u);
	uint32_t cur = *(volatile uint32_t *)q;
	for (uint32_t t = 0; t < INNET_RMW_TRIES; t++) {
		uint32_t old = (cur >> sh) & mask;
		uint32_t nv = (uint32_t)innet__rmw_apply(op, old, v & mask) & mask;
		if (op == INNET__MAX && old >= (uint32_t)(v & mask))
			return old;
		uint32_t next = (cur & ~(mask << sh)) | (nv << sh);
		uint32_t seen = __sync_val_compare_and_swap(q, cur, next);
		if (seen == cur)
			return old;
		cur = seen;
	}
	innet__fault(ctx, INNET_DROP_REG_CONTENDED);
	return (cur >> sh) & mask;
}

INNET__INLINE uint64_t innet_reg_fetch_add(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return innet__rmw(ctx, r, idx, INNET__ADD, v);
}

INNET__INLINE uint64_t innet_reg_fetch_or(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return innet__rmw(ctx, r, idx, INNET__OR, v);
}

INNET__INLINE uint64_t innet_reg_fetch_and(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return innet__rmw(ctx, r, idx, INNET__AND, v);
}

INNET__INLINE uint64_t innet_reg_swap(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return innet__rmw(ctx, r, idx, INNET__SWAP, v);
}

INNET__INLINE uint64_t innet_reg_fetch_max(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v)
{
	return innet__rmw(ctx, r, idx, INNET__MAX, v);
}

INNET__INLINE bool innet_reg_cas(struct innet_ctx *ctx, unsigned r, uint32_t idx,
				 uint64_t *expected, uint64_t desired)
{
	if (!innet__reg_check(ctx, r, idx))
		return false;
	if (INNET__W(r) > 8) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return false;
	}
	uint8_t *p = innet__reg_at(ctx, r, idx, INNET__W(r) == 8 ? 1 : 4);
	if (p == (void *)0)
		return false;
	if (INNET__W(r) == 8) {
		uint64_t seen = __sync_val_compare_and_swap((uint64_t *)p, *expected, desired);
		bool ok = seen == *expected;
		*expected = seen;
		return ok;
	}
	uint32_t in_word = ((uint32_t)idx << INNET__L.regs[r].shift) & 3u;
	uint32_t *q = (uint32_t *)p;
	uint32_t sh = in_word * 8u;
	uint32_t mask = INNET__W(r) == 4 ? 0xffffffffu : ((1u << (INNET__W(r) * 8u)) - 1u);
	uint32_t want = (uint32_t)*expected & mask;
	uint32_t cur = *(volatile uint32_t *)q;
	for (uint32_t t = 0; t < INNET_RMW_TRIES; t++) {
		uint32_t old = (cur >> sh) & mask;
		if (old != want) {
			*expected = old;
			return false;
		}
		uint32_t next = (cur & ~(mask << sh)) | (((uint32_t)desired & mask) << sh);
		uint32_t seen = __sync_val_compare_and_swap(q, cur, next);
		if (seen == cur)
			return true;
		cur = seen;
	}
	innet__fault(ctx, INNET_DROP_REG_CONTENDED);
	*expected = (cur >> sh) & mask;
	return false;
}

/* Blob element idx for an n-byte copy, with the checks and the accounting of
 * the user-space engine (a word per stateful ALU beyond the first). */
INNET__INLINE uint8_t *innet__blob(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t n)
{
	if (!innet__reg_check(ctx, r, idx))
		return (void *)0;
	if (n > INNET__W(r)) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return (void *)0;
	}
	ctx->use.reg_ops += (n > 8) ? (n + 7) / 8 - 1 : 0;
	if (innet__over_budget(ctx)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return (void *)0;
	}
	return INNET__W(r) <= 8 ? innet__reg_word(ctx, r, idx) : innet__reg_blob(ctx, r, idx);
}

/* n is a compile-time constant at every call (sizeof of a local). */
INNET__INLINE void innet_reg_read_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, void *dst,
					uint32_t n)
{
	uint8_t *e = innet__blob(ctx, r, idx, n);
	if (e == (void *)0)
		__builtin_memset(dst, 0, n);
	else
		bpf_probe_read_kernel(dst, n, e);
}

INNET__INLINE void innet_reg_write_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx,
					 const void *src, uint32_t n)
{
	uint8_t *e = innet__blob(ctx, r, idx, n);
	if (e != (void *)0)
		bpf_probe_read_kernel(e, n, src);
}

INNET__INLINE void innet_reg_to_pkt(struct innet_ctx *ctx, unsigned r, uint32_t idx,
				    struct innet_pkt *pkt, uint32_t off, uint32_t n)
{
	if (off > pkt->len || n > pkt->len - off) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return;
	}
	uint8_t *e = innet__blob(ctx, r, idx, n);
	if (e == (void *)0 || n == 0)
		return;
	if (n > INNET__L.regs[r].stride ||
	    bpf_xdp_store_bytes(pkt->xdp, pkt->hdr_len + off, e,
				INNET__CLAMP64_NZ(n, INNET__L.regs[r].stride)) != 0)
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
}

INNET__INLINE void innet_pkt_to_reg(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t off,
				    unsigned r, uint32_t idx, uint32_t n)
{
	if (off > pkt->len || n > pkt->len - off) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return;
	}
	uint8_t *e = innet__blob(ctx, r, idx, n);
	if (e == (void *)0 || n == 0)
		return;
	if (n > INNET__L.regs[r].stride ||
	    bpf_xdp_load_bytes(pkt->xdp, pkt->hdr_len + off, e,
			       INNET__CLAMP64_NZ(n, INNET__L.regs[r].stride)) != 0)
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
}

/* innet_loop (innet/dp.h): bpf_loop, which returns the calls made or an
 * error (-E2BIG when n > INNET_LOOP_MAX). */
INNET__INLINE uint32_t innet_loop(uint32_t n, innet_loop_fn fn, void *arg)
{
	long done = bpf_loop(n, (void *)fn, arg, 0);
	return done < 0 ? 0 : (uint32_t)done;
}

/* ------------------------------------------------------------------------ */
/* Tables: engine/table_algo.h's algorithm over the maps' slots (the same    */
/* bytes the user-space engine and the control plane use).                   */

INNET__INLINE void *innet__tslots(unsigned t)
{
	switch (t) {
	case 0: return &innet_tslots0; case 1: return &innet_tslots1;
	case 2: return &innet_tslots2; case 3: return &innet_tslots3;
	case 4: return &innet_tslots4; case 5: return &innet_tslots5;
	case 6: return &innet_tslots6; case 7: return &innet_tslots7;
	}
	return (void *)0;
}

INNET__INLINE void *innet__tlocks(unsigned t)
{
	switch (t) {
	case 0: return &innet_tlock0; case 1: return &innet_tlock1;
	case 2: return &innet_tlock2; case 3: return &innet_tlock3;
	case 4: return &innet_tlock4; case 5: return &innet_tlock5;
	case 6: return &innet_tlock6; case 7: return &innet_tlock7;
	}
	return (void *)0;
}

INNET__INLINE struct innet_table_shared *innet__tmeta(unsigned t)
{
	uint32_t zero = 0;
	uint8_t *m = bpf_map_lookup_elem(&innet_tmeta, &zero);
	if (m == (void *)0 || t >= INNET_MAX_TABLES)
		return (void *)0;
	return (struct innet_table_shared *)(m + t * sizeof(struct innet_table_shared));
}

INNET__INLINE bool innet__table_check(struct innet_ctx *ctx, unsigned t, uint32_t ks, uint32_t vs)
{
	ctx->use.table_ops++;
	if (t >= INNET_MAX_TABLES || t >= INNET__L.n_tables) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return false;
	}
	if (ks != INNET__L.tables[t].key_size ||
	    (vs != 0xffffffffu && vs != INNET__L.tables[t].value_size)) {
		innet__fault(ctx, INNET_DROP_TABLE_KEY);
		return false;
	}
	return true;
}

/* The executor's half of engine/table_algo.h: loads and stores through
 * volatile (eBPF's loads and stores are not reordered across its atomics,
 * which are full barriers), compare-and-swap and add as eBPF atomics. A
 * table is its id: the maps innet_tslotsN / innet_tlockN and the counters in
 * innet_tmeta. */
struct innet__tbl_ref {
	uint64_t t;
};
#define innet__tbl_ld(p)        (*(volatile __typeof__(*(p)) *)(p))
#define innet__tbl_st(p, v)     (*(volatile __typeof__(*(p)) *)(p) = (v))
#define innet__tbl_cas(p, o, n) (__sync_val_compare_and_swap((p), (o), (n)) == (o))
#define innet__tbl_add(p, n)    __sync_fetch_and_add((p), (n))
#define innet__tbl_relax()      ((void)0)
#define INNET__TBL_EXECUTOR
#include "engine/table_algo.h"

_Static_assert(sizeof(struct innet_table_shared) * INNET_MAX_TABLES <= INNET_XDP_SERIAL_LOCK_OFF,
	       "the tables' counters end before the serial lock in innet_tmeta's page");

INNET__INLINE struct innet_table_slot *innet__tbl_slot(const struct innet__tbl_op *op, uint32_t k)
{
	return bpf_map_lookup_elem(innet__tslots((unsigned)op->ref.t), &k);
}

INNET__INLINE uint32_t *innet__tbl_lock(const struct innet__tbl_op *op)
{
	uint32_t home = (uint32_t)op->home;
	uint32_t page = home / (INNET__PAGE / 4);
	uint32_t *p = bpf_map_lookup_elem(innet__tlocks((unsigned)op->ref.t), &page);
	if (p == (void *)0)
		return (void *)0;
	return p + (home & (INNET__PAGE / 4 - 1));
}

INNET__INLINE struct innet_table_shared *innet__tbl_shared(const struct innet__tbl_op *op)
{
	return innet__tmeta((unsigned)op->ref.t);
}

/* Compare the key (op->ks bytes, a constant the verifier keeps exact) a word
 * at a time where the size allows: one branch per word for the verifier to
 * follow, not one per byte. The slot's key is 8-aligned; the caller's need
 * not be. */
INNET__INLINE bool innet__tbl_key_eq(const struct innet__tbl_op *op, const struct innet_table_slot *s)
{
	uint32_t ks = (uint32_t)op->ks;
	if (ks % 8 == 0) {
		for (uint32_t b = 0; b < INNET_TABLE_KEY_MAX; b += 8) {
			uint64_t x, y;
			if (b >= ks)
				break;
			__builtin_memcpy(&x, s->kv + b, 8);
			__builtin_memcpy(&y, op->key + b, 8);
			if (x != y)
				return false;
		}
		return true;
	}
	for (uint32_t b = 0; b < INNET_TABLE_KEY_MAX; b++) {
		if (b >= ks)
			break;
		if (s->kv[b] != op->key[b])
			return false;
	}
	return true;
}

INNET__INLINE void innet__tbl_val_out(const struct innet__tbl_op *op, const struct innet_table_slot *s)
{
	bpf_probe_read_kernel(op->val, (uint32_t)op->vs, s->kv + op->ks);
}

INNET__INLINE void innet__tbl_kv_in(const struct innet__tbl_op *op, struct innet_table_slot *s,
				    bool key_too)
{
	if (key_too)
		bpf_probe_read_kernel(s->kv, (uint32_t)op->ks, op->key);
	bpf_probe_read_kernel(s->kv + op->ks, (uint32_t)op->vs, op->val);
}

/* The data path's table calls (innet/dp.h's macros): one bounded attempt,
 * an enum innet_table_rc, as the user-space engine's innet_table_try_*. */
INNET__INLINE int innet__table_op(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t ks,
				  void *val, uint32_t vs, int what)
{
	uint32_t mask = INNET__L.tables[t].n_slots - 1;
	struct innet__tbl_op op = {
		.ref = { .t = t }, .key = key, .val = val, .ks = ks, .vs = vs,
		.home = (uint32_t)innet_hash(key, ks, 0) & mask, .mask = mask,
	};
	return what == 0 ? innet__tbl_lookup(&op)
			 : innet__tbl_write(&op, INNET__L.tables[t].capacity, what == 2);
}

INNET__INLINE int innet__table_lookup(struct innet_ctx *ctx, unsigned t, const void *key,
				      uint32_t ks, void *val, uint32_t vs)
{
	if (!innet__table_check(ctx, t, ks, vs))
		return INNET_TABLE_FAULT;
	return innet__table_op(ctx, t, key, ks, val, vs, 0);
}

/* Writes: Trio only, as on the user-space engine. */
INNET__INLINE bool innet__table_may_write(struct innet_ctx *ctx)
{
	if (ctx->model == INNET_MODEL_TRIO)
		return true;
	ctx->use.table_ops++;
	innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
	return false;
}

INNET__INLINE int innet__table_insert(struct innet_ctx *ctx, unsigned t, const void *key,
				      uint32_t ks, const void *val, uint32_t vs)
{
	if (!innet__table_may_write(ctx) || !innet__table_check(ctx, t, ks, vs))
		return INNET_TABLE_FAULT;
	return innet__table_op(ctx, t, key, ks, (void *)val, vs, 1);
}

INNET__INLINE int innet__table_delete(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t ks)
{
	if (!innet__table_may_write(ctx) || !innet__table_check(ctx, t, ks, 0xffffffffu))
		return INNET_TABLE_FAULT;
	return innet__table_op(ctx, t, key, ks, (void *)0, 0, 2);
}

/* ------------------------------------------------------------------------ */
/* Trio facilities: handed to the user-space engine through innet_ring.       */

INNET__INLINE int innet_emit(struct innet_ctx *ctx, const struct innet_out *out, bool is_group,
			     const void *data, uint32_t len)
{
	if (ctx->model != INNET_MODEL_TRIO) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return -1;
	}
	if (len > INNET_XDP_HANDOFF_MAX) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return -1;
	}
	ctx->use.emitted++;
	struct innet_xdp_stats *st = innet__stats();
	struct innet_xdp_rec *rec = bpf_ringbuf_reserve(&innet_ring, sizeof(*rec), 0);
	if (rec == (void *)0) {
		if (st)
			st->drops[INNET_DROP_TX_FULL]++;
		return -1;
	}
	rec->kind = INNET_XDP_REC_EMIT;
	rec->prog = (uint16_t)INNET__L.self;
	rec->is_group = is_group;
	rec->out.port = out->port;
	rec->out.group = out->group;
	rec->out.ip = out->ip;
	rec->out.udp = out->udp;
	rec->out.src_udp = out->src_udp;
	rec->out.reason = out->reason;
	rec->len = len;
	if (len > 0)
		bpf_probe_read_kernel(rec->data, INNET__CLAMP64(len, INNET_XDP_HANDOFF_MAX), data);
	bpf_ringbuf_submit(rec, 0);
	if (st) {
		st->emitted++;
		st->handoffs[INNET_XDP_HANDOFF_EMIT]++;
	}
	return 0;
}

INNET__INLINE struct innet_timer_slot *innet__timer_slot(uint32_t timer)
{
	uint32_t page = timer / (INNET__PAGE / sizeof(struct innet_timer_slot));
	uint8_t *p = bpf_map_lookup_elem(&innet_timers, &page);
	if (p == (void *)0)
		return (void *)0;
	return (struct innet_timer_slot *)p +
	       (timer & (INNET__PAGE / sizeof(struct innet_timer_slot) - 1));
}

INNET__INLINE int innet_timer_arm(struct innet_ctx *ctx, uint32_t timer, uint64_t delay_ns,
				  uint64_t arg)
{
	if (ctx->model != INNET_MODEL_TRIO) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return -1;
	}
	if (timer >= INNET__L.n_timers) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return -1;
	}
	struct innet_timer_slot *ts = innet__timer_slot(timer);
	struct innet_xdp_rec *rec = bpf_ringbuf_reserve(&innet_ring, sizeof(*rec), 0);
	if (ts == (void *)0 || rec == (void *)0) {
		if (rec)
			bpf_ringbuf_discard(rec, 0);
		return -1;
	}
	uint64_t deadline = ctx->now_ns + (delay_ns ? delay_ns : 1);
	*(volatile uint64_t *)&ts->arg = arg;
	*(volatile uint64_t *)&ts->deadline_ns = deadline;
	rec->kind = INNET_XDP_REC_TIMER;
	rec->prog = (uint16_t)INNET__L.self;
	rec->timer = timer;
	rec->deadline_ns = deadline;
	rec->arg = arg;
	rec->len = 0;
	bpf_ringbuf_submit(rec, 0);
	struct innet_xdp_stats *st = innet__stats();
	if (st)
		st->handoffs[INNET_XDP_HANDOFF_TIMER]++;
	return 0;
}

INNET__INLINE void innet_timer_cancel(struct innet_ctx *ctx, uint32_t timer)
{
	if (timer >= INNET__L.n_timers)
		return;
	struct innet_timer_slot *ts = innet__timer_slot(timer);
	if (ts != (void *)0)
		*(volatile uint64_t *)&ts->deadline_ns = 0;
}

/* ------------------------------------------------------------------------ */
/* Configuration, randomness, ports.                                          */

INNET__INLINE const void *innet_conf(const struct innet_ctx *ctx)
{
	return ctx->conf;
}

INNET__INLINE uint32_t innet_random(struct innet_ctx *ctx)
{
	(void)ctx;
	return bpf_get_prandom_u32();
}

INNET__INLINE uint32_t innet_port_peer_ip(struct innet_ctx *ctx, uint16_t port)
{
	(void)ctx;
	uint32_t k = port;
	const struct innet_xdp_port *pi = bpf_map_lookup_elem(&innet_ports, &k);
	return (pi != (void *)0 && port < INNET__L.n_ports) ? pi->peer_ip : 0;
}

/* Scratch memory (see innet/dp_user.h): a per-CPU map's value, the program
 * running alone on its CPU until it returns. NULL if the lookup fails. */
INNET__INLINE void *innet_scratch(struct innet_ctx *ctx)
{
	(void)ctx;
	uint32_t zero = 0;
	return bpf_map_lookup_elem(&innet_scratch_map, &zero);
}

/* NAME_dp.c's last line: the handler (and timer callback, which on XDP runs
 * in the user-space engine, natively) of this object. */
#define INNET_DATAPATH(name, handle_fn, timer_fn)                                        \
	INNET__INLINE enum innet_action innet__handle(struct innet_ctx *ctx,             \
						      struct innet_pkt *pkt)             \
	{                                                                                \
		return handle_fn(ctx, pkt);                                              \
	}
#define INNET_DATAPATH_USERSPACE(name, handle_fn, timer_fn, reason)                      \
	_Static_assert(0, "user-space-only data path compiled for XDP: " reason);

#endif /* INNET_DP_XDP_H */
