/*
 * topology_pvt.h — the topology parser's private parts, shared by its files:
 * the parser state (struct parser) and the error list (struct errs) of one
 * parse, the helpers of topology_json.c (typed JSON getters, addresses)
 * that the walk in topology.c calls, and the steps of topology_resolve.c it
 * takes once the file is known good. Not installed; nothing here is exported
 * from libinnet.so (src/libinnet.map), and the topo_ prefix keeps the names
 * apart from the rest of libinnet.a.
 *
 * No global state: a parse keeps everything in its own struct parser.
 */
#ifndef INNET_TOPOLOGY_PVT_H
#define INNET_TOPOLOGY_PVT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/topology.h"

#define PATH_LEN 256                   /* a JSON path in a message */

/* Error collection: one message per line, into the caller's buffer. */
struct errs {
	char *buf;             /* caller's buffer (may be NULL) */
	size_t cap;            /* its size */
	size_t len;            /* bytes used, without the NUL */
	unsigned n;            /* messages reported (including any cut off) */
	const char *origin;    /* file name that starts every message */
};

/* Where an address came from, to name both ends of a duplicate. */
struct addr_owner {
	uint32_t ip;
	char path[PATH_LEN];
};

struct parser {
	struct errs e;
	struct innet_topology *t;
	struct innet_prog_conf def_progs[INNET_TOPO_MAX_PROGS]; /* "defaults" programs */
	uint32_t n_def_progs;
	bool have_def_progs;
	uint32_t def_workers;
	struct addr_owner *addrs;    /* every explicit address seen */
	size_t n_addrs;
	size_t cap_addrs;
	uint32_t *a_addr, *b_addr;   /* per link: explicit switch-end address or 0 */
	int netns;                   /* "netns": -1 unset, 0, 1 */
	uint32_t def_mtu;            /* "mtu" at the top level */
};

/* ---- topology_json.c: the error list ------------------------------------- */

/* Add one line to the list (counted even when the buffer is full; a list
 * cut short ends in "..."). */
void topo_errs_line(struct errs *e, const char *line);
/* Report "ORIGIN: PATH: message". */
__attribute__((format(printf, 3, 4)))
void topo_errs_add(struct errs *e, const char *path, const char *fmt, ...);
/* msg into the caller's buffer err (errlen bytes; either may be NULL/0). */
void topo_set_err(char *err, size_t errlen, const char *msg);

/* ---- topology_json.c: paths and typed getters ---------------------------- */

/* out (PATH_LEN bytes) = base.key / base[i], cut short if needed (a long
 * path still points the reader to the right place). */
void topo_path_key(char *out, const char *base, const char *key);
void topo_path_idx(char *out, const char *base, size_t i);
/* What v is, for a message: "an object", "a string", ... */
const char *topo_json_kind(const json_t *v);
/* Every key of obj must be in allowed (NULL-terminated) or be "comment";
 * false (reported) if one is not. */
bool topo_check_keys(struct parser *p, json_t *obj, const char *path, const char *const *allowed);

/* The getters return 1 (present and valid), 0 (absent; an error if required)
 * or -EINVAL (invalid; reported). obj is the object at path; key is looked up in
 * it. */
int topo_get_value(struct parser *p, json_t *obj, const char *path, const char *key,
		   bool required, json_t **out);
/* An integer in [min, max]. */
int topo_get_uint(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, uint64_t min, uint64_t max, uint64_t *out);
/* A string (owned by obj). */
int topo_get_str(struct parser *p, json_t *obj, const char *path, const char *key,
		 bool required, const char **out);
/* A boolean; never required. */
int topo_get_bool(struct parser *p, json_t *obj, const char *path, const char *key, bool *out);
/* "target": "udp" or "xdp"; never required. */
int topo_get_target(struct parser *p, json_t *obj, const char *path, enum innet_target *out);
/* A probability: a number in [0, 1]; never required. */
int topo_get_prob(struct parser *p, json_t *obj, const char *path, const char *key, double *out);
/* A name that can go into file names and socket paths: 1 to
 * INNET_TOPO_NAME_MAX letters, digits, '_', '-' or '.', starting with a
 * letter or digit. */
int topo_get_name(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, char out[INNET_NAME_MAX]);
/* An IPv4 address in dotted form; unicast, and in 127/8 unless the topology
 * allows external addresses. */
int topo_get_addr(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, uint32_t *out);

/* ---- topology_json.c: addresses ------------------------------------------ */

/* ip is in 127.0.0.0/8. */
bool topo_is_loopback(uint32_t ip);
/* Remember an explicit address given at path; report it if already taken.
 * Returns 0, -EINVAL (reported) or -ENOMEM. */
int topo_claim_addr(struct parser *p, uint32_t ip, const char *path);
/* Some explicit address is ip. */
bool topo_addr_taken(const struct parser *p, uint32_t ip);

/* ---- topology.c ---------------------------------------------------------- */

/* out (PATH_LEN bytes) = the JSON path of node idx: $.switches[i] or
 * $.hosts[i]. */
void topo_node_path(const struct innet_topology *t, uint32_t idx, char *out);
/* Free the args of a switch's program configurations. */
void innet_topology_progs_release(struct innet_prog_conf *progs, uint32_t n);

/* ---- topology_resolve.c: only for a file without errors ------------------- */

/* Port addresses (automatic ones from addr_base), peers, names, seeds and
 * emulation flags. 0, -EINVAL (reported: out of addresses). */
int topo_resolve(struct parser *p);
/* Decide netns mode ("netns", else on if any switch is XDP) and give each
 * switch its target; in netns mode, every port's device, peer MAC and 10/8
 * addresses (the kernel does the link faults), and XDP ports' MTU checked.
 * 0 (problems reported). */
int topo_resolve_netns(struct parser *p);
/* Report two switches of one machine serving metrics on one TCP port (not
 * in netns mode: there each switch has a network namespace). */
void topo_check_metrics_unique(struct parser *p);

#endif /* INNET_TOPOLOGY_PVT_H */
