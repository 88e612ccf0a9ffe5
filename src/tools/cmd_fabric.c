/*
 * cmd_fabric.c — `innet fabric`: bring a whole topology up or down on this
 * machine, one `innet switch` process per switch (docs/man/innet-fabric.md).
 *
 *   innet fabric up FILE       validate, spawn, wait for every ctl socket
 *   innet fabric down FILE     stop what `up` recorded, clean the state dir
 *   innet fabric status FILE   which switches are running
 *   innet fabric show FILE     the resolved topology; starts nothing
 *   innet fabric stop FILE SW [--kill]      stop one switch of a running fabric
 *   innet fabric start FILE SW [--set I.K=V]  start it again, same settings
 *   innet fabric restart FILE SW [--kill] [--set I.K=V]   both
 *
 * stop/start/restart act on one switch recorded in fabric.json: stop signals
 * its pid (SIGTERM, or SIGKILL at once with --kill: a crash); start runs
 * `innet switch --topology T --name SW --workers W` with the topology file
 * and worker count that `up` recorded, appends to its log, waits for its ctl
 * socket and records the new pid. --set INSTANCE.KEY=JSON overrides one
 * setting of one of its program instances for this start: the topology is
 * copied to <state_dir>/<switch>.restart.json with the setting changed (e.g.
 * `--set acc.join=true` restarts a Paxos acceptor silent, as its join rule
 * requires; docs/consensus.md).
 *
 * State lives in the topology's state_dir:
 *
 *   <state_dir>/fabric.json    what `up` started: the resolved topology + pids
 *   <state_dir>/<switch>.sock  each switch's control socket
 *   <state_dir>/<switch>.log   each switch's stdout and stderr
 *
 * Only pids recorded in fabric.json are ever signalled, and only while
 * /proc/PID/cmdline still reads "innet switch ... --name SWITCH".
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "innet/topology.h"
#include "tools/cmds.h"
#include "tools/util.h"

#define STOP_GRACE_MS   5000   /* SIGTERM, then this long, then SIGKILL */
#define POLL_MS         20
#define ERRBUF          16384  /* room for many parse errors */

static const char usage_text[] =
	"usage: innet fabric up FILE [--workers N] [--foreground] [--timeout SEC] [--machine TAG]\n"
	"       innet fabric down (FILE | --state DIR) [--machine TAG] [--keep-logs]\n"
	"       innet fabric status (FILE | --state DIR) [--machine TAG]\n"
	"       innet fabric show FILE [--json]\n"
	"       innet fabric stop (FILE | --state DIR) SWITCH [--kill]\n"
	"       innet fabric start (FILE | --state DIR) SWITCH [--set INST.KEY=JSON]... [--timeout SEC]\n"
	"       innet fabric restart (FILE | --state DIR) SWITCH [--kill] [--set INST.KEY=JSON]...\n\n"
	"Run a topology of switches (one 'innet switch' process each) on this machine.\n\n"
	"  up       check FILE, start every switch, wait until each control socket answers\n"
	"  down     stop the switches 'up' started (SIGTERM, then SIGKILL after 5 s) and\n"
	"           remove their sockets, state file, logs and (if then empty) the state\n"
	"           directory\n"
	"  status   show which switches are running; exit 0 only if all are\n"
	"  show     print the resolved topology: ports, addresses, peers, routes\n"
	"  stop     stop one switch of a running fabric (SIGTERM; SIGKILL after 5 s)\n"
	"  start    start a stopped switch again with the settings 'up' used\n"
	"  restart  stop, then start\n\n"
	"  -w, --workers N     worker threads per switch (overrides the file)\n"
	"  -f, --foreground    stay; stop the fabric on SIGINT/SIGTERM\n"
	"  -t, --timeout SEC   how long 'up' waits for the switches (default 10)\n"
	"  -m, --machine TAG   start only the switches with \"machine\": TAG (up); keep\n"
	"                      this machine's state in fabric.TAG.json (up, down, status)\n"
	"  -s, --state DIR     use the state directory DIR instead of FILE's\n"
	"  -j, --json          'show' prints JSON\n"
	"  -k, --kill          stop/restart: SIGKILL at once (a crash), no SIGTERM\n"
	"      --keep-logs     down: keep the switches' logs in the state directory\n"
	"      --set I.K=JSON  start/restart: setting K of program instance I is JSON for\n"
	"                      this start (e.g. --set acc.join=true); repeatable\n"
	"  -h, --help          this text\n\n"
	"Exit status: 0 ok, 1 failure, 2 bad usage or bad topology file.\n"
	"See docs/man/innet-fabric.md and docs/topology.md.\n";

/* A switch process, started by us or recorded in fabric.json. */
struct proc {
	char name[INNET_NAME_MAX];
	char ctl[108];
	pid_t pid;        /* 0: none */
	bool child;       /* our own child: waitpid() tells when it is gone */
	bool exited;      /* child reaped */
	int status;       /* its wait status */
};

#define MAX_SETS 16

struct opts {
	const char *file;
	const char *node;       /* stop, start, restart: the switch */
	const char *sets[MAX_SETS]; /* --set INST.KEY=JSON */
	unsigned n_sets;
	bool kill;
	const char *state;
	const char *machine;
	uint64_t workers;
	uint64_t timeout_s;
	bool foreground;
	bool json;
	bool keep_logs;         /* down: keep the switches' logs (and so the directory) */
};

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("innet fabric: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	fputs(usage_text, stderr);
	return 2;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void ip_str(uint32_t ip, char out[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ip) };

	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

/* ------------------------------------------------------------------------ */
/* Loading.                                                                  */

/* Load and check FILE, printing every problem. Exit status in *rc on failure. */
static struct innet_topology *load(const char *file, int *rc)
{
	static char err[ERRBUF];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));

	if (t != NULL)
		return t;
	unsigned n = 1;
	for (const char *c = err; *c; c++)
		n += *c == '\n';
	if (errno == EINVAL)
		fprintf(stderr, "innet fabric: %s is not a valid topology (%u problem%s):\n%s\n",
			file, n, n == 1 ? "" : "s", err);
	else
		fprintf(stderr, "innet fabric: %s\n", err);
	*rc = errno == ENOMEM ? 1 : 2;
	return NULL;
}

