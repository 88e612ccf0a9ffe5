/*
 * test_state.c — unit tests for a program's declared state and settings
 * (src/engine/decl.c, cp.c) and for the checks innet_switch_create makes
 * (src/engine/switch.c): declarations out of order or out of bounds, timers
 * on a PISA program, settings of the wrong type / out of range / unknown,
 * the control-plane accessors for registers, blobs, groups and tables, and
 * every way a switch configuration is refused, with the message the user
 * sees.
 *
 * Every test builds its own switch from small programs defined here. Ports
 * use 127.201.P.x, where P is derived from the process id, and UDP ports
 * 41000 and up, so that tests running at the same time do not collide.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/switch.h"

#define TEST_NET  201u
#define UDP_BASE  41000u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static char err[512];

#define assert_contains(hay, needle)                                                       \
	do {                                                                               \
		if (strstr((hay), (needle)) == NULL)                                       \
			fail_msg("expected \"%s\" in \"%s\"", (needle), (hay));            \
	} while (0)

/* A configuration with n_ports ports (127.201.P.1, .2, ...) and one instance
 * "p" of prog on UDP port udp with settings args (may be NULL). */
static struct innet_switch_conf one_prog_conf(uint32_t n_ports, const struct innet_program *prog,
					      uint16_t udp, const char *args)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "state-test");
	c.n_workers = 1;
	c.seed = 1;
	c.n_ports = n_ports;
	for (uint32_t i = 0; i < n_ports; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		c.ports[i].ip = test_ip(1 + i);
	}
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "p");
	c.progs[0].program = prog;
	c.progs[0].udp[0] = udp;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = (char *)args;
	return c;
}

/* Create must fail with errno e and a message containing msg. */
static void expect_create_error(const struct innet_switch_conf *c, int e, const char *msg)
{
	err[0] = '\0';
	errno = 0;
	struct innet_switch *sw = innet_switch_create(c, err, sizeof(err));
	if (sw != NULL) {
		innet_switch_destroy(sw);
		fail_msg("switch created; expected an error containing \"%s\"", msg);
	}
	assert_int_equal(errno, e);
	assert_contains(err, msg);
}

