#!/usr/bin/env bash
# tools/bench/durability_tax.sh [BUILD_DIR] — benchmark 8g, the durability tax: the 8a job
# (see mf_scale.sh) as shipped, every clock logged, against the same job with
# --benchmark_no_durability (no clock log record, no WAL; an option for measuring only), BENCH_REPS
# runs of each (default 3), interleaved; the medians count. The goal: the log costs at most 10%
# (ratio >= 0.9). Sizes for smoke runs as in mf_scale.sh. Exits 1 if the comparison did not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
bench_8a_sizes
shape=$(bench_mf_shape 600000/20000/700000/128)

echo "=== 8g: the durability tax, 8a as shipped vs --benchmark_no_durability ==="
bench_load
bench_8a_job 0
d=() u=() why=""
for ((i = 0; i < reps; i++)); do
  rm -rf "$work"/pd*
  read -r v r st < <(bench_run "d$i" ratings "$limit" "${ms[@]}" --data_dir="$work/pdd$i")
  d+=("$v"); [ "$st" = ok ] || why="logged: $(bench_why "$st" "$limit")"
  read -r v r st < <(bench_run "u$i" ratings "$limit" "${ms[@]}" --data_dir="$work/pdu$i" \
    --benchmark_no_durability)
  u+=("$v"); [ "$st" = ok ] || why="unlogged: $(bench_why "$st" "$limit")"
done
echo "  ratings/s, $reps runs each: logged ${d[*]}; --benchmark_no_durability ${u[*]}"
bench_ratio "8g durability tax: 8a logged vs --benchmark_no_durability$shape" \
  "$(bench_median "${d[@]}")" "$(bench_median "${u[@]}")" 0.9 "${why:-no rate}"
bench_load after
exit $bench_failed
