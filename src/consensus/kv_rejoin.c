/*
 * kv_rejoin.c — the acceptor-rejoin protocol of a KV fabric over control
 * sockets (consensus/kv_rejoin.h says what it computes and why it is safe).
 * Registers are read and written with `reg read|write` requests through
 * the control-socket client (innet/ctl_client.h); the backup coordinators
 * answer on their status sockets (kv_leader.c).
 *
 *   acceptor switches (control sockets)     coordinators
 *     hi, trim, promised, inst[ring]  ──┐    switch: next, ballot   (registers)
 *                                       ├─▶  J, JB ─▶ joiner: join_inst, join_ballot, joining = 0
 *     (every other one that answers)  ──┘    backups: serving, ballot, next (status socket)
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "innet/ctl_client.h"
#include "innet/topology.h"
#include "consensus/kv.h"
#include "consensus/kv_leader.h"
#include "consensus/kv_rejoin.h"

#define CTL_TIMEOUT_S 5.0

/* The maximum of count elements of register reg of instance prog on the
 * switch at sock into *max. 0, or -errno (err). */
static int reg_max(const char *sock, const char *prog, const char *reg, uint32_t count,
		   uint64_t *max, char *err, size_t errlen)
{
	*max = 0;
	for (uint32_t i = 0; i < count; i += 4096) {
		char line[160];
		uint32_t k = count - i < 4096 ? count - i : 4096;
		snprintf(line, sizeof(line), "reg read %s %s %u %u", prog, reg, i, k);
		json_t *j = innet_ctl_call(sock, line, CTL_TIMEOUT_S, err, errlen), *v;
		if (j == NULL)
			return -errno;
		size_t x;
		json_array_foreach(json_object_get(j, "values"), x, v) {
			uint64_t u = (uint64_t)json_integer_value(v);
			*max = u > *max ? u : *max;
		}
		json_decref(j);
	}
	return 0;
}

static int reg_write(const char *sock, const char *prog, const char *reg, uint64_t v, char *err,
		     size_t errlen)
{
	char line[160];
	snprintf(line, sizeof(line), "reg write %s %s 0 %llu", prog, reg, (unsigned long long)v);
	json_t *j = innet_ctl_call(sock, line, CTL_TIMEOUT_S, err, errlen);
	if (j == NULL)
		return -errno;
	json_decref(j);
	return 0;
}

/* The instance of program `program` on switch s, or NULL. */
static const struct innet_prog_conf *paxos_prog(const struct innet_topology *t, uint32_t s,
						const char *program)
{
	const struct innet_topo_node *n = &t->nodes[s];
	for (uint32_t g = 0; g < n->conf->n_progs; g++)
		if (!strcmp(n->conf->progs[g].program->name, program))
			return &n->conf->progs[g];
	return NULL;
}

static uint64_t prog_arg_u64(const struct innet_prog_conf *pr, const char *key, uint64_t def)
{
	json_error_t je;
	json_t *args = pr->args_json ? json_loads(pr->args_json, 0, &je) : NULL;
	json_t *v = json_object_get(args, key);
	uint64_t r = json_is_integer(v) ? (uint64_t)json_integer_value(v) : def;
	json_decref(args);
	return r;
}

__attribute__((format(printf, 3, 4)))
static void note(void (*say)(void *, const char *), void *arg, const char *fmt, ...)
{
	if (say == NULL)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	say(arg, line);
}

int kv_rejoin_find(const struct innet_topology *t, const char *name, uint32_t *a,
		   const char **inst, char *err, size_t errlen)
{
	int i = innet_topology_find(t, name);
	const struct innet_prog_conf *apr = NULL;
	if (i >= 0 && (uint32_t)i < t->n_switches)
		apr = paxos_prog(t, (uint32_t)i, "paxos_acceptor");
	if (apr == NULL) {
		snprintf(err, errlen, "no paxos_acceptor switch '%s'", name);
		return -EINVAL;
	}
	bool coord = false;
	for (uint32_t s = 0; s < t->n_switches && !coord; s++)
		coord = paxos_prog(t, s, "paxos_coordinator") != NULL;
	if (!coord) {
		snprintf(err, errlen, "no paxos_coordinator switch");
		return -EINVAL;
	}
	*a = (uint32_t)i;
	*inst = apr->name;
	return 0;
}

/* The others' registers (every other acceptor that answers): J's part and
 * JB into r, how many answered into r->read. */
static void read_acceptors(const struct innet_topology *t, uint32_t a, struct kv_rejoin *r,
			   uint64_t *j, void (*say)(void *, const char *), void *arg)
{
	*j = r->join_ballot = 0;
	r->read = 0;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_prog_conf *pr = paxos_prog(t, s, "paxos_acceptor");
		if (pr == NULL || s == a)
			continue;
		const char *sock = t->nodes[s].conf->ctl_path;
		uint64_t hi, trim, prom, inst;
		char err[512];
		if (reg_max(sock, pr->name, "hi", 1, &hi, err, sizeof(err)) != 0 ||
		    reg_max(sock, pr->name, "trim", 1, &trim, err, sizeof(err)) != 0 ||
		    reg_max(sock, pr->name, "promised", 1, &prom, err, sizeof(err)) != 0 ||
		    reg_max(sock, pr->name, "inst", (uint32_t)prog_arg_u64(pr, "ring", 1024), &inst, err,
			    sizeof(err)) != 0) {
			note(say, arg, "%s", err);
			note(say, arg, "acceptor %s does not answer: not counted", t->nodes[s].name);
			continue;
		}
		uint64_t m = hi > trim ? hi : trim;
		m = inst > m ? inst : m; /* a slot holds instance inst - 1 */
		*j = m > *j ? m : *j;
		r->join_ballot = prom > r->join_ballot ? prom : r->join_ballot;
		r->read++;
	}
}