/* out = dir/file (state_dir paths are short: topology.c checks the ctl
 * socket path, which is the longest). */
/* The state file: fabric.json, or fabric.<TAG>.json with --machine TAG, so
 * machines that share a file system (namespaces on one host) keep apart. */
static char state_file[INNET_NAME_MAX + 16] = "fabric.json";

static void state_path(const char *dir, const char *file, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s", dir, file) >= (int)len)
		out[0] = '\0';
}

static void log_path(const char *dir, const char *sw, char *out, size_t len)
{
	if (snprintf(out, len, "%s/%s.log", dir, sw) >= (int)len)
		out[0] = '\0';
}

/* ------------------------------------------------------------------------ */
/* The resolved topology as JSON (show --json, fabric.json).                 */

static bool json_failed; /* an insert failed: out of memory */

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

static bool emu_active(const struct innet_link_conf *l)
{
	return l->loss > 0 || l->dup > 0 || l->reorder > 0 || l->delay_us || l->jitter_us;
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
	if (emu_active(&pc->link)) {
		const struct innet_link_conf *l = &pc->link;
		json_t *e = json_object();
		jset(e, "loss", json_real(l->loss));
		jset(e, "dup", json_real(l->dup));
		jset(e, "reorder", json_real(l->reorder));
		jset(e, "delay_us", json_integer(l->delay_us));
		jset(e, "jitter_us", json_integer(l->jitter_us));
		jset(e, "egress", json_boolean(l->on_egress));
		jset(e, "ingress", json_boolean(l->on_ingress));
		char seed[24];
		snprintf(seed, sizeof(seed), "0x%016llx", (unsigned long long)l->seed);
		jset(e, "seed", json_string(seed));
		jset(o, "link", e);
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
	jset(o, "target", json_string(n->target == INNET_TARGET_XDP ? "xdp" : "udp"));
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
		jset(e, "addr", jaddr(t->nodes[sw].conf->ports[port].ip));
		jpush(links, e);
	}
	jset(o, "links", links);
	return o;
}

/* The whole topology; with procs (n_switches entries, pid 0 = not started)
 * also pids and logs, as in fabric.json. NULL when out of memory. */
static json_t *topology_json(const struct innet_topology *t, const char *file,
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
			log_path(t->state_dir, t->nodes[i].name, log, sizeof(log));
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
/* show                                                                      */

/* A port set as "0-3,5". */
static void print_ports(uint64_t mask, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < 64 && off < len; k++) {
		if (!(mask & (1ull << k)))
			continue;
		unsigned end = k;
		while (end + 1 < 64 && (mask & (1ull << (end + 1))))
			end++;
		if (end == k)
			off += (size_t)snprintf(out + off, len - off, "%s%u", off ? "," : "", k);
		else
			off += (size_t)snprintf(out + off, len - off, "%s%u-%u", off ? "," : "", k, end);
		k = end;
	}
}

/* Routes grouped by next-hop set: "via 0,1,2,3  leaf1 leaf2 ...". */
static void show_routes(const struct innet_topology *t, uint32_t sw)
{
	uint64_t *masks = calloc(t->n_nodes, sizeof(*masks));
	uint16_t hops[INNET_MAX_PORTS];
	char via[256];

	if (masks == NULL)
		return;
	for (uint32_t d = 0; d < t->n_nodes; d++) {
		int n = innet_topology_next_hops(t, sw, d, hops, INNET_MAX_PORTS);
		for (int h = 0; h < n; h++)
			masks[d] |= 1ull << hops[h];
	}
	printf("  routes:\n");
	for (uint32_t d = 0; d < t->n_nodes; d++) {
		uint64_t m = masks[d];
		if (m == 0)
			continue;
		print_ports(m, via, sizeof(via));
		printf("    via %-12s", via);
		for (uint32_t e = d; e < t->n_nodes; e++)
			if (masks[e] == m) {
				printf(" %s", t->nodes[e].name);
				masks[e] = 0;
			}
		printf("\n");
	}
	free(masks);
}

static void show_text(const struct innet_topology *t)
{
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];

	printf("topology %s: %u switch%s, %u host%s, %u link%s (seed %llu, state %s%s)\n", t->name,
	       t->n_switches, t->n_switches == 1 ? "" : "es", t->n_hosts, t->n_hosts == 1 ? "" : "s",
	       t->n_links, t->n_links == 1 ? "" : "s", (unsigned long long)t->seed, t->state_dir,
	       t->netns ? ", each node in network namespace innet-NAME-NODE" : "");
	for (uint32_t i = 0; i < t->n_switches; i++) {
		const struct innet_topo_node *n = &t->nodes[i];
		const struct innet_switch_conf *c = n->conf;
		printf("\nswitch %s  node %u  workers %u%s%s  target %s  ctl %s%s%s\n", n->name,
		       n->node_id, c->n_workers, n->machine[0] ? "  machine " : "", n->machine,
		       n->target == INNET_TARGET_XDP ? "xdp" : "udp", c->ctl_path,
		       c->metrics_addr[0] ? "  metrics " : "", c->metrics_addr);
		for (uint32_t k = 0; k < c->n_ports; k++) {
			const struct innet_port_conf *pc = &c->ports[k];
			const struct innet_topo_peer *pe = &n->peers[k];
			ip_str(pc->ip, a);
			ip_str(pc->peer_ip, b);
			printf("  port %-2u %-15s -> %-15s %s", k, a, b, t->nodes[pe->node].name);
			if (pc->dev[0] != '\0')
				printf(" dev %s", pc->dev);
			if (pe->port != INNET_TOPO_NO_PORT)
				printf(" port %u", pe->port);
			else
				printf(" (host)");
			const struct innet_link_conf *l = &pc->link;
			if (emu_active(l))
				printf("  [loss %g dup %g reorder %g delay %uus jitter %uus%s%s]",
				       l->loss, l->dup, l->reorder, l->delay_us, l->jitter_us,
				       l->on_egress ? " egress" : "", l->on_ingress ? " ingress" : "");
			printf("\n");
		}
		for (uint32_t k = 0; k < c->n_progs; k++) {
			const struct innet_prog_conf *pc = &c->progs[k];
			printf("  program %s (%s) udp", pc->name, pc->program->name);
			for (uint32_t u = 0; u < pc->n_udp; u++)
				printf("%s%u", u ? "," : " ", pc->udp[u]);
			printf("%s%s\n", pc->args_json ? " args " : "", pc->args_json ? pc->args_json : "");
		}
		show_routes(t, i);
	}
	if (t->n_hosts)
		printf("\n");
	for (uint32_t i = t->n_switches; i < t->n_nodes; i++) {
		const struct innet_topo_node *n = &t->nodes[i];
		ip_str(n->addr, a);
		printf("host %-8s node %-5u %-15s --", n->name, n->node_id, a);
		for (uint32_t k = 0; k < n->n_links; k++) {
			const struct innet_topo_link *l = &t->links[n->links[k]];
			printf(" %s port %u", t->nodes[l->a == i ? l->b : l->a].name,
			       l->a == i ? l->b_port : l->a_port);
		}
		printf("\n");
	}
}

