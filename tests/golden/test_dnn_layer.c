/*
 * test_dnn_layer.c — golden packets for the DNN layer program
 * (src/dnn/layer_dp.c, layer.c) with the shipped digits model: the last stage (dense
 * 32 -> 10) split into two pipelines; this switch runs pipeline 0 (logits
 * 0..4). Its input arrives in two chunks of 16 values (from the two
 * pipelines of stage 1). Cases, in order, on one switch (node 13):
 *   chunk 0 → consumed, nothing sent; chunk 0 again → duplicate;
 *   chunk 1 → one RESULT to the client (node 101) out of the route's port,
 *   logits equal to a direct computation from the model file;
 *   another inference whose id maps to a busy slot → slot_busy;
 *   transit (dst_node 12) → forwarded on the route's port, unchanged;
 *   malformed packets → their named drops.
 * Shift-and-add and plain-multiply modes give the same bytes.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "dnn/wire.h"
#include "innet/dnn.h"
#include "innet/resources.h"
#include "innet/switch.h"

#define UDP_DNN 46300u
#define SLOTS 8u

/* The shipped model (examples/, found from the repository root or a build
 * directory below it). It is part of the tree: not finding it is a failure,
 * never a skip. */
static const char *model_path(void)
{
	static const char *const cands[] = { "examples/dnn-digits.innet", "../examples/dnn-digits.innet",
					     "../../examples/dnn-digits.innet",
					     "../../../examples/dnn-digits.innet" };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++)
		if (access(cands[i], R_OK) == 0)
			return cands[i];
	fail_msg("examples/dnn-digits.innet not found (run from the repository root)");
	return NULL;
}

/* Where the program's packets ran: in user space on the user-space engine;
 * on the XDP target, in eBPF (main() skips the XDP run while dnn_layer has
 * no eBPF object). */
static void assert_where_it_ran(struct innet_switch *sw)
{
	struct innet_prog_stats st;
	assert_int_equal(innet_cp_stats(innet_switch_prog(sw, "dnn0"), &st), 0);
	assert_true(st.rx_pkts > 0);
	if (test_target_xdp())
		test_assert_xdp_ran(innet_switch_prog(sw, "dnn0"));
	else
		assert_int_equal(st.xdp_rx_pkts, 0);
}

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (207u << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

static struct innet_switch *make_switch(const char *mult, char *args, size_t argslen)
{
	snprintf(args, argslen,
		 "{\"model\": \"%s\", \"stage\": 2, \"pipe\": 0, \"pipes\": 2, \"nodes\": [11, 12, 13], "
		 "\"udp_base\": %u, \"slots\": %u, \"multiply\": \"%s\", "
		 "\"routes\": [{\"node\": 101, \"ports\": [1]}, {\"node\": 12, \"ports\": [0]}]}",
		 model_path(), UDP_DNN, SLOTS, mult);
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "golden-dnn");
	c.node_id = 13;
	c.n_workers = 1;
	c.n_ports = 2;
	c.ports[0].ip = test_ip(1);
	c.ports[0].peer_ip = test_ip(101);
	c.ports[1].ip = test_ip(2);
	c.ports[1].peer_ip = test_ip(102);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "dnn0");
	c.progs[0].program = innet_program_find("dnn_layer");
	c.progs[0].udp[0] = UDP_DNN;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json = args;
	char err[512];
	test_target(&c);
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create: %s", err);
	return sw;
}

static uint32_t build(uint8_t *buf, uint16_t dst, uint8_t stage, uint32_t id, uint32_t model,
		      uint16_t seq, const int8_t *vals, uint16_t n, uint32_t offset)
{
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_dnn_hdr *d = (struct innet_dnn_hdr *)(h + 1);
	*h = (struct innet_hdr){ INNET_MAGIC, INNET_VERSION, INNET_SVC_DNN, 0, htons(dst), htons(101) };
	*d = (struct innet_dnn_hdr){ INNET_DNN_OP_ACT, stage, htons(101), htonl(id), htonl(model),
				     htons(seq), htons(n), htonl(offset) };
	memcpy(buf + INNET_DNN_HDRS_LEN, vals, n);
	return INNET_DNN_HDRS_LEN + n;
}

