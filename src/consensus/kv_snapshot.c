/*
 * kv_snapshot.c — snapshots of the replicated KV store of `innet kv`: what a
 * replica answers to the RESP command SNAPSHOT, and how a replica that the
 * acceptors trimmed past fetches one from its peers and installs it. The
 * server around it (it answers SNAPSHOT, and notices the trim) is
 * kv_server.c, the store kv_store.c; they share kv_pvt.h (struct server).
 *
 * Snapshots (state transfer): a replica whose next instance the acceptors
 * trimmed away (innet_paxos_process says -ESTALE: it restarted empty, or was
 * away while the others went on) cannot catch up from the log. It asks its
 * peers, one after the other, with the RESP command SNAPSHOT and installs
 * the first answer that reaches at least the acceptors' trim:
 *
 *   'K' 'V' 'S' version 4 | u64 next (every instance below it is applied)
 *   | u32 dlen, the learner's dedup state (innet_paxos_dedup_save)
 *   | u64 slen, the store's state (kv_store_save: REPLICA REMOVE's mask, log
 *     time, versions, every key with its database, type, expire and value)
 *   | u32 n_partial, the large entries being put together from their chunks
 *     (kv_chunk_save: per one u64 id, u64 first, u32 total, u32 got, total
 *     bytes) — so that a replica installing it mid-image completes the image
 *     as the others do                                         (big-endian)
 *
 * Version 4 (both the typed store with log time and the partials). A
 * replica refuses any other version with a message that says so: all
 * replicas of a log run the same version (docs/protocol.md 2.2).
 *
 * The peer builds it between two log entries (one thread), so it is the
 * state at exactly `next`; the dedup state makes a resend chosen again after
 * `next` be skipped as it would be by the peer. Then the replica continues
 * from `next` (innet_paxos_restart_at). Its own groups in flight get an
 * "outcome unknown" error (they may be inside the snapshot). Without a peer
 * that answers it keeps trying every second and says so on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "consensus/kv.h"
#include "consensus/kv_pvt.h"
#include "consensus/wire.h"

/* ---- snapshots ------------------------------------------------------------ */

static void put64(uint8_t *p, uint64_t v)
{
	kv_put32(p, (uint32_t)(v >> 32));
	kv_put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)kv_get32(p) << 32 | kv_get32(p + 4);
}

/* The state at innet_paxos_delivered() (format: the file's header). */
void kv_snapshot_build(struct server *s, struct kv_buf *b)
{
	uint8_t hdr[16] = { 'K', 'V', 'S', KV_SNAPSHOT_VERSION };
	put64(hdr + 4, innet_paxos_delivered(s->px));
	size_t dlen = innet_paxos_dedup_size(s->px);
	kv_put32(hdr + 12, (uint32_t)dlen);
	kv_buf_append(b, hdr, sizeof(hdr));
	uint8_t *d = malloc(dlen);
	if (d == NULL) {
		b->oom = true;   /* the caller answers an error instead */
		return;
	}
	innet_paxos_dedup_save(s->px, d, dlen);
	kv_buf_append(b, d, dlen);
	free(d);
	size_t at = b->len;
	uint8_t n[8] = { 0 };
	kv_buf_append(b, n, 8);
	kv_store_save(s->store, b);
	if (!b->oom)
		put64((uint8_t *)b->p + at, b->len - at - 8);
	kv_chunk_save(s, b);
}

/* Ask peer for a snapshot: the bulk payload into b. Blocking, bounded by
 * 2 s per step (the replica cannot serve while stale anyway). 0 or -1 with
 * why in err. */
static int snapshot_fetch(const struct innet_addr *peer, struct kv_buf *b, char *err, size_t errlen)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(peer->ip),
				 .sin_port = htons(peer->udp) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = 2 };
	static const char req[] = "*1\r\n$8\r\nSNAPSHOT\r\n";
	int rc = -1;
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(req) - 1) {
		snprintf(err, errlen, "%s", strerror(errno));
		goto out;
	}
	size_t want = SIZE_MAX, hdr = 0;
	char buf[65536];
	while (b->len < want) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0) {
			snprintf(err, errlen, "%s", n == 0 ? "connection closed" : strerror(errno));
			goto out;
		}
		kv_buf_append(b, buf, (size_t)n);
		if (hdr == 0) {
			char *nl = memchr(b->p, '\n', b->len);
			if (nl == NULL)
				continue;
			if (b->p[0] != '$') {
				*nl = '\0';
				snprintf(err, errlen, "%.200s", b->p);
				goto out;
			}
			hdr = (size_t)(nl - b->p) + 1;
			want = hdr + strtoull(b->p + 1, NULL, 10) + 2;
		}
	}
	memmove(b->p, b->p + hdr, want - hdr - 2);
	b->len = want - hdr - 2;
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Fail our groups in flight or queued: their entries may or may not be in
 * the snapshot. */
