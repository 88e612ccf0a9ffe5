/*
 * kv_admin.c — the commands of `innet kv` about the connection and the
 * replica rather than the data, answered by the replica that receives them
 * without a log entry: CLIENT (ID GETNAME SETNAME LIST INFO SETINFO REPLY
 * NO-EVICT NO-TOUCH HELP), HELLO 2|3, AUTH, INFO (redis's sections, then
 * innet's), COMMAND (COUNT INFO DOCS LIST GETKEYS), CONFIG (GET SET
 * RESETSTAT), FUNCTION (FLUSH LIST: there are no functions), TIME, LASTSAVE. Replies
 * follow redis 7.0 so that client libraries connect without warnings;
 * where innet differs (no disk, no scripting, no eviction) the error says
 * so instead of pretending.
 *
 * CONFIG values are this replica's own: CONFIG SET changes only the replica
 * that receives it. None of them changes what a command does to the data
 * (the store's limits are fixed, so every replica applies the same log the
 * same way); hash-max-listpack-* decide only what OBJECT ENCODING reports.
 */
#include <ctype.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "innet/version.h"
#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

#define REDIS_COMPAT_VERSION "7.0.15" /* the redis whose replies these follow */

static bool is(const char *a, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp(a, name, n);
}

static void status(struct kv_buf *out, const char *s)
{
	kv_buf_str(out, "+");
	kv_buf_str(out, s);
	kv_buf_str(out, "\r\n");
}

static void bulk(struct kv_buf *out, const char *s)
{
	kv_buf_bulk(out, s, strlen(s));
}

static void map_hdr(struct kv_buf *out, const struct conn *c, long long n)
{
	if (c->resp == 3)
		kv_buf_num(out, '%', n);
	else
		kv_buf_num(out, '*', 2 * n);
}

static void error(struct kv_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void error(struct kv_buf *out, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\r' || *p == '\n')
			*p = ' ';
	kv_buf_str(out, "-ERR ");
	kv_buf_str(out, msg);
	kv_buf_str(out, "\r\n");
}

/* An argument as a C string for messages (at most 128 bytes, no CR/LF). */
static const char *arg_str(char *buf, const char *p, size_t n)
{
	size_t k = n < 128 ? n : 128;
	for (size_t i = 0; i < k; i++)
		buf[i] = (p[i] == '\r' || p[i] == '\n' || p[i] == '\0') ? ' ' : p[i];
	buf[k] = '\0';
	return buf;
}

static void unknown_sub(struct kv_buf *out, const char *container, const char *sub, size_t n)
{
	char a[132];
	error(out, "unknown subcommand '%s'. Try %s HELP.", arg_str(a, sub, n), container);
}

static void help(struct kv_buf *out, const char *const *lines, size_t n)
{
	kv_buf_num(out, '*', (long long)n);
	for (size_t i = 0; i < n; i++)
		status(out, lines[i]);
}

/* ---- CLIENT, HELLO, AUTH ---- */

static void client_line(struct server *s, const struct conn *c, struct kv_buf *b)
{
	struct sockaddr_in peer = { 0 }, self = { 0 };
	socklen_t pl = sizeof(peer), sl = sizeof(self);
	getpeername(c->fd, (struct sockaddr *)&peer, &pl);
	getsockname(c->fd, (struct sockaddr *)&self, &sl);
	char pa[INET_ADDRSTRLEN] = "?", sa[INET_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET, &peer.sin_addr, pa, sizeof(pa));
	inet_ntop(AF_INET, &self.sin_addr, sa, sizeof(sa));
	uint64_t now = innet_now_ns();
	char name[132] = "";
	arg_str(name, c->name.p ? c->name.p : "", c->name.len);
	char line[768];
	int n = snprintf(line, sizeof(line),
			 "id=%llu addr=%s:%u laddr=%s:%u fd=%d name=%s age=%llu idle=%llu flags=%s "
			 "db=%u sub=0 psub=0 ssub=0 multi=%d qbuf=%zu qbuf-free=0 argv-mem=0 "
			 "multi-mem=%zu rbs=%zu rbp=0 obl=0 oll=0 omem=%zu tot-mem=%zu events=r cmd=%s "
			 "user=default redir=-1 resp=%u\n",
			 (unsigned long long)c->id, pa, ntohs(peer.sin_port), sa, ntohs(self.sin_port),
			 c->fd, name, (unsigned long long)((now - c->created_ns) / 1000000000ull),
			 (unsigned long long)((now - c->last_ns) / 1000000000ull), c->multi ? "x" : "N",
			 c->db, c->multi ? (int)c->multi_n : -1, c->in.len, c->mq.len, c->in.cap,
			 c->out.len, c->in.cap + c->out.cap + c->mq.cap, c->last_cmd, c->resp);
	kv_buf_append(b, line, (size_t)n);
	(void)s;
}

static bool name_ok(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] < '!' || p[i] > '~')
			return false;
	return true;
}

