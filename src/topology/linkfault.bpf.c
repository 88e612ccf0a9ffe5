/*
 * linkfault.bpf.c — a link's faults in netns mode on a kernel without netem
 * (docs/topology.md, "Link faults in netns mode"): a tc egress program on
 * each bridge port of the link's wire namespace.
 *
 *   node A ── veth ══ wire namespace: port a ─ bridge ─ port b ══ veth ── node B
 *                                     egress: this program + HTB (both ways)
 *
 * Per frame leaving a port: lost with probability loss; else duplicated with
 * probability dup (a clone sent out of the same port, marked so that it is
 * not drawn again); then, with probability reorder, put in HTB class 1:20 —
 * a slow lane (a low rate, a one-byte burst) that holds it while the frames
 * behind it in class 1:10 overtake it. The kernel carries all of it out;
 * innet's switches, on either target, see only the result.
 *
 * The probabilities are fractions of 2^32, set in lf_conf by the loader
 * (src/topology/netns.c) before the verifier runs.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

struct linkfault_conf {
	__u32 loss;      /* P(drop) x 2^32 */
	__u32 dup;       /* P(duplicate) x 2^32 */
	__u32 reorder;   /* P(slow lane) x 2^32 */
	__u32 slow;      /* the slow lane's class (1:20) */
	__u32 fast;      /* everything else (1:10) */
};

const volatile struct linkfault_conf lf_conf = { 0 };

/* What it did (per CPU; innet fabric status sums them: netns.c). */
struct linkfault_stats {
	__u64 frames;      /* frames that reached the port's egress */
	__u64 lost;
	__u64 duplicated;
	__u64 slowed;      /* put in the slow lane */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, 4);
	__uint(value_size, sizeof(struct linkfault_stats));
	__uint(max_entries, 1);
} lf_stats SEC(".maps");

#define LF_DUP_MARK 0x1e5ed0bu

SEC("tc")
int innet_linkfault(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct linkfault_stats *st = bpf_map_lookup_elem(&lf_stats, &zero);
	if (st == 0)
		return TC_ACT_OK;
	if (skb->mark == LF_DUP_MARK) {
		skb->mark = 0;   /* the copy: drawn once, as its original */
	} else {
		st->frames++;
		if (lf_conf.loss != 0 && bpf_get_prandom_u32() < lf_conf.loss) {
			st->lost++;
			return TC_ACT_SHOT;
		}
		if (lf_conf.dup != 0 && bpf_get_prandom_u32() < lf_conf.dup) {
			skb->mark = LF_DUP_MARK;
			if (bpf_clone_redirect(skb, skb->ifindex, 0) == 0)
				st->duplicated++;
			skb->mark = 0;
		}
	}
	if (lf_conf.reorder != 0) {
		bool slow = bpf_get_prandom_u32() < lf_conf.reorder;
		skb->priority = slow ? lf_conf.slow : lf_conf.fast;
		st->slowed += slow;
	}
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
