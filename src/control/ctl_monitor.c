/*
 * ctl_monitor.c — the control commands that watch the switch
 * (docs/man/innet-ctl.md): stats (port and program counters, drops by
 * reason, and the XDP target's own when it runs), stats reset, metrics (the
 * counters in the Prometheus text format), capture start/stop (a port's
 * traffic into a pcap file) and resources (would a program fit a Tofino1,
 * Tofino2 or Trio). The request language that dispatches them, and the
 * helpers they share, are ctl_request.c (ctl_pvt.h).
 *
 * Threads: runs on the control thread; the innet_cp_* and innet_switch_*
 * calls it makes are safe against the data plane.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "innet/metrics.h"
#include "innet/resources.h"
#include "control/ctl_pvt.h"

/* ------------------------------------------------------------------------ */
/* Commands: stats, metrics, capture, resources                             */

static json_t *port_stats_json(struct innet_switch *sw, uint32_t i)
{
	struct innet_port_stats s;
	innet_switch_port_stats(sw, i, &s);
	json_t *o = json_object();
	ctl_jset(o, "index", json_integer(i));
	ctl_jset(o, "name", ctl_jstr(innet_switch_conf(sw)->ports[i].name));
	ctl_jset(o, "rx_pkts", ctl_ju64(s.rx_pkts));
	ctl_jset(o, "rx_bytes", ctl_ju64(s.rx_bytes));
	ctl_jset(o, "tx_pkts", ctl_ju64(s.tx_pkts));
	ctl_jset(o, "tx_bytes", ctl_ju64(s.tx_bytes));
	ctl_jset(o, "tx_errors", ctl_ju64(s.tx_errors));
	ctl_jset(o, "tx_gso", ctl_ju64(s.tx_gso));
	ctl_jset(o, "rx_sock_drops", ctl_ju64(s.rx_sock_drops));
	ctl_jset(o, "link_lost", ctl_ju64(s.link_lost));
	ctl_jset(o, "link_duplicated", ctl_ju64(s.link_duplicated));
	ctl_jset(o, "link_reordered", ctl_ju64(s.link_reordered));
	ctl_jset(o, "link_delayed", ctl_ju64(s.link_delayed));
	ctl_jset(o, "link_queue_full", ctl_ju64(s.link_queue_full));
	if (innet_target_info(innet_switch_conf(sw)->target)->xdp_counters) {
		/* what the eBPF program took and sent, the frames it passed to
		 * the kernel unhandled and those it dropped outside any
		 * verdict, by reason */
		ctl_jset(o, "xdp_rx_pkts", ctl_ju64(s.xdp_rx_pkts));
		ctl_jset(o, "xdp_tx_pkts", ctl_ju64(s.xdp_tx_pkts));
		json_t *pass = json_object();
		for (unsigned k = 0; innet_xdp_pass_name(k) != NULL; k++)
			ctl_jset(pass, innet_xdp_pass_name(k), ctl_ju64(s.xdp_pass[k]));
		ctl_jset(o, "xdp_pass", pass);
		json_t *drop = json_object();
		for (unsigned k = 0; innet_xdp_drop_name(k) != NULL; k++)
			ctl_jset(drop, innet_xdp_drop_name(k), ctl_ju64(s.xdp_drop[k]));
		ctl_jset(o, "xdp_drop", drop);
	}
	return o;
}

