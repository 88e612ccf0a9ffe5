/*
 * test_regs.c — the data-plane helpers of innet/program.h, run through the
 * real pipeline with innet_switch_inject: register read/write and atomic
 * read-modify-write on 1/2/4/8-byte elements (truncation and wrap-around),
 * blobs, faults (index out of range, PISA register budget, PISA using a
 * Trio-only facility, packet bounds), recirculation (budget, to another
 * program), verdicts the runtime must refuse, multicast to a group the
 * control plane is rewriting at the same time, and the statistics the
 * runtime keeps about all of it. Then concurrent increments from several
 * workers of a started switch, over real loopback UDP: no increment may be
 * lost.
 *
 * The test program is an interpreter: the payload is a list of operations
 * (struct op), each naming a helper and its arguments. The handler runs them
 * in order, writes each result back into the operation, and reflects the
 * packet (or returns the verdict an OP_VERDICT asks for), so one program
 * reaches every helper and the test reads the results from the reply.
 *
 * Ports use 127.202.P.x (P from the process id) and UDP ports 42000 and up.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/clock.h"
#include "innet/switch.h"
#include "targets/user/user_pvt.h"

#define TEST_NET  202u
#define UDP_TRIO  42001u
#define UDP_PISA  42002u
#define UDP_PISA_DEFAULT 42003u
#define UDP_TRIO_ALT 42004u   /* a second UDP port of the trio instance */
#define UDP_COUNT 42010u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

/* ------------------------------------------------------------------------ */
/* The interpreter program                                                    */

enum op_code {
	OP_NOP = 0,
	OP_READ,        /* a = reg[r][idx] */
	OP_WRITE,       /* reg[r][idx] = a */
	OP_ADD,         /* a = fetch_add(a) */
	OP_OR,
	OP_AND,
	OP_SWAP,
	OP_CAS,         /* expected a, new value `desired`: b = ok, a = expected after */
	OP_MAX,         /* a = fetch_max(a) */
	OP_READ_BYTES,  /* copy n = arg bytes of blob element into a..b (16 bytes max) */
	OP_WRITE_BYTES, /* copy n = arg bytes from a..b into the element */
	OP_EMIT,        /* emit this packet's first `arg` bytes out of port idx to ip a, udp b */
	OP_TIMER,       /* arm timer idx after a ns */
	OP_TABLE_PUT,   /* table 0: key idx, value a; a = the enum innet_table_rc */
	OP_TABLE_GET,   /* table 0: b = found, a = value, arg = the enum innet_table_rc */
	OP_PUSH,        /* innet_pkt_push(arg) */
	OP_PULL,
	OP_RESIZE,
	OP_RECIRC,      /* while pkt->recirc < a: return RECIRCULATE */
	OP_REDIRECT,    /* on the first pass: dst_udp = a, RECIRCULATE */
	OP_META,        /* meta32[0]++ each pass it runs; a = meta32[0], b = recirc */
	OP_ALU,         /* innet_alu(a) */
	OP_VERDICT,     /* return action a; out.port/group = idx, out.reason = b */
	OP_SPAN,        /* span of arg elements at idx: b = got one; each += a (4-byte reg) */
};

struct op {
	uint8_t code;
	uint8_t reg;
	uint16_t arg;
	uint32_t idx;
	uint64_t a;
	uint64_t b;
	uint64_t desired;
} __attribute__((packed));

#define MAX_OPS 80u

enum { R_W1, R_W2, R_W4, R_W8, R_BLOB3, R_BLOB20, R_BIG, N_REGS };
#define REG_COUNT 4u
#define BIG_COUNT 2048u   /* R_BIG: 4-byte elements over two 4 KiB pages */

static const char *const reg_drop_names[] = { "test_reason_a", "test_reason_b" };

static enum innet_action interp_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint32_t n = pkt->len / sizeof(struct op);
	if (n > MAX_OPS)
		n = MAX_OPS;
	uint8_t *base = pkt->data;
	for (uint32_t i = 0; i < n; i++) {
		struct op o;
		memcpy(&o, base + i * sizeof(o), sizeof(o));
		switch (o.code) {
		case OP_READ: o.a = innet_reg_read(ctx, o.reg, o.idx); break;
		case OP_WRITE: innet_reg_write(ctx, o.reg, o.idx, o.a); break;
		case OP_ADD: o.a = innet_reg_fetch_add(ctx, o.reg, o.idx, o.a); break;
		case OP_OR: o.a = innet_reg_fetch_or(ctx, o.reg, o.idx, o.a); break;
		case OP_AND: o.a = innet_reg_fetch_and(ctx, o.reg, o.idx, o.a); break;
		case OP_SWAP: o.a = innet_reg_swap(ctx, o.reg, o.idx, o.a); break;
		case OP_CAS: {
			uint64_t expected = o.a;
			o.b = innet_reg_cas(ctx, o.reg, o.idx, &expected, o.desired);
			o.a = expected;
			break;
		}
		case OP_MAX: o.a = innet_reg_fetch_max(ctx, o.reg, o.idx, o.a); break;
		case OP_READ_BYTES: {
			uint8_t buf[64];
			innet_reg_read_bytes(ctx, o.reg, o.idx, buf, o.arg);
			memcpy(&o.a, buf, o.arg < 16 ? o.arg : 16);
			break;
		}
		case OP_WRITE_BYTES: {
			uint8_t buf[64] = { 0 };
			memcpy(buf, &o.a, 16);
			innet_reg_write_bytes(ctx, o.reg, o.idx, buf, o.arg);
			break;
		}
		case OP_EMIT: {
			struct innet_out out = { .port = (uint16_t)o.idx, .ip = (uint32_t)o.a,
						 .udp = (uint16_t)o.b };
			o.a = (uint64_t)innet_emit(ctx, &out, false, pkt->data, o.arg);
			break;
		}
		case OP_TIMER: o.a = (uint64_t)innet_timer_arm(ctx, o.idx, o.a, 0); break;
		case OP_TABLE_PUT: {
			uint32_t key = o.idx;
			uint64_t val = o.a;
			o.a = (uint64_t)innet_table_insert(ctx, 0, &key, &val);
			break;
		}
		case OP_TABLE_GET: {
			uint32_t key = o.idx;
			uint64_t val = 0;
			int rc = innet_table_lookup(ctx, 0, &key, &val);
			o.b = rc == INNET_TABLE_OK;
			o.a = val;
			o.arg = (uint16_t)rc;   /* (read back as int16_t) */
			break;
		}
		case OP_PUSH: o.a = (uint64_t)innet_pkt_push(ctx, pkt, o.arg); break;
		case OP_PULL: o.a = (uint64_t)innet_pkt_pull(ctx, pkt, o.arg); break;
		case OP_RESIZE: o.a = (uint64_t)innet_pkt_resize(ctx, pkt, o.arg); break;
		case OP_RECIRC:
			if (pkt->recirc < o.a)
				return innet_recirculate(pkt);
			break;
		case OP_REDIRECT:
			if (pkt->recirc == 0) {
				pkt->dst_udp = (uint16_t)o.a;
				return innet_recirculate(pkt);
			}
			break;
		case OP_META:
			pkt->meta32[0]++;
			o.a = pkt->meta32[0];
			o.b = pkt->recirc;
			break;
		case OP_ALU: innet_alu(ctx, (uint32_t)o.a); break;
		case OP_SPAN: {
			uint32_t *p = innet_reg_span(ctx, o.reg, o.idx, o.arg);
			o.b = p != NULL;
			if (p != NULL && o.a != 0)
				for (uint32_t k = 0; k < o.arg; k++)
					p[k] += (uint32_t)o.a;
			break;
		}
		case OP_VERDICT:
			memcpy(base + i * sizeof(o), &o, sizeof(o));
			pkt->out.port = (uint16_t)o.idx;
			pkt->out.group = (uint16_t)o.idx;
			pkt->out.reason = (uint16_t)o.b;
			return (enum innet_action)o.a;
		default: break;
		}
		memcpy(base + i * sizeof(o), &o, sizeof(o));
	}
	return innet_reflect(pkt);
}

