/*
 * decl.c — a program's declared state: the declaration calls a program's
 * setup makes (innet_decl_*), its settings (innet_args_*, over the JSON
 * object from the topology), and the allocation of its register arrays,
 * tables, groups and timers. The data path's out-of-line helpers are in
 * dp_user.c, the control plane's accessors in cp.c.
 *
 * Settings are checked strictly: a wrong type, a value out of range or a key
 * the program never asked for fails the setup with a message that names the
 * program instance and the key.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/bpf_objects.h"
#include "engine/switch_pvt.h"

struct innet_args {
	json_t *obj;                 /* the settings object (never NULL) */
	const char *inst;            /* instance name, for messages */
	char used[64][INNET_NAME_MAX];
	uint32_t n_used;
	char *err;
	size_t errlen;
	int failed;
};

/* ------------------------------------------------------------------------ */
/* Settings                                                                   */

static void args_error(struct innet_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void args_error(struct innet_args *a, const char *fmt, ...)
{
	if (a->failed)
		return;
	a->failed = -EINVAL;
	int off = snprintf(a->err, a->errlen, "program '%s': ", a->inst);
	if (off < 0 || (size_t)off >= a->errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->err + off, a->errlen - off, fmt, ap);
	va_end(ap);
}

static json_t *args_get(struct innet_args *a, const char *key)
{
	if (a->n_used < 64)
		snprintf(a->used[a->n_used++], INNET_NAME_MAX, "%s", key);
	return json_object_get(a->obj, key);
}

int innet_args_u64(struct innet_args *a, const char *key, uint64_t def, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	json_t *v = args_get(a, key);
	*out = def;
	if (v == NULL)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		args_error(a, "setting '%s' must be a non-negative integer", key);
		return -EINVAL;
	}
	uint64_t x = (uint64_t)json_integer_value(v);
	if (x < min || x > max) {
		args_error(a, "setting '%s' = %" PRIu64 " is out of range [%" PRIu64 ", %" PRIu64 "]",
			   key, x, min, max);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int innet_args_bool(struct innet_args *a, const char *key, bool def, bool *out)
{
	json_t *v = args_get(a, key);
	*out = def;
	if (v == NULL)
		return 0;
	if (!json_is_boolean(v)) {
		args_error(a, "setting '%s' must be true or false", key);
		return -EINVAL;
	}
	*out = json_is_true(v);
	return 0;
}

int innet_args_str(struct innet_args *a, const char *key, const char *def, const char **out)
{
	json_t *v = args_get(a, key);
	*out = def;
	if (v == NULL)
		return 0;
	if (!json_is_string(v)) {
		args_error(a, "setting '%s' must be a string", key);
		return -EINVAL;
	}
	*out = json_string_value(v);
	return 0;
}

int innet_args_u64_array(struct innet_args *a, const char *key, uint64_t *out, uint32_t max,
			 uint32_t *n)
{
	json_t *v = args_get(a, key);
	*n = 0;
	if (v == NULL)
		return 0;
	if (!json_is_array(v)) {
		args_error(a, "setting '%s' must be an array of non-negative integers", key);
		return -EINVAL;
	}
	if (json_array_size(v) > max) {
		args_error(a, "setting '%s' has %zu entries, at most %u allowed", key,
			   json_array_size(v), max);
		return -EINVAL;
	}
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || json_integer_value(e) < 0) {
			args_error(a, "setting '%s'[%zu] must be a non-negative integer", key, i);
			return -EINVAL;
		}
		out[i] = (uint64_t)json_integer_value(e);
	}
	*n = (uint32_t)json_array_size(v);
	return 0;
}

json_t *innet_args_json(struct innet_args *a, const char *key)
{
	return args_get(a, key);
}

/* ------------------------------------------------------------------------ */
/* Declarations                                                               */

