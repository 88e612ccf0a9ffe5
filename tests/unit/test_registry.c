/*
 * test_registry.c — a program registered from a constructor
 * (INNET_PROGRAM_REGISTER) under a name another program already has is not
 * lost in silence: the registry keeps the refusal, innet_switch_create refuses
 * to create a switch and names the program, and
 * innet_program_registration_error says it.
 *
 * The clash is made here: this binary links the shipped programs (one of
 * them registers "forward") and registers a program of its own called
 * "forward" too.
 */
#include <errno.h>

#include "testutil.h"
#include "innet/program.h"

static enum innet_action clash_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	(void)ctx;
	return innet_drop(pkt, 0);
}

static const struct innet_program clash = { .name = "forward", .handle = clash_handle };
INNET_PROGRAM_REGISTER(clash)

static void test_refused_registration_is_loud(void **state)
{
	(void)state;
	char err[256] = "";
	/* the shipped forward and ours: one of them went in, the other is refused */
	assert_int_equal(innet_program_registration_error(err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "program 'forward' was not registered"));
	assert_non_null(strstr(err, "another program of this process has that name"));
	assert_non_null(innet_program_find("forward"));

	/* a direct registration returns its error to its caller, and is not kept */
	assert_int_equal(innet_program_register(&clash) == 0 ||
			 innet_program_register(&clash) == -EEXIST, 1);

	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "reg");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = 0x7f003d01; /* 127.0.61.1 */
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	c.progs[0].udp[0] = 46999;
	c.progs[0].n_udp = 1;
	char cerr[256] = "";
	struct innet_switch *sw = innet_switch_create(&c, cerr, sizeof(cerr));
	assert_null(sw);
	assert_int_equal(errno, EEXIST);
	assert_non_null(strstr(cerr, "program 'forward' was not registered"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_registration_is_loud),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
