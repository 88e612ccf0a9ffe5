/*
 * dp_user.c — the out-of-line part of the data-path API on the user-space
 * engine (innet/dp_user.h has the inline part): faults, blob registers and
 * their copies to and from the packet, a port's peer, tables. Called per
 * packet by handlers: no allocation, no locks, bounded.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/switch_pvt.h"

/* ------------------------------------------------------------------------ */
/* Data-plane helpers that are not inline                                     */

void innet__fault(struct innet_ctx *ctx, unsigned reason)
{
	if (ctx->fault == 0)
		ctx->fault = (uint16_t)reason;
}

/* The blob element idx of register r for an n-byte copy, after the checks
 * every blob helper makes; NULL (and the packet faulted) otherwise. A blob
 * wider than 8 bytes is one 64-bit word per stateful ALU on a PISA target:
 * the words beyond the first are accounted, within the budget. */
static uint8_t *blob_elem(struct innet_ctx *ctx, unsigned r, uint32_t idx, uint32_t n)
{
	struct innet_reg *reg = innet__reg(ctx, r, idx);
	if (reg == NULL)
		return NULL;
	if (n > reg->width) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return NULL;
	}
	ctx->use.reg_ops += (n > 8) ? (n + 7) / 8 - 1 : 0;
	if (INNET_UNLIKELY(ctx->use.reg_ops > ctx->reg_ops_budget)) {
		innet__fault(ctx, INNET_DROP_REG_BUDGET);
		return NULL;
	}
	return reg->mem + (size_t)idx * reg->stride;
}

void innet_reg_read_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, void *dst, uint32_t n)
{
	uint8_t *e = blob_elem(ctx, r, idx, n);
	if (e == NULL)
		memset(dst, 0, n);
	else
		memcpy(dst, e, n);
}

void innet_reg_write_bytes(struct innet_ctx *ctx, unsigned r, uint32_t idx, const void *src, uint32_t n)
{
	uint8_t *e = blob_elem(ctx, r, idx, n);
	if (e != NULL)
		memcpy(e, src, n);
}

void innet_reg_to_pkt(struct innet_ctx *ctx, unsigned r, uint32_t idx, struct innet_pkt *pkt,
		      uint32_t off, uint32_t n)
{
	uint8_t *p = innet_pkt_ptr(pkt, off, n);
	if (p == NULL) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return;
	}
	innet_reg_read_bytes(ctx, r, idx, p, n);
}

void innet_pkt_to_reg(struct innet_ctx *ctx, struct innet_pkt *pkt, uint32_t off, unsigned r,
		      uint32_t idx, uint32_t n)
{
	uint8_t *p = innet_pkt_ptr(pkt, off, n);
	if (p == NULL) {
		innet__fault(ctx, INNET_DROP_PKT_BOUNDS);
		return;
	}
	innet_reg_write_bytes(ctx, r, idx, p, n);
}

uint32_t innet_port_peer_ip(struct innet_ctx *ctx, uint16_t port)
{
	struct innet_switch *sw = ctx->prog->sw;
	return port < sw->n_ports ? sw->ports[port].conf.peer_ip : 0;
}

/* The table t of a data-path call whose key and value are the sizes the
 * handler passed (val_size UINT32_MAX: no value), or NULL (and a fault). */
static struct innet_table *dp_table(struct innet_ctx *ctx, unsigned t, uint32_t key_size,
				    uint32_t val_size)
{
	if (t >= ctx->n_tables) {
		innet__fault(ctx, INNET_DROP_REG_OOB);
		return NULL;
	}
	if (!innet_table_sizes_match(ctx->tables[t], key_size, val_size)) {
		innet__fault(ctx, INNET_DROP_TABLE_KEY);
		return NULL;
	}
	return ctx->tables[t];
}

int innet__table_lookup(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size,
			void *val, uint32_t val_size)
{
	ctx->use.table_ops++;
	struct innet_table *tb = dp_table(ctx, t, key_size, val_size);
	return tb != NULL ? innet_table_try_get(tb, key, val) : INNET_TABLE_FAULT;
}

int innet__table_insert(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size,
			const void *val, uint32_t val_size)
{
	ctx->use.table_ops++;
	if (ctx->model != INNET_MODEL_TRIO) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return INNET_TABLE_FAULT;
	}
	struct innet_table *tb = dp_table(ctx, t, key_size, val_size);
	return tb != NULL ? innet_table_try_put(tb, key, val) : INNET_TABLE_FAULT;
}

int innet__table_delete(struct innet_ctx *ctx, unsigned t, const void *key, uint32_t key_size)
{
	ctx->use.table_ops++;
	if (ctx->model != INNET_MODEL_TRIO) {
		innet__fault(ctx, INNET_DROP_MODEL_VIOLATION);
		return INNET_TABLE_FAULT;
	}
	struct innet_table *tb = dp_table(ctx, t, key_size, UINT32_MAX);
	return tb != NULL ? innet_table_try_del(tb, key) : INNET_TABLE_FAULT;
}

