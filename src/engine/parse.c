/*
 * parse.c — numbers and addresses from text (innet/parse.h).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "innet/parse.h"

int innet_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	int base = 10;
	const char *p = s;
	if (p == NULL)
		return -EINVAL;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (*p == '\0')
		return -EINVAL;
	for (const char *q = p; *q; q++)
		if (base == 16 ? !isxdigit((unsigned char)*q) : !isdigit((unsigned char)*q))
			return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p, &end, base);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int innet_parse_ip(const char *s, uint32_t *ip)
{
	struct in_addr a;
	if (s == NULL || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*ip = ntohl(a.s_addr);
	return 0;
}

int innet_parse_addr(const char *s, uint16_t def_udp, struct innet_addr *a)
{
	char buf[64];
	uint64_t port = def_udp;
	if (s == NULL || snprintf(buf, sizeof(buf), "%s", s) >= (int)sizeof(buf))
		return -EINVAL;
	char *colon = strrchr(buf, ':');
	if (colon != NULL) {
		*colon = '\0';
		if (innet_parse_u64(colon + 1, 1, 65535, &port) != 0)
			return -EINVAL;
	} else if (def_udp == 0) {
		return -EINVAL;
	}
	uint32_t ip;
	if (innet_parse_ip(buf, &ip) != 0)
		return -EINVAL;
	a->ip = ip;
	a->udp = (uint16_t)port;
	return 0;
}
