/*
 * test_xdp_drops.c — every frame the XDP engine (src/targets/xdp/engine.bpf.h)
 * drops outside a handler's verdict is counted under a name: one program's
 * eBPF object (forward's, as the build embedded it) loaded here at its
 * placeholder sizes for a switch of two ports (0: a UDP port, 1: a raw
 * port), its maps filled by hand, and each path run with BPF_PROG_TEST_RUN:
 *
 *   innet_xdp_main        a frame on the raw port, and no raw program  no_raw_program (port 1)
 *   innet_xdp_egress_test a multicast copy without its metadata        egress_meta (port 0)
 *                         a copy too short for its headers             egress_short (port 0)
 *                         a copy leaving by a port the switch lacks    the program's bad_port
 *
 * (The kernel refusing to move a frame's head or tail, `adjust`, and a
 * config map without its element, `no_conf`, cannot be brought about from
 * outside; innet_xdp_egress, the devmap program, cannot be test-run: it
 * shares the egress_test program's paths.) And the names are the public
 * ones, innet_xdp_drop_name. Root only (BPF); skipped (77) otherwise.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "testutil.h"
#include "innet/switch.h"
#include "engine/bpf_objects.h"
#include "targets/xdp/xdp_abi.h"

static struct bpf_object *obj;
static int ncpus;

static int map(const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	assert_non_null(m);
	return bpf_map__fd(m);
}

static int prog(const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(obj, name);
	assert_non_null(p);
	return bpf_program__fd(p);
}

static int setup(void **state)
{
	libbpf_set_print(NULL);
	ncpus = libbpf_num_possible_cpus();
	const struct innet_bpf_object *bo = innet_bpf_object_find("forward");
	if (bo == NULL || bo->start == NULL || ncpus <= 0)
		return -1;
	obj = bpf_object__open_mem(bo->start, (size_t)(bo->end - bo->start), NULL);
	if (obj == NULL)
		return -1;
	struct innet_xdp_layout L;
	memset(&L, 0, sizeof(L));
	L.n_ports = 2;
	L.n_udp = 1;
	L.first_udp = 9000;
	L.reg_ops_budget = UINT32_MAX;
	L.test_mode = 1;
	if (innet_bpf_set_rodata(obj, ".rodata.innet", &L, sizeof(L)) != 0 || bpf_object__load(obj) != 0) {
		fprintf(stderr, "test_xdp_drops: cannot load forward's eBPF object\n");
		return -1;
	}
	/* port 0: a UDP port; port 1: raw; test runs arrive on lo = port 1 */
	struct innet_xdp_port p0 = { .ip = 0x0a5d0102, .peer_ip = 0x0a5d0101, .has_peer_mac = 1,
				     .mac = { 2, 0, 0, 0, 0, 2 }, .peer_mac = { 2, 0, 0, 0, 0, 1 },
				     .mtu = 1500 };
	struct innet_xdp_port p1 = { .raw = 1, .mtu = 1500 };
	uint32_t k0 = 0, k1 = 1, lo = if_nametoindex("lo");
	if (bpf_map_update_elem(map("innet_ports"), &k0, &p0, BPF_ANY) != 0 ||
	    bpf_map_update_elem(map("innet_ports"), &k1, &p1, BPF_ANY) != 0 ||
	    bpf_map_update_elem(map("innet_if2port"), &lo, &k1, BPF_ANY) != 0)
		return -1;
	return 0;   /* innet_udp2prog stays zero: no program at all, the raw one neither */
}

static int teardown(void **state)
{
	bpf_object__close(obj);
	return 0;
}

/* A per-CPU value summed over the CPUs: field at byte off, u64. */
static uint64_t percpu_sum(int fd, uint32_t key, size_t vsize, size_t off)
{
	size_t stride = (vsize + 7) & ~(size_t)7;
	uint8_t *buf = calloc((size_t)ncpus, stride);
	assert_non_null(buf);
	assert_int_equal(bpf_map_lookup_elem(fd, &key, buf), 0);
	uint64_t sum = 0;
	for (int c = 0; c < ncpus; c++) {
		uint64_t v;
		memcpy(&v, buf + (size_t)c * stride + off, sizeof(v));
		sum += v;
	}
	free(buf);
	return sum;
}

static uint64_t port_drop(uint32_t port, unsigned reason)
{
	return percpu_sum(map("innet_port_stats"), port, sizeof(struct innet_xdp_port_stats),
			  offsetof(struct innet_xdp_port_stats, drop) + reason * sizeof(uint64_t));
}

/* Run program fd on data (meta bytes of metadata in front); its XDP action. */
static uint32_t run(int fd, const void *data, uint32_t len, uint32_t meta)
{
	uint8_t out[512];
	struct xdp_md in = { .data = meta, .data_end = len };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = data, .data_size_in = len, .data_out = out,
		    .data_size_out = sizeof(out), .ctx_in = &in, .ctx_size_in = sizeof(in),
		    .repeat = 1);
	int rc = bpf_prog_test_run_opts(fd, &o);
	if (rc != 0)
		fail_msg("BPF_PROG_TEST_RUN: %s", strerror(errno));
	return o.retval;
}

