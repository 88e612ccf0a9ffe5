/*
 * kv_string.c — the KV store's string commands with redis 7's replies and
 * errors: GET SET (NX XX GET EX PX EXAT PXAT KEEPTTL) SETNX SETEX PSETEX
 * GETSET GETDEL GETEX APPEND STRLEN GETRANGE/SUBSTR SETRANGE MGET MSET
 * MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT SETBIT GETBIT BITCOUNT LCS.
 * Times are log time (kv_store.c): EX 10 is ten seconds after the stamp of
 * the entry that carries the command, on every replica alike.
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/kv_store.h"

/* Redis's SET/GETEX option flags. */
enum {
	OPT_NX = 1 << 0, OPT_XX = 1 << 1, OPT_EX = 1 << 2, OPT_PX = 1 << 3, OPT_KEEPTTL = 1 << 4,
	OPT_GET = 1 << 5, OPT_EXAT = 1 << 6, OPT_PXAT = 1 << 7, OPT_PERSIST = 1 << 8,
};
#define OPT_ANY_EXPIRE (OPT_EX | OPT_PX | OPT_EXAT | OPT_PXAT)

static bool arg_is(struct kv_call *c, int i, const char *name)
{
	return c->lens[i] == strlen(name) && !strncasecmp(c->argv[i], name, c->lens[i]);
}

static const char *cmd_name(struct kv_call *c, char *buf, size_t len)
{
	size_t n = c->lens[0] < len - 1 ? c->lens[0] : len - 1;
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)c->argv[0][i]);
	buf[n] = '\0';
	return buf;
}

static void expire_error(struct kv_call *c)
{
	char name[32];
	kv_reply_err(c, "invalid expire time in '%s' command", cmd_name(c, name, sizeof(name)));
}

/* Parse SET's (set = true) or GETEX's options from argv[first]: flags and
 * the index of the expire argument (0 if none). False after the error. */
static bool parse_opts(struct kv_call *c, int first, bool set, int *flags, int *exp_arg)
{
	*flags = 0;
	*exp_arg = 0;
	for (int j = first; j < c->argc; j++) {
		int f = *flags;
		bool next = j + 1 < c->argc;
		if (set && arg_is(c, j, "nx") && !(f & OPT_XX)) {
			*flags |= OPT_NX;
		} else if (set && arg_is(c, j, "xx") && !(f & OPT_NX)) {
			*flags |= OPT_XX;
		} else if (set && arg_is(c, j, "get")) {
			*flags |= OPT_GET;
		} else if (set && arg_is(c, j, "keepttl") && !(f & (OPT_PERSIST | OPT_ANY_EXPIRE))) {
			*flags |= OPT_KEEPTTL;
		} else if (!set && arg_is(c, j, "persist") && !(f & (OPT_ANY_EXPIRE | OPT_KEEPTTL))) {
			*flags |= OPT_PERSIST;
		} else if (next && !(f & (OPT_KEEPTTL | OPT_PERSIST)) &&
			   ((arg_is(c, j, "ex") && !(f & (OPT_ANY_EXPIRE & ~OPT_EX))) ||
			    (arg_is(c, j, "px") && !(f & (OPT_ANY_EXPIRE & ~OPT_PX))) ||
			    (arg_is(c, j, "exat") && !(f & (OPT_ANY_EXPIRE & ~OPT_EXAT))) ||
			    (arg_is(c, j, "pxat") && !(f & (OPT_ANY_EXPIRE & ~OPT_PXAT))))) {
			*flags |= arg_is(c, j, "ex") ? OPT_EX : arg_is(c, j, "px") ? OPT_PX :
				  arg_is(c, j, "exat") ? OPT_EXAT : OPT_PXAT;
			*exp_arg = ++j;
		} else {
			kv_reply_syntax(c);
			return false;
		}
	}
	return true;
}

/* The absolute expire (unix ms) that argument i means under flags; false
 * after "invalid expire time". */
static bool expire_ms(struct kv_call *c, int i, int flags, long long *ms)
{
	if (!kv_arg_ll(c, i, ms))
		return false;
	bool secs = flags & (OPT_EX | OPT_EXAT);
	if (*ms <= 0 || (secs && *ms > LLONG_MAX / 1000)) {
		expire_error(c);
		return false;
	}
	if (secs)
		*ms *= 1000;
	if (flags & (OPT_EX | OPT_PX)) {
		if (*ms > LLONG_MAX - c->s->now) {
			expire_error(c);
			return false;
		}
		*ms += c->s->now;
	}
	return true;
}

