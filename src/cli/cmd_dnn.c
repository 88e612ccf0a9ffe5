/*
 * cmd_dnn.c — `innet dnn`: quantized DNN inference in the fabric
 * (docs/dnn.md; the layer program is src/dnn/layer_dp.c and layer.c).
 *
 *   innet dnn ref MODEL TESTSET            the C integer reference on a test set
 *   innet dnn time MODEL TESTSET           the integer and float references timed,
 *                                          one inference at a time
 *   innet dnn compile MODEL TOPOLOGY       map stages to leaves and units to
 *                                          pipelines; print the per-switch,
 *                                          per-pipeline report; write the derived
 *                                          topology (--out) that runs it
 *   innet dnn infer --topology T --from H --testset F --index I
 *                                          one input through the fabric
 *   innet dnn eval --topology T --from H --testset F
 *                                          a test set through the fabric, compared
 *                                          with the C reference logit for logit
 *
 * infer and eval parse their arguments, run the inputs with the library's
 * client (src/dnn/client.c, innet/dnn.h: the deployment learnt from the
 * derived topology, retries, latency) and compare and print here.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "innet/switch.h"
#include "dnn/wire.h"
#include "innet/parse.h"
#include "innet/dnn.h"
#include "innet/hist.h"
#include "innet/topology.h"
#include "cli/cmds.h"


/* CPU time of this thread (the references run on it alone). */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void dnn_usage(FILE *f)
{
	fprintf(f,
		"usage: innet dnn ref MODEL TESTSET [--quiet]\n"
		"       innet dnn time MODEL TESTSET [--count N] [--rounds R]\n"
		"       innet dnn compile MODEL TOPOLOGY [--out FILE] [--pipes N] [--max-vals N]\n"
		"                 [--leaves L1,L2,...] [--udp PORT] [--slots N] [--timeout-ms MS]\n"
		"                 [--multiply shift|mul] [--ops-per-pass N]\n"
		"       innet dnn infer --topology FILE --from HOST --testset FILE [--index I] [--timeout MS]\n"
		"       innet dnn eval --topology FILE --from HOST --testset FILE [--count N] [--window W]\n"
		"                 (--count N: N inferences, cycling through the test set)\n"
		"                 [--timeout MS] [--retries R]\n\n"
		"Quantized DNN inference split layer by layer across the leaves of a fabric.\n"
		"compile writes a topology (--out) to run with 'innet fabric up'; infer and eval use it.\n"
		"Exit status: 0 ok, 1 failure (eval: any logit differs from the C reference), 2 usage.\n");
}

/* A usage error of `innet dnn SUB`: what is wrong, then the usage. Returns 2. */
__attribute__((format(printf, 2, 3))) static int dnn_bad(const char *sub, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "innet dnn %s: ", sub);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n\n");
	va_end(ap);
	dnn_usage(stderr);
	return 2;
}

/* An option's value out of [lo, hi] or not a number. Returns 2. */
static int dnn_bad_num(const char *sub, const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	return dnn_bad(sub, "%s wants an integer in [%llu, %llu], not '%s'", opt,
		       (unsigned long long)lo, (unsigned long long)hi, arg);
}

/* ------------------------------------------------------------------------ */
/* ref                                                                        */

