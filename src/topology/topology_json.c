/*
 * topology_json.c — how the topology parser reads JSON values: typed getters
 * (an integer in a range, a string, a boolean, a probability, a name, a
 * target, an IPv4 address; unknown keys) that report every problem as
 * "ORIGIN: $.json.path: message" into the error list (struct errs) and let
 * the walk go on, and the explicit addresses claimed so far (a duplicate
 * names both places). The walk that calls them is topology.c; what they
 * share is topology_pvt.h.
 *
 * No state of its own: everything lives in the caller's struct parser.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/parse.h"
#include "innet/topology.h"
#include "topology/topology_pvt.h"

/* ------------------------------------------------------------------------ */
/* Error collection: one message per line, into the caller's buffer.        */

void topo_errs_line(struct errs *e, const char *line)
{
	e->n++;
	if (e->buf == NULL || e->cap == 0 || e->len + 1 >= e->cap)
		return;
	int w = snprintf(e->buf + e->len, e->cap - e->len, "%s%s", e->len ? "\n" : "", line);
	if (w >= 0 && (size_t)w < e->cap - e->len) {
		e->len += (size_t)w;
		return;
	}
	e->len = e->cap - 1;
	if (e->cap >= 4)
		memcpy(e->buf + e->cap - 4, "...", 4);
}

/* Report "ORIGIN: PATH: message". */
__attribute__((format(printf, 3, 4)))
void topo_errs_add(struct errs *e, const char *path, const char *fmt, ...)
{
	char msg[512], line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s: %s: %s", e->origin, path, msg);
	topo_errs_line(e, line);
}

void topo_set_err(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

/* ------------------------------------------------------------------------ */
/* Typed getters.                                                           */

/* out = base.key / base[i], cut short if needed (a long path still points
 * the reader to the right place). */
void topo_path_key(char *out, const char *base, const char *key)
{
	if (snprintf(out, PATH_LEN, "%s.%s", base, key) >= PATH_LEN)
		memcpy(out + PATH_LEN - 4, "...", 4);
}

void topo_path_idx(char *out, const char *base, size_t i)
{
	if (snprintf(out, PATH_LEN, "%s[%zu]", base, i) >= PATH_LEN)
		memcpy(out + PATH_LEN - 4, "...", 4);
}

const char *topo_json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "?";
}

/* Every key of obj must be in allowed (NULL-terminated) or be "comment". */
bool topo_check_keys(struct parser *p, json_t *obj, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *v;
	bool ok = true;

	json_object_foreach(obj, key, v) {
		bool known = !strcmp(key, "comment");
		for (const char *const *a = allowed; *a != NULL && !known; a++)
			known = !strcmp(key, *a);
		if (known)
			continue;
		char list[512] = "", kp[PATH_LEN];
		size_t off = 0;
		for (const char *const *a = allowed; *a != NULL && off < sizeof(list); a++)
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
						a == allowed ? "" : ", ", *a);
		topo_path_key(kp, path, key);
		topo_errs_add(&p->e, kp, "unknown key (expected one of: %s)", list);
		ok = false;
	}
	return ok;
}

/* The getters return 1 (present and valid), 0 (absent; an error if required)
 * or -EINVAL (invalid; reported). */

int topo_get_value(struct parser *p, json_t *obj, const char *path, const char *key,
		   bool required, json_t **out)
{
	*out = json_object_get(obj, key);
	if (*out != NULL)
		return 1;
	if (required) {
		topo_errs_add(&p->e, path, "missing required key '%s'", key);
		return -EINVAL;
	}
	return 0;
}

int topo_get_uint(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, uint64_t min, uint64_t max, uint64_t *out)
{
	char kp[PATH_LEN];
	json_t *v;
	int r = topo_get_value(p, obj, path, key, required, &v);

	if (r <= 0)
		return r;
	topo_path_key(kp, path, key);
	if (!json_is_integer(v)) {
		topo_errs_add(&p->e, kp, "expected an integer, got %s", topo_json_kind(v));
		return -EINVAL;
	}
	json_int_t x = json_integer_value(v);
	if (x < 0 || (uint64_t)x < min || (uint64_t)x > max) {
		topo_errs_add(&p->e, kp, "%lld is out of range [%llu, %llu]", (long long)x,
			      (unsigned long long)min, (unsigned long long)max);
		return -EINVAL;
	}
	*out = (uint64_t)x;
	return 1;
}

int topo_get_str(struct parser *p, json_t *obj, const char *path, const char *key,
		 bool required, const char **out)
{
	char kp[PATH_LEN];
	json_t *v;
	int r = topo_get_value(p, obj, path, key, required, &v);

	if (r <= 0)
		return r;
	if (!json_is_string(v)) {
		topo_path_key(kp, path, key);
		topo_errs_add(&p->e, kp, "expected a string, got %s", topo_json_kind(v));
		return -EINVAL;
	}
	*out = json_string_value(v);
	return 1;
}

