#!/usr/bin/env bash
# tools/experiments/bound.sh [OUTDIR] — the paper's SSP bound fed with the
# measured staleness, beside the measured convergence.
#
# Dai et al. bound the regret of SGD under SSP by a term that grows with the
# mean staleness mu and a tail that grows with its variance (traces.py,
# bound()). This script takes the runs of convergence.sh (SGD matrix
# factorization, BSP, SSP and ESSP at s in {0, 2, 4, 8, 16}, async; run first
# into CONV when CONV has no results), the staleness moments of every run
# (all reads of both clients), and plots per s:
#   left    the measured mu and sigma (the square root of the variance)
#   middle  the bound with those moments, relative to the same bound with
#           mu = var = 0 (the same s, P and T): what each model's staleness costs
#   right   what it cost in the run: the test RMSE averaged over the clocks
#           (a measure of convergence speed), minus BSP's
# Writes OUTDIR (default $BUILD/experiments/bound): bound.csv, bound.png.
#
# Settings (environment): BUILD, CONV (default $BUILD/experiments/convergence),
# and convergence.sh's when it runs. Takes ~6 minutes with the convergence
# runs, seconds without.
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/bound}
CONV=${CONV:-$BUILD/experiments/convergence}
S_LIST=${S_LIST:-0 2 4 8 16}
here=$(cd "$(dirname "$0")" && pwd)
need_gnuplot
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[ -s "$CONV/traces.csv" ] || S_LIST="$S_LIST" bash "$here/convergence.sh" "$CONV"

# traces.csv columns by name; convergence.csv: model,s,clock,..,test_rmse (6).
awk -F, '
  FNR == 1 { file++ }
  file == 1 && FNR > 1 { sum[$1 "-s" $2] += $6; n[$1 "-s" $2]++; next }
  file == 2 && FNR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
  file == 2 && !/^#/ {
    run = $1; m = run; sub(/-s[0-9]+$/, "", m); s = run; sub(/.*-s/, "", s)
    printf "%s,%s,%.4f,%.4f,%.4f,%.5f\n", m, s, $col["staleness_mean"], sqrt($col["staleness_var"]),
      $col["bound_rel"], n[run] ? sum[run] / n[run] : 0
  }' "$CONV/convergence.csv" "$CONV/traces.csv" |
  awk -F, 'BEGIN { print "model,s,staleness_mean,staleness_sd,bound_rel,mean_test_rmse,excess_over_bsp" }
    { line[NR] = $0; if ($1 == "bsp") bsp = $6 }
    END { for (i = 1; i <= NR; ++i) { split(line[i], f, ","); printf "%s,%.5f\n", line[i], f[6] - bsp } }' \
    >"$OUT/bound.csv"
column -s, -t "$OUT/bound.csv" | tee "$OUT/summary.txt"

gnuplot <<EOF
set terminal pngcairo size 1400,460 font ',11'
set output '$OUT/bound.png'
set datafile separator ','
set multiplot layout 1,3 title "SSP's bound with the measured staleness moments vs the measured convergence (pace_mf runs of convergence.sh)" noenhanced
set grid
set xlabel 'staleness bound s'
set key top left
set xrange [-0.5:*]
set title 'measured staleness of the reads'
set ylabel 'clocks'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):3 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP mean', \
     '' using (strcol(1) eq 'ssp' ? \$2 : 1/0):4 with linespoints pt 6 lw 2 dt 2 lc rgb '#d95f02' title 'SSP sd', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):3 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP mean', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):4 with linespoints pt 6 lw 2 dt 2 lc rgb '#1b9e77' title 'ESSP sd'
set title 'bound / bound at zero staleness (same s)'
set ylabel 'ratio'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):5 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):5 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP'
set title 'measured: mean test RMSE over the clocks, minus BSP'
set ylabel 'RMSE'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):7 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):7 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP', \
     '' using (strcol(1) eq 'async' ? 16 : 1/0):7 with points pt 9 ps 2 lc rgb '#888888' title 'async (at s = 16)'
unset multiplot
EOF
log "wrote $OUT/bound.png, $OUT/bound.csv"
