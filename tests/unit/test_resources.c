/*
 * test_resources.c — unit tests for the resource model (src/control/resources.c).
 *
 * Table-driven: each case builds one program description and states, per
 * target, whether it must fit and, if not, which check must be the first to
 * fail. Further tests pin the stage packing, the verdict and report texts,
 * the JSON shape, the error contract, and innet_res_usage_from_prog.
 *
 * innet_res_usage_from_prog is tested against a fake control plane defined
 * here (struct innet_cp is opaque to the model): the innet_cp_* functions it
 * calls are provided by this file, so the linker takes them from here and
 * never pulls the engine's objects out of libinnet.a. That keeps this test a
 * unit test of the model alone.
 */
#include "unit/testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/resources.h"

/* ------------------------------------------------------------------------ */
/* Helpers.                                                                   */

static struct innet_res_finding findings[INNET_RES_MAX_FINDINGS];

/* Run a check into `findings`; returns the count. */
static size_t run(const struct innet_res_usage *u, enum innet_res_target t)
{
	size_t n = 0;

	assert_int_equal(innet_res_check(u, t, findings, INNET_RES_MAX_FINDINGS, &n), 0);
	assert_true(n > 0);
	assert_true(n <= INNET_RES_MAX_FINDINGS);
	return n;
}

/* The first finding of check `resource`, or NULL. */
static const struct innet_res_finding *find(size_t n, const char *resource)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(findings[i].resource, resource) == 0)
			return &findings[i];
	return NULL;
}

static const struct innet_res_finding *first_fail(size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (findings[i].status == INNET_RES_FAIL)
			return &findings[i];
	return NULL;
}

/* Pretend n packets went through, one pass each, with these per-pass maxima. */
static void measure(struct innet_res_usage *u, uint64_t n, uint32_t reg_ops, uint32_t table_ops)
{
	u->m.packets = n;
	u->m.passes = n;
	u->m.max_reg_ops = reg_ops;
	u->m.reg_ops = n * reg_ops;
	u->m.max_table_ops = table_ops;
	u->m.table_ops = n * table_ops;
}

/* ------------------------------------------------------------------------ */
/* The cases.                                                                 */

/* forward: no state, an 8-byte header, measured. */
static void build_forward(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "forward", INNET_MODEL_PISA);
	u->parse_bytes = 8;
	measure(u, 1000, 0, 0);
}

/* A counter: a few small registers and a lookup table, 3 reg ops per pass. */
static void build_counter(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "counter", INNET_MODEL_PISA);
	u->parse_bytes = 16;
	assert_int_equal(innet_res_usage_add_reg(u, "count", 8, 65536), 0);
	assert_int_equal(innet_res_usage_add_reg(u, "seen", 4, 65536), 0);
	assert_int_equal(innet_res_usage_add_reg(u, "flags", 1, 65536), 0);
	assert_int_equal(innet_res_usage_add_table(u, "route", 4, 2, 1024), 0);
	u->n_groups = 4;
	measure(u, 5000, 3, 1);
}

/* One 64 MiB register array: 4096 + 1 SRAM blocks, more than a stage. */
static void build_big_register(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "bigreg", INNET_MODEL_PISA);
	u->parse_bytes = 16;
	assert_int_equal(innet_res_usage_add_reg(u, "big", 8, 8u << 20), 0);
}

/* 60 register ops in one pass over 32 arrays: > 48 (Tofino1), <= 80 (Tofino2). */
static void build_60_reg_ops(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "regops60", INNET_MODEL_PISA);
	u->parse_bytes = 32;
	u->pisa_reg_ops_per_pass = 64;
	for (int i = 0; i < 32; i++)
		assert_int_equal(innet_res_usage_add_reg(u, "r", 4, 1024), 0);
	measure(u, 100, 60, 0);
}

/* A Trio program that emits two packets per packet. */
static void build_emitter(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "emitter", INNET_MODEL_TRIO);
	u->parse_bytes = 16;
	measure(u, 100, 1, 0);
	u->m.max_emitted = 2;
	u->m.emitted = 200;
}

/* A Trio program with timers (and nothing measured). */
static void build_timers(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "straggler", INNET_MODEL_TRIO);
	u->parse_bytes = 16;
	u->n_timers = 1024;
	assert_int_equal(innet_res_usage_add_reg(u, "acc", 4, 4096), 0);
}

