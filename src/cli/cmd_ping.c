/*
 * cmd_ping.c — `innet ping`: send innet packets from one host of a topology
 * to another through the running fabric and back, and report loss and
 * round-trip times.
 *
 *   FROM (addr A, node NA)                             TO (addr B, node NB)
 *   A:U ──► its switch port :U ─► ... switches route by dst_node ... ─► B:U
 *   A:U ◄── ... dst_node = NA ... ◄── its switch port :U ◄── echo at B:U
 *
 * Both ends run in this process (one thread echoes at B), or, when the two
 * hosts are on different machines, one process per end: --role send on A's
 * machine and --role echo on B's. Each probe is an
 * innet base header (service RAW, dst_node, src_node) followed by a 4-byte
 * sequence number, an 8-byte send time and padding up to --size.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "innet/ctl_client.h"
#include "innet/switch.h"
#include "innet/topology.h"
#include "innet/wire.h"
#include "cli/cmds.h"
#include "innet/fabric.h"
#include "innet/hist.h"

struct probe {
	struct innet_hdr h;
	uint32_t seq;      /* big-endian */
	uint64_t sent_ns;  /* sender's clock, opaque to the echo */
} __attribute__((packed));

struct echo_arg {
	int fd;
	struct sockaddr_in sw;      /* B's switch port */
	_Atomic bool stop;
	uint64_t echoed;
};

static int bind_udp(uint32_t ip, uint16_t udp)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(udp),
				   .sin_addr.s_addr = htonl(ip) };
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static void *echo_main(void *p)
{
	struct echo_arg *e = p;
	uint8_t buf[INNET_PKT_MAX];
	while (!atomic_load(&e->stop)) {
		struct pollfd pfd = { .fd = e->fd, .events = POLLIN };
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		ssize_t n = recv(e->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < (ssize_t)sizeof(struct innet_hdr) || buf[0] != INNET_MAGIC)
			continue;
		struct innet_hdr *h = (struct innet_hdr *)buf;
		uint16_t t = h->dst_node;
		h->dst_node = h->src_node;
		h->src_node = t;
		if (sendto(e->fd, buf, (size_t)n, 0, (struct sockaddr *)&e->sw, sizeof(e->sw)) == n)
			e->echoed++;
	}
	return NULL;
}

/* The address of the switch port that host node h is linked to. */
/* 0 if node index i (innet_topology_find of name) is a host of t; else -1
 * with a message naming the option, what name is and the hosts there are. */
static int ping_check_host(const struct innet_topology *t, const char *file, const char *opt,
			   const char *name, int i)
{
	if (i >= 0 && t->nodes[i].kind == INNET_TOPO_HOST)
		return 0;
	if (i >= 0) {
		fprintf(stderr, "innet ping: %s %s: a switch of %s, not a host\n", opt, name, file);
		return -1;
	}
	fprintf(stderr, "innet ping: %s %s: %s has no node of that name (its hosts:", opt, name, file);
	const char *sep = " ";
	for (uint32_t k = 0; k < t->n_nodes; k++) {
		if (t->nodes[k].kind == INNET_TOPO_HOST) {
			fprintf(stderr, "%s%s", sep, t->nodes[k].name);
			sep = ", ";
		}
	}
	fprintf(stderr, ")\n");
	return -1;
}

static int host_uplink(const struct innet_topology *t, uint32_t h, uint32_t *ip)
{
	const struct innet_topo_node *n = &t->nodes[h];
	for (uint32_t i = 0; i < n->n_links; i++) {
		const struct innet_topo_link *l = &t->links[n->links[i]];
		uint32_t other = l->a == h ? l->b : l->a;
		uint32_t port = l->a == h ? l->b_port : l->a_port;
		if (t->nodes[other].kind == INNET_TOPO_SWITCH && port != INNET_TOPO_NO_PORT) {
			*ip = t->nodes[other].conf->ports[port].ip;
			return 0;
		}
	}
	return -ENOENT;
}

/* The switch (node index) that host node h is linked to, -1 if none. */
static int uplink_switch(const struct innet_topology *t, uint32_t h)
{
	const struct innet_topo_node *n = &t->nodes[h];
	for (uint32_t i = 0; i < n->n_links; i++) {
		const struct innet_topo_link *l = &t->links[n->links[i]];
		uint32_t other = l->a == h ? l->b : l->a;
		if (t->nodes[other].kind == INNET_TOPO_SWITCH)
			return (int)other;
	}
	return -1;
}

