/*
 * metrics.c — the Prometheus text exposition format (version 0.0.4): a
 * writer for families and samples, the switch's counters as metric families,
 * and "IP:PORT" metrics addresses. The HTTP server that serves the text is
 * metrics_http.c; the families are listed in docs/runtime.md, "Metrics".
 *
 * The text, for one family:
 *
 *   # HELP innet_port_received_packets_total Packets received on the port.
 *   # TYPE innet_port_received_packets_total counter
 *   innet_port_received_packets_total{switch="s0",port="0",port_name="h0"} 11
 *
 * Label values may hold any UTF-8; backslash, double quote and newline are
 * escaped (\\, \", \n). Help texts escape backslash and newline. Names are
 * ours, fixed in this file and in the services' converters, so they are not
 * checked at run time (tests/unit/test_metrics.c and `promtool check
 * metrics` in tests/integration/metrics.sh check them).
 *
 * Not on the packet path: the switch's converter runs on the thread that
 * asks (its control thread) and reads the counters as `innet ctl stats`
 * does, summing the workers' copies.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/metrics.h"
#include "innet/parse.h"
#include "innet/switch.h"
#include "innet/version.h"

/* ------------------------------------------------------------------------ */
/* The writer                                                                 */

void innet_prom_init(struct innet_prom *w)
{
	memset(w, 0, sizeof(*w));
}

void innet_prom_fini(struct innet_prom *w)
{
	free(w->buf);
	innet_prom_init(w);
}

/* Make room for n more bytes and the NUL. 0 or -ENOMEM (recorded). */
static int reserve(struct innet_prom *w, size_t n)
{
	if (w->err != 0)
		return w->err;
	if (w->len + n + 1 <= w->cap)
		return 0;
	size_t cap = w->cap ? w->cap : 4096;
	while (cap < w->len + n + 1)
		cap *= 2;
	char *p = realloc(w->buf, cap);
	if (p == NULL) {
		w->err = -ENOMEM;
		return w->err;
	}
	w->buf = p;
	w->cap = cap;
	return 0;
}