/* 512 parsed bytes: (42 + 512 + 36) * 8 = 4720 bits > 4096 PHV bits. */
static void build_phv_overflow(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "bigheader", INNET_MODEL_PISA);
	u->parse_bytes = 512;
	measure(u, 10, 1, 0);
}

/* 1300 parsed bytes: over the PHV and over a Trio thread's 1280 B. */
static void build_local_overflow(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "hugeheader", INNET_MODEL_TRIO);
	u->parse_bytes = 1300;
	measure(u, 10, 1, 0);
}

/* A 1024 B blob per element: 128 64-bit words, 128 stateful ALUs. */
static void build_blob(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "kv", INNET_MODEL_PISA);
	u->parse_bytes = 64;
	assert_int_equal(innet_res_usage_add_reg(u, "value", 1024, 1024), 0);
}

/* 6 blobs of 64 B: 6 x 8 = 48 word arrays, exactly Tofino1's stateful ALUs. */
static void build_48_words(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "words48", INNET_MODEL_PISA);
	for (int i = 0; i < 6; i++)
		assert_int_equal(innet_res_usage_add_reg(u, "blob", 64, 256), 0);
}

/* 7 blobs of 64 B: 56 word arrays, one pipe of Tofino1 has 48, Tofino2 80. */
static void build_56_words(struct innet_res_usage *u)
{
	build_48_words(u);
	assert_int_equal(innet_res_usage_add_reg(u, "blob", 64, 256), 0);
}

/* A 1M-entry table of 8-byte entries: 1221 SRAM blocks (> 960, <= 1600). */
static void build_big_table(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "bigtable", INNET_MODEL_PISA);
	u->parse_bytes = 16;
	assert_int_equal(innet_res_usage_add_table(u, "flows", 4, 4, 1000000), 0);
	measure(u, 10, 0, 1);
}

/* 4 GiB of registers plus 8 bytes: over Trio's shared-memory budget. */
static void build_shared_overflow(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "hoarder", INNET_MODEL_TRIO);
	assert_int_equal(innet_res_usage_add_reg(u, "huge", 4096, 1u << 20), 0);
	assert_int_equal(innet_res_usage_add_reg(u, "one", 8, 1), 0);
}

/* 200 register ops per pass on Trio: fits (no per-pass limit), slow. */
static void build_trio_heavy(struct innet_res_usage *u)
{
	innet_res_usage_init(u, "heavy", INNET_MODEL_TRIO);
	u->parse_bytes = 64;
	assert_int_equal(innet_res_usage_add_reg(u, "grad", 4, 1 << 16), 0);
	measure(u, 100, 200, 2);
	u->m.max_alu_ops = 300;
}

/* Recirculating twice: fits Tofino, with a warning. */
static void build_recirc(struct innet_res_usage *u)
{
	build_counter(u);
	u->m.max_recirc = 2;
	u->m.passes = u->m.packets * 3;
}

/* The eBPF column comes from the loaded program: a measured one over the
 * stack limit, and one that declared itself user-space only. */
static void build_ebpf_stack(struct innet_res_usage *u)
{
	build_forward(u);
	u->ebpf.loaded = true;
	u->ebpf.verified_insns = 1200;
	u->ebpf.insns = 300;
	u->ebpf.stack_bytes = 600;
	u->ebpf.tail_calls = 17;
}

static void build_ebpf_userspace(struct innet_res_usage *u)
{
	build_forward(u);
	snprintf(u->ebpf.userspace, sizeof(u->ebpf.userspace), "too much work per packet");
}

struct fit_case {
	const char *name;
	void (*build)(struct innet_res_usage *u);
	bool fits[INNET_RES_TARGET_COUNT];
	/* The first failing check per target (NULL when it fits). */
	const char *first_fail[INNET_RES_TARGET_COUNT];
};

