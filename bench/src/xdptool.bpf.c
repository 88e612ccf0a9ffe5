/*
 * xdptool.bpf.c — the eBPF half of bench/src/xdptool.c, for
 * bench/xdp-forwarding.sh:
 *
 *   xdp_gen   a packet generator: run by BPF_PROG_TEST_RUN with
 *             BPF_F_TEST_XDP_LIVE_FRAMES on the generator's veth, it writes
 *             the template frame (recycled frames keep what the switch
 *             downstream wrote into them) and transmits it (XDP_TX), as
 *             often as the kernel runs it or, paced, at most one frame per
 *             interval (the runs in between drop their frame before
 *             writing it: a run costs tens of nanoseconds, so the frames
 *             leave evenly spaced); it counts what it transmits
 *   xdp_sink  counts frames and bytes per CPU and drops them
 *   xdp_pass  XDP_PASS, for a veth that must take XDP frames from its peer
 *   xdp_fwd   the reference an eBPF engineer would write for what innet's
 *             forward program does with a port map: match the switch's own
 *             address and UDP port, rewrite Ethernet, IPv4 and UDP headers as
 *             a UDP relay sends them (from the egress port's address to its
 *             peer), full IPv4 checksum, no UDP checksum, devmap redirect
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif

#define TMPL_MAX 2048

struct tmpl {
	__u32 len;
	__u8 data[TMPL_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct tmpl);
	__uint(max_entries, 1);
} tmpl SEC(".maps");

struct counts {
	__u64 pkts;
	__u64 bytes;
};

/* xdp_gen's pacing, written by xdptool gen (one generator thread per map,
 * on one CPU: plain updates). Times in picoseconds, so that a rate such as
 * 1.5 Mpps (666.67 ns) is kept exactly. */
struct pace {
	__u64 interval_ps; /* 0: not paced */
	__u64 burst_ps;    /* how far behind the schedule may be caught up */
	__u64 next_ps;     /* when the next frame may leave */
	__u64 sent;        /* frames transmitted (XDP_TX) */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct pace);
	__uint(max_entries, 1);
} pace SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counts);
	__uint(max_entries, 1);
} counts SEC(".maps");

struct fwd_cfg {
	__u32 my_ip;          /* network order */
	__u16 my_port;        /* network order */
	__u16 out_sport;
	__u16 out_dport;
	__u8 out_smac[6];
	__u8 out_dmac[6];
	__u32 out_sip;
	__u32 out_dip;
};

const volatile struct fwd_cfg cfg = {};

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(key_size, 4);
	__uint(value_size, 4);
	__uint(max_entries, 1);
} out SEC(".maps");

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct pace *p = bpf_map_lookup_elem(&pace, &k);
	if (p == NULL)
		return XDP_ABORTED;
	if (p->interval_ps != 0) {
		__u64 now = bpf_ktime_get_ns() * 1000;
		if (now < p->next_ps)
			return XDP_DROP; /* not yet: recycled, never sent */
		if (p->next_ps + p->burst_ps < now)
			p->next_ps = now - p->burst_ps; /* fell behind: no long burst */
		p->next_ps += p->interval_ps;
	}
	struct tmpl *t = bpf_map_lookup_elem(&tmpl, &k);
	if (t == NULL)
		return XDP_ABORTED;
	__u64 len = t->len;
	if (len < 60 || len > TMPL_MAX)
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, t->data, len))
		return XDP_ABORTED;
	p->sent++;
	return XDP_TX;
}

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct counts *c = bpf_map_lookup_elem(&counts, &k);
	if (c != NULL) {
		c->pkts++;
		c->bytes += (__u64)(ctx->data_end - ctx->data);
	}
	return XDP_DROP;
}

SEC("xdp")
int xdp_fwd(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != IPPROTO_UDP || ip->daddr != cfg.my_ip || udp->dest != cfg.my_port)
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, (const void *)cfg.out_dmac, 6);
	__builtin_memcpy(eth->h_source, (const void *)cfg.out_smac, 6);
	ip->saddr = cfg.out_sip;
	ip->daddr = cfg.out_dip;
	ip->ttl = 64;
	ip->check = 0;
	__u32 sum = 0;
	__u16 *w = (__u16 *)ip;
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = (__u16)~sum;
	udp->source = cfg.out_sport;
	udp->dest = cfg.out_dport;
	udp->check = 0;
	return bpf_redirect_map(&out, 0, 0);
}

/* For a veth that must take XDP frames (XDP_TX or a redirect from its peer)
 * without doing anything with them: the user-space engine's and the kernel's
 * ingress device in the benchmark. */
SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