static struct innet_switch *create_ok(const struct innet_switch_conf *c)
{
	err[0] = '\0';
	struct innet_switch *sw = innet_switch_create(c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("innet_switch_create: %s (errno %d)", err, errno);
	return sw;
}

static enum innet_action drop_all(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
}

static void noop_timer(struct innet_ctx *ctx, uint32_t timer, uint64_t arg)
{
}

/* ------------------------------------------------------------------------ */
/* Declarations                                                              */

static int setup_out_of_order(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_reg(d, 1, "second", 8, 4);
	return rc ? rc : innet_decl_reg(d, 0, "first", 8, 4);
}

static int setup_reg_zero_width(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_reg(d, 0, "zw", 0, 4);
}

static int setup_reg_zero_count(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_reg(d, 0, "zc", 8, 0);
}

static int setup_reg_too_wide(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_reg(d, 0, "wide", INNET_PKT_MAX + 1, 1);
}

static int setup_too_many_regs(struct innet_decl *d, struct innet_args *a)
{
	for (unsigned i = 0; i <= INNET_MAX_REGS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%u", i);
		int rc = innet_decl_reg(d, i, name, 1, 1);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int setup_max_regs(struct innet_decl *d, struct innet_args *a)
{
	for (unsigned i = 0; i < INNET_MAX_REGS; i++) {
		char name[16];
		snprintf(name, sizeof(name), "r%u", i);
		int rc = innet_decl_reg(d, i, name, 1 + i % 8, 1 + i);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int setup_timers_4(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_timers(d, 4);
}

static int setup_timers_twice(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_timers(d, 4);
	return rc ? rc : innet_decl_timers(d, 2);
}

static int setup_too_many_timers(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_timers(d, INNET_MAX_TIMERS + 1);
}

static int setup_too_many_groups(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_groups(d, INNET_MAX_GROUPS + 1);
}

static int setup_groups_twice(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_groups(d, 2);
	return rc ? rc : innet_decl_groups(d, 3);
}

static int setup_table_out_of_order(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_table(d, 1, "t1", 4, 4, 16);
}

static int setup_table_bad_key(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_table(d, 0, "badkey", 0, 4, 16);
}

static int setup_too_many_tables(struct innet_decl *d, struct innet_args *a)
{
	for (unsigned i = 0; i <= INNET_MAX_TABLES; i++) {
		int rc = innet_decl_table(d, i, "t", 4, 4, 4);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int setup_custom_error(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_error(d, "the answer is %d", 42);
}

static int setup_silent_failure(struct innet_decl *d, struct innet_args *a)
{
	return -ENOMEM;
}

static int setup_error_ignored(struct innet_decl *d, struct innet_args *a)
{
	/* A setup that records an error but returns 0 still fails. */
	innet_decl_error(d, "recorded but ignored");
	return 0;
}

/* innet_decl_datapath: a data path of the instance's own */
static int setup_dp_no_handler(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_datapath(d, NULL, NULL, NULL);
}

static int setup_dp_twice(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_datapath(d, drop_all, NULL, NULL);
	return rc != 0 ? rc : innet_decl_datapath(d, drop_all, NULL, NULL);
}

static int setup_dp_no_object(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_datapath(d, drop_all, NULL, "/nonexistent/innet-test_dp.bpf.o");
}

static int setup_dp_dir(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_datapath(d, drop_all, NULL, "/");
}

#define TRIO_PROG(var, setup_fn, timer_fn)                                                 \
	static const struct innet_program var = { .name = #var, .model = INNET_MODEL_TRIO,  \
						  .setup = setup_fn, .handle = drop_all,     \
						  .on_timer = timer_fn }
#define PISA_PROG(var, setup_fn)                                                            \
	static const struct innet_program var = { .name = #var, .model = INNET_MODEL_PISA,  \
						  .setup = setup_fn, .handle = drop_all }

PISA_PROG(prog_out_of_order, setup_out_of_order);
PISA_PROG(prog_zero_width, setup_reg_zero_width);
PISA_PROG(prog_zero_count, setup_reg_zero_count);
PISA_PROG(prog_too_wide, setup_reg_too_wide);
PISA_PROG(prog_too_many_regs, setup_too_many_regs);
PISA_PROG(prog_max_regs, setup_max_regs);
PISA_PROG(prog_pisa_timers, setup_timers_4);
TRIO_PROG(prog_trio_timers, setup_timers_4, noop_timer);
TRIO_PROG(prog_trio_timers_no_cb, setup_timers_4, NULL);
TRIO_PROG(prog_timers_twice, setup_timers_twice, noop_timer);
TRIO_PROG(prog_too_many_timers, setup_too_many_timers, noop_timer);
PISA_PROG(prog_too_many_groups, setup_too_many_groups);
PISA_PROG(prog_groups_twice, setup_groups_twice);
PISA_PROG(prog_table_out_of_order, setup_table_out_of_order);
PISA_PROG(prog_table_bad_key, setup_table_bad_key);
PISA_PROG(prog_too_many_tables, setup_too_many_tables);
PISA_PROG(prog_custom_error, setup_custom_error);
PISA_PROG(prog_silent_failure, setup_silent_failure);
PISA_PROG(prog_error_ignored, setup_error_ignored);
PISA_PROG(prog_dp_no_handler, setup_dp_no_handler);
PISA_PROG(prog_dp_twice, setup_dp_twice);
PISA_PROG(prog_dp_no_object, setup_dp_no_object);
PISA_PROG(prog_dp_dir, setup_dp_dir);

static void test_declarations_rejected(void **state)
{
	static const struct {
		const struct innet_program *prog;
		const char *msg;
	} cases[] = {
		{ &prog_out_of_order, "program 'p': register 'second' declared as id 1, expected 0" },
		{ &prog_zero_width, "register 'zw': width 0 x count 4 is invalid" },
		{ &prog_zero_count, "register 'zc': width 8 x count 0 is invalid" },
		{ &prog_too_wide, "register 'wide': width 9217 x count 1 is invalid" }, /* INNET_PKT_MAX + 1 */
		{ &prog_too_many_regs, "too many register arrays (max 32)" },
		{ &prog_pisa_timers, "timers need the Trio model" },
		{ &prog_trio_timers_no_cb, "timers declared but the program has no on_timer" },
		{ &prog_timers_twice, "timers declared twice" },
		{ &prog_too_many_timers, "timers, at most" },
		{ &prog_too_many_groups, "1025 multicast groups, at most 1024" },
		{ &prog_groups_twice, "multicast groups declared twice" },
		{ &prog_table_out_of_order, "table 't1' declared as id 1, expected 0" },
		{ &prog_table_bad_key, "table 'badkey': key 0 B" },
		{ &prog_too_many_tables, "too many tables (max 8)" },
		{ &prog_custom_error, "program 'p': the answer is 42" },
		{ &prog_silent_failure, "program 'p': setup failed: Cannot allocate memory" },
		{ &prog_error_ignored, "program 'p': recorded but ignored" },
		{ &prog_dp_no_handler, "program 'p': a data path needs a handler" },
		{ &prog_dp_twice, "program 'p': data path declared twice" },
		{ &prog_dp_no_object, "program 'p': eBPF object /nonexistent/innet-test_dp.bpf.o: "
				      "No such file or directory" },
		{ &prog_dp_dir, "program 'p': eBPF object /: cannot read it" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct innet_switch_conf c = one_prog_conf(1, cases[i].prog, UDP_BASE, NULL);
		err[0] = '\0';
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL) {
			innet_switch_destroy(sw);
			fail_msg("case %zu (%s): created", i, cases[i].prog->name);
		}
		if (strstr(err, cases[i].msg) == NULL)
			fail_msg("case %zu (%s): expected \"%s\" in \"%s\"", i, cases[i].prog->name,
				 cases[i].msg, err);
		assert_true(errno == EINVAL || errno == ENOMEM);
	}
}

static void test_declarations_accepted(void **state)
{
	struct innet_switch_conf c = one_prog_conf(1, &prog_max_regs, UDP_BASE + 1, NULL);
	struct innet_switch *sw = create_ok(&c);
	struct innet_cp *cp = innet_switch_prog(sw, "p");
	assert_non_null(cp);
	for (unsigned i = 0; i < INNET_MAX_REGS; i++) {
		const struct innet_reg *r = innet_cp_reg(cp, i);
		assert_non_null(r);
		char name[16];
		snprintf(name, sizeof(name), "r%u", i);
		assert_string_equal(r->name, name);
		assert_int_equal(r->width, 1 + i % 8);
		assert_int_equal(r->count, 1 + i);
		assert_int_equal((uintptr_t)r->mem % 64, 0); /* 64-byte aligned */
		assert_int_equal(innet_cp_reg_find(cp, name), (int)i);
	}
	assert_null(innet_cp_reg(cp, INNET_MAX_REGS));
	innet_switch_destroy(sw);

	c = one_prog_conf(1, &prog_trio_timers, UDP_BASE + 1, NULL);
	sw = create_ok(&c);
	assert_int_equal(innet_cp_n_timers(innet_switch_prog(sw, "p")), 4);
	assert_int_equal(innet_cp_n_groups(innet_switch_prog(sw, "p")), 0);
	innet_switch_destroy(sw);
}

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */

struct settings_seen {
	uint64_t n;
	bool flag;
	char name[32];
	uint64_t list[4];
	uint32_t n_list;
	bool have_obj;
	int obj_is_object;
	int init_calls;
};

static struct settings_seen seen;

static int settings_setup(struct innet_decl *d, struct innet_args *a)
{
	struct settings_seen *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	innet_decl_priv(d, s);
	const char *name;
	int rc;
	if ((rc = innet_args_u64(a, "n", 5, 1, 100, &s->n)) != 0)
		return rc;
	if ((rc = innet_args_bool(a, "flag", false, &s->flag)) != 0)
		return rc;
	if ((rc = innet_args_str(a, "name", "default", &name)) != 0)
		return rc;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if ((rc = innet_args_u64_array(a, "list", s->list, 4, &s->n_list)) != 0)
		return rc;
	s->have_obj = innet_args_json(a, "obj") != NULL;
	return 0;
}

static int settings_init(struct innet_cp *cp, void *priv)
{
	seen = *(struct settings_seen *)priv;
	seen.init_calls++;
	return 0;
}

static const struct innet_program prog_settings = {
	.name = "settings", .model = INNET_MODEL_PISA, .setup = settings_setup,
	.init = settings_init, .handle = drop_all,
};

static void test_settings_rejected(void **state)
{
	static const struct {
		const char *args;
		const char *msg;
	} cases[] = {
		{ "{\"n\": \"seven\"}", "program 'p': setting 'n' must be a non-negative integer" },
		{ "{\"n\": -1}", "setting 'n' must be a non-negative integer" },
		{ "{\"n\": 1.5}", "setting 'n' must be a non-negative integer" },
		{ "{\"n\": 0}", "setting 'n' = 0 is out of range [1, 100]" },
		{ "{\"n\": 101}", "setting 'n' = 101 is out of range [1, 100]" },
		{ "{\"flag\": 1}", "setting 'flag' must be true or false" },
		{ "{\"name\": 3}", "setting 'name' must be a string" },
		{ "{\"list\": 3}", "setting 'list' must be an array" },
		{ "{\"list\": [1, 2, 3, 4, 5]}", "setting 'list' has 5 entries, at most 4 allowed" },
		{ "{\"list\": [1, \"x\"]}", "setting 'list'[1] must be a non-negative integer" },
		{ "{\"list\": [1, -2]}", "setting 'list'[1] must be a non-negative integer" },
		{ "{\"bogus\": 1}", "program 'p' (settings): unknown setting 'bogus'" },
		{ "{\"n\": 3, \"nn\": 3}", "unknown setting 'nn'" },
		{ "{\"n\": 3", "program 'p': settings are not valid JSON" },
		{ "[1, 2]", "program 'p': settings must be a JSON object" },
		{ "\"n\"", "program 'p': settings" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct innet_switch_conf c = one_prog_conf(1, &prog_settings, UDP_BASE + 2, cases[i].args);
		memset(&seen, 0, sizeof(seen));
		err[0] = '\0';
		errno = 0;
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL) {
			innet_switch_destroy(sw);
			fail_msg("case %zu (%s): accepted", i, cases[i].args);
		}
		if (strstr(err, cases[i].msg) == NULL)
			fail_msg("case %zu (%s): expected \"%s\" in \"%s\"", i, cases[i].args,
				 cases[i].msg, err);
		assert_int_equal(errno, EINVAL);
		assert_int_equal(seen.init_calls, 0); /* init never runs after a failed setup */
	}
}

static void test_settings_accepted(void **state)
{
	/* Defaults: no settings at all, empty text, an empty object. */
	const char *empty[] = { NULL, "", "{}" };
	for (size_t i = 0; i < 3; i++) {
		memset(&seen, 0, sizeof(seen));
		struct innet_switch_conf c = one_prog_conf(1, &prog_settings, UDP_BASE + 3, empty[i]);
		struct innet_switch *sw = create_ok(&c);
		assert_int_equal(seen.init_calls, 1);
		assert_int_equal(seen.n, 5);
		assert_false(seen.flag);
		assert_string_equal(seen.name, "default");
		assert_int_equal(seen.n_list, 0);
		assert_false(seen.have_obj);
		innet_switch_destroy(sw);
	}
	memset(&seen, 0, sizeof(seen));
	struct innet_switch_conf c = one_prog_conf(
		1, &prog_settings, UDP_BASE + 3,
		"{\"n\": 100, \"flag\": true, \"name\": \"abc\", \"list\": [4], \"obj\": {\"x\": [1]}}");
	struct innet_switch *sw = create_ok(&c);
	assert_int_equal(seen.init_calls, 1);
	assert_int_equal(seen.n, 100);
	assert_true(seen.flag);
	assert_string_equal(seen.name, "abc");
	assert_int_equal(seen.n_list, 1);
	assert_int_equal(seen.list[0], 4);
	assert_true(seen.have_obj);
	innet_switch_destroy(sw);

	memset(&seen, 0, sizeof(seen));
	c = one_prog_conf(1, &prog_settings, UDP_BASE + 3, "{\"n\": 1, \"list\": [0, 7, 9223372036854775807]}");
	sw = create_ok(&c);
	assert_int_equal(seen.n, 1);
	assert_int_equal(seen.n_list, 3);
	assert_int_equal(seen.list[0], 0);
	assert_int_equal(seen.list[1], 7);
	assert_int_equal(seen.list[2], 9223372036854775807ull);
	innet_switch_destroy(sw);
}

/* ------------------------------------------------------------------------ */
/* Control plane: registers, groups, tables                                  */

enum { R_W8, R_W4, R_W2, R_W1, R_BLOB3, R_BLOB100 };
enum { T_FLOWS };

static int cp_setup(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_reg(d, R_W8, "w8", 8, 4);
	if (rc == 0)
		rc = innet_decl_reg(d, R_W4, "w4", 4, 4);
	if (rc == 0)
		rc = innet_decl_reg(d, R_W2, "w2", 2, 4);
	if (rc == 0)
		rc = innet_decl_reg(d, R_W1, "w1", 1, 4);
	if (rc == 0)
		rc = innet_decl_reg(d, R_BLOB3, "blob3", 3, 5);
	if (rc == 0)
		rc = innet_decl_reg(d, R_BLOB100, "blob100", 100, 2);
	if (rc == 0)
		rc = innet_decl_groups(d, 4);
	if (rc == 0)
		rc = innet_decl_table(d, T_FLOWS, "flows", 6, 4, 8);
	return rc;
}

static const struct innet_program prog_cp = {
	.name = "cp", .model = INNET_MODEL_TRIO, .setup = cp_setup, .handle = drop_all,
};

static void test_cp_registers(void **state)
{
	struct innet_switch_conf c = one_prog_conf(2, &prog_cp, UDP_BASE + 4, NULL);
	struct innet_switch *sw = create_ok(&c);
	struct innet_cp *cp = innet_switch_prog(sw, "p");
	assert_non_null(cp);
	assert_ptr_equal(innet_switch_prog_at(sw, 0), cp);
	assert_null(innet_switch_prog_at(sw, 1));
	assert_null(innet_switch_prog(sw, "nope"));
	assert_string_equal(innet_cp_name(cp), "p");
	assert_ptr_equal(innet_cp_program(cp), &prog_cp);
	assert_ptr_equal(innet_cp_switch(cp), sw);

	assert_int_equal(innet_cp_reg_find(cp, "w8"), R_W8);
	assert_int_equal(innet_cp_reg_find(cp, "blob100"), R_BLOB100);
	assert_int_equal(innet_cp_reg_find(cp, "w16"), -ENOENT);

	static const struct {
		unsigned id;
		uint64_t mask;
	} widths[] = {
		{ R_W8, UINT64_MAX }, { R_W4, 0xffffffffull }, { R_W2, 0xffff }, { R_W1, 0xff },
	};
	for (size_t i = 0; i < 4; i++) {
		unsigned id = widths[i].id;
		uint64_t v = 1;
		for (uint32_t idx = 0; idx < 4; idx++) {
			assert_int_equal(innet_cp_reg_read(cp, id, idx, &v), 0);
			assert_int_equal(v, 0); /* zeroed at allocation */
		}
		assert_int_equal(innet_cp_reg_write(cp, id, 3, 0x8877665544332211ull), 0);
		assert_int_equal(innet_cp_reg_read(cp, id, 3, &v), 0);
		assert_int_equal(v, 0x8877665544332211ull & widths[i].mask); /* truncated */
		assert_int_equal(innet_cp_reg_read(cp, id, 2, &v), 0);
		assert_int_equal(v, 0); /* the neighbour is untouched */
		assert_int_equal(innet_cp_reg_read(cp, id, 4, &v), -ERANGE);
		assert_int_equal(innet_cp_reg_write(cp, id, 4, 1), -ERANGE);
		assert_int_equal(innet_cp_reg_read(cp, id, UINT32_MAX, &v), -ERANGE);
	}
	uint64_t v;
	assert_int_equal(innet_cp_reg_read(cp, 6, 0, &v), -EINVAL);   /* no such register */
	assert_int_equal(innet_cp_reg_write(cp, 99, 0, 1), -EINVAL);
	assert_int_equal(innet_cp_reg_read(cp, R_BLOB3, 0, &v), -EINVAL); /* a blob */
	assert_int_equal(innet_cp_reg_write(cp, R_BLOB3, 0, 1), -EINVAL);

	/* Blobs. */
	uint8_t in[100], out[100];
	for (int i = 0; i < 100; i++)
		in[i] = (uint8_t)(i * 7 + 1);
	assert_int_equal(innet_cp_reg_write_bytes(cp, R_BLOB3, 4, in, 3), 0);
	memset(out, 0, sizeof(out));
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB3, 4, out, 3), 0);
	assert_memory_equal(out, in, 3);
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB3, 3, out, 3), 0);
	assert_int_equal(out[0] | out[1] | out[2], 0);
	assert_int_equal(innet_cp_reg_write_bytes(cp, R_BLOB3, 0, in, 4), -EINVAL); /* > width */
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB3, 0, out, 4), -EINVAL);
	assert_int_equal(innet_cp_reg_write_bytes(cp, R_BLOB3, 5, in, 3), -ERANGE);
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB3, 5, out, 3), -ERANGE);
	assert_int_equal(innet_cp_reg_read_bytes(cp, 17, 0, out, 3), -EINVAL);
	assert_int_equal(innet_cp_reg_write_bytes(cp, R_BLOB100, 1, in, 100), 0);
	assert_int_equal(innet_cp_reg_write_bytes(cp, R_BLOB100, 0, in + 50, 10), 0); /* partial */
	memset(out, 0, sizeof(out));
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB100, 1, out, 100), 0);
	assert_memory_equal(out, in, 100);
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_BLOB100, 0, out, 100), 0);
	assert_memory_equal(out, in + 50, 10);
	for (int i = 10; i < 100; i++)
		assert_int_equal(out[i], 0);
	/* A numeric register's bytes are readable as a blob too. */
	assert_int_equal(innet_cp_reg_write(cp, R_W4, 0, 0xA1B2C3D4), 0);
	uint32_t w;
	assert_int_equal(innet_cp_reg_read_bytes(cp, R_W4, 0, &w, 4), 0);
	assert_int_equal(w, 0xA1B2C3D4);

	const struct innet_reg *r = innet_cp_reg(cp, R_BLOB3);
	assert_non_null(r);
	assert_int_equal(r->width, 3);
	assert_int_equal(r->count, 5);
	assert_string_equal(r->name, "blob3");
	innet_switch_destroy(sw);
}