static const struct fit_case fit_cases[] = {
	{ "forward", build_forward, { true, true, true, true }, { NULL, NULL, NULL, NULL } },
	{ "counter", build_counter, { true, true, true, true }, { NULL, NULL, NULL, NULL } },
	{ "64 MiB register", build_big_register, { false, false, true, true },
	  { "register", "register", NULL, NULL } },
	{ "60 reg ops/pass", build_60_reg_ops, { false, true, true, true },
	  { "reg ops/pass", NULL, NULL, NULL } },
	{ "emits", build_emitter, { false, false, true, true }, { "emission", "emission", NULL, NULL } },
	{ "timers", build_timers, { false, false, true, true }, { "timers", "timers", NULL, NULL } },
	{ "phv overflow", build_phv_overflow, { false, false, true, true }, { "phv", "phv", NULL, NULL } },
	{ "local memory overflow", build_local_overflow, { false, false, false, true },
	  { "phv", "phv", "local memory", NULL } },
	{ "1 KiB blob", build_blob, { false, false, true, true }, { "register", "register", NULL, NULL } },
	{ "48 word arrays", build_48_words, { true, true, true, true }, { NULL, NULL, NULL, NULL } },
	{ "56 word arrays", build_56_words, { false, true, true, true },
	  { "stateful alus", NULL, NULL, NULL } },
	{ "1M-entry table", build_big_table, { false, true, true, true }, { "sram", NULL, NULL, NULL } },
	{ "4 GiB + 8 B", build_shared_overflow, { false, false, false, true },
	  { "register", "register", "shared memory", NULL } },
	{ "trio heavy", build_trio_heavy, { false, false, true, true },
	  { "reg ops/pass", "reg ops/pass", NULL, NULL } },
	{ "recirculates", build_recirc, { true, true, true, true }, { NULL, NULL, NULL, NULL } },
	{ "ebpf: over the stack", build_ebpf_stack, { true, true, true, false },
	  { NULL, NULL, NULL, "stack" } },
	{ "ebpf: user-space only", build_ebpf_userspace, { true, true, true, false },
	  { NULL, NULL, NULL, "contract" } },
};

static void test_fit_cases(void **state)
{
	struct innet_res_usage u;

	for (size_t c = 0; c < sizeof(fit_cases) / sizeof(fit_cases[0]); c++) {
		const struct fit_case *fc = &fit_cases[c];

		fc->build(&u);
		for (unsigned t = 0; t < INNET_RES_TARGET_COUNT; t++) {
			size_t n = run(&u, (enum innet_res_target)t);
			const struct innet_res_finding *fail = first_fail(n);
			bool fits = innet_res_fits(&u, (enum innet_res_target)t);

			if (fits != fc->fits[t] || (fail == NULL) != fits) {
				print_error("case '%s' on %s: fits=%d, expected %d (first fail: %s: %s)\n",
					    fc->name, innet_res_target_name((enum innet_res_target)t),
					    fits, fc->fits[t], fail ? fail->resource : "-",
					    fail ? fail->why : "-");
				fail_msg("case '%s'", fc->name);
			}
			if (fc->first_fail[t] != NULL) {
				if (strcmp(fail->resource, fc->first_fail[t]) != 0)
					fail_msg("case '%s' on %s: first fail '%s', expected '%s' (%s)",
						 fc->name,
						 innet_res_target_name((enum innet_res_target)t),
						 fail->resource, fc->first_fail[t], fail->why);
			}
			for (size_t i = 0; i < n; i++) {
				assert_int_equal(findings[i].target, t);
				assert_true(findings[i].why[0] != '\0');
			}
		}
	}
}

/* ------------------------------------------------------------------------ */
/* Details of single checks.                                                  */

static void test_profiles(void **state)
{
	const struct innet_res_profile *t1 = innet_res_profile(INNET_RES_TOFINO1);
	const struct innet_res_profile *t2 = innet_res_profile(INNET_RES_TOFINO2);
	const struct innet_res_profile *trio = innet_res_profile(INNET_RES_TRIO);
	enum innet_res_target t;

	assert_non_null(t1);
	assert_non_null(t2);
	assert_non_null(trio);
	assert_null(innet_res_profile(INNET_RES_TARGET_COUNT));
	assert_int_equal(t1->stages * t1->salus_per_stage, 48);
	assert_int_equal(t2->stages * t2->salus_per_stage, 80);
	assert_int_equal((uint64_t)t1->sram_block_rows * t1->sram_word_bits / 8, 16384);
	assert_int_equal(t1->phv_bits, 4096);
	assert_false(t1->timers || t1->emit || t2->timers || t2->emit);
	assert_true(trio->timers && trio->emit && !trio->pipeline);
	assert_int_equal(trio->thread_local_bytes, 1280);
	assert_int_equal(trio->thread_regs, 32);

	assert_int_equal(innet_res_target_parse("tofino2", &t), 0);
	assert_int_equal(t, INNET_RES_TOFINO2);
	assert_int_equal(innet_res_target_parse("trio", &t), 0);
	assert_int_equal(t, INNET_RES_TRIO);
	assert_int_equal(innet_res_target_parse("tofino3", &t), -EINVAL);
	assert_int_equal(innet_res_target_parse(NULL, &t), -EINVAL);
	assert_string_equal(innet_res_target_name(INNET_RES_TARGET_COUNT), "?");
	assert_string_equal(innet_res_status_name(INNET_RES_FAIL), "FAIL");
}

