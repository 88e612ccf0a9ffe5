/*
 * test_rawport.c — raw (AF_PACKET) ports: the raw program's view of a frame,
 * every verdict on frames (forward, reflect, multicast, emit, drop), the
 * named drops for a frame sent to a UDP port and a datagram sent to a raw
 * port, a frame shorter than a MAC header (recorded by an injection, dropped
 * as short_frame by a real port), the l2fwd program, injection, and real frames through veth pairs
 * with a pcap capture (LINKTYPE_ETHERNET).
 *
 * Root only (AF_PACKET, veth): skipped otherwise. The whole test process moves
 * into a network namespace of its own first (unshare), so its interfaces and
 * promiscuous sockets touch nothing else:
 *
 *   test's packet socket on ie-r0 ──veth── ie-r1 = raw port 0 ┐ switch (l2fwd [1, 0])
 *   test's packet socket on ie-r2 ──veth── ie-r3 = raw port 1 ┘ + UDP port 2 = 127.0.0.1
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "innet/switch.h"

#define UDP_P     46990
#define ETH_TEST  0x88b5  /* IEEE local experimental ethertype */

static bool have_netns;

/* ---- test programs --------------------------------------------------------- */

/* What the raw program last saw. */
static struct {
	uint32_t len;
	uint16_t in_port, dst_udp;
	uint32_t src_ip;
	uint16_t src_udp;
	uint8_t flags;
	uint8_t first;
} seen;

/* Frames: the first payload byte after the MAC header picks the verdict:
 * 'F' forward to port data[15], 'R' reflect, 'M' multicast group 0,
 * 'E' emit a copy to port data[15] and consume, 'S' cut to 10 bytes (less
 * than a MAC header) and forward to port data[15], 'D' drop. */
static enum innet_action raw_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	seen.len = pkt->len;
	seen.in_port = pkt->in_port;
	seen.dst_udp = pkt->dst_udp;
	seen.src_ip = pkt->src.ip;
	seen.src_udp = pkt->src.udp;
	seen.flags = pkt->flags;
	seen.first = pkt->len ? pkt->data[0] : 0;
	if (!(pkt->flags & INNET_PKT_F_RAW)) /* a UDP datagram: forward to port data[1] */
		return innet_forward(pkt, pkt->len > 1 ? pkt->data[1] : 0);
	if (pkt->len < 16)
		return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
	switch (pkt->data[14]) {
	case 'F': return innet_forward(pkt, pkt->data[15]);
	case 'R': return innet_reflect(pkt);
	case 'S': {
		uint8_t to = pkt->data[15];
		if (innet_pkt_resize(ctx, pkt, 10) != 0)
			return innet_drop(pkt, INNET_DROP_PKT_BOUNDS);
		return innet_forward(pkt, to);
	}
	case 'M': return innet_multicast(pkt, 0);
	case 'E': {
		struct innet_out o = { .port = pkt->data[15] };
		innet_emit(ctx, &o, false, pkt->data, pkt->len);
		return INNET_CONSUMED;
	}
	default: return innet_drop(pkt, INNET_DROP_PROGRAM_VERDICT);
	}
}

static int raw_setup(struct innet_decl *d, struct innet_args *a)
{
	return innet_decl_groups(d, 1);
}

static const struct innet_program prog_raw = {
	.name = "rawtest", .model = INNET_MODEL_TRIO, .setup = raw_setup, .handle = raw_handle,
};

/* ---- helpers ----------------------------------------------------------- */

static struct innet_switch *cur_sw;
static int fds[4] = { -1, -1, -1, -1 };

