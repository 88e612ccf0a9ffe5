# shellcheck shell=bash
# bench: DNN inference through the fabric vs the C integer and float references: latency p50/p99, inferences/s
# timeout: 900
#
# bench/inference.sh — sourced by bench/run (see bench/lib.sh for the helpers).
#
#   references (this process, one core):  innet dnn time MODEL TESTSET
#       the C integer reference and the float reference, one inference at a time
#   fabric (loopback, 2 spines x N leaves, one stage per leaf):
#       innet dnn eval --window 1   latency p50/p99 (one inference in flight)
#       innet dnn eval --window W   inferences/s with W in flight (stages overlap)
#
# Two models: the shipped digits model (3 stages, tiny: hops dominate) and
# mini-AlexNet with random weights (6 stages, ~10.9 M MACs: compute-bound),
# the latter in both multiply modes of the layer program (shift-and-add, the
# paper's and the default; plain multiply). Each round runs the references and
# then the fabric, so that drift in the machine's load hits both alike; the
# figures are medians over the rounds.
#
# RESULT: per model (digits, alexnet, alexnet_mul) ref_int_{p50,p99}_us,
# ref_int_per_s, ref_float_{p50,p99}_us, ref_float_per_s, fabric_{p50,p99}_us,
# fabric_per_s (window W); ratio = alexnet fabric p50 / integer reference p50
# (target <= 1.5); pipeline = alexnet fabric inferences/s (window W) / integer
# reference inferences/s (target >= 1.0); ratio_mul, pipeline_mul the same in
# plain-multiply mode; digits_ratio, digits_pipeline; *_cpu_us the CPU time
# per inference (the reference's thread; the sum over the fabric's switch
# processes, from /proc, during the throughput run) and cpu_ratio(_mul) =
# fabric / reference of those for mini-AlexNet: the fabric's total work, which
# no share of a loaded machine can flatter.

bench_usage() {
	cat <<'EOF'
usage: bench/run inference [options]
  --rounds N        measured rounds (default 3)
  --count N         inferences per fabric measurement (default 64; the test
                    sets are cycled)
  --window W        inferences in flight for the throughput figure (default 8)
  --quick           1 round of 16 inferences (a smoke test, not a measurement)
EOF
}

inf_rounds=3
inf_count=64
inf_window=8
inf_fabs=()

inf_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--rounds) inf_rounds=${2:?}; shift ;;
		--count) inf_count=${2:?}; shift ;;
		--window) inf_window=${2:?}; shift ;;
		--quick) inf_rounds=1; inf_count=16 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[[ $inf_rounds =~ ^[1-9][0-9]?$ ]] || bench_usage_error "--rounds: 1..99"
	[[ $inf_count =~ ^[1-9][0-9]{0,4}$ ]] || bench_usage_error "--count: 1..99999"
	[[ $inf_window =~ ^[1-9][0-9]{0,2}$ ]] || bench_usage_error "--window: 1..999"
}

# Stop what is still running (a fabric up in flight first), take every fabric
# this benchmark brought up down again, then the usual cleanup.
inf_cleanup() {
	local rc=$? f p
	for p in "${BENCH_PIDS[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			bench_stop "$p" || true
		fi
	done
	for f in "${inf_fabs[@]}"; do
		timeout 30 "$BENCH_INNET_BIN" fabric down "$f" >/dev/null 2>&1 || true
	done
	(exit "$rc")
	bench_cleanup
}

# inf_topology SRC DST NAME ADDR_BASE HOST_PREFIX: a copy of SRC with its own
# name, state directory and addresses, so it can run beside the test suite's.
inf_topology() {
	# the state directory is under the scratch files: removed with them
	/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$1" "$2" --name "$3" \
		--state-dir "$BENCH_TMP/state-$3" --addr-base "$4" --hosts "$5" || bench_die "cannot write $2"
}

# inf_up TAG MODEL TOPOLOGY COMPILE-ARGS...: compile and bring the fabric up.
inf_up() {
	local tag=$1 model=$2 topo=$3 ipid
	shift 3
	timeout 60 "$BENCH_INNET_BIN" dnn compile "$model" "$topo" "$@" --out "$BENCH_TMP/$tag-fab.json" \
		>"$BENCH_TMP/$tag-compile.out" 2>&1 || bench_die "compile $tag: $(tail -n 3 "$BENCH_TMP/$tag-compile.out")"
	inf_fabs+=("$BENCH_TMP/$tag-fab.json")
	bench_spawn ipid "$tag-up" "" 90 "$BENCH_INNET_BIN" fabric up "$BENCH_TMP/$tag-fab.json"
	bench_wait "$ipid" || bench_die "fabric up $tag: $(tail -n 5 "$BENCH_TMP/$tag-up.err")"
}

