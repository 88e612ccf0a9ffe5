/*
 * test_metrics.c — the Prometheus text format (src/control/metrics.c) and
 * the metrics HTTP server (src/control/metrics_http.c).
 *
 *   1. the writer: HELP/TYPE lines, base labels, label values escaped
 *      (backslash, quote, newline; bytes that are not UTF-8 become '?'),
 *      numbers (2^64-1, fractions, NaN, infinities);
 *   2. "IP:PORT" addresses, good and bad, table-driven;
 *   3. the switch's converter on a real switch (counter program, packets
 *      injected): every family declared once with HELP then TYPE, every
 *      sample under its family, no series twice, counters named _total and
 *      gauges not, values equal to innet_cp_stats/innet_switch_port_stats, a
 *      named drop reason, a switch name that needs escaping;
 *   4. the HTTP server driven by a loop on its own thread, as the switch's
 *      control thread drives it: 200 for GET/HEAD /metrics, 404, 405, 400
 *      for garbage, control bytes, a bad request line or header, a request
 *      cut short; 431 oversized, 505 HTTP/2; pipelined requests answered
 *      once; more connections than the limit; a client that never reads a
 *      large response does not stop others; a silent client is closed after
 *      the read timeout.
 *
 *   127.0.62.1 (port 0) ┐ switch "t\"e\st": counter "cnt" on UDP 46200
 *   127.0.62.2 (port 1) ┘
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/clock.h"
#include "innet/metrics.h"
#include "innet/version.h"
#include "innet/switch.h"

#define IP(a, b, c, d) (((uint32_t)(a) << 24) | ((b) << 16) | ((c) << 8) | (d))
#define UDP_CNT 46200

/* ---- 1. the writer ------------------------------------------------------ */

static void test_writer(void **state)
{
	struct innet_prom w;
	innet_prom_init(&w);
	const char *base[] = { "switch", "s0" };
	innet_prom_base_labels(&w, 1, base);
	innet_prom_family(&w, "x_total", INNET_PROM_COUNTER, "Help with \\ and\nnewline.");
	innet_prom_u64(&w, UINT64_MAX, "reason", "a\\b\"c\nd", (char *)NULL);
	innet_prom_u64(&w, 0, (char *)NULL);
	innet_prom_base_labels(&w, 0, NULL);
	innet_prom_family(&w, "y", INNET_PROM_GAUGE, "A gauge.");
	innet_prom_u64(&w, 7, (char *)NULL);
	innet_prom_f64(&w, 0.25, "k", "v", (char *)NULL);
	innet_prom_f64(&w, NAN, (char *)NULL);
	innet_prom_f64(&w, INFINITY, (char *)NULL);
	innet_prom_f64(&w, -INFINITY, (char *)NULL);
	assert_int_equal(w.err, 0);
	assert_string_equal(w.buf,
			    "# HELP x_total Help with \\\\ and\\nnewline.\n"
			    "# TYPE x_total counter\n"
			    "x_total{switch=\"s0\",reason=\"a\\\\b\\\"c\\nd\"} 18446744073709551615\n"
			    "x_total{switch=\"s0\"} 0\n"
			    "# HELP y A gauge.\n"
			    "# TYPE y gauge\n"
			    "y 7\n"
			    "y{k=\"v\"} 0.25\n"
			    "y NaN\n"
			    "y +Inf\n"
			    "y -Inf\n");
	assert_int_equal(w.len, strlen(w.buf));
	innet_prom_fini(&w);
	assert_null(w.buf);
	assert_int_equal(w.len, 0);
}

