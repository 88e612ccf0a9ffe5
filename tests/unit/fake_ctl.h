/*
 * fake_ctl.h — a stand-in for a switch's control socket in unit tests (one
 * thread per socket): it accepts connections one at a time and answers each
 * request line with what the test's answer() returns — a JSON line, or
 * NULL to say nothing (the client must time out) — so that the clients of
 * control sockets (innet/ctl_client.h, consensus/kv_rejoin.h) are tested
 * against every kind of answer without a switch.
 *
 *   test ── fake_ctl_start(path, answer) ──▶ thread: accept ─▶ read line ─▶ answer ─▶ write
 */
#ifndef INNET_TEST_FAKE_CTL_H
#define INNET_TEST_FAKE_CTL_H

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

struct fake_ctl;
/* The answer to line (no '\n'), written into out; NULL: no answer. */
typedef const char *(*fake_answer_fn)(struct fake_ctl *f, const char *line, char *out,
				      size_t outlen);

struct fake_ctl {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int lfd;
	pthread_t th;
	atomic_bool stop;
	fake_answer_fn answer;
	void *arg;                  /* the test's */
	atomic_int requests;        /* lines received */
	atomic_bool close_without_answer; /* close the connection instead of answering */
	atomic_size_t split;        /* write answers in pieces of this many bytes (0: whole) */
};

static void fake_ctl_write(int fd, const char *s, size_t n, size_t split)
{
	for (size_t off = 0; off < n;) {
		size_t k = split && n - off > split ? split : n - off;
		ssize_t w = send(fd, s + off, k, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		off += (size_t)w;
		if (split)
			usleep(1000);
	}
}

static void *fake_ctl_main(void *arg)
{
	struct fake_ctl *f = arg;
	static __thread char line[1 << 16], out[1 << 16];
	while (!atomic_load(&f->stop)) {
		struct pollfd pl = { .fd = f->lfd, .events = POLLIN };
		if (poll(&pl, 1, 20) <= 0)
			continue;
		int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		size_t len = 0;
		while (!atomic_load(&f->stop)) {
			struct pollfd pc = { .fd = fd, .events = POLLIN };
			if (poll(&pc, 1, 20) <= 0)
				continue;
			ssize_t r = recv(fd, line + len, sizeof(line) - 1 - len, 0);
			if (r <= 0)
				break;
			len += (size_t)r;
			line[len] = '\0';
			char *nl;
			bool closed = false;
			while ((nl = strchr(line, '\n')) != NULL) {
				*nl = '\0';
				atomic_fetch_add(&f->requests, 1);
				if (atomic_load(&f->close_without_answer)) {
					closed = true;
					break;
				}
				const char *a = f->answer(f, line, out, sizeof(out));
				if (a != NULL) {
					fake_ctl_write(fd, a, strlen(a), atomic_load(&f->split));
					fake_ctl_write(fd, "\n", 1, 0);
				}
				len -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, len + 1);
			}
			if (closed)
				break;
		}
		close(fd);
	}
	return NULL;
}

/* Listen on path and serve in a thread. 0 or -errno. */
static int fake_ctl_start(struct fake_ctl *f, const char *path, fake_answer_fn answer, void *arg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memset(f, 0, sizeof(*f));
	if (strlen(path) >= sizeof(f->path))
		return -ENAMETOOLONG;
	memcpy(f->path, path, strlen(path) + 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	f->answer = answer;
	f->arg = arg;
	unlink(path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(f->lfd, 8) != 0)
		return -errno;
	return -pthread_create(&f->th, NULL, fake_ctl_main, f);
}

static void fake_ctl_stop(struct fake_ctl *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
	close(f->lfd);
	unlink(f->path);
}

#endif /* INNET_TEST_FAKE_CTL_H */
