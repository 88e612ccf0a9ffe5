/*
 * test_kv_commands.c — the KV store's commands (src/consensus/kv_store.c,
 * kv_string.c, kv_keys.c, kv_hash.c, kv_list.c) against redis 7's replies,
 * table-driven: each case is an inline command line (parsed by the RESP
 * parser's inline mode, so "quotes" and \xHH escapes work as in redis-cli)
 * and the exact RESP reply. Log time is set by hand (kv_store_advance), as
 * the entries' stamps set it on a replica. Also: the defects redis's test
 * suite found (NUL bytes and "-0" as integers, inline quotes, SELECT and
 * unknown-command errors), expiry by log time, WATCH versions in a MULTI
 * block, SCAN's cursor under growth, snapshots of the state, and two stores
 * fed the same commands staying equal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <cmocka.h>

#include "consensus/kv.h"

#define T0 1700000000000ll /* log time at the start of each test (unix ms) */

static char scratch[1 << 16];
static char *argv_[256];
static size_t lens_[256];

/* Parse one inline line into argv_/lens_; argc. */
static int parse(const char *line)
{
	char buf[4096], err[160];
	int n = snprintf(buf, sizeof(buf), "%s\r\n", line);
	int argc = -1;
	ssize_t r = kv_resp_parse(buf, (size_t)n, &argc, argv_, lens_, 256, 1u << 20, scratch, sizeof(scratch),
				  err, sizeof(err));
	if (r != n)
		fail_msg("cannot parse '%s': %s", line, r < 0 ? err : "incomplete");
	return argc;
}

/* Apply line with ctx; the reply (static, NUL-terminated). */
static const char *run(struct kv_store *s, struct kv_ctx *ctx, const char *line)
{
	static struct kv_buf out;
	out.len = 0;
	int argc = parse(line);
	kv_store_exec(s, ctx, argc, argv_, lens_, &out);
	kv_buf_append(&out, "", 1);
	out.len--;
	return out.p;
}

struct step {
	const char *cmd;
	const char *reply;
};

static void steps(struct kv_store *s, struct kv_ctx *ctx, const struct step *st, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *got = run(s, ctx, st[i].cmd);
		if (strcmp(got, st[i].reply) != 0)
			fail_msg("%s: want %s, got %s", st[i].cmd, st[i].reply, got);
	}
}

#define STEPS(s, ctx, ...)                                                                  \
	do {                                                                                \
		static const struct step st_[] = { __VA_ARGS__ };                           \
		steps(s, ctx, st_, sizeof(st_) / sizeof(st_[0]));                           \
	} while (0)

static int setup(void **state)
{
	struct kv_store *s = kv_store_create();
	assert_non_null(s);
	kv_store_advance(s, T0);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	kv_store_destroy(*state);
	return 0;
}

/* ---- the defects found with redis's suite ---- */

static void test_defects(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      /* a value holding a NUL byte is not an integer, and stays */
	      { "SET k \"7\\x00junk\"", "+OK\r\n" },
	      { "INCR k", "-ERR value is not an integer or out of range\r\n" },
	      { "STRLEN k", ":6\r\n" },
	      { "GET k", "$6\r\n7\0junk\r\n" },
	      /* "-0", "+1", " 1", "01" are not integers */
	      { "SET z -0", "+OK\r\n" },
	      { "INCR z", "-ERR value is not an integer or out of range\r\n" },
	      { "INCRBY n -0", "-ERR value is not an integer or out of range\r\n" },
	      { "INCRBY n +1", "-ERR value is not an integer or out of range\r\n" },
	      { "INCRBY n 01", "-ERR value is not an integer or out of range\r\n" },
	      { "INCRBY n -9223372036854775808", ":-9223372036854775808\r\n" },
	      { "INCRBY n 9223372036854775808", "-ERR value is not an integer or out of range\r\n" },
	      { "DECR n", "-ERR increment or decrement would overflow\r\n" },
	      { "DECRBY n -9223372036854775808", "-ERR decrement would overflow\r\n" },
	      /* inline quotes as redis splits them */
	      { "SET \"hello world\" \"a \\\"b\\\"\"", "+OK\r\n" },
	      { "GET \"hello world\"", "$5\r\na \"b\"\r\n" },
	      { "SET q 'x\\'y'", "+OK\r\n" },
	      { "GET q", "$3\r\nx'y\r\n" },
	      /* SELECT inside a block (the server answers it outside) */
	      { "SELECT abc", "-ERR value is not an integer or out of range\r\n" },
	      { "SELECT 16", "-ERR DB index is out of range\r\n" },
	      { "SELECT", "-ERR wrong number of arguments for 'select' command\r\n" },
	      /* unknown commands name their first arguments */
	      { "FLUBBER a \"b c\"",
		"-ERR unknown command 'FLUBBER', with args beginning with: 'a' 'b c' \r\n" },
	      { "FLUBBER", "-ERR unknown command 'FLUBBER', with args beginning with: \r\n" },
	      { "GET", "-ERR wrong number of arguments for 'get' command\r\n" });
}

