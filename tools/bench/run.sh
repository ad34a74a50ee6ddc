#!/usr/bin/env bash
# tools/bench/run.sh [BUILD_DIR] — runs the benchmarks (1-7, 3d-3f, 8a-8f, 9, 10, 11), each
# against a baseline in the same run, and prints one RATIO line per comparison
# next to its target. Lines are also collected in BUILD_DIR/bench/ratios.txt.
# Benchmark 8 (model scale, tools/bench/model_scale.sh) takes long on a 2-core
# machine; BENCH_QUICK=1 shortens the other runs, BENCH_MODEL_SCALE names the
# jobs of 8 to run (default "all"; e.g. "8a 8d"; "none" skips 8).
# Keeps going when a benchmark fails, then exits 1 if a benchmark with a target
# did not run or produced no ratio (a missed target is reported, not a failure).
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
out=$(mkdir -p "$build/bench" && cd "$build/bench" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
failures=()
# note_failure WHAT CMD...: runs CMD; remembers WHAT if it fails (run.sh fails at the end).
note_failure() {
  local what=$1; shift
  "$@" || failures+=("$what")
}
ratios=$out/ratios.txt
: > "$ratios"
export PACE_BENCH_OUT=$ratios
min_time=${BENCH_QUICK:+--benchmark_min_time=0.2}
echo "# machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); $(date -u +%F)" | tee -a "$ratios"

echo "=== 1, 2: client cache-hit Get and Inc (client_bench) ==="
note_failure "1, 2 (client_bench)" "$bin/client_bench" $min_time 2>/dev/null
# report only: the client's seal and purge of a 450k-row clock, per row
note_failure "row_cache_bench" "$bin/row_cache_bench" $min_time 2>/dev/null
echo "=== 3: shard apply (storage_bench) ==="
note_failure "3 (storage_bench)" "$bin/storage_bench" 2>/dev/null
# 3d, report only: the shard service's cost of one MF clock
note_failure "3d (service_bench)" "$bin/service_bench" 2>/dev/null
# 3e: a model-scale clock vs raw RocksDB; 3f: --sync, 8 writers
note_failure "3e, 3f (engine_bench)" "$bin/engine_bench" 2>/dev/null
bash "$(dirname "$0")/sync_procs.sh" "$build" | tee -a "$ratios" || failures+=("3f (sync_procs.sh)")  # 3f with 8 client processes
echo "=== 4: push path over loopback (push_bench) ==="
note_failure "4 (push_bench)" "$bin/push_bench" 2>/dev/null

# Runs a command and prints the number before " <unit>/s" on its "# done:" line.
rate() {
  local unit=$1; shift
  { "$@" 2>&1 || true; } | awk -v u="$unit/s" '/^# done:/ { for (i = 1; i < NF; i++) if ($(i+1) == u) r = $i } END { print r + 0 }'
}
# The end-to-end runs are single processes of a second or two, so one run is
# at the mercy of the machine: each of baseline, 1 worker and 2 workers runs
# $reps times, interleaved, and the median counts.
reps=${BENCH_REPS:-3}
if [ -n "${BENCH_QUICK:-}" ]; then reps=${BENCH_REPS:-1}; fi
median() { bench_median "$@"; }
# Seconds per clock after the first SKIP clocks, from a run's --csv (column 2
# is the time since the start at the end of each clock).
per_clock() {
  awk -F, -v k="$2" 'FNR == 1 { next } { n++; t[n] = $2 } END { print (n > k) ? (t[n] - t[k]) / (n - k) : 0 }' "$1"
}
# end_to_end UNIT DATA_PREFIX SKIP CMD...: sets base, one, two to median rates
# over whole runs, and sbase, sone, stwo to median seconds per clock after the
# first SKIP clocks (the steady state, without the cold start).
end_to_end() {
  local unit=$1 prefix=$2 skip=$3; shift 3
  local b=() o=() t=() sb=() so=() st=()
  for ((i = 0; i < reps; i++)); do
    rm -rf "$work/$prefix"*
    b+=("$(rate "$unit" "$@" --baseline --csv="$work/${prefix}b-$i.csv")")
    o+=("$(rate "$unit" "$@" --workers=1 --data_dir="$work/${prefix}1-$i" --csv="$work/${prefix}o-$i.csv")")
    t+=("$(rate "$unit" "$@" --workers=2 --data_dir="$work/${prefix}2-$i" --csv="$work/${prefix}t-$i.csv")")
    sb+=("$(per_clock "$work/${prefix}b-$i.csv" "$skip")")
    so+=("$(per_clock "$work/${prefix}o-$i.csv" "$skip")")
    st+=("$(per_clock "$work/${prefix}t-$i.csv" "$skip")")
  done
  echo "  $unit/s, $reps runs each: baseline ${b[*]}; 1 worker ${o[*]}; 2 workers ${t[*]}"
  echo "  seconds per clock after the first $skip: baseline ${sb[*]}; 1 worker ${so[*]}; 2 workers ${st[*]}"
  base=$(median "${b[@]}")
  one=$(median "${o[@]}")
  two=$(median "${t[@]}")
  sbase=$(median "${sb[@]}")
  sone=$(median "${so[@]}")
  stwo=$(median "${st[@]}")
}
steady_line() {  # steady_line LABEL SUBJECT_SECONDS BASELINE_SECONDS (per clock)
  awk -v l="$1" -v s="$2" -v b="$3" 'BEGIN {
    r = (s > 0) ? b / s : 0
    printf "RATIO %s: %.3f (%.1f vs %.1f ms per clock; report only)\n", l, r, s * 1000, b * 1000 }' | tee -a "$ratios"
}
ratio_line() {  # ratio_line LABEL SUBJECT BASELINE TARGET ("not run ... FAILED" without a rate)
  local line
  line=$(bench_ratio "$@")
  printf '%s\n' "$line" | tee -a "$ratios"
  case $line in *FAILED) failures+=("$1") ;; esac
}

