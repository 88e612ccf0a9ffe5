/*
 * cp.c — the control plane's view of a program instance (innet/switch.h,
 * innet_cp_*): its name and program, registers, tables and multicast groups,
 * read and written from the control thread, init, on_cpu and on_ctl, with
 * the data path running. Registers are atomic per element; table writers
 * and group updates take the instance's cp_lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/switch_ctl.h"
#include "engine/switch_pvt.h"

/* ------------------------------------------------------------------------ */
/* Control plane: registers, tables, groups                                   */

const char *innet_cp_name(const struct innet_cp *cp)
{
	return cp->name;
}

const struct innet_program *innet_cp_program(const struct innet_cp *cp)
{
	return cp->program;
}

struct innet_switch *innet_cp_switch(struct innet_cp *cp)
{
	return cp->sw;
}

int innet_cp_reg_find(const struct innet_cp *cp, const char *name)
{
	for (uint32_t i = 0; i < cp->n_regs; i++)
		if (!strcmp(cp->regs[i].name, name))
			return (int)i;
	return -ENOENT;
}

const struct innet_reg *innet_cp_reg(const struct innet_cp *cp, unsigned id)
{
	return id < cp->n_regs ? &cp->regs[id] : NULL;
}

static void *cp_elem(struct innet_cp *cp, unsigned id, uint32_t idx, int *rc)
{
	if (id >= cp->n_regs) {
		*rc = -EINVAL;
		return NULL;
	}
	if (idx >= cp->regs[id].count) {
		*rc = -ERANGE;
		return NULL;
	}
	*rc = 0;
	return cp->regs[id].mem + (size_t)idx * cp->regs[id].stride;
}

int innet_cp_reg_read(struct innet_cp *cp, unsigned id, uint32_t idx, uint64_t *val)
{
	int rc;
	void *p = cp_elem(cp, id, idx, &rc);
	if (p == NULL)
		return rc;
	switch (cp->regs[id].width) {
	case 8: *val = __atomic_load_n((uint64_t *)p, __ATOMIC_ACQUIRE); return 0;
	case 4: *val = __atomic_load_n((uint32_t *)p, __ATOMIC_ACQUIRE); return 0;
	case 2: *val = __atomic_load_n((uint16_t *)p, __ATOMIC_ACQUIRE); return 0;
	case 1: *val = __atomic_load_n((uint8_t *)p, __ATOMIC_ACQUIRE); return 0;
	}
	return -EINVAL;
}

int innet_cp_reg_write(struct innet_cp *cp, unsigned id, uint32_t idx, uint64_t val)
{
	int rc;
	void *p = cp_elem(cp, id, idx, &rc);
	if (p == NULL)
		return rc;
	switch (cp->regs[id].width) {
	case 8: __atomic_store_n((uint64_t *)p, val, __ATOMIC_RELEASE); return 0;
	case 4: __atomic_store_n((uint32_t *)p, (uint32_t)val, __ATOMIC_RELEASE); return 0;
	case 2: __atomic_store_n((uint16_t *)p, (uint16_t)val, __ATOMIC_RELEASE); return 0;
	case 1: __atomic_store_n((uint8_t *)p, (uint8_t)val, __ATOMIC_RELEASE); return 0;
	}
	return -EINVAL;
}

int innet_cp_reg_read_bytes(struct innet_cp *cp, unsigned id, uint32_t idx, void *dst, uint32_t n)
{
	int rc;
	void *p = cp_elem(cp, id, idx, &rc);
	if (p == NULL)
		return rc;
	if (n > cp->regs[id].width)
		return -EINVAL;
	memcpy(dst, p, n);
	return 0;
}

int innet_cp_reg_write_bytes(struct innet_cp *cp, unsigned id, uint32_t idx, const void *src, uint32_t n)
{
	int rc;
	void *p = cp_elem(cp, id, idx, &rc);
	if (p == NULL)
		return rc;
	if (n > cp->regs[id].width)
		return -EINVAL;
	memcpy(p, src, n);
	return 0;
}

