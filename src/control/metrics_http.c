/*
 * metrics_http.c — a small HTTP/1.0-1.1 server for GET /metrics, run inside
 * its caller's event loop (innet/metrics.h): the switch's control thread,
 * `innet kv serve`'s loop. Nothing here blocks, nothing starts a thread.
 *
 *   caller's epoll ──► h->epfd (nested epoll, level-triggered)
 *                        ├─ listen fd ─► accept (≤ HTTP_MAX_CLIENTS; over it,
 *                        │               the oldest client still reading goes)
 *                        ├─ timer fd  ─► deadlines (ticks while anyone is
 *                        │               connected, or accepting is paused)
 *                        └─ client fd ─► READING ─► WRITING ─► DRAINING ─► closed
 *
 * A client's life:
 *   READING   bytes into req[HTTP_REQ_MAX] until the blank line that ends the
 *             headers; HTTP_READ_MS after accept at the latest (a half-open
 *             or trickling client is closed then). A request that does not
 *             fit is answered 431; a peer that shuts down mid-request, 400.
 *   WRITING   the whole response (status line, headers, body) was built at
 *             once; sent as the socket takes it, within HTTP_WRITE_MS.
 *   DRAINING  after the response, shutdown(SHUT_WR), then read and discard
 *             until the peer closes, for at most HTTP_DRAIN_MS: closing with
 *             unread bytes would send a reset that can destroy the response
 *             in flight (the peer may have sent more than one request).
 *
 * Requests are parsed strictly enough to refuse garbage (400): a request
 * line of exactly three parts, a method of letters, a target starting with
 * '/', "HTTP/" and a version; header lines with a colon; no NUL or other
 * control bytes. A request body is not read (GET and HEAD have none; it is
 * drained with the rest).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "innet/clock.h"
#include "innet/metrics.h"

#define HTTP_MAX_CLIENTS  64u
#define HTTP_REQ_MAX      8192u      /* request line and headers */
#define HTTP_READ_MS      5000u      /* the whole request, from accept */
#define HTTP_WRITE_MS     10000u     /* the whole response */
#define HTTP_DRAIN_MS     1000u      /* waiting for the peer to close */
#define HTTP_TICK_MS      100u       /* deadline resolution */
#define HTTP_EVENTS       64

enum http_state {
	HTTP_READING = 0,
	HTTP_WRITING,
	HTTP_DRAINING,
};

struct http_client {
	int fd;                      /* the connection (non-blocking) */
	enum http_state state;
	uint64_t deadline_ns;        /* close it then (CLOCK_MONOTONIC) */
	struct http_client *prev;    /* in innet_metrics_http.clients, newest first */
	struct http_client *next;
	size_t req_len;              /* bytes in req */
	size_t scanned;              /* req[0..scanned) holds no end of the headers */
	char *out;                   /* the response */
	size_t out_len;              /* its length */
	size_t out_off;              /* bytes sent */
	uint32_t events;             /* current epoll interest */
	char req[HTTP_REQ_MAX];      /* the request as received */
};

struct innet_metrics_http {
	int epfd;                    /* polled by the caller */
	int listen_fd;
	int timer_fd;
	bool timer_on;               /* timer_fd is ticking */
	bool accept_paused;          /* out of fds: listen_fd is out of epfd for a tick */
	uint16_t port;               /* bound port */
	innet_metrics_render_fn render;
	void *arg;
	struct http_client *clients; /* newest first */
	struct http_client *oldest;  /* the list's tail */
	uint32_t n_clients;
	char tag_listen;             /* epoll tags (their addresses) */
	char tag_timer;
};


static void timer_set(struct innet_metrics_http *h, bool on)
{
	if (on == h->timer_on)
		return;
	long ns = on ? (long)HTTP_TICK_MS * 1000000L : 0;
	struct itimerspec its = { .it_interval = { .tv_nsec = ns }, .it_value = { .tv_nsec = ns } };
	if (timerfd_settime(h->timer_fd, 0, &its, NULL) == 0)
		h->timer_on = on;
}

static void client_close(struct innet_metrics_http *h, struct http_client *c)
{
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		h->clients = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	else
		h->oldest = c->prev;
	epoll_ctl(h->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c->out);
	free(c);
	h->n_clients--;
	if (h->n_clients == 0 && !h->accept_paused)
		timer_set(h, false);
}

static void client_interest(struct innet_metrics_http *h, struct http_client *c, uint32_t ev)
{
	if (ev == c->events)
		return;
	struct epoll_event e = { .events = ev, .data.ptr = c };
	epoll_ctl(h->epfd, EPOLL_CTL_MOD, c->fd, &e);
	c->events = ev;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                  */

static const char *reason_phrase(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 505: return "HTTP Version Not Supported";
	}
	return "Error";
}