/* The string value of o (a string) as bytes. */
static const char *sval(const struct kv_obj *o)
{
	return o->p ? o->p : "";
}

/* Make key argv[ki] a string holding (p, n): a new key, or the old one's
 * value replaced (whatever its type); its expire removed unless keep.
 * NULL when out of memory. */
static struct kv_obj *set_key(struct kv_call *c, int ki, const char *p, size_t n, bool keep)
{
	struct kv_obj *o = kv_lookup(c, ki);
	if (o == NULL) {
		o = kv_obj_add(c->s, c->dbi, c->argv[ki], c->lens[ki], KV_T_STRING);
		if (o == NULL)
			return NULL;
	} else {
		if (o->type != KV_T_STRING) {
			kv_obj_clear_value(o);
			o->type = KV_T_STRING;
		}
		if (!keep)
			kv_set_expire(c->s, o, 0);
		kv_touch(c->s, o);
	}
	if (!kv_str_set(c->s, o, p, n))
		return NULL;
	return o;
}

/* GET's reply for key argv[1]: false (after WRONGTYPE) if not a string. */
static bool reply_get(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_null(c);
		return true;
	}
	if (!kv_check_type(c, o, KV_T_STRING))
		return false;
	kv_reply_bulk(c, sval(o), o->len);
	return true;
}

void kv_cmd_get(struct kv_call *c)
{
	reply_get(c);
}

/* SET and its relatives: key argv[1], value argv[vi], expire argument
 * exp_arg (0: none) under flags; ok/abort: the replies (NULL: +OK, nil). */
static void set_generic(struct kv_call *c, int flags, int vi, int exp_arg, const char *ok,
			const char *abort)
{
	long long when = 0;
	if (exp_arg && !expire_ms(c, exp_arg, flags, &when))
		return;
	if ((flags & OPT_GET) && !reply_get(c))
		return;
	bool found = kv_lookup(c, 1) != NULL;
	if (((flags & OPT_NX) && found) || ((flags & OPT_XX) && !found)) {
		if (!(flags & OPT_GET)) {
			if (abort)
				kv_reply_raw(c, abort);
			else
				kv_reply_null(c);
		}
		return;
	}
	struct kv_obj *o = set_key(c, 1, c->argv[vi], c->lens[vi], flags & OPT_KEEPTTL);
	if (o == NULL)
		return;
	if (exp_arg) {
		/* fed with the absolute time: SET key value PXAT ms */
		char ms[24];
		int n = snprintf(ms, sizeof(ms), "%lld", when);
		kv_propagate(c, 5, (const char *const[]){ "SET", c->argv[1], c->argv[vi], "PXAT", ms },
			     (const size_t[]){ 3, c->lens[1], c->lens[vi], 4, (size_t)n });
		kv_set_expire(c->s, o, when);
	} else if (flags & OPT_GET) {
		/* fed without GET */
		const char *av[16];
		size_t al[16];
		int n = 0;
		for (int i = 0; i < c->argc && n < 16; i++)
			if (i < 3 || !arg_is(c, i, "get")) {
				av[n] = c->argv[i];
				al[n++] = c->lens[i];
			}
		kv_propagate(c, n, av, al);
	}
	if (!(flags & OPT_GET)) {
		if (ok)
			kv_reply_raw(c, ok);
		else
			kv_reply_ok(c);
	}
}

void kv_cmd_set(struct kv_call *c)
{
	int flags, exp_arg;
	if (parse_opts(c, 3, true, &flags, &exp_arg))
		set_generic(c, flags, 2, exp_arg, NULL, NULL);
}

void kv_cmd_setnx(struct kv_call *c)
{
	set_generic(c, OPT_NX, 2, 0, ":1\r\n", ":0\r\n");
}

void kv_cmd_setex(struct kv_call *c)
{
	set_generic(c, OPT_EX, 3, 2, NULL, NULL);
}

void kv_cmd_psetex(struct kv_call *c)
{
	set_generic(c, OPT_PX, 3, 2, NULL, NULL);
}

