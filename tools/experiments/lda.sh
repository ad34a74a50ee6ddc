#!/usr/bin/env bash
# tools/experiments/lda.sh [OUTDIR] — the paper's topic-model panels: LDA
# (pace_lda, collapsed Gibbs sampling) under SSP and ESSP for staleness bounds
# s in {0, 2, 4, 8, 16}, with BSP and async as the two ends; log-likelihood
# per clock and per second.
#
# Each run is pace_lda on 2 paced shards and $CLIENTS client processes
# (loopback, one per core with PIN=1), the same corpus, seed and topics, with
# stragglers as in convergence.sh (each worker sleeps STRAGGLER_MS at the start
# of a clock with probability STRAGGLER_PROB) so that the bound s is used.
#
# Writes OUTDIR (default $BUILD/experiments/lda-$CORPUS):
#   lda.csv                model, s, and every run's per-clock line
#   summary.csv            per run: final log-likelihood, time, and traces.py's
#                          time, traffic and staleness columns
#   loglik_per_clock.png   log-likelihood per clock, SSP left, ESSP right
#   loglik_per_second.png  the same against wall time
#   runs/                  per-run CSVs, histograms, traces, shard counters, logs
#
# Settings (environment): BUILD, CORPUS=foldoc|generated (FOLDOC from
# ../shared/data/get-datasets.sh, or pace_gen corpus with DOCS 30,000 x
# DOC_LEN 100 tokens over VOCAB 10,000 words, 50 planted topics), TOPICS (20),
# S_LIST ("0 2 4 8 16"), CLOCKS (30), CLIENTS (2), WORKERS (1), STRAGGLER_MS
# (150), STRAGGLER_PROB (0.1), PIN (1); PLOT_ONLY=1 redraws from an existing
# OUTDIR. Takes ~3 minutes (foldoc) or ~5 (generated) on 2 cores.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

CORPUS=${CORPUS:-foldoc}
OUT=${1:-$BUILD/experiments/lda-$CORPUS}
S_LIST=${S_LIST:-0 2 4 8 16}
CLOCKS=${CLOCKS:-30}
TOPICS=${TOPICS:-20}
STRAGGLER_MS=${STRAGGLER_MS:-150}
STRAGGLER_PROB=${STRAGGLER_PROB:-0.1}
APP=pace_lda

need_binaries
need_gnuplot
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pace-lda.XXXXXX")
trap 'stop_shards; rm -rf "$WORK"' EXIT
here=$(cd "$(dirname "$0")" && pwd)

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  prepare_corpus "$OUT/data"
  echo "model,s,clock,seconds,loglik,tokens_per_s,staleness_mean,staleness_p99,blocked_pct" \
    >"$OUT/lda.csv"
  echo "model,s,final_loglik,job_seconds" >"$OUT/finals.csv"
  names=()
  for spec in $(run_specs); do
    model=${spec%:*} s=${spec#*:}
    name=$model-s$s
    names+=("$name")
    log "$name: $CORPUS, $TOPICS topics, $CLIENTS clients x $WORKERS workers, $CLOCKS clocks" \
      "($(load_note))"
    run_job "$name" "$OUT/runs" "$WORK" --consistency="$model" --staleness="$s" \
      --clocks="$CLOCKS" --topics="$TOPICS" --straggler_ms="$STRAGGLER_MS" \
      --straggler_prob="$STRAGGLER_PROB" || log "$name failed; its lines are kept"
    awk -F, -v m="$model" -v s="$s" 'NR > 1 { print m "," s "," $0 }' "$OUT/runs/$name.csv" \
      >>"$OUT/lda.csv"
    awk -F, -v m="$model" -v s="$s" -v secs="$JOB_SECONDS" 'NR > 1 { last = $3 }
      END { print m "," s "," last "," secs }' "$OUT/runs/$name.csv" >>"$OUT/finals.csv"
  done
  python3 "$here/traces.py" summary "$OUT/runs" "${names[@]}" >"$OUT/traces.csv"
  paste -d, "$OUT/finals.csv" <(cut -d, -f2- "$OUT/traces.csv") >"$OUT/summary.csv"
  echo "# $(load_note) at the end" >>"$OUT/summary.csv"
fi
grep -v '^#' "$OUT/summary.csv" | cut -d, -f1-4,6-11,15-18 | column -s, -t | tee "$OUT/summary.txt"

plot_lda() {
  local x=$1 xlabel=$2 file=$3
  gnuplot <<EOF
set terminal pngcairo size 1200,480 font ',11'
set output '$file'
set datafile separator ','
set multiplot layout 1,2 title "pace_lda on $CORPUS, $TOPICS topics, $CLIENTS clients x $WORKERS workers, straggler ${STRAGGLER_MS} ms p=$STRAGGLER_PROB" noenhanced
set grid
set xlabel '$xlabel'
set ylabel 'log-likelihood'
set key bottom right
set title 'SSP (BSP and async as the ends)'
plot $(panel_lines "$OUT/lda.csv" ssp "$x" 5)
set title 'ESSP (BSP and async as the ends)'
plot $(panel_lines "$OUT/lda.csv" essp "$x" 5)
unset multiplot
EOF
}
plot_lda 3 'clock' "$OUT/loglik_per_clock.png"
plot_lda 4 'seconds' "$OUT/loglik_per_second.png"
log "wrote $OUT/loglik_per_clock.png, $OUT/loglik_per_second.png, $OUT/summary.csv"
