#!/usr/bin/env bash
# ctl_errors.sh — the control socket under bad input, and its happy paths.
#
# Every bad request must get one clear {"ok":false,"error":...} line and the
# switch must keep serving: unknown commands, wrong word counts, unknown
# programs/registers/tables, out-of-range indices, bad numbers, bad hex,
# oversized lines, garbage bytes (NUL, invalid UTF-8), clients that vanish
# mid-line or never read, too many clients. The happy paths: reg read/write,
# table add/get/list/del, group set/get (when a program declares groups),
# stats and stats reset, the text rendering, and the `innet ctl` exit codes
# (0 ok, 1 error response or connection failure, 2 usage).
#
# The switch runs counter and forward on a random 127.A.B.0/24 block (override
# with INNET_CTL_NET) so that concurrent runs do not collide. A program with
# multicast groups can be added with INNET_CTL_GROUP_PROGRAM=PROG[/INST]@UDP.
#
# Exit 0 on success, 1 on the first failure, 77 (skip, as tests/run counts
# it) when python3 is missing.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
PYTHON=${PYTHON:-/usr/bin/python3}
NET=${INNET_CTL_NET:-127.$((100 + RANDOM % 100)).$((1 + RANDOM % 250))}
SW0=$NET.1
UDP_CNT=9100
UDP_FWD=9101

if ! command -v "$PYTHON" >/dev/null 2>&1; then
	skip "$PYTHON not installed"
fi
if [[ ! -x $INNET ]]; then
	echo "FAIL: $INNET not built (run make)"
	exit 1
fi

TMP=$(mktemp -d /tmp/innet-ctlerr.XXXXXX)
SOCK=$TMP/errs.sock
pid=""
checks=0

cleanup() {
	if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}

fail_details() {
	if [[ -f $TMP/switch.log ]]; then
		echo "--- switch log"
		cat "$TMP/switch.log"
	fi
}

extra=()
if [[ -n ${INNET_CTL_GROUP_PROGRAM:-} ]]; then
	extra=(--program "$INNET_CTL_GROUP_PROGRAM")
fi
timeout -k 5 120 "$INNET" switch --name errs --workers 2 \
	--port "$SW0" --port "$NET.2=$NET.3" \
	--program "counter@$UDP_CNT" --program "forward/fwd@$UDP_FWD" --args '{"groups":4}' "${extra[@]}" \
	--ctl "$SOCK" >"$TMP/switch.log" 2>&1 &
pid=$!
for _ in $(seq $(slow 100)); do
	if timeout 5 "$INNET" ctl -s "$SOCK" ping >/dev/null 2>&1; then
		break
	fi
	kill -0 "$pid" 2>/dev/null || fail "the switch exited"
	sleep 0.1
done

# ---------------------------------------------------------------------------
# Helpers

# Check a JSON response: pycheck JSON PYEXPR [ARG] (r is the parsed response,
# a the optional ARG).
pycheck() {
	timeout 10 "$PYTHON" -c '
import json, re, sys
r = json.loads(sys.argv[1])
a = sys.argv[3] if len(sys.argv) > 3 else None
ok = eval(sys.argv[2], {"r": r, "re": re, "a": a})
sys.exit(0 if ok else 1)
' "$@"
}

# expect_ok PYEXPR WORDS...: `innet ctl --json WORDS` exits 0, ok is true and
# PYEXPR holds.
expect_ok() {
	local check=$1 out rc=0
	shift
	out=$(timeout 10 "$INNET" ctl -s "$SOCK" --json "$@" 2>"$TMP/stderr") || rc=$?
	[[ $rc -eq 0 ]] || fail "'$*' exited $rc: $out $(cat "$TMP/stderr")"
	pycheck "$out" "r['ok'] is True and ($check)" || fail "'$*': check '$check' failed on: $out"
	checks=$((checks + 1))
}

# expect_err REGEX WORDS...: exits 1 and the error message matches REGEX.
expect_err() {
	local re=$1 out rc=0
	shift
	out=$(timeout 10 "$INNET" ctl -s "$SOCK" --json "$@" 2>"$TMP/stderr") || rc=$?
	[[ $rc -eq 1 ]] || fail "'$*' exited $rc (want 1): $out"
	pycheck "$out" "r['ok'] is False and re.search(a, r['error']) is not None" "$re" \
		|| fail "'$*': error does not match /$re/: $out"
	checks=$((checks + 1))
}

