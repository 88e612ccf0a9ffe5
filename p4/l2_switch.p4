/*
 * l2_switch.p4 — an Ethernet learning switch (v1model), innet's P4 example of
 * MAC learning through digests.
 *
 *   ingress                                      egress
 *   smac[src, port] hit: known station           a flooded copy going back out
 *            miss: digest {src, port} → CPU      of its ingress port: dropped
 *   dmac[dst]    hit: forward(port)
 *                miss: flood (multicast group 1)
 *
 * The control plane (a learner reading the digests, or a commands file)
 * answers a digest with two entries: smac (src, port) → known and
 * dmac (src) → forward(port). A frame addressed to the port it came in on is
 * dropped (same_port); frames shorter than an Ethernet header are dropped as
 * runt (the parser's PacketTooShort). Each drop is counted in a counter
 * named for its reason (drops_runt, drops_same_port, drops_flood_prune):
 * `counter_read drops_runt 0`.
 *
 * l2_switch.commands builds the flood group over ports 0..3.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> FLOOD_GROUP = 1;

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
}

/* What a digest tells the control plane: a station and where it is. */
struct learn_t {
    bit<48> mac;
    bit<9>  port;
}

struct metadata_t {
}

parser L2Parser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control L2Verify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control L2Ingress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_runt;
    counter(1, CounterType.packets) drops_same_port;

    action drop_runt() {
        drops_runt.count(0);
        mark_to_drop(sm);
    }
    action drop_same_port() {
        drops_same_port.count(0);
        mark_to_drop(sm);
    }
    action learn() {
        digest<learn_t>(1, { hdr.ethernet.src, sm.ingress_port });
    }
    action known() {
    }
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    action flood() {
        sm.mcast_grp = FLOOD_GROUP;
    }

    table smac {
        key = {
            hdr.ethernet.src : exact;
            sm.ingress_port  : exact;
        }
        actions = { learn; known; }
        default_action = learn();
        size = 4096;
    }
    table dmac {
        key = { hdr.ethernet.dst : exact; }
        actions = { forward; flood; }
        default_action = flood();
        size = 4096;
    }

    apply {
        if (!hdr.ethernet.isValid()) {
            drop_runt();
            return;
        }
        smac.apply();
        dmac.apply();
        if (sm.mcast_grp == 0 && sm.egress_spec == sm.ingress_port)
            drop_same_port();
    }
}

control L2Egress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_flood_prune;

    apply {
        /* A flooded copy never goes back where the frame came from. */
        if (sm.instance_type == 5 && sm.egress_port == sm.ingress_port) {
            drops_flood_prune.count(0);
            mark_to_drop(sm);
        }
    }
}

control L2Compute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control L2Deparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(L2Parser(), L2Verify(), L2Ingress(), L2Egress(), L2Compute(), L2Deparser()) main;
