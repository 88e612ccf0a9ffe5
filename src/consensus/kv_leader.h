/*
 * consensus/kv_leader.h — what a KV fabric's backup coordinator (`innet kv
 * leader`, an innet_paxos_leader on a host) keeps beside its Paxos role:
 *
 *   <state_dir>/kv-HOST.sock    its status socket: one line in ("status"),
 *                               one JSON line out — {"ok": true, "serving":
 *                               true, "ballot": N, "next": N, "takeovers": N,
 *                               "requests": N} — which `innet kv rejoin` reads
 *                               (kv_rejoin.c): after a takeover the leader's
 *                               next instance bounds what a restarted
 *                               acceptor may have voted in;
 *   <state_dir>/kv-HOST.round   the highest round it used, across restarts: a
 *                               restarted leader must never take a ballot it
 *                               used before (two values could be chosen in
 *                               one instance at one ballot).
 *
 * src/consensus/kv_leader.c; moved out of src/cli/cmd_kv.c. Errors: 0 or
 * -errno with a message in err; nothing is printed.
 */
#ifndef INNET_CONSENSUS_KV_LEADER_H
#define INNET_CONSENSUS_KV_LEADER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "innet/consensus.h"

struct innet_topology;

#define KV_LEADER_STATUS_CLIENTS 4

/* The status socket's server: a listening socket and a few clients, served
 * without blocking from the leader's own loop. */
struct kv_leader_status_srv {
	int lfd;                                     /* listening, or -1 */
	int fd[KV_LEADER_STATUS_CLIENTS];            /* clients (-1 = free) */
	uint64_t since_ns[KV_LEADER_STATUS_CLIENTS]; /* when each connected */
	char buf[KV_LEADER_STATUS_CLIENTS][64];      /* its line so far */
	size_t len[KV_LEADER_STATUS_CLIENTS];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* The leader's status as the socket tells it. */
struct kv_leader_status {
	bool serving;        /* phase 1 done, ordering requests */
	uint32_t ballot;
	uint64_t next;       /* the next instance it hands out */
	uint64_t takeovers;
	uint64_t requests;
};

/* Host h's status socket and round file paths (in the topology's state dir). */
void kv_leader_sock_path(const struct innet_topology *t, uint32_t h, char *out, size_t len);
void kv_leader_round_path(const struct innet_topology *t, uint32_t h, char *out, size_t len);

/* Listen on path (an old socket file there is replaced). 0 or -errno. */
int kv_leader_status_open(struct kv_leader_status_srv *s, const char *path, char *err,
			  size_t errlen);
/* Accept, read, answer; never blocks (a client that sends no line within a
 * second is dropped). */
void kv_leader_status_serve(struct kv_leader_status_srv *s, const struct innet_paxos_leader *l);
/* Close the clients and the socket, and remove its file. */
void kv_leader_status_close(struct kv_leader_status_srv *s);

/* Ask the status socket at path (innet/ctl_client.h). 0, or -errno with err
 * (-ENOENT: no socket there). */
int kv_leader_status_query(const char *path, struct kv_leader_status *out, char *err,
			   size_t errlen);

/* The round stored at path; 0 if none. */
uint32_t kv_leader_round_load(const char *path);
/* Store ballot's round at path durably (a temporary file, fsync, rename)
 * before the leader uses the ballot. 0 or -errno (err). */
int kv_leader_round_store(const char *path, uint32_t ballot, char *err, size_t errlen);

#endif /* INNET_CONSENSUS_KV_LEADER_H */
