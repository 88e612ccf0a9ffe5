/*
 * topology.c — topology files (docs/topology.md): parse the JSON, check it,
 * and resolve it into ports, addresses, emulation, ctl sockets and routes.
 * This file is the walk over the file (the top level, programs, nodes,
 * links) and innet_topology_parse/load/free/find; the rest is
 *
 *   topology_json.c      the typed JSON getters it parses with, and the
 *                        error list they report into
 *   topology_resolve.c   step 4 below, and netns mode's names and addresses
 *   topology_routes.c    routes, and the conf a switch is given
 *
 * sharing topology_pvt.h (struct parser: the state of one parse).
 *
 * Parsing is one walk over the JSON tree that reports every problem it finds
 * (with the JSON path of the offending value) instead of stopping at the
 * first, so that `innet fabric up` can show a user all of them at once:
 *
 *   1. top level: name, seed, external_addrs, addr_base, state_dir
 *   2. defaults, switches, hosts: nodes (a bad entry still takes its slot,
 *      with an empty name, so node index = position in the file)
 *   3. links: endpoints, explicit addresses, emulation; ports are appended to
 *      the switches in link order
 *   4. if nothing failed so far: automatic addresses, peers, port names,
 *      seeds, emulation flags; then netns mode, and the metrics ports
 *
 * Routes ("routes": "auto") are computed when a switch's conf is asked for:
 * a BFS from the peer of each of the switch's ports, where hosts end paths
 * but never carry them; the next hops toward a node are the ports whose peer
 * is nearest to it.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/metrics.h"
#include "innet/parse.h"
#include "innet/topology.h"
#include "topology/topology_pvt.h"

_Static_assert(sizeof(((struct innet_switch_conf *)0)->progs) /
			       sizeof(((struct innet_switch_conf *)0)->progs[0]) ==
		       INNET_TOPO_MAX_PROGS,
	       "INNET_TOPO_MAX_PROGS matches innet_switch_conf.progs");

#define DEFAULT_ADDR_BASE 0x7f010000u  /* 127.1.0.0 */
#define TOPO_FILE_MAX (16u << 20)      /* refuse larger files */

/* ------------------------------------------------------------------------ */
/* Programs.                                                                 */

void innet_topology_progs_release(struct innet_prog_conf *progs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		free(progs[i].args_json);
		progs[i].args_json = NULL;
	}
}

static void known_programs(char *out, size_t len)
{
	const struct innet_program *const *l = innet_program_list();
	size_t off = 0;

	out[0] = '\0';
	for (size_t i = 0; l != NULL && l[i] != NULL && off < len; i++)
		off += (size_t)snprintf(out + off, len - off, "%s%s", i ? ", " : "", l[i]->name);
}

/* One entry of a "programs" array into pc. Returns 0 or -EINVAL (reported). */
static int parse_program(struct parser *p, json_t *o, const char *path, struct innet_prog_conf *pc)
{
	static const char *const keys[] = { "name", "program", "udp", "raw", "args", NULL };
	char kp[PATH_LEN], ip[PATH_LEN];
	const char *prog = NULL;
	json_t *udp, *args;
	int ok = 0;

	memset(pc, 0, sizeof(*pc));
	if (!json_is_object(o)) {
		topo_errs_add(&p->e, path, "expected a program object, got %s", topo_json_kind(o));
		return -EINVAL;
	}
	if (!topo_check_keys(p, o, path, keys))
		ok = -1;
	if (topo_get_str(p, o, path, "program", true, &prog) > 0) {
		pc->program = innet_program_find(prog);
		if (pc->program == NULL) {
			char known[512];
			known_programs(known, sizeof(known));
			topo_path_key(kp, path, "program");
			topo_errs_add(&p->e, kp, "unknown program '%.80s' (known: %s)", prog, known);
			ok = -1;
		}
	} else {
		ok = -1;
	}
	int r = topo_get_name(p, o, path, "name", false, pc->name);
	if (r < 0)
		ok = -1;
	else if (r == 0 && pc->program != NULL)
		snprintf(pc->name, sizeof(pc->name), "%s", pc->program->name);

	if (topo_get_bool(p, o, path, "raw", &pc->raw) < 0)
		ok = -1;
	topo_path_key(kp, path, "udp");
	int have_udp = topo_get_value(p, o, path, "udp", !pc->raw, &udp);
	if (have_udp < 0 || (have_udp == 0 && !pc->raw)) {
		ok = -1;
	} else if (have_udp == 0) {
		/* a raw program with no UDP port */
	} else if (!json_is_array(udp) || (json_array_size(udp) == 0 && !pc->raw) ||
		   json_array_size(udp) > INNET_MAX_PROG_UDP) {
		topo_errs_add(&p->e, kp, "expected an array of 1 to %u UDP ports or \"A-B\" ranges, got %s",
			      INNET_MAX_PROG_UDP, json_is_array(udp) ? "a longer or empty array" :
			      topo_json_kind(udp));
		ok = -1;
	} else {
		size_t i;
		json_t *u;
		json_array_foreach(udp, i, u) {
			uint32_t lo, hi;
			char msg[160];
			topo_path_idx(ip, kp, i);
			if (json_is_integer(u)) {
				json_int_t x = json_integer_value(u);
				lo = hi = x < 1 || x > 65535 ? 0 : (uint32_t)x;
			} else if (!json_is_string(u) ||
				   innet_udp_range_parse(json_string_value(u), &lo, &hi) != 0) {
				lo = hi = 0;
			}
			if (lo == 0 || hi == 0) {
				topo_errs_add(&p->e, ip, "expected a UDP port (1-65535) or a range \"A-B\"");
				ok = -1;
				continue;
			}
			if (innet_prog_conf_add_udp(pc, lo, hi, msg, sizeof(msg)) != 0) {
				topo_errs_add(&p->e, ip, "%s", msg);
				ok = -1;
				if (pc->n_udp >= INNET_MAX_PROG_UDP || hi - lo + 1 > INNET_MAX_PROG_UDP)
					break;
			}
		}
	}
	if (topo_get_value(p, o, path, "args", false, &args) > 0) {
		if (!json_is_object(args)) {
			topo_path_key(kp, path, "args");
			topo_errs_add(&p->e, kp, "expected an object, got %s", topo_json_kind(args));
			ok = -1;
		} else if (ok == 0) {
			pc->args_json = json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS);
			if (pc->args_json == NULL)
				return -ENOMEM;
		}
	}
	return ok;
}

