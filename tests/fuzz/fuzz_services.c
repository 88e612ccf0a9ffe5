/*
 * fuzz_services.c — libFuzzer target: arbitrary packets into every service
 * program through the real pipeline (innet_switch_inject): the Paxos
 * coordinator and acceptor, the aggregation program and a DNN layer, all on
 * one switch that is built once and never started.
 *
 *   byte 0   selector: bits 0-1 = program (coordinator, acceptor, agg, dnn),
 *            bits 2-3 = ingress port (mod 4), bits 4-7 = source address choice
 *   rest     the UDP payload (an innet base header is prepended when bit 7 of
 *            byte 1 is set, so the fuzzer reaches the service parsers sooner)
 *
 * Invariants on every packet: injection accepts it; the verdict is a known
 * action; a drop has a reason with a name; what would be sent leaves by an
 * existing port and is no larger than INNET_PKT_MAX.
 *
 *                  port 0  127.209.P.1 (peer .101)   port 2  127.209.P.3 (peer .103)
 *   fuzz switch ── port 1  127.209.P.2 (peer .102)   port 3  127.209.P.4 (peer .104)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "innet/switch.h"
#include "innet/wire.h"

#define N_PORTS 4u
#define UDP_COORD 47100u
#define UDP_ACC   47101u
#define UDP_AGG   47102u
#define UDP_DNN   47103u

static struct innet_switch *sw;
static struct innet_cp *progs[4];
static const uint16_t udps[4] = { UDP_COORD, UDP_ACC, UDP_AGG, UDP_DNN };
static const uint8_t services[4] = { INNET_SVC_PAXOS, INNET_SVC_PAXOS, INNET_SVC_AGG, INNET_SVC_DNN };
static struct innet_inject_result res;
static char agg_args[512], dnn_args[512];

#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz_services: %s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                                          \
			abort();                                                           \
		}                                                                          \
	} while (0)

static uint32_t test_ip(uint32_t host)
{
	return (127u << 24) | (209u << 16) | (((uint32_t)getpid() & 0xffu) << 8) | host;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void add_prog(struct innet_switch_conf *c, const char *name, const char *prog, uint16_t udp,
		     const char *args)
{
	struct innet_prog_conf *p = &c->progs[c->n_progs++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->program = innet_program_find(prog);
	if (p->program == NULL) {
		fprintf(stderr, "fuzz_services: program %s is not built in\n", prog);
		abort();
	}
	p->udp[0] = udp;
	p->n_udp = 1;
	p->args_json = (char *)args;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "fuzz-services");
	c.n_workers = 1;
	c.seed = 1;
	c.node_id = 13;
	c.n_ports = N_PORTS;
	for (uint32_t i = 0; i < N_PORTS; i++) {
		c.ports[i].ip = test_ip(1 + i);
		c.ports[i].peer_ip = test_ip(101 + i);
	}
	unsigned p = (unsigned)getpid() & 0xffu;
	add_prog(&c, "coord", "paxos_coordinator", UDP_COORD, "{\"acceptors\": [1, 2, 3], \"ballot\": 513}");
	add_prog(&c, "acc", "paxos_acceptor", UDP_ACC,
		 "{\"id\": 2, \"ring\": 4, \"learners\": [1, 2], \"trim_learners\": 2}");
	snprintf(agg_args, sizeof(agg_args),
		 "{\"k\": 64, \"slots\": 8, \"jobs\": [{\"id\": 7, \"workers\": 3, \"slots\": 2, "
		 "\"timeout_us\": 0, \"members\": [\"127.209.%u.101:6001\", \"127.209.%u.102:6002\", "
		 "\"127.209.%u.103:6003\"]}]}", p, p, p);
	add_prog(&c, "agg", "agg", UDP_AGG, agg_args);
	const char *model = access("examples/dnn-digits.innet", R_OK) == 0 ?
				    "examples/dnn-digits.innet" : "../examples/dnn-digits.innet";
	snprintf(dnn_args, sizeof(dnn_args),
		 "{\"model\": \"%s\", \"stage\": 2, \"pipe\": 0, \"pipes\": 2, \"nodes\": [11, 12, 13], "
		 "\"udp_base\": %u, \"slots\": 8, \"routes\": [{\"node\": 101, \"ports\": [1]}, "
		 "{\"node\": 12, \"ports\": [0]}]}", model, UDP_DNN);
	add_prog(&c, "dnn", "dnn_layer", UDP_DNN, dnn_args);
	char err[1024];
	sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL) {
		fprintf(stderr, "fuzz_services: %s\n", err);
		abort();
	}
	for (int i = 0; i < 4; i++)
		progs[i] = innet_switch_prog_at(sw, (uint32_t)i);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint8_t sel = data[0];
	unsigned prog = sel & 3u;
	uint16_t port = (uint16_t)((sel >> 2) & 3u);
	/* a peer's address (acceptors check it) or some other host */
	struct innet_addr src = { .ip = (sel & 0x40) ? test_ip(101 + port) : test_ip(50 + (sel >> 4)),
				  .udp = (uint16_t)(6000 + (sel >> 4)) };
	uint8_t pkt[INNET_PKT_MAX];
	uint32_t len = 0;
	if (data[1] & 0x80) {
		struct innet_hdr h = { .magic = INNET_MAGIC, .version = INNET_VERSION,
				       .service = services[prog], .dst_node = 0, .src_node = 0 };
		memcpy(pkt, &h, sizeof(h));
		len = sizeof(h);
	}
	size_t rest = size - 2;
	if (rest > INNET_PKT_MAX - len)
		rest = INNET_PKT_MAX - len;
	memcpy(pkt + len, data + 2, rest);
	len += (uint32_t)rest;

	CHECK(innet_switch_inject(sw, port, udps[prog], &src, pkt, len, &res) == 0);
	CHECK(res.action < INNET_ACTION_COUNT);
	if (res.action == INNET_DROP) {
		const char *name = innet_cp_drop_reason_name(progs[prog], res.drop_reason);
		CHECK(name != NULL && strcmp(name, "unknown") != 0);
	}
	for (uint32_t i = 0; i < res.n_out; i++) {
		CHECK(res.out[i].port < N_PORTS);
		CHECK(res.out[i].len <= INNET_PKT_MAX);
	}
	return 0;
}
