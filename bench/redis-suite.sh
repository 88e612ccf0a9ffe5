# shellcheck shell=bash
# bench: redis's own tests (string, incr, hash, keyspace, expire, multi) against innet kv and a redis-server
# timeout: 2400
#
# bench/redis-suite.sh — sourced by bench/run (see bench/lib.sh).
#
#   runtest --host H --port P ──RESP──▶ innet kv replica r0 (3 acceptors, 3 replicas)
#   runtest --host H --port P ──RESP──▶ redis-server (the same runtest options)
#
# Redis's test suite, from a redis source tree the user gives (--redis-src;
# nothing of it is in this project: its tests/ and runtest are copied to the
# run's scratch directory, so the tree is never written to), run in its
# external-server mode against innet kv and against the Debian redis-server,
# with the same options. No proxy or shim: the suite's own setup (SELECT 9,
# FLUSHALL, FUNCTION FLUSH, CONFIG, DEBUG) reaches innet kv as it is sent.
# In external mode the suite itself skips the tests tagged external:skip;
# every other test runs on both (tags such as needs:debug or needs:repl are
# not filtered: --tags passes a filter to both runs if wanted).
#
# redis-server runs with --enable-debug-command yes (Debian's build refuses
# DEBUG otherwise, and the suite's DEBUG tests would fail on the baseline)
# and no persistence; innet kv with its defaults.
#
# RESULT: innet_pass, redis_pass, total (tests the suite ran against redis),
# ratio = innet_pass / redis_pass (the issue's target: >= 0.9), and the
# failures by reason class. Every test redis passes and innet kv fails is
# logged with its class and why, from bench/redis-suite-reasons.tsv (a test
# no line names is "unclassified": a difference to look at).

bench_usage() {
	cat <<'EOF2'
usage: bench/run redis-suite --redis-src DIR [options]
  --redis-src DIR   a redis source tree (its tests/ and runtest); use the tag of the
                    redis-server installed (redis-server --version), e.g.
                    git --git-dir=REDIS.git archive 7.0.15 tests runtest | tar -x -C DIR
  --units LIST      comma-separated units (default
                    type/string,type/incr,type/hash,keyspace,expire,multi)
  --tags TAGS       runtest --tags for both runs (e.g. "-needs:repl"); default none
  --only-innet      skip the redis-server run (no ratio)
EOF2
}

rs_src=""
rs_units="type/string,type/incr,type/hash,keyspace,expire,multi"
rs_tags=""
rs_only_innet=0
rs_redis_pid=""
rs_run_pid=""
RS_PORT=6395

rs_down() {
	[ -e "$BENCH_TMP/topo.json" ] && timeout 60 "$BENCH_INNET_BIN" kv down "$BENCH_TMP/topo.json" \
		>/dev/null 2>&1
	return 0
}

rs_die() {
	rs_down
	bench_die "$@"
}

# On any exit: the suite's processes (runtest forks its test server and
# client; timeout(1) leads their process group, which we started) and the
# fabric, then the usual cleanup.
rs_exit() {
	local rc=$?
	if [ -n "$rs_run_pid" ] && kill -0 "$rs_run_pid" 2>/dev/null; then
		kill -TERM -- "-$rs_run_pid" 2>/dev/null || true
	fi
	rs_down
	(exit "$rc")
	bench_cleanup
}

# A 127.X.0.0/16 with nothing bound in it (the suite's and other runs' own).
rs_net() {
	local x
	for ((x = 230; x < 250; x++)); do
		if [ -z "$(ss -Hant "src 127.$x.0.0/16" 2>/dev/null)" ] &&
			[ -z "$(ss -Hanu "src 127.$x.0.0/16" 2>/dev/null)" ]; then
			echo "127.$x"
			return 0
		fi
	done
	return 1
}

