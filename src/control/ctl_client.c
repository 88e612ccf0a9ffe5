/*
 * ctl_client.c — the client of a switch's control socket (innet/ctl_client.h):
 * connect with a bound, send a request line, read one response line. Moved
 * here from `innet ctl` (src/cli/cmd_ctl.c), which had the full client;
 * `innet kv` and the fabric had two smaller copies of their own.
 *
 *   buf: bytes received and not yet returned (a response may arrive in
 *   pieces, and a piece may end inside the next response):
 *
 *     [ response 1 ... '\n' | response 2 (part) ]
 *       ^ returned, then moved out                ^ len        ^ cap
 *
 * Not thread-safe: one client, one thread at a time.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "innet/clock.h"
#include "innet/ctl_client.h"

struct innet_ctl_client {
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	double timeout;        /* seconds: connect, and each request */
	char *buf;             /* received bytes not yet returned */
	size_t len, cap;
};

static double now_s(void)
{
	return (double)innet_now_ns() / 1e9;
}

#define SAY(...) snprintf(err, errlen, __VA_ARGS__)

struct innet_ctl_client *innet_ctl_client_open(const char *path, double timeout_s, char *err,
					       size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int e;
	if (strlen(path) >= sizeof(sun.sun_path)) {
		SAY("%s: socket path too long (at most %zu bytes)", path, sizeof(sun.sun_path) - 1);
		errno = ENAMETOOLONG;
		return NULL;
	}
	struct innet_ctl_client *c = calloc(1, sizeof(*c));
	if (c == NULL) {
		SAY("out of memory");
		errno = ENOMEM;
		return NULL;
	}
	strcpy(sun.sun_path, path);
	strcpy(c->path, path);
	c->timeout = timeout_s;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		e = errno;
		SAY("%s: socket: %s", path, strerror(e));
		goto err_free;
	}
	/* connect() on a Unix socket honours SO_SNDTIMEO when the backlog is full. */
	struct timeval tv = { .tv_sec = (time_t)timeout_s,
			      .tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6) };
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		e = errno;
		SAY("cannot connect to %s: %s%s", path, strerror(e),
		    (e == ENOENT || e == ECONNREFUSED) ? " (is the switch running?)" : "");
		goto err_close;
	}
	return c;

err_close:
	close(c->fd);
err_free:
	free(c);
	errno = e;
	return NULL;
}

const char *innet_ctl_client_path(const struct innet_ctl_client *c)
{
	return c->path;
}

void innet_ctl_client_close(struct innet_ctl_client *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c);
}

/* Send line and its '\n'. 0, or -errno (err set). */
static int send_line(struct innet_ctl_client *c, const char *line, char *err, size_t errlen)
{
	size_t n = strlen(line), off = 0;
	char *req = malloc(n + 1);
	if (req == NULL) {
		SAY("out of memory");
		return -ENOMEM;
	}
	memcpy(req, line, n);
	req[n++] = '\n';
	while (off < n) {
		ssize_t w = send(c->fd, req + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : ECONNRESET;
			SAY("%s: sending the request: %s", c->path,
			    w < 0 ? strerror(e) : "connection closed");
			free(req);
			return -e;
		}
		off += (size_t)w;
	}
	free(req);
	return 0;
}

char *innet_ctl_client_request(struct innet_ctl_client *c, const char *line, char *err,
			       size_t errlen)
{
	double deadline = now_s() + c->timeout;
	int e = -send_line(c, line, err, errlen);
	if (e != 0)
		goto fail;
	for (;;) {
		char *nl = c->buf ? memchr(c->buf, '\n', c->len) : NULL;
		if (nl != NULL) {
			size_t l = (size_t)(nl - c->buf);
			char *resp = malloc(l + 1);
			if (resp == NULL) {
				SAY("out of memory");
				e = ENOMEM;
				goto fail;
			}
			memcpy(resp, c->buf, l);
			resp[l] = '\0';
			c->len -= l + 1;
			memmove(c->buf, nl + 1, c->len);
			return resp;
		}
		if (c->len >= INNET_CTL_RESPONSE_MAX) {
			SAY("%s: response longer than %u bytes", c->path, INNET_CTL_RESPONSE_MAX);
			e = EMSGSIZE;
			goto fail;
		}
		double left = deadline - now_s();
		if (left <= 0) {
			SAY("%s: no response within %.3g s", c->path, c->timeout);
			e = ETIMEDOUT;
			goto fail;
		}
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			e = errno;
			SAY("%s: poll: %s", c->path, strerror(e));
			goto fail;
		}
		if (pr == 0)
			continue; /* the deadline check above reports it */
		if (c->cap - c->len < 65536) {
			size_t cap = c->cap ? c->cap * 2 : 131072;
			char *p = realloc(c->buf, cap);
			if (p == NULL) {
				SAY("out of memory");
				e = ENOMEM;
				goto fail;
			}
			c->buf = p;
			c->cap = cap;
		}
		ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			e = r < 0 ? errno : ECONNRESET;
			SAY("%s: %s before the response was complete", c->path,
			    r < 0 ? strerror(e) : "the switch closed the connection");
			goto fail;
		}
		c->len += (size_t)r;
	}
fail:
	errno = e;
	return NULL;
}

json_t *innet_ctl_call(const char *path, const char *line, double timeout_s, char *err,
		       size_t errlen)
{
	struct innet_ctl_client *c = innet_ctl_client_open(path, timeout_s, err, errlen);
	if (c == NULL)
		return NULL;
	char *resp = innet_ctl_client_request(c, line, err, errlen);
	int e = errno;
	innet_ctl_client_close(c);
	if (resp == NULL) {
		errno = e;
		return NULL;
	}
	json_error_t je;
	json_t *j = json_loads(resp, 0, &je);
	free(resp);
	if (!json_is_object(j)) {
		SAY("%s: '%s': the response is not a JSON object: %s", path, line, je.text);
		json_decref(j);
		errno = EBADMSG;
		return NULL;
	}
	if (!json_is_true(json_object_get(j, "ok"))) {
		const char *why = json_string_value(json_object_get(j, "error"));
		SAY("%s: '%s': %s", path, line, why ? why : "error");
		json_decref(j);
		errno = EPROTO;
		return NULL;
	}
	return j;
}

bool innet_ctl_answers(const char *path)
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