/* Is the switch host h is linked to running on this machine (its control
 * socket answers)? With why[] saying which switch and socket when not. */
static bool first_hop_running(const struct innet_topology *t, uint32_t h, char *why, size_t len)
{
	int sw = uplink_switch(t, h);
	if (sw < 0)
		return true;
	const char *ctl = t->nodes[sw].conf->ctl_path;
	snprintf(why, len, "switch %s (next to %s) does not answer on %s", t->nodes[sw].name,
		 t->nodes[h].name, ctl);
	return ctl[0] == '\0' || innet_ctl_answers(ctl);
}

/* Does the topology place switches on several machines ("machine" tags)? */
static bool multi_machine(const struct innet_topology *t)
{
	for (uint32_t i = 0; i < t->n_nodes; i++)
		if (t->nodes[i].machine[0] != '\0')
			return true;
	return false;
}

/* --role echo: answer probes at host b for duration_s seconds. */
static int echo_only(const struct innet_topo_node *b, uint32_t sw_ip, uint16_t udp, long duration_s, bool quiet)
{
	int fd = bind_udp(b->addr, udp);
	if (fd < 0) {
		fprintf(stderr, "innet ping: cannot bind %s's address on UDP %u: %s\n", b->name, udp,
			strerror(-fd));
		return 1;
	}
	struct echo_arg echo = { .fd = fd, .sw = { .sin_family = AF_INET, .sin_port = htons(udp),
						    .sin_addr.s_addr = htonl(sw_ip) } };
	pthread_t th;
	if (pthread_create(&th, NULL, echo_main, &echo) != 0) {
		close(fd);
		return 1;
	}
	if (!quiet)
		fprintf(stderr, "innet ping: echoing at %s for %ld s\n", b->name, duration_s);
	struct timespec ts = { .tv_sec = duration_s };
	nanosleep(&ts, NULL);
	atomic_store(&echo.stop, true);
	pthread_join(th, NULL);
	close(fd);
	printf("%s echoed %lu probes\n", b->name, (unsigned long)echo.echoed);
	return 0;
}

static void ping_usage(FILE *f)
{
	fprintf(f, "usage: innet ping --topology FILE --from HOST --to HOST [-c COUNT] [--udp PORT]\n"
		   "                  [--interval MS] [--timeout MS] [--size BYTES] [--quiet]\n"
		   "                  [--role both|send|echo] [--duration SEC]\n\n"
		   "Send innet probes from one host of a running fabric to another and back.\n"
		   "--role send / echo run one end each, for hosts on different machines\n"
		   "(the echo end runs for --duration seconds, default 30).\n"
		   "Exit status: 0 if every probe came back, 1 if some were lost, 2 usage.\n");
}

