/*
 * frame.c — packet mode's frame helpers: a strict Ethernet/IPv4/UDP/TCP
 * parser and the address rewrites of an L4 balancer (DNAT toward a unit,
 * SNAT of its replies back to the VIP) with incremental checksum updates
 * (RFC 1624: HC' = ~(~HC + ~m + m')). Pure functions over a byte buffer: no
 * state, no allocation; the handler (dataplane.c) and the unit tests call
 * them.
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
 * re-sent through a packet socket, so lb_frame_complete_csum() finishes it
 * in software before the incremental rewrites: when the field equals P (6
 * additions to check) and the full checksum does not verify, it writes the
 * full checksum. A complete checksum is never changed: if it verifies it is
 * left alone, and one that equals P but does not verify is the same as a
 * partial one. Frames whose field is not P cost nothing more.
 */
#include <stddef.h>
#include <string.h>

#include "lb/lb_pvt.h"

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t sum16(const uint8_t *p, uint32_t n, uint32_t acc)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		acc += rd16(p + i);
	if (n & 1)
		acc += (uint32_t)p[n - 1] << 8;
	return acc;
}

static uint16_t fold(uint32_t acc)
{
	while (acc >> 16)
		acc = (acc & 0xffff) + (acc >> 16);
	return (uint16_t)acc;
}

uint16_t lb_csum_ipv4(const uint8_t *ip, uint32_t ihl_bytes)
{
	return (uint16_t)~fold(sum16(ip, ihl_bytes, 0));
}

uint16_t lb_csum_l4(const uint8_t *f, const struct lb_frame *fr, uint32_t l4_len)
{
	const uint8_t *ip = f + fr->l3_off;
	uint32_t acc = sum16(ip + 12, 8, 0) + fr->proto + l4_len;
	return (uint16_t)~fold(sum16(f + fr->l4_off, l4_len, acc));
}

int lb_frame_parse(const uint8_t *f, uint32_t len, struct lb_frame *out)
{
	if (len < 14)
		return LB_DR_BAD_FRAME;
	uint32_t off = 12;
	uint16_t type = rd16(f + off);
	if (type == 0x8100) {
		if (len < 18)
			return LB_DR_BAD_FRAME;
		off += 4;
		type = rd16(f + off);
	}
	if (type != 0x0800)
		return LB_DR_NOT_IPV4;
	uint32_t l3 = off + 2;
	if (len < l3 + 20)
		return LB_DR_BAD_FRAME;
	const uint8_t *ip = f + l3;
	uint32_t ihl = (uint32_t)(ip[0] & 0x0f) * 4;
	uint32_t tot = rd16(ip + 2);
	if (ip[0] >> 4 != 4 || ihl < 20 || l3 + ihl > len || tot < ihl || l3 + tot > len)
		return LB_DR_BAD_IP;
	if (fold(sum16(ip, ihl, 0)) != 0xffff)
		return LB_DR_BAD_IP;
	if (rd16(ip + 6) & 0x3fff) /* MF or a fragment offset */
		return LB_DR_FRAGMENT;
	out->l3_off = l3;
	out->l4_off = l3 + ihl;
	out->proto = ip[9];
	out->ttl = ip[8];
	out->sip = rd32(ip + 12);
	out->dip = rd32(ip + 16);
	out->tcp_flags = 0;
	uint32_t l4len = tot - ihl;
	const uint8_t *l4 = f + out->l4_off;
	if (out->proto == 17) {
		if (l4len < 8)
			return LB_DR_BAD_L4;
		uint32_t ulen = rd16(l4 + 4);
		if (ulen < 8 || ulen > l4len)
			return LB_DR_BAD_L4;
		out->l4_len = ulen;
	} else if (out->proto == 6) {
		if (l4len < 20)
			return LB_DR_BAD_L4;
		uint32_t doff = (uint32_t)(l4[12] >> 4) * 4;
		if (doff < 20 || doff > l4len)
			return LB_DR_BAD_L4;
		out->tcp_flags = l4[13];
		out->l4_len = l4len;
	} else {
		return LB_DR_NOT_VIP;
	}
	out->sport = rd16(l4);
	out->dport = rd16(l4 + 2);
	return 0;
}

