/*
 * fuzz_topology.c — libFuzzer target: arbitrary text through the topology
 * parser (innet/topology.h), then every switch's configuration produced from
 * it ("routes": "auto" expanded) and released.
 *
 * Invariants: a refused text comes with a message; an accepted topology is
 * consistent (counts, node and link indices, peers, ports within limits);
 * each switch's configuration is within the limits innet_switch_create
 * enforces and its program settings are JSON objects; releasing is
 * idempotent; an unknown switch name is -ENOENT. Nothing is bound or
 * started: the target never creates a switch.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/topology.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_topology: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_conf(const struct innet_switch_conf *c)
{
	CHECK(c->n_ports <= INNET_MAX_PORTS);
	CHECK(c->n_progs <= INNET_TOPO_MAX_PROGS);
	CHECK(memchr(c->name, '\0', sizeof(c->name)) != NULL);
	CHECK(memchr(c->ctl_path, '\0', sizeof(c->ctl_path)) != NULL);
	for (uint32_t p = 0; p < c->n_ports; p++) {
		const struct innet_link_conf *l = &c->ports[p].link;
		CHECK(l->loss >= 0 && l->loss <= 1);
		CHECK(l->dup >= 0 && l->dup <= 1);
		CHECK(l->reorder >= 0 && l->reorder <= 1);
		for (uint32_t q = 0; q < p && c->ports[p].iface[0] == '\0'; q++)
			CHECK(c->ports[q].ip != c->ports[p].ip);   /* (raw ports have none) */
	}
	for (uint32_t i = 0; i < c->n_progs; i++) {
		const struct innet_prog_conf *pc = &c->progs[i];
		CHECK(pc->program != NULL);
		CHECK((pc->n_udp >= 1 || pc->raw) && pc->n_udp <= INNET_MAX_PROG_UDP);
		if (pc->args_json != NULL) {
			json_error_t jerr;
			json_t *v = json_loads(pc->args_json, 0, &jerr);
			CHECK(v != NULL);
			CHECK(json_is_object(v));
			json_decref(v);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 1 << 16)
		return 0;
	char *text = malloc(size + 1);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	static char err[8192];
	err[0] = '\0';
	struct innet_topology *t = innet_topology_parse(text, "fuzz.json", err, sizeof(err));
	free(text);
	if (t == NULL) {
		CHECK(err[0] != '\0');
		return 0;
	}
	CHECK(t->n_nodes == t->n_switches + t->n_hosts);
	for (uint32_t i = 0; i < t->n_nodes; i++) {
		const struct innet_topo_node *n = &t->nodes[i];
		CHECK(n->kind == (i < t->n_switches ? INNET_TOPO_SWITCH : INNET_TOPO_HOST));
		CHECK(n->node_id != 0);
		CHECK(innet_topology_find(t, n->name) == (int)i);
		for (uint32_t k = 0; k < n->n_links; k++)
			CHECK(n->links[k] < t->n_links);
		if (n->kind == INNET_TOPO_SWITCH) {
			CHECK(n->conf != NULL);
			for (uint32_t p = 0; p < n->conf->n_ports; p++) {
				CHECK(n->peers[p].node < t->n_nodes);
				CHECK(n->peers[p].link < t->n_links);
			}
		}
	}
	for (uint32_t l = 0; l < t->n_links; l++) {
		CHECK(t->links[l].a < t->n_nodes && t->links[l].b < t->n_nodes);
	}
	for (uint32_t i = 0; i < t->n_switches; i++) {
		static struct innet_switch_conf conf;
		memset(&conf, 0, sizeof(conf));
		int rc = innet_topology_switch_conf(t, t->nodes[i].name, &conf, err, sizeof(err));
		CHECK(rc == 0 || rc == -ENOMEM);
		if (rc == 0)
			check_conf(&conf);
		innet_topology_conf_release(&conf);
		innet_topology_conf_release(&conf); /* idempotent */
		for (uint32_t d = 0; d < t->n_nodes && t->n_nodes <= 64; d++) {
			uint16_t ports[INNET_MAX_PORTS];
			int n = innet_topology_next_hops(t, i, d, ports, INNET_MAX_PORTS);
			CHECK(n >= 0);
			for (int k = 0; k < n && k < (int)INNET_MAX_PORTS; k++)
				CHECK(ports[k] < t->nodes[i].conf->n_ports);
		}
	}
	static struct innet_switch_conf none;
	CHECK(innet_topology_switch_conf(t, "no such switch, surely", &none, err, sizeof(err)) == -ENOENT);
	innet_topology_free(t);
	return 0;
}
