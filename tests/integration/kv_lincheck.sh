#!/usr/bin/env bash
# kv_lincheck.sh — the linearizability checker (tools/linearizability/lincheck.py)
# checked itself: known-good histories pass, known-bad ones (stale read, lost
# write, phantom value, new-then-old reads, an unanswered write seen and then
# undone) fail with exit 1, bad input exits 2, and a large concurrent history
# generated from a real register is checked in bounded time. Also
# tools/linearizability/pauses.py (bench/run failover's figures): on a made-up
# history, the pause counts the load and not kvload.py's final reads, the
# write pause sees writes that stopped while reads went on.
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
# pauses.py: 4 clients, one operation every 10 ms each from t=10 to t=13;
# the event at t=11.5; SETs invoked in [11.5, 11.8) are answered at 11.8
# (writes stop 300 ms, reads go on); a tail operation invoked last answers
# 2 s late; the final reads (sequential) include one of 3 s.
"$PY" - "$tmp/p.jsonl" <<'PYEOF'
import json, sys
h = []
for c in range(4):
    for n in range(300):
        call = 10 + n * 0.01 + c * 0.0025
        op = "set" if n % 2 else "get"
        ret = call + 0.002
        if op == "set" and 11.5 <= call < 11.8:
            ret = 11.8
        h.append({"key": "k%d" % c, "op": op, "value": "c%d.%d" % (c, n) if op == "set" else None,
                  "call": call, "ret": ret})
h.append({"key": "k0", "op": "get", "value": None, "call": 13.0, "ret": 15.0})
h.append({"key": "k0", "op": "get", "value": None, "call": 15.1, "ret": 18.1, "final": True})
h.append({"key": "k1", "op": "get", "value": None, "call": 18.1, "ret": 18.2, "final": True})
with open(sys.argv[1], "w") as f:
    for o in h:
        f.write(json.dumps(o) + "\n")
PYEOF
got=$("$PY" tools/linearizability/pauses.py "$tmp/p.jsonl" 11.5) || fail "pauses.py failed"
echo "pauses.py: $got"
# reads go on throughout (a gap of 12.5 ms at most): pause < 20 ms; the SETs
# stop 11.5 -> 11.8: write pause ~300 ms; slowest the 3 s final read (the old
# reckoning, with the final reads counted, gave a pause of 3.1 s)
[[ $got =~ ^pause_ms=([0-9]+)\ write_pause_ms=([0-9]+)\ before_ms=[0-9]+\ slowest_ms=([0-9]+) ]] ||
	fail "pauses.py: unexpected output: $got"
[ "${BASH_REMATCH[1]}" -lt 20 ] || fail "pauses.py: pause ${BASH_REMATCH[1]} ms, want < 20 (final reads or tail counted?)"
[ "${BASH_REMATCH[2]}" -ge 290 ] && [ "${BASH_REMATCH[2]}" -le 310 ] ||
	fail "pauses.py: write pause ${BASH_REMATCH[2]} ms, want ~300"
[ "${BASH_REMATCH[3]}" -eq 3000 ] || fail "pauses.py: slowest ${BASH_REMATCH[3]} ms, want 3000"
rc=0; "$PY" tools/linearizability/pauses.py "$tmp/junk.jsonl" 1 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "pauses.py on a malformed history: want exit 2, got $rc"
echo "PASS: checker accepts $(ls "$D"/good_*.jsonl | wc -l) + 1 good histories, rejects $n + 1 bad ones"
