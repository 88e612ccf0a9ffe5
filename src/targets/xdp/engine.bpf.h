/*
 * engine.bpf.h — the XDP target's engine: what runs around a program's
 * handler in the kernel. src/targets/xdp/prog.bpf.c includes a program's NAME_dp.c
 * and then this file, so each program becomes one eBPF object with:
 *
 *   innet_xdp_main     SEC("xdp"): attached to every port device of the switch
 *   innet_xdp_egress   SEC("xdp/devmap"): per-copy rewrite of multicast copies
 *   innet_xdp_egress_test  SEC("xdp"): the same rewrite, for BPF_PROG_TEST_RUN
 *
 * Per frame (innet_xdp_main):
 *
 *   ingress ifindex ──▶ port (innet_if2port) ── none ──▶ XDP_PASS
 *        │ raw port: the whole frame to the switch's raw program
 *        ▼ UDP port: Ethernet / IPv4 (no options, no fragment, addressed to
 *          the port) / UDP with consistent lengths, else XDP_PASS (counted by
 *          reason: the kernel and, for us, the user-space engine's sockets
 *          take it — the same behaviour as without XDP)
 *   dst UDP port ──▶ program (innet_udp2prog) ── another ──▶ tail call into it
 *        │                                     ── user-space only ──▶ XDP_PASS
 *        ▼
 *   handler(ctx, pkt) ──▶ verdict:
 *     DROP        XDP_DROP, counted by reason
 *     FORWARD     rewrite Eth/IPv4/UDP as the user-space engine would send it
 *                 (from the egress port's address, to out.ip:out.udp or the
 *                 port's peer), then XDP_TX (same port) or redirect (devmap)
 *     REFLECT     the same, back to the sender out of the ingress port
 *     MULTICAST   devmap broadcast to the group's member ports; the egress
 *                 program rewrites each copy for its member. Groups XDP cannot
 *                 broadcast (two members on one port, a member that needs the
 *                 kernel's neighbour table) go to the ring: user space sends
 *     RECIRCULATE tail call into the program of pkt->dst_udp, the packet's
 *                 state in the frame's metadata, at most INNET_MAX_RECIRC
 *     TO_CPU      the packet to the ring (on_cpu runs in user space)
 *     CONSUMED    XDP_DROP, counted as consumed
 *   emit and timer arming also go to the ring (targets/xdp/dp_xdp.h).
 *
 * Every outcome is counted in the program's per-CPU innet_stats with the
 * user-space engine's meaning (actions, drops by reason, passes, register,
 * table and ALU operations) plus the hand-offs by kind. A frame dropped
 * outside any verdict — a raw port's frame and no raw program, the kernel
 * refusing to move a frame's head, tail or metadata, a multicast copy
 * without its metadata or too short for its headers — is counted on its
 * port by reason (innet_port_stats, enum innet_xdp_drop); a copy leaving by a
 * device that is no port of the switch, under the program's bad_port.
 */
#ifndef INNET_XDP_ENGINE_BPF_H
#define INNET_XDP_ENGINE_BPF_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef IPPROTO_UDP
#define IPPROTO_UDP 17
#endif

char LICENSE[] SEC("license") = "GPL";

INNET__INLINE const struct innet_xdp_port *innet__port(uint32_t port)
{
	if (port >= INNET__L.n_ports || port >= INNET_MAX_PORTS)
		return (void *)0;
	return bpf_map_lookup_elem(&innet_ports, &port);
}

INNET__INLINE struct innet_xdp_port_stats *innet__port_stats(uint32_t port)
{
	return bpf_map_lookup_elem(&innet_port_stats, &port);
}

INNET__INLINE uint8_t innet__udp2prog(uint16_t udp)
{
	uint32_t zero = 0;
	const uint8_t *m = bpf_map_lookup_elem(&innet_udp2prog, &zero);
	return m != (void *)0 ? m[udp] : 0;
}

#define INNET__PROG_USERSPACE 0x80u  /* innet_udp2prog: a user-space-only program */

INNET__INLINE int innet__pass(uint32_t port, uint32_t reason)
{
	struct innet_xdp_port_stats *ps = innet__port_stats(port);
	if (ps != (void *)0 && reason < INNET_XDP_PASS_COUNT)
		ps->pass[reason]++;
	return XDP_PASS;
}

/* Drop a frame outside any handler's verdict: counted on its port by reason
 * (enum innet_xdp_drop). */
INNET__INLINE int innet__frame_drop(uint32_t port, uint32_t reason)
{
	struct innet_xdp_port_stats *ps = innet__port_stats(port);
	if (ps != (void *)0 && reason < INNET_XDP_DROP_COUNT)
		ps->drop[reason]++;
	return XDP_DROP;
}