static void client_cmd(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		       struct kv_buf *out)
{
	const char *sub = argv[1];
	size_t sl = lens[1];
	if (is(sub, sl, "id") && argc == 2) {
		kv_buf_num(out, ':', (long long)c->id);
	} else if (is(sub, sl, "getname") && argc == 2) {
		if (c->name.len == 0)
			kv_buf_str(out, c->resp == 3 ? "_\r\n" : "$-1\r\n");
		else
			kv_buf_bulk(out, c->name.p, c->name.len);
	} else if (is(sub, sl, "setname") && argc == 3) {
		if (!name_ok(argv[2], lens[2])) {
			error(out, "Client names cannot contain spaces, newlines or special characters.");
			return;
		}
		c->name.len = 0;
		kv_buf_append(&c->name, argv[2], lens[2]);
		status(out, "OK");
	} else if (is(sub, sl, "list")) {
		struct kv_buf b = { 0 };
		for (uint32_t i = 0; i < s->n_conns; i++)
			client_line(s, s->conns[i], &b);
		kv_buf_bulk(out, b.p ? b.p : "", b.len);
		kv_buf_free(&b);
	} else if (is(sub, sl, "info") && argc == 2) {
		struct kv_buf b = { 0 };
		client_line(s, c, &b);
		kv_buf_bulk(out, b.p, b.len);
		kv_buf_free(&b);
	} else if ((is(sub, sl, "setinfo") && argc == 4) ||
		   ((is(sub, sl, "no-evict") || is(sub, sl, "no-touch")) && argc == 3)) {
		status(out, "OK"); /* nothing is evicted, nothing tracks access */
	} else if (is(sub, sl, "reply") && argc == 3 && is(argv[2], lens[2], "on")) {
		status(out, "OK");
	} else if (is(sub, sl, "help") && argc == 2) {
		static const char *const lines[] = {
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"LIST", "    Return information about client connections.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
			"NO-EVICT (ON|OFF)", "    Accepted: innet kv evicts nothing.",
			"HELP", "    Print this help.",
		};
		help(out, lines, sizeof(lines) / sizeof(lines[0]));
	} else if (is(sub, sl, "id") || is(sub, sl, "getname") || is(sub, sl, "setname") ||
		   is(sub, sl, "info") || is(sub, sl, "setinfo") || is(sub, sl, "no-evict") ||
		   is(sub, sl, "no-touch") || is(sub, sl, "help")) {
		char name[48], a[132];
		snprintf(name, sizeof(name), "client|%.32s", arg_str(a, sub, sl < 32 ? sl : 32));
		for (char *p = name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		kv_reply_arity_error(out, name);
	} else {
		unknown_sub(out, "CLIENT", sub, sl);
	}
}

static void hello_cmd(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		      struct kv_buf *out)
{
	long long ver = c->resp;
	int i = 1;
	if (argc >= 2) {
		if (!kv_parse_ll(argv[1], lens[1], &ver)) {
			error(out, "Protocol version is not an integer or out of range");
			return;
		}
		i = 2;
	}
	for (; i < argc; i++) {
		bool more = i + 1 < argc;
		if (is(argv[i], lens[i], "auth") && i + 2 < argc) {
			if (!is(argv[i + 1], lens[i + 1], "default")) {
				kv_buf_str(out, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
				return;
			}
			i += 2; /* the default user needs no password */
		} else if (is(argv[i], lens[i], "setname") && more) {
			if (!name_ok(argv[i + 1], lens[i + 1])) {
				error(out, "Client names cannot contain spaces, newlines or special characters.");
				return;
			}
			c->name.len = 0;
			kv_buf_append(&c->name, argv[i + 1], lens[i + 1]);
			i++;
		} else {
			char a[132];
			error(out, "Syntax error in HELLO option '%s'", arg_str(a, argv[i], lens[i]));
			return;
		}
	}
	if (ver < 2 || ver > 3) {
		kv_buf_str(out, "-NOPROTO unsupported protocol version\r\n");
		return;
	}
	c->resp = (uint8_t)ver;
	map_hdr(out, c, 7);
	bulk(out, "server");
	bulk(out, "redis");
	bulk(out, "version");
	bulk(out, REDIS_COMPAT_VERSION);
	bulk(out, "proto");
	kv_buf_num(out, ':', ver);
	bulk(out, "id");
	kv_buf_num(out, ':', (long long)c->id);
	bulk(out, "mode");
	bulk(out, "standalone");
	bulk(out, "role");
	bulk(out, "master");
	bulk(out, "modules");
	kv_buf_str(out, "*0\r\n");
	(void)s;
}

static void auth_cmd(int argc, char **argv, size_t *lens, struct kv_buf *out)
{
	if (argc == 2) {
		error(out, "AUTH <password> called without any password configured for the default "
			   "user. Are you sure your configuration is correct?");
	} else if (argc == 3 && is(argv[1], lens[1], "default")) {
		status(out, "OK");
	} else if (argc == 3) {
		kv_buf_str(out, "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
	} else {
		kv_buf_str(out, "-ERR syntax error\r\n");
	}
}

/* ---- INFO ---- */

static void field_s(struct kv_buf *b, const char *name, const char *v)
{
	kv_buf_str(b, name);
	kv_buf_str(b, ":");
	kv_buf_str(b, v);
	kv_buf_str(b, "\r\n");
}

static void field_u(struct kv_buf *b, const char *name, unsigned long long v)
{
	char t[32];
	snprintf(t, sizeof(t), "%llu", v);
	field_s(b, name, t);
}

/* Is section name (lower case) asked for by the INFO arguments? */
static bool wants(int argc, char **argv, size_t *lens, const char *name, bool in_default)
{
	if (argc == 1)
		return in_default;
	for (int i = 1; i < argc; i++) {
		if (is(argv[i], lens[i], name) || is(argv[i], lens[i], "all") ||
		    is(argv[i], lens[i], "everything"))
			return true;
		if (is(argv[i], lens[i], "default") && in_default)
			return true;
	}
	return false;
}

static void info_cmd(struct server *s, int argc, char **argv, size_t *lens, struct kv_buf *out)
{
	struct kv_buf b = { 0 };
	uint64_t up = (innet_now_ns() - s->start_ns) / 1000000000ull;
	if (wants(argc, argv, lens, "server", true)) {
		struct utsname u;
		char os[200] = "Linux";
		if (uname(&u) == 0)
			snprintf(os, sizeof(os), "%s %s %s", u.sysname, u.release, u.machine);
		kv_buf_str(&b, "# Server\r\n");
		field_s(&b, "redis_version", REDIS_COMPAT_VERSION);
		field_s(&b, "redis_mode", "standalone");
		field_s(&b, "innet_version", INNET_VERSION_STRING);
		field_s(&b, "os", os);
		field_u(&b, "arch_bits", sizeof(void *) * 8);
		field_u(&b, "process_id", (unsigned long long)getpid());
		field_u(&b, "tcp_port", s->c->listen_port);
		field_u(&b, "uptime_in_seconds", up);
		field_u(&b, "uptime_in_days", up / 86400);
		field_s(&b, "executable", "innet");
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "clients", true)) {
		kv_buf_str(&b, "# Clients\r\n");
		field_u(&b, "connected_clients", s->n_conns);
		field_u(&b, "maxclients", KV_MAX_CONNS);
		field_u(&b, "blocked_clients", 0);
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "memory", true)) {
		kv_buf_str(&b, "# Memory\r\n");
		field_u(&b, "used_memory", kv_used_memory());
		field_u(&b, "maxmemory", s->maxmemory);
		field_s(&b, "maxmemory_policy", "noeviction");
		field_s(&b, "mem_allocator", "libc");
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "persistence", true)) {
		kv_buf_str(&b, "# Persistence\r\n");
		field_u(&b, "loading", 0);
		field_u(&b, "rdb_changes_since_last_save", 0);
		field_u(&b, "rdb_bgsave_in_progress", 0);
		field_u(&b, "rdb_last_save_time", (unsigned long long)(s->start_ms / 1000));
		field_u(&b, "aof_enabled", 0);
		field_u(&b, "aof_rewrite_in_progress", 0);
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "stats", true)) {
		kv_buf_str(&b, "# Stats\r\n");
		field_u(&b, "total_connections_received", s->st.conns_total);
		field_u(&b, "total_commands_processed", s->st.cmds_applied + s->st.cmds_local);
		field_u(&b, "expired_keys", s->st.expired_keys);
		field_u(&b, "evicted_keys", 0);
		field_u(&b, "total_forks", 0);
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "replication", true)) {
		kv_buf_str(&b, "# Replication\r\n");
		field_s(&b, "role", "master");
		field_u(&b, "connected_slaves", s->n_followers);
		field_s(&b, "master_replid", s->replid);
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "cpu", true)) {
		kv_buf_str(&b, "# CPU\r\n\r\n");
	}
	if (wants(argc, argv, lens, "keyspace", true)) {
		kv_buf_str(&b, "# Keyspace\r\n");
		for (uint32_t db = 0; db < KV_DBS; db++) {
			size_t keys, expires;
			kv_store_db_info(s->store, db, &keys, &expires);
			if (keys == 0)
				continue;
			char t[96];
			snprintf(t, sizeof(t), "db%u:keys=%zu,expires=%zu,avg_ttl=0\r\n", db, keys, expires);
			kv_buf_str(&b, t);
		}
		kv_buf_str(&b, "\r\n");
	}
	if (wants(argc, argv, lens, "innet", true))
		kv_info_innet(s, &b);
	kv_buf_bulk(out, b.p ? b.p : "", b.len);
	kv_buf_free(&b);
}

