/*
 * cmd_kv.c — `innet kv`: the replicated key-value store (src/consensus/kv.c)
 * on a Paxos fabric (coordinator and acceptor switches), speaking RESP.
 *
 *   innet kv up FILE [--port P]     innet fabric up FILE, then one replica per
 *                                   host linked to the acceptors, in the
 *                                   background (logs and pids in state_dir)
 *   innet kv down FILE              stop those replicas, then the fabric
 *   innet kv serve --topology FILE --name HOST [--port P]
 *                                   run one replica in the foreground
 *   innet kv leader --topology FILE --name HOST
 *                                   run a backup coordinator (a host linked to
 *                                   the acceptors, not in their "learners"):
 *                                   it takes over, phase 1 and all, on the
 *                                   first REQUEST a replica fails over to it
 *
 * A replica finds everything in the topology file: the coordinator is the
 * port of the paxos_coordinator switch whose peer is HOST, the acceptors are
 * the ports of paxos_acceptor switches whose peer is HOST (N = how many),
 * its learner id is HOST's position in the acceptors' "learners" list, its
 * learner UDP port their "learner_udp". It serves RESP on HOST's address,
 * port P (default 6379).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "consensus/kv.h"
#include "consensus/wire.h"
#include "innet/topology.h"
#include "tools/cmds.h"

static volatile sig_atomic_t kv_stop;

static void on_signal(int sig)
{
	kv_stop = 1;
}

static void kv_usage(FILE *f)
{
	fprintf(f, "usage: innet kv up FILE [--port P]\n"
		   "       innet kv down FILE\n"
		   "       innet kv serve --topology FILE --name HOST [--port P]\n"
		   "       innet kv leader --topology FILE --name HOST\n\n"
		   "A key-value store replicated by Paxos in the switches, speaking RESP (redis-cli,\n"
		   "redis-benchmark). Every command goes through the consensus log; see docs/consensus.md.\n"
		   "Exit status: 0 ok, 1 failure, 2 usage.\n");
}

/* Port of switch s whose peer is host h, or -1. */
static int port_to(const struct innet_topo_node *n, uint32_t h)
{
	for (uint32_t p = 0; p < n->conf->n_ports; p++)
		if (n->peers[p].node == h)
			return (int)p;
	return -1;
}

static bool is_prog(const struct innet_prog_conf *pr, const char *name)
{
	return !strcmp(pr->program->name, name);
}

/* True if port is in the acceptor's "learners" list. */
static bool in_learners(const struct innet_prog_conf *pr, int port)
{
	json_error_t je;
	json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
	json_t *ls = json_object_get(args, "learners");
	bool in = false;
	for (size_t i = 0; json_is_array(ls) && i < json_array_size(ls); i++)
		in |= json_integer_value(json_array_get(ls, i)) == port;
	json_decref(args);
	return in;
}

/* A backup coordinator (leader) host: linked to acceptor switches but not
 * one of their learners. */
static bool is_leader_host(const struct innet_topology *t, uint32_t h)
{
	bool linked = false;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			int port = port_to(n, h);
			if (!is_prog(pr, "paxos_acceptor") || port < 0)
				continue;
			if (in_learners(pr, port))
				return false;
			linked = true;
		}
	}
	return linked;
}

/* The acceptors as seen from host h (the port of each acceptor switch that
 * faces h, at the program's UDP port). Returns how many. */
static uint32_t acceptors_of(const struct innet_topology *t, uint32_t h, struct innet_addr *out)
{
	uint32_t n_acc = 0;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			int port = port_to(n, h);
			if (!is_prog(pr, "paxos_acceptor") || port < 0 ||
			    n_acc >= INNET_PAXOS_MAX_ACCEPTORS)
				continue;
			out[n_acc++] = (struct innet_addr){ n->conf->ports[port].ip, pr->udp[0] };
		}
	}
	return n_acc;
}

