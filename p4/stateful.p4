/*
 * stateful.p4 — registers, counters and meters (v1model): a flow monitor
 * that polices per port and per class and stamps each packet with its flow's
 * packet count.
 *
 *   parser   Ethernet → IPv4 (20-byte header) → UDP
 *   ingress  port_rx[ingress_port]          counter (packets and bytes)
 *            port_meter[ingress_port]       meter (packets): RED → dropped
 *                                           (drop_port_metered)
 *            classify[udp dport]            set_class(dscp): direct counter
 *                                           class_hits, direct meter
 *                                           class_meter (bytes): RED → dropped
 *                                           (drop_class_metered)
 *            flow = crc32(5-tuple) mod 1024 flow_pkts[flow] += 1,
 *                                           flow_bytes[flow] += length;
 *                                           the IPv4 identification field
 *                                           carries flow_pkts' low 16 bits
 *            heavy_threshold[0] (0 = off)   a flow above it is marked
 *                                           (diffserv 0x04) and counted in
 *                                           heavy_marks
 *            fwd[ingress_port]              forward(port), else no_port
 *   compute  the IPv4 header checksum
 *
 * Meters are unconfigured (always GREEN) until meter_set_rates /
 * meter_array_set_rates gives them rates; stateful.commands sets none, so the
 * differential tests (which cannot share BMv2's clock) see GREEN only, and
 * tests/p4/stateful.stf configures one.
 */
#include <core.p4>
#include <v1model.p4>

const bit<2>  METER_RED = 2;

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

header udp_t {
    bit<16> sport;
    bit<16> dport;
    bit<16> len;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

struct metadata_t {
    bit<2>  port_color;
    bit<2>  class_color;
    bit<32> flow;
    bit<32> pkts;
    bit<32> bytes;
    bit<32> threshold;
}

parser StatefulParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
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
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol) {
            (5, 17): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition accept;
    }
}

control StatefulVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control StatefulIngress(inout headers_t hdr, inout metadata_t meta,
                        inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_not_udp;
    counter(1, CounterType.packets) drops_port_metered;
    counter(1, CounterType.packets) drops_class_metered;
    counter(1, CounterType.packets) drops_no_port;
    counter(512, CounterType.packets_and_bytes) port_rx;
    counter(1, CounterType.packets) heavy_marks;
    meter(512, MeterType.packets) port_meter;
    direct_counter(CounterType.packets_and_bytes) class_hits;
    direct_meter<bit<2>>(MeterType.bytes) class_meter;
    register<bit<32>>(1024) flow_pkts;
    register<bit<32>>(1024) flow_bytes;
    register<bit<32>>(1) heavy_threshold;

    action drop_not_udp() {
        drops_not_udp.count(0);
        mark_to_drop(sm);
    }
    action drop_port_metered() {
        drops_port_metered.count(0);
        mark_to_drop(sm);
    }
    action drop_class_metered() {
        drops_class_metered.count(0);
        mark_to_drop(sm);
    }
    action drop_no_port() {
        drops_no_port.count(0);
        mark_to_drop(sm);
    }
    action set_class(bit<6> dscp) {
        class_meter.read(meta.class_color);
        hdr.ipv4.diffserv = dscp ++ hdr.ipv4.diffserv[1:0];
    }
    action unclassified() {
        class_meter.read(meta.class_color);
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action count_flow() {
        hash(meta.flow, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.protocol,
               hdr.udp.sport, hdr.udp.dport }, 32w1024);
        flow_pkts.read(meta.pkts, meta.flow);
        meta.pkts = meta.pkts + 1;
        flow_pkts.write(meta.flow, meta.pkts);
        flow_bytes.read(meta.bytes, meta.flow);
        flow_bytes.write(meta.flow, meta.bytes + sm.packet_length);
        hdr.ipv4.identification = meta.pkts[15:0];
        heavy_threshold.read(meta.threshold, 0);
    }

    table classify {
        key = { hdr.udp.dport : exact; }
        actions = { set_class; unclassified; }
        default_action = unclassified();
        counters = class_hits;
        meters = class_meter;
        size = 256;
    }
    table fwd {
        key = { sm.ingress_port : exact; }
        actions = { forward; drop_no_port; }
        default_action = drop_no_port();
        size = 512;
    }

    apply {
        port_rx.count((bit<32>)sm.ingress_port);
        if (!hdr.udp.isValid()) {
            drop_not_udp();
            return;
        }
        port_meter.execute_meter((bit<32>)sm.ingress_port, meta.port_color);
        if (meta.port_color == METER_RED) {
            drop_port_metered();
            return;
        }
        classify.apply();
        if (meta.class_color == METER_RED) {
            drop_class_metered();
            return;
        }
        count_flow();
        if (meta.threshold != 0 && meta.pkts > meta.threshold) {
            hdr.ipv4.diffserv = 0x04;
            heavy_marks.count(0);
        }
        fwd.apply();
    }
}

control StatefulEgress(inout headers_t hdr, inout metadata_t meta,
                       inout standard_metadata_t sm) {
    apply { }
}

control StatefulCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control StatefulDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

V1Switch(StatefulParser(), StatefulVerify(), StatefulIngress(), StatefulEgress(),
         StatefulCompute(), StatefulDeparser()) main;
