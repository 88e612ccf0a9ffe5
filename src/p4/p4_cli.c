/*
 * p4_cli.c — simple_switch_CLI's command language on an innet P4 instance:
 * `innet ctl table_add MyIngress.ipv4_lpm ipv4_forward 10.0.1.1/32 =>
 * 00:00:00:00:01:01 2`, and the commands.txt files P4 tutorials ship, read
 * unchanged (docs/p4.md, "Control"). What BMv2's CLI prints is printed the
 * same way where a script would parse it (the handles, the dumps, the
 * counter and register lines); its errors come back as its error lines.
 *
 * Names are resolved as the CLI does: the fully qualified name, or any
 * unique suffix of it at a dot ("ipv4_lpm" for "MyIngress.ipv4_lpm").
 * Values: decimal, 0x-hex (Python's int(s, 0): also 0o, 0b, underscores),
 * dotted IPv4 for 32-bit values, MAC for 48-bit, IPv6 for 128-bit;
 * match keys as `value`, `value/prefix`, `value&&&mask`, `lo->hi`.
 *
 * Entry handles are BMv2's: the lowest free index, and a version in bits
 * 24..31 that grows when a handle is freed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p4/p4_ctl.h"

/* ------------------------------------------------------------------------ */
/* Errors, as simple_switch_CLI prints them                                   */

#define CLI_ERR(o, ...) do { (o)->failed = true; p4c_printf((o), __VA_ARGS__); return 0; } while (0)
#define ERR(o, ...) do { (o)->failed = true; p4c_printf((o), "Error: " __VA_ARGS__); p4c_printf((o), "\n"); return 0; } while (0)

/* ------------------------------------------------------------------------ */
/* Names                                                                      */

/* Does name end with suffix at a dot (or equal it)? */
static bool suffix_of(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);
	if (s > n || s == 0)
		return false;
	if (strcmp(name + n - s, suffix) != 0)
		return false;
	return s == n || name[n - s - 1] == '.';
}

/* The unique object whose name (at index i: names(i)) the user's word names;
 * -1 when none or several. */
static int lookup(const char *word, uint32_t n, const char *(*name)(const struct p4_prog *, uint32_t),
		  const struct p4_prog *p)
{
	int found = -1;
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(name(p, i), word))
			return (int)i;
	for (uint32_t i = 0; i < n; i++)
		if (suffix_of(name(p, i), word)) {
			if (found >= 0)
				return -1;
			found = (int)i;
		}
	return found;
}

static const char *tname(const struct p4_prog *p, uint32_t i) { return p->tables[i].name; }
static const char *rname(const struct p4_prog *p, uint32_t i) { return p->registers[i].name; }
static const char *cname(const struct p4_prog *p, uint32_t i) { return p->counters[i].name; }
static const char *mname(const struct p4_prog *p, uint32_t i) { return p->meters[i].name; }
static const char *pname(const struct p4_prog *p, uint32_t i) { return p->profiles[i].name; }

/* Action word among n candidate actions (indices): the one so named, else
 * the one it is a unique suffix of (-1). Several actions of one name (p4c
 * writes a NoAction per table) are one to the CLI: the table's own wins. */
static int action_among(const struct p4_prog *p, const int *cand, uint32_t n, const char *word)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(p->actions[cand[i]].name, word))
			return cand[i];
	int found = -1;
	for (uint32_t i = 0; i < n; i++)
		if (suffix_of(p->actions[cand[i]].name, word)) {
			if (found >= 0 && strcmp(p->actions[found].name, p->actions[cand[i]].name) != 0)
				return -1;
			if (found < 0)
				found = cand[i];
		}
	return found;
}

/* A table's action called word (-1: not an action of the table). */
static int table_action(const struct p4_prog *p, const struct p4_table *t, const char *word)
{
	return action_among(p, t->actions, t->n_actions, word);
}

