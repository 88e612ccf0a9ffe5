/*
 * p4_load.c — the BMv2 JSON loader: p4c-bm2-ss's output for v1model (format
 * 2.x, behavioral-model's docs/JSON_format.md) into struct p4_prog
 * (p4_ir.h), every name resolved to an index and every construct checked.
 *
 * What is refused, and how: anything the code generator cannot translate
 * faithfully — an unknown primitive, hash algorithm or extern, a header union
 * stack, idle timeout, a parser or pipeline v1model does not have, a width
 * beyond P4_MAX_FIELD_BITS — fails the load with one message that names the
 * construct and where it is ("action 'set_nhop' (primitive 2): unsupported
 * primitive 'foo'"); a malformed file names the JSON path that is wrong.
 * Nothing is loaded half: on an error the program is freed.
 *
 * Memory: one arena per program (p4_alloc), freed whole by p4_prog_free.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "p4/p4_ir.h"

/* ------------------------------------------------------------------------ */
/* Arena                                                                      */

struct p4_arena {
	struct p4_arena *next;     /* chunk list */
	size_t used, cap;
	_Alignas(16) uint8_t mem[];
};

#define ARENA_CHUNK (64u << 10)

void *p4_alloc(struct p4_arena *a, size_t n)
{
	n = (n + 15u) & ~(size_t)15u;
	if (n == 0)
		n = 16;
	/* a is the list head: allocations go into the chunk after it */
	struct p4_arena *c = a->next;
	if (c == NULL || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = calloc(1, sizeof(*c) + cap);
		if (c == NULL)
			return NULL;
		c->cap = cap;
		c->next = a->next;
		a->next = c;
	}
	void *p = c->mem + c->used;
	c->used += n;
	return p;
}

char *p4_strdup(struct p4_arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = p4_alloc(a, n);
	if (d != NULL)
		memcpy(d, s, n);
	return d;
}

struct p4_arena *p4_arena_new(void)
{
	return calloc(1, sizeof(struct p4_arena));
}

void p4_arena_free(struct p4_arena *a)
{
	while (a != NULL) {
		struct p4_arena *n = a->next;
		free(a);
		a = n;
	}
}

void p4_prog_free(struct p4_prog *p)
{
	if (p != NULL)
		p4_arena_free(p->arena);
}

/* ------------------------------------------------------------------------ */
/* Loader state and errors                                                    */

struct ld {
	struct p4_prog *p;
	struct p4_arena *a;
	char *err;
	size_t errlen;
	int failed;
	/* the action being loaded, for runtime_data widths */
	const struct p4_action *act;
};

static int fail(struct ld *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ld *l, const char *fmt, ...)
{
	if (!l->failed) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(l->err, l->errlen, fmt, ap);
		va_end(ap);
		l->failed = -EINVAL;
	}
	return -EINVAL;
}

static int oom(struct ld *l)
{
	if (!l->failed) {
		snprintf(l->err, l->errlen, "out of memory loading the P4 program");
		l->failed = -ENOMEM;
	}
	return -ENOMEM;
}

#define NEW(l, T, n) ((T *)p4_alloc((l)->a, sizeof(T) * ((n) ? (n) : 1)))

static const char *dupstr(struct ld *l, const char *s)
{
	char *d = p4_strdup(l->a, s ? s : "");
	if (d == NULL)
		oom(l);
	return d ? d : "";
}

/* ------------------------------------------------------------------------ */
/* JSON access with messages                                                  */

static json_t *get(struct ld *l, json_t *o, const char *key, const char *where)
{
	json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
	if (v == NULL)
		fail(l, "%s: missing \"%s\"", where, key);
	return v;
}

static json_t *get_array(struct ld *l, json_t *o, const char *key, const char *where)
{
	json_t *v = get(l, o, key, where);
	if (v != NULL && !json_is_array(v)) {
		fail(l, "%s: \"%s\" must be an array", where, key);
		return NULL;
	}
	return v;
}

/* An optional array member: an empty array when absent or null. */
static json_t *opt_array(struct ld *l, json_t *o, const char *key, const char *where)
{
	json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
	if (v == NULL || json_is_null(v))
		return NULL;
	if (!json_is_array(v)) {
		fail(l, "%s: \"%s\" must be an array", where, key);
		return NULL;
	}
	return v;
}

static const char *get_str(struct ld *l, json_t *o, const char *key, const char *where)
{
	json_t *v = get(l, o, key, where);
	if (v == NULL)
		return NULL;
	if (!json_is_string(v)) {
		fail(l, "%s: \"%s\" must be a string", where, key);
		return NULL;
	}
	return json_string_value(v);
}

static int get_int(struct ld *l, json_t *o, const char *key, const char *where, long long min,
		   long long max, long long *out)
{
	json_t *v = get(l, o, key, where);
	if (v == NULL)
		return -EINVAL;
	if (!json_is_integer(v))
		return fail(l, "%s: \"%s\" must be an integer", where, key);
	long long x = json_integer_value(v);
	if (x < min || x > max)
		return fail(l, "%s: \"%s\" = %lld is out of range [%lld, %lld]", where, key, x, min, max);
	*out = x;
	return 0;
}

static bool get_bool_opt(json_t *o, const char *key, bool def)
{
	json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
	return json_is_boolean(v) ? json_is_true(v) : def;
}

/* A short rendering of a JSON value for messages. */
static void jshow(json_t *v, char *buf, size_t n)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	snprintf(buf, n, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
	free(s);
}

/* The name of an object at index i in a JSON array member (for where). */
static const char *name_of(json_t *o)
{
	json_t *n = json_is_object(o) ? json_object_get(o, "name") : NULL;
	return json_is_string(n) ? json_string_value(n) : "?";
}

