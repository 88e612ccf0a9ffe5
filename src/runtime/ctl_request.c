/*
 * ctl_request.c — the control socket's request language: one line of words
 * in, one line of JSON out (docs/protocol.md, "Control socket protocol"),
 * and every command's handler: info, programs, reg, table, group, stats,
 * metrics, capture, resources, prog (a program's own commands).
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

#include "innet/metrics.h"
#include "innet/parse.h"
#include "innet/resources.h"
#include "runtime/switch_pvt.h"
#include "xdp/xdp.h"

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
/* ------------------------------------------------------------------------ */
/* JSON helpers                                                               */

/* Copy s into dst (dstlen > 0) with every byte that is not printable ASCII
 * replaced by '?', truncated to max characters (then "..."). */
static void sanitize(char *dst, size_t dstlen, const char *s, size_t max)
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
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);
	if (j == NULL && s != NULL) {
		char buf[256];
		sanitize(buf, sizeof(buf), s, 200);
		j = json_string(buf);
	}
	return j;
}

/* A JSON number for v; a decimal string when it exceeds JSON's int64 range. */
static json_t *ju64(uint64_t v)
{
	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	char buf[24];
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return json_string(buf);
}

static void jset(json_t *o, const char *key, json_t *v)
{
	json_object_set_new(o, key, v); /* a NULL v (out of memory) is refused, no leak */
}

static void jpush(json_t *a, json_t *v)
{
	json_array_append_new(a, v);
}

static json_t *jip(uint32_t ip_host)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = htonl(ip_host) };
	inet_ntop(AF_INET, &a, buf, sizeof(buf));
	return json_string(buf);
}

static const char hexdig[] = "0123456789abcdef";

/* n bytes as a lower-case hex JSON string. */
static json_t *jhex(const uint8_t *p, size_t n)
{
	char *s = malloc(2 * n + 1);
	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		s[2 * i] = hexdig[p[i] >> 4];
		s[2 * i + 1] = hexdig[p[i] & 15];
	}
	s[2 * n] = '\0';
	json_t *j = json_string(s);
	free(s);
	return j;
}

