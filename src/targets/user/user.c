/*
 * user.c — the "udp" target (engine/target.h): the user-space engine's
 * sockets, workers and threads, built, started, stopped and freed through
 * its ops, its counters summed, its control-plane sends and injections.
 * The data plane itself is worker.c, the timers timer.c, link emulation
 * link.c; user_pvt.h draws how they fit.
 *
 * Sockets: for every program, every UDP port it binds and every switch port
 * (address), one socket per worker with SO_REUSEPORT (the kernel spreads
 * flows over them by 4-tuple hash, so one flow always meets one worker, in
 * order), or a single socket polled by one worker for a SERIAL program. A
 * raw port is an AF_PACKET socket per worker, in a PACKET_FANOUT group.
 *
 * Lifecycle: create binds every socket (so a clash fails the switch's
 * create, not its start) and builds the workers; start runs the worker and
 * timer threads; stop joins them (a stopped engine may start again); destroy
 * closes and frees.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include "targets/user/user_pvt.h"

#define SOCK_BUF (4 << 20)

static int open_sock(uint32_t ip, uint16_t udp, bool reuseport, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "socket for UDP port %u: %s%s", udp, strerror(e),
			 e == EMFILE ? " (RLIMIT_NOFILE: raise ulimit -n or bind fewer UDP ports)" : "");
		return -e;
	}
	int one = 1, buf = SOCK_BUF;
	if (reuseport)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(udp),
				   .sin_addr.s_addr = htonl(ip) };
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int e = errno;
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &sin.sin_addr, a, sizeof(a));
		snprintf(err, errlen, "cannot bind %s:%u: %s", a, udp, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/* A SO_REUSEPORT group would silently share an address with another switch
 * (or a second copy of this one) and split its traffic. Bind once without
 * the option first: that fails with EADDRINUSE if anyone holds the address. */
static int probe_free(uint32_t ip, uint16_t udp, char *err, size_t errlen)
{
	int fd = open_sock(ip, udp, false, err, errlen);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

/* A raw port's AF_PACKET socket: every frame of the interface (ETH_P_ALL)
 * but not the ones sent out of it (PACKET_IGNORE_OUTGOING), promiscuous,
 * non-blocking; in a PACKET_FANOUT group (flow hash) when several workers
 * share the port. The socket is created with protocol 0 (it receives
 * nothing) and bound to the interface with ETH_P_ALL, so no frame of another
 * interface slips in between. */
static int open_raw(const char *iface, int fanout_id, char *err, size_t errlen)
{
	unsigned ifindex = if_nametoindex(iface);
	if (ifindex == 0) {
		snprintf(err, errlen, "raw port: no interface '%s' in this network namespace", iface);
		return -ENODEV;
	}
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "raw port %s: AF_PACKET socket: %s%s", iface, strerror(e),
			 e == EPERM ? " (raw ports need root or CAP_NET_RAW)" : "");
		return -e;
	}
	int one = 1, buf = SOCK_BUF;
	if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one)) < 0) {
		int e = errno;
		snprintf(err, errlen, "raw port %s: PACKET_IGNORE_OUTGOING: %s (Linux >= 4.20 needed)",
			 iface, strerror(e));
		close(fd);
		return -e;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = (int)ifindex };
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
		int e = errno;
		snprintf(err, errlen, "raw port %s: bind: %s", iface, strerror(e));
		close(fd);
		return -e;
	}
	struct packet_mreq mr = { .mr_ifindex = (int)ifindex, .mr_type = PACKET_MR_PROMISC };
	if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0) {
		int e = errno;
		snprintf(err, errlen, "raw port %s: promiscuous mode: %s", iface, strerror(e));
		close(fd);
		return -e;
	}
	if (fanout_id >= 0) {
		int arg = (fanout_id & 0xffff) | (PACKET_FANOUT_HASH << 16);
		if (setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof(arg)) < 0) {
			int e = errno;
			snprintf(err, errlen, "raw port %s: PACKET_FANOUT: %s", iface, strerror(e));
			close(fd);
			return -e;
		}
	}
	return fd;
}