INNET__INLINE uint16_t innet__csum_fold(uint32_t sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Write a fresh Ethernet / IPv4 / UDP header for a datagram of len payload
 * bytes at the frame's start. 0, or -1 if the frame is too short. */
INNET__INLINE int innet__write_hdr(struct xdp_md *xdp, const uint8_t *dmac, const uint8_t *smac,
				   uint32_t sip, uint32_t dip, uint16_t sport, uint16_t dport,
				   uint32_t len)
{
	uint8_t *data = (uint8_t *)(long)xdp->data, *end = (uint8_t *)(long)xdp->data_end;
	if (data + INNET_XDP_HDR_LEN > end)
		return -1;
	struct ethhdr *eth = (struct ethhdr *)data;
	__builtin_memcpy(eth->h_dest, dmac, 6);
	__builtin_memcpy(eth->h_source, smac, 6);
	eth->h_proto = bpf_htons(ETH_P_IP);
	struct iphdr *ip = (struct iphdr *)(data + 14);
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons((uint16_t)(28 + len));
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000);   /* DF, as the kernel's UDP sockets send */
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->check = 0;
	ip->saddr = bpf_htonl(sip);
	ip->daddr = bpf_htonl(dip);
	uint32_t sum = 0;
	const uint16_t *w = (const uint16_t *)ip;
	for (int i = 0; i < 10; i++)
		sum += w[i];
	ip->check = innet__csum_fold(sum);
	struct udphdr *udp = (struct udphdr *)(data + 34);
	udp->source = bpf_htons(sport);
	udp->dest = bpf_htons(dport);
	udp->len = bpf_htons((uint16_t)(8 + len));
	udp->check = 0;   /* none: legal for IPv4, and the payload may have changed */
	return 0;
}

INNET__INLINE void innet__trace(struct innet_pkt *pkt, uint16_t action, uint16_t reason,
				uint16_t port, uint16_t handoff, uint32_t xdp_action)
{
	if (!INNET__L.test_mode)
		return;
	uint32_t zero = 0;
	struct innet_xdp_trace *t = bpf_map_lookup_elem(&innet_trace, &zero);
	if (t == (void *)0)
		return;
	t->seq++;
	t->action = action;
	t->reason = reason;
	t->port = port;
	t->group = pkt->out.group;
	t->handoff = handoff;
	t->prog = (uint16_t)INNET__L.self;
	t->xdp_action = xdp_action;
}

INNET__INLINE unsigned innet__valid_reason(unsigned reason)
{
	if (reason == 0)
		return INNET_DROP_PROGRAM_VERDICT;
	if (reason < INNET_DROP_RUNTIME_COUNT)
		return reason;
	if (reason >= INNET_DROP_PROGRAM && reason < INNET_DROP_PROGRAM + INNET__L.n_drop_reasons &&
	    reason < INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS)
		return reason;
	return INNET_DROP_BAD_VERDICT;
}

INNET__INLINE int innet__drop(struct innet_pkt *pkt, struct innet_xdp_stats *st, unsigned reason)
{
	reason = innet__valid_reason(reason);
	if (st != (void *)0) {
		st->actions[INNET_DROP]++;
		if (reason < 64)
			st->drops[reason]++;
	}
	innet__trace(pkt, INNET_DROP, (uint16_t)reason, 0, 0, XDP_DROP);
	return XDP_DROP;
}

/* Hand the packet in hand to the user-space engine through the ring: for
 * on_cpu (TO_CPU), or to send to out / a group (SEND). */
