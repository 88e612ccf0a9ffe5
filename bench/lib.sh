# shellcheck shell=bash
# bench/lib.sh — shared helpers for bench/run and the benchmarks (bench/NAME.sh).
#
# Sourced, never run. bench/run calls bench_begin, sources bench/NAME.sh,
# calls its bench_main with the remaining arguments, then bench_finish.
# A benchmark uses:
#
#   bench_log MSG...                  progress on stderr
#   bench_die MSG...                  error on stderr, exit 1
#   bench_usage_error MSG...          bad argument: message, exit 2
#   bench_build TOOL...               build (make -s); TOOL = a bench/src tool or "innet"
#   bench_spawn VAR TAG CPU SECS CMD  start CMD in the background under `timeout SECS`,
#                                     pinned to CPU ("" = not pinned); its pid goes in VAR,
#                                     its output in $BENCH_TMP/TAG.out and TAG.err
#   bench_wait_ready PID TAG REGEX S  wait until TAG.err matches REGEX (S seconds at most)
#   bench_wait PID                    wait for a spawned process; returns its status
#   bench_stop PID                    SIGTERM, then SIGKILL to its group after 3 s
#   bench_child_pid PID               the pid of CMD itself (PID is its timeout(1))
#   bench_kv KEY FILE                 value of KEY=value in the last line of FILE
#   bench_median V...                 median of numbers
#   bench_udp_drops IP PORT           kernel drop count of the UDP socket bound there
#   bench_param KEY VALUE             a parameter, recorded in the JSON file
#   bench_record KEY=VALUE...         one measured run, recorded in the JSON file
#   bench_result KEY=VALUE...         a figure for the RESULT line (and the JSON file)
#
# Every process a benchmark starts must go through bench_spawn: it is bounded
# by `timeout`, tracked, and stopped by the exit trap if still running. The
# trap never touches processes it did not start.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_ROOT=$(cd "$BENCH_DIR/.." && pwd)
BENCH_BIN="$BENCH_ROOT/build/bench"
BENCH_INNET_BIN="$BENCH_ROOT/build/innet"
# Results: bench/results/ (untracked: .gitignore lists its *.json, *.png and
# *.log), or BENCH_RESULTS_DIR.
BENCH_RESULTS=${BENCH_RESULTS_DIR:-$BENCH_DIR/results}
BENCH_NAME=""
BENCH_TMP=""
BENCH_T0=0
BENCH_PIDS=()
BENCH_EXIT_HOOKS=() # commands bench_cleanup runs first (fabrics, namespaces a bench made)
BENCH_PARAMS=()    # "key<TAB>value"
BENCH_RUNS=()      # JSON objects
BENCH_RESULT=()    # "key=value"

bench_log() {
	printf '[%s %s] %s\n' "${BENCH_NAME:-bench}" "$(date +%H:%M:%S)" "$*" >&2
}

bench_die() {
	bench_log "error: $*"
	exit 1
}

bench_usage_error() {
	bench_log "$*"
	if declare -F bench_usage >/dev/null; then
		bench_usage >&2
	fi
	exit 2
}