/* Label values: UTF-8 kept, anything else '?' byte by byte. */
static void test_escape_utf8(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "plain", "plain" },
		{ "", "" },
		{ "caf\xc3\xa9", "caf\xc3\xa9" },                  /* é */
		{ "\xe2\x82\xac", "\xe2\x82\xac" },                /* € */
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },        /* U+1F600 */
		{ "a\xffz", "a?z" },                               /* not UTF-8 at all */
		{ "\xc0\xaf", "??" },                              /* overlong '/' */
		{ "\xe0\x80\xaf", "???" },                         /* overlong, 3 bytes */
		{ "\xed\xa0\x80", "???" },                         /* a surrogate */
		{ "\xf4\x90\x80\x80", "????" },                    /* past U+10FFFF */
		{ "\xe2\x82", "??" },                              /* cut short */
		{ "\xe2\x82x", "??x" },
		{ "tab\there", "tab\there" },                      /* tabs need no escape */
		{ "q\"\\\n", "q\\\"\\\\\\n" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct innet_prom w;
		innet_prom_init(&w);
		innet_prom_escape_label(&w, cases[i].in);
		if (strcmp(w.buf ? w.buf : "", cases[i].out) != 0)
			fail_msg("case %zu: got '%s', want '%s'", i, w.buf ? w.buf : "", cases[i].out);
		innet_prom_fini(&w);
	}
}

/* ---- 2. addresses --------------------------------------------------------- */

