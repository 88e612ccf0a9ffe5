/*
 * dnn/layer.c — the DNN layer program's control source: settings, the model
 * and the plan into the config block, state declarations, init (routes). The
 * data path (handler, slot reclaim timer) is layer_dp.c, which describes the
 * program; the config block is in layer.h.
 *
 * Settings: "model" (path), "stage" (absent: transit only), "pipe", "pipes",
 * "max_vals", "nodes" (leaf node id per stage), "udp_base", "slots",
 * "timeout_ms", "multiply", "routes" (docs/dnn.md, "Layer program").
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "dnn/layer.h"
#include "dnn/wire.h"
#include "innet/dnn.h"
#include "innet/program.h"
#include "innet/routes.h"
#include "innet/switch.h"

static const char *const layer_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "no_route", "no_stage", "bad_op",
	"wrong_stage", "wrong_model", "bad_chunk", "bad_id", "slot_busy", "duplicate",
};

/* Control-side state: the routes until init installs them, and what init
 * checks. */
struct layer_setup {
	struct innet_routes routes;
	uint16_t node, next_node;
	uint32_t stage;
	bool transit_only, last;
};

/* ALU operations of one product by weight w (indexed by its byte): one shift
 * and one add per set bit of |w|, and a negation for w < 0 (shift mode). */
static void shift_cost_fill(uint8_t cost[256])
{
	for (int w = -128; w < 128; w++) {
		uint32_t m = (uint32_t)(w < 0 ? -w : w);
		cost[(uint8_t)w] = (uint8_t)(2 * __builtin_popcount(m) + (w < 0));
	}
}

/* The stage-specific part of the config block from the model and plan: hdr
 * (the settings filled in) is completed, and the block is declared at its
 * size (the struct and this pipeline's weights: layer.h) into *out. */
static int layer_from_plan(struct innet_decl *d, struct layer_conf *hdr, struct layer_conf **out,
			   const char *path, uint32_t stage, uint32_t pipe, uint32_t pipes, uint32_t max_vals,
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
	struct layer_conf *c = hdr;
	uint32_t units = s->pipes[pipe].unit_hi - s->pipes[pipe].unit_lo;
	uint32_t per_w = l->n_weights / l->units;
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
	/* The arrays after the struct (layer.h). */
	size_t wbytes = ((size_t)units * per_w + 3) & ~(size_t)3;
	size_t wdbytes = l->type == INNET_DNN_DENSE ? 4 * (size_t)units * per_w : 0;
	size_t data = 2 * wbytes + 4 * (size_t)units + wdbytes;
	if (sizeof(*c) + data > INNET_CONF_MAX) {
		innet_decl_error(d, "stage %u pipe %u: %zu bytes of weights, more than a pipeline holds "
				    "(%u); use more pipelines", stage, pipe, data, INNET_CONF_MAX);
		goto out;
	}
	c->off_weights = 0;
	c->off_biases = (uint32_t)wbytes;
	c->off_wt = (uint32_t)(wbytes + 4 * (size_t)units);
	c->off_wd = (uint32_t)(2 * wbytes + 4 * (size_t)units);
	c = innet_decl_conf(d, (uint32_t)(sizeof(*c) + data));
	if (c == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	*c = *hdr;
	*out = c;
	int8_t *weights = (int8_t *)(c->data + c->off_weights);
	memcpy(weights, l->weights + (size_t)c->pipe.unit_lo * per_w, (size_t)units * per_w);
	memcpy(c->data + c->off_biases, l->biases + c->pipe.unit_lo, 4 * (size_t)units);
	int8_t *wt = (int8_t *)(c->data + c->off_wt);
	for (uint32_t u = 0; u < units; u++)
		for (uint32_t k = 0; k < per_w; k++)
			wt[(size_t)k * units + u] = weights[(size_t)u * per_w + k];
	if (wdbytes > 0) {
		int32_t *wd = (int32_t *)(void *)(c->data + c->off_wd);
		for (size_t k = 0; k < (size_t)units * per_w; k++)
			wd[k] = weights[k];
		/* ALU operations per input chunk, as the shift-and-add (or multiply)
		 * of every value of the chunk by each unit's weight costs them */
		for (uint32_t q = 0; q < c->n_chunks; q++) {
			uint64_t ops = 0;
			for (uint32_t u = 0; u < units; u++)
				for (uint32_t i = 0; i < c->chunks[q].n; i++) {
					int8_t w = weights[(size_t)u * per_w + c->chunks[q].offset + i];
					ops += c->shift_mult ? c->shift_cost[(uint8_t)w] : w != 0;
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
	struct layer_setup *ls = calloc(1, sizeof(*ls));
	if (ls == NULL)
		return -ENOMEM;
	innet_decl_priv(d, ls);
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
	/* The settings' part of the config block; the model's part follows. */
	struct layer_conf hdr;
	memset(&hdr, 0, sizeof(hdr));
	hdr.node = innet_decl_node_id(d);
	hdr.shift_mult = multiply[0] == 's';
	hdr.udp_base = (uint16_t)udp_base;
	hdr.slots = (uint32_t)slots;
	hdr.timeout_ns = timeout_ms * 1000000ull;
	hdr.transit_only = stage == LAYER_NO_STAGE;
	shift_cost_fill(hdr.shift_cost);
	if ((rc = innet_routes_parse(d, innet_args_json(a, "routes"), 0, &ls->routes)) != 0)
		return rc;
	struct layer_conf *c = NULL;
	if (!hdr.transit_only) {
		if (model == NULL)
			return innet_decl_error(d, "setting 'model' (a model file) is required with 'stage'");
		if ((rc = layer_from_plan(d, &hdr, &c, model, (uint32_t)stage, (uint32_t)pipe, (uint32_t)pipes,
					  (uint32_t)max_vals, nodes, n_nodes)) != 0)
			return rc;
	} else {
		c = innet_decl_conf(d, sizeof(*c));
		if (c == NULL)
			return -ENOMEM;
		*c = hdr;
	}
	ls->node = c->node;
	ls->next_node = c->next_node;
	ls->stage = c->stage;
	ls->transit_only = c->transit_only;
	ls->last = c->last;
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
	struct layer_setup *ls = priv;
	if (!ls->transit_only && !ls->last && ls->next_node == ls->node)
		return innet_cp_init_error(cp, "stages %u and %u are both on node %u; each stage needs "
					       "its own leaf", ls->stage, ls->stage + 1, ls->node);
	return innet_routes_install(cp, T_ROUTES, &ls->routes);
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
	.handle = innet_dp_dnn_layer_handle,
	.on_timer = innet_dp_dnn_layer_timer,
};

INNET_PROGRAM_REGISTER(innet_prog_dnn_layer)