/* ------------------------------------------------------------------------ */
/* Hex strings                                                                */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "0x..." / "-0x..." into nbytes big-endian bytes (the value must fit). The
 * "0x" is optional: BMv2 reads the digits as hex either way (p4c writes "7"
 * for a verify's error constant). */
static int hex_bytes(struct ld *l, const char *s, uint8_t *out, uint32_t nbytes, bool *neg,
		     const char *where)
{
	const char *p = s;
	bool n = false;
	if (*p == '-') {
		n = true;
		p++;
	}
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		p += 2;
	if (*p == '\0')
		return fail(l, "%s: bad hex string \"%.40s\"", where, s);
	size_t len = strlen(p);
	memset(out, 0, nbytes);
	uint32_t nib = 0;
	for (size_t i = len; i-- > 0; nib++) {
		int v = hexval(p[i]);
		if (v < 0)
			return fail(l, "%s: bad hex string \"%.40s\"", where, s);
		uint32_t byte = nib / 2;
		if (byte >= nbytes) {
			if (v != 0)
				return fail(l, "%s: value %.40s does not fit %u bytes", where, s, nbytes);
			continue;
		}
		out[nbytes - 1 - byte] |= (uint8_t)(nib % 2 ? v << 4 : v);
	}
	if (neg)
		*neg = n;
	else if (n)
		return fail(l, "%s: negative value \"%.40s\" not allowed here", where, s);
	return 0;
}

static int hex_u128(struct ld *l, const char *s, p4_u128 *out, bool *neg, const char *where)
{
	uint8_t b[16];
	if (hex_bytes(l, s, b, 16, neg, where) != 0)
		return -EINVAL;
	p4_u128 v = 0;
	for (int i = 0; i < 16; i++)
		v = v << 8 | b[i];
	*out = v;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Name lookups                                                               */

#define FIND_BY_NAME(fn, arr, n)                                                  \
	int fn(const struct p4_prog *p, const char *name)                         \
	{                                                                         \
		for (uint32_t i = 0; i < p->n; i++)                               \
			if (!strcmp(p->arr[i].name, name))                        \
				return (int)i;                                    \
		return -1;                                                        \
	}
FIND_BY_NAME(p4_table_find, tables, n_tables)
FIND_BY_NAME(p4_action_find, actions, n_actions)
FIND_BY_NAME(p4_register_find, registers, n_registers)
FIND_BY_NAME(p4_counter_find, counters, n_counters)
FIND_BY_NAME(p4_meter_find, meters, n_meters)
FIND_BY_NAME(p4_profile_find, profiles, n_profiles)
FIND_BY_NAME(p4_vset_find, vsets, n_vsets)
static FIND_BY_NAME(header_find, headers, n_headers)
static FIND_BY_NAME(htype_find, htypes, n_htypes)
static FIND_BY_NAME(stack_find, stacks, n_stacks)
static FIND_BY_NAME(union_find, unions, n_unions)
static FIND_BY_NAME(ustack_find, ustacks, n_ustacks)
static FIND_BY_NAME(calc_find, calcs, n_calcs)

static int field_find(const struct p4_prog *p, int h, const char *name)
{
	const struct p4_htype *t = &p->htypes[p->headers[h].type];
	for (uint32_t i = 0; i < t->n_fields; i++)
		if (!strcmp(t->fields[i].name, name))
			return (int)i;
	return -1;
}

static int action_by_id(const struct p4_prog *p, long long id)
{
	for (uint32_t i = 0; i < p->n_actions; i++)
		if (p->actions[i].id == id)
			return (int)i;
	return -1;
}

/* ------------------------------------------------------------------------ */
/* Expressions                                                                */

static struct p4_expr *expr_new(struct ld *l, enum p4_ekind k)
{
	struct p4_expr *e = NEW(l, struct p4_expr, 1);
	if (e == NULL) {
		oom(l);
		return NULL;
	}
	e->kind = k;
	e->h = e->f = e->idx = e->member = -1;
	return e;
}

static const struct {
	const char *s;
	enum p4_op op;
	int arity;      /* 1: right only, 2: left and right, 3: ternary */
} ops[] = {
	{ "+", P4OP_ADD, 2 }, { "-", P4OP_SUB, 2 }, { "*", P4OP_MUL, 2 },
	{ "<<", P4OP_SHL, 2 }, { ">>", P4OP_SHR, 2 },
	{ "==", P4OP_EQ, 2 }, { "!=", P4OP_NE, 2 }, { ">", P4OP_GT, 2 }, { ">=", P4OP_GE, 2 },
	{ "<", P4OP_LT, 2 }, { "<=", P4OP_LE, 2 },
	{ "and", P4OP_LAND, 2 }, { "or", P4OP_LOR, 2 }, { "not", P4OP_LNOT, 1 },
	{ "&", P4OP_AND, 2 }, { "|", P4OP_OR, 2 }, { "^", P4OP_XOR, 2 }, { "~", P4OP_NOT, 1 },
	{ "valid", P4OP_VALID, 1 }, { "valid_union", P4OP_VALID_UNION, 1 },
	{ "d2b", P4OP_D2B, 1 }, { "b2d", P4OP_B2D, 1 },
	{ "two_comp_mod", P4OP_TWO_COMP_MOD, 2 }, { "sat_cast", P4OP_SAT_CAST, 2 },
	{ "usat_cast", P4OP_USAT_CAST, 2 }, { "?", P4OP_TERNARY, 3 },
	{ "dereference_header_stack", P4OP_DEREF_STACK, 2 },
	{ "last_stack_index", P4OP_LAST_STACK_INDEX, 1 }, { "size_stack", P4OP_SIZE_STACK, 1 },
	{ "access_field", P4OP_ACCESS_FIELD, 2 },
	{ "dereference_union_stack", P4OP_DEREF_UNION_STACK, 2 },
	{ "access_union_header", P4OP_ACCESS_UNION_HEADER, 2 },
	{ "/", P4OP_DIV, 2 }, { "%", P4OP_MOD, 2 },
};

static struct p4_expr *parse_tv(struct ld *l, json_t *tv, const char *where);

/* An expression object {"op", "left", "right"[, "cond"]}. */
static struct p4_expr *parse_op(struct ld *l, json_t *o, const char *where)
{
	const char *s = get_str(l, o, "op", where);
	if (s == NULL)
		return NULL;
	size_t k;
	for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (!strcmp(ops[k].s, s))
			break;
	if (k == sizeof(ops) / sizeof(ops[0])) {
		fail(l, "%s: unsupported expression operator '%.40s'", where, s);
		return NULL;
	}
	struct p4_expr *e = expr_new(l, P4E_OP);
	if (e == NULL)
		return NULL;
	e->op = ops[k].op;
	json_t *left = json_object_get(o, "left"), *right = json_object_get(o, "right");
	if (e->op == P4OP_SUB && (left == NULL || json_is_null(left))) {
		e->op = P4OP_NEG;
		if ((e->a = parse_tv(l, right, where)) == NULL)
			return NULL;
		return e;
	}
	if (e->op == P4OP_ACCESS_FIELD || e->op == P4OP_ACCESS_UNION_HEADER) {
		if ((e->a = parse_tv(l, left, where)) == NULL)
			return NULL;
		if (!json_is_integer(right)) {
			fail(l, "%s: '%s' needs an integer offset", where, s);
			return NULL;
		}
		e->idx = (int)json_integer_value(right);
		return e;
	}
	if (ops[k].arity == 1) {
		if ((e->a = parse_tv(l, right, where)) == NULL)
			return NULL;
		return e;
	}
	if ((e->a = parse_tv(l, left, where)) == NULL || (e->b = parse_tv(l, right, where)) == NULL)
		return NULL;
	if (ops[k].arity == 3 && (e->c = parse_tv(l, json_object_get(o, "cond"), where)) == NULL)
		return NULL;
	return e;
}

static int header_ref(struct ld *l, json_t *v, const char *where)
{
	if (!json_is_string(v))
		return fail(l, "%s: a header name must be a string", where);
	int h = header_find(l->p, json_string_value(v));
	if (h < 0)
		return fail(l, "%s: unknown header '%.60s'", where, json_string_value(v));
	return h;
}

static struct p4_expr *field_ref(struct ld *l, json_t *v, const char *where)
{
	if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_string(json_array_get(v, 0)) ||
	    !json_is_string(json_array_get(v, 1))) {
		fail(l, "%s: a field reference must be [header, field]", where);
		return NULL;
	}
	const char *hn = json_string_value(json_array_get(v, 0));
	const char *fn = json_string_value(json_array_get(v, 1));
	int h = header_find(l->p, hn);
	if (h < 0) {
		fail(l, "%s: unknown header '%.60s'", where, hn);
		return NULL;
	}
	if (!strcmp(fn, "$valid$")) {
		struct p4_expr *e = expr_new(l, P4E_OP), *hd = expr_new(l, P4E_HEADER);
		if (e == NULL || hd == NULL)
			return NULL;
		hd->h = h;
		e->op = P4OP_VALID;
		e->a = hd;
		/* the hidden field reads as a 1-bit value, not a boolean */
		struct p4_expr *d = expr_new(l, P4E_OP);
		if (d == NULL)
			return NULL;
		d->op = P4OP_B2D;
		d->a = e;
		return d;
	}
	int f = field_find(l->p, h, fn);
	if (f < 0) {
		fail(l, "%s: header '%s' has no field '%.60s'", where, hn, fn);
		return NULL;
	}
	struct p4_expr *e = expr_new(l, P4E_FIELD);
	if (e == NULL)
		return NULL;
	e->h = h;
	e->f = f;
	return e;
}

/* A field list / learn list / named object by id or name. */
static int named(struct ld *l, json_t *v, int (*find)(const struct p4_prog *, const char *),
		 const char *what, const char *where)
{
	if (!json_is_string(v))
		return fail(l, "%s: %s must be named by a string", where, what);
	int i = find(l->p, json_string_value(v));
	if (i < 0)
		return fail(l, "%s: unknown %s '%.60s'", where, what, json_string_value(v));
	return i;
}

static int extern_find(const struct p4_prog *p, const char *name)
{
	(void)p;
	(void)name;
	return -1;   /* extern instances are refused at load */
}

/* A type-value object. */
static struct p4_expr *parse_tv(struct ld *l, json_t *tv, const char *where)
{
	if (l->failed)
		return NULL;
	if (!json_is_object(tv)) {
		char b[80];
		jshow(tv, b, sizeof(b));
		fail(l, "%s: expected a {\"type\", \"value\"} object, got %s", where, b);
		return NULL;
	}
	json_t *jt = json_object_get(tv, "type");
	if (jt == NULL && json_object_get(tv, "op") != NULL)
		return parse_op(l, tv, where);
	if (!json_is_string(jt)) {
		fail(l, "%s: a value object needs a \"type\" string", where);
		return NULL;
	}
	const char *t = json_string_value(jt);
	json_t *v = json_object_get(tv, "value");
	struct p4_expr *e = NULL;
	if (!strcmp(t, "expression")) {
		if (!json_is_object(v)) {
			fail(l, "%s: an expression needs an object value", where);
			return NULL;
		}
		if (json_object_get(v, "op") != NULL)
			return parse_op(l, v, where);
		return parse_tv(l, v, where);
	}
	if (!strcmp(t, "field"))
		return field_ref(l, v, where);
	if (!strcmp(t, "hexstr")) {
		if (!json_is_string(v)) {
			fail(l, "%s: hexstr needs a string", where);
			return NULL;
		}
		if ((e = expr_new(l, P4E_CONST)) == NULL)
			return NULL;
		if (hex_u128(l, json_string_value(v), &e->val, &e->neg, where) != 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "bool")) {
		if (!json_is_boolean(v)) {
			fail(l, "%s: bool needs true or false", where);
			return NULL;
		}
		if ((e = expr_new(l, P4E_BOOL)) == NULL)
			return NULL;
		e->val = json_is_true(v);
		return e;
	}
	if (!strcmp(t, "runtime_data") || !strcmp(t, "local")) {
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			fail(l, "%s: %s needs a non-negative integer", where, t);
			return NULL;
		}
		if ((e = expr_new(l, t[0] == 'r' ? P4E_RUNTIME : P4E_LOCAL)) == NULL)
			return NULL;
		e->idx = (int)json_integer_value(v);
		if (l->act == NULL || (uint32_t)e->idx >= l->act->n_params) {
			fail(l, "%s: %s %d outside the action's %u parameters", where, t, e->idx,
			     l->act ? l->act->n_params : 0);
			return NULL;
		}
		return e;
	}
	if (!strcmp(t, "header")) {
		if ((e = expr_new(l, P4E_HEADER)) == NULL)
			return NULL;
		if ((e->h = header_ref(l, v, where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "header_stack")) {
		if ((e = expr_new(l, P4E_STACK)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, stack_find, "header stack", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "header_union")) {
		if ((e = expr_new(l, P4E_UNION)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, union_find, "header union", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "header_union_stack")) {
		if ((e = expr_new(l, P4E_UNION_STACK)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, ustack_find, "header union stack", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "stack_field")) {
		if (!json_is_array(v) || json_array_size(v) != 2) {
			fail(l, "%s: stack_field needs [stack, field]", where);
			return NULL;
		}
		if ((e = expr_new(l, P4E_STACK_FIELD)) == NULL)
			return NULL;
		if ((e->idx = named(l, json_array_get(v, 0), stack_find, "header stack", where)) < 0)
			return NULL;
		const struct p4_stack *s = &l->p->stacks[e->idx];
		const char *fn = json_string_value(json_array_get(v, 1));
		if (fn == NULL || (e->f = field_find(l->p, s->headers[0], fn)) < 0) {
			fail(l, "%s: stack '%s' has no field '%.60s'", where, s->name, fn ? fn : "?");
			return NULL;
		}
		e->h = s->headers[0];
		return e;
	}
	if (!strcmp(t, "union_stack_field")) {
		fail(l, "%s: header union stacks are not supported", where);
		return NULL;
	}
	if (!strcmp(t, "lookahead")) {
		if (!json_is_array(v) || json_array_size(v) != 2 ||
		    !json_is_integer(json_array_get(v, 0)) || !json_is_integer(json_array_get(v, 1))) {
			fail(l, "%s: lookahead needs [offset, width]", where);
			return NULL;
		}
		json_int_t off = json_integer_value(json_array_get(v, 0));
		json_int_t w = json_integer_value(json_array_get(v, 1));
		if (off < 0 || w <= 0 || off > 65536 || w > (json_int_t)P4_MAX_WIDTH) {
			fail(l, "%s: a lookahead of %lld bits at %lld is not supported (at most %u bits)",
			     where, (long long)w, (long long)off, P4_MAX_WIDTH);
			return NULL;
		}
		if ((e = expr_new(l, P4E_LOOKAHEAD)) == NULL)
			return NULL;
		e->off = (uint32_t)off;
		e->width = (uint32_t)w;
		return e;
	}
	if (!strcmp(t, "register")) {
		fail(l, "%s: register references in expressions are not supported", where);
		return NULL;
	}
	if (!strcmp(t, "calculation")) {
		if ((e = expr_new(l, P4E_CALC)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, calc_find, "calculation", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "meter_array")) {
		if ((e = expr_new(l, P4E_METER)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, p4_meter_find, "meter array", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "counter_array")) {
		if ((e = expr_new(l, P4E_COUNTER)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, p4_counter_find, "counter array", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "register_array")) {
		if ((e = expr_new(l, P4E_REGARRAY)) == NULL)
			return NULL;
		if ((e->idx = named(l, v, p4_register_find, "register array", where)) < 0)
			return NULL;
		return e;
	}
	if (!strcmp(t, "extern")) {
		named(l, v, extern_find, "extern instance", where);
		return NULL;
	}
	if (!strcmp(t, "string")) {
		if (!json_is_string(v)) {
			fail(l, "%s: string needs a string value", where);
			return NULL;
		}
		if ((e = expr_new(l, P4E_STRING)) == NULL)
			return NULL;
		e->str = dupstr(l, json_string_value(v));
		return e;
	}
	if (!strcmp(t, "parameters_vector")) {
		if (!json_is_array(v)) {
			fail(l, "%s: parameters_vector needs an array", where);
			return NULL;
		}
		if ((e = expr_new(l, P4E_PARAMS)) == NULL)
			return NULL;
		e->n_list = (uint32_t)json_array_size(v);
		e->list = NEW(l, struct p4_expr *, e->n_list);
		if (e->list == NULL) {
			oom(l);
			return NULL;
		}
		for (uint32_t i = 0; i < e->n_list; i++)
			if ((e->list[i] = parse_tv(l, json_array_get(v, i), where)) == NULL)
				return NULL;
		return e;
	}
	fail(l, "%s: unsupported value type '%.40s'", where, t);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Headers                                                                    */

static int load_htypes(struct ld *l, json_t *root)
{
	json_t *arr = get_array(l, root, "header_types", "top level");
	if (arr == NULL)
		return -EINVAL;
	struct p4_prog *p = l->p;
	p->n_htypes = (uint32_t)json_array_size(arr);
	p->htypes = NEW(l, struct p4_htype, p->n_htypes);
	if (p->htypes == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_htypes; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "header type '%.60s'", name_of(o));
		struct p4_htype *t = &p->htypes[i];
		const char *nm = get_str(l, o, "name", where);
		long long id;
		if (nm == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		t->name = dupstr(l, nm);
		t->id = (int)id;
		t->varbit = -1;
		json_t *fields = get_array(l, o, "fields", where);
		if (fields == NULL)
			return -EINVAL;
		t->n_fields = (uint32_t)json_array_size(fields);
		t->fields = NEW(l, struct p4_field, t->n_fields);
		if (t->fields == NULL)
			return oom(l);
		uint32_t off = 0;
		for (uint32_t k = 0; k < t->n_fields; k++) {
			json_t *fj = json_array_get(fields, k);
			if (!json_is_array(fj) || json_array_size(fj) < 2 ||
			    !json_is_string(json_array_get(fj, 0)))
				return fail(l, "%s: field %u must be [name, width(, signed)]", where, k);
			struct p4_field *f = &t->fields[k];
			f->name = dupstr(l, json_string_value(json_array_get(fj, 0)));
			json_t *w = json_array_get(fj, 1);
			f->is_signed = json_array_size(fj) > 2 && json_is_true(json_array_get(fj, 2));
			f->bit_off = off;
			if (json_is_string(w) && !strcmp(json_string_value(w), "*")) {
				if (t->varbit >= 0)
					return fail(l, "%s: more than one variable-length field", where);
				f->varbit = true;
				t->varbit = (int)k;
				continue;
			}
			if (!json_is_integer(w) || json_integer_value(w) <= 0)
				return fail(l, "%s: field '%s' has a bad width", where, f->name);
			if (json_integer_value(w) > (json_int_t)P4_MAX_FIELD_BITS)
				return fail(l, "%s: field '%s' of %lld bits is not supported (at most %u bits)",
					    where, f->name, (long long)json_integer_value(w),
					    P4_MAX_FIELD_BITS);
			f->width = (uint32_t)json_integer_value(w);
			if (f->is_signed && f->width < 2)
				return fail(l, "%s: signed field '%s' needs at least 2 bits", where,
					    f->name);
			if (f->is_signed && f->width > 64)
				return fail(l, "%s: signed field '%s' of %u bits is not supported (at most 64 bits)",
					    where, f->name, f->width);
			off += f->width;
		}
		t->fixed_bits = off;
		if (t->varbit >= 0) {
			long long mx;
			if (get_int(l, o, "max_length", where, 1, 65536, &mx) != 0)
				return -EINVAL;
			t->max_bytes = (uint32_t)mx;
			if ((uint64_t)mx * 8 < off)
				return fail(l, "%s: max_length %lld is shorter than its fixed fields", where, mx);
			/* the fields after the varbit move with its length: offsets are
			 * computed at run time from the varbit's start */
			t->fields[t->varbit].width = (uint32_t)(mx * 8) - off;
		}
		if (t->fixed_bits % 8 != 0 && t->varbit < 0)
			/* legal for metadata; packet headers are checked when extracted */
			(void)0;
	}
	return 0;
}

static int load_headers(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = get_array(l, root, "headers", "top level");
	if (arr == NULL)
		return -EINVAL;
	p->n_headers = (uint32_t)json_array_size(arr);
	p->headers = NEW(l, struct p4_header, p->n_headers);
	if (p->headers == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_headers; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "header '%.60s'", name_of(o));
		struct p4_header *h = &p->headers[i];
		const char *nm = get_str(l, o, "name", where), *tn = get_str(l, o, "header_type", where);
		long long id;
		if (nm == NULL || tn == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		h->name = dupstr(l, nm);
		h->id = (int)id;
		h->type = htype_find(p, tn);
		if (h->type < 0)
			return fail(l, "%s: unknown header type '%.60s'", where, tn);
		h->metadata = get_bool_opt(o, "metadata", false);
		h->stack = h->stack_index = h->onion = h->onion_index = -1;
		if (h->metadata && p->htypes[h->type].varbit >= 0)
			return fail(l, "%s: a variable-length (varbit) field in metadata (a header the program declares as a local or metadata, not parsed) is not supported", where);
	}
	/* header ids are referenced by stacks and unions */
	return 0;
}

static int header_by_id(const struct p4_prog *p, long long id)
{
	for (uint32_t i = 0; i < p->n_headers; i++)
		if (p->headers[i].id == id)
			return (int)i;
	return -1;
}

static int load_stacks(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "header_stacks", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_stacks = arr ? (uint32_t)json_array_size(arr) : 0;
	p->stacks = NEW(l, struct p4_stack, p->n_stacks);
	if (p->stacks == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_stacks; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "header stack '%.60s'", name_of(o));
		struct p4_stack *s = &p->stacks[i];
		const char *nm = get_str(l, o, "name", where);
		long long id;
		json_t *ids = get_array(l, o, "header_ids", where);
		if (nm == NULL || ids == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		s->name = dupstr(l, nm);
		s->id = (int)id;
		s->size = (uint32_t)json_array_size(ids);
		if (s->size == 0 || s->size > 256)
			return fail(l, "%s: a stack of %u elements is not supported (1..256)", where, s->size);
		s->headers = NEW(l, int, s->size);
		if (s->headers == NULL)
			return oom(l);
		for (uint32_t k = 0; k < s->size; k++) {
			json_t *x = json_array_get(ids, k);
			int h = json_is_integer(x) ? header_by_id(p, json_integer_value(x)) : -1;
			if (h < 0)
				return fail(l, "%s: element %u is not a header id", where, k);
			if (p->headers[h].stack >= 0)
				return fail(l, "%s: header '%s' is in two stacks", where, p->headers[h].name);
			s->headers[k] = h;
			p->headers[h].stack = (int)i;
			p->headers[h].stack_index = (int)k;
			if (k > 0 && p->headers[h].type != p->headers[s->headers[0]].type)
				return fail(l, "%s: elements of different header types", where);
		}
		s->type = p->headers[s->headers[0]].type;
	}
	return 0;
}

static int load_unions(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "header_unions", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_unions = arr ? (uint32_t)json_array_size(arr) : 0;
	p->unions = NEW(l, struct p4_union, p->n_unions);
	if (p->unions == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_unions; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "header union '%.60s'", name_of(o));
		struct p4_union *u = &p->unions[i];
		const char *nm = get_str(l, o, "name", where);
		long long id;
		json_t *ids = get_array(l, o, "header_ids", where);
		if (nm == NULL || ids == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		u->name = dupstr(l, nm);
		u->id = (int)id;
		u->stack = u->stack_index = -1;
		u->n = (uint32_t)json_array_size(ids);
		u->headers = NEW(l, int, u->n);
		if (u->headers == NULL)
			return oom(l);
		for (uint32_t k = 0; k < u->n; k++) {
			json_t *x = json_array_get(ids, k);
			int h = json_is_integer(x) ? header_by_id(p, json_integer_value(x)) : -1;
			if (h < 0)
				return fail(l, "%s: member %u is not a header id", where, k);
			u->headers[k] = h;
			p->headers[h].onion = (int)i;
			p->headers[h].onion_index = (int)k;
		}
	}
	json_t *us = opt_array(l, root, "header_union_stacks", "top level");
	if (us != NULL && json_array_size(us) > 0)
		return fail(l, "header union stack '%.60s': header union stacks are not supported",
			    name_of(json_array_get(us, 0)));
	p->n_ustacks = 0;
	p->ustacks = NEW(l, struct p4_union_stack, 1);
	return l->failed;
}

static int load_errors(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "errors", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_errors = arr ? (uint32_t)json_array_size(arr) : 0;
	p->error_names = NEW(l, const char *, p->n_errors);
	p->error_values = NEW(l, int, p->n_errors);
	if (p->error_names == NULL || p->error_values == NULL)
		return oom(l);
	p->err_no_error = 0;
	p->err_too_short = 1;
	p->err_no_match = 2;
	p->err_stack_oob = 3;
	p->err_header_too_short = 4;
	p->err_invalid_arg = 6;
	for (uint32_t i = 0; i < p->n_errors; i++) {
		json_t *e = json_array_get(arr, i);
		if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
		    !json_is_integer(json_array_get(e, 1)))
			return fail(l, "errors[%u]: must be [name, value]", i);
		const char *n = json_string_value(json_array_get(e, 0));
		int v = (int)json_integer_value(json_array_get(e, 1));
		p->error_names[i] = dupstr(l, n);
		p->error_values[i] = v;
		if (!strcmp(n, "NoError"))
			p->err_no_error = v;
		else if (!strcmp(n, "PacketTooShort"))
			p->err_too_short = v;
		else if (!strcmp(n, "NoMatch"))
			p->err_no_match = v;
		else if (!strcmp(n, "StackOutOfBounds"))
			p->err_stack_oob = v;
		else if (!strcmp(n, "HeaderTooShort"))
			p->err_header_too_short = v;
		else if (!strcmp(n, "ParserInvalidArgument"))
			p->err_invalid_arg = v;
	}
	return 0;
}

/* A list of {"type": "field", "value": [h, f]} (field lists, learn lists,
 * selector inputs). */
static int load_field_elems(struct ld *l, json_t *arr, struct p4_expr ***out, uint32_t *n,
			    const char *where)
{
	*n = arr ? (uint32_t)json_array_size(arr) : 0;
	*out = NEW(l, struct p4_expr *, *n);
	if (*out == NULL)
		return oom(l);
	for (uint32_t k = 0; k < *n; k++) {
		json_t *x = json_array_get(arr, k);
		json_t *t = json_object_get(x, "type");
		if (!json_is_string(t) || strcmp(json_string_value(t), "field") != 0)
			return fail(l, "%s: element %u must be a field", where, k);
		if (((*out)[k] = field_ref(l, json_object_get(x, "value"), where)) == NULL)
			return -EINVAL;
		if ((*out)[k]->kind != P4E_FIELD)
			return fail(l, "%s: element %u must be a field, not a validity bit", where, k);
	}
	return 0;
}

static uint32_t field_bits(const struct p4_prog *p, const struct p4_expr *e)
{
	return p->htypes[p->headers[e->h].type].fields[e->f].width;
}

static int load_lists(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "field_lists", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_flists = arr ? (uint32_t)json_array_size(arr) : 0;
	p->flists = NEW(l, struct p4_field_list, p->n_flists);
	if (p->flists == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_flists; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "field list '%.60s'", name_of(o));
		struct p4_field_list *f = &p->flists[i];
		long long id;
		if (get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		f->id = (int)id;
		f->name = dupstr(l, name_of(o));
		if (load_field_elems(l, opt_array(l, o, "elements", where), &f->fields, &f->n, where))
			return -EINVAL;
	}
	arr = opt_array(l, root, "learn_lists", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_llists = arr ? (uint32_t)json_array_size(arr) : 0;
	p->llists = NEW(l, struct p4_learn_list, p->n_llists);
	if (p->llists == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_llists; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "learn list '%.60s'", name_of(o));
		struct p4_learn_list *f = &p->llists[i];
		long long id;
		if (get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		f->id = (int)id;
		f->name = dupstr(l, name_of(o));
		if (load_field_elems(l, opt_array(l, o, "elements", where), &f->fields, &f->n, where))
			return -EINVAL;
		for (uint32_t k = 0; k < f->n; k++)
			f->bytes += p4_bytes(field_bits(p, f->fields[k]));
		if (f->bytes > 1024)
			return fail(l, "%s: a digest of %u bytes is not supported (at most 1024)", where, f->bytes);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Calculations, registers, counters, meters                                  */

static const struct {
	const char *s;
	enum p4_algo a;
} algos[] = {
	{ "crc16", P4A_CRC16 }, { "crc32", P4A_CRC32 }, { "crcCCITT", P4A_CRC_CCITT },
	{ "csum16", P4A_CSUM16 }, { "cksum16", P4A_CSUM16 }, { "identity", P4A_IDENTITY },
	{ "xor16", P4A_XOR16 }, { "xor32", P4A_XOR32 }, { "xxh64", P4A_XXH64 },
	{ "crc8_custom", P4A_CRC8_CUSTOM }, { "crc16_custom", P4A_CRC16_CUSTOM },
	{ "crc32_custom", P4A_CRC32_CUSTOM }, { "crc64_custom", P4A_CRC64_CUSTOM },
	{ "round_robin", P4A_ROUND_ROBIN },
};

static int algo_find(struct ld *l, const char *s, enum p4_algo *a, const char *where)
{
	for (size_t k = 0; k < sizeof(algos) / sizeof(algos[0]); k++)
		if (!strcmp(algos[k].s, s)) {
			*a = algos[k].a;
			return 0;
		}
	return fail(l, "%s: unsupported hash algorithm '%.40s'", where, s);
}

static int load_calcs(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "calculations", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_calcs = arr ? (uint32_t)json_array_size(arr) : 0;
	p->calcs = NEW(l, struct p4_calc, p->n_calcs);
	if (p->calcs == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_calcs; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "calculation '%.60s'", name_of(o));
		struct p4_calc *c = &p->calcs[i];
		long long id;
		const char *algo = get_str(l, o, "algo", where);
		json_t *in = get_array(l, o, "input", where);
		if (algo == NULL || in == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		c->name = dupstr(l, name_of(o));
		c->id = (int)id;
		c->algo_name = dupstr(l, algo);
		if (algo_find(l, algo, &c->algo, where) != 0)
			return -EINVAL;
		c->n_in = (uint32_t)json_array_size(in);
		c->in = NEW(l, struct p4_calc_input, c->n_in);
		if (c->in == NULL)
			return oom(l);
		for (uint32_t k = 0; k < c->n_in; k++) {
			json_t *x = json_array_get(in, k);
			struct p4_calc_input *ci = &c->in[k];
			const char *t = get_str(l, x, "type", where);
			if (t == NULL)
				return -EINVAL;
			if (c->payload)
				return fail(l, "%s: input after the payload", where);
			if (!strcmp(t, "field")) {
				ci->kind = P4CI_FIELD;
				if ((ci->e = field_ref(l, json_object_get(x, "value"), where)) == NULL)
					return -EINVAL;
			} else if (!strcmp(t, "hexstr")) {
				long long bw;
				const char *v = get_str(l, x, "value", where);
				ci->kind = P4CI_CONST;
				if (v == NULL || get_int(l, x, "bitwidth", where, 1, P4_MAX_WIDTH, &bw) != 0 ||
				    hex_u128(l, v, &ci->val, NULL, where) != 0)
					return -EINVAL;
				ci->bits = (uint32_t)bw;
			} else if (!strcmp(t, "header")) {
				ci->kind = P4CI_HEADER;
				if ((ci->e = expr_new(l, P4E_HEADER)) == NULL)
					return -EINVAL;
				if ((ci->e->h = header_ref(l, json_object_get(x, "value"), where)) < 0)
					return -EINVAL;
				if (p->htypes[p->headers[ci->e->h].type].varbit >= 0)
					return fail(l, "%s: a header with a variable-length field as input",
						    where);
			} else if (!strcmp(t, "payload")) {
				ci->kind = P4CI_PAYLOAD;
				c->payload = true;
			} else {
				return fail(l, "%s: unsupported input type '%.40s'", where, t);
			}
		}
	}
	return 0;
}

static int load_state(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "register_arrays", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_registers = arr ? (uint32_t)json_array_size(arr) : 0;
	p->registers = NEW(l, struct p4_register, p->n_registers);
	if (p->registers == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_registers; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "register '%.60s'", name_of(o));
		struct p4_register *r = &p->registers[i];
		long long id, size, bw;
		if (get_int(l, o, "id", where, 0, 1 << 30, &id) || get_int(l, o, "size", where, 1, 1 << 24, &size) ||
		    get_int(l, o, "bitwidth", where, 1, 1 << 16, &bw))
			return -EINVAL;
		/* wider than P4_MAX_WIDTH: read into and written from a field of
		 * the same width only (the generator checks each use) */
		if (bw > (long long)P4_MAX_FIELD_BITS)
			return fail(l, "%s: %lld-bit elements are not supported (at most %u bits)", where, bw,
				    P4_MAX_FIELD_BITS);
		r->name = dupstr(l, name_of(o));
		r->id = (int)id;
		r->size = (uint32_t)size;
		r->width = (uint32_t)bw;
	}
	arr = opt_array(l, root, "counter_arrays", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_counters = arr ? (uint32_t)json_array_size(arr) : 0;
	p->counters = NEW(l, struct p4_counter, p->n_counters);
	if (p->counters == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_counters; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "counter '%.60s'", name_of(o));
		struct p4_counter *c = &p->counters[i];
		long long id, size = 0;
		if (get_int(l, o, "id", where, 0, 1 << 30, &id))
			return -EINVAL;
		c->name = dupstr(l, name_of(o));
		c->id = (int)id;
		c->direct = get_bool_opt(o, "is_direct", false);
		c->table = -1;
		if (!c->direct && get_int(l, o, "size", where, 1, 1 << 24, &size))
			return -EINVAL;
		c->size = (uint32_t)size;
	}
	arr = opt_array(l, root, "meter_arrays", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_meters = arr ? (uint32_t)json_array_size(arr) : 0;
	p->meters = NEW(l, struct p4_meter, p->n_meters);
	if (p->meters == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_meters; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "meter '%.60s'", name_of(o));
		struct p4_meter *m = &p->meters[i];
		long long id, size = 0, rc = 2;
		const char *type = get_str(l, o, "type", where);
		if (type == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id))
			return -EINVAL;
		m->name = dupstr(l, name_of(o));
		m->id = (int)id;
		m->direct = get_bool_opt(o, "is_direct", false);
		m->table = -1;
		if (!strcmp(type, "bytes"))
			m->bytes = true;
		else if (strcmp(type, "packets") != 0)
			return fail(l, "%s: type must be bytes or packets", where);
		if (json_object_get(o, "rate_count") && get_int(l, o, "rate_count", where, 1, 2, &rc))
			return -EINVAL;
		m->rate_count = (uint32_t)rc;
		if (!m->direct && get_int(l, o, "size", where, 1, 1 << 24, &size))
			return -EINVAL;
		m->size = (uint32_t)size;
		if (m->direct) {
			json_t *rt = json_object_get(o, "result_target");
			if (rt != NULL && !json_is_null(rt) &&
			    (m->result = field_ref(l, rt, where)) == NULL)
				return -EINVAL;
		}
	}
	json_t *ext = opt_array(l, root, "extern_instances", "top level");
	if (ext != NULL && json_array_size(ext) > 0) {
		json_t *o = json_array_get(ext, 0);
		json_t *t = json_object_get(o, "type");
		return fail(l, "extern instance '%.60s' (type %.40s): extern instances are not supported",
			    name_of(o), json_is_string(t) ? json_string_value(t) : "?");
	}
	return l->failed;
}

/* ------------------------------------------------------------------------ */
/* Actions                                                                    */

static const struct {
	const char *s;
	enum p4_prim_kind k;
	int nargs;      /* -1: any */
} prims[] = {
	{ "assign", P4P_ASSIGN, 2 }, { "assign_VL", P4P_ASSIGN_VL, 2 },
	{ "assign_header", P4P_ASSIGN_HEADER, 2 }, { "assign_union", P4P_ASSIGN_UNION, 2 },
	{ "assign_header_stack", P4P_ASSIGN_HEADER_STACK, 2 },
	{ "assign_union_stack", P4P_ASSIGN_UNION_STACK, 2 },
	{ "push", P4P_PUSH, 2 }, { "pop", P4P_POP, 2 },
	{ "_jump", P4P_JUMP, 1 }, { "_jump_if_zero", P4P_JUMP_IF_ZERO, 2 },
	{ "exit", P4P_EXIT, 0 }, { "assert", P4P_ASSERT, 1 }, { "assume", P4P_ASSUME, 1 },
	{ "log_msg", P4P_LOG_MSG, 2 },
	{ "mark_to_drop", P4P_MARK_TO_DROP, 1 }, { "drop", P4P_DROP, 0 },
	{ "add_header", P4P_ADD_HEADER, 1 }, { "remove_header", P4P_REMOVE_HEADER, 1 },
	{ "count", P4P_COUNT, 2 }, { "execute_meter", P4P_EXECUTE_METER, 3 },
	{ "register_read", P4P_REGISTER_READ, 3 }, { "register_write", P4P_REGISTER_WRITE, 3 },
	{ "modify_field_with_hash_based_offset", P4P_HASH, 4 },
	{ "modify_field_rng_uniform", P4P_RANDOM, 3 },
	{ "clone_ingress_pkt_to_egress", P4P_CLONE_I2E, 2 },
	{ "clone_egress_pkt_to_egress", P4P_CLONE_E2E, 2 },
	{ "resubmit", P4P_RESUBMIT, 1 }, { "recirculate", P4P_RECIRCULATE, 1 },
	{ "generate_digest", P4P_DIGEST, 2 }, { "truncate", P4P_TRUNCATE, 1 },
	{ "no_op", P4P_NO_OP, 0 },
	/* P4_14 primitives some p4c outputs still use */
	{ "modify_field", P4P_ASSIGN, 2 }, { "copy_header", P4P_ASSIGN_HEADER, 2 },
	{ "add_header_fast", P4P_ADD_HEADER, 1 },
	/* dst = dst + v / dst - v (BMv2 truncates to dst's width, as assign) */
	{ "add_to_field", P4P_ASSIGN, 2 }, { "subtract_from_field", P4P_ASSIGN, 2 },
};

static int load_prim(struct ld *l, json_t *o, struct p4_prim *pr, const char *where)
{
	const char *op = get_str(l, o, "op", where);
	json_t *params = get_array(l, o, "parameters", where);
	if (op == NULL || params == NULL)
		return -EINVAL;
	json_t *si = json_object_get(o, "source_info");
	json_t *frag = json_is_object(si) ? json_object_get(si, "source_fragment") : NULL;
	pr->where = json_is_string(frag) ? dupstr(l, json_string_value(frag)) : NULL;
	pr->op = dupstr(l, op);
	size_t k;
	for (k = 0; k < sizeof(prims) / sizeof(prims[0]); k++)
		if (!strcmp(prims[k].s, op))
			break;
	if (k == sizeof(prims) / sizeof(prims[0]))
		return fail(l, "%s: unsupported primitive '%.60s'", where, op);
	pr->kind = prims[k].k;
	pr->n_args = (uint32_t)json_array_size(params);
	if (prims[k].nargs >= 0 && pr->n_args != (uint32_t)prims[k].nargs)
		return fail(l, "%s: primitive '%s' takes %d parameters, not %u", where, op,
			    prims[k].nargs, pr->n_args);
	pr->args = NEW(l, struct p4_expr *, pr->n_args);
	if (pr->args == NULL)
		return oom(l);
	for (uint32_t i = 0; i < pr->n_args; i++)
		if ((pr->args[i] = parse_tv(l, json_array_get(params, i), where)) == NULL)
			return -EINVAL;
	bool add = !strcmp(op, "add_to_field");
	if (add || !strcmp(op, "subtract_from_field")) {
		struct p4_expr *e = expr_new(l, P4E_OP);
		if (e == NULL)
			return -EINVAL;
		e->op = add ? P4OP_ADD : P4OP_SUB;
		e->a = pr->args[0];
		e->b = pr->args[1];
		pr->args[1] = e;
	}
	return 0;
}

static int load_actions(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = get_array(l, root, "actions", "top level");
	if (arr == NULL)
		return -EINVAL;
	p->n_actions = (uint32_t)json_array_size(arr);
	p->actions = NEW(l, struct p4_action, p->n_actions);
	if (p->actions == NULL)
		return oom(l);
	/* names and parameters first: primitives may refer to other objects only */
	for (uint32_t i = 0; i < p->n_actions; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "action '%.60s'", name_of(o));
		struct p4_action *a = &p->actions[i];
		long long id;
		const char *nm = get_str(l, o, "name", where);
		json_t *rd = get_array(l, o, "runtime_data", where);
		if (nm == NULL || rd == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		a->name = dupstr(l, nm);
		a->id = (int)id;
		a->n_params = (uint32_t)json_array_size(rd);
		a->params = NEW(l, struct p4_param, a->n_params);
		if (a->params == NULL)
			return oom(l);
		for (uint32_t k = 0; k < a->n_params; k++) {
			json_t *x = json_array_get(rd, k);
			long long bw;
			const char *pn = get_str(l, x, "name", where);
			if (pn == NULL || get_int(l, x, "bitwidth", where, 1, P4_MAX_FIELD_BITS, &bw) != 0)
				return -EINVAL;
			a->params[k].name = dupstr(l, pn);
			a->params[k].width = (uint32_t)bw;
			a->params[k].byte_off = a->data_bytes;
			a->data_bytes += p4_bytes((uint32_t)bw);
		}
		if (a->data_bytes > 1024)
			return fail(l, "%s: %u bytes of action data are not supported (at most 1024)", where,
				    a->data_bytes);
	}
	for (uint32_t i = 0; i < p->n_actions; i++) {
		json_t *o = json_array_get(arr, i);
		struct p4_action *a = &p->actions[i];
		json_t *pr = get_array(l, o, "primitives", "action");
		if (pr == NULL)
			return -EINVAL;
		a->n_prims = (uint32_t)json_array_size(pr);
		a->prims = NEW(l, struct p4_prim, a->n_prims);
		if (a->prims == NULL)
			return oom(l);
		l->act = a;
		for (uint32_t k = 0; k < a->n_prims; k++) {
			char where[200];
			snprintf(where, sizeof(where), "action '%.60s' (primitive %u)", a->name, k);
			if (load_prim(l, json_array_get(pr, k), &a->prims[k], where) != 0)
				return -EINVAL;
		}
		l->act = NULL;
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Parser and deparser                                                        */

static int load_vsets(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "parse_vsets", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_vsets = arr ? (uint32_t)json_array_size(arr) : 0;
	p->vsets = NEW(l, struct p4_vset, p->n_vsets);
	if (p->vsets == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_vsets; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "parse value set '%.60s'", name_of(o));
		struct p4_vset *v = &p->vsets[i];
		long long id, bw, mx = 256;
		if (get_int(l, o, "id", where, 0, 1 << 30, &id) ||
		    get_int(l, o, "compressed_bitwidth", where, 1, P4_MAX_WIDTH, &bw))
			return -EINVAL;
		if (json_object_get(o, "max_size") && get_int(l, o, "max_size", where, 1, 4096, &mx))
			return -EINVAL;
		v->name = dupstr(l, name_of(o));
		v->id = (int)id;
		v->width = (uint32_t)bw;
		v->max_size = (uint32_t)mx;
	}
	return 0;
}

static int state_find(const struct p4_prog *p, const char *name)
{
	for (uint32_t i = 0; i < p->n_states; i++)
		if (!strcmp(p->states[i].name, name))
			return (int)i;
	return -1;
}

static int extract_target(struct ld *l, json_t *t, struct p4_parse_op *op, const char *where)
{
	const char *ty = get_str(l, t, "type", where);
	json_t *v = json_object_get(t, "value");
	if (ty == NULL)
		return -EINVAL;
	op->header = op->stack = op->union_stack = op->union_member = -1;
	if (!strcmp(ty, "regular")) {
		if ((op->header = header_ref(l, v, where)) < 0)
			return -EINVAL;
		if (l->p->headers[op->header].metadata)
			return fail(l, "%s: extract into metadata '%s'", where, l->p->headers[op->header].name);
		return 0;
	}
	if (!strcmp(ty, "stack"))
		return (op->stack = named(l, v, stack_find, "header stack", where)) < 0 ? -EINVAL : 0;
	if (!strcmp(ty, "union_stack"))
		return fail(l, "%s: header union stacks are not supported", where);
	return fail(l, "%s: unsupported extract target '%.40s'", where, ty);
}

static uint32_t key_expr_bits(struct ld *l, const struct p4_expr *e)
{
	if (e->kind == P4E_FIELD || e->kind == P4E_STACK_FIELD)
		return field_bits(l->p, e);
	if (e->kind == P4E_LOOKAHEAD)
		return e->width;
	return 0;
}

static int load_parser(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = get_array(l, root, "parsers", "top level");
	if (arr == NULL)
		return -EINVAL;
	if (json_array_size(arr) != 1)
		return fail(l, "parsers: v1model has one parser, this program has %zu",
			    json_array_size(arr));
	json_t *po = json_array_get(arr, 0);
	json_t *states = get_array(l, po, "parse_states", "parser");
	if (states == NULL)
		return -EINVAL;
	p->n_states = (uint32_t)json_array_size(states);
	p->states = NEW(l, struct p4_pstate, p->n_states);
	if (p->states == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_states; i++) {
		json_t *o = json_array_get(states, i);
		long long id;
		const char *nm = get_str(l, o, "name", "parser state");
		if (nm == NULL || get_int(l, o, "id", "parser state", 0, 1 << 30, &id) != 0)
			return -EINVAL;
		p->states[i].name = dupstr(l, nm);
		p->states[i].id = (int)id;
	}
	const char *init = get_str(l, po, "init_state", "parser");
	if (init == NULL)
		return -EINVAL;
	p->init_state = state_find(p, init);
	if (p->init_state < 0)
		return fail(l, "parser: unknown init_state '%.60s'", init);
	for (uint32_t i = 0; i < p->n_states; i++) {
		json_t *o = json_array_get(states, i);
		struct p4_pstate *s = &p->states[i];
		char where[200];
		snprintf(where, sizeof(where), "parser state '%.60s'", s->name);
		json_t *ops_j = get_array(l, o, "parser_ops", where);
		json_t *key = opt_array(l, o, "transition_key", where);
		json_t *tr = get_array(l, o, "transitions", where);
		if (ops_j == NULL || tr == NULL || l->failed)
			return -EINVAL;
		s->n_ops = (uint32_t)json_array_size(ops_j);
		s->ops = NEW(l, struct p4_parse_op, s->n_ops);
		if (s->ops == NULL)
			return oom(l);
		for (uint32_t k = 0; k < s->n_ops; k++) {
			json_t *x = json_array_get(ops_j, k);
			struct p4_parse_op *op = &s->ops[k];
			char w2[240];
			snprintf(w2, sizeof(w2), "%s (operation %u)", where, k);
			const char *ok = get_str(l, x, "op", w2);
			json_t *prm = get_array(l, x, "parameters", w2);
			if (ok == NULL || prm == NULL)
				return -EINVAL;
			size_t np = json_array_size(prm);
			op->header = op->stack = op->union_stack = op->union_member = -1;
			if (!strcmp(ok, "extract")) {
				op->kind = P4PO_EXTRACT;
				if (np != 1 || extract_target(l, json_array_get(prm, 0), op, w2) != 0)
					return l->failed ? -EINVAL : fail(l, "%s: extract takes one parameter", w2);
				int ty = op->header >= 0 ? p->headers[op->header].type : p->stacks[op->stack].type;
				if (p->htypes[ty].varbit >= 0)
					return fail(l, "%s: extract of a header with a varbit without a length", w2);
			} else if (!strcmp(ok, "extract_VL")) {
				op->kind = P4PO_EXTRACT_VL;
				if (np != 2 || extract_target(l, json_array_get(prm, 0), op, w2) != 0 ||
				    (op->a = parse_tv(l, json_array_get(prm, 1), w2)) == NULL)
					return l->failed ? -EINVAL : fail(l, "%s: extract_VL takes two parameters", w2);
				int ty = op->header >= 0 ? p->headers[op->header].type : p->stacks[op->stack].type;
				if (p->htypes[ty].varbit < 0)
					return fail(l, "%s: extract_VL of a header without a varbit", w2);
			} else if (!strcmp(ok, "set")) {
				op->kind = P4PO_SET;
				if (np != 2)
					return fail(l, "%s: set takes two parameters", w2);
				if ((op->a = parse_tv(l, json_array_get(prm, 0), w2)) == NULL ||
				    (op->b = parse_tv(l, json_array_get(prm, 1), w2)) == NULL)
					return -EINVAL;
				if (op->a->kind != P4E_FIELD)
					return fail(l, "%s: set needs a field to assign", w2);
			} else if (!strcmp(ok, "verify")) {
				op->kind = P4PO_VERIFY;
				if (np != 2 || (op->a = parse_tv(l, json_array_get(prm, 0), w2)) == NULL ||
				    (op->b = parse_tv(l, json_array_get(prm, 1), w2)) == NULL)
					return l->failed ? -EINVAL : fail(l, "%s: verify takes two parameters", w2);
			} else if (!strcmp(ok, "advance") || !strcmp(ok, "shift")) {
				op->kind = P4PO_ADVANCE;
				if (np != 1)
					return fail(l, "%s: %s takes one parameter", w2, ok);
				json_t *a0 = json_array_get(prm, 0);
				if (!strcmp(ok, "shift")) {
					if (!json_is_integer(a0) || json_integer_value(a0) < 0)
						return fail(l, "%s: shift needs a byte count", w2);
					if ((op->a = expr_new(l, P4E_CONST)) == NULL)
						return -EINVAL;
					op->a->val = (p4_u128)json_integer_value(a0) * 8;
				} else if ((op->a = parse_tv(l, a0, w2)) == NULL) {
					return -EINVAL;
				}
			} else if (!strcmp(ok, "primitive")) {
				op->kind = P4PO_PRIMITIVE;
				if (np != 1 || load_prim(l, json_array_get(prm, 0), &op->prim, w2) != 0)
					return l->failed ? -EINVAL : fail(l, "%s: primitive takes one parameter", w2);
			} else {
				return fail(l, "%s: unsupported parser operation '%.40s'", w2, ok);
			}
		}
		s->n_key = key ? (uint32_t)json_array_size(key) : 0;
		s->key = NEW(l, struct p4_expr *, s->n_key);
		s->key_bits = NEW(l, uint32_t, s->n_key);
		if (s->key == NULL || s->key_bits == NULL)
			return oom(l);
		for (uint32_t k = 0; k < s->n_key; k++) {
			char w2[240];
			snprintf(w2, sizeof(w2), "%s (transition key %u)", where, k);
			if ((s->key[k] = parse_tv(l, json_array_get(key, k), w2)) == NULL)
				return -EINVAL;
			s->key_bits[k] = key_expr_bits(l, s->key[k]);
			if (s->key_bits[k] == 0)
				return fail(l, "%s: a transition key must be a field or a lookahead", w2);
			if (s->key_bits[k] > P4_MAX_WIDTH)
				return fail(l, "%s: a %u-bit key element is not supported (at most %u bits)", w2,
					    s->key_bits[k], P4_MAX_WIDTH);
			s->key_bytes += p4_bytes(s->key_bits[k]);
		}
		s->n_trans = (uint32_t)json_array_size(tr);
		s->trans = NEW(l, struct p4_transition, s->n_trans);
		if (s->trans == NULL)
			return oom(l);
		for (uint32_t k = 0; k < s->n_trans; k++) {
			json_t *x = json_array_get(tr, k);
			struct p4_transition *t = &s->trans[k];
			char w2[240];
			snprintf(w2, sizeof(w2), "%s (transition %u)", where, k);
			json_t *ty = json_object_get(x, "type");
			json_t *nx = json_object_get(x, "next_state");
			const char *tys = json_is_string(ty) ? json_string_value(ty) : "hexstr";
			t->next = -1;
			t->vset = -1;
			if (nx != NULL && !json_is_null(nx)) {
				if (!json_is_string(nx) || (t->next = state_find(p, json_string_value(nx))) < 0)
					return fail(l, "%s: unknown next state %s%.80s%s", w2,
						    json_is_string(nx) ? "'" : "(not a name)",
						    json_is_string(nx) ? json_string_value(nx) : "",
						    json_is_string(nx) ? "'" : "");
			}
			json_t *val = json_object_get(x, "value"), *mask = json_object_get(x, "mask");
			if (!strcmp(tys, "default")) {
				t->kind = P4T_DEFAULT;
				continue;
			}
			if (!strcmp(tys, "hexstr")) {
				if (json_is_string(val) && !strcmp(json_string_value(val), "default")) {
					t->kind = P4T_DEFAULT;
					continue;
				}
				t->kind = P4T_VALUE;
				t->value = NEW(l, uint8_t, s->key_bytes);
				if (t->value == NULL)
					return oom(l);
				if (!json_is_string(val) ||
				    hex_bytes(l, json_string_value(val), t->value, s->key_bytes, NULL, w2) != 0)
					return l->failed ? -EINVAL : fail(l, "%s: bad value", w2);
			} else if (!strcmp(tys, "parse_vset")) {
				t->kind = P4T_VSET;
				if ((t->vset = named(l, val, p4_vset_find, "parse value set", w2)) < 0)
					return -EINVAL;
			} else {
				return fail(l, "%s: unsupported transition type '%.40s'", w2, tys);
			}
			if (mask != NULL && !json_is_null(mask)) {
				t->mask = NEW(l, uint8_t, s->key_bytes);
				if (t->mask == NULL)
					return oom(l);
				if (!json_is_string(mask) ||
				    hex_bytes(l, json_string_value(mask), t->mask, s->key_bytes, NULL, w2) != 0)
					return l->failed ? -EINVAL : fail(l, "%s: bad mask", w2);
			}
			if (s->n_key == 0)
				return fail(l, "%s: a value transition without a key", w2);
		}
	}
	/* the deparser */
	json_t *dp = get_array(l, root, "deparsers", "top level");
	if (dp == NULL)
		return -EINVAL;
	if (json_array_size(dp) != 1)
		return fail(l, "deparsers: v1model has one deparser, this program has %zu",
			    json_array_size(dp));
	json_t *order = get_array(l, json_array_get(dp, 0), "order", "deparser");
	if (order == NULL)
		return -EINVAL;
	p->n_deparse = (uint32_t)json_array_size(order);
	p->deparse = NEW(l, int, p->n_deparse);
	if (p->deparse == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_deparse; i++) {
		if ((p->deparse[i] = header_ref(l, json_array_get(order, i), "deparser")) < 0)
			return -EINVAL;
		if (p->headers[p->deparse[i]].metadata)
			return fail(l, "deparser: emits metadata '%s'", p->headers[p->deparse[i]].name);
	}
	json_t *dprim = opt_array(l, json_array_get(dp, 0), "primitives", "deparser");
	if (dprim != NULL && json_array_size(dprim) > 0)
		return fail(l, "deparser: primitives in the deparser are not supported");
	return l->failed;
}

/* ------------------------------------------------------------------------ */
/* Pipelines                                                                  */

struct pipe_ld {
	json_t *tables, *conds;
	int pipe;
};

static int node_ref(struct ld *l, struct pipe_ld *pl, json_t *v, struct p4_node *n, const char *where)
{
	n->kind = P4N_NONE;
	n->idx = -1;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return fail(l, "%s: a next node must be a name or null", where);
	const char *s = json_string_value(v);
	struct p4_pipeline *pp = &l->p->pipes[pl->pipe];
	for (uint32_t i = 0; i < pp->n_tables; i++)
		if (!strcmp(l->p->tables[pp->tables[i]].name, s)) {
			n->kind = P4N_TABLE;
			n->idx = pp->tables[i];
			return 0;
		}
	for (uint32_t i = 0; i < pp->n_conds; i++)
		if (!strcmp(pp->conds[i].name, s)) {
			n->kind = P4N_COND;
			n->idx = (int)i;
			return 0;
		}
	return fail(l, "%s: unknown next node '%.60s'", where, s);
}

static const char *match_names[] = { "exact", "lpm", "ternary", "range", "optional", "valid" };

static int match_parse(struct ld *l, const char *s, enum p4_match *m, const char *where)
{
	for (int i = 0; i < 6; i++)
		if (!strcmp(match_names[i], s)) {
			*m = (enum p4_match)i;
			return 0;
		}
	return fail(l, "%s: unsupported match kind '%.40s'", where, s);
}

/* One entry's key (const entries) into e, for table t. */
static int load_entry_key(struct ld *l, struct p4_table *t, json_t *mk, struct p4_entry *e,
			  const char *where)
{
	if (!json_is_array(mk) || json_array_size(mk) != t->n_keys)
		return fail(l, "%s: match_key must have %u elements", where, t->n_keys);
	e->key = NEW(l, uint8_t, t->key_bytes);
	e->kmask = NEW(l, uint8_t, t->key_bytes);
	e->khi = NEW(l, uint8_t, t->key_bytes);
	if (e->key == NULL || e->kmask == NULL || e->khi == NULL)
		return oom(l);
	e->prefix = -1;
	for (uint32_t k = 0; k < t->n_keys; k++) {
		const struct p4_key *ky = &t->keys[k];
		json_t *x = json_array_get(mk, k);
		const char *mt = get_str(l, x, "match_type", where);
		if (mt == NULL)
			return -EINVAL;
		uint8_t *v = e->key + ky->off, *m = e->kmask + ky->off, *hi = e->khi + ky->off;
		memset(m, 0xff, ky->bytes);
		if (!strcmp(mt, "exact") || !strcmp(mt, "valid")) {
			json_t *kv = json_object_get(x, "key");
			if (json_is_boolean(kv)) {
				memset(v, 0, ky->bytes);
				v[ky->bytes - 1] = json_is_true(kv);
			} else {
				const char *ks = get_str(l, x, "key", where);
				if (ks == NULL || hex_bytes(l, ks, v, ky->bytes, NULL, where))
					return -EINVAL;
			}
		} else if (!strcmp(mt, "lpm")) {
			const char *ks = get_str(l, x, "key", where);
			long long pl;
			if (ks == NULL || hex_bytes(l, ks, v, ky->bytes, NULL, where) ||
			    get_int(l, x, "prefix_length", where, 0, ky->bits, &pl))
				return -EINVAL;
			e->prefix = (int)pl;
			/* the mask of a prefix of pl bits on a bits-wide field in bytes */
			uint32_t pad = ky->bytes * 8 - ky->bits;
			memset(m, 0, ky->bytes);
			for (uint32_t b = 0; b < (uint32_t)pl; b++) {
				uint32_t bit = pad + b;
				m[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
			}
		} else if (!strcmp(mt, "ternary") || !strcmp(mt, "optional")) {
			const char *ks = get_str(l, x, "key", where), *ms = get_str(l, x, "mask", where);
			if (ks == NULL || ms == NULL || hex_bytes(l, ks, v, ky->bytes, NULL, where) ||
			    hex_bytes(l, ms, m, ky->bytes, NULL, where))
				return -EINVAL;
		} else if (!strcmp(mt, "range")) {
			const char *lo = get_str(l, x, "start", where), *hs = get_str(l, x, "end", where);
			if (lo == NULL || hs == NULL || hex_bytes(l, lo, v, ky->bytes, NULL, where) ||
			    hex_bytes(l, hs, hi, ky->bytes, NULL, where))
				return -EINVAL;
			/* the lo in the mask too, where the tables' records keep it
			 * (p4_cli.c's range keys; the mask was all ones: every const
			 * range entry started at the key's maximum) */
			memcpy(m, v, ky->bytes);
		} else {
			return fail(l, "%s: unsupported match type '%.40s' in an entry", where, mt);
		}
		for (uint32_t b = 0; b < ky->bytes; b++)
			if (strcmp(mt, "range") != 0)
				v[b] &= m[b];
	}
	return 0;
}

/* An action entry {"action_id", "action_data"} into e (action must be one of t's). */
static int load_action_entry(struct ld *l, struct p4_table *t, json_t *ae, struct p4_entry *e,
			     const char *where)
{
	long long aid;
	if (get_int(l, ae, "action_id", where, 0, 1 << 30, &aid) != 0)
		return -EINVAL;
	e->action = action_by_id(l->p, aid);
	if (e->action < 0)
		return fail(l, "%s: unknown action id %lld", where, aid);
	if (t != NULL) {
		bool ok = false;
		for (uint32_t i = 0; i < t->n_actions; i++)
			ok |= t->actions[i] == e->action;
		if (!ok)
			return fail(l, "%s: action '%s' is not an action of the table", where,
				    l->p->actions[e->action].name);
	}
	const struct p4_action *a = &l->p->actions[e->action];
	json_t *ad = json_object_get(ae, "action_data");
	uint32_t n = ad && json_is_array(ad) ? (uint32_t)json_array_size(ad) : 0;
	if (n != a->n_params)
		return fail(l, "%s: action '%s' takes %u parameters, %u given", where, a->name,
			    a->n_params, n);
	e->data = NEW(l, uint8_t, a->data_bytes);
	if (e->data == NULL)
		return oom(l);
	for (uint32_t i = 0; i < n; i++) {
		json_t *x = json_array_get(ad, i);
		if (!json_is_string(x))
			return fail(l, "%s: action data must be hex strings", where);
		const struct p4_param *pp = &a->params[i];
		if (hex_bytes(l, json_string_value(x), e->data + pp->byte_off, p4_bytes(pp->width), NULL,
			      where) != 0)
			return -EINVAL;
	}
	return 0;
}

static int load_table(struct ld *l, json_t *o, struct p4_table *t)
{
	struct p4_prog *p = l->p;
	char where[160];
	snprintf(where, sizeof(where), "table '%.60s'", t->name);
	const char *mt = get_str(l, o, "match_type", where), *ty = get_str(l, o, "type", where);
	long long ms = 0;
	json_t *keys = get_array(l, o, "key", where);
	/* actions by id (p4c), or by name (older writers) */
	json_t *aids = json_object_get(o, "action_ids");
	bool by_name = aids == NULL;
	if (by_name)
		aids = get_array(l, o, "actions", where);
	else if (!json_is_array(aids))
		aids = get_array(l, o, "action_ids", where);
	if (mt == NULL || ty == NULL || keys == NULL || aids == NULL ||
	    get_int(l, o, "max_size", where, 0, 1 << 24, &ms) != 0)
		return -EINVAL;
	t->max_size = ms ? (uint32_t)ms : 1;
	t->with_counters = get_bool_opt(o, "with_counters", false);
	/* (idle timeout: entries never age out; only the control plane's
	 * notifications depend on it, never a packet's fate) */
	t->support_timeout = get_bool_opt(o, "support_timeout", false);
	t->profile = -1;
	t->direct_counter = t->direct_meter = -1;
	t->lpm_key = -1;
	if (!strcmp(ty, "simple")) {
		t->impl = P4TI_SIMPLE;
	} else if (!strcmp(ty, "indirect") || !strcmp(ty, "indirect_ws")) {
		t->impl = ty[8] ? P4TI_INDIRECT_WS : P4TI_INDIRECT;
		const char *ap = get_str(l, o, "action_profile", where);
		if (ap == NULL)
			return -EINVAL;
		if ((t->profile = p4_profile_find(p, ap)) < 0)
			return fail(l, "%s: unknown action profile '%.60s'", where, ap);
		if (t->impl == P4TI_INDIRECT_WS && !p->profiles[t->profile].selector)
			return fail(l, "%s: action profile '%s' has no selector", where,
				    p->profiles[t->profile].name);
	} else {
		return fail(l, "%s: unsupported table type '%.40s'", where, ty);
	}
	t->n_keys = (uint32_t)json_array_size(keys);
	t->keys = NEW(l, struct p4_key, t->n_keys);
	if (t->keys == NULL)
		return oom(l);
	bool ternary = false, lpm = false;
	for (uint32_t k = 0; k < t->n_keys; k++) {
		json_t *x = json_array_get(keys, k);
		struct p4_key *ky = &t->keys[k];
		const char *km = get_str(l, x, "match_type", where);
		if (km == NULL || match_parse(l, km, &ky->match, where) != 0)
			return -EINVAL;
		json_t *tg = json_object_get(x, "target");
		json_t *nm = json_object_get(x, "name");
		ky->name = dupstr(l, json_is_string(nm) ? json_string_value(nm) : "");
		if (ky->match == P4M_VALID) {
			if ((ky->target = expr_new(l, P4E_HEADER)) == NULL)
				return -EINVAL;
			if ((ky->target->h = header_ref(l, tg, where)) < 0)
				return -EINVAL;
			ky->bits = 1;
		} else {
			if ((ky->target = field_ref(l, tg, where)) == NULL)
				return -EINVAL;
			ky->bits = ky->target->kind == P4E_FIELD ? field_bits(p, ky->target) : 1;
			if (ky->target->kind == P4E_FIELD &&
			    p->htypes[p->headers[ky->target->h].type].fields[ky->target->f].varbit)
				return fail(l, "%s: a key on a variable-length field", where);
		}
		ky->bytes = p4_bytes(ky->bits);
		ky->off = t->key_bytes;
		t->key_bytes += ky->bytes;
		json_t *mk = json_object_get(x, "mask");
		if (mk != NULL && !json_is_null(mk)) {
			ky->mask = NEW(l, uint8_t, ky->bytes);
			if (ky->mask == NULL)
				return oom(l);
			if (!json_is_string(mk) || hex_bytes(l, json_string_value(mk), ky->mask, ky->bytes, NULL,
							       where) != 0)
				return l->failed ? -EINVAL : fail(l, "%s: bad key mask", where);
		}
		if (ky->match == P4M_TERNARY || ky->match == P4M_RANGE || ky->match == P4M_OPTIONAL)
			ternary = true;
		if (ky->match == P4M_LPM) {
			if (t->lpm_key >= 0)
				return fail(l, "%s: more than one lpm key", where);
			t->lpm_key = (int)k;
			lpm = true;
		}
	}
	if (t->key_bytes > 128)
		return fail(l, "%s: a key of %u bytes is not supported (at most 128)", where, t->key_bytes);
	if (t->n_keys == 0)
		t->cls = P4TC_NOKEY;
	else if (ternary)
		t->cls = P4TC_TERNARY;
	else if (lpm)
		t->cls = P4TC_LPM;
	else
		t->cls = P4TC_EXACT;
	t->n_actions = (uint32_t)json_array_size(aids);
	t->actions = NEW(l, int, t->n_actions);
	t->next_by_action = NEW(l, struct p4_node, t->n_actions);
	if (t->actions == NULL || t->next_by_action == NULL)
		return oom(l);
	for (uint32_t k = 0; k < t->n_actions; k++) {
		json_t *x = json_array_get(aids, k);
		if (by_name ? (!json_is_string(x) || (t->actions[k] = p4_action_find(p, json_string_value(x))) < 0)
			    : (!json_is_integer(x) || (t->actions[k] = action_by_id(p, json_integer_value(x))) < 0))
			return fail(l, "%s: %s[%u] is not an action", where, by_name ? "actions" : "action_ids", k);
		uint32_t db = p->actions[t->actions[k]].data_bytes;
		if (db > t->data_bytes)
			t->data_bytes = db;
	}
	return 0;
}

/* Next nodes, default entry and const entries (after every node is known). */
static int load_table_links(struct ld *l, struct pipe_ld *pl, json_t *o, struct p4_table *t)
{
	struct p4_prog *p = l->p;
	char where[160];
	snprintf(where, sizeof(where), "table '%.60s'", t->name);
	json_t *nt = json_object_get(o, "next_tables");
	if (!json_is_object(nt))
		return fail(l, "%s: missing \"next_tables\"", where);
	if (node_ref(l, pl, json_object_get(o, "base_default_next"), &t->base_next, where) != 0)
		return -EINVAL;
	json_t *hit = json_object_get(nt, "__HIT__"), *miss = json_object_get(nt, "__MISS__");
	if (hit != NULL || miss != NULL) {
		t->hit_miss = true;
		if (node_ref(l, pl, hit, &t->next_hit, where) || node_ref(l, pl, miss, &t->next_miss, where))
			return -EINVAL;
	}
	for (uint32_t k = 0; k < t->n_actions; k++) {
		json_t *v = json_object_get(nt, p->actions[t->actions[k]].name);
		if (v == NULL)
			t->next_by_action[k] = t->base_next;
		else if (node_ref(l, pl, v, &t->next_by_action[k], where) != 0)
			return -EINVAL;
	}
	json_t *de = json_object_get(o, "default_entry");
	if (de != NULL && !json_is_null(de)) {
		char w2[200];
		snprintf(w2, sizeof(w2), "%s (default entry)", where);
		t->has_default = true;
		if (load_action_entry(l, t, de, &t->def, w2) != 0)
			return -EINVAL;
		t->default_const = get_bool_opt(de, "action_const", false);
		t->default_entry_const = get_bool_opt(de, "action_entry_const", false);
	}
	json_t *ents = opt_array(l, o, "entries", where);
	if (l->failed)
		return -EINVAL;
	if (ents != NULL) {
		t->const_entries = true;
		t->n_entries = (uint32_t)json_array_size(ents);
		t->entries = NEW(l, struct p4_entry, t->n_entries);
		if (t->entries == NULL)
			return oom(l);
		if (t->impl != P4TI_SIMPLE && t->n_entries > 0)
			return fail(l, "%s: const entries in a table with an action profile", where);
		for (uint32_t k = 0; k < t->n_entries; k++) {
			json_t *x = json_array_get(ents, k);
			char w2[200];
			snprintf(w2, sizeof(w2), "%s (entry %u)", where, k);
			struct p4_entry *e = &t->entries[k];
			if (load_entry_key(l, t, json_object_get(x, "match_key"), e, w2) != 0 ||
			    load_action_entry(l, t, json_object_get(x, "action_entry"), e, w2) != 0)
				return -EINVAL;
			json_t *pr = json_object_get(x, "priority");
			e->priority = json_is_integer(pr) ? (int)json_integer_value(pr) : (int)k;
		}
	}
	json_t *dm = json_object_get(o, "direct_meters");
	if (dm != NULL && !json_is_null(dm)) {
		int m = named(l, dm, p4_meter_find, "meter", where);
		if (m < 0)
			return -EINVAL;
		t->direct_meter = m;
	}
	return 0;
}

static int load_pipelines(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = get_array(l, root, "pipelines", "top level");
	if (arr == NULL)
		return -EINVAL;
	if (json_array_size(arr) != 2)
		return fail(l, "pipelines: v1model has ingress and egress, this program has %zu pipelines",
			    json_array_size(arr));
	/* profiles and tables of both pipelines, then links */
	uint32_t n_tab = 0, n_prof = 0;
	for (size_t i = 0; i < 2; i++) {
		json_t *pj = json_array_get(arr, i);
		json_t *t = opt_array(l, pj, "tables", "pipeline"), *ap = opt_array(l, pj, "action_profiles", "pipeline");
		json_t *ac = opt_array(l, pj, "action_calls", "pipeline");
		if (l->failed)
			return -EINVAL;
		if (ac != NULL && json_array_size(ac) > 0)
			return fail(l, "pipeline '%s': action_calls are not supported", name_of(pj));
		n_tab += t ? (uint32_t)json_array_size(t) : 0;
		n_prof += ap ? (uint32_t)json_array_size(ap) : 0;
	}
	p->tables = NEW(l, struct p4_table, n_tab);
	p->profiles = NEW(l, struct p4_profile, n_prof);
	if (p->tables == NULL || p->profiles == NULL)
		return oom(l);
	struct pipe_ld pls[2];
	for (int i = 0; i < 2; i++) {
		json_t *pj = json_array_get(arr, (size_t)i);
		const char *pn = get_str(l, pj, "name", "pipeline");
		if (pn == NULL)
			return -EINVAL;
		int which = !strcmp(pn, "ingress") ? 0 : !strcmp(pn, "egress") ? 1 : -1;
		if (which < 0 || p->pipes[which].name != NULL)
			return fail(l, "pipeline '%.60s': v1model's pipelines are 'ingress' and 'egress'", pn);
		struct p4_pipeline *pp = &p->pipes[which];
		pp->name = dupstr(l, pn);
		pls[i].pipe = which;
		pls[i].tables = opt_array(l, pj, "tables", pn);
		pls[i].conds = opt_array(l, pj, "conditionals", pn);
		json_t *ap = opt_array(l, pj, "action_profiles", pn);
		for (size_t k = 0; ap && k < json_array_size(ap); k++) {
			json_t *o = json_array_get(ap, k);
			struct p4_profile *pr = &p->profiles[p->n_profiles];
			char where[160];
			snprintf(where, sizeof(where), "action profile '%.60s'", name_of(o));
			long long id, ms;
			if (get_int(l, o, "id", where, 0, 1 << 30, &id) ||
			    get_int(l, o, "max_size", where, 1, 1 << 20, &ms))
				return -EINVAL;
			pr->name = dupstr(l, name_of(o));
			pr->id = (int)id;
			pr->max_size = (uint32_t)ms;
			json_t *sel = json_object_get(o, "selector");
			if (sel != NULL && !json_is_null(sel)) {
				pr->selector = true;
				const char *al = get_str(l, sel, "algo", where);
				if (al == NULL || algo_find(l, al, &pr->algo, where) != 0)
					return -EINVAL;
				pr->algo_name = dupstr(l, al);
				if (load_field_elems(l, get_array(l, sel, "input", where), &pr->sel_in,
						     &pr->n_sel_in, where) != 0)
					return -EINVAL;
			}
			p->n_profiles++;
		}
		uint32_t nt = pls[i].tables ? (uint32_t)json_array_size(pls[i].tables) : 0;
		pp->tables = NEW(l, int, nt);
		pp->n_conds = pls[i].conds ? (uint32_t)json_array_size(pls[i].conds) : 0;
		pp->conds = NEW(l, struct p4_cond, pp->n_conds);
		if (pp->tables == NULL || pp->conds == NULL)
			return oom(l);
		for (uint32_t k = 0; k < nt; k++) {
			json_t *o = json_array_get(pls[i].tables, k);
			struct p4_table *t = &p->tables[p->n_tables];
			long long id;
			const char *tn = get_str(l, o, "name", "table");
			if (tn == NULL || get_int(l, o, "id", "table", 0, 1 << 30, &id) != 0)
				return -EINVAL;
			t->name = dupstr(l, tn);
			t->id = (int)id;
			t->pipeline = which;
			pp->tables[pp->n_tables++] = (int)p->n_tables;
			p->n_tables++;
		}
		for (uint32_t k = 0; k < pp->n_conds; k++) {
			json_t *o = json_array_get(pls[i].conds, k);
			long long id;
			const char *cn = get_str(l, o, "name", "conditional");
			if (cn == NULL || get_int(l, o, "id", "conditional", 0, 1 << 30, &id) != 0)
				return -EINVAL;
			pp->conds[k].name = dupstr(l, cn);
			pp->conds[k].id = (int)id;
		}
	}
	for (int i = 0; i < 2; i++) {
		struct p4_pipeline *pp = &p->pipes[pls[i].pipe];
		for (uint32_t k = 0; k < pp->n_tables; k++)
			if (load_table(l, json_array_get(pls[i].tables, k), &p->tables[pp->tables[k]]))
				return -EINVAL;
	}
	for (int i = 0; i < 2; i++) {
		struct p4_pipeline *pp = &p->pipes[pls[i].pipe];
		json_t *pj = json_array_get(arr, (size_t)i);
		for (uint32_t k = 0; k < pp->n_tables; k++)
			if (load_table_links(l, &pls[i], json_array_get(pls[i].tables, k),
					     &p->tables[pp->tables[k]]))
				return -EINVAL;
		for (uint32_t k = 0; k < pp->n_conds; k++) {
			json_t *o = json_array_get(pls[i].conds, k);
			struct p4_cond *c = &pp->conds[k];
			char where[160];
			snprintf(where, sizeof(where), "conditional '%.60s'", c->name);
			json_t *ex = get(l, o, "expression", where);
			if (ex == NULL || (c->expr = parse_tv(l, ex, where)) == NULL)
				return -EINVAL;
			if (node_ref(l, &pls[i], json_object_get(o, "true_next"), &c->t, where) ||
			    node_ref(l, &pls[i], json_object_get(o, "false_next"), &c->f, where))
				return -EINVAL;
		}
		if (node_ref(l, &pls[i], json_object_get(pj, "init_table"), &pp->init, pp->name) != 0)
			return -EINVAL;
	}
	return 0;
}

/* Direct counters and meters name their table ("binding"). */
static int load_bindings(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *ca = opt_array(l, root, "counter_arrays", "top level");
	for (uint32_t i = 0; i < p->n_counters; i++) {
		struct p4_counter *c = &p->counters[i];
		if (!c->direct)
			continue;
		char where[160];
		snprintf(where, sizeof(where), "counter '%.60s'", c->name);
		const char *b = get_str(l, json_array_get(ca, i), "binding", where);
		if (b == NULL)
			return -EINVAL;
		if ((c->table = p4_table_find(p, b)) < 0)
			return fail(l, "%s: bound to unknown table '%.60s'", where, b);
		struct p4_table *t = &p->tables[c->table];
		if (t->direct_counter >= 0)
			return fail(l, "%s: table '%s' has two direct counters", where, t->name);
		t->direct_counter = (int)i;
		c->size = t->max_size;
	}
	json_t *ma = opt_array(l, root, "meter_arrays", "top level");
	for (uint32_t i = 0; i < p->n_meters; i++) {
		struct p4_meter *m = &p->meters[i];
		if (!m->direct)
			continue;
		char where[160];
		snprintf(where, sizeof(where), "meter '%.60s'", m->name);
		const char *b = get_str(l, json_array_get(ma, i), "binding", where);
		if (b == NULL)
			return -EINVAL;
		if ((m->table = p4_table_find(p, b)) < 0)
			return fail(l, "%s: bound to unknown table '%.60s'", where, b);
		m->size = p->tables[m->table].max_size;
		if (m->result == NULL)
			return fail(l, "%s: a direct meter without a result field", where);
	}
	for (uint32_t i = 0; i < p->n_tables; i++) {
		struct p4_table *t = &p->tables[i];
		if (t->with_counters && t->direct_counter < 0)
			return fail(l, "table '%s': with_counters but no direct counter is bound to it",
				    t->name);
		if (t->direct_meter >= 0 && p->meters[t->direct_meter].table != (int)i)
			return fail(l, "table '%s': direct meter '%s' is bound to another table", t->name,
				    p->meters[t->direct_meter].name);
	}
	return 0;
}

static int load_checksums(struct ld *l, json_t *root)
{
	struct p4_prog *p = l->p;
	json_t *arr = opt_array(l, root, "checksums", "top level");
	if (l->failed)
		return -EINVAL;
	p->n_checksums = arr ? (uint32_t)json_array_size(arr) : 0;
	p->checksums = NEW(l, struct p4_checksum, p->n_checksums);
	if (p->checksums == NULL)
		return oom(l);
	for (uint32_t i = 0; i < p->n_checksums; i++) {
		json_t *o = json_array_get(arr, i);
		char where[160];
		snprintf(where, sizeof(where), "checksum '%.60s'", name_of(o));
		struct p4_checksum *c = &p->checksums[i];
		long long id;
		const char *calc = get_str(l, o, "calculation", where), *ty = get_str(l, o, "type", where);
		if (calc == NULL || ty == NULL || get_int(l, o, "id", where, 0, 1 << 30, &id) != 0)
			return -EINVAL;
		if (strcmp(ty, "generic") != 0 && strcmp(ty, "ipv4") != 0)
			return fail(l, "%s: unsupported checksum type '%.40s'", where, ty);
		c->name = dupstr(l, name_of(o));
		c->id = (int)id;
		if ((c->calc = calc_find(p, calc)) < 0)
			return fail(l, "%s: unknown calculation '%.60s'", where, calc);
		if ((c->target = field_ref(l, json_object_get(o, "target"), where)) == NULL)
			return -EINVAL;
		if (c->target->kind != P4E_FIELD)
			return fail(l, "%s: the target must be a field", where);
		if (field_bits(p, c->target) > 64)
			return fail(l, "%s: a checksum field of %u bits is not supported (at most 64 bits)", where,
				    field_bits(p, c->target));
		c->update = get_bool_opt(o, "update", true);
		c->verify = get_bool_opt(o, "verify", true);
		json_t *cond = json_object_get(o, "if_cond");
		if (cond != NULL && !json_is_null(cond) && (c->cond = parse_tv(l, cond, where)) == NULL)
			return -EINVAL;
	}
	return 0;
}

/* The standard metadata fields simple_switch uses, after field_aliases. */
static int load_std(struct ld *l, json_t *root)
{
	static const char *names[P4S_COUNT] = {
		"standard_metadata.ingress_port", "standard_metadata.egress_spec",
		"standard_metadata.egress_port", "standard_metadata.instance_type",
		"standard_metadata.packet_length", "intrinsic_metadata.mcast_grp",
		"intrinsic_metadata.egress_rid", "standard_metadata.checksum_error",
		"standard_metadata.parser_error", "intrinsic_metadata.priority",
		"intrinsic_metadata.ingress_global_timestamp",
		"intrinsic_metadata.egress_global_timestamp", "queueing_metadata.enq_timestamp",
		"queueing_metadata.enq_qdepth", "queueing_metadata.deq_timedelta",
		"queueing_metadata.deq_qdepth", "queueing_metadata.qid",
	};
	struct p4_prog *p = l->p;
	json_t *al = opt_array(l, root, "field_aliases", "top level");
	for (int i = 0; i < P4S_COUNT; i++) {
		p->std[i].h = p->std[i].f = -1;
		const char *hn = NULL, *fn = NULL;
		for (size_t k = 0; al && k < json_array_size(al); k++) {
			json_t *x = json_array_get(al, k);
			json_t *n = json_array_get(x, 0), *t = json_array_get(x, 1);
			if (json_is_string(n) && !strcmp(json_string_value(n), names[i]) &&
			    json_is_array(t) && json_array_size(t) == 2) {
				hn = json_string_value(json_array_get(t, 0));
				fn = json_string_value(json_array_get(t, 1));
			}
		}
		char hb[64];
		if (hn == NULL) {
			/* no alias: the name itself, or the field in standard_metadata */
			const char *dot = strchr(names[i], '.');
			snprintf(hb, sizeof(hb), "%.*s", (int)(dot - names[i]), names[i]);
			hn = hb;
			fn = dot + 1;
			if (header_find(p, hn) < 0) {
				hn = "standard_metadata";
			}
		}
		if (hn == NULL || fn == NULL)
			continue;
		int h = header_find(p, hn);
		if (h < 0)
			continue;
		int f = field_find(p, h, fn);
		if (f < 0)
			continue;
		p->std[i].h = h;
		p->std[i].f = f;
	}
	static const int required[] = { P4S_INGRESS_PORT, P4S_EGRESS_SPEC, P4S_EGRESS_PORT,
					P4S_INSTANCE_TYPE, P4S_PACKET_LENGTH };
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
		if (p->std[required[i]].h < 0)
			return fail(l, "the program has no %s: simple_switch needs it", names[required[i]]);
	return 0;
}

/* What the primitives refer to exists and has the right kind. */
static int check_prims(struct ld *l)
{
	struct p4_prog *p = l->p;
	for (uint32_t i = 0; i < p->n_actions; i++) {
		const struct p4_action *a = &p->actions[i];
		for (uint32_t k = 0; k < a->n_prims; k++) {
			const struct p4_prim *pr = &a->prims[k];
			char where[200];
			snprintf(where, sizeof(where), "action '%.60s' (primitive %u, %s)", a->name, k, pr->op);
			switch (pr->kind) {
			case P4P_JUMP:
			case P4P_JUMP_IF_ZERO: {
				const struct p4_expr *off = pr->args[pr->kind == P4P_JUMP ? 0 : 1];
				if (off->kind != P4E_CONST || off->neg || off->val > a->n_prims)
					return fail(l, "%s: a jump needs a constant target within the action",
						    where);
				break;
			}
			case P4P_COUNT:
				if (pr->args[0]->kind != P4E_COUNTER)
					return fail(l, "%s: count needs a counter array", where);
				if (p->counters[pr->args[0]->idx].direct)
					return fail(l, "%s: count on direct counter '%s'", where,
						    p->counters[pr->args[0]->idx].name);
				break;
			case P4P_EXECUTE_METER:
				if (pr->args[0]->kind != P4E_METER || pr->args[2]->kind != P4E_FIELD)
					return fail(l, "%s: execute_meter needs a meter array and a field",
						    where);
				break;
			case P4P_REGISTER_READ:
				if (pr->args[1]->kind != P4E_REGARRAY || pr->args[0]->kind != P4E_FIELD)
					return fail(l, "%s: register_read needs a field and a register", where);
				break;
			case P4P_REGISTER_WRITE:
				if (pr->args[0]->kind != P4E_REGARRAY)
					return fail(l, "%s: register_write needs a register", where);
				break;
			case P4P_HASH:
				if (pr->args[0]->kind != P4E_FIELD || pr->args[2]->kind != P4E_CALC)
					return fail(l, "%s: hash needs a field and a calculation", where);
				if (p->calcs[pr->args[2]->idx].algo == P4A_ROUND_ROBIN)
					return fail(l, "%s: the round_robin hash is not supported", where);
				break;
			case P4P_RANDOM:
				if (pr->args[0]->kind != P4E_FIELD)
					return fail(l, "%s: random needs a field", where);
				break;
			case P4P_CLONE_I2E:
			case P4P_CLONE_E2E:
			case P4P_RESUBMIT:
			case P4P_RECIRCULATE:
			case P4P_DIGEST: {
				const struct p4_expr *fl = pr->args[pr->n_args - 1];
				if (fl->kind != P4E_CONST)
					return fail(l, "%s: the field list must be a constant id", where);
				if (pr->kind == P4P_DIGEST) {
					bool ok = false;
					for (uint32_t m = 0; m < p->n_llists; m++)
						ok |= (p4_u128)p->llists[m].id == fl->val;
					if (!ok)
						return fail(l, "%s: unknown learn list id %u", where,
							    (unsigned)fl->val);
				} else if (fl->val != 0) {
					bool ok = false;
					for (uint32_t m = 0; m < p->n_flists; m++)
						ok |= (p4_u128)p->flists[m].id == fl->val;
					if (!ok)
						return fail(l, "%s: unknown field list id %u", where,
							    (unsigned)fl->val);
				}
				break;
			}
			case P4P_LOG_MSG:
				if (pr->args[0]->kind != P4E_STRING || pr->args[1]->kind != P4E_PARAMS)
					return fail(l, "%s: log_msg needs a string and a vector", where);
				break;
			case P4P_ADD_HEADER:
			case P4P_REMOVE_HEADER:
				if (pr->args[0]->kind != P4E_HEADER &&
				    !(pr->args[0]->kind == P4E_OP && pr->args[0]->op == P4OP_DEREF_STACK))
					return fail(l, "%s: needs a header", where);
				break;
			case P4P_MARK_TO_DROP:
				if (pr->args[0]->kind != P4E_HEADER)
					return fail(l, "%s: needs the standard metadata header", where);
				break;
			case P4P_PUSH:
			case P4P_POP:
				if (pr->args[0]->kind != P4E_STACK)
					return fail(l, "%s: needs a header stack", where);
				break;
			case P4P_ASSIGN_UNION:
			case P4P_ASSIGN_UNION_STACK:
			case P4P_ASSIGN_HEADER_STACK:
				break;
			default:
				break;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                               */

int p4_load(const char *json, size_t len, struct p4_prog **out, char *err, size_t errlen)
{
	*out = NULL;
	if (errlen > 0)
		err[0] = '\0';
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (root == NULL) {
		snprintf(err, errlen, "not valid JSON: %s (line %d, column %d)", je.text, je.line,
			 je.column);
		return -EINVAL;
	}
	struct p4_arena *a = calloc(1, sizeof(*a));
	struct p4_prog *p = a ? p4_alloc(a, sizeof(*p)) : NULL;
	if (p == NULL) {
		free(a);
		json_decref(root);
		snprintf(err, errlen, "out of memory loading the P4 program");
		return -ENOMEM;
	}
	p->arena = a;
	struct ld l = { .p = p, .a = a, .err = err, .errlen = errlen };
	int rc = -EINVAL;
	if (!json_is_object(root)) {
		fail(&l, "top level: expected a JSON object (BMv2 JSON as p4c-bm2-ss writes it)");
		goto out;
	}
	json_t *meta = json_object_get(root, "__meta__");
	json_t *ver = json_is_object(meta) ? json_object_get(meta, "version") : NULL;
	if (!json_is_array(ver) || json_array_size(ver) < 2 || !json_is_integer(json_array_get(ver, 0)) ||
	    !json_is_integer(json_array_get(ver, 1))) {
		fail(&l, "__meta__.version is missing: not BMv2 JSON of format 2.x (p4c-bm2-ss writes it)");
		goto out;
	}
	p->ver_major = (int)json_integer_value(json_array_get(ver, 0));
	p->ver_minor = (int)json_integer_value(json_array_get(ver, 1));
	if (p->ver_major != 2) {
		fail(&l, "unknown BMv2 JSON format version %d.%d: innet reads 2.x", p->ver_major,
		     p->ver_minor);
		goto out;
	}
	json_t *pn = json_object_get(root, "program");
	p->name = dupstr(&l, json_is_string(pn) ? json_string_value(pn) : "");
	if (load_htypes(&l, root) || load_headers(&l, root) || load_stacks(&l, root) ||
	    load_unions(&l, root) || load_errors(&l, root) || load_lists(&l, root) ||
	    load_calcs(&l, root) || load_state(&l, root) || load_actions(&l, root) ||
	    load_vsets(&l, root) || load_parser(&l, root) || load_pipelines(&l, root) ||
	    load_bindings(&l, root) || load_checksums(&l, root) || load_std(&l, root) ||
	    check_prims(&l))
		goto out;
	rc = 0;
out:
	json_decref(root);
	if (rc != 0 || l.failed) {
		if (l.failed)
			rc = l.failed;
		if (err[0] == '\0')
			snprintf(err, errlen, "cannot load the P4 program");
		p4_prog_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

int p4_load_file(const char *path, struct p4_prog **out, char *err, size_t errlen)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	while (buf != NULL) {
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (len < cap)
			break;
		if (cap >= (256u << 20)) {
			free(buf);
			fclose(f);
			snprintf(err, errlen, "%s: larger than 256 MiB", path);
			return -EFBIG;
		}
		char *nb = realloc(buf, cap * 2);
		if (nb == NULL) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	bool rerr = ferror(f);
	fclose(f);
	if (buf == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	if (rerr) {
		free(buf);
		snprintf(err, errlen, "%s: read error", path);
		return -EIO;
	}
	char e2[512] = "";
	int rc = p4_load(buf, len, out, e2, sizeof(e2));
	free(buf);
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, e2);
	return rc;
}
