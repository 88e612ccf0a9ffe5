/*
 * dnn/wire.h — the inference service's packets (docs/protocol.md, 2.4).
 *
 * After the innet base header (service INNET_SVC_DNN, dst_node = the leaf of
 * the target stage, or the client for a result):
 *
 *   0               1               2               3
 *   +---------------+---------------+---------------+---------------+
 *   |      op       |    stage      |          client_node          |
 *   +---------------+---------------+-------------------------------+
 *   |                          infer_id                             |
 *   +---------------------------------------------------------------+
 *   |                   model (CRC-32 of the model file)            |
 *   +-------------------------------+-------------------------------+
 *   |             seq               |               n               |
 *   +-------------------------------+-------------------------------+
 *   |                           offset                              |
 *   +---------------------------------------------------------------+
 *   |  ACT: n int8 activations  /  RESULT: n int32 logits (big-endian) ...
 *
 * ACT    activations [offset, offset + n) of stage `stage`'s input; seq is
 *        the packet's number among that input's packets (the plan's chunks).
 * RESULT logits [offset, offset + n) of the model's output, from pipeline
 *        `seq` of the last stage, to client_node.
 */
#ifndef INNET_DNN_WIRE_H
#define INNET_DNN_WIRE_H

#include <stdint.h>

#include "innet/wire.h"

enum innet_dnn_op {
	INNET_DNN_OP_ACT = 1,
	INNET_DNN_OP_RESULT = 2,
};

struct innet_dnn_hdr {
	uint8_t op;            /* enum innet_dnn_op */
	uint8_t stage;         /* ACT: target stage; RESULT: the last stage */
	uint16_t client_node;  /* where the result goes */
	uint32_t infer_id;     /* chosen by the client; never 0 */
	uint32_t model;        /* CRC-32 of the model file both sides use */
	uint16_t seq;          /* ACT: input packet number; RESULT: pipeline */
	uint16_t n;            /* values that follow */
	uint32_t offset;       /* index of the first value */
} __attribute__((packed));

_Static_assert(sizeof(struct innet_dnn_hdr) == 20, "dnn header is 20 bytes on the wire");
_Static_assert(sizeof(struct innet_hdr) + sizeof(struct innet_dnn_hdr) == 28, "28 bytes of headers");

#define INNET_DNN_HDRS_LEN 28u
#define INNET_DNN_UDP_DEFAULT 9300u

#endif /* INNET_DNN_WIRE_H */
