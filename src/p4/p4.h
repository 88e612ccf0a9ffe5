/*
 * p4.h — innet's P4 module, inside: how a P4 program's state is laid out on
 * innet's (the layout both the generated data path and the control plane
 * compute from the IR, p4_layout.c), the code generator (p4_gen.c), the
 * builder that compiles the generated source for both targets into a cache
 * (p4_build.c), and the "p4" program that runs it all on a switch
 * (p4_prog.c, the simple_switch_CLI language in p4_cli.c).
 *
 * State, as innet declares it for one P4 program (docs/p4.md, "State"):
 *
 *   innet register  what                                        element
 *   p4_words        8-byte words: counters (bytes, packets per    8 bytes
 *                   index), meters (P4_METER_WORDS per index),
 *                   mirroring sessions, LPM prefix-length bitmaps,
 *                   ternary tables' generation words, ring heads,
 *                   direct counters and meters (per entry handle)
 *   p4_r1/2/4/8     P4 register arrays of 1..8-byte elements,     1, 2, 4, 8
 *                   packed by element size
 *   p4_r16          P4 register arrays of 65..128-bit elements    16 (blob)
 *   p4_rwN          P4 register array N of more than 128 bits     its bytes, big-
 *                   (read into / written from a field of its      endian (blob)
 *                   width only)
 *   p4_tern_T       ternary / range table T: two buffers of its   entry (blob)
 *                   sorted entries (the control plane writes the
 *                   idle one and flips)
 *   p4_ring         digests and log_msg records (a ring)          record (blob)
 *   p4_vsets        parse value sets' members                     vset entry (blob)
 *
 *   innet table     key                          value
 *   p4_t_T          exact table T: packed key    struct p4_tval (action, handle, data)
 *                   lpm table T: prefix length   the same
 *                   byte + masked key
 *   p4_defaults     u32 table index              a table's default entry (when it
 *                                                can change at run time)
 *   p4_mcast        u32 multicast group id       struct p4_mcast_group
 *   p4_prof         u32 profile, u32 handle      member (action, data) or group
 *                   (bit 31 of the profile:      (member handles)
 *                   a group)
 */
#ifndef INNET_P4_H
#define INNET_P4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "p4/p4_ir.h"
#include "p4/p4rt_dp.h"

#define P4_GEN_VERSION      5u       /* bump when the generated code changes */
#define P4_TERN_MAX         65536u   /* entries of a ternary table (per buffer) */
#define P4_PHV_MAX          5120u    /* bytes of headers and metadata */

extern const char *const p4_drop_names[P4_DROP_COUNT];

/* Per P4 table. */
struct p4_tlayout {
	int itable;                /* innet table id (exact / lpm), -1 */
	uint32_t key_size;         /* its key bytes (lpm: 1 + packed key), padded to 8 */
	uint32_t value_size;       /* its value bytes: p4_tval_hdr + data, padded to 8 */
	uint32_t capacity;
	int treg;                  /* ternary: innet register of the records, -1 */
	uint32_t trec_size;        /* bytes per record */
	uint32_t trec_key;         /* offsets in a record: key value, mask, hi, data */
	uint32_t trec_mask, trec_hi, trec_data;
	uint32_t tcap;             /* records per buffer */
	uint32_t ctl_word;         /* ternary: gen word, then 2 count words; lpm: bitmap */
	uint32_t dc_word;          /* direct counter: 2 words per handle, UINT32_MAX none */
	uint32_t dm_word;          /* direct meter: P4_METER_WORDS per handle */
	bool default_dynamic;      /* the default entry may change: p4_defaults holds it */
	bool has_range;
};

/* Per register array: where its elements live. */
struct p4_rlayout {
	int ireg;                  /* innet register */
	uint32_t base;             /* its first element there */
	uint32_t elem;             /* element bytes: 1, 2, 4, 8, 16, or the big-endian
				    * bytes of a wider element (its own register) */
};

#define P4_MAX_IREGS 24u
#define P4_MAX_ITABLES 16u

