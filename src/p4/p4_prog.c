/*
 * p4_prog.c — the "p4" program: a P4 program compiled by p4c for BMv2
 * (v1model) as an innet program instance (docs/p4.md).
 *
 * setup    reads the JSON ("json" setting), loads it (p4_load.c: refused
 *          constructs fail the setup, named), lays its state out on innet's
 *          registers and tables (p4_layout.c), builds the data path into the
 *          cache (p4_build.c: generated C, a shared object and an eBPF object),
 *          loads the shared object and gives the instance that data path
 *          (innet_decl_datapath) — so the contract, both targets, the shared
 *          state, `innet ctl`, the metrics and the resource report apply
 *          unchanged
 * init     installs the program's const entries, then runs the commands file
 *          ("commands" setting: simple_switch_CLI commands, as P4 tutorials
 *          ship them), failing on the first line that fails
 * on_ctl   the simple_switch_CLI language (p4_cli.c): `innet ctl ... table_add
 *          ...` reaches here
 *
 * The state writers below are the control plane's half of the layout: what
 * p4_cli.c decided, into the bytes the data path reads.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "p4/p4_ctl.h"

/* ------------------------------------------------------------------------ */
/* Output                                                                     */

void p4c_printf(struct p4c_out *o, const char *fmt, ...)
{
	if (o->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = o->cap - o->len;
		int n = vsnprintf(o->s ? o->s + o->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < room) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 1024;
		while (cap - o->len <= (size_t)n)
			cap *= 2;
		char *s = realloc(o->s, cap);
		if (s == NULL) {
			o->oom = true;
			return;
		}
		o->s = s;
		o->cap = cap;
	}
}

/* ------------------------------------------------------------------------ */
/* State writers                                                              */

static int tval_fill(struct p4_inst *in, uint32_t t, const struct p4c_entry *e, uint32_t h,
		     uint8_t *v, uint32_t vs)
{
	const struct p4_table *tb = &in->prog->tables[t];
	memset(v, 0, vs);
	struct p4_tval_hdr hd = { .action = (uint16_t)e->action, .handle = h };
	if (e->action == P4_IND_MEMBER || e->action == P4_IND_GROUP)
		hd.handle = e->ref;
	memcpy(v, &hd, sizeof(hd));
	if (tb->impl == P4TI_SIMPLE && e->data != NULL && e->action >= 0 &&
	    e->action < (int)in->prog->n_actions) {
		uint32_t db = in->prog->actions[e->action].data_bytes;
		if (sizeof(hd) + db > vs)
			return -EINVAL;
		memcpy(v + sizeof(hd), e->data, db);
	}
	return 0;
}

static void lpm_bit(struct p4_inst *in, uint32_t t, int prefix, bool set)
{
	const struct p4_tlayout *tl = &in->lay.tables[t];
	uint32_t w = tl->ctl_word + (uint32_t)prefix / 64;
	uint64_t v = 0;
	innet_cp_reg_read(in->cp, (unsigned)in->lay.r_words, w, &v);
	if (set)
		v |= 1ull << (prefix % 64);
	else
		v &= ~(1ull << (prefix % 64));
	innet_cp_reg_write(in->cp, (unsigned)in->lay.r_words, w, v);
}

/* The innet key of entry e of an exact / lpm table. */
static void ikey_fill(struct p4_inst *in, uint32_t t, const struct p4c_entry *e, uint8_t *k)
{
	const struct p4_table *tb = &in->prog->tables[t];
	const struct p4_tlayout *tl = &in->lay.tables[t];
	memset(k, 0, tl->key_size);
	if (tb->cls == P4TC_LPM) {
		k[0] = (uint8_t)e->prefix;
		memcpy(k + 1, e->key, tb->key_bytes);
	} else {
		memcpy(k, e->key, tb->key_bytes);
	}
}

