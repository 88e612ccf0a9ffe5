/*
 * ctl_state.c — the control commands that read and write a program's state
 * (docs/man/innet-ctl.md): reg read/write (registers; elements wider than 8
 * bytes as hex strings), table add/del/get/list (exact-match tables; keys
 * and values as hex strings), group set/get (multicast groups). The request
 * language that dispatches them, and the helpers they share, are
 * ctl_request.c (ctl_pvt.h).
 *
 * Robustness: hex strings are checked (even length, digits, size against
 * the register's width or the table's key and value sizes); an answer is
 * bounded (CTL_REG_READ_MAX elements, CTL_LIST_MAX entries, CTL_RESP_BYTES
 * of hex).
 *
 * Threads: runs on the control thread; the innet_cp_* calls it makes are
 * safe against the data plane.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "innet/parse.h"
#include "control/ctl_pvt.h"

#define CTL_REG_READ_MAX  4096u       /* elements per "reg read" */
#define CTL_LIST_DEFAULT  256u        /* entries per "table list" unless MAX is given */
#define CTL_LIST_MAX      65536u
#define CTL_RESP_BYTES    (16u << 20) /* bound on the hex in one reg read / table list */
#define CTL_BLOB_MAX      (1u << 20)  /* widest blob register element we will copy */

/* ------------------------------------------------------------------------ */
/* Hex strings, registers and tables by name                               */

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

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -EINVAL;
}

/*
 * Parse a hex string (optional 0x prefix, even number of digits) into at most
 * max bytes of dst; *n gets the byte count. Returns 0 or -EINVAL with a message.
 */
static int req_hex(struct ctl_req *r, const char *what, const char *s, uint8_t *dst, size_t max,
		   size_t *n)
{
	const char *p = s;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	size_t len = strlen(p);
	if (len == 0 || len % 2 != 0)
		return ctl_fail(r, "bad %s '%s': expected an even number of hex digits", what, ctl_show(s).s);
	if (len / 2 > max)
		return ctl_fail(r, "bad %s: %zu bytes, at most %zu allowed", what, len / 2, max);
	for (size_t i = 0; i < len / 2; i++) {
		int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return ctl_fail(r, "bad %s '%s': not a hex string", what, ctl_show(s).s);
		dst[i] = (uint8_t)(hi << 4 | lo);
	}
	*n = len / 2;
	return 0;
}

/* Register id of name in cp, or -EINVAL with a message listing them. */
static int req_reg(struct ctl_req *r, struct innet_cp *cp, const char *name)
{
	int id = innet_cp_reg_find(cp, name);
	if (id >= 0)
		return id;
	char list[256] = "";
	size_t off = 0;
	for (uint32_t i = 0; i < innet_cp_n_regs(cp) && off < sizeof(list); i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", innet_cp_reg(cp, i)->name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return ctl_fail(r, "program '%s' has no register '%s' (registers: %s)", innet_cp_name(cp), ctl_show(name).s,
			innet_cp_n_regs(cp) ? list : "none");
}

/* Table id of name in cp, or -EINVAL with a message listing them. */
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
	for (uint32_t i = 0; i < innet_cp_n_tables(cp) && off < sizeof(list); i++) {
		struct innet_table_info ti;
		innet_cp_table_info(cp, i, &ti);
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", ti.name);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return ctl_fail(r, "program '%s' has no table '%s' (tables: %s)", innet_cp_name(cp), ctl_show(name).s,
			innet_cp_n_tables(cp) ? list : "none");
}

/* ------------------------------------------------------------------------ */
/* Commands: reg, table, group                                              */

/* " with COUNT n" for an error message. */
static struct shown fmt_count(uint64_t n)
{
	struct shown w;
	snprintf(w.s, sizeof(w.s), " with COUNT %llu", (unsigned long long)n);
	return w;
}

