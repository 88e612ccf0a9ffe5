/*
 * engine/bpf_objects.h — the eBPF objects the build embeds in libinnet
 * (generated: $(O)/bpf/objects.c, by tools/contract/bpf-objects): one per
 * data path of the tree that meets the contract for XDP, the user-space-only
 * data paths with their reasons, and the runtime's own eBPF (netns mode's
 * link faults, the Paxos learner filter). A program instance may bring an
 * object of its own instead (innet_decl_datapath, innet/program.h): the XDP
 * target loads whichever the instance has (innet_cp_bpf_object).
 */
#ifndef INNET_ENGINE_BPF_OBJECTS_H
#define INNET_ENGINE_BPF_OBJECTS_H

#include <stddef.h>

struct innet_bpf_object {
	const char *program;                 /* struct innet_program.name */
	const unsigned char *start, *end;    /* the ELF object; NULL: user-space only */
	const char *userspace_reason;        /* why not XDP (NULL for an object) */
};

extern const struct innet_bpf_object innet_bpf_objects[];

/* The entry of program `name`, or NULL (a program defined outside the tree,
 * such as a test's: user-space only unless it declares an object). */
const struct innet_bpf_object *innet_bpf_object_find(const char *name);

/* The runtime's own eBPF: netns mode's link faults (src/topology/linkfault.bpf.c),
 * the Paxos learner filter (src/consensus/learnfilter.bpf.c). */
extern const unsigned char innet_bpf_aux_linkfault[], innet_bpf_aux_linkfault_end[];
extern const unsigned char innet_bpf_aux_learnfilter[], innet_bpf_aux_learnfilter_end[];

/* Write conf (len bytes) at the start of the first of obj's maps whose name
 * contains `section` (a .rodata section: the object's load-time settings),
 * the rest zeroed; before bpf_object__load. 0, -ENOENT (no such map),
 * -EINVAL (the section is smaller than conf), -ENOMEM or libbpf's error. */
struct bpf_object;
int innet_bpf_set_rodata(struct bpf_object *obj, const char *section, const void *conf, size_t len);

#endif /* INNET_ENGINE_BPF_OBJECTS_H */
