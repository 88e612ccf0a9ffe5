/*
 * cmd_kv.c — `innet kv`: the replicated key-value store (src/consensus/kv_server.c, kv_snapshot.c, kv_store.c, kv_resp.c)
 * on a Paxos fabric (coordinator and acceptor switches), speaking RESP.
 *
 *   innet kv up FILE [--port P]     innet fabric up FILE, then one replica per
 *                                   host linked to the acceptors, in the
 *                                   background (logs and pids in state_dir)
 *   innet kv down FILE [--keep-logs] stop those replicas, then the fabric;
 *                                   remove the logs and state files
 *   innet kv serve --topology FILE --name HOST [--port P] [--metrics IP:PORT]
 *                                   run one replica in the foreground (and
 *                                   serve its INFO counters to Prometheus)
 *   innet kv leader --topology FILE --name HOST
 *                                   run a backup coordinator (a host linked to
 *                                   the acceptors, not in their "learners"):
 *                                   it takes over, phase 1 and all, on the
 *                                   first REQUEST a replica fails over to it;
 *                                   status socket state_dir/kv-HOST.sock
 *   innet kv start|stop FILE HOST   one replica or backup coordinator
 *   innet kv rejoin FILE ACC        an acceptor switch restarted empty, joined
 *                                   under the coordinator in charge
 *   innet kv remove|add FILE HOST   a replica out of / back into the trim
 *                                   group, through the log (REPLICA REMOVE|ADD)
 *
 * A replica finds everything in the topology file: the coordinator is the
 * port of the paxos_coordinator switch whose peer is HOST, the acceptors are
 * the ports of paxos_acceptor switches whose peer is HOST (N = how many),
 * its learner id is HOST's position in the acceptors' "learners" list, its
 * learner UDP port their "learner_udp". It serves RESP on HOST's address,
 * port P (default 6379).
 *
 * netns mode (docs/topology.md; a topology with "target": "xdp" is one):
 * every host is a network namespace, innet-FABRIC-HOST. A replica or backup
 * coordinator makes its sockets in its own host's namespace; the commands
 * that talk RESP to replicas (up, start, add, remove) do it from inside the
 * fabric, from a host's namespace: the switches route between hosts, so
 * one host reaches every replica. Clients do the same: `ip netns exec
 * innet-FABRIC-HOST redis-cli -h ADDR -p P`.
 *
 * This file parses the commands and prints; the service logic is the
 * library's: the replica (kv_server.c), the backup coordinator's status
 * socket and round file (consensus/kv_leader.h), the acceptor-rejoin
 * protocol (consensus/kv_rejoin.h), background processes and their pid
 * files (fabric/supervise.h, shared with the fabric's switches), the
 * control-socket client (innet/ctl_client.h).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "consensus/kv.h"
#include "consensus/wire.h"
#include "innet/metrics.h"
#include "innet/topology.h"
#include "cli/cmds.h"
#include "consensus/learnfilter.h"
#include "consensus/kv_leader.h"
#include "consensus/kv_rejoin.h"
#include "fabric/supervise.h"

static volatile sig_atomic_t kv_stop;

/* netns mode: this process's sockets from now on are host h's (see the top).
 * 0, or 1 with a message. */
static int kv_enter(const struct innet_topology *t, uint32_t h)
{
	if (!t->netns)
		return 0;
	int rc = innet_topology_enter(t, h);
	if (rc != 0) {
		fprintf(stderr, "innet kv: cannot enter the namespace of %s: %s%s\n", t->nodes[h].name,
			strerror(-rc), rc == -ENOENT ? " (is the fabric up?)" : "");
		return 1;
	}
	return 0;
}

static void on_signal(int sig)
{
	kv_stop = 1;
}

/* A replica's options, from `kv up|start|serve` to the replicas spawned. */
struct kv_opts {
	uint32_t window;          /* --window (0: the replica's default) */
	bool reads_log;           /* --reads log */
	char max_bulk[24];        /* --proto-max-bulk-len, as given ("" = the default) */
	const char *filter;       /* --learner-filter IFACES|all|none, or NULL: in netns mode
	                           * all, if it attaches (else a warning), none on loopback */
	bool filter_redundant;    /* --filter-mode redundant (else quorum) */
};

