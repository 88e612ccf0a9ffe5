/*
 * innet/topology.h — topology files: switches, hosts and the links between
 * them, parsed from JSON (docs/topology.md) into a resolved model that the
 * caller owns and reads (the innet_topology_* functions never modify it).
 *
 * Resolution does everything a running fabric needs to agree on: every switch
 * end of a link becomes a port of that switch (in link order) with a local
 * address (given, or allocated from addr_base) and the address of its peer;
 * link emulation settings move onto the switch ports that apply them; each
 * switch gets a control socket path under the state directory; programs are
 * looked up in the registry. "routes": "auto" in a program's args is replaced
 * by shortest-path next hops when a switch's configuration is produced.
 *
 *                link 0                         link 1
 *   host h0 ─────────────── port 0 ┌───────┐ port 1 ─────────────── port 0 ┌────────┐
 *   127.0.30.1     127.1.0.1 = ip  │ leaf0 │ ip = 127.1.0.2   127.1.0.3 = ip │ spine0 │
 *                  peer_ip = h0    └───────┘ peer_ip = 127.1.0.3           └────────┘
 *
 * Thread safety: none needed for reading; a topology is not shared state.
 *
 * Node indices (into t->nodes) put the switches first, in file order
 * (0 .. n_switches-1), then the hosts (n_switches .. n_nodes-1).
 *
 * Errors: innet_topology_load/parse report every problem they find, one per
 * line, as "ORIGIN: $.json.path: message" (malformed JSON as
 * "ORIGIN:LINE:COLUMN: message"). Actions return 0 or -errno.
 */
#ifndef INNET_TOPOLOGY_H
#define INNET_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/switch.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_TOPO_NAME_MAX   48u    /* longest switch/host/topology name (bytes) */
#define INNET_TOPO_MAX_PROGS  16u    /* programs per switch (innet_switch_conf.progs) */
#define INNET_TOPO_MAX_WORKERS 256u  /* worker threads per switch */
#define INNET_TOPO_NO_PORT    UINT32_MAX

enum innet_topo_kind {
	INNET_TOPO_SWITCH = 0,
	INNET_TOPO_HOST = 1,
};

/* Who is at the other end of one switch port. */
struct innet_topo_peer {
	uint32_t node;       /* index in t->nodes */
	uint32_t port;       /* its port index if it is a switch, else INNET_TOPO_NO_PORT */
	uint32_t link;       /* index in t->links */
};

struct innet_topo_node {
	char name[INNET_NAME_MAX];      /* unique across switches and hosts */
	enum innet_topo_kind kind;
	uint16_t node_id;               /* fabric node id, 1..65535, unique */
	uint32_t addr;                  /* host: its IPv4 address (host order); switch: 0 */
	char machine[INNET_NAME_MAX];   /* "machine" tag; "" = untagged */
	uint32_t *links;                /* links touching this node (indices in t->links) */
	uint32_t n_links;
	/* Switches only (NULL for hosts): */
	enum innet_target target;       /* "target" (or the file's): udp or xdp */
	bool p4;                        /* runs a P4 program ("p4", docs/p4.md): its one
	                                 * program is the raw program "p4" and, in netns
	                                 * mode, every port is raw */
	struct innet_switch_conf *conf; /* resolved conf; args_json as written ("auto"
	                                 * routes not expanded: see innet_topology_switch_conf) */
	struct innet_topo_peer *peers;  /* conf->n_ports entries, one per port */
};

struct innet_topo_link {
	uint32_t a, b;                  /* node indices of the two ends */
	uint32_t a_port, b_port;        /* port index on a / b; INNET_TOPO_NO_PORT for a host */
	struct innet_link_conf emu;     /* emulation as written (flags and seed unset) */
	uint32_t mtu;                   /* netns mode: the veth pair's MTU */
	uint32_t a_gw, b_gw;            /* netns mode, a P4 switch's end (a raw port, no
	                                 * address of its own): the address its neighbour
	                                 * routes through it, with that port's MAC; else 0 */
};

struct innet_topology {
	char name[INNET_NAME_MAX];
	char origin[4096];              /* file path (or label) it was parsed from */
	uint64_t seed;                  /* "seed" (default 1) */
	uint32_t addr_base;             /* automatic port addresses start after this */
	bool external_addrs;            /* addresses outside 127.0.0.0/8 allowed */
	char state_dir[4096];           /* absolute; default /tmp/innet-<name> */
	enum innet_target target;       /* "target": the switches' default */
	bool netns;                     /* every node in its own network namespace,
	                                 * links are veth pairs (docs/topology.md) */
	struct innet_topo_node *nodes;  /* switches first, then hosts */
	uint32_t n_nodes;
	uint32_t n_switches;
	uint32_t n_hosts;
	struct innet_topo_link *links;
	uint32_t n_links;
};

