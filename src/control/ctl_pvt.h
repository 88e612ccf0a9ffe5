/*
 * ctl_pvt.h — one control request (struct ctl_req) and what its handlers
 * share, private to the control socket's request files: ctl_request.c (the
 * request language, the command table, the helpers below; ping, info,
 * programs, prog), ctl_state.c (reg, table, group) and ctl_monitor.c (stats,
 * metrics, capture, resources). control.c serves the socket and calls
 * innet_control_run (control/control.h). Not installed; nothing here is exported
 * from libinnet.so (src/libinnet.map), and the ctl_ prefix keeps the names
 * apart from the rest of libinnet.a.
 *
 * Threads: the control thread's (or a test's, through innet_control_request);
 * a struct ctl_req belongs to the one request it answers.
 */
#ifndef INNET_CTL_PVT_H
#define INNET_CTL_PVT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "innet/switch.h"
#include "engine/switch_ctl.h"

#define CTL_ERR_MAX       512u

struct ctl_req {
	struct innet_switch *sw;
	json_t *resp;             /* the success response being built */
	char err[CTL_ERR_MAX];    /* the error message when a handler fails */
};

/* A word from the request, made safe and short for an error message. */
struct shown {
	char s[72];
};

/* ---- ctl_request.c: JSON helpers ----------------------------------------- */

/* Copy s into dst (dstlen > 0) with every byte that is not printable ASCII
 * replaced by '?', truncated to max characters (then "..."). */
void ctl_sanitize(char *dst, size_t dstlen, const char *s, size_t max);
/* A JSON string for s (printable ASCII replaces anything jansson refuses). */
json_t *ctl_jstr(const char *s);
/* A JSON number for v; a decimal string when it exceeds JSON's int64 range. */
json_t *ctl_ju64(uint64_t v);
/* o[key] = v and append v to a, taking v (a NULL v, out of memory, is
 * refused without a leak). */
void ctl_jset(json_t *o, const char *key, json_t *v);
void ctl_jpush(json_t *a, json_t *v);
/* An IPv4 address (host byte order) as a dotted JSON string. */
json_t *ctl_jip(uint32_t ip_host);

/* ---- ctl_request.c: errors and checked arguments -------------------------- */

/* Record an error message (printf-style); returns -EINVAL for `return ctl_fail(...)`. */
int ctl_fail(struct ctl_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* word, made safe and short for an error message: ctl_show(word).s */
struct shown ctl_show(const char *word);
/* innet_parse_u64 with an error message naming the argument `what`; 0 or -EINVAL (with the message). */
int ctl_req_u64(struct ctl_req *r, const char *what, const char *s, uint64_t max, uint64_t *out);
/* The program instance called name, or NULL with a message listing them. */
struct innet_cp *ctl_req_prog(struct ctl_req *r, const char *name);
/* A switch port index into *port: 0, or -EINVAL with a message. */
int ctl_req_port(struct ctl_req *r, const char *s, uint32_t *port);

/* ---- the handlers the command table (ctl_request.c) dispatches to --------- */
/* Each gets the words after the command words (their number already
 * checked against the table), fills r->resp and returns 0, or returns -errno
 * with r->err set. */

/* ctl_state.c */
int ctl_cmd_reg_read(struct ctl_req *r, int argc, char **argv);     /* PROG REG IDX [COUNT] */
int ctl_cmd_reg_write(struct ctl_req *r, int argc, char **argv);    /* PROG REG IDX VALUE */
int ctl_cmd_table_add(struct ctl_req *r, int argc, char **argv);    /* PROG TABLE KEYHEX VALHEX */
int ctl_cmd_table_del(struct ctl_req *r, int argc, char **argv);    /* PROG TABLE KEYHEX */
int ctl_cmd_table_get(struct ctl_req *r, int argc, char **argv);    /* PROG TABLE KEYHEX */
int ctl_cmd_table_list(struct ctl_req *r, int argc, char **argv);   /* PROG TABLE [MAX] */
int ctl_cmd_group_set(struct ctl_req *r, int argc, char **argv);    /* PROG GROUP MEMBER... */
int ctl_cmd_group_get(struct ctl_req *r, int argc, char **argv);    /* PROG GROUP */

/* ctl_monitor.c */
int ctl_cmd_stats(struct ctl_req *r, int argc, char **argv);
int ctl_cmd_stats_reset(struct ctl_req *r, int argc, char **argv);
int ctl_cmd_metrics(struct ctl_req *r, int argc, char **argv);
int ctl_cmd_capture_start(struct ctl_req *r, int argc, char **argv); /* PORT PATH [MAXPKTS] */
int ctl_cmd_capture_stop(struct ctl_req *r, int argc, char **argv);  /* PORT */
int ctl_cmd_resources(struct ctl_req *r, int argc, char **argv);     /* [PROG] */

#endif /* INNET_CTL_PVT_H */
