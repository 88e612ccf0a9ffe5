/*
 * cmd_lb.c — `innet lb`: the host side of the load balancer
 * (src/lbhost/, docs/lb.md, docs/man/innet-lb.md).
 *
 *   innet lb backend --bind IP:PORT [--service-us N] ...   a DNS unit of chosen speed
 *   innet lb load --target IP:PORT --rate R ...            open-loop DNS load, percentiles
 *   innet lb agent --switch IP[:PORT] --server ID ...      probe a unit, report to the switch
 *   innet lb keygen FILE [--force]                         a fresh report key (mode 0600)
 *
 * Exit status: 0 ok, 1 runtime failure, 2 usage error (message on stderr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "innet/lb.h"
#include "innet/parse.h"
#include "lbhost/lbhost.h"
#include "cli/cmds.h"

static volatile sig_atomic_t lb_stop;

static void on_signal(int sig)
{
	(void)sig;
	lb_stop = 1;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

__attribute__((format(printf, 2, 3)))
static int usage_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "innet lb %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(innet lb %s --help for the options)\n", cmd);
	return 2;
}

static int real(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	if (!s || !*s)
		return -EINVAL;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---------------------------------------------------------------------- */

static void backend_usage(FILE *f)
{
	fprintf(f,
		"usage: innet lb backend --bind IP:PORT [options]\n\n"
		"A UDP DNS service standing in for a processing unit: an A record for names in\n"
		"its zone, NXDOMAIN otherwise, FORMERR for malformed queries.\n\n"
		"  --bind IP:PORT          listen address (required)\n"
		"  --service-us N          service time per request on one server with a\n"
		"                          bounded FIFO queue (capacity 1e6/N per second);\n"
		"                          0 (default) = fast mode\n"
		"  --queue N               requests waiting at most, more are dropped (256)\n"
		"  --busy-file PATH        while PATH exists, serve with --busy-service-us\n"
		"  --busy-service-us N     service time while busy (default 10x --service-us, or 1000)\n"
		"  --threads N             fast mode threads, SO_REUSEPORT (1)\n"
		"  --zone NAME             the zone (lb.test)\n"
		"  --answer IP             the A record's address (192.0.2.1): names the unit\n"
		"  --ttl N                 the A record's TTL (60)\n"
		"  --duration SEC          exit after SEC seconds (default: until SIGTERM)\n\n"
		"Prints \"ready\" on stderr once bound; counters on stdout at exit.\n");
}

