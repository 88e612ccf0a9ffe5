/*
 * lb/frame.h — packet mode's frame code, part of the data path (lb_dp.c
 * includes it; contract-clean): a strict Ethernet/IPv4/UDP/TCP parser and the
 * address rewrites of an L4 balancer (DNAT toward a unit, SNAT of its replies
 * back to the VIP) with incremental checksum updates (RFC 1624:
 * HC' = ~(~HC + ~m + m')). Every byte is read and written through
 * innet_pkt_ptr (the data_end check of XDP), at offsets the parser found.
 * frame.c wraps these functions for plain byte buffers (unit tests, fuzzing,
 * the control side), so the tests run the handler's own code.
 *
 *   | dst MAC 6 | src MAC 6 | [0x8100 TCI 4] | type 0x0800 2 | IPv4 (IHL*4) | UDP 8 / TCP (doff*4) | ...
 *
 * Strictness: a frame is dropped (named reason) when a header is truncated,
 * the IPv4 version/IHL/total length/header checksum is wrong, it is a
 * fragment, or the UDP length / TCP data offset does not fit. Trailing bytes
 * past the IPv4 total length (Ethernet padding) are allowed and kept.
 *
 * Partial checksums. A frame read from a veth (or any device) whose sender
 * left the TCP/UDP checksum to "hardware" (CHECKSUM_PARTIAL, tx checksum
 * offload) carries in its checksum field only the folded pseudo-header sum
 *
 *     P = fold(src ip + dst ip + proto + L4 length)      (not complemented)
 *
 * and the device was supposed to finish it. Nobody will once the frame is
 * re-sent through a packet socket, so lb_fr_complete_csum() finishes it in
 * software before the incremental rewrites: when the field equals P (6
 * additions to check) and the full checksum does not verify, it writes the
 * full checksum. A complete checksum is never changed: if it verifies it is
 * left alone, and one that equals P but does not verify is the same as a
 * partial one. Frames whose field is not P cost nothing more. The full sum
 * runs in innet_loop (bpf_loop on XDP: one body for the verifier, whatever
 * the segment's length).
 */
#ifndef INNET_LB_FRAME_H
#define INNET_LB_FRAME_H

#include "innet/dp.h"
#include "lb/lb.h"

/* A parsed frame: offsets into the packet and the fields the handler uses. */
struct lb_frame {
	uint32_t l3_off;    /* IPv4 header offset (14, or 18 behind one VLAN tag) */
	uint32_t l4_off;    /* UDP/TCP header offset */
	uint32_t sip, dip;  /* host order */
	uint16_t sport, dport;
	uint32_t l4_len;    /* UDP: its length field; TCP: IPv4 total length - IHL */
	uint8_t proto;      /* LB_PROTO_TCP or LB_PROTO_UDP */
	uint8_t tcp_flags;  /* TCP: LB_TCP_FIN, _SYN, _RST, _ACK */
	uint8_t ttl;        /* IPv4 TTL */
	uint8_t parse_alu;  /* stateless operations lb_fr_parse did, as far as it got
	                     * (innet_alu: docs/resources.md) */
	uint32_t opaque;    /* lb_fr_opaque's cell */
};

/* The frame operations the handler calls: functions of their own (on XDP a
 * BPF subprogram each), so that the packet pointers they check end with
 * them; a pointer kept across the handler's later steps would carry its
 * checked range into every state the verifier compares, and paths that
 * differ only there would each be checked again. */
#define LB_FR_STEP static __attribute__((noinline, unused))

/* v, through memory: a value the eBPF verifier does not follow (the frame
 * lives in the handler's scratch memory). An offset known exactly would mark
 * its range on the packet's start pointer, different on each path (a VLAN
 * tag or not), and the verifier would check what follows once per range. */
static inline uint32_t lb_fr_opaque(struct lb_frame *fr, uint32_t v)
{
	fr->opaque = v;
	return *(volatile uint32_t *)&fr->opaque;
}

static inline uint16_t lb_rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t lb_rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void lb_wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void lb_wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* A 48-bit MAC address as a number (first byte most significant). */
static inline uint64_t lb_mac48(const uint8_t *m)
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = v << 8 | m[i];
	return v;
}

/* One's complement fold of a 32-bit sum (two rounds suffice for any u32). */
static inline uint16_t lb_fold(uint32_t acc)
{
	acc = (acc & 0xffff) + (acc >> 16);
	acc = (acc & 0xffff) + (acc >> 16);
	return (uint16_t)acc;
}

