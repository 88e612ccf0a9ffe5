/*
 * ctl_request.c — the control socket's request language: one line of words
 * in, one line of JSON out (docs/protocol.md, "Control socket protocol"):
 * the words, the command table and help, the helpers every handler shares
 * (ctl_pvt.h: errors, checked arguments, JSON), and the commands about the
 * switch itself: ping, info, programs, prog (a program's own commands). The
 * other handlers are ctl_state.c (reg, table, group: a program's state) and
 * ctl_monitor.c (stats, metrics, capture, resources: watching the switch).
 * innet_control_request() runs one request; control.c serves the socket.
 *
 * Robustness: numbers are checked (decimal or 0x-hex, range, trailing
 * garbage), hex strings are checked (even length, digits, size), strings
 * echoed into messages are reduced to printable ASCII (JSON must be UTF-8),
 * answers are bounded (CTL_RESP_BYTES).
 *
 * Threads: runs on the control thread; the innet_cp_* calls it makes are
 * safe against the data plane.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "innet/parse.h"
#include "control/control.h"
#include "control/ctl_pvt.h"

#define CTL_MAX_WORDS     80u         /* group set: 4 words + 64 members, with room */

/* ------------------------------------------------------------------------ */
/* JSON helpers                                                               */

/* Copy s into dst (dstlen > 0) with every byte that is not printable ASCII
 * replaced by '?', truncated to max characters (then "..."). */
void ctl_sanitize(char *dst, size_t dstlen, const char *s, size_t max)
{
	size_t i = 0, j = 0;
	for (; s[i] != '\0' && j + 1 < dstlen && i < max; i++)
		dst[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i] != '\0' && j + 4 < dstlen) {
		memcpy(dst + j, "...", 3);
		j += 3;
	}
	dst[j] = '\0';
}

/* A JSON string for s (printable ASCII replaces anything jansson refuses). */
json_t *ctl_jstr(const char *s)
{
	json_t *j = json_string(s);
	if (j == NULL && s != NULL) {
		char buf[256];
		ctl_sanitize(buf, sizeof(buf), s, 200);
		j = json_string(buf);
	}
	return j;
}

/* A JSON number for v; a decimal string when it exceeds JSON's int64 range. */
json_t *ctl_ju64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return json_string(buf);
}

void ctl_jset(json_t *o, const char *key, json_t *v)
{
	json_object_set_new(o, key, v); /* a NULL v (out of memory) is refused, no leak */
}

void ctl_jpush(json_t *a, json_t *v)
{
	json_array_append_new(a, v);
}

json_t *ctl_jip(uint32_t ip_host)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = htonl(ip_host) };
	inet_ntop(AF_INET, &a, buf, sizeof(buf));
	return json_string(buf);
}