static const char *model_name(enum innet_model m)
{
	return m == INNET_MODEL_TRIO ? "trio" : "pisa";
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                   */

struct ctl_req {
	struct innet_switch *sw;
	json_t *resp;             /* the success response being built */
	char err[CTL_ERR_MAX];    /* the error message when a handler fails */
};

/* Record an error message (printf-style); returns -1 for `return fail(...)`. */
static int fail(struct ctl_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctl_req *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* A word from the request, made safe and short for an error message. */
struct shown {
	char s[72];
};

static struct shown show(const char *word)
{
	struct shown w;
	sanitize(w.s, sizeof(w.s), word, 60);
	return w;
}

/* innet_parse_u64 with an error message naming the argument `what`. */
static int req_u64(struct ctl_req *r, const char *what, const char *s, uint64_t max, uint64_t *out)
{
	int rc = innet_parse_u64(s, 0, max, out);
	if (rc == -EINVAL)
		return fail(r, "bad %s '%s': expected a decimal or 0x-hex number", what, show(s).s);
	if (rc == -ERANGE)
		return fail(r, "bad %s '%s': larger than %llu", what, show(s).s, (unsigned long long)max);
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Parse a hex string (optional 0x prefix, even number of digits) into at most
 * max bytes of dst; *n gets the byte count. Returns 0 or -1 with a message.
 */
static int req_hex(struct ctl_req *r, const char *what, const char *s, uint8_t *dst, size_t max,
		   size_t *n)
{
	const char *p = s;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	size_t len = strlen(p);
	if (len == 0 || len % 2 != 0)
		return fail(r, "bad %s '%s': expected an even number of hex digits", what, show(s).s);
	if (len / 2 > max)
		return fail(r, "bad %s: %zu bytes, at most %zu allowed", what, len / 2, max);
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return fail(r, "bad %s '%s': not a hex string", what, show(s).s);
		dst[i] = (uint8_t)(hi << 4 | lo);
	}
	*n = len / 2;
	return 0;
}

/* The program instance called name, or NULL with a message listing them. */
static struct innet_cp *req_prog(struct ctl_req *r, const char *name)
{
	struct innet_cp *cp = innet_switch_prog(r->sw, name);
	if (cp != NULL)
		return cp;
	char list[256] = "";
	size_t off = 0;
	for (uint32_t i = 0; i < r->sw->n_progs && off < sizeof(list); i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
				 r->sw->progs[i].name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	fail(r, "unknown program '%s' (programs: %s)", show(name).s, list);
	return NULL;
}

/* Register id of name in cp, or -1 with a message listing them. */
static int req_reg(struct ctl_req *r, struct innet_cp *cp, const char *name)
{
	int id = innet_cp_reg_find(cp, name);
	if (id >= 0)
		return id;
	char list[256] = "";
	size_t off = 0;
	for (uint32_t i = 0; i < cp->n_regs && off < sizeof(list); i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", cp->regs[i].name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return fail(r, "program '%s' has no register '%s' (registers: %s)", cp->name, show(name).s,
		    cp->n_regs ? list : "none");
}

/* Table id of name in cp, or -1 with a message listing them. */
static int req_table(struct ctl_req *r, struct innet_cp *cp, const char *name,
		     struct innet_table_info *info)
{
	int id = innet_cp_table_find(cp, name);
	if (id >= 0) {
		innet_cp_table_info(cp, (unsigned)id, info);
		return id;
	}
	char list[256] = "";
	size_t off = 0;
	for (uint32_t i = 0; i < cp->n_tables && off < sizeof(list); i++) {
		struct innet_table_info ti;
		innet_cp_table_info(cp, i, &ti);
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", ti.name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return fail(r, "program '%s' has no table '%s' (tables: %s)", cp->name, show(name).s,
		    cp->n_tables ? list : "none");
}

/* A switch port index, or -1 with a message. */
static int req_port(struct ctl_req *r, const char *s, uint32_t *port)
{
	uint64_t v;
	if (req_u64(r, "PORT", s, UINT32_MAX, &v) != 0)
		return -1;
	if (v >= r->sw->n_ports)
		return fail(r, "port %llu out of range: the switch has %u ports (0..%u)",
			    (unsigned long long)v, r->sw->n_ports, r->sw->n_ports - 1);
	*port = (uint32_t)v;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Commands. Each handler gets the words after the command words, fills      */
/* r->resp and returns 0, or returns -1 with r->err set.                      */

static int cmd_ping(struct ctl_req *r, int argc, char **argv)
{
	jset(r->resp, "switch", jstr(r->sw->conf.name));
	jset(r->resp, "node", json_integer(r->sw->conf.node_id));
	return 0;
}

static json_t *udp_json(const struct innet_cp *cp)
{
	json_t *a = json_array();
	for (uint32_t u = 0; u < cp->n_udp; u++)
		jpush(a, json_integer(cp->udp[u]));
	return a;
}

static int cmd_info(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	jset(r->resp, "switch", jstr(sw->conf.name));
	jset(r->resp, "node", json_integer(sw->conf.node_id));
	jset(r->resp, "workers", json_integer(sw->n_workers));
	jset(r->resp, "ctl", jstr(sw->conf.ctl_path));
	jset(r->resp, "metrics", sw->conf.metrics_addr[0] ? jstr(sw->conf.metrics_addr) : json_null());
	json_t *ports = json_array();
	for (uint32_t i = 0; i < sw->n_ports; i++) {
		const struct innet_port_conf *pc = &sw->ports[i].conf;
		json_t *p = json_object();
		jset(p, "index", json_integer(i));
		jset(p, "name", jstr(pc->name));
		jset(p, "address", pc->iface[0] ? json_null() : jip(pc->ip));
		jset(p, "iface", pc->iface[0] ? jstr(pc->iface) : json_null()); /* a raw port */
		jset(p, "peer", pc->peer_ip ? jip(pc->peer_ip) : json_null());
		jset(p, "peer_udp", json_integer(pc->peer_udp));
		jset(p, "link", innet_link_json(&pc->link));
		jset(p, "capturing",
		     json_boolean(atomic_load_explicit(&sw->ports[i].capture, memory_order_relaxed) != NULL));
		jpush(ports, p);
	}
	jset(r->resp, "ports", ports);
	json_t *progs = json_array();
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		const struct innet_cp *cp = &sw->progs[i];
		json_t *p = json_object();
		jset(p, "name", jstr(cp->name));
		jset(p, "program", jstr(cp->program->name));
		jset(p, "model", json_string(model_name(cp->program->model)));
		jset(p, "udp", udp_json(cp));
		jset(p, "raw", json_boolean(cp->raw));
		jset(p, "serial", json_boolean(cp->program->flags & INNET_PROG_SERIAL));
		jpush(progs, p);
	}
	jset(r->resp, "programs", progs);
	return 0;
}

static int cmd_programs(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	json_t *progs = json_array();
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		struct innet_cp *cp = &sw->progs[i];
		const struct innet_program *prog = cp->program;
		json_t *p = json_object();
		jset(p, "name", jstr(cp->name));
		jset(p, "program", jstr(prog->name));
		jset(p, "summary", jstr(prog->summary ? prog->summary : ""));
		jset(p, "model", json_string(model_name(prog->model)));
		jset(p, "udp", udp_json(cp));
		jset(p, "serial", json_boolean(prog->flags & INNET_PROG_SERIAL));
		json_t *regs = json_array();
		for (uint32_t k = 0; k < cp->n_regs; k++) {
			json_t *g = json_object();
			jset(g, "name", jstr(cp->regs[k].name));
			jset(g, "width", json_integer(cp->regs[k].width));
			jset(g, "count", json_integer(cp->regs[k].count));
			jpush(regs, g);
		}
		jset(p, "registers", regs);
		json_t *tables = json_array();
		for (uint32_t k = 0; k < cp->n_tables; k++) {
			struct innet_table_info ti;
			if (innet_cp_table_info(cp, k, &ti) != 0)
				continue;
			json_t *t = json_object();
			jset(t, "name", jstr(ti.name));
			jset(t, "key_size", json_integer(ti.key_size));
			jset(t, "value_size", json_integer(ti.value_size));
			jset(t, "capacity", json_integer(ti.capacity));
			jset(t, "entries", json_integer(ti.entries));
			jset(t, "insert_full", ju64(ti.insert_full));
			jpush(tables, t);
		}
		jset(p, "tables", tables);
		jset(p, "groups", json_integer(innet_cp_n_groups(cp)));
		jset(p, "timers", json_integer(innet_cp_n_timers(cp)));
		json_t *reasons = json_array();
		for (uint32_t k = 0; k < prog->n_drop_reasons && k < INNET_MAX_DROP_REASONS; k++)
			jpush(reasons, jstr(prog->drop_reasons[k] ? prog->drop_reasons[k] : "?"));
		jset(p, "drop_reasons", reasons);
		jpush(progs, p);
	}
	jset(r->resp, "programs", progs);
	return 0;
}

/* " with COUNT n" for an error message. */
static struct shown fmt_count(uint64_t n)
{
	struct shown w;
	snprintf(w.s, sizeof(w.s), " with COUNT %llu", (unsigned long long)n);
	return w;
}

/* reg read PROG REG IDX [COUNT] */
static int cmd_reg_read(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	int id = req_reg(r, cp, argv[1]);
	if (id < 0)
		return -1;
	const struct innet_reg *reg = innet_cp_reg(cp, (unsigned)id);
	uint64_t idx, count = 1;
	if (req_u64(r, "IDX", argv[2], UINT32_MAX, &idx) != 0)
		return -1;
	if (argc > 3) {
		if (req_u64(r, "COUNT", argv[3], CTL_REG_READ_MAX, &count) != 0)
			return -1;
		if (count == 0)
			return fail(r, "bad COUNT 0: read 1..%u elements", CTL_REG_READ_MAX);
	}
	if (idx >= reg->count || count > reg->count - idx)
		return fail(r, "index %llu%s out of range: register '%s' has %u elements (0..%u)",
			    (unsigned long long)idx,
			    count > 1 ? fmt_count(count).s : "", reg->name, reg->count, reg->count - 1);
	bool blob = !(reg->width == 1 || reg->width == 2 || reg->width == 4 || reg->width == 8);
	if (blob && reg->width > CTL_BLOB_MAX)
		return fail(r, "register '%s' has %u-byte elements: too wide to read here", reg->name,
			    reg->width);
	if (blob && count * reg->width > CTL_RESP_BYTES / 2)
		return fail(r, "%llu elements of %u bytes is too much for one response: read fewer",
			    (unsigned long long)count, reg->width);
	uint8_t *buf = blob ? malloc(reg->width) : NULL;
	if (blob && buf == NULL)
		return fail(r, "out of memory");
	json_t *vals = json_array();
	for (uint64_t i = idx; i < idx + count; i++) {
		int rc;
		if (blob) {
			rc = innet_cp_reg_read_bytes(cp, (unsigned)id, (uint32_t)i, buf, reg->width);
			if (rc == 0)
				jpush(vals, jhex(buf, reg->width));
		} else {
			uint64_t v = 0;
			rc = innet_cp_reg_read(cp, (unsigned)id, (uint32_t)i, &v);
			if (rc == 0)
				jpush(vals, ju64(v));
		}
		if (rc != 0) {
			free(buf);
			json_decref(vals);
			return fail(r, "reading %s[%llu]: %s", reg->name, (unsigned long long)i,
				    strerror(-rc));
		}
	}
	free(buf);
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "register", jstr(reg->name));
	jset(r->resp, "width", json_integer(reg->width));
	jset(r->resp, "index", json_integer((json_int_t)idx));
	jset(r->resp, "values", vals);
	return 0;
}

/* reg write PROG REG IDX VALUE */
static int cmd_reg_write(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	int id = req_reg(r, cp, argv[1]);
	if (id < 0)
		return -1;
	const struct innet_reg *reg = innet_cp_reg(cp, (unsigned)id);
	uint64_t idx;
	if (req_u64(r, "IDX", argv[2], UINT32_MAX, &idx) != 0)
		return -1;
	if (idx >= reg->count)
		return fail(r, "index %llu out of range: register '%s' has %u elements (0..%u)",
			    (unsigned long long)idx, reg->name, reg->count, reg->count - 1);
	int rc;
	if (reg->width == 1 || reg->width == 2 || reg->width == 4 || reg->width == 8) {
		uint64_t max = reg->width == 8 ? UINT64_MAX : (1ull << (8 * reg->width)) - 1;
		uint64_t v;
		if (req_u64(r, "VALUE", argv[3], max, &v) != 0)
			return -1;
		rc = innet_cp_reg_write(cp, (unsigned)id, (uint32_t)idx, v);
	} else {
		if (reg->width > CTL_BLOB_MAX)
			return fail(r, "register '%s' has %u-byte elements: too wide to write here",
				    reg->name, reg->width);
		uint8_t *buf = calloc(1, reg->width);
		if (buf == NULL)
			return fail(r, "out of memory");
		size_t n;
		if (req_hex(r, "VALUE", argv[3], buf, reg->width, &n) != 0) {
			free(buf);
			return -1;
		}
		/* shorter values are zero-padded to the element width */
		rc = innet_cp_reg_write_bytes(cp, (unsigned)id, (uint32_t)idx, buf, reg->width);
		free(buf);
	}
	if (rc != 0)
		return fail(r, "writing %s[%llu]: %s", reg->name, (unsigned long long)idx, strerror(-rc));
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "register", jstr(reg->name));
	jset(r->resp, "index", json_integer((json_int_t)idx));
	return 0;
}

