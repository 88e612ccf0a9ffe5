/*
 * test_xdp_equiv.c — one program, two targets, one behaviour: the same
 * stream of packets (valid ones, and the same mutated: bytes flipped,
 * truncated, extended, from any port and source) goes into a switch on the
 * user-space engine and into the same switch on the XDP target (its eBPF
 * objects run by BPF_PROG_TEST_RUN), and every verdict, drop reason and
 * packet out must be the same, byte for byte, as must the state they leave.
 * The golden tests check chosen cases against expectations; this checks
 * thousands of cases nobody chose against each other.
 *
 * Programs: forward (port map, ECMP routes, a multicast group), counter,
 * the Paxos coordinator and acceptor, l2fwd (raw ports), agg (rounds of
 * contributions from a job's members, with k = 99 so that the element loops
 * take every way: pieces of every length before and after the aligned runs,
 * accumulators in two register pages), and the load balancer in proxy mode
 * (client datagrams, units' replies on NAT ports, agent reports sealed with
 * the key, verified by on_cpu after the handler handed them over: the drop
 * reason it counts is compared too) and in packet mode (Ethernet frames: UDP
 * and TCP to the VIPs, units' replies, reports, partial and zero checksums,
 * TTLs down to 1). lb's policies here are those that draw no random number
 * (the two targets' generators differ), and its registers of clock readings
 * (the sweep's, a unit's last report) are not compared. lb's timers (idle
 * and closing timeouts, the sweep) are set far beyond the test's length:
 * the two switches read the clock at different moments (one is created
 * seconds after the other on a loaded machine, and a packet reaches one a
 * little after the other), so a deadline that falls during the run would
 * fall between them — the golden tests check those paths against a clock.
 * Needs root (BPF); skips (77) without it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit/testutil.h"
#include "innet/lb.h"
#include "innet/switch.h"
#include "innet/wire.h"
#include "consensus/wire.h"
#include "agg/wire.h"

#define N_CASES 3000u

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 32);
}

static uint32_t tip(uint32_t host)
{
	return (127u << 24) | (210u << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

/* A packet's sender and ingress port, when make_pkt chooses them (agg: a
 * job's member, mostly). */
static struct innet_addr pkt_src;
static int pkt_port = -1;

struct setup {
	const char *program;
	const char *args;
	uint16_t udp[6];
	uint32_t n_udp;
	bool raw;
	const char *skip_regs[3];   /* registers not compared (clock readings) */
};

/* lb: the agents' key (a file for the switches, expanded for sealing). */
static char lb_key_path[64];
static struct innet_lb_key lb_key;

static struct innet_switch *make(const struct setup *su, bool xdp)
{
	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "equiv-%s", xdp ? "xdp" : "udp");
	c.n_workers = 1;
	c.node_id = 3;
	c.seed = 7;
	c.n_ports = 4;
	for (uint32_t i = 0; i < c.n_ports; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		if (su->raw) {
			/* XDP test runs need no device; the user-space engine's raw
			 * ports need distinct ones: the veths made in main() */
			snprintf(c.ports[i].iface, sizeof(c.ports[i].iface), "ieq%u", i);
		} else {
			c.ports[i].ip = tip(1 + i + (xdp ? 10 : 0));
			c.ports[i].peer_ip = i < 3 ? tip(101 + i) : 0;
		}
	}
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "p");
	c.progs[0].program = innet_program_find(su->program);
	assert_non_null(c.progs[0].program);
	for (uint32_t u = 0; u < su->n_udp; u++)
		c.progs[0].udp[u] = su->udp[u];
	c.progs[0].n_udp = su->n_udp;
	c.progs[0].raw = su->raw;
	c.progs[0].args_json = (char *)su->args;
	c.n_progs = 1;
	if (xdp) {
		c.target = INNET_TARGET_XDP;
		c.xdp_no_attach = true;
	}
	char err[2048];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL)
		fail_msg("create (%s, %s): %s", su->program, xdp ? "xdp" : "udp", err);
	return sw;
}

