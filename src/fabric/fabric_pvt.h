/*
 * fabric_pvt.h — the private parts of `innet fabric`'s library module
 * (innet/fabric.h is the public side), shared by its files:
 *
 *   fabric.c        the API and the calls: up, down, status, stop, start,
 *                   restart; messages for the user (fab_say)
 *   fabric_json.c   the resolved topology as JSON, and the state file
 *                   fabric.json: writing, reading, updating, removing it
 *   fabric_proc.c   the switch processes: spawning, checking, stopping them,
 *                   their control sockets and logs
 *
 * Not installed; nothing here is exported from libinnet.so
 * (src/libinnet.map), and the fab_ prefix keeps the names apart from the
 * rest of libinnet.a.
 *
 * Threads: one call at a time per thread; what the call in progress uses
 * (its `say` callback, the state file's name) is thread-local.
 */
#ifndef INNET_FABRIC_PVT_H
#define INNET_FABRIC_PVT_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "innet/switch.h"
#include "innet/topology.h"

#define POLL_MS         20

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

/* ---- fabric.c ------------------------------------------------------------ */

/* A line for the user through the call's `say` callback (problem: something
 * went wrong); trailing newlines are dropped. */
__attribute__((format(printf, 2, 3)))
void fab_say(bool problem, const char *fmt, ...);
/* The state directory from --state or from the topology file. */
int fab_state_dir_of(const struct opts *o, char *out, size_t len);

/* ---- fabric_json.c: the state directory's files -------------------------- */

/* The state file: fabric.json, or fabric.<TAG>.json with --machine TAG (set
 * by each innet_fabric_* entry). */
extern __thread char fab_state_file[INNET_NAME_MAX + 16];
/* out = <dir>/<sw>.log ("" if it does not fit). */
void fab_log_path(const char *dir, const char *sw, char *out, size_t len);
/* The whole topology; with procs (n_switches entries, pid 0 = not started)
 * also pids and logs, as in fabric.json. NULL when out of memory. */
json_t *fab_topology_json(const struct innet_topology *t, const char *file,
			  const struct proc *procs);
/* Remove each ctl socket (if it is one) and fabric.json. */
void fab_clean_state(const char *dir, const struct proc *procs, size_t n);
/* Read <dir>/fabric.json into procs (allocated). Returns the count, 0 if
 * there is no state file, -1 on a bad one (reported). */
int fab_read_state(const char *dir, struct proc **out);
/* Write fabric.json atomically. 0 or -errno (reported). */
int fab_write_state(const struct innet_topology *t, const char *file, const struct proc *procs);
/* fabric.json of the fabric (FILE's state_dir, or --state DIR) and the index
 * of switch o->node in its "switches". NULL (reported) if there is none. */
json_t *fab_load_state_json(const struct opts *o, char *dir, size_t dirlen, size_t *idx,
			    int *rc);
/* One entry of fabric.json's "switches" as a struct proc. */
void fab_proc_of(json_t *sw, struct proc *p);
/* Write fabric.json (root) back atomically. 0 or -1 (reported). */
int fab_save_state_json(const char *dir, json_t *root);

/* ---- fabric_proc.c: switch processes ------------------------------------- */

uint64_t fab_now_ms(void);
void fab_sleep_ms(unsigned ms);
/* The innet executable that runs the switches: o->exe, this process's if it
 * is innet, else `innet` on PATH. 0, or -1 (reported). */
int fab_find_exe(const struct opts *o, char *out, size_t len);
/* p is running: our child not yet reaped, or a live pid that runs
 * "innet switch ... --name p->name". */
bool fab_proc_alive(struct proc *p);
/* SIGTERM every live process, SIGKILL what is left after STOP_GRACE_MS.
 * Returns how many could not be stopped. */
int fab_stop_procs(struct proc *procs, size_t n);
/* Stop one switch: SIGTERM (SIGKILL after STOP_GRACE_MS), or SIGKILL at
 * once with --kill. 0 stopped or not running, 1 still running. */
int fab_stop_one(struct proc *p, bool kill_now);
/* True if something accepts connections on the unix socket at path. */
/* The last `lines` lines of a log file, indented, to `say`. */
void fab_print_log_tail(const char *path, int lines);
/* fork + exec `innet switch --topology FILE --name SW [--workers N]`, with
 * stdout and stderr to its log (appended to, or truncated), in its own
 * session, with signal mask `mask`, in its network namespace in netns mode
 * (t). The pid, or -1 with errno. */
pid_t fab_spawn_switch(const char *exe, const char *file, const char *sw, const char *log,
		       uint64_t workers, const sigset_t *mask, bool append,
		       const struct innet_topology *t);
/* Build the P4 programs of the selected switches (procs[i].pid < 0) once
 * each, before any starts: `innet p4 build JSON` into the cache the switches
 * then load from (a program is compiled when first loaded: seconds, not
 * something N switches should each do against the start timeout). 0, or -1
 * (reported, with the build's own message). */
int fab_p4_prebuild(const char *exe, const struct innet_topology *t, const struct proc *procs);
/* How child p ended: "exited with status N", "was killed by SIGNAL". */
void fab_describe_exit(const struct proc *p, char *out, size_t len);

#endif /* INNET_FABRIC_PVT_H */
