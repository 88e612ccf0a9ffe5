/*
 * control.c — the switch's control thread: the control socket (a line-based
 * request language answered in JSON, docs/protocol.md "Control socket
 * protocol"), the metrics HTTP server when there is one, and the packets the
 * data plane hands to the CPU.
 *
 *                       ┌──────────────── control thread (innet-ctl) ───────────────┐
 *   innet ctl ──unix──► │ epoll ─┬─ listen fd ─► accept (≤ CTL_MAX_CLIENTS)         │
 *   clients             │        ├─ client fd ─► line ─► tokens ─► command ─► JSON  │
 *   Prometheus ──TCP──► │        ├─ metrics fd ─► innet_metrics_http_run()          │
 *                       │        ├─ cpu_wake_fd ─► innet_switch_cpu_drain() (on_cpu)│
 *                       │        └─ stop_fd ─► exit                                 │
 *                       └───────────────────────────────────────────────────────────┘
 *
 * One request is one line of text (words separated by spaces or tabs,
 * terminated by '\n'); one response is one line of compact JSON terminated by
 * '\n'. A client may send many requests on one connection; responses come in
 * request order. Every response carries "ok": true, or "ok": false with an
 * "error" message.
 *
 * Robustness: a line is bounded (CTL_LINE_MAX; a longer one is answered with
 * an error and discarded up to its newline), numbers are checked (decimal or
 * 0x-hex, range, trailing garbage), hex strings are checked (even length,
 * digits, size), strings echoed into messages are reduced to printable ASCII
 * (JSON must be UTF-8), writes never raise SIGPIPE, and a client that stops
 * reading its responses is not read from until it catches up: a client's
 * next request is handled only once the previous response is fully sent, so
 * its output buffer holds at most one response.
 *
 * Threads: everything here runs on the control thread, except start and stop
 * (the thread that starts and stops the switch). The innet_cp_* calls used
 * are safe against the data plane.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>
#include <pthread.h>

#include "innet/metrics.h"
#include "innet/resources.h"
#include "control/control.h"
#include "engine/switch_ctl.h"

#define CTL_LINE_MAX      65536u      /* longest request line, without '\n' */
#define CTL_MAX_CLIENTS   64u
#define CTL_PAUSE_MS      100         /* out of fds: retry accepting after this */
#define CTL_MAX_WORDS     80u         /* group set: 4 words + 64 members, with room */
#define CTL_ERR_MAX       512u
#define CTL_REG_READ_MAX  4096u       /* elements per "reg read" */
#define CTL_LIST_DEFAULT  256u        /* entries per "table list" unless MAX is given */
#define CTL_LIST_MAX      65536u
#define CTL_RESP_BYTES    (16u << 20) /* bound on the hex in one reg read / table list */
#define CTL_BLOB_MAX      (1u << 20)  /* widest blob register element we will copy */

/* One connected client. */
struct ctl_client {
	int fd;                 /* the connection (non-blocking) */
	struct ctl_client *next;/* in innet_control.clients */
	char *in;               /* CTL_LINE_MAX + 1 bytes: received, not yet a full line */
	size_t in_len;          /* bytes in in */
	bool discarding;        /* an oversized line was answered: drop up to its '\n' */
	bool eof;               /* the peer shut down its writing side */
	char *out;              /* responses not yet sent */
	size_t out_len;         /* bytes in out */
	size_t out_off;         /* bytes of out already sent */
	size_t out_cap;         /* bytes allocated for out */
	uint32_t events;        /* current epoll interest */
};

struct innet_control {
	struct innet_switch *sw;/* the switch served */
	pthread_t thread;       /* the control thread */
	bool thread_started;    /* thread is joinable */
	int epfd;               /* the control thread's epoll instance */
	int stop_fd;            /* eventfd: innet_control_stop wakes the thread */
	int listen_fd;          /* -1 when there is no control socket */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* "" = none */
	struct ctl_client *clients;  /* connected clients */
	uint32_t n_clients;     /* length of clients (<= CTL_MAX_CLIENTS) */
	bool listen_paused;     /* out of fds: listen_fd is out of epoll for a while */
	struct innet_metrics_http *metrics; /* the metrics HTTP server, or NULL */
	/* epoll tags (their addresses) of the fds that are not clients: */
	char tag_listen;        /* listen_fd */
	char tag_stop;          /* stop_fd */
	char tag_cpu;           /* innet_switch_cpu_wake_fd(sw) */
	char tag_metrics;       /* innet_metrics_http_fd(metrics) */
};

