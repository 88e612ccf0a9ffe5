/*
 * fabric_json.c — the resolved topology as JSON (innet_fabric_topology_json,
 * `innet fabric show --json`) and the state file built from it,
 * <state_dir>/fabric.json (fabric.TAG.json with a machine tag): the same
 * JSON plus each switch's pid and log. Up writes it (fab_write_state), down
 * and status read it (fab_read_state), start/restart read one switch's entry
 * and write it back (fab_load_state_json, fab_save_state_json), and
 * fab_clean_state removes it with the control sockets. The calls that use
 * them are fabric.c; the processes fabric_proc.c; shared: fabric_pvt.h.
 *
 * Threads: the state file's name (fab_state_file) is the calling thread's,
 * set by each innet_fabric_* entry; messages go to that call's `say`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "innet/topology.h"
#include "innet/switch.h"
#include "fabric/fabric_pvt.h"

static void ip_str(uint32_t ip, char out[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ip) };

	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

/* out = dir/file (state_dir paths are short: topology.c checks the ctl
 * socket path, which is the longest). */
/* The state file: fabric.json, or fabric.<TAG>.json with --machine TAG, so
 * machines that share a file system (namespaces on one host) keep apart. */
__thread char fab_state_file[INNET_NAME_MAX + 16] = "fabric.json";

static void state_path(const char *dir, const char *file, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s", dir, file) >= (int)len)
		out[0] = '\0';
}

void fab_log_path(const char *dir, const char *sw, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s.log", dir, sw) >= (int)len)
		out[0] = '\0';
}

/* ------------------------------------------------------------------------ */
/* The resolved topology as JSON (show --json, fabric.json).                 */

static _Thread_local bool json_failed; /* an insert failed: out of memory (per thread, as the options) */

static void jset(json_t *o, const char *key, json_t *v)
{
	if (json_object_set_new(o, key, v) < 0)
		json_failed = true;
}

static void jpush(json_t *a, json_t *v)
{
	if (json_array_append_new(a, v) < 0)
		json_failed = true;
}

static json_t *jaddr(uint32_t ip)
{
	char s[INET_ADDRSTRLEN];

	ip_str(ip, s);
	return json_string(s);
}

static json_t *port_json(const struct innet_topology *t, const struct innet_topo_node *n,
			 uint32_t k)
{
	const struct innet_port_conf *pc = &n->conf->ports[k];
	const struct innet_topo_peer *pe = &n->peers[k];
	json_t *o = json_object();

	jset(o, "index", json_integer(k));
	jset(o, "name", json_string(pc->name));
	jset(o, "addr", jaddr(pc->ip));
	jset(o, "peer", json_string(t->nodes[pe->node].name));
	if (pe->port != INNET_TOPO_NO_PORT)
		jset(o, "peer_port", json_integer(pe->port));
	jset(o, "peer_addr", jaddr(pc->peer_ip));
	if (pc->dev[0] != '\0')
		jset(o, "dev", json_string(pc->dev));
	if (innet_link_faulty(&pc->link))
		jset(o, "link", innet_link_json(&pc->link));
	if (pc->iface[0] != '\0') {
		const struct innet_topo_link *l = &t->links[pe->link];
		uint32_t gw = n == &t->nodes[l->a] ? l->a_gw : l->b_gw;
		jset(o, "iface", json_string(pc->iface));
		if (gw != 0)   /* a P4 switch's port: the address its neighbour routes through */
			jset(o, "gateway", jaddr(gw));
	}
	return o;
}

