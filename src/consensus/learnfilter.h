/*
 * consensus/learnfilter.h — the learner filter (learnfilter.bpf.c: an XDP
 * program on a learner's receive interfaces that counts 2Bs and passes one
 * per quorum) and its loader (learnfilter.c). Shared by both: kernel types.
 */
#ifndef INNET_CONSENSUS_LEARNFILTER_H
#define INNET_CONSENSUS_LEARNFILTER_H

#include <linux/types.h>

#define LF_SLOTS     8192u   /* instances tracked at once (instance % LF_SLOTS) */
#define LF_F_QUORUM  0x02u   /* = PAXOS_F_QUORUM (consensus/wire.h) */
#define LF_MAX_IFACES 16u

/* Set by the loader before the verifier runs (.rodata). */
struct lf_conf {
	__u16 port;          /* the learner's UDP port (host order) */
	__u16 quorum_mark;   /* 1: drop 2Bs before the quorum too and mark the quorum's */
	__u32 majority;      /* acceptors / 2 + 1 */
};

/* Per CPU; the loader sums them. */
struct lf_stats {
	__u64 seen;              /* 2Bs to the learner's port */
	__u64 passed_quorum;     /* the 2B that completed a quorum (marked in quorum mode) */
	__u64 dropped_before;    /* quorum mode: 2Bs before the quorum */
	__u64 dropped_redundant; /* 2Bs after the quorum went up */
	__u64 passed_before;     /* redundant-only mode: 2Bs before the quorum */
	__u64 passed_other;      /* older instance or ballot, empty, fragmented, id >= 64 */
	__u64 mark_cleared;      /* 2Bs that arrived carrying the mark */
};

#ifndef __bpf__
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct learnfilter;

/* Load the filter for a learner on UDP port `port` with n_acceptors, and
 * attach it (XDP, driver mode) to every interface in ifaces (comma-separated
 * names, or "all": every interface of this network namespace but lo).
 * An XDP program already on an interface (netns mode's XDP_PASS) is replaced
 * and put back by learnfilter_detach. NULL with a message in err. */
struct learnfilter *learnfilter_attach(const char *ifaces, uint16_t port, uint32_t n_acceptors,
				       bool quorum_mark, char *err, size_t errlen);
/* Sum of the per-CPU counters. */
void learnfilter_stats(const struct learnfilter *f, struct lf_stats *out);
/* Detach from every interface (restoring what was there) and free. 0, or
 * -errno of the first interface that failed. */
int learnfilter_detach(struct learnfilter *f);
#endif

#endif /* INNET_CONSENSUS_LEARNFILTER_H */
