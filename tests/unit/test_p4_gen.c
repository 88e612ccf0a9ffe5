/*
 * test_p4_gen.c — the pieces every generated P4 data path is built from
 * (src/p4/p4rt_dp.h), against known values: the CRCs' check values (the
 * CRC catalogue's "123456789"), RFC 1071's checksum, BMv2's xor16 / identity
 * / xxh64 rules, bit access at every offset and width up to 128, shifts by
 * any count with BMv2's infinite-precision meaning, two_comp_mod and the
 * saturating casts. Then the generator on programs built in the test (the
 * IR, not JSON): each expression width class compiles, what is beyond 128
 * bits is refused with a message.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <xxhash.h>

#include "p4/p4.h"

static const uint8_t check[] = "123456789";

static uint64_t hash_of(int algo, const uint8_t *p, uint32_t n)
{
	if (algo == P4H_XXH64 || algo == P4H_IDENTITY)
		return p4_hash_whole(algo, p, n, 256);
	struct p4_hash h;
	p4_hash_begin(&h, algo);
	p4_hash_bytes(&h, algo, p, n, 256);
	return p4_hash_end(&h, algo);
}

static void test_crc_check_values(void **state)
{
	(void)state;
	assert_int_equal(hash_of(P4H_CRC16, check, 9), 0xBB3D);      /* CRC-16/ARC */
	assert_int_equal(hash_of(P4H_CRC16C, check, 9), 0xBB3D);     /* crc16_custom's default */
	assert_int_equal(hash_of(P4H_CRC32, check, 9), 0xCBF43926);  /* CRC-32 */
	assert_int_equal(hash_of(P4H_CRC32C, check, 9), 0xCBF43926); /* crc32_custom's default */
	assert_int_equal(hash_of(P4H_CCITT, check, 9), 0x29B1);      /* CRC-16/CCITT-FALSE */
	assert_int_equal(hash_of(P4H_CRC8, check, 9), 0xF4);         /* CRC-8 (poly 0x07) */
	/* crc64_custom at BMv2's default parameters (poly 0x1b reflected, init and
	 * xorout 0): the value BMv2's table-driven algorithm gives */
	assert_true(hash_of(P4H_CRC64C, check, 9) == 0x46a5a9388a5beffeull);
	/* the same streamed in pieces (a buffer, then the payload) */
	int algos[] = { P4H_CRC16, P4H_CRC32, P4H_CCITT, P4H_CSUM16, P4H_XOR16, P4H_XOR32 };
	for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++)
		for (uint32_t cut = 0; cut <= 9; cut++) {
			struct p4_hash h;
			p4_hash_begin(&h, algos[a]);
			p4_hash_bytes(&h, algos[a], check, cut, 16);
			p4_hash_bytes(&h, algos[a], check + cut, 9 - cut, 16);
			assert_true(p4_hash_end(&h, algos[a]) == hash_of(algos[a], check, 9));
		}
}

static void test_csum16(void **state)
{
	(void)state;
	/* RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2 */
	const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	assert_int_equal(hash_of(P4H_CSUM16, b, 8), (uint16_t)~0xddf2);
	/* an IPv4 header with a zero checksum field, then its checksum */
	uint8_t ip[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
			   0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };
	assert_int_equal(hash_of(P4H_CSUM16, ip, 20), 0xb861);
	ip[10] = 0xb8;
	ip[11] = 0x61;
	assert_int_equal(hash_of(P4H_CSUM16, ip, 20), 0);
	/* an odd length pads with a zero byte */
	const uint8_t odd[] = { 0x12, 0x34, 0x56 };
	assert_int_equal(hash_of(P4H_CSUM16, odd, 3), (uint16_t)~(0x1234 + 0x5600));
}