# raw PYTHON-BODY: run Python with `conn()` (a connected socket) and
# `lines(sock, n)` (read n response lines, each parsed) defined.
raw() {
	timeout 30 "$PYTHON" - "$SOCK" <<EOF
import json, socket, sys, time
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)   # blocking: a full backlog waits (the outer timeout bounds it)
    s.settimeout(5)
    return s
def lines(s, n):
    buf = b""
    while buf.count(b"\n") < n:
        d = s.recv(65536)
        if not d:
            raise SystemExit(f"connection closed after {buf!r}")
        buf += d
    out = [json.loads(l) for l in buf.split(b"\n")[:n]]
    for r in out:
        assert isinstance(r, dict) and isinstance(r.get("ok"), bool), r
        assert r["ok"] or isinstance(r.get("error"), str) and r["error"], r
    return out
$1
EOF
	checks=$((checks + 1))
}

alive() {
	kill -0 "$pid" 2>/dev/null || fail "the switch died ($1)"
	timeout 5 "$INNET" ctl -s "$SOCK" ping >/dev/null 2>&1 || fail "the switch stopped answering ($1)"
}

# ---------------------------------------------------------------------------
# Bad requests

expect_err "unknown command 'bogus'" bogus
expect_err "unknown command" frobnicate 1 2 3
expect_err "needs a sub-command" reg
expect_err "unknown 'reg' sub-command 'peek'" reg peek counter value 0
expect_err "^usage: reg read PROG REG IDX \[COUNT\]" reg read counter
expect_err "^usage: reg read" reg read counter value 0 1 2
expect_err "^usage: ping" ping extra
expect_err "^usage: stats" stats now
expect_err "unknown program 'nosuch' \(programs: counter, fwd" reg read nosuch value 0
expect_err "has no register 'nosuch' \(registers: value\)" reg read counter nosuch 0
expect_err "index 1024 out of range: register 'value' has 1024 elements" reg read counter value 1024
expect_err "out of range" reg read counter value 1020 10
expect_err "out of range" reg read counter value 4294967295
expect_err "bad IDX '4294967296'" reg read counter value 4294967296
expect_err "bad COUNT" reg read counter value 0 100000
expect_err "bad COUNT 0" reg read counter value 0 0
expect_err "bad IDX 'abc'" reg read counter value abc
expect_err "bad IDX '-1'" reg read counter value -1
expect_err "bad IDX '\+1'" reg read counter value +1
expect_err "bad IDX '0x'" reg read counter value 0x
expect_err "bad IDX '0x0x5'" reg read counter value 0x0x5
expect_err "bad IDX '1e3'" reg read counter value 1e3
expect_err "bad IDX '99999999999999999999999'" reg read counter value 99999999999999999999999
expect_err "index 5000 out of range" reg write counter value 5000 1
expect_err "bad VALUE '0x1ffffffffffffffff'" reg write counter value 0 0x1ffffffffffffffff
expect_err "bad VALUE '65536': larger than 65535" reg write fwd port_map 0 65536
expect_err "bad VALUE" reg write counter value 0 12abc
expect_err "has no table 'nosuch' \(tables: routes\)" table get fwd nosuch 0001
expect_err "has no table 'routes' \(tables: none\)" table get counter routes 0001
expect_err "bad KEYHEX '00zz': not a hex string" table get fwd routes 00zz
expect_err "bad KEYHEX '001': expected an even number" table get fwd routes 001
expect_err "bad KEYHEX: table 'routes' has 2-byte keys" table get fwd routes 01
expect_err "bad KEYHEX: 3 bytes, at most 2" table get fwd routes 010203
expect_err "bad VALHEX: table 'routes' has 18-byte values" table add fwd routes 0001 00
expect_err "bad VALHEX 'xyz" table add fwd routes 0001 xyz
expect_err "no such key" table get fwd routes 0777
expect_err "no such key" table del fwd routes 0777
expect_err "bad MAX" table list fwd routes 100000000
expect_err "declares no multicast groups" group get counter 0
expect_err "bad GROUP 'x'" group get counter x
expect_err "port 7 out of range: the switch has 2 ports" capture start 7 "$TMP/x.pcap"
expect_err "cannot capture port 0 into '/nonexistent-dir/x.pcap': No such file" \
	capture start 0 /nonexistent-dir/x.pcap
