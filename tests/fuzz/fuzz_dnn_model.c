/*
 * fuzz_dnn_model.c — libFuzzer target: arbitrary bytes through the DNN model
 * parser (innet/dnn.h). To reach past the CRC check, the input is tried twice:
 * as given, and with its last 4 bytes replaced by the correct CRC-32.
 *
 * Invariants: a refused file comes with a message and leaves nothing
 * allocated; an accepted model is consistent (shapes chain from layer to
 * layer, the last layer is dense, weights and biases lie inside the blob),
 * the reference inference runs on an all-ones and an extreme input without
 * undefined behaviour (the accumulator bound holds), the float reference
 * gives finite logits, and plans build or refuse cleanly; a built plan's
 * costs add up (per layer: MACs >= parameters' weights, shift-and-adds <= 7
 * x MACs) and its projection is finite, falls as the budget grows, and the
 * budget found for a latency reaches it.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/dnn.h"

#define CHECK(cond)                                                                         \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_dnn_model: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                           \
			abort();                                                            \
		}                                                                           \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_model(const struct innet_dnn_model *m)
{
	CHECK(m->n_layers >= 1 && m->n_layers <= INNET_DNN_MAX_LAYERS);
	struct innet_dnn_shape s = m->in;
	for (uint32_t i = 0; i < m->n_layers; i++) {
		const struct innet_dnn_layer *l = &m->layers[i];
		CHECK(memcmp(&l->in, &s, sizeof(s)) == 0);
		CHECK(innet_dnn_shape_n(l->out) >= 1 && innet_dnn_shape_n(l->out) <= INNET_DNN_MAX_VALUES);
		if (l->type == INNET_DNN_CONV2D || l->type == INNET_DNN_DENSE) {
			CHECK((const uint8_t *)l->weights >= m->blob);
			CHECK((const uint8_t *)(l->biases + l->units) <= m->blob + m->blob_len);
		}
		s = l->out;
	}
	CHECK(m->layers[m->n_layers - 1].type == INNET_DNN_DENSE);
	CHECK(m->n_classes == m->layers[m->n_layers - 1].units);
}

static void check_costs(const struct innet_dnn_model *m, const struct innet_dnn_plan *p)
{
	for (uint32_t i = 0; i < m->n_layers; i++) {
		struct innet_dnn_layer_cost c;
		innet_dnn_layer_cost(&m->layers[i], &c);
		CHECK(c.shift_adds <= 7 * c.macs + 7); /* |w| <= 128 has at most 7 set bits */
		if (c.params > 0)
			CHECK(c.macs >= c.params - m->layers[i].units && c.weight_bytes >= c.params);
	}
	static struct innet_dnn_projection a, b; /* large: off the stack */
	innet_dnn_plan_project(p, 1, INNET_DNN_TOFINO2_PPS, &a);
	innet_dnn_plan_project(p, 48, INNET_DNN_TOFINO2_PPS, &b);
	CHECK(isfinite(a.latency_us) && a.latency_us > 0 && b.latency_us <= a.latency_us);
	CHECK(b.slowest_us <= b.latency_us + 1e-9 && b.per_second > 0);
	double target = (a.latency_us + b.latency_us) / 2;
	uint32_t need = innet_dnn_plan_ops_for_latency(p, INNET_DNN_TOFINO2_PPS, target);
	if (need > 0) {
		innet_dnn_plan_project(p, need, INNET_DNN_TOFINO2_PPS, &a);
		CHECK(a.latency_us <= target);
	}
}

static void try_one(const uint8_t *data, size_t size)
{
	struct innet_dnn_model m;
	char err[512];
	err[0] = '\0';
	if (innet_dnn_model_parse(data, size, &m, err, sizeof(err)) != 0) {
		CHECK(err[0] != '\0');
		CHECK(m.blob == NULL);
		return;
	}
	check_model(&m);
	uint32_t n = innet_dnn_shape_n(m.in);
	uint64_t macs = 0; /* keep each run fast: only small models are inferred */
	for (uint32_t i = 0; i < m.n_layers; i++)
		macs += (uint64_t)m.layers[i].n_weights * m.layers[i].out.h * m.layers[i].out.w +
			innet_dnn_shape_n(m.layers[i].out);
	if (n <= 4096 && m.n_classes <= 4096 && macs <= 2000000) {
		int8_t *x = malloc(n);
		int32_t *logits = malloc(sizeof(int32_t) * m.n_classes);
		float *fl = malloc(sizeof(float) * m.n_classes);
		if (x != NULL && logits != NULL && fl != NULL) {
			memset(x, 1, n);
			CHECK(innet_dnn_ref_infer(&m, x, logits) >= 0);
			memset(x, 0x80, n); /* -128 everywhere: the largest magnitudes */
			CHECK(innet_dnn_ref_infer(&m, x, logits) >= 0);
			CHECK(innet_dnn_ref_infer_float(&m, x, fl) >= 0);
			for (uint32_t k = 0; k < m.n_classes; k++)
				CHECK(isfinite(fl[k]));
		}
		free(x);
		free(logits);
		free(fl);
	}
	for (uint32_t pipes = 1; pipes <= 4; pipes *= 2) {
		struct innet_dnn_plan p;
		if (innet_dnn_plan_build(&m, pipes, 64, &p, err, sizeof(err)) == 0) {
			CHECK(p.n_stages >= 1);
			check_costs(&m, &p);
			innet_dnn_plan_free(&p);
		}
	}
	innet_dnn_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (1u << 20))
		return 0;
	try_one(data, size);
	if (size >= 24) {
		uint8_t *copy = malloc(size);
		if (copy == NULL)
			return 0;
		memcpy(copy, data, size);
		uint32_t crc = innet_dnn_crc32(0, copy, size - 4);
		uint8_t le[4] = { crc & 0xff, (crc >> 8) & 0xff, (crc >> 16) & 0xff, crc >> 24 };
		memcpy(copy + size - 4, le, 4);
		try_one(copy, size);
		free(copy);
	}
	return 0;
}
