/*
 * engine/switch_ctl.h — the narrow view of a switch that the control part
 * (src/control: the control thread, ctl commands, capture, metrics) has
 * beyond the public API of innet/switch.h: the slots the engine keeps for
 * it (the control thread's state, each port's capture and their lock, which
 * the targets' data planes read), the wake-up of packets queued for on_cpu,
 * a program instance's control-side state (for on_ctl) and where the bound
 * metrics address is written back. The control part includes no other
 * engine header; switch.c implements these.
 */
#ifndef INNET_ENGINE_SWITCH_CTL_H
#define INNET_ENGINE_SWITCH_CTL_H

#include <pthread.h>
#include <stdatomic.h>

#include "innet/switch.h"

struct innet_control;   /* src/control/control.c */
struct innet_capture;   /* src/control/capture.c */

/* The control thread's state (NULL when it does not run). */
struct innet_control **innet_switch_control_slot(struct innet_switch *sw);
/* An eventfd that is readable while packets wait for on_cpu; then call
 * innet_switch_cpu_drain. */
int innet_switch_cpu_wake_fd(const struct innet_switch *sw);
void innet_switch_cpu_drain(struct innet_switch *sw);
/* Port `port`'s capture (NULL: none), which the data plane tests for each
 * packet; start, stop and file writes take the lock. */
_Atomic(struct innet_capture *) *innet_switch_capture_slot(struct innet_switch *sw, uint32_t port);
pthread_mutex_t *innet_switch_capture_lock(struct innet_switch *sw);
/* Write the metrics address actually bound back into the configuration. */
void innet_switch_set_metrics_addr(struct innet_switch *sw, const char *addr);
/* The instance's control-side state (innet_decl_priv): what on_ctl gets. */
void *innet_cp_priv(const struct innet_cp *cp);

#endif /* INNET_ENGINE_SWITCH_CTL_H */
