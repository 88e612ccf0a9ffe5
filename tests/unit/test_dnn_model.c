/*
 * test_dnn_model.c — the model file parser, the reference semantics and the
 * plan (innet/dnn.h). Models are built in memory by a small writer that
 * follows docs/dnn.md; each bad case mutates a good model in one way and
 * checks the reason given.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit/testutil.h"
#include "innet/dnn.h"

struct wbuf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct wbuf *w, const void *p, size_t n)
{
	memcpy(w->b + w->n, p, n);
	w->n += n;
}
static void u16(struct wbuf *w, uint32_t v) { uint8_t b[2] = { v & 0xff, (v >> 8) & 0xff }; put(w, b, 2); }
static void u32(struct wbuf *w, uint32_t v) { u16(w, v & 0xffff); u16(w, v >> 16); }
static void lhdr(struct wbuf *w, uint8_t type, uint8_t shift, uint8_t kh, uint8_t kw, uint8_t stride,
		 uint8_t pad, uint32_t units, uint32_t payload)
{
	uint8_t b[8] = { type, shift, kh, kw, stride, pad, 0, 0 };
	put(w, b, 8);
	u32(w, units);
	u32(w, payload);
}
static void finish(struct wbuf *w)
{
	u32(w, innet_dnn_crc32(0, w->b, w->n));
}

/* in 1x4x4 → conv 2x2 stride 1 pad 0, 2 filters, shift 1 → relu → maxpool2 →
 * flatten (2*1*1... conv out 3x3, pool 1x1) → dense 2 → 3 (shift 0). */
static const int8_t CONV_W[8] = { 1, -2, 3, 4, /* filter 0 */ -1, 0, 2, -3 /* filter 1 */ };
static const int32_t CONV_B[2] = { 1, -2 };
static const int8_t DENSE_W[6] = { 1, 2, -3, 4, 5, -6 };
static const int32_t DENSE_B[3] = { 10, -20, 30 };

static void good_model(struct wbuf *w, uint32_t last_shift)
{
	w->n = 0;
	put(w, "INNETDNN", 8);
	u16(w, 1);
	u16(w, 5);
	u16(w, 1);
	u16(w, 4);
	u16(w, 4);
	u16(w, 0);
	lhdr(w, 1, 1, 2, 2, 1, 0, 2, 8 + 8);
	put(w, CONV_W, 8);
	for (int i = 0; i < 2; i++)
		u32(w, (uint32_t)CONV_B[i]);
	lhdr(w, 3, 0, 0, 0, 0, 0, 0, 0);
	lhdr(w, 4, 0, 0, 0, 0, 0, 0, 0);
	lhdr(w, 5, 0, 0, 0, 0, 0, 0, 0);
	lhdr(w, 2, (uint8_t)last_shift, 0, 0, 0, 0, 3, 8 + 12);
	put(w, DENSE_W, 6);
	put(w, "\0\0", 2);
	for (int i = 0; i < 3; i++)
		u32(w, (uint32_t)DENSE_B[i]);
	finish(w);
}

