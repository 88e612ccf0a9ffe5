/*
 * edge.p4 — edge cases of the parser and deparser for tests/integration/p4_run.sh,
 * where innet and BMv2 once differed:
 *   - standard_metadata.parser_error on each outcome (NoError, PacketTooShort,
 *     a verify's own error), seen in the frame's destination MAC;
 *   - a deparser that emits less than the parser took (EtherType 0x88b6: the
 *     MAC header and an 8-byte header go, the payload leaves alone), and
 *     truncate (0x88b7: to the source MAC's last byte): a frame left shorter
 *     than a MAC header is recorded by `innet p4 run` (a test port, as
 *     BMv2's packet-in socket) and dropped by a real port (short_frame);
 *   - const entries of a range table (0x88b8: the source MAC's range picks
 *     the destination MAC; overlapping ranges, the first listed wins);
 *   - two header assignments in one parser state (0x88b9: the probe header
 *     copied twice; each is a primitive of the parser's code, and two once
 *     did not compile);
 *   - a varbit extract (0x88ba: its length in bits the source MAC's last
 *     byte): whole bytes, ParserInvalidArgument (not a multiple of 8) and
 *     HeaderTooShort (beyond the field), seen in the destination MAC.
 * Everything leaves by port 1. Its JSON (edge.json, committed) is what
 * p4c-bm2-ss compiles it to:
 *
 *   p4c-bm2-ss -I $P4C/p4include -o tests/p4/edge.json tests/p4/edge.p4
 */
#include <core.p4>
#include <v1model.p4>

error { Odd }

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

header probe_t {
    bit<32> f;
}

header vl_t {
    varbit<16> v;
}

header cut_t {
    bit<64> x;
}

struct headers_t {
    ethernet_t eth;
    probe_t    probe;
    probe_t    copy1;
    probe_t    copy2;
    vl_t       vl;
    cut_t      cut;
}

struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) {
            0x88b5: probe;
            0x88b6: cut;
            0x88b9: dup;
            0x88ba: varlen;
            default: accept;
        }
    }
    state probe {
        pkt.extract(h.probe);
        verify(h.probe.f < 10, error.Odd);
        transition accept;
    }
    state dup {
        pkt.extract(h.probe);
        h.copy1 = h.probe;
        h.copy2 = h.probe;
        transition accept;
    }
    state varlen {
        pkt.extract(h.vl, (bit<32>)h.eth.src[7:0]);
        transition accept;
    }
    state cut {
        pkt.extract(h.cut);
        transition accept;
    }
}

control VC(inout headers_t h, inout meta_t m) {
    apply { }
}

control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action mark(bit<48> v) { h.eth.dst = v; }
    table ranges {
        key = { h.eth.src: range; }
        actions = { mark; }
        const entries = {
            1 .. 8 : mark(0x21);
            6 .. 12 : mark(0x22);
            15 : mark(0x24);
        }
        const default_action = mark(0x2f);
    }
    apply {
        sm.egress_spec = 1;
        if (h.eth.type == 0x88b5 || h.eth.type == 0x88ba) {
            if (sm.parser_error == error.NoError) {
                h.eth.dst = 0;
            } else if (sm.parser_error == error.PacketTooShort) {
                h.eth.dst = 1;
            } else if (sm.parser_error == error.Odd) {
                h.eth.dst = 2;
            } else if (sm.parser_error == error.HeaderTooShort) {
                h.eth.dst = 4;
            } else if (sm.parser_error == error.ParserInvalidArgument) {
                h.eth.dst = 6;
            } else {
                h.eth.dst = 3;
            }
        } else if (h.cut.isValid()) {
            h.eth.setInvalid();
            h.cut.setInvalid();
        } else if (h.eth.type == 0x88b7) {
            truncate((bit<32>)h.eth.src[7:0]);
        } else if (h.eth.type == 0x88b8) {
            ranges.apply();
        }
    }
}

control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t h, inout meta_t m) {
    apply { }
}

control D(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.eth);
        pkt.emit(h.probe);
        pkt.emit(h.copy1);
        pkt.emit(h.copy2);
        pkt.emit(h.vl);
        pkt.emit(h.cut);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
