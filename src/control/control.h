/*
 * control/control.h — what the rest of the runtime calls of the control
 * part: the control thread's start and stop (innet_switch_start/stop), one
 * request answered as the control socket would (tests, fuzzing), and
 * capture as the targets' data planes feed it. The control part itself sees
 * the engine only through innet/switch.h and engine/switch_ctl.h.
 */
#ifndef INNET_CONTROL_CONTROL_H
#define INNET_CONTROL_CONTROL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "innet/switch.h"

/* control.c: the control thread serves the control socket and, whenever
 * the switch's cpu wake-up fires, calls innet_switch_cpu_drain() to run
 * on_cpu for punted packets. Start: 0 or -errno with a message in err. */
int innet_control_start(struct innet_switch *sw, char *err, size_t errlen);
void innet_control_stop(struct innet_switch *sw);
/* Answer one control request line (len bytes, no newline) as the control
 * socket would; returns malloc'd JSON text, or NULL when out of memory.
 * For tests and fuzzing. */
char *innet_control_request(struct innet_switch *sw, const char *line, size_t len);
/* The same on a line the caller owns (len bytes, modified in place; the
 * byte after it must be writable): the response object (ctl_request.c). */
struct json_t;
struct json_t *innet_control_run(struct innet_switch *sw, char *line, size_t len);

/* capture.c: called by the data plane for every packet on a port being
 * captured (its capture slot not NULL); closing every capture at destroy. */
void innet_capture_packet(struct innet_switch *sw, uint32_t port, bool egress,
			  const struct sockaddr_in *src, const struct sockaddr_in *dst, const void *data,
			  uint32_t len);
void innet_capture_close_all(struct innet_switch *sw);

#endif /* INNET_CONTROL_CONTROL_H */
