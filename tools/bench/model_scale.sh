#!/usr/bin/env bash
# tools/bench/model_scale.sh [BUILD_DIR] [JOB...] — benchmark 8: the apps at model scale, each
# against its baseline on the same data in the same run. JOBs (default 8a; "all" = every one):
#   8a  pace_mf, 600k users x 20k items, 700k ratings, rank 128, 3 clocks of 40%, embedded:
#       8a at default budgets, 8b with --memory_mb at a tenth of the factor tables (mf_scale.sh)
#   8c  the dense shape: 480k users x 17,770 items, 9.9M ratings, 1 and 2 workers (dense_shape.sh)
#   8d  out of core: the 8a data, --memory_mb=64, in a 192 MB memory cgroup, against
#       pace_mf --baseline_mmap in the same cgroup (out_of_core.sh)
#   8e  pace_lda, 20k docs x 200 tokens, 100k words, 500 topics, --memory_mb=256 (lda_scale.sh)
#   8f  the 8a job over TCP: one paced, one pace_mf --servers (tcp_scale.sh)
#   8g  the durability tax: the 8a job as shipped vs --benchmark_no_durability
#       (durability_tax.sh)
# Each job prints "# load average:" before and after, runs subject and baseline interleaved
# BENCH_REPS times (default 3), and prints one RATIO line per comparison (medians). The whole
# set takes long: run one job at a time, e.g. `bash tools/bench/model_scale.sh build 8d`.
# Exits 1 if a comparison with a target did not run (a missed target is reported, not a
# failure); a job that cannot run here (8d without a writable memory cgroup) prints
# "SKIPPED: <reason>" and does not fail.
#
# Environment:
#   BENCH_REPS       runs of each subject and baseline (default 3)
#   BENCH_SKEW       Zipf exponents of the ratings (pace_gen --skew), space-separated; default
#                    "0" (uniform); "0 1.0" reports both (labels of skewed runs end ", skew 1")
#   BENCH_DATA_DIR   where generated inputs are kept between runs (default BUILD_DIR/bench/data)
#   BENCH_TIMEOUT_S  a run that takes longer is stopped and counts as not run (default 3600)
#   sizes, for smoke runs: BENCH_MS_USERS, BENCH_MS_ITEMS, BENCH_MS_RATINGS, BENCH_MS_RANK
#   (the 8a data, also 8d and 8f); BENCH_DENSE_* (8c), BENCH_LDA_* (8e), BENCH_CGROUP_MB and
#   BENCH_OOC_MEMORY_MB (8d), BENCH_TCP_TIMEOUT_S (8f): see each script's header.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
shift || true
jobs=("$@")
[ ${#jobs[@]} -eq 0 ] && jobs=(8a)
[ "${jobs[*]}" = all ] && jobs=(8a 8c 8d 8e 8f 8g)

status=0
others=()
run_8a=0
for job in "${jobs[@]}"; do
  case $job in
    8a | 8b) run_8a=1 ;;
    8c) others+=(dense_shape.sh) ;;
    8d) others+=(out_of_core.sh) ;;
    8e) others+=(lda_scale.sh) ;;
    8f) others+=(tcp_scale.sh) ;;
    8g) others+=(durability_tax.sh) ;;
    *) echo "model_scale.sh: unknown job '$job' (expected 8a, 8b, 8c, 8d, 8e, 8f, 8g or all)" >&2; exit 2 ;;
  esac
done

if [ "$run_8a" = 1 ]; then
  bash "$here/mf_scale.sh" "$build" || status=1
fi
for script in "${others[@]}"; do
  bash "$here/$script" "$build" || status=1
done
exit $status
