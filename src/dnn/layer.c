/*
 * layer.c — the DNN layer program (Trio): one pipeline of one stage of a
 * quantized model (innet/dnn.h), on a leaf switch of a spine/leaf fabric.
 *
 *   client ─ACT(stage 0)─▶ leaf A pipes ─ACT(stage 1)─▶ spines ─▶ leaf B pipes ─ ... ─RESULT─▶ client
 *
 * Per packet (an ACT carrying a chunk of this stage's input):
 *   1. not for this switch (dst_node): forward by route, ECMP (transit);
 *   2. find the inference's slot (infer_id % slots); claim it if free (zero
 *      its accumulators and arrival bitmap, arm its reclaim timer); another
 *      inference holding it: drop slot_busy (the client retries);
 *   3. mark the chunk in the arrival bitmap (fetch_or; seen before: drop
 *      duplicate);
 *   4. each of this pipeline's neurons adds the chunk's contribution to its
 *      partial sum (computed locally, one fetch_add per touched neuron), the
 *      products as in the paper: one shift-and-add per set bit of |w|
 *      ("multiply": "shift", default) or a plain multiply ("mul");
 *   5. the chunk that completes the bitmap finishes the inference here: bias,
 *      requantization, ReLU and 2x2 max-pool in layer order, then emits the
 *      outputs as ACT packets to every pipeline of the next stage's leaf (one
 *      copy per pipeline: the paper's multicast), or, in the last stage, a
 *      RESULT with its logits to the client; and frees the slot.
 * A slot whose inference never completes (a packet was lost) is freed by its
 * timer after "timeout_ms": the fabric never stalls on a lost packet.
 *
 * State (registers, per instance):
 *   owner[slots]               infer_id holding the slot, 0 = free
 *   arrived[slots]             bitmap of input chunks seen (<= 64 chunks)
 *   acc[slots * neurons]       int32 partial sums (two's complement in u32)
 *   events[2]                  inferences completed, slots reclaimed by timer
 * Weights, biases and the plan are constants in the program's configuration
 * (in a switch: action data / match tables written by the control plane).
 *
 * THREAD SAFETY: the program is INNET_PROG_SERIAL: one worker handles all its
 * packets, so claim-zero-accumulate-complete never interleaves between
 * packets. The timer thread only frees a slot with a compare-and-swap of
 * owner (id -> 0); the next claim (on the worker) zeroes the state, so a
 * packet that raced with the reclaim cannot leak sums into another inference.
 * Parallelism comes from pipelines (instances) and switches, as in the paper.
 *
 * Settings: "model" (path), "stage" (absent: transit only), "pipe", "pipes",
 * "max_vals", "nodes" (leaf node id per stage), "udp_base", "slots",
 * "timeout_ms", "multiply", "routes" (docs/dnn.md, "Layer program").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dnn/wire.h"
#include "innet/dnn.h"
#include "innet/program.h"
#include "innet/routes.h"
#include "innet/switch.h"

enum { R_OWNER, R_ARRIVED, R_ACC, R_EVENTS };
enum { T_ROUTES };
enum { EV_COMPLETED, EV_RECLAIMED };

#define LAYER_MAX_CHUNKS   INNET_DNN_LAYER_MAX_CHUNKS  /* one 64-bit arrival bitmap per slot */
#define LAYER_MAX_NEURONS  INNET_DNN_LAYER_MAX_NEURONS /* accumulators per pipeline (local array) */
#define LAYER_MAX_POST     INNET_DNN_LAYER_MAX_POST
#define LAYER_NO_STAGE     255u

enum layer_drop {
	DNN_TOO_SHORT = INNET_DROP_PROGRAM,
	DNN_BAD_MAGIC,
	DNN_BAD_VERSION,
	DNN_WRONG_SERVICE,
	DNN_NO_ROUTE,
	DNN_NO_STAGE,
	DNN_BAD_OP,
	DNN_WRONG_STAGE,
	DNN_WRONG_MODEL,
	DNN_BAD_CHUNK,
	DNN_BAD_ID,
	DNN_SLOT_BUSY,
	DNN_DUPLICATE,
};

static const char *const layer_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "no_route", "no_stage", "bad_op",
	"wrong_stage", "wrong_model", "bad_chunk", "bad_id", "slot_busy", "duplicate",
};

/* Everything the handler needs, in one allocation (freed with free()): the
 * weights and biases of this pipeline's units follow the struct. */