/* Resolve PROG TABLE and parse KEYHEX (exactly key_size bytes) into key. */
static int table_args(struct ctl_req *r, char **argv, bool with_key, struct innet_cp **cpp,
		      unsigned *idp, struct innet_table_info *ti, uint8_t **key)
{
	*key = NULL; /* the caller frees it on every path */
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	int id = req_table(r, cp, argv[1], ti);
	if (id < 0)
		return -1;
	*cpp = cp;
	*idp = (unsigned)id;
	if (!with_key)
		return 0;
	*key = calloc(1, ti->key_size ? ti->key_size : 1);
	if (*key == NULL)
		return fail(r, "out of memory");
	size_t n;
	if (req_hex(r, "KEYHEX", argv[2], *key, ti->key_size, &n) != 0)
		return -1;
	if (n != ti->key_size)
		return fail(r, "bad KEYHEX: table '%s' has %u-byte keys (%u hex digits), got %zu bytes",
			    ti->name, ti->key_size, 2 * ti->key_size, n);
	return 0;
}

static int table_err(struct ctl_req *r, const char *op, const struct innet_table_info *ti, int rc)
{
	switch (rc) {
	case -ENOENT:
		return fail(r, "table '%s': no such key", ti->name);
	case -ENOSPC:
		return fail(r, "table '%s' is full (%u entries)", ti->name, ti->capacity);
	case -EBUSY:
		return fail(r, "table '%s' is busy (a concurrent writer of that key): retry", ti->name);
	default:
		return fail(r, "table %s on '%s': %s", op, ti->name, strerror(-rc));
	}
}