/* Sum of the n bytes at p (a constant n: fixed header fields) as big-endian
 * 16-bit words, added to acc. */
static inline uint32_t lb_sum_fixed(const uint8_t *p, uint32_t n, uint32_t acc)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		acc += lb_rd16(p + i);
	return acc;
}

/* lb_fr_sum's loop: one 4-byte word per call. */
struct lb_sum_arg {
	struct innet_pkt *pkt;
	uint32_t off;       /* first byte */
	uint32_t acc;
	uint32_t bad;       /* a word was outside the packet */
};

static inline long lb_sum_word(uint32_t i, void *arg)
{
	struct lb_sum_arg *s = arg;
	const uint8_t *p = innet_pkt_ptr(s->pkt, s->off + 4u * i, 4);
	if (p == NULL) {
		s->bad = 1;
		return 1;
	}
	s->acc += (uint32_t)lb_rd16(p) + lb_rd16(p + 2);
	return 0;
}

/* Sum of the n bytes at offset off of the packet as big-endian 16-bit words
 * (an odd last byte is the high byte of a word), added to acc; *ok false if
 * any byte lies outside the packet. n <= INNET_PKT_MAX: the sum cannot wrap
 * a u32. */
static inline uint32_t lb_fr_sum(struct innet_pkt *pkt, uint32_t off, uint32_t n, uint32_t acc,
				 bool *ok)
{
	struct lb_sum_arg s = { .pkt = pkt, .off = off, .acc = acc, .bad = 0 };
	if (n > INNET_PKT_MAX) {
		*ok = false;
		return acc;
	}
	innet_loop(n / 4u, lb_sum_word, &s);
	uint32_t tail = off + (n & ~3u);
	if (n & 2u) {
		const uint8_t *p = innet_pkt_ptr(pkt, tail, 2);
		if (p == NULL)
			s.bad = 1;
		else
			s.acc += lb_rd16(p);
		tail += 2;
	}
	if (n & 1u) {
		const uint8_t *p = innet_pkt_ptr(pkt, tail, 1);
		if (p == NULL)
			s.bad = 1;
		else
			s.acc += (uint32_t)p[0] << 8;
	}
	*ok = s.bad == 0;
	return s.acc;
}

/* The IPv4 header (its first 20 bytes) of a parsed frame. */
static inline uint8_t *lb_fr_ip(struct innet_pkt *pkt, const struct lb_frame *fr)
{
	return innet_pkt_ptr(pkt, fr->l3_off, 20);
}

/* The L4 checksum field of a parsed frame, whatever it holds (NULL: the
 * header lies outside the packet, which the parser excludes). */
static inline uint8_t *lb_fr_l4_csum_at(struct innet_pkt *pkt, const struct lb_frame *fr)
{
	if (fr->proto == LB_PROTO_UDP) {
		uint8_t *u = innet_pkt_ptr(pkt, fr->l4_off, 8);
		return u == NULL ? NULL : u + 6;
	}
	uint8_t *t = innet_pkt_ptr(pkt, fr->l4_off, 20);
	return t == NULL ? NULL : t + 16;
}

/* Where the L4 checksum lives, or NULL for a UDP checksum of 0 (none). */
static inline uint8_t *lb_fr_l4_csum(struct innet_pkt *pkt, const struct lb_frame *fr)
{
	uint8_t *c = lb_fr_l4_csum_at(pkt, fr);
	if (c != NULL && fr->proto == LB_PROTO_UDP && lb_rd16(c) == 0)
		return NULL;
	return c;
}

/* The full L4 checksum of a parsed frame over l4_len bytes (its field
 * included as it stands), complemented; 0 when it verifies. */
static inline uint16_t lb_fr_csum_l4(struct innet_pkt *pkt, const struct lb_frame *fr,
				     uint32_t l4_len)
{
	const uint8_t *ip = lb_fr_ip(pkt, fr);
	if (ip == NULL)
		return 0;
	uint32_t acc = lb_sum_fixed(ip + 12, 8, 0) + fr->proto + l4_len;
	bool ok;
	acc = lb_fr_sum(pkt, fr->l4_off, l4_len, acc, &ok);
	return (uint16_t)~lb_fold(acc);
}

/* Parse strictly. 0, or a drop reason (LB_DR_BAD_FRAME, NOT_IPV4, BAD_IP,
 * FRAGMENT, BAD_L4, NOT_VIP for another protocol). */
