/*
 * paxos_acceptor.p4 — innet's Paxos acceptor (src/consensus/acceptor_dp.c)
 * written in P4 (v1model) against innet's own wire format
 * (docs/protocol.md §2.2), so that innet's learners, proposers and `innet kv`
 * work unchanged against a switch running it: the same messages, checks,
 * replies and drop reasons, on raw Ethernet frames.
 *
 *   frame    Ethernet | IPv4 (20 B) | UDP (dport 34952) | innet (8 B)
 *            | paxos (48 B) | value (vlen B: 8-byte words, then 4, 2, 1)
 *
 * Per packet, as acceptor_dp.c:
 *
 *   checks       not_paxos (not IPv4/UDP to 34952), too_short, bad_magic,
 *                bad_version, wrong_service, unexpected_type, bad_length,
 *                spoofed (config check_peer: the source is not peers[port])
 *   TRIM         lwm[l] = max(lwm[l], w); trim = max(trim, min(lwm)); reply
 *   below trim   NACK/trimmed
 *   joining      NACK/joining (joining[0] != 0, or instance < join_inst[0])
 *   RECOVER(i)   2B back with the slot's vote (status empty if none)
 *   1A / 2A      ballot 0: bad_ballot; outside the window: NACK/ring_full
 *                (a range 1A is promised anyway); ballot below the promise:
 *                NACK/ballot; else promise (1B with the vote) or vote (2B,
 *                multicast group 1: the learners)
 *
 * Differences from the C acceptor, each a P4 limit: the ring is RING = 4096
 * slots (a constant: the slot is the instance's low 12 bits); a value is at
 * most VALUE_MAX = 256 bytes (32 words of the `value` stack; a longer one is
 * dropped as bad_length — run `innet kv` with a small enough entry_max);
 * at most MAX_LEARNERS = 8 learners report watermarks.
 *
 * Replies go back out of the ingress port with Ethernet, IPv4 and UDP
 * addresses swapped; 2Bs to the learners take each port's addresses from
 * learner_port[egress_port] (set_learner: the switch port's MAC and IP, the
 * learner's MAC, IP and UDP port). Every frame sent has a fresh IPv4 header
 * checksum, TTL 64 and a UDP checksum of 0 (none, as IPv4 allows).
 *
 * The control plane (paxos_acceptor.commands) sets the acceptor's id, the
 * number of learners that report watermarks and check_peer with
 * `table_set_default config set_config ID N CHECK`, the learner group (group
 * 1) and learner_port's entries. Each drop is counted in a counter named
 * for its reason, as the C acceptor names them (drops_too_short,
 * drops_bad_magic, ...; drops_not_paxos for frames that are not Paxos at
 * all), in an action of the same name.
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> PAXOS_UDP = 34952;
const bit<8>  INNET_MAGIC = 0x1E;
const bit<8>  INNET_VERSION = 1;
const bit<8>  INNET_SVC_PAXOS = 2;
const bit<8>  F_RANGE = 0x01;

const bit<8> T_1A = 2;
const bit<8> T_1B = 3;
const bit<8> T_2A = 4;
const bit<8> T_2B = 5;
const bit<8> T_NACK = 6;
const bit<8> T_TRIM = 7;
const bit<8> T_RECOVER = 8;

const bit<8> ST_OK = 0;
const bit<8> ST_BALLOT = 1;
const bit<8> ST_RING_FULL = 2;
const bit<8> ST_TRIMMED = 3;
const bit<8> ST_EMPTY = 5;
const bit<8> ST_JOINING = 6;

const bit<64> RING = 4096;
const bit<32> VALUE_WORDS = 32;
const bit<16> VALUE_MAX = 256;
const bit<16> MAX_LEARNERS = 8;
const bit<16> L4_HDRS = 64;          /* UDP 8 + innet 8 + paxos 48 */
const bit<16> MCAST_LEARNERS = 1;


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

header innet_t {
    bit<8>  magic;
    bit<8>  version;
    bit<8>  service;
    bit<8>  flags;
    bit<16> dst_node;
    bit<16> src_node;
}

