/* Breaks the contract: a table value larger than any table can hold
 * (INNET_TABLE_VALUE_MAX; on XDP, a table is a map and its value the map's). */
#include "innet/dp.h"

struct big { uint8_t b[INNET_TABLE_VALUE_MAX + 8]; };

static enum innet_action h(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	uint32_t key = 1;
	struct big *v = innet_scratch(ctx);
	if (v == NULL || innet_table_lookup(ctx, 0, &key, v) != 0)
		return innet_drop(pkt, INNET_DROP_PROGRAM);
	return innet_reflect(pkt);
}

INNET_DATAPATH(contract_bigvalue, h, NULL)