static json_t *prog_stats_json(struct innet_cp *cp)
{
	struct innet_prog_stats s;
	innet_cp_stats(cp, &s);
	json_t *o = json_object();
	ctl_jset(o, "name", ctl_jstr(innet_cp_name(cp)));
	ctl_jset(o, "rx_pkts", ctl_ju64(s.rx_pkts));
	ctl_jset(o, "rx_bytes", ctl_ju64(s.rx_bytes));
	ctl_jset(o, "passes", ctl_ju64(s.passes));
	ctl_jset(o, "recirculations", ctl_ju64(s.recirculations));
	ctl_jset(o, "emitted", ctl_ju64(s.emitted));
	ctl_jset(o, "tx_pkts", ctl_ju64(s.tx_pkts));
	ctl_jset(o, "timer_fires", ctl_ju64(s.timer_fires));
	ctl_jset(o, "cpu_pkts", ctl_ju64(s.cpu_pkts));
	ctl_jset(o, "reg_ops", ctl_ju64(s.reg_ops));
	ctl_jset(o, "table_ops", ctl_ju64(s.table_ops));
	ctl_jset(o, "alu_ops", ctl_ju64(s.alu_ops));
	ctl_jset(o, "max_reg_ops", json_integer(s.max_reg_ops));
	ctl_jset(o, "max_table_ops", json_integer(s.max_table_ops));
	ctl_jset(o, "max_alu_ops", json_integer(s.max_alu_ops));
	ctl_jset(o, "max_recirc", json_integer(s.max_recirc));
	ctl_jset(o, "max_emitted", json_integer(s.max_emitted));
	json_t *acts = json_object();
	for (unsigned a = 0; a < INNET_ACTION_COUNT; a++)
		ctl_jset(acts, innet_action_name(a), ctl_ju64(s.actions[a]));
	ctl_jset(o, "actions", acts);
	json_t *drops = json_object();
	for (unsigned d = 0; d < sizeof(s.drops) / sizeof(s.drops[0]); d++) {
		if (s.drops[d] == 0)
			continue;
		char key[INNET_NAME_MAX + 16];
		const char *name = innet_cp_drop_reason_name(cp, d);
		if (!strcmp(name, "unknown"))
			snprintf(key, sizeof(key), "reason_%u", d);
		else
			ctl_sanitize(key, sizeof(key), name, INNET_NAME_MAX);
		/* two reasons with one name (a program reusing a runtime name): add up */
		json_t *prev = json_object_get(drops, key);
		uint64_t v = s.drops[d];
		if (prev != NULL && json_is_integer(prev))
			v += (uint64_t)json_integer_value(prev);
		ctl_jset(drops, key, ctl_ju64(v));
	}
	ctl_jset(o, "drops", drops);
	if (innet_target_info(innet_switch_conf(innet_cp_switch(cp))->target)->xdp_counters) {
		ctl_jset(o, "xdp_rx_pkts", ctl_ju64(s.xdp_rx_pkts));
		json_t *h = json_object();
		for (unsigned k = 0; innet_handoff_name(k) != NULL; k++)
			ctl_jset(h, innet_handoff_name(k), ctl_ju64(s.handoffs[k]));
		ctl_jset(o, "handoffs", h);
		ctl_jset(o, "handoff_ring_full", ctl_ju64(s.handoff_ring_full));
	}
	return o;
}

int ctl_cmd_stats(struct ctl_req *r, int argc, char **argv)
{
	struct innet_switch *sw = r->sw;
	json_t *ports = json_array();
	for (uint32_t i = 0; i < innet_switch_conf(sw)->n_ports; i++)
		ctl_jpush(ports, port_stats_json(sw, i));
	ctl_jset(r->resp, "switch", ctl_jstr(innet_switch_conf(sw)->name));
	ctl_jset(r->resp, "target", ctl_jstr(innet_target_info(innet_switch_conf(sw)->target)->name));
	ctl_jset(r->resp, "ports", ports);
	json_t *progs = json_array();
	for (uint32_t i = 0; i < innet_switch_conf(sw)->n_progs; i++)
		ctl_jpush(progs, prog_stats_json(innet_switch_prog_at(sw, i)));
	ctl_jset(r->resp, "programs", progs);
	return 0;
}

/* metrics: the stats in the Prometheus text format, as the HTTP server
 * serves them (innet/metrics.h). */
int ctl_cmd_metrics(struct ctl_req *r, int argc, char **argv)
{
	struct innet_prom w;
	innet_prom_init(&w);
	int rc = innet_metrics_switch(r->sw, &w);
	if (rc == 0) {
		json_t *text = json_stringn(w.buf ? w.buf : "", w.len);
		if (text == NULL)
			rc = -ENOMEM;
		ctl_jset(r->resp, "text", text);
	}
	innet_prom_fini(&w);
	if (rc != 0)
		return ctl_fail(r, "metrics: %s", strerror(-rc));
	return 0;
}

