/*
 * innet/resources.h — the resource model: would this data-plane program fit a
 * Tofino1, a Tofino2 or a Trio PFE, and if not, why.
 *
 * The model is a pure function from a description of one program (struct
 * innet_res_usage) to a list of findings per target. The description has two
 * halves:
 *
 *   declared  what the program asked for in setup(): register arrays, tables,
 *             multicast groups, timers, header bytes parsed, its model and its
 *             PISA register-op budget. Known before any packet.
 *   measured  what its packets actually did, from struct innet_prog_stats:
 *             register/table/ALU operations per pass, recirculations and
 *             emitted packets per packet, timer fires. Zero packets means
 *             nothing is measured yet: per-packet checks then report
 *             "unmeasured" and the verdict says "declared only".
 *
 * Each target is a const profile (struct innet_res_profile) whose figures and
 * their sources are listed in docs/resources.md. The checks are estimates: a
 * greedy packing of register arrays and tables into pipeline stages stands in
 * for the Tofino compiler (which also honours dependencies between tables and
 * actions and may do better or worse); "fits" here means "no resource this
 * model knows about is exceeded", not "the P4 or Microcode compiler accepts
 * it". docs/resources.md states what is and is not modelled.
 *
 *   usage ──innet_res_check(u, target)──▶ findings ──▶ innet_res_print()  (text)
 *     ▲                                            └─▶ innet_res_report_json()
 *     └── innet_res_usage_from_prog(cp) / _add_reg / _add_table / _set_stats
 *
 * Errors: actions return 0 or -errno; innet_res_report_json returns NULL and
 * sets errno. Nothing here allocates except the JSON rendering; nothing keeps
 * state; every function is safe to call from any thread.
 */
#ifndef INNET_RESOURCES_H
#define INNET_RESOURCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "innet/program.h"
#include "innet/switch.h"

