/*
 * test_registry.c — the program registry when a registration fails: two
 * programs of this binary share a name, and a third takes the name of a
 * shipped program. Their constructors (INNET_PROGRAM_REGISTER) have no
 * caller to tell, so the registry keeps the failures:
 * innet_program_registry_check names the program, and innet_switch_create
 * refuses every switch with that message (a duplicate name is loud, not a
 * program silently unreachable). A direct innet_program_register returns
 * its error to its caller and is not kept.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "innet/program.h"
#include "innet/switch.h"

static enum innet_action pass(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
}

static const struct innet_program dup_a = { .name = "dup", .summary = "the first", .handle = pass };
static const struct innet_program dup_b = { .name = "dup", .summary = "the second", .handle = pass };
INNET_PROGRAM_REGISTER(dup_a)
INNET_PROGRAM_REGISTER(dup_b)

static void test_duplicate_is_loud(void **state)
{
	char err[256];
	assert_int_equal(innet_program_registry_check(err, sizeof(err)), -EEXIST);
	if (strstr(err, "program 'dup'") == NULL || strstr(err, "another program has that name") == NULL)
		fail_msg("message: %s", err);
	/* one of the two is registered; which one is the loader's order */
	const struct innet_program *p = innet_program_find("dup");
	assert_true(p == &dup_a || p == &dup_b);

	/* no switch while the registry is ambiguous, whatever it runs */
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "reg");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = 0x7f000001;
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	assert_non_null(c.progs[0].program);
	c.progs[0].udp[0] = 46980;
	c.progs[0].n_udp = 1;
	err[0] = '\0';
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw != NULL) {
		innet_switch_destroy(sw);
		fail_msg("a switch was built with a duplicate program name registered");
	}
	assert_int_equal(errno, EEXIST);
	assert_non_null(strstr(err, "program 'dup'"));
}

static void test_direct_register_returns_its_error(void **state)
{
	static const struct innet_program again = { .name = "forward", .handle = pass };
	static const struct innet_program nameless = { .name = "", .handle = pass };
	assert_int_equal(innet_program_register(&again), -EEXIST);
	assert_int_equal(innet_program_register(&nameless), -EINVAL);
	/* still the constructors' failure that is reported, not these */
	char err[256];
	assert_int_equal(innet_program_registry_check(err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "program 'dup'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_duplicate_is_loud),
		cmocka_unit_test(test_direct_register_returns_its_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
