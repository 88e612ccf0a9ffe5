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
 *   innet_fabric_load      load and check a topology file, every problem
 *                          to `say`
 *   innet_fabric_topology_json  the resolved topology as JSON (show --json;
 *                          fabric_json.c builds it)
 *   innet_mkdir_p, innet_mkdir_parent
 * (whether a switch is up: its control socket accepts connections,
 * innet_ctl_answers of innet/ctl_client.h)
 *
 * This file is those calls and their steps; the rest is
 *
 *   fabric_json.c   the resolved topology as JSON, and the state file
 *                   fabric.json: written by up, read and updated by the rest
 *   fabric_proc.c   the switch processes: the innet executable, spawning,
 *                   whether a pid is still our switch, stopping, control
 *                   sockets and logs
 *
 * sharing fabric_pvt.h (struct opts: one call; struct proc: one switch).
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
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "innet/ctl_client.h"
#include "innet/fabric.h"
#include "innet/topology.h"
#include "innet/switch.h"
#include "fabric/fabric_pvt.h"

#define ERRBUF          16384  /* room for many parse errors */

/* The call in progress (set by each innet_fabric_* entry). */
static __thread const struct innet_fabric_opts *cur;

__attribute__((format(printf, 2, 3)))
void fab_say(bool problem, const char *fmt, ...)
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

/* Load and check FILE, printing every problem. Exit status in *rc on failure. */
static struct innet_topology *load(const char *file, int *rc)
{
	char *err = malloc(ERRBUF);
	if (err == NULL) {
		fab_say(true, "%s: out of memory\n", file);
		*rc = 1;
		errno = ENOMEM;
		return NULL;
	}
	struct innet_topology *t = innet_topology_load(file, err, ERRBUF);