#ifdef __cplusplus
extern "C" {
#endif

enum innet_res_target {
	INNET_RES_TOFINO1 = 0,     /* Intel Tofino (first generation), one pipe */
	INNET_RES_TOFINO2,         /* Intel Tofino2, one pipe */
	INNET_RES_TRIO,            /* Juniper Trio, one PFE */
	INNET_RES_EBPF,            /* the XDP target: the kernel's eBPF verifier and limits */
	INNET_RES_TARGET_COUNT
};

enum innet_res_status {
	INNET_RES_OK = 0,          /* within the limit */
	INNET_RES_WARN,            /* within the limit, with a caveat worth reading */
	INNET_RES_FAIL,            /* exceeds the limit: the program does not fit */
	INNET_RES_UNMEASURED,      /* a per-packet check with nothing measured yet */
};

/*
 * One target's figures. Pipeline fields are 0 for Trio and thread fields are
 * 0 for Tofino. Sources and assumptions: docs/resources.md.
 */
struct innet_res_profile {
	enum innet_res_target target;
	const char *name;                  /* "tofino1", "tofino2", "trio" */
	const char *description;           /* one line */
	bool pipeline;                     /* PISA match-action pipeline */
	bool timers;                       /* per-flow timers (Trio timer threads) */
	bool emit;                         /* data plane may create packets */
	/* PISA pipeline, per pipe. */
	uint32_t stages;                   /* match-action stages */
	uint32_t sram_blocks_per_stage;    /* SRAM blocks (unit RAMs) per stage */
	uint32_t sram_block_rows;          /* words per SRAM block */
	uint32_t sram_word_bits;           /* bits per SRAM word */
	uint32_t tcam_blocks_per_stage;    /* TCAM blocks per stage (innet: unused) */
	uint32_t salus_per_stage;          /* stateful ALUs per stage */
	uint32_t salu_max_bits;            /* widest register element one SALU serves */
	uint32_t valus_per_stage;          /* stateless ALU ops per stage (estimate) */
	uint32_t phv_bits;                 /* packet header vector */
	uint32_t max_groups;               /* multicast groups */
	/* Trio, per thread / per PFE. */
	uint32_t thread_local_bytes;       /* local memory per thread */
	uint32_t thread_regs;              /* 64-bit general-purpose registers per thread */
	uint64_t shared_bytes;             /* shared memory budget for registers+tables+timers */
	uint32_t insns_per_packet;         /* per-packet instruction budget (assumption) */
	/* eBPF (the kernel's limits, measured from the loaded program). */
	bool ebpf;
	uint32_t verifier_insns;           /* instructions the verifier may process */
	uint32_t stack_bytes;              /* stack per program */
	uint32_t tail_calls;               /* chained tail calls */
};

/* The profile of target t, or NULL if t is not a target. */
const struct innet_res_profile *innet_res_profile(enum innet_res_target t);
/* "tofino1", "tofino2", "trio", "ebpf"; "?" for an unknown value. */
const char *innet_res_target_name(enum innet_res_target t);
/* Parse a target name (as above). 0, or -EINVAL if unknown or NULL. */
int innet_res_target_parse(const char *name, enum innet_res_target *t);
/* "ok", "warn", "FAIL", "unmeasured"; "?" for an unknown value. */
const char *innet_res_status_name(enum innet_res_status s);

/* ------------------------------------------------------------------------ */
/* The description of one program.                                           */

struct innet_res_reg {
	char name[INNET_NAME_MAX];   /* as declared */
	uint32_t width;              /* bytes per element (> 8: a blob) */
	uint32_t count;              /* elements */
};

struct innet_res_table {
	char name[INNET_NAME_MAX];   /* as declared */
	uint32_t key_size;           /* bytes */
	uint32_t value_size;         /* bytes */
	uint32_t capacity;           /* entries */
	bool tcam;                   /* matched in TCAM (a P4 table's ternary, LPM or
	                              * range key); else exact match in SRAM */
};

/* What the program's packets did (struct innet_prog_stats, condensed). */
struct innet_res_measured {
	uint64_t packets;            /* packets into the handler; 0 = nothing measured */
	uint64_t passes;             /* handler invocations incl. recirculation */
	uint64_t reg_ops;            /* register operations, total over all passes */
	uint64_t table_ops;          /* table operations, total */
	uint64_t alu_ops;            /* stateless ALU ops reported by innet_alu(), total */
	uint64_t emitted;            /* packets emitted by the data plane, total */
	uint64_t timer_fires;        /* timer callbacks run, total */
	uint32_t max_reg_ops;        /* most register operations in one pass */
	uint32_t max_table_ops;      /* most table operations in one pass */
	uint32_t max_alu_ops;        /* most ALU operations in one pass */
	uint32_t max_recirc;         /* most recirculations of one packet */
	uint32_t max_emitted;        /* most packets emitted for one packet */
};

/* The eBPF column, measured from the program as the kernel loaded it (the
 * XDP target), not estimated: src/targets/xdp/xdp.c fills it in. */
struct innet_res_ebpf {
	bool loaded;                 /* measured from a loaded eBPF object */
	char userspace[160];         /* the program cannot run in eBPF: why ("" if it can) */
	uint32_t insns;              /* instructions (after the verifier's rewrites) */
	uint32_t jited_bytes;
	uint32_t verified_insns;     /* instructions the verifier processed */
	uint32_t stack_bytes;        /* stack depth */
	uint64_t map_bytes;          /* the program's own maps (shared ones apart) */
	uint32_t n_maps;
	uint32_t tail_calls;         /* at most, per packet: dispatch + recirculation */
};

struct innet_res_usage {
	char program[INNET_NAME_MAX];        /* for the report: instance or program name */
	enum innet_model model;              /* the model the program is written for */
	uint32_t pisa_reg_ops_per_pass;      /* declared PISA budget; 0 = default (48) */
	uint32_t parse_bytes;                /* header bytes parsed beyond L2-L4 */
	struct innet_res_reg regs[INNET_MAX_REGS];
	uint32_t n_regs;
	struct innet_res_table tables[INNET_MAX_TABLES];
	uint32_t n_tables;
	uint32_t n_groups;                   /* multicast groups declared */
	uint32_t n_timers;                   /* timers declared */
	struct innet_res_measured m;         /* all zero: nothing measured */
	struct innet_res_ebpf ebpf;          /* the eBPF column: not loaded = unmeasured */
	/* A program whose tables' order is known (a P4 program's control flow):
	 * the stages its longest chain of dependent tables needs (a table that
	 * matches on, or whose action reads or writes, a field an earlier table
	 * writes goes to a later stage), and that chain; 0 = not known. */
	uint32_t dep_stages;
	char dep_chain[160];
};

/* The eBPF column of program instance cp (src/targets/xdp/xdp.c): measured if the
 * switch runs on the XDP target, else not loaded (and why, if the program can
 * never be). 0 or -EINVAL. */
int innet_cp_ebpf(struct innet_cp *cp, struct innet_res_ebpf *out);

/* Reset *u to an empty program called `name` (NULL: "") with model `model`. */
void innet_res_usage_init(struct innet_res_usage *u, const char *name, enum innet_model model);
/* Append a register array. 0, -EINVAL (width or count 0), -ENOSPC (full). */
int innet_res_usage_add_reg(struct innet_res_usage *u, const char *name, uint32_t width,
			    uint32_t count);
/* Append a table. 0, -EINVAL (a size or capacity 0), -ENOSPC (full). */
int innet_res_usage_add_table(struct innet_res_usage *u, const char *name, uint32_t key_size,
			      uint32_t value_size, uint32_t capacity);
/* Copy the measured half from a program's statistics (st may be NULL: clear). */
void innet_res_usage_set_stats(struct innet_res_usage *u, const struct innet_prog_stats *st);

/*
 * Fill *u from a live program instance: its declarations and its statistics
 * so far, using only the control-plane calls of innet/switch.h. Thread-safe
 * against the data plane (the stats are a snapshot). Registers and tables are read by id from 0 up to the first id
 * the runtime does not know. 0, -EINVAL (NULL argument, no program, or a
 * declaration with a zero size), or the error of innet_cp_stats.
 */
int innet_res_usage_from_prog(struct innet_cp *cp, struct innet_res_usage *u);

/* ------------------------------------------------------------------------ */
/* Checking.                                                                  */

#define INNET_RES_RESOURCE_MAX 24u   /* resource name, with its NUL */
#define INNET_RES_UNIT_MAX     8u
#define INNET_RES_WHY_MAX      224u
/* Upper bound on the findings of one check: the fixed checks plus one line
 * per register array and table. An `out` this long never gets -ENOSPC. */
#define INNET_RES_MAX_FINDINGS (24u + INNET_MAX_REGS + INNET_MAX_TABLES)

struct innet_res_finding {
	enum innet_res_target target;
	enum innet_res_status status;
	char resource[INNET_RES_RESOURCE_MAX]; /* e.g. "phv", "stateful alus" */
	uint64_t used;                         /* in `unit` */
	uint64_t limit;                        /* in `unit`; 0 when there is none */
	char unit[INNET_RES_UNIT_MAX];         /* "bits", "bytes", "blocks", "ops", ... */
	char why[INNET_RES_WHY_MAX];           /* one human sentence */
};

/*
 * Check u against target t. Writes up to max findings into out (out may be
 * NULL when max is 0) and the number of findings the check produced into *n.
 * Returns 0; -EINVAL if u, n or t is invalid (a register or table with a zero
 * size, counts beyond INNET_MAX_REGS/INNET_MAX_TABLES); -ENOSPC if max was too
 * small (the first max findings are written, *n says how many there were).
 */
int innet_res_check(const struct innet_res_usage *u, enum innet_res_target t,
		    struct innet_res_finding *out, size_t max, size_t *n);

/* True if no finding of the check is INNET_RES_FAIL; false on invalid input. */
bool innet_res_fits(const struct innet_res_usage *u, enum innet_res_target t);

/*
 * The verdict line for target t: "tofino1: fits", "tofino1: fits (declared
 * only: ...)" or "tofino1: does not fit: <why of the first failing check>".
 * snprintf semantics: returns the length of the whole line (truncated to
 * len - 1 characters in buf), or -EINVAL.
 */
int innet_res_verdict(const struct innet_res_usage *u, enum innet_res_target t, char *buf,
		      size_t len);

/*
 * The human report for every target: a header, one fixed-width line per
 * check, and a verdict line per target. innet_res_print writes it to f and
 * returns 0, -EINVAL or -EIO; innet_res_format writes it into buf with
 * snprintf semantics (returns the full length, or -EINVAL).
 */
int innet_res_print(FILE *f, const struct innet_res_usage *u);
int innet_res_format(char *buf, size_t len, const struct innet_res_usage *u);

/*
 * The report as JSON:
 *   { "program": .., "model": "pisa"|"trio", "measured": bool,
 *     "declared": { "parse_bytes", "pisa_reg_ops_per_pass", "groups", "timers",
 *                   "registers": [{name,width,count}], "tables": [{name,key_size,
 *                   value_size,capacity}] },
 *     "stats": { packets, passes, max_reg_ops, mean_reg_ops, ... },
 *     "targets": [ { "target", "fits", "verdict",
 *                    "findings": [{resource,status,used,limit,unit,why}] } ] }
 * A new reference (json_decref it), or NULL with errno (EINVAL, ENOMEM).
 */
json_t *innet_res_report_json(const struct innet_res_usage *u);

#ifdef __cplusplus
}
#endif
#endif /* INNET_RESOURCES_H */