static void test_addr_parse(void **state)
{
	static const struct {
		const char *in;
		uint32_t ip;
		uint16_t port;
		const char *err; /* NULL: valid */
	} cases[] = {
		{ "127.0.0.1:9464", IP(127, 0, 0, 1), 9464, NULL },
		{ "0.0.0.0:0", 0, 0, NULL },
		{ "10.1.2.3:65535", IP(10, 1, 2, 3), 65535, NULL },
		{ "127.0.0.1:09464", IP(127, 0, 0, 1), 9464, NULL },
		{ "127.0.0.1", 0, 0, "expected IPv4:PORT" },
		{ ":9464", 0, 0, "expected IPv4:PORT" },
		{ "", 0, 0, "expected IPv4:PORT" },
		{ "127.0.0.1:", 0, 0, "no port after the ':'" },
		{ "127.0.0.1:65536", 0, 0, "port 65536 is out of range 0..65535" },
		{ "127.0.0.1:1234567", 0, 0, "port 1234567 is out of range 0..65535" },
		{ "127.0.0.1:-1", 0, 0, "is not a number" },
		{ "127.0.0.1:94 64", 0, 0, "is not a number" },
		{ "127.0.0.1:0x10", IP(127, 0, 0, 1), 16, NULL }, /* innet_parse_u64: 0x hex, as everywhere */
		{ "localhost:9464", 0, 0, "'localhost' is not an IPv4 address" },
		{ "256.0.0.1:9464", 0, 0, "'256.0.0.1' is not an IPv4 address" },
		{ "[::1]:9464", 0, 0, "is not an IPv4 address" },
		{ "1.2.3.4.5.6.7.8.9.10.11.12.13.14.15.16:1", 0, 0, "is not an IPv4 address" },
		{ "127.0.0.1:9464:1", 0, 0, "is not an IPv4 address" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t ip = 0xdead;
		uint16_t port = 0xbe;
		char err[256] = "";
		int rc = innet_metrics_addr_parse(cases[i].in, &ip, &port, err, sizeof(err));
		if (cases[i].err == NULL) {
			if (rc != 0)
				fail_msg("'%s': %s", cases[i].in, err);
			assert_int_equal(ip, cases[i].ip);
			assert_int_equal(port, cases[i].port);
		} else {
			if (rc != -EINVAL)
				fail_msg("'%s': accepted", cases[i].in);
			if (strstr(err, cases[i].err) == NULL)
				fail_msg("'%s': got '%s', want '%s'", cases[i].in, err, cases[i].err);
		}
	}
}

/* ---- 3. the switch's converter ------------------------------------------- */

/* The text is well formed: every family's HELP then TYPE once, samples under
 * the family just declared, each series once, _total exactly on counters.
 * Returns the number of samples. */
static size_t check_structure(const char *text)
{
	char family[128] = "", type[16] = "";
	char *seen_fam = calloc(1, 1 << 16), *seen_ser = calloc(1, 1 << 20);
	size_t fam_len = 0, ser_len = 0, samples = 0;
	assert_non_null(seen_fam);
	assert_non_null(seen_ser);
	const char *p = text;
	while (*p != '\0') {
		const char *nl = strchr(p, '\n');
		assert_non_null(nl); /* every line ends with \n */
		char line[2048];
		size_t l = (size_t)(nl - p);
		assert_true(l < sizeof(line));
		memcpy(line, p, l);
		line[l] = '\0';
		p = nl + 1;
		if (!strncmp(line, "# HELP ", 7)) {
			char name[128];
			assert_int_equal(sscanf(line + 7, "%127s", name), 1);
			char key[132];
			snprintf(key, sizeof(key), "|%s|", name);
			if (strstr(seen_fam, key) != NULL)
				fail_msg("family %s declared twice", name);
			fam_len += (size_t)snprintf(seen_fam + fam_len, (1 << 16) - fam_len, "%s", key);
			snprintf(family, sizeof(family), "%s", name);
			type[0] = '\0';
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			char name[128];
			assert_int_equal(sscanf(line + 7, "%127s %15s", name, type), 2);
			assert_string_equal(name, family);
			size_t fl = strlen(family);
			bool total = fl > 6 && !strcmp(family + fl - 6, "_total");
			if (!strcmp(type, "counter"))
				assert_true(total);
			else if (!strcmp(type, "gauge"))
				assert_false(total);
			else
				fail_msg("family %s: type %s", family, type);
			continue;
		}
		assert_true(line[0] != '#');
		assert_true(type[0] != '\0'); /* a sample before its TYPE */
		size_t nl_name = strcspn(line, "{ ");
		if (strlen(family) != nl_name || strncmp(line, family, nl_name) != 0)
			fail_msg("sample '%s' outside its family %s", line, family);
		char *sp = strrchr(line, ' ');
		assert_non_null(sp);
		*sp = '\0';
		char key[2100];
		snprintf(key, sizeof(key), "|%s|", line);
		if (strstr(seen_ser, key) != NULL)
			fail_msg("series %s twice", line);
		ser_len += (size_t)snprintf(seen_ser + ser_len, (1 << 20) - ser_len, "%s", key);
		samples++;
	}
	free(seen_fam);
	free(seen_ser);
	return samples;
}

static void expect_line(const char *text, const char *line)
{
	char want[1024];
	snprintf(want, sizeof(want), "\n%s\n", line);
	if (strstr(text, want) == NULL)
		fail_msg("no line\n  %s\nin\n%s", line, text);
}

static void test_switch(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "t\"e\\st");
	c.n_workers = 1;
	c.node_id = 7;
	c.n_ports = 2;
	c.ports[0].ip = IP(127, 0, 62, 1);
	snprintf(c.ports[0].name, sizeof(c.ports[0].name), "h0");
	c.ports[1].ip = IP(127, 0, 62, 2);
	snprintf(c.ports[1].name, sizeof(c.ports[1].name), "spine2#2");
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "cnt");
	c.progs[0].program = innet_program_find("counter");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = UDP_CNT;
	c.progs[0].n_udp = 1;
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	struct innet_cp *cp = innet_switch_prog(sw, "cnt");

	/* Three INCs (reflected) and two too-short requests (dropped). */
	static struct innet_inject_result res;
	static const uint8_t inc[24] = { 0x1E, 1, 1, 0, 0, 1, 0, 100, 0x01, 0, 0, 0, 0, 0, 0, 5,
					 0, 0, 0, 0, 0, 0, 0, 1 };
	struct innet_addr src = { .ip = IP(127, 0, 62, 9), .udp = 7000 };
	for (int i = 0; i < 3; i++) {
		assert_int_equal(innet_switch_inject(sw, 0, UDP_CNT, &src, inc, sizeof(inc), &res), 0);
		assert_int_equal(res.action, INNET_REFLECT);
	}
	for (int i = 0; i < 2; i++) {
		assert_int_equal(innet_switch_inject(sw, 1, UDP_CNT, &src, inc, 5, &res), 0);
		assert_int_equal(res.action, INNET_DROP);
	}

	struct innet_prom w;
	innet_prom_init(&w);
	assert_int_equal(innet_metrics_switch(sw, &w), 0);
	const char *t = w.buf;
	size_t n = check_structure(t);
	assert_true(n > 40);

	struct innet_prog_stats ps;
	innet_cp_stats(cp, &ps);
	assert_int_equal(ps.rx_pkts, 5);
	char line[512];
	expect_line(t, "innet_switch_info{switch=\"t\\\"e\\\\st\",target=\"udp\",node=\"7\","
		       "version=\"" INNET_VERSION_STRING "\"} 1");
	expect_line(t, "innet_program_info{switch=\"t\\\"e\\\\st\",program=\"cnt\",type=\"counter\","
		       "model=\"pisa\"} 1");
	expect_line(t, "innet_program_received_packets_total{switch=\"t\\\"e\\\\st\",program=\"cnt\"} 5");
	snprintf(line, sizeof(line), "innet_program_received_bytes_total{switch=\"t\\\"e\\\\st\","
		 "program=\"cnt\"} %llu", (unsigned long long)ps.rx_bytes);
	expect_line(t, line);
	expect_line(t, "innet_program_verdicts_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
		       "action=\"reflect\"} 3");
	expect_line(t, "innet_program_verdicts_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
		       "action=\"drop\"} 2");
	expect_line(t, "innet_program_dropped_packets_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
		       "reason=\"too_short\"} 2");
	/* named reasons are there at zero; "none" is not */
	expect_line(t, "innet_program_dropped_packets_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
		       "reason=\"bad_magic\"} 0");
	expect_line(t, "innet_program_dropped_packets_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
		       "reason=\"no_program\"} 0");
	assert_null(strstr(t, "reason=\"none\""));
	assert_null(strstr(t, "reason=\"unknown\""));
	snprintf(line, sizeof(line), "innet_program_max_register_operations_per_pass{switch="
		 "\"t\\\"e\\\\st\",program=\"cnt\"} %u", ps.max_reg_ops);
	expect_line(t, line);
	for (uint32_t i = 0; i < 2; i++) {
		struct innet_port_stats st;
		assert_int_equal(innet_switch_port_stats(sw, i, &st), 0);
		snprintf(line, sizeof(line), "innet_port_sent_packets_total{switch=\"t\\\"e\\\\st\","
			 "port=\"%u\",port_name=\"%s\"} %llu", i, i ? "spine2#2" : "h0",
			 (unsigned long long)st.tx_pkts);
		expect_line(t, line);
	}
	/* the XDP families only on the XDP target */
	assert_null(strstr(t, "xdp_"));
	assert_null(strstr(t, "innet_program_handoffs_total"));
	innet_prom_fini(&w);

	/* after stats reset: zeros */
	innet_switch_stats_reset(sw);
	innet_prom_init(&w);
	assert_int_equal(innet_metrics_switch(sw, &w), 0);
	expect_line(w.buf, "innet_program_dropped_packets_total{switch=\"t\\\"e\\\\st\",program=\"cnt\","
			   "reason=\"too_short\"} 0");
	innet_prom_fini(&w);
	innet_switch_destroy(sw);
}

