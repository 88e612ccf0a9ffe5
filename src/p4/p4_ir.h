/*
 * p4_ir.h — a P4 program as innet reads it: the intermediate representation
 * the loader (p4_load.c) builds from the BMv2 JSON that p4c-bm2-ss writes
 * for the v1model architecture, and the code generator (p4_gen.c) turns into
 * an innet data path (restricted C against innet/dp.h).
 *
 *   prog.json ──p4_load──▶ struct p4_prog ──p4_gen──▶ NAME_dp.c ──p4_build──▶ .so + .bpf.o
 *   (BMv2 JSON 2.x)        (names resolved to          (one C source for both
 *                           indices, widths checked,     targets: docs/p4.md)
 *                           unsupported constructs
 *                           refused, with where)
 *
 * Everything lives in one arena (struct p4_prog.arena) and is freed with
 * p4_prog_free(). Names are kept as the JSON spells them (the control plane
 * addresses tables, actions, registers by them). Indices are into the arrays
 * of struct p4_prog; -1 means none.
 *
 * Widths: fields of any width are loaded; the generator computes with 64-bit
 * integers up to 64 bits and 128-bit ones up to 128, and refuses arithmetic
 * beyond (a wider field may still be extracted, emitted, copied and matched
 * exactly). The loader refuses what the generator cannot do, with a message
 * that names the construct and where it is (action, table, parser state).
 */
#ifndef INNET_P4_IR_H
#define INNET_P4_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define P4_MAX_WIDTH      128u   /* bits of arithmetic the generator supports */
#define P4_MAX_FIELD_BITS 2048u  /* widest field extracted / copied */
#define P4_DROP_PORT      511u   /* simple_switch's default drop port */

typedef unsigned __int128 p4_u128;

/* ------------------------------------------------------------------------ */
/* Expressions (BMv2's "type value objects").                                 */

enum p4_ekind {
	P4E_FIELD,          /* hdr.field: header index h, field index f */
	P4E_CONST,          /* an integer constant (val, neg: a negative value) */
	P4E_BOOL,           /* true / false (val 1 / 0) */
	P4E_RUNTIME,        /* action parameter i (runtime_data) */
	P4E_LOCAL,          /* local i (runtime data inside an expression) */
	P4E_OP,             /* op(a, b[, c]) */
	P4E_HEADER,         /* a header instance h (valid, assign_header, ...) */
	P4E_STACK,          /* a header stack s */
	P4E_UNION,          /* a header union u */
	P4E_UNION_STACK,    /* a header union stack s */
	P4E_LOOKAHEAD,      /* parser: bits [off, off + width) from the cursor */
	P4E_STACK_FIELD,    /* the field f of the last valid element of stack s */
	P4E_UNION_STACK_FIELD, /* field f of member m of the last valid union of stack s */
	P4E_REGISTER_REF,   /* register array r at index a (parser 'set' source) */
	P4E_CALC,           /* a named calculation i */
	P4E_METER,          /* meter array i */
	P4E_COUNTER,        /* counter array i */
	P4E_REGARRAY,       /* register array i */
	P4E_EXTERN,         /* extern instance i */
	P4E_STRING,         /* a string (log_msg) */
	P4E_PARAMS,         /* parameters_vector: list[n] */
	P4E_FIELD_LIST,     /* field list id i (clone, resubmit, recirculate, digest) */
};

enum p4_op {
	P4OP_ADD, P4OP_SUB, P4OP_MUL, P4OP_SHL, P4OP_SHR,
	P4OP_EQ, P4OP_NE, P4OP_GT, P4OP_GE, P4OP_LT, P4OP_LE,
	P4OP_LAND, P4OP_LOR, P4OP_LNOT,
	P4OP_AND, P4OP_OR, P4OP_XOR, P4OP_NOT,
	P4OP_NEG,           /* unary minus (p4c: "-" with left null) */
	P4OP_VALID, P4OP_VALID_UNION,
	P4OP_D2B, P4OP_B2D,
	P4OP_TWO_COMP_MOD, P4OP_SAT_CAST, P4OP_USAT_CAST,
	P4OP_TERNARY,       /* cond ? a : b (c = cond) */
	P4OP_DEREF_STACK,   /* stack[a]: a header */
	P4OP_LAST_STACK_INDEX, P4OP_SIZE_STACK,
	P4OP_ACCESS_FIELD,  /* header(a).field number n */
	P4OP_DEREF_UNION_STACK, P4OP_ACCESS_UNION_HEADER,
	P4OP_DIV, P4OP_MOD,
};