/* The actions a profile may use: those of the tables that use it. */
static int profile_action(const struct p4_prog *p, uint32_t prof, const char *word)
{
	for (uint32_t t = 0; t < p->n_tables; t++) {
		if (p->tables[t].profile != (int)prof)
			continue;
		int a = table_action(p, &p->tables[t], word);
		if (a >= 0)
			return a;
	}
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Values                                                                     */

/* Python's int(s, 0) into nbytes big-endian bytes: 0 (ok), -1 (not a
 * number), -2 (too large). A negative number gives zeros, as the CLI's
 * int_to_bytes does. */
static int parse_int_bytes(const char *s, uint8_t *out, uint32_t nbytes)
{
	memset(out, 0, nbytes);
	const char *p = s;
	bool neg = false;
	while (*p == ' ')
		p++;
	if (*p == '+' || *p == '-') {
		neg = *p == '-';
		p++;
	}
	unsigned base = 10;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		base = 16, p += 2;
	else if (p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
		base = 8, p += 2;
	else if (p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
		base = 2, p += 2;
	else if (p[0] == '0' && p[1] != '\0') {
		/* Python: a leading zero is only allowed for zero itself */
		for (const char *q = p; *q; q++)
			if (*q != '0' && *q != '_')
				return -1;
	}
	if (*p == '\0' || *p == '_')
		return -1;
	bool any = false, big = false;
	for (; *p; p++) {
		if (*p == '_') {
			if (p[1] == '_' || p[1] == '\0')
				return -1;
			continue;
		}
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			return -1;
		if (d >= base)
			return -1;
		any = true;
		/* out = out * base + d */
		unsigned carry = d;
		for (int i = (int)nbytes - 1; i >= 0; i--) {
			unsigned v = out[i] * base + carry;
			out[i] = (uint8_t)v;
			carry = v >> 8;
		}
		if (carry != 0)
			big = true;
	}
	if (!any)
		return -1;
	if (neg) {
		memset(out, 0, nbytes);
		return 0;
	}
	return big ? -2 : 0;
}

/* The CLI's parse_param: a value of bitwidth bits into its bytes. */
static int parse_param(const char *s, uint32_t bw, uint8_t *out, const char **why)
{
	uint32_t nb = p4_bytes(bw);
	memset(out, 0, nb);
	if (bw == 32 && strchr(s, '.') != NULL) {
		unsigned a[4];
		char tail;
		if (sscanf(s, "%u.%u.%u.%u%c", &a[0], &a[1], &a[2], &a[3], &tail) != 4 ||
		    a[0] > 255 || a[1] > 255 || a[2] > 255 || a[3] > 255) {
			*why = "Invalid IPv4 address";
			return -1;
		}
		for (int i = 0; i < 4; i++)
			out[i] = (uint8_t)a[i];
		return 0;
	}
	if (bw == 48 && strchr(s, ':') != NULL) {
		unsigned m[6];
		char tail;
		if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &tail) != 6) {
			*why = "Invalid MAC address";
			return -1;
		}
		for (int i = 0; i < 6; i++) {
			if (m[i] > 255) {
				*why = "Invalid MAC address";
				return -1;
			}
			out[i] = (uint8_t)m[i];
		}
		return 0;
	}
	if (bw == 128 && strchr(s, ':') != NULL) {
		if (inet_pton(AF_INET6, s, out) != 1) {
			*why = "Invalid IPv6 address";
			return -1;
		}
		return 0;
	}
	int rc = parse_int_bytes(s, out, nb);
	if (rc == -1) {
		*why = "Invalid input, could not cast to integer, try in hex with 0x prefix";
		return -1;
	}
	if (rc == -2) {
		*why = "Parameter is too large";
		return -1;
	}
	return 0;
}

/* Python's int(s) (decimal only, for handles, indices, values). */
static bool parse_dec(const char *s, long long *out)
{
	char *end;
	errno = 0;
	while (*s == ' ')
		s++;
	if (*s == '\0')
		return false;
	long long v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

static void hexcolon(struct p4c_out *o, const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p4c_printf(o, "%s%02x", i ? ":" : "", b[i]);
}

static void hexplain(struct p4c_out *o, const uint8_t *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p4c_printf(o, "%02x", b[i]);
}

/* An action parameter as BMv2 shows it: the value's bytes without leading
 * zero bytes (its Data::get_string(), at least one byte), not the width. */
static void hexmin(struct p4c_out *o, const uint8_t *b, uint32_t n)
{
	uint32_t i = 0;
	while (i + 1 < n && b[i] == 0)
		i++;
	hexplain(o, b + i, n - i);
}

/* "{0:20} {1}" */
static void field20(struct p4c_out *o, const char *label)
{
	p4c_printf(o, "%-20s ", label);
}

/* ------------------------------------------------------------------------ */
/* Match keys and action data                                                 */

static const char *match_upper(enum p4_match m)
{
	switch (m) {
	case P4M_EXACT: return "EXACT";
	case P4M_LPM: return "LPM";
	case P4M_TERNARY:
	case P4M_OPTIONAL: return "TERNARY";
	case P4M_VALID: return "VALID";
	case P4M_RANGE: return "RANGE";
	}
	return "?";
}

static const char *match_lower(enum p4_table_class c, const struct p4_table *t)
{
	(void)t;
	switch (c) {
	case P4TC_LPM: return "lpm";
	case P4TC_TERNARY: {
		for (uint32_t k = 0; k < t->n_keys; k++)
			if (t->keys[k].match == P4M_RANGE)
				return "range";
		return "ternary";
	}
	default: return "exact";
	}
}

/* The CLI's field name of a key element (target joined, "_valid"). */
static void key_name(const struct p4_prog *p, const struct p4_key *ky, char *out, size_t n)
{
	const struct p4_expr *e = ky->target;
	if (e->kind == P4E_HEADER) {
		snprintf(out, n, "%s_valid", p->headers[e->h].name);
		return;
	}
	if (e->kind == P4E_OP && e->a != NULL && e->a->kind == P4E_OP && e->a->a != NULL &&
	    e->a->a->kind == P4E_HEADER) {
		snprintf(out, n, "%s_valid", p->headers[e->a->a->h].name);
		return;
	}
	if (e->kind == P4E_FIELD) {
		snprintf(out, n, "%s.%s", p->headers[e->h].name,
			 p->htypes[p->headers[e->h].type].fields[e->f].name);
		return;
	}
	snprintf(out, n, "%s", ky->name);
}

static bool is_valid_key(const struct p4_key *ky)
{
	return ky->match == P4M_VALID || ky->target->kind != P4E_FIELD;
}

/* Parse the match key words into e (key, mask, hi, prefix); prints the
 * "match key:" line's parts into desc. 0; -1 with the CLI's message
 * printed into o; or P4C_BAD_KEY: a key the CLI accepts and shows but the
 * switch refuses (an LPM prefix longer than the key: BAD_MATCH_KEY), with
 * nothing printed yet. */
#define P4C_BAD_KEY 1
static int parse_key(const struct p4_prog *p, const struct p4_table *t, char **w, struct p4c_entry *e,
		     struct p4c_out *o, struct p4c_out *desc)
{
	bool bad_prefix = false;
	memset(e->key, 0, t->key_bytes);
	memset(e->mask, 0, t->key_bytes);
	memset(e->hi, 0, t->key_bytes);
	e->prefix = -1;
	for (uint32_t k = 0; k < t->n_keys; k++) {
		const struct p4_key *ky = &t->keys[k];
		uint8_t *v = e->key + ky->off, *m = e->mask + ky->off, *hi = e->hi + ky->off;
		const char *why = NULL;
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", w[k]);
		if (k > 0)
			p4c_printf(desc, "\t");
		if (is_valid_key(ky)) {
			long long b;
			if (!parse_dec(buf, &b)) {
				o->failed = true;
				p4c_printf(o, "Error: invalid literal for int() with base 10: '%s'\n", buf);
				return -1;
			}
			v[ky->bytes - 1] = b != 0;
			memset(m, 0xff, ky->bytes);
			p4c_printf(desc, "VALID-");
			continue;
		}
		uint32_t bw = ky->bits;
		switch (ky->match) {
		case P4M_EXACT:
			if (parse_param(buf, bw, v, &why) != 0)
				goto bad;
			memset(m, 0xff, ky->bytes);
			p4c_printf(desc, "EXACT-");
			hexcolon(desc, v, ky->bytes);
			break;
		case P4M_LPM: {
			char *sl = strchr(buf, '/');
			if (sl == NULL) {
				o->failed = true;
				p4c_printf(o, "Invalid match key: Invalid LPM value %s, use '/' to separate prefix "
					   "and length\n", buf);
				return -1;
			}
			*sl = '\0';
			long long pl;
			if (parse_param(buf, bw, v, &why) != 0)
				goto bad;
			if (!parse_dec(sl + 1, &pl)) {
				o->failed = true;
				p4c_printf(o, "Error: invalid literal for int() with base 10: '%s'\n", sl + 1);
				return -1;
			}
			/* a prefix longer than the key (or negative) passes the
			 * CLI, which shows the entry; the switch then refuses it */
			if (pl < 0 || pl > (long long)bw)
				bad_prefix = true;
			e->prefix = bad_prefix ? -1 : (int)pl;
			uint32_t pad = ky->bytes * 8 - bw;
			for (uint32_t b = 0; !bad_prefix && b < (uint32_t)pl; b++)
				m[(pad + b) / 8] |= (uint8_t)(0x80u >> ((pad + b) % 8));
			p4c_printf(desc, "LPM-");
			hexcolon(desc, v, ky->bytes);
			p4c_printf(desc, "/%lld", pl);
			for (uint32_t b = 0; b < ky->bytes; b++)
				v[b] &= m[b];
			break;
		}
		case P4M_TERNARY:
		case P4M_OPTIONAL: {
			char *amp = strstr(buf, "&&&");
			if (amp == NULL) {
				o->failed = true;
				p4c_printf(o, "Invalid match key: Invalid ternary value %s, use '&&&' to separate "
					   "key and mask\n", buf);
				return -1;
			}
			*amp = '\0';
			if (parse_param(buf, bw, v, &why) != 0 || parse_param(amp + 3, bw, m, &why) != 0) {
				snprintf(buf, sizeof(buf), "%s", w[k]);
				goto bad;
			}
			p4c_printf(desc, "TERNARY-");
			hexcolon(desc, v, ky->bytes);
			p4c_printf(desc, " &&& ");
			hexcolon(desc, m, ky->bytes);
			break;
		}
		case P4M_RANGE: {
			char *ar = strstr(buf, "->");
			if (ar == NULL) {
				o->failed = true;
				p4c_printf(o, "Invalid match key: Invalid range value %s, use '->' to separate range "
					   "start and range end\n", buf);
				return -1;
			}
			*ar = '\0';
			/* the lo goes to mask, as the records keep it */
			if (parse_param(buf, bw, m, &why) != 0 || parse_param(ar + 2, bw, hi, &why) != 0) {
				snprintf(buf, sizeof(buf), "%s", w[k]);
				goto bad;
			}
			if (memcmp(m, hi, ky->bytes) > 0) {
				o->failed = true;
				p4c_printf(o, "Invalid match key: start is less than end in expression %s\n", w[k]);
				return -1;
			}
			memcpy(v, m, ky->bytes);
			p4c_printf(desc, "RANGE-");
			hexcolon(desc, m, ky->bytes);
			p4c_printf(desc, " -> ");
			hexcolon(desc, hi, ky->bytes);
			break;
		}
		case P4M_VALID:
			break;
		}
		/* a static mask of the key element */
		if (ky->mask != NULL && ky->match != P4M_RANGE)
			for (uint32_t b = 0; b < ky->bytes; b++)
				m[b] &= ky->mask[b];
		continue;
bad:
		o->failed = true;
		p4c_printf(o, "Invalid match key: Error while parsing %s - %s\n", buf, why);
		return -1;
	}
	(void)p;
	return bad_prefix ? P4C_BAD_KEY : 0;
}

/* Action data words into data; the "runtime data:" text into desc. */
static int parse_data(const struct p4_action *a, char **w, uint32_t n, uint8_t *data, struct p4c_out *o,
		      struct p4c_out *desc)
{
	if (n != a->n_params) {
		o->failed = true;
		p4c_printf(o, "Error: Action %s needs %u parameters\n", a->name, a->n_params);
		return -1;
	}
	memset(data, 0, a->data_bytes);
	for (uint32_t i = 0; i < n; i++) {
		const char *why = NULL;
		if (parse_param(w[i], a->params[i].width, data + a->params[i].byte_off, &why) != 0) {
			o->failed = true;
			p4c_printf(o, "Invalid runtime data: Error while parsing %s - %s\n", w[i], why);
			return -1;
		}
		if (desc) {
			if (i > 0)
				p4c_printf(desc, "\t");
			hexcolon(desc, data + a->params[i].byte_off, p4_bytes(a->params[i].width));
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Entries                                                                    */

static int entry_alloc(struct p4c_table *ct, const struct p4_table *t, uint32_t *h)
{
	if (ct->n >= t->max_size)
		return -ENOSPC;
	for (uint32_t i = 0; i < t->max_size; i++) {
		if (ct->e[i].used)
			continue;
		struct p4c_entry *e = &ct->e[i];
		if (e->key == NULL) {
			e->key = calloc(1, t->key_bytes + 1);
			e->mask = calloc(1, t->key_bytes + 1);
			e->hi = calloc(1, t->key_bytes + 1);
			e->data = calloc(1, t->data_bytes + 1);
			if (!e->key || !e->mask || !e->hi || !e->data)
				return -ENOMEM;
		}
		e->version = ct->versions[i];
		*h = i;
		return 0;
	}
	return -ENOSPC;
}

/* Is there an entry with the same match key (and, ternary, priority)? */
static int entry_find(const struct p4c_table *ct, const struct p4_table *t, const struct p4c_entry *n)
{
	for (uint32_t i = 0; i < ct->hwm; i++) {
		const struct p4c_entry *e = &ct->e[i];
		if (!e->used || e == n)
			continue;
		if (memcmp(e->key, n->key, t->key_bytes) != 0)
			continue;
		if (t->cls == P4TC_LPM && e->prefix != n->prefix)
			continue;
		if (t->cls == P4TC_TERNARY && (memcmp(e->mask, n->mask, t->key_bytes) != 0 ||
					       memcmp(e->hi, n->hi, t->key_bytes) != 0 ||
					       e->priority != n->priority))
			continue;
		return (int)i;
	}
	return -1;
}

/* Install entry h (just filled) into the data path's state. */
static int entry_commit(struct p4_inst *in, uint32_t t, uint32_t h, struct p4c_out *o)
{
	struct p4c_table *ct = &in->tables[t];
	const struct p4_table *tb = &in->prog->tables[t];
	struct p4c_entry *e = &ct->e[h];
	if (entry_find(ct, tb, e) >= 0)
		CLI_ERR(o, "Invalid table operation (DUPLICATE_ENTRY)\n");
	e->used = true;
	ct->n++;
	if (h + 1 > ct->hwm)
		ct->hwm = h + 1;
	if (tb->cls == P4TC_LPM && e->prefix >= 0)
		ct->lpm_count[e->prefix]++;
	int rc = p4c_table_write_entry(in, t, h);
	if (rc != 0) {
		e->used = false;
		ct->n--;
		if (tb->cls == P4TC_LPM && e->prefix >= 0)
			ct->lpm_count[e->prefix]--;
		CLI_ERR(o, "Invalid table operation (%s)\n", rc == -ENOSPC ? "TABLE_FULL" : "ERROR");
	}
	return 1;
}

/* The entry handle word: its index, or -1 (INVALID_HANDLE / EXPIRED_HANDLE
 * printed). */
static int entry_handle(struct p4c_table *ct, const struct p4_table *t, long long hv, struct p4c_out *o)
{
	uint32_t idx = (uint32_t)hv & 0x00ffffffu, ver = ((uint32_t)hv >> 24) & 0xff;
	if (hv < 0 || hv > 0xffffffffll || idx >= t->max_size || !ct->e[idx].used) {
		o->failed = true;
		p4c_printf(o, "Invalid table operation (INVALID_HANDLE)\n");
		return -1;
	}
	if (ct->e[idx].version != ver) {
		o->failed = true;
		p4c_printf(o, "Invalid table operation (EXPIRED_HANDLE)\n");
		return -1;
	}
	return (int)idx;
}

static void entry_free_slot(struct p4c_table *ct, uint32_t h)
{
	ct->e[h].used = false;
	ct->versions[h] = (uint8_t)(ct->e[h].version + 1);
	ct->n--;
}

/* ------------------------------------------------------------------------ */
/* Commands                                                                   */

struct cmd_ctx {
	struct p4_inst *in;
	const struct p4_prog *p;
	struct p4c_out *o;
	int argc;
	char **argv;
};

static int need_exact(struct cmd_ctx *c, int n)
{
	if (c->argc != n) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Wrong number of args, expected %d but got %d\n", n, c->argc);
		return -1;
	}
	return 0;
}

static int need_least(struct cmd_ctx *c, int n)
{
	if (c->argc < n) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Insufficient number of args\n");
		return -1;
	}
	return 0;
}

static int res_table(struct cmd_ctx *c, const char *word)
{
	int t = lookup(word, c->p->n_tables, tname, c->p);
	if (t < 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid table name (%s)\n", word);
	}
	return t;
}

static int res_profile(struct cmd_ctx *c, const char *word)
{
	int t = lookup(word, c->p->n_profiles, pname, c->p);
	if (t < 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid action profile name (%s)\n", word);
	}
	return t;
}

static int cmd_show_tables(struct cmd_ctx *c)
{
	if (need_exact(c, 0))
		return 0;
	const struct p4_prog *p = c->p;
	/* sorted by name */
	for (uint32_t done = 0; done < p->n_tables; done++) {
		int best = -1;
		for (uint32_t i = 0; i < p->n_tables && best < 0; i++) {
			uint32_t below = 0;
			for (uint32_t j = 0; j < p->n_tables; j++)
				below += strcmp(p->tables[j].name, p->tables[i].name) < 0;
			if (below == done)
				best = (int)i;
		}
		if (best < 0)
			break;
		const struct p4_table *t = &p->tables[best];
		char mk[1024] = "";
		size_t off = 0;
		for (uint32_t k = 0; k < t->n_keys; k++) {
			char kn[200];
			key_name(p, &t->keys[k], kn, sizeof(kn));
			const char *mt = is_valid_key(&t->keys[k]) ? "valid" :
					 t->keys[k].match == P4M_LPM ? "lpm" :
					 t->keys[k].match == P4M_RANGE ? "range" :
					 (t->keys[k].match == P4M_TERNARY || t->keys[k].match == P4M_OPTIONAL) ? "ternary" :
					 "exact";
			off += (size_t)snprintf(mk + off, off < sizeof(mk) ? sizeof(mk) - off : 0, "%s%s(%s, %u)",
						k ? ",\t" : "", kn, mt, t->keys[k].bits);
			if (off >= sizeof(mk))
				break;
		}
		char head[300];
		snprintf(head, sizeof(head), "%s", t->name);
		p4c_printf(c->o, "%-30s [implementation=%s, mk=%s]\n", head,
			   t->profile >= 0 ? p->profiles[t->profile].name : "None", mk);
	}
	return 0;
}

static void action_str(struct p4c_out *o, const struct p4_action *a)
{
	p4c_printf(o, "%-30s [", a->name);
	for (uint32_t i = 0; i < a->n_params; i++)
		p4c_printf(o, "%s%s(%u)", i ? ",\t" : "", a->params[i].name, a->params[i].width);
	p4c_printf(o, "]\n");
}

static int cmd_show_actions(struct cmd_ctx *c)
{
	if (need_exact(c, 0))
		return 0;
	const struct p4_prog *p = c->p;
	for (uint32_t done = 0; done < p->n_actions; done++)
		for (uint32_t i = 0; i < p->n_actions; i++) {
			uint32_t below = 0;
			for (uint32_t j = 0; j < p->n_actions; j++)
				below += strcmp(p->actions[j].name, p->actions[i].name) < 0;
			if (below == done) {
				action_str(c->o, &p->actions[i]);
				break;
			}
		}
	return 0;
}

static int cmd_table_show_actions(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	for (uint32_t done = 0; done < tb->n_actions; done++)
		for (uint32_t i = 0; i < tb->n_actions; i++) {
			uint32_t below = 0;
			for (uint32_t j = 0; j < tb->n_actions; j++)
				below += strcmp(c->p->actions[tb->actions[j]].name,
						c->p->actions[tb->actions[i]].name) < 0;
			if (below == done) {
				action_str(c->o, &c->p->actions[tb->actions[i]]);
				break;
			}
		}
	return 0;
}

static int cmd_table_add(struct cmd_ctx *c)
{
	if (need_least(c, 3))
		return 0;
	struct p4_inst *in = c->in;
	const struct p4_prog *p = c->p;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &p->tables[t];
	struct p4c_table *ct = &in->tables[t];
	int a = table_action(p, tb, c->argv[1]);
	if (a < 0)
		ERR(c->o, "Table %s has no action %s", c->argv[0], c->argv[1]);
	int argc = c->argc;
	int prio = 0;
	if (tb->cls == P4TC_TERNARY) {
		long long pv;
		if (!parse_dec(c->argv[argc - 1], &pv))
			ERR(c->o, "Table is ternary, but could not extract a valid priority from args");
		prio = (int)pv;
		argc--;
	}
	int idx = 2;
	while (idx < argc && strcmp(c->argv[idx], "=>") != 0)
		idx++;
	int nkey = idx - 2;
	if ((uint32_t)nkey != tb->n_keys)
		ERR(c->o, "Table %s needs %u key fields", c->argv[0], tb->n_keys);
	if (tb->impl != P4TI_SIMPLE)
		CLI_ERR(c->o, "Invalid table operation (WRONG_TABLE_TYPE)\n");
	uint8_t data[1100];
	struct p4c_out rd = { 0 }, mk = { 0 };
	int nd = idx < argc ? argc - idx - 1 : 0;
	if (parse_data(&p->actions[a], c->argv + idx + 1, (uint32_t)nd, data, c->o, &rd) != 0)
		goto out;
	struct p4c_entry tmp;
	uint8_t kb[256], mb[256], hb[256];
	memset(&tmp, 0, sizeof(tmp));
	tmp.key = kb;
	tmp.mask = mb;
	tmp.hi = hb;
	int krc = parse_key(p, tb, c->argv + 2, &tmp, c->o, &mk);
	if (krc < 0)
		goto out;
	p4c_printf(c->o, "Adding entry to %s match table %s\n", match_lower(tb->cls, tb), c->argv[0]);
	field20(c->o, "match key:");
	p4c_printf(c->o, "%.*s\n", (int)mk.len, mk.s ? mk.s : "");
	field20(c->o, "action:");
	p4c_printf(c->o, "%s\n", c->argv[1]);
	field20(c->o, "runtime data:");
	p4c_printf(c->o, "%.*s\n", (int)rd.len, rd.s ? rd.s : "");
	if (krc == P4C_BAD_KEY) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid table operation (BAD_MATCH_KEY)\n");
		goto out;
	}
	if (tb->const_entries) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid table operation (IMMUTABLE_TABLE_ENTRIES)\n");
		goto out;
	}
	uint32_t h;
	int rc = entry_alloc(ct, tb, &h);
	if (rc != 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid table operation (%s)\n", rc == -ENOSPC ? "TABLE_FULL" : "ERROR");
		goto out;
	}
	struct p4c_entry *e = &ct->e[h];
	memcpy(e->key, kb, tb->key_bytes);
	memcpy(e->mask, mb, tb->key_bytes);
	memcpy(e->hi, hb, tb->key_bytes);
	memcpy(e->data, data, p->actions[a].data_bytes);
	e->prefix = tmp.prefix;
	if (tb->cls == P4TC_LPM && e->prefix < 0)
		e->prefix = (int)tb->keys[tb->lpm_key].bits;
	e->priority = prio;
	e->action = a;
	e->ref = 0;
	if (entry_commit(in, (uint32_t)t, h, c->o) == 1)
		p4c_printf(c->o, "Entry has been added with handle %u\n", p4c_handle(ct, h));
out:
	free(rd.s);
	free(mk.s);
	return 0;
}

static int cmd_table_modify(struct cmd_ctx *c)
{
	if (need_least(c, 3))
		return 0;
	struct p4_inst *in = c->in;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &in->tables[t];
	int a = table_action(c->p, tb, c->argv[1]);
	if (a < 0)
		ERR(c->o, "Table %s has no action %s", c->argv[0], c->argv[1]);
	long long hv;
	if (!parse_dec(c->argv[2], &hv))
		ERR(c->o, "Bad format for entry handle");
	int first = 3;
	if (c->argc > 3 && !strcmp(c->argv[3], "=>"))
		first = 4;
	uint8_t data[1100];
	if (parse_data(&c->p->actions[a], c->argv + first, (uint32_t)(c->argc - first), data, c->o, NULL))
		return 0;
	p4c_printf(c->o, "Modifying entry %lld for %s match table %s\n", hv, match_lower(tb->cls, tb),
		   c->argv[0]);
	int h = entry_handle(ct, tb, hv, c->o);
	if (h < 0)
		return 0;
	if (tb->const_entries)
		CLI_ERR(c->o, "Invalid table operation (IMMUTABLE_TABLE_ENTRIES)\n");
	struct p4c_entry *e = &ct->e[h];
	e->action = a;
	memcpy(e->data, data, c->p->actions[a].data_bytes);
	if (p4c_table_write_entry(in, (uint32_t)t, (uint32_t)h) != 0)
		CLI_ERR(c->o, "Invalid table operation (ERROR)\n");
	return 0;
}

static int cmd_table_delete(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &c->in->tables[t];
	long long hv;
	if (!parse_dec(c->argv[1], &hv))
		ERR(c->o, "Bad format for entry handle");
	p4c_printf(c->o, "Deleting entry %lld from %s\n", hv, c->argv[0]);
	int h = entry_handle(ct, tb, hv, c->o);
	if (h < 0)
		return 0;
	if (tb->const_entries)
		CLI_ERR(c->o, "Invalid table operation (IMMUTABLE_TABLE_ENTRIES)\n");
	struct p4c_entry *e = &ct->e[h];
	entry_free_slot(ct, (uint32_t)h);
	if (tb->cls == P4TC_LPM && e->prefix >= 0)
		ct->lpm_count[e->prefix]--;
	p4c_table_erase_entry(c->in, (uint32_t)t, (uint32_t)h);
	return 0;
}

static int cmd_table_clear(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &c->in->tables[t];
	if (tb->const_entries)
		CLI_ERR(c->o, "Invalid table operation (IMMUTABLE_TABLE_ENTRIES)\n");
	for (uint32_t h = 0; h < ct->hwm; h++) {
		if (!ct->e[h].used)
			continue;
		entry_free_slot(ct, h);
		if (tb->cls == P4TC_LPM && ct->e[h].prefix >= 0)
			ct->lpm_count[ct->e[h].prefix]--;
		if (tb->cls != P4TC_TERNARY)
			p4c_table_erase_entry(c->in, (uint32_t)t, h);
	}
	if (tb->cls == P4TC_TERNARY)
		p4c_ternary_sync(c->in, (uint32_t)t);
	return 0;
}

static int cmd_table_num_entries(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	p4c_printf(c->o, "%u\n", c->in->tables[t].n);
	return 0;
}

static int default_is_const(struct cmd_ctx *c, const struct p4_table *tb, int a)
{
	if (tb->has_default && tb->default_entry_const)
		CLI_ERR(c->o, "Invalid table operation (DEFAULT_ENTRY_IS_CONST)\n");
	if (tb->has_default && tb->default_const && a != tb->def.action)
		CLI_ERR(c->o, "Invalid table operation (DEFAULT_ACTION_IS_CONST)\n");
	return 0;
}

static int cmd_table_set_default(struct cmd_ctx *c)
{
	if (need_least(c, 2))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &c->in->tables[t];
	int a = table_action(c->p, tb, c->argv[1]);
	if (a < 0)
		ERR(c->o, "Table %s has no action %s", c->argv[0], c->argv[1]);
	if ((uint32_t)(c->argc - 2) != c->p->actions[a].n_params)
		ERR(c->o, "Action %s needs %u parameters", c->argv[1], c->p->actions[a].n_params);
	uint8_t data[1100];
	struct p4c_out rd = { 0 };
	if (parse_data(&c->p->actions[a], c->argv + 2, (uint32_t)(c->argc - 2), data, c->o, &rd) != 0) {
		free(rd.s);
		return 0;
	}
	p4c_printf(c->o, "Setting default action of %s\n", c->argv[0]);
	field20(c->o, "action:");
	p4c_printf(c->o, "%s\n", c->argv[1]);
	field20(c->o, "runtime data:");
	p4c_printf(c->o, "%.*s\n", (int)rd.len, rd.s ? rd.s : "");
	free(rd.s);
	if (tb->impl != P4TI_SIMPLE)
		CLI_ERR(c->o, "Invalid table operation (WRONG_TABLE_TYPE)\n");
	if (default_is_const(c, tb, a) || c->o->failed)
		return 0;
	ct->def_set = true;
	ct->def_action = a;
	ct->def_ref = 0;
	memcpy(ct->def_data, data, c->p->actions[a].data_bytes);
	if (p4c_default_sync(c->in, (uint32_t)t) != 0)
		CLI_ERR(c->o, "Invalid table operation (ERROR)\n");
	return 0;
}

static int cmd_table_reset_default(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	if (tb->has_default && tb->default_entry_const)
		CLI_ERR(c->o, "Invalid table operation (DEFAULT_ENTRY_IS_CONST)\n");
	c->in->tables[t].def_set = false;
	p4c_default_sync(c->in, (uint32_t)t);
	return 0;
}

static void dump_action(struct cmd_ctx *c, int a, uint32_t ref, const uint8_t *data)
{
	if (a == P4_IND_MEMBER) {
		p4c_printf(c->o, "Index: member(%u)\n", ref);
		return;
	}
	if (a == P4_IND_GROUP) {
		p4c_printf(c->o, "Index: group(%u)\n", ref);
		return;
	}
	if (a < 0) {
		p4c_printf(c->o, "EMPTY\n");
		return;
	}
	const struct p4_action *ac = &c->p->actions[a];
	p4c_printf(c->o, "Action entry: %s - ", ac->name);
	for (uint32_t i = 0; i < ac->n_params; i++) {
		if (i > 0)
			p4c_printf(c->o, ", ");
		hexmin(c->o, data + ac->params[i].byte_off, p4_bytes(ac->params[i].width));
	}
	p4c_printf(c->o, "\n");
}

static void dump_entry(struct cmd_ctx *c, const struct p4_table *tb, const struct p4c_table *ct, uint32_t h)
{
	const struct p4c_entry *e = &ct->e[h];
	uint32_t w = 20;
	char kn[200];
	for (uint32_t k = 0; k < tb->n_keys; k++) {
		key_name(c->p, &tb->keys[k], kn, sizeof(kn));
		if (strlen(kn) > w)
			w = (uint32_t)strlen(kn);
	}
	p4c_printf(c->o, "Dumping entry 0x%x\n", p4c_handle(ct, h));
	p4c_printf(c->o, "Match key:\n");
	for (uint32_t k = 0; k < tb->n_keys; k++) {
		const struct p4_key *ky = &tb->keys[k];
		key_name(c->p, ky, kn, sizeof(kn));
		const char *mt = is_valid_key(ky) ? "VALID" : match_upper(ky->match);
		p4c_printf(c->o, "* %-*s: %-10s", (int)w, kn, mt);
		if (is_valid_key(ky)) {
			p4c_printf(c->o, "%s\n", e->key[ky->off + ky->bytes - 1] ? "01" : "00");
		} else if (ky->match == P4M_LPM) {
			hexplain(c->o, e->key + ky->off, ky->bytes);
			p4c_printf(c->o, "/%d\n", e->prefix);
		} else if (ky->match == P4M_TERNARY || ky->match == P4M_OPTIONAL) {
			hexplain(c->o, e->key + ky->off, ky->bytes);
			p4c_printf(c->o, " &&& ");
			hexplain(c->o, e->mask + ky->off, ky->bytes);
			p4c_printf(c->o, "\n");
		} else if (ky->match == P4M_RANGE) {
			hexplain(c->o, e->mask + ky->off, ky->bytes);
			p4c_printf(c->o, " -> ");
			hexplain(c->o, e->hi + ky->off, ky->bytes);
			p4c_printf(c->o, "\n");
		} else {
			hexplain(c->o, e->key + ky->off, ky->bytes);
			p4c_printf(c->o, "\n");
		}
	}
	if (tb->cls == P4TC_TERNARY)
		p4c_printf(c->o, "Priority: %d\n", e->priority);
	dump_action(c, e->action, e->ref, e->data);
}

static void dump_profile(struct cmd_ctx *c, uint32_t prof)
{
	const struct p4c_profile *pr = &c->in->profs[prof];
	p4c_printf(c->o, "==========\nMEMBERS\n");
	for (uint32_t h = 0; h < pr->n_mbr_hwm; h++) {
		if (!pr->mbr[h].used)
			continue;
		p4c_printf(c->o, "**********\nDumping member %u\n", h);
		dump_action(c, pr->mbr[h].action, 0, pr->mbr[h].data);
	}
	if (c->p->profiles[prof].selector) {
		p4c_printf(c->o, "==========\nGROUPS\n");
		for (uint32_t h = 0; h < pr->n_grp_hwm; h++) {
			if (!pr->grp[h].used)
				continue;
			p4c_printf(c->o, "**********\nDumping group %u\nMembers: [", h);
			for (uint32_t i = 0; i < pr->grp[h].n; i++)
				p4c_printf(c->o, "%s%u", i ? ", " : "", pr->grp[h].m[i]);
			p4c_printf(c->o, "]\n");
		}
	}
}

static int cmd_table_dump(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	const struct p4c_table *ct = &c->in->tables[t];
	p4c_printf(c->o, "==========\nTABLE ENTRIES\n");
	for (uint32_t h = 0; h < ct->hwm; h++) {
		if (!ct->e[h].used)
			continue;
		p4c_printf(c->o, "**********\n");
		dump_entry(c, tb, ct, h);
	}
	if (tb->profile >= 0)
		dump_profile(c, (uint32_t)tb->profile);
	p4c_printf(c->o, "==========\nDumping default entry\n");
	if (ct->def_set)
		dump_action(c, ct->def_action, ct->def_ref, ct->def_data);
	else if (tb->has_default)
		dump_action(c, tb->def.action, 0, tb->def.data);
	else
		dump_action(c, -1, 0, NULL);
	p4c_printf(c->o, "==========\n");
	return 0;
}

static int cmd_table_dump_entry(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	long long hv;
	if (!parse_dec(c->argv[1], &hv))
		ERR(c->o, "Bad format for entry handle");
	int h = entry_handle(&c->in->tables[t], &c->p->tables[t], hv, c->o);
	if (h < 0)
		return 0;
	dump_entry(c, &c->p->tables[t], &c->in->tables[t], (uint32_t)h);
	return 0;
}

static int cmd_table_dump_entry_from_key(struct cmd_ctx *c)
{
	if (need_least(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &c->in->tables[t];
	int argc = c->argc, prio = 0;
	if (tb->cls == P4TC_TERNARY) {
		long long pv;
		if (!parse_dec(c->argv[argc - 1], &pv))
			ERR(c->o, "Table is ternary, but could not extract a valid priority from args");
		prio = (int)pv;
		argc--;
	}
	if ((uint32_t)(argc - 1) != tb->n_keys)
		ERR(c->o, "Table %s needs %u key fields", c->argv[0], tb->n_keys);
	uint8_t kb[256], mb[256], hb[256];
	struct p4c_entry tmp = { .key = kb, .mask = mb, .hi = hb, .priority = prio };
	struct p4c_out mk = { 0 };
	int rc = parse_key(c->p, tb, c->argv + 1, &tmp, c->o, &mk);
	free(mk.s);
	if (rc < 0)
		return 0;
	if (rc == P4C_BAD_KEY)
		CLI_ERR(c->o, "Invalid table operation (BAD_MATCH_KEY)\n");
	if (tb->cls == P4TC_LPM && tmp.prefix < 0)
		tmp.prefix = (int)tb->keys[tb->lpm_key].bits;
	int h = entry_find(ct, tb, &tmp);
	if (h < 0)
		CLI_ERR(c->o, "Invalid table operation (BAD_MATCH_KEY)\n");
	dump_entry(c, tb, ct, (uint32_t)h);
	return 0;
}

static int cmd_table_info(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	char *saved = c->argv[0];
	c->argc = 0;
	/* the table's line as show_tables prints it */
	const struct p4_prog *p = c->p;
	const struct p4_table *tb = &p->tables[t];
	char mk[1024] = "";
	size_t off = 0;
	for (uint32_t k = 0; k < tb->n_keys && off < sizeof(mk); k++) {
		char kn[200];
		key_name(p, &tb->keys[k], kn, sizeof(kn));
		const char *mt = is_valid_key(&tb->keys[k]) ? "valid" : tb->keys[k].match == P4M_LPM ? "lpm" :
				 tb->keys[k].match == P4M_RANGE ? "range" : tb->keys[k].match == P4M_EXACT ? "exact" :
				 "ternary";
		off += (size_t)snprintf(mk + off, sizeof(mk) - off, "%s%s(%s, %u)", k ? ",\t" : "", kn, mt,
					tb->keys[k].bits);
	}
	p4c_printf(c->o, "%-30s [implementation=%s, mk=%s]\n", tb->name,
		   tb->profile >= 0 ? p->profiles[tb->profile].name : "None", mk);
	p4c_printf(c->o, "********************************************************************************\n");
	c->argc = 1;
	c->argv[0] = saved;
	return cmd_table_show_actions(c);
}

static int cmd_table_set_timeout(struct cmd_ctx *c)
{
	if (need_exact(c, 3))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	if (!c->p->tables[t].support_timeout)
		ERR(c->o, "Table %s does not support entry timeouts", c->argv[0]);
	ERR(c->o, "innet does not age table entries (idle timeouts are not supported)");
}

/* ---- action profiles ---------------------------------------------------- */

static int cmd_act_prof_create_member(struct cmd_ctx *c)
{
	if (need_least(c, 2))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr < 0)
		return 0;
	int a = profile_action(c->p, (uint32_t)pr, c->argv[1]);
	if (a < 0)
		ERR(c->o, "Action profile '%s' has no action '%s'", c->argv[0], c->argv[1]);
	uint8_t data[1100];
	if (parse_data(&c->p->actions[a], c->argv + 2, (uint32_t)(c->argc - 2), data, c->o, NULL))
		return 0;
	struct p4c_profile *P = &c->in->profs[pr];
	uint32_t max = c->p->profiles[pr].max_size;
	uint32_t h = 0;
	while (h < max && P->mbr[h].used)
		h++;
	if (h >= max)
		CLI_ERR(c->o, "Invalid table operation (TABLE_FULL)\n");
	struct p4c_member *m = &P->mbr[h];
	if (m->data == NULL && (m->data = calloc(1, c->in->lay.prof_data + 8)) == NULL)
		CLI_ERR(c->o, "Invalid table operation (ERROR)\n");
	m->used = true;
	m->action = a;
	memcpy(m->data, data, c->p->actions[a].data_bytes);
	if (h + 1 > P->n_mbr_hwm)
		P->n_mbr_hwm = h + 1;
	p4c_member_sync(c->in, (uint32_t)pr, h);
	p4c_printf(c->o, "Member has been created with handle %u\n", h);
	return 0;
}

static bool member_in_use(struct cmd_ctx *c, uint32_t pr, uint32_t h)
{
	for (uint32_t t = 0; t < c->p->n_tables; t++) {
		if (c->p->tables[t].profile != (int)pr)
			continue;
		const struct p4c_table *ct = &c->in->tables[t];
		for (uint32_t i = 0; i < ct->hwm; i++)
			if (ct->e[i].used && ct->e[i].action == P4_IND_MEMBER && ct->e[i].ref == h)
				return true;
		if (ct->def_set && ct->def_action == P4_IND_MEMBER && ct->def_ref == h)
			return true;
	}
	const struct p4c_profile *P = &c->in->profs[pr];
	for (uint32_t g = 0; g < P->n_grp_hwm; g++)
		for (uint32_t i = 0; P->grp[g].used && i < P->grp[g].n; i++)
			if (P->grp[g].m[i] == h)
				return true;
	return false;
}

static int member_arg(struct cmd_ctx *c, uint32_t pr, const char *s, uint32_t *h)
{
	long long v;
	if (!parse_dec(s, &v)) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Bad format for member handle\n");
		return -1;
	}
	if (v < 0 || (uint64_t)v >= c->in->profs[pr].n_mbr_hwm || !c->in->profs[pr].mbr[v].used) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid table operation (INVALID_MBR_HANDLE)\n");
		return -1;
	}
	*h = (uint32_t)v;
	return 0;
}