# rs_runtest TAG HOST: run the suite against HOST:RS_PORT into TAG.out; the
# per-test outcomes into TAG.tests ("ok|err NAME" per line, in order).
rs_runtest() {
	local tag=$1 host=$2 u
	local -a args=(--host "$host" --port "$RS_PORT" --durable)
	IFS=, read -r -a units <<<"$rs_units"
	for u in "${units[@]}"; do args+=(--single "unit/$u"); done
	[ -n "$rs_tags" ] && args+=(--tags "$rs_tags")
	bench_log "$tag: runtest ${args[*]}"
	bench_spawn rs_run_pid "$tag" "" 1100 bash -c 'cd "$1" && shift && exec ./runtest "$@"' _ \
		"$BENCH_TMP/redis-src" "${args[@]}"
	bench_wait "$rs_run_pid" || bench_log "$tag: runtest exited with status $? (failed tests; read on)"
	rs_run_pid=""
	sed 's/\x1b\[[0-9;]*m//g' "$BENCH_TMP/$tag.out" |
		sed -n -e 's/^\[ok\]: \(.*\) ([0-9]* ms)$/ok \1/p' \
			-e 's/^\[\(err\|exception\)\]: \(.*\) in tests\/unit\/.*$/err \2/p' >"$BENCH_TMP/$tag.tests"
	[ -s "$BENCH_TMP/$tag.tests" ] || rs_die "$tag: no test outcome in the suite's output " \
		"($(tail -n 3 "$BENCH_TMP/$tag.out" | tr '\n' ' '))"
}

# The reason class of failing test NAME: "class<TAB>why" from the reasons file.
rs_reason() {
	local name=$1 class pat why
	while IFS=$'\t' read -r class pat why; do
		[ -z "$class" ] || [ "${class:0:1}" = "#" ] && continue
		# shellcheck disable=SC2053 # pat is a glob on purpose
		if [[ $name == $pat ]]; then
			printf '%s\t%s\n' "$class" "$why"
			return
		fi
	done <"$BENCH_DIR/redis-suite-reasons.tsv"
	printf 'unclassified\t%s\n' "a difference to look at"
}