void kv_cmd_getset(struct kv_call *c)
{
	if (!reply_get(c))
		return;
	if (set_key(c, 1, c->argv[2], c->lens[2], false) != NULL)
		kv_propagate(c, 3, (const char *const[]){ "SET", c->argv[1], c->argv[2] },
			     (const size_t[]){ 3, c->lens[1], c->lens[2] });
}

void kv_cmd_getdel(struct kv_call *c)
{
	if (!reply_get(c))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o != NULL) {
		kv_obj_del(c->s, o);
		kv_propagate(c, 2, (const char *const[]){ "DEL", c->argv[1] },
			     (const size_t[]){ 3, c->lens[1] });
	}
}

void kv_cmd_getex(struct kv_call *c)
{
	int flags, exp_arg;
	if (!parse_opts(c, 2, false, &flags, &exp_arg))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_null(c);
		return;
	}
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	long long when = 0;
	if (exp_arg && !expire_ms(c, exp_arg, flags, &when))
		return;
	kv_reply_bulk(c, sval(o), o->len);
	if (exp_arg) {
		char ms[24];
		int n = snprintf(ms, sizeof(ms), "%lld", when);
		if (when <= c->s->now)
			kv_propagate(c, 2, (const char *const[]){ "DEL", c->argv[1] },
				     (const size_t[]){ 3, c->lens[1] });
		else
			kv_propagate(c, 3, (const char *const[]){ "PEXPIREAT", c->argv[1], ms },
				     (const size_t[]){ 9, c->lens[1], (size_t)n });
		if (!kv_set_expire(c->s, o, when))
			kv_touch(c->s, o);
	} else if ((flags & OPT_PERSIST) && o->heap != 0) {
		kv_set_expire(c->s, o, 0);
		kv_touch(c->s, o);
		kv_propagate(c, 2, (const char *const[]){ "PERSIST", c->argv[1] },
			     (const size_t[]){ 7, c->lens[1] });
	}
}

/* Would a string of base + add bytes be too long? Then the error. */
static bool too_long(struct kv_call *c, unsigned long long base, unsigned long long add)
{
	if (base + add > c->s->string_max || base + add < base) {
		kv_reply_err(c, "string exceeds maximum allowed size (proto-max-bulk-len)");
		return true;
	}
	return false;
}

void kv_cmd_append(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		o = set_key(c, 1, c->argv[2], c->lens[2], false);
		if (o != NULL)
			kv_reply_int(c, (long long)o->len);
		return;
	}
	if (!kv_check_type(c, o, KV_T_STRING) || too_long(c, o->len, c->lens[2]))
		return;
	if (!kv_str_reserve(c->s, o, o->len + c->lens[2]))
		return;
	memcpy(o->p + o->len, c->argv[2], c->lens[2]);
	o->len += c->lens[2];
	o->enc = KV_ENC_RAW;
	kv_touch(c->s, o);
	kv_reply_int(c, (long long)o->len);
}

void kv_cmd_strlen(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (kv_check_type(c, o, KV_T_STRING))
		kv_reply_int(c, o ? (long long)o->len : 0);
}

void kv_cmd_getrange(struct kv_call *c)
{
	long long start, end;
	if (!kv_arg_ll(c, 2, &start) || !kv_arg_ll(c, 3, &end))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_bulk(c, "", 0);
		return;
	}
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	long long len = (long long)o->len;
	if (start < 0 && end < 0 && start > end) {
		kv_reply_bulk(c, "", 0);
		return;
	}
	if (start < 0)
		start += len;
	if (end < 0)
		end += len;
	if (start < 0)
		start = 0;
	if (end < 0)
		end = 0;
	if (end >= len)
		end = len - 1;
	if (start > end || len == 0)
		kv_reply_bulk(c, "", 0);
	else
		kv_reply_bulk(c, o->p + start, (size_t)(end - start + 1));
}