static int group_arg(struct cmd_ctx *c, uint32_t pr, const char *s, uint32_t *h)
{
	long long v;
	if (!parse_dec(s, &v)) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Bad format for group handle\n");
		return -1;
	}
	if (v < 0 || (uint64_t)v >= c->in->profs[pr].n_grp_hwm || !c->in->profs[pr].grp[v].used) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid table operation (INVALID_GRP_HANDLE)\n");
		return -1;
	}
	*h = (uint32_t)v;
	return 0;
}

static int cmd_act_prof_delete_member(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	uint32_t h;
	if (pr < 0 || member_arg(c, (uint32_t)pr, c->argv[1], &h) != 0)
		return 0;
	if (member_in_use(c, (uint32_t)pr, h))
		CLI_ERR(c->o, "Invalid table operation (MBR_STILL_USED)\n");
	c->in->profs[pr].mbr[h].used = false;
	p4c_member_sync(c->in, (uint32_t)pr, h);
	return 0;
}

static int cmd_act_prof_modify_member(struct cmd_ctx *c)
{
	if (need_least(c, 3))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr < 0)
		return 0;
	int a = profile_action(c->p, (uint32_t)pr, c->argv[1]);
	if (a < 0)
		ERR(c->o, "Action profile '%s' has no action '%s'", c->argv[0], c->argv[1]);
	uint32_t h;
	if (member_arg(c, (uint32_t)pr, c->argv[2], &h) != 0)
		return 0;
	int first = c->argc > 3 && !strcmp(c->argv[3], "=>") ? 4 : 3;
	uint8_t data[1100];
	if (parse_data(&c->p->actions[a], c->argv + first, (uint32_t)(c->argc - first), data, c->o, NULL))
		return 0;
	struct p4c_member *m = &c->in->profs[pr].mbr[h];
	m->action = a;
	memcpy(m->data, data, c->p->actions[a].data_bytes);
	p4c_member_sync(c->in, (uint32_t)pr, h);
	return 0;
}

