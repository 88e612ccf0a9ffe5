/*
 * p4_res.c — a P4 program in the resource model's terms (innet/resources.h,
 * docs/resources.md): its own tables (exact in SRAM; ternary, LPM, range and
 * optional keys in TCAM), registers and meters, the headers it parses, and
 * the stages its tables need in dependency order — not the innet registers
 * and tables the translation uses (p4_layout.c), which no hardware target
 * would hold.
 *
 * The dependency chain: each pipeline's control graph (tables and
 * conditions, a DAG from its init node) is walked in topological order,
 * carrying for every field the latest stage that wrote it (the maximum over
 * all paths in). A table goes to
 *
 *   stage(T) = max(control floor, W[f] + 1 for every field f that T matches
 *              on or that its actions read or write)
 *
 * where the control floor is the stage of the condition or table that
 * decides whether T runs (a table may share its predecessor's stage: the
 * hardware predicates it). A condition goes to max(floor, W[f] + 1 for the
 * fields it reads). Ingress and egress share the stages (as on Tofino), so
 * the program needs the larger of the two chains. This is the textbook
 * match/action dependency rule; the real compiler also splits tables, packs
 * gateways and action data, and may do better (predication of
 * independent writes) or worse (register arrays accessed from two stages).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/resources.h"
#include "p4/p4.h"
#include "p4/p4_ir.h"

struct dep {
	const struct p4_prog *p;
	uint32_t *hbase;           /* [n_headers]: the header's valid bit; fields follow */
	uint32_t n_fids;
	uint8_t *mark;             /* [n_fids]: scratch set of fields */
};

static void mark_header(struct dep *d, int h, bool all)
{
	if (h < 0 || (uint32_t)h >= d->p->n_headers)
		return;
	const struct p4_htype *t = &d->p->htypes[d->p->headers[h].type];
	d->mark[d->hbase[h]] = 1;
	for (uint32_t f = 0; all && f < t->n_fields; f++)
		d->mark[d->hbase[h] + 1 + f] = 1;
}

/* Mark the fields e touches (whole headers when all: a write of a header). */
static void mark_expr(struct dep *d, const struct p4_expr *e, bool all)
{
	const struct p4_prog *p = d->p;
	if (e == NULL)
		return;
	switch (e->kind) {
	case P4E_FIELD:
		if (e->h >= 0 && (uint32_t)e->h < p->n_headers && e->f >= 0)
			d->mark[d->hbase[e->h] + 1 + (uint32_t)e->f] = 1;
		break;
	case P4E_HEADER:
		mark_header(d, e->h, all);
		break;
	case P4E_STACK:
	case P4E_STACK_FIELD:
		if (e->idx >= 0 && (uint32_t)e->idx < p->n_stacks)
			for (uint32_t i = 0; i < p->stacks[e->idx].size; i++)
				mark_header(d, p->stacks[e->idx].headers[i], true);
		break;
	case P4E_UNION:
		if (e->idx >= 0 && (uint32_t)e->idx < p->n_unions)
			for (uint32_t i = 0; i < p->unions[e->idx].n; i++)
				mark_header(d, p->unions[e->idx].headers[i], true);
		break;
	case P4E_UNION_STACK:
	case P4E_UNION_STACK_FIELD:
		if (e->idx >= 0 && (uint32_t)e->idx < p->n_ustacks) {
			const struct p4_union_stack *us = &p->ustacks[e->idx];
			for (uint32_t i = 0; i < us->size; i++) {
				const struct p4_union *un = &p->unions[us->unions[i]];
				for (uint32_t k = 0; k < un->n; k++)
					mark_header(d, un->headers[k], true);
			}
		}
		break;
	case P4E_FIELD_LIST:
		if (e->idx >= 0 && (uint32_t)e->idx < p->n_flists)
			for (uint32_t i = 0; i < p->flists[e->idx].n; i++)
				mark_expr(d, p->flists[e->idx].fields[i], false);
		break;
	case P4E_CALC:
		if (e->idx >= 0 && (uint32_t)e->idx < p->n_calcs)
			for (uint32_t i = 0; i < p->calcs[e->idx].n_in; i++)
				mark_expr(d, p->calcs[e->idx].in[i].e, false);
		break;
	case P4E_PARAMS:
		for (uint32_t i = 0; i < e->n_list; i++)
			mark_expr(d, e->list[i], false);
		break;
	default:
		break;
	}
	mark_expr(d, e->a, all);
	mark_expr(d, e->b, all);
	mark_expr(d, e->c, all);
}

