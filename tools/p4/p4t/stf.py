"""stf.py — p4c's STF test language: parse a `*.stf` file, and translate it
into a run script (the language `innet p4 run` and p4t's BMv2 executor read)
plus the expected outputs.

An STF file is one statement per line ('#' starts a comment):

  packet PORT HEX...            a frame into PORT
  expect PORT [HEX...] [$]      a frame expected out of PORT: '*' is a
                                don't-care hex digit, '$' means "and nothing
                                after"; with no data, any frames on PORT
  add TABLE [PRIO] K:V... ACTION(A:V, ...) [= ID]
                                a table entry (keys: exact 0x.., lpm V/L or
                                a value with '*' digits, ternary with '*'
                                digits; PRIO: lower is stronger)
  setdefault TABLE ACTION(A:V, ...)
  wait                          let the switch finish what it has
  remove all, check_counter, no_packet
                                (not used by the BMv2 corpus; refused)
  mirroring_add, mc_mgrp_create, register_read, meter_set_rates, ...
                                passed to the switch's CLI unchanged

The translation resolves table, key field and action names against the
program's BMv2 JSON the way p4c's runner (backends/bmv2/bmv2stf.py) does —
exact name, then a unique suffix; `$N` for a stack index; `valid` keys — and
writes keys in simple_switch_CLI notation. Where p4c's runner gives up (a
decimal value for a ternary key, an lpm key without a prefix length, a
ternary table entry without a priority) this one uses the key's width from
the JSON: an exact mask, a full-length prefix, priority 0.
"""
import re


class StfError(Exception):
    """A malformed STF line or a name the program does not have."""


