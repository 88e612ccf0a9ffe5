/*
 * ecmp.p4 — equal-cost multipath (v1model): an IPv4 LPM table whose entries
 * name groups of an action selector; the member is chosen by a CRC16 hash of
 * the 5-tuple, so one flow always takes one path.
 *
 *   parser   Ethernet → IPv4 → TCP or UDP (ports copied to metadata; 0 for
 *            other protocols, so the hash never reads an invalid header)
 *   ingress  ecmp[dst lpm; src, dst, proto, sport, dport: selector]
 *              set_nhop(dmac, smac, port): rewrite both MACs, TTL − 1
 *            not IPv4 / IPv4 options / bad checksum / TTL ≤ 1 / no route:
 *            dropped, each counted in its own counter (drops_<reason>)
 *   compute  the IPv4 header checksum
 *
 * ecmp.commands: a group of four next hops for 10.0.0.0/8 and a group of two
 * for 192.168.0.0/16 (act_prof_create_member / _group /
 * table_indirect_add_with_group), a single member for 172.16.0.0/12.
 */
#include <core.p4>
#include <v1model.p4>


header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
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

header l4_ports_t {
    bit<16> sport;
    bit<16> dport;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    l4_ports_t l4;
}

struct metadata_t {
    bit<16> sport;
    bit<16> dport;
}

parser EcmpParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    state start {
        meta.sport = 0;
        meta.dport = 0;
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 6): parse_l4;
            (5, 0, 17): parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        pkt.extract(hdr.l4);
        meta.sport = hdr.l4.sport;
        meta.dport = hdr.l4.dport;
        transition accept;
    }
}

control EcmpVerify(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control EcmpIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_not_ipv4;
    counter(1, CounterType.packets) drops_ipv4_options;
    counter(1, CounterType.packets) drops_ttl_expired;
    counter(1, CounterType.packets) drops_no_route;
    counter(1, CounterType.packets) drops_bad_checksum;
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) ecmp_selector;

    action drop_not_ipv4() {
        drops_not_ipv4.count(0);
        mark_to_drop(sm);
    }
    action drop_ttl_expired() {
        drops_ttl_expired.count(0);
        mark_to_drop(sm);
    }
    action drop_no_route() {
        drops_no_route.count(0);
        mark_to_drop(sm);
    }
    action drop_bad_checksum() {
        drops_bad_checksum.count(0);
        mark_to_drop(sm);
    }
    action drop_ipv4_options() {
        drops_ipv4_options.count(0);
        mark_to_drop(sm);
    }
    action set_nhop(bit<48> dmac, bit<48> smac, bit<9> port) {
        hdr.ethernet.dst = dmac;
        hdr.ethernet.src = smac;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ecmp {
        key = {
            hdr.ipv4.dst      : lpm;
            hdr.ipv4.src      : selector;
            hdr.ipv4.dst      : selector;
            hdr.ipv4.protocol : selector;
            meta.sport        : selector;
            meta.dport        : selector;
        }
        actions = { set_nhop; }
        /* no default action: BMv2 has none for a table with an action
         * profile or selector (p4c-bm2-ss leaves it out of the JSON), so
         * a miss is dropped in apply below */
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            drop_not_ipv4();
        } else if (hdr.ipv4.ihl != 5) {
            drop_ipv4_options();
        } else if (sm.checksum_error == 1) {
            drop_bad_checksum();
        } else if (hdr.ipv4.ttl <= 1) {
            drop_ttl_expired();
        } else if (!ecmp.apply().hit) {
            drop_no_route();
        }
    }
}

control EcmpEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    apply { }
}

control EcmpCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control EcmpDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.l4);
    }
}

V1Switch(EcmpParser(), EcmpVerify(), EcmpIngress(), EcmpEgress(),
         EcmpCompute(), EcmpDeparser()) main;
