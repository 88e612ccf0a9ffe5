/*
 * test_learnfilter.c — the learner filter and the library's side of it.
 *
 *   library (no root): a learner on loopback gets hand-made 2Bs; the quorum
 *     mark (PAXOS_F_QUORUM) makes one 2B choose an instance only after
 *     innet_paxos_trust_filter(p, true) — a forged mark on a learner that did
 *     not attach the filter counts as one vote, as any 2B;
 *   eBPF (root: BPF_PROG_TEST_RUN): frames in, verdict and frame out — one
 *     2B per (instance, ballot) goes up marked, the ones before it and after
 *     it are dropped, lower ballots and older instances pass unmarked, a
 *     forged mark is cleared, other packets pass untouched, the UDP checksum
 *     stays valid; mode redundant drops only the ones after the quorum.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "testutil.h"
#include "innet/consensus.h"
#include "consensus/wire.h"
#include "consensus/learnfilter.h"
#include "engine/bpf_objects.h"

#define LOOP 0x7f000001u

/* ---- library -------------------------------------------------------------- */

static uint64_t got_n, got_inst[16], got_req[16];

static void deliver(void *arg, uint64_t inst, uint64_t req, const uint8_t *v, uint32_t len)
{
	if (got_n < 16) {
		got_inst[got_n] = inst;
		got_req[got_n] = req;
	}
	got_n++;
}

static struct innet_paxos *learner(int *tx, struct sockaddr_in *to)
{
	struct innet_paxos_conf c;
	memset(&c, 0, sizeof(c));
	c.bind_ip = LOOP;
	c.bind_udp = 0;
	c.coordinator = (struct innet_addr){ .ip = LOOP, .udp = 9 };
	c.n_acceptors = 3;
	for (uint32_t i = 0; i < 3; i++)
		c.acceptors[i] = (struct innet_addr){ .ip = LOOP, .udp = 9 };
	c.recover_ms = 60000;   /* no RECOVER during the test */
	c.learner_id = INNET_PAXOS_NO_TRIM;
	c.deliver = deliver;
	char err[256];
	struct innet_paxos *p = innet_paxos_create(&c, err, sizeof(err));
	assert_non_null(p);
	socklen_t sl = sizeof(*to);
	assert_int_equal(getsockname(innet_paxos_fd(p), (struct sockaddr *)to, &sl), 0);
	*tx = socket(AF_INET, SOCK_DGRAM, 0);
	assert_true(*tx >= 0);
	got_n = 0;
	return p;
}

static void send_2b(int tx, const struct sockaddr_in *to, uint16_t acc, uint64_t inst,
		    uint32_t ballot, uint8_t flags)
{
	struct paxos_msg m;
	memset(&m, 0, PAXOS_HDR_LEN + 4);
	m.h.magic = INNET_MAGIC;
	m.h.version = INNET_VERSION;
	m.h.service = INNET_SVC_PAXOS;
	m.h.flags = flags;
	m.p.type = PAXOS_2B;
	m.p.node = htons(acc);
	m.p.ballot = htonl(ballot);
	m.p.vballot = htonl(ballot);
	m.p.vlen = htons(4);
	m.p.instance = htobe64(inst);
	m.p.req_id = htobe64((7ull << 32) | (inst + 1));
	memcpy(m.value, "abcd", 4);
	assert_int_equal(sendto(tx, &m, PAXOS_HDR_LEN + 4, 0, (const struct sockaddr *)to, sizeof(*to)),
			 PAXOS_HDR_LEN + 4);
}

static void drain(struct innet_paxos *p)
{
	for (int i = 0; i < 5; i++)
		innet_paxos_step(p, 20);
}

