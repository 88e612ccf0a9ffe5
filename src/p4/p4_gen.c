/*
 * p4_gen.c — the code generator: a loaded P4 program (p4_ir.h) into one
 * innet data path, restricted C against innet/dp.h, that both targets
 * compile (docs/p4.md, "How v1model maps onto the program API").
 *
 * What it writes, in order:
 *
 *   struct p4_phv        metadata fields first (reset together), then the
 *                        headers' valid bits, stacks' next indices and fields;
 *                        a field is the smallest unsigned C type that holds
 *                        it (128-bit fields: unsigned __int128; wider: bytes)
 *   struct p4_st         the per-packet state in innet_scratch(): flags the
 *                        primitives set (clone, resubmit, recirculate,
 *                        digest, truncate, exit), the parsed length, the PHV;
 *                        the part up to the PHV travels with a hand-off
 *   helpers              stack element access by run-time index, field list
 *                        copies, calculations (hash / checksum inputs)
 *   p4_a<N>              one function per action: its primitives in order,
 *                        _jump / _jump_if_zero as gotos
 *   p4_t<N>              one function per table: build the key, look it up
 *                        (exact: innet table; lpm: one lookup per prefix length
 *                        in use, longest first; ternary / range: the sorted
 *                        records, first match), direct counter and meter, the
 *                        action, and which node is next
 *   p4_parse             the parser as a state machine of gotos
 *   p4_verify            verify_checksum
 *   p4_ingress/egress    the control graphs as gotos between nodes
 *   p4_deparse           update_checksum, then the valid headers in order
 *   #include "p4/p4rt_pipe.h"   the traffic manager and the handler, the same
 *                        for every program (hand-written, target-aware)
 *
 * Values: an expression is generated as a C expression with a type (see
 * struct val): 64-bit integers up to 64 bits, 128-bit ones up to 128,
 * signed where the value may be negative — so BMv2's infinite precision is
 * exact wherever it matters. A value that may have lost high bits (a shift by
 * a run-time count, a product too wide) is fine for what only needs the low
 * bits (assignment to a field, &, |, ^, +, -, *, <<: what p4c's masks then
 * cut) and refused where the high bits would matter (a comparison, >>, /).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/dp.h"
#include "p4/p4.h"

/* ------------------------------------------------------------------------ */
/* Output buffer and scratch strings                                          */

struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_vadd(struct sbuf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void sb_vadd(struct sbuf *b, const char *fmt, va_list ap)
{
	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		va_list aq;
		va_copy(aq, ap);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, aq);
		va_end(aq);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 1 << 16;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *ns = realloc(b->s, cap);
		if (ns == NULL) {
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
}

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sb_vadd(b, fmt, ap);
	va_end(ap);
}

struct gen {
	const struct p4_prog *p;
	struct p4_layout *lay;
	struct p4_arena *a;        /* scratch strings */
	struct sbuf out;
	char *err;
	size_t errlen;
	int failed;
	char where[256];           /* what is being generated, for messages */
	const struct p4_action *act;
	bool in_parser;
	uint32_t n_tmp;            /* temporaries */
	uint32_t log_site;         /* next log_msg site */
	uint32_t hbuf_bytes;       /* the calculation input buffer */
	uint32_t key_max, val_max; /* lookup buffers */
};