/* ---- COMMAND ---- */

static void command_info(const struct kv_command *k, struct kv_buf *out)
{
	static const struct {
		uint32_t flag;
		const char *name;
	} flags[] = {
		{ KV_CMD_WRITE, "write" }, { KV_CMD_READONLY, "readonly" }, { KV_CMD_ADMIN, "admin" },
		{ KV_CMD_FAST, "fast" }, { KV_CMD_NOMULTI, "no_multi" },
	};
	kv_buf_str(out, "*10\r\n");
	bulk(out, k->name);
	kv_buf_num(out, ':', k->arity);
	long long nf = 0;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		nf += (k->flags & flags[i].flag) != 0;
	kv_buf_num(out, '*', nf);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (k->flags & flags[i].flag)
			status(out, flags[i].name);
	kv_buf_num(out, ':', k->first_key);
	kv_buf_num(out, ':', k->last_key);
	kv_buf_num(out, ':', k->key_step);
	char cat[40];
	snprintf(cat, sizeof(cat), "@%s", k->group);
	kv_buf_str(out, "*2\r\n");
	status(out, k->flags & KV_CMD_WRITE ? "@write" : k->flags & KV_CMD_READONLY ? "@read" :
					      "@connection");
	status(out, cat);
	kv_buf_str(out, "*0\r\n*0\r\n*0\r\n"); /* tips, key specs, subcommands */
}

