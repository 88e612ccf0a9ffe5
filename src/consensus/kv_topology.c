/*
 * kv_topology.c — what the KV store reads from a topology file: a replica's
 * Paxos endpoints (the coordinator and acceptors as seen from its host, its
 * learner id), which hosts are replicas and which are backup coordinators,
 * the trim group. Used by `innet kv` and `innet paxos bench`; no I/O.
 *
 * A replica is a host linked to paxos_acceptor switches and listed in their
 * "learners"; a backup coordinator is a host linked to them but not listed.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/wire.h"
#include "innet/topology.h"

/* Port of switch s whose peer is host h, or -1. */
static int port_to(const struct innet_topo_node *n, uint32_t h)
{
	for (uint32_t p = 0; p < n->conf->n_ports; p++)
		if (n->peers[p].node == h)
			return (int)p;
	return -1;
}

static bool is_prog(const struct innet_prog_conf *pr, const char *name)
{
	return !strcmp(pr->program->name, name);
}

/* True if port is in the acceptor's "learners" list. */
static bool in_learners(const struct innet_prog_conf *pr, int port)
{
	json_error_t je;
	json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
	json_t *ls = json_object_get(args, "learners");
	bool in = false;
	for (size_t i = 0; json_is_array(ls) && i < json_array_size(ls); i++)
		in |= json_integer_value(json_array_get(ls, i)) == port;
	json_decref(args);
	return in;
}

/* A backup coordinator (leader) host: linked to acceptor switches but not
 * one of their learners. */
bool kv_topology_is_leader_host(const struct innet_topology *t, uint32_t h)
{
	bool linked = false;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			int port = port_to(n, h);
			if (!is_prog(pr, "paxos_acceptor") || port < 0)
				continue;
			if (in_learners(pr, port))
				return false;
			linked = true;
		}
	}
	return linked;
}

/* The acceptors as seen from host h (the port of each acceptor switch that
 * faces h, at the program's UDP port). Returns how many. */
uint32_t kv_topology_acceptors(const struct innet_topology *t, uint32_t h, struct innet_addr *out)
{
	uint32_t n_acc = 0;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			int port = port_to(n, h);
			if (!is_prog(pr, "paxos_acceptor") || port < 0 ||
			    n_acc >= INNET_PAXOS_MAX_ACCEPTORS)
				continue;
			out[n_acc++] = (struct innet_addr){ n->conf->ports[port].ip, pr->udp[0] };
		}
	}
	return n_acc;
}

int kv_topology_paxos_conf(const struct innet_topology *t, int host, struct innet_paxos_conf *pc,
			   char *err, size_t errlen)
{
	memset(pc, 0, sizeof(*pc));
	pc->bind_ip = t->nodes[host].addr;
	int learner_id = -1;
	bool have_coord = false;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			bool coord = !strcmp(pr->program->name, "paxos_coordinator");
			bool acc = !strcmp(pr->program->name, "paxos_acceptor");
			if (!coord && !acc)
				continue;
			int port = -1;
			for (uint32_t p = 0; p < n->conf->n_ports; p++)
				if (n->peers[p].node == (uint32_t)host)
					port = (int)p;
			if (port < 0)
				continue;
			struct innet_addr a = { n->conf->ports[port].ip, pr->udp[0] };
			if (coord) {
				pc->coordinator = a;
				have_coord = true;
				continue;
			}
			if (pc->n_acceptors >= INNET_PAXOS_MAX_ACCEPTORS)
				continue;
			pc->acceptors[pc->n_acceptors++] = a;
			json_error_t je;
			json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
			json_t *lu = json_object_get(args, "learner_udp");
			pc->bind_udp = json_is_integer(lu) ? (uint16_t)json_integer_value(lu) : 34953;
			json_t *ls = json_object_get(args, "learners");
			int id = -1;
			for (size_t i = 0; json_is_array(ls) && i < json_array_size(ls); i++)
				if (json_integer_value(json_array_get(ls, i)) == port)
					id = (int)i;
			json_decref(args);
			if (id < 0 || (learner_id >= 0 && id != learner_id)) {
				snprintf(err, errlen, "%s: host %s must be in the same place of every "
					 "acceptor's \"learners\" list (switch %s)", t->origin,
					 t->nodes[host].name, n->name);
				return -EINVAL;
			}
			learner_id = id;
		}
	}
	if (!have_coord || pc->n_acceptors == 0) {
		snprintf(err, errlen, "%s: host %s needs a link to a paxos_coordinator switch and "
			 "to paxos_acceptor switches", t->origin, t->nodes[host].name);
		return -EINVAL;
	}
	pc->learner_id = (uint16_t)learner_id;
	pc->proposer_id = (uint8_t)(learner_id + 1);
	/* Backup coordinators: leader hosts, at their address and the
	 * acceptors' Paxos UDP port (where `innet kv leader` binds). */
	for (uint32_t b = t->n_switches; b < t->n_nodes; b++)
		if (b != (uint32_t)host && kv_topology_is_leader_host(t, b) && pc->n_backups < INNET_PAXOS_MAX_BACKUPS)
			pc->backups[pc->n_backups++] = (struct innet_addr){ t->nodes[b].addr,
									    pc->acceptors[0].udp };
	return 0;
}

