/*
 * alu_check.c — the ALU check (alu_check.h): the natives the ALU-count
 * objects call, the counting handler that stands in for a program's own, and
 * the per-pass comparison of what innet_alu() reported with what the
 * interpreter counted.
 *
 *   golden test ─► switch (user-space engine) ─► worker: cp->handle(ctx, pkt)
 *                                                   │ alu_handle
 *                                                   ▼
 *                  alu_vm_run(NAME.alu.o's innet_dp_NAME_handle, ctx, pkt)
 *                      │ the program's own code: counted
 *                      └─► natives[]: the engine's primitives (not counted;
 *                          innet_alu adds to ctx->use.alu_ops as always)
 *
 * The embedded objects and the native handlers they stand for are listed by
 * the build (build/alu/objects.c, tools/contract/alu-objects).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "innet/dp.h"
#include "innet/program.h"
#include "engine/switch_pvt.h"
#include "alu/alu_check.h"
#include "alu/alu_vm.h"

/* ------------------------------------------------------------------------ */
/* Natives: the primitives dp_alu.c leaves out of line, as the engine has   */
/* them (innet/dp_user.h and src/targets/user/dp_user.c).                    */

#define P(x) ((void *)(uintptr_t)(x))
#define NATIVE(fn) \
	static uint64_t n_##fn(uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5)

NATIVE(innet_hash) { return innet_hash(P(a1), (size_t)a2, a3); }
/* The run in progress on this thread, for ALU_CHECK_VERBOSE's report of
 * each innet_alu() call against the operations counted since the last. */
static __thread struct alu_vm_count *run_cnt;
static __thread uint64_t run_mark;
static __thread unsigned run_calls;
static bool verbose;