LB_FR_STEP int lb_fr_parse(struct innet_pkt *pkt, struct lb_frame *out)
{
	out->parse_alu = 1;
	const uint8_t *eth = innet_pkt_ptr(pkt, 0, 14);
	if (eth == NULL)
		return LB_DR_BAD_FRAME;
	uint32_t l3 = 14;
	uint16_t type = lb_rd16(eth + 12);
	if (type == 0x8100) {
		const uint8_t *vlan = innet_pkt_ptr(pkt, lb_fr_opaque(out, 16), 2);
		if (vlan == NULL)
			return LB_DR_BAD_FRAME;
		l3 = 18;
		type = lb_rd16(vlan);
	}
	if (type != 0x0800)
		return LB_DR_NOT_IPV4;
	l3 = lb_fr_opaque(out, l3);
	const uint8_t *ip = innet_pkt_ptr(pkt, l3, 20);
	if (ip == NULL)
		return LB_DR_BAD_FRAME;
	uint32_t len = pkt->len;
	uint32_t ihl = (uint32_t)(ip[0] & 0x0f) * 4;
	uint32_t tot = lb_rd16(ip + 2);
	out->parse_alu = 6;
	if (ip[0] >> 4 != 4 || ihl < 20 || l3 + ihl > len || tot < ihl || l3 + tot > len)
		return LB_DR_BAD_IP;
	out->parse_alu = 22;
	uint32_t hsum = lb_sum_fixed(ip, 20, 0);
	uint16_t frag = lb_rd16(ip + 6);
	out->l3_off = l3;
	out->l4_off = l3 + ihl;
	out->proto = ip[9];
	out->ttl = ip[8];
	out->sip = lb_rd32(ip + 12);
	out->dip = lb_rd32(ip + 16);
	out->tcp_flags = 0;
	bool ok;
	hsum = lb_fr_sum(pkt, l3 + 20, ihl - 20, hsum, &ok); /* the options */
	if (!ok || lb_fold(hsum) != 0xffff)
		return LB_DR_BAD_IP;
	if (frag & 0x3fff) /* MF or a fragment offset */
		return LB_DR_FRAGMENT;
	uint32_t l4len = tot - ihl;
	const uint8_t *l4;
	if (out->proto == LB_PROTO_UDP) {
		if (l4len < 8 || (l4 = innet_pkt_ptr(pkt, out->l4_off, 8)) == NULL)
			return LB_DR_BAD_L4;
		uint32_t ulen = lb_rd16(l4 + 4);
		if (ulen < 8 || ulen > l4len)
			return LB_DR_BAD_L4;
		out->l4_len = ulen;
	} else if (out->proto == LB_PROTO_TCP) {
		if (l4len < 20 || (l4 = innet_pkt_ptr(pkt, out->l4_off, 20)) == NULL)
			return LB_DR_BAD_L4;
		uint32_t doff = (uint32_t)(l4[12] >> 4) * 4;
		if (doff < 20 || doff > l4len)
			return LB_DR_BAD_L4;
		out->tcp_flags = l4[13];
		out->l4_len = l4len;
	} else {
		return LB_DR_NOT_VIP;
	}
	out->sport = lb_rd16(l4);
	out->dport = lb_rd16(l4 + 2);
	out->parse_alu = 25;
	return 0;
}

/* RFC 1624 eqn. 3 for one 16-bit word. */
static inline uint16_t lb_csum_adjust(uint16_t hc, uint16_t old, uint16_t new_)
{
	uint32_t acc = (uint16_t)~hc + (uint32_t)(uint16_t)~old + new_;
	return (uint16_t)~lb_fold(acc);
}

static inline uint16_t lb_csum_adjust32(uint16_t hc, uint32_t old, uint32_t new_)
{
	hc = lb_csum_adjust(hc, (uint16_t)(old >> 16), (uint16_t)(new_ >> 16));
	return lb_csum_adjust(hc, (uint16_t)old, (uint16_t)new_);
}

/* Replace an address (at ip_off of the IPv4 header: 12 source, 16
 * destination) and its port (at port_off of the L4 header: 0 or 2), updating
 * both checksums incrementally. */
