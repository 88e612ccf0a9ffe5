#!/usr/bin/python3
"""mkstf.py — writes the golden STF tests of the project's P4 programs
(tests/p4/NAME.stf) from the cases below, where each expected frame is
spelled out as what the program must do to the frame that goes in (TTL − 1,
a rewritten MAC, a fresh checksum, ...): the expectations come from the
programs' specification (their header comments), not from running them.

  tests/p4/mkstf.py            rewrite every tests/p4/*.stf
  tests/p4/mkstf.py --check    exit 1 if a committed .stf differs

The program's commands file (p4/NAME.commands) is applied before the STF
(tools/p4/p4test stf --commands; tests/integration/p4_golden.sh).
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# -- frames -------------------------------------------------------------------

def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip(s):
    return bytes(int(x) for x in s.split("."))


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def eth(dst, src, etype):
    return mac(dst) + mac(src) + struct.pack("!H", etype)


def ipv4(src, dst, payload_len, ttl=64, proto=17, ident=0, tos=0, bad_csum=False, ihl=5,
         version=4, options=b""):
    total = 4 * ihl + payload_len
    h = struct.pack("!BBHHHBBH4s4s", (version << 4) | ihl, tos, total, ident, 0, ttl, proto, 0,
                    ip(src), ip(dst)) + options
    c = csum(h[:20])
    if bad_csum:
        c ^= 0x5A5A
    return h[:10] + struct.pack("!H", c) + h[12:]


def udp(sport, dport, payload, checksum=0):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), checksum) + payload


def ip_udp(src, dst, sport, dport, payload, **kw):
    u = udp(sport, dport, payload)
    return ipv4(src, dst, len(u), **kw) + u


class Stf:
    def __init__(self, name, doc):
        self.lines = ["# %s.stf — golden test of p4/%s.p4 (written by tests/p4/mkstf.py;" % (name, name),
                      "# p4/%s.commands is applied first)." % name]
        self.lines += ["# " + l if l else "#" for l in doc.strip().splitlines()]

    def comment(self, text):
        self.lines.append("")
        self.lines += ["# " + l for l in text.strip().splitlines()]

    def packet(self, port, data):
        self.lines.append("packet %d %s" % (port, data.hex()))

    def expect(self, port, data, exact=True):
        self.lines.append("expect %d %s%s" % (port, data.hex(), "$" if exact else ""))

    def raw(self, line):
        self.lines.append(line)

    def text(self):
        return "\n".join(self.lines) + "\n"


# -- the programs' cases --------------------------------------------------------

def l2_switch():
    t = Stf("l2_switch", """
A learning switch: unknown destinations flood to every port but the one the
frame came in on; learned stations (entries the control plane adds after
the digests) are forwarded to their port; a frame for the port it came
from, and a runt, are dropped.""")
    A, B, C = "02:00:00:00:00:0a", "02:00:00:00:00:0b", "02:00:00:00:00:0c"
    pay = bytes(range(46))
    t.comment("A (port 0) to B, unknown: flooded to 1, 2, 3")
    f = eth(B, A, 0x88B5) + pay
    t.packet(0, f)
    for p in (1, 2, 3):
        t.expect(p, f)
    t.comment("the control plane learns A on 0 and B on 1")
    t.raw("add smac hdr.ethernet.src:0x02000000000a sm.ingress_port:0 known()")
    t.raw("add dmac hdr.ethernet.dst:0x02000000000a forward(port:0)")
    t.raw("add smac hdr.ethernet.src:0x02000000000b sm.ingress_port:1 known()")
    t.raw("add dmac hdr.ethernet.dst:0x02000000000b forward(port:1)")
    t.comment("B (port 1) to A: forwarded to port 0 only")
    f = eth(A, B, 0x88B5) + pay
    t.packet(1, f)
    t.expect(0, f)
    t.comment("C (port 2) to B: to port 1")
    f = eth(B, C, 0x0800) + pay
    t.packet(2, f)
    t.expect(1, f)
    t.comment("broadcast from port 2: flooded to 0, 1, 3")
    f = eth("ff:ff:ff:ff:ff:ff", C, 0x0806) + pay
    t.packet(2, f)
    for p in (0, 1, 3):
        t.expect(p, f)
    t.comment("A to A, in on port 0 where A is: dropped (same_port);\n"
              "a 10-byte runt: dropped (runt)")
    t.packet(0, eth(A, A, 0x88B5) + pay)
    t.packet(3, bytes(range(10)))
    t.comment("the drop counters (read; compared between targets)")
    t.raw("counter_read drops_same_port 0")
    t.raw("counter_read drops_runt 0")
    t.raw("counter_read drops_flood_prune 0")
    return t


R_MAC = ["02:00:00:00:00:f0", "02:00:00:00:00:f1", "02:00:00:00:00:f2", "02:00:00:00:00:f3"]
HOST = "02:00:0a:00:00:0a"


def routed(src_ip, dst_ip, in_port, out_port, nbr_mac, ttl=64, payload=b"ping", **kw):
    """(frame in, frame out) of a routed UDP datagram."""
    fin = eth(R_MAC[in_port], HOST, 0x0800) + ip_udp(src_ip, dst_ip, 4000, 5000, payload, ttl=ttl, **kw)
    fout = eth(nbr_mac, R_MAC[out_port], 0x0800) + ip_udp(src_ip, dst_ip, 4000, 5000, payload,
                                                       ttl=max(ttl - 1, 0), **kw)
    return fin, fout


def l3_router():
    t = Stf("l3_router", """
