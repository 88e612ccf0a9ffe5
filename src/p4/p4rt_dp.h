/*
 * p4rt_dp.h — what every generated P4 data path includes besides innet/dp.h:
 * bit-level access to headers (big-endian, any offset, up to 128 bits),
 * shifts with BMv2's meaning for any count, the hash and checksum
 * algorithms of simple_switch (crc16, crc32, crcCCITT, csum16, identity,
 * xor16/32, xxh64, the custom CRCs at their default parameters) and the
 * two-rate three-colour meter. Restricted C like any data path: no libc,
 * bounded loops (the byte loops' bounds are compile-time constants at every
 * call the generator writes), no global.
 *
 * The generator (p4_gen.c) writes values as uint64_t up to 64 bits and as
 * p4_u128 up to 128 (unsigned __int128: both gcc and clang -target bpf have
 * it). tests/unit/test_p4_gen.c checks every function here against known
 * values (CRC check values, RFC 1071 sums, BMv2's shift and cast rules).
 */
#ifndef INNET_P4RT_DP_H
#define INNET_P4RT_DP_H

#include "innet/dp.h"

#if defined(__bpf__)
#define P4_XDP 1
#else
#define P4_XDP 0
#endif

#define P4_INLINE static inline __attribute__((always_inline))

typedef unsigned __int128 p4_u128;
typedef __int128 p4_s128;

/* 128-bit shifts by a run-time count, from 64-bit ones (clang -target bpf
 * has no library call for them). */
P4_INLINE p4_u128 p4_shr128v(p4_u128 x, uint32_t n)
{
	uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
	if (n >= 128)
		return 0;
	if (n >= 64)
		return (p4_u128)(hi >> (n - 64));
	if (n == 0)
		return x;
	return ((p4_u128)(hi >> n) << 64) | ((lo >> n) | (hi << (64 - n)));
}

P4_INLINE p4_u128 p4_shl128v(p4_u128 x, uint32_t n)
{
	uint64_t hi = (uint64_t)(x >> 64), lo = (uint64_t)x;
	if (n >= 128)
		return 0;
	if (n >= 64)
		return (p4_u128)(lo << (n - 64)) << 64;
	if (n == 0)
		return x;
	return ((p4_u128)((hi << n) | (lo >> (64 - n))) << 64) | (lo << n);
}

/* Zero / copy n bytes (a constant) of 8-byte aligned memory. clang -target
 * bpf expands __builtin_memset/memcpy only up to about a kilobyte and merges
 * pieces back: on XDP these are loops of 8-byte stores instead. */
P4_INLINE void p4_zero(void *p, uint32_t n)
{
#if P4_XDP
	for (uint32_t i = 0; i < n / 8; i++)
		((volatile uint64_t *)p)[i] = 0;
	for (uint32_t i = n & ~7u; i < n; i++)
		((volatile uint8_t *)p)[i] = 0;
#else
	__builtin_memset(p, 0, n);
#endif
}

P4_INLINE void p4_copy(void *d, const void *s, uint32_t n)
{
#if P4_XDP
	for (uint32_t i = 0; i < n / 8; i++)
		((volatile uint64_t *)d)[i] = ((const volatile uint64_t *)s)[i];
	for (uint32_t i = n & ~7u; i < n; i++)
		((volatile uint8_t *)d)[i] = ((const volatile uint8_t *)s)[i];
#else
	__builtin_memcpy(d, s, n);
#endif
}

/* ------------------------------------------------------------------------ */
/* Bits. Headers are big-endian bit strings: bit 0 is the top bit of byte 0. */

/* Bytes [0, n) of p as a big-endian number (n <= 16). */
P4_INLINE p4_u128 p4_ld_be(const uint8_t *p, uint32_t n)
{
	p4_u128 v = 0;
	for (uint32_t i = 0; i < 16; i++) {
		if (i >= n)
			break;
		v = v << 8 | p[i];
	}
	return v;
}

/* Store the low n bytes of v at p, big-endian (n <= 16). */
P4_INLINE void p4_st_be(uint8_t *p, uint32_t n, p4_u128 v)
{
	for (uint32_t i = 0; i < 16; i++) {
		if (i >= n)
			break;
		p[n - 1 - i] = (uint8_t)v;
		v >>= 8;
	}
}

P4_INLINE p4_u128 p4_mask128(uint32_t w)
{
	return w >= 128 ? ~(p4_u128)0 : p4_shl128v(1, w) - 1;
}