INNET__INLINE int innet__to_ring(struct innet_pkt *pkt, struct innet_xdp_stats *st, uint16_t kind,
				 bool is_group, uint32_t handoff, uint16_t action)
{
	if (pkt->len > INNET_XDP_HANDOFF_MAX)
		return innet__drop(pkt, st, INNET_DROP_CPU_QUEUE_FULL);
	struct innet_xdp_rec *rec = bpf_ringbuf_reserve(&innet_ring, sizeof(*rec), 0);
	if (rec == (void *)0) {
		if (st)
			st->ring_full++;
		return innet__drop(pkt, st, kind == INNET_XDP_REC_TO_CPU ? INNET_DROP_CPU_QUEUE_FULL
									  : INNET_DROP_TX_FULL);
	}
	rec->kind = kind;
	rec->prog = (uint16_t)INNET__L.self;
	rec->in_port = pkt->in_port;
	rec->dst_udp = pkt->dst_udp;
	rec->src_ip = pkt->src.ip;
	rec->src_udp = pkt->src.udp;
	rec->is_group = is_group;
	rec->flags = pkt->flags;
	rec->len = pkt->len;
	rec->meta16 = pkt->meta16;
	rec->pad16 = 0;
	rec->meta32[0] = pkt->meta32[0];
	rec->meta32[1] = pkt->meta32[1];
	rec->meta32[2] = pkt->meta32[2];
	rec->meta32[3] = pkt->meta32[3];
	rec->out.port = pkt->out.port;
	rec->out.group = pkt->out.group;
	rec->out.ip = pkt->out.ip;
	rec->out.udp = pkt->out.udp;
	rec->out.src_udp = pkt->out.src_udp;
	rec->out.reason = pkt->out.reason;
	/* (the length read back from the record: a value the verifier need not
	 * trace to the packet's, which then stays imprecise in every state that
	 * leads here — else each bound a handler's checks left on pkt->len
	 * keeps its own copy of the handler's paths) */
	uint32_t n = *(volatile uint32_t *)&rec->len;
	if (n > 0 && bpf_xdp_load_bytes(pkt->xdp, pkt->hdr_len, rec->data,
					INNET__CLAMP64(n, INNET_XDP_HANDOFF_MAX)) != 0) {
		bpf_ringbuf_discard(rec, 0);
		return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	}
	bpf_ringbuf_submit(rec, 0);
	if (st != (void *)0) {
		/* TO_CPU is counted where on_cpu's queue takes it (user space) */
		if (kind != INNET_XDP_REC_TO_CPU)
			st->actions[action]++;
		if (handoff < INNET_XDP_HANDOFF_COUNT)
			st->handoffs[handoff]++;
	}
	innet__trace(pkt, action, 0, pkt->out.port, (uint16_t)(handoff + 1), XDP_DROP);
	return XDP_DROP;
}

/* innet_hand_off: the packet as it is and the handler's state go to the
 * user-space engine, which runs the handler on from that state (not again
 * from the start: whatever it changed here stands). Counted once, here, as
 * received; the engine counts the verdict. */
INNET__INLINE int innet__resume(struct innet_ctx *ctx, struct innet_pkt *pkt, struct innet_xdp_stats *st)
{
	uint32_t n = ctx->handoff_len;
	if (n > INNET_XDP_STATE_MAX || pkt->len > INNET_XDP_HANDOFF_MAX || ctx->handoff_state == (void *)0)
		return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	struct innet_xdp_resume *rec = bpf_ringbuf_reserve(&innet_ring, sizeof(*rec), 0);
	if (rec == (void *)0) {
		if (st)
			st->ring_full++;
		return innet__drop(pkt, st, INNET_DROP_TX_FULL);
	}
	rec->kind = INNET_XDP_REC_RESUME;
	rec->prog = (uint16_t)INNET__L.self;
	rec->in_port = pkt->in_port;
	rec->dst_udp = pkt->dst_udp;
	rec->src_ip = pkt->src.ip;
	rec->src_udp = pkt->src.udp;
	rec->recirc = pkt->recirc;
	rec->flags = pkt->flags;
	rec->len = pkt->len;
	rec->state_len = n;
	rec->meta16 = pkt->meta16;
	rec->pad16 = 0;
	rec->meta32[0] = pkt->meta32[0];
	rec->meta32[1] = pkt->meta32[1];
	rec->meta32[2] = pkt->meta32[2];
	rec->meta32[3] = pkt->meta32[3];
	if (n > 0 && bpf_probe_read_kernel(rec->state, INNET__CLAMP64_NZ(n, INNET_XDP_STATE_MAX),
					   ctx->handoff_state) != 0) {
		bpf_ringbuf_discard(rec, 0);
		return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	}
	uint32_t len = *(volatile uint32_t *)&rec->len;
	if (len > 0 && bpf_xdp_load_bytes(pkt->xdp, pkt->hdr_len, rec->data,
					  INNET__CLAMP64(len, INNET_XDP_HANDOFF_MAX)) != 0) {
		bpf_ringbuf_discard(rec, 0);
		return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	}
	bpf_ringbuf_submit(rec, 0);
	if (st != (void *)0)
		st->handoffs[INNET_XDP_HANDOFF_RESUME]++;
	innet__trace(pkt, INNET_CONSUMED, 0, 0, INNET_XDP_HANDOFF_RESUME + 1, XDP_DROP);
	return XDP_DROP;
}

/* The packet goes up to the user-space engine unchanged, before any state
 * changed: the kernel hands it to the engine's socket, a worker runs the
 * handler again and counts it — so this run gives its receive counts back.
 * Why, by hand-off kind: the handler asked (innet_pass_up: a reply it cannot
 * build in one XDP buffer or one frame of the link; "oversize"), or a SERIAL
 * program's lock was held ("serial"). A recirculated packet cannot go up
 * (its pipeline state lived in the frame's metadata): dropped as `fail`
 * (pkt_bounds, reg_contended), as the user-space engine would. */
