/*
 * test_kv_rejoin.c — the acceptor-rejoin protocol (src/consensus/kv_rejoin.c)
 * on examples/kv-faults.json (coordinator switch coord, acceptor switches
 * a0..a2, backup coordinator host b0) with stand-ins for the switches'
 * control sockets and b0's status socket (fake_ctl.h) in a state directory
 * of its own:
 *
 *   a0.sock, a2.sock   the others: hi, trim, promised, inst[ring] (reg read)
 *   a1.sock            the joiner: join_inst, join_ballot, joining (reg write, recorded)
 *   coord.sock         next, ballot
 *   kv-b0.sock         status: serving, ballot, next
 *
 * Cases: J and JB under the coordinator switch; after a takeover (the
 * serving backup's next bounds J); too few acceptors answer (-EAGAIN, the
 * silent one named once); no coordinator in charge (-ESRCH, each one's
 * reason); the joiner refuses a write (-EIO); names that are not acceptors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "testutil.h"
#include "fake_ctl.h"
#include "innet/topology.h"
#include "consensus/kv_rejoin.h"

/* What one stand-in answers. */
struct fake_sw {
	const char *name;
	uint64_t hi, trim, promised, inst, next, ballot;  /* registers (their maximum) */
	bool serving;                                     /* b0's status */
	bool refuse_writes;
	char writes[256];                                 /* "reg=value " ... */
};

static char dir[64], topo_path[128];
static struct innet_topology *topo;
static struct fake_sw sws[5];
static struct fake_ctl fakes[5];
static bool started[5];
static char says[2048];

static const char *answer(struct fake_ctl *f, const char *line, char *out, size_t outlen)
{
	struct fake_sw *s = f->arg;
	char prog[64], reg[64];
	unsigned long long first, n, v;
	if (!strcmp(line, "status")) {
		snprintf(out, outlen, "{\"ok\": true, \"serving\": %s, \"ballot\": %llu, \"next\": %llu, "
			 "\"takeovers\": 1, \"requests\": 0}", s->serving ? "true" : "false",
			 (unsigned long long)s->ballot, (unsigned long long)s->next);
		return out;
	}
	if (sscanf(line, "reg read %63s %63s %llu %llu", prog, reg, &first, &n) == 4) {
		uint64_t m = !strcmp(reg, "hi") ? s->hi : !strcmp(reg, "trim") ? s->trim :
			     !strcmp(reg, "promised") ? s->promised : !strcmp(reg, "inst") ? s->inst :
			     !strcmp(reg, "next") ? s->next : !strcmp(reg, "ballot") ? s->ballot : 0;
		size_t o = (size_t)snprintf(out, outlen, "{\"ok\": true, \"values\": [");
		for (unsigned long long i = 0; i < n && o + 32 < outlen; i++)  /* the maximum in the middle */
			o += (size_t)snprintf(out + o, outlen - o, "%s%llu", i ? ", " : "",
					      i == n / 2 ? (unsigned long long)m : 0ull);
		snprintf(out + o, outlen - o, "]}");
		return out;
	}
	if (sscanf(line, "reg write %63s %63s %llu %llu", prog, reg, &first, &v) == 4) {
		if (s->refuse_writes)
			return "{\"ok\": false, \"error\": \"register join_inst is read-only here\"}";
		snprintf(s->writes + strlen(s->writes), sizeof(s->writes) - strlen(s->writes), "%s=%llu ",
			 reg, v);
		return "{\"ok\": true}";
	}
	return "{\"ok\": false, \"error\": \"unknown command\"}";
}

static void start(int i)
{
	char path[192];
	if (!strcmp(sws[i].name, "b0"))
		snprintf(path, sizeof(path), "%s/kv-b0.sock", dir);
	else
		snprintf(path, sizeof(path), "%s/%s.sock", dir, sws[i].name);
	assert_int_equal(fake_ctl_start(&fakes[i], path, answer, &sws[i]), 0);
	started[i] = true;
}

static void say(void *arg, const char *line)
{
	snprintf(says + strlen(says), sizeof(says) - strlen(says), "%s\n", line);
}

/* examples/kv-faults.json with this test's state directory */
static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/innet-kv-rejoin.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return -1;
	const char *cands[] = { "examples/kv-faults.json", "../examples/kv-faults.json",
				"../../examples/kv-faults.json" };
	json_t *j = NULL;
	for (size_t i = 0; i < 3 && j == NULL; i++)
		j = json_load_file(cands[i], 0, NULL);
	if (j == NULL)
		return -1;
	json_object_set_new(j, "state_dir", json_string(dir));
	snprintf(topo_path, sizeof(topo_path), "%s/topo.json", dir);
	if (json_dump_file(j, topo_path, 0) != 0)
		return -1;
	json_decref(j);
	char err[1024];
	topo = innet_topology_load(topo_path, err, sizeof(err));
	if (topo == NULL)
		fprintf(stderr, "%s\n", err);
	return topo ? 0 : -1;
}

