/*
 * dnn/layer_dp.c — the DNN layer program's data path (Trio): one pipeline of
 * one stage of a quantized model (innet/dnn.h), on a leaf switch of a
 * spine/leaf fabric. Settings, the model and the plan: layer.c.
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
 * Weights, biases and the plan are constants in the program's config block
 * (layer.h; in a switch: action data / match tables written by the control
 * plane).
 *
 * User space only (the last line): a layer's work per packet — up to ~70 KiB
 * of scratch on the stack and tens of thousands of multiply-adds — is far
 * beyond eBPF's 512-byte stack and the verifier's instruction budget. On the
 * XDP target its packets go to the user-space engine.
 *
 * THREAD SAFETY: the program is INNET_PROG_SERIAL: one worker handles all its
 * packets, so claim-zero-accumulate-complete never interleaves between
 * packets. The timer thread only frees a slot with a compare-and-swap of
 * owner (id -> 0); the next claim (on the worker) zeroes the state, so a
 * packet that raced with the reclaim cannot leak sums into another inference.
 * Parallelism comes from pipelines (instances) and switches, as in the paper.
 */
#include "innet/dp.h"
#include "innet/dnn.h"
#include "innet/routes.h"
#include "dnn/layer.h"
#include "dnn/wire.h"

/* A port toward node (an enum innet_route_rc: a group route is none here). */
static int route_port(struct innet_ctx *ctx, uint16_t node, uint32_t hash, uint16_t *port)
{
	struct innet_route r;
	int rc = innet_route_get(ctx, T_ROUTES, node, &r);
	if (rc != INNET_ROUTE_OK)
		return rc;
	if (r.n == INNET_ROUTE_GROUP)
		return INNET_ROUTE_NONE;
	*port = innet_route_pick(&r, hash);
	innet_alu(ctx, 1);
	return INNET_ROUTE_OK;
}

