#!/usr/bin/env bash
# p4_run.sh — `innet p4 run`, the interface the P4 tests drive innet through,
# on both targets: tests/p4/cli.script (every kind of table, profile,
# counter, meter, register, value set, multicast and mirroring, through
# simple_switch_CLI's commands and frames) on tests/p4/cli.json (p4c's output
# for tests/p4/cli.p4), on the user-space engine and, as root, on XDP:
#
#   cli.script ─▶ innet p4 run --target user ─▶ out PORT HEX / > CLI output ─┐ the same,
#             └─▶ innet p4 run --target xdp  ─▶ (BPF_PROG_TEST_RUN, hand-offs) ┘ and as expected
#
# Checks: the two targets print the same lines; the frames out and the
# command outputs that show each mechanism are what simple_switch does
# (expected lines below, each with why); a refused program and a bad script
# line exit as documented (1 and 2) with a message naming the problem.
# With p4c (P4C_BM2_SS or PATH), also a few of p4c's own v1model samples run
# on both targets and agree. Short: seconds once the program is cached.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

JSON=tests/p4/cli.json
SCRIPT=tests/p4/cli.script
TMP=$(mktemp -d /tmp/innet-p4run.XXXXXX)
cleanup() { rm -rf "$TMP"; }
export INNET_P4_CACHE=${INNET_P4_CACHE:-$TMP/cache}

timeout 300 "$INNET" p4 run --target user --ports 4 "$JSON" "$SCRIPT" >"$TMP/user.out" 2>"$TMP/user.err" ||
	fail "innet p4 run --target user: $(cat "$TMP/user.err")"
out=$(cat "$TMP/user.out")

expect() { # LINE WHY: LINE must be in the output
	grep -qxF -- "$1" <<<"$out" || fail "expected '$1' ($2); got:
$out"
}
absent() { # PATTERN WHY
	if grep -q -- "$1" <<<"$out"; then fail "unexpected '$1' ($2)"; fi
}

# (each line checked against BMv2's simple_switch with the same script,
# tools/p4/p4test run --target bmv2, when this test was written)
expect '> digest learn_t 1 02000000000a0000' "the ARP frame missed 'mac': its default learn() digests (src MAC, port 0)"
absent '^out 0 ffffffffffff' "the ARP frame is dropped by the const entry for 0x0806"
expect 'out 1 00000000000102000000000b123468656c6c6f' "0x1234 to 00:..:01 leaves port 1 unchanged"
expect '> mac_hits[0]= (19 bytes, 1 packets)' "the direct counter of entry 0, as simple_switch_CLI prints it"
expect 'out 2 00000000002200000000000208004500001c00010000401164cc0a0000010a01020304d2005000080000' \
	"UDP to 10.1.2.3: /32 route, nexthop member 0's MACs"
expect 'out 3 0200000000f002000000000c08004500001c00010000401164cc0a0000010a01020304d2005000080000' \
	"the I2E clone to session 5 (port 3): the frame as it came in"
expect '> r8[2]= 64' "stash: the TTL"
expect '> r32[2]= 167772161' "stash: 10.0.0.1"
expect '> r64[2]= 2199023255564' "stash: the source MAC 02:00:00:00:00:0c"
expect 'out 0 00000000002200000000000908004500001c00010000400664d70a0000010a01020304d2138800080000' \
	"TCP: multicast group 1, member port 0 (rid 7 added to the source MAC in egress)"
expect 'out 3 00000000002200000000000908004500001c00010000400664d70a0000010a01020304d2138800080000' \
	"TCP: multicast group 1, member port 3 (rid 7)"
