/*
 * config.c — the load balancer's settings (docs/lb.md "Settings"): parse the
 * instance's JSON settings into struct lb_priv (lb_pvt.h) — its conf, what
 * becomes the config block the handler reads (lb.h), and the control side's
 * part (the key, pools, servers, units) — rejecting unknown keys and bad
 * values with a message naming the setting. Control-plane code (setup, lb.c).
 *
 *   { "mode": "proxy"|"packet", "report_port": 47900, "key_file": PATH,
 *     "maglev_size": 65537, "conn_capacity": 65536, "idle_timeout_ms": 30000,
 *     "tcp_closing_ms": 2000, "down_after_ms": 0, "unreported": "serve",
 *     "sweep_ms": 0,
 *     "thresholds": { "cpu": 192, "accelerator": 192 },
 *     "vips":  [ { "name", "address", "port", "proto", "pool", "policy" } ],
 *     "pools": [ { "name", "servers": [ { "id", "weight",
 *                   "units": [ { "id", "kind", "address", "weight", "mac", "port" } ] } ] } ] }
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/parse.h"
#include "lb/lb_pvt.h"

static const char *const policy_names[LB_POL_COUNT] = {
	[LB_POL_NONE] = "none", [LB_POL_ECMP] = "ecmp", [LB_POL_MAGLEV] = "maglev",
	[LB_POL_WRR] = "wrr", [LB_POL_P2C] = "p2c", [LB_POL_ACCEL] = "accel",
};

int lb_policy_parse(const char *s)
{
	for (int i = 0; i < LB_POL_COUNT; i++)
		if (!strcmp(s, policy_names[i]))
			return i;
	return -1;
}

const char *lb_policy_name(unsigned p)
{
	return p < LB_POL_COUNT ? policy_names[p] : "?";
}


int lb_parse_mac(const char *s, uint64_t *mac)
{
	unsigned b[6];
	char tail;
	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
		   &tail) != 6 || strlen(s) != 17)
		return -1;
	*mac = 0;
	for (int i = 0; i < 6; i++)
		*mac = *mac << 8 | b[i];
	return 0;
}

/* Check that object o has only keys from allowed. */
static int only_keys(struct innet_decl *d, json_t *o, const char *where,
		     const char *const *allowed)
{
	if (!json_is_object(o))
		return innet_decl_error(d, "%s must be an object", where);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v) {
		bool ok = false;
		for (const char *const *k = allowed; *k != NULL; k++)
			ok |= !strcmp(*k, key);
		if (!ok)
			return innet_decl_error(d, "%s: unknown key '%s'", where, key);
	}
	return 0;
}

