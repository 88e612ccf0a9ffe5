/*
 * ref.c — the integer reference inference. This file defines what a model
 * computes (docs/dnn.md, "Semantics"); the fabric's layer program
 * (layer_dp.c) and tools/dnn/innetdnn.py (qinfer) must agree with it bit for
 * bit. At the end, the float reference (the same model before rounding), for
 * timing and class agreement only.
 *
 * Activations between layers are int8 (held in int32 here); accumulators are
 * int32 (the model loader has proved that no accumulator can overflow, so the
 * sums below are exact in int32 for any int8 input).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "innet/dnn.h"

uint32_t innet_dnn_argmax(const int32_t *logits, uint32_t n)
{
	uint32_t best = 0;
	for (uint32_t i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

static void conv2d(const struct innet_dnn_layer *l, const int32_t *in, int32_t *out, bool last)
{
	const struct innet_dnn_shape is = l->in, os = l->out;
	for (uint32_t o = 0; o < os.c; o++)
		for (uint32_t y = 0; y < os.h; y++)
			for (uint32_t x = 0; x < os.w; x++) {
				int32_t acc = l->biases[o];
				for (uint32_t c = 0; c < is.c; c++)
					for (uint32_t ky = 0; ky < l->kh; ky++) {
						int64_t iy = (int64_t)(y * l->stride + ky) - l->pad;
						if (iy < 0 || iy >= is.h)
							continue;
						for (uint32_t kx = 0; kx < l->kw; kx++) {
							int64_t ix = (int64_t)(x * l->stride + kx) - l->pad;
							if (ix < 0 || ix >= is.w)
								continue;
							int32_t w = l->weights[((o * is.c + c) * l->kh + ky) * l->kw + kx];
							acc += w * in[(c * is.h + (uint32_t)iy) * is.w + (uint32_t)ix];
						}
					}
				out[(o * os.h + y) * os.w + x] = last ? acc : innet_dnn_requant(acc, l->shift);
			}
}

static void dense(const struct innet_dnn_layer *l, const int32_t *in, int32_t *out, bool last)
{
	uint32_t n = innet_dnn_shape_n(l->in);
	for (uint32_t o = 0; o < l->units; o++) {
		int32_t acc = l->biases[o];
		const int8_t *w = l->weights + (size_t)o * n;
		for (uint32_t i = 0; i < n; i++)
			acc += w[i] * in[i];
		out[o] = last ? acc : innet_dnn_requant(acc, l->shift);
	}
}

static void maxpool2(const struct innet_dnn_layer *l, const int32_t *in, int32_t *out)
{
	const struct innet_dnn_shape is = l->in, os = l->out;
	for (uint32_t c = 0; c < os.c; c++)
		for (uint32_t y = 0; y < os.h; y++)
			for (uint32_t x = 0; x < os.w; x++) {
				const int32_t *p = in + (c * is.h + 2 * y) * is.w + 2 * x;
				int32_t m = p[0];
				if (p[1] > m)
					m = p[1];
				if (p[is.w] > m)
					m = p[is.w];
				if (p[is.w + 1] > m)
					m = p[is.w + 1];
				out[(c * os.h + y) * os.w + x] = m;
			}
}

int innet_dnn_ref_infer(const struct innet_dnn_model *m, const int8_t *input, int32_t *logits)
{
	uint32_t maxn = innet_dnn_shape_n(m->in);
	for (uint32_t i = 0; i < m->n_layers; i++)
		if (innet_dnn_shape_n(m->layers[i].out) > maxn)
			maxn = innet_dnn_shape_n(m->layers[i].out);
	int32_t *a = malloc(sizeof(int32_t) * maxn), *b = malloc(sizeof(int32_t) * maxn);
	if (a == NULL || b == NULL) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < innet_dnn_shape_n(m->in); i++)
		a[i] = input[i];
	for (uint32_t i = 0; i < m->n_layers; i++) {
		const struct innet_dnn_layer *l = &m->layers[i];
		bool last = i == m->n_layers - 1;
		uint32_t n = innet_dnn_shape_n(l->in);
		switch (l->type) {
		case INNET_DNN_CONV2D: conv2d(l, a, b, last); break;
		case INNET_DNN_DENSE: dense(l, a, b, last); break;
		case INNET_DNN_MAXPOOL2: maxpool2(l, a, b); break;
		case INNET_DNN_RELU:
			for (uint32_t k = 0; k < n; k++)
				b[k] = a[k] < 0 ? 0 : a[k];
			break;
		case INNET_DNN_FLATTEN: memcpy(b, a, sizeof(int32_t) * n); break;
		}
		int32_t *t = a;
		a = b;
		b = t;
	}
	memcpy(logits, a, sizeof(int32_t) * m->n_classes);
	free(a);
	free(b);
	return (int)innet_dnn_argmax(logits, m->n_classes);
}

/* ------------------------------------------------------------------------ */
/* The float reference: the same weights and biases in float, activations in
 * float, requantization replaced by the exact scaling it approximates
 * (acc / 2^shift, neither rounded nor saturated). It is what the integer
 * model computes before rounding; it is timed beside the integer reference
 * by `innet dnn time` and agrees with it on the class for most inputs. */

