/*
 * test_p4_load.c — the P4 loader (src/p4/p4_load.c) on real p4c output:
 * tests/p4/cli.json, what p4c-bm2-ss compiles tests/p4/cli.p4 to, loads,
 * lays out and generates; then, table-driven, the same JSON broken one way
 * at a time (malformed, an unknown format version, an unsupported construct,
 * a field wider than supported, dangling names) is refused with a message
 * that names what and where. Every other JSON file in tests/p4 loads too.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit/testutil.h"
#include "p4/p4.h"
#include "p4/p4_ir.h"

static char err[4096];

static void fixture_path(const char *name, char *out, size_t len)
{
	const char *dir = getenv("INNET_SRCDIR");
	const char *self = __FILE__, *tail = strstr(self, "tests/unit/test_p4_load.c");

	if (dir != NULL)
		snprintf(out, len, "%s/tests/p4/%s", dir, name);
	else
		snprintf(out, len, "%.*stests/p4/%s", (int)(tail - self), self, name);
}

static json_t *load_fixture(void)
{
	char path[4096];
	json_error_t je;
	fixture_path("cli.json", path, sizeof(path));
	json_t *j = json_load_file(path, 0, &je);
	if (j == NULL)
		fail_msg("%s: %s", path, je.text);
	return j;
}

/* Load text; 0 or the error, with the message in err. */
static int load_text(const char *text, size_t len)
{
	struct p4_prog *p = NULL;
	err[0] = '\0';
	int rc = p4_load(text, len, &p, err, sizeof(err));
	if (rc == 0) {
		struct p4_layout lay;
		rc = p4_layout(p, &lay, err, sizeof(err));
		char *src = NULL;
		if (rc == 0)
			rc = p4_gen(p, &lay, "t", &src, err, sizeof(err));
		free(src);
	} else {
		assert_null(p);
	}
	p4_prog_free(p);
	return rc;
}

static int load_json(json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	assert_non_null(text);
	int rc = load_text(text, strlen(text));
	free(text);
	return rc;
}

/* ---- the program as p4c wrote it ---------------------------------------- */

static void test_fixture_loads(void **state)
{
	json_t *j = load_fixture();
	char *text = json_dumps(j, JSON_COMPACT);
	struct p4_prog *p = NULL;
	int rc = p4_load(text, strlen(text), &p, err, sizeof(err));
	if (rc != 0)
		fail_msg("cli.json: %s", err);
	/* the objects cli.p4 declares, by the names the CLI uses */
	int kinds = 0;
	for (uint32_t t = 0; t < p->n_tables; t++)
		for (uint32_t k = 0; k < p->tables[t].n_keys; k++)
			kinds |= 1 << p->tables[t].keys[k].match;
	assert_true(kinds & (1 << P4M_EXACT));
	assert_true(kinds & (1 << P4M_LPM));
	assert_true(kinds & (1 << P4M_TERNARY));
	assert_true(kinds & (1 << P4M_RANGE));
	/* (p4c-bm2-ss writes an optional key as a ternary one) */
	assert_int_equal(p->n_registers, 4);
	assert_int_equal(p->registers[3].width, 128);
	assert_true(p->n_profiles >= 2);
	assert_int_equal(p->n_vsets, 1);
	bool selector = false;
	for (uint32_t i = 0; i < p->n_profiles; i++)
		selector |= p->profiles[i].selector;
	assert_true(selector);
	bool const_entries = false;
	for (uint32_t t = 0; t < p->n_tables; t++)
		const_entries |= p->tables[t].const_entries && p->tables[t].n_entries == 2;
	assert_true(const_entries);
	struct p4_layout lay;
	assert_int_equal(p4_layout(p, &lay, err, sizeof(err)), 0);
	char *src = NULL;
	rc = p4_gen(p, &lay, "cli", &src, err, sizeof(err));
	if (rc != 0)
		fail_msg("cli.json: generate: %s", err);
	assert_non_null(strstr(src, "#include \"p4/p4rt_pipe.h\""));
	free(src);
	p4_prog_free(p);
	free(text);
	json_decref(j);
}

/* Every committed p4c output in tests/p4 loads. */
static void test_all_fixtures_load(void **state)
{
	char dir[4096];
	fixture_path("", dir, sizeof(dir));
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s%s", dir, e->d_name);
		struct p4_prog *p = NULL;
		if (p4_load_file(path, &p, err, sizeof(err)) != 0)
			fail_msg("%s: %s", path, err);
		p4_prog_free(p);
		n++;
	}
	closedir(d);
	assert_true(n >= 1);
}

