#!/usr/bin/env bash
# install.sh — `make install` gives a user what a library's user expects,
# and `make uninstall` takes it all back (into a scratch DESTDIR):
#   - innet, the headers, libinnet.a and libinnet.so with its soname
#     (libinnet.so.MAJOR -> libinnet.so.MAJOR.MINOR.PATCH), innet.pc, the man
#     pages, bash completion;
#   - the shared library exports the innet_* API alone (nm -D);
#   - the installed headers are the public API: the XDP target's internals
#     (dp_xdp.h, xdp_abi.h) are not among them, but in the dp tree
#     (share/innet/dp) with the rules that build a data path (innet-dp.mk);
#   - a program of one's own (examples/libinnet: echo_switch.c, its own
#     data-plane program, registered, on a switch it starts; its data path
#     echo_dp.c) builds against the installed library with pkg-config, its
#     data path for both targets with the installed rules (the contract
#     checked), and runs: a datagram goes through its switch and comes back
#     on the user-space engine, and (root) its eBPF object, loaded at run
#     time with innet_decl_datapath, reflects one on the XDP target;
#   - `man innet-kv` renders from the installed pages; completion completes.
set -euo pipefail
# (no `cmd | grep -q`: grep -q exits at its first match, cmd may then die of
# SIGPIPE and pipefail fails the line: the ldd check failed so once)
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d /tmp/innet-install.XXXXXX)
cleanup() { rm -rf "$tmp"; }
P=/usr/local
D=$tmp/root
make -s install DESTDIR="$D" PREFIX=$P >"$tmp/install.log" 2>&1 || fail "make install: $(tail -n 5 "$tmp/install.log")"

echo "--- what was installed"
ver=$(sed -n 's/^#define INNET_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' include/innet/version.h | paste -sd.)
major=${ver%%.*}
for f in bin/innet include/innet/switch.h include/innet/dp.h include/innet/program.h \
	lib/libinnet.a "lib/libinnet.so.$ver" lib/pkgconfig/innet.pc share/man/man1/innet.1 \
	share/man/man1/innet-kv.1 share/bash-completion/completions/innet; do
	[ -f "$D$P/$f" ] || fail "not installed: $P/$f"
