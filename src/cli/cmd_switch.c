/*
 * cmd_switch.c — `innet switch`: run one programmable switch until a signal
 * (or --duration), from a topology file or from flags; and `innet programs`.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "innet/metrics.h"
#include "innet/parse.h"
#include "innet/program.h"
#include "innet/resources.h"
#include "innet/switch.h"
#include "innet/topology.h"
#include "cli/cmds.h"
#include "innet/fabric.h"

static void switch_usage(FILE *f)
{
	fprintf(f,
		"usage: innet switch --topology FILE --name SWITCH [options]\n"
		"       innet switch [--name NAME] --port IP[=PEER[:UDP]][@DEV]|iface:DEV... --program PROG[/INST]@PORTS\n"
		"                    [--args JSON] [--program ...] [options]\n\n"
		"Run one programmable switch until SIGINT/SIGTERM (or --duration).\n\n"
		"  -t, --topology FILE   take the switch's ports and programs from a topology file\n"
		"  -n, --name NAME       the switch (in the topology), or this switch's name\n"
		"  -p, --port SPEC       add a port: local IPv4 address, optionally =PEER[:UDP];\n"
		"                        or iface:DEV, a raw port on interface DEV (AF_PACKET, root);\n"
		"                        @DEV names the port's network device (the XDP target)\n"
		"      --target T        udp (the user-space engine, default) or xdp: the programs'\n"
		"                        eBPF objects on every port's device (root; docs/xdp.md)\n"
		"  -P, --program SPEC    bind program PROG (instance name INST) to PORTS: a comma\n"
		"                        list of UDP ports and ranges A-B, and/or \"raw\" (the raw\n"
		"                        ports' frames), e.g. lb@5353,20000-20255 or l2fwd@raw\n"
		"  -a, --args JSON       settings (a JSON object) for the last --program\n"
		"  -l, --link SPEC       emulate the last --port's link: loss=P,dup=P,reorder=P,\n"
		"                        delay_us=N,jitter_us=N,seed=N,ingress=0|1,egress=0|1\n"
		"  -w, --workers N       worker threads (default 1, or the topology's)\n"
		"  -c, --ctl PATH        control socket (default /tmp/innet-NAME.sock; \"\" for none)\n"
		"      --metrics IP:PORT serve the counters in the Prometheus text format over HTTP\n"
		"                        at http://IP:PORT/metrics (port 0: any free port; \"\" for\n"
		"                        none, overriding the topology's \"metrics\")\n"
		"      --node ID         fabric node id (default 1)\n"
		"      --seed N          seed for link emulation and PRNGs (default 1)\n"
		"  -d, --duration SEC    exit after SEC seconds\n"
		"      --pidfile FILE    write the process id to FILE\n"
		"      --no-gso          send every datagram on its own (no UDP GSO coalescing)\n"
		"      --check           build the switch, print each program's resource report\n"
		"                        (fits Tofino1/Tofino2/Trio or not, and why) and exit\n"
		"  -h, --help            this text\n\n"
		"Prints a line containing \"ready\" on stderr once every socket is bound.\n"
		"See docs/man/innet-switch.md.\n");
}

/* IP[=PEER[:UDP]][@DEV], or iface:DEV */
static int parse_port(const char *spec, struct innet_port_conf *p, uint32_t index)
{
	char buf[128];
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	if (!strncmp(spec, "iface:", 6)) {
		const char *dev = spec + 6;
		if (dev[0] == '\0' || strlen(dev) >= sizeof(p->iface) || strchr(dev, '/') ||
		    strchr(dev, ' '))
			return -EINVAL;
		snprintf(p->iface, sizeof(p->iface), "%s", dev);
		snprintf(p->name, sizeof(p->name), "%s", dev);
		return 0;
	}
	strcpy(buf, spec);
	char *dev = strchr(buf, '@');
	if (dev != NULL) {
		*dev++ = '\0';
		if (dev[0] == '\0' || strlen(dev) >= sizeof(p->dev) || strchr(dev, '/') ||
		    strchr(dev, ' '))
			return -EINVAL;
		snprintf(p->dev, sizeof(p->dev), "%s", dev);
	}
	char *peer = strchr(buf, '=');
	if (peer != NULL)
		*peer++ = '\0';
	if (innet_parse_ip(buf, &p->ip) != 0)
		return -EINVAL;
	if (peer != NULL) {
		char *udp = strchr(peer, ':');
		if (udp != NULL) {
			uint64_t u;
			*udp++ = '\0';
			if (innet_parse_u64(udp, 0, 65535, &u) != 0 || u == 0)
				return -EINVAL;
			p->peer_udp = (uint16_t)u;
		}
		if (innet_parse_ip(peer, &p->peer_ip) != 0)
			return -EINVAL;
	}
	snprintf(p->name, sizeof(p->name), "p%u", index);
	return 0;
}

