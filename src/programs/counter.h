/*
 * programs/counter.h — what the counter program's two sources share.
 */
#ifndef INNET_PROGRAMS_COUNTER_H
#define INNET_PROGRAMS_COUNTER_H

#include "innet/dp.h"

enum { CNT_R_VALUE };

enum counter_drop {
	CNT_TOO_SHORT = INNET_DROP_PROGRAM,
	CNT_BAD_MAGIC,
	CNT_BAD_VERSION,
	CNT_WRONG_SERVICE,
	CNT_IS_REPLY,
};

/* The config block. */
struct counter_conf {
	uint32_t size;        /* counters */
};

INNET_DATAPATH_DECL(counter);

#endif /* INNET_PROGRAMS_COUNTER_H */