/* Raise the soft RLIMIT_NOFILE to the hard limit and check that `need`
 * descriptors fit, so that a large UDP range fails here with the numbers
 * instead of with EMFILE halfway through binding. */
static int check_nofile(struct innet_user *u, uint32_t n_socks, char *err, size_t errlen)
{
	struct innet_switch *sw = u->sw;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl); /* best effort: checked below */
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	/* sockets, plus per worker an epoll, an eventfd and an io_uring (its
	 * transmit ring), plus the process's other descriptors (stdio, control
	 * socket and clients, files): 256 */
	uint64_t need = (uint64_t)n_socks + 3ull * (u->n_workers + INNET_EXTRA_WORKERS) + 256;
	if (rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur) {
		snprintf(err, errlen, "needs about %llu file descriptors (%u sockets: UDP ports x %u "
			 "ports x workers) but RLIMIT_NOFILE is %llu (hard limit %llu); raise it "
			 "(ulimit -n) or bind fewer UDP ports",
			 (unsigned long long)need, n_socks, sw->n_ports,
			 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
		return -EMFILE;
	}
	return 0;
}

static int open_sockets(struct innet_user *u, char *err, size_t errlen)
{
	struct innet_switch *sw = u->sw;
	uint32_t max = 0;
	for (uint32_t p = 0; p < sw->n_progs; p++) {
		struct innet_cp *cp = &sw->progs[p];
		uint32_t per = (cp->program->flags & INNET_PROG_SERIAL) ? 1 : u->n_workers;
		max += cp->n_udp * (sw->n_ports - sw->n_raw_ports) * per;
		if (cp->raw)
			max += sw->n_raw_ports * per;
	}
	int rc = check_nofile(u, max, err, errlen);
	if (rc != 0)
		return rc;
	u->socks = calloc(max ? max : 1, sizeof(*u->socks));
	if (u->socks == NULL)
		return -ENOMEM;
	for (uint32_t p = 0; p < sw->n_progs; p++) {
		struct innet_cp *cp = &sw->progs[p];
		bool serial = cp->program->flags & INNET_PROG_SERIAL;
		uint32_t per = serial ? 1 : u->n_workers;
		for (uint32_t port = 0; cp->raw && port < sw->n_ports; port++) {
			if (sw->ports[port].conf.iface[0] == '\0')
				continue;
			int fanout = per > 1 ? (int)((getpid() * 131u + port * 7919u + 1) & 0xffff) : -1;
			for (uint32_t k = 0; k < per; k++) {
				int fd = open_raw(sw->ports[port].conf.iface, fanout, err, errlen);
				if (fd < 0)
					return fd;
				struct innet_sock *s = &u->socks[u->n_socks++];
				s->fd = fd;
				s->port = (uint16_t)port;
				s->prog = (uint16_t)p;
				s->udp = 0;
				s->raw = true;
				s->worker = (uint16_t)(serial ? u->serial_worker[p] : k);
			}
		}
		for (uint32_t ui = 0; ui < cp->n_udp; ui++)
			for (uint32_t port = 0; port < sw->n_ports; port++) {
				if (sw->ports[port].conf.iface[0] != '\0')
					continue;
				rc = serial ? 0 : probe_free(sw->ports[port].conf.ip, cp->udp[ui], err, errlen);
				if (rc != 0)
					return rc;
				for (uint32_t k = 0; k < per; k++) {
					int fd = open_sock(sw->ports[port].conf.ip, cp->udp[ui], !serial,
							   err, errlen);
					if (fd < 0)
						return fd;
					struct innet_sock *s = &u->socks[u->n_socks++];
					s->fd = fd;
					s->port = (uint16_t)port;
					s->prog = (uint16_t)p;
					s->udp = cp->udp[ui];
					s->worker = (uint16_t)(serial ? u->serial_worker[p] : k);
				}
			}
	}
	return 0;
}

