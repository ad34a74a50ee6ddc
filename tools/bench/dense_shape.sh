#!/usr/bin/env bash
# tools/bench/dense_shape.sh [BUILD_DIR] — benchmark 8c: pace_mf on the dense shape (as many
# ratings per user as the Netflix prize data, ~21): 480k users x 17,770 items, 9.9M ratings,
# rank 128, 3 clocks of 10% of the ratings, embedded with 1 and with 2 workers, against
# pace_mf --baseline on the same data in the same run. Targets: 1 worker >= 0.5, 2 workers
# >= 0.9. The ratings take a while to generate: they are kept in BENCH_DATA_DIR (default
# BUILD_DIR/bench/data) for the next run. BENCH_REPS runs of each (default 3), interleaved.
# Sizes for smoke runs: BENCH_DENSE_USERS, BENCH_DENSE_ITEMS, BENCH_DENSE_RATINGS,
# BENCH_DENSE_RANK. BENCH_SKEW, BENCH_TIMEOUT_S: see model_scale.sh. Exits 1 if a comparison
# did not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
users=${BENCH_DENSE_USERS:-480000} items=${BENCH_DENSE_ITEMS:-17770}
ratings=${BENCH_DENSE_RATINGS:-9900000} rank=${BENCH_DENSE_RANK:-128}
shape=$(bench_mf_shape 480000/17770/9900000/128)

echo "=== 8c: MF dense shape ($users users x $items items, $ratings ratings, rank $rank), 1 and 2 workers vs --baseline ==="
bench_load
for skew in ${BENCH_SKEW:-0}; do
  suffix="$(bench_skew_suffix "$skew")$shape"
  bench_ratings "$users" "$items" "$ratings" "$skew" 0
  mf=("$bin/pace_mf" --train="$bench_train" --rank="$rank" --clocks=3 --minibatch=0.1 --lr=0.08)
  b=() o=() t=() rb=() ro=() rt=() why_b="" why_o="" why_t=""
  for ((i = 0; i < reps; i++)); do
    rm -rf "$work"/pd*
    read -r v r st < <(bench_run "b$i" ratings "$limit" "${mf[@]}" --baseline)
    b+=("$v"); rb+=("$r"); [ "$st" = ok ] || why_b="baseline: $(bench_why "$st" "$limit")"
    read -r v r st < <(bench_run "o$i" ratings "$limit" "${mf[@]}" --workers=1 --data_dir="$work/pd1-$i")
    o+=("$v"); ro+=("$r"); [ "$st" = ok ] || why_o="1 worker: $(bench_why "$st" "$limit")"
    read -r v r st < <(bench_run "t$i" ratings "$limit" "${mf[@]}" --workers=2 --data_dir="$work/pd2-$i")
    t+=("$v"); rt+=("$r"); [ "$st" = ok ] || why_t="2 workers: $(bench_why "$st" "$limit")"
  done
  echo "  skew $skew: ratings/s, $reps runs each: baseline ${b[*]}; 1 worker ${o[*]}; 2 workers ${t[*]}"
  echo "  peak RSS (VmHWM, kB): baseline ${rb[*]}; 1 worker ${ro[*]}; 2 workers ${rt[*]}"
  base=$(bench_median "${b[@]}")
  bench_ratio "8c MF dense shape, 1 worker vs --baseline$suffix" "$(bench_median "${o[@]}")" "$base" 0.5 \
    "${why_o:-${why_b:-no rate}}"
  bench_ratio "8c MF dense shape, 2 workers vs --baseline$suffix" "$(bench_median "${t[@]}")" "$base" 0.9 \
    "${why_t:-${why_b:-no rate}}"
  awk -v b="$(bench_median "${rb[@]}")" -v o="$(bench_median "${ro[@]}")" \
    -v t="$(bench_median "${rt[@]}")" -v x="$suffix" 'BEGIN {
    printf "8c peak RSS (median%s): baseline %.0f MB, 1 worker %.0f MB, 2 workers %.0f MB (report only)\n",
      x, b / 1024, o / 1024, t / 1024 }'
done
bench_load after
exit $bench_failed
