/*
 * resources.c — the resource model: checks one program's declared state and
 * measured per-packet use against a Tofino1, Tofino2 or Trio profile and says
 * what fits and why (the contract is in innet/resources.h; the figures, their
 * sources and the model's limits are in docs/resources.md).
 *
 * Everything but innet_res_usage_from_prog is a pure function of its
 * arguments. A check runs in three steps:
 *
 *   1. cost    turn each declaration into target units: register arrays into
 *              64-bit word arrays (one stateful ALU each) and SRAM blocks,
 *              tables into SRAM blocks (PISA) or bytes (Trio);
 *   2. pack    PISA only: place word arrays (first fit: a stage with a free
 *              stateful ALU and enough free SRAM; an array never spans
 *              stages), then tables (first fit, spilling over stages);
 *   3. judge   one finding per check, in a fixed order, so that the first
 *              failing finding is the verdict's reason.
 *
 * A PISA pipeline after packing, as plan->stage_* sees it:
 *
 *   stage:      0        1        2     ...    11
 *   SALUs:    [rrrr]   [rrrr]   [rr..]  ...  [....]   4 per stage
 *   SRAM:     [rrttt.] [rrtttt] [t...]  ...  [......] 80 blocks per stage
 *              r = register word array, t = table blocks, . = free
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "innet/resources.h"

/* Bytes the switch parses before the program's own header: Ethernet (14),
 * IPv4 without options (20) and UDP (8); the runtime dispatches on the UDP
 * destination port, so every target must parse them. */
#define RES_L2L4_BYTES 42u
/* Per-packet metadata the runtime carries beside the headers (struct
 * innet_pkt): meta16 + meta32[4] (18), the verdict's port, group, ip, udp,
 * src_udp and reason (14), in_port (2), recirc (1) and flags (1). */
#define RES_META_BYTES 36u
/* The PISA register-op budget a program gets when it declares 0. */
#define RES_DEFAULT_PISA_BUDGET 48u
/* PISA exact-match tables: per-entry overhead beyond key and value (valid
 * and version bits, action selector), and the cuckoo-hash occupancy we size
 * for. Both are estimates. */
#define RES_TABLE_OVERHEAD_BITS 8u
#define RES_TABLE_LOAD_PCT 80u
/* PISA register arrays: one spare SRAM block per array (a stateful memory
 * that is read and written in one pass is synthesised from single-port
 * blocks plus a spare). An assumption; see docs/resources.md. */
#define RES_REG_SPARE_BLOCKS 1u
/* Trio shared memory: per-entry table overhead and per-timer state. */
#define RES_TRIO_TABLE_OVERHEAD_BYTES 8u
#define RES_TRIO_TIMER_BYTES 24u
/* Trio per-packet instruction estimate: a fixed cost (parse, dispatch,
 * verdict) plus a cost per reported ALU op, register op and table op. */
#define RES_TRIO_INSN_FIXED 40u
#define RES_TRIO_INSN_PER_REG 4u
#define RES_TRIO_INSN_PER_TABLE 8u
/* PISA TCAM (ternary, LPM and range keys: a P4 program's tables): blocks of
 * 512 entries x 44 bits, keys wider than 44 bits take blocks side by side.
 * Commonly cited for Tofino; assumed for both generations. */
#define RES_TCAM_ROWS 512u
#define RES_TCAM_BITS 44u
/* The most stages any profile has (the packing arrays are this long). */
#define RES_MAX_STAGES 32u

static const struct innet_res_profile res_profiles[INNET_RES_TARGET_COUNT] = {
	[INNET_RES_TOFINO1] = {
		.target = INNET_RES_TOFINO1,
		.name = "tofino1",
		.description = "Intel Tofino, one pipe: 12 stages x (80 SRAM blocks, 4 stateful ALUs)",
		.pipeline = true,
		.stages = 12,
		.sram_blocks_per_stage = 80,
		.sram_block_rows = 1024,
		.sram_word_bits = 128,
		.tcam_blocks_per_stage = 24,
		.salus_per_stage = 4,
		.salu_max_bits = 64,
		.valus_per_stage = 224,
		.phv_bits = 4096,
		.max_groups = 65536,
	},
	[INNET_RES_TOFINO2] = {
		.target = INNET_RES_TOFINO2,
		.name = "tofino2",
		.description = "Intel Tofino2, one pipe: 20 stages x (80 SRAM blocks, 4 stateful ALUs)",
		.pipeline = true,
		.stages = 20,
		.sram_blocks_per_stage = 80,
		.sram_block_rows = 1024,
		.sram_word_bits = 128,
		.tcam_blocks_per_stage = 24,
		.salus_per_stage = 4,
		.salu_max_bits = 64,
		.valus_per_stage = 224,
		.phv_bits = 4096,
		.max_groups = 65536,
	},
	[INNET_RES_TRIO] = {
		.target = INNET_RES_TRIO,
		.name = "trio",
		.description = "Juniper Trio, one PFE: run-to-completion threads, shared memory",
		.pipeline = false,
		.timers = true,
		.emit = true,
		.thread_local_bytes = 1280,
		.thread_regs = 32,
		.shared_bytes = 4ull << 30,
		.insns_per_packet = 1000,
	},
	[INNET_RES_EBPF] = {
		.target = INNET_RES_EBPF,
		.name = "ebpf",
		.description = "XDP (eBPF): the kernel's verifier, measured from the loaded program",
		.pipeline = false,
		.timers = true,       /* via the user-space engine (a hand-off) */
		.emit = true,         /* likewise */
		.shared_bytes = 4ull << 30,
		.ebpf = true,
		.verifier_insns = 1000000,
		.stack_bytes = 512,
		.tail_calls = 33,
	},
};

const struct innet_res_profile *innet_res_profile(enum innet_res_target t)
{
	if ((unsigned)t >= INNET_RES_TARGET_COUNT)
		return NULL;
	return &res_profiles[t];
}

const char *innet_res_target_name(enum innet_res_target t)
{
	const struct innet_res_profile *p = innet_res_profile(t);
	return p != NULL ? p->name : "?";
}

