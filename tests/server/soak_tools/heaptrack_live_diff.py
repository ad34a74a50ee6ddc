#!/usr/bin/env python3
"""Live heap bytes per allocation stack at given times of a heaptrack recording, and their
growth between consecutive times (the soak of paced_soak_test; not part of any test).

  heaptrack_live_diff.py FILE.zst T1 T2 [T3 ...]   (seconds since the process started)

Reads heaptrack's interpreted format (the .zst heaptrack writes: 'a' = allocation info
(size, trace), '+'/'-' = one allocation/free of an info, 'c' = timestamp in ms, 't' = trace
(ip, parent), 'i' = instruction pointer (ip, module, function string, ...), 's' = string).
Prints the live bytes at each time, then per interval the stacks that grew or shrank most.
"""
import collections
import subprocess
import sys


def main():
    path, times = sys.argv[1], [float(t) for t in sys.argv[2:]]
    proc = subprocess.Popen(["zstdcat", path], stdout=subprocess.PIPE, text=True, errors="replace")
    strings, ips, traces, allocs = [None], [None], [None], []
    live = collections.defaultdict(int)  # allocation info -> allocations alive
    snaps, next_time = [], 0
    for line in proc.stdout:
        tag, rest = line[0], line[2:]
        if tag == "+":
            live[int(rest, 16)] += 1
        elif tag == "-":
            live[int(rest, 16)] -= 1
        elif tag == "a":
            size, trace = rest.split()
            allocs.append((int(size, 16), int(trace, 16)))
        elif tag == "c":
            now = int(rest, 16) / 1000.0
            while next_time < len(times) and now >= times[next_time]:
                snaps.append((now, dict(live)))
                next_time += 1
        elif tag == "s":
            strings.append(rest.rstrip("\n").split(" ", 1)[1] if " " in rest else "")
        elif tag == "i":
            fields = rest.split()
            ips.append(int(fields[2], 16) if len(fields) > 2 else 0)
        elif tag == "t":
            ip, parent = rest.split()
            traces.append((int(ip, 16), int(parent, 16)))

    def name(trace, depth=6):
        out = []
        while trace and len(out) < depth:
            ip, trace = traces[trace]
            fn = ips[ip] if ip < len(ips) else 0
            out.append((strings[fn] if fn and fn < len(strings) else "?")[:80])
        return " <- ".join(out)

    def by_trace(snap):
        d = collections.defaultdict(int)
        for a, n in snap.items():
            size, trace = allocs[a]
            d[trace] += n * size
        return d

    for t, s in snaps:
        print("t=%.1f s live=%d bytes" % (t, sum(allocs[a][0] * n for a, n in s.items())))
    for (t1, s1), (t2, s2) in zip(snaps, snaps[1:]):
        b1, b2 = by_trace(s1), by_trace(s2)
        diff = sorted(((b2.get(k, 0) - b1.get(k, 0), k) for k in set(b1) | set(b2)), reverse=True)
        print("=== %.1f -> %.1f s: %+d bytes" % (t1, t2, sum(d for d, _ in diff)))
        for d, k in diff[:10] + diff[-5:]:
            if d != 0:
                print("%+9d  %s" % (d, name(k)))


if __name__ == "__main__":
    main()