static int interp_setup(struct innet_decl *d, struct innet_args *a)
{
	static const uint32_t widths[N_REGS] = { 1, 2, 4, 8, 3, 20, 4 };
	static const char *const names[N_REGS] = { "w1", "w2", "w4", "w8", "blob3", "blob20", "big" };
	for (unsigned r = 0; r < N_REGS; r++) {
		int rc = innet_decl_reg(d, r, names[r], widths[r], r == R_BIG ? BIG_COUNT : REG_COUNT);
		if (rc != 0)
			return rc;
	}
	int rc = innet_decl_table(d, 0, "t", 4, 8, 16);
	if (rc == 0)
		rc = innet_decl_groups(d, 2);
	return rc;
}

static int interp_setup_trio(struct innet_decl *d, struct innet_args *a)
{
	int rc = interp_setup(d, a);
	return rc ? rc : innet_decl_timers(d, 4);
}

static void interp_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
}

static const struct innet_program prog_trio = {
	.name = "interp_trio", .model = INNET_MODEL_TRIO,
	.drop_reasons = reg_drop_names, .n_drop_reasons = 2,
	.setup = interp_setup_trio, .handle = interp_handle, .on_timer = interp_timer,
};

#define PISA_BUDGET 6u
static const struct innet_program prog_pisa = {
	.name = "interp_pisa", .model = INNET_MODEL_PISA, .pisa_reg_ops_per_pass = PISA_BUDGET,
	.drop_reasons = reg_drop_names, .n_drop_reasons = 2,
	.setup = interp_setup, .handle = interp_handle,
};

static const struct innet_program prog_pisa_default = {
	.name = "interp_pisa_default", .model = INNET_MODEL_PISA,
	.setup = interp_setup, .handle = interp_handle,
};

/* ------------------------------------------------------------------------ */
/* Fixture: one switch, not started, three instances                         */

struct fx {
	struct innet_switch *sw;
	struct innet_cp *trio, *pisa, *pisa_default;
	struct innet_inject_result res;
	struct op ops[MAX_OPS];
	uint32_t n_ops;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "regs-test");
	c.n_workers = 1;
	c.seed = 7;
	c.n_ports = 3;
	for (uint32_t i = 0; i < 3; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		c.ports[i].ip = test_ip(1 + i);
		c.ports[i].peer_ip = i == 2 ? 0 : test_ip(101 + i); /* port 2: no peer */
	}
	c.n_progs = 3;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "trio");
	c.progs[0].program = &prog_trio;
	c.progs[0].udp[0] = UDP_TRIO;
	c.progs[0].udp[1] = UDP_TRIO_ALT;
	c.progs[0].n_udp = 2;
	snprintf(c.progs[1].name, sizeof(c.progs[1].name), "pisa");
	c.progs[1].program = &prog_pisa;
	c.progs[1].udp[0] = UDP_PISA;
	c.progs[1].n_udp = 1;
	snprintf(c.progs[2].name, sizeof(c.progs[2].name), "pisa_default");
	c.progs[2].program = &prog_pisa_default;
	c.progs[2].udp[0] = UDP_PISA_DEFAULT;
	c.progs[2].n_udp = 1;
	char err[256];
	f->sw = innet_switch_create(&c, err, sizeof(err));
	if (f->sw == NULL)
		fail_msg("innet_switch_create: %s", err);
	f->trio = innet_switch_prog(f->sw, "trio");
	f->pisa = innet_switch_prog(f->sw, "pisa");
	f->pisa_default = innet_switch_prog(f->sw, "pisa_default");
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	innet_switch_destroy(f->sw);
	free(f);
	return 0;
}

static void ops_reset(struct fx *f)
{
	memset(f->ops, 0, sizeof(f->ops));
	f->n_ops = 0;
}

static struct op *op_add(struct fx *f, uint8_t code, uint8_t reg, uint32_t idx, uint64_t a)
{
	assert_true(f->n_ops < MAX_OPS);
	struct op *o = &f->ops[f->n_ops++];
	*o = (struct op){ .code = code, .reg = reg, .idx = idx, .a = a };
	return o;
}

/* Inject the ops into instance udp from 127.202.P.200:5000 on port 0. */
static void run_ops(struct fx *f, uint16_t udp)
{
	struct innet_addr src = { .ip = test_ip(200), .udp = 5000 };
	memset(&f->res, 0xAB, sizeof(f->res));
	int rc = innet_switch_inject(f->sw, 0, udp, &src, f->ops, f->n_ops * sizeof(struct op), &f->res);
	assert_int_equal(rc, 0);
}

/* The ops as reflected back (results filled in). */
static const struct op *reply_op(struct fx *f, uint32_t i)
{
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(f->res.n_out, 1);
	assert_int_equal(f->res.out[0].len, f->n_ops * sizeof(struct op));
	assert_true(i < f->n_ops);
	return (const struct op *)(const void *)(f->res.out[0].data + i * sizeof(struct op));
}

static void expect_drop(struct fx *f, struct innet_cp *cp, unsigned reason)
{
	if (f->res.action != INNET_DROP || f->res.drop_reason != reason)
		fail_msg("expected drop (%s), got %s (%s)", innet_cp_drop_reason_name(cp, reason),
			 innet_action_name(f->res.action),
			 f->res.action == INNET_DROP ? innet_cp_drop_reason_name(cp, f->res.drop_reason) : "-");
	assert_int_equal(f->res.n_out, 0);
}

static uint64_t cp_read(struct innet_cp *cp, unsigned r, uint32_t idx)
{
	uint64_t v = 0;
	assert_int_equal(innet_cp_reg_read(cp, r, idx, &v), 0);
	return v;
}

/* ------------------------------------------------------------------------ */
/* Register helpers                                                          */

static void test_rmw_each_width(void **state)
{
	struct fx *f = *state;
	static const struct {
		unsigned reg;
		uint64_t max;
	} w[] = { { R_W1, 0xff }, { R_W2, 0xffff }, { R_W4, 0xffffffffull }, { R_W8, UINT64_MAX } };
	for (size_t i = 0; i < 4; i++) {
		unsigned r = w[i].reg;
		uint64_t max = w[i].max;
		ops_reset(f);
		op_add(f, OP_WRITE, r, 1, 0x0123456789abcdefull);       /* 0: truncated store */
		op_add(f, OP_READ, r, 1, 0);                             /* 1 */
		op_add(f, OP_WRITE, r, 1, max);                          /* 2 */
		op_add(f, OP_ADD, r, 1, 1);                              /* 3: old = max, wraps to 0 */
		op_add(f, OP_READ, r, 1, 0);                             /* 4: 0 */
		op_add(f, OP_ADD, r, 1, max);                            /* 5: 0 -> max (i.e. -1) */
		op_add(f, OP_ADD, r, 1, 3);                              /* 6: max -> 2 */
		op_add(f, OP_OR, r, 1, 0x50);                            /* 7: old 2 -> 0x52 */
		op_add(f, OP_AND, r, 1, 0xf0 | (max & ~0xffull));        /* 8: old 0x52 -> 0x50 */
		op_add(f, OP_SWAP, r, 1, 0x1234567);                     /* 9: old 0x50 */
		op_add(f, OP_READ, r, 1, 0);                             /* 10: truncated 0x1234567 */
		struct op *cas_fail = op_add(f, OP_CAS, r, 1, 99);       /* 11: fails, a = current */
		cas_fail->desired = 7;
		struct op *cas_ok = op_add(f, OP_CAS, r, 1, 0x1234567 & max); /* 12: succeeds */
		cas_ok->desired = 7;
		op_add(f, OP_MAX, r, 1, 5);                              /* 13: 7 stays, returns 7 */
		op_add(f, OP_MAX, r, 1, max);                            /* 14: returns 7, now max */
		op_add(f, OP_READ, r, 1, 0);                             /* 15: max */
		op_add(f, OP_READ, r, 0, 0);                             /* 16: neighbour untouched */
		op_add(f, OP_READ, r, 2, 0);                             /* 17 */
		op_add(f, OP_ADD, r, 3, 0x100000001ull);                 /* 18: adds 1 (truncated) on
		                                                          * widths < 8 */
		run_ops(f, UDP_TRIO);
		if (f->res.action != INNET_REFLECT)
			fail_msg("width %zu: %s (%s)", i, innet_action_name(f->res.action),
				 innet_cp_drop_reason_name(f->trio, f->res.drop_reason));
		assert_int_equal(reply_op(f, 1)->a, 0x0123456789abcdefull & max);
		assert_int_equal(reply_op(f, 3)->a, max);
		assert_int_equal(reply_op(f, 4)->a, 0);
		assert_int_equal(reply_op(f, 5)->a, 0);
		assert_int_equal(reply_op(f, 6)->a, max);
		assert_int_equal(reply_op(f, 7)->a, 2);
		assert_int_equal(reply_op(f, 8)->a, 0x52);
		assert_int_equal(reply_op(f, 9)->a, 0x50);
		assert_int_equal(reply_op(f, 10)->a, 0x1234567 & max);
		assert_int_equal(reply_op(f, 11)->b, 0);                 /* failed */
		assert_int_equal(reply_op(f, 11)->a, 0x1234567 & max);   /* current value */
		assert_int_equal(reply_op(f, 12)->b, 1);
		assert_int_equal(reply_op(f, 13)->a, 7);
		assert_int_equal(reply_op(f, 14)->a, 7);
		assert_int_equal(reply_op(f, 15)->a, max);
		assert_int_equal(reply_op(f, 16)->a, 0);
		assert_int_equal(reply_op(f, 17)->a, 0);
		assert_int_equal(reply_op(f, 18)->a, 0);
		/* The control plane sees the same memory. */
		assert_int_equal(cp_read(f->trio, r, 1), max);
		assert_int_equal(cp_read(f->trio, r, 3), r == R_W8 ? 0x100000001ull : 1);
	}
}