static void fail_inflight(struct server *s)
{
	for (uint32_t i = 0; i < KV_MAX_WINDOW; i++)
		if (s->batches[i] != 0) {
			uint64_t req = s->batches[i];
			kv_batch_end(s, req);
			kv_entry_failed(s, req, "-ERR replica restored from a snapshot: the command may "
						"or may not have been applied\r\n");
		}
}

/* Install snapshot v[0..len) if it reaches at least min_next. 0, or -1
 * with why in err (the state is untouched then). */
static int snapshot_install(struct server *s, const uint8_t *v, size_t len, uint64_t min_next,
			    char *err, size_t errlen)
{
	if (len < 16 || memcmp(v, "KVS", 3) != 0) {
		snprintf(err, errlen, "not a KV snapshot");
		return -1;
	}
	if (v[3] != KV_SNAPSHOT_VERSION) {
		snprintf(err, errlen, "a version-%u snapshot: this replica reads version %u only "
				      "(every replica of a log must run the same innet kv)",
			 v[3], KV_SNAPSHOT_VERSION);
		return -1;
	}
	uint64_t next = get64(v + 4);
	size_t dlen = kv_get32(v + 12), pos = 16 + dlen;
	if (next < min_next) {
		snprintf(err, errlen, "it is at instance %llu, below the acceptors' trim %llu",
			 (unsigned long long)next, (unsigned long long)min_next);
		return -1;
	}
	if (pos > len || len - pos < 8 || get64(v + pos) > len - pos - 8) {
		snprintf(err, errlen, "truncated");
		return -1;
	}
	size_t slen = (size_t)get64(v + pos);
	pos += 8;
	struct kv_store *st = kv_store_load(v + pos, slen, err, errlen);
	if (st == NULL)
		return -1;
	pos += slen;
	struct kv_big bigs[KV_BIG_MAX];
	uint32_t n_bigs = 0;
	size_t used = 0;
	int rc = kv_chunk_parse(v + pos, len - pos, bigs, &n_bigs, &used);
	if (rc != 0 || pos + used != len) {
		if (rc == 0)
			kv_chunk_free(bigs, n_bigs);
		kv_store_destroy(st);
		snprintf(err, errlen, rc == -ENOMEM ? "out of memory" : "malformed large-entry partials");
		return -1;
	}
	kv_server_store_init(s, st);
	if (innet_paxos_dedup_load(s->px, v + 16, dlen) != 0) {
		kv_chunk_free(bigs, n_bigs);
		kv_store_destroy(st);
		snprintf(err, errlen, "malformed dedup state");
		return -1;
	}
	kv_followers_drop(s);
	kv_chunk_install(s, bigs, n_bigs);
	kv_store_destroy(s->store);
	s->store = st;
	innet_paxos_restart_at(s->px, next);
	fail_inflight(s);
	return 0;
}

/* Stale: try every peer for a snapshot (at most once a second). */
void kv_snapshot_catch_up(struct server *s)
{
	uint64_t t = innet_now_ns();
	if (t - s->snap_try_ns < 1000000000ull)
		return;
	s->snap_try_ns = t;
	uint64_t trim = innet_paxos_stale_trim(s->px);
	for (uint32_t i = 0; i < s->c->n_peers; i++) {
		const struct innet_addr *pa = &s->c->peers[i];
		struct in_addr ia = { htonl(pa->ip) };
		struct kv_buf b = { 0 };
		char err[256];
		if (snapshot_fetch(pa, &b, err, sizeof(err)) == 0 &&
		    snapshot_install(s, (const uint8_t *)b.p, b.len, trim, err, sizeof(err)) == 0) {
			fprintf(stderr, "innet kv: installed a snapshot from %s:%u at instance %llu "
					"(%zu keys, %zu bytes)\n", inet_ntoa(ia), pa->udp,
				(unsigned long long)innet_paxos_delivered(s->px), kv_store_keys(s->store), b.len);
			s->st.snapshots_installed++;
			s->stale = false;
			kv_buf_free(&b);
			return;
		}
		fprintf(stderr, "innet kv: no usable snapshot from %s:%u: %s\n", inet_ntoa(ia), pa->udp,
			err);
		s->st.snapshot_failures++;
		kv_buf_free(&b);
	}
	if (s->c->n_peers == 0)
		fprintf(stderr, "innet kv: the acceptors trimmed the log past this replica and it has "
				"no peer replica to take a snapshot from\n");
}
