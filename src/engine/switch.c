/*
 * switch.c — a switch's life: build it from a configuration (check it, run
 * every program's setup, allocate state, bind sockets), start and stop its
 * threads, and sum its counters.
 *
 * Sockets: for every program, every UDP port it binds and every switch port
 * (address), one socket per worker with SO_REUSEPORT (the kernel spreads
 * flows over them by 4-tuple hash, so one flow always meets one worker, in
 * order), or a single socket polled by one worker for a SERIAL program.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "innet/metrics.h"
#include "innet/xdp_abi.h"
#include "engine/switch_pvt.h"
#include "targets/xdp/xdp.h"

#define SOCK_BUF (4 << 20)

static const char *const runtime_reasons[INNET_DROP_RUNTIME_COUNT] = {
	[INNET_DROP_NONE] = "none",
	[INNET_DROP_PROGRAM_VERDICT] = "program_verdict",
	[INNET_DROP_NO_PROGRAM] = "no_program",
	[INNET_DROP_TRUNCATED] = "truncated",
	[INNET_DROP_REG_OOB] = "reg_out_of_range",
	[INNET_DROP_REG_BUDGET] = "pisa_reg_budget",
	[INNET_DROP_MODEL_VIOLATION] = "model_violation",
	[INNET_DROP_RECIRC_BUDGET] = "recirc_budget",
	[INNET_DROP_BAD_PORT] = "bad_port",
	[INNET_DROP_BAD_GROUP] = "bad_group",
	[INNET_DROP_NO_PEER] = "no_peer",
	[INNET_DROP_BAD_VERDICT] = "bad_verdict",
	[INNET_DROP_PKT_BOUNDS] = "pkt_bounds",
	[INNET_DROP_TX_FULL] = "tx_full",
	[INNET_DROP_CPU_QUEUE_FULL] = "cpu_queue_full",
	[INNET_DROP_LINK_LOSS] = "link_loss",
	[INNET_DROP_TX_ERROR] = "tx_error",
	[INNET_DROP_FRAME_TO_UDP_PORT] = "frame_to_udp_port",
	[INNET_DROP_DATAGRAM_TO_RAW_PORT] = "datagram_to_raw_port",
	[INNET_DROP_NO_UDP_SOCKET] = "no_udp_socket",
	[INNET_DROP_REG_CONTENDED] = "reg_contended",
	[INNET_DROP_TABLE_KEY] = "table_key_size",
};

static const char *const handoff_names[] = {
	"to_cpu", "emit", "timer", "multicast", "neighbour", "oversize", "userspace", "serial",
	"resume",
};
_Static_assert(sizeof(handoff_names) / sizeof(handoff_names[0]) == INNET_XDP_HANDOFF_COUNT &&
	       INNET_XDP_HANDOFF_COUNT <= INNET_HANDOFF_KINDS, "hand-off names");

const char *innet_handoff_name(unsigned k)
{
	return k < sizeof(handoff_names) / sizeof(handoff_names[0]) ? handoff_names[k] : NULL;
}

static const char *const xdp_pass_names[] = {
	"not_ipv4", "not_local", "not_udp", "no_program", "ip_options", "fragment", "bad_length",
	"userspace",
};

const char *innet_xdp_pass_name(unsigned k)
{
	return k < sizeof(xdp_pass_names) / sizeof(xdp_pass_names[0]) ? xdp_pass_names[k] : NULL;
}

static const char *const action_names[INNET_ACTION_COUNT] = {
	[INNET_DROP] = "drop",         [INNET_FORWARD] = "forward",
	[INNET_MULTICAST] = "multicast", [INNET_REFLECT] = "reflect",
	[INNET_RECIRCULATE] = "recirculate", [INNET_TO_CPU] = "to_cpu",
	[INNET_CONSUMED] = "consumed",
};

const char *innet_drop_reason_name(unsigned reason)
{
	if (reason < INNET_DROP_RUNTIME_COUNT && runtime_reasons[reason])
		return runtime_reasons[reason];
	return "unknown";
}

const char *innet_cp_drop_reason_name(const struct innet_cp *cp, unsigned reason)
{
	if (reason >= INNET_DROP_PROGRAM && reason - INNET_DROP_PROGRAM < cp->program->n_drop_reasons)
		return cp->program->drop_reasons[reason - INNET_DROP_PROGRAM];
	return innet_drop_reason_name(reason);
}

const char *innet_action_name(unsigned action)
{
	return action < INNET_ACTION_COUNT ? action_names[action] : "unknown";
}

const struct innet_switch_conf *innet_switch_conf(const struct innet_switch *sw)
{
	return &sw->conf;
}

struct innet_cp *innet_switch_prog(struct innet_switch *sw, const char *name)
{
	for (uint32_t i = 0; i < sw->n_progs; i++)
		if (!strcmp(sw->progs[i].name, name))
			return &sw->progs[i];
	return NULL;
}

struct innet_cp *innet_switch_prog_at(struct innet_switch *sw, uint32_t i)
{
	return i < sw->n_progs ? &sw->progs[i] : NULL;
}

/* ------------------------------------------------------------------------ */