static int cmd_act_prof_create_group(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr < 0)
		return 0;
	if (!c->p->profiles[pr].selector)
		ERR(c->o, "Cannot run this command on an action profile without selector");
	struct p4c_profile *P = &c->in->profs[pr];
	uint32_t max = c->p->profiles[pr].max_size, h = 0;
	while (h < max && P->grp[h].used)
		h++;
	if (h >= max)
		CLI_ERR(c->o, "Invalid table operation (TABLE_FULL)\n");
	P->grp[h].used = true;
	P->grp[h].n = 0;
	if (h + 1 > P->n_grp_hwm)
		P->n_grp_hwm = h + 1;
	p4c_group_sync(c->in, (uint32_t)pr, h);
	p4c_printf(c->o, "Group has been created with handle %u\n", h);
	return 0;
}

static int cmd_act_prof_delete_group(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr < 0)
		return 0;
	if (!c->p->profiles[pr].selector)
		ERR(c->o, "Cannot run this command on an action profile without selector");
	uint32_t h;
	if (group_arg(c, (uint32_t)pr, c->argv[1], &h) != 0)
		return 0;
	for (uint32_t t = 0; t < c->p->n_tables; t++) {
		if (c->p->tables[t].profile != pr)
			continue;
		const struct p4c_table *ct = &c->in->tables[t];
		for (uint32_t i = 0; i < ct->hwm; i++)
			if (ct->e[i].used && ct->e[i].action == P4_IND_GROUP && ct->e[i].ref == h)
				CLI_ERR(c->o, "Invalid table operation (GRP_STILL_USED)\n");
	}
	c->in->profs[pr].grp[h].used = false;
	p4c_group_sync(c->in, (uint32_t)pr, h);
	return 0;
}

static int cmd_act_prof_member_group(struct cmd_ctx *c, bool add)
{
	if (need_exact(c, 3))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr < 0)
		return 0;
	if (!c->p->profiles[pr].selector)
		ERR(c->o, "Cannot run this command on an action profile without selector");
	uint32_t m, g;
	if (member_arg(c, (uint32_t)pr, c->argv[1], &m) != 0 || group_arg(c, (uint32_t)pr, c->argv[2], &g) != 0)
		return 0;
	struct p4c_group *G = &c->in->profs[pr].grp[g];
	uint32_t i = 0;
	while (i < G->n && G->m[i] != m)
		i++;
	if (add) {
		if (i < G->n)
			CLI_ERR(c->o, "Invalid table operation (MBR_ALREADY_IN_GRP)\n");
		if (G->n >= P4_GROUP_MAX)
			CLI_ERR(c->o, "Invalid table operation (TABLE_FULL)\n");
		/* in member-handle order, as BMv2 keeps a group (a sorted set of
		 * handles): the selector's hash picks the n-th member of it */
		uint32_t at = 0;
		while (at < G->n && G->m[at] < m)
			at++;
		memmove(&G->m[at + 1], &G->m[at], (G->n - at) * sizeof(G->m[0]));
		G->m[at] = m;
		G->n++;
	} else {
		if (i == G->n)
			CLI_ERR(c->o, "Invalid table operation (MBR_NOT_IN_GRP)\n");
		memmove(&G->m[i], &G->m[i + 1], (G->n - i - 1) * sizeof(G->m[0]));
		G->n--;
	}
	p4c_group_sync(c->in, (uint32_t)pr, g);
	return 0;
}

static int cmd_act_prof_add_member_to_group(struct cmd_ctx *c)
{
	return cmd_act_prof_member_group(c, true);
}

static int cmd_act_prof_remove_member_from_group(struct cmd_ctx *c)
{
	return cmd_act_prof_member_group(c, false);
}

static int cmd_act_prof_dump(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	if (pr >= 0)
		dump_profile(c, (uint32_t)pr);
	return 0;
}

static int cmd_act_prof_dump_member(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	uint32_t h;
	if (pr < 0 || member_arg(c, (uint32_t)pr, c->argv[1], &h) != 0)
		return 0;
	p4c_printf(c->o, "Dumping member %u\n", h);
	dump_action(c, c->in->profs[pr].mbr[h].action, 0, c->in->profs[pr].mbr[h].data);
	return 0;
}

static int cmd_act_prof_dump_group(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int pr = res_profile(c, c->argv[0]);
	uint32_t h;
	if (pr < 0 || group_arg(c, (uint32_t)pr, c->argv[1], &h) != 0)
		return 0;
	const struct p4c_group *G = &c->in->profs[pr].grp[h];
	p4c_printf(c->o, "Dumping group %u\nMembers: [", h);
	for (uint32_t i = 0; i < G->n; i++)
		p4c_printf(c->o, "%s%u", i ? ", " : "", G->m[i]);
	p4c_printf(c->o, "]\n");
	return 0;
}

/* table_indirect_add(_with_group) TABLE KEY... => HANDLE [PRIORITY] */
static int indirect_add(struct cmd_ctx *c, bool group)
{
	if (need_least(c, 2))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	struct p4c_table *ct = &c->in->tables[t];
	if (tb->impl == P4TI_SIMPLE || (group && tb->impl != P4TI_INDIRECT_WS))
		ERR(c->o, "%s", group ? "Cannot run this command on non-indirect table, or on indirect table "
					"with no selector" : "Cannot run this command on non-indirect table");
	int argc = c->argc, prio = 0;
	if (tb->cls == P4TC_TERNARY) {
		long long pv;
		if (!parse_dec(c->argv[argc - 1], &pv))
			ERR(c->o, "Table is ternary, but could not extract a valid priority from args");
		prio = (int)pv;
		argc--;
	}
	int idx = 1;
	while (idx < argc && strcmp(c->argv[idx], "=>") != 0)
		idx++;
	if (argc != idx + 2)
		ERR(c->o, "Invalid arguments, could not find handle");
	long long hv;
	if (!parse_dec(c->argv[idx + 1], &hv))
		ERR(c->o, "Bad format for handle");
	if ((uint32_t)(idx - 1) != tb->n_keys)
		ERR(c->o, "Table %s needs %u key fields", c->argv[0], tb->n_keys);
	uint8_t kb[256], mb[256], hb[256];
	struct p4c_entry tmp = { .key = kb, .mask = mb, .hi = hb };
	struct p4c_out mk = { 0 };
	int rc = parse_key(c->p, tb, c->argv + 1, &tmp, c->o, &mk);
	free(mk.s);
	if (rc < 0)
		return 0;
	p4c_printf(c->o, "Adding entry to indirect match table %s\n", tb->name);
	if (rc == P4C_BAD_KEY)
		CLI_ERR(c->o, "Invalid table operation (BAD_MATCH_KEY)\n");
	uint32_t ref;
	if (group ? group_arg(c, (uint32_t)tb->profile, c->argv[idx + 1], &ref)
		  : member_arg(c, (uint32_t)tb->profile, c->argv[idx + 1], &ref))
		return 0;
	uint32_t h;
	if ((rc = entry_alloc(ct, tb, &h)) != 0)
		CLI_ERR(c->o, "Invalid table operation (%s)\n", rc == -ENOSPC ? "TABLE_FULL" : "ERROR");
	struct p4c_entry *e = &ct->e[h];
	memcpy(e->key, kb, tb->key_bytes);
	memcpy(e->mask, mb, tb->key_bytes);
	memcpy(e->hi, hb, tb->key_bytes);
	e->prefix = tmp.prefix;
	if (tb->cls == P4TC_LPM && e->prefix < 0)
		e->prefix = (int)tb->keys[tb->lpm_key].bits;
	e->priority = prio;
	e->action = group ? P4_IND_GROUP : P4_IND_MEMBER;
	e->ref = ref;
	if (entry_commit(c->in, (uint32_t)t, h, c->o) == 1)
		p4c_printf(c->o, "Entry has been added with handle %u\n", p4c_handle(ct, h));
	return 0;
}