int cmd_ping(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' }, { "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'T' },       { "count", required_argument, NULL, 'c' },
		{ "udp", required_argument, NULL, 'u' },      { "interval", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 'W' },  { "size", required_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },          { "help", no_argument, NULL, 'h' },
		{ "role", required_argument, NULL, 'r' },     { "duration", required_argument, NULL, 'D' },
		{ NULL, 0, NULL, 0 },
	};
	const char *topo = NULL, *from = NULL, *to = NULL;
	long count = 10, udp = 9000, interval_ms = 10, timeout_ms = 1000, size = sizeof(struct probe);
	bool quiet = false;
	const char *role = "both";
	long duration_s = 30;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:f:T:c:u:i:W:s:qhr:D:", opts, NULL)) != -1) {
		char *end = NULL;
		long *dst = NULL, lo = 0, hi = 0;
		switch (c) {
		case 't': topo = optarg; continue;
		case 'f': from = optarg; continue;
		case 'T': to = optarg; continue;
		case 'q': quiet = true; continue;
		case 'r':
			role = optarg;
			if (strcmp(role, "both") && strcmp(role, "send") && strcmp(role, "echo")) {
				fprintf(stderr, "innet ping: --role wants both, send or echo\n");
				return 2;
			}
			continue;
		case 'D': dst = &duration_s; lo = 1; hi = 3600; break;
		case 'h': ping_usage(stdout); return 0;
		case 'c': dst = &count; lo = 1; hi = 1000000; break;
		case 'u': dst = &udp; lo = 1; hi = 65535; break;
		case 'i': dst = &interval_ms; lo = 0; hi = 60000; break;
		case 'W': dst = &timeout_ms; lo = 1; hi = 600000; break;
		case 's': dst = &size; lo = (long)sizeof(struct probe); hi = INNET_PKT_MAX; break;
		default: ping_usage(stderr); return 2;
		}
		errno = 0;
		*dst = strtol(optarg, &end, 10);
		if (errno || *end || *dst < lo || *dst > hi) {
			fprintf(stderr, "innet ping: -%c wants a number in [%ld, %ld]\n", c, lo, hi);
			return 2;
		}
	}
	if (!topo || !from || !to || optind < argc) {
		ping_usage(stderr);
		if (optind < argc)
			fprintf(stderr, "innet ping: unexpected argument '%s'\n", argv[optind]);
		else
			fprintf(stderr, "innet ping: missing %s%s%s%s%s\n", !topo ? "--topology FILE" : "",
				!topo && (!from || !to) ? ", " : "", !from ? "--from HOST" : "",
				!from && !to ? ", " : "", !to ? "--to HOST" : "");
		return 2;
	}
	char err[2048];
	struct innet_topology *t = innet_topology_load(topo, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet ping: %s\n", err);
		return 2;
	}
	int rc = 2;
	int ia = innet_topology_find(t, from), ib = innet_topology_find(t, to);
	uint32_t swa = 0, swb = 0;
	if (ping_check_host(t, topo, "--from", from, ia) != 0 ||
	    ping_check_host(t, topo, "--to", to, ib) != 0)
		goto out_topo;
	if (host_uplink(t, (uint32_t)ia, &swa) != 0 || host_uplink(t, (uint32_t)ib, &swb) != 0) {
		fprintf(stderr, "innet ping: a host is not linked to any switch\n");
		goto out_topo;
	}
	const struct innet_topo_node *na = &t->nodes[ia], *nb = &t->nodes[ib];
	/* A fabric that is not up loses every probe: say so at once instead.
	 * (Across machines the first hop may run elsewhere: checked after.) */
	char why[512];
	if (!multi_machine(t) && !first_hop_running(t, !strcmp(role, "echo") ? (uint32_t)ib : (uint32_t)ia,
						     why, sizeof(why))) {
		fprintf(stderr, "innet ping: fabric '%s' is not running: %s\n"
			"  start it with: innet fabric up %s\n", t->name, why, topo);
		rc = 1;
		goto out_topo;
	}
	/* netns mode: each host's socket is made in its own namespace */
	int ns_rc = 0;
	if (t->netns && (ns_rc = innet_topology_enter(t, (uint32_t)ib)) != 0) {
		fprintf(stderr, "innet ping: cannot enter the namespace of %s: %s%s\n", nb->name,
			strerror(-ns_rc), ns_rc == -ENOENT ? " (is the fabric up?)" : "");
		rc = 1;
		goto out_topo;
	}
	if (!strcmp(role, "echo")) {
		rc = echo_only(nb, swb, (uint16_t)udp, duration_s, quiet);
		goto out_topo;
	}
	bool send_only = !strcmp(role, "send");
	int fb = ia == ib || send_only ? -1 : bind_udp(nb->addr, (uint16_t)udp);
	if (t->netns && (ns_rc = innet_topology_enter(t, (uint32_t)ia)) != 0) {
		fprintf(stderr, "innet ping: cannot enter the namespace of %s: %s\n", na->name,
			strerror(-ns_rc));
		if (fb >= 0)
			close(fb);
		rc = 1;
		goto out_topo;
	}
	int fa = bind_udp(na->addr, (uint16_t)udp);
	if (fa < 0 || (ia != ib && !send_only && fb < 0)) {
		fprintf(stderr, "innet ping: cannot bind the hosts' addresses on UDP %ld: %s\n", udp,
			strerror(-(fa < 0 ? fa : fb)));
		if (fa >= 0)
			close(fa);
		rc = 1;
		goto out_topo;
	}
	struct echo_arg echo = { .fd = fb, .sw = { .sin_family = AF_INET, .sin_port = htons((uint16_t)udp),
						    .sin_addr.s_addr = htonl(swb) } };
	pthread_t th;
	bool echo_running = fb >= 0 && pthread_create(&th, NULL, echo_main, &echo) == 0;
	struct sockaddr_in swa_sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)udp),
				       .sin_addr.s_addr = htonl(swa) };
	struct innet_hist rtt;
	bool have_rtt = innet_hist_init(&rtt, 60000000000ull, INNET_HIST_DEFAULT_BITS) == 0;
	uint8_t *seen = calloc((size_t)count, 1);
	uint8_t buf[INNET_PKT_MAX];
	long received = 0, dups = 0;
	if (!quiet)
		printf("PING %s (node %u) -> %s (node %u), %ld probes of %ld bytes\n", na->name,
		       na->node_id, nb->name, nb->node_id, count, size);
	for (long i = 0; i < count && have_rtt && seen; i++) {
		struct probe p = { .h = { .magic = INNET_MAGIC, .version = INNET_VERSION,
					  .service = INNET_SVC_RAW, .dst_node = htons(nb->node_id),
					  .src_node = htons(na->node_id) },
				   .seq = htonl((uint32_t)i), .sent_ns = innet_now_ns() };
		memset(buf, 0, (size_t)size);
		memcpy(buf, &p, sizeof(p));
		if (sendto(fa, buf, (size_t)size, 0, (struct sockaddr *)&swa_sin, sizeof(swa_sin)) < 0) {
			fprintf(stderr, "innet ping: send: %s\n", strerror(errno));
			break;
		}
		/* Collect replies until this probe's answer, its timeout, or the interval. */
		uint64_t deadline = p.sent_ns + (uint64_t)timeout_ms * 1000000ull;
		uint64_t next = p.sent_ns + (uint64_t)interval_ms * 1000000ull;
		while (!seen[i] || innet_now_ns() < next) {
			uint64_t now = innet_now_ns();
			uint64_t until = seen[i] ? next : deadline;
			if (now >= until)
				break;
			struct pollfd pfd = { .fd = fa, .events = POLLIN };
			if (poll(&pfd, 1, (int)((until - now) / 1000000ull) + 1) <= 0)
				continue;
			ssize_t n = recv(fa, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < (ssize_t)sizeof(struct probe))
				continue;
			struct probe r;
			memcpy(&r, buf, sizeof(r));
			uint32_t seq = ntohl(r.seq);
			if (r.h.magic != INNET_MAGIC || seq >= (uint32_t)count)
				continue;
			if (seen[seq]) {
				dups++;
				continue;
			}
			seen[seq] = 1;
			innet_hist_record(&rtt, innet_now_ns() - r.sent_ns);
			received++;
			if (!quiet)
				printf("%zd bytes from %s: seq=%u time=%.1f us\n", n, nb->name, seq,
				       (double)(innet_now_ns() - r.sent_ns) / 1e3);
		}
	}
	atomic_store(&echo.stop, true);
	if (echo_running)
		pthread_join(th, NULL);
	printf("%ld sent, %ld received, %.1f%% loss, %ld duplicates", count, received,
	       100.0 * (double)(count - received) / (double)count, dups);
	if (received > 0)
		printf(", rtt min/p50/max %.1f/%.1f/%.1f us", rtt.min / 1e3,
		       innet_hist_percentile(&rtt, 50) / 1e3, rtt.max / 1e3);
	printf("\n");
	if (received == 0) {
		bool up_a = first_hop_running(t, (uint32_t)ia, why, sizeof(why));
		if (up_a && !send_only)
			up_a = first_hop_running(t, (uint32_t)ib, why, sizeof(why));
		if (!up_a)
			fprintf(stderr, "innet ping: no probe came back: %s (is fabric '%s' up on "
				"this machine? innet fabric status %s)\n", why, t->name, topo);
	}
	rc = received == count ? 0 : 1;
	if (have_rtt)
		innet_hist_fini(&rtt);
	free(seen);
	close(fa);
	if (fb >= 0)
		close(fb);
out_topo:
	innet_topology_free(t);
	return rc;
}
