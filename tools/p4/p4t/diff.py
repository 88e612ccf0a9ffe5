"""diff.py — differential testing of a P4 program: the same table entries,
groups, sessions and frames into BMv2 and into innet (both targets), the
frames out compared port by port, in order.

What goes in, all drawn from one seed (printed; `--seed S` replays a run):

  frames   walks of the program's own parser (from its BMv2 JSON): at each
           state a transition is chosen and the select key's fields are set
           to its value, so frames reach every state; headers' other fields
           random; a random payload. A third of them mutated: bytes flipped,
           cut short, grown, or all random.
  entries  for every table the control plane may fill (not const), random
           entries whose keys are drawn from the values the frames carry
           (so they hit), any of the table's actions with random parameters
           (port parameters among the ports in use); action profiles and
           selectors get members and groups; plus the program's commands
           file, if given (`--commands FILE`, applied first).
  groups   multicast groups 1..4 over random ports, mirroring sessions 1..8
           to random ports.

A program whose behaviour depends on time or chance (meters with rates,
`random`, timestamps) is compared only where those cannot differ: the
runner configures no meter (always GREEN) and reports programs that read
the random extern or timestamps as not comparable.

Per port, the sequence of frames must be the same on every target. BMv2's
egress queues are made deep enough (set_queue_depth) that it drops nothing
of its own.
"""
import json
import os
import random
import sys
import time

from . import executors

N_PORTS = 8


