/*
 * xdptool.c — the XDP tools of bench/xdp-forwarding.sh (standalone: no
 * innet code, so the reference forwarder shares nothing with what it is
 * compared to). Each runs in the namespace it is started in and holds its
 * XDP program (a bpf_link) only while it runs.
 *
 *   xdptool gen DEV --src-mac M --dst-mac M --src IP:PORT --dst IP:PORT
 *               --size BYTES --warmup S --seconds S [--rate MPPS]
 *       frames of BYTES (Ethernet included) out of DEV, as fast as the
 *       kernel takes them (BPF_PROG_TEST_RUN, live frames, batches of 64),
 *       or at MPPS million frames a second, evenly spaced (xdp_gen paces
 *       itself: see xdptool.bpf.c); prints
 *         RESULT offered_mpps=.. frames=.. seconds=.. duty=.. sent=..
 *       offered_mpps, frames, seconds: the measured window (after the
 *       warm-up); duty: the share of that window the program was running;
 *       sent: frames transmitted in the whole run. Each BPF_PROG_TEST_RUN
 *       call ends in a sleep (~25 ms on this machine, whatever the call's
 *       length, at real-time priority too) when no frame leaves, so an
 *       unpaced generator sends bursts of 2^16 frames at its full speed with
 *       gaps between them (duty 0.2-0.35); a paced call lasts ~200 ms to
 *       make the gaps rare.
 *   xdptool sink DEV --warmup S --seconds S
 *       counts and drops every frame arriving on DEV; prints
 *       "RESULT mpps=.. gbit=.. frames=.." for the measured window
 *   xdptool fwd IN OUT --my IP:PORT --from IP --to IP:PORT --to-mac M
 *               --seconds S
 *       the hand-written forwarder: frames for IP:PORT arriving on IN leave
 *       OUT from --from (UDP port PORT) to --to, to MAC --to-mac
 *
 *   xdptool pass DEV --seconds S
 *       an XDP_PASS program on DEV (a veth takes XDP frames from its peer
 *       only if it runs XDP itself)
 *
 * The eBPF programs are xdptool.bpf.o next to this binary.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "now.h"

#define TMPL_MAX 2048

struct tmpl {
	uint32_t len;
	uint8_t data[TMPL_MAX];
};

struct counts {
	uint64_t pkts;
	uint64_t bytes;
};

struct pace { /* as in xdptool.bpf.c */
	uint64_t interval_ps;
	uint64_t burst_ps;
	uint64_t next_ps;
	uint64_t sent;
};

struct fwd_cfg {
	uint32_t my_ip;
	uint16_t my_port;
	uint16_t out_sport;
	uint16_t out_dport;
	uint8_t out_smac[6];
	uint8_t out_dmac[6];
	uint32_t out_sip;
	uint32_t out_dip;
};

static void die(const char *what, const char *arg) __attribute__((noreturn));
static void die(const char *what, const char *arg)
{
	fprintf(stderr, "xdptool: %s%s\n", what, arg);
	exit(1);
}

static int parse_mac(const char *s, uint8_t m[6])
{
	unsigned v[6];
	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		m[i] = (uint8_t)v[i];
	return 0;
}

static int parse_ipport(const char *s, uint32_t *ip, uint16_t *port)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", s);
	char *c = strchr(buf, ':');
	if (c != NULL) {
		*c++ = '\0';
		*port = (uint16_t)atoi(c);
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	*ip = a.s_addr;
	return 0;
}

static struct bpf_object *open_obj(void)
{
	char path[4096];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n < 0)
		die("cannot find my executable", "");
	path[n] = '\0';
	char *slash = strrchr(path, '/');
	snprintf(slash + 1, sizeof(path) - (size_t)(slash + 1 - path), "xdptool.bpf.o");
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	if (obj == NULL)
		die("cannot open ", path);
	return obj;
}

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 0; i + 1 < argc; i++)
		if (!strcmp(argv[i], name))
			return argv[i + 1];
	if (def == NULL)
		die("missing ", name);
	return def;
}