static void test_blob_registers(void **state)
{
	struct fx *f = *state;
	ops_reset(f);
	struct op *o = op_add(f, OP_WRITE_BYTES, R_BLOB3, 2, 0xCCBBAAull);
	o->arg = 3;
	o = op_add(f, OP_READ_BYTES, R_BLOB3, 2, 0);
	o->arg = 3;
	o = op_add(f, OP_WRITE_BYTES, R_BLOB20, 3, 0x0807060504030201ull);
	o->arg = 16;
	o->b = 0x100f0e0d0c0b0a09ull;
	o = op_add(f, OP_READ_BYTES, R_BLOB20, 3, 0);
	o->arg = 16;
	run_ops(f, UDP_TRIO);
	assert_int_equal(reply_op(f, 1)->a, 0xCCBBAA);
	assert_int_equal(reply_op(f, 3)->a, 0x0807060504030201ull);
	assert_int_equal(reply_op(f, 3)->b, 0x100f0e0d0c0b0a09ull);
	uint8_t blob[3];
	assert_int_equal(innet_cp_reg_read_bytes(f->trio, R_BLOB3, 2, blob, 3), 0);
	assert_int_equal(blob[0], 0xAA);
	assert_int_equal(blob[2], 0xCC);

	/* More bytes than the element holds, or an RMW on a blob: out of range. */
	ops_reset(f);
	o = op_add(f, OP_READ_BYTES, R_BLOB3, 0, 0);
	o->arg = 4;
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_REG_OOB);
	ops_reset(f);
	o = op_add(f, OP_WRITE_BYTES, R_BLOB20, 0, 0);
	o->arg = 21;
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_REG_OOB);
	ops_reset(f);
	op_add(f, OP_ADD, R_BLOB3, 0, 1);
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_REG_OOB);
	ops_reset(f);
	op_add(f, OP_READ, R_BLOB20, 0, 0);
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_REG_OOB);
}

static void test_reg_out_of_range(void **state)
{
	struct fx *f = *state;
	static const struct {
		uint8_t code, reg;
		uint32_t idx;
	} bad[] = {
		{ OP_READ, R_W8, REG_COUNT },     { OP_WRITE, R_W4, REG_COUNT },
		{ OP_ADD, R_W2, UINT32_MAX },     { OP_OR, R_W1, REG_COUNT },
		{ OP_AND, R_W8, REG_COUNT + 1 },  { OP_SWAP, R_W8, REG_COUNT },
		{ OP_CAS, R_W4, REG_COUNT },      { OP_MAX, R_W2, REG_COUNT },
		{ OP_READ, N_REGS, 0 },           { OP_ADD, 31, 0 },
		{ OP_READ_BYTES, R_BLOB3, REG_COUNT },
	};
	uint64_t before = cp_read(f->trio, R_W8, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ops_reset(f);
		op_add(f, OP_ADD, R_W8, 0, 1);          /* a good op first: it still happens */
		struct op *o = op_add(f, bad[i].code, bad[i].reg, bad[i].idx, 1);
		o->arg = 1;
		op_add(f, OP_ADD, R_W8, 0, 1);          /* and the ones after the fault too */
		run_ops(f, UDP_TRIO);
		if (f->res.action != INNET_DROP || f->res.drop_reason != INNET_DROP_REG_OOB)
			fail_msg("case %zu: expected reg_out_of_range, got %s/%s", i,
				 innet_action_name(f->res.action),
				 innet_drop_reason_name(f->res.drop_reason));
		assert_string_equal(innet_cp_drop_reason_name(f->trio, f->res.drop_reason),
				    "reg_out_of_range");
	}
	/* A fault drops the packet; it does not undo or stop the handler. */
	assert_int_equal(cp_read(f->trio, R_W8, 0), before + 2 * (sizeof(bad) / sizeof(bad[0])));
}

/* innet_reg_span: n elements as memory within a 4 KiB page of the register
 * (NULL, no fault, across one; a fault outside the register); n register
 * operations (the PISA budget counts them). */
static void test_reg_span(void **state)
{
	struct fx *f = *state;
	ops_reset(f);
	struct op *o = op_add(f, OP_SPAN, R_BIG, 0, 5);
	o->arg = 32;
	o = op_add(f, OP_SPAN, R_BIG, 1000, 7);   /* bytes 4000..4095: up to the page's end */
	o->arg = 24;
	o = op_add(f, OP_SPAN, R_BIG, 1010, 9);   /* bytes 4040..4167: across it */
	o->arg = 32;
	o = op_add(f, OP_SPAN, R_W8, 0, 0);       /* any width of 1..8 bytes */
	o->arg = 4;
	o = op_add(f, OP_SPAN, R_BIG, BIG_COUNT - 16, 3);   /* the register's last 16 */
	o->arg = 16;
	run_ops(f, UDP_TRIO);
	assert_int_equal(reply_op(f, 0)->b, 1);
	assert_int_equal(reply_op(f, 1)->b, 1);
	assert_int_equal(reply_op(f, 2)->b, 0);   /* NULL, and no fault: the packet was reflected */
	assert_int_equal(reply_op(f, 3)->b, 1);
	assert_int_equal(reply_op(f, 4)->b, 1);
	for (uint32_t i = 0; i < BIG_COUNT; i++) {
		uint64_t want = i < 32 ? 5 : (i >= 1000 && i < 1024) ? 7 : i >= BIG_COUNT - 16 ? 3 : 0;
		if (cp_read(f->trio, R_BIG, i) != want)
			fail_msg("big[%u] = %llu, want %llu", i, (unsigned long long)cp_read(f->trio, R_BIG, i),
				 (unsigned long long)want);
	}
	/* leaving the register, or no elements: reg_out_of_range */
	static const struct {
		uint8_t reg;
		uint32_t idx;
		uint16_t n;
	} bad[] = { { R_BIG, BIG_COUNT - 15, 16 }, { R_BIG, BIG_COUNT, 1 }, { R_BIG, 0, 0 },
		    { R_W4, 2, 3 }, { R_BLOB20, 0, 1 }, { N_REGS, 0, 1 } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ops_reset(f);
		o = op_add(f, OP_SPAN, bad[i].reg, bad[i].idx, 0);
		o->arg = bad[i].n;
		run_ops(f, UDP_TRIO);
		if (f->res.action != INNET_DROP || f->res.drop_reason != INNET_DROP_REG_OOB)
			fail_msg("bad span %zu: expected reg_out_of_range, got %s", i,
				 innet_action_name(f->res.action));
	}
	/* PISA: a span of 40 and 8 single operations are the budget of 48 */
	ops_reset(f);
	o = op_add(f, OP_SPAN, R_BIG, 0, 0);
	o->arg = 40;
	for (uint32_t i = 0; i < 8; i++)
		op_add(f, OP_READ, R_W4, 0, 0);
	run_ops(f, UDP_PISA_DEFAULT);
	assert_int_equal(f->res.action, INNET_REFLECT);
	op_add(f, OP_READ, R_W4, 0, 0);
	run_ops(f, UDP_PISA_DEFAULT);
	expect_drop(f, f->pisa_default, INNET_DROP_REG_BUDGET);
}

