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
#                         time, blocked %
#   latency.png           job time and final test RMSE against latency
#
# Sized to run in a few minutes on a shared 2-core machine: 2,000 x 1,000
# users/items, 100k ratings, 20 clocks, S=4 for the staleness runs, S_LIST
# "2 8" for convergence (override any of USERS, ITEMS, RATINGS, CLOCKS, S,
# S_LIST, LATENCIES, and the other scripts' settings).
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/latency}
LATENCIES=${LATENCIES:-1 10 50}
export USERS=${USERS:-2000} ITEMS=${ITEMS:-1000} RATINGS=${RATINGS:-100000}
export CLOCKS=${CLOCKS:-20} S=${S:-4} S_LIST=${S_LIST:-2 8}
export BUILD

PROXY_DELAY_MS=1 need_binaries
need_gnuplot
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

echo "latency_ms,model,mean_staleness,reads_0_2_pct,s,final_test_rmse,seconds,blocked_pct" \
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
    awk -F, -v lat="$lat" -v m="$model" -v mean="$mean" -v low="$low" '
      NR > 1 && $1 == m { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", lat, m, mean, low, $2, $5, $6, $7 }' \
      "$OUT/lat-$lat/convergence/summary.csv" >>"$OUT/latency_summary.csv"
  done
done
column -s, -t "$OUT/latency_summary.csv" | tee "$OUT/latency_summary.txt"

plot_lines() {
  local ycol=$1 model s out=""
  for model in ssp essp; do
    for s in $S_LIST; do
      out+="${out:+, }'$OUT/latency_summary.csv' using (strcol(2) eq '$model' && \$5 == $s ? \$1 : 1/0):$ycol"
      out+=" with linespoints pt 7 lw 2 dt $([ "$model" = ssp ] && echo 2 || echo 1) title '$model s=$s'"
    done
  done
  echo "$out"
}
gnuplot <<EOF
set terminal pngcairo size 1100,450 font ',11'
set output '$OUT/latency.png'
set datafile separator ','
set multiplot layout 1,2 title "pace_mf, SSP vs ESSP with one-way latency between clients and shards (pace_delay_proxy), $CLOCKS clocks" noenhanced
set grid
set logscale x
set xrange [0.8:70]
set xtics (1, 10, 50)
set xlabel 'one-way latency (ms)'
set key top left
set ylabel 'job time (s)'
plot $(plot_lines 7)
set ylabel 'final test RMSE'
set yrange [*:*]
plot $(plot_lines 6)
unset multiplot
EOF
log "wrote $OUT/latency_summary.csv, $OUT/latency.png"