IPv4 routing: longest prefix, next hop's MAC, the port's own MAC as source,
TTL - 1 and a fresh header checksum; drops for TTL <= 1, a bad checksum, no
route (none here: the default route), IPv4 options, a version other than 4,
a frame that is not IPv4.""")
    cases = [
        ("connected: 10.0.1.10 (port 1)", "10.0.0.10", "10.0.1.10", 0, 1, "02:00:0a:00:01:0a", 64),
        ("connected: 10.0.2.10 (port 2), TTL 2", "10.0.0.10", "10.0.2.10", 0, 2, "02:00:0a:00:02:0a", 2),
        ("10.1.3.4: /16 through 10.0.2.20 (port 2)", "10.0.1.10", "10.1.3.4", 1, 2, "02:00:0a:00:02:14", 64),
        ("10.1.7.9: the /24 beats the /16: through 10.0.1.20 (port 1)", "10.0.2.10", "10.1.7.9", 2, 1,
         "02:00:0a:00:01:14", 30),
        ("8.8.8.8: the default route (port 3)", "10.0.0.10", "8.8.8.8", 0, 3, "02:00:c0:a8:ff:01", 17),
        ("back in from the uplink to 10.0.0.10", "8.8.8.8", "10.0.0.10", 3, 0, "02:00:0a:00:00:0a", 55),
    ]
    for doc, s, d, pi, po, nbr, ttl in cases:
        t.comment(doc)
        fin, fout = routed(s, d, pi, po, nbr, ttl=ttl, ident=0x1234, tos=0x10)
        t.packet(pi, fin)
        t.expect(po, fout)
    t.comment("a 1400-byte datagram")
    fin, fout = routed("10.0.0.10", "10.0.1.10", 0, 1, "02:00:0a:00:01:0a",
                       payload=bytes(i & 0xFF for i in range(1400)))
    t.packet(0, fin)
    t.expect(1, fout)
    t.comment("dropped: TTL 1 (ttl_expired), TTL 0, a bad header checksum (bad_checksum),\n"
              "IPv4 options (bad_header), version 6 in an IPv4 ether_type (bad_header),\n"
              "ARP (not_ipv4), a frame cut inside the IPv4 header (bad_header)")
    t.packet(0, routed("10.0.0.10", "10.0.1.10", 0, 1, HOST, ttl=1)[0])
    t.packet(0, routed("10.0.0.10", "10.0.1.10", 0, 1, HOST, ttl=0)[0])
    t.packet(0, routed("10.0.0.10", "10.0.1.10", 0, 1, HOST, bad_csum=True)[0])
    t.packet(0, eth(R_MAC[0], HOST, 0x0800) + ipv4("10.0.0.10", "10.0.1.10", 8, ihl=6,
                                                   options=b"\x01\x01\x01\x00") + udp(1, 2, b""))
    t.packet(0, eth(R_MAC[0], HOST, 0x0800) + ipv4("10.0.0.10", "10.0.1.10", 8, version=6) +
             udp(1, 2, b""))
    t.packet(0, eth("ff:ff:ff:ff:ff:ff", HOST, 0x0806) + bytes(28))
    t.packet(0, eth(R_MAC[0], HOST, 0x0800) + bytes(10))
    t.comment("the drop counters by reason, the per-port counters")
    for r in ("not_ipv4", "bad_header", "bad_checksum", "ttl_expired", "no_route", "no_neighbour"):
        t.raw("counter_read drops_%s 0" % r)
    t.raw("counter_read port_rx 0")
    t.raw("counter_read port_tx 1")
    return t


def crc16_arc(data):
    """CRC-16/ARC (poly 0x8005 reflected, init 0, no final xor): BMv2's crc16."""
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
    return c