/* ------------------------------------------------------------------------ */
/* PISA: register budget and Trio-only facilities                            */

static void test_pisa_budget(void **state)
{
	struct fx *f = *state;
	/* Exactly the budget: fine. */
	ops_reset(f);
	for (uint32_t i = 0; i < PISA_BUDGET; i++)
		op_add(f, OP_ADD, R_W4, 0, 1);
	run_ops(f, UDP_PISA);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(cp_read(f->pisa, R_W4, 0), PISA_BUDGET);

	/* One more: dropped with pisa_reg_budget. */
	op_add(f, OP_READ, R_W4, 0, 0);
	run_ops(f, UDP_PISA);
	expect_drop(f, f->pisa, INNET_DROP_REG_BUDGET);
	assert_string_equal(innet_cp_drop_reason_name(f->pisa, f->res.drop_reason), "pisa_reg_budget");

	/* The same program under the Trio model has no budget. */
	ops_reset(f);
	for (uint32_t i = 0; i < 3 * PISA_BUDGET; i++)
		op_add(f, OP_ADD, R_W4, 0, 1);
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.action, INNET_REFLECT);

	/* A blob wider than 8 bytes costs one operation per 64-bit word:
	 * 16 bytes = 2 words, so budget - 1 single ops + one 16-byte copy
	 * exceeds the budget by one. */
	ops_reset(f);
	for (uint32_t i = 0; i < PISA_BUDGET - 2; i++)
		op_add(f, OP_READ, R_W4, 0, 0);
	struct op *o = op_add(f, OP_READ_BYTES, R_BLOB20, 0, 0);
	o->arg = 16;
	run_ops(f, UDP_PISA);
	assert_int_equal(f->res.action, INNET_REFLECT); /* budget - 2 + 2 = budget */
	op_add(f, OP_READ, R_W4, 0, 0);
	run_ops(f, UDP_PISA);
	expect_drop(f, f->pisa, INNET_DROP_REG_BUDGET);
	/* The default budget (pisa_reg_ops_per_pass = 0) is 48. */
	ops_reset(f);
	for (uint32_t i = 0; i < 48; i++)
		op_add(f, OP_READ, R_W8, i % REG_COUNT, 0);
	run_ops(f, UDP_PISA_DEFAULT);
	assert_int_equal(f->res.action, INNET_REFLECT);
	op_add(f, OP_READ, R_W8, 0, 0);
	run_ops(f, UDP_PISA_DEFAULT);
	expect_drop(f, f->pisa_default, INNET_DROP_REG_BUDGET);
}

/* The words of a blob wider than 8 bytes count against the budget like any
 * other operation (the runtime counts them in the statistics): budget - 1
 * single operations and one 16-byte copy (2 words) are one too many. */
static void test_pisa_budget_blob_words(void **state)
{
	struct fx *f = *state;
	ops_reset(f);
	for (uint32_t i = 0; i < PISA_BUDGET - 1; i++)
		op_add(f, OP_READ, R_W4, 0, 0);
	struct op *o = op_add(f, OP_WRITE_BYTES, R_BLOB20, 0, 0);
	o->arg = 16;
	run_ops(f, UDP_PISA);
	struct innet_prog_stats st;
	innet_cp_stats(f->pisa, &st);
	assert_int_equal(st.max_reg_ops, PISA_BUDGET + 1); /* counted ... */
	if (f->res.action != INNET_DROP)                   /* ... but not enforced */
		fail_msg("%u register operations (%u single, one 16-byte blob copy) passed a PISA "
			 "budget of %u", PISA_BUDGET + 1, PISA_BUDGET - 1, PISA_BUDGET);
	expect_drop(f, f->pisa, INNET_DROP_REG_BUDGET);
}

/* innet_reg_fetch_max is one stateful operation whether or not it stores:
 * a PISA program cannot do more of them per pass than its budget, and the
 * statistics count each one. */
static void test_pisa_budget_fetch_max(void **state)
{
	struct fx *f = *state;
	assert_int_equal(innet_cp_reg_write(f->pisa, R_W8, 2, 1000), 0);
	innet_switch_stats_reset(f->sw);
	ops_reset(f);
	op_add(f, OP_MAX, R_W8, 2, 5); /* 1000 stays: no store */
	run_ops(f, UDP_PISA);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(reply_op(f, 0)->a, 1000);
	struct innet_prog_stats st;
	innet_cp_stats(f->pisa, &st);
	if (st.reg_ops != 1 || st.max_reg_ops != 1)
		fail_msg("a fetch_max that does not store was counted as %llu register operations "
			 "(want 1)", (unsigned long long)st.reg_ops);

	ops_reset(f);
	for (uint32_t i = 0; i <= PISA_BUDGET; i++)
		op_add(f, OP_MAX, R_W8, 2, i); /* never stores */
	run_ops(f, UDP_PISA);
	if (f->res.action != INNET_DROP)
		fail_msg("%u fetch_max operations passed a budget of %u (counted as %u)",
			 PISA_BUDGET + 1, PISA_BUDGET,
			 (innet_cp_stats(f->pisa, &st), st.max_reg_ops));
	expect_drop(f, f->pisa, INNET_DROP_REG_BUDGET);
}

static void test_pisa_model_violations(void **state)
{
	struct fx *f = *state;
	/* emit */
	ops_reset(f);
	struct op *o = op_add(f, OP_EMIT, 0, 0, test_ip(150));
	o->b = 7000;
	o->arg = 4;
	run_ops(f, UDP_PISA);
	expect_drop(f, f->pisa, INNET_DROP_MODEL_VIOLATION);
	assert_string_equal(innet_cp_drop_reason_name(f->pisa, f->res.drop_reason), "model_violation");
	/* timer */
	ops_reset(f);
	op_add(f, OP_TIMER, 0, 0, 1000);
	run_ops(f, UDP_PISA);
	expect_drop(f, f->pisa, INNET_DROP_MODEL_VIOLATION);
	/* data-plane table write */
	ops_reset(f);
	op_add(f, OP_TABLE_PUT, 0, 5, 55);
	run_ops(f, UDP_PISA);
	expect_drop(f, f->pisa, INNET_DROP_MODEL_VIOLATION);
	uint32_t key = 5;
	uint64_t val;
	assert_int_equal(innet_cp_table_get(f->pisa, 0, &key, &val), -ENOENT);
	/* ... but lookups are fine */
	assert_int_equal(innet_cp_table_add(f->pisa, 0, &key, &(uint64_t){ 66 }), 0);
	ops_reset(f);
	op_add(f, OP_TABLE_GET, 0, 5, 0);
	op_add(f, OP_TABLE_GET, 0, 6, 0);
	run_ops(f, UDP_PISA);
	assert_int_equal(reply_op(f, 0)->b, 1);
	assert_int_equal(reply_op(f, 0)->a, 66);
	assert_int_equal(reply_op(f, 1)->b, 0);
}

