/*
 * l3_router.p4 — an IPv4 router (v1model): longest-prefix match, TTL,
 * the IPv4 header checksum, static neighbours (no ARP).
 *
 *   parser      Ethernet → IPv4 (ether_type 0x0800; version 4 and a 20-byte
 *               header, else a parser error: IPv4BadVersion / IPv4Options)
 *   verify      the IPv4 header checksum (standard_metadata.checksum_error)
 *   ingress     not IPv4, parser error, bad checksum, TTL ≤ 1: dropped,
 *               each under its reason; else
 *               ipv4_lpm[dst]     set_nhop(nhop, port): TTL − 1 (nhop 0: the
 *                                 destination itself, a connected route)
 *               neighbour[nhop]   set_dmac(mac): the next hop's MAC
 *   egress      port_mac[egress_port] set_smac(mac): the port's own MAC
 *   compute     the IPv4 header checksum again
 *
 * Each drop is counted in a counter named for its reason (drops_not_ipv4,
 * drops_bad_header, drops_bad_checksum, drops_ttl_expired, drops_no_route,
 * drops_no_neighbour: `counter_read drops_bad_checksum 0`), in an action of
 * the same name (drop_bad_checksum, ...). `port_rx` / `port_tx` count packets and
 * bytes per port; ipv4_lpm has a direct counter (route_hits).
 *
 * l3_router.commands: four ports, two connected /24s per port pair and a
 * default route; tests/p4/l3_router.stf drives it.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;


error {
    IPv4BadVersion,
    IPv4Options
}

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

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

struct metadata_t {
    bit<32> nhop;
}

parser RouterParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.IPv4BadVersion);
        verify(hdr.ipv4.ihl == 5, error.IPv4Options);
        transition accept;
    }
}

control RouterVerify(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control RouterIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_not_ipv4;
    counter(1, CounterType.packets) drops_bad_header;
    counter(1, CounterType.packets) drops_bad_checksum;
    counter(1, CounterType.packets) drops_ttl_expired;
    counter(1, CounterType.packets) drops_no_route;
    counter(1, CounterType.packets) drops_no_neighbour;
    counter(512, CounterType.packets_and_bytes) port_rx;
    direct_counter(CounterType.packets_and_bytes) route_hits;

    action drop_not_ipv4() {
        drops_not_ipv4.count(0);
        mark_to_drop(sm);
    }
    action drop_bad_header() {
        drops_bad_header.count(0);
        mark_to_drop(sm);
    }
    action drop_bad_checksum() {
        drops_bad_checksum.count(0);
        mark_to_drop(sm);
    }
    action drop_ttl_expired() {
        drops_ttl_expired.count(0);
        mark_to_drop(sm);
    }
    action drop_no_route() {
        route_hits.count();
        drops_no_route.count(0);
        mark_to_drop(sm);
    }
    action drop_no_neighbour() {
        drops_no_neighbour.count(0);
        mark_to_drop(sm);
    }
    action set_nhop(bit<32> nhop, bit<9> port) {
        route_hits.count();
        meta.nhop = nhop == 0 ? hdr.ipv4.dst : nhop;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action set_dmac(bit<48> mac) {
        hdr.ethernet.dst = mac;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst : lpm; }
        actions = { set_nhop; drop_no_route; }
        default_action = drop_no_route();
        counters = route_hits;
        size = 16384;
    }
    table neighbour {
        key = { meta.nhop : exact; }
        actions = { set_dmac; drop_no_neighbour; }
        default_action = drop_no_neighbour();
        size = 4096;
    }

    apply {
        port_rx.count((bit<32>)sm.ingress_port);
        if (sm.parser_error != error.NoError) {
            drop_bad_header();
        } else if (!hdr.ipv4.isValid()) {
            drop_not_ipv4();
        } else if (sm.checksum_error == 1) {
            drop_bad_checksum();
        } else if (hdr.ipv4.ttl <= 1) {
            drop_ttl_expired();
        } else if (ipv4_lpm.apply().hit) {
            neighbour.apply();
        }
    }
}

control RouterEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_tx;

    action set_smac(bit<48> mac) {
        hdr.ethernet.src = mac;
    }
    table port_mac {
        key = { sm.egress_port : exact; }
        actions = { set_smac; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    apply {
        port_mac.apply();
        port_tx.count((bit<32>)sm.egress_port);
    }
}

control RouterCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control RouterDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(RouterParser(), RouterVerify(), RouterIngress(), RouterEgress(),
         RouterCompute(), RouterDeparser()) main;
