#!/usr/bin/env bash
# contract.sh — the data-path contract is checked by the build, not by
# review (docs/programs.md, "The contract"). Each fixture in tests/contract/
# breaks one rule and must be refused with a message that names it, at the
# step that can see it:
#
#   fixture         rule broken                      refused by
#   libc_dp.c       a libc header                    the freestanding compile (-nostdinc)
#   call_dp.c       a call outside the innet_* API   tools/contract/check-dp (nm)
#   global_dp.c     mutable global state             tools/contract/check-dp (nm)
#   stack_dp.c      1 KiB of stack                   -Wframe-larger-than=512
#   args_dp.c       six arguments                    clang -target bpf
#   externlibc_dp.c a libc function declared by hand tools/contract/check-dp (nm)
#   memcpy_dp.c     memcpy declared by hand, called  tools/contract/check-bpf (the eBPF
#                   with a length only known at run  object's unresolved call, with its
#                                                    source line)
#   bigvalue_dp.c   a table value over the limit     a _Static_assert in innet/dp.h
#   loop_dp.c       a loop without a bound           the kernel's verifier (load)
#   userspace_dp.c  (declares itself user-space)     not refused: the build says so
#   ok_dp.c         (keeps the contract)             builds both ways and loads
#
# The verifier's half (ok_dp.c loads, loop_dp.c is refused) is
# tests/integration/contract_verifier.sh: it needs root, and skips (77)
# without it, while this half runs anywhere. (Every shipped program's object
# goes through the verifier with its real map sizes in the golden tests on
# the XDP target, tests/run's golden layer as root; a refusal there reads
# "the verifier refused program NAME (instance I): ..." with the verifier's
# last words.)
set -uo pipefail
. "$(dirname "$0")/lib.sh"
O=$(mktemp -d /tmp/innet-contract.XXXXXX)
cleanup() { rm -rf "$O"; }

check() { # fixture, expect ok|refused, message fragment
	local f=$1 want=$2 frag=$3 out rc
	out=$(make -s --no-print-directory O="$O" dp-check DP="tests/contract/$f" 2>&1)
	rc=$?
	if [ "$want" = ok ]; then
		[ $rc -eq 0 ] || fail "$f should build both ways: $out"
	else
		[ $rc -ne 0 ] || fail "$f broke the contract and the build took it"
	fi
	grep -q -- "$frag" <<<"$out" || fail "$f: the message does not say '$frag': $out"
	echo "ok    $f: ${want} ($(grep -m1 -- "$frag" <<<"$out" | cut -c1-110))"
}

check libc_dp.c refused "string.h: No such file"
check call_dp.c refused "breaks the data-path contract: uses malloc"
check global_dp.c refused "mutable global state packets_seen"
check stack_dp.c refused "larger than 512 bytes"
check args_dp.c refused "too many args"
check externlibc_dp.c refused "breaks the data-path contract: uses strlen"
check memcpy_dp.c refused "its eBPF object calls 'memcpy', which is not part of the program (first call: tests/contract/memcpy_dp.c:12)"
check bigvalue_dp.c refused "table value larger than INNET_TABLE_VALUE_MAX bytes"
check userspace_dp.c ok "is user-space only"
out=$(make -s --no-print-directory O="$O" dp-check DP=tests/contract/ok_dp.c 2>&1) ||
	fail "ok_dp.c should build: $out"
[ -f "$O/contract/ok_dp.bpf.o" ] || fail "ok_dp.c: no eBPF object"
echo "ok    ok_dp.c: builds freestanding and for eBPF"
out=$(make -s --no-print-directory O="$O" dp-check DP=tests/contract/loop_dp.c 2>&1) ||
	fail "loop_dp.c compiles both ways (only the verifier can refuse it): $out"
echo "ok    loop_dp.c: compiles both ways (contract_verifier.sh loads it)"
make -s --no-print-directory O="$O" "$O/tests/contract-load" >/dev/null 2>&1 ||
	fail "cannot build the loader (tests/contract/load.c)"
echo "ok    the loader builds (contract_verifier.sh runs it)"