static int gfail(struct gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int gfail(struct gen *g, const char *fmt, ...)
{
	if (!g->failed) {
		/* (what the generator refuses, it says "not supported": the loader
		 * let it through, but innet cannot translate it faithfully) */
		int off = snprintf(g->err, g->errlen, "%s: not supported: ", g->where[0] ? g->where : "program");
		if (off < 0 || (size_t)off >= g->errlen)
			off = 0;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(g->err + off, g->errlen - (size_t)off, fmt, ap);
		va_end(ap);
		g->failed = -EINVAL;
	}
	return -EINVAL;
}

static char *fmt(struct gen *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
static char *fmt(struct gen *g, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(NULL, 0, f, ap);
	va_end(ap);
	char *s = n >= 0 ? p4_alloc(g->a, (size_t)n + 1) : NULL;
	if (s == NULL) {
		g->failed = -ENOMEM;
		snprintf(g->err, g->errlen, "out of memory generating code");
		return (char *)"0";
	}
	va_start(ap, f);
	vsnprintf(s, (size_t)n + 1, f, ap);
	va_end(ap);
	return s;
}

#define OUT(...) sb_add(&g->out, __VA_ARGS__)

/* ------------------------------------------------------------------------ */
/* Types of values                                                            */

enum vkind { VK_INT, VK_BOOL, VK_HEADER, VK_STACK, VK_UNION, VK_OTHER };

struct val {
	enum vkind kind;
	const char *s;             /* C expression */
	uint32_t bits;             /* |value| < 2^bits (exact values) */
	bool sgn;                  /* may be negative */
	bool wide;                 /* 128-bit representation */
	bool inexact;              /* high bits may be lost (only modular uses) */
	int hdr;                   /* VK_HEADER: the header, or -1 for a stack element */
	int stack;                 /* VK_HEADER of a stack element / VK_STACK: the stack */
	const char *idx;           /* VK_HEADER of a stack element: the index expression */
	const struct p4_expr *e;   /* what it came from */
};

static const struct val VERR = { .kind = VK_OTHER, .s = "0" };

static const char *ctype(const struct val *v)
{
	if (v->wide)
		return v->sgn ? "p4_s128" : "p4_u128";
	return v->sgn ? "int64_t" : "uint64_t";
}

/* Choose the representation of a value of `bits` magnitude bits. */
static void repr(struct val *v)
{
	uint32_t lim64 = v->sgn ? 63 : 64, lim128 = v->sgn ? 127 : 128;
	if (v->bits > lim128) {
		v->wide = true;
		v->inexact = true;
		v->bits = lim128;
	} else {
		v->wide = v->wide || v->bits > lim64;
	}
}

static struct val vint(const char *s, uint32_t bits, bool sgn)
{
	struct val v = { .kind = VK_INT, .s = s, .bits = bits, .sgn = sgn, .hdr = -1, .stack = -1 };
	repr(&v);
	return v;
}

static uint32_t bitlen(p4_u128 x)
{
	uint32_t n = 0;
	while (x) {
		n++;
		x >>= 1;
	}
	return n;
}

/* v converted to the type of a value with representation (wide, sgn). */
static const char *conv(struct gen *g, const struct val *v, bool wide, bool sgn)
{
	struct val t = { .wide = wide, .sgn = sgn };
	if (v->kind == VK_BOOL)
		return fmt(g, "((%s)(%s))", ctype(&t), v->s);
	if (v->wide == wide && v->sgn == sgn)
		return v->s;
	return fmt(g, "((%s)(%s))", ctype(&t), v->s);
}

static const char *u128_lit(struct gen *g, p4_u128 x)
{
	uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
	if (hi == 0)
		return fmt(g, "0x%llxull", (unsigned long long)lo);
	return fmt(g, "(((p4_u128)0x%llxull << 64) | 0x%llxull)", (unsigned long long)hi,
		   (unsigned long long)lo);
}

/* ------------------------------------------------------------------------ */
/* Fields                                                                     */

static const struct p4_htype *htype_of(struct gen *g, int h)
{
	return &g->p->htypes[g->p->headers[h].type];
}

static const struct p4_field *field_of(struct gen *g, int h, int f)
{
	return &htype_of(g, h)->fields[f];
}

/* The C lvalue of field f of header h in the PHV `phv` (an expression of
 * type struct p4_phv *). */
static const char *flv(struct gen *g, const char *phv, int h, int f)
{
	return fmt(g, "%s->h%d_%d", phv, h, f);
}

/* Storage type of a field of w bits. */
static const char *fstore(uint32_t w)
{
	if (w <= 8)
		return "uint8_t";
	if (w <= 16)
		return "uint16_t";
	if (w <= 32)
		return "uint32_t";
	if (w <= 64)
		return "uint64_t";
	return "p4_u128a";
}

/* A field read as a value. */
static struct val field_val(struct gen *g, const char *phv, int h, int f)
{
	const struct p4_field *fd = field_of(g, h, f);
	if (fd->varbit || fd->width > P4_MAX_WIDTH) {
		gfail(g, "field '%s.%s' (%u bits) used in an expression: fields wider than %u bits "
		      "can only be extracted, emitted, copied whole and matched",
		      g->p->headers[h].name, fd->name, fd->width, P4_MAX_WIDTH);
		return VERR;
	}
	const char *lv = flv(g, phv, h, f);
	if (fd->is_signed)
		return vint(fmt(g, "p4_sext64(%s, %u)", lv, fd->width), fd->width - 1, true);
	if (fd->width > 64)
		return vint(fmt(g, "((p4_u128)%s)", lv), fd->width, false);
	return vint(fmt(g, "((uint64_t)%s)", lv), fd->width, false);
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                                */

static struct val gen_expr(struct gen *g, const struct p4_expr *e);

/* An exact integer value (refuses inexact ones: `why` names the use). */
static struct val exact(struct gen *g, struct val v, const char *why)
{
	if (v.kind == VK_BOOL)
		return vint(fmt(g, "((uint64_t)(%s))", v.s), 1, false);
	if (v.kind != VK_INT) {
		gfail(g, "a %s where a number is expected", v.kind == VK_HEADER ? "header" : "non-number");
		return VERR;
	}
	if (v.inexact) {
		gfail(g, "%s of a value that may exceed %u bits (e.g. a shift by a run-time count); "
		      "innet computes with at most %u bits", why, P4_MAX_WIDTH, P4_MAX_WIDTH);
		return VERR;
	}
	return v;
}

static struct val as_int(struct gen *g, struct val v)
{
	if (v.kind == VK_BOOL)
		return vint(fmt(g, "((uint64_t)(%s))", v.s), 1, false);
	if (v.kind != VK_INT) {
		gfail(g, "a header or stack where a number is expected");
		return VERR;
	}
	return v;
}

static const char *as_bool(struct gen *g, struct val v)
{
	if (v.kind == VK_BOOL)
		return v.s;
	v = exact(g, v, "a truth test");
	return fmt(g, "(%s != 0)", v.s);
}

/* The header a VK_HEADER value names, as (valid-bit lvalue); for a stack
 * element by run-time index, through the generated accessors. */
static const char *hdr_valid(struct gen *g, const struct val *h, const char *phv)
{
	if (h->hdr >= 0)
		return fmt(g, "%s->v[%d]", phv, h->hdr);
	return fmt(g, "p4_s%d_valid(%s, %s)", h->stack, phv, h->idx);
}

static bool is_nonneg_const(const struct p4_expr *e)
{
	return e->kind == P4E_CONST && !e->neg;
}

static struct val binop(struct gen *g, const struct p4_expr *e)
{
	struct val a = gen_expr(g, e->a), b = gen_expr(g, e->b);
	if (g->failed)
		return VERR;
	struct val r = { .kind = VK_INT, .hdr = -1, .stack = -1 };
	switch (e->op) {
	case P4OP_LAND:
	case P4OP_LOR: {
		struct val v = { .kind = VK_BOOL, .hdr = -1, .stack = -1 };
		v.s = fmt(g, "(%s %s %s)", as_bool(g, a), e->op == P4OP_LAND ? "&&" : "||", as_bool(g, b));
		return v;
	}
	case P4OP_EQ: case P4OP_NE: case P4OP_GT: case P4OP_GE: case P4OP_LT: case P4OP_LE: {
		static const char *cop[] = { "==", "!=", ">", ">=", "<", "<=" };
		const char *o = cop[e->op - P4OP_EQ];
		struct val v = { .kind = VK_BOOL, .hdr = -1, .stack = -1 };
		if (a.kind == VK_BOOL && b.kind == VK_BOOL) {
			v.s = fmt(g, "(%s %s %s)", a.s, o, b.s);
			return v;
		}
		a = exact(g, as_int(g, a), "a comparison");
		b = exact(g, as_int(g, b), "a comparison");
		if (g->failed)
			return VERR;
		bool sgn = a.sgn || b.sgn;
		/* a common type that holds both exactly */
		uint32_t need = 0;
		if (sgn) {
			uint32_t ba = a.bits + (a.sgn ? 0 : 1), bb = b.bits + (b.sgn ? 0 : 1);
			need = (ba > bb ? ba : bb);
		}
		bool wide = a.wide || b.wide || (sgn && need > 63);
		v.s = fmt(g, "(%s %s %s)", conv(g, &a, wide, sgn), o, conv(g, &b, wide, sgn));
		return v;
	}
	default:
		break;
	}
	a = as_int(g, a);
	b = as_int(g, b);
	if (g->failed)
		return VERR;
	switch (e->op) {
	case P4OP_ADD:
	case P4OP_SUB:
	case P4OP_MUL: {
		r.sgn = a.sgn || b.sgn || e->op == P4OP_SUB;
		uint32_t mx = a.bits > b.bits ? a.bits : b.bits;
		r.bits = e->op == P4OP_MUL ? a.bits + b.bits : mx + 1;
		r.inexact = a.inexact || b.inexact;
		/* a difference of two values below 2^64 fits a signed 128-bit value;
		 * a difference of narrower ones a signed 64-bit value */
		repr(&r);
		static const char *aop[] = { "+", "-", "*" };
		r.s = fmt(g, "(%s %s %s)", conv(g, &a, r.wide, r.sgn), aop[e->op - P4OP_ADD],
			  conv(g, &b, r.wide, r.sgn));
		return r;
	}
	case P4OP_SHL: {
		struct val n = exact(g, b, "a shift count");
		if (g->failed)
			return VERR;
		r.sgn = a.sgn;
		r.inexact = a.inexact;
		if (e->b->kind == P4E_CONST && !e->b->neg && e->b->val < 256)
			r.bits = a.bits + (uint32_t)e->b->val;
		else
			r.bits = 1000;   /* unbounded */
		repr(&r);
		if (r.sgn)
			r.s = fmt(g, "((%s)p4_shl128((p4_u128)%s, %s))", ctype(&r), conv(g, &a, true, true),
				  conv(g, &n, true, false));
		else if (r.wide)
			r.s = fmt(g, "p4_shl128(%s, %s)", conv(g, &a, true, false), conv(g, &n, true, false));
		else
			r.s = fmt(g, "p4_shl64(%s, %s)", conv(g, &a, false, false), conv(g, &n, true, false));
		return r;
	}
	case P4OP_SHR: {
		a = exact(g, a, "a right shift");
		struct val n = exact(g, b, "a shift count");
		if (g->failed)
			return VERR;
		r = a;
		if (a.sgn)
			r.s = a.wide ? fmt(g, "p4_sar128(%s, %s)", a.s, conv(g, &n, true, false))
				     : fmt(g, "p4_sar64(%s, %s)", a.s, conv(g, &n, true, false));
		else
			r.s = a.wide ? fmt(g, "p4_shr128(%s, %s)", a.s, conv(g, &n, true, false))
				     : fmt(g, "p4_shr64(%s, %s)", a.s, conv(g, &n, true, false));
		return r;
	}
	case P4OP_AND:
	case P4OP_OR:
	case P4OP_XOR: {
		static const char *bop[] = { "&", "|", "^" };
		r.sgn = e->op == P4OP_AND ? (a.sgn && b.sgn) : (a.sgn || b.sgn);
		r.bits = a.bits > b.bits ? a.bits : b.bits;
		r.inexact = a.inexact || b.inexact;
		bool mask = false;
		if (e->op == P4OP_AND && (is_nonneg_const(e->a) || is_nonneg_const(e->b))) {
			/* a mask: the result is exact and as wide as the mask */
			const struct p4_expr *m = is_nonneg_const(e->b) ? e->b : e->a;
			const struct val *o = m == e->b ? &a : &b;
			r.bits = bitlen(m->val);
			if (!o->inexact && !o->sgn && o->bits < r.bits)
				r.bits = o->bits;
			r.inexact = false;
			r.sgn = false;
			mask = true;
		}
		bool wide = a.wide || b.wide || r.bits > 64;
		bool csgn = a.sgn || b.sgn;
		r.wide = wide;
		/* compute in the operands' common representation, then view the
		 * result as its own */
		struct val t = { .wide = wide, .sgn = csgn };
		const char *s = fmt(g, "(%s %s %s)", conv(g, &a, wide, csgn), bop[e->op - P4OP_AND],
				    conv(g, &b, wide, csgn));
		if (mask || r.sgn != csgn) {
			repr(&r);
			r.s = fmt(g, "((%s)%s)", ctype(&r), s);
		} else {
			(void)t;
			repr(&r);
			r.s = s;
		}
		return r;
	}
	case P4OP_TWO_COMP_MOD: {
		if (e->b->kind != P4E_CONST || e->b->neg || e->b->val == 0 || e->b->val > 64)
			return gfail(g, "two_comp_mod to a width other than a constant 1..64"), VERR;
		uint32_t w = (uint32_t)e->b->val;
		r.sgn = true;
		r.bits = w - 1;
		repr(&r);
		r.s = fmt(g, "p4_tcm64((uint64_t)%s, %u)", a.s, w);
		return r;
	}
	case P4OP_SAT_CAST:
	case P4OP_USAT_CAST: {
		a = exact(g, a, "a saturating cast");
		if (e->b->kind != P4E_CONST || e->b->neg || e->b->val == 0 || e->b->val > 64)
			return gfail(g, "a saturating cast to a width other than a constant 1..64"), VERR;
		uint32_t w = (uint32_t)e->b->val;
		bool s = e->op == P4OP_SAT_CAST;
		r.sgn = s;
		r.bits = s ? w - 1 : w;
		repr(&r);
		r.s = fmt(g, "((%s)%s(%s, %u))", ctype(&r), s ? "p4_sat_cast" : "p4_usat_cast",
			  conv(g, &a, true, true), w);
		return r;
	}
	case P4OP_DIV:
	case P4OP_MOD: {
		a = exact(g, a, "a division");
		b = exact(g, b, "a division");
		if (g->failed)
			return VERR;
		if (a.sgn || b.sgn)
			return gfail(g, "division of signed values"), VERR;
		r = a;
		bool wide = a.wide || b.wide;
		r.wide = wide;
		const char *bs = conv(g, &b, wide, false);
		r.s = fmt(g, "(%s == 0 ? 0 : %s %s %s)", bs, conv(g, &a, wide, false),
			  e->op == P4OP_DIV ? "/" : "%", bs);
		return r;
	}
	default:
		break;
	}
	gfail(g, "unsupported binary operator");
	return VERR;
}

/* A stack element header by index: VK_HEADER with stack + index. */
static struct val stack_elem(struct gen *g, const struct p4_expr *e)
{
	if (e->a->kind != P4E_STACK) {
		gfail(g, "dereference of something other than a header stack");
		return VERR;
	}
	struct val i = exact(g, as_int(g, gen_expr(g, e->b)), "a stack index");
	if (g->failed)
		return VERR;
	struct val v = { .kind = VK_HEADER, .hdr = -1, .stack = e->a->idx, .e = e };
	v.idx = fmt(g, "(uint32_t)%s", conv(g, &i, false, false));
	/* a constant index names the header itself */
	if (e->b->kind == P4E_CONST && !e->b->neg && e->b->val < g->p->stacks[e->a->idx].size)
		v.hdr = g->p->stacks[e->a->idx].headers[(uint32_t)e->b->val];
	return v;
}

static struct val gen_expr(struct gen *g, const struct p4_expr *e)
{
	if (g->failed || e == NULL)
		return VERR;
	struct val v = { .kind = VK_INT, .hdr = -1, .stack = -1, .e = e };
	switch (e->kind) {
	case P4E_FIELD:
		return field_val(g, "(&s->phv)", e->h, e->f);
	case P4E_CONST:
		if (e->neg) {
			if (e->val > ((p4_u128)1 << 126))
				return gfail(g, "a negative constant beyond 127 bits"), VERR;
			v = vint(fmt(g, "(-(p4_s128)%s)", u128_lit(g, e->val)), bitlen(e->val), true);
			if (!v.wide)
				v.s = fmt(g, "(-(int64_t)%s)", u128_lit(g, e->val));
			return v;
		}
		v = vint(u128_lit(g, e->val), bitlen(e->val), false);
		if (v.wide)
			v.s = fmt(g, "((p4_u128)%s)", v.s);
		else
			v.s = fmt(g, "((uint64_t)%s)", v.s);
		return v;
	case P4E_BOOL:
		v.kind = VK_BOOL;
		v.s = e->val ? "1" : "0";
		return v;
	case P4E_RUNTIME:
	case P4E_LOCAL: {
		if (g->act == NULL || (uint32_t)e->idx >= g->act->n_params)
			return gfail(g, "action data outside an action"), VERR;
		const struct p4_param *pp = &g->act->params[e->idx];
		if (pp->width > P4_MAX_WIDTH)
			return gfail(g, "parameter '%s' of %u bits in an expression", pp->name, pp->width), VERR;
		v = vint(NULL, pp->width, false);
		v.s = v.wide ? fmt(g, "p4_ld_be(ad + %u, %u)", pp->byte_off, p4_bytes(pp->width))
			     : fmt(g, "((uint64_t)p4_ld_be(ad + %u, %u))", pp->byte_off, p4_bytes(pp->width));
		return v;
	}
	case P4E_HEADER:
		v.kind = VK_HEADER;
		v.hdr = e->h;
		v.s = "";
		return v;
	case P4E_STACK:
		v.kind = VK_STACK;
		v.stack = e->idx;
		v.s = "";
		return v;
	case P4E_UNION:
		v.kind = VK_UNION;
		v.stack = e->idx;
		v.s = "";
		return v;
	case P4E_LOOKAHEAD:
		if (!g->in_parser)
			return gfail(g, "lookahead outside the parser"), VERR;
		/* the parser checked la<off>_<w> before the operation (hoisted) */
		v = vint(NULL, e->width, false);
		v.s = v.wide ? fmt(g, "p4_getbits(la%u_%u, %u, %u)", e->off, e->width, e->off % 8, e->width)
			     : fmt(g, "((uint64_t)p4_getbits(la%u_%u, %u, %u))", e->off, e->width, e->off % 8,
				   e->width);
		return v;
	case P4E_STACK_FIELD: {
		const struct p4_field *fd = field_of(g, e->h, e->f);
		if (fd->width > P4_MAX_WIDTH)
			return gfail(g, "stack field '%s' wider than %u bits", fd->name, P4_MAX_WIDTH), VERR;
		v = vint(NULL, fd->width, false);
		v.s = fmt(g, "((%s)p4_s%d_get%d(&s->phv, (uint32_t)s->phv.snext[%d] - 1u))",
			  v.wide ? "p4_u128" : "uint64_t", e->idx, e->f, e->idx);
		if (fd->is_signed)
			v = vint(fmt(g, "p4_sext64(%s, %u)", v.s, fd->width), fd->width - 1, true);
		return v;
	}
	case P4E_OP:
		break;
	default:
		gfail(g, "unsupported value in an expression");
		return VERR;
	}
	switch (e->op) {
	case P4OP_LNOT: {
		struct val a = gen_expr(g, e->a);
		v.kind = VK_BOOL;
		v.s = fmt(g, "(!%s)", as_bool(g, a));
		return v;
	}
	case P4OP_NOT:
	case P4OP_NEG: {
		struct val a = as_int(g, gen_expr(g, e->a));
		if (g->failed)
			return VERR;
		v.sgn = true;
		v.bits = a.bits + 1;
		v.inexact = a.inexact;
		repr(&v);
		v.s = fmt(g, "(%s%s)", e->op == P4OP_NOT ? "~" : "-", conv(g, &a, v.wide, true));
		return v;
	}
	case P4OP_VALID: {
		struct val h = gen_expr(g, e->a);
		if (h.kind != VK_HEADER)
			return gfail(g, "valid() of something other than a header"), VERR;
		v.kind = VK_BOOL;
		v.s = fmt(g, "(%s != 0)", hdr_valid(g, &h, "(&s->phv)"));
		return v;
	}
	case P4OP_VALID_UNION: {
		if (e->a->kind != P4E_UNION)
			return gfail(g, "valid_union() of something other than a union"), VERR;
		const struct p4_union *u = &g->p->unions[e->a->idx];
		char *s = fmt(g, "(0");
		for (uint32_t i = 0; i < u->n; i++)
			s = fmt(g, "%s || s->phv.v[%d]", s, u->headers[i]);
		v.kind = VK_BOOL;
		v.s = fmt(g, "%s)", s);
		return v;
	}
	case P4OP_D2B: {
		struct val a = gen_expr(g, e->a);
		v.kind = VK_BOOL;
		v.s = as_bool(g, a);
		return v;
	}
	case P4OP_B2D: {
		struct val a = gen_expr(g, e->a);
		if (a.kind == VK_BOOL)
			return vint(fmt(g, "((uint64_t)(%s))", a.s), 1, false);
		return as_int(g, a);
	}
	case P4OP_TERNARY: {
		const char *c = as_bool(g, gen_expr(g, e->c));
		struct val a = gen_expr(g, e->a), b = gen_expr(g, e->b);
		if (g->failed)
			return VERR;
		if (a.kind == VK_BOOL && b.kind == VK_BOOL) {
			v.kind = VK_BOOL;
			v.s = fmt(g, "(%s ? %s : %s)", c, a.s, b.s);
			return v;
		}
		a = as_int(g, a);
		b = as_int(g, b);
		v.sgn = a.sgn || b.sgn;
		v.bits = (a.bits > b.bits ? a.bits : b.bits) + (v.sgn && (!a.sgn || !b.sgn) ? 1 : 0);
		v.inexact = a.inexact || b.inexact;
		repr(&v);
		v.wide = v.wide || a.wide || b.wide;
		v.s = fmt(g, "(%s ? %s : %s)", c, conv(g, &a, v.wide, v.sgn), conv(g, &b, v.wide, v.sgn));
		return v;
	}
	case P4OP_DEREF_STACK:
		return stack_elem(g, e);
	case P4OP_LAST_STACK_INDEX:
	case P4OP_SIZE_STACK: {
		if (e->a->kind != P4E_STACK)
			return gfail(g, "a stack operation on something other than a stack"), VERR;
		v = vint(NULL, 32, e->op == P4OP_LAST_STACK_INDEX);
		v.s = e->op == P4OP_SIZE_STACK ? fmt(g, "((uint64_t)s->phv.snext[%d])", e->a->idx)
					       : fmt(g, "((int64_t)s->phv.snext[%d] - 1)", e->a->idx);
		return v;
	}
	case P4OP_ACCESS_FIELD: {
		struct val h = gen_expr(g, e->a);
		if (g->failed)
			return VERR;
		if (h.kind != VK_HEADER)
			return gfail(g, "field access on something other than a header"), VERR;
		if (h.hdr >= 0)
			return field_val(g, "(&s->phv)", h.hdr, e->idx);
		int h0 = g->p->stacks[h.stack].headers[0];
		const struct p4_field *fd = field_of(g, h0, e->idx);
		if (fd->width > P4_MAX_WIDTH || fd->varbit)
			return gfail(g, "field '%s' (%u bits) of a stack element in an expression", fd->name,
				     fd->width), VERR;
		v = vint(NULL, fd->width, false);
		v.s = fmt(g, "((%s)p4_s%d_get%d(&s->phv, %s))", v.wide ? "p4_u128" : "uint64_t", h.stack,
			  e->idx, h.idx);
		if (fd->is_signed)
			v = vint(fmt(g, "p4_sext64(%s, %u)", v.s, fd->width), fd->width - 1, true);
		return v;
	}
	case P4OP_DEREF_UNION_STACK:
	case P4OP_ACCESS_UNION_HEADER:
		gfail(g, "header union stacks are not supported");
		return VERR;
	default:
		return binop(g, e);
	}
}

/* ------------------------------------------------------------------------ */
/* Assignment                                                                 */

/* Store the low bits of v (int) into the field lvalue of w bits. */
static void store_field(struct gen *g, const char *lv, const struct p4_field *fd, struct val v,
			const char *ind)
{
	v = as_int(g, v);
	if (g->failed)
		return;
	uint32_t w = fd->width;
	if (w <= 64)
		OUT("%s%s = (%s)(%s & 0x%llxull);\n", ind, lv, fstore(w), conv(g, &v, v.wide, false),
		    (unsigned long long)(w >= 64 ? ~0ull : ((1ull << w) - 1)));
	else
		OUT("%s%s = (p4_u128)%s & p4_mask128(%u);\n", ind, lv, conv(g, &v, true, false), w);
}

/* The field a wide (> 128 bits) assignment names, or -1. */
static int wide_field(struct gen *g, const struct p4_expr *e, int *h, int *f)
{
	if (e->kind != P4E_FIELD)
		return -1;
	const struct p4_field *fd = field_of(g, e->h, e->f);
	if (fd->width <= P4_MAX_WIDTH && !fd->varbit)
		return -1;
	*h = e->h;
	*f = e->f;
	return 0;
}

/* Whether e is a fixed-width field of width w > 128 bits (its PHV bytes are
 * a register element's, big-endian). */
static bool wide_same(struct gen *g, const struct p4_expr *e, uint32_t w, int *h, int *f)
{
	return wide_field(g, e, h, f) == 0 && !field_of(g, *h, *f)->varbit &&
	       field_of(g, *h, *f)->width == w;
}

static void gen_assign(struct gen *g, const struct p4_expr *dst, const struct p4_expr *src,
		       const char *ind)
{
	int dh, df, sh, sf;
	if (wide_field(g, dst, &dh, &df) == 0) {
		const struct p4_field *fd = field_of(g, dh, df);
		if (fd->varbit)
			return (void)gfail(g, "assignment to a variable-length field outside assign_VL");
		if (wide_field(g, src, &sh, &sf) == 0 && field_of(g, sh, sf)->width == fd->width) {
			OUT("%s__builtin_memcpy(s->phv.h%d_%d, s->phv.h%d_%d, %u);\n", ind, dh, df, sh, sf,
			    p4_bytes(fd->width));
			return;
		}
		if (src->kind == P4E_CONST && !src->neg) {
			OUT("%s__builtin_memset(s->phv.h%d_%d, 0, %u);\n", ind, dh, df, p4_bytes(fd->width));
			OUT("%sp4_st_be(s->phv.h%d_%d + %u, 16, %s);\n", ind, dh, df, p4_bytes(fd->width) - 16,
			    u128_lit(g, src->val));
			return;
		}
		return (void)gfail(g, "assignment to the %u-bit field '%s' from something other than "
				   "a field of its width or a constant", fd->width, fd->name);
	}
	struct val v = gen_expr(g, src);
	if (g->failed)
		return;
	if (dst->kind == P4E_FIELD) {
		store_field(g, flv(g, "(&s->phv)", dst->h, dst->f), field_of(g, dst->h, dst->f), v, ind);
		return;
	}
	if (dst->kind == P4E_OP && dst->op == P4OP_ACCESS_FIELD) {
		struct val h = gen_expr(g, dst->a);
		if (g->failed)
			return;
		if (h.kind != VK_HEADER)
			return (void)gfail(g, "assignment to a field of something other than a header");
		if (h.hdr >= 0) {
			store_field(g, flv(g, "(&s->phv)", h.hdr, dst->idx), field_of(g, h.hdr, dst->idx), v, ind);
			return;
		}
		int h0 = g->p->stacks[h.stack].headers[0];
		const struct p4_field *fd = field_of(g, h0, dst->idx);
		if (fd->width > P4_MAX_WIDTH)
			return (void)gfail(g, "assignment to a wide field of a stack element");
		v = as_int(g, v);
		OUT("%sp4_s%d_set%d(&s->phv, %s, (p4_u128)%s);\n", ind, h.stack, dst->idx, h.idx,
		    conv(g, &v, true, false));
		return;
	}
	gfail(g, "assignment to something other than a field");
}

/* ------------------------------------------------------------------------ */
/* The PHV                                                                    */

static uint32_t hdr_bytes(struct gen *g, int h)
{
	const struct p4_htype *t = htype_of(g, h);
	return (t->fixed_bits + 7) / 8;
}

static void gen_phv(struct gen *g)
{
	const struct p4_prog *p = g->p;
	OUT("/* The headers and metadata of one packet: metadata first (reset\n"
	    " * together), then validity, stacks' next indices, the headers' fields. */\n");
	OUT("typedef p4_u128 p4_u128a __attribute__((aligned(8)));\n");
	OUT("struct p4_phv {\n");
	for (int i = 0; i < P4S_COUNT; i++)
		if (p->std[i].h < 0)
			OUT("\tuint64_t dummy_%d;   /* (the program has no such field) */\n", i);
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			OUT("\tuint8_t meta_end[8];\n");
			OUT("\tuint8_t v[%u];              /* header valid */\n", p->n_headers ? p->n_headers : 1);
			OUT("\tuint8_t snext[%u];          /* stacks' next index */\n",
			    p->n_stacks ? p->n_stacks : 1);
			OUT("\tuint16_t vlen[%u];          /* varbit bytes, per header */\n",
			    p->n_headers ? p->n_headers : 1);
		}
		for (uint32_t h = 0; h < p->n_headers; h++) {
			if (p->headers[h].metadata != (pass == 0))
				continue;
			const struct p4_htype *t = htype_of(g, (int)h);
			for (uint32_t f = 0; f < t->n_fields; f++) {
				const struct p4_field *fd = &t->fields[f];
				if (fd->varbit || fd->width > P4_MAX_WIDTH)
					OUT("\tuint8_t h%u_%u[%u];   /* %s.%s */\n", h, f, p4_bytes(fd->width),
					    p->headers[h].name, fd->name);
				else
					OUT("\t%s h%u_%u;   /* %s.%s : %u */\n", fstore(fd->width), h, f,
					    p->headers[h].name, fd->name, fd->width);
			}
		}
	}
	OUT("};\n\n");
}

/* ------------------------------------------------------------------------ */
/* Stack accessors and header operations                                      */

static void gen_stack_helpers(struct gen *g)
{
	const struct p4_prog *p = g->p;
	for (uint32_t s = 0; s < p->n_stacks; s++) {
		const struct p4_stack *st = &p->stacks[s];
		const struct p4_htype *t = &p->htypes[st->type];
		OUT("P4_INLINE uint8_t *p4_s%u_vp(struct p4_phv *phv, uint32_t i)\n{\n", s);
		OUT("\tswitch (i) {\n");
		for (uint32_t i = 0; i < st->size; i++)
			OUT("\tcase %u: return &phv->v[%d];\n", i, st->headers[i]);
		OUT("\t}\n\treturn (void *)0;\n}\n");
		OUT("P4_INLINE uint8_t p4_s%u_valid(struct p4_phv *phv, uint32_t i)\n{\n", s);
		OUT("\tuint8_t *v = p4_s%u_vp(phv, i);\n\treturn v ? *v : 0;\n}\n", s);
		for (uint32_t f = 0; f < t->n_fields; f++) {
			const struct p4_field *fd = &t->fields[f];
			if (fd->varbit || fd->width > P4_MAX_WIDTH)
				continue;
			OUT("P4_INLINE p4_u128 p4_s%u_get%u(struct p4_phv *phv, uint32_t i)\n{\n", s, f);
			OUT("\tswitch (i) {\n");
			for (uint32_t i = 0; i < st->size; i++)
				OUT("\tcase %u: return phv->h%d_%u;\n", i, st->headers[i], f);
			OUT("\t}\n\treturn 0;\n}\n");
			OUT("P4_INLINE void p4_s%u_set%u(struct p4_phv *phv, uint32_t i, p4_u128 x)\n{\n",
			    s, f);
			OUT("\tswitch (i) {\n");
			for (uint32_t i = 0; i < st->size; i++)
				OUT("\tcase %u: phv->h%d_%u = (%s)(x & p4_mask128(%u)); break;\n", i,
				    st->headers[i], f, fstore(fd->width), fd->width);
			OUT("\t}\n}\n");
		}
	}
	OUT("\n");
}

/* Copy header src to dst (same type), fields and validity. */
static void gen_copy_header(struct gen *g, int dst, int src, const char *dphv, const char *sphv,
			    const char *ind)
{
	const struct p4_htype *t = htype_of(g, dst);
	OUT("%s%s->v[%d] = %s->v[%d];\n", ind, dphv, dst, sphv, src);
	for (uint32_t f = 0; f < t->n_fields; f++) {
		const struct p4_field *fd = &t->fields[f];
		if (fd->varbit || fd->width > P4_MAX_WIDTH)
			OUT("%s__builtin_memcpy(%s->h%d_%u, %s->h%d_%u, %u);\n", ind, dphv, dst, f, sphv, src, f,
			    p4_bytes(fd->width));
		else
			OUT("%s%s->h%d_%u = %s->h%d_%u;\n", ind, dphv, dst, f, sphv, src, f);
	}
	if (t->varbit >= 0)
		OUT("%s%s->vlen[%d] = %s->vlen[%d];\n", ind, dphv, dst, sphv, src);
}

/* Zero a header's fields (setValid of an invalid header resets it). */
static void gen_zero_header(struct gen *g, int h, const char *ind)
{
	const struct p4_htype *t = htype_of(g, h);
	for (uint32_t f = 0; f < t->n_fields; f++) {
		const struct p4_field *fd = &t->fields[f];
		if (fd->varbit || fd->width > P4_MAX_WIDTH)
			OUT("%s__builtin_memset(s->phv.h%d_%u, 0, %u);\n", ind, h, f, p4_bytes(fd->width));
		else
			OUT("%ss->phv.h%d_%u = 0;\n", ind, h, f);
	}
	if (t->varbit >= 0)
		OUT("%ss->phv.vlen[%d] = 0;\n", ind, h);
}

/* add_header / remove_header of a static header. */
static void gen_set_valid(struct gen *g, int h, bool valid, const char *ind)
{
	const struct p4_prog *p = g->p;
	uint32_t nb = hdr_bytes(g, h);
	if (valid) {
		OUT("%sif (!s->phv.v[%d]) {\n", ind, h);
		char ind2[32];
		snprintf(ind2, sizeof(ind2), "%s\t", ind);
		gen_zero_header(g, h, ind2);
		OUT("%s\ts->phv.v[%d] = 1;\n", ind, h);
		if (!p->headers[h].metadata)
			OUT("%s\ts->plen += %u;\n", ind, nb);
		int u = p->headers[h].onion;
		if (u >= 0)
			for (uint32_t k = 0; k < p->unions[u].n; k++) {
				int o = p->unions[u].headers[k];
				if (o != h)
					OUT("%s\tif (s->phv.v[%d]) { s->phv.v[%d] = 0; s->plen -= %u; }\n", ind, o, o,
					    hdr_bytes(g, o));
			}
		OUT("%s}\n", ind);
	} else {
		OUT("%sif (s->phv.v[%d]) {\n%s\ts->phv.v[%d] = 0;\n", ind, h, ind, h);
		if (!p->headers[h].metadata)
			OUT("%s\ts->plen -= %u;\n", ind, nb);
		OUT("%s}\n", ind);
	}
}

static void gen_set_valid_dyn(struct gen *g, const struct val *h, bool valid, const char *ind)
{
	const struct p4_stack *st = &g->p->stacks[h->stack];
	OUT("%sswitch (%s) {\n", ind, h->idx);
	char ind2[32];
	snprintf(ind2, sizeof(ind2), "%s\t", ind);
	for (uint32_t i = 0; i < st->size; i++) {
		OUT("%scase %u:\n", ind, i);
		gen_set_valid(g, st->headers[i], valid, ind2);
		OUT("%s\tbreak;\n", ind);
	}
	OUT("%s}\n", ind);
}

/* push_front / pop_front of a stack by a constant count. */
static void gen_push_pop(struct gen *g, int si, uint32_t n, bool push, const char *ind)
{
	const struct p4_stack *st = &g->p->stacks[si];
	uint32_t sz = st->size;
	if (n == 0)
		return;
	if (push) {
		for (int i = (int)sz - 1; i >= 0; i--) {
			if ((uint32_t)i >= n)
				gen_copy_header(g, st->headers[i], st->headers[(uint32_t)i - n], "(&s->phv)",
						"(&s->phv)", ind);
			else
				OUT("%ss->phv.v[%d] = 0;\n", ind, st->headers[i]);
		}
		OUT("%ss->phv.snext[%d] = (uint8_t)(s->phv.snext[%d] + %u > %u ? %u : s->phv.snext[%d] + %u);\n",
		    ind, si, si, n, sz, sz, si, n);
	} else {
		for (uint32_t i = 0; i < sz; i++) {
			if (i + n < sz)
				gen_copy_header(g, st->headers[i], st->headers[i + n], "(&s->phv)", "(&s->phv)", ind);
			else
				OUT("%ss->phv.v[%d] = 0;\n", ind, st->headers[i]);
		}
		OUT("%ss->phv.snext[%d] = (uint8_t)(s->phv.snext[%d] > %u ? s->phv.snext[%d] - %u : 0);\n",
		    ind, si, si, n, si, n);
	}
}

/* ------------------------------------------------------------------------ */
/* Calculations: the input bytes (bit-packed fields, skipping invalid        */
/* headers), then the algorithm.                                              */

static int algo_id(enum p4_algo a)
{
	switch (a) {
	case P4A_CRC16: return 0;
	case P4A_CRC32: return 1;
	case P4A_CRC_CCITT: return 2;
	case P4A_CSUM16: return 3;
	case P4A_IDENTITY: return 4;
	case P4A_XOR16: return 5;
	case P4A_XXH64: return 6;
	case P4A_CRC8_CUSTOM: return 7;
	case P4A_CRC16_CUSTOM: return 8;
	case P4A_CRC32_CUSTOM: return 9;
	case P4A_CRC64_CUSTOM: return 10;
	case P4A_XOR32: return 11;
	default: return -1;
	}
}

/* The bits a field list of a calculation can take (an upper bound). */
static uint32_t calc_bits(struct gen *g, const struct p4_calc *c)
{
	uint32_t bits = 0;
	for (uint32_t i = 0; i < c->n_in; i++) {
		const struct p4_calc_input *in = &c->in[i];
		if (in->kind == P4CI_FIELD)
			bits += field_of(g, in->e->h, in->e->f)->width;
		else if (in->kind == P4CI_CONST)
			bits += in->bits;
		else if (in->kind == P4CI_HEADER)
			bits += htype_of(g, in->e->h)->fixed_bits;
	}
	return bits;
}

/* A function p4_calc<N>(ctx, pkt, s) returning the calculation's value. The
 * input buffer is s->hbuf. */
/* The putbits of a hash or checksum input at hbuf bit nb + k: at a constant
 * offset when nb is known here (cnb >= 0: p4_putbits folds to byte stores;
 * p4_putbits_var, for a run-time offset, sets an unaligned field a bit at a
 * time). p4_putbits takes up to 120 bits at any offset, 128 aligned. */
static void gen_put_in(struct gen *g, const char *ind, int64_t cnb, uint32_t k, uint32_t w, const char *v)
{
	uint64_t at = (uint64_t)cnb + k;
	if (cnb >= 0 && (w <= 120 || (at % 8 == 0 && w % 8 == 0)))
		OUT("%sp4_putbits(s->hbuf, %llu, %u, %s);\n", ind, (unsigned long long)at, w, v);
	else if (k == 0)
		OUT("%sp4_putbits_var(s->hbuf, nb, %u, %s);\n", ind, w, v);
	else
		OUT("%sp4_putbits_var(s->hbuf, nb + %u, %u, %s);\n", ind, k, w, v);
}

static void gen_calc(struct gen *g, uint32_t ci)
{
	const struct p4_prog *p = g->p;
	const struct p4_calc *c = &p->calcs[ci];
	snprintf(g->where, sizeof(g->where), "calculation '%s'", c->name);
	int algo = algo_id(c->algo);
	if (algo < 0)
		return (void)gfail(g, "unsupported algorithm '%s'", c->algo_name);
	uint32_t bits = calc_bits(g, c);
	uint32_t bytes = (bits + 7) / 8;
	if (bytes + 32 > g->hbuf_bytes)
		g->hbuf_bytes = bytes + 32;
	if (c->payload && (c->algo == P4A_XXH64 || c->algo == P4A_IDENTITY))
		return (void)gfail(g, "%s over the payload is not supported", c->algo_name);
	OUT("/* calculation '%s': %s */\n", c->name, c->algo_name);
	OUT("static P4_FN uint64_t p4_calc%u(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n",
	    ci);
	OUT("\tuint32_t nb = 0;\n\t(void)ctx; (void)pkt;\n");
	OUT("\t__builtin_memset(s->hbuf, 0, %u);\n", bytes + 16 > g->hbuf_bytes ? g->hbuf_bytes : bytes + 16);
	int64_t cnb = 0;   /* nb, while the generator knows it (-1: after a validity test) */
	for (uint32_t i = 0; i < c->n_in; i++) {
		const struct p4_calc_input *in = &c->in[i];
		switch (in->kind) {
		case P4CI_FIELD: {
			const struct p4_field *fd = field_of(g, in->e->h, in->e->f);
			bool meta = p->headers[in->e->h].metadata;
			const char *guard = meta ? "" : fmt(g, "if (s->phv.v[%d]) ", in->e->h);
			if (fd->width > P4_MAX_WIDTH) {
				if (fd->width % 8 != 0)
					return (void)gfail(g, "a %u-bit field as input", fd->width);
				OUT("\t%s{ if ((nb & 7) == 0) __builtin_memcpy(s->hbuf + nb / 8, s->phv.h%d_%d, %u); nb += %u; }\n",
				    guard, in->e->h, in->e->f, fd->width / 8, fd->width);
				cnb = meta && cnb >= 0 ? cnb + fd->width : -1;
				break;
			}
			if (meta) {
				gen_put_in(g, "\t", cnb, 0, fd->width,
					   fmt(g, "(p4_u128)s->phv.h%d_%d", in->e->h, in->e->f));
				OUT("\tnb += %u;\n", fd->width);
				if (cnb >= 0)
					cnb += fd->width;
				break;
			}
			/* The run of inputs that are fields of this header (an IPv4
			 * checksum's eleven): one validity test, and offsets from the
			 * run's start, which fold to constant byte stores when nb is
			 * known here (a test per field kept nb unknown after the first) */
			OUT("\t%s{\n", guard);
			uint32_t k = 0;
			for (;;) {
				const struct p4_field *fk = field_of(g, c->in[i].e->h, c->in[i].e->f);
				gen_put_in(g, "\t\t", cnb, k, fk->width,
					   fmt(g, "(p4_u128)s->phv.h%d_%d", c->in[i].e->h, c->in[i].e->f));
				k += fk->width;
				if (i + 1 >= c->n_in || c->in[i + 1].kind != P4CI_FIELD ||
				    c->in[i + 1].e->h != in->e->h ||
				    field_of(g, c->in[i + 1].e->h, c->in[i + 1].e->f)->width > P4_MAX_WIDTH)
					break;
				i++;
			}
			OUT("\t\tnb += %u;\n\t}\n", k);
			cnb = -1;
			break;
		}
		case P4CI_CONST:
			gen_put_in(g, "\t", cnb, 0, in->bits, u128_lit(g, in->val));
			OUT("\tnb += %u;\n", in->bits);
			if (cnb >= 0)
				cnb += in->bits;
			break;
		case P4CI_HEADER: {
			int h = in->e->h;
			const struct p4_htype *t = htype_of(g, h);
			OUT("\tif (s->phv.v[%d]) {\n", h);
			for (uint32_t f = 0; f < t->n_fields; f++) {
				const struct p4_field *fd = &t->fields[f];
				if (fd->width > P4_MAX_WIDTH)
					OUT("\t\tif ((nb & 7) == 0) __builtin_memcpy(s->hbuf + nb / 8, s->phv.h%d_%u, %u); nb += %u;\n",
					    h, f, p4_bytes(fd->width), fd->width);
				else
					OUT("\t\tp4_putbits_var(s->hbuf, nb, %u, (p4_u128)s->phv.h%d_%u); nb += %u;\n",
					    fd->width, h, f, fd->width);
			}
			OUT("\t}\n");
			cnb = -1;
			break;
		}
		case P4CI_PAYLOAD:
			break;
		}
	}
	OUT("\tuint32_t n = (nb + 7) / 8;\n");
	if (c->algo == P4A_XXH64 || c->algo == P4A_IDENTITY) {
		OUT("\treturn p4_hash_whole(%d, s->hbuf, n, %u);\n}\n\n", algo, bytes);
		return;
	}
	OUT("\tstruct p4_hash h;\n\tp4_hash_begin(&h, %d);\n", algo);
	OUT("\tp4_hash_bytes(&h, %d, s->hbuf, n, %u);\n", algo, bytes);
	if (c->payload)
		OUT("\tp4_hash_payload(ctx, pkt, s, &h, %d);\n", algo);
	OUT("\treturn p4_hash_end(&h, %d);\n}\n\n", algo);
}

/* ------------------------------------------------------------------------ */
/* Field lists (clone, resubmit, recirculate) and digests                     */

static void gen_field_lists(struct gen *g)
{
	const struct p4_prog *p = g->p;
	OUT("/* The fields of field list `id` (preserved metadata) into buf and back:\n"
	    " * each field's bytes in turn. Returns the length. */\n");
	for (int load = 0; load < 2; load++) {
		if (load)
			OUT("static uint32_t p4_flist_load(struct p4_phv *phv, uint32_t id, const uint8_t *buf, uint32_t n)\n{\n");
		else
			OUT("static uint32_t p4_flist_save(const struct p4_phv *phv, uint32_t id, uint8_t *buf)\n{\n");
		OUT("\tswitch (id) {\n");
		for (uint32_t i = 0; i < p->n_flists; i++) {
			const struct p4_field_list *fl = &p->flists[i];
			OUT("\tcase %d:\n", fl->id);
			uint32_t off = 0;
			for (uint32_t k = 0; k < fl->n; k++) {
				const struct p4_expr *e = fl->fields[k];
				const struct p4_field *fd = field_of(g, e->h, e->f);
				uint32_t sz = fd->varbit || fd->width > P4_MAX_WIDTH ? p4_bytes(fd->width)
				              : fd->width <= 8 ? 1 : fd->width <= 16 ? 2 : fd->width <= 32 ? 4
				              : fd->width <= 64 ? 8 : 16;
				if (load)
					OUT("\t\t__builtin_memcpy(&phv->h%d_%d, buf + %u, %u);\n", e->h, e->f, off, sz);
				else
					OUT("\t\t__builtin_memcpy(buf + %u, &phv->h%d_%d, %u);\n", off, e->h, e->f, sz);
				off += sz;
			}
			if (off + 16 > g->hbuf_bytes)
				g->hbuf_bytes = off + 16;
			OUT("\t\treturn %u;\n", off);
		}
		OUT("\t}\n\t(void)phv; (void)buf;%s\n\treturn 0;\n}\n\n", load ? " (void)n;" : "");
	}

	OUT("/* A digest's bytes (learn list `id`: each field byte-padded, big-endian)\n"
	    " * into buf; returns the length. */\n");
	OUT("static uint32_t p4_digest_fill(const struct p4_phv *phv, uint32_t id, uint8_t *buf)\n{\n");
	OUT("\tswitch (id) {\n");
	for (uint32_t i = 0; i < p->n_llists; i++) {
		const struct p4_learn_list *ll = &p->llists[i];
		OUT("\tcase %d:\n", ll->id);
		uint32_t off = 0;
		for (uint32_t k = 0; k < ll->n; k++) {
			const struct p4_expr *e = ll->fields[k];
			const struct p4_field *fd = field_of(g, e->h, e->f);
			uint32_t nb = p4_bytes(fd->width);
			if (fd->width > P4_MAX_WIDTH || fd->varbit)
				OUT("\t\t__builtin_memcpy(buf + %u, phv->h%d_%d, %u);\n", off, e->h, e->f, nb);
			else
				OUT("\t\tp4_st_be(buf + %u, %u, (p4_u128)phv->h%d_%d);\n", off, nb, e->h, e->f);
			off += nb;
		}
		OUT("\t\treturn %u;\n", off);
	}
	OUT("\t}\n\t(void)phv; (void)buf;\n\treturn 0;\n}\n\n");
}

/* ------------------------------------------------------------------------ */
/* Primitives                                                                 */

static uint32_t reg_bits(const struct p4_prog *p, int r)
{
	return p->registers[r].width;
}

#define P4_NO_LABEL UINT32_MAX

static void gen_prim(struct gen *g, const struct p4_prim *pr, uint32_t idx, uint32_t n_prims)
{
	const struct p4_prog *p = g->p;
	const struct p4_layout *lay = g->lay;
	struct p4_expr *const *A = pr->args;
	/* P4_NO_LABEL: a parser's primitives are not jump targets, and a
	 * state may hold several of them (one label would be defined twice) */
	if (idx == P4_NO_LABEL)
		OUT("\t/* %s */\n", pr->where ? pr->where : pr->op);
	else
		OUT("p%u:\t/* %s */\n", idx, pr->where ? pr->where : pr->op);
	switch (pr->kind) {
	case P4P_ASSIGN:
		gen_assign(g, A[0], A[1], "\t");
		break;
	case P4P_ASSIGN_VL: {
		int dh, df, sh, sf;
		if (wide_field(g, A[0], &dh, &df) != 0 || wide_field(g, A[1], &sh, &sf) != 0)
			return (void)gfail(g, "assign_VL between fields that are not variable-length");
		OUT("\t__builtin_memcpy(s->phv.h%d_%d, s->phv.h%d_%d, %u);\n", dh, df, sh, sf,
		    p4_bytes(field_of(g, dh, df)->width));
		OUT("\ts->phv.vlen[%d] = s->phv.vlen[%d];\n", dh, sh);
		break;
	}
	case P4P_ASSIGN_HEADER: {
		struct val d = gen_expr(g, A[0]), sv = gen_expr(g, A[1]);
		if (g->failed)
			return;
		if (d.kind != VK_HEADER || sv.kind != VK_HEADER || d.hdr < 0 || sv.hdr < 0)
			return (void)gfail(g, "assign_header needs two headers (stack elements by a constant "
					   "index)");
		if (p->headers[d.hdr].type != p->headers[sv.hdr].type)
			return (void)gfail(g, "assign_header of different header types");
		/* BMv2: an invalid source makes the destination invalid, fields kept */
		OUT("\tif (!s->phv.v[%d]) {\n\t\ts->phv.v[%d] = 0;\n\t} else {\n", sv.hdr, d.hdr);
		gen_copy_header(g, d.hdr, sv.hdr, "(&s->phv)", "(&s->phv)", "\t\t");
		OUT("\t}\n");
		break;
	}
	case P4P_ASSIGN_UNION: {
		if (A[0]->kind != P4E_UNION || A[1]->kind != P4E_UNION)
			return (void)gfail(g, "assign_union needs two unions");
		const struct p4_union *du = &p->unions[A[0]->idx], *su = &p->unions[A[1]->idx];
		if (du->n != su->n)
			return (void)gfail(g, "assign_union of different unions");
		for (uint32_t k = 0; k < du->n; k++) {
			OUT("\tif (!s->phv.v[%d]) {\n\t\ts->phv.v[%d] = 0;\n\t} else {\n", su->headers[k],
			    du->headers[k]);
			gen_copy_header(g, du->headers[k], su->headers[k], "(&s->phv)", "(&s->phv)", "\t\t");
			OUT("\t}\n");
		}
		break;
	}
	case P4P_ASSIGN_HEADER_STACK: {
		if (A[0]->kind != P4E_STACK || A[1]->kind != P4E_STACK)
			return (void)gfail(g, "assign_header_stack needs two stacks");
		const struct p4_stack *ds = &p->stacks[A[0]->idx], *ss = &p->stacks[A[1]->idx];
		if (ds->size != ss->size || ds->type != ss->type)
			return (void)gfail(g, "assign_header_stack of different stacks");
		OUT("\ts->phv.snext[%d] = s->phv.snext[%d];\n", A[0]->idx, A[1]->idx);
		for (uint32_t k = 0; k < ds->size; k++) {
			OUT("\tif (!s->phv.v[%d]) {\n\t\ts->phv.v[%d] = 0;\n\t} else {\n", ss->headers[k],
			    ds->headers[k]);
			gen_copy_header(g, ds->headers[k], ss->headers[k], "(&s->phv)", "(&s->phv)", "\t\t");
			OUT("\t}\n");
		}
		break;
	}
	case P4P_ASSIGN_UNION_STACK:
		return (void)gfail(g, "header union stacks are not supported");
	case P4P_PUSH:
	case P4P_POP: {
		if (A[1]->kind != P4E_CONST || A[1]->neg)
			return (void)gfail(g, "%s by a run-time count", pr->op);
		gen_push_pop(g, A[0]->idx, (uint32_t)A[1]->val, pr->kind == P4P_PUSH, "\t");
		break;
	}
	case P4P_JUMP:
		OUT("\tgoto p%u;\n", (uint32_t)A[0]->val);
		break;
	case P4P_JUMP_IF_ZERO: {
		struct val c = gen_expr(g, A[0]);
		if (g->failed)
			return;
		OUT("\tif (!%s)\n\t\tgoto p%u;\n", as_bool(g, c), (uint32_t)A[1]->val);
		break;
	}
	case P4P_EXIT:
		OUT("\ts->exit = 1;\n");
		break;
	case P4P_ASSERT:
	case P4P_ASSUME: {
		struct val c = gen_expr(g, A[0]);
		if (g->failed)
			return;
		OUT("\tif (!%s) {\n\t\ts->assert_failed = 1;\n\t\ts->exit = 1;\n\t}\n", as_bool(g, c));
		break;
	}
	case P4P_LOG_MSG: {
		const struct p4_expr *vec = A[1];
		uint32_t site = g->log_site++;
		OUT("\tinnet_reg_fetch_add(ctx, P4R_WORDS, %uu, 1);\n", lay->log_count_word + site);
		OUT("\t{\n\t\tuint64_t lv[%u] = { 0 };\n", P4_LOG_VALUES);
		for (uint32_t k = 0; k < vec->n_list && k < P4_LOG_VALUES; k++) {
			struct val v = as_int(g, gen_expr(g, vec->list[k]));
			if (g->failed)
				return;
			OUT("\t\tlv[%u] = (uint64_t)%s;\n", k, v.s);
		}
		OUT("\t\tp4_ring_put(ctx, s, %u, %u, (const uint8_t *)lv, %u);\n\t}\n", P4_RING_LOG, site,
		    8 * (vec->n_list < P4_LOG_VALUES ? vec->n_list : P4_LOG_VALUES));
		break;
	}
	case P4P_MARK_TO_DROP:
	case P4P_DROP:
		OUT("\tP4_SM_EGRESS_SPEC(&s->phv) = %u;\n", P4_DROP_PORT_NUM);
		if (p->std[P4S_MCAST_GRP].h >= 0)
			OUT("\tP4_SM_MCAST_GRP(&s->phv) = 0;\n");
		break;
	case P4P_ADD_HEADER:
	case P4P_REMOVE_HEADER: {
		struct val h = gen_expr(g, A[0]);
		if (g->failed)
			return;
		if (h.kind != VK_HEADER)
			return (void)gfail(g, "%s of something other than a header", pr->op);
		if (h.hdr >= 0)
			gen_set_valid(g, h.hdr, pr->kind == P4P_ADD_HEADER, "\t");
		else
			gen_set_valid_dyn(g, &h, pr->kind == P4P_ADD_HEADER, "\t");
		break;
	}
	case P4P_COUNT: {
		const struct p4_counter *c = &p->counters[A[0]->idx];
		struct val i = exact(g, as_int(g, gen_expr(g, A[1])), "a counter index");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t i = (uint64_t)%s;\n", conv(g, &i, i.wide, false));
		OUT("\t\tif (i < %u) {\n", c->size);
		OUT("\t\t\tinnet_reg_fetch_add(ctx, P4R_WORDS, %uu + 2 * (uint32_t)i, s->ingress_len);\n",
		    lay->counter_word[A[0]->idx]);
		OUT("\t\t\tinnet_reg_fetch_add(ctx, P4R_WORDS, %uu + 2 * (uint32_t)i + 1, 1);\n\t\t}\n\t}\n",
		    lay->counter_word[A[0]->idx]);
		break;
	}
	case P4P_EXECUTE_METER: {
		const struct p4_meter *m = &p->meters[A[0]->idx];
		struct val i = exact(g, as_int(g, gen_expr(g, A[1])), "a meter index");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t i = (uint64_t)%s;\n", conv(g, &i, i.wide, false));
		OUT("\t\tif (i < %u) {\n", m->size);
		OUT("\t\t\tuint64_t color = p4_meter(ctx, s, %uu + %u * (uint32_t)i, %s);\n",
		    lay->meter_word[A[0]->idx], P4_METER_WORDS, m->bytes ? "s->ingress_len" : "1");
		struct val cv = vint("color", 2, false);
		store_field(g, flv(g, "(&s->phv)", A[2]->h, A[2]->f), field_of(g, A[2]->h, A[2]->f), cv, "\t\t\t");
		OUT("\t\t}\n\t}\n");
		break;
	}
	case P4P_REGISTER_READ: {
		int r = A[1]->idx;
		const struct p4_rlayout *rl = &lay->regs[r];
		struct val i = exact(g, as_int(g, gen_expr(g, A[2])), "a register index");
		int wh = -1, wf = -1;
		if (rl->elem > 16 && !wide_same(g, A[0], reg_bits(p, r), &wh, &wf))
			return (void)gfail(g, "register '%s' of %u-bit elements read into something other than "
					   "a field of that width", p->registers[r].name, reg_bits(p, r));
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t i = (uint64_t)%s;\n", conv(g, &i, i.wide, false));
		OUT("\t\tif (i < %u) {\n", p->registers[r].size);
		if (rl->elem > 16) {
			OUT("\t\t\tinnet_reg_read_bytes(ctx, %d, (uint32_t)i, s->phv.h%d_%d, %u);\n", rl->ireg,
			    wh, wf, rl->elem);
		} else if (rl->elem == 16) {
			OUT("\t\t\tp4_u128a x;\n\t\t\tinnet_reg_read_bytes(ctx, %d, %uu + (uint32_t)i, &x, 16);\n",
			    rl->ireg, rl->base);
			struct val xv = vint("x", reg_bits(p, r), false);
			store_field(g, flv(g, "(&s->phv)", A[0]->h, A[0]->f), field_of(g, A[0]->h, A[0]->f), xv,
				    "\t\t\t");
		} else {
			OUT("\t\t\tuint64_t x = innet_reg_read(ctx, %d, %uu + (uint32_t)i);\n", rl->ireg, rl->base);
			struct val xv = vint("x", reg_bits(p, r), false);
			store_field(g, flv(g, "(&s->phv)", A[0]->h, A[0]->f), field_of(g, A[0]->h, A[0]->f), xv,
				    "\t\t\t");
		}
		OUT("\t\t}\n\t}\n");
		break;
	}
	case P4P_REGISTER_WRITE: {
		int r = A[0]->idx;
		const struct p4_rlayout *rl = &lay->regs[r];
		struct val i = exact(g, as_int(g, gen_expr(g, A[1])), "a register index");
		uint32_t w = reg_bits(p, r);
		int wh = -1, wf = -1;
		bool wconst = rl->elem > 16 && A[2]->kind == P4E_CONST && !A[2]->neg;
		struct val v = { 0 };
		if (rl->elem > 16 && !wconst && !wide_same(g, A[2], w, &wh, &wf))
			return (void)gfail(g, "register '%s' of %u-bit elements written from something other "
					   "than a field of that width or a constant", p->registers[r].name, w);
		if (rl->elem <= 16)
			v = as_int(g, gen_expr(g, A[2]));
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t i = (uint64_t)%s;\n", conv(g, &i, i.wide, false));
		OUT("\t\tif (i < %u) {\n", p->registers[r].size);
		if (rl->elem > 16 && wconst) {
			OUT("\t\t\tuint8_t x[%u] = { 0 };\n\t\t\tp4_st_be(x + %u, 16, %s);\n", rl->elem,
			    rl->elem - 16, u128_lit(g, A[2]->val));
			OUT("\t\t\tinnet_reg_write_bytes(ctx, %d, (uint32_t)i, x, %u);\n", rl->ireg, rl->elem);
		} else if (rl->elem > 16) {
			OUT("\t\t\tinnet_reg_write_bytes(ctx, %d, (uint32_t)i, s->phv.h%d_%d, %u);\n", rl->ireg,
			    wh, wf, rl->elem);
		} else if (rl->elem == 16) {
			OUT("\t\t\tp4_u128a x = (p4_u128)%s & p4_mask128(%u);\n", conv(g, &v, true, false), w);
			OUT("\t\t\tinnet_reg_write_bytes(ctx, %d, %uu + (uint32_t)i, &x, 16);\n", rl->ireg, rl->base);
		} else {
			OUT("\t\t\tinnet_reg_write(ctx, %d, %uu + (uint32_t)i, (uint64_t)%s & 0x%llxull);\n",
			    rl->ireg, rl->base, conv(g, &v, v.wide, false),
			    (unsigned long long)(w >= 64 ? ~0ull : ((1ull << w) - 1)));
		}
		OUT("\t\t}\n\t}\n");
		break;
	}
	case P4P_HASH: {
		struct val base = exact(g, as_int(g, gen_expr(g, A[1])), "a hash base");
		struct val mx = exact(g, as_int(g, gen_expr(g, A[3])), "a hash maximum");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t h = p4_calc%d(ctx, pkt, s);\n", A[2]->idx);
		OUT("\t\tuint64_t b = (uint64_t)%s, m = (uint64_t)%s;\n", conv(g, &base, base.wide, false),
		    conv(g, &mx, mx.wide, false));
		OUT("\t\tuint64_t r = b + (m >= 1 ? h %% m : 0);\n");
		struct val rv = vint("r", 64, false);
		store_field(g, flv(g, "(&s->phv)", A[0]->h, A[0]->f), field_of(g, A[0]->h, A[0]->f), rv, "\t\t");
		OUT("\t}\n");
		break;
	}
	case P4P_RANDOM: {
		struct val lo = exact(g, as_int(g, gen_expr(g, A[1])), "a random bound");
		struct val hi = exact(g, as_int(g, gen_expr(g, A[2])), "a random bound");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t lo = (uint64_t)%s, hi = (uint64_t)%s;\n", conv(g, &lo, lo.wide, false),
		    conv(g, &hi, hi.wide, false));
		OUT("\t\tuint64_t r = (uint64_t)innet_random(ctx) << 32 | innet_random(ctx);\n");
		OUT("\t\tuint64_t span = hi - lo + 1;\n\t\tr = hi < lo ? lo : span == 0 ? r : lo + r %% span;\n");
		struct val rv = vint("r", 64, false);
		store_field(g, flv(g, "(&s->phv)", A[0]->h, A[0]->f), field_of(g, A[0]->h, A[0]->f), rv, "\t\t");
		OUT("\t}\n");
		break;
	}
	case P4P_CLONE_I2E:
	case P4P_CLONE_E2E: {
		struct val sess = exact(g, as_int(g, gen_expr(g, A[0])), "a mirroring session");
		if (g->failed)
			return;
		OUT("\ts->clone = ((uint32_t)%s & 0xffffu) | 0x80000000u;\n", conv(g, &sess, sess.wide, false));
		OUT("\ts->clone_fl = %uu;\n", (uint32_t)A[1]->val);
		break;
	}
	case P4P_RESUBMIT:
		OUT("\ts->resubmit_fl = %uu;\n", (uint32_t)A[0]->val);
		break;
	case P4P_RECIRCULATE:
		OUT("\ts->recirc_fl = %uu;\n", (uint32_t)A[0]->val);
		break;
	case P4P_DIGEST:
		OUT("\ts->digest = %uu;\n", (uint32_t)A[1]->val);
		break;
	case P4P_TRUNCATE: {
		struct val n = exact(g, as_int(g, gen_expr(g, A[0])), "a truncate length");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint32_t t_ = (uint32_t)(%s) + 1u;\n\t\tif (s->trunc == 0 || t_ < s->trunc)\n"
		    "\t\t\ts->trunc = t_;\n\t}\n", conv(g, &n, n.wide, false));
		break;
	}
	case P4P_NO_OP:
	case P4P_DIRECT_METER_READ:
		OUT("\t;\n");
		break;
	}
	(void)n_prims;
}

