/*
 * cmd_p4.c — `innet p4`: P4 programs compiled by p4c for BMv2, on innet
 * (docs/p4.md).
 *
 *   innet p4 run [--target user|xdp] [--ports N] [-v] PROG.json [SCRIPT]
 *       an offline switch running PROG.json on N raw ports (BMv2 port
 *       numbers = port indices; default 16), no network: packets from the
 *       script run to completion (clones, recirculation, resubmit, multicast
 *       copies included) — on the user-space engine directly, on XDP through
 *       the loaded eBPF program (BPF_PROG_TEST_RUN, root) with its hand-offs
 *       to the user-space engine. The script (a file, or stdin), one command
 *       a line:
 *         packet PORT HEX     inject one frame
 *         wait                let anything pending finish
 *         # ...  / blank      ignored
 *         anything else       a simple_switch_CLI command, run as `innet ctl`
 *                             runs it on a running switch
 *       Output: `out PORT HEX` for every frame the switch sends, in the order
 *       sent; each command's output, every line prefixed with "> ".
 *       Exit status: 0 (a command BMv2 would refuse prints BMv2's message and
 *       the script goes on); 1 if the program was refused (the message on
 *       stderr, naming the construct and where); 2 for a bad script line
 *       (an unknown command, a malformed packet line) or usage.
 *   innet p4 build [-v] PROG.json     build the data path into the cache
 *                                     (the cost of loading it: per step)
 *   innet p4 check PROG.json          load only: what innet refuses, named
 *   innet p4 resources [--json] PROG.json   the resource report of the P4
 *                                     program (Tofino stages from its tables
 *                                     and their dependencies), offline
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "innet/resources.h"
#include "innet/switch.h"
#include "cli/cmds.h"
#include "p4/p4.h"
#include "p4/p4_ctl.h"
#include "engine/switch_pvt.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: innet p4 run [--target user|xdp] [--ports N] [-v] PROG.json [SCRIPT]\n"
		"       innet p4 build [-v] PROG.json\n"
		"       innet p4 check PROG.json\n"
		"       innet p4 resources [--json] PROG.json\n"
		"\n"
		"P4 programs compiled by p4c-bm2-ss (BMv2 JSON, v1model) on innet (docs/p4.md).\n"
		"\n"
		"run    an offline switch on N raw ports (default 16; BMv2 port = port index),\n"
		"       no network. SCRIPT (default: stdin), one command a line:\n"
		"         packet PORT HEX   inject a frame; it runs to completion\n"
		"         wait              let anything pending finish\n"
		"         # comment         (and blank lines) ignored\n"
		"         COMMAND ...       a simple_switch_CLI command (table_add, ...)\n"
		"       prints 'out PORT HEX' per frame sent, in order, and each command's\n"
		"       output with '> ' before every line. --target xdp runs the eBPF\n"
		"       program (root). -v: the build's cost on stderr.\n"
		"build  build the data path into the cache ($INNET_P4_CACHE, ~/.cache/innet/p4)\n"
		"check  load the JSON: say what innet does not support, and where\n"
		"resources  would it fit a Tofino1, Tofino2 (stages from the tables' dependency\n"
		"       chain, SRAM, TCAM, stateful ALUs) or Trio: the resource model\n"
		"       (docs/resources.md); the eBPF column needs a running XDP switch\n"
		"       (innet ctl resources)\n"
		"\n"
		"exit status: 0 ok (a refused CLI command prints BMv2's message), 1 the program\n"
		"was refused or failed to load, 2 a bad script line or usage\n");
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* HEX (even length, no separators) into buf; the length or -1. */
static long parse_hex(const char *s, uint8_t *buf, size_t cap)
{
	size_t n = strlen(s);
	if (n == 0 || n % 2 != 0 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	return (long)(n / 2);
}

static void print_out(const struct innet_inject_out *o)
{
	printf("out %u ", o->port);
	for (uint32_t i = 0; i < o->len; i++)
		printf("%02x", o->data[i]);
	printf("\n");
}

static int run_script(struct innet_switch *sw, FILE *f, const char *name, uint32_t n_ports)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned ln = 0;
	int status = 0;
	struct innet_inject_result *res = malloc(sizeof(*res));
	uint8_t *frame = malloc(INNET_PKT_MAX);
	if (res == NULL || frame == NULL) {
		free(res);
		free(frame);
		fprintf(stderr, "innet p4 run: out of memory\n");
		return 1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		ln++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if (!strncmp(p, "packet", 6) && (p[6] == ' ' || p[6] == '\t' || p[6] == '\0')) {
			/* the words after "packet": PORT and HEX, nothing more */
			char *w[3] = { NULL, NULL, NULL };
			int k = 0;
			for (char *q = p + 6; *q != '\0' && k < 3;) {
				while (*q == ' ' || *q == '\t')
					*q++ = '\0';
				if (*q == '\0')
					break;
				w[k++] = q;
				while (*q != '\0' && *q != ' ' && *q != '\t')
					q++;
			}
			const char *port_s = w[0] ? w[0] : "", *hex_s = w[1] ? w[1] : "";
			char *end = NULL;
			unsigned long port = k >= 1 ? strtoul(port_s, &end, 0) : 0;
			if (k != 2 || end == port_s || *end != '\0') {
				fprintf(stderr, "innet p4 run: %s, line %u: expected 'packet PORT HEX'\n", name, ln);
				status = 2;
				break;
			}
			if (port >= n_ports) {
				fprintf(stderr, "innet p4 run: %s, line %u: port %lu: the switch has ports 0..%u "
					"(--ports)\n", name, ln, port, n_ports - 1);
				status = 2;
				break;
			}
			long n = parse_hex(hex_s, frame, INNET_PKT_MAX);
			if (n < 0) {
				fprintf(stderr, "innet p4 run: %s, line %u: bad frame: an even number of hex "
					"digits, at most %u bytes\n", name, ln, INNET_PKT_MAX);
				status = 2;
				break;
			}
			memset(res, 0, offsetof(struct innet_inject_result, out));
			int rc = innet_switch_inject(sw, (uint16_t)port, 0, NULL, frame, (uint32_t)n, res);
			if (rc != 0) {
				fprintf(stderr, "innet p4 run: %s, line %u: inject: %s\n", name, ln, strerror(-rc));
				status = 1;
				break;
			}
			for (uint32_t i = 0; i < res->n_out; i++)
				print_out(&res->out[i]);
			if (res->n_out_lost)
				fprintf(stderr, "innet p4 run: %s, line %u: %u more frames sent than shown (at most "
					"%u per packet)\n", name, ln, res->n_out_lost, INNET_INJECT_MAX_OUT);
			fflush(stdout);
			continue;
		}
		if (!strcmp(p, "wait"))
			continue;   /* every packet ran to completion already */
		/* a simple_switch_CLI command, as innet ctl sends it */
		char *resp = innet_control_request(sw, p, strlen(p));
		json_error_t je;
		json_t *r = resp ? json_loads(resp, 0, &je) : NULL;
		free(resp);
		if (r == NULL) {
			fprintf(stderr, "innet p4 run: %s, line %u: no answer (out of memory?)\n", name, ln);
			status = 1;
			break;
		}
		if (!json_is_true(json_object_get(r, "ok"))) {
			json_t *e = json_object_get(r, "error");
			const char *es = json_is_string(e) ? json_string_value(e) : "";
			if (!strncmp(es, "unknown command '", 17) ||
			    !strncmp(es, "unknown simple_switch_CLI command '", 35)) {
				/* what simple_switch_CLI says of a word it does not
				 * know, going on with the next line */
				printf("> *** Unknown syntax: %s\n", p);
				json_decref(r);
				continue;
			}
			fprintf(stderr, "innet p4 run: %s, line %u: %s\n", name, ln,
				json_is_string(e) ? json_string_value(e) : "the command failed");
			json_decref(r);
			status = 2;
			break;
		}
		const char *text = json_string_value(json_object_get(r, "text"));
		if (text == NULL) {
			/* an innet ctl command (stats, info, ...): its JSON */
			char *s = json_dumps(r, JSON_COMPACT);
			printf("> %s\n", s ? s : "");
			free(s);
		}
		for (const char *q = text; q != NULL && *q;) {
			const char *nl = strchr(q, '\n');
			size_t l = nl ? (size_t)(nl - q) : strlen(q);
			printf("> %.*s\n", (int)l, q);
			q = nl ? nl + 1 : q + l;
		}
		/* (a command BMv2 refuses prints its message, as BMv2's CLI does, and
		 * the script goes on: not a bad script line) */
		json_decref(r);
		fflush(stdout);
	}
	free(line);
	free(res);
	free(frame);
	return status;
}

