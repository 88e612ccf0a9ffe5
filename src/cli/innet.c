/*
 * innet.c — the one innet command: dispatches to a subcommand.
 *
 *   innet switch   run one switch (from a topology file or flags)
 *   innet fabric   bring a whole topology up or down on this machine
 *   innet ctl      talk to a running switch's control socket
 *   innet programs list the data-plane programs compiled in
 *   innet ping     probe the path between two hosts of a running fabric
 *   innet counter  client of the example counter program
 *   innet kv       replicated key-value store on in-network Paxos (RESP)
 *   innet dnn      DNN inference in the fabric (compile, infer, eval, ref)
 *   innet allreduce  in-network all-reduce through the agg program (one-off runs)
 *   innet lb       load-balancer host side: DNS backends, open-loop load, agents
 */
#include <stdio.h>
#include <string.h>

#include "innet/version.h"
#include "cli/cmds.h"

struct subcmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct subcmd subcmds[] = {
	{ "switch", cmd_switch, "run one programmable switch" },
	{ "fabric", cmd_fabric, "start, stop and inspect a topology of switches" },
	{ "ctl", cmd_ctl, "control a running switch: programs, registers, tables, stats" },
	{ "programs", cmd_programs, "list the data-plane programs compiled into innet" },
	{ "ping", cmd_ping, "send probes between two hosts of a running fabric" },
	{ "counter", cmd_counter, "client of the example counter program (inc, read, load)" },
	{ "kv", cmd_kv, "replicated key-value store on in-network Paxos, speaking RESP" },
	{ "paxos", cmd_paxos, "Paxos roles as host processes (baseline, backup leader) and a load generator" },
	{ "dnn", cmd_dnn, "DNN inference in the fabric: compile a model, infer, eval" },
	{ "allreduce", cmd_allreduce, "all-reduce int32/float32 arrays through the switch's agg program" },
	{ "lb", cmd_lb, "load balancer host side: DNS backends, open-loop load, agents, keys" },
	{ "p4", cmd_p4, "P4 programs compiled by p4c for BMv2: run a script offline, build, check" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: innet COMMAND [ARGS...]\n\n"
		   "In-network computing on commodity machines.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++)
		fprintf(f, "  %-10s %s\n", subcmds[i].name, subcmds[i].summary);
	fprintf(f, "\n'innet COMMAND --help' describes a command; docs/ has the manual pages.\n"
		   "'innet --version' prints the version (" INNET_VERSION_STRING ").\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
		printf("innet " INNET_VERSION_STRING "\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++)
		if (!strcmp(argv[1], subcmds[i].name))
			return subcmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "innet: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