	if (t != NULL) {
		free(err);
		return t;
	}
	int e = errno;
	unsigned n = 1;
	for (const char *c = err; *c; c++)
		n += *c == '\n';
	if (e == EINVAL)
		fab_say(true, "%s is not a valid topology (%u problem%s):\n%s\n",
			file, n, n == 1 ? "" : "s", err);
	else
		fab_say(true, "%s\n", err);
	free(err);
	*rc = e == ENOMEM ? 1 : 2;
	errno = e;
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* up                                                                        */

/* Wait until every started switch's ctl socket accepts a connection. 0, or
 * 1 after reporting a failure (exit, timeout, signal). */
static int wait_ready(const struct innet_topology *t, struct proc *procs, const sigset_t *set,
		      uint64_t timeout_s)
{
	uint64_t deadline = fab_now_ms() + timeout_s * 1000;
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
			if (!fab_proc_alive(p)) {
				fab_describe_exit(p, why, sizeof(why));
				fab_say(true, "switch %s %s before its control socket "
					"came up\n", p->name, why);
				fab_log_path(t->state_dir, p->name, log, sizeof(log));
				fab_print_log_tail(log, 5);
				goto out;
			}
			ready[i] = innet_ctl_answers(p->ctl);
			waiting += !ready[i];
		}
		if (waiting == 0) {
			rc = 0;
			goto out;
		}
		if (fab_now_ms() >= deadline) {
			fab_say(true, "timed out after %llu s waiting for the control "
				"socket of:", (unsigned long long)timeout_s);
			for (uint32_t i = 0; i < t->n_switches; i++)
				if (procs[i].pid > 0 && !ready[i])
					fab_say(true, " %s", procs[i].name);
			fab_say(true, "\n  (logs in %s/)\n", t->state_dir);
			goto out;
		}
		int sig = sigtimedwait(set, NULL, &poll);
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			fab_say(true, "interrupted while starting\n");
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
			fab_say(false, "fabric %s: stopping (%s)\n", t->name, strsignal(sig));
			return fab_stop_procs(procs, t->n_switches) ? 1 : 0;
		}
		uint32_t alive = 0;
		for (uint32_t i = 0; i < t->n_switches; i++) {
			struct proc *p = &procs[i];
			if (p->pid <= 0 || p->exited)
				continue;
			if (fab_proc_alive(p)) {
				alive++;
				continue;
			}
			fab_describe_exit(p, why, sizeof(why));
			fab_say(true, "switch %s %s\n", p->name, why);
		}
		if (alive == 0) {
			fab_say(true, "every switch has exited\n");
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
		fab_say(true, "%s: %s\n", o->file, strerror(errno));
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
		fab_say(true, "no switch in %s has \"machine\": \"%s\"\n", file,
			o->machine);
		rc = 2;
		goto out;
	}

	/* Refuse to start twice. */
	int n_prev = fab_read_state(t->state_dir, &prev);
	for (int i = 0; i < n_prev; i++)
		if (fab_proc_alive(&prev[i])) {
			fab_say(true, "%s is already up (switch %s is pid %d); "
				"run 'innet fabric down %s' first\n", t->name, prev[i].name,
				(int)prev[i].pid, o->file);
			goto out;
		}
	if (fab_find_exe(o, exe, sizeof(exe)) != 0 || fab_p4_prebuild(exe, t, procs) != 0)
		goto out;
	int r = innet_mkdir_p(t->state_dir);
	if (r < 0) {
		fab_say(true, "cannot create %s: %s\n", t->state_dir, strerror(-r));
		goto out;
	}

	if (t->netns) {
		char nerr[1024];
		if (innet_topology_netns_up(t, nerr, sizeof(nerr)) != 0) {
			fab_say(true, "%s\n", nerr);
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
		fab_log_path(t->state_dir, p->name, log, sizeof(log));
		p->pid = fab_spawn_switch(exe, file, p->name, log, o->workers, &old, false, t);
		if (p->pid < 0) {
			fab_say(true, "cannot start switch %s: %s\n", p->name,
				strerror(errno));
			p->pid = 0;
			goto out_stop;
		}
		started++;
	}
	if (fab_write_state(t, file, procs) < 0 || wait_ready(t, procs, &set, o->timeout_s) != 0)
		goto out_stop;

	fab_say(false, "fabric %s is up: %u switch%s%s, %u host%s, %u link%s; state in %s\n", t->name,
	       started, started == 1 ? "" : "es", o->machine ? " on this machine" : "",
	       t->n_hosts, t->n_hosts == 1 ? "" : "s", t->n_links, t->n_links == 1 ? "" : "s",
	       t->state_dir);
	rc = 0;
	if (!o->foreground)
		goto out_mask;
	fab_say(false, "running in the foreground; SIGINT or SIGTERM stops it\n");
	rc = stay(t, procs, &set);
	fab_stop_procs(procs, t->n_switches);
	fab_clean_state(t->state_dir, procs, t->n_switches);
	if (t->netns)
		innet_topology_netns_down(t->name);
	goto out_mask;

out_stop:
	if (started > 0)
		fab_say(true, "stopping the %u switch%s started\n", started,
			started == 1 ? "" : "es");
	fab_stop_procs(procs, t->n_switches);
	fab_clean_state(t->state_dir, procs, t->n_switches);
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
int fab_state_dir_of(const struct opts *o, char *out, size_t len)
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
	int rc = fab_state_dir_of(o, dir, sizeof(dir));

	if (rc != 0)
		return rc;
	int n = fab_read_state(dir, &procs);
	if (n < 0)
		return 1;
	if (n == 0) {
		fab_say(false, "nothing to stop: no %s/%s\n", dir, fab_state_file);
		return 0;
	}
	int running = 0;
	for (int i = 0; i < n; i++)
		running += fab_proc_alive(&procs[i]);
	int left = fab_stop_procs(procs, (size_t)n);
	/* one line: what was stopped, then what was removed */
	char msg[PATH_MAX + 512];
	size_t m = (size_t)snprintf(msg, sizeof(msg), "stopped %d switch%s (%d recorded); ",
				    running - left, running - left == 1 ? "" : "es", n);
	if (left != 0) {
		fab_say(false, "%s%d still running: state in %s kept", msg, left, dir);
		free(procs);
		return 1;
	}
	fab_clean_state(dir, procs, (size_t)n);
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
		fab_say(false, "%sremoved the sockets and %s; logs kept in %s", msg, fab_state_file, dir);
	} else {
		for (int i = 0; i < n; i++) {
			char path[PATH_MAX];
			fab_log_path(dir, procs[i].name, path, sizeof(path));
			if (path[0] != '\0')
				unlink(path);
		}
		/* Only if empty: other tools (innet kv) keep their files there too. */
		if (rmdir(dir) == 0)
			fab_say(false, "%sremoved the sockets, %s, the logs and %s", msg, fab_state_file, dir);
		else
			fab_say(false, "%sremoved the sockets, %s and the logs; %s kept: %s", msg, fab_state_file,
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
	int rc = fab_state_dir_of(o, dir, dirlen);

	*out = NULL;
	*nout = 0;
	if (rc != 0)
		return rc;
	int n = fab_read_state(dir, &procs);
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
		l[i].state = fab_proc_alive(p) ? INNET_FABRIC_RUNNING
			     : p->pid > 0 ? INNET_FABRIC_STOPPED : INNET_FABRIC_NOT_STARTED;
	}
	free(procs);
	*out = l;
	*nout = (size_t)n;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* stop, start, restart: one switch of a running fabric                      */

static int fabric_stop(const struct opts *o)
{
	char dir[PATH_MAX];
	size_t idx;
	int rc;
	json_t *root = fab_load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;

	if (root == NULL)
		return rc;
	fab_proc_of(json_array_get(json_object_get(root, "switches"), idx), &p);
	rc = fab_stop_one(&p, o->kill);
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
		fab_say(true, "--set wants INSTANCE.KEY=JSON, not '%s'\n", set);
		return 2;
	}
	memcpy(inst, set, (size_t)(dot - set));
	inst[dot - set] = '\0';
	char key[256];
	if ((size_t)(eq - dot - 1) >= sizeof(key)) {
		fab_say(true, "--set: key too long in '%s'\n", set);
		return 2;
	}
	memcpy(key, dot + 1, (size_t)(eq - dot - 1));
	key[eq - dot - 1] = '\0';
	json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, &je);
	if (val == NULL) {
		fab_say(true, "--set %s: the value is not JSON: %s\n", set, je.text);
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
				fab_say(true, "--set %s: the instance's \"args\" is not "
					"an object\n", set);
				return 2;
			}
			return 0;
		}
	}
	json_decref(val);
	fab_say(true, "--set %s: switch %s has no program instance '%s' in the "
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
		fab_say(true, "%s: %s\n", file, je.text);
		return 2;
	}
	for (unsigned i = 0; i < o->n_sets; i++)
		if ((rc = apply_set(top, o->node, o->sets[i])) != 0)
			goto out;
	rc = 1;
	if (snprintf(out, len, "%s/%s.restart.json", dir, o->node) >= (int)len)
		goto out;
	if (json_dump_file(top, out, JSON_INDENT(1)) < 0) {
		fab_say(true, "cannot write %s: %s\n", out, strerror(errno));
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
	json_t *root = fab_load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;
	sigset_t none;

	if (root == NULL)
		return rc;
	json_t *sw = json_array_get(json_object_get(root, "switches"), idx);
	fab_proc_of(sw, &p);
	if (fab_proc_alive(&p)) {
		fab_say(true, "switch %s is running (pid %d); stop it first (or use "
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
	if (fab_find_exe(o, exe, sizeof(exe)) != 0)
		goto out;
	json_int_t workers = json_integer_value(json_object_get(sw, "workers"));
	fab_log_path(dir, p.name, log, sizeof(log));
	if (p.ctl[0]) {
		struct stat st;
		if (lstat(p.ctl, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(p.ctl);
	}
	sigemptyset(&none);
	int lrc;
	struct innet_topology *t = load(topo, &lrc);   /* netns mode: its namespace */
	p.pid = fab_spawn_switch(exe, topo, p.name, log, workers > 0 ? (uint64_t)workers : 0, &none, true, t);
	innet_topology_free(t);
	if (p.pid < 0) {
		fab_say(true, "cannot start switch %s: %s\n", p.name, strerror(errno));
		goto out;
	}
	p.child = true;
	p.exited = false;
	uint64_t deadline = fab_now_ms() + o->timeout_s * 1000;
	for (;;) {
		char why[128];
		if (!fab_proc_alive(&p)) {
			fab_describe_exit(&p, why, sizeof(why));
			fab_say(true, "switch %s %s before its control socket came up\n",
				p.name, why);
			fab_print_log_tail(log, 5);
			goto out;
		}
		if (innet_ctl_answers(p.ctl))
			break;
		if (fab_now_ms() >= deadline) {
			fab_say(true, "timed out after %llu s waiting for the control "
				"socket of %s; stopping it\n", (unsigned long long)o->timeout_s, p.name);
			fab_stop_one(&p, true);
			goto out;
		}
		fab_sleep_ms(POLL_MS);
	}
	json_object_set_new(sw, "pid", json_integer(p.pid));
	json_object_set_new(sw, "log", json_string(log));
	if (o->n_sets > 0)
		json_object_set_new(sw, "topology", json_string(topo));
	else
		json_object_del(sw, "topology");
	if (fab_save_state_json(dir, root) < 0) {
		fab_stop_one(&p, false);
		goto out;
	}
	fab_say(false, "started switch %s (pid %d)%s%s\n", p.name, (int)p.pid, o->n_sets ? " from " : "",
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
	json_t *root = fab_load_state_json(o, dir, sizeof(dir), &idx, &rc);
	struct proc p;

	if (root == NULL)
		return rc;
	fab_proc_of(json_array_get(json_object_get(root, "switches"), idx), &p);
	rc = start_topology(o, dir, json_string_value(json_object_get(root, "topology")), topo,
			    sizeof(topo));
	json_decref(root);
	if (rc != 0)
		return rc;
	if ((rc = fab_stop_one(&p, o->kill)) != 0)
		return rc;
	return start_switch(o, topo);
}

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
		snprintf(fab_state_file, sizeof(fab_state_file), "fabric.%s.json", o->machine);
	else
		snprintf(fab_state_file, sizeof(fab_state_file), "fabric.json");
	if (file == NULL && o->state == NULL) {
		fab_say(true, "no topology file and no state directory");
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
	json_t *j = fab_topology_json(t, file, NULL);
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