/* ---- 4. the HTTP server --------------------------------------------------- */

struct srv {
	struct innet_metrics_http *h;
	pthread_t thread;
	atomic_bool stop;
	atomic_int renders;
	atomic_size_t body_size;   /* 0: the small text */
};

static void render(void *arg, struct innet_prom *w)
{
	struct srv *s = arg;
	atomic_fetch_add(&s->renders, 1);
	innet_prom_family(w, "t_requests_total", INNET_PROM_COUNTER, "Test.");
	innet_prom_u64(w, 42, "a", "b", (char *)NULL);
	size_t big = atomic_load(&s->body_size);
	if (big > 0) {
		innet_prom_family(w, "t_big", INNET_PROM_GAUGE, "Big.");
		char v[16];
		for (size_t i = 0; w->len < big && w->err == 0; i++) {
			snprintf(v, sizeof(v), "%zu", i);
			innet_prom_u64(w, i, "i", v, (char *)NULL);
		}
	}
}

/* The caller's loop: what the control thread does with the fd. */
static void *srv_loop(void *arg)
{
	struct srv *s = arg;
	while (!atomic_load(&s->stop)) {
		struct pollfd p = { .fd = innet_metrics_http_fd(s->h), .events = POLLIN };
		if (poll(&p, 1, 20) > 0)
			innet_metrics_http_run(s->h);
	}
	return NULL;
}