static void test_xor_identity_xxh64(void **state)
{
	(void)state;
	const uint8_t b[] = { 0x12, 0x34, 0x56, 0x78, 0x9a };
	/* xor16: 16-bit words, the tail padded at the right */
	assert_int_equal(hash_of(P4H_XOR16, b, 5), 0x1234 ^ 0x5678 ^ 0x9a00);
	assert_int_equal(hash_of(P4H_XOR32, b, 5), 0x12345678 ^ 0x9a000000);
	/* identity: the first 8 bytes, big-endian */
	assert_true(hash_of(P4H_IDENTITY, b, 5) == 0x123456789aull);
	uint8_t ten[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	assert_true(hash_of(P4H_IDENTITY, ten, 10) == 0x0102030405060708ull);
	/* xxh64: libxxhash's, seed 0 */
	for (uint32_t n = 0; n <= 9; n++)
		assert_true(hash_of(P4H_XXH64, check, n) == XXH64(check, n, 0));
}

static void test_bits(void **state)
{
	(void)state;
	uint8_t buf[40];
	for (uint32_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	/* every width 1..128 at offsets 0..7: read back what was written, and
	 * the neighbours stay */
	for (uint32_t w = 1; w <= 120; w++)
		for (uint32_t off = 0; off < 8; off++) {
			uint8_t b2[40];
			memcpy(b2, buf, sizeof(b2));
			p4_u128 v = p4_mask128(w) & (((p4_u128)0x0123456789abcdefull << 64) | 0xfedcba9876543210ull);
			p4_putbits(b2, off + 8, w, v);
			assert_true(p4_getbits(b2, off + 8, w) == v);
			/* the bits around are untouched */
			assert_int_equal(b2[0], buf[0]);
			uint32_t last = (off + 8 + w - 1) / 8;
			for (uint32_t i = last + 1; i < sizeof(b2); i++)
				assert_int_equal(b2[i], buf[i]);
			/* the run-time offset version agrees */
			uint8_t b3[40];
			memcpy(b3, buf, sizeof(b3));
			p4_putbits_var(b3, off + 8, w, v);
			assert_memory_equal(b2, b3, sizeof(b2));
		}
	for (uint32_t w = 121; w <= 128; w += 7) {
		uint8_t b2[40] = { 0 };
		p4_u128 v = ~(p4_u128)0 & p4_mask128(w);
		p4_putbits(b2, 8, w == 128 ? 128 : w, v);
		assert_true(p4_getbits(b2, 8, w) == v);
	}
	/* a 4-bit field at bit 4 of 0xab is 0xb; big-endian bytes */
	const uint8_t x[] = { 0xab, 0xcd, 0xef };
	assert_true(p4_getbits(x, 4, 4) == 0xb);
	assert_true(p4_getbits(x, 4, 12) == 0xbcd);
	assert_true(p4_ld_be(x, 3) == 0xabcdef);
	/* p4_msb64 (the lpm scan's next prefix length): every bit alone, and
	 * with every lower bit set too */
	for (uint32_t b = 0; b < 64; b++) {
		assert_int_equal(p4_msb64(1ull << b), b);
		assert_int_equal(p4_msb64((1ull << b) | ((1ull << b) - 1)), b);
	}
	assert_int_equal(p4_msb64(~0ull), 63);
}

static void test_shifts_and_casts(void **state)
{
	(void)state;
	/* BMv2 shifts with infinite precision: a count past the width empties */
	assert_true(p4_shl64(1, 63) == 1ull << 63);
	assert_true(p4_shl64(1, 64) == 0);
	assert_true(p4_shl64(1, 1000) == 0);
	assert_true(p4_shr64(~0ull, 64) == 0);
	assert_true(p4_sar64(-8, 1) == -4);
	assert_true(p4_sar64(-8, 200) == -1);
	assert_true(p4_sar64(8, 200) == 0);
	for (uint32_t n = 0; n < 130; n++) {
		p4_u128 one = 1;
		assert_true(p4_shl128v(one, n) == (n < 128 ? one << n : 0));
		p4_u128 top = (p4_u128)1 << 127;
		assert_true(p4_shr128v(top, n) == (n < 128 ? top >> n : 0));
	}
	assert_true(p4_sar128(-(p4_s128)1024, 3) == -128);
	assert_true(p4_sar128(-(p4_s128)1, 127) == -1);
	/* two_comp_mod (BMv2's examples) */
	assert_true(p4_tcm64(257, 8) == 1);
	assert_true(p4_tcm64((uint64_t)-129, 8) == 127);
	assert_true(p4_tcm64(255, 8) == -1);
	assert_true(p4_tcm64(0x80, 8) == -128);
	/* saturating casts */
	assert_true(p4_sat_cast(300, 8) == 127);
	assert_true(p4_sat_cast(-300, 8) == -128);
	assert_true(p4_sat_cast(5, 8) == 5);
	assert_true(p4_usat_cast(300, 8) == 255);
	assert_true(p4_usat_cast(-3, 8) == 0);
}

/* ------------------------------------------------------------------------ */
/* The generator on a program built here                                     */

/* A program with one metadata header of fields of width w1, w2 and one action
 * computing f0 = f1 OP f2. */
struct mini {
	struct p4_prog *p;
	struct p4_expr *dst, *a, *b, *e;
};

static struct p4_expr *fld(struct p4_prog *p, int f)
{
	struct p4_expr *e = p4_alloc(p->arena, sizeof(*e));
	e->kind = P4E_FIELD;
	e->h = 1;
	e->f = f;
	return e;
}

static struct p4_prog *mini_prog(uint32_t w0, uint32_t w1, uint32_t w2, enum p4_op op)
{
	struct p4_arena *a = p4_arena_new();
	struct p4_prog *p = p4_alloc(a, sizeof(*p));
	p->arena = a;
	p->name = "mini";
	/* types: standard_metadata (the fields simple_switch needs), meta */
	p->n_htypes = 2;
	p->htypes = p4_alloc(a, 2 * sizeof(*p->htypes));
	static const char *const sm[] = { "ingress_port", "egress_spec", "egress_port", "instance_type",
					  "packet_length", "mcast_grp" };
	static const uint32_t smw[] = { 9, 9, 9, 32, 32, 16 };
	p->htypes[0].name = "standard_metadata_t";
	p->htypes[0].n_fields = 6;
	p->htypes[0].fields = p4_alloc(a, 6 * sizeof(struct p4_field));
	p->htypes[0].varbit = -1;
	for (int i = 0; i < 6; i++) {
		p->htypes[0].fields[i].name = sm[i];
		p->htypes[0].fields[i].width = smw[i];
	}
	p->htypes[1].name = "meta_t";
	p->htypes[1].n_fields = 3;
	p->htypes[1].varbit = -1;
	p->htypes[1].fields = p4_alloc(a, 3 * sizeof(struct p4_field));
	uint32_t ws[3] = { w0, w1, w2 };
	const char *fn[3] = { "f0", "f1", "f2" };
	for (int i = 0; i < 3; i++) {
		p->htypes[1].fields[i].name = fn[i];
		p->htypes[1].fields[i].width = ws[i];
	}
	p->n_headers = 2;
	p->headers = p4_alloc(a, 2 * sizeof(*p->headers));
	p->headers[0] = (struct p4_header){ .name = "standard_metadata", .type = 0, .metadata = true,
					    .stack = -1, .stack_index = -1, .onion = -1, .onion_index = -1 };
	p->headers[1] = (struct p4_header){ .name = "meta", .type = 1, .metadata = true, .stack = -1,
					    .stack_index = -1, .onion = -1, .onion_index = -1 };
	for (int i = 0; i < P4S_COUNT; i++)
		p->std[i].h = p->std[i].f = -1;
	for (int i = 0; i < 6; i++) {
		int k = i == 5 ? P4S_MCAST_GRP : i;
		p->std[k].h = 0;
		p->std[k].f = i;
	}
	p->init_state = -1;
	/* the action */
	p->n_actions = 1;
	p->actions = p4_alloc(a, sizeof(*p->actions));
	p->actions[0].name = "act";
	p->actions[0].n_prims = 1;
	p->actions[0].prims = p4_alloc(a, sizeof(struct p4_prim));
	struct p4_prim *pr = &p->actions[0].prims[0];
	pr->kind = P4P_ASSIGN;
	pr->op = "assign";
	pr->n_args = 2;
	pr->args = p4_alloc(a, 2 * sizeof(struct p4_expr *));
	pr->args[0] = fld(p, 0);
	struct p4_expr *e = p4_alloc(a, sizeof(*e));
	e->kind = P4E_OP;
	e->op = op;
	e->a = fld(p, 1);
	e->b = fld(p, 2);
	pr->args[1] = e;
	/* one keyless table running it, in ingress */
	p->n_tables = 1;
	p->tables = p4_alloc(a, sizeof(*p->tables));
	struct p4_table *t = &p->tables[0];
	t->name = "t";
	t->cls = P4TC_NOKEY;
	t->max_size = 1;
	t->n_actions = 1;
	t->actions = p4_alloc(a, sizeof(int));
	t->next_by_action = p4_alloc(a, sizeof(struct p4_node));
	t->has_default = true;
	t->default_const = t->default_entry_const = true;
	t->def.action = 0;
	t->def.data = p4_alloc(a, 8);
	t->direct_counter = t->direct_meter = t->profile = t->lpm_key = -1;
	p->pipes[0].name = "ingress";
	p->pipes[0].init = (struct p4_node){ .kind = P4N_TABLE, .idx = 0 };
	p->pipes[0].n_tables = 1;
	p->pipes[0].tables = p4_alloc(a, sizeof(int));
	p->pipes[1].name = "egress";
	return p;
}

static void test_gen_widths(void **state)
{
	(void)state;
	static const struct {
		uint32_t w0, w1, w2;
		enum p4_op op;
		bool ok;
		const char *msg;     /* a part of the refusal */
	} cases[] = {
		{ 8, 8, 8, P4OP_ADD, true, NULL },
		{ 32, 32, 32, P4OP_SUB, true, NULL },
		{ 64, 64, 64, P4OP_MUL, true, NULL },
		{ 48, 48, 8, P4OP_SHL, true, NULL },
		{ 128, 128, 128, P4OP_XOR, true, NULL },
		{ 128, 128, 128, P4OP_ADD, true, NULL },
		{ 1, 64, 64, P4OP_GT, true, NULL },
		{ 1, 128, 128, P4OP_EQ, true, NULL },
		{ 256, 256, 256, P4OP_ADD, false, "256-bit field" },
		{ 1, 200, 8, P4OP_LT, false, "200 bits" },
		/* a run-time shift may lose bits: fine into a field, refused in >> */
		{ 64, 64, 64, P4OP_SHR, true, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct p4_prog *p = mini_prog(cases[i].w0, cases[i].w1, cases[i].w2, cases[i].op);
		struct p4_layout lay;
		char err[512] = "";
		assert_int_equal(p4_layout(p, &lay, err, sizeof(err)), 0);
		char *src = NULL;
		int rc = p4_gen(p, &lay, "mini", &src, err, sizeof(err));
		if (cases[i].ok) {
			if (rc != 0)
				fail_msg("case %zu: %s", i, err);
			assert_non_null(strstr(src, "static P4_FN void p4_a0("));
		} else {
			assert_int_equal(rc, -EINVAL);
			if (strstr(err, cases[i].msg) == NULL || strstr(err, "action 'act'") == NULL)
				fail_msg("case %zu: message '%s' lacks '%s' or the action", i, err, cases[i].msg);
		}
		free(src);
		p4_prog_free(p);
	}
}

/* A register of 256-bit elements: read into and written from a field of
 * that width (or written a constant) only; anything else is refused,
 * naming the register. f0 is 256 bits, f1 64, f2 32 (the index). */
static void test_gen_wide_register(void **state)
{
	(void)state;
	static const struct {
		enum p4_prim_kind kind;
		int field;           /* the value's field (-1: the constant 5) */
		bool ok;
	} cases[] = {
		{ P4P_REGISTER_READ, 0, true },
		{ P4P_REGISTER_WRITE, 0, true },
		{ P4P_REGISTER_WRITE, -1, true },
		{ P4P_REGISTER_READ, 1, false },
		{ P4P_REGISTER_WRITE, 1, false },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct p4_prog *p = mini_prog(256, 64, 32, P4OP_ADD);
		struct p4_arena *a = p->arena;
		p->n_registers = 1;
		p->registers = p4_alloc(a, sizeof(*p->registers));
		p->registers[0] = (struct p4_register){ .name = "big", .size = 4, .width = 256 };
		struct p4_prim *pr = &p->actions[0].prims[0];
		struct p4_expr *reg = p4_alloc(a, sizeof(*reg)), *val;
		reg->kind = P4E_REGARRAY;
		reg->idx = 0;
		if (cases[i].field >= 0) {
			val = fld(p, cases[i].field);
		} else {
			val = p4_alloc(a, sizeof(*val));
			val->kind = P4E_CONST;
			val->val = 5;
		}
		pr->kind = cases[i].kind;
		pr->op = cases[i].kind == P4P_REGISTER_READ ? "register_read" : "register_write";
		pr->n_args = 3;
		pr->args = p4_alloc(a, 3 * sizeof(struct p4_expr *));
		if (cases[i].kind == P4P_REGISTER_READ) {
			pr->args[0] = val;
			pr->args[1] = reg;
		} else {
			pr->args[0] = reg;
			pr->args[2] = val;
		}
		pr->args[cases[i].kind == P4P_REGISTER_READ ? 2 : 1] = fld(p, 2);
		struct p4_layout lay;
		char err[512] = "";
		assert_int_equal(p4_layout(p, &lay, err, sizeof(err)), 0);
		assert_int_equal(lay.regs[0].elem, 32);
		char *src = NULL;
		int rc = p4_gen(p, &lay, "mini", &src, err, sizeof(err));
		if (cases[i].ok) {
			if (rc != 0)
				fail_msg("case %zu: %s", i, err);
			assert_non_null(strstr(src, cases[i].kind == P4P_REGISTER_READ ? "innet_reg_read_bytes"
											: "innet_reg_write_bytes"));
		} else {
			assert_int_equal(rc, -EINVAL);
			if (strstr(err, "register 'big' of 256-bit elements") == NULL)
				fail_msg("case %zu: message '%s' does not name the register", i, err);
		}
		free(src);
		p4_prog_free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc_check_values),
		cmocka_unit_test(test_csum16),
		cmocka_unit_test(test_xor_identity_xxh64),
		cmocka_unit_test(test_bits),
		cmocka_unit_test(test_shifts_and_casts),
		cmocka_unit_test(test_gen_widths),
		cmocka_unit_test(test_gen_wide_register),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