/* reg read PROG REG IDX [COUNT] */
int ctl_cmd_reg_read(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	int id = req_reg(r, cp, argv[1]);
	if (id < 0)
		return -EINVAL;
	const struct innet_reg *reg = innet_cp_reg(cp, (unsigned)id);
	uint64_t idx, count = 1;
	if (ctl_req_u64(r, "IDX", argv[2], UINT32_MAX, &idx) != 0)
		return -EINVAL;
	if (argc > 3) {
		if (ctl_req_u64(r, "COUNT", argv[3], CTL_REG_READ_MAX, &count) != 0)
			return -EINVAL;
		if (count == 0)
			return ctl_fail(r, "bad COUNT 0: read 1..%u elements", CTL_REG_READ_MAX);
	}
	if (idx >= reg->count || count > reg->count - idx)
		return ctl_fail(r, "index %llu%s out of range: register '%s' has %u elements (0..%u)",
				(unsigned long long)idx,
				count > 1 ? fmt_count(count).s : "", reg->name, reg->count, reg->count - 1);
	bool blob = !(reg->width == 1 || reg->width == 2 || reg->width == 4 || reg->width == 8);
	if (blob && reg->width > CTL_BLOB_MAX)
		return ctl_fail(r, "register '%s' has %u-byte elements: too wide to read here", reg->name,
				reg->width);
	if (blob && count * reg->width > CTL_RESP_BYTES / 2)
		return ctl_fail(r, "%llu elements of %u bytes is too much for one response: read fewer",
				(unsigned long long)count, reg->width);
	uint8_t *buf = blob ? malloc(reg->width) : NULL;
	if (blob && buf == NULL)
		return ctl_fail(r, "out of memory");
	json_t *vals = json_array();
	for (uint64_t i = idx; i < idx + count; i++) {
		int rc;
		if (blob) {
			rc = innet_cp_reg_read_bytes(cp, (unsigned)id, (uint32_t)i, buf, reg->width);
			if (rc == 0)
				ctl_jpush(vals, jhex(buf, reg->width));
		} else {
			uint64_t v = 0;
			rc = innet_cp_reg_read(cp, (unsigned)id, (uint32_t)i, &v);
			if (rc == 0)
				ctl_jpush(vals, ctl_ju64(v));
		}
		if (rc != 0) {
			free(buf);
			json_decref(vals);
			return ctl_fail(r, "reading %s[%llu]: %s", reg->name, (unsigned long long)i,
					strerror(-rc));
		}
	}
	free(buf);
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "register", ctl_jstr(reg->name));
	ctl_jset(r->resp, "width", json_integer(reg->width));
	ctl_jset(r->resp, "index", json_integer((json_int_t)idx));
	ctl_jset(r->resp, "values", vals);
	return 0;
}

/* reg write PROG REG IDX VALUE */
int ctl_cmd_reg_write(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	int id = req_reg(r, cp, argv[1]);
	if (id < 0)
		return -EINVAL;
	const struct innet_reg *reg = innet_cp_reg(cp, (unsigned)id);
	uint64_t idx;
	if (ctl_req_u64(r, "IDX", argv[2], UINT32_MAX, &idx) != 0)
		return -EINVAL;
	if (idx >= reg->count)
		return ctl_fail(r, "index %llu out of range: register '%s' has %u elements (0..%u)",
				(unsigned long long)idx, reg->name, reg->count, reg->count - 1);
	int rc;
	if (reg->width == 1 || reg->width == 2 || reg->width == 4 || reg->width == 8) {
		uint64_t max = reg->width == 8 ? UINT64_MAX : (1ull << (8 * reg->width)) - 1;
		uint64_t v;
		if (ctl_req_u64(r, "VALUE", argv[3], max, &v) != 0)
			return -EINVAL;
		rc = innet_cp_reg_write(cp, (unsigned)id, (uint32_t)idx, v);
	} else {
		if (reg->width > CTL_BLOB_MAX)
			return ctl_fail(r, "register '%s' has %u-byte elements: too wide to write here",
					reg->name, reg->width);
		uint8_t *buf = calloc(1, reg->width);
		if (buf == NULL)
			return ctl_fail(r, "out of memory");
		size_t n;
		if (req_hex(r, "VALUE", argv[3], buf, reg->width, &n) != 0) {
			free(buf);
			return -EINVAL;
		}
		/* shorter values are zero-padded to the element width */
		rc = innet_cp_reg_write_bytes(cp, (unsigned)id, (uint32_t)idx, buf, reg->width);
		free(buf);
	}
	if (rc != 0)
		return ctl_fail(r, "writing %s[%llu]: %s", reg->name, (unsigned long long)idx, strerror(-rc));
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "register", ctl_jstr(reg->name));
	ctl_jset(r->resp, "index", json_integer((json_int_t)idx));
	return 0;
}