static void gen_action(struct gen *g, uint32_t ai)
{
	const struct p4_action *a = &g->p->actions[ai];
	snprintf(g->where, sizeof(g->where), "action '%s'", a->name);
	g->act = a;
	OUT("/* action '%s' */\n", a->name);
	OUT("static P4_FN void p4_a%u(struct innet_ctx *ctx, struct innet_pkt *pkt, "
	    "struct p4_st *s, const uint8_t *ad)\n{\n", ai);
	OUT("\t(void)ctx; (void)pkt; (void)ad;\n");
	for (uint32_t k = 0; k < a->n_prims && !g->failed; k++) {
		snprintf(g->where, sizeof(g->where), "action '%s' (primitive %u, %s%s%s)", a->name, k, a->prims[k].op,
			 a->prims[k].where ? ": " : "", a->prims[k].where ? a->prims[k].where : "");
		gen_prim(g, &a->prims[k], k, a->n_prims);
	}
	OUT("p%u:\n\treturn;\n}\n\n", a->n_prims);
	g->act = NULL;
}

/* ------------------------------------------------------------------------ */
/* Tables                                                                     */

static const char *node_label(struct gen *g, int pipe, struct p4_node n)
{
	if (n.kind == P4N_TABLE)
		return fmt(g, "nt%d", n.idx);
	if (n.kind == P4N_COND)
		return fmt(g, "nc%d_%d", pipe, n.idx);
	return "done";
}