static void test_cp_groups(void **state)
{
	struct innet_switch_conf c = one_prog_conf(3, &prog_cp, UDP_BASE + 5, NULL);
	struct innet_switch *sw = create_ok(&c);
	struct innet_cp *cp = innet_switch_prog(sw, "p");
	assert_int_equal(innet_cp_n_groups(cp), 4);

	struct innet_member m[INNET_MAX_GROUP_MEMBERS + 1], got[INNET_MAX_GROUP_MEMBERS];
	memset(m, 0, sizeof(m));
	assert_int_equal(innet_cp_group_get(cp, 0, got, INNET_MAX_GROUP_MEMBERS), 0); /* empty */

	m[0] = (struct innet_member){ .port = 0 };
	m[1] = (struct innet_member){ .port = 2, .ip = test_ip(77), .udp = 5555 };
	assert_int_equal(innet_cp_group_set(cp, 3, m, 2), 0);
	memset(got, 0xff, sizeof(got));
	assert_int_equal(innet_cp_group_get(cp, 3, got, INNET_MAX_GROUP_MEMBERS), 2);
	assert_int_equal(got[0].port, 0);
	assert_int_equal(got[0].ip, 0);
	assert_int_equal(got[0].udp, 0);
	assert_int_equal(got[1].port, 2);
	assert_int_equal(got[1].ip, test_ip(77));
	assert_int_equal(got[1].udp, 5555);
	/* A smaller buffer gets what fits; the count is still the total. */
	memset(got, 0xff, sizeof(got));
	assert_int_equal(innet_cp_group_get(cp, 3, got, 1), 2);
	assert_int_equal(got[0].port, 0);
	assert_int_equal(got[1].port, 0xffff); /* not written */

	/* A member on a port the switch does not have: refused, group unchanged. */
	m[0].port = 3;
	assert_int_equal(innet_cp_group_set(cp, 3, m, 2), -EINVAL);
	assert_int_equal(innet_cp_group_get(cp, 3, got, INNET_MAX_GROUP_MEMBERS), 2);
	assert_int_equal(got[0].port, 0);
	m[0].port = 1;
	assert_int_equal(innet_cp_group_set(cp, 4, m, 1), -ENOENT);     /* no such group */
	assert_int_equal(innet_cp_group_get(cp, 4, got, 1), -ENOENT);
	assert_int_equal(innet_cp_group_set(cp, 0, m, INNET_MAX_GROUP_MEMBERS + 1), -E2BIG);

	/* Full group, then emptied. */
	for (uint32_t i = 0; i < INNET_MAX_GROUP_MEMBERS; i++)
		m[i] = (struct innet_member){ .port = (uint16_t)(i % 3), .udp = (uint16_t)(1000 + i) };
	assert_int_equal(innet_cp_group_set(cp, 0, m, INNET_MAX_GROUP_MEMBERS), 0);
	assert_int_equal(innet_cp_group_get(cp, 0, got, INNET_MAX_GROUP_MEMBERS),
			 INNET_MAX_GROUP_MEMBERS);
	assert_int_equal(got[63].udp, 1063);
	assert_int_equal(innet_cp_group_set(cp, 0, m, 0), 0);
	assert_int_equal(innet_cp_group_get(cp, 0, got, INNET_MAX_GROUP_MEMBERS), 0);
	innet_switch_destroy(sw);
}