static void expect_drop(struct innet_switch *sw, const uint8_t *pkt, uint32_t len, const char *reason)
{
	static struct innet_inject_result res;
	struct innet_addr src = { test_ip(101), 9300 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_DNN, &src, pkt, len, &res), 0);
	const char *got = innet_cp_drop_reason_name(innet_switch_prog(sw, "dnn0"), res.drop_reason);
	if (res.action != INNET_DROP || strcmp(got, reason) != 0)
		fail_msg("want drop %s, got %s (%s)", reason, innet_action_name(res.action), got);
	assert_int_equal(res.n_out, 0);
}

static void run_golden(const char *mult)
{
	const char *mp = model_path();
	struct innet_dnn_model m;
	char err[512], args[1024];
	assert_int_equal(innet_dnn_model_load(mp, &m, err, sizeof(err)), 0);
	const struct innet_dnn_layer *l = &m.layers[m.n_layers - 1];
	assert_int_equal(l->type, INNET_DNN_DENSE);
	assert_int_equal(innet_dnn_shape_n(l->in), 32);
	struct innet_switch *sw = make_switch(mult, args, sizeof(args));
	int8_t x[32];
	for (int i = 0; i < 32; i++)
		x[i] = (int8_t)((i * 37) % 128 - (i % 3 == 0 ? 0 : 20)); /* mixed signs, zeros */
	uint8_t pkt[256];
	static struct innet_inject_result res;
	struct innet_addr src = { test_ip(101), 9300 };
	uint32_t id = 42, len;

	/* The ALU operations reported (innet_alu: docs/dnn.md, the paper's
	 * cost of each product by its weight), recomputed here from the model:
	 * chunk 0 is inputs 0..15 of units 0..4 (pipeline 0 of 2). */
	bool shift = strcmp(mult, "shift") == 0;
	uint64_t cost[2] = { 0, 0 };
	for (uint32_t u = 0; u < 5; u++)
		for (uint32_t i = 0; i < 32; i++) {
			int32_t w = l->weights[u * 32 + i];
			uint32_t mag = (uint32_t)(w < 0 ? -w : w);
			cost[i / 16] += shift ? 2u * (uint32_t)__builtin_popcount(mag) + (w < 0) : w != 0;
		}
	struct innet_prog_stats st0, st1;
	innet_cp_stats(innet_switch_prog(sw, "dnn0"), &st0);

	len = build(pkt, 13, 2, id, m.crc, 0, x, 16, 0);
	assert_int_equal(innet_switch_inject(sw, 0, UDP_DNN, &src, pkt, len, &res), 0);
	assert_int_equal(res.action, INNET_CONSUMED);
	assert_int_equal(res.n_out, 0);
	innet_cp_stats(innet_switch_prog(sw, "dnn0"), &st1);
	assert_int_equal(st1.alu_ops - st0.alu_ops, cost[0]);
	expect_drop(sw, pkt, len, "duplicate");
	/* another id on the same slot while 42 is in flight */
	len = build(pkt, 13, 2, id + SLOTS, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, len, "slot_busy");

	innet_cp_stats(innet_switch_prog(sw, "dnn0"), &st0);
	len = build(pkt, 13, 2, id, m.crc, 1, x + 16, 16, 16);
	assert_int_equal(innet_switch_inject(sw, 0, UDP_DNN, &src, pkt, len, &res), 0);
	assert_int_equal(res.action, INNET_CONSUMED);
	assert_int_equal(res.n_out, 1);
	/* chunk 1, then the finish: a bias add and a requantization per output
	 * (2 x 5), and the route's pick (1) */
	innet_cp_stats(innet_switch_prog(sw, "dnn0"), &st1);
	assert_int_equal(st1.alu_ops - st0.alu_ops, cost[1] + 2 * 5 + 1);
	const struct innet_inject_out *o = &res.out[0];
	assert_int_equal(o->port, 1);               /* the route to node 101 */
	assert_int_equal(o->dst.ip, test_ip(102));  /* the port's peer */
	assert_int_equal(o->dst.udp, UDP_DNN);
	assert_int_equal(o->len, INNET_DNN_HDRS_LEN + 5 * 4);
	const struct innet_hdr *h = (const struct innet_hdr *)o->data;
	const struct innet_dnn_hdr *d = (const struct innet_dnn_hdr *)(h + 1);
	assert_int_equal(h->service, INNET_SVC_DNN);
	assert_int_equal(ntohs(h->dst_node), 101);
	assert_int_equal(ntohs(h->src_node), 13);
	assert_int_equal(d->op, INNET_DNN_OP_RESULT);
	assert_int_equal(ntohl(d->infer_id), id);
	assert_int_equal(ntohl(d->model), m.crc);
	assert_int_equal(ntohs(d->seq), 0);
	assert_int_equal(ntohs(d->n), 5);
	assert_int_equal(ntohl(d->offset), 0);
	for (uint32_t u = 0; u < 5; u++) {
		int32_t want = l->biases[u];
		for (uint32_t i = 0; i < 32; i++)
			want += l->weights[u * 32 + i] * x[i];
		uint32_t be;
		memcpy(&be, o->data + INNET_DNN_HDRS_LEN + 4 * u, 4);
		if ((int32_t)ntohl(be) != want)
			fail_msg("%s: logit %u = %d, want %d", mult, u, (int32_t)ntohl(be), want);
	}
	/* the slot is free again: the other id now claims it */
	len = build(pkt, 13, 2, id + SLOTS, m.crc, 0, x, 16, 0);
	assert_int_equal(innet_switch_inject(sw, 0, UDP_DNN, &src, pkt, len, &res), 0);
	assert_int_equal(res.action, INNET_CONSUMED);

	/* transit: not for this switch */
	len = build(pkt, 12, 1, 7, m.crc, 0, x, 16, 0);
	assert_int_equal(innet_switch_inject(sw, 1, UDP_DNN, &src, pkt, len, &res), 0);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 0);
	assert_memory_equal(res.out[0].data, pkt, len);
	len = build(pkt, 77, 1, 7, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, len, "no_route");

	/* malformed */
	len = build(pkt, 13, 2, 50, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, 27, "too_short");
	pkt[0] = 0x1F;
	expect_drop(sw, pkt, len, "bad_magic");
	pkt[0] = INNET_MAGIC;
	pkt[1] = 2;
	expect_drop(sw, pkt, len, "bad_version");
	pkt[1] = INNET_VERSION;
	pkt[2] = INNET_SVC_COUNTER;
	expect_drop(sw, pkt, len, "wrong_service");
	len = build(pkt, 13, 1, 50, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, len, "wrong_stage");
	len = build(pkt, 13, 2, 50, m.crc ^ 1, 0, x, 16, 0);
	expect_drop(sw, pkt, len, "wrong_model");
	len = build(pkt, 13, 2, 50, m.crc, 2, x, 16, 0);
	expect_drop(sw, pkt, len, "bad_chunk");     /* seq out of range */
	len = build(pkt, 13, 2, 50, m.crc, 1, x, 16, 0);
	expect_drop(sw, pkt, len, "bad_chunk");     /* offset not chunk 1's */
	len = build(pkt, 13, 2, 50, m.crc, 0, x, 15, 0);
	expect_drop(sw, pkt, len, "bad_chunk");     /* short chunk */
	len = build(pkt, 13, 2, 50, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, len - 1, "bad_chunk"); /* length disagrees with n */
	len = build(pkt, 13, 2, 0, m.crc, 0, x, 16, 0);
	expect_drop(sw, pkt, len, "bad_id");
	pkt[8] = INNET_DNN_OP_RESULT;
	expect_drop(sw, pkt, len, "bad_op");

	uint64_t completed;
	assert_int_equal(innet_cp_reg_read(innet_switch_prog(sw, "dnn0"), 3, 0, &completed), 0);
	assert_int_equal(completed, 1);
	assert_where_it_ran(sw);
	innet_switch_destroy(sw);
	innet_dnn_model_free(&m);
}

