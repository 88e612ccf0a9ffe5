/*
 * cmd_ctl.c — `innet ctl`: talk to a running switch's control socket.
 *
 *   innet ctl [-s SOCKET | --fabric DIR|TOPOLOGY --switch NAME] [--json]
 *             [--timeout SECONDS] COMMAND [ARGS...]
 *   innet ctl ... watch [SECONDS]
 *
 * The command words are joined with spaces into one request line and sent to
 * the switch (src/control/control.c); its one-line JSON response is printed
 * raw (--json) or rendered as text: aligned tables for ports, programs,
 * registers and table entries; one line per port and per program for stats.
 * `watch` is done here, on the client side: it asks for stats every second and
 * prints rates. The connection is the library's client, innet/ctl_client.h.
 * docs/man/innet-ctl.md is the manual page.
 *
 * Exit status: 0 success, 1 an error response or a connection failure (the
 * message on stderr names the socket), 2 a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "innet/ctl_client.h"
#include "innet/switch.h"
#include "cli/cmds.h"

#define CTL_SUN_MAX    sizeof(((struct sockaddr_un *)0)->sun_path)
#define CTL_LINE_MAX   65536u               /* the switch's request bound */
#define CTL_WATCH_MAX  86400u

static void usage(FILE *f)
{
	fprintf(f,
		"usage: innet ctl [-s SOCKET | --fabric DIR|TOPOLOGY --switch NAME] [--json]\n"
		"                 [--timeout SECONDS] COMMAND [ARGS...]\n"
		"       innet ctl ... watch [SECONDS]\n"
		"\n"
		"Send one command to a running switch's control socket and print the answer.\n"
		"\n"
		"options:\n"
		"  -s, --socket SOCKET   the switch's control socket (default: $INNET_CTL_SOCKET)\n"
		"  --fabric DIR|FILE     a fabric's state directory, or its topology file\n"
		"                        (the socket is <state_dir>/<switch>.sock)\n"
		"  --switch NAME         the switch in the fabric (with --fabric)\n"
		"  --json                print the raw JSON response\n"
		"  --timeout SECONDS     connection and response timeout (default 5)\n"
		"  --commands FILE       send each line of FILE ('-': stdin) as a command\n"
		"                        (a P4 switch: a simple_switch_CLI commands.txt)\n"
		"  -h, --help            this help\n"
		"\n"
		"commands (numbers are decimal or 0x-hex; KEYHEX/VALHEX are hex strings):\n"
		"  ping | info | programs | help\n"
		"  reg read PROG REG IDX [COUNT]       reg write PROG REG IDX VALUE\n"
		"  table add PROG TABLE KEYHEX VALHEX  table del|get PROG TABLE KEYHEX\n"
		"  table list PROG TABLE [MAX]\n"
		"  group set PROG GROUP MEMBER...      (MEMBER: PORT or PORT@IP:UDP)\n"
		"  group get PROG GROUP\n"
		"  stats | stats reset | watch [SECONDS]\n"
		"  metrics                             the stats in the Prometheus text format\n"
		"  capture start PORT PATH [MAXPKTS]   capture stop PORT\n"
		"  resources [PROG]\n"
		"  prog PROG WORD...                   the program's own commands ('prog PROG help')\n"
		"  table_add, table_dump, counter_read, register_read, mc_node_create, ...\n"
		"                                      a P4 switch: simple_switch_CLI's commands\n"
		"                                      (docs/p4.md)\n"
		"\n"
		"exit status: 0 ok, 1 error response or connection failure, 2 usage error\n");
}

/* `innet ctl metrics --help` */
static void usage_metrics(FILE *f)
{
	fprintf(f,
		"usage: innet ctl [-s SOCKET | --fabric DIR|TOPOLOGY --switch NAME] [--timeout SECONDS]\n"
		"                 metrics\n"
		"\n"
		"Print the switch's counters -- what 'stats' shows: ports, programs, verdicts by\n"
		"action, drops by named reason, XDP hand-offs by kind -- in the Prometheus text\n"
		"exposition format (version 0.0.4), as the switch serves them over HTTP at\n"
		"http://IP:PORT/metrics when started with --metrics IP:PORT (or the topology's\n"
		"\"metrics\" key). Every sample has the label switch=\"NAME\". The families are\n"
		"listed in docs/runtime.md, section \"Metrics\". --json prints the switch's\n"
		"response, the text in its \"text\" field.\n"
		"\n"
		"  innet ctl --fabric examples/single.json --switch s0 metrics | promtool check metrics\n");
}

static double now_s(void)
{
	return (double)innet_now_ns() / 1e9;
}

/* ------------------------------------------------------------------------ */
/* The connection: innet/ctl_client.h (src/control/ctl_client.c)             */

/* One request and its response line (free it), or NULL with the message
 * printed. */
static char *request(struct innet_ctl_client *c, const char *line)
{
	char err[512];
	char *resp = innet_ctl_client_request(c, line, err, sizeof(err));
	if (resp == NULL)
		fprintf(stderr, "innet ctl: %s\n", err);
	return resp;
}

