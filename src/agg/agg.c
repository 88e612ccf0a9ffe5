/*
 * agg/agg.c — the aggregation program's control source: settings, the
 * declarations of its state, and init (jobs and members into the tables,
 * multicast groups). The data path (handler, straggler timer) is agg_dp.c;
 * the protocol is src/agg/wire.h and docs/aggregation.md.
 *
 * Settings: "k" (elements per packet, 1..2294), "slots" (pool size),
 * "max_jobs" (jobs table capacity = one multicast group per job; each job with
 * members also gets one group "all but w" per worker, R_DEAF), "jobs" (array of
 * {"id", "workers", "slots", "slot_base", "timeout_us", "members"}).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/program.h"
#include "innet/switch.h"
#include "agg/agg.h"
#include "agg/wire.h"

static const char *const agg_drop_names[] = {
	"too_short", "bad_magic", "bad_version", "wrong_service", "is_result", "bad_op",
	"bad_length", "unknown_job", "bad_worker", "bad_slot", "bad_ver", "spoofed",
	"duplicate", "pending", "early", "contended", "resetting", "not_registered",
};

/* A job from the settings (installed by init). */
struct agg_job_conf {
	uint16_t id;
	struct agg_job job;
	uint32_t n_members;
	struct agg_member members[INNET_AGG_MAX_WORKERS];
	bool port_given[INNET_AGG_MAX_WORKERS];   /* "PORT@IP:UDP" (else init resolves it) */
};

/* Control-side state: the parsed settings, until init installs the jobs. */
struct agg_setup {
	uint32_t slots;        /* pool size */
	uint32_t max_jobs;     /* jobs table capacity = the jobs' multicast groups */
	uint32_t but_stride;   /* each job's "all but w" groups after those: the most members
	                        * of a job, if they fit; else 0 (none) */
	uint32_t n_jobs;       /* jobs from the settings */
	struct agg_job_conf jobs[];
};

/* ------------------------------------------------------------------------ */
/* Settings                                                                   */

/* "IP:UDP" or "PORT@IP:UDP" (*port_given says which). */
static int parse_member(const char *s, struct agg_member *m, bool *port_given)
{
	char ip[64];
	unsigned port = 0, udp;
	const char *at = strchr(s, '@');
	*port_given = at != NULL;
	if (at != NULL) {
		if (sscanf(s, "%u@", &port) != 1 || port >= INNET_MAX_PORTS)
			return -1;
		s = at + 1;
	}
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return -1;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	struct in_addr in;
	char *end;
	unsigned long u = strtoul(colon + 1, &end, 10);
	if (inet_pton(AF_INET, ip, &in) != 1 || *end != '\0' || colon[1] == '\0' || u == 0 || u > 65535)
		return -1;
	udp = (unsigned)u;
	m->ip = ntohl(in.s_addr);
	m->udp = (uint16_t)udp;
	m->port = (uint16_t)port;
	return 0;
}