/* Resolve PROG TABLE and parse KEYHEX (exactly key_size bytes) into key. */
static int table_args(struct ctl_req *r, char **argv, bool with_key, struct innet_cp **cpp,
		      unsigned *idp, struct innet_table_info *ti, uint8_t **key)
{
	*key = NULL; /* the caller frees it on every path */
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	int id = req_table(r, cp, argv[1], ti);
	if (id < 0)
		return -EINVAL;
	*cpp = cp;
	*idp = (unsigned)id;
	if (!with_key)
		return 0;
	*key = calloc(1, ti->key_size ? ti->key_size : 1);
	if (*key == NULL)
		return ctl_fail(r, "out of memory");
	size_t n;
	if (req_hex(r, "KEYHEX", argv[2], *key, ti->key_size, &n) != 0)
		return -EINVAL;
	if (n != ti->key_size)
		return ctl_fail(r, "bad KEYHEX: table '%s' has %u-byte keys (%u hex digits), got %zu bytes",
				ti->name, ti->key_size, 2 * ti->key_size, n);
	return 0;
}

static int table_err(struct ctl_req *r, const char *op, const struct innet_table_info *ti, int rc)
{
	switch (rc) {
	case -ENOENT:
		ctl_fail(r, "table '%s': no such key", ti->name);
		break;
	case -ENOSPC:
		ctl_fail(r, "table '%s' is full (%u entries)", ti->name, ti->capacity);
		break;
	case -EBUSY:
		ctl_fail(r, "table '%s' is busy (a concurrent writer of that key): retry", ti->name);
		break;
	default:
		ctl_fail(r, "table %s on '%s': %s", op, ti->name, strerror(-rc));
		break;
	}
	return rc;
}

/* The reply to a table change: program, table and its entries now. */
static void table_changed(struct ctl_req *r, struct innet_cp *cp, unsigned id,
			  struct innet_table_info *ti)
{
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "table", ctl_jstr(ti->name));
	innet_cp_table_info(cp, id, ti);
	ctl_jset(r->resp, "entries", json_integer(ti->entries));
}