static struct srv srv;

static int conn(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(IP(127, 0, 0, 1)),
				 .sin_port = htons(innet_metrics_http_port(srv.h)) };
	struct timeval tv = { .tv_sec = 8 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Read until the server closes: the bytes (NUL-terminated, malloc'ed). */
static char *read_all(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap + 1);
	assert_non_null(b);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
			assert_non_null(b);
		}
		ssize_t r = recv(fd, b + n, cap - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail_msg("recv: %s (the server did not close)", strerror(errno));
		if (r == 0)
			break;
		n += (size_t)r;
	}
	b[n] = '\0';
	if (len != NULL)
		*len = n;
	return b;
}

/* Send req (len bytes; shut: then shut down writing) on a new connection and
 * return the whole response. */
static char *ask(const char *req, size_t len, bool shut)
{
	int fd = conn();
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (w <= 0)
			break; /* the server may answer (431) and close before all is sent */
		off += (size_t)w;
	}
	if (shut)
		shutdown(fd, SHUT_WR);
	char *r = read_all(fd, NULL);
	close(fd);
	return r;
}

static void expect_status(const char *req, size_t len, bool shut, const char *status)
{
	char *r = ask(req, len, shut);
	if (strncmp(r, status, strlen(status)) != 0)
		fail_msg("request '%.60s': got '%.80s', want '%s'", req, r, status);
	assert_non_null(strstr(r, "\r\nConnection: close\r\n"));
	free(r);
}

static int srv_setup(void **state)
{
	char err[256];
	memset(&srv, 0, sizeof(srv));
	srv.h = innet_metrics_http_create(IP(127, 0, 0, 1), 0, render, &srv, err, sizeof(err));
	if (srv.h == NULL) {
		fprintf(stderr, "create: %s\n", err);
		return -1;
	}
	if (innet_metrics_http_port(srv.h) == 0)
		return -1;
	return pthread_create(&srv.thread, NULL, srv_loop, &srv) == 0 ? 0 : -1;
}

static int srv_teardown(void **state)
{
	atomic_store(&srv.stop, true);
	pthread_join(srv.thread, NULL);
	innet_metrics_http_destroy(srv.h);
	return 0;
}

static const char small_body[] = "# HELP t_requests_total Test.\n"
				 "# TYPE t_requests_total counter\n"
				 "t_requests_total{a=\"b\"} 42\n";