/* 12 word arrays pack 4 to a stage: 3 stages. */
static void test_stage_packing(void **state)
{
	struct innet_res_usage u;
	const struct innet_res_finding *f;
	size_t n;

	innet_res_usage_init(&u, "twelve", INNET_MODEL_PISA);
	for (int i = 0; i < 12; i++)
		assert_int_equal(innet_res_usage_add_reg(&u, "r", 4, 1024), 0);
	n = run(&u, INNET_RES_TOFINO1);
	f = find(n, "stateful alus");
	assert_non_null(f);
	assert_int_equal(f->status, INNET_RES_OK);
	assert_int_equal(f->used, 12);
	assert_int_equal(f->limit, 48);
	assert_non_null(strstr(f->why, "12 stateful ALUs in 3 stages"));
	f = find(n, "stages");
	assert_non_null(f);
	assert_int_equal(f->used, 3);
	/* 1024 x 32 bit = 256 rows of 128 bits: one block + one spare each. */
	f = find(n, "sram");
	assert_int_equal(f->used, 24);

	/* Big arrays: 40 data blocks + 1 spare each, one per stage (41+41 > 80). */
	innet_res_usage_init(&u, "wide", INNET_MODEL_PISA);
	for (int i = 0; i < 3; i++)
		assert_int_equal(innet_res_usage_add_reg(&u, "r", 8, 80 * 1024), 0);
	n = run(&u, INNET_RES_TOFINO1);
	assert_int_equal(find(n, "stages")->used, 3);
	assert_int_equal(find(n, "sram")->used, 123);
	assert_null(first_fail(n));
}

/* The example from the brief: a 1 KiB value per element. */
static void test_blob_text(void **state)
{
	struct innet_res_usage u;
	const struct innet_res_finding *f;
	size_t n;

	build_blob(&u);
	n = run(&u, INNET_RES_TOFINO1);
	f = first_fail(n);
	assert_non_null(f);
	assert_string_equal(f->resource, "register");
	assert_int_equal(f->used, 128);
	assert_int_equal(f->limit, 48);
	assert_non_null(strstr(f->why, "'value' is 1024 B per element"));
	assert_non_null(strstr(f->why, "128 64-bit words need 128 stateful ALUs > 48"));
	assert_non_null(strstr(f->why, "3 passes"));
	f = find(n, "stateful alus");
	assert_int_equal(f->status, INNET_RES_FAIL);
}

static void test_big_register_text(void **state)
{
	struct innet_res_usage u;
	const struct innet_res_finding *f;
	size_t n;

	build_big_register(&u);
	n = run(&u, INNET_RES_TOFINO1);
	f = first_fail(n);
	assert_string_equal(f->resource, "register");
	assert_int_equal(f->used, 4097);
	assert_int_equal(f->limit, 80);
	assert_non_null(strstr(f->why, "64 MiB"));
	assert_non_null(strstr(f->why, "cannot span stages"));
	f = find(n, "sram");
	assert_int_equal(f->status, INNET_RES_FAIL);

	n = run(&u, INNET_RES_TRIO);
	f = find(n, "shared memory");
	assert_int_equal(f->status, INNET_RES_OK);
	assert_int_equal(f->used, 64u << 20);
}