def ecmp():
    t = Stf("ecmp", """
ECMP: 10.0.0.0/8 over group 0 (members 0-3: ports 0-3), 192.168.0.0/16
over group 1 (members 4, 5: ports 4, 5), 172.16.0.0/12 to member 6
(port 6). A flow takes member hash % size of its group, the hash being
CRC16 (CRC-16/ARC) of src, dst, protocol, source and destination port (13
bytes), the group's members in handle order (BMv2 keeps a group as a sorted
set of member handles). Not IPv4, TTL 1 and no
route are dropped.""")
    src_mac = "02:00:00:00:00:99"
    members = {0: [0, 1, 2, 3], 1: [4, 5]}
    nh_mac = {0: "02:00:00:00:01:00", 1: "02:00:00:00:01:01", 2: "02:00:00:00:01:02",
              3: "02:00:00:00:01:03", 4: "02:00:00:00:02:04", 5: "02:00:00:00:02:05"}
    t.comment("twelve flows over the two groups (each sent twice: the same port both times)")
    for i in range(12):
        grp = 0 if i < 8 else 1
        dst = "10.%d.%d.%d" % (i, 2 * i, 3 * i + 1) if grp == 0 else "192.168.%d.%d" % (i, i * 9)
        src, sport, dport, proto = "10.99.0.%d" % (i + 1), 1000 + 37 * i, 80 + i, 17
        key = ip(src) + ip(dst) + bytes([proto]) + struct.pack("!HH", sport, dport)
        m = members[grp][crc16_arc(key) % len(members[grp])]
        fin = eth("02:00:00:00:00:ee", src_mac, 0x0800) + ip_udp(src, dst, sport, dport, b"flow%d" % i)
        fout = eth(nh_mac[m], "02:00:00:00:00:f%d" % m, 0x0800) + \
            ip_udp(src, dst, sport, dport, b"flow%d" % i, ttl=63)
        for _ in range(2):
            t.packet(7, fin)
            t.expect(m, fout)
    t.comment("172.16.5.5: member 6 (port 6), MACs rewritten, TTL - 1")
    fin = eth("02:00:00:00:00:ee", src_mac, 0x0800) + ip_udp("10.5.0.1", "172.16.5.5", 1234, 80, b"x" * 20)
    fout = eth("02:00:00:00:03:06", "02:00:00:00:00:f6", 0x0800) + \
        ip_udp("10.5.0.1", "172.16.5.5", 1234, 80, b"x" * 20, ttl=63)
    t.packet(7, fin)
    t.expect(6, fout)
    t.comment("dropped: ARP, TTL 1, no route (11.0.0.1)")
    t.packet(7, eth("ff:ff:ff:ff:ff:ff", src_mac, 0x0806) + bytes(28))
    t.packet(7, eth("02:00:00:00:00:ee", src_mac, 0x0800) + ip_udp("10.5.0.1", "10.1.1.1", 1, 2, b"", ttl=1))
    t.packet(7, eth("02:00:00:00:00:ee", src_mac, 0x0800) + ip_udp("10.5.0.1", "11.0.0.1", 1, 2, b""))

    return t