# ECMP: the same two flows to 10.2.0.9 (group 0, members added 0, 1) and to
# 10.2.0.10 (group 1, members added 3, 2: kept as [2, 3]) take the same ports
expect 'out 2 00000000002200000000000208004500001c00010000401166bc0a0900010a02000903e8003500080000' "flow 1 via group 0"
expect 'out 1 0200000000f002000000000c08004500001c00010000401166bb0a0900020a02000903e9003500080000' "flow 2 via group 0"
expect 'out 2 00000000002200000000000208004500001c00010000401166bb0a0900010a02000a03e8003500080000' "flow 1 via group 1"
expect 'out 1 0200000000f002000000000c08004500001c00010000401166ba0a0900020a02000a03e9003500080000' "flow 2 via group 1"
expect '> Members: [2, 3]' "a group in handle order"
expect '> Action entry: I.fwd_tag - 02, 77' "action data without leading zero bytes"
expect '> match key:           LPM-0a:09:00:00/33' "a /33 on a 32-bit key: the entry shown ..."
expect '> Invalid table operation (BAD_MATCH_KEY)' "... then refused"
expect '> *** Unknown syntax: frobnicate 1 2' "a word simple_switch_CLI does not know"
expect 'out 3 00000000003300000000000386dd600000000008114020010db800000000000000000000000220010db80000000000000000000000010007000900080000' \
	"IPv6 /32 route to port 3, nexthop member 1's MACs"
expect '> r128[1]= 22774453838368691933757882222884355840' "a 128-bit register (written in hex: innet's extension)"
expect '> r8[3]= 255' "register_write beyond the width keeps the low bits, as BMv2"
expect '> Invalid table operation (IMMUTABLE_TABLE_ENTRIES)' "a const table"
expect '> Invalid table operation (DEFAULT_ENTRY_IS_CONST)' "a const default"
[ "$(grep -c '^out' <<<"$out")" -eq 12 ] || fail "expected 12 frames out, got $(grep -c '^out' <<<"$out")"

# edge.script on edge.json (BMv2 gives the same frames): parser_error (a verify, varbit
# lengths), const range entries, header assignments in the parser, and frames left shorter than a MAC
# header (recorded by `innet p4 run`, whose ports are test ports as BMv2's
# packet-in socket is; a real port drops them as short_frame: test_rawport;
# on XDP, which cannot cut a frame that short, they are handed to user space)
timeout 300 "$INNET" p4 run --target user --ports 2 tests/p4/edge.json tests/p4/edge.script \
	>"$TMP/edge.user" 2>"$TMP/edge.err" || fail "edge.script: $(cat "$TMP/edge.err")"