static void test_measured_statuses(void **state)
{
	struct innet_res_usage u;
	const struct innet_res_finding *f;
	size_t n;

	/* 60 ops over 32 arrays on Tofino2: fits the ALUs, warns per array. */
	build_60_reg_ops(&u);
	n = run(&u, INNET_RES_TOFINO2);
	assert_int_equal(find(n, "reg ops/pass")->status, INNET_RES_OK);
	f = find(n, "reg ops/array");
	assert_int_equal(f->status, INNET_RES_WARN);
	assert_int_equal(f->used, 60);
	assert_int_equal(f->limit, 32);
	n = run(&u, INNET_RES_TOFINO1);
	f = find(n, "reg ops/pass");
	assert_int_equal(f->status, INNET_RES_FAIL);
	assert_non_null(strstr(f->why, "needs 2 passes"));

	/* Recirculation warns on Tofino, is fine on Trio. */
	build_recirc(&u);
	n = run(&u, INNET_RES_TOFINO1);
	f = find(n, "recirculation");
	assert_int_equal(f->status, INNET_RES_WARN);
	assert_int_equal(f->used, 2);
	n = run(&u, INNET_RES_TRIO);
	assert_int_equal(find(n, "recirculation")->status, INNET_RES_OK);

	/* Trio: heavy packets fit, with an instruction warning. */
	build_trio_heavy(&u);
	n = run(&u, INNET_RES_TRIO);
	f = find(n, "insns/packet");
	assert_int_equal(f->status, INNET_RES_WARN);
	assert_int_equal(f->used, 40 + 300 + 4 * 200 + 8 * 2);
	assert_int_equal(find(n, "reg ops/pass")->status, INNET_RES_OK);

	/* A Trio program on Tofino warns about its model. */
	n = run(&u, INNET_RES_TOFINO1);
	assert_int_equal(find(n, "model")->status, INNET_RES_WARN);

	/* Two lookups per pass on one table. */
	build_counter(&u);
	u.m.max_table_ops = 2;
	n = run(&u, INNET_RES_TOFINO1);
	assert_int_equal(find(n, "table ops/pass")->status, INNET_RES_WARN);
}

static void test_declared_only(void **state)
{
	struct innet_res_usage u;
	const struct innet_res_finding *f;
	char line[512];
	size_t n;

	build_counter(&u);
	memset(&u.m, 0, sizeof(u.m));
	n = run(&u, INNET_RES_TOFINO1);
	/* The runtime enforces the default budget of 48: that is a guarantee. */
	f = find(n, "reg ops/pass");
	assert_int_equal(f->status, INNET_RES_OK);
	assert_int_equal(f->used, 48);
	assert_int_equal(find(n, "alu ops/pass")->status, INNET_RES_UNMEASURED);
	assert_int_equal(find(n, "recirculation")->status, INNET_RES_UNMEASURED);
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TOFINO1, line, sizeof(line)),
			 (int)strlen("tofino1: fits (declared only: nothing measured yet)"));
	assert_string_equal(line, "tofino1: fits (declared only: nothing measured yet)");
	/* eBPF: the verifier decides. Not loaded: not checked, never "fits". */
	memset(&u.ebpf, 0, sizeof(u.ebpf));
	innet_res_verdict(&u, INNET_RES_EBPF, line, sizeof(line));
	assert_non_null(strstr(line, "ebpf: not checked (the eBPF object was not loaded here"));
	u.ebpf.loaded = true;
	u.ebpf.verified_insns = 100;
	u.ebpf.insns = 50;
	u.ebpf.stack_bytes = 64;
	u.ebpf.tail_calls = 1;
	innet_res_verdict(&u, INNET_RES_EBPF, line, sizeof(line));
	assert_string_equal(line, "ebpf: fits (the kernel's verifier accepted it)");
	memset(&u.ebpf, 0, sizeof(u.ebpf));

	/* A budget above Tofino1's ALUs cannot be judged without measuring. */
	u.pisa_reg_ops_per_pass = 64;
	n = run(&u, INNET_RES_TOFINO1);
	assert_int_equal(find(n, "reg ops/pass")->status, INNET_RES_UNMEASURED);
	n = run(&u, INNET_RES_TOFINO2);
	assert_int_equal(find(n, "reg ops/pass")->status, INNET_RES_OK);
}