void kv_cmd_setrange(struct kv_call *c)
{
	long long off;
	if (!kv_arg_ll(c, 2, &off))
		return;
	if (off < 0) {
		kv_reply_err(c, "offset is out of range");
		return;
	}
	size_t vl = c->lens[3];
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		if (vl == 0) {
			kv_reply_int(c, 0);
			return;
		}
		if (too_long(c, (unsigned long long)off, vl))
			return;
		o = kv_obj_add(c->s, c->dbi, c->argv[1], c->lens[1], KV_T_STRING);
		if (o == NULL)
			return;
	} else {
		if (!kv_check_type(c, o, KV_T_STRING))
			return;
		if (vl == 0) {
			kv_reply_int(c, (long long)o->len);
			return;
		}
		if (too_long(c, (unsigned long long)off, vl))
			return;
		kv_touch(c->s, o);
	}
	size_t need = (size_t)off + vl;
	if (!kv_str_reserve(c->s, o, need))
		return;
	memcpy(o->p + off, c->argv[3], vl);
	if (need > o->len)
		o->len = need;
	o->enc = KV_ENC_RAW;
	kv_reply_int(c, (long long)o->len);
}

void kv_cmd_mget(struct kv_call *c)
{
	kv_reply_array(c, c->argc - 1);
	for (int i = 1; i < c->argc; i++) {
		struct kv_obj *o = kv_lookup(c, i);
		if (o == NULL || o->type != KV_T_STRING)
			kv_reply_null(c);
		else
			kv_reply_bulk(c, sval(o), o->len);
	}
}

static void mset_generic(struct kv_call *c, bool nx)
{
	if (c->argc % 2 == 0) {
		kv_reply_arity(c);
		return;
	}
	if (nx)
		for (int i = 1; i < c->argc; i += 2)
			if (kv_lookup(c, i) != NULL) {
				kv_reply_int(c, 0);
				return;
			}
	for (int i = 1; i < c->argc; i += 2)
		if (set_key(c, i, c->argv[i + 1], c->lens[i + 1], false) == NULL)
			return;
	if (nx)
		kv_reply_int(c, 1);
	else
		kv_reply_ok(c);
}

void kv_cmd_mset(struct kv_call *c)
{
	mset_generic(c, false);
}

void kv_cmd_msetnx(struct kv_call *c)
{
	mset_generic(c, true);
}

static void incr_by(struct kv_call *c, long long by)
{
	struct kv_obj *o = kv_lookup(c, 1);
	long long v = 0;
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	if (o != NULL && !kv_parse_ll(sval(o), o->len, &v)) {
		kv_reply_raw(c, "-ERR value is not an integer or out of range\r\n");
		return;
	}
	if ((by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v)) {
		kv_reply_err(c, "increment or decrement would overflow");
		return;
	}
	v += by;
	char tmp[24];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v);
	if (set_key(c, 1, tmp, (size_t)n, true) != NULL)
		kv_reply_int(c, v);
}

void kv_cmd_incr(struct kv_call *c)
{
	incr_by(c, 1);
}

void kv_cmd_decr(struct kv_call *c)
{
	incr_by(c, -1);
}

void kv_cmd_incrby(struct kv_call *c)
{
	long long by;
	if (kv_arg_ll(c, 2, &by))
		incr_by(c, by);
}

void kv_cmd_decrby(struct kv_call *c)
{
	long long by;
	if (!kv_arg_ll(c, 2, &by))
		return;
	if (by == LLONG_MIN) {
		kv_reply_err(c, "decrement would overflow");
		return;
	}
	incr_by(c, -by);
}

void kv_cmd_incrbyfloat(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	long double v = 0, by;
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	if ((o != NULL && !kv_str2ld(sval(o), o->len, &v)) || !kv_str2ld(c->argv[2], c->lens[2], &by)) {
		kv_reply_err(c, "value is not a valid float");
		return;
	}
	v += by;
	if (isnan(v) || isinf(v)) {
		kv_reply_err(c, "increment would produce NaN or Infinity");
		return;
	}
	char buf[5120];
	int n = kv_ld2str(buf, sizeof(buf), v);
	o = set_key(c, 1, buf, (size_t)n, true);
	if (o == NULL)
		return;
	o->enc = n <= 44 ? KV_ENC_EMBSTR : KV_ENC_RAW;
	kv_propagate(c, 4, (const char *const[]){ "SET", c->argv[1], buf, "KEEPTTL" },
		     (const size_t[]){ 3, c->lens[1], (size_t)n, 7 });
	kv_reply_bulk(c, buf, (size_t)n);
}

/* ---- bits ---- */