int p4c_table_write_entry(struct p4_inst *in, uint32_t t, uint32_t h)
{
	const struct p4_table *tb = &in->prog->tables[t];
	const struct p4_tlayout *tl = &in->lay.tables[t];
	struct p4c_table *ct = &in->tables[t];
	const struct p4c_entry *e = &ct->e[h];
	if (tb->cls == P4TC_TERNARY)
		return p4c_ternary_sync(in, t);
	if (tl->itable < 0)
		return -EINVAL;
	uint8_t k[INNET_TABLE_KEY_MAX], v[INNET_TABLE_VALUE_MAX];
	ikey_fill(in, t, e, k);
	int rc = tval_fill(in, t, e, h, v, tl->value_size);
	if (rc != 0)
		return rc;
	rc = innet_cp_table_add(in->cp, (unsigned)tl->itable, k, v);
	if (rc == 0 && tb->cls == P4TC_LPM && e->prefix >= 0 && e->prefix <= 128)
		lpm_bit(in, t, e->prefix, true);
	return rc;
}

int p4c_table_erase_entry(struct p4_inst *in, uint32_t t, uint32_t h)
{
	const struct p4_table *tb = &in->prog->tables[t];
	const struct p4_tlayout *tl = &in->lay.tables[t];
	struct p4c_table *ct = &in->tables[t];
	const struct p4c_entry *e = &ct->e[h];
	if (tb->cls == P4TC_TERNARY)
		return p4c_ternary_sync(in, t);
	if (tl->itable < 0)
		return -EINVAL;
	uint8_t k[INNET_TABLE_KEY_MAX];
	ikey_fill(in, t, e, k);
	int rc = innet_cp_table_del(in->cp, (unsigned)tl->itable, k);
	if (tb->cls == P4TC_LPM && e->prefix >= 0 && e->prefix <= 128 && ct->lpm_count[e->prefix] == 0)
		lpm_bit(in, t, e->prefix, false);
	return rc;
}

struct order {
	uint32_t h;
	int prio;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order *x = a, *y = b;
	if (x->prio != y->prio)
		return x->prio < y->prio ? -1 : 1;
	return x->h < y->h ? -1 : x->h > y->h;
}

/* Rewrite a ternary / range table's records in priority order into the idle
 * buffer, then flip (readers re-check the generation around their scan). */
int p4c_ternary_sync(struct p4_inst *in, uint32_t t)
{
	const struct p4_table *tb = &in->prog->tables[t];
	const struct p4_tlayout *tl = &in->lay.tables[t];
	struct p4c_table *ct = &in->tables[t];
	struct order *ord = malloc(sizeof(*ord) * (ct->hwm ? ct->hwm : 1));
	uint8_t *rec = calloc(1, tl->trec_size);
	if (ord == NULL || rec == NULL) {
		free(ord);
		free(rec);
		return -ENOMEM;
	}
	uint32_t n = 0;
	for (uint32_t h = 0; h < ct->hwm; h++)
		if (ct->e[h].used)
			ord[n++] = (struct order){ .h = h, .prio = ct->e[h].priority };
	qsort(ord, n, sizeof(*ord), order_cmp);
	uint64_t gen = ct->gen;
	uint32_t idle = (uint32_t)((gen + 1) & 1);
	int rc = 0;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		const struct p4c_entry *e = &ct->e[ord[i].h];
		memset(rec, 0, tl->trec_size);
		struct p4_trec_hdr hd = { .priority = (uint32_t)e->priority, .action = (uint16_t)e->action,
					  .handle = ord[i].h, .valid = 1 };
		if (e->action == P4_IND_MEMBER || e->action == P4_IND_GROUP)
			hd.handle = e->ref;
		memcpy(rec, &hd, sizeof(hd));
		for (uint32_t k = 0; k < tb->n_keys; k++) {
			const struct p4_key *ky = &tb->keys[k];
			uint8_t *val = rec + tl->trec_key + ky->off, *m = rec + tl->trec_mask + ky->off;
			if (ky->match == P4M_RANGE) {
				memcpy(val, e->mask + ky->off, ky->bytes);   /* lo */
				memcpy(rec + tl->trec_hi + ky->off, e->hi + ky->off, ky->bytes);
				memset(m, 0xff, ky->bytes);
			} else {
				memcpy(m, e->mask + ky->off, ky->bytes);
				for (uint32_t b = 0; b < ky->bytes; b++)
					val[b] = e->key[ky->off + b] & m[b];
			}
		}
		if (tb->impl == P4TI_SIMPLE && e->data != NULL)
			memcpy(rec + tl->trec_data, e->data, in->prog->actions[e->action].data_bytes);
		rc = innet_cp_reg_write_bytes(in->cp, (unsigned)tl->treg, idle * tl->tcap + i, rec,
					      tl->trec_size);
	}
	free(ord);
	free(rec);
	if (rc != 0)
		return rc;
	innet_cp_reg_write(in->cp, (unsigned)in->lay.r_words, tl->ctl_word + 1 + idle, n);
	ct->gen = gen + 1;
	return innet_cp_reg_write(in->cp, (unsigned)in->lay.r_words, tl->ctl_word, ct->gen);
}

