#!/usr/bin/env bash
# cli_errors.sh — wrong command lines get a clear message and exit status 2
# (usage / bad input), never a crash or a hang; --help works everywhere and
# exits 0. Nothing here starts a long-running process: the few invocations
# that could start a switch are bounded by --duration and timeout.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
INNET=${INNET:-./build/innet}
checks=0

# expect STATUS SUBSTRING ARGS...: innet ARGS exits STATUS and prints SUBSTRING.
expect() {
	local want=$1 msg=$2 out rc=0
	shift 2
	out=$(timeout 10 "$INNET" "$@" 2>&1) || rc=$?
	[ "$rc" -eq "$want" ] || fail "innet $*: exit $rc, expected $want; output: $out"
	grep -qF -- "$msg" <<<"$out" || fail "innet $*: no '$msg' in: $out"
	checks=$((checks + 1))
}

# every shipped subcommand answers --help with its usage (one missing from
# the build is a failure, not a case to leave out)
for sub in switch fabric ctl programs ping counter kv paxos dnn allreduce lb; do
	"$INNET" --help | grep -q "^  $sub " || fail "innet --help does not list '$sub'"
	expect 0 "usage" "$sub" --help
done
expect 2 "unknown command 'frob'" frob
expect 2 "usage: innet COMMAND" 

expect 2 "need at least one --port and one --program" switch
expect 2 "bad --port '1.2.3'" switch --port 1.2.3
expect 2 "unknown program in 'nosuch@9000'; known: agg counter dnn_layer forward" switch --port 127.0.0.1 --program nosuch@9000
expect 2 "bad --program 'forward@0'" switch --port 127.0.0.1 --program forward@0
expect 2 "bad --program 'forward'" switch --port 127.0.0.1 --program forward
expect 2 "--workers wants 1..64" switch --workers 0 --port 127.0.0.1 --program forward@9000
expect 2 "bad --link 'loss=2'" switch --port 127.0.0.1 --link loss=2
expect 2 "bad --link 'loss=0.5,bogus=1'" switch --port 127.0.0.1 --link loss=0.5,bogus=1
expect 2 "--args must follow a --program" switch --port 127.0.0.1 --args '{}'
expect 2 "settings are not valid JSON" switch --port 127.0.0.197 --program forward@46001 --args '{' --duration 1
expect 2 "unknown setting 'mapp'" switch --port 127.0.0.197 --program forward@46001 --args '{"mapp":[0]}' --duration 1
expect 2 "setting 'size' = 0 is out of range" switch --port 127.0.0.197 --program counter@46001 --args '{"size":0}' --duration 1
expect 2 "map entry 0 -> 5 names a port" switch --port 127.0.0.197 --program forward@46001 --args '{"map":[5]}' --duration 1
expect 2 "cannot read" switch --topology /nonexistent/topo.json --name x
expect 2 "--topology needs --name" switch --topology examples/single.json
expect 2 "unrecognized option" switch --bogus
expect 2 "unexpected argument 'extra'" switch --port 127.0.0.1 --program forward@9000 extra

