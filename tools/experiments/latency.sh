#!/usr/bin/env bash
# tools/experiments/latency.sh [OUTDIR] — the staleness and convergence
# comparisons of SSP and ESSP (staleness.sh, convergence.sh) rerun with a
# one-way latency between every client and every shard: each connection goes
# through pace_delay_proxy (tools/proxy/) adding LAT ms per chunk in each
# direction, for LAT in $LATENCIES (default "1 10 50").
#
# Writes OUTDIR (default $BUILD/experiments/latency):
#   lat-<L>/staleness/, lat-<L>/convergence/   each script's own output
#   latency_summary.csv   per latency and model: mean staleness, share of
#                         reads at 0-2, and per s: final test RMSE, job
#                         time, blocked %, seconds until clock CLOCKS-2
#   latency.png           job time and final test RMSE against latency
#
# Sized to run in a few minutes on a shared 2-core machine: 2,000 x 1,000
# users/items, 100k ratings, 20 clocks, S=4 for the staleness runs, S_LIST
# "2 8" for convergence (override any of USERS, ITEMS, RATINGS, CLOCKS, S,
# S_LIST, LATENCIES, and the other scripts' settings). pace_mf evaluates the
# test RMSE every clock, and that evaluation reads rows one round trip at a
# time (docs/experiments.md, section 5): MF_EXTRA_FLAGS=--eval_every=1000
# evaluates only at the last clock, so that the time to clock CLOCKS-2
# measures training alone. PLOT_ONLY=1 redraws latency.png from an existing
# OUTDIR/latency_summary.csv.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/latency}
LATENCIES=${LATENCIES:-1 10 50}
export USERS=${USERS:-2000} ITEMS=${ITEMS:-1000} RATINGS=${RATINGS:-100000}
export CLOCKS=${CLOCKS:-20} S=${S:-4} S_LIST=${S_LIST:-2 8}
# Without convergence.sh's BSP and async ends: each run costs minutes at 50 ms.
export BUILD ENDS=0

PROXY_DELAY_MS=1 need_binaries
need_gnuplot
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

if [ "${PLOT_ONLY:-0}" != 1 ]; then
echo "latency_ms,model,mean_staleness,reads_0_2_pct,s,final_test_rmse,seconds,blocked_pct,seconds_to_clock_n_minus_2" \
  >"$OUT/latency_summary.csv"
for lat in $LATENCIES; do
  log "one-way latency $lat ms: staleness.sh (s=$S)"
  PROXY_DELAY_MS=$lat bash "$here/staleness.sh" "$OUT/lat-$lat/staleness" >"$OUT/lat-$lat.staleness.log" 2>&1 ||
    die "staleness.sh at $lat ms failed (see $OUT/lat-$lat.staleness.log)"
  log "one-way latency $lat ms: convergence.sh (s in $S_LIST)"
  PROXY_DELAY_MS=$lat bash "$here/convergence.sh" "$OUT/lat-$lat/convergence" \
    >"$OUT/lat-$lat.convergence.log" 2>&1 ||
    die "convergence.sh at $lat ms failed (see $OUT/lat-$lat.convergence.log)"
  for model in ssp essp; do
    # "ssp   reads  123  mean staleness  1.23  at 0-2:  45.6%  run  7.8 s"
    read -r mean low < <(awk -v m="$model" '$1 == m && $2 == "reads" {
        for (i = 1; i <= NF; ++i) { if ($i == "staleness") mean = $(i + 1); if ($i == "0-2:") low = $(i + 1) }
        sub(/%/, "", low); print mean, low }' "$OUT/lat-$lat/staleness/summary.txt")
    # The clock before the last: with MF_EXTRA_FLAGS=--eval_every=N > CLOCKS
    # it holds training only (the one evaluation runs at the last clock).
    awk -F, -v lat="$lat" -v m="$model" -v mean="$mean" -v low="$low" -v out="$OUT" -v c=$((CLOCKS - 2)) '
      NR > 1 && $1 == m {
        t = ""; f = out "/lat-" lat "/convergence/runs/" m "-s" $2 ".csv"
        while ((getline line < f) > 0) { split(line, x, ","); if (x[1] == c) t = x[2] }
        close(f)
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s\n", lat, m, mean, low, $2, $5, $6, $7, t
      }' "$OUT/lat-$lat/convergence/summary.csv" >>"$OUT/latency_summary.csv"
  done
done
fi
column -s, -t "$OUT/latency_summary.csv" | tee "$OUT/latency_summary.txt"

# One data file per (model, s), so gnuplot draws lines between latencies.
plot_lines() {
  local ycol=$1 model s out="" f
  for model in ssp essp; do
    for s in $S_LIST; do
      f=$OUT/plot-$model-s$s.csv
      awk -F, -v m="$model" -v s="$s" 'NR > 1 && $2 == m && $5 == s' "$OUT/latency_summary.csv" >"$f"
      out+="${out:+, }'$f' using 1:$ycol with linespoints pt 7 lw 2"
      out+=" dt $([ "$model" = ssp ] && echo 2 || echo 1) title '$model s=$s'"
    done
  done
  echo "$out"
}
gnuplot <<EOF
set terminal pngcairo size 1100,450 font ',11'
set output '$OUT/latency.png'
set datafile separator ','
set multiplot layout 1,2 title "pace_mf, SSP vs ESSP with one-way latency between clients and shards (pace_delay_proxy), $CLOCKS clocks ${MF_EXTRA_FLAGS:-}" noenhanced
set grid
set logscale x
set xrange [0.8:70]
set xtics (1, 10, 50)
set xlabel 'one-way latency (ms)'
set key top left
set logscale y
set ylabel 'job time (s)'
plot $(plot_lines 7)
unset logscale y
set ylabel 'final test RMSE'
plot $(plot_lines 6)
unset multiplot
EOF
rm -f "$OUT"/plot-*.csv
log "wrote $OUT/latency_summary.csv, $OUT/latency.png"
