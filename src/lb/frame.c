/*
 * frame.c — packet mode's frame code on plain byte buffers: the functions of
 * lb/frame.h (the handler's own parser, rewrites and checksums, which read
 * and write through innet_pkt_ptr) called on a packet that views the buffer.
 * For the unit tests and the fuzzer, which so test the data path's code,
 * and for the control side (a MAC address as a number). No state, no
 * allocation.
 *
 *   buffer f, len bytes ──► struct innet_pkt { data = f, len } ──► lb_fr_*()
 *
 * The rewrites take no length: a frame the parser accepted spans at least
 * l4_off + l4_len bytes, and they touch nothing beyond.
 */
#include <string.h>

#include "lb/lb_pvt.h"

/* A packet (user-space engine's struct innet_pkt) over len bytes at f. */
static void view(struct innet_pkt *p, const uint8_t *f, uint32_t len)
{
	memset(p, 0, sizeof(*p));
	p->data = (uint8_t *)(uintptr_t)f;
	p->len = len;
	p->buf_start = p->data;
	p->buf_end = p->data + len;
	p->flags = INNET_PKT_F_RAW;
}

/* The bytes of a parsed frame. */
static uint32_t parsed_len(const struct lb_frame *fr)
{
	return fr->l4_off + fr->l4_len;
}

int lb_frame_parse(const uint8_t *f, uint32_t len, struct lb_frame *out)
{
	struct innet_pkt p;
	view(&p, f, len);
	return lb_fr_parse(&p, out);
}

uint16_t lb_csum_ipv4(const uint8_t *ip, uint32_t ihl_bytes)
{
	struct innet_pkt p;
	bool ok;
	view(&p, ip, ihl_bytes);
	return (uint16_t)~lb_fold(lb_fr_sum(&p, 0, ihl_bytes, 0, &ok));
}

uint16_t lb_csum_l4(const uint8_t *f, const struct lb_frame *fr, uint32_t l4_len)
{
	struct innet_pkt p;
	view(&p, f, fr->l4_off + l4_len);
	return lb_fr_csum_l4(&p, fr, l4_len);
}

void lb_frame_set_dst(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port)
{
	struct innet_pkt p;
	view(&p, f, parsed_len(fr));
	lb_fr_set_dst(&p, fr, ip, port);
}

void lb_frame_set_src(uint8_t *f, struct lb_frame *fr, uint32_t ip, uint16_t port)
{
	struct innet_pkt p;
	view(&p, f, parsed_len(fr));
	lb_fr_set_src(&p, fr, ip, port);
}

uint64_t lb_frame_mac(const uint8_t *m)
{
	return lb_mac48(m);
}

void lb_frame_set_macs(uint8_t *f, uint64_t dst, uint64_t src)
{
	struct innet_pkt p;
	view(&p, f, 12);
	lb_fr_set_macs(&p, dst, src);
}

void lb_frame_dec_ttl(uint8_t *f, struct lb_frame *fr)
{
	struct innet_pkt p;
	view(&p, f, parsed_len(fr));
	lb_fr_dec_ttl(&p, fr);
}

bool lb_frame_complete_csum(uint8_t *f, const struct lb_frame *fr)
{
	struct innet_pkt p;
	view(&p, f, parsed_len(fr));
	return lb_fr_complete_csum(&p, fr);
}
