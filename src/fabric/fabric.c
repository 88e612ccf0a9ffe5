/*
 * fabric.c — a topology's switches as processes on this machine: up, down,
 * status, and stop/start/restart of one switch (innet/fabric.h;
 * `innet fabric` is the command line over it, docs/man/innet-fabric.md).
 *
 *   innet_fabric_up        validate, spawn one `innet switch` per switch (in
 *                          its network namespace in netns mode), wait for
 *                          every control socket, record them in fabric.json
 *   innet_fabric_down      stop what up recorded, clean the state directory
 *   innet_fabric_status    which recorded switches are running
 *   innet_fabric_stop      one switch (SIGTERM, or SIGKILL: a crash)
 *   innet_fabric_start     it again, with the topology and worker count up
 *                          used, or with settings changed (--set: a copy of
 *                          the topology, <state_dir>/<switch>.restart.json)
 *   innet_fabric_restart   both
 *
 * State lives in the topology's state_dir:
 *
 *   <state_dir>/fabric.json    what up started: the resolved topology + pids
 *                              (fabric.TAG.json with a machine tag, so that
 *                              machines sharing a file system keep apart)
 *   <state_dir>/<switch>.sock  each switch's control socket
 *   <state_dir>/<switch>.log   each switch's stdout and stderr
 *
 * Only pids recorded in fabric.json are ever signalled, and only while
 * /proc/PID/cmdline still reads "innet switch ... --name SWITCH".
 *
 * Messages for the user (progress, and what went wrong) go to the caller's
 * `say` callback; nothing is printed. THREAD SAFETY: one call at a time per
 * thread (the options of the call in progress are thread-local).
 */
#include <errno.h>
#include <fcntl.h>
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

#include "innet/fabric.h"
#include "innet/topology.h"
#include "innet/switch.h"
#include "runtime/switch_pvt.h"

#define STOP_GRACE_MS   5000   /* SIGTERM, then this long, then SIGKILL */
#define POLL_MS         20
#define ERRBUF          16384  /* room for many parse errors */

/* The call in progress (set by each innet_fabric_* entry). */
static __thread const struct innet_fabric_opts *cur;

__attribute__((format(printf, 2, 3)))
static void say(bool problem, const char *fmt, ...)
{
	if (cur == NULL || cur->say == NULL)
		return;
	char line[ERRBUF];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	size_t n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	cur->say(cur->arg, problem, line);
}

/* A switch process, started by us or recorded in fabric.json. */
struct proc {
	char name[INNET_NAME_MAX];
	char ctl[108];
	pid_t pid;        /* 0: none */
	bool child;       /* our own child: waitpid() tells when it is gone */
	bool exited;      /* child reaped */
	int status;       /* its wait status */
};

/* One call's options: the public ones and what the call acts on. */
struct opts {
	const char *file;
	const char *node;       /* stop, start, restart: the switch */
	const char *const *sets;
	unsigned n_sets;
	bool kill;
	const char *state;
	const char *machine;
	uint64_t workers;
	uint64_t timeout_s;
	bool foreground;
	bool keep_logs;
	const char *exe;
};