header paxos_t {
    bit<8>  msg_type;
    bit<8>  status;
    bit<16> node;
    bit<32> ballot;
    bit<32> vballot;
    bit<16> vlen;
    bit<16> reserved;
    bit<64> instance;
    bit<64> req_id;
    bit<64> trim;
    bit<64> hi;
}

header word_t  { bit<64> w; }
header tail4_t { bit<32> v; }
header tail2_t { bit<16> v; }
header tail1_t { bit<8>  v; }

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
    innet_t    innet;
    paxos_t    paxos;
    word_t[32] value;
    tail4_t    tail4;
    tail2_t    tail2;
    tail1_t    tail1;
}

struct metadata_t {
    bit<16> words_left;     /* parser: value words still to extract */
    bit<8>  vtail;          /* parser: vlen & 7 */
    bit<16> id;             /* config */
    bit<16> trim_learners;
    bit<1>  check_peer;
    bit<32> peer_ip;
    bit<64> trim;
    bit<64> inst;
    bit<32> ballot;
    bit<32> promised;
    bit<32> join_ballot;
    bit<32> rnd;
    bit<8>  joining;
    bit<64> join_inst;
    bit<64> slot_inst;
    bit<32> slot;
    bit<32> vbase;          /* slot * VALUE_WORDS: the slot's first word */
    bit<1>  in_window;
    bit<1>  fresh;
    bit<32> vrnd;           /* the vote a reply reports */
    bit<16> vlen;
    bit<64> req;
    bit<16> out_words;
    bit<64> tail;
    bit<32> t4;
    bit<16> t2;
    bit<8>  t1;
    bit<64> hi;
    bit<64> w;              /* scratch: a learner's watermark, max/min */
    bit<64> min;
    bit<1>  done;
}

parser AccParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
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
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dport) {
            PAXOS_UDP: parse_innet;
            default: accept;
        }
    }
    state parse_innet {
        pkt.extract(hdr.innet);
        pkt.extract(hdr.paxos);
        meta.words_left = hdr.paxos.vlen >> 3;
        meta.vtail = (bit<8>)(hdr.paxos.vlen & 7);
        transition select(meta.words_left) {
            0: parse_tail4;
            default: parse_word;
        }
    }
    state parse_word {
        pkt.extract(hdr.value.next);
        meta.words_left = meta.words_left - 1;
        transition select(meta.words_left) {
            0: parse_tail4;
            default: parse_word;
        }
    }
    state parse_tail4 {
        transition select(meta.vtail) {
            4 &&& 4: extract_tail4;
            default: parse_tail2;
        }
    }
    state extract_tail4 {
        pkt.extract(hdr.tail4);
        transition parse_tail2;
    }
    state parse_tail2 {
        transition select(meta.vtail) {
            2 &&& 2: extract_tail2;
            default: parse_tail1;
        }
    }
    state extract_tail2 {
        pkt.extract(hdr.tail2);
        transition parse_tail1;
    }
    state parse_tail1 {
        transition select(meta.vtail) {
            1 &&& 1: extract_tail1;
            default: accept;
        }
    }
    state extract_tail1 {
        pkt.extract(hdr.tail1);
        transition accept;
    }
}

control AccVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control AccIngress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    counter(1, CounterType.packets) drops_not_paxos;
    counter(1, CounterType.packets) drops_too_short;
    counter(1, CounterType.packets) drops_bad_magic;
    counter(1, CounterType.packets) drops_bad_version;
    counter(1, CounterType.packets) drops_wrong_service;
    counter(1, CounterType.packets) drops_bad_length;
    counter(1, CounterType.packets) drops_unexpected_type;
    counter(1, CounterType.packets) drops_spoofed;
    counter(1, CounterType.packets) drops_bad_learner;
    counter(1, CounterType.packets) drops_bad_ballot;

    /* Per slot (RING): the instance + 1 it holds (0: never used), the
     * promised ballot, the vote's ballot (0: none), length, request id,
     * value words and tail bytes (4 ++ 2 ++ 1 ++ pad). */
    register<bit<64>>(4096) slot_inst_r;
    register<bit<32>>(4096) rnd_r;
    register<bit<32>>(4096) vrnd_r;
    register<bit<16>>(4096) vlen_r;
    register<bit<64>>(4096) req_r;
    register<bit<64>>(131072) value_r;
    register<bit<64>>(4096) tail_r;
    /* The acceptor's: range promise, trim, 1 + the highest instance a 2A
     * named, the learners' watermarks, the join state (innet kv rejoin). */
    register<bit<32>>(1) promised_r;
    register<bit<64>>(1) trim_r;
    register<bit<64>>(1) hi_r;
    register<bit<64>>(8) lwm_r;
    register<bit<8>>(1) joining_r;
    register<bit<64>>(1) join_inst_r;
    register<bit<32>>(1) join_ballot_r;

    action drop_not_paxos()       { drops_not_paxos.count(0); mark_to_drop(sm); }
    action drop_too_short()       { drops_too_short.count(0); mark_to_drop(sm); }
    action drop_bad_magic()       { drops_bad_magic.count(0); mark_to_drop(sm); }
    action drop_bad_version()     { drops_bad_version.count(0); mark_to_drop(sm); }
    action drop_wrong_service()   { drops_wrong_service.count(0); mark_to_drop(sm); }
    action drop_bad_length()      { drops_bad_length.count(0); mark_to_drop(sm); }
    action drop_unexpected_type() { drops_unexpected_type.count(0); mark_to_drop(sm); }
    action drop_spoofed()         { drops_spoofed.count(0); mark_to_drop(sm); }
    action drop_bad_learner()     { drops_bad_learner.count(0); mark_to_drop(sm); }
    action drop_bad_ballot()      { drops_bad_ballot.count(0); mark_to_drop(sm); }

    action set_config(bit<16> id, bit<16> trim_learners, bit<1> check_peer) {
        meta.id = id;
        meta.trim_learners = trim_learners;
        meta.check_peer = check_peer;
    }
    table config {
        key = { }
        actions = { set_config; }
        default_action = set_config(0, 1, 0);
    }

    action set_peer(bit<32> ip) {
        meta.peer_ip = ip;
    }
    table peers {
        key = { sm.ingress_port : exact; }
        actions = { set_peer; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    /* Back out of the ingress port, addresses swapped. */
    action reflect() {
        bit<48> mac = hdr.ethernet.dst;
        hdr.ethernet.dst = hdr.ethernet.src;
        hdr.ethernet.src = mac;
        bit<32> ip = hdr.ipv4.dst;
        hdr.ipv4.dst = hdr.ipv4.src;
        hdr.ipv4.src = ip;
        bit<16> port = hdr.udp.dport;
        hdr.udp.dport = hdr.udp.sport;
        hdr.udp.sport = port;
        bit<16> node = hdr.innet.dst_node;
        hdr.innet.dst_node = hdr.innet.src_node;
        hdr.innet.src_node = node;
        hdr.ipv4.ttl = 64;
        hdr.udp.checksum = 0;
        sm.egress_spec = sm.ingress_port;
    }

    /* The lengths of a frame carrying paxos.vlen bytes of value. */
    action set_lengths() {
        hdr.udp.len = L4_HDRS + hdr.paxos.vlen;
        hdr.ipv4.total_len = 20 + L4_HDRS + hdr.paxos.vlen;
    }

    action clear_value() {
        hdr.value[0].setInvalid();
        hdr.value[1].setInvalid();
        hdr.value[2].setInvalid();
        hdr.value[3].setInvalid();
        hdr.value[4].setInvalid();
        hdr.value[5].setInvalid();
        hdr.value[6].setInvalid();
        hdr.value[7].setInvalid();
        hdr.value[8].setInvalid();
        hdr.value[9].setInvalid();
        hdr.value[10].setInvalid();
        hdr.value[11].setInvalid();
        hdr.value[12].setInvalid();
        hdr.value[13].setInvalid();
        hdr.value[14].setInvalid();
        hdr.value[15].setInvalid();
        hdr.value[16].setInvalid();
        hdr.value[17].setInvalid();
        hdr.value[18].setInvalid();
        hdr.value[19].setInvalid();
        hdr.value[20].setInvalid();
        hdr.value[21].setInvalid();
        hdr.value[22].setInvalid();
        hdr.value[23].setInvalid();
        hdr.value[24].setInvalid();
        hdr.value[25].setInvalid();
        hdr.value[26].setInvalid();
        hdr.value[27].setInvalid();
        hdr.value[28].setInvalid();
        hdr.value[29].setInvalid();
        hdr.value[30].setInvalid();
        hdr.value[31].setInvalid();
        hdr.tail4.setInvalid();
        hdr.tail2.setInvalid();
        hdr.tail1.setInvalid();
    }

    /* The vote's value into the slot's 32 words: every word, in one action
     * (words past vlen hold whatever the invalid headers held; they are
     * never read back: a reply carries vlen's words only). One action, not
     * 32 guarded writes: each `if` would be an action and a table of its
     * own, and the eBPF object allows 256 functions in all. */
    action store_value() {
        value_r.write(meta.vbase + 0, hdr.value[0].w);
        value_r.write(meta.vbase + 1, hdr.value[1].w);
        value_r.write(meta.vbase + 2, hdr.value[2].w);
        value_r.write(meta.vbase + 3, hdr.value[3].w);
        value_r.write(meta.vbase + 4, hdr.value[4].w);
        value_r.write(meta.vbase + 5, hdr.value[5].w);
        value_r.write(meta.vbase + 6, hdr.value[6].w);
        value_r.write(meta.vbase + 7, hdr.value[7].w);
        value_r.write(meta.vbase + 8, hdr.value[8].w);
        value_r.write(meta.vbase + 9, hdr.value[9].w);
        value_r.write(meta.vbase + 10, hdr.value[10].w);
        value_r.write(meta.vbase + 11, hdr.value[11].w);
        value_r.write(meta.vbase + 12, hdr.value[12].w);
        value_r.write(meta.vbase + 13, hdr.value[13].w);
        value_r.write(meta.vbase + 14, hdr.value[14].w);
        value_r.write(meta.vbase + 15, hdr.value[15].w);
        value_r.write(meta.vbase + 16, hdr.value[16].w);
        value_r.write(meta.vbase + 17, hdr.value[17].w);
        value_r.write(meta.vbase + 18, hdr.value[18].w);
        value_r.write(meta.vbase + 19, hdr.value[19].w);
        value_r.write(meta.vbase + 20, hdr.value[20].w);
        value_r.write(meta.vbase + 21, hdr.value[21].w);
        value_r.write(meta.vbase + 22, hdr.value[22].w);
        value_r.write(meta.vbase + 23, hdr.value[23].w);
        value_r.write(meta.vbase + 24, hdr.value[24].w);
        value_r.write(meta.vbase + 25, hdr.value[25].w);
        value_r.write(meta.vbase + 26, hdr.value[26].w);
        value_r.write(meta.vbase + 27, hdr.value[27].w);
        value_r.write(meta.vbase + 28, hdr.value[28].w);
        value_r.write(meta.vbase + 29, hdr.value[29].w);
        value_r.write(meta.vbase + 30, hdr.value[30].w);
        value_r.write(meta.vbase + 31, hdr.value[31].w);
    }

    /* The slot's 32 words into the value stack (the invalid ones are not
     * emitted); value_words made the first out_words of them valid. */
    action load_value() {
        value_r.read(hdr.value[0].w, meta.vbase + 0);
        value_r.read(hdr.value[1].w, meta.vbase + 1);
        value_r.read(hdr.value[2].w, meta.vbase + 2);
        value_r.read(hdr.value[3].w, meta.vbase + 3);
        value_r.read(hdr.value[4].w, meta.vbase + 4);
        value_r.read(hdr.value[5].w, meta.vbase + 5);
        value_r.read(hdr.value[6].w, meta.vbase + 6);
        value_r.read(hdr.value[7].w, meta.vbase + 7);
        value_r.read(hdr.value[8].w, meta.vbase + 8);
        value_r.read(hdr.value[9].w, meta.vbase + 9);
        value_r.read(hdr.value[10].w, meta.vbase + 10);
        value_r.read(hdr.value[11].w, meta.vbase + 11);
        value_r.read(hdr.value[12].w, meta.vbase + 12);
        value_r.read(hdr.value[13].w, meta.vbase + 13);
        value_r.read(hdr.value[14].w, meta.vbase + 14);
        value_r.read(hdr.value[15].w, meta.vbase + 15);
        value_r.read(hdr.value[16].w, meta.vbase + 16);
        value_r.read(hdr.value[17].w, meta.vbase + 17);
        value_r.read(hdr.value[18].w, meta.vbase + 18);
        value_r.read(hdr.value[19].w, meta.vbase + 19);
        value_r.read(hdr.value[20].w, meta.vbase + 20);
        value_r.read(hdr.value[21].w, meta.vbase + 21);
        value_r.read(hdr.value[22].w, meta.vbase + 22);
        value_r.read(hdr.value[23].w, meta.vbase + 23);
        value_r.read(hdr.value[24].w, meta.vbase + 24);
        value_r.read(hdr.value[25].w, meta.vbase + 25);
        value_r.read(hdr.value[26].w, meta.vbase + 26);
        value_r.read(hdr.value[27].w, meta.vbase + 27);
        value_r.read(hdr.value[28].w, meta.vbase + 28);
        value_r.read(hdr.value[29].w, meta.vbase + 29);
        value_r.read(hdr.value[30].w, meta.vbase + 30);
        value_r.read(hdr.value[31].w, meta.vbase + 31);
    }

    action words_1() { hdr.value[0].setValid(); }
    action words_2() { hdr.value[0].setValid(); hdr.value[1].setValid(); }
    action words_3() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); }
    action words_4() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); }
    action words_5() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); }
    action words_6() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); }
    action words_7() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); }
    action words_8() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); }
    action words_9() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); }
    action words_10() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); }
    action words_11() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); }
    action words_12() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); }
    action words_13() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); }
    action words_14() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); }
    action words_15() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); }
    action words_16() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); }
    action words_17() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); }
    action words_18() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); }
    action words_19() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); }
    action words_20() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); }
    action words_21() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); }
    action words_22() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); }
    action words_23() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); }
    action words_24() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); }
    action words_25() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); }
    action words_26() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); }
    action words_27() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); }
    action words_28() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); hdr.value[27].setValid(); }
    action words_29() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); hdr.value[27].setValid(); hdr.value[28].setValid(); }
    action words_30() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); hdr.value[27].setValid(); hdr.value[28].setValid(); hdr.value[29].setValid(); }
    action words_31() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); hdr.value[27].setValid(); hdr.value[28].setValid(); hdr.value[29].setValid(); hdr.value[30].setValid(); }
    action words_32() { hdr.value[0].setValid(); hdr.value[1].setValid(); hdr.value[2].setValid(); hdr.value[3].setValid(); hdr.value[4].setValid(); hdr.value[5].setValid(); hdr.value[6].setValid(); hdr.value[7].setValid(); hdr.value[8].setValid(); hdr.value[9].setValid(); hdr.value[10].setValid(); hdr.value[11].setValid(); hdr.value[12].setValid(); hdr.value[13].setValid(); hdr.value[14].setValid(); hdr.value[15].setValid(); hdr.value[16].setValid(); hdr.value[17].setValid(); hdr.value[18].setValid(); hdr.value[19].setValid(); hdr.value[20].setValid(); hdr.value[21].setValid(); hdr.value[22].setValid(); hdr.value[23].setValid(); hdr.value[24].setValid(); hdr.value[25].setValid(); hdr.value[26].setValid(); hdr.value[27].setValid(); hdr.value[28].setValid(); hdr.value[29].setValid(); hdr.value[30].setValid(); hdr.value[31].setValid(); }

    /* A reply of out_words value words: those words of the stack valid. */
    table value_words {
        key = { meta.out_words : exact; }
        actions = { words_1; words_2; words_3; words_4; words_5; words_6; words_7; words_8; words_9; words_10; words_11; words_12; words_13; words_14; words_15; words_16; words_17; words_18; words_19; words_20; words_21; words_22; words_23; words_24; words_25; words_26; words_27; words_28; words_29; words_30; words_31; words_32; NoAction; }
        const entries = {
            1 : words_1();
            2 : words_2();
            3 : words_3();
            4 : words_4();
            5 : words_5();
            6 : words_6();
            7 : words_7();
            8 : words_8();
            9 : words_9();
            10 : words_10();
            11 : words_11();
            12 : words_12();
            13 : words_13();
            14 : words_14();
            15 : words_15();
            16 : words_16();
            17 : words_17();
            18 : words_18();
            19 : words_19();
            20 : words_20();
            21 : words_21();
            22 : words_22();
            23 : words_23();
            24 : words_24();
            25 : words_25();
            26 : words_26();
            27 : words_27();
            28 : words_28();
            29 : words_29();
            30 : words_30();
            31 : words_31();
            32 : words_32();
        }
        default_action = NoAction();
        size = 64;
    }

    /* The common fields of a reply back to the sender (1B, 2B, TRIM). */
    action reply(bit<8> msg_type) {
        hdr.paxos.msg_type = msg_type;
        hdr.paxos.node = meta.id;
        hdr.paxos.trim = meta.trim;
        hdr.paxos.hi = meta.hi;
        reflect();
    }

    /* Turn the packet into a NACK back to its sender. */
    action nack(bit<8> status, bit<32> ballot) {
        clear_value();
        hdr.paxos.msg_type = T_NACK;
        hdr.paxos.status = status;
        hdr.paxos.node = meta.id;
        hdr.paxos.ballot = ballot;
        hdr.paxos.vballot = 0;
        hdr.paxos.vlen = 0;
        hdr.paxos.trim = meta.trim;
        hdr.paxos.hi = meta.hi;
        set_lengths();
        reflect();
    }

    apply {
        if (!hdr.udp.isValid() || hdr.udp.dport != PAXOS_UDP) {
            drop_not_paxos();
            return;
        }
        if (!hdr.paxos.isValid()) {
            drop_too_short();
            return;
        }
        if (hdr.innet.magic != INNET_MAGIC) {
            drop_bad_magic();
            return;
        }
        if (hdr.innet.version != INNET_VERSION) {
            drop_bad_version();
            return;
        }
        if (hdr.innet.service != INNET_SVC_PAXOS) {
            drop_wrong_service();
            return;
        }
        if (hdr.paxos.msg_type != T_2A && hdr.paxos.msg_type != T_1A &&
            hdr.paxos.msg_type != T_RECOVER && hdr.paxos.msg_type != T_TRIM) {
            drop_unexpected_type();
            return;
        }
        if (sm.parser_error != error.NoError || hdr.paxos.vlen > VALUE_MAX ||
            hdr.udp.len != L4_HDRS + hdr.paxos.vlen ||
            hdr.ipv4.total_len != 20 + hdr.udp.len ||
            (hdr.paxos.msg_type != T_2A && hdr.paxos.vlen != 0)) {
            drop_bad_length();
            return;
        }
        config.apply();
        if (meta.check_peer == 1) {
            meta.peer_ip = 0;
            peers.apply();
            if (hdr.ipv4.src != meta.peer_ip) {
                drop_spoofed();
                return;
            }
        }
        trim_r.read(meta.trim, 0);
        hi_r.read(meta.hi, 0);

        /* TRIM(l, w) from learner l: its watermark, and the trim back. */
        if (hdr.paxos.msg_type == T_TRIM) {
            if (hdr.paxos.node >= meta.trim_learners || hdr.paxos.node >= MAX_LEARNERS) {
                drop_bad_learner();
                return;
            }
            lwm_r.read(meta.w, (bit<32>)hdr.paxos.node);
            if (hdr.paxos.trim > meta.w)
                lwm_r.write((bit<32>)hdr.paxos.node, hdr.paxos.trim);
            meta.min = 0xFFFFFFFFFFFFFFFF;
            if (meta.trim_learners > 0) { lwm_r.read(meta.w, 0); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 1) { lwm_r.read(meta.w, 1); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 2) { lwm_r.read(meta.w, 2); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 3) { lwm_r.read(meta.w, 3); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 4) { lwm_r.read(meta.w, 4); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 5) { lwm_r.read(meta.w, 5); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 6) { lwm_r.read(meta.w, 6); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.trim_learners > 7) { lwm_r.read(meta.w, 7); if (meta.w < meta.min) meta.min = meta.w; }
            if (meta.min > meta.trim) {
                trim_r.write(0, meta.min);
                meta.trim = meta.min;
            }
            hdr.paxos.status = ST_OK;
            reply(T_TRIM);
            return;
        }

        meta.inst = hdr.paxos.instance;
        meta.ballot = hdr.paxos.ballot;
        if (meta.inst < meta.trim) {
            nack(ST_TRIMMED, 0);
            return;
        }
        joining_r.read(meta.joining, 0);
        join_inst_r.read(meta.join_inst, 0);
        if (meta.joining != 0 || meta.inst < meta.join_inst) {
            nack(ST_JOINING, 0);
            return;
        }
        meta.in_window = 0;
        if (meta.inst - meta.trim < RING)
            meta.in_window = 1;
        meta.slot = (bit<32>)meta.inst[11:0];
        meta.vbase = meta.slot << 5;
        meta.fresh = 1;
        if (meta.in_window == 1) {
            slot_inst_r.read(meta.slot_inst, meta.slot);
            if (meta.slot_inst == meta.inst + 1)
                meta.fresh = 0;
        }
        meta.vrnd = 0;
        meta.vlen = 0;

        if (hdr.paxos.msg_type == T_RECOVER) {
            /* The slot's vote, 2B back (the ballot is the vote's). */
            if (meta.fresh == 0 && meta.in_window == 1)
                vrnd_r.read(meta.vrnd, meta.slot);
        } else {
            if (meta.ballot == 0) {
                drop_bad_ballot();
                return;
            }
            promised_r.read(meta.promised, 0);
            join_ballot_r.read(meta.join_ballot, 0);
            meta.rnd = meta.promised;   /* the register's own value */
            if (meta.join_ballot > meta.promised)
                meta.promised = meta.join_ballot;
            if (meta.in_window == 0) {
                /* No slot for it yet. A range promise needs none: nothing
                 * was voted there (the 1B says empty). Everything else
                 * waits for trim; a 2A leaves its instance in hi. */
                if (hdr.paxos.msg_type == T_1A && (hdr.innet.flags & F_RANGE) != 0 &&
                    meta.ballot >= meta.promised) {
                    if (meta.ballot > meta.rnd)
                        promised_r.write(0, meta.ballot);
                } else {
                    if (hdr.paxos.msg_type == T_2A && meta.inst + 1 > meta.hi) {
                        hi_r.write(0, meta.inst + 1);
                        meta.hi = meta.inst + 1;
                    }
                    nack(ST_RING_FULL, 0);
                    return;
                }
            } else {
                if (meta.fresh == 0) {
                    rnd_r.read(meta.rnd, meta.slot);
                    if (meta.rnd > meta.promised)
                        meta.promised = meta.rnd;
                }
                if (meta.ballot < meta.promised) {
                    nack(ST_BALLOT, meta.promised);
                    return;
                }
                if (hdr.paxos.msg_type == T_1A && meta.fresh == 0)
                    vrnd_r.read(meta.vrnd, meta.slot);
                if (meta.fresh == 1) {
                    /* The previous occupant (inst - RING) is below trim. */
                    slot_inst_r.write(meta.slot, meta.inst + 1);
                    vrnd_r.write(meta.slot, 0);
                    vlen_r.write(meta.slot, 0);
                    req_r.write(meta.slot, 0);
                }
                rnd_r.write(meta.slot, meta.ballot);
                if (hdr.paxos.msg_type == T_1A) {
                    if ((hdr.innet.flags & F_RANGE) != 0) {
                        promised_r.read(meta.rnd, 0);
                        if (meta.ballot > meta.rnd)
                            promised_r.write(0, meta.ballot);
                    }
                } else {
                    /* 2A: vote, and the 2B to the learners. */
                    vrnd_r.write(meta.slot, meta.ballot);
                    vlen_r.write(meta.slot, hdr.paxos.vlen);
                    req_r.write(meta.slot, hdr.paxos.req_id);
                    store_value();
                    meta.t4 = 0;
                    meta.t2 = 0;
                    meta.t1 = 0;
                    if (hdr.tail4.isValid())
                        meta.t4 = hdr.tail4.v;
                    if (hdr.tail2.isValid())
                        meta.t2 = hdr.tail2.v;
                    if (hdr.tail1.isValid())
                        meta.t1 = hdr.tail1.v;
                    tail_r.write(meta.slot, meta.t4 ++ meta.t2 ++ meta.t1 ++ 8w0);
                    if (meta.inst + 1 > meta.hi) {
                        hi_r.write(0, meta.inst + 1);
                        meta.hi = meta.inst + 1;
                    }
                    hdr.paxos.msg_type = T_2B;
                    hdr.paxos.status = ST_OK;
                    hdr.paxos.node = meta.id;
                    hdr.paxos.vballot = meta.ballot;
                    hdr.paxos.trim = meta.trim;
                    hdr.paxos.hi = meta.hi;
                    hdr.innet.flags = 0;
                    hdr.udp.checksum = 0;
                    sm.mcast_grp = MCAST_LEARNERS;
                    return;
                }
            }
        }

        /* A 1B or the 2B answering RECOVER: the vote (meta.vrnd; 0 none)
         * and its value, the packet grown to carry it. */
        if (meta.vrnd != 0) {
            vlen_r.read(meta.vlen, meta.slot);
            if (meta.vlen > VALUE_MAX)
                meta.vlen = 0;   /* cannot happen: written only from checked packets */
            req_r.read(hdr.paxos.req_id, meta.slot);
            hdr.paxos.status = ST_OK;
        } else {
            hdr.paxos.req_id = 0;
            hdr.paxos.status = ST_EMPTY;
        }
        hdr.paxos.vballot = meta.vrnd;
        hdr.paxos.vlen = meta.vlen;
        if (meta.vlen > 0) {
            meta.out_words = meta.vlen >> 3;
            value_words.apply();   /* the first out_words words valid */
            load_value();
            tail_r.read(meta.tail, meta.slot);
            if ((meta.vlen & 4) != 0) {
                hdr.tail4.setValid();
                hdr.tail4.v = meta.tail[63:32];
            }
            if ((meta.vlen & 2) != 0) {
                hdr.tail2.setValid();
                hdr.tail2.v = meta.tail[31:16];
            }
            if ((meta.vlen & 1) != 0) {
                hdr.tail1.setValid();
                hdr.tail1.v = meta.tail[15:8];
            }
        }
        set_lengths();
        if (hdr.paxos.msg_type == T_RECOVER) {
            hdr.paxos.ballot = meta.vrnd;
            reply(T_2B);
        } else {
            reply(T_1B);
        }
    }
}