INNET__INLINE int innet__pass_up(struct innet_pkt *pkt, struct innet_xdp_stats *st, uint32_t kind,
				 unsigned fail)
{
	if (pkt->recirc != 0)
		return innet__drop(pkt, st, fail);
	if (st != (void *)0) {
		st->rx_pkts--;
		st->rx_bytes -= pkt->len;
		if (kind < INNET_XDP_HANDOFF_COUNT)
			st->handoffs[kind]++;
	}
	struct innet_xdp_port_stats *ps = innet__port_stats(pkt->in_port);
	if (ps != (void *)0) {
		ps->rx_pkts--;
		ps->rx_bytes -= pkt->len;
	}
	return XDP_PASS;
}

/*
 * SERIAL programs (docs/xdp.md). On the user-space engine one worker runs all
 * of a SERIAL program's packets; here the kernel runs the handler on the CPU
 * of each device's receive queue, and the user-space engine runs it for the
 * packets passed up. One lock word in the program's innet_tmeta page, which
 * the engine maps, makes the handler's runs one at a time across all of
 * them. The eBPF side never waits long: a handler run here is short and
 * never preempted, so a try fails only while another CPU or the engine's
 * worker is inside the handler; after INNET_XDP_SERIAL_TRIES the packet goes
 * up untouched and the worker, which may wait, runs it.
 */
INNET__INLINE uint32_t *innet__serial_lock(void)
{
	uint32_t zero = 0;
	uint8_t *page = bpf_map_lookup_elem(&innet_tmeta, &zero);
	if (page == (void *)0)
		return (void *)0;
	return (uint32_t *)(page + INNET_XDP_SERIAL_LOCK_OFF);
}

INNET__INLINE bool innet__serial_take(uint32_t *lock)
{
	for (uint32_t i = 0; i < INNET_XDP_SERIAL_TRIES; i++)
		if (__sync_val_compare_and_swap(lock, 0u, 1u) == 0u)
			return true;
	return false;
}

/* The local UDP port a datagram of this program leaves from (as the
 * user-space engine's src_slot: the asked one if the program binds it, else
 * its first). */
INNET__INLINE uint16_t innet__src_udp(uint16_t want)
{
	if (innet__udp2prog(want) == (uint8_t)(INNET__L.self + 1))
		return want;
	return INNET__L.first_udp;
}

/* The MAC of ip out of port pi's device, from the kernel's FIB and neighbour
 * table, into dmac: 0, or -1 if the kernel does not know it (yet). Its own
 * subprogram: the lookup's 64 bytes then stay out of the main program's
 * frame, which the handler's deepest call chain shares (512 bytes in all). */
static __attribute__((noinline)) int innet__neigh(struct xdp_md *xdp, const struct innet_xdp_port *pi,
						  uint32_t ip, uint32_t len, uint8_t *dmac)
{
	struct bpf_fib_lookup fl = {};
	fl.family = AF_INET;
	fl.ipv4_dst = bpf_htonl(ip);
	fl.ipv4_src = bpf_htonl(pi->ip);
	fl.ifindex = pi->ifindex;
	fl.tot_len = (uint16_t)(28 + len);
	long rc = bpf_fib_lookup(xdp, &fl, sizeof(fl), BPF_FIB_LOOKUP_OUTPUT);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || fl.ifindex != pi->ifindex)
		return -1;
	__builtin_memcpy(dmac, fl.dmac, 6);
	return 0;
}

/* Send the packet in hand out of `port` (FORWARD, REFLECT). */
INNET__INLINE int innet__send(struct innet_ctx *ctx, struct innet_pkt *pkt,
			      struct innet_xdp_stats *st, uint16_t port, uint32_t ip, uint16_t udp,
			      bool reflect, uint16_t action)
{
	const struct innet_xdp_port *pi = innet__port(port);
	if (pi == (void *)0)
		return innet__drop(pkt, st, INNET_DROP_BAD_PORT);
	struct xdp_md *xdp = pkt->xdp;
	if (pkt->flags & INNET_PKT_F_RAW) {
		if (!pi->raw)
			return innet__drop(pkt, st, INNET_DROP_FRAME_TO_UDP_PORT);
	} else {
		if (pi->raw)
			return innet__drop(pkt, st, INNET_DROP_DATAGRAM_TO_RAW_PORT);
		if (INNET__L.n_udp == 0)
			return innet__drop(pkt, st, INNET_DROP_NO_UDP_SOCKET);
		if (ip == 0)
			ip = pi->peer_ip;
		if (ip == 0)
			return innet__drop(pkt, st, INNET_DROP_NO_PEER);
		if (udp == 0)
			udp = pi->peer_udp ? pi->peer_udp : pkt->dst_udp;
		uint16_t sport = innet__src_udp(pkt->out.src_udp ? pkt->out.src_udp : pkt->dst_udp);
		uint8_t dmac[6];
		if (reflect) {
			__builtin_memcpy(dmac, pkt->src_mac, 6);
		} else if (ip == pi->peer_ip && pi->has_peer_mac) {
			__builtin_memcpy(dmac, pi->peer_mac, 6);
		} else {
			if (innet__neigh(xdp, pi, ip, pkt->len, dmac) != 0) {
				/* the kernel must resolve the neighbour: user space sends */
				pkt->out.port = port;
				pkt->out.ip = ip;
				pkt->out.udp = udp;
				pkt->out.src_udp = sport;
				return innet__to_ring(pkt, st, INNET_XDP_REC_SEND, false,
						      INNET_XDP_HANDOFF_NEIGH, action);
			}
		}
		if (innet__write_hdr(xdp, dmac, pi->mac, pi->ip, ip, sport, (uint16_t)udp, pkt->len) != 0)
			return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	}
	if (st != (void *)0) {
		st->actions[action]++;
		st->tx_pkts++;
	}
	struct innet_xdp_port_stats *ps = innet__port_stats(port);
	if (ps != (void *)0) {
		ps->tx_pkts++;
		ps->tx_bytes += pkt->len;
	}
	if (port == pkt->in_port) {
		innet__trace(pkt, action, 0, port, 0, XDP_TX);
		return XDP_TX;
	}
	innet__trace(pkt, action, 0, port, 0, XDP_REDIRECT);
	if (INNET__L.test_mode)
		return XDP_REDIRECT;   /* no devices in a test run */
	return bpf_redirect_map(&innet_portdevs, port, 0);
}