/* Key element k of table t into buf (s->kbuf or s->kbuf2) at byte `base + off`. */
static void gen_key_elem(struct gen *g, const struct p4_table *t, uint32_t k, uint32_t base,
			 const char *buf)
{
	const struct p4_key *ky = &t->keys[k];
	uint32_t off = base + ky->off;
	int h, f;
	if (wide_field(g, ky->target, &h, &f) == 0) {
		OUT("\t__builtin_memcpy(%s + %u, s->phv.h%d_%d, %u);\n", buf, off, h, f, ky->bytes);
	} else {
		struct val v = as_int(g, gen_expr(g, ky->target));
		if (ky->match == P4M_VALID && ky->target->kind == P4E_HEADER)
			v = vint(fmt(g, "((uint64_t)s->phv.v[%d])", ky->target->h), 1, false);
		if (g->failed)
			return;
		OUT("\tp4_st_be(%s + %u, %u, (p4_u128)%s & p4_mask128(%u));\n", buf, off, ky->bytes,
		    conv(g, &v, true, false), ky->bits);
	}
	if (ky->mask != NULL)
		for (uint32_t b = 0; b < ky->bytes; b++)
			if (ky->mask[b] != 0xff)
				OUT("\t%s[%u] &= 0x%02x;\n", buf, off + b, ky->mask[b]);
}

