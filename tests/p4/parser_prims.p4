/*
 * parser_prims.p4 — primitive ops (setValid) in two parser states, for
 * tests/integration/p4_run.sh: innet's generated C once gave every parser
 * primitive the same label in one function, so two states that each had
 * one failed to compile (p4c's checksum-l4 and issue1879 did). The parser
 * makes two 1-byte headers valid (0xa1, 0xb2) that the deparser emits
 * after the MAC header. Everything
 * leaves by port 1. Its JSON (parser_prims.json, committed):
 *
 *   p4c-bm2-ss -I $P4C/p4include -o tests/p4/parser_prims.json tests/p4/parser_prims.p4
 */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}
header tag_t { bit<8> v; }
struct headers_t { ethernet_t eth; tag_t t1; tag_t t2; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        h.t1.setValid();
        h.t1.v = 0xa1;
        transition second;
    }
    state second {
        h.t2.setValid();
        h.t2.v = 0xb2;
        transition accept;
    }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1; }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); pkt.emit(h.t1); pkt.emit(h.t2); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