int innet_cp_table_find(const struct innet_cp *cp, const char *name)
{
	for (uint32_t i = 0; i < cp->n_tables; i++) {
		struct innet_table_info info;
		innet_table_info_get(cp->tables[i], &info);
		if (!strcmp(info.name, name))
			return (int)i;
	}
	return -ENOENT;
}

int innet_cp_table_info(const struct innet_cp *cp, unsigned id, struct innet_table_info *info)
{
	if (id >= cp->n_tables)
		return -EINVAL;
	innet_table_info_get(cp->tables[id], info);
	return 0;
}

int innet_cp_table_add(struct innet_cp *cp, unsigned id, const void *key, const void *val)
{
	return id < cp->n_tables ? innet_table_put(cp->tables[id], key, val) : -EINVAL;
}

int innet_cp_table_del(struct innet_cp *cp, unsigned id, const void *key)
{
	return id < cp->n_tables ? innet_table_del(cp->tables[id], key) : -EINVAL;
}

int innet_cp_table_get(struct innet_cp *cp, unsigned id, const void *key, void *val)
{
	return id < cp->n_tables ? innet_table_get(cp->tables[id], key, val) : -EINVAL;
}

int innet_cp_table_foreach(struct innet_cp *cp, unsigned id,
			   int (*fn)(const void *key, const void *val, void *arg), void *arg)
{
	return id < cp->n_tables ? innet_table_iter(cp->tables[id], fn, arg) : -EINVAL;
}

uint32_t innet_cp_n_groups(const struct innet_cp *cp)
{
	return cp->n_groups;
}

uint32_t innet_cp_n_regs(const struct innet_cp *cp)
{
	return cp->n_regs;
}

uint32_t innet_cp_n_tables(const struct innet_cp *cp)
{
	return cp->n_tables;
}

void *innet_cp_priv(const struct innet_cp *cp)
{
	return cp->priv;
}

uint32_t innet_cp_n_timers(const struct innet_cp *cp)
{
	return cp->n_timers;
}

int innet_cp_group_set(struct innet_cp *cp, uint32_t group, const struct innet_member *m, uint32_t n)
{
	if (group >= cp->n_groups)
		return -ENOENT;
	if (n > INNET_MAX_GROUP_MEMBERS)
		return -E2BIG;
	for (uint32_t i = 0; i < n; i++)
		if (m[i].port >= cp->sw->n_ports)
			return -EINVAL;
	struct innet_group *g = &cp->groups[group];
	pthread_mutex_lock(&cp->cp_lock);
	atomic_fetch_add_explicit(&g->seq, 1, memory_order_acq_rel); /* odd: writing */
	innet_shared_store(g->m, m, n * (uint32_t)sizeof(*m));
	__atomic_store_n(&g->n, n, __ATOMIC_RELEASE);
	atomic_fetch_add_explicit(&g->seq, 1, memory_order_release);  /* even: stable */
	const struct innet_target_dev *t = &cp->sw->target;
	int rc = t->ops->group_sync != NULL ? t->ops->group_sync(t->priv, cp, group, m, n) : 0;
	pthread_mutex_unlock(&cp->cp_lock);
	return rc;
}

int innet_cp_group_get(struct innet_cp *cp, uint32_t group, struct innet_member *m, uint32_t max)
{
	if (group >= cp->n_groups)
		return -ENOENT;
	struct innet_group *g = &cp->groups[group];
	pthread_mutex_lock(&cp->cp_lock); /* writers hold it: a stable copy */
	uint32_t n = g->n < max ? g->n : max;
	memcpy(m, g->m, n * sizeof(*m));
	uint32_t total = g->n;
	pthread_mutex_unlock(&cp->cp_lock);
	return (int)total;
}