static int load_pair(const char *model, const char *testset, struct innet_dnn_model *m,
		     struct innet_dnn_testset *ts)
{
	char err[1024];
	if (innet_dnn_model_load(model, m, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn: %s\n", err);
		return -1;
	}
	if (testset == NULL)
		return 0;
	if (innet_dnn_testset_load(testset, ts, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn: %s\n", err);
		innet_dnn_model_free(m);
		return -1;
	}
	if (memcmp(&ts->in, &m->in, sizeof(m->in)) != 0) {
		fprintf(stderr, "innet dnn: test set inputs are %ux%ux%u, the model wants %ux%ux%u\n",
			ts->in.c, ts->in.h, ts->in.w, m->in.c, m->in.h, m->in.w);
		innet_dnn_testset_free(ts);
		innet_dnn_model_free(m);
		return -1;
	}
	return 0;
}

static int dnn_ref(int argc, char **argv)
{
	bool quiet = argc == 4 && !strcmp(argv[3], "--quiet");
	if (argc != 3 && !quiet)
		return dnn_bad("ref", argc < 3 ? "needs MODEL and TESTSET" :
				      "unexpected argument '%s' (only --quiet may follow TESTSET)",
			       argv[argc - 1]);
	struct innet_dnn_model m;
	struct innet_dnn_testset ts;
	if (load_pair(argv[1], argv[2], &m, &ts) != 0)
		return 1;
	uint32_t n = innet_dnn_shape_n(m.in), correct = 0;
	int32_t *logits = calloc(m.n_classes, sizeof(*logits));
	for (uint32_t i = 0; logits != NULL && i < ts.count; i++) {
		int cls = innet_dnn_ref_infer(&m, ts.inputs + (size_t)i * n, logits);
		if (cls < 0)
			break;
		correct += (uint32_t)cls == ts.labels[i];
		if (!quiet) {
			printf("%u %u %d", i, ts.labels[i], cls);
			for (uint32_t k = 0; k < m.n_classes; k++)
				printf(" %d", logits[k]);
			printf("\n");
		}
	}
	fprintf(quiet ? stdout : stderr, "accuracy %.2f%% (%u/%u), model crc %08x\n",
		100.0 * correct / ts.count, correct, ts.count, m.crc);
	free(logits);
	innet_dnn_testset_free(&ts);
	innet_dnn_model_free(&m);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* time: the integer and float references, timed per inference               */

/* The p-th percentile of v[0..n) in us (innet/hist.h: within 0.1 %). */
static double pct_us(const uint64_t *v, uint32_t n, double p)
{
	struct innet_hist h;
	if (n == 0 || innet_hist_init(&h, 600000000000ull, INNET_HIST_DEFAULT_BITS) != 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		innet_hist_record(&h, v[i]);
	double r = (double)innet_hist_percentile(&h, p) / 1e3;
	innet_hist_fini(&h);
	return r;
}

static int dnn_time(int argc, char **argv)
{
	uint64_t count = 0, rounds = 3;
	const char *model = NULL, *testset = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			if (innet_parse_u64(argv[++i], 1, 1u << 20, &count))
				return dnn_bad_num("time", "--count", argv[i], 1, 1u << 20);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			if (innet_parse_u64(argv[++i], 1, 100, &rounds))
				return dnn_bad_num("time", "--rounds", argv[i], 1, 100);
		} else if (argv[i][0] == '-' || (model != NULL && testset != NULL)) {
			return dnn_bad("time", "unexpected argument '%s'", argv[i]);
		} else if (model == NULL) {
			model = argv[i];
		} else {
			testset = argv[i];
		}
	}
	if (testset == NULL)
		return dnn_bad("time", "needs MODEL and TESTSET");
	struct innet_dnn_model m;
	struct innet_dnn_testset ts;
	if (load_pair(model, testset, &m, &ts) != 0)
		return 1;
	int rc = 1;
	uint32_t n = count ? (uint32_t)count : ts.count, in_n = innet_dnn_shape_n(m.in), agree = 0;
	uint32_t total = n * (uint32_t)rounds;
	uint64_t *ti = calloc(total, sizeof(*ti)), *tf = calloc(total, sizeof(*tf));
	int32_t *li = calloc(m.n_classes, sizeof(*li));
	float *lf = calloc(m.n_classes, sizeof(*lf));
	uint64_t sum_i = 0, sum_f = 0, cpu_i = 0, cpu_f = 0;
	if (ti == NULL || tf == NULL || li == NULL || lf == NULL)
		goto out;
	/* Rounds alternate integer and float so that drift hits both alike. */
	for (uint32_t r = 0; r < rounds; r++) {
		uint64_t c0 = cpu_ns();
		for (uint32_t k = 0; k < n; k++) {
			const int8_t *x = ts.inputs + (size_t)(k % ts.count) * in_n;
			uint64_t t0 = innet_now_ns();
			int ci = innet_dnn_ref_infer(&m, x, li);
			uint64_t t1 = innet_now_ns();
			ti[r * n + k] = t1 - t0;
			sum_i += t1 - t0;
			if (ci < 0)
				goto out;
		}
		cpu_i += cpu_ns() - c0;
		c0 = cpu_ns();
		for (uint32_t k = 0; k < n; k++) {
			const int8_t *x = ts.inputs + (size_t)(k % ts.count) * in_n;
			uint64_t t0 = innet_now_ns();
			int cf = innet_dnn_ref_infer_float(&m, x, lf);
			uint64_t t1 = innet_now_ns();
			tf[r * n + k] = t1 - t0;
			sum_f += t1 - t0;
			if (cf < 0)
				goto out;
		}
		cpu_f += cpu_ns() - c0;
	}
	for (uint32_t k = 0; k < n; k++) {
		const int8_t *x = ts.inputs + (size_t)(k % ts.count) * in_n;
		int ci = innet_dnn_ref_infer(&m, x, li), cf = innet_dnn_ref_infer_float(&m, x, lf);
		agree += ci >= 0 && ci == cf;
	}
	double int_ps = total / ((double)sum_i / 1e9), float_ps = total / ((double)sum_f / 1e9);
	double ip50 = pct_us(ti, total, 50), ip99 = pct_us(ti, total, 99);
	double fp50 = pct_us(tf, total, 50), fp99 = pct_us(tf, total, 99);
	printf("%u inferences x %llu rounds, one at a time: integer reference p50 %.1f us p99 %.1f us "
	       "(%.0f/s); float reference p50 %.1f us p99 %.1f us (%.0f/s); float and integer agree on "
	       "the class for %u/%u inputs\n", n, (unsigned long long)rounds, ip50, ip99, int_ps, fp50,
	       fp99, float_ps, agree, n);
	printf("int_p50_us=%.1f int_p99_us=%.1f int_per_s=%.1f int_cpu_us=%.1f float_p50_us=%.1f "
	       "float_p99_us=%.1f float_per_s=%.1f float_cpu_us=%.1f class_agree=%u/%u\n", ip50, ip99,
	       int_ps, (double)cpu_i / total / 1e3, fp50, fp99, float_ps, (double)cpu_f / total / 1e3, agree, n);
	rc = 0;
out:
	free(ti);
	free(tf);
	free(li);
	free(lf);
	innet_dnn_testset_free(&ts);
	innet_dnn_model_free(&m);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* compile                                                                    */

struct compile_opts {
	const char *out;
	uint32_t pipes, max_vals, udp, slots, timeout_ms, ops_per_pass;
	const char *multiply;
	const char *leaves;
};

/* Print the resource report for plan p placed on the given leaves: per layer
 * (the paper's Table 1: parameters, operations, memory), per switch and
 * pipeline, and the Tofino2 projection. */
static void report(const struct innet_dnn_model *m, const struct innet_dnn_plan *p,
		   const struct innet_topology *t, const uint32_t *leaf_of, const struct compile_opts *o)
{
	printf("model: %u layers, input %ux%ux%u, %u classes, crc %08x; %u stages, up to %u pipelines "
	       "per leaf, %u values per packet\n", m->n_layers, m->in.c, m->in.h, m->in.w, m->n_classes,
	       m->crc, p->n_stages, o->pipes, p->max_vals);

	printf("\nper layer (output C x H x W; MACs count every kernel position, padding included):\n");
	printf("%-5s %-9s %-12s %9s %10s %10s %11s %11s\n", "layer", "type", "output", "params",
	       "wbytes", "acc-bytes", "MACs", "shift-adds");
	struct innet_dnn_layer_cost tot = { 0 };
	for (uint32_t i = 0; i < m->n_layers; i++) {
		const struct innet_dnn_layer *l = &m->layers[i];
		struct innet_dnn_layer_cost lc;
		innet_dnn_layer_cost(l, &lc);
		char lname[32], shape[40];
		if (l->type == INNET_DNN_CONV2D)
			snprintf(lname, sizeof(lname), "conv%ux%u", l->kh, l->kw);
		else
			snprintf(lname, sizeof(lname), "%s", innet_dnn_layer_name(l->type));
		snprintf(shape, sizeof(shape), "%ux%ux%u", l->out.c, l->out.h, l->out.w);
		printf("%-5u %-9s %-12s %9llu %10llu %10llu %11llu %11llu\n", i, lname, shape,
		       (unsigned long long)lc.params, (unsigned long long)lc.weight_bytes,
		       (unsigned long long)lc.acc_bytes, (unsigned long long)lc.macs,
		       (unsigned long long)lc.shift_adds);
		tot.params += lc.params;
		tot.weight_bytes += lc.weight_bytes;
		tot.acc_bytes += lc.acc_bytes;
		tot.macs += lc.macs;
		tot.shift_adds += lc.shift_adds;
	}
	printf("%-5s %-9s %-12s %9llu %10llu %10llu %11llu %11llu\n", "total", "", "",
	       (unsigned long long)tot.params, (unsigned long long)tot.weight_bytes,
	       (unsigned long long)tot.acc_bytes, (unsigned long long)tot.macs,
	       (unsigned long long)tot.shift_adds);

	/* The same layers as Razavi et al.'s Table 1 counts them (docs/dnn.md,
	 * "The paper's network"): operations = 2 x MACs, memory = parameters
	 * at one byte each + the stage's output values (after its relu/pool)
	 * at one byte each; a first row for the input the client sends. */
	printf("\nTable 1 conventions (Razavi et al.): ops = 2 x MACs; memory = params (1 byte each) + "
	       "output values after relu/pool (1 byte each):\n");
	printf("%-6s %-5s %-9s %-12s %9s %11s %10s\n", "table1", "layer", "type", "output", "params", "ops",
	       "memory");
	char ishape[40];
	snprintf(ishape, sizeof(ishape), "%ux%ux%u", m->in.c, m->in.h, m->in.w);
	uint64_t in_n = (uint64_t)m->in.c * m->in.h * m->in.w;
	printf("%-6s %-5s %-9s %-12s %9u %11u %10llu\n", "table1", "in", "input", ishape, 0u, 0u,
	       (unsigned long long)in_n);
	uint64_t t1_ops = 0, t1_mem = in_n;
	for (uint32_t si = 0; si < p->n_stages; si++) {
		const struct innet_dnn_stage *s = &p->stages[si];
		const struct innet_dnn_layer *l = &m->layers[s->layer];
		uint32_t li = s->post_hi > s->post_lo ? s->post_hi - 1 : s->layer;
		while (li > s->layer && m->layers[li].type == INNET_DNN_FLATTEN)
			li--; /* the shape before flattening */
		const struct innet_dnn_layer *lo = &m->layers[li];
		struct innet_dnn_layer_cost lc;
		innet_dnn_layer_cost(l, &lc);
		char lname[32], shape[40];
		if (l->type == INNET_DNN_CONV2D)
			snprintf(lname, sizeof(lname), "conv%ux%u", l->kh, l->kw);
		else
			snprintf(lname, sizeof(lname), "dense");
		snprintf(shape, sizeof(shape), "%ux%ux%u", lo->out.c, lo->out.h, lo->out.w);
		printf("%-6s %-5u %-9s %-12s %9llu %11llu %10llu\n", "table1", s->layer, lname, shape,
		       (unsigned long long)lc.params, (unsigned long long)(2 * lc.macs),
		       (unsigned long long)(lc.params + s->out_n));
		t1_ops += 2 * lc.macs;
		t1_mem += lc.params + s->out_n;
	}
	printf("%-6s %-5s %-9s %-12s %9llu %11llu %10llu\n", "table1", "total", "", "",
	       (unsigned long long)tot.params, (unsigned long long)t1_ops, (unsigned long long)t1_mem);

	struct innet_dnn_projection *pr = malloc(sizeof(*pr));
	if (pr == NULL)
		return;
	innet_dnn_plan_project(p, o->ops_per_pass, INNET_DNN_TOFINO2_PPS, pr);
	printf("\nper switch and pipeline; PISA budget: %u operations per pass (accumulator updates + "
	       "shift-and-adds); Tofino2: %.1f G packets/s per pipeline\n", o->ops_per_pass,
	       INNET_DNN_TOFINO2_PPS / 1e9);
	printf("%-8s %-5s %-4s %-10s %9s %10s %11s %11s %7s %8s %8s %10s %9s\n", "switch", "stage",
	       "pipe", "layer", "params", "wbytes", "MACs", "shift-adds", "neurons", "pkts-in",
	       "pkts-out", "recirc", "t2-us");
	for (uint32_t si = 0; si < p->n_stages; si++) {
		const struct innet_dnn_stage *s = &p->stages[si];
		const struct innet_dnn_layer *l = &m->layers[s->layer];
		char lname[32];
		if (l->type == INNET_DNN_CONV2D)
			snprintf(lname, sizeof(lname), "conv%ux%u", l->kh, l->kw);
		else
			snprintf(lname, sizeof(lname), "dense");
		for (uint32_t k = 0; k < s->n_pipes; k++) {
			const struct innet_dnn_pipe *pp = &s->pipes[k];
			const struct innet_dnn_pipe_proj *pj = &pr->pipes[si][k];
			printf("%-8s %-5u %-4u %-10s %9llu %10llu %11llu %11llu %7u %8u %8llu %10llu %9.3f\n",
			       t->nodes[leaf_of[si]].name, si, k, lname, (unsigned long long)pp->params,
			       (unsigned long long)pp->weight_bytes, (unsigned long long)pp->macs,
			       (unsigned long long)pp->shift_adds, pp->neurons, s->n_chunks,
			       (unsigned long long)pj->pkts_out, (unsigned long long)pj->recirc, pj->us);
		}
	}
	printf("\ntotal: %llu parameters, %llu weight bytes, %llu MACs, %llu shift-and-adds per inference\n",
	       (unsigned long long)tot.params, (unsigned long long)tot.weight_bytes,
	       (unsigned long long)tot.macs, (unsigned long long)tot.shift_adds);
	printf("Tofino2 projection: %.3f us of pipeline time per inference (stages in series), "
	       "%.0f inferences/s with stages pipelined (slowest stage %.3f us); link and hop "
	       "latency not included\n", pr->latency_us, pr->per_second, pr->slowest_us);
	uint32_t need = innet_dnn_plan_ops_for_latency(p, INNET_DNN_TOFINO2_PPS, 2000.0);
	if (need > 0)
		printf("Tofino2 2 ms check: %s 2 ms at %u operations per pass; under 2 ms from %u "
		       "operations per pass\n", pr->latency_us < 2000.0 ? "under" : "NOT under",
		       o->ops_per_pass, need);
	else
		printf("Tofino2 2 ms check: NOT under 2 ms at any budget up to 2^20 operations per pass\n");
	free(pr);
}

/* The programs a switch runs in the topology JSON (its own, or a copy of the defaults). */
static json_t *switch_programs(json_t *root, json_t *sw)
{
	json_t *progs = json_object_get(sw, "programs");
	if (progs == NULL) {
		json_t *defs = json_object_get(json_object_get(root, "defaults"), "programs");
		progs = defs ? json_deep_copy(defs) : json_array();
		json_object_set_new(sw, "programs", progs);
	}
	return progs;
}

static int dnn_compile(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "out", required_argument, NULL, 'o' },        { "pipes", required_argument, NULL, 'p' },
		{ "max-vals", required_argument, NULL, 'v' },   { "udp", required_argument, NULL, 'u' },
		{ "slots", required_argument, NULL, 's' },      { "timeout-ms", required_argument, NULL, 'T' },
		{ "multiply", required_argument, NULL, 'm' },   { "ops-per-pass", required_argument, NULL, 'b' },
		{ "leaves", required_argument, NULL, 'l' },     { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct compile_opts o = { .pipes = 2, .max_vals = 256, .udp = INNET_DNN_UDP_DEFAULT,
				  .slots = 256, .timeout_ms = 100, .ops_per_pass = 48,
				  .multiply = "shift" };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:p:v:u:s:T:m:b:l:h", opts, NULL)) != -1) {
		uint64_t v = 0;
		switch (c) {
		case 'o': o.out = optarg; continue;
		case 'm': o.multiply = optarg; continue;
		case 'l': o.leaves = optarg; continue;
		case 'h': dnn_usage(stdout); return 0;
		case 'p': if (innet_parse_u64(optarg, 1, INNET_DNN_MAX_PIPES, &v)) return dnn_bad_num("compile", "--pipes", optarg, 1, INNET_DNN_MAX_PIPES); o.pipes = (uint32_t)v; break;
		case 'v': if (innet_parse_u64(optarg, 1, 1024, &v)) return dnn_bad_num("compile", "--max-vals", optarg, 1, 1024); o.max_vals = (uint32_t)v; break;
		case 'u': if (innet_parse_u64(optarg, 1, 65535 - INNET_DNN_MAX_PIPES, &v)) return dnn_bad_num("compile", "--udp", optarg, 1, 65535 - INNET_DNN_MAX_PIPES); o.udp = (uint32_t)v; break;
		case 's': if (innet_parse_u64(optarg, 1, 65536, &v)) return dnn_bad_num("compile", "--slots", optarg, 1, 65536); o.slots = (uint32_t)v; break;
		case 'T': if (innet_parse_u64(optarg, 1, 60000, &v)) return dnn_bad_num("compile", "--timeout-ms", optarg, 1, 60000); o.timeout_ms = (uint32_t)v; break;
		case 'b': if (innet_parse_u64(optarg, 1, 1u << 20, &v)) return dnn_bad_num("compile", "--ops-per-pass", optarg, 1, 1u << 20); o.ops_per_pass = (uint32_t)v; break;
		default: return dnn_bad("compile", "unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		return dnn_bad("compile", "needs MODEL and TOPOLOGY (got %d arguments)", argc - optind);
	if (strcmp(o.multiply, "shift") && strcmp(o.multiply, "mul"))
		return dnn_bad("compile", "--multiply wants shift or mul, not '%s'", o.multiply);
	const char *model_path = argv[optind], *topo_path = argv[optind + 1];
	char err[4096];
	struct innet_dnn_model m;
	if (innet_dnn_model_load(model_path, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn compile: %s\n", err);
		return 1;
	}
	int rc = 1;
	struct innet_dnn_plan p;
	struct innet_topology *t = NULL;
	json_t *root = NULL;
	bool *is_leaf = NULL;
	if (innet_dnn_plan_build(&m, o.pipes, o.max_vals, &p, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn compile: %s: %s\n", model_path, err);
		goto out_model;
	}
	t = innet_topology_load(topo_path, err, sizeof(err));
	if (t == NULL) {
		fprintf(stderr, "innet dnn compile: %s\n", err);
		goto out_plan;
	}
	/* Leaves: switches with a host, in file order (or --leaves). */
	uint32_t leaf_of[INNET_DNN_MAX_STAGES], n_leaves = 0;
	is_leaf = calloc(t->n_switches, sizeof(bool));
	if (is_leaf == NULL)
		goto out_topo;
	for (uint32_t i = 0; i < t->n_links; i++) {
		const struct innet_topo_link *l = &t->links[i];
		if (t->nodes[l->a].kind == INNET_TOPO_HOST && l->b < t->n_switches)
			is_leaf[l->b] = true;
		if (t->nodes[l->b].kind == INNET_TOPO_HOST && l->a < t->n_switches)
			is_leaf[l->a] = true;
	}
	if (o.leaves != NULL) {
		char buf[1024];
		snprintf(buf, sizeof(buf), "%s", o.leaves);
		for (char *tok = strtok(buf, ","); tok != NULL; tok = strtok(NULL, ",")) {
			int ix = innet_topology_find(t, tok);
			if (ix < 0 || (uint32_t)ix >= t->n_switches || n_leaves == INNET_DNN_MAX_STAGES) {
				fprintf(stderr, "innet dnn compile: --leaves: '%s' is not a switch of %s\n",
					tok, topo_path);
				goto out_topo;
			}
			leaf_of[n_leaves++] = (uint32_t)ix;
		}
	} else {
		for (uint32_t i = 0; i < t->n_switches && n_leaves < INNET_DNN_MAX_STAGES; i++)
			if (is_leaf[i])
				leaf_of[n_leaves++] = i;
	}
	if (n_leaves < p.n_stages) {
		fprintf(stderr, "innet dnn compile: the model has %u stages (conv2d/dense layers) and %s "
				"has %u leaves to put them on\n", p.n_stages, topo_path, n_leaves);
		goto out_topo;
	}
	report(&m, &p, t, leaf_of, &o);
	rc = 0;
	if (o.out == NULL)
		goto out_topo;
	if (innet_dnn_plan_check_layer(&p, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn compile: the report stands, but the fabric's layer program "
				"cannot run this plan: %s\n", err);
		rc = 1;
		goto out_topo;
	}

	/* The derived topology: every leaf runs o.pipes dnn_layer instances (on
	 * udp .. udp + pipes - 1; transit-only where it hosts no stage or the stage
	 * has fewer pipelines); every other switch forwards those ports. */
	rc = 1;
	char abs_model[PATH_MAX];
	if (realpath(model_path, abs_model) == NULL) {
		fprintf(stderr, "innet dnn compile: %s: %s\n", model_path, strerror(errno));
		goto out_topo;
	}
	json_error_t jerr;
	root = json_load_file(topo_path, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		fprintf(stderr, "innet dnn compile: %s: %s\n", topo_path, jerr.text);
		goto out_topo;
	}
	char name[128];
	snprintf(name, sizeof(name), "%s-dnn", t->name);
	json_object_set_new(root, "name", json_string(name));
	char sd[4200];
	snprintf(sd, sizeof(sd), "%s-dnn", t->state_dir);
	json_object_set_new(root, "state_dir", json_string(sd));
	json_t *nodes = json_array();
	for (uint32_t s = 0; s < p.n_stages; s++)
		json_array_append_new(nodes, json_integer(t->nodes[leaf_of[s]].node_id));
	json_t *sws = json_object_get(root, "switches");
	for (uint32_t i = 0; i < t->n_switches; i++) {
		json_t *sw = json_array_get(sws, i), *progs = switch_programs(root, sw);
		int stage = -1;
		for (uint32_t s = 0; s < p.n_stages; s++)
			if (leaf_of[s] == i)
				stage = (int)s;
		bool leaf = is_leaf[i] || stage >= 0;
		if (!leaf) {
			json_t *udp = json_array();
			for (uint32_t k = 0; k < o.pipes; k++)
				json_array_append_new(udp, json_integer(o.udp + k));
			json_array_append_new(progs, json_pack("{s:s, s:s, s:o, s:{s:s}}", "name", "dnn_fwd",
							       "program", "forward", "udp", udp, "args",
							       "routes", "auto"));
			continue;
		}
		for (uint32_t k = 0; k < o.pipes; k++) {
			char iname[32];
			snprintf(iname, sizeof(iname), "dnn%u", k);
			json_t *args = json_pack("{s:s, s:I, s:I, s:i, s:i, s:s, s:O}", "routes", "auto",
						 "udp_base", (json_int_t)o.udp, "slots", (json_int_t)o.slots,
						 "timeout_ms", o.timeout_ms, "max_vals", o.max_vals,
						 "multiply", o.multiply, "nodes", nodes);
			if (stage >= 0 && k < p.stages[stage].n_pipes) {
				json_object_set_new(args, "model", json_string(abs_model));
				json_object_set_new(args, "stage", json_integer(stage));
				json_object_set_new(args, "pipe", json_integer(k));
				json_object_set_new(args, "pipes", json_integer(o.pipes));
			}
			json_array_append_new(progs, json_pack("{s:s, s:s, s:[i], s:o}", "name", iname,
							       "program", "dnn_layer", "udp", o.udp + k,
							       "args", args));
		}
	}
	json_decref(nodes);
	json_object_set_new(root, "comment",
			    json_sprintf("derived by 'innet dnn compile %s %s': stages on %u leaves, "
					 "%u pipelines each", model_path, topo_path, p.n_stages, o.pipes));
	if (json_dump_file(root, o.out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0) {
		fprintf(stderr, "innet dnn compile: cannot write %s\n", o.out);
		goto out_topo;
	}
	/* Check that what we wrote is a valid topology. */
	struct innet_topology *t2 = innet_topology_load(o.out, err, sizeof(err));
	if (t2 == NULL) {
		fprintf(stderr, "innet dnn compile: the derived topology is invalid (a bug):\n%s\n", err);
		goto out_topo;
	}
	innet_topology_free(t2);
	printf("\nwrote %s (fabric '%s'): run it with 'innet fabric up %s'\n", o.out, name, o.out);
	rc = 0;
out_topo:
	free(is_leaf);
	json_decref(root);
	innet_topology_free(t);
out_plan:
	innet_dnn_plan_free(&p);
out_model:
	innet_dnn_model_free(&m);
	return rc;
}


static int dnn_client(int argc, char **argv, bool eval)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' }, { "from", required_argument, NULL, 'f' },
		{ "testset", required_argument, NULL, 's' },  { "index", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },    { "window", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'W' },  { "retries", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 },
	};
	const char *topo = NULL, *from = NULL, *tsf = NULL, *sub = eval ? "eval" : "infer";
	uint64_t index = 0, count = 0, window = 16, timeout_ms = 300, retries = 10;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "t:f:s:i:n:w:W:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 't': topo = optarg; break;
		case 'f': from = optarg; break;
		case 's': tsf = optarg; break;
		case 'i': if (innet_parse_u64(optarg, 0, UINT32_MAX, &index)) return dnn_bad_num(sub, "--index", optarg, 0, UINT32_MAX); break;
		case 'n': if (innet_parse_u64(optarg, 1, 1u << 20, &count)) return dnn_bad_num(sub, "--count", optarg, 1, 1u << 20); break;
		case 'w': if (innet_parse_u64(optarg, 1, 4096, &window)) return dnn_bad_num(sub, "--window", optarg, 1, 4096); break;
		case 'W': if (innet_parse_u64(optarg, 1, 600000, &timeout_ms)) return dnn_bad_num(sub, "--timeout", optarg, 1, 600000); break;
		case 'r': if (innet_parse_u64(optarg, 0, 1000, &retries)) return dnn_bad_num(sub, "--retries", optarg, 0, 1000); break;
		case 'h': dnn_usage(stdout); return 0;
		default: return dnn_bad(sub, "unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind != argc)
		return dnn_bad(sub, "unexpected argument '%s'", argv[optind]);
	if (topo == NULL || from == NULL || tsf == NULL)
		return dnn_bad(sub, "missing%s%s%s", topo == NULL ? " --topology FILE" : "",
			       from == NULL ? " --from HOST" : "", tsf == NULL ? " --testset FILE" : "");
	char err[1024];
	struct innet_dnn_client *d = innet_dnn_client_open(topo, from, err, sizeof(err));
	if (d == NULL) {
		fprintf(stderr, "innet dnn: %s\n", err);
		return 1;
	}
	const struct innet_dnn_model *m = innet_dnn_client_model(d);
	int rc = 1;
	struct innet_dnn_testset ts;
	if (innet_dnn_testset_load(tsf, &ts, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn: %s\n", err);
		goto out_dep;
	}
	if (memcmp(&ts.in, &m->in, sizeof(ts.in)) != 0) {
		fprintf(stderr, "innet dnn %s: the inputs of %s are %ux%ux%u (CxHxW); the model "
			"deployed in %s expects %ux%ux%u\n", sub, tsf, ts.in.c, ts.in.h, ts.in.w, topo,
			m->in.c, m->in.h, m->in.w);
		goto out_ts;
	}
	/* eval: the whole test set, or --count inferences cycling through it */
	uint32_t n = eval ? (count ? (uint32_t)count : ts.count) : 1;
	if (!eval && index >= ts.count) {
		fprintf(stderr, "innet dnn: --index %llu: the test set has %u samples\n",
			(unsigned long long)index, ts.count);
		goto out_ts;
	}
	uint32_t in_n = innet_dnn_shape_n(m->in);
	uint32_t *samples = calloc(n, sizeof(*samples));
	const int8_t **inputs = calloc(n, sizeof(*inputs));
	struct innet_dnn_result *res = calloc(n, sizeof(*res));
	uint64_t *lat = calloc(n, sizeof(*lat));
	if (samples == NULL || inputs == NULL || res == NULL || lat == NULL) {
		fprintf(stderr, "innet dnn: out of memory for %u inferences\n", n);
		goto out_mem;
	}
	for (uint32_t i = 0; i < n; i++) {
		samples[i] = eval ? i % ts.count : (uint32_t)index;
		inputs[i] = ts.inputs + (size_t)samples[i] * in_n;
	}
	uint64_t retried = 0, t0 = innet_now_ns();
	struct innet_dnn_run_opts ro = { .window = eval ? (uint32_t)window : 1,
					 .timeout_ms = (uint32_t)timeout_ms, .retries = (uint32_t)retries };
	if (innet_dnn_client_run(d, inputs, n, &ro, res, &retried, err, sizeof(err)) != 0) {
		fprintf(stderr, "innet dnn: %s\n", err);
		goto out_mem;
	}
	double secs = (double)(innet_now_ns() - t0) / 1e9;
	uint32_t correct = 0, agree = 0, ref_correct = 0;
	int32_t ref[INNET_DNN_CLIENT_MAX_CLASSES];
	for (uint32_t i = 0; i < n; i++) {
		const struct innet_dnn_result *r = &res[i];
		uint32_t smp = samples[i];
		int rcls = innet_dnn_ref_infer(m, inputs[i], ref);
		uint32_t cls = innet_dnn_argmax(r->logits, m->n_classes);
		bool same = memcmp(ref, r->logits, 4 * m->n_classes) == 0;
		agree += same;
		correct += cls == ts.labels[smp];
		ref_correct += rcls == ts.labels[smp];
		lat[i] = r->latency_ns;
		if (!eval || !same) {
			printf("%ssample %u: class %u (label %u) logits", same ? "" : "MISMATCH ", smp,
			       cls, ts.labels[smp]);
			for (uint32_t k = 0; k < m->n_classes; k++)
				printf(" %d", r->logits[k]);
			if (!same) {
				printf(" | reference");
				for (uint32_t k = 0; k < m->n_classes; k++)
					printf(" %d", ref[k]);
			}
			printf(" (%.1f us%s)\n", r->latency_ns / 1e3, same ? ", equal to the C reference" : "");
		}
	}
	if (eval) {
		printf("%u inferences in %.2f s (%.0f/s, window %llu): accuracy %.2f%% (reference %.2f%%), "
		       "%u/%u bit-exact with the C reference, %llu retried; latency p50 %.1f us p99 %.1f us\n",
		       n, secs, n / secs, (unsigned long long)window, 100.0 * correct / n,
		       100.0 * ref_correct / n, agree, n, (unsigned long long)retried, pct_us(lat, n, 50),
		       pct_us(lat, n, 99));
	}
	rc = agree == n ? 0 : 1;
out_mem:
	free(samples);
	free(inputs);
	free(res);
	free(lat);
out_ts:
	innet_dnn_testset_free(&ts);
out_dep:
	innet_dnn_client_close(d);
	return rc;
}

int cmd_dnn(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		dnn_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "ref"))
		return dnn_ref(argc - 1, argv + 1);
	if (!strcmp(argv[1], "compile"))
		return dnn_compile(argc - 1, argv + 1);
	if (!strcmp(argv[1], "time"))
		return dnn_time(argc - 1, argv + 1);
	if (!strcmp(argv[1], "infer"))
		return dnn_client(argc - 1, argv + 1, false);
	if (!strcmp(argv[1], "eval"))
		return dnn_client(argc - 1, argv + 1, true);
	fprintf(stderr, "innet dnn: unknown subcommand '%s'\n", argv[1]);
	dnn_usage(stderr);
	return 2;
}
