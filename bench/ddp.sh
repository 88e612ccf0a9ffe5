# shellcheck shell=bash
# bench: PyTorch DDP time per epoch, 4 ranks: innet's communication hook (switch sums the gradients) vs gloo's all-reduce
# timeout: 900
#
# bench/ddp.sh — sourced by bench/run (helpers: bench/lib.sh).
#
# src/agg/python/ddp_train_digits.py: 4 processes (one torch thread each) train an
# MLP (64 -> H -> H -> 10) on sklearn's digits with DistributedDataParallel,
# torch.distributed's gloo backend over a file store on loopback. The same
# processes train it once per mode and round, a fresh model each time, from
# the same initial parameters over the same minibatches:
#   innet  DDP with src/agg/python/innet_ddp.py's hook: each gradient bucket is summed
#          by an `innet switch` (agg program, one thread, 127.0.79.1) as
#          float32 block floating point; gloo does the rest (broadcast,
#          barriers)
#   gloo   plain DDP: its built-in all-reduce over gloo (TCP on loopback)
# in the order innet, gloo on even rounds and gloo, innet on odd ones,
# after one unreported epoch of each (a process's first run is slower). A
# run's figure is the median of its epochs' times after the first (the
# first includes DDP's bucket rebuild); an epoch's time is the slowest
# rank's. RESULT: the medians over the rounds, ratio = gloo / innet (> 1:
# innet is faster) with the lowest and highest per-round ratio, the final
# test accuracies, and the switch's check (its agg program multicast exactly
# the results the ranks' calls need).
#
# Both modes get the same DDP buckets (--bucket-cap-mb, --first-bucket-mb);
# the defaults are gloo's best of those measured (docs/benchmarks.md).

bench_usage() {
	cat <<'EOF'
usage: bench/run ddp [options]
  --epochs N          epochs per run (default 5; the first is not counted)
  --rounds R          runs per mode, alternated; medians reported (default 5)
  --hidden H          hidden layer width (default 512: 301066 parameters)
  --bucket-cap-mb M   DDP bucket_cap_mb, both modes (default 25, DDP's own)
  --first-bucket-mb M DDP's first bucket cap, both modes (default 1, DDP's own)
  --k K               innet elements per packet (default 2048)
  --slots S           innet slots per job = window (default 64)
  --rto-us U          innet first retransmission timeout (default 20000)
  --quick             --epochs 2 --rounds 1 --hidden 256: a smoke test
EOF
}

dd_epochs=5
dd_rounds=5
dd_hidden=512
dd_cap=25
dd_first=1
dd_k=2048
dd_slots=64
dd_rto=20000

dd_parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--epochs) dd_epochs=${2:?}; shift ;;
		--rounds) dd_rounds=${2:?}; shift ;;
		--hidden) dd_hidden=${2:?}; shift ;;
		--bucket-cap-mb) dd_cap=${2:?}; shift ;;
		--first-bucket-mb) dd_first=${2:?}; shift ;;
		--k) dd_k=${2:?}; shift ;;
		--slots) dd_slots=${2:?}; shift ;;
		--rto-us) dd_rto=${2:?}; shift ;;
		--quick) dd_epochs=2; dd_rounds=1; dd_hidden=256 ;;
		-h | --help) bench_usage; exit 0 ;;
		*) bench_usage_error "unknown option '$1'" ;;
		esac
		shift
	done
	local v
	for v in "$dd_epochs" "$dd_rounds" "$dd_hidden" "$dd_k" "$dd_slots" "$dd_rto"; do
		[[ $v =~ ^[0-9]+$ ]] || bench_usage_error "whole numbers only: '$v'"
	done
	for v in "$dd_cap" "$dd_first"; do
		[[ $v =~ ^[0-9]+(\.[0-9]+)?$ ]] || bench_usage_error "not a size in MB: '$v'"
	done
	if [ "$dd_epochs" -lt 2 ] || [ "$dd_rounds" -lt 1 ] || [ "$dd_hidden" -lt 1 ]; then
		bench_usage_error "--epochs >= 2, --rounds >= 1, --hidden >= 1"
	fi
}

