"""p4xos.py — P4xos's own P4_16 programs (usi-systems/p4xos-public,
p4-16/p4src: leader.p4, acceptor.p4, learner.p4) compiled with p4c and run
on BMv2 and innet with frames in P4xos's header format.

The sources are never copied into the project: P4XOS_SRC (or --src) names a
checkout or a bare git directory of p4xos-public, and the programs are
extracted into a scratch directory at run time. They were written for the
p4c of 2017; today's p4c-bm2-ss rejects four things in them, which adapt()
changes in the scratch copy, and nothing else:

  1. `PortId` is bit<4>; `standard_metadata.egress_spec = port` needs a cast
     to bit<9> now: the assignment in `forward` becomes `= (bit<9>)port`.
  2. The verify-checksum control calls mark_to_drop() inside an `if` on a
     Checksum16 value; p4c's BMv2 back end accepts only verify_checksum()
     calls there. The control's body is replaced by the v1model equivalent,
     verify_checksum() over the same IPv4 fields (BMv2 then flags, and does
     not drop, a bad checksum; P4xos's intent, a drop, was dead code: a
     mark_to_drop() there is overwritten by its ingress).
  3. v1model's mark_to_drop() takes the standard metadata now (it took no
     argument in 2017's v1model.p4): `mark_to_drop()` becomes
     `mark_to_drop(standard_metadata)`, the name every P4xos control gives
     its standard_metadata_t parameter.
  4. The compute-checksum control assigns Checksum16.get() to the IPv4
     checksum; the BMv2 back end accepts only update_checksum() calls there.
     It becomes update_checksum() over the same fields with csum16 (the same
     sum; only for a valid IPv4 header, the only one the deparser emits).

Header (after UDP; 48 bytes): msgtype 16, inst 32, rnd 16, vrnd 16,
acptid 16, paxoslen 32, paxosval 256 bits. msgtype 0 1A, 1 1B, 2 2A, 3 2B.
The shared parser (includes/parser.p4) parses the Paxos header only on UDP
port 0x8888 (PAXOS_PROTOCOL), so every hop of the protocol uses 0x8888: the
leader's and acceptors' `forward` actions are given 0x8888 as the next
hop's port (header.p4's ACCEPTOR_PORT/LEARNER_PORT constants are unused by
the P4_16 programs); the learner delivers to the application's port.
"""
import os
import re
import shutil
import struct
import subprocess
import tempfile

PROGRAMS = ("leader", "acceptor", "learner")
PAXOS_UDP, APP_UDP = 0x8888, 56789


class P4xosError(Exception):
    pass