# -- lexing ----------------------------------------------------------------

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>"[^"]*")
    | (?P<num>0[xX][0-9a-fA-F*]+|0[bB][01*]+|0[oO][0-7]+|[0-9]+)
    | (?P<id>[A-Za-z_$][A-Za-z_$0-9]*)
    | (?P<punct>==|!=|<=|>=|[:,.()\[\]=/<>])
    )""", re.X)


def _tokens(text, lineno):
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise StfError("line %d: unexpected %r" % (lineno, text[pos:pos + 10]))
        pos = m.end()
        kind = m.lastgroup
        val = m.group(kind)
        if kind == "str":
            kind, val = "id", val[1:-1]
        out.append((kind, val))
    return out


class _Cursor:
    def __init__(self, toks, lineno):
        self.toks, self.i, self.lineno = toks, 0, lineno

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else (None, None)

    def take(self, kind=None, val=None):
        t = self.peek()
        if t[0] is None or (kind and t[0] != kind) or (val is not None and t[1] != val):
            raise StfError("line %d: expected %s, found %r" % (self.lineno, val or kind, t[1]))
        self.i += 1
        return t[1]

    def at(self, val):
        return self.peek()[1] == val

    def done(self):
        return self.i >= len(self.toks)

    def name(self):
        """qualified_name: ID ('[' N ']')? ('.' ID)*"""
        n = self.take("id")
        if self.at("["):
            self.take()
            n += "[" + self.take("num") + "]"
            self.take(val="]")
        while self.at("."):
            self.take()
            n += "." + self.take("id")
        return n


def _action_call(c):
    name = c.name()
    c.take(val="(")
    args = []
    while not c.at(")"):
        a = c.take("id")
        c.take(val=":")
        args.append((a, c.take("num")))
        if c.at(","):
            c.take()
    c.take(val=")")
    return name, args


_PASS_THROUGH = {
    "mirroring_add", "mirroring_add_mc", "mirroring_delete", "mirroring_get",
    "mc_mgrp_create", "mc_mgrp_destroy", "mc_node_create", "mc_node_update",
    "mc_node_associate", "mc_node_dissociate", "mc_node_destroy",
    "counter_read", "counter_write", "counter_reset",
    "register_read", "register_write", "register_reset",
    "meter_get_rates", "meter_set_rates", "meter_array_set_rates",
}


def parse(text):
    """STF text -> list of statements (tuples, first element the command):
    ("packet", port, hexstr), ("expect", port, pattern or None, exact),
    ("add", table, prio or None, [(key, value)], (action, [(arg, value)])),
    ("setdefault", table, (action, args)), ("wait",), ("cli", line).
    Raises StfError."""
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word = line.split(None, 1)[0]
        cmd = word.lower()
        rest = line[len(word):].strip()
        if cmd in ("packet", "expect"):
            parts = rest.split()
            if not parts or not parts[0].isdigit():
                raise StfError("line %d: %s needs a port number" % (lineno, cmd))
            port = int(parts[0])
            data = "".join(parts[1:])
            exact = data.endswith("$")
            if exact:
                data = data[:-1]
            ok = re.fullmatch(r"[0-9a-fA-F*]*" if cmd == "expect" else r"[0-9a-fA-F]*", data)
            if not ok or "$" in data:
                raise StfError("line %d: bad %s data" % (lineno, cmd))
            if cmd == "packet":
                if len(data) % 2:
                    raise StfError("line %d: odd number of hex digits" % lineno)
                out.append(("packet", port, data.lower()))
            else:
                out.append(("expect", port, data.lower() if data else None, exact))
        elif cmd == "wait":
            out.append(("wait",))
        elif cmd in ("add", "setdefault"):
            c = _Cursor(_tokens(rest, lineno), lineno)
            table = c.name()
            if cmd == "setdefault":
                act = _action_call(c)
                out.append(("setdefault", table, act))
            else:
                prio = None
                if c.peek()[0] == "num" and c.peek(1)[1] != ":":
                    prio = int(c.take("num"), 0)
                keys = []
                # a key is NAME ':' VALUE ['/' LEN]; the action is NAME '('
                while True:
                    j = c.i
                    while j < len(c.toks) and c.toks[j][1] not in (":", "("):
                        j += 1
                    if j >= len(c.toks) or c.toks[j][1] == "(":
                        break
                    k = c.name()
                    c.take(val=":")
                    v = c.take("num")
                    if c.at("/"):
                        c.take()
                        v += "/" + c.take("num")
                    keys.append((k, v))
                act = _action_call(c)
                if c.at("="):
                    c.take()
                    c.take()
                out.append(("add", table, prio, keys, act))
            if not c.done():
                raise StfError("line %d: trailing %r" % (lineno, c.peek()[1]))
        elif cmd in _PASS_THROUGH:
            out.append(("cli", line))
        else:
            raise StfError("line %d: unsupported STF command %r" % (lineno, word))
    return out


# -- the program's names (from the BMv2 JSON) --------------------------------

class Program:
    """The tables, actions and field widths of one BMv2 JSON program."""

    def __init__(self, js):
        self.js = js
        self.widths = {}
        types = {t["name"]: t for t in js.get("header_types", [])}
        for h in js.get("headers", []):
            t = types.get(h["header_type"])
            if not t:
                continue
            for f in t["fields"]:
                self.widths[(h["name"], f[0])] = f[1]
        self.actions = {a["id"]: a for a in js.get("actions", [])}
        self.tables = []
        for p in js.get("pipelines", []):
            self.tables.extend(p.get("tables", []))

    def table(self, name):
        hits = [t for t in self.tables if t["name"] == name]
        if not hits:   # a suffix after a dot (ingress.t for t), then any suffix (p4c's rule)
            hits = [t for t in self.tables if t["name"].endswith("." + name)]
        if not hits:
            hits = [t for t in self.tables if t["name"].endswith(name)]
        if len(hits) != 1:
            raise StfError("%s table %r" % ("ambiguous" if hits else "no", name))
        return hits[0]

    def action(self, table, name):
        acts = [self.actions[i] for i in table.get("action_ids", []) if i in self.actions]
        hits = [a for a in acts if a["name"] == name]
        if not hits:
            hits = [a for a in acts if a["name"].endswith("." + name)]
        if not hits:
            hits = [a for a in acts if a["name"].endswith(name)]
        if len(hits) != 1:
            raise StfError("%s action %r in table %s" % ("ambiguous" if hits else "no", name,
                                                         table["name"]))
        return hits[0]

    def key_width(self, key):
        t = key.get("target")
        if key.get("match_type") == "valid":
            return 1
        if isinstance(t, list) and len(t) == 2:
            w = self.widths.get((t[0], t[1]))
            if w is not None:
                return w
        # a key on an expression or a slice: p4c gives its mask or none
        m = key.get("mask")
        if m:
            return (len(m) - 2) * 4
        return None


def _key_name(k):
    if "name" in k:
        return k["name"]
    t = k["target"]
    return ".".join(t) if isinstance(t, list) else str(t)


def _resolve_key(keys, name):
    """The index of the table key an STF key name means (p4c's rules)."""
    m = re.match(r"(.*)\$([0-9]+)(.*)", name)
    if m:
        name = m.group(1) + "[" + m.group(2) + "]" + m.group(3)
    names = [_key_name(k) for k in keys]
    for cand in (name, name + "$", name + ".$valid$"):
        if cand in names:
            return names.index(cand)
    if name.endswith(".valid") and name[:-5] + "$valid$" in names:
        return names.index(name[:-5] + "$valid$")
    alt = name[:-5] + "$valid$" if name.endswith(".valid") else None
    hits = [i for i, n in enumerate(names)
            if n.endswith("." + name) or n.endswith("." + name + "$") or
            (alt and n.endswith("." + alt)) or (name == "valid" and n.endswith(".$valid$"))]
    if not hits and name == "valid" and "$valid$" in names:
        hits = [names.index("$valid$")]
    if len(hits) >= 1:
        return hits[-1]
    raise StfError("no key field %r (keys: %s)" % (name, ", ".join(names)))


def _digits(value):
    """'0x..'/'0b..'/'0o..'/decimal -> (prefix, digits, bits per digit)."""
    v = value.lower()
    for p, b in (("0x", 4), ("0b", 1), ("0o", 3)):
        if v.startswith(p):
            return p, v[2:], b
    return "", v, None


def _ternary(value, width):
    p, d, bits = _digits(value)
    if bits is None:
        if width is None:
            raise StfError("decimal value %s for a ternary key of unknown width" % value)
        return "%s&&&0x%x" % (value, (1 << width) - 1)
    full = {4: "f", 1: "1", 3: "7"}[bits]
    mask = "".join("0" if ch == "*" else full for ch in d)
    return "%s%s&&&%s%s" % (p, d.replace("*", "0"), p, mask)


def _lpm(value, width):
    if "/" in value:
        return value
    p, d, bits = _digits(value)
    if bits is None:
        if width is None:
            raise StfError("decimal lpm value %s of unknown width" % value)
        return "%s/%d" % (value, width)
    plen = (len(d) - d.count("*")) * bits
    if "*" not in d and width is not None:
        plen = width
    return "%s%s/%d" % (p, d.replace("*", "0"), plen)


def _plain(value):
    if "*" in value:
        raise StfError("don't-care digits in exact value %s" % value)
    return value


def table_add(prog, table_name, prio, keys, act):
    """An STF add -> a simple_switch_CLI table_add line."""
    t = prog.table(table_name)
    tkeys = t.get("key", [])
    vals = []
    for k in tkeys:
        mt = k["match_type"]
        vals.append({"ternary": "0&&&0", "lpm": "0/0", "range": None,
                     "optional": None}.get(mt, "0"))
    for kname, v in keys:
        i = _resolve_key(tkeys, kname)
        k = tkeys[i]
        mt = k["match_type"]
        w = prog.key_width(k)
        if mt == "ternary":
            vals[i] = _ternary(v, w)
        elif mt == "lpm":
            vals[i] = _lpm(v, w)
        elif mt == "range":
            vals[i] = "%s->%s" % (_plain(v), _plain(v))
        else:
            vals[i] = _plain(v)
    for i, k in enumerate(tkeys):
        if vals[i] is None:
            w = prog.key_width(k) or 32
            vals[i] = ("0->0x%x" % ((1 << w) - 1)) if k["match_type"] == "range" else \
                "0&&&0"
    a = prog.action(t, act[0])
    given = dict(act[1])
    names = [d["name"] for d in a.get("runtime_data", [])]
    for n in given:
        if n not in names:
            raise StfError("action %s has no parameter %r" % (a["name"], n))
    missing = [n for n in names if n not in given]
    if missing:
        raise StfError("action %s: no value for %s" % (a["name"], ", ".join(missing)))
    line = "table_add %s %s %s => %s" % (t["name"], a["name"], " ".join(vals),
                                         " ".join(given[n] for n in names))
    if any(k["match_type"] in ("ternary", "range", "optional") for k in tkeys):
        line += " %d" % (10000 - (prio or 0))
    return line.replace("  ", " ").rstrip()


def table_set_default(prog, table_name, act):
    t = prog.table(table_name)
    a = prog.action(t, act[0])
    given = dict(act[1])
    names = [d["name"] for d in a.get("runtime_data", [])]
    missing = [n for n in names if n not in given]
    if missing:
        raise StfError("action %s: no value for %s" % (a["name"], ", ".join(missing)))
    return ("table_set_default %s %s %s" % (t["name"], a["name"],
                                            " ".join(given[n] for n in names))).rstrip()


class Test:
    """One STF test made ready to run: the script (run-script lines), the
    expectations per port (a list of (pattern, exact)), the ports whose
    frames are not checked (the last `expect PORT` on them had no data, as
    p4c's runner reads it), and the ports it names."""

    def __init__(self, script, expect, any_ports, ports):
        self.script = script
        self.expect = expect
        self.any_ports = any_ports
        self.ports = ports


def translate(stmts, prog):
    """Statements (parse()) + Program -> Test. Raises StfError."""
    script, expect, anyp, ports = [], {}, {}, set()
    for s in stmts:
        cmd = s[0]
        if cmd == "packet":
            ports.add(s[1])
            script.append("packet %d %s" % (s[1], s[2]))
        elif cmd == "expect":
            ports.add(s[1])
            anyp[s[1]] = s[2] is None
            if s[2] is not None:
                expect.setdefault(s[1], []).append((s[2], s[3]))
        elif cmd == "wait":
            script.append("wait")
        elif cmd == "add":
            script.append(table_add(prog, s[1], s[2], s[3], s[4]))
        elif cmd == "setdefault":
            script.append(table_set_default(prog, s[1], s[2]))
        elif cmd == "cli":
            script.append(s[1])
    return Test(script, expect, {p for p, a in anyp.items() if a}, sorted(ports))


def match(pattern, exact, data):
    """Does frame `data` (bytes) match an expect pattern (hex with '*')?
    -> None if it does, else a reason ("byte N: expected .., got ..",
    "too short", "too long")."""
    got = data.hex()
    if len(got) < len(pattern):
        return "too short: %d bytes, expected %s%d" % (len(data), "" if exact else "at least ",
                                                      (len(pattern) + 1) // 2)
    if exact and len(got) > len(pattern):
        return "too long: %d bytes, expected %d" % (len(data), (len(pattern) + 1) // 2)
    for i, ch in enumerate(pattern):
        if ch != "*" and ch != got[i]:
            j = i // 2
            return "byte %d: expected %s, got %s" % (j, pattern[2 * j:2 * j + 2], got[2 * j:2 * j + 2])
    return None


def check(test, outputs):
    """Compare a run's frames [(port, bytes)] with the test's expectations,
    per port in order, over the ports the test names (p4c's rule: frames
    out of other ports are not observed). -> list of failures (strings);
    empty means pass."""
    got = {}
    for port, data in outputs:
        if port in test.ports:
            got.setdefault(port, []).append(data)
    fails = []
    for port in test.ports:
        if port in test.any_ports:
            continue
        exp = test.expect.get(port, [])
        frames = got.get(port, [])
        for i, (pat, exact) in enumerate(exp):
            if i >= len(frames):
                fails.append("port %d: expected %d frames, got %d (frame %d missing: %s)" %
                             (port, len(exp), len(frames), i, pat[:40]))
                break
            why = match(pat, exact, frames[i])
            if why:
                fails.append("port %d frame %d: %s (got %s)" % (port, i, why, frames[i].hex()))
        if len(frames) > len(exp):
            fails.append("port %d: %d unexpected frame(s), first %s" %
                         (port, len(frames) - len(exp), frames[len(exp)].hex()))
    return fails