static int teardown(void **state)
{
	innet_switch_destroy(cur_sw);
	cur_sw = NULL;
	for (int i = 0; i < 4; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	return 0;
}

static int sh(const char *cmd)
{
	int rc = system(cmd);
	return rc == 0 ? 0 : -1;
}

/* Own network namespace with two veth pairs and lo up. */
static char no_netns[160];   /* why the cases that need the namespace skip */

static int group_setup(void **state)
{
	if (geteuid() != 0) {
		snprintf(no_netns, sizeof(no_netns), "needs root (AF_PACKET, network namespaces)");
		return 0;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		snprintf(no_netns, sizeof(no_netns), "unshare(CLONE_NEWNET): %s", strerror(errno));
		return 0;
	}
	if (sh("ip link set lo up && ip link add ie-r0 type veth peer name ie-r1 && "
	       "ip link add ie-r2 type veth peer name ie-r3 && "
	       "for d in ie-r0 ie-r1 ie-r2 ie-r3; do ip link set $d up || exit 1; done") != 0) {
		fprintf(stderr, "test_rawport: cannot create veth pairs\n");
		return -1;
	}
	have_netns = true;
	return 0;
}

/* Raw ports 0 = ie-r1, 1 = ie-r3, UDP port 2 = 127.0.0.1; the raw program
 * prog (also bound to UDP_P when udp) with args. */
static struct innet_switch *make(const struct innet_program *prog, const char *args, bool udp,
				 uint32_t workers)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "raw");
	c.n_workers = workers;
	c.n_ports = 3;
	snprintf(c.ports[0].iface, sizeof(c.ports[0].iface), "ie-r1");
	snprintf(c.ports[1].iface, sizeof(c.ports[1].iface), "ie-r3");
	c.ports[2].ip = 0x7f000001;
	c.ports[2].peer_ip = 0x7f000001;
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "%s", prog->name);
	c.progs[0].program = prog;
	c.progs[0].raw = true;
	if (udp) {
		c.progs[0].udp[0] = UDP_P;
		c.progs[0].n_udp = 1;
	}
	c.progs[0].args_json = (char *)args;
	char err[512];
	cur_sw = innet_switch_create(&c, err, sizeof(err));
	if (cur_sw == NULL)
		fail_msg("innet_switch_create: %s", err);
	return cur_sw;
}

/* A test frame: broadcast destination, our ethertype, then the payload. */
static uint32_t frame(uint8_t *f, const char *payload, uint32_t plen)
{
	static const uint8_t mac_hdr[14] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 1,
					     ETH_TEST >> 8, ETH_TEST & 0xff };
	memcpy(f, mac_hdr, 14);
	memcpy(f + 14, payload, plen);
	return 14 + plen;
}

static struct innet_inject_result res;

static void inject_frame(struct innet_switch *sw, uint16_t port, const char *payload, uint32_t plen)
{
	uint8_t f[64];
	uint32_t n = frame(f, payload, plen);
	struct innet_addr from = { 0x7f000009, 999 }; /* ignored for a raw port */
	assert_int_equal(innet_switch_inject(sw, port, 0, &from, f, n, &res), 0);
}

static const char *reason(struct innet_switch *sw, const char *prog)
{
	return innet_cp_drop_reason_name(innet_switch_prog(sw, prog), res.drop_reason);
}

/* ---- tests -------------------------------------------------------------- */