bench_main() {
	dd_parse "$@"
	local py=/usr/bin/python3
	bench_build innet
	make -s -C "$BENCH_ROOT" build/libinnet-agg.so >"$BENCH_TMP/build-agg.log" 2>&1 ||
		{ tail -n 20 "$BENCH_TMP/build-agg.log" >&2; bench_die "cannot build build/libinnet-agg.so"; }
	"$py" -c 'import torch.distributed as d, numpy, sklearn; assert d.is_gloo_available()' 2>/dev/null ||
		bench_die "needs python3-torch (with gloo), python3-numpy, python3-sklearn: scripts/install-deps"
	local p
	for p in epochs:"$dd_epochs" rounds:"$dd_rounds" hidden:"$dd_hidden" bucket_cap_mb:"$dd_cap" \
		first_bucket_mb:"$dd_first" k:"$dd_k" slots:"$dd_slots" rto_us:"$dd_rto"; do
		bench_param "${p%%:*}" "${p#*:}"
	done
	bench_param world 4
	bench_param warmup_epochs 1
	bench_param torch "$("$py" -c 'import torch; print(torch.__version__)')"

	local net=127.0.79 udp=47800 members="" w sw tr sock="$BENCH_TMP/switch.sock"
	for w in 0 1 2 3; do members+="${members:+,}\"$net.10:$((30000 + w))\""; done
	bench_spawn sw switch "" 850 "$BENCH_INNET_BIN" switch --name "ddp$$" --ctl "$sock" --port "$net.1" \
		--program "agg@$udp" --workers 1 --args "{\"k\": $dd_k, \"slots\": 1024, \"jobs\": [{\"id\": 1,
		\"workers\": 4, \"slots\": $dd_slots, \"members\": [$members]}]}"
	bench_wait_ready "$sw" switch ready 10
	bench_log "training: 4 ranks, H=$dd_hidden, $dd_epochs epochs x $dd_rounds rounds per mode, alternated"
	bench_spawn tr train "" 840 "$py" "$BENCH_ROOT/src/agg/python/ddp_train_digits.py" --comm innet,gloo \
		--rounds "$dd_rounds" --epochs "$dd_epochs" --hidden "$dd_hidden" --bucket-cap-mb "$dd_cap" \
		--first-bucket-mb "$dd_first" --switch "$net.1:$udp" --worker-ip "$net.10" --worker-udp 30000 \
		--job 1 --slots "$dd_slots" --k "$dd_k" --rto-us "$dd_rto" --timeout-ms 5000 --timeout-s 830 \
		--warmup-epochs 1
	# progress: the runs as they end
	local seen=0 n
	while kill -0 "$tr" 2>/dev/null; do
		n=$(grep -c '^RUN ' "$BENCH_TMP/train.out" 2>/dev/null || true)
		if [ "${n:-0}" -gt "$seen" ]; then
			grep '^RUN ' "$BENCH_TMP/train.out" | sed -n "$((seen + 1)),${n}p" | while read -r line; do
				bench_log "${line#RUN }"
			done
			seen=$n
		fi
		sleep 1
	done
	bench_wait "$tr" || { tail -n 30 "$BENCH_TMP/train.err" >&2; bench_die "training failed"; }
	local res
	res=$(grep '^RESULT ddp_train_digits ' "$BENCH_TMP/train.out") || bench_die "training printed no RESULT"
	"$BENCH_INNET_BIN" ctl -s "$sock" --json stats >"$BENCH_TMP/stats.json" || bench_die "innet ctl stats"
	bench_stop "$sw" || true

	# Per run: epoch_s and acc; per round: ratio gloo / innet.
	local line c r e a rounds_seen=()
	local -A ep=() acc=() first=()
	while read -r line; do
		c=$(sed -n 's/.* comm=\([a-z]*\) .*/\1/p' <<<"$line")
		r=$(sed -n 's/.* round=\([0-9]*\) .*/\1/p' <<<"$line")
		e=$(sed -n 's/.* epoch_s=\([0-9.]*\) .*/\1/p' <<<"$line")
		a=$(sed -n 's/.* acc=\([0-9.]*\) .*/\1/p' <<<"$line")
		ep[$c.$r]=$e acc[$c]=$a
		first[$c]+="$(sed -n 's/.* first_epoch_s=\([0-9.]*\) .*/\1/p' <<<"$line") "
		bench_record comm="$c" round="$r" epoch_s="$e" acc="$a" \
			first_epoch_s="$(sed -n 's/.* first_epoch_s=\([0-9.]*\) .*/\1/p' <<<"$line")" \
			replicas_identical="${line##*replicas_identical=}"
		[ "$c" = innet ] && rounds_seen+=("$r")
	done < <(grep '^RUN ' "$BENCH_TMP/train.out")
	local ie=() ge=() ratios=()
	for r in "${rounds_seen[@]}"; do
		ie+=("${ep[innet.$r]}") ge+=("${ep[gloo.$r]}")
		ratios+=("$(bench_calc %.3f "${ep[gloo.$r]} / ${ep[innet.$r]}")")
	done
	[ ${#ratios[@]} -eq "$dd_rounds" ] || bench_die "expected $dd_rounds rounds, got ${#ratios[@]}"
	local im gm
	im=$(bench_median "${ie[@]}") gm=$(bench_median "${ge[@]}")
	kv() { tr ' ' '\n' <<<"$res" | sed -n "s/^$1=//p"; }
	local check
	check=$("$py" - "$BENCH_TMP/stats.json" "$(kv switch_results)" <<'EOF'
import json, sys
st = json.load(open(sys.argv[1]))
agg = next(p for p in st["programs"] if p["name"] == "agg")
print("ok" if agg["actions"]["multicast"] == int(sys.argv[2]) else
      "FAIL:multicast=%d,expected=%s" % (agg["actions"]["multicast"], sys.argv[2]))
EOF
)
	[ "$(kv replicas_identical)" = True ] || bench_die "replicas differ at the end of a run"
	# shellcheck disable=SC2046,SC2086 # lists of numbers
	bench_result "innet_epoch_s=$(bench_calc %.4f "$im")" "gloo_epoch_s=$(bench_calc %.4f "$gm")" \
		"ratio=$(bench_calc %.3f "$gm / $im")" \
		"ratio_min=$(printf '%s\n' "${ratios[@]}" | sort -g | head -n 1)" \
		"ratio_max=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -n 1)" \
		"innet_epoch_s_min=$(printf '%s\n' "${ie[@]}" | sort -g | head -n 1)" \
		"innet_epoch_s_max=$(printf '%s\n' "${ie[@]}" | sort -g | tail -n 1)" \
		"gloo_epoch_s_min=$(printf '%s\n' "${ge[@]}" | sort -g | head -n 1)" \
		"gloo_epoch_s_max=$(printf '%s\n' "${ge[@]}" | sort -g | tail -n 1)" \
		"innet_first_epoch_s=$(bench_median ${first[innet]})" "gloo_first_epoch_s=$(bench_median ${first[gloo]})" \
		"innet_acc=${acc[innet]}" "gloo_acc=${acc[gloo]}" "params=$(kv params)" "buckets=$(kv buckets)" \
		"steps_per_epoch=$(kv steps_per_epoch)" "innet_calls=$(kv calls)" \
		"innet_packets=$(kv lib_packets_sent)" "innet_retransmits=$(kv lib_retransmits)" \
		"switch_check=$check"
	bench_log "innet $im s/epoch, gloo $gm s/epoch (medians of $dd_rounds rounds): ratio gloo/innet" \
		"$(bench_calc %.3f "$gm / $im") (per round ${ratios[*]}); accuracy innet ${acc[innet]}, gloo ${acc[gloo]}"
}
