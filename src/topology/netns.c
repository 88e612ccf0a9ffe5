/*
 * netns.c — a topology in network namespaces (netns mode, docs/topology.md):
 * every switch and host gets a namespace of its own, every link a veth pair
 * between the two, with the MTU of the file, deterministic MACs, point-to-
 * point addresses and static neighbours, so that nothing needs ARP and an XDP
 * program knows every next hop's MAC from the topology alone.
 *
 *   innet-F-h0                 innet-F-leaf0                 innet-F-spine0
 *   eth0 10.0.30.1 ══veth══ p4 10.0.20.9      p0 10.0.20.1 ══veth══ p0 10.0.20.2
 *   peer 10.0.20.9             peer 10.0.30.1  peer 10.0.20.2         peer 10.0.20.1
 *   default via 10.0.20.9      ip_forward=1, a route to every host
 *                              by its first shortest-path port
 *
 * A link with emulation settings (loss, dup, reorder, delay_us, jitter_us) gets
 * the kernel's own faults, outside any switch: it becomes a wire — two veth
 * pairs and a bridge in a namespace of its own, innet-F-_wireN — and the
 * faults sit on the egress of each bridge port, so each direction is hit
 * once, as the user-space engine's emulation does on loopback:
 *
 *   innet-F-a: p0 ══ veth ══ innet-F-_wire3: a ─ br ─ b ══ veth ══ innet-F-b: p2
 *                                  egress of a and of b: the faults
 *
 * Not on the nodes' own ends: an XDP switch's frames (XDP_TX, redirect)
 * bypass its device's qdisc and tc hooks, and a frame redirected into an XDP
 * switch's port never meets one; a bridge's forwarding always does. The
 * faults are netem (reorder delays the others: reorder without delay_us gets
 * 1 ms) where the kernel has it; this one is built without it
 * (CONFIG_NET_SCH_NETEM), and then loss and duplication are a tc egress
 * eBPF program (linkfault.bpf.c) and reordering an HTB slow lane it puts a
 * fraction of the frames in. delay_us and jitter_us need netem.
 *
 * A P4 switch ("p4") has only raw ports: no address of its own on them, no
 * forwarding and no IPv6 in its namespace; the address allocated to each of
 * its ports is its neighbour's gateway (link a_gw/b_gw), with the port's MAC
 * as a static neighbour, so a host's default route crosses the P4 program
 * and the P4 program sees the host's frames with the MACs of the scheme
 * above (its commands file's table entries can name them).
 *
 * Switch namespaces also route plain IP between hosts (ip_forward, routes to
 * every host address), so traffic that is not for a program (a replica's
 * snapshot, an ssh) still crosses the fabric through the kernel; hosts have a
 * default route through their first link.
 *
 * Every veth end that is not an XDP switch's port gets a two-instruction
 * XDP_PASS program: a veth only takes the frames an XDP program on its peer
 * transmits (XDP_TX) or redirects into it when its own receive side runs in
 * XDP mode (measured: with GRO instead of a program, redirected frames
 * arrive but XDP_TX'd ones are lost). The program stays attached (netlink,
 * not a link) until the namespace is deleted.
 *
 * The work is done by iproute2 (`ip -batch`, one run for the links and one
 * per namespace) and, for what ip cannot set, a child that enters the
 * namespace (sysctls, GRO). Everything needs root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>

#include "innet/topology.h"
#include "engine/bpf_objects.h"

#define NETNS_DIR "/run/netns"

static void ip4(uint32_t ip, char out[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ip) };
	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

static void mac_str(const uint8_t m[6], char out[18])
{
	snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* Run `TOOL [-n NS] -batch FILE` (TOOL: ip or tc, both iproute2); 0 or -1
 * with the command's own message in err. */
static int tool_batch(const char *tool, const char *ns, const char *file, char *err, size_t errlen)
{
	char cmd[512], out[1024];
	snprintf(cmd, sizeof(cmd), "%s %s%s -batch %s 2>&1", tool, ns ? "-n " : "", ns ? ns : "", file);
	FILE *f = popen(cmd, "r");
	if (f == NULL) {
		int e = errno;
		snprintf(err, errlen, "cannot run %s (iproute2): %s", tool, strerror(e));
		return -e;
	}
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	int st = pclose(f);
	if (st != 0) {
		snprintf(err, errlen, "%s%s%s failed: %s", tool, ns ? " -n " : "", ns ? ns : "", out);
		return -EIO;
	}
	return 0;
}