_Static_assert(sizeof(((struct innet_switch_conf *)0)->metrics_addr) == INNET_METRICS_ADDR_MAX,
	       "innet_switch_conf.metrics_addr holds any IPv4:PORT");

/* ------------------------------------------------------------------------ */
/* Clients                                                                    */

/* Append s (n bytes) to c's output. 0 or -ENOMEM. */
static int out_append(struct ctl_client *c, const char *s, size_t n)
{
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + n > c->out_cap) {
		if (c->out_off > 0) { /* reclaim what was sent */
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + n)
			cap *= 2;
		if (cap != c->out_cap) {
			char *p = realloc(c->out, cap);
			if (p == NULL)
				return -ENOMEM;
			c->out = p;
			c->out_cap = cap;
		}
	}
	memcpy(c->out + c->out_len, s, n);
	c->out_len += n;
	return 0;
}

/* Queue the response to one request. 0 or -ENOMEM. */
static int respond(struct ctl_client *c, json_t *resp)
{
	static const char oom[] = "{\"ok\":false,\"error\":\"out of memory\"}\n";
	char *s = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
	json_decref(resp);
	int rc;
	if (s == NULL)
		return out_append(c, oom, sizeof(oom) - 1);
	rc = out_append(c, s, strlen(s));
	if (rc == 0)
		rc = out_append(c, "\n", 1);
	free(s);
	return rc;
}

static int respond_error(struct ctl_client *c, const char *msg)
{
	json_t *e = json_object();
	if (e != NULL) {
		json_object_set_new(e, "ok", json_false());
		json_object_set_new(e, "error", json_string(msg));
	}
	return respond(c, e);
}

/* Handle one complete line of c->in if there is one: returns true if it did
 * (the line is consumed), false if no complete line is buffered. */
static bool take_line(struct innet_switch *sw, struct ctl_client *c)
{
	char *nl = memchr(c->in, '\n', c->in_len);
	if (nl == NULL)
		return false;
	size_t len = (size_t)(nl - c->in);
	if (c->discarding)
		c->discarding = false; /* the rest of an oversized line: already answered */
	else if (respond(c, innet_control_run(sw, c->in, len)) != 0)
		respond_error(c, "out of memory");
	c->in_len -= len + 1;
	memmove(c->in, nl + 1, c->in_len);
	return true;
}

static void client_close(struct innet_control *ctl, struct ctl_client *c)
{
	struct ctl_client **pp = &ctl->clients;
	while (*pp != NULL && *pp != c)
		pp = &(*pp)->next;
	if (*pp == c)
		*pp = c->next;
	epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	ctl->n_clients--;
}

/*
 * Make progress on client c: send pending output; once it is all sent,
 * answer the next buffered line; read more input when no line is buffered.
 * Closes the client when it is done or broken. Interest: EPOLLOUT while output
 * is pending (no reading meanwhile: backpressure), else EPOLLIN.
 */
static void client_service(struct innet_control *ctl, struct ctl_client *c)
{
	for (;;) {
		if (c->out_off < c->out_len) {
			ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0) {
				c->out_off += (size_t)w;
				continue;
			}
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			client_close(ctl, c); /* EPIPE, ECONNRESET: the client is gone */
			return;
		}
		/* here all output has been sent */
		if (take_line(ctl->sw, c))
			continue;
		if (c->eof)
			break;
		if (c->in_len == CTL_LINE_MAX) {
			/* a full buffer with no newline: the line is too long */
			if (!c->discarding) {
				char msg[96];
				snprintf(msg, sizeof(msg), "request line longer than %u bytes", CTL_LINE_MAX);
				respond_error(c, msg);
				c->discarding = true;
			}
			c->in_len = 0;
			continue;
		}
		ssize_t n = recv(c->fd, c->in + c->in_len, CTL_LINE_MAX - c->in_len, MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			continue;
		}
		if (n == 0) {
			c->eof = true;
			/* a last request without its newline: answer it too */
			if (c->in_len > 0 && !c->discarding) {
				c->in[c->in_len++] = '\n';
				continue;
			}
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		client_close(ctl, c);
		return;
	}
	bool pending = c->out_off < c->out_len;
	if (c->eof && !pending) {
		client_close(ctl, c);
		return;
	}
	uint32_t ev = pending ? EPOLLOUT : EPOLLIN;
	if (ev != c->events) {
		struct epoll_event e = { .events = ev, .data.ptr = c };
		epoll_ctl(ctl->epfd, EPOLL_CTL_MOD, c->fd, &e);
		c->events = ev;
	}
}