static int fabric_show(const struct opts *o)
{
	int rc = 0;
	struct innet_topology *t = load(o->file, &rc);

	if (t == NULL)
		return rc;
	if (o->json) {
		json_t *j = topology_json(t, o->file, NULL);
		if (j == NULL || json_dumpf(j, stdout, JSON_INDENT(2)) < 0) {
			fprintf(stderr, "innet fabric: out of memory\n");
			rc = 1;
		}
		printf("\n");
		json_decref(j);
	} else {
		show_text(t);
	}
	innet_topology_free(t);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* Processes.                                                                */

/* True if pid is alive (not a zombie) and runs "innet switch ... --name sw". */
static bool is_switch_process(pid_t pid, const char *sw)
{
	char path[64], buf[8192];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *state = strrchr(buf, ')');
	if (state == NULL || state[1] != ' ' || state[2] == 'Z' || state[2] == 'X')
		return false;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *argv[64];
	int argc = 0;
	for (const char *s = buf; s < buf + n && argc < 64; s += strlen(s) + 1)
		argv[argc++] = s;
	if (argc < 2 || strcmp(argv[1], "switch") != 0)
		return false;
	for (int i = 2; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--name") && !strcmp(argv[i + 1], sw))
			return true;
	return false;
}

static bool proc_alive(struct proc *p)
{
	if (p->pid <= 0 || p->exited)
		return false;
	if (p->child) {
		pid_t r = waitpid(p->pid, &p->status, WNOHANG);
		if (r == p->pid || (r < 0 && errno == ECHILD)) {
			p->exited = true;
			return false;
		}
		return true;
	}
	return is_switch_process(p->pid, p->name);
}

/* Wait up to ms for every process to be gone; returns how many are left. */
static int wait_gone(struct proc *procs, size_t n, unsigned ms)
{
	uint64_t deadline = now_ms() + ms;

	for (;;) {
		int left = 0;
		for (size_t i = 0; i < n; i++)
			left += proc_alive(&procs[i]);
		if (left == 0 || now_ms() >= deadline)
			return left;
		sleep_ms(POLL_MS);
	}
}

/* SIGTERM every live process, SIGKILL what is left after STOP_GRACE_MS.
 * Returns how many could not be stopped. */
static int stop_procs(struct proc *procs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (proc_alive(&procs[i]))
			kill(procs[i].pid, SIGTERM);
	if (wait_gone(procs, n, STOP_GRACE_MS) == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (proc_alive(&procs[i])) {
			fprintf(stderr, "innet fabric: %s (pid %d) ignored SIGTERM; killing it\n",
				procs[i].name, (int)procs[i].pid);
			kill(procs[i].pid, SIGKILL);
		}
	int left = wait_gone(procs, n, 1000);
	for (size_t i = 0; i < n; i++)
		if (proc_alive(&procs[i]))
			fprintf(stderr, "innet fabric: %s (pid %d) is still running\n", procs[i].name,
				(int)procs[i].pid);
	return left;
}

/* Remove each ctl socket (if it is one) and fabric.json. */
static void clean_state(const char *dir, const struct proc *procs, size_t n)
{
	char path[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < n; i++)
		if (procs[i].ctl[0] && lstat(procs[i].ctl, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(procs[i].ctl);
	state_path(dir, state_file, path, sizeof(path));
	unlink(path);
}

/* True if something accepts connections on the unix socket at path. */
static bool ctl_accepts(const char *path)
{
	static const int types[] = { SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return false;
		int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		int e = errno;
		close(fd);
		if (r == 0)
			return true;
		if (e != EPROTOTYPE)
			return false;
	}
	return false;
}

/* The last `lines` lines of a log file, indented, on stderr. */
static void print_log_tail(const char *path, int lines)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	off_t size = lseek(fd, 0, SEEK_END);
	off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	char *start = buf + n;
	for (int seen = 0; start > buf; start--)
		if (start[-1] == '\n' && ++seen == lines)
			break;
	fprintf(stderr, "  last lines of %s:\n", path);
	for (char *line = strtok(start, "\n"); line != NULL; line = strtok(NULL, "\n"))
		fprintf(stderr, "  | %s\n", line);
}

/* Read <dir>/fabric.json into procs (allocated). Returns the count, 0 if
 * there is no state file, -1 on a bad one (reported). */
static int read_state(const char *dir, struct proc **out)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *sw;
	size_t i;

	*out = NULL;
	state_path(dir, state_file, path, sizeof(path));
	if (access(path, F_OK) != 0)
		return 0;
	json_t *root = json_load_file(path, 0, &je);
	json_t *sws = json_object_get(root, "switches");
	if (root == NULL || !json_is_array(sws)) {
		fprintf(stderr, "innet fabric: %s: unreadable state: %s\n"
			"  (if no switch of this fabric is running, remove it by hand)\n", path,
			root ? "no \"switches\" array" : je.text);
		json_decref(root);
		return -1;
	}
	struct proc *procs = calloc(json_array_size(sws) + 1, sizeof(*procs));
	if (procs == NULL) {
		json_decref(root);
		fprintf(stderr, "innet fabric: out of memory\n");
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
static int write_state(const struct innet_topology *t, const char *file, const struct proc *procs)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	json_t *j = topology_json(t, file, procs);
	int r = 0;

	state_path(t->state_dir, state_file, path, sizeof(path));
	char tmpname[sizeof(state_file) + 8];
	snprintf(tmpname, sizeof(tmpname), ".%s.tmp", state_file);
	state_path(t->state_dir, tmpname, tmp, sizeof(tmp));
	errno = 0;
	if (j == NULL)
		r = -ENOMEM;
	else if (json_dump_file(j, tmp, JSON_INDENT(2)) < 0 || rename(tmp, path) < 0)
		r = errno ? -errno : -EIO;
	json_decref(j);
	if (r < 0) {
		unlink(tmp);
		fprintf(stderr, "innet fabric: cannot write %s: %s\n", path, strerror(-r));
	}
	return r;
}

/* ------------------------------------------------------------------------ */
/* up                                                                        */

/* fork + exec `innet switch --topology FILE --name SW [--workers N]`, with
 * stdout and stderr to its log, in its own session (so that a terminal's
 * Ctrl-C reaches only us: we stop the switches in order). */
static pid_t spawn_switch(const char *exe, const char *file, const char *sw, const char *log,
			  uint64_t workers, const sigset_t *mask, bool append,
			  const struct innet_topology *t)
{
	char wbuf[24];
	const char *argv[] = { exe, "switch", "--topology", file, "--name", sw,
			       workers ? "--workers" : NULL /* ends argv here */, wbuf, NULL };
	int fd = open(log, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);

	snprintf(wbuf, sizeof(wbuf), "%llu", (unsigned long long)workers);
	if (fd < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		setsid();
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigprocmask(SIG_SETMASK, mask, NULL);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		int idx = t != NULL && t->netns ? innet_topology_find(t, sw) : -1;
		if (idx >= 0 && innet_topology_enter(t, (uint32_t)idx) != 0) {
			fprintf(stderr, "innet fabric: cannot enter the namespace of %s: %s\n", sw,
				strerror(errno));
			_exit(127);
		}
		execv(exe, (char *const *)argv);
		fprintf(stderr, "innet fabric: cannot run %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	int e = errno;
	close(fd);
	errno = e;
	return pid;
}

static void describe_exit(const struct proc *p, char *out, size_t len)
{
	if (WIFEXITED(p->status))
		snprintf(out, len, "exited with status %d", WEXITSTATUS(p->status));
	else if (WIFSIGNALED(p->status))
		snprintf(out, len, "was killed by %s", strsignal(WTERMSIG(p->status)));
	else
		snprintf(out, len, "stopped");
}

/* Wait until every started switch's ctl socket accepts a connection. 0, or
 * 1 after reporting a failure (exit, timeout, signal). */
static int wait_ready(const struct innet_topology *t, struct proc *procs, const sigset_t *set,
		      uint64_t timeout_s)
{
	uint64_t deadline = now_ms() + timeout_s * 1000;
	struct timespec poll = { .tv_nsec = POLL_MS * 1000000L };
	bool *ready = calloc(t->n_switches, sizeof(*ready));
	char log[PATH_MAX], why[128];
	int rc = 1;

	if (ready == NULL)
		return 1;
	for (;;) {
		uint32_t waiting = 0;
		for (uint32_t i = 0; i < t->n_switches; i++) {
			struct proc *p = &procs[i];
			if (p->pid <= 0 || ready[i])
				continue;
			if (!proc_alive(p)) {
				describe_exit(p, why, sizeof(why));
				fprintf(stderr, "innet fabric: switch %s %s before its control socket "
					"came up\n", p->name, why);
				log_path(t->state_dir, p->name, log, sizeof(log));
				print_log_tail(log, 5);
				goto out;
			}
			ready[i] = ctl_accepts(p->ctl);
			waiting += !ready[i];
		}
		if (waiting == 0) {
			rc = 0;
			goto out;
		}
		if (now_ms() >= deadline) {
			fprintf(stderr, "innet fabric: timed out after %llu s waiting for the control "
				"socket of:", (unsigned long long)timeout_s);
			for (uint32_t i = 0; i < t->n_switches; i++)
				if (procs[i].pid > 0 && !ready[i])
					fprintf(stderr, " %s", procs[i].name);
			fprintf(stderr, "\n  (logs in %s/)\n", t->state_dir);
			goto out;
		}
		int sig = sigtimedwait(set, NULL, &poll);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			fprintf(stderr, "innet fabric: interrupted while starting\n");
			goto out;
		}
	}
out:
	free(ready);
	return rc;
}

/* --foreground: wait for a signal (stop everything) or for every switch to
 * exit. Returns the exit status. */
static int stay(const struct innet_topology *t, struct proc *procs, const sigset_t *set)
{
	char why[128];

	for (;;) {
		int sig = sigwaitinfo(set, NULL);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			printf("fabric %s: stopping (%s)\n", t->name, strsignal(sig));
			return stop_procs(procs, t->n_switches) ? 1 : 0;
		}
		uint32_t alive = 0;
		for (uint32_t i = 0; i < t->n_switches; i++) {
			struct proc *p = &procs[i];
			if (p->pid <= 0 || p->exited)
				continue;
			if (proc_alive(p)) {
				alive++;
				continue;
			}
			describe_exit(p, why, sizeof(why));
			fprintf(stderr, "innet fabric: switch %s %s\n", p->name, why);
		}
		if (alive == 0) {
			fprintf(stderr, "innet fabric: every switch has exited\n");
			return 1;
		}
	}
}

static int fabric_up(const struct opts *o)
{
	char file[PATH_MAX], exe[PATH_MAX], log[PATH_MAX];
	sigset_t set, old;
	struct proc *procs = NULL, *prev = NULL;
	uint32_t started = 0, selected = 0;
	int rc = 0;

	if (realpath(o->file, file) == NULL) {
		fprintf(stderr, "innet fabric: %s: %s\n", o->file, strerror(errno));
		return 2;
	}
	struct innet_topology *t = load(file, &rc);
	if (t == NULL)
		return rc;
	rc = 1;
	for (uint32_t i = 0; i < t->n_switches && o->workers; i++)
		t->nodes[i].conf->n_workers = (uint32_t)o->workers; /* as the switches will run */
	procs = calloc(t->n_switches, sizeof(*procs));
	if (procs == NULL)
		goto out;
	for (uint32_t i = 0; i < t->n_switches; i++) {
		struct proc *p = &procs[i];
		const struct innet_topo_node *n = &t->nodes[i];
		snprintf(p->name, sizeof(p->name), "%s", n->name);
		snprintf(p->ctl, sizeof(p->ctl), "%s", n->conf->ctl_path);
		p->child = true;
		p->pid = o->machine == NULL || !strcmp(o->machine, n->machine) ? -1 : 0;
		selected += p->pid < 0;
	}
	if (selected == 0) {
		fprintf(stderr, "innet fabric: no switch in %s has \"machine\": \"%s\"\n", file,
			o->machine);
		rc = 2;
		goto out;
	}

	/* Refuse to start twice. */
	int n_prev = read_state(t->state_dir, &prev);
	for (int i = 0; i < n_prev; i++)
		if (proc_alive(&prev[i])) {
			fprintf(stderr, "innet fabric: %s is already up (switch %s is pid %d); "
				"run 'innet fabric down %s' first\n", t->name, prev[i].name,
				(int)prev[i].pid, o->file);
			goto out;
		}
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0) {
		fprintf(stderr, "innet fabric: cannot find my executable: %s\n", strerror(errno));
		goto out;
	}
	exe[len] = '\0';
	int r = tools_mkdir_p(t->state_dir);
	if (r < 0) {
		fprintf(stderr, "innet fabric: cannot create %s: %s\n", t->state_dir, strerror(-r));
		goto out;
	}

	if (t->netns) {
		char nerr[1024];
		if (innet_topology_netns_up(t, nerr, sizeof(nerr)) != 0) {
			fprintf(stderr, "innet fabric: %s\n", nerr);
			goto out;
		}
	}

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	for (uint32_t i = 0; i < t->n_switches; i++) {
		struct proc *p = &procs[i];
		if (p->pid == 0)
			continue;
		unlink(p->ctl);
		log_path(t->state_dir, p->name, log, sizeof(log));
		p->pid = spawn_switch(exe, file, p->name, log, o->workers, &old, false, t);
		if (p->pid < 0) {
			fprintf(stderr, "innet fabric: cannot start switch %s: %s\n", p->name,
				strerror(errno));
			p->pid = 0;
			goto out_stop;
		}
		started++;
	}
	if (write_state(t, file, procs) < 0 || wait_ready(t, procs, &set, o->timeout_s) != 0)
		goto out_stop;

	printf("fabric %s is up: %u switch%s%s, %u host%s, %u link%s; state in %s\n", t->name,
	       started, started == 1 ? "" : "es", o->machine ? " on this machine" : "",
	       t->n_hosts, t->n_hosts == 1 ? "" : "s", t->n_links, t->n_links == 1 ? "" : "s",
	       t->state_dir);
	fflush(stdout);
	rc = 0;
	if (!o->foreground)
		goto out_mask;
	printf("running in the foreground; SIGINT or SIGTERM stops it\n");
	fflush(stdout);
	rc = stay(t, procs, &set);
	stop_procs(procs, t->n_switches);
	clean_state(t->state_dir, procs, t->n_switches);
	if (t->netns)
		innet_topology_netns_down(t->name);
	goto out_mask;

out_stop:
	if (started > 0)
		fprintf(stderr, "innet fabric: stopping the %u switch%s started\n", started,
			started == 1 ? "" : "es");
	stop_procs(procs, t->n_switches);
	clean_state(t->state_dir, procs, t->n_switches);
	if (t->netns)
		innet_topology_netns_down(t->name);
out_mask:
	sigprocmask(SIG_SETMASK, &old, NULL);
out:
	free(prev);
	free(procs);
	innet_topology_free(t);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* down, status                                                              */

/* The state directory from --state or from the topology file. */
static int state_dir_of(const struct opts *o, char *out, size_t len)
{
	int rc = 0;

	if (o->state != NULL) {
		snprintf(out, len, "%s", o->state);
		return 0;
	}
	struct innet_topology *t = load(o->file, &rc);
	if (t == NULL)
		return rc;
	snprintf(out, len, "%s", t->state_dir);
	innet_topology_free(t);
	return 0;
}

static int fabric_down(const struct opts *o)
{
	char dir[PATH_MAX];
	struct proc *procs;
	int rc = state_dir_of(o, dir, sizeof(dir));

	if (rc != 0)
		return rc;
	int n = read_state(dir, &procs);
	if (n < 0)
		return 1;
	if (n == 0) {
		printf("nothing to stop: no %s/%s\n", dir, state_file);
		return 0;
	}
	int running = 0;
	for (int i = 0; i < n; i++)
		running += proc_alive(&procs[i]);
	int left = stop_procs(procs, (size_t)n);
	printf("stopped %d switch%s (%d recorded); ", running - left, running - left == 1 ? "" : "es", n);
	if (left != 0) {
		printf("%d still running: state in %s kept\n", left, dir);
		free(procs);
		return 1;
	}
	clean_state(dir, procs, (size_t)n);
	if (o->file != NULL) {
		/* netns mode: the namespaces (and their veths) go too */
		int lrc;
		struct innet_topology *t = load(o->file, &lrc);
		if (t != NULL && t->netns) {
			int gone = innet_topology_netns_down(t->name);
			if (gone > 0)
				printf("removed %d network namespace%s of %s; ", gone, gone == 1 ? "" : "s",
				       t->name);
		}
		innet_topology_free(t);
	}
	if (o->keep_logs) {
		printf("removed the sockets and %s; logs kept in %s\n", state_file, dir);
	} else {
		for (int i = 0; i < n; i++) {
			char path[PATH_MAX];
			log_path(dir, procs[i].name, path, sizeof(path));
			if (path[0] != '\0')
				unlink(path);
		}
		/* Only if empty: other tools (innet kv) keep their files there too. */
		if (rmdir(dir) == 0)
			printf("removed the sockets, %s, the logs and %s\n", state_file, dir);
		else
			printf("removed the sockets, %s and the logs; %s kept: %s\n", state_file, dir,
			       errno == ENOTEMPTY || errno == EEXIST ? "it holds other files" : strerror(errno));
	}
	free(procs);
	return 0;
}

/* Netns mode: what the kernel's link faults did, per link and direction
 * (docs/topology.md, "Link faults in netns mode"). */
static void wires_status(const char *file)
{
	int lrc;
	struct innet_topology *t = load(file, &lrc);
	if (t == NULL || !t->netns) {
		innet_topology_free(t);
		return;
	}
	for (uint32_t li = 0; li < t->n_links; li++) {
		const struct innet_topo_link *l = &t->links[li];
		for (int d = 0; d < 2; d++) {
			struct innet_wire_stats ws;
			int rc = innet_topology_wire_stats(t, li, d, &ws);
			if (rc == -ENOENT)
				break;
			const char *from = t->nodes[d ? l->a : l->b].name, *to = t->nodes[d ? l->b : l->a].name;
			if (rc == -EOPNOTSUPP)
				printf("link %s -> %s: faults by netem\n", from, to);
			else if (rc != 0)
				printf("link %s -> %s: faults: %s\n", from, to, strerror(-rc));
			else
				printf("link %s -> %s: %lu frames, %lu lost, %lu duplicated, %lu reordered "
				       "(slow lane)\n", from, to, (unsigned long)ws.frames,
				       (unsigned long)ws.lost, (unsigned long)ws.duplicated,
				       (unsigned long)ws.slowed);
		}
	}
	innet_topology_free(t);
}

static int fabric_status(const struct opts *o)
{
	char dir[PATH_MAX];
	struct proc *procs;
	int rc = state_dir_of(o, dir, sizeof(dir)), running = 0, started = 0;

	if (rc != 0)
		return rc;
	int n = read_state(dir, &procs);
	if (n < 0)
		return 1;
	if (n == 0) {
		printf("fabric down: no %s/%s\n", dir, state_file);
		return 1;
	}
	printf("%-16s %-8s %-8s %s\n", "SWITCH", "PID", "STATE", "CTL");
	for (int i = 0; i < n; i++) {
		struct proc *p = &procs[i];
		bool alive = proc_alive(p);
		char pid[16] = "-";
		if (p->pid > 0)
			snprintf(pid, sizeof(pid), "%d", (int)p->pid);
		running += alive;
		started += p->pid > 0;
		printf("%-16s %-8s %-8s %s\n", p->name, pid,
		       alive ? "running" : p->pid > 0 ? "stopped" : "not started", p->ctl);
	}
	/* Switches of other machines (up --machine) are "not started" here. */
	printf("%d of %d switches running%s (state in %s)\n", running, started,
	       started < n ? " on this machine" : "", dir);
	free(procs);
	if (o->file != NULL)
		wires_status(o->file);
	return running == started && started > 0 ? 0 : 1;
}


/* ------------------------------------------------------------------------ */
/* stop, start, restart: one switch of a running fabric                      */

/* fabric.json of the fabric (FILE's state_dir, or --state DIR) and the index
 * of switch o->node in its "switches". NULL (reported) if there is none. */
static json_t *load_state_json(const struct opts *o, char *dir, size_t dirlen, size_t *idx,
			       int *rc)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *sw;
	size_t i;

	if ((*rc = state_dir_of(o, dir, dirlen)) != 0)
		return NULL;
	*rc = 1;
	state_path(dir, state_file, path, sizeof(path));
	if (access(path, F_OK) != 0) {
		fprintf(stderr, "innet fabric: no fabric is up here: no %s\n", path);
		return NULL;
	}
	json_t *root = json_load_file(path, 0, &je);
	json_t *sws = json_object_get(root, "switches");
	if (root == NULL || !json_is_array(sws) ||
	    !json_is_string(json_object_get(root, "topology"))) {
		fprintf(stderr, "innet fabric: %s: unreadable state%s%s\n", path,
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
	fprintf(stderr, "innet fabric: the fabric in %s has no switch '%s'\n", dir, o->node);
	*rc = 2;
	json_decref(root);
	return NULL;
}

static void proc_of(json_t *sw, struct proc *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", json_string_value(json_object_get(sw, "name")) ?: "?");
	snprintf(p->ctl, sizeof(p->ctl), "%s", json_string_value(json_object_get(sw, "ctl")) ?: "");
	json_int_t pid = json_integer_value(json_object_get(sw, "pid"));
	p->pid = pid > 1 && pid <= INT_MAX ? (pid_t)pid : 0;
}

/* Write fabric.json (root) back atomically. 0 or -1 (reported). */
static int save_state_json(const char *dir, json_t *root)
{
	char path[PATH_MAX], tmp[PATH_MAX], tmpname[sizeof(state_file) + 8];

	state_path(dir, state_file, path, sizeof(path));
	snprintf(tmpname, sizeof(tmpname), ".%s.tmp", state_file);
	state_path(dir, tmpname, tmp, sizeof(tmp));
	if (json_dump_file(root, tmp, JSON_INDENT(2)) < 0 || rename(tmp, path) < 0) {
		fprintf(stderr, "innet fabric: cannot write %s: %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* Stop one switch: SIGTERM (SIGKILL after STOP_GRACE_MS), or SIGKILL at
 * once with --kill. 0 stopped or not running, 1 still running. */
static int stop_one(struct proc *p, bool kill_now)
{
	if (!proc_alive(p)) {
		printf("switch %s is not running\n", p->name);
		return 0;
	}
	kill(p->pid, kill_now ? SIGKILL : SIGTERM);
	if (wait_gone(p, 1, kill_now ? 2000 : STOP_GRACE_MS) != 0 && !kill_now) {
		fprintf(stderr, "innet fabric: %s (pid %d) ignored SIGTERM; killing it\n", p->name,
			(int)p->pid);
		kill(p->pid, SIGKILL);
		wait_gone(p, 1, 1000);
	}
	if (proc_alive(p)) {
		fprintf(stderr, "innet fabric: %s (pid %d) is still running\n", p->name, (int)p->pid);
		return 1;
	}
	printf("stopped switch %s (pid %d%s)\n", p->name, (int)p->pid, kill_now ? ", killed" : "");
	return 0;
}

static int fabric_stop(const struct opts *o)
{
	char dir[PATH_MAX];
	size_t idx;
	int rc;
	json_t *root = load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;

	if (root == NULL)
		return rc;
	proc_of(json_array_get(json_object_get(root, "switches"), idx), &p);
	rc = stop_one(&p, o->kill);
	json_decref(root);
	return rc;
}

/* Apply one --set INST.KEY=JSON to the switch called sw in topology JSON
 * top. 0, or 2 (reported). */
static int apply_set(json_t *top, const char *sw, const char *set)
{
	char inst[INNET_NAME_MAX + 1];
	const char *dot = strchr(set, '.'), *eq = strchr(set, '=');
	json_error_t je;
	json_t *s, *pr;
	size_t i, k;

	if (dot == NULL || eq == NULL || dot > eq || dot == set || eq == dot + 1 ||
	    (size_t)(dot - set) >= sizeof(inst)) {
		fprintf(stderr, "innet fabric: --set wants INSTANCE.KEY=JSON, not '%s'\n", set);
		return 2;
	}
	memcpy(inst, set, (size_t)(dot - set));
	inst[dot - set] = '\0';
	char key[256];
	if ((size_t)(eq - dot - 1) >= sizeof(key)) {
		fprintf(stderr, "innet fabric: --set: key too long in '%s'\n", set);
		return 2;
	}
	memcpy(key, dot + 1, (size_t)(eq - dot - 1));
	key[eq - dot - 1] = '\0';
	json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, &je);
	if (val == NULL) {
		fprintf(stderr, "innet fabric: --set %s: the value is not JSON: %s\n", set, je.text);
		return 2;
	}
	json_array_foreach(json_object_get(top, "switches"), i, s) {
		if (!json_is_string(json_object_get(s, "name")) ||
		    strcmp(json_string_value(json_object_get(s, "name")), sw) != 0)
			continue;
		json_array_foreach(json_object_get(s, "programs"), k, pr) {
			const char *n = json_string_value(json_object_get(pr, "name"));
			if (n == NULL || strcmp(n, inst) != 0)
				continue;
			json_t *args = json_object_get(pr, "args");
			if (args == NULL) {
				args = json_object();
				json_object_set_new(pr, "args", args);
			}
			if (!json_is_object(args) || json_object_set_new(args, key, val) < 0) {
				fprintf(stderr, "innet fabric: --set %s: the instance's \"args\" is not "
					"an object\n", set);
				return 2;
			}
			return 0;
		}
	}
	json_decref(val);
	fprintf(stderr, "innet fabric: --set %s: switch %s has no program instance '%s' in the "
		"topology file\n", set, sw, inst);
	return 2;
}

/* The topology file to start sw from: the recorded one, or with --set a copy
 * in the state dir with those settings changed (checked by loading it). */
static int start_topology(const struct opts *o, const char *dir, const char *file, char *out,
			  size_t len)
{
	json_error_t je;
	int rc = 2;

	snprintf(out, len, "%s", file);
	if (o->n_sets == 0)
		return 0;
	json_t *top = json_load_file(file, 0, &je);
	if (top == NULL) {
		fprintf(stderr, "innet fabric: %s: %s\n", file, je.text);
		return 2;
	}
	for (unsigned i = 0; i < o->n_sets; i++)
		if ((rc = apply_set(top, o->node, o->sets[i])) != 0)
			goto out;
	rc = 1;
	if (snprintf(out, len, "%s/%s.restart.json", dir, o->node) >= (int)len)
		goto out;
	if (json_dump_file(top, out, JSON_INDENT(1)) < 0) {
		fprintf(stderr, "innet fabric: cannot write %s: %s\n", out, strerror(errno));
		goto out;
	}
	struct innet_topology *t = load(out, &rc);
	if (t == NULL)
		goto out;
	innet_topology_free(t);
	rc = 0;
out:
	json_decref(top);
	return rc;
}

/* Start switch o->node; topo_ready: the topology file start_topology()
 * made already (restart checks --set before it stops anything), or NULL. */
static int start_switch(const struct opts *o, const char *topo_ready)
{
	char dir[PATH_MAX], topo[PATH_MAX], exe[PATH_MAX], log[PATH_MAX];
	size_t idx;
	int rc;
	json_t *root = load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;
	sigset_t none;

	if (root == NULL)
		return rc;
	json_t *sw = json_array_get(json_object_get(root, "switches"), idx);
	proc_of(sw, &p);
	if (proc_alive(&p)) {
		fprintf(stderr, "innet fabric: switch %s is running (pid %d); stop it first (or use "
			"restart)\n", p.name, (int)p.pid);
		rc = 1;
		goto out;
	}
	if (topo_ready != NULL)
		snprintf(topo, sizeof(topo), "%s", topo_ready);
	else if ((rc = start_topology(o, dir, json_string_value(json_object_get(root, "topology")),
				      topo, sizeof(topo))) != 0)
		goto out;
	rc = 1;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len < 0) {
		fprintf(stderr, "innet fabric: cannot find my executable: %s\n", strerror(errno));
		goto out;
	}
	exe[len] = '\0';
	json_int_t workers = json_integer_value(json_object_get(sw, "workers"));
	log_path(dir, p.name, log, sizeof(log));
	if (p.ctl[0]) {
		struct stat st;
		if (lstat(p.ctl, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(p.ctl);
	}
	sigemptyset(&none);
	int lrc;
	struct innet_topology *t = load(topo, &lrc);   /* netns mode: its namespace */
	p.pid = spawn_switch(exe, topo, p.name, log, workers > 0 ? (uint64_t)workers : 0, &none, true, t);
	innet_topology_free(t);
	if (p.pid < 0) {
		fprintf(stderr, "innet fabric: cannot start switch %s: %s\n", p.name, strerror(errno));
		goto out;
	}
	p.child = true;
	p.exited = false;
	uint64_t deadline = now_ms() + o->timeout_s * 1000;
	for (;;) {
		char why[128];
		if (!proc_alive(&p)) {
			describe_exit(&p, why, sizeof(why));
			fprintf(stderr, "innet fabric: switch %s %s before its control socket came up\n",
				p.name, why);
			print_log_tail(log, 5);
			goto out;
		}
		if (ctl_accepts(p.ctl))
			break;
		if (now_ms() >= deadline) {
			fprintf(stderr, "innet fabric: timed out after %llu s waiting for the control "
				"socket of %s; stopping it\n", (unsigned long long)o->timeout_s, p.name);
			stop_one(&p, true);
			goto out;
		}
		sleep_ms(POLL_MS);
	}
	json_object_set_new(sw, "pid", json_integer(p.pid));
	json_object_set_new(sw, "log", json_string(log));
	if (o->n_sets > 0)
		json_object_set_new(sw, "topology", json_string(topo));
	else
		json_object_del(sw, "topology");
	if (save_state_json(dir, root) < 0) {
		stop_one(&p, false);
		goto out;
	}
	printf("started switch %s (pid %d)%s%s\n", p.name, (int)p.pid, o->n_sets ? " from " : "",
	       o->n_sets ? topo : "");
	rc = 0;
out:
	json_decref(root);
	return rc;
}

static int fabric_start(const struct opts *o)
{
	return start_switch(o, NULL);
}

static int fabric_restart(const struct opts *o)
{
	char dir[PATH_MAX], topo[PATH_MAX];
	size_t idx;
	int rc;
	json_t *root = load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;

	if (root == NULL)
		return rc;
	proc_of(json_array_get(json_object_get(root, "switches"), idx), &p);
	rc = start_topology(o, dir, json_string_value(json_object_get(root, "topology")), topo,
			    sizeof(topo));
	json_decref(root);
	if (rc != 0)
		return rc;
	if ((rc = stop_one(&p, o->kill)) != 0)
		return rc;
	return start_switch(o, topo);
}

/* ------------------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end != '\0' || s[0] == '-' || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cmd_fabric(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workers", required_argument, NULL, 'w' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 't' },
		{ "machine", required_argument, NULL, 'm' },
		{ "state", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "kill", no_argument, NULL, 'k' },
		{ "keep-logs", no_argument, NULL, 'L' },
		{ "set", required_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		int (*fn)(const struct opts *o);
		const char *allowed;  /* options it takes */
	} subs[] = {
		{ "up", fabric_up, "wftm" },
		{ "down", fabric_down, "smL" },
		{ "status", fabric_status, "sm" },
		{ "show", fabric_show, "j" },
		{ "stop", fabric_stop, "smk" },
		{ "start", fabric_start, "smxt" },
		{ "restart", fabric_restart, "smkxt" },
	};
	struct opts o = { .timeout_s = 10 };
	int c, sub = -1;

	if (argc < 2)
		return usage_error("missing subcommand (up, down, status, show, stop, start or restart)");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (!strcmp(argv[1], subs[i].name))
			sub = (int)i;
	if (sub < 0)
		return usage_error("unknown subcommand '%s'", argv[1]);

	argc--;
	argv++;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":w:ft:m:s:jkh", longopts, NULL)) != -1) {
		char opt[3] = { '-', (char)optopt, '\0' };
		if (c == 'h') {
			fputs(usage_text, stdout);
			return 0;
		}
		if (c == '?')
			return usage_error("unknown option '%s'", optopt ? opt : argv[optind - 1]);
		if (c == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		if (strchr(subs[sub].allowed, c) == NULL)
			return usage_error("'%s' does not take option '%s'", subs[sub].name,
					   argv[optind - 1]);
		switch (c) {
		case 'w':
			if (parse_u64(optarg, 1, INNET_TOPO_MAX_WORKERS, &o.workers) < 0)
				return usage_error("--workers wants 1 to 256, not '%s'", optarg);
			break;
		case 't':
			if (parse_u64(optarg, 1, 3600, &o.timeout_s) < 0)
				return usage_error("--timeout wants 1 to 3600 seconds, not '%s'", optarg);
			break;
		case 'f': o.foreground = true; break;
		case 'm': o.machine = optarg; break;
		case 's': o.state = optarg; break;
		case 'j': o.json = true; break;
		case 'k': o.kill = true; break;
		case 'L': o.keep_logs = true; break;
		case 'x':
			if (o.n_sets == MAX_SETS)
				return usage_error("at most %d --set options", MAX_SETS);
			o.sets[o.n_sets++] = optarg;
			break;
		}
	}
	bool one_switch = strchr(subs[sub].allowed, 'k') || strchr(subs[sub].allowed, 'x');
	if (optind < argc && (!one_switch || o.state == NULL))
		o.file = argv[optind++];
	if (one_switch) {
		if (optind == argc)
			return usage_error("'%s' needs the SWITCH to act on", subs[sub].name);
		o.node = argv[optind++];
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (o.file != NULL && o.state != NULL)
		return usage_error("give either FILE or --state DIR, not both");
	if (o.machine != NULL) {
		size_t n = strlen(o.machine);
		if (n == 0 || n > INNET_TOPO_NAME_MAX || strspn(o.machine, "abcdefghijklmnopqrstuvwxyz"
					   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != n)
			return usage_error("--machine wants a name (letters, digits, _ . -), not '%s'",
					   o.machine);
		snprintf(state_file, sizeof(state_file), "fabric.%s.json", o.machine);
	}
	if (o.file == NULL && o.state == NULL)
		return usage_error("missing FILE%s", strchr(subs[sub].allowed, 's') ? " (or --state DIR)" : "");
	return subs[sub].fn(&o);
}