bench_main() {
	while [ $# -gt 0 ]; do
		case $1 in
		--redis-src) rs_src=$2; shift 2 ;;
		--units) rs_units=$2; shift 2 ;;
		--tags) rs_tags=$2; shift 2 ;;
		--only-innet) rs_only_innet=1; shift ;;
		-h|--help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option $1" ;;
		esac
	done
	[ -n "$rs_src" ] || bench_usage_error "--redis-src DIR is required"
	trap rs_exit EXIT
	[ -x "$rs_src/runtest" ] && [ -f "$rs_src/tests/test_helper.tcl" ] ||
		bench_usage_error "$rs_src is not a redis source tree (no runtest, tests/test_helper.tcl)"
	command -v tclsh >/dev/null || bench_die "tclsh not installed (scripts/install-deps: tcl)"
	command -v redis-server >/dev/null || bench_die "redis-server not installed (scripts/install-deps)"
	bench_build innet
	mkdir -p "$BENCH_TMP/redis-src"
	cp -r "$rs_src/runtest" "$rs_src/tests" "$BENCH_TMP/redis-src/" || bench_die "cannot copy $rs_src"
	rm -rf "$BENCH_TMP/redis-src/tests/tmp"
	mkdir -p "$BENCH_TMP/redis-src/tests/tmp"
	local rv src_ver
	rv=$(redis-server --version | sed -n 's/.* v=\([0-9.]*\).*/\1/p')
	src_ver=$(sed -n 's/^#define REDIS_VERSION "\(.*\)"/\1/p' "$rs_src/src/version.h" 2>/dev/null || true)
	bench_param redis_server "$rv"
	bench_param redis_src "$rs_src${src_ver:+ ($src_ver)}"
	[ -n "$src_ver" ] && [ "$src_ver" != "$rv" ] &&
		bench_log "warning: the suite is redis $src_ver's, the server $rv: use the matching tag"
	bench_param units "$rs_units"
	bench_param tags "${rs_tags:-none}"
	local net host
	net=$(rs_net) || bench_die "no free 127.X.0.0/16 in 127.230-249"
	/usr/bin/python3 "$BENCH_ROOT/tools/topology/relocate.py" "$BENCH_ROOT/examples/kv.json" \
		"$BENCH_TMP/topo.json" --name "bench-rs-${net#127.}" --state-dir "$BENCH_TMP/fabric" \
		--addr-base "$net.70.0" --hosts "$net.71"
	host=$net.71.1
	timeout 60 "$BENCH_INNET_BIN" kv up "$BENCH_TMP/topo.json" --port "$RS_PORT" >"$BENCH_TMP/kv-up.out" 2>&1 ||
		rs_die "innet kv up failed: $(tail -n 3 "$BENCH_TMP/kv-up.out")"
	rs_runtest innet "$host"
	rs_down
	if [ "$rs_only_innet" = 0 ]; then
		local rhost=$net.72.1
		bench_param redis_cmd "redis-server --port $RS_PORT --bind $rhost --save '' --appendonly no --enable-debug-command yes"
		mkdir -p "$BENCH_TMP/redis-dir"
		bench_spawn rs_redis_pid redis "" 1200 redis-server --port "$RS_PORT" --bind "$rhost" --save "" \
			--appendonly no --enable-debug-command yes --dir "$BENCH_TMP/redis-dir" --daemonize no
		local i
		for ((i = 0; i < 100; i++)); do
			redis-cli -h "$rhost" -p "$RS_PORT" PING >/dev/null 2>&1 && break
			sleep 0.05
		done
		rs_runtest redis "$rhost"
		bench_stop "$rs_redis_pid" || true
	fi
	# Compare test by test (a name may occur more than once: by occurrence).
	local innet_pass redis_pass total ratio
	innet_pass=$(grep -c '^ok ' "$BENCH_TMP/innet.tests" || true)
	if [ "$rs_only_innet" = 1 ]; then
		bench_result "innet_pass=$innet_pass" "innet_total=$(wc -l <"$BENCH_TMP/innet.tests")"
		return 0
	fi
	redis_pass=$(grep -c '^ok ' "$BENCH_TMP/redis.tests" || true)
	total=$(wc -l <"$BENCH_TMP/redis.tests")
	ratio=$(bench_calc %.3f "$innet_pass / $redis_pass")
	local -A seen=() innet_st=() classes=()
	local st name key class why n_fail=0
	while read -r st name; do
		key="$name#$((${seen[$name]:-0} + 1))"
		seen[$name]=$((${seen[$name]:-0} + 1))
		innet_st[$key]=$st
	done <"$BENCH_TMP/innet.tests"
	seen=()
	bench_log "tests redis-server passes and innet kv does not:"
	while read -r st name; do
		key="$name#$((${seen[$name]:-0} + 1))"
		seen[$name]=$((${seen[$name]:-0} + 1))
		[ "$st" = ok ] || continue
		[ "${innet_st[$key]:-missing}" = ok ] && continue
		IFS=$'\t' read -r class why < <(rs_reason "$name")
		classes[$class]=$((${classes[$class]:-0} + 1))
		n_fail=$((n_fail + 1))
		bench_log "  [$class] $name — $why"
		bench_record test="$name" innet="${innet_st[$key]:-missing}" redis=ok class="$class" why="$why"
	done <"$BENCH_TMP/redis.tests"
	bench_result "innet_pass=$innet_pass" "redis_pass=$redis_pass" "total=$total" "ratio=$ratio"
	for class in out-of-scope replication-specific semantic-difference cascade unclassified; do
		bench_result "fail_${class//-/_}=${classes[$class]:-0}"
	done
	bench_result "target_met=$(bench_calc %d "$ratio >= 0.9")"
}