/* Queue the response: status, content type, body (len bytes; not sent for
 * HEAD, but its length is). The client moves to WRITING. */
static void respond(struct innet_metrics_http *h, struct http_client *c, int status,
		    const char *type, const char *body, size_t len, bool head)
{
	char hdr[512];
	int hl = snprintf(hdr, sizeof(hdr),
			  "HTTP/1.1 %d %s\r\n"
			  "Server: innet\r\n"
			  "Content-Type: %s\r\n"
			  "Content-Length: %zu\r\n"
			  "%s"
			  "Cache-Control: no-store\r\n"
			  "Connection: close\r\n"
			  "\r\n",
			  status, reason_phrase(status), type, len,
			  status == 405 ? "Allow: GET, HEAD\r\n" : "");
	size_t blen = head ? 0 : len;
	c->out = malloc((size_t)hl + blen);
	if (c->out == NULL) {
		client_close(h, c);
		return;
	}
	memcpy(c->out, hdr, (size_t)hl);
	if (blen > 0)
		memcpy(c->out + hl, body, blen);
	c->out_len = (size_t)hl + blen;
	c->out_off = 0;
	c->state = HTTP_WRITING;
	c->deadline_ns = innet_now_ns() + HTTP_WRITE_MS * 1000000ull;
	client_interest(h, c, EPOLLOUT);
}

