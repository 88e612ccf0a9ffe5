/*
 * kv_pubsub.c — redis's publish/subscribe on `innet kv`: SUBSCRIBE,
 * UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE and PUBSUB (CHANNELS NUMSUB NUMPAT)
 * are a connection's business, answered by its replica; PUBLISH goes
 * through the log like a write, so every replica delivers every message, in
 * log order, to its own subscribers — a subscriber on any replica gets the
 * messages of publishers on all of them, in the same order. PUBLISH answers
 * the receivers on the replica that took it (as redis cluster does: its own
 * node's). A connection with subscriptions speaks RESP2's subscribed mode
 * (only the commands above, PING, QUIT, RESET); with RESP3 messages are
 * pushes beside ordinary replies.
 *
 * Subscriptions are lists in the connection (u32 length, name; per entry):
 * a message is matched against every subscribed connection of the replica.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/kv.h"
#include "consensus/kv_pvt.h"

static bool is(const char *a, size_t n, const char *name)
{
	return n == strlen(name) && !strncasecmp(a, name, n);
}

static uint32_t rd32(const char *p)
{
	const uint8_t *u = (const uint8_t *)p;
	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* The offset of name in list l, or -1. */
static long find(const struct kv_buf *l, const char *name, size_t n)
{
	for (size_t pos = 0; pos + 4 <= l->len;) {
		size_t len = rd32(l->p + pos);
		if (len == n && memcmp(l->p + pos + 4, name, n) == 0)
			return (long)pos;
		pos += 4 + len;
	}
	return -1;
}