/* The egress test program takes its port from the trace map (every CPU's). */
static void egress_port(uint16_t port)
{
	size_t stride = (sizeof(struct innet_xdp_trace) + 7) & ~(size_t)7;
	uint8_t *v = calloc((size_t)ncpus, stride);
	assert_non_null(v);
	for (int c = 0; c < ncpus; c++)
		((struct innet_xdp_trace *)(v + (size_t)c * stride))->port = port;
	uint32_t zero = 0;
	assert_int_equal(bpf_map_update_elem(map("innet_trace"), &zero, v, BPF_ANY), 0);
	free(v);
}

static void test_names(void **state)
{
	static const char *const want[INNET_XDP_DROP_COUNT] = {
		"no_raw_program", "adjust", "no_conf", "egress_meta", "egress_short",
	};
	for (unsigned k = 0; k < INNET_XDP_DROP_COUNT; k++)
		assert_string_equal(innet_xdp_drop_name(k), want[k]);
	assert_null(innet_xdp_drop_name(INNET_XDP_DROP_COUNT));
}

static void test_raw_port_without_program(void **state)
{
	uint8_t frame[60] = { 2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x88, 0xb5 };
	uint64_t before = port_drop(1, INNET_XDP_DROP_NO_RAW_PROGRAM);
	assert_int_equal(run(prog("innet_xdp_main"), frame, sizeof(frame), 0), XDP_DROP);
	assert_int_equal(run(prog("innet_xdp_main"), frame, sizeof(frame), 0), XDP_DROP);
	assert_int_equal(port_drop(1, INNET_XDP_DROP_NO_RAW_PROGRAM), before + 2);
	assert_int_equal(port_drop(0, INNET_XDP_DROP_NO_RAW_PROGRAM), 0);
}

static void test_egress_without_metadata(void **state)
{
	uint8_t frame[60] = { 0 };
	egress_port(0);
	uint64_t before = port_drop(0, INNET_XDP_DROP_EGRESS_META);
	assert_int_equal(run(prog("innet_xdp_egress_test"), frame, sizeof(frame), 0), XDP_DROP);
	assert_int_equal(port_drop(0, INNET_XDP_DROP_EGRESS_META), before + 1);
}

/* A copy with its metadata in front: len payload bytes, frame_len in all. */
static uint32_t copy_with_meta(uint8_t *buf, uint32_t frame_len)
{
	struct innet_xdp_meta m;
	memset(&m, 0, sizeof(m));
	m.magic = INNET_XDP_META_MAGIC;
	m.len = 4;
	m.dst_udp = 9000;
	memcpy(buf, &m, sizeof(m));
	memset(buf + sizeof(m), 0xab, frame_len);
	return (uint32_t)sizeof(m) + frame_len;
}

static void test_egress_short_copy(void **state)
{
	uint8_t buf[256];
	uint32_t n = copy_with_meta(buf, 20);   /* under Ethernet + IPv4 + UDP */
	egress_port(0);
	uint64_t before = port_drop(0, INNET_XDP_DROP_EGRESS_SHORT);
	assert_int_equal(run(prog("innet_xdp_egress_test"), buf, n, sizeof(struct innet_xdp_meta)),
			 XDP_DROP);
	assert_int_equal(port_drop(0, INNET_XDP_DROP_EGRESS_SHORT), before + 1);
	/* the same copy long enough leaves, rewritten */
	n = copy_with_meta(buf, INNET_XDP_HDR_LEN + 4);
	assert_int_equal(run(prog("innet_xdp_egress_test"), buf, n, sizeof(struct innet_xdp_meta)),
			 XDP_PASS);
	assert_int_equal(port_drop(0, INNET_XDP_DROP_EGRESS_SHORT), before + 1);
}

static void test_egress_no_such_port(void **state)
{
	uint8_t buf[256];
	uint32_t n = copy_with_meta(buf, INNET_XDP_HDR_LEN + 4);
	egress_port(5);   /* the switch has 2 */
	size_t off = offsetof(struct innet_xdp_stats, drops) + INNET_DROP_BAD_PORT * sizeof(uint64_t);
	uint64_t before = percpu_sum(map("innet_stats"), 0, sizeof(struct innet_xdp_stats), off);
	assert_int_equal(run(prog("innet_xdp_egress_test"), buf, n, sizeof(struct innet_xdp_meta)),
			 XDP_DROP);
	assert_int_equal(percpu_sum(map("innet_stats"), 0, sizeof(struct innet_xdp_stats), off),
			 before + 1);
}

int main(void)
{
	if (geteuid() != 0) {
		printf("skip: needs root (BPF_PROG_TEST_RUN)\n");
		return 77;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_raw_port_without_program),
		cmocka_unit_test(test_egress_without_metadata),
		cmocka_unit_test(test_egress_short_copy),
		cmocka_unit_test(test_egress_no_such_port),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
