/*
 * recirc.p4 — resubmission and recirculation (v1model), with the metadata
 * each preserves.
 *
 * A frame carries a loop header after Ethernet (ether_type 0x88B6):
 *
 *   0        1        2        3        4        5        6
 *   +--------+--------+--------+--------+--------+--------+
 *   | passes | done   | resub  | flags  |   ether_type    |
 *   +--------+--------+--------+--------+--------+--------+
 *
 *   ingress  first pass (instance_type 0) with flags bit 0: resubmit once,
 *            preserving field list 1 (meta.resubmits + 1); the resubmitted
 *            pass writes meta.resubmits into `resub`
 *            fwd[ingress_port] forward(port)
 *   egress   passes > 0: passes − 1, done + 1, recirculate preserving field
 *            list 0 (meta.loops, which counts the passes in metadata too);
 *            the last pass leaves with `flags` bit 7 set if meta.loops
 *            agrees with `done`
 *            passes > 15 on arrival: dropped (too_many_passes) — innet
 *            recirculates a packet at most 16 times (INNET_MAX_RECIRC, a
 *            resubmit included; BMv2 has no limit), so a program that must
 *            give the same answer on both keeps its passes under it
 *   frames without the loop header are forwarded unchanged.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_LOOP = 0x88B6;
const bit<8>  PASSES_MAX = 15;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

header loop_t {
    bit<8>  passes;
    bit<8>  done;
    bit<8>  resub;
    bit<8>  flags;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
    loop_t     loop;
}

struct metadata_t {
    @field_list(0)
    bit<8> loops;
    @field_list(1)
    bit<8> resubmits;
}

parser RecircParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_LOOP: parse_loop;
            default: accept;
        }
    }
    state parse_loop {
        pkt.extract(hdr.loop);
        transition accept;
    }
}

control RecircVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RecircIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_no_port;
    counter(1, CounterType.packets) drops_too_many_passes;
    counter(8, CounterType.packets) passes_seen;

    action drop_no_port() {
        drops_no_port.count(0);
        mark_to_drop(sm);
    }
    action drop_too_many_passes() {
        drops_too_many_passes.count(0);
        mark_to_drop(sm);
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action resubmit_once() {
        meta.resubmits = meta.resubmits + 1;
        resubmit_preserving_field_list(1);
    }

    table fwd {
        key = { sm.ingress_port : exact; }
        actions = { forward; drop_no_port; }
        default_action = drop_no_port();
        size = 512;
    }

    apply {
        passes_seen.count(sm.instance_type);
        fwd.apply();
        if (hdr.loop.isValid()) {
            if (sm.instance_type == 0 && hdr.loop.passes > PASSES_MAX) {
                drop_too_many_passes();
            } else if (sm.instance_type == 0 && hdr.loop.flags[0:0] == 1) {
                resubmit_once();
            } else if (sm.instance_type == 6) {
                hdr.loop.resub = meta.resubmits;
            }
        }
    }
}

control RecircEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
    apply {
        if (hdr.loop.isValid()) {
            if (hdr.loop.passes > 0) {
                hdr.loop.passes = hdr.loop.passes - 1;
                hdr.loop.done = hdr.loop.done + 1;
                meta.loops = meta.loops + 1;
                recirculate_preserving_field_list(0);
            } else if (meta.loops == hdr.loop.done) {
                hdr.loop.flags = hdr.loop.flags | 0x80;
            }
        }
    }
}

control RecircCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control RecircDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.loop);
    }
}

V1Switch(RecircParser(), RecircVerify(), RecircIngress(), RecircEgress(),
         RecircCompute(), RecircDeparser()) main;