static void test_trio_emit_timer_table(void **state)
{
	struct fx *f = *state;
	ops_reset(f);
	struct op *o = op_add(f, OP_EMIT, 0, 1, test_ip(150)); /* out of port 1 to .150:7000 */
	o->b = 7000;
	o->arg = sizeof(struct op);
	op_add(f, OP_TIMER, 0, 3, 1000000000ull); /* armed; the switch is not started */
	op_add(f, OP_TABLE_PUT, 0, 9, 99);
	op_add(f, OP_TABLE_GET, 0, 9, 0);
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(f->res.n_out, 2);
	/* The emitted copy (taken before the ops after it ran) and the reply. */
	const struct innet_inject_out *e = &f->res.out[0], *r = &f->res.out[1];
	assert_int_equal(e->port, 1);
	assert_int_equal(e->dst.ip, test_ip(150));
	assert_int_equal(e->dst.udp, 7000);
	assert_int_equal(e->src_udp, UDP_TRIO);
	assert_int_equal(e->len, sizeof(struct op));
	assert_int_equal(((const struct op *)(const void *)e->data)->code, OP_EMIT);
	assert_int_equal(r->port, 0);
	assert_int_equal(r->dst.ip, test_ip(200));
	assert_int_equal(r->dst.udp, 5000);
	assert_int_equal(r->src_udp, UDP_TRIO);
	const struct op *ro = (const struct op *)(const void *)r->data;
	assert_int_equal(ro[0].a, 0);  /* emit returned 0 */
	assert_int_equal(ro[1].a, 0);  /* timer armed */
	assert_int_equal(ro[2].a, 0);  /* insert ok */
	assert_int_equal(ro[3].b, 1);
	assert_int_equal(ro[3].a, 99);
	assert_int_equal((int16_t)ro[3].arg, INNET_TABLE_OK);

	/* A writer stopped inside key 9's entry (the control plane, preempted):
	 * the handler's lookup and replace answer BUSY, not "absent"; once the
	 * writer goes on, the entry is as it was. */
	uint32_t k9 = 9;
	assert_int_equal(innet_table_test_hold(f->trio->tables[0], &k9, false, true), 0);
	ops_reset(f);
	op_add(f, OP_TABLE_GET, 0, 9, 0);
	op_add(f, OP_TABLE_PUT, 0, 9, 100);
	run_ops(f, UDP_TRIO);
	assert_int_equal(reply_op(f, 0)->b, 0);
	assert_int_equal((int16_t)reply_op(f, 0)->arg, INNET_TABLE_BUSY);
	assert_int_equal((int32_t)reply_op(f, 1)->a, INNET_TABLE_BUSY);
	assert_int_equal(innet_table_test_hold(f->trio->tables[0], &k9, false, false), 0);
	ops_reset(f);
	op_add(f, OP_TABLE_GET, 0, 9, 0);
	run_ops(f, UDP_TRIO);
	assert_int_equal((int16_t)reply_op(f, 0)->arg, INNET_TABLE_OK);
	assert_int_equal(reply_op(f, 0)->a, 99);

	/* A timer id out of range faults the packet. */
	ops_reset(f);
	op_add(f, OP_TIMER, 0, 4, 1000);
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_REG_OOB);

	/* Emitting to a port without a peer fails (and is counted), the packet
	 * itself is not faulted; emitting to a port that does not exist either. */
	innet_switch_stats_reset(f->sw);
	ops_reset(f);
	o = op_add(f, OP_EMIT, 0, 2, 0);
	o->arg = 4;
	o = op_add(f, OP_EMIT, 0, 9, test_ip(150));
	o->arg = 4;
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.n_out, 1);
	assert_int_equal(reply_op(f, 0)->a, (uint64_t)-1);
	assert_int_equal(reply_op(f, 1)->a, (uint64_t)-1);
	struct innet_prog_stats st;
	innet_cp_stats(f->trio, &st);
	assert_int_equal(st.drops[INNET_DROP_NO_PEER], 1);
	assert_int_equal(st.drops[INNET_DROP_BAD_PORT], 1);
	assert_int_equal(st.emitted, 2);
	assert_int_equal(st.max_emitted, 2);
}

/* ------------------------------------------------------------------------ */
/* Packet bounds                                                              */

static void test_pkt_bounds(void **state)
{
	struct fx *f = *state;
	static const struct {
		uint8_t code;
		uint16_t arg;
		bool ok;
		uint32_t out_len; /* when ok; UINT32_MAX: ops + arg */
	} cases[] = {
		{ OP_PUSH, INNET_PKT_HEADROOM, true, UINT32_MAX },
		{ OP_PUSH, INNET_PKT_HEADROOM + 1, false, 0 },
		{ OP_PULL, sizeof(struct op), true, 0 },
		{ OP_PULL, sizeof(struct op) + 1, false, 0 },
		{ OP_RESIZE, INNET_PKT_MAX, true, INNET_PKT_MAX },
		{ OP_RESIZE, INNET_PKT_MAX + 1, false, 0 },
		{ OP_RESIZE, 3, true, 3 },
		{ OP_RESIZE, 0, true, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ops_reset(f);
		struct op *o = op_add(f, cases[i].code, 0, 0, 0);
		o->arg = cases[i].arg;
		run_ops(f, UDP_TRIO);
		if (!cases[i].ok) {
			expect_drop(f, f->trio, INNET_DROP_PKT_BOUNDS);
			assert_string_equal(innet_cp_drop_reason_name(f->trio, f->res.drop_reason),
					    "pkt_bounds");
			continue;
		}
		if (f->res.action != INNET_REFLECT)
			fail_msg("case %zu: %s/%s", i, innet_action_name(f->res.action),
				 innet_drop_reason_name(f->res.drop_reason));
		assert_int_equal(f->res.n_out, 1);
		uint32_t want = cases[i].out_len == UINT32_MAX ? sizeof(struct op) + cases[i].arg :
								   cases[i].out_len;
		assert_int_equal(f->res.out[0].len, want);
		if (cases[i].code == OP_PUSH) /* the op, after the pushed bytes */
			assert_int_equal(f->res.out[0].data[cases[i].arg], OP_PUSH);
	}
	/* Push to the limit, then one more byte. */
	ops_reset(f);
	struct op *o = op_add(f, OP_PUSH, 0, 0, 0);
	o->arg = INNET_PKT_HEADROOM - 1;
	o = op_add(f, OP_PUSH, 0, 0, 0);
	o->arg = 1;
	o = op_add(f, OP_PUSH, 0, 0, 0);
	o->arg = 1;
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_PKT_BOUNDS);
}

/* ------------------------------------------------------------------------ */
/* Verdicts                                                                   */

static void run_verdict(struct fx *f, struct innet_cp *cp, uint16_t udp, uint64_t action, uint32_t arg,
			uint64_t reason)
{
	ops_reset(f);
	struct op *o = op_add(f, OP_VERDICT, 0, arg, action);
	o->b = reason;
	run_ops(f, udp);
}

