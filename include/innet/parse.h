/*
 * innet/parse.h — numbers and addresses from text, the one way the command
 * line, the control socket and program settings read them
 * (src/engine/parse.c).
 */
#ifndef INNET_PARSE_H
#define INNET_PARSE_H

#include <stdint.h>

#include "innet/dp.h"   /* struct innet_addr */

#ifdef __cplusplus
extern "C" {
#endif

/* An unsigned number in [min, max]: decimal, or hex with a 0x prefix;
 * nothing else (no sign, no spaces, no octal, nothing after it). 0,
 * -EINVAL (not such a number) or -ERANGE (outside [min, max]). */
int innet_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* A dotted IPv4 address, into host byte order. 0 or -EINVAL. */
int innet_parse_ip(const char *s, uint32_t *ip);
/* IP:PORT (PORT 1..65535), or IP alone when def_udp is not 0 (the port is
 * then def_udp). Host byte order. 0 or -EINVAL. */
int innet_parse_addr(const char *s, uint16_t def_udp, struct innet_addr *a);

#ifdef __cplusplus
}
#endif
#endif /* INNET_PARSE_H */