/* table add PROG TABLE KEYHEX VALHEX */
int ctl_cmd_table_add(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key, *val = NULL;
	int rc = -EINVAL;
	if (table_args(r, argv, true, &cp, &id, &ti, &key) != 0)
		goto out;
	val = calloc(1, ti.value_size ? ti.value_size : 1);
	if (val == NULL) {
		ctl_fail(r, "out of memory");
		goto out;
	}
	size_t n;
	if (req_hex(r, "VALHEX", argv[3], val, ti.value_size, &n) != 0)
		goto out;
	if (n != ti.value_size) {
		ctl_fail(r, "bad VALHEX: table '%s' has %u-byte values (%u hex digits), got %zu bytes",
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
int ctl_cmd_table_del(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key;
	int rc = -EINVAL;
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
int ctl_cmd_table_get(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key, *val = NULL;
	int rc = -EINVAL;
	if (table_args(r, argv, true, &cp, &id, &ti, &key) != 0)
		goto out;
	val = calloc(1, ti.value_size ? ti.value_size : 1);
	if (val == NULL) {
		ctl_fail(r, "out of memory");
		goto out;
	}
	int e = innet_cp_table_get(cp, id, key, val);
	if (e != 0) {
		table_err(r, "get", &ti, e);
		goto out;
	}
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "table", ctl_jstr(ti.name));
	ctl_jset(r->resp, "key", jhex(key, ti.key_size));
	ctl_jset(r->resp, "value", jhex(val, ti.value_size));
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
	ctl_jset(e, "key", jhex(key, lc->key_size));
	ctl_jset(e, "value", jhex(val, lc->value_size));
	ctl_jpush(lc->arr, e);
	lc->n++;
	return 0;
}

/* table list PROG TABLE [MAX] */
int ctl_cmd_table_list(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp;
	unsigned id;
	struct innet_table_info ti;
	uint8_t *key;
	if (table_args(r, argv, false, &cp, &id, &ti, &key) != 0)
		return -EINVAL;
	uint64_t max = CTL_LIST_DEFAULT;
	if (argc > 2 && ctl_req_u64(r, "MAX", argv[2], CTL_LIST_MAX, &max) != 0)
		return -EINVAL;
	struct list_ctx lc = { .arr = json_array(), .key_size = ti.key_size,
			       .value_size = ti.value_size, .max = max };
	int e = innet_cp_table_foreach(cp, id, list_one, &lc);
	if (e < 0) {
		json_decref(lc.arr);
		return ctl_fail(r, "listing table '%s': %s", ti.name, strerror(-e));
	}
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "table", ctl_jstr(ti.name));
	ctl_jset(r->resp, "key_size", json_integer(ti.key_size));
	ctl_jset(r->resp, "value_size", json_integer(ti.value_size));
	ctl_jset(r->resp, "entries_total", json_integer(ti.entries));
	ctl_jset(r->resp, "truncated", json_boolean(lc.truncated));
	ctl_jset(r->resp, "entries", lc.arr);
	return 0;
}

/* One group member: PORT or PORT@IP:UDP. */
static int parse_member(struct ctl_req *r, const char *s, struct innet_member *m)
{
	char buf[64];
	if (strlen(s) >= sizeof(buf))
		return ctl_fail(r, "bad MEMBER '%s': expected PORT or PORT@IP:UDP", ctl_show(s).s);
	strcpy(buf, s);
	memset(m, 0, sizeof(*m));
	char *at = strchr(buf, '@');
	if (at != NULL)
		*at = '\0';
	uint32_t port;
	if (ctl_req_port(r, buf, &port) != 0)
		return -EINVAL;
	m->port = (uint16_t)port;
	if (at == NULL)
		return 0;
	char *colon = strrchr(at + 1, ':');
	if (colon == NULL)
		return ctl_fail(r, "bad MEMBER '%s': expected PORT@IP:UDP", ctl_show(s).s);
	*colon = '\0';
	uint32_t ip;
	if (innet_parse_ip(at + 1, &ip) != 0)
		return ctl_fail(r, "bad MEMBER '%s': '%s' is not a dotted-quad IPv4 address", ctl_show(s).s,
				ctl_show(at + 1).s);
	uint64_t udp;
	if (ctl_req_u64(r, "MEMBER UDP port", colon + 1, 65535, &udp) != 0)
		return -EINVAL;
	m->ip = ip;
	m->udp = (uint16_t)udp;
	return 0;
}

static int req_group(struct ctl_req *r, struct innet_cp *cp, const char *s, uint32_t *group)
{
	uint64_t g;
	if (ctl_req_u64(r, "GROUP", s, UINT32_MAX, &g) != 0)
		return -EINVAL;
	uint32_t n = innet_cp_n_groups(cp);
	if (g >= n) {
		if (n == 0)
			return ctl_fail(r, "program '%s' declares no multicast groups", innet_cp_name(cp));
		return ctl_fail(r, "group %llu out of range: program '%s' has %u groups (0..%u)",
				(unsigned long long)g, innet_cp_name(cp), n, n - 1);
	}
	*group = (uint32_t)g;
	return 0;
}

static json_t *members_json(const struct innet_member *m, uint32_t n)
{
	json_t *a = json_array();
	for (uint32_t i = 0; i < n; i++) {
		json_t *o = json_object();
		ctl_jset(o, "port", json_integer(m[i].port));
		if (m[i].ip != 0)
			ctl_jset(o, "ip", ctl_jip(m[i].ip));
		if (m[i].udp != 0)
			ctl_jset(o, "udp", json_integer(m[i].udp));
		ctl_jpush(a, o);
	}
	return a;
}

/* group set PROG GROUP MEMBER... */
int ctl_cmd_group_set(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	uint32_t group;
	if (req_group(r, cp, argv[1], &group) != 0)
		return -EINVAL;
	uint32_t n = (uint32_t)(argc - 2);
	if (n > INNET_MAX_GROUP_MEMBERS)
		return ctl_fail(r, "%u members: a group has at most %u", n, INNET_MAX_GROUP_MEMBERS);
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	for (uint32_t i = 0; i < n; i++)
		if (parse_member(r, argv[2 + i], &m[i]) != 0)
			return -EINVAL;
	int rc = innet_cp_group_set(cp, group, m, n);
	if (rc != 0)
		return ctl_fail(r, "setting group %u: %s", group, strerror(-rc));
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "group", json_integer(group));
	ctl_jset(r->resp, "members", members_json(m, n));
	return 0;
}

/* group get PROG GROUP */
int ctl_cmd_group_get(struct ctl_req *r, int argc, char **argv)
{
	struct innet_cp *cp = ctl_req_prog(r, argv[0]);
	if (cp == NULL)
		return -EINVAL;
	uint32_t group;
	if (req_group(r, cp, argv[1], &group) != 0)
		return -EINVAL;
	struct innet_member m[INNET_MAX_GROUP_MEMBERS];
	int n = innet_cp_group_get(cp, group, m, INNET_MAX_GROUP_MEMBERS);
	if (n < 0)
		return ctl_fail(r, "reading group %u: %s", group, strerror(-n));
	if (n > (int)INNET_MAX_GROUP_MEMBERS)
		n = (int)INNET_MAX_GROUP_MEMBERS;
	ctl_jset(r->resp, "program", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(r->resp, "group", json_integer(group));
	ctl_jset(r->resp, "members", members_json(m, (uint32_t)n));
	return 0;
}