/* Store an entry's action data (compile-time bytes) into s->vbuf + 8. */
static void gen_const_data(struct gen *g, const struct p4_entry *e, const char *ind)
{
	const struct p4_action *a = &g->p->actions[e->action];
	for (uint32_t b = 0; b < a->data_bytes; b++)
		OUT("%ss->vbuf[%u] = 0x%02x;\n", ind, 8 + b, e->data[b]);
}

static void gen_run_action(struct gen *g, const struct p4_table *t, const char *ad, const char *ind)
{
	OUT("%sswitch (act) {\n", ind);
	for (uint32_t k = 0; k < t->n_actions; k++)
		OUT("%scase %d: p4_a%d(ctx, pkt, s, %s); break;\n", ind, t->actions[k], t->actions[k], ad);
	OUT("%sdefault: break;\n%s}\n", ind, ind);
}

static void gen_ternary_scan(struct gen *g, uint32_t ti)
{
	const struct p4_table *t = &g->p->tables[ti];
	const struct p4_tlayout *tl = &g->lay->tables[ti];
	OUT("static long p4_ts%u(uint32_t i, void *arg)\n{\n", ti);
	OUT("\tstruct p4_scan *a = arg;\n\tstruct p4_st *s = a->s;\n");
	OUT("\tif (i >= a->n)\n\t\treturn 1;\n");
	OUT("\tinnet_reg_read_bytes(a->ctx, %d, (uint32_t)a->base + i, s->rbuf, %u);\n", tl->treg,
	    tl->trec_size);
	OUT("\tconst uint8_t *r = s->rbuf;\n");
	OUT("\tif (((const struct p4_trec_hdr *)r)->valid != 1)\n\t\treturn 0;\n");
	for (uint32_t k = 0; k < t->n_keys; k++) {
		const struct p4_key *ky = &t->keys[k];
		if (ky->match == P4M_RANGE) {
			if (ky->bytes > 16)
				return (void)gfail(g, "a range key of %u bits", ky->bits);
			OUT("\t{\n\t\tp4_u128 v = p4_ld_be(s->kbuf + %u, %u), lo = p4_ld_be(r + %u, %u), hi = p4_ld_be(r + %u, %u);\n",
			    ky->off, ky->bytes, tl->trec_key + ky->off, ky->bytes, tl->trec_hi + ky->off, ky->bytes);
			OUT("\t\tif (v < lo || v > hi)\n\t\t\treturn 0;\n\t}\n");
			continue;
		}
		uint32_t b = 0;
		for (; b + 8 <= ky->bytes; b += 8)
			OUT("\tif ((p4_rd64(s->kbuf + %u) & p4_rd64(r + %u)) != p4_rd64(r + %u))\n\t\treturn 0;\n",
			    ky->off + b, tl->trec_mask + ky->off + b, tl->trec_key + ky->off + b);
		for (; b < ky->bytes; b++)
			OUT("\tif ((s->kbuf[%u] & r[%u]) != r[%u])\n\t\treturn 0;\n", ky->off + b,
			    tl->trec_mask + ky->off + b, tl->trec_key + ky->off + b);
	}
	OUT("\ta->found = (int64_t)i;\n\treturn 1;\n}\n\n");
}

/* The callback of an lpm lookup's scan: each call takes the longest prefix
 * length still in s->lpm_bits (the lengths in use, read by the caller, masked
 * to the key's width), clears it and looks that length up. A call per length
 * in use, not one per possible length: a table of /24 routes costs one call
 * and one lookup, where a call per length (33 for an IPv4 key) cost ~100 ns
 * a packet on XDP (each innet_loop call is a bpf_loop callback). */