struct layer_conf {
	uint16_t node;                    /* this switch (from init) */
	uint16_t udp_base;
	uint32_t slots;
	uint64_t timeout_ns;
	bool shift_mult;
	bool transit_only;
	uint32_t stage;
	uint32_t n_stages;
	uint16_t next_node;               /* leaf of stage + 1 */
	uint32_t next_pipes;
	uint32_t model_crc;
	/* The stage's compute layer. */
	enum innet_dnn_layer_type type;
	struct innet_dnn_shape in, conv_out;
	uint32_t kh, kw, stride, pad, shift;
	uint32_t per_unit_w;              /* weights per unit */
	bool last;
	/* Its post layers, in order. */
	enum innet_dnn_layer_type post[LAYER_MAX_POST];
	uint32_t n_post;
	/* This pipeline. */
	struct innet_dnn_pipe pipe;
	uint32_t units;
	/* Input chunks of this stage. */
	struct innet_dnn_chunk chunks[LAYER_MAX_CHUNKS];
	uint32_t n_chunks;
	uint64_t full_mask;
	/* Output chunks (next stage's chunks [seq_lo, seq_hi)). */
	struct innet_dnn_chunk out_chunks[LAYER_MAX_CHUNKS];
	/* Routes (installed by init). */
	struct innet_routes routes;
	/* Then: int8 weights[units * per_unit_w], pad to 4, int32 biases[units],
	 * int8 wt[per_unit_w * units], pad to 4, (dense) int32 wd[units * per_unit_w]. */
	const int8_t *weights;            /* [units][per_unit_w], as in the model */
	const int32_t *biases;            /* [units] */
	const int8_t *wt;                 /* conv2d: the weights as [in.c][kh][kw][units] */
	const int32_t *wd;                /* dense: the weights widened, [units][per_unit_w] */
	uint64_t chunk_ops[LAYER_MAX_CHUNKS]; /* dense: ALU operations per input chunk */
	uint8_t data[];
};

static int route_port(struct innet_ctx *ctx, uint16_t node, uint32_t hash, uint16_t *port)
{
	struct innet_route r;
	if (innet_route_get(ctx, T_ROUTES, node, &r) != 0 || r.n == INNET_ROUTE_GROUP)
		return -1;
	*port = innet_route_pick(&r, hash);
	innet_alu(ctx, 1);
	return 0;
}

/* ALU operations of one product by weight w (indexed by its byte): one shift
 * and one add per set bit of |w|, and a negation for w < 0 (shift mode). */
static uint8_t shift_cost[256];

static void shift_cost_init(void)
{
	for (int w = -128; w < 128; w++) {
		uint32_t m = (uint32_t)(w < 0 ? -w : w);
		shift_cost[(uint8_t)w] = (uint8_t)(2 * __builtin_popcount(m) + (w < 0));
	}
}

/* a * w, as the paper does it: one shift and one add per set bit of |w|.
 * Branch-free (a bit that is clear adds zero), so random weights cost no
 * mispredicted branches; the ALU operations are counted per packet by the
 * caller from shift_cost[]. Exact for |a| <= 128, |w| <= 128. */
static inline int32_t mult_shift(int32_t a, int32_t w)
{
	uint32_t m = (uint32_t)(w < 0 ? -w : w), ua = (uint32_t)a, r = 0;
#pragma GCC unroll 8
	for (uint32_t bit = 0; bit < 8; bit++)
		r += (ua << bit) & (0u - ((m >> bit) & 1u)); /* wraps like the hardware's adder */
	return w < 0 ? -(int32_t)r : (int32_t)r;
}

/* The inner loops of the convolutions, for k < cnt: out[k] += (or, w < 0,
 * -=) the sum over the set bits b of |w| of in[k * st] << b (shift mode);
 * out[k] += in[k * st] * w (multiply mode). With
 * stride 1 four values at a time in a 128-bit vector (GCC/clang vector
 * extensions: SSE2 on x86-64, NEON on arm64), in wrapping uint32 arithmetic.
 * The values come widened to int32 (once per packet), so a vector load is one
 * instruction. */
typedef uint32_t dnn_u32x4 __attribute__((vector_size(16)));
typedef int32_t dnn_i32x4 __attribute__((vector_size(16)));

static inline dnn_u32x4 load4(const int32_t *in)
{
	dnn_u32x4 v;
	memcpy(&v, in, sizeof(v));
	return v;
}

/* m = |w| (1..128): every set bit is one shift and one add of the value; the
 * loop over the bits is inside the loop over the values, with the same trip
 * count every time (well predicted), so the row is read and written once. */
static inline void row_shift_add(int32_t *out, const int32_t *in, uint32_t cnt, uint32_t st, uint32_t m,
				 bool neg)
{
	uint32_t k = 0;
	if (st == 1)
		for (; k + 4 <= cnt; k += 4) {
			dnn_u32x4 o, v = load4(in + k), r = { 0, 0, 0, 0 };
			for (uint32_t b = m; b != 0; b &= b - 1)
				r += v << (uint32_t)__builtin_ctz(b);
			memcpy(&o, out + k, sizeof(o));
			o = neg ? o - r : o + r;
			memcpy(out + k, &o, sizeof(o));
		}
	for (; k < cnt; k++) {
		uint32_t v = (uint32_t)in[k * st], r = 0;
		for (uint32_t b = m; b != 0; b &= b - 1)
			r += v << (uint32_t)__builtin_ctz(b);
		out[k] = (int32_t)(neg ? (uint32_t)out[k] - r : (uint32_t)out[k] + r);
	}
}