static int check_conf(const struct innet_switch_conf *c, char *err, size_t errlen)
{
	if (c->n_workers < 1 || c->n_workers > 64) {
		snprintf(err, errlen, "workers must be 1..64 (got %u)", c->n_workers);
		return -EINVAL;
	}
	if (c->n_ports < 1 || c->n_ports > INNET_MAX_PORTS) {
		snprintf(err, errlen, "a switch needs 1..%u ports (got %u)", INNET_MAX_PORTS, c->n_ports);
		return -EINVAL;
	}
	if (c->n_progs < 1 || c->n_progs > 16) {
		snprintf(err, errlen, "a switch needs 1..16 programs (got %u)", c->n_progs);
		return -EINVAL;
	}
	if (c->metrics_addr[0] != '\0') {
		uint32_t mip;
		uint16_t mport;
		if (strnlen(c->metrics_addr, sizeof(c->metrics_addr)) == sizeof(c->metrics_addr)) {
			snprintf(err, errlen, "bad metrics address: not NUL-terminated");
			return -EINVAL;
		}
		if (innet_metrics_addr_parse(c->metrics_addr, &mip, &mport, err, errlen) != 0)
			return -EINVAL;
	}
	uint32_t n_raw_ports = 0, n_raw_progs = 0;
	for (uint32_t i = 0; i < c->n_ports; i++) {
		const struct innet_port_conf *p = &c->ports[i];
		if (p->iface[0] != '\0') {
			n_raw_ports++;
			if (strnlen(p->iface, INNET_IFACE_MAX) >= INNET_IFACE_MAX) {
				snprintf(err, errlen, "port %u (%s): interface name longer than %u bytes", i,
					 p->name, INNET_IFACE_MAX - 1);
				return -EINVAL;
			}
			if (p->ip != 0 || p->peer_ip != 0) {
				snprintf(err, errlen, "port %u (%s): a raw port (iface %s) has no address "
					 "and no peer", i, p->name, p->iface);
				return -EINVAL;
			}
			if (innet_link_active(&p->link)) {
				snprintf(err, errlen, "port %u (%s): link emulation is not supported on a "
					 "raw port", i, p->name);
				return -EINVAL;
			}
			for (uint32_t j = 0; j < i; j++)
				if (!strcmp(c->ports[j].iface, p->iface)) {
					snprintf(err, errlen, "ports %u and %u are both raw on interface %s", j,
						 i, p->iface);
					return -EINVAL;
				}
			continue;
		}
		if (p->ip == 0) {
			snprintf(err, errlen, "port %u (%s) has no address", i, p->name);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++)
			if (c->ports[j].ip == p->ip) {
				snprintf(err, errlen, "ports %u and %u have the same address", j, i);
				return -EINVAL;
			}
		const struct innet_link_conf *l = &p->link;
		if (!(l->loss >= 0 && l->loss <= 1 && l->dup >= 0 && l->dup <= 1 && l->reorder >= 0 &&
		      l->reorder <= 1)) {
			snprintf(err, errlen, "port %u (%s): link probabilities must be in [0, 1]", i,
				 p->name);
			return -EINVAL;
		}
	}
	uint32_t total_udp = 0;
	for (uint32_t i = 0; i < c->n_progs; i++) {
		const struct innet_prog_conf *p = &c->progs[i];
		if (p->program == NULL || p->program->handle == NULL) {
			snprintf(err, errlen, "program instance '%s' has no program", p->name);
			return -EINVAL;
		}
		if ((p->n_udp < 1 && !p->raw) || p->n_udp > INNET_MAX_PROG_UDP) {
			snprintf(err, errlen, "program '%s' must bind 1..%u UDP ports (got %u)", p->name,
				 INNET_MAX_PROG_UDP, p->n_udp);
			return -EINVAL;
		}
		total_udp += p->n_udp;
		if (total_udp > INNET_MAX_SWITCH_UDP) {
			snprintf(err, errlen, "programs bind more than %u UDP ports in all (at '%s')",
				 INNET_MAX_SWITCH_UDP, p->name);
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(c->progs[j].name, p->name)) {
				snprintf(err, errlen, "two program instances are named '%s'", p->name);
				return -EINVAL;
			}
		if (p->program->n_drop_reasons > INNET_MAX_DROP_REASONS) {
			snprintf(err, errlen, "program '%s' declares too many drop reasons", p->name);
			return -EINVAL;
		}
		if (p->raw && ++n_raw_progs > 1) {
			snprintf(err, errlen, "program '%s': at most one raw program per switch", p->name);
			return -EINVAL;
		}
	}
	if (n_raw_ports > 0 && n_raw_progs == 0) {
		snprintf(err, errlen, "the switch has raw ports but no raw program to receive their "
			 "frames");
		return -EINVAL;
	}
	if (n_raw_progs > 0 && n_raw_ports == 0) {
		snprintf(err, errlen, "a program is raw but the switch has no raw port (iface)");
		return -EINVAL;
	}
	return 0;
}