/* A bit offset argument: 0 .. proto-max-bulk-len * 8 - 1. */
static bool bit_offset(struct kv_call *c, int i, unsigned long long *off)
{
	long long v;
	if (!kv_parse_ll(c->argv[i], c->lens[i], &v) || v < 0 ||
	    (unsigned long long)(v >> 3) >= c->s->string_max) {
		kv_reply_err(c, "bit offset is not an integer or out of range");
		return false;
	}
	*off = (unsigned long long)v;
	return true;
}

void kv_cmd_setbit(struct kv_call *c)
{
	unsigned long long off;
	if (!bit_offset(c, 2, &off))
		return;
	long long on;
	if (!kv_parse_ll(c->argv[3], c->lens[3], &on) || (on & ~1)) {
		kv_reply_err(c, "bit is not an integer or out of range");
		return;
	}
	size_t byte = (size_t)(off >> 3);
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		o = kv_obj_add(c->s, c->dbi, c->argv[1], c->lens[1], KV_T_STRING);
		if (o == NULL)
			return;
	} else if (!kv_check_type(c, o, KV_T_STRING)) {
		return;
	}
	bool grown = byte + 1 > o->len;
	if (!kv_str_reserve(c->s, o, byte + 1))
		return;
	if (grown)
		o->len = byte + 1;
	o->enc = KV_ENC_RAW;
	unsigned bit = 7 - (unsigned)(off & 7);
	int old = (o->p[byte] >> bit) & 1;
	if (grown || old != on) {
		o->p[byte] = (char)((o->p[byte] & ~(1 << bit)) | ((int)on << bit));
		kv_touch(c->s, o);
	}
	kv_reply_int(c, old);
}

void kv_cmd_getbit(struct kv_call *c)
{
	unsigned long long off;
	if (!bit_offset(c, 2, &off))
		return;
	struct kv_obj *o = kv_lookup(c, 1);
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	size_t byte = (size_t)(off >> 3);
	int bit = 0;
	if (o != NULL && byte < o->len)
		bit = (o->p[byte] >> (7 - (off & 7))) & 1;
	kv_reply_int(c, bit);
}

void kv_cmd_bitcount(struct kv_call *c)
{
	struct kv_obj *o = kv_lookup(c, 1);
	if (o == NULL) {
		kv_reply_int(c, 0);
		return;
	}
	if (!kv_check_type(c, o, KV_T_STRING))
		return;
	const unsigned char *p = (const unsigned char *)sval(o);
	long long len = (long long)o->len, start = 0, end = len - 1;
	unsigned char first_mask = 0, last_mask = 0;
	if (c->argc == 4 || c->argc == 5) {
		bool bits = false;
		long long total = len;
		if (!kv_arg_ll(c, 2, &start) || !kv_arg_ll(c, 3, &end))
			return;
		if (start < 0 && end < 0 && start > end) {
			kv_reply_int(c, 0);
			return;
		}
		if (c->argc == 5) {
			if (arg_is(c, 4, "bit")) {
				bits = true;
			} else if (!arg_is(c, 4, "byte")) {
				kv_reply_syntax(c);
				return;
			}
		}
		if (bits)
			total <<= 3;
		if (start < 0)
			start += total;
		if (end < 0)
			end += total;
		if (start < 0)
			start = 0;
		if (end < 0)
			end = 0;
		if (end >= total)
			end = total - 1;
		if (bits && start <= end) {
			first_mask = (unsigned char)(~((1u << (8 - (start & 7))) - 1) & 0xff);
			last_mask = (unsigned char)((1u << (7 - (end & 7))) - 1);
			start >>= 3;
			end >>= 3;
		}
	} else if (c->argc != 2) {
		kv_reply_syntax(c);
		return;
	}
	if (start > end) {
		kv_reply_int(c, 0);
		return;
	}
	long long n = 0;
	for (long long i = start; i <= end; i++)
		n += __builtin_popcount(p[i]);
	if (first_mask)
		n -= __builtin_popcount(p[start] & first_mask);
	if (last_mask)
		n -= __builtin_popcount(p[end] & last_mask);
	kv_reply_int(c, n);
}

/* ---- LCS ---- */

static void lcs_range(struct kv_call *c, uint32_t s, uint32_t e)
{
	kv_reply_array(c, 2);
	kv_reply_int(c, s);
	kv_reply_int(c, e);
}