P4_INLINE uint64_t p4_mask64(uint32_t w)
{
	return w >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << w) - 1);
}

/* The index of the highest set bit of x (x != 0), without a clz
 * instruction (eBPF has none): a binary search, six steps. */
P4_INLINE uint32_t p4_msb64(uint64_t x)
{
	uint32_t n = 0;
	if (x >> 32) {
		n += 32;
		x >>= 32;
	}
	if (x >> 16) {
		n += 16;
		x >>= 16;
	}
	if (x >> 8) {
		n += 8;
		x >>= 8;
	}
	if (x >> 4) {
		n += 4;
		x >>= 4;
	}
	if (x >> 2) {
		n += 2;
		x >>= 2;
	}
	return n + (uint32_t)(x >> 1);
}

/* The w bits (w <= 128) at bit offset off of p. With constant off and w (the
 * generator's calls) this folds to a few loads and shifts. Fields of up to
 * 120 bits at any offset, or byte-aligned fields of up to 128. */
P4_INLINE p4_u128 p4_getbits(const uint8_t *p, uint32_t off, uint32_t w)
{
	uint32_t first = off / 8, last = (off + w - 1) / 8, n = last - first + 1;
	p4_u128 v = p4_ld_be(p + first, n);
	uint32_t tail = (last + 1) * 8 - (off + w);
	return p4_shr128v(v, tail) & p4_mask128(w);
}

/* Write the low w bits of v at bit offset off of p (the other bits stay). */
P4_INLINE void p4_putbits(uint8_t *p, uint32_t off, uint32_t w, p4_u128 v)
{
	uint32_t first = off / 8, last = (off + w - 1) / 8, n = last - first + 1;
	uint32_t tail = (last + 1) * 8 - (off + w);
	if (off % 8 == 0 && w % 8 == 0) {
		p4_st_be(p + first, n, v);
		return;
	}
	p4_u128 m = p4_shl128v(p4_mask128(w), tail);
	p4_u128 cur = p4_ld_be(p + first, n);
	cur = (cur & ~m) | (p4_shl128v(v, tail) & m);
	p4_st_be(p + first, n, cur);
}

/* The same as p4_putbits at a run-time bit offset, into a byte buffer (hash
 * and checksum inputs: fields of invalid headers are skipped, so the offsets
 * move). w <= 128, a constant. */
P4_INLINE void p4_putbits_var(uint8_t *p, uint32_t off, uint32_t w, p4_u128 v)
{
	if ((off & 7) == 0 && (w & 7) == 0) {
		for (uint32_t i = 0; i < 16; i++) {
			if (i >= w / 8)
				break;
			p[off / 8 + i] = (uint8_t)p4_shr128v(v, w - 8 * (i + 1));
		}
		return;
	}
	for (uint32_t i = 0; i < 128; i++) {
		if (i >= w)
			break;
		uint32_t bit = off + i;
		uint8_t b = (uint8_t)(p4_shr128v(v, w - 1 - i) & 1);
		uint8_t m = (uint8_t)(0x80u >> (bit & 7));
		p[bit / 8] = (uint8_t)((p[bit / 8] & ~m) | (b ? m : 0));
	}
}

/* ------------------------------------------------------------------------ */
/* Arithmetic with BMv2's meaning (infinite precision, then truncation).     */

P4_INLINE uint64_t p4_shl64(uint64_t x, p4_u128 n)
{
	return n >= 64 ? 0 : x << (uint32_t)n;
}

P4_INLINE uint64_t p4_shr64(uint64_t x, p4_u128 n)
{
	return n >= 64 ? 0 : x >> (uint32_t)n;
}

P4_INLINE int64_t p4_sar64(int64_t x, p4_u128 n)
{
	return n >= 63 ? (x < 0 ? -1 : 0) : x >> (uint32_t)n;
}

P4_INLINE p4_u128 p4_shl128(p4_u128 x, p4_u128 n)
{
	return n >= 128 ? 0 : p4_shl128v(x, (uint32_t)n);
}

P4_INLINE p4_u128 p4_shr128(p4_u128 x, p4_u128 n)
{
	return n >= 128 ? 0 : p4_shr128v(x, (uint32_t)n);
}