static int lb_backend(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "bind", required_argument, NULL, 'b' },        { "service-us", required_argument, NULL, 's' },
		{ "queue", required_argument, NULL, 'q' },       { "busy-file", required_argument, NULL, 'f' },
		{ "busy-service-us", required_argument, NULL, 'B' }, { "threads", required_argument, NULL, 'T' },
		{ "zone", required_argument, NULL, 'z' },        { "answer", required_argument, NULL, 'a' },
		{ "ttl", required_argument, NULL, 't' },         { "duration", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },              { NULL, 0, NULL, 0 },
	};
	struct lbh_backend_cfg c;
	lbh_backend_defaults(&c);
	bool have_bind = false, have_busy_us = false;
	static char zone[256];
	uint64_t v;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'b':
			if (lbh_parse_addr(optarg, 0, &c.bind))
				return usage_err("backend", "bad --bind '%s' (IP:PORT)", optarg);
			have_bind = true;
			break;
		case 's':
			if (innet_parse_u64(optarg, 0, 10000000, &v))
				return usage_err("backend", "bad --service-us '%s' (0..10000000)", optarg);
			c.service_us = (uint32_t)v;
			break;
		case 'q':
			if (innet_parse_u64(optarg, 1, 1000000, &v))
				return usage_err("backend", "bad --queue '%s' (1..1000000)", optarg);
			c.queue = (uint32_t)v;
			break;
		case 'f': c.busy_file = optarg; break;
		case 'B':
			if (innet_parse_u64(optarg, 0, 10000000, &v))
				return usage_err("backend", "bad --busy-service-us '%s' (0..10000000)", optarg);
			c.busy_service_us = (uint32_t)v;
			have_busy_us = true;
			break;
		case 'T':
			if (innet_parse_u64(optarg, 1, LBH_MAX_THREADS, &v))
				return usage_err("backend", "bad --threads '%s' (1..16)", optarg);
			c.threads = (uint32_t)v;
			break;
		case 'z': {
			size_t n = strlen(optarg);
			if (n >= sizeof(zone))
				return usage_err("backend", "bad --zone '%s'", optarg);
			for (size_t i = 0; i <= n; i++)
				zone[i] = (char)(optarg[i] >= 'A' && optarg[i] <= 'Z' ? optarg[i] + 32 : optarg[i]);
			if (n && zone[n - 1] == '.')
				zone[n - 1] = '\0';
			c.zone = zone;
			break;
		}
		case 'a':
			if (innet_parse_ip(optarg, &c.answer) || c.answer == 0)
				return usage_err("backend", "bad --answer '%s' (IPv4, not 0.0.0.0)", optarg);
			break;
		case 't':
			if (innet_parse_u64(optarg, 0, 0x7fffffff, &v))
				return usage_err("backend", "bad --ttl '%s'", optarg);
			c.ttl = (uint32_t)v;
			break;
		case 'd':
			if (real(optarg, 0.001, 1e7, &c.duration_s))
				return usage_err("backend", "bad --duration '%s' (seconds)", optarg);
			break;
		case 'h': backend_usage(stdout); return 0;
		default: backend_usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return usage_err("backend", "unexpected argument '%s'", argv[optind]);
	if (!have_bind)
		return usage_err("backend", "--bind IP:PORT is required");
	if (c.busy_file && !have_busy_us)
		c.busy_service_us = c.service_us ? c.service_us * 10 : 1000;
	catch_signals();
	struct lbh_backend_stats st;
	char err[256] = "";
	int rc = lbh_backend_run(&c, &lb_stop, &st, stderr, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "innet lb backend: %s\n", err);
		return 1;
	}
	printf("backend rx=%lu answered=%lu nxdomain=%lu formerr=%lu notimp=%lu drop_malformed=%lu "
	       "drop_queue_full=%lu tx_errors=%lu max_queue=%lu\n",
	       (unsigned long)st.rx, (unsigned long)st.answered, (unsigned long)st.nxdomain,
	       (unsigned long)st.formerr, (unsigned long)st.notimp, (unsigned long)st.drop_malformed,
	       (unsigned long)st.drop_queue_full, (unsigned long)st.tx_errors, (unsigned long)st.max_queue);
	return 0;
}

/* ---------------------------------------------------------------------- */

static void load_usage(FILE *f)
{
	fprintf(f,
		"usage: innet lb load --target IP:PORT --rate QPS [options]\n\n"
		"Open-loop DNS load: queries on a fixed schedule, latency measured from each\n"
		"query's scheduled send time (no coordinated omission).\n\n"
		"  --target IP:PORT   where to send (a VIP, or a server); port default 53\n"
		"  --rate QPS         queries per second, all threads together (1000)\n"
		"  --duration SEC     measured sending time (5)\n"
		"  --warmup SEC       send at the rate this long first, not measured (0)\n"
		"  --threads N        sender/receiver threads (1)\n"
		"  --flows N          UDP sockets (flows) per thread (16)\n"
		"  --flow-ms MS       replace each flow's socket (new source port) after MS;\n"
		"                     0 = keep (default 0)\n"
		"  --timeout-ms MS    later replies count as lost (1000)\n"
		"  --bind IP          source address\n"
		"  --qname NAME       the name to ask for (repeat to cycle, up to 16; www.lb.test)\n"
		"  --report-ms MS     a progress line on stderr every MS (per-window counts and\n"
		"                     replies per answer address)\n"
		"  --json             the summary as one JSON object\n\n"
		"Exit status 0 when it ran (losses are reported, not errors).\n");
}

