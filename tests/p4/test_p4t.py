#!/usr/bin/python3
"""test_p4t.py — unit tests of tools/p4/p4t (the STF language, its
translation into simple_switch_CLI commands, frame matching, the
differential tester's frame generator and comparison), table-driven, with
no p4c, BMv2 or innet needed. tests/integration/p4_tools.sh runs them.
"""
import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "p4"))
from p4t import corpus, diff, stf  # noqa: E402

# A BMv2 JSON program, trimmed to what the translator reads.
PROG = {
    "header_types": [{"name": "eth_t", "id": 1, "fields": [["dst", 48, False], ["src", 48, False],
                                                           ["type", 16, False]]},
                     {"name": "h_t", "id": 2, "fields": [["f", 8, False], ["g", 32, False]]}],
    "headers": [{"name": "ethernet", "id": 1, "header_type": "eth_t", "metadata": False},
                {"name": "h", "id": 2, "header_type": "h_t", "metadata": False},
                {"name": "stk[0]", "id": 3, "header_type": "h_t", "metadata": False}],
    "header_stacks": [{"name": "stk", "id": 0, "header_type": "h_t", "size": 1, "header_ids": [3]}],
    "actions": [{"name": "ingress.fwd", "id": 0, "runtime_data": [{"name": "port", "bitwidth": 9}]},
                {"name": "ingress.drop", "id": 1, "runtime_data": []},
                {"name": "egress.fwd", "id": 2, "runtime_data": [{"name": "port", "bitwidth": 9}]}],
    "parsers": [{"name": "parser", "init_state": "start", "parse_states": [
        {"name": "start", "parser_ops": [{"op": "extract", "parameters": [{"type": "regular",
                                                                           "value": "ethernet"}]}],
         "transition_key": [{"type": "field", "value": ["ethernet", "type"]}],
         "transitions": [{"type": "hexstr", "value": "0x1234", "mask": None, "next_state": "h"},
                         {"type": "default", "value": None, "mask": None, "next_state": None}]},
        {"name": "h", "parser_ops": [{"op": "extract", "parameters": [{"type": "regular",
                                                                       "value": "h"}]}],
         "transition_key": [], "transitions": [{"type": "default", "value": None, "mask": None,
                                                 "next_state": None}]}]}],
    "pipelines": [
        {"name": "ingress", "tables": [
            {"name": "ingress.t_exact", "type": "simple", "match_type": "exact",
             "key": [{"match_type": "exact", "name": "hdr.ethernet.dst", "target": ["ethernet", "dst"]}],
             "action_ids": [0, 1], "actions": ["ingress.fwd", "ingress.drop"]},
            {"name": "ingress.t_tern", "type": "simple", "match_type": "ternary",
             "key": [{"match_type": "ternary", "name": "hdr.h.f", "target": ["h", "f"]},
                     {"match_type": "exact", "name": "hdr.h.g", "target": ["h", "g"]}],
             "action_ids": [0, 1], "actions": ["ingress.fwd", "ingress.drop"]},
            {"name": "ingress.t_lpm", "type": "simple", "match_type": "lpm",
             "key": [{"match_type": "lpm", "name": "hdr.h.g", "target": ["h", "g"]},
                     {"match_type": "valid", "name": "hdr.stk[0].$valid$",
                      "target": ["stk[0]", "$valid$"]}],
             "action_ids": [0], "actions": ["ingress.fwd"]}]},
        {"name": "egress", "tables": [
            {"name": "egress.out_exact", "type": "simple", "match_type": "exact",
             "key": [{"match_type": "exact", "name": "hdr.h.f", "target": ["h", "f"]}],
             "action_ids": [2], "actions": ["egress.fwd"]}]}],
}