static void test_inline_parser(void **state)
{
	char err[160];
	int argc;
	static const struct {
		const char *in;
		int argc;          /* -1: a protocol error */
		const char *last;  /* the last argument */
	} cases[] = {
		{ "SET a b\r\n", 3, "b" },
		{ "  SET   a\tb  \n", 3, "b" },
		{ "SET a \"b c\"\r\n", 3, "b c" },
		{ "SET a \"\\x41\\n\"\r\n", 3, "A\n" },
		{ "SET a \"b\"c\r\n", -1, NULL },   /* a closing quote must end the word */
		{ "SET a \"b\r\n", -1, NULL },      /* unbalanced */
		{ "SET a 'b\r\n", -1, NULL },
		{ "SET a ''\r\n", 3, "" },
		{ "\r\n", 0, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		argc = -2;
		ssize_t r = kv_resp_parse(cases[i].in, strlen(cases[i].in), &argc, argv_, lens_, 256, 1u << 20,
					  scratch, sizeof(scratch), err, sizeof(err));
		if (cases[i].argc < 0) {
			assert_int_equal(r, -1);
			assert_string_equal(err, "-ERR Protocol error: unbalanced quotes in request\r\n");
			continue;
		}
		assert_int_equal(r, (ssize_t)strlen(cases[i].in));
		assert_int_equal(argc, cases[i].argc);
		if (cases[i].last) {
			assert_int_equal(lens_[argc - 1], strlen(cases[i].last));
			assert_memory_equal(argv_[argc - 1], cases[i].last, lens_[argc - 1]);
		}
	}
	(void)state;
}

/* ---- strings ---- */

static void test_set_options(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "SET k v NX", "+OK\r\n" },
	      { "SET k w NX", "$-1\r\n" },
	      { "SET k w XX GET", "$1\r\nv\r\n" },
	      { "SET nokey w XX", "$-1\r\n" },
	      { "SET k v NX XX", "-ERR syntax error\r\n" },
	      { "SET k v EX 10 PX 10", "-ERR syntax error\r\n" },
	      { "SET k v EX", "-ERR syntax error\r\n" },
	      { "SET k v EX 0", "-ERR invalid expire time in 'set' command\r\n" },
	      { "SET k v EX -1", "-ERR invalid expire time in 'set' command\r\n" },
	      { "SET k v EX 9223372036854775807", "-ERR invalid expire time in 'set' command\r\n" },
	      { "SET k v EX abc", "-ERR value is not an integer or out of range\r\n" },
	      { "SET k v EX 100", "+OK\r\n" },
	      { "TTL k", ":100\r\n" },
	      { "SET k v2 KEEPTTL", "+OK\r\n" },
	      { "PTTL k", ":100000\r\n" },
	      { "SET k v3", "+OK\r\n" },
	      { "TTL k", ":-1\r\n" },
	      { "SET k v PX 1500", "+OK\r\n" },
	      { "PTTL k", ":1500\r\n" },
	      { "SET k v EXAT 1700000100", "+OK\r\n" },
	      { "EXPIRETIME k", ":1700000100\r\n" },
	      { "SET k v PXAT 1700000100123", "+OK\r\n" },
	      { "PEXPIRETIME k", ":1700000100123\r\n" },
	      { "SET k v PXAT 1600000000000", "+OK\r\n" }, /* in the past: gone at once */
	      { "EXISTS k", ":0\r\n" },
	      { "SET k v KEEPTTL EX 10", "-ERR syntax error\r\n" },
	      { "HSET h f v", ":1\r\n" },
	      { "SET h x GET", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" },
	      { "SET h x", "+OK\r\n" }, /* SET overwrites any type */
	      { "TYPE h", "+string\r\n" },
	      { "SETNX h y", ":0\r\n" },
	      { "SETNX new y", ":1\r\n" },
	      { "SETEX e 0 v", "-ERR invalid expire time in 'setex' command\r\n" },
	      { "PSETEX e 100 v", "+OK\r\n" },
	      { "PTTL e", ":100\r\n" },
	      { "GETSET e w", "$1\r\nv\r\n" },
	      { "TTL e", ":-1\r\n" },
	      { "GETDEL e", "$1\r\nw\r\n" },
	      { "GETDEL e", "$-1\r\n" });
}

static void test_getex(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "GETEX nokey EX 0", "$-1\r\n" },
	      { "SET k v", "+OK\r\n" },
	      { "GETEX k EX 10 PERSIST", "-ERR syntax error\r\n" },
	      { "GETEX k NX", "-ERR syntax error\r\n" },
	      { "GETEX k EX 0", "-ERR invalid expire time in 'getex' command\r\n" },
	      { "GETEX k EX 10", "$1\r\nv\r\n" },
	      { "TTL k", ":10\r\n" },
	      { "GETEX k PERSIST", "$1\r\nv\r\n" },
	      { "TTL k", ":-1\r\n" },
	      { "GETEX k PXAT 1000", "$1\r\nv\r\n" }, /* in the past: deleted */
	      { "EXISTS k", ":0\r\n" });
}