/* The replica's Paxos endpoint from the topology. 0 or -1 (message printed). */
int kv_topology_paxos_conf(const struct innet_topology *t, int host, struct innet_paxos_conf *pc)
{
	memset(pc, 0, sizeof(*pc));
	pc->bind_ip = t->nodes[host].addr;
	int learner_id = -1;
	bool have_coord = false;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		for (uint32_t g = 0; g < n->conf->n_progs; g++) {
			const struct innet_prog_conf *pr = &n->conf->progs[g];
			bool coord = !strcmp(pr->program->name, "paxos_coordinator");
			bool acc = !strcmp(pr->program->name, "paxos_acceptor");
			if (!coord && !acc)
				continue;
			int port = -1;
			for (uint32_t p = 0; p < n->conf->n_ports; p++)
				if (n->peers[p].node == (uint32_t)host)
					port = (int)p;
			if (port < 0)
				continue;
			struct innet_addr a = { n->conf->ports[port].ip, pr->udp[0] };
			if (coord) {
				pc->coordinator = a;
				have_coord = true;
				continue;
			}
			if (pc->n_acceptors >= INNET_PAXOS_MAX_ACCEPTORS)
				continue;
			pc->acceptors[pc->n_acceptors++] = a;
			json_error_t je;
			json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
			json_t *lu = json_object_get(args, "learner_udp");
			pc->bind_udp = json_is_integer(lu) ? (uint16_t)json_integer_value(lu) : 34953;
			json_t *ls = json_object_get(args, "learners");
			int id = -1;
			for (size_t i = 0; json_is_array(ls) && i < json_array_size(ls); i++)
				if (json_integer_value(json_array_get(ls, i)) == port)
					id = (int)i;
			json_decref(args);
			if (id < 0 || (learner_id >= 0 && id != learner_id)) {
				fprintf(stderr, "innet kv: %s: host %s must be in the same place of every "
						"acceptor's \"learners\" list (switch %s)\n",
					t->origin, t->nodes[host].name, n->name);
				return -1;
			}
			learner_id = id;
		}
	}
	if (!have_coord || pc->n_acceptors == 0) {
		fprintf(stderr, "innet kv: %s: host %s needs a link to a paxos_coordinator switch and "
				"to paxos_acceptor switches\n", t->origin, t->nodes[host].name);
		return -1;
	}
	pc->learner_id = (uint16_t)learner_id;
	pc->proposer_id = (uint8_t)(learner_id + 1);
	/* Backup coordinators: leader hosts, at their address and the
	 * acceptors' Paxos UDP port (where `innet kv leader` binds). */
	for (uint32_t b = t->n_switches; b < t->n_nodes; b++)
		if (b != (uint32_t)host && is_leader_host(t, b) && pc->n_backups < INNET_PAXOS_MAX_BACKUPS)
			pc->backups[pc->n_backups++] = (struct innet_addr){ t->nodes[b].addr,
									    pc->acceptors[0].udp };
	return 0;
}

static int leader(const char *file, const char *name)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	int h = innet_topology_find(t, name);
	if (h < 0 || t->nodes[h].kind != INNET_TOPO_HOST || !is_leader_host(t, (uint32_t)h)) {
		fprintf(stderr, "innet kv: %s has no backup coordinator host '%s' (a host linked to "
				"the acceptors, not in their learners)\n", file, name);
		innet_topology_free(t);
		return 2;
	}
	struct innet_paxos_leader_conf lc;
	memset(&lc, 0, sizeof(lc));
	lc.n_acceptors = acceptors_of(t, (uint32_t)h, lc.acceptors);
	lc.bind_ip = t->nodes[h].addr;
	lc.bind_udp = lc.acceptors[0].udp;
	innet_topology_free(t);
	struct innet_paxos_leader *l = innet_paxos_leader_create(&lc, err, sizeof(err));
	if (l == NULL) {
		fprintf(stderr, "innet kv: leader: %s\n", err);
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	struct in_addr ia = { htonl(lc.bind_ip) };
	fprintf(stderr, "innet kv: backup coordinator on %s:%u, %u acceptors; takes over on the "
			"first request\n", inet_ntoa(ia), lc.bind_udp, lc.n_acceptors);
	bool was_serving = false;
	while (!kv_stop) {
		innet_paxos_leader_step(l, 20);
		if (!was_serving && innet_paxos_leader_serving(l)) {
			was_serving = true;
			fprintf(stderr, "innet kv: took over with ballot 0x%x, serving from instance %lu\n",
				innet_paxos_leader_ballot(l), (unsigned long)innet_paxos_leader_next(l));
		}
	}
	struct innet_paxos_leader_stats st;
	innet_paxos_leader_get_stats(l, &st);
	fprintf(stderr, "innet kv: leader: takeovers %lu recovered %lu noops %lu requests %lu\n",
		(unsigned long)st.takeovers, (unsigned long)st.recovered, (unsigned long)st.noops,
		(unsigned long)st.requests);
	innet_paxos_leader_destroy(l);
	return 0;
}

static int serve(const char *file, const char *name, uint16_t port)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	int h = innet_topology_find(t, name);
	if (h < 0 || t->nodes[h].kind != INNET_TOPO_HOST) {
		fprintf(stderr, "innet kv: %s has no host called '%s'\n", file, name);
		innet_topology_free(t);
		return 2;
	}
	struct kv_conf c = { .listen_ip = t->nodes[h].addr, .listen_port = port, .stop = &kv_stop };
	if (kv_topology_paxos_conf(t, h, &c.paxos) != 0) {
		innet_topology_free(t);
		return 2;
	}
	innet_topology_free(t);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return kv_serve(&c) == 0 ? 0 : 1;
}

/* The replicas of a topology: hosts linked to a paxos_acceptor switch. */
static bool is_replica(const struct innet_topology *t, uint32_t h)
{
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_topo_node *n = &t->nodes[s];
		bool acc = false;
		for (uint32_t g = 0; g < n->conf->n_progs; g++)
			acc |= !strcmp(n->conf->progs[g].program->name, "paxos_acceptor");
		for (uint32_t p = 0; acc && p < n->conf->n_ports; p++)
			if (n->peers[p].node == h)
				return true;
	}
	return false;
}