static void command_docs(const struct kv_command *k, struct conn *c, struct kv_buf *out)
{
	bulk(out, k->name);
	map_hdr(out, c, 3);
	bulk(out, "summary");
	bulk(out, k->summary);
	bulk(out, "since");
	bulk(out, k->since);
	bulk(out, "group");
	bulk(out, k->group);
}

static void command_cmd(struct conn *c, int argc, char **argv, size_t *lens, struct kv_buf *out)
{
	size_t n = kv_command_count();
	if (argc == 1) {
		kv_buf_num(out, '*', (long long)n);
		for (size_t i = 0; i < n; i++)
			command_info(kv_command_at(i), out);
		return;
	}
	const char *sub = argv[1];
	size_t sl = lens[1];
	if (is(sub, sl, "count") && argc == 2) {
		kv_buf_num(out, ':', (long long)n);
	} else if (is(sub, sl, "list") && argc == 2) {
		kv_buf_num(out, '*', (long long)n);
		for (size_t i = 0; i < n; i++)
			bulk(out, kv_command_at(i)->name);
	} else if (is(sub, sl, "info")) {
		if (argc == 2) {
			kv_buf_num(out, '*', (long long)n);
			for (size_t i = 0; i < n; i++)
				command_info(kv_command_at(i), out);
			return;
		}
		kv_buf_num(out, '*', argc - 2);
		for (int i = 2; i < argc; i++) {
			const struct kv_command *k = kv_command_find(argv[i], lens[i]);
			if (k == NULL)
				kv_buf_str(out, "*-1\r\n");
			else
				command_info(k, out);
		}
	} else if (is(sub, sl, "docs")) {
		if (argc == 2) {
			map_hdr(out, c, (long long)n);
			for (size_t i = 0; i < n; i++)
				command_docs(kv_command_at(i), c, out);
			return;
		}
		long long found = 0;
		for (int i = 2; i < argc; i++)
			found += kv_command_find(argv[i], lens[i]) != NULL;
		map_hdr(out, c, found);
		for (int i = 2; i < argc; i++) {
			const struct kv_command *k = kv_command_find(argv[i], lens[i]);
			if (k != NULL)
				command_docs(k, c, out);
		}
	} else if (is(sub, sl, "getkeys") && argc >= 3) {
		const struct kv_command *k = kv_command_find(argv[2], lens[2]);
		int cargc = argc - 2;
		if (k == NULL) {
			error(out, "Invalid command specified");
		} else if (!kv_command_arity_ok(k, cargc)) {
			error(out, "Invalid number of arguments specified for command");
		} else if (k->first_key == 0) {
			error(out, "The command has no key arguments");
		} else {
			int last = k->last_key < 0 ? cargc + k->last_key : k->last_key;
			long long nk = 0;
			for (int i = k->first_key; i <= last && i < cargc; i += k->key_step)
				nk++;
			kv_buf_num(out, '*', nk);
			for (int i = k->first_key; i <= last && i < cargc; i += k->key_step)
				kv_buf_bulk(out, argv[2 + i], lens[2 + i]);
		}
	} else if (is(sub, sl, "help") && argc == 2) {
		static const char *const lines[] = {
			"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)", "    Return details about all Redis commands.",
			"COUNT", "    Return the total number of commands in this Redis server.",
			"LIST", "    Return a list of all commands in this Redis server.",
			"INFO [<command-name> ...]", "    Return details about multiple Redis commands.",
			"DOCS [<command-name> ...]", "    Return documentation details about multiple Redis commands.",
			"GETKEYS <full-command>", "    Return the keys from a full Redis command.",
			"HELP", "    Print this help.",
		};
		help(out, lines, sizeof(lines) / sizeof(lines[0]));
	} else {
		unknown_sub(out, "COMMAND", sub, sl);
	}
}

