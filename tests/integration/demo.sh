#!/usr/bin/env bash
# demo.sh — the README's main job (scripts/demo) still works end to end:
# the spine/leaf fabric comes up, probes cross it with no loss, ECMP uses
# more than one spine, the counter service stays consistent, and the fabric
# goes down again (no switch process left behind).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
out=$(timeout 240 ./scripts/demo 2>&1) || fail "scripts/demo failed:
$out"
echo "$out" | tail -n 8
grep -q "^routing:  50 sent, 50 received, 0.0% loss" <<<"$out" || fail "routing summary"
grep -q "counter moved by 20000: consistent" <<<"$out" || fail "counter summary"
used=$(grep "^ECMP:" <<<"$out" | grep -o "=[1-9][0-9]*" | wc -l)
[ "$used" -ge 2 ] || fail "ECMP used $used spine(s)"
if timeout 10 ./build/innet fabric status examples/spine-leaf.json >/dev/null 2>&1; then
	fail "the demo left its fabric running"
fi
echo PASS
