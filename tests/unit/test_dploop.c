/*
 * test_dploop.c — innet_loop, innet_faulted and innet_scratch (innet/dp.h)
 * on the user-space engine: innet_loop's contract (calls in order, stops
 * when the body returns 1, counts the calls, refuses more than
 * INNET_LOOP_MAX), and a Trio test program that uses all three through the
 * real pipeline — it reverses the packet into scratch memory with a loop,
 * emits the copy and sums the payload into a register with a loop that
 * stops at its first fault. (On XDP innet_loop is bpf_loop; the agg golden
 * test runs its per-element work through it on both targets.)
 *
 * Port 127.203.P.1 (P from the process id), UDP 42100.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/program.h"
#include "innet/switch.h"

#define UDP_LOOP 42100u

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (203u << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

/* ---- the contract ---------------------------------------------------------- */

struct calls {
	uint32_t seen[16];
	uint32_t n;
	uint32_t stop_at;      /* return 1 at this index */
};

static long record(uint32_t i, void *arg)
{
	struct calls *c = arg;
	if (c->n < 16)
		c->seen[c->n] = i;
	c->n++;
	return i == c->stop_at ? 1 : 0;
}

static void test_loop_contract(void **state)
{
	struct calls c = { .stop_at = ~0u };
	assert_int_equal(innet_loop(0, record, &c), 0);
	assert_int_equal(c.n, 0);
	printf("n = 5: five calls, in order\n");
	assert_int_equal(innet_loop(5, record, &c), 5);
	assert_int_equal(c.n, 5);
	for (uint32_t i = 0; i < 5; i++)
		assert_int_equal(c.seen[i], i);
	printf("the body returns 1 at i = 2: three calls\n");
	c = (struct calls){ .stop_at = 2 };
	assert_int_equal(innet_loop(10, record, &c), 3);
	assert_int_equal(c.n, 3);
	printf("n = INNET_LOOP_MAX + 1: refused, no call (bpf_loop's -E2BIG)\n");
	c = (struct calls){ .stop_at = ~0u };
	assert_int_equal(innet_loop(INNET_LOOP_MAX + 1, record, &c), 0);
	assert_int_equal(c.n, 0);
}

/* ---- through the pipeline -------------------------------------------------- */

enum { R_SUM, R_CALLS };

struct rev {
	struct innet_pkt *pkt;
	uint8_t *buf;
};

/* buf[len - 1 - i] = payload[i] */
static long rev_one(uint32_t i, void *arg)
{
	struct rev *r = arg;
	const uint8_t *b = innet_pkt_ptr(r->pkt, i, 1);
	if (b == NULL)
		return 1;
	r->buf[r->pkt->len - 1 - i] = *b;
	return 0;
}

struct sum {
	struct innet_ctx *ctx;
	struct innet_pkt *pkt;
	uint32_t idx;          /* register element to add into */
};

/* sum[idx + i] += payload[i], stopping at the first fault */
static long sum_one(uint32_t i, void *arg)
{
	struct sum *s = arg;
	const uint8_t *b = innet_pkt_ptr(s->pkt, i, 1);
	if (b == NULL || innet_faulted(s->ctx))
		return 1;
	innet_reg_fetch_add(s->ctx, R_SUM, s->idx + i, *b);
	return 0;
}

/* Payload[0] names the first element of the sums (4 elements: a sum past
 * them faults with reg_out_of_range); calls[0] = the calls the sum loop made. */
static enum innet_action loop_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint8_t *buf = innet_scratch(ctx);
	const uint8_t *first = innet_pkt_ptr(pkt, 0, 1);
	if (buf == NULL || first == NULL)
		return innet_drop(pkt, INNET_DROP_PROGRAM);
	struct rev r = { .pkt = pkt, .buf = buf };
	innet_loop(pkt->len, rev_one, &r);
	struct innet_out out = { .port = 0, .ip = pkt->src.ip, .udp = pkt->src.udp };
	innet_emit(ctx, &out, false, buf, pkt->len);
	struct sum s = { .ctx = ctx, .pkt = pkt, .idx = *first };
	uint32_t calls = innet_loop(pkt->len, sum_one, &s);
	innet_reg_write(ctx, R_CALLS, 0, calls);
	return INNET_CONSUMED;
}

static int loop_setup(struct innet_decl *d, struct innet_args *a)
{
	int rc = innet_decl_reg(d, R_SUM, "sum", 8, 4);
	return rc != 0 ? rc : innet_decl_reg(d, R_CALLS, "calls", 4, 1);
}

static const struct innet_program prog_loop = {
	.name = "loop", .summary = "test: innet_loop, innet_scratch, innet_faulted",
	.model = INNET_MODEL_TRIO,
	.drop_reasons = (const char *const[]){ "no_scratch" }, .n_drop_reasons = 1,
	.setup = loop_setup, .handle = loop_handle,
};

static void test_pipeline(void **state)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "test-dploop");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = test_ip(1);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "loop");
	c.progs[0].program = &prog_loop;
	c.progs[0].udp[0] = UDP_LOOP;
	c.progs[0].n_udp = 1;
	char err[256];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	struct innet_cp *cp = innet_switch_prog(sw, "loop");
	struct innet_addr src = { test_ip(9), 5000 };
	static struct innet_inject_result res;
	uint64_t v;

	printf("payload 0,1,2,3: the reversed copy emitted from scratch; sums 0+1+2+3 into elements 0..3\n");
	const uint8_t p1[4] = { 0, 1, 2, 3 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_LOOP, &src, p1, 4, &res), 0);
	assert_int_equal(res.action, INNET_CONSUMED);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].len, 4);
	const uint8_t want1[4] = { 3, 2, 1, 0 };
	assert_memory_equal(res.out[0].data, want1, 4);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(innet_cp_reg_read(cp, 0, i, &v), 0);
		assert_int_equal(v, i);
	}
	assert_int_equal(innet_cp_reg_read(cp, 1, 0, &v), 0);
	assert_int_equal(v, 4);

	printf("payload 2,9,9,9,9,9: elements 2 and 3 added, element 4 faults: the loop stops at the next call\n");
	const uint8_t p2[6] = { 2, 9, 9, 9, 9, 9 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_LOOP, &src, p2, 6, &res), 0);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(innet_cp_drop_reason_name(cp, res.drop_reason), "reg_out_of_range");
	assert_int_equal(innet_cp_reg_read(cp, 0, 2, &v), 0);
	assert_int_equal(v, 2 + 2);
	assert_int_equal(innet_cp_reg_read(cp, 0, 3, &v), 0);
	assert_int_equal(v, 3 + 9);
	/* calls: 2 adds, the faulting one, and the one that saw the fault (of 6) */
	assert_int_equal(innet_cp_reg_read(cp, 1, 0, &v), 0);
	assert_int_equal(v, 4);
	innet_switch_destroy(sw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_loop_contract),
		cmocka_unit_test(test_pipeline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