class Parse(unittest.TestCase):
    def test_statements(self):
        s = stf.parse("""
# a comment
packet 0 00 11 2233   # trailing comment
expect 1 0011** 22 $
expect 2
add t_exact dst:0x000000000001 fwd(port:3)
add t_tern 7 f:0x*5 g:10 drop()
setdefault t_exact drop()
wait
register_read r 0
MIRRORING_ADD 5 3
""")
        self.assertEqual(s[0], ("packet", 0, "00112233"))
        self.assertEqual(s[1], ("expect", 1, "0011**22", True))
        self.assertEqual(s[2], ("expect", 2, None, False))
        self.assertEqual(s[3], ("add", "t_exact", None, [("dst", "0x000000000001")],
                                ("fwd", [("port", "3")])))
        self.assertEqual(s[4], ("add", "t_tern", 7, [("f", "0x*5"), ("g", "10")], ("drop", [])))
        self.assertEqual(s[5], ("setdefault", "t_exact", ("drop", [])))
        self.assertEqual(s[6], ("wait",))
        self.assertEqual(s[7], ("cli", "register_read r 0"))
        self.assertEqual(s[8], ("cli", "MIRRORING_ADD 5 3"))

    def test_errors(self):
        for bad in ("packet x 00", "packet 0 0g", "packet 0 001", "expect 0 00$11",
                    "add t", "add t k:1 a(", "add t k:1 a(x:)", "frobnicate 1", "setdefault t",
                    "add t k:1 a() junk"):
            with self.assertRaises(stf.StfError, msg=bad):
                stf.parse(bad)

    def test_whole_corpus_grammar(self):
        # every STF file the tree has must parse (when a p4c tree is given)
        tree = os.environ.get("P4C_SRC")
        if not tree:
            self.skipTest("P4C_SRC not set")
        for t in corpus.find_tests(tree):
            with open(t) as f:
                stf.parse(f.read())


class Translate(unittest.TestCase):
    def setUp(self):
        self.p = stf.Program(PROG)

    def add(self, line):
        s = stf.parse(line)[0]
        return stf.table_add(self.p, s[1], s[2], s[3], s[4])

    def test_add(self):
        cases = [
            ("add t_exact dst:0x000000000001 fwd(port:3)",
             "table_add ingress.t_exact ingress.fwd 0x000000000001 => 3"),
            ("add ingress.t_exact hdr.ethernet.dst:1 ingress.drop()",
             "table_add ingress.t_exact ingress.drop 1 =>"),
            ("add t_tern 7 f:0x*5 g:10 drop()",
             "table_add ingress.t_tern ingress.drop 0x05&&&0x0f 10 => 9993"),
            ("add t_tern f:0b1*0 g:1 fwd(port:1)",
             "table_add ingress.t_tern ingress.fwd 0b100&&&0b101 1 => 1 10000"),
            ("add t_tern 1 f:9 g:1 fwd(port:1)",
             "table_add ingress.t_tern ingress.fwd 9&&&0xff 1 => 1 9999"),
            ("add t_lpm g:0x0a01**** stk$0.valid:1 fwd(port:2)",
             "table_add ingress.t_lpm ingress.fwd 0x0a010000/16 1 => 2"),
            ("add t_lpm g:10 fwd(port:2)",
             "table_add ingress.t_lpm ingress.fwd 10/32 0 => 2"),
            ("add t_lpm g:0x0a000000/8 fwd(port:2)",
             "table_add ingress.t_lpm ingress.fwd 0x0a000000/8 0 => 2"),
        ]
        for line, want in cases:
            self.assertEqual(self.add(line), want, line)

    def test_add_errors(self):
        for line in ("add t_nosuch dst:1 fwd(port:1)",      # no table
                     "add t_exact nosuch:1 fwd(port:1)",     # no key
                     "add t_exact dst:1 nosuch(port:1)",     # no action
                     "add t_exact dst:1 fwd()",              # a parameter missing
                     "add t_exact dst:1 fwd(port:1, x:2)",   # an extra one
                     "add t_exact dst:0x1* fwd(port:1)",     # don't-cares on exact
                     "add exact dst:1 fwd(port:1)"):         # ambiguous: t_exact, out_exact
            with self.assertRaises(stf.StfError, msg=line):
                self.add(line)

    def test_setdefault_and_expectations(self):
        t = stf.translate(stf.parse("""
setdefault t_exact fwd(port:4)
packet 1 aa
expect 2 aa
expect 3
expect 3 bb
packet 0 cc
"""), self.p)
        self.assertEqual(t.script, ["table_set_default ingress.t_exact ingress.fwd 4",
                                    "packet 1 aa", "packet 0 cc"])
        self.assertEqual(t.ports, [0, 1, 2, 3])
        self.assertEqual(t.expect, {2: [("aa", False)], 3: [("bb", False)]})
        self.assertEqual(t.any_ports, set())   # the last expect on 3 had data