struct p4_expr {
	enum p4_ekind kind;
	enum p4_op op;             /* P4E_OP */
	int h, f;                  /* header / field (P4E_FIELD, STACK_FIELD: f) */
	int idx;                   /* stack, union, runtime index, object index, access offset */
	int member;                /* P4E_UNION_STACK_FIELD: union member */
	p4_u128 val;               /* P4E_CONST magnitude, P4E_BOOL */
	bool neg;                  /* P4E_CONST: negative */
	uint32_t off, width;       /* P4E_LOOKAHEAD (bits) */
	const char *str;           /* P4E_STRING */
	struct p4_expr *a, *b, *c; /* operands */
	struct p4_expr **list;     /* P4E_PARAMS */
	uint32_t n_list;
};

/* ------------------------------------------------------------------------ */
/* Headers.                                                                   */

struct p4_field {
	const char *name;
	uint32_t width;            /* bits; 0 for a varbit (see htype) */
	bool is_signed;
	bool varbit;
	uint32_t bit_off;          /* offset in the header (varbit: of its start) */
};

struct p4_htype {
	const char *name;
	int id;
	struct p4_field *fields;
	uint32_t n_fields;
	uint32_t fixed_bits;       /* all fields but the varbit */
	int varbit;                /* index of the varbit field, or -1 */
	uint32_t max_bytes;        /* with a varbit: the most bytes the header takes */
};

struct p4_header {
	const char *name;
	int id;
	int type;                  /* index into htypes */
	bool metadata;
	int stack, stack_index;    /* its stack and place in it, or -1 */
	int onion, onion_index;    /* its header union and place in it, or -1 */
};

struct p4_stack {
	const char *name;
	int id;
	int type;
	int *headers;              /* header indices, [0] first */
	uint32_t size;
};

struct p4_union {
	const char *name;
	int id;
	int *headers;              /* member headers */
	uint32_t n;
	int stack, stack_index;    /* its union stack and place, or -1 */
};

struct p4_union_stack {
	const char *name;
	int id;
	int *unions;
	uint32_t size;
};

/* ------------------------------------------------------------------------ */
/* Actions and primitives.                                                    */

enum p4_prim_kind {
	P4P_ASSIGN, P4P_ASSIGN_VL, P4P_ASSIGN_HEADER, P4P_ASSIGN_UNION,
	P4P_ASSIGN_HEADER_STACK, P4P_ASSIGN_UNION_STACK,
	P4P_PUSH, P4P_POP,
	P4P_JUMP, P4P_JUMP_IF_ZERO,
	P4P_EXIT, P4P_ASSERT, P4P_ASSUME, P4P_LOG_MSG,
	P4P_MARK_TO_DROP, P4P_DROP,
	P4P_ADD_HEADER, P4P_REMOVE_HEADER,
	P4P_COUNT, P4P_EXECUTE_METER,
	P4P_REGISTER_READ, P4P_REGISTER_WRITE,
	P4P_HASH,              /* modify_field_with_hash_based_offset */
	P4P_RANDOM,            /* modify_field_rng_uniform */
	P4P_CLONE_I2E, P4P_CLONE_E2E,
	P4P_RESUBMIT, P4P_RECIRCULATE,
	P4P_DIGEST,            /* generate_digest */
	P4P_TRUNCATE,
	P4P_NO_OP,
	P4P_DIRECT_METER_READ, /* an action's m.read(): done by the table (see below) */
};

struct p4_prim {
	enum p4_prim_kind kind;
	const char *op;            /* as in the JSON */
	struct p4_expr **args;
	uint32_t n_args;
	const char *where;         /* source fragment, for messages */
};