static int teardown(void **state)
{
	innet_topology_free(topo);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Every case: a0 and a2 answer, a1 is the joiner, coord at ballot 0x100. */
static int case_setup(void **state)
{
	static const char *names[5] = { "a0", "a1", "a2", "coord", "b0" };
	memset(sws, 0, sizeof(sws));
	memset(started, 0, sizeof(started));
	says[0] = '\0';
	for (int i = 0; i < 5; i++)
		sws[i].name = names[i];
	sws[0] = (struct fake_sw){ "a0", .hi = 10, .trim = 3, .promised = 0x100, .inst = 12 };
	sws[2] = (struct fake_sw){ "a2", .hi = 8, .trim = 3, .promised = 0x100, .inst = 9 };
	sws[3] = (struct fake_sw){ "coord", .next = 11, .ballot = 0x100 };
	sws[4] = (struct fake_sw){ "b0", .serving = false, .ballot = 0x3fe, .next = 7 };
	return 0;
}

static int case_teardown(void **state)
{
	for (int i = 0; i < 5; i++)
		if (started[i])
			fake_ctl_stop(&fakes[i]);
	return 0;
}

static void find_a1(uint32_t *a)
{
	const char *inst;
	char err[256];
	assert_int_equal(kv_rejoin_find(topo, "a1", a, &inst, err, sizeof(err)), 0);
	assert_string_equal(inst, "acc");
}

static void test_under_the_coordinator_switch(void **state)
{
	for (int i = 0; i < 5; i++)
		start(i);
	uint32_t a;
	find_a1(&a);
	struct kv_rejoin r;
	char err[1024];
	assert_int_equal(kv_rejoin_complete(topo, a, 300, &r, say, NULL, err, sizeof(err)), 0);
	assert_int_equal(r.n_acceptors, 3);
	assert_int_equal(r.need, 2);
	assert_int_equal(r.read, 2);
	assert_int_equal(r.join_inst, 12);      /* a0's highest slot beats coord's next 11 */
	assert_int_equal(r.join_ballot, 0x100);
	assert_string_equal(r.who, "coord");
	assert_string_equal(sws[1].writes, "join_inst=12 join_ballot=256 joining=0 ");
	assert_string_equal(says, "");
}

static void test_after_a_takeover(void **state)
{
	sws[0].promised = sws[2].promised = 0x5fe;
	sws[4] = (struct fake_sw){ "b0", .serving = true, .ballot = 0x5fe, .next = 40 };
	for (int i = 0; i < 5; i++)
		start(i);
	uint32_t a;
	find_a1(&a);
	struct kv_rejoin r;
	char err[1024];
	assert_int_equal(kv_rejoin_complete(topo, a, 300, &r, say, NULL, err, sizeof(err)), 0);
	assert_string_equal(r.who, "b0");
	assert_int_equal(r.ballot, 0x5fe);
	assert_int_equal(r.join_inst, 40);      /* the serving backup's next */
	assert_string_equal(sws[1].writes, "join_inst=40 join_ballot=1534 joining=0 ");
}

static void test_too_few_answer(void **state)
{
	for (int i = 1; i < 5; i++)             /* a0 is down */
		start(i);
	uint32_t a;
	find_a1(&a);
	struct kv_rejoin r;
	char err[1024];
	assert_int_equal(kv_rejoin_complete(topo, a, 300, &r, say, NULL, err, sizeof(err)), -EAGAIN);
	assert_int_equal(r.read, 1);
	assert_non_null(strstr(err, "only 1 other acceptors answered; the join needs 2 (N = 3)"));
	assert_non_null(strstr(err, "a1 stays silent"));
	assert_string_equal(sws[1].writes, "");  /* nothing written: it stays silent */
	/* the silent acceptor is named, once (not at every retry) */
	char *p = strstr(says, "acceptor a0 does not answer: not counted");
	assert_non_null(p);
	assert_null(strstr(p + 1, "acceptor a0 does not answer"));
}

static void test_no_coordinator_in_charge(void **state)
{
	sws[0].promised = sws[2].promised = 0x5fe;   /* a takeover began ... */
	for (int i = 0; i < 5; i++)                  /* ... and b0 does not serve yet */
		start(i);
	uint32_t a;
	find_a1(&a);
	struct kv_rejoin r;
	char err[1024];
	assert_int_equal(kv_rejoin_complete(topo, a, 300, &r, say, NULL, err, sizeof(err)), -ESRCH);
	assert_non_null(strstr(err, "the acceptors promised ballot 0x5fe"));
	assert_non_null(strstr(err, "coordinator switch coord has ballot 0x100 (superseded)"));
	assert_non_null(strstr(err, "backup coordinator b0 is not serving"));
	assert_string_equal(sws[1].writes, "");
}

static void test_joiner_refuses(void **state)
{
	sws[1].refuse_writes = true;
	for (int i = 0; i < 5; i++)
		start(i);
	uint32_t a;
	find_a1(&a);
	struct kv_rejoin r;
	char err[1024];
	assert_int_equal(kv_rejoin_complete(topo, a, 300, &r, say, NULL, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "register join_inst is read-only here"));
}

static void test_not_an_acceptor(void **state)
{
	uint32_t a;
	const char *inst;
	char err[256];
	assert_int_equal(kv_rejoin_find(topo, "coord", &a, &inst, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "no paxos_acceptor switch 'coord'");
	assert_int_equal(kv_rejoin_find(topo, "r0", &a, &inst, err, sizeof(err)), -EINVAL);
	assert_int_equal(kv_rejoin_find(topo, "nosuch", &a, &inst, err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_under_the_coordinator_switch, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_after_a_takeover, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_too_few_answer, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_no_coordinator_in_charge, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_joiner_refuses, case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_not_an_acceptor, case_setup, case_teardown),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