/* a * w, as the paper does it: one shift and one add per set bit of |w|.
 * Branch-free (a bit that is clear adds zero), so random weights cost no
 * mispredicted branches; the ALU operations are counted per packet by the
 * caller from the config block's shift_cost[]. Exact for |a| <= 128, |w| <= 128. */
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
	__builtin_memcpy(&v, in, sizeof(v));
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
			__builtin_memcpy(&o, out + k, sizeof(o));
			o = neg ? o - r : o + r;
			__builtin_memcpy(out + k, &o, sizeof(o));
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
			__builtin_memcpy(&o, out + k, sizeof(o));
			o += v;
			__builtin_memcpy(out + k, &o, sizeof(o));
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
	__builtin_memset(pin, 0, sizeof(int32_t) * nch * pp);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = offset + i, ch = idx / hw, y = (idx / iw) % ih, x = idx % iw;
		pin[(ch - ch_lo) * pp + (y + pad) * pitch + x + pad] = wide[i];
	}
	const uint32_t len = (oh - 1) * pitch + ow, units = c->units, plane = oh * ow;
	const int8_t *weights = layer_weights(c);
	for (uint32_t u = 0; u < units; u++) {
		__builtin_memset(pout, 0, sizeof(int32_t) * len);
		for (uint32_t ch = ch_lo; ch < ch_hi; ch++) {
			const int8_t *w = weights + (size_t)u * c->per_unit_w + (size_t)ch * c->kh * c->kw;
			for (uint32_t ky = 0; ky < c->kh; ky++)
				for (uint32_t kx = 0; kx < c->kw; kx++) {
					int32_t wu = w[ky * c->kw + kx];
					if (wu == 0)
						continue;
					const int32_t *in = pin + (ch - ch_lo) * pp + ky * pitch + kx;
					if (c->shift_mult) {
						*ops += (uint64_t)plane * c->shift_cost[(uint8_t)wu];
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
	const int8_t *wt = layer_wt(c);
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
				const int8_t *w = wt + (size_t)((ch * c->kh + ky) * c->kw + kx) * units;
				for (uint32_t u = 0; u < units; u++) {
					int32_t wu = w[u];
					if (wu == 0)
						continue;
					int32_t *out = part + u * plane + oy * ow + ox_lo;
					if (c->shift_mult) {
						*ops += (uint64_t)cnt * c->shift_cost[(uint8_t)wu];
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
 * weights come widened to int32 at setup (wd). Wrapping uint32 sums; the
 * result is exact (the loader bounds every accumulator). */
static int32_t dot_shift(const int32_t *v, const int32_t *w, uint32_t n)
{
	dnn_u32x4 acc = { 0, 0, 0, 0 };
	uint32_t i = 0;
	for (; i + 4 <= n; i += 4) {
		dnn_i32x4 wv;
		__builtin_memcpy(&wv, w + i, sizeof(wv));
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
		const int32_t *wd = layer_wd(c);
		int32_t wide[1024];
		if (n == 0 || n > 1024)
			return; /* the handler admits only the plan's chunks: 1..max_vals <= 1024 */
		for (uint32_t i = 0; i < n; i++)
			wide[i] = vals[i];
		for (uint32_t u = 0; u < c->units; u++) {
			const int32_t *w = wd + (size_t)u * c->per_unit_w + offset;
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
	const int32_t *biases = layer_biases(c);
	for (uint32_t k = 0; k < c->pipe.neurons; k++) {
		int32_t acc = (int32_t)(uint32_t)innet_reg_read(ctx, R_ACC, slot * c->pipe.neurons + k);
		acc += biases[k / per];
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
				 .service = INNET_SVC_DNN, .src_node = innet_be16(c->node) };
	*d = *dh;
	uint32_t id = innet_be32(dh->infer_id);
	if (c->last) {
		h->dst_node = dh->client_node;
		d->op = INNET_DNN_OP_RESULT;
		d->stage = (uint8_t)c->stage;
		d->seq = innet_be16((uint16_t)c->pipe.seq_lo);
		d->n = innet_be16((uint16_t)nv);
		d->offset = innet_be32(c->pipe.unit_lo);
		uint8_t *p = buf + INNET_DNN_HDRS_LEN;
		for (uint32_t k = 0; k < nv; k++) {
			uint32_t be = innet_be32((uint32_t)v[k]);
			__builtin_memcpy(p + 4 * k, &be, 4);
		}
		struct innet_out out = { .udp = c->udp_base };
		if (route_port(ctx, innet_be16(dh->client_node), id, &out.port) != INNET_ROUTE_OK)
			return; /* no route to the client (or a busy lookup): it times out and retries */
		innet_emit(ctx, &out, false, buf, INNET_DNN_HDRS_LEN + 4 * nv);
		return;
	}
	h->dst_node = innet_be16(c->next_node);
	d->op = INNET_DNN_OP_ACT;
	d->stage = (uint8_t)(c->stage + 1);
	for (uint32_t s = c->pipe.seq_lo; s < c->pipe.seq_hi; s++) {
		const struct innet_dnn_chunk *ch = &c->out_chunks[s - c->pipe.seq_lo];
		d->seq = innet_be16((uint16_t)s);
		d->n = innet_be16((uint16_t)ch->n);
		d->offset = innet_be32(ch->offset);
		for (uint32_t k = 0; k < ch->n; k++)
			buf[INNET_DNN_HDRS_LEN + k] = (uint8_t)(int8_t)v[ch->offset - c->pipe.out_lo + k];
		for (uint32_t q = 0; q < c->next_pipes; q++) {
			struct innet_out out = { .udp = (uint16_t)(c->udp_base + q) };
			if (route_port(ctx, c->next_node, id, &out.port) != INNET_ROUTE_OK)
				return;   /* (as above: the client retries) */
			innet_emit(ctx, &out, false, buf, INNET_DNN_HDRS_LEN + ch->n);
		}
	}
}

static enum innet_action layer_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct layer_conf *c = innet_conf(ctx);
	const struct innet_hdr *h = innet_pkt_ptr(pkt, 0, INNET_DNN_HDRS_LEN);
	if (h == NULL)
		return innet_drop(pkt, DNN_TOO_SHORT);
	const struct innet_dnn_hdr *d = (const struct innet_dnn_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, DNN_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, DNN_BAD_VERSION);
	if (h->service != INNET_SVC_DNN)
		return innet_drop(pkt, DNN_WRONG_SERVICE);
	uint16_t dst = innet_be16(h->dst_node);
	if (dst != c->node) {
		uint16_t port;
		int rc = route_port(ctx, dst, innet_be32(d->infer_id), &port);
		if (rc != INNET_ROUTE_OK)
			return innet_drop(pkt, rc == INNET_ROUTE_BUSY ? INNET_DROP_TABLE_BUSY : DNN_NO_ROUTE);
		return innet_forward(pkt, port);
	}
	if (c->transit_only)
		return innet_drop(pkt, DNN_NO_STAGE);
	if (d->op != INNET_DNN_OP_ACT)
		return innet_drop(pkt, DNN_BAD_OP);
	if (d->stage != c->stage)
		return innet_drop(pkt, DNN_WRONG_STAGE);
	if (innet_be32(d->model) != c->model_crc)
		return innet_drop(pkt, DNN_WRONG_MODEL);
	uint32_t seq = innet_be16(d->seq), n = innet_be16(d->n), offset = innet_be32(d->offset);
	if (seq >= c->n_chunks || c->chunks[seq].offset != offset || c->chunks[seq].n != n ||
	    pkt->len != INNET_DNN_HDRS_LEN + n)
		return innet_drop(pkt, DNN_BAD_CHUNK);
	uint32_t id = innet_be32(d->infer_id);
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
	__builtin_memset(v, 0, sizeof(int32_t) * c->pipe.neurons);
	const int8_t *vals = innet_pkt_ptr(pkt, INNET_DNN_HDRS_LEN, n); /* (the length was checked) */
	if (vals == NULL)
		return innet_drop(pkt, DNN_BAD_CHUNK);
	accumulate(ctx, c, vals, offset, n, c->chunk_ops[seq], v);
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

INNET_DATAPATH_USERSPACE(dnn_layer, layer_handle, layer_on_timer, "a layer's work per packet (up to ~70 KiB of stack, tens of thousands of multiply-adds) is far beyond eBPF's 512-byte stack and instruction limits")