static void test_mark_untrusted(void **state)
{
	int tx;
	struct sockaddr_in to;
	struct innet_paxos *p = learner(&tx, &to);
	/* A forged mark: one vote, no more. */
	send_2b(tx, &to, 0, 0, 0x100, PAXOS_F_QUORUM);
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 0);
	assert_int_equal(got_n, 0);
	send_2b(tx, &to, 0, 0, 0x100, PAXOS_F_QUORUM);   /* the same acceptor again */
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 0);
	send_2b(tx, &to, 1, 0, 0x100, 0);                 /* a majority: 2 of 3 */
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 1);
	assert_int_equal(got_n, 1);
	/* Trusted once, then not: the mark counts only while trusted. */
	innet_paxos_trust_filter(p, true);
	innet_paxos_trust_filter(p, false);
	send_2b(tx, &to, 2, 1, 0x100, PAXOS_F_QUORUM);
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 1);
	close(tx);
	innet_paxos_destroy(p);
}

static void test_mark_trusted(void **state)
{
	int tx;
	struct sockaddr_in to;
	struct innet_paxos *p = learner(&tx, &to);
	innet_paxos_trust_filter(p, true);
	send_2b(tx, &to, 2, 0, 0x100, PAXOS_F_QUORUM);    /* the filter saw a majority */
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 1);
	assert_int_equal(got_n, 1);
	assert_int_equal(got_inst[0], 0);
	assert_int_equal(got_req[0], (7ull << 32) | 1);
	/* Unmarked 2Bs (passed up by the filter: an older ballot, a large
	 * value) are counted by the library as before. */
	send_2b(tx, &to, 0, 1, 0x100, 0);
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 1);
	send_2b(tx, &to, 1, 1, 0x100, 0);
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 2);
	/* A marked 2B at a lower ballot than one seen: chosen there, so it is
	 * this value (Paxos), delivered once. */
	send_2b(tx, &to, 0, 2, 0x200, 0);
	send_2b(tx, &to, 1, 2, 0x100, PAXOS_F_QUORUM);
	send_2b(tx, &to, 2, 2, 0x100, PAXOS_F_QUORUM);    /* a duplicate quorum: ignored */
	drain(p);
	assert_int_equal(innet_paxos_delivered(p), 3);
	assert_int_equal(got_n, 3);
	struct innet_paxos_stats st;
	innet_paxos_get_stats(p, &st);
	assert_int_equal(st.delivered, 3);
	assert_int_equal(st.duplicates, 0);
	close(tx);
	innet_paxos_destroy(p);
}

/* ---- eBPF ----------------------------------------------------------------- */

struct frame {
	uint8_t eth[14];
	struct {
		uint8_t vihl, tos;
		uint16_t len, id, frag;
		uint8_t ttl, proto;
		uint16_t check;
		uint32_t src, dst;
	} __attribute__((packed)) ip;
	struct {
		uint16_t sport, dport, len, check;
	} __attribute__((packed)) udp;
	struct innet_hdr h;
	struct paxos_hdr p;
	uint8_t value[4];
} __attribute__((packed));

static struct bpf_object *lf_obj;

static int lf_load(bool quorum_mark)
{
	if (lf_obj != NULL)
		bpf_object__close(lf_obj);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "innet_learnfilter");
	lf_obj = bpf_object__open_mem(innet_bpf_aux_learnfilter,
				      (size_t)(innet_bpf_aux_learnfilter_end - innet_bpf_aux_learnfilter), &oo);
	assert_non_null(lf_obj);
	struct bpf_map *m;
	bool set = false;
	bpf_object__for_each_map(m, lf_obj) {
		if (strstr(bpf_map__name(m), ".rodata") == NULL)
			continue;
		size_t sz = 0;
		assert_non_null(bpf_map__initial_value(m, &sz));
		assert_true(sz >= sizeof(struct lf_conf));
		uint8_t *v = calloc(1, sz);
		struct lf_conf c = { .port = 34953, .quorum_mark = quorum_mark, .majority = 2 };
		memcpy(v, &c, sizeof(c));
		assert_int_equal(bpf_map__set_initial_value(m, v, sz), 0);
		free(v);
		set = true;
	}
	assert_true(set);
	assert_int_equal(bpf_object__load(lf_obj), 0);
	return bpf_program__fd(bpf_object__find_program_by_name(lf_obj, "innet_learnfilter"));
}