int innet_udp_range_parse(const char *s, uint32_t *lo, uint32_t *hi)
{
	char *end;
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	unsigned long a = strtoul(s, &end, 10), b = a;
	if (errno || a > 65535)
		return -EINVAL;
	if (*end == '-') {
		const char *t = end + 1;
		if (t[0] < '0' || t[0] > '9')
			return -EINVAL;
		b = strtoul(t, &end, 10);
		if (errno || b > 65535)
			return -EINVAL;
	}
	if (*end != '\0')
		return -EINVAL;
	*lo = (uint32_t)a;
	*hi = (uint32_t)b;
	return 0;
}

int innet_prog_conf_add_udp(struct innet_prog_conf *pc, uint32_t lo, uint32_t hi, char *err,
			    size_t errlen)
{
	if (lo < 1 || hi > 65535 || lo > hi) {
		if (lo > hi)
			snprintf(err, errlen, "UDP port range %u-%u is empty (first > last)", lo, hi);
		else
			snprintf(err, errlen, "UDP port %u is out of 1..65535", lo < 1 ? lo : hi);
		return -EINVAL;
	}
	if (pc->n_udp > INNET_MAX_PROG_UDP || hi - lo + 1 > INNET_MAX_PROG_UDP - pc->n_udp) {
		snprintf(err, errlen, "more than %u UDP ports for one program", INNET_MAX_PROG_UDP);
		return -EINVAL;
	}
	/* Duplicates: a bitmap of the ports listed so far (8 KiB), O(n + range). */
	uint64_t seen[65536 / 64] = { 0 };
	for (uint32_t i = 0; i < pc->n_udp; i++)
		seen[pc->udp[i] / 64] |= 1ull << (pc->udp[i] % 64);
	for (uint32_t u = lo; u <= hi; u++)
		if (seen[u / 64] & (1ull << (u % 64))) {
			if (lo == hi)
				snprintf(err, errlen, "UDP port %u is listed twice", u);
			else
				snprintf(err, errlen, "UDP port range %u-%u overlaps port %u listed before",
					 lo, hi, u);
			return -EINVAL;
		}
	for (uint32_t u = lo; u <= hi; u++)
		pc->udp[pc->n_udp++] = (uint16_t)u;
	return 0;
}

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
static int check_nofile(struct innet_switch *sw, uint32_t n_socks, char *err, size_t errlen)
{
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
	uint64_t need = (uint64_t)n_socks + 3ull * (sw->n_workers + INNET_EXTRA_WORKERS) + 256;
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

static int open_sockets(struct innet_switch *sw, char *err, size_t errlen)
{
	uint32_t max = 0;
	for (uint32_t p = 0; p < sw->n_progs; p++) {
		struct innet_cp *cp = &sw->progs[p];
		uint32_t per = (cp->program->flags & INNET_PROG_SERIAL) ? 1 : sw->n_workers;
		max += cp->n_udp * (sw->n_ports - sw->n_raw_ports) * per;
		if (cp->raw)
			max += sw->n_raw_ports * per;
	}
	int rc = check_nofile(sw, max, err, errlen);
	if (rc != 0)
		return rc;
	sw->socks = calloc(max ? max : 1, sizeof(*sw->socks));
	if (sw->socks == NULL)
		return -ENOMEM;
	for (uint32_t p = 0; p < sw->n_progs; p++) {
		struct innet_cp *cp = &sw->progs[p];
		bool serial = cp->program->flags & INNET_PROG_SERIAL;
		uint32_t per = serial ? 1 : sw->n_workers;
		for (uint32_t port = 0; cp->raw && port < sw->n_ports; port++) {
			if (sw->ports[port].conf.iface[0] == '\0')
				continue;
			int fanout = per > 1 ? (int)((getpid() * 131u + port * 7919u + 1) & 0xffff) : -1;
			for (uint32_t k = 0; k < per; k++) {
				int fd = open_raw(sw->ports[port].conf.iface, fanout, err, errlen);
				if (fd < 0)
					return fd;
				struct innet_sock *s = &sw->socks[sw->n_socks++];
				s->fd = fd;
				s->port = (uint16_t)port;
				s->prog = (uint16_t)p;
				s->udp = 0;
				s->raw = true;
				s->worker = (uint16_t)(serial ? cp->serial_worker : k);
			}
		}
		for (uint32_t u = 0; u < cp->n_udp; u++)
			for (uint32_t port = 0; port < sw->n_ports; port++) {
				if (sw->ports[port].conf.iface[0] != '\0')
					continue;
				rc = serial ? 0 : probe_free(sw->ports[port].conf.ip, cp->udp[u], err, errlen);
				if (rc != 0)
					return rc;
				for (uint32_t k = 0; k < per; k++) {
					int fd = open_sock(sw->ports[port].conf.ip, cp->udp[u], !serial,
							   err, errlen);
					if (fd < 0)
						return fd;
					struct innet_sock *s = &sw->socks[sw->n_socks++];
					s->fd = fd;
					s->port = (uint16_t)port;
					s->prog = (uint16_t)p;
					s->udp = cp->udp[u];
					s->worker = (uint16_t)(serial ? cp->serial_worker : k);
				}
			}
	}
	return 0;
}

/* Each worker (and the timer and control threads) sends from its own socket
 * where it has one, and otherwise from any socket bound to that address. */
static int wire_workers(struct innet_switch *sw)
{
	for (uint32_t wi = 0; wi < sw->n_workers + INNET_EXTRA_WORKERS; wi++) {
		struct innet_worker *w = &sw->workers[wi];
		for (uint32_t i = 0; i < sw->n_socks; i++) {
			struct innet_sock *s = &sw->socks[i];
			int *fdp = s->raw ? &w->rawfd[s->port]
					  : &w->txfd[(size_t)s->port * sw->udp_stride +
						     sw->progs[s->prog].txfd_base + sw->udp_slot[s->udp]];
			if (*fdp < 0 || s->worker == wi)
				*fdp = s->fd;
			if (s->worker == wi && wi < sw->n_workers) {
				struct epoll_event ev = { .events = EPOLLIN, .data.ptr = s };
				if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0)
					return -errno;
			}
		}
	}
	return 0;
}