INNET__INLINE int innet__put_meta(struct innet_pkt *pkt, uint16_t group, uint16_t src_udp)
{
	if (bpf_xdp_adjust_meta(pkt->xdp, -(int)sizeof(struct innet_xdp_meta)) != 0)
		return -1;
	uint8_t *data = (uint8_t *)(long)pkt->xdp->data;
	struct innet_xdp_meta *m = (struct innet_xdp_meta *)(long)pkt->xdp->data_meta;
	if ((uint8_t *)(m + 1) > data)
		return -1;
	m->magic = INNET_XDP_META_MAGIC;
	m->recirc = pkt->recirc;
	m->flags = pkt->flags;
	m->in_port = pkt->in_port;
	m->dst_udp = pkt->dst_udp;
	m->src_ip = pkt->src.ip;
	m->src_udp = src_udp;
	m->meta16 = pkt->meta16;
	m->meta32[0] = pkt->meta32[0];
	m->meta32[1] = pkt->meta32[1];
	m->meta32[2] = pkt->meta32[2];
	m->meta32[3] = pkt->meta32[3];
	m->len = pkt->len;
	m->headroom = pkt->headroom;
	__builtin_memcpy(m->src_mac, pkt->src_mac, 6);
	m->group = group;
	return 0;
}

INNET__INLINE int innet__multicast(struct innet_ctx *ctx, struct innet_pkt *pkt,
				   struct innet_xdp_stats *st)
{
	uint32_t g = pkt->out.group;
	if (g >= INNET__L.n_groups)
		return innet__drop(pkt, st, INNET_DROP_BAD_GROUP);
	const struct innet_xdp_gmeta *gm = bpf_map_lookup_elem(&innet_gmeta, &g);
	if (gm == (void *)0 || gm->n == 0 || gm->mode == INNET_XDP_GROUP_EMPTY)
		return innet__drop(pkt, st, INNET_DROP_BAD_GROUP);
	if (!(pkt->flags & INNET_PKT_F_RAW) && INNET__L.n_udp == 0)
		return innet__drop(pkt, st, INNET_DROP_NO_UDP_SOCKET);
	if (gm->mode != INNET_XDP_GROUP_DEVMAP)
		return innet__to_ring(pkt, st, INNET_XDP_REC_SEND, true, INNET_XDP_HANDOFF_MULTICAST,
				      INNET_MULTICAST);
	uint32_t n = gm->n;
	void *devs = bpf_map_lookup_elem(&innet_groups, &g);
	if (devs == (void *)0)
		return innet__drop(pkt, st, INNET_DROP_BAD_GROUP);
	uint16_t sport = innet__src_udp(pkt->out.src_udp ? pkt->out.src_udp : pkt->dst_udp);
	if (innet__put_meta(pkt, (uint16_t)g, sport) != 0)
		return innet__drop(pkt, st, INNET_DROP_PKT_BOUNDS);
	if (st != (void *)0) {
		st->actions[INNET_MULTICAST]++;
		st->tx_pkts += n;
	}
	if (INNET__L.test_mode) {
		/* the harness expands the copies with innet_xdp_egress_test */
		innet__trace(pkt, INNET_MULTICAST, 0, 0, 0, XDP_REDIRECT);
		return XDP_REDIRECT;
	}
	return bpf_redirect_map(devs, 0, BPF_F_BROADCAST);
}

