#!/usr/bin/env bash
# contract_verifier.sh — the verifier's half of the data-path contract
# (contract.sh is the build's half): what only the kernel's eBPF verifier can
# judge is judged at load, by tests/contract/load.c (libbpf):
#
#   fixture         expected at load
#   ok_dp.c         loaded
#   loop_dp.c       "the verifier refused program loop_dp: ..." (a loop
#                   without a bound), with the verifier's own words
#
# Needs root (loading eBPF); exits 77 (a skip, saying why) without it.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need_root "loading eBPF into the kernel"
O=$(mktemp -d /tmp/innet-contract-load.XXXXXX)
cleanup() { rm -rf "$O"; }

for f in ok_dp.c loop_dp.c; do
	out=$(make -s --no-print-directory O="$O" dp-check DP="tests/contract/$f" 2>&1) ||
		fail "$f should compile both ways: $out"
	[ -f "$O/contract/${f%.c}.bpf.o" ] || fail "$f: no eBPF object"
done
out=$(make -s --no-print-directory O="$O" "$O/tests/contract-load" 2>&1) || fail "cannot build the loader: $out"

out=$("$O/tests/contract-load" "$O/contract/ok_dp.bpf.o" 2>&1) || fail "ok_dp.c refused: $out"
echo "ok    ok_dp.c: loaded"
out=$("$O/tests/contract-load" "$O/contract/loop_dp.bpf.o" 2>&1) && fail "the verifier took an unbounded loop: $out"
grep -q "^the verifier refused program loop_dp: " <<<"$out" || fail "loop_dp.c: $out"
echo "ok    loop_dp.c: the verifier refused it ($(tail -n 2 <<<"$out" | head -n 1 | cut -c1-80))"