static int ip_batch(const char *ns, const char *file, char *err, size_t errlen)
{
	return tool_batch("ip", ns, file, err, errlen);
}

int innet_topology_enter(const struct innet_topology *t, uint32_t node)
{
	char name[256], path[512];
	innet_topology_netns_name(t, node, name, sizeof(name));
	snprintf(path, sizeof(path), NETNS_DIR "/%s", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

/* XDP_PASS, for the veth ends that must run XDP to take frames from an XDP
 * switch. */
static int pass_prog(void)
{
	struct bpf_insn insns[2];
	memset(insns, 0, sizeof(insns));
	insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
	insns[0].dst_reg = BPF_REG_0;
	insns[0].imm = XDP_PASS;
	insns[1].code = BPF_JMP | BPF_EXIT;
	return bpf_prog_load(BPF_PROG_TYPE_XDP, "innet_pass", "GPL", insns, 2, NULL);
}

/* ---- wires: a faulty link's own namespace ------------------------------- */

static bool link_faulty(const struct innet_topo_link *l)
{
	return innet_link_faulty(&l->emu);
}

static void wire_name(const struct innet_topology *t, uint32_t li, char *out, size_t len)
{
	snprintf(out, len, "innet-%s-_wire%u", t->name, li);
}

static uint32_t prob32(double p)
{
	if (p <= 0)
		return 0;
	if (p >= 1)
		return UINT32_MAX;
	return (uint32_t)(p * 4294967296.0);
}

/* The eBPF fault program on the egress of dev (in the current namespace). */
static int attach_linkfault(const char *dev, const struct innet_link_conf *e)
{
	int ifindex = (int)if_nametoindex(dev);
	if (ifindex == 0)
		return -ENODEV;
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "innet_linkfault");
	struct bpf_object *obj = bpf_object__open_mem(innet_bpf_aux_linkfault,
						      (size_t)(innet_bpf_aux_linkfault_end -
							       innet_bpf_aux_linkfault), &oo);
	if (obj == NULL)
		return -errno ? -errno : -EINVAL;
	struct { uint32_t loss, dup, reorder, slow, fast; } c = {
		prob32(e->loss), prob32(e->dup), prob32(e->reorder), 0x10020u, 0x10010u,
	};
	int rc = innet_bpf_set_rodata(obj, ".rodata", &c, sizeof(c));
	if (rc == 0)
		rc = bpf_object__load(obj);
	if (rc == 0) {
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
		LIBBPF_OPTS(bpf_tc_opts, to, .prog_fd = bpf_program__fd(
						     bpf_object__find_program_by_name(obj, "innet_linkfault")));
		to.handle = 1;
		to.priority = 1;   /* innet_topology_wire_stats finds it by these */
		rc = bpf_tc_hook_create(&hook);
		if (rc == -EEXIST)
			rc = 0;
		if (rc == 0)
			rc = bpf_tc_attach(&hook, &to);
	}
	bpf_object__close(obj);   /* the attached filter keeps the program */
	return rc;
}

int innet_topology_wire_stats(const struct innet_topology *t, uint32_t li, int toward_b,
			      struct innet_wire_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (li >= t->n_links || !link_faulty(&t->links[li]))
		return -ENOENT;
	char ns[256], path[512];
	wire_name(t, li, ns, sizeof(ns));
	snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int wfd = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || wfd < 0) {
		int e = errno;
		if (self >= 0)
			close(self);
		if (wfd >= 0)
			close(wfd);
		return -e;
	}
	/* the program on the port's egress: found by netlink, in its namespace */
	int rc = setns(wfd, CLONE_NEWNET) == 0 ? 0 : -errno;
	uint32_t prog_id = 0;
	if (rc == 0) {
		int ifindex = (int)if_nametoindex(toward_b ? "b" : "a");
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_EGRESS);
		LIBBPF_OPTS(bpf_tc_opts, to, .handle = 1, .priority = 1);
		rc = ifindex == 0 ? -ENODEV : bpf_tc_query(&hook, &to);
		prog_id = to.prog_id;
		if (setns(self, CLONE_NEWNET) != 0 && rc == 0)
			rc = -errno;
	}
	close(self);
	close(wfd);
	if (rc != 0)
		return rc == -ENOENT ? -EOPNOTSUPP : rc;   /* no program: netem carries the faults */
	int pfd = bpf_prog_get_fd_by_id(prog_id);
	if (pfd < 0)
		return -errno;
	uint32_t map_ids[4] = { 0 };
	struct bpf_prog_info pi;
	memset(&pi, 0, sizeof(pi));
	pi.nr_map_ids = 4;
	pi.map_ids = (uint64_t)(unsigned long)map_ids;
	uint32_t len = sizeof(pi);
	rc = bpf_obj_get_info_by_fd(pfd, &pi, &len);
	close(pfd);
	if (rc != 0)
		return rc;
	int ncpu = libbpf_num_possible_cpus();
	for (uint32_t i = 0; i < pi.nr_map_ids && i < 4; i++) {
		int mfd = bpf_map_get_fd_by_id(map_ids[i]);
		if (mfd < 0)
			continue;
		struct bpf_map_info mi;
		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		if (bpf_obj_get_info_by_fd(mfd, &mi, &len) == 0 && mi.type == BPF_MAP_TYPE_PERCPU_ARRAY &&
		    mi.value_size == sizeof(struct innet_wire_stats) && ncpu > 0) {
			struct innet_wire_stats *v = calloc((size_t)ncpu, sizeof(*v));
			uint32_t zero = 0;
			if (v != NULL && bpf_map_lookup_elem(mfd, &zero, v) == 0)
				for (int c = 0; c < ncpu; c++) {
					out->frames += v[c].frames;
					out->lost += v[c].lost;
					out->duplicated += v[c].duplicated;
					out->slowed += v[c].slowed;
				}
			free(v);
		}
		close(mfd);
	}
	return 0;
}