static void test_verdicts(void **state)
{
	struct innet_res_usage u;
	char line[512];
	int len;

	build_forward(&u);
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TOFINO1, line, sizeof(line)), 13);
	assert_string_equal(line, "tofino1: fits");
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TRIO, line, sizeof(line)), 10);
	assert_string_equal(line, "trio: fits");

	build_phv_overflow(&u);
	len = innet_res_verdict(&u, INNET_RES_TOFINO2, line, sizeof(line));
	assert_true(len > 0);
	assert_int_equal((size_t)len, strlen(line));
	assert_non_null(strstr(line, "tofino2: does not fit: phv: "));
	assert_non_null(strstr(line, "= 590 B: the headers do not fit"));

	/* snprintf semantics: truncated, NUL-terminated, full length returned. */
	char small[8];
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TOFINO2, small, sizeof(small)), len);
	assert_string_equal(small, "tofino2");
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TOFINO2, NULL, 0), len);
	assert_int_equal(innet_res_verdict(&u, INNET_RES_TARGET_COUNT, line, sizeof(line)),
			 -EINVAL);
}

/* ------------------------------------------------------------------------ */
/* Contract.                                                                  */

static void test_errors(void **state)
{
	struct innet_res_usage u;
	struct innet_res_finding few[2];
	size_t n = 0, all;

	build_counter(&u);
	assert_int_equal(innet_res_check(NULL, INNET_RES_TOFINO1, findings, 4, &n), -EINVAL);
	assert_int_equal(innet_res_check(&u, INNET_RES_TOFINO1, findings, 4, NULL), -EINVAL);
	assert_int_equal(innet_res_check(&u, (enum innet_res_target)7, findings, 4, &n), -EINVAL);
	assert_false(innet_res_fits(NULL, INNET_RES_TRIO));

	/* Too small an out: the first max written, the count reported. */
	all = run(&u, INNET_RES_TOFINO1);
	memset(few, 0, sizeof(few));
	assert_int_equal(innet_res_check(&u, INNET_RES_TOFINO1, few, 2, &n), -ENOSPC);
	assert_int_equal(n, all);
	assert_string_equal(few[0].resource, findings[0].resource);
	assert_string_equal(few[1].why, findings[1].why);
	assert_int_equal(innet_res_check(&u, INNET_RES_TOFINO1, NULL, 0, &n), -ENOSPC);
	assert_int_equal(n, all);

	/* Malformed descriptions. */
	u.regs[0].width = 0;
	assert_int_equal(innet_res_check(&u, INNET_RES_TRIO, findings, 4, &n), -EINVAL);
	assert_false(innet_res_fits(&u, INNET_RES_TRIO));
	assert_null(innet_res_report_json(&u));
	assert_int_equal(errno, EINVAL);
	build_counter(&u);
	u.n_regs = INNET_MAX_REGS + 1;
	assert_int_equal(innet_res_check(&u, INNET_RES_TRIO, findings, 4, &n), -EINVAL);

	/* Builders. */
	innet_res_usage_init(&u, NULL, INNET_MODEL_PISA);
	assert_string_equal(u.program, "");
	assert_int_equal(innet_res_usage_add_reg(&u, "x", 0, 1), -EINVAL);
	assert_int_equal(innet_res_usage_add_reg(&u, "x", 1, 0), -EINVAL);
	assert_int_equal(innet_res_usage_add_table(&u, "t", 4, 0, 1), -EINVAL);
	for (unsigned i = 0; i < INNET_MAX_REGS; i++)
		assert_int_equal(innet_res_usage_add_reg(&u, "x", 1, 1), 0);
	assert_int_equal(innet_res_usage_add_reg(&u, "x", 1, 1), -ENOSPC);
	for (unsigned i = 0; i < INNET_MAX_TABLES; i++)
		assert_int_equal(innet_res_usage_add_table(&u, "t", 1, 1, 1), 0);
	assert_int_equal(innet_res_usage_add_table(&u, "t", 1, 1, 1), -ENOSPC);

	/* Names longer than the field are cut, not overrun. */
	char longname[200];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	innet_res_usage_init(&u, longname, INNET_MODEL_TRIO);
	assert_int_equal(strlen(u.program), INNET_NAME_MAX - 1);

	/* The most findings a check can produce fit INNET_RES_MAX_FINDINGS: every
	 * register a blob (one line each), every table declared, all measured. */
	for (unsigned i = 0; i < INNET_MAX_REGS; i++)
		assert_int_equal(innet_res_usage_add_reg(&u, "blob", 16, 1), 0);
	for (unsigned i = 0; i < INNET_MAX_TABLES; i++)
		assert_int_equal(innet_res_usage_add_table(&u, "t", 1, 1, 1), 0);
	measure(&u, 1, 1, 1);
	for (unsigned t = 0; t < INNET_RES_TARGET_COUNT; t++) {
		assert_int_equal(innet_res_check(&u, (enum innet_res_target)t, findings,
						 INNET_RES_MAX_FINDINGS, &n), 0);
		assert_true(n <= INNET_RES_MAX_FINDINGS);
	}
	assert_true(n > 0);
}