static void test_verdicts(void **state)
{
	if (!have_netns)
		test_skip(no_netns);
	struct innet_switch *sw = make(&prog_raw, NULL, true, 1);
	uint8_t want[64];
	uint32_t wlen = frame(want, "F\x01xyz", 5);

	/* forward: the frame as it is, out of port 1 */
	inject_frame(sw, 0, "F\x01xyz", 5);
	assert_int_equal(seen.len, wlen);
	assert_int_equal(seen.in_port, 0);
	assert_int_equal(seen.dst_udp, 0);
	assert_int_equal(seen.src_ip, 0);
	assert_int_equal(seen.src_udp, 0);
	assert_true(seen.flags & INNET_PKT_F_RAW);
	assert_int_equal(seen.first, 0xff); /* data is the MAC header */
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 1);
	assert_int_equal(res.out[0].len, wlen);
	assert_memory_equal(res.out[0].data, want, wlen);
	assert_int_equal(res.out[0].src_udp, 0);
	assert_int_equal(res.out[0].dst.ip, 0);

	/* reflect: back out of the ingress port */
	inject_frame(sw, 1, "Rabc", 4);
	assert_int_equal(res.action, INNET_REFLECT);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 1);

	/* multicast to raw ports 0 and 1 */
	struct innet_member m[2] = { { .port = 0 }, { .port = 1 } };
	struct innet_cp *cp = innet_switch_prog(sw, "rawtest");
	assert_int_equal(innet_cp_group_set(cp, 0, m, 2), 0);
	inject_frame(sw, 0, "Mabc", 4);
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 2);
	assert_int_equal(res.out[0].port, 0);
	assert_int_equal(res.out[1].port, 1);
	assert_int_equal(res.out[1].len, 18);

	/* emit a copy to a raw port */
	inject_frame(sw, 0, "E\x01", 2);
	assert_int_equal(res.action, INNET_CONSUMED);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 1);
	assert_int_equal(res.out[0].len, 16);

	/* a frame to the UDP port: a named drop */
	inject_frame(sw, 0, "F\x02", 2);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "rawtest"), "frame_to_udp_port");
	assert_int_equal(res.n_out, 0);
	/* multicast with a UDP member: the raw member still gets its copy */
	m[0].port = 2;
	assert_int_equal(innet_cp_group_set(cp, 0, m, 2), 0);
	inject_frame(sw, 0, "Mabc", 4);
	assert_int_equal(res.action, INNET_MULTICAST);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 1);
	/* to no port at all */
	inject_frame(sw, 0, "F\x09", 2);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "rawtest"), "bad_port");
	inject_frame(sw, 0, "Dxx", 3);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "rawtest"), "program_verdict");

	/* a UDP datagram to a raw port: a named drop; to the UDP port: sent */
	uint8_t dg[2] = { 'u', 0 };
	struct innet_addr from = { 0x7f000009, 999 };
	assert_int_equal(innet_switch_inject(sw, 2, UDP_P, &from, dg, 2, &res), 0);
	assert_false(seen.flags & INNET_PKT_F_RAW);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "rawtest"), "datagram_to_raw_port");
	dg[1] = 2;
	assert_int_equal(innet_switch_inject(sw, 2, UDP_P, &from, dg, 2, &res), 0);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].port, 2);
	assert_int_equal(res.out[0].src_udp, UDP_P);

	/* a raw port takes frames only (dst_udp 0) and a UDP port needs a program */
	uint8_t f[20] = { 0 };
	assert_int_equal(innet_switch_inject(sw, 0, UDP_P, &from, f, 20, &res), -EINVAL);
	assert_int_equal(innet_switch_inject(sw, 2, 0, &from, f, 20, &res), -EINVAL);

	struct innet_prog_stats ps;
	assert_int_equal(innet_cp_stats(cp, &ps), 0);
	assert_int_equal(ps.drops[INNET_DROP_FRAME_TO_UDP_PORT], 1);
	assert_int_equal(ps.drops[INNET_DROP_DATAGRAM_TO_RAW_PORT], 1);
}

static void test_l2fwd_inject(void **state)
{
	if (!have_netns)
		test_skip(no_netns);
	const struct innet_program *l2 = innet_program_find("l2fwd");
	assert_non_null(l2);
	struct innet_switch *sw = make(l2, "{\"map\": [1, 0]}", false, 1);
	inject_frame(sw, 0, "hello", 5);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.out[0].port, 1);
	inject_frame(sw, 1, "hello", 5);
	assert_int_equal(res.out[0].port, 0);
	/* port 2 is a UDP port: no frames there, and the instance binds no UDP port */
	uint8_t f[20] = { 0 };
	struct innet_addr from = { 0, 0 };
	assert_int_equal(innet_switch_inject(sw, 2, 0, &from, f, sizeof(f), &res), -EINVAL);
}

