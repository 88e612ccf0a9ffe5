/*
 * xdp/xdp.h — the XDP target as the runtime sees it: what switch.c, decl.c,
 * worker.c and control.c call when a switch's target is INNET_TARGET_XDP.
 * Everything target-specific lives in src/targets/xdp/; the runtime only calls
 * these (docs/xdp.md, "Two targets").
 *
 * Lifecycle, inside innet_switch_create / start / stop / destroy:
 *
 *   setup() of every program (declarations, settings, config block)
 *   innet_xdp_create     load each program's eBPF object with the declared
 *                        shapes; rehome registers, tables, config and timers
 *                        onto the objects' maps (mmap): one state from here on
 *   init() of every program (writes initial state: lands in the maps)
 *   innet_xdp_start      fill the port maps, attach to every port device
 *                        (bpf_link: the kernel detaches it when the process
 *                        exits, however it exits), start the hand-off thread
 *   innet_xdp_stop       detach, stop the thread
 *   innet_xdp_destroy    unmap, close
 */
#ifndef INNET_XDP_XDP_H
#define INNET_XDP_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/switch.h"

struct innet_xdp;

int innet_xdp_create(struct innet_switch *sw, char *err, size_t errlen);
int innet_xdp_start(struct innet_switch *sw, char *err, size_t errlen);
void innet_xdp_stop(struct innet_switch *sw);
void innet_xdp_destroy(struct innet_switch *sw);

/* Counters of the eBPF side, added to the user-space engine's. */
void innet_xdp_prog_stats_add(struct innet_switch *sw, uint32_t prog, struct innet_prog_stats *out);
void innet_xdp_port_stats_add(struct innet_switch *sw, uint32_t port, struct innet_port_stats *out);
void innet_xdp_stats_reset(struct innet_switch *sw);

/* A multicast group changed (innet_cp_group_set): mirror it into the maps. */
int innet_xdp_group_sync(struct innet_switch *sw, uint32_t prog, uint32_t group,
			 const struct innet_member *m, uint32_t n);

/* innet_switch_inject on the XDP target: BPF_PROG_TEST_RUN of the program's
 * eBPF object, with the same result as the user-space engine's inject. */
int innet_xdp_inject(struct innet_switch *sw, uint16_t port, uint16_t dst_udp,
		     const struct innet_addr *src, const void *data, uint32_t len,
		     struct innet_inject_result *res);

/* The eBPF column of the resource report, measured from the loaded program. */
struct innet_xdp_prog_info {
	bool loaded;                   /* an eBPF object runs this program */
	const char *userspace_reason;  /* why not, if it cannot (else NULL) */
	uint32_t insns;                /* instructions after the verifier's rewrites */
	uint32_t jited_bytes;
	uint32_t verified_insns;       /* instructions the verifier processed */
	uint32_t stack_bytes;          /* stack depth (verifier) */
	uint64_t map_bytes;            /* bytes of the program's own maps */
	uint32_t n_maps;
	uint32_t tail_calls;           /* at most, per packet (dispatch + recirculation) */
};
int innet_xdp_prog_info(struct innet_switch *sw, uint32_t prog, struct innet_xdp_prog_info *info);


#endif /* INNET_XDP_XDP_H */
