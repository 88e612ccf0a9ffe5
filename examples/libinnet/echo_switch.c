/*
 * echo_switch.c — a program of your own on libinnet, built outside the tree
 * against the installed library and its rules for data paths (the Makefile
 * here: pkg-config for the library, innet-dp.mk for the data path):
 *
 *     make                         echo_switch, echo_dp.bpf.o
 *     ./echo_switch 127.0.0.1 47900 [echo_dp.bpf.o]
 *     ./echo_switch --xdp 127.0.0.1 47900 echo_dp.bpf.o     (root)
 *
 * It defines a data-plane program, "echo" (PISA: count the packet in a
 * register, send it back to its sender; the data path is echo_dp.c),
 * registers it and builds a one-port switch that runs it:
 *
 *   - on the user-space engine, on ADDR, UDP port PORT: it starts the
 *     switch, sends one datagram to it from a socket of its own, waits for
 *     the echo;
 *
 *         client 127.0.0.1:any ──"hello"──▶ switch port 0 ADDR:PORT (echo) ──┐
 *                ◀──────────────────"hello"───────────────────────────────────┘
 *
 *   - with --xdp, on the XDP target, its eBPF object (echo_dp.bpf.o, given to
 *     the instance with innet_decl_datapath) loaded by the kernel's verifier
 *     and run by BPF_PROG_TEST_RUN (innet_switch_inject; no device attached:
 *     ADDR:PORT is where its user-space engine listens for what eBPF passes
 *     up): a datagram in, the same bytes reflected, handled in eBPF.
 *
 * Either way it reads the register through the control-plane API and prints
 * what it saw. Exit status 0 when the echo came back intact and the count
 * is 1; 77 for --xdp without root.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <innet/program.h>
#include <innet/switch.h>
#include <innet/version.h>

#include "echo.h"

static const char *echo_bpf;   /* the data path's eBPF object, or NULL */

/* The control side: the data path (and its eBPF object, if there is one),
 * one 8-byte counter. */
static int echo_setup(struct innet_decl *d, struct innet_args *args)
{
	(void)args;   /* no settings */
	int rc = innet_decl_datapath(d, innet_dp_echo_handle, NULL, echo_bpf);
	return rc != 0 ? rc : innet_decl_reg(d, ECHO_R_COUNT, "count", 8, 1);
}

static const struct innet_program echo_program = {
	.name = "echo",
	.summary = "example: count a packet and send it back",
	.model = INNET_MODEL_PISA,
	.setup = echo_setup,
	.handle = innet_dp_echo_handle,
};
INNET_PROGRAM_REGISTER(echo_program)

static void conf_init(struct innet_switch_conf *c, uint32_t ip, uint16_t port)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->name, sizeof(c->name), "echo");
	c->n_workers = 1;
	c->n_ports = 1;
	snprintf(c->ports[0].name, sizeof(c->ports[0].name), "p0");
	c->ports[0].ip = ip;
	c->n_progs = 1;
	snprintf(c->progs[0].name, sizeof(c->progs[0].name), "echo");
	c->progs[0].program = innet_program_find("echo");   /* registered above */
	c->progs[0].udp[0] = port;
	c->progs[0].n_udp = 1;
}

/* --xdp: the eBPF object on the XDP target, a datagram injected. */
static int run_xdp(uint32_t ip, uint16_t port)
{
	if (geteuid() != 0) {
		printf("echo_switch --xdp: skipped: loading eBPF needs root\n");
		return 77;
	}
	static struct innet_switch_conf c;
	conf_init(&c, ip, port);
	c.target = INNET_TARGET_XDP;
	c.xdp_no_attach = true;
	char err[4096];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL) {
		fprintf(stderr, "echo_switch: %s\n", err);
		return 1;
	}
	static struct innet_inject_result res;
	struct innet_addr from = { .ip = 0x0a000001, .udp = 4242 };
	int rc = innet_switch_inject(sw, 0, port, &from, "hello", 5, &res);
	struct innet_port_stats ps;
	innet_switch_port_stats(sw, 0, &ps);
	uint64_t count = 0;
	innet_cp_reg_read(innet_switch_prog(sw, "echo"), ECHO_R_COUNT, 0, &count);
	innet_switch_destroy(sw);
	if (rc != 0 || res.action != INNET_REFLECT || res.n_out != 1 || res.out[0].len != 5 ||
	    memcmp(res.out[0].data, "hello", 5) != 0 || res.out[0].dst.ip != from.ip ||
	    res.out[0].dst.udp != from.udp) {
		fprintf(stderr, "echo_switch --xdp: no echo (inject %d, verdict %s, %u out)\n", rc,
			innet_action_name(res.action), res.n_out);
		return 1;
	}
	printf("echo on XDP: \"hello\" reflected by the eBPF object (%llu handled in eBPF); "
	       "count = %llu\n", (unsigned long long)ps.xdp_rx_pkts, (unsigned long long)count);
	return count == 1 && ps.xdp_rx_pkts == 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
	bool xdp = argc > 1 && !strcmp(argv[1], "--xdp");
	if (xdp) {
		argc--;
		argv++;
	}
	if ((argc != 3 && argc != 4) || (xdp && argc != 4)) {
		fprintf(stderr, "usage: %s ADDR PORT [BPF_OBJECT]\n"
			"       %s --xdp ADDR PORT BPF_OBJECT\n", argv[0], argv[0]);
		return 2;
	}
	echo_bpf = argc == 4 ? argv[3] : NULL;
	struct in_addr ip;
	int port = atoi(argv[2]);
	if (inet_pton(AF_INET, argv[1], &ip) != 1 || port <= 0 || port > 65535) {
		fprintf(stderr, "echo_switch: bad address or port\n");
		return 2;
	}
	if (xdp)
		return run_xdp(ntohl(ip.s_addr), (uint16_t)port);
	printf("libinnet %s\n", INNET_VERSION_STRING);
	printf("programs:");   /* the shipped ones and ours, however we were linked */
	for (const struct innet_program *const *p = innet_program_list(); *p != NULL; p++)
		printf(" %s", (*p)->name);
	printf("\n");

	static struct innet_switch_conf c;
	conf_init(&c, ntohl(ip.s_addr), (uint16_t)port);
	if (c.progs[0].program == NULL) {
		fprintf(stderr, "echo_switch: the program did not register\n");
		return 1;
	}
	char err[512];
	struct innet_switch *sw = innet_switch_create(&c, err, sizeof(err));
	if (sw == NULL) {
		fprintf(stderr, "echo_switch: %s\n", err);
		return 1;
	}
	int rc = innet_switch_start(sw, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "echo_switch: start: %s\n", err);
		innet_switch_destroy(sw);
		return 1;
	}

	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = ip };
	char buf[64];
	ssize_t n = -1;
	if (fd >= 0 && sendto(fd, "hello", 5, 0, (struct sockaddr *)&to, sizeof(to)) == 5) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 2000) == 1)
			n = recv(fd, buf, sizeof(buf), 0);
	}
	uint64_t count = 0;
	innet_cp_reg_read(innet_switch_prog(sw, "echo"), ECHO_R_COUNT, 0, &count);
	innet_switch_destroy(sw);
	if (fd >= 0)
		close(fd);
	if (n != 5 || memcmp(buf, "hello", 5) != 0) {
		fprintf(stderr, "echo_switch: no echo\n");
		return 1;
	}
	printf("echo: \"hello\" came back; count = %llu\n", (unsigned long long)count);
	return count == 1 ? 0 : 1;
}