static int lb_load(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "target", required_argument, NULL, 'T' },   { "rate", required_argument, NULL, 'r' },
		{ "duration", required_argument, NULL, 'd' }, { "threads", required_argument, NULL, 't' },
		{ "flows", required_argument, NULL, 'f' },    { "flow-ms", required_argument, NULL, 'F' },
		{ "timeout-ms", required_argument, NULL, 'w' }, { "bind", required_argument, NULL, 'b' },
		{ "qname", required_argument, NULL, 'q' },    { "report-ms", required_argument, NULL, 'R' },
		{ "json", no_argument, NULL, 'j' },           { "warmup", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct lbh_load_cfg c;
	lbh_load_defaults(&c);
	bool have_target = false, json = false;
	uint64_t v;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'T':
			if (lbh_parse_addr(optarg, 53, &c.target))
				return usage_err("load", "bad --target '%s' (IP[:PORT])", optarg);
			have_target = true;
			break;
		case 'r':
			if (real(optarg, 0.1, 1e7, &c.rate))
				return usage_err("load", "bad --rate '%s' (0.1..1e7 queries/s)", optarg);
			break;
		case 'd':
			if (real(optarg, 0.01, 86400, &c.duration_s))
				return usage_err("load", "bad --duration '%s' (seconds)", optarg);
			break;
		case 't':
			if (innet_parse_u64(optarg, 1, LBH_MAX_THREADS, &v))
				return usage_err("load", "bad --threads '%s' (1..16)", optarg);
			c.threads = (uint32_t)v;
			break;
		case 'f':
			if (innet_parse_u64(optarg, 1, 1024, &v))
				return usage_err("load", "bad --flows '%s' (1..1024)", optarg);
			c.flows = (uint32_t)v;
			break;
		case 'F':
			if (innet_parse_u64(optarg, 0, 3600000, &v))
				return usage_err("load", "bad --flow-ms '%s'", optarg);
			c.flow_ms = (uint32_t)v;
			break;
		case 'w':
			if (innet_parse_u64(optarg, 1, 600000, &v))
				return usage_err("load", "bad --timeout-ms '%s' (1..600000)", optarg);
			c.timeout_ms = (uint32_t)v;
			break;
		case 'b':
			if (innet_parse_ip(optarg, &c.bind_ip))
				return usage_err("load", "bad --bind '%s' (IPv4)", optarg);
			break;
		case 'q':
			if (c.nqnames >= LBH_MAX_QNAMES)
				return usage_err("load", "too many --qname (max 16) at '%s'", optarg);
			if (!*optarg || strlen(optarg) > 253)
				return usage_err("load", "bad --qname '%s'", optarg);
			c.qnames[c.nqnames++] = optarg;
			break;
		case 'R':
			if (innet_parse_u64(optarg, 10, 3600000, &v))
				return usage_err("load", "bad --report-ms '%s' (>= 10)", optarg);
			c.report_ms = (uint32_t)v;
			break;
		case 'W':
			if (real(optarg, 0, 3600, &c.warmup_s))
				return usage_err("load", "bad --warmup '%s' (seconds)", optarg);
			break;
		case 'j': json = true; break;
		case 'h': load_usage(stdout); return 0;
		default: load_usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return usage_err("load", "unexpected argument '%s'", argv[optind]);
	if (!have_target)
		return usage_err("load", "--target IP:PORT is required");
	if (c.nqnames == 0)
		c.qnames[c.nqnames++] = "www.lb.test";
	catch_signals();
	struct lbh_load_result r;
	char err[256] = "";
	int rc = lbh_load_run(&c, &lb_stop, &r, stderr, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "innet lb load: %s\n", err);
		lbh_load_result_fini(&r);
		return 1;
	}
	lbh_load_print(&c, &r, json, stdout);
	lbh_load_result_fini(&r);
	return 0;
}

/* ---------------------------------------------------------------------- */

