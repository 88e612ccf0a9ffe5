#!/usr/bin/python3
"""lincheck.py — a linearizability checker for key-value histories
(Knossos/Porcupine style: Wing & Gong's search with Lowe's memoization).

A history is JSON lines, one operation each:

  {"key": "k1", "op": "set", "value": "v7", "call": 0.125, "ret": 0.130}
  {"key": "k1", "op": "get", "value": "v7", "call": 0.131, "ret": 0.135}
  {"key": "k1", "op": "set", "value": "v9", "call": 0.200, "ret": null}

- call / ret: invocation and response times (any monotonic clock, same
  for every client). ret null = no response (timeout, error, connection
  lost): the operation may or may not have taken effect, at any time after
  its call — a set is then kept with ret = +infinity, a get is dropped.
- get's value is what it returned (null = nil); set's what it wrote.

The model is a register per key, initially nil; keys are independent (a
map of registers is linearizable iff each register is: P-compositionality),
so each key is checked on its own.

The search: walk the events in time order; at a call, try to linearize the
operation now (if the model allows its result), remembering (set of
linearized ops, state) to never explore the same configuration twice; at a
return whose call was not linearized, backtrack. The history is
linearizable iff every operation gets linearized.

Usage: lincheck.py HISTORY...   exit 0 linearizable, 1 not (the key and
the operations involved are printed), 2 bad input.
"""
import json
import math
import sys


def check_key(ops):
    """ops: list of (call, ret, op, value). True if linearizable."""
    n = len(ops)
    if n == 0:
        return True
    # events: (time, is_return, op index); calls sort before returns at a tie
    ev = []
    for i, (call, ret, _, _) in enumerate(ops):
        ev.append((call, 0, i))
        ev.append((ret, 1, i))
    ev.sort()
    m = len(ev)
    # doubly linked list over event slots; slot 0 = head sentinel
    nxt = list(range(1, m + 2))
    prv = list(range(-1, m + 1))
    kind = [None] + [e[1] for e in ev]
    opi = [None] + [e[2] for e in ev]
    ret_slot = [0] * n
    for s in range(1, m + 1):
        if kind[s] == 1:
            ret_slot[opi[s]] = s
    end = m + 1

    def unlink(s):
        nxt[prv[s]] = nxt[s]
        prv[nxt[s]] = prv[s]

    def relink(s):
        nxt[prv[s]] = s
        prv[nxt[s]] = s

    cache = set()
    stack = []
    state = None
    lin = 0
    s = nxt[0]
    while nxt[0] != end:
        if s == end:
            return False
        if kind[s] == 0:
            i = opi[s]
            _, _, op, val = ops[i]
            if op == "set":
                ok, new = True, val
            else:
                ok, new = (val == state), state
            if ok:
                nl = lin | (1 << i)
                if (nl, new) not in cache:
                    cache.add((nl, new))
                    stack.append((s, state))
                    state, lin = new, nl
                    unlink(s)
                    unlink(ret_slot[i])
                    s = nxt[0]
                    continue
            s = nxt[s]
        else:
            if not stack:
                return False
            s, state = stack.pop()
            i = opi[s]
            lin &= ~(1 << i)
            relink(ret_slot[i])
            relink(s)
            s = nxt[s]
    return True


def load(paths):
    keys = {}
    for path in paths:
        with open(path) as f:
            for ln, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                try:
                    o = json.loads(line)
                    op, key, call = o["op"], o["key"], float(o["call"])
                    ret = o.get("ret")
                    val = o.get("value")
                except (ValueError, KeyError, TypeError) as e:
                    raise SystemExit("%s:%d: bad operation: %s" % (path, ln, e))
                if op not in ("set", "get"):
                    raise SystemExit("%s:%d: unknown op %r" % (path, ln, op))
                if ret is None:
                    if op == "get":
                        continue  # no answer: a read constrains nothing
                    ret = math.inf
                elif float(ret) < call:
                    raise SystemExit("%s:%d: returns before its call" % (path, ln))
                keys.setdefault(key, []).append((call, float(ret), op, val))
    return keys


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        keys = load(argv[1:])
    except SystemExit as e:
        print("lincheck: %s" % e, file=sys.stderr)
        return 2
    n_ops = sum(len(v) for v in keys.values())
    bad = []
    for key in sorted(keys):
        if not check_key(keys[key]):
            bad.append(key)
    if bad:
        for key in bad:
            print("lincheck: NOT linearizable: key %r (%d operations):" % (key, len(keys[key])))
            for call, ret, op, val in sorted(keys[key]):
                print("  [%.6f, %s] %s %r" % (call, "inf" if ret == math.inf else "%.6f" % ret,
                                              op, val))
        return 1
    print("lincheck: linearizable: %d operations on %d keys" % (n_ops, len(keys)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