/* ---- CONFIG ---- */

enum cfg_kind { CFG_FIXED, CFG_BOOL, CFG_INT, CFG_STORE, CFG_ONLY, CFG_MAXMEMORY, CFG_BULKLEN };

static const struct cfg {
	const char *name;
	const char *def;      /* the value until CONFIG SET ("%port", "%bind": the listener's) */
	enum cfg_kind kind;   /* FIXED: immutable; ONLY: settable to def alone (why: note) */
	const char *note;
} cfgs[] = {
	{ "appendonly", "no", CFG_ONLY, "innet kv keeps no append-only file: the replicated log is its durability" },
	{ "bind", "%bind", CFG_FIXED, NULL },
	{ "busy-reply-threshold", "5000", CFG_INT, NULL },
	{ "databases", "16", CFG_FIXED, NULL },
	{ "hash-max-listpack-entries", NULL, CFG_STORE, NULL },
	{ "hash-max-listpack-value", NULL, CFG_STORE, NULL },
	{ "hash-max-ziplist-entries", NULL, CFG_STORE, NULL },
	{ "hash-max-ziplist-value", NULL, CFG_STORE, NULL },
	{ "list-max-listpack-size", "-2", CFG_INT, NULL },
	{ "list-max-ziplist-size", "-2", CFG_INT, NULL },
	{ "lua-time-limit", "5000", CFG_INT, NULL },
	{ "maxclients", "4096", CFG_FIXED, NULL },
	{ "maxmemory", "0", CFG_MAXMEMORY, NULL },
	{ "maxmemory-policy", "noeviction", CFG_FIXED, NULL },
	{ "min-replicas-max-lag", "10", CFG_INT, NULL },
	{ "min-replicas-to-write", "0", CFG_INT, NULL },
	{ "port", "%port", CFG_FIXED, NULL },
	{ "proto-max-bulk-len", NULL, CFG_BULKLEN, NULL },
	{ "repl-ping-replica-period", "10", CFG_INT, NULL },
	{ "save", "", CFG_ONLY, "innet kv saves no RDB file: the replicated log is its durability" },
	{ "set-max-intset-entries", NULL, CFG_STORE, NULL },
	{ "timeout", "0", CFG_FIXED, NULL },
	{ "zset-max-listpack-entries", "128", CFG_INT, NULL },
	{ "zset-max-listpack-value", "64", CFG_INT, NULL },
	{ "zset-max-ziplist-entries", "128", CFG_INT, NULL },
	{ "zset-max-ziplist-value", "64", CFG_INT, NULL },
};
#define N_CFGS (sizeof(cfgs) / sizeof(cfgs[0]))
_Static_assert(N_CFGS <= KV_CONFIG_MAX, "struct server's config[] is too small");

