#!/usr/bin/env bash
# tools/experiments/breakdown.sh [OUTDIR] — where the time goes (the paper's
# breakdown figure) and what each model sends: per clock, a worker's
# computation vs waiting for parameters (in Get/Read: fetch round trips and
# reads held back by the bound) vs waiting in Clock (for the slower processes
# and the batch's acknowledgement), as stacked bars; and the bytes and
# messages per clock. For pace_mf (generated ratings, as convergence.sh) and
# pace_lda (FOLDOC, or CORPUS=generated as lda.sh), under BSP, SSP and ESSP at
# each s of S_LIST, and async.
#
# The numbers come from each client's --clock_trace and each shard's counters
# (traces.py summary): per process and clock, averaged over the clocks after
# the first and over the processes. "compute" is the wall time not spent
# blocked; on a loaded machine it includes waiting for a core.
#
# Writes OUTDIR (default $BUILD/experiments/breakdown):
#   breakdown-mf.csv, breakdown-lda.csv   traces.py's columns per run
#   breakdown.png          the stacked bars (top) and traffic (bottom), MF left, LDA right
#   runs-mf/, runs-lda/    per-run files
#
# Settings (environment): BUILD, S_LIST ("2 8"), CLOCKS (15), CLIENTS (2),
# WORKERS (1), STRAGGLER_MS (0: a straggler's sleep would count as compute),
# STRAGGLER_PROB (0.1), PIN (1), USERS, ITEMS,
# RATINGS (8,000 x 3,000, 600k); PLOT_ONLY=1 redraws from an existing OUTDIR.
# Takes ~4 minutes.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/breakdown}
S_LIST=${S_LIST:-2 8}
CLOCKS=${CLOCKS:-15}
STRAGGLER_MS=${STRAGGLER_MS:-0}
STRAGGLER_PROB=${STRAGGLER_PROB:-0.1}
here=$(cd "$(dirname "$0")" && pwd)

APP=pace_lda need_binaries
need_binaries
need_gnuplot
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pace-breakdown.XXXXXX")
trap 'stop_shards; rm -rf "$WORK"' EXIT

# run_app mf|lda FLAGS...: every run of run_specs, then traces.py's summary.
run_app() {
  local app=$1 names=() spec model s name
  shift
  mkdir -p "$OUT/runs-$app"
  for spec in $(run_specs); do
    model=${spec%:*} s=${spec#*:}
    name=$model-s$s
    names+=("$name")
    log "$app $name: $CLIENTS clients x $WORKERS workers, $CLOCKS clocks ($(load_note))"
    run_job "$name" "$OUT/runs-$app" "$WORK" --consistency="$model" --staleness="$s" \
      --clocks="$CLOCKS" --straggler_ms="$STRAGGLER_MS" --straggler_prob="$STRAGGLER_PROB" "$@" ||
      log "$name failed; its lines are kept"
  done
  python3 "$here/traces.py" summary "$OUT/runs-$app" "${names[@]}" >"$OUT/breakdown-$app.csv"
  echo "# $(load_note) at the end" >>"$OUT/breakdown-$app.csv"
}

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  prepare_data "$OUT/data" "${USERS:-8000}" "${ITEMS:-3000}" "${RATINGS:-600000}"
  APP=pace_mf run_app mf --lr=0.12 --lr_power=0.5
  prepare_corpus "$OUT/data"
  APP=pace_lda run_app lda --topics=20
fi
for app in mf lda; do
  echo "== $app"
  grep -v '^#' "$OUT/breakdown-$app.csv" | cut -d, -f1,3-8,12,13,15 | column -s, -t
done | tee "$OUT/summary.txt"

# Columns of traces.py summary: 1 run, 4 compute_s, 5 get_wait_s,
# 6 clock_wait_s, 8 bytes_per_clock, 12 shard_messages_per_clock.
gnuplot <<EOF
set terminal pngcairo size 1300,900 font ',11'
set output '$OUT/breakdown.png'
set datafile separator ','
set datafile commentschars '#'
set multiplot layout 2,2 title "Per clock and process: where a worker's time goes, and the traffic ($CLIENTS clients x $WORKERS workers, straggler ${STRAGGLER_MS} ms p=$STRAGGLER_PROB; $(load_note))" noenhanced
set style data histogram
set style fill solid 0.85 border -1
set boxwidth 0.75
set grid ytics
set xtics rotate by -30 noenhanced
set key below horizontal
set style histogram rowstacked
set ylabel 'seconds per clock (one worker)'
set title 'pace_mf: time per clock' noenhanced
plot '$OUT/breakdown-mf.csv' every ::1 using 4:xtic(1) title 'compute' lc rgb '#1b9e77', \
     '' every ::1 using 5 title 'waiting in Get (parameters)' lc rgb '#d95f02', \
     '' every ::1 using 6 title 'waiting in Clock (other processes, acks)' lc rgb '#7570b3'
set title 'pace_lda (${CORPUS:-foldoc}): time per clock' noenhanced
plot '$OUT/breakdown-lda.csv' every ::1 using 4:xtic(1) title 'compute' lc rgb '#1b9e77', \
     '' every ::1 using 5 title 'waiting in Get (parameters)' lc rgb '#d95f02', \
     '' every ::1 using 6 title 'waiting in Clock (other processes, acks)' lc rgb '#7570b3'
set style histogram clustered gap 1
set ylabel 'per clock and process'
set logscale y
set yrange [1:*]
set title 'pace_mf: traffic per clock' noenhanced
plot '$OUT/breakdown-mf.csv' every ::1 using (\$8 / 1024):xtic(1) title 'KiB sent + received' lc rgb '#e7298a', \
     '' every ::1 using 12 title 'messages (shard counters)' lc rgb '#66a61e'
set title 'pace_lda (${CORPUS:-foldoc}): traffic per clock' noenhanced
plot '$OUT/breakdown-lda.csv' every ::1 using (\$8 / 1024):xtic(1) title 'KiB sent + received' lc rgb '#e7298a', \
     '' every ::1 using 12 title 'messages (shard counters)' lc rgb '#66a61e'
unset multiplot
EOF
log "wrote $OUT/breakdown.png, $OUT/breakdown-mf.csv, $OUT/breakdown-lda.csv"
