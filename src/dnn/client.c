/*
 * client.c — the DNN inference client (innet/dnn.h, "The client"): a model
 * deployed on a running fabric by `innet dnn compile`, learnt from the
 * derived topology — the dnn_layer instances' settings name the model, the
 * stages' nodes and the pipelines — and inputs run through it.
 *
 *   host H ──ACT chunks (stage 0's input)──▶ leaf ─▶ stage 0 pipelines ─▶ ... ─▶ last stage
 *          ◀──RESULT packets, one per last-stage pipeline (logits) ─────────────────┘
 *
 * It sends each input's stage-0 packets from H's address (UDP udp_base) to
 * every stage-0 pipeline through H's leaf, keeps up to `window` inferences in
 * flight, and collects the RESULT packets; an inference not answered within
 * the timeout is retried with a new id (its slots in the fabric are reclaimed
 * by their timers); answers to its last four tries still count, pipeline by
 * pipeline (same input, same logits), and its latency is measured from the
 * first try.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "dnn/wire.h"
#include "innet/dnn.h"
#include "innet/topology.h"

struct innet_dnn_client {
	struct innet_topology *t;
	struct innet_dnn_model m;
	struct innet_dnn_plan p;
	uint16_t nodes[INNET_DNN_MAX_STAGES];
	uint16_t udp;
	uint16_t host_node;
	uint32_t host_ip, leaf_ip;   /* the client's address and its leaf port's */
};

struct innet_dnn_client *innet_dnn_client_open(const char *topo, const char *host, char *err,
					       size_t errlen)
{
	struct innet_dnn_client *d = calloc(1, sizeof(*d));
	if (d == NULL) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	int e = EINVAL;
	d->t = innet_topology_load(topo, err, errlen);
	if (d->t == NULL) {
		e = errno;
		free(d);
		errno = e;
		return NULL;
	}
	json_error_t jerr;
	json_t *root = json_load_file(topo, 0, &jerr), *args = NULL;
	size_t i, j;
	json_t *sw, *pr;
	json_array_foreach(json_object_get(root, "switches"), i, sw) {
		json_array_foreach(json_object_get(sw, "programs"), j, pr) {
			json_t *a = json_object_get(pr, "args");
			if (args == NULL && json_is_string(json_object_get(pr, "program")) &&
			    !strcmp(json_string_value(json_object_get(pr, "program")), "dnn_layer") &&
			    json_object_get(a, "model") != NULL)
				args = a;
		}
	}
	if (args == NULL) {
		snprintf(err, errlen, "%s runs no dnn_layer stage; make it with 'innet dnn compile "
			 "MODEL TOPOLOGY --out FILE'", topo);
		goto fail;
	}
	const char *model = json_string_value(json_object_get(args, "model"));
	if (innet_dnn_model_load(model, &d->m, err, errlen) != 0)
		goto fail;
	if (innet_dnn_plan_build(&d->m, (uint32_t)json_integer_value(json_object_get(args, "pipes")),
				 (uint32_t)json_integer_value(json_object_get(args, "max_vals")), &d->p,
				 err, errlen) != 0)
		goto fail;
	if (d->m.n_classes > INNET_DNN_CLIENT_MAX_CLASSES) {
		snprintf(err, errlen, "the model has %u classes; the client handles up to %u",
			 d->m.n_classes, INNET_DNN_CLIENT_MAX_CLASSES);
		goto fail;
	}
	json_t *nodes = json_object_get(args, "nodes"), *n;
	json_array_foreach(nodes, i, n)
		if (i < INNET_DNN_MAX_STAGES)
			d->nodes[i] = (uint16_t)json_integer_value(n);
	d->udp = (uint16_t)json_integer_value(json_object_get(args, "udp_base"));
	int h = innet_topology_find(d->t, host);
	if (h < 0 || d->t->nodes[h].kind != INNET_TOPO_HOST) {
		snprintf(err, errlen, "--from '%s' is not a host of %s", host, topo);
		goto fail;
	}
	d->host_node = d->t->nodes[h].node_id;
	d->host_ip = d->t->nodes[h].addr;
	const struct innet_topo_node *hn = &d->t->nodes[h];
	for (uint32_t k = 0; k < hn->n_links && d->leaf_ip == 0; k++) {
		const struct innet_topo_link *l = &d->t->links[hn->links[k]];
		uint32_t other = l->a == (uint32_t)h ? l->b : l->a;
		uint32_t port = l->a == (uint32_t)h ? l->b_port : l->a_port;
		if (d->t->nodes[other].kind == INNET_TOPO_SWITCH)
			d->leaf_ip = d->t->nodes[other].conf->ports[port].ip;
	}
	if (d->leaf_ip == 0) {
		snprintf(err, errlen, "host %s is not linked to a switch", host);
		goto fail;
	}
	json_decref(root);
	return d;
fail:
	json_decref(root);
	innet_dnn_client_close(d);
	errno = e;
	return NULL;
}