void kv_cmd_lcs(struct kv_call *c)
{
	struct kv_obj *oa = kv_lookup(c, 1), *ob = kv_lookup(c, 2);
	if ((oa && oa->type != KV_T_STRING) || (ob && ob->type != KV_T_STRING)) {
		kv_reply_err(c, "The specified keys must contain string values");
		return;
	}
	bool getlen = false, getidx = false, withlen = false;
	long long minlen = 0;
	for (int j = 3; j < c->argc; j++) {
		if (arg_is(c, j, "idx")) {
			getidx = true;
		} else if (arg_is(c, j, "len")) {
			getlen = true;
		} else if (arg_is(c, j, "withmatchlen")) {
			withlen = true;
		} else if (arg_is(c, j, "minmatchlen") && j + 1 < c->argc) {
			if (!kv_arg_ll(c, ++j, &minlen))
				return;
			if (minlen < 0)
				minlen = 0;
		} else {
			kv_reply_syntax(c);
			return;
		}
	}
	if (getlen && getidx) {
		kv_reply_err(c, "If you want both the length and indexes, please just use IDX.");
		return;
	}
	const char *a = oa ? sval(oa) : "", *b = ob ? sval(ob) : "";
	size_t alen = oa ? oa->len : 0, blen = ob ? ob->len : 0;
	unsigned long long cells = (unsigned long long)(alen + 1) * (blen + 1);
	if (alen >= UINT32_MAX - 1 || blen >= UINT32_MAX - 1 || cells > c->s->string_max / 4) {
		kv_reply_err(c, "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
		return;
	}
	uint32_t *t = malloc(cells * sizeof(*t));
	char *res = malloc(alen + 1);
	if (t == NULL || res == NULL) {
		free(t);
		free(res);
		kv_reply_err(c, "Insufficient memory, failed allocating transient memory for LCS");
		return;
	}
#define T(i, j) t[(j) + (i) * (blen + 1)]
	for (size_t i = 0; i <= alen; i++)
		for (size_t j = 0; j <= blen; j++) {
			if (i == 0 || j == 0)
				T(i, j) = 0;
			else if (a[i - 1] == b[j - 1])
				T(i, j) = T(i - 1, j - 1) + 1;
			else
				T(i, j) = T(i - 1, j) > T(i, j - 1) ? T(i - 1, j) : T(i, j - 1);
		}
	uint32_t idx = T(alen, blen), total = idx;
	if (getlen && !getidx) {
		kv_reply_int(c, total);
		goto out;
	}
	/* walk back from the end: the string, and the matching ranges */
	struct kv_buf ranges = { 0 };
	struct kv_call rc = *c;
	rc.out = &ranges;
	uint32_t n_ranges = 0, as = (uint32_t)alen, ae = 0, bs = 0, be = 0;
	size_t i = alen, j = blen;
	while (i > 0 && j > 0) {
		bool emit = false;
		if (a[i - 1] == b[j - 1]) {
			res[idx - 1] = a[i - 1];
			if (as == alen) {
				as = ae = (uint32_t)i - 1;
				bs = be = (uint32_t)j - 1;
			} else if (as == i && bs == j) {
				as--;
				bs--;
			} else {
				emit = true;
			}
			if (as == 0 || bs == 0)
				emit = true;
			idx--;
			i--;
			j--;
		} else {
			if (T(i - 1, j) > T(i, j - 1))
				i--;
			else
				j--;
			if (as != alen)
				emit = true;
		}
		if (emit) {
			uint32_t mlen = ae - as + 1;
			if ((minlen == 0 || mlen >= minlen) && getidx) {
				kv_reply_array(&rc, withlen ? 3 : 2);
				lcs_range(&rc, as, ae);
				lcs_range(&rc, bs, be);
				if (withlen)
					kv_reply_int(&rc, mlen);
				n_ranges++;
			}
			as = (uint32_t)alen;
		}
	}
	if (getidx) {
		kv_reply_map(c, 2);
		kv_reply_bulk(c, "matches", 7);
		kv_reply_array(c, n_ranges);
		kv_buf_append(c->out, ranges.p, ranges.len);
		kv_reply_bulk(c, "len", 3);
		kv_reply_int(c, total);
	} else {
		kv_reply_bulk(c, res, total);
	}
	kv_buf_free(&ranges);
#undef T
out:
	free(t);
	free(res);
}