/* The reply to a table change: program, table and its entries now. */
static void table_changed(struct ctl_req *r, struct innet_cp *cp, unsigned id,
			  struct innet_table_info *ti)
{
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "table", jstr(ti->name));
	innet_cp_table_info(cp, id, ti);
	jset(r->resp, "entries", json_integer(ti->entries));
}

/* table add PROG TABLE KEYHEX VALHEX */
static int cmd_table_add(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key, *val = NULL;
	int rc = -1;
	if (table_args(r, argv, true, &cp, &id, &ti, &key) != 0)
		goto out;
	val = calloc(1, ti.value_size ? ti.value_size : 1);
	if (val == NULL) {
		fail(r, "out of memory");
		goto out;
	}
	size_t n;
	if (req_hex(r, "VALHEX", argv[3], val, ti.value_size, &n) != 0)
		goto out;
	if (n != ti.value_size) {
		fail(r, "bad VALHEX: table '%s' has %u-byte values (%u hex digits), got %zu bytes",
		     ti.name, ti.value_size, 2 * ti.value_size, n);
		goto out;
	}
	int e = innet_cp_table_add(cp, id, key, val);
	if (e != 0) {
		table_err(r, "add", &ti, e);
		goto out;
	}
	table_changed(r, cp, id, &ti);
	rc = 0;
out:
	free(key);
	free(val);
	return rc;
}

/* table del PROG TABLE KEYHEX */
static int cmd_table_del(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key;
	int rc = -1;
	if (table_args(r, argv, true, &cp, &id, &ti, &key) != 0)
		goto out;
	int e = innet_cp_table_del(cp, id, key);
	if (e != 0) {
		table_err(r, "del", &ti, e);
		goto out;
	}
	table_changed(r, cp, id, &ti);
	rc = 0;
out:
	free(key);
	return rc;
}

/* table get PROG TABLE KEYHEX */
static int cmd_table_get(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key, *val = NULL;
	int rc = -1;
	if (table_args(r, argv, true, &cp, &id, &ti, &key) != 0)
		goto out;
	val = calloc(1, ti.value_size ? ti.value_size : 1);
	if (val == NULL) {
		fail(r, "out of memory");
		goto out;
	}
	int e = innet_cp_table_get(cp, id, key, val);
	if (e != 0) {
		table_err(r, "get", &ti, e);
		goto out;
	}
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "table", jstr(ti.name));
	jset(r->resp, "key", jhex(key, ti.key_size));
	jset(r->resp, "value", jhex(val, ti.value_size));
	rc = 0;