static void test_parse_good(void **state)
{
	struct wbuf w;
	good_model(&w, 0);
	struct innet_dnn_model m;
	char err[256] = "";
	if (innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(m.n_layers, 5);
	assert_int_equal(m.n_classes, 3);
	assert_int_equal(m.layers[0].out.c, 2);
	assert_int_equal(m.layers[0].out.h, 3);
	assert_int_equal(m.layers[2].out.h, 1);
	assert_int_equal(m.layers[3].out.c, 2);
	assert_int_equal(m.layers[4].biases[1], -20);
	/* set bits: conv |w| 1,2,3,4,1,0,2,3 → 1+1+2+1+1+0+1+2 = 9 */
	assert_int_equal(m.layers[0].weight_bits_set, 9);

	/* Reference by hand: input 0..15 row-major. */
	int8_t x[16];
	for (int i = 0; i < 16; i++)
		x[i] = (int8_t)(i - 5);
	int32_t want_pool[2];
	for (int o = 0; o < 2; o++) {
		int32_t best = -1000;
		for (int y = 0; y < 2; y++)
			for (int xx = 0; xx < 2; xx++) {
				int32_t acc = CONV_B[o];
				for (int ky = 0; ky < 2; ky++)
					for (int kx = 0; kx < 2; kx++)
						acc += CONV_W[o * 4 + ky * 2 + kx] * x[(y + ky) * 4 + xx + kx];
				int32_t q = innet_dnn_requant(acc, 1);
				q = q < 0 ? 0 : q;
				best = q > best ? q : best;
			}
		want_pool[o] = best;
	}
	int32_t logits[3];
	int cls = innet_dnn_ref_infer(&m, x, logits);
	for (int u = 0; u < 3; u++)
		assert_int_equal(logits[u], DENSE_B[u] + DENSE_W[2 * u] * want_pool[0] + DENSE_W[2 * u + 1] * want_pool[1]);
	assert_int_equal(cls, (int)innet_dnn_argmax(logits, 3));

	struct innet_dnn_plan p;
	assert_int_equal(innet_dnn_plan_build(&m, 2, 3, &p, err, sizeof(err)), 0);
	assert_int_equal(p.n_stages, 2);
	assert_int_equal(p.stages[0].n_pipes, 2);
	assert_int_equal(p.stages[0].n_chunks, 6);           /* 16 values in chunks of 3 */
	assert_int_equal(p.stages[0].chunks[5].n, 1);
	assert_int_equal(p.stages[0].pipes[1].out_lo, 1);    /* one pooled value per filter */
	assert_int_equal(p.stages[1].n_chunks, 2);           /* one per stage-0 pipeline */
	assert_int_equal(p.stages[1].n_pipes, 2);            /* 3 neurons: 2 + 1 */
	assert_int_equal(p.stages[1].pipes[0].unit_hi, 2);
	assert_int_equal(p.stages[1].pipes[1].unit_lo, 2);
	assert_true(p.stages[1].last);
	innet_dnn_plan_free(&p);
	innet_dnn_model_free(&m);
	innet_dnn_model_free(&m); /* idempotent */
}

static void test_requant(void **state)
{
	static const struct { int32_t acc; uint32_t shift; int8_t want; } c[] = {
		{ 5, 1, 3 }, { -5, 1, -2 }, { -3, 1, -1 }, { 4, 2, 1 }, { 6, 2, 2 }, { -6, 2, -1 },
		{ 1000, 0, 127 }, { -1000, 0, -128 }, { 127, 0, 127 }, { -128, 0, -128 },
		{ 255, 1, 127 }, { -257, 1, -128 }, { INT32_MAX, 31, 1 }, { INT32_MIN, 31, -1 },
		{ INT32_MAX, 0, 127 },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (innet_dnn_requant(c[i].acc, c[i].shift) != c[i].want)
			fail_msg("requant(%d, %u) = %d, want %d", c[i].acc, c[i].shift,
				 innet_dnn_requant(c[i].acc, c[i].shift), c[i].want);
}

/* One mutation of the good model, and the message it must produce. */
static void test_parse_bad(void **state)
{
	static const struct { size_t off; uint8_t val; const char *msg; } c[] = {
		{ 0, 'X', "bad magic" },
		{ 8, 2, "version 2 is not supported" },
		{ 18, 1, "reserved bytes at offset 18" },
		{ 10, 0, "0 layers" },
		{ 12, 0, "input shape 0x4x4" },
		{ 20, 9, "unknown type 9" },
		{ 22, 0, "kernel 0x2" },
		{ 24, 0, "stride 0" },
		{ 25, 2, "padding 2 must be smaller" },
		{ 22, 5, "kernel 5x2 larger than the padded input" },
		{ 21, 32, "shift 32 outside" },
		{ 26, 1, "reserved bytes must be zero" },
		{ 32, 17, "payload is 17 bytes" },
		{ 53, 1, "parameter bytes must be zero" },
		{ 20 + 16 + 16 + 16 * 3 + 1, 1, "shift must be 0" },
		{ 100 + 16 + 6, 1, "padding after the weights" },
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct wbuf w;
		good_model(&w, 0);
		w.b[c[i].off] = c[i].val;
		w.n -= 4;
		finish(&w);
		struct innet_dnn_model m;
		char err[256] = "";
		int rc = innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err));
		if (rc != -EINVAL || strstr(err, c[i].msg) == NULL)
			fail_msg("case %zu (offset %zu = %u): rc %d, want \"%s\", got \"%s\"", i, c[i].off,
				 c[i].val, rc, c[i].msg, err);
		assert_null(m.blob);
	}
	/* Whole-file defects. */
	struct wbuf w;
	struct innet_dnn_model m;
	char err[256];
	good_model(&w, 0);
	w.b[40] ^= 1;
	assert_int_equal(innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CRC mismatch"));
	good_model(&w, 0);
	for (size_t n = 0; n < w.n; n++) /* every truncation fails cleanly */
		assert_int_equal(innet_dnn_model_parse(w.b, n, &m, err, sizeof(err)), -EINVAL);
	good_model(&w, 0);
	w.n -= 4;
	put(&w, "\0\0\0\0", 4);
	finish(&w);
	assert_int_equal(innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "4 unexpected bytes after the last layer"));
	good_model(&w, 0);  /* the layer count says 4: the last layer is a flatten */
	w.b[10] = 4;
	w.n -= 4;
	w.n -= 16 + 8 + 12;
	finish(&w);
	assert_int_equal(innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "must be dense"));
	/* accumulator range: weights of 127 over a huge dense layer would overflow;
	 * a dense layer right after the conv (no flatten) is refused first. */
	good_model(&w, 0);
	memmove(w.b + 20 + 32 + 16 * 1, w.b + 20 + 32 + 16 * 3, w.n - (20 + 32 + 16 * 3));
	w.b[10] = 3;
	w.n -= 32 + 4;
	finish(&w);
	assert_int_equal(innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a vector"));
	assert_int_equal(innet_dnn_model_load("/nonexistent/model.innet", &m, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/model.innet"));
}

static void test_overflow_bound(void **state)
{
	/* dense 2048 -> 1, weights 127, bias 2^31 - 16: 2048 * 127 * 128 + bias > 2^31 - 1 */
	size_t need = 20 + 16 + 2048 + 4 + 4;
	uint8_t *buf = calloc(1, need);
	memcpy(buf, "INNETDNN", 8);
	buf[8] = 1;
	buf[10] = 1;
	buf[12] = 0x00; buf[13] = 0x08; /* in_c = 2048 */
	buf[14] = 1;
	buf[16] = 1;
	uint8_t *l = buf + 20;
	l[0] = 2;
	l[8] = 1;
	uint32_t pl = 2048 + 4;
	memcpy(l + 12, &pl, 4); /* little-endian host assumed by this test */
	memset(l + 16, 127, 2048);
	uint32_t bias = 0x7FFFFFF0u;
	memcpy(l + 16 + 2048, &bias, 4);
	uint32_t crc = innet_dnn_crc32(0, buf, need - 4);
	memcpy(buf + need - 4, &crc, 4);
	struct innet_dnn_model m;
	char err[256] = "";
	assert_int_equal(innet_dnn_model_parse(buf, need, &m, err, sizeof(err)), -EINVAL);
	if (strstr(err, "overflow its int32 accumulator") == NULL)
		fail_msg("got \"%s\"", err);
	bias = 0; /* 2048 * 127 * 128 < 2^31: fine */
	memcpy(l + 16 + 2048, &bias, 4);
	crc = innet_dnn_crc32(0, buf, need - 4);
	memcpy(buf + need - 4, &crc, 4);
	assert_int_equal(innet_dnn_model_parse(buf, need, &m, err, sizeof(err)), 0);
	innet_dnn_model_free(&m);
	free(buf);
}

static void test_crc(void **state)
{
	assert_int_equal(innet_dnn_crc32(0, "123456789", 9), 0xCBF43926u); /* the check value */
	assert_int_equal(innet_dnn_crc32(innet_dnn_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

/* Costs per layer (the paper's Table 1 columns) and the PISA projection, on
 * the small model, computed by hand:
 *   conv 2x2, 2 filters on 1x4x4 -> 2x3x3: |w| set bits 5 (filter 0), 4 (1);
 *   dense 2 -> 3: set bits 1+1+2+1 (units 0, 1) and 2+2 (unit 2).
 * Plan with 2 pipelines, 16 values per packet: stage 0 one input packet, one
 * filter per pipeline; stage 1 two input packets, units {0,1} and {2}. */
static void test_cost_and_projection(void **state)
{
	struct wbuf w;
	good_model(&w, 0);
	struct innet_dnn_model m;
	char err[256] = "";
	if (innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	struct innet_dnn_layer_cost c;
	innet_dnn_layer_cost(&m.layers[0], &c);
	assert_int_equal(c.params, 10);
	assert_int_equal(c.weight_bytes, 16);
	assert_int_equal(c.acc_bytes, 72);
	assert_int_equal(c.macs, 72);
	assert_int_equal(c.shift_adds, 81);
	innet_dnn_layer_cost(&m.layers[1], &c); /* relu */
	assert_int_equal(c.params + c.weight_bytes + c.acc_bytes + c.macs + c.shift_adds, 0);
	innet_dnn_layer_cost(&m.layers[4], &c);
	assert_int_equal(c.params, 9);
	assert_int_equal(c.weight_bytes, 18);
	assert_int_equal(c.acc_bytes, 12);
	assert_int_equal(c.macs, 6);
	assert_int_equal(c.shift_adds, 9);

	struct innet_dnn_plan p;
	assert_int_equal(innet_dnn_plan_build(&m, 2, 16, &p, err, sizeof(err)), 0);
	struct innet_dnn_projection *pr = malloc(sizeof(*pr));
	assert_non_null(pr);
	innet_dnn_plan_project(&p, 48, 1.5e9, pr);
	/* stage 0 pipe 0: 45 shift-adds + 9 neurons x 1 packet = 54 ops: 2 passes */
	assert_int_equal(pr->pipes[0][0].ops, 54);
	assert_int_equal(pr->pipes[0][0].passes_per_pkt, 2);
	assert_int_equal(pr->pipes[0][0].recirc, 1);
	assert_int_equal(pr->pipes[0][0].pkts_out, 2); /* one packet to each stage-1 pipeline */
	assert_int_equal(pr->pipes[0][1].ops, 45);
	assert_int_equal(pr->pipes[0][1].passes_per_pkt, 1);
	/* stage 1: 5 + 2 x 2 and 4 + 1 x 2 ops over 2 packets, one pass each, one result */
	assert_int_equal(pr->pipes[1][0].ops, 9);
	assert_int_equal(pr->pipes[1][1].ops, 6);
	assert_int_equal(pr->pipes[1][0].pkts_out, 1);
	assert_true(fabs(pr->stage_us[0] - 4 / 1500.0) < 1e-12);
	assert_true(fabs(pr->stage_us[1] - 3 / 1500.0) < 1e-12);
	assert_true(fabs(pr->latency_us - 7 / 1500.0) < 1e-12);
	assert_true(fabs(pr->per_second - 375e6) < 1);
	/* the budgets that reach a latency: 7 slots from 27 ops/pass (54 / 27 = 2
	 * passes), 6.5 from 54; 6 slots is the floor (every pipeline one pass). */
	assert_int_equal(innet_dnn_plan_ops_for_latency(&p, 1.5e9, 7 / 1500.0 + 1e-12), 27);
	assert_int_equal(innet_dnn_plan_ops_for_latency(&p, 1.5e9, 6.5 / 1500.0), 54);
	assert_int_equal(innet_dnn_plan_ops_for_latency(&p, 1.5e9, 5.9 / 1500.0), 0);
	free(pr);
	innet_dnn_plan_free(&p);
	innet_dnn_model_free(&m);
}

/* The float reference follows the integer one (same class) on the small model. */
static void test_float_reference(void **state)
{
	struct wbuf w;
	good_model(&w, 0);
	struct innet_dnn_model m;
	char err[256] = "";
	if (innet_dnn_model_parse(w.b, w.n, &m, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	int8_t in[16];
	for (int i = 0; i < 16; i++)
		in[i] = (int8_t)(i * 7 - 50);
	int32_t li[3];
	float lf[3];
	int ci = innet_dnn_ref_infer(&m, in, li);
	int cf = innet_dnn_ref_infer_float(&m, in, lf);
	assert_true(ci >= 0);
	assert_int_equal(ci, cf);
	/* before rounding the integer logits are close to the float ones */
	for (int k = 0; k < 3; k++)
		assert_true(fabs(lf[k] - (float)li[k]) <= 3 * 13.0f);
	innet_dnn_model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_good),   cmocka_unit_test(test_requant),
		cmocka_unit_test(test_parse_bad),    cmocka_unit_test(test_overflow_bound),
		cmocka_unit_test(test_crc),          cmocka_unit_test(test_cost_and_projection),
		cmocka_unit_test(test_float_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