struct innet_switch *innet_switch_create(const struct innet_switch_conf *conf, char *err, size_t errlen)
{
	err[0] = '\0';
	int rc = check_conf(conf, err, errlen);
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	struct innet_switch *sw = calloc(1, sizeof(*sw));
	if (sw == NULL)
		return NULL;
	sw->conf = *conf;
	sw->n_ports = conf->n_ports;
	sw->n_workers = conf->n_workers;
	sw->cpu_wake_fd = -1;
	sw->raw_prog = -1;
	pthread_mutex_init(&sw->capture_lock, NULL);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&sw->cp_send_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&sw->inject_lock, NULL);
	for (uint32_t i = 0; i < sw->n_ports; i++) {
		sw->ports[i].conf = conf->ports[i];
		atomic_init(&sw->ports[i].capture, NULL);
		sw->n_raw_ports += conf->ports[i].iface[0] != '\0';
	}
	for (uint32_t i = 0; i < conf->n_progs; i++) {
		const struct innet_prog_conf *pc = &conf->progs[i];
		struct innet_cp *cp = &sw->progs[i];
		snprintf(cp->name, sizeof(cp->name), "%s", pc->name);
		cp->program = pc->program;
		cp->handle = pc->program->handle;
		cp->on_timer = pc->program->on_timer;
		cp->sw = sw;
		cp->index = i;
		cp->n_udp = pc->n_udp;
		cp->raw = pc->raw;
		cp->txfd_base = sw->udp_stride;
		sw->udp_stride += pc->n_udp;
		if (pc->raw)
			sw->raw_prog = (int32_t)i;
		cp->serial_worker = i % sw->n_workers;
		pthread_mutex_init(&cp->cp_lock, NULL);
		sw->n_progs = i + 1;
		if (pc->n_udp > 0) {
			cp->udp = malloc(pc->n_udp * sizeof(*cp->udp));
			if (cp->udp == NULL) {
				rc = -ENOMEM;
				goto err_destroy;
			}
			memcpy(cp->udp, pc->udp, pc->n_udp * sizeof(*cp->udp));
		}
		if (cp->program->model == INNET_MODEL_PISA)
			cp->reg_ops_budget = cp->program->pisa_reg_ops_per_pass ? cp->program->pisa_reg_ops_per_pass : 48;
		else
			cp->reg_ops_budget = UINT32_MAX;
		for (uint32_t u = 0; u < pc->n_udp; u++) {
			if (pc->udp[u] == 0) {
				snprintf(err, errlen, "program '%s': UDP port 0 is not allowed", pc->name);
				rc = -EINVAL;
				goto err_destroy;
			}
			if (sw->udp_to_prog[pc->udp[u]] != 0) {
				if (sw->udp_to_prog[pc->udp[u]] == i + 1)
					snprintf(err, errlen, "program '%s' lists UDP port %u twice", pc->name,
						 pc->udp[u]);
				else
					snprintf(err, errlen, "UDP port %u is bound by two programs ('%s' and '%s')",
						 pc->udp[u], sw->progs[sw->udp_to_prog[pc->udp[u]] - 1].name,
						 pc->name);
				rc = -EADDRINUSE;
				goto err_destroy;
			}
			sw->udp_to_prog[pc->udp[u]] = (uint8_t)(i + 1);
			sw->udp_slot[pc->udp[u]] = (uint16_t)u;
		}
		rc = innet_state_setup(cp, pc, err, errlen);
		if (rc != 0)
			goto err_destroy;
	}
	/* The XDP target loads the programs' eBPF objects and moves their state
	 * onto the maps before anything (workers, init) looks at it. */
	if (conf->target == INNET_TARGET_XDP) {
		rc = innet_xdp_create(sw, err, errlen);
		if (rc != 0)
			goto err_destroy;
	}
	sw->workers = aligned_alloc(INNET_CACHELINE, sizeof(*sw->workers) * (sw->n_workers + INNET_EXTRA_WORKERS));
	if (sw->workers == NULL) {
		rc = -ENOMEM;
		goto err_destroy;
	}
	memset(sw->workers, 0, sizeof(*sw->workers) * (sw->n_workers + INNET_EXTRA_WORKERS));
	for (uint32_t i = 0; i < sw->n_workers + INNET_EXTRA_WORKERS; i++) {
		sw->workers[i].epfd = sw->workers[i].wake_fd = -1;
		rc = innet_worker_init(sw, &sw->workers[i], i);
		if (rc != 0) {
			snprintf(err, errlen, "worker %u: %s", i, strerror(-rc));
			goto err_destroy;
		}
	}
	sw->cpu_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sw->cpu_wake_fd < 0) {
		rc = -errno;
		goto err_destroy;
	}
	rc = innet_timerq_create(sw);
	if (rc != 0)
		goto err_destroy;
	rc = conf->no_sockets ? 0 : open_sockets(sw, err, errlen);
	if (rc != 0)
		goto err_destroy;
	rc = wire_workers(sw);
	if (rc != 0)
		goto err_destroy;
	/* Control-plane initialisation of state (tables, groups, registers). */
	sw->init_err = err;
	sw->init_errlen = errlen;
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		struct innet_cp *cp = &sw->progs[i];
		if (cp->program->init != NULL) {
			rc = cp->program->init(cp, cp->priv);
			if (rc != 0) {
				if (err[0] == '\0')
					snprintf(err, errlen, "program '%s': init failed: %s", cp->name,
						 strerror(-rc));
				sw->init_err = NULL;
				goto err_destroy;
			}
		}
	}
	sw->init_err = NULL;
	if (sw->xdp != NULL) {
		rc = innet_xdp_start(sw, err, errlen);
		if (rc != 0)
			goto err_destroy;
	}
	return sw;