struct count_arg {
	int n;
	int stop_at;
	uint32_t value_sum;
};

static int count_entries(const void *key, const void *val, void *arg)
{
	struct count_arg *c = arg;
	uint32_t v;
	memcpy(&v, val, 4);
	c->value_sum += v;
	return ++c->n == c->stop_at ? -77 : 0;
}

static void test_cp_tables(void **state)
{
	struct innet_switch_conf c = one_prog_conf(1, &prog_cp, UDP_BASE + 6, NULL);
	struct innet_switch *sw = create_ok(&c);
	struct innet_cp *cp = innet_switch_prog(sw, "p");
	assert_int_equal(innet_cp_table_find(cp, "flows"), T_FLOWS);
	assert_int_equal(innet_cp_table_find(cp, "routes"), -ENOENT);

	struct innet_table_info info;
	assert_int_equal(innet_cp_table_info(cp, T_FLOWS, &info), 0);
	assert_string_equal(info.name, "flows");
	assert_int_equal(info.key_size, 6);
	assert_int_equal(info.value_size, 4);
	assert_int_equal(info.capacity, 8);
	assert_int_equal(info.entries, 0);
	assert_int_equal(innet_cp_table_info(cp, 1, &info), -EINVAL);

	uint8_t key[6] = { 1, 2, 3, 4, 5, 6 };
	uint32_t val = 10, got = 0;
	assert_int_equal(innet_cp_table_get(cp, T_FLOWS, key, &got), -ENOENT);
	assert_int_equal(innet_cp_table_add(cp, T_FLOWS, key, &val), 0);
	assert_int_equal(innet_cp_table_get(cp, T_FLOWS, key, &got), 0);
	assert_int_equal(got, 10);
	val = 11;
	assert_int_equal(innet_cp_table_add(cp, T_FLOWS, key, &val), 0); /* replace */
	assert_int_equal(innet_cp_table_get(cp, T_FLOWS, key, &got), 0);
	assert_int_equal(got, 11);
	assert_int_equal(innet_cp_table_del(cp, T_FLOWS, key), 0);
	assert_int_equal(innet_cp_table_del(cp, T_FLOWS, key), -ENOENT);
	assert_int_equal(innet_cp_table_get(cp, T_FLOWS, key, &got), -ENOENT);

	for (uint8_t i = 0; i < 8; i++) {
		key[5] = i;
		val = 100 + i;
		assert_int_equal(innet_cp_table_add(cp, T_FLOWS, key, &val), 0);
	}
	key[5] = 8;
	assert_int_equal(innet_cp_table_add(cp, T_FLOWS, key, &val), -ENOSPC);
	assert_int_equal(innet_cp_table_info(cp, T_FLOWS, &info), 0);
	assert_int_equal(info.entries, 8);
	assert_int_equal(info.insert_full, 1);

	struct count_arg ca = { 0 };
	assert_int_equal(innet_cp_table_foreach(cp, T_FLOWS, count_entries, &ca), 0);
	assert_int_equal(ca.n, 8);
	assert_int_equal(ca.value_sum, 8 * 100 + 28);
	ca = (struct count_arg){ .stop_at = 3 };
	assert_int_equal(innet_cp_table_foreach(cp, T_FLOWS, count_entries, &ca), -77);
	assert_int_equal(ca.n, 3);

	/* Bad table ids. */
	assert_int_equal(innet_cp_table_add(cp, 1, key, &val), -EINVAL);
	assert_int_equal(innet_cp_table_del(cp, 1, key), -EINVAL);
	assert_int_equal(innet_cp_table_get(cp, 1, key, &got), -EINVAL);
	assert_int_equal(innet_cp_table_foreach(cp, 1, count_entries, &ca), -EINVAL);
	innet_switch_destroy(sw);
}

