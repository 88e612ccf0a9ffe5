/*
 * acceptor.c — a Paxos acceptor as a switch program (Trio, SERIAL): its
 * control source (settings, registers, the learner group, the join flag).
 * The handler is acceptor_dp.c; acceptor.h is what the two share.
 *
 * State: a ring of `ring` slots; instance i lives in slot i % ring. Each slot
 * holds (registers, one element per slot):
 *
 *   inst    i + 1 of the instance stored there (0 = never used)
 *   rnd     the highest ballot promised for it
 *   vrnd    the ballot of the vote (0 = not voted)
 *   vlen, req, value   the voted value (up to PAXOS_VALUE_MAX bytes)
 *
 * plus global registers: promised (a phase-1 promise covering every
 * instance, from a 1A with PAXOS_F_RANGE), trim (every instance below it was
 * delivered by every learner), hi (1 + highest instance a 2A named, voted or
 * refused as ring_full: learners recover up to it), and lwm[]
 * (each learner's reported watermark; trim = min of them).
 *
 * The ring rule: an instance i is accepted only in the window
 * trim <= i < trim + ring. So a slot is reused for i only when its previous
 * occupant i - ring is below trim — delivered by every learner — and never
 * while undecided or untrimmed. Below the window: NACK/trimmed; above it:
 * NACK/ring_full (the proposer retries after learners trim).
 *
 *   2A(b, i, v): b >= max(rnd[i], promised) -> rnd = vrnd = b, value = v;
 *                2B to the learner group (group 0). Else NACK/ballot.
 *   1A(b, i):    b >= max(rnd[i], promised) -> rnd = b (promised = b with
 *                RANGE); 1B back with vrnd and value. Else NACK/ballot.
 *   RECOVER(i):  2B back with the vote (status empty if none).
 *   TRIM(l, w):  lwm[l] = max(lwm[l], w); trim = max(trim, min(lwm)).
 *   READ:        READ_ACK back with max(hi, join_inst) (a read round: the
 *                highest bound of a majority is above every chosen instance).
 *
 * Why Trio and SERIAL: a vote spans several registers (rnd, vrnd, value up to
 * PAXOS_VALUE_MAX = INNET_PKT_MAX - 56 bytes: over a thousand register
 * words). That is far beyond a PISA pass (48 stateful operations) and beyond any Tofino SRAM word, whereas a Trio PFE
 * thread runs to completion over shared memory. The invariant "value and
 * vrnd change together, only if b >= rnd" spans those registers, so all of an
 * acceptor's packets are handled by one worker (INNET_PROG_SERIAL) rather
 * than a per-slot version with CAS: a CAS-locked slot would need a retry loop
 * (unbounded, not allowed in a handler) or a drop on contention. It costs
 * nothing in the common case: all 2As come from the coordinator, one flow,
 * which the runtime would put on one worker anyway. (On the XDP target the
 * kernel runs the handler on the CPU of each port's receive queue, so
 * packets from different ports are not serialised there: docs/xdp.md,
 * "Limits".)
 *
 * Anti-spoofing: with "check_peer" (default true) a packet must come from the
 * peer address of the port it arrived on — the node at the other end of that
 * link (uRPF-style); others are dropped as "spoofed".
 *
 * Restart with lost state ("join": true): an acceptor that comes back empty
 * may have voted or promised before it died; answering as if it had not
 * could let two values be chosen. It therefore starts silent: every 1A, 2A
 * and RECOVER gets NACK/joining (it votes, promises and reports nothing).
 * The control plane completes the join (docs/consensus.md, "Acceptor
 * restart") by writing join_inst J and join_ballot JB, then joining = 0;
 * from then on instances below J still get NACK/joining (it may have voted
 * there) and ballots below JB are refused as if promised (it may have
 * promised them).
 *
 * Settings: "id" (0..63, this acceptor's id, required), "ring" (slots,
 * default 1024), "learners" ([port, ...]: the 2B group), "learner_udp" (UDP
 * port of learners, default 34953), "trim_learners" (how many learner ids
 * report watermarks; default: the number of learner ports), "check_peer",
 * "join" (start silent, as above; default false).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "consensus/acceptor.h"
#include "consensus/wire.h"

static const char *const acc_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "bad_length",
	"unexpected_type", "spoofed", "bad_learner", "bad_ballot",
};

/* Control-side state: the settings init needs (handlers never see it). */
struct acc_priv {
	uint16_t learners[INNET_MAX_GROUP_MEMBERS]; /* ports of the 2B group */
	uint32_t n_learners;
	uint16_t learner_udp;                      /* learners' UDP port */
	bool join;                                 /* start silent (joining = 1) */
};