out:
	free(key);
	free(val);
	return rc;
}

struct list_ctx {
	json_t *arr;
	uint32_t key_size, value_size;
	uint64_t max;            /* entries to list at most */
	uint64_t n;              /* entries listed */
	uint64_t bytes;          /* hex characters listed */
	bool truncated;
};

static int list_one(const void *key, const void *val, void *arg)
{
	struct list_ctx *lc = arg;
	uint64_t entry = 2ull * (lc->key_size + lc->value_size);
	if (lc->n == lc->max || lc->bytes + entry > CTL_RESP_BYTES) {
		lc->truncated = true;
		return 1;
	}
	lc->bytes += entry;
	json_t *e = json_object();
	jset(e, "key", jhex(key, lc->key_size));
	jset(e, "value", jhex(val, lc->value_size));
	jpush(lc->arr, e);
	lc->n++;
	return 0;
}

/* table list PROG TABLE [MAX] */
static int cmd_table_list(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key;
	if (table_args(r, argv, false, &cp, &id, &ti, &key) != 0)
		return -1;
	uint64_t max = CTL_LIST_DEFAULT;
	if (argc > 2 && req_u64(r, "MAX", argv[2], CTL_LIST_MAX, &max) != 0)
		return -1;
	struct list_ctx lc = { .arr = json_array(), .key_size = ti.key_size,
			       .value_size = ti.value_size, .max = max };
	int e = innet_cp_table_foreach(cp, id, list_one, &lc);
	if (e < 0) {
		json_decref(lc.arr);
		return fail(r, "listing table '%s': %s", ti.name, strerror(-e));
	}
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "table", jstr(ti.name));
	jset(r->resp, "key_size", json_integer(ti.key_size));
	jset(r->resp, "value_size", json_integer(ti.value_size));
	jset(r->resp, "entries_total", json_integer(ti.entries));
	jset(r->resp, "truncated", json_boolean(lc.truncated));
	jset(r->resp, "entries", lc.arr);
	return 0;
}

/* One group member: PORT or PORT@IP:UDP. */
static int parse_member(struct ctl_req *r, const char *s, struct innet_member *m)
{
	char buf[64];
	if (strlen(s) >= sizeof(buf))
		return fail(r, "bad MEMBER '%s': expected PORT or PORT@IP:UDP", show(s).s);
	strcpy(buf, s);
	memset(m, 0, sizeof(*m));
	char *at = strchr(buf, '@');
	if (at != NULL)
		*at = '\0';
	uint32_t port;
	if (req_port(r, buf, &port) != 0)
		return -1;
	m->port = (uint16_t)port;
	if (at == NULL)
		return 0;
	char *colon = strrchr(at + 1, ':');
	if (colon == NULL)
		return fail(r, "bad MEMBER '%s': expected PORT@IP:UDP", show(s).s);
	*colon = '\0';
	uint32_t ip;
	if (innet_parse_ip(at + 1, &ip) != 0)
		return fail(r, "bad MEMBER '%s': '%s' is not a dotted-quad IPv4 address", show(s).s,
			    show(at + 1).s);
	uint64_t udp;
	if (req_u64(r, "MEMBER UDP port", colon + 1, 65535, &udp) != 0)
		return -1;
	m->ip = ip;
	m->udp = (uint16_t)udp;
	return 0;
}

static int req_group(struct ctl_req *r, struct innet_cp *cp, const char *s, uint32_t *group)
{
	uint64_t g;
	if (req_u64(r, "GROUP", s, UINT32_MAX, &g) != 0)
		return -1;
	uint32_t n = innet_cp_n_groups(cp);
	if (g >= n) {
		if (n == 0)
			return fail(r, "program '%s' declares no multicast groups", cp->name);
		return fail(r, "group %llu out of range: program '%s' has %u groups (0..%u)",
			    (unsigned long long)g, cp->name, n, n - 1);
	}
	*group = (uint32_t)g;
	return 0;
}

static json_t *members_json(const struct innet_member *m, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < n; i++) {
		json_t *o = json_object();
		jset(o, "port", json_integer(m[i].port));
		if (m[i].ip != 0)
			jset(o, "ip", jip(m[i].ip));
		if (m[i].udp != 0)
			jset(o, "udp", json_integer(m[i].udp));
		jpush(a, o);
	}
	return a;
}

/* group set PROG GROUP MEMBER... */
static int cmd_group_set(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	uint32_t group;
	if (req_group(r, cp, argv[1], &group) != 0)
		return -1;
	uint32_t n = (uint32_t)(argc - 2);
	if (n > INNET_MAX_GROUP_MEMBERS)
		return fail(r, "%u members: a group has at most %u", n, INNET_MAX_GROUP_MEMBERS);
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	for (uint32_t i = 0; i < n; i++)
		if (parse_member(r, argv[2 + i], &m[i]) != 0)
			return -1;
	int rc = innet_cp_group_set(cp, group, m, n);
	if (rc != 0)
		return fail(r, "setting group %u: %s", group, strerror(-rc));
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "group", json_integer(group));
	jset(r->resp, "members", members_json(m, n));
	return 0;
}

