/*
 * fabric_proc.c — the switch processes of `innet fabric` (fabric.c runs
 * them): the innet executable that runs them, spawning one (`innet switch`
 * in its own session, in its network namespace in netns mode, output to its
 * log), whether a pid is still one of our switches, stopping them (SIGTERM,
 * then SIGKILL), whether a control socket accepts connections yet, how a
 * switch exited and the last lines of its log. Shared: fabric_pvt.h.
 *
 * A pid that is not our own child counts as a switch only while it is alive
 * and /proc/PID/cmdline reads "innet switch ... --name SWITCH"; our own
 * children are reaped with waitpid. Starting, recognising and stopping one
 * process is fabric/supervise.h's, shared with `innet kv`'s replicas.
 *
 * No state of its own; messages go to the calling thread's call (fab_say).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "innet/topology.h"
#include "innet/switch.h"
#include "fabric/fabric_pvt.h"
#include "fabric/supervise.h"

#define STOP_GRACE_MS   5000   /* SIGTERM, then this long, then SIGKILL */

uint64_t fab_now_ms(void)
{
	return innet_now_ns() / 1000000;
}

void fab_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ------------------------------------------------------------------------ */
/* Processes.                                                                */

/* The innet executable that runs the switches: o->exe, this process's if it
 * is innet, else `innet` on PATH. 0, or -1 (reported). */
int fab_find_exe(const struct opts *o, char *out, size_t len)
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
	fab_say(true, "cannot find the innet executable to run the switches with (set it, or put "
		  "innet on PATH)");
	return -1;
}

/* sv_running's test: "innet switch ... --name SW" (arg: SW). */
static bool is_switch_cmdline(int argc, const char *const *argv, void *arg)
{
	const char *sw = arg;
	if (argc < 2 || strcmp(argv[1], "switch") != 0)
		return false;
	for (int i = 2; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--name") && !strcmp(argv[i + 1], sw))
			return true;
	return false;
}

bool fab_proc_alive(struct proc *p)
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
	return sv_running(p->pid, is_switch_cmdline, p->name);
}

static bool proc_alive(void *arg)
{
	return fab_proc_alive(arg);
}

/* Wait up to ms for every process to be gone; returns how many are left. */
static int wait_gone(struct proc *procs, size_t n, unsigned ms)
{
	uint64_t deadline = fab_now_ms() + ms;

	for (;;) {
		int left = 0;
		for (size_t i = 0; i < n; i++)
			left += fab_proc_alive(&procs[i]);
		if (left == 0 || fab_now_ms() >= deadline)
			return left;
		fab_sleep_ms(POLL_MS);
	}
}

/* SIGTERM every live process, SIGKILL what is left after STOP_GRACE_MS.
 * Returns how many could not be stopped. */
int fab_stop_procs(struct proc *procs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fab_proc_alive(&procs[i]))
			kill(procs[i].pid, SIGTERM);
	if (wait_gone(procs, n, STOP_GRACE_MS) == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (fab_proc_alive(&procs[i])) {
			fab_say(true, "%s (pid %d) ignored SIGTERM; killing it\n",
				procs[i].name, (int)procs[i].pid);
			kill(procs[i].pid, SIGKILL);
		}
	int left = wait_gone(procs, n, 1000);
	for (size_t i = 0; i < n; i++)
		if (fab_proc_alive(&procs[i]))
			fab_say(true, "%s (pid %d) is still running\n", procs[i].name,
				(int)procs[i].pid);
	return left;
}

/* The last `lines` lines of a log file, indented, on stderr. */
void fab_print_log_tail(const char *path, int lines)
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
	fab_say(true, "  last lines of %s:\n", path);
	for (char *line = strtok(start, "\n"); line != NULL; line = strtok(NULL, "\n"))
		fab_say(true, "  | %s\n", line);
}

/* In the child, before exec: the switch's network namespace (netns mode). */
struct enter_arg {
	const struct innet_topology *t;
	const char *sw;
};

static int enter_netns(void *arg)
{
	const struct enter_arg *e = arg;
	int idx = e->t != NULL && e->t->netns ? innet_topology_find(e->t, e->sw) : -1;
	if (idx >= 0 && innet_topology_enter(e->t, (uint32_t)idx) != 0) {
		fab_say(true, "cannot enter the namespace of %s: %s\n", e->sw, strerror(errno));
		return -1;
	}
	return 0;
}