static void agent_usage(FILE *f)
{
	fprintf(f,
		"usage: innet lb agent --switch IP[:PORT] --server ID --unit ID --probe IP:PORT\n"
		"                      --key-file FILE [options]\n\n"
		"Runs beside one processing unit: probes it with DNS queries, keeps an EWMA of\n"
		"the latency, and reports to the switch (sealed, sequence-numbered) when the\n"
		"unit crosses its threshold, plus a heartbeat.\n\n"
		"  --switch IP[:PORT]   the switch's report port (default port %u)\n"
		"  --server ID          server id (0..65535), as in the switch's pool\n"
		"  --unit ID            unit id within the server (0..65535)\n"
		"  --kind cpu|accel     the unit's kind (cpu)\n"
		"  --probe IP:PORT      the unit's DNS service\n"
		"  --key-file FILE      the shared report key (innet lb keygen)\n"
		"  --bind IP            source address of probes and reports\n"
		"  --interval-ms MS     probe period (20)\n"
		"  --burst N            probes per period, one after the other; the sample is\n"
		"                       their median (3)\n"
		"  --heartbeat-ms MS    report at least this often (500)\n"
		"  --busy-us US         busy when the latency EWMA exceeds this (2000)\n"
		"  --idle-us US         not busy again below this (1000; < --busy-us)\n"
		"  --probe-timeout-ms MS  an unanswered probe counts as this latency (200)\n"
		"  --alpha A            EWMA weight of a new sample, 0 < A <= 1 (0.3)\n"
		"  --window N           samples in the windowed p99 (64)\n"
		"  --pid PID            also measure this process's CPU use (/proc/PID/stat)\n"
		"  --busy-cpu PCT       with --pid: busy above PCT %% CPU too\n"
		"  --qname NAME         what the probes ask for (probe.lb.test)\n"
		"  --duration SEC       exit after SEC seconds (default: until SIGTERM)\n\n"
		"Prints \"ready\" on stderr, a line per state change; counters on stdout at exit.\n",
		INNET_LB_REPORT_UDP);
}