NATIVE(innet_alu)
{
	innet_alu(P(a1), (uint32_t)a2);
	if (run_cnt != NULL) {
		if (verbose)
			fprintf(stderr, "alu:   innet_alu #%u (.text+0x%lx) reported %u; counted since the "
				"last: %" PRIu64 "\n", run_calls, (unsigned long)alu_vm_call_pc * 8,
				(unsigned)(uint32_t)a2, run_cnt->alu - run_mark);
		run_calls++;
		run_mark = run_cnt->alu;
	}
	return 0;
}
NATIVE(innet_pkt_ptr) { return (uintptr_t)innet_pkt_ptr(P(a1), (uint32_t)a2, (uint32_t)a3); }
NATIVE(innet_pkt_push) { return (uint64_t)(int64_t)innet_pkt_push(P(a1), P(a2), (uint32_t)a3); }
NATIVE(innet_pkt_pull) { return (uint64_t)(int64_t)innet_pkt_pull(P(a1), P(a2), (uint32_t)a3); }
NATIVE(innet_pkt_resize) { return (uint64_t)(int64_t)innet_pkt_resize(P(a1), P(a2), (uint32_t)a3); }
NATIVE(innet_pkt_try_resize)
{
	return (uint64_t)(int64_t)innet_pkt_try_resize(P(a1), P(a2), (uint32_t)a3);
}
NATIVE(innet_pass_up) { return (uint64_t)innet_pass_up(P(a1), P(a2)); }
NATIVE(innet_reg_read) { return innet_reg_read(P(a1), (unsigned)a2, (uint32_t)a3); }
NATIVE(innet_reg_write) { innet_reg_write(P(a1), (unsigned)a2, (uint32_t)a3, a4); return 0; }
NATIVE(innet_reg_fetch_add) { return innet_reg_fetch_add(P(a1), (unsigned)a2, (uint32_t)a3, a4); }
NATIVE(innet_reg_fetch_or) { return innet_reg_fetch_or(P(a1), (unsigned)a2, (uint32_t)a3, a4); }
NATIVE(innet_reg_fetch_and) { return innet_reg_fetch_and(P(a1), (unsigned)a2, (uint32_t)a3, a4); }
NATIVE(innet_reg_swap) { return innet_reg_swap(P(a1), (unsigned)a2, (uint32_t)a3, a4); }
NATIVE(innet_reg_cas) { return innet_reg_cas(P(a1), (unsigned)a2, (uint32_t)a3, P(a4), a5); }
NATIVE(innet_reg_fetch_max) { return innet_reg_fetch_max(P(a1), (unsigned)a2, (uint32_t)a3, a4); }
NATIVE(innet_reg_span) { return (uintptr_t)innet_reg_span(P(a1), (unsigned)a2, (uint32_t)a3, (uint32_t)a4); }
NATIVE(innet_random) { return innet_random(P(a1)); }
NATIVE(innet__fault) { innet__fault(P(a1), (unsigned)a2); return 0; }
NATIVE(innet_reg_read_bytes)
{
	innet_reg_read_bytes(P(a1), (unsigned)a2, (uint32_t)a3, P(a4), (uint32_t)a5);
	return 0;
}
NATIVE(innet_reg_write_bytes)
{
	innet_reg_write_bytes(P(a1), (unsigned)a2, (uint32_t)a3, P(a4), (uint32_t)a5);
	return 0;
}
/* dp_alu.c's struct innet__alu_regpkt */
struct alu_regpkt {
	struct innet_ctx *ctx;
	struct innet_pkt *pkt;
	uint32_t r, idx, off, n;
};
NATIVE(innet__alu_reg_to_pkt)
{
	const struct alu_regpkt *a = P(a1);
	innet_reg_to_pkt(a->ctx, a->r, a->idx, a->pkt, a->off, a->n);
	return 0;
}
NATIVE(innet__alu_pkt_to_reg)
{
	const struct alu_regpkt *a = P(a1);
	innet_pkt_to_reg(a->ctx, a->pkt, a->off, a->r, a->idx, a->n);
	return 0;
}
/* Tables: id in bits 0-15 of a2, key size in 16-31, value size in 32-63. */
NATIVE(innet__alu_table_lookup)
{
	return (uint64_t)(int64_t)innet__table_lookup(P(a1), (unsigned)(a2 & 0xffff), P(a3),
						      (uint32_t)(a2 >> 16 & 0xffff), P(a4),
						      (uint32_t)(a2 >> 32));
}
NATIVE(innet__alu_table_insert)
{
	return (uint64_t)(int64_t)innet__table_insert(P(a1), (unsigned)(a2 & 0xffff), P(a3),
						      (uint32_t)(a2 >> 16 & 0xffff), P(a4),
						      (uint32_t)(a2 >> 32));
}
NATIVE(innet__alu_table_delete)
{
	return (uint64_t)(int64_t)innet__table_delete(P(a1), (unsigned)(a2 & 0xffff), P(a3),
						      (uint32_t)(a2 >> 16 & 0xffff));
}
NATIVE(innet_emit)
{
	return (uint64_t)(int64_t)innet_emit(P(a1), P(a2), (bool)a3, P(a4), (uint32_t)a5);
}
NATIVE(innet_timer_arm) { return (uint64_t)(int64_t)innet_timer_arm(P(a1), (uint32_t)a2, a3, a4); }
NATIVE(innet_timer_cancel) { innet_timer_cancel(P(a1), (uint32_t)a2); return 0; }
NATIVE(innet_port_peer_ip) { return innet_port_peer_ip(P(a1), (uint16_t)a2); }
NATIVE(innet_scratch) { return (uintptr_t)innet_scratch(P(a1)); }
NATIVE(memcpy) { return (uintptr_t)memcpy(P(a1), P(a2), (size_t)a3); }
NATIVE(memmove) { return (uintptr_t)memmove(P(a1), P(a2), (size_t)a3); }
NATIVE(memset) { return (uintptr_t)memset(P(a1), (int)a2, (size_t)a3); }
NATIVE(memcmp) { return (uint64_t)(int64_t)memcmp(P(a1), P(a2), (size_t)a3); }

