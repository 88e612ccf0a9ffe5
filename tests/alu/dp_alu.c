/*
 * dp_alu.c — a data path compiled for the ALU count (tests/alu/alu_check.c):
 * NAME_dp.c (named by -DINNET_DP_SOURCE) compiled with clang -target bpf, as
 * for the XDP target, but against the user-space engine's structures
 * (INNET_DP_USER_PRIMITIVES) and with every primitive out of line.
 *
 * What is left inline is the program's own code: its arithmetic, its
 * branches, its header and state field accesses. Every innet_* primitive —
 * packet bounds, register and table operations, hashing, random numbers,
 * innet_alu itself — becomes a call that the counting interpreter
 * (alu_vm.c) hands to the engine's own implementation, so its instructions
 * are the runtime's, not the handler's (on a switch they are the parser,
 * the stateful ALUs, the hash units; the resource model counts register and
 * table operations apart).
 *
 * eBPF calls take at most five arguments: the table macros pass their ids
 * and sizes packed in one word (constants: no instruction at run time), the
 * six-argument register-packet copies a pointer to their arguments.
 */

/* Rename the inline primitives while the headers define them ... */
#define innet_hash            innet__alu_inline_hash
#define innet_alu             innet__alu_inline_alu
#define innet_pkt_ptr         innet__alu_inline_pkt_ptr
#define innet_pkt_push        innet__alu_inline_pkt_push
#define innet_pkt_pull        innet__alu_inline_pkt_pull
#define innet_pkt_resize      innet__alu_inline_pkt_resize
#define innet_pkt_try_resize  innet__alu_inline_pkt_try_resize
#define innet_pass_up         innet__alu_inline_pass_up
#define innet_reg_read        innet__alu_inline_reg_read
#define innet_reg_write       innet__alu_inline_reg_write
#define innet_reg_fetch_add   innet__alu_inline_reg_fetch_add
#define innet_reg_fetch_or    innet__alu_inline_reg_fetch_or
#define innet_reg_fetch_and   innet__alu_inline_reg_fetch_and
#define innet_reg_swap        innet__alu_inline_reg_swap
#define innet_reg_cas         innet__alu_inline_reg_cas
#define innet_reg_fetch_max   innet__alu_inline_reg_fetch_max
#define innet_reg_span        innet__alu_inline_reg_span
#define innet_random          innet__alu_inline_random
#define innet_reg_to_pkt      innet__alu_inline_reg_to_pkt
#define innet_pkt_to_reg      innet__alu_inline_pkt_to_reg
#define INNET_DP_USER_PRIMITIVES 1
#include "innet/dp.h"
#undef innet_hash
#undef innet_alu
#undef innet_pkt_ptr
#undef innet_pkt_push
#undef innet_pkt_pull
#undef innet_pkt_resize
#undef innet_pkt_try_resize
#undef innet_pass_up
#undef innet_reg_read
#undef innet_reg_write
#undef innet_reg_fetch_add
#undef innet_reg_fetch_or
#undef innet_reg_fetch_and
#undef innet_reg_swap
#undef innet_reg_cas
#undef innet_reg_fetch_max
#undef innet_reg_span
#undef innet_random
#undef innet_reg_to_pkt
#undef innet_pkt_to_reg
#undef innet_table_lookup
#undef innet_table_insert
#undef innet_table_delete

/* ... and declare them as the calls the interpreter resolves by name
 * (alu_check.c's natives[]; the same prototypes as innet/dp*.h). */
uint64_t innet_hash(const void *data, size_t len, uint64_t seed);
void innet_alu(struct innet_ctx *ctx, uint32_t n);
void *innet_pkt_ptr(struct innet_pkt *p, uint32_t off, uint32_t n);
int innet_pkt_push(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n);
int innet_pkt_pull(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t n);
int innet_pkt_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len);
int innet_pkt_try_resize(struct innet_ctx *ctx, struct innet_pkt *p, uint32_t len);
enum innet_action innet_pass_up(struct innet_ctx *ctx, struct innet_pkt *p);
uint64_t innet_reg_read(struct innet_ctx *ctx, unsigned r, uint32_t idx);
void innet_reg_write(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
uint64_t innet_reg_fetch_add(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
uint64_t innet_reg_fetch_or(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
uint64_t innet_reg_fetch_and(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
uint64_t innet_reg_swap(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
bool innet_reg_cas(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t *expected,
		   uint64_t desired);
uint64_t innet_reg_fetch_max(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint64_t v);
void *innet_reg_span(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t n);
uint32_t innet_random(struct innet_ctx *ctx);

/* Table calls: the table id in bits 0-15, the key size in 16-31, the value
 * size in 32-63 (see the file comment). */
#define INNET__ALU_TSZ(t, ksz, vsz) \
	((uint64_t)(t) | (uint64_t)(ksz) << 16 | (uint64_t)(vsz) << 32)
int innet__alu_table_lookup(struct innet_ctx *ctx, uint64_t tsz, const void *key, void *val);
int innet__alu_table_insert(struct innet_ctx *ctx, uint64_t tsz, const void *key, const void *val);
int innet__alu_table_delete(struct innet_ctx *ctx, uint64_t tsz, const void *key);
#define innet_table_lookup(ctx, t, key, val)                                             \
	({                                                                               \
		INNET__TABLE_SIZES(key, val);                                            \
		innet__alu_table_lookup((ctx), INNET__ALU_TSZ((t), sizeof(*(key)), sizeof(*(val))), \
					(key), (val));                                   \
	})
#define innet_table_insert(ctx, t, key, val)                                             \
	({                                                                               \
		INNET__TABLE_SIZES(key, val);                                            \
		innet__alu_table_insert((ctx), INNET__ALU_TSZ((t), sizeof(*(key)), sizeof(*(val))), \
					(key), (val));                                   \
	})
#define innet_table_delete(ctx, t, key)                                                  \
	({                                                                               \
		INNET__TABLE_SIZES(key, key);                                            \
		innet__alu_table_delete((ctx), INNET__ALU_TSZ((t), sizeof(*(key)), 0), (key)); \
	})

/* Register <-> packet copies: six arguments, passed by pointer. */
struct innet__alu_regpkt {
	struct innet_ctx *ctx;
	struct innet_pkt *pkt;
	uint32_t r, idx, off, n;
};
void innet__alu_reg_to_pkt(const struct innet__alu_regpkt *a);
void innet__alu_pkt_to_reg(const struct innet__alu_regpkt *a);
#define innet_reg_to_pkt(ctx_, r_, idx_, pkt_, off_, n_)                                   \
	innet__alu_reg_to_pkt(&(struct innet__alu_regpkt){ (ctx_), (pkt_), (r_), (idx_), (off_), (n_) })
#define innet_pkt_to_reg(ctx_, pkt_, off_, r_, idx_, n_)                                   \
	innet__alu_pkt_to_reg(&(struct innet__alu_regpkt){ (ctx_), (pkt_), (r_), (idx_), (off_), (n_) })

/* The structures' layout as this compile sees it: alu_check.c compares it
 * with the native one before it runs anything (the interpreter hands native
 * pointers to this code). */
const uint32_t innet__alu_layout[] = {
	sizeof(struct innet_ctx),  __builtin_offsetof(struct innet_ctx, use),
	__builtin_offsetof(struct innet_ctx, fault), __builtin_offsetof(struct innet_ctx, prog),
	sizeof(struct innet_pkt),  __builtin_offsetof(struct innet_pkt, out),
	__builtin_offsetof(struct innet_pkt, buf_end), sizeof(struct innet_reg),
};

#include INNET_DP_SOURCE