/* ------------------------------------------------------------------------ */
/* Finding the socket                                                         */

/* 0 if the topology `topo` (read from file) has a switch called name; else
 * -1 with a message that says what name is (a host, or nothing) and which
 * switches there are. A topology without a "switches" array is not judged. */
static int topo_has_switch(json_t *topo, const char *file, const char *name)
{
	json_t *sws = json_object_get(topo, "switches");
	if (!json_is_array(sws))
		return 0;
	size_t i;
	json_t *n;
	json_array_foreach(sws, i, n) {
		const char *sn = json_string_value(json_object_get(n, "name"));
		if (sn != NULL && strcmp(sn, name) == 0)
			return 0;
	}
	json_t *hosts = json_object_get(topo, "hosts");
	json_array_foreach(hosts, i, n) {
		const char *hn = json_string_value(json_object_get(n, "name"));
		if (hn != NULL && strcmp(hn, name) == 0) {
			fprintf(stderr, "innet ctl: '%s' is a host of the topology %s, not a switch\n",
				name, file);
			return -1;
		}
	}
	fprintf(stderr, "innet ctl: the topology %s has no switch named '%s' (its switches:", file,
		name);
	json_array_foreach(sws, i, n) {
		const char *sn = json_string_value(json_object_get(n, "name"));
		fprintf(stderr, "%s %s", i ? "," : "", sn ? sn : "?");
	}
	fprintf(stderr, ")\n");
	return -1;
}

/* The socket of switch `name` in the fabric `arg` (a state directory or a
 * topology file) into out. 0, or -1 with a message. */
static int fabric_socket(const char *arg, const char *name, char *out, size_t outlen)
{
	if (name[0] == '\0' || strchr(name, '/') != NULL) {
		fprintf(stderr, "innet ctl: bad switch name '%s'\n", name);
		return -1;
	}
	struct stat st;
	if (stat(arg, &st) < 0) {
		fprintf(stderr, "innet ctl: %s: %s\n", arg, strerror(errno));
		return -1;
	}
	char dir[4096];
	if (S_ISDIR(st.st_mode)) {
		snprintf(dir, sizeof(dir), "%s", arg);
		/* An up fabric's state file lists its switches (fabric_json.c). */
		char sf[4200];
		snprintf(sf, sizeof(sf), "%s/fabric.json", arg);
		json_t *state = json_load_file(sf, 0, NULL);
		if (state != NULL) {
			int rc = topo_has_switch(state, sf, name);
			json_decref(state);
			if (rc != 0)
				return -1;
		}
	} else {
		json_error_t jerr;
		json_t *topo = json_load_file(arg, JSON_REJECT_DUPLICATES, &jerr);
		if (topo == NULL) {
			fprintf(stderr, "innet ctl: %s:%d:%d: %s\n", arg, jerr.line, jerr.column, jerr.text);
			return -1;
		}
		if (topo_has_switch(topo, arg, name) != 0) {
			json_decref(topo);
			return -1;
		}
		const char *sd = json_string_value(json_object_get(topo, "state_dir"));
		const char *tn = json_string_value(json_object_get(topo, "name"));
		if (sd != NULL) {
			snprintf(dir, sizeof(dir), "%s", sd);
		} else if (tn != NULL && tn[0] != '\0' && strchr(tn, '/') == NULL) {
			snprintf(dir, sizeof(dir), "/tmp/innet-%s", tn);
		} else {
			fprintf(stderr, "innet ctl: %s: the topology has no \"state_dir\" and no usable "
					"\"name\"\n", arg);
			json_decref(topo);
			return -1;
		}
		json_decref(topo);
	}
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dir[--dl] = '\0';
	int w = snprintf(out, outlen, "%s/%s.sock", dir, name);
	if (w < 0 || (size_t)w >= outlen) {
		fprintf(stderr, "innet ctl: socket path '%s/%s.sock' is too long\n", dir, name);
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* JSON access                                                                */

/* Unsigned value of key in o: a JSON integer, or a decimal string (the switch
 * sends values above 2^63-1 as strings). 0 if absent. */
static uint64_t ju(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	if (json_is_integer(v))
		return (uint64_t)json_integer_value(v);
	if (json_is_string(v))
		return strtoull(json_string_value(v), NULL, 10);
	if (json_is_real(v))
		return (uint64_t)json_real_value(v);
	return 0;
}

static const char *js(const json_t *o, const char *key, const char *def)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : def;
}

/* A JSON value as text: strings bare, numbers as numbers, others compact. */
static void jfmt(const json_t *v, char *buf, size_t len)
{
	if (json_is_string(v)) {
		snprintf(buf, len, "%s", json_string_value(v));
	} else if (json_is_integer(v)) {
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	} else if (json_is_real(v)) {
		snprintf(buf, len, "%g", json_real_value(v));
	} else {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		snprintf(buf, len, "%s", s ? s : "?");
		free(s);
	}
}

/* ------------------------------------------------------------------------ */
/* Aligned tables                                                             */

#define TBL_COLS 12

struct tbl {
	char **cells;          /* rows * TBL_COLS */
	size_t rows, cap;
	int ncols;
	size_t width[TBL_COLS];
};

static void tbl_init(struct tbl *t, int ncols)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
}

