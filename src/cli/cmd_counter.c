/*
 * cmd_counter.c — `innet counter`: the host side of the example counter
 * program (src/programs/counter.c; wire format in include/innet/wire.h).
 *
 *   innet counter --to IP[:UDP] inc INDEX [DELTA]    one increment, prints the new value
 *   innet counter --to IP[:UDP] read INDEX           prints the value
 *   innet counter --to IP[:UDP] load INDEX --count N --threads T
 *                                                    N increments from T threads (one UDP
 *                                                    flow each, closed loop), then checks
 *                                                    the counter moved by exactly the
 *                                                    acknowledged increments
 *
 * Increments are not idempotent, so a request whose reply times out is not
 * retried; it is reported as "unknown" (it may or may not have been applied).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "innet/parse.h"
#include "innet/switch.h"
#include "innet/wire.h"
#include "cli/cmds.h"

struct counter_msg {
	struct innet_hdr h;
	struct innet_counter_hdr c;
} __attribute__((packed));

struct client {
	int fd;
	struct sockaddr_in to;
	int timeout_ms;
};

static int client_open(struct client *cl, const struct sockaddr_in *to, uint32_t from_ip, int timeout_ms)
{
	cl->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (cl->fd < 0)
		return -errno;
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(from_ip) };
	if (bind(cl->fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		int e = errno;
		close(cl->fd);
		return -e;
	}
	cl->to = *to;
	cl->timeout_ms = timeout_ms;
	return 0;
}

/* One request/reply. 0 with *value, -ETIMEDOUT, -EPROTO (bad status in *status). */
static int client_call(struct client *cl, uint8_t op, uint32_t index, uint64_t arg, uint64_t *value,
		       uint8_t *status)
{
	struct counter_msg m = {
		.h = { .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_COUNTER },
		.c = { .op = op, .index = htonl(index), .value = htobe64(arg) },
	};
	if (sendto(cl->fd, &m, sizeof(m), 0, (struct sockaddr *)&cl->to, sizeof(cl->to)) != sizeof(m))
		return -errno;
	uint64_t deadline = innet_now_ns() + (uint64_t)cl->timeout_ms * 1000000ull;
	for (;;) {
		uint64_t now = innet_now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = cl->fd, .events = POLLIN };
		if (poll(&pfd, 1, (int)((deadline - now) / 1000000ull) + 1) <= 0)
			continue;
		struct counter_msg r;
		ssize_t n = recv(cl->fd, &r, sizeof(r), MSG_DONTWAIT);
		if (n != sizeof(r) || r.h.magic != INNET_MAGIC || r.c.op != (op | INNET_COUNTER_REPLY) ||
		    ntohl(r.c.index) != index)
			continue; /* not ours (a late reply to an earlier request) */
		*status = r.c.status;
		*value = be64toh(r.c.value);
		return r.c.status == INNET_COUNTER_OK ? 0 : -EPROTO;
	}
}

struct load_arg {
	struct sockaddr_in to;
	uint32_t from_ip;
	uint32_t index;
	uint64_t n;
	int timeout_ms;
	uint64_t acked, unknown, errors;
	int open_rc;
};

static void *load_main(void *p)
{
	struct load_arg *a = p;
	struct client cl;
	a->open_rc = client_open(&cl, &a->to, a->from_ip, a->timeout_ms);
	if (a->open_rc != 0)
		return NULL;
	for (uint64_t i = 0; i < a->n; i++) {
		uint64_t v;
		uint8_t st;
		int rc = client_call(&cl, INNET_COUNTER_INC, a->index, 1, &v, &st);
		if (rc == 0)
			a->acked++;
		else if (rc == -ETIMEDOUT)
			a->unknown++;
		else
			a->errors++;
	}
	close(cl.fd);
	return NULL;
}

static const char *status_name(uint8_t st)
{
	switch (st) {
	case INNET_COUNTER_OK: return "ok";
	case INNET_COUNTER_BAD_INDEX: return "index out of range";
	case INNET_COUNTER_BAD_OP: return "unknown operation";
	}
	return "unknown status";
}

