#!/usr/bin/env bash
# bench_rawrelay.sh — the forwarding benchmark's baseline relay
# (bench/src/rawrelay.c) sends with UDP GSO, as the switch runtime does, and
# GSO changes nothing on the wire: every datagram arrives once, in order,
# byte for byte, whatever mix of sizes it was coalesced from. Also checks
# --no-gso (one message per datagram) and the relay's counters.
#
# How: the relay is stopped (SIGSTOP) while a chunk of datagrams queues up
# on its socket, then continued, so its recvmmsg returns full bursts and it
# has runs of equal sizes to coalesce. Loopback only (127.0.91.0/24).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
RELAY=${RAWRELAY:-./build/bench/rawrelay}
[ -x "$RELAY" ] || { echo "build/bench/rawrelay missing (make)" >&2; exit 1; }

run() { # MODE [rawrelay options]: MODE gso | nogso
	local mode=$1
	shift
	echo "== rawrelay $* : 4000 datagrams of mixed sizes (64, 1000, 1472, 7, 0 B) in 10 stopped-and-continued chunks"
	timeout 60 /usr/bin/python3 - "$RELAY" "$mode" "$@" <<'EOF'
import os, random, signal, socket, subprocess, sys, time

relay_bin, mode, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
IN, OUT, TO = ("127.0.91.1", 9601), "127.0.91.2", ("127.0.91.3", 9601)
sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sink.bind(TO)
for opt in (33, socket.SO_RCVBUF):  # SO_RCVBUFFORCE (root), else SO_RCVBUF
    try:
        sink.setsockopt(socket.SOL_SOCKET, opt, 16 << 20)
        break
    except OSError:
        pass
relay = subprocess.Popen([relay_bin, "--in", "%s:%d" % IN, "--out", OUT, "--to", "%s:%d" % TO,
                          "--duration", "30"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    line = relay.stderr.readline()
    if "ready" not in line:
        sys.exit("relay did not start: %r" % line)
    print("relay:", line.strip())
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    random.seed(7)
    sent = []
    for i in range(4000):
        # runs of equal sizes (to coalesce) broken by other sizes
        n = 64 if i % 100 < 60 else random.choice([64, 1000, 1472, 1472, 7, 0])
        sent.append(((i.to_bytes(4, "big") * 400)[:n]))
    got = []
    sink.settimeout(2)
    for c in range(10):
        relay.send_signal(signal.SIGSTOP)
        for b in sent[c * 400:(c + 1) * 400]:
            tx.sendto(b, IN)
        relay.send_signal(signal.SIGCONT)
        while len(got) < (c + 1) * 400:
            try:
                got.append(sink.recv(65536))
            except socket.timeout:
                break
    relay.send_signal(signal.SIGTERM)
    out, err = relay.communicate(timeout=10)
finally:
    if relay.poll() is None:
        relay.kill()
summary = out.strip().splitlines()[-1]
print("relay:", summary)
kv = dict(f.split("=", 1) for f in summary.split()[1:])
fails = []
if len(got) != len(sent):
    fails.append("sink got %d of %d datagrams" % (len(got), len(sent)))
elif got != sent:
    k = next(i for i in range(len(sent)) if got[i] != sent[i])
    fails.append("datagram %d differs (sent %d B, got %d B)" % (k, len(sent[k]), len(got[k])))
if int(kv["rx"]) != 4000 or int(kv["tx"]) != 4000 or int(kv["tx_errors"]) != 0:
    fails.append("counters: rx=%s tx=%s tx_errors=%s, expected 4000 4000 0" % (kv["rx"], kv["tx"], kv["tx_errors"]))
if "tx_msgs" not in kv or "tx_gso" not in kv or "gso" not in kv:
    sys.exit("FAIL: the relay reports no tx_msgs / tx_gso / gso counters: %s" % summary)
msgs, gso = int(kv["tx_msgs"]), int(kv["tx_gso"])
if mode == "gso":
    # 2400 of the datagrams are in runs of 60 equal sizes: most must coalesce
    if kv["gso"] != "on" or gso < 2000 or msgs > 2000:
        fails.append("GSO not used enough: gso=%s tx_gso=%d tx_msgs=%d" % (kv["gso"], gso, msgs))
else:
    if kv["gso"] != "off" or gso != 0 or msgs != 4000:
        fails.append("--no-gso: gso=%s tx_gso=%d tx_msgs=%d, expected off 0 4000" % (kv["gso"], gso, msgs))
if fails:
    sys.exit("FAIL: " + "; ".join(fails))
print("ok: %d datagrams in order and intact; %d kernel messages, %d datagrams sent coalesced" %
      (len(got), msgs, gso))
EOF
}

run gso
run nogso --no-gso
run gso --burst 64 --connect
echo "== bad option"
out=$("$RELAY" --in 127.0.91.1:9601 --out 127.0.91.2 --to 127.0.91.3:9601 --gso 2>&1) && rc=0 || rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --gso (not an option): exit $rc, expected 2: $out" >&2; exit 1; }
echo "ok: an unknown option exits 2"
echo "bench_rawrelay: all checks passed"