static void accept_clients(struct innet_control *ctl)
{
	for (;;) {
		int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The pending connection stays pending and the listening
				 * socket stays readable: stop polling it for a while
				 * rather than spin (control_main retries). */
				epoll_ctl(ctl->epfd, EPOLL_CTL_DEL, ctl->listen_fd, NULL);
				ctl->listen_paused = true;
			}
			return; /* EAGAIN, or a transient error (ECONNABORTED) */
		}
		if (ctl->n_clients >= CTL_MAX_CLIENTS) {
			static const char busy[] = "{\"ok\":false,\"error\":\"too many control clients\"}\n";
			if (send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				/* best effort */
			}
			close(fd);
			continue;
		}
		struct ctl_client *c = calloc(1, sizeof(*c));
		char *in = malloc(CTL_LINE_MAX + 1);
		if (c == NULL || in == NULL) {
			free(c);
			free(in);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->in = in;
		c->events = EPOLLIN;
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			free(in);
			free(c);
			close(fd);
			continue;
		}
		c->next = ctl->clients;
		ctl->clients = c;
		ctl->n_clients++;
	}
}

/* ------------------------------------------------------------------------ */
/* The thread                                                                 */

static void *control_main(void *arg)
{
	struct innet_control *ctl = arg;
	struct innet_switch *sw = ctl->sw;
	struct epoll_event ev[32];
	pthread_setname_np(pthread_self(), "innet-ctl");

	innet_switch_cpu_drain(sw); /* anything punted before we started */
	for (;;) {
		int n = epoll_wait(ctl->epfd, ev, 32, ctl->listen_paused ? CTL_PAUSE_MS : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("innet: control: epoll_wait");
			return NULL;
		}
		if (ctl->listen_paused) {
			struct epoll_event e = { .events = EPOLLIN, .data.ptr = &ctl->tag_listen };
			if (epoll_ctl(ctl->epfd, EPOLL_CTL_ADD, ctl->listen_fd, &e) == 0)
				ctl->listen_paused = false;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;
			if (p == &ctl->tag_stop) {
				return NULL;
			} else if (p == &ctl->tag_cpu) {
				uint64_t v;
				if (read(innet_switch_cpu_wake_fd(sw), &v, sizeof(v)) < 0) {
					/* EAGAIN: another wake-up already reset it */
				}
				innet_switch_cpu_drain(sw);
			} else if (p == &ctl->tag_listen) {
				accept_clients(ctl);
			} else if (p == &ctl->tag_metrics) {
				innet_metrics_http_run(ctl->metrics);
			} else {
				/* A client closed earlier in this batch cannot appear again:
				 * epoll_wait reported each fd once, and closing removes only
				 * that client. */
				client_service(ctl, p);
			}
		}
	}
}

/* Open the listening socket at ctl->path. 0 or -errno (message in err). */
static int listen_open(struct innet_control *ctl, char *err, size_t errlen)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t len = strlen(ctl->path);
	if (len >= sizeof(sun.sun_path)) {
		snprintf(err, errlen, "control socket path '%s' is too long", ctl->path);
		return -ENAMETOOLONG;
	}
	memcpy(sun.sun_path, ctl->path, len + 1);

	struct stat st;
	if (lstat(ctl->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "control socket path '%s' exists and is not a socket",
				 ctl->path);
			return -EEXIST;
		}
		/* A socket file: is a live switch serving it, or is it stale? */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0) {
			int live = connect(probe, (struct sockaddr *)&sun, sizeof(sun)) == 0;
			close(probe);
			if (live) {
				snprintf(err, errlen, "control socket '%s' is in use by another switch",
					 ctl->path);
				return -EADDRINUSE;
			}
		}
		unlink(ctl->path);
	}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "control socket '%s': %s", ctl->path, strerror(e));
		return -e;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot bind control socket '%s': %s", ctl->path, strerror(e));
		close(fd);
		return -e;
	}
	if (chmod(ctl->path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		snprintf(err, errlen, "control socket '%s': %s", ctl->path, strerror(e));
		close(fd);
		unlink(ctl->path);
		return -e;
	}
	ctl->listen_fd = fd;
	return 0;
}

static void control_free(struct innet_control *ctl)
{
	while (ctl->clients != NULL)
		client_close(ctl, ctl->clients);
	innet_metrics_http_destroy(ctl->metrics);
	if (ctl->listen_fd >= 0) {
		close(ctl->listen_fd);
		unlink(ctl->path);
	}
	if (ctl->stop_fd >= 0)
		close(ctl->stop_fd);
	if (ctl->epfd >= 0)
		close(ctl->epfd);
	free(ctl);
}