expect_err "bad MAXPKTS" capture start 0 "$TMP/x.pcap" many
expect_err "port 1 is not being captured" capture stop 1
expect_err "unknown program 'nosuch'" resources nosuch
alive "after bad requests"

# The raw protocol: several requests on one connection, answered in order;
# CRLF; empty lines; NUL bytes; invalid UTF-8; a line over 64 KiB and the
# request after it on the same connection.
raw '
s = conn()
s.sendall(b"ping\ninfo\nbogus\nping\r\n\n   \n")
r = lines(s, 6)
assert r[0]["ok"] and r[0]["switch"] == "errs", r[0]
assert r[1]["ok"] and len(r[1]["ports"]) == 2, r[1]
assert not r[2]["ok"] and "unknown command" in r[2]["error"], r[2]
assert r[3]["ok"], r[3]
assert not r[4]["ok"] and "empty request" in r[4]["error"], r[4]
assert not r[5]["ok"] and "empty request" in r[5]["error"], r[5]
s.sendall(b"pi\x00ng\n\xff\xfe\xc3\x28 garbage \x80\x81\n\x1b[31mred\n")
r = lines(s, 3)
assert not r[0]["ok"] and "NUL" in r[0]["error"], r[0]
assert not r[1]["ok"] and "unknown command" in r[1]["error"], r[1]
assert not r[2]["ok"] and "unknown command" in r[2]["error"], r[2]
s.sendall(b"x" * 70000 + b"\nping\n")
r = lines(s, 2)
assert not r[0]["ok"] and "longer than 65536" in r[0]["error"], r[0]
assert r[1]["ok"], r[1]
s.sendall(b"reg read counter value " + b" 1" * 100 + b"\n")
r = lines(s, 1)
assert not r[0]["ok"] and "too many words" in r[0]["error"], r[0]
s.sendall(b"ping")      # no newline, then half-close: still answered
s.shutdown(socket.SHUT_WR)
r = lines(s, 1)
assert r[0]["ok"], r[0]
s.close()
'

# Clients that go away: mid-line, right after connecting, after sending many
# requests without reading a single response, in the middle of a long line.
raw '
for i in range(20):
    s = conn(); s.sendall(b"reg read coun"); s.close()
    s = conn(); s.close()
s = conn(); s.sendall(b"stats\n" * 5000); s.close()
s = conn(); s.sendall(b"y" * 100000); s.close()
s = conn()
s.sendall(b"ping\n")
assert lines(s, 1)[0]["ok"]
'
alive "after clients vanished"

# Too many clients: the ones over the limit are told so; the rest still work.
raw '
held = [conn() for _ in range(80)]
time.sleep(0.3)
refused = 0
for s in held:
    s.setblocking(False)
    try:
        d = s.recv(4096)
        if d:
            r = json.loads(d.split(b"\n")[0])
            assert not r["ok"] and "too many control clients" in r["error"], r
            refused += 1
    except BlockingIOError:
        pass
assert refused >= 1, refused
for s in held:
    s.close()
time.sleep(0.2)
s = conn(); s.sendall(b"ping\n"); assert lines(s, 1)[0]["ok"]
'
alive "after too many clients"

# ---------------------------------------------------------------------------
# Happy paths