def stateful():
    t = Stf("stateful", """
Registers, counters, meters: every forwarded datagram carries its flow's
packet count in the IPv4 identification field (and a fresh checksum);
classified ports rewrite the DSCP; a flow above heavy_threshold is marked
(diffserv 0x04); a port meter with a rate of 1 packet per second and a
burst of 1 lets the first packet of port 2 through and drops the next
(RED); non-UDP frames are dropped.""")
    def dgram(src, dst, sport, dport, ident=0, tos=0, pay=b"data"):
        return ip_udp(src, dst, sport, dport, pay, ident=ident, tos=tos)
    E0 = eth("02:00:00:00:00:01", "02:00:00:00:00:02", 0x0800)
    t.comment("flow X three times: identification 1, 2, 3; out of port 1")
    for n in (1, 2, 3):
        t.packet(0, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000, ident=0x7777))
        t.expect(1, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000, ident=n))
    t.comment("flow Y (UDP 53: class 10, DSCP 10 -> diffserv 0x28, ECN bits kept): 1")
    t.packet(1, E0 + dgram("10.0.0.2", "10.0.0.1", 3333, 53, tos=0x03))
    t.expect(0, E0 + dgram("10.0.0.2", "10.0.0.1", 3333, 53, ident=1, tos=0x2B))
    t.comment("flow X again: 4; then the threshold is set to 4: the fifth is marked")
    t.packet(0, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000))
    t.expect(1, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000, ident=4))
    t.raw("register_write heavy_threshold 0 4")
    t.packet(0, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000))
    t.expect(1, E0 + dgram("10.0.0.1", "10.0.0.2", 1000, 2000, ident=5, tos=0x04))
    t.raw("register_write heavy_threshold 0 0")
    t.comment("port 2's meter: 1 packet/s (0.000001 per microsecond), burst 1, both rates:\n"
              "the first passes, the second (well within the second) is RED: dropped")
    t.raw("meter_set_rates port_meter 2 0.000001:1 0.000001:1")
    t.packet(2, E0 + dgram("10.0.0.3", "10.0.0.4", 7, 8))
    t.expect(3, E0 + dgram("10.0.0.3", "10.0.0.4", 7, 8, ident=1))
    t.packet(2, E0 + dgram("10.0.0.3", "10.0.0.4", 7, 8))
    t.comment("not UDP (ICMP; ARP): dropped (not_udp)")
    icmp = b"\x08\x00\xf7\xff\x00\x00\x00\x00"
    t.packet(0, E0 + ipv4("10.0.0.1", "10.0.0.2", len(icmp), proto=1) + icmp)
    t.packet(0, eth("ff:ff:ff:ff:ff:ff", "02:00:00:00:00:02", 0x0806) + bytes(28))
    t.comment("state, read back (compared between targets)")
    t.raw("register_read heavy_threshold 0")
    t.raw("counter_read drops_not_udp 0")
    t.raw("counter_read drops_port_metered 0")
    t.raw("counter_read port_rx 0")
    return t


def mcast_clone():
    t = Stf("mcast_clone", """
Multicast with per-replica rewrites (egress_rid), I2E clones with a
preserved field (the mirror reason), E2E clones, truncation of clones.""")
    S = "02:00:00:00:00:77"

    def frame(dst_mac, dst_ip, pay=b"hello multicast!"):
        return eth(dst_mac, S, 0x0800) + ip_udp("10.8.0.1", dst_ip, 5000, 6000, pay)
    t.comment("239.1.1.1 from port 0: group 1 -> ports 1, 2, 3 (rids 10, 20, 30), each\n"
              "replica addressed to its receiver; the one out of port 1 is also mirrored\n"
              "E2E to session 6 (port 4) with a mirror header (reason 0xE2, instance 2)")
    t.packet(0, frame("01:00:5e:01:01:01", "239.1.1.1"))
    for p, n in ((1, 1), (2, 2), (3, 3)):
        t.expect(p, frame("02:00:0a:09:00:%02x" % n, "10.9.0.%d" % n))
    f1 = frame("02:00:0a:09:00:01", "10.9.0.1")
    t.expect(4, f1[:12] + b"\x88\xb5" + bytes([0xE2, 2, 0, 0]) + b"\x08\x00" + f1[14:])
    t.comment("239.2.2.2 from port 2: group 2 (ports 0 and 1, rid 40: no rewrite); the\n"
              "copy out of 1 mirrored E2E to port 4 (an E2E clone's metadata is reset:\n"
              "ingress port 0 in its mirror header); the frame came in on port 2, so it\n"
              "is mirrored I2E to session 5 (port 3), reason 7 and ingress port 2 kept\n"
              "in field list 1, truncated to 96 bytes; the replicas are not truncated")
    big = frame("01:00:5e:02:02:02", "239.2.2.2", pay=bytes(range(120)))
    t.packet(2, big)
    t.expect(0, big)
    t.expect(1, big)
    t.expect(4, (big[:12] + b"\x88\xb5" + bytes([0xE2, 2, 0, 0]) + b"\x08\x00" + big[14:])[:96])
    t.expect(3, (big[:12] + b"\x88\xb5" + bytes([7, 1, 0, 2]) + b"\x08\x00" + big[14:])[:96])
    t.comment("unicast from port 0 (10.0.0.9, not a group): to port 1, and mirrored E2E")
    u = frame("02:00:00:00:00:01", "10.0.0.9")
    t.packet(0, u)
    t.expect(1, u)
    t.expect(4, u[:12] + b"\x88\xb5" + bytes([0xE2, 2, 0, 0]) + b"\x08\x00" + u[14:])
    t.comment("from port 3 (no fwd entry): dropped")
    t.packet(3, u)
    return t


