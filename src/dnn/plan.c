/*
 * plan.c — how a model is cut for the fabric: stages, pipelines, packets.
 *
 *   layers   conv2d relu maxpool2 flatten | dense relu | dense
 *   stages   └──────── stage 0 ──────────┘ └─ stage 1 ┘ └ stage 2 ┘   (one leaf each)
 *
 * A stage is one conv2d or dense layer and the ReLU/max-pool/flatten layers
 * after it. Its units (conv filters, dense neurons) are divided evenly among
 * its pipelines, as in the paper; a pipeline keeps the accumulators of its
 * units and produces a contiguous range of the stage's output (CHW order
 * keeps a filter's pooled outputs together). A stage's input travels in
 * packets ("chunks") of at most max_vals values, numbered by seq: stage 0's
 * input is cut by the client, stage s+1's by the pipelines of stage s, in
 * pipeline order. Every pipeline of stage s+1 receives every chunk.
 *
 * The compiler, the layer program and the client all build the plan from the
 * same model and numbers, so they agree on every range and seq.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/dnn.h"

static int plan_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int plan_fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err != NULL && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static uint32_t n_chunks(uint32_t n, uint32_t max_vals)
{
	return (n + max_vals - 1) / max_vals;
}

static int plan_build(const struct innet_dnn_model *m, uint32_t max_pipes, uint32_t max_vals,
		      struct innet_dnn_plan *p, char *err, size_t errlen)
{
	if (max_pipes < 1 || max_pipes > INNET_DNN_MAX_PIPES)
		return plan_fail(err, errlen, "pipelines per switch must be 1..%u", INNET_DNN_MAX_PIPES);
	if (max_vals < 1 || max_vals > 1024)
		return plan_fail(err, errlen, "values per packet must be 1..1024");
	p->max_vals = max_vals;
	for (uint32_t i = 0; i < m->n_layers; i++) {
		const struct innet_dnn_layer *l = &m->layers[i];
		if (l->type != INNET_DNN_CONV2D && l->type != INNET_DNN_DENSE) {
			if (p->n_stages == 0)
				return plan_fail(err, errlen, "layer %u (%s) comes before the first conv2d "
							      "or dense layer; a stage starts with one", i,
						 innet_dnn_layer_name(l->type));
			p->stages[p->n_stages - 1].post_hi = i + 1;
			continue;
		}
		if (p->n_stages == INNET_DNN_MAX_STAGES)
			return plan_fail(err, errlen, "more than %u conv2d/dense layers", INNET_DNN_MAX_STAGES);
		struct innet_dnn_stage *s = &p->stages[p->n_stages++];
		s->layer = i;
		s->post_lo = s->post_hi = i + 1;
		s->in_n = innet_dnn_shape_n(l->in);
		s->neurons = innet_dnn_shape_n(l->out);
		s->last = i == m->n_layers - 1;
	}
	for (uint32_t si = 0; si < p->n_stages; si++) {
		struct innet_dnn_stage *s = &p->stages[si];
		const struct innet_dnn_layer *l = &m->layers[s->layer];
		const struct innet_dnn_layer *end = &m->layers[s->post_hi - 1];
		s->out_n = innet_dnn_shape_n(end->out);
		uint32_t per_unit_out = s->out_n / l->units, per_unit_neu = s->neurons / l->units;
		uint32_t per_unit_w = l->n_weights / l->units;
		uint32_t positions = l->out.h * l->out.w;
		s->n_pipes = l->units < max_pipes ? l->units : max_pipes;
		uint32_t base = l->units / s->n_pipes, extra = l->units % s->n_pipes, u = 0;
		for (uint32_t k = 0; k < s->n_pipes; k++) {
			struct innet_dnn_pipe *pp = &s->pipes[k];
			pp->unit_lo = u;
			u += base + (k < extra);
			pp->unit_hi = u;
			uint32_t units = pp->unit_hi - pp->unit_lo;
			pp->out_lo = pp->unit_lo * per_unit_out;
			pp->out_hi = pp->unit_hi * per_unit_out;
			pp->neurons = units * per_unit_neu;
			pp->macs = (uint64_t)pp->neurons * per_unit_w;
			pp->params = (uint64_t)units * per_unit_w + units;
			pp->weight_bytes = (uint64_t)units * per_unit_w + 4ull * units;
			uint64_t bits = 0;
			for (uint64_t w = (uint64_t)pp->unit_lo * per_unit_w; w < (uint64_t)pp->unit_hi * per_unit_w; w++) {
				int32_t v = l->weights[w];
				bits += (uint64_t)__builtin_popcount((unsigned)(v < 0 ? -v : v));
			}
			pp->shift_adds = bits * positions;
			if (s->last && units > 256)
				return plan_fail(err, errlen, "stage %u: %u logits in one pipeline; a result "
							      "packet carries at most 256", si, units);
		}
		/* Input chunks. */
		if (si == 0) {
			s->n_chunks = n_chunks(s->in_n, max_vals);
		} else {
			const struct innet_dnn_stage *prev = &p->stages[si - 1];
			for (uint32_t k = 0; k < prev->n_pipes; k++)
				s->n_chunks += n_chunks(prev->pipes[k].out_hi - prev->pipes[k].out_lo, max_vals);
		}
		s->chunks = calloc(s->n_chunks, sizeof(*s->chunks));
		if (s->chunks == NULL)
			return -ENOMEM;
		if (si == 0) {
			for (uint32_t c = 0; c < s->n_chunks; c++) {
				s->chunks[c].offset = c * max_vals;
				s->chunks[c].n = s->in_n - c * max_vals < max_vals ? s->in_n - c * max_vals : max_vals;
			}
		} else {
			struct innet_dnn_stage *prev = &p->stages[si - 1];
			uint32_t seq = 0;
			for (uint32_t k = 0; k < prev->n_pipes; k++) {
				struct innet_dnn_pipe *pp = &prev->pipes[k];
				pp->seq_lo = seq;
				for (uint32_t o = pp->out_lo; o < pp->out_hi; o += max_vals) {
					s->chunks[seq].offset = o;
					s->chunks[seq].n = pp->out_hi - o < max_vals ? pp->out_hi - o : max_vals;
					seq++;
				}
				pp->seq_hi = seq;
			}
		}
	}
	struct innet_dnn_stage *last = &p->stages[p->n_stages - 1];
	if (!last->last)
		return plan_fail(err, errlen, "the model must end with a dense layer");
	for (uint32_t k = 0; k < last->n_pipes; k++) {
		last->pipes[k].seq_lo = k;
		last->pipes[k].seq_hi = k + 1;
	}
	return 0;
}