/* A "programs" array into progs; names and UDP ports unique within it.
 * Returns 0, -EINVAL (reported) or -ENOMEM. */
static int parse_programs(struct parser *p, json_t *arr, const char *path,
			  struct innet_prog_conf *progs, uint32_t *n)
{
	char ep[PATH_LEN], up[PATH_LEN];
	size_t i;
	json_t *o;
	int ok = 0;

	*n = 0;
	if (!json_is_array(arr) || json_array_size(arr) == 0) {
		topo_errs_add(&p->e, path, "expected a non-empty array of programs, got %s",
			      json_is_array(arr) ? "an empty array" : topo_json_kind(arr));
		return -EINVAL;
	}
	if (json_array_size(arr) > INNET_TOPO_MAX_PROGS) {
		topo_errs_add(&p->e, path, "too many programs: %zu (at most %u per switch)",
			      json_array_size(arr), INNET_TOPO_MAX_PROGS);
		return -EINVAL;
	}
	uint8_t *owner = calloc(65536, 1); /* UDP port -> program index + 1 */
	if (owner == NULL)
		return -ENOMEM;
	json_array_foreach(arr, i, o) {
		struct innet_prog_conf *pc = &progs[*n];
		topo_path_idx(ep, path, i);
		int r = parse_program(p, o, ep, pc);
		if (r == -ENOMEM) {
			free(owner);
			return r;
		}
		(*n)++;
		if (r < 0) {
			ok = -1;
			continue;
		}
		for (uint32_t j = 0; j + 1 < *n; j++) {
			if (pc->name[0] && !strcmp(progs[j].name, pc->name)) {
				topo_path_key(up, ep, "name");
				topo_errs_add(&p->e, up, "duplicate program name '%s'", pc->name);
				ok = -1;
			}
			if (pc->raw && progs[j].raw) {
				topo_path_key(up, ep, "raw");
				topo_errs_add(&p->e, up, "program '%s' is raw already: at most one raw "
					      "program per switch", progs[j].name);
				ok = -1;
			}
		}
		/* UDP ports over all programs so far: owner[port] = program + 1 */
		uint32_t total = 0;
		for (uint32_t j = 0; j < *n; j++)
			total += progs[j].n_udp;
		topo_path_key(up, ep, "udp");
		if (total > INNET_MAX_SWITCH_UDP) {
			topo_errs_add(&p->e, up, "the switch's programs bind %u UDP ports, more than %u in all",
				      total, INNET_MAX_SWITCH_UDP);
			ok = -1;
		}
		for (uint32_t k = 0; k < pc->n_udp; k++) {
			uint8_t o2 = owner[pc->udp[k]];
			if (o2 != 0) {
				topo_errs_add(&p->e, up, "UDP port %u is already bound by program '%s'",
					      pc->udp[k], progs[o2 - 1].name);
				ok = -1;
				break; /* one message per program pair is enough */
			}
		}
		for (uint32_t k = 0; k < pc->n_udp; k++)
			if (owner[pc->udp[k]] == 0)
				owner[pc->udp[k]] = (uint8_t)*n;
	}
	free(owner);
	return ok;
}

