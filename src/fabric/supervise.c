/*
 * supervise.c — starting, recognising and stopping background processes
 * (fabric/supervise.h): the fabric's switches and a KV fabric's replicas
 * and backup coordinators. Moved together from fabric_proc.c and
 * src/cli/cmd_kv.c, which each had their own fork/exec, /proc check, and
 * SIGTERM-then-SIGKILL loop.
 *
 * A pid from a pid file is trusted only while /proc says it is alive (state
 * not Z or X) and its command line is the expected one: pids are reused.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "innet/clock.h"
#include "fabric/supervise.h"

#define POLL_NS 10000000ull   /* how often a stop looks whether the process is gone */

pid_t sv_spawn(const struct sv_spawn *s)
{
	int fd = open(s->log, O_WRONLY | O_CREAT | (s->append ? O_APPEND : O_TRUNC) | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		setsid();
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (s->mask != NULL)
			sigprocmask(SIG_SETMASK, s->mask, NULL);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		if (s->setup != NULL && s->setup(s->arg) != 0)
			_exit(127);
		execv(s->exe, s->argv);
		fprintf(stderr, "cannot run %s: %s\n", s->exe, strerror(errno));
		_exit(127);
	}
	int e = errno;
	close(fd);
	errno = e;
	return pid;
}

bool sv_running(pid_t pid, bool (*match)(int argc, const char *const *argv, void *arg), void *arg)
{
	char path[64], buf[8192];
	ssize_t n;
	int fd;

	if (pid <= 0)
		return false;
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
	return match(argc, argv, arg);
}

bool sv_wait_gone(unsigned ms, bool (*alive)(void *arg), void *arg)
{
	uint64_t deadline = innet_now_ns() + (uint64_t)ms * 1000000ull;
	for (;;) {
		if (!alive(arg))
			return true;
		if (innet_now_ns() >= deadline)
			return false;
		struct timespec ts = { 0, (long)POLL_NS };
		nanosleep(&ts, NULL);
	}
}

int sv_stop(pid_t pid, bool kill_now, unsigned grace_ms, bool (*alive)(void *arg), void *arg,
	    bool *killed)
{
	if (killed != NULL)
		*killed = kill_now;
	kill(pid, kill_now ? SIGKILL : SIGTERM);
	if (sv_wait_gone(kill_now ? 2000 : grace_ms, alive, arg))
		return 0;
	if (!kill_now) {
		if (killed != NULL)
			*killed = true;
		kill(pid, SIGKILL);
		if (sv_wait_gone(1000, alive, arg))
			return 0;
	}
	return 1;
}

int sv_pidfile_write(const char *path, pid_t pid)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "%d\n", (int)pid);
	if (fclose(f) != 0)
		return -errno;
	return 0;
}

pid_t sv_pidfile_read(const char *path)
{
	FILE *f = fopen(path, "r");
	int pid = 0;
	if (f == NULL)
		return 0;
	if (fscanf(f, "%d", &pid) != 1 || pid < 0)
		pid = 0;
	fclose(f);
	return (pid_t)pid;
}