def recirc():
    t = Stf("recirc", """
Recirculation and resubmission with preserved field lists: a loop header
with N passes leaves after N recirculations with done = N and bit 7 of
flags set (the metadata count agrees); flags bit 0 asks for one resubmit,
whose count comes back in `resub`. Each looping frame is waited for
(`wait`): a recirculated or resubmitted pass queues behind later frames on
BMv2, so the order of frames out of a port would depend on timing.""")
    D, S = "02:00:00:00:00:01", "02:00:00:00:00:02"

    def lp(passes, done, resub, flags):
        return eth(D, S, 0x88B6) + bytes([passes, done, resub, flags]) + b"\x08\x00" + b"payload!" * 4
    t.comment("3 passes: out of port 1 with passes 0, done 3, flags 0x80")
    t.packet(0, lp(3, 0, 0, 0))
    t.expect(1, lp(0, 3, 0, 0x80))
    t.raw("wait")
    t.comment("0 passes: straight through, flags 0x80")
    t.packet(1, lp(0, 0, 0, 0))
    t.expect(0, lp(0, 0, 0, 0x80))
    t.raw("wait")
    t.comment("resubmit once, then 2 passes: resub 1, done 2")
    t.packet(0, lp(2, 0, 0, 1))
    t.expect(1, lp(0, 2, 1, 0x81))
    t.raw("wait")
    t.comment("done 5 on arrival, 1 pass: done 6, but the metadata counted 1: no 0x80")
    t.packet(0, lp(1, 5, 0, 0))
    t.expect(1, lp(0, 6, 0, 0))
    t.raw("wait")
    t.comment("15 passes (the most) with a resubmit: 16 recirculations, out with done 15;\n"
              "16 passes: dropped (too_many_passes); a plain frame: forwarded as is")
    t.packet(0, lp(15, 0, 0, 1))
    t.expect(1, lp(0, 15, 1, 0x81))
    t.raw("wait")
    t.packet(0, lp(16, 0, 0, 0))
    t.raw("wait")
    plain = eth(D, S, 0x0800) + bytes(50)
    t.packet(0, plain)
    t.expect(1, plain)
    return t


# -- the Paxos acceptor ----------------------------------------------------------

PAXOS_UDP = 34952
A_MAC, C_MAC = "02:00:00:00:aa:00", "02:00:00:00:cc:00"
A_IP, C_IP = "10.70.0.2", "10.70.0.1"
L_MAC = ["02:00:00:00:dd:%02x" % i for i in range(3)]
L_IP = ["10.71.%d.2" % i for i in range(3)]
LP_MAC = ["02:00:00:00:aa:%02x" % (i + 1) for i in range(3)]
LP_IP = ["10.71.%d.1" % i for i in range(3)]


def innet_hdr(flags=0, dst=2, src=1, magic=0x1E, version=1, service=2):
    return struct.pack("!BBBBHH", magic, version, service, flags, dst, src)


def paxos_hdr(typ, status=0, node=0, ballot=0, vballot=0, vlen=0, inst=0, req=0, trim=0, hi=0):
    return struct.pack("!BBHIIHHQQQQ", typ, status, node, ballot, vballot, vlen, 0, inst, req, trim, hi)


def px_frame(src_mac, dst_mac, src_ip, dst_ip, sport, dport, payload, ttl=64):
    return eth(dst_mac, src_mac, 0x0800) + ip_udp(src_ip, dst_ip, sport, dport, payload, ttl=ttl)


