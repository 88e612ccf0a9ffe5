/*
 * innet/dnn.h — quantized DNN models for in-network inference (Razavi et al.,
 * "Distributed DNN Serving in the Network Data Plane", EuroP4'22).
 *
 * Three pieces, all pure (no threads, no sockets):
 *
 *   model   the versioned integer model file (docs/dnn.md has the byte-level
 *           spec): conv2d, dense, ReLU, 2x2 max-pool, flatten; int8 weights,
 *           int32 biases and accumulators, power-of-two requantization.
 *           innet_dnn_model_parse() checks everything a layer program or the
 *           reference relies on (shapes, sizes, accumulator range, CRC).
 *   ref     the integer reference inference: it DEFINES the semantics; the
 *           fabric (src/dnn/layer_dp.c) must agree with it bit for bit.
 *   plan    how a model is cut into stages (one conv/dense layer plus the
 *           ReLU/pool/flatten layers after it), each stage's units (conv
 *           filters, dense neurons) divided among pipelines, and how the
 *           activations between stages are cut into packets. The compiler
 *           (innet dnn compile), the layer program and the client all call
 *           innet_dnn_plan_build() with the same inputs, so they agree.
 *
 *   model file ──parse──▶ struct innet_dnn_model ──ref──▶ logits (int32)
 *                                   │
 *                                   └──plan(pipes, max_vals)──▶ stages × pipes × packets
 *
 * Errors: actions return 0 or -errno (with a message in err where there is
 * one); nothing calls exit() or abort().
 */
#ifndef INNET_DNN_H
#define INNET_DNN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_DNN_MAGIC        "INNETDNN"   /* 8 bytes at offset 0 */
#define INNET_DNN_VERSION      1u
#define INNET_DNN_MAX_LAYERS   64u
#define INNET_DNN_MAX_DIM      4096u        /* any of C, H, W */
#define INNET_DNN_MAX_VALUES   (1u << 20)   /* elements of any activation tensor */
#define INNET_DNN_MAX_WEIGHTS  (1u << 26)   /* weights of one layer */
#define INNET_DNN_MAX_KERNEL   15u
#define INNET_DNN_MAX_SHIFT    31u
#define INNET_DNN_MAX_STAGES   16u
#define INNET_DNN_MAX_PIPES    8u

#define INNET_DNN_TESTSET_MAGIC "INNETDTS"

enum innet_dnn_layer_type {
	INNET_DNN_CONV2D = 1,
	INNET_DNN_DENSE = 2,
	INNET_DNN_RELU = 3,
	INNET_DNN_MAXPOOL2 = 4,
	INNET_DNN_FLATTEN = 5,
};

/* An activation tensor's shape, C x H x W (a vector is n x 1 x 1). Values are
 * stored and sent in CHW order: index = (c * H + h) * W + w. */
struct innet_dnn_shape {
	uint32_t c;
	uint32_t h;
	uint32_t w;
};

struct innet_dnn_layer {
	enum innet_dnn_layer_type type;
	struct innet_dnn_shape in;    /* input shape */
	struct innet_dnn_shape out;   /* output shape */
	/* conv2d and dense only: */
	uint32_t units;               /* conv: output channels; dense: neurons */
	uint32_t kh, kw;              /* conv kernel (dense: 1, 1) */
	uint32_t stride, pad;         /* conv (dense: 1, 0) */
	uint32_t shift;               /* requantization shift (0..31) */
	const int8_t *weights;        /* conv [units][in.c][kh][kw]; dense [units][in_n] */
	const int32_t *biases;        /* [units] */
	uint32_t n_weights;
	uint64_t weight_bits_set;     /* sum of popcount(|w|): shift-and-add operations */
};

struct innet_dnn_model {
	uint32_t version;
	struct innet_dnn_shape in;    /* input shape */
	uint32_t n_classes;           /* outputs of the last (dense) layer */
	uint32_t n_layers;
	struct innet_dnn_layer layers[INNET_DNN_MAX_LAYERS];
	uint32_t crc;                 /* CRC-32 of the file (its trailer) */
	uint8_t *blob;                /* the file's bytes (weights point into it) */
	size_t blob_len;
};

/* Parse a model file's bytes (copied). Returns 0 and fills *m (release with
 * innet_dnn_model_free), or -EINVAL with a one-line reason in err (offset and
 * field named), or -ENOMEM. Never reads outside [data, data + len). */
int innet_dnn_model_parse(const void *data, size_t len, struct innet_dnn_model *m, char *err,
			  size_t errlen);
/* Read and parse the file at path. -errno from reading it, else as parse; err
 * starts with the path. */
int innet_dnn_model_load(const char *path, struct innet_dnn_model *m, char *err, size_t errlen);
/* Free what parse/load allocated and zero *m (idempotent). */
void innet_dnn_model_free(struct innet_dnn_model *m);

/* Number of elements of a shape. */
static inline uint32_t innet_dnn_shape_n(struct innet_dnn_shape s)
{
	return s.c * s.h * s.w;
}

/* "conv2d", "dense", "relu", "maxpool2", "flatten", or "?". */
const char *innet_dnn_layer_name(enum innet_dnn_layer_type t);