static inline void row_mul_add(int32_t *out, const int32_t *in, uint32_t cnt, uint32_t st, int32_t w)
{
	uint32_t k = 0;
	if (st == 1)
		for (; k + 4 <= cnt; k += 4) {
			dnn_u32x4 o, v = load4(in + k) * (uint32_t)w;
			memcpy(&o, out + k, sizeof(o));
			o += v;
			memcpy(out + k, &o, sizeof(o));
		}
	for (; k < cnt; k++)
		out[k] += in[k * st] * w;
}

/* conv2d with stride 1, the fast way: the chunk's channels are copied into
 * zero-padded planes (pitch iw + 2 pad; values outside the chunk are zero, so
 * they add nothing); then, per unit, every kernel position (ky, kx) is one
 * contiguous pass over the plane shifted by (ky, kx), into an output plane
 * with the same pitch whose last kw - 1 columns are scratch. Per weight in
 * shift mode: a shift and an add per set bit per value. The valid
 * columns are added into part[] once per unit. Returns false (nothing done)
 * when the planes do not fit the scratch space; conv_accumulate then walks
 * row segments instead. */
/* Scratch lives on the worker's stack: with the handler's accumulators and
 * the widened chunk, at most ~70 KiB per packet (worker threads have the
 * default stack, 8 MiB on Linux). */
#define PLANE_SCRATCH 8192u   /* int32 values: padded input planes of one chunk */
#define OUT_SCRATCH   4096u   /* int32 values: one unit's padded output plane */

static bool conv_planes(const struct layer_conf *c, const int32_t *wide, uint32_t offset, uint32_t n,
			int32_t *part, uint64_t *ops)
{
	const uint32_t ih = c->in.h, iw = c->in.w, oh = c->conv_out.h, ow = c->conv_out.w, pad = c->pad;
	const uint32_t pitch = iw + 2 * pad, pp = (ih + 2 * pad) * pitch, hw = ih * iw;
	const uint32_t ch_lo = offset / hw, ch_hi = (offset + n - 1) / hw + 1, nch = ch_hi - ch_lo;
	if (c->stride != 1 || (uint64_t)nch * pp > PLANE_SCRATCH || (uint64_t)oh * pitch > OUT_SCRATCH)
		return false;
	int32_t pin[PLANE_SCRATCH], pout[OUT_SCRATCH];
	memset(pin, 0, sizeof(int32_t) * nch * pp);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = offset + i, ch = idx / hw, y = (idx / iw) % ih, x = idx % iw;
		pin[(ch - ch_lo) * pp + (y + pad) * pitch + x + pad] = wide[i];
	}
	const uint32_t len = (oh - 1) * pitch + ow, units = c->units, plane = oh * ow;
	for (uint32_t u = 0; u < units; u++) {
		memset(pout, 0, sizeof(int32_t) * len);
		for (uint32_t ch = ch_lo; ch < ch_hi; ch++) {
			const int8_t *w = c->weights + (size_t)u * c->per_unit_w + (size_t)ch * c->kh * c->kw;
			for (uint32_t ky = 0; ky < c->kh; ky++)
				for (uint32_t kx = 0; kx < c->kw; kx++) {
					int32_t wu = w[ky * c->kw + kx];
					if (wu == 0)
						continue;
					const int32_t *in = pin + (ch - ch_lo) * pp + ky * pitch + kx;
					if (c->shift_mult) {
						*ops += (uint64_t)plane * shift_cost[(uint8_t)wu];
						row_shift_add(pout, in, len, 1, (uint32_t)(wu < 0 ? -wu : wu), wu < 0);
					} else {
						*ops += plane;
						row_mul_add(pout, in, len, 1, wu);
					}
				}
		}
		int32_t *dst = part + u * plane;
		for (uint32_t oy = 0; oy < oh; oy++)
			for (uint32_t ox = 0; ox < ow; ox++)
				dst[oy * ow + ox] += pout[oy * pitch + ox];
	}
	return true;
}

/* conv2d, weight-stationary: the chunk is walked one input row segment at a
 * time; for each kernel position (ky, kx) the segment's values meet one output
 * row (oy) at every stride-th column, and each of this pipeline's units adds
 * weight x value there; in shift mode as one shift and one add per set bit of
 * the weight per value, as the paper's switch does. The sums are exact (the loader
 * bounds every accumulator), so both modes give the reference's numbers. */
static uint32_t ceil_div_pos(int32_t num, int32_t den)
{
	return num <= 0 ? 0 : (uint32_t)((num + den - 1) / den);
}