/* Link li's wire namespace: the bridge between its two ports, the XDP_PASS
 * program on both (they take frames that XDP switches redirect into them)
 * and the faults. 0, or -1 with a message in err. */
static int pass_prog(void);
/* Enter the network namespace named ns (in a child that then _exits). */
static int enter_named(const char *ns)
{
	char path[512];
	snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 || setns(fd, CLONE_NEWNET) != 0 ? -1 : 0;
}

/* A wire is a cable: it must send nothing of its own. With IPv6 on, the
 * kernel gives its bridge and ports link-local addresses and sends router
 * solicitations, DAD and MLD reports through them, frames no node sent
 * (a P4 program that sends what it does not parse back out of its port, as
 * P4xos's acceptor does, then keeps them circling a flooding switch). Done
 * before the devices come up. */
static int wire_quiet(const char *ns)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (enter_named(ns) != 0)
			_exit(1);
		static const char *const knobs[] = { "/proc/sys/net/ipv6/conf/all/disable_ipv6",
						     "/proc/sys/net/ipv6/conf/default/disable_ipv6" };
		for (int k = 0; k < 2; k++) {
			int kfd = open(knobs[k], O_WRONLY | O_CLOEXEC);
			if (kfd < 0)
				_exit(errno == ENOENT ? 0 : 2); /* a kernel without IPv6 */
			if (write(kfd, "1", 1) != 1)
				_exit(3);
			close(kfd);
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -EIO;
	return 0;
}

