/*
 * util.c — small helpers shared by the load-balancer host tools: address
 * parsing and the monotonic clock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lbhost/lbhost.h"

int lbh_parse_addr(const char *s, uint16_t default_port, struct sockaddr_in *out)
{
	char buf[64];
	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	char *colon = strchr(buf, ':');
	unsigned long port = default_port;
	if (colon) {
		char *end;
		*colon = '\0';
		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || port == 0 || port > 65535)
			return -EINVAL;
	}
	if (port == 0)
		return -EINVAL;
	if (inet_pton(AF_INET, buf, &out->sin_addr) != 1)
		return -EINVAL;
	out->sin_port = htons((uint16_t)port);
	return 0;
}