static json_t *switch_json(const struct innet_topology *t, uint32_t i)
{
	const struct innet_topo_node *n = &t->nodes[i];
	const struct innet_switch_conf *c = n->conf;
	json_t *o = json_object(), *ports = json_array(), *progs = json_array();
	json_t *routes = json_array();
	uint16_t hops[INNET_MAX_PORTS];

	jset(o, "name", json_string(n->name));
	jset(o, "node", json_integer(n->node_id));
	if (n->machine[0])
		jset(o, "machine", json_string(n->machine));
	jset(o, "workers", json_integer(c->n_workers));
	jset(o, "target", json_string(innet_target_info(n->target)->name));
	if (n->p4)
		jset(o, "p4", json_true());
	if (t->netns) {
		char ns[256];
		innet_topology_netns_name(t, i, ns, sizeof(ns));
		jset(o, "netns", json_string(ns));
	}
	jset(o, "ctl", json_string(c->ctl_path));
	if (c->metrics_addr[0] != '\0')
		jset(o, "metrics", json_string(c->metrics_addr));
	for (uint32_t k = 0; k < c->n_ports; k++)
		jpush(ports, port_json(t, n, k));
	jset(o, "ports", ports);
	for (uint32_t k = 0; k < c->n_progs; k++) {
		const struct innet_prog_conf *pc = &c->progs[k];
		json_t *p = json_object(), *udp = json_array();
		jset(p, "name", json_string(pc->name));
		jset(p, "program", json_string(pc->program->name));
		for (uint32_t u = 0; u < pc->n_udp; u++)
			jpush(udp, json_integer(pc->udp[u]));
		jset(p, "udp", udp);
		if (pc->args_json != NULL)
			jset(p, "args", json_loads(pc->args_json, 0, NULL));
		jpush(progs, p);
	}
	jset(o, "programs", progs);
	for (uint32_t d = 0; d < t->n_nodes; d++) {
		int nh = innet_topology_next_hops(t, i, d, hops, INNET_MAX_PORTS);
		if (nh < 0)
			json_failed = true;
		if (nh <= 0)
			continue;
		json_t *r = json_object(), *rp = json_array();
		jset(r, "node", json_integer(t->nodes[d].node_id));
		jset(r, "name", json_string(t->nodes[d].name));
		for (int h = 0; h < nh; h++)
			jpush(rp, json_integer(hops[h]));
		jset(r, "ports", rp);
		jpush(routes, r);
	}
	jset(o, "routes", routes);
	return o;
}

static json_t *host_json(const struct innet_topology *t, uint32_t i)
{
	const struct innet_topo_node *n = &t->nodes[i];
	json_t *o = json_object(), *links = json_array();

	jset(o, "name", json_string(n->name));
	jset(o, "node", json_integer(n->node_id));
	jset(o, "addr", jaddr(n->addr));
	if (n->machine[0])
		jset(o, "machine", json_string(n->machine));
	for (uint32_t k = 0; k < n->n_links; k++) {
		const struct innet_topo_link *l = &t->links[n->links[k]];
		uint32_t sw = l->a == i ? l->b : l->a, port = l->a == i ? l->b_port : l->a_port;
		json_t *e = json_object();
		jset(e, "switch", json_string(t->nodes[sw].name));
		jset(e, "port", json_integer(port));
		uint32_t gw = l->a == i ? l->b_gw : l->a_gw;
		jset(e, "addr", jaddr(gw != 0 ? gw : t->nodes[sw].conf->ports[port].ip));
		jpush(links, e);
	}
	jset(o, "links", links);
	return o;
}

/* The whole topology; with procs (n_switches entries, pid 0 = not started)
 * also pids and logs, as in fabric.json. NULL when out of memory. */