/* ------------------------------------------------------------------------ */
/* Nodes.                                                                    */

void topo_node_path(const struct innet_topology *t, uint32_t idx, char *out)
{
	if (idx < t->n_switches)
		snprintf(out, PATH_LEN, "$.switches[%u]", idx);
	else
		snprintf(out, PATH_LEN, "$.hosts[%u]", idx - t->n_switches);
}

/* Name and node id unique over the nodes before idx. */
static int check_unique(struct parser *p, uint32_t idx, const char *path)
{
	struct innet_topology *t = p->t;
	struct innet_topo_node *n = &t->nodes[idx];
	char kp[PATH_LEN], other[PATH_LEN];
	int ok = 0;

	for (uint32_t j = 0; j < idx; j++) {
		topo_node_path(t, j, other);
		if (n->name[0] && !strcmp(t->nodes[j].name, n->name)) {
			topo_path_key(kp, path, "name");
			topo_errs_add(&p->e, kp, "duplicate name '%s' (also %s)", n->name, other);
			ok = -1;
		}
		if (n->node_id && t->nodes[j].node_id == n->node_id) {
			topo_path_key(kp, path, "node");
			topo_errs_add(&p->e, kp, "duplicate node id %u (also %s)", n->node_id, other);
			ok = -1;
		}
	}
	return ok;
}

/* Fields common to switches and hosts. */
static void parse_node_common(struct parser *p, json_t *o, const char *path,
			      struct innet_topo_node *n)
{
	uint64_t id;

	topo_get_name(p, o, path, "name", true, n->name);
	if (topo_get_uint(p, o, path, "node", true, 1, 65535, &id) > 0)
		n->node_id = (uint16_t)id;
	topo_get_name(p, o, path, "machine", false, n->machine);
}

/* A file a switch names ("p4", "commands"): relative to the topology file's
 * directory, made absolute (the switch may run elsewhere: innet fabric up).
 * 1 with out set, 0 absent, -1 reported. */
static int topo_file(struct parser *p, json_t *o, const char *path, const char *key, char *out,
		     size_t len)
{
	const char *s;
	char kp[PATH_LEN], joined[8192];

	if (topo_get_str(p, o, path, key, false, &s) <= 0)
		return json_object_get(o, key) != NULL ? -1 : 0;
	topo_path_key(kp, path, key);
	const char *slash = strrchr(p->t->origin, '/');
	if (s[0] == '/' || slash == NULL)
		snprintf(joined, sizeof(joined), "%s", s);
	else
		snprintf(joined, sizeof(joined), "%.*s/%s", (int)(slash - p->t->origin), p->t->origin, s);
	char *abs = realpath(joined, NULL);
	if (abs == NULL) {
		topo_errs_add(&p->e, kp, "cannot find '%.200s': %s", joined, strerror(errno));
		return -1;
	}
	int w = snprintf(out, len, "%s", abs);
	free(abs);
	if (w < 0 || (size_t)w >= len) {
		topo_errs_add(&p->e, kp, "path '%.200s' is too long", s);
		return -1;
	}
	return 1;
}

/* "p4": a switch that runs a P4 program (p4c's BMv2 JSON) and "commands", its
 * simple_switch_CLI commands file: the one raw program "p4" (docs/p4.md),
 * every port raw (netns mode, topology_resolve.c). 1 if a P4 switch, 0 if
 * not, -1 (reported), -ENOMEM. */
static int parse_p4(struct parser *p, json_t *o, const char *path, struct innet_topo_node *n)
{
	char json[4096], cmds[4096], kp[PATH_LEN];
	int rj = topo_file(p, o, path, "p4", json, sizeof(json));
	int rc = topo_file(p, o, path, "commands", cmds, sizeof(cmds));

	if (rj <= 0) {
		if (rc != 0 && rj == 0) {
			topo_path_key(kp, path, "commands");
			topo_errs_add(&p->e, kp, "\"commands\" is for a P4 switch: it needs \"p4\"");
		}
		return rj < 0 || rc < 0 ? -1 : 0;
	}
	if (rc < 0)
		return -1;
	json_t *args = json_pack("{s:s}", "json", json);
	if (args != NULL && rc > 0 && json_object_set_new(args, "commands", json_string(cmds)) != 0) {
		json_decref(args);
		args = NULL;
	}
	char *text = args != NULL ? json_dumps(args, JSON_COMPACT) : NULL;
	json_decref(args);
	if (text == NULL)
		return -ENOMEM;
	if (innet_program_find("p4") == NULL) {
		free(text);
		topo_path_key(kp, path, "p4");
		topo_errs_add(&p->e, kp, "this innet has no P4 program support (program \"p4\")");
		return -1;
	}
	struct innet_prog_conf *pc = &n->conf->progs[0];
	memset(pc, 0, sizeof(*pc));
	snprintf(pc->name, sizeof(pc->name), "p4");
	pc->program = innet_program_find("p4");
	pc->raw = true;
	pc->args_json = text;
	n->conf->n_progs = 1;
	n->p4 = true;
	return 1;
}

