#!/usr/bin/env bash
# tools/experiments/vap.sh [OUTDIR] — VAP against ESSP and SSP: the paper's
# claim that ESSP gets the benefit of value-bounded consistency at a fraction
# of its cost. pace_mf as in convergence.sh (lr 0.12/sqrt(t+1), stragglers),
# under SSP and ESSP with s = $S, vap with each value bound v of V_LIST, and
# BSP and async as the ends.
#
# Writes OUTDIR (default $BUILD/experiments/vap):
#   vap.csv          run, and every run's per-clock line
#   summary.csv      per run: final test RMSE, job time, and traces.py's time,
#                    traffic and staleness columns
#   vap.png          test RMSE per clock and per second; time blocked and
#                    messages per clock
#   runs/            per-run files
#
# Settings (environment): BUILD, S (4), V_LIST ("0.01 0.1 1"), LR (0.12),
# CLOCKS (40), CLIENTS (2), WORKERS (1), STRAGGLER_MS (150), STRAGGLER_PROB
# (0.1), PIN (1), USERS, ITEMS, RATINGS (8,000 x 3,000, 600k); PLOT_ONLY=1
# redraws from an existing OUTDIR. Takes ~2-4 minutes.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/vap}
S=${S:-4}
V_LIST=${V_LIST:-0.01 0.1 1}
LR=${LR:-0.12}
CLOCKS=${CLOCKS:-40}
STRAGGLER_MS=${STRAGGLER_MS:-150}
STRAGGLER_PROB=${STRAGGLER_PROB:-0.1}
here=$(cd "$(dirname "$0")" && pwd)

need_binaries
need_gnuplot
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pace-vap.XXXXXX")
trap 'stop_shards; rm -rf "$WORK"' EXIT

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  prepare_data "$OUT/data" "${USERS:-8000}" "${ITEMS:-3000}" "${RATINGS:-600000}"
  runs=("bsp:--consistency=bsp" "ssp-s$S:--consistency=ssp --staleness=$S"
    "essp-s$S:--consistency=essp --staleness=$S")
  for v in $V_LIST; do runs+=("vap-v$v:--consistency=vap --value_bound=$v"); done
  runs+=("async:--consistency=async")
  echo "run,clock,seconds,train_loss,test_rmse,staleness_mean,staleness_p99,blocked_pct" >"$OUT/vap.csv"
  echo "run,final_test_rmse,job_seconds" >"$OUT/finals.csv"
  names=()
  for spec in "${runs[@]}"; do
    name=${spec%%:*}
    names+=("$name")
    log "$name: $CLIENTS clients x $WORKERS workers, $CLOCKS clocks ($(load_note))"
    # shellcheck disable=SC2086  # the run's flags are a list of words
    run_job "$name" "$OUT/runs" "$WORK" ${spec#*:} --clocks="$CLOCKS" --lr="$LR" --lr_power=0.5 \
      --straggler_ms="$STRAGGLER_MS" --straggler_prob="$STRAGGLER_PROB" ||
      log "$name failed; its lines are kept"
    awk -F, -v r="$name" 'NR > 1 { print r "," $0 }' "$OUT/runs/$name.csv" >>"$OUT/vap.csv"
    awk -F, -v r="$name" -v secs="$JOB_SECONDS" 'NR > 1 { last = $4 } END { print r "," last "," secs }' \
      "$OUT/runs/$name.csv" >>"$OUT/finals.csv"
  done
  python3 "$here/traces.py" summary "$OUT/runs" "${names[@]}" >"$OUT/traces.csv"
  paste -d, "$OUT/finals.csv" <(cut -d, -f2- "$OUT/traces.csv") >"$OUT/summary.csv"
  echo "# $(load_note) at the end" >>"$OUT/summary.csv"
fi
grep -v '^#' "$OUT/summary.csv" | cut -d, -f1-3,5-8,10,14,15,17 | column -s, -t | tee "$OUT/summary.txt"

# One line per run; columns of vap.csv: 2 clock, 3 seconds, 5 test_rmse.
lines() {
  local x=$1 out="" name i=0
  local colors=('black' '#d95f02' '#1b9e77' '#7570b3' '#e7298a' '#66a61e' '#e6ab02' '#888888')
  for name in $(cut -d, -f1 "$OUT/finals.csv" | tail -n +2); do
    out+="${out:+, }'$OUT/vap.csv' using (strcol(1) eq '$name' ? \$$x : 1/0):5 with linespoints"
    out+=" pt 7 ps 0.4 lw 2 lc rgb '${colors[$((i % ${#colors[@]}))]}' title '$name'"
    i=$((i + 1))
  done
  echo "$out"
}
# summary.csv: 1 run, 7 get_wait_s, 8 clock_wait_s, 14 shard_messages_per_clock.
gnuplot <<EOF
set terminal pngcairo size 1300,900 font ',11'
set output '$OUT/vap.png'
set datafile separator ','
set datafile commentschars '#'
set multiplot layout 2,2 title "VAP vs ESSP and SSP: pace_mf, lr $LR/sqrt(t+1), $CLIENTS clients x $WORKERS workers, straggler ${STRAGGLER_MS} ms p=$STRAGGLER_PROB ($(load_note))" noenhanced
set grid
set key top right noenhanced
set yrange [0.55:1.2]
set ylabel 'test RMSE'
set xlabel 'clock'
set title 'per clock'
plot $(lines 2)
set xlabel 'seconds'
set title 'per second'
plot $(lines 3)
unset xlabel
set yrange [0:*]
set style data histogram
set style fill solid 0.85 border -1
set boxwidth 0.75
set xtics rotate by -30 noenhanced
set key below horizontal
set style histogram rowstacked
set ylabel 'seconds per clock (one worker)'
set title 'time blocked per clock'
plot '$OUT/summary.csv' every ::1 using 7:xtic(1) title 'in Get' lc rgb '#d95f02', \
     '' every ::1 using 8 title 'in Clock (incl. the value bound)' lc rgb '#7570b3'
set style histogram clustered
set ylabel 'per clock and process'
set title 'messages the shards handled per clock'
plot '$OUT/summary.csv' every ::1 using 14:xtic(1) notitle lc rgb '#66a61e'
unset multiplot
EOF
log "wrote $OUT/vap.png, $OUT/summary.csv"