json_t *fab_topology_json(const struct innet_topology *t, const char *file,
			  const struct proc *procs)
{
	json_t *o = json_object(), *sws = json_array(), *hosts = json_array();
	char log[PATH_MAX];

	json_failed = false;
	jset(o, "name", json_string(t->name));
	jset(o, "topology", json_string(file));
	jset(o, "state_dir", json_string(t->state_dir));
	jset(o, "seed", json_integer((json_int_t)t->seed));
	if (procs != NULL)
		jset(o, "started", json_integer((json_int_t)time(NULL)));
	for (uint32_t i = 0; i < t->n_switches; i++) {
		json_t *s = switch_json(t, i);
		if (procs != NULL && procs[i].pid > 0) {
			fab_log_path(t->state_dir, t->nodes[i].name, log, sizeof(log));
			jset(s, "pid", json_integer(procs[i].pid));
			jset(s, "log", json_string(log));
		}
		jpush(sws, s);
	}
	jset(o, "switches", sws);
	for (uint32_t i = t->n_switches; i < t->n_nodes; i++)
		jpush(hosts, host_json(t, i));
	jset(o, "hosts", hosts);
	jset(o, "links", json_integer(t->n_links));
	if (json_failed) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ------------------------------------------------------------------------ */
/* The state file, fabric.json: remove, read, write, update one switch.     */

/* Remove each ctl socket (if it is one) and fabric.json. */
void fab_clean_state(const char *dir, const struct proc *procs, size_t n)
{
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < n; i++)
		if (procs[i].ctl[0] && lstat(procs[i].ctl, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(procs[i].ctl);
	state_path(dir, fab_state_file, path, sizeof(path));
	unlink(path);
}

/* Read <dir>/fabric.json into procs (allocated). Returns the count, 0 if
 * there is no state file, -1 on a bad one (reported). */
int fab_read_state(const char *dir, struct proc **out)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *sw;
	size_t i;

	*out = NULL;
	state_path(dir, fab_state_file, path, sizeof(path));
	if (access(path, F_OK) != 0)
		return 0;
	json_t *root = json_load_file(path, 0, &je);
	json_t *sws = json_object_get(root, "switches");
	if (root == NULL || !json_is_array(sws)) {
		fab_say(true, "%s: unreadable state: %s\n"
			"  (if no switch of this fabric is running, remove it by hand)\n", path,
			root ? "no \"switches\" array" : je.text);
		json_decref(root);
		return -1;
	}
	struct proc *procs = calloc(json_array_size(sws) + 1, sizeof(*procs));
	if (procs == NULL) {
		json_decref(root);
		fab_say(true, "out of memory\n");
		return -1;
	}
	json_array_foreach(sws, i, sw) {
		struct proc *p = &procs[i];
		snprintf(p->name, sizeof(p->name), "%s",
			 json_string_value(json_object_get(sw, "name")) ?: "?");
		snprintf(p->ctl, sizeof(p->ctl), "%s",
			 json_string_value(json_object_get(sw, "ctl")) ?: "");
		json_int_t pid = json_integer_value(json_object_get(sw, "pid"));
		p->pid = pid > 1 && pid <= INT_MAX ? (pid_t)pid : 0;
	}
	int n = (int)json_array_size(sws);
	json_decref(root);
	*out = procs;
	return n;
}

/* Write fabric.json atomically. 0 or -errno (reported). */
int fab_write_state(const struct innet_topology *t, const char *file, const struct proc *procs)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	json_t *j = fab_topology_json(t, file, procs);
	int r = 0;

	state_path(t->state_dir, fab_state_file, path, sizeof(path));
	char tmpname[sizeof(fab_state_file) + 8];
	snprintf(tmpname, sizeof(tmpname), ".%s.tmp", fab_state_file);
	state_path(t->state_dir, tmpname, tmp, sizeof(tmp));
	errno = 0;
	if (j == NULL)
		r = -ENOMEM;
	else if (json_dump_file(j, tmp, JSON_INDENT(2)) < 0 || rename(tmp, path) < 0)
		r = errno ? -errno : -EIO;
	json_decref(j);
	if (r < 0) {
		unlink(tmp);
		fab_say(true, "cannot write %s: %s\n", path, strerror(-r));
	}
	return r;
}

/* fabric.json of the fabric (FILE's state_dir, or --state DIR) and the index
 * of switch o->node in its "switches". NULL (reported) if there is none. */
json_t *fab_load_state_json(const struct opts *o, char *dir, size_t dirlen, size_t *idx,
			    int *rc)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *sw;
	size_t i;

	if ((*rc = fab_state_dir_of(o, dir, dirlen)) != 0)
		return NULL;
	*rc = 1;
	state_path(dir, fab_state_file, path, sizeof(path));
	if (access(path, F_OK) != 0) {
		fab_say(true, "no fabric is up here: no %s\n", path);
		return NULL;
	}
	json_t *root = json_load_file(path, 0, &je);
	json_t *sws = json_object_get(root, "switches");
	if (root == NULL || !json_is_array(sws) ||
	    !json_is_string(json_object_get(root, "topology"))) {
		fab_say(true, "%s: unreadable state%s%s\n", path,
			root ? "" : ": ", root ? "" : je.text);
		json_decref(root);
		return NULL;
	}
	json_array_foreach(sws, i, sw) {
		const char *name = json_string_value(json_object_get(sw, "name"));
		if (name != NULL && !strcmp(name, o->node)) {
			*idx = i;
			*rc = 0;
			return root;
		}
	}
	fab_say(true, "the fabric in %s has no switch '%s'\n", dir, o->node);
	*rc = 2;
	json_decref(root);
	return NULL;
}

void fab_proc_of(json_t *sw, struct proc *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", json_string_value(json_object_get(sw, "name")) ?: "?");
	snprintf(p->ctl, sizeof(p->ctl), "%s", json_string_value(json_object_get(sw, "ctl")) ?: "");
	json_int_t pid = json_integer_value(json_object_get(sw, "pid"));
	p->pid = pid > 1 && pid <= INT_MAX ? (pid_t)pid : 0;
}

/* Write fabric.json (root) back atomically. 0 or -1 (reported). */
int fab_save_state_json(const char *dir, json_t *root)
{
	char path[PATH_MAX], tmp[PATH_MAX], tmpname[sizeof(fab_state_file) + 8];

	state_path(dir, fab_state_file, path, sizeof(path));
	snprintf(tmpname, sizeof(tmpname), ".%s.tmp", fab_state_file);
	state_path(dir, tmpname, tmp, sizeof(tmp));
	if (json_dump_file(root, tmp, JSON_INDENT(2)) < 0 || rename(tmp, path) < 0) {
		fab_say(true, "cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}
