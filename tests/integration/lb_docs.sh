#!/usr/bin/env bash
# lb_docs.sh — docs/lb.md's "Quick start" and "Demo" work as written, in the
# order written. Each ```sh block is taken from the page itself (so the page
# and this test cannot drift apart) and run as one bash script, with only
# these changes: /tmp/ becomes a private directory (examples/lb-proxy.json is
# copied there with its key path moved the same way), and checks are inserted
# before the block's last line (the `kill %1 ...` that stops its jobs):
#
#   quick start (no agent ever runs):
#     1. the page's two digs through the VIP get the CPU unit's answer, then
#        (after the drain) the accelerator's;
#     2. 3.5 s after start, past the file's down_after_ms (3000), a dig and
#        1000 queries of `innet lb load` are still all answered, and
#        `prog lb show` calls both units "unknown" (a unit whose agent never
#        reported is served; before that fix every query was dropped as
#        no_backend from 3 s on);
#     3. the unit table of `prog lb show` lines up under its header;
#   demo (dnsperf runs before the agents start, down_after_ms 1500):
#     4. dnsperf (5 s) completes its queries, at most 1 % lost (it was
#        "Queries completed: 0");
#     5. `innet lb load` (10 s, after the agents start) loses at most 1 %,
#        and `prog lb show` then calls both units "up" (their agents report).
# Each script runs in a session of its own (setsid), bounded by timeout; on
# exit that session's process group is killed by its id. Loopback only:
# 127.60.10-12.x and 127.61.0.x as on the page. Skips (77) without dig, nsd
# or dnsperf (scripts/install-deps installs them).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROOT=$PWD
PY=/usr/bin/python3
for c in dig nsd dnsperf xxd; do
	command -v $c >/dev/null || skip "$c not installed (scripts/install-deps)"
done

