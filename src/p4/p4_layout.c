/*
 * p4_layout.c — where a P4 program's state lives among innet's registers and
 * tables (the map is drawn in p4.h). The generated data path and the control
 * plane compute it from the same IR with this one function, so both address
 * the same words and records by construction.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "innet/dp.h"
#include "p4/p4.h"

const char *const p4_drop_names[P4_DROP_COUNT] = {
	"p4_ingress_drop", "p4_egress_drop", "p4_assert", "p4_no_group", "p4_recirc_budget",
	"p4_headroom", "p4_parser_loop", "p4_no_state", "p4_clone_depth", "p4_copy",
};

static uint32_t round8(uint32_t n)
{
	return (n + 7u) & ~7u;
}

struct lctx {
	struct p4_layout *lay;
	char *err;
	size_t errlen;
};

static int add_reg(struct lctx *c, const char *name, uint32_t width, uint32_t count)
{
	struct p4_layout *lay = c->lay;
	if (lay->n_iregs >= P4_MAX_IREGS || lay->n_iregs >= INNET_MAX_REGS) {
		snprintf(c->err, c->errlen, "the program needs more than %u register arrays of innet",
			 INNET_MAX_REGS);
		return -1;
	}
	lay->ireg_name[lay->n_iregs] = name;
	lay->ireg_width[lay->n_iregs] = width;
	lay->ireg_count[lay->n_iregs] = count ? count : 1;
	return (int)lay->n_iregs++;
}

static int add_table(struct lctx *c, const char *name, uint32_t ks, uint32_t vs, uint32_t cap)
{
	struct p4_layout *lay = c->lay;
	if (lay->n_itables >= P4_MAX_ITABLES || lay->n_itables >= INNET_MAX_TABLES) {
		snprintf(c->err, c->errlen,
			 "the program needs more than %u exact-match tables of innet (its exact and "
			 "lpm tables, plus default entries, multicast groups and action profiles)",
			 INNET_MAX_TABLES);
		return -1;
	}
	if (ks > INNET_TABLE_KEY_MAX || vs > INNET_TABLE_VALUE_MAX) {
		snprintf(c->err, c->errlen, "table '%s': key %u B or value %u B beyond innet's %u / %u",
			 name, ks, vs, INNET_TABLE_KEY_MAX, INNET_TABLE_VALUE_MAX);
		return -1;
	}
	lay->itable_name[lay->n_itables] = name;
	lay->itable_key[lay->n_itables] = ks;
	lay->itable_value[lay->n_itables] = vs;
	lay->itable_capacity[lay->n_itables] = cap ? cap : 1;
	return (int)lay->n_itables++;
}

int p4_layout(struct p4_prog *p, struct p4_layout *lay, char *err, size_t errlen)
{
	struct p4_arena *a = p->arena;
	memset(lay, 0, sizeof(*lay));
	struct lctx c = { .lay = lay, .err = err, .errlen = errlen };
	lay->tables = p4_alloc(a, sizeof(*lay->tables) * (p->n_tables ? p->n_tables : 1));
	lay->regs = p4_alloc(a, sizeof(*lay->regs) * (p->n_registers ? p->n_registers : 1));
	lay->counter_word = p4_alloc(a, sizeof(uint32_t) * (p->n_counters ? p->n_counters : 1));
	lay->meter_word = p4_alloc(a, sizeof(uint32_t) * (p->n_meters ? p->n_meters : 1));
	if (!lay->tables || !lay->regs || !lay->counter_word || !lay->meter_word) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	lay->r_r16 = lay->r_ring = lay->r_vsets = -1;
	for (int i = 0; i < 4; i++)
		lay->r_cls[i] = -1;
	lay->t_defaults = lay->t_mcast = lay->t_prof = -1;

	/* words: allocated in order; the register is declared with the total */
	uint32_t w = 0;
	for (uint32_t i = 0; i < p->n_counters; i++) {
		if (p->counters[i].direct) {
			lay->counter_word[i] = UINT32_MAX;
			continue;
		}
		lay->counter_word[i] = w;
		w += 2 * p->counters[i].size;
	}
	for (uint32_t i = 0; i < p->n_meters; i++) {
		if (p->meters[i].direct) {
			lay->meter_word[i] = UINT32_MAX;
			continue;
		}
		lay->meter_word[i] = w;
		w += P4_METER_WORDS * p->meters[i].size;
	}
	lay->mirror_word = w;
	w += P4_MIRROR_SESSIONS;
	lay->ring_head_word = w++;
	lay->ring_seq_word = w;
	w += P4_RING_SLOTS;
	uint32_t n_log = 0;
	for (uint32_t i = 0; i < p->n_actions; i++)
		for (uint32_t k = 0; k < p->actions[i].n_prims; k++)
			n_log += p->actions[i].prims[k].kind == P4P_LOG_MSG;
	for (uint32_t i = 0; i < p->n_states; i++)
		for (uint32_t k = 0; k < p->states[i].n_ops; k++)
			n_log += p->states[i].ops[k].kind == P4PO_PRIMITIVE &&
				 p->states[i].ops[k].prim.kind == P4P_LOG_MSG;
	p->n_log = n_log;
	lay->log_count_word = w;
	w += n_log;
	lay->vset_word = w;
	w += p->n_vsets;

	/* tables */
	uint32_t prof_data = 0;
	for (uint32_t i = 0; i < p->n_tables; i++) {
		struct p4_table *t = &p->tables[i];
		struct p4_tlayout *tl = &lay->tables[i];
		tl->itable = tl->treg = -1;
		tl->dc_word = tl->dm_word = UINT32_MAX;
		uint32_t db = t->impl == P4TI_SIMPLE ? t->data_bytes : 0;
		tl->value_size = round8((uint32_t)sizeof(struct p4_tval_hdr) + db);
		tl->capacity = t->max_size;
		if (t->impl != P4TI_SIMPLE && p->profiles[t->profile].max_size > 0) {
			for (uint32_t k = 0; k < t->n_actions; k++)
				if (p->actions[t->actions[k]].data_bytes > prof_data)
					prof_data = p->actions[t->actions[k]].data_bytes;
		}
		switch (t->cls) {
		case P4TC_NOKEY:
			break;
		case P4TC_EXACT:
		case P4TC_LPM:
			tl->key_size = round8(t->key_bytes + (t->cls == P4TC_LPM ? 1u : 0u));
			if (t->cls == P4TC_LPM) {
				tl->ctl_word = w;
				w += P4_LPM_WORDS;
			}
			break;
		case P4TC_TERNARY:
			for (uint32_t k = 0; k < t->n_keys; k++)
				tl->has_range |= t->keys[k].match == P4M_RANGE;
			tl->trec_key = (uint32_t)sizeof(struct p4_trec_hdr);
			tl->trec_mask = tl->trec_key + t->key_bytes;
			tl->trec_hi = tl->trec_mask + t->key_bytes;
			tl->trec_data = tl->trec_hi + (tl->has_range ? t->key_bytes : 0);
			tl->trec_data = (tl->trec_data + 3u) & ~3u;
			tl->trec_size = round8(tl->trec_data + db);
			tl->tcap = t->max_size;
			if (tl->tcap > P4_TERN_MAX) {
				snprintf(err, errlen, "table '%s': %u entries; a ternary or range table holds "
					 "at most %u", t->name, t->max_size, P4_TERN_MAX);
				return -EINVAL;
			}
			if (tl->trec_size > INNET_PKT_MAX) {
				snprintf(err, errlen, "table '%s': records of %u bytes", t->name, tl->trec_size);
				return -EINVAL;
			}
			tl->ctl_word = w;
			w += 3;
			break;
		}
		if (t->direct_counter >= 0) {
			tl->dc_word = w;
			w += 2 * t->max_size;
		}
		if (t->direct_meter >= 0) {
			tl->dm_word = w;
			w += P4_METER_WORDS * t->max_size;
		}
		/* a default entry the control plane may change lives in p4_defaults */
		tl->default_dynamic = !(t->has_default && t->default_const && t->default_entry_const);
	}
	if (w > (1u << 28)) {
		snprintf(err, errlen, "the program's counters and meters need %u words: too many", w);
		return -EINVAL;
	}
	lay->n_words = w;
	if ((lay->r_words = add_reg(&c, "p4_words", 8, w)) < 0)
		return -EINVAL;

	/* P4 registers, packed by element size */
	static const uint32_t cls_bytes[4] = { 1, 2, 4, 8 };
	static const char *const cls_names[4] = { "p4_r1", "p4_r2", "p4_r4", "p4_r8" };
	uint32_t cls_count[4] = { 0 }, r16 = 0;
	for (uint32_t i = 0; i < p->n_registers; i++) {
		uint32_t b = p4_bytes(p->registers[i].width);
		struct p4_rlayout *rl = &lay->regs[i];
		if (b > 16) {
			rl->elem = b; /* its own innet register, below */
			rl->base = 0;
			continue;
		}
		if (b > 8) {
			rl->elem = 16;
			rl->base = r16;
			r16 += p->registers[i].size;
			continue;
		}
		int k = b == 1 ? 0 : b == 2 ? 1 : b <= 4 ? 2 : 3;
		rl->elem = cls_bytes[k];
		rl->base = cls_count[k];
		cls_count[k] += p->registers[i].size;
	}
	for (int k = 0; k < 4; k++)
		if (cls_count[k] > 0 && (lay->r_cls[k] = add_reg(&c, cls_names[k], cls_bytes[k], cls_count[k])) < 0)
			return -EINVAL;
	if (r16 > 0 && (lay->r_r16 = add_reg(&c, "p4_r16", 16, r16)) < 0)
		return -EINVAL;
	for (uint32_t i = 0; i < p->n_registers; i++) {
		if (lay->regs[i].elem <= 16)
			continue;
		/* a register wider than 128 bits: big-endian bytes, as its field's */
		char *nm = p4_alloc(a, 24);
		if (nm == NULL) {
			snprintf(err, errlen, "out of memory");
			return -ENOMEM;
		}
		snprintf(nm, 24, "p4_rw%u", i);
		if ((lay->regs[i].ireg = add_reg(&c, nm, lay->regs[i].elem, p->registers[i].size)) < 0)
			return -EINVAL;
	}
	for (uint32_t i = 0; i < p->n_registers; i++) {
		uint32_t e = lay->regs[i].elem;
		if (e <= 16)
			lay->regs[i].ireg = e == 16 ? lay->r_r16 : lay->r_cls[e == 1 ? 0 : e == 2 ? 1 : e == 4 ? 2 : 3];
	}

	/* ternary records */
	for (uint32_t i = 0; i < p->n_tables; i++) {
		struct p4_tlayout *tl = &lay->tables[i];
		if (p->tables[i].cls != P4TC_TERNARY)
			continue;
		char *nm = p4_alloc(a, 80);
		if (nm == NULL)
			return -ENOMEM;
		snprintf(nm, 80, "p4_tern_%u", i);
		if ((tl->treg = add_reg(&c, nm, tl->trec_size, 2 * (tl->tcap ? tl->tcap : 1))) < 0)
			return -EINVAL;
	}

	/* the digest / log ring */
	uint32_t dig = 0;
	for (uint32_t i = 0; i < p->n_llists; i++)
		if (p->llists[i].bytes > dig)
			dig = p->llists[i].bytes;
	lay->digest_bytes = dig;
	uint32_t body = dig > 8 * P4_LOG_VALUES ? dig : 8 * P4_LOG_VALUES;
	lay->ring_size = round8((uint32_t)sizeof(struct p4_ring_hdr) + body);
	if ((lay->r_ring = add_reg(&c, "p4_ring", lay->ring_size, P4_RING_SLOTS)) < 0)
		return -EINVAL;

	/* parse value sets */
	if (p->n_vsets > 0) {
		uint32_t eb = 0, mx = 0;
		for (uint32_t i = 0; i < p->n_vsets; i++) {
			/* a member as the key holds it: each key element byte-padded */
			uint32_t kb = p4_bytes(p->vsets[i].width);
			for (uint32_t st = 0; st < p->n_states; st++)
				for (uint32_t k = 0; k < p->states[st].n_trans; k++)
					if (p->states[st].trans[k].kind == P4T_VSET &&
					    p->states[st].trans[k].vset == (int)i &&
					    p->states[st].key_bytes > kb)
						kb = p->states[st].key_bytes;
			uint32_t b = 2 * kb;
			eb = b > eb ? b : eb;
			mx = p->vsets[i].max_size > mx ? p->vsets[i].max_size : mx;
		}
		lay->vset_entry = round8(eb);
		lay->vset_max = mx;
		if ((lay->r_vsets = add_reg(&c, "p4_vsets", lay->vset_entry, p->n_vsets * mx)) < 0)
			return -EINVAL;
	}

	/* innet tables: exact and lpm tables, then the auxiliaries */
	for (uint32_t i = 0; i < p->n_tables; i++) {
		struct p4_tlayout *tl = &lay->tables[i];
		if (p->tables[i].cls != P4TC_EXACT && p->tables[i].cls != P4TC_LPM)
			continue;
		if ((tl->itable = add_table(&c, p->tables[i].name, tl->key_size, tl->value_size,
					    tl->capacity)) < 0)
			return -EINVAL;
	}
	uint32_t dyn = 0, dv = 8;
	for (uint32_t i = 0; i < p->n_tables; i++)
		if (lay->tables[i].default_dynamic) {
			dyn++;
			if (lay->tables[i].value_size > dv)
				dv = lay->tables[i].value_size;
		}
	lay->default_value = dv;
	if (dyn > 0 && (lay->t_defaults = add_table(&c, "p4_defaults", 8, dv, dyn)) < 0)
		return -EINVAL;
	if ((lay->t_mcast = add_table(&c, "p4_mcast", 8, (uint32_t)sizeof(struct p4_mcast_group),
				      512)) < 0)
		return -EINVAL;
	if (p->n_profiles > 0) {
		uint32_t cap = 0;
		for (uint32_t i = 0; i < p->n_profiles; i++)
			cap += 2 * p->profiles[i].max_size;
		lay->prof_data = prof_data;
		uint32_t mv = round8((uint32_t)sizeof(struct p4_tval_hdr) + prof_data);
		uint32_t gv = round8(8 + 4 * P4_GROUP_MAX);
		lay->prof_value = mv > gv ? mv : gv;
		if ((lay->t_prof = add_table(&c, "p4_prof", 8, lay->prof_value, cap)) < 0)
			return -EINVAL;
	}
	return 0;
}