static void mark_std(struct dep *d, enum p4_std_field f)
{
	const struct p4_fref *r = &d->p->std[f];
	if (r->h >= 0 && r->f >= 0)
		d->mark[d->hbase[r->h] + 1 + (uint32_t)r->f] = 1;
}

/* Every field a table reads or writes (keys, its actions' operands). */
static void mark_table(struct dep *d, const struct p4_table *t)
{
	const struct p4_prog *p = d->p;
	for (uint32_t k = 0; k < t->n_keys; k++)
		mark_expr(d, t->keys[k].target, false);
	if (t->profile >= 0 && (uint32_t)t->profile < p->n_profiles)
		for (uint32_t i = 0; i < p->profiles[t->profile].n_sel_in; i++)
			mark_expr(d, p->profiles[t->profile].sel_in[i], false);
	if (t->direct_meter >= 0)
		mark_expr(d, p->meters[t->direct_meter].result, false);
	for (uint32_t a = 0; a < t->n_actions; a++) {
		const struct p4_action *ac = &p->actions[t->actions[a]];
		for (uint32_t i = 0; i < ac->n_prims; i++) {
			const struct p4_prim *pr = &ac->prims[i];
			bool whole = pr->kind == P4P_ASSIGN_HEADER || pr->kind == P4P_ASSIGN_UNION ||
				     pr->kind == P4P_ASSIGN_HEADER_STACK ||
				     pr->kind == P4P_ASSIGN_UNION_STACK || pr->kind == P4P_PUSH ||
				     pr->kind == P4P_POP;
			for (uint32_t k = 0; k < pr->n_args; k++)
				mark_expr(d, pr->args[k], whole && k == 0);
			if (pr->kind == P4P_MARK_TO_DROP || pr->kind == P4P_DROP) {
				mark_std(d, P4S_EGRESS_SPEC);
				mark_std(d, P4S_MCAST_GRP);
			}
		}
	}
}

struct node_state {
	int32_t *w;                /* [n_fids]: latest stage that wrote the field, -1 none */
	int32_t floor;             /* control floor */
	bool reached;
	int32_t stage;             /* this node's stage */
	int pred;                  /* the node that set its stage (for the chain), -1 */
};

static int node_id(const struct p4_pipeline *pl, struct p4_node n)
{
	if (n.kind == P4N_TABLE) {
		for (uint32_t i = 0; i < pl->n_tables; i++)
			if (pl->tables[i] == n.idx)
				return (int)i;
		return -1;
	}
	if (n.kind == P4N_COND)
		return (int)pl->n_tables + n.idx;
	return -1;
}

/* The successors of node i (table nodes first, then conditions). */
static uint32_t succs(const struct p4_prog *p, const struct p4_pipeline *pl, uint32_t i, int *out,
		      uint32_t max)
{
	uint32_t n = 0;
	struct p4_node cand[4];
	uint32_t nc = 0;
	if (i < pl->n_tables) {
		const struct p4_table *t = &p->tables[pl->tables[i]];
		for (uint32_t a = 0; a < t->n_actions && n < max; a++) {
			int s = node_id(pl, t->next_by_action[a]);
			if (s >= 0)
				out[n++] = s;
		}
		cand[nc++] = t->next_hit;
		cand[nc++] = t->next_miss;
		cand[nc++] = t->base_next;
	} else {
		const struct p4_cond *c = &pl->conds[i - pl->n_tables];
		cand[nc++] = c->t;
		cand[nc++] = c->f;
	}
	for (uint32_t k = 0; k < nc && n < max; k++) {
		int s = node_id(pl, cand[k]);
		if (s >= 0)
			out[n++] = s;
	}
	return n;
}

static const char *node_name(const struct p4_prog *p, const struct p4_pipeline *pl, uint32_t i)
{
	return i < pl->n_tables ? p->tables[pl->tables[i]].name : pl->conds[i - pl->n_tables].name;
}

/* The chain of one pipeline: its deepest stage + 1 (0: no tables), and
 * the chain's names into chain. */
