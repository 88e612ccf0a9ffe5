/*
 * report.c — the load balancer's agent reports (innet/lb.h): encode and MAC
 * (seal), verify and decode (open), and the shared key file.
 *
 * The MAC is HMAC-SHA256 (libsodium's crypto_auth_hmacsha256) truncated to
 * 16 bytes over the first 32 bytes of the datagram. The key is expanded once
 * into an HMAC state (inner and outer pads already absorbed), and each MAC
 * copies that state and absorbs 32 bytes: two SHA-256 compressions, about a
 * microsecond. No allocation, no system call, no lock. The switch verifies
 * reports on its control thread (the lb program's on_cpu, ctl.c): its data
 * path, which may not call libsodium, hands them over after the checks that
 * need no key. Agents (src/lbhost/agent.c) seal with the same code.
 */
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "innet/lb.h"
#include "lb/wire.h"

_Static_assert(sizeof(crypto_auth_hmacsha256_state) <= sizeof(((struct innet_lb_key *)0)->state),
	       "the HMAC state fits struct innet_lb_key");
_Static_assert(_Alignof(crypto_auth_hmacsha256_state) <= 16, "HMAC state alignment");

static const char *const err_names[INNET_LB_E_COUNT] = {
	[INNET_LB_E_OK] = "ok",
	[INNET_LB_E_TOO_SHORT] = "bad_length",
	[INNET_LB_E_BAD_MAGIC] = "bad_magic",
	[INNET_LB_E_WRONG_SERVICE] = "wrong_service",
	[INNET_LB_E_BAD_TYPE] = "bad_type",
	[INNET_LB_E_BAD_FIELD] = "bad_field",
	[INNET_LB_E_BAD_MAC] = "bad_mac",
};

const char *innet_lb_err_name(int err)
{
	if (err < 0)
		err = -err;
	if (err >= INNET_LB_E_COUNT)
		return "unknown";
	return err_names[err];
}

int innet_lb_key_init(struct innet_lb_key *k, const uint8_t raw[INNET_LB_KEY_LEN])
{
	if (sodium_init() < 0)
		return -ENOSYS;
	memset(k, 0, sizeof(*k));
	memcpy(k->raw, raw, INNET_LB_KEY_LEN);
	crypto_auth_hmacsha256_init((crypto_auth_hmacsha256_state *)k->state, k->raw,
				    INNET_LB_KEY_LEN);
	return 0;
}

