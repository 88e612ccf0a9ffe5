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
 * This file parses the arguments and prints; the work — processes, state in
 * <state_dir>/fabric.json, namespaces — is the library's fabric module
 * (src/fabric/fabric*.c, innet/fabric.h), whose messages it prints:
 * progress on stdout, problems on stderr.
 *
 * --set INSTANCE.KEY=JSON (start, restart) overrides one setting of one of
 * the switch's program instances for this start (e.g. `--set acc.join=true`
 * restarts a Paxos acceptor silent, as its join rule requires;
 * docs/consensus.md).
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

#include "innet/parse.h"
#include "innet/fabric.h"
#include "innet/topology.h"
#include "cli/cmds.h"

#define MAX_SETS        16

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

static void ip_str(uint32_t ip, char out[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ip) };

	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

static void say(void *arg, bool problem, const char *line);

/* Load and check FILE, printing every problem (the library's
 * innet_fabric_load). Exit status in *rc on failure. */
static struct innet_topology *load(const char *file, int *rc)
{
	const struct innet_fabric_opts lo = { .say = say };
	struct innet_topology *t = innet_fabric_load(file, &lo);

	if (t == NULL)
		*rc = errno == ENOMEM ? 1 : 2;
	return t;
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
		       innet_target_info(n->target)->name, c->ctl_path,
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
			if (pc->iface[0] != '\0') {
				const struct innet_topo_link *tl = &t->links[pe->link];
				uint32_t gw = tl->a == i ? tl->a_gw : tl->b_gw;
				printf("  raw %s", pc->iface);
				if (gw != 0) {
					ip_str(gw, a);
					printf(" (its gateway %s)", a);
				}
			}
			const struct innet_link_conf *l = &pc->link;
			if (innet_link_faulty(l))
				printf("  [loss %g dup %g reorder %g delay %uus jitter %uus%s%s]",
				       l->loss, l->dup, l->reorder, l->delay_us, l->jitter_us,
				       l->on_egress ? " egress" : "", l->on_ingress ? " ingress" : "");
			printf("\n");
		}
		for (uint32_t k = 0; k < c->n_progs; k++) {
			const struct innet_prog_conf *pc = &c->progs[k];
			printf("  program %s (%s)%s udp", pc->name, pc->program->name,
			       pc->raw ? " raw" : "");
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
		char *j = innet_fabric_topology_json(t, o->file);
		if (j == NULL) {
			fprintf(stderr, "innet fabric: out of memory\n");
			rc = 1;
		} else {
			printf("%s\n", j);
		}
		free(j);
	} else {
		show_text(t);
	}
	innet_topology_free(t);
	return rc;
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

/* ------------------------------------------------------------------------ */
/* up, down, status, stop, start, restart: the library's, its messages here */

static void say(void *arg, bool problem, const char *line)
{
	(void)arg;
	if (problem) {
		fprintf(stderr, "innet fabric: %s\n", line);
	} else {
		printf("%s\n", line);
		fflush(stdout);
	}
}

static struct innet_fabric_opts lib_opts(const struct opts *o)
{
	return (struct innet_fabric_opts){
		.machine = o->machine, .state_dir = o->state, .workers = (uint32_t)o->workers,
		.timeout_s = (uint32_t)o->timeout_s, .foreground = o->foreground,
		.keep_logs = o->keep_logs, .kill = o->kill, .sets = o->sets, .n_sets = o->n_sets,
		.say = say,
	};
}

/* The library's 0/-errno as an exit status: 2 for bad input. */
static int exit_status(int rc)
{
	return rc == 0 ? 0 : rc == -EINVAL ? 2 : 1;
}

static int fabric_up(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	if (o->foreground)
		lo.say = say;
	return exit_status(innet_fabric_up(o->file, &lo));
}

static int fabric_down(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	return exit_status(innet_fabric_down(o->file, &lo));
}

static int fabric_status(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	struct innet_fabric_switch *sws;
	size_t n;
	char dir[4096];
	int rc = innet_fabric_status(o->file, &lo, &sws, &n, dir, sizeof(dir));
	if (rc == -ENOENT) {
		printf("fabric %s is not up (no state file %s/%s): start it with 'innet fabric up %s'\n",
		       o->file, dir, o->machine ? "fabric.TAG.json" : "fabric.json", o->file);
		return 1;
	}
	if (rc != 0)
		return exit_status(rc);
	static const char *const states[] = { "running", "stopped", "not started" };
	size_t running = 0, started = 0;
	printf("%-16s %-8s %-8s %s\n", "SWITCH", "PID", "STATE", "CTL");
	for (size_t i = 0; i < n; i++) {
		char pid[16] = "-";
		if (sws[i].pid > 0)
			snprintf(pid, sizeof(pid), "%d", sws[i].pid);
		running += sws[i].state == INNET_FABRIC_RUNNING;
		started += sws[i].pid > 0;
		printf("%-16s %-8s %-8s %s\n", sws[i].name, pid, states[sws[i].state], sws[i].ctl);
	}
	/* Switches of other machines (up --machine) are "not started" here. */
	printf("%zu of %zu switches running%s (state in %s)\n", running, started,
	       started < n ? " on this machine" : "", dir);
	free(sws);
	if (o->file != NULL)
		wires_status(o->file);
	return running == started && started > 0 ? 0 : 1;
}

static int fabric_stop(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	return exit_status(innet_fabric_stop(o->file, o->node, &lo));
}

static int fabric_start(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	return exit_status(innet_fabric_start(o->file, o->node, &lo));
}

static int fabric_restart(const struct opts *o)
{
	struct innet_fabric_opts lo = lib_opts(o);
	return exit_status(innet_fabric_restart(o->file, o->node, &lo));
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
			if (innet_parse_u64(optarg, 1, INNET_TOPO_MAX_WORKERS, &o.workers) < 0)
				return usage_error("--workers wants 1 to 256, not '%s'", optarg);
			break;
		case 't':
			if (innet_parse_u64(optarg, 1, 3600, &o.timeout_s) < 0)
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
	}
	if (o.file == NULL && o.state == NULL)
		return usage_error("missing FILE%s", strchr(subs[sub].allowed, 's') ? " (or --state DIR)" : "");
	return subs[sub].fn(&o);
}