static void test_string_commands(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "APPEND a hello", ":5\r\n" },
	      { "APPEND a \" world\"", ":11\r\n" },
	      { "STRLEN a", ":11\r\n" },
	      { "GETRANGE a 0 4", "$5\r\nhello\r\n" },
	      { "GETRANGE a -5 -1", "$5\r\nworld\r\n" },
	      { "GETRANGE a 5 1", "$0\r\n\r\n" },
	      { "GETRANGE a 0 -100", "$1\r\nh\r\n" },
	      { "SUBSTR a 0 100", "$11\r\nhello world\r\n" },
	      { "SETRANGE a 6 WORLD", ":11\r\n" },
	      { "GET a", "$11\r\nhello WORLD\r\n" },
	      { "SETRANGE b 3 x", ":4\r\n" },
	      { "GET b", "$4\r\n\0\0\0x\r\n" },
	      { "SETRANGE b -1 x", "-ERR offset is out of range\r\n" },
	      { "SETRANGE b 536870911 xx",
		"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n" },
	      { "SETRANGE none 0 \"\"", ":0\r\n" },
	      { "EXISTS none", ":0\r\n" },
	      { "MSET x 1 y 2", "+OK\r\n" },
	      { "MSET x 1 y", "-ERR wrong number of arguments for 'mset' command\r\n" },
	      { "MSETNX y 3 z 4", ":0\r\n" },
	      { "MSETNX z 4 w 5", ":1\r\n" },
	      { "MGET x nokey z", "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n4\r\n" },
	      { "INCRBYFLOAT f 10.5", "$4\r\n10.5\r\n" },
	      { "INCRBYFLOAT f -0.5", "$2\r\n10\r\n" },
	      { "INCRBYFLOAT f 5.0e3", "$4\r\n5010\r\n" },
	      { "INCRBYFLOAT f abc", "-ERR value is not a valid float\r\n" },
	      { "INCRBYFLOAT f nan", "-ERR value is not a valid float\r\n" },
	      { "INCRBYFLOAT f 1e5000", "-ERR value is not a valid float\r\n" },
	      { "SET f \" 1\"", "+OK\r\n" },
	      { "INCRBYFLOAT f 1", "-ERR value is not a valid float\r\n" },
	      { "SETBIT bits 7 1", ":0\r\n" },
	      { "SETBIT bits 7 1", ":1\r\n" },
	      { "SETBIT bits 0 2", "-ERR bit is not an integer or out of range\r\n" },
	      { "SETBIT bits -1 1", "-ERR bit offset is not an integer or out of range\r\n" },
	      { "GETBIT bits 7", ":1\r\n" },
	      { "GETBIT bits 100", ":0\r\n" },
	      { "GET bits", "$1\r\n\x01\r\n" },
	      { "SET bc foobar", "+OK\r\n" },
	      { "BITCOUNT bc", ":26\r\n" },
	      { "BITCOUNT bc 1 1", ":6\r\n" },
	      { "BITCOUNT bc 5 30 BIT", ":17\r\n" },
	      { "BITCOUNT bc 0 0 FOO", "-ERR syntax error\r\n" },
	      { "MSET l1 ohmytext l2 mynewtext", "+OK\r\n" },
	      { "LCS l1 l2", "$6\r\nmytext\r\n" },
	      { "LCS l1 l2 LEN", ":6\r\n" },
	      { "LCS l1 l2 IDX MINMATCHLEN 4 WITHMATCHLEN",
		"*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n" },
	      { "LCS l1 l2 LEN IDX", "-ERR If you want both the length and indexes, please just use IDX.\r\n" });
}

/* ---- keys ---- */

static void test_keys(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "MSET a 1 b 2 c 3", "+OK\r\n" },
	      { "EXISTS a b nokey a", ":3\r\n" },
	      { "DEL a nokey", ":1\r\n" },
	      { "UNLINK b", ":1\r\n" },
	      { "TYPE c", "+string\r\n" },
	      { "TYPE nokey", "+none\r\n" },
	      { "DBSIZE", ":1\r\n" },
	      { "MSET foo 1 fao 2 fbo 3 f*o 4", "+OK\r\n" },
	      { "KEYS f\\*o", "*1\r\n$3\r\nf*o\r\n" },
	      { "KEYS f[^a-b*]o", "*1\r\n$3\r\nfoo\r\n" },
	      { "DEL foo fao fbo f*o", ":4\r\n" },
	      { "RENAME nokey x", "-ERR no such key\r\n" },
	      { "SET t v EX 100", "+OK\r\n" },
	      { "RENAME t t2", "+OK\r\n" },
	      { "TTL t2", ":100\r\n" },
	      { "RENAMENX t2 c", ":0\r\n" },
	      { "RENAMENX t2 t2", ":0\r\n" },
	      { "RENAME t2 t2", "+OK\r\n" },
	      { "COPY t2 t3", ":1\r\n" },
	      { "TTL t3", ":100\r\n" },
	      { "COPY t2 t3", ":0\r\n" },
	      { "COPY t2 t3 REPLACE", ":1\r\n" },
	      { "COPY t2 t2", "-ERR source and destination objects are the same\r\n" },
	      { "COPY t2 t2 DB x", "-ERR value is not an integer or out of range\r\n" },
	      { "COPY t2 t2 DB 16", "-ERR DB index is out of range\r\n" },
	      { "COPY t2 t2 DB 1", ":1\r\n" },
	      { "MOVE t2 1", ":0\r\n" },  /* exists there */
	      { "MOVE t3 1", ":1\r\n" },
	      { "MOVE t3 0", "-ERR source and destination objects are the same\r\n" },
	      { "SWAPDB 0 x", "-ERR invalid second DB index\r\n" },
	      { "SWAPDB 0 1", "+OK\r\n" },
	      { "EXISTS t3 t2", ":2\r\n" },
	      { "SWAPDB 0 1", "+OK\r\n" },
	      { "OBJECT ENCODING c", "$3\r\nint\r\n" },
	      { "OBJECT ENCODING t2", "$6\r\nembstr\r\n" },
	      { "OBJECT ENCODING nokey", "$-1\r\n" },
	      { "OBJECT FOO c", "-ERR unknown subcommand 'FOO'. Try OBJECT HELP.\r\n" },
	      { "OBJECT ENCODING", "-ERR wrong number of arguments for 'object|encoding' command\r\n" },
	      { "FLUSHDB ASYNC", "+OK\r\n" },
	      { "FLUSHDB FOO", "-ERR syntax error\r\n" },
	      { "DBSIZE", ":0\r\n" },
	      { "RANDOMKEY", "$-1\r\n" },
	      { "SCAN 0 COUNT 0", "-ERR syntax error\r\n" },
	      { "SCAN x", "-ERR invalid cursor\r\n" },
	      { "SCAN 0", "*2\r\n$1\r\n0\r\n*0\r\n" });
}