/* RFC 1624 eqn. 3 for one 16-bit word. */
static uint16_t csum_adjust(uint16_t hc, uint16_t old, uint16_t new_)
{
	uint32_t acc = (uint16_t)~hc + (uint32_t)(uint16_t)~old + new_;
	return (uint16_t)~fold(acc);
}

static uint16_t csum_adjust32(uint16_t hc, uint32_t old, uint32_t new_)
{
	hc = csum_adjust(hc, (uint16_t)(old >> 16), (uint16_t)(new_ >> 16));
	return csum_adjust(hc, (uint16_t)old, (uint16_t)new_);
}

/* Where the L4 checksum lives, or NULL for a UDP checksum of 0 (none). */
static uint8_t *l4_csum(uint8_t *f, const struct lb_frame *fr)
{
	uint8_t *l4 = f + fr->l4_off;
	if (fr->proto == 17)
		return rd16(l4 + 6) == 0 ? NULL : l4 + 6;
	return l4 + 16;
}

static void rewrite(uint8_t *f, struct lb_frame *fr, uint32_t ip_off, uint32_t port_off,
		    uint32_t old_ip, uint32_t new_ip, uint16_t old_port, uint16_t new_port)
{
	uint8_t *ip = f + fr->l3_off;
	wr16(ip + 10, csum_adjust32(rd16(ip + 10), old_ip, new_ip));
	wr32(ip + ip_off, new_ip);
	uint8_t *c = l4_csum(f, fr);
	if (c != NULL) {
		uint16_t hc = csum_adjust32(rd16(c), old_ip, new_ip);
		hc = csum_adjust(hc, old_port, new_port);
		/* UDP: a computed 0 is sent as 0xffff (0 means "no checksum"). */
		if (fr->proto == 17 && hc == 0)
			hc = 0xffff;
		wr16(c, hc);
	}
	wr16(f + fr->l4_off + port_off, new_port);
}

void lb_frame_set_dst(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port)
{
	rewrite(f, fr, 16, 2, fr->dip, ip, fr->dport, port);
	fr->dip = ip;
	fr->dport = port;
}

void lb_frame_set_src(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port)
{
	rewrite(f, fr, 12, 0, fr->sip, ip, fr->sport, port);
	fr->sip = ip;
	fr->sport = port;
}

uint64_t lb_frame_mac(const uint8_t *m)
{
	uint64_t v = 0;
	for (int i = 0; i < 6; i++)
		v = v << 8 | m[i];
	return v;
}

void lb_frame_set_macs(uint8_t *f, uint64_t dst, uint64_t src)
{
	for (int i = 0; i < 6; i++) {
		f[i] = (uint8_t)(dst >> (40 - 8 * i));
		f[6 + i] = (uint8_t)(src >> (40 - 8 * i));
	}
}

void lb_frame_dec_ttl(uint8_t *f, struct lb_frame *fr)
{
	uint8_t *ip = f + fr->l3_off;
	uint16_t old = rd16(ip + 8);           /* TTL << 8 | protocol */
	ip[8] = (uint8_t)(fr->ttl - 1);
	wr16(ip + 10, csum_adjust(rd16(ip + 10), old, rd16(ip + 8)));
	fr->ttl = ip[8];
}

bool lb_frame_complete_csum(uint8_t *f, const struct lb_frame *fr)
{
	const uint8_t *ip = f + fr->l3_off;
	uint8_t *c = l4_csum(f, fr);
	if (c == NULL)
		return false; /* UDP without a checksum */
	uint16_t pseudo = fold(sum16(ip + 12, 8, 0) + fr->proto + fr->l4_len);
	if (rd16(c) != pseudo)
		return false;
	/* Verifies as it is (a complete checksum that happens to equal P)? */
	if (fold(sum16(f + fr->l4_off, fr->l4_len, pseudo)) == 0xffff)
		return false;
	wr16(c, 0);
	uint16_t sum = lb_csum_l4(f, fr, fr->l4_len);
	if (fr->proto == 17 && sum == 0)
		sum = 0xffff;
	wr16(c, sum);
	return true;
}