/* Add a row of t->ncols printf-formatted cells ("%s" each: pass strings). */
static void tbl_row(struct tbl *t, ...)
{
	if (t->rows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **p = realloc(t->cells, cap * TBL_COLS * sizeof(*p));
		if (p == NULL)
			return;
		t->cells = p;
		t->cap = cap;
	}
	va_list ap;
	va_start(ap, t);
	for (int i = 0; i < t->ncols; i++) {
		const char *s = va_arg(ap, const char *);
		char *d = strdup(s ? s : "");
		t->cells[t->rows * TBL_COLS + (size_t)i] = d;
		size_t l = d ? strlen(d) : 0;
		if (l > t->width[i])
			t->width[i] = l;
	}
	va_end(ap);
	t->rows++;
}

static void tbl_print(struct tbl *t, const char *indent)
{
	for (size_t r = 0; r < t->rows; r++) {
		fputs(indent, stdout);
		for (int i = 0; i < t->ncols; i++) {
			const char *s = t->cells[r * TBL_COLS + (size_t)i];
			if (i == t->ncols - 1)
				printf("%s", s ? s : "");
			else
				printf("%-*s  ", (int)t->width[i], s ? s : "");
		}
		putchar('\n');
	}
}

static void tbl_free(struct tbl *t)
{
	for (size_t r = 0; r < t->rows; r++)
		for (int i = 0; i < t->ncols; i++)
			free(t->cells[r * TBL_COLS + (size_t)i]);
	free(t->cells);
	memset(t, 0, sizeof(*t));
}

/* printf into a small static ring of buffers, for table cells. */
static const char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static const char *fmt(const char *f, ...)
{
	static char ring[16][256];
	static unsigned next;
	char *b = ring[next++ % 16];
	va_list ap;
	va_start(ap, f);
	vsnprintf(b, sizeof(ring[0]), f, ap);
	va_end(ap);
	return b;
}

/* ------------------------------------------------------------------------ */
/* Text renderings, one per command. Each gets the whole response.            */

static void render_ping(const json_t *r)
{
	printf("switch %s (node %" PRIu64 "): ok\n", js(r, "switch", "?"), ju(r, "node"));
}

static void render_info(const json_t *r)
{
	printf("switch %s  node %" PRIu64 "  workers %" PRIu64 "  ctl %s\n\n", js(r, "switch", "?"),
	       ju(r, "node"), ju(r, "workers"), js(r, "ctl", "-"));
	struct tbl t;
	tbl_init(&t, 5);
	tbl_row(&t, "PORT", "NAME", "ADDRESS", "PEER", "LINK");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "ports"), i, p) {
		const json_t *l = json_object_get(p, "link");
		char link[200] = "-";
		if (json_is_true(json_object_get(l, "active"))) {
			snprintf(link, sizeof(link), "loss %g dup %g reorder %g delay %" PRIu64
				 "us jitter %" PRIu64 "us%s%s",
				 json_number_value(json_object_get(l, "loss")),
				 json_number_value(json_object_get(l, "dup")),
				 json_number_value(json_object_get(l, "reorder")), ju(l, "delay_us"),
				 ju(l, "jitter_us"),
				 json_is_true(json_object_get(l, "on_ingress")) ? " ingress" : "",
				 json_is_true(json_object_get(l, "on_egress")) ? " egress" : "");
		}
		const char *peer = js(p, "peer", "-");
		uint64_t pu = ju(p, "peer_udp");
		const char *name = js(p, "name", "");
		if (json_is_true(json_object_get(p, "capturing")))
			name = fmt("%s (capturing)", name);
		tbl_row(&t, fmt("%" PRIu64, ju(p, "index")), name, js(p, "address", "?"),
			pu ? fmt("%s:%" PRIu64, peer, pu) : peer, link);
	}
	tbl_print(&t, "");
	tbl_free(&t);
	putchar('\n');
	tbl_init(&t, 5);
	tbl_row(&t, "INSTANCE", "PROGRAM", "MODEL", "UDP", "SERIAL");
	json_array_foreach(json_object_get(r, "programs"), i, p) {
		char udp[128];
		jfmt(json_object_get(p, "udp"), udp, sizeof(udp));
		tbl_row(&t, js(p, "name", "?"), js(p, "program", "?"), js(p, "model", "?"), udp,
			json_is_true(json_object_get(p, "serial")) ? "yes" : "no");
	}
	tbl_print(&t, "");
	tbl_free(&t);
}