# The names of the benchmarks: bench/*.sh except this file.
bench_list_names() {
	local f n
	for f in "$BENCH_DIR"/*.sh; do
		n=$(basename "$f" .sh)
		[ "$n" = lib ] && continue
		printf '%s\n' "$n"
	done
}

# A header line of a benchmark script: "# KEY: value".
bench_header() {
	sed -n "s/^# $2: //p" "$BENCH_DIR/$1.sh" | head -n 1
}

bench_begin() {
	BENCH_NAME=$1
	BENCH_T0=$(date +%s)
	BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/innet-bench-$BENCH_NAME.XXXXXX")
	trap bench_cleanup EXIT
	trap 'bench_log "interrupted"; exit 130' INT
	trap 'bench_log "terminated (time limit?)"; exit 143' TERM
	bench_log "started; scratch files in $BENCH_TMP"
}

# The kernel's BPF run-time statistics (bpftool prog show: run_cnt,
# run_time_ns) are counted only while kernel.bpf_stats_enabled is on (two
# clock reads per program run, so not during measured runs):
# bench_bpf_stats_on turns them on for a window (1 without bpftool or the
# sysctl), bench_bpf_stats_is_on says whether they are, bench_bpf_stats_off
# puts the old setting back; bench_cleanup does that too.
BENCH_BPF_STATS_OLD=""
bench_bpf_stats_on() {
	[ -z "$BENCH_BPF_STATS_OLD" ] || return 0
	command -v bpftool >/dev/null || return 1
	BENCH_BPF_STATS_OLD=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null) || BENCH_BPF_STATS_OLD=""
	[ -n "$BENCH_BPF_STATS_OLD" ] || return 1
	sysctl -qw kernel.bpf_stats_enabled=1
}
bench_bpf_stats_is_on() {
	[ -n "$BENCH_BPF_STATS_OLD" ]
}
bench_bpf_stats_off() {
	[ -n "$BENCH_BPF_STATS_OLD" ] || return 0
	sysctl -qw kernel.bpf_stats_enabled="$BENCH_BPF_STATS_OLD" 2>/dev/null || true
	BENCH_BPF_STATS_OLD=""
}

# bench_perf_record VAR SECONDS: perf record -a (cpu-clock, 999 Hz) for
# SECONDS into $BENCH_TMP/perf.data, in the background; its pid in VAR (for
# bench_perf_report).
bench_perf_record() {
	bench_spawn "$1" perf "" $((${2%.*} + 60)) perf record -a -e cpu-clock -F 999 \
		-o "$BENCH_TMP/perf.data" -- sleep "$2"
}
# bench_perf_report PID OUT SORT LINES WHAT: wait for that perf record, keep
# the top LINES of its report sorted by SORT (perf --sort) in OUT, and log
# them under "perf (cpu-clock, all CPUs, WHAT), by process and object:".
bench_perf_report() {
	bench_wait "$1" || true
	perf report -i "$BENCH_TMP/perf.data" --no-children --sort "$3" --stdio 2>/dev/null |
		grep '%' | head -n "$4" >"$2" || true
	bench_log "perf (cpu-clock, all CPUs, $5), by process and object:"
	sed 's/^/    /' "$2" >&2
}

bench_cleanup() {
	local rc=$? pid
	trap - EXIT INT TERM
	local hook
	for hook in "${BENCH_EXIT_HOOKS[@]}"; do
		eval "$hook" >/dev/null 2>&1 || true
	done
	bench_bpf_stats_off
	for pid in "${BENCH_PIDS[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			bench_stop "$pid"
		fi
	done
	if [ -n "$BENCH_TMP" ] && [ -d "$BENCH_TMP" ]; then
		if { [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; } || [ "${BENCH_KEEP_TMP:-0}" = 1 ]; then
			bench_log "scratch files kept in $BENCH_TMP"
		else
			rm -rf "$BENCH_TMP"
		fi
	fi
	exit "$rc"
}

# ---------------------------------------------------------------------------
# Building

# Build what the benchmark needs: "innet" (build/innet) or a bench/src tool.
# `make -s` at the root builds everything. In a tree others are editing, that
# can fail for a reason unrelated to the benchmark (a test mid-change): then
# only the needed targets are made, and if that fails too and build/innet is
# not needed, the bench tools are compiled alone with the Makefile's own flags
# (they do not use libinnet).
bench_build() {
	local need_innet=0 tool cflags log="$BENCH_TMP/build.log" targets=()
	for tool in "$@"; do
		if [ "$tool" = innet ]; then
			need_innet=1
			targets+=(build/innet)
		else
			targets+=("build/bench/$tool")
		fi
	done
	if [ -x "$BENCH_ROOT/scripts/install-deps" ] && [ "${BENCH_NO_DEPS:-0}" != 1 ]; then
		if ! "$BENCH_ROOT/scripts/install-deps" >"$BENCH_TMP/deps.log" 2>&1; then
			bench_log "warning: scripts/install-deps failed (see $BENCH_TMP/deps.log); building anyway"
		fi
	fi
	bench_log "building (make -s)"
	if ! timeout 600 make -s -C "$BENCH_ROOT" >"$log" 2>&1; then
		bench_log "warning: make failed (last lines below); making only ${targets[*]}"
		tail -n 5 "$log" >&2
		if ! timeout 600 make -s -C "$BENCH_ROOT" "${targets[@]}" >"$log.2" 2>&1; then
			tail -n 20 "$log.2" >&2
			if [ "$need_innet" = 1 ]; then
				bench_die "cannot build build/innet (BENCH_INNET=raw runs the raw relay in its place)"
			fi
			bench_log "warning: that failed too; compiling the bench tools alone"
			# shellcheck disable=SC2016 # $(CFLAGS) is for make, not the shell
			cflags=$(make -s --no-print-directory -C "$BENCH_ROOT" \
				--eval 'bench-print-flags: ; @echo $(CFLAGS) $(LDFLAGS)' bench-print-flags)
			mkdir -p "$BENCH_BIN"
			for tool in "$@"; do
				# shellcheck disable=SC2086 # cflags is a list of flags
				"${CC:-cc}" $cflags -o "$BENCH_BIN/$tool" "$BENCH_ROOT/bench/src/$tool.c" -lm ||
					bench_die "cannot build bench/src/$tool.c"
			done
		fi
	fi
	for tool in "$@"; do
		if [ "$tool" = innet ]; then
			[ -x "$BENCH_INNET_BIN" ] || bench_die "build/innet missing after make"
		else
			[ -x "$BENCH_BIN/$tool" ] || bench_die "build/bench/$tool missing after make"
		fi
	done
}

# ---------------------------------------------------------------------------
# Processes

# bench_spawn VAR TAG CPU SECS CMD...: run CMD in the background, bounded by
# timeout(1) (SIGTERM at SECS, SIGKILL 2 s later), pinned to CPU unless CPU is
# empty. timeout(1) leads its own process group, so bench_stop can end the
# whole group it started and nothing else.
bench_spawn() {
	local var=$1 tag=$2 cpu=$3 secs=$4 pid
	shift 4
	if [ -n "$cpu" ]; then
		taskset -c "$cpu" timeout -k 2 "$secs" "$@" >"$BENCH_TMP/$tag.out" 2>"$BENCH_TMP/$tag.err" &
	else
		timeout -k 2 "$secs" "$@" >"$BENCH_TMP/$tag.out" 2>"$BENCH_TMP/$tag.err" &
	fi
	pid=$!
	BENCH_PIDS+=("$pid")
	printf -v "$var" '%s' "$pid"
}

# bench_wait_ready PID TAG REGEX SECS: 0 once TAG.err matches REGEX; dies if the
# process exits first or SECS pass.
bench_wait_ready() {
	local pid=$1 tag=$2 re=$3 secs=$4 i
	for ((i = 0; i < secs * 20; i++)); do
		if grep -Eq "$re" "$BENCH_TMP/$tag.err" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$BENCH_TMP/$tag.err" >&2 || true
			bench_die "$tag exited before it was ready"
		fi
		sleep 0.05
	done
	tail -n 20 "$BENCH_TMP/$tag.err" >&2 || true
	bench_die "$tag not ready after ${secs}s"
}

bench_forget() {
	local pid=$1 i
	for i in "${!BENCH_PIDS[@]}"; do
		[ "${BENCH_PIDS[$i]}" = "$pid" ] && unset 'BENCH_PIDS[i]'
	done
	BENCH_PIDS=("${BENCH_PIDS[@]}")
}

# bench_wait PID: wait for a spawned process (bounded by its timeout) and
# return its exit status (124 = killed by its time limit).
bench_wait() {
	local pid=$1 rc=0
	wait "$pid" || rc=$?
	bench_forget "$pid"
	return "$rc"
}

# bench_stop PID: ask a spawned process to stop (SIGTERM, which timeout(1)
# passes on); after 3 s, SIGKILL its process group. Returns its exit status.
bench_stop() {
	local pid=$1 i rc=0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 60; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		bench_log "warning: pid $pid ignored SIGTERM; killing its group"
		kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	bench_forget "$pid"
	return "$rc"
}

# bench_child_pid PID: the process timeout(1) runs for a spawned PID (its
# only child), for reading its /proc entries.
bench_child_pid() {
	local kid
	kid=$({ cat "/proc/$1/task/$1/children" 2>/dev/null || pgrep -P "$1"; } |
		tr ' ' '\n' | grep -m 1 . || true)
	[ -n "$kid" ] || bench_die "no child process under pid $1"
	printf '%s\n' "$kid"
}

# ---------------------------------------------------------------------------
# Numbers

# bench_kv KEY FILE: the value of KEY=value in FILE's last line ("" if absent).
bench_kv() {
	tail -n 1 "$2" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

bench_median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_calc FORMAT EXPR: evaluate an awk expression, printf-formatted.
bench_calc() {
	awk "BEGIN { printf \"$1\", ($2) }"
}

# bench_udp_drops IP PORT: the drops counter of the UDP socket(s) bound to
# IP:PORT, from /proc/net/udp (0 if none). Addresses there are in host byte
# order as hex (little-endian machines assumed).
bench_udp_drops() {
	local a b c d key
	IFS=. read -r a b c d <<<"$1"
	key=$(printf '%02X%02X%02X%02X:%04X' "$d" "$c" "$b" "$a" "$2")
	awk -v k="$key" '$2 == k { s += $NF } END { print s + 0 }' /proc/net/udp
}

# ---------------------------------------------------------------------------
# Results

bench_param() {
	BENCH_PARAMS+=("$1"$'\t'"$2")
}

bench_result() {
	BENCH_RESULT+=("$@")
}

bench_json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/ }
	s=${s//$'\n'/ }
	printf '"%s"' "$s"
}

# A number stays a number, anything else becomes a string.
bench_json_val() {
	if [[ $1 =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] ||
		[[ $1 == true || $1 == false || $1 == null ]]; then
		printf '%s' "$1"
	else
		bench_json_str "$1"
	fi
}

# bench_json_obj KEY=VALUE...: one JSON object on one line.
bench_json_obj() {
	local kv sep=""
	printf '{'
	for kv in "$@"; do
		printf '%s%s: %s' "$sep" "$(bench_json_str "${kv%%=*}")" "$(bench_json_val "${kv#*=}")"
		sep=", "
	done
	printf '}'
}

bench_record() {
	BENCH_RUNS+=("$(bench_json_obj "$@")")
}

# Write bench/results/NAME-<timestamp>.json and NAME-latest.json, and print
# the RESULT line on stdout (the last line the benchmark prints there).
bench_finish() {
	local stamp iso commit dirty=false kernel cpu file kv i params=() sep
	stamp=$(date -u +%Y%m%dT%H%M%SZ)
	iso=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	commit=$(git -C "$BENCH_ROOT" rev-parse --verify -q HEAD 2>/dev/null || echo none)
	# dirty: the code differs from the commit (results are not code)
	if [ -n "$(git -C "$BENCH_ROOT" status --porcelain -- . ':(exclude)bench/results' 2>/dev/null |
		head -n 1)" ]; then
		dirty=true
	fi
	kernel=$(uname -r)
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
	for kv in "${BENCH_PARAMS[@]}"; do
		params+=("${kv%%$'\t'*}=${kv#*$'\t'}")
	done
	mkdir -p "$BENCH_RESULTS"
	file="$BENCH_RESULTS/$BENCH_NAME-$stamp.json"
	{
		printf '{\n'
		printf '  "benchmark": %s,\n' "$(bench_json_str "$BENCH_NAME")"
		printf '  "timestamp": %s,\n' "$(bench_json_str "$iso")"
		printf '  "elapsed_s": %s,\n' "$(($(date +%s) - BENCH_T0))"
		printf '  "git": {"commit": %s, "dirty": %s},\n' "$(bench_json_str "$commit")" "$dirty"
		printf '  "machine": {"nproc": %s, "kernel": %s, "cpu": %s, "loadavg_at_end": %s},\n' \
			"$(nproc)" "$(bench_json_str "$kernel")" "$(bench_json_str "$cpu")" \
			"$(bench_json_str "$(cut -d' ' -f1-3 /proc/loadavg)")"
		printf '  "parameters": %s,\n' "$(bench_json_obj "${params[@]}")"
		printf '  "result": %s,\n' "$(bench_json_obj "${BENCH_RESULT[@]}")"
		printf '  "runs": ['
		sep=""
		for i in "${!BENCH_RUNS[@]}"; do
			printf '%s\n    %s' "$sep" "${BENCH_RUNS[$i]}"
			sep=","
		done
		printf '\n  ]\n}\n'
	} >"$file.tmp"
	mv "$file.tmp" "$file"
	cp "$file" "$BENCH_RESULTS/$BENCH_NAME-latest.json"
	bench_log "wrote ${file#"$BENCH_ROOT"/} and $BENCH_NAME-latest.json"
	printf 'RESULT %s %s\n' "$BENCH_NAME" "${BENCH_RESULT[*]}"
}
