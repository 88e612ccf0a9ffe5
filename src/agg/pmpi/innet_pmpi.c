/*
 * agg/pmpi/innet_pmpi.c — MPI interposition (PMPI) library: an unmodified MPI
 * program's MPI_Allreduce(MPI_SUM) of MPI_FLOAT or MPI_INT on MPI_COMM_WORLD
 * goes through innet's in-network all-reduce (include/innet/agg.h); every
 * other call, and every other all-reduce, falls through to the real MPI.
 *
 *   make build/libinnet-mpi.so
 *   mpirun -x LD_PRELOAD=$PWD/build/libinnet-mpi.so -x INNET_AGG_SWITCH=127.0.9.1 \
 *          -x INNET_AGG_BIND=127.0.9.10:30000 -np 4 ./program
 *
 * (or link the program with -linnet-mpi before -lmpi). Settings, from the
 * environment of every rank:
 *   INNET_AGG_SWITCH      IP[:UDP] of the switch's agg program. Unset: the
 *                         library passes everything through. A comma list
 *                         IP[:UDP],IP[:UDP],...: rank r uses entry r (a
 *                         switch on the XDP target answers only on the address
 *                         of the port the rank's link arrives on).
 *   INNET_AGG_BIND        IP:UDP; rank r binds IP:(UDP + r), as in the job's
 *                         member list. IP "auto" (the default, "auto:30000"):
 *                         the address the kernel routes from toward the switch.
 *   INNET_AGG_JOB         job id (default 1)
 *   INNET_AGG_SLOTS, INNET_AGG_K   as configured for the job (default 64, 256)
 *   INNET_AGG_TIMEOUT_MS, INNET_AGG_RTO_US   innet_agg_conf's (0 = defaults)
 *   INNET_AGG_MIN_COUNT   all-reduces of fewer elements go to MPI (default 0)
 *   INNET_AGG_VERBOSE     1: one line per rank on stderr at MPI_Finalize
 * Worker id = rank in MPI_COMM_WORLD, workers = its size (at most 48).
 *
 * Every rank makes the same decision for a given call (it depends only on
 * arguments that MPI requires to match across ranks), so ranks never split
 * between innet and MPI. Opening the worker is agreed on with one real
 * MPI_Allreduce(MIN) on the first eligible call: if any rank cannot open
 * its socket, every rank falls through from then on. Float sums carry the
 * block-floating-point error of docs/aggregation.md (about 1e-8 of each
 * block's largest value for 4 ranks); int sums are exact. A failed innet call
 * (-ETIMEDOUT: a rank died) is reported through the communicator's error
 * handler with MPI_ERR_OTHER, as MPI reports its own failures, with the
 * library's explanation (innet_agg_error) on stderr.
 *
 * Runs: each program is a run of the job on the switch. The first
 * innet all-reduce of each rank starts it (the library's START): a program
 * run after another — which ended, or was killed — starts cleanly once all
 * its ranks have started, and MPI_Finalize's close tells the switch the
 * rank is done (docs/aggregation.md, "Runs").
 *
 * THREAD SAFETY: calls are serialized by a mutex (one worker handle per
 * process), which matches MPI_THREAD_SERIALIZED use of MPI_COMM_WORLD.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <mpi.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "innet/agg.h"
#include "agg/wire.h"

enum pmpi_state { PMPI_UNTRIED, PMPI_ON, PMPI_OFF };

static struct {
	pthread_mutex_t lock;
	enum pmpi_state state;
	struct innet_agg *agg;
	int rank;
	unsigned long min_count;
	unsigned long long calls_innet;     /* all-reduces done by innet */
	unsigned long long calls_mpi;       /* all-reduces passed to MPI */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static unsigned long env_ul(const char *name, unsigned long def)
{
	const char *s = getenv(name);
	if (s == NULL || *s == '\0')
		return def;
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	return *end == '\0' ? v : def;
}

/* "IP[:UDP]" into host-order ip and udp; "auto" leaves *ip at 0. */
static int parse_addr(const char *s, uint32_t *ip, uint16_t *udp)
{
	char buf[64];
	snprintf(buf, sizeof(buf), "%s", s);
	char *colon = strrchr(buf, ':');
	if (colon != NULL) {
		*colon = '\0';
		char *end;
		unsigned long u = strtoul(colon + 1, &end, 10);
		if (*end != '\0' || u == 0 || u > 65535)
			return -EINVAL;
		*udp = (uint16_t)u;
	}
	if (strcmp(buf, "auto") == 0) {
		*ip = 0;
		return 0;
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -EINVAL;
	*ip = ntohl(a.s_addr);
	return 0;
}

/* The local address the kernel would send from toward ip:udp. */
static int route_source(uint32_t ip, uint16_t udp, uint32_t *out)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(udp), .sin_addr.s_addr = htonl(ip) };
	struct sockaddr_in me;
	socklen_t len = sizeof(me);
	int rc = 0;
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&me, &len) < 0)
		rc = -errno;
	else
		*out = ntohl(me.sin_addr.s_addr);
	close(fd);
	return rc;
}