static void test_verdicts(void **state)
{
	struct fx *f = *state;
	static const struct {
		uint64_t action;
		uint32_t arg;         /* out.port / out.group */
		uint64_t reason;
		enum innet_action want;
		const char *reason_name; /* when dropped */
	} cases[] = {
		{ INNET_DROP, 0, 0, INNET_DROP, "program_verdict" },
		{ INNET_DROP, 0, INNET_DROP_PROGRAM, INNET_DROP, "test_reason_a" },
		{ INNET_DROP, 0, INNET_DROP_PROGRAM + 1, INNET_DROP, "test_reason_b" },
		{ INNET_DROP, 0, INNET_DROP_PROGRAM + 2, INNET_DROP, "bad_verdict" }, /* not declared */
		{ INNET_DROP, 0, INNET_DROP_RUNTIME_COUNT, INNET_DROP, "bad_verdict" },
		{ INNET_DROP, 0, 0xffff, INNET_DROP, "bad_verdict" },
		{ INNET_DROP, 0, INNET_DROP_NO_PEER, INNET_DROP, "no_peer" },
		{ INNET_ACTION_COUNT, 0, 0, INNET_DROP, "bad_verdict" },
		{ 99, 0, 0, INNET_DROP, "bad_verdict" },
		{ 0xffffffffull, 0, 0, INNET_DROP, "bad_verdict" },
		{ INNET_FORWARD, 1, 0, INNET_FORWARD, NULL },
		{ INNET_FORWARD, 3, 0, INNET_DROP, "bad_port" },
		{ INNET_FORWARD, 2, 0, INNET_DROP, "no_peer" },
		{ INNET_MULTICAST, 2, 0, INNET_DROP, "bad_group" },  /* not declared */
		{ INNET_MULTICAST, 1, 0, INNET_DROP, "bad_group" },  /* empty */
		{ INNET_MULTICAST, 0, 0, INNET_MULTICAST, NULL },
		{ INNET_REFLECT, 0, 0, INNET_REFLECT, NULL },
		{ INNET_CONSUMED, 0, 0, INNET_CONSUMED, NULL },
		{ INNET_TO_CPU, 0, 0, INNET_TO_CPU, NULL },
	};
	struct innet_member m[2] = { { .port = 0 }, { .port = 1, .ip = test_ip(160), .udp = 6000 } };
	assert_int_equal(innet_cp_group_set(f->trio, 0, m, 2), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		run_verdict(f, f->trio, UDP_TRIO, cases[i].action, cases[i].arg, cases[i].reason);
		if (f->res.action != cases[i].want)
			fail_msg("case %zu: want %s, got %s (%s)", i, innet_action_name(cases[i].want),
				 innet_action_name(f->res.action),
				 innet_cp_drop_reason_name(f->trio, f->res.drop_reason));
		if (cases[i].want == INNET_DROP) {
			const char *got = innet_cp_drop_reason_name(f->trio, f->res.drop_reason);
			if (strcmp(got, cases[i].reason_name) != 0)
				fail_msg("case %zu: want reason %s, got %s", i, cases[i].reason_name, got);
			assert_int_equal(f->res.n_out, 0);
		}
	}
	/* What the sent cases put on the wire. */
	run_verdict(f, f->trio, UDP_TRIO, INNET_FORWARD, 1, 0);
	assert_int_equal(f->res.n_out, 1);
	assert_int_equal(f->res.out[0].port, 1);
	assert_int_equal(f->res.out[0].dst.ip, test_ip(102)); /* port 1's peer */
	assert_int_equal(f->res.out[0].dst.udp, UDP_TRIO);    /* the packet's UDP port */
	run_verdict(f, f->trio, UDP_TRIO, INNET_MULTICAST, 0, 0);
	assert_int_equal(f->res.n_out, 2);
	assert_int_equal(f->res.out[0].port, 0);
	assert_int_equal(f->res.out[0].dst.ip, test_ip(101));
	assert_int_equal(f->res.out[0].dst.udp, UDP_TRIO);
	assert_int_equal(f->res.out[1].port, 1);
	assert_int_equal(f->res.out[1].dst.ip, test_ip(160));
	assert_int_equal(f->res.out[1].dst.udp, 6000);
	assert_memory_equal(f->res.out[0].data, f->res.out[1].data, sizeof(struct op));
	/* Arriving on the second UDP port of the program: replies go from it. */
	ops_reset(f);
	op_add(f, OP_NOP, 0, 0, 0);
	run_ops(f, UDP_TRIO_ALT);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(f->res.out[0].src_udp, UDP_TRIO_ALT);
	assert_int_equal(f->res.out[0].dst.udp, 5000);

	/* Injection itself refuses what cannot arrive. */
	struct innet_addr src = { .ip = test_ip(200), .udp = 5000 };
	assert_int_equal(innet_switch_inject(f->sw, 3, UDP_TRIO, &src, f->ops, 8, &f->res), -EINVAL);
	assert_int_equal(innet_switch_inject(f->sw, 0, 1234, &src, f->ops, 8, &f->res), -EINVAL);
	static uint8_t big[INNET_PKT_MAX + 1];
	assert_int_equal(innet_switch_inject(f->sw, 0, UDP_TRIO, &src, big, INNET_PKT_MAX + 1, &f->res),
			 -EINVAL);
	assert_int_equal(innet_switch_inject(f->sw, 0, UDP_TRIO, &src, big, INNET_PKT_MAX, &f->res), 0);
	assert_int_equal(f->res.action, INNET_REFLECT); /* all NOPs */
	assert_int_equal(f->res.out[0].len, INNET_PKT_MAX);
}

/*
 * A packet to a group whose update is in progress (its seqlock odd, as
 * innet_cp_group_set leaves it while copying the members) waits for the
 * update to finish, 100 microseconds here, rather than being
 * dropped as bad_group. The "update" is made by hand on the group's seq
 * (switch_pvt.h) and finished by a thread on another CPU.
 */
struct group_release {
	pthread_t th;
	struct innet_group *g;
	_Atomic int phase;          /* 1: the injector is about to send */
	_Atomic uint64_t start_ns;  /* when the injector started */
	uint64_t release_ns;        /* when the update was finished */
};

static void *group_release_main(void *arg)
{
	struct group_release *r = arg;
	while (atomic_load(&r->phase) != 1)
		;
	uint64_t until = atomic_load(&r->start_ns) + 100000; /* 100 us */
	while (innet_now_ns() < until)
		;
	r->release_ns = innet_now_ns();
	atomic_fetch_add_explicit(&r->g->seq, 1, memory_order_release); /* even: done */
	return NULL;
}

static void test_multicast_waits_for_group_update(void **state)
{
	struct fx *f = *state;
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2)
		test_skip("needs two CPUs (a worker and a group update really at once)");
	int cpus[2], k = 0;
	for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[k++] = c;
	struct innet_member m[3] = { { .port = 0 }, { .port = 1 }, { .port = 1, .udp = 6001 } };
	assert_int_equal(innet_cp_group_set(f->trio, 0, m, 3), 0);
	struct innet_group *g = &f->trio->groups[0];
	/* A round counts when the update was finished within 1 ms of the send:
	 * on a loaded machine the releasing thread may itself be descheduled
	 * for longer than any sender should wait, and such rounds say nothing. */
	uint32_t rounds = 0, dropped = 0;
	unsigned reason = 0;
	for (int attempt = 0; attempt < 400 && rounds < 20; attempt++) {
		struct group_release r = { .g = g };
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		CPU_ZERO(&one);
		CPU_SET(cpus[0], &one);
		pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
		assert_int_equal(pthread_create(&r.th, &attr, group_release_main, &r), 0);
		pthread_attr_destroy(&attr);
		CPU_ZERO(&one);
		CPU_SET(cpus[1], &one);
		sched_setaffinity(0, sizeof(one), &one);
		atomic_fetch_add_explicit(&g->seq, 1, memory_order_acq_rel); /* odd: "writing" */
		atomic_store(&r.start_ns, innet_now_ns());
		atomic_store(&r.phase, 1);
		run_verdict(f, f->trio, UDP_TRIO, INNET_MULTICAST, 0, 0);
		pthread_join(r.th, NULL);
		sched_setaffinity(0, sizeof(allowed), &allowed);
		if (r.release_ns - atomic_load(&r.start_ns) > 1000000)
			continue;
		rounds++;
		if (f->res.action != INNET_MULTICAST || f->res.n_out != 3) {
			if (dropped++ == 0)
				reason = f->res.action == INNET_DROP ? f->res.drop_reason : 0;
		}
	}
	assert_true(rounds >= 10);
	if (dropped)
		fail_msg("%u of %u packets sent while a group update was in progress (for 100 us) "
			 "were not sent to the group (%s)", dropped, rounds,
			 reason ? innet_cp_drop_reason_name(f->trio, reason) : "wrong members");
}

/*
 * A multicast group the control plane rewrites while packets are sent to it:
 * every packet goes to all members of the old list or all of the new one,
 * never to a mix, and never to nobody (bad_group) because a write was in
 * progress. The writer and the injecting thread run on two CPUs.
 */
struct group_writer {
	pthread_t th;
	struct innet_cp *cp;
	_Atomic bool stop;
	_Atomic uint32_t writes;
	uint32_t errors;
};

#define LIST_A INNET_MAX_GROUP_MEMBERS
#define LIST_B INNET_MAX_GROUP_MEMBERS

static void *group_writer_main(void *arg)
{
	struct group_writer *g = arg;
	static struct innet_member a[LIST_A], b[LIST_B];
	for (uint32_t i = 0; i < LIST_A; i++)
		a[i] = (struct innet_member){ .port = 0, .ip = test_ip(1), .udp = (uint16_t)(1000 + i) };
	for (uint32_t i = 0; i < LIST_B; i++)
		b[i] = (struct innet_member){ .port = 1, .ip = test_ip(2), .udp = (uint16_t)(2000 + i) };
	for (uint32_t n = 0; !atomic_load(&g->stop); n++) {
		uint64_t t0 = innet_now_ns();
		if (innet_cp_group_set(g->cp, 0, n & 1 ? b : a, n & 1 ? LIST_B : LIST_A) != 0)
			g->errors++;
		uint64_t t1 = innet_now_ns();
		atomic_fetch_add(&g->writes, 1);
		/* A short pause between updates, at least as long as an update
		 * (slow sanitizer builds): the group is stable half of the time. */
		uint64_t gap = t1 - t0 > 500 ? t1 - t0 : 500;
		while (innet_now_ns() < t1 + gap)
			__builtin_ia32_pause();
	}
	return NULL;
}

