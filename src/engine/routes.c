/*
 * routes.c — the "routes" setting of programs that forward by fabric node
 * (innet/routes.h): parsed in setup, installed in a table in init.
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "innet/routes.h"
#include "innet/switch.h"

int innet_routes_parse(struct innet_decl *d, json_t *routes, uint32_t n_groups, struct innet_routes *out)
{
	out->n = 0;
	if (routes == NULL)
		return 0;
	if (json_is_string(routes) && !strcmp(json_string_value(routes), "auto"))
		return innet_decl_error(d, "\"routes\": \"auto\" is resolved by innet fabric; "
					   "run this switch from its topology file");
	if (!json_is_array(routes))
		return innet_decl_error(d, "setting 'routes' must be an array of {\"node\", \"ports\"}");
	if (json_array_size(routes) > INNET_ROUTES_MAX)
		return innet_decl_error(d, "at most %u routes", INNET_ROUTES_MAX);
	size_t i;
	json_t *r;
	json_array_foreach(routes, i, r) {
		json_t *node = json_object_get(r, "node"), *ports = json_object_get(r, "ports");
		json_t *group = json_object_get(r, "group");
		if (!json_is_object(r) || !json_is_integer(node) || json_integer_value(node) < 1 ||
		    json_integer_value(node) > 65535 || json_object_size(r) != 2 ||
		    (group == NULL && (!json_is_array(ports) || json_array_size(ports) < 1 ||
				       json_array_size(ports) > INNET_ROUTE_MAX_PORTS)))
			return innet_decl_error(d, "routes[%zu] must be {\"node\": 1..65535, \"ports\": "
						   "[1..%u port numbers]} or {\"node\", \"group\"}",
						i, INNET_ROUTE_MAX_PORTS);
		struct innet_route *rt = &out->routes[out->n];
		if (group != NULL) {
			if (!json_is_integer(group) || json_integer_value(group) < 0 ||
			    json_integer_value(group) >= (json_int_t)n_groups)
				return innet_decl_error(d, "routes[%zu].group must be a declared group "
							   "(0..%u; see \"groups\")", i,
							n_groups ? n_groups - 1 : 0);
			rt->n = INNET_ROUTE_GROUP;
			rt->ports[0] = (uint16_t)json_integer_value(group);
		} else {
			size_t j;
			json_t *p;
			json_array_foreach(ports, j, p) {
				if (!json_is_integer(p) || json_integer_value(p) < 0 ||
				    json_integer_value(p) >= INNET_MAX_PORTS)
					return innet_decl_error(d, "routes[%zu].ports[%zu] is not a port number",
								i, j);
				rt->ports[j] = (uint16_t)json_integer_value(p);
			}
			rt->n = (uint16_t)json_array_size(ports);
		}
		out->nodes[out->n++] = (uint16_t)json_integer_value(node);
	}
	return 0;
}

int innet_routes_decl_table(struct innet_decl *d, unsigned id)
{
	return innet_decl_table(d, id, "routes", sizeof(uint16_t), sizeof(struct innet_route),
				INNET_ROUTES_MAX);
}

int innet_routes_install(struct innet_cp *cp, unsigned table, const struct innet_routes *r)
{
	uint32_t n_ports = innet_switch_conf(innet_cp_switch(cp))->n_ports;
	for (uint32_t i = 0; i < r->n; i++) {
		const struct innet_route *rt = &r->routes[i];
		for (uint32_t j = 0; rt->n != INNET_ROUTE_GROUP && j < rt->n; j++)
			if (rt->ports[j] >= n_ports)
				return innet_cp_init_error(cp, "route to node %u uses port %u; the switch "
							       "has %u ports", r->nodes[i], rt->ports[j],
							   n_ports);
		int rc = innet_cp_table_add(cp, table, &r->nodes[i], rt);
		if (rc != 0) {
			innet_cp_init_error(cp, "cannot install the route to node %u: %s", r->nodes[i],
					    strerror(-rc));
			return rc;
		}
	}
	return 0;
}
