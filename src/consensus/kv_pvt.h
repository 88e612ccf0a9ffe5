/*
 * kv_pvt.h — what the KV store's sources share (kv_store.c, kv_resp.c,
 * kv_server.c): limits and the log entry's layout (kv_server.c's header
 * comment draws it).
 */
#ifndef INNET_CONSENSUS_KV_PVT_H
#define INNET_CONSENSUS_KV_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consensus/kv.h"
#include "consensus/wire.h"

#define KV_MAX_ARGS    1024
#define KV_INBUF_MAX   (1u << 20)
#define KV_MAX_CONNS   4096
#define KV_QUEUED      UINT64_MAX /* conn.inflight: its group waits for the next entry */
#define KV_ENTRY_MAGIC0  'K'
#define KV_ENTRY_MAGIC1  'V'
#define KV_ENTRY_VERSION 1u
#define KV_SNAPSHOT_VERSION 2u
#define KV_ENTRY_HDR   6u         /* 'K' 'V' version flags, u16 n_groups */
#define KV_GROUP_HDR   6u         /* u32 client, u16 n_commands */
#define KV_GROUP_MAX   (PAXOS_VALUE_MAX - KV_ENTRY_HDR - KV_GROUP_HDR) /* commands of one group */


/* The store (kv_store.c); the server reads it for snapshots. */
struct kv_item {
	struct kv_item *next;
	uint64_t hash;
	size_t klen, vlen;
	char *val;
	char key[];
};

struct kv_store {
	struct kv_item **tab;
	size_t cap, n;
	uint64_t removed;      /* learner ids removed from the trim group (REPLICA REMOVE) */
	uint32_t n_learners;   /* replicas of the log (learner ids 0..n-1); 0 = not known */
	bool oom;              /* a write found no memory: this copy is no longer the log's */
};

/* kv_store.c's helpers the server and the RESP parser use. */
void kv_buf_str(struct kv_buf *b, const char *s);
void kv_buf_num(struct kv_buf *b, char prefix, long long v);
void kv_buf_bulk(struct kv_buf *b, const char *p, size_t n);
void kv_buf_consume(struct kv_buf *b, size_t n);
bool kv_parse_ll(const char *p, size_t n, long long *out);
/* The index of a command that goes through the log, or -1; its arity; the
 * arity error redis answers. */
int kv_logged_index(const char *name);
bool kv_arity_ok(int li, int argc);
void kv_arity_error(struct kv_buf *out, int li);
/* Set key k to v (a copy); out of memory marks the store (kv_store_oom). */
void kv_store_set(struct kv_store *s, const char *k, size_t kl, const char *v, size_t vl);

#endif /* INNET_CONSENSUS_KV_PVT_H */