static void kv_usage(FILE *f)
{
	fprintf(f, "usage: innet kv up FILE [--port P] [REPLICA OPTIONS]\n"
		   "       innet kv down FILE [--keep-logs]\n"
		   "       innet kv serve --topology FILE --name HOST [--port P] [REPLICA OPTIONS]\n"
		   "                      [--metrics IP:PORT]\n"
		   "       innet kv leader --topology FILE --name HOST\n"
		   "       innet kv start|stop FILE HOST [--port P] [REPLICA OPTIONS] [--kill]\n"
		   "       innet kv rejoin FILE ACCEPTOR\n"
		   "       innet kv remove|add FILE HOST [--port P]\n\n"
		   "  up      the fabric and every replica / backup coordinator, in the background\n"
		   "  start   one replica (or backup coordinator) again; a replica the acceptors\n"
		   "          trimmed past installs a snapshot from a peer replica\n"
		   "  stop    one of them (SIGTERM; --kill: SIGKILL, a crash)\n"
		   "  rejoin  restart acceptor switch ACCEPTOR with empty state, silent, and join it\n"
		   "          from the other acceptors and the coordinator (docs/consensus.md)\n"
		   "  remove  take replica HOST out of the trim group, through the log, so the\n"
		   "          acceptors' trim stops waiting for it (stops it if it runs)\n"
		   "  add     start replica HOST again (from a snapshot) and put it back\n"
		   "replica options:\n"
		   "  --window N  entries of a replica in flight (1..32; default 8 full-size entries'\n"
		   "              worth of bytes: 8, more when netns links make entries smaller)\n"
		   "  --reads index|log  read-only commands (GET, MGET, EXISTS, ...): answered from\n"
		   "              a read index — no log entry, still linearizable — (index, the\n"
		   "              default) or through the log like writes (log)\n"
		   "  --proto-max-bulk-len N  the longest argument (value) a client may send, as\n"
		   "              redis's setting: 1mb .. 1gb, default 512mb; a write over one log\n"
		   "              entry goes through the log in chunks (CONFIG SET changes it too)\n"
		   "  --learner-filter IFACES|all|none  (netns mode) the learner filter on the\n"
		   "              replica's interfaces: XDP counts the 2Bs and passes one per quorum\n"
		   "              (docs/consensus.md); default in netns mode: all, if it attaches;\n"
		   "              --filter-mode redundant only drops the 2Bs after a quorum\n"
		   "  --metrics IP:PORT  serve: the replica's INFO counters in the Prometheus text\n"
		   "              format over HTTP at http://IP:PORT/metrics (port 0: any free one)\n\n"
		   "A key-value store replicated by Paxos in the switches, speaking RESP (redis-cli,\n"
		   "redis-benchmark). Writes go through the consensus log, reads are answered once the\n"
		   "replica applied it up to a read index from a majority; see docs/consensus.md.\n"
		   "Exit status: 0 ok, 1 failure, 2 usage.\n");
}

/* innet_paxos_leader_conf.ballot_new: store the ballot's round in the round
 * file (consensus/kv_leader.h) before the leader uses it. */