/* A multicast copy leaving by a device that is no port the switch describes
 * (the program's bad_port drops: no port's counter can take it; the packet's
 * verdict was counted already, so this counts the copy, not a verdict). */
INNET__INLINE int innet__copy_no_port(void)
{
	struct innet_xdp_stats *st = innet__stats();
	if (st != (void *)0)
		st->drops[INNET_DROP_BAD_PORT]++;
	return XDP_DROP;
}

/* One multicast copy leaving by `port`: rewrite it for its member. The
 * copy's metadata (the group, the sending port...) is read and then taken
 * off: a frame redirected into a veth keeps its metadata, and the XDP
 * program at the other end — another innet switch — would take it for a
 * recirculation of its own. */
INNET__INLINE int innet__egress(struct xdp_md *xdp, uint32_t port)
{
	uint8_t *data = (uint8_t *)(long)xdp->data;
	const struct innet_xdp_meta *m = (const struct innet_xdp_meta *)(long)xdp->data_meta;
	if ((const uint8_t *)(m + 1) > data || m->magic != INNET_XDP_META_MAGIC)
		return innet__frame_drop(port, INNET_XDP_DROP_EGRESS_META);
	uint32_t len = m->len, group = m->group;
	uint8_t flags = m->flags;
	uint16_t dst_udp = m->dst_udp, src_udp = m->src_udp;
	if (bpf_xdp_adjust_meta(xdp, (int)sizeof(struct innet_xdp_meta)) != 0)
		return innet__frame_drop(port, INNET_XDP_DROP_ADJUST);
	const struct innet_xdp_port *pi = innet__port(port);
	if (pi == (void *)0)
		return innet__copy_no_port();
	struct innet_xdp_port_stats *ps = innet__port_stats(port);
	if (ps != (void *)0) {
		ps->tx_pkts++;
		ps->tx_bytes += len;
	}
	if (flags & INNET_PKT_F_RAW)
		return XDP_PASS;
	uint32_t key = group << 16 | port;
	const struct innet_xdp_member *mb = bpf_map_lookup_elem(&innet_members, &key);
	uint32_t ip = mb ? mb->ip : 0;
	uint16_t udp = mb ? mb->udp : 0;
	if (ip == 0)
		ip = pi->peer_ip;
	if (udp == 0)
		udp = pi->peer_udp ? pi->peer_udp : dst_udp;
	if (innet__write_hdr(xdp, pi->peer_mac, pi->mac, pi->ip, ip, src_udp, udp, len) != 0)
		return innet__frame_drop(port, INNET_XDP_DROP_EGRESS_SHORT);
	return XDP_PASS;
}

SEC("xdp/devmap")
int innet_xdp_egress(struct xdp_md *xdp)
{
	uint32_t ifindex = xdp->egress_ifindex;
	const uint32_t *port = bpf_map_lookup_elem(&innet_if2port, &ifindex);
	if (port == (void *)0)
		return innet__copy_no_port();
	return innet__egress(xdp, *port);
}

SEC("xdp")
int innet_xdp_egress_test(struct xdp_md *xdp)
{
	uint32_t zero = 0;
	const struct innet_xdp_trace *t = bpf_map_lookup_elem(&innet_trace, &zero);
	if (t == (void *)0)
		return XDP_ABORTED;
	return innet__egress(xdp, t->port);
}

/* Parse an Ethernet/IPv4/UDP frame for a UDP port of the switch. Returns -1
 * (carry on) or an XDP action for a frame that is not ours. */
INNET__INLINE int innet__parse(struct xdp_md *xdp, struct innet_pkt *pkt,
			       const struct innet_xdp_port *pi, uint32_t port, uint8_t *prog)
{
	uint8_t *data = (uint8_t *)(long)xdp->data, *end = (uint8_t *)(long)xdp->data_end;
	if (data + INNET_XDP_HDR_LEN > end) {
		if (data + sizeof(struct ethhdr) <= end &&
		    ((struct ethhdr *)data)->h_proto != bpf_htons(ETH_P_IP))
			return innet__pass(port, INNET_XDP_PASS_NOT_IPV4);
		return innet__pass(port, INNET_XDP_PASS_BAD_LENGTH);
	}
	struct ethhdr *eth = (struct ethhdr *)data;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return innet__pass(port, INNET_XDP_PASS_NOT_IPV4);
	struct iphdr *ip = (struct iphdr *)(data + 14);
	if (ip->version != 4 || ip->ihl < 5)
		return innet__pass(port, INNET_XDP_PASS_BAD_LENGTH);
	if (bpf_ntohl(ip->daddr) != pi->ip)
		return innet__pass(port, INNET_XDP_PASS_NOT_LOCAL);
	if (ip->protocol != IPPROTO_UDP)
		return innet__pass(port, INNET_XDP_PASS_NOT_UDP);
	if (ip->ihl != 5)
		return innet__pass(port, INNET_XDP_PASS_IP_OPTIONS);
	if (ip->frag_off & bpf_htons(0x3fff))
		return innet__pass(port, INNET_XDP_PASS_FRAGMENT);
	struct udphdr *udp = (struct udphdr *)(data + 34);
	uint32_t tot = bpf_ntohs(ip->tot_len), ulen = bpf_ntohs(udp->len);
	if (tot < 28 || 14 + tot > (uint32_t)(end - data) || ulen != tot - 20)
		return innet__pass(port, INNET_XDP_PASS_BAD_LENGTH);
	uint16_t dport = bpf_ntohs(udp->dest);
	*prog = innet__udp2prog(dport);
	if (*prog == 0)
		return innet__pass(port, INNET_XDP_PASS_NO_PROGRAM);
	pkt->dst_udp = dport;
	pkt->src.ip = bpf_ntohl(ip->saddr);
	pkt->src.udp = bpf_ntohs(udp->source);
	pkt->len = ulen - 8;
	__builtin_memcpy(pkt->src_mac, eth->h_source, 6);
	return -1;
}