static void render_programs(const json_t *r)
{
	size_t i, k;
	json_t *p, *x;
	json_array_foreach(json_object_get(r, "programs"), i, p) {
		char udp[128];
		jfmt(json_object_get(p, "udp"), udp, sizeof(udp));
		if (i > 0)
			putchar('\n');
		printf("%s: program %s, model %s, udp %s%s\n", js(p, "name", "?"), js(p, "program", "?"),
		       js(p, "model", "?"), udp,
		       json_is_true(json_object_get(p, "serial")) ? ", serial" : "");
		const char *sum = js(p, "summary", "");
		if (sum[0])
			printf("  %s\n", sum);
		json_t *regs = json_object_get(p, "registers");
		if (json_array_size(regs) > 0) {
			struct tbl t;
			tbl_init(&t, 3);
			tbl_row(&t, "REGISTER", "WIDTH", "COUNT");
			json_array_foreach(regs, k, x)
				tbl_row(&t, js(x, "name", "?"), fmt("%" PRIu64, ju(x, "width")),
					fmt("%" PRIu64, ju(x, "count")));
			tbl_print(&t, "  ");
			tbl_free(&t);
		}
		json_t *tables = json_object_get(p, "tables");
		if (json_array_size(tables) > 0) {
			struct tbl t;
			tbl_init(&t, 7);
			tbl_row(&t, "TABLE", "KEY", "VALUE", "CAPACITY", "ENTRIES", "INSERT_FULL", "BUSY");
			json_array_foreach(tables, k, x)
				tbl_row(&t, js(x, "name", "?"), fmt("%" PRIu64, ju(x, "key_size")),
					fmt("%" PRIu64, ju(x, "value_size")),
					fmt("%" PRIu64, ju(x, "capacity")),
					fmt("%" PRIu64, ju(x, "entries")),
					fmt("%" PRIu64, ju(x, "insert_full")),
					fmt("%" PRIu64, ju(x, "busy")));
			tbl_print(&t, "  ");
			tbl_free(&t);
		}
		printf("  groups %" PRIu64 ", timers %" PRIu64 "\n", ju(p, "groups"), ju(p, "timers"));
		json_t *dr = json_object_get(p, "drop_reasons");
		if (json_array_size(dr) > 0) {
			printf("  drop reasons:");
			json_array_foreach(dr, k, x)
				printf("%s %s", k ? "," : "", json_string_value(x) ? json_string_value(x) : "?");
			putchar('\n');
		}
	}
}

static void render_reg_read(const json_t *r)
{
	uint64_t idx = ju(r, "index");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(r, "values"), i, v) {
		char val[8192];
		jfmt(v, val, sizeof(val));
		printf("%s.%s[%" PRIu64 "] = %s\n", js(r, "program", "?"), js(r, "register", "?"),
		       idx + i, val);
	}
}

static void render_table(const json_t *r, const char *cmd)
{
	if (!strcmp(cmd, "get")) {
		printf("%s -> %s\n", js(r, "key", "?"), js(r, "value", "?"));
		return;
	}
	if (strcmp(cmd, "list") != 0) {
		printf("ok: table %s.%s has %" PRIu64 " entries\n", js(r, "program", "?"),
		       js(r, "table", "?"), ju(r, "entries"));
		return;
	}
	struct tbl t;
	tbl_init(&t, 2);
	tbl_row(&t, "KEY", "VALUE");
	size_t i;
	json_t *e;
	json_t *entries = json_object_get(r, "entries");
	json_array_foreach(entries, i, e)
		tbl_row(&t, js(e, "key", "?"), js(e, "value", "?"));
	tbl_print(&t, "");
	tbl_free(&t);
	printf("(%zu of %" PRIu64 " entries%s)\n", json_array_size(entries), ju(r, "entries_total"),
	       json_is_true(json_object_get(r, "truncated")) ? "; more with a larger MAX" : "");
}

static void render_group(const json_t *r)
{
	json_t *m = json_object_get(r, "members");
	printf("group %" PRIu64 " of %s: %zu member%s\n", ju(r, "group"), js(r, "program", "?"),
	       json_array_size(m), json_array_size(m) == 1 ? "" : "s");
	size_t i;
	json_t *x;
	json_array_foreach(m, i, x) {
		const char *ip = js(x, "ip", NULL);
		uint64_t udp = ju(x, "udp");
		printf("  port %" PRIu64, ju(x, "port"));
		if (ip || udp)
			printf(" -> %s:%s", ip ? ip : "peer", udp ? fmt("%" PRIu64, udp) : "same");
		putchar('\n');
	}
}

/* Append ", name N" to buf for a nonzero counter. */
static void add_nz(char *buf, size_t len, const char *name, uint64_t v)
{
	if (v == 0)
		return;
	size_t off = strlen(buf);
	snprintf(buf + off, len - off, ", %s %" PRIu64, name, v);
}

/* On the XDP target, a program's fast and slow paths at a glance, right
 * under its counters: what eBPF handled of what the program received, and
 * the hand-offs to the user-space engine by kind. A timer arm is a hand-off
 * by design; any other kind is per-packet work in user space — a multicast
 * group that devmap cannot serve, a neighbour the kernel must resolve, a
 * packet too big — flagged as the slow path. */