/* SCAN returns every key present for the whole walk at least once, while
 * keys are added (the table grows) and removed between calls. */
static void test_scan_cursor(void **state)
{
	struct kv_store *s = *state;
	char line[64];
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof(line), "SET k%d v", i);
		run(s, NULL, line);
	}
	int seen[300] = { 0 };
	unsigned long long cursor = 0;
	int calls = 0, extra = 0;
	do {
		snprintf(line, sizeof(line), "SCAN %llu COUNT 7", cursor);
		const char *r = run(s, NULL, line);
		/* *2 $n cursor *m ($len key)... */
		const char *p = strchr(r + 4, '\n') + 1;
		cursor = strtoull(p, NULL, 10);
		p = strchr(p, '\n') + 1;
		int m = atoi(p + 1);
		p = strchr(p, '\n') + 1;
		for (int k = 0; k < m; k++) {
			p = strchr(p, '\n') + 1;
			int id = -1;
			if (sscanf(p, "k%d", &id) == 1 && id >= 0 && id < 300)
				seen[id]++;
			p = strchr(p, '\n') + 1;
		}
		/* grow the table under the walk, and remove keys it never saw */
		if (calls % 5 == 0 && extra < 400) {
			for (int j = 0; j < 40; j++, extra++) {
				snprintf(line, sizeof(line), "SET x%d v", extra);
				run(s, NULL, line);
			}
		}
		calls++;
	} while (cursor != 0 && calls < 10000);
	assert_int_equal(cursor, 0);
	for (int i = 0; i < 300; i++)
		if (seen[i] == 0)
			fail_msg("SCAN never returned k%d", i);
	/* KEYS with a pattern */
	const char *r = run(s, NULL, "KEYS k29?");
	assert_true(r[0] == '*');
	assert_int_equal(atoi(r + 1), 10);
}

static void test_databases(void **state)
{
	struct kv_store *s = *state;
	struct kv_ctx db9 = { .db = 9, .resp = 2 }, db0 = { .db = 0, .resp = 2 };
	STEPS(s, &db9, { "SET k nine", "+OK\r\n" }, { "DBSIZE", ":1\r\n" });
	STEPS(s, &db0, { "GET k", "$-1\r\n" }, { "SET k zero", "+OK\r\n" }, { "FLUSHDB", "+OK\r\n" });
	STEPS(s, &db9, { "GET k", "$4\r\nnine\r\n" }, { "FLUSHALL", "+OK\r\n" }, { "GET k", "$-1\r\n" });
	kv_ctx_end(&db9);
	kv_ctx_end(&db0);
}

/* ---- expiry by log time ---- */

static void test_expiry(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "SET k v", "+OK\r\n" },
	      { "EXPIRE k 10 NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n" },
	      { "EXPIRE k 10 GT LT", "-ERR GT and LT options at the same time are not compatible\r\n" },
	      { "EXPIRE k 10 FOO", "-ERR Unsupported option FOO\r\n" },
	      { "EXPIRE k 10 XX", ":0\r\n" },
	      { "EXPIRE k 10 GT", ":0\r\n" },
	      { "EXPIRE k 10 NX", ":1\r\n" },
	      { "EXPIRE k 20 NX", ":0\r\n" },
	      { "EXPIRE k 5 GT", ":0\r\n" },
	      { "EXPIRE k 20 GT", ":1\r\n" },
	      { "EXPIRE k 30 LT", ":0\r\n" },
	      { "PEXPIRE k 15000 LT", ":1\r\n" },
	      { "PTTL k", ":15000\r\n" },
	      { "EXPIRE k 9223372036854775807", "-ERR invalid expire time in 'expire' command\r\n" },
	      { "PEXPIREAT k 1700000060000", ":1\r\n" },
	      { "TTL k", ":60\r\n" },
	      { "EXPIRETIME k", ":1700000060\r\n" },
	      { "PERSIST k", ":1\r\n" },
	      { "PERSIST k", ":0\r\n" },
	      { "TTL k", ":-1\r\n" },
	      { "TTL nokey", ":-2\r\n" },
	      { "EXPIREAT k 1600000000", ":1\r\n" }, /* in the past: deleted */
	      { "EXISTS k", ":0\r\n" },
	      { "SET a 1 PX 100", "+OK\r\n" },
	      { "SET b 1 PX 200", "+OK\r\n" },
	      { "SET c 1 EX 10", "+OK\r\n" });
	assert_int_equal(kv_store_next_expiry(s), T0 + 100);
	/* log time moves only with entries, and never backwards */
	assert_int_equal(kv_store_advance(s, T0 + 99), 0);
	assert_string_equal(run(s, NULL, "EXISTS a b c"), ":3\r\n");
	assert_int_equal(kv_store_advance(s, T0 + 150), 1);
	assert_int_equal(kv_store_advance(s, T0 + 120), 0); /* an older stamp: no change */
	assert_int_equal(kv_store_now(s), T0 + 150);
	assert_string_equal(run(s, NULL, "PTTL b"), ":50\r\n");
	assert_int_equal(kv_store_advance(s, T0 + 10000), 2);
	assert_string_equal(run(s, NULL, "DBSIZE"), ":0\r\n");
	assert_int_equal(kv_store_next_expiry(s), 0);
}

/* Two replicas apply the same entries (commands with stamps) and end equal,
 * whatever clock each has: time is the log's. */