P4_INLINE p4_s128 p4_sar128(p4_s128 x, p4_u128 n)
{
	if (n >= 127)
		return x < 0 ? -1 : 0;
	p4_u128 r = p4_shr128v((p4_u128)x, (uint32_t)n);
	if (x < 0 && n > 0)
		r |= ~p4_shr128v(~(p4_u128)0, (uint32_t)n);
	return (p4_s128)r;
}

/* two_comp_mod(x, w): x as a w-bit two's complement number. */
P4_INLINE int64_t p4_tcm64(uint64_t x, uint32_t w)
{
	if (w >= 64)
		return (int64_t)x;
	uint64_t m = p4_mask64(w), s = (uint64_t)1 << (w - 1);
	x &= m;
	return (int64_t)(x ^ s) - (int64_t)s;
}

/* Sign-extend the low w bits of x. */
P4_INLINE int64_t p4_sext64(uint64_t x, uint32_t w)
{
	return p4_tcm64(x, w);
}

/* sat_cast / usat_cast of an exact value to w bits. */
P4_INLINE p4_s128 p4_sat_cast(p4_s128 x, uint32_t w)
{
	p4_s128 hi = (p4_s128)p4_shl128v(1, w - 1) - 1, lo = -(p4_s128)p4_shl128v(1, w - 1);
	return x > hi ? hi : x < lo ? lo : x;
}

P4_INLINE p4_s128 p4_usat_cast(p4_s128 x, uint32_t w)
{
	p4_s128 hi = w >= 127 ? (p4_s128)(~(p4_u128)0 >> 1) : (p4_s128)p4_shl128v(1, w) - 1;
	return x > hi ? hi : x < 0 ? 0 : x;
}

/* ------------------------------------------------------------------------ */
/* Hashes and checksums (simple_switch's calculations).                       */

/* The ones' complement sum of n bytes (pairs big-endian), without folding
 * or complement: callers add several pieces and fold once. `odd` says the
 * stream so far has an odd length (this piece starts in the low byte). */
P4_INLINE uint64_t p4_csum_add(uint64_t sum, const uint8_t *p, uint32_t n, uint32_t max, bool odd)
{
	for (uint32_t i = 0; i < max; i++) {
		if (i >= n)
			break;
		bool low = ((i & 1) != 0) != odd;
		sum += low ? p[i] : (uint64_t)p[i] << 8;
	}
	return sum;
}

P4_INLINE uint16_t p4_csum_fold(uint64_t sum)
{
	sum = (sum & 0xffffffffu) + (sum >> 32);
	sum = (sum & 0xffffu) + (sum >> 16);
	sum = (sum & 0xffffu) + (sum >> 16);
	sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)~sum;
}

/* CRCs, a bit at a time and without branches: the polynomial times the bit
 * shifted out, the bit opaque to the compiler (else it makes a select of it,
 * which the eBPF back end lowers to a branch). Not "poly & -bit": the kernel's
 * verifier forks its state on an AND of a value known to be 0 or -1 — two
 * paths per bit, 2^8 per byte, and a selector's hash of a few bytes alone
 * runs past the verifier's million instructions. */
P4_INLINE uint32_t p4_crc16_byte(uint32_t crc, uint8_t b)   /* reflected 0x8005 */
{
	crc ^= b;
	for (int k = 0; k < 8; k++) {
		uint32_t bit = crc & 1u;
		innet_opaque(bit);
		crc = (crc >> 1) ^ (0xA001u * bit);
	}
	return crc;
}

P4_INLINE uint32_t p4_crc32_byte(uint32_t crc, uint8_t b)   /* reflected 0x04c11db7 */
{
	crc ^= b;
	for (int k = 0; k < 8; k++) {
		uint32_t bit = crc & 1u;
		innet_opaque(bit);
		crc = (crc >> 1) ^ (0xEDB88320u * bit);
	}
	return crc;
}

P4_INLINE uint32_t p4_ccitt_byte(uint32_t crc, uint8_t b)   /* 0x1021, not reflected */
{
	crc ^= (uint32_t)b << 8;
	for (int k = 0; k < 8; k++) {
		uint32_t bit = (crc >> 15) & 1u;
		innet_opaque(bit);
		crc = ((crc << 1) ^ (0x1021u * bit)) & 0xffffu;
	}
	return crc;
}

P4_INLINE uint32_t p4_crc8_byte(uint32_t crc, uint8_t b)    /* 0x07, not reflected */
{
	crc ^= b;
	for (int k = 0; k < 8; k++) {
		uint32_t bit = (crc >> 7) & 1u;
		innet_opaque(bit);
		crc = ((crc << 1) ^ (0x07u * bit)) & 0xffu;
	}
	return crc;
}