static volatile sig_atomic_t stop;
static void on_signal(int s)
{
	(void)s;
	stop = 1;
}

static uint64_t sum_counts(int fd, struct counts *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct counts *v = calloc((size_t)ncpu, sizeof(*v));
	uint32_t k = 0;
	memset(out, 0, sizeof(*out));
	if (v != NULL && bpf_map_lookup_elem(fd, &k, v) == 0)
		for (int c = 0; c < ncpu; c++) {
			out->pkts += v[c].pkts;
			out->bytes += v[c].bytes;
		}
	free(v);
	return out->pkts;
}

static uint16_t csum16(const uint8_t *p, int n)
{
	uint32_t s = 0;
	for (int i = 0; i < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static int gen(int argc, char **argv)
{
	const char *dev = argv[2];
	struct tmpl t;
	memset(&t, 0, sizeof(t));
	uint8_t smac[6], dmac[6];
	uint32_t sip, dip;
	uint16_t sport = 40000, dport = 9000;
	if (parse_mac(opt(argc, argv, "--src-mac", NULL), smac) || parse_mac(opt(argc, argv, "--dst-mac", NULL), dmac) ||
	    parse_ipport(opt(argc, argv, "--src", NULL), &sip, &sport) ||
	    parse_ipport(opt(argc, argv, "--dst", NULL), &dip, &dport))
		die("bad address", "");
	int size = atoi(opt(argc, argv, "--size", "64"));
	double warm = atof(opt(argc, argv, "--warmup", "1")), secs = atof(opt(argc, argv, "--seconds", "2"));
	if (size < 60 || size > TMPL_MAX)
		die("--size wants 60..2048", "");
	char *rend;
	const char *rate_s = opt(argc, argv, "--rate", "0");
	double rate = strtod(rate_s, &rend) * 1e6; /* frames/s; 0: not paced */
	if (rend == rate_s || *rend != '\0' || !(rate >= 0 && rate <= 1e9) || (rate > 0 && rate < 1))
		die("--rate wants Mpps, at least 0.000001 (0: as fast as possible), not ", rate_s);
	t.len = (uint32_t)size;
	uint8_t *f = t.data;
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	uint8_t *ip = f + 14;
	ip[0] = 0x45;
	uint16_t tot = htons((uint16_t)(size - 14));
	memcpy(ip + 2, &tot, 2);
	ip[6] = 0x40;
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &sip, 4);
	memcpy(ip + 16, &dip, 4);
	uint16_t ck = htons(csum16(ip, 20));
	memcpy(ip + 10, &ck, 2);
	uint8_t *udp = f + 34;
	uint16_t sp = htons(sport), dp = htons(dport), ul = htons((uint16_t)(size - 34));
	memcpy(udp, &sp, 2);
	memcpy(udp + 2, &dp, 2);
	memcpy(udp + 4, &ul, 2);

	struct bpf_object *obj = open_obj();
	if (bpf_object__load(obj) != 0)
		die("cannot load xdptool.bpf.o", "");
	uint32_t k = 0;
	if (bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "tmpl"), &k, &t, 0) != 0)
		die("cannot write the template", "");
	int pace_fd = bpf_object__find_map_fd_by_name(obj, "pace");
	struct pace pc = { 0 };
	if (rate > 0) {
		pc.interval_ps = (uint64_t)(1e12 / rate + 0.5);
		pc.burst_ps = 64 * pc.interval_ps; /* at most a batch late */
	}
	if (bpf_map_update_elem(pace_fd, &k, &pc, 0) != 0)
		die("cannot write the pacing", "");
	int prog = bpf_program__fd(bpf_object__find_program_by_name(obj, "xdp_gen"));
	int ifindex = (int)if_nametoindex(dev);
	if (ifindex == 0)
		die("no device ", dev);
	struct xdp_md ctx = { .data_end = (uint32_t)size, .ingress_ifindex = (uint32_t)ifindex };
	/* Unpaced: runs of 2^16 frames, as always. Paced: runs sized to last
	 * ~200 ms (a paced run mostly drops, fast), fitted as they go. */
	uint32_t repeat = 1u << 16;
	uint64_t measured = 0;
	double t0 = now_s(), tm = t0 + warm, t_end = tm + secs, tm_real = 0, busy = 0;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	while (!stop) {
		double now = now_s();
		if (now >= t_end)
			break;
		if (tm_real == 0 && now >= tm) {
			tm_real = now;
			if (bpf_map_lookup_elem(pace_fd, &k, &pc) != 0)
				die("cannot read the count", "");
			measured = pc.sent;
		}
		LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = t.data, .data_size_in = (uint32_t)size,
			    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = repeat,
			    .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = 64);
		if (bpf_prog_test_run_opts(prog, &o) != 0)
			die("live frames run: ", strerror(errno));
		/* o.duration: the mean ns per run of the program, on the CPU */
		if (tm_real != 0)
			busy += (double)o.duration * repeat * 1e-9;
		double took = now_s() - now;
		if (rate > 0 && took > 0) {
			double want = repeat * (took < 0.05 ? 4 : 0.2 / took);
			repeat = want < 4096 ? 4096 : want > (1u << 26) ? 1u << 26 : (uint32_t)want;
		}
	}
	double el = now_s() - tm_real;
	if (bpf_map_lookup_elem(pace_fd, &k, &pc) != 0)
		die("cannot read the count", "");
	uint64_t n = pc.sent - measured;
	printf("RESULT offered_mpps=%.3f frames=%llu seconds=%.3f duty=%.2f sent=%llu\n",
	       el > 0 ? n / el / 1e6 : 0, (unsigned long long)n, el, el > 0 ? busy / el : 0,
	       (unsigned long long)pc.sent);
	return 0;
}