static void test_replicas_agree(void **state)
{
	struct kv_store *a = *state, *b = kv_store_create();
	assert_non_null(b);
	static const struct {
		long long stamp;
		const char *cmd;
	} log[] = {
		{ T0 + 1, "SET s v PX 50" }, { T0 + 2, "HSET h f 1" }, { T0 + 3, "EXPIRE h 1" },
		{ T0 + 40, "INCR n" }, { T0 + 30, "GET s" }, /* a slower proposer's stamp */
		{ T0 + 60, "EXISTS s" }, { T0 + 900, "SADD st a b c" }, { T0 + 1100, "SPOP st" },
		{ T0 + 1200, "RPUSH l x y" }, { T0 + 1300, "LPOP l" }, { T0 + 2000, "DBSIZE" },
	};
	char ra[256], rb[256];
	for (size_t i = 0; i < sizeof(log) / sizeof(log[0]); i++) {
		kv_store_advance(a, log[i].stamp);
		kv_store_advance(b, log[i].stamp);
		snprintf(ra, sizeof(ra), "%s", run(a, NULL, log[i].cmd));
		snprintf(rb, sizeof(rb), "%s", run(b, NULL, log[i].cmd));
		assert_string_equal(ra, rb);
		assert_true(kv_store_digest(a) == kv_store_digest(b));
	}
	assert_string_equal(run(a, NULL, "EXISTS s h"), ":0\r\n"); /* both expired */
	assert_string_equal(run(a, NULL, "SCARD st"), ":2\r\n");
	kv_store_destroy(b);
}

/* ---- hashes, lists, sets, type errors ---- */