static int epoll_add(int epfd, int fd, void *tag)
{
	struct epoll_event e = { .events = EPOLLIN, .data.ptr = tag };
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

/* The metrics server's render callback: the switch's counters. */
static void metrics_render(void *arg, struct innet_prom *w)
{
	innet_metrics_switch(arg, w);
}

/* Listen on innet_switch_conf(sw)->metrics_addr; a port 0 there becomes the one bound.
 * 0 or -errno (message in err). */
static int metrics_open(struct innet_control *ctl, char *err, size_t errlen)
{
	struct innet_switch *sw = ctl->sw;
	uint32_t ip;
	uint16_t port;
	if (innet_metrics_addr_parse(innet_switch_conf(sw)->metrics_addr, &ip, &port, err, errlen) != 0)
		return -EINVAL;
	ctl->metrics = innet_metrics_http_create(ip, port, metrics_render, sw, err, errlen);
	if (ctl->metrics == NULL)
		return errno ? -errno : -ENOMEM;
	if (port == 0) {
		struct in_addr a = { .s_addr = htonl(ip) };
		char host[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, host, sizeof(host));
		char bound[sizeof(innet_switch_conf(sw)->metrics_addr)];
		snprintf(bound, sizeof(bound), "%s:%u", host, innet_metrics_http_port(ctl->metrics));
		innet_switch_set_metrics_addr(sw, bound);
	}
	return 0;
}

/*
 * Start the control thread: open the control socket at innet_switch_conf(sw)->ctl_path
 * (none if it is empty; a stale socket file there is replaced, a live one is
 * -EADDRINUSE, any other file -EEXIST), mode 0600, and serve it; serve the
 * metrics over HTTP on innet_switch_conf(sw)->metrics_addr (none if it is empty); drain
 * the CPU queue whenever innet_switch_cpu_wake_fd(sw) fires. 0 or -errno with a message
 * in err; on failure nothing is left behind. Called by innet_switch_start().
 */
int innet_control_start(struct innet_switch *sw, char *err, size_t errlen)
{
	if (*innet_switch_control_slot(sw) != NULL)
		return -EALREADY;
	struct innet_control *ctl = calloc(1, sizeof(*ctl));
	if (ctl == NULL)
		return -ENOMEM;
	ctl->sw = sw;
	ctl->listen_fd = ctl->stop_fd = -1;
	snprintf(ctl->path, sizeof(ctl->path), "%s", innet_switch_conf(sw)->ctl_path);
	int rc;
	ctl->epfd = epoll_create1(EPOLL_CLOEXEC);
	ctl->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctl->epfd < 0 || ctl->stop_fd < 0) {
		rc = -errno;
		goto err_free;
	}
	if ((rc = epoll_add(ctl->epfd, ctl->stop_fd, &ctl->tag_stop)) != 0)
		goto err_free;
	if (innet_switch_cpu_wake_fd(sw) >= 0 && (rc = epoll_add(ctl->epfd, innet_switch_cpu_wake_fd(sw), &ctl->tag_cpu)) != 0)
		goto err_free;
	if (ctl->path[0] != '\0') {
		if ((rc = listen_open(ctl, err, errlen)) != 0)
			goto err_free;
		if ((rc = epoll_add(ctl->epfd, ctl->listen_fd, &ctl->tag_listen)) != 0)
			goto err_free;
	}
	if (innet_switch_conf(sw)->metrics_addr[0] != '\0') {
		if ((rc = metrics_open(ctl, err, errlen)) != 0)
			goto err_free;
		if ((rc = epoll_add(ctl->epfd, innet_metrics_http_fd(ctl->metrics),
				    &ctl->tag_metrics)) != 0)
			goto err_free;
	}
	rc = -pthread_create(&ctl->thread, NULL, control_main, ctl);
	if (rc != 0)
		goto err_free;
	ctl->thread_started = true;
	*innet_switch_control_slot(sw) = ctl;
	return 0;

err_free:
	control_free(ctl);
	return rc;
}

/*
 * Stop the control thread (wake it, join it), close every client and the
 * listening socket and remove the socket file. Idempotent; called by
 * innet_switch_stop().
 */
void innet_control_stop(struct innet_switch *sw)
{
	struct innet_control *ctl = *innet_switch_control_slot(sw);
	if (ctl == NULL)
		return;
	if (ctl->thread_started) {
		uint64_t one = 1;
		if (write(ctl->stop_fd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow with one write */
		}
		pthread_join(ctl->thread, NULL);
	}
	*innet_switch_control_slot(sw) = NULL;
	control_free(ctl);
}

