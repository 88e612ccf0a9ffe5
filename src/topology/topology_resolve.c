/*
 * topology_resolve.c — what a topology file without errors resolves to
 * (step 4 of topology.c's parse): automatic addresses from addr_base, peers,
 * port names, seeds and emulation flags; in netns mode (docs/topology.md),
 * each end's device name and MAC, and the fabric's addresses moved from
 * 127/8 to 10/8; and the check that two switches of one machine do not
 * serve metrics on one TCP port. innet_topology_netns_name, _mac and _dev
 * name what netns.c creates.
 *
 * No state of its own: everything lives in the caller's struct parser
 * (topology_pvt.h) and its topology.
 */
#include <errno.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "innet/metrics.h"
#include "innet/topology.h"
#include "topology/topology_pvt.h"

/* ------------------------------------------------------------------------ */
/* Resolution (only for a file without errors).                              */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The next free automatic address after *next. */
static int alloc_addr(struct parser *p, uint32_t *next, uint32_t *out)
{
	for (;;) {
		uint32_t ip = ++*next;
		if (ip == 0 || (!p->t->external_addrs && !topo_is_loopback(ip))) {
			topo_errs_add(&p->e, "$.addr_base", "ran out of automatic addresses%s",
				      p->t->external_addrs ? "" : " in 127.0.0.0/8");
			return -EINVAL;
		}
		if ((ip & 0xff) == 0 || (ip & 0xff) == 0xff || topo_addr_taken(p, ip))
			continue;
		*out = ip;
		return 0;
	}
}