/* PROG[/INST]@PORTS, PORTS a comma list of UDP, A-B or raw. -EINVAL with a
 * message in err (or "" for the usage line), -ENOENT: unknown program. */
static int parse_program(const char *spec, struct innet_prog_conf *pc, char *err, size_t errlen)
{
	err[0] = '\0';
	char buf[256];
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	char *at = strchr(buf, '@');
	if (at == NULL)
		return -EINVAL;
	*at++ = '\0';
	char *inst = strchr(buf, '/');
	if (inst != NULL)
		*inst++ = '\0';
	pc->program = innet_program_find(buf);
	if (pc->program == NULL)
		return -ENOENT;
	const char *iname = inst && *inst ? inst : buf;
	if (strlen(iname) >= sizeof(pc->name))
		return -EINVAL;
	memcpy(pc->name, iname, strlen(iname) + 1);
	char *save = NULL;
	for (char *tok = strtok_r(at, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t lo, hi;
		if (!strcmp(tok, "raw")) {
			pc->raw = true;
			continue;
		}
		if (innet_udp_range_parse(tok, &lo, &hi) != 0)
			return -EINVAL;
		char msg[160];
		if (innet_prog_conf_add_udp(pc, lo, hi, msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "%s", msg);
			return -EINVAL;
		}
	}
	return pc->n_udp || pc->raw ? 0 : -EINVAL;
}

static int parse_link(const char *spec, struct innet_link_conf *l)
{
	char buf[256];
	if (strlen(spec) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, spec);
	l->on_egress = l->on_ingress = true;
	char *save = NULL;
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');
		if (v == NULL)
			return -EINVAL;
		*v++ = '\0';
		char *end;
		uint64_t u;
		if (!strcmp(kv, "loss") || !strcmp(kv, "dup") || !strcmp(kv, "reorder")) {
			errno = 0;
			double p = strtod(v, &end);
			if (errno || end == v || *end || !(p >= 0 && p <= 1))
				return -EINVAL;
			*(kv[0] == 'l' ? &l->loss : kv[0] == 'd' ? &l->dup : &l->reorder) = p;
		} else if (!strcmp(kv, "delay_us") || !strcmp(kv, "jitter_us")) {
			if (innet_parse_u64(v, 0, 10000000, &u) != 0)
				return -EINVAL;
			*(kv[0] == 'd' ? &l->delay_us : &l->jitter_us) = (uint32_t)u;
		} else if (!strcmp(kv, "seed")) {
			if (innet_parse_u64(v, 0, UINT64_MAX, &u) != 0)
				return -EINVAL;
			l->seed = u;
		} else if (!strcmp(kv, "ingress") || !strcmp(kv, "egress")) {
			if (innet_parse_u64(v, 0, 1, &u) != 0)
				return -EINVAL;
			*(kv[0] == 'i' ? &l->on_ingress : &l->on_egress) = u != 0;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");
	if (f == NULL)
		return -errno;
	fprintf(f, "%ld\n", (long)getpid());
	return fclose(f) == 0 ? 0 : -errno;
}

int cmd_switch(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' }, { "name", required_argument, NULL, 'n' },
		{ "port", required_argument, NULL, 'p' },     { "program", required_argument, NULL, 'P' },
		{ "args", required_argument, NULL, 'a' },     { "link", required_argument, NULL, 'l' },
		{ "workers", required_argument, NULL, 'w' },  { "ctl", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'N' },     { "seed", required_argument, NULL, 'S' },
		{ "duration", required_argument, NULL, 'd' }, { "pidfile", required_argument, NULL, 'F' },
		{ "check", no_argument, NULL, 'C' },          { "no-gso", no_argument, NULL, 'G' },
		{ "target", required_argument, NULL, 'T' },   { "help", no_argument, NULL, 'h' },
		{ "metrics", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	static struct innet_switch_conf conf;
	memset(&conf, 0, sizeof(conf));
	const char *topo = NULL, *name = NULL, *ctl = NULL, *pidfile = NULL, *metrics = NULL;
	uint64_t workers = 0, duration = 0, node = 1, seed = 1;
	bool have_seed = false, have_node = false, check = false, no_gso = false;
	const char *target = NULL;
	int c, rc = 2;
	char *args_text[16] = { 0 };

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:n:p:P:a:l:w:c:d:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': topo = optarg; break;
		case 'n': name = optarg; break;
		case 'p':
			if (conf.n_ports == INNET_MAX_PORTS ||
			    parse_port(optarg, &conf.ports[conf.n_ports], conf.n_ports) != 0) {
				fprintf(stderr, "innet switch: bad --port '%s' (want IP[=PEER[:UDP]][@DEV] or "
						"iface:DEV)\n", optarg);
				goto out;
			}
			conf.n_ports++;
			break;
		case 'P':
			if (conf.n_progs == 16) {
				fprintf(stderr, "innet switch: at most 16 programs\n");
				goto out;
			}
			char perr[200];
			rc = parse_program(optarg, &conf.progs[conf.n_progs], perr, sizeof(perr));
			if (rc == -ENOENT) {
				fprintf(stderr, "innet switch: unknown program in '%s'; known:", optarg);
				for (const struct innet_program *const *p = innet_program_list(); *p; p++)
					fprintf(stderr, " %s", (*p)->name);
				fprintf(stderr, "\n");
				rc = 2;
				goto out;
			}
			if (rc != 0) {
				if (perr[0] != '\0')
					fprintf(stderr, "innet switch: bad --program '%s': %s\n", optarg, perr);
				else
					fprintf(stderr, "innet switch: bad --program '%s' (want PROG[/INST]@PORTS, "
							"PORTS a comma list of UDP ports, ranges A-B, raw)\n",
						optarg);
				rc = 2;
				goto out;
			}
			rc = 2; /* a later bad option is a usage error too */
			conf.n_progs++;
			break;
		case 'a':
			if (conf.n_progs == 0) {
				fprintf(stderr, "innet switch: --args must follow a --program\n");
				goto out;
			}
			free(args_text[conf.n_progs - 1]);
			args_text[conf.n_progs - 1] = strdup(optarg);
			conf.progs[conf.n_progs - 1].args_json = args_text[conf.n_progs - 1];
			break;
		case 'l':
			if (conf.n_ports == 0 || parse_link(optarg, &conf.ports[conf.n_ports - 1].link) != 0) {
				fprintf(stderr, "innet switch: bad --link '%s' (must follow a --port; "
						"loss=P,dup=P,reorder=P,delay_us=N,jitter_us=N,seed=N)\n",
					optarg);
				goto out;
			}
			break;
		case 'w':
			if (innet_parse_u64(optarg, 0, 64, &workers) != 0 || workers == 0) {
				fprintf(stderr, "innet switch: --workers wants 1..64\n");
				goto out;
			}
			break;
		case 'c': ctl = optarg; break;
		case 'N':
			if (innet_parse_u64(optarg, 0, 65535, &node) != 0) {
				fprintf(stderr, "innet switch: --node wants 0..65535\n");
				goto out;
			}
			have_node = true;
			break;
		case 'S':
			if (innet_parse_u64(optarg, 0, UINT64_MAX, &seed) != 0) {
				fprintf(stderr, "innet switch: --seed wants a number\n");
				goto out;
			}
			have_seed = true;
			break;
		case 'd':
			if (innet_parse_u64(optarg, 0, 86400 * 365, &duration) != 0) {
				fprintf(stderr, "innet switch: --duration wants seconds\n");
				goto out;
			}
			break;
		case 'F': pidfile = optarg; break;
		case 'M': {
			uint32_t mip;
			uint16_t mport;
			char merr[160];
			if (optarg[0] != '\0' &&
			    innet_metrics_addr_parse(optarg, &mip, &mport, merr, sizeof(merr)) != 0) {
				fprintf(stderr, "innet switch: --metrics: %s\n", merr);
				goto out;
			}
			metrics = optarg;
			break;
		}
		case 'C': check = true; break;
		case 'G': no_gso = true; break;
		case 'T':
			if (innet_target_find(optarg) == NULL) {
				fprintf(stderr, "innet switch: --target wants %s, not '%s'\n",
					innet_target_names(), optarg);
				goto out;
			}
			target = optarg;
			break;
		case 'h': switch_usage(stdout); rc = 0; goto out;
		default: switch_usage(stderr); goto out;
		}
	}
	rc = 2; /* from here on, every early exit is a usage error */
	if (optind < argc) {
		fprintf(stderr, "innet switch: unexpected argument '%s'\n", argv[optind]);
		goto out;
	}
	static char err[16384];
	err[0] = '\0';
	if (topo != NULL) {
		if (conf.n_ports || conf.n_progs) {
			fprintf(stderr, "innet switch: --topology cannot be combined with --port/--program\n");
			goto out;
		}
		if (name == NULL) {
			fprintf(stderr, "innet switch: --topology needs --name SWITCH\n");
			goto out;
		}
		struct innet_topology *t = innet_topology_load(topo, err, sizeof(err));
		if (t == NULL) {
			fprintf(stderr, "innet switch: %s\n", err);
			goto out;
		}
		int trc = innet_topology_switch_conf(t, name, &conf, err, sizeof(err));
		innet_topology_free(t);
		if (trc != 0) {
			fprintf(stderr, "innet switch: %s\n", err);
			goto out;
		}
	} else {
		if (conf.n_ports == 0 || conf.n_progs == 0) {
			fprintf(stderr, "innet switch: need at least one --port and one --program "
					"(or --topology)\n");
			switch_usage(stderr);
			goto out;
		}
		snprintf(conf.name, sizeof(conf.name), "%s", name ? name : "switch");
		conf.n_workers = 1;
		conf.node_id = (uint16_t)node;
		conf.seed = seed;
		snprintf(conf.ctl_path, sizeof(conf.ctl_path), "/tmp/innet-%s.sock", conf.name);
	}
	if (workers)
		conf.n_workers = (uint32_t)workers;
	if (have_seed)
		conf.seed = seed;
	if (have_node)
		conf.node_id = (uint16_t)node;
	if (no_gso)
		conf.no_gso = true;
	if (target != NULL)
		conf.target = innet_target_find(target)->id;
	if (check && geteuid() == 0) {
		/* measure the eBPF column: load every program's object, attach none */
		conf.target = INNET_TARGET_XDP;
		conf.xdp_no_attach = true;
	}
	if (innet_target_info(conf.target)->needs_root && geteuid() != 0 && !check) {
		fprintf(stderr, "innet switch %s: the %s target needs root (loading eBPF programs)\n",
			conf.name, innet_target_info(conf.target)->name);
		rc = 1;
		goto out_conf;
	}
	if (metrics != NULL)
		snprintf(conf.metrics_addr, sizeof(conf.metrics_addr), "%s", metrics);
	if (ctl != NULL) {
		if (strlen(ctl) >= sizeof(conf.ctl_path)) {
			fprintf(stderr, "innet switch: --ctl path is too long\n");
			goto out_conf;
		}
		snprintf(conf.ctl_path, sizeof(conf.ctl_path), "%s", ctl);
	}

	/* A topology's control sockets live in its state_dir: create it (like
	 * innet fabric up does) so a switch started on its own can bind there. */
	int mk = check || conf.ctl_path[0] == '\0' ? 0 : innet_mkdir_parent(conf.ctl_path);
	if (mk != 0) {
		fprintf(stderr, "innet switch %s: cannot create the directory of %s: %s\n", conf.name,
			conf.ctl_path, strerror(-mk));
		rc = 1;
		goto out_conf;
	}

	/* Threads inherit this mask; the main thread waits for the signals. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct innet_switch *sw = innet_switch_create(&conf, err, sizeof(err));
	if (sw == NULL) {
		/* EINVAL: the configuration is wrong (a setting, a port) — bad input,
		 * like a bad flag; anything else failed at run time (address in use). */
		rc = errno == EINVAL ? 2 : 1;
		fprintf(stderr, "innet switch %s: %s\n", conf.name, err);
		goto out_conf;
	}
	if (check) {
		rc = 0;
		for (uint32_t i = 0; i < conf.n_progs; i++) {
			struct innet_res_usage u;
			struct innet_cp *cp = innet_switch_prog_at(sw, i);
			if (innet_res_usage_from_prog(cp, &u) != 0 || innet_res_print(stdout, &u) != 0)
				rc = 1;
			printf("\n");
		}
		innet_switch_destroy(sw);
		goto out_conf;
	}
	rc = innet_switch_start(sw, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "innet switch %s: cannot start: %s\n", conf.name, err);
		innet_switch_destroy(sw);
		rc = 1;
		goto out_conf;
	}
	if (pidfile != NULL && write_pidfile(pidfile) != 0)
		fprintf(stderr, "innet switch %s: cannot write %s: %s\n", conf.name, pidfile,
			strerror(errno));
	const char *maddr = innet_switch_conf(sw)->metrics_addr; /* port 0: the one bound */
	fprintf(stderr, "innet switch %s: ready: %u ports, %u programs, %u workers, ctl %s%s%s%s\n",
		conf.name, conf.n_ports, conf.n_progs, conf.n_workers,
		conf.ctl_path[0] ? conf.ctl_path : "(none)", maddr[0] ? ", metrics http://" : "", maddr,
		maddr[0] ? "/metrics" : "");

	struct timespec ts = { .tv_sec = (time_t)duration };
	int sig;
	for (;;) {
		sig = duration ? sigtimedwait(&set, NULL, &ts) : sigwaitinfo(&set, NULL);
		if (sig < 0 && errno == EINTR)
			continue;
		break;
	}
	fprintf(stderr, "innet switch %s: stopping (%s)\n", conf.name,
		sig > 0 ? strsignal(sig) : "duration elapsed");
	innet_switch_destroy(sw);
	rc = 0;