static int sink(int argc, char **argv)
{
	const char *dev = argv[2];
	double warm = atof(opt(argc, argv, "--warmup", "1")), secs = atof(opt(argc, argv, "--seconds", "2"));
	struct bpf_object *obj = open_obj();
	if (bpf_object__load(obj) != 0)
		die("cannot load xdptool.bpf.o", "");
	int ifindex = (int)if_nametoindex(dev);
	if (ifindex == 0)
		die("no device ", dev);
	struct bpf_link *l = bpf_program__attach_xdp(bpf_object__find_program_by_name(obj, "xdp_sink"),
						     ifindex);
	if (l == NULL)
		die("cannot attach to ", dev);
	int fd = bpf_object__find_map_fd_by_name(obj, "counts");
	fprintf(stderr, "xdptool sink: ready on %s\n", dev);
	signal(SIGTERM, on_signal);
	struct counts a, b;
	double t0 = now_s();
	while (!stop && now_s() < t0 + warm)
		usleep(10000);
	sum_counts(fd, &a);
	double t1 = now_s();
	while (!stop && now_s() < t1 + secs)
		usleep(10000);
	sum_counts(fd, &b);
	double el = now_s() - t1;
	printf("RESULT mpps=%.3f gbit=%.3f frames=%llu seconds=%.3f\n", (b.pkts - a.pkts) / el / 1e6,
	       (b.bytes - a.bytes) * 8 / el / 1e9, (unsigned long long)(b.pkts - a.pkts), el);
	bpf_link__destroy(l);
	return 0;
}

static int dev_mac(const char *dev, uint8_t mac[6])
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	int rc = ioctl(s, SIOCGIFHWADDR, &ifr);
	close(s);
	if (rc == 0)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	return rc;
}