static int wire_up(const struct innet_topology *t, uint32_t li, char *err, size_t errlen)
{
	const struct innet_topo_link *l = &t->links[li];
	const struct innet_link_conf *e = &l->emu;
	char ns[256], file[128];
	wire_name(t, li, ns, sizeof(ns));
	if (wire_quiet(ns) != 0) {
		snprintf(err, errlen, "link %s-%s: cannot turn IPv6 off in its wire's namespace %s",
			 t->nodes[l->a].name, t->nodes[l->b].name, ns);
		return -EIO;
	}
	snprintf(file, sizeof(file), "/tmp/innet-netns-%d.wire", (int)getpid());
	FILE *f = fopen(file, "w");
	if (f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", file, strerror(errno));
		return -EIO;
	}
	fprintf(f, "link set dev lo up\nlink add name br mtu %u type bridge\n"
		   "link set dev a master br\nlink set dev b master br\n"
		   "link set dev a up\nlink set dev b up\nlink set dev br up\n", l->mtu);
	fclose(f);
	int rc = ip_batch(ns, file, err, errlen);
	/* netem where the kernel has it */
	bool netem = false;
	if (rc == 0) {
		f = fopen(file, "w");
		if (f == NULL) {
			unlink(file);
			snprintf(err, errlen, "cannot write %s", file);
			return -EIO;
		}
		uint32_t delay = e->delay_us ? e->delay_us : (e->reorder > 0 ? 1000 : 0);
		for (int d = 0; d < 2; d++) {
			fprintf(f, "qdisc replace dev %s root netem limit 100000", d ? "b" : "a");
			if (delay)
				fprintf(f, " delay %uus %uus", delay, e->jitter_us);
			if (e->loss > 0)
				fprintf(f, " loss %.4f%%", e->loss * 100);
			if (e->dup > 0)
				fprintf(f, " duplicate %.4f%%", e->dup * 100);
			if (e->reorder > 0)
				fprintf(f, " reorder %.4f%%", e->reorder * 100);
			fprintf(f, "\n");
		}
		fclose(f);
		char terr[512];
		netem = tool_batch("tc", ns, file, terr, sizeof(terr)) == 0;
		if (!netem && (e->delay_us || e->jitter_us)) {
			snprintf(err, errlen, "link %s-%s: delay_us and jitter_us need the kernel's netem "
				 "qdisc, which this kernel lacks (%s); loss, dup and reorder work without it",
				 t->nodes[l->a].name, t->nodes[l->b].name, terr);
			rc = -1;
		}
	}
	/* else the HTB slow lane for reordering, then the eBPF program */
	if (rc == 0 && !netem && e->reorder > 0) {
		f = fopen(file, "w");
		if (f == NULL) {
			unlink(file);
			snprintf(err, errlen, "cannot write %s", file);
			return -EIO;
		}
		for (int d = 0; d < 2; d++) {
			const char *dev = d ? "b" : "a";
			fprintf(f, "qdisc replace dev %s root handle 1: htb default 10\n"
				   "class add dev %s parent 1: classid 1:10 htb rate 100gbit quantum 60000\n"
				   "class add dev %s parent 1: classid 1:20 htb rate 2mbit ceil 2mbit "
				   "burst 1b cburst 1b\n"
				   "qdisc add dev %s parent 1:20 handle 20: pfifo limit 1000\n",
				dev, dev, dev, dev);
		}
		fclose(f);
		rc = tool_batch("tc", ns, file, err, errlen);
	}
	unlink(file);
	if (rc != 0)
		return -EIO;
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -EIO;
	}
	if (pid == 0) {
		if (enter_named(ns) != 0)
			_exit(1);
		int prog = pass_prog();
		if (prog < 0)
			_exit(2);
		const char *devs[2] = { "a", "b" };
		for (int d = 0; d < 2; d++) {
			int ifindex = (int)if_nametoindex(devs[d]);
			if (ifindex == 0 || bpf_xdp_attach(ifindex, prog, XDP_FLAGS_DRV_MODE, NULL) != 0)
				_exit(3);
			if (!netem && attach_linkfault(devs[d], e) != 0)
				_exit(4);
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "cannot set up the wire of link %s-%s (XDP pass program, "
			 "fault program: step %d)", t->nodes[l->a].name, t->nodes[l->b].name,
			 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return -EIO;
	}
	return 0;
}

/* Things ip cannot do, done from inside the namespace: ip_forward and the
 * XDP_PASS program. */
static int ns_tune(const struct innet_topology *t, uint32_t node)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (innet_topology_enter(t, node) != 0)
			_exit(1);
		const struct innet_topo_node *n = &t->nodes[node];
		if (n->kind == INNET_TOPO_SWITCH && !n->p4) {
			int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY);
			if (fd < 0 || write(fd, "1", 1) != 1)
				_exit(2);
			close(fd);
		}
		if (n->p4) {
			/* its ports are the P4 program's alone: no IPv6 of the
			 * kernel's own (router solicitations, DAD) on them */
			int fd = open("/proc/sys/net/ipv6/conf/all/disable_ipv6", O_WRONLY);
			if (fd >= 0) {
				if (write(fd, "1", 1) != 1) {
					/* best effort: a kernel without IPv6 has none */
				}
				close(fd);
			}
		}
		if (n->kind == INNET_TOPO_SWITCH && innet_target_info(n->target) != NULL &&
		    innet_target_info(n->target)->attaches_xdp)
			_exit(0);   /* its own program attaches when it starts */
		int prog = pass_prog();
		if (prog < 0)
			_exit(3);
		for (uint32_t j = 0; j < n->n_links; j++) {
			char dev[IFNAMSIZ];
			innet_topology_dev(t, node, n->links[j], dev, sizeof(dev));
			int ifindex = (int)if_nametoindex(dev);
			if (ifindex == 0 || bpf_xdp_attach(ifindex, prog, XDP_FLAGS_DRV_MODE, NULL) != 0)
				_exit(4);
		}
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* The address of node's end of link li, and of the other end. */
static void end_addrs(const struct innet_topology *t, uint32_t node, uint32_t li, uint32_t *local,
		      uint32_t *remote)
{
	const struct innet_topo_link *l = &t->links[li];
	bool is_a = l->a == node;
	uint32_t other = is_a ? l->b : l->a;
	uint32_t myport = is_a ? l->a_port : l->b_port, oport = is_a ? l->b_port : l->a_port;
	*local = myport == INNET_TOPO_NO_PORT ? t->nodes[node].addr
					      : t->nodes[node].conf->ports[myport].ip;
	*remote = oport == INNET_TOPO_NO_PORT ? t->nodes[other].addr
					      : t->nodes[other].conf->ports[oport].ip;
	if (*remote == 0)   /* a P4 switch's raw port: its gateway address */
		*remote = is_a ? l->b_gw : l->a_gw;
}