static void conv_accumulate(const struct layer_conf *c, const int8_t *vals, uint32_t offset, uint32_t n,
			    int32_t *part, uint64_t *ops)
{
	const uint32_t ih = c->in.h, iw = c->in.w, oh = c->conv_out.h, ow = c->conv_out.w;
	const uint32_t units = c->units, plane = oh * ow, st = c->stride;
	int32_t wide[1024];
	if (n == 0 || n > 1024)
		return; /* the handler admits only the plan's chunks: 1..max_vals <= 1024 */
	for (uint32_t i = 0; i < n; i++)
		wide[i] = vals[i];
	if (conv_planes(c, wide, offset, n, part, ops))
		return;
	for (uint32_t i = 0; i < n;) {
		uint32_t idx = offset + i, ch = idx / (ih * iw), iy = (idx / iw) % ih, ix0 = idx % iw;
		uint32_t len = iw - ix0 < n - i ? iw - ix0 : n - i;
		for (uint32_t ky = 0; ky < c->kh; ky++) {
			int32_t ty = (int32_t)iy + (int32_t)c->pad - (int32_t)ky;
			if (ty < 0 || ty % (int32_t)st != 0 || (uint32_t)ty / st >= oh)
				continue;
			uint32_t oy = (uint32_t)ty / st;
			for (uint32_t kx = 0; kx < c->kw; kx++) {
				/* column ix feeds ox = (ix + pad - kx) / stride when it divides */
				int32_t first = (int32_t)kx - (int32_t)c->pad; /* the ix of ox = 0 */
				uint32_t ox_lo = ceil_div_pos((int32_t)ix0 - first, (int32_t)st);
				uint32_t ox_hi = ceil_div_pos((int32_t)(ix0 + len) - first, (int32_t)st);
				if (ox_hi > ow)
					ox_hi = ow;
				if (ox_lo >= ox_hi)
					continue;
				uint32_t cnt = ox_hi - ox_lo;
				const int32_t *in = wide + i + (uint32_t)(first + (int32_t)(st * ox_lo) - (int32_t)ix0);
				const int8_t *w = c->wt + (size_t)((ch * c->kh + ky) * c->kw + kx) * units;
				for (uint32_t u = 0; u < units; u++) {
					int32_t wu = w[u];
					if (wu == 0)
						continue;
					int32_t *out = part + u * plane + oy * ow + ox_lo;
					if (c->shift_mult) {
						*ops += (uint64_t)cnt * shift_cost[(uint8_t)wu];
						row_shift_add(out, in, cnt, st, (uint32_t)(wu < 0 ? -wu : wu), wu < 0);
					} else {
						*ops += cnt;
						row_mul_add(out, in, cnt, st, wu);
					}
				}
			}
		}
		i += len;
	}
}

/* Dense layers: one unit's dot product over a chunk, four values at a time.
 * Shift mode: per weight, the activation shifted by each set bit of |w| is
 * added (branch-free: a clear bit adds zero), then the sign applied; the
 * weights come widened to int32 at setup (c->wd). Wrapping uint32 sums; the
 * result is exact (the loader bounds every accumulator). */
static int32_t dot_shift(const int32_t *v, const int32_t *w, uint32_t n)
{
	dnn_u32x4 acc = { 0, 0, 0, 0 };
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4) {
		dnn_i32x4 wv;
		memcpy(&wv, w + i, sizeof(wv));
		dnn_u32x4 a = load4(v + i), sg = (dnn_u32x4)(wv >> 31), m = ((dnn_u32x4)wv ^ sg) - sg;
		dnn_u32x4 r = { 0, 0, 0, 0 };
		for (uint32_t bit = 0; bit < 8; bit++)
			r += (a << bit) & (0u - ((m >> bit) & 1u));
		acc += (r ^ sg) - sg;
	}
	uint32_t sum = acc[0] + acc[1] + acc[2] + acc[3];
	for (; i < n; i++)
		sum += (uint32_t)mult_shift(v[i], w[i]);
	return (int32_t)sum;
}

static int32_t dot_mul(const int32_t *v, const int32_t *w, uint32_t n)
{
	dnn_u32x4 acc = { 0, 0, 0, 0 };
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4)
		acc += load4(v + i) * load4(w + i);
	uint32_t sum = acc[0] + acc[1] + acc[2] + acc[3];
	for (; i < n; i++)
		sum += (uint32_t)(v[i] * w[i]);
	return (int32_t)sum;
}

/* Add this chunk's contributions into part[] (one per pipeline neuron); the
 * products by shift-and-add or plain multiply, the same sums either way. */
static void accumulate(struct innet_ctx *ctx, const struct layer_conf *c, const int8_t *vals,
		       uint32_t offset, uint32_t n, uint64_t seq_ops, int32_t *part)
{
	uint64_t ops = 0;
	const bool shift = c->shift_mult;
	if (c->type == INNET_DNN_DENSE) {
		int32_t wide[1024];
		if (n == 0 || n > 1024)
			return; /* the handler admits only the plan's chunks: 1..max_vals <= 1024 */
		for (uint32_t i = 0; i < n; i++)
			wide[i] = vals[i];
		for (uint32_t u = 0; u < c->units; u++) {
			const int32_t *w = c->wd + (size_t)u * c->per_unit_w + offset;
			part[u] += shift ? dot_shift(wide, w, n) : dot_mul(wide, w, n);
		}
		innet_alu(ctx, (uint32_t)(seq_ops < UINT32_MAX ? seq_ops : UINT32_MAX));
		return;
	}
	conv_accumulate(c, vals, offset, n, part, &ops);
	innet_alu(ctx, (uint32_t)(ops < UINT32_MAX ? ops : UINT32_MAX));
}