static void test_hashes(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "HSET h a 1 b 2", ":2\r\n" },
	      { "HSET h a 3", ":0\r\n" },
	      { "HSET h a", "-ERR wrong number of arguments for 'hset' command\r\n" },
	      { "HMSET h c 3", "+OK\r\n" },
	      { "HSETNX h c 9", ":0\r\n" },
	      { "HGET h a", "$1\r\n3\r\n" },
	      { "HGET h zz", "$-1\r\n" },
	      { "HMGET h a zz", "*2\r\n$1\r\n3\r\n$-1\r\n" },
	      { "HMGET nokey a", "*1\r\n$-1\r\n" },
	      { "HLEN h", ":3\r\n" },
	      { "HSTRLEN h a", ":1\r\n" },
	      { "HEXISTS h b", ":1\r\n" },
	      { "HINCRBY h a 10", ":13\r\n" },
	      { "HINCRBY h a 9223372036854775807", "-ERR increment or decrement would overflow\r\n" },
	      { "HSET h s \" 1\"", ":1\r\n" },
	      { "HINCRBY h s 1", "-ERR hash value is not an integer\r\n" },
	      { "HINCRBYFLOAT h f 1.5", "$3\r\n1.5\r\n" },
	      { "HINCRBYFLOAT h f inf", "-ERR value is NaN or Infinity\r\n" },
	      { "HINCRBYFLOAT h s 1", "-ERR hash value is not a float\r\n" },
	      { "HDEL h a b c s f zz", ":5\r\n" },
	      { "EXISTS h", ":0\r\n" }, /* the last field gone: so is the key */
	      { "HRANDFIELD nokey 5", "*0\r\n" },
	      { "HRANDFIELD nokey", "$-1\r\n" },
	      { "HSET one f v", ":1\r\n" },
	      { "HRANDFIELD one -3", "*3\r\n$1\r\nf\r\n$1\r\nf\r\n$1\r\nf\r\n" },
	      { "HRANDFIELD one 3 WITHVALUES", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n" },
	      { "HRANDFIELD one -9223372036854775808",
		"-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n" },
	      { "HGETALL one", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n" },
	      { "HSCAN one 0", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n" },
	      { "OBJECT ENCODING one", "$8\r\nlistpack\r\n" });
	struct kv_ctx r3 = { .resp = 3 };
	STEPS(s, &r3,
	      { "HGETALL one", "%1\r\n$1\r\nf\r\n$1\r\nv\r\n" },
	      { "HRANDFIELD one 1 WITHVALUES", "*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n" },
	      { "GET nokey", "_\r\n" });
	kv_ctx_end(&r3);
	/* a hash outgrows listpack by a long value, and stays hashtable */
	assert_int_equal(kv_store_config_set(s, "hash-max-listpack-value", 4), 0);
	STEPS(s, NULL, { "HSET one g 12345", ":1\r\n" }, { "HDEL one g", ":1\r\n" },
	      { "OBJECT ENCODING one", "$9\r\nhashtable\r\n" });
}

static void test_wrongtype(void **state)
{
	struct kv_store *s = *state;
	const char *wt = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
	run(s, NULL, "SET str v");
	run(s, NULL, "HSET hash f v");
	run(s, NULL, "RPUSH list a");
	run(s, NULL, "SADD set a");
	static const char *const cmds[] = {
		"GET hash", "INCR list", "APPEND set x", "GETRANGE hash 0 1", "SETRANGE list 0 x",
		"SETBIT hash 0 1", "INCRBYFLOAT set 1", "STRLEN hash", "GETEX hash", "GETDEL list",
		"HGET str f", "HSET list f v", "HINCRBY set f 1", "HGETALL str", "HLEN list",
		"LPUSH str x", "LRANGE hash 0 -1", "SADD hash x", "SMEMBERS list", "HSCAN str 0",
		"SET list v GET", "BITCOUNT hash", "HRANDFIELD str",
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(run(s, NULL, cmds[i]), wt) != 0)
			fail_msg("%s: want WRONGTYPE, got %s", cmds[i], run(s, NULL, cmds[i]));
	/* MGET answers nil for other types; nothing changed */
	STEPS(s, NULL, { "MGET str hash", "*2\r\n$1\r\nv\r\n$-1\r\n" },
	      { "LCS str hash", "-ERR The specified keys must contain string values\r\n" },
	      { "TYPE list", "+list\r\n" }, { "TYPE set", "+set\r\n" }, { "DBSIZE", ":4\r\n" });
}

static void test_lists_sets(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL,
	      { "RPUSH l b c", ":2\r\n" },
	      { "LPUSH l a", ":3\r\n" },
	      { "LRANGE l 0 -1", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n" },
	      { "LINDEX l -1", "$1\r\nc\r\n" },
	      { "LPOP l 2", "*2\r\n$1\r\na\r\n$1\r\nb\r\n" },
	      { "RPOP l", "$1\r\nc\r\n" },
	      { "EXISTS l", ":0\r\n" },
	      { "LPOP l 1", "*-1\r\n" },
	      { "LPOP l -1", "-ERR value is out of range, must be positive\r\n" },
	      { "RPUSHX l x", ":0\r\n" },
	      { "SADD s 1 2 3 2", ":3\r\n" },
	      { "OBJECT ENCODING s", "$6\r\nintset\r\n" },
	      { "SADD s x", ":1\r\n" },
	      { "OBJECT ENCODING s", "$9\r\nhashtable\r\n" },
	      { "SISMEMBER s x", ":1\r\n" },
	      { "SREM s x 9", ":1\r\n" },
	      { "SCARD s", ":3\r\n" },
	      { "SPOP s 0", "*0\r\n" });
	const char *r = run(s, NULL, "SPOP s 5");
	assert_true(r[0] == '*' && atoi(r + 1) == 3);
	assert_string_equal(run(s, NULL, "EXISTS s"), ":0\r\n");
}

static void test_memory_usage(void **state)
{
	struct kv_store *s = *state;
	run(s, NULL, "SET k v");
	const char *r = run(s, NULL, "MEMORY USAGE k");
	assert_true(r[0] == ':' && atoi(r + 1) > 0);
	assert_string_equal(run(s, NULL, "MEMORY USAGE nokey"), "$-1\r\n");
}

/* ---- MULTI blocks as the log carries them ---- */

static void test_multi_block(void **state)
{
	struct kv_store *s = *state;
	struct kv_ctx ctx = { .resp = 2 };
	char line[128];
	run(s, &ctx, "SET w 1");
	unsigned long long v = (unsigned long long)kv_store_version(s);
	/* a clean watch: the block runs, its replies gathered */
	snprintf(line, sizeof(line), "MULTI 0 %llu 0 w 0 %llu 0 absent", v, v);
	STEPS(s, &ctx, { "SET before 1", "+OK\r\n" });
	assert_string_equal(run(s, &ctx, line), "");
	assert_string_equal(run(s, &ctx, "INCR w"), "");
	assert_string_equal(run(s, &ctx, "MULTI"), "");  /* nested: an error in the array */
	assert_string_equal(run(s, &ctx, "GET w"), "");
	assert_string_equal(run(s, &ctx, "EXEC"),
			    "*3\r\n:2\r\n-ERR MULTI calls can not be nested\r\n$1\r\n2\r\n");
	/* w modified after the version: nothing of the block runs */
	snprintf(line, sizeof(line), "MULTI 0 %llu 0 w", v);
	run(s, &ctx, line);
	assert_string_equal(run(s, &ctx, "SET w 100"), "");
	assert_string_equal(run(s, &ctx, "EXEC"), "*-1\r\n");
	assert_string_equal(run(s, &ctx, "GET w"), "$1\r\n2\r\n");
	/* a watched key created, or deleted, after the version */
	v = kv_store_version(s);
	run(s, &ctx, "SET created 1");
	run(s, &ctx, "DEL before");
	snprintf(line, sizeof(line), "MULTI 0 %llu 0 created", v);
	run(s, &ctx, line);
	assert_string_equal(run(s, &ctx, "EXEC"), "*-1\r\n");
	snprintf(line, sizeof(line), "MULTI 0 %llu 0 before", v);
	run(s, &ctx, line);
	assert_string_equal(run(s, &ctx, "EXEC"), "*-1\r\n");
	/* a key stale when watched (flag 1): its expiry is no change */
	run(s, &ctx, "SET stale 1 PX 10");
	v = kv_store_version(s);
	kv_store_advance(s, T0 + 20);
	snprintf(line, sizeof(line), "MULTI 0 %llu 1 stale", v);
	run(s, &ctx, line);
	assert_string_equal(run(s, &ctx, "PING"), "");
	assert_string_equal(run(s, &ctx, "EXEC"), "*1\r\n+PONG\r\n");
	/* SELECT inside a block moves the group's database */
	run(s, &ctx, "MULTI");
	run(s, &ctx, "SELECT 3");
	run(s, &ctx, "SET in3 x");
	assert_string_equal(run(s, &ctx, "EXEC"), "*2\r\n+OK\r\n+OK\r\n");
	assert_int_equal(ctx.db, 3);
	assert_string_equal(run(s, &ctx, "GET in3"), "$1\r\nx\r\n");
	assert_string_equal(run(s, &ctx, "EXEC"), "-ERR EXEC without MULTI\r\n");
	/* a block left open by a malformed entry is dropped at the group's end */
	run(s, &ctx, "MULTI");
	run(s, &ctx, "SET dropped 1");
	kv_ctx_end(&ctx);
	assert_false(ctx.multi);
	kv_ctx_end(&ctx);
}

/* ---- snapshots of the state ---- */

static void test_save_load(void **state)
{
	struct kv_store *s = *state;
	run(s, NULL, "SET s v EX 100");
	run(s, NULL, "HSET h a 1 b 2");
	run(s, NULL, "RPUSH l x y z");
	run(s, NULL, "SADD st 1 2 x");
	struct kv_ctx db5 = { .db = 5 };
	run(s, &db5, "SET five 5");
	run(s, NULL, "DEL gone");
	run(s, NULL, "SET gone 1");
	run(s, NULL, "DEL gone");
	struct kv_buf b = { 0 };
	kv_store_save(s, &b);
	assert_false(b.oom);
	char err[128];
	struct kv_store *t = kv_store_load((const uint8_t *)b.p, b.len, err, sizeof(err));
	assert_non_null(t);
	assert_true(kv_store_digest(s) == kv_store_digest(t));
	assert_int_equal(kv_store_now(t), kv_store_now(s));
	assert_int_equal(kv_store_version(t), kv_store_version(s));
	assert_string_equal(run(t, NULL, "TTL s"), ":100\r\n");
	assert_string_equal(run(t, NULL, "LRANGE l 0 -1"), "*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n");
	assert_string_equal(run(t, &db5, "GET five"), "$1\r\n5\r\n");
	/* the same write on both: the same reply, the same state (SPOP's choice
	 * comes from the state, not from the table's layout) */
	char ra[64];
	snprintf(ra, sizeof(ra), "%s", run(s, NULL, "SPOP st"));
	assert_string_equal(run(t, NULL, "SPOP st"), ra);
	assert_true(kv_store_digest(s) == kv_store_digest(t));
	kv_store_destroy(t);
	/* every truncation, and a flipped type byte, is refused */
	for (size_t n = 0; n < b.len; n += 1 + n / 8) {
		t = kv_store_load((const uint8_t *)b.p, n, err, sizeof(err));
		assert_null(t);
	}
	kv_buf_free(&b);
	kv_ctx_end(&db5);
}

/* DEBUG SET-ACTIVE-EXPIRE 0 (a replicated setting): keys past their time
 * linger until a command touches them; a read outside the log only hides
 * them; no tick is wanted. */
static void test_lazy_expiry(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL, { "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n" }, { "SET a 1 PX 10", "+OK\r\n" },
	      { "SET b 1 PX 10", "+OK\r\n" });
	assert_false(kv_store_active_expire(s));
	assert_int_equal(kv_store_advance(s, T0 + 50), 0);
	struct kv_ctx ro = { .resp = 2, .read_only = true };
	STEPS(s, &ro, { "GET a", "$-1\r\n" }, { "DBSIZE", ":2\r\n" });
	STEPS(s, NULL, { "DBSIZE", ":2\r\n" }, { "GET a", "$-1\r\n" }, { "DBSIZE", ":1\r\n" },
	      { "KEYS *", "*0\r\n" }, { "SCAN 0", "*2\r\n$1\r\n0\r\n*0\r\n" }, { "DBSIZE", ":0\r\n" },
	      { "DEBUG SET-ACTIVE-EXPIRE 1", "+OK\r\n" }, { "DEBUG FOO", "-ERR unknown subcommand 'FOO'. Try DEBUG HELP.\r\n" },
	      { "DEBUG RELOAD", "-ERR DEBUG RELOAD is not supported: innet kv keeps no RDB or AOF file (the replicated log is its durability)\r\n" });
	kv_ctx_end(&ro);
}