err_destroy:
	if (err[0] == '\0')
		snprintf(err, errlen, "%s", strerror(-rc));
	innet_switch_destroy(sw);
	errno = -rc;
	return NULL;
}

int innet_switch_start(struct innet_switch *sw)
{
	if (sw->started)
		return -EALREADY;
	atomic_store(&sw->stopping, false);
	int rc = innet_timerq_start(sw);
	if (rc != 0)
		return rc;
	rc = innet_control_start(sw);
	if (rc != 0) {
		atomic_store(&sw->stopping, true);
		innet_timerq_stop(sw);
		return rc;
	}
	for (uint32_t i = 0; i < sw->n_workers; i++) {
		rc = pthread_create(&sw->workers[i].thread, NULL, innet_worker_main, &sw->workers[i]);
		if (rc != 0) {
			atomic_store(&sw->stopping, true);
			for (uint32_t j = 0; j < i; j++) {
				uint64_t one = 1;
				if (write(sw->workers[j].wake_fd, &one, sizeof(one)) < 0) {
					/* already woken */
				}
				pthread_join(sw->workers[j].thread, NULL);
			}
			innet_control_stop(sw);
			innet_timerq_stop(sw);
			return -rc;
		}
	}
	sw->started = true;
	atomic_store(&sw->running, true);
	return 0;
}

