/*
 * switch.c — a switch's life, engine-neutral: check its configuration, run
 * every program's setup (its state declared and allocated), have the
 * configured target build what runs the programs (engine/target.h), run the
 * programs' init; start and stop it; destroy it. And what the control plane
 * asks of a switch whatever its target runs: sends, drops it counts,
 * counters, injections — each through the target's ops.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "innet/metrics.h"
#include "engine/bpf_objects.h"
#include "engine/switch_ctl.h"
#include "engine/switch_pvt.h"

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
	[INNET_DROP_TABLE_BUSY] = "table_busy",
	[INNET_DROP_SHORT_FRAME] = "short_frame",
};

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

struct innet_switch *innet_switch_create(const struct innet_switch_conf *conf, char *err, size_t errlen)
{
	err[0] = '\0';
	int rc = innet_program_registration_error(err, errlen);
	if (rc == 0)
		rc = check_conf(conf, err, errlen);
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	const struct innet_target_ops *ops = innet_target_ops(conf->target);
	if (ops == NULL) {
		snprintf(err, errlen, "target %d is not built in (targets: %s)", (int)conf->target,
			 innet_target_names());
		errno = EINVAL;
		return NULL;
	}
	struct innet_switch *sw = calloc(1, sizeof(*sw));
	if (sw == NULL)
		return NULL;
	sw->conf = *conf;
	sw->n_ports = conf->n_ports;
	sw->cpu_wake_fd = -1;
	sw->raw_prog = -1;
	sw->target.ops = ops;
	pthread_mutex_init(&sw->capture_lock, NULL);
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
		if (pc->raw)
			sw->raw_prog = (int32_t)i;
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
		}
		rc = innet_state_setup(cp, pc, err, errlen);
		if (rc != 0)
			goto err_destroy;
	}
	sw->cpu_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sw->cpu_wake_fd < 0) {
		rc = -errno;
		goto err_destroy;
	}
	/* The target builds what runs the programs — and moves their state
	 * where its executor reads it (the XDP target: onto its maps) — before
	 * anything (init, a worker) looks at that state. Nothing runs yet. */
	rc = ops->create(sw, &sw->target.priv, err, errlen);
	if (rc != 0)
		goto err_destroy;
	sw->target_created = true;
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
	return sw;

err_destroy:
	if (err[0] == '\0')
		snprintf(err, errlen, "%s", strerror(-rc));
	innet_switch_destroy(sw);
	errno = -rc;
	return NULL;
}

int innet_switch_start(struct innet_switch *sw, char *err, size_t errlen)
{
	err[0] = '\0';
	if (sw->started) {
		snprintf(err, errlen, "switch %s is running already", sw->conf.name);
		return -EALREADY;
	}
	int rc = sw->target.ops->start(sw->target.priv, err, errlen);
	if (rc == 0) {
		rc = innet_control_start(sw, err, errlen);
		if (rc != 0)
			sw->target.ops->stop(sw->target.priv);
	}
	if (rc != 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "cannot start switch %s: %s", sw->conf.name, strerror(-rc));
		return rc;
	}
	sw->started = true;
	atomic_store(&sw->running, true);
	return 0;
}

void innet_switch_stop(struct innet_switch *sw)
{
	if (!sw->started)
		return;
	sw->target.ops->stop(sw->target.priv);
	innet_control_stop(sw);
	sw->started = false;
	atomic_store(&sw->running, false);
}

void innet_switch_destroy(struct innet_switch *sw)
{
	if (sw == NULL)
		return;
	innet_switch_stop(sw);
	if (sw->target_created)
		sw->target.ops->destroy(sw->target.priv);
	innet_capture_close_all(sw);
	for (uint32_t i = 0; i < sw->n_progs; i++) {
		innet_state_free(&sw->progs[i]);
		free(sw->progs[i].udp);
		pthread_mutex_destroy(&sw->progs[i].cp_lock);
	}
	if (sw->cpu_wake_fd >= 0)
		close(sw->cpu_wake_fd);
	pthread_mutex_destroy(&sw->capture_lock);
	pthread_mutex_destroy(&sw->inject_lock);
	free(sw);
}