int innet_dnn_plan_build(const struct innet_dnn_model *m, uint32_t max_pipes, uint32_t max_vals,
			 struct innet_dnn_plan *p, char *err, size_t errlen)
{
	memset(p, 0, sizeof(*p));
	int rc = plan_build(m, max_pipes, max_vals, p, err, errlen);
	if (rc != 0)
		innet_dnn_plan_free(p);
	return rc;
}

void innet_dnn_plan_free(struct innet_dnn_plan *p)
{
	for (uint32_t i = 0; i < p->n_stages; i++)
		free(p->stages[i].chunks);
	memset(p, 0, sizeof(*p));
}

void innet_dnn_layer_cost(const struct innet_dnn_layer *l, struct innet_dnn_layer_cost *c)
{
	memset(c, 0, sizeof(*c));
	if (l->type != INNET_DNN_CONV2D && l->type != INNET_DNN_DENSE)
		return;
	uint64_t positions = (uint64_t)l->out.h * l->out.w, per_unit_w = l->n_weights / l->units;
	c->params = (uint64_t)l->n_weights + l->units;
	c->weight_bytes = (uint64_t)l->n_weights + 4ull * l->units;
	c->acc_bytes = 4ull * innet_dnn_shape_n(l->out);
	c->macs = (uint64_t)innet_dnn_shape_n(l->out) * per_unit_w;
	c->shift_adds = l->weight_bits_set * positions;
}