void innet_switch_stop(struct innet_switch *sw)
{
	if (!sw->started)
		return;
	atomic_store(&sw->stopping, true);
	for (uint32_t i = 0; i < sw->n_workers; i++) {
		uint64_t one = 1;
		if (write(sw->workers[i].wake_fd, &one, sizeof(one)) < 0) {
			/* already woken */
		}
	}
	for (uint32_t i = 0; i < sw->n_workers; i++)
		pthread_join(sw->workers[i].thread, NULL);
	innet_timerq_stop(sw);
	innet_control_stop(sw);
	sw->started = false;
	atomic_store(&sw->running, false);
}

void innet_switch_destroy(struct innet_switch *sw)
{
	if (sw == NULL)
		return;
	innet_switch_stop(sw);
	innet_xdp_stop(sw);   /* detach first: nothing new arrives on the ring */
	innet_capture_close_all(sw);
	innet_timerq_destroy(sw);
	for (uint32_t i = 0; i < sw->n_socks; i++)
		close(sw->socks[i].fd);
	free(sw->socks);
	if (sw->workers != NULL) {
		for (uint32_t i = 0; i < sw->n_workers + INNET_EXTRA_WORKERS; i++)
			innet_worker_fini(&sw->workers[i]);
		free(sw->workers);
	}
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		innet_state_free(&sw->progs[i]);
		free(sw->progs[i].udp);
		pthread_mutex_destroy(&sw->progs[i].cp_lock);
	}
	innet_xdp_destroy(sw);
	if (sw->cpu_wake_fd >= 0)
		close(sw->cpu_wake_fd);
	pthread_mutex_destroy(&sw->capture_lock);
	pthread_mutex_destroy(&sw->cp_send_lock);
	pthread_mutex_destroy(&sw->inject_lock);
	free(sw);
}