/* Open this rank's worker; 0 or -errno (with a message). */
static int open_worker(void)
{
	const char *sw = getenv("INNET_AGG_SWITCH");
	if (sw == NULL || *sw == '\0')
		return -ENOENT; /* not configured: silent pass-through */
	int size;
	PMPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	struct innet_agg_conf c = { .switch_udp = INNET_AGG_UDP, .local_udp = 30000 };
	const char *bind = getenv("INNET_AGG_BIND");
	/* a list: this rank's entry ("" if there are fewer: refused below) */
	char mine[64] = "";
	if (strchr(sw, ',') != NULL) {
		const char *e = sw;
		for (int i = 0; i < g.rank && e != NULL; i++)
			if ((e = strchr(e, ',')) != NULL)
				e++;
		size_t n = e != NULL ? strcspn(e, ",") : 0;
		if (n < sizeof(mine)) {
			memcpy(mine, e != NULL ? e : "", n);
			mine[n] = '\0';
		}
		sw = mine;
	}
	if (parse_addr(sw, &c.switch_ip, &c.switch_udp) != 0 || c.switch_ip == 0 ||
	    parse_addr(bind != NULL && *bind ? bind : "auto:30000", &c.local_ip, &c.local_udp) != 0) {
		fprintf(stderr, "innet-pmpi: bad INNET_AGG_SWITCH or INNET_AGG_BIND\n");
		return -EINVAL;
	}
	if (size < 1 || (unsigned)size > INNET_AGG_MAX_WORKERS || c.local_udp + (unsigned)g.rank > 65535) {
		fprintf(stderr, "innet-pmpi: %d ranks: at most %u go through innet\n", size, INNET_AGG_MAX_WORKERS);
		return -E2BIG;
	}
	if (c.local_ip == 0) {
		int rc = route_source(c.switch_ip, c.switch_udp, &c.local_ip);
		if (rc != 0) {
			fprintf(stderr, "innet-pmpi: rank %d: no route to the switch: %s\n", g.rank, strerror(-rc));
			return rc;
		}
	}
	c.local_udp = (uint16_t)(c.local_udp + g.rank);
	c.job = (uint16_t)env_ul("INNET_AGG_JOB", 1);
	c.worker = (uint8_t)g.rank;
	c.n_workers = (uint8_t)size;
	c.slots = (uint32_t)env_ul("INNET_AGG_SLOTS", 64);
	c.k = (uint32_t)env_ul("INNET_AGG_K", 256);
	c.timeout_ms = (uint32_t)env_ul("INNET_AGG_TIMEOUT_MS", 0);
	c.rto_us = (uint32_t)env_ul("INNET_AGG_RTO_US", 0);
	g.agg = innet_agg_open(&c);
	if (g.agg == NULL) {
		int e = errno;
		fprintf(stderr, "innet-pmpi: rank %d: cannot open worker: %s\n", g.rank, strerror(e));
		return -e;
	}
	return 0;
}

/* First eligible call: every rank opens, then all agree (MIN) to use innet. */
static void decide(MPI_Comm comm)
{
	g.min_count = env_ul("INNET_AGG_MIN_COUNT", 0);
	int rc = open_worker();
	int ok = rc == 0, all_ok = 0;
	if (PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
		all_ok = 0;
	if (!all_ok && g.agg != NULL) {
		innet_agg_close(g.agg);
		g.agg = NULL;
	}
	if (!all_ok && rc != -ENOENT && g.rank == 0)
		fprintf(stderr, "innet-pmpi: a rank could not join the innet job: all-reduces go to MPI\n");
	g.state = all_ok ? PMPI_ON : PMPI_OFF;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
		  MPI_Comm comm)
{
	bool is_int = datatype == MPI_INT || datatype == MPI_INT32_T;
	bool eligible = comm == MPI_COMM_WORLD && op == MPI_SUM && count >= 0 &&
			(datatype == MPI_FLOAT || (is_int && sizeof(int) == 4));
	if (!eligible)
		goto passthrough;
	pthread_mutex_lock(&g.lock);
	if (g.state == PMPI_UNTRIED)
		decide(comm);
	if (g.state != PMPI_ON || (unsigned long)count < g.min_count) {
		g.calls_mpi++;
		pthread_mutex_unlock(&g.lock);
		return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
	}
	const void *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
	int rc = is_int ? innet_agg_allreduce_i32(g.agg, in, recvbuf, (size_t)count)
			: innet_agg_allreduce_f32(g.agg, in, recvbuf, (size_t)count);
	g.calls_innet++;
	int rank = g.rank;
	char why[256] = "";
	if (rc != 0)
		snprintf(why, sizeof(why), "%s", innet_agg_error(g.agg));
	pthread_mutex_unlock(&g.lock);
	if (rc != 0) {
		fprintf(stderr, "innet-pmpi: rank %d: MPI_Allreduce through innet failed: %s%s%s%s\n", rank,
			strerror(-rc), why[0] ? " (" : "", why, why[0] ? ")" : "");
		PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
		return MPI_ERR_OTHER;
	}
	return MPI_SUCCESS;

passthrough:
	pthread_mutex_lock(&g.lock);
	g.calls_mpi++;
	pthread_mutex_unlock(&g.lock);
	return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Finalize(void)
{
	pthread_mutex_lock(&g.lock);
	if (env_ul("INNET_AGG_VERBOSE", 0)) {
		struct innet_agg_stats st = { 0 };
		if (g.agg != NULL)
			innet_agg_get_stats(g.agg, &st);
		int rank = g.rank;
		if (g.state == PMPI_UNTRIED)
			PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
		fprintf(stderr,
			"innet-pmpi: rank %d: allreduce innet=%llu mpi=%llu packets=%llu retransmits=%llu "
			"partial=%llu\n",
			rank, g.calls_innet, g.calls_mpi, (unsigned long long)st.packets_sent,
			(unsigned long long)st.retransmits, (unsigned long long)st.partial);
	}
	innet_agg_close(g.agg);
	g.agg = NULL;
	g.state = PMPI_OFF;
	pthread_mutex_unlock(&g.lock);
	return PMPI_Finalize();
}
