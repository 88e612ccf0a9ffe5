/*
 * bpf_objects.c — finding an embedded eBPF object by program name, and the
 * one load-time helper every user of the runtime's eBPF shares (settings in
 * an object's .rodata section). engine/bpf_objects.h says what is embedded.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "engine/bpf_objects.h"

const struct innet_bpf_object *innet_bpf_object_find(const char *name)
{
	for (const struct innet_bpf_object *o = innet_bpf_objects; o->program != NULL; o++)
		if (!strcmp(o->program, name))
			return o;
	return NULL;
}

int innet_bpf_set_rodata(struct bpf_object *obj, const char *section, const void *conf, size_t len)
{
	struct bpf_map *m;
	bpf_object__for_each_map(m, obj) {
		if (strstr(bpf_map__name(m), section) == NULL)
			continue;
		size_t sz = 0;
		if (bpf_map__initial_value(m, &sz) == NULL || sz < len)
			return -EINVAL;
		uint8_t *v = calloc(1, sz);
		if (v == NULL)
			return -ENOMEM;
		memcpy(v, conf, len);
		int rc = bpf_map__set_initial_value(m, v, sz);
		free(v);
		return rc;
	}
	return -ENOENT;
}