/* A key left past its time by active expiry off, then active expiry on
 * again (which deletes nothing until the next entry): a valid state, which
 * a snapshot must carry (a replica installing it failed with "malformed
 * store state" when one was taken between the two). */
static void test_save_load_lingering(void **state)
{
	struct kv_store *s = *state;
	STEPS(s, NULL, { "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n" }, { "SET a 1 PX 10", "+OK\r\n" },
	      { "SET b 2", "+OK\r\n" });
	kv_store_advance(s, T0 + 50);
	STEPS(s, NULL, { "DEBUG SET-ACTIVE-EXPIRE 1", "+OK\r\n" });
	assert_true(kv_store_active_expire(s));
	struct kv_buf b = { 0 };
	kv_store_save(s, &b);
	char err[128] = "";
	struct kv_store *t = kv_store_load((const uint8_t *)b.p, b.len, err, sizeof(err));
	kv_buf_free(&b);
	if (t == NULL)
		fail_msg("load: %s", err);
	assert_true(kv_store_digest(s) == kv_store_digest(t));
	/* the next entry expires it on both alike */
	assert_int_equal(kv_store_advance(s, T0 + 60), 1);
	assert_int_equal(kv_store_advance(t, T0 + 60), 1);
	assert_true(kv_store_digest(s) == kv_store_digest(t));
	kv_store_destroy(t);
}

/* The replication stream: each change as the command that makes it on a
 * redis replica. */