static void put(struct innet_prom *w, const char *s, size_t n)
{
	if (reserve(w, n) != 0)
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void puts_(struct innet_prom *w, const char *s)
{
	put(w, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one
 * (overlong forms, surrogates and code points past U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t n;
	uint32_t cp;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also stops at the NUL */
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Escape s: backslash and newline always, the double quote when quote is
 * set (label values; help texts keep it), anything not UTF-8 as '?'. */
static void escape(struct innet_prom *w, const char *s, bool quote)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p != '\0') {
		size_t n = utf8_len(p);
		if (n == 0) {
			put(w, "?", 1);
			p++;
		} else if (*p == '\\') {
			put(w, "\\\\", 2);
			p++;
		} else if (*p == '"' && quote) {
			put(w, "\\\"", 2);
			p++;
		} else if (*p == '\n') {
			put(w, "\\n", 2);
			p++;
		} else {
			put(w, (const char *)p, n);
			p += n;
		}
	}
}

void innet_prom_escape_label(struct innet_prom *w, const char *s)
{
	escape(w, s, true);
}

/* A help text: backslash and newline escaped, anything not UTF-8 '?'. */
static void escape_help(struct innet_prom *w, const char *s)
{
	escape(w, s, false);
}

void innet_prom_base_labels(struct innet_prom *w, unsigned n, const char *const *pairs)
{
	memset(w->base, 0, sizeof(w->base));
	if (n > INNET_PROM_BASE_LABELS)
		n = INNET_PROM_BASE_LABELS;
	for (unsigned i = 0; i < 2 * n; i++)
		w->base[i] = pairs[i];
}

void innet_prom_family(struct innet_prom *w, const char *name, enum innet_prom_type type,
		       const char *help)
{
	snprintf(w->family, sizeof(w->family), "%s", name);
	puts_(w, "# HELP ");
	puts_(w, w->family);
	puts_(w, " ");
	escape_help(w, help);
	puts_(w, "\n# TYPE ");
	puts_(w, w->family);
	puts_(w, type == INNET_PROM_COUNTER ? " counter\n" : " gauge\n");
}

static void label(struct innet_prom *w, bool *first, const char *name, const char *value)
{
	puts_(w, *first ? "{" : ",");
	*first = false;
	puts_(w, name);
	puts_(w, "=\"");
	innet_prom_escape_label(w, value);
	puts_(w, "\"");
}

/* The family name and the label set of one sample. */
static void sample_head(struct innet_prom *w, va_list ap)
{
	bool first = true;
	puts_(w, w->family);
	for (unsigned i = 0; i < INNET_PROM_BASE_LABELS && w->base[2 * i] != NULL; i++)
		label(w, &first, w->base[2 * i], w->base[2 * i + 1] ? w->base[2 * i + 1] : "");
	for (;;) {
		const char *name = va_arg(ap, const char *);
		if (name == NULL)
			break;
		const char *value = va_arg(ap, const char *);
		label(w, &first, name, value ? value : "");
	}
	if (!first)
		puts_(w, "}");
}

void innet_prom_u64(struct innet_prom *w, uint64_t v, ...)
{
	va_list ap;
	va_start(ap, v);
	sample_head(w, ap);
	va_end(ap);
	char num[32];
	snprintf(num, sizeof(num), " %llu\n", (unsigned long long)v);
	puts_(w, num);
}

void innet_prom_f64(struct innet_prom *w, double v, ...)
{
	va_list ap;
	va_start(ap, v);
	sample_head(w, ap);
	va_end(ap);
	char num[48];
	if (isnan(v))
		snprintf(num, sizeof(num), " NaN\n");
	else if (isinf(v))
		snprintf(num, sizeof(num), " %cInf\n", v > 0 ? '+' : '-');
	else
		snprintf(num, sizeof(num), " %.17g\n", v);
	puts_(w, num);
}

/* ------------------------------------------------------------------------ */
/* The switch                                                                 */

/* A counter family with one sample per port (or per program), the value
 * taken from each element's stats at a byte offset. */
struct field {
	const char *name;       /* family */
	enum innet_prom_type type;
	const char *help;
	size_t off;             /* offsetof the uint64_t (or uint32_t when narrow) */
	bool narrow;            /* a uint32_t field */
	bool xdp;               /* only on the XDP target */
};

#define PORT_F(n, f, h) { n, INNET_PROM_COUNTER, h, offsetof(struct innet_port_stats, f), false, false }
#define PORT_X(n, f, h) { n, INNET_PROM_COUNTER, h, offsetof(struct innet_port_stats, f), false, true }

static const struct field port_fields[] = {
	PORT_F("innet_port_received_packets_total", rx_pkts, "Packets received on the port."),
	PORT_F("innet_port_received_bytes_total", rx_bytes,
	       "Bytes received on the port (UDP payload, or whole frames on a raw port)."),
	PORT_F("innet_port_sent_packets_total", tx_pkts, "Packets sent out of the port."),
	PORT_F("innet_port_sent_bytes_total", tx_bytes, "Bytes sent out of the port."),
	PORT_F("innet_port_send_errors_total", tx_errors,
	       "Packets the kernel refused to send on the port."),
	PORT_F("innet_port_sent_gso_packets_total", tx_gso,
	       "Of the packets sent, those coalesced into UDP GSO messages."),
	PORT_F("innet_port_socket_dropped_packets_total", rx_sock_drops,
	       "Packets the kernel dropped at the port's sockets (mostly a full receive buffer)."),
	PORT_F("innet_port_link_lost_packets_total", link_lost,
	       "Packets dropped by the port's link emulation."),
	PORT_F("innet_port_link_duplicated_packets_total", link_duplicated,
	       "Packets duplicated by the port's link emulation."),
	PORT_F("innet_port_link_reordered_packets_total", link_reordered,
	       "Packets held back behind later ones by the port's link emulation."),
	PORT_F("innet_port_link_delayed_packets_total", link_delayed,
	       "Packets delayed by the port's link emulation."),
	PORT_F("innet_port_link_queue_full_packets_total", link_queue_full,
	       "Packets dropped because the link emulation's delay queue was full."),
	PORT_X("innet_port_xdp_received_packets_total", xdp_rx_pkts,
	       "XDP target: of the packets received, those the eBPF program handled."),
	PORT_X("innet_port_xdp_sent_packets_total", xdp_tx_pkts,
	       "XDP target: of the packets sent, those the eBPF program sent."),
};

#define PROG_F(n, f, h) { n, INNET_PROM_COUNTER, h, offsetof(struct innet_prog_stats, f), false, false }
#define PROG_G(n, f, h) { n, INNET_PROM_GAUGE, h, offsetof(struct innet_prog_stats, f), true, false }
#define PROG_X(n, f, h) { n, INNET_PROM_COUNTER, h, offsetof(struct innet_prog_stats, f), false, true }

static const struct field prog_fields[] = {
	PROG_F("innet_program_received_packets_total", rx_pkts,
	       "Packets into the program's handler (first pass)."),
	PROG_F("innet_program_received_bytes_total", rx_bytes,
	       "Bytes of the packets into the program's handler."),
	PROG_F("innet_program_sent_packets_total", tx_pkts,
	       "Packets the program's verdicts sent (each multicast copy counts)."),
	PROG_F("innet_program_passes_total", passes,
	       "Handler invocations, recirculations included."),
	PROG_F("innet_program_recirculations_total", recirculations, "Recirculations."),
	PROG_F("innet_program_emitted_packets_total", emitted, "Packets emitted (Trio)."),
	PROG_F("innet_program_timer_fires_total", timer_fires, "Timer callbacks run (Trio)."),
	PROG_F("innet_program_cpu_packets_total", cpu_pkts,
	       "Packets handed to the control plane and handled by on_cpu."),
	PROG_F("innet_program_register_operations_total", reg_ops,
	       "Register operations, over all passes."),
	PROG_F("innet_program_table_operations_total", table_ops,
	       "Table operations, over all passes."),
	PROG_F("innet_program_alu_operations_total", alu_ops, "ALU operations, over all passes."),
	PROG_G("innet_program_max_register_operations_per_pass", max_reg_ops,
	       "The most register operations in one pass so far."),
	PROG_G("innet_program_max_table_operations_per_pass", max_table_ops,
	       "The most table operations in one pass so far."),
	PROG_G("innet_program_max_alu_operations_per_pass", max_alu_ops,
	       "The most ALU operations in one pass so far."),
	PROG_G("innet_program_max_recirculations_per_packet", max_recirc,
	       "The most recirculations of one packet so far."),
	PROG_G("innet_program_max_emitted_per_packet", max_emitted,
	       "The most packets emitted for one packet so far (Trio)."),
	PROG_X("innet_program_xdp_received_packets_total", xdp_rx_pkts,
	       "XDP target: of the packets received, those the eBPF program handled."),
	PROG_X("innet_program_handoff_ring_full_total", handoff_ring_full,
	       "XDP target: hand-offs to the user-space engine lost to a full ring."),
};

static uint64_t field_value(const struct field *f, const void *stats)
{
	const char *p = (const char *)stats + f->off;
	if (f->narrow) {
		uint32_t v;
		memcpy(&v, p, sizeof(v));
		return v;
	}
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* One named drop reason of a program and its count (several reason numbers
 * with one name are added up, as `stats` does). */
struct reason_count {
	const char *name;
	char buf[24];           /* "reason_N" for a reason without a name */
	uint64_t n;
};

#define N_REASONS (INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS)

/* The drop reasons of cp worth a series: every named one (runtime or the
 * program's) even at zero, so that rate() sees them from the start, except
 * "none"; an unnamed reason only if it counted something. Returns how many. */
static unsigned prog_reasons(struct innet_cp *cp, const struct innet_prog_stats *s,
			     struct reason_count *out)
{
	unsigned n = 0;
	for (unsigned d = 0; d < N_REASONS; d++) {
		const char *name = innet_cp_drop_reason_name(cp, d);
		bool unnamed = !strcmp(name, "unknown") || !strcmp(name, "none");
		if (unnamed && s->drops[d] == 0)
			continue;
		char buf[24];
		if (!strcmp(name, "unknown")) {
			snprintf(buf, sizeof(buf), "reason_%u", d);
			name = buf;
		}
		unsigned k = 0;
		while (k < n && strcmp(out[k].name, name) != 0)
			k++;
		if (k == n) {
			if (name == buf) {
				memcpy(out[n].buf, buf, sizeof(buf));
				out[n].name = out[n].buf;
			} else {
				out[n].name = name;
			}
			out[n].n = 0;
			n++;
		}
		out[k].n += s->drops[d];
	}
	return n;
}

int innet_metrics_switch(struct innet_switch *sw, struct innet_prom *w)
{
	const struct innet_switch_conf *c = innet_switch_conf(sw);
	const struct innet_target_info *ti = innet_target_info(c->target);
	bool xdp = ti->xdp_counters;   /* the xdp_* counters and hand-offs mean something */
	const char *base[] = { "switch", c->name };
	char node[8];
	snprintf(node, sizeof(node), "%u", c->node_id);

	innet_prom_base_labels(w, 1, base);
	innet_prom_family(w, "innet_switch_info", INNET_PROM_GAUGE,
			  "The switch: its target (udp: the user-space engine, xdp: eBPF), fabric "
			  "node id and innet version; always 1.");
	innet_prom_u64(w, 1, "target", ti->name, "node", node, "version",
		       INNET_VERSION_STRING, (char *)NULL);

	/* Ports: every family, one series per port. */
	uint32_t np = c->n_ports;
	struct innet_port_stats *ps = calloc(np ? np : 1, sizeof(*ps));
	if (ps == NULL) {
		w->err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < np; i++)
		innet_switch_port_stats(sw, i, &ps[i]);
	for (size_t f = 0; f < sizeof(port_fields) / sizeof(port_fields[0]); f++) {
		const struct field *fd = &port_fields[f];
		if (fd->xdp && !xdp)
			continue;
		innet_prom_family(w, fd->name, fd->type, fd->help);
		for (uint32_t i = 0; i < np; i++) {
			char idx[12];
			snprintf(idx, sizeof(idx), "%u", i);
			innet_prom_u64(w, field_value(fd, &ps[i]), "port", idx, "port_name",
				       c->ports[i].name, (char *)NULL);
		}
	}
	if (xdp) {
		innet_prom_family(w, "innet_port_xdp_passed_packets_total", INNET_PROM_COUNTER,
				  "XDP target: frames the eBPF program passed to the kernel unhandled, "
				  "by reason.");
		for (uint32_t i = 0; i < np; i++) {
			char idx[12];
			snprintf(idx, sizeof(idx), "%u", i);
			for (unsigned k = 0; innet_xdp_pass_name(k) != NULL && k < 8; k++)
				innet_prom_u64(w, ps[i].xdp_pass[k], "port", idx, "port_name",
					       c->ports[i].name, "reason", innet_xdp_pass_name(k),
					       (char *)NULL);
		}
		innet_prom_family(w, "innet_port_xdp_dropped_packets_total", INNET_PROM_COUNTER,
				  "XDP target: frames its eBPF programs dropped outside any handler's "
				  "verdict, by reason (a program's drops are "
				  "innet_program_dropped_packets_total).");
		for (uint32_t i = 0; i < np; i++) {
			char idx[12];
			snprintf(idx, sizeof(idx), "%u", i);
			for (unsigned k = 0; innet_xdp_drop_name(k) != NULL && k < 8; k++)
				innet_prom_u64(w, ps[i].xdp_drop[k], "port", idx, "port_name",
					       c->ports[i].name, "reason", innet_xdp_drop_name(k),
					       (char *)NULL);
		}
	}
	free(ps);

	/* Programs. */
	uint32_t ng = c->n_progs;
	struct innet_prog_stats *gs = calloc(ng ? ng : 1, sizeof(*gs));
	struct innet_cp **cps = calloc(ng ? ng : 1, sizeof(*cps));
	struct reason_count *rc = calloc(N_REASONS, sizeof(*rc));
	if (gs == NULL || cps == NULL || rc == NULL) {
		w->err = -ENOMEM;
		goto out_progs;
	}
	for (uint32_t i = 0; i < ng; i++) {
		cps[i] = innet_switch_prog_at(sw, i);
		if (cps[i] != NULL)
			innet_cp_stats(cps[i], &gs[i]);
	}
	innet_prom_family(w, "innet_program_info", INNET_PROM_GAUGE,
			  "A program instance: the program it runs and its model (pisa or trio); "
			  "always 1.");
	for (uint32_t i = 0; i < ng; i++) {
		if (cps[i] == NULL)
			continue;
		const struct innet_program *p = innet_cp_program(cps[i]);
		innet_prom_u64(w, 1, "program", innet_cp_name(cps[i]), "type", p->name, "model",
			       p->model == INNET_MODEL_TRIO ? "trio" : "pisa", (char *)NULL);
	}
	for (size_t f = 0; f < sizeof(prog_fields) / sizeof(prog_fields[0]); f++) {
		const struct field *fd = &prog_fields[f];
		if (fd->xdp && !xdp)
			continue;
		innet_prom_family(w, fd->name, fd->type, fd->help);
		for (uint32_t i = 0; i < ng; i++)
			if (cps[i] != NULL)
				innet_prom_u64(w, field_value(fd, &gs[i]), "program",
					       innet_cp_name(cps[i]), (char *)NULL);
	}
	innet_prom_family(w, "innet_program_verdicts_total", INNET_PROM_COUNTER,
			  "Final verdicts of the program, by action.");
	for (uint32_t i = 0; i < ng; i++) {
		if (cps[i] == NULL)
			continue;
		for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
			innet_prom_u64(w, gs[i].actions[a], "program", innet_cp_name(cps[i]), "action",
				       innet_action_name(a), (char *)NULL);
	}
	innet_prom_family(w, "innet_program_dropped_packets_total", INNET_PROM_COUNTER,
			  "Packets the program dropped, by named reason (the runtime's and the "
			  "program's own).");
	for (uint32_t i = 0; i < ng; i++) {
		if (cps[i] == NULL)
			continue;
		unsigned n = prog_reasons(cps[i], &gs[i], rc);
		for (unsigned k = 0; k < n; k++)
			innet_prom_u64(w, rc[k].n, "program", innet_cp_name(cps[i]), "reason",
				       rc[k].name, (char *)NULL);
	}
	if (xdp) {
		innet_prom_family(w, "innet_program_handoffs_total", INNET_PROM_COUNTER,
				  "XDP target: packets the eBPF program handed to the user-space "
				  "engine, by kind.");
		for (uint32_t i = 0; i < ng; i++) {
			if (cps[i] == NULL)
				continue;
			for (unsigned k = 0; k < INNET_HANDOFF_KINDS && innet_handoff_name(k); k++)
				innet_prom_u64(w, gs[i].handoffs[k], "program", innet_cp_name(cps[i]),
					       "kind", innet_handoff_name(k), (char *)NULL);
		}
	}
out_progs:
	free(rc);
	free(cps);
	free(gs);
out:
	innet_prom_base_labels(w, 0, NULL);
	return w->err;
}

/* ------------------------------------------------------------------------ */
/* Addresses                                                                  */

int innet_metrics_addr_parse(const char *s, uint32_t *ip, uint16_t *port, char *err,
			     size_t errlen)
{
	char host[INET_ADDRSTRLEN];
	const char *colon = strrchr(s, ':');
	if (colon == NULL || colon == s) {
		snprintf(err, errlen, "bad metrics address '%.60s': expected IPv4:PORT, e.g. "
				      "127.0.0.1:9464", s);
		return -EINVAL;
	}
	size_t hl = (size_t)(colon - s);
	if (hl >= sizeof(host)) {
		snprintf(err, errlen, "bad metrics address '%.60s': '%.*s' is not an IPv4 address",
			 s, (int)(hl > 40 ? 40 : hl), s);
		return -EINVAL;
	}
	memcpy(host, s, hl);
	host[hl] = '\0';
	uint32_t a;
	if (innet_parse_ip(host, &a) != 0) {
		snprintf(err, errlen, "bad metrics address '%.60s': '%s' is not an IPv4 address "
				      "(a dotted quad)", s, host);
		return -EINVAL;
	}
	const char *p = colon + 1;
	if (*p == '\0') {
		snprintf(err, errlen, "bad metrics address '%.60s': no port after the ':'", s);
		return -EINVAL;
	}
	uint64_t v = 0;
	int rc = innet_parse_u64(p, 0, 65535, &v);
	if (rc == -EINVAL) {
		snprintf(err, errlen, "bad metrics address '%.60s': port '%.20s' is not a "
				      "number in 0..65535", s, p);
		return -EINVAL;
	}
	if (rc != 0) {
		snprintf(err, errlen, "bad metrics address '%.60s': port %.20s is out of range "
				      "0..65535", s, p);
		return -EINVAL;
	}
	*ip = a;
	*port = (uint16_t)v;
	return 0;
}
