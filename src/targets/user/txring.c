/*
 * txring.c — the worker's transmit ring: one io_uring per worker, used to
 * hand a whole flush (many sockets, many messages) to the kernel in ONE
 * system call.
 *
 * Why: on a small, shared machine every datagram a worker sends on loopback
 * wakes its receiver (a DNS server, a client), and the wake-up is "sync": the
 * receiver is placed on the worker's CPU and preempts the worker at the next
 * preemption point — the return from each sendmmsg, or the cond_resched()
 * that sendmmsg runs between messages. A flush of N sends to N different
 * sockets (a load balancer's NAT ports) then becomes N ping-pongs: the
 * receiver runs for one datagram, sleeps, the worker resumes for one more.
 * Submitted through io_uring, the sends of a flush are issued inline, in
 * order, inside one io_uring_enter, with no preemption point between them:
 * each receiver wakes once per flush and finds all of its datagrams.
 *
 *   flush: tx entries ─► messages (GSO runs as in sendmmsg) ─► SQEs (SENDMSG,
 *          MSG_DONTWAIT: never queued for later) ─► io_uring_enter(submit n,
 *          wait n) ─► CQEs: sent / error per message
 *
 * Ring layout (mmap'd from the kernel; see io_uring_setup(2)):
 *
 *   SQ ring: head tail mask ... array[entries]    SQEs: sqe[entries] (64 B each)
 *   CQ ring: head tail mask ... cqe[2 x entries]  (16 B each)
 *
 * Every message's buffers (msghdr, iovec, address, cmsg) live in the worker
 * and stay valid until its completion is reaped, which happens before the
 * flush returns. MSG_DONTWAIT makes a full socket buffer complete with
 * -EAGAIN (counted as a tx error, as sendmmsg's would be) instead of arming a
 * poll that would outlive the buffers. Without io_uring (old kernel, seccomp:
 * setup fails) the worker keeps using sendmmsg; INNET_TX_URING=0 in the
 * environment turns the ring off for comparisons.
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "targets/user/user_pvt.h"

struct innet_txring {
	int fd;
	uint32_t entries;
	uint32_t *sq_tail, *sq_mask, *sq_array;
	uint32_t *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq_map, *cq_map;
	size_t sq_len, cq_len, sqes_len;
};

struct innet_txring *innet_txring_new(uint32_t entries)
{
	const char *env = getenv("INNET_TX_URING");
	if (env != NULL && strcmp(env, "0") == 0)
		return NULL;
	struct innet_txring *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
	int fd = (int)syscall(__NR_io_uring_setup, entries, &p);
	if (fd < 0) {
		memset(&p, 0, sizeof(p));
		fd = (int)syscall(__NR_io_uring_setup, entries, &p);
	}
	if (fd < 0) {
		free(r);
		return NULL;
	}
	r->fd = fd;
	r->entries = p.sq_entries;
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(uint32_t);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	bool single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single && r->cq_len > r->sq_len)
		r->sq_len = r->cq_len;
	r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
			 IORING_OFF_SQ_RING);
	if (r->sq_map == MAP_FAILED)
		goto fail;
	if (single) {
		r->cq_map = r->sq_map;
	} else {
		r->cq_map = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
				 IORING_OFF_CQ_RING);
		if (r->cq_map == MAP_FAILED)
			goto fail;
	}
	r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
		       IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		goto fail;
	uint8_t *sq = r->sq_map, *cq = r->cq_map;
	r->sq_tail = (uint32_t *)(sq + p.sq_off.tail);
	r->sq_mask = (uint32_t *)(sq + p.sq_off.ring_mask);
	r->sq_array = (uint32_t *)(sq + p.sq_off.array);
	r->cq_head = (uint32_t *)(cq + p.cq_off.head);
	r->cq_tail = (uint32_t *)(cq + p.cq_off.tail);
	r->cq_mask = (uint32_t *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return r;
fail:
	innet_txring_free(r);
	return NULL;
}

void innet_txring_free(struct innet_txring *r)
{
	if (r == NULL)
		return;
	if (r->sqes != NULL && r->sqes != MAP_FAILED)
		munmap(r->sqes, r->sqes_len);
	if (r->cq_map != NULL && r->cq_map != MAP_FAILED && r->cq_map != r->sq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map != NULL && r->sq_map != MAP_FAILED)
		munmap(r->sq_map, r->sq_len);
	close(r->fd);
	free(r);
}

uint32_t innet_txring_size(const struct innet_txring *r)
{
	return r->entries;
}

/* Send n messages (n <= the ring's size): msgs[i] on fds[i], in order. res[i]
 * gets the result of each (bytes sent, or -errno). 0, or -errno if the ring
 * failed (then the caller sends what has no result yet, res[i] == INT32_MIN,
 * another way). */
int innet_txring_send(struct innet_txring *r, const int *fds, struct mmsghdr *msgs, uint32_t n,
		      int32_t *res)
{
	uint32_t tail = *r->sq_tail, mask = *r->sq_mask;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t idx = (tail + i) & mask;
		struct io_uring_sqe *sqe = &r->sqes[idx];
		memset(sqe, 0, sizeof(*sqe));
		sqe->opcode = IORING_OP_SENDMSG;
		sqe->fd = fds[i];
		sqe->addr = (uint64_t)(uintptr_t)&msgs[i].msg_hdr;
		sqe->len = 1;
		sqe->msg_flags = MSG_DONTWAIT;
		sqe->user_data = i;
		r->sq_array[idx] = idx;
		res[i] = INT32_MIN;
	}
	__atomic_store_n(r->sq_tail, tail + n, __ATOMIC_RELEASE);
	uint32_t to_submit = n, done = 0;
	while (done < n) {
		int s = (int)syscall(__NR_io_uring_enter, r->fd, to_submit, n - done,
				     IORING_ENTER_GETEVENTS, NULL, 0);
		if (s < 0 && errno != EINTR && errno != EAGAIN && errno != EBUSY)
			return -errno;
		if (s > 0)
			to_submit -= (uint32_t)s < to_submit ? (uint32_t)s : to_submit;
		uint32_t head = *r->cq_head;
		uint32_t ctail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
		for (; head != ctail; head++) {
			const struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
			if (c->user_data < n && res[c->user_data] == INT32_MIN) {
				res[c->user_data] = c->res;
				done++;
			}
		}
		__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	}
	return 0;
}