static int node_batch(const struct innet_topology *t, uint32_t node, const char *file, char *err,
		      size_t errlen)
{
	const struct innet_topo_node *n = &t->nodes[node];
	FILE *f = fopen(file, "w");
	if (f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", file, strerror(errno));
		return -EIO;
	}
	fprintf(f, "link set lo up\n");
	uint32_t default_via = 0;
	char dev[IFNAMSIZ], la[INET_ADDRSTRLEN], ra[INET_ADDRSTRLEN], mac[18];
	for (uint32_t j = 0; j < n->n_links; j++) {
		uint32_t li = n->links[j], local, remote;
		const struct innet_topo_link *l = &t->links[li];
		uint32_t other = l->a == node ? l->b : l->a;
		innet_topology_dev(t, node, li, dev, sizeof(dev));
		fprintf(f, "link set %s up\n", dev);
		end_addrs(t, node, li, &local, &remote);
		if (local == 0)
			continue;   /* a raw port: frames only */
		ip4(local, la);
		if (remote != 0) {
			ip4(remote, ra);
			fprintf(f, "addr add %s peer %s dev %s\n", la, ra, dev);
			uint8_t m[6];
			uint32_t oport = l->a == node ? l->b_port : l->a_port;
			const struct innet_topo_node *on = &t->nodes[other];
			uint32_t oidx = oport;
			if (oport == INNET_TOPO_NO_PORT)
				for (uint32_t k = 0; k < on->n_links; k++)
					if (on->links[k] == li)
						oidx = k;
			innet_topology_mac(on->node_id, oidx, m);
			mac_str(m, mac);
			fprintf(f, "neigh replace %s lladdr %s dev %s nud permanent\n", ra, mac, dev);
			if (default_via == 0)
				default_via = remote;
		} else {
			fprintf(f, "addr add %s/32 dev %s\n", la, dev);
		}
	}
	if (n->kind == INNET_TOPO_HOST && default_via != 0) {
		ip4(default_via, ra);
		fprintf(f, "route add default via %s\n", ra);
	}
	if (n->kind == INNET_TOPO_SWITCH) {
		/* every host not on one of our links, by the first shortest-path port */
		for (uint32_t h = t->n_switches; h < t->n_nodes; h++) {
			uint16_t ports[INNET_MAX_PORTS];
			int k = innet_topology_next_hops(t, node, h, ports, INNET_MAX_PORTS);
			if (k <= 0)
				continue;
			const struct innet_port_conf *pc = &n->conf->ports[ports[0]];
			if (pc->peer_ip == t->nodes[h].addr || pc->iface[0] != '\0' || pc->peer_ip == 0)
				continue;
			ip4(t->nodes[h].addr, la);
			ip4(pc->peer_ip, ra);
			fprintf(f, "route add %s/32 via %s dev %s\n", la, ra, pc->dev);
		}
	}
	if (fclose(f) != 0)
		return -EIO;
	char ns[256];
	innet_topology_netns_name(t, node, ns, sizeof(ns));
	return ip_batch(ns, file, err, errlen);
}

int innet_topology_netns_down(const char *topology_name)
{
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "innet-%s-", topology_name);
	DIR *d = opendir(NETNS_DIR);
	if (d == NULL)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *e;
	int removed = 0;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "ip netns del '%s' 2>/dev/null", e->d_name);
		if (system(cmd) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}