static const char *model_name(enum innet_model m)
{
	return m == INNET_MODEL_TRIO ? "trio" : "pisa";
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                   */

/* Record an error message (printf-style); returns -EINVAL for `return ctl_fail(...)`. */
int ctl_fail(struct ctl_req *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

struct shown ctl_show(const char *word)
{
	struct shown w;
	ctl_sanitize(w.s, sizeof(w.s), word, 60);
	return w;
}

/* innet_parse_u64 with an error message naming the argument `what`. */
int ctl_req_u64(struct ctl_req *r, const char *what, const char *s, uint64_t max, uint64_t *out)
{
	int rc = innet_parse_u64(s, 0, max, out);
	if (rc == -EINVAL)
		return ctl_fail(r, "bad %s '%s': expected a decimal or 0x-hex number", what, ctl_show(s).s);
	if (rc == -ERANGE)
		return ctl_fail(r, "bad %s '%s': larger than %llu", what, ctl_show(s).s, (unsigned long long)max);
	return 0;
}

/* The program instance called name, or NULL with a message listing them. */
struct innet_cp *ctl_req_prog(struct ctl_req *r, const char *name)
{
	struct innet_cp *cp = innet_switch_prog(r->sw, name);
	if (cp != NULL)
		return cp;
	char list[256] = "";
	size_t off = 0;
	for (uint32_t i = 0; i < innet_switch_conf(r->sw)->n_progs && off < sizeof(list); i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
				 innet_cp_name(innet_switch_prog_at(r->sw, i)));
		if (w < 0)
			break;
		off += (size_t)w;
	}
	ctl_fail(r, "unknown program '%s' (programs: %s)", ctl_show(name).s, list);
	return NULL;
}

/* A switch port index into *port: 0, or -EINVAL with a message. */
int ctl_req_port(struct ctl_req *r, const char *s, uint32_t *port)
{
	uint64_t v;
	if (ctl_req_u64(r, "PORT", s, UINT32_MAX, &v) != 0)
		return -EINVAL;
	if (v >= innet_switch_conf(r->sw)->n_ports)
		return ctl_fail(r, "port %llu out of range: the switch has %u ports (0..%u)",
				(unsigned long long)v, innet_switch_conf(r->sw)->n_ports, innet_switch_conf(r->sw)->n_ports - 1);
	*port = (uint32_t)v;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Commands. Each handler gets the words after the command words, fills      */
/* r->resp and returns 0, or returns -errno with r->err set.                 */

static int cmd_ping(struct ctl_req *r, int argc, char **argv)
{
	ctl_jset(r->resp, "switch", ctl_jstr(innet_switch_conf(r->sw)->name));
	ctl_jset(r->resp, "node", json_integer(innet_switch_conf(r->sw)->node_id));
	return 0;
}

static json_t *udp_json(const struct innet_prog_conf *pc)
{
	json_t *a = json_array();
	for (uint32_t u = 0; u < pc->n_udp; u++)
		ctl_jpush(a, json_integer(pc->udp[u]));
	return a;
}

static int cmd_info(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	const struct innet_switch_conf *c = innet_switch_conf(sw);
	ctl_jset(r->resp, "switch", ctl_jstr(c->name));
	ctl_jset(r->resp, "node", json_integer(c->node_id));
	ctl_jset(r->resp, "workers", json_integer(c->n_workers));
	ctl_jset(r->resp, "ctl", ctl_jstr(c->ctl_path));
	ctl_jset(r->resp, "metrics", c->metrics_addr[0] ? ctl_jstr(c->metrics_addr) : json_null());
	json_t *ports = json_array();
	for (uint32_t i = 0; i < c->n_ports; i++) {
		const struct innet_port_conf *pc = &c->ports[i];
		json_t *p = json_object();
		ctl_jset(p, "index", json_integer(i));
		ctl_jset(p, "name", ctl_jstr(pc->name));
		ctl_jset(p, "address", pc->iface[0] ? json_null() : ctl_jip(pc->ip));
		ctl_jset(p, "iface", pc->iface[0] ? ctl_jstr(pc->iface) : json_null()); /* a raw port */
		ctl_jset(p, "peer", pc->peer_ip ? ctl_jip(pc->peer_ip) : json_null());
		ctl_jset(p, "peer_udp", json_integer(pc->peer_udp));
		ctl_jset(p, "link", innet_link_json(&pc->link));
		ctl_jset(p, "capturing",
			 json_boolean(atomic_load_explicit(innet_switch_capture_slot(sw, i),
							   memory_order_relaxed) != NULL));
		ctl_jpush(ports, p);
	}
	ctl_jset(r->resp, "ports", ports);
	json_t *progs = json_array();
	for (uint32_t i = 0; i < c->n_progs; i++) {
		const struct innet_cp *cp = innet_switch_prog_at(sw, i);
		const struct innet_prog_conf *pc = &c->progs[i];
		json_t *p = json_object();
		ctl_jset(p, "name", ctl_jstr(innet_cp_name(cp)));
		ctl_jset(p, "program", ctl_jstr(innet_cp_program(cp)->name));
		ctl_jset(p, "model", json_string(model_name(innet_cp_program(cp)->model)));
		ctl_jset(p, "udp", udp_json(pc));
		ctl_jset(p, "raw", json_boolean(pc->raw));
		ctl_jset(p, "serial", json_boolean(innet_cp_program(cp)->flags & INNET_PROG_SERIAL));
		ctl_jpush(progs, p);
	}
	ctl_jset(r->resp, "programs", progs);
	return 0;
}

static int cmd_programs(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	json_t *progs = json_array();
	for (uint32_t i = 0; i < innet_switch_conf(sw)->n_progs; i++) {
		struct innet_cp *cp = innet_switch_prog_at(sw, i);
		const struct innet_program *prog = innet_cp_program(cp);
		json_t *p = json_object();
		ctl_jset(p, "name", ctl_jstr(innet_cp_name(cp)));
		ctl_jset(p, "program", ctl_jstr(prog->name));
		ctl_jset(p, "summary", ctl_jstr(prog->summary ? prog->summary : ""));
		ctl_jset(p, "model", json_string(model_name(prog->model)));
		ctl_jset(p, "udp", udp_json(&innet_switch_conf(sw)->progs[i]));
		ctl_jset(p, "serial", json_boolean(prog->flags & INNET_PROG_SERIAL));
		json_t *regs = json_array();
		for (uint32_t k = 0; k < innet_cp_n_regs(cp); k++) {
			json_t *g = json_object();
			ctl_jset(g, "name", ctl_jstr(innet_cp_reg(cp, k)->name));
			ctl_jset(g, "width", json_integer(innet_cp_reg(cp, k)->width));
			ctl_jset(g, "count", json_integer(innet_cp_reg(cp, k)->count));
			ctl_jpush(regs, g);
		}
		ctl_jset(p, "registers", regs);
		json_t *tables = json_array();
		for (uint32_t k = 0; k < innet_cp_n_tables(cp); k++) {
			struct innet_table_info ti;
			if (innet_cp_table_info(cp, k, &ti) != 0)
				continue;
			json_t *t = json_object();
			ctl_jset(t, "name", ctl_jstr(ti.name));
			ctl_jset(t, "key_size", json_integer(ti.key_size));
			ctl_jset(t, "value_size", json_integer(ti.value_size));
			ctl_jset(t, "capacity", json_integer(ti.capacity));
			ctl_jset(t, "entries", json_integer(ti.entries));
			ctl_jset(t, "insert_full", ctl_ju64(ti.insert_full));
			ctl_jset(t, "busy", ctl_ju64(ti.busy));
			ctl_jpush(tables, t);
		}
		ctl_jset(p, "tables", tables);
		ctl_jset(p, "groups", json_integer(innet_cp_n_groups(cp)));
		ctl_jset(p, "timers", json_integer(innet_cp_n_timers(cp)));
		json_t *reasons = json_array();
		for (uint32_t k = 0; k < prog->n_drop_reasons && k < INNET_MAX_DROP_REASONS; k++)
			ctl_jpush(reasons, ctl_jstr(prog->drop_reasons[k] ? prog->drop_reasons[k] : "?"));
		ctl_jset(p, "drop_reasons", reasons);
		ctl_jpush(progs, p);
	}
	ctl_jset(r->resp, "programs", progs);
	return 0;
}

/* prog PROG WORD... : a program's own control command (innet_program.on_ctl). */
static int cmd_prog(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	if (innet_cp_program(cp)->on_ctl == NULL)
		return ctl_fail(r, "program '%s' (%s) has no commands of its own", innet_cp_name(cp),
				innet_cp_program(cp)->name);
	r->err[0] = '\0';
	/* The control thread runs on_cpu and on_ctl: they never run at once. */
	int rc = innet_cp_program(cp)->on_ctl(cp, innet_cp_priv(cp), argc - 1, argv + 1, r->resp, r->err,
				     sizeof(r->err));
	if (rc != 0) {
		if (r->err[0] == '\0')
			snprintf(r->err, sizeof(r->err), "program '%s': command failed: %s", innet_cp_name(cp),
				 strerror(rc < 0 ? -rc : EINVAL));
		return rc < 0 ? rc : -EINVAL;
	}
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	return 0;
}

static int cmd_help(struct ctl_req *r, int argc, char **argv);

struct ctl_cmd {
	const char *word1;       /* command word */
	const char *word2;       /* sub-command word, or NULL */
	int min_args, max_args;  /* words after the command words */
	const char *usage;
	const char *help;
	int (*fn)(struct ctl_req *r, int argc, char **argv);
};

static const struct ctl_cmd ctl_cmds[] = {
	{ "ping", NULL, 0, 0, "ping", "check the switch answers", cmd_ping },
	{ "info", NULL, 0, 0, "info", "switch, ports (addresses, peers, link emulation), programs",
	  cmd_info },
	{ "programs", NULL, 0, 0, "programs",
	  "program instances with their registers, tables, groups, timers, drop reasons",
	  cmd_programs },
	{ "reg", "read", 3, 4, "reg read PROG REG IDX [COUNT]",
	  "read COUNT (default 1) elements; blob registers as hex strings", ctl_cmd_reg_read },
	{ "reg", "write", 4, 4, "reg write PROG REG IDX VALUE",
	  "write one element (blob registers: a hex string, zero-padded)", ctl_cmd_reg_write },
	{ "table", "add", 4, 4, "table add PROG TABLE KEYHEX VALHEX", "insert or replace an entry",
	  ctl_cmd_table_add },
	{ "table", "del", 3, 3, "table del PROG TABLE KEYHEX", "delete an entry", ctl_cmd_table_del },
	{ "table", "get", 3, 3, "table get PROG TABLE KEYHEX", "look an entry up", ctl_cmd_table_get },
	{ "table", "list", 2, 3, "table list PROG TABLE [MAX]",
	  "list up to MAX entries (default 256, at most 65536)", ctl_cmd_table_list },
	{ "group", "set", 2, 2 + (int)INNET_MAX_GROUP_MEMBERS, "group set PROG GROUP MEMBER...",
	  "replace a multicast group; MEMBER is PORT or PORT@IP:UDP", ctl_cmd_group_set },
	{ "group", "get", 2, 2, "group get PROG GROUP", "a multicast group's members",
	  ctl_cmd_group_get },
	{ "stats", "reset", 0, 0, "stats reset", "zero every counter", ctl_cmd_stats_reset },
	{ "stats", NULL, 0, 0, "stats", "port and program counters, drops by reason", ctl_cmd_stats },
	{ "metrics", NULL, 0, 0, "metrics",
	  "the stats in the Prometheus text format (\"text\"), as served over HTTP", ctl_cmd_metrics },
	{ "capture", "start", 2, 3, "capture start PORT PATH [MAXPKTS]",
	  "write the port's traffic to a pcap file (stop after MAXPKTS)", ctl_cmd_capture_start },
	{ "capture", "stop", 1, 1, "capture stop PORT", "stop a capture and close its file",
	  ctl_cmd_capture_stop },
	{ "prog", NULL, 1, (int)CTL_MAX_WORDS - 2, "prog PROG WORD...",
	  "a program's own command (e.g. 'prog lb help')", cmd_prog },
	{ "resources", NULL, 0, 1, "resources [PROG]",
	  "would the program fit a Tofino1, Tofino2 or Trio (resource model)", ctl_cmd_resources },
	{ "help", NULL, 0, 0, "help", "this list", cmd_help },
};

#define N_CTL_CMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static int cmd_help(struct ctl_req *r, int argc, char **argv)
{
	json_t *a = json_array();
	for (size_t i = 0; i < N_CTL_CMDS; i++) {
		json_t *o = json_object();
		ctl_jset(o, "command", json_string(ctl_cmds[i].usage));
		ctl_jset(o, "help", json_string(ctl_cmds[i].help));
		ctl_jpush(a, o);
	}
	ctl_jset(r->resp, "commands", a);
	return 0;
}

/* Split line (NUL-terminated, modified) into at most max words. Returns the
 * count, or -E2BIG if there are more. */
static int split_words(char *line, char **words, int max)
{
	int n = 0;
	char *p = line;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0')
			return n;
		if (n == max)
			return -E2BIG;
		words[n++] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t')
			p++;
		if (*p != '\0')
			*p++ = '\0';
	}
}

/* Run one request line (len bytes, not NUL-terminated, no '\n'); returns the
 * response as a new JSON object. */
json_t *innet_control_run(struct innet_switch *sw, char *line, size_t len)
{
	struct ctl_req r = { .sw = sw };
	char *words[CTL_MAX_WORDS];
	int n = -1;
	const struct ctl_cmd *cmd = NULL;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (memchr(line, '\0', len) != NULL) {
		ctl_fail(&r, "request contains a NUL byte");
		goto err;
	}
	line[len] = '\0';
	n = split_words(line, words, (int)CTL_MAX_WORDS);
	if (n < 0) {
		ctl_fail(&r, "too many words in the request (at most %u)", CTL_MAX_WORDS);
		goto err;
	}
	if (n == 0) {
		ctl_fail(&r, "empty request (try 'help')");
		goto err;
	}
	bool known_word = false;
	for (size_t i = 0; i < N_CTL_CMDS && cmd == NULL; i++) {
		const struct ctl_cmd *c = &ctl_cmds[i];
		if (strcmp(c->word1, words[0]) != 0)
			continue;
		known_word = true;
		if (c->word2 == NULL || (n > 1 && !strcmp(c->word2, words[1])))
			cmd = c;
	}
	if (cmd == NULL && !known_word) {
		/* a P4 switch takes simple_switch_CLI's commands (table_add ...):
		 * the words go to its "p4" instance (prog NAME ... if several) */
		struct innet_cp *p4 = NULL;
		uint32_t n_p4 = 0;
		for (uint32_t i = 0; i < innet_switch_conf(sw)->n_progs; i++) {
			struct innet_cp *c = innet_switch_prog_at(sw, i);
			if (!strcmp(innet_cp_program(c)->name, "p4") && innet_cp_program(c)->on_ctl) {
				p4 = c;
				n_p4++;
			}
		}
		if (n_p4 == 1) {
			r.resp = json_object();
			if (r.resp == NULL)
				return NULL;
			ctl_jset(r.resp, "ok", json_true());
			r.err[0] = '\0';
			if (innet_cp_program(p4)->on_ctl(p4, innet_cp_priv(p4), n, words, r.resp, r.err,
							 sizeof(r.err)) == 0)
				return r.resp;
			json_decref(r.resp);
			if (r.err[0] == '\0')
				ctl_fail(&r, "program '%s': command failed", innet_cp_name(p4));
			goto err;
		}
		ctl_fail(&r, "unknown command '%s' (try 'help'%s)", ctl_show(words[0]).s,
			 n_p4 > 1 ? "; a P4 command with several P4 programs: prog NAME COMMAND" : "");
		goto err;
	}
	if (cmd == NULL) {
		char subs[128] = "";
		for (size_t i = 0; i < N_CTL_CMDS; i++)
			if (!strcmp(ctl_cmds[i].word1, words[0]) && ctl_cmds[i].word2 != NULL) {
				size_t off = strlen(subs);
				snprintf(subs + off, sizeof(subs) - off, "%s%s", off ? ", " : "",
					 ctl_cmds[i].word2);
			}
		if (n > 1)
			ctl_fail(&r, "unknown '%s' sub-command '%s' (expected %s)", words[0], ctl_show(words[1]).s,
				 subs);
		else
			ctl_fail(&r, "'%s' needs a sub-command (%s)", words[0], subs);
		goto err;
	}
	int skip = cmd->word2 ? 2 : 1;
	int argc = n - skip;
	if (argc < cmd->min_args || argc > cmd->max_args) {
		/* every form of the command, e.g. "usage: stats | stats reset" */
		char usage[256] = "";
		for (size_t i = 0; i < N_CTL_CMDS; i++)
			if (!strcmp(ctl_cmds[i].word1, cmd->word1) &&
			    (cmd->word2 == NULL || ctl_cmds[i].word2 == NULL ||
			     !strcmp(ctl_cmds[i].word2, cmd->word2))) {
				size_t off = strlen(usage);
				snprintf(usage + off, sizeof(usage) - off, "%s%s", off ? " | " : "",
					 ctl_cmds[i].usage);
			}
		ctl_fail(&r, "usage: %s", usage);
		goto err;
	}
	r.resp = json_object();
	if (r.resp == NULL)
		return NULL;
	ctl_jset(r.resp, "ok", json_true());
	if (cmd->fn(&r, argc, words + skip) == 0)
		return r.resp;
	json_decref(r.resp);
err:;
	json_t *e = json_object();
	char msg[CTL_ERR_MAX];
	ctl_sanitize(msg, sizeof(msg), r.err[0] ? r.err : "failed", CTL_ERR_MAX);
	ctl_jset(e, "ok", json_false());
	ctl_jset(e, "error", json_string(msg));
	return e;
}

char *innet_control_request(struct innet_switch *sw, const char *line, size_t len)
{
	char *buf = malloc(len + 1);
	if (buf == NULL)
		return NULL;
	memcpy(buf, line, len);
	json_t *resp = innet_control_run(sw, buf, len);
	char *text = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
	json_decref(resp);
	free(buf);
	return text;
}

