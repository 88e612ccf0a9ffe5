/*
 * learnfilter.c — loads the learner filter (learnfilter.bpf.c, embedded in
 * the library as innet_bpf_aux_learnfilter) and attaches it in XDP driver
 * mode to a learner's receive interfaces; one object, so the interfaces
 * share the per-instance state (2Bs of one instance arrive on different
 * veths in netns mode, on either CPU). An XDP program found on an interface
 * (netns mode's XDP_PASS, which lets a veth take frames XDP switches send
 * into it) is replaced atomically and put back on detach.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "consensus/learnfilter.h"
#include "engine/bpf_objects.h"

struct learnfilter {
	struct bpf_object *obj;
	int prog_fd, stats_fd;
	uint32_t n;
	int ifindex[LF_MAX_IFACES];
	int old_fd[LF_MAX_IFACES];   /* the program that was there, -1 = none */
};

static int lf_add(struct learnfilter *f, const char *name, char *err, size_t errlen)
{
	int ifindex = (int)if_nametoindex(name);
	if (ifindex == 0) {
		snprintf(err, errlen, "no interface %s", name);
		return -ENODEV;
	}
	if (f->n >= LF_MAX_IFACES) {
		snprintf(err, errlen, "more than %u interfaces", LF_MAX_IFACES);
		return -E2BIG;
	}
	uint32_t old_id = 0;
	int rc = bpf_xdp_query_id(ifindex, XDP_FLAGS_DRV_MODE, &old_id);
	if (rc != 0) {
		snprintf(err, errlen, "%s: XDP query: %s", name, strerror(-rc));
		return rc;
	}
	int old_fd = -1;
	if (old_id != 0 && (old_fd = bpf_prog_get_fd_by_id(old_id)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: XDP program %u: %s", name, old_id, strerror(errno));
		return rc;
	}
	LIBBPF_OPTS(bpf_xdp_attach_opts, ao, .old_prog_fd = old_fd);
	rc = bpf_xdp_attach(ifindex, f->prog_fd,
			    XDP_FLAGS_DRV_MODE | (old_fd >= 0 ? XDP_FLAGS_REPLACE : XDP_FLAGS_UPDATE_IF_NOEXIST),
			    old_fd >= 0 ? &ao : NULL);
	if (rc != 0) {
		snprintf(err, errlen, "%s: XDP attach (driver mode): %s", name, strerror(-rc));
		if (old_fd >= 0)
			close(old_fd);
		return rc;
	}
	f->ifindex[f->n] = ifindex;
	f->old_fd[f->n] = old_fd;
	f->n++;
	return 0;
}

struct learnfilter *learnfilter_attach(const char *ifaces, uint16_t port, uint32_t n_acceptors,
				       bool quorum_mark, char *err, size_t errlen)
{
	if (n_acceptors == 0 || n_acceptors > 64) {
		snprintf(err, errlen, "need 1..64 acceptors");
		return NULL;
	}
	struct learnfilter *f = calloc(1, sizeof(*f));
	if (f == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "innet_learnfilter");
	f->obj = bpf_object__open_mem(innet_bpf_aux_learnfilter,
				      (size_t)(innet_bpf_aux_learnfilter_end - innet_bpf_aux_learnfilter), &oo);
	if (f->obj == NULL) {
		snprintf(err, errlen, "cannot open the filter's eBPF object: %s", strerror(errno));
		free(f);
		return NULL;
	}
	struct lf_conf c = { .port = port, .quorum_mark = quorum_mark,
			     .majority = n_acceptors / 2 + 1 };
	int rc = innet_bpf_set_rodata(f->obj, ".rodata", &c, sizeof(c));
	if (rc == 0)
		rc = bpf_object__load(f->obj);
	if (rc != 0) {
		snprintf(err, errlen, "cannot load the learner filter: %s", strerror(-rc));
		goto fail;
	}
	f->prog_fd = bpf_program__fd(bpf_object__find_program_by_name(f->obj, "innet_learnfilter"));
	f->stats_fd = bpf_map__fd(bpf_object__find_map_by_name(f->obj, "lf_stats"));
	if (!strcmp(ifaces, "all")) {
		struct if_nameindex *all = if_nameindex();
		if (all == NULL) {
			snprintf(err, errlen, "if_nameindex: %s", strerror(errno));
			goto fail;
		}
		for (struct if_nameindex *i = all; i->if_index != 0 && rc == 0; i++)
			if (strcmp(i->if_name, "lo") != 0)
				rc = lf_add(f, i->if_name, err, errlen);
		if_freenameindex(all);
		if (rc == 0 && f->n == 0) {
			snprintf(err, errlen, "no interface but lo");
			rc = -ENODEV;
		}
	} else {
		char *list = strdup(ifaces), *save = NULL;
		if (list == NULL) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		for (char *t = strtok_r(list, ",", &save); t != NULL && rc == 0; t = strtok_r(NULL, ",", &save))
			rc = lf_add(f, t, err, errlen);
		free(list);
		if (rc == 0 && f->n == 0) {
			snprintf(err, errlen, "no interface given");
			rc = -ENODEV;
		}
	}
	if (rc != 0)
		goto fail;
	return f;
fail:
	learnfilter_detach(f);
	return NULL;
}

void learnfilter_stats(const struct learnfilter *f, struct lf_stats *out)
{
	memset(out, 0, sizeof(*out));
	int ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0)
		return;
	struct lf_stats *v = calloc((size_t)ncpu, sizeof(*v));
	uint32_t zero = 0;
	if (v != NULL && bpf_map_lookup_elem(f->stats_fd, &zero, v) == 0)
		for (int c = 0; c < ncpu; c++) {
			out->seen += v[c].seen;
			out->passed_quorum += v[c].passed_quorum;
			out->dropped_before += v[c].dropped_before;
			out->dropped_redundant += v[c].dropped_redundant;
			out->passed_before += v[c].passed_before;
			out->passed_other += v[c].passed_other;
			out->mark_cleared += v[c].mark_cleared;
		}
	free(v);
}

int learnfilter_detach(struct learnfilter *f)
{
	if (f == NULL)
		return 0;
	int first = 0;
	for (uint32_t i = 0; i < f->n; i++) {
		/* Only if ours is still the one there (REPLACE checks that). */
		LIBBPF_OPTS(bpf_xdp_attach_opts, ao, .old_prog_fd = f->prog_fd);
		int rc = f->old_fd[i] >= 0
				 ? bpf_xdp_attach(f->ifindex[i], f->old_fd[i],
						  XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE, &ao)
				 : bpf_xdp_detach(f->ifindex[i], XDP_FLAGS_DRV_MODE, &ao);
		if (rc != 0 && first == 0)
			first = rc;
		if (f->old_fd[i] >= 0)
			close(f->old_fd[i]);
	}
	bpf_object__close(f->obj);
	free(f);
	return first;
}