expect_ok "r['switch'] == 'errs' and r['node'] >= 0" ping
expect_ok "[p['name'] for p in r['programs']][:2] == ['counter', 'fwd'] and r['programs'][0]['model'] == 'pisa' and r['programs'][0]['udp'] == [$UDP_CNT] and r['ports'][1]['peer'] == '$NET.3'" info
expect_ok "r['programs'][0]['registers'] == [{'name': 'value', 'width': 8, 'count': 1024}] and r['programs'][1]['tables'][0]['name'] == 'routes' and 'too_short' in r['programs'][0]['drop_reasons']" programs
expect_ok "r['values'] == [0]" reg read counter value 5
expect_ok "True" reg write counter value 5 42
expect_ok "r['values'] == [42] and r['width'] == 8" reg read counter value 5
expect_ok "True" reg write counter value 6 0xffffffffffffffff
expect_ok "r['values'] == [0, 42, '18446744073709551615']" reg read counter value 4 3
expect_ok "True" reg write fwd port_map 3 0xffff
expect_ok "r['values'] == [65535]" reg read fwd port_map 3
expect_ok "r['values'] == [0, 65535]" reg read fwd port_map 2 2
val=000200010002000000000000000000000000
expect_ok "r['entries'] == 1" table add fwd routes 0x0005 "$val"
expect_ok "r['key'] == '0005' and r['value'] == '$val'" table get fwd routes 0005
expect_ok "r['entries'] == 2" table add fwd routes 0006 "$val"
expect_ok "sorted(e['key'] for e in r['entries']) == ['0005', '0006'] and r['truncated'] is False" \
	table list fwd routes
expect_ok "len(r['entries']) == 1 and r['truncated'] is True" table list fwd routes 1
expect_ok "r['entries'] == 1" table del fwd routes 0005
expect_err "no such key" table get fwd routes 0005
expect_ok "r['programs'][1]['tables'][0]['entries'] == 1" programs

# group set/get on the first program that declares groups, if any.
gprog=$(timeout 10 "$INNET" ctl -s "$SOCK" --json programs |
	"$PYTHON" -c 'import json,sys; r=json.load(sys.stdin); print(next((p["name"] for p in r["programs"] if p["groups"] > 0), ""))')
if [[ -n $gprog ]]; then
	expect_ok "r['members'] == [{'port': 0}, {'port': 1, 'ip': '10.1.2.3', 'udp': 9999}]" \
		group set "$gprog" 0 0 1@10.1.2.3:9999
	expect_ok "r['members'] == [{'port': 0}, {'port': 1, 'ip': '10.1.2.3', 'udp': 9999}]" \
		group get "$gprog" 0
	expect_ok "r['members'] == []" group set "$gprog" 0
	expect_err "port 5 out of range" group set "$gprog" 0 5
	expect_err "not a dotted-quad" group set "$gprog" 0 1@300.1.1.1:5
	expect_err "expected PORT@IP:UDP" group set "$gprog" 0 1@10.0.0.1
	expect_err "bad MEMBER UDP port" group set "$gprog" 0 1@10.0.0.1:70000
else
	fail "no program declares multicast groups (forward was started with groups: 4)"
fi

# stats: send counter traffic, see it counted by port, program, action and
# drop reason; then reset.
timeout 10 "$PYTHON" - "$SW0" "$UDP_CNT" <<'EOF'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
for i in range(10):
    s.sendto(struct.pack("!BBBBHHBBHIQ", 0x1E, 1, 1, 0, 1, 9, 1, 0, 0, 7, 1),
             (sys.argv[1], int(sys.argv[2])))
    s.recvfrom(100)
s.sendto(b"\x1e\x01", (sys.argv[1], int(sys.argv[2])))  # too short: dropped
EOF
sleep 0.2
expect_ok "r['ports'][0]['rx_pkts'] == 11 and r['ports'][0]['tx_pkts'] == 10 and r['programs'][0]['rx_pkts'] == 11 and r['programs'][0]['actions']['reflect'] == 10 and r['programs'][0]['drops'] == {'too_short': 1} and r['programs'][1]['drops'] == {}" stats
expect_ok "True" stats reset
expect_ok "r['ports'][0]['rx_pkts'] == 0 and r['programs'][0]['rx_pkts'] == 0 and r['programs'][0]['drops'] == {}" stats
expect_ok "len(r['programs']) >= 2 and 'targets' in r['programs'][0] and r['programs'][0]['text']" resources
expect_ok "len(r['programs']) == 1 and r['programs'][0]['name'] == 'fwd'" resources fwd
expect_ok "any(c['command'].startswith('reg read') for c in r['commands'])" help