static int pipe_chain(struct dep *d, const struct p4_pipeline *pl, uint32_t *stages, char *chain,
		      size_t clen)
{
	const struct p4_prog *p = d->p;
	uint32_t n = pl->n_tables + pl->n_conds;
	*stages = 0;
	chain[0] = '\0';
	if (n == 0)
		return 0;
	struct node_state *ns = calloc(n, sizeof(*ns));
	int *order = calloc(n, sizeof(*order)), *stack = calloc(2 * (size_t)n + 2, sizeof(*stack));
	uint8_t *seen = calloc(n, 1);
	int32_t *wall = calloc((size_t)n * d->n_fids, sizeof(*wall));
	int rc = -ENOMEM;
	if (ns == NULL || order == NULL || stack == NULL || seen == NULL || wall == NULL)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		ns[i].w = wall + (size_t)i * d->n_fids;
		for (uint32_t f = 0; f < d->n_fids; f++)
			ns[i].w[f] = -1;
		ns[i].pred = -1;
	}
	/* topological order: iterative DFS post-order from init, reversed */
	int start = node_id(pl, pl->init);
	if (start < 0) {
		rc = 0;
		goto out;
	}
	uint32_t n_order = 0, sp = 0;
	int sc[64];
	stack[sp++] = start;
	seen[start] = 1;
	/* stack entries: node (>= 0) to expand, or ~node to emit */
	while (sp > 0) {
		int v = stack[--sp];
		if (v < 0) {
			order[n_order++] = ~v;
			continue;
		}
		stack[sp++] = ~v;
		uint32_t k = succs(p, pl, (uint32_t)v, sc, 64);
		for (uint32_t j = 0; j < k; j++)
			if (!seen[sc[j]] && sp < 2 * n + 2) {
				seen[sc[j]] = 1;
				stack[sp++] = sc[j];
			}
	}
	ns[start].reached = true;
	int deepest = -1;
	for (uint32_t oi = n_order; oi-- > 0;) {
		uint32_t v = (uint32_t)order[oi];
		struct node_state *s = &ns[v];
		if (!s->reached)
			continue;
		memset(d->mark, 0, d->n_fids);
		if (v < pl->n_tables)
			mark_table(d, &p->tables[pl->tables[v]]);
		else
			mark_expr(d, pl->conds[v - pl->n_tables].expr, false);
		int32_t st = s->floor;
		for (uint32_t f = 0; f < d->n_fids; f++)
			if (d->mark[f] && s->w[f] + 1 > st)
				st = s->w[f] + 1;
		s->stage = st;
		/* what this node writes: a table's marked fields (an over-estimate:
		 * read-only fields count as written, which can only add stages
		 * when a later table depends on a field only read here) */
		bool is_table = v < pl->n_tables;
		if (deepest < 0 || st > ns[deepest].stage)
			deepest = (int)v;
		uint32_t k = succs(p, pl, v, sc, 64);
		for (uint32_t j = 0; j < k; j++) {
			struct node_state *t = &ns[sc[j]];
			for (uint32_t f = 0; f < d->n_fids; f++) {
				int32_t w = s->w[f];
				if (is_table && d->mark[f] && st > w)
					w = st;
				if (w > t->w[f])
					t->w[f] = w;
			}
			if (!t->reached || st > t->floor) {
				t->floor = st;
				t->pred = (int)v;
			}
			t->reached = true;
		}
	}
	if (deepest >= 0) {
		*stages = (uint32_t)ns[deepest].stage + 1;
		/* the chain back along the nodes that raised a stage */
		int path[64], np = 0;
		for (int v = deepest; v >= 0 && np < 64; v = ns[v].pred)
			path[np++] = v;
		size_t off = 0;
		for (int i = np - 1; i >= 0 && off + 1 < clen; i--) {
			if (i > 0 && ns[path[i - 1]].stage == ns[path[i]].stage)
				continue;   /* the stage's last node names it */
			int w = snprintf(chain + off, clen - off, "%s%s", off ? " -> " : "",
					 node_name(p, pl, (uint32_t)path[i]));
			if (w < 0 || (size_t)w >= clen - off) {
				if (clen > 4)
					memcpy(chain + clen - 4, "...", 4);
				break;
			}
			off += (size_t)w;
		}
	}
	rc = 0;
out:
	free(ns);
	free(order);
	free(stack);
	free(seen);
	free(wall);
	return rc;
}

static bool table_tcam(const struct p4_table *t)
{
	for (uint32_t k = 0; k < t->n_keys; k++)
		if (t->keys[k].match == P4M_LPM || t->keys[k].match == P4M_TERNARY ||
		    t->keys[k].match == P4M_RANGE || t->keys[k].match == P4M_OPTIONAL)
			return true;
	return false;
}