class Match(unittest.TestCase):
    def test_match(self):
        cases = [("aabb", False, b"\xaa\xbb", None), ("aa**", False, b"\xaa\x01\x02", None),
                 ("aabb", True, b"\xaa\xbb\xcc", "too long"), ("aabbcc", False, b"\xaa\xbb", "too short"),
                 ("aa*c", False, b"\xaa\xbd", "byte 1")]
        for pat, exact, data, want in cases:
            got = stf.match(pat, exact, data)
            if want is None:
                self.assertIsNone(got, pat)
            else:
                self.assertIn(want, got, pat)

    def test_check(self):
        t = stf.Test([], {1: [("aa", False)], 2: [("bb", True)]}, {3}, [0, 1, 2, 3])
        self.assertEqual(stf.check(t, [(1, b"\xaa"), (2, b"\xbb"), (3, b"zz"), (9, b"x")]), [])
        self.assertTrue(stf.check(t, [(1, b"\xaa")]))                       # 2 missing
        self.assertTrue(stf.check(t, [(1, b"\xaa"), (2, b"\xbb"), (0, b"\x00")]))  # extra on 0
        self.assertTrue(stf.check(t, [(1, b"\xaa"), (1, b"\xaa"), (2, b"\xbb")]))  # extra on 1


class Diff(unittest.TestCase):
    def test_frames_walk_the_parser(self):
        m = diff.Model(PROG)
        rnd = random.Random(1)
        frames = [diff.gen_frame(m, rnd) for _ in range(200)]
        self.assertTrue(all(len(f) >= 14 for f in frames))
        # both transitions taken: some frames carry h (ether type 0x1234)
        self.assertTrue(any(f[12:14] == b"\x12\x34" for f in frames))
        self.assertTrue(any(f[12:14] != b"\x12\x34" for f in frames))

    def test_entries_parse_as_cli(self):
        m = diff.Model(PROG)
        rnd = random.Random(2)
        for _ in range(20):
            diff.gen_frame(m, rnd)
        cmds = diff.gen_entries(m, rnd, 8, list(range(8)))
        adds = [c for c in cmds if c.startswith("table_add")]
        self.assertTrue(adds)
        for c in adds:
            self.assertIn(" =>", c)
            if "t_tern" in c:
                self.assertIn("&&&", c)
                self.assertTrue(c.split()[-1].isdigit())   # a priority

    def test_compare(self):
        x, y, z = b"x" * 14, b"y" * 14, b"z" * 14
        a = [(0, x), (1, y), (0, z)]
        self.assertIsNone(diff.compare(a, [(1, y), (0, x), (0, z)]))   # per port
        self.assertIn("reordered", diff.compare(a, [(0, z), (0, x), (1, y)]))
        self.assertIsNone(diff.compare(a, [(0, z), (0, x), (1, y)], reorder_ok=True))
        self.assertIn("frames vs", diff.compare(a, a[:2]))
        self.assertIsNone(diff.compare(a + [(200, b"cpu" * 5)], a))    # a port innet does not have
        # a frame shorter than a MAC header is compared too (test ports
        # deliver it on both sides: BMv2's packet-in, `innet p4 run`)
        self.assertIn("frames vs", diff.compare(a + [(1, b"r" * 13)], a))
        self.assertIsNone(diff.compare(a + [(1, b"r" * 13)], a + [(1, b"r" * 13)]))

    def test_mutate_never_empty(self):
        rnd = random.Random(3)
        for _ in range(500):
            fr, _ = diff.mutate(b"\x01", rnd)
            self.assertTrue(fr)


class Reads(unittest.TestCase):
    def test_values(self):
        self.assertEqual(corpus.read_values("c[0]= BmCounterValue(packets=3, bytes=180)"), ["3", "180"])
        self.assertEqual(corpus.read_values("MyIngress.r[2]= 17"), ["17"])
        self.assertEqual(corpus.read_values("digest d 1 aa\ndigest d 1 aa\ndigest d 1 bb"),
                         [("1", "aa"), ("1", "bb")])


if __name__ == "__main__":
    unittest.main()
