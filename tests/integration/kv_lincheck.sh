#!/usr/bin/env bash
# kv_lincheck.sh — the linearizability checker (tools/linearizability/lincheck.py)
# checked itself: known-good histories pass, known-bad ones (stale read, lost
# write, phantom value, new-then-old reads, an unanswered write seen and then
# undone) fail with exit 1, bad input exits 2, and a large concurrent history
# generated from a real register is checked in bounded time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
LC=tools/linearizability/lincheck.py
D=tools/linearizability/testdata

for f in "$D"/good_*.jsonl; do
	"$PY" "$LC" "$f" >/dev/null || fail "$f: want linearizable"
done
n=0
for f in "$D"/bad_*.jsonl; do
	rc=0
	"$PY" "$LC" "$f" >/dev/null || rc=$?
	[ "$rc" -eq 1 ] || fail "$f: want exit 1 (not linearizable), got $rc"
	n=$((n + 1))
done
[ "$n" -ge 5 ] || fail "only $n known-bad histories"
tmp=$(mktemp -d /tmp/innet-lincheck.XXXXXX)
cleanup() { rm -rf "$tmp"; }
echo '{"key": "x", "op": "cas"}' >"$tmp/junk.jsonl"
rc=0; "$PY" "$LC" "$tmp/junk.jsonl" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "malformed history: want exit 2, got $rc"

# A simulated register with 8 concurrent clients: each operation takes effect
# at a random point inside its [call, ret] interval, so the history is
# linearizable by construction; then one read is falsified to a value that was
# overwritten by a write completed before the read began: must fail.
"$PY" - "$tmp" <<'PYEOF'
import json, random, sys
rnd = random.Random(7)
ops, t = [], 0.0
state = {}
events = []
for c in range(8):
    t = rnd.random()
    for n in range(150):
        key = "k%d" % rnd.randrange(3)
        call = t
        eff = call + rnd.random() * 0.5
        ret = eff + rnd.random() * 0.5
        if rnd.random() < 0.5:
            events.append((eff, c, key, "set", "c%d.%d" % (c, n), call, ret))
        else:
            events.append((eff, c, key, "get", None, call, ret))
        t = ret + rnd.random() * 0.2
events.sort()
hist = []
for eff, c, key, op, val, call, ret in events:
    if op == "set":
        state[key] = val
    else:
        val = state.get(key)
    hist.append({"key": key, "op": op, "value": val, "call": call, "ret": ret})
with open(sys.argv[1] + "/ok.jsonl", "w") as f:
    for h in hist:
        f.write(json.dumps(h) + "\n")
# falsify: a read whose key had two sequential acknowledged writes before it
done = False
for i, h in enumerate(hist):
    if h["op"] != "get" or done:
        continue
    sets = [o for o in hist if o["key"] == h["key"] and o["op"] == "set" and o["ret"] < h["call"]]
    for s1 in sets:
        if any(s2["call"] > s1["ret"] and s2["ret"] < h["call"] for s2 in sets):
            h["value"] = s1["value"]
            done = True
            break
assert done
with open(sys.argv[1] + "/bad.jsonl", "w") as f:
    for h in hist:
        f.write(json.dumps(h) + "\n")
PYEOF
timeout 60 "$PY" "$LC" "$tmp/ok.jsonl" || fail "simulated register history: want linearizable"
rc=0; timeout 60 "$PY" "$LC" "$tmp/bad.jsonl" >/dev/null || rc=$?
[ "$rc" -eq 1 ] || fail "falsified register history: want exit 1, got $rc"
echo "PASS: checker accepts $(ls "$D"/good_*.jsonl | wc -l) + 1 good histories, rejects $n + 1 bad ones"