static void test_text_report(void **state)
{
	struct innet_res_usage u;
	char *mem = NULL;
	size_t memlen = 0;
	FILE *f;
	int len;

	build_blob(&u);
	len = innet_res_format(NULL, 0, &u);
	assert_true(len > 0);

	char *buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(innet_res_format(buf, (size_t)len + 1, &u), len);
	assert_int_equal(strlen(buf), (size_t)len);
	assert_non_null(strstr(buf, "resources of \"kv\" (pisa model)"));
	assert_non_null(strstr(buf, "declared only: nothing measured yet"));
	assert_non_null(strstr(buf, "\ntofino1: does not fit: register: 'value'"));
	assert_non_null(strstr(buf, "\ntofino2: does not fit: register: "));
	assert_non_null(strstr(buf, "\ntrio: fits (declared only"));
	assert_non_null(strstr(buf, "tofino1  register         128/48 salus"));

	/* The FILE rendering is the same text. */
	f = open_memstream(&mem, &memlen);
	assert_non_null(f);
	assert_int_equal(innet_res_print(f, &u), 0);
	fclose(f);
	assert_string_equal(mem, buf);
	free(mem);

	/* Truncation keeps the prefix and the full length. */
	char small[32];
	assert_int_equal(innet_res_format(small, sizeof(small), &u), len);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	assert_memory_equal(small, buf, sizeof(small) - 1);
	free(buf);

	assert_int_equal(innet_res_print(NULL, &u), -EINVAL);
	assert_int_equal(innet_res_format(NULL, 10, &u), -EINVAL);
}

static void test_json_report(void **state)
{
	struct innet_res_usage u;
	json_t *j, *targets;
	size_t i;
	json_t *t;

	build_60_reg_ops(&u);
	j = innet_res_report_json(&u);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "program")), "regops60");
	assert_string_equal(json_string_value(json_object_get(j, "model")), "pisa");
	assert_true(json_is_true(json_object_get(j, "measured")));
	assert_int_equal(json_array_size(json_object_get(json_object_get(j, "declared"),
							 "registers")), 32);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "stats"),
							    "max_reg_ops")), 60);
	targets = json_object_get(j, "targets");
	assert_int_equal(json_array_size(targets), INNET_RES_TARGET_COUNT);
	json_array_foreach(targets, i, t) {
		enum innet_res_target tt;
		size_t n;

		assert_int_equal(innet_res_target_parse(json_string_value(json_object_get(t, "target")),
							&tt), 0);
		assert_int_equal(json_is_true(json_object_get(t, "fits")), innet_res_fits(&u, tt));
		n = run(&u, tt);
		assert_int_equal(json_array_size(json_object_get(t, "findings")), n);
		assert_non_null(json_string_value(json_object_get(t, "verdict")));
	}
	t = json_array_get(targets, INNET_RES_TOFINO1);
	assert_false(json_is_true(json_object_get(t, "fits")));
	json_t *f0 = json_array_get(json_object_get(t, "findings"), 0);
	assert_string_equal(json_string_value(json_object_get(f0, "resource")), "model");
	assert_string_equal(json_string_value(json_object_get(f0, "status")), "ok");
	json_decref(j);

	errno = 0;
	assert_null(innet_res_report_json(NULL));
	assert_int_equal(errno, EINVAL);
}

/* ------------------------------------------------------------------------ */
/* innet_res_usage_from_prog against a fake control plane.                   */

struct innet_cp {
	const char *name;
	const struct innet_program *program;
	struct innet_reg regs[3];
	uint32_t n_regs;
	struct innet_table_info tables[2];
	uint32_t n_tables;
	uint32_t n_groups;
	uint32_t n_timers;
	struct innet_prog_stats stats;
	int stats_err;
};