static int cmd_table_indirect_add(struct cmd_ctx *c)
{
	return indirect_add(c, false);
}

static int cmd_table_indirect_add_with_group(struct cmd_ctx *c)
{
	return indirect_add(c, true);
}

static int cmd_table_indirect_set_default_common(struct cmd_ctx *c, bool group)
{
	if (need_exact(c, 2))
		return 0;
	int t = res_table(c, c->argv[0]);
	if (t < 0)
		return 0;
	const struct p4_table *tb = &c->p->tables[t];
	if (tb->impl == P4TI_SIMPLE || (group && tb->impl != P4TI_INDIRECT_WS))
		ERR(c->o, "Cannot run this command on non-indirect table");
	uint32_t ref;
	if (group ? group_arg(c, (uint32_t)tb->profile, c->argv[1], &ref)
		  : member_arg(c, (uint32_t)tb->profile, c->argv[1], &ref))
		return 0;
	struct p4c_table *ct = &c->in->tables[t];
	ct->def_set = true;
	ct->def_action = group ? P4_IND_GROUP : P4_IND_MEMBER;
	ct->def_ref = ref;
	p4c_default_sync(c->in, (uint32_t)t);
	return 0;
}

static int cmd_table_indirect_set_default(struct cmd_ctx *c)
{
	return cmd_table_indirect_set_default_common(c, false);
}

static int cmd_table_indirect_set_default_with_group(struct cmd_ctx *c)
{
	return cmd_table_indirect_set_default_common(c, true);
}

/* ---- counters, registers, meters ----------------------------------------- */

static int res_counter(struct cmd_ctx *c, const char *w)
{
	int i = lookup(w, c->p->n_counters, cname, c->p);
	if (i < 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid counter name (%s)\n", w);
	}
	return i;
}

/* The words of counter i at index idx (direct: entry handle idx); -1 bad index. */
static int64_t counter_word(struct cmd_ctx *c, int i, long long idx)
{
	const struct p4_counter *k = &c->p->counters[i];
	if (k->direct) {
		const struct p4c_table *ct = &c->in->tables[k->table];
		uint32_t h = (uint32_t)idx & 0xffffffu;
		if (idx < 0 || h >= c->p->tables[k->table].max_size || !ct->e[h].used)
			return -1;
		return (int64_t)c->in->lay.tables[k->table].dc_word + 2 * h;
	}
	if (idx < 0 || (uint64_t)idx >= k->size)
		return -1;
	return (int64_t)c->in->lay.counter_word[i] + 2 * idx;
}

static int cmd_counter_read(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int i = res_counter(c, c->argv[0]);
	if (i < 0)
		return 0;
	long long idx;
	if (!parse_dec(c->argv[1], &idx))
		ERR(c->o, "Bad format for index");
	const struct p4_counter *k = &c->p->counters[i];
	if (k->direct)
		p4c_printf(c->o, "this is the direct counter for table %s\n", c->p->tables[k->table].name);
	int64_t w = counter_word(c, i, idx);
	if (w < 0)
		CLI_ERR(c->o, "%s\n", k->direct ? "Invalid table operation (INVALID_HANDLE)"
					     : "Invalid counter operation (INVALID_INDEX)");
	uint64_t bytes = 0, pkts = 0;
	innet_cp_reg_read(c->in->cp, (unsigned)c->in->lay.r_words, (uint32_t)w, &bytes);
	innet_cp_reg_read(c->in->cp, (unsigned)c->in->lay.r_words, (uint32_t)w + 1, &pkts);
	p4c_printf(c->o, "%s[%lld]= (%llu bytes, %llu packets)\n", c->argv[0], idx, (unsigned long long)bytes,
		   (unsigned long long)pkts);
	return 0;
}

static int cmd_counter_write(struct cmd_ctx *c)
{
	if (need_exact(c, 4))
		return 0;
	int i = res_counter(c, c->argv[0]);
	if (i < 0)
		return 0;
	long long idx, pk, by;
	if (!parse_dec(c->argv[1], &idx))
		ERR(c->o, "Bad format for index");
	if (!parse_dec(c->argv[2], &pk))
		ERR(c->o, "Bad format for packets");
	if (!parse_dec(c->argv[3], &by))
		ERR(c->o, "Bad format for bytes");
	const struct p4_counter *k = &c->p->counters[i];
	if (k->direct)
		p4c_printf(c->o, "writing to direct counter for table %s\n", c->p->tables[k->table].name);
	int64_t w = counter_word(c, i, idx);
	if (w < 0)
		CLI_ERR(c->o, "%s\n", k->direct ? "Invalid table operation (INVALID_HANDLE)"
					     : "Invalid counter operation (INVALID_INDEX)");
	innet_cp_reg_write(c->in->cp, (unsigned)c->in->lay.r_words, (uint32_t)w, (uint64_t)by);
	innet_cp_reg_write(c->in->cp, (unsigned)c->in->lay.r_words, (uint32_t)w + 1, (uint64_t)pk);
	p4c_printf(c->o, "%s[%lld] has been updated\n", c->argv[0], idx);
	return 0;
}

static int cmd_counter_reset(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int i = res_counter(c, c->argv[0]);
	if (i < 0)
		return 0;
	const struct p4_counter *k = &c->p->counters[i];
	uint32_t base, n;
	if (k->direct) {
		p4c_printf(c->o, "this is the direct counter for table %s\n", c->p->tables[k->table].name);
		base = c->in->lay.tables[k->table].dc_word;
		n = 2 * c->p->tables[k->table].max_size;
	} else {
		base = c->in->lay.counter_word[i];
		n = 2 * k->size;
	}
	for (uint32_t j = 0; j < n; j++)
		innet_cp_reg_write(c->in->cp, (unsigned)c->in->lay.r_words, base + j, 0);
	return 0;
}

static int res_register(struct cmd_ctx *c, const char *w)
{
	int i = lookup(w, c->p->n_registers, rname, c->p);
	if (i < 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid register name (%s)\n", w);
	}
	return i;
}

static p4_u128 reg_get(struct cmd_ctx *c, int r, uint32_t idx)
{
	const struct p4_rlayout *rl = &c->in->lay.regs[r];
	if (rl->elem == 16) {
		p4_u128 v = 0;
		innet_cp_reg_read_bytes(c->in->cp, (unsigned)rl->ireg, rl->base + idx, &v, 16);
		return v;
	}
	uint64_t v = 0;
	innet_cp_reg_read(c->in->cp, (unsigned)rl->ireg, rl->base + idx, &v);
	return v;
}

static void reg_set_wide(struct cmd_ctx *c, int r, uint32_t idx, const uint8_t *be);

static void reg_set(struct cmd_ctx *c, int r, uint32_t idx, p4_u128 v)
{
	const struct p4_rlayout *rl = &c->in->lay.regs[r];
	if (rl->elem > 16) { /* (zeros only: reset) */
		uint8_t be[P4_MAX_FIELD_BITS / 8] = { 0 };
		p4_st_be(be + rl->elem - 16, 16, v);
		return reg_set_wide(c, r, idx, be);
	}
	uint32_t w = c->p->registers[r].width;
	v &= w >= 128 ? ~(p4_u128)0 : (((p4_u128)1 << w) - 1);
	if (rl->elem == 16)
		innet_cp_reg_write_bytes(c->in->cp, (unsigned)rl->ireg, rl->base + idx, &v, 16);
	else
		innet_cp_reg_write(c->in->cp, (unsigned)rl->ireg, rl->base + idx, (uint64_t)v);
}

/* A register wider than 128 bits: element idx as its big-endian bytes
 * (rl->elem of them), or zeros written. */
static void reg_get_wide(struct cmd_ctx *c, int r, uint32_t idx, uint8_t *be)
{
	const struct p4_rlayout *rl = &c->in->lay.regs[r];
	memset(be, 0, rl->elem);
	innet_cp_reg_read_bytes(c->in->cp, (unsigned)rl->ireg, rl->base + idx, be, rl->elem);
}

static void reg_set_wide(struct cmd_ctx *c, int r, uint32_t idx, const uint8_t *be)
{
	const struct p4_rlayout *rl = &c->in->lay.regs[r];
	innet_cp_reg_write_bytes(c->in->cp, (unsigned)rl->ireg, rl->base + idx, be, rl->elem);
}

/* The decimal of n big-endian bytes (n <= P4_MAX_FIELD_BITS / 8), as
 * Python prints an int: every register value the CLI prints. */
static void print_be(struct p4c_out *o, const uint8_t *be, uint32_t n)
{
	uint8_t x[P4_MAX_FIELD_BITS / 8];
	char buf[P4_MAX_FIELD_BITS / 3 + 4];
	memcpy(x, be, n);
	int i = (int)sizeof(buf) - 1;
	buf[i] = '\0';
	bool zero;
	do {
		unsigned rem = 0;
		zero = true;
		for (uint32_t k = 0; k < n; k++) {
			unsigned cur = rem << 8 | x[k];
			x[k] = (uint8_t)(cur / 10);
			rem = cur % 10;
			zero = zero && x[k] == 0;
		}
		buf[--i] = (char)('0' + rem);
	} while (!zero && i > 0);
	p4c_printf(o, "%s", buf + i);
}

static void print_reg(struct cmd_ctx *c, int r, uint32_t idx)
{
	uint32_t n = c->in->lay.regs[r].elem;
	uint8_t be[P4_MAX_FIELD_BITS / 8];
	if (n <= 16) {
		n = 16;
		p4_st_be(be, 16, reg_get(c, r, idx));
	} else {
		reg_get_wide(c, r, idx, be);
	}
	print_be(c->o, be, n);
}

static int cmd_register_read(struct cmd_ctx *c)
{
	if (need_least(c, 1))
		return 0;
	int r = res_register(c, c->argv[0]);
	if (r < 0)
		return 0;
	const struct p4_register *R = &c->p->registers[r];
	if (c->argc > 1) {
		if (need_exact(c, 2))
			return 0;
		long long idx;
		if (!parse_dec(c->argv[1], &idx))
			ERR(c->o, "Bad format for index");
		if (idx < 0 || (uint64_t)idx >= R->size)
			CLI_ERR(c->o, "Invalid register operation (INVALID_INDEX)\n");
		p4c_printf(c->o, "%s[%lld]= ", c->argv[0], idx);
		print_reg(c, r, (uint32_t)idx);
		p4c_printf(c->o, "\n");
		return 0;
	}
	p4c_printf(c->o, "%s= ", c->argv[0]);
	for (uint32_t i = 0; i < R->size; i++) {
		if (i > 0)
			p4c_printf(c->o, ", ");
		print_reg(c, r, i);
	}
	p4c_printf(c->o, "\n");
	return 0;
}

static int cmd_register_write(struct cmd_ctx *c)
{
	if (need_exact(c, 3))
		return 0;
	int r = res_register(c, c->argv[0]);
	if (r < 0)
		return 0;
	long long idx;
	if (!parse_dec(c->argv[1], &idx))
		ERR(c->o, "Bad format for index");
	uint32_t n = c->in->lay.regs[r].elem;
	if (n > 16) {
		uint8_t be[P4_MAX_FIELD_BITS / 8];
		if (parse_int_bytes(c->argv[2], be, n) != 0)
			ERR(c->o, "Bad format for value, must be an integer");
		uint32_t w = c->p->registers[r].width;
		if (w % 8)
			be[0] &= (uint8_t)((1u << (w % 8)) - 1);
		if (idx < 0 || (uint64_t)idx >= c->p->registers[r].size)
			CLI_ERR(c->o, "Invalid register operation (INVALID_INDEX)\n");
		reg_set_wide(c, r, (uint32_t)idx, be);
		return 0;
	}
	uint8_t b[16];
	long long dv;
	if (!parse_dec(c->argv[2], &dv) && parse_int_bytes(c->argv[2], b, 16) != 0)
		ERR(c->o, "Bad format for value, must be an integer");
	p4_u128 v;
	if (parse_dec(c->argv[2], &dv)) {
		v = dv < 0 ? (p4_u128)(__int128)dv : (p4_u128)dv;
	} else {
		/* (Python's int() takes decimal only; innet also takes 0x) */
		v = 0;
		for (int i = 0; i < 16; i++)
			v = v << 8 | b[i];
	}
	if (idx < 0 || (uint64_t)idx >= c->p->registers[r].size)
		CLI_ERR(c->o, "Invalid register operation (INVALID_INDEX)\n");
	reg_set(c, r, (uint32_t)idx, v);
	return 0;
}

static int cmd_register_reset(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int r = res_register(c, c->argv[0]);
	if (r < 0)
		return 0;
	for (uint32_t i = 0; i < c->p->registers[r].size; i++)
		reg_set(c, r, i, 0);
	return 0;
}

