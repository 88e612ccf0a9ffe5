# shellcheck shell=bash
# tools/lb/lbenv.sh — helpers shared by the load balancer's tests and
# benchmarks (tests/integration/lb_*.sh, bench/lb-*.sh). Sourced, never run.
#
#   lbenv_zone FILE ADDR            write zone lb.test: SOA, NS, www, probe and
#                                   r0..r99 A records, all answering ADDR
#   lbenv_queries FILE              dnsperf input: the 100 r*.lb.test A names + www
#   lbenv_nsd_conf DIR IP PORT ADDR a self-contained nsd (Debian's 4.x) setup in
#                                   DIR: nsd.conf, the zone (answering ADDR), run as
#                                   the current user, rrl-ratelimit 0 (loopback
#                                   load would otherwise be rate-limited to
#                                   ~200 qps per /24), one server process,
#                                   no remote control, pid/log files in DIR
#   lbenv_nsd_cmd DIR               the foreground command line for it (nsd -d)
#   lbenv_wait_udp IP PORT SECS     0 once a DNS query there gets an answer
#   lbenv_dnsdist_conf FILE IP PORT THREADS POLICY BACKEND...
#                                   a dnsdist config: listen on IP:PORT with
#                                   THREADS UDP listeners, POLICY (roundrobin,
#                                   leastOutstanding, ...), no cache, no console
#
# Every process started from these is started by the caller (bounded by
# timeout(1) and killed by PID there).

lbenv_zone() {
	local f=$1 addr=$2 i
	{
		printf '$ORIGIN lb.test.\n$TTL 60\n'
		printf '@ IN SOA ns.lb.test. hostmaster.lb.test. 1 3600 900 604800 60\n'
		printf '@ IN NS ns.lb.test.\n'
		printf 'ns IN A %s\n' "$addr"
		printf 'www IN A %s\n' "$addr"
		printf 'probe IN A %s\n' "$addr"
		for ((i = 0; i < 100; i++)); do
			printf 'r%d IN A %s\n' "$i" "$addr"
		done
	} >"$f"
}

lbenv_queries() {
	local f=$1 i
	{
		for ((i = 0; i < 100; i++)); do
			printf 'r%d.lb.test A\n' "$i"
		done
		printf 'www.lb.test A\n'
	} >"$f"
}

lbenv_nsd_conf() {
	local dir=$1 ip=$2 port=$3 addr=$4
	mkdir -p "$dir"
	lbenv_zone "$dir/lb.test.zone" "$addr"
	cat >"$dir/nsd.conf" <<EOF2
server:
	ip-address: $ip@$port
	port: $port
	do-ip6: no
	username: ""
	chroot: ""
	zonesdir: "$dir"
	database: ""
	zonelistfile: "$dir/zone.list"
	xfrdfile: "$dir/xfrd.state"
	xfrdir: "$dir"
	pidfile: "$dir/nsd.pid"
	logfile: "$dir/nsd.log"
	server-count: 1
	tcp-count: 10
	rrl-ratelimit: 0
	rrl-whitelist-ratelimit: 0
	verbosity: 1
	hide-version: yes
	reuseport: no
remote-control:
	control-enable: no
zone:
	name: lb.test
	zonefile: "$dir/lb.test.zone"
EOF2
}

lbenv_nsd_cmd() {
	printf '%s\n' "nsd -d -c $1/nsd.conf"
}

lbenv_wait_udp() {
	local ip=$1 port=$2 secs=$3 i
	for ((i = 0; i < secs * 10; i++)); do
		if /usr/bin/python3 - "$ip" "$port" <<'PYEOF' 2>/dev/null; then
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.1)
q = bytes.fromhex("abcd01000001000000000000") + b"\x03www\x02lb\x04test\x00\x00\x01\x00\x01"
s.sendto(q, (sys.argv[1], int(sys.argv[2])))
d = s.recv(512)
sys.exit(0 if d[:2] == b"\xab\xcd" else 1)
PYEOF
			return 0
		fi
		sleep 0.1
	done
	return 1
}

lbenv_dnsdist_conf() {
	local f=$1 ip=$2 port=$3 threads=$4 policy=$5 i b
	shift 5
	{
		printf 'setSecurityPollSuffix("")\n'
		printf 'setLocal("%s:%s", {reusePort=true})\n' "$ip" "$port"
		for ((i = 1; i < threads; i++)); do
			printf 'addLocal("%s:%s", {reusePort=true})\n' "$ip" "$port"
		done
		for b in "$@"; do
			printf 'newServer({address="%s", checkInterval=3600, mustResolve=false})\n' "$b"
		done
		printf 'setServerPolicy(%s)\n' "$policy"
		printf 'setMaxUDPOutstanding(65535)\n'
	} >"$f"
}
