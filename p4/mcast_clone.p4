/*
 * mcast_clone.p4 — multicast groups and mirroring (v1model): replication
 * with egress_rid, ingress-to-egress and egress-to-egress clones through
 * mirroring sessions, a preserved field list, truncation.
 *
 *   ingress  mcast[ipv4 dst]     set_group(grp): replicate (the PRE's group)
 *            fwd[ingress_port]   forward(port), else drop_no_port
 *            mirror_in[ingress_port]
 *                                mirror(session, reason): clone I2E with
 *                                field list 1 (meta.mirror_reason)
 *   egress   a replica (instance_type 5): replica[egress_rid]
 *                                set_dst(mac, ip): the copy's destination
 *            a normal packet or replica: mirror_out[egress_port]
 *                                mirror_e2e(session): clone E2E
 *            a clone (instance_type 1 or 2): a mirror header after Ethernet
 *                                (ether_type 0x88B5, then the reason, the
 *                                instance type, the ingress port — kept in
 *                                field list 1, so 0 in an E2E clone — and the
 *                                original ether_type), truncated to 96 bytes
 *   compute  the IPv4 header checksum
 *
 * mcast_clone.commands: group 1 = ports 1, 2, 3 with rids 10, 20, 30; port 0
 * forwards to port 1; frames from port 2 are mirrored to session 5 (port 3).
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_MIRROR = 0x88B5;
const bit<32> INSTANCE_NORMAL = 0;
const bit<32> INSTANCE_CLONE_I2E = 1;
const bit<32> INSTANCE_CLONE_E2E = 2;
const bit<32> INSTANCE_REPLICATION = 5;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

/* What a mirrored copy carries after its Ethernet header. */
header mirror_t {
    bit<8>  reason;         /* mirror_in's reason; 0xE2 for an E2E clone */
    bit<8>  instance_type;  /* 1 I2E, 2 E2E */
    bit<16> ingress_port;
    bit<16> ether_type;     /* the original frame's */
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src;
    bit<32> dst;
}

struct headers_t {
    ethernet_t ethernet;
    mirror_t   mirror;
    ipv4_t     ipv4;
}

/* Field list 1 is what an I2E clone keeps of the metadata: BMv2 resets the
 * rest, standard metadata included (a clone's sm.ingress_port reads 0), so
 * the ingress port the mirror header reports travels here. */
struct metadata_t {
    @field_list(1)
    bit<8>  mirror_reason;
    @field_list(1)
    bit<16> in_port;
}

parser McParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control McVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control McIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_no_port;

    action drop_no_port() {
        drops_no_port.count(0);
        mark_to_drop(sm);
    }
    action set_group(bit<16> grp) {
        sm.mcast_grp = grp;
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action mirror(bit<32> session, bit<8> reason) {
        meta.mirror_reason = reason;
        clone_preserving_field_list(CloneType.I2E, session, 1);
    }

    table mcast {
        key = { hdr.ipv4.dst : exact; }
        actions = { set_group; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    table fwd {
        key = { sm.ingress_port : exact; }
        actions = { forward; drop_no_port; }
        default_action = drop_no_port();
        size = 512;
    }
    table mirror_in {
        key = { sm.ingress_port : exact; }
        actions = { mirror; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        meta.mirror_reason = 0;
        meta.in_port = (bit<16>)sm.ingress_port;
        if (!hdr.ipv4.isValid() || !mcast.apply().hit)
            fwd.apply();
        mirror_in.apply();
    }
}

control McEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t sm) {
    action set_dst(bit<48> mac, bit<32> ip) {
        hdr.ethernet.dst = mac;
        hdr.ipv4.dst = ip;
    }
    action mirror_e2e(bit<32> session) {
        clone(CloneType.E2E, session);
    }
    action add_mirror_header(bit<8> reason) {
        hdr.mirror.setValid();
        hdr.mirror.reason = reason;
        hdr.mirror.instance_type = (bit<8>)sm.instance_type;
        hdr.mirror.ingress_port = meta.in_port;
        hdr.mirror.ether_type = hdr.ethernet.ether_type;
        hdr.ethernet.ether_type = ETHERTYPE_MIRROR;
        truncate(96);
    }

    table replica {
        key = { sm.egress_rid : exact; }
        actions = { set_dst; NoAction; }
        default_action = NoAction();
        size = 256;
    }
    table mirror_out {
        key = { sm.egress_port : exact; }
        actions = { mirror_e2e; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        if (sm.instance_type == INSTANCE_CLONE_I2E) {
            add_mirror_header(meta.mirror_reason);
        } else if (sm.instance_type == INSTANCE_CLONE_E2E) {
            add_mirror_header(0xE2);
        } else {
            if (sm.instance_type == INSTANCE_REPLICATION && hdr.ipv4.isValid())
                replica.apply();
            mirror_out.apply();
        }
    }
}

control McCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control McDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.mirror);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(McParser(), McVerify(), McIngress(), McEgress(), McCompute(),
         McDeparser()) main;
