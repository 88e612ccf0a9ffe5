/*
 * dnn/layer.h — what the DNN layer program's two sources share: its state
 * ids, drop reasons and config block. layer_dp.c (the data path: handler,
 * slot reclaim timer) reads the block; layer.c (settings, the model and plan,
 * setup, init) fills it in. The program is described in layer_dp.c.
 */
#ifndef INNET_DNN_LAYER_H
#define INNET_DNN_LAYER_H

#include "innet/dp.h"
#include "innet/dnn.h"

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

/*
 * The config block: everything the handler reads, plain data (no pointers).
 * This pipeline's weights and biases follow the struct, in data[], at the
 * byte offsets below (the layer_*() accessors):
 *
 *   data: | weights int8 [units][per_unit_w] | pad to 4 | biases int32 [units] |
 *         | wt int8 [per_unit_w][units] | pad to 4 | wd int32 [units][per_unit_w] (dense) |
 */
struct layer_conf {
	uint16_t node;                    /* this switch */
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
	uint64_t chunk_ops[LAYER_MAX_CHUNKS]; /* dense: ALU operations per input chunk */
	/* ALU operations of one product by weight w, indexed by its byte: one
	 * shift and one add per set bit of |w|, and a negation for w < 0 */
	uint8_t shift_cost[256];
	/* Where the arrays are in data[] (bytes). */
	uint32_t off_weights;             /* [units][per_unit_w], as in the model */
	uint32_t off_biases;              /* [units] */
	uint32_t off_wt;                  /* conv2d: the weights as [in.c][kh][kw][units] */
	uint32_t off_wd;                  /* dense: the weights widened, [units][per_unit_w] */
	uint8_t data[] __attribute__((aligned(8)));
};

static inline const int8_t *layer_weights(const struct layer_conf *c)
{
	return (const int8_t *)(c->data + c->off_weights);
}

static inline const int32_t *layer_biases(const struct layer_conf *c)
{
	return (const int32_t *)(const void *)(c->data + c->off_biases);
}

static inline const int8_t *layer_wt(const struct layer_conf *c)
{
	return (const int8_t *)(c->data + c->off_wt);
}

static inline const int32_t *layer_wd(const struct layer_conf *c)
{
	return (const int32_t *)(const void *)(c->data + c->off_wd);
}

INNET_DATAPATH_DECL(dnn_layer);

#endif /* INNET_DNN_LAYER_H */
