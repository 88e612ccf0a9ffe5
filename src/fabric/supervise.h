/*
 * fabric/supervise.h — background processes that outlive the command that
 * started them: the fabric's switches (fabric_proc.c) and a KV fabric's
 * replicas and backup coordinators (`innet kv`, src/cli/cmd_kv.c) are
 * started, recognised and stopped the same way (src/fabric/supervise.c):
 *
 *   sv_spawn     fork; in the child: a session of its own (a terminal's
 *                Ctrl-C reaches only the command, which stops them in
 *                order), stdin /dev/null, stdout and stderr to a log,
 *                SIGINT/SIGTERM/SIGHUP at their defaults, an optional setup
 *                (entering a network namespace), exec
 *   sv_running   is this pid still one of ours: alive (not a zombie) and its
 *                command line is what the caller expects — a pid from a pid
 *                file may have been reused by anything since
 *   sv_stop      SIGTERM (or SIGKILL at once), a grace period, SIGKILL
 *   sv_pidfile_* where a later command finds the pid
 *
 * Errors: -1 / 0 with errno as each says; nothing is printed (the child's
 * own failures go to its log).
 */
#ifndef INNET_FABRIC_SUPERVISE_H
#define INNET_FABRIC_SUPERVISE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct sv_spawn {
	const char *exe;             /* what to execv */
	char *const *argv;           /* its arguments (argv[0] included), NULL-terminated */
	const char *log;             /* stdout and stderr go here (created 0644) */
	bool append;                 /* append to the log (else truncate it) */
	const sigset_t *mask;        /* the child's signal mask; NULL: the parent's */
	/* In the child, before exec (may be NULL): non-zero = give up (the
	 * child exits 127; what it says on stderr is in the log). */
	int (*setup)(void *arg);
	void *arg;
};

/* Start it. The pid, or -1 with errno (the log cannot be opened, fork). */
pid_t sv_spawn(const struct sv_spawn *s);

/* True if pid is alive (not a zombie) and match(argc, argv, arg) accepts its
 * command line. */
bool sv_running(pid_t pid, bool (*match)(int argc, const char *const *argv, void *arg),
		void *arg);

/* Stop a process: SIGTERM (SIGKILL at once if kill_now), then up to grace_ms
 * for alive(arg) to turn false, then SIGKILL and up to 1 s more. 0 gone, 1
 * still running. *killed (may be NULL) says whether SIGKILL was sent. */
int sv_stop(pid_t pid, bool kill_now, unsigned grace_ms, bool (*alive)(void *arg), void *arg,
	    bool *killed);

/* Wait up to ms for alive(arg) to turn false; true if it did. */
bool sv_wait_gone(unsigned ms, bool (*alive)(void *arg), void *arg);

/* A pid file: one line, the pid. write: 0 or -errno; read: the pid, or 0
 * (no file, or not a pid). */
int sv_pidfile_write(const char *path, pid_t pid);
pid_t sv_pidfile_read(const char *path);

#endif /* INNET_FABRIC_SUPERVISE_H */