/* CRC-32 (IEEE 802.3, as zlib's crc32) of len bytes, continuing from crc
 * (start with 0). */
uint32_t innet_dnn_crc32(uint32_t crc, const void *data, size_t len);

/* ------------------------------------------------------------------------ */
/* The reference semantics (docs/dnn.md, "Semantics").                      */

/* Requantize an accumulator: round half up by `shift` bits, saturate to int8. */
static inline int8_t innet_dnn_requant(int32_t acc, uint32_t shift)
{
	int64_t v = acc;
	if (shift > 0)
		v = (v + ((int64_t)1 << (shift - 1))) >> shift; /* arithmetic shift: floor */
	if (v > 127)
		v = 127;
	if (v < -128)
		v = -128;
	return (int8_t)v;
}

/* Run the model on one input (innet_dnn_shape_n(m->in) int8 values) and
 * write m->n_classes int32 logits; returns the class (argmax, lowest index on
 * ties), or -ENOMEM. */
int innet_dnn_ref_infer(const struct innet_dnn_model *m, const int8_t *input, int32_t *logits);
/* The class for logits (argmax, lowest index on ties). */
uint32_t innet_dnn_argmax(const int32_t *logits, uint32_t n);
/* The float reference: the model's weights and biases as floats, float
 * activations, each requantization replaced by the exact scaling acc / 2^shift
 * (no rounding, no saturation) — the computation the integer model rounds.
 * Writes m->n_classes float logits; returns the class (argmax, lowest index on
 * ties) or -ENOMEM. For timing and agreement figures, not for bit-exactness. */
int innet_dnn_ref_infer_float(const struct innet_dnn_model *m, const int8_t *input, float *logits);

/* ------------------------------------------------------------------------ */
/* Test sets (docs/dnn.md, "Test set file").                                */

struct innet_dnn_testset {
	struct innet_dnn_shape in;    /* shape of each input */
	uint32_t count;               /* samples */
	uint8_t *labels;              /* [count] */
	int8_t *inputs;               /* [count][shape_n(in)] */
};

int innet_dnn_testset_load(const char *path, struct innet_dnn_testset *ts, char *err, size_t errlen);
void innet_dnn_testset_free(struct innet_dnn_testset *ts);

/* ------------------------------------------------------------------------ */
/* Plan: stages, pipelines, packets.                                         */

/* One packet of a stage's input: values [offset, offset + n). */
struct innet_dnn_chunk {
	uint32_t offset;
	uint32_t n;
};

struct innet_dnn_pipe {
	uint32_t unit_lo, unit_hi;    /* conv filters / dense neurons [lo, hi) */
	uint32_t out_lo, out_hi;      /* the stage output values it produces [lo, hi) */
	uint32_t neurons;             /* accumulators it keeps per inference (pre-pool) */
	uint32_t seq_lo, seq_hi;      /* the next stage's input packets it sends [lo, hi) */
	uint64_t macs;                /* multiply-accumulates per inference */
	uint64_t shift_adds;          /* shift-and-add operations per inference (set bits) */
	uint64_t weight_bytes;        /* int8 weights + int32 biases it holds */
	uint64_t params;              /* weights + biases */
};

struct innet_dnn_stage {
	uint32_t layer;               /* index of its conv/dense layer */
	uint32_t post_lo, post_hi;    /* its ReLU/pool/flatten layers [lo, hi) */
	uint32_t in_n;                /* input values */
	uint32_t out_n;               /* output values (after the post layers) */
	uint32_t neurons;             /* accumulators (conv: units * out H * W, pre-pool) */
	bool last;                    /* outputs are the logits (int32, no requantization) */
	uint32_t n_pipes;
	struct innet_dnn_pipe pipes[INNET_DNN_MAX_PIPES];
	uint32_t n_chunks;            /* input packets per inference (per pipeline) */
	struct innet_dnn_chunk *chunks; /* [n_chunks], in seq order */
};

struct innet_dnn_plan {
	uint32_t n_stages;
	struct innet_dnn_stage stages[INNET_DNN_MAX_STAGES];
	uint32_t max_vals;            /* int8 values per activation packet */
};

/* Cut model m into stages and divide each stage's units among up to
 * max_pipes pipelines (evenly, the first ones taking one more when it does
 * not divide; never more pipelines than units). Activation packets carry at
 * most max_vals values. 0, or -EINVAL (model not plannable: message in err),
 * -ENOMEM. Release with innet_dnn_plan_free. */
int innet_dnn_plan_build(const struct innet_dnn_model *m, uint32_t max_pipes, uint32_t max_vals,
			 struct innet_dnn_plan *p, char *err, size_t errlen);
void innet_dnn_plan_free(struct innet_dnn_plan *p);

/* What one dnn_layer instance (src/dnn/layer.h, layer_dp.c) can hold. */
#define INNET_DNN_LAYER_MAX_CHUNKS  64u    /* input packets per inference: a 64-bit bitmap */
#define INNET_DNN_LAYER_MAX_NEURONS 16384u /* accumulators per pipeline (the paper's conv1:
                                           * 16 filters x 30 x 30 = 14,400 on 4 pipelines) */