#define N(fn) { #fn, n_##fn }
static const struct alu_vm_native natives[] = {
	N(innet_hash), N(innet_alu), N(innet_pkt_ptr), N(innet_pkt_push), N(innet_pkt_pull),
	N(innet_pkt_resize), N(innet_pkt_try_resize), N(innet_pass_up), N(innet_reg_read),
	N(innet_reg_write), N(innet_reg_fetch_add), N(innet_reg_fetch_or), N(innet_reg_fetch_and),
	N(innet_reg_swap), N(innet_reg_cas), N(innet_reg_fetch_max), N(innet_reg_span),
	N(innet_random), N(innet__fault), N(innet_reg_read_bytes), N(innet_reg_write_bytes),
	N(innet__alu_reg_to_pkt), N(innet__alu_pkt_to_reg), N(innet__alu_table_lookup),
	N(innet__alu_table_insert), N(innet__alu_table_delete), N(innet_emit),
	N(innet_timer_arm), N(innet_timer_cancel), N(innet_port_peer_ip), N(innet_scratch),
	N(memcpy), N(memmove), N(memset), N(memcmp),
	{ NULL, NULL },
};

/* ------------------------------------------------------------------------ */
/* The counting copies of the programs.                                       */

#define ALU_MAX_PROGS   32
#define ALU_MAX_REPORTS 10   /* passes out of tolerance printed per program */

struct alu_prog {
	struct innet_program prog;        /* the copy the switch runs (first member) */
	const struct innet_program *orig;
	struct alu_vm *vm;
	long entry;                       /* innet_dp_NAME_handle */
	const char *dp_name;
	pthread_mutex_t lock;             /* the figures below */
	uint64_t passes, bad;
	uint64_t counted_min, counted_max, reported_min, reported_max;
	uint64_t sum_counted, sum_reported;
	uint64_t worst_counted, worst_reported;   /* the pass furthest out (or in) */
	uint64_t *alu_at;                 /* ALU_CHECK_PROFILE: per instruction */
	double worst_excess;              /* |r - c| over the allowed deviation */
};

static struct alu_prog progs[ALU_MAX_PROGS];
static unsigned n_progs;
static const char *skipped[ALU_MAX_PROGS];
static unsigned n_skipped;
static atomic_uint failures;

bool alu_check_within(uint64_t reported, uint64_t counted)
{
	uint64_t d = reported > counted ? reported - counted : counted - reported;
	uint64_t allowed = counted * ALU_CHECK_PCT / 100;
	return d <= (allowed > ALU_CHECK_SLACK ? allowed : ALU_CHECK_SLACK);
}

static double alu_excess(uint64_t reported, uint64_t counted)
{
	double d = reported > counted ? (double)(reported - counted) : (double)(counted - reported);
	double allowed = (double)(counted * ALU_CHECK_PCT / 100);
	return d / (allowed > ALU_CHECK_SLACK ? allowed : ALU_CHECK_SLACK);
}

static void alu_fail_run(struct alu_prog *p, const char *err)
{
	fprintf(stderr, "alu: %s: the interpreter stopped: %s\n", p->dp_name, err);
	atomic_fetch_add(&failures, 1);
}