control AccEgress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t sm) {
    counter(1, CounterType.packets) no_learner;

    /* A 2B for the learner behind this port: from the port's addresses to
     * the learner's. */
    action set_learner(bit<48> port_mac, bit<32> port_ip, bit<48> mac, bit<32> ip,
                       bit<16> udp_port) {
        hdr.ethernet.src = port_mac;
        hdr.ethernet.dst = mac;
        hdr.ipv4.src = port_ip;
        hdr.ipv4.dst = ip;
        hdr.ipv4.ttl = 64;
        hdr.udp.sport = PAXOS_UDP;
        hdr.udp.dport = udp_port;
    }
    action drop_no_learner() {
        no_learner.count(0);
        mark_to_drop(sm);
    }
    table learner_port {
        key = { sm.egress_port : exact; }
        actions = { set_learner; drop_no_learner; }
        default_action = drop_no_learner();
        size = 512;
    }

    apply {
        if (sm.instance_type == 5)
            learner_port.apply();
    }
}

control AccCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.total_len, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control AccDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.innet);
        pkt.emit(hdr.paxos);
        pkt.emit(hdr.value);
        pkt.emit(hdr.tail4);
        pkt.emit(hdr.tail2);
        pkt.emit(hdr.tail1);
    }
}

V1Switch(AccParser(), AccVerify(), AccIngress(), AccEgress(), AccCompute(),
         AccDeparser()) main;