#define WHY(...) snprintf(why + strlen(why), whylen - strlen(why), __VA_ARGS__)

/* The coordinator in charge: the one whose ballot is at least every range
 * promise read (the coordinator switch until a backup took over, then the
 * serving backup with the highest ballot): its name, ballot and next into r;
 * false (reasons in why) if none is. */
static bool coordinator(const struct innet_topology *t, struct kv_rejoin *r, char *why,
			size_t whylen)
{
	why[0] = '\0';
	bool found = false;
	for (uint32_t s = 0; s < t->n_switches; s++) {
		const struct innet_prog_conf *cpr = paxos_prog(t, s, "paxos_coordinator");
		if (cpr == NULL)
			continue;
		const char *csock = t->nodes[s].conf->ctl_path;
		uint64_t cn, cb;
		char err[512];
		if (reg_max(csock, cpr->name, "next", 1, &cn, err, sizeof(err)) != 0 ||
		    reg_max(csock, cpr->name, "ballot", 1, &cb, err, sizeof(err)) != 0) {
			WHY("; coordinator switch %s does not answer", t->nodes[s].name);
			continue;
		}
		if (cb < r->join_ballot) {
			WHY("; coordinator switch %s has ballot 0x%llx (superseded)", t->nodes[s].name,
			    (unsigned long long)cb);
			continue;
		}
		if (!found || cb > r->ballot) {
			found = true;
			r->ballot = cb;
			r->next = cn;
			snprintf(r->who, sizeof(r->who), "%s", t->nodes[s].name);
		}
	}
	for (uint32_t h = t->n_switches; h < t->n_nodes; h++) {
		if (!kv_topology_is_leader_host(t, h))
			continue;
		char sock[PATH_MAX + 128], err[512];
		struct kv_leader_status st;
		kv_leader_sock_path(t, h, sock, sizeof(sock));
		if (kv_leader_status_query(sock, &st, err, sizeof(err)) != 0) {
			WHY("; backup coordinator %s does not answer", t->nodes[h].name);
			continue;
		}
		if (!st.serving || st.ballot < r->join_ballot) {
			WHY("; backup coordinator %s %s (ballot 0x%llx)", t->nodes[h].name,
			    st.serving ? "is superseded" : "is not serving", (unsigned long long)st.ballot);
			continue;
		}
		if (!found || st.ballot > r->ballot) {
			found = true;
			r->ballot = st.ballot;
			r->next = st.next;
			snprintf(r->who, sizeof(r->who), "%s", t->nodes[h].name);
		}
	}
	return found;
}

int kv_rejoin_complete(const struct innet_topology *t, uint32_t a, unsigned wait_ms,
		       struct kv_rejoin *r, void (*say)(void *arg, const char *line), void *arg,
		       char *err, size_t errlen)
{
	const struct innet_prog_conf *apr = paxos_prog(t, a, "paxos_acceptor");
	memset(r, 0, sizeof(*r));
	if (apr == NULL) {
		snprintf(err, errlen, "%s is not an acceptor switch", t->nodes[a].name);
		return -EINVAL;
	}
	for (uint32_t s = 0; s < t->n_switches; s++)
		r->n_acceptors += paxos_prog(t, s, "paxos_acceptor") != NULL;
	r->need = r->n_acceptors - (r->n_acceptors / 2 + 1) + 1;
	uint64_t j = 0;
	char why[512] = "";
	bool found = false;
	unsigned attempts = wait_ms / 100 > 0 ? wait_ms / 100 : 1;   /* reads, 100 ms apart */
	for (unsigned attempt = 0; attempt < attempts && !found; attempt++) {
		if (attempt > 0)
			usleep(100000);
		/* (say once which acceptor does not answer) */
		read_acceptors(t, a, r, &j, attempt == 0 ? say : NULL, arg);
		if (r->read < r->need)
			continue;
		found = coordinator(t, r, why, sizeof(why));
	}
	const char *acc = t->nodes[a].name;
	if (r->read < r->need) {
		snprintf(err, errlen, "only %u other acceptors answered; the join needs %u (N = %u) to "
			 "bound the restarted one's votes and promises: %s stays silent", r->read, r->need,
			 r->n_acceptors, acc);
		return -EAGAIN;
	}
	if (!found) {
		snprintf(err, errlen, "no coordinator in charge to bound the instances %s may have voted "
			 "in (the acceptors promised ballot 0x%llx%s): %s stays silent (safe); run kv "
			 "rejoin again once a coordinator serves", acc,
			 (unsigned long long)r->join_ballot, why, acc);
		return -ESRCH;
	}
	r->join_inst = r->next > j ? r->next : j;
	const char *jsock = t->nodes[a].conf->ctl_path;
	if (reg_write(jsock, apr->name, "join_inst", r->join_inst, err, errlen) != 0 ||
	    reg_write(jsock, apr->name, "join_ballot", r->join_ballot, err, errlen) != 0 ||
	    reg_write(jsock, apr->name, "joining", 0, err, errlen) != 0)
		return -EIO;
	return 0;
}