/* Each worker (and the timer and control threads) sends from its own socket
 * where it has one, and otherwise from any socket bound to that address. */
static int wire_workers(struct innet_user *u)
{
	for (uint32_t wi = 0; wi < u->n_workers + INNET_EXTRA_WORKERS; wi++) {
		struct innet_worker *w = &u->workers[wi];
		for (uint32_t i = 0; i < u->n_socks; i++) {
			struct innet_sock *s = &u->socks[i];
			int *fdp = s->raw ? &w->rawfd[s->port]
					  : &w->txfd[(size_t)s->port * u->udp_stride +
						     u->txfd_base[s->prog] + u->udp_slot[s->udp]];
			if (*fdp < 0 || s->worker == wi)
				*fdp = s->fd;
			if (s->worker == wi && wi < u->n_workers) {
				struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
				if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
					return -errno;
			}
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Lifecycle                                                                  */

static void user_destroy(void *priv);

static int user_create(struct innet_switch *sw, void **priv, char *err, size_t errlen)
{
	struct innet_user *u = calloc(1, sizeof(*u));
	if (u == NULL)
		return -ENOMEM;
	u->sw = sw;
	u->n_workers = sw->conf.n_workers;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&u->cp_send_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		const struct innet_cp *cp = &sw->progs[i];
		u->txfd_base[i] = u->udp_stride;
		u->udp_stride += cp->n_udp;
		u->serial_worker[i] = i % u->n_workers;
		for (uint32_t k = 0; k < cp->n_udp; k++)
			u->udp_slot[cp->udp[k]] = (uint16_t)k;
	}
	int rc;
	size_t n_w = u->n_workers + INNET_EXTRA_WORKERS;
	u->workers = aligned_alloc(INNET_CACHELINE, sizeof(*u->workers) * n_w);
	if (u->workers == NULL) {
		rc = -ENOMEM;
		goto err_destroy;
	}
	memset(u->workers, 0, sizeof(*u->workers) * n_w);
	for (uint32_t i = 0; i < n_w; i++) {
		u->workers[i].epfd = u->workers[i].wake_fd = -1;
		rc = innet_worker_init(u, &u->workers[i], i);
		if (rc != 0) {
			snprintf(err, errlen, "worker %u: %s", i, strerror(-rc));
			goto err_destroy;
		}
	}
	u->seats[INNET_HANDOFF_RING].w = INNET_HANDOFF_WORKER(u);
	u->seats[INNET_HANDOFF_INJECT].w = INNET_INJECT_WORKER(u);
	rc = innet_timerq_create(u);
	if (rc != 0)
		goto err_destroy;
	rc = sw->conf.no_sockets ? 0 : open_sockets(u, err, errlen);
	if (rc != 0)
		goto err_destroy;
	rc = wire_workers(u);
	if (rc != 0)
		goto err_destroy;
	*priv = u;
	return 0;

err_destroy:
	user_destroy(u);
	return rc;
}

static void wake_workers(struct innet_user *u, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t one = 1;
		if (write(u->workers[i].wake_fd, &one, sizeof(one)) < 0) {
			/* already woken */
		}
	}
}

static int user_start(void *priv, char *err, size_t errlen)
{
	struct innet_user *u = priv;
	if (u->started)
		return 0;
	atomic_store(&u->stopping, false);
	int rc = innet_timerq_start(u);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the timer thread: %s", strerror(-rc));
		return rc;
	}
	for (uint32_t i = 0; i < u->n_workers; i++) {
		rc = pthread_create(&u->workers[i].thread, NULL, innet_worker_main, &u->workers[i]);
		if (rc != 0) {
			snprintf(err, errlen, "cannot start worker thread %u: %s", i, strerror(rc));
			atomic_store(&u->stopping, true);
			wake_workers(u, i);
			for (uint32_t j = 0; j < i; j++)
				pthread_join(u->workers[j].thread, NULL);
			innet_timerq_stop(u);
			return -rc;
		}
	}
	u->started = true;
	return 0;
}