static int parse_switch(struct parser *p, json_t *o, uint32_t idx)
{
	static const char *const keys[] = { "name", "node", "workers", "programs", "machine", "gso",
					    "target", "metrics", "p4", "commands", NULL };
	struct innet_topo_node *n = &p->t->nodes[idx];
	char path[PATH_LEN], kp[PATH_LEN];
	uint64_t w = p->def_workers;
	json_t *progs;

	n->kind = INNET_TOPO_SWITCH;
	n->conf = calloc(1, sizeof(*n->conf));
	n->peers = calloc(INNET_MAX_PORTS, sizeof(*n->peers));
	if (n->conf == NULL || n->peers == NULL)
		return -ENOMEM;
	topo_node_path(p->t, idx, path);
	if (!json_is_object(o)) {
		topo_errs_add(&p->e, path, "expected a switch object, got %s", topo_json_kind(o));
		return 0;
	}
	topo_check_keys(p, o, path, keys);
	parse_node_common(p, o, path, n);
	topo_get_uint(p, o, path, "workers", false, 1, INNET_TOPO_MAX_WORKERS, &w);
	n->target = p->t->target;
	topo_get_target(p, o, path, &n->target);

	struct innet_switch_conf *c = n->conf;
	snprintf(c->name, sizeof(c->name), "%s", n->name);
	c->node_id = n->node_id;
	c->n_workers = (uint32_t)w;
	bool gso = true;
	topo_get_bool(p, o, path, "gso", &gso);
	c->no_gso = !gso;
	const char *maddr;
	if (topo_get_str(p, o, path, "metrics", false, &maddr) > 0) {
		char merr[200];
		uint32_t mip;
		uint16_t mport;
		topo_path_key(kp, path, "metrics");
		if (innet_metrics_addr_parse(maddr, &mip, &mport, merr, sizeof(merr)) != 0)
			topo_errs_add(&p->e, kp, "%s", merr);
		else
			snprintf(c->metrics_addr, sizeof(c->metrics_addr), "%s", maddr);
	}
	int have_p4 = parse_p4(p, o, path, n);
	if (have_p4 < 0)
		return have_p4 == -ENOMEM ? -ENOMEM : 0;
	if (have_p4 > 0) {
		if (json_object_get(o, "programs") != NULL) {
			topo_path_key(kp, path, "programs");
			topo_errs_add(&p->e, kp, "a P4 switch runs its P4 program only: drop \"programs\" "
				      "(or \"p4\")");
		}
	} else if (topo_get_value(p, o, path, "programs", false, &progs) > 0) {
		topo_path_key(kp, path, "programs");
		if (parse_programs(p, progs, kp, c->progs, &c->n_progs) == -ENOMEM)
			return -ENOMEM;
	} else if (p->have_def_progs) {
		for (uint32_t i = 0; i < p->n_def_progs; i++) {
			c->progs[i] = p->def_progs[i];
			c->progs[i].args_json = NULL;
			if (p->def_progs[i].args_json != NULL &&
			    (c->progs[i].args_json = strdup(p->def_progs[i].args_json)) == NULL)
				return -ENOMEM;
			c->n_progs++;
		}
	} else {
		topo_errs_add(&p->e, path, "missing program: no 'programs' here and none in $.defaults");
	}
	check_unique(p, idx, path);
	return 0;
}