static void test_shift_and_add(void **state)
{
	run_golden("shift");
}

static void test_plain_multiply(void **state)
{
	run_golden("mul");
}

static void test_settings(void **state)
{
	static const struct {
		const char *args;
		const char *msg;
	} cases[] = {
		{ "{\"stage\": 0, \"nodes\": [1, 2, 3]}", "'model' (a model file) is required" },
		{ "{\"model\": \"/nonexistent.innet\", \"stage\": 0, \"nodes\": [1, 2, 3]}", "No such file" },
		{ "{\"model\": \"@\", \"stage\": 3, \"nodes\": [1, 2, 3]}", "the model has 3 stages" },
		{ "{\"model\": \"@\", \"stage\": 0, \"nodes\": [1, 2]}", "'nodes' lists 2 leaves" },
		{ "{\"model\": \"@\", \"stage\": 0, \"pipe\": 2, \"pipes\": 2, \"nodes\": [1, 2, 3]}", "stage 0 has 2 pipelines" },
		{ "{\"model\": \"@\", \"stage\": 0, \"nodes\": [1, 2, 3], \"multiply\": \"fast\"}", "\"shift\" or \"mul\"" },
		{ "{\"model\": \"@\", \"stage\": 1, \"nodes\": [1, 2, 3], \"max_vals\": 1}", "more than 64 input packets" },
		{ "{\"model\": \"@\", \"stage\": 0, \"nodes\": [1, 2, 3], \"slot\": 4}", "unknown setting 'slot'" },
	};
	(void)model_path(); /* fails the case if the model is missing */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char args[512];
		const char *at = strchr(cases[i].args, '@'); /* '@' stands for the model path */
		if (at == NULL)
			snprintf(args, sizeof(args), "%s", cases[i].args);
		else
			snprintf(args, sizeof(args), "%.*s%s%s", (int)(at - cases[i].args), cases[i].args,
				 model_path(), at + 1);
		struct innet_switch_conf c;
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 1;
		c.ports[0].ip = test_ip(30);
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "dnn0");
		c.progs[0].program = innet_program_find("dnn_layer");
		c.progs[0].udp[0] = UDP_DNN + 1;
		c.progs[0].n_udp = 1;
		c.progs[0].args_json = args;
		char err[512] = "";
		test_target(&c);
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL) {
			innet_switch_destroy(sw);
			fail_msg("%s: accepted", args);
		}
		if (strstr(err, cases[i].msg) == NULL)
			fail_msg("%s: want \"%s\", got \"%s\"", args, cases[i].msg, err);
	}
}