void innet_dnn_client_close(struct innet_dnn_client *d)
{
	if (d == NULL)
		return;
	innet_dnn_plan_free(&d->p);
	innet_dnn_model_free(&d->m);
	innet_topology_free(d->t);
	free(d);
}

const struct innet_dnn_model *innet_dnn_client_model(const struct innet_dnn_client *d)
{
	return &d->m;
}

struct request {
	uint32_t id;             /* current inference id; 0 = not in flight */
	uint32_t old_ids[4];     /* the ids of the last tries: their answers still count */
	uint64_t first_ns;       /* first try sent (latency is measured from here) */
	uint64_t sent_ns;        /* this try sent */
	uint32_t pipes_seen;     /* bitmap of last-stage pipelines answered */
	bool done;
};

/* The next inference id (never 0). */
static uint32_t take_id(uint32_t *next)
{
	if (*next == 0)
		*next = 1;
	return (*next)++;
}

static int send_input(int fd, const struct innet_dnn_client *d, uint32_t id, const int8_t *input)
{
	const struct innet_dnn_stage *s0 = &d->p.stages[0];
	uint8_t buf[INNET_DNN_HDRS_LEN + 1024];
	struct innet_hdr *h = (struct innet_hdr *)buf;
	struct innet_dnn_hdr *dh = (struct innet_dnn_hdr *)(h + 1);
	*h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION, .service = INNET_SVC_DNN,
				 .dst_node = htons(d->nodes[0]), .src_node = htons(d->host_node) };
	for (uint32_t c = 0; c < s0->n_chunks; c++) {
		*dh = (struct innet_dnn_hdr){ .op = INNET_DNN_OP_ACT, .stage = 0,
					      .client_node = htons(d->host_node), .infer_id = htonl(id),
					      .model = htonl(d->m.crc), .seq = htons((uint16_t)c),
					      .n = htons((uint16_t)s0->chunks[c].n),
					      .offset = htonl(s0->chunks[c].offset) };
		memcpy(buf + INNET_DNN_HDRS_LEN, input + s0->chunks[c].offset, s0->chunks[c].n);
		for (uint32_t q = 0; q < s0->n_pipes; q++) {
			struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(d->udp + q)),
						  .sin_addr.s_addr = htonl(d->leaf_ip) };
			if (sendto(fd, buf, INNET_DNN_HDRS_LEN + s0->chunks[c].n, 0, (struct sockaddr *)&to,
				   sizeof(to)) < 0)
				return -errno;
		}
	}
	return 0;
}

