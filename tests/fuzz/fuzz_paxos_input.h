/*
 * fuzz_paxos_input.h — what the two host-side Paxos fuzz targets share
 * (fuzz_learner.c, fuzz_leader.c): reading the fuzzer's bytes as a sequence
 * of datagrams, and a loopback socket pair to send them through, so that the
 * endpoint under test reads them with its own recvmmsg path as it would from
 * the network.
 *
 * One datagram of the input, after a selector byte t:
 *
 *   t bit 7 = 1   raw: u16 length (big-endian, at most FPX_RAW_MAX), then
 *                 that many bytes, sent as they are (any garbage);
 *   t bit 7 = 0   built: a well-formed Paxos packet (innet base header,
 *                 service 2, the 48-byte header) from the next 14 bytes,
 *                 so that the fuzzer reaches the protocol sooner:
 *
 *     byte  0      type  (1 + byte % 8: REQUEST .. RECOVER)
 *           1      status (byte % 8)
 *           2      node  (byte % 8, or byte itself when >= 0xf0: a wild id)
 *           3-4    ballot: round << 8 | proposer (byte 3 = round, byte 4 = id)
 *           5      vballot round (<< 8 | byte 4)
 *           6      instance - base (base: the endpoint's start)
 *           7-8    req_id: client (byte 7 % 4; 0 = no dedup) << 32 | seq (byte 8)
 *           9      trim - base (0xff: 2^64 - 1)
 *           10     hi - base   (0xff: 2^64 - 1)
 *           11     base header flags
 *           12     vlen (0..255; the value's bytes are a pattern of byte 13)
 *           13     value seed
 *
 *   t bits 0-6 tell the target what to do around the datagram (each target
 *   says how it reads them).
 */
#ifndef INNET_FUZZ_PAXOS_INPUT_H
#define INNET_FUZZ_PAXOS_INPUT_H

#include <arpa/inet.h>
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "consensus/wire.h"

#define FPX_RAW_MAX (INNET_PKT_MAX + 64u)

#define FPX_CHECK(name, cond)                                                                  \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "%s: %s:%d: check failed: %s\n", name, __FILE__, __LINE__, \
				#cond);                                                        \
			abort();                                                               \
		}                                                                              \
	} while (0)

struct fpx_in {
	const uint8_t *p;   /* next byte */
	size_t left;        /* bytes left */
};

static inline int fpx_byte(struct fpx_in *in)
{
	if (in->left == 0)
		return -1;
	in->left--;
	return *in->p++;
}

/* The next datagram into buf (FPX_RAW_MAX bytes): its length, or -1 at the
 * end of the input. *sel gets the selector byte. base: instance numbers of
 * built packets are base + a byte. */
static inline int fpx_next(struct fpx_in *in, uint64_t base, uint8_t *buf, uint8_t *sel)
{
	int t = fpx_byte(in);
	if (t < 0)
		return -1;
	*sel = (uint8_t)t;
	if (t & 0x80) {
		int hi = fpx_byte(in), lo = fpx_byte(in);
		if (lo < 0)
			return -1;
		size_t n = ((size_t)hi << 8 | (size_t)lo) % (FPX_RAW_MAX + 1);
		if (n > in->left)
			n = in->left;
		memcpy(buf, in->p, n);
		in->p += n;
		in->left -= n;
		return (int)n;
	}
	if (in->left < 14)
		return -1;
	const uint8_t *b = in->p;
	in->p += 14;
	in->left -= 14;
	struct paxos_msg *m = (struct paxos_msg *)buf;
	memset(m, 0, PAXOS_HDR_LEN);
	m->h.magic = INNET_MAGIC;
	m->h.version = INNET_VERSION;
	m->h.service = INNET_SVC_PAXOS;
	m->h.flags = b[11];
	m->p.type = (uint8_t)(1 + b[0] % 8);
	m->p.status = (uint8_t)(b[1] % 8);
	m->p.node = htons(b[2] >= 0xf0 ? b[2] : b[2] % 8);
	m->p.ballot = htonl((uint32_t)b[3] << 8 | b[4]);
	m->p.vballot = htonl((uint32_t)b[5] << 8 | b[4]);
	m->p.instance = htobe64(base + b[6]);
	m->p.req_id = htobe64((uint64_t)(b[7] % 4) << 32 | b[8]);
	m->p.trim = htobe64(b[9] == 0xff ? UINT64_MAX : base + b[9]);
	m->p.hi = htobe64(b[10] == 0xff ? UINT64_MAX : base + b[10]);
	m->p.vlen = htons(b[12]);
	for (unsigned i = 0; i < b[12]; i++)
		m->value[i] = (uint8_t)(b[13] + i);
	return (int)(PAXOS_HDR_LEN + b[12]);
}

/* A UDP socket on 127.0.0.1, any port; its address in *a. Aborts on failure
 * (the target cannot run without it). */
static inline int fpx_socket(struct sockaddr_in *a, int rcvbuf)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(me);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &l) != 0) {
		perror("fuzz: loopback socket");
		abort();
	}
	if (rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (a != NULL)
		*a = me;
	return fd;
}

/* Read and forget what waits on fd. */
static inline void fpx_drain(int fd)
{
	static uint8_t sink[65536];
	while (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) >= 0)
		;
}

#endif /* INNET_FUZZ_PAXOS_INPUT_H */