static void test_feed(void **state)
{
	struct kv_store *s = *state;
	struct kv_buf feed = { 0 };
	kv_store_set_feed(s, &feed);
	struct kv_ctx ctx = { .resp = 2 };
	run(s, &ctx, "SET k v EX 10");
	run(s, &ctx, "SET k v2 NX");        /* no change: nothing */
	run(s, &ctx, "GETDEL k");
	run(s, &ctx, "DEL nokey");          /* nothing */
	run(s, &ctx, "INCRBYFLOAT f 1.5");
	run(s, &ctx, "SET e 1 PX 5");
	kv_store_advance(s, T0 + 10);       /* e expires: DEL */
	run(s, &ctx, "MULTI");
	run(s, &ctx, "INCR n");
	run(s, &ctx, "GET n");
	run(s, &ctx, "INCR n");
	run(s, &ctx, "EXEC");
	struct kv_ctx db2 = { .db = 2, .resp = 2 };
	run(s, &db2, "EXPIRE nokey 10");    /* nothing */
	run(s, &db2, "HSET h f 1");
	kv_buf_append(&feed, "", 1);
	assert_string_equal(feed.p,
		"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
		"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n$13\r\n1700000010000\r\n"
		"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n"
		"*4\r\n$3\r\nSET\r\n$1\r\nf\r\n$3\r\n1.5\r\n$7\r\nKEEPTTL\r\n"
		"*5\r\n$3\r\nSET\r\n$1\r\ne\r\n$1\r\n1\r\n$4\r\nPXAT\r\n$13\r\n1700000000005\r\n"
		"*2\r\n$3\r\nDEL\r\n$1\r\ne\r\n"
		"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"
		"*1\r\n$4\r\nEXEC\r\n"
		"*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\n1\r\n");
	kv_store_set_feed(s, NULL);
	kv_buf_free(&feed);
	kv_ctx_end(&ctx);
	kv_ctx_end(&db2);
	/* the RDB: header, checksum over it (redis's CRC-64 test vector) */
	assert_true(kv_crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caull);
	struct kv_buf rdb = { 0 };
	kv_store_rdb(s, &rdb);
	assert_memory_equal(rdb.p, "REDIS0009", 9);
	assert_int_equal((uint8_t)rdb.p[rdb.len - 9], 0xff);
	uint64_t crc = 0;
	for (int k = 7; k >= 0; k--)
		crc = crc << 8 | (uint8_t)rdb.p[rdb.len - 8 + k];
	assert_true(crc == kv_crc64(0, rdb.p, rdb.len - 8));
	kv_buf_free(&rdb);
}

static char published[256];

static long long on_publish(void *arg, const char *ch, size_t chl, const char *msg, size_t ml)
{
	snprintf(published + strlen(published), sizeof(published) - strlen(published), "%.*s=%.*s;",
		 (int)chl, ch, (int)ml, msg);
	return *(long long *)arg;
}

/* PUBLISH from the log goes to the server's hook (its subscribers); a read
 * outside the log delivers nothing. */
static void test_publish(void **state)
{
	struct kv_store *s = *state;
	long long receivers = 2;
	published[0] = '\0';
	assert_string_equal(run(s, NULL, "PUBLISH ch m"), ":0\r\n"); /* no hook: nobody */
	kv_store_set_publish(s, on_publish, &receivers);
	assert_string_equal(run(s, NULL, "PUBLISH ch \"a b\""), ":2\r\n");
	struct kv_ctx ro = { .resp = 2, .read_only = true };
	const char *refused = "-ERR innet kv: not a read-only command (internal error)\r\n";
	assert_string_equal(run(s, &ro, "PUBLISH ch x"), refused);
	assert_string_equal(published, "ch=a b;");
	kv_ctx_end(&ro);
}

/* The read path (a read index, outside the log) runs the store read-only:
 * a write, DEBUG, a block is refused and changes nothing; reads answer. */
static void test_read_only_exec(void **state)
{
	struct kv_store *s = *state;
	const char *refused = "-ERR innet kv: not a read-only command (internal error)\r\n";
	assert_string_equal(run(s, NULL, "SET ro 1"), "+OK\r\n");
	uint64_t v0 = kv_store_version(s), d0 = kv_store_digest(s);
	struct kv_ctx ro = { .resp = 2, .read_only = true };
	assert_string_equal(run(s, &ro, "SET ro 2"), refused);
	assert_string_equal(run(s, &ro, "DEBUG SET-ACTIVE-EXPIRE 0"), refused);
	assert_string_equal(run(s, &ro, "MULTI"), refused);
	assert_string_equal(run(s, &ro, "EXEC"), refused);
	assert_string_equal(run(s, &ro, "FLUSHALL"), refused);
	assert_string_equal(run(s, &ro, "NOSUCHCOMMAND x"), refused);
	assert_string_equal(run(s, &ro, "GET ro"), "$1\r\n1\r\n");
	assert_string_equal(run(s, &ro, "EXISTS ro nope"), ":1\r\n");
	assert_string_equal(run(s, &ro, "PING"), "+PONG\r\n");
	kv_ctx_end(&ro);
	assert_true(kv_store_version(s) == v0);
	assert_true(kv_store_digest(s) == d0);
}

static void test_command_table(void **state)
{
	const struct kv_command *prev = NULL;
	for (size_t i = 0; i < kv_command_count(); i++) {
		const struct kv_command *c = kv_command_at(i);
		if (prev != NULL)
			assert_true(strcmp(prev->name, c->name) < 0); /* sorted: it is bisected */
		assert_ptr_equal(kv_command_find(c->name, strlen(c->name)), c);
		assert_true((c->flags & (KV_CMD_WRITE | KV_CMD_READONLY | KV_CMD_LOCAL)) != 0);
		prev = c;
	}
	assert_non_null(kv_command_find("hGeTaLl", 7));
	assert_null(kv_command_find("nosuch", 6));
	assert_true(kv_command_arity_ok(kv_command_find("mset", 4), 3));
	assert_false(kv_command_arity_ok(kv_command_find("mset", 4), 4));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defects, setup, teardown),
		cmocka_unit_test(test_inline_parser),
		cmocka_unit_test_setup_teardown(test_set_options, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getex, setup, teardown),
		cmocka_unit_test_setup_teardown(test_string_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_cursor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_databases, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replicas_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hashes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrongtype, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lists_sets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_memory_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_multi_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lazy_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_exec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_save_load_lingering, setup, teardown),
		cmocka_unit_test_setup_teardown(test_publish, setup, teardown),
		cmocka_unit_test(test_command_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