/* group get PROG GROUP */
static int cmd_group_get(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	uint32_t group;
	if (req_group(r, cp, argv[1], &group) != 0)
		return -1;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	int n = innet_cp_group_get(cp, group, m, INNET_MAX_GROUP_MEMBERS);
	if (n < 0)
		return fail(r, "reading group %u: %s", group, strerror(-n));
	if (n > (int)INNET_MAX_GROUP_MEMBERS)
		n = (int)INNET_MAX_GROUP_MEMBERS;
	jset(r->resp, "program", jstr(cp->name));
	jset(r->resp, "group", json_integer(group));
	jset(r->resp, "members", members_json(m, (uint32_t)n));
	return 0;
}

static json_t *port_stats_json(struct innet_switch *sw, uint32_t i)
{
	struct innet_port_stats s;
	innet_switch_port_stats(sw, i, &s);
	json_t *o = json_object();
	jset(o, "index", json_integer(i));
	jset(o, "name", jstr(sw->ports[i].conf.name));
	jset(o, "rx_pkts", ju64(s.rx_pkts));
	jset(o, "rx_bytes", ju64(s.rx_bytes));
	jset(o, "tx_pkts", ju64(s.tx_pkts));
	jset(o, "tx_bytes", ju64(s.tx_bytes));
	jset(o, "tx_errors", ju64(s.tx_errors));
	jset(o, "tx_gso", ju64(s.tx_gso));
	jset(o, "link_lost", ju64(s.link_lost));
	jset(o, "link_duplicated", ju64(s.link_duplicated));
	jset(o, "link_reordered", ju64(s.link_reordered));
	jset(o, "link_delayed", ju64(s.link_delayed));
	jset(o, "link_queue_full", ju64(s.link_queue_full));
	if (sw->xdp != NULL) {
		/* the XDP target: what the eBPF program took and sent, and the
		 * frames it passed to the kernel unhandled, by reason */
		jset(o, "xdp_rx_pkts", ju64(s.xdp_rx_pkts));
		jset(o, "xdp_tx_pkts", ju64(s.xdp_tx_pkts));
		json_t *pass = json_object();
		for (unsigned k = 0; innet_xdp_pass_name(k) != NULL; k++)
			jset(pass, innet_xdp_pass_name(k), ju64(s.xdp_pass[k]));
		jset(o, "xdp_pass", pass);
	}
	return o;
}

static json_t *prog_stats_json(struct innet_cp *cp)
{
	struct innet_prog_stats s;
	innet_cp_stats(cp, &s);
	json_t *o = json_object();
	jset(o, "name", jstr(cp->name));
	jset(o, "rx_pkts", ju64(s.rx_pkts));
	jset(o, "rx_bytes", ju64(s.rx_bytes));
	jset(o, "passes", ju64(s.passes));
	jset(o, "recirculations", ju64(s.recirculations));
	jset(o, "emitted", ju64(s.emitted));
	jset(o, "tx_pkts", ju64(s.tx_pkts));
	jset(o, "timer_fires", ju64(s.timer_fires));
	jset(o, "cpu_pkts", ju64(s.cpu_pkts));
	jset(o, "reg_ops", ju64(s.reg_ops));
	jset(o, "table_ops", ju64(s.table_ops));
	jset(o, "alu_ops", ju64(s.alu_ops));
	jset(o, "max_reg_ops", json_integer(s.max_reg_ops));
	jset(o, "max_table_ops", json_integer(s.max_table_ops));
	jset(o, "max_alu_ops", json_integer(s.max_alu_ops));
	jset(o, "max_recirc", json_integer(s.max_recirc));
	jset(o, "max_emitted", json_integer(s.max_emitted));
	json_t *acts = json_object();
	for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
		jset(acts, innet_action_name(a), ju64(s.actions[a]));
	jset(o, "actions", acts);
	json_t *drops = json_object();
	for (unsigned d = 0; d < INNET_N_REASONS; d++) {
		if (s.drops[d] == 0)
			continue;
		char key[INNET_NAME_MAX + 16];
		const char *name = innet_cp_drop_reason_name(cp, d);
		if (!strcmp(name, "unknown"))
			snprintf(key, sizeof(key), "reason_%u", d);
		else
			sanitize(key, sizeof(key), name, INNET_NAME_MAX);
		/* two reasons with one name (a program reusing a runtime name): add up */
		json_t *prev = json_object_get(drops, key);
		uint64_t v = s.drops[d];
		if (prev != NULL && json_is_integer(prev))
			v += (uint64_t)json_integer_value(prev);
		jset(drops, key, ju64(v));
	}
	jset(o, "drops", drops);
	if (cp->sw->xdp != NULL) {
		jset(o, "xdp_rx_pkts", ju64(s.xdp_rx_pkts));
		json_t *h = json_object();
		for (unsigned k = 0; innet_handoff_name(k) != NULL; k++)
			jset(h, innet_handoff_name(k), ju64(s.handoffs[k]));
		jset(o, "handoffs", h);
		jset(o, "handoff_ring_full", ju64(s.handoff_ring_full));
	}
	return o;
}