static uint64_t now_ms(void)
{
	return innet_now_ns() / 1000000;
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

/* Load and check FILE, printing every problem. Exit status in *rc on failure. */
static struct innet_topology *load(const char *file, int *rc)
{
	static char err[ERRBUF];
	struct innet_topology *t = innet_topology_load(file, err, sizeof(err));

	if (t != NULL)
		return t;
	int e = errno;
	unsigned n = 1;
	for (const char *c = err; *c; c++)
		n += *c == '\n';
	if (e == EINVAL)
		say(true, "%s is not a valid topology (%u problem%s):\n%s\n",
			file, n, n == 1 ? "" : "s", err);
	else
		say(true, "%s\n", err);
	*rc = e == ENOMEM ? 1 : 2;
	errno = e;
	return NULL;
}

/* out = dir/file (state_dir paths are short: topology.c checks the ctl
 * socket path, which is the longest). */
/* The state file: fabric.json, or fabric.<TAG>.json with --machine TAG, so
 * machines that share a file system (namespaces on one host) keep apart. */
static __thread char state_file[INNET_NAME_MAX + 16] = "fabric.json";

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
/* Processes.                                                                */

/* The innet executable that runs the switches: o->exe, this process's if it
 * is innet, else `innet` on PATH. 0, or -1 (reported). */
static int find_exe(const struct opts *o, char *out, size_t len)
{
	if (o->exe != NULL) {
		if (snprintf(out, len, "%s", o->exe) >= (int)len)
			goto none;
		return 0;
	}
	ssize_t n = readlink("/proc/self/exe", out, len - 1);
	if (n > 0) {
		out[n] = '\0';
		const char *base = strrchr(out, '/');
		if (base != NULL && !strcmp(base + 1, "innet"))
			return 0;
	}
	const char *path = getenv("PATH");
	for (const char *d = path; d != NULL && *d != '\0';) {
		const char *end = strchr(d, ':');
		size_t dl = end ? (size_t)(end - d) : strlen(d);
		if (dl > 0 && snprintf(out, len, "%.*s/innet", (int)dl, d) < (int)len &&
		    access(out, X_OK) == 0)
			return 0;
		d = end ? end + 1 : NULL;
	}
none:
	say(true, "cannot find the innet executable to run the switches with (set it, or put "
		  "innet on PATH)");
	return -1;
}

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
			say(true, "%s (pid %d) ignored SIGTERM; killing it\n",
				procs[i].name, (int)procs[i].pid);
			kill(procs[i].pid, SIGKILL);
		}
	int left = wait_gone(procs, n, 1000);
	for (size_t i = 0; i < n; i++)
		if (proc_alive(&procs[i]))
			say(true, "%s (pid %d) is still running\n", procs[i].name,
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
	say(true, "  last lines of %s:\n", path);
	for (char *line = strtok(start, "\n"); line != NULL; line = strtok(NULL, "\n"))
		say(true, "  | %s\n", line);
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
		say(true, "%s: unreadable state: %s\n"
			"  (if no switch of this fabric is running, remove it by hand)\n", path,
			root ? "no \"switches\" array" : je.text);
		json_decref(root);
		return -1;
	}
	struct proc *procs = calloc(json_array_size(sws) + 1, sizeof(*procs));
	if (procs == NULL) {
		json_decref(root);
		say(true, "out of memory\n");
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
		say(true, "cannot write %s: %s\n", path, strerror(-r));
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
			say(true, "cannot enter the namespace of %s: %s\n", sw,
				strerror(errno));
			_exit(127);
		}
		execv(exe, (char *const *)argv);
		say(true, "cannot run %s: %s\n", exe, strerror(errno));
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
				say(true, "switch %s %s before its control socket "
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
			say(true, "timed out after %llu s waiting for the control "
				"socket of:", (unsigned long long)timeout_s);
			for (uint32_t i = 0; i < t->n_switches; i++)
				if (procs[i].pid > 0 && !ready[i])
					say(true, " %s", procs[i].name);
			say(true, "\n  (logs in %s/)\n", t->state_dir);
			goto out;
		}
		int sig = sigtimedwait(set, NULL, &poll);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			say(true, "interrupted while starting\n");
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
			say(false, "fabric %s: stopping (%s)\n", t->name, strsignal(sig));
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
			say(true, "switch %s %s\n", p->name, why);
		}
		if (alive == 0) {
			say(true, "every switch has exited\n");
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
		say(true, "%s: %s\n", o->file, strerror(errno));
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
		say(true, "no switch in %s has \"machine\": \"%s\"\n", file,
			o->machine);
		rc = 2;
		goto out;
	}

	/* Refuse to start twice. */
	int n_prev = read_state(t->state_dir, &prev);
	for (int i = 0; i < n_prev; i++)
		if (proc_alive(&prev[i])) {
			say(true, "%s is already up (switch %s is pid %d); "
				"run 'innet fabric down %s' first\n", t->name, prev[i].name,
				(int)prev[i].pid, o->file);
			goto out;
		}
	if (find_exe(o, exe, sizeof(exe)) != 0)
		goto out;
	int r = innet_mkdir_p(t->state_dir);
	if (r < 0) {
		say(true, "cannot create %s: %s\n", t->state_dir, strerror(-r));
		goto out;
	}

	if (t->netns) {
		char nerr[1024];
		if (innet_topology_netns_up(t, nerr, sizeof(nerr)) != 0) {
			say(true, "%s\n", nerr);
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
			say(true, "cannot start switch %s: %s\n", p->name,
				strerror(errno));
			p->pid = 0;
			goto out_stop;
		}
		started++;
	}
	if (write_state(t, file, procs) < 0 || wait_ready(t, procs, &set, o->timeout_s) != 0)
		goto out_stop;

	say(false, "fabric %s is up: %u switch%s%s, %u host%s, %u link%s; state in %s\n", t->name,
	       started, started == 1 ? "" : "es", o->machine ? " on this machine" : "",
	       t->n_hosts, t->n_hosts == 1 ? "" : "s", t->n_links, t->n_links == 1 ? "" : "s",
	       t->state_dir);
	rc = 0;
	if (!o->foreground)
		goto out_mask;
	say(false, "running in the foreground; SIGINT or SIGTERM stops it\n");
	rc = stay(t, procs, &set);
	stop_procs(procs, t->n_switches);
	clean_state(t->state_dir, procs, t->n_switches);
	if (t->netns)
		innet_topology_netns_down(t->name);
	goto out_mask;

