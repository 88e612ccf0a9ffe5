/*
 * learnfilter.bpf.c — the learner filter: an XDP program on a Paxos learner's
 * own receive interfaces that counts 2Bs so that the learner process does not
 * have to (in the spirit of Electrode, NSDI '23). Loaded by
 * src/consensus/learnfilter.c (innet paxos bench --learner-filter).
 *
 *   acceptor a0 ─2B─┐
 *   acceptor a1 ─2B─┼─▶ [veth: this program] ─▶ learner socket (paxos.c)
 *   acceptor a2 ─2B─┘        ▲ per instance % LF_SLOTS: instance, ballot,
 *                            │ acceptors seen, quorum passed
 *
 * Per 2B (UDP to lf_conf.port, innet base header, service Paxos, type 2B,
 * status OK, acceptor id < 64), under the slot's spin lock:
 *   - a newer instance than the slot's, or a higher ballot: the slot restarts;
 *   - an older instance or a lower ballot: passed up, untouched except for
 *     the mark (the library counts it itself);
 *   - else the acceptor's bit is set; the 2B that makes the set a majority
 *     (exactly one per instance and ballot: the lock) is passed up with
 *     PAXOS_F_QUORUM in the base header's flags; the ones after it are
 *     dropped (redundant), and the ones before it are dropped too (quorum
 *     mode) or passed unmarked (lf_conf.quorum_mark == 0: only the redundant
 *     ones go).
 * Every 2B it passes that did not complete a quorum has PAXOS_F_QUORUM
 * cleared, so a sender elsewhere cannot forge the mark through this
 * interface. Everything else (1B, NACK, TRIM, other ports, other protocols,
 * IP fragments: a value larger than the MTU is counted by the library, as
 * without the filter) passes untouched; a fragmented 2B's mark is cleared.
 * The learner trusts the mark only when the code that attached this program
 * told it to (innet_paxos_trust_filter).
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "consensus/learnfilter.h"

/* The wire layout (src/consensus/wire.h, include/innet/wire.h), repeated
 * here with kernel types: the library's headers use <stdint.h>. */
struct lf_innet_hdr {
	__u8 magic, version, service, flags;
	__u16 dst_node, src_node;
} __attribute__((packed));

struct lf_paxos_hdr {
	__u8 type, status;
	__u16 node;
	__u32 ballot, vballot;
	__u16 vlen, reserved;
	__u64 instance;
} __attribute__((packed));

#define LF_MAGIC   0x1E
#define LF_VERSION 1
#define LF_SVC     2   /* INNET_SVC_PAXOS */
#define LF_2B      5   /* PAXOS_2B */
#define LF_OK      0   /* PAXOS_OK */

const volatile struct lf_conf lf_conf = { 0 };

struct lf_slot {
	struct bpf_spin_lock lock;
	__u32 ballot;
	__u64 inst1;     /* instance + 1; 0 = unused */
	__u64 votes;     /* acceptors seen at (inst, ballot) */
	__u32 passed;    /* the quorum's 2B went up */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct lf_slot);
	__uint(max_entries, LF_SLOTS);
} lf_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct lf_stats);
	__uint(max_entries, 1);
} lf_stats SEC(".maps");

/* Set or clear the mark, keeping the UDP checksum right (RFC 1624; 0 = none
 * stays none). The flags byte is the low half of the payload's second
 * 16-bit word. */
static __always_inline void set_mark(struct udphdr *udp, struct lf_innet_hdr *h, bool on)
{
	__u8 old = h->flags, nw = on ? (old | LF_F_QUORUM) : (old & ~LF_F_QUORUM);
	if (old == nw)
		return;
	h->flags = nw;
	if (udp->check == 0)
		return;
	__u32 sum = (__u16)~bpf_ntohs(udp->check);
	sum += (__u16)~(__u16)old;   /* the word's high byte (service) cancels out */
	sum += nw;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 c = (__u16)~sum;
	udp->check = bpf_htons(c ? c : 0xffff);
}

SEC("xdp")
int innet_learnfilter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct lf_stats *st = bpf_map_lookup_elem(&lf_stats, &zero);
	if (st == 0)
		return XDP_PASS;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	__u16 frag = bpf_ntohs(ip->frag_off);
	if (frag & 0x1fff)
		return XDP_PASS;   /* a later fragment: no UDP header here */
	struct udphdr *udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(lf_conf.port))
		return XDP_PASS;
	struct lf_innet_hdr *h = (void *)(udp + 1);
	struct lf_paxos_hdr *p = (void *)(h + 1);
	if ((void *)(p + 1) > end || h->magic != LF_MAGIC || h->version != LF_VERSION ||
	    h->service != LF_SVC || p->type != LF_2B)
		return XDP_PASS;
	st->seen++;
	if (h->flags & LF_F_QUORUM)
		st->mark_cleared++;
	__u16 node = bpf_ntohs(p->node);
	if ((frag & 0x2000) || p->status != LF_OK || node >= 64) {
		st->passed_other++;
		set_mark(udp, h, false);
		return XDP_PASS;
	}
	__u64 inst = bpf_be64_to_cpu(p->instance);
	__u32 ballot = bpf_ntohl(p->ballot);
	__u32 key = (__u32)(inst % LF_SLOTS);
	struct lf_slot *s = bpf_map_lookup_elem(&lf_slots, &key);
	if (s == 0)
		return XDP_PASS;
	int verdict;   /* 0 pass unmarked (stale), 1 quorum, 2 before, 3 redundant */
	bpf_spin_lock(&s->lock);
	if (s->inst1 > inst + 1 || (s->inst1 == inst + 1 && ballot < s->ballot)) {
		verdict = 0;
	} else {
		if (s->inst1 != inst + 1 || ballot > s->ballot) {
			s->inst1 = inst + 1;
			s->ballot = ballot;
			s->votes = 0;
			s->passed = 0;
		}
		s->votes |= 1ull << (node & 63);
		if (s->passed) {
			verdict = 3;
		} else if ((__u32)__builtin_popcountll(s->votes) >= lf_conf.majority) {
			s->passed = 1;
			verdict = 1;
		} else {
			verdict = 2;
		}
	}
	bpf_spin_unlock(&s->lock);
	switch (verdict) {
	case 1:
		st->passed_quorum++;
		set_mark(udp, h, lf_conf.quorum_mark != 0);
		return XDP_PASS;
	case 2:
		if (lf_conf.quorum_mark) {
			st->dropped_before++;
			return XDP_DROP;
		}
		st->passed_before++;
		set_mark(udp, h, false);
		return XDP_PASS;
	case 3:
		st->dropped_redundant++;
		return XDP_DROP;
	default:
		st->passed_other++;
		set_mark(udp, h, false);
		return XDP_PASS;
	}
}

char _license[] SEC("license") = "GPL";