/* Finish the inference in slot: values[] gets this pipeline's outputs
 * (int8 in int32, or the logits in the last stage); returns their count. */
static uint32_t finish(struct innet_ctx *ctx, const struct layer_conf *c, uint32_t slot, int32_t *v)
{
	uint32_t per = c->pipe.neurons / c->units; /* accumulators per unit */
	for (uint32_t k = 0; k < c->pipe.neurons; k++) {
		int32_t acc = (int32_t)(uint32_t)innet_reg_read(ctx, R_ACC, slot * c->pipe.neurons + k);
		acc += c->biases[k / per];
		v[k] = c->last ? acc : innet_dnn_requant(acc, c->shift);
	}
	innet_alu(ctx, 2 * c->pipe.neurons);
	struct innet_dnn_shape s = { c->units, c->conv_out.h, c->conv_out.w };
	for (uint32_t p = 0; p < c->n_post; p++) {
		uint32_t n = s.c * s.h * s.w;
		if (c->post[p] == INNET_DNN_RELU) {
			for (uint32_t k = 0; k < n; k++)
				v[k] = v[k] < 0 ? 0 : v[k]; /* the sign bit */
			innet_alu(ctx, n);
		} else if (c->post[p] == INNET_DNN_MAXPOOL2) {
			uint32_t h2 = s.h / 2, w2 = s.w / 2;
			for (uint32_t ch = 0; ch < s.c; ch++)
				for (uint32_t y = 0; y < h2; y++)
					for (uint32_t x = 0; x < w2; x++) {
						const int32_t *q = v + (ch * s.h + 2 * y) * s.w + 2 * x;
						int32_t m = q[0];
						m = q[1] > m ? q[1] : m;
						m = q[s.w] > m ? q[s.w] : m;
						m = q[s.w + 1] > m ? q[s.w + 1] : m;
						/* in place: the write index never passes the read window */
						v[(ch * h2 + y) * w2 + x] = m;
					}
			innet_alu(ctx, 3 * s.c * h2 * w2);
			s.h = h2;
			s.w = w2;
		} else { /* flatten: CHW order is already the flat order */
			s = (struct innet_dnn_shape){ n, 1, 1 };
		}
	}
	return s.c * s.h * s.w;
}

static void emit_outputs(struct innet_ctx *ctx, const struct layer_conf *c, const struct innet_hdr *ih,
			 const struct innet_dnn_hdr *dh, const int32_t *v, uint32_t nv)
{
	uint8_t buf[INNET_DNN_HDRS_LEN + 1024 * 4];
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_dnn_hdr *d = (struct innet_dnn_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				 .service = INNET_SVC_DNN, .src_node = htons(c->node) };
	*d = *dh;
	uint32_t id = ntohl(dh->infer_id);
	if (c->last) {
		h->dst_node = dh->client_node;
		d->op = INNET_DNN_OP_RESULT;
		d->stage = (uint8_t)c->stage;
		d->seq = htons((uint16_t)c->pipe.seq_lo);
		d->n = htons((uint16_t)nv);
		d->offset = htonl(c->pipe.unit_lo);
		uint8_t *p = buf + INNET_DNN_HDRS_LEN;
		for (uint32_t k = 0; k < nv; k++) {
			uint32_t be = htonl((uint32_t)v[k]);
			memcpy(p + 4 * k, &be, 4);
		}
		struct innet_out out = { .udp = c->udp_base };
		if (route_port(ctx, ntohs(dh->client_node), id, &out.port) != 0)
			return; /* no route to the client: it times out and retries */
		innet_emit(ctx, &out, false, buf, INNET_DNN_HDRS_LEN + 4 * nv);
		return;
	}
	h->dst_node = htons(c->next_node);
	d->op = INNET_DNN_OP_ACT;
	d->stage = (uint8_t)(c->stage + 1);
	for (uint32_t s = c->pipe.seq_lo; s < c->pipe.seq_hi; s++) {
		const struct innet_dnn_chunk *ch = &c->out_chunks[s - c->pipe.seq_lo];
		d->seq = htons((uint16_t)s);
		d->n = htons((uint16_t)ch->n);
		d->offset = htonl(ch->offset);
		for (uint32_t k = 0; k < ch->n; k++)
			buf[INNET_DNN_HDRS_LEN + k] = (uint8_t)(int8_t)v[ch->offset - c->pipe.out_lo + k];
		for (uint32_t q = 0; q < c->next_pipes; q++) {
			struct innet_out out = { .udp = (uint16_t)(c->udp_base + q) };
			if (route_port(ctx, c->next_node, id, &out.port) != 0)
				return;
			innet_emit(ctx, &out, false, buf, INNET_DNN_HDRS_LEN + ch->n);
		}
	}
}

