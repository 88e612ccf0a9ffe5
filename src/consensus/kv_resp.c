/*
 * kv_resp.c — RESP (the redis protocol) requests: arrays of bulk strings and
 * inline commands, parsed without copying into argv/lens (kv.h,
 * kv_resp_parse). Nothing a client sends can make it read out of bounds or
 * block: incomplete input is "more", malformed input an error message.
 */
#include <ctype.h>
#include <limits.h>
#include <sys/types.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

/* ---- RESP parsing ------------------------------------------------------- */

/* A line ending in \r\n starting at p; returns its length (without \r\n), or
 * -1 if incomplete. */
static ssize_t line_at(const char *p, size_t len)
{
	const char *nl = memchr(p, '\n', len);
	if (nl == NULL)
		return -1;
	return nl - p;
}

static bool parse_count(const char *p, size_t n, long long min, long long max, long long *out)
{
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return kv_parse_ll(p, n, out) && *out >= min && *out <= max;
}

ssize_t kv_resp_parse(const char *buf, size_t len, int *argc, char **argv, size_t *lens,
		      int max_args, size_t max_bulk, char *scratch, size_t scratch_len, char *err,
		      size_t errlen)
{
	if (len == 0)
		return 0;
	size_t used = 0;
	if (buf[0] != '*') {
		/* inline command: words separated by spaces, up to \n */
		ssize_t ln = line_at(buf, len);
		if (ln < 0) {
			if (len > 65536) {
				snprintf(err, errlen, "-ERR Protocol error: too big inline request\r\n");
				return -1;
			}
			return 0;
		}
		size_t end = (size_t)ln;
		if (end > 0 && buf[end - 1] == '\r')
			end--;
		if (end + 1 > scratch_len) {
			snprintf(err, errlen, "-ERR Protocol error: too big inline request\r\n");
			return -1;
		}
		int n = 0;
		size_t i = 0;
		while (i < end) {
			while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
				i++;
			if (i >= end)
				break;
			if (n >= max_args) {
				snprintf(err, errlen, "-ERR Protocol error: too many arguments\r\n");
				return -1;
			}
			size_t st = i;
			while (i < end && buf[i] != ' ' && buf[i] != '\t')
				i++;
			argv[n] = scratch + used;
			lens[n] = i - st;
			memcpy(scratch + used, buf + st, i - st);
			scratch[used + i - st] = '\0';
			used += i - st + 1;
			n++;
		}
		*argc = n;
		return ln + 1;
	}
	ssize_t ln = line_at(buf, len);
	if (ln < 0)
		return len > 64 ? (snprintf(err, errlen, "-ERR Protocol error: invalid multibulk length\r\n"), -1) : 0;
	long long n;
	if (!parse_count(buf + 1, (size_t)ln - 1, -1, max_args, &n)) {
		snprintf(err, errlen, "-ERR Protocol error: invalid multibulk length\r\n");
		return -1;
	}
	size_t pos = (size_t)ln + 1;
	if (n <= 0) {
		*argc = 0;
		return (ssize_t)pos;
	}
	for (long long i = 0; i < n; i++) {
		if (pos >= len)
			return 0;
		if (buf[pos] != '$') {
			snprintf(err, errlen, "-ERR Protocol error: expected '$', got '%c'\r\n",
				 isprint((unsigned char)buf[pos]) ? buf[pos] : '?');
			return -1;
		}
		ln = line_at(buf + pos, len - pos);
		if (ln < 0)
			return len - pos > 64 ? (snprintf(err, errlen, "-ERR Protocol error: invalid bulk length\r\n"), -1) : 0;
		long long bl;
		if (!parse_count(buf + pos + 1, (size_t)ln - 1, 0, LLONG_MAX, &bl)) {
			snprintf(err, errlen, "-ERR Protocol error: invalid bulk length\r\n");
			return -1;
		}
		if ((unsigned long long)bl > max_bulk) {
			/* redis's error (proto-max-bulk-len), and which limit it hit */
			snprintf(err, errlen, "-ERR Protocol error: invalid bulk length (%lld bytes, "
					      "proto-max-bulk-len is %llu)\r\n", bl,
				 (unsigned long long)max_bulk);
			return -1;
		}
		pos += (size_t)ln + 1;
		if (len - pos < (size_t)bl + 2)
			return 0;
		if (buf[pos + bl] != '\r' || buf[pos + bl + 1] != '\n') {
			snprintf(err, errlen, "-ERR Protocol error: bulk string not terminated by CRLF\r\n");
			return -1;
		}
		if (used + (size_t)bl + 1 > scratch_len) {
			snprintf(err, errlen, "-ERR Protocol error: request too large\r\n");
			return -1;
		}
		argv[i] = scratch + used;
		lens[i] = (size_t)bl;
		memcpy(scratch + used, buf + pos, (size_t)bl);
		scratch[used + bl] = '\0';
		used += (size_t)bl + 1;
		pos += (size_t)bl + 2;
	}
	*argc = (int)n;
	return (ssize_t)pos;
}

