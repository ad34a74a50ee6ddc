#!/usr/bin/env bash
# tools/bench/mf_scale.sh [BUILD_DIR] — benchmarks 8a and 8b: pace_mf at model scale, embedded,
# against pace_mf --baseline on the same data in the same run. 600k users x 20k items, 700k
# ratings (413k users rated), rank 128, 3 clocks of 40% of the ratings each; the factor tables
# are ~220 MB. 8a: default budgets (the model fits in the client cache); 8b: a tenth of the
# factor tables as the memory budget (--memory_mb). The shard's store stays in the OS page
# cache here (8d is the out-of-core job). BENCH_REPS runs of each (default 3), interleaved; the
# medians count. Prints the runs, two RATIO lines and the peak RSS of each, per BENCH_SKEW.
# Sizes for smoke runs: BENCH_MS_USERS, BENCH_MS_ITEMS, BENCH_MS_RATINGS, BENCH_MS_RANK.
# See model_scale.sh for the other settings. Exits 1 if a comparison did not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
bench_8a_sizes
shape=$(bench_mf_shape 600000/20000/700000/128)

echo "=== 8a, 8b: MF at model scale ($users users x $items items, rank $rank), embedded vs --baseline ==="
bench_load
for skew in ${BENCH_SKEW:-0}; do
  suffix="$(bench_skew_suffix "$skew")$shape"
  bench_8a_job "$skew"
  # Factor table bytes: (users + items) rows of rank + 1 f32 (the baseline's header line
  # names the counts).
  tables_mb=$("${ms[@]}" --baseline --clocks=1 --minibatch=0.01 2>&1 |
    awk -v k="$rank" '/ users, / { for (i = 1; i < NF; i++) { if ($(i+1) == "users,") u = $i; if ($(i+1) == "items,") it = $i } }
         END { printf "%d", (u + it) * (k + 1) * 4 / 1048576 }' || true)
  tenth=$(( tables_mb / 10 > 1 ? tables_mb / 10 : 1 ))
  b8=() a8=() s8=() rb8=() ra8=() rs8=() why_b="" why_a="" why_s=""
  for ((i = 0; i < reps; i++)); do
    rm -rf "$work"/pd*
    read -r v r st < <(bench_run "b$i" ratings "$limit" "${ms[@]}" --baseline)
    b8+=("$v"); rb8+=("$r"); [ "$st" = ok ] || why_b="baseline: $(bench_why "$st" "$limit")"
    read -r v r st < <(bench_run "a$i" ratings "$limit" "${ms[@]}" --data_dir="$work/pda$i")
    a8+=("$v"); ra8+=("$r"); [ "$st" = ok ] || why_a="8a: $(bench_why "$st" "$limit")"
    read -r v r st < <(bench_run "s$i" ratings "$limit" "${ms[@]}" --data_dir="$work/pds$i" --memory_mb=$tenth)
    s8+=("$v"); rs8+=("$r"); [ "$st" = ok ] || why_s="8b: $(bench_why "$st" "$limit")"
  done
  echo "  skew $skew: factor tables ${tables_mb} MB; 8b budget: --memory_mb=$tenth"
  echo "  ratings/s, $reps runs each: baseline ${b8[*]}; 8a fits ${a8[*]}; 8b a tenth ${s8[*]}"
  echo "  peak RSS (VmHWM, kB): baseline ${rb8[*]}; 8a ${ra8[*]}; 8b ${rs8[*]}"
  bench_ratio "8a MF model scale, budgets that fit vs --baseline$suffix" \
    "$(bench_median "${a8[@]}")" "$(bench_median "${b8[@]}")" 0.5 "${why_a:-${why_b:-no rate}}"
  bench_ratio "8b MF model scale, memory at a tenth of the tables vs --baseline$suffix" \
    "$(bench_median "${s8[@]}")" "$(bench_median "${b8[@]}")" 0.25 "${why_s:-${why_b:-no rate}}"
  awk -v b="$(bench_median "${rb8[@]}")" -v a="$(bench_median "${ra8[@]}")" \
    -v s="$(bench_median "${rs8[@]}")" -v x="$suffix" 'BEGIN {
    printf "8 peak RSS (median%s): baseline %.0f MB, 8a %.0f MB (%.2fx the baseline; goal <= 2), 8b %.0f MB (report only)\n",
      x, b / 1024, a / 1024, (b > 0) ? a / b : 0, s / 1024 }'
done
bench_load after
exit $bench_failed