int p4c_default_sync(struct p4_inst *in, uint32_t t)
{
	const struct p4_tlayout *tl = &in->lay.tables[t];
	struct p4c_table *ct = &in->tables[t];
	if (in->lay.t_defaults < 0 || !tl->default_dynamic)
		return -EPERM;
	uint8_t k[8] = { (uint8_t)(t & 0xff), (uint8_t)(t >> 8) };
	if (!ct->def_set) {
		int rc = innet_cp_table_del(in->cp, (unsigned)in->lay.t_defaults, k);
		return rc == -ENOENT ? 0 : rc;
	}
	uint8_t v[INNET_TABLE_VALUE_MAX];
	struct p4c_entry e = { .action = ct->def_action, .ref = ct->def_ref, .data = ct->def_data };
	int rc = tval_fill(in, t, &e, 0, v, in->lay.default_value);
	if (rc != 0)
		return rc;
	return innet_cp_table_add(in->cp, (unsigned)in->lay.t_defaults, k, v);
}

int p4c_member_sync(struct p4_inst *in, uint32_t prof, uint32_t h)
{
	struct p4c_member *m = &in->profs[prof].mbr[h];
	uint32_t k[2] = { prof, h };
	if (!m->used) {
		int rc = innet_cp_table_del(in->cp, (unsigned)in->lay.t_prof, k);
		return rc == -ENOENT ? 0 : rc;
	}
	uint8_t v[INNET_TABLE_VALUE_MAX];
	memset(v, 0, in->lay.prof_value);
	struct p4_tval_hdr hd = { .action = (uint16_t)m->action };
	memcpy(v, &hd, sizeof(hd));
	if (m->data != NULL)
		memcpy(v + sizeof(hd), m->data, in->prog->actions[m->action].data_bytes);
	return innet_cp_table_add(in->cp, (unsigned)in->lay.t_prof, k, v);
}

int p4c_group_sync(struct p4_inst *in, uint32_t prof, uint32_t h)
{
	struct p4c_group *g = &in->profs[prof].grp[h];
	uint32_t k[2] = { prof | 0x80000000u, h };
	if (!g->used) {
		int rc = innet_cp_table_del(in->cp, (unsigned)in->lay.t_prof, k);
		return rc == -ENOENT ? 0 : rc;
	}
	uint32_t v[INNET_TABLE_VALUE_MAX / 4];
	memset(v, 0, in->lay.prof_value);
	v[0] = g->n;
	for (uint32_t i = 0; i < g->n && i < P4_GROUP_MAX; i++)
		v[2 + i] = g->m[i];
	return innet_cp_table_add(in->cp, (unsigned)in->lay.t_prof, k, v);
}

/* A multicast group's replication list: its nodes in association order,
 * each node's ports ascending, each with the node's rid. */
int p4c_mcast_sync(struct p4_inst *in, uint32_t slot)
{
	struct p4c_mc_group *g = &in->groups[slot];
	uint32_t k[2] = { g->id, 0 };
	struct p4_mcast_group v;
	memset(&v, 0, sizeof(v));
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		const struct p4c_mc_node *nd = &in->nodes[g->nodes[i]];
		for (uint32_t p = 0; p < nd->n_ports && v.n < P4_MC_MAX; p++) {
			v.m[v.n].port = nd->ports[p];
			v.m[v.n].rid = nd->rid;
			v.n++;
		}
	}
	return innet_cp_table_add(in->cp, (unsigned)in->lay.t_mcast, k, &v);
}

