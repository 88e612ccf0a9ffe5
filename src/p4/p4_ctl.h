/*
 * p4_ctl.h — a P4 program instance seen from the control plane: what the
 * "p4" program (p4_prog.c) keeps beside the state it declared, and what the
 * simple_switch_CLI command language (p4_cli.c) works on. The control plane
 * is the only writer of tables, profiles, groups and sessions; it writes
 * them through innet_cp_* (safe against the data plane) and keeps here what
 * the data path does not need: entry handles, match keys as given, member
 * and node lists, meter rates as typed.
 *
 * Threads: the control thread's (on_ctl, init), under cp_lock.
 */
#ifndef INNET_P4_CTL_H
#define INNET_P4_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/switch.h"
#include "p4/p4.h"

/* A table entry as the control plane knows it (by handle index). */
struct p4c_entry {
	bool used;
	uint8_t version;           /* BMv2's handle version (bits 24..31) */
	int priority;              /* ternary / range */
	int prefix;                /* lpm: the lpm element's prefix length, -1 none */
	int action;                /* global action index; or P4_IND_MEMBER / P4_IND_GROUP */
	uint32_t ref;              /* indirect: the member or group handle */
	uint8_t *key;              /* packed key value (key_bytes) */
	uint8_t *mask;             /* packed mask (ternary, lpm as a mask) / range lo */
	uint8_t *hi;               /* range hi */
	uint8_t *data;             /* action data (data_bytes) */
};

struct p4c_table {
	struct p4c_entry *e;       /* [max_size] */
	uint8_t *versions;         /* [max_size] versions of freed handles */
	uint32_t n;                /* entries in use */
	uint32_t hwm;              /* handles ever used (index bound) */
	uint32_t lpm_count[129];   /* entries per prefix length */
	bool def_set;              /* the default was set at run time */
	int def_action;            /* global index, or P4_IND_MEMBER / GROUP */
	uint32_t def_ref;
	uint8_t *def_data;
	uint64_t gen;              /* ternary: records' generation */
	double (*meter_rates)[4];  /* direct meter: per handle {cir, cburst, pir, pburst} */
	bool *meter_set;
};

struct p4c_member {
	bool used;
	int action;
	uint8_t *data;
};

struct p4c_group {
	bool used;
	uint32_t n;
	uint32_t m[P4_GROUP_MAX];
};

struct p4c_profile {
	struct p4c_member *mbr;    /* [max_size] */
	uint32_t n_mbr_hwm;
	struct p4c_group *grp;     /* [max_size] */
	uint32_t n_grp_hwm;
};

/* simple_switch's multicast engine: L1 nodes (rid, ports) and groups. */
#define P4C_MC_NODES  4096u
#define P4C_MC_GROUPS 512u
#define P4C_PORT_MAX  512u
struct p4c_mc_node {
	bool used;
	uint16_t rid;
	uint16_t n_ports;
	uint16_t ports[P4_MC_MAX]; /* ascending */
	int32_t group;             /* associated group id, -1 none */
};

struct p4c_mc_group {
	bool used;
	uint32_t id;
	uint32_t n_nodes;
	uint32_t nodes[P4C_MC_NODES > 64 ? 64 : P4C_MC_NODES]; /* in association order */
};

struct p4c_meter {
	double (*rates)[4];        /* per index: {cir, cburst, pir, pburst} as given */
	bool *set;
};

/* A parse value set's members as added (compressed: the key's bits without
 * padding, BMv2's form), in the order the data path holds them. */
struct p4c_vset {
	uint8_t *vals;             /* [max_size][vbytes] */
	uint32_t n;
	uint32_t vbytes;           /* ceil(width / 8) */
};

struct p4_inst {
	struct innet_cp *cp;
	struct p4_prog *prog;
	struct p4_layout lay;
	void *dl;                  /* the data path's shared object */
	char json_path[4096];
	char commands_path[4096];
	struct p4_built built;
	struct p4c_table *tables;  /* [n_tables] */
	struct p4c_profile *profs; /* [n_profiles] */
	struct p4c_meter *meters;  /* [n_meters] (indirect) */
	struct p4c_mc_node *nodes; /* [P4C_MC_NODES] */
	uint32_t nodes_hwm;
	struct p4c_mc_group *groups; /* [P4C_MC_GROUPS] */
	struct p4c_vset *vsets;    /* [n_vsets] */
	uint64_t mirror[P4_MIRROR_SESSIONS]; /* session words (also in p4_words) */
	uint64_t ring_read;        /* next ring sequence the control plane reads */
	uint64_t digests_lost;     /* overwritten before they were read */
};

/* A growing text answer (what simple_switch_CLI would print). */
struct p4c_out {
	char *s;
	size_t len, cap;
	bool oom;
	bool failed;               /* the command failed (its message is in s, as BMv2's) */
};
void p4c_printf(struct p4c_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Run one simple_switch_CLI command line (words), appending its output to
 * out. 0 — also for a command BMv2 answers with an error message (it is in
 * out, as BMv2 prints it); -ENOENT for a word that is no command (err says
 * so). */
int p4c_command(struct p4_inst *in, int argc, char **argv, struct p4c_out *out, char *err,
		size_t errlen);

/* Whether word is a command of the language. */
bool p4c_is_command(const char *word);

/* State writers (p4_prog.c). Each 0 or -errno. */
int p4c_table_write_entry(struct p4_inst *in, uint32_t t, uint32_t h);   /* (exact/lpm) */
int p4c_table_erase_entry(struct p4_inst *in, uint32_t t, uint32_t h);
int p4c_ternary_sync(struct p4_inst *in, uint32_t t);                     /* rewrite records */
int p4c_default_sync(struct p4_inst *in, uint32_t t);
int p4c_member_sync(struct p4_inst *in, uint32_t prof, uint32_t h);
int p4c_group_sync(struct p4_inst *in, uint32_t prof, uint32_t h);
int p4c_mcast_sync(struct p4_inst *in, uint32_t group_slot);
int p4c_mcast_erase(struct p4_inst *in, uint32_t mgid);
int p4c_mirror_sync(struct p4_inst *in, uint32_t session);
int p4c_meter_sync(struct p4_inst *in, uint32_t word, const double r[4], bool set, bool bytes);

/* The entry handle BMv2 prints for handle index h. */
static inline uint32_t p4c_handle(const struct p4c_table *t, uint32_t h)
{
	return (uint32_t)t->e[h].version << 24 | h;
}

#endif /* INNET_P4_CTL_H */