/* ------------------------------------------------------------------------ */
/* innet_switch_create: configurations refused                               */

static void test_create_errors(void **state)
{
	struct innet_switch_conf c;

	c = one_prog_conf(2, &prog_cp, UDP_BASE + 10, NULL);
	c.ports[1].ip = c.ports[0].ip;
	expect_create_error(&c, EINVAL, "ports 0 and 1 have the same address");

	c = one_prog_conf(1, NULL, UDP_BASE + 10, NULL);
	expect_create_error(&c, EINVAL, "program instance 'p' has no program");

	static const struct innet_program no_handler = { .name = "nohandle" };
	c = one_prog_conf(1, &no_handler, UDP_BASE + 10, NULL);
	expect_create_error(&c, EINVAL, "program instance 'p' has no program");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_progs = 2;
	c.progs[1] = c.progs[0];
	snprintf(c.progs[1].name, sizeof(c.progs[1].name), "q");
	expect_create_error(&c, EADDRINUSE, "UDP port 41010 is bound by two programs");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.progs[0].udp[1] = UDP_BASE + 10; /* one program, the same port twice */
	c.progs[0].n_udp = 2;
	expect_create_error(&c, EADDRINUSE, "UDP port 41010");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_progs = 2;
	c.progs[1] = c.progs[0];
	c.progs[1].udp[0] = UDP_BASE + 11;
	expect_create_error(&c, EINVAL, "two program instances are named 'p'");

	c = one_prog_conf(1, &prog_cp, 0, NULL);
	expect_create_error(&c, EINVAL, "program 'p': UDP port 0 is not allowed");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.progs[0].n_udp = 0;
	expect_create_error(&c, EINVAL, "program 'p' must bind 1..4096 UDP ports (got 0)");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_workers = 0;
	expect_create_error(&c, EINVAL, "workers must be 1..64 (got 0)");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_ports = 0;
	expect_create_error(&c, EINVAL, "a switch needs 1..64 ports (got 0)");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_progs = 0;
	expect_create_error(&c, EINVAL, "a switch needs 1..16 programs (got 0)");

	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.ports[0].ip = 0;
	expect_create_error(&c, EINVAL, "port 0 (p0) has no address");

	c = one_prog_conf(2, &prog_cp, UDP_BASE + 10, NULL);
	c.ports[1].link.loss = 1.5;
	expect_create_error(&c, EINVAL, "port 1 (p1): link probabilities must be in [0, 1]");
	c.ports[1].link.loss = 0;
	c.ports[1].link.dup = -0.1;
	expect_create_error(&c, EINVAL, "link probabilities");

	/* A failure in a later program frees what the earlier ones set up
	 * (checked by the leak checker of the sanitizer build). */
	c = one_prog_conf(1, &prog_cp, UDP_BASE + 10, NULL);
	c.n_progs = 2;
	c.progs[1] = c.progs[0];
	snprintf(c.progs[1].name, sizeof(c.progs[1].name), "bad");
	c.progs[1].program = &prog_settings;
	c.progs[1].udp[0] = UDP_BASE + 11;
	c.progs[1].args_json = "{\"n\": 1000}";
	expect_create_error(&c, EINVAL, "program 'bad': setting 'n' = 1000 is out of range");
}