static void user_stop(void *priv)
{
	struct innet_user *u = priv;
	if (!u->started)
		return;
	atomic_store(&u->stopping, true);
	wake_workers(u, u->n_workers);
	for (uint32_t i = 0; i < u->n_workers; i++)
		pthread_join(u->workers[i].thread, NULL);
	innet_timerq_stop(u);
	u->started = false;
}

static void user_destroy(void *priv)
{
	struct innet_user *u = priv;
	if (u == NULL)
		return;
	user_stop(u);
	innet_timerq_destroy(u);
	for (uint32_t i = 0; i < u->n_socks; i++)
		close(u->socks[i].fd);
	free(u->socks);
	if (u->workers != NULL) {
		for (uint32_t i = 0; i < u->n_workers + INNET_EXTRA_WORKERS; i++)
			innet_worker_fini(&u->workers[i]);
		free(u->workers);
	}
	pthread_mutex_destroy(&u->cp_send_lock);
	free(u);
}

/* ------------------------------------------------------------------------ */
/* Control plane                                                              */

static int user_send(void *priv, struct innet_cp *cp, const struct innet_out *out, bool is_group,
		     const void *data, uint32_t len)
{
	struct innet_user *u = priv;
	struct innet_worker *w = INNET_CONTROL_WORKER(u);
	pthread_mutex_lock(&u->cp_send_lock);
	innet_worker_set_now(w);
	int rc = innet_worker_send_copy(w, cp, out, is_group, data, len, out->src_udp);
	innet_worker_flush(w);
	pthread_mutex_unlock(&u->cp_send_lock);
	return rc;
}

/* Counted in the control worker's counters (one writer: the control thread,
 * or an injection's caller running on_cpu on a switch not started). */
static void user_count_drop(void *priv, struct innet_cp *cp, unsigned reason)
{
	struct innet_user *u = priv;
	struct innet_worker *w = INNET_CONTROL_WORKER(u);
	INNET_STAT_INC(w->pstats[cp->index].drops[reason]);
	if (w->inject != NULL && w->inject->cpu_drop_reason == 0)
		w->inject->cpu_drop_reason = reason;
}

static void user_cpu_drain(void *priv)
{
	struct innet_user *u = priv;
	for (uint32_t i = 0; i < u->n_workers + INNET_EXTRA_WORKERS; i++)
		innet_worker_cpu_drain(u, &u->workers[i]);
}

static int user_inject(void *priv, uint16_t port, uint16_t dst_udp, const struct innet_addr *src,
		       const void *data, uint32_t len, struct innet_inject_result *res)
{
	return innet_worker_inject(priv, port, dst_udp, src, data, len, res);
}

/* ------------------------------------------------------------------------ */
/* Counters                                                                   */

#define LOAD64(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

static void user_prog_stats(void *priv, struct innet_cp *cp, struct innet_prog_stats *out)
{
	struct innet_user *u = priv;
	for (uint32_t wi = 0; wi < u->n_workers + INNET_EXTRA_WORKERS; wi++) {
		const struct innet_prog_stats *s = &u->workers[wi].pstats[cp->index];
		out->rx_pkts += LOAD64(s->rx_pkts);
		out->rx_bytes += LOAD64(s->rx_bytes);
		for (int a = 0; a < INNET_ACTION_COUNT; a++)
			out->actions[a] += LOAD64(s->actions[a]);
		for (uint32_t r = 0; r < INNET_N_REASONS; r++)
			out->drops[r] += LOAD64(s->drops[r]);
		out->passes += LOAD64(s->passes);
		out->recirculations += LOAD64(s->recirculations);
		out->emitted += LOAD64(s->emitted);
		out->tx_pkts += LOAD64(s->tx_pkts);
		out->timer_fires += LOAD64(s->timer_fires);
		out->cpu_pkts += LOAD64(s->cpu_pkts);
		out->reg_ops += LOAD64(s->reg_ops);
		out->table_ops += LOAD64(s->table_ops);
		out->alu_ops += LOAD64(s->alu_ops);
#define MAXOF(f) do { uint32_t v_ = LOAD64(s->f); if (v_ > out->f) out->f = v_; } while (0)
		MAXOF(max_reg_ops);
		MAXOF(max_table_ops);
		MAXOF(max_alu_ops);
		MAXOF(max_recirc);
		MAXOF(max_emitted);
#undef MAXOF
	}
}