static const char *cfg_value(struct server *s, size_t i, char *buf, size_t len)
{
	const struct cfg *g = &cfgs[i];
	if (g->kind == CFG_BULKLEN) {
		snprintf(buf, len, "%llu", (unsigned long long)s->max_bulk);
		return buf;
	}
	if (g->kind == CFG_STORE) {
		long long v = 0;
		kv_store_config_get(s->store, g->name, &v);
		snprintf(buf, len, "%lld", v);
		return buf;
	}
	if (s->config[i][0] != '\0')
		return s->config[i];
	if (!strcmp(g->def, "%port")) {
		snprintf(buf, len, "%u", s->c->listen_port);
		return buf;
	}
	if (!strcmp(g->def, "%bind")) {
		struct in_addr a = { htonl(s->c->listen_ip) };
		inet_ntop(AF_INET, &a, buf, (socklen_t)len);
		return buf;
	}
	return g->def;
}

/* A memory value as redis reads one (1, 1k, 1kb, 1m, 1mb, 1g, 1gb). */
static bool memory_value(const char *p, size_t n, uint64_t *bytes)
{
	size_t i = 0;
	uint64_t v = 0;
	while (i < n && isdigit((unsigned char)p[i]) && i < 18)
		v = v * 10 + (uint64_t)(p[i++] - '0');
	if (i == 0 || (i < n && isdigit((unsigned char)p[i])))
		return false;
	static const struct {
		const char *unit;
		uint64_t mul;
	} units[] = { { "", 1 }, { "b", 1 }, { "k", 1000 }, { "kb", 1024 }, { "m", 1000000 },
		      { "mb", 1u << 20 }, { "g", 1000000000 }, { "gb", 1u << 30 } };
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
		if (is(p + i, n - i, units[u].unit)) {
			*bytes = v * units[u].mul;
			return true;
		}
	return false;
}