# inf_eval TAG TESTSET WINDOW COUNT: one eval through fabric TAG; sets
# inf_p50 inf_p99 (us) and inf_per_s; dies unless every logit is bit-exact.
inf_eval() {
	local tag=$1 ts=$2 window=$3 count=$4 ipid line
	bench_spawn ipid "$tag-eval" "" 300 "$BENCH_INNET_BIN" dnn eval --topology "$BENCH_TMP/$tag-fab.json" \
		--from h0 --testset "$ts" --count "$count" --window "$window" --timeout 10000 --retries 5
	bench_wait "$ipid" || bench_die "eval $tag: $(tail -n 3 "$BENCH_TMP/$tag-eval.out" "$BENCH_TMP/$tag-eval.err")"
	line=$(tail -n 1 "$BENCH_TMP/$tag-eval.out")
	grep -q "$count/$count bit-exact" <<<"$line" || bench_die "eval $tag: not bit-exact: $line"
	inf_per_s=$(sed -nE 's/.* s \(([0-9.]+)\/s, window.*/\1/p' <<<"$line")
	inf_p50=$(sed -nE 's/.*latency p50 ([0-9.]+) us.*/\1/p' <<<"$line")
	inf_p99=$(sed -nE 's/.*p99 ([0-9.]+) us.*/\1/p' <<<"$line")
	[ -n "$inf_per_s" ] && [ -n "$inf_p50" ] && [ -n "$inf_p99" ] || bench_die "eval $tag: cannot read '$line'"
}

# inf_fabric_cpu TAG: CPU seconds (user + system) used so far by the switch
# processes of fabric TAG (their pids are in its state directory).
inf_fabric_cpu() {
	/usr/bin/python3 - "$BENCH_TMP/$1-fab.json" <<'PYEOF' || bench_die "cannot read the CPU time of fabric $1"
import json, os, sys
sd = json.load(open(sys.argv[1]))["state_dir"]
tick = os.sysconf("SC_CLK_TCK")
total = 0
for s in json.load(open(os.path.join(sd, "fabric.json")))["switches"]:
    f = open("/proc/%d/stat" % s["pid"]).read().rsplit(")", 1)[1].split()
    total += int(f[11]) + int(f[12])
print("%.3f" % (total / tick))
PYEOF
}

# inf_ref MODEL TESTSET: the references (one round of the test set each).
inf_ref() {
	local ipid
	bench_spawn ipid ref "" 300 "$BENCH_INNET_BIN" dnn time "$1" "$2" --rounds 1
	bench_wait "$ipid" || bench_die "dnn time $1: $(tail -n 3 "$BENCH_TMP/ref.err")"
}