static void gen_lpm_scan(struct gen *g, uint32_t ti)
{
	const struct p4_table *t = &g->p->tables[ti];
	const struct p4_tlayout *tl = &g->lay->tables[ti];
	const struct p4_key *lk = &t->keys[t->lpm_key];
	uint32_t pad = lk->bytes * 8 - lk->bits;
	uint32_t top = lk->bits / 64;   /* the word holding the longest length */
	uint32_t topb = lk->bits % 64;  /* its bit */
	OUT("static long p4_tl%u(uint32_t i, void *arg)\n{\n", ti);
	OUT("\tstruct p4_scan *a = arg;\n\tstruct p4_st *s = a->s;\n\tuint32_t pl;\n\t(void)i;\n");
	/* (no stack read at a run-time offset: the verifier refuses them) */
	OUT("\ts->lpm_bits[%u] &= 0x%llxull;\n", top,
	    (unsigned long long)(topb == 63 ? ~0ull : (2ull << topb) - 1));
	for (int w = (int)top; w >= 0; w--)
		OUT("\t%sif (s->lpm_bits[%d] != 0) {\n\t\tpl = %du + p4_msb64(s->lpm_bits[%d]);\n"
		    "\t\ts->lpm_bits[%d] &= ~(1ull << (pl - %du));\n\t}", w == (int)top ? "" : " else ", w,
		    64 * w, w, w, 64 * w);
	OUT(" else {\n\t\treturn 1;\n\t}\n");
	OUT("\tif (pl > %uu)\n\t\treturn 1;\n", lk->bits);
	OUT("\t__builtin_memcpy(s->kbuf, s->kbuf2, %u);\n", tl->key_size);
	OUT("\ts->kbuf[0] = (uint8_t)pl;\n");
	OUT("\tuint32_t cover = pl + %u;\n", pad);
	for (uint32_t b = 0; b < lk->bytes; b++)
		OUT("\ts->kbuf[%u] &= (uint8_t)(cover >= %u ? 0xff : cover <= %u ? 0 : 0xff << (%u - cover));\n",
		    1 + lk->off + b, 8 * b + 8, 8 * b, 8 * b + 8);
	OUT("\tif (innet_table_lookup(a->ctx, %d, (struct p4_k%u *)s->kbuf, (struct p4_v%u *)s->vbuf) == 0) {\n",
	    tl->itable, ti, ti);
	OUT("\t\ta->found = 1;\n\t\treturn 1;\n\t}\n\treturn 0;\n}\n\n");
}

static void gen_table(struct gen *g, uint32_t ti)
{
	const struct p4_prog *p = g->p;
	const struct p4_table *t = &p->tables[ti];
	const struct p4_tlayout *tl = &g->lay->tables[ti];
	snprintf(g->where, sizeof(g->where), "table '%s'", t->name);
	if (tl->key_size > g->key_max)
		g->key_max = tl->key_size;
	if (tl->value_size > g->val_max)
		g->val_max = tl->value_size;
	if (g->lay->default_value > g->val_max)
		g->val_max = g->lay->default_value;
	if (g->lay->prof_value > g->val_max)
		g->val_max = g->lay->prof_value;
	if (tl->itable >= 0) {
		OUT("struct p4_k%u { uint8_t b[%u]; };\n", ti, tl->key_size);
		OUT("struct p4_v%u { uint8_t b[%u]; };\n", ti, tl->value_size);
	}
	if (t->cls == P4TC_TERNARY)
		gen_ternary_scan(g, ti);
	if (t->cls == P4TC_LPM)
		gen_lpm_scan(g, ti);
	OUT("/* table '%s' */\n", t->name);
	/* (hit and action out through the state, not a return value: clang
	 * may drop a return value no caller reads and leave a stack pointer in
	 * R0, which the verifier refuses) */
	OUT("static P4_FN void p4_t%u(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n",
	    ti);
	OUT("\tuint32_t hit = 0, handle = 0;\n\tint act = -1;\n\tconst uint8_t *ad = s->vbuf + 8;\n");
	OUT("\t(void)handle;\n");
	switch (t->cls) {
	case P4TC_NOKEY:
		break;
	case P4TC_EXACT:
		OUT("\t__builtin_memset(s->kbuf, 0, %u);\n", tl->key_size);
		for (uint32_t k = 0; k < t->n_keys; k++)
			gen_key_elem(g, t, k, 0, "s->kbuf");
		OUT("\tif (innet_table_lookup(ctx, %d, (struct p4_k%u *)s->kbuf, (struct p4_v%u *)s->vbuf) == 0)\n"
		    "\t\thit = 1;\n", tl->itable, ti, ti);
		break;
	case P4TC_LPM:
		OUT("\t__builtin_memset(s->kbuf2, 0, %u);\n", tl->key_size);
		for (uint32_t k = 0; k < t->n_keys; k++)
			gen_key_elem(g, t, k, 1, "s->kbuf2");
		OUT("\t{\n\t\tstruct p4_scan a = { .ctx = ctx, .s = s, .found = 0 };\n");
		/* (the words up to the key's width: p4_tl* reads no other) */
		for (uint32_t w = 0; w <= t->keys[t->lpm_key].bits / 64; w++)
			OUT("\t\ts->lpm_bits[%u] = innet_reg_read(ctx, P4R_WORDS, %uu);\n", w, tl->ctl_word + w);
		OUT("\t\tinnet_loop(%u, p4_tl%u, &a);\n", t->keys[t->lpm_key].bits + 1, ti);
		OUT("\t\thit = a.found == 1;\n\t}\n");
		break;
	case P4TC_TERNARY:
		OUT("\t__builtin_memset(s->kbuf, 0, %u);\n", t->key_bytes + 8);
		for (uint32_t k = 0; k < t->n_keys; k++)
			gen_key_elem(g, t, k, 0, "s->kbuf");
		OUT("\t{\n\t\tstruct p4_scan a = { .ctx = ctx, .s = s };\n");
		OUT("\t\tfor (uint32_t try_ = 0; try_ < 4; try_++) {\n");
		OUT("\t\t\tuint64_t gen = innet_reg_read(ctx, P4R_WORDS, %uu);\n", tl->ctl_word);
		OUT("\t\t\tuint64_t n = innet_reg_read(ctx, P4R_WORDS, %uu + (uint32_t)(gen & 1));\n",
		    tl->ctl_word + 1);
		OUT("\t\t\ta.base = (gen & 1) * %uu;\n\t\t\ta.n = n > %u ? %u : n;\n\t\t\ta.found = -1;\n",
		    tl->tcap, tl->tcap, tl->tcap);
		OUT("\t\t\tinnet_loop((uint32_t)a.n, p4_ts%u, &a);\n", ti);
		OUT("\t\t\tif (innet_reg_read(ctx, P4R_WORDS, %uu) == gen)\n\t\t\t\tbreak;\n\t\t}\n", tl->ctl_word);
		OUT("\t\tif (a.found >= 0) {\n\t\t\thit = 1;\n");
		OUT("\t\t\t__builtin_memcpy(s->vbuf, s->rbuf + 4, 8);\n");   /* action, flags, handle */
		uint32_t db = t->impl == P4TI_SIMPLE ? t->data_bytes : 0;
		if (db > 0)
			OUT("\t\t\t__builtin_memcpy(s->vbuf + 8, s->rbuf + %u, %u);\n", tl->trec_data, db);
		OUT("\t\t}\n\t}\n");
		break;
	}
	OUT("\tif (hit) {\n");
	OUT("\t\tconst struct p4_tval_hdr *vh = (const struct p4_tval_hdr *)s->vbuf;\n");
	OUT("\t\tact = vh->action;\n\t\thandle = vh->handle;\n");
	if (t->direct_counter >= 0) {
		OUT("\t\tif (handle < %u) {\n", t->max_size);
		OUT("\t\t\tinnet_reg_fetch_add(ctx, P4R_WORDS, %uu + 2 * handle, s->ingress_len);\n", tl->dc_word);
		OUT("\t\t\tinnet_reg_fetch_add(ctx, P4R_WORDS, %uu + 2 * handle + 1, 1);\n\t\t}\n", tl->dc_word);
	}
	if (t->direct_meter >= 0) {
		const struct p4_meter *m = &p->meters[t->direct_meter];
		OUT("\t\tif (handle < %u) {\n", t->max_size);
		OUT("\t\t\tuint64_t color = p4_meter(ctx, s, %uu + %u * handle, %s);\n", tl->dm_word, P4_METER_WORDS,
		    m->bytes ? "s->ingress_len" : "1");
		struct val cv = vint("color", 2, false);
		if (m->result->kind != P4E_FIELD)
			return (void)gfail(g, "direct meter '%s': its result is not a field", m->name);
		store_field(g, flv(g, "(&s->phv)", m->result->h, m->result->f),
			    field_of(g, m->result->h, m->result->f), cv, "\t\t\t");
		OUT("\t\t}\n");
	}
	OUT("\t}\n");
	/* the default entry */
	OUT("\telse {\n");
	const struct p4_tlayout *tlp = tl;
	if (tlp->default_dynamic) {
		OUT("\t\tstruct p4_kd { uint8_t b[8]; } *dk = (struct p4_kd *)s->kbuf;\n");
		OUT("\t\tstruct p4_vd { uint8_t b[%u]; } *dv = (struct p4_vd *)s->vbuf;\n", g->lay->default_value);
		OUT("\t\t__builtin_memset(dk, 0, 8);\n\t\tdk->b[0] = %u;\n\t\tdk->b[1] = %u;\n", ti & 0xff, ti >> 8);
		OUT("\t\tif (innet_table_lookup(ctx, %d, dk, dv) == 0) {\n", g->lay->t_defaults);
		OUT("\t\t\tact = ((const struct p4_tval_hdr *)s->vbuf)->action;\n");
		OUT("\t\t\thandle = ((const struct p4_tval_hdr *)s->vbuf)->handle;\n\t\t}");
		if (t->has_default) {
			OUT(" else {\n");
			gen_const_data(g, &t->def, "\t\t\t");
			OUT("\t\t\tact = %d;\n\t\t}\n", t->def.action);
		} else {
			OUT("\n");
		}
	} else {
		gen_const_data(g, &t->def, "\t\t");
		OUT("\t\tact = %d;\n", t->def.action);
	}
	OUT("\t}\n");
	if (t->impl != P4TI_SIMPLE) {
		const struct p4_profile *pr = &p->profiles[t->profile];
		OUT("\t/* through action profile '%s' */\n", pr->name);
		OUT("\tif (act == 0x%x || act == 0x%x)\n", P4_IND_MEMBER, P4_IND_GROUP);
		OUT("\t\tact = p4_prof_resolve(ctx, pkt, s, %u, (uint32_t)act << 16 | 0, handle);\n", t->profile);
	}
	gen_run_action(g, t, "ad", "\t");
	OUT("\ts->t_hit = hit;\n\ts->t_act = act;\n}\n\n");
}

/* Resolving an action profile's member or group (all profiles in one function). */
static void gen_profiles(struct gen *g)
{
	const struct p4_prog *p = g->p;
	if (p->n_profiles == 0)
		return;
	for (uint32_t i = 0; i < p->n_profiles; i++) {
		const struct p4_profile *pr = &p->profiles[i];
		if (!pr->selector)
			continue;
		OUT("/* the selector of action profile '%s': %s over its inputs */\n", pr->name, pr->algo_name);
		OUT("static P4_FN uint64_t p4_sel%u(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n", i);
		uint32_t bits = 0;
		for (uint32_t k = 0; k < pr->n_sel_in; k++)
			bits += field_of(g, pr->sel_in[k]->h, pr->sel_in[k]->f)->width;
		uint32_t bytes = (bits + 7) / 8;
		if (bytes + 32 > g->hbuf_bytes)
			g->hbuf_bytes = bytes + 32;
		int algo = algo_id(pr->algo);
		if (algo < 0)
			return (void)gfail(g, "action profile '%s': unsupported algorithm", pr->name);
		OUT("\tuint32_t nb = 0;\n\t(void)ctx; (void)pkt;\n\t__builtin_memset(s->hbuf, 0, %u);\n", bytes + 16);
		for (uint32_t k = 0; k < pr->n_sel_in; k++) {
			const struct p4_expr *e = pr->sel_in[k];
			const struct p4_field *fd = field_of(g, e->h, e->f);
			if (fd->width > P4_MAX_WIDTH)
				return (void)gfail(g, "action profile '%s': a %u-bit selector input", pr->name, fd->width);
			const char *guard = p->headers[e->h].metadata ? "" : fmt(g, "if (s->phv.v[%d]) ", e->h);
			OUT("\t%s{ p4_putbits_var(s->hbuf, nb, %u, (p4_u128)s->phv.h%d_%d); nb += %u; }\n", guard,
			    fd->width, e->h, e->f, fd->width);
		}
		if (pr->algo == P4A_XXH64 || pr->algo == P4A_IDENTITY) {
			OUT("\treturn p4_hash_whole(%d, s->hbuf, (nb + 7) / 8, %u);\n}\n\n", algo, bytes);
		} else {
			OUT("\tstruct p4_hash h;\n\tp4_hash_begin(&h, %d);\n", algo);
			OUT("\tp4_hash_bytes(&h, %d, s->hbuf, (nb + 7) / 8, %u);\n\treturn p4_hash_end(&h, %d);\n}\n\n",
			    algo, bytes, algo);
		}
	}
	OUT("/* An indirect table's member or group to its action: the member's action\n"
	    " * and data land in s->vbuf (data at + 8); -1 when it does not exist. */\n");
	OUT("static P4_FN int p4_prof_resolve(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s, "
	    "uint32_t prof, uint32_t kind_, uint32_t handle)\n{\n");
	OUT("\tstruct p4_kp { uint32_t prof, handle; } *k = (struct p4_kp *)s->kbuf;\n");
	OUT("\tstruct p4_vp { uint8_t b[%u]; } *v = (struct p4_vp *)s->vbuf;\n", g->lay->prof_value);
	OUT("\tuint32_t kind = kind_ >> 16;\n\t(void)pkt;\n");
	OUT("\tif (kind == 0x%x) {\n", P4_IND_GROUP);
	OUT("\t\tk->prof = prof | 0x80000000u;\n\t\tk->handle = handle;\n");
	OUT("\t\tif (innet_table_lookup(ctx, %d, k, v) != 0)\n\t\t\treturn -1;\n", g->lay->t_prof);
	OUT("\t\tuint32_t n = ((const uint32_t *)s->vbuf)[0];\n\t\tif (n == 0 || n > %u)\n\t\t\treturn -1;\n",
	    P4_GROUP_MAX);
	OUT("\t\tuint64_t h = 0;\n\t\tswitch (prof) {\n");
	for (uint32_t i = 0; i < p->n_profiles; i++)
		if (p->profiles[i].selector)
			OUT("\t\tcase %u: h = p4_sel%u(ctx, pkt, s); break;\n", i, i);
	/* (opaque: else the compiler drops the mask, knowing m < n <= 64, and
	 * the verifier, which does not, sees an unbounded index) */
	OUT("\t\t}\n\t\tuint32_t m = (uint32_t)(h %% n);\n\t\tinnet_opaque(m);\n");
	OUT("\t\thandle = ((const uint32_t *)s->vbuf)[2 + (m & %u)];\n\t}\n", P4_GROUP_MAX - 1);
	OUT("\tk->prof = prof;\n\tk->handle = handle;\n");
	OUT("\tif (innet_table_lookup(ctx, %d, k, v) != 0)\n\t\treturn -1;\n", g->lay->t_prof);
	OUT("\treturn ((const struct p4_tval_hdr *)s->vbuf)->action;\n}\n\n");
}