static int cmd_stats(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	json_t *ports = json_array();
	for (uint32_t i = 0; i < sw->n_ports; i++)
		jpush(ports, port_stats_json(sw, i));
	jset(r->resp, "switch", jstr(sw->conf.name));
	jset(r->resp, "target", jstr(sw->conf.target == INNET_TARGET_XDP ? "xdp" : "udp"));
	jset(r->resp, "ports", ports);
	json_t *progs = json_array();
	for (uint32_t i = 0; i < sw->n_progs; i++)
		jpush(progs, prog_stats_json(&sw->progs[i]));
	jset(r->resp, "programs", progs);
	return 0;
}

/* metrics: the stats in the Prometheus text format, as the HTTP server
 * serves them (innet/metrics.h). */
static int cmd_metrics(struct ctl_req *r, int argc, char **argv)
{
	struct innet_prom w;
	innet_prom_init(&w);
	int rc = innet_metrics_switch(r->sw, &w);
	if (rc == 0) {
		json_t *text = json_stringn(w.buf ? w.buf : "", w.len);
		if (text == NULL)
			rc = -ENOMEM;
		jset(r->resp, "text", text);
	}
	innet_prom_fini(&w);
	if (rc != 0)
		return fail(r, "metrics: %s", strerror(-rc));
	return 0;
}

static int cmd_stats_reset(struct ctl_req *r, int argc, char **argv)
{
	innet_switch_stats_reset(r->sw);
	return 0;
}

/* capture start PORT PATH [MAXPKTS] */
static int cmd_capture_start(struct ctl_req *r, int argc, char **argv)
{
	uint32_t port;
	if (req_port(r, argv[0], &port) != 0)
		return -1;
	uint64_t max = 0;
	if (argc > 2 && req_u64(r, "MAXPKTS", argv[2], UINT64_MAX, &max) != 0)
		return -1;
	int rc = innet_switch_capture_start(r->sw, port, argv[1], max);
	if (rc == -EBUSY)
		return fail(r, "port %u is already being captured (capture stop %u first)", port, port);
	if (rc != 0)
		return fail(r, "cannot capture port %u into '%s': %s", port, show(argv[1]).s,
			    strerror(-rc));
	jset(r->resp, "port", json_integer(port));
	jset(r->resp, "path", jstr(argv[1]));
	jset(r->resp, "max_pkts", ju64(max));
	return 0;
}

/* capture stop PORT */
static int cmd_capture_stop(struct ctl_req *r, int argc, char **argv)
{
	uint32_t port;
	if (req_port(r, argv[0], &port) != 0)
		return -1;
	int rc = innet_switch_capture_stop(r->sw, port);
	if (rc == -ENOENT)
		return fail(r, "port %u is not being captured (never started, already stopped, "
			       "or it stopped by itself after MAXPKTS)", port);
	if (rc != 0)
		return fail(r, "stopping the capture on port %u: %s", port, strerror(-rc));
	jset(r->resp, "port", json_integer(port));
	return 0;
}

/* The resource report of one program, with its human rendering in "text". */
static json_t *resources_json(struct ctl_req *r, struct innet_cp *cp)
{
	struct innet_res_usage *u = malloc(sizeof(*u));
	if (u == NULL) {
		fail(r, "out of memory");
		return NULL;
	}
	json_t *rep = NULL;
	int rc = innet_res_usage_from_prog(cp, u);
	if (rc != 0) {
		fail(r, "resources of '%s': %s", cp->name, strerror(-rc));
		goto out;
	}
	rep = innet_res_report_json(u);
	if (rep == NULL) {
		fail(r, "resources of '%s': %s", cp->name, strerror(errno));
		goto out;
	}
	int len = innet_res_format(NULL, 0, u);
	if (len >= 0) {
		char *text = malloc((size_t)len + 1);
		if (text != NULL && innet_res_format(text, (size_t)len + 1, u) >= 0)
			jset(rep, "text", jstr(text));
		free(text);
	}
	jset(rep, "name", jstr(cp->name));
out:
	free(u);
	return rep;
}

/* resources [PROG] */
static int cmd_resources(struct ctl_req *r, int argc, char **argv)
{
	json_t *arr = json_array();
	for (uint32_t i = 0; i < r->sw->n_progs; i++) {
		struct innet_cp *cp = &r->sw->progs[i];
		if (argc > 0) {
			cp = req_prog(r, argv[0]);
			if (cp == NULL)
				goto err;
		}
		json_t *rep = resources_json(r, cp);
		if (rep == NULL)
			goto err;
		jpush(arr, rep);
		if (argc > 0)
			break;
	}
	jset(r->resp, "programs", arr);
	return 0;
err:
	json_decref(arr);
	return -1;
}

