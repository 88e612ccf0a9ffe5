/*
 * dns.h — the little DNS (RFC 1035) the load-balancer host tools speak:
 * build a one-question query, parse a query's question, build an
 * authoritative answer with at most one A record, and read a reply's id,
 * rcode and first A record. Only what a UDP test service, an open-loop
 * client and a latency probe need; every parser is bounds-checked and
 * returns -EBADMSG on anything it does not understand.
 *
 * Message layout (all big-endian):
 *
 *   +--------+--------+--------+--------+--------+--------+
 *   |   id   | flags  |qdcount |ancount |nscount |arcount |  header, 12 bytes
 *   +--------+--------+--------+--------+--------+--------+
 *   | qname (labels: len byte + bytes ..., 0) | qtype | qclass |   question
 *   | name (0xC00C: pointer to the qname) | type | class | ttl(4) | rdlen | rdata |  answer
 *
 *   flags: QR(15) OPCODE(14..11) AA(10) TC(9) RD(8) RA(7) Z(6..4) RCODE(3..0)
 */
#ifndef INNET_LBHOST_DNS_H
#define INNET_LBHOST_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LBH_DNS_HDR_LEN   12u
#define LBH_DNS_NAME_MAX  255u     /* wire length of a name (RFC 1035 2.3.4) */
#define LBH_DNS_MSG_MAX   512u     /* plain UDP DNS, no EDNS */

#define LBH_DNS_QR        0x8000u
#define LBH_DNS_AA        0x0400u
#define LBH_DNS_TC        0x0200u
#define LBH_DNS_RD        0x0100u
#define LBH_DNS_OPCODE(f) (((f) >> 11) & 0xfu)

enum lbh_dns_rcode {
	LBH_DNS_NOERROR = 0,
	LBH_DNS_FORMERR = 1,
	LBH_DNS_SERVFAIL = 2,
	LBH_DNS_NXDOMAIN = 3,
	LBH_DNS_NOTIMP = 4,
	LBH_DNS_REFUSED = 5,
};

#define LBH_DNS_TYPE_A    1u
#define LBH_DNS_TYPE_ANY  255u
#define LBH_DNS_CLASS_IN  1u

/* A parsed question. */
struct lbh_dns_question {
	uint16_t id;                       /* header id */
	uint16_t flags;                    /* header flags */
	uint16_t qtype;                    /* question type */
	uint16_t qclass;                   /* question class */
	size_t end;                        /* offset just past the question */
	char name[LBH_DNS_NAME_MAX + 1];   /* lower-case dotted, no final dot ("" = root) */
};

/* A parsed reply (the parts a client needs). */
struct lbh_dns_reply {
	uint16_t id;        /* header id */
	uint16_t flags;     /* header flags (QR set) */
	uint8_t rcode;      /* flags & 0xf */
	uint16_t ancount;   /* answers announced */
	uint32_t a_addr;    /* first A record's address, host order; 0 if none */
};

/* Write a query for name (dotted, a final dot optional) into buf. Returns the
 * length, -EINVAL (a bad name) or -ENOSPC. */
int lbh_dns_build_query(void *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype,
			bool rd);

/* Parse the header and the first question of msg. 0 or -EBADMSG (too short,
 * qdcount 0, label over 63 bytes, name over 255, compression in a question,
 * a NUL or a dot inside a label — the name could not be told apart from
 * another in dotted text —, truncated). q->id and q->flags are set whenever len >= 12, even on error,
 * so a server can still answer FORMERR. */
int lbh_dns_parse_question(const void *msg, size_t len, struct lbh_dns_question *q);

/* Write the answer to query q (whose first q->end bytes are in req): the
 * header and question copied, QR and AA set, RD kept, rcode, and one A
 * record (ttl, addr in host order) when addr != 0. Returns the length or
 * -ENOSPC. */
int lbh_dns_build_answer(const void *req, const struct lbh_dns_question *q, void *buf, size_t cap,
			 enum lbh_dns_rcode rcode, uint32_t addr, uint32_t ttl);

/* A FORMERR answer carrying only req's header (id and opcode kept, counts
 * zero). req must have at least 12 bytes. Returns 12. */
int lbh_dns_build_formerr(const void *req, void *buf, size_t cap);

/* Parse a reply: 0 or -EBADMSG (not a reply, truncated, a bad name). */
int lbh_dns_parse_reply(const void *msg, size_t len, struct lbh_dns_reply *r);

/* True when name equals zone or is below it (both lower-case dotted, no
 * final dot; zone "" matches everything). */
bool lbh_dns_in_zone(const char *name, const char *zone);

#endif
