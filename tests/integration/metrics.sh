#!/usr/bin/env bash
# metrics.sh — the switch's and the KV replica's counters in the Prometheus
# text format: `innet ctl metrics`, the HTTP endpoint, promtool, and a real
# Prometheus server scraping them.
#
#   h0 127.A.H.1 ── port 0 ┌────┐ port 1 ── h1 127.A.H.2       (examples/single.json, relocated;
#                          │ s0 │ fwd (forward) on UDP 9000     s0 gets "metrics": 127.0.0.1:M)
#                          └────┘
#   coord ── a0, a1, a2 ── r0 (+ r1, r2 not started)           (examples/kv.json, relocated;
#                                                               innet kv serve r0 --metrics 127.0.0.1:K)
#   prometheus 127.0.0.1:P  ── scrapes 127.0.0.1:M and 127.0.0.1:K every 1 s
#
#   1. bad metrics addresses are refused with clear errors: `innet switch
#      --metrics`, the topology key (`innet fabric show`), `innet kv serve`;
#   2. traffic: `innet ping` h0 -> h1 and back, then malformed datagrams
#      from h0 (too_short and bad_magic drops);
#   3. `innet ctl metrics` passes `promtool check metrics`, and its values
#      are the `--json stats` figures, every port and program counter, every
#      verdict and every named drop reason (too_short = 3, bad_magic = 2);
#   4. GET http://127.0.0.1:M/metrics answers the same text, with
#      Content-Type text/plain; version=0.0.4; HEAD too;
#   5. the replica's endpoint passes promtool and counts the commands sent
#      to it (innet_kv_commands_applied_total = INFO commands_applied);
#   6. Prometheus (a generated config, its storage in a temp dir, listening
#      on a free port of 127.0.0.1) scrapes both; its query API returns the
#      expected values (too_short drops, KV commands) and both targets up;
#   7. meanwhile, bad HTTP requests: garbage, an oversized request, a
#      request cut short, POST, another path, HTTP/2, 80 idle connections,
#      concurrent scrapers; a half-open connection is closed by the switch
#      after its read timeout; each gets its 4xx, and the switch keeps
#      serving (Prometheus's last scrape is healthy and later than them).
#
# Bounded (about 20 s; each step has a timeout); every process it starts is
# stopped by PID on exit. Skips (77) only if Prometheus is missing and
# scripts/install-deps cannot install it.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
ROOT=$PWD
INNET=${INNET:-$ROOT/build/innet}
PY=/usr/bin/python3
A=$((100 + RANDOM % 100))
B=$((RANDOM % 60 * 4))

if [[ ! -x $INNET ]]; then
	echo "FAIL: $INNET not built (run make)"
	exit 1
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
	if [[ $(id -u) -eq 0 ]] || sudo -n true 2>/dev/null; then
		echo "--- prometheus missing: scripts/install-deps"
		timeout 900 scripts/install-deps >/dev/null 2>&1 || true
	fi
	if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
		skip "prometheus/promtool not installed and scripts/install-deps could not install them"
	fi
fi

TMP=$(mktemp -d /tmp/innet-metrics.XXXXXX)
TOPO=$TMP/single.json
KVTOPO=$TMP/kv.json
PIDS=()
fabrics=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		if kill -0 "$p" 2>/dev/null; then
			kill "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	for p in "${fabrics[@]}"; do
		timeout 30 "$INNET" fabric down "$p" >/dev/null 2>&1 || true
	done
	rm -rf "$TMP"
}

