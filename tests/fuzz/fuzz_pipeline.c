/*
 * fuzz_pipeline.c — libFuzzer target: arbitrary packets through the real
 * pipeline (parser dispatch, the forward and counter programs, verdicts,
 * multicast/forward/reflect, statistics) with innet_switch_inject.
 *
 * One switch is built once (LLVMFuzzerInitialize) and never started; each
 * input is one packet:
 *
 *   byte 0   selector: bit 0 = program (0 forward, 1 counter),
 *            bits 1-2 = ingress port (mod 3), bits 3-7 = source UDP port offset
 *   rest     the UDP payload
 *
 * Invariants checked on every packet: injection accepts exactly the packets
 * that fit; the verdict is a known action; a drop has a reason with a name;
 * what goes out goes out of an existing port, no larger than INNET_PKT_MAX;
 * forward sends the bytes unchanged or nothing; counter replies with one
 * 24-byte reply to the sender or nothing; the statistics add up.
 *
 * The switch binds 127.207.P.1-3 (P from the process id) on UDP 47000/47001.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "innet/switch.h"
#include "innet/wire.h"

#define TEST_NET 207u
#define UDP_FWD  47000u
#define UDP_CNT  47001u
#define N_PORTS  3u

static struct innet_switch *sw;
static struct innet_cp *fwd, *cnt;
static struct innet_inject_result res;
static uint64_t injected[2];

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_pipeline: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (TEST_NET << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "fuzz-pipeline");
	c.n_workers = 1;
	c.seed = 1;
	c.n_ports = N_PORTS;
	for (uint32_t i = 0; i < N_PORTS; i++) {
		snprintf(c.ports[i].name, sizeof(c.ports[i].name), "p%u", i);
		c.ports[i].ip = test_ip(1 + i);
		c.ports[i].peer_ip = i < 2 ? test_ip(101 + i) : 0; /* port 2: no peer */
	}
	c.n_progs = 2;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "fwd");
	c.progs[0].program = innet_program_find("forward");
	c.progs[0].udp[0] = UDP_FWD;
	c.progs[0].n_udp = 1;
	c.progs[0].args_json =
		"{\"map\": [1, 0, 2], \"routes\": [{\"node\": 7, \"ports\": [1]}, "
		"{\"node\": 9, \"ports\": [0, 1, 2]}, {\"node\": 258, \"ports\": [2, 2]}, "
		"{\"node\": 1, \"ports\": [0]}]}";
	snprintf(c.progs[1].name, sizeof(c.progs[1].name), "cnt");
	c.progs[1].program = innet_program_find("counter");
	c.progs[1].udp[0] = UDP_CNT;
	c.progs[1].n_udp = 1;
	c.progs[1].args_json = "{\"size\": 64}";
	char err[512];
	sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL) {
		fprintf(stderr, "fuzz_pipeline: cannot create the switch: %s\n", err);
		exit(1);
	}
	fwd = innet_switch_prog(sw, "fwd");
	cnt = innet_switch_prog(sw, "cnt");
	CHECK(fwd != NULL && cnt != NULL);
	return 0;
}

