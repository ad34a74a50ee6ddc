#!/usr/bin/env python3
"""Benchmark 10: MF with pacedb.torch (Adagrad, embedded) against the same model
in plain PyTorch (nn.Embedding(sparse=True) + torch.optim.Adagrad), same data,
same run (python/examples/torch_mf.py, runs alternating, best of --repeat).
Prints three RATIO lines and appends them to $PACE_BENCH_OUT if set:

  10 ratings/s, 2 workers vs plain PyTorch   (target >= 0.8)
  10 test RMSE, 2 workers minus plain        (target <= 0.005)
  10 ratings/s, 2 workers vs 1 worker        (target >= 1.5)

    PYTHONPATH=build/python python3 python/bench/torch_bench.py [--quick]

Exit status 1 if a run fails or prints no figures (a missed target is
reported, not a failure); "SKIPPED" without PyTorch.
"""
import os
import re
import subprocess
import sys

import ratio_lines  # beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "torch_mf.py")
LINE = re.compile(r"^(plain PyTorch|PaceDB .*): test RMSE ([0-9.]+), ([0-9,]+) ratings/s", re.M)


def run(workers, repeat):
    r = subprocess.run([sys.executable, EXAMPLE, f"--workers={workers}", f"--repeat={repeat}"],
                       capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    found = LINE.findall(r.stdout)
    if r.returncode != 0 or len(found) != 2:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"torch_bench: torch_mf.py --workers={workers} failed")
    (_, plain_rmse, plain_rate), (_, pace_rmse, pace_rate) = found
    return (float(plain_rmse), float(plain_rate.replace(",", "")), float(pace_rmse),
            float(pace_rate.replace(",", "")))


def main(argv):
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED 10: PyTorch is not installed (python3-torch)")
        return 0
    repeat = 1 if "--quick" in argv else 3
    load = os.getloadavg()[0]
    one = run(1, repeat)
    two = run(2, repeat)
    plain_rmse, plain_rate, pace_rmse, pace_rate = two
    gap = pace_rmse - plain_rmse

    def verdict(ok):
        return "MET" if ok else "MISSED"

    lines = [
        f"RATIO 10 pacedb.torch MF ratings/s, 2 workers vs plain PyTorch (Adagrad): "
        f"{pace_rate / plain_rate:.3f} ({pace_rate:.0f} vs {plain_rate:.0f}; target >= 0.80; "
        f"load {load:.1f}) {verdict(pace_rate >= 0.8 * plain_rate)}",
        f"RATIO 10 pacedb.torch MF test RMSE, 2 workers minus plain PyTorch: {gap:+.4f} "
        f"({pace_rmse:.4f} vs {plain_rmse:.4f}; target <= 0.005) {verdict(gap <= 0.005)}",
        f"RATIO 10 pacedb.torch MF ratings/s, 2 workers vs 1 worker: {pace_rate / one[3]:.3f} "
        f"({pace_rate:.0f} vs {one[3]:.0f}; target >= 1.50) {verdict(pace_rate >= 1.5 * one[3])}",
    ]
    ratio_lines.emit(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