struct p4_layout {
	/* innet registers */
	uint32_t n_iregs;
	const char *ireg_name[P4_MAX_IREGS];
	uint32_t ireg_width[P4_MAX_IREGS];
	uint32_t ireg_count[P4_MAX_IREGS];
	int r_words, r_r16, r_ring, r_vsets;
	int r_cls[4];              /* p4_r1, p4_r2, p4_r4, p4_r8 (-1 unused) */
	uint32_t n_words;
	/* innet tables */
	uint32_t n_itables;
	const char *itable_name[P4_MAX_ITABLES];
	uint32_t itable_key[P4_MAX_ITABLES], itable_value[P4_MAX_ITABLES];
	uint32_t itable_capacity[P4_MAX_ITABLES];
	int t_defaults, t_mcast, t_prof;
	uint32_t default_value;    /* p4_defaults' value bytes */
	uint32_t prof_value;       /* p4_prof's value bytes */
	uint32_t prof_data;        /* member data bytes */
	/* per object */
	struct p4_tlayout *tables; /* [n_tables] */
	struct p4_rlayout *regs;   /* [n_registers] */
	uint32_t *counter_word;    /* [n_counters] (direct: UINT32_MAX) */
	uint32_t *meter_word;      /* [n_meters] (direct: UINT32_MAX) */
	uint32_t mirror_word;      /* P4_MIRROR_SESSIONS words */
	uint32_t ring_head_word;   /* digest/log ring: next sequence number */
	uint32_t ring_seq_word;    /* P4_RING_SLOTS words: a slot's sequence number + 1 */
	uint32_t ring_size;        /* bytes per ring record */
	uint32_t log_count_word;   /* per log_msg site: how many ran */
	uint32_t vset_word;        /* per vset: member count */
	uint32_t vset_entry;       /* bytes per vset member (value, mask) */
	uint32_t vset_max;         /* members per vset */
	uint32_t digest_bytes;     /* the largest learn list */
	uint32_t phv_bytes;        /* the generated PHV's size (from the generator) */
};

/* Compute the layout of p's state. 0, or -EINVAL with a message (beyond
 * innet's limits: more tables or registers than it has, a ternary table too
 * large). The arrays are allocated in p's arena. */
int p4_layout(struct p4_prog *p, struct p4_layout *lay, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* The generator (p4_gen.c).                                                  */

/* Generate the data path's C source for p (NUL-terminated, malloc'd, into
 * *src) against the layout lay; name is the INNET_DATAPATH name. 0, or
 * -EINVAL with a message naming what cannot be translated, -ENOMEM. */
int p4_gen(const struct p4_prog *p, struct p4_layout *lay, const char *name, char **src,
	   char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* The resource model's view (p4_res.c).                                      */

struct innet_res_usage;
/* Replace the declared half of u (innet/resources.h) by p's own tables,
 * registers, meters, headers and table dependency chain; keep its eBPF
 * column and what its packets did (passes, recirculations), not how the
 * translation counted operations. u->program names it (or p's name). 0,
 * -ENOMEM. */
int p4_resources(const struct p4_prog *p, struct innet_res_usage *u);

/* ------------------------------------------------------------------------ */
/* The builder (p4_build.c).                                                  */

struct p4_built {
	char so_path[4096];        /* the user-space data path (dlopen) */
	char bpf_path[4096];       /* the eBPF object, "" if it could not be built */
	char bpf_error[1024];      /* why not (clang's message) */
	char key[65];              /* the cache key (hex) */
	bool cached;               /* found in the cache, nothing compiled */
	double gen_s, cc_s, bpf_s; /* seconds spent generating, compiling each */
};

/* Build the data path of the JSON text (len bytes) into the cache: generate,
 * compile with the system compiler (shared object) and clang -target bpf
 * (eBPF object), keyed by a hash of the JSON, innet's version, the
 * generator's and the data path's headers (p4_build.c). A program the eBPF
 * build refuses still builds (out->bpf_path "", the reason in bpf_error).
 * 0 or -errno with a message. */
int p4_build(const char *json, size_t len, const struct p4_prog *p, struct p4_layout *lay,
	     bool want_bpf, struct p4_built *out, char *err, size_t errlen);

/* The directory holding the data path's headers (include/innet, src/targets/xdp,
 * src/p4): $INNET_DP_DIR, the source tree, or the installed share dir. */
int p4_dp_dir(char *out, size_t n);

#endif /* INNET_P4_H */
