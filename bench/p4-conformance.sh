# shellcheck shell=bash
# bench: p4c's bmv2 STF corpus on BMv2, innet user space and innet XDP: passes per target, refusals, mismatches
# timeout: 7200
#
# bench/p4-conformance.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# Runs every testdata/p4_16_samples/*-bmv2.stf test of a p4c source tree
# (--p4c DIR or P4C_SRC; nothing of it is copied into the project) through
# tools/p4/p4test corpus: each program compiled with p4c-bm2-ss (cached by
# source hash in the cache directory, so later runs skip p4c), the STF script
# run on BMv2's simple_switch, on innet's user-space engine and on innet's
# XDP target (`innet p4 run`), the frames out compared with the test's
# expectations port by port. One JSON row per test with its outcome and
# reason per target goes to OUT/conformance.json, the failures grouped by
# target and cause to OUT/failures.txt.
#
#   RESULT p4-conformance total=… compiled=… bmv2_pass=… user_pass=… xdp_pass=…
#          refused=… mismatched=… crashed=… user_of_bmv2=… xdp_of_bmv2=… …
#
# user_of_bmv2 is the fraction of the tests BMv2 passes that innet's user
# space passes; mismatched counts tests BMv2 passes and innet runs (does not
# refuse) with other frames out; crashed counts crashes and hangs on any
# target. The XDP target needs root (without it: --targets bmv2,user).

bench_usage() {
	cat <<'EOF2'
usage: bench/run p4-conformance [options]
  --p4c DIR         p4c source tree (default: $P4C_SRC)
  --targets LIST    bmv2,user,xdp (default; xdp needs root)
  --list FILE       only the tests named in FILE (one name per line)
  --limit N         the first N tests only
  --time-limit S    start no test after S seconds (the rest: not_run)
  --timeout S       per test and target (default 60)
  --jobs N          tests run in parallel (default 2)
  --out DIR         where conformance.json, failures.txt and the compile
                    cache go (default bench/results/p4-conformance)
Tools: p4c-bm2-ss (P4C_BM2_SS or PATH), simple_switch and simple_switch_CLI
(SIMPLE_SWITCH, SIMPLE_SWITCH_CLI or PATH), build/innet.
EOF2
}

bench_main() {
	local p4c_src=${P4C_SRC:-} targets=bmv2,user,xdp list="" limit=0 tlimit="" timeout=60 jobs=2
	local out="$BENCH_RESULTS/p4-conformance"
	while [ $# -gt 0 ]; do
		case $1 in
		--p4c) p4c_src=${2:?}; shift ;;
		--targets) targets=${2:?}; shift ;;
		--list) list=${2:?}; shift ;;
		--limit) limit=${2:?}; shift ;;
		--time-limit) tlimit=${2:?}; shift ;;
		--timeout) timeout=${2:?}; shift ;;
		--jobs) jobs=${2:?}; shift ;;
		--out) out=${2:?}; shift ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	[ -n "$p4c_src" ] || bench_usage_error "no p4c source tree (--p4c DIR or P4C_SRC)"
	[ -d "$p4c_src/testdata/p4_16_samples" ] || bench_die "$p4c_src has no testdata/p4_16_samples"
	if [[ $targets == *xdp* ]] && [ "$(id -u)" -ne 0 ]; then
		bench_die "the XDP target needs root (or --targets bmv2,user)"
	fi
	bench_build innet
	bench_param p4c_src "$p4c_src"
	bench_param targets "$targets"
	local args=(corpus "$p4c_src" --targets "$targets" --timeout "$timeout" --jobs "$jobs" --out "$out")
	[ -n "$list" ] && args+=(--list "$list")
	[ "$limit" != 0 ] && args+=(--limit "$limit")
	[ -n "$tlimit" ] && args+=(--time-limit "$tlimit")
	bench_log "running $(ls "$p4c_src"/testdata/p4_16_samples/*-bmv2.stf | wc -l) tests; rows in $out/conformance.json"
	local rc=0
	INNET="$BENCH_INNET_BIN" /usr/bin/python3 "$BENCH_ROOT/tools/p4/p4test" "${args[@]}" \
		>"$BENCH_TMP/corpus.out" || rc=$?
	[ $rc -eq 77 ] && bench_die "$(tail -n 1 "$BENCH_TMP/corpus.out")"
	local line
	line=$(grep '^RESULT p4-conformance ' "$BENCH_TMP/corpus.out" | tail -n 1) ||
		bench_die "the runner printed no RESULT (exit $rc): $(tail -n 3 "$BENCH_TMP/corpus.out")"
	bench_log "failures by target and cause: $out/failures.txt"
	# shellcheck disable=SC2086
	bench_result ${line#RESULT p4-conformance }
}
