/*
 * util.c — small helpers shared by the load-balancer host tools: an address
 * into a sockaddr_in (parsed by innet_parse_addr).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "innet/parse.h"
#include "lbhost/lbhost.h"

int lbh_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out)
{
	struct innet_addr a;
	if (innet_parse_addr(s, default_port, &a) != 0)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_addr.s_addr = htonl(a.ip);
	out->sin_port = htons(a.udp);
	return 0;
}