static void test_l2fwd_settings_and_drops(void **state)
{
	if (!have_netns)
		test_skip(no_netns);
	const struct innet_program *l2 = innet_program_find("l2fwd");
	static struct innet_switch_conf c;
	char err[512];
	static const struct {
		const char *args, *msg;
	} bad[] = {
		{ NULL, "\"map\" is required" },
		{ "{\"map\": [1, 0, 2, 0]}", "\"map\" has 4 entries but the switch has 3 ports" },
		{ "{\"map\": [1, 3]}", "map[1] = 3 is not a port of the switch (3 ports)" },
		{ "{\"map\": [1], \"x\": 1}", "x" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&c, 0, sizeof(c));
		c.n_workers = 1;
		c.n_ports = 3;
		snprintf(c.ports[0].iface, sizeof(c.ports[0].iface), "ie-r1");
		snprintf(c.ports[1].iface, sizeof(c.ports[1].iface), "ie-r3");
		c.ports[2].ip = 0x7f000001;
		c.n_progs = 1;
		snprintf(c.progs[0].name, sizeof(c.progs[0].name), "l2");
		c.progs[0].program = l2;
		c.progs[0].raw = true;
		c.progs[0].args_json = (char *)bad[i].args;
		struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
		if (sw != NULL) {
			innet_switch_destroy(sw);
			fail_msg("case %zu: created", i);
		}
		if (strstr(err, bad[i].msg) == NULL)
			fail_msg("case %zu: '%s' lacks '%s'", i, err, bad[i].msg);
	}

	struct innet_switch *sw = make(l2, "{\"map\": [1]}", false, 1);
	inject_frame(sw, 1, "hello", 5);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "l2fwd"), "not_mapped");
	uint8_t runt[10] = { 0 };
	struct innet_addr from = { 0, 0 };
	assert_int_equal(innet_switch_inject(sw, 0, 0, &from, runt, sizeof(runt), &res), 0);
	assert_int_equal(res.action, INNET_DROP);
	assert_string_equal(reason(sw, "l2fwd"), "runt");
	inject_frame(sw, 0, "ok", 2);
	assert_int_equal(res.action, INNET_FORWARD);
	struct innet_cp *cp = innet_switch_prog(sw, "l2fwd");
	int rx = innet_cp_reg_find(cp, "rx_frames"), tx = innet_cp_reg_find(cp, "tx_frames");
	assert_true(rx >= 0 && tx >= 0);
	uint64_t v;
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)rx, 0, &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)rx, 1, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)tx, 1, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(innet_cp_reg_read(cp, (unsigned)tx, 0, &v), 0);
	assert_int_equal(v, 0);
}

/* A packet socket on dev for the test's own frames. */
static int psock(const char *dev)
{
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_TEST));
	assert_true(fd >= 0);
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_TEST),
				   .sll_ifindex = (int)if_nametoindex(dev) };
	assert_int_equal(bind(fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
	return fd;
}

/* Wait for one of our frames carrying tag on fd; its length or -1. */
static ssize_t recv_tagged(int fd, uint8_t *buf, size_t len, uint8_t tag, int ms)
{
	for (int waited = 0; waited < ms; waited += 10) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 10) <= 0)
			continue;
		ssize_t n;
		while ((n = recv(fd, buf, len, 0)) > 0)
			if (n >= 16 && buf[14] == 'T' && buf[15] == tag)
				return n;
	}
	return -1;
}

/* Real frames: ie-r0 → raw port 0 → l2fwd → raw port 1 → ie-r2, and back,
 * on two workers (PACKET_FANOUT), with a capture of port 0. */
static void test_real_frames(void **state)
{
	if (!have_netns)
		test_skip(no_netns);
	const struct innet_program *l2 = innet_program_find("l2fwd");
	struct innet_switch *sw = make(l2, "{\"map\": [1, 0]}", false, 2);
	char pcap_path[] = "/tmp/ie-rawport-XXXXXX";
	int pfd = mkstemp(pcap_path);
	assert_true(pfd >= 0);
	close(pfd);
	assert_int_equal(innet_switch_capture_start(sw, 0, pcap_path, 0), 0);
	assert_int_equal(test_start(sw), 0);
	fds[0] = psock("ie-r0");
	fds[1] = psock("ie-r2");

	uint8_t f[128], buf[2048];
	for (int i = 0; i < 20; i++) {
		int from = i % 2, to = 1 - from;
		char payload[40];
		int pl = snprintf(payload, sizeof(payload), "T%c frame %d through the switch", 'a' + i, i);
		uint32_t n = frame(f, payload, (uint32_t)pl);
		assert_int_equal(send(fds[from], f, n, 0), (ssize_t)n);
		ssize_t got = recv_tagged(fds[to], buf, sizeof(buf), (uint8_t)('a' + i), 3000);
		if (got < 0)
			fail_msg("frame %d (ie-r%d -> ie-r%d) did not arrive", i, from * 2, to * 2);
		assert_int_equal(got, n);
		assert_memory_equal(buf, f, n);
	}
	innet_switch_stop(sw);
	struct innet_port_stats p0, p1;
	assert_int_equal(innet_switch_port_stats(sw, 0, &p0), 0);
	assert_int_equal(innet_switch_port_stats(sw, 1, &p1), 0);
	/* ours, plus whatever the kernel sent meanwhile (IPv6 router solicitations) */
	assert_true(p0.rx_pkts >= 10 && p0.tx_pkts >= 10);
	assert_true(p1.rx_pkts >= 10 && p1.tx_pkts >= 10);
	assert_int_equal(p0.tx_errors, 0);
	assert_int_equal(innet_switch_capture_stop(sw, 0), 0);

	/* the capture: LINKTYPE_ETHERNET, our frames as they are */
	FILE *pf = fopen(pcap_path, "rb");
	assert_non_null(pf);
	uint8_t ghdr[24];
	assert_int_equal(fread(ghdr, 1, 24, pf), 24);
	uint32_t linktype;
	memcpy(&linktype, ghdr + 20, 4);
	assert_int_equal(linktype, 1);
	int ours = 0;
	uint8_t rh[16];
	while (fread(rh, 1, 16, pf) == 16) {
		uint32_t caplen;
		memcpy(&caplen, rh + 8, 4);
		assert_true(caplen <= sizeof(buf));
		assert_int_equal(fread(buf, 1, caplen, pf), caplen);
		if (caplen >= 16 && buf[12] == (ETH_TEST >> 8) && buf[13] == (ETH_TEST & 0xff) &&
		    buf[14] == 'T')
			ours++;
	}
	fclose(pf);
	unlink(pcap_path);
	assert_int_equal(ours, 20); /* 10 in, 10 out on port 0 */
}