static inline __attribute__((always_inline)) void lb_fr_rewrite(struct innet_pkt *pkt, const struct lb_frame *fr, uint32_t ip_off,
				 uint32_t port_off, uint32_t old_ip, uint32_t new_ip,
				 uint16_t old_port, uint16_t new_port)
{
	uint8_t *ip = lb_fr_ip(pkt, fr);
	if (ip == NULL)
		return;
	lb_wr16(ip + 10, lb_csum_adjust32(lb_rd16(ip + 10), old_ip, new_ip));
	lb_wr32(ip + ip_off, new_ip);
	uint8_t *c = lb_fr_l4_csum(pkt, fr);
	if (c != NULL) {
		uint16_t hc = lb_csum_adjust32(lb_rd16(c), old_ip, new_ip);
		hc = lb_csum_adjust(hc, old_port, new_port);
		/* UDP: a computed 0 is sent as 0xffff (0 means "no checksum"). */
		if (fr->proto == LB_PROTO_UDP && hc == 0)
			hc = 0xffff;
		lb_wr16(c, hc);
	}
	uint8_t *l4 = innet_pkt_ptr(pkt, fr->l4_off, 4);
	if (l4 != NULL)
		lb_wr16(l4 + port_off, new_port);
}

/* DNAT: the destination address and port become ip, port. */
LB_FR_STEP void lb_fr_set_dst(struct innet_pkt *pkt, struct lb_frame *fr, uint32_t ip,
				 uint16_t port)
{
	lb_fr_rewrite(pkt, fr, 16, 2, fr->dip, ip, fr->dport, port);
	fr->dip = ip;
	fr->dport = port;
}

/* SNAT: the source address and port become ip, port. */
LB_FR_STEP void lb_fr_set_src(struct innet_pkt *pkt, struct lb_frame *fr, uint32_t ip,
				 uint16_t port)
{
	lb_fr_rewrite(pkt, fr, 12, 0, fr->sip, ip, fr->sport, port);
	fr->sip = ip;
	fr->sport = port;
}

/* Set the destination and source MAC addresses. */
LB_FR_STEP void lb_fr_set_macs(struct innet_pkt *pkt, uint64_t dst, uint64_t src)
{
	uint8_t *f = innet_pkt_ptr(pkt, 0, 12);
	if (f == NULL)
		return;
	for (int i = 0; i < 6; i++) {
		f[i] = (uint8_t)(dst >> (40 - 8 * i));
		f[6 + i] = (uint8_t)(src >> (40 - 8 * i));
	}
}

/* Decrement the TTL (the caller checked it is > 1), updating the IPv4
 * header checksum incrementally. */
LB_FR_STEP void lb_fr_dec_ttl(struct innet_pkt *pkt, struct lb_frame *fr)
{
	uint8_t *ip = lb_fr_ip(pkt, fr);
	if (ip == NULL)
		return;
	uint16_t old = lb_rd16(ip + 8);           /* TTL << 8 | protocol */
	ip[8] = (uint8_t)(fr->ttl - 1);
	lb_wr16(ip + 10, lb_csum_adjust(lb_rd16(ip + 10), old, lb_rd16(ip + 8)));
	fr->ttl = ip[8];
}

/* Finish a partial TCP/UDP checksum (see the top). Returns true if it wrote
 * the full checksum; a checksum that verifies is never touched. */
LB_FR_STEP bool lb_fr_complete_csum(struct innet_pkt *pkt, const struct lb_frame *fr)
{
	const uint8_t *ip = lb_fr_ip(pkt, fr);
	uint8_t *c = lb_fr_l4_csum(pkt, fr);
	if (ip == NULL || c == NULL)
		return false; /* UDP without a checksum */
	uint16_t pseudo = lb_fold(lb_sum_fixed(ip + 12, 8, 0) + fr->proto + fr->l4_len);
	if (lb_rd16(c) != pseudo)
		return false;
	/* Verifies as it is (a complete checksum that happens to equal P)? */
	bool ok;
	if (lb_fold(lb_fr_sum(pkt, fr->l4_off, fr->l4_len, pseudo, &ok)) == 0xffff || !ok)
		return false;
	c = lb_fr_l4_csum_at(pkt, fr);
	if (c == NULL)
		return false;
	lb_wr16(c, 0);
	uint16_t sum = lb_fr_csum_l4(pkt, fr, fr->l4_len);
	if (fr->proto == LB_PROTO_UDP && sum == 0)
		sum = 0xffff;
	c = lb_fr_l4_csum_at(pkt, fr);
	if (c == NULL)
		return false;
	lb_wr16(c, sum);
	return true;
}

#endif /* INNET_LB_FRAME_H */
