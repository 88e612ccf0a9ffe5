/*
 * echo_switch.c — a program of your own on libinnet, built outside the tree
 * against the installed library:
 *
 *     cc echo_switch.c $(pkg-config --cflags --libs innet) -o echo_switch
 *     ./echo_switch 127.0.0.1 47900
 *
 * It defines a data-plane program, "echo" (PISA: count the packet in a
 * register, send it back to its sender), registers it, builds a one-port
 * switch on ADDR that runs it on UDP port PORT, starts it, sends one
 * datagram to it from a socket of its own, waits for the echo, reads the
 * register through the control-plane API and prints what it saw.
 *
 *     client 127.0.0.1:any ──"hello"──▶ switch port 0 ADDR:PORT (echo) ──┐
 *            ◀──────────────────"hello"───────────────────────────────────┘
 *
 * Exit status 0 when the echo came back intact and the count is 1.
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

enum { ECHO_R_COUNT };

/* The data path: restricted C (innet/dp.h), here compiled natively. */
static enum innet_action echo_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	innet_reg_fetch_add(ctx, ECHO_R_COUNT, 0, 1);
	return innet_reflect(pkt);
}
INNET_DATAPATH(echo, echo_handle, NULL)

/* The control side: declare one 8-byte counter. */
static int echo_setup(struct innet_decl *d, struct innet_args *args)
{
	(void)args;   /* no settings */
	return innet_decl_reg(d, ECHO_R_COUNT, "count", 8, 1);
}

static const struct innet_program echo_program = {
	.name = "echo",
	.summary = "example: count a packet and send it back",
	.model = INNET_MODEL_PISA,
	.setup = echo_setup,
	.handle = innet_dp_echo_handle,
};
INNET_PROGRAM_REGISTER(echo_program)

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s ADDR PORT\n", argv[0]);
		return 2;
	}
	struct in_addr ip;
	int port = atoi(argv[2]);
	if (inet_pton(AF_INET, argv[1], &ip) != 1 || port <= 0 || port > 65535) {
		fprintf(stderr, "echo_switch: bad address or port\n");
		return 2;
	}
	printf("libinnet %s\n", INNET_VERSION_STRING);
	printf("programs:");   /* the shipped ones and ours, however we were linked */
	for (const struct innet_program *const *p = innet_program_list(); *p != NULL; p++)
		printf(" %s", (*p)->name);
	printf("\n");

	struct innet_switch_conf c;
	memset(&c, 0, sizeof(c));
	snprintf(c.name, sizeof(c.name), "echo");
	c.n_workers = 1;
	c.n_ports = 1;
	snprintf(c.ports[0].name, sizeof(c.ports[0].name), "p0");
	c.ports[0].ip = ntohl(ip.s_addr);
	c.n_progs = 1;
	snprintf(c.progs[0].name, sizeof(c.progs[0].name), "echo");
	c.progs[0].program = innet_program_find("echo");   /* registered above */
	c.progs[0].udp[0] = (uint16_t)port;
	c.progs[0].n_udp = 1;
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
	int rc = innet_switch_start(sw);
	if (rc != 0) {
		fprintf(stderr, "echo_switch: start: %s\n", strerror(-rc));
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