struct p4_param {
	const char *name;
	uint32_t width;            /* bits */
	uint32_t byte_off;         /* in the action data (each param byte-padded) */
};

struct p4_action {
	const char *name;
	int id;
	struct p4_param *params;
	uint32_t n_params;
	uint32_t data_bytes;       /* action data: the params, each ceil(width/8) bytes */
	struct p4_prim *prims;
	uint32_t n_prims;
};

/* ------------------------------------------------------------------------ */
/* Parser and deparser.                                                       */

enum p4_pop_kind { P4PO_EXTRACT, P4PO_EXTRACT_VL, P4PO_SET, P4PO_VERIFY, P4PO_ADVANCE,
		   P4PO_PRIMITIVE };

struct p4_parse_op {
	enum p4_pop_kind kind;
	/* EXTRACT(_VL): what (a header, or the next of a stack / union stack) */
	int header;                /* regular: header index, else -1 */
	int stack;                 /* extract into the next element of this stack, or -1 */
	int union_stack, union_member; /* ... of this union stack's member, or -1 */
	struct p4_expr *a, *b;     /* EXTRACT_VL: a = length (bits); SET: a = dst, b = src;
	                            * VERIFY: a = cond, b = error; ADVANCE: a = bits */
	struct p4_prim prim;       /* PRIMITIVE */
};

enum p4_trans_kind { P4T_DEFAULT, P4T_VALUE, P4T_VSET };

struct p4_transition {
	enum p4_trans_kind kind;
	uint8_t *value, *mask;     /* key bytes (byte-padded key elements); mask NULL = all */
	int vset;                  /* P4T_VSET */
	int next;                  /* state index, -1 = accept */
};

struct p4_pstate {
	const char *name;
	int id;
	struct p4_parse_op *ops;
	uint32_t n_ops;
	struct p4_expr **key;      /* field, stack_field, union_stack_field, lookahead */
	uint32_t *key_bits;        /* width of each key element */
	uint32_t n_key;
	uint32_t key_bytes;        /* sum of byte-padded widths */
	struct p4_transition *trans;
	uint32_t n_trans;
};

struct p4_vset {
	const char *name;
	int id;
	uint32_t width;            /* compressed_bitwidth */
	uint32_t max_size;
};

/* ------------------------------------------------------------------------ */
/* Stateful objects.                                                          */

struct p4_register {
	const char *name;
	int id;
	uint32_t size;
	uint32_t width;            /* bits */
};

struct p4_counter {
	const char *name;
	int id;
	uint32_t size;
	bool direct;
	int table;                 /* direct: its table (index into tables), else -1 */
};

struct p4_meter {
	const char *name;
	int id;
	uint32_t size;
	bool bytes;                /* "bytes" (else packets) */
	uint32_t rate_count;       /* 2 for the two-rate three-colour meter */
	bool direct;
	int table;                 /* direct: its table */
	struct p4_expr *result;    /* direct: the field the colour goes to */
};

enum p4_algo {
	P4A_CRC16, P4A_CRC32, P4A_CRC_CCITT, P4A_CSUM16, P4A_IDENTITY, P4A_XOR16,
	P4A_XXH64, P4A_CRC8_CUSTOM, P4A_CRC16_CUSTOM, P4A_CRC32_CUSTOM, P4A_CRC64_CUSTOM,
	P4A_XOR32, P4A_RANDOM, P4A_ROUND_ROBIN,
};

struct p4_calc_input {
	enum { P4CI_FIELD, P4CI_CONST, P4CI_HEADER, P4CI_PAYLOAD } kind;
	struct p4_expr *e;         /* field / header */
	p4_u128 val;               /* constant */
	uint32_t bits;             /* constant's width */
};

struct p4_calc {
	const char *name;
	int id;
	enum p4_algo algo;
	const char *algo_name;
	struct p4_calc_input *in;
	uint32_t n_in;
	bool payload;              /* has a payload input (the last one) */
};

struct p4_checksum {
	const char *name;
	int id;
	struct p4_expr *target;    /* field written / compared */
	int calc;
	bool update, verify;
	struct p4_expr *cond;      /* NULL = always */
};

