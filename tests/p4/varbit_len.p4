/*
 * varbit_len.p4 — parser errors of a variable-length extract, for
 * tests/integration/p4_run.sh. The EtherType's low byte is the length in bits
 * of a varbit<24> after the MAC header; the parser error lands in the
 * destination MAC's last byte: 0 none, 1 PacketTooShort, 4 HeaderTooShort,
 * 6 ParserInvalidArgument (a length not in whole bytes: innet once gave
 * NoError), 9 another. BMv2 checks in that order: whole bytes, then the
 * frame's length, then the field's. Everything leaves by port 1. Its JSON
 * (varbit_len.json, committed):
 *
 *   p4c-bm2-ss -I $P4C/p4include -o tests/p4/varbit_len.json tests/p4/varbit_len.p4
 */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}
header opt_t { varbit<24> v; }
struct headers_t { ethernet_t eth; opt_t opt; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        pkt.extract(h.opt, (bit<32>)h.eth.type[7:0]);
        transition accept;
    }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        bit<8> e = 9;
        if (sm.parser_error == error.NoError) { e = 0; }
        else if (sm.parser_error == error.PacketTooShort) { e = 1; }
        else if (sm.parser_error == error.HeaderTooShort) { e = 4; }
        else if (sm.parser_error == error.ParserInvalidArgument) { e = 6; }
        h.eth.dst[7:0] = e;
        sm.egress_spec = 1;
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.opt); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
