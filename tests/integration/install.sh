#!/usr/bin/env bash
# install.sh — `make install` gives a user what a library's user expects,
# and `make uninstall` takes it all back (into a scratch DESTDIR):
#   - innet, the headers, libinnet.a and libinnet.so with its soname
#     (libinnet.so.MAJOR -> libinnet.so.MAJOR.MINOR.PATCH), innet.pc, the man
#     pages, bash completion;
#   - the shared library exports the innet_* API alone (nm -D);
#   - a program of one's own (examples/libinnet/echo_switch.c: its own
#     data-plane program, registered, on a switch it starts) builds against
#     the installed library with pkg-config alone and runs: a datagram goes
#     through its switch and comes back;
#   - `man innet-kv` renders from the installed pages; completion completes.
set -euo pipefail
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
"$D$P/bin/innet" --version | grep -q "$ver" || fail "innet --version"
echo "    innet $ver: binary, $(ls "$D$P/include/innet" | wc -l) headers, libinnet.a, libinnet.so ($soname), innet.pc, $(ls "$D$P/share/man/man1" | wc -l) man pages, completion"

echo "--- the shared library exports innet_* alone"
n=$(nm -D --defined-only "$D$P/lib/libinnet.so.$ver" | awk 'NF == 3 { print $3 }' | grep -c . || true)
other=$(nm -D --defined-only "$D$P/lib/libinnet.so.$ver" | awk 'NF == 3 { print $3 }' | grep -v '^innet_' || true)
[ -z "$other" ] || fail "exported without the innet_ prefix: $(echo "$other" | head -n 5 | tr '\n' ' ')"
[ "$n" -gt 100 ] || fail "only $n symbols exported"
echo "    $n symbols, all innet_*"

echo "--- a program of one's own, built with pkg-config against the installed library"
export PKG_CONFIG_PATH=$D$P/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D
pkg-config --modversion innet | grep -qx "$ver" || fail "pkg-config --modversion"
make -s -C examples/libinnet OUT="$tmp" >"$tmp/example.log" 2>&1 || fail "example build: $(cat "$tmp/example.log")"
ldd "$tmp/echo_switch" | grep -q "libinnet.so.$major" || fail "the example is not linked to libinnet.so.$major"
net=$(( ($$ % 200) + 20 ))
out=$(LD_LIBRARY_PATH=$D$P/lib timeout 20 "$tmp/echo_switch" "127.204.$net.1" 47990) || fail "echo_switch: $out"
echo "$out" | sed 's/^/    /'
grep -q 'came back; count = 1' <<<"$out" || fail "echo_switch output"

echo "--- the same program linked statically against libinnet.a finds every shipped program"
pkg-config --static --libs innet >/dev/null 2>"$tmp/pc.err" || fail "pkg-config --static --libs innet: $(cat "$tmp/pc.err")"
make -s -C examples/libinnet OUT="$tmp" static >"$tmp/static.log" 2>&1 || fail "static build: $(cat "$tmp/static.log")"
ldd "$tmp/echo_switch_static" | grep -q libinnet && fail "echo_switch_static is linked to a libinnet.so"
out=$(timeout 20 "$tmp/echo_switch_static" "127.204.$net.2" 47991) || fail "echo_switch_static: $out"
grep -q 'came back; count = 1' <<<"$out" || fail "echo_switch_static output: $out"
progs=$(LD_LIBRARY_PATH=$D$P/lib "$D$P/bin/innet" programs | awk 'NR > 1 { print $1 }')
[ -n "$progs" ] || fail "innet programs listed nothing"
for p in $progs echo; do
	grep -q "^programs:.* $p\( \|$\)" <<<"$out" || fail "the static program does not know the program '$p': $out"
done
echo "    echo_switch_static (libinnet.a) runs and lists every shipped program"

echo "--- man and completion"
MANWIDTH=80 man -M "$D$P/share/man" innet-kv 2>/dev/null | grep -q "replicated by Paxos" || fail "man innet-kv"
comp() { # words...: what completion offers for the last one
	PATH=$D$P/bin:$PATH LD_LIBRARY_PATH=$D$P/lib bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _innet; echo "${COMPREPLY[*]}"' \
		_ "$D$P/share/bash-completion/completions/innet" "$@"
}
[ "$(comp innet fa)" = "fabric" ] || fail "completion of 'innet fa': $(comp innet fa)"
[ "$(comp innet kv re)" = "rejoin remove" ] || fail "completion of 'innet kv re': $(comp innet kv re)"
comp innet fabric stop examples/kv.json a | grep -qw a0 || fail "completion of a switch name: $(comp innet fabric stop examples/kv.json a)"
echo "    man innet-kv renders; innet fa<TAB> -> fabric, kv re<TAB> -> rejoin remove, switch names from the topology"

echo "--- make uninstall leaves nothing behind"
make -s uninstall DESTDIR="$D" PREFIX=$P >/dev/null 2>&1 || fail "make uninstall"
left=$(find "$D" -type f -o -type l)
[ -z "$left" ] || fail "left after uninstall: $(echo "$left" | head -n 5)"
echo "ok"