printf 'stats\n' >"$TMP/stats.script"
cat tests/p4/edge.script "$TMP/stats.script" >"$TMP/edge-stats.script"
eout=$(cat "$TMP/edge.user")
eexpect() { grep -qxF -- "$1" <<<"$eout" || fail "edge: expected '$1' ($2); got:
$eout"; }
eexpect 'out 1 00000000000002000000000188b500000005aabbccdd' "parser_error NoError"
eexpect 'out 1 00000000000202000000000188b50000000baabbccdd' "parser_error Odd (verify failed)"
eexpect 'out 1 00000000000102000000000188b50000' "parser_error PacketTooShort"
eexpect 'out 1 000102030405060708090a0b0c' "the deparser emitted nothing: 13 bytes of payload"
eexpect 'out 1 000102030405060708090a0b0c0d' "the deparser emitted nothing: 14 bytes of payload"
eexpect 'out 1 ffffffffffff02000000000d88' "truncated to 13 bytes"
eexpect 'out 1 ffffffffffff02000000001088b70001' "truncated to 16 bytes"
eexpect 'out 1 00000000002100000000000588b8' "const range entries: 5 in 1..8"
eexpect 'out 1 00000000002100000000000888b8' "const range entries: 8 in 1..8 and 6..12, the first wins"
eexpect 'out 1 00000000002200000000000a88b8' "const range entries: 10 in 6..12"
eexpect 'out 1 00000000002400000000000f88b8' "const range entries: 15"
eexpect 'out 1 00000000002f00000000002088b8' "const range entries: 32, the default"
eexpect 'out 1 ffffffffffff02000000000188b90000002a0000002a0000002aeeff' "two header assignments in a parser state"
eexpect 'out 1 00000000000002000000000888ba5aeeff' "a varbit of 8 bits: NoError"
eexpect 'out 1 00000000000602000000000188ba5aeeff' "a varbit of 1 bit: ParserInvalidArgument"
eexpect 'out 1 00000000000402000000001888ba5a5a5aeeff' "a varbit of 24 bits in 16: HeaderTooShort"
[ "$(grep -c '^out' <<<"$eout")" -eq 16 ] || fail "edge: expected 16 frames (two of them runts), got:
$eout"
"$INNET" p4 run --target user --ports 2 tests/p4/edge.json "$TMP/edge-stats.script" >"$TMP/edge.ustats" 2>&1
grep -q 'short_frame\|p4_runt' "$TMP/edge.ustats" && fail "edge: an injected runt counted as a drop: $(cat "$TMP/edge.ustats")"

# a load error is printed once, on a line of its own
rc=0
printf '{"header_types": []}' >"$TMP/old.json"
"$INNET" p4 run "$TMP/old.json" </dev/null 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && [ "$(grep -c 'not BMv2 JSON of format 2.x' "$TMP/err")" -eq 1 ] &&
	[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "a JSON without __meta__: exit $rc, $(cat "$TMP/err")"

if [ "$(id -u)" -eq 0 ]; then
	timeout 300 "$INNET" p4 run --target xdp --ports 4 "$JSON" "$SCRIPT" >"$TMP/xdp.out" 2>"$TMP/xdp.err" ||
		fail "innet p4 run --target xdp: $(cat "$TMP/xdp.err")"
	diff -u "$TMP/user.out" "$TMP/xdp.out" >"$TMP/diff" ||
		fail "the targets disagree on $SCRIPT:
$(head -40 "$TMP/diff")"
	timeout 300 "$INNET" p4 run --target xdp --ports 2 tests/p4/edge.json "$TMP/edge-stats.script" \
		>"$TMP/edge.xdp" 2>&1 || fail "edge.script on xdp: $(cat "$TMP/edge.xdp")"
	diff -u <(grep '^out' "$TMP/edge.user") <(grep '^out' "$TMP/edge.xdp") >"$TMP/diff" ||
		fail "the targets disagree on edge.script:
$(cat "$TMP/diff")"
	grep -q 'short_frame\|p4_runt' "$TMP/edge.xdp" && fail "edge on xdp: an injected runt counted as a drop: $(cat "$TMP/edge.xdp")"
else
	echo "(not root: the XDP target is not run)"
fi

# parser_prims.json: primitives (setValid) in two parser states (their C once
# defined one label twice and failed to compile); both targets when root
printf 'packet 0 0102030405060a0b0c0d0e0f0800aabb\n' >"$TMP/pp.script"
pp_targets=user
[ "$(id -u)" -eq 0 ] && pp_targets="user xdp"
for t in $pp_targets; do
	pout=$(timeout 300 "$INNET" p4 run --target "$t" --ports 2 tests/p4/parser_prims.json "$TMP/pp.script" 2>&1) ||
		fail "parser_prims on $t: $pout"
	[ "$pout" = "out 1 0102030405060a0b0c0d0e0f0800a1b2aabb" ] || fail "parser_prims on $t: got $pout"
done

run_expect() { # NAME EXPECTED: tests/p4/NAME.script on NAME.json prints EXPECTED on each target
	local t out
	for t in $pp_targets; do
		out=$(timeout 300 "$INNET" p4 run --target "$t" --ports 2 "tests/p4/$1.json" "tests/p4/$1.script" 2>&1) ||
			fail "$1 on $t: $out"
		[ "$out" = "$2" ] || fail "$1 on $t: got
$out"
	done
}

# varbit_len.json: a varbit length not in whole bytes is ParserInvalidArgument
# (6; innet once gave NoError, and PacketTooShort with nothing after the MAC
# header), and BMv2's order of the other two errors (the frame against the
# length asked, not against the field: p4_diff found both)
vexp='out 1 ffffffffff000200000000010010aabbcc
out 1 ffffffffff06020000000001000caabbcc
out 1 ffffffffff06020000000001001caabbcc
out 1 ffffffffff040200000000010020aabbccdd
out 1 ffffffffff010200000000010020aa
out 1 ffffffffff010200000000010018aa
out 1 ffffffffff010200000000010070aabbccddeeff
out 1 ffffffffff06020000000001001a'
run_expect varbit_len "$vexp"

# wide_reg.json: a register of 256-bit elements (P4xos's values; wider than
# innet's 128-bit arithmetic) written and read by packets and by the CLI
# (BMv2's CLI carries register values as 64-bit integers: the frames agree
# with BMv2, the CLI lines are innet's), reset; a bad index and a value
# beyond 256 bits are errors that change nothing
wexp='out 1 018000000000000000000000000000000000000000000000000000000000abcdef00000003
out 1 028000000000000000000000000000000000000000000000000000000000abcdef00000003
> wide[3]= 57896044618658097711785492504343953926634992332820282019728792003956576079343
out 1 02400000000000010000000000000000000000000000000000000000000000004d00000004
> wide[4]= 28948022309329050462830790511162252505279588507572743532067389784771117711437
out 1 03000000000000000000000000000000000000000000000000000000000000000000000005
out 1 02000000000000000000000000000000000000000000000000000000000000000500000005
out 1 02000000000000000000000000000000000000000000000000000000000000000000000003
> wide[3]= 0
> Invalid register operation (INVALID_INDEX)
> Error: Bad format for value, must be an integer
> wide[2]= 0'
run_expect wide_reg "$wexp"

# a refused program (1), a bad script line (2)
"$PY" - "$JSON" "$TMP/bad.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["__meta__"]["version"] = [3, 0]
json.dump(j, open(sys.argv[2], "w"))
EOF
rc=0
"$INNET" p4 run "$TMP/bad.json" </dev/null 2>"$TMP/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "unknown BMv2 JSON format version 3.0" "$TMP/err" ||
	fail "a JSON of format 3.0: exit $rc, $(cat "$TMP/err")"
rc=0
printf 'packet 0 abc\n' | "$INNET" p4 run "$JSON" >/dev/null 2>"$TMP/err" || rc=$?
[ "$rc" -eq 2 ] && grep -q "line 1: bad frame" "$TMP/err" || fail "a bad frame: exit $rc, $(cat "$TMP/err")"
rc=0
printf 'table_add mac fwd 00:00:00:00:00:01\n' | "$INNET" p4 run "$JSON" >/dev/null 2>"$TMP/err" || rc=$?
[ "$rc" -eq 0 ] || fail "a command BMv2 refuses (no '=>'): exit $rc, $(cat "$TMP/err")"

# p4c's own samples, when p4c is here: both targets agree on a few frames
P4C=${P4C_BM2_SS:-$(command -v p4c-bm2-ss || true)}
SAMPLES=${P4C_SAMPLES:-}
if [ -n "$P4C" ] && [ -n "$SAMPLES" ] && [ "$(id -u)" -eq 0 ]; then
	inc=${P4C_INCLUDE:-$(dirname "$SAMPLES")/../p4include}
	for s in basic_routing-bmv2 issue1806-bmv2 checksum1-bmv2 ternary2-bmv2; do
		[ -f "$SAMPLES/$s.p4" ] || continue
		"$P4C" -I "$inc" -o "$TMP/$s.json" "$SAMPLES/$s.p4" 2>/dev/null || continue
		printf 'packet 0 %s\npacket 1 %s\n' \
			0200000000f002000000000c08004500001c00010000401164cc0a0000010a01020304d2005000080000 \
			00000000000102000000000b123468656c6c6f >"$TMP/s.script"
		for t in user xdp; do
			timeout 120 "$INNET" p4 run --target $t --ports 4 "$TMP/$s.json" "$TMP/s.script" \
				>"$TMP/$s.$t" 2>&1 || true
		done
		cmp -s "$TMP/$s.user" "$TMP/$s.xdp" || fail "$s: the targets disagree"
	done
fi
echo "ok: innet p4 run, user$([ "$(id -u)" -eq 0 ] && echo " and xdp"): $(grep -c '^out' "$TMP/user.out") frames out, same on both"