fail_details() {
	local f
	for f in "$TMP"/state/*.log "$TMP"/kvstate/*.log "$TMP"/*.log; do
		[[ -f $f ]] && { echo "--- $f"; tail -n 15 "$f"; }
	done
}

step() { echo "--- $* (at ${SECONDS}s)"; }

# Three free TCP ports on 127.0.0.1: the switch's metrics, the replica's,
# Prometheus's.
read -r MPORT KPORT PPORT < <("$PY" - <<'EOF'
import socket
socks = []
for _ in range(3):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*[s.getsockname()[1] for s in socks])
EOF
)

"$PY" tools/topology/relocate.py examples/single.json "$TOPO" --name "metrics-$$" \
	--state-dir "$TMP/state" --addr-base "127.$A.$B.0" --hosts "127.$A.$((B + 1))"
"$PY" tools/topology/relocate.py examples/kv.json "$KVTOPO" --name "metrics-kv-$$" \
	--state-dir "$TMP/kvstate" --addr-base "127.$A.$((B + 2)).0" --hosts "127.$A.$((B + 3))"
# s0 serves its metrics (the per-switch topology key)
"$PY" - "$TOPO" "127.0.0.1:$MPORT" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
t["switches"][0]["metrics"] = sys.argv[2]
json.dump(t, open(sys.argv[1], "w"), indent=1)
EOF
H0=127.$A.$((B + 1)).1
S0P0=$(timeout 10 "$INNET" fabric show "$TOPO" --json |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["switches"][0]["ports"][0]["addr"])')
R0=127.$A.$((B + 3)).1
RESP=6379

# ---------------------------------------------------------------------------
step "1. bad metrics addresses"
expect_usage() { # what, expected message, command...
	local what=$1 want=$2 out rc=0
	shift 2
	out=$(timeout 10 "$@" 2>&1) || rc=$?
	[[ $rc -eq 2 ]] || fail "$what: exit $rc, want 2: $out"
	[[ $out == *"$want"* ]] || fail "$what: '$out' does not say '$want'"
}
expect_usage "--metrics without a port" "bad metrics address '127.0.0.1': expected IPv4:PORT" \
	"$INNET" switch --port 127.$A.$B.200 --program counter@9100 --ctl "" --metrics 127.0.0.1
expect_usage "--metrics with a host name" "'localhost' is not an IPv4 address" \
	"$INNET" switch --port 127.$A.$B.200 --program counter@9100 --ctl "" --metrics localhost:1
expect_usage "--metrics port out of range" "port 99999 is out of range 0..65535" \
	"$INNET" switch --port 127.$A.$B.200 --program counter@9100 --ctl "" --metrics 127.0.0.1:99999
"$PY" - "$TOPO" "$TMP/bad.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
t["switches"][0]["metrics"] = "127.0.0.1:x"
json.dump(t, open(sys.argv[2], "w"))
EOF
rc=0
out=$(timeout 10 "$INNET" fabric show "$TMP/bad.json" 2>&1) || rc=$?
[[ $rc -ne 0 && $out == *"\$.switches[0].metrics: bad metrics address '127.0.0.1:x'"* ]] ||
	fail "the topology key: exit $rc: $out"
expect_usage "kv serve --metrics" "bad metrics address" \
	"$INNET" kv serve --topology "$KVTOPO" --name r0 --metrics 300.0.0.1:5
out=$(timeout 10 "$INNET" ctl metrics --help) || fail "ctl metrics --help"
[[ $out == *"Prometheus text"* && $out == *"usage: innet ctl"* ]] || fail "ctl metrics --help: $out"
out=$(timeout 10 "$INNET" fabric show "$TOPO") || fail "fabric show"
[[ $out == *"metrics 127.0.0.1:$MPORT"* ]] || fail "fabric show does not print the metrics address: $out"

# ---------------------------------------------------------------------------
step "2. the fabric, traffic, malformed datagrams"
fabrics+=("$TOPO")
timeout 30 "$INNET" fabric up "$TOPO" >"$TMP/up.log" 2>&1 || fail "fabric up: $(cat "$TMP/up.log")"
timeout 20 "$INNET" ping --topology "$TOPO" --from h0 --to h1 -c 5 --quiet || fail "ping"
"$PY" - "$H0" "$S0P0" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
for _ in range(3):
    s.sendto(b"\x1e\x01\x01", (sys.argv[2], 9000))   # the magic, no whole header: too_short
for _ in range(2):
    s.sendto(b"hello", (sys.argv[2], 9000))          # no magic, no port map: bad_magic
EOF
ctl() { timeout 10 "$INNET" ctl --fabric "$TOPO" --switch s0 "$@"; }
for _ in $(seq 50); do
	n=$(ctl --json stats | "$PY" -c 'import json,sys; print(sum(json.load(sys.stdin)["programs"][0]["drops"].values()))')
	[[ $n -ge 5 ]] && break
	sleep 0.1
done
[[ $n -eq 5 ]] || fail "s0 counted $n drops, want 5"
info=$(ctl --json info)
[[ $info == *"\"metrics\":\"127.0.0.1:$MPORT\""* ]] || fail "ctl info: no metrics address: $info"

# ---------------------------------------------------------------------------
step "3. innet ctl metrics: promtool, and the stats' figures"
ctl metrics >"$TMP/ctl.prom" || fail "ctl metrics"
promtool check metrics <"$TMP/ctl.prom" >"$TMP/promtool.log" 2>&1 ||
	fail "promtool check metrics: $(cat "$TMP/promtool.log")"
ctl --json stats >"$TMP/stats.json" || fail "ctl --json stats"

# The parser the next checks share: metrics text -> {(name, labels): value}.
cat >"$TMP/prom.py" <<'EOF'
import re
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
def parse(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, "bad sample line: %r" % line
        labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
        key = (m.group(1), labels)
        assert key not in out, "series twice: %r" % (key,)
        out[key] = float(m.group(3))
    return out
def get(d, name, **labels):
    want = set(labels.items())
    hits = [v for (n, ls), v in d.items() if n == name and want <= set(ls)]
    assert len(hits) == 1, "%s %s: %d series" % (name, labels, len(hits))
    return hits[0]
EOF
"$PY" - "$TMP" <<'EOF' || fail "ctl metrics differs from --json stats"
import json, sys
sys.path.insert(0, sys.argv[1])
from prom import parse, get
m = parse(open(sys.argv[1] + "/ctl.prom").read())
st = json.load(open(sys.argv[1] + "/stats.json"))
sw = st["switch"]
assert get(m, "innet_switch_info", switch=sw, target="udp") == 1
port_keys = {"rx_pkts": "received_packets", "rx_bytes": "received_bytes", "tx_pkts": "sent_packets",
             "tx_bytes": "sent_bytes", "tx_errors": "send_errors", "tx_gso": "sent_gso_packets",
             "rx_sock_drops": "socket_dropped_packets",
             "link_lost": "link_lost_packets", "link_duplicated": "link_duplicated_packets",
             "link_reordered": "link_reordered_packets", "link_delayed": "link_delayed_packets",
             "link_queue_full": "link_queue_full_packets"}
checked = 0
for p in st["ports"]:
    for k, name in port_keys.items():
        got = get(m, "innet_port_%s_total" % name, switch=sw, port=str(p["index"]), port_name=p["name"])
        assert got == p[k], "port %s %s: metrics %s, stats %s" % (p["index"], k, got, p[k])
        checked += 1
assert st["ports"][0]["rx_pkts"] >= 10, st["ports"][0]   # 5 pings out, 5 malformed
prog_keys = {"rx_pkts": "received_packets_total", "rx_bytes": "received_bytes_total",
             "tx_pkts": "sent_packets_total", "passes": "passes_total",
             "recirculations": "recirculations_total", "emitted": "emitted_packets_total",
             "timer_fires": "timer_fires_total", "cpu_pkts": "cpu_packets_total",
             "reg_ops": "register_operations_total", "table_ops": "table_operations_total",
             "alu_ops": "alu_operations_total",
             "max_reg_ops": "max_register_operations_per_pass",
             "max_table_ops": "max_table_operations_per_pass",
             "max_alu_ops": "max_alu_operations_per_pass",
             "max_recirc": "max_recirculations_per_packet", "max_emitted": "max_emitted_per_packet"}
for p in st["programs"]:
    for k, name in prog_keys.items():
        got = get(m, "innet_program_" + name, switch=sw, program=p["name"])
        assert got == p[k], "program %s %s: metrics %s, stats %s" % (p["name"], k, got, p[k])
        checked += 1
    for a, v in p["actions"].items():
        assert get(m, "innet_program_verdicts_total", program=p["name"], action=a) == v, a
        checked += 1
    for r, v in p["drops"].items():
        assert get(m, "innet_program_dropped_packets_total", program=p["name"], reason=r) == v, r
        checked += 1
    # named reasons that did not happen are there, at 0
    assert get(m, "innet_program_dropped_packets_total", program=p["name"], reason="no_route") == 0
fwd = st["programs"][0]
assert fwd["drops"] == {"too_short": 3, "bad_magic": 2}, fwd["drops"]
assert get(m, "innet_program_dropped_packets_total", switch="s0", program="fwd", reason="too_short") == 3
assert fwd["actions"]["forward"] >= 10, fwd["actions"]
print("metrics = stats: %d values checked" % checked)
EOF

# ---------------------------------------------------------------------------
step "4. the HTTP endpoint"
"$PY" - "$TMP" "$MPORT" <<'EOF' || fail "HTTP endpoint"
import sys, urllib.request
sys.path.insert(0, sys.argv[1])
from prom import parse
url = "http://127.0.0.1:%s/metrics" % sys.argv[2]
with urllib.request.urlopen(url, timeout=5) as r:
    assert r.status == 200, r.status
    ct = r.headers["Content-Type"]
    assert ct.startswith("text/plain; version=0.0.4"), ct
    body = r.read().decode()
assert int(r.headers["Content-Length"]) == len(body.encode())
ctl = open(sys.argv[1] + "/ctl.prom").read()
a, b = parse(body), parse(ctl)
diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if a.get(k) != b.get(k)}
assert not diff, "HTTP and ctl differ: %r" % diff
assert body == ctl
req = urllib.request.Request(url, method="HEAD")
with urllib.request.urlopen(req, timeout=5) as r:
    assert r.status == 200 and r.read() == b""
    assert int(r.headers["Content-Length"]) == len(ctl.encode())
open(sys.argv[1] + "/http.prom", "w").write(body)
print("HTTP = ctl: %d series" % len(a))
EOF
promtool check metrics <"$TMP/http.prom" >/dev/null 2>&1 || fail "promtool on the HTTP text"

# ---------------------------------------------------------------------------
step "5. a KV replica's metrics"
fabrics+=("$KVTOPO")
timeout 30 "$INNET" fabric up "$KVTOPO" >"$TMP/kvup.log" 2>&1 || fail "kv fabric up: $(cat "$TMP/kvup.log")"
timeout -k 5 120 "$INNET" kv serve --topology "$KVTOPO" --name r0 --port $RESP \
	--metrics "127.0.0.1:$KPORT" >"$TMP/kv-r0.log" 2>&1 &
PIDS+=($!)
for _ in $(seq $(slow 100)); do
	grep -q "serving RESP" "$TMP/kv-r0.log" && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || fail "innet kv serve exited"
	sleep 0.1
done
grep -q "metrics on http://127.0.0.1:$KPORT/metrics" "$TMP/kv-r0.log" || fail "kv serve: no metrics line"
"$PY" - "$TMP" "$R0" "$RESP" "$KPORT" <<'EOF' || fail "KV metrics"
import socket, sys, time, urllib.request
sys.path.insert(0, sys.argv[1])
from prom import parse, get
def cmd(s, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    buf = b""
    while not buf.endswith(b"\r\n") or (buf.startswith(b"$") and buf.count(b"\r\n") < 2):
        d = s.recv(65536)
        assert d, "connection closed"
        buf += d
    return buf
s = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=10)
for i in range(20):
    assert cmd(s, "SET", "k%d" % i, "v%d" % i) == b"+OK\r\n"
assert cmd(s, "GET", "k7") == b"$2\r\nv7\r\n"
info = cmd(s, "INFO").decode()
fields = dict(l.split(":", 1) for l in info.split("\r\n") if ":" in l)
body = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[4], timeout=5).read().decode()
m = parse(body)
applied = get(m, "innet_kv_commands_applied_total", replica="r0")
assert applied == int(fields["commands_applied"]) == 20, (applied, fields["commands_applied"])
# the GET was answered from a read index, not through the log
assert get(m, "innet_kv_reads_local_total", replica="r0") == int(fields["reads_local"]) == 1
assert get(m, "innet_kv_keys", replica="r0") == 20
assert get(m, "innet_kv_connected_clients", replica="r0") == 1
assert get(m, "innet_kv_stage_seconds_total", replica="r0", stage="wait") > 0
open(sys.argv[1] + "/kv.prom", "w").write(body)
print("kv: %d commands applied, %d series" % (applied, len(m)))
EOF
promtool check metrics <"$TMP/kv.prom" >"$TMP/promtool-kv.log" 2>&1 ||
	fail "promtool on the KV metrics: $(cat "$TMP/promtool-kv.log")"

# ---------------------------------------------------------------------------
step "6. Prometheus scrapes both; 7. bad requests meanwhile"
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: innet_switch
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
  - job_name: innet_kv
    static_configs:
      - targets: ['127.0.0.1:$KPORT']
EOF
promtool check config "$TMP/prometheus.yml" >/dev/null 2>&1 || fail "promtool check config"
timeout -k 5 120 prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom-data" \
	--web.listen-address="127.0.0.1:$PPORT" --log.level=warn >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)

# The bad requests, in the background while Prometheus comes up.
"$PY" - "$MPORT" >"$TMP/abuse.log" 2>&1 <<'EOF' &
import socket, sys, threading, time, urllib.request
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s
def ask(data, shut=False):
    s = conn()
    try:
        s.sendall(data)
    except OSError:
        pass
    if shut:
        s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    return out
def status(data, want, shut=False):
    r = ask(data, shut)
    assert r.startswith(b"HTTP/1.1 %d " % want), (data[:40], r[:80])
half = conn()
half.sendall(b"GET /metr")                                  # half-open: never finished
t_half = time.monotonic()
status(b"\x00\xff garbage \x80\r\n\r\n", 400)
status(b"hello world\r\n\r\n", 400)
status(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n", 431)
status(b"GET /metrics HTTP/1.1\r\nHost: x\r\n", 400, shut=True)   # cut short
status(b"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi", 405)
status(b"GET /nope HTTP/1.1\r\n\r\n", 404)
status(b"GET /metrics HTTP/2.0\r\n\r\n", 505)
results = []
def scrape():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        results.append((r.status, len(r.read())))
ts = [threading.Thread(target=scrape) for _ in range(8)]
for t in ts: t.start()
for t in ts: t.join()
assert len(results) == 8 and all(s == 200 for s, _ in results), results
assert len(set(n for _, n in results)) == 1, results
half.settimeout(10)
assert half.recv(100) == b"", "the half-open connection got an answer"
waited = time.monotonic() - t_half
assert 4 <= waited <= 8, "the half-open connection was closed after %.1f s" % waited
idle = [conn() for _ in range(80)]                          # over the 64-client limit
status(b"GET /metrics HTTP/1.1\r\n\r\n", 200)
for s in idle:
    s.close()
print("bad requests answered; half-open closed after %.1f s; done at %.3f" % (waited, time.time()))
EOF
abuse=$!
PIDS+=("$abuse")

# Query Prometheus until it has what we expect (or 30 s).
"$PY" - "$PPORT" <<'EOF' || fail "Prometheus"
import json, sys, time, urllib.parse, urllib.request
base = "http://127.0.0.1:%s/api/v1/" % sys.argv[1]
def query(q):
    u = base + "query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(u, timeout=3) as r:
        d = json.load(r)
    assert d["status"] == "success", d
    return [(x["metric"], x["value"][1]) for x in d["data"]["result"]]
want = {
    'innet_program_dropped_packets_total{switch="s0",program="fwd",reason="too_short"}': "3",
    'innet_program_dropped_packets_total{switch="s0",program="fwd",reason="bad_magic"}': "2",
    'innet_kv_commands_applied_total{replica="r0"}': "20",
    'up{job="innet_switch"}': "1",
    'up{job="innet_kv"}': "1",
}
deadline = time.monotonic() + 30
got = {}
while time.monotonic() < deadline:
    try:
        for q in want:
            r = query(q)
            got[q] = r[0][1] if len(r) == 1 else r
    except (OSError, ValueError) as e:
        got["error"] = str(e)
    if all(got.get(q) == v for q, v in want.items()):
        break
    time.sleep(0.5)
else:
    sys.exit("Prometheus never had %r; last %r" % (want, got))
print("prometheus: %s" % ", ".join("%s = %s" % kv for kv in got.items() if kv[0] != "error"))
EOF
wait "$abuse" || fail "bad requests: $(cat "$TMP/abuse.log")"
cat "$TMP/abuse.log"
abuse_done=$(sed -n 's/.*done at \([0-9.]*\)$/\1/p' "$TMP/abuse.log")

# The switch kept serving: Prometheus's scrapes after the bad requests are
# healthy, and it still answers.
"$PY" - "$PPORT" "$abuse_done" <<'EOF' || fail "after the bad requests"
import json, re, sys, time, urllib.request
from datetime import datetime
def stamp(s):   # Go's RFC 3339 with nanoseconds, any offset
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    assert m, s
    off = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + (m.group(2) or "")[:7] + off).timestamp()
deadline = time.monotonic() + 10
while True:
    with urllib.request.urlopen("http://127.0.0.1:%s/api/v1/targets" % sys.argv[1], timeout=3) as r:
        ts = json.load(r)["data"]["activeTargets"]
    ok = len(ts) == 2
    for t in ts:
        last = stamp(t["lastScrape"])
        ok &= t["health"] == "up" and t["lastError"] == "" and last > float(sys.argv[2])
    if ok:
        break
    assert time.monotonic() < deadline, ts
    time.sleep(0.5)
print("both targets up, scraped after the bad requests")
EOF
ctl metrics | promtool check metrics >/dev/null 2>&1 || fail "ctl metrics after the bad requests"
ctl ping >/dev/null || fail "the switch stopped answering its control socket"
if grep -Eqi 'sanitizer|segmentation|abort' "$TMP"/state/*.log "$TMP"/kvstate/*.log "$TMP/kv-r0.log"; then
	fail "a switch or replica log reports a crash"
fi
echo "PASS: metrics (${SECONDS}s)"