out_stop:
	if (started > 0)
		say(true, "stopping the %u switch%s started\n", started,
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
		say(false, "nothing to stop: no %s/%s\n", dir, state_file);
		return 0;
	}
	int running = 0;
	for (int i = 0; i < n; i++)
		running += proc_alive(&procs[i]);
	int left = stop_procs(procs, (size_t)n);
	/* one line: what was stopped, then what was removed */
	char msg[PATH_MAX + 512];
	size_t m = (size_t)snprintf(msg, sizeof(msg), "stopped %d switch%s (%d recorded); ",
				    running - left, running - left == 1 ? "" : "es", n);
	if (left != 0) {
		say(false, "%s%d still running: state in %s kept", msg, left, dir);
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
			if (gone > 0 && m < sizeof(msg))
				m += (size_t)snprintf(msg + m, sizeof(msg) - m,
						      "removed %d network namespace%s of %s; ", gone,
						      gone == 1 ? "" : "s", t->name);
		}
		innet_topology_free(t);
	}
	if (o->keep_logs) {
		say(false, "%sremoved the sockets and %s; logs kept in %s", msg, state_file, dir);
	} else {
		for (int i = 0; i < n; i++) {
			char path[PATH_MAX];
			log_path(dir, procs[i].name, path, sizeof(path));
			if (path[0] != '\0')
				unlink(path);
		}
		/* Only if empty: other tools (innet kv) keep their files there too. */
		if (rmdir(dir) == 0)
			say(false, "%sremoved the sockets, %s, the logs and %s", msg, state_file, dir);
		else
			say(false, "%sremoved the sockets, %s and the logs; %s kept: %s", msg, state_file,
			    dir, errno == ENOTEMPTY || errno == EEXIST ? "it holds other files"
								      : strerror(errno));
	}
	free(procs);
	return 0;
}

