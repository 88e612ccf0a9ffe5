#!/usr/bin/python3
"""pauses.py — how long a store stopped answering around an event, from a
history recorded by kvload.py (one JSON line per operation: op, call, ret).

  pauses.py HIST T_EVENT

T_EVENT is a time on the history's clock (time.monotonic()), e.g. when a
switch was killed. Prints one line:

  pause_ms=P write_pause_ms=W before_ms=B slowest_ms=S acks_after=N failed=F

  pause        the longest interval without any acknowledgement that ends
               after T_EVENT
  write_pause  the same for SET acknowledgements alone (reads may go on
               while writes wait, e.g. for a coordinator failover)
  before       the longest such interval before T_EVENT (from 0.5 s into
               the load), for scale
  slowest      the longest time any operation took, final reads included
  acks_after   acknowledgements after T_EVENT; failed: operations without
               an answer

Both pauses are taken over the load alone: its operations, and their
acknowledgements until the last operation was invoked (after it the clients
are finishing one by one, and a gap is one slow operation, not a store that
stopped). kvload.py's final reads ("final": true, sequential, one key after
the other) are not load and do not count either. Exit 2 on a malformed
history.
"""
import json
import sys


def figures(hist, t_event):
    load = [o for o in hist if not o.get("final")]
    if not load:
        raise ValueError("no load operations")
    t0 = min(o["call"] for o in load)
    end = max(o["call"] for o in load)

    def acks(ops):
        return sorted(o["ret"] for o in ops if o["ret"] is not None and o["ret"] <= end)

    a = acks(load)
    w = acks([o for o in load if o["op"] == "set"])
    after = [y - x for x, y in zip(a, a[1:]) if y > t_event]
    wafter = [y - x for x, y in zip(w, w[1:]) if y > t_event]
    before = [y - x for x, y in zip(a, a[1:]) if t0 + 0.5 < x and y < t_event]
    done = [o["ret"] - o["call"] for o in hist if o["ret"] is not None]
    return {
        "pause_ms": 1000 * max(after, default=0),
        "write_pause_ms": 1000 * max(wafter, default=0),
        "before_ms": 1000 * max(before, default=0),
        "slowest_ms": 1000 * max(done, default=0),
        "acks_after": sum(1 for t in a if t > t_event),
        "failed": sum(1 for o in hist if o["ret"] is None),
    }


def main(argv):
    if len(argv) != 3:
        print("usage: pauses.py HIST T_EVENT", file=sys.stderr)
        return 2
    try:
        t_event = float(argv[2])
        with open(argv[1]) as f:
            hist = [json.loads(l) for l in f if l.strip()]
        for o in hist:
            o["call"] = float(o["call"])
            if o["ret"] is not None:
                o["ret"] = float(o["ret"])
            if o["op"] not in ("set", "get"):
                raise ValueError("unknown op %r" % o["op"])
        r = figures(hist, t_event)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("pauses.py: %s: %s" % (argv[1], e), file=sys.stderr)
        return 2
    print("pause_ms=%.0f write_pause_ms=%.0f before_ms=%.0f slowest_ms=%.0f acks_after=%d failed=%d" % (
        r["pause_ms"], r["write_pause_ms"], r["before_ms"], r["slowest_ms"], r["acks_after"], r["failed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
