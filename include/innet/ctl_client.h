/*
 * innet/ctl_client.h — the one client of a switch's control socket
 * (src/control/control.c is the server; the request language is
 * docs/man/innet-ctl.md): `innet ctl`, the fabric (is a switch up yet?) and
 * `innet kv` (the acceptors' registers for a rejoin, the backup
 * coordinator's status socket) all use it. src/control/ctl_client.c.
 *
 *   client ──"reg read acc hi 0 1\n"──▶ unix socket ──▶ switch
 *          ◀──'{"ok": true, ...}\n'────                 (one JSON line per request)
 *
 * A connection carries any number of requests in turn. Every wait is
 * bounded by the timeout given at open (connecting, sending, each
 * response). Errors: NULL with errno and a message in err (what failed and
 * on which socket; a missing or refused socket adds "(is the switch
 * running?)"); nothing is printed.
 */
#ifndef INNET_CTL_CLIENT_H
#define INNET_CTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INNET_CTL_RESPONSE_MAX (256u << 20)  /* a longer response is refused (EMSGSIZE) */

struct innet_ctl_client;

/* Connect to the control socket at path, within timeout_s seconds (also the
 * bound of each request's wait). The client, or NULL with errno (ENAMETOOLONG,
 * ENOENT, ECONNREFUSED, ...) and err. */
struct innet_ctl_client *innet_ctl_client_open(const char *path, double timeout_s, char *err,
					       size_t errlen);
/* Send one request line (no '\n' in it) and wait for its response line: a
 * malloc'ed NUL-terminated string without the '\n' (free it), or NULL with
 * errno (ETIMEDOUT: no response in time; ECONNRESET: the switch closed the
 * connection; EMSGSIZE; ENOMEM) and err. */
char *innet_ctl_client_request(struct innet_ctl_client *c, const char *line, char *err,
			       size_t errlen);
/* The socket path it was opened on. */
const char *innet_ctl_client_path(const struct innet_ctl_client *c);
/* Close (NULL allowed). */
void innet_ctl_client_close(struct innet_ctl_client *c);

/* One request on a connection of its own: the response parsed, if it is a
 * JSON object whose "ok" is true (json_decref it); else NULL with err: the
 * switch's "error" text (errno EPROTO), an answer that is not JSON (EBADMSG),
 * or what open or request said. */
json_t *innet_ctl_call(const char *path, const char *line, double timeout_s, char *err,
		       size_t errlen);

/* True if something accepts connections on the unix socket at path (a
 * running switch's control socket; any socket type). */
bool innet_ctl_answers(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* INNET_CTL_CLIENT_H */