/* An agent report (48 bytes) for one of lb's units, sealed; now and then
 * with a wrong kind, unit or server, an old sequence number, or another
 * key. */
static uint32_t lb_report(uint8_t *b)
{
	static uint64_t seq = 100;
	struct innet_lb_report r = {
		.server = (uint16_t)(1 + rnd() % 3), .unit = (uint16_t)(rnd() % 9 == 0 ? 5 : 0),
		.kind = (uint8_t)(rnd() % 7 == 0), .state = (uint8_t)(rnd() % 4),
		.load = (uint8_t)rnd(), .rflags = INNET_LB_RF_HEARTBEAT,
		.seq = rnd() % 8 == 0 ? seq - rnd() % 20 : ++seq,
	};
	struct innet_lb_key other;
	uint8_t raw[INNET_LB_KEY_LEN] = { 7 };
	bool spoofed = rnd() % 10 == 0;
	if (spoofed)
		innet_lb_key_init(&other, raw);
	assert_int_equal(innet_lb_report_seal(&r, spoofed ? &other : &lb_key, b, 64), 48);
	return 48;
}

static uint16_t csum_fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static uint32_t csum_add(const uint8_t *p, uint32_t n, uint32_t s)
{
	for (uint32_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

/* lb packet mode: an Ethernet/IPv4 frame — a client's UDP or TCP segment to
 * a VIP, a unit's reply to a client, or a report — with a full, partial or
 * zero checksum. */
static uint32_t lb_frame(uint8_t *f)
{
	static const uint32_t vip = 0x0a620064u, clients[2] = { 0x0a620102u, 0x0a620103u };
	static const uint32_t units[3] = { 0x0a62020au, 0x0a62030au, 0x0a62040au };
	uint32_t kind = rnd() % 10, sip, dip, plen = rnd() % 40;
	uint16_t sport, dport;
	uint8_t proto = 17, flags = 0;
	if (kind < 5) {        /* client -> VIP: UDP 53 or TCP 8080 */
		sip = clients[rnd() % 2];
		dip = vip;
		sport = (uint16_t)(40000 + rnd() % 6);
		if (rnd() % 2) {
			proto = 6;
			dport = 8080;
			static const uint8_t fl[] = { 0x02, 0x10, 0x18, 0x11, 0x04, 0x12 };
			flags = fl[rnd() % 6];
		} else {
			dport = 53;
		}
	} else if (kind < 8) { /* unit -> client */
		uint32_t u = rnd() % 3;
		sip = units[u];
		dip = clients[rnd() % 2];
		dport = (uint16_t)(40000 + rnd() % 6);
		if (rnd() % 2) {
			proto = 6;
			sport = 8080;
			flags = (uint8_t)(rnd() % 2 ? 0x10 : 0x11);
		} else {
			sport = 5300;
		}
	} else {               /* a report, to any address */
		sip = units[rnd() % 3];
		dip = 0x0a620201u;
		sport = 40000;
		dport = INNET_LB_REPORT_UDP;
	}
	uint8_t payload[64];
	if (kind >= 8)
		plen = lb_report(payload);
	else
		for (uint32_t i = 0; i < plen; i++)
			payload[i] = (uint8_t)rnd();
	uint32_t l4h = proto == 6 ? 20 : 8, l4len = l4h + plen;
	memset(f, 0, 14 + 20 + l4len);
	static const uint8_t macs[2][6] = { { 2, 0x77, 0, 0, 1, 1 }, { 2, 0x77, 0, 0, 1, 2 } };
	memcpy(f, macs[0], 6);
	memcpy(f + 6, macs[1], 6);
	f[12] = 0x08;
	uint8_t *ip = f + 14, *l4 = ip + 20;
	ip[0] = 0x45;
	ip[2] = (uint8_t)((20 + l4len) >> 8);
	ip[3] = (uint8_t)(20 + l4len);
	ip[6] = 0x40;
	ip[8] = (uint8_t)(rnd() % 8 == 0 ? rnd() % 3 : 64);   /* TTL 0..2 now and then */
	ip[9] = proto;
	for (int i = 0; i < 4; i++) {
		ip[12 + i] = (uint8_t)(sip >> (24 - 8 * i));
		ip[16 + i] = (uint8_t)(dip >> (24 - 8 * i));
	}
	uint16_t ic = (uint16_t)~csum_fold(csum_add(ip, 20, 0));
	ip[10] = (uint8_t)(ic >> 8);
	ip[11] = (uint8_t)ic;
	l4[0] = (uint8_t)(sport >> 8);
	l4[1] = (uint8_t)sport;
	l4[2] = (uint8_t)(dport >> 8);
	l4[3] = (uint8_t)dport;
	uint8_t *c;
	if (proto == 6) {
		l4[12] = 5 << 4;
		l4[13] = flags;
		l4[15] = 0xff;
		c = l4 + 16;
	} else {
		l4[4] = (uint8_t)(l4len >> 8);
		l4[5] = (uint8_t)l4len;
		c = l4 + 6;
	}
	memcpy(l4 + l4h, payload, plen);
	uint32_t pseudo = csum_add(ip + 12, 8, 0) + proto + l4len;
	uint32_t how = rnd() % 4;   /* full, full, partial (tx offload), zero (UDP) */
	uint16_t v = how == 2 ? csum_fold(pseudo) : how == 3 && proto == 17 ? 0
		   : (uint16_t)~csum_fold(csum_add(l4, l4len, pseudo));
	c[0] = (uint8_t)(v >> 8);
	c[1] = (uint8_t)v;
	return 14 + 20 + l4len;
}

/* A packet: a valid template, then maybe mutated. */
static uint32_t make_pkt(const struct setup *su, uint8_t *b)
{
	const char *program = su->program;
	uint32_t len;
	if (!strcmp(program, "lb") && su->raw) {
		len = lb_frame(b);
	} else if (!strcmp(program, "lb")) {
		/* datagrams to any of its ports: reports, and queries/replies */
		if (rnd() % 3 == 0) {
			len = lb_report(b);
		} else {
			len = 1 + rnd() % 48;
			for (uint32_t i = 0; i < len; i++)
				b[i] = (uint8_t)rnd();
		}
	} else if (!strcmp(program, "counter")) {
		struct innet_hdr h = { INNET_MAGIC, INNET_VERSION, INNET_SVC_COUNTER, 0, htons(1), htons(9) };
		struct innet_counter_hdr ch = { .op = (uint8_t)(1 + rnd() % 2),
						.index = htonl(rnd() % 20),
						.value = __builtin_bswap64(rnd() % 1000) };
		memcpy(b, &h, 8);
		memcpy(b + 8, &ch, 16);
		len = 24;
	} else if (!strcmp(program, "paxos_coordinator")) {
		uint32_t vlen = rnd() % 40;
		struct innet_hdr h = { INNET_MAGIC, INNET_VERSION, INNET_SVC_PAXOS, 0, htons(1), htons(9) };
		struct paxos_hdr p;
		memset(&p, 0, sizeof(p));
		p.type = rnd() % 4 ? PAXOS_REQUEST : (uint8_t)(rnd() % 12);
		p.vlen = htons((uint16_t)vlen);
		p.req_id = rnd() % 8 ? __builtin_bswap64(((uint64_t)rnd() << 32) | 1) : 0;
		memcpy(b, &h, 8);
		memcpy(b + 8, &p, 48);
		for (uint32_t i = 0; i < vlen; i++)
			b[56 + i] = (uint8_t)rnd();
		len = 56 + vlen;
	} else if (!strcmp(program, "paxos_acceptor")) {
		/* 2A/1A/RECOVER/TRIM/READ over a ring of 8 slots. The stream moves
		 * on: every 300 packets the learners' watermarks (so trim) and
		 * the instances named go up by one, every 500 the ballots by a
		 * round; within that, ballots that win and ballots that lose,
		 * instances below, in and above the window, values up to 400
		 * bytes. */
		static uint32_t n;
		uint32_t base = n / 300, round = 1 + n / 500;
		n++;
		const uint32_t ballots[] = { 0, round << 8, round << 8, round << 8, round << 8,
					     (round << 8) + 1, (round + 1) << 8, (round - 1) << 8 };
		static const uint8_t types[] = { PAXOS_2A, PAXOS_2A, PAXOS_2A, PAXOS_2A, PAXOS_1A,
						 PAXOS_1A, PAXOS_RECOVER, PAXOS_RECOVER, PAXOS_TRIM,
						 PAXOS_NACK, PAXOS_READ };
		struct innet_hdr h = { INNET_MAGIC, INNET_VERSION, INNET_SVC_PAXOS, 0, htons(1), htons(9) };
		struct paxos_hdr p;
		memset(&p, 0, sizeof(p));
		p.type = types[rnd() % 11];
		uint32_t vlen = p.type == PAXOS_2A ? rnd() % 400 : 0;
		p.ballot = htonl(ballots[rnd() % 8]);
		if (p.type == PAXOS_1A && rnd() % 16 == 0) {   /* a new leader: this round */
			h.flags = PAXOS_F_RANGE;
			p.ballot = htonl(round << 8);
		}
		p.instance = __builtin_bswap64(base + rnd() % 12);
		p.req_id = __builtin_bswap64(rnd());
		p.node = htons((uint16_t)(rnd() % 3));
		p.trim = __builtin_bswap64(base + rnd() % 3);
		p.vlen = htons((uint16_t)vlen);
		memcpy(b, &h, 8);
		memcpy(b + 8, &p, 48);
		for (uint32_t i = 0; i < vlen; i++)
			b[56 + i] = (uint8_t)rnd();
		len = 56 + vlen;
	} else if (!strcmp(program, "agg")) {
		/* Job 3: 4 workers (member w = tip(101 + w):1000 + w on port w),
		 * 8 slots, k = 99. Each slot's rounds go on as the workers
		 * contribute (in any order, some twice); now and then a round
		 * behind or ahead, another job, a JOIN (read only, START,
		 * REJOIN), a LEAVE, another run's contribution, a stranger. */
		enum { K = 99, SLOTS = 8, W = 4 };
		static uint32_t round[SLOTS], seen[SLOTS];
		uint32_t slot = rnd() % SLOTS, w = rnd() % W, r = round[slot];
		bool intact = rnd() % 5 != 0;   /* else mutated below, as the others are */
		bool member = rnd() % 20 != 0;
		switch (rnd() % 16) {
		case 0: r = r ? r - 1 : 0; break;   /* late: a resend, or stale */
		case 1: r = r + 1; break;           /* early */
		case 2: r = r >= 2 ? r - 2 : 0; break;
		default: break;
		}
		struct innet_hdr h = { INNET_MAGIC, INNET_VERSION, INNET_SVC_AGG, 0, htons(1), htons(9) };
		struct innet_agg_hdr a;
		memset(&a, 0, sizeof(a));
		a.op = INNET_AGG_CONTRIB;
		a.job = htons(rnd() % 32 ? 3 : (uint16_t)(rnd() % 6));
		a.slot = htons((uint16_t)slot);
		a.worker = (uint8_t)w;
		a.round = htonl(r);
		a.ver = (uint8_t)(r & 1);
		a.offset = htonl(r * 1000 + slot);
		a.exp = (uint8_t)(rnd() % 200);
		a.k = htons(K);
		a.call = htonl(r / 2);
		len = INNET_AGG_HDR_LEN + 4 * K;
		if (rnd() % 24 == 0) {   /* JOIN for some of the job's slots */
			uint16_t want = (uint16_t)(1 + rnd() % 10);
			a.op = INNET_AGG_JOIN;
			a.slot = htons((uint16_t)(rnd() % SLOTS));
			a.k = htons(want);
			a.round = 0;
			a.ver = 0;
			a.exp = 0;
			a.call = 0;
			/* read only, a START or a REJOIN (the worker's one handle:
			 * a new run would reset the job, whose reset needs the
			 * timer thread: test_agg's test_runs covers it) */
			switch (rnd() % 3) {
			case 0: a.offset = 0; break;
			case 1: a.status = INNET_AGG_JOIN_START; a.offset = htonl(0xA0 + w); break;
			default: a.offset = htonl(0xA0 + w); break;
			}
			len = INNET_AGG_HDR_LEN + 12u * want;
			memset(b + INNET_AGG_HDR_LEN, 0, 12u * want);
		} else if (rnd() % 48 == 0) {   /* LEAVE of a handle, registered or not */
			a.op = INNET_AGG_LEAVE;
			a.k = 0;
			a.offset = htonl(rnd() % 2 ? 0xA0 + w : 0xC0 + w);
			len = INNET_AGG_HDR_LEN;
		} else {
			if (rnd() % 40 == 0)
				a.gen = 1;   /* of a run that is not the job's: RESTARTED */
			for (uint32_t i = 0; i < K; i++) {
				uint32_t v = rnd();
				memcpy(b + INNET_AGG_HDR_LEN + 4 * i, &v, 4);
			}
			if (intact && member && r == round[slot] && ntohs(a.job) == 3 &&
			    (seen[slot] |= 1u << w) == (1u << W) - 1) {
				round[slot]++;
				seen[slot] = 0;
			}
		}
		memcpy(b, &h, 8);
		memcpy(b + 8, &a, sizeof(a));
		pkt_src = (struct innet_addr){ .ip = tip(101 + w), .udp = (uint16_t)(1000 + w) };
		if (!member)
			pkt_src.udp++;   /* not the member */
		pkt_port = (int)w;
		if (intact)
			return len;
	} else if (!strcmp(program, "l2fwd")) {
		len = 14 + rnd() % 100;
		for (uint32_t i = 0; i < len; i++)
			b[i] = (uint8_t)rnd();
	} else { /* forward: routed innet header, or raw bytes for the map */
		static const uint16_t nodes[] = { 0, 7, 9, 11, 12, 13, 99 };
		struct innet_hdr h = { INNET_MAGIC, INNET_VERSION, 0, 0,
				       htons(nodes[rnd() % 7]), htons(5) };
		memcpy(b, &h, 8);
		len = 8 + rnd() % 64;
		for (uint32_t i = 8; i < len; i++)
			b[i] = (uint8_t)rnd();
		if (rnd() % 4 == 0)
			b[0] = (uint8_t)rnd();   /* raw data for the port map */
	}
	switch (rnd() % 6) {
	case 0: /* flip a few bytes */
		for (uint32_t k = rnd() % 4; k > 0 && len > 0; k--)
			b[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
		break;
	case 1: /* truncate */
		len = len ? rnd() % len : 0;
		break;
	case 2: /* extend with junk */
		for (uint32_t k = rnd() % 32; k > 0; k--)
			b[len++] = (uint8_t)rnd();
		break;
	default:
		break;
	}
	/* the acceptor's trim is the learners' smallest watermark, and it never
	 * goes back: a flipped high byte in one would soon trim every instance
	 * the stream names, so watermarks stay small */
	if (!strcmp(program, "paxos_acceptor") && len >= 56 && b[8] == PAXOS_TRIM)
		memset(b + 8 + 32, 0, 7);
	return len;
}

static bool skipped(const struct setup *su, const char *reg)
{
	for (unsigned i = 0; i < sizeof(su->skip_regs) / sizeof(su->skip_regs[0]); i++)
		if (su->skip_regs[i] != NULL && !strcmp(su->skip_regs[i], reg))
			return true;
	return false;
}

static void compare(const char *what, uint32_t i, const struct innet_inject_result *a,
		    const struct innet_inject_result *b)
{
	if (a->action != b->action || (a->action == INNET_DROP && a->drop_reason != b->drop_reason))
		fail_msg("%s case %u: user space says %s/%u, XDP %s/%u", what, i,
			 innet_action_name(a->action), a->drop_reason, innet_action_name(b->action),
			 b->drop_reason);
	if (a->cpu_drop_reason != b->cpu_drop_reason)   /* on_cpu's verdict (TO_CPU) */
		fail_msg("%s case %u: on_cpu counted drop %u in user space, %u on XDP", what, i,
			 a->cpu_drop_reason, b->cpu_drop_reason);
	if (a->n_out != b->n_out)
		fail_msg("%s case %u (%s): %u packets out in user space, %u on XDP", what, i,
			 innet_action_name(a->action), a->n_out, b->n_out);
	for (uint32_t k = 0; k < a->n_out; k++) {
		const struct innet_inject_out *x = &a->out[k], *y = &b->out[k];
		if (x->port != y->port || x->src_udp != y->src_udp || x->len != y->len ||
		    x->dst.udp != y->dst.udp || memcmp(x->data, y->data, x->len) != 0)
			fail_msg("%s case %u: packet %u differs: port %u/%u, src_udp %u/%u, dst udp %u/%u, "
				 "len %u/%u", what, i, k, x->port, y->port, x->src_udp, y->src_udp,
				 x->dst.udp, y->dst.udp, x->len, y->len);
		/* addresses: the two switches' ports have their own (so both can
		 * bind); peers are the same */
		if ((x->dst.ip & 0xff) != (y->dst.ip & 0xff))
			fail_msg("%s case %u: packet %u to .%u in user space, .%u on XDP", what, i, k,
				 x->dst.ip & 0xff, y->dst.ip & 0xff);
	}
}

static void run(const struct setup *su)
{
	struct innet_switch *u = make(su, false), *x = make(su, true);
	struct innet_cp *cu = innet_switch_prog(u, "p"), *cx = innet_switch_prog(x, "p");
	if (innet_cp_n_groups(cu) > 0 && strcmp(su->program, "agg") != 0) {
		struct innet_member m[3] = { { .port = 0 }, { .port = 1 }, { .port = 2, .udp = 9999 } };
		assert_int_equal(innet_cp_group_set(cu, 0, m, 3), 0);
		assert_int_equal(innet_cp_group_set(cx, 0, m, 3), 0);
	}
	static struct innet_inject_result ra, rb;
	uint8_t buf[512];
	for (uint32_t i = 0; i < N_CASES; i++) {
		pkt_port = -1;
		uint32_t len = make_pkt(su, buf);
		uint16_t port = (uint16_t)(rnd() % 4);
		uint16_t udp = su->raw ? 0 : su->udp[rnd() % su->n_udp];
		struct innet_addr src = { .ip = tip(101 + rnd() % 4), .udp = (uint16_t)(1000 + rnd() % 5) };
		if (pkt_port >= 0) {
			port = (uint16_t)pkt_port;
			src = pkt_src;
		}
		int a = innet_switch_inject(u, port, udp, &src, buf, len, &ra);
		int b = innet_switch_inject(x, port, udp, &src, buf, len, &rb);
		assert_int_equal(a, b);
		if (a == 0)
			compare(su->program, i, &ra, &rb);
	}
	/* the same state left behind */
	for (uint32_t r = 0; r < INNET_MAX_REGS; r++) {
		const struct innet_reg *a = innet_cp_reg(cu, r), *b = innet_cp_reg(cx, r);
		if (a == NULL)
			break;
		assert_int_equal(a->count, b->count);
		if (skipped(su, a->name))
			continue;
		if (memcmp(a->mem, b->mem, (size_t)a->stride * a->count) != 0)
			fail_msg("%s: register %s differs after %u packets", su->program, a->name, N_CASES);
	}
	struct innet_prog_stats su_st, sx_st;
	innet_cp_stats(cu, &su_st);
	innet_cp_stats(cx, &sx_st);
	assert_int_equal(su_st.rx_pkts, sx_st.rx_pkts);
	for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
		assert_int_equal(su_st.actions[a], sx_st.actions[a]);
	for (unsigned r = 0; r < INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS; r++)
		if (su_st.drops[r] != sx_st.drops[r])
			fail_msg("%s: drop %s counted %llu in user space, %llu on XDP", su->program,
				 innet_cp_drop_reason_name(cu, r), (unsigned long long)su_st.drops[r],
				 (unsigned long long)sx_st.drops[r]);
	assert_true(sx_st.xdp_rx_pkts > N_CASES / 2);   /* eBPF did the work */
	printf("%s: %u packets, identical on both targets (%llu handled in eBPF); verdicts:",
	       su->program, N_CASES, (unsigned long long)sx_st.xdp_rx_pkts);
	for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
		if (su_st.actions[a] != 0)
			printf(" %s %llu", innet_action_name(a), (unsigned long long)su_st.actions[a]);
	printf("\n");
	innet_switch_destroy(u);
	innet_switch_destroy(x);
}

static void test_forward(void **state)
{
	struct setup su = { "forward",
			    "{\"map\": [1, 0, 3], \"groups\": 1, \"routes\": [{\"node\": 7, \"ports\": [2]}, "
			    "{\"node\": 9, \"ports\": [1, 2, 3]}, {\"node\": 11, \"ports\": [0]}, "
			    "{\"node\": 12, \"ports\": [3]}, {\"node\": 13, \"group\": 0}]}",
			    { 45100, 45101 }, 2, false, { NULL } };
	run(&su);
}

static void test_counter(void **state)
{
	struct setup su = { "counter", "{\"size\": 16}", { 45102 }, 1, false, { NULL } };
	run(&su);
}

static void test_coordinator(void **state)
{
	struct setup su = { "paxos_coordinator", "{\"acceptors\": [1, 2, 3], \"next\": 5}",
			    { 45103 }, 1, false, { NULL } };
	run(&su);
}

/* The acceptor's state (ballots, votes, the values in their blob slots,
 * trim, watermarks) must end up byte for byte the same too. */
static void test_acceptor(void **state)
{
	struct setup su = { "paxos_acceptor",
			    "{\"id\": 3, \"ring\": 8, \"learners\": [1, 2], \"trim_learners\": 2, "
			    "\"check_peer\": false}",
			    { 45104 }, 1, false, { NULL } };
	run(&su);
}

/* agg: contributions, answers and results byte for byte, and the slots'
 * state words, accumulators (both banks) and the rest of its registers. */
static void test_agg(void **state)
{
	static char args[512];
	char m[4][32];
	for (uint32_t w = 0; w < 4; w++) {
		uint32_t ip = tip(101 + w);
		snprintf(m[w], sizeof(m[w]), "%u@%u.%u.%u.%u:%u", w, ip >> 24, (ip >> 16) & 255,
			 (ip >> 8) & 255, ip & 255, 1000 + w);
	}
	snprintf(args, sizeof(args),
		 "{\"k\": 99, \"slots\": 64, \"jobs\": [{\"id\": 3, \"workers\": 4, \"slots\": 8, "
		 "\"members\": [\"%s\", \"%s\", \"%s\", \"%s\"]}]}", m[0], m[1], m[2], m[3]);
	struct setup su = { "agg", args, { 45105 }, 1, false, { NULL } };
	run(&su);
}

static void test_l2fwd(void **state)
{
	struct setup su = { "l2fwd", "{\"map\": [1, 0, 3]}", { 0 }, 0, true, { NULL } };
	run(&su);
}

/* lb's settings: two servers of a CPU unit each behind VIP(s) with
 * policies that draw no random number; proxy units at the addresses run()
 * sends from (so some datagrams to NAT ports are replies); no deadline
 * within the run (LB_NO_DEADLINE: a day, an hour for the sweep): a sweep is
 * timed from each switch's init, and the XDP switch is made seconds after
 * the user-space one (its verifier; longer on a busy machine), so one could
 * fall due on one switch and not the other (a frame to_cpu on one,
 * forwarded on the other). */
static char lb_args[2048];
#define LB_NO_DEADLINE "\"idle_timeout_ms\": 86400000, \"tcp_closing_ms\": 86400000, \"sweep_ms\": 3600000, "

static void test_lb_proxy(void **state)
{
	snprintf(lb_args, sizeof(lb_args),
		 "{" LB_NO_DEADLINE "\"key_file\": \"%s\", \"maglev_size\": 401, \"conn_capacity\": 64,"
		 " \"vips\": [{\"port\": 45105, \"pool\": \"p\", \"policy\": \"maglev\"},"
		 "           {\"port\": 45106, \"pool\": \"p\", \"policy\": \"wrr\"}],"
		 " \"pools\": [{\"name\": \"p\", \"servers\": ["
		 "   {\"id\": 1, \"units\": [{\"id\": 0, \"address\": \"127.210.%u.101:1000\"}]},"
		 "   {\"id\": 2, \"units\": [{\"id\": 0, \"address\": \"127.210.%u.102:1001\"}]},"
		 "   {\"id\": 3, \"units\": [{\"id\": 0, \"address\": \"127.210.%u.103:1002\"}]}]}]}",
		 lb_key_path, getpid() & 0xffu, getpid() & 0xffu, getpid() & 0xffu);
	struct setup su = { "lb", lb_args, { 45105, 45106, INNET_LB_REPORT_UDP, 45107, 45108, 45109 },
			    6, false, { "sweep", "unit_seen_ns" } };
	run(&su);
}

static void test_lb_packet(void **state)
{
	snprintf(lb_args, sizeof(lb_args),
		 "{" LB_NO_DEADLINE "\"mode\": \"packet\", \"key_file\": \"%s\", \"maglev_size\": 401,"
		 " \"conn_capacity\": 64,"
		 " \"vips\": [{\"address\": \"10.98.0.100\", \"port\": 53, \"pool\": \"dns\", \"policy\": \"ecmp\"},"
		 "           {\"address\": \"10.98.0.100\", \"port\": 8080, \"proto\": \"tcp\","
		 "            \"pool\": \"web\"}],"
		 " \"pools\": [{\"name\": \"dns\", \"servers\": ["
		 "   {\"id\": 1, \"units\": [{\"id\": 0, \"address\": \"10.98.2.10:5300\", \"mac\": \"02:77:00:00:02:0a\", \"port\": 1}]},"
		 "   {\"id\": 2, \"units\": [{\"id\": 0, \"address\": \"10.98.3.10:5300\", \"mac\": \"02:77:00:00:03:0a\", \"port\": 2}]}]},"
		 "  {\"name\": \"web\", \"servers\": ["
		 "   {\"id\": 3, \"units\": [{\"id\": 0, \"address\": \"10.98.4.10:8080\", \"mac\": \"02:77:00:00:04:0a\", \"port\": 3}]}]}]}",
		 lb_key_path);
	struct setup su = { "lb", lb_args, { 0 }, 0, true, { "sweep", "unit_seen_ns" } };
	run(&su);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skip: the XDP target needs root (BPF_PROG_TEST_RUN)\n");
		return 77;
	}
	/* four devices (veths) for the raw ports, in a namespace of our own */
	if (unshare(CLONE_NEWNET) != 0 ||
	    system("ip link set lo up && for i in 0 1 2 3; do ip link add ieq$i type veth peer name ieqp$i && "
		   "ip link set ieq$i up || exit 1; done") != 0) {
		printf("cannot make a network namespace with four veths\n");
		return 1;
	}
	/* lb's key */
	uint8_t raw[INNET_LB_KEY_LEN];
	for (unsigned i = 0; i < INNET_LB_KEY_LEN; i++)
		raw[i] = (uint8_t)(i * 7 + 3);
	innet_lb_key_init(&lb_key, raw);
	snprintf(lb_key_path, sizeof(lb_key_path), "/tmp/innet-equiv-%d.key", (int)getpid());
	FILE *kf = fopen(lb_key_path, "w");
	if (kf == NULL)
		return 1;
	for (unsigned i = 0; i < INNET_LB_KEY_LEN; i++)
		fprintf(kf, "%02x", raw[i]);
	fclose(kf);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forward),
		cmocka_unit_test(test_counter),
		cmocka_unit_test(test_coordinator),
		cmocka_unit_test(test_acceptor),
		cmocka_unit_test(test_l2fwd),
		cmocka_unit_test(test_agg),
		cmocka_unit_test(test_lb_proxy),
		cmocka_unit_test(test_lb_packet),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(lb_key_path);
	return rc;
}