static int json_uint(json_t *o, const char *key, uint64_t def, uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) < min ||
	    (uint64_t)json_integer_value(v) > max)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_jobs(struct innet_decl *d, json_t *jobs, struct agg_setup *c)
{
	size_t i;
	json_t *j;
	uint32_t next_base = 0;
	json_array_foreach(jobs, i, j) {
		struct agg_job_conf *jc = &c->jobs[i];
		uint64_t id, workers, slots, base, timeout;
		if (!json_is_object(j))
			return innet_decl_error(d, "jobs[%zu] must be an object", i);
		const char *key;
		json_t *v;
		json_object_foreach(j, key, v) {
			if (strcmp(key, "id") && strcmp(key, "workers") && strcmp(key, "slots") &&
			    strcmp(key, "slot_base") && strcmp(key, "timeout_us") && strcmp(key, "members"))
				return innet_decl_error(d, "jobs[%zu]: unknown key '%s'", i, key);
		}
		if (json_object_get(j, "id") == NULL || json_object_get(j, "workers") == NULL)
			return innet_decl_error(d, "jobs[%zu] needs 'id' and 'workers'", i);
		if (json_uint(j, "id", 0, 0, 65535, &id) != 0)
			return innet_decl_error(d, "jobs[%zu].id must be in [0, 65535]", i);
		if (json_uint(j, "workers", 0, 1, INNET_AGG_MAX_WORKERS, &workers) != 0)
			return innet_decl_error(d, "jobs[%zu].workers must be in [1, %u]", i,
						INNET_AGG_MAX_WORKERS);
		if (json_uint(j, "slots", 64, 1, 65535, &slots) != 0)
			return innet_decl_error(d, "jobs[%zu].slots must be in [1, 65535]", i);
		if (json_uint(j, "slot_base", next_base, 0, c->slots, &base) != 0)
			return innet_decl_error(d, "jobs[%zu].slot_base must be in [0, %u]", i, c->slots);
		if (json_uint(j, "timeout_us", 0, 0, 60000000, &timeout) != 0)
			return innet_decl_error(d, "jobs[%zu].timeout_us must be in [0, 60000000]", i);
		if (base + slots > c->slots)
			return innet_decl_error(d, "jobs[%zu]: slots [%llu, %llu) beyond the pool of %u", i,
						(unsigned long long)base, (unsigned long long)(base + slots),
						c->slots);
		for (size_t p = 0; p < i; p++) {
			const struct agg_job_conf *o = &c->jobs[p];
			if (o->id == id)
				return innet_decl_error(d, "jobs[%zu]: job id %llu defined twice", i,
							(unsigned long long)id);
			if (base < o->job.slot_base + o->job.slots && o->job.slot_base < base + slots)
				return innet_decl_error(d, "jobs[%zu]: slots overlap job %u's", i, o->id);
		}
		jc->id = (uint16_t)id;
		jc->job = (struct agg_job){ .slot_base = (uint32_t)base, .slots = (uint32_t)slots,
					    .timeout_us = (uint32_t)timeout, .group = (uint16_t)i,
					    .n_workers = (uint8_t)workers };
		next_base = (uint32_t)(base + slots);
		json_t *mem = json_object_get(j, "members");
		if (mem != NULL) {
			if (!json_is_array(mem) || json_array_size(mem) != workers)
				return innet_decl_error(d, "jobs[%zu].members must list all %llu workers", i,
							(unsigned long long)workers);
			size_t mi;
			json_t *ms;
			json_array_foreach(mem, mi, ms) {
				if (!json_is_string(ms) ||
				    parse_member(json_string_value(ms), &jc->members[mi], &jc->port_given[mi]) != 0)
					return innet_decl_error(d, "jobs[%zu].members[%zu]: expected \"IP:UDP\" "
								"or \"PORT@IP:UDP\"", i, mi);
			}
			jc->n_members = (uint32_t)workers;
		}
	}
	return 0;
}