static int res_meter(struct cmd_ctx *c, const char *w)
{
	int i = lookup(w, c->p->n_meters, mname, c->p);
	if (i < 0) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid meter name (%s)\n", w);
	}
	return i;
}

/* The rates slot of meter m at index idx (direct: handle), and its word; NULL bad. */
static double *meter_slot(struct cmd_ctx *c, int m, long long idx, bool **set, uint32_t *word)
{
	const struct p4_meter *M = &c->p->meters[m];
	if (M->direct) {
		struct p4c_table *ct = &c->in->tables[M->table];
		uint32_t h = (uint32_t)idx & 0xffffffu;
		if (idx < 0 || h >= c->p->tables[M->table].max_size || !ct->e[h].used)
			return NULL;
		*set = &ct->meter_set[h];
		*word = c->in->lay.tables[M->table].dm_word + P4_METER_WORDS * h;
		return ct->meter_rates[h];
	}
	if (idx < 0 || (uint64_t)idx >= M->size)
		return NULL;
	*set = &c->in->meters[m].set[idx];
	*word = c->in->lay.meter_word[m] + P4_METER_WORDS * (uint32_t)idx;
	return c->in->meters[m].rates[idx];
}

static int parse_rates(struct cmd_ctx *c, const struct p4_meter *M, char **w, int n, double r[4])
{
	if ((uint32_t)n != M->rate_count) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Invalid number of rates, expected %u but got %d\n", M->rate_count, n);
		return -1;
	}
	for (int i = 0; i < n && i < 2; i++) {
		char *colon = strchr(w[i], ':'), *end;
		if (colon == NULL)
			goto bad;
		*colon = '\0';
		errno = 0;
		double rate = strtod(w[i], &end);
		*colon = ':';
		if (errno || *end != ':' || rate < 0)
			goto bad;
		long long burst;
		if (!parse_dec(colon + 1, &burst) || burst < 0)
			goto bad;
		r[2 * i] = rate;
		r[2 * i + 1] = (double)burst;
	}
	if (M->rate_count == 1) {
		r[2] = r[0];
		r[3] = r[1];
	}
	if (r[0] > r[2]) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid meter operation (INVALID_INFO_RATE_VALUE)\n");
		return -1;
	}
	return 0;
bad:
	c->o->failed = true;
	p4c_printf(c->o, "Error: Error while parsing rates\n");
	return -1;
}

static int cmd_meter_set_rates(struct cmd_ctx *c)
{
	if (need_least(c, 2))
		return 0;
	int m = res_meter(c, c->argv[0]);
	if (m < 0)
		return 0;
	long long idx;
	if (!parse_dec(c->argv[1], &idx))
		ERR(c->o, "Bad format for index");
	const struct p4_meter *M = &c->p->meters[m];
	double r[4];
	if (parse_rates(c, M, c->argv + 2, c->argc - 2, r) != 0)
		return 0;
	bool *set;
	uint32_t word;
	double *slot = meter_slot(c, m, idx, &set, &word);
	if (slot == NULL)
		CLI_ERR(c->o, "%s\n", M->direct ? "Invalid table operation (INVALID_HANDLE)"
					     : "Invalid meter operation (INVALID_INDEX)");
	memcpy(slot, r, sizeof(double) * 4);
	*set = true;
	p4c_meter_sync(c->in, word, r, true, M->bytes);
	return 0;
}

static int cmd_meter_array_set_rates(struct cmd_ctx *c)
{
	if (need_least(c, 1))
		return 0;
	int m = res_meter(c, c->argv[0]);
	if (m < 0)
		return 0;
	const struct p4_meter *M = &c->p->meters[m];
	double r[4];
	if (parse_rates(c, M, c->argv + 1, c->argc - 1, r) != 0)
		return 0;
	if (M->direct) {
		/* BMv2 sets the table's whole meter array: every entry handle's
		 * meter, an entry added later included */
		struct p4c_table *ct = &c->in->tables[M->table];
		for (uint32_t h = 0; h < c->p->tables[M->table].max_size; h++) {
			memcpy(ct->meter_rates[h], r, sizeof(double) * 4);
			ct->meter_set[h] = true;
			p4c_meter_sync(c->in, c->in->lay.tables[M->table].dm_word + P4_METER_WORDS * h, r,
				       true, M->bytes);
		}
		return 0;
	}
	for (uint32_t i = 0; i < M->size; i++) {
		bool *set;
		uint32_t word;
		double *slot = meter_slot(c, m, i, &set, &word);
		memcpy(slot, r, sizeof(double) * 4);
		*set = true;
		p4c_meter_sync(c->in, word, r, true, M->bytes);
	}
	return 0;
}

/* A double as Python's repr prints it. */
static void print_pyfloat(struct p4c_out *o, double v)
{
	char buf[64];
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	/* Python: an exponent of two digits at least, and a ".0" for integers */
	char *e = strchr(buf, 'e');
	if (e == NULL) {
		if (strchr(buf, '.') == NULL && strchr(buf, 'n') == NULL && strchr(buf, 'i') == NULL)
			strcat(buf, ".0");
	}
	p4c_printf(o, "%s", buf);
}

static int cmd_meter_get_rates(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int m = res_meter(c, c->argv[0]);
	if (m < 0)
		return 0;
	long long idx;
	if (!parse_dec(c->argv[1], &idx))
		ERR(c->o, "Bad format for index");
	const struct p4_meter *M = &c->p->meters[m];
	bool *set;
	uint32_t word;
	double *slot = meter_slot(c, m, idx, &set, &word);
	if (slot == NULL)
		CLI_ERR(c->o, "%s\n", M->direct ? "Invalid table operation (INVALID_HANDLE)"
					     : "Invalid meter operation (INVALID_INDEX)");
	if (!*set) {
		p4c_printf(c->o, "WARNING: expected %u rates but only received 0\n", M->rate_count);
		return 0;
	}
	for (uint32_t i = 0; i < M->rate_count && i < 2; i++) {
		p4c_printf(c->o, "%u: info rate = ", i);
		print_pyfloat(c->o, slot[2 * i]);
		p4c_printf(c->o, ", burst size = %llu\n", (unsigned long long)slot[2 * i + 1]);
	}
	return 0;
}

/* ---- multicast ------------------------------------------------------------ */

static int mc_group_slot(struct p4_inst *in, uint32_t mgid)
{
	for (uint32_t i = 0; i < P4C_MC_GROUPS; i++)
		if (in->groups[i].used && in->groups[i].id == mgid)
			return (int)i;
	return -1;
}

static int mc_int(struct cmd_ctx *c, const char *s, const char *what, long long *v)
{
	if (!parse_dec(s, v)) {
		c->o->failed = true;
		p4c_printf(c->o, "Error: Bad format for %s\n", what);
		return -1;
	}
	return 0;
}

static int cmd_mc_mgrp_create(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	long long g;
	if (mc_int(c, c->argv[0], "multicast group id", &g))
		return 0;
	p4c_printf(c->o, "Creating multicast group %lld\n", g);
	if (g < 0 || g > 0xffff)
		CLI_ERR(c->o, "Invalid PRE operation (INVALID_MGID)\n");
	if (mc_group_slot(c->in, (uint32_t)g) >= 0)
		CLI_ERR(c->o, "Invalid PRE operation (INVALID_MGID)\n");
	int slot = -1;
	for (uint32_t i = 0; i < P4C_MC_GROUPS && slot < 0; i++)
		if (!c->in->groups[i].used)
			slot = (int)i;
	if (slot < 0)
		CLI_ERR(c->o, "Invalid PRE operation (TABLE_FULL)\n");
	struct p4c_mc_group *G = &c->in->groups[slot];
	memset(G, 0, sizeof(*G));
	G->used = true;
	G->id = (uint32_t)g;
	if (p4c_mcast_sync(c->in, (uint32_t)slot) != 0) {
		G->used = false;
		CLI_ERR(c->o, "Invalid PRE operation (TABLE_FULL)\n");
	}
	return 0;
}

static int cmd_mc_mgrp_destroy(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	long long g;
	if (mc_int(c, c->argv[0], "multicast group id", &g))
		return 0;
	p4c_printf(c->o, "Destroying multicast group %lld\n", g);
	int slot = g < 0 ? -1 : mc_group_slot(c->in, (uint32_t)g);
	if (slot < 0)
		CLI_ERR(c->o, "Invalid PRE operation (INVALID_MGID)\n");
	struct p4c_mc_group *G = &c->in->groups[slot];
	for (uint32_t i = 0; i < G->n_nodes; i++)
		c->in->nodes[G->nodes[i]].group = -1;
	G->used = false;
	p4c_mcast_erase(c->in, (uint32_t)g);
	return 0;
}

/* The ports of an mc_node_create / update: sorted, distinct; the port map
 * string the CLI prints. */
static int mc_ports(struct cmd_ctx *c, char **w, int n, uint16_t *ports, uint16_t *np, char *map,
		    size_t maplen, int *lag_at)
{
	*np = 0;
	*lag_at = -1;
	int cnt = 0;
	int tmp[P4_MC_MAX];
	for (int i = 0; i < n; i++) {
		if (!strcmp(w[i], "|")) {
			*lag_at = i;
			break;
		}
		long long v;
		if (!parse_dec(w[i], &v) || v < 0) {
			c->o->failed = true;
			p4c_printf(c->o, "Error: '%s' is not a valid port number\n", w[i]);
			return -1;
		}
		if (v >= (long long)P4C_PORT_MAX || cnt >= (int)P4_MC_MAX) {
			c->o->failed = true;
			p4c_printf(c->o, "Invalid PRE operation (ERROR)\n");
			return -1;
		}
		tmp[cnt++] = (int)v;
	}
	/* sort */
	for (int i = 1; i < cnt; i++)
		for (int j = i; j > 0 && tmp[j - 1] > tmp[j]; j--) {
			int x = tmp[j];
			tmp[j] = tmp[j - 1];
			tmp[j - 1] = x;
		}
	for (int i = 1; i < cnt; i++)
		if (tmp[i] == tmp[i - 1]) {
			c->o->failed = true;
			p4c_printf(c->o, "Error: Found duplicate port number '%d'\n", tmp[i]);
			return -1;
		}
	/* the map string: bit i = port i, printed most significant first */
	int top = cnt ? tmp[cnt - 1] : -1;
	size_t k = 0;
	for (int p = top; p >= 0 && k + 1 < maplen; p--) {
		bool in = false;
		for (int i = 0; i < cnt; i++)
			in |= tmp[i] == p;
		map[k++] = in ? '1' : '0';
	}
	map[k] = '\0';
	for (int i = 0; i < cnt; i++)
		ports[i] = (uint16_t)tmp[i];
	*np = (uint16_t)cnt;
	return 0;
}

static int cmd_mc_node_create(struct cmd_ctx *c)
{
	if (need_least(c, 1))
		return 0;
	long long rid;
	if (mc_int(c, c->argv[0], "rid", &rid))
		return 0;
	uint16_t ports[P4_MC_MAX], np;
	char map[P4C_PORT_MAX + 1];
	int lag;
	if (mc_ports(c, c->argv + 1, c->argc - 1, ports, &np, map, sizeof(map), &lag))
		return 0;
	if (lag >= 0 && lag + 2 < c->argc)
		ERR(c->o, "innet has no LAGs (mc_set_lag_membership)");
	p4c_printf(c->o, "Creating node with rid %lld , port map %s and lag map \n", rid, map);
	if (rid < 0 || rid > 0xffff)
		CLI_ERR(c->o, "Invalid PRE operation (ERROR)\n");
	uint32_t h = 0;
	while (h < P4C_MC_NODES && c->in->nodes[h].used)
		h++;
	if (h >= P4C_MC_NODES)
		CLI_ERR(c->o, "Invalid PRE operation (TABLE_FULL)\n");
	struct p4c_mc_node *N = &c->in->nodes[h];
	memset(N, 0, sizeof(*N));
	N->used = true;
	N->rid = (uint16_t)rid;
	N->n_ports = np;
	memcpy(N->ports, ports, np * sizeof(ports[0]));
	N->group = -1;
	if (h + 1 > c->in->nodes_hwm)
		c->in->nodes_hwm = h + 1;
	p4c_printf(c->o, "node was created with handle %u\n", h);
	return 0;
}

static int node_arg(struct cmd_ctx *c, const char *s, uint32_t *h)
{
	long long v;
	if (mc_int(c, s, "node handle", &v))
		return -1;
	if (v < 0 || v >= (long long)P4C_MC_NODES || !c->in->nodes[v].used) {
		c->o->failed = true;
		p4c_printf(c->o, "Invalid PRE operation (INVALID_L1_HANDLE)\n");
		return -1;
	}
	*h = (uint32_t)v;
	return 0;
}

static int cmd_mc_node_update(struct cmd_ctx *c)
{
	if (need_least(c, 2))
		return 0;
	long long hv;
	if (mc_int(c, c->argv[0], "node handle", &hv))
		return 0;
	uint16_t ports[P4_MC_MAX], np;
	char map[P4C_PORT_MAX + 1];
	int lag;
	if (mc_ports(c, c->argv + 1, c->argc - 1, ports, &np, map, sizeof(map), &lag))
		return 0;
	p4c_printf(c->o, "Updating node %lld with port map %s and lag map \n", hv, map);
	uint32_t h;
	if (node_arg(c, c->argv[0], &h))
		return 0;
	struct p4c_mc_node *N = &c->in->nodes[h];
	N->n_ports = np;
	memcpy(N->ports, ports, np * sizeof(ports[0]));
	if (N->group >= 0) {
		int slot = mc_group_slot(c->in, (uint32_t)N->group);
		if (slot >= 0)
			p4c_mcast_sync(c->in, (uint32_t)slot);
	}
	return 0;
}

