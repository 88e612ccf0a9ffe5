/*
 * consensus/hostacc.h — the Paxos acceptor as an ordinary host process (the
 * host-based baseline of bench/consensus.sh, `innet paxos acceptor`). Same
 * protocol and rules as the switch program (acceptor.c): a ring of slots
 * reused only below the learners' trim, RANGE promises, NACKs; plain arrays
 * instead of registers, one thread, recvmmsg/sendmmsg bursts.
 */
#ifndef INNET_CONSENSUS_HOSTACC_H
#define INNET_CONSENSUS_HOSTACC_H

#include <signal.h>
#include <stdint.h>

#include "innet/consensus.h"

struct hostacc_conf {
	uint32_t bind_ip;                       /* host order */
	uint16_t bind_udp;
	uint16_t id;                            /* 0..63 */
	uint32_t ring;                          /* slots (default 1024) */
	struct innet_addr learners[64];         /* 2B destinations */
	uint32_t n_learners;
	uint32_t trim_learners;                 /* default n_learners */
	volatile sig_atomic_t *stop;
};

/* Serve until *stop. 0 or -errno (message on stderr). */
int hostacc_serve(const struct hostacc_conf *c);

#endif