static int acc_setup(struct innet_decl *d, struct innet_args *a)
{
	struct acc_priv *pv = calloc(1, sizeof(*pv));
	if (pv == NULL)
		return -ENOMEM;
	innet_decl_priv(d, pv);
	struct acc_conf *c = innet_decl_conf(d, sizeof(*c));
	if (c == NULL)
		return -ENOMEM;
	uint64_t id, ring, udp, tl, ports[INNET_MAX_GROUP_MEMBERS];
	int rc;
	if ((rc = innet_args_u64(a, "id", UINT64_MAX, 0, UINT64_MAX, &id)) != 0)
		return rc;
	if (id == UINT64_MAX)
		return innet_decl_error(d, "setting 'id' (this acceptor's id, 0..%u) is required",
					PAXOS_MAX_ACCEPTORS - 1);
	if (id >= PAXOS_MAX_ACCEPTORS)
		return innet_decl_error(d, "setting 'id' = %lu is out of range [0, %u]",
					(unsigned long)id, PAXOS_MAX_ACCEPTORS - 1);
	if ((rc = innet_args_u64(a, "ring", 1024, 1, 65536, &ring)) != 0 ||
	    (rc = innet_args_u64(a, "learner_udp", 34953, 1, 65535, &udp)) != 0 ||
	    (rc = innet_args_u64_array(a, "learners", ports, INNET_MAX_GROUP_MEMBERS,
				       &pv->n_learners)) != 0 ||
	    (rc = innet_args_bool(a, "check_peer", true, &c->check_peer)) != 0 ||
	    (rc = innet_args_bool(a, "join", false, &pv->join)) != 0)
		return rc;
	for (uint32_t i = 0; i < pv->n_learners; i++) {
		if (ports[i] >= INNET_MAX_PORTS)
			return innet_decl_error(d, "learners[%u] = %lu is not a port number", i,
						(unsigned long)ports[i]);
		pv->learners[i] = (uint16_t)ports[i];
	}
	if ((rc = innet_args_u64(a, "trim_learners", pv->n_learners ? pv->n_learners : 1, 1,
				 ACC_MAX_LEARNERS, &tl)) != 0)
		return rc;
	c->id = (uint16_t)id;
	c->ring = (uint32_t)ring;
	c->trim_learners = (uint32_t)tl;
	pv->learner_udp = (uint16_t)udp;
	if ((rc = innet_decl_reg(d, ACC_R_INST, "inst", 8, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_RND, "rnd", 4, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_VRND, "vrnd", 4, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_VLEN, "vlen", 2, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_REQ, "req", 8, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_VALUE, "value", PAXOS_VALUE_MAX, c->ring)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_PROMISED, "promised", 4, 1)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_TRIM, "trim", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_HI, "hi", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_LWM, "lwm", 8, c->trim_learners)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_JOINING, "joining", 1, 1)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_JOIN_INST, "join_inst", 8, 1)) != 0 ||
	    (rc = innet_decl_reg(d, ACC_R_JOIN_BALLOT, "join_ballot", 4, 1)) != 0)
		return rc;
	return innet_decl_groups(d, 1);
}

static int acc_init(struct innet_cp *cp, void *priv)
{
	struct acc_priv *pv = priv;
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	for (uint32_t i = 0; i < pv->n_learners; i++) {
		if (pv->learners[i] >= n_ports) {
			return innet_cp_init_error(cp, "learner port %u does not exist (%u ports)",
						   pv->learners[i], n_ports);
		}
		m[i] = (struct innet_member){ .port = pv->learners[i], .udp = pv->learner_udp };
	}
	int rc = innet_cp_reg_write(cp, ACC_R_JOINING, 0, pv->join ? 1 : 0);
	if (rc != 0)
		return rc;
	return innet_cp_group_set(cp, 0, m, pv->n_learners);
}

const struct innet_program innet_prog_paxos_acceptor = {
	.name = "paxos_acceptor",
	.summary = "Paxos acceptor: ballots and votes in a ring of slots, reused only below the learners' trim",
	.model = INNET_MODEL_TRIO,
	.flags = INNET_PROG_SERIAL,
	.parse_bytes = PAXOS_HDR_LEN,
	.drop_reasons = acc_drop_names,
	.n_drop_reasons = sizeof(acc_drop_names) / sizeof(acc_drop_names[0]),
	.setup = acc_setup,
	.init = acc_init,
	.handle = innet_dp_paxos_acceptor_handle,
};

INNET_PROGRAM_REGISTER(innet_prog_paxos_acceptor)
