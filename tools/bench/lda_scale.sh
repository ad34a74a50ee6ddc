#!/usr/bin/env bash
# tools/bench/lda_scale.sh [BUILD_DIR] — benchmark 8e: pace_lda at scale with a memory budget. A
# generated corpus of 20k documents x 200 tokens (Poisson lengths), 100k words, 500 planted
# topics (kept in BENCH_DATA_DIR, default BUILD_DIR/bench/data); pace_lda --topics=500
# --clocks=4 --memory_mb=256, embedded, against pace_lda --baseline on the same corpus in the
# same run: tokens/s (target >= 0.5) and pace_lda's peak RSS (VmHWM, /usr/bin/time %M) against
# the budget (target < 1.25x). BENCH_REPS runs of each (default 3), interleaved; the medians
# count. Sizes for smoke runs: BENCH_LDA_DOCS, BENCH_LDA_DOC_LEN, BENCH_LDA_VOCAB,
# BENCH_LDA_TOPICS, BENCH_LDA_CLOCKS, BENCH_LDA_MEMORY_MB. BENCH_TIMEOUT_S: see model_scale.sh.
# Exits 1 if a comparison did not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
docs=${BENCH_LDA_DOCS:-20000} len=${BENCH_LDA_DOC_LEN:-200} vocab=${BENCH_LDA_VOCAB:-100000}
topics=${BENCH_LDA_TOPICS:-500} clocks=${BENCH_LDA_CLOCKS:-4} budget=${BENCH_LDA_MEMORY_MB:-256}
shape=""
[ "$docs/$len/$vocab/$topics/$clocks/$budget" != 20000/200/100000/500/4/256 ] &&
  shape=" [$docs docs x $len tokens, $vocab words, $topics topics, $clocks clocks, --memory_mb=$budget]"

echo "=== 8e: LDA at scale ($docs docs x $len tokens, $vocab words, $topics topics), --memory_mb=$budget vs --baseline ==="
bench_load
bench_corpus "$docs" "$len" "$vocab" "$topics"
lda=("$bin/pace_lda" --docword="$bench_docword" --topics="$topics" --clocks="$clocks" --topics_out=0)
b=() s=() rb=() rs=() why_b="" why_s=""
for ((i = 0; i < reps; i++)); do
  rm -rf "$work"/pd*
  read -r v r st < <(bench_run "b$i" tokens "$limit" "${lda[@]}" --baseline)
  b+=("$v"); rb+=("$r"); [ "$st" = ok ] || why_b="baseline: $(bench_why "$st" "$limit")"
  read -r v r st < <(bench_run "s$i" tokens "$limit" "${lda[@]}" --memory_mb="$budget" --data_dir="$work/pd$i")
  s+=("$v"); rs+=("$r"); [ "$st" = ok ] || why_s="pace_lda: $(bench_why "$st" "$limit")"
done
echo "  tokens/s, $reps runs each: baseline ${b[*]}; pace_lda --memory_mb=$budget ${s[*]}"
echo "  peak RSS (VmHWM, kB): baseline ${rb[*]}; pace_lda ${rs[*]}"
# Where pace_lda's memory went (its budget split and every component against its bound), last run.
grep -h -e '^# --memory_mb' -e '^# memory' "$work/s$((reps - 1)).log" 2> /dev/null | sed 's/^#/  pace_lda:/' || true
bench_ratio "8e LDA at scale, --memory_mb=$budget vs --baseline$shape" \
  "$(bench_median "${s[@]}")" "$(bench_median "${b[@]}")" 0.5 "${why_s:-${why_b:-no rate}}"
# The peak RSS counts only from runs that finished.
peak_kb=0
[ -z "$why_s" ] && peak_kb=$(bench_median "${rs[@]}")
bench_ratio_at_most "8e LDA peak RSS / --memory_mb$shape" \
  "$(awk -v k="$peak_kb" 'BEGIN { printf "%.0f", k / 1024 }')" "$budget" 1.25 MB
awk -v k="$(bench_median "${rb[@]}")" 'BEGIN { printf "8e baseline peak RSS (median): %.0f MB (report only)\n", k / 1024 }'
bench_load after
exit $bench_failed
