/*
 * topology_routes.c — a topology's routes: shortest paths from every switch
 * to every node (breadth-first; hosts end paths, they never carry them), the
 * equal-cost next hops (ECMP) of each, and what a switch of the topology is
 * given at start — its innet_switch_conf, with "routes": "auto" in a
 * program's args replaced by its routes (innet/topology.h). The parser is
 * topology.c (with topology_json.c and topology_resolve.c).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "innet/metrics.h"
#include "innet/topology.h"
#include "topology/topology_pvt.h"

#define UNREACHABLE UINT32_MAX

/* ------------------------------------------------------------------------ */
/* Routes.                                                                   */

/* Hops from start to every node (UNREACHABLE if none); only switches carry
 * paths onward. queue has room for n_nodes entries. */
static void bfs(const struct innet_topology *t, uint32_t start, uint32_t *dist, uint32_t *queue)
{
	uint32_t head = 0, tail = 0;

	for (uint32_t i = 0; i < t->n_nodes; i++)
		dist[i] = UNREACHABLE;
	dist[start] = 0;
	queue[tail++] = start;
	while (head < tail) {
		uint32_t u = queue[head++];
		const struct innet_topo_node *n = &t->nodes[u];
		if (n->kind != INNET_TOPO_SWITCH)
			continue; /* hosts end paths, even the one they start */
		for (uint32_t k = 0; k < n->n_links; k++) {
			const struct innet_topo_link *l = &t->links[n->links[k]];
			uint32_t v = l->a == u ? l->b : l->a;
			if (dist[v] == UNREACHABLE) {
				dist[v] = dist[u] + 1;
				queue[tail++] = v;
			}
		}
	}
}

/* dist[port * n_nodes + v]: hops from the peer of each port of switch sw to
 * v. NULL on ENOMEM. */
static uint32_t *port_distances(const struct innet_topology *t, uint32_t sw)
{
	const struct innet_topo_node *n = &t->nodes[sw];
	uint32_t np = n->conf->n_ports;
	uint32_t *dist = calloc((size_t)np * t->n_nodes + 1, sizeof(*dist));
	uint32_t *queue = calloc(t->n_nodes + 1, sizeof(*queue));

	if (dist != NULL && queue != NULL)
		for (uint32_t k = 0; k < np; k++)
			bfs(t, n->peers[k].node, dist + (size_t)k * t->n_nodes, queue);
	free(queue);
	if (queue == NULL) {
		free(dist);
		return NULL;
	}
	return dist;
}

/* Next hops from sw to dst given port_distances(). */
static uint32_t pick_hops(const struct innet_topology *t, uint32_t sw, uint32_t dst,
			  const uint32_t *dist, uint16_t *ports, uint32_t max)
{
	uint32_t np = t->nodes[sw].conf->n_ports, best = UNREACHABLE, n = 0;

	if (dst == sw)
		return 0;
	for (uint32_t k = 0; k < np; k++)
		if (dist[(size_t)k * t->n_nodes + dst] < best)
			best = dist[(size_t)k * t->n_nodes + dst];
	if (best == UNREACHABLE)
		return 0;
	for (uint32_t k = 0; k < np; k++) {
		if (dist[(size_t)k * t->n_nodes + dst] != best)
			continue;
		if (n < max)
			ports[n] = (uint16_t)k;
		n++;
	}
	return n;
}

int innet_topology_next_hops(const struct innet_topology *t, uint32_t sw, uint32_t dst,
			     uint16_t *ports, uint32_t max)
{
	if (sw >= t->n_nodes || t->nodes[sw].kind != INNET_TOPO_SWITCH || dst >= t->n_nodes)
		return -EINVAL;
	uint32_t *dist = port_distances(t, sw);
	if (dist == NULL)
		return -ENOMEM;
	uint32_t n = pick_hops(t, sw, dst, dist, ports, max);
	free(dist);
	return (int)n;
}

/* The "routes" array for switch sw, or NULL on ENOMEM. */
static json_t *routes_json(const struct innet_topology *t, uint32_t sw)
{
	uint16_t hops[INNET_MAX_PORTS];
	uint32_t *dist = port_distances(t, sw);
	json_t *routes = json_array();

	if (dist == NULL || routes == NULL)
		goto err;
	for (uint32_t d = 0; d < t->n_nodes; d++) {
		uint32_t n = pick_hops(t, sw, d, dist, hops, INNET_MAX_PORTS);
		if (n == 0)
			continue;
		/* (not json_pack: it leaks when an insert fails) */
		json_t *r = json_object(), *ports = json_array();
		if (json_array_append_new(routes, r) < 0 ||
		    json_object_set_new(r, "node", json_integer(t->nodes[d].node_id)) < 0) {
			json_decref(ports);
			goto err;
		}
		if (json_object_set_new(r, "ports", ports) < 0) /* frees ports on failure */
			goto err;
		for (uint32_t k = 0; k < n; k++)
			if (json_array_append_new(ports, json_integer(hops[k])) < 0)
				goto err;
	}
	free(dist);
	return routes;
err:
	free(dist);
	json_decref(routes);
	return NULL;
}

/* args_json for switch sw with "routes": "auto" expanded; NULL on ENOMEM. */
static char *expand_args(const struct innet_topology *t, uint32_t sw, const char *args)
{
	json_t *o = json_loads(args, 0, NULL);
	char *out = NULL;

	if (o == NULL)
		return NULL;
	json_t *r = json_object_get(o, "routes");
	if (json_is_string(r) && !strcmp(json_string_value(r), "auto") &&
	    json_object_set_new(o, "routes", routes_json(t, sw)) < 0)
		goto out;
	out = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
out:
	json_decref(o);
	return out;
}

int innet_topology_switch_conf(const struct innet_topology *t, const char *sw,
			       struct innet_switch_conf *out, char *err, size_t errlen)
{
	char msg[512];
	int idx = innet_topology_find(t, sw);

	if (idx < 0 || t->nodes[idx].kind != INNET_TOPO_SWITCH) {
		snprintf(msg, sizeof(msg), "%.160s: no switch called '%.80s'", t->origin, sw);
		topo_set_err(err, errlen, msg);
		return -ENOENT;
	}
	*out = *t->nodes[idx].conf;
	for (uint32_t i = 0; i < out->n_progs; i++)
		out->progs[i].args_json = NULL;
	for (uint32_t i = 0; i < out->n_progs; i++) {
		const char *args = t->nodes[idx].conf->progs[i].args_json;
		if (args == NULL)
			continue;
		out->progs[i].args_json = expand_args(t, (uint32_t)idx, args);
		if (out->progs[i].args_json == NULL) {
			innet_topology_conf_release(out);
			topo_set_err(err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

void innet_topology_conf_release(struct innet_switch_conf *conf)
{
	innet_topology_progs_release(conf->progs, conf->n_progs);
}