/* `innet switch --topology FILE --name SW [--workers N]` in the background
 * (fabric/supervise.h: its own session, so that a terminal's Ctrl-C reaches
 * only us — we stop the switches in order —, output to its log), in its
 * namespace in netns mode. */
pid_t fab_spawn_switch(const char *exe, const char *file, const char *sw, const char *log,
		       uint64_t workers, const sigset_t *mask, bool append,
		       const struct innet_topology *t)
{
	char wbuf[24];
	const char *argv[] = { exe, "switch", "--topology", file, "--name", sw,
			       workers ? "--workers" : NULL /* ends argv here */, wbuf, NULL };
	snprintf(wbuf, sizeof(wbuf), "%llu", (unsigned long long)workers);
	struct enter_arg ea = { t, sw };
	struct sv_spawn sp = { .exe = exe, .argv = (char *const *)argv, .log = log, .append = append,
			       .mask = mask, .setup = enter_netns, .arg = &ea };
	return sv_spawn(&sp);
}

void fab_describe_exit(const struct proc *p, char *out, size_t len)
{
	if (WIFEXITED(p->status))
		snprintf(out, len, "exited with status %d", WEXITSTATUS(p->status));
	else if (WIFSIGNALED(p->status))
		snprintf(out, len, "was killed by %s", strsignal(WTERMSIG(p->status)));
	else
		snprintf(out, len, "stopped");
}

/* Stop one switch: SIGTERM (SIGKILL after STOP_GRACE_MS), or SIGKILL at
 * once with --kill. 0 stopped or not running, 1 still running. */
int fab_stop_one(struct proc *p, bool kill_now)
{
	if (!fab_proc_alive(p)) {
		fab_say(false, "switch %s is not running\n", p->name);
		return 0;
	}
	bool killed;
	int left = sv_stop(p->pid, kill_now, STOP_GRACE_MS, proc_alive, p, &killed);
	if (killed && !kill_now)
		fab_say(true, "%s (pid %d) ignored SIGTERM; killed it\n", p->name, (int)p->pid);
	if (left) {
		fab_say(true, "%s (pid %d) is still running\n", p->name, (int)p->pid);
		return 1;
	}
	fab_say(false, "stopped switch %s (pid %d%s)\n", p->name, (int)p->pid, kill_now ? ", killed" : "");
	return 0;
}

/* `exe p4 build json`, its output into out; the exit status or -1. */
static int run_p4_build(const char *exe, const char *json, char *out, size_t len)
{
	int fds[2];
	if (pipe(fds) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0)
			_exit(127);
		close(fds[0]);
		execl(exe, exe, "p4", "build", json, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	size_t n = 0;
	ssize_t r;
	while ((r = read(fds[0], out + n, len - 1 - n)) > 0 && n + (size_t)r < len - 1)
		n += (size_t)r;
	if (r > 0)
		n += (size_t)r;
	out[n] = '\0';
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int fab_p4_prebuild(const char *exe, const struct innet_topology *t, const struct proc *procs)
{
	for (uint32_t i = 0; i < t->n_switches; i++) {
		const struct innet_topo_node *n = &t->nodes[i];
		if (!n->p4 || procs[i].pid >= 0 || n->conf->progs[0].args_json == NULL)
			continue;
		json_t *a = json_loads(n->conf->progs[0].args_json, 0, NULL);
		const char *json = json_string_value(json_object_get(a, "json"));
		bool seen = false;
		for (uint32_t j = 0; json != NULL && j < i && !seen; j++) {
			const struct innet_topo_node *m = &t->nodes[j];
			if (!m->p4 || procs[j].pid >= 0 || m->conf->progs[0].args_json == NULL)
				continue;
			json_t *b = json_loads(m->conf->progs[0].args_json, 0, NULL);
			const char *other = json_string_value(json_object_get(b, "json"));
			seen = other != NULL && !strcmp(other, json);
			json_decref(b);
		}
		int rc = 0;
		if (json != NULL && !seen) {
			char out[4096];
			rc = run_p4_build(exe, json, out, sizeof(out));
			if (rc != 0)
				fab_say(true, "switch %s: cannot build its P4 program %s:\n%s", n->name, json,
					out);
		}
		json_decref(a);
		if (rc != 0)
			return -1;
	}
	return 0;
}
