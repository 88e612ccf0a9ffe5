/*
 * consensus/kv_rejoin.h — completing the join of an acceptor switch that
 * restarted with empty state (`innet kv rejoin`), over the switches' control
 * sockets and the backup coordinators' status sockets: what
 * innet_paxos_acceptor_join() does for a host acceptor.
 *
 * The joiner was restarted silent ("join": true): everything it voted or
 * promised before is behind it. Then
 *   J  = max(the next instance of the coordinator in charge; over the other
 *        acceptors read: hi, trim, the highest instance in a slot)
 *   JB = the others' highest range promise
 * are read from every other acceptor that answers (at least N - majority + 1
 * must), and the coordinator in charge is the one whose ballot is at least
 * JB: the coordinator switch, or the serving backup coordinator with the
 * highest ballot after a takeover (its status socket, kv_leader.h). The
 * joiner gets join_inst = J, join_ballot = JB and stops being silent. While
 * too few acceptors answer or no coordinator is in charge (a takeover in
 * progress) it reads again, every 100 ms for up to wait_ms (`innet kv
 * rejoin`: 5 s); then it gives up and the acceptor stays silent, which is
 * safe.
 *
 * src/consensus/kv_rejoin.c; moved out of src/cli/cmd_kv.c. Nothing is
 * printed: notes for the user go to `say`, failures to err.
 */
#ifndef INNET_CONSENSUS_KV_REJOIN_H
#define INNET_CONSENSUS_KV_REJOIN_H

#include <stddef.h>
#include <stdint.h>

#include "innet/switch.h"

struct innet_topology;

/* What a completed (or attempted) join found. */
struct kv_rejoin {
	uint32_t n_acceptors;        /* acceptor switches in the topology */
	uint32_t need;               /* others that must answer: N - majority + 1 */
	uint32_t read;               /* others that answered */
	uint64_t join_inst;          /* J */
	uint64_t join_ballot;        /* JB */
	char who[INNET_NAME_MAX];    /* the coordinator in charge */
	uint64_t ballot;             /* its ballot */
	uint64_t next;               /* its next instance */
};

/* Find acceptor switch `name` in t: its node into *a and its paxos_acceptor
 * instance name into *inst. 0, or -EINVAL with err (no such acceptor, or no
 * coordinator switch in t). */
int kv_rejoin_find(const struct innet_topology *t, const char *name, uint32_t *a,
		   const char **inst, char *err, size_t errlen);

/* Complete the join of acceptor switch a, restarted silent. 0; -EAGAIN too
 * few other acceptors answered, -ESRCH no coordinator in charge (the
 * acceptor stays silent: safe; err says why, r says what was read); -EIO
 * writing the joiner's registers failed (err). `say` (may be NULL) gets
 * notes: which acceptor does not answer, once. */
int kv_rejoin_complete(const struct innet_topology *t, uint32_t a, unsigned wait_ms,
		       struct kv_rejoin *r, void (*say)(void *arg, const char *line), void *arg,
		       char *err, size_t errlen);

#endif /* INNET_CONSENSUS_KV_REJOIN_H */