/* ---- one thing broken at a time ------------------------------------------ */

/* The first element of array `key` of obj whose `member` is a non-empty array. */
static json_t *first_with(json_t *arr, const char *member)
{
	size_t i;
	json_t *x;
	json_array_foreach(arr, i, x) {
		json_t *m = json_object_get(x, member);
		if (json_is_array(m) && json_array_size(m) > 0)
			return x;
	}
	fail_msg("no element with a non-empty '%s'", member);
	return NULL;
}

static json_t *ingress_table_with_key(json_t *j)
{
	json_t *pipes = json_object_get(j, "pipelines");
	return first_with(json_object_get(json_array_get(pipes, 0), "tables"), "key");
}

static void m_version3(json_t *j)
{
	json_object_set_new(json_object_get(j, "__meta__"), "version", json_pack("[ii]", 3, 0));
}

static void m_version1(json_t *j)
{
	json_object_set_new(json_object_get(j, "__meta__"), "version", json_pack("[ii]", 1, 5));
}

static void m_no_meta(json_t *j)
{
	json_object_del(j, "__meta__");
}

static void m_wide_field(json_t *j)
{
	/* the first header type with fields: its first field 4096 bits wide */
	json_t *ht = first_with(json_object_get(j, "header_types"), "fields");
	json_array_set_new(json_array_get(json_object_get(ht, "fields"), 0), 1, json_integer(4096));
}

static void m_primitive(json_t *j)
{
	json_t *a = first_with(json_object_get(j, "actions"), "primitives");
	json_object_set_new(json_array_get(json_object_get(a, "primitives"), 0), "op",
			    json_string("frobnicate"));
}

static void m_match_kind(json_t *j)
{
	json_t *t = ingress_table_with_key(j);
	json_object_set_new(json_array_get(json_object_get(t, "key"), 0), "match_type",
			    json_string("magic"));
}

static void m_extern(json_t *j)
{
	json_object_set_new(j, "extern_instances",
			    json_pack("[{s:s, s:i, s:s, s:[]}]", "name", "x", "id", 0, "type",
				      "Frobnicator", "attribute_values"));
}

static void m_no_pipelines(json_t *j)
{
	json_object_del(j, "pipelines");
}

static void m_next_state(json_t *j)
{
	json_t *ps = json_object_get(json_array_get(json_object_get(j, "parsers"), 0), "parse_states");
	json_t *st = first_with(ps, "transitions");
	json_object_set_new(json_array_get(json_object_get(st, "transitions"), 0), "next_state",
			    json_string("nowhere"));
}

static void m_algo(json_t *j)
{
	json_t *c = json_object_get(j, "calculations");
	json_array_append_new(c, json_pack("{s:s, s:i, s:s, s:[]}", "name", "c_sha", "id", 99,
					   "algo", "sha256", "input"));
}

static void m_union_stack(json_t *j)
{
	json_object_set_new(j, "header_union_stacks",
			    json_pack("[{s:s, s:i, s:s, s:i, s:[]}]", "name", "us", "id", 0,
				      "union_type", "u_t", "size", 2, "header_union_ids"));
}

static void m_table_action(json_t *j)
{
	json_t *t = ingress_table_with_key(j);
	json_array_append_new(json_object_get(t, "action_ids"), json_integer(9999));
}

static void m_not_a_number(json_t *j)
{
	json_t *t = ingress_table_with_key(j);
	json_object_set_new(t, "max_size", json_string("many"));
}

static void m_pipeline_count(json_t *j)
{
	json_array_remove(json_object_get(j, "pipelines"), 1);
}

static void m_header_type(json_t *j)
{
	json_t *h = json_array_get(json_object_get(j, "headers"), 1);
	json_object_set_new(h, "header_type", json_string("no_such_type"));
}

static void m_varbit_metadata(json_t *j)
{
	/* header 2 (eth, of ethernet_t) as metadata, its type with a varbit field */
	json_t *h = json_array_get(json_object_get(j, "headers"), 2);
	json_object_set_new(h, "metadata", json_true());
	json_t *types = json_object_get(j, "header_types"), *t;
	size_t i;
	json_array_foreach(types, i, t) {
		if (strcmp(json_string_value(json_object_get(t, "name")), "ethernet_t") != 0)
			continue;
		json_array_append_new(json_object_get(t, "fields"), json_pack("[s, s]", "vb", "*"));
		json_object_set_new(t, "max_length", json_integer(32));
	}
}

