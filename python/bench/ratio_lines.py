"""The RATIO lines of the Python benchmarks: printed, and appended to the
harness's collection (tools/bench/run.sh sets PACE_BENCH_OUT)."""
import os


def emit(lines):
    for line in lines:
        print(line)
    path = os.environ.get("PACE_BENCH_OUT")
    if path:
        with open(path, "a") as f:
            f.write("\n".join(lines) + "\n")
