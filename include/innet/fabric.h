/*
 * innet/fabric.h — a topology's switches as processes on this machine: bring
 * a fabric up and down, see which switches run, stop, start and restart one
 * (src/fabric/fabric*.c; `innet fabric` is the command line over it,
 * docs/man/innet-fabric.md; topology files: docs/topology.md).
 *
 * Each switch is one `innet switch --topology FILE --name SWITCH` process
 * (in the switch's network namespace in netns mode), its log and control
 * socket in the topology's state_dir, and every process started is recorded
 * in <state_dir>/fabric.json so that later calls — from any process — find
 * them. Messages for the user (progress, and what went wrong, with the
 * switch's last log lines) go to the `say` callback; nothing is printed.
 *
 * Errors: 0, or -EINVAL for bad input (a topology file that does not load,
 * a switch that is not in it, a bad --set), or another -errno (-EIO: a
 * switch failed to start or stop, -ENOENT: no fabric is up there); `say`
 * has the details either way.
 */
#ifndef INNET_FABRIC_H
#define INNET_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct innet_fabric_opts {
	const char *machine;     /* only the switches with "machine": TAG (up); that
	                          * machine's state in fabric.TAG.json. NULL: all */
	const char *state_dir;   /* a state directory instead of the file's (down,
	                          * status, stop, start, restart) */
	uint32_t workers;        /* worker threads per switch; 0: the file's */
	uint32_t timeout_s;      /* up, start: wait this long for control sockets; 0: 10 */
	bool foreground;         /* up: stay until SIGINT/SIGTERM/SIGHUP (or every
	                          * switch exited), then take the fabric down */
	bool keep_logs;          /* down: keep the switches' logs */
	bool kill;               /* stop, restart: SIGKILL at once (a crash) */
	const char *const *sets; /* start, restart: "INSTANCE.KEY=JSON" settings for this start */
	uint32_t n_sets;
	const char *exe;         /* the innet executable; NULL: this one if it is innet,
	                          * else `innet` from PATH */
	/* A line for the user: progress (problem false) or what went wrong. */
	void (*say)(void *arg, bool problem, const char *line);
	void *arg;
};

int innet_fabric_up(const char *file, const struct innet_fabric_opts *o);
/* file may be NULL with o->state_dir. Removes the namespaces too (netns mode,
 * when file is given). */
int innet_fabric_down(const char *file, const struct innet_fabric_opts *o);

enum innet_fabric_state {
	INNET_FABRIC_RUNNING = 0,
	INNET_FABRIC_STOPPED,      /* started, now gone */
	INNET_FABRIC_NOT_STARTED,  /* another machine's (up with a machine tag) */
};

struct innet_fabric_switch {
	char name[64];
	char ctl[108];             /* its control socket */
	int pid;                   /* 0: never started here */
	enum innet_fabric_state state;
};

/* The recorded switches of the fabric (an array in *out, free() it; *n
 * entries) and its state directory (dir, dirlen). 0, -ENOENT (no fabric up:
 * *n = 0), -EINVAL (unreadable state or topology). */
int innet_fabric_status(const char *file, const struct innet_fabric_opts *o,
			struct innet_fabric_switch **out, size_t *n, char *dir, size_t dirlen);

/* One switch of a running fabric. */
int innet_fabric_stop(const char *file, const char *sw, const struct innet_fabric_opts *o);
int innet_fabric_start(const char *file, const char *sw, const struct innet_fabric_opts *o);
int innet_fabric_restart(const char *file, const char *sw, const struct innet_fabric_opts *o);

/* Load and check the topology at file, every problem reported through
 * o->say (problem = true; o may be NULL: silent). The topology (free with
 * innet_topology_free), or NULL with errno (EINVAL: not a valid topology,
 * ENOMEM, or the file's error). */
struct innet_topology;
struct innet_topology *innet_fabric_load(const char *file, const struct innet_fabric_opts *o);

/* The resolved topology as JSON text (what `innet fabric show --json`
 * prints; fabric.json has the same plus pids): malloc'ed, or NULL with
 * errno (ENOMEM). file names the topology in it. */
struct innet_topology;
char *innet_fabric_topology_json(const struct innet_topology *t, const char *file);

/* mkdir -p DIR (mode 0755 for what it creates), and of PATH's directory. 0 or -errno. */
int innet_mkdir_p(const char *dir);
int innet_mkdir_parent(const char *path);
/* (Whether a switch's control socket accepts connections:
 * innet_ctl_answers, innet/ctl_client.h.) */

#ifdef __cplusplus
}
#endif
#endif /* INNET_FABRIC_H */