static enum innet_action layer_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct layer_conf *c = innet_conf(ctx);
	if (pkt->len < INNET_DNN_HDRS_LEN)
		return innet_drop(pkt, DNN_TOO_SHORT);
	const struct innet_hdr *h = (const struct innet_hdr *)pkt->data;
	const struct innet_dnn_hdr *d = (const struct innet_dnn_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, DNN_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, DNN_BAD_VERSION);
	if (h->service != INNET_SVC_DNN)
		return innet_drop(pkt, DNN_WRONG_SERVICE);
	uint16_t dst = ntohs(h->dst_node);
	if (dst != c->node) {
		uint16_t port;
		if (route_port(ctx, dst, ntohl(d->infer_id), &port) != 0)
			return innet_drop(pkt, DNN_NO_ROUTE);
		return innet_forward(pkt, port);
	}
	if (c->transit_only)
		return innet_drop(pkt, DNN_NO_STAGE);
	if (d->op != INNET_DNN_OP_ACT)
		return innet_drop(pkt, DNN_BAD_OP);
	if (d->stage != c->stage)
		return innet_drop(pkt, DNN_WRONG_STAGE);
	if (ntohl(d->model) != c->model_crc)
		return innet_drop(pkt, DNN_WRONG_MODEL);
	uint32_t seq = ntohs(d->seq), n = ntohs(d->n), offset = ntohl(d->offset);
	if (seq >= c->n_chunks || c->chunks[seq].offset != offset || c->chunks[seq].n != n ||
	    pkt->len != INNET_DNN_HDRS_LEN + n)
		return innet_drop(pkt, DNN_BAD_CHUNK);
	uint32_t id = ntohl(d->infer_id);
	if (id == 0)
		return innet_drop(pkt, DNN_BAD_ID);

	uint32_t slot = id % c->slots;
	uint64_t owner = innet_reg_read(ctx, R_OWNER, slot);
	if (owner != id) {
		uint64_t expect = 0;
		if (owner != 0 || !innet_reg_cas(ctx, R_OWNER, slot, &expect, id))
			return innet_drop(pkt, DNN_SLOT_BUSY);
		for (uint32_t k = 0; k < c->pipe.neurons; k++)
			innet_reg_write(ctx, R_ACC, slot * c->pipe.neurons + k, 0);
		innet_reg_write(ctx, R_ARRIVED, slot, 0);
		innet_timer_arm(ctx, slot, c->timeout_ns, id);
	}
	uint64_t bit = 1ull << seq;
	uint64_t before = innet_reg_fetch_or(ctx, R_ARRIVED, slot, bit);
	if (before & bit)
		return innet_drop(pkt, DNN_DUPLICATE);

	int32_t v[LAYER_MAX_NEURONS];
	memset(v, 0, sizeof(int32_t) * c->pipe.neurons);
	accumulate(ctx, c, (const int8_t *)(pkt->data + INNET_DNN_HDRS_LEN), offset, n, c->chunk_ops[seq], v);
	for (uint32_t k = 0; k < c->pipe.neurons; k++)
		if (v[k] != 0)
			innet_reg_fetch_add(ctx, R_ACC, slot * c->pipe.neurons + k, (uint32_t)v[k]);
	if ((before | bit) != c->full_mask)
		return INNET_CONSUMED;

	uint32_t nv = finish(ctx, c, slot, v);
	emit_outputs(ctx, c, h, d, v, nv);
	innet_timer_cancel(ctx, slot);
	innet_reg_write(ctx, R_OWNER, slot, 0);
	innet_reg_fetch_add(ctx, R_EVENTS, EV_COMPLETED, 1);
	return INNET_CONSUMED;
}

static void layer_on_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
	uint64_t expect = arg;
	if (innet_reg_cas(ctx, R_OWNER, timer, &expect, 0))
		innet_reg_fetch_add(ctx, R_EVENTS, EV_RECLAIMED, 1);
}