struct p4_field_list {
	const char *name;
	int id;
	struct p4_expr **fields;   /* P4E_FIELD each */
	uint32_t n;
};

struct p4_learn_list {
	const char *name;
	int id;
	struct p4_expr **fields;
	uint32_t n;
	uint32_t bytes;            /* the digest's bytes: each field byte-padded */
};

/* ------------------------------------------------------------------------ */
/* Pipelines.                                                                 */

enum p4_node_kind { P4N_NONE = 0, P4N_TABLE, P4N_COND };

struct p4_node {
	enum p4_node_kind kind;
	int idx;                   /* into the pipeline's tables / conds */
};

enum p4_match { P4M_EXACT, P4M_LPM, P4M_TERNARY, P4M_RANGE, P4M_OPTIONAL, P4M_VALID };
enum p4_table_class { P4TC_NOKEY, P4TC_EXACT, P4TC_LPM, P4TC_TERNARY };
enum p4_table_impl { P4TI_SIMPLE, P4TI_INDIRECT, P4TI_INDIRECT_WS };

struct p4_key {
	enum p4_match match;
	struct p4_expr *target;    /* a field, or a header (valid) */
	uint8_t *mask;             /* static mask (key bytes), or NULL */
	const char *name;
	uint32_t bits;             /* width of the key element */
	uint32_t bytes;            /* byte-padded */
	uint32_t off;              /* byte offset in the packed key */
};

/* One entry of a table's const entries (or the default entry). */
struct p4_entry {
	int action;                /* index into actions */
	uint8_t *data;             /* the action's data bytes */
	uint8_t *key;              /* packed key (value) */
	uint8_t *kmask;            /* packed mask (ternary/lpm as masks; range: lo) */
	uint8_t *khi;              /* range: hi */
	int prefix;                /* lpm prefix length of the lpm element, -1 none */
	int priority;
};

struct p4_table {
	const char *name;
	int id;
	int pipeline;
	enum p4_table_class cls;
	enum p4_table_impl impl;
	int profile;               /* action profile (indirect), or -1 */
	uint32_t max_size;
	bool with_counters;
	int direct_counter;        /* index into counters, or -1 */
	int direct_meter;          /* index into meters, or -1 */
	bool support_timeout;
	struct p4_key *keys;
	uint32_t n_keys;
	uint32_t key_bytes;        /* packed key */
	int lpm_key;               /* index of the lpm element, or -1 */
	int *actions;              /* allowed actions (indices) */
	uint32_t n_actions;
	uint32_t data_bytes;       /* max action data over its actions */
	struct p4_node *next_by_action; /* [n_actions], parallel to actions */
	struct p4_node next_hit, next_miss, base_next;
	bool hit_miss;             /* next_tables uses __HIT__ / __MISS__ */
	bool has_default;
	struct p4_entry def;       /* default entry */
	bool default_const;        /* action_const: the control plane cannot change it */
	bool default_entry_const;  /* action_entry_const */
	struct p4_entry *entries;  /* const entries */
	uint32_t n_entries;
	bool const_entries;        /* "entries" given: the table is immutable */
};

struct p4_profile {
	const char *name;
	int id;
	uint32_t max_size;
	bool selector;
	enum p4_algo algo;
	const char *algo_name;
	struct p4_expr **sel_in;   /* selector input fields */
	uint32_t n_sel_in;
};

struct p4_cond {
	const char *name;
	int id;
	struct p4_expr *expr;
	struct p4_node t, f;
};

struct p4_pipeline {
	const char *name;
	int id;
	struct p4_node init;
	int *tables;               /* indices into p4_prog.tables */
	uint32_t n_tables;
	struct p4_cond *conds;
	uint32_t n_conds;
};

/* ------------------------------------------------------------------------ */
/* The program.                                                               */

struct p4_arena;