static int p4_run(int argc, char **argv)
{
	enum innet_target target = INNET_TARGET_UDP;
	unsigned long n_ports = 16;
	bool verbose = false;
	int i = 0;
	for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
		if (!strcmp(argv[i], "--target") && i + 1 < argc) {
			const char *t = argv[++i];
			if (!strcmp(t, "user") || !strcmp(t, "udp"))
				target = INNET_TARGET_UDP;
			else if (!strcmp(t, "xdp"))
				target = INNET_TARGET_XDP;
			else {
				fprintf(stderr, "innet p4 run: --target is user or xdp, not '%s'\n", t);
				return 2;
			}
		} else if (!strcmp(argv[i], "--ports") && i + 1 < argc) {
			char *end;
			n_ports = strtoul(argv[++i], &end, 10);
			if (*end != '\0' || n_ports < 1 || n_ports > INNET_MAX_PORTS) {
				fprintf(stderr, "innet p4 run: --ports is 1..%u\n", INNET_MAX_PORTS);
				return 2;
			}
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			verbose = true;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "innet p4 run: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (i >= argc || argc - i > 2) {
		usage(stderr);
		return 2;
	}
	const char *json = argv[i], *script = i + 1 < argc ? argv[i + 1] : NULL;
	if (target == INNET_TARGET_XDP && geteuid() != 0) {
		fprintf(stderr, "innet p4 run: --target xdp loads an eBPF program and runs it with "
				"BPF_PROG_TEST_RUN: it needs root\n");
		return 1;
	}
	char abs[PATH_MAX];
	if (realpath(json, abs) == NULL) {
		fprintf(stderr, "innet p4 run: %s: %s\n", json, strerror(errno));
		return 1;
	}
	struct innet_switch_conf *conf = calloc(1, sizeof(*conf));
	if (conf == NULL)
		return 1;
	snprintf(conf->name, sizeof(conf->name), "p4run");
	conf->target = target;
	conf->xdp_no_attach = true;
	conf->no_sockets = true;
	conf->n_workers = 1;
	conf->n_ports = (uint32_t)n_ports;
	for (uint32_t p = 0; p < n_ports; p++) {
		snprintf(conf->ports[p].name, sizeof(conf->ports[p].name), "p%u", p);
		snprintf(conf->ports[p].iface, sizeof(conf->ports[p].iface), "p4run%u", p);
	}
	struct innet_prog_conf *pc = &conf->progs[0];
	snprintf(pc->name, sizeof(pc->name), "p4");
	pc->program = innet_program_find("p4");
	pc->raw = true;
	json_t *args = json_pack("{s:s}", "json", abs);
	pc->args_json = args ? json_dumps(args, JSON_COMPACT) : NULL;
	json_decref(args);
	conf->n_progs = 1;
	char err[2048] = "";
	struct innet_switch *sw = pc->program ? innet_switch_create(conf, err, sizeof(err)) : NULL;
	free(pc->args_json);
	free(conf);
	if (sw == NULL) {
		fprintf(stderr, "innet p4 run: %s\n", err[0] ? err : "the p4 program is not in this innet");
		return 1;
	}
	if (verbose) {
		struct innet_cp *cp = innet_switch_prog(sw, "p4");
		const struct p4_inst *in = cp ? cp->priv : NULL;
		if (in != NULL)
			fprintf(stderr, "innet p4 run: data path %.16s (%s): generate %.3f s, cc %.3f s, "
				"clang -target bpf %.3f s%s%s\n", in->built.key,
				in->built.cached ? "from the cache" : "built", in->built.gen_s, in->built.cc_s,
				in->built.bpf_s, in->built.bpf_path[0] ? "" : "; no eBPF object: ",
				in->built.bpf_path[0] ? "" : in->built.bpf_error);
	}
	FILE *f = script ? fopen(script, "r") : stdin;
	if (f == NULL) {
		fprintf(stderr, "innet p4 run: %s: %s\n", script, strerror(errno));
		innet_switch_destroy(sw);
		return 1;
	}
	int rc = run_script(sw, f, script ? script : "stdin", (uint32_t)n_ports);
	if (f != stdin)
		fclose(f);
	innet_switch_destroy(sw);
	return rc;
}