int p4c_mcast_erase(struct p4_inst *in, uint32_t mgid)
{
	uint32_t k[2] = { mgid, 0 };
	int rc = innet_cp_table_del(in->cp, (unsigned)in->lay.t_mcast, k);
	return rc == -ENOENT ? 0 : rc;
}

int p4c_mirror_sync(struct p4_inst *in, uint32_t session)
{
	if (session >= P4_MIRROR_SESSIONS)
		return -ERANGE;
	return innet_cp_reg_write(in->cp, (unsigned)in->lay.r_words, in->lay.mirror_word + session,
				  in->mirror[session]);
}

/* Rates r = {cir, cburst, pir, pburst} (units per microsecond, units) into
 * the meter at word w: the peak rate first (red), then the committed one. */
int p4c_meter_sync(struct p4_inst *in, uint32_t w, const double r[4], bool set, bool bytes)
{
	(void)bytes;
	unsigned rw = (unsigned)in->lay.r_words;
	struct innet_cp *cp = in->cp;
	if (!set)
		return innet_cp_reg_write(cp, rw, w + 1, 0);
	const double order[2][2] = { { r[2], r[3] }, { r[0], r[1] } };
	for (int i = 0; i < 2; i++) {
		double fp = order[i][0] * 4294967296.0;
		uint64_t rate = fp >= 1.8e19 ? UINT64_MAX : (uint64_t)fp;
		uint64_t burst = order[i][1] < 0 ? 0 : (uint64_t)order[i][1];
		uint32_t b = w + 2 + 4 * (uint32_t)i;
		innet_cp_reg_write(cp, rw, b, rate);
		innet_cp_reg_write(cp, rw, b + 1, burst);
		innet_cp_reg_write(cp, rw, b + 2, burst);
		innet_cp_reg_write(cp, rw, b + 3, 0);
	}
	return innet_cp_reg_write(cp, rw, w + 1, 1);
}

/* ------------------------------------------------------------------------ */
/* The program                                                                */

static void inst_free(void *priv)
{
	struct p4_inst *in = priv;
	if (in == NULL)
		return;
	if (in->prog != NULL) {
		for (uint32_t t = 0; t < in->prog->n_tables && in->tables; t++) {
			struct p4c_table *ct = &in->tables[t];
			for (uint32_t h = 0; h < ct->hwm && ct->e; h++) {
				free(ct->e[h].key);
				free(ct->e[h].mask);
				free(ct->e[h].hi);
				free(ct->e[h].data);
			}
			free(ct->e);
			free(ct->versions);
			free(ct->def_data);
			free(ct->meter_rates);
			free(ct->meter_set);
		}
		for (uint32_t p = 0; p < in->prog->n_profiles && in->profs; p++) {
			for (uint32_t h = 0; h < in->profs[p].n_mbr_hwm; h++)
				free(in->profs[p].mbr[h].data);
			free(in->profs[p].mbr);
			free(in->profs[p].grp);
		}
		for (uint32_t m = 0; m < in->prog->n_meters && in->meters; m++) {
			free(in->meters[m].rates);
			free(in->meters[m].set);
		}
	}
	free(in->tables);
	free(in->profs);
	free(in->meters);
	free(in->nodes);
	free(in->groups);
	for (uint32_t v = 0; in->vsets != NULL && v < in->prog->n_vsets; v++)
		free(in->vsets[v].vals);
	free(in->vsets);
	/* (the data path's code: every packet has left — the engine frees an
	 * instance's private state after its threads stopped) */
	if (in->dl != NULL)
		dlclose(in->dl);
	p4_prog_free(in->prog);
	free(in);
}

static int read_all(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	while (b != NULL) {
		size_t r = fread(b + n, 1, cap - n, f);
		n += r;
		if (n < cap)
			break;
		char *nb = cap < (256u << 20) ? realloc(b, cap * 2) : NULL;
		if (nb == NULL) {
			free(b);
			b = NULL;
			break;
		}
		b = nb;
		cap *= 2;
	}
	fclose(f);
	if (b == NULL) {
		snprintf(err, errlen, "%s: too large or out of memory", path);
		return -ENOMEM;
	}
	*buf = b;
	*len = n;
	return 0;
}