/* prog PROG WORD... : a program's own control command (innet_program.on_ctl). */
static int cmd_prog(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = req_prog(r, argv[0]);
	if (cp == NULL)
		return -1;
	if (cp->program->on_ctl == NULL)
		return fail(r, "program '%s' (%s) has no commands of its own", cp->name,
			    cp->program->name);
	r->err[0] = '\0';
	/* The control thread runs on_cpu and on_ctl: they never run at once. */
	int rc = cp->program->on_ctl(cp, cp->priv, argc - 1, argv + 1, r->resp, r->err,
				     sizeof(r->err));
	if (rc != 0) {
		if (r->err[0] == '\0')
			snprintf(r->err, sizeof(r->err), "program '%s': command failed", cp->name);
		return -1;
	}
	jset(r->resp, "program", jstr(cp->name));
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
	  "read COUNT (default 1) elements; blob registers as hex strings", cmd_reg_read },
	{ "reg", "write", 4, 4, "reg write PROG REG IDX VALUE",
	  "write one element (blob registers: a hex string, zero-padded)", cmd_reg_write },
	{ "table", "add", 4, 4, "table add PROG TABLE KEYHEX VALHEX", "insert or replace an entry",
	  cmd_table_add },
	{ "table", "del", 3, 3, "table del PROG TABLE KEYHEX", "delete an entry", cmd_table_del },
	{ "table", "get", 3, 3, "table get PROG TABLE KEYHEX", "look an entry up", cmd_table_get },
	{ "table", "list", 2, 3, "table list PROG TABLE [MAX]",
	  "list up to MAX entries (default 256, at most 65536)", cmd_table_list },
	{ "group", "set", 2, 2 + (int)INNET_MAX_GROUP_MEMBERS, "group set PROG GROUP MEMBER...",
	  "replace a multicast group; MEMBER is PORT or PORT@IP:UDP", cmd_group_set },
	{ "group", "get", 2, 2, "group get PROG GROUP", "a multicast group's members",
	  cmd_group_get },
	{ "stats", "reset", 0, 0, "stats reset", "zero every counter", cmd_stats_reset },
	{ "stats", NULL, 0, 0, "stats", "port and program counters, drops by reason", cmd_stats },
	{ "metrics", NULL, 0, 0, "metrics",
	  "the stats in the Prometheus text format (\"text\"), as served over HTTP", cmd_metrics },
	{ "capture", "start", 2, 3, "capture start PORT PATH [MAXPKTS]",
	  "write the port's traffic to a pcap file (stop after MAXPKTS)", cmd_capture_start },
	{ "capture", "stop", 1, 1, "capture stop PORT", "stop a capture and close its file",
	  cmd_capture_stop },
	{ "prog", NULL, 1, (int)CTL_MAX_WORDS - 2, "prog PROG WORD...",
	  "a program's own command (e.g. 'prog lb help')", cmd_prog },
	{ "resources", NULL, 0, 1, "resources [PROG]",
	  "would the program fit a Tofino1, Tofino2 or Trio (resource model)", cmd_resources },
	{ "help", NULL, 0, 0, "help", "this list", cmd_help },
};

#define N_CTL_CMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

static int cmd_help(struct ctl_req *r, int argc, char **argv)
{
	json_t *a = json_array();
	for (size_t i = 0; i < N_CTL_CMDS; i++) {
		json_t *o = json_object();
		jset(o, "command", json_string(ctl_cmds[i].usage));
		jset(o, "help", json_string(ctl_cmds[i].help));
		jpush(a, o);
	}
	jset(r->resp, "commands", a);
	return 0;
}

/* Split line (NUL-terminated, modified) into at most max words. Returns the
 * count, or -1 if there are more. */
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
			return -1;
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
		fail(&r, "request contains a NUL byte");
		goto err;
	}
	line[len] = '\0';
	n = split_words(line, words, (int)CTL_MAX_WORDS);
	if (n < 0) {
		fail(&r, "too many words in the request (at most %u)", CTL_MAX_WORDS);
		goto err;
	}
	if (n == 0) {
		fail(&r, "empty request (try 'help')");
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
		fail(&r, "unknown command '%s' (try 'help')", show(words[0]).s);
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
			fail(&r, "unknown '%s' sub-command '%s' (expected %s)", words[0], show(words[1]).s,
			     subs);
		else
			fail(&r, "'%s' needs a sub-command (%s)", words[0], subs);
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
		fail(&r, "usage: %s", usage);
		goto err;
	}
	r.resp = json_object();
	if (r.resp == NULL)
		return NULL;
	jset(r.resp, "ok", json_true());
	if (cmd->fn(&r, argc, words + skip) == 0)
		return r.resp;
	json_decref(r.resp);
err:;
	json_t *e = json_object();
	char msg[CTL_ERR_MAX];
	sanitize(msg, sizeof(msg), r.err[0] ? r.err : "failed", CTL_ERR_MAX);
	jset(e, "ok", json_false());
	jset(e, "error", json_string(msg));
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