int ctl_cmd_stats_reset(struct ctl_req *r, int argc, char **argv)
{
	innet_switch_stats_reset(r->sw);
	return 0;
}

/* capture start PORT PATH [MAXPKTS] */
int ctl_cmd_capture_start(struct ctl_req *r, int argc, char **argv)
{
	uint32_t port;
	if (ctl_req_port(r, argv[0], &port) != 0)
		return -EINVAL;
	uint64_t max = 0;
	if (argc > 2 && ctl_req_u64(r, "MAXPKTS", argv[2], UINT64_MAX, &max) != 0)
		return -EINVAL;
	int rc = innet_switch_capture_start(r->sw, port, argv[1], max);
	if (rc == -EBUSY)
		return ctl_fail(r, "port %u is already being captured (capture stop %u first)", port, port);
	if (rc != 0)
		return ctl_fail(r, "cannot capture port %u into '%s': %s", port, ctl_show(argv[1]).s,
				strerror(-rc));
	ctl_jset(r->resp, "port", json_integer(port));
	ctl_jset(r->resp, "path", ctl_jstr(argv[1]));
	ctl_jset(r->resp, "max_pkts", ctl_ju64(max));
	return 0;
}

/* capture stop PORT */
int ctl_cmd_capture_stop(struct ctl_req *r, int argc, char **argv)
{
	uint32_t port;
	if (ctl_req_port(r, argv[0], &port) != 0)
		return -EINVAL;
	int rc = innet_switch_capture_stop(r->sw, port);
	if (rc == -ENOENT)
		return ctl_fail(r, "port %u is not being captured (never started, already stopped, "
				   "or it stopped by itself after MAXPKTS)", port);
	if (rc != 0)
		return ctl_fail(r, "stopping the capture on port %u: %s", port, strerror(-rc));
	ctl_jset(r->resp, "port", json_integer(port));
	return 0;
}

/* The resource report of one program, with its human rendering in "text". */
static json_t *resources_json(struct ctl_req *r, struct innet_cp *cp)
{
	struct innet_res_usage *u = malloc(sizeof(*u));
	if (u == NULL) {
		ctl_fail(r, "out of memory");
		return NULL;
	}
	json_t *rep = NULL;
	int rc = innet_res_usage_from_prog(cp, u);
	if (rc != 0) {
		ctl_fail(r, "resources of '%s': %s", innet_cp_name(cp), strerror(-rc));
		goto out;
	}
	rep = innet_res_report_json(u);
	if (rep == NULL) {
		ctl_fail(r, "resources of '%s': %s", innet_cp_name(cp), strerror(errno));
		goto out;
	}
	int len = innet_res_format(NULL, 0, u);
	if (len >= 0) {
		char *text = malloc((size_t)len + 1);
		if (text != NULL && innet_res_format(text, (size_t)len + 1, u) >= 0)
			ctl_jset(rep, "text", ctl_jstr(text));
		free(text);
	}
	ctl_jset(rep, "name", ctl_jstr(innet_cp_name(cp)));
out:
	free(u);
	return rep;
}

/* resources [PROG] */
int ctl_cmd_resources(struct ctl_req *r, int argc, char **argv)
{
	json_t *arr = json_array();
	for (uint32_t i = 0; i < innet_switch_conf(r->sw)->n_progs; i++) {
		struct innet_cp *cp = innet_switch_prog_at(r->sw, i);
		if (argc > 0) {
			cp = ctl_req_prog(r, argv[0]);
			if (cp == NULL)
				goto err;
		}
		json_t *rep = resources_json(r, cp);
		if (rep == NULL)
			goto err;
		ctl_jpush(arr, rep);
		if (argc > 0)
			break;
	}
	ctl_jset(r->resp, "programs", arr);
	return 0;
err:
	json_decref(arr);
	return -EINVAL;
}