int innet_dnn_client_run(struct innet_dnn_client *d, const int8_t *const *inputs, uint32_t n,
			 const struct innet_dnn_run_opts *o, struct innet_dnn_result *res,
			 uint64_t *retried, char *err, size_t errlen)
{
	uint32_t window = o && o->window ? o->window : 1;
	uint32_t timeout_ms = o && o->timeout_ms ? o->timeout_ms : 300;
	uint32_t retries = o ? o->retries : 10;
	*retried = 0;
	struct request *rq = calloc(n ? n : 1, sizeof(*rq));
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(d->udp),
				  .sin_addr.s_addr = htonl(d->host_ip) };
	if (rq == NULL || fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0) {
		int e = rq == NULL ? ENOMEM : errno;
		snprintf(err, errlen, "cannot bind %s:%u: %s", inet_ntoa(me.sin_addr), d->udp, strerror(e));
		if (fd >= 0)
			close(fd);
		free(rq);
		return -e;
	}
	const struct innet_dnn_stage *last = &d->p.stages[d->p.n_stages - 1];
	uint32_t all_pipes = (1u << last->n_pipes) - 1;
	uint32_t next = 0, done = 0, in_flight = 0;
	uint32_t id_base = ((uint32_t)innet_now_ns() ^ ((uint32_t)getpid() << 16)) & 0x7fffffffu;
	uint32_t next_id = id_base ? id_base : 1;
	int rc = 0;
	memset(res, 0, (size_t)n * sizeof(*res));
	while (done < n && rc == 0) {
		uint64_t now = innet_now_ns();
		/* (Re)send: new requests up to the window; expired ones with a new id. */
		for (uint32_t i = 0; i < next && rc == 0; i++) {
			struct request *r = &rq[i];
			if (r->done || r->id == 0 || now - r->sent_ns < (uint64_t)timeout_ms * 1000000ull)
				continue;
			if (res[i].tries > retries) {
				snprintf(err, errlen, "input %u: no answer after %u tries", i, res[i].tries);
				rc = -ETIMEDOUT;
				break;
			}
			(*retried)++;
			/* A late answer to an earlier try is as good as one to this try
			 * (same input, same logits): keep the last ids and the pipelines
			 * already answered, so a slow fabric is not outrun by retries. */
			memmove(r->old_ids + 1, r->old_ids, sizeof(r->old_ids) - sizeof(r->old_ids[0]));
			r->old_ids[0] = r->id;
			r->id = take_id(&next_id);
			res[i].tries++;
			r->sent_ns = now;
			rc = send_input(fd, d, r->id, inputs[i]);
		}
		while (next < n && in_flight < window && rc == 0) {
			struct request *r = &rq[next];
			r->id = take_id(&next_id);
			res[next].tries = 1;
			r->sent_ns = r->first_ns = innet_now_ns();
			in_flight++;
			rc = send_input(fd, d, r->id, inputs[next]);
			next++;
		}
		if (rc != 0 && rc != -ETIMEDOUT)
			snprintf(err, errlen, "send: %s", strerror(-rc));
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (rc != 0 || poll(&pfd, 1, 5) <= 0)
			continue;
		uint8_t buf[INNET_PKT_MAX];
		ssize_t got;
		while ((got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
			if ((size_t)got < INNET_DNN_HDRS_LEN || buf[0] != INNET_MAGIC)
				continue;
			const struct innet_dnn_hdr *dh = (const struct innet_dnn_hdr *)(buf + sizeof(struct innet_hdr));
			uint32_t id = ntohl(dh->infer_id), pipe = ntohs(dh->seq), cnt = ntohs(dh->n),
				 off = ntohl(dh->offset);
			if (dh->op != INNET_DNN_OP_RESULT || pipe >= last->n_pipes ||
			    (size_t)got != INNET_DNN_HDRS_LEN + 4ull * cnt || off + cnt > d->m.n_classes)
				continue;
			/* ids are handed out in order: find the request by a scan of the window */
			for (uint32_t i = 0; i < next; i++) {
				struct request *r = &rq[i];
				if (r->done || (r->id != id && r->old_ids[0] != id && r->old_ids[1] != id &&
						 r->old_ids[2] != id && r->old_ids[3] != id))
					continue;
				for (uint32_t k = 0; k < cnt; k++) {
					uint32_t be;
					memcpy(&be, buf + INNET_DNN_HDRS_LEN + 4 * k, 4);
					res[i].logits[off + k] = (int32_t)ntohl(be);
				}
				r->pipes_seen |= 1u << pipe;
				if (r->pipes_seen == all_pipes) {
					r->done = true;
					res[i].latency_ns = innet_now_ns() - r->first_ns;
					done++;
					in_flight--;
				}
				break;
			}
		}
	}
	close(fd);
	free(rq);
	return rc;
}