int innet_topology_netns_up(const struct innet_topology *t, char *err, size_t errlen)
{
	if (!t->netns)
		return 0;
	if (geteuid() != 0) {
		const struct innet_target_info *ti = innet_target_info(t->target);
		snprintf(err, errlen, "%s runs in network namespaces (netns mode%s%s%s): that needs root",
			 t->name, ti != NULL && ti->needs_devices ? ", " : "",
			 ti != NULL && ti->needs_devices ? ti->name : "",
			 ti != NULL && ti->needs_devices ? " target" : "");
		return -EPERM;
	}
	char ns[256], file[128], la[INET_ADDRSTRLEN];
	for (uint32_t i = 0; i < t->n_nodes; i++) {
		innet_topology_netns_name(t, i, ns, sizeof(ns));
		char path[512];
		snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
		struct stat st;
		if (stat(path, &st) == 0) {
			snprintf(err, errlen, "network namespace %s exists already: is %s up? "
				 "(innet fabric down removes it)", ns, t->name);
			return -EEXIST;
		}
	}
	snprintf(file, sizeof(file), "/tmp/innet-netns-%d.batch", (int)getpid());
	FILE *f = fopen(file, "w");
	if (f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", file, strerror(errno));
		return -errno;
	}
	for (uint32_t i = 0; i < t->n_nodes; i++) {
		innet_topology_netns_name(t, i, ns, sizeof(ns));
		fprintf(f, "netns add %s\n", ns);
	}
	for (uint32_t li = 0; li < t->n_links; li++) {
		if (!link_faulty(&t->links[li]))
			continue;
		wire_name(t, li, ns, sizeof(ns));
		fprintf(f, "netns add %s\n", ns);
	}
	for (uint32_t li = 0; li < t->n_links; li++) {
		const struct innet_topo_link *l = &t->links[li];
		char nsa[256], nsb[256], da[IFNAMSIZ], db[IFNAMSIZ], ma[18], mb[18];
		uint8_t m[6];
		innet_topology_netns_name(t, l->a, nsa, sizeof(nsa));
		innet_topology_netns_name(t, l->b, nsb, sizeof(nsb));
		innet_topology_dev(t, l->a, li, da, sizeof(da));
		innet_topology_dev(t, l->b, li, db, sizeof(db));
		const struct innet_topo_node *na = &t->nodes[l->a], *nb = &t->nodes[l->b];
		uint32_t ia = l->a_port, ib = l->b_port;
		for (uint32_t k = 0; ia == INNET_TOPO_NO_PORT && k < na->n_links; k++)
			if (na->links[k] == li)
				ia = k;
		for (uint32_t k = 0; ib == INNET_TOPO_NO_PORT && k < nb->n_links; k++)
			if (nb->links[k] == li)
				ib = k;
		innet_topology_mac(na->node_id, ia, m);
		mac_str(m, ma);
		innet_topology_mac(nb->node_id, ib, m);
		mac_str(m, mb);
		if (link_faulty(l)) {
			/* through the link's wire (the top of this file) */
			char nsw[256];
			wire_name(t, li, nsw, sizeof(nsw));
			fprintf(f, "link add %s netns %s address %s mtu %u type veth peer name a netns %s "
				"mtu %u\n", da, nsa, ma, l->mtu, nsw, l->mtu);
			fprintf(f, "link add %s netns %s address %s mtu %u type veth peer name b netns %s "
				"mtu %u\n", db, nsb, mb, l->mtu, nsw, l->mtu);
		} else {
			fprintf(f, "link add %s netns %s address %s mtu %u type veth peer name %s netns %s "
				"address %s mtu %u\n", da, nsa, ma, l->mtu, db, nsb, mb, l->mtu);
		}
	}
	fclose(f);
	int rc = ip_batch(NULL, file, err, errlen);
	for (uint32_t li = 0; rc == 0 && li < t->n_links; li++)
		if (link_faulty(&t->links[li]))
			rc = wire_up(t, li, err, errlen);
	for (uint32_t i = 0; rc == 0 && i < t->n_nodes; i++) {
		rc = node_batch(t, i, file, err, errlen);
		if (rc == 0 && ns_tune(t, i) != 0) {
			snprintf(err, errlen, "cannot set up namespace of %s (ip_forward, XDP pass program)",
				 t->nodes[i].name);
			rc = -1;
		}
	}
	unlink(file);
	if (rc != 0) {
		innet_topology_netns_down(t->name);
		return -EIO;
	}
	(void)la;
	return 0;
}