static int init_fails(struct innet_cp *cp, void *priv)
{
	return -EIO;
}

static void test_create_init_failure(void **state)
{
	static const struct innet_program prog = {
		.name = "initfail", .model = INNET_MODEL_PISA, .setup = cp_setup, .init = init_fails,
		.handle = drop_all,
	};
	struct innet_switch_conf c = one_prog_conf(1, &prog, UDP_BASE + 12, NULL);
	expect_create_error(&c, EIO, "program 'p': init failed: Input/output error");
	/* The sockets of the failed switch were closed: the port is free again. */
	c = one_prog_conf(1, &prog_cp, UDP_BASE + 12, NULL);
	innet_switch_destroy(create_ok(&c));
}

static int init_explains(struct innet_cp *cp, void *priv)
{
	return innet_cp_init_error(cp, "table %s is short of %d entries", "routes", 3);
}

/* init can say why it fails; setup sees the switch's node id and ports;
 * a priv with its own destructor is released by it. */
static int priv_frees;
static void count_free(void *p)
{
	priv_frees++;
	free(p);
}

static int seen_node, seen_ports;
static int introspect_setup(struct innet_decl *d, struct innet_args *a)
{
	seen_node = innet_decl_node_id(d);
	seen_ports = (int)innet_decl_n_ports(d);
	innet_decl_priv_with(d, malloc(16), count_free);
	innet_decl_priv_with(d, malloc(16), count_free); /* replacing releases the first */
	return 0;
}