/* ------------------------------------------------------------------------ */
/* Control-plane sends and statistics                                         */

int innet_cp_send(struct innet_cp *cp, const struct innet_out *out, bool is_group, const void *data,
		  uint32_t len)
{
	struct innet_switch *sw = cp->sw;
	struct innet_worker *w = INNET_CONTROL_WORKER(sw);
	pthread_mutex_lock(&sw->cp_send_lock);
	innet_worker_set_now(w);
	int rc = innet_worker_send_copy(w, cp, out, is_group, data, len, out->src_udp);
	innet_worker_flush(w);
	pthread_mutex_unlock(&sw->cp_send_lock);
	return rc;
}

/* Counted in the control worker's counters (one writer: the control thread,
 * or an injection's caller running on_cpu on a switch not started). */
int innet_cp_count_drop(struct innet_cp *cp, unsigned reason)
{
	bool ok = (reason > INNET_DROP_NONE && reason < INNET_DROP_RUNTIME_COUNT) ||
		  (reason >= INNET_DROP_PROGRAM &&
		   reason < INNET_DROP_PROGRAM + cp->program->n_drop_reasons);
	if (!ok)
		return -EINVAL;
	struct innet_worker *w = INNET_CONTROL_WORKER(cp->sw);
	INNET_STAT_INC(w->pstats[cp->index].drops[reason]);
	if (w->inject != NULL && w->inject->cpu_drop_reason == 0)
		w->inject->cpu_drop_reason = reason;
	return 0;
}

#define LOAD64(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

int innet_cp_stats(struct innet_cp *cp, struct innet_prog_stats *out)
{
	struct innet_switch *sw = cp->sw;
	memset(out, 0, sizeof(*out));
	for (uint32_t wi = 0; wi < sw->n_workers + INNET_EXTRA_WORKERS; wi++) {
		const struct innet_prog_stats *s = &sw->workers[wi].pstats[cp->index];
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
	innet_xdp_prog_stats_add(sw, cp->index, out);
	return 0;
}

int innet_switch_port_stats(struct innet_switch *sw, uint32_t port, struct innet_port_stats *out)
{
	if (port >= sw->n_ports)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	for (uint32_t wi = 0; wi < sw->n_workers + INNET_EXTRA_WORKERS; wi++) {
		const struct innet_port_stats *s = &sw->workers[wi].portstats[port];
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
	innet_xdp_port_stats_add(sw, port, out);
	return 0;
}

void innet_switch_stats_reset(struct innet_switch *sw)
{
	/* Counters are owned by their threads; a reset races with increments
	 * in flight, which is acceptable for statistics. */
	for (uint32_t wi = 0; wi < sw->n_workers + INNET_EXTRA_WORKERS; wi++) {
		struct innet_worker *w = &sw->workers[wi];
		memset(w->pstats, 0, sizeof(*w->pstats) * sw->n_progs);
		memset(w->portstats, 0, sizeof(*w->portstats) * sw->n_ports);
	}
	innet_xdp_stats_reset(sw);
}