static void check_stats(void)
{
	struct innet_cp *cps[2] = { fwd, cnt };
	for (int i = 0; i < 2; i++) {
		struct innet_prog_stats st;
		CHECK(innet_cp_stats(cps[i], &st) == 0);
		CHECK(st.rx_pkts == injected[i]);
		uint64_t verdicts = 0, drops = 0;
		for (int a = 0; a < INNET_ACTION_COUNT; a++)
			verdicts += st.actions[a];
		for (uint32_t r = 0; r < INNET_DROP_PROGRAM + INNET_MAX_DROP_REASONS; r++)
			drops += st.drops[r];
		CHECK(verdicts == st.rx_pkts);
		CHECK(drops == st.actions[INNET_DROP]);
		CHECK(st.drops[INNET_DROP_NONE] == 0);
		CHECK(st.passes == st.rx_pkts); /* neither program recirculates */
		CHECK(st.max_reg_ops <= 1);     /* both are PISA programs of one register op */
		CHECK(st.max_table_ops <= 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t sel = data[0];
	int which = sel & 1;
	struct innet_cp *cp = which ? cnt : fwd;
	uint16_t dst_udp = which ? UDP_CNT : UDP_FWD;
	uint16_t port = (uint16_t)(((sel >> 1) & 3) % N_PORTS);
	struct innet_addr src = { .ip = test_ip(200), .udp = (uint16_t)(5000 + (sel >> 3)) };
	const uint8_t *payload = data + 1;
	uint32_t len = (uint32_t)(size - 1);

	int rc = innet_switch_inject(sw, port, dst_udp, &src, payload, len, &res);
	if (len > INNET_PKT_MAX) {
		CHECK(rc == -22); /* -EINVAL: cannot arrive */
		return 0;
	}
	CHECK(rc == 0);
	injected[which]++;

	CHECK((unsigned)res.action < INNET_ACTION_COUNT);
	CHECK(res.action != INNET_RECIRCULATE);
	CHECK(res.n_out <= INNET_INJECT_MAX_OUT);
	CHECK(res.n_out_lost == 0);
	for (uint32_t i = 0; i < res.n_out; i++) {
		CHECK(res.out[i].len <= INNET_PKT_MAX);
		CHECK(res.out[i].port < N_PORTS);
		CHECK(res.out[i].dst.ip != 0);
		CHECK(res.out[i].dst.udp != 0);
		CHECK(res.out[i].src_udp == dst_udp);
	}
	if (res.action == INNET_DROP) {
		CHECK(res.drop_reason != INNET_DROP_NONE);
		CHECK(strcmp(innet_cp_drop_reason_name(cp, res.drop_reason), "unknown") != 0);
		CHECK(res.n_out == 0);
	}

	if (!which) {
		/* forward: the bytes unchanged, out of one port, or nothing */
		CHECK(res.action == INNET_FORWARD || res.action == INNET_DROP);
		if (res.action == INNET_FORWARD) {
			CHECK(res.n_out == 1);
			CHECK(res.out[0].len == len);
			CHECK(memcmp(res.out[0].data, payload, len) == 0);
			CHECK(res.out[0].port != 2); /* no peer there: would have been no_peer */
		}
		/* docs/protocol.md, "forward": a payload that starts with the
		 * magic must be a whole base header (too_short) of this version
		 * (bad_version); one that does not, and one with dst_node 0,
		 * follows the map: port 0 <-> 1, 2 -> 2. */
		if (len >= 1 && payload[0] == INNET_MAGIC && len < sizeof(struct innet_hdr)) {
			CHECK(res.action == INNET_DROP);
			CHECK(strcmp(innet_cp_drop_reason_name(cp, res.drop_reason), "too_short") == 0);
		} else if (len == 0 || payload[0] != INNET_MAGIC ||
			   (payload[1] == INNET_VERSION && payload[4] == 0 && payload[5] == 0)) {
			if (port == 2) {
				CHECK(res.action == INNET_DROP);
				CHECK(res.drop_reason == INNET_DROP_NO_PEER);
			} else {
				CHECK(res.action == INNET_FORWARD);
				CHECK(res.out[0].port == 1 - port);
			}
		} else if (payload[1] != INNET_VERSION) {
			CHECK(res.action == INNET_DROP);
			CHECK(strcmp(innet_cp_drop_reason_name(cp, res.drop_reason), "bad_version") == 0);
		}
	} else {
		/* counter: one 24-byte reply to the sender, or nothing */
		CHECK(res.action == INNET_REFLECT || res.action == INNET_DROP);
		if (res.action == INNET_REFLECT) {
			CHECK(len >= 24);
			CHECK(res.n_out == 1);
			CHECK(res.out[0].len == 24);
			CHECK(res.out[0].port == port);
			CHECK(res.out[0].dst.ip == src.ip && res.out[0].dst.udp == src.udp);
			const uint8_t *r = res.out[0].data;
			CHECK(r[0] == INNET_MAGIC && r[1] == INNET_VERSION && r[2] == INNET_SVC_COUNTER);
			CHECK(r[8] == (payload[8] | INNET_COUNTER_REPLY));
			CHECK(r[9] <= INNET_COUNTER_BAD_OP);
			CHECK(memcmp(r + 4, payload + 6, 2) == 0 && memcmp(r + 6, payload + 4, 2) == 0);
			CHECK(memcmp(r + 12, payload + 12, 4) == 0); /* index echoed */
		} else {
			CHECK(len < 24 || payload[0] != INNET_MAGIC || payload[1] != INNET_VERSION ||
			      payload[2] != INNET_SVC_COUNTER || (payload[8] & INNET_COUNTER_REPLY));
		}
	}
	if ((injected[0] + injected[1]) % 64 == 0)
		check_stats();
	return 0;
}
