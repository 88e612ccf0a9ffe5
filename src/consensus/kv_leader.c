/*
 * kv_leader.c — a KV fabric's backup coordinator's status socket and round
 * file (consensus/kv_leader.h has the formats). The server answers from the
 * leader's own loop without blocking: at most KV_LEADER_STATUS_CLIENTS
 * clients at once, each with a 64-byte line buffer, dropped after its
 * answer, on a bad line or after a second without one. The query side is
 * the control-socket client (innet/ctl_client.h): the socket speaks the
 * same one-line JSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "innet/clock.h"
#include "innet/ctl_client.h"
#include "innet/topology.h"
#include "consensus/kv_leader.h"

void kv_leader_sock_path(const struct innet_topology *t, uint32_t h, char *out, size_t len)
{
	snprintf(out, len, "%s/kv-%s.sock", t->state_dir, t->nodes[h].name);
}

void kv_leader_round_path(const struct innet_topology *t, uint32_t h, char *out, size_t len)
{
	snprintf(out, len, "%s/kv-%s.round", t->state_dir, t->nodes[h].name);
}

int kv_leader_status_open(struct kv_leader_status_srv *s, const char *path, char *err,
			  size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	for (int i = 0; i < KV_LEADER_STATUS_CLIENTS; i++)
		s->fd[i] = -1;
	s->lfd = -1;
	s->path[0] = '\0';
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "status socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
		int e = errno;
		snprintf(err, errlen, "status socket %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	s->lfd = fd;
	snprintf(s->path, sizeof(s->path), "%s", path);
	return 0;
}

static void drop(struct kv_leader_status_srv *s, int i)
{
	close(s->fd[i]);
	s->fd[i] = -1;
}

void kv_leader_status_serve(struct kv_leader_status_srv *s, const struct innet_paxos_leader *l)
{
	if (s->lfd < 0)
		return;
	uint64_t now = innet_now_ns();
	for (int i = 0; i < KV_LEADER_STATUS_CLIENTS; i++) {
		if (s->fd[i] >= 0)
			continue;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			break;
		s->fd[i] = fd;
		s->len[i] = 0;
		s->since_ns[i] = now;
	}
	for (int i = 0; i < KV_LEADER_STATUS_CLIENTS; i++) {
		if (s->fd[i] < 0)
			continue;
		ssize_t n = recv(s->fd[i], s->buf[i] + s->len[i], sizeof(s->buf[i]) - 1 - s->len[i],
				 MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			drop(s, i);
			continue;
		}
		if (n > 0)
			s->len[i] += (size_t)n;
		s->buf[i][s->len[i]] = '\0';
		char *nl = strchr(s->buf[i], '\n');
		if (nl == NULL) {
			if (s->len[i] == sizeof(s->buf[i]) - 1 || now - s->since_ns[i] > 1000000000ull)
				drop(s, i);
			continue;
		}
		*nl = '\0';
		char out[256];
		int len;
		if (strcmp(s->buf[i], "status") == 0) {
			struct innet_paxos_leader_stats st;
			innet_paxos_leader_get_stats(l, &st);
			len = snprintf(out, sizeof(out),
				       "{\"ok\": true, \"serving\": %s, \"ballot\": %u, \"next\": %llu, "
				       "\"takeovers\": %llu, \"requests\": %llu}\n",
				       innet_paxos_leader_serving(l) ? "true" : "false",
				       innet_paxos_leader_ballot(l),
				       (unsigned long long)innet_paxos_leader_next(l),
				       (unsigned long long)st.takeovers, (unsigned long long)st.requests);
		} else {
			len = snprintf(out, sizeof(out), "{\"ok\": false, \"error\": \"unknown request "
				       "(this socket answers: status)\"}\n");
		}
		if (send(s->fd[i], out, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* the client went away: nothing to tell it */
		}
		drop(s, i);
	}
}

void kv_leader_status_close(struct kv_leader_status_srv *s)
{
	for (int i = 0; i < KV_LEADER_STATUS_CLIENTS; i++)
		if (s->fd[i] >= 0)
			drop(s, i);
	if (s->lfd >= 0) {
		close(s->lfd);
		s->lfd = -1;
		unlink(s->path);
	}
}

int kv_leader_status_query(const char *path, struct kv_leader_status *out, char *err,
			   size_t errlen)
{
	if (access(path, F_OK) != 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		return -e;
	}
	json_t *j = innet_ctl_call(path, "status", 5.0, err, errlen);
	if (j == NULL)
		return -errno;
	out->serving = json_is_true(json_object_get(j, "serving"));
	out->ballot = (uint32_t)json_integer_value(json_object_get(j, "ballot"));
	out->next = (uint64_t)json_integer_value(json_object_get(j, "next"));
	out->takeovers = (uint64_t)json_integer_value(json_object_get(j, "takeovers"));
	out->requests = (uint64_t)json_integer_value(json_object_get(j, "requests"));
	json_decref(j);
	return 0;
}

uint32_t kv_leader_round_load(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long r = 0;
	if (f == NULL)
		return 0;
	if (fscanf(f, "%lu", &r) != 1)
		r = 0;
	fclose(f);
	return r > 0xffffff ? 0xffffff : (uint32_t)r;
}

int kv_leader_round_store(const char *path, uint32_t ballot, char *err, size_t errlen)
{
	char tmp[PATH_MAX + 160];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc;
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	char line[32];
	int n = snprintf(line, sizeof(line), "%u\n", ballot >> 8);
	rc = write(fd, line, (size_t)n) == n && fsync(fd) == 0 ? 0 : -EIO;
	close(fd);
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
out:
	if (rc != 0)
		snprintf(err, errlen, "cannot store round %u in %s: %s", ballot >> 8, path,
			 strerror(-rc));
	return rc;
}