/* simple_switch's standard and intrinsic metadata fields (after field_aliases). */
enum p4_std_field {
	P4S_INGRESS_PORT, P4S_EGRESS_SPEC, P4S_EGRESS_PORT, P4S_INSTANCE_TYPE,
	P4S_PACKET_LENGTH, P4S_MCAST_GRP, P4S_EGRESS_RID, P4S_CHECKSUM_ERROR,
	P4S_PARSER_ERROR, P4S_PRIORITY, P4S_INGRESS_TS, P4S_EGRESS_TS,
	P4S_ENQ_TIMESTAMP, P4S_ENQ_QDEPTH, P4S_DEQ_TIMEDELTA, P4S_DEQ_QDEPTH, P4S_QID,
	P4S_COUNT
};

struct p4_fref {
	int h, f;                  /* -1 when the program has no such field */
};

struct p4_prog {
	struct p4_arena *arena;
	const char *name;          /* "program" (the .p4 file), or "" */
	int ver_major, ver_minor;
	struct p4_htype *htypes;        uint32_t n_htypes;
	struct p4_header *headers;      uint32_t n_headers;
	struct p4_stack *stacks;        uint32_t n_stacks;
	struct p4_union *unions;        uint32_t n_unions;
	struct p4_union_stack *ustacks; uint32_t n_ustacks;
	const char **error_names;       /* by error value */
	int *error_values;
	uint32_t n_errors;
	int err_no_error, err_too_short, err_no_match, err_stack_oob, err_header_too_short;
	int err_invalid_arg;      /* ParserInvalidArgument: a length not in whole bytes */
	struct p4_pstate *states;       uint32_t n_states;
	int init_state;                 /* -1: accept at once */
	struct p4_vset *vsets;          uint32_t n_vsets;
	int *deparse;                   /* header indices in emit order */
	uint32_t n_deparse;
	struct p4_register *registers;  uint32_t n_registers;
	struct p4_counter *counters;    uint32_t n_counters;
	struct p4_meter *meters;        uint32_t n_meters;
	struct p4_calc *calcs;          uint32_t n_calcs;
	struct p4_checksum *checksums;  uint32_t n_checksums;
	struct p4_field_list *flists;   uint32_t n_flists;
	struct p4_learn_list *llists;   uint32_t n_llists;
	struct p4_action *actions;      uint32_t n_actions;
	struct p4_table *tables;        uint32_t n_tables;
	struct p4_profile *profiles;    uint32_t n_profiles;
	struct p4_pipeline pipes[2];    /* [0] ingress, [1] egress */
	struct p4_fref std[P4S_COUNT];  /* standard / intrinsic metadata fields */
	const char **log_formats;       /* log_msg format strings, by site */
	uint32_t n_log;
};

/* Load BMv2 JSON text (len bytes) into *out. 0, or -EINVAL (malformed JSON,
 * unknown format version, an unsupported construct, a width beyond what is
 * supported: the message in err names it and where it is), -ENOMEM. */
int p4_load(const char *json, size_t len, struct p4_prog **out, char *err, size_t errlen);
/* The same from a file (-ENOENT etc. with a message). */
int p4_load_file(const char *path, struct p4_prog **out, char *err, size_t errlen);
void p4_prog_free(struct p4_prog *p);

/* Lookups by name (-1 if absent). */
int p4_table_find(const struct p4_prog *p, const char *name);
int p4_action_find(const struct p4_prog *p, const char *name);
int p4_register_find(const struct p4_prog *p, const char *name);
int p4_counter_find(const struct p4_prog *p, const char *name);
int p4_meter_find(const struct p4_prog *p, const char *name);
int p4_profile_find(const struct p4_prog *p, const char *name);
int p4_vset_find(const struct p4_prog *p, const char *name);

/* Arenas: allocation (zeroed; NULL when out of memory), all freed at once. */
struct p4_arena *p4_arena_new(void);
void p4_arena_free(struct p4_arena *a);
void *p4_alloc(struct p4_arena *a, size_t n);
char *p4_strdup(struct p4_arena *a, const char *s);

/* Bytes a key element / parameter of `bits` takes (byte-padded). */
static inline uint32_t p4_bytes(uint32_t bits)
{
	return (bits + 7u) / 8u;
}

#endif /* INNET_P4_IR_H */