static void conv2d_f(const struct innet_dnn_layer *l, const float *in, float *out, bool last)
{
	const struct innet_dnn_shape is = l->in, os = l->out;
	const float scale = last ? 1.0f : 1.0f / (float)(1u << l->shift);
	for (uint32_t o = 0; o < os.c; o++)
		for (uint32_t y = 0; y < os.h; y++)
			for (uint32_t x = 0; x < os.w; x++) {
				float acc = (float)l->biases[o];
				for (uint32_t c = 0; c < is.c; c++)
					for (uint32_t ky = 0; ky < l->kh; ky++) {
						int64_t iy = (int64_t)(y * l->stride + ky) - l->pad;
						if (iy < 0 || iy >= is.h)
							continue;
						for (uint32_t kx = 0; kx < l->kw; kx++) {
							int64_t ix = (int64_t)(x * l->stride + kx) - l->pad;
							if (ix < 0 || ix >= is.w)
								continue;
							float w = l->weights[((o * is.c + c) * l->kh + ky) * l->kw + kx];
							acc += w * in[(c * is.h + (uint32_t)iy) * is.w + (uint32_t)ix];
						}
					}
				out[(o * os.h + y) * os.w + x] = acc * scale;
			}
}

static void dense_f(const struct innet_dnn_layer *l, const float *in, float *out, bool last)
{
	uint32_t n = innet_dnn_shape_n(l->in);
	const float scale = last ? 1.0f : 1.0f / (float)(1u << l->shift);
	for (uint32_t o = 0; o < l->units; o++) {
		float acc = (float)l->biases[o];
		const int8_t *w = l->weights + (size_t)o * n;
		for (uint32_t i = 0; i < n; i++)
			acc += (float)w[i] * in[i];
		out[o] = acc * scale;
	}
}

int innet_dnn_ref_infer_float(const struct innet_dnn_model *m, const int8_t *input, float *logits)
{
	uint32_t maxn = innet_dnn_shape_n(m->in);
	for (uint32_t i = 0; i < m->n_layers; i++)
		if (innet_dnn_shape_n(m->layers[i].out) > maxn)
			maxn = innet_dnn_shape_n(m->layers[i].out);
	float *a = malloc(sizeof(float) * maxn), *b = malloc(sizeof(float) * maxn);
	if (a == NULL || b == NULL) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < innet_dnn_shape_n(m->in); i++)
		a[i] = input[i];
	for (uint32_t i = 0; i < m->n_layers; i++) {
		const struct innet_dnn_layer *l = &m->layers[i];
		bool last = i == m->n_layers - 1;
		uint32_t n = innet_dnn_shape_n(l->in);
		switch (l->type) {
		case INNET_DNN_CONV2D: conv2d_f(l, a, b, last); break;
		case INNET_DNN_DENSE: dense_f(l, a, b, last); break;
		case INNET_DNN_MAXPOOL2: {
			const struct innet_dnn_shape is = l->in, os = l->out;
			for (uint32_t c = 0; c < os.c; c++)
				for (uint32_t y = 0; y < os.h; y++)
					for (uint32_t x = 0; x < os.w; x++) {
						const float *p = a + (c * is.h + 2 * y) * is.w + 2 * x;
						float mx = p[0];
						mx = p[1] > mx ? p[1] : mx;
						mx = p[is.w] > mx ? p[is.w] : mx;
						mx = p[is.w + 1] > mx ? p[is.w + 1] : mx;
						b[(c * os.h + y) * os.w + x] = mx;
					}
			break;
		}
		case INNET_DNN_RELU:
			for (uint32_t k = 0; k < n; k++)
				b[k] = a[k] < 0 ? 0 : a[k];
			break;
		case INNET_DNN_FLATTEN: memcpy(b, a, sizeof(float) * n); break;
		}
		float *t = a;
		a = b;
		b = t;
	}
	memcpy(logits, a, sizeof(float) * m->n_classes);
	uint32_t best = 0;
	for (uint32_t k = 1; k < m->n_classes; k++)
		if (logits[k] > logits[best])
			best = k;
	free(a);
	free(b);
	return (int)best;
}
