/*
 * alu_check.h — the ALU check of the golden tests (INNET_TEST_TARGET=alu):
 * do the stateless ALU operations a handler reports with innet_alu() match
 * the ones it executes? (docs/resources.md, "What innet_alu counts".)
 *
 * Each program of a switch conf is swapped for a copy whose handler runs
 * the data path's ALU-count object (tests/alu/dp_alu.c, built for every
 * data path that has an eBPF object) in the counting interpreter
 * (alu_vm.h) on the user-space engine's state: the golden test's verdicts
 * and bytes must come out the same, and every pass is checked:
 *
 *   |reported - counted| <= max(ALU_CHECK_SLACK, counted * ALU_CHECK_PCT / 100)
 *
 * A pass out of tolerance is printed at once (program, packet, both
 * figures) and makes the test binary exit 1 at exit, after a summary per
 * program. Timer callbacks are not checked (they run natively).
 */
#ifndef INNET_ALU_CHECK_H
#define INNET_ALU_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "innet/dp.h"
#include "innet/switch.h"

#define ALU_CHECK_SLACK 4u    /* operations: a branch or two */
#define ALU_CHECK_PCT   20u   /* percent of the counted operations */

/* Whether `reported` is within the tolerance of `counted`. */
bool alu_check_within(uint64_t reported, uint64_t counted);

/* Swap every program of c that has an ALU-count object for its counting
 * copy (the first call also registers the summary at exit). Exits 1 with
 * a message if an object cannot be loaded. */
void alu_check_conf(struct innet_switch_conf *c);

/* The ALU-count objects, listed by the build (build/alu/objects.c, written
 * by tests/alu/alu-objects): a NULL name ends the list. */
struct alu_object {
	const char *name;                 /* the data path's (INNET_DATAPATH) */
	enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt);
	const unsigned char *start, *end; /* NAME.alu.o */
};
extern const struct alu_object alu_objects[];

#endif /* INNET_ALU_CHECK_H */