/*
 * Parse and resolve the topology file at path. On success returns the
 * topology (free with innet_topology_free). On failure returns NULL with
 * errno set (EINVAL for a bad file, or the error from reading it, or ENOMEM)
 * and every problem found in err, one per line, "PATH: $.json.path: message"
 * (truncated with "..." if errlen is too small).
 */
struct innet_topology *innet_topology_load(const char *path, char *err, size_t errlen);

/* As innet_topology_load, from JSON text; origin names it in messages and
 * is kept in t->origin. */
struct innet_topology *innet_topology_parse(const char *json_text, const char *origin, char *err,
					    size_t errlen);

/* Free a topology. NULL is allowed. */
void innet_topology_free(struct innet_topology *t);

/*
 * Netns mode (t->netns): where each node lives. A node's namespace is
 * "innet-<topology>-<node>"; a switch's port k is device "p<k>" there (a raw
 * port keeps its "a_iface"/"b_iface" name) and a host's j-th link is
 * "eth<j>"; every device's MAC is innet_topology_mac(node id, index).
 */
void innet_topology_netns_name(const struct innet_topology *t, uint32_t node, char *out, size_t len);
void innet_topology_mac(uint16_t node_id, uint32_t index, uint8_t mac[6]);
/* The device name of node's end of link li, into out (IFNAMSIZ). */
void innet_topology_dev(const struct innet_topology *t, uint32_t node, uint32_t li, char *out,
			size_t len);
/* Build the namespaces, veth pairs, addresses, neighbours and routes of a
 * netns-mode topology (root). 0 (also when t is not in netns mode), or
 * -errno with a message in err; on failure nothing is left behind. */
int innet_topology_netns_up(const struct innet_topology *t, char *err, size_t errlen);
/* Delete every namespace of topology `name` (and so its veths). Returns how
 * many were removed, or -errno. */
int innet_topology_netns_down(const char *name);
/* Move the calling thread into node's namespace (clients: innet ping --from
 * HOST). 0 or -errno (-ENOENT: the fabric is not up). */
int innet_topology_enter(const struct innet_topology *t, uint32_t node);

/* Netns mode: what the kernel's faults did on a link with emulation settings
 * (its wire: src/topology/netns.c), in one direction — toward_b: frames
 * leaving for node b, else for node a. 0; -ENOENT (no such link, or one
 * without faults), -EOPNOTSUPP (netem carries the faults: no counters),
 * or -errno. Needs root. */
struct innet_wire_stats {
	uint64_t frames;      /* frames that took the link in that direction */
	uint64_t lost;        /* dropped */
	uint64_t duplicated;  /* sent twice */
	uint64_t slowed;      /* held in the slow lane, so later frames overtook them */
};
int innet_topology_wire_stats(const struct innet_topology *t, uint32_t li, int toward_b,
			      struct innet_wire_stats *out);

/* Index in t->nodes of the switch or host called name, or -ENOENT. */
int innet_topology_find(const struct innet_topology *t, const char *name);

/*
 * Shortest-path next hops from switch sw toward node dst (both indices in
 * t->nodes): the ports of sw that start a shortest path (hosts are never
 * transit), ascending, several for equal-cost paths (ECMP). Writes up to max
 * of them into ports and returns how many there are (0 if dst is sw or
 * unreachable), or -EINVAL if sw is not a switch or dst is out of range,
 * -ENOMEM.
 */
int innet_topology_next_hops(const struct innet_topology *t, uint32_t sw, uint32_t dst,
			     uint16_t *ports, uint32_t max);

/*
 * Fill out with the configuration of the switch called sw, ready for
 * innet_switch_create(): ports, link emulation, ctl_path, seed, programs.
 * A program whose args hold "routes": "auto" gets instead
 * "routes": [{"node": ID, "ports": [P, ...]}, ...] for every other reachable
 * node, from innet_topology_next_hops(). The args_json strings are allocated:
 * release them with innet_topology_conf_release(). Returns 0, or -ENOENT
 * (no switch called sw) / -ENOMEM with a message in err.
 */
int innet_topology_switch_conf(const struct innet_topology *t, const char *sw,
			       struct innet_switch_conf *out, char *err, size_t errlen);

/* Free the args_json strings of a conf filled by innet_topology_switch_conf
 * and set them to NULL (idempotent). */
void innet_topology_conf_release(struct innet_switch_conf *conf);

#ifdef __cplusplus
}
#endif
#endif /* INNET_TOPOLOGY_H */