SEC("xdp")
int innet_xdp_main(struct xdp_md *xdp)
{
	struct innet_pkt pkt = {};
	struct innet_ctx ctx = {};
	pkt.xdp = xdp;
	uint8_t *data = (uint8_t *)(long)xdp->data;
	const struct innet_xdp_meta *m = (const struct innet_xdp_meta *)(long)xdp->data_meta;
	bool recirculated = (const uint8_t *)(m + 1) <= data && m->magic == INNET_XDP_META_MAGIC;
	if (recirculated) {
		pkt.recirc = m->recirc;
		pkt.flags = m->flags;
		pkt.in_port = m->in_port;
		pkt.dst_udp = m->dst_udp;
		pkt.src.ip = m->src_ip;
		pkt.src.udp = m->src_udp;
		pkt.meta16 = m->meta16;
		pkt.meta32[0] = m->meta32[0];
		pkt.meta32[1] = m->meta32[1];
		pkt.meta32[2] = m->meta32[2];
		pkt.meta32[3] = m->meta32[3];
		pkt.len = m->len;
		pkt.headroom = m->headroom;
		__builtin_memcpy(pkt.src_mac, m->src_mac, 6);
		pkt.hdr_len = (pkt.flags & INNET_PKT_F_RAW) ? 0 : INNET_XDP_HDR_LEN;
		if (bpf_xdp_adjust_meta(xdp, (int)sizeof(struct innet_xdp_meta)) != 0)
			return innet__frame_drop(pkt.in_port, INNET_XDP_DROP_ADJUST);
	} else {
		uint32_t ifindex = xdp->ingress_ifindex;
		const uint32_t *pp = bpf_map_lookup_elem(&innet_if2port, &ifindex);
		if (pp == (void *)0)
			return XDP_PASS;
		uint32_t port = *pp;
		const struct innet_xdp_port *pi = innet__port(port);
		if (pi == (void *)0)
			return XDP_PASS;
		pkt.in_port = (uint16_t)port;
		pkt.headroom = INNET_PKT_HEADROOM;
		uint8_t prog;
		if (pi->raw) {
			prog = innet__udp2prog(0);   /* slot 0: the switch's raw program */
			if (prog == 0) {
				innet__trace(&pkt, INNET_DROP, INNET_DROP_NO_PROGRAM, 0, 0, XDP_DROP);
				return innet__frame_drop(port, INNET_XDP_DROP_NO_RAW_PROGRAM);
			}
			pkt.flags = INNET_PKT_F_RAW;
			pkt.hdr_len = 0;
			pkt.len = (uint32_t)((uint8_t *)(long)xdp->data_end - data);
		} else {
			int rc = innet__parse(xdp, &pkt, pi, port, &prog);
			if (rc >= 0)
				return rc;
			pkt.hdr_len = INNET_XDP_HDR_LEN;
			/* frames are padded to 60 bytes: keep exactly the datagram */
			uint32_t flen = (uint32_t)((uint8_t *)(long)xdp->data_end - data);
			if (flen > INNET_XDP_HDR_LEN + pkt.len &&
			    bpf_xdp_adjust_tail(xdp, (int)(INNET_XDP_HDR_LEN + pkt.len) - (int)flen) != 0)
				return innet__frame_drop(port, INNET_XDP_DROP_ADJUST);
		}
		if (prog & INNET__PROG_USERSPACE)
			return innet__pass(port, INNET_XDP_PASS_USERSPACE);
		if (prog != (uint8_t)(INNET__L.self + 1)) {
			bpf_tail_call(xdp, &innet_progs, (uint32_t)(prog - 1));
			return XDP_PASS;   /* no such program loaded: the kernel decides */
		}
		struct innet_xdp_port_stats *ps = innet__port_stats(port);
		if (ps != (void *)0) {
			ps->rx_pkts++;
			ps->rx_bytes += pkt.len;
		}
	}
	innet__pkt_reload(&pkt);
	struct innet_xdp_stats *st = innet__stats();
	if (st != (void *)0 && !recirculated) {
		st->rx_pkts++;
		st->rx_bytes += pkt.len;
	}
	uint32_t zero = 0;
	ctx.conf = bpf_map_lookup_elem(&innet_confmap, &zero);
	if (ctx.conf == (void *)0)
		return innet__frame_drop(pkt.in_port, INNET_XDP_DROP_NO_CONF);
	ctx.now_ns = bpf_ktime_get_ns();
	ctx.model = (uint8_t)INNET__L.model;
	ctx.reg_ops_budget = INNET__L.reg_ops_budget;
	ctx.pkt = &pkt;

	uint32_t *lock = (void *)0;
	if (INNET__L.serial) {
		lock = innet__serial_lock();
		if (lock == (void *)0 || !innet__serial_take(lock))
			return innet__pass_up(&pkt, st, INNET_XDP_HANDOFF_SERIAL, INNET_DROP_REG_CONTENDED);
	}
	enum innet_action act = innet__handle(&ctx, &pkt);
	if (lock != (void *)0)
		__sync_lock_test_and_set(lock, 0);   /* an atomic exchange: releases */

	if (st != (void *)0) {
		st->passes++;
		st->reg_ops += ctx.use.reg_ops;
		st->table_ops += ctx.use.table_ops;
		st->alu_ops += ctx.use.alu_ops;
		if (ctx.use.reg_ops > st->max_reg_ops)
			st->max_reg_ops = ctx.use.reg_ops;
		if (ctx.use.table_ops > st->max_table_ops)
			st->max_table_ops = ctx.use.table_ops;
		if (ctx.use.alu_ops > st->max_alu_ops)
			st->max_alu_ops = ctx.use.alu_ops;
		if (pkt.recirc > st->max_recirc)
			st->max_recirc = pkt.recirc;
		if (ctx.use.emitted > st->max_emitted)
			st->max_emitted = ctx.use.emitted;
	}
	if (ctx.fault != 0)
		return innet__drop(&pkt, st, ctx.fault);
	if (ctx.pass_up)
		return innet__pass_up(&pkt, st, INNET_XDP_HANDOFF_OVERSIZE, INNET_DROP_PKT_BOUNDS);
	if (ctx.handoff_len != 0)
		return innet__resume(&ctx, &pkt, st);
	switch (act) {
	case INNET_DROP:
		return innet__drop(&pkt, st, pkt.out.reason);
	case INNET_FORWARD:
		return innet__send(&ctx, &pkt, st, pkt.out.port, pkt.out.ip, pkt.out.udp, false,
				   INNET_FORWARD);
	case INNET_REFLECT:
		return innet__send(&ctx, &pkt, st, pkt.in_port, pkt.src.ip, pkt.src.udp, true,
				   INNET_REFLECT);
	case INNET_MULTICAST:
		return innet__multicast(&ctx, &pkt, st);
	case INNET_TO_CPU:
		return innet__to_ring(&pkt, st, INNET_XDP_REC_TO_CPU, false, INNET_XDP_HANDOFF_TO_CPU,
				      INNET_TO_CPU);
	case INNET_CONSUMED:
		if (st != (void *)0)
			st->actions[INNET_CONSUMED]++;
		innet__trace(&pkt, INNET_CONSUMED, 0, 0, 0, XDP_DROP);
		return XDP_DROP;
	case INNET_RECIRCULATE: {
		if (pkt.recirc >= INNET_MAX_RECIRC)
			return innet__drop(&pkt, st, INNET_DROP_RECIRC_BUDGET);
		uint8_t next = innet__udp2prog((pkt.flags & INNET_PKT_F_RAW) ? 0 : pkt.dst_udp);
		if (next == 0 || (next & INNET__PROG_USERSPACE))
			return innet__drop(&pkt, st, INNET_DROP_NO_PROGRAM);
		if (st != (void *)0)
			st->recirculations++;
		pkt.recirc++;
		/* (the metadata's src_udp is the sender's port here, the
		 * sending port for a multicast copy) */
		if (innet__put_meta(&pkt, 0, pkt.src.udp) != 0)
			return innet__drop(&pkt, st, INNET_DROP_PKT_BOUNDS);
		bpf_tail_call(xdp, &innet_progs, (uint32_t)(next - 1));
		return innet__drop(&pkt, st, INNET_DROP_NO_PROGRAM);
	}
	default:
		return innet__drop(&pkt, st, INNET_DROP_BAD_VERDICT);
	}
}

#endif /* INNET_XDP_ENGINE_BPF_H */
