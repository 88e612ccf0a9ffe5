/*
 * wide_reg.p4 — a register of 256-bit elements (wider than innet's 128-bit
 * arithmetic, as P4xos's 256-bit values are), for tests/integration/p4_run.sh.
 * The frame is one header: op (8 bits), val (256 bits), idx (32 bits).
 * op 1 writes val to wide[idx], op 2 reads wide[idx] into val, op 3 writes
 * the constant 5; everything leaves by port 1. The index is taken modulo 16,
 * the array's size (BMv2 does not check a register index: p4_diff's random
 * frames made simple_switch crash). Its JSON (wide_reg.json, committed):
 *
 *   p4c-bm2-ss -I $P4C/p4include -o tests/p4/wide_reg.json tests/p4/wide_reg.p4
 */
#include <core.p4>
#include <v1model.p4>

header w_t {
    bit<8>   op;
    bit<256> val;
    bit<32>  idx;
}
struct headers_t { w_t w; }
struct meta_t { }

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.w); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    register<bit<256>>(16) wide;
    apply {
        sm.egress_spec = 1;
        bit<32> i = h.w.idx & 15;
        if (h.w.op == 1) { wide.write(i, h.w.val); }
        else if (h.w.op == 2) { wide.read(h.w.val, i); }
        else if (h.w.op == 3) { wide.write(i, 5); }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.w); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
