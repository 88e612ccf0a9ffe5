/*
 * testutil.h — what every C test includes: cmocka, and the target choice of
 * the golden tests.
 *
 * The golden tests run three times (tests/run): once on the user-space
 * engine; once with INNET_TEST_TARGET=xdp, where every switch they create
 * loads its programs' eBPF objects and innet_switch_inject runs them with
 * BPF_PROG_TEST_RUN (needs root; without it the xdp run skips with 77); and
 * once with INNET_TEST_TARGET=alu, on the user-space engine with each
 * handler run by the ALU check (tests/alu/alu_check.h), which fails the test
 * when a pass's innet_alu() report drifts from the ALU operations its code
 * executes. The expectations are the same file: same verdicts, same bytes.
 */
#ifndef INNET_TESTUTIL_H
#define INNET_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "innet/switch.h"

/* Skip the running case, saying why on a line of its own ("skip: WHY"):
 * cmocka counts the case as skipped (not passed), and tests/run lists it with
 * the reason beside the binary's result. A case never returns early in
 * silence when it cannot run. */
#define test_skip(why)                                   \
	do {                                             \
		printf("skip: %s\n", (why));            \
		fflush(stdout);                          \
		skip();                                  \
	} while (0)

static inline bool test_target_xdp(void)
{
	const char *t = getenv("INNET_TEST_TARGET");
	return t != NULL && strcmp(t, "xdp") == 0;
}

/* INNET_TEST_TARGET=alu: the user-space engine, each program's handler run
 * by the ALU check (tests/alu/alu_check.h; linked into the golden tests). */
static inline bool test_target_alu(void)
{
	const char *t = getenv("INNET_TEST_TARGET");
	return t != NULL && strcmp(t, "alu") == 0;
}
void alu_check_conf(struct innet_switch_conf *c) __attribute__((weak));

/* innet_switch_start, its message printed if it fails: 0 or -errno. */
static inline int test_start(struct innet_switch *sw)
{
	char err[512];
	int rc = innet_switch_start(sw, err, sizeof(err));
	if (rc != 0)
		print_message("innet_switch_start: %s\n", err);
	return rc;
}

/* Set the switch conf's target from INNET_TEST_TARGET. */
static inline void test_target(struct innet_switch_conf *c)
{
	if (test_target_xdp()) {
		c->target = INNET_TARGET_XDP;
		c->xdp_no_attach = true;
	}
	if (test_target_alu())
		alu_check_conf(c);
}

/* On the XDP target, the program's eBPF object must have handled packets
 * itself (not only passed them to the user-space engine). */
static inline void test_assert_xdp_ran(struct innet_cp *cp)
{
	if (!test_target_xdp())
		return;
	struct innet_prog_stats st;
	innet_cp_stats(cp, &st);
	if (st.xdp_rx_pkts == 0)
		fail_msg("program '%s': the eBPF program handled no packet (%llu passed up)",
			 innet_cp_name(cp), (unsigned long long)st.rx_pkts);
}

/* Call first in main(): the xdp run needs root (BPF); skip it otherwise. */
static inline void test_target_require(void)
{
	if (test_target_xdp() && geteuid() != 0) {
		printf("skip: INNET_TEST_TARGET=xdp needs root (BPF_PROG_TEST_RUN)\n");
		exit(77);
	}
	if (test_target_alu() && alu_check_conf == NULL) {
		printf("skip: INNET_TEST_TARGET=alu: this test is built without the ALU check\n");
		exit(77);
	}
}

#endif /* INNET_TESTUTIL_H */