static int inst_alloc(struct p4_inst *in)
{
	const struct p4_prog *p = in->prog;
	in->tables = calloc(p->n_tables ? p->n_tables : 1, sizeof(*in->tables));
	in->profs = calloc(p->n_profiles ? p->n_profiles : 1, sizeof(*in->profs));
	in->meters = calloc(p->n_meters ? p->n_meters : 1, sizeof(*in->meters));
	in->nodes = calloc(P4C_MC_NODES, sizeof(*in->nodes));
	in->groups = calloc(P4C_MC_GROUPS, sizeof(*in->groups));
	if (!in->tables || !in->profs || !in->meters || !in->nodes || !in->groups)
		return -ENOMEM;
	for (uint32_t t = 0; t < p->n_tables; t++) {
		struct p4c_table *ct = &in->tables[t];
		uint32_t n = p->tables[t].max_size;
		ct->e = calloc(n, sizeof(*ct->e));
		ct->versions = calloc(n, 1);
		ct->def_data = calloc(1, p->tables[t].data_bytes + 8);
		if (!ct->e || !ct->versions || !ct->def_data)
			return -ENOMEM;
		if (p->tables[t].direct_meter >= 0) {
			ct->meter_rates = calloc(n, sizeof(*ct->meter_rates));
			ct->meter_set = calloc(n, sizeof(*ct->meter_set));
			if (!ct->meter_rates || !ct->meter_set)
				return -ENOMEM;
		}
	}
	for (uint32_t i = 0; i < p->n_profiles; i++) {
		uint32_t n = p->profiles[i].max_size;
		in->profs[i].mbr = calloc(n, sizeof(*in->profs[i].mbr));
		in->profs[i].grp = calloc(n, sizeof(*in->profs[i].grp));
		if (!in->profs[i].mbr || !in->profs[i].grp)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < p->n_meters; i++) {
		if (p->meters[i].direct)
			continue;
		uint32_t n = p->meters[i].size;
		in->meters[i].rates = calloc(n, sizeof(*in->meters[i].rates));
		in->meters[i].set = calloc(n, sizeof(*in->meters[i].set));
		if (!in->meters[i].rates || !in->meters[i].set)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < P4C_MC_NODES; i++)
		in->nodes[i].group = -1;
	in->vsets = calloc(p->n_vsets ? p->n_vsets : 1, sizeof(*in->vsets));
	if (in->vsets == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->n_vsets; i++) {
		in->vsets[i].vbytes = (p->vsets[i].width + 7) / 8;
		in->vsets[i].vals = calloc(p->vsets[i].max_size ? p->vsets[i].max_size : 1,
					   in->vsets[i].vbytes ? in->vsets[i].vbytes : 1);
		if (in->vsets[i].vals == NULL)
			return -ENOMEM;
	}
	return 0;
}

