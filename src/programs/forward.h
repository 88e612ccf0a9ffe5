/*
 * programs/forward.h — what the forward program's two sources share: its
 * state ids, drop reasons and config block (forward_dp.c reads it,
 * forward.c fills it in).
 */
#ifndef INNET_PROGRAMS_FORWARD_H
#define INNET_PROGRAMS_FORWARD_H

#include "innet/dp.h"

enum { FWD_R_PORT_MAP };
enum { FWD_T_ROUTES };

enum fwd_drop {
	FWD_NO_ROUTE = INNET_DROP_PROGRAM,
	FWD_BAD_VERSION,
	FWD_BAD_ROUTE,
	FWD_TOO_SHORT,
	FWD_BAD_MAGIC,
	FWD_NOT_PEER,
};

/* The config block. */
struct fwd_conf {
	uint8_t has_map;      /* a "map" setting was given */
	uint8_t peer_only;    /* drop packets not from the ingress port's peer */
};

INNET_DATAPATH_DECL(forward);

#endif /* INNET_PROGRAMS_FORWARD_H */