static int parse_host(struct parser *p, json_t *o, uint32_t idx)
{
	static const char *const keys[] = { "name", "node", "addr", "machine", NULL };
	struct innet_topo_node *n = &p->t->nodes[idx];
	char path[PATH_LEN], kp[PATH_LEN];

	n->kind = INNET_TOPO_HOST;
	topo_node_path(p->t, idx, path);
	if (!json_is_object(o)) {
		topo_errs_add(&p->e, path, "expected a host object, got %s", topo_json_kind(o));
		return 0;
	}
	topo_check_keys(p, o, path, keys);
	parse_node_common(p, o, path, n);
	if (topo_get_addr(p, o, path, "addr", true, &n->addr) > 0) {
		topo_path_key(kp, path, "addr");
		if (topo_claim_addr(p, n->addr, kp) == -ENOMEM)
			return -ENOMEM;
	}
	check_unique(p, idx, path);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Links.                                                                    */

/* Resolve one end ("a" or "b") of link li to a node index, or -1. */
static int link_end(struct parser *p, json_t *o, const char *path, const char *key)
{
	char kp[PATH_LEN];
	const char *s;

	if (topo_get_str(p, o, path, key, true, &s) <= 0)
		return -EINVAL;
	int idx = innet_topology_find(p->t, s);
	if (idx < 0) {
		topo_path_key(kp, path, key);
		topo_errs_add(&p->e, kp, "link to unknown node '%.80s' (not in $.switches or $.hosts)", s);
		return -EINVAL;
	}
	return idx;
}

/* The explicit address for one end: allowed on a switch end only. */
static int link_addr(struct parser *p, json_t *o, const char *path, const char *key,
		     const struct innet_topo_node *n, uint32_t *out)
{
	char kp[PATH_LEN];
	int r = topo_get_addr(p, o, path, key, false, out);

	if (r <= 0)
		return r;
	topo_path_key(kp, path, key);
	if (n->kind == INNET_TOPO_HOST) {
		topo_errs_add(&p->e, kp, "'%s' is a host: its address is its \"addr\"", n->name);
		*out = 0;
		return -EINVAL;
	}
	return topo_claim_addr(p, *out, kp) == -ENOMEM ? -ENOMEM : 1;
}


/* A raw port: "a_iface"/"b_iface" names the interface a switch end reads and
 * writes frames on (AF_PACKET) instead of an address. */
static void link_iface(struct parser *p, json_t *o, const char *path, const char *key,
		       struct innet_topo_node *n, uint32_t port, uint32_t addr,
		       const struct innet_link_conf *emu)
{
	char kp[PATH_LEN];
	const char *s;

	if (topo_get_str(p, o, path, key, false, &s) <= 0)
		return;
	topo_path_key(kp, path, key);
	size_t len = strlen(s);
	if (len == 0 || len >= INNET_IFACE_MAX || strpbrk(s, "/ \t\n:") != NULL) {
		topo_errs_add(&p->e, kp, "'%.80s' is not an interface name (1 to %u characters, no '/', "
			      "':' or spaces)", s, INNET_IFACE_MAX - 1);
		return;
	}
	if (n->kind != INNET_TOPO_SWITCH) {
		topo_errs_add(&p->e, kp, "'%s' is a host: only a switch end can be a raw port", n->name);
		return;
	}
	if (addr != 0) {
		topo_errs_add(&p->e, kp, "a raw port has no address: drop the %c_addr of this end",
			      key[0]);
		return;
	}
	if (innet_link_faulty(emu)) {
		topo_errs_add(&p->e, kp, "link emulation is not supported on a raw port");
		return;
	}
	for (uint32_t k = 0; k < port; k++)
		if (!strcmp(n->conf->ports[k].iface, s)) {
			topo_errs_add(&p->e, kp, "switch '%s' already has a raw port on '%s' (port %u)",
				      n->name, s, k);
			return;
		}
	snprintf(n->conf->ports[port].iface, sizeof(n->conf->ports[port].iface), "%s", s);
}

static int add_port(struct parser *p, uint32_t sw, uint32_t peer, uint32_t li, const char *path,
		    uint32_t *port)
{
	struct innet_topo_node *n = &p->t->nodes[sw];

	if (n->conf->n_ports == INNET_MAX_PORTS) {
		topo_errs_add(&p->e, path, "too many ports: switch '%s' already has %u (INNET_MAX_PORTS)",
			      n->name, INNET_MAX_PORTS);
		return -EINVAL;
	}
	*port = n->conf->n_ports++;
	n->peers[*port] = (struct innet_topo_peer){ .node = peer, .link = li,
						    .port = INNET_TOPO_NO_PORT };
	return 0;
}

static int node_add_link(struct innet_topo_node *n, uint32_t li)
{
	uint32_t *l = realloc(n->links, (n->n_links + 1) * sizeof(*l));

	if (l == NULL)
		return -ENOMEM;
	l[n->n_links++] = li;
	n->links = l;
	return 0;
}

static int parse_link(struct parser *p, json_t *o, uint32_t li)
{
	static const char *const keys[] = { "a", "b", "a_addr", "b_addr", "a_iface", "b_iface",
					    "loss", "dup", "reorder", "delay_us", "jitter_us", "mtu", NULL };
	struct innet_topology *t = p->t;
	struct innet_topo_link *l = &t->links[li];
	char path[PATH_LEN];
	uint64_t us;

	snprintf(path, PATH_LEN, "$.links[%u]", li);
	l->a = l->b = UINT32_MAX;
	l->a_port = l->b_port = INNET_TOPO_NO_PORT;
	if (!json_is_object(o)) {
		topo_errs_add(&p->e, path, "expected a link object, got %s", topo_json_kind(o));
		return 0;
	}
	topo_check_keys(p, o, path, keys);
	topo_get_prob(p, o, path, "loss", &l->emu.loss);
	topo_get_prob(p, o, path, "dup", &l->emu.dup);
	topo_get_prob(p, o, path, "reorder", &l->emu.reorder);
	if (topo_get_uint(p, o, path, "delay_us", false, 0, UINT32_MAX, &us) > 0)
		l->emu.delay_us = (uint32_t)us;
	if (topo_get_uint(p, o, path, "jitter_us", false, 0, UINT32_MAX, &us) > 0)
		l->emu.jitter_us = (uint32_t)us;
	l->mtu = p->def_mtu;
	if (topo_get_uint(p, o, path, "mtu", false, 68, 9000, &us) > 0)
		l->mtu = (uint32_t)us;

	int a = link_end(p, o, path, "a"), b = link_end(p, o, path, "b");
	if (a < 0 || b < 0)
		return 0;
	struct innet_topo_node *na = &t->nodes[a], *nb = &t->nodes[b];
	if (a == b) {
		topo_errs_add(&p->e, path, "link from '%s' to itself", na->name);
		return 0;
	}
	if (na->kind == INNET_TOPO_HOST && nb->kind == INNET_TOPO_HOST) {
		topo_errs_add(&p->e, path, "link between two hosts ('%s', '%s'): a link needs a switch",
			      na->name, nb->name);
		return 0;
	}
	if (link_addr(p, o, path, "a_addr", na, &p->a_addr[li]) == -ENOMEM ||
	    link_addr(p, o, path, "b_addr", nb, &p->b_addr[li]) == -ENOMEM)
		return -ENOMEM;
	if (na->kind == INNET_TOPO_SWITCH && add_port(p, (uint32_t)a, (uint32_t)b, li, path, &l->a_port) < 0)
		return 0;
	if (nb->kind == INNET_TOPO_SWITCH && add_port(p, (uint32_t)b, (uint32_t)a, li, path, &l->b_port) < 0)
		return 0;
	link_iface(p, o, path, "a_iface", na, l->a_port, p->a_addr[li], &l->emu);
	link_iface(p, o, path, "b_iface", nb, l->b_port, p->b_addr[li], &l->emu);
	l->a = (uint32_t)a;
	l->b = (uint32_t)b;
	if (l->a_port != INNET_TOPO_NO_PORT && l->b_port != INNET_TOPO_NO_PORT) {
		na->peers[l->a_port].port = l->b_port;
		nb->peers[l->b_port].port = l->a_port;
	}
	if (node_add_link(na, li) < 0 || node_add_link(nb, li) < 0)
		return -ENOMEM;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Top level.                                                                */

static int parse_defaults(struct parser *p, json_t *root)
{
	static const char *const keys[] = { "workers", "programs", NULL };
	json_t *d, *progs;
	uint64_t w;

	if (topo_get_value(p, root, "$", "defaults", false, &d) <= 0)
		return 0;
	if (!json_is_object(d)) {
		topo_errs_add(&p->e, "$.defaults", "expected an object, got %s", topo_json_kind(d));
		return 0;
	}
	topo_check_keys(p, d, "$.defaults", keys);
	if (topo_get_uint(p, d, "$.defaults", "workers", false, 1, INNET_TOPO_MAX_WORKERS, &w) > 0)
		p->def_workers = (uint32_t)w;
	if (topo_get_value(p, d, "$.defaults", "programs", false, &progs) > 0) {
		p->have_def_progs = true;
		return parse_programs(p, progs, "$.defaults.programs", p->def_progs,
				      &p->n_def_progs) == -ENOMEM ? -ENOMEM : 0;
	}
	return 0;
}

static int parse_top(struct parser *p, json_t *root)
{
	static const char *const keys[] = { "name", "seed", "external_addrs", "addr_base",
					    "state_dir", "defaults", "switches", "hosts",
					    "links", "target", "netns", "mtu", NULL };
	struct innet_topology *t = p->t;
	json_t *sw, *hosts, *links;
	const char *dir = NULL;

	if (!json_is_object(root)) {
		topo_errs_add(&p->e, "$", "expected a topology object, got %s", topo_json_kind(root));
		return 0;
	}
	topo_check_keys(p, root, "$", keys);
	topo_get_name(p, root, "$", "name", true, t->name);
	topo_get_uint(p, root, "$", "seed", false, 0, INT64_MAX, &t->seed);
	topo_get_bool(p, root, "$", "external_addrs", &t->external_addrs);
	topo_get_addr(p, root, "$", "addr_base", false, &t->addr_base);
	topo_get_target(p, root, "$", &t->target);
	bool netns;
	if (topo_get_bool(p, root, "$", "netns", &netns) > 0)
		p->netns = netns;
	uint64_t mtu;
	p->def_mtu = 1500;
	if (topo_get_uint(p, root, "$", "mtu", false, 68, 9000, &mtu) > 0)
		p->def_mtu = (uint32_t)mtu;
	if (topo_get_str(p, root, "$", "state_dir", false, &dir) > 0 && dir[0] != '/') {
		topo_errs_add(&p->e, "$.state_dir", "'%.80s' is not an absolute path", dir);
		dir = NULL;
	}
	if (dir != NULL)
		snprintf(t->state_dir, sizeof(t->state_dir), "%s", dir);
	else
		snprintf(t->state_dir, sizeof(t->state_dir), "/tmp/innet-%s", t->name);
	if (parse_defaults(p, root) < 0)
		return -ENOMEM;

	size_t n_sw = 0, n_hosts = 0, n_links = 0;
	if (topo_get_value(p, root, "$", "switches", true, &sw) > 0) {
		if (!json_is_array(sw) || json_array_size(sw) == 0)
			topo_errs_add(&p->e, "$.switches", "expected a non-empty array of switches, got %s",
				      json_is_array(sw) ? "an empty array" : topo_json_kind(sw));
		else
			n_sw = json_array_size(sw);
	}
	if (topo_get_value(p, root, "$", "hosts", false, &hosts) > 0) {
		if (!json_is_array(hosts))
			topo_errs_add(&p->e, "$.hosts", "expected an array of hosts, got %s",
				      topo_json_kind(hosts));
		else
			n_hosts = json_array_size(hosts);
	}
	if (topo_get_value(p, root, "$", "links", false, &links) > 0) {
		if (!json_is_array(links))
			topo_errs_add(&p->e, "$.links", "expected an array of links, got %s",
				      topo_json_kind(links));
		else
			n_links = json_array_size(links);
	}
	if (n_sw + n_hosts > 65535) {
		topo_errs_add(&p->e, "$", "too many nodes: %zu (node ids are 1..65535)", n_sw + n_hosts);
		return 0;
	}
	t->nodes = calloc(n_sw + n_hosts + 1, sizeof(*t->nodes));
	t->links = calloc(n_links + 1, sizeof(*t->links));
	p->a_addr = calloc(n_links + 1, sizeof(*p->a_addr));
	p->b_addr = calloc(n_links + 1, sizeof(*p->b_addr));
	if (t->nodes == NULL || t->links == NULL || p->a_addr == NULL || p->b_addr == NULL)
		return -ENOMEM;
	t->n_switches = (uint32_t)n_sw;
	t->n_hosts = (uint32_t)n_hosts;
	t->n_nodes = t->n_switches + t->n_hosts;
	t->n_links = (uint32_t)n_links;

	size_t i;
	for (i = 0; i < n_sw; i++)
		if (parse_switch(p, json_array_get(sw, i), (uint32_t)i) < 0)
			return -ENOMEM;
	for (i = 0; i < n_hosts; i++)
		if (parse_host(p, json_array_get(hosts, i), t->n_switches + (uint32_t)i) < 0)
			return -ENOMEM;
	unsigned errs_before_links = p->e.n;
	for (i = 0; i < n_links; i++)
		if (parse_link(p, json_array_get(links, i), (uint32_t)i) < 0)
			return -ENOMEM;
	bool links_ok = p->e.n == errs_before_links; /* else "not linked" is noise */

	/* Whole-topology checks. */
	char path[PATH_LEN];
	for (uint32_t k = 0; k < t->n_nodes; k++) {
		struct innet_topo_node *n = &t->nodes[k];
		if (n->name[0] == '\0')
			continue;
		topo_node_path(t, k, path);
		if (n->n_links == 0 && links_ok)
			topo_errs_add(&p->e, path, "%s '%s' is not linked to anything (see $.links)",
				      n->kind == INNET_TOPO_HOST ? "host" : "switch", n->name);
		if (n->kind != INNET_TOPO_SWITCH)
			continue;
		int w = snprintf(n->conf->ctl_path, sizeof(n->conf->ctl_path), "%s/%s.sock",
				 t->state_dir, n->name);
		if (w < 0 || (size_t)w >= sizeof(n->conf->ctl_path))
			topo_errs_add(&p->e, path, "control socket path '%s/%s.sock' is %d bytes, "
				      "longer than %zu (shorten $.state_dir or the name)",
				      t->state_dir, n->name, w, sizeof(n->conf->ctl_path) - 1);
	}
	return 0;
}

static struct innet_topology *parse_root(json_t *root, struct errs *e)
{
	struct parser p = { .e = *e, .def_workers = 1, .netns = -1 };
	int r = -ENOMEM;

	p.t = calloc(1, sizeof(*p.t));
	if (p.t == NULL)
		goto err;
	p.t->seed = 1;
	p.t->addr_base = DEFAULT_ADDR_BASE;
	snprintf(p.t->origin, sizeof(p.t->origin), "%s", e->origin);
	r = parse_top(&p, root);
	if (r == 0 && p.e.n == 0)
		r = topo_resolve(&p);
	if (r == 0 && p.e.n == 0)
		r = topo_resolve_netns(&p);
	if (r == 0 && p.e.n == 0)
		topo_check_metrics_unique(&p);
	if (r == 0 && p.e.n > 0)
		r = -EINVAL;
err:
	innet_topology_progs_release(p.def_progs, p.n_def_progs);
	free(p.addrs);
	free(p.a_addr);
	free(p.b_addr);
	*e = p.e;
	if (r < 0) {
		if (r == -ENOMEM)
			topo_errs_line(e, "out of memory");
		innet_topology_free(p.t);
		errno = -r;
		return NULL;
	}
	return p.t;
}

static void errs_init(struct errs *e, char *err, size_t errlen, const char *origin)
{
	*e = (struct errs){ .buf = err, .cap = errlen, .origin = origin };
	if (err != NULL && errlen > 0)
		err[0] = '\0';
}

struct innet_topology *innet_topology_parse(const char *json_text, const char *origin, char *err,
					    size_t errlen)
{
	struct errs e;
	json_error_t je;
	char line[1024];

	errs_init(&e, err, errlen, origin);
	json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		/* jansson leaves the error empty when it cannot even start */
		bool oom = json_error_code(&je) == json_error_out_of_memory || je.text[0] == '\0';
		snprintf(line, sizeof(line), "%s:%d:%d: %s: %s", origin, je.line, je.column,
			 oom ? "cannot parse" : "malformed JSON", je.text);
		topo_errs_line(&e, line);
		errno = oom ? ENOMEM : EINVAL;
		return NULL;
	}
	struct innet_topology *t = parse_root(root, &e);
	int saved = errno;
	json_decref(root);
	errno = saved;
	return t;
}

/* The whole file into a NUL-terminated buffer; NULL with errno set. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	size_t cap = 1 << 16;
	char *buf = NULL;
	int e = 0;

	*len = 0;
	if (f == NULL)
		return NULL;
	errno = 0;
	for (;;) {
		char *b = realloc(buf, cap + 1);
		if (b == NULL) {
			e = ENOMEM;
			break;
		}
		buf = b;
		*len += fread(buf + *len, 1, cap - *len, f);
		if (ferror(f)) {
			e = errno ? errno : EIO;
			break;
		}
		if (*len < cap)
			break;
		if (cap >= TOPO_FILE_MAX) {
			e = EFBIG;
			break;
		}
		cap *= 2;
	}
	fclose(f);
	if (e) {
		free(buf);
		errno = e;
		return NULL;
	}
	buf[*len] = '\0';
	return buf;
}

struct innet_topology *innet_topology_load(const char *path, char *err, size_t errlen)
{
	char msg[1024];
	size_t len;
	char *text = read_file(path, &len);
	int e;

	if (text == NULL) {
		e = errno;
		snprintf(msg, sizeof(msg), "%s: cannot read: %s", path, strerror(e));
		topo_set_err(err, errlen, msg);
		errno = e;
		return NULL;
	}
	if (strlen(text) != len) {
		snprintf(msg, sizeof(msg), "%s: contains a NUL byte: not a JSON text", path);
		topo_set_err(err, errlen, msg);
		free(text);
		errno = EINVAL;
		return NULL;
	}
	struct innet_topology *t = innet_topology_parse(text, path, err, errlen);
	e = errno;
	free(text);
	errno = e;
	return t;
}

void innet_topology_free(struct innet_topology *t)
{
	if (t == NULL)
		return;
	for (uint32_t i = 0; t->nodes != NULL && i < t->n_nodes; i++) {
		struct innet_topo_node *n = &t->nodes[i];
		if (n->conf != NULL)
			innet_topology_progs_release(n->conf->progs, n->conf->n_progs);
		free(n->conf);
		free(n->peers);
		free(n->links);
	}
	free(t->nodes);
	free(t->links);
	free(t);
}

int innet_topology_find(const struct innet_topology *t, const char *name)
{
	for (uint32_t i = 0; i < t->n_nodes; i++)
		if (t->nodes[i].name[0] && !strcmp(t->nodes[i].name, name))
			return (int)i;
	return -ENOENT;
}