int topo_get_bool(struct parser *p, json_t *obj, const char *path, const char *key, bool *out)
{
	char kp[PATH_LEN];
	json_t *v;
	int r = topo_get_value(p, obj, path, key, false, &v);

	if (r <= 0)
		return r;
	if (!json_is_boolean(v)) {
		topo_path_key(kp, path, key);
		topo_errs_add(&p->e, kp, "expected a boolean, got %s", topo_json_kind(v));
		return -EINVAL;
	}
	*out = json_is_true(v);
	return 1;
}

/* "target": "udp" or "xdp". 1 if set, 0 if absent, -EINVAL on error (reported). */
int topo_get_target(struct parser *p, json_t *obj, const char *path, enum innet_target *out)
{
	const char *s;
	int r = topo_get_str(p, obj, path, "target", false, &s);
	if (r <= 0)
		return r;
	const struct innet_target_info *ti = innet_target_find(s);
	if (ti == NULL) {
		char kp[PATH_LEN];
		topo_path_key(kp, path, "target");
		topo_errs_add(&p->e, kp, "'%.40s' is not a target (%s; udp: the user-space engine, "
			      "xdp: eBPF on network devices)", s, innet_target_names());
		return -EINVAL;
	}
	*out = ti->id;
	return 1;
}

int topo_get_prob(struct parser *p, json_t *obj, const char *path, const char *key, double *out)
{
	char kp[PATH_LEN];
	json_t *v;
	int r = topo_get_value(p, obj, path, key, false, &v);

	if (r <= 0)
		return r;
	topo_path_key(kp, path, key);
	if (!json_is_number(v)) {
		topo_errs_add(&p->e, kp, "expected a probability (a number in [0, 1]), got %s",
			      topo_json_kind(v));
		return -EINVAL;
	}
	double x = json_number_value(v);
	if (!(x >= 0.0 && x <= 1.0)) {
		topo_errs_add(&p->e, kp, "probability %g is out of [0, 1]", x);
		return -EINVAL;
	}
	*out = x;
	return 1;
}

/* Names end up in file names and socket paths: keep them plain. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > INNET_TOPO_NAME_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

int topo_get_name(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, char out[INNET_NAME_MAX])
{
	char kp[PATH_LEN];
	const char *s;
	int r = topo_get_str(p, obj, path, key, required, &s);

	if (r <= 0)
		return r;
	if (!name_ok(s)) {
		topo_path_key(kp, path, key);
		topo_errs_add(&p->e, kp,
			      "bad name '%.80s': use 1-%u letters, digits, '_', '-' or '.', "
			      "starting with a letter or digit",
			      s, INNET_TOPO_NAME_MAX);
		return -EINVAL;
	}
	snprintf(out, INNET_NAME_MAX, "%s", s);
	return 1;
}

bool topo_is_loopback(uint32_t ip)
{
	return (ip >> 24) == 127;
}

static void ip_str(uint32_t ip, char out[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ip) };
	inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
}

/* An IPv4 address in dotted form; unicast, and in 127/8 unless the topology
 * allows external addresses. */
int topo_get_addr(struct parser *p, json_t *obj, const char *path, const char *key,
		  bool required, uint32_t *out)
{
	char kp[PATH_LEN];
	const char *s;
	uint32_t ip;
	int r = topo_get_str(p, obj, path, key, required, &s);

	if (r <= 0)
		return r;
	topo_path_key(kp, path, key);
	if (innet_parse_ip(s, &ip) != 0) {
		topo_errs_add(&p->e, kp, "bad address '%.80s': expected dotted IPv4 like 127.0.0.1", s);
		return -EINVAL;
	}
	if (ip == 0 || ip == UINT32_MAX || (ip >> 28) == 0xe) {
		topo_errs_add(&p->e, kp, "bad address %s: not a unicast address", s);
		return -EINVAL;
	}
	if (!p->t->external_addrs && !topo_is_loopback(ip)) {
		topo_errs_add(&p->e, kp,
			      "address %s is outside 127.0.0.0/8 (set \"external_addrs\": true "
			      "to use real interfaces)", s);
		return -EINVAL;
	}
	*out = ip;
	return 1;
}

/* Remember an explicit address; report it if already taken. */
int topo_claim_addr(struct parser *p, uint32_t ip, const char *path)
{
	char s[INET_ADDRSTRLEN];

	for (size_t i = 0; i < p->n_addrs; i++) {
		if (p->addrs[i].ip != ip)
			continue;
		ip_str(ip, s);
		topo_errs_add(&p->e, path, "address %s is already used by %s", s, p->addrs[i].path);
		return -EINVAL;
	}
	if (p->n_addrs == p->cap_addrs) {
		size_t cap = p->cap_addrs ? 2 * p->cap_addrs : 64;
		struct addr_owner *a = realloc(p->addrs, cap * sizeof(*a));
		if (a == NULL)
			return -ENOMEM;
		p->addrs = a;
		p->cap_addrs = cap;
	}
	p->addrs[p->n_addrs].ip = ip;
	snprintf(p->addrs[p->n_addrs].path, PATH_LEN, "%s", path);
	p->n_addrs++;
	return 0;
}

bool topo_addr_taken(const struct parser *p, uint32_t ip)
{
	for (size_t i = 0; i < p->n_addrs; i++)
		if (p->addrs[i].ip == ip)
			return true;
	return false;
}