static void counter_usage(FILE *f)
{
	fprintf(f, "usage: innet counter --to IP[:UDP] [--from IP] [--timeout MS] inc INDEX [DELTA]\n"
		   "       innet counter --to IP[:UDP] [--from IP] read INDEX\n"
		   "       innet counter --to IP[:UDP] [--from IP] load INDEX [--count N] [--threads T]\n\n"
		   "Client of the example counter program (default UDP port 9100).\n"
		   "Exit status: 0 ok, 1 error or timeout (load: a lost increment), 2 usage.\n");
}

int cmd_counter(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "to", required_argument, NULL, 't' },      { "from", required_argument, NULL, 'f' },
		{ "timeout", required_argument, NULL, 'W' }, { "count", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 'T' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(9100) };
	bool have_to = false;
	uint32_t from_ip = INADDR_LOOPBACK;
	uint64_t timeout_ms = 1000, count = 10000, threads = 4;
	int c;
	char why[192]; /* what is wrong with the command line */
#define BAD(...) do { snprintf(why, sizeof(why), __VA_ARGS__); goto bad; } while (0)
	optind = 1;
	opterr = 0; /* BAD says what is wrong */
	while ((c = getopt_long(argc, argv, "+t:f:W:n:T:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': {
			struct innet_addr a;
			if (innet_parse_addr(optarg, ntohs(to.sin_port), &a) != 0)
				BAD("bad --to '%s' (want IPv4[:UDP], UDP 1..65535)", optarg);
			to.sin_addr.s_addr = htonl(a.ip);
			to.sin_port = htons(a.udp);
			have_to = true;
			break;
		}
		case 'f':
			if (innet_parse_ip(optarg, &from_ip) != 0)
				BAD("bad --from address '%s'", optarg);
			break;
		case 'W':
			if (innet_parse_u64(optarg, 0, 600000, &timeout_ms) != 0 || timeout_ms == 0)
				BAD("--timeout wants 1..600000 ms, not '%s'", optarg);
			break;
		case 'n':
			if (innet_parse_u64(optarg, 0, 100000000, &count) != 0 || count == 0)
				BAD("--count wants 1..100000000, not '%s'", optarg);
			break;
		case 'T':
			if (innet_parse_u64(optarg, 0, 64, &threads) != 0 || threads == 0)
				BAD("--threads wants 1..64, not '%s'", optarg);
			break;
		case 'h': counter_usage(stdout); return 0;
		default: BAD("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	/* Options may also follow the operation (load INDEX --count N). */
	char *pos[3];
	int npos = 0;
	for (int i = optind; i < argc; i++) {
		if (!strcmp(argv[i], "--count") || !strcmp(argv[i], "--threads")) {
			if (i + 1 >= argc)
				BAD("%s needs a value", argv[i]);
			bool is_count = argv[i][2] == 'c';
			uint64_t *dst = is_count ? &count : &threads;
			if (innet_parse_u64(argv[i + 1], 0, is_count ? 100000000 : 64, dst) != 0 || *dst == 0)
				BAD("%s wants 1..%s, not '%s'", argv[i], is_count ? "100000000" : "64",
				    argv[i + 1]);
			i++;
		} else if (npos < 3) {
			pos[npos++] = argv[i];
		} else {
			BAD("unexpected argument '%s'", argv[i]);
		}
	}
	if (!have_to)
		BAD("%s", "missing --to IP[:UDP] (the switch running the counter program)");
	if (npos == 0)
		BAD("%s", "missing the operation: inc, read or load");
	if (strcmp(pos[0], "inc") && strcmp(pos[0], "read") && strcmp(pos[0], "load"))
		BAD("unknown operation '%s' (inc, read or load)", pos[0]);
	if (npos < 2)
		BAD("%s needs INDEX", pos[0]);
	uint64_t index, delta = 1;
	if (innet_parse_u64(pos[1], 0, UINT32_MAX, &index) != 0)
		BAD("INDEX must be an integer in [0, 4294967295], not '%s'", pos[1]);

	if (!strcmp(pos[0], "inc") || !strcmp(pos[0], "read")) {
		bool inc = pos[0][0] == 'i';
		if (inc && npos == 3 && innet_parse_u64(pos[2], 0, UINT64_MAX, &delta) != 0)
			BAD("DELTA must be an unsigned integer, not '%s'", pos[2]);
		if (!inc && npos != 2)
			BAD("read takes only INDEX, not '%s'", pos[2]);
		struct client cl;
		int rc = client_open(&cl, &to, from_ip, (int)timeout_ms);
		if (rc != 0) {
			fprintf(stderr, "innet counter: %s\n", strerror(-rc));
			return 1;
		}
		uint64_t v = 0;
		uint8_t st = 0;
		rc = client_call(&cl, inc ? INNET_COUNTER_INC : INNET_COUNTER_READ, (uint32_t)index, delta,
				 &v, &st);
		close(cl.fd);
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "innet counter: no reply within %lu ms%s\n", (unsigned long)timeout_ms,
				inc ? " (the increment may or may not have been applied)" : "");
			return 1;
		}
		if (rc != 0) {
			fprintf(stderr, "innet counter: %s\n", rc == -EPROTO ? status_name(st) : strerror(-rc));
			return 1;
		}
		printf("%lu\n", (unsigned long)v);
		return 0;
	}
	if (npos != 2)
		BAD("load takes INDEX [--count N] [--threads T], not '%s'", pos[2]);

	struct client cl;
	uint64_t before = 0, after = 0;
	uint8_t st;
	int rc = client_open(&cl, &to, from_ip, (int)timeout_ms);
	if (rc == 0)
		rc = client_call(&cl, INNET_COUNTER_READ, (uint32_t)index, 0, &before, &st);
	if (rc != 0) {
		fprintf(stderr, "innet counter: cannot read counter %lu: %s\n", (unsigned long)index,
			rc == -EPROTO ? status_name(st) : strerror(-rc));
		if (cl.fd >= 0)
			close(cl.fd);
		return 1;
	}
	struct load_arg *la = calloc(threads, sizeof(*la));
	pthread_t *th = calloc(threads, sizeof(*th));
	if (la == NULL || th == NULL) {
		close(cl.fd);
		free(la);
		free(th);
		return 1;
	}
	uint64_t t0 = innet_now_ns();
	for (uint64_t i = 0; i < threads; i++) {
		la[i] = (struct load_arg){ .to = to, .from_ip = from_ip, .index = (uint32_t)index,
					   .n = count / threads + (i < count % threads),
					   .timeout_ms = (int)timeout_ms };
		if (pthread_create(&th[i], NULL, load_main, &la[i]) != 0)
			la[i].open_rc = -EAGAIN, th[i] = 0;
	}
	uint64_t acked = 0, unknown = 0, errors = 0;
	for (uint64_t i = 0; i < threads; i++) {
		if (th[i])
			pthread_join(th[i], NULL);
		if (la[i].open_rc != 0)
			errors += la[i].n;
		acked += la[i].acked;
		unknown += la[i].unknown;
		errors += la[i].errors;
	}
	double secs = (double)(innet_now_ns() - t0) / 1e9;
	rc = client_call(&cl, INNET_COUNTER_READ, (uint32_t)index, 0, &after, &st);
	close(cl.fd);
	free(la);
	free(th);
	if (rc != 0) {
		fprintf(stderr, "innet counter: cannot read counter back: %s\n", strerror(-rc));
		return 1;
	}
	uint64_t moved = after - before;
	bool ok = moved >= acked && moved <= acked + unknown && errors == 0;
	printf("%lu increments from %lu threads in %.2f s (%.0f/s): %lu acknowledged, %lu unknown, "
	       "%lu errors; counter moved by %lu: %s\n",
	       (unsigned long)count, (unsigned long)threads, secs, (double)count / secs,
	       (unsigned long)acked, (unsigned long)unknown, (unsigned long)errors, (unsigned long)moved,
	       ok ? "consistent" : "INCONSISTENT");
	return ok ? 0 : 1;
bad:
	fprintf(stderr, "innet counter: %s\n\n", why);
	counter_usage(stderr);
	return 2;
#undef BAD
}