/* The recorded switches and whether they run. */
static int fabric_status(const struct opts *o, struct innet_fabric_switch **out, size_t *nout,
			 char *dir, size_t dirlen)
{
	struct proc *procs;
	int rc = state_dir_of(o, dir, dirlen);

	*out = NULL;
	*nout = 0;
	if (rc != 0)
		return rc;
	int n = read_state(dir, &procs);
	if (n < 0)
		return 2;
	if (n == 0)
		return -ENOENT;
	struct innet_fabric_switch *l = calloc((size_t)n, sizeof(*l));
	if (l == NULL) {
		free(procs);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		struct proc *p = &procs[i];
		snprintf(l[i].name, sizeof(l[i].name), "%s", p->name);
		snprintf(l[i].ctl, sizeof(l[i].ctl), "%s", p->ctl);
		l[i].pid = p->pid > 0 ? (int)p->pid : 0;
		l[i].state = proc_alive(p) ? INNET_FABRIC_RUNNING
			     : p->pid > 0 ? INNET_FABRIC_STOPPED : INNET_FABRIC_NOT_STARTED;
	}
	free(procs);
	*out = l;
	*nout = (size_t)n;
	return 0;
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
		say(true, "no fabric is up here: no %s\n", path);
		return NULL;
	}
	json_t *root = json_load_file(path, 0, &je);
	json_t *sws = json_object_get(root, "switches");
	if (root == NULL || !json_is_array(sws) ||
	    !json_is_string(json_object_get(root, "topology"))) {
		say(true, "%s: unreadable state%s%s\n", path,
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
	say(true, "the fabric in %s has no switch '%s'\n", dir, o->node);
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
		say(true, "cannot write %s: %s\n", path, strerror(errno));
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
		say(false, "switch %s is not running\n", p->name);
		return 0;
	}
	kill(p->pid, kill_now ? SIGKILL : SIGTERM);
	if (wait_gone(p, 1, kill_now ? 2000 : STOP_GRACE_MS) != 0 && !kill_now) {
		say(true, "%s (pid %d) ignored SIGTERM; killing it\n", p->name,
			(int)p->pid);
		kill(p->pid, SIGKILL);
		wait_gone(p, 1, 1000);
	}
	if (proc_alive(p)) {
		say(true, "%s (pid %d) is still running\n", p->name, (int)p->pid);
		return 1;
	}
	say(false, "stopped switch %s (pid %d%s)\n", p->name, (int)p->pid, kill_now ? ", killed" : "");
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
		say(true, "--set wants INSTANCE.KEY=JSON, not '%s'\n", set);
		return 2;
	}
	memcpy(inst, set, (size_t)(dot - set));
	inst[dot - set] = '\0';
	char key[256];
	if ((size_t)(eq - dot - 1) >= sizeof(key)) {
		say(true, "--set: key too long in '%s'\n", set);
		return 2;
	}
	memcpy(key, dot + 1, (size_t)(eq - dot - 1));
	key[eq - dot - 1] = '\0';
	json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, &je);
	if (val == NULL) {
		say(true, "--set %s: the value is not JSON: %s\n", set, je.text);
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
				say(true, "--set %s: the instance's \"args\" is not "
					"an object\n", set);
				return 2;
			}
			return 0;
		}
	}
	json_decref(val);
	say(true, "--set %s: switch %s has no program instance '%s' in the "
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
		say(true, "%s: %s\n", file, je.text);
		return 2;
	}
	for (unsigned i = 0; i < o->n_sets; i++)
		if ((rc = apply_set(top, o->node, o->sets[i])) != 0)
			goto out;
	rc = 1;
	if (snprintf(out, len, "%s/%s.restart.json", dir, o->node) >= (int)len)
		goto out;
	if (json_dump_file(top, out, JSON_INDENT(1)) < 0) {
		say(true, "cannot write %s: %s\n", out, strerror(errno));
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
		say(true, "switch %s is running (pid %d); stop it first (or use "
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
	if (find_exe(o, exe, sizeof(exe)) != 0)
		goto out;
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
		say(true, "cannot start switch %s: %s\n", p.name, strerror(errno));
		goto out;
	}
	p.child = true;
	p.exited = false;
	uint64_t deadline = now_ms() + o->timeout_s * 1000;
	for (;;) {
		char why[128];
		if (!proc_alive(&p)) {
			describe_exit(&p, why, sizeof(why));
			say(true, "switch %s %s before its control socket came up\n",
				p.name, why);
			print_log_tail(log, 5);
			goto out;
		}
		if (ctl_accepts(p.ctl))
			break;
		if (now_ms() >= deadline) {
			say(true, "timed out after %llu s waiting for the control "
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
	say(false, "started switch %s (pid %d)%s%s\n", p.name, (int)p.pid, o->n_sets ? " from " : "",
	       o->n_sets ? topo : "");
	rc = 0;
out:
	json_decref(root);
	return rc;
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


/* ------------------------------------------------------------------------ */
/* The API (innet/fabric.h)                                                  */

/* 0/1/2 of the functions above (2: bad input) as 0/-errno. */
static int api_rc(int rc)
{
	return rc == 0 ? 0 : rc == 2 ? -EINVAL : rc == 1 ? -EIO : rc;
}

static int enter(const struct innet_fabric_opts *po, const char *file, const char *sw,
		 struct opts *o)
{
	static const struct innet_fabric_opts none;
	cur = po ? po : &none;
	memset(o, 0, sizeof(*o));
	o->file = file;
	o->node = sw;
	o->sets = cur->sets;
	o->n_sets = cur->n_sets;
	o->kill = cur->kill;
	o->state = cur->state_dir;
	o->machine = cur->machine;
	o->workers = cur->workers;
	o->timeout_s = cur->timeout_s ? cur->timeout_s : 10;
	o->foreground = cur->foreground;
	o->keep_logs = cur->keep_logs;
	o->exe = cur->exe;
	if (o->machine != NULL)
		snprintf(state_file, sizeof(state_file), "fabric.%s.json", o->machine);
	else
		snprintf(state_file, sizeof(state_file), "fabric.json");
	if (file == NULL && o->state == NULL) {
		say(true, "no topology file and no state directory");
		return -EINVAL;
	}
	return 0;
}

struct innet_topology *innet_fabric_load(const char *file, const struct innet_fabric_opts *po)
{
	static const struct innet_fabric_opts none;
	int rc;
	cur = po ? po : &none;
	struct innet_topology *t = load(file, &rc);
	cur = NULL;
	return t;
}

int innet_fabric_up(const char *file, const struct innet_fabric_opts *po)
{
	struct opts o;
	int rc = file == NULL ? -EINVAL : enter(po, file, NULL, &o);
	if (rc == 0)
		rc = api_rc(fabric_up(&o));
	cur = NULL;
	return rc;
}

int innet_fabric_down(const char *file, const struct innet_fabric_opts *po)
{
	struct opts o;
	int rc = enter(po, file, NULL, &o);
	if (rc == 0)
		rc = api_rc(fabric_down(&o));
	cur = NULL;
	return rc;
}

int innet_fabric_status(const char *file, const struct innet_fabric_opts *po,
			struct innet_fabric_switch **out, size_t *n, char *dir, size_t dirlen)
{
	struct opts o;
	char d[PATH_MAX];
	*out = NULL;
	*n = 0;
	int rc = enter(po, file, NULL, &o);
	if (rc == 0)
		rc = api_rc(fabric_status(&o, out, n, d, sizeof(d)));
	if (dir != NULL && dirlen > 0)
		snprintf(dir, dirlen, "%s", rc == 0 || rc == -ENOENT ? d : "");
	cur = NULL;
	return rc;
}

int innet_fabric_stop(const char *file, const char *sw, const struct innet_fabric_opts *po)
{
	struct opts o;
	int rc = enter(po, file, sw, &o);
	if (rc == 0)
		rc = api_rc(fabric_stop(&o));
	cur = NULL;
	return rc;
}

int innet_fabric_start(const char *file, const char *sw, const struct innet_fabric_opts *po)
{
	struct opts o;
	int rc = enter(po, file, sw, &o);
	if (rc == 0)
		rc = api_rc(start_switch(&o, NULL));
	cur = NULL;
	return rc;
}

int innet_fabric_restart(const char *file, const char *sw, const struct innet_fabric_opts *po)
{
	struct opts o;
	int rc = enter(po, file, sw, &o);
	if (rc == 0)
		rc = api_rc(fabric_restart(&o));
	cur = NULL;
	return rc;
}

char *innet_fabric_topology_json(const struct innet_topology *t, const char *file)
{
	json_t *j = topology_json(t, file, NULL);
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	if (s == NULL)
		errno = ENOMEM;
	return s;
}

int innet_mkdir_p(const char *dir)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (c == '\0')
			return 0;
		*s = c;
	}
}

int innet_mkdir_parent(const char *path)
{
	char dir[PATH_MAX];

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	char *slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	return innet_mkdir_p(dir);
}

bool innet_ctl_answers(const char *path)
{
	return ctl_accepts(path);
}