static int agg_setup(struct innet_decl *d, struct innet_args *a)
{
	uint64_t k, slots, max_jobs;
	int rc;
	if ((rc = innet_args_u64(a, "k", 256, 1, INNET_AGG_K_MAX, &k)) != 0 ||
	    (rc = innet_args_u64(a, "slots", 1024, 1, 65536, &slots)) != 0 ||
	    (rc = innet_args_u64(a, "max_jobs", 16, 1, INNET_MAX_GROUPS, &max_jobs)) != 0)
		return rc;
	json_t *jobs = innet_args_json(a, "jobs");
	size_t n_jobs = 0;
	if (jobs != NULL) {
		if (!json_is_array(jobs))
			return innet_decl_error(d, "setting 'jobs' must be an array of job objects");
		n_jobs = json_array_size(jobs);
		if (n_jobs > max_jobs)
			return innet_decl_error(d, "%zu jobs, more than max_jobs = %llu", n_jobs,
						(unsigned long long)max_jobs);
	}
	if (slots * 2 * k > (1ull << 26))
		return innet_decl_error(d, "slots x k too large (%llu x %llu)", (unsigned long long)slots,
					(unsigned long long)k);
	struct agg_setup *c = calloc(1, sizeof(*c) + n_jobs * sizeof(c->jobs[0]));
	if (c == NULL)
		return -ENOMEM;
	c->slots = (uint32_t)slots;
	c->max_jobs = (uint32_t)max_jobs;
	c->n_jobs = (uint32_t)n_jobs;
	innet_decl_priv(d, c);
	if (jobs != NULL && (rc = parse_jobs(d, jobs, c)) != 0)
		return rc;
	struct agg_conf *conf = innet_decl_conf(d, sizeof(*conf));
	if (conf == NULL)
		return -ENOMEM;
	conf->k = (uint32_t)k;
	conf->slots = c->slots;
	/* each job's groups "all but w" (R_DEAF), where they fit */
	for (uint32_t i = 0; i < c->n_jobs; i++)
		if (c->jobs[i].n_members >= 2 && c->jobs[i].n_members > c->but_stride)
			c->but_stride = c->jobs[i].n_members;
	if (c->max_jobs + c->n_jobs * c->but_stride > INNET_MAX_GROUPS)
		c->but_stride = 0;
	conf->but_base = (uint16_t)c->max_jobs;
	conf->but_stride = (uint16_t)c->but_stride;
	uint32_t copies = 2 * c->slots;
	if ((rc = innet_decl_reg(d, R_STATE, "state", 8, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_COUNT, "count", 4, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_EXP, "exp", 1, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_OFF, "offset", 4, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_VAL, "values", 4, copies * conf->k)) != 0 ||
	    (rc = innet_decl_reg(d, R_VAL2, "values_b", 4, copies * conf->k)) != 0 ||
	    (rc = innet_decl_reg(d, R_ADDER, "adder", 1, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_CALL, "call", 4, copies)) != 0 ||
	    (rc = innet_decl_reg(d, R_RUN, "run", 8, c->max_jobs)) != 0 ||
	    (rc = innet_decl_reg(d, R_INC, "handles", 8, c->max_jobs * INNET_AGG_MAX_WORKERS)) != 0 ||
	    (rc = innet_decl_reg(d, R_DEAF, "deaf", 8, c->max_jobs)) != 0 ||
	    (rc = innet_decl_table(d, T_JOBS, "jobs", 4, sizeof(struct agg_job), c->max_jobs)) != 0 ||
	    (rc = innet_decl_table(d, T_MEMBERS, "members", 4, sizeof(struct agg_member),
				   c->max_jobs * INNET_AGG_MAX_WORKERS)) != 0 ||
	    (rc = innet_decl_groups(d, c->max_jobs + c->n_jobs * c->but_stride)) != 0 ||
	    (rc = innet_decl_timers(d, copies + c->max_jobs)) != 0)
		return rc;
	return 0;
}

/* The port a member written "IP:UDP" is reached by: the port whose link
 * peer is its address (the XDP target multicasts the job's results in eBPF
 * only when each member has a port of its own and is that port's peer);
 * none: port 0, as before. */
static uint16_t member_port(const struct innet_switch_conf *sc, uint32_t ip)
{
	for (uint32_t p = 0; p < sc->n_ports; p++)
		if (sc->ports[p].peer_ip != 0 && sc->ports[p].peer_ip == ip)
			return (uint16_t)p;
	return 0;
}

/* On the XDP target, say at load when a job's results cannot be multicast
 * in eBPF (the devmap gives one copy per port, to the port's peer): they go
 * through the user-space engine, each one a hand-off — correct, but the
 * slow path (`innet ctl ... stats` counts them: handoff multicast). */