static void test_init_error_and_setup_view(void **state)
{
	static const struct innet_program explain = {
		.name = "explain", .model = INNET_MODEL_PISA, .setup = cp_setup, .init = init_explains,
		.handle = drop_all,
	};
	struct innet_switch_conf c = one_prog_conf(1, &explain, UDP_BASE + 20, NULL);
	expect_create_error(&c, EINVAL, "program 'p': table routes is short of 3 entries");

	static const struct innet_program intro = {
		.name = "intro", .model = INNET_MODEL_PISA, .setup = introspect_setup, .handle = drop_all,
	};
	c = one_prog_conf(1, &intro, UDP_BASE + 20, NULL);
	c.node_id = 4242;
	priv_frees = 0;
	struct innet_switch *sw = create_ok(&c);
	assert_int_equal(seen_node, 4242);
	assert_int_equal(seen_ports, (int)c.n_ports);
	assert_int_equal(priv_frees, 1);
	innet_switch_destroy(sw);
	assert_int_equal(priv_frees, 2);
}

static int bound_socket(uint32_t ip, uint16_t udp, bool reuseport)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(fd >= 0);
	int one = 1;
	if (reuseport)
		assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(udp),
				   .sin_addr.s_addr = htonl(ip) };
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void test_create_port_in_use(void **state)
{
	/* Another socket holds 127.201.P.2:41013: the switch cannot bind its
	 * second port, says which address, and frees what it had bound. */
	int fd = bound_socket(test_ip(2), UDP_BASE + 13, false);
	struct innet_switch_conf c = one_prog_conf(2, &prog_cp, UDP_BASE + 13, NULL);
	char want[128];
	snprintf(want, sizeof(want), "cannot bind 127.%u.%u.2:%u: Address already in use", TEST_NET,
		 (unsigned)getpid() & 0xffu, UDP_BASE + 13);
	expect_create_error(&c, EADDRINUSE, want);
	close(fd);
	innet_switch_destroy(create_ok(&c)); /* and now it can */
}

