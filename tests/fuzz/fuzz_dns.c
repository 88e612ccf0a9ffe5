/*
 * fuzz_dns.c — libFuzzer target: the DNS of the load balancer's host tools
 * (src/lbhost/dns.c) on what the network brings: a datagram as the backend
 * (`innet lb backend`) receives a request — through lbh_backend_answer, the
 * function its receive loops call — and as the agent and the load
 * generator receive a reply (lbh_dns_parse_reply).
 *
 *   byte 0   bit 0: the backend's zone is "" (everything) instead of lb.test
 *   rest     the datagram (cut at LBH_DNS_MSG_MAX, as the backend's 512-byte
 *            receive buffers cut it)
 *
 * Invariants:
 *   - every request datagram is counted in exactly one of answered,
 *     nxdomain, formerr, notimp, drop_malformed — and is answered unless it
 *     was counted as dropped (a datagram never vanishes uncounted);
 *   - an answer fits LBH_DNS_MSG_MAX, is a reply (QR) to the request's id
 *     that the clients' own parser reads, with the request's question; an
 *     answered query for an A record of the zone carries the backend's
 *     address, anything else none;
 *   - a question that parses has a lower-case name of at most 255 bytes
 *     that builds into a query which parses back to the same name;
 *   - lbh_dns_parse_reply accepts or refuses, reading nothing past the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lbhost/dns.h"
#include "lbhost/lbhost.h"

#define CHECK(cond)                                                                            \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "fuzz_dns: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                        \
			abort();                                                               \
		}                                                                              \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t counted(const struct lbh_backend_stats *st)
{
	return st->answered + st->nxdomain + st->formerr + st->notimp + st->drop_malformed;
}

static void fuzz_backend(const uint8_t *req, size_t len, bool any_zone)
{
	struct lbh_backend_cfg c;
	lbh_backend_defaults(&c);
	if (any_zone)
		c.zone = "";
	struct lbh_backend_stats st;
	memset(&st, 0, sizeof(st));
	static uint8_t out[LBH_DNS_MSG_MAX];
	int n = lbh_backend_answer(&c, req, len, out, &st);
	CHECK(counted(&st) == 1);
	CHECK(n >= 0 && (size_t)n <= LBH_DNS_MSG_MAX);
	if (n == 0) {
		if (st.drop_malformed != 1)
			fprintf(stderr, "fuzz_dns: a %zu-byte request neither answered nor counted as dropped "
				"(answered %lu nxdomain %lu formerr %lu notimp %lu)\n", len,
				(unsigned long)st.answered, (unsigned long)st.nxdomain,
				(unsigned long)st.formerr, (unsigned long)st.notimp);
		CHECK(st.drop_malformed == 1);
		return;
	}
	CHECK(st.drop_malformed == 0);
	struct lbh_dns_reply r;
	CHECK(lbh_dns_parse_reply(out, (size_t)n, &r) == 0);
	CHECK(r.id == (uint16_t)(req[0] << 8 | req[1]));
	CHECK(r.flags & LBH_DNS_QR);
	struct lbh_dns_question q;
	if (st.answered || st.nxdomain) {
		/* the question is the request's */
		CHECK(lbh_dns_parse_question(req, len, &q) == 0);
		CHECK((size_t)n >= q.end && memcmp(out + LBH_DNS_HDR_LEN, req + LBH_DNS_HDR_LEN,
						   q.end - LBH_DNS_HDR_LEN) == 0);
		bool a = st.answered && (q.qtype == LBH_DNS_TYPE_A || q.qtype == LBH_DNS_TYPE_ANY) &&
			 q.qclass == LBH_DNS_CLASS_IN;
		CHECK(r.a_addr == (a ? c.answer : 0));
		CHECK(r.rcode == (st.answered ? LBH_DNS_NOERROR : LBH_DNS_NXDOMAIN));
	} else {
		CHECK(r.a_addr == 0 && r.ancount == 0);
		CHECK(r.rcode == (st.notimp ? LBH_DNS_NOTIMP : LBH_DNS_FORMERR));
	}
}

static void fuzz_question(const uint8_t *msg, size_t len)
{
	struct lbh_dns_question q;
	if (lbh_dns_parse_question(msg, len, &q) != 0)
		return;
	size_t nl = strlen(q.name);
	CHECK(q.end <= len && nl <= LBH_DNS_NAME_MAX);
	for (size_t i = 0; i < nl; i++)
		CHECK(!(q.name[i] >= 'A' && q.name[i] <= 'Z'));
	/* a name with a dot in a label cannot be written back as dotted text */
	uint8_t b[LBH_DNS_MSG_MAX];
	int n = lbh_dns_build_query(b, sizeof(b), q.id, q.name, q.qtype, false);
	if (n < 0)
		return;
	struct lbh_dns_question q2;
	CHECK(lbh_dns_parse_question(b, (size_t)n, &q2) == 0);
	CHECK(strcmp(q.name, q2.name) == 0 && q2.qtype == q.qtype && q2.id == q.id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *d = data + 1;
	size_t len = size - 1 > LBH_DNS_MSG_MAX ? LBH_DNS_MSG_MAX : size - 1;
	/* a copy of exactly len bytes: ASan sees a read past the datagram */
	uint8_t *m = malloc(len ? len : 1);
	CHECK(m != NULL);
	memcpy(m, d, len);
	fuzz_backend(m, len, data[0] & 1);
	fuzz_question(m, len);
	struct lbh_dns_reply r;
	(void)lbh_dns_parse_reply(m, len, &r);
	free(m);
	return 0;
}