/* The kernel's count of what it dropped at socket fd (SO_MEMINFO; the same
 * figure as the drops column of /proc/net/udp): a full receive buffer, a bad
 * checksum, a socket filter. 0 if it cannot say. */
static uint32_t sock_drops(int fd)
{
	uint32_t mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);
	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) != 0 ||
	    len <= SK_MEMINFO_DROPS * sizeof(uint32_t))
		return 0;
	return mem[SK_MEMINFO_DROPS];
}

static void user_port_stats(void *priv, uint32_t port, struct innet_port_stats *out)
{
	struct innet_user *u = priv;
	for (uint32_t wi = 0; wi < u->n_workers + INNET_EXTRA_WORKERS; wi++) {
		const struct innet_port_stats *s = &u->workers[wi].portstats[port];
		out->rx_pkts += LOAD64(s->rx_pkts);
		out->rx_bytes += LOAD64(s->rx_bytes);
		out->tx_pkts += LOAD64(s->tx_pkts);
		out->tx_bytes += LOAD64(s->tx_bytes);
		out->tx_errors += LOAD64(s->tx_errors);
		out->tx_gso += LOAD64(s->tx_gso);
		out->link_lost += LOAD64(s->link_lost);
		out->link_duplicated += LOAD64(s->link_duplicated);
		out->link_reordered += LOAD64(s->link_reordered);
		out->link_delayed += LOAD64(s->link_delayed);
		out->link_queue_full += LOAD64(s->link_queue_full);
	}
	/* the kernel's own count, since the last reset (modulo 2^32: it keeps
	 * a 32-bit counter per socket) */
	for (uint32_t i = 0; i < u->n_socks; i++)
		if (u->socks[i].port == port)
			out->rx_sock_drops += (uint32_t)(sock_drops(u->socks[i].fd) -
							 atomic_load_explicit(&u->socks[i].drops_base,
									      memory_order_relaxed));
}

static void user_stats_reset(void *priv)
{
	/* Counters are owned by their threads; a reset races with increments
	 * in flight, which is acceptable for statistics. */
	struct innet_user *u = priv;
	for (uint32_t wi = 0; wi < u->n_workers + INNET_EXTRA_WORKERS; wi++) {
		struct innet_worker *w = &u->workers[wi];
		memset(w->pstats, 0, sizeof(*w->pstats) * u->sw->n_progs);
		memset(w->portstats, 0, sizeof(*w->portstats) * u->sw->n_ports);
	}
	for (uint32_t i = 0; i < u->n_socks; i++)
		atomic_store_explicit(&u->socks[i].drops_base, sock_drops(u->socks[i].fd),
				      memory_order_relaxed);
}

const struct innet_target_ops innet_target_udp = {
	.info = {
		.id = INNET_TARGET_UDP,
		.name = "udp",
		.summary = "the user-space engine: worker threads over UDP sockets and AF_PACKET raw ports",
	},
	.create = user_create,
	.start = user_start,
	.stop = user_stop,
	.destroy = user_destroy,
	.group_sync = NULL,          /* the workers read the engine's groups */
	.send = user_send,
	.count_drop = user_count_drop,
	.cpu_drain = user_cpu_drain,
	.inject = user_inject,
	.prog_stats = user_prog_stats,
	.port_stats = user_port_stats,
	.stats_reset = user_stats_reset,
	.prog_info = NULL,           /* runs no eBPF */
};