def source_dir(src=None):
    """A directory holding p4-16/p4src/*.p4 (extracted from a bare git
    directory if need be: the caller removes it) -> (dir, is_scratch)."""
    src = src or os.environ.get("P4XOS_SRC")
    if not src:
        raise P4xosError("no p4xos-public source (set P4XOS_SRC to a checkout or its git directory)")
    if os.path.isdir(os.path.join(src, "p4-16", "p4src")):
        return src, False
    gitdir = src
    if os.path.isdir(os.path.join(src, ".git")):
        gitdir = os.path.join(src, ".git")
    if not os.path.exists(os.path.join(gitdir, "HEAD")):
        raise P4xosError("%s is neither a p4xos-public checkout nor a git directory" % src)
    d = tempfile.mkdtemp(prefix="p4xos-src-")
    try:
        arch = subprocess.run(["git", "--git-dir", gitdir, "archive", "HEAD", "p4-16"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", d], input=arch, check=True)
    except subprocess.CalledProcessError as e:
        shutil.rmtree(d, ignore_errors=True)
        raise P4xosError("git archive of %s failed: %s" % (gitdir, e.stderr.decode(errors="replace")[-200:]))
    return d, True


_VERIFY = re.compile(r"control\s+verifyChecksum\s*\([^)]*\)\s*\{.*?\n\}", re.S)
_VERIFY_NEW = """control verifyChecksum(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}"""

_COMPUTE = re.compile(r"control\s+computeChecksum\s*\([^)]*\)\s*\{.*?\n\}", re.S)
_COMPUTE_NEW = """control computeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}"""


def adapt(src_dir, out_dir, changes=None):
    """Copy p4-16/p4src to out_dir with the changes the module comment lists;
    returns {program: path}. `changes` (a list) receives what was changed."""
    p4src = os.path.join(src_dir, "p4-16", "p4src")
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    shutil.copytree(p4src, out_dir)
    log = changes if changes is not None else []
    for root, _, files in os.walk(out_dir):
        for f in files:
            if not f.endswith(".p4"):
                continue
            p = os.path.join(root, f)
            with open(p) as fh:
                s = fh.read()
            t = re.sub(r"standard_metadata\.egress_spec\s*=\s*port\s*;",
                       "standard_metadata.egress_spec = (bit<9>)port;", s)
            if t != s:
                log.append("%s: egress_spec = (bit<9>)port" % f)
            u = _VERIFY.sub(_VERIFY_NEW, t)
            if u != t:
                log.append("%s: verifyChecksum -> verify_checksum()" % f)
            w = _COMPUTE.sub(_COMPUTE_NEW, u)
            if w != u:
                log.append("%s: computeChecksum -> update_checksum()" % f)
            u = w
            v = re.sub(r"\bmark_to_drop\(\s*\)", "mark_to_drop(standard_metadata)", u)
            if v != u:
                log.append("%s: mark_to_drop() -> mark_to_drop(standard_metadata)" % f)
            u = v
            if u != s:
                with open(p, "w") as fh:
                    fh.write(u)
    progs = {}
    for name in PROGRAMS:
        p = os.path.join(out_dir, name + ".p4")
        if os.path.exists(p):
            progs[name] = p
    return progs


# -- frames ---------------------------------------------------------------------

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def paxos(msgtype, inst=0, rnd=0, vrnd=0, acptid=0, value=b"", paxoslen=32):
    v = (value + bytes(32))[:32]
    return struct.pack("!HIHHHI", msgtype, inst, rnd, vrnd, acptid, paxoslen) + v


def frame(payload, dport, sport=34951, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02",
          src_ip="10.60.0.1", dst_ip="10.60.9.1", ttl=64):
    mac = lambda s: bytes(int(x, 16) for x in s.split(":"))  # noqa: E731
    ip = lambda s: bytes(int(x) for x in s.split("."))  # noqa: E731
    u = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(u), 0, 0, ttl, 17, 0, ip(src_ip), ip(dst_ip))
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return mac(dst_mac) + mac(src_mac) + b"\x08\x00" + h + u


def commands(name, acceptor_id=0, out_port=1, app_port=3):
    """The simple_switch_CLI commands of one P4xos program in the fabric
    (p4xos-public's own config-*.txt name tables and actions its P4_16
    sources no longer have)."""
    if name == "leader":
        return ["table_add leader_tbl increase_instance 2 =>",
                "table_add leader_tbl reset_instance 5 =>",
                "table_add transport_tbl forward 0 => %d %d" % (out_port, PAXOS_UDP),
                "table_add transport_tbl _drop 1 =>"]
    if name == "acceptor":
        return ["table_add acceptor_tbl handle_1a 0 =>",
                "table_add acceptor_tbl handle_2a 2 =>",
                "table_add transport_tbl forward 0 => %d %d" % (out_port, PAXOS_UDP),
                "table_add transport_tbl _drop 1 =>",
                "register_write registerAcceptorID 0 %d" % acceptor_id]
    if name == "learner":
        return ["table_add transport_tbl forward 1 => %d %d" % (app_port, APP_UDP)]
    raise ValueError(name)


def script(name):
    """A run script (commands + frames) exercising one program, and the
    expectations every target must meet besides agreeing with each other:
    [(port, predicate description, function(frames_on_port) -> bool)]."""
    lines = list(commands(name, acceptor_id=2))
    checks = []
    if name == "leader":
        for i in range(3):
            lines.append("packet 0 " + frame(paxos(2, rnd=1, value=b"v%d" % i), PAXOS_UDP).hex())
        lines.append("packet 0 " + frame(paxos(5), PAXOS_UDP).hex())     # reset
        lines.append("packet 0 " + frame(paxos(2, rnd=1, value=b"after"), PAXOS_UDP).hex())
        lines.append("packet 0 " + frame(paxos(2), 9999).hex())           # not Paxos
        checks.append((1, "2As numbered 1, 2, 3, then 1 after the reset, to the acceptors",
                       lambda fr: [struct.unpack("!I", f[44:48])[0] for f in fr if len(f) >= 48]
                       == [1, 2, 3, 1]))
    elif name == "acceptor":
        lines.append("packet 0 " + frame(paxos(2, inst=7, rnd=1, value=b"seven"), PAXOS_UDP).hex())
        lines.append("packet 0 " + frame(paxos(0, inst=7, rnd=2), PAXOS_UDP).hex())
        lines.append("packet 0 " + frame(paxos(2, inst=7, rnd=1, value=b"late"), PAXOS_UDP).hex())
        lines.append("packet 0 " + frame(paxos(2, inst=8, rnd=3, value=b"eight"), PAXOS_UDP).hex())
        lines.append("register_read registerVRound 7")
        lines.append("register_read registerRound 7")
        checks.append((1, "2B(7, acptid 2, 'seven'), 1B(7, vrnd 1, 'seven'), 2B(8, 'eight')",
                       lambda fr: [(f[42:44], f[52:54], f[58:63]) for f in fr[:3]] ==
                       [(b"\x00\x03", b"\x00\x02", b"seven"), (b"\x00\x01", b"\x00\x02", b"seven"),
                        (b"\x00\x03", b"\x00\x02", b"eight")]))
    elif name == "learner":
        for acc in (0, 1, 2):
            lines.append("packet %d " % acc + frame(paxos(3, inst=4, rnd=1, acptid=acc, value=b"four"),
                                                    PAXOS_UDP).hex())
        for acc in (2, 0):
            lines.append("packet %d " % acc + frame(paxos(3, inst=5, rnd=1, acptid=acc, value=b"five"),
                                                    PAXOS_UDP).hex())
        lines.append("register_read registerHistory2B 4")
        checks.append((3, "one delivery per instance (4, then 5) once two acceptors voted",
                       lambda fr: [struct.unpack("!I", f[44:48])[0] for f in fr] == [4, 5]))
    return lines, checks