TMP=$(mktemp -d /tmp/innet-lb-docs.XXXXXX)
fail_details() {
	for f in "$TMP"/*.out; do [ -f "$f" ] && { echo "--- $f"; tail -n 25 "$f"; }; done >&2
}
cleanup() {
	local f g
	for f in "$TMP"/*.pgid; do
		[ -f "$f" ] || continue
		g=$(cat "$f")
		kill -TERM -- "-$g" 2>/dev/null || true
		sleep 0.3
		kill -KILL -- "-$g" 2>/dev/null || true
	done
	rm -rf "$TMP"
}

# block HEADING: the first ```sh block after the line that starts with HEADING.
block() {
	awk -v h="$1" 'index($0, h) == 1 { f = 1; next }
		f && /^```sh$/ { b = 1; next }
		b && /^```$/ { exit }
		b { print }' docs/lb.md
}

# script NAME HEADING CHECKS: NAME.sh = the block (paths moved), CHECKS inserted
# before its last line (which must stop its jobs: `kill %...`).
script() {
	local name=$1 body last
	body=$(block "$2" | sed "s#/tmp/#$TMP/#g; s#examples/lb-proxy.json#$TMP/lb-proxy.json#g")
	[ -n "$body" ] || fail "no sh block after '$2' in docs/lb.md"
	last=$(tail -n 1 <<<"$body")
	[[ $last == kill\ %* ]] || fail "the block after '$2' does not end by stopping its jobs ($last)"
	{
		echo 'echo $$ >'"$TMP/$name.pgid"
		echo 'set -e'
		head -n -1 <<<"$body"
		echo 'echo "@@ checks"'
		printf '%s\n' "$3"
		echo "$last"
		echo 'wait'
	} >"$TMP/$name.sh"
}

run() { # NAME SECS
	echo "--- running docs/lb.md's $1 (script: $TMP/$1.sh)"
	sed 's/^/    | /' "$TMP/$1.sh"
	timeout -k 5 "$2" setsid -w bash "$TMP/$1.sh" >"$TMP/$1.out" 2>&1 ||
		fail "$1 failed (exit $?)"
	rm -f "$TMP/$1.pgid"
}

sed "s#/tmp/#$TMP/#g" examples/lb-proxy.json >"$TMP/lb-proxy.json"

script quickstart "## Quick start" "
sleep 3.5   # past down_after_ms (3000 in examples/lb-proxy.json); no agent has reported
dig -p 5353 @127.60.10.1 www.lb.test +short +tries=2 +time=1 >$TMP/qs-late.txt
build/innet lb load --target 127.60.10.1:5353 --rate 1000 --duration 1 --json >$TMP/qs-load.json
build/innet ctl -s $TMP/innet-lb0.sock --json prog lb show >$TMP/qs-show.json"
run quickstart 60
pre=$(sed -n '/^@@ checks$/q; p' "$TMP/quickstart.out")
digs=$(grep -E '^192\.0\.2\.[0-9]+$' <<<"$pre" || true)
echo "quick start's digs answered: $(tr '\n' ' ' <<<"$digs")"
[ "$digs" = $'192.0.2.1\n192.0.2.2' ] ||
	fail "quick start: the digs should answer 192.0.2.1, then (after the drain) 192.0.2.2; got '$digs'"
echo "dig 3.5 s after start: $(cat "$TMP/qs-late.txt")"
[ "$(cat "$TMP/qs-late.txt")" = 192.0.2.2 ] || fail "quick start: no answer past down_after_ms"
"$PY" - "$TMP/qs-load.json" "$TMP/qs-show.json" <<'PYEOF' || fail "quick start past down_after_ms"
import json, sys
r = json.load(open(sys.argv[1]))
print("load past down_after_ms: sent=%d received=%d lost=%d" % (r["sent"], r["received"], r["lost"]))
assert r["sent"] >= 900 and r["received"] == r["sent"], "queries lost with no agent running"
units = [u for p in json.load(open(sys.argv[2]))["pools"] for u in p["units"]]
print("states:", [(u["server"], u["unit"], u["state"]) for u in units])
assert [u["state"] for u in units] == ["unknown", "unknown"], "units never reported: unknown"
PYEOF

# `prog lb show`'s unit table: every header word's column edges fall on the
# same places in the rows (left-aligned columns start there, right-aligned
# ones end there), so the columns line up.
"$PY" - "$TMP/quickstart.out" <<'PYEOF' || fail "prog lb show: the unit table's columns do not line up"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
h = [i for i, l in enumerate(lines) if l.lstrip().startswith("server/unit")]
assert h, "no unit table header"
head = lines[h[0]]
rows = lines[h[0] + 1:h[0] + 3]
print(head); print("\n".join(rows))
for r in rows:
    assert len(r) == len(head), "row and header lengths differ"
    for m in re.finditer(r"\S+", head):
        s, e = m.span()
        starts = r[s - 1] == " " and r[s] != " "                  # left-aligned
        ends = r[e - 1] != " " and (e == len(r) or r[e] == " ")  # right-aligned
        assert starts or ends, "column %r" % m.group()
PYEOF

script demo "### Demo: two DNS servers" "
build/innet ctl -s $TMP/lb-demo.sock --json prog lb show >$TMP/demo-show.json"
run demo 90
out=$(cat "$TMP/demo.out")
sent=$(awk '/Queries sent:/ { print $3 }' <<<"$out")
done_=$(awk '/Queries completed:/ { print $3 }' <<<"$out")
lost=$(awk '/Queries lost:/ { print $3 }' <<<"$out")
echo "demo's dnsperf (before the agents): sent=$sent completed=$done_ lost=$lost"
[ -n "$sent" ] && [ "$sent" -gt 1000 ] || fail "demo: dnsperf sent too few queries ($sent)"
[ $((lost * 100)) -le "$sent" ] || fail "demo: dnsperf lost $lost of $sent queries"
load=$(grep -E '^sent [0-9]+ queries' <<<"$out") || fail "demo: no summary from innet lb load"
echo "demo's innet lb load: $load"
"$PY" - "$load" "$TMP/demo-show.json" <<'PYEOF' || fail "demo: load or unit states"
import json, re, sys
m = re.match(r"sent (\d+) queries.*?(\d+) replies.*?(\d+) lost", sys.argv[1])
sent, recv, lost = (int(x) for x in m.groups())
assert sent >= 15000 and lost * 100 <= sent, "lost %d of %d" % (lost, sent)
units = [u for p in json.load(open(sys.argv[2]))["pools"] for u in p["units"]]
print("states after the agents started:", [(u["server"], u["unit"], u["state"]) for u in units])
assert [u["state"] for u in units] == ["up", "up"], "both agents report: up"
PYEOF
echo "PASS lb_docs"