static void list_add(struct kv_buf *l, const char *name, size_t n)
{
	uint8_t h[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	kv_buf_append(l, h, 4);
	kv_buf_append(l, name, n);
}

static void list_del(struct kv_buf *l, long pos)
{
	size_t len = 4 + rd32(l->p + pos);
	memmove(l->p + pos, l->p + pos + len, l->len - (size_t)pos - len);
	l->len -= len;
}

bool kv_pubsub_mode(const struct conn *c)
{
	return c->resp == 2 && (c->n_subs > 0 || c->n_psubs > 0);
}

bool kv_pubsub_allowed(const char *name)
{
	static const char *const ok[] = { "subscribe", "unsubscribe", "psubscribe", "punsubscribe",
					  "ping", "quit", "reset" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(name, ok[i]))
			return true;
	return false;
}

/* A subscription reply or a message: ">n" with RESP3, "*n" else. */
static void push_hdr(struct kv_buf *out, const struct conn *c, int n)
{
	kv_buf_num(out, c->resp == 3 ? '>' : '*', n);
}

static void ack(struct conn *c, struct kv_buf *out, const char *kind, const char *name, size_t n,
		bool null_name)
{
	push_hdr(out, c, 3);
	kv_buf_bulk(out, kind, strlen(kind));
	if (null_name)
		kv_buf_str(out, c->resp == 3 ? "_\r\n" : "$-1\r\n");
	else
		kv_buf_bulk(out, name, n);
	kv_buf_num(out, ':', (long long)(c->n_subs + c->n_psubs));
}

/* (P)SUBSCRIBE, (P)UNSUBSCRIBE, PUBSUB; false if cmd is none of them. */
bool kv_pubsub_command(struct server *s, struct conn *c, int argc, char **argv, size_t *lens,
		       struct kv_buf *out)
{
	bool pat = lens[0] > 0 && (argv[0][0] == 'p' || argv[0][0] == 'P');
	struct kv_buf *l = pat ? &c->psubs : &c->subs;
	uint32_t *n = pat ? &c->n_psubs : &c->n_subs;
	if (is(argv[0], lens[0], "subscribe") || is(argv[0], lens[0], "psubscribe")) {
		for (int i = 1; i < argc; i++) {
			if (find(l, argv[i], lens[i]) < 0) {
				list_add(l, argv[i], lens[i]);
				(*n)++;
			}
			ack(c, out, pat ? "psubscribe" : "subscribe", argv[i], lens[i], false);
		}
	} else if (is(argv[0], lens[0], "unsubscribe") || is(argv[0], lens[0], "punsubscribe")) {
		const char *kind = pat ? "punsubscribe" : "unsubscribe";
		if (argc == 1) {
			if (*n == 0)
				ack(c, out, kind, NULL, 0, true);
			while (l->len > 0) {
				char name[256];
				size_t len = rd32(l->p), k = len < sizeof(name) ? len : sizeof(name);
				memcpy(name, l->p + 4, k);
				list_del(l, 0);
				(*n)--;
				ack(c, out, kind, name, k, false);
			}
		}
		for (int i = 1; i < argc; i++) {
			long pos = find(l, argv[i], lens[i]);
			if (pos >= 0) {
				list_del(l, pos);
				(*n)--;
			}
			ack(c, out, kind, argv[i], lens[i], false);
		}
	} else if (is(argv[0], lens[0], "pubsub") && argc >= 2) {
		if (is(argv[1], lens[1], "numpat") && argc == 2) {
			long long np = 0;
			for (uint32_t i = 0; i < s->n_conns; i++)
				np += s->conns[i]->n_psubs;
			kv_buf_num(out, ':', np);
		} else if (is(argv[1], lens[1], "numsub")) {
			kv_buf_num(out, '*', 2 * (argc - 2));
			for (int i = 2; i < argc; i++) {
				long long k = 0;
				for (uint32_t j = 0; j < s->n_conns; j++)
					k += find(&s->conns[j]->subs, argv[i], lens[i]) >= 0;
				kv_buf_bulk(out, argv[i], lens[i]);
				kv_buf_num(out, ':', k);
			}
		} else if (is(argv[1], lens[1], "channels") && argc <= 3) {
			/* distinct channels with a subscriber, matching the pattern */
			struct kv_buf names = { 0 }, reply = { 0 };
			long long k = 0;
			for (uint32_t j = 0; j < s->n_conns; j++) {
				const struct kv_buf *cl = &s->conns[j]->subs;
				for (size_t pos = 0; pos + 4 <= cl->len;) {
					size_t len = rd32(cl->p + pos);
					const char *name = cl->p + pos + 4;
					if (find(&names, name, len) < 0 &&
					    (argc == 2 || kv_glob(argv[2], lens[2], name, len, false))) {
						list_add(&names, name, len);
						kv_buf_bulk(&reply, name, len);
						k++;
					}
					pos += 4 + len;
				}
			}
			kv_buf_num(out, '*', k);
			kv_buf_append(out, reply.p, reply.len);
			kv_buf_free(&names);
			kv_buf_free(&reply);
		} else {
			char sub[64];
			size_t k = lens[1] < 60 ? lens[1] : 60;
			memcpy(sub, argv[1], k);
			sub[k] = '\0';
			for (size_t i = 0; i < k; i++)
				if (sub[i] == '\r' || sub[i] == '\n')
					sub[i] = ' ';
			kv_buf_str(out, "-ERR unknown subcommand '");
			kv_buf_str(out, sub);
			kv_buf_str(out, "'. Try PUBSUB HELP.\r\n");
		}
	} else {
		return false;
	}
	return true;
}

/* A PUBLISH applied from the log: the message to every subscriber of this
 * replica; the receivers. */
long long kv_pubsub_publish(void *arg, const char *ch, size_t chl, const char *msg, size_t ml)
{
	struct server *s = arg;
	long long receivers = 0;
	struct conn *got[KV_MAX_CONNS];
	uint32_t n_got = 0;
	for (uint32_t i = 0; i < s->n_conns; i++) {
		struct conn *c = s->conns[i];
		if (c->n_subs == 0 && c->n_psubs == 0)
			continue;
		bool any = false;
		if (find(&c->subs, ch, chl) >= 0) {
			push_hdr(&c->out, c, 3);
			kv_buf_bulk(&c->out, "message", 7);
			kv_buf_bulk(&c->out, ch, chl);
			kv_buf_bulk(&c->out, msg, ml);
			receivers++;
			any = true;
		}
		for (size_t pos = 0; pos + 4 <= c->psubs.len;) {
			size_t len = rd32(c->psubs.p + pos);
			const char *pat = c->psubs.p + pos + 4;
			if (kv_glob(pat, len, ch, chl, false)) {
				push_hdr(&c->out, c, 4);
				kv_buf_bulk(&c->out, "pmessage", 8);
				kv_buf_bulk(&c->out, pat, len);
				kv_buf_bulk(&c->out, ch, chl);
				kv_buf_bulk(&c->out, msg, ml);
				receivers++;
				any = true;
			}
			pos += 4 + len;
		}
		if (any)
			got[n_got++] = c;
	}
	/* sent by the event loop (flushing here could close a connection the
	 * entry being applied still refers to) */
	for (uint32_t i = 0; i < n_got; i++)
		kv_conn_want_write(s, got[i]);
	return receivers;
}