static void test_multicast_during_group_update(void **state)
{
	struct fx *f = *state;
	cpu_set_t allowed, one;
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < 2)
		test_skip("needs two CPUs (a worker and a group update really at once)");
	int cpus[2], k = 0;
	for (int c = 0; c < CPU_SETSIZE && k < 2; c++)
		if (CPU_ISSET(c, &allowed))
			cpus[k++] = c;
	struct group_writer g = { .cp = f->trio };
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	CPU_ZERO(&one);
	CPU_SET(cpus[0], &one);
	pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	assert_int_equal(pthread_create(&g.th, &attr, group_writer_main, &g), 0);
	pthread_attr_destroy(&attr);
	CPU_ZERO(&one);
	CPU_SET(cpus[1], &one);
	sched_setaffinity(0, sizeof(one), &one);
	while (atomic_load(&g.writes) < 10)
		sched_yield();

	uint32_t sent = 0, empty = 0, premature = 0, mixed = 0;
	unsigned reason = 0;
	uint64_t end = innet_now_ns() + 300000000ull;
	while (innet_now_ns() < end) {
		uint64_t t0 = innet_now_ns();
		run_verdict(f, f->trio, UDP_TRIO, INNET_MULTICAST, 0, 0);
		sent++;
		if (f->res.action != INNET_MULTICAST) {
			if (empty++ == 0)
				reason = f->res.drop_reason;
			premature += innet_now_ns() - t0 < 100000; /* did not wait 100 us for the writer */
			continue;
		}
		uint32_t n = f->res.n_out;
		bool is_a = n == LIST_A, is_b = n == LIST_B; /* both lists are full: check the members */
		for (uint32_t i = 0; i < n && (is_a || is_b); i++) {
			const struct innet_inject_out *o = &f->res.out[i];
			if (is_a && (o->port != 0 || o->dst.udp != 1000 + i))
				is_a = false;
			if (is_b && (o->port != 1 || o->dst.udp != 2000 + i))
				is_b = false;
		}
		mixed += !is_a && !is_b;
	}
	atomic_store(&g.stop, true);
	pthread_join(g.th, NULL);
	sched_setaffinity(0, sizeof(allowed), &allowed);
	assert_int_equal(g.errors, 0);
	assert_true(atomic_load(&g.writes) > 100); /* the two really overlapped */
	if (mixed)
		fail_msg("%u of %u packets went to a mix of the old and the new members", mixed, sent);
	/* Zero drops is the contract. An update takes a microsecond; a sender
	 * that waits a bounded time must give up only if something else on the
	 * machine preempts the writer in the middle of it: such drops (after a
	 * long wait, and rare) are tolerated, dropping at once is not. */
	if (premature > 0 || empty > 2 + sent / 100)
		fail_msg("%u of %u packets to a group being updated were dropped (%s), %u of them "
			 "within 100 us", empty, sent, innet_cp_drop_reason_name(f->trio, reason), premature);
}

/* ------------------------------------------------------------------------ */
/* Recirculation                                                              */

static void test_recirculation(void **state)
{
	struct fx *f = *state;
	/* Three recirculations, then reflect: four passes, meta carried. */
	innet_switch_stats_reset(f->sw);
	ops_reset(f);
	op_add(f, OP_META, 0, 0, 0);
	op_add(f, OP_RECIRC, 0, 0, 3);
	op_add(f, OP_META, 0, 0, 0);
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(reply_op(f, 0)->a, 4);   /* meta32[0] after 4 passes */
	assert_int_equal(reply_op(f, 2)->a, 5);
	assert_int_equal(reply_op(f, 2)->b, 3);   /* pkt->recirc on the last pass */
	struct innet_prog_stats st;
	innet_cp_stats(f->trio, &st);
	assert_int_equal(st.rx_pkts, 1);
	assert_int_equal(st.passes, 4);
	assert_int_equal(st.recirculations, 3);
	assert_int_equal(st.max_recirc, 3);
	assert_int_equal(st.actions[INNET_REFLECT], 1);

	/* Up to the limit is allowed ... */
	innet_switch_stats_reset(f->sw);
	ops_reset(f);
	op_add(f, OP_RECIRC, 0, 0, INNET_MAX_RECIRC);
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.action, INNET_REFLECT);
	innet_cp_stats(f->trio, &st);
	assert_int_equal(st.passes, INNET_MAX_RECIRC + 1);
	assert_int_equal(st.max_recirc, INNET_MAX_RECIRC);
	/* ... one more is dropped. */
	innet_switch_stats_reset(f->sw);
	ops_reset(f);
	op_add(f, OP_RECIRC, 0, 0, 255);
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_RECIRC_BUDGET);
	assert_string_equal(innet_cp_drop_reason_name(f->trio, f->res.drop_reason), "recirc_budget");
	innet_cp_stats(f->trio, &st);
	assert_int_equal(st.rx_pkts, 1);
	assert_int_equal(st.passes, INNET_MAX_RECIRC + 1);
	assert_int_equal(st.max_recirc, INNET_MAX_RECIRC);
	assert_int_equal(st.drops[INNET_DROP_RECIRC_BUDGET], 1);
	assert_int_equal(st.actions[INNET_DROP], 1);

	/* Recirculating to another program: dst_udp changed on the first pass;
	 * the second program runs the rest (on its own registers) and its
	 * verdict is final. */
	innet_switch_stats_reset(f->sw);
	uint64_t trio_before = cp_read(f->trio, R_W2, 3), pisa_before = cp_read(f->pisa, R_W2, 3);
	ops_reset(f);
	op_add(f, OP_REDIRECT, 0, 0, UDP_PISA);
	op_add(f, OP_ADD, R_W2, 3, 10);
	run_ops(f, UDP_TRIO);
	assert_int_equal(f->res.action, INNET_REFLECT);
	assert_int_equal(f->res.out[0].src_udp, UDP_PISA); /* sent by the second program */
	assert_int_equal(cp_read(f->trio, R_W2, 3), trio_before);
	assert_int_equal(cp_read(f->pisa, R_W2, 3), pisa_before + 10);
	struct innet_prog_stats st_pisa;
	innet_cp_stats(f->trio, &st);
	innet_cp_stats(f->pisa, &st_pisa);
	assert_int_equal(st.rx_pkts, 1);
	assert_int_equal(st.passes, 1);
	assert_int_equal(st.recirculations, 1);
	assert_int_equal(st_pisa.passes, 1);
	assert_int_equal(st_pisa.actions[INNET_REFLECT], 1);
	assert_int_equal(st.actions[INNET_REFLECT], 0);

	/* ... and to a UDP port no program has: no_program. */
	ops_reset(f);
	op_add(f, OP_REDIRECT, 0, 0, 9);
	run_ops(f, UDP_TRIO);
	expect_drop(f, f->trio, INNET_DROP_NO_PROGRAM);
	assert_string_equal(innet_cp_drop_reason_name(f->trio, f->res.drop_reason), "no_program");
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                                 */