static void respond_text(struct innet_metrics_http *h, struct http_client *c, int status,
			 const char *msg, bool head)
{
	respond(h, c, status, "text/plain; charset=utf-8", msg, strlen(msg), head);
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                   */

/* End of the headers in c->req: the offset just past the blank line, or 0.
 * Each byte is looked at a bounded number of times however the request is
 * cut into segments (a client sending one byte at a time costs no more). */
static size_t headers_end(struct http_client *c)
{
	size_t from = c->scanned;
	c->scanned = c->req_len > 2 ? c->req_len - 2 : 0; /* "\n\r" may wait for its "\n" */
	for (size_t i = from; i + 1 < c->req_len; i++) {
		if (c->req[i] != '\n')
			continue;
		if (c->req[i + 1] == '\n')
			return i + 2;
		if (c->req[i + 1] == '\r' && i + 2 < c->req_len && c->req[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* A character of an HTTP token (RFC 9110 tchar): what a method is made of. */
static bool is_tchar(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Answer the complete request in c->req[0..end). */
static void handle_request(struct innet_metrics_http *h, struct http_client *c, size_t end)
{
	char *r = c->req;
	/* No NUL or control bytes other than CR, LF and TAB anywhere. */
	for (size_t i = 0; i < end; i++) {
		unsigned char ch = (unsigned char)r[i];
		if ((ch < 0x20 && ch != '\r' && ch != '\n' && ch != '\t') || ch == 0x7f) {
			respond_text(h, c, 400, "bad request: control bytes in the request\n", false);
			return;
		}
	}
	/* The request line: METHOD SP TARGET SP HTTP/x.y */
	char *eol = memchr(r, '\n', end);
	size_t ll = (size_t)(eol - r);
	if (ll > 0 && r[ll - 1] == '\r')
		ll--;
	char *sp1 = memchr(r, ' ', ll);
	char *sp2 = sp1 ? memchr(sp1 + 1, ' ', ll - (size_t)(sp1 + 1 - r)) : NULL;
	if (sp1 == NULL || sp2 == NULL || sp1 == r || sp2 == sp1 + 1 ||
	    memchr(sp2 + 1, ' ', ll - (size_t)(sp2 + 1 - r)) != NULL) {
		respond_text(h, c, 400, "bad request: expected 'METHOD /path HTTP/1.1'\n", false);
		return;
	}
	size_t ml = (size_t)(sp1 - r), tl = (size_t)(sp2 - sp1 - 1);
	const char *target = sp1 + 1, *ver = sp2 + 1;
	size_t vl = ll - (size_t)(ver - r);
	for (size_t i = 0; i < ml; i++)
		if (!is_tchar(r[i])) {
			respond_text(h, c, 400, "bad request: the method is not a word\n", false);
			return;
		}
	if (vl != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' || ver[5] > '9' ||
	    ver[6] != '.' || ver[7] < '0' || ver[7] > '9') {
		respond_text(h, c, 400, "bad request: expected HTTP/1.0 or HTTP/1.1\n", false);
		return;
	}
	if (target[0] != '/') {
		respond_text(h, c, 400, "bad request: the target must be a path\n", false);
		return;
	}
	for (size_t i = 0; i < tl; i++)
		if (target[i] == '\t') {
			respond_text(h, c, 400, "bad request: a tab in the target\n", false);
			return;
		}
	/* Header lines: NAME: VALUE (an obsolete folded line starts with
	 * white space: refused too). */
	for (char *p = eol + 1; p < r + end;) {
		char *e = memchr(p, '\n', (size_t)(r + end - p));
		size_t l = (size_t)(e - p);
		if (l > 0 && p[l - 1] == '\r')
			l--;
		if (l == 0)
			break; /* the blank line */
		char *colon = memchr(p, ':', l);
		if (colon == NULL || colon == p || p[0] == ' ' || p[0] == '\t' ||
		    memchr(p, ' ', (size_t)(colon - p)) != NULL) {
			respond_text(h, c, 400, "bad request: a malformed header line\n", false);
			return;
		}
		p = e + 1;
	}
	if (ver[5] != '1' || (ver[7] != '0' && ver[7] != '1')) {
		respond_text(h, c, 505, "HTTP version not supported: use HTTP/1.0 or HTTP/1.1\n",
			     false);
		return;
	}
	bool get = ml == 3 && !memcmp(r, "GET", 3);
	bool head = ml == 4 && !memcmp(r, "HEAD", 4);
	size_t pl = tl;
	const char *q = memchr(target, '?', tl);
	if (q != NULL)
		pl = (size_t)(q - target);
	bool metrics = pl == 8 && !memcmp(target, "/metrics", 8);
	if (!metrics) {
		respond_text(h, c, 404, "not found: the metrics are at /metrics\n", head);
		return;
	}
	if (!get && !head) {
		respond_text(h, c, 405, "method not allowed: GET or HEAD\n", false);
		return;
	}
	struct innet_prom w;
	innet_prom_init(&w);
	h->render(h->arg, &w);
	if (w.err != 0)
		respond_text(h, c, 500, "out of memory rendering the metrics\n", head);
	else
		respond(h, c, 200, "text/plain; version=0.0.4; charset=utf-8", w.buf ? w.buf : "",
			w.len, head);
	innet_prom_fini(&w);
}

/* ------------------------------------------------------------------------ */
/* Clients                                                                    */

static void client_read(struct innet_metrics_http *h, struct http_client *c)
{
	for (;;) {
		if (c->req_len == HTTP_REQ_MAX) {
			respond_text(h, c, 431, "request too large: at most 8192 bytes of request "
						"line and headers\n", false);
			return;
		}
		ssize_t n = recv(c->fd, c->req + c->req_len, HTTP_REQ_MAX - c->req_len, MSG_DONTWAIT);
		if (n > 0) {
			c->req_len += (size_t)n;
			size_t end = headers_end(c);
			if (end > 0) {
				handle_request(h, c, end);
				return;
			}
			continue;
		}
		if (n == 0) {
			/* the peer stopped sending before the request was complete */
			if (c->req_len == 0)
				client_close(h, c);
			else
				respond_text(h, c, 400, "bad request: incomplete\n", false);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			client_close(h, c);
		return;
	}
}

static void client_write(struct innet_metrics_http *h, struct http_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		client_close(h, c);
		return;
	}
	free(c->out);
	c->out = NULL;
	shutdown(c->fd, SHUT_WR);
	c->state = HTTP_DRAINING;
	c->deadline_ns = innet_now_ns() + HTTP_DRAIN_MS * 1000000ull;
	client_interest(h, c, EPOLLIN);
}

static void client_drain(struct innet_metrics_http *h, struct http_client *c)
{
	char buf[4096];
	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		client_close(h, c); /* closed by the peer, or broken */
		return;
	}
}

static void client_event(struct innet_metrics_http *h, struct http_client *c, uint32_t ev)
{
	switch (c->state) {
	case HTTP_READING:
		client_read(h, c);
		break;
	case HTTP_WRITING:
		client_write(h, c);
		break;
	case HTTP_DRAINING:
		client_drain(h, c);
		break;
	}
}

/* Over the limit: make room by closing the oldest client still reading
 * (the likeliest to be stuck); false if every client is past reading. */
static bool evict_one(struct innet_metrics_http *h)
{
	for (struct http_client *c = h->oldest; c != NULL; c = c->prev)
		if (c->state != HTTP_WRITING) {
			client_close(h, c);
			return true;
		}
	return false;
}

static void accept_clients(struct innet_metrics_http *h)
{
	for (;;) {
		int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The connection stays pending and the socket readable:
				 * stop polling it until the next tick rather than spin. */
				epoll_ctl(h->epfd, EPOLL_CTL_DEL, h->listen_fd, NULL);
				h->accept_paused = true;
				timer_set(h, true);
			}
			return; /* EAGAIN, or a transient error (ECONNABORTED) */
		}
		if (h->n_clients >= HTTP_MAX_CLIENTS && !evict_one(h)) {
			close(fd);
			continue;
		}
		struct http_client *c = malloc(sizeof(*c));
		if (c == NULL) {
			close(fd);
			continue;
		}
		memset(c, 0, offsetof(struct http_client, req));
		c->fd = fd;
		c->state = HTTP_READING;
		c->deadline_ns = innet_now_ns() + HTTP_READ_MS * 1000000ull;
		c->events = EPOLLIN;
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
			free(c);
			close(fd);
			continue;
		}
		c->next = h->clients;
		if (h->clients != NULL)
			h->clients->prev = c;
		else
			h->oldest = c;
		h->clients = c;
		h->n_clients++;
		timer_set(h, true);
	}
}

static void tick(struct innet_metrics_http *h)
{
	uint64_t v;
	if (read(h->timer_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing expired since the last read */
	}
	if (h->accept_paused) {
		struct epoll_event e = { .events = EPOLLIN, .data.ptr = &h->tag_listen };
		if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->listen_fd, &e) == 0)
			h->accept_paused = false;
	}
	uint64_t t = innet_now_ns();
	struct http_client *c = h->clients;
	while (c != NULL) {
		struct http_client *next = c->next;
		if (t >= c->deadline_ns)
			client_close(h, c);
		c = next;
	}
	if (h->n_clients == 0 && !h->accept_paused)
		timer_set(h, false);
}

void innet_metrics_http_run(struct innet_metrics_http *h)
{
	struct epoll_event ev[HTTP_EVENTS];
	int n = epoll_wait(h->epfd, ev, HTTP_EVENTS, 0);
	bool ticked = false;
	for (int i = 0; i < n; i++) {
		void *p = ev[i].data.ptr;
		if (p == &h->tag_listen) {
			accept_clients(h);
		} else if (p == &h->tag_timer) {
			ticked = true;
		} else {
			/* A client closed earlier in this batch (evicted by an
			 * accept) may still be listed: look it up first. */
			struct http_client *c = h->clients;
			while (c != NULL && c != p)
				c = c->next;
			if (c != NULL)
				client_event(h, c, ev[i].events);
		}
	}
	if (ticked)
		tick(h);
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                  */

struct innet_metrics_http *innet_metrics_http_create(uint32_t ip, uint16_t port,
						     innet_metrics_render_fn render, void *arg,
						     char *err, size_t errlen)
{
	struct innet_metrics_http *h = calloc(1, sizeof(*h));
	int e;
	if (h == NULL) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	h->render = render;
	h->arg = arg;
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	h->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->epfd < 0 || h->timer_fd < 0 || h->listen_fd < 0) {
		e = errno;
		snprintf(err, errlen, "metrics server: %s", strerror(e));
		goto err_close;
	}
	int one = 1;
	setsockopt(h->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip),
				 .sin_port = htons(port) };
	char astr[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a.sin_addr, astr, sizeof(astr));
	if (bind(h->listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(h->listen_fd, 128) < 0) {
		e = errno;
		snprintf(err, errlen, "metrics: cannot listen on %s:%u: %s", astr, port, strerror(e));
		goto err_close;
	}
	socklen_t al = sizeof(a);
	if (getsockname(h->listen_fd, (struct sockaddr *)&a, &al) < 0) {
		e = errno;
		snprintf(err, errlen, "metrics: getsockname: %s", strerror(e));
		goto err_close;
	}
	h->port = ntohs(a.sin_port);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &h->tag_listen };
	if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->listen_fd, &ev) < 0)
		goto err_epoll;
	ev.data.ptr = &h->tag_timer;
	if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->timer_fd, &ev) < 0)
		goto err_epoll;
	return h;

err_epoll:
	e = errno;
	snprintf(err, errlen, "metrics server: epoll: %s", strerror(e));
err_close:
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	if (h->timer_fd >= 0)
		close(h->timer_fd);
	if (h->epfd >= 0)
		close(h->epfd);
	free(h);
	errno = e;
	return NULL;
}

void innet_metrics_http_destroy(struct innet_metrics_http *h)
{
	if (h == NULL)
		return;
	while (h->clients != NULL)
		client_close(h, h->clients);
	close(h->listen_fd);
	close(h->timer_fd);
	close(h->epfd);
	free(h);
}

int innet_metrics_http_fd(const struct innet_metrics_http *h)
{
	return h->epfd;
}

uint16_t innet_metrics_http_port(const struct innet_metrics_http *h)
{
	return h->port;
}