/* Port addresses, peers, names, seeds and emulation flags. */
int topo_resolve(struct parser *p)
{
	struct innet_topology *t = p->t;
	uint32_t next = t->addr_base;

	for (uint32_t li = 0; li < t->n_links; li++) {
		struct innet_topo_link *l = &t->links[li];
		uint32_t ends[2] = { l->a, l->b }, ports[2] = { l->a_port, l->b_port };
		uint32_t given[2] = { p->a_addr[li], p->b_addr[li] };
		for (int s = 0; s < 2; s++) {
			if (ports[s] == INNET_TOPO_NO_PORT)
				continue;
			struct innet_port_conf *pc = &t->nodes[ends[s]].conf->ports[ports[s]];
			if (pc->iface[0] != '\0')
				continue; /* a raw port: no address, no emulation */
			pc->ip = given[s];
			if (pc->ip == 0 && alloc_addr(p, &next, &pc->ip) < 0)
				return -EINVAL;
			pc->link = l->emu;
			pc->link.seed = splitmix64(t->seed ^ (((uint64_t)li << 1) | (uint64_t)s));
		}
	}
	for (uint32_t i = 0; i < t->n_switches; i++) {
		struct innet_topo_node *n = &t->nodes[i];
		struct innet_switch_conf *c = n->conf;
		c->seed = splitmix64(t->seed + n->node_id);
		for (uint32_t k = 0; k < c->n_ports; k++) {
			struct innet_port_conf *pc = &c->ports[k];
			const struct innet_topo_peer *pe = &n->peers[k];
			const struct innet_topo_node *peer = &t->nodes[pe->node];
			uint32_t dup = 1;
			for (uint32_t j = 0; j < k; j++)
				dup += n->peers[j].node == pe->node;
			if (dup == 1)
				snprintf(pc->name, sizeof(pc->name), "%s", peer->name);
			else
				snprintf(pc->name, sizeof(pc->name), "%.48s#%u", peer->name, dup);
			pc->peer_ip = peer->kind == INNET_TOPO_HOST ? peer->addr
								    : peer->conf->ports[pe->port].ip;
			if (pc->iface[0] != '\0')
				pc->peer_ip = 0; /* frames go out of the interface as they are */
			if (innet_link_faulty(&pc->link)) {
				pc->link.on_egress = true;
				pc->link.on_ingress = peer->kind == INNET_TOPO_HOST;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Netns mode.                                                               */


void innet_topology_netns_name(const struct innet_topology *t, uint32_t node, char *out, size_t len)
{
	snprintf(out, len, "innet-%s-%s", t->name, t->nodes[node].name);
}

void innet_topology_mac(uint16_t node_id, uint32_t index, uint8_t mac[6])
{
	mac[0] = 0x02;   /* locally administered, unicast */
	mac[1] = 0x69;
	mac[2] = 0x6e;
	mac[3] = (uint8_t)(node_id >> 8);
	mac[4] = (uint8_t)node_id;
	mac[5] = (uint8_t)index;
}

/* Index of link li among node's links (a host's device number). */
static uint32_t link_index(const struct innet_topo_node *n, uint32_t li)
{
	for (uint32_t j = 0; j < n->n_links; j++)
		if (n->links[j] == li)
			return j;
	return 0;
}

void innet_topology_dev(const struct innet_topology *t, uint32_t node, uint32_t li, char *out,
			size_t len)
{
	const struct innet_topo_node *n = &t->nodes[node];
	const struct innet_topo_link *l = &t->links[li];
	if (n->kind == INNET_TOPO_HOST) {
		snprintf(out, len, "eth%u", link_index(n, li));
		return;
	}
	uint32_t port = l->a == node ? l->a_port : l->b_port;
	const struct innet_port_conf *pc = &n->conf->ports[port];
	if (pc->iface[0] != '\0')
		snprintf(out, len, "%s", pc->iface);
	else
		snprintf(out, len, "p%u", port);
}

/* The MAC of node's end of link li: a switch's port index, a host's link
 * index (node ids are unique, so MACs are). */
static void end_mac(const struct innet_topology *t, uint32_t node, uint32_t li, uint8_t mac[6])
{
	const struct innet_topo_node *n = &t->nodes[node];
	const struct innet_topo_link *l = &t->links[li];
	uint32_t idx = n->kind == INNET_TOPO_HOST ? link_index(n, li)
						  : (l->a == node ? l->a_port : l->b_port);
	innet_topology_mac(n->node_id, idx, mac);
}

/* 127.a.b.c -> 10.a.b.c: a loopback address cannot leave lo, so in netns
 * mode the fabric's addresses move to 10.0.0.0/8, one for one. */
static uint32_t netns_addr(uint32_t ip)
{
	return topo_is_loopback(ip) ? (10u << 24) | (ip & 0x00ffffffu) : ip;
}

/* Two switches on one machine (same "machine" tag) cannot serve metrics on
 * one TCP port of one address (0.0.0.0 takes the port on every address).
 * In netns mode each switch has a network namespace of its own: no check. */
void topo_check_metrics_unique(struct parser *p)
{
	struct innet_topology *t = p->t;
	if (t->netns)
		return;
	for (uint32_t i = 0; i < t->n_switches; i++) {
		const struct innet_topo_node *a = &t->nodes[i];
		uint32_t aip, bip;
		uint16_t aport, bport;
		char e[160];
		if (a->conf->metrics_addr[0] == '\0' ||
		    innet_metrics_addr_parse(a->conf->metrics_addr, &aip, &aport, e, sizeof(e)) != 0 ||
		    aport == 0)
			continue;
		for (uint32_t j = 0; j < i; j++) {
			const struct innet_topo_node *b = &t->nodes[j];
			if (b->conf->metrics_addr[0] == '\0' || strcmp(a->machine, b->machine) != 0 ||
			    innet_metrics_addr_parse(b->conf->metrics_addr, &bip, &bport, e,
						     sizeof(e)) != 0)
				continue;
			if (aport == bport && (aip == bip || aip == 0 || bip == 0)) {
				char pa[PATH_LEN], pb[PATH_LEN], kp[PATH_LEN];
				topo_node_path(t, i, pa);
				topo_node_path(t, j, pb);
				topo_path_key(kp, pa, "metrics");
				topo_errs_add(&p->e, kp, "metrics address %s clashes with %s.metrics (%s): "
					      "one TCP port, one machine", a->conf->metrics_addr, pb,
					      b->conf->metrics_addr);
			}
		}
	}
}

int topo_resolve_netns(struct parser *p)
{
	struct innet_topology *t = p->t;
	const struct innet_target_info *needs = NULL;   /* a target that needs devices */
	bool any_p4 = false;
	for (uint32_t i = 0; i < t->n_switches; i++) {
		const struct innet_target_info *ti = innet_target_info(t->nodes[i].target);
		if (needs == NULL && ti != NULL && ti->needs_devices)
			needs = ti;
		any_p4 |= t->nodes[i].p4;
	}
	t->netns = p->netns < 0 ? needs != NULL || any_p4 : p->netns == 1;
	if (needs != NULL && !t->netns) {
		topo_errs_add(&p->e, "$.netns", "a switch with \"target\": \"%s\" needs network devices: "
			      "\"netns\": false cannot be", needs->name);
		return 0;
	}
	if (any_p4 && !t->netns) {
		topo_errs_add(&p->e, "$.netns", "a switch with a P4 program (\"p4\") needs network "
			      "devices: \"netns\": false cannot be");
		return 0;
	}
	for (uint32_t i = 0; i < t->n_switches; i++)
		t->nodes[i].conf->target = t->nodes[i].target;
	if (!t->netns)
		return 0;
	for (uint32_t k = 0; k < t->n_nodes; k++) {
		struct innet_topo_node *n = &t->nodes[k];
		if (n->kind == INNET_TOPO_HOST) {
			n->addr = netns_addr(n->addr);
			continue;
		}
		for (uint32_t q = 0; q < n->conf->n_ports; q++) {
			struct innet_port_conf *pc = &n->conf->ports[q];
			pc->ip = netns_addr(pc->ip);
			pc->peer_ip = netns_addr(pc->peer_ip);
		}
	}
	for (uint32_t li = 0; li < t->n_links; li++) {
		const struct innet_topo_link *l = &t->links[li];
		uint32_t ends[2] = { l->a, l->b }, ports[2] = { l->a_port, l->b_port };
		for (int s = 0; s < 2; s++) {
			if (ports[s] == INNET_TOPO_NO_PORT)
				continue;
			struct innet_topo_node *n = &t->nodes[ends[s]];
			struct innet_port_conf *pc = &n->conf->ports[ports[s]];
			/* the link's faults are the kernel's here (netem on the veths,
			 * innet_topology_netns_up), not the switch's emulation */
			memset(&pc->link, 0, sizeof(pc->link));
			innet_topology_dev(t, ends[s], li, pc->dev, sizeof(pc->dev));
			end_mac(t, ends[1 - s], li, pc->peer_mac);
			pc->has_peer_mac = true;
			if (n->p4 && pc->iface[0] == '\0') {
				/* a P4 switch's port is raw: the program sees every frame;
				 * its address stays the neighbour's gateway (netns.c) */
				*(s ? &t->links[li].b_gw : &t->links[li].a_gw) = pc->ip;
				memcpy(pc->iface, pc->dev, sizeof(pc->iface));
				pc->ip = 0;
				pc->peer_ip = 0;
			}
			const struct innet_target_info *ti = innet_target_info(n->target);
			if (ti != NULL && ti->mtu_max != 0 && l->mtu > ti->mtu_max) {
				char path[PATH_LEN];
				snprintf(path, sizeof(path), "$.links[%u].mtu", li);
				char tn[16];
				size_t k = 0;
				for (; ti->name[k] != '\0' && k + 1 < sizeof(tn); k++)
					tn[k] = (char)toupper((unsigned char)ti->name[k]);
				tn[k] = '\0';
				topo_errs_add(&p->e, path, "MTU %u on a port of %s switch '%s': %s, at most MTU %u",
					      l->mtu, tn, n->name, ti->mtu_why ? ti->mtu_why : "its target's limit",
					      ti->mtu_max);
			}
		}
	}
	return 0;
}