static enum innet_action alu_handle(struct innet_ctx *ctx, struct innet_pkt *pkt)
{
	struct alu_prog *p = (struct alu_prog *)(uintptr_t)innet_cp_program(ctx->prog);
	uint64_t args[5] = { (uintptr_t)ctx, (uintptr_t)pkt, 0, 0, 0 }, ret = INNET_DROP;
	struct alu_vm_count cnt = { .alu_at = p->alu_at };
	char err[256] = "";
	uint32_t before = ctx->use.alu_ops;
	run_cnt = &cnt;
	run_mark = 0;
	run_calls = 0;
	/* The memory the handler is given, for telling address arithmetic. */
	struct alu_vm_mem mem[4 + INNET_MAX_REGS];
	unsigned n_mem = 0;
	mem[n_mem++] = (struct alu_vm_mem){ (uintptr_t)ctx, (uintptr_t)(ctx + 1) };
	mem[n_mem++] = (struct alu_vm_mem){ (uintptr_t)pkt, (uintptr_t)(pkt + 1) };
	mem[n_mem++] = (struct alu_vm_mem){ (uintptr_t)pkt->buf_start, (uintptr_t)pkt->buf_end };
	mem[n_mem++] = (struct alu_vm_mem){ (uintptr_t)ctx->conf,
					    (uintptr_t)ctx->conf + ctx->prog->conf_size };
	for (unsigned i = 0; i < ctx->n_regs && i < INNET_MAX_REGS; i++)
		mem[n_mem++] = (struct alu_vm_mem){
			(uintptr_t)ctx->regs[i].mem,
			(uintptr_t)ctx->regs[i].mem + (size_t)ctx->regs[i].count * ctx->regs[i].stride };
	void *scratch = innet_scratch(ctx);
	struct alu_vm_mem all[5 + INNET_MAX_REGS];
	memcpy(all, mem, n_mem * sizeof(mem[0]));
	all[n_mem++] = (struct alu_vm_mem){ (uintptr_t)scratch, (uintptr_t)scratch + INNET_SCRATCH_SIZE };
	int rc = alu_vm_run(p->vm, p->entry, args, all, n_mem, &ret, &cnt, err, sizeof(err));
	run_cnt = NULL;
	if (rc != 0) {
		alu_fail_run(p, err);
		return innet_drop(pkt, INNET_DROP_BAD_VERDICT);
	}
	uint64_t reported = ctx->use.alu_ops - before, counted = cnt.alu;
	bool ok = alu_check_within(reported, counted);
	double excess = alu_excess(reported, counted);
	pthread_mutex_lock(&p->lock);
	if (p->passes == 0 || counted < p->counted_min)
		p->counted_min = counted;
	if (p->passes == 0 || reported < p->reported_min)
		p->reported_min = reported;
	if (counted > p->counted_max)
		p->counted_max = counted;
	if (reported > p->reported_max)
		p->reported_max = reported;
	p->sum_counted += counted;
	p->sum_reported += reported;
	if (p->passes == 0 || excess > p->worst_excess) {
		p->worst_excess = excess;
		p->worst_counted = counted;
		p->worst_reported = reported;
	}
	p->passes++;
	bool print = !ok && p->bad++ < ALU_MAX_REPORTS;
	pthread_mutex_unlock(&p->lock);
	if (verbose || print) {
		char head[3 * 12 + 1] = "";
		uint32_t show = pkt->len < 12 ? pkt->len : 12;
		for (uint32_t i = 0; i < show; i++)
			snprintf(head + 3 * i, sizeof(head) - 3 * i, "%02x ", pkt->data[i]);
		fprintf(stderr,
			"alu: %s%s: port %u udp %u len %u [%s] -> action %u reason %u: innet_alu "
			"reported %" PRIu64 ", the code did %" PRIu64 " ALU operations "
			"(%" PRIu64 " after the last innet_alu; and %" PRIu64 " moves, %" PRIu64
			" byte-lane moves, %" PRIu64 " byte swaps, %" PRIu64 " address additions, %" PRIu64
			" instructions)\n",
			p->dp_name, ok ? "" : " OUT OF TOLERANCE", pkt->in_port, pkt->dst_udp,
			pkt->len, head, (unsigned)ret, pkt->out.reason, reported, counted,
			cnt.alu - run_mark, cnt.moves, cnt.lanes, cnt.swaps, cnt.addr, cnt.insns);
	}
	if (!ok)
		atomic_fetch_add(&failures, 1);
	return (enum innet_action)ret;
}