uint32_t kv_window_default(uint32_t entry_max)
{
	if (entry_max == 0 || entry_max >= PAXOS_VALUE_MAX)
		return KV_WINDOW_DEFAULT;
	uint32_t w = (KV_WINDOW_DEFAULT * PAXOS_VALUE_MAX + entry_max - 1) / entry_max;
	return w < KV_MAX_WINDOW ? w : KV_MAX_WINDOW;
}

/* Leader hosts get proposer ids 0xfe, 0xfd, ... in topology order, so two
 * backups never use the same ballot. */
uint8_t kv_topology_leader_id(const struct innet_topology *t, uint32_t h)
{
	uint32_t k = 0;
	for (uint32_t b = t->n_switches; b < h; b++)
		k += kv_topology_is_leader_host(t, b);
	return (uint8_t)(0xfe - (k < 0x80 ? k : 0x7f));
}


/* The learner ids the acceptors keep a watermark for (their
 * "trim_learners", default the length of "learners"): the replicas. */
uint32_t kv_topology_trim_learners(const struct innet_topology *t)
{
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			if (!is_prog(pr, "paxos_acceptor"))
				continue;
			json_error_t je;
			json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
			json_t *tl = json_object_get(args, "trim_learners");
			size_t k = json_is_integer(tl) ? (size_t)json_integer_value(tl)
						       : json_array_size(json_object_get(args, "learners"));
			json_decref(args);
			return k > 64 ? 64 : (uint32_t)k;
		}
	}
	return 0;
}

/* The replicas of a topology: hosts linked to a paxos_acceptor switch. */
bool kv_topology_is_replica(const struct innet_topology *t, uint32_t h)
{
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		bool acc = false;
		for (uint32_t g = 0; g < n->conf->n_progs; g++)
			acc |= !strcmp(n->conf->progs[g].program->name, "paxos_acceptor");
		for (uint32_t p = 0; acc && p < n->conf->n_ports; p++)
			if (n->peers[p].node == h)
				return true;
	}
	return false;
}


uint32_t kv_topology_entry_max(const struct innet_topology *t)
{
	if (!t->netns)
		return 0;
	uint32_t mtu = 0;
	for (uint32_t i = 0; i < t->n_links; i++)
		if (t->links[i].mtu != 0 && (mtu == 0 || t->links[i].mtu < mtu))
			mtu = t->links[i].mtu;
	uint32_t over = 20 + 8 + PAXOS_HDR_LEN; /* IPv4, UDP, innet + Paxos headers */
	if (mtu == 0 || mtu <= over + 512)
		return mtu == 0 ? 0 : 512;
	uint32_t m = mtu - over;
	return m < PAXOS_VALUE_MAX ? m : 0;
}
