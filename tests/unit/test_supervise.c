/*
 * test_supervise.c — background processes (src/fabric/supervise.c): a
 * process started with its output in a log (truncated or appended), in a
 * session of its own; recognised by its command line (and not once it is a
 * zombie, nor a live process whose command line is another's); stopped by
 * SIGTERM, by SIGKILL after the grace period when it ignores SIGTERM, and
 * by SIGKILL at once; a setup step that fails in the child; pid files.
 * The children are /bin/sh scripts that exec a bounded sleep.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/clock.h"
#include "fabric/supervise.h"

static char dir[64], log_path[128];

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/innet-supervise.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(log_path, sizeof(log_path), "%s/child.log", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* sv_running's test: "sleep N" (arg: N as text; each case sleeps its own N,
 * so no case's test matches another's process). */
static bool has_word(int argc, const char *const *argv, void *arg)
{
	return argc == 2 && !strcmp(argv[0], "sleep") && !strcmp(argv[1], arg);
}

struct child {
	pid_t pid;
	const char *marker;
};

/* Alive and ours; reaps it once it exited (we are its parent here). */
static bool alive(void *arg)
{
	struct child *c = arg;
	int st;
	waitpid(c->pid, &st, WNOHANG);
	return sv_running(c->pid, has_word, (void *)c->marker);
}

static pid_t spawn_sh(const char *script, bool append, int (*setup_fn)(void *))
{
	char *const argv[] = { "sh", "-c", (char *)script, NULL };
	struct sv_spawn s = { .exe = "/bin/sh", .argv = argv, .log = log_path, .append = append,
			      .setup = setup_fn };
	return sv_spawn(&s);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static void wait_for_log(const char *want)
{
	for (int i = 0; i < 2000 && strstr(slurp(log_path), want) == NULL; i++)
		usleep(5000);
	assert_non_null(strstr(slurp(log_path), want));
}

static void test_start_and_stop(void **state)
{
	pid_t pid = spawn_sh("echo started-1; echo to-stderr >&2; exec sleep 31", false, NULL);
	assert_true(pid > 0);
	struct child c = { pid, "31" };
	wait_for_log("to-stderr");
	for (int i = 0; i < 2000 && !alive(&c); i++)  /* (until sh has exec'ed sleep) */
		usleep(5000);
	assert_true(alive(&c));
	assert_int_equal(getsid(pid), pid);          /* a session of its own */
	/* not ours under another command line */
	assert_false(sv_running(pid, has_word, "99"));
	bool killed = true;
	assert_int_equal(sv_stop(pid, false, 5000, alive, &c, &killed), 0);
	assert_false(killed);                         /* SIGTERM was enough */
	assert_false(alive(&c));
	/* a fresh log is truncated, an appended one kept */
	pid = spawn_sh("echo started-2", false, NULL);
	waitpid(pid, NULL, 0);
	assert_null(strstr(slurp(log_path), "started-1"));
	pid = spawn_sh("echo started-3", true, NULL);
	waitpid(pid, NULL, 0);
	assert_non_null(strstr(slurp(log_path), "started-2\nstarted-3"));
}

static void test_ignores_sigterm(void **state)
{
	/* (SIGTERM ignored survives the exec) */
	pid_t pid = spawn_sh("trap '' TERM; echo ready; exec sleep 32", false, NULL);
	struct child c = { pid, "32" };
	wait_for_log("ready");
	for (int i = 0; i < 2000 && !alive(&c); i++)
		usleep(5000);
	uint64_t t0 = innet_now_ns();
	bool killed = false;
	assert_int_equal(sv_stop(pid, false, 300, alive, &c, &killed), 0);
	assert_true(killed);                          /* SIGKILL after the grace period */
	assert_true(innet_now_ns() - t0 >= 290000000ull);
	assert_false(alive(&c));
	/* --kill: SIGKILL at once */
	pid = spawn_sh("trap '' TERM; echo ready2; exec sleep 32", false, NULL);
	c.pid = pid;
	wait_for_log("ready2");
	for (int i = 0; i < 2000 && !alive(&c); i++)
		usleep(5000);
	assert_int_equal(sv_stop(pid, true, 5000, alive, &c, &killed), 0);
	assert_true(killed);
	int st;
	/* gone: alive() reaped it, or it died between alive()'s waitpid and its
	 * /proc check (a zombie then, reaped here) */
	pid_t r = waitpid(pid, &st, 0);
	assert_true(r == -1 || (r == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
}

static void test_zombie_is_not_running(void **state)
{
	pid_t pid = spawn_sh("exec sleep 0.2", false, NULL);
	/* running (once sh exec'ed sleep) ... */
	for (int i = 0; i < 2000 && !sv_running(pid, has_word, "0.2"); i++)
		usleep(1000);
	/* ... then exited, not reaped: a zombie, which is not "running" */
	siginfo_t si;
	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	assert_false(sv_running(pid, has_word, "0.2"));
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_false(sv_running(pid, has_word, "0.2"));
	assert_false(sv_running(0, has_word, "x"));
	assert_false(sv_running(-1, has_word, "x"));
}

static int failing_setup(void *arg)
{
	fprintf(stderr, "setup refused: no namespace\n");
	return -1;
}

static void test_setup_fails(void **state)
{
	pid_t pid = spawn_sh("echo never-runs", false, failing_setup);
	assert_true(pid > 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 127);
	assert_non_null(strstr(slurp(log_path), "setup refused: no namespace"));
	assert_null(strstr(slurp(log_path), "never-runs"));
	/* an executable that is not there: exit 127, said in the log */
	char *const argv[] = { "nope", NULL };
	struct sv_spawn s = { .exe = "/nonexistent/nope", .argv = argv, .log = log_path };
	pid = sv_spawn(&s);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 127);
	assert_non_null(strstr(slurp(log_path), "cannot run /nonexistent/nope"));
	/* a log that cannot be opened: no process */
	s.log = "/nonexistent-dir/x.log";
	errno = 0;
	assert_int_equal(sv_spawn(&s), -1);
	assert_int_equal(errno, ENOENT);
}

static void test_pidfile(void **state)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/x.pid", dir);
	assert_int_equal(sv_pidfile_read(path), 0);   /* none */
	assert_int_equal(sv_pidfile_write(path, 4242), 0);
	assert_int_equal(sv_pidfile_read(path), 4242);
	FILE *f = fopen(path, "w");
	fputs("garbage\n", f);
	fclose(f);
	assert_int_equal(sv_pidfile_read(path), 0);
	assert_int_equal(sv_pidfile_write("/nonexistent-dir/x.pid", 1), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_and_stop),
		cmocka_unit_test(test_ignores_sigterm),
		cmocka_unit_test(test_zombie_is_not_running),
		cmocka_unit_test(test_setup_fails),
		cmocka_unit_test(test_pidfile),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
