/*
 * innet/metrics.h — counters in the Prometheus text exposition format
 * (version 0.0.4), and a small HTTP server that serves them.
 *
 * Three parts:
 *
 *   1. A writer for the text format (struct innet_prom): families with their
 *      "# HELP" and "# TYPE" lines, samples with labels, label values and
 *      help texts escaped as the format requires.
 *   2. The switch's converter (innet_metrics_switch): the same counters the
 *      control socket's `stats` answers (ports, programs, verdicts, drops by
 *      named reason, XDP hand-offs) as metric families. docs/runtime.md,
 *      "Metrics", lists every family.
 *   3. An HTTP/1.x server for GET /metrics (struct innet_metrics_http) that
 *      runs inside its caller's event loop: it never blocks and never starts
 *      a thread; the caller polls one file descriptor and calls
 *      innet_metrics_http_run() when it is readable. The switch runs it on
 *      its control thread (never on a worker), `innet kv serve` in its own
 *      loop, so the render callback reads its counters on the thread that
 *      owns them.
 *
 *   scraper ──TCP──► listen ─► client: read the request (≤ 8 KiB, ≤ 5 s)
 *                                ─► render (callback) ─► write (≤ 10 s)
 *                                ─► shutdown, drain (≤ 1 s) ─► close
 *
 * One request per connection (the response says "Connection: close").
 * GET or HEAD /metrics (any query string) is 200 with
 * "text/plain; version=0.0.4"; another path is 404, another method 405, a
 * malformed request 400, one larger than 8 KiB 431, an HTTP version other
 * than 1.0 or 1.1 505. At most 64 connections: a new one pushes out the
 * oldest still sending its request.
 *
 * Errors follow the project's convention: actions return 0 or -errno,
 * constructors NULL with errno set and a message in the caller's buffer.
 */
#ifndef INNET_METRICS_H
#define INNET_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The text format writer                                                    */

enum innet_prom_type {
	INNET_PROM_COUNTER = 0,   /* name ends in _total */
	INNET_PROM_GAUGE = 1,
};

#define INNET_PROM_BASE_LABELS 2u

/* Text being built. Zero-initialise, or innet_prom_init(). */
struct innet_prom {
	char *buf;                /* the text, NUL-terminated (NULL while empty) */
	size_t len;               /* bytes in buf, without the NUL */
	size_t cap;               /* bytes allocated */
	int err;                  /* 0, or -ENOMEM once an append failed (text incomplete) */
	char family[128];         /* the family samples go to (innet_prom_family) */
	const char *base[2 * INNET_PROM_BASE_LABELS]; /* name, value pairs put first on
	                                               * every sample (NULL: unused) */
};

void innet_prom_init(struct innet_prom *w);
/* Free the text; w is empty again. */
void innet_prom_fini(struct innet_prom *w);

/* Labels put on every sample from now on, before the sample's own: up to
 * INNET_PROM_BASE_LABELS (name, value) pairs; n = 0 clears them. The strings
 * must outlive their use. */
void innet_prom_base_labels(struct innet_prom *w, unsigned n, const char *const *pairs);

/* Start family `name` (a valid metric name, at most 127 bytes): writes its
 * "# HELP" line (help escaped) and its "# TYPE" line. */
void innet_prom_family(struct innet_prom *w, const char *name, enum innet_prom_type type,
		       const char *help);

/* One sample of the current family: the base labels, then the (name,
 * value) pairs given, NULL-terminated; values escaped (backslash, double
 * quote, newline; a byte that is not UTF-8 becomes '?'). */
void innet_prom_u64(struct innet_prom *w, uint64_t v, ...) __attribute__((sentinel));
void innet_prom_f64(struct innet_prom *w, double v, ...) __attribute__((sentinel));

/* Append s (a label value) to w escaped as the format wants inside quotes. */
void innet_prom_escape_label(struct innet_prom *w, const char *s);

/* ------------------------------------------------------------------------ */
/* The switch's counters                                                     */

struct innet_switch;

/*
 * Append every metric family of switch sw to w: innet_switch_info, the
 * innet_port_* families (one series per port), the innet_program_* families
 * (one per program instance; verdicts by action, drops by named reason; on
 * the XDP target, hand-offs by kind). Every sample carries the label
 * switch="<name>". Safe on any thread while the switch runs (the counters
 * are read as for `innet ctl stats`). Returns w->err.
 */
int innet_metrics_switch(struct innet_switch *sw, struct innet_prom *w);

/* ------------------------------------------------------------------------ */
/* Addresses                                                                 */

#define INNET_METRICS_ADDR_MAX 24u  /* "255.255.255.255:65535" and its NUL */

/*
 * Parse "IPv4:PORT" (dotted quad, port 0..65535 in decimal; 0 = any free
 * port). 0, or -EINVAL with a message in err naming what is wrong.
 */
int innet_metrics_addr_parse(const char *s, uint32_t *ip, uint16_t *port, char *err,
			     size_t errlen);

/* ------------------------------------------------------------------------ */
/* The HTTP server                                                           */

/* Append the metrics text to w. Called on the thread that calls
 * innet_metrics_http_run(), once per GET or HEAD of /metrics. */
typedef void (*innet_metrics_render_fn)(void *arg, struct innet_prom *w);

struct innet_metrics_http;

/*
 * Listen on ip:port (host order; port 0: the kernel picks one) and serve
 * render's text. NULL with errno set and a message in err (address in use,
 * cannot assign the address, ...).
 */
struct innet_metrics_http *innet_metrics_http_create(uint32_t ip, uint16_t port,
						     innet_metrics_render_fn render, void *arg,
						     char *err, size_t errlen);
/* Stop serving: close every connection and the listening socket. NULL ok. */
void innet_metrics_http_destroy(struct innet_metrics_http *h);
/* The file descriptor to poll for reading (an epoll instance): when it is
 * readable, call innet_metrics_http_run(). */
int innet_metrics_http_fd(const struct innet_metrics_http *h);
/* Do whatever can be done without blocking: accept, read, answer, write,
 * time out. */
void innet_metrics_http_run(struct innet_metrics_http *h);
/* The port it listens on (the one the kernel chose for port 0). */
uint16_t innet_metrics_http_port(const struct innet_metrics_http *h);

#ifdef __cplusplus
}
#endif
#endif /* INNET_METRICS_H */