static void render_xdp_path(const json_t *p)
{
	json_t *hand = json_object_get(p, "handoffs");
	if (hand == NULL)
		return;
	uint64_t rx = ju(p, "rx_pkts"), xrx = ju(p, "xdp_rx_pkts"), total = 0, slow = 0;
	const char *key;
	json_t *v;
	char kinds[512] = "";
	json_object_foreach(hand, key, v) {
		uint64_t n = ju(hand, key);
		if (n == 0)
			continue;
		total += n;
		if (strcmp(key, "timer") != 0)
			slow += n;
		size_t off = strlen(kinds);
		snprintf(kinds + off, sizeof(kinds) - off, "%s %s %" PRIu64, off ? "," : ":", key, n);
	}
	printf("  xdp      %" PRIu64 " of %" PRIu64 " received handled in eBPF (%.1f%%); hand-offs to user "
	       "space %" PRIu64 "%s", xrx, rx, rx ? 100.0 * (double)xrx / (double)rx : 100.0, total, kinds);
	if (ju(p, "handoff_ring_full") != 0)
		printf("; ring full %" PRIu64, ju(p, "handoff_ring_full"));
	printf("%s\n", slow != 0 || xrx < rx ? "  <- SLOW PATH" : "");
}

static void render_stats(const json_t *r)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "ports"), i, p) {
		char extra[512] = "";
		static const char *const more[] = { "tx_errors", "tx_gso", "rx_sock_drops", "link_lost",
						    "link_duplicated", "link_reordered", "link_delayed",
						    "link_queue_full", "xdp_rx_pkts", "xdp_tx_pkts" };
		for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++)
			add_nz(extra, sizeof(extra), more[k], ju(p, more[k]));
		const char *key;
		json_t *v;
		json_t *pass = json_object_get(p, "xdp_pass");
		json_object_foreach(pass, key, v) {
			char name[64];
			snprintf(name, sizeof(name), "xdp_pass_%s", key);
			add_nz(extra, sizeof(extra), name, ju(pass, key));
		}
		json_t *drop = json_object_get(p, "xdp_drop");
		json_object_foreach(drop, key, v) {
			char name[64];
			snprintf(name, sizeof(name), "xdp_drop_%s", key);
			add_nz(extra, sizeof(extra), name, ju(drop, key));
		}
		printf("port %" PRIu64 " %-8s rx %" PRIu64 " pkts %" PRIu64 " B, tx %" PRIu64
		       " pkts %" PRIu64 " B%s\n",
		       ju(p, "index"), js(p, "name", "?"), ju(p, "rx_pkts"), ju(p, "rx_bytes"),
		       ju(p, "tx_pkts"), ju(p, "tx_bytes"), extra);
	}
	json_array_foreach(json_object_get(r, "programs"), i, p) {
		char extra[1024] = "";
		static const char *const more[] = { "passes", "recirculations", "emitted", "timer_fires",
						    "cpu_pkts", "reg_ops", "table_ops", "alu_ops",
						    "max_reg_ops", "max_table_ops", "max_alu_ops",
						    "max_recirc", "max_emitted" };
		const char *key;
		json_t *v;
		json_object_foreach(json_object_get(p, "actions"), key, v) {
			char name[64];
			snprintf(name, sizeof(name), "%s", key);
			add_nz(extra, sizeof(extra), name, ju(json_object_get(p, "actions"), key));
		}
		for (size_t k = 0; k < sizeof(more) / sizeof(more[0]); k++)
			add_nz(extra, sizeof(extra), more[k], ju(p, more[k]));
		printf("prog %-8s rx %" PRIu64 " pkts %" PRIu64 " B, tx %" PRIu64 " pkts%s\n",
		       js(p, "name", "?"), ju(p, "rx_pkts"), ju(p, "rx_bytes"), ju(p, "tx_pkts"), extra);
		render_xdp_path(p);
		json_t *drops = json_object_get(p, "drops");
		json_object_foreach(drops, key, v)
			printf("  drop %-20s %" PRIu64 "\n", key, ju(drops, key));
	}
}

static void render_resources(const json_t *r)
{
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "programs"), i, p) {
		const char *text = js(p, "text", NULL);
		if (i > 0)
			putchar('\n');
		if (text != NULL) {
			fputs(text, stdout);
			if (text[0] && text[strlen(text) - 1] != '\n')
				putchar('\n');
		} else {
			char *s = json_dumps(p, JSON_INDENT(2));
			printf("%s\n", s ? s : "?");
			free(s);
		}
	}
}

static void render_help(const json_t *r)
{
	struct tbl t;
	tbl_init(&t, 2);
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(r, "commands"), i, c)
		tbl_row(&t, js(c, "command", "?"), js(c, "help", ""));
	tbl_row(&t, "watch [SECONDS]", "stats rates every second (innet ctl only)");
	tbl_print(&t, "");
	tbl_free(&t);
}