# ---------------------------------------------------------------------------
# The innet ctl command: text rendering and exit codes

out=$(timeout 10 "$INNET" ctl -s "$SOCK" reg read counter value 5 2) || fail "text reg read"
[[ $out == $'counter.value[5] = 42\ncounter.value[6] = 18446744073709551615' ]] \
	|| fail "text reg read: $out"
out=$(timeout 10 "$INNET" ctl -s "$SOCK" stats) || fail "text stats"
grep -q '^port 0 ' <<<"$out" || fail "text stats has no port line: $out"
grep -q '^prog counter ' <<<"$out" || fail "text stats has no program line: $out"
out=$(timeout 10 "$INNET" ctl -s "$SOCK" info) || fail "text info"
grep -Eq '^1 +p1 +[0-9.]+ +[0-9.]+' <<<"$out" || fail "text info port table: $out"
out=$(timeout 10 "$INNET" ctl -s "$SOCK" watch 2) || fail "watch"
[[ $(grep -c '^port 0 ' <<<"$out") -eq 2 ]] || fail "watch 2 printed: $out"

rc=0
err=$(timeout 10 "$INNET" ctl -s "$SOCK" bogus 2>&1 >/dev/null) || rc=$?
[[ $rc -eq 1 && $err == *"unknown command 'bogus'"* ]] || fail "text error: rc $rc: $err"
rc=0
err=$(timeout 10 "$INNET" ctl -s "$TMP/nosuch.sock" ping 2>&1) || rc=$?
[[ $rc -eq 1 && $err == *"$TMP/nosuch.sock"* ]] || fail "connection failure: rc $rc: $err"
for args in "" "-s" "-s $SOCK" "--fabric $TMP" "--bogus ping" "-s $SOCK watch 0" \
	"-s $SOCK --timeout -1 ping"; do
	rc=0
	# shellcheck disable=SC2086 # split on purpose
	timeout 10 "$INNET" ctl $args >/dev/null 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || fail "'innet ctl $args' exited $rc, want 2"
	checks=$((checks + 1))
done
rc=0
timeout 10 "$INNET" ctl -s "$SOCK" reg read counter "a b" 0 >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "an argument with a space exited $rc, want 2"
timeout 10 "$INNET" ctl --help | grep -q '^usage: innet ctl' || fail "--help"

# --fabric: a state directory, and a topology file naming it.
out=$(timeout 10 "$INNET" ctl --fabric "$TMP" --switch errs ping) || fail "--fabric DIR"
printf '{"name": "t", "state_dir": "%s"}\n' "$TMP" >"$TMP/topo.json"
out=$(timeout 10 "$INNET" ctl --fabric "$TMP/topo.json" --switch errs ping) || fail "--fabric FILE"
[[ $out == *"switch errs"* ]] || fail "--fabric FILE: $out"
# A name the topology does not have as a switch: said so, not "is it running?".
printf '{"name": "t", "state_dir": "%s", "switches": [{"name": "errs"}], "hosts": [{"name": "h0"}]}\n' \
	"$TMP" >"$TMP/topo2.json"
out=$(timeout 10 "$INNET" ctl --fabric "$TMP/topo2.json" --switch errs ping) || fail "--fabric FILE with switches"
rc=0
err=$(timeout 10 "$INNET" ctl --fabric "$TMP/topo2.json" --switch nosuch ping 2>&1) || rc=$?
[[ $rc -eq 1 && $err == *"has no switch named 'nosuch' (its switches: errs)"* ]] ||
	fail "--switch nosuch: rc $rc: $err"
rc=0
err=$(timeout 10 "$INNET" ctl --fabric "$TMP/topo2.json" --switch h0 ping 2>&1) || rc=$?
[[ $rc -eq 1 && $err == *"'h0' is a host"* ]] || fail "--switch h0: rc $rc: $err"
checks=$((checks + 3))

alive "at the end"
if grep -Eqi 'sanitizer|segmentation|abort' "$TMP/switch.log"; then
	fail "the switch log reports a crash"
fi
echo "PASS: ctl_errors ($checks checks)"
