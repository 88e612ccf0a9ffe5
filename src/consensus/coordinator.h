/*
 * consensus/coordinator.h — what the Paxos coordinator's two sources share.
 */
#ifndef INNET_CONSENSUS_COORDINATOR_H
#define INNET_CONSENSUS_COORDINATOR_H

#include "innet/dp.h"

enum { CO_R_NEXT, CO_R_BALLOT };

enum coord_drop {
	CO_TOO_SHORT = INNET_DROP_PROGRAM,
	CO_BAD_MAGIC,
	CO_BAD_VERSION,
	CO_WRONG_SERVICE,
	CO_BAD_LENGTH,
	CO_BAD_REQUEST,
	CO_UNEXPECTED_TYPE,
	CO_NACKED,
};

INNET_DATAPATH_DECL(paxos_coordinator);

#endif /* INNET_CONSENSUS_COORDINATOR_H */
