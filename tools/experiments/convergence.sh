#!/usr/bin/env bash
# tools/experiments/convergence.sh [OUTDIR] — the paper's Figure 2: SGD matrix
# factorization with a large step size under SSP and ESSP for staleness bounds
# s in {0, 2, 4, 8, 16}, with BSP and async as the two ends; training loss per
# clock and per second.
#
# Each run is pace_mf on 2 paced shards and $CLIENTS client processes
# (loopback), the same data, seed and step size eta0 / sqrt(t + 1) (the
# paper's schedule), with stragglers: each worker sleeps STRAGGLER_MS at the
# start of a clock with probability STRAGGLER_PROB, so workers drift apart as
# on a busy cluster and the bound s is actually used.
#
# Writes OUTDIR (default $BUILD/experiments/convergence):
#   convergence.csv         model, s, and every run's per-clock line
#   summary.csv             per run: final and best loss, test RMSE, time, blocked %, staleness
#   traces.csv              per run: traces.py's time, traffic and staleness columns
#   loss_per_clock.png      training loss and test RMSE per clock, SSP left, ESSP right
#   loss_per_second.png     the same against wall time
#   runs/                   per-run CSVs, histograms and logs
#
# Settings (environment): BUILD (build dir, default build/), DATA=synthetic|
# insteval, S_LIST ("0 2 4 8 16"), LR (0.12), CLOCKS (40), CLIENTS (2), WORKERS
# (per client, 1), STRAGGLER_MS (150), STRAGGLER_PROB (0.1), USERS, ITEMS,
# RATINGS (the generated data's size: 8,000 x 3,000, 600k), PIN (1: one
# process per core, lib.sh); PLOT_ONLY=1 redraws the figures from an existing
# OUTDIR/convergence.csv. Takes ~6 minutes.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/convergence}
S_LIST=${S_LIST:-0 2 4 8 16}
LR=${LR:-0.12}
CLOCKS=${CLOCKS:-40}
STRAGGLER_MS=${STRAGGLER_MS:-150}
STRAGGLER_PROB=${STRAGGLER_PROB:-0.1}

need_binaries
need_gnuplot
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pace-convergence.XXXXXX")
trap 'stop_shards; rm -rf "$WORK"' EXIT
[ "${PLOT_ONLY:-0}" = 1 ] || prepare_data "$OUT/data" "${USERS:-8000}" "${ITEMS:-3000}" "${RATINGS:-600000}"

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  echo "model,s,clock,seconds,train_loss,test_rmse,staleness_mean,staleness_p99,blocked_pct" \
    >"$OUT/convergence.csv"
  echo "model,s,final_train_loss,best_train_loss,final_test_rmse,seconds,blocked_pct,staleness_mean" \
    >"$OUT/summary.csv"
  names=()
  for spec in $(run_specs); do
    model=${spec%:*} s=${spec#*:}
    name=$model-s$s
    names+=("$name")
    log "$name: $CLIENTS clients x $WORKERS workers, lr $LR/sqrt(t+1), $CLOCKS clocks," \
      "straggler ${STRAGGLER_MS} ms p=$STRAGGLER_PROB ($(load_note))"
    run_job "$name" "$OUT/runs" "$WORK" --consistency="$model" --staleness="$s" \
      --clocks="$CLOCKS" --lr="$LR" --lr_power=0.5 --straggler_ms="$STRAGGLER_MS" \
      --straggler_prob="$STRAGGLER_PROB" || log "$name failed; its lines are kept"
    awk -F, -v m="$model" -v s="$s" 'NR > 1 { print m "," s "," $0 }' "$OUT/runs/$name.csv" \
      >>"$OUT/convergence.csv"
    # Mean of blocked % and staleness over the clocks; loss "nan" compares as
    # a string, so a diverged run shows nan.
    awk -F, -v m="$model" -v s="$s" -v secs="$JOB_SECONDS" '
      NR > 1 {
        last = $3; rmse = $4; ++n; blocked += $7; stale += $5
        if ($3 == $3 + 0 && (best == "" || $3 + 0 < best)) best = $3 + 0
      }
      END { printf "%s,%s,%s,%s,%s,%s,%.1f,%.2f\n", m, s, last, best, rmse, secs,
            n ? blocked / n : 0, n ? stale / n : 0 }' "$OUT/runs/$name.csv" >>"$OUT/summary.csv"
  done
  python3 "$(dirname "$0")/traces.py" summary "$OUT/runs" "${names[@]}" >"$OUT/traces.csv"
  echo "# $(load_note) at the end" >>"$OUT/traces.csv"
fi
column -s, -t "$OUT/summary.csv" | tee "$OUT/summary.txt"

# A column per model (SSP left, ESSP right), a line per s, BSP and async as
# the ends; top row the training loss, bottom row the test RMSE. Logarithmic
# loss axis, capped, so a run that diverges leaves the top of its panel.
plot_runs() {
  local xcol=$1 xlabel=$2 file=$3 model ycol
  declare -A lines
  for model in ssp essp; do
    for ycol in 5 6; do lines[$model$ycol]=$(panel_lines "$OUT/convergence.csv" "$model" "$xcol" "$ycol"); done
  done
  local xmax
  xmax=$(awk -F, -v c="$xcol" 'NR > 1 && $c + 0 > m { m = $c + 0 } END { print m * 1.02 }' \
    "$OUT/convergence.csv")
  gnuplot <<EOF
set terminal pngcairo size 1200,860 font ',11'
set output '$file'
set datafile separator ','
set datafile missing 'nan'
set multiplot layout 2,2 title "pace_mf, lr $LR/sqrt(t+1), $CLIENTS clients x $WORKERS workers, straggler ${STRAGGLER_MS} ms p=$STRAGGLER_PROB, ${DATA:-synthetic} data" noenhanced
set grid
set xrange [0:$xmax]
set xlabel '$xlabel'
set key top right
set logscale y
set yrange [0.1:3]
set ylabel 'training loss (mean squared error)'
set title 'SSP'
plot ${lines[ssp5]}
set title 'ESSP'
plot ${lines[essp5]}
unset logscale y
set yrange [0<*:*<2]
set ylabel 'test RMSE'
set title 'SSP'
plot ${lines[ssp6]}
set title 'ESSP'
plot ${lines[essp6]}
unset multiplot
EOF
}
plot_runs 3 'clock' "$OUT/loss_per_clock.png"
plot_runs 4 'seconds' "$OUT/loss_per_second.png"
log "wrote $OUT/loss_per_clock.png, $OUT/loss_per_second.png, $OUT/convergence.csv, $OUT/summary.csv"