/* ------------------------------------------------------------------------ */
/* Pipelines                                                                  */

static void gen_pipeline(struct gen *g, int pi)
{
	const struct p4_prog *p = g->p;
	const struct p4_pipeline *pp = &p->pipes[pi];
	OUT("static P4_FN void p4_%s(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n",
	    pi == 0 ? "ingress" : "egress");
	OUT("\tuint32_t hit;\n\tint a;\n\t(void)hit; (void)a;\n");
	OUT("\tgoto %s;\n", node_label(g, pi, pp->init));
	for (uint32_t i = 0; i < pp->n_tables; i++) {
		int ti = pp->tables[i];
		const struct p4_table *t = &p->tables[ti];
		snprintf(g->where, sizeof(g->where), "table '%s'", t->name);
		OUT("nt%d:\t/* %s */\n", ti, t->name);
		OUT("\tp4_t%d(ctx, pkt, s);\n\thit = s->t_hit;\n\ta = s->t_act;\n", ti);
		OUT("\tif (s->exit)\n\t\tgoto done;\n");
		if (t->hit_miss) {
			OUT("\tif (hit)\n\t\tgoto %s;\n\tgoto %s;\n", node_label(g, pi, t->next_hit),
			    node_label(g, pi, t->next_miss));
			continue;
		}
		OUT("\tswitch (a) {\n");
		for (uint32_t k = 0; k < t->n_actions; k++)
			OUT("\tcase %d: goto %s;\n", t->actions[k], node_label(g, pi, t->next_by_action[k]));
		OUT("\tdefault: goto %s;\n\t}\n", node_label(g, pi, t->base_next));
	}
	for (uint32_t i = 0; i < pp->n_conds; i++) {
		const struct p4_cond *c = &pp->conds[i];
		snprintf(g->where, sizeof(g->where), "conditional '%s'", c->name);
		struct val v = gen_expr(g, c->expr);
		if (g->failed)
			return;
		OUT("nc%d_%u:\t/* %s */\n", pi, i, c->name);
		OUT("\tif (%s)\n\t\tgoto %s;\n\tgoto %s;\n", as_bool(g, v), node_label(g, pi, c->t),
		    node_label(g, pi, c->f));
	}
	OUT("done:\n\treturn;\n}\n\n");
}

/* ------------------------------------------------------------------------ */
/* Parser                                                                     */

/* Declare and check the lookahead windows expression e reads. */
static void gen_lookaheads(struct gen *g, const struct p4_expr *e)
{
	if (e == NULL)
		return;
	if (e->kind == P4E_LOOKAHEAD) {
		uint32_t nb = (e->off % 8 + e->width + 7) / 8;
		OUT("\tconst uint8_t *la%u_%u = innet_pkt_ptr(pkt, off + %u, %u);\n", e->off, e->width,
		    e->off / 8, nb);
		OUT("\tif (la%u_%u == (void *)0) {\n\t\terr = %d;\n\t\tgoto reject;\n\t}\n", e->off, e->width,
		    g->p->err_too_short);
		return;
	}
	gen_lookaheads(g, e->a);
	gen_lookaheads(g, e->b);
	gen_lookaheads(g, e->c);
	for (uint32_t i = 0; i < e->n_list; i++)
		gen_lookaheads(g, e->list[i]);
}

/* The fields of header h from packet bytes hp (the header's fixed part). */
static void gen_extract_fields(struct gen *g, int h, const char *ind)
{
	const struct p4_htype *t = htype_of(g, h);
	for (uint32_t f = 0; f < t->n_fields; f++) {
		const struct p4_field *fd = &t->fields[f];
		if (fd->varbit)
			continue;
		if (fd->width > P4_MAX_WIDTH) {
			if (fd->bit_off % 8 || fd->width % 8)
				return (void)gfail(g, "field '%s' of %u bits is not byte-aligned", fd->name, fd->width);
			OUT("%s__builtin_memcpy(s->phv.h%d_%u, hp + %u, %u);\n", ind, h, f, fd->bit_off / 8,
			    fd->width / 8);
			continue;
		}
		if (fd->width > 120 && fd->bit_off % 8)
			return (void)gfail(g, "field '%s' of %u bits is not byte-aligned", fd->name, fd->width);
		OUT("%ss->phv.h%d_%u = (%s)p4_getbits(hp, %u, %u);\n", ind, h, f, fstore(fd->width), fd->bit_off,
		    fd->width);
	}
}

/* Extract into header h (static) at the cursor; varlen: the varbit's bytes
 * expression, or NULL. */
static void gen_extract_one(struct gen *g, int h, const char *varlen, const char *ind)
{
	const struct p4_htype *t = htype_of(g, h);
	uint32_t fixed = t->fixed_bits / 8;
	if (t->fixed_bits % 8)
		return (void)gfail(g, "header '%s' is %u bits: not a whole number of bytes",
				   g->p->headers[h].name, t->fixed_bits);
	if (t->varbit >= 0) {
		if (t->varbit != (int)t->n_fields - 1 || t->fields[t->varbit].bit_off % 8)
			return (void)gfail(g, "header '%s': a variable-length field must be the last one "
					   "and start on a byte", g->p->headers[h].name);
	}
	OUT("%s{\n", ind);
	if (t->varbit >= 0) {
		/* as BMv2 (extract_VL), before anything is read: a length in bits
		 * not a multiple of 8 is ParserInvalidArgument, then a frame
		 * shorter than the fixed part plus the length asked PacketTooShort,
		 * then a length beyond the field HeaderTooShort */
		uint32_t vmax = p4_bytes(t->fields[t->varbit].width);
		OUT("%s\tuint64_t vbits = (uint64_t)%s;\n", ind, varlen);
		OUT("%s\tif (vbits %% 8 != 0) {\n%s\t\terr = %d;\n%s\t\tgoto reject;\n%s\t}\n", ind, ind,
		    g->p->err_invalid_arg, ind, ind);
		OUT("%s\tif (vbits / 8 > %u - %u || (%u + vbits / 8 > 0 &&\n"
		    "%s\t    innet_pkt_ptr(pkt, off + %u + (uint32_t)(vbits / 8) - 1, 1) == (void *)0)) {\n"
		    "%s\t\terr = %d;\n%s\t\tgoto reject;\n%s\t}\n",
		    ind, INNET_PKT_MAX, fixed, fixed, ind, fixed, ind, g->p->err_too_short, ind, ind);
		OUT("%s\tif (vbits / 8 > %u) {\n%s\t\terr = %d;\n%s\t\tgoto reject;\n%s\t}\n", ind, vmax, ind,
		    g->p->err_header_too_short, ind, ind);
	}
	OUT("%s\tconst uint8_t *hp = innet_pkt_ptr(pkt, off, %u);\n", ind, fixed ? fixed : 1);
	if (fixed > 0 || t->varbit < 0)
		OUT("%s\tif (hp == (void *)0) {\n%s\t\terr = %d;\n%s\t\tgoto reject;\n%s\t}\n", ind, ind,
		    g->p->err_too_short, ind, ind);
	else
		OUT("%s\t(void)hp;   /* (no fixed part: the varbit's bytes are read one by one) */\n", ind);
	char ind2[32];
	snprintf(ind2, sizeof(ind2), "%s\t", ind);
	gen_extract_fields(g, h, ind2);
	if (t->varbit >= 0) {
		uint32_t vmax = p4_bytes(t->fields[t->varbit].width);
		OUT("%s\tuint32_t vl = (uint32_t)(vbits / 8);\n", ind);
		OUT("%s\t__builtin_memset(s->phv.h%d_%d, 0, %u);\n", ind, h, t->varbit, vmax);
		OUT("%s\tfor (uint32_t j = 0; j < %u; j++) {\n%s\t\tif (j >= vl)\n%s\t\t\tbreak;\n", ind, vmax,
		    ind, ind);
		OUT("%s\t\tconst uint8_t *b = innet_pkt_ptr(pkt, off + %u + j, 1);\n", ind, fixed);
		OUT("%s\t\tif (b == (void *)0) {\n%s\t\t\terr = %d;\n%s\t\t\tgoto reject;\n%s\t\t}\n", ind, ind,
		    g->p->err_too_short, ind, ind);
		OUT("%s\t\ts->phv.h%d_%d[j] = *b;\n%s\t}\n", ind, h, t->varbit, ind);
		OUT("%s\ts->phv.vlen[%d] = (uint16_t)vl;\n", ind, h);
		OUT("%s\toff += vl;\n", ind);
	}
	OUT("%s\ts->phv.v[%d] = 1;\n", ind, h);
	int u = g->p->headers[h].onion;
	if (u >= 0)
		for (uint32_t k = 0; k < g->p->unions[u].n; k++)
			if (g->p->unions[u].headers[k] != h)
				OUT("%s\ts->phv.v[%d] = 0;\n", ind, g->p->unions[u].headers[k]);
	OUT("%s\toff += %u;\n%s}\n", ind, fixed, ind);
}

static void gen_parse_op(struct gen *g, const struct p4_pstate *st, const struct p4_parse_op *op)
{
	const struct p4_prog *p = g->p;
	switch (op->kind) {
	case P4PO_EXTRACT:
	case P4PO_EXTRACT_VL: {
		const char *vl = NULL;
		if (op->kind == P4PO_EXTRACT_VL) {
			gen_lookaheads(g, op->a);
			struct val n = exact(g, as_int(g, gen_expr(g, op->a)), "a varbit length");
			if (g->failed)
				return;
			/* (BMv2 takes the length in bits; gen_extract_one checks it) */
			vl = fmt(g, "%s", conv(g, &n, false, false));
		}
		if (op->header >= 0) {
			gen_extract_one(g, op->header, vl, "\t");
			return;
		}
		const struct p4_stack *sk = &p->stacks[op->stack];
		OUT("\tswitch (s->phv.snext[%d]) {\n", op->stack);
		for (uint32_t i = 0; i < sk->size; i++) {
			OUT("\tcase %u:\n", i);
			gen_extract_one(g, sk->headers[i], vl, "\t\t");
			OUT("\t\tbreak;\n");
		}
		OUT("\tdefault:\n\t\terr = %d;\n\t\tgoto reject;\n\t}\n", p->err_stack_oob);
		OUT("\ts->phv.snext[%d]++;\n", op->stack);
		return;
	}
	case P4PO_SET:
		gen_lookaheads(g, op->b);
		gen_assign(g, op->a, op->b, "\t");
		return;
	case P4PO_VERIFY: {
		struct val c = gen_expr(g, op->a);
		struct val e = as_int(g, gen_expr(g, op->b));
		if (g->failed)
			return;
		OUT("\tif (!%s) {\n\t\terr = (uint32_t)%s;\n\t\tgoto reject;\n\t}\n", as_bool(g, c),
		    conv(g, &e, e.wide, false));
		return;
	}
	case P4PO_ADVANCE: {
		struct val n = exact(g, as_int(g, gen_expr(g, op->a)), "an advance");
		if (g->failed)
			return;
		OUT("\t{\n\t\tuint64_t bits = (uint64_t)%s;\n", conv(g, &n, n.wide, false));
		OUT("\t\tif (bits %% 8 != 0) {\n\t\t\terr = %d;\n\t\t\tgoto reject;\n\t\t}\n", p->err_invalid_arg);
		OUT("\t\tif (bits / 8 > %u || innet_pkt_ptr(pkt, off + (uint32_t)(bits / 8), 0) == (void *)0) {\n"
		    "\t\t\terr = %d;\n\t\t\tgoto reject;\n\t\t}\n", INNET_PKT_MAX, p->err_too_short);
		OUT("\t\toff += (uint32_t)(bits / 8);\n\t}\n");
		return;
	}
	case P4PO_PRIMITIVE: {
		const struct p4_prim *pr = &op->prim;
		if (pr->kind == P4P_JUMP || pr->kind == P4P_JUMP_IF_ZERO)
			return (void)gfail(g, "a jump in parser state '%s'", st->name);
		OUT("\t{\n");
		for (uint32_t i = 0; i < pr->n_args; i++)
			gen_lookaheads(g, pr->args[i]);
		gen_prim(g, pr, P4_NO_LABEL, 0);
		OUT("\t}\n");
		return;
	}
	}
}

