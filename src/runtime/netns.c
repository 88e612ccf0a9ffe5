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
 * A link's emulation settings (loss, dup, reorder, delay_us, jitter_us) become
 * the kernel's own faults: a netem qdisc on each end's egress, so each
 * direction is hit once, as the user-space engine's emulation does on
 * loopback (netem reorders by delaying the others: reorder without delay_us
 * gets a 1 ms delay).
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

/* Run `ip [-n NS] -batch FILE`; 0 or -1 with the command's own message in err. */
static int ip_batch(const char *ns, const char *file, char *err, size_t errlen)
{
	char cmd[512], out[1024];
	snprintf(cmd, sizeof(cmd), "ip %s%s -batch %s 2>&1", ns ? "-n " : "", ns ? ns : "", file);
	FILE *f = popen(cmd, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot run ip (iproute2): %s", strerror(errno));
		return -1;
	}
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	int st = pclose(f);
	if (st != 0) {
		snprintf(err, errlen, "ip%s%s failed: %s", ns ? " -n " : "", ns ? ns : "", out);
		return -1;
	}
	return 0;
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
		if (n->kind == INNET_TOPO_SWITCH) {
			int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY);
			if (fd < 0 || write(fd, "1", 1) != 1)
				_exit(2);
			close(fd);
		}
		if (n->kind == INNET_TOPO_SWITCH && n->target == INNET_TARGET_XDP)
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
}

static int node_batch(const struct innet_topology *t, uint32_t node, const char *file, char *err,
		      size_t errlen)
{
	const struct innet_topo_node *n = &t->nodes[node];
	FILE *f = fopen(file, "w");
	if (f == NULL) {
		snprintf(err, errlen, "cannot write %s: %s", file, strerror(errno));
		return -1;
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
		const struct innet_link_conf *e = &l->emu;
		if (e->loss > 0 || e->dup > 0 || e->reorder > 0 || e->delay_us || e->jitter_us) {
			uint32_t delay = e->delay_us ? e->delay_us : (e->reorder > 0 ? 1000 : 0);
			fprintf(f, "qdisc replace dev %s root netem limit 100000", dev);
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
		return -1;
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
		snprintf(err, errlen, "%s runs in network namespaces (netns mode%s): that needs root",
			 t->name, t->target == INNET_TARGET_XDP ? ", XDP target" : "");
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
		fprintf(f, "link add %s netns %s address %s mtu %u type veth peer name %s netns %s "
			"address %s mtu %u\n", da, nsa, ma, l->mtu, db, nsb, mb, l->mtu);
	}
	fclose(f);
	int rc = ip_batch(NULL, file, err, errlen);
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