static int run_self(char *const argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static bool tcp_ready(uint32_t ip, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip),
				 .sin_port = htons(port) };
	bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static void pid_path(const struct innet_topology *t, uint32_t h, char *out, size_t len)
{
	snprintf(out, len, "%s/kv-%s.pid", t->state_dir, t->nodes[h].name);
}

/* True if pid is an `innet kv serve|leader ... --name NAME` process. */
static bool is_kv_process(pid_t pid, const char *name)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	bool kv = false, serve_ = false, nm = false;
	for (ssize_t i = 0; i < n;) {
		const char *a = buf + i;
		kv |= !strcmp(a, "kv");
		serve_ |= !strcmp(a, "serve") || !strcmp(a, "leader");
		nm |= !strcmp(a, name);
		i += (ssize_t)strlen(a) + 1;
	}
	return kv && serve_ && nm;
}

static int kv_down(const char *file)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	for (uint32_t h = t->n_switches; h < t->n_nodes; h++) {
		char path[PATH_MAX + 128];
		pid_path(t, h, path, sizeof(path));
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		int pid = 0;
		if (fscanf(f, "%d", &pid) == 1 && pid > 0 && is_kv_process(pid, t->nodes[h].name)) {
			kill(pid, SIGTERM);
			for (int i = 0; i < 300 && is_kv_process(pid, t->nodes[h].name); i++)
				usleep(10000);
			if (is_kv_process(pid, t->nodes[h].name))
				kill(pid, SIGKILL);
		}
		fclose(f);
		unlink(path);
	}
	innet_topology_free(t);
	char *argv[] = { "innet", "fabric", "down", (char *)file, NULL };
	return run_self(argv) == 0 ? 0 : 1;
}

static int kv_up(const char *file, uint16_t port)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	char *fargv[] = { "innet", "fabric", "up", (char *)file, NULL };
	if (run_self(fargv) != 0) {
		innet_topology_free(t);
		return 1;
	}
	char portstr[8];
	snprintf(portstr, sizeof(portstr), "%u", port);
	int rc = 0;
	for (uint32_t h = t->n_switches; h < t->n_nodes; h++) {
		bool lead = is_leader_host(t, h);
		if (!is_replica(t, h) && !lead)
			continue;
		char logp[PATH_MAX + 128], pidp[PATH_MAX + 128];
		snprintf(logp, sizeof(logp), "%s/kv-%s.log", t->state_dir, t->nodes[h].name);
		pid_path(t, h, pidp, sizeof(pidp));
		pid_t pid = fork();
		if (pid < 0) {
			rc = 1;
			break;
		}
		if (pid == 0) {
			setsid();
			int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				dup2(fd, 1);
				dup2(fd, 2);
			}
			if (nul >= 0)
				dup2(nul, 0);
			char *argv[] = { "innet", "kv", lead ? "leader" : "serve", "--topology",
					 (char *)file, "--name", t->nodes[h].name, "--port", portstr, NULL };
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		FILE *f = fopen(pidp, "w");
		if (f) {
			fprintf(f, "%d\n", (int)pid);
			fclose(f);
		}
		bool ready = false;
		if (lead) {
			printf("backup coordinator %s (pid %d)\n", t->nodes[h].name, (int)pid);
			continue;
		}
		for (int i = 0; i < 500 && !ready; i++) {
			ready = tcp_ready(t->nodes[h].addr, port);
			if (!ready)
				usleep(10000);
		}
		struct in_addr ia = { htonl(t->nodes[h].addr) };
		if (!ready) {
			fprintf(stderr, "innet kv: replica %s did not start (see %s)\n", t->nodes[h].name, logp);
			rc = 1;
			break;
		}
		printf("replica %s: redis-cli -h %s -p %u\n", t->nodes[h].name, inet_ntoa(ia), port);
	}
	innet_topology_free(t);
	if (rc != 0)
		kv_down(file);
	return rc;
}

int cmd_kv(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' }, { "name", required_argument, NULL, 'n' },
		{ "port", required_argument, NULL, 'p' },     { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *file = NULL, *name = NULL;
	unsigned long port = 6379;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:n:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': file = optarg; break;
		case 'n': name = optarg; break;
		case 'p': {
			char *end;
			port = strtoul(optarg, &end, 10);
			if (*end || port == 0 || port > 65535)
				goto bad;
			break;
		}
		case 'h': kv_usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind >= argc)
		goto bad;
	const char *verb = argv[optind];
	if (!strcmp(verb, "serve") && optind + 1 == argc && file && name)
		return serve(file, name, (uint16_t)port);
	if (!strcmp(verb, "leader") && optind + 1 == argc && file && name)
		return leader(file, name);
	if (!strcmp(verb, "up") && optind + 2 == argc)
		return kv_up(argv[optind + 1], (uint16_t)port);
	if (!strcmp(verb, "down") && optind + 2 == argc)
		return kv_down(argv[optind + 1]);
bad:
	kv_usage(stderr);
	return 2;
}