const char *innet_cp_name(const struct innet_cp *cp)
{
	return cp->name;
}

const struct innet_program *innet_cp_program(const struct innet_cp *cp)
{
	return cp->program;
}

void *innet_cp_priv(const struct innet_cp *cp)
{
	return NULL;
}

const struct innet_reg *innet_cp_reg(const struct innet_cp *cp, unsigned id)
{
	return id < cp->n_regs ? &cp->regs[id] : NULL;
}

int innet_cp_table_info(const struct innet_cp *cp, unsigned id, struct innet_table_info *info)
{
	if (id >= cp->n_tables)
		return -EINVAL;
	*info = cp->tables[id];
	return 0;
}

uint32_t innet_cp_n_groups(const struct innet_cp *cp)
{
	return cp->n_groups;
}

uint32_t innet_cp_n_timers(const struct innet_cp *cp)
{
	return cp->n_timers;
}

int innet_cp_ebpf(struct innet_cp *cp, struct innet_res_ebpf *out)
{
	memset(out, 0, sizeof(*out));   /* not loaded: the eBPF column is unmeasured */
	return 0;
}

int innet_cp_stats(struct innet_cp *cp, struct innet_prog_stats *out)
{
	if (cp->stats_err != 0)
		return cp->stats_err;
	*out = cp->stats;
	return 0;
}

static void test_from_prog(void **state)
{
	static const struct innet_program prog = {
		.name = "agg",
		.model = INNET_MODEL_TRIO,
		.pisa_reg_ops_per_pass = 0,
		.parse_bytes = 24,
	};
	struct innet_cp cp = {
		.name = "agg0",
		.program = &prog,
		.regs = { { .width = 4, .count = 1024, .name = "acc" },
			  { .width = 8, .count = 16, .name = "bitmap" },
			  { .width = 256, .count = 64, .name = "slot" } },
		.n_regs = 3,
		.tables = { { .name = "jobs", .key_size = 4, .value_size = 8, .capacity = 64 } },
		.n_tables = 1,
		.n_groups = 2,
		.n_timers = 64,
	};
	struct innet_res_usage u;

	cp.stats.rx_pkts = 10;
	cp.stats.passes = 12;
	cp.stats.reg_ops = 48;
	cp.stats.max_reg_ops = 5;
	cp.stats.max_recirc = 1;
	cp.stats.max_emitted = 3;
	cp.stats.emitted = 7;
	cp.stats.timer_fires = 9;

	assert_int_equal(innet_res_usage_from_prog(&cp, &u), 0);
	assert_string_equal(u.program, "agg0");
	assert_int_equal(u.model, INNET_MODEL_TRIO);
	assert_int_equal(u.parse_bytes, 24);
	assert_int_equal(u.n_regs, 3);
	assert_string_equal(u.regs[2].name, "slot");
	assert_int_equal(u.regs[2].width, 256);
	assert_int_equal(u.n_tables, 1);
	assert_string_equal(u.tables[0].name, "jobs");
	assert_int_equal(u.tables[0].value_size, 8);
	assert_int_equal(u.n_groups, 2);
	assert_int_equal(u.n_timers, 64);
	assert_int_equal(u.m.packets, 10);
	assert_int_equal(u.m.passes, 12);
	assert_int_equal(u.m.max_reg_ops, 5);
	assert_int_equal(u.m.max_emitted, 3);
	assert_int_equal(u.m.timer_fires, 9);
	assert_true(innet_res_fits(&u, INNET_RES_TRIO));
	assert_false(innet_res_fits(&u, INNET_RES_TOFINO1));

	cp.stats_err = -ENOENT;
	assert_int_equal(innet_res_usage_from_prog(&cp, &u), -ENOENT);
	cp.program = NULL;
	assert_int_equal(innet_res_usage_from_prog(&cp, &u), -EINVAL);
	assert_int_equal(innet_res_usage_from_prog(NULL, &u), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fit_cases),
		cmocka_unit_test(test_profiles),
		cmocka_unit_test(test_stage_packing),
		cmocka_unit_test(test_blob_text),
		cmocka_unit_test(test_big_register_text),
		cmocka_unit_test(test_measured_statuses),
		cmocka_unit_test(test_declared_only),
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_text_report),
		cmocka_unit_test(test_json_report),
		cmocka_unit_test(test_from_prog),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