static void alu_summary(void)
{
	for (unsigned i = 0; i < n_progs; i++) {
		struct alu_prog *p = &progs[i];
		printf("alu: %-18s %6" PRIu64 " passes: counted %" PRIu64 "..%" PRIu64
		       " (mean %.1f), reported %" PRIu64 "..%" PRIu64 " (mean %.1f); "
		       "furthest: reported %" PRIu64 " for %" PRIu64 " counted; %" PRIu64
		       " out of tolerance\n",
		       p->dp_name, p->passes, p->counted_min, p->counted_max,
		       p->passes ? (double)p->sum_counted / (double)p->passes : 0.0,
		       p->reported_min, p->reported_max,
		       p->passes ? (double)p->sum_reported / (double)p->passes : 0.0,
		       p->worst_reported, p->worst_counted, p->bad);
	}
	const char *prof = getenv("ALU_CHECK_PROFILE");
	FILE *f = prof != NULL ? fopen(prof, "a") : NULL;
	for (unsigned i = 0; f != NULL && i < n_progs; i++)
		for (size_t pc = 0; pc < alu_vm_insns(progs[i].vm); pc++)
			if (progs[i].alu_at[pc] != 0)
				fprintf(f, "%s 0x%zx %" PRIu64 "\n", progs[i].dp_name, pc * 8,
					progs[i].alu_at[pc]);
	if (f != NULL)
		fclose(f);
	for (unsigned i = 0; i < n_skipped; i++)
		printf("alu: %-18s not checked (no ALU-count object: no eBPF data path)\n", skipped[i]);
	unsigned bad = atomic_load(&failures);
	if (bad != 0) {
		printf("alu: FAILED: %u passes out of tolerance (reported within max(%u, %u%% of "
		       "counted) of the counted operations; docs/resources.md)\n",
		       bad, ALU_CHECK_SLACK, ALU_CHECK_PCT);
		fflush(NULL);
		_exit(1);
	}
	fflush(NULL);
}

static void alu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void alu_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	exit(1);
}

static const struct innet_program *alu_wrap(const struct innet_program *orig)
{
	for (unsigned i = 0; i < n_progs; i++)
		if (progs[i].orig == orig)
			return &progs[i].prog;
	const struct alu_object *o = alu_objects;
	while (o->name != NULL && o->handle != orig->handle)
		o++;
	if (o->name == NULL) {
		for (unsigned i = 0; i < n_skipped; i++)
			if (strcmp(skipped[i], orig->name) == 0)
				return orig;
		if (n_skipped < ALU_MAX_PROGS)
			skipped[n_skipped++] = orig->name;
		return orig;
	}
	if (n_progs == ALU_MAX_PROGS)
		alu_die("alu: more than %d programs\n", ALU_MAX_PROGS);
	struct alu_prog *p = &progs[n_progs];
	char err[256] = "", fn[128];
	if (alu_vm_open(&p->vm, o->start, (size_t)(o->end - o->start), natives, err, sizeof(err)) != 0)
		alu_die("alu: %s: %s\n", o->name, err);
	snprintf(fn, sizeof(fn), "innet_dp_%s_handle", o->name);
	if ((p->entry = alu_vm_func(p->vm, fn)) < 0)
		alu_die("alu: %s: the object has no %s\n", o->name, fn);
	/* The object must see the engine's structures as this build does. */
	static const uint32_t layout[] = {
		sizeof(struct innet_ctx),  offsetof(struct innet_ctx, use),
		offsetof(struct innet_ctx, fault), offsetof(struct innet_ctx, prog),
		sizeof(struct innet_pkt),  offsetof(struct innet_pkt, out),
		offsetof(struct innet_pkt, buf_end), sizeof(struct innet_reg),
	};
	size_t sz = 0;
	const void *l = alu_vm_data(p->vm, "innet__alu_layout", &sz);
	if (l == NULL || sz != sizeof(layout) || memcmp(l, layout, sz) != 0)
		alu_die("alu: %s: the object's struct layout differs from the engine's\n", o->name);
	p->orig = orig;
	p->dp_name = o->name;
	p->prog = *orig;
	p->prog.handle = alu_handle;
	if (getenv("ALU_CHECK_PROFILE") != NULL &&
	    (p->alu_at = calloc(alu_vm_insns(p->vm), sizeof(*p->alu_at))) == NULL)
		alu_die("alu: out of memory\n");
	pthread_mutex_init(&p->lock, NULL);
	n_progs++;
	return &p->prog;
}

void alu_check_conf(struct innet_switch_conf *c)
{
	static bool registered;
	if (!registered) {
		registered = true;
		verbose = getenv("ALU_CHECK_VERBOSE") != NULL;
		atexit(alu_summary);
	}
	for (uint32_t i = 0; i < c->n_progs; i++)
		if (c->progs[i].program != NULL)
			c->progs[i].program = alu_wrap(c->progs[i].program);
}