static void config_cmd(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		       struct kv_buf *out)
{
	const char *sub = argv[1];
	size_t sl = lens[1];
	char buf[64], a[132];
	if (is(sub, sl, "get") && argc >= 3) {
		bool hit[N_CFGS] = { false };
		long long n = 0;
		for (int k = 2; k < argc; k++)
			for (size_t i = 0; i < N_CFGS; i++)
				if (!hit[i] && kv_glob(argv[k], lens[k], cfgs[i].name, strlen(cfgs[i].name), true)) {
					hit[i] = true;
					n++;
				}
		map_hdr(out, c, n);
		for (size_t i = 0; i < N_CFGS; i++)
			if (hit[i]) {
				bulk(out, cfgs[i].name);
				bulk(out, cfg_value(s, i, buf, sizeof(buf)));
			}
	} else if (is(sub, sl, "set") && argc >= 4 && argc % 2 == 0) {
		/* check every pair first: all or nothing, as redis */
		size_t idx[64];
		int pairs = (argc - 2) / 2;
		if (pairs > 64) {
			kv_buf_str(out, "-ERR syntax error\r\n");
			return;
		}
		for (int k = 0; k < pairs; k++) {
			const char *name = argv[2 + 2 * k], *v = argv[3 + 2 * k];
			size_t nl = lens[2 + 2 * k], vl = lens[3 + 2 * k];
			size_t i;
			for (i = 0; i < N_CFGS && !is(name, nl, cfgs[i].name); i++)
				;
			if (i == N_CFGS) {
				error(out, "Unknown option or number of arguments for CONFIG SET - '%s'",
				      arg_str(a, name, nl));
				return;
			}
			const struct cfg *g = &cfgs[i];
			const char *why = NULL;
			long long num;
			uint64_t bytes;
			if (g->kind == CFG_FIXED)
				why = "can't set immutable config";
			else if (g->kind == CFG_BOOL && !is(v, vl, "yes") && !is(v, vl, "no"))
				why = "argument must be 'yes' or 'no'";
			else if ((g->kind == CFG_INT || g->kind == CFG_STORE) && !kv_parse_ll(v, vl, &num))
				why = "argument couldn't be parsed into an integer";
			else if (g->kind == CFG_STORE && num < 0)
				why = "argument must be between 0 and 4294967295 inclusive";
			else if (g->kind == CFG_MAXMEMORY && !memory_value(v, vl, &bytes))
				why = "argument must be a memory value";
			else if (g->kind == CFG_BULKLEN &&
				 (!memory_value(v, vl, &bytes) || bytes < KV_INBUF_MAX ||
				  bytes > KV_BULK_MAX_LIMIT))
				why = "argument must be a memory value between 1mb and 1gb";
			else if (g->kind == CFG_ONLY && !is(v, vl, g->def))
				why = g->note;
			else if (vl >= sizeof(s->config[0]))
				why = "value too long";
			if (why != NULL) {
				error(out, "CONFIG SET failed (possibly related to argument '%s') - %s",
				      g->name, why);
				return;
			}
			idx[k] = i;
		}
		for (int k = 0; k < pairs; k++) {
			const char *v = argv[3 + 2 * k];
			size_t vl = lens[3 + 2 * k];
			const struct cfg *g = &cfgs[idx[k]];
			if (g->kind == CFG_STORE) {
				long long num = 0;
				kv_parse_ll(v, vl, &num);
				kv_store_config_set(s->store, g->name, num);
			} else if (g->kind == CFG_BULKLEN) {
				uint64_t bytes = 0;
				memory_value(v, vl, &bytes);
				if (kv_set_max_bulk(s, bytes) != 0) {
					error(out, "CONFIG SET failed (possibly related to argument '%s') - "
						   "out of memory", g->name);
					return;
				}
			} else if (g->kind == CFG_MAXMEMORY) {
				uint64_t bytes = 0;
				memory_value(v, vl, &bytes);
				s->maxmemory = bytes;
				snprintf(s->config[idx[k]], sizeof(s->config[0]), "%llu",
					 (unsigned long long)bytes);
			} else {
				memcpy(s->config[idx[k]], v, vl);
				s->config[idx[k]][vl] = '\0';
				if (vl == 0 && g->def[0] != '\0')
					s->config[idx[k]][0] = '\0';
			}
		}
		status(out, "OK");
	} else if (is(sub, sl, "resetstat") && argc == 2) {
		status(out, "OK");
	} else if (is(sub, sl, "rewrite") && argc == 2) {
		error(out, "The server is running without a config file");
	} else if (is(sub, sl, "help") && argc == 2) {
		static const char *const lines[] = {
			"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
			"SET <directive> <value>", "    Set the configuration <directive> to <value>.",
			"RESETSTAT", "    Reset statistics reported by the INFO command.",
			"HELP", "    Print this help.",
		};
		help(out, lines, sizeof(lines) / sizeof(lines[0]));
	} else if (is(sub, sl, "get") || is(sub, sl, "set") || is(sub, sl, "resetstat") ||
		   is(sub, sl, "rewrite")) {
		char name[32];
		snprintf(name, sizeof(name), "config|%.16s", arg_str(a, sub, sl < 16 ? sl : 16));
		for (char *p = name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		kv_reply_arity_error(out, name);
	} else {
		unknown_sub(out, "CONFIG", sub, sl);
	}
}

/* ---- FUNCTION, TIME ---- */

static void function_cmd(struct conn *c, int argc, char **argv, size_t *lens, struct kv_buf *out)
{
	const char *sub = argv[1];
	size_t sl = lens[1];
	if (is(sub, sl, "flush") && (argc == 2 || (argc == 3 && (is(argv[2], lens[2], "async") ||
								 is(argv[2], lens[2], "sync"))))) {
		status(out, "OK"); /* there are no functions to flush */
	} else if (is(sub, sl, "list")) {
		kv_buf_str(out, "*0\r\n");
	} else if (is(sub, sl, "flush")) {
		kv_buf_str(out, "-ERR syntax error\r\n");
	} else {
		error(out, "innet kv has no scripting: FUNCTION %s is not supported", "commands");
	}
	(void)c;
}

long long kv_config_ll(struct server *s, const char *name, long long def)
{
	for (size_t i = 0; i < N_CFGS; i++)
		if (!strcmp(cfgs[i].name, name)) {
			char buf[64];
			const char *v = cfg_value(s, i, buf, sizeof(buf));
			long long n;
			return kv_parse_ll(v, strlen(v), &n) ? n : def;
		}
	return def;
}

/* SYNC, PSYNC: the state as an RDB file, then the connection follows the
 * store's changes (kv_feed.c). PSYNC always answers a full resynchronization
 * (no backlog to continue from). */
static void sync_cmd(struct server *s, struct conn *c, bool psync, struct kv_buf *out)
{
	if (c->follower)
		return;
	struct kv_buf rdb = { 0 };
	kv_store_rdb(s->store, &rdb);
	if (rdb.oom) {
		kv_buf_free(&rdb);
		error(out, "out of memory building the RDB payload");
		return;
	}
	if (psync) {
		kv_buf_str(out, "+FULLRESYNC ");
		kv_buf_str(out, s->replid);
		kv_buf_str(out, " 0\r\n");
	}
	kv_buf_num(out, '$', (long long)rdb.len);
	kv_buf_append(out, rdb.p, rdb.len); /* no CRLF after the payload, as redis */
	kv_buf_free(&rdb);
	c->follower = true;
	if (s->n_followers++ == 0) {
		kv_store_set_feed(s->store, &s->feed);
		s->ping_ns = innet_now_ns();
	} else {
		kv_store_feed_select(s->store); /* its stream starts with a SELECT */
	}
}

bool kv_admin_command(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		      struct kv_buf *out)
{
	const char *cmd = argv[0];
	size_t n = lens[0];
	if (is(cmd, n, "client") && argc >= 2) {
		client_cmd(s, c, argc, argv, lens, out);
	} else if (is(cmd, n, "hello")) {
		hello_cmd(s, c, argc, argv, lens, out);
	} else if (is(cmd, n, "auth")) {
		auth_cmd(argc, argv, lens, out);
	} else if (is(cmd, n, "info")) {
		info_cmd(s, argc, argv, lens, out);
	} else if (is(cmd, n, "command")) {
		command_cmd(c, argc, argv, lens, out);
	} else if (is(cmd, n, "config") && argc >= 2) {
		config_cmd(s, c, argc, argv, lens, out);
	} else if (is(cmd, n, "function") && argc >= 2) {
		function_cmd(c, argc, argv, lens, out);
	} else if (is(cmd, n, "time") && argc == 1) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
		kv_buf_str(out, "*2\r\n");
		char t[32];
		snprintf(t, sizeof(t), "%lld", (long long)(us / 1000000));
		bulk(out, t);
		snprintf(t, sizeof(t), "%lld", (long long)(us % 1000000));
		bulk(out, t);
	} else if (is(cmd, n, "sync") || is(cmd, n, "psync")) {
		sync_cmd(s, c, is(cmd, n, "psync"), out);
	} else if (is(cmd, n, "replconf")) {
		/* a replica's settings (listening-port, capa ...): noted as fine;
		 * ACK and GETACK get no answer */
		if (argc >= 2 && !is(argv[1], lens[1], "ack") && !is(argv[1], lens[1], "getack"))
			status(out, "OK");
	} else if (kv_pubsub_command(s, c, argc, argv, lens, out)) {
		/* answered */
	} else if (is(cmd, n, "eval") || is(cmd, n, "evalsha") || is(cmd, n, "script") ||
		   is(cmd, n, "fcall")) {
		error(out, "innet kv has no scripting (EVAL, SCRIPT, FCALL are refused)");
	} else if (is(cmd, n, "replicaof") || is(cmd, n, "slaveof")) {
		/* a replica of the log is never a redis replica; NO ONE: so it is */
		if (is(argv[1], lens[1], "no") && is(argv[2], lens[2], "one"))
			status(out, "OK");
		else
			error(out, "innet kv replicas follow the Paxos log, not a redis master: "
				   "REPLICAOF NO ONE only");
	} else if (is(cmd, n, "save")) {
		error(out, "innet kv saves no RDB file: the replicated log is its durability");
	} else if (is(cmd, n, "shutdown")) {
		error(out, "innet kv: a replica stops with innet kv stop (or SIGTERM), not SHUTDOWN");
	} else if (is(cmd, n, "lastsave") && argc == 1) {
		kv_buf_num(out, ':', s->start_ms / 1000);
	} else {
		return false;
	}
	return true;
}
