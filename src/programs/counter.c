/*
 * counter.c — the example counter program (PISA): an array of 64-bit
 * counters in the switch that clients increment and read over UDP.
 *
 * Request and reply: innet base header (service = INNET_SVC_COUNTER) and a
 * struct innet_counter_hdr (wire.h). INC adds value to counter[index] and
 * replies with the new value; READ replies with the value. The reply is the
 * request turned around (op | 0x80, src/dst nodes swapped) and sent back to
 * the sender. Exactly one register operation per packet — an atomic
 * fetch-and-add or a read — so concurrent clients on several workers never
 * lose an increment.
 *
 * Settings: "size": number of counters (default 1024).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <endian.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/wire.h"

enum { R_VALUE };

enum counter_drop {
	CNT_TOO_SHORT = INNET_DROP_PROGRAM,
	CNT_BAD_MAGIC,
	CNT_BAD_VERSION,
	CNT_WRONG_SERVICE,
	CNT_IS_REPLY,
};

static const char *const counter_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "is_reply",
};

struct counter_conf {
	uint32_t size;
};

static enum innet_action counter_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct counter_conf *c = ctx->priv;
	if (pkt->len < sizeof(struct innet_hdr) + sizeof(struct innet_counter_hdr))
		return innet_drop(pkt, CNT_TOO_SHORT);
	struct innet_hdr *h = (struct innet_hdr *)pkt->data;
	struct innet_counter_hdr *ch = (struct innet_counter_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, CNT_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, CNT_BAD_VERSION);
	if (h->service != INNET_SVC_COUNTER)
		return innet_drop(pkt, CNT_WRONG_SERVICE);
	if (ch->op & INNET_COUNTER_REPLY)
		return innet_drop(pkt, CNT_IS_REPLY); /* never answer an answer */

	uint32_t idx = ntohl(ch->index);
	uint8_t op = ch->op;
	ch->status = INNET_COUNTER_OK;
	if (idx >= c->size) {
		ch->status = INNET_COUNTER_BAD_INDEX;
	} else if (op == INNET_COUNTER_INC) {
		uint64_t delta = be64toh(ch->value);
		ch->value = htobe64(innet_reg_fetch_add(ctx, R_VALUE, idx, delta) + delta);
		innet_alu(ctx, 1);
	} else if (op == INNET_COUNTER_READ) {
		ch->value = htobe64(innet_reg_read(ctx, R_VALUE, idx));
	} else {
		ch->status = INNET_COUNTER_BAD_OP;
	}
	ch->op = (uint8_t)(op | INNET_COUNTER_REPLY);
	uint16_t src = h->src_node;
	h->src_node = h->dst_node;
	h->dst_node = src;
	innet_alu(ctx, 3);
	/* Replies are exactly one header long, whatever trailed the request. */
	pkt->len = sizeof(*h) + sizeof(*ch);
	return innet_reflect(pkt);
}

static int counter_setup(struct innet_decl *d, struct innet_args *a)
{
	uint64_t size;
	int rc = innet_args_u64(a, "size", 1024, 1, 1u << 24, &size);
	if (rc != 0)
		return rc;
	struct counter_conf *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	c->size = (uint32_t)size;
	innet_decl_priv(d, c);
	return innet_decl_reg(d, R_VALUE, "value", 8, c->size);
}

const struct innet_program innet_prog_counter = {
	.name = "counter",
	.summary = "example: an array of counters clients increment and read (innet counter header)",
	.model = INNET_MODEL_PISA,
	.parse_bytes = sizeof(struct innet_hdr) + sizeof(struct innet_counter_hdr),
	.drop_reasons = counter_drop_names,
	.n_drop_reasons = sizeof(counter_drop_names) / sizeof(counter_drop_names[0]),
	.setup = counter_setup,
	.handle = counter_handle,
};