static int cmd_mc_node_associate(struct cmd_ctx *c, bool assoc)
{
	if (need_exact(c, 2))
		return 0;
	long long g, hv;
	if (mc_int(c, c->argv[0], "multicast group id", &g) || mc_int(c, c->argv[1], "node handle", &hv))
		return 0;
	if (assoc)
		p4c_printf(c->o, "Associating node %lld to multicast group %lld\n", hv, g);
	else
		p4c_printf(c->o, "Dissociating node %lld from multicast group %lld\n", hv, g);
	int slot = g < 0 ? -1 : mc_group_slot(c->in, (uint32_t)g);
	if (slot < 0)
		CLI_ERR(c->o, "Invalid PRE operation (INVALID_MGID)\n");
	uint32_t h;
	if (node_arg(c, c->argv[1], &h))
		return 0;
	struct p4c_mc_group *G = &c->in->groups[slot];
	struct p4c_mc_node *N = &c->in->nodes[h];
	if (assoc) {
		if (N->group >= 0)
			CLI_ERR(c->o, "Invalid PRE operation (ERROR)\n");
		if (G->n_nodes >= sizeof(G->nodes) / sizeof(G->nodes[0]))
			CLI_ERR(c->o, "Invalid PRE operation (TABLE_FULL)\n");
		G->nodes[G->n_nodes++] = h;
		N->group = (int32_t)g;
	} else {
		uint32_t i = 0;
		while (i < G->n_nodes && G->nodes[i] != h)
			i++;
		if (i == G->n_nodes)
			CLI_ERR(c->o, "Invalid PRE operation (ERROR)\n");
		memmove(&G->nodes[i], &G->nodes[i + 1], (G->n_nodes - i - 1) * sizeof(G->nodes[0]));
		G->n_nodes--;
		N->group = -1;
	}
	p4c_mcast_sync(c->in, (uint32_t)slot);
	return 0;
}

static int cmd_mc_node_assoc(struct cmd_ctx *c)
{
	return cmd_mc_node_associate(c, true);
}

static int cmd_mc_node_dissoc(struct cmd_ctx *c)
{
	return cmd_mc_node_associate(c, false);
}

static int cmd_mc_node_destroy(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	long long hv;
	if (mc_int(c, c->argv[0], "node handle", &hv))
		return 0;
	p4c_printf(c->o, "Destroying node %lld\n", hv);
	uint32_t h;
	if (node_arg(c, c->argv[0], &h))
		return 0;
	struct p4c_mc_node *N = &c->in->nodes[h];
	if (N->group >= 0)
		CLI_ERR(c->o, "Invalid PRE operation (ERROR)\n");
	N->used = false;
	return 0;
}

static int cmd_mc_dump(struct cmd_ctx *c)
{
	if (need_exact(c, 0))
		return 0;
	p4c_printf(c->o, "==========\nMC ENTRIES\n");
	/* groups by id */
	for (uint32_t done = 0, last = 0, first = 1; done < P4C_MC_GROUPS; done++) {
		int best = -1;
		for (uint32_t i = 0; i < P4C_MC_GROUPS; i++) {
			const struct p4c_mc_group *G = &c->in->groups[i];
			if (!G->used || (!first && G->id <= last))
				continue;
			if (best < 0 || G->id < c->in->groups[best].id)
				best = (int)i;
		}
		if (best < 0)
			break;
		const struct p4c_mc_group *G = &c->in->groups[best];
		p4c_printf(c->o, "**********\nmgrp(%u)\n", G->id);
		for (uint32_t k = 0; k < G->n_nodes; k++) {
			const struct p4c_mc_node *N = &c->in->nodes[G->nodes[k]];
			p4c_printf(c->o, "  -> (L1h=%u, rid=%u) -> (ports=[", G->nodes[k], N->rid);
			for (uint32_t i = 0; i < N->n_ports; i++)
				p4c_printf(c->o, "%s%u", i ? ", " : "", N->ports[i]);
			p4c_printf(c->o, "], lags=[])\n");
		}
		last = G->id;
		first = 0;
	}
	p4c_printf(c->o, "==========\nLAGS\n==========\n");
	return 0;
}

static int cmd_mc_set_lag_membership(struct cmd_ctx *c)
{
	ERR(c->o, "innet has no LAGs: mc_set_lag_membership is not supported");
}

/* ---- mirroring (simple_switch) -------------------------------------------- */

static int cmd_mirroring_add(struct cmd_ctx *c, bool mc)
{
	if (need_exact(c, 2))
		return 0;
	long long id, v;
	if (!parse_dec(c->argv[0], &id))
		ERR(c->o, "Bad format for mirror_id, expected integer");
	if (!parse_dec(c->argv[1], &v))
		ERR(c->o, "Bad format for %s, expected integer", mc ? "mgrp" : "egress_port");
	if (id < 0 || id >= (long long)P4_MIRROR_SESSIONS)
		CLI_ERR(c->o, "Invalid mirroring operation (SESSION_NOT_FOUND): innet keeps sessions 0..%u\n",
			P4_MIRROR_SESSIONS - 1);
	if (v < 0 || v > 0xffff)
		ERR(c->o, "%s out of range", mc ? "mgrp" : "egress_port");
	c->in->mirror[id] = mc ? (P4_MIRROR_MGID_VALID | (uint64_t)v << 16) : (P4_MIRROR_PORT_VALID | (uint64_t)v);
	p4c_mirror_sync(c->in, (uint32_t)id);
	return 0;
}

static int cmd_mirroring_add_port(struct cmd_ctx *c)
{
	return cmd_mirroring_add(c, false);
}

static int cmd_mirroring_add_mc(struct cmd_ctx *c)
{
	return cmd_mirroring_add(c, true);
}

static int cmd_mirroring_delete(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	long long id;
	if (!parse_dec(c->argv[0], &id))
		ERR(c->o, "Bad format for mirror_id, expected integer");
	if (id < 0 || id >= (long long)P4_MIRROR_SESSIONS || c->in->mirror[id] == 0)
		CLI_ERR(c->o, "Invalid mirroring operation (SESSION_NOT_FOUND)\n");
	c->in->mirror[id] = 0;
	p4c_mirror_sync(c->in, (uint32_t)id);
	return 0;
}

static int cmd_mirroring_get(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	long long id;
	if (!parse_dec(c->argv[0], &id))
		ERR(c->o, "Bad format for mirror_id, expected integer");
	if (id < 0 || id >= (long long)P4_MIRROR_SESSIONS || c->in->mirror[id] == 0)
		CLI_ERR(c->o, "Invalid mirroring operation (SESSION_NOT_FOUND)\n");
	uint64_t w = c->in->mirror[id];
	p4c_printf(c->o, "MirroringSessionConfig(port=");
	if (w & P4_MIRROR_PORT_VALID)
		p4c_printf(c->o, "%u", (unsigned)(w & 0xffff));
	else
		p4c_printf(c->o, "None");
	p4c_printf(c->o, ", mgid=");
	if (w & P4_MIRROR_MGID_VALID)
		p4c_printf(c->o, "%u", (unsigned)((w >> 16) & 0xffff));
	else
		p4c_printf(c->o, "None");
	p4c_printf(c->o, ")\n");
	return 0;
}

/* ---- innet's own: digests and log_msg (not in simple_switch_CLI) ---------- */

/* digests [MAX] / log_msgs [MAX]: the records since the last read, oldest
 * first, one per line, as `digest LIST_ID HEX` / `log SITE TEXT`. */
static int ring_read(struct cmd_ctx *c, bool digests)
{
	long long max = 64;
	if (c->argc > 1)
		ERR(c->o, "Wrong number of args, expected at most 1 but got %d", c->argc);
	if (c->argc == 1 && (!parse_dec(c->argv[0], &max) || max < 1))
		ERR(c->o, "Bad format for max, expected a positive integer");
	struct p4_inst *in = c->in;
	uint64_t head = 0;
	innet_cp_reg_read(in->cp, (unsigned)in->lay.r_words, in->lay.ring_head_word, &head);
	if (head > in->ring_read + P4_RING_SLOTS) {
		in->digests_lost += head - in->ring_read - P4_RING_SLOTS;
		in->ring_read = head - P4_RING_SLOTS;
	}
	uint8_t *rec = malloc(in->lay.ring_size);
	if (rec == NULL)
		ERR(c->o, "out of memory");
	long long shown = 0;
	uint64_t seq;
	for (seq = in->ring_read; seq < head && shown < max; seq++) {
		uint32_t slot = (uint32_t)(seq % P4_RING_SLOTS);
		uint64_t s0 = 0, s1 = 0;
		innet_cp_reg_read(in->cp, (unsigned)in->lay.r_words, in->lay.ring_seq_word + slot, &s0);
		if (s0 != seq + 1)
			break;   /* being written: later */
		innet_cp_reg_read_bytes(in->cp, (unsigned)in->lay.r_ring, slot, rec, in->lay.ring_size);
		innet_cp_reg_read(in->cp, (unsigned)in->lay.r_words, in->lay.ring_seq_word + slot, &s1);
		if (s1 != s0)
			break;
		struct p4_ring_hdr h;
		memcpy(&h, rec, sizeof(h));
		const uint8_t *d = rec + sizeof(h);
		uint32_t len = h.len <= in->lay.ring_size - sizeof(h) ? h.len : 0;
		if (digests && h.kind == P4_RING_DIGEST) {
			const char *nm = "?";
			for (uint32_t i = 0; i < c->p->n_llists; i++)
				if ((uint32_t)c->p->llists[i].id == h.id)
					nm = c->p->llists[i].name;
			p4c_printf(c->o, "digest %s %u ", nm, h.id);
			hexplain(c->o, d, len);
			p4c_printf(c->o, "\n");
			shown++;
		} else if (!digests && h.kind == P4_RING_LOG) {
			p4c_printf(c->o, "log %u", h.id);
			for (uint32_t i = 0; i + 8 <= len; i += 8) {
				uint64_t v;
				memcpy(&v, d + i, 8);
				p4c_printf(c->o, " %llu", (unsigned long long)v);
			}
			p4c_printf(c->o, "\n");
			shown++;
		}
	}
	/* (digests and logs share the ring: a read of one kind moves past the
	 * other's records too; `log_msgs` is for debugging) */
	in->ring_read = seq;
	free(rec);
	return 0;
}

static int cmd_digests(struct cmd_ctx *c)
{
	return ring_read(c, true);
}

static int cmd_log_msgs(struct cmd_ctx *c)
{
	return ring_read(c, false);
}

/* ------------------------------------------------------------------------ */
/* Parse value sets (pvs_*)                                                   */

static int res_vset(struct cmd_ctx *c, const char *w)
{
	for (uint32_t i = 0; i < c->p->n_vsets; i++)
		if (!strcmp(c->p->vsets[i].name, w))
			return (int)i;
	for (uint32_t i = 0; i < c->p->n_vsets; i++)
		if (suffix_of(c->p->vsets[i].name, w))
			return (int)i;
	c->o->failed = true;
	p4c_printf(c->o, "Error: Invalid parser value set name (%s)\n", w);
	return -1;
}

/* The key elements' widths a member of value set v is matched against (the
 * first parser state that selects on it; else the set's own width). */
static uint32_t vset_bits(const struct p4_prog *p, int v, uint32_t *bits, uint32_t max)
{
	for (uint32_t st = 0; st < p->n_states; st++) {
		const struct p4_pstate *ps = &p->states[st];
		for (uint32_t k = 0; k < ps->n_trans; k++)
			if (ps->trans[k].kind == P4T_VSET && ps->trans[k].vset == v) {
				uint32_t n = ps->n_key < max ? ps->n_key : max;
				memcpy(bits, ps->key_bits, n * sizeof(*bits));
				return n;
			}
	}
	bits[0] = p->vsets[v].width;
	return 1;
}

/* A compressed member (vbytes, BMv2's form) into the data path's entry:
 * each key element byte-padded, then an all-ones mask. */
static void vset_entry(struct cmd_ctx *c, int v, const uint8_t *val, uint8_t *ent, uint32_t esize)
{
	uint32_t bits[64], n = vset_bits(c->p, v, bits, 64);
	uint32_t total = 0, kb = 0;
	for (uint32_t k = 0; k < n; k++) {
		total += bits[k];
		kb += (bits[k] + 7) / 8;
	}
	memset(ent, 0, esize);
	uint32_t vbytes = c->in->vsets[v].vbytes;
	/* bit i of the compressed value, from its most significant end */
	uint32_t src = vbytes * 8 - total, dst_byte = 0;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t w = bits[k], eb = (w + 7) / 8, pad = eb * 8 - w;
		for (uint32_t i = 0; i < w; i++, src++) {
			uint32_t bit = (val[src / 8] >> (7 - src % 8)) & 1;
			uint32_t d = pad + i;
			if (dst_byte + d / 8 < esize)
				ent[dst_byte + d / 8] |= (uint8_t)(bit << (7 - d % 8));
		}
		dst_byte += eb;
	}
	for (uint32_t b = 0; b < kb && kb + b < esize; b++)
		ent[kb + b] = 0xff;
}