static int read_json(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "innet p4: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	while (b != NULL) {
		n += fread(b + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *nb = realloc(b, cap * 2);
		if (nb == NULL) {
			free(b);
			b = NULL;
		}
		b = nb;
		cap *= 2;
	}
	fclose(f);
	if (b == NULL) {
		fprintf(stderr, "innet p4: %s: out of memory\n", path);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

static int p4_build_cmd(int argc, char **argv, int mode)
{
	bool verbose = false, json_out = false;
	int i = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))
			verbose = true;
		else if (mode == 2 && (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--json")))
			json_out = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "innet p4: unknown option '%s'\n", argv[i]);
			return 2;
		}
	}
	if (argc - i != 1) {
		usage(stderr);
		return 2;
	}
	char *text;
	size_t len;
	if (read_json(argv[i], &text, &len) != 0)
		return 1;
	char err[2048] = "";
	struct p4_prog *p = NULL;
	struct p4_layout lay;
	int rc = p4_load(text, len, &p, err, sizeof(err));
	if (rc == 0)
		rc = p4_layout(p, &lay, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "innet p4: %s: %s\n", argv[i], err);
		free(text);
		p4_prog_free(p);
		return 1;
	}
	if (mode == 2) {
		struct innet_res_usage *u = calloc(1, sizeof(*u));
		int r = u != NULL ? p4_resources(p, u) : -ENOMEM;
		if (r == 0 && json_out) {
			json_t *rep = innet_res_report_json(u);
			char *txt = rep ? json_dumps(rep, JSON_INDENT(2)) : NULL;
			if (txt != NULL)
				printf("%s\n", txt);
			else
				r = -ENOMEM;
			free(txt);
			json_decref(rep);
		} else if (r == 0) {
			r = innet_res_print(stdout, u);
		}
		if (r != 0)
			fprintf(stderr, "innet p4: %s: resources: %s\n", argv[i], strerror(-r));
		free(u);
		free(text);
		p4_prog_free(p);
		return r != 0;
	}
	if (mode == 1) {
		printf("%s: %u headers, %u parser states, %u tables, %u actions, %u registers, %u counters, "
		       "%u meters: innet runs it\n", argv[i], p->n_headers, p->n_states, p->n_tables,
		       p->n_actions, p->n_registers, p->n_counters, p->n_meters);
		free(text);
		p4_prog_free(p);
		return 0;
	}
	struct p4_built b;
	rc = p4_build(text, len, p, &lay, true, &b, err, sizeof(err));
	free(text);
	p4_prog_free(p);
	if (rc != 0) {
		fprintf(stderr, "innet p4: %s: %s\n", argv[i], err);
		return 1;
	}
	printf("key %s\nuser-space %s\nxdp %s\n", b.key, b.so_path, b.bpf_path[0] ? b.bpf_path : "-");
	if (b.bpf_path[0] == '\0')
		printf("xdp-refused %s\n", b.bpf_error);
	if (verbose || !b.cached)
		printf("cached %s gen_s %.3f cc_s %.3f bpf_s %.3f\n", b.cached ? "yes" : "no", b.gen_s, b.cc_s,
		       b.bpf_s);
	return 0;
}

int cmd_p4(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run"))
		return p4_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "build"))
		return p4_build_cmd(argc - 2, argv + 2, 0);
	if (!strcmp(argv[1], "check"))
		return p4_build_cmd(argc - 2, argv + 2, 1);
	if (!strcmp(argv[1], "resources"))
		return p4_build_cmd(argc - 2, argv + 2, 2);
	fprintf(stderr, "innet p4: unknown command '%s' (run, build, check, resources)\n", argv[1]);
	return 2;
}