done
[ "$(readlink "$D$P/lib/libinnet.so.$major")" = "libinnet.so.$ver" ] || fail "libinnet.so.$major link"
[ "$(readlink "$D$P/lib/libinnet.so")" = "libinnet.so.$major" ] || fail "libinnet.so link"
soname=$(objdump -p "$D$P/lib/libinnet.so.$ver" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libinnet.so.$major" ] || fail "soname is '$soname'"
grep -q "$ver" <<<"$("$D$P/bin/innet" --version)" || fail "innet --version"
echo "    innet $ver: binary, $(ls "$D$P/include/innet" | wc -l) headers, libinnet.a, libinnet.so ($soname), innet.pc, $(ls "$D$P/share/man/man1" | wc -l) man pages, completion"

echo "--- the installed headers are the public API; the targets' internals are in the dp tree"
for h in dp_xdp.h xdp_abi.h; do
	[ ! -e "$D$P/include/innet/$h" ] || fail "internal header installed as API: include/innet/$h"
done
DP=$D$P/share/innet/dp
for f in innet-dp.mk src/targets/xdp/prog.bpf.c src/targets/xdp/engine.bpf.h src/targets/xdp/dp_xdp.h \
	src/targets/xdp/xdp_abi.h tools/contract/check-dp tools/contract/check-bpf; do
	[ -f "$DP/$f" ] || fail "not installed: $P/share/innet/dp/$f"
done
grep -rhq '#include "\(engine\|control\|topology\)/' "$D$P/include/innet" &&
	fail "an installed header includes a file of the tree: $(grep -rl '#include "\(engine\|control\|topology\)/' "$D$P/include/innet")"
echo "    $(ls "$D$P/include/innet" | wc -l) public headers; the dp tree: $(find "$DP" -type f | wc -l) files"

echo "--- the shared library exports innet_* alone"
n=$(nm -D --defined-only "$D$P/lib/libinnet.so.$ver" | awk 'NF == 3 { print $3 }' | grep -c . || true)
other=$(nm -D --defined-only "$D$P/lib/libinnet.so.$ver" | awk 'NF == 3 { print $3 }' | grep -v '^innet_' || true)
[ -z "$other" ] || fail "exported without the innet_ prefix: $(echo "$other" | head -n 5 | tr '\n' ' ')"
[ "$n" -gt 100 ] || fail "only $n symbols exported"
echo "    $n symbols, all innet_*"

echo "--- a program of one's own, built with pkg-config against the installed library"
export PKG_CONFIG_PATH=$D$P/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
grep -qx "$ver" <<<"$(pkg-config --modversion innet)" || fail "pkg-config --modversion"
# (pkg-config puts its sysroot, the DESTDIR here, in front of the paths)
INNET_DPMK=$(pkg-config --variable=dpmk innet)
[ "$INNET_DPMK" = "$D$P/share/innet/dp/innet-dp.mk" ] || fail "pkg-config --variable=dpmk: $INNET_DPMK"
make -s -C examples/libinnet OUT="$tmp" >"$tmp/example.log" 2>&1 || fail "example build: $(cat "$tmp/example.log")"
grep -q "libinnet.so.$major" <<<"$(ldd "$tmp/echo_switch")" || fail "the example is not linked to libinnet.so.$major"
[ -s "$tmp/echo_dp.bpf.o" ] || fail "no eBPF object built for the example's data path"
net=$(( ($$ % 200) + 20 ))
out=$(LD_LIBRARY_PATH=$D$P/lib timeout 20 "$tmp/echo_switch" "127.204.$net.1" 47990 "$tmp/echo_dp.bpf.o") ||
	fail "echo_switch: $out"
echo "$out" | sed 's/^/    /'
grep -q 'came back; count = 1' <<<"$out" || fail "echo_switch output"
if [ "$(id -u)" = 0 ]; then
	out=$(LD_LIBRARY_PATH=$D$P/lib timeout 20 "$tmp/echo_switch" --xdp "127.204.$net.3" 47992 "$tmp/echo_dp.bpf.o") ||
		fail "echo_switch --xdp: $out"
	echo "$out" | sed 's/^/    /'
	grep -q '(1 handled in eBPF); count = 1' <<<"$out" || fail "echo_switch --xdp output: $out"
else
	echo "    (the XDP half needs root: not run)"
fi

echo "--- a data path that breaks the contract fails the installed rules too"
cp examples/libinnet/echo.h "$tmp/"
printf '#include "echo.h"\n#include <stdio.h>\n' > "$tmp/bad_dp.c"
printf 'static enum innet_action h(struct innet_ctx *c, struct innet_pkt *p) { puts("x"); return innet_reflect(p); }\nINNET_DATAPATH(bad, h, NULL)\n' >> "$tmp/bad_dp.c"
if make -s -C "$tmp" -f "$INNET_DPMK" INNET_INCDIR="$D$P/include" bad_dp.o >"$tmp/bad.log" 2>&1; then fail "a data path including <stdio.h> built"; fi
grep -q 'stdio.h' "$tmp/bad.log" || fail "the contract's message: $(cat "$tmp/bad.log")"
printf '#include "echo.h"\nvoid *memcpy(void *, const void *, unsigned long);\n' > "$tmp/bad2_dp.c"
printf 'static enum innet_action h(struct innet_ctx *c, struct innet_pkt *p) { uint8_t *d = innet_pkt_ptr(p, 0, 8); if (d) memcpy(d, d + 1, p->len & 7); return innet_reflect(p); }\nINNET_DATAPATH(bad2, h, NULL)\n' >> "$tmp/bad2_dp.c"
if make -s -C "$tmp" -f "$INNET_DPMK" INNET_INCDIR="$D$P/include" bad2_dp.bpf.o >"$tmp/bad2.log" 2>&1; then fail "an eBPF object calling memcpy built"; fi
grep -q "breaks the data-path contract" "$tmp/bad2.log" || fail "check-bpf's message: $(cat "$tmp/bad2.log")"
[ ! -e "$tmp/bad2_dp.bpf.o" ] || fail "the refused eBPF object was left behind"
echo "    <stdio.h> in a data path: refused; memcpy of a variable length in its eBPF object: refused"

echo "--- the same program linked statically against libinnet.a finds every shipped program"
pkg-config --static --libs innet >/dev/null 2>"$tmp/pc.err" || fail "pkg-config --static --libs innet: $(cat "$tmp/pc.err")"
make -s -C examples/libinnet OUT="$tmp" static >"$tmp/static.log" 2>&1 || fail "static build: $(cat "$tmp/static.log")"
grep -q libinnet <<<"$(ldd "$tmp/echo_switch_static")" && fail "echo_switch_static is linked to a libinnet.so"
out=$(timeout 20 "$tmp/echo_switch_static" "127.204.$net.2" 47991) || fail "echo_switch_static: $out"
grep -q 'came back; count = 1' <<<"$out" || fail "echo_switch_static output: $out"
progs=$(LD_LIBRARY_PATH=$D$P/lib "$D$P/bin/innet" programs | awk 'NR > 1 { print $1 }')
[ -n "$progs" ] || fail "innet programs listed nothing"
for p in $progs echo; do
	grep -q "^programs:.* $p\( \|$\)" <<<"$out" || fail "the static program does not know the program '$p': $out"
done
echo "    echo_switch_static (libinnet.a) runs and lists every shipped program"

echo "--- man and completion"
grep -q "replicated by Paxos" <<<"$(MANWIDTH=80 man -M "$D$P/share/man" innet-kv 2>/dev/null)" || fail "man innet-kv"
comp() { # words...: what completion offers for the last one
	PATH=$D$P/bin:$PATH LD_LIBRARY_PATH=$D$P/lib bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _innet; echo "${COMPREPLY[*]}"' \
		_ "$D$P/share/bash-completion/completions/innet" "$@"
}
[ "$(comp innet fa)" = "fabric" ] || fail "completion of 'innet fa': $(comp innet fa)"
[ "$(comp innet kv re)" = "rejoin remove" ] || fail "completion of 'innet kv re': $(comp innet kv re)"
grep -qw a0 <<<"$(comp innet fabric stop examples/kv.json a)" || fail "completion of a switch name: $(comp innet fabric stop examples/kv.json a)"
echo "    man innet-kv renders; innet fa<TAB> -> fabric, kv re<TAB> -> rejoin remove, switch names from the topology"

echo "--- make uninstall leaves nothing behind"
make -s uninstall DESTDIR="$D" PREFIX=$P >/dev/null 2>&1 || fail "make uninstall"
left=$(find "$D" -type f -o -type l)
[ -z "$left" ] || fail "left after uninstall: $(echo "$left" | head -n 5)"
echo "ok"