static int leader_round_store(void *arg, uint32_t ballot)
{
	char err[PATH_MAX + 256];
	int rc = kv_leader_round_store(arg, ballot, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "innet kv: leader: %s\n", err);
	return rc;
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
	if (h < 0 || t->nodes[h].kind != INNET_TOPO_HOST || !kv_topology_is_leader_host(t, (uint32_t)h)) {
		fprintf(stderr, "innet kv: %s has no backup coordinator host '%s' (a host linked to "
				"the acceptors, not in their learners)\n", file, name);
		innet_topology_free(t);
		return 2;
	}
	struct innet_paxos_leader_conf lc;
	memset(&lc, 0, sizeof(lc));
	lc.n_acceptors = kv_topology_acceptors(t, (uint32_t)h, lc.acceptors);
	lc.bind_ip = t->nodes[h].addr;
	lc.bind_udp = lc.acceptors[0].udp;
	lc.proposer_id = kv_topology_leader_id(t, (uint32_t)h);
	char sock[PATH_MAX + 128], round_path[PATH_MAX + 128];
	kv_leader_sock_path(t, (uint32_t)h, sock, sizeof(sock));
	kv_leader_round_path(t, (uint32_t)h, round_path, sizeof(round_path));
	lc.min_round = kv_leader_round_load(round_path);
	lc.ballot_new = leader_round_store;
	lc.arg = round_path;
	if (kv_enter(t, (uint32_t)h) != 0) {
		innet_topology_free(t);
		return 1;
	}
	innet_topology_free(t);
	struct innet_paxos_leader *l = innet_paxos_leader_create(&lc, err, sizeof(err));
	if (l == NULL) {
		fprintf(stderr, "innet kv: leader: %s\n", err);
		return 1;
	}
	struct kv_leader_status_srv ctl;
	if (kv_leader_status_open(&ctl, sock, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet kv: leader: %s\n", err);
		innet_paxos_leader_destroy(l);
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	struct in_addr ia = { htonl(lc.bind_ip) };
	fprintf(stderr, "innet kv: backup coordinator on %s:%u, %u acceptors, ballots 0x..%02x above "
			"round %u; takes over on the first request; status: %s\n", inet_ntoa(ia),
		lc.bind_udp, lc.n_acceptors, lc.proposer_id, lc.min_round, sock);
	bool was_serving = false;
	while (!kv_stop) {
		struct pollfd pfd[2 + KV_LEADER_STATUS_CLIENTS] = {
			{ .fd = innet_paxos_leader_fd(l), .events = POLLIN },
			{ .fd = ctl.lfd, .events = POLLIN },
		};
		for (int i = 0; i < KV_LEADER_STATUS_CLIENTS; i++)
			pfd[2 + i] = (struct pollfd){ .fd = ctl.fd[i], .events = POLLIN };
		poll(pfd, 2 + KV_LEADER_STATUS_CLIENTS, 20);
		innet_paxos_leader_process(l);
		kv_leader_status_serve(&ctl, l);
		if (!was_serving && innet_paxos_leader_serving(l)) {
			was_serving = true;
			fprintf(stderr, "innet kv: took over with ballot 0x%x, serving from instance %lu\n",
				innet_paxos_leader_ballot(l), (unsigned long)innet_paxos_leader_next(l));
		}
	}
	struct innet_paxos_leader_stats st;
	innet_paxos_leader_get_stats(l, &st);
	fprintf(stderr, "innet kv: leader: takeovers %lu recovered %lu noops %lu requests %lu (held "
			"during phase 1 %lu)\n", (unsigned long)st.takeovers, (unsigned long)st.recovered,
		(unsigned long)st.noops, (unsigned long)st.requests, (unsigned long)st.held);
	kv_leader_status_close(&ctl);
	innet_paxos_leader_destroy(l);
	return 0;
}

static int serve(const char *file, const char *name, uint16_t port, const struct kv_opts *o,
		 const char *metrics)
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
	struct kv_conf c = { .listen_ip = t->nodes[h].addr, .listen_port = port, .window = o->window,
			     .entry_max = kv_topology_entry_max(t), .stop = &kv_stop, .name = name,
			     .reads_log = o->reads_log };
	if (o->max_bulk[0] != '\0') {
		unsigned long long v;
		if (kv_parse_memory(o->max_bulk, strlen(o->max_bulk), &v) != 0 ||
		    v < (1u << 20) || v > (1ull << 30)) {
			fprintf(stderr, "innet kv: --proto-max-bulk-len wants a memory value from 1mb to "
					"1gb, not '%s'\n", o->max_bulk);
			innet_topology_free(t);
			return 2;
		}
		c.max_bulk = v;
	}
	if (metrics != NULL) {
		char merr[160];
		if (innet_metrics_addr_parse(metrics, &c.metrics_ip, &c.metrics_port, merr,
					     sizeof(merr)) != 0) {
			fprintf(stderr, "innet kv: --metrics: %s\n", merr);
			innet_topology_free(t);
			return 2;
		}
		c.metrics = true;
	}
	if (kv_topology_paxos_conf(t, h, &c.paxos, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet kv: %s\n", err);
		innet_topology_free(t);
		return 2;
	}
	c.n_learners = kv_topology_trim_learners(t);
	/* Peers for snapshots: the other replicas, at the same RESP port. */
	for (uint32_t r = t->n_switches; r < t->n_nodes; r++)
		if (r != (uint32_t)h && kv_topology_is_replica(t, r) && c.n_peers < KV_MAX_PEERS)
			c.peers[c.n_peers++] = (struct innet_addr){ t->nodes[r].addr, port };
	/* the learner filter: asked for, or by default in netns mode (where it
	 * takes a fifth of the CPU a replica spends per write: docs/consensus.md) */
	const char *filter = o->filter;
	bool filter_auto = filter == NULL && t->netns;
	if (filter_auto)
		filter = "all";
	if (filter != NULL && !strcmp(filter, "none"))
		filter = NULL;
	if (filter != NULL && !t->netns) {
		fprintf(stderr, "innet kv: --learner-filter needs a topology in netns mode (the "
				"replica's own interfaces)\n");
		innet_topology_free(t);
		return 2;
	}
	if (kv_enter(t, (uint32_t)h) != 0) {
		innet_topology_free(t);
		return 1;
	}
	innet_topology_free(t);
	struct learnfilter *lf = NULL;
	if (filter != NULL) {
		lf = learnfilter_attach(filter, c.paxos.bind_udp, c.paxos.n_acceptors,
					!o->filter_redundant, err, sizeof(err));
		if (lf == NULL && !filter_auto) {
			fprintf(stderr, "innet kv: learner filter: %s\n", err);
			return 1;
		}
		if (lf == NULL) {
			fprintf(stderr, "innet kv: warning: no learner filter (%s): every 2B reaches the "
					"replica\n", err);
		} else {
			/* every 2B to the replica's socket now comes through it */
			c.trust_filter = !o->filter_redundant;
			fprintf(stderr, "innet kv: learner filter on %s (mode %s)\n", filter,
				o->filter_redundant ? "redundant" : "quorum");
		}
	}
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int rc = kv_serve(&c) == 0 ? 0 : 1;
	if (lf != NULL) {
		struct lf_stats fs;
		learnfilter_stats(lf, &fs);
		int drc = learnfilter_detach(lf);
		fprintf(stderr, "innet kv: learner_filter seen=%llu passed_quorum=%llu dropped_before=%llu "
				"dropped_redundant=%llu passed_before=%llu passed_other=%llu%s\n",
			(unsigned long long)fs.seen, (unsigned long long)fs.passed_quorum,
			(unsigned long long)fs.dropped_before, (unsigned long long)fs.dropped_redundant,
			(unsigned long long)fs.passed_before, (unsigned long long)fs.passed_other,
			drc != 0 ? " (detach failed)" : "");
	}
	return rc;
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

/* sv_running's test: `innet kv serve|leader ... --name NAME` (arg: NAME). */
static bool is_kv_cmdline(int argc, const char *const *argv, void *arg)
{
	bool kv = false, serve_ = false, nm = false;
	for (int i = 0; i < argc; i++) {
		kv |= !strcmp(argv[i], "kv");
		serve_ |= !strcmp(argv[i], "serve") || !strcmp(argv[i], "leader");
		nm |= !strcmp(argv[i], arg);
	}
	return kv && serve_ && nm;
}

/* A replica or leader process of ours, for sv_stop. */
struct kv_proc {
	pid_t pid;
	const char *name;
};

static bool kv_proc_alive(void *arg)
{
	const struct kv_proc *p = arg;
	return sv_running(p->pid, is_kv_cmdline, (void *)p->name);
}


/* ---- rejoin: an acceptor switch restarted with empty state ---------------- */

static void rejoin_say(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "innet kv: %s\n", line);
}

/* innet kv rejoin FILE ACC: restart acceptor switch ACC silent ("join":
 * true; killed first if it still runs: its state is lost either way), then
 * complete its join (consensus/kv_rejoin.h: the protocol). */
static int kv_rejoin(const char *file, const char *acc)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	int rc = 2;
	uint32_t a;
	const char *inst;
	if (kv_rejoin_find(t, acc, &a, &inst, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet kv: %s has %s\n", file, err);
		goto out;
	}
	rc = 1;
	char set[INNET_NAME_MAX + 32];
	snprintf(set, sizeof(set), "%s.join=true", inst);
	char *fargv[] = { "innet", "fabric", "restart", (char *)file, (char *)acc, "--kill", "--set",
			  set, NULL };
	if (run_self(fargv) != 0)
		goto out;
	struct kv_rejoin r;
	if (kv_rejoin_complete(t, a, 5000, &r, rejoin_say, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet kv: %s\n", err);
		goto out;
	}
	printf("acceptor %s rejoined: silent below instance %llu and ballot 0x%llx (read %u other "
	       "acceptors; coordinator in charge: %s, ballot 0x%llx, next %llu)\n", acc,
	       (unsigned long long)r.join_inst, (unsigned long long)r.join_ballot, r.read, r.who,
	       (unsigned long long)r.ballot, (unsigned long long)r.next);
	rc = 0;
out:
	innet_topology_free(t);
	return rc;
}

static int stop_host(const struct innet_topology *t, uint32_t h, bool kill_now);

/* What kv up and fabric up leave in a state directory once everything is
 * down (logs, pid files, sockets, the fabric's state files): removed, and the
 * directory too when nothing else is in it (a user's own files stay). */
static void remove_state(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *e;
	unsigned removed = 0, kept = 0;
	while ((e = readdir(d)) != NULL) {
		const char *n = e->d_name;
		size_t l = strlen(n);
		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		bool ours = (l > 4 && (!strcmp(n + l - 4, ".log") || !strcmp(n + l - 4, ".pid"))) ||
			    (l > 5 && (!strcmp(n + l - 5, ".sock") || !strcmp(n + l - 5, ".json")));
		char p[PATH_MAX];
		if (ours && snprintf(p, sizeof(p), "%s/%s", dir, n) < (int)sizeof(p) && unlink(p) == 0)
			removed++;
		else
			kept++;
	}
	closedir(d);
	if (kept == 0 && rmdir(dir) == 0)
		printf("removed %s (logs included; --keep-logs keeps them)\n", dir);
	else if (removed > 0)
		printf("removed the logs and state files in %s (--keep-logs keeps them)\n", dir);
}

static int kv_down(const char *file, bool keep_logs)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	for (uint32_t h = t->n_switches; h < t->n_nodes; h++)
		stop_host(t, h, false);
	char *argv[] = { "innet", "fabric", "down", (char *)file, NULL };
	int rc = run_self(argv) == 0 ? 0 : 1;
	if (rc == 0 && !keep_logs)
		remove_state(t->state_dir);
	else if (rc == 0)
		printf("logs kept in %s/\n", t->state_dir);
	innet_topology_free(t);
	return rc;
}

/* Start `innet kv serve` (a replica) or `innet kv leader` (a backup
 * coordinator) for host h in the background: log and pid file in the state
 * dir; a replica is waited for until it accepts connections. 0 or 1. */
static int spawn_host(const struct innet_topology *t, const char *file, uint32_t h, uint16_t port,
		      const struct kv_opts *o, bool fresh_log)
{
	char portstr[8], winstr[16];
	snprintf(portstr, sizeof(portstr), "%u", port);
	snprintf(winstr, sizeof(winstr), "%u", o->window); /* 0: the replica's default */
	bool lead = kv_topology_is_leader_host(t, h);
	char logp[PATH_MAX + 128], pidp[PATH_MAX + 128];
	snprintf(logp, sizeof(logp), "%s/kv-%s.log", t->state_dir, t->nodes[h].name);
	pid_path(t, h, pidp, sizeof(pidp));
	char *argv[24] = { "innet", "kv", lead ? "leader" : "serve", "--topology",
			   (char *)file, "--name", t->nodes[h].name, "--port", portstr };
	int n = 9;
	if (!lead && o->window != 0) {
		argv[n++] = "--window";
		argv[n++] = winstr;
	}
	if (!lead && o->reads_log) {
		argv[n++] = "--reads";
		argv[n++] = "log";
	}
	if (!lead && o->max_bulk[0] != '\0') {
		argv[n++] = "--proto-max-bulk-len";
		argv[n++] = (char *)o->max_bulk;
	}
	if (!lead && o->filter != NULL) {
		argv[n++] = "--learner-filter";
		argv[n++] = (char *)o->filter;
		argv[n++] = "--filter-mode";
		argv[n++] = o->filter_redundant ? "redundant" : "quorum";
	}
	argv[n] = NULL;
	struct sv_spawn sp = { .exe = "/proc/self/exe", .argv = argv, .log = logp, .append = !fresh_log };
	pid_t pid = sv_spawn(&sp);
	if (pid < 0) {
		fprintf(stderr, "innet kv: cannot start %s (log %s): %s\n", t->nodes[h].name, logp,
			strerror(errno));
		return 1;
	}
	if (sv_pidfile_write(pidp, pid) != 0)
		fprintf(stderr, "innet kv: %s: cannot write its pid file %s\n", t->nodes[h].name, pidp);
	if (lead) {
		printf("backup coordinator %s (pid %d)\n", t->nodes[h].name, (int)pid);
		return 0;
	}
	if (kv_enter(t, h) != 0)   /* netns: the replica is reached from inside */
		return 1;
	bool ready = false;
	for (int i = 0; i < 500 && !ready; i++) {
		ready = tcp_ready(t->nodes[h].addr, port);
		if (!ready)
			usleep(10000);
	}
	struct in_addr ia = { htonl(t->nodes[h].addr) };
	if (!ready) {
		fprintf(stderr, "innet kv: replica %s did not start (see %s)\n", t->nodes[h].name, logp);
		return 1;
	}
	if (t->netns) {
		char ns[256];
		innet_topology_netns_name(t, h, ns, sizeof(ns));
		printf("replica %s: ip netns exec %s redis-cli -h %s -p %u\n", t->nodes[h].name, ns,
		       inet_ntoa(ia), port);
	} else {
		printf("replica %s: redis-cli -h %s -p %u\n", t->nodes[h].name, inet_ntoa(ia), port);
	}
	return 0;
}

/* Stop host h's replica or leader process (its pid file): SIGTERM, or
 * SIGKILL at once (kill_now: a crash). 0, or 1 if it would not die. */
static int stop_host(const struct innet_topology *t, uint32_t h, bool kill_now)
{
	char path[PATH_MAX + 128];
	pid_path(t, h, path, sizeof(path));
	if (access(path, F_OK) != 0)
		return 0;   /* none started (or it was stopped): nothing of ours to remove */
	struct kv_proc p = { sv_pidfile_read(path), t->nodes[h].name };
	int rc = 0;
	if (p.pid > 0 && kv_proc_alive(&p)) {
		rc = sv_stop(p.pid, kill_now, 3000, kv_proc_alive, &p, NULL);
		if (rc == 0)
			printf("stopped %s (pid %d%s)\n", t->nodes[h].name, (int)p.pid,
			       kill_now ? ", killed" : "");
	}
	if (rc == 0) {
		unlink(path);
		if (kv_topology_is_leader_host(t, h)) { /* its status socket, if it was killed */
			kv_leader_sock_path(t, h, path, sizeof(path));
			unlink(path);
		}
	}
	return rc;
}

/* innet kv start|stop FILE HOST: one replica (or backup coordinator) of a
 * running KV fabric. */
static int kv_one(const char *file, const char *name, bool start, uint16_t port, const struct kv_opts *o,
		  bool kill_now)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	int h = innet_topology_find(t, name), rc = 2;
	if (h < 0 || t->nodes[h].kind != INNET_TOPO_HOST ||
	    (!kv_topology_is_replica(t, (uint32_t)h) && !kv_topology_is_leader_host(t, (uint32_t)h))) {
		fprintf(stderr, "innet kv: %s has no replica or backup coordinator host '%s'\n", file,
			name);
		goto out;
	}
	rc = stop_host(t, (uint32_t)h, kill_now);
	if (rc == 0 && start)
		rc = spawn_host(t, file, (uint32_t)h, port, o, false);
out:
	innet_topology_free(t);
	return rc;
}

static int kv_up(const char *file, uint16_t port, const struct kv_opts *o)
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
	int rc = 0;
	for (uint32_t h = t->n_switches; h < t->n_nodes && rc == 0; h++)
		if (kv_topology_is_replica(t, h) || kv_topology_is_leader_host(t, h))
			rc = spawn_host(t, file, h, port, o, true);
	innet_topology_free(t);
	if (rc != 0)
		kv_down(file, true);   /* keep the logs: they say why up failed */
	return rc;
}