P4_INLINE uint64_t p4_crc64_byte(uint64_t crc, uint8_t b)   /* reflected 0x1b */
{
	crc ^= b;
	for (int k = 0; k < 8; k++) {
		uint64_t bit = crc & 1ull;
		innet_opaque(bit);
		crc = (crc >> 1) ^ (0xD800000000000000ull * bit);
	}
	return crc;
}

enum p4_algo_id {
	P4H_CRC16, P4H_CRC32, P4H_CCITT, P4H_CSUM16, P4H_IDENTITY, P4H_XOR16, P4H_XXH64,
	P4H_CRC8, P4H_CRC16C, P4H_CRC32C, P4H_CRC64C, P4H_XOR32,
};

/* The running state of a hash over a stream of bytes (a buffer, then the
 * payload): the generator feeds it p4_hash_bytes and finishes with
 * p4_hash_end. xxh64 and identity need the whole input at once: they are
 * only used without a payload (p4_hash_whole). */
struct p4_hash {
	uint64_t acc;
	uint64_t n;         /* bytes so far */
};

P4_INLINE void p4_hash_begin(struct p4_hash *h, int algo)
{
	h->n = 0;
	switch (algo) {
	case P4H_CRC32:
	case P4H_CRC32C: h->acc = 0xffffffffu; break;
	case P4H_CCITT: h->acc = 0xffffu; break;
	default: h->acc = 0; break;
	}
}

/* Feed bytes [0, n) of p (n <= max, max a constant). */
P4_INLINE void p4_hash_bytes(struct p4_hash *h, int algo, const uint8_t *p, uint32_t n, uint32_t max)
{
	uint64_t acc = h->acc;
	if (algo == P4H_CSUM16) {
		acc = p4_csum_add(acc, p, n, max, (h->n & 1) != 0);
	} else {
		for (uint32_t i = 0; i < max; i++) {
			if (i >= n)
				break;
			uint8_t b = p[i];
			switch (algo) {
			case P4H_CRC16:
			case P4H_CRC16C: acc = p4_crc16_byte((uint32_t)acc, b); break;
			case P4H_CRC32:
			case P4H_CRC32C: acc = p4_crc32_byte((uint32_t)acc, b); break;
			case P4H_CCITT: acc = p4_ccitt_byte((uint32_t)acc, b); break;
			case P4H_CRC8: acc = p4_crc8_byte((uint32_t)acc, b); break;
			case P4H_CRC64C: acc = p4_crc64_byte(acc, b); break;
			case P4H_XOR16: {
				uint32_t pos = (uint32_t)((h->n + i) & 1);
				acc ^= (uint64_t)b << (8 * (1 - pos));
				break;
			}
			case P4H_XOR32: {
				uint32_t pos = (uint32_t)((h->n + i) & 3);
				acc ^= (uint64_t)b << (8 * (3 - pos));
				break;
			}
			default: break;
			}
		}
	}
	h->acc = acc;
	h->n += n;
}

P4_INLINE uint64_t p4_hash_end(struct p4_hash *h, int algo)
{
	switch (algo) {
	case P4H_CRC32:
	case P4H_CRC32C: return (uint32_t)h->acc ^ 0xffffffffu;
	case P4H_CSUM16: return p4_csum_fold(h->acc);
	case P4H_XOR16: return h->acc & 0xffff;
	case P4H_XOR32: return h->acc & 0xffffffffu;
	default: return h->acc;
	}
}

/* xxh64 and identity over a whole buffer of n bytes. */
P4_INLINE uint64_t p4_hash_whole(int algo, const uint8_t *p, uint32_t n, uint32_t max)
{
	if (algo == P4H_XXH64)
		return innet_hash(p, n, 0);
	uint64_t v = 0;   /* identity: the first 8 bytes, big-endian */
	for (uint32_t i = 0; i < 8 && i < max; i++) {
		if (i >= n)
			break;
		v = v << 8 | p[i];
	}
	return v;
}

/* ------------------------------------------------------------------------ */
/* The two-rate three-colour meter (BMv2's Meter::execute): per rate, tokens  */
/* refill at `rate` units per microsecond up to `burst`; the rates are       */
/* checked peak first (red if short), then committed (yellow if short).      */
/* State: P4_METER_WORDS words of p4_words (p4.h):                            */
/*   +0 lock   +1 configured   +2.. per rate {rate (units/us, 32.32 fixed),   */
/*   burst, tokens, tokens_last}, peak rate first                             */