static const struct bad_case {
	const char *what;
	void (*mutate)(json_t *j);
	const char *expect;
} bad_cases[] = {
	{ "version 3", m_version3, "unknown BMv2 JSON format version 3.0: innet reads 2.x" },
	{ "version 1", m_version1, "unknown BMv2 JSON format version 1.5" },
	{ "no __meta__", m_no_meta, "__meta__.version is missing" },
	{ "a field too wide", m_wide_field, "of 4096 bits is not supported (at most 2048 bits)" },
	{ "an unknown primitive", m_primitive, "(primitive 0): unsupported primitive 'frobnicate'" },
	{ "an unknown match kind", m_match_kind, "unsupported match kind 'magic'" },
	{ "an extern instance", m_extern, "extern instance 'x' (type Frobnicator)" },
	{ "no pipelines", m_no_pipelines, "missing \"pipelines\"" },
	{ "a dangling next state", m_next_state, "unknown next state 'nowhere'" },
	{ "an unknown hash", m_algo, "calculation 'c_sha': unsupported hash algorithm 'sha256'" },
	{ "a header union stack", m_union_stack, "header union stacks are not supported" },
	{ "a varbit field in metadata", m_varbit_metadata,
	  "a variable-length (varbit) field in metadata (a header the program declares as a local or metadata, not parsed) is not supported" },
	{ "a dangling action id", m_table_action, "table '" },
	{ "a string for a number", m_not_a_number, "max_size" },
	{ "one pipeline", m_pipeline_count, "v1model has ingress and egress" },
	{ "a dangling header type", m_header_type, "no_such_type" },
};

static void test_refusals(void **state)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];
		json_t *j = load_fixture();
		b->mutate(j);
		int rc = load_json(j);
		json_decref(j);
		if (rc == 0)
			fail_msg("%s: loaded, expected \"%s\"", b->what, b->expect);
		if (rc != -EINVAL)
			fail_msg("%s: %d, expected -EINVAL (%s)", b->what, rc, err);
		if (strstr(err, b->expect) == NULL)
			fail_msg("%s: got\n%s\nexpected \"%s\"", b->what, err, b->expect);
	}
}

/* P4_14's add_to_field and subtract_from_field (p4c-bm2-ss --std p4-14,
 * BMv2's own simple_router.json): an assign of dst + v, dst - v. */
static void test_p4_14_arith(void **state)
{
	const char *ops[] = { "add_to_field", "subtract_from_field" };
	for (int i = 0; i < 2; i++) {
		json_t *j = load_fixture();
		json_t *a = first_with(json_object_get(j, "actions"), "primitives");
		json_object_set_new(a, "primitives",
				    json_pack("[{s:s, s:[{s:s, s:[ss]}, {s:s, s:s}]}]", "op", ops[i],
					      "parameters", "type", "field", "value", "ipv4", "ttl",
					      "type", "hexstr", "value", "0x01"));
		int rc = load_json(j);
		json_decref(j);
		if (rc != 0)
			fail_msg("%s: %s", ops[i], err);
	}
	/* the wrong number of parameters is refused, named */
	json_t *j = load_fixture();
	json_t *a = first_with(json_object_get(j, "actions"), "primitives");
	json_object_set_new(a, "primitives",
			    json_pack("[{s:s, s:[{s:s, s:[ss]}]}]", "op", "add_to_field", "parameters", "type",
				      "field", "value", "ipv4", "ttl"));
	assert_int_equal(load_json(j), -EINVAL);
	assert_non_null(strstr(err, "primitive 'add_to_field' takes 2 parameters, not 1"));
	json_decref(j);
}

static void test_malformed(void **state)
{
	json_t *j = load_fixture();
	char *text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	size_t len = strlen(text);
	/* cut anywhere: never loads, always says why */
	for (size_t cut = 0; cut < len; cut += len / 97 + 1) {
		int rc = load_text(text, cut);
		assert_int_not_equal(rc, 0);
		assert_true(err[0] != '\0');
	}
	assert_int_equal(load_text(text, len / 2), -EINVAL);
	assert_non_null(strstr(err, "not valid JSON"));
	assert_int_equal(load_text("[1, 2]", 6), -EINVAL);
	assert_non_null(strstr(err, "expected a JSON object"));
	assert_int_equal(load_text("", 0), -EINVAL);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_loads),
		cmocka_unit_test(test_all_fixtures_load),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_p4_14_arith),
		cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