/* ---- remove / add: the trim group's membership, through the log ---------- */

/* Send one RESP command to ip:port and read its reply into reply (NUL
 * terminated): a status, error or integer line without its CRLF, or a bulk
 * string's contents. 0, or -1 with why in reply. */
static int resp_command(uint32_t ip, uint16_t port, int argc, const char *const *argv, char *reply,
			size_t len, int timeout_s)
{
	struct kv_buf q = { 0 };
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "*%d\r\n", argc);
	kv_buf_append(&q, tmp, strlen(tmp));
	for (int i = 0; i < argc; i++) {
		snprintf(tmp, sizeof(tmp), "$%zu\r\n", strlen(argv[i]));
		kv_buf_append(&q, tmp, strlen(tmp));
		kv_buf_append(&q, argv[i], strlen(argv[i]));
		kv_buf_append(&q, "\r\n", 2);
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1, e = EIO;
	struct timeval tv = { .tv_sec = timeout_s };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip),
				 .sin_port = htons(port) };
	size_t got = 0, want = SIZE_MAX, hdr = 0;
	if (fd < 0)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, q.p, q.len, MSG_NOSIGNAL) != (ssize_t)q.len) {
		e = errno;
		goto out;
	}
	while (got < want && got + 1 < len) {
		ssize_t n = recv(fd, reply + got, len - 1 - got, 0);
		if (n <= 0) {
			e = n == 0 ? ECONNRESET : errno;
			goto out;
		}
		got += (size_t)n;
		reply[got] = '\0';
		char *crlf = strstr(reply, "\r\n");
		if (hdr == 0 && crlf != NULL) {
			hdr = (size_t)(crlf - reply) + 2;
			want = reply[0] == '$' ? hdr + strtoull(reply + 1, NULL, 10) + 2 : hdr;
		}
	}
	if (got < want) {
		e = EMSGSIZE;
		goto out;
	}
	if (reply[0] == '$') { /* the contents */
		memmove(reply, reply + hdr, want - hdr - 2);
		reply[want - hdr - 2] = '\0';
	} else {
		reply[hdr - 2] = '\0';
	}
	rc = 0;