int innet_decl_error(struct innet_decl *d, const char *fmt, ...)
{
	if (!d->failed) {
		d->failed = -EINVAL;
		int off = snprintf(d->err, d->errlen, "program '%s': ", d->cp->name);
		if (off >= 0 && (size_t)off < d->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(d->err + off, d->errlen - off, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

int innet_decl_reg(struct innet_decl *d, unsigned id, const char *name, uint32_t width, uint32_t count)
{
	struct innet_cp *cp = d->cp;
	if (id != cp->n_regs)
		return innet_decl_error(d, "register '%s' declared as id %u, expected %u", name, id,
					cp->n_regs);
	if (id >= INNET_MAX_REGS)
		return innet_decl_error(d, "too many register arrays (max %u)", INNET_MAX_REGS);
	if (width == 0 || count == 0 || width > INNET_PKT_MAX)
		return innet_decl_error(d, "register '%s': width %u x count %u is invalid", name, width,
					count);
	uint32_t stride = innet_reg_stride(width);
	uint64_t bytes = (uint64_t)stride * count;
	if (bytes > (1ull << 34))
		return innet_decl_error(d, "register '%s': %" PRIu64 " bytes is too large", name, bytes);
	/* Anonymous memory: page-aligned and zero without touching every page,
	 * so a large register array costs nothing until it is used. */
	size_t alloc = (size_t)bytes;
	uint8_t *mem = mmap(NULL, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return innet_decl_error(d, "register '%s': cannot allocate %" PRIu64 " bytes", name, bytes);
	snprintf(cp->reg_names[id], INNET_NAME_MAX, "%s", name);
	cp->regs[id] = (struct innet_reg){ .mem = mem, .width = width, .stride = stride,
					   .count = count, .name = cp->reg_names[id] };
	cp->n_regs++;
	return 0;
}

int innet_decl_table(struct innet_decl *d, unsigned id, const char *name, uint32_t key_size,
		     uint32_t value_size, uint32_t capacity)
{
	struct innet_cp *cp = d->cp;
	if (id != cp->n_tables)
		return innet_decl_error(d, "table '%s' declared as id %u, expected %u", name, id,
					cp->n_tables);
	if (id >= INNET_MAX_TABLES)
		return innet_decl_error(d, "too many tables (max %u)", INNET_MAX_TABLES);
	struct innet_table *t = innet_table_create(name, key_size, value_size, capacity);
	if (t == NULL)
		return innet_decl_error(d, "table '%s': key %u B, value %u B, capacity %u: %s", name,
					key_size, value_size, capacity, strerror(errno));
	cp->tables[id] = t;
	cp->n_tables++;
	return 0;
}

int innet_decl_groups(struct innet_decl *d, uint32_t n)
{
	struct innet_cp *cp = d->cp;
	if (n > INNET_MAX_GROUPS)
		return innet_decl_error(d, "%u multicast groups, at most %u", n, INNET_MAX_GROUPS);
	if (cp->groups != NULL)
		return innet_decl_error(d, "multicast groups declared twice");
	if (n == 0)
		return 0;
	cp->groups = calloc(n, sizeof(*cp->groups));
	if (cp->groups == NULL)
		return innet_decl_error(d, "cannot allocate %u groups", n);
	cp->n_groups = n;
	return 0;
}

int innet_decl_timers(struct innet_decl *d, uint32_t n)
{
	struct innet_cp *cp = d->cp;
	if (cp->program->model != INNET_MODEL_TRIO && n > 0)
		return innet_decl_error(d, "timers need the Trio model");
	if (n > INNET_MAX_TIMERS)
		return innet_decl_error(d, "%u timers, at most %u", n, INNET_MAX_TIMERS);
	if (cp->timers != NULL)
		return innet_decl_error(d, "timers declared twice");
	if (n == 0)
		return 0;
	if (cp->on_timer == NULL)
		return innet_decl_error(d, "timers declared but the program has no on_timer");
	cp->timers = calloc(n, sizeof(*cp->timers));
	if (cp->timers == NULL)
		return innet_decl_error(d, "cannot allocate %u timers", n);
	cp->n_timers = n;
	return 0;
}

int innet_decl_datapath(struct innet_decl *d,
			enum innet_action (*handle)(struct innet_ctx *ctx, struct innet_pkt *pkt),
			void (*on_timer)(struct innet_ctx *ctx, uint32_t timer, uint64_t arg),
			const char *bpf_object_path)
{
	struct innet_cp *cp = d->cp;
	if (handle == NULL)
		return innet_decl_error(d, "a data path needs a handler");
	if (cp->own_dp)
		return innet_decl_error(d, "data path declared twice");
	if (bpf_object_path != NULL) {
		FILE *f = fopen(bpf_object_path, "rb");
		if (f == NULL)
			return innet_decl_error(d, "eBPF object %s: %s", bpf_object_path, strerror(errno));
		long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
		void *buf = n > 0 && n < (256l << 20) ? malloc((size_t)n) : NULL;
		bool ok = buf != NULL && fseek(f, 0, SEEK_SET) == 0 && fread(buf, 1, (size_t)n, f) == (size_t)n;
		fclose(f);
		if (!ok) {
			free(buf);
			return innet_decl_error(d, "eBPF object %s: cannot read it", bpf_object_path);
		}
		cp->bpf_obj = buf;
		cp->bpf_len = (size_t)n;
	}
	cp->handle = handle;
	cp->on_timer = on_timer;
	cp->own_dp = true;
	return 0;
}

const struct innet_bpf_object *innet_cp_bpf_object(const struct innet_cp *cp,
						   struct innet_bpf_object *own)
{
	if (!cp->own_dp)
		return innet_bpf_object_find(cp->program->name);
	own->program = cp->program->name;
	own->start = cp->bpf_obj;
	own->end = cp->bpf_obj ? (const unsigned char *)cp->bpf_obj + cp->bpf_len : NULL;
	own->userspace_reason = cp->bpf_obj ? NULL : "its data path has no eBPF object";
	return own;
}

static void priv_release(struct innet_cp *cp)
{
	if (cp->priv != NULL) {
		if (cp->priv_free != NULL)
			cp->priv_free(cp->priv);
		else
			free(cp->priv);
	}
	cp->priv = NULL;
	cp->priv_free = NULL;
}

void *innet_decl_conf(struct innet_decl *d, uint32_t size)
{
	struct innet_cp *cp = d->cp;
	if (size == 0 || size > INNET_CONF_MAX) {
		innet_decl_error(d, "config block of %u bytes (1..%u allowed)", size, INNET_CONF_MAX);
		return NULL;
	}
	if (cp->conf != NULL) {
		innet_decl_error(d, "config block declared twice");
		return NULL;
	}
	void *c = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c == MAP_FAILED) {
		innet_decl_error(d, "cannot allocate a config block of %u bytes", size);
		return NULL;
	}
	cp->conf = c;
	cp->conf_size = size;
	return c;
}

void innet_decl_priv(struct innet_decl *d, void *priv)
{
	priv_release(d->cp);
	d->cp->priv = priv;
}

void innet_decl_priv_with(struct innet_decl *d, void *priv, void (*priv_free)(void *priv))
{
	priv_release(d->cp);
	d->cp->priv = priv;
	d->cp->priv_free = priv_free;
}

uint16_t innet_decl_node_id(const struct innet_decl *d)
{
	return d->cp->sw->conf.node_id;
}

uint32_t innet_decl_n_ports(const struct innet_decl *d)
{
	return d->cp->sw->n_ports;
}

uint32_t innet_decl_port_ip(const struct innet_decl *d, uint32_t port)
{
	return port < d->cp->sw->n_ports ? d->cp->sw->ports[port].conf.ip : 0;
}

const uint16_t *innet_decl_udp(const struct innet_decl *d, uint32_t *n)
{
	*n = d->cp->n_udp;
	return d->cp->udp;
}

int innet_cp_init_error(struct innet_cp *cp, const char *fmt, ...)
{
	struct innet_switch *sw = cp->sw;
	if (sw->init_err == NULL || sw->init_err[0] != '\0')
		return -EINVAL; /* not in init, or the first error stands */
	int off = snprintf(sw->init_err, sw->init_errlen, "program '%s': ", cp->name);
	if (off >= 0 && (size_t)off < sw->init_errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(sw->init_err + off, sw->init_errlen - off, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Run the program's setup over its settings; on failure everything the setup
 * declared is freed by the caller through innet_state_free. */
int innet_state_setup(struct innet_cp *cp, const struct innet_prog_conf *pc, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *obj;
	if (pc->args_json != NULL && pc->args_json[0] != '\0') {
		obj = json_loads(pc->args_json, 0, &jerr);
		if (obj == NULL) {
			snprintf(err, errlen, "program '%s': settings are not valid JSON: %s (column %d)",
				 cp->name, jerr.text, jerr.column);
			return -EINVAL;
		}
		if (!json_is_object(obj)) {
			json_decref(obj);
			snprintf(err, errlen, "program '%s': settings must be a JSON object", cp->name);
			return -EINVAL;
		}
	} else {
		obj = json_object();
		if (obj == NULL)
			return -ENOMEM;
	}
	struct innet_args *a = calloc(1, sizeof(*a));
	if (a == NULL) {
		json_decref(obj);
		return -ENOMEM;
	}
	a->obj = obj;
	a->inst = cp->name;
	a->err = err;
	a->errlen = errlen;
	struct innet_decl d = { .cp = cp, .err = err, .errlen = errlen };

	int rc = cp->program->setup ? cp->program->setup(&d, a) : 0;
	if (rc == 0 && d.failed)
		rc = d.failed;
	if (rc == 0 && a->failed)
		rc = a->failed;
	if (rc != 0 && err[0] == '\0')
		snprintf(err, errlen, "program '%s': setup failed: %s", cp->name, strerror(-rc));
	if (rc == 0) {
		/* Every key must have been asked for. */
		const char *key;
		json_t *v;
		json_object_foreach(obj, key, v) {
			bool known = false;
			for (uint32_t i = 0; i < a->n_used && !known; i++)
				known = !strcmp(a->used[i], key);
			if (!known) {
				snprintf(err, errlen, "program '%s' (%s): unknown setting '%s'", cp->name,
					 cp->program->name, key);
				rc = -EINVAL;
				break;
			}
		}
	}
	json_decref(obj);
	free(a);
	return rc;
}

void innet_state_free(struct innet_cp *cp)
{
	for (uint32_t i = 0; i < cp->n_regs; i++)
		innet_state_reg_release(cp, i);
	cp->n_regs = 0;
	for (uint32_t i = 0; i < cp->n_tables; i++)
		innet_table_destroy(cp->tables[i]);
	cp->n_tables = 0;
	free(cp->groups);
	cp->groups = NULL;
	cp->n_groups = 0;
	if (cp->timers_mapped)
		munmap(cp->timers, cp->timers_mapped);
	else
		free(cp->timers);
	cp->timers = NULL;
	cp->timers_mapped = 0;
	cp->n_timers = 0;
	if (cp->conf != NULL && cp->conf_release != NULL)
		cp->conf_release(cp);
	else if (cp->conf != NULL)
		munmap(cp->conf, cp->conf_size);
	cp->conf = NULL;
	cp->conf_size = 0;
	priv_release(cp);
	free(cp->bpf_obj);
	cp->bpf_obj = NULL;
	cp->bpf_len = 0;
}

/* Unmap register id's memory, whoever provided it (anonymous memory here, or
 * the XDP target's mmap of its map: both are a plain mapping of the same
 * length). */
void innet_state_reg_release(struct innet_cp *cp, uint32_t id)
{
	struct innet_reg *r = &cp->regs[id];
	if (r->mem != NULL)
		munmap(r->mem, innet_reg_bytes(r));
	r->mem = NULL;
}