static int p4_setup(struct innet_decl *d, struct innet_args *a)
{
	const char *json = NULL, *cmds = NULL;
	int rc = innet_args_str(a, "json", NULL, &json);
	if (rc == 0)
		rc = innet_args_str(a, "commands", NULL, &cmds);
	if (rc != 0)
		return rc;
	if (json == NULL)
		return innet_decl_error(d, "\"json\" is required: the BMv2 JSON that p4c-bm2-ss wrote "
				       "(p4c-bm2-ss -o prog.json prog.p4)");
	struct p4_inst *in = calloc(1, sizeof(*in));
	if (in == NULL)
		return -ENOMEM;
	innet_decl_priv_with(d, in, inst_free);
	snprintf(in->json_path, sizeof(in->json_path), "%s", json);
	if (cmds != NULL)
		snprintf(in->commands_path, sizeof(in->commands_path), "%s", cmds);
	char err[1024] = "";
	char *text = NULL;
	size_t len = 0;
	if ((rc = read_all(json, &text, &len, err, sizeof(err))) != 0)
		return innet_decl_error(d, "%s", err);
	rc = p4_load(text, len, &in->prog, err, sizeof(err));
	if (rc != 0) {
		free(text);
		return innet_decl_error(d, "%s: %s", json, err);
	}
	if ((rc = p4_layout(in->prog, &in->lay, err, sizeof(err))) != 0) {
		free(text);
		return innet_decl_error(d, "%s: %s", json, err);
	}
	rc = p4_build(text, len, in->prog, &in->lay, true, &in->built, err, sizeof(err));
	free(text);
	if (rc != 0)
		return innet_decl_error(d, "%s: %s", json, err);
	in->dl = dlopen(in->built.so_path, RTLD_NOW | RTLD_LOCAL);
	if (in->dl == NULL)
		return innet_decl_error(d, "%s: cannot load its data path %s: %s", json, in->built.so_path,
					dlerror());
	char sym[128];
	snprintf(sym, sizeof(sym), "innet_dp_p4prog_handle");
	enum innet_action (*handle)(struct innet_ctx *, struct innet_pkt *);
	*(void **)&handle = dlsym(in->dl, sym);
	if (handle == NULL)
		return innet_decl_error(d, "%s: its data path has no %s", json, sym);
	if ((rc = inst_alloc(in)) != 0)
		return innet_decl_error(d, "out of memory");
	/* state */
	for (uint32_t i = 0; i < in->lay.n_iregs; i++)
		if ((rc = innet_decl_reg(d, i, in->lay.ireg_name[i], in->lay.ireg_width[i],
					 in->lay.ireg_count[i])) != 0)
			return rc;
	for (uint32_t i = 0; i < in->lay.n_itables; i++)
		if ((rc = innet_decl_table(d, i, in->lay.itable_name[i], in->lay.itable_key[i],
					   in->lay.itable_value[i], in->lay.itable_capacity[i])) != 0)
			return rc;
	struct p4_conf *cf = innet_decl_conf(d, sizeof(*cf));
	if (cf == NULL)
		return -ENOMEM;
	cf->n_ports = innet_decl_n_ports(d);
	cf->t0_ns = innet_now_ns();   /* (copied onto the XDP map with the block) */
	return innet_decl_datapath(d, handle, NULL, in->built.bpf_path[0] ? in->built.bpf_path : NULL);
}

/* The program's const entries, as the control plane would add them. */
static int install_const(struct p4_inst *in, char *err, size_t errlen)
{
	const struct p4_prog *p = in->prog;
	for (uint32_t t = 0; t < p->n_tables; t++) {
		const struct p4_table *tb = &p->tables[t];
		struct p4c_table *ct = &in->tables[t];
		for (uint32_t i = 0; i < tb->n_entries; i++) {
			if (i >= tb->max_size) {
				snprintf(err, errlen, "table '%s': %u const entries, size %u", tb->name,
					 tb->n_entries, tb->max_size);
				return -ENOSPC;
			}
			const struct p4_entry *pe = &tb->entries[i];
			struct p4c_entry *e = &ct->e[i];
			e->used = true;
			e->priority = pe->priority;
			e->prefix = pe->prefix;
			e->action = pe->action;
			e->key = malloc(tb->key_bytes + 1);
			e->mask = malloc(tb->key_bytes + 1);
			e->hi = malloc(tb->key_bytes + 1);
			uint32_t db = p->actions[pe->action].data_bytes;
			e->data = malloc(db + 1);
			if (!e->key || !e->mask || !e->hi || !e->data)
				return -ENOMEM;
			memcpy(e->key, pe->key, tb->key_bytes);
			memcpy(e->mask, pe->kmask, tb->key_bytes);
			memcpy(e->hi, pe->khi, tb->key_bytes);
			memcpy(e->data, pe->data, db);
			if (tb->cls == P4TC_LPM && e->prefix < 0)
				e->prefix = (int)tb->keys[tb->lpm_key].bits;
			ct->n++;
			ct->hwm = i + 1;
			if (tb->cls == P4TC_LPM && e->prefix >= 0)
				ct->lpm_count[e->prefix]++;
			if (tb->cls != P4TC_TERNARY) {
				int rc = p4c_table_write_entry(in, t, i);
				if (rc != 0) {
					snprintf(err, errlen, "table '%s': const entry %u: %s", tb->name, i,
						 rc == -ENOSPC ? "the table is full" : strerror(-rc));
					return rc;
				}
			}
		}
		if (tb->cls == P4TC_TERNARY && tb->n_entries > 0) {
			int rc = p4c_ternary_sync(in, t);
			if (rc != 0) {
				snprintf(err, errlen, "table '%s': const entries: %s", tb->name, strerror(-rc));
				return rc;
			}
		}
	}
	return 0;
}