static uint16_t udp_csum(const struct frame *f)
{
	uint32_t sum = 0;
	const uint8_t *b = (const uint8_t *)&f->ip.src;
	for (int i = 0; i < 8; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	sum += 17 + ntohs(f->udp.len);
	b = (const uint8_t *)&f->udp;
	for (uint32_t i = 0; i < ntohs(f->udp.len); i += 2)
		sum += (uint32_t)(b[i] << 8 | (i + 1 < ntohs(f->udp.len) ? b[i + 1] : 0));
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void mk(struct frame *f, uint8_t type, uint16_t acc, uint64_t inst, uint32_t ballot,
	       uint8_t flags, bool csum)
{
	memset(f, 0, sizeof(*f));
	f->eth[12] = 0x08;
	f->ip.vihl = 0x45;
	f->ip.len = htons(sizeof(*f) - 14);
	f->ip.ttl = 64;
	f->ip.proto = 17;
	f->ip.src = htonl(0x7f030001);
	f->ip.dst = htonl(0x7f030002);
	f->udp.sport = htons(34952);
	f->udp.dport = htons(34953);
	f->udp.len = htons(sizeof(*f) - 34);
	f->h = (struct innet_hdr){ .magic = INNET_MAGIC, .version = INNET_VERSION,
				   .service = INNET_SVC_PAXOS, .flags = flags };
	f->p.type = type;
	f->p.node = htons(acc);
	f->p.ballot = htonl(ballot);
	f->p.vballot = htonl(ballot);
	f->p.vlen = htons(4);
	f->p.instance = htobe64(inst);
	memcpy(f->value, "abcd", 4);
	if (csum) {
		f->udp.check = htons(udp_csum(f));
		if (f->udp.check == 0)
			f->udp.check = 0xffff;
	}
}

/* Run the filter on f; the verdict, with f replaced by the frame out. */
static int run(int fd, struct frame *f)
{
	struct frame out;
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f, .data_size_in = sizeof(*f),
		    .data_out = &out, .data_size_out = sizeof(out), .repeat = 1);
	assert_int_equal(bpf_prog_test_run_opts(fd, &o), 0);
	assert_int_equal(o.data_size_out, sizeof(out));
	*f = out;
	return (int)o.retval;
}

static int run2b(int fd, uint16_t acc, uint64_t inst, uint32_t ballot, uint8_t flags, uint8_t *flags_out)
{
	struct frame f;
	mk(&f, PAXOS_2B, acc, inst, ballot, flags, false);
	int v = run(fd, &f);
	*flags_out = f.h.flags;
	return v;
}

static void need_root(void)
{
	if (geteuid() != 0)
		test_skip("needs root (loads the learner filter's eBPF program)");
}

static void test_bpf_quorum(void **state)
{
	need_root();
	int fd = lf_load(true);
	uint8_t fl;
	assert_int_equal(run2b(fd, 0, 5, 0x100, 0, &fl), XDP_DROP);                /* before */
	assert_int_equal(run2b(fd, 0, 5, 0x100, PAXOS_F_QUORUM, &fl), XDP_DROP);   /* duplicate */
	assert_int_equal(run2b(fd, 1, 5, 0x100, 0, &fl), XDP_PASS);                /* the quorum */
	assert_int_equal(fl, PAXOS_F_QUORUM);
	assert_int_equal(run2b(fd, 2, 5, 0x100, 0, &fl), XDP_DROP);                /* redundant */
	assert_int_equal(run2b(fd, 1, 5, 0x100, 0, &fl), XDP_DROP);                /* again */
	/* A higher ballot starts over (the library's phase 2 of recovery). */
	assert_int_equal(run2b(fd, 2, 5, 0x200, 0, &fl), XDP_DROP);
	assert_int_equal(run2b(fd, 0, 5, 0x200, 0, &fl), XDP_PASS);
	assert_int_equal(fl, PAXOS_F_QUORUM);
	/* A lower ballot, forged mark: up, unmarked, for the library to count. */
	assert_int_equal(run2b(fd, 1, 5, 0x100, PAXOS_F_QUORUM | PAXOS_F_RANGE, &fl), XDP_PASS);
	assert_int_equal(fl, PAXOS_F_RANGE);
	/* An older instance than the slot's (5 + LF_SLOTS took it): up, unmarked. */
	assert_int_equal(run2b(fd, 0, 5 + LF_SLOTS, 0x100, 0, &fl), XDP_DROP);
	assert_int_equal(run2b(fd, 2, 5, 0x200, PAXOS_F_QUORUM, &fl), XDP_PASS);
	assert_int_equal(fl, 0);
	/* Not counted, mark cleared: status empty, acceptor id >= 64. */
	struct frame f;
	mk(&f, PAXOS_2B, 0, 9, 0x100, PAXOS_F_QUORUM, false);
	f.p.status = PAXOS_ST_EMPTY;
	assert_int_equal(run(fd, &f), XDP_PASS);
	assert_int_equal(f.h.flags, 0);
	assert_int_equal(run2b(fd, 64, 9, 0x100, PAXOS_F_QUORUM, &fl), XDP_PASS);
	assert_int_equal(fl, 0);
	/* Other packets: untouched. */
	mk(&f, PAXOS_1B, 0, 9, 0x100, PAXOS_F_QUORUM, false);
	assert_int_equal(run(fd, &f), XDP_PASS);
	assert_int_equal(f.h.flags, PAXOS_F_QUORUM);
	mk(&f, PAXOS_2B, 0, 9, 0x100, PAXOS_F_QUORUM, false);
	f.udp.dport = htons(34952);
	assert_int_equal(run(fd, &f), XDP_PASS);
	assert_int_equal(f.h.flags, PAXOS_F_QUORUM);
	/* The checksum stays valid through the mark, set or cleared. */
	mk(&f, PAXOS_2B, 0, 11, 0x100, 0, true);
	assert_int_equal(udp_csum(&f), 0);   /* the test's own sum agrees */
	assert_int_equal(run(fd, &f), XDP_DROP);
	mk(&f, PAXOS_2B, 1, 11, 0x100, 0, true);
	assert_int_equal(run(fd, &f), XDP_PASS);
	assert_int_equal(f.h.flags, PAXOS_F_QUORUM);
	assert_int_equal(udp_csum(&f), 0);
	mk(&f, PAXOS_2B, 1, 11, 0x80, PAXOS_F_QUORUM, true);
	assert_int_equal(run(fd, &f), XDP_PASS);
	assert_int_equal(f.h.flags, 0);
	assert_int_equal(udp_csum(&f), 0);
	/* The counters. */
	struct lf_stats s[256];
	int ncpu = libbpf_num_possible_cpus();
	assert_true(ncpu > 0 && ncpu <= 256);
	uint32_t zero = 0;
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(bpf_object__find_map_by_name(lf_obj, "lf_stats")),
					     &zero, s), 0);
	struct lf_stats t = { 0 };
	for (int c = 0; c < ncpu; c++) {
		t.passed_quorum += s[c].passed_quorum;
		t.dropped_before += s[c].dropped_before;
		t.dropped_redundant += s[c].dropped_redundant;
		t.mark_cleared += s[c].mark_cleared;
	}
	assert_int_equal(t.passed_quorum, 3);
	assert_int_equal(t.dropped_before, 5);
	assert_int_equal(t.dropped_redundant, 2);
	assert_int_equal(t.mark_cleared, 6);
}

static void test_bpf_redundant(void **state)
{
	need_root();
	int fd = lf_load(false);
	uint8_t fl;
	assert_int_equal(run2b(fd, 0, 3, 0x100, PAXOS_F_QUORUM, &fl), XDP_PASS);
	assert_int_equal(fl, 0);
	assert_int_equal(run2b(fd, 1, 3, 0x100, 0, &fl), XDP_PASS);   /* the quorum: unmarked */
	assert_int_equal(fl, 0);
	assert_int_equal(run2b(fd, 2, 3, 0x100, 0, &fl), XDP_DROP);
}

static int teardown(void **state)
{
	if (lf_obj != NULL)
		bpf_object__close(lf_obj);
	lf_obj = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mark_untrusted),
		cmocka_unit_test(test_mark_trusted),
		cmocka_unit_test_teardown(test_bpf_quorum, teardown),
		cmocka_unit_test_teardown(test_bpf_redundant, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