static void test_http_ok(void **state)
{
	static const char get[] = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n";
	char *r = ask(get, sizeof(get) - 1, false);
	char *body = strstr(r, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	assert_int_equal(strncmp(r, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(r, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	char cl[64];
	snprintf(cl, sizeof(cl), "\r\nContent-Length: %zu\r\n", strlen(small_body));
	assert_non_null(strstr(r, cl));
	assert_string_equal(body, small_body);
	free(r);

	/* HTTP/1.0, bare LF line ends, a query string */
	static const char get10[] = "GET /metrics?x=1&y HTTP/1.0\n\n";
	r = ask(get10, sizeof(get10) - 1, false);
	assert_int_equal(strncmp(r, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(r, small_body));
	free(r);

	/* HEAD: the length, no body */
	static const char head[] = "HEAD /metrics HTTP/1.1\r\n\r\n";
	r = ask(head, sizeof(head) - 1, false);
	assert_int_equal(strncmp(r, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_non_null(strstr(r, cl));
	body = strstr(r, "\r\n\r\n");
	assert_non_null(body);
	assert_string_equal(body + 4, "");
	free(r);

	/* Pipelined: the first is answered, once, then the connection ends. */
	static const char two[] = "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n";
	r = ask(two, sizeof(two) - 1, false);
	assert_non_null(strstr(r, small_body));
	assert_null(strstr(strstr(r, small_body) + 1, "HTTP/1.1"));
	free(r);
}

static void test_http_errors(void **state)
{
	int before = atomic_load(&srv.renders);
#define S(x) x, sizeof(x) - 1
	expect_status(S("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), false,
		      "HTTP/1.1 405 Method Not Allowed\r\n");
	char *r = ask(S("DELETE /metrics HTTP/1.1\r\n\r\n"), false);
	assert_non_null(strstr(r, "\r\nAllow: GET, HEAD\r\n"));
	free(r);
	expect_status(S("get /metrics HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 405");
	expect_status(S("GET / HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 404 Not Found\r\n");
	expect_status(S("GET /metricsx HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 404");
	expect_status(S("GET /metrics/ HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 404");
	expect_status(S("POST /other HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 404");
	expect_status(S("GET /metrics HTTP/2.0\r\n\r\n"), false,
		      "HTTP/1.1 505 HTTP Version Not Supported\r\n");
	expect_status(S("GET /metrics HTTP/0.9\r\n\r\n"), false, "HTTP/1.1 505");
	expect_status(S("garbage\r\n\r\n"), false, "HTTP/1.1 400 Bad Request\r\n");
	expect_status(S("\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET  /metrics HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.1 extra\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET metrics HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.x\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics FTP/1.1\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("G(T /metrics HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.1\r\nNoColonHere\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.1\r\n folded: x\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /met\0rics HTTP/1.1\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("GET /metrics HTTP/1.1\r\nX: \x01\r\n\r\n"), false, "HTTP/1.1 400");
	expect_status(S("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"), false,
		      "HTTP/1.1 400"); /* a TLS ClientHello, more or less */
	/* cut short: the peer shuts down writing mid-request */
	expect_status(S("GET /metrics HTTP/1.1\r\nHost: x\r\n"), true, "HTTP/1.1 400");
	expect_status(S("GE"), true, "HTTP/1.1 400");
	/* nothing at all, then shut down: closed without a word */
	r = ask("", 0, true);
	assert_string_equal(r, "");
	free(r);
	/* oversized: 431, whether or not the rest keeps coming */
	static char huge[20000];
	size_t big = sizeof(huge);
	memcpy(huge, "GET /metrics HTTP/1.1\r\nX-Pad: ", 30);
	memset(huge + 30, 'a', big - 30);
	expect_status(huge, big, false, "HTTP/1.1 431 Request Header Fields Too Large\r\n");
	memset(huge, 'A', big);
	expect_status(huge, 8192, false, "HTTP/1.1 431");
#undef S
	/* none of these rendered the metrics */
	assert_int_equal(atomic_load(&srv.renders), before);
	/* and it still serves */
	r = ask("GET /metrics HTTP/1.1\r\n\r\n", 25, false);
	assert_non_null(strstr(r, small_body));
	free(r);
}

/* More clients than it takes, a client that never reads a large response,
 * a silent one that is timed out. */
static void test_http_clients(void **state)
{
	/* 80 idle connections (over the limit of 64): the newest push the
	 * oldest out, and a scraper still gets in. */
	int idle[80];
	for (int i = 0; i < 80; i++)
		idle[i] = conn();
	char *r = ask("GET /metrics HTTP/1.1\r\n\r\n", 25, false);
	assert_non_null(strstr(r, small_body));
	free(r);
	int closed = 0;
	for (int i = 0; i < 80; i++) {
		char b;
		struct pollfd p = { .fd = idle[i], .events = POLLIN };
		if (poll(&p, 1, 0) == 1 && recv(idle[i], &b, 1, MSG_DONTWAIT) == 0)
			closed++;
		close(idle[i]);
	}
	assert_true(closed >= 16);

	/* A 4 MB response its client never reads: the server goes on. */
	atomic_store(&srv.body_size, (size_t)4 << 20);
	int lazy = conn();
	assert_int_equal(send(lazy, "GET /metrics HTTP/1.1\r\n\r\n", 25, 0), 25);
	usleep(200000);
	double t0 = ((double)innet_now_ns() / 1e9);
	r = ask("GET / HTTP/1.1\r\n\r\n", 18, false);
	assert_int_equal(strncmp(r, "HTTP/1.1 404", 12), 0);
	free(r);
	assert_true(((double)innet_now_ns() / 1e9) - t0 < 2.0);
	/* several scrapers at once, each gets all of it */
	int many[4];
	for (int i = 0; i < 4; i++) {
		many[i] = conn();
		assert_int_equal(send(many[i], "GET /metrics HTTP/1.1\r\n\r\n", 25, 0), 25);
	}
	for (int i = 0; i < 4; i++) {
		size_t n;
		char *b = read_all(many[i], &n);
		assert_int_equal(strncmp(b, "HTTP/1.1 200 OK\r\n", 17), 0);
		assert_true(n > ((size_t)4 << 20));
		free(b);
		close(many[i]);
	}
	close(lazy);
	atomic_store(&srv.body_size, 0);

	/* A silent client and a trickling one: closed after the read timeout
	 * (5 s from accept), not later. */
	int silent = conn(), trickle = conn();
	t0 = ((double)innet_now_ns() / 1e9);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(send(trickle, "G", 1, 0), 1);
		sleep(1);
	}
	size_t n;
	r = read_all(silent, &n);
	double waited = ((double)innet_now_ns() / 1e9) - t0;
	assert_int_equal(n, 0);
	free(r);
	r = read_all(trickle, &n);
	assert_int_equal(n, 0);
	free(r);
	close(silent);
	close(trickle);
	if (waited < 4.5 || waited > 7.0)
		fail_msg("the silent client was closed after %.1f s, want about 5", waited);
}

static void test_http_bind_error(void **state)
{
	char err[256];
	struct innet_metrics_http *h = innet_metrics_http_create(
		IP(127, 0, 0, 1), innet_metrics_http_port(srv.h), render, &srv, err, sizeof(err));
	assert_null(h);
	assert_int_equal(errno, EADDRINUSE);
	assert_non_null(strstr(err, "cannot listen on 127.0.0.1:"));
	h = innet_metrics_http_create(IP(192, 0, 2, 1), 0, render, &srv, err, sizeof(err));
	assert_null(h); /* TEST-NET-1: not an address of this machine */
	assert_non_null(strstr(err, "192.0.2.1"));
	innet_metrics_http_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_writer),
		cmocka_unit_test(test_escape_utf8),
		cmocka_unit_test(test_addr_parse),
		cmocka_unit_test(test_switch),
		cmocka_unit_test(test_http_ok),
		cmocka_unit_test(test_http_errors),
		cmocka_unit_test(test_http_clients),
		cmocka_unit_test(test_http_bind_error),
	};
	return cmocka_run_group_tests(tests, srv_setup, srv_teardown);
}
