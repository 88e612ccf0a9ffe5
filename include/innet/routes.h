/*
 * innet/routes.h — routes to fabric nodes for data-plane programs.
 *
 * A program that forwards by the innet base header's dst_node (the forward
 * program, a DNN layer passing traffic through) takes a "routes" setting —
 * what `innet fabric` computes from the topology for "routes": "auto":
 *
 *   "routes": [{"node": N, "ports": [p, ...]},   equal-cost ports (ECMP)
 *              {"node": M, "group": G}]          replicate to multicast group G
 *
 * and keeps them in an exact-match table (key: u16 node, host order; value:
 * struct innet_route) that the control plane may change at run time. The
 * three steps share this code: parse in setup, install in init, look up per
 * packet.
 */
#ifndef INNET_ROUTES_H
#define INNET_ROUTES_H

#include <stdint.h>

#include "innet/dp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_ROUTE_MAX_PORTS 8u
#define INNET_ROUTES_MAX      4096u      /* entries in the table */
#define INNET_ROUTE_GROUP     0xFFFFu    /* innet_route.n of a multicast route */

/* A table value. */
struct innet_route {
	uint16_t n;                               /* ports in use, or INNET_ROUTE_GROUP */
	uint16_t ports[INNET_ROUTE_MAX_PORTS];    /* INNET_ROUTE_GROUP: ports[0] is the group */
} __attribute__((packed));

/* The parsed setting (kept in the program's private config until init). */
struct innet_routes {
	uint32_t n;
	uint16_t nodes[INNET_ROUTES_MAX];
	struct innet_route routes[INNET_ROUTES_MAX];
};

struct json_t;
struct innet_decl;
struct innet_cp;

/* Setup: parse the "routes" setting (the value of innet_args_json(a,
 * "routes"); NULL = none) into out. Group routes must name a group below
 * n_groups. 0, or -EINVAL with the problem reported through d. */
int innet_routes_parse(struct innet_decl *d, struct json_t *routes, uint32_t n_groups,
		       struct innet_routes *out);
/* Setup: declare the routes table as table `id`. */
int innet_routes_decl_table(struct innet_decl *d, unsigned id);
/* Init: check every port against the switch and fill table `table`. 0, or
 * -EINVAL (reported with innet_cp_init_error) / the table's error. */
int innet_routes_install(struct innet_cp *cp, unsigned table, const struct innet_routes *r);

/* What innet_route_get found. */
enum innet_route_rc {
	INNET_ROUTE_OK = 0,          /* the route, in *r */
	INNET_ROUTE_NONE = -1,       /* no route to the node */
	INNET_ROUTE_MALFORMED = -2,  /* an entry written wrongly through the control plane */
	INNET_ROUTE_BUSY = -3,       /* the table's lookup was busy (INNET_TABLE_BUSY): there
	                              * may be a route; drop as table_busy, or try later */
};

/* Per packet: the route to `node` into *r (an enum innet_route_rc). */
static inline int innet_route_get(struct innet_ctx *ctx, unsigned table, uint16_t node,
				  struct innet_route *r)
{
	int rc = innet_table_lookup(ctx, table, &node, r);
	if (rc != INNET_TABLE_OK)
		return rc == INNET_TABLE_BUSY ? INNET_ROUTE_BUSY : INNET_ROUTE_NONE;
	if (r->n != INNET_ROUTE_GROUP && (r->n == 0 || r->n > INNET_ROUTE_MAX_PORTS))
		return INNET_ROUTE_MALFORMED;
	return INNET_ROUTE_OK;
}

/* One of a port route's equal-cost ports, chosen by a flow hash (ECMP).
 * (innet_route_get checked n <= 8, so the mask changes nothing; it is there
 * for the eBPF verifier, which cannot bound a remainder.) */
_Static_assert((INNET_ROUTE_MAX_PORTS & (INNET_ROUTE_MAX_PORTS - 1)) == 0, "a power of two");
static inline uint16_t innet_route_pick(const struct innet_route *r, uint64_t hash)
{
	uint32_t i = r->n > 1 ? (uint32_t)(hash % r->n) : 0;
	innet_opaque(i);
	return r->ports[i & (INNET_ROUTE_MAX_PORTS - 1)];
}

#ifdef __cplusplus
}
#endif
#endif /* INNET_ROUTES_H */
