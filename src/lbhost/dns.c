/*
 * dns.c — building and parsing the DNS messages of the load-balancer host
 * tools (see dns.h). Every read is checked against the message length
 * before it happens; names are walked label by label with the RFC 1035
 * limits (63-byte labels, 255-byte names, compression pointers only
 * backwards and at most 32 of them per name).
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "lbhost/dns.h"

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	wr16(p, (uint16_t)(v >> 16));
	wr16(p + 2, (uint16_t)v);
}

int lbh_dns_build_query(void *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype,
			bool rd)
{
	uint8_t *b = buf;
	size_t n = strlen(name);
	if (n > 0 && name[n - 1] == '.')
		n--;
	if (n > 253)
		return -EINVAL;
	size_t need = LBH_DNS_HDR_LEN + n + 2 + 4;
	if (cap < need)
		return -ENOSPC;
	memset(b, 0, LBH_DNS_HDR_LEN);
	wr16(b, id);
	wr16(b + 2, rd ? LBH_DNS_RD : 0);
	wr16(b + 4, 1);
	size_t o = LBH_DNS_HDR_LEN;
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && name[j] != '.')
			j++;
		size_t l = j - i;
		if (l == 0 || l > 63)
			return -EINVAL;
		b[o++] = (uint8_t)l;
		memcpy(b + o, name + i, l);
		o += l;
		i = j + 1;
		if (j < n && j + 1 == n)
			return -EINVAL; /* "a..": empty label after a dot */
	}
	b[o++] = 0;
	wr16(b + o, qtype);
	wr16(b + o + 2, LBH_DNS_CLASS_IN);
	return (int)(o + 4);
}

int lbh_dns_parse_question(const void *msg, size_t len, struct lbh_dns_question *q)
{
	const uint8_t *m = msg;
	q->name[0] = '\0';
	q->end = 0;
	if (len < LBH_DNS_HDR_LEN)
		return -EBADMSG;
	q->id = rd16(m);
	q->flags = rd16(m + 2);
	if (rd16(m + 4) == 0)
		return -EBADMSG;
	size_t o = LBH_DNS_HDR_LEN, w = 0, wire = 1;
	for (;;) {
		if (o >= len)
			return -EBADMSG;
		uint8_t l = m[o++];
		if (l == 0)
			break;
		if (l > 63)
			return -EBADMSG; /* a compression pointer or a reserved label type */
		wire += 1u + l;
		if (wire > LBH_DNS_NAME_MAX || o + l > len)
			return -EBADMSG;
		if (w)
			q->name[w++] = '.';
		for (unsigned i = 0; i < l; i++) {
			/* the name is kept as dotted text: a NUL or a dot inside
			 * a label would make it another name ("lb.test\0.x" read
			 * as lb.test) */
			if (m[o + i] == '\0' || m[o + i] == '.') {
				q->name[0] = '\0';
				return -EBADMSG;
			}
			q->name[w++] = (char)tolower(m[o + i]);
		}
		o += l;
	}
	q->name[w] = '\0';
	if (o + 4 > len)
		return -EBADMSG;
	q->qtype = rd16(m + o);
	q->qclass = rd16(m + o + 2);
	q->end = o + 4;
	return 0;
}

int lbh_dns_build_answer(const void *req, const struct lbh_dns_question *q, void *buf, size_t cap,
			 enum lbh_dns_rcode rcode, uint32_t addr, uint32_t ttl)
{
	uint8_t *b = buf;
	size_t need = q->end + (addr ? 16 : 0);
	if (cap < need || q->end < LBH_DNS_HDR_LEN)
		return -ENOSPC;
	memmove(b, req, q->end);
	uint16_t flags = (uint16_t)((q->flags & (0x7800u | LBH_DNS_RD)) | LBH_DNS_QR | LBH_DNS_AA |
				    ((unsigned)rcode & 0xfu));
	wr16(b + 2, flags);
	wr16(b + 4, 1);
	wr16(b + 6, addr ? 1 : 0);
	wr16(b + 8, 0);
	wr16(b + 10, 0);
	if (!addr)
		return (int)q->end;
	uint8_t *a = b + q->end;
	wr16(a, 0xc00c);
	wr16(a + 2, LBH_DNS_TYPE_A);
	wr16(a + 4, LBH_DNS_CLASS_IN);
	wr32(a + 6, ttl);
	wr16(a + 10, 4);
	wr32(a + 12, addr);
	return (int)need;
}

int lbh_dns_build_formerr(const void *req, void *buf, size_t cap)
{
	const uint8_t *r = req;
	uint8_t *b = buf;
	if (cap < LBH_DNS_HDR_LEN)
		return -ENOSPC;
	uint16_t flags = (uint16_t)((rd16(r + 2) & 0x7800u) | LBH_DNS_QR | LBH_DNS_FORMERR);
	memset(b, 0, LBH_DNS_HDR_LEN);
	wr16(b, rd16(r));
	wr16(b + 2, flags);
	return LBH_DNS_HDR_LEN;
}

/* Skip a (possibly compressed) name starting at *o; *o moves past it. */
static int skip_name(const uint8_t *m, size_t len, size_t *o)
{
	size_t p = *o;
	for (;;) {
		if (p >= len)
			return -EBADMSG;
		uint8_t l = m[p];
		if (l == 0) {
			*o = p + 1;
			return 0;
		}
		if ((l & 0xc0) == 0xc0) {
			if (p + 2 > len)
				return -EBADMSG;
			*o = p + 2; /* a pointer ends the name here */
			return 0;
		}
		if (l > 63)
			return -EBADMSG;
		p += 1u + l;
	}
}

int lbh_dns_parse_reply(const void *msg, size_t len, struct lbh_dns_reply *r)
{
	const uint8_t *m = msg;
	memset(r, 0, sizeof(*r));
	if (len < LBH_DNS_HDR_LEN)
		return -EBADMSG;
	r->id = rd16(m);
	r->flags = rd16(m + 2);
	r->rcode = (uint8_t)(r->flags & 0xf);
	if (!(r->flags & LBH_DNS_QR))
		return -EBADMSG;
	uint16_t qd = rd16(m + 4);
	r->ancount = rd16(m + 6);
	size_t o = LBH_DNS_HDR_LEN;
	for (unsigned i = 0; i < qd; i++) {
		if (skip_name(m, len, &o) != 0 || o + 4 > len)
			return -EBADMSG;
		o += 4;
	}
	for (unsigned i = 0; i < r->ancount; i++) {
		if (skip_name(m, len, &o) != 0 || o + 10 > len)
			return -EBADMSG;
		uint16_t type = rd16(m + o), klass = rd16(m + o + 2), rdlen = rd16(m + o + 8);
		o += 10;
		if (o + rdlen > len)
			return -EBADMSG;
		if (!r->a_addr && type == LBH_DNS_TYPE_A && klass == LBH_DNS_CLASS_IN && rdlen == 4)
			r->a_addr = ((uint32_t)rd16(m + o) << 16) | rd16(m + o + 2);
		o += rdlen;
	}
	return 0;
}

bool lbh_dns_in_zone(const char *name, const char *zone)
{
	size_t n = strlen(name), z = strlen(zone);
	if (z == 0)
		return true;
	if (n < z || strcmp(name + n - z, zone) != 0)
		return false;
	return n == z || name[n - z - 1] == '.';
}