void innet_lb_key_wipe(struct innet_lb_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int innet_lb_key_parse(const char *text, uint8_t raw[INNET_LB_KEY_LEN])
{
	for (size_t i = 0; i < INNET_LB_KEY_LEN; i++) {
		int hi = hexval((unsigned char)text[2 * i]);
		int lo = hi < 0 ? -1 : hexval((unsigned char)text[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		raw[i] = (uint8_t)(hi << 4 | lo);
	}
	for (const char *p = text + 2 * INNET_LB_KEY_LEN; *p != '\0'; p++)
		if (!isspace((unsigned char)*p))
			return -EINVAL;
	return 0;
}

int innet_lb_key_load(struct innet_lb_key *k, const char *path, char *err, size_t errlen)
{
	char text[160];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "key file '%s': %s", path, strerror(e));
		return -e;
	}
	size_t got = 0;
	while (got < sizeof(text) - 1) {
		ssize_t n = read(fd, text + got, sizeof(text) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			snprintf(err, errlen, "key file '%s': %s", path, strerror(e));
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	text[got] = '\0';
	uint8_t raw[INNET_LB_KEY_LEN];
	int rc = -EINVAL;
	if (got == sizeof(text) - 1 || strlen(text) != got || innet_lb_key_parse(text, raw) != 0) {
		snprintf(err, errlen,
			 "key file '%s': expected 64 hexadecimal characters (a 32-byte key), e.g. "
			 "from: head -c32 /dev/urandom | xxd -p -c64", path);
		goto out;
	}
	rc = innet_lb_key_init(k, raw);
	if (rc != 0)
		snprintf(err, errlen, "key file '%s': libsodium failed to initialise", path);
out:
	sodium_memzero(text, sizeof(text));
	sodium_memzero(raw, sizeof(raw));
	return rc;
}

void innet_lb_mac(const struct innet_lb_key *k, const void *data, size_t len,
		  uint8_t mac[INNET_LB_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t full[crypto_auth_hmacsha256_BYTES];
	memcpy(&st, k->state, sizeof(st));
	crypto_auth_hmacsha256_update(&st, data, len);
	crypto_auth_hmacsha256_final(&st, full);
	memcpy(mac, full, INNET_LB_MAC_LEN);
}

bool innet_lb_mac_ok(const struct innet_lb_key *k, const void *data, size_t len,
		     const uint8_t mac[INNET_LB_MAC_LEN])
{
	uint8_t want[INNET_LB_MAC_LEN];
	innet_lb_mac(k, data, len, want);
	return sodium_memcmp(want, mac, INNET_LB_MAC_LEN) == 0;
}

static bool fields_ok(uint8_t kind, uint8_t state, uint16_t rflags, uint64_t seq)
{
	return kind < INNET_LB_KIND_COUNT && !(state & ~INNET_LB_ST_MASK) &&
	       !(rflags & ~INNET_LB_RF_MASK) && seq != 0;
}

int innet_lb_report_seal(const struct innet_lb_report *r, const struct innet_lb_key *k,
			 void *buf, size_t buflen)
{
	if (buflen < INNET_LB_REPORT_LEN)
		return -ENOSPC;
	if (!fields_ok(r->kind, r->state, r->rflags, r->seq))
		return -INNET_LB_E_BAD_FIELD;
	struct innet_hdr h = {
		.magic = INNET_MAGIC,
		.version = INNET_VERSION,
		.service = INNET_SVC_LB,
		.flags = 0,
		.dst_node = htobe16(r->dst_node),
		.src_node = htobe16(r->src_node),
	};
	struct innet_lb_report_hdr rh = {
		.type = INNET_LB_T_REPORT,
		.kind = r->kind,
		.state = r->state,
		.load = r->load,
		.server = htobe16(r->server),
		.unit = htobe16(r->unit),
		.seq = htobe64(r->seq),
		.latency_us = htobe32(r->latency_us),
		.rflags = htobe16(r->rflags),
		.reserved = 0,
	};
	uint8_t *b = buf;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), &rh, sizeof(rh));
	innet_lb_mac(k, b, INNET_LB_MAC_OFF, b + INNET_LB_MAC_OFF);
	return (int)INNET_LB_REPORT_LEN;
}

int innet_lb_report_open(const void *buf, size_t len, const struct innet_lb_key *k,
			 struct innet_lb_report *r)
{
	if (len != INNET_LB_REPORT_LEN)
		return -INNET_LB_E_TOO_SHORT;
	struct innet_hdr h;
	struct innet_lb_report_hdr rh;
	memcpy(&h, buf, sizeof(h));
	memcpy(&rh, (const uint8_t *)buf + sizeof(h), sizeof(rh));
	if (h.magic != INNET_MAGIC || h.version != INNET_VERSION)
		return -INNET_LB_E_BAD_MAGIC;
	if (h.service != INNET_SVC_LB)
		return -INNET_LB_E_WRONG_SERVICE;
	if (rh.type != INNET_LB_T_REPORT)
		return -INNET_LB_E_BAD_TYPE;
	/* The MAC first: an unauthenticated datagram says nothing about fields. */
	if (!innet_lb_mac_ok(k, buf, INNET_LB_MAC_OFF, rh.mac))
		return -INNET_LB_E_BAD_MAC;
	uint16_t rflags = be16toh(rh.rflags);
	uint64_t seq = be64toh(rh.seq);
	if (!fields_ok(rh.kind, rh.state, rflags, seq) || rh.reserved != 0 || h.flags != 0)
		return -INNET_LB_E_BAD_FIELD;
	r->server = be16toh(rh.server);
	r->unit = be16toh(rh.unit);
	r->kind = rh.kind;
	r->state = rh.state;
	r->load = rh.load;
	r->rflags = rflags;
	r->seq = seq;
	r->latency_us = be32toh(rh.latency_us);
	r->src_node = be16toh(h.src_node);
	r->dst_node = be16toh(h.dst_node);
	return 0;
}
