#!/usr/bin/env bash
# p4_json.sh — the project's P4 programs (p4/*.p4) against their committed
# BMv2 JSON: each is compiled with p4c-bm2-ss and must give the committed
# p4/NAME.json (source paths aside); the test programs in tests/p4 the same
# way. Skips (77) without p4c-bm2-ss
# (P4C_BM2_SS or PATH; the toolchain is outside the project, docs/p4.md).
# About 5 s (idle machine; 14 s loaded).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

dirs=(tests/p4)
[ -d p4 ] && dirs=(p4 tests/p4)
for d in "${dirs[@]}"; do
	rc=0
	$PY tools/p4/p4test check-json "$d" || rc=$?
	[ $rc -eq 77 ] && skip "p4c-bm2-ss not found (set P4C_BM2_SS)"
	[ $rc -eq 0 ] || fail "$d/*.json are not what $d/*.p4 compile to (run make p4)"
done
echo "ok: ${dirs[*]}: the committed JSON is what p4c-bm2-ss compiles from the P4 source"