def _hex(v, width):
    return "0x%0*x" % (max(1, (width + 3) // 4), v)


class Model:
    """What the generator needs of a BMv2 JSON program."""

    def __init__(self, js):
        self.js = js
        self.htypes = {t["name"]: t for t in js.get("header_types", [])}
        self.headers = {h["name"]: h for h in js.get("headers", [])}
        self.stacks = {s["name"]: s for s in js.get("header_stacks", [])}
        self.actions = {a["id"]: a for a in js.get("actions", [])}
        self.parsers = js.get("parsers", [])
        self.tables = []
        for p in js.get("pipelines", []):
            self.tables.extend(p.get("tables", []))
        self.profiles = {}
        for p in js.get("pipelines", []):
            for ap in p.get("action_profiles", []):
                self.profiles[ap["name"]] = ap
        self.seen = {}   # (header, field) -> values used in frames

    def fields(self, hname):
        h = self.headers.get(hname)
        if not h:
            return []
        return self.htypes[h["header_type"]]["fields"]

    def width(self, hname, fname):
        for f in self.fields(hname):
            if f[0] == fname:
                return f[1] if isinstance(f[1], int) else 0
        return None

    def nondeterministic(self):
        """A reason the program's outputs may differ run to run, or None:
        the random extern, or a read of a timestamp or queueing field."""
        if '"modify_field_rng_uniform"' in json.dumps(self.js.get("actions", [])):
            return "random"
        for f, why in (("ingress_global_timestamp", "timestamp"),
                       ("egress_global_timestamp", "timestamp"),
                       ("enq_timestamp", "queueing metadata"), ("deq_timedelta", "queueing metadata"),
                       ("enq_qdepth", "queueing metadata"), ("deq_qdepth", "queueing metadata")):
            if _reads_field(self.js, f):
                return why
        return None


def _reads_field(js, fname):
    """Does any action, conditional, table key or parser read
    standard_metadata.<fname>? (standard_metadata's declaration alone does
    not count.)"""
    def walk(x):
        if isinstance(x, dict):
            if x.get("type") == "field" and isinstance(x.get("value"), list) and \
                    len(x["value"]) == 2 and x["value"][1] == fname:
                return True
            if isinstance(x.get("target"), list) and x["target"][-1:] == [fname]:
                return True
            return any(walk(v) for k, v in x.items() if k != "header_types")
        if isinstance(x, list):
            return any(walk(v) for v in x)
        return False
    return walk({k: v for k, v in js.items() if k not in ("header_types", "headers")})


# -- frames -------------------------------------------------------------------

class _Frame:
    def __init__(self):
        self.hdrs = []        # [(hname, {field: value})]

    def bytes(self, model, payload):
        bits, nbits = 0, 0
        for hname, vals in self.hdrs:
            for f in model.fields(hname):
                w = f[1]
                if not isinstance(w, int) or w == 0:
                    continue   # a varbit field: not generated
                bits = (bits << w) | (vals.get(f[0], 0) & ((1 << w) - 1))
                nbits += w
        pad = (-nbits) % 8
        bits <<= pad
        nbits += pad
        return bits.to_bytes(nbits // 8, "big") + payload


def _resolve_stack(model, name, counts):
    """A stack's next element name (name[i]) or None."""
    st = model.stacks.get(name)
    if not st:
        return None
    i = counts.get(name, 0)
    if i >= len(st["header_ids"]):
        return None
    counts[name] = i + 1
    ids = st["header_ids"]
    by_id = {h["id"]: h["name"] for h in model.js.get("headers", [])}
    return by_id.get(ids[i])


def gen_frame(model, rnd):
    """One frame from a random walk of the first parser."""
    if not model.parsers:
        return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(14, 80)))
    p = model.parsers[0]
    states = {s["name"]: s for s in p["parse_states"]}
    st = states.get(p["init_state"])
    fr = _Frame()
    vals = {}
    counts = {}
    steps = 0
    while st is not None and steps < 64:
        steps += 1
        for op in st.get("parser_ops", []):
            if op["op"] in ("extract", "extract_VL"):
                prm = op["parameters"][0]
                if prm["type"] == "regular":
                    hname = prm["value"]
                elif prm["type"] == "stack":
                    hname = _resolve_stack(model, prm["value"], counts)
                elif prm["type"] == "union_stack":
                    hname = None
                else:
                    hname = prm.get("value")
                if not hname or hname not in model.headers:
                    continue
                v = {}
                for f in model.fields(hname):
                    w = f[1] if isinstance(f[1], int) else 0
                    if w:
                        seen = model.seen.get((hname, f[0]))
                        if seen and rnd.random() < 0.5:
                            v[f[0]] = rnd.choice(seen)
                        else:
                            v[f[0]] = _interesting(rnd, w)
                fr.hdrs.append((hname, v))
                vals[hname] = v
        trans = st.get("transitions", [])
        if not trans:
            break
        t = rnd.choice(trans)
        keys = st.get("transition_key", [])
        if t.get("type") in ("hexstr",) and keys:
            _force(model, keys, t["value"], t.get("mask"), vals, rnd)
        nxt = t.get("next_state")
        st = states.get(nxt) if nxt else None
    for hname, v in fr.hdrs:
        for k, x in v.items():
            lst = model.seen.setdefault((hname, k), [])
            if len(lst) < 64 and x not in lst:
                lst.append(x)
    payload = bytes(rnd.getrandbits(8) for _ in range(rnd.choice((0, 4, 16, 46, 100))))
    b = fr.bytes(model, payload)
    return b if b else bytes(rnd.getrandbits(8) for _ in range(rnd.randint(14, 64)))


def _interesting(rnd, w):
    r = rnd.random()
    if r < 0.15:
        return 0
    if r < 0.25:
        return (1 << w) - 1
    if r < 0.4:
        return rnd.randint(0, min(15, (1 << w) - 1))
    return rnd.getrandbits(w)


def _force(model, keys, value, mask, vals, rnd):
    """Set the select key's fields (header fields extracted so far) so that
    their concatenation matches value (&mask)."""
    widths = []
    for k in keys:
        if k.get("type") == "field" and isinstance(k.get("value"), list):
            h, f = k["value"]
            w = model.width(h, f)
            widths.append((h, f, w or 0))
        else:
            widths.append((None, None, None))
    if any(w is None for _, _, w in widths):
        return
    total = sum(w for _, _, w in widths)
    v = int(value, 16)
    m = int(mask, 16) if mask else (1 << total) - 1
    shift = total
    for h, f, w in widths:
        shift -= w
        fv = (v >> shift) & ((1 << w) - 1)
        fm = (m >> shift) & ((1 << w) - 1)
        if h in vals:
            cur = vals[h].get(f, 0)
            vals[h][f] = (cur & ~fm) | (fv & fm)


def mutate(frame, rnd):
    """A mutated copy of frame -> (bytes, short): short if it was cut or
    replaced by random bytes (its parse may stop early)."""
    b = bytearray(frame)
    r = rnd.random()
    if r < 0.4 and b:
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(b))
            b[i] ^= 1 << rnd.randrange(8)
        return bytes(b), False
    if r < 0.6 and len(b) > 1:
        return bytes(b[:rnd.randrange(1, len(b))]), True
    if r < 0.8:
        return bytes(b) + bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 64))), False
    return bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 128))), True


# -- control plane ------------------------------------------------------------