static void test_stats_match_injected(void **state)
{
	struct fx *f = *state;
	innet_switch_stats_reset(f->sw);
	struct innet_prog_stats st;
	innet_cp_stats(f->pisa, &st);
	assert_int_equal(st.rx_pkts, 0);
	assert_int_equal(st.passes, 0);

	/* 5 packets of 3 register ops and 2 alu ops; 2 packets over budget;
	 * 1 recirculating twice with 1 op a pass; 3 dropped by the program
	 * with its first reason; 1 out of range. */
	uint64_t bytes = 0;
	for (int i = 0; i < 5; i++) {
		ops_reset(f);
		op_add(f, OP_ADD, R_W8, 0, 1);
		op_add(f, OP_READ, R_W8, 1, 0);
		op_add(f, OP_ALU, 0, 0, 2);
		op_add(f, OP_WRITE, R_W8, 2, 5);
		run_ops(f, UDP_PISA);
		assert_int_equal(f->res.action, INNET_REFLECT);
		bytes += f->n_ops * sizeof(struct op);
	}
	for (int i = 0; i < 2; i++) {
		ops_reset(f);
		for (uint32_t k = 0; k < PISA_BUDGET + 1; k++)
			op_add(f, OP_READ, R_W1, 0, 0);
		run_ops(f, UDP_PISA);
		expect_drop(f, f->pisa, INNET_DROP_REG_BUDGET);
		bytes += f->n_ops * sizeof(struct op);
	}
	ops_reset(f);
	op_add(f, OP_READ, R_W1, 0, 0);
	op_add(f, OP_RECIRC, 0, 0, 2);
	run_ops(f, UDP_PISA);
	assert_int_equal(f->res.action, INNET_REFLECT);
	bytes += f->n_ops * sizeof(struct op);
	for (int i = 0; i < 3; i++) {
		run_verdict(f, f->pisa, UDP_PISA, INNET_DROP, 0, INNET_DROP_PROGRAM);
		bytes += f->n_ops * sizeof(struct op);
	}
	ops_reset(f);
	op_add(f, OP_READ, R_W1, REG_COUNT, 0);
	run_ops(f, UDP_PISA);
	bytes += f->n_ops * sizeof(struct op);

	innet_cp_stats(f->pisa, &st);
	assert_int_equal(st.rx_pkts, 5 + 2 + 1 + 3 + 1);
	assert_int_equal(st.rx_bytes, bytes);
	assert_int_equal(st.passes, 5 + 2 + 3 + 3 + 1);
	assert_int_equal(st.recirculations, 2);
	assert_int_equal(st.max_recirc, 2);
	assert_int_equal(st.actions[INNET_REFLECT], 5 + 1);
	assert_int_equal(st.actions[INNET_DROP], 2 + 3 + 1);
	assert_int_equal(st.drops[INNET_DROP_REG_BUDGET], 2);
	assert_int_equal(st.drops[INNET_DROP_PROGRAM], 3);
	assert_int_equal(st.drops[INNET_DROP_REG_OOB], 1);
	assert_int_equal(st.tx_pkts, 5 + 1);
	/* Register operations: 5*3 + 2*(budget+1) + 3 passes * 1 + 1 (the faulting one). */
	assert_int_equal(st.reg_ops, 15 + 2 * (PISA_BUDGET + 1) + 3 + 1);
	assert_int_equal(st.max_reg_ops, PISA_BUDGET + 1);
	assert_int_equal(st.alu_ops, 10);
	assert_int_equal(st.max_alu_ops, 2);
	assert_int_equal(st.emitted, 0);
	uint32_t drops = 0;
	for (uint32_t r = 0; r < INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS; r++)
		drops += st.drops[r];
	assert_int_equal(drops, st.actions[INNET_DROP]);

	/* Nothing was counted against the other instances. */
	struct innet_prog_stats other;
	innet_cp_stats(f->trio, &other);
	assert_int_equal(other.rx_pkts, 0);
	assert_int_equal(other.passes, 0);

	/* Injection sends nothing: the ports saw no traffic. */
	struct innet_port_stats ps;
	for (uint32_t p = 0; p < 3; p++) {
		assert_int_equal(innet_switch_port_stats(f->sw, p, &ps), 0);
		assert_int_equal(ps.tx_pkts, 0);
		assert_int_equal(ps.rx_pkts, 0);
	}
	assert_int_equal(innet_switch_port_stats(f->sw, 3, &ps), -EINVAL);

	/* And a reset clears it all. */
	innet_switch_stats_reset(f->sw);
	innet_cp_stats(f->pisa, &st);
	assert_int_equal(st.rx_pkts, 0);
	assert_int_equal(st.reg_ops, 0);
	assert_int_equal(st.max_reg_ops, 0);
}

/* ------------------------------------------------------------------------ */
/* Concurrent read-modify-write over real UDP                                */

static enum innet_action count_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	innet_reg_fetch_add(ctx, 0, 0, 1);
	/* and one counter per flow slot, to spread writes over elements too */
	innet_reg_fetch_add(ctx, 0, 1 + pkt->src.udp % 8, 1);
	return INNET_CONSUMED;
}

static int count_setup(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_reg(d, 0, "count", 8, 9);
}

static const struct innet_program prog_count = {
	.name = "count", .model = INNET_MODEL_TRIO, .setup = count_setup, .handle = count_handle,
};

#define SENDERS          4u
#define SOCKS_PER_SENDER 4u
#define PKTS_PER_SENDER  4000u

struct sender {
	pthread_t th;
	uint32_t dst_ip;
	uint32_t sent;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	int fds[SOCKS_PER_SENDER];
	for (uint32_t i = 0; i < SOCKS_PER_SENDER; i++) {
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(test_ip(250)) };
		if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&any, sizeof(any)) != 0)
			return NULL;
	}
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(UDP_COUNT),
				   .sin_addr.s_addr = htonl(s->dst_ip) };
	uint8_t payload[32] = { 0 };
	for (uint32_t i = 0; i < PKTS_PER_SENDER; i++) {
		if (sendto(fds[i % SOCKS_PER_SENDER], payload, sizeof(payload), 0, (struct sockaddr *)&dst,
			   sizeof(dst)) == (ssize_t)sizeof(payload))
			s->sent++;
		if (i % 256 == 255) { /* let the switch keep up: fewer kernel drops */
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
	}
	for (uint32_t i = 0; i < SOCKS_PER_SENDER; i++)
		close(fds[i]);
	return NULL;
}

static void test_concurrent_rmw_over_udp(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "rmw-test");
	c.n_workers = 2;
	c.n_ports = 1;
	snprintf(c.ports[0].name, sizeof(c.ports[0].name), "p0");
	c.ports[0].ip = test_ip(10);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "count");
	c.progs[0].program = &prog_count;
	c.progs[0].udp[0] = UDP_COUNT;
	c.progs[0].n_udp = 1;
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("innet_switch_create: %s", err);
	struct innet_cp *cp = innet_switch_prog(sw, "count");
	assert_int_equal(test_start(sw), 0);

	struct sender s[SENDERS];
	for (uint32_t i = 0; i < SENDERS; i++) {
		s[i] = (struct sender){ .dst_ip = test_ip(10) };
		assert_int_equal(pthread_create(&s[i].th, NULL, sender_main, &s[i]), 0);
	}
	uint64_t sent = 0;
	for (uint32_t i = 0; i < SENDERS; i++) {
		pthread_join(s[i].th, NULL);
		sent += s[i].sent;
	}
	assert_int_equal(sent, SENDERS * PKTS_PER_SENDER);

	/* Wait until the counter reaches what was sent, or stops moving for
	 * 300 ms (the kernel may have dropped some datagrams), at most 10 s. */
	uint64_t v = 0, last = UINT64_MAX, last_change = (innet_now_ns() / 1000000), deadline = (innet_now_ns() / 1000000) + 10000;
	for (;;) {
		assert_int_equal(innet_cp_reg_read(cp, 0, 0, &v), 0);
		if (v == sent || (innet_now_ns() / 1000000) > deadline)
			break;
		if (v != last) {
			last = v;
			last_change = (innet_now_ns() / 1000000);
		} else if ((innet_now_ns() / 1000000) - last_change > 300) {
			break;
		}
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	innet_switch_stop(sw);

	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	assert_int_equal(innet_cp_reg_read(cp, 0, 0, &v), 0);
	uint64_t per_flow = 0;
	for (uint32_t i = 1; i <= 8; i++) {
		uint64_t x;
		assert_int_equal(innet_cp_reg_read(cp, 0, i, &x), 0);
		per_flow += x;
	}
	/* Every packet the program saw was counted, once, on both counters. */
	assert_int_equal(v, st.rx_pkts);
	assert_int_equal(per_flow, st.rx_pkts);
	assert_int_equal(st.actions[INNET_CONSUMED], st.rx_pkts);
	assert_true(st.rx_pkts <= sent);
	assert_true(st.rx_pkts >= sent / 2); /* most of it arrived: the test measured something */
	/* Both workers took part (16 flows over 2 reuseport sockets). */
	for (uint32_t w = 0; w < 2; w++)
		if (((struct innet_user *)sw->target.priv)->workers[w].pstats[0].rx_pkts == 0)
			fail_msg("worker %u handled no packets: no concurrency was tested", w);
	innet_switch_destroy(sw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rmw_each_width, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_blob_registers, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reg_out_of_range, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reg_span, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pisa_budget, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pisa_budget_blob_words, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pisa_budget_fetch_max, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pisa_model_violations, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_trio_emit_timer_table, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pkt_bounds, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_verdicts, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_multicast_waits_for_group_update, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_multicast_during_group_update, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_recirculation, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_stats_match_injected, fx_setup, fx_teardown),
		cmocka_unit_test(test_concurrent_rmw_over_udp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