def paxos_acceptor():
    t = Stf("paxos_acceptor", """
innet's Paxos acceptor in P4: a 2A is voted and multicast as a 2B to the
learners on ports 1-3 (each with its own addresses); 1A answers 1B with
the vote; RECOVER answers 2B; TRIM moves the trim; NACKs for a lower
ballot, a trimmed instance, a full ring; checks drop bad frames.
The acceptor is id 0, 3 learners report watermarks, check_peer off.""")
    t.raw("setdefault config set_config(id:0, trim_learners:3, check_peer:0)")
    for i in range(3):
        t.raw("add learner_port sm.egress_port:%d set_learner(port_mac:0x%s, port_ip:0x%s, "
              "mac:0x%s, ip:0x%s, udp_port:34953)" % (
                  i + 1, LP_MAC[i].replace(":", ""), ip(LP_IP[i]).hex(), L_MAC[i].replace(":", ""),
                  ip(L_IP[i]).hex()))
    t.raw("mc_mgrp_create 1")
    t.raw("mc_node_create 0 1 2 3")
    t.raw("mc_node_associate 1 0")

    def req(typ, flags=0, value=b"", sport=PAXOS_UDP, ttl=64, **kw):
        p = innet_hdr(flags) + paxos_hdr(typ, vlen=len(value), **kw) + value
        return px_frame(C_MAC, A_MAC, C_IP, A_IP, sport, PAXOS_UDP, p, ttl=ttl)

    def reply(typ, value=b"", dport=PAXOS_UDP, flags=0, **kw):
        p = innet_hdr(flags, dst=1, src=2) + paxos_hdr(typ, node=0, vlen=len(value), **kw) + value
        return px_frame(A_MAC, C_MAC, A_IP, C_IP, PAXOS_UDP, dport, p)

    def b2(i, value, **kw):
        p = innet_hdr(0) + paxos_hdr(5, node=0, vlen=len(value), **kw) + value
        return px_frame(LP_MAC[i], L_MAC[i], LP_IP[i], L_IP[i], PAXOS_UDP, 34953, p)

    v1 = b"KV\x01\x00\x00\x01" + bytes(range(40))          # 46 bytes: 5 words + 6
    t.comment("2A(ballot 0x100, instance 5, 46-byte value): 2B to the three learners")
    t.packet(0, req(4, ballot=0x100, inst=5, req=0x100000001, value=v1))
    for i in range(3):
        t.expect(i + 1, b2(i, v1, ballot=0x100, vballot=0x100, inst=5, req=0x100000001, hi=6))
    t.comment("1A(ballot 0x200, instance 5): 1B with the vote (the value read back)")
    t.packet(0, req(2, ballot=0x200, inst=5, sport=40000))
    t.expect(0, reply(3, ballot=0x200, vballot=0x100, inst=5, req=0x100000001, hi=6, value=v1,
                      dport=40000))
    t.comment("2A(ballot 0x100) at 5 again: NACK(ballot), the promise 0x200")
    t.packet(0, req(4, ballot=0x100, inst=5, req=7, value=b"x"))
    t.expect(0, reply(6, status=1, ballot=0x200, inst=5, req=7, hi=6))
    t.comment("RECOVER(7): nothing voted there: 2B status empty")
    t.packet(0, req(8, inst=7, sport=40001))
    t.expect(0, reply(5, status=5, inst=7, hi=6, dport=40001))
    t.comment("2A(ballot 0x200, 5, a 255-byte value: 31 words + 4 + 2 + 1): voted, 2B")
    v2 = bytes((i * 7) & 0xFF for i in range(255))
    t.packet(0, req(4, ballot=0x200, inst=5, req=9, value=v2))
    for i in range(3):
        t.expect(i + 1, b2(i, v2, ballot=0x200, vballot=0x200, inst=5, req=9, hi=6))
    t.comment("RECOVER(5): the 255-byte value back, the ballot is the vote's")
    t.packet(0, req(8, inst=5, sport=40002))
    t.expect(0, reply(5, ballot=0x200, vballot=0x200, inst=5, req=9, hi=6, value=v2, dport=40002))
    t.comment("TRIM from learners 0, 1, 2 (watermarks 3, 9, 4): trim = min = 3, then 4")
    t.packet(0, req(7, node=0, trim=3))
    t.expect(0, reply(7, trim=0, hi=6))
    t.packet(0, req(7, node=1, trim=9))
    t.expect(0, reply(7, trim=0, hi=6))
    t.packet(0, req(7, node=2, trim=4))
    t.expect(0, reply(7, trim=3, hi=6))
    t.packet(0, req(7, node=0, trim=5))
    t.expect(0, reply(7, trim=4, hi=6))
    t.comment("instance 2 < trim 4: NACK(trimmed); 4 + 4096: NACK(ring_full), hi moves;\n"
              "a range 1A out of the window is promised (1B empty)")
    t.packet(0, req(4, ballot=0x300, inst=2, req=1, value=b"abc"))
    t.expect(0, reply(6, status=3, inst=2, req=1, trim=4, hi=6))
    t.packet(0, req(4, ballot=0x300, inst=4100, req=1, value=b"abc"))
    t.expect(0, reply(6, status=2, inst=4100, req=1, trim=4, hi=4101))
    t.packet(0, req(2, flags=1, ballot=0x300, inst=5000))
    t.expect(0, reply(3, status=5, ballot=0x300, inst=5000, trim=4, hi=4101, flags=1))
    t.comment("the range promise holds: 2A(0x200) at 6 is NACKed with 0x300")
    t.packet(0, req(4, ballot=0x200, inst=6, req=2, value=b"z"))
    t.expect(0, reply(6, status=1, ballot=0x300, inst=6, req=2, trim=4, hi=4101))
    t.comment("dropped: bad magic, bad version, wrong service, a 2B (unexpected type),\n"
              "vlen not matching the datagram, a value on a 1A, a 257-byte value,\n"
              "ballot 0, a TRIM from learner 3, a frame cut in the Paxos header,\n"
              "UDP to another port, not IPv4")
    base = innet_hdr() + paxos_hdr(4, ballot=0x400, inst=8, vlen=1) + b"q"
    for bad in (b"\x1f" + base[1:], base[:1] + b"\x02" + base[2:], base[:2] + b"\x03" + base[3:]):
        t.packet(0, px_frame(C_MAC, A_MAC, C_IP, A_IP, PAXOS_UDP, PAXOS_UDP, bad))
    t.packet(0, req(5, ballot=0x400, inst=8))
    t.packet(0, px_frame(C_MAC, A_MAC, C_IP, A_IP, PAXOS_UDP, PAXOS_UDP,
                         innet_hdr() + paxos_hdr(4, ballot=0x400, inst=8, vlen=3) + b"q"))
    t.packet(0, px_frame(C_MAC, A_MAC, C_IP, A_IP, PAXOS_UDP, PAXOS_UDP,
                         innet_hdr() + paxos_hdr(2, ballot=0x400, inst=8, vlen=1) + b"q"))
    t.packet(0, req(4, ballot=0x400, inst=8, value=bytes(257)))
    t.packet(0, req(4, ballot=0, inst=8, value=b"q"))
    t.packet(0, req(7, node=3, trim=9))
    t.packet(0, px_frame(C_MAC, A_MAC, C_IP, A_IP, PAXOS_UDP, PAXOS_UDP, innet_hdr() + bytes(20)))
    t.packet(0, px_frame(C_MAC, A_MAC, C_IP, A_IP, PAXOS_UDP, 9999, base))
    t.packet(0, eth(A_MAC, C_MAC, 0x86DD) + bytes(80))
    t.comment("ports 0-3 are named above: nothing else may leave them")
    t.comment("the drop counters by reason (compared between targets)")
    for r in ("not_paxos", "too_short", "bad_magic", "bad_version", "wrong_service", "bad_length",
              "unexpected_type", "bad_learner", "bad_ballot"):
        t.raw("counter_read drops_%s 0" % r)
    return t


CASES = [l2_switch, l3_router, ecmp, stateful, mcast_clone, recirc, paxos_acceptor]


def main():
    check = "--check" in sys.argv[1:]
    bad = 0
    for fn in CASES:
        text = fn().text()
        path = os.path.join(HERE, fn.__name__ + ".stf")
        if check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        print("%s differs from what mkstf.py writes" % path)
                        bad += 1
            except OSError:
                print("%s missing" % path)
                bad += 1
        else:
            with open(path, "w") as f:
                f.write(text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
