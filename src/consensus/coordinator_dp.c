/*
 * coordinator_dp.c — the Paxos coordinator's data path (PISA), as in P4xos:
 * it turns each client REQUEST into a phase-2A message by stamping it with
 * the next instance number and the current ballot, and multicasts it to the
 * acceptor group (group 0). It keeps no per-instance state: two registers,
 * read and fetch-added once per packet, which fits one Tofino stage.
 *
 * Drops (counted): too_short, bad_magic, bad_version, wrong_service,
 * bad_length (len != headers + vlen), bad_request (req_id 0: no-ops come
 * from leaders, not clients), unexpected_type (anything but REQUEST),
 * nacked (an acceptor refused our ballot: a newer leader exists).
 * A value longer than PAXOS_VALUE_MAX is answered with NACK/too_big.
 */
#include "innet/dp.h"
#include "consensus/coordinator.h"
#include "consensus/wire.h"

static enum innet_action coord_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct innet_hdr *h = innet_pkt_ptr(pkt, 0, PAXOS_HDR_LEN);
	if (h == NULL)
		return innet_drop(pkt, CO_TOO_SHORT);
	struct paxos_hdr *p = (struct paxos_hdr *)(h + 1);
	if (h->magic != INNET_MAGIC)
		return innet_drop(pkt, CO_BAD_MAGIC);
	if (h->version != INNET_VERSION)
		return innet_drop(pkt, CO_BAD_VERSION);
	if (h->service != INNET_SVC_PAXOS)
		return innet_drop(pkt, CO_WRONG_SERVICE);
	if (p->type == PAXOS_NACK)
		return innet_drop(pkt, CO_NACKED);
	if (p->type != PAXOS_REQUEST)
		return innet_drop(pkt, CO_UNEXPECTED_TYPE);
	uint32_t vlen = innet_be16(p->vlen);
	if (pkt->len != PAXOS_HDR_LEN + vlen)
		return innet_drop(pkt, CO_BAD_LENGTH);
	if (p->req_id == 0)
		return innet_drop(pkt, CO_BAD_REQUEST);
	innet_alu(ctx, 1); /* the length check's sum (the rest moves fields) */
	if (vlen > PAXOS_VALUE_MAX) {
		/* A clear error rather than a silent drop: the value is too big
		 * for an acceptor slot. */
		p->type = PAXOS_NACK;
		p->status = PAXOS_ST_TOO_BIG;
		p->vlen = 0;
		uint16_t s = h->src_node;
		h->src_node = h->dst_node;
		h->dst_node = s;
		innet_pkt_resize(ctx, pkt, PAXOS_HDR_LEN);
		return innet_reflect(pkt);
	}
	uint64_t inst = innet_reg_fetch_add(ctx, CO_R_NEXT, 0, 1);
	uint32_t ballot = (uint32_t)innet_reg_read(ctx, CO_R_BALLOT, 0);
	p->type = PAXOS_2A;
	p->status = PAXOS_OK;
	p->node = 0;
	p->ballot = innet_be32(ballot);
	p->vballot = 0;
	p->reserved = 0;
	p->instance = innet_be64(inst);
	p->trim = 0;
	p->hi = 0;
	h->flags = 0;
	return innet_multicast(pkt, 0);
}

INNET_DATAPATH(paxos_coordinator, coord_handle, NULL)