/* ------------------------------------------------------------------------ */
/* What the control plane asks of the target                                  */

int innet_cp_send(struct innet_cp *cp, const struct innet_out *out, bool is_group, const void *data,
		  uint32_t len)
{
	const struct innet_target_dev *t = &cp->sw->target;
	return t->ops->send(t->priv, cp, out, is_group, data, len);
}

int innet_cp_count_drop(struct innet_cp *cp, unsigned reason)
{
	bool ok = (reason > INNET_DROP_NONE && reason < INNET_DROP_RUNTIME_COUNT) ||
		  (reason >= INNET_DROP_PROGRAM &&
		   reason < INNET_DROP_PROGRAM + cp->program->n_drop_reasons);
	if (!ok)
		return -EINVAL;
	const struct innet_target_dev *t = &cp->sw->target;
	t->ops->count_drop(t->priv, cp, reason);
	return 0;
}

void innet_switch_cpu_drain(struct innet_switch *sw)
{
	sw->target.ops->cpu_drain(sw->target.priv);
}

/* engine/switch_ctl.h: the control part's view */

struct innet_control **innet_switch_control_slot(struct innet_switch *sw)
{
	return &sw->control;
}

int innet_switch_cpu_wake_fd(const struct innet_switch *sw)
{
	return sw->cpu_wake_fd;
}

_Atomic(struct innet_capture *) *innet_switch_capture_slot(struct innet_switch *sw, uint32_t port)
{
	return port < sw->n_ports ? &sw->ports[port].capture : NULL;
}

pthread_mutex_t *innet_switch_capture_lock(struct innet_switch *sw)
{
	return &sw->capture_lock;
}

void innet_switch_set_metrics_addr(struct innet_switch *sw, const char *addr)
{
	snprintf(sw->conf.metrics_addr, sizeof(sw->conf.metrics_addr), "%s", addr);
}

int innet_switch_inject(struct innet_switch *sw, uint16_t port, uint16_t dst_udp,
			const struct innet_addr *src, const void *data, uint32_t len,
			struct innet_inject_result *res)
{
	if (port >= sw->n_ports || len > INNET_PKT_MAX)
		return -EINVAL;
	bool raw = sw->ports[port].conf.iface[0] != '\0';
	/* a raw port carries frames to the raw program (dst_udp 0), nothing else */
	if (raw ? (dst_udp != 0 || sw->raw_prog < 0) : sw->udp_to_prog[dst_udp] == 0)
		return -EINVAL;
	pthread_mutex_lock(&sw->inject_lock);
	res->n_out = 0;
	res->n_out_lost = 0;
	res->cpu_drop_reason = 0;
	int rc = sw->target.ops->inject(sw->target.priv, port, dst_udp, src, data, len, res);
	pthread_mutex_unlock(&sw->inject_lock);
	return rc;
}

int innet_cp_stats(struct innet_cp *cp, struct innet_prog_stats *out)
{
	const struct innet_target_dev *t = &cp->sw->target;
	memset(out, 0, sizeof(*out));
	t->ops->prog_stats(t->priv, cp, out);
	return 0;
}

int innet_switch_port_stats(struct innet_switch *sw, uint32_t port, struct innet_port_stats *out)
{
	if (port >= sw->n_ports)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	sw->target.ops->port_stats(sw->target.priv, port, out);
	return 0;
}

void innet_switch_stats_reset(struct innet_switch *sw)
{
	sw->target.ops->stats_reset(sw->target.priv);
}

int innet_cp_ebpf(struct innet_cp *cp, struct innet_res_ebpf *e)
{
	memset(e, 0, sizeof(*e));
	struct innet_bpf_object own;
	const struct innet_bpf_object *bo = innet_cp_bpf_object(cp, &own);
	if (bo == NULL || bo->start == NULL) {
		snprintf(e->userspace, sizeof(e->userspace), "%s",
			 bo == NULL ? "not a program of the tree (no eBPF object)" : bo->userspace_reason);
		return 0;
	}
	const struct innet_target_dev *t = &cp->sw->target;
	if (t->ops->prog_info != NULL)
		t->ops->prog_info(t->priv, cp, e);
	return 0;
}