static int lb_agent(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "switch", required_argument, NULL, 'S' },     { "server", required_argument, NULL, 's' },
		{ "unit", required_argument, NULL, 'u' },       { "kind", required_argument, NULL, 'k' },
		{ "probe", required_argument, NULL, 'p' },      { "key-file", required_argument, NULL, 'K' },
		{ "bind", required_argument, NULL, 'b' },       { "interval-ms", required_argument, NULL, 'i' },
		{ "heartbeat-ms", required_argument, NULL, 'H' }, { "busy-us", required_argument, NULL, 'B' },
		{ "idle-us", required_argument, NULL, 'I' },    { "probe-timeout-ms", required_argument, NULL, 'w' },
		{ "alpha", required_argument, NULL, 'a' },      { "window", required_argument, NULL, 'W' },
		{ "pid", required_argument, NULL, 'P' },        { "busy-cpu", required_argument, NULL, 'C' },
		{ "qname", required_argument, NULL, 'q' },      { "duration", required_argument, NULL, 'd' },
		{ "burst", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },             { NULL, 0, NULL, 0 },
	};
	struct lbh_agent_cfg c;
	lbh_agent_defaults(&c);
	bool have_sw = false, have_server = false, have_unit = false, have_probe = false;
	const char *key_file = NULL;
	uint64_t v;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'S':
			if (lbh_parse_addr(optarg, INNET_LB_REPORT_UDP, &c.sw))
				return usage_err("agent", "bad --switch '%s' (IP[:PORT])", optarg);
			have_sw = true;
			break;
		case 's':
			if (innet_parse_u64(optarg, 0, 65535, &v))
				return usage_err("agent", "bad --server '%s' (0..65535)", optarg);
			c.server = (uint16_t)v;
			have_server = true;
			break;
		case 'u':
			if (innet_parse_u64(optarg, 0, 65535, &v))
				return usage_err("agent", "bad --unit '%s' (0..65535)", optarg);
			c.unit = (uint16_t)v;
			have_unit = true;
			break;
		case 'k':
			if (!strcmp(optarg, "cpu"))
				c.kind = INNET_LB_KIND_CPU;
			else if (!strcmp(optarg, "accel") || !strcmp(optarg, "accelerator"))
				c.kind = INNET_LB_KIND_ACCEL;
			else
				return usage_err("agent", "bad --kind '%s' (cpu or accel)", optarg);
			break;
		case 'p':
			if (lbh_parse_addr(optarg, 0, &c.probe))
				return usage_err("agent", "bad --probe '%s' (IP:PORT)", optarg);
			have_probe = true;
			break;
		case 'K': key_file = optarg; break;
		case 'b':
			if (innet_parse_ip(optarg, &c.bind_ip))
				return usage_err("agent", "bad --bind '%s' (IPv4)", optarg);
			break;
		case 'i':
			if (innet_parse_u64(optarg, 1, 600000, &v))
				return usage_err("agent", "bad --interval-ms '%s' (1..600000)", optarg);
			c.interval_ms = (uint32_t)v;
			break;
		case 'H':
			if (innet_parse_u64(optarg, 1, 3600000, &v))
				return usage_err("agent", "bad --heartbeat-ms '%s' (1..3600000)", optarg);
			c.heartbeat_ms = (uint32_t)v;
			break;
		case 'B':
			if (innet_parse_u64(optarg, 1, 100000000, &v))
				return usage_err("agent", "bad --busy-us '%s'", optarg);
			c.busy_us = (uint32_t)v;
			break;
		case 'I':
			if (innet_parse_u64(optarg, 0, 100000000, &v))
				return usage_err("agent", "bad --idle-us '%s'", optarg);
			c.idle_us = (uint32_t)v;
			break;
		case 'w':
			if (innet_parse_u64(optarg, 1, 600000, &v))
				return usage_err("agent", "bad --probe-timeout-ms '%s' (1..600000)", optarg);
			c.probe_timeout_ms = (uint32_t)v;
			break;
		case 'a':
			if (real(optarg, 1e-6, 1, &c.alpha))
				return usage_err("agent", "bad --alpha '%s' (0 < A <= 1)", optarg);
			break;
		case 'n':
			if (innet_parse_u64(optarg, 1, LBH_AGENT_MAX_BURST, &v))
				return usage_err("agent", "bad --burst '%s' (1..15)", optarg);
			c.burst = (uint32_t)v;
			break;
		case 'W':
			if (innet_parse_u64(optarg, 1, 1024, &v))
				return usage_err("agent", "bad --window '%s' (1..1024)", optarg);
			c.window = (uint32_t)v;
			break;
		case 'P':
			if (innet_parse_u64(optarg, 1, 0x7fffffff, &v))
				return usage_err("agent", "bad --pid '%s'", optarg);
			c.pid = (int)v;
			break;
		case 'C':
			if (innet_parse_u64(optarg, 1, 100, &v))
				return usage_err("agent", "bad --busy-cpu '%s' (1..100)", optarg);
			c.busy_cpu_pct = (uint32_t)v;
			break;
		case 'q':
			if (!*optarg || strlen(optarg) > 253)
				return usage_err("agent", "bad --qname '%s'", optarg);
			c.qname = optarg;
			break;
		case 'd':
			if (real(optarg, 0.001, 1e7, &c.duration_s))
				return usage_err("agent", "bad --duration '%s' (seconds)", optarg);
			break;
		case 'h': agent_usage(stdout); return 0;
		default: agent_usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return usage_err("agent", "unexpected argument '%s'", argv[optind]);
	if (!have_sw || !have_server || !have_unit || !have_probe || !key_file)
		return usage_err("agent", "--switch, --server, --unit, --probe and --key-file are required");
	if (c.idle_us >= c.busy_us)
		return usage_err("agent", "--idle-us must be below --busy-us (hysteresis)");
	if (c.busy_cpu_pct && !c.pid)
		return usage_err("agent", "--busy-cpu needs --pid");
	char err[256] = "";
	int rc = innet_lb_key_load(&c.key, key_file, err, sizeof(err));
	if (rc) {
		if (err[0])
			fprintf(stderr, "innet lb agent: %s\n", err);
		else
			fprintf(stderr, "innet lb agent: key file %s: %s\n", key_file, strerror(-rc));
		return 1;
	}
	catch_signals();
	struct lbh_agent_stats st;
	rc = lbh_agent_run(&c, &lb_stop, &st, stderr, err, sizeof(err));
	innet_lb_key_wipe(&c.key);
	if (rc) {
		fprintf(stderr, "innet lb agent: %s\n", err);
		return 1;
	}
	printf("agent probes=%lu probe_timeouts=%lu reports=%lu threshold_reports=%lu heartbeats=%lu "
	       "send_errors=%lu busy_transitions=%lu last_seq=%lu ewma_us=%u p99_us=%u busy=%d\n",
	       (unsigned long)st.probes, (unsigned long)st.probe_timeouts, (unsigned long)st.reports,
	       (unsigned long)st.threshold_reports, (unsigned long)st.heartbeats, (unsigned long)st.send_errors,
	       (unsigned long)st.busy_transitions, (unsigned long)st.last_seq, st.ewma_us, st.p99_us, st.busy);
	return 0;
}