/* dnn_layer is user-space only (the contract check says so at build: a
 * layer's stack and work are far beyond eBPF's): on the XDP target its
 * packets never reach an eBPF program, so that run would repeat the
 * user-space one. Skip it, saying why, for as long as the switch says so. */
static void skip_xdp_if_user_space_only(void)
{
	char args[1024];
	struct innet_res_ebpf e;
	struct innet_switch *sw = make_switch("shift", args, sizeof(args));
	int rc = innet_cp_ebpf(innet_switch_prog(sw, "dnn0"), &e);
	innet_switch_destroy(sw);
	if (rc != 0) {
		fprintf(stderr, "innet_cp_ebpf: %d\n", rc);
		exit(1);
	}
	if (e.userspace[0] != '\0') {
		printf("skip: dnn_layer has no eBPF object on the XDP target (%s)\n", e.userspace);
		exit(77);
	}
}

int main(void)
{
	test_target_require();
	if (test_target_alu()) {
		/* dnn_layer is user-space only (no eBPF object for the ALU check to
		 * run); its innet_alu counts follow the paper's cost model of the
		 * products (docs/dnn.md), not the CPU's vectorised code, and
		 * run_golden checks them against that model. */
		printf("skip: INNET_TEST_TARGET=alu: dnn_layer has no eBPF data path to count\n");
		return 77;
	}
	if (test_target_xdp())
		skip_xdp_if_user_space_only();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shift_and_add),
		cmocka_unit_test(test_plain_multiply),
		cmocka_unit_test(test_settings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