/* Fill the stage-specific part of c from the model and plan (setup only). */
static int layer_from_plan(struct innet_decl *d, struct layer_conf **cp, const char *path,
			   uint32_t stage, uint32_t pipe, uint32_t pipes, uint32_t max_vals,
			   const uint64_t *nodes, uint32_t n_nodes)
{
	struct innet_dnn_model m;
	struct innet_dnn_plan p;
	char err[512];
	if (innet_dnn_model_load(path, &m, err, sizeof(err)) != 0)
		return innet_decl_error(d, "model: %s", err);
	int rc = innet_dnn_plan_build(&m, pipes, max_vals, &p, err, sizeof(err));
	if (rc != 0) {
		innet_dnn_model_free(&m);
		return innet_decl_error(d, "model %s: %s", path, err);
	}
	rc = -EINVAL;
	if (stage >= p.n_stages) {
		innet_decl_error(d, "stage %u: the model has %u stages (0..%u)", stage, p.n_stages,
				 p.n_stages - 1);
		goto out;
	}
	if (n_nodes != p.n_stages) {
		innet_decl_error(d, "'nodes' lists %u leaves; the model has %u stages", n_nodes, p.n_stages);
		goto out;
	}
	const struct innet_dnn_stage *s = &p.stages[stage];
	const struct innet_dnn_layer *l = &m.layers[s->layer];
	if (pipe >= s->n_pipes) {
		innet_decl_error(d, "pipe %u: stage %u has %u pipelines", pipe, stage, s->n_pipes);
		goto out;
	}
	if (s->n_chunks > LAYER_MAX_CHUNKS || (!s->last && p.stages[stage + 1].n_chunks > LAYER_MAX_CHUNKS)) {
		innet_decl_error(d, "stage %u: more than %u input packets per inference; raise "
				    "'max_vals'", stage, LAYER_MAX_CHUNKS);
		goto out;
	}
	if (s->pipes[pipe].neurons > LAYER_MAX_NEURONS) {
		innet_decl_error(d, "stage %u pipe %u: %u accumulators exceed %u; use more pipelines",
				 stage, pipe, s->pipes[pipe].neurons, LAYER_MAX_NEURONS);
		goto out;
	}
	if (s->post_hi - s->post_lo > LAYER_MAX_POST) {
		innet_decl_error(d, "stage %u: more than %u relu/pool/flatten layers", stage, LAYER_MAX_POST);
		goto out;
	}
	uint32_t units = s->pipes[pipe].unit_hi - s->pipes[pipe].unit_lo;
	uint32_t per_w = l->n_weights / l->units;
	size_t wbytes = ((size_t)units * per_w + 3) & ~(size_t)3;
	/* Grow the configuration to hold the weights: a new block replaces the old
	 * one as the program's priv (innet_decl_priv frees the old one). */
	size_t wdbytes = l->type == INNET_DNN_DENSE ? 4 * (size_t)units * per_w : 0;
	struct layer_conf *c = malloc(sizeof(*c) + 2 * wbytes + 4 * (size_t)units + wdbytes);
	if (c == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(c, *cp, sizeof(*c));
	innet_decl_priv(d, c);
	*cp = c;
	c->stage = stage;
	c->n_stages = p.n_stages;
	c->model_crc = m.crc;
	c->type = l->type;
	c->in = l->in;
	c->conv_out = l->out;
	c->kh = l->kh;
	c->kw = l->kw;
	c->stride = l->stride;
	c->pad = l->pad;
	c->shift = l->shift;
	c->per_unit_w = per_w;
	c->last = s->last;
	c->n_post = s->post_hi - s->post_lo;
	for (uint32_t i = 0; i < c->n_post; i++)
		c->post[i] = m.layers[s->post_lo + i].type;
	c->pipe = s->pipes[pipe];
	c->units = units;
	c->n_chunks = s->n_chunks;
	memcpy(c->chunks, s->chunks, sizeof(s->chunks[0]) * s->n_chunks);
	c->full_mask = s->n_chunks == 64 ? ~0ull : (1ull << s->n_chunks) - 1;
	if (!s->last) {
		const struct innet_dnn_stage *nx = &p.stages[stage + 1];
		c->next_node = (uint16_t)nodes[stage + 1];
		c->next_pipes = nx->n_pipes;
		memcpy(c->out_chunks, nx->chunks + c->pipe.seq_lo,
		       sizeof(nx->chunks[0]) * (c->pipe.seq_hi - c->pipe.seq_lo));
	}
	memcpy(c->data, l->weights + (size_t)c->pipe.unit_lo * per_w, (size_t)units * per_w);
	memcpy(c->data + wbytes, l->biases + c->pipe.unit_lo, 4 * (size_t)units);
	c->weights = (const int8_t *)c->data;
	c->biases = (const int32_t *)(void *)(c->data + wbytes);
	int8_t *wt = (int8_t *)(c->data + wbytes + 4 * (size_t)units);
	for (uint32_t u = 0; u < units; u++)
		for (uint32_t k = 0; k < per_w; k++)
			wt[(size_t)k * units + u] = c->weights[(size_t)u * per_w + k];
	c->wt = wt;
	if (wdbytes > 0) {
		int32_t *wd = (int32_t *)(void *)(c->data + 2 * wbytes + 4 * (size_t)units);
		for (size_t k = 0; k < (size_t)units * per_w; k++)
			wd[k] = c->weights[k];
		c->wd = wd;
		/* ALU operations per input chunk, as the shift-and-add (or multiply)
		 * of every value of the chunk by each unit's weight costs them */
		for (uint32_t q = 0; q < c->n_chunks; q++) {
			uint64_t ops = 0;
			for (uint32_t u = 0; u < units; u++)
				for (uint32_t i = 0; i < c->chunks[q].n; i++) {
					int8_t w = c->weights[(size_t)u * per_w + c->chunks[q].offset + i];
					ops += c->shift_mult ? shift_cost[(uint8_t)w] : w != 0;
				}
			c->chunk_ops[q] = ops;
		}
	}
	rc = 0;
out:
	innet_dnn_plan_free(&p);
	innet_dnn_model_free(&m);
	return rc;
}

static int layer_setup(struct innet_decl *d, struct innet_args *a)
{
	static pthread_once_t cost_once = PTHREAD_ONCE_INIT;
	pthread_once(&cost_once, shift_cost_init);
	struct layer_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	innet_decl_priv(d, c);
	const char *model, *multiply;
	uint64_t stage, pipe, pipes, max_vals, udp_base, slots, timeout_ms, nodes[INNET_DNN_MAX_STAGES];
	uint32_t n_nodes = 0;
	int rc;
	if ((rc = innet_args_str(a, "model", NULL, &model)) != 0 ||
	    (rc = innet_args_u64(a, "stage", LAYER_NO_STAGE, 0, LAYER_NO_STAGE, &stage)) != 0 ||
	    (rc = innet_args_u64(a, "pipe", 0, 0, INNET_DNN_MAX_PIPES - 1, &pipe)) != 0 ||
	    (rc = innet_args_u64(a, "pipes", 1, 1, INNET_DNN_MAX_PIPES, &pipes)) != 0 ||
	    (rc = innet_args_u64(a, "max_vals", 256, 1, 1024, &max_vals)) != 0 ||
	    (rc = innet_args_u64(a, "udp_base", INNET_DNN_UDP_DEFAULT, 1, 65535 - INNET_DNN_MAX_PIPES,
				 &udp_base)) != 0 ||
	    (rc = innet_args_u64(a, "slots", 256, 1, 65536, &slots)) != 0 ||
	    (rc = innet_args_u64(a, "timeout_ms", 100, 1, 60000, &timeout_ms)) != 0 ||
	    (rc = innet_args_str(a, "multiply", "shift", &multiply)) != 0 ||
	    (rc = innet_args_u64_array(a, "nodes", nodes, INNET_DNN_MAX_STAGES, &n_nodes)) != 0)
		return rc;
	if (strcmp(multiply, "shift") != 0 && strcmp(multiply, "mul") != 0)
		return innet_decl_error(d, "setting 'multiply' must be \"shift\" or \"mul\", not \"%s\"",
					multiply);
	for (uint32_t i = 0; i < n_nodes; i++)
		if (nodes[i] < 1 || nodes[i] > 65535)
			return innet_decl_error(d, "nodes[%u] = %llu is not a node id", i,
						(unsigned long long)nodes[i]);
	c->shift_mult = multiply[0] == 's';
	c->udp_base = (uint16_t)udp_base;
	c->slots = (uint32_t)slots;
	c->timeout_ns = timeout_ms * 1000000ull;
	c->transit_only = stage == LAYER_NO_STAGE;
	if ((rc = innet_routes_parse(d, innet_args_json(a, "routes"), 0, &c->routes)) != 0)
		return rc;
	if (!c->transit_only) {
		if (model == NULL)
			return innet_decl_error(d, "setting 'model' (a model file) is required with 'stage'");
		if ((rc = layer_from_plan(d, &c, model, (uint32_t)stage, (uint32_t)pipe, (uint32_t)pipes,
					  (uint32_t)max_vals, nodes, n_nodes)) != 0)
			return rc;
	}
	uint32_t neurons = c->transit_only ? 1 : c->pipe.neurons;
	if ((rc = innet_decl_reg(d, R_OWNER, "owner", 4, c->slots)) != 0 ||
	    (rc = innet_decl_reg(d, R_ARRIVED, "arrived", 8, c->slots)) != 0 ||
	    (rc = innet_decl_reg(d, R_ACC, "acc", 4, c->slots * neurons)) != 0 ||
	    (rc = innet_decl_reg(d, R_EVENTS, "events", 8, 2)) != 0 ||
	    (rc = innet_decl_timers(d, c->slots)) != 0)
		return rc;
	return innet_routes_decl_table(d, T_ROUTES);
}

static int layer_init(struct innet_cp *cp, void *priv)
{
	struct layer_conf *c = priv;
	const struct innet_switch_conf *sc = innet_switch_conf(innet_cp_switch(cp));
	c->node = sc->node_id;
	if (!c->transit_only && !c->last && c->next_node == c->node)
		return innet_cp_init_error(cp, "stages %u and %u are both on node %u; each stage needs "
					       "its own leaf", c->stage, c->stage + 1, c->node);
	return innet_routes_install(cp, T_ROUTES, &c->routes);
}

const struct innet_program innet_prog_dnn_layer = {
	.name = "dnn_layer",
	.summary = "one pipeline of one layer of a quantized DNN (innet dnn); transit by dst_node",
	.model = INNET_MODEL_TRIO,
	.flags = INNET_PROG_SERIAL,
	.parse_bytes = INNET_DNN_HDRS_LEN,
	.drop_reasons = layer_drop_names,
	.n_drop_reasons = sizeof(layer_drop_names) / sizeof(layer_drop_names[0]),
	.setup = layer_setup,
	.init = layer_init,
	.handle = layer_handle,
	.on_timer = layer_on_timer,
};