/* Render an ok response to words[0..n) as text. */
static void render(const json_t *r, char **words, int n)
{
	const char *w0 = words[0], *w1 = n > 1 ? words[1] : "";
	if (!strcmp(w0, "ping"))
		render_ping(r);
	else if (!strcmp(w0, "info"))
		render_info(r);
	else if (!strcmp(w0, "programs"))
		render_programs(r);
	else if (!strcmp(w0, "reg") && !strcmp(w1, "read"))
		render_reg_read(r);
	else if (!strcmp(w0, "reg"))
		printf("ok: %s.%s[%" PRIu64 "] written\n", js(r, "program", "?"), js(r, "register", "?"),
		       ju(r, "index"));
	else if (!strcmp(w0, "table"))
		render_table(r, w1);
	else if (!strcmp(w0, "group"))
		render_group(r);
	else if (!strcmp(w0, "stats") && n == 1)
		render_stats(r);
	else if (!strcmp(w0, "stats"))
		printf("ok: counters reset\n");
	else if (!strcmp(w0, "metrics"))
		fputs(js(r, "text", ""), stdout); /* the exposition text, as served over HTTP */
	else if (!strcmp(w0, "capture") && !strcmp(w1, "start"))
		printf("ok: capturing port %" PRIu64 " into %s%s\n", ju(r, "port"), js(r, "path", "?"),
		       ju(r, "max_pkts") ? fmt(" (stops after %" PRIu64 " packets)", ju(r, "max_pkts")) : "");
	else if (!strcmp(w0, "capture"))
		printf("ok: capture on port %" PRIu64 " stopped\n", ju(r, "port"));
	else if (!strcmp(w0, "resources"))
		render_resources(r);
	else if (!strcmp(w0, "help"))
		render_help(r);
	else if (json_is_string(json_object_get(r, "text")))
		fputs(js(r, "text", ""), stdout); /* the program rendered it itself (a P4
		                                   * switch: as simple_switch_CLI prints it) */
	else if (json_object_size(r) <= 1)
		printf("ok\n");
	else {
		char *s = json_dumps(r, JSON_INDENT(2));
		printf("%s\n", s ? s : "ok");
		free(s);
	}
}

/* ------------------------------------------------------------------------ */
/* One command                                                                */

/*
 * Send words as one request and print the answer. Returns the exit status:
 * 0 ok, 1 error response or failure.
 */
static int run_one(struct innet_ctl_client *c, char **words, int n, bool raw)
{
	size_t len = 0;
	for (int i = 0; i < n; i++)
		len += strlen(words[i]) + 1;
	char *line = malloc(len + 1);
	if (line == NULL) {
		fprintf(stderr, "innet ctl: out of memory\n");
		return 1;
	}
	line[0] = '\0';
	for (int i = 0, off = 0; i < n; i++)
		off += sprintf(line + off, "%s%s", i ? " " : "", words[i]);
	char *resp = request(c, line);
	free(line);
	if (resp == NULL)
		return 1;
	json_error_t jerr;
	json_t *r = json_loads(resp, 0, &jerr);
	int rc = 1;
	if (raw) {
		printf("%s\n", resp);
		rc = json_is_true(json_object_get(r, "ok")) ? 0 : 1;
	} else if (!json_is_object(r)) {
		fprintf(stderr, "innet ctl: %s: the response is not a JSON object: %s\n", innet_ctl_client_path(c),
			jerr.text);
	} else if (!json_is_true(json_object_get(r, "ok"))) {
		fprintf(stderr, "innet ctl: %s\n", js(r, "error", "the switch reported an error"));
	} else {
		render(r, words, n);
		/* a P4 command BMv2 would refuse: its message is printed, as
		 * simple_switch_CLI prints it; the status says it failed */
		rc = json_is_true(json_object_get(r, "failed")) ? 1 : 0;
	}
	if (raw && r == NULL)
		fprintf(stderr, "innet ctl: %s: the response is not JSON: %s\n", innet_ctl_client_path(c), jerr.text);
	json_decref(r);
	free(resp);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* watch                                                                      */

struct sample {
	double t;
	json_t *stats;
};

static json_t *get_stats(struct innet_ctl_client *c)
{
	char *resp = request(c, "stats");
	if (resp == NULL)
		return NULL;
	json_error_t jerr;
	json_t *r = json_loads(resp, 0, &jerr);
	free(resp);
	if (!json_is_true(json_object_get(r, "ok"))) {
		fprintf(stderr, "innet ctl: %s: %s\n", innet_ctl_client_path(c),
			r ? js(r, "error", "bad stats response") : jerr.text);
		json_decref(r);
		return NULL;
	}
	return r;
}

static uint64_t drops_total(const json_t *prog)
{
	uint64_t sum = 0;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(prog, "drops"), k, v)
		sum += ju(json_object_get(prog, "drops"), k);
	return sum;
}

static double rate(const json_t *a, const json_t *b, const char *key, double dt)
{
	uint64_t x = ju(a, key), y = ju(b, key);
	return y >= x ? (double)(y - x) / dt : 0.0; /* a reset in between: 0 */
}