/* A frame cut shorter than a MAC header: an injection records it (a test
 * port, as BMv2's packet-in socket delivers one); a real port does not send
 * it (with CAP_SYS_RAWIO the kernel would pad it to 14 bytes and send
 * something else): dropped and counted as short_frame, nothing on the wire. */
static void test_short_frames(void **state)
{
	if (!have_netns)
		test_skip(no_netns);
	struct innet_switch *sw = make(&prog_raw, NULL, false, 1);
	inject_frame(sw, 0, "S\x01", 2);
	assert_int_equal(res.action, INNET_FORWARD);
	assert_int_equal(res.n_out, 1);
	assert_int_equal(res.out[0].port, 1);
	assert_int_equal(res.out[0].len, 10);
	struct innet_cp *cp = innet_switch_prog(sw, "rawtest");
	struct innet_prog_stats ps;
	assert_int_equal(innet_cp_stats(cp, &ps), 0);
	assert_int_equal(ps.drops[INNET_DROP_SHORT_FRAME], 0);

	assert_int_equal(test_start(sw), 0);
	fds[0] = psock("ie-r0");
	fds[1] = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	assert_true(fds[1] >= 0);
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = (int)if_nametoindex("ie-r2") };
	assert_int_equal(bind(fds[1], (struct sockaddr *)&sll, sizeof(sll)), 0);
	uint8_t f[64], buf[2048];
	uint32_t n = frame(f, "S\x01", 2);
	assert_int_equal(send(fds[0], f, n, 0), (ssize_t)n);
	/* then a frame that arrives, behind it on the same path */
	n = frame(f, "F\x01" "end", 5);
	assert_int_equal(send(fds[0], f, n, 0), (ssize_t)n);
	bool got_end = false;
	int leaked = 0;
	for (int waited = 0; waited < 3000 && !got_end; waited += 10) {
		struct pollfd p = { .fd = fds[1], .events = POLLIN };
		if (poll(&p, 1, 10) <= 0)
			continue;
		ssize_t r;
		while ((r = recv(fds[1], buf, sizeof(buf), 0)) > 0) {
			if (r == (ssize_t)n && buf[14] == 'F' && buf[16] == 'e')
				got_end = true;
			else if (r <= 14 || (buf[0] == 0xff && buf[6] == 0x02 && buf[12] == 0 && buf[13] == 0))
				leaked++;   /* the cut frame, as it is or padded */
		}
	}
	innet_switch_stop(sw);
	assert_true(got_end);
	assert_int_equal(leaked, 0);
	assert_int_equal(innet_cp_stats(cp, &ps), 0);
	assert_int_equal(ps.drops[INNET_DROP_SHORT_FRAME], 1);
	assert_string_equal(innet_cp_drop_reason_name(cp, INNET_DROP_SHORT_FRAME), "short_frame");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_verdicts, teardown),
		cmocka_unit_test_teardown(test_l2fwd_inject, teardown),
		cmocka_unit_test_teardown(test_l2fwd_settings_and_drops, teardown),
		cmocka_unit_test_teardown(test_real_frames, teardown),
		cmocka_unit_test_teardown(test_short_frames, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