/* Two switches configured with the same address and UDP port must not both
 * come up: the second would silently share the first one's traffic (the
 * kernel spreads datagrams over SO_REUSEPORT sockets of the same user). */
static void test_create_address_taken_by_another_switch(void **state)
{
	struct innet_switch_conf c = one_prog_conf(1, &prog_cp, UDP_BASE + 14, NULL);
	c.n_workers = 2;
	struct innet_switch *first = create_ok(&c);
	err[0] = '\0';
	struct innet_switch *second = innet_switch_create(&c, err, sizeof(err));
	innet_switch_destroy(second);
	innet_switch_destroy(first);
	if (second != NULL)
		fail_msg("a second switch bound the same address and UDP port as a running one");
	assert_contains(err, "Address already in use");

	/* Nor may a switch join a reuseport group some other program made. */
	int fd = bound_socket(test_ip(1), UDP_BASE + 15, true);
	c = one_prog_conf(1, &prog_cp, UDP_BASE + 15, NULL);
	err[0] = '\0';
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	innet_switch_destroy(sw);
	close(fd);
	if (sw != NULL)
		fail_msg("the switch shared a UDP port another socket had bound");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_declarations_rejected),
		cmocka_unit_test(test_declarations_accepted),
		cmocka_unit_test(test_settings_rejected),
		cmocka_unit_test(test_settings_accepted),
		cmocka_unit_test(test_cp_registers),
		cmocka_unit_test(test_cp_groups),
		cmocka_unit_test(test_cp_tables),
		cmocka_unit_test(test_create_errors),
		cmocka_unit_test(test_create_init_failure),
		cmocka_unit_test(test_init_error_and_setup_view),
		cmocka_unit_test(test_create_port_in_use),
		cmocka_unit_test(test_create_address_taken_by_another_switch),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