out:
	if (rc != 0)
		snprintf(reply, len, "%s", strerror(e));
	if (fd >= 0)
		close(fd);
	kv_buf_free(&q);
	return rc;
}

/* A numeric field of a replica's INFO, or -1 (no answer). */
static long long replica_info(uint32_t ip, uint16_t port, const char *field)
{
	const char *argv[] = { "INFO" };
	char reply[16384], key[64];
	if (resp_command(ip, port, 1, argv, reply, sizeof(reply), 3) != 0)
		return -1;
	snprintf(key, sizeof(key), "\n%s:", field);
	char *p = strstr(reply, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* Propose REPLICA verb id through replica host r (any replica: the command
 * goes through the log). 0 done (changed or already so), 1 refused (message
 * printed), -1 no answer or outcome unknown (reply in why). */
static int replica_propose(const struct innet_topology *t, uint32_t r, uint16_t port,
			   const char *verb, uint16_t id, char *why, size_t whylen)
{
	char ids[8];
	snprintf(ids, sizeof(ids), "%u", id);
	const char *argv[] = { "REPLICA", verb, ids };
	char reply[256];
	if (resp_command(t->nodes[r].addr, port, 3, argv, reply, sizeof(reply), 10) != 0) {
		snprintf(why, whylen, "%s: %s", t->nodes[r].name, reply);
		return -1;
	}
	if (reply[0] == ':')
		return 0;
	if (strstr(reply, "timed out") != NULL || strstr(reply, "may or may not") != NULL) {
		snprintf(why, whylen, "%s: %s", t->nodes[r].name, reply + 1);
		return -1; /* outcome unknown: ask again (idempotent) */
	}
	fprintf(stderr, "innet kv: %s refused REPLICA %s %u: %s\n", t->nodes[r].name, verb, id,
		reply + (reply[0] == '-'));
	return 1;
}

/* innet kv remove|add FILE HOST: replica HOST out of / back into the trim
 * group. remove stops HOST's replica if it runs and proposes REPLICA REMOVE
 * id through another replica (retried for up to 30 s while the outcome is
 * unknown: a full ring takes the first proposals a moment); add starts HOST's
 * replica if it is not running, waits until it has caught up (from a
 * snapshot if the log was trimmed past it) and proposes REPLICA ADD id. */
static int kv_membership(const char *file, const char *name, bool add, uint16_t port)
{
	char err[8192];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet kv: %s\n", err);
		return 2;
	}
	int rc = 2, h = innet_topology_find(t, name);
	struct innet_paxos_conf pc;
	if (h < 0 || t->nodes[h].kind != INNET_TOPO_HOST || !kv_topology_is_replica(t, (uint32_t)h)) {
		fprintf(stderr, "innet kv: %s has no replica host '%s'\n", file, name);
		goto out;
	}
	if (kv_topology_paxos_conf(t, h, &pc, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet kv: %s\n", err);
		goto out;
	}
	rc = 1;
	if (kv_enter(t, (uint32_t)h) != 0)
		goto out;
	uint16_t id = pc.learner_id;
	if (add) {
		/* caught up = past where the others are now */
		long long target = 0;
		for (uint32_t o = t->n_switches; o < t->n_nodes; o++) {
			long long n = o != (uint32_t)h && kv_topology_is_replica(t, o)
					      ? replica_info(t->nodes[o].addr, port, "log_next") : -1;
			target = n > target ? n : target;
		}
		if (replica_info(t->nodes[h].addr, port, "log_next") < 0 &&
		    spawn_host(t, file, (uint32_t)h, port, &(struct kv_opts){ 0 }, false) != 0)
			goto out;
		long long at = -1;
		for (int i = 0; i < 300; i++) {
			at = replica_info(t->nodes[h].addr, port, "stale") == 0
				     ? replica_info(t->nodes[h].addr, port, "log_next") : -1;
			if (at >= target)
				break;
			usleep(100000);
		}
		if (at < target) {
			fprintf(stderr, "innet kv: replica %s did not catch up in 30 s (at instance %lld, "
					"the others at %lld; see its log): not added\n", name, at, target);
			goto out;
		}
	} else {
		if (stop_host(t, (uint32_t)h, false) != 0) {
			fprintf(stderr, "innet kv: replica %s would not stop\n", name);
			goto out;
		}
	}
	char why[512] = "no other replica";
	int r = -1;
	for (int attempt = 0; attempt < 30 && r < 0; attempt++) {
		if (attempt > 0)
			sleep(1);
		for (uint32_t o = t->n_switches; o < t->n_nodes && r < 0; o++)
			if (kv_topology_is_replica(t, o) && (add || o != (uint32_t)h))
				r = replica_propose(t, o, port, add ? "ADD" : "REMOVE", id, why, sizeof(why));
	}
	if (r != 0) {
		if (r < 0)
			fprintf(stderr, "innet kv: REPLICA %s %u not confirmed in 30 s (%s)\n",
				add ? "ADD" : "REMOVE", id, why);
		goto out;
	}
	if (add)
		printf("replica %s (learner %u) is back in the trim group\n", name, id);
	else
		printf("replica %s (learner %u) removed from the trim group: the acceptors' trim no "
		       "longer waits for it (kv add puts it back)\n", name, id);
	rc = 0;
out:
	innet_topology_free(t);
	return rc;
}

/* After the usage: what is wrong with `innet kv VERB` given nargs operands
 * (and --topology/--name for serve and leader). */
static void kv_usage_why(const char *verb, int nargs, const char *file, const char *name)
{
	static const struct {
		const char *verb;
		int nargs;          /* operands after the verb */
		const char *want;
	} verbs[] = {
		{ "up", 1, "FILE (the topology)" },     { "down", 1, "FILE (the topology)" },
		{ "start", 2, "FILE HOST" },            { "stop", 2, "FILE HOST" },
		{ "rejoin", 2, "FILE ACCEPTOR" },       { "remove", 2, "FILE HOST" },
		{ "add", 2, "FILE HOST" },              { "serve", 0, "--topology FILE --name HOST" },
		{ "leader", 0, "--topology FILE --name HOST" },
	};
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		if (strcmp(verbs[i].verb, verb) != 0)
			continue;
		if (verbs[i].nargs == 0 && nargs == 0)
			fprintf(stderr, "innet kv %s: missing %s%s%s\n", verb, file ? "" : "--topology FILE",
				!file && !name ? " and " : "", name ? "" : "--name HOST");
		else if (nargs < verbs[i].nargs)
			fprintf(stderr, "innet kv %s: missing operand%s: wants %s\n", verb,
				verbs[i].nargs - nargs > 1 ? "s" : "", verbs[i].want);
		else
			fprintf(stderr, "innet kv %s: too many operands: wants %s\n", verb, verbs[i].want);
		return;
	}
	fprintf(stderr, "innet kv: unknown command '%s'\n", verb);
}

int cmd_kv(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' }, { "name", required_argument, NULL, 'n' },
		{ "port", required_argument, NULL, 'p' },     { "help", no_argument, NULL, 'h' },
		{ "window", required_argument, NULL, 'w' },   { "kill", no_argument, NULL, 'k' },
		{ "metrics", required_argument, NULL, 'M' }, { "reads", required_argument, NULL, 'r' },
		{ "proto-max-bulk-len", required_argument, NULL, 'B' },
		{ "learner-filter", required_argument, NULL, 'L' },
		{ "filter-mode", required_argument, NULL, 'F' }, { "keep-logs", no_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 },
	};
	const char *file = NULL, *name = NULL, *metrics = NULL;
	unsigned long port = 6379;
	struct kv_opts o = { 0 };
	bool kill_now = false, keep_logs = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:n:p:w:khK", opts, NULL)) != -1) {
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
		case 'w': {
			char *end;
			unsigned long window = strtoul(optarg, &end, 10);
			if (*end || window == 0 || window > KV_MAX_WINDOW) {
				fprintf(stderr, "innet kv: --window wants 1..%u\n", KV_MAX_WINDOW);
				goto bad;
			}
			o.window = (uint32_t)window;
			break;
		}
		case 'r':
			if (strcmp(optarg, "index") != 0 && strcmp(optarg, "log") != 0) {
				fprintf(stderr, "innet kv: --reads wants index or log, not '%s'\n", optarg);
				goto bad;
			}
			o.reads_log = !strcmp(optarg, "log");
			break;
		case 'B': {
			unsigned long long v;
			if (kv_parse_memory(optarg, strlen(optarg), &v) != 0 || v < (1u << 20) ||
			    v > (1ull << 30) || strlen(optarg) >= sizeof(o.max_bulk)) {
				fprintf(stderr, "innet kv: --proto-max-bulk-len wants a memory value from "
						"1mb to 1gb, not '%s'\n", optarg);
				goto bad;
			}
			snprintf(o.max_bulk, sizeof(o.max_bulk), "%s", optarg);
			break;
		}
		case 'L': o.filter = optarg; break;
		case 'F':
			if (strcmp(optarg, "quorum") != 0 && strcmp(optarg, "redundant") != 0) {
				fprintf(stderr, "innet kv: --filter-mode wants quorum or redundant\n");
				goto bad;
			}
			o.filter_redundant = !strcmp(optarg, "redundant");
			break;
		case 'k': kill_now = true; break;
		case 'K': keep_logs = true; break;
		case 'M': metrics = optarg; break;
		case 'h': kv_usage(stdout); return 0;
		default: goto bad;
		}
	}
	if (optind >= argc)
		goto bad;
	const char *verb = argv[optind];
	if (metrics != NULL && strcmp(verb, "serve") != 0) {
		fprintf(stderr, "innet kv: --metrics goes with serve (one replica, one address)\n");
		goto bad;
	}
	if (!strcmp(verb, "serve") && optind + 1 == argc && file && name)
		return serve(file, name, (uint16_t)port, &o, metrics);
	if (!strcmp(verb, "leader") && optind + 1 == argc && file && name)
		return leader(file, name);
	if (!strcmp(verb, "up") && optind + 2 == argc)
		return kv_up(argv[optind + 1], (uint16_t)port, &o);
	if (!strcmp(verb, "down") && optind + 2 == argc)
		return kv_down(argv[optind + 1], keep_logs);
	if ((!strcmp(verb, "start") || !strcmp(verb, "stop")) && optind + 3 == argc)
		return kv_one(argv[optind + 1], argv[optind + 2], verb[2] == 'a', (uint16_t)port,
			      &o, kill_now);
	if (!strcmp(verb, "rejoin") && optind + 3 == argc)
		return kv_rejoin(argv[optind + 1], argv[optind + 2]);
	if ((!strcmp(verb, "remove") || !strcmp(verb, "add")) && optind + 3 == argc)
		return kv_membership(argv[optind + 1], argv[optind + 2], verb[0] == 'a', (uint16_t)port);
	kv_usage(stderr);
	kv_usage_why(verb, argc - optind - 1, file, name);
	return 2;
bad:
	kv_usage(stderr);
	return 2;
}
