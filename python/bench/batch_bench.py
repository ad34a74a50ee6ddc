#!/usr/bin/env python3
"""Benchmark 9: worker.get_many + worker.inc_many of 10,000 rows x 100 f32 from
Python against the same calls in C++ (pace_python_batch_bench), embedded, in
the same run. Prints one RATIO line (C++ seconds / Python seconds per
get_many + inc_many pair with out=, i.e. Python's share of C++'s throughput;
target >= 0.7) and appends it to $PACE_BENCH_OUT if set.

Each side's figure is the fastest call of a run (the least disturbed by other
load: C++ and Python run in turn, not at the same instant, so medians of a
busy machine compare different moments), then the median over interleaved
runs.

    PYTHONPATH=build/python python3 python/bench/batch_bench.py build/bin [--quick]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import pacedb

import ratio_lines  # beside this script

ROWS, WIDTH = 10_000, 100


def python_run(data_dir, iters):
    client = pacedb.Client(data_dir=data_dir)
    t = client.create_table("bench", WIDTH, np.float32, consistency="essp", staleness=1)
    w = client.worker()
    rows = np.arange(ROWS, dtype=np.uint64) * 7
    out = np.empty((ROWS, WIDTH), np.float32)
    deltas = np.full((ROWS, WIDTH), 0.001, np.float32)
    w.get_many(t, rows, out=out)  # warm-up: fetch every row
    w.inc_many(t, rows, deltas)
    get_s, inc_s, alloc_s = [], [], []
    for _ in range(iters):
        t0 = time.perf_counter()
        w.get_many(t, rows, out=out)
        t1 = time.perf_counter()
        w.inc_many(t, rows, deltas)
        t2 = time.perf_counter()
        w.get_many(t, rows)  # a new array per call
        t3 = time.perf_counter()
        get_s.append(t1 - t0)
        inc_s.append(t2 - t1)
        alloc_s.append(t3 - t2)
    return min(get_s), min(inc_s), min(alloc_s)


def cpp_run(bin_dir, data_dir, iters):
    out = subprocess.run([os.path.join(bin_dir, "pace_python_batch_bench"), data_dir, str(ROWS),
                          str(WIDTH), str(iters)], check=True, capture_output=True,
                         text=True).stdout
    vals = dict(line.split() for line in out.splitlines())
    return float(vals["get_many_seconds"]), float(vals["inc_many_seconds"])


def main(argv):
    bin_dir = argv[0] if argv else "build/bin"
    quick = "--quick" in argv or bool(os.environ.get("BENCH_QUICK"))
    iters, reps = (5, 3) if quick else (10, 7)
    print(f"=== 9: Python get_many + inc_many, {ROWS} rows x {WIDTH} f32 (vs the same calls "
          "in C++) ===")
    work = tempfile.mkdtemp(prefix="pace-pybench-")
    cpp, py = [], []
    try:
        for i in range(reps):  # interleaved runs; medians count
            cpp.append(cpp_run(bin_dir, os.path.join(work, f"cpp{i}"), iters))
            py.append(python_run(os.path.join(work, f"py{i}"), iters))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cg, ci = (statistics.median(x[k] for x in cpp) for k in (0, 1))
    pg, pi, pa = (statistics.median(x[k] for x in py) for k in (0, 1, 2))
    print(f"  C++:    get_many {cg * 1e3:.2f} ms, inc_many {ci * 1e3:.2f} ms per call")
    print(f"  Python: get_many(out=) {pg * 1e3:.2f} ms, inc_many {pi * 1e3:.2f} ms, "
          f"get_many (new array) {pa * 1e3:.2f} ms per call")
    lines = []
    for label, sub, base in [
            ("9 Python get_many(out=)+inc_many vs C++, 10k x 100 f32", pg + pi, cg + ci),
            ("9a Python get_many(out=) vs C++ Prefetch+Get loop", pg, cg),
            ("9b Python inc_many vs C++ batched Inc", pi, ci),
            ("9c Python get_many (new array)+inc_many vs C++", pa + pi, cg + ci)]:
        r = base / sub if sub > 0 else 0
        target = 0.7 if label.startswith("9 ") else None
        verdict = (f"target >= 0.70) {'MET' if r >= 0.7 else 'MISSED'}" if target
                   else "report only)")
        lines.append(f"RATIO {label}: {r:.3f} ({sub * 1e3:.2f} vs {base * 1e3:.2f} ms; {verdict}")
    ratio_lines.emit(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