bench_main() {
	inf_parse "$@"
	trap inf_cleanup EXIT
	bench_build innet
	bench_param rounds "$inf_rounds"
	bench_param count "$inf_count"
	bench_param window "$inf_window"
	bench_param workers_digits 1
	bench_param workers_alexnet 2
	local root=$BENCH_ROOT/examples model r tag ts
	inf_topology "$root/dnn-spine-leaf.json" "$BENCH_TMP/digits-topo.json" dnn-bench-digits 127.0.72.0 127.0.73
	inf_topology "$root/mini-alexnet-spine-leaf.json" "$BENCH_TMP/alexnet-topo.json" dnn-bench-alexnet 127.0.74.0 127.0.75
	bench_log "bringing up 3 fabrics (digits: 3 stages x 2 pipelines; mini-AlexNet: 6 stages x 8, shift and mul)"
	inf_up digits "$root/dnn-digits.innet" "$BENCH_TMP/digits-topo.json" --leaves leaf1,leaf2,leaf3
	inf_up alexnet "$root/mini-alexnet.innet" "$BENCH_TMP/alexnet-topo.json" --pipes 8 --max-vals 1024 \
		--slots 64 --timeout-ms 5000
	# the same fabric description in multiply mode: another name, other addresses
	inf_topology "$root/mini-alexnet-spine-leaf.json" "$BENCH_TMP/alexnet_mul-topo.json" dnn-bench-alexnet-mul \
		127.0.76.0 127.0.77
	inf_up alexnet_mul "$root/mini-alexnet.innet" "$BENCH_TMP/alexnet_mul-topo.json" --pipes 8 --max-vals 1024 \
		--slots 64 --timeout-ms 5000 --multiply mul

	declare -A v=()
	local k
	for ((r = 1; r <= inf_rounds; r++)); do
		for tag in digits alexnet alexnet_mul; do
			model=$root/dnn-digits
			[ "$tag" = digits ] || model=$root/mini-alexnet
			ts=$model.testset
			inf_ref "$model.innet" "$ts"
			for k in int_p50_us int_p99_us int_per_s float_p50_us float_p99_us float_per_s; do
				v[$tag.ref_$k]+="$(bench_kv "$k" "$BENCH_TMP/ref.out") "
			done
			inf_eval "$tag" "$ts" 1 "$inf_count"
			v[$tag.fabric_p50_us]+="$inf_p50 "
			v[$tag.fabric_p99_us]+="$inf_p99 "
			local lat_per_s=$inf_per_s lat_p50=$inf_p50 cpu0 cpu1 cpu_us
			cpu0=$(inf_fabric_cpu "$tag")
			inf_eval "$tag" "$ts" "$inf_window" "$((inf_count * 2))"
			cpu1=$(inf_fabric_cpu "$tag")
			cpu_us=$(bench_calc %.1f "($cpu1 - $cpu0) * 1e6 / ($inf_count * 2)")
			v[$tag.fabric_per_s]+="$inf_per_s "
			v[$tag.fabric_cpu_us]+="$cpu_us "
			v[$tag.ref_int_cpu_us]+="$(bench_kv int_cpu_us "$BENCH_TMP/ref.out") "
			bench_record round="$r" model="$tag" \
				ref_int_p50_us="$(bench_kv int_p50_us "$BENCH_TMP/ref.out")" \
				ref_int_per_s="$(bench_kv int_per_s "$BENCH_TMP/ref.out")" \
				ref_float_p50_us="$(bench_kv float_p50_us "$BENCH_TMP/ref.out")" \
				fabric_p50_us="$lat_p50" fabric_window1_per_s="$lat_per_s" \
				fabric_window_per_s="$inf_per_s" fabric_cpu_us="$cpu_us" \
				ref_int_cpu_us="$(bench_kv int_cpu_us "$BENCH_TMP/ref.out")" loadavg="$(cut -d' ' -f1 /proc/loadavg)"
			bench_log "round $r $tag: reference p50 $(bench_kv int_p50_us "$BENCH_TMP/ref.out") us" \
				"($(bench_kv int_per_s "$BENCH_TMP/ref.out")/s), float p50" \
				"$(bench_kv float_p50_us "$BENCH_TMP/ref.out") us; fabric p50 $lat_p50 us," \
				"$inf_per_s/s with $inf_window in flight, $cpu_us us of switch CPU per inference"
		done
	done

	local key med
	declare -A m=()
	for key in "${!v[@]}"; do
		# shellcheck disable=SC2086 # a list of numbers
		med=$(bench_median ${v[$key]})
		m[$key]=$med
	done
	for tag in digits alexnet alexnet_mul; do
		for k in ref_int_p50_us ref_int_p99_us ref_int_per_s ref_float_p50_us ref_float_p99_us \
			ref_float_per_s ref_int_cpu_us fabric_p50_us fabric_p99_us fabric_per_s fabric_cpu_us; do
			bench_result "${tag}_$k=${m[$tag.$k]}"
		done
	done
	bench_result "ratio=$(bench_calc %.3f "${m[alexnet.fabric_p50_us]} / ${m[alexnet.ref_int_p50_us]}")"
	bench_result "pipeline=$(bench_calc %.3f "${m[alexnet.fabric_per_s]} / ${m[alexnet.ref_int_per_s]}")"
	bench_result "ratio_mul=$(bench_calc %.3f "${m[alexnet_mul.fabric_p50_us]} / ${m[alexnet_mul.ref_int_p50_us]}")"
	bench_result "pipeline_mul=$(bench_calc %.3f "${m[alexnet_mul.fabric_per_s]} / ${m[alexnet_mul.ref_int_per_s]}")"
	bench_result "cpu_ratio=$(bench_calc %.3f "${m[alexnet.fabric_cpu_us]} / ${m[alexnet.ref_int_cpu_us]}")"
	bench_result "cpu_ratio_mul=$(bench_calc %.3f "${m[alexnet_mul.fabric_cpu_us]} / ${m[alexnet_mul.ref_int_cpu_us]}")"
	bench_result "digits_ratio=$(bench_calc %.3f "${m[digits.fabric_p50_us]} / ${m[digits.ref_int_p50_us]}")"
	bench_result "digits_pipeline=$(bench_calc %.3f "${m[digits.fabric_per_s]} / ${m[digits.ref_int_per_s]}")"
	bench_result "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
}