/* ------------------------------------------------------------------------ */
/* What the data path and the control plane share (p4.h draws the map).      */

enum {
	P4_INST_NORMAL = 0, P4_INST_INGRESS_CLONE = 1, P4_INST_EGRESS_CLONE = 2,
	P4_INST_COALESCED = 3, P4_INST_RECIRC = 4, P4_INST_REPLICATION = 5, P4_INST_RESUBMIT = 6,
};

#define P4_DROP_PORT_NUM    511u     /* simple_switch's default drop port */
#define P4_MC_MAX           64u      /* ports x rids in one multicast group */
#define P4_GROUP_MAX        64u      /* members of an action selector group */
#define P4_MIRROR_SESSIONS  1024u    /* mirroring session ids 0..P4_MIRROR_SESSIONS-1 */
#define P4_METER_WORDS      10u      /* per meter: lock, configured, 2 x {rate, burst,
                                      * tokens, last} (peak first) */
#define P4_RING_SLOTS       1024u    /* digest / log records kept */
#define P4_LOG_VALUES       8u       /* values a log record carries */
#define P4_LPM_WORDS        3u       /* bitmap of prefix lengths 0..128 */

/* A mirroring session's word: valid bits, egress port, multicast group. */
#define P4_MIRROR_PORT_VALID (1ull << 63)
#define P4_MIRROR_MGID_VALID (1ull << 62)

/* The data path's drop reasons (struct innet_program.drop_reasons of "p4"). */
enum p4_drop {
	P4_DROP_INGRESS = 0,       /* egress_spec was the drop port at the end of ingress */
	P4_DROP_EGRESS,            /* mark_to_drop in egress */
	P4_DROP_ASSERT,            /* assert / assume failed (BMv2 aborts) */
	P4_DROP_NO_GROUP,          /* multicast to a group that does not exist or is empty */
	P4_DROP_RECIRC,            /* recirculate / resubmit beyond innet's budget */
	P4_DROP_HEADROOM,          /* the deparser grew the packet beyond its room */
	P4_DROP_PARSER_LOOP,       /* the parser took more than P4_PARSE_STEPS steps */
	P4_DROP_NO_STATE,          /* scratch memory unavailable, or a bad hand-off */
	P4_DROP_CLONE_DEPTH,       /* egress-to-egress clones nested too deep */
	P4_DROP_COPY,              /* a copy could not be restored or sent */
	P4_DROP_COUNT
};

/* A table entry's value (innet table, ternary record, default, member): the
 * action (a global action index; P4_IND_MEMBER / P4_IND_GROUP in an
 * indirect table, with handle the member or group), the entry handle
 * (direct counters and meters are indexed by it), then the action data. */
#define P4_IND_MEMBER 0xfffeu
#define P4_IND_GROUP  0xffffu
struct p4_tval_hdr {
	uint16_t action;
	uint16_t flags;
	uint32_t handle;
};

/* A ternary / range record: this, then key value, mask (and hi for range
 * keys), then data; rounded up to 8 bytes. */
struct p4_trec_hdr {
	uint32_t priority;
	uint16_t action;
	uint16_t flags;
	uint32_t handle;
	uint32_t valid;            /* 1 = in use */
};

struct p4_mcast_member {
	uint16_t port;
	uint16_t rid;
};
struct p4_mcast_group {
	uint32_t n;
	uint32_t pad;
	struct p4_mcast_member m[P4_MC_MAX];
};

/* A ring record (digest or log): this, then the data. */
enum { P4_RING_DIGEST = 1, P4_RING_LOG = 2 };
struct p4_ring_hdr {
	uint32_t kind;             /* P4_RING_DIGEST / P4_RING_LOG */
	uint32_t id;               /* learn list id / log site */
	uint32_t len;              /* data bytes */
	uint32_t pad;
};

/* The config block of a P4 program instance. */
struct p4_conf {
	uint64_t t0_ns;            /* the switch's start: timestamps and meters count from it */
	uint32_t n_ports;
	uint32_t pad;
};

#define P4_METER_GREEN  0u
#define P4_METER_YELLOW 1u
#define P4_METER_RED    2u

#endif /* INNET_P4RT_DP_H */