expect 2 "missing subcommand" fabric
expect 2 "missing FILE" fabric up
expect 2 "unknown subcommand 'frob'" fabric frob x
expect 2 "--workers wants 1 to 256" fabric up examples/single.json --workers 0
expect 2 "--machine wants a name" fabric status examples/single.json --machine 'a/b'
expect 2 "no command given" ctl
expect 2 "usage: innet ping" ping --topology examples/single.json --from h0
expect 2 "missing --to HOST" ping --topology examples/single.json --from h0
expect 2 "missing --topology FILE, --from HOST" ping --to h1
expect 2 "--from s0: a switch of examples/single.json, not a host" ping --topology examples/single.json --from s0 --to h1
expect 2 "--to hXX: examples/single.json has no node of that name (its hosts: h0, h1)" ping --topology examples/single.json --from h0 --to hXX
expect 2 "unexpected argument 'x'" ping --topology examples/single.json --from h0 --to h1 x
expect 2 "innet kv up: missing operand: wants FILE" kv up
expect 2 "innet kv start: missing operand: wants FILE HOST" kv start examples/kv.json
expect 2 "innet kv down: too many operands" kv down a b
expect 2 "innet kv serve: missing --topology FILE and --name HOST" kv serve
expect 2 "innet kv: unknown command 'frob'" kv frob
# A fabric that is not up: said so, with what to do (state in a fresh directory).
st=$(mktemp -d /tmp/innet-clierr.XXXXXX)
cleanup() { rm -rf "$st"; }
sed "s#\"addr_base\"#\"state_dir\": \"$st\", \"addr_base\"#" examples/single.json >"$st/t.json"
expect 1 "is not up (no state file $st/fabric.json): start it with 'innet fabric up $st/t.json'" fabric status "$st/t.json"
rm -rf "$st"
expect 2 "usage: innet counter" counter inc 1
expect 2 "usage: innet counter" counter --to 127.0.0.1 frob 1
expect 2 "usage: innet programs" programs --bogus

# What a new user hits (issue 14): each says what is wrong, or helps.
ver=$(sed -n 's/^#define INNET_VERSION_\(MAJOR\|MINOR\|PATCH\) *//p' include/innet/version.h | paste -sd.)
expect 0 "innet $ver" --version
expect 0 "--delay-worker W" allreduce --help
expect 0 "Exit status" allreduce --help
expect 2 "missing --bind IP:UDP" allreduce --switch 127.0.0.1
expect 2 "give either --worker W or --all" allreduce --switch 127.0.0.1 --bind 127.0.0.1:30000 --job 1 --workers 2
expect 0 "usage: innet ctl" ctl stats --help
expect 0 "prog lb help" ctl prog lb --help
expect 2 "missing --topology FILE --from HOST --testset FILE" dnn eval
expect 2 "--index wants an integer" dnn infer --index x
expect 2 "needs MODEL and TESTSET" dnn ref
expect 2 "unknown operation 'frob' (inc, read or load)" counter --to 127.0.0.1 frob 1
expect 2 "missing --to IP[:UDP]" counter inc 1
expect 2 "INDEX must be an integer" counter --to 127.0.0.1 read x
# innet programs: the model column starts at the same place on every line
progs=$("$INNET" programs)
cols=$(awk '{ print index($0, " " $2 " ") }' <<<"$progs" | sort -u | wc -l)
[ "$cols" -eq 1 ] || fail "innet programs: columns do not line up:
$progs"
head -n 1 <<<"$progs" | grep -q "^program  *model  *summary" || fail "innet programs: no header line"
checks=$((checks + 1))
# innet dnn infer with a test set of another shape names both shapes
tmp=$(mktemp -d /tmp/innet-cli-errors.XXXXXX)
cleanup() { rm -rf "$tmp"; }
"$INNET" dnn compile examples/dnn-digits.innet examples/dnn-spine-leaf.json --leaves leaf1,leaf2,leaf3 \
	--out "$tmp/dnn.json" >/dev/null
expect 1 "are 3x32x32 (CxHxW); the model deployed in $tmp/dnn.json expects 1x8x8" \
	dnn infer --topology "$tmp/dnn.json" --from h0 --testset examples/mini-alexnet.testset

# A second switch on an address already in use is a run-time failure (1).
"$INNET" switch --name cli-a --port 127.0.0.197 --program forward@46002 --duration 30 --ctl "" 2>"$tmp/cli-a.err" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
# the first switch holds the port once it says ready (however busy the machine)
for _ in $(seq $(slow 200)); do grep -q ready "$tmp/cli-a.err" && break; sleep 0.05; done
grep -q ready "$tmp/cli-a.err" || fail "the first switch is not ready: $(cat "$tmp/cli-a.err")"
expect 1 "cannot bind 127.0.0.197:46002" switch --name cli-b --port 127.0.0.197 --program forward@46002 --duration 1 --ctl ""
echo "PASS ($checks checks)"