echo "=== 5: end-to-end MF, embedded, essp (pace_mf vs --baseline) ==="
"$bin/pace_gen" ratings --users=20000 --items=5000 --rank=8 --ratings=1000000 --noise=0.5 \
  --seed=3 --out="$work/ratings.txt" >/dev/null
mf=("$bin/pace_mf" --train="$work/ratings.txt" --clocks=10 --consistency=essp)
end_to_end ratings mf 1 "${mf[@]}"
ratio_line "5 MF ratings/s, 1 worker vs plain SGD loop" "$one" "$base" 0.5
ratio_line "5 MF ratings/s, 2 workers vs plain SGD loop" "$two" "$base" 0.9
steady_line "5s MF steady state (clocks 1-9), 1 worker" "$sone" "$sbase"
steady_line "5s MF steady state (clocks 1-9), 2 workers" "$stwo" "$sbase"

echo "=== 6: end-to-end LDA, embedded, essp (pace_lda vs --baseline) ==="
"$bin/pace_gen" corpus --docs=5000 --vocab=10000 --topics=50 --doc_len=150 --seed=2 \
  --out_docword="$work/docword.txt" --out_vocab="$work/vocab.txt" >/dev/null
lda=("$bin/pace_lda" --docword="$work/docword.txt" --topics=50 --clocks=10 --topics_out=0)
end_to_end tokens lda 2 "${lda[@]}"
ratio_line "6 LDA tokens/s, 1 worker vs plain Gibbs loop" "$one" "$base" 0.5
ratio_line "6 LDA tokens/s, 2 workers vs plain Gibbs loop" "$two" "$base" 0.9
steady_line "6s LDA steady state (sampling clocks 2-10), 1 worker" "$sone" "$sbase"
steady_line "6s LDA steady state (sampling clocks 2-10), 2 workers" "$stwo" "$sbase"

echo "=== 7: SSP vs ESSP, s = 4: time to a fixed training loss, share of time blocked ==="
for model in ssp essp; do
  "$bin/pace_mf" --train="$work/ratings.txt" --clocks=20 --workers=2 --consistency=$model \
    --staleness=4 --straggler_ms=20 --straggler_prob=0.2 --data_dir="$work/s7-$model" \
    --csv="$work/s7-$model.csv" >/dev/null 2>&1
done
# Target loss: the worse of the two final losses (both runs reach it).
awk -F, 'FNR == 1 { next } { loss[FILENAME] = $3 } END { t = 0; for (f in loss) if (loss[f] > t) t = loss[f]; print t }' \
  "$work/s7-ssp.csv" "$work/s7-essp.csv" > "$work/target"
target=$(cat "$work/target")
for model in ssp essp; do
  awk -F, -v t="$target" -v m=$model 'FNR == 1 { next }
    { n++; blocked += $7; if (!done && $3 <= t) { done = 1; secs = $2; clk = $1 } }
    END { printf "%s: reached train loss %.5f at clock %d after %.2f s; blocked %.1f%% of the time on average\n", m, t, clk, secs, blocked / n }' \
    "$work/s7-$model.csv" | tee -a "$ratios" | tee "$work/s7-$model.txt"
done
s_ssp=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "after") print $(i+1) }' "$work/s7-ssp.txt")
s_essp=$(awk '{ for (i = 1; i <= NF; i++) if ($i == "after") print $(i+1) }' "$work/s7-essp.txt")
awk -v a="$s_ssp" -v b="$s_essp" 'BEGIN { printf "RATIO 7 time to target loss, SSP / ESSP (s=4): %.3f (>1: ESSP faster; no target)\n", (b > 0) ? a / b : 0 }' | tee -a "$ratios"

echo "=== 8: the apps at model scale (8a-8f, tools/bench/model_scale.sh) ==="
if [ "${BENCH_MODEL_SCALE:-all}" != none ]; then
  # shellcheck disable=SC2086  # a list of jobs
  BENCH_REPS=$reps bash "$(dirname "$0")/model_scale.sh" "$build" ${BENCH_MODEL_SCALE:-all} |
    tee "$work/ms.txt" || failures+=("8 (model_scale.sh)")
  grep -E '^RATIO 8|^8[a-f]? .*peak|^SKIPPED' "$work/ms.txt" >> "$ratios" || true
fi

if [ -d "$build/python/pacedb" ]; then
  PYTHONPATH="$build/python" "${PACE_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/../../python/bench/batch_bench.py" "$bin" ||
    failures+=("9 (batch_bench.py)")
  echo "=== 10: pacedb.torch MF vs plain PyTorch (python/bench/torch_bench.py) ==="
  PYTHONPATH="$build/python" "${PACE_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/../../python/bench/torch_bench.py" \
    ${BENCH_QUICK:+--quick} || failures+=("10 (torch_bench.py)")
else
  echo "(9, 10: Python benchmarks skipped: no $build/python/pacedb)"
fi
echo "=== 11: re-shard a checkpoint vs export of the same rows (tools/bench/reshard.sh) ==="
BENCH_REPS=$reps bash "$(dirname "$0")/reshard.sh" "$build" || failures+=("11 (reshard.sh)")
echo
echo "=== summary (also in $ratios) ==="
grep -E '^RATIO|^SKIPPED' "$ratios" || true
if [ ${#failures[@]} -gt 0 ]; then
  echo "FAILED: benchmarks with a target that did not run or produced no ratio:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