static void gen_parser(struct gen *g)
{
	const struct p4_prog *p = g->p;
	g->in_parser = true;
	OUT("/* The parser: a state per label. Sets s->parsed (the payload's start)\n"
	    " * and the parser error. */\n");
	OUT("static P4_FN void p4_parse(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n");
	OUT("\tuint32_t off = 0, err = %d, steps = 0;\n\t(void)ctx; (void)steps;\n", p->err_no_error);
	if (p->init_state < 0)
		OUT("\tgoto accept;\n");
	else
		OUT("\tgoto st%d;\n", p->init_state);
	for (uint32_t i = 0; i < p->n_states; i++) {
		const struct p4_pstate *st = &p->states[i];
		snprintf(g->where, sizeof(g->where), "parser state '%s'", st->name);
		OUT("st%u:\t/* %s */\n", i, st->name);
		OUT("\tif (++steps > P4_PARSE_STEPS) {\n\t\ts->parser_loop = 1;\n\t\tgoto accept;\n\t}\n");
		for (uint32_t k = 0; k < st->n_ops && !g->failed; k++) {
			snprintf(g->where, sizeof(g->where), "parser state '%s' (operation %u)", st->name, k);
			OUT("\t{\n");
			gen_parse_op(g, st, &st->ops[k]);
			OUT("\t}\n");
		}
		if (g->failed)
			return;
		snprintf(g->where, sizeof(g->where), "parser state '%s' (transition)", st->name);
		/* transition */
		bool vsets = false;
		for (uint32_t k = 0; k < st->n_trans; k++)
			vsets |= st->trans[k].kind == P4T_VSET;
		OUT("\t{\n");
		for (uint32_t k = 0; k < st->n_key; k++) {
			gen_lookaheads(g, st->key[k]);
			struct val v = as_int(g, gen_expr(g, st->key[k]));
			if (g->failed)
				return;
			OUT("\tp4_u128 k%u = (p4_u128)%s;\n\t(void)k%u;\n", k, conv(g, &v, v.wide, false), k);
		}
		if (vsets) {
			/* the key, byte-padded per element, then room for a mask */
			OUT("\t__builtin_memset(s->kbuf, 0, %u);\n", 2 * st->key_bytes + 8);
			uint32_t o = 0;
			for (uint32_t k = 0; k < st->n_key; k++) {
				OUT("\tp4_st_be(s->kbuf + %u, %u, k%u);\n", o, p4_bytes(st->key_bits[k]), k);
				o += p4_bytes(st->key_bits[k]);
			}
			if (2 * st->key_bytes + 8 > g->key_max)
				g->key_max = 2 * st->key_bytes + 8;
		}
		for (uint32_t t = 0; t < st->n_trans; t++) {
			const struct p4_transition *tr = &st->trans[t];
			const char *next = tr->next < 0 ? "accept" : fmt(g, "st%d", tr->next);
			if (tr->kind == P4T_DEFAULT) {
				OUT("\tgoto %s;\n", next);
				break;
			}
			if (tr->kind == P4T_VSET) {
				const struct p4_vset *vs = &p->vsets[tr->vset];
				uint32_t kbits = 0;
				for (uint32_t k = 0; k < st->n_key; k++)
					kbits += st->key_bits[k];
				if (kbits != vs->width)
					return (void)gfail(g, "value set '%s' of %u bits on a key of %u bits",
							   vs->name, vs->width, kbits);
				/* the transition's mask beside the key (p4_vset_match) */
				for (uint32_t b = 0; b < st->key_bytes; b++)
					OUT("\ts->kbuf[%u] = 0x%02x;\n", st->key_bytes + b,
					    tr->mask ? tr->mask[b] : 0xff);
				OUT("\tif (p4_vset_match(ctx, s, %d, %u, %u))\n\t\tgoto %s;\n", tr->vset,
				    st->key_bytes, tr->mask ? 1 : 0, next);
				continue;
			}
			/* value (and mask): per key element */
			char *cond = fmt(g, "1");
			uint32_t o = 0;
			for (uint32_t k = 0; k < st->n_key; k++) {
				uint32_t nb = p4_bytes(st->key_bits[k]);
				p4_u128 val = 0, m = 0;
				for (uint32_t b = 0; b < nb && b < 16; b++) {
					val = val << 8 | tr->value[o + b];
					m = m << 8 | (tr->mask ? tr->mask[o + b] : 0xff);
				}
				if (nb > 16)
					return (void)gfail(g, "a transition key element of %u bits", st->key_bits[k]);
				if (m != 0)
					cond = fmt(g, "%s && (k%u & %s) == %s", cond, k, u128_lit(g, m), u128_lit(g, val & m));
				o += nb;
			}
			OUT("\tif (%s)\n\t\tgoto %s;\n", cond, next);
		}
		/* no transition matched */
		bool has_default = false;
		for (uint32_t t = 0; t < st->n_trans; t++)
			has_default |= st->trans[t].kind == P4T_DEFAULT;
		if (!has_default)
			OUT("\terr = %d;\n\tgoto reject;\n", st->n_trans == 0 ? p->err_no_error : p->err_no_match);
		OUT("\t}\n");
		if (st->n_trans == 0)
			OUT("\tgoto accept;\n");
	}
	/* parser_error is the parse's outcome either way: its NoError code
	 * (the JSON's, not always 0) on accept, as BMv2 resets the packet's
	 * error code when a parse starts */
	OUT("reject:\naccept:\n");
	if (p->std[P4S_PARSER_ERROR].h >= 0)
		OUT("\tP4_SM_PARSER_ERROR(&s->phv) = err;\n");
	OUT("\ts->parsed = off;\n\t(void)err;\n}\n\n");
	g->in_parser = false;
}

/* ------------------------------------------------------------------------ */
/* Checksums and the deparser                                                 */

static void gen_checksums(struct gen *g)
{
	const struct p4_prog *p = g->p;
	OUT("/* verify_checksum: after the parser */\n");
	OUT("static P4_FN void p4_verify(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n");
	OUT("\t(void)ctx; (void)pkt;\n");
	for (uint32_t i = 0; i < p->n_checksums; i++) {
		const struct p4_checksum *c = &p->checksums[i];
		snprintf(g->where, sizeof(g->where), "checksum '%s'", c->name);
		if (!c->verify)
			continue;
		const char *cond = "1";
		if (c->cond != NULL)
			cond = as_bool(g, gen_expr(g, c->cond));
		uint32_t w = field_of(g, c->target->h, c->target->f)->width;
		OUT("\tif (%s && (p4_calc%d(ctx, pkt, s) & 0x%llxull) != (uint64_t)s->phv.h%d_%d)\n", cond, c->calc,
		    (unsigned long long)(w >= 64 ? ~0ull : ((1ull << w) - 1)), c->target->h, c->target->f);
		if (p->std[P4S_CHECKSUM_ERROR].h >= 0)
			OUT("\t\tP4_SM_CHECKSUM_ERROR(&s->phv) = 1;\n");
		else
			OUT("\t\t;\n");
	}
	OUT("}\n\n");
	OUT("/* update_checksum: before the deparser */\n");
	OUT("static P4_FN void p4_update(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s)\n{\n");
	OUT("\t(void)ctx; (void)pkt;\n");
	for (uint32_t i = 0; i < p->n_checksums; i++) {
		const struct p4_checksum *c = &p->checksums[i];
		snprintf(g->where, sizeof(g->where), "checksum '%s'", c->name);
		if (!c->update)
			continue;
		const char *cond = "1";
		if (c->cond != NULL)
			cond = as_bool(g, gen_expr(g, c->cond));
		uint32_t w = field_of(g, c->target->h, c->target->f)->width;
		OUT("\tif (%s)\n\t\ts->phv.h%d_%d = (%s)(p4_calc%d(ctx, pkt, s) & 0x%llxull);\n", cond, c->target->h,
		    c->target->f, fstore(w), c->calc, (unsigned long long)(w >= 64 ? ~0ull : ((1ull << w) - 1)));
	}
	OUT("}\n\n");
}

static void gen_deparser(struct gen *g)
{
	const struct p4_prog *p = g->p;
	snprintf(g->where, sizeof(g->where), "deparser");
	OUT("/* The bytes the valid headers take, in the deparser's order. */\n");
	OUT("static uint32_t p4_hdr_len(const struct p4_st *s)\n{\n\tuint32_t n = 0;\n");
	for (uint32_t i = 0; i < p->n_deparse; i++) {
		int h = p->deparse[i];
		const struct p4_htype *t = htype_of(g, h);
		OUT("\tif (s->phv.v[%d])\n\t\tn += %u%s;\n", h, t->fixed_bits / 8,
		    t->varbit >= 0 ? fmt(g, " + s->phv.vlen[%d]", h) : "");
	}
	OUT("\treturn n;\n}\n\n");
	OUT("/* Write the valid headers at the packet's start (the caller made room:\n"
	    " * p4_hdr_len bytes before the payload). 0, or -1 if the packet is short. */\n");
	OUT("static P4_FN int p4_emit_headers(struct innet_pkt *pkt, struct p4_st *s)\n{\n\tuint32_t off = 0;\n");
	for (uint32_t i = 0; i < p->n_deparse; i++) {
		int h = p->deparse[i];
		const struct p4_htype *t = htype_of(g, h);
		uint32_t fixed = t->fixed_bits / 8;
		if (t->fixed_bits % 8)
			return (void)gfail(g, "header '%s' is %u bits: not a whole number of bytes",
					   p->headers[h].name, t->fixed_bits);
		OUT("\tif (s->phv.v[%d]) {\t/* %s */\n", h, p->headers[h].name);
		if (fixed > 0) {
			OUT("\t\tuint8_t *hp = innet_pkt_ptr(pkt, off, %u);\n\t\tif (hp == (void *)0)\n\t\t\treturn -1;\n",
			    fixed);
			for (uint32_t f = 0; f < t->n_fields; f++) {
				const struct p4_field *fd = &t->fields[f];
				if (fd->varbit)
					continue;
				if (fd->width > P4_MAX_WIDTH)
					OUT("\t\t__builtin_memcpy(hp + %u, s->phv.h%d_%u, %u);\n", fd->bit_off / 8, h, f,
					    fd->width / 8);
				else
					OUT("\t\tp4_putbits(hp, %u, %u, (p4_u128)s->phv.h%d_%u);\n", fd->bit_off,
					    fd->width, h, f);
			}
			OUT("\t\toff += %u;\n", fixed);
		}
		if (t->varbit >= 0) {
			uint32_t vmax = p4_bytes(t->fields[t->varbit].width);
			OUT("\t\tfor (uint32_t j = 0; j < %u; j++) {\n\t\t\tif (j >= s->phv.vlen[%d])\n\t\t\t\tbreak;\n",
			    vmax, h);
			OUT("\t\t\tuint8_t *b = innet_pkt_ptr(pkt, off + j, 1);\n\t\t\tif (b == (void *)0)\n\t\t\t\treturn -1;\n");
			OUT("\t\t\t*b = s->phv.h%d_%d[j];\n\t\t}\n\t\toff += s->phv.vlen[%d];\n", h, t->varbit, h);
		}
		OUT("\t}\n");
	}
	OUT("\t(void)off;\n\treturn 0;\n}\n\n");
}

/* ------------------------------------------------------------------------ */
/* The program                                                                */

static const char *std_names[P4S_COUNT] = {
	"INGRESS_PORT", "EGRESS_SPEC", "EGRESS_PORT", "INSTANCE_TYPE", "PACKET_LENGTH", "MCAST_GRP",
	"EGRESS_RID", "CHECKSUM_ERROR", "PARSER_ERROR", "PRIORITY", "INGRESS_TS", "EGRESS_TS",
	"ENQ_TIMESTAMP", "ENQ_QDEPTH", "DEQ_TIMEDELTA", "DEQ_QDEPTH", "QID",
};

int p4_gen(const struct p4_prog *p, struct p4_layout *lay, const char *name, char **src, char *err,
	   size_t errlen)
{
	*src = NULL;
	struct p4_arena *a = p4_arena_new();
	if (a == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	struct gen gs = { .p = p, .lay = lay, .a = a, .err = err, .errlen = errlen, .hbuf_bytes = 64,
			  .key_max = 16, .val_max = 16 };
	struct gen *g = &gs;
	/* the lookups every program may make: defaults, profiles */
	if (lay->default_value > g->val_max)
		g->val_max = lay->default_value;
	if (lay->prof_value > g->val_max)
		g->val_max = lay->prof_value;
	/* a first pass for the buffer sizes, then the real one */
	struct sbuf body = { 0 };
	g->out = body;

	/* ---- the body (after the state struct) ---- */
	gen_stack_helpers(g);
	gen_field_lists(g);
	for (uint32_t i = 0; i < p->n_calcs && !g->failed; i++)
		gen_calc(g, i);
	g->log_site = 0;
	if (!g->failed) {
		OUT("/* ---- actions ---- */\n");
		for (uint32_t i = 0; i < p->n_actions; i++)
			OUT("static P4_FN void p4_a%u(struct innet_ctx *ctx, struct innet_pkt *pkt, struct p4_st *s, "
			    "const uint8_t *ad);\n", i);
		if (p->n_profiles > 0)
			OUT("static P4_FN int p4_prof_resolve(struct innet_ctx *ctx, struct innet_pkt *pkt, "
			    "struct p4_st *s, uint32_t prof, uint32_t kind_, uint32_t handle);\n");
		OUT("\n");
	}
	for (uint32_t i = 0; i < p->n_actions && !g->failed; i++)
		gen_action(g, i);
	for (uint32_t i = 0; i < p->n_tables && !g->failed; i++)
		gen_table(g, i);
	if (!g->failed)
		gen_profiles(g);
	if (!g->failed)
		gen_parser(g);
	if (!g->failed)
		gen_checksums(g);
	for (int pi = 0; pi < 2 && !g->failed; pi++)
		gen_pipeline(g, pi);
	if (!g->failed)
		gen_deparser(g);
	body = g->out;
	if (g->failed || body.oom) {
		free(body.s);
		p4_arena_free(a);
		if (!g->failed)
			snprintf(err, errlen, "out of memory generating code");
		return g->failed ? g->failed : -ENOMEM;
	}

	/* ---- the head: PHV, state, constants ---- */
	struct sbuf head = { 0 };
	g->out = head;
	OUT("/*\n * Generated by innet's P4 code generator (version %u) from the BMv2 JSON\n"
	    " * of '%s'. Do not edit: innet regenerates it from the JSON (docs/p4.md).\n */\n",
	    P4_GEN_VERSION, p->name);
	OUT("#include \"innet/dp.h\"\n#include \"p4/p4rt_dp.h\"\n\n");
	OUT("#define P4_DP_NAME %s\n", name);
	OUT("#define P4R_WORDS %d\n", lay->r_words);
	OUT("#define P4R_RING %d\n", lay->r_ring);
	OUT("#define P4R_VSETS %d\n", lay->r_vsets);
	OUT("#define P4T_MCAST %d\n", lay->t_mcast);
	OUT("#define P4_RING_HEAD_WORD %uu\n#define P4_RING_SEQ_WORD %uu\n#define P4_RING_SIZE %uu\n",
	    lay->ring_head_word, lay->ring_seq_word, lay->ring_size);
	OUT("#define P4_MIRROR_WORD %uu\n", lay->mirror_word);
	OUT("#define P4_VSET_WORD %uu\n#define P4_VSET_ENTRY %uu\n#define P4_VSET_MAX %uu\n", lay->vset_word,
	    lay->vset_entry ? lay->vset_entry : 8, lay->vset_max);
	OUT("#define P4_DIGEST_BYTES %uu\n", lay->digest_bytes ? lay->digest_bytes : 8);
	OUT("#define P4_HAS_RESUBMIT %d\n#define P4_HAS_RECIRC %d\n", 1, 1);
	OUT("#define P4_KBUF %u\n#define P4_VBUF %u\n#define P4_HBUF %u\n", g->key_max + 8, g->val_max + 8,
	    g->hbuf_bytes);
	uint32_t rb = 16;
	for (uint32_t i = 0; i < p->n_tables; i++)
		if (lay->tables[i].trec_size > rb)
			rb = lay->tables[i].trec_size;
	if (lay->vset_entry > rb)
		rb = lay->vset_entry;
	OUT("#define P4_RBUF %u\n", rb);
	gen_phv(g);
	OUT("/* standard metadata (simple_switch's names, after field_aliases) */\n");
	for (int i = 0; i < P4S_COUNT; i++) {
		if (p->std[i].h >= 0)
			OUT("#define P4_SM_%s(phv) ((phv)->h%d_%d)\n", std_names[i], p->std[i].h, p->std[i].f);
		else
			OUT("#define P4_SM_%s(phv) ((phv)->dummy_%d)\n", std_names[i], i);
		OUT("#define P4_HAS_SM_%s %d\n", std_names[i], p->std[i].h >= 0);
	}
	OUT("\n#include \"p4/p4rt_state.h\"\n\n");
	/* metadata reset = the metadata fields, before meta_end */
	g->out.oom |= false;
	head = g->out;
	size_t total = head.len + body.len + 64;
	char *out = malloc(total);
	if (out == NULL || head.oom) {
		free(out);
		free(head.s);
		free(body.s);
		p4_arena_free(a);
		snprintf(err, errlen, "out of memory generating code");
		return -ENOMEM;
	}
	memcpy(out, head.s, head.len);
	memcpy(out + head.len, body.s, body.len);
	size_t n = head.len + body.len;
	n += (size_t)snprintf(out + n, total - n, "\n#include \"p4/p4rt_pipe.h\"\n");
	free(head.s);
	free(body.s);
	p4_arena_free(a);
	*src = out;
	return 0;
}