static void warn_slow_group(struct innet_cp *cp, const struct innet_switch_conf *sc,
			    const struct agg_job_conf *jc)
{
	if (sc->target != INNET_TARGET_XDP)
		return;
	for (uint32_t w = 0; w < jc->n_members; w++) {
		const struct agg_member *m = &jc->members[w];
		const char *why = NULL;
		uint32_t other = 0;
		for (uint32_t v = 0; v < w && why == NULL; v++)
			if (jc->members[v].port == m->port) {
				why = "shares its port with member";
				other = v;
			}
		if (why == NULL && sc->ports[m->port].peer_ip != m->ip)
			why = "is not the link peer of its port";
		if (why == NULL)
			continue;
		struct in_addr a = { .s_addr = htonl(m->ip) };
		char ip[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		if (why[0] == 's')
			fprintf(stderr, "innet: program '%s': job %u: member %u (%s:%u, port %u) %s %u: on the XDP "
					"target the job's results go through user space (the slow path); give each "
					"member the switch port it is reached by (\"PORT@IP:UDP\", the port's "
					"--port ...=PEER)\n", innet_cp_name(cp), jc->id, w, ip, m->udp, m->port, why,
				other);
		else
			fprintf(stderr, "innet: program '%s': job %u: member %u (%s:%u, port %u) %s: on the XDP "
					"target the job's results go through user space (the slow path); give each "
					"member the switch port it is reached by (\"PORT@IP:UDP\", the port's "
					"--port ...=PEER)\n", innet_cp_name(cp), jc->id, w, ip, m->udp, m->port, why);
		return;
	}
}

static int agg_init(struct innet_cp *cp, void *priv)
{
	struct agg_setup *c = priv;
	const struct innet_switch_conf *sc = innet_switch_conf(innet_cp_switch(cp));
	for (uint32_t i = 0; i < c->n_jobs; i++) {
		struct agg_job_conf *jc = &c->jobs[i];
		for (uint32_t w = 0; w < jc->n_members; w++)
			if (!jc->port_given[w])
				jc->members[w].port = member_port(sc, jc->members[w].ip);
		uint32_t key = jc->id;
		int rc = innet_cp_table_add(cp, T_JOBS, &key, &jc->job);
		if (rc != 0)
			return rc;
		struct innet_member gm[INNET_AGG_MAX_WORKERS];
		for (uint32_t w = 0; w < jc->n_members; w++) {
			if (jc->members[w].port >= sc->n_ports) {
				fprintf(stderr, "innet: program '%s': job %u member %u uses port %u; the "
						"switch has %u ports\n", innet_cp_name(cp), jc->id, w,
					jc->members[w].port, sc->n_ports);
				return -EINVAL;
			}
			uint32_t mkey = agg_member_key(jc->id, (uint8_t)w);
			if ((rc = innet_cp_table_add(cp, T_MEMBERS, &mkey, &jc->members[w])) != 0)
				return rc;
			gm[w] = (struct innet_member){ .port = jc->members[w].port, .ip = jc->members[w].ip,
						       .udp = jc->members[w].udp };
		}
		if (jc->n_members > 0 && (rc = innet_cp_group_set(cp, jc->job.group, gm, jc->n_members)) != 0)
			return rc;
		/* the groups "all but w" (R_DEAF, agg_dp.c result_group) */
		for (uint32_t w = 0; c->but_stride != 0 && jc->n_members >= 2 && w < jc->n_members; w++) {
			struct innet_member others[INNET_AGG_MAX_WORKERS];
			uint32_t n = 0;
			for (uint32_t v = 0; v < jc->n_members; v++)
				if (v != w)
					others[n++] = gm[v];
			if ((rc = innet_cp_group_set(cp, agg_but_group(c->max_jobs, c->but_stride, jc->job.group, w),
						     others, n)) != 0)
				return rc;
		}
		warn_slow_group(cp, sc, jc);
	}
	return 0;
}

const struct innet_program innet_prog_agg = {
	.name = "agg",
	.summary = "in-network all-reduce of int32 vectors (SwitchML/DAIET) with straggler timers",
	.model = INNET_MODEL_TRIO,
	.parse_bytes = INNET_AGG_HDR_LEN,
	.drop_reasons = agg_drop_names,
	.n_drop_reasons = sizeof(agg_drop_names) / sizeof(agg_drop_names[0]),
	.setup = agg_setup,
	.init = agg_init,
	.handle = innet_dp_agg_handle,
	.on_timer = innet_dp_agg_timer,
};

INNET_PROGRAM_REGISTER(innet_prog_agg)