int p4_resources(const struct p4_prog *p, struct innet_res_usage *u)
{
	struct innet_res_measured m = u->m;
	struct innet_res_ebpf eb = u->ebpf;
	char name[INNET_NAME_MAX];
	snprintf(name, sizeof(name), "%s", u->program[0] ? u->program : (p->name ? p->name : "p4"));
	innet_res_usage_init(u, name, INNET_MODEL_PISA);
	u->m = m;
	u->ebpf = eb;
	/* the translation's own operations are not the P4 program's: keep what
	 * the packets did (passes, recirculations), not how innet counted them */
	u->m.reg_ops = u->m.table_ops = u->m.alu_ops = 0;
	u->m.max_reg_ops = u->m.max_table_ops = u->m.max_alu_ops = 0;

	/* the PHV: every header and metadata instance (less the 42 bytes of
	 * L2-L4 the model counts for innet's own dispatch) */
	uint64_t bits = 0;
	for (uint32_t h = 0; h < p->n_headers; h++) {
		const struct p4_htype *t = &p->htypes[p->headers[h].type];
		bits += t->varbit >= 0 ? 8u * t->max_bytes : t->fixed_bits;
	}
	uint64_t bytes = (bits + 7) / 8;
	u->parse_bytes = bytes > 42 ? (uint32_t)(bytes - 42) : 0;

	int rc = 0;
	for (uint32_t i = 0; i < p->n_registers && rc == 0; i++) {
		uint32_t w = (p->registers[i].width + 7) / 8;
		rc = innet_res_usage_add_reg(u, p->registers[i].name, w ? w : 1,
					     p->registers[i].size ? p->registers[i].size : 1);
	}
	/* meters keep their state (two buckets, a time stamp) in stateful ALUs
	 * as registers do; counters live in statistics memory (not modelled) */
	for (uint32_t i = 0; i < p->n_meters && rc == 0; i++)
		if (!p->meters[i].direct)
			rc = innet_res_usage_add_reg(u, p->meters[i].name, 8,
						     p->meters[i].size ? p->meters[i].size : 1);
	if (rc == -ENOSPC)
		rc = 0;   /* more than the model lists: the first INNET_MAX_REGS */
	for (uint32_t i = 0; i < p->n_tables && rc == 0; i++) {
		const struct p4_table *t = &p->tables[i];
		if (t->n_keys == 0)
			continue;   /* a keyless table is an action in a stage (VLIW), no memory */
		if (u->n_tables == INNET_MAX_TABLES) {
			/* fold the rest into the last line */
			struct innet_res_table *l = &u->tables[INNET_MAX_TABLES - 1];
			if (strncmp(l->name, "(and ", 5) != 0)
				snprintf(l->name, sizeof(l->name), "(and more tables)");
			l->capacity += t->max_size;
			if (t->key_bytes > l->key_size)
				l->key_size = t->key_bytes;
			if (t->data_bytes + 1 > l->value_size)
				l->value_size = t->data_bytes + 1;
			l->tcam |= table_tcam(t);
			continue;
		}
		/* value: the action's data and which action (a byte) */
		rc = innet_res_usage_add_table(u, t->name, t->key_bytes ? t->key_bytes : 1,
					       t->data_bytes + 1, t->max_size ? t->max_size : 1);
		if (rc == 0)
			u->tables[u->n_tables - 1].tcam = table_tcam(t);
	}
	if (rc != 0)
		return rc;

	/* the dependency chain */
	struct dep d = { .p = p };
	d.hbase = calloc(p->n_headers + 1, sizeof(*d.hbase));
	if (d.hbase == NULL)
		return -ENOMEM;
	for (uint32_t h = 0; h < p->n_headers; h++) {
		d.hbase[h] = d.n_fids;
		d.n_fids += 1 + p->htypes[p->headers[h].type].n_fields;
	}
	d.mark = calloc(d.n_fids + 1, 1);
	if (d.mark == NULL) {
		free(d.hbase);
		return -ENOMEM;
	}
	char chain[2][sizeof(u->dep_chain)];
	uint32_t st[2] = { 0, 0 };
	for (int k = 0; k < 2 && rc == 0; k++)
		rc = pipe_chain(&d, &p->pipes[k], &st[k], chain[k], sizeof(chain[k]));
	free(d.hbase);
	free(d.mark);
	if (rc != 0)
		return rc;
	int k = st[1] > st[0] ? 1 : 0;
	u->dep_stages = st[k];
	if (st[k] > 0)
		snprintf(u->dep_chain, sizeof(u->dep_chain), "%s: %s", k ? "egress" : "ingress",
			 chain[k]);
	return 0;
}