out_conf:
	if (topo != NULL)
		innet_topology_conf_release(&conf);
out:
	for (int i = 0; i < 16; i++)
		free(args_text[i]);
	return rc;
}

int cmd_programs(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	if (argc > 1 && !json) {
		bool help = !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h");
		fprintf(help ? stdout : stderr,
			"usage: innet programs [--json]\n\nList the data-plane programs compiled into "
			"innet: name, model (pisa/trio), summary.\n");
		return help ? 0 : 2;
	}
	json_t *arr = json ? json_array() : NULL;
	int w = (int)strlen("program"); /* the name column fits the longest name */
	for (const struct innet_program *const *p = innet_program_list(); *p; p++)
		if ((int)strlen((*p)->name) > w)
			w = (int)strlen((*p)->name);
	if (!json)
		printf("%-*s  %-5s  %s\n", w, "program", "model", "summary");
	for (const struct innet_program *const *p = innet_program_list(); *p; p++) {
		const char *model = (*p)->model == INNET_MODEL_PISA ? "pisa" : "trio";
		if (json) {
			json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:b}", "name", (*p)->name,
							     "model", model, "summary", (*p)->summary,
							     "serial", ((*p)->flags & INNET_PROG_SERIAL) != 0));
		} else {
			printf("%-*s  %-5s  %s\n", w, (*p)->name, model, (*p)->summary);
		}
	}
	if (json) {
		char *s = json_dumps(arr, JSON_INDENT(2));
		puts(s);
		free(s);
		json_decref(arr);
	}
	char err[256];
	if (innet_program_registration_error(err, sizeof(err)) != 0) {
		fprintf(stderr, "innet programs: %s\n", err);
		return 1;
	}
	return 0;
}