static int vset_value(struct cmd_ctx *c, int v, const char *s, uint8_t *val)
{
	const struct p4_vset *vs = &c->p->vsets[v];
	uint32_t vb = c->in->vsets[v].vbytes;
	int r = parse_int_bytes(s, val, vb);
	if (r == -1)
		ERR(c->o, "Invalid input, could not cast to integer, try in hex with 0x prefix");
	if (r == -2 || (vs->width % 8 && (val[0] >> (vs->width % 8)) != 0))
		ERR(c->o, "Input is too large, it should fit within %u bits", vs->width);
	return 1;
}

static int vset_find(const struct p4c_vset *cv, const uint8_t *val)
{
	for (uint32_t i = 0; i < cv->n; i++)
		if (!memcmp(cv->vals + (size_t)i * cv->vbytes, val, cv->vbytes))
			return (int)i;
	return -1;
}

/* Member i of set v to the data path, from the control plane's copy. */
static void vset_write(struct cmd_ctx *c, int v, uint32_t i)
{
	const struct p4_layout *l = &c->in->lay;
	uint8_t ent[512];
	uint32_t esize = l->vset_entry < sizeof(ent) ? l->vset_entry : sizeof(ent);
	vset_entry(c, v, c->in->vsets[v].vals + (size_t)i * c->in->vsets[v].vbytes, ent, esize);
	innet_cp_reg_write_bytes(c->in->cp, (unsigned)l->r_vsets, (uint32_t)v * l->vset_max + i, ent,
				 esize);
}

static void vset_count(struct cmd_ctx *c, int v)
{
	innet_cp_reg_write(c->in->cp, (unsigned)c->in->lay.r_words, c->in->lay.vset_word + (uint32_t)v,
			   c->in->vsets[v].n);
}

static int cmd_pvs_add(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int v = res_vset(c, c->argv[0]);
	uint8_t val[256];
	if (v < 0 || c->in->vsets[v].vbytes > sizeof(val) || !vset_value(c, v, c->argv[1], val))
		return 0;
	struct p4c_vset *cv = &c->in->vsets[v];
	if (vset_find(cv, val) >= 0)
		return 0;   /* BMv2: no error for a value already there */
	if (cv->n >= c->p->vsets[v].max_size || cv->n >= c->in->lay.vset_max)
		ERR(c->o, "parser value set %s is full (%u values)", c->p->vsets[v].name, cv->n);
	memcpy(cv->vals + (size_t)cv->n * cv->vbytes, val, cv->vbytes);
	vset_write(c, v, cv->n);   /* the member, then the count that shows it */
	cv->n++;
	vset_count(c, v);
	return 0;
}

static int cmd_pvs_remove(struct cmd_ctx *c)
{
	if (need_exact(c, 2))
		return 0;
	int v = res_vset(c, c->argv[0]);
	uint8_t val[256];
	if (v < 0 || c->in->vsets[v].vbytes > sizeof(val) || !vset_value(c, v, c->argv[1], val))
		return 0;
	struct p4c_vset *cv = &c->in->vsets[v];
	int i = vset_find(cv, val);
	if (i < 0)
		return 0;   /* BMv2: no error for a value not there */
	/* the last member into its place, then one fewer */
	memmove(cv->vals + (size_t)i * cv->vbytes, cv->vals + (size_t)(cv->n - 1) * cv->vbytes,
		cv->vbytes);
	vset_write(c, v, (uint32_t)i);
	cv->n--;
	vset_count(c, v);
	return 0;
}

static int cmd_pvs_get(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int v = res_vset(c, c->argv[0]);
	if (v < 0)
		return 0;
	const struct p4c_vset *cv = &c->in->vsets[v];
	for (uint32_t i = 0; i < cv->n; i++) {
		hexplain(c->o, cv->vals + (size_t)i * cv->vbytes, cv->vbytes);
		p4c_printf(c->o, "\n");
	}
	return 0;
}

static int cmd_pvs_clear(struct cmd_ctx *c)
{
	if (need_exact(c, 1))
		return 0;
	int v = res_vset(c, c->argv[0]);
	if (v < 0)
		return 0;
	c->in->vsets[v].n = 0;
	vset_count(c, v);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The switch as a whole                                                      */

/* reset_state: what BMv2 resets — every table's entries (const ones too) and
 * default, action profiles, meters, counters, registers, pending digests,
 * the multicast engine; not mirroring sessions or value sets. */
static int cmd_reset_state(struct cmd_ctx *c)
{
	if (need_exact(c, 0))
		return 0;
	struct p4_inst *in = c->in;
	const struct p4_prog *p = c->p;
	const struct p4_layout *l = &in->lay;
	for (uint32_t t = 0; t < p->n_tables; t++) {
		const struct p4_table *tb = &p->tables[t];
		struct p4c_table *ct = &in->tables[t];
		for (uint32_t h = 0; h < ct->hwm; h++) {
			if (!ct->e[h].used)
				continue;
			entry_free_slot(ct, h);
			if (tb->cls == P4TC_LPM && ct->e[h].prefix >= 0)
				ct->lpm_count[ct->e[h].prefix]--;
			if (ct->meter_set != NULL)
				ct->meter_set[h] = false;
			if (tb->cls != P4TC_TERNARY)
				p4c_table_erase_entry(in, t, h);
		}
		if (tb->cls == P4TC_TERNARY)
			p4c_ternary_sync(in, t);
		ct->def_set = false;
		p4c_default_sync(in, t);
		if (tb->direct_counter >= 0 || tb->with_counters)
			for (uint32_t j = 0; j < 2 * tb->max_size; j++)
				innet_cp_reg_write(in->cp, (unsigned)l->r_words, l->tables[t].dc_word + j, 0);
	}
	for (uint32_t pr = 0; pr < p->n_profiles; pr++) {
		struct p4c_profile *cp = &in->profs[pr];
		for (uint32_t h = 0; h < cp->n_grp_hwm; h++)
			if (cp->grp[h].used) {
				cp->grp[h].used = false;
				p4c_group_sync(in, pr, h);
			}
		for (uint32_t h = 0; h < cp->n_mbr_hwm; h++)
			if (cp->mbr[h].used) {
				cp->mbr[h].used = false;
				p4c_member_sync(in, pr, h);
			}
	}
	static const double none[4];
	for (uint32_t m = 0; m < p->n_meters; m++) {
		const struct p4_meter *M = &p->meters[m];
		if (M->direct)
			continue;
		for (uint32_t i = 0; i < M->size; i++) {
			in->meters[m].set[i] = false;
			p4c_meter_sync(in, l->meter_word[m] + P4_METER_WORDS * i, none, false, M->bytes);
		}
	}
	for (uint32_t k = 0; k < p->n_counters; k++)
		if (!p->counters[k].direct)
			for (uint32_t j = 0; j < 2 * p->counters[k].size; j++)
				innet_cp_reg_write(in->cp, (unsigned)l->r_words, l->counter_word[k] + j, 0);
	for (uint32_t r = 0; r < p->n_registers; r++)
		for (uint32_t i = 0; i < p->registers[r].size; i++)
			reg_set(c, (int)r, i, 0);
	for (uint32_t g = 0; g < P4C_MC_GROUPS; g++)
		if (in->groups[g].used) {
			in->groups[g].used = false;
			p4c_mcast_erase(in, in->groups[g].id);
		}
	for (uint32_t i = 0; i < P4C_MC_NODES; i++) {
		in->nodes[i].used = false;
		in->nodes[i].group = -1;
	}
	uint64_t head = 0;
	innet_cp_reg_read(in->cp, (unsigned)l->r_words, l->ring_head_word, &head);
	in->ring_read = head;
	return 0;
}

/* Python's "{:^W}" of s (the extra space on the right). */
static void centre(struct p4c_out *o, const char *s, int w)
{
	int n = (int)strlen(s), pad = w > n ? w - n : 0;
	p4c_printf(o, "%*s%s%*s", pad / 2, "", s, pad - pad / 2, "");
}

/* show_ports: innet's ports as BMv2's device manager lists them (the
 * interface: a raw port's, else the port's name). */
static int cmd_show_ports(struct cmd_ctx *c)
{
	if (need_exact(c, 0))
		return 0;
	const struct innet_switch_conf *conf = innet_switch_conf(innet_cp_switch(c->in->cp));
	centre(c->o, "port #", 10);
	centre(c->o, "iface name", 20);
	centre(c->o, "status", 10);
	p4c_printf(c->o, "extra info\n==================================================\n");
	for (uint32_t i = 0; conf != NULL && i < conf->n_ports; i++) {
		char num[16];
		snprintf(num, sizeof(num), "%u", i);
		centre(c->o, num, 10);
		centre(c->o, conf->ports[i].iface[0] ? conf->ports[i].iface : conf->ports[i].name, 20);
		centre(c->o, "UP", 10);
		p4c_printf(c->o, "\n");
	}
	return 0;
}

/* simple_switch's queueing commands: innet models no egress queues (a
 * frame leaves when its pipeline is done), so there is nothing to set. */
static int cmd_queue_noop(struct cmd_ctx *c)
{
	return 0;
}

/* ------------------------------------------------------------------------ */

static const struct {
	const char *name;
	int (*fn)(struct cmd_ctx *c);
} cmds[] = {
	{ "show_tables", cmd_show_tables },
	{ "show_actions", cmd_show_actions },
	{ "table_show_actions", cmd_table_show_actions },
	{ "table_info", cmd_table_info },
	{ "table_add", cmd_table_add },
	{ "table_modify", cmd_table_modify },
	{ "table_delete", cmd_table_delete },
	{ "table_clear", cmd_table_clear },
	{ "table_num_entries", cmd_table_num_entries },
	{ "table_set_default", cmd_table_set_default },
	{ "table_reset_default", cmd_table_reset_default },
	{ "table_dump", cmd_table_dump },
	{ "table_dump_entry", cmd_table_dump_entry },
	{ "table_dump_entry_from_key", cmd_table_dump_entry_from_key },
	{ "table_set_timeout", cmd_table_set_timeout },
	{ "act_prof_create_member", cmd_act_prof_create_member },
	{ "act_prof_delete_member", cmd_act_prof_delete_member },
	{ "act_prof_modify_member", cmd_act_prof_modify_member },
	{ "act_prof_create_group", cmd_act_prof_create_group },
	{ "act_prof_delete_group", cmd_act_prof_delete_group },
	{ "act_prof_add_member_to_group", cmd_act_prof_add_member_to_group },
	{ "act_prof_remove_member_from_group", cmd_act_prof_remove_member_from_group },
	{ "act_prof_dump", cmd_act_prof_dump },
	{ "act_prof_dump_member", cmd_act_prof_dump_member },
	{ "act_prof_dump_group", cmd_act_prof_dump_group },
	{ "table_indirect_add", cmd_table_indirect_add },
	{ "table_indirect_add_with_group", cmd_table_indirect_add_with_group },
	{ "table_indirect_delete", cmd_table_delete },
	{ "table_indirect_set_default", cmd_table_indirect_set_default },
	{ "table_indirect_set_default_with_group", cmd_table_indirect_set_default_with_group },
	{ "table_indirect_reset_default", cmd_table_reset_default },
	{ "counter_read", cmd_counter_read },
	{ "counter_write", cmd_counter_write },
	{ "counter_reset", cmd_counter_reset },
	{ "register_read", cmd_register_read },
	{ "register_write", cmd_register_write },
	{ "register_reset", cmd_register_reset },
	{ "meter_set_rates", cmd_meter_set_rates },
	{ "meter_array_set_rates", cmd_meter_array_set_rates },
	{ "meter_get_rates", cmd_meter_get_rates },
	{ "mc_mgrp_create", cmd_mc_mgrp_create },
	{ "mc_mgrp_destroy", cmd_mc_mgrp_destroy },
	{ "mc_node_create", cmd_mc_node_create },
	{ "mc_node_update", cmd_mc_node_update },
	{ "mc_node_associate", cmd_mc_node_assoc },
	{ "mc_node_dissociate", cmd_mc_node_dissoc },
	{ "mc_node_destroy", cmd_mc_node_destroy },
	{ "mc_dump", cmd_mc_dump },
	{ "mc_set_lag_membership", cmd_mc_set_lag_membership },
	{ "mirroring_add", cmd_mirroring_add_port },
	{ "mirroring_add_mc", cmd_mirroring_add_mc },
	{ "mirroring_delete", cmd_mirroring_delete },
	{ "mirroring_get", cmd_mirroring_get },
	{ "pvs_add", cmd_pvs_add },
	{ "pvs_remove", cmd_pvs_remove },
	{ "pvs_get", cmd_pvs_get },
	{ "pvs_clear", cmd_pvs_clear },
	{ "reset_state", cmd_reset_state },
	{ "show_ports", cmd_show_ports },
	{ "set_queue_depth", cmd_queue_noop },
	{ "set_queue_rate", cmd_queue_noop },
	{ "set_all_queue_depths", cmd_queue_noop },
	{ "set_all_queue_rates", cmd_queue_noop },
	{ "digests", cmd_digests },
	{ "log_msgs", cmd_log_msgs },
};

bool p4c_is_command(const char *word)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(cmds[i].name, word))
			return true;
	return false;
}

int p4c_command(struct p4_inst *in, int argc, char **argv, struct p4c_out *out, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(cmds[i].name, argv[0]) != 0)
			continue;
		struct cmd_ctx c = { .in = in, .p = in->prog, .o = out, .argc = argc - 1, .argv = argv + 1 };
		int rc = cmds[i].fn(&c);
		if (out->oom) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		return rc;
	}
	snprintf(err, errlen, "unknown simple_switch_CLI command '%.60s'", argv[0]);
	return -ENOENT;
}
