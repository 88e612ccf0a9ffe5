/*
 * programs/l2fwd.h — what the l2fwd program's two sources share.
 */
#ifndef INNET_PROGRAMS_L2FWD_H
#define INNET_PROGRAMS_L2FWD_H

#include "innet/dp.h"

#define L2_ETH_HDR_LEN 14u
#define L2_UNMAPPED    0xffffu

enum { L2_R_RX, L2_R_TX };

enum l2fwd_drop {
	L2_NOT_MAPPED = INNET_DROP_PROGRAM,
	L2_RUNT,
	L2_NOT_A_FRAME,
};

/* The config block. */
struct l2fwd_conf {
	uint16_t map[INNET_MAX_PORTS];   /* egress port by ingress port, or L2_UNMAPPED */
};

INNET_DATAPATH_DECL(l2fwd);

#endif /* INNET_PROGRAMS_L2FWD_H */