#define INNET_DNN_LAYER_MAX_POST    8u     /* relu/maxpool2/flatten layers after a stage's layer */

/* Whether every stage and pipeline of p fits a dnn_layer instance: 0, or
 * -EINVAL with the first that does not (and what to change) in err. */
int innet_dnn_plan_check_layer(const struct innet_dnn_plan *p, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Costs and the PISA projection (innet dnn compile; docs/dnn.md).           */

/* The paper's figure for a Tofino2 pipeline: packets per second. */
#define INNET_DNN_TOFINO2_PPS 1.5e9

/* What one layer costs per inference, as the paper's Table 1 counts it
 * (conv2d and dense; zero for relu, maxpool2, flatten). MACs count every
 * kernel position, padding included (the usual convention: units x output
 * positions x weights per unit); shift_adds count one per set bit of |w| at
 * every output position. */
struct innet_dnn_layer_cost {
	uint64_t params;              /* weights + biases */
	uint64_t weight_bytes;        /* int8 weights + int32 biases */
	uint64_t acc_bytes;           /* int32 accumulators per inference (pre-pool) */
	uint64_t macs;                /* multiply-accumulates */
	uint64_t shift_adds;          /* shift-and-add operations (set bits) */
};

void innet_dnn_layer_cost(const struct innet_dnn_layer *l, struct innet_dnn_layer_cost *c);

/* A pipeline's share of one inference on a PISA switch. */
struct innet_dnn_pipe_proj {
	uint64_t ops;                 /* shift-and-adds + one accumulator update per neuron per packet */
	uint64_t passes_per_pkt;      /* ceil(ops per input packet / ops_per_pass), at least 1 */
	uint64_t recirc;              /* extra passes per inference: (passes_per_pkt - 1) x packets in */
	uint64_t pkts_out;            /* packets it emits per inference */
	double us;                    /* (packets in x passes + packets out) / pps */
};

/* The projection of a plan onto PISA pipelines of pps packets/s each: every
 * pass and every emitted packet takes one packet slot; a stage's pipelines
 * run in parallel (its time is its slowest pipeline's), stages in series for
 * latency and overlapped for throughput. Link and hop latency not included. */
struct innet_dnn_projection {
	uint32_t ops_per_pass;
	double pps;
	struct innet_dnn_pipe_proj pipes[INNET_DNN_MAX_STAGES][INNET_DNN_MAX_PIPES];
	double stage_us[INNET_DNN_MAX_STAGES];
	double latency_us;            /* sum of the stages */
	double slowest_us;            /* the slowest stage */
	double per_second;            /* inferences/s with the stages overlapped: 1 / slowest */
};

void innet_dnn_plan_project(const struct innet_dnn_plan *p, uint32_t ops_per_pass, double pps,
			    struct innet_dnn_projection *out);
/* The smallest operations-per-pass budget (1..2^20) at which the projected
 * latency is at most us; 0 if even 2^20 is not enough. */
uint32_t innet_dnn_plan_ops_for_latency(const struct innet_dnn_plan *p, double pps, double us);

/* ------------------------------------------------------------------------ */
/* The client (src/dnn/client.c): inputs through a model deployed on a       */
/* running fabric by `innet dnn compile` (`innet dnn infer|eval` use it).     */

#define INNET_DNN_CLIENT_MAX_CLASSES 256u

struct innet_dnn_client;

/* The deployment in the derived topology file (the model, its stages'
 * nodes and pipelines), seen from host `host`. NULL with errno set and the
 * reason in err (not a derived topology, a model that does not load, a host
 * not in the topology or linked to no switch). */
struct innet_dnn_client *innet_dnn_client_open(const char *topology, const char *host, char *err,
					       size_t errlen);
void innet_dnn_client_close(struct innet_dnn_client *c);
/* The deployed model (valid until close). */
const struct innet_dnn_model *innet_dnn_client_model(const struct innet_dnn_client *c);

struct innet_dnn_run_opts {
	uint32_t window;      /* inferences in flight (0: 1) */
	uint32_t timeout_ms;  /* before a try is retried with a new id (0: 300) */
	uint32_t retries;     /* tries after the first before giving up */
};

struct innet_dnn_result {
	int32_t logits[INNET_DNN_CLIENT_MAX_CLASSES];   /* n_classes of them */
	uint64_t latency_ns;  /* from the first try to the last pipeline's answer */
	uint32_t tries;
};

/* Run inputs[0..n) (innet_dnn_shape_n(model->in) int8 values each) through
 * the fabric from the host's address; results[i] for inputs[i]; *retried:
 * tries sent again. 0; -ETIMEDOUT (an input got no answer after its
 * retries), or -errno (cannot bind the host's address, send failed), with
 * the reason in err. */
int innet_dnn_client_run(struct innet_dnn_client *c, const int8_t *const *inputs, uint32_t n,
			 const struct innet_dnn_run_opts *o, struct innet_dnn_result *results,
			 uint64_t *retried, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* INNET_DNN_H */