static int get_uint(struct innet_decl *d, json_t *o, const char *where, const char *key,
		    uint64_t def, uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (v == NULL) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < min || (uint64_t)json_integer_value(v) > max)
		return innet_decl_error(d, "%s.%s must be an integer in [%llu, %llu]", where, key,
					(unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int get_str(struct innet_decl *d, json_t *o, const char *where, const char *key,
		   bool required, const char **out)
{
	json_t *v = json_object_get(o, key);
	if (v == NULL) {
		*out = NULL;
		return required ? innet_decl_error(d, "%s needs '%s'", where, key) : 0;
	}
	if (!json_is_string(v))
		return innet_decl_error(d, "%s.%s must be a string", where, key);
	*out = json_string_value(v);
	return 0;
}

static int parse_unit(struct innet_decl *d, struct lb_priv *p, json_t *u, const char *where,
		      uint32_t server_slot, uint8_t pool, uint8_t *seen)
{
	const struct lb_conf *c = &p->conf;
	static const char *const keys[] = { "id", "kind", "address", "weight", "mac", "port", NULL };
	uint64_t id, weight, port;
	const char *kind, *addr, *mac;
	if (only_keys(d, u, where, keys) ||
	    get_uint(d, u, where, "id", 0, 0, LB_UNITS_PER_SERVER - 1, &id) ||
	    get_uint(d, u, where, "weight", 1, 0, 65535, &weight) ||
	    get_uint(d, u, where, "port", 0, 0, INNET_MAX_PORTS - 1, &port) ||
	    get_str(d, u, where, "kind", false, &kind) ||
	    get_str(d, u, where, "address", true, &addr) || get_str(d, u, where, "mac", false, &mac))
		return -EINVAL;
	if (json_object_get(u, "id") == NULL)
		return innet_decl_error(d, "%s needs 'id' (0..%u)", where, LB_UNITS_PER_SERVER - 1);
	if (*seen >> id & 1)
		return innet_decl_error(d, "%s: unit id %llu defined twice in its server", where,
					(unsigned long long)id);
	*seen |= (uint8_t)(1u << id);
	struct lb_unit_init *ui = &p->units[p->n_units++];
	ui->slot = (uint16_t)(server_slot * LB_UNITS_PER_SERVER + id);
	ui->kind = INNET_LB_KIND_CPU;
	if (kind != NULL && !strcmp(kind, "accelerator"))
		ui->kind = INNET_LB_KIND_ACCEL;
	else if (kind != NULL && strcmp(kind, "cpu"))
		return innet_decl_error(d, "%s.kind must be \"cpu\" or \"accelerator\", not \"%s\"",
					where, kind);
	struct innet_addr ua;
	if (innet_parse_addr(addr, 0, &ua) != 0)
		return innet_decl_error(d, "%s.address must be \"IPv4:PORT\", not \"%s\"", where, addr);
	ui->ip = ua.ip;
	ui->udp = ua.udp;
	ui->weight = (uint16_t)weight;
	ui->port = (uint16_t)port;
	ui->pool = pool;
	if (port >= innet_decl_n_ports(d))
		return innet_decl_error(d, "%s.port %llu: the switch has %u ports", where,
					(unsigned long long)port, innet_decl_n_ports(d));
	ui->mac = 0;
	if (mac != NULL && lb_parse_mac(mac, &ui->mac) != 0)
		return innet_decl_error(d, "%s.mac must be \"aa:bb:cc:dd:ee:ff\", not \"%s\"", where, mac);
	if (c->mode == LB_MODE_PACKET && mac == NULL)
		return innet_decl_error(d, "%s needs 'mac' in packet mode", where);
	for (uint32_t i = 0; i + 1 < p->n_units; i++)
		if (p->units[i].ip == ui->ip && p->units[i].udp == ui->udp)
			return innet_decl_error(d, "%s: address %s used by two units", where, addr);
	return 0;
}

static int parse_pools(struct innet_decl *d, struct lb_priv *p, json_t *pools)
{
	static const char *const pkeys[] = { "name", "servers", NULL };
	static const char *const skeys[] = { "id", "weight", "units", NULL };
	if (pools == NULL || !json_is_array(pools) || json_array_size(pools) == 0)
		return innet_decl_error(d, "setting 'pools' must be a non-empty array of pools");
	if (json_array_size(pools) > INNET_LB_MAX_POOLS)
		return innet_decl_error(d, "%zu pools, at most %u", json_array_size(pools),
					INNET_LB_MAX_POOLS);
	size_t i;
	json_t *pj;
	char where[96];
	json_array_foreach(pools, i, pj) {
		snprintf(where, sizeof(where), "pools[%zu]", i);
		const char *name;
		if (only_keys(d, pj, where, pkeys) || get_str(d, pj, where, "name", true, &name))
			return -EINVAL;
		if (strlen(name) == 0 || strlen(name) >= sizeof(p->pool_names[0]))
			return innet_decl_error(d, "%s.name must have 1..31 characters", where);
		for (uint32_t k = 0; k < p->n_pools; k++)
			if (!strcmp(p->pool_names[k], name))
				return innet_decl_error(d, "%s: pool '%s' defined twice", where, name);
		uint8_t pool = (uint8_t)p->n_pools++;
		snprintf(p->pool_names[pool], sizeof(p->pool_names[pool]), "%s", name);
		json_t *servers = json_object_get(pj, "servers");
		if (servers == NULL || !json_is_array(servers) || json_array_size(servers) == 0)
			return innet_decl_error(d, "%s.servers must be a non-empty array", where);
		size_t j;
		json_t *s;
		json_array_foreach(servers, j, s) {
			char sw[128];
			snprintf(sw, sizeof(sw), "%s.servers[%zu]", where, j);
			uint64_t id, weight;
			if (only_keys(d, s, sw, skeys) ||
			    get_uint(d, s, sw, "id", 0, 0, 65535, &id) ||
			    get_uint(d, s, sw, "weight", 1, 1, 65535, &weight))
				return -EINVAL;
			if (json_object_get(s, "id") == NULL)
				return innet_decl_error(d, "%s needs 'id'", sw);
			if (p->n_servers >= INNET_LB_MAX_SERVERS)
				return innet_decl_error(d, "more than %u servers", INNET_LB_MAX_SERVERS);
			for (uint32_t k = 0; k < p->n_servers; k++)
				if (p->servers[k].id == id)
					return innet_decl_error(d, "%s: server id %llu defined twice", sw,
								(unsigned long long)id);
			uint32_t slot = p->n_servers++;
			p->servers[slot].id = (uint16_t)id;
			p->servers[slot].weight = (uint16_t)weight;
			p->servers[slot].pool = pool;
			json_t *units = json_object_get(s, "units");
			if (units == NULL || !json_is_array(units) ||
			    json_array_size(units) > LB_UNITS_PER_SERVER)
				return innet_decl_error(d, "%s.units must be an array of at most %u units",
							sw, LB_UNITS_PER_SERVER);
			uint8_t seen = 0;
			size_t k;
			json_t *u;
			json_array_foreach(units, k, u) {
				char uw[160];
				snprintf(uw, sizeof(uw), "%s.units[%zu]", sw, k);
				if (parse_unit(d, p, u, uw, slot, pool, &seen) != 0)
					return -EINVAL;
			}
		}
	}
	return 0;
}

static int parse_vips(struct innet_decl *d, struct lb_priv *p, json_t *vips)
{
	struct lb_conf *c = &p->conf;
	static const char *const keys[] = { "name", "address", "port", "proto", "pool", "policy",
					    NULL };
	if (vips == NULL || !json_is_array(vips) || json_array_size(vips) == 0)
		return innet_decl_error(d, "setting 'vips' must be a non-empty array of VIPs");
	if (json_array_size(vips) > INNET_LB_MAX_VIPS)
		return innet_decl_error(d, "%zu VIPs, at most %u", json_array_size(vips),
					INNET_LB_MAX_VIPS);
	size_t i;
	json_t *v;
	char where[30];
	json_array_foreach(vips, i, v) {
		snprintf(where, sizeof(where), "vips[%zu]", i);
		const char *name, *addr, *proto, *pool, *policy;
		uint64_t port;
		if (only_keys(d, v, where, keys) || get_str(d, v, where, "name", false, &name) ||
		    get_str(d, v, where, "address", false, &addr) ||
		    get_uint(d, v, where, "port", 0, 1, 65535, &port) ||
		    get_str(d, v, where, "proto", false, &proto) ||
		    get_str(d, v, where, "pool", true, &pool) ||
		    get_str(d, v, where, "policy", false, &policy))
			return -EINVAL;
		if (json_object_get(v, "port") == NULL)
			return innet_decl_error(d, "%s needs 'port'", where);
		struct lb_vip *vp = &c->vips[c->n_vips++];
		snprintf(vp->name, sizeof(vp->name), "%s", name ? name : where);
		vp->port = (uint16_t)port;
		vp->proto = LB_PROTO_UDP;
		if (proto != NULL && !strcmp(proto, "tcp"))
			vp->proto = LB_PROTO_TCP;
		else if (proto != NULL && strcmp(proto, "udp"))
			return innet_decl_error(d, "%s.proto must be \"udp\" or \"tcp\"", where);
		if (c->mode == LB_MODE_PROXY && vp->proto == LB_PROTO_TCP)
			return innet_decl_error(d, "%s: TCP VIPs need packet mode (proxy mode is UDP)",
						where);
		vp->ip = 0;
		if (addr != NULL && innet_parse_ip(addr, &vp->ip) != 0)
			return innet_decl_error(d, "%s.address must be an IPv4 address", where);
		if (c->mode == LB_MODE_PACKET && addr == NULL)
			return innet_decl_error(d, "%s needs 'address' in packet mode", where);
		int pol = lb_policy_parse(policy ? policy : "maglev");
		if (pol < 0)
			return innet_decl_error(d, "%s.policy must be one of none, ecmp, maglev, wrr, "
						"p2c, accel; not \"%s\"", where, policy);
		vp->policy = (uint8_t)pol;
		int found = -1;
		for (uint32_t k = 0; k < p->n_pools; k++)
			if (!strcmp(p->pool_names[k], pool))
				found = (int)k;
		if (found < 0)
			return innet_decl_error(d, "%s.pool: no pool named '%s'", where, pool);
		vp->pool = (uint8_t)found;
		for (uint32_t k = 0; k + 1 < c->n_vips; k++)
			if (c->vips[k].port == vp->port && c->vips[k].proto == vp->proto &&
			    (c->mode == LB_MODE_PROXY || c->vips[k].ip == vp->ip))
				return innet_decl_error(d, "%s: the same address, port and protocol as "
							"vips[%u]", where, k);
	}
	return 0;
}

int lb_conf_parse(struct innet_decl *d, struct innet_args *a, struct lb_priv *p)
{
	struct lb_conf *c = &p->conf;
	const char *mode, *key_file, *unrep;
	uint64_t report_port, mg, cap, idle, closing, down, sweep;
	int rc;
	if ((rc = innet_args_str(a, "mode", "proxy", &mode)) != 0)
		return rc;
	if (!strcmp(mode, "proxy"))
		c->mode = LB_MODE_PROXY;
	else if (!strcmp(mode, "packet"))
		c->mode = LB_MODE_PACKET;
	else
		return innet_decl_error(d, "setting 'mode' must be \"proxy\" or \"packet\", not \"%s\"",
					mode);
	if ((rc = innet_args_u64(a, "report_port", INNET_LB_REPORT_UDP, 1, 65535, &report_port)) ||
	    (rc = innet_args_u64(a, "maglev_size", 65537, 3, 1000003, &mg)) ||
	    (rc = innet_args_u64(a, "conn_capacity", 65536, 16, 1u << 22, &cap)) ||
	    (rc = innet_args_u64(a, "idle_timeout_ms", 30000, 1, 86400000, &idle)) ||
	    (rc = innet_args_u64(a, "tcp_closing_ms", 2000, 1, 86400000, &closing)) ||
	    (rc = innet_args_u64(a, "down_after_ms", 0, 0, 86400000, &down)) ||
	    (rc = innet_args_u64(a, "sweep_ms", 0, 0, 3600000, &sweep)) ||
	    (rc = innet_args_str(a, "unreported", "serve", &unrep)) ||
	    (rc = innet_args_str(a, "key_file", NULL, &key_file)))
		return rc;
	if (!lb_is_prime((uint32_t)mg))
		return innet_decl_error(d, "setting 'maglev_size' must be prime (e.g. 251, 4099, "
					"65537, 655373), not %llu", (unsigned long long)mg);
	c->report_port = (uint16_t)report_port;
	c->maglev_size = (uint32_t)mg;
	p->conn_capacity = (uint32_t)cap;
	c->idle_ms = (uint32_t)idle;
	c->closing_ms = (uint32_t)closing;
	c->down_after_ms = (uint32_t)down;
	/* A unit whose agent never reported: served (state "unknown", as
	 * HAProxy and Katran serve a backend before any health check), served
	 * for down_after_ms from its configuration, or down until it reports. */
	if (!strcmp(unrep, "serve"))
		c->unreported = LB_UNREP_SERVE;
	else if (!strcmp(unrep, "grace"))
		c->unreported = LB_UNREP_GRACE;
	else if (!strcmp(unrep, "down"))
		c->unreported = LB_UNREP_DOWN;
	else
		return innet_decl_error(d, "setting 'unreported' must be \"serve\", \"grace\" or "
					"\"down\", not \"%s\"", unrep);
	c->sweep_ms = sweep ? (uint32_t)sweep : (c->idle_ms / 4 > 100 ? c->idle_ms / 4 : 100);
	c->bloom_size = 64;
	while (c->bloom_size < 4 * p->conn_capacity)
		c->bloom_size <<= 1;

	c->threshold[INNET_LB_KIND_CPU] = 192;
	c->threshold[INNET_LB_KIND_ACCEL] = 192;
	json_t *th = innet_args_json(a, "thresholds");
	if (th != NULL) {
		static const char *const tkeys[] = { "cpu", "accelerator", NULL };
		uint64_t tc, ta;
		if (only_keys(d, th, "thresholds", tkeys) ||
		    get_uint(d, th, "thresholds", "cpu", 192, 1, 256, &tc) ||
		    get_uint(d, th, "thresholds", "accelerator", 192, 1, 256, &ta))
			return -EINVAL;
		/* 256 = never busy by load level (only the reported busy bit). */
		c->threshold[INNET_LB_KIND_CPU] = (uint16_t)tc;     /* 256: the level never */
		c->threshold[INNET_LB_KIND_ACCEL] = (uint16_t)ta;   /* makes a unit busy */
	}
	if (key_file != NULL) {
		char err[256];
		if (innet_lb_key_load(&p->key, key_file, err, sizeof(err)) != 0)
			return innet_decl_error(d, "setting 'key_file': %s", err);
		c->have_key = true;
	}
	if (parse_pools(d, p, innet_args_json(a, "pools")) != 0 ||
	    parse_vips(d, p, innet_args_json(a, "vips")) != 0)
		return -EINVAL;
	if (c->maglev_size <= 100u * p->n_units)
		fprintf(stderr, "innet: lb: maglev_size %u is not above 100 x %u units: shares may "
			"be off their weights by more than 1%%\n", c->maglev_size, p->n_units);

	/* Ports: VIPs and the report port must be bound; the rest is the NAT pool. */
	uint32_t n_udp = 0;
	const uint16_t *udp = innet_decl_udp(d, &n_udp);
	bool have_report = false;
	for (uint32_t i = 0; i < n_udp; i++)
		have_report |= udp[i] == c->report_port;
	/* Packet mode takes reports as frames from the raw ports (UDP to
	 * report_port, any address); a bound report port is only needed for
	 * reports sent to an address of the switch (proxy mode). */
	if (!have_report && c->mode == LB_MODE_PROXY)
		return innet_decl_error(d, "the report port %u is not among the instance's UDP ports "
					"(add it to \"udp\")", c->report_port);
	for (uint32_t v = 0; v < c->n_vips; v++) {
		if (c->vips[v].port == c->report_port && c->mode == LB_MODE_PROXY)
			return innet_decl_error(d, "vips[%u]: port %u is the report port", v,
						c->report_port);
		if (c->mode != LB_MODE_PROXY)
			continue;
		bool bound = false;
		for (uint32_t i = 0; i < n_udp; i++)
			bound |= udp[i] == c->vips[v].port;
		if (!bound)
			return innet_decl_error(d, "vips[%u]: port %u is not among the instance's UDP "
						"ports (add it to \"udp\")", v, c->vips[v].port);
		c->vip_of_port[c->vips[v].port] = (uint8_t)(v + 1);
	}
	for (uint32_t i = 0; i < n_udp; i++) {
		if (udp[i] == c->report_port || c->vip_of_port[udp[i]] != 0)
			continue;
		c->nat_ports[c->n_nat] = udp[i];
		c->nat_of_port[udp[i]] = (uint16_t)(++c->n_nat);
	}
	if (c->mode == LB_MODE_PROXY && c->n_nat == 0)
		return innet_decl_error(d, "proxy mode needs NAT ports: UDP ports of the instance "
					"besides the VIPs and the report port (e.g. \"20000-20255\")");
	c->nat_words = (c->n_nat + 63) / 64;
	if (c->nat_words == 0)
		c->nat_words = 1;
	return 0;
}