/* ---------------------------------------------------------------------- */

static int lb_keygen(int argc, char **argv)
{
	const char *path = NULL;
	bool force = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			printf("usage: innet lb keygen FILE [--force]\n\n"
			       "Write a fresh 32-byte report key (64 hex characters) from /dev/urandom\n"
			       "to FILE, mode 0600. An existing FILE is kept unless --force.\n");
			return 0;
		} else if (argv[i][0] == '-')
			return usage_err("keygen", "unknown option '%s'", argv[i]);
		else if (path)
			return usage_err("keygen", "unexpected argument '%s'", argv[i]);
		else
			path = argv[i];
	}
	if (!path)
		return usage_err("keygen", "FILE is required");
	uint8_t raw[INNET_LB_KEY_LEN];
	int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rfd < 0 || read(rfd, raw, sizeof(raw)) != (ssize_t)sizeof(raw)) {
		fprintf(stderr, "innet lb keygen: /dev/urandom: %s\n", strerror(errno));
		if (rfd >= 0)
			close(rfd);
		return 1;
	}
	close(rfd);
	char hex[2 * INNET_LB_KEY_LEN + 2];
	for (unsigned i = 0; i < INNET_LB_KEY_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	hex[2 * INNET_LB_KEY_LEN] = '\n';
	hex[2 * INNET_LB_KEY_LEN + 1] = '\0';
	memset(raw, 0, sizeof(raw));
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0600);
	if (fd < 0) {
		fprintf(stderr, "innet lb keygen: %s: %s%s\n", path, strerror(errno),
			errno == EEXIST ? " (--force replaces it)" : "");
		return 1;
	}
	fchmod(fd, 0600);
	size_t n = strlen(hex);
	ssize_t w = write(fd, hex, n);
	memset(hex, 0, sizeof(hex));
	if (w != (ssize_t)n || close(fd) != 0) {
		fprintf(stderr, "innet lb keygen: writing %s failed\n", path);
		return 1;
	}
	return 0;
}

/* ---------------------------------------------------------------------- */

static void lb_usage(FILE *f)
{
	fprintf(f, "usage: innet lb COMMAND [OPTIONS]\n\n"
		   "Host side of the in-network load balancer (the switch program is \"lb\").\n\n"
		   "commands:\n"
		   "  backend   a UDP DNS service with a chosen capacity (a fast or slow unit)\n"
		   "  load      open-loop DNS load generator with latency percentiles\n"
		   "  agent     probe a unit and report its load to the switch (sealed reports)\n"
		   "  keygen    write a fresh report key file (mode 0600)\n\n"
		   "'innet lb COMMAND --help' for its options; docs/man/innet-lb.md.\n");
}

int cmd_lb(int argc, char **argv)
{
	if (argc < 2) {
		lb_usage(stderr);
		return 2;
	}
	const char *c = argv[1];
	if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
		lb_usage(stdout);
		return 0;
	}
	if (!strcmp(c, "backend"))
		return lb_backend(argc - 1, argv + 1);
	if (!strcmp(c, "load"))
		return lb_load(argc - 1, argv + 1);
	if (!strcmp(c, "agent"))
		return lb_agent(argc - 1, argv + 1);
	if (!strcmp(c, "keygen"))
		return lb_keygen(argc - 1, argv + 1);
	fprintf(stderr, "innet lb: unknown command '%s'\n\n", c);
	lb_usage(stderr);
	return 2;
}