def _key_target_width(model, k):
    t = k.get("target")
    if k["match_type"] == "valid":
        return None, 1
    if isinstance(t, list) and len(t) == 2:
        w = model.width(t[0], t[1])
        if w:
            return (t[0], t[1]), w
    m = k.get("mask")
    if m:
        return None, (len(m) - 2) * 4
    return None, None


def _key_value(model, k, rnd):
    tgt, w = _key_target_width(model, k)
    if w is None:
        return None
    seen = model.seen.get(tgt) if tgt else None
    v = rnd.choice(seen) if seen and rnd.random() < 0.8 else _interesting(rnd, w)
    if k.get("mask"):
        v &= int(k["mask"], 16)
    mt = k["match_type"]
    if mt == "exact":
        return _hex(v, w)
    if mt == "valid":
        return str(rnd.randint(0, 1))
    if mt == "lpm":
        plen = rnd.randint(0, w)
        v &= ((1 << w) - 1) ^ ((1 << (w - plen)) - 1)
        return "%s/%d" % (_hex(v, w), plen)
    if mt == "ternary":
        m = rnd.choice(((1 << w) - 1, rnd.getrandbits(w), 0, ((1 << w) - 1) >> (w // 2)))
        return "%s&&&%s" % (_hex(v & m, w), _hex(m, w))
    if mt == "range":
        lo = max(0, v - rnd.randint(0, 16))
        hi = min((1 << w) - 1, v + rnd.randint(0, 16))
        return "%s->%s" % (_hex(lo, w), _hex(hi, w))
    if mt == "optional":
        return _hex(v, w)
    return None


def _params(action, rnd, ports):
    out = []
    for d in action.get("runtime_data", []):
        w = d["bitwidth"]
        n = d["name"].lower()
        if w == 9 or "port" in n:
            v = rnd.choice(ports) if w >= 4 else rnd.getrandbits(w)
        else:
            v = _interesting(rnd, w)
        out.append(_hex(v, w))
    return " ".join(out)


def gen_entries(model, rnd, n, ports):
    """simple_switch_CLI commands: groups, sessions, table entries."""
    cmds = []
    for g in range(1, 5):
        cmds.append("mc_mgrp_create %d" % g)
        members = sorted(rnd.sample(ports, rnd.randint(1, min(4, len(ports)))))
        cmds.append("mc_node_create %d %s" % (g * 10, " ".join(map(str, members))))
        cmds.append("mc_node_associate %d %d" % (g, g - 1))
    for s in range(1, 9):
        cmds.append("mirroring_add %d %d" % (s, rnd.choice(ports)))
    for t in model.tables:
        if t.get("entries") or not t.get("key") or t.get("type") not in ("simple", "indirect",
                                                                          "indirect_ws"):
            continue
        acts = [model.actions[i] for i in t.get("action_ids", []) if i in model.actions]
        acts = [a for a in acts if not a["name"].startswith("NoAction") or len(acts) == 1]
        if not acts:
            continue
        prio_needed = any(k["match_type"] in ("ternary", "range", "optional") for k in t["key"])
        ap = t.get("action_profile")
        n_members = 0
        if t["type"] in ("indirect", "indirect_ws") and ap:
            n_members = rnd.randint(1, 6)
            for _ in range(n_members):
                a = rnd.choice(acts)
                cmds.append(("act_prof_create_member %s %s %s" % (ap, a["name"], _params(a, rnd, ports))).rstrip())
            if t["type"] == "indirect_ws":
                for g in range(2):
                    cmds.append("act_prof_create_group %s" % ap)
                    for m in rnd.sample(range(n_members), rnd.randint(1, n_members)):
                        cmds.append("act_prof_add_member_to_group %s %d %d" % (ap, m, g))
        used = set()
        for i in range(rnd.randint(1, max(1, n))):
            keys = [_key_value(model, k, rnd) for k in t["key"]]
            if any(k is None for k in keys):
                break
            kk = " ".join(keys)
            if kk in used:
                continue
            used.add(kk)
            prio = (" %d" % rnd.randint(1, 1000)) if prio_needed else ""
            if t["type"] == "simple":
                a = rnd.choice(acts)
                cmds.append(("table_add %s %s %s => %s" % (t["name"], a["name"], kk,
                                                           _params(a, rnd, ports))).rstrip() + prio)
            elif t["type"] == "indirect_ws" and rnd.random() < 0.6:
                cmds.append("table_indirect_add_with_group %s %s => %d%s" % (
                    t["name"], kk, rnd.randrange(2), prio))
            else:
                cmds.append("table_indirect_add %s %s => %d%s" % (
                    t["name"], kk, rnd.randrange(n_members), prio))
    return cmds


# -- the run ------------------------------------------------------------------

def compare(a, b, reorder_ok=False):
    """Frames of two runs -> None or the first difference (per port, in
    order; with reorder_ok, a port whose frames are the same but in another
    order counts as the same). Only ports 0..N_PORTS-1 exist on innet's
    side (`innet p4 run --ports`); BMv2 has every port number, so frames
    it sends elsewhere (a CPU port 64, say) are not compared. Frames shorter
    than a MAC header are: BMv2's packet-in socket delivers them, and so do
    `innet p4 run`'s test ports (a real port drops them: short_frame)."""
    pa, pb = {}, {}
    for port, d in a:
        if port < N_PORTS:
            pa.setdefault(port, []).append(d)
    for port, d in b:
        if port < N_PORTS:
            pb.setdefault(port, []).append(d)
    for port in sorted(set(pa) | set(pb)):
        x, y = pa.get(port, []), pb.get(port, [])
        if x == y or (reorder_ok and sorted(x) == sorted(y)):
            continue
        for i in range(min(len(x), len(y))):
            if x[i] != y[i]:
                same = sorted(x) == sorted(y)
                return "port %d frame %d%s: %s vs %s" % (port, i, " (reordered)" if same else "",
                                                       x[i].hex(), y[i].hex())
        return "port %d: %d frames vs %d" % (port, len(x), len(y))
    return None


def _reorders(js):
    """Does the program recirculate, resubmit or clone? BMv2 queues such a
    packet's second pass behind packets that came in later, innet runs it
    to completion first: per port, only the order may differ."""
    text = json.dumps(js.get("actions", []))
    return any('"%s"' % p in text for p in ("recirculate", "resubmit", "clone_ingress_pkt_to_egress",
                                             "clone_egress_pkt_to_egress", "_recirculate",
                                             "recirculate_preserving_field_list",
                                             "resubmit_preserving_field_list"))


class _Runner:
    """Runs scripts of one program on the targets, with the commands."""

    def __init__(self, json_path, targets, timeout, reorder_ok):
        self.json_path, self.targets, self.timeout = json_path, targets, timeout
        self.reorder_ok = reorder_ok

    def run(self, t, script):
        return executors.run(t, self.json_path, script, ports=N_PORTS, timeout=self.timeout)

    def differs(self, a, b, script):
        ra, rb = self.run(a, script), self.run(b, script)
        if ra.status != "ok" or rb.status != "ok":
            return "%s %s %s; %s %s %s" % (a, ra.status, ra.error, b, rb.status, rb.error)
        return compare(ra.frames, rb.frames, self.reorder_ok)

    def culprit(self, a, b, cmds, pk):
        """The first frame after which a and b differ (bisection over the
        frames in, the commands kept): its index, or None if the difference
        does not reproduce."""
        if not self.differs(a, b, cmds + pk):
            return None
        lo, hi = 0, len(pk)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.differs(a, b, cmds + pk[:mid]):
                hi = mid
            else:
                lo = mid
        return hi - 1


def run_program(json_path, targets, seed, n_packets, n_entries, commands, timeout, out=sys.stdout,
                batch=500, save=None, max_isolated=5):
    """One program, one seed -> (ok, message). save: a directory for the
    script and each target's frames (to replay one by hand).

    A difference is chased down: the first frame in after which the targets
    differ is found by bisection and run alone (after the commands). If
    alone both targets agree, BMv2's answer depended on the frames before it
    — BMv2 reuses its packet header vectors, so a read of a header the
    parser did not extract returns a field of an earlier packet, which P4
    leaves undefined — and the frame is left out and the run repeated (at
    most max_isolated times; each is reported). If alone they still differ,
    that is a failure, reported with the frame."""
    rnd = random.Random(seed)
    with open(json_path) as f:
        js = json.load(f)
    model = Model(js)
    why = model.nondeterministic()
    reorder_ok = _reorders(js)
    ports = list(range(N_PORTS))
    frames = []
    for _ in range(n_packets):
        fr = gen_frame(model, rnd)
        frames.append(mutate(fr, rnd) if rnd.random() < 0.33 else (fr, False))
    cmds = []
    for c in commands:
        with open(c) as f:
            cmds += [l.strip() for l in f if l.strip() and not l.strip().startswith("#")]
    cmds += gen_entries(model, rnd, n_entries, ports)
    pk, short = [], []
    for fr, is_short in frames:
        pk.append("packet %d %s" % (rnd.choice(ports), fr.hex()))
        short.append(is_short)
    base_name = os.path.basename(json_path)[:-5]
    runner = _Runner(json_path, targets, timeout, reorder_ok)

    def script_of(pkts):
        s = list(cmds)
        for i, p in enumerate(pkts):
            if i and i % batch == 0:
                s.append("wait")
            s.append(p)
        return s

    if save:
        os.makedirs(save, exist_ok=True)
        with open(os.path.join(save, "%s-%d.script" % (base_name, seed)), "w") as f:
            f.write("\n".join(script_of(pk)) + "\n")
    results = {}
    for t in targets:
        t0 = time.monotonic()
        r = runner.run(t, script_of(pk))
        results[t] = r
        if save:
            with open(os.path.join(save, "%s-%d.%s.out" % (base_name, seed, t)), "w") as f:
                f.writelines("out %d %s\n" % (p, d.hex()) for p, d in r.frames)
        out.write("  %-5s %-7s %5d frames out %6.1fs%s\n" % (
            t, r.status, len(r.frames), time.monotonic() - t0,
            ("  " + r.error[:200]) if r.error else ""))
    base = targets[0]
    msgs, notes = [], []
    if results[base].status != "ok":
        # the reference itself failed (BMv2 aborts on some undefined
        # behaviour: a header stack index out of range): nothing to compare
        msgs.append("%s %s (no reference): %s" % (base, results[base].status, results[base].error))
        for t in targets[1:]:
            if results[t].status != "ok":
                msgs.append("%s: %s" % (t, results[t].error))
        targets = [base]
    for t in targets[1:]:
        if results[t].status != "ok":
            msgs.append("%s: %s" % (t, results[t].error))
            continue
        d = compare(results[base].frames, results[t].frames, reorder_ok)
        left = list(pk)
        isolated = 0
        if d and base == "bmv2":
            i = runner.culprit(base, t, cmds, left)
            if i is None:
                notes.append("%s vs %s: a difference that did not reproduce" % (base, t))
                d = None
            elif not runner.differs(base, t, cmds + [left[i]]):
                # history-dependent in BMv2: leave the cut and random frames
                # out (their parse stops early: the program may read headers
                # that were not extracted) and compare again
                left = [p for p, sh in zip(pk, short) if not sh]
                notes.append("frame %d (%s...) alone: BMv2 agrees with %s; after the frames "
                             "before it it does not (a stale header read); the %d cut and "
                             "random frames left out" % (i, pk[i][:40], t, len(pk) - len(left)))
                d = runner.differs(base, t, script_of(left))
        while d and base == "bmv2" and isolated < max_isolated:
            i = runner.culprit(base, t, cmds, left)
            if i is None:
                d = None
                notes.append("%s vs %s: a difference that did not reproduce" % (base, t))
                break
            alone = runner.differs(base, t, cmds + [left[i]])
            if alone:
                d = "frame %d in (%s): %s" % (i, left[i][:80], alone)
                break
            notes.append("left out frame %d (%s...): alone BMv2 agrees with %s; after the "
                         "frames before it, BMv2 read a stale header" % (i, left[i][:40], t))
            del left[i]
            isolated += 1
            d = runner.differs(base, t, script_of(left))
        if d:
            msgs.append("%s vs %s: %s" % (base, t, d))
    if why and msgs:
        return True, "not comparable (%s): %s" % (why, msgs[0])
    text = "; ".join(msgs) if msgs else "%d frames in, %d out, same on %s" % (
        n_packets, len(results[base].frames), ", ".join(targets))
    if notes:
        text += " [" + "; ".join(notes) + "]"
    return (not msgs), text


def main(a, targets):
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    bad = 0
    for i, prog in enumerate(a.programs):
        s = seed + i
        print("%s seed=%d packets=%d" % (os.path.basename(prog), s, a.packets))
        cmds = [c for c in a.commands if os.path.basename(c).split(".")[0] ==
                os.path.basename(prog).split(".")[0]]
        if not cmds:
            cand = prog[:-5] + ".commands"
            cmds = [cand] if os.path.exists(cand) else []
        ok, msg = run_program(os.path.abspath(prog), targets, s, a.packets, a.entries, cmds,
                              a.timeout, batch=a.batch, save=a.save)
        print("%s %s: %s (replay: --seed %d)" % ("ok  " if ok else "FAIL", os.path.basename(prog),
                                                 msg, s))
        sys.stdout.flush()
        bad += 0 if ok else 1
    return 1 if bad else 0