/* Print the rates between two stats samples. */
static void watch_print(const struct sample *a, const struct sample *b, double elapsed)
{
	double dt = b->t - a->t;
	if (dt <= 0)
		dt = 1e-9;
	struct tbl t;
	tbl_init(&t, 7);
	tbl_row(&t, fmt("t=%.0fs", elapsed), "NAME", "RX pkt/s", "TX pkt/s", "RX B/s", "TX B/s",
		"DROP pkt/s");
	size_t i;
	json_t *p;
	json_t *pa = json_object_get(a->stats, "ports");
	json_array_foreach(json_object_get(b->stats, "ports"), i, p) {
		json_t *q = json_array_get(pa, i);
		tbl_row(&t, fmt("port %" PRIu64, ju(p, "index")), js(p, "name", "?"),
			fmt("%.0f", rate(q, p, "rx_pkts", dt)), fmt("%.0f", rate(q, p, "tx_pkts", dt)),
			fmt("%.0f", rate(q, p, "rx_bytes", dt)), fmt("%.0f", rate(q, p, "tx_bytes", dt)),
			"-");
	}
	json_t *ga = json_object_get(a->stats, "programs");
	json_array_foreach(json_object_get(b->stats, "programs"), i, p) {
		json_t *q = json_array_get(ga, i);
		uint64_t d0 = drops_total(q), d1 = drops_total(p);
		tbl_row(&t, "prog", js(p, "name", "?"), fmt("%.0f", rate(q, p, "rx_pkts", dt)),
			fmt("%.0f", rate(q, p, "tx_pkts", dt)), fmt("%.0f", rate(q, p, "rx_bytes", dt)), "-",
			fmt("%.0f", d1 >= d0 ? (double)(d1 - d0) / dt : 0.0));
	}
	tbl_print(&t, "");
	tbl_free(&t);
	fflush(stdout);
}

/* watch [SECONDS]: stats rates every second for SECONDS (default 10). */
static int run_watch(struct innet_ctl_client *c, char **words, int n, bool raw)
{
	uint64_t secs = 10;
	if (n > 2) {
		fprintf(stderr, "innet ctl: usage: watch [SECONDS]\n");
		return 2;
	}
	if (n == 2) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(words[1], &end, 10);
		if (words[1][0] < '0' || words[1][0] > '9' || *end != '\0' || errno != 0 || v == 0 ||
		    v > CTL_WATCH_MAX) {
			fprintf(stderr, "innet ctl: watch: SECONDS must be 1..%u (got '%s')\n",
				CTL_WATCH_MAX, words[1]);
			return 2;
		}
		secs = v;
	}
	struct sample prev = { .t = now_s() };
	prev.stats = get_stats(c);
	if (prev.stats == NULL)
		return 1;
	double start = prev.t;
	for (uint64_t s = 1; s <= secs; s++) {
		double wake = start + (double)s;
		double left;
		while ((left = wake - now_s()) > 0) {
			struct timespec ts = { .tv_sec = (time_t)left,
					       .tv_nsec = (long)((left - (double)(time_t)left) * 1e9) };
			nanosleep(&ts, NULL);
		}
		struct sample cur = { .t = now_s() };
		cur.stats = get_stats(c);
		if (cur.stats == NULL) {
			json_decref(prev.stats);
			return 1;
		}
		if (raw) {
			char *j = json_dumps(cur.stats, JSON_COMPACT);
			printf("%s\n", j ? j : "{}");
			free(j);
			fflush(stdout);
		} else {
			if (s > 1)
				putchar('\n');
			watch_print(&prev, &cur, cur.t - start);
		}
		json_decref(prev.stats);
		prev = cur;
	}
	json_decref(prev.stats);
	return 0;
}

/* ------------------------------------------------------------------------ */

/* The option's value: argv[i+1], or a usage error. */
static const char *optval(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "innet ctl: %s needs a value\n", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

/* --commands FILE: each line a request (blank lines and #-comments
 * skipped), its answer printed; for a P4 switch, the commands.txt of a P4
 * tutorial, unchanged. Status 1 if any line failed; all are sent. */
static int run_file(const char *sock, const char *path, double timeout, bool raw)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (f == NULL) {
		fprintf(stderr, "innet ctl: %s: %s\n", path, strerror(errno));
		return 1;
	}
	char err[512];
	struct innet_ctl_client *c = innet_ctl_client_open(sock, timeout, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "innet ctl: %s\n", err);
		if (f != stdin)
			fclose(f);
		return 1;
	}
	char line[CTL_LINE_MAX];
	int rc = 0;
	unsigned ln = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		ln++;
		char *w[256];
		int n = 0;
		for (char *p = line; n < 256;) {
			while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
				p++;
			if (*p == '\0' || *p == '#')
				break;
			w[n++] = p;
			while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
				p++;
			if (*p)
				*p++ = '\0';
		}
		if (n == 0)
			continue;
		if (run_one(c, w, n, raw) != 0) {
			fprintf(stderr, "innet ctl: %s, line %u failed\n", path, ln);
			rc = 1;
		}
	}
	innet_ctl_client_close(c);
	if (f != stdin)
		fclose(f);
	return rc;
}