/* Split a line into words (modified in place); the count, or -1 if more than max. */
static int split(char *line, char **w, int max)
{
	int n = 0;
	for (char *p = line;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (*p == '\0')
			return n;
		if (n == max)
			return -1;
		w[n++] = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
			p++;
		if (*p)
			*p++ = '\0';
	}
}

static int run_commands(struct p4_inst *in, char *err, size_t errlen)
{
	FILE *f = fopen(in->commands_path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "commands file %.300s: %s", in->commands_path, strerror(errno));
		return -errno;
	}
	char line[8192];
	unsigned ln = 0;
	int rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
		ln++;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\0' || *p == '\r')
			continue;
		char *w[256];
		int n = split(p, w, 256);
		if (n <= 0) {
			snprintf(err, errlen, "commands file %.300s, line %u: too many words", in->commands_path, ln);
			rc = -EINVAL;
			break;
		}
		struct p4c_out o = { 0 };
		char e2[512] = "";
		rc = p4c_command(in, n, w, &o, e2, sizeof(e2));
		if (rc != 0) {
			snprintf(err, errlen, "commands file %.300s, line %u: %.400s", in->commands_path, ln, e2);
		} else if (o.s != NULL && o.len > 0 && o.failed) {
			/* BMv2 prints these and goes on; a switch that starts should
			 * have what its commands file says */
			char msg[400];
			snprintf(msg, sizeof(msg), "%.*s", (int)(o.len > 380 ? 380 : o.len), o.s);
			for (char *q = msg; *q; q++)
				if (*q == '\n')
					*q = ' ';
			snprintf(err, errlen, "commands file %.300s, line %u: %.400s", in->commands_path, ln, msg);
			rc = -EINVAL;
		}
		free(o.s);
	}
	fclose(f);
	return rc;
}

static int p4_init(struct innet_cp *cp, void *priv)
{
	struct p4_inst *in = priv;
	in->cp = cp;
	char err[1024] = "";
	int rc = install_const(in, err, sizeof(err));
	if (rc == 0 && in->commands_path[0] != '\0')
		rc = run_commands(in, err, sizeof(err));
	if (rc != 0)
		return innet_cp_init_error(cp, "%s", err[0] ? err : strerror(-rc));
	return 0;
}

static int p4_on_ctl(struct innet_cp *cp, void *priv, int argc, char **argv, json_t *reply, char *err,
		     size_t errlen)
{
	struct p4_inst *in = priv;
	in->cp = cp;
	if (argc < 1) {
		snprintf(err, errlen, "a simple_switch_CLI command is expected (e.g. table_dump TABLE)");
		return -1;
	}
	struct p4c_out o = { 0 };
	int rc = p4c_command(in, argc, argv, &o, err, errlen);
	if (rc != 0) {
		free(o.s);
		return -1;
	}
	json_object_set_new(reply, "text", json_stringn(o.s ? o.s : "", o.len));
	json_object_set_new(reply, "failed", json_boolean(o.failed));
	free(o.s);
	return 0;
}

/* The program's own handler is never called: every instance brings the data
 * path its setup built (innet_decl_datapath). */
static enum innet_action p4_no_data_path(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	(void)ctx;
	return innet_drop(pkt, INNET_DROP_NO_PROGRAM);
}

static int p4_res(struct innet_cp *cp, void *priv, struct innet_res_usage *u)
{
	const struct p4_inst *in = priv;
	return in != NULL && in->prog != NULL ? p4_resources(in->prog, u) : 0;
}

const struct innet_program innet_prog_p4 = {
	.name = "p4",
	.summary = "a P4 program compiled by p4c for BMv2 (v1model): \"json\", \"commands\" (docs/p4.md)",
	.model = INNET_MODEL_TRIO,
	.drop_reasons = p4_drop_names,
	.n_drop_reasons = P4_DROP_COUNT,
	.setup = p4_setup,
	.init = p4_init,
	.handle = p4_no_data_path,
	.on_ctl = p4_on_ctl,
	.resources = p4_res,
};

INNET_PROGRAM_REGISTER(innet_prog_p4)