int innet_res_target_parse(const char *name, enum innet_res_target *t)
{
	if (name == NULL || t == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < INNET_RES_TARGET_COUNT; i++) {
		if (strcmp(name, res_profiles[i].name) == 0) {
			*t = (enum innet_res_target)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *innet_res_status_name(enum innet_res_status s)
{
	switch (s) {
	case INNET_RES_OK: return "ok";
	case INNET_RES_WARN: return "warn";
	case INNET_RES_FAIL: return "FAIL";
	case INNET_RES_UNMEASURED: return "unmeasured";
	}
	return "?";
}

/* ------------------------------------------------------------------------ */
/* Small arithmetic and text helpers.                                         */

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

static const char *plural(uint64_t n)
{
	return n == 1 ? "" : "s";
}

static void copy_name(char *dst, size_t len, const char *src)
{
	size_t n = src != NULL ? strnlen(src, len - 1) : 0;
	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

/* A byte count for humans: "512 B", "16 KiB", "1.25 MiB", "4 GiB". */
static const char *fmt_bytes(char *buf, size_t len, uint64_t v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned u = 0;
	double d = (double)v;

	while (d >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
		d /= 1024.0;
		u++;
	}
	if (u == 0 || d == (double)(uint64_t)d)
		snprintf(buf, len, "%.0f %s", d, units[u]);
	else
		snprintf(buf, len, "%.2f %s", d, units[u]);
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Step 1: cost.                                                              */

/* 64-bit words a register element is split into (one stateful ALU each). */
static uint32_t reg_words(uint32_t width)
{
	return width <= 8 ? 1 : (uint32_t)div_up(width, 8);
}

/* Bits one word array stores per element: 8, 16, 32 or 64. */
static uint32_t reg_word_bits(uint32_t width)
{
	if (width <= 1)
		return 8;
	if (width <= 2)
		return 16;
	if (width <= 4)
		return 32;
	return 64;
}

/* SRAM blocks of one word array of register r (the spare included). */
static uint64_t reg_word_blocks(const struct innet_res_profile *p, const struct innet_res_reg *r)
{
	uint64_t per_word = p->sram_word_bits / reg_word_bits(r->width);
	uint64_t rows = div_up(r->count, per_word);
	return div_up(rows, p->sram_block_rows) + RES_REG_SPARE_BLOCKS;
}

/* Slots a table is sized for: capacity at RES_TABLE_LOAD_PCT occupancy. */
static uint64_t table_slots(const struct innet_res_table *t)
{
	return div_up((uint64_t)t->capacity * 100u, RES_TABLE_LOAD_PCT);
}

static uint64_t table_entry_bits(const struct innet_res_table *t)
{
	/* a TCAM table keeps its key in TCAM: SRAM holds the action data */
	return 8u * ((uint64_t)(t->tcam ? 0 : t->key_size) + t->value_size) +
	       RES_TABLE_OVERHEAD_BITS;
}

/* TCAM blocks of a ternary / LPM / range table (0 for an exact one). */
static uint64_t table_tcam_blocks(const struct innet_res_table *t)
{
	if (!t->tcam)
		return 0;
	return sat_mul(div_up(8u * (uint64_t)t->key_size, RES_TCAM_BITS),
		       div_up(t->capacity, RES_TCAM_ROWS));
}

/* SRAM blocks of an exact-match table: narrow entries packed several to a
 * word, wide entries spread over side-by-side blocks; at least one block. */
static uint64_t table_blocks(const struct innet_res_profile *p, const struct innet_res_table *t)
{
	uint64_t bits = table_entry_bits(t);
	uint64_t slots = table_slots(t);
	uint64_t blocks;

	if (bits <= p->sram_word_bits) {
		uint64_t per_word = p->sram_word_bits / bits;
		blocks = div_up(div_up(slots, per_word), p->sram_block_rows);
	} else {
		uint64_t wide = div_up(bits, p->sram_word_bits);
		blocks = sat_mul(wide, div_up(slots, p->sram_block_rows));
	}
	return blocks > 0 ? blocks : 1;
}

static uint64_t reg_bytes(const struct innet_res_reg *r)
{
	return (uint64_t)r->width * r->count;
}

/* Trio shared-memory bytes of a table. */
static uint64_t table_trio_bytes(const struct innet_res_table *t)
{
	uint64_t entry = div_up((uint64_t)t->key_size + t->value_size, 8) * 8 +
			 RES_TRIO_TABLE_OVERHEAD_BYTES;
	return sat_mul(table_slots(t), entry);
}

/* ------------------------------------------------------------------------ */
/* Step 2: pack (PISA).                                                       */

struct pisa_plan {
	uint32_t stage_salus[RES_MAX_STAGES];    /* stateful ALUs in use per stage */
	uint64_t stage_blocks[RES_MAX_STAGES];   /* SRAM blocks in use per stage */
	uint32_t words_needed;                   /* word arrays over all registers */
	uint32_t words_placed;
	uint32_t reg_stages;                     /* stages holding a register word */
	uint64_t reg_blocks;                     /* SRAM blocks of all registers */
	uint64_t table_blocks;                   /* SRAM blocks of all tables */
	uint64_t table_blocks_left;              /* table blocks that found no room */
	uint32_t stages_used;                    /* highest stage touched + 1 */
	uint64_t tcam_blocks;                    /* TCAM blocks of all tables */
	uint64_t tcam_blocks_left;               /* TCAM blocks that found no room */
	bool reg_too_big[INNET_MAX_REGS];        /* one word array exceeds a stage */
};

static void pisa_pack(const struct innet_res_profile *p, const struct innet_res_usage *u,
		      struct pisa_plan *plan)
{
	uint32_t stages = p->stages;
	bool reg_in_stage[RES_MAX_STAGES] = { false };

	memset(plan, 0, sizeof(*plan));
	for (uint32_t i = 0; i < u->n_regs; i++) {
		const struct innet_res_reg *r = &u->regs[i];
		uint32_t words = reg_words(r->width);
		uint64_t blocks = reg_word_blocks(p, r);

		plan->words_needed += words;
		plan->reg_blocks = sat_add(plan->reg_blocks, sat_mul(blocks, words));
		if (blocks > p->sram_blocks_per_stage) {
			plan->reg_too_big[i] = true;
			continue;
		}
		for (uint32_t w = 0; w < words; w++) {
			for (uint32_t s = 0; s < stages; s++) {
				if (plan->stage_salus[s] >= p->salus_per_stage ||
				    plan->stage_blocks[s] + blocks > p->sram_blocks_per_stage)
					continue;
				plan->stage_salus[s]++;
				plan->stage_blocks[s] += blocks;
				plan->words_placed++;
				if (!reg_in_stage[s]) {
					reg_in_stage[s] = true;
					plan->reg_stages++;
				}
				if (s + 1 > plan->stages_used)
					plan->stages_used = s + 1;
				break;
			}
		}
	}
	for (uint32_t i = 0; i < u->n_tables; i++) {
		uint64_t left = table_blocks(p, &u->tables[i]);

		plan->table_blocks = sat_add(plan->table_blocks, left);
		for (uint32_t s = 0; s < stages && left > 0; s++) {
			uint64_t room = p->sram_blocks_per_stage - plan->stage_blocks[s];
			uint64_t take = left < room ? left : room;
			if (take == 0)
				continue;
			plan->stage_blocks[s] += take;
			left -= take;
			if (s + 1 > plan->stages_used)
				plan->stages_used = s + 1;
		}
		plan->table_blocks_left = sat_add(plan->table_blocks_left, left);
	}
	uint64_t tcam_used[RES_MAX_STAGES] = { 0 };
	for (uint32_t i = 0; i < u->n_tables; i++) {
		uint64_t left = table_tcam_blocks(&u->tables[i]);

		plan->tcam_blocks = sat_add(plan->tcam_blocks, left);
		for (uint32_t s = 0; s < stages && left > 0; s++) {
			uint64_t room = p->tcam_blocks_per_stage - tcam_used[s];
			uint64_t take = left < room ? left : room;
			if (take == 0)
				continue;
			tcam_used[s] += take;
			left -= take;
			if (s + 1 > plan->stages_used)
				plan->stages_used = s + 1;
		}
		plan->tcam_blocks_left = sat_add(plan->tcam_blocks_left, left);
	}
}

/* ------------------------------------------------------------------------ */
/* Step 3: judge.                                                             */

struct checker {
	const struct innet_res_usage *u;
	const struct innet_res_profile *p;
	struct innet_res_finding *out;
	size_t max;
	size_t n;            /* findings produced (may exceed max) */
};

static void add(struct checker *c, enum innet_res_status st, const char *resource,
		uint64_t used, uint64_t limit, const char *unit, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

static void add(struct checker *c, enum innet_res_status st, const char *resource,
		uint64_t used, uint64_t limit, const char *unit, const char *fmt, ...)
{
	if (c->n < c->max) {
		struct innet_res_finding *f = &c->out[c->n];
		va_list ap;

		f->target = c->p->target;
		f->status = st;
		copy_name(f->resource, sizeof(f->resource), resource);
		f->used = used;
		f->limit = limit;
		copy_name(f->unit, sizeof(f->unit), unit);
		va_start(ap, fmt);
		vsnprintf(f->why, sizeof(f->why), fmt, ap);
		va_end(ap);
	}
	c->n++;
}

static bool measured(const struct innet_res_usage *u)
{
	return u->m.packets > 0;
}

static double mean_per_pass(const struct innet_res_usage *u, uint64_t total)
{
	return u->m.passes > 0 ? (double)total / (double)u->m.passes : 0.0;
}

static uint32_t pisa_budget(const struct innet_res_usage *u)
{
	return u->pisa_reg_ops_per_pass != 0 ? u->pisa_reg_ops_per_pass : RES_DEFAULT_PISA_BUDGET;
}

static void check_model(struct checker *c)
{
	const struct innet_res_usage *u = c->u;

	if (u->model == INNET_MODEL_PISA)
		add(c, INNET_RES_OK, "model", 0, 0, "", "written for the PISA model%s",
		    c->p->pipeline ? "" : ": runs to completion on a Trio thread");
	else if (c->p->pipeline)
		add(c, INNET_RES_WARN, "model", 0, 0, "",
		    "written for the Trio model: data-plane table writes are allowed there and "
		    "not counted apart, so this model cannot see them");
	else
		add(c, INNET_RES_OK, "model", 0, 0, "", "written for the Trio model");
}

static void check_timers(struct checker *c)
{
	const struct innet_res_usage *u = c->u;

	if (c->p->timers)
		add(c, INNET_RES_OK, "timers", u->n_timers, 0, "timers",
		    "%u timers declared (%s), %llu fired so far", u->n_timers,
		    c->p->ebpf ? "fired by the user-space engine's timer thread" : "timer threads",
		    (unsigned long long)u->m.timer_fires);
	else if (u->n_timers > 0 || u->m.timer_fires > 0)
		add(c, INNET_RES_FAIL, "timers", u->n_timers, 0, "timers",
		    "%u timers declared: %s has no per-flow timers (its packet generator "
		    "could emulate periodic ones; not modelled)", u->n_timers, c->p->name);
	else
		add(c, INNET_RES_OK, "timers", 0, 0, "timers", "none declared");
}

static void check_emission(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	bool emits = u->m.max_emitted > 0 || u->m.emitted > 0;

	if (c->p->emit)
		add(c, INNET_RES_OK, "emission", u->m.max_emitted, 0, "pkts",
		    "allowed on %s (measured: at most %u per packet)", c->p->name,
		    u->m.max_emitted);
	else if (emits)
		add(c, INNET_RES_FAIL, "emission", u->m.max_emitted, 0, "pkts",
		    "up to %u packets emitted per packet: a PISA pipeline only forwards, "
		    "multicasts, mirrors or recirculates the packet in hand", u->m.max_emitted);
	else if (u->model == INNET_MODEL_PISA)
		add(c, INNET_RES_OK, "emission", 0, 0, "pkts",
		    "PISA program: the runtime refuses innet_emit");
	else if (!measured(u))
		add(c, INNET_RES_UNMEASURED, "emission", 0, 0, "pkts",
		    "Trio-model program: whether it emits is not measured yet");
	else
		add(c, INNET_RES_OK, "emission", 0, 0, "pkts",
		    "no packet emitted over %llu packets", (unsigned long long)u->m.packets);
}

static void check_phv(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint64_t bytes = (uint64_t)RES_L2L4_BYTES + u->parse_bytes + RES_META_BYTES;
	uint64_t bits = bytes * 8;
	bool ok = bits <= c->p->phv_bits;

	add(c, ok ? INNET_RES_OK : INNET_RES_FAIL, "phv", bits, c->p->phv_bits, "bits",
	    "L2-L4 %u B + parsed %u B + metadata %u B = %llu B%s", RES_L2L4_BYTES,
	    u->parse_bytes, RES_META_BYTES, (unsigned long long)bytes,
	    ok ? "" : ": the headers do not fit the packet header vector");
}

static void check_pisa_registers(struct checker *c, const struct pisa_plan *plan)
{
	const struct innet_res_usage *u = c->u;
	const struct innet_res_profile *p = c->p;
	uint32_t salus = p->stages * p->salus_per_stage;
	char b1[32], b2[32];

	for (uint32_t i = 0; i < u->n_regs; i++) {
		const struct innet_res_reg *r = &u->regs[i];
		uint32_t words = reg_words(r->width);
		uint64_t blocks = reg_word_blocks(p, r);

		if (plan->reg_too_big[i]) {
			add(c, INNET_RES_FAIL, "register", blocks, p->sram_blocks_per_stage,
			    "blocks",
			    "'%s' (%u x %u B = %s%s) needs %llu SRAM blocks; one stage has %u "
			    "(%s) and a register array cannot span stages", r->name, r->count,
			    r->width, fmt_bytes(b1, sizeof(b1), reg_bytes(r)),
			    words > 1 ? ", per 64-bit word" : "", (unsigned long long)blocks,
			    p->sram_blocks_per_stage,
			    fmt_bytes(b2, sizeof(b2), (uint64_t)p->sram_blocks_per_stage *
							  p->sram_block_rows * p->sram_word_bits / 8));
		} else if (words > salus) {
			add(c, INNET_RES_FAIL, "register", words, salus, "salus",
			    "'%s' is %u B per element: %u 64-bit words need %u stateful ALUs > %u; "
			    "recirculating over %llu passes could spread it (not modelled)",
			    r->name, r->width, words, words, salus,
			    (unsigned long long)div_up(words, salus));
		} else if (words > 1) {
			add(c, INNET_RES_OK, "register", words, salus, "salus",
			    "'%s' is %u B per element: split into %u arrays of 64-bit words, "
			    "%u stateful ALUs, %llu SRAM blocks each", r->name, r->width, words,
			    words, (unsigned long long)blocks);
		}
	}

	if (plan->words_needed > salus)
		add(c, INNET_RES_FAIL, "stateful alus", plan->words_needed, salus, "salus",
		    "%u register arrays need %u stateful ALUs > %u (%u stages x %u): would need "
		    "%llu passes (recirculation, not modelled)", u->n_regs, plan->words_needed,
		    salus, p->stages, p->salus_per_stage,
		    (unsigned long long)div_up(plan->words_needed, salus));
	else if (plan->words_placed < plan->words_needed)
		add(c, INNET_RES_FAIL, "stateful alus", plan->words_needed, salus, "salus",
		    "%u register arrays need %u stateful ALUs: only %u found a stage with a free "
		    "ALU and enough SRAM", u->n_regs, plan->words_needed, plan->words_placed);
	else
		add(c, INNET_RES_OK, "stateful alus", plan->words_needed, salus, "salus",
		    "%u register array%s need%s %u stateful ALU%s in %u stage%s - fits "
		    "(%u available)", u->n_regs, plural(u->n_regs), u->n_regs == 1 ? "s" : "",
		    plan->words_needed, plural(plan->words_needed), plan->reg_stages,
		    plural(plan->reg_stages), salus);
}

static void check_pisa_tables(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	const struct innet_res_profile *p = c->p;

	for (uint32_t i = 0; i < u->n_tables; i++) {
		const struct innet_res_table *t = &u->tables[i];
		uint64_t blocks = table_blocks(p, t);

		if (t->tcam)
			add(c, INNET_RES_OK, "table", blocks, 0, "blocks",
			    "'%s': %u entries, key %u B in %llu TCAM blocks, action data %u B + "
			    "overhead (%llu bits) in %llu SRAM blocks", t->name, t->capacity,
			    t->key_size, (unsigned long long)table_tcam_blocks(t), t->value_size,
			    (unsigned long long)table_entry_bits(t), (unsigned long long)blocks);
		else
			add(c, INNET_RES_OK, "table", blocks, 0, "blocks",
			    "'%s': %u entries of %llu bits (key %u B + value %u B + overhead), sized "
			    "for %u%% load: %llu SRAM blocks", t->name, t->capacity,
			    (unsigned long long)table_entry_bits(t), t->key_size, t->value_size,
			    RES_TABLE_LOAD_PCT, (unsigned long long)blocks);
	}
}

static void check_pisa_sram(struct checker *c, const struct pisa_plan *plan)
{
	const struct innet_res_profile *p = c->p;
	uint64_t limit = (uint64_t)p->stages * p->sram_blocks_per_stage;
	uint64_t used = sat_add(plan->reg_blocks, plan->table_blocks);
	uint64_t block_bytes = (uint64_t)p->sram_block_rows * p->sram_word_bits / 8;
	char b1[32], b2[32];

	if (used > limit)
		add(c, INNET_RES_FAIL, "sram", used, limit, "blocks",
		    "registers %llu + tables %llu blocks > %llu (%u stages x %u blocks of %s)",
		    (unsigned long long)plan->reg_blocks, (unsigned long long)plan->table_blocks,
		    (unsigned long long)limit, p->stages, p->sram_blocks_per_stage,
		    fmt_bytes(b1, sizeof(b1), block_bytes));
	else if (plan->table_blocks_left > 0)
		add(c, INNET_RES_FAIL, "sram", used, limit, "blocks",
		    "%llu table blocks found no room in the stages left after the registers",
		    (unsigned long long)plan->table_blocks_left);
	else
		add(c, INNET_RES_OK, "sram", used, limit, "blocks",
		    "registers %llu + tables %llu blocks of %s (%s in all)",
		    (unsigned long long)plan->reg_blocks, (unsigned long long)plan->table_blocks,
		    fmt_bytes(b1, sizeof(b1), block_bytes),
		    fmt_bytes(b2, sizeof(b2), sat_mul(used, block_bytes)));
}

/* Only for a program with TCAM tables (a P4 program's ternary, LPM, range). */
static void check_pisa_tcam(struct checker *c, const struct pisa_plan *plan)
{
	const struct innet_res_profile *p = c->p;
	uint64_t limit = (uint64_t)p->stages * p->tcam_blocks_per_stage;

	if (plan->tcam_blocks == 0)
		return;
	if (plan->tcam_blocks_left > 0)
		add(c, INNET_RES_FAIL, "tcam", plan->tcam_blocks, limit, "blocks",
		    "ternary/LPM/range keys need %llu blocks of %u x %u bits > %llu (%u stages x %u)",
		    (unsigned long long)plan->tcam_blocks, RES_TCAM_ROWS, RES_TCAM_BITS,
		    (unsigned long long)limit, p->stages, p->tcam_blocks_per_stage);
	else
		add(c, INNET_RES_OK, "tcam", plan->tcam_blocks, limit, "blocks",
		    "ternary/LPM/range keys: %llu blocks of %u x %u bits",
		    (unsigned long long)plan->tcam_blocks, RES_TCAM_ROWS, RES_TCAM_BITS);
}

static void check_pisa_stages(struct checker *c, const struct pisa_plan *plan)
{
	const struct innet_res_usage *u = c->u;
	bool placed = plan->words_placed == plan->words_needed && plan->table_blocks_left == 0 &&
		      plan->tcam_blocks_left == 0;
	bool too_big = false;

	for (uint32_t i = 0; i < u->n_regs; i++)
		too_big |= plan->reg_too_big[i];
	if (u->dep_stages > 0) {
		uint32_t need = u->dep_stages > plan->stages_used ? u->dep_stages : plan->stages_used;
		if (u->dep_stages > c->p->stages)
			add(c, INNET_RES_FAIL, "stages", u->dep_stages, c->p->stages, "stages",
			    "dependent tables need %u stages > %u: %s", u->dep_stages, c->p->stages,
			    u->dep_chain);
		else if (!placed || too_big)
			add(c, INNET_RES_FAIL, "stages", c->p->stages, c->p->stages, "stages",
			    "greedy packing ran out of stages: not every register array and table "
			    "could be placed");
		else
			add(c, INNET_RES_OK, "stages", need, c->p->stages, "stages",
			    "dependent tables need %u (%s); memory packing uses %u", u->dep_stages,
			    u->dep_chain, plan->stages_used);
		return;
	}
	if (placed && !too_big)
		add(c, INNET_RES_OK, "stages", plan->stages_used, c->p->stages, "stages",
		    "greedy packing uses %u of %u stages (an estimate: the compiler also "
		    "orders dependent tables and register accesses)", plan->stages_used,
		    c->p->stages);
	else
		add(c, INNET_RES_FAIL, "stages", c->p->stages, c->p->stages, "stages",
		    "greedy packing ran out of stages: not every register array and table "
		    "could be placed");
}

static void check_pisa_reg_ops(struct checker *c, const struct pisa_plan *plan)
{
	const struct innet_res_usage *u = c->u;
	const struct innet_res_profile *p = c->p;
	uint32_t salus = p->stages * p->salus_per_stage;
	uint32_t max = u->m.max_reg_ops;

	if (!measured(u)) {
		uint32_t budget = pisa_budget(u);

		if (u->model == INNET_MODEL_PISA && budget <= salus)
			add(c, INNET_RES_OK, "reg ops/pass", budget, salus, "ops",
			    "nothing measured; the runtime holds this PISA program to %u per pass",
			    budget);
		else if (u->model == INNET_MODEL_PISA)
			add(c, INNET_RES_UNMEASURED, "reg ops/pass", budget, salus, "ops",
			    "nothing measured; the declared budget %u per pass is above %u",
			    budget, salus);
		else
			add(c, INNET_RES_UNMEASURED, "reg ops/pass", 0, salus, "ops",
			    "nothing measured yet");
		return;
	}
	if (max <= salus)
		add(c, INNET_RES_OK, "reg ops/pass", max, salus, "ops",
		    "max %u, mean %.1f per pass over %llu passes (one stateful ALU each)", max,
		    mean_per_pass(u, u->m.reg_ops), (unsigned long long)u->m.passes);
	else
		add(c, INNET_RES_FAIL, "reg ops/pass", max, salus, "ops",
		    "max %u register ops in one pass > %u stateful ALUs: needs %llu passes "
		    "(recirculate)", max, salus, (unsigned long long)div_up(max, salus));

	/* Each array lives at one stateful ALU, reached once per pass. */
	if (max <= plan->words_needed)
		add(c, INNET_RES_OK, "reg ops/array", max, plan->words_needed, "ops",
		    "max %u op%s per pass over %u register word array%s: at most one access "
		    "per array per pass is possible", max, plural(max), plan->words_needed,
		    plural(plan->words_needed));
	else
		add(c, INNET_RES_WARN, "reg ops/array", max, plan->words_needed, "ops",
		    "max %u ops per pass but %u register word arrays: a Tofino array is "
		    "accessed once per pass, so this fits only if the state is laid out as "
		    ">= %u arrays; otherwise it needs more passes", max, plan->words_needed, max);
}

static void check_pisa_table_ops(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint32_t max = u->m.max_table_ops;

	if (!measured(u))
		add(c, INNET_RES_UNMEASURED, "table ops/pass", 0, u->n_tables, "ops",
		    "nothing measured yet");
	else if (max <= u->n_tables)
		add(c, INNET_RES_OK, "table ops/pass", max, u->n_tables, "ops",
		    "max %u, mean %.1f per pass; each of %u table%s applied at most once", max,
		    mean_per_pass(u, u->m.table_ops), u->n_tables, plural(u->n_tables));
	else
		add(c, INNET_RES_WARN, "table ops/pass", max, u->n_tables, "ops",
		    "max %u table ops per pass on %u tables: a table is applied once per pass, "
		    "so some lookups need a copy of the table or another pass", max, u->n_tables);
}

static void check_pisa_alu_ops(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint32_t limit = c->p->stages * c->p->valus_per_stage;
	uint32_t max = u->m.max_alu_ops;

	if (!measured(u))
		add(c, INNET_RES_UNMEASURED, "alu ops/pass", 0, limit, "ops",
		    "nothing measured yet");
	else if (max == 0)
		add(c, INNET_RES_OK, "alu ops/pass", 0, limit, "ops",
		    "none reported (programs report stateless work with innet_alu(); "
		    "a path of at most 4 operations may report none)");
	else if (max <= limit)
		add(c, INNET_RES_OK, "alu ops/pass", max, limit, "ops",
		    "max %u, mean %.1f per pass, as innet_alu() reports them (estimate: %u per "
		    "stage, one per PHV container)",
		    max, mean_per_pass(u, u->m.alu_ops), c->p->valus_per_stage);
	else
		add(c, INNET_RES_FAIL, "alu ops/pass", max, limit, "ops",
		    "max %u stateless ops in one pass > %u (%u stages x %u): needs %llu passes",
		    max, limit, c->p->stages, c->p->valus_per_stage,
		    (unsigned long long)div_up(max, limit));
}

static void check_recirculation(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint32_t r = u->m.max_recirc;

	if (!measured(u))
		add(c, INNET_RES_UNMEASURED, "recirculation", 0, INNET_MAX_RECIRC, "recircs",
		    "nothing measured yet");
	else if (r == 0)
		add(c, INNET_RES_OK, "recirculation", 0, INNET_MAX_RECIRC, "recircs",
		    "no packet recirculated");
	else if (c->p->pipeline)
		add(c, INNET_RES_WARN, "recirculation", r, INNET_MAX_RECIRC, "recircs",
		    "up to %u recirculation%s: %u passes through the pipeline for such packets, "
		    "each taking recirculation bandwidth (their rate / %u)", r, plural(r), r + 1,
		    r + 1);
	else
		add(c, INNET_RES_OK, "recirculation", r, INNET_MAX_RECIRC, "recircs",
		    "up to %u recirculation%s: on Trio a loop in the same thread (counted in "
		    "instructions)", r, plural(r));
}

static void check_groups(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint32_t limit = c->p->max_groups;

	if (limit == 0)
		add(c, INNET_RES_OK, "multicast groups", u->n_groups, 0, "groups",
		    "%u declared (no hardware limit modelled)", u->n_groups);
	else if (u->n_groups <= limit)
		add(c, INNET_RES_OK, "multicast groups", u->n_groups, limit, "groups",
		    "%u declared", u->n_groups);
	else
		add(c, INNET_RES_FAIL, "multicast groups", u->n_groups, limit, "groups",
		    "%u declared > %u the replication engine offers", u->n_groups, limit);
}

static void check_pisa(struct checker *c)
{
	struct pisa_plan plan;

	pisa_pack(c->p, c->u, &plan);
	check_model(c);
	check_timers(c);
	check_emission(c);
	check_phv(c);
	check_pisa_registers(c, &plan);
	check_pisa_tables(c);
	check_pisa_sram(c, &plan);
	check_pisa_tcam(c, &plan);
	check_pisa_stages(c, &plan);
	check_pisa_reg_ops(c, &plan);
	check_pisa_table_ops(c);
	check_pisa_alu_ops(c);
	check_recirculation(c);
	check_groups(c);
}

static void check_trio_local(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint64_t limit = c->p->thread_local_bytes;
	uint64_t head = (uint64_t)RES_L2L4_BYTES + u->parse_bytes + RES_META_BYTES;
	uint64_t blob = 0, entry = 0;

	add(c, head <= limit ? INNET_RES_OK : INNET_RES_FAIL, "local memory", head, limit,
	    "bytes", "packet head (L2-L4 %u B + parsed %u B) + metadata %u B = %llu B%s",
	    RES_L2L4_BYTES, u->parse_bytes, RES_META_BYTES, (unsigned long long)head,
	    head <= limit ? "" : ": does not fit a thread's local memory");

	for (uint32_t i = 0; i < u->n_regs; i++)
		if (u->regs[i].width > 8 && u->regs[i].width > blob)
			blob = u->regs[i].width;
	for (uint32_t i = 0; i < u->n_tables; i++) {
		uint64_t e = (uint64_t)u->tables[i].key_size + u->tables[i].value_size;
		if (e > entry)
			entry = e;
	}
	uint64_t ws = head + blob + entry;
	if (ws <= limit)
		add(c, INNET_RES_OK, "working set", ws, limit, "bytes",
		    "head %llu B + largest blob element %llu B + largest table entry %llu B",
		    (unsigned long long)head, (unsigned long long)blob,
		    (unsigned long long)entry);
	else
		add(c, INNET_RES_WARN, "working set", ws, limit, "bytes",
		    "head %llu B + largest blob element %llu B + largest table entry %llu B "
		    "exceed local memory: such state must be processed in chunks from shared "
		    "memory", (unsigned long long)head, (unsigned long long)blob,
		    (unsigned long long)entry);
}

static void check_trio_shared(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint64_t regs = 0, tables = 0;
	uint64_t timers = (uint64_t)u->n_timers * RES_TRIO_TIMER_BYTES;
	char b1[32], b2[32], b3[32], b4[32];

	for (uint32_t i = 0; i < u->n_regs; i++)
		regs = sat_add(regs, reg_bytes(&u->regs[i]));
	for (uint32_t i = 0; i < u->n_tables; i++)
		tables = sat_add(tables, table_trio_bytes(&u->tables[i]));
	uint64_t used = sat_add(sat_add(regs, tables), timers);
	bool ok = used <= c->p->shared_bytes;

	add(c, ok ? INNET_RES_OK : INNET_RES_FAIL, "shared memory", used, c->p->shared_bytes,
	    "bytes", "registers %s + tables %s + timers %s = %s%s",
	    fmt_bytes(b1, sizeof(b1), regs), fmt_bytes(b2, sizeof(b2), tables),
	    fmt_bytes(b3, sizeof(b3), timers), fmt_bytes(b4, sizeof(b4), used),
	    ok ? "" : ": over the shared-memory budget");
}

static void check_trio_ops(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	uint32_t budget = c->p->insns_per_packet;

	if (!measured(u)) {
		add(c, INNET_RES_UNMEASURED, "reg ops/pass", 0, 0, "ops", "nothing measured yet");
		add(c, INNET_RES_UNMEASURED, "insns/packet", 0, budget, "insns",
		    "nothing measured yet");
		return;
	}
	add(c, INNET_RES_OK, "reg ops/pass", u->m.max_reg_ops, 0, "ops",
	    "max %u, mean %.1f per pass: no per-pass limit (run to completion, RMW engine)",
	    u->m.max_reg_ops, mean_per_pass(u, u->m.reg_ops));

	uint64_t per_pass = (uint64_t)u->m.max_alu_ops +
			    (uint64_t)RES_TRIO_INSN_PER_REG * u->m.max_reg_ops +
			    (uint64_t)RES_TRIO_INSN_PER_TABLE * u->m.max_table_ops;
	uint64_t insns = RES_TRIO_INSN_FIXED + per_pass * ((uint64_t)u->m.max_recirc + 1);

	add(c, insns <= budget ? INNET_RES_OK : INNET_RES_WARN, "insns/packet", insns, budget,
	    "insns", "estimate %u + (alu %u + %ux reg %u + %ux table %u) x %u passes%s",
	    RES_TRIO_INSN_FIXED, u->m.max_alu_ops, RES_TRIO_INSN_PER_REG, u->m.max_reg_ops,
	    RES_TRIO_INSN_PER_TABLE, u->m.max_table_ops, u->m.max_recirc + 1,
	    insns <= budget ? "" : ": over the assumed line-rate budget; it runs, slower");
}

static void check_trio(struct checker *c)
{
	check_model(c);
	check_timers(c);
	check_emission(c);
	check_trio_local(c);
	check_trio_shared(c);
	check_trio_ops(c);
	check_recirculation(c);
	check_groups(c);
}

/* The eBPF column: what the kernel measured when it loaded the program. */
static void check_ebpf(struct checker *c)
{
	const struct innet_res_usage *u = c->u;
	const struct innet_res_ebpf *e = &u->ebpf;
	const struct innet_res_profile *p = c->p;

	if (e->userspace[0] != '\0') {
		add(c, INNET_RES_FAIL, "contract", 0, 0, "", "user-space only: %s", e->userspace);
		return;
	}
	if (!e->loaded) {
		add(c, INNET_RES_UNMEASURED, "verifier", 0, p->verifier_insns, "insns",
		    "not loaded here: run the switch on the XDP target (or innet switch --check as "
		    "root) to measure");
		return;
	}
	add(c, e->verified_insns <= p->verifier_insns ? INNET_RES_OK : INNET_RES_FAIL, "verifier",
	    e->verified_insns, p->verifier_insns, "insns",
	    "the verifier processed %u instructions (%u in the program, %u bytes jited)",
	    e->verified_insns, e->insns, e->jited_bytes);
	add(c, e->stack_bytes <= p->stack_bytes ? INNET_RES_OK : INNET_RES_FAIL, "stack",
	    e->stack_bytes, p->stack_bytes, "bytes", "%u bytes of stack (the limit is %u)",
	    e->stack_bytes, p->stack_bytes);
	add(c, INNET_RES_OK, "maps", e->map_bytes, 0, "bytes",
	    "%u maps of its own, %llu bytes (registers, tables, config, counters)", e->n_maps,
	    (unsigned long long)e->map_bytes);
	add(c, e->tail_calls <= p->tail_calls ? INNET_RES_OK : INNET_RES_FAIL, "tail calls",
	    e->tail_calls, p->tail_calls, "calls",
	    "at most %u per packet (one dispatch, %u recirculations)", e->tail_calls,
	    e->tail_calls ? e->tail_calls - 1 : 0);
	check_timers(c);
	check_emission(c);
}

static bool usage_valid(const struct innet_res_usage *u)
{
	if (u->n_regs > INNET_MAX_REGS || u->n_tables > INNET_MAX_TABLES)
		return false;
	if (u->model != INNET_MODEL_PISA && u->model != INNET_MODEL_TRIO)
		return false;
	for (uint32_t i = 0; i < u->n_regs; i++)
		if (u->regs[i].width == 0 || u->regs[i].count == 0)
			return false;
	for (uint32_t i = 0; i < u->n_tables; i++)
		if (u->tables[i].key_size == 0 || u->tables[i].value_size == 0 ||
		    u->tables[i].capacity == 0)
			return false;
	return true;
}

int innet_res_check(const struct innet_res_usage *u, enum innet_res_target t,
		    struct innet_res_finding *out, size_t max, size_t *n)
{
	const struct innet_res_profile *p = innet_res_profile(t);
	struct checker c = { .u = u, .p = p, .out = out, .max = out != NULL ? max : 0 };

	if (u == NULL || n == NULL || p == NULL || !usage_valid(u))
		return -EINVAL;
	if (p->ebpf)
		check_ebpf(&c);
	else if (p->pipeline)
		check_pisa(&c);
	else
		check_trio(&c);
	*n = c.n;
	return c.n > c.max ? -ENOSPC : 0;
}

/* Run a check into a buffer that always suffices. */
static int check_all(const struct innet_res_usage *u, enum innet_res_target t,
		     struct innet_res_finding *f, size_t *n)
{
	return innet_res_check(u, t, f, INNET_RES_MAX_FINDINGS, n);
}

static const struct innet_res_finding *first_fail(const struct innet_res_finding *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (f[i].status == INNET_RES_FAIL)
			return &f[i];
	return NULL;
}

bool innet_res_fits(const struct innet_res_usage *u, enum innet_res_target t)
{
	struct innet_res_finding f[INNET_RES_MAX_FINDINGS];
	size_t n;

	if (check_all(u, t, f, &n) != 0)
		return false;
	return first_fail(f, n) == NULL;
}

static int verdict_of(const struct innet_res_usage *u, enum innet_res_target t,
		      const struct innet_res_finding *f, size_t n, char *buf, size_t len)
{
	const struct innet_res_finding *fail = first_fail(f, n);
	const char *name = innet_res_target_name(t);

	if (fail != NULL)
		return snprintf(buf, len, "%s: does not fit: %s: %s", name, fail->resource,
				fail->why);
	/* eBPF: what decides is the verifier, not the packets seen so far. */
	if (t == INNET_RES_EBPF && !u->ebpf.loaded)
		return snprintf(buf, len, "%s: not checked (the eBPF object was not loaded here: run "
				"the switch on the XDP target, or innet switch --check as root)", name);
	if (t == INNET_RES_EBPF)
		return snprintf(buf, len, "%s: fits (the kernel's verifier accepted it)", name);
	if (!measured(u))
		return snprintf(buf, len, "%s: fits (declared only: nothing measured yet)", name);
	return snprintf(buf, len, "%s: fits", name);
}

int innet_res_verdict(const struct innet_res_usage *u, enum innet_res_target t, char *buf,
		      size_t len)
{
	struct innet_res_finding f[INNET_RES_MAX_FINDINGS];
	size_t n;
	int err;

	if (buf == NULL && len != 0)
		return -EINVAL;
	err = check_all(u, t, f, &n);
	if (err != 0)
		return err;
	return verdict_of(u, t, f, n, buf, len);
}

/* ------------------------------------------------------------------------ */
/* Rendering.                                                                 */

/* Text goes to a FILE or into a buffer (snprintf semantics). */
struct sink {
	FILE *f;
	char *buf;
	size_t cap;
	size_t len;      /* characters produced so far (may exceed cap) */
	bool err;
};

static void sink_printf(struct sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sink_printf(struct sink *s, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	if (s->f != NULL) {
		r = vfprintf(s->f, fmt, ap);
	} else {
		size_t room = s->len < s->cap ? s->cap - s->len : 0;
		r = vsnprintf(room > 0 ? s->buf + s->len : NULL, room, fmt, ap);
	}
	va_end(ap);
	if (r < 0)
		s->err = true;
	else
		s->len += (size_t)r;
}

static const char *model_name(enum innet_model m)
{
	return m == INNET_MODEL_TRIO ? "trio" : "pisa";
}

static int render(struct sink *s, const struct innet_res_usage *u)
{
	struct innet_res_finding f[INNET_RES_MAX_FINDINGS];

	if (!usage_valid(u))
		return -EINVAL;
	sink_printf(s, "resources of \"%s\" (%s model): %u register array%s, %u table%s, "
		    "%u multicast group%s, %u timer%s, parses %u B\n", u->program,
		    model_name(u->model), u->n_regs, plural(u->n_regs), u->n_tables,
		    plural(u->n_tables), u->n_groups, plural(u->n_groups), u->n_timers,
		    plural(u->n_timers), u->parse_bytes);
	if (measured(u))
		sink_printf(s, "measured over %llu packets, %llu passes\n",
			    (unsigned long long)u->m.packets, (unsigned long long)u->m.passes);
	else
		sink_printf(s, "declared only: nothing measured yet\n");

	for (unsigned t = 0; t < INNET_RES_TARGET_COUNT; t++) {
		char verdict[INNET_RES_WHY_MAX + 64];
		size_t n;
		int err = check_all(u, (enum innet_res_target)t, f, &n);

		if (err != 0)
			return err;
		sink_printf(s, "\n%-8s %-16s %-24s %-10s %s\n", "target", "resource",
			    "used/limit", "status", "why");
		for (size_t i = 0; i < n; i++) {
			char use[40];

			if (f[i].limit != 0)
				snprintf(use, sizeof(use), "%llu/%llu %s",
					 (unsigned long long)f[i].used,
					 (unsigned long long)f[i].limit, f[i].unit);
			else if (f[i].unit[0] != '\0')
				snprintf(use, sizeof(use), "%llu %s",
					 (unsigned long long)f[i].used, f[i].unit);
			else
				snprintf(use, sizeof(use), "-");
			sink_printf(s, "%-8s %-16s %-24s %-10s %s\n", res_profiles[t].name,
				    f[i].resource, use, innet_res_status_name(f[i].status),
				    f[i].why);
		}
		verdict_of(u, (enum innet_res_target)t, f, n, verdict, sizeof(verdict));
		sink_printf(s, "%s\n", verdict);
	}
	return s->err ? -EIO : 0;
}

int innet_res_print(FILE *f, const struct innet_res_usage *u)
{
	struct sink s = { .f = f };

	if (f == NULL || u == NULL)
		return -EINVAL;
	return render(&s, u);
}

int innet_res_format(char *buf, size_t len, const struct innet_res_usage *u)
{
	struct sink s = { .buf = buf, .cap = len };
	int err;

	if (u == NULL || (buf == NULL && len != 0))
		return -EINVAL;
	if (len > 0)
		buf[0] = '\0';
	err = render(&s, u);
	if (err != 0)
		return err;
	return s.len > (size_t)INT_MAX ? -EOVERFLOW : (int)s.len;
}

/* json_object_set_new that remembers a failure instead of returning it. */
static void jset(json_t *obj, const char *key, json_t *val, bool *ok)
{
	if (val == NULL || json_object_set_new(obj, key, val) != 0)
		*ok = false;
}

static void jappend(json_t *arr, json_t *val, bool *ok)
{
	if (val == NULL || json_array_append_new(arr, val) != 0)
		*ok = false;
}

static json_t *jint(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static json_t *json_declared(const struct innet_res_usage *u, bool *ok)
{
	json_t *d = json_object(), *regs = json_array(), *tables = json_array();

	if (d == NULL || regs == NULL || tables == NULL) {
		json_decref(d);
		json_decref(regs);
		json_decref(tables);
		*ok = false;
		return NULL;
	}
	jset(d, "parse_bytes", jint(u->parse_bytes), ok);
	jset(d, "pisa_reg_ops_per_pass", jint(pisa_budget(u)), ok);
	jset(d, "groups", jint(u->n_groups), ok);
	jset(d, "timers", jint(u->n_timers), ok);
	for (uint32_t i = 0; i < u->n_regs; i++)
		jappend(regs, json_pack("{s:s, s:I, s:I}", "name", u->regs[i].name, "width",
					(json_int_t)u->regs[i].width, "count",
					(json_int_t)u->regs[i].count), ok);
	for (uint32_t i = 0; i < u->n_tables; i++)
		jappend(tables, json_pack("{s:s, s:I, s:I, s:I, s:b}", "name", u->tables[i].name,
					  "key_size", (json_int_t)u->tables[i].key_size,
					  "value_size", (json_int_t)u->tables[i].value_size,
					  "capacity", (json_int_t)u->tables[i].capacity,
					  "tcam", u->tables[i].tcam), ok);
	jset(d, "registers", regs, ok);
	jset(d, "tables", tables, ok);
	if (u->dep_stages > 0) {
		jset(d, "dependency_stages", jint(u->dep_stages), ok);
		jset(d, "dependency_chain", json_string(u->dep_chain), ok);
	}
	return d;
}

static json_t *json_stats(const struct innet_res_usage *u, bool *ok)
{
	json_t *s = json_object();

	if (s == NULL) {
		*ok = false;
		return NULL;
	}
	jset(s, "packets", jint(u->m.packets), ok);
	jset(s, "passes", jint(u->m.passes), ok);
	jset(s, "max_reg_ops", jint(u->m.max_reg_ops), ok);
	jset(s, "mean_reg_ops", json_real(mean_per_pass(u, u->m.reg_ops)), ok);
	jset(s, "max_table_ops", jint(u->m.max_table_ops), ok);
	jset(s, "mean_table_ops", json_real(mean_per_pass(u, u->m.table_ops)), ok);
	jset(s, "max_alu_ops", jint(u->m.max_alu_ops), ok);
	jset(s, "mean_alu_ops", json_real(mean_per_pass(u, u->m.alu_ops)), ok);
	jset(s, "max_recirc", jint(u->m.max_recirc), ok);
	jset(s, "max_emitted", jint(u->m.max_emitted), ok);
	jset(s, "emitted", jint(u->m.emitted), ok);
	jset(s, "timer_fires", jint(u->m.timer_fires), ok);
	return s;
}

static json_t *json_target(const struct innet_res_usage *u, enum innet_res_target t, bool *ok)
{
	struct innet_res_finding f[INNET_RES_MAX_FINDINGS];
	char verdict[INNET_RES_WHY_MAX + 64];
	json_t *o, *arr;
	size_t n;

	if (check_all(u, t, f, &n) != 0) {
		*ok = false;
		return NULL;
	}
	verdict_of(u, t, f, n, verdict, sizeof(verdict));
	o = json_object();
	arr = json_array();
	if (o == NULL || arr == NULL) {
		json_decref(o);
		json_decref(arr);
		*ok = false;
		return NULL;
	}
	jset(o, "target", json_string(innet_res_target_name(t)), ok);
	jset(o, "fits", json_boolean(first_fail(f, n) == NULL), ok);
	jset(o, "verdict", json_string(verdict), ok);
	for (size_t i = 0; i < n; i++) {
		json_t *j = json_object();

		if (j != NULL) {
			jset(j, "resource", json_string(f[i].resource), ok);
			jset(j, "status", json_string(innet_res_status_name(f[i].status)), ok);
			jset(j, "used", jint(f[i].used), ok);
			jset(j, "limit", jint(f[i].limit), ok);
			jset(j, "unit", json_string(f[i].unit), ok);
			jset(j, "why", json_string(f[i].why), ok);
		}
		jappend(arr, j, ok);
	}
	jset(o, "findings", arr, ok);
	return o;
}

json_t *innet_res_report_json(const struct innet_res_usage *u)
{
	json_t *root, *targets;
	bool ok = true;

	if (u == NULL || !usage_valid(u)) {
		errno = EINVAL;
		return NULL;
	}
	root = json_object();
	targets = json_array();
	if (root == NULL || targets == NULL) {
		json_decref(root);
		json_decref(targets);
		errno = ENOMEM;
		return NULL;
	}
	jset(root, "program", json_string(u->program), &ok);
	jset(root, "model", json_string(model_name(u->model)), &ok);
	jset(root, "measured", json_boolean(measured(u)), &ok);
	jset(root, "declared", json_declared(u, &ok), &ok);
	jset(root, "stats", json_stats(u, &ok), &ok);
	for (unsigned t = 0; t < INNET_RES_TARGET_COUNT; t++)
		jappend(targets, json_target(u, (enum innet_res_target)t, &ok), &ok);
	jset(root, "targets", targets, &ok);
	if (!ok) {
		json_decref(root);
		errno = ENOMEM;
		return NULL;
	}
	return root;
}

/* ------------------------------------------------------------------------ */
/* Building a usage.                                                          */

void innet_res_usage_init(struct innet_res_usage *u, const char *name, enum innet_model model)
{
	memset(u, 0, sizeof(*u));
	copy_name(u->program, sizeof(u->program), name);
	u->model = model;
}

int innet_res_usage_add_reg(struct innet_res_usage *u, const char *name, uint32_t width,
			    uint32_t count)
{
	struct innet_res_reg *r;

	if (u == NULL || width == 0 || count == 0)
		return -EINVAL;
	if (u->n_regs >= INNET_MAX_REGS)
		return -ENOSPC;
	r = &u->regs[u->n_regs++];
	copy_name(r->name, sizeof(r->name), name);
	r->width = width;
	r->count = count;
	return 0;
}

int innet_res_usage_add_table(struct innet_res_usage *u, const char *name, uint32_t key_size,
			      uint32_t value_size, uint32_t capacity)
{
	struct innet_res_table *t;

	if (u == NULL || key_size == 0 || value_size == 0 || capacity == 0)
		return -EINVAL;
	if (u->n_tables >= INNET_MAX_TABLES)
		return -ENOSPC;
	t = &u->tables[u->n_tables++];
	copy_name(t->name, sizeof(t->name), name);
	t->key_size = key_size;
	t->value_size = value_size;
	t->capacity = capacity;
	return 0;
}

void innet_res_usage_set_stats(struct innet_res_usage *u, const struct innet_prog_stats *st)
{
	memset(&u->m, 0, sizeof(u->m));
	if (st == NULL)
		return;
	u->m.packets = st->rx_pkts;
	u->m.passes = st->passes;
	u->m.reg_ops = st->reg_ops;
	u->m.table_ops = st->table_ops;
	u->m.alu_ops = st->alu_ops;
	u->m.emitted = st->emitted;
	u->m.timer_fires = st->timer_fires;
	u->m.max_reg_ops = st->max_reg_ops;
	u->m.max_table_ops = st->max_table_ops;
	u->m.max_alu_ops = st->max_alu_ops;
	u->m.max_recirc = st->max_recirc;
	u->m.max_emitted = st->max_emitted;
}

int innet_res_usage_from_prog(struct innet_cp *cp, struct innet_res_usage *u)
{
	const struct innet_program *prog;
	struct innet_prog_stats st;
	int err;

	if (cp == NULL || u == NULL)
		return -EINVAL;
	prog = innet_cp_program(cp);
	if (prog == NULL)
		return -EINVAL;
	innet_res_usage_init(u, innet_cp_name(cp), prog->model);
	u->pisa_reg_ops_per_pass = prog->pisa_reg_ops_per_pass;
	u->parse_bytes = prog->parse_bytes;
	for (unsigned id = 0; id < INNET_MAX_REGS; id++) {
		const struct innet_reg *r = innet_cp_reg(cp, id);

		if (r == NULL)
			break;
		err = innet_res_usage_add_reg(u, r->name, r->width, r->count);
		if (err != 0)
			return err;
	}
	for (unsigned id = 0; id < INNET_MAX_TABLES; id++) {
		struct innet_table_info info;

		if (innet_cp_table_info(cp, id, &info) != 0)
			break;
		err = innet_res_usage_add_table(u, info.name, info.key_size, info.value_size,
						info.capacity);
		if (err != 0)
			return err;
	}
	u->n_groups = innet_cp_n_groups(cp);
	u->n_timers = innet_cp_n_timers(cp);
	err = innet_cp_stats(cp, &st);
	if (err != 0)
		return err;
	innet_res_usage_set_stats(u, &st);
	/* the eBPF column, from the loaded object (XDP target) or the reason
	 * the program has none */
	err = innet_cp_ebpf(cp, &u->ebpf);
	if (err == 0 && prog->resources != NULL)
		err = prog->resources(cp, innet_cp_priv(cp), u);
	return err;
}