static int fwd(int argc, char **argv)
{
	const char *in = argv[2], *outdev = argv[3];
	struct fwd_cfg c;
	memset(&c, 0, sizeof(c));
	uint32_t sip;
	uint16_t unused = 0;
	if (parse_ipport(opt(argc, argv, "--my", NULL), &c.my_ip, &c.my_port) ||
	    parse_ipport(opt(argc, argv, "--from", NULL), &sip, &unused) ||
	    parse_ipport(opt(argc, argv, "--to", NULL), &c.out_dip, &c.out_dport) ||
	    parse_mac(opt(argc, argv, "--to-mac", NULL), c.out_dmac))
		die("bad address", "");
	c.out_sip = sip;
	c.out_sport = htons(c.my_port);
	c.out_dport = htons(c.out_dport);
	c.my_port = htons(c.my_port);
	if (dev_mac(outdev, c.out_smac) != 0)
		die("cannot read the MAC of ", outdev);
	double secs = atof(opt(argc, argv, "--seconds", "10"));
	struct bpf_object *obj = open_obj();
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj) {
		if (strstr(bpf_map__name(m), ".rodata") != NULL) {
			size_t sz;
			const void *v = bpf_map__initial_value(m, &sz);
			char *nv = malloc(sz);
			memcpy(nv, v, sz);
			memcpy(nv, &c, sizeof(c));   /* cfg is the only .rodata variable */
			bpf_map__set_initial_value(m, nv, sz);
			free(nv);
		}
	}
	if (bpf_object__load(obj) != 0)
		die("cannot load xdptool.bpf.o", "");
	uint32_t k = 0, oi = if_nametoindex(outdev), ii = if_nametoindex(in);
	if (oi == 0 || ii == 0)
		die("no such device", "");
	if (bpf_map_update_elem(bpf_object__find_map_fd_by_name(obj, "out"), &k, &oi, 0) != 0)
		die("devmap", "");
	struct bpf_link *l = bpf_program__attach_xdp(bpf_object__find_program_by_name(obj, "xdp_fwd"),
						     (int)ii);
	if (l == NULL)
		die("cannot attach to ", in);
	fprintf(stderr, "xdptool fwd: ready, %s -> %s\n", in, outdev);
	signal(SIGTERM, on_signal);
	double t0 = now_s();
	while (!stop && now_s() < t0 + secs)
		usleep(20000);
	bpf_link__destroy(l);
	return 0;
}

static int pass(int argc, char **argv)
{
	const char *dev = argv[2];
	double secs = atof(opt(argc, argv, "--seconds", "10"));
	struct bpf_object *obj = open_obj();
	if (bpf_object__load(obj) != 0)
		die("cannot load xdptool.bpf.o", "");
	int ifindex = (int)if_nametoindex(dev);
	struct bpf_link *l = ifindex ? bpf_program__attach_xdp(bpf_object__find_program_by_name(obj, "xdp_pass"),
								ifindex) : NULL;
	if (l == NULL)
		die("cannot attach to ", dev);
	fprintf(stderr, "xdptool pass: ready on %s\n", dev);
	signal(SIGTERM, on_signal);
	double t0 = now_s();
	while (!stop && now_s() < t0 + secs)
		usleep(20000);
	bpf_link__destroy(l);
	return 0;
}

int main(int argc, char **argv)
{
	libbpf_set_print(NULL);
	if (argc < 3) {
		fprintf(stderr, "usage: xdptool gen|sink DEV ... | fwd IN OUT ...\n");
		return 2;
	}
	if (!strcmp(argv[1], "gen"))
		return gen(argc, argv);
	if (!strcmp(argv[1], "sink"))
		return sink(argc, argv);
	if (!strcmp(argv[1], "fwd") && argc >= 4)
		return fwd(argc, argv);
	if (!strcmp(argv[1], "pass"))
		return pass(argc, argv);
	fprintf(stderr, "xdptool: unknown command %s\n", argv[1]);
	return 2;
}