int cmd_ctl(int argc, char **argv)
{
	const char *sock = NULL, *fabric = NULL, *swname = NULL, *cmdfile = NULL;
	bool raw = false;
	double timeout = 5.0;
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-s") || !strcmp(a, "--socket")) {
			if ((sock = optval(argc, argv, &i)) == NULL)
				return 2;
		} else if (!strcmp(a, "--fabric")) {
			if ((fabric = optval(argc, argv, &i)) == NULL)
				return 2;
		} else if (!strcmp(a, "--switch")) {
			if ((swname = optval(argc, argv, &i)) == NULL)
				return 2;
		} else if (!strcmp(a, "--json")) {
			raw = true;
		} else if (!strcmp(a, "--commands")) {
			if ((cmdfile = optval(argc, argv, &i)) == NULL)
				return 2;
		} else if (!strcmp(a, "--timeout")) {
			const char *v = optval(argc, argv, &i);
			if (v == NULL)
				return 2;
			char *end;
			errno = 0;
			timeout = strtod(v, &end);
			if (*end != '\0' || errno != 0 || !(timeout > 0 && timeout <= 3600)) {
				fprintf(stderr, "innet ctl: --timeout must be a number of seconds in "
						"(0, 3600] (got '%s')\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--")) {
			i++;
			break;
		} else {
			fprintf(stderr, "innet ctl: unknown option '%s'\n", a);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc && cmdfile == NULL) {
		fprintf(stderr, "innet ctl: no command given\n");
		usage(stderr);
		return 2;
	}
	/* `innet ctl stats --help`: help, not a connection attempt. */
	for (int k = i; k < argc; k++) {
		if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) {
			if (!strcmp(argv[i], "metrics")) {
				usage_metrics(stdout);
				return 0;
			}
			usage(stdout);
			if (!strcmp(argv[i], "prog"))
				printf("\nA program's own commands: innet ctl ... prog %s help\n",
				       i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : "PROG");
			return 0;
		}
	}
	if (sock != NULL && fabric != NULL) {
		fprintf(stderr, "innet ctl: give either -s SOCKET or --fabric, not both\n");
		return 2;
	}
	if ((fabric != NULL) != (swname != NULL)) {
		fprintf(stderr, "innet ctl: --fabric and --switch go together\n");
		return 2;
	}
	char path[CTL_SUN_MAX + 64];
	if (fabric != NULL) {
		if (fabric_socket(fabric, swname, path, sizeof(path)) != 0)
			return 1;
		sock = path;
	}
	if (sock == NULL)
		sock = getenv("INNET_CTL_SOCKET");
	if (sock == NULL || sock[0] == '\0') {
		fprintf(stderr, "innet ctl: which switch? give -s SOCKET or --fabric ... --switch NAME "
				"(or set INNET_CTL_SOCKET)\n");
		return 2;
	}

	if (cmdfile != NULL) {
		if (i < argc) {
			fprintf(stderr, "innet ctl: --commands FILE takes no command words\n");
			return 2;
		}
		return run_file(sock, cmdfile, timeout, raw);
	}

	/* The words travel as one line: none may contain a separator. */
	char **words = argv + i;
	int n = argc - i;
	size_t total = 0;
	for (int k = 0; k < n; k++) {
		if (words[k][0] == '\0' || strpbrk(words[k], " \t\r\n") != NULL) {
			fprintf(stderr, "innet ctl: argument %d ('%s') is empty or contains white space\n",
				k + 1, words[k]);
			return 2;
		}
		total += strlen(words[k]) + 1;
	}
	if (total > CTL_LINE_MAX) {
		fprintf(stderr, "innet ctl: the command is longer than %u bytes\n", CTL_LINE_MAX);
		return 2;
	}

	/* capture start PORT PATH: the switch resolves PATH from its own working
	 * directory, so send an absolute one. */
	char abspath[PATH_MAX + 2];
	char *saved = NULL;
	if (n >= 4 && !strcmp(words[0], "capture") && !strcmp(words[1], "start") &&
	    words[3][0] != '/') {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof(cwd)) == NULL) {
			fprintf(stderr, "innet ctl: getcwd: %s\n", strerror(errno));
			return 1;
		}
		int w = snprintf(abspath, sizeof(abspath), "%s/%s", cwd, words[3]);
		if (w < 0 || (size_t)w >= sizeof(abspath)) {
			fprintf(stderr, "innet ctl: capture path too long\n");
			return 2;
		}
		saved = words[3];
		words[3] = abspath;
	}

	char err[512];
	struct innet_ctl_client *c = innet_ctl_client_open(sock, timeout, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "innet ctl: %s\n", err);
		return 1;
	}
	int rc = !strcmp(words[0], "watch") ? run_watch(c, words, n, raw) : run_one(c, words, n, raw);
	innet_ctl_client_close(c);
	if (saved != NULL)
		words[3] = saved;
	return rc;
}
