/*
 * fuzz_lb.c — libFuzzer target for the load balancer "lb": arbitrary
 * datagrams into the proxy-mode program through the real pipeline
 * (innet_switch_inject), and arbitrary Ethernet frames through packet mode's
 * parser and NAT rewrites (src/lb/frame.c; packet mode's raw ports need root
 * and an interface, so frames are fuzzed at the function).
 *
 *   byte 0   selector: bits 0-1 = destination (VIP port, report port, a NAT
 *            port, frame functions), bits 2-4 = source choice (clients, the
 *            units' addresses), bit 5 = replace the payload by a correctly
 *            MACed report whose fields come from the next bytes
 *   rest     the payload / frame
 *
 * Invariants: injection accepts it; the verdict is a known action; a drop has
 * a named reason; forwarded packets leave by port 0 and fit INNET_PKT_MAX; a
 * report the handler hands to the control thread (to_cpu: the switch is not
 * started, so the injection runs on_cpu, the MAC's verification) is accepted
 * or refused with a report's drop reason; a frame that parses still parses
 * after DNAT and SNAT, with valid checksums (frame.c: the handler's frame
 * code on byte buffers).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "innet/lb.h"
#include "innet/switch.h"
#include "lb/lb_pvt.h"

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_lb: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct innet_switch *sw;
static struct innet_cp *cp;
static struct innet_lb_key key;
static struct innet_inject_result res;
static uint32_t base;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct innet_switch_conf c;
	static char args[2048];
	char path[64];
	uint8_t raw[32] = { 1, 2, 3 };
	innet_lb_key_init(&key, raw);
	snprintf(path, sizeof(path), "/tmp/innet-fuzz-lb-%d.key", (int)getpid());
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 32; i++)
		fprintf(f, "%02x", raw[i]);
	fclose(f);
	base = (127u << 24) | (60u << 16) | ((250u + ((uint32_t)getpid() & 3u)) << 8);
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "fuzz-lb");
	c.n_workers = 1;
	c.n_ports = 1;
	c.ports[0].ip = base | 1;
	snprintf(args, sizeof(args),
		 "{\"key_file\": \"%s\", \"maglev_size\": 251, \"conn_capacity\": 64, "
		 "\"idle_timeout_ms\": 5, \"down_after_ms\": 1000,"
		 "\"vips\": [{\"port\": 5353, \"pool\": \"p\", \"policy\": \"accel\"},"
		 "           {\"port\": 5354, \"pool\": \"p\", \"policy\": \"p2c\"}],"
		 "\"pools\": [{\"name\": \"p\", \"servers\": [{\"id\": 1, \"units\": ["
		 "{\"id\": 0, \"kind\": \"cpu\", \"address\": \"127.60.%u.10:7000\"},"
		 "{\"id\": 1, \"kind\": \"accelerator\", \"address\": \"127.60.%u.11:7001\"}]}]}]}",
		 path, (base >> 8) & 0xff, (base >> 8) & 0xff);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "lb");
	c.progs[0].program = innet_program_find("lb");
	uint16_t ports[] = { 5353, 5354, 47900, 30000, 30001, 30002, 30003 };
	memcpy(c.progs[0].udp, ports, sizeof(ports));
	c.progs[0].n_udp = sizeof(ports) / sizeof(ports[0]);
	c.progs[0].args_json = args;
	char err[512];
	sw = innet_switch_create(&c, err, sizeof(err));
	unlink(path);
	if (sw == NULL) {
		fprintf(stderr, "fuzz_lb: %s\n", err);
		abort();
	}
	cp = innet_switch_prog(sw, "lb");
	return 0;
}

static void fuzz_frame(const uint8_t *d, size_t n)
{
	uint8_t f[INNET_PKT_MAX];
	if (n > sizeof(f))
		n = sizeof(f);
	memcpy(f, d, n);
	struct lb_frame fr;
	int rc = lb_frame_parse(f, (uint32_t)n, &fr);
	CHECK(rc == 0 || (rc >= INNET_DROP_PROGRAM && rc < LB_DR_COUNT_END));
	if (rc != 0)
		return;
	uint32_t l4len = (uint32_t)(f[fr.l3_off + 2] << 8 | f[fr.l3_off + 3]) -
			 (fr.l4_off - fr.l3_off);
	bool had_csum = fr.proto == 6 || (f[fr.l4_off + 6] | f[fr.l4_off + 7]);
	bool valid = !had_csum || lb_csum_l4(f, &fr, l4len) == 0;
	lb_frame_set_dst(f, &fr, 0x0a000001u ^ (uint32_t)n, (uint16_t)(n * 7));
	lb_frame_set_src(f, &fr, 0xc0a80001u, 53);
	struct lb_frame g;
	CHECK(lb_frame_parse(f, (uint32_t)n, &g) == 0);
	CHECK(g.dip == fr.dip && g.sport == 53);
	/* A correct L4 checksum stays correct through the incremental updates. */
	if (valid && had_csum)
		CHECK(lb_csum_l4(f, &g, l4len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	const uint8_t *p = data + 1;
	size_t n = size - 1;
	if ((sel & 3) == 3) {
		fuzz_frame(p, n);
		return 0;
	}
	static const uint16_t dsts[3] = { 5353, 47900, 30000 };
	uint16_t dst = dsts[sel & 3];
	if (dst == 30000 && n > 0)
		dst = (uint16_t)(30000 + p[0] % 4);
	uint32_t s = (sel >> 2) & 7;
	struct innet_addr src = { .ip = s < 4 ? (base | (100 + s)) : (base | (10 + (s & 1))),
				  .udp = s < 4 ? (uint16_t)(40000 + s) : (uint16_t)(7000 + (s & 1)) };
	uint8_t buf[INNET_PKT_MAX];
	if ((sel & 0x20) && n >= 8) {
		struct innet_lb_report r = {
			.server = p[0] & 3, .unit = p[1] & 3, .kind = p[2] & 1, .state = p[3] & 3,
			.load = p[4], .seq = (uint64_t)p[5] << 8 | p[6] | 1, .rflags = p[7] & 3,
		};
		innet_lb_report_seal(&r, &key, buf, sizeof(buf));
		p = buf;
		n = INNET_LB_REPORT_LEN;
		dst = 47900;
	} else if (n > INNET_PKT_MAX) {
		n = INNET_PKT_MAX;
	}
	int rc = innet_switch_inject(sw, 0, dst, &src, p, (uint32_t)n, &res);
	CHECK(rc == 0);
	CHECK(res.action < INNET_ACTION_COUNT);
	if (res.action == INNET_DROP)
		CHECK(innet_cp_drop_reason_name(cp, res.drop_reason) != NULL);
	if (res.cpu_drop_reason != 0) {
		CHECK(res.action == INNET_TO_CPU);
		CHECK(res.cpu_drop_reason >= LB_DR_REPORT_LENGTH &&
		      res.cpu_drop_reason <= LB_DR_REPORT_REPLAY);
	}
	for (uint32_t i = 0; i < res.n_out; i++) {
		CHECK(res.out[i].port == 0);
		CHECK(res.out[i].len <= INNET_PKT_MAX);
	}
	return 0;
}