void innet_dnn_plan_project(const struct innet_dnn_plan *p, uint32_t ops_per_pass, double pps,
			    struct innet_dnn_projection *out)
{
	memset(out, 0, sizeof(*out));
	out->ops_per_pass = ops_per_pass ? ops_per_pass : 1;
	out->pps = pps;
	for (uint32_t si = 0; si < p->n_stages; si++) {
		const struct innet_dnn_stage *s = &p->stages[si];
		for (uint32_t k = 0; k < s->n_pipes; k++) {
			const struct innet_dnn_pipe *pp = &s->pipes[k];
			struct innet_dnn_pipe_proj *pj = &out->pipes[si][k];
			pj->ops = pp->shift_adds + (uint64_t)pp->neurons * s->n_chunks;
			uint64_t per_pkt = (pj->ops + s->n_chunks - 1) / s->n_chunks;
			pj->passes_per_pkt = (per_pkt + out->ops_per_pass - 1) / out->ops_per_pass;
			if (pj->passes_per_pkt == 0)
				pj->passes_per_pkt = 1;
			pj->recirc = (pj->passes_per_pkt - 1) * s->n_chunks;
			pj->pkts_out = s->last ? 1
					       : (uint64_t)(pp->seq_hi - pp->seq_lo) * p->stages[si + 1].n_pipes;
			pj->us = (double)(s->n_chunks * pj->passes_per_pkt + pj->pkts_out) / pps * 1e6;
			if (pj->us > out->stage_us[si])
				out->stage_us[si] = pj->us;
		}
		out->latency_us += out->stage_us[si];
		if (out->stage_us[si] > out->slowest_us)
			out->slowest_us = out->stage_us[si];
	}
	out->per_second = out->slowest_us > 0 ? 1e6 / out->slowest_us : 0.0;
}

uint32_t innet_dnn_plan_ops_for_latency(const struct innet_dnn_plan *p, double pps, double us)
{
	/* The latency falls monotonically as the budget grows: bisect. */
	struct innet_dnn_projection *pr = malloc(sizeof(*pr));
	if (pr == NULL)
		return 0;
	uint32_t lo = 1, hi = 1u << 20;
	innet_dnn_plan_project(p, hi, pps, pr);
	if (pr->latency_us > us) {
		free(pr);
		return 0;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		innet_dnn_plan_project(p, mid, pps, pr);
		if (pr->latency_us <= us)
			hi = mid;
		else
			lo = mid + 1;
	}
	free(pr);
	return lo;
}

int innet_dnn_plan_check_layer(const struct innet_dnn_plan *p, char *err, size_t errlen)
{
	for (uint32_t si = 0; si < p->n_stages; si++) {
		const struct innet_dnn_stage *s = &p->stages[si];
		if (s->n_chunks > INNET_DNN_LAYER_MAX_CHUNKS)
			return plan_fail(err, errlen, "stage %u: %u input packets per inference exceed the "
						      "layer program's %u; raise --max-vals", si, s->n_chunks,
					 INNET_DNN_LAYER_MAX_CHUNKS);
		if (s->post_hi - s->post_lo > INNET_DNN_LAYER_MAX_POST)
			return plan_fail(err, errlen, "stage %u: more than %u relu/pool/flatten layers", si,
					 INNET_DNN_LAYER_MAX_POST);
		for (uint32_t k = 0; k < s->n_pipes; k++)
			if (s->pipes[k].neurons > INNET_DNN_LAYER_MAX_NEURONS)
				return plan_fail(err, errlen, "stage %u pipeline %u: %u accumulators exceed the "
							      "layer program's %u; use more pipelines (--pipes)",
						 si, k, s->pipes[k].neurons, INNET_DNN_LAYER_MAX_NEURONS);
	}
	return 0;
}
