/*
 * counter_dp.c — the counter program's data path (PISA): an array of 64-bit
 * counters in the switch that clients increment and read over UDP.
 *
 * Request and reply: innet base header (service = INNET_SVC_COUNTER) and a
 * struct innet_counter_hdr (wire.h). INC adds value to counter[index] and
 * replies with the new value; READ replies with the value. The reply is the
 * request turned around (op | 0x80, src/dst nodes swapped) and sent back to
 * the sender. Exactly one register operation per packet — an atomic
 * fetch-and-add or a read — so concurrent clients on several workers (or
 * CPUs, on XDP) never lose an increment.
 */
#include "innet/dp.h"
#include "innet/wire.h"
#include "programs/counter.h"

static enum innet_action counter_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	const struct counter_conf *c = innet_conf(ctx);
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, sizeof(*h) + sizeof(struct innet_counter_hdr));
	if (h == NULL)
		return innet_drop(pkt, CNT_TOO_SHORT);
	struct innet_counter_hdr *ch = (struct innet_counter_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, CNT_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, CNT_BAD_VERSION);
	if (h->service != INNET_SVC_COUNTER)
		return innet_drop(pkt, CNT_WRONG_SERVICE);
	if (ch->op & INNET_COUNTER_REPLY)
		return innet_drop(pkt, CNT_IS_REPLY); /* never answer an answer */

	uint32_t idx = innet_be32(ch->index);
	uint8_t op = ch->op;
	ch->status = INNET_COUNTER_OK;
	if (idx >= c->size) {
		ch->status = INNET_COUNTER_BAD_INDEX;
	} else if (op == INNET_COUNTER_INC) {
		uint64_t delta = innet_be64(ch->value);
		ch->value = innet_be64(innet_reg_fetch_add(ctx, CNT_R_VALUE, idx, delta) + delta);
		innet_alu(ctx, 2);
	} else if (op == INNET_COUNTER_READ) {
		ch->value = innet_be64(innet_reg_read(ctx, CNT_R_VALUE, idx));
	} else {
		ch->status = INNET_COUNTER_BAD_OP;
	}
	ch->op = (uint8_t)(op | INNET_COUNTER_REPLY);
	uint16_t src = h->src_node;
	h->src_node = h->dst_node;
	h->dst_node = src;
	innet_alu(ctx, 1); /* the reply bit (the rest moves fields) */
	/* Replies are exactly one header long, whatever trailed the request. */
	innet_pkt_resize(ctx, pkt, sizeof(*h) + sizeof(*ch));
	return innet_reflect(pkt);
}

INNET_DATAPATH(counter, counter_handle, NULL)
