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

static bool is_hex(char c)
{
	return isxdigit((unsigned char)c) != 0;
}

static int hex_val(char c)
{
	return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
}

/* An inline command line[0..end) split as redis does (sdssplitargs):
 * words between spaces; "double quotes" with \n \r \t \b \a \xHH and
 * \<char> escapes; 'single quotes' with \' ; a closing quote must end the
 * word. A NUL byte ends the line. The words go to scratch (at least end + 1
 * bytes: a word never grows); argc, or -1 with the error in err. */
static int split_inline(const char *line, size_t end, char **argv, size_t *lens, int max_args,
			char *scratch, char *err, size_t errlen)
{
	const char *nul = memchr(line, '\0', end);
	if (nul != NULL)
		end = (size_t)(nul - line);
	size_t i = 0, used = 0;
	int n = 0;
	for (;;) {
		while (i < end && is_space(line[i]))
			i++;
		if (i >= end)
			return n;
		if (n >= max_args) {
			snprintf(err, errlen, "-ERR Protocol error: too many arguments\r\n");
			return -1;
		}
		char *w = scratch + used;
		size_t wl = 0;
		bool inq = false, insq = false, done = false;
		while (!done) {
			char ch = i < end ? line[i] : '\0';
			if (inq) {
				if (ch == '\\' && i + 3 < end && line[i + 1] == 'x' && is_hex(line[i + 2]) &&
				    is_hex(line[i + 3])) {
					w[wl++] = (char)(hex_val(line[i + 2]) * 16 + hex_val(line[i + 3]));
					i += 3;
				} else if (ch == '\\' && i + 1 < end) {
					char e = line[++i];
					w[wl++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' :
						  e == 'b' ? '\b' : e == 'a' ? '\a' : e;
				} else if (ch == '"') {
					if (i + 1 < end && !is_space(line[i + 1]))
						goto unbalanced;
					done = true;
				} else if (i >= end) {
					goto unbalanced;
				} else {
					w[wl++] = ch;
				}
			} else if (insq) {
				if (ch == '\\' && i + 1 < end && line[i + 1] == '\'') {
					i++;
					w[wl++] = '\'';
				} else if (ch == '\'') {
					if (i + 1 < end && !is_space(line[i + 1]))
						goto unbalanced;
					done = true;
				} else if (i >= end) {
					goto unbalanced;
				} else {
					w[wl++] = ch;
				}
			} else if (i >= end || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
				done = true;
			} else if (ch == '"') {
				inq = true;
			} else if (ch == '\'') {
				insq = true;
			} else {
				w[wl++] = ch;
			}
			if (i < end)
				i++;
		}
		w[wl] = '\0';
		argv[n] = w;
		lens[n] = wl;
		used += wl + 1;
		n++;
	}
unbalanced:
	snprintf(err, errlen, "-ERR Protocol error: unbalanced quotes in request\r\n");
	return -1;
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
		int n = split_inline(buf, end, argv, lens, max_args, scratch, err, errlen);
		if (n < 0)
			return -1;
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

