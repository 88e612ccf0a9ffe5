/*
 * cli.p4 — a v1model program with one of every object the simple_switch_CLI
 * command language addresses: tables of each match kind (exact, LPM,
 * ternary, range, optional — which p4c-bm2-ss writes as ternary), an action profile and an action selector,
 * direct and indirect counters and meters, registers of several widths, a
 * parser value set, a digest, clone and multicast (stash and fixed are
 * ternary: exact and LPM tables, default entries, multicast groups and
 * profiles share innet's 8 tables). It exists for the tests
 * of innet's loader and command language (tests/unit/test_p4_load.c,
 * tests/fuzz/fuzz_p4_cli.c, tests/integration/p4_run.sh); its JSON
 * (cli.json, committed) is what p4c-bm2-ss compiles it to:
 *
 *   p4c-bm2-ss -I $P4C/p4include -o tests/p4/cli.json tests/p4/cli.p4
 */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> len;
    bit<16> id;
    bit<3>  flags;
    bit<13> frag;
    bit<8>  ttl;
    bit<8>  proto;
    bit<16> csum;
    bit<32> src;
    bit<32> dst;
}

header ipv6_t {
    bit<4>   version;
    bit<8>   tc;
    bit<20>  flow;
    bit<16>  len;
    bit<8>   next;
    bit<8>   hops;
    bit<128> src;
    bit<128> dst;
}

header l4_t {
    bit<16> sport;
    bit<16> dport;
}

struct headers_t {
    ethernet_t eth;
    ipv4_t     ipv4;
    ipv6_t     ipv6;
    l4_t       l4;
}

struct learn_t {
    bit<48> src;
    bit<9>  port;
}

struct meta_t {
    bit<8>  color;
    bit<8>  dcolor;
    bit<16> tag;
    bit<32> hash;
}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) extra_types;

    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) {
            0x0800: v4;
            0x86dd: v6;
            extra_types: accept;
            default: accept;
        }
    }
    state v4 {
        pkt.extract(h.ipv4);
        verify(h.ipv4.ihl == 5, error.HeaderTooShort);
        transition select(h.ipv4.proto) {
            6: l4;
            17: l4;
            default: accept;
        }
    }
    state v6 {
        pkt.extract(h.ipv6);
        transition select(h.ipv6.next) {
            6: l4;
            17: l4;
            default: accept;
        }
    }
    state l4 {
        pkt.extract(h.l4);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) {
    apply {
        verify_checksum(h.ipv4.isValid(),
            { h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.len, h.ipv4.id, h.ipv4.flags,
              h.ipv4.frag, h.ipv4.ttl, h.ipv4.proto, h.ipv4.src, h.ipv4.dst },
            h.ipv4.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<8>>(16)   r8;
    register<bit<32>>(16)  r32;
    register<bit<64>>(8)   r64;
    register<bit<128>>(4)  r128;
    counter(32, CounterType.packets_and_bytes) port_pkts;
    meter(8, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) mac_hits;
    direct_meter<bit<8>>(MeterType.bytes) mac_meter;
    action_selector(HashAlgorithm.crc16, 16, 16) ecmp_sel;
    action_profile(8) prof;

    action drop() { mark_to_drop(sm); }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action fwd_tag(bit<9> port, bit<16> tag) { sm.egress_spec = port; m.tag = tag; }
    action set_mac(bit<48> dst, bit<48> src) { h.eth.dst = dst; h.eth.src = src; }
    action metered(bit<9> port) { sm.egress_spec = port; mac_meter.read(m.dcolor); }
    action learn() { digest<learn_t>(1, { h.eth.src, sm.ingress_port }); }
    action mcast(bit<16> grp) { sm.mcast_grp = grp; }
    action mirror(bit<32> session) { clone(CloneType.I2E, session); }
    action remember(bit<32> idx) {
        r8.write((bit<32>)idx[3:0], h.ipv4.ttl);   // (in range: BMv2 crashes beyond)
        r32.write((bit<32>)idx[3:0], h.ipv4.src);
        r64.write((bit<32>)idx[2:0], (bit<64>)h.eth.src);
        r128.write((bit<32>)idx[1:0], h.ipv6.src);
    }

    table mac {
        key = { h.eth.dst: exact; }
        actions = { fwd; metered; learn; drop; NoAction; }
        counters = mac_hits;
        meters = mac_meter;
        size = 64;
        default_action = learn();
    }
    table route4 {
        key = { h.ipv4.dst: lpm; }
        actions = { fwd; fwd_tag; drop; NoAction; }
        size = 128;
    }
    table route6 {
        key = { h.ipv6.dst: lpm; }
        actions = { fwd; drop; NoAction; }
        size = 32;
    }
    table acl {
        key = {
            h.ipv4.src: ternary;
            h.ipv4.proto: ternary;
            h.l4.dport: range;
            sm.ingress_port: optional;
        }
        actions = { drop; mirror; mcast; NoAction; }
        size = 32;
        default_action = NoAction();
    }
    table ecmp {
        key = { h.ipv4.dst: exact; h.ipv4.src: selector; h.l4.sport: selector; }
        actions = { fwd; NoAction; }
        implementation = ecmp_sel;
        size = 16;
    }
    table nexthop {
        key = { sm.egress_spec: exact; }
        actions = { set_mac; NoAction; }
        implementation = prof;
        size = 16;
    }
    table stash {
        key = { h.ipv4.tos: ternary; }
        actions = { remember; NoAction; }
        size = 8;
    }
    table fixed {
        key = { h.eth.type: ternary; }
        actions = { fwd; drop; }
        const entries = {
            0x0806 &&& 0xffff : drop();
            0x88cc &&& 0xffff : fwd(0);
        }
        const default_action = fwd(1);
    }

    apply {
        port_pkts.count((bit<32>)sm.ingress_port);
        port_meter.execute_meter((bit<32>)sm.ingress_port[2:0], m.color);
        if (h.ipv4.isValid()) {
            m.hash = (bit<32>)h.ipv4.ttl;
            route4.apply();
            ecmp.apply();
            acl.apply();
            stash.apply();
        } else if (h.ipv6.isValid()) {
            route6.apply();
        } else {
            switch (mac.apply().action_run) {
                learn: { fixed.apply(); }
                default: { }
            }
        }
        nexthop.apply();
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (sm.egress_rid != 0) {
            h.eth.src = h.eth.src + (bit<48>)sm.egress_rid;
        }
    }
}

control CC(inout headers_t h, inout meta_t m) {
    apply {
        update_checksum(h.ipv4.isValid(),
            { h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.len, h.ipv4.id, h.ipv4.flags,
              h.ipv4.frag, h.ipv4.ttl, h.ipv4.proto, h.ipv4.src, h.ipv4.dst },
            h.ipv4.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.eth);
        pkt.emit(h.ipv4);
        pkt.emit(h.ipv6);
        pkt.emit(h.l4);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
