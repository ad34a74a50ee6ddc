#!/usr/bin/env bash
# tools/experiments/bound.sh [OUTDIR] — the paper's SSP bound fed with the
# measured staleness, beside the measured convergence.
#
# Dai et al. (AAAI 2015) bound, with high probability, the regret per update
# of SGD under SSP by a term that grows with the mean of the staleness gamma_t
# (missing updates, counted per update) and a tail that grows with its
# variance and with (2s + 1) P (traces.py, bound() and update_moments();
# docs/experiments.md, section 8). This script takes the runs of
# convergence.sh (SGD matrix factorization, BSP, SSP and ESSP at s in
# {0, 2, 4, 8, 16}, async; run first into CONV when CONV has no results) and
# plots per s:
#   left    the measured gamma per update: mean and standard deviation
#   middle  the bound with those moments, relative to the same bound with
#           mu = var = 0 (the same s, P and T): what each model's staleness
#           costs in the bound (its constants L and F are unknown for MF, so
#           only this shape can be compared, not values)
#   right   what it cost in the run: the training loss the workers measured
#           on the values they read (the run's analogue of the regret per
#           update), averaged over the clocks, minus BSP's; and the same for
#           the test RMSE
# Writes OUTDIR (default $BUILD/experiments/bound): bound.csv, bound.png,
# summary.txt. bound.csv columns: model, s, per-read staleness mean and sd,
# bound_rel, mean test RMSE and its excess over BSP, gamma mean and sd,
# bound_lf (the bound in units of L*F), mean training loss and its excess.
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

# traces.csv columns by name; convergence.csv: model,s,clock,seconds,
# train_loss (5),test_rmse (6),...
awk -F, '
  FNR == 1 { file++ }
  file == 1 && FNR > 1 {
    r = $1 "-s" $2; rmse[r] += $6; loss[r] += $5; n[r]++; next
  }
  file == 2 && FNR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
  file == 2 && !/^#/ {
    run = $1; m = run; sub(/-s[0-9]+$/, "", m); s = run; sub(/.*-s/, "", s)
    printf "%s,%s,%.4f,%.4f,%.4f,%.5f,%.4f,%.4f,%.4f,%.5f\n", m, s, $col["staleness_mean"],
      sqrt($col["staleness_var"]), $col["bound_rel"], n[run] ? rmse[run] / n[run] : 0,
      $col["gamma_mean"], sqrt($col["gamma_var"]), $col["bound_lf"], n[run] ? loss[run] / n[run] : 0
  }' "$CONV/convergence.csv" "$CONV/traces.csv" |
  awk -F, 'BEGIN {
      print "model,s,staleness_mean,staleness_sd,bound_rel,mean_test_rmse,excess_over_bsp," \
            "gamma_mean,gamma_sd,bound_lf,mean_train_loss,train_excess_over_bsp"
    }
    { line[NR] = $0; if ($1 == "bsp") { bsp = $6; bsp_loss = $10 } }
    END {
      for (i = 1; i <= NR; ++i) {
        split(line[i], f, ",")
        printf "%s,%s,%s,%s,%s,%s,%.5f,%s,%s,%s,%s,%.5f\n", f[1], f[2], f[3], f[4], f[5], f[6],
          f[6] - bsp, f[7], f[8], f[9], f[10], f[10] - bsp_loss
      }
    }' >"$OUT/bound.csv"
column -s, -t "$OUT/bound.csv" | tee "$OUT/summary.txt"

gnuplot <<EOF
set terminal pngcairo size 1400,460 font ',11'
set output '$OUT/bound.png'
set datafile separator ','
set multiplot layout 1,3 title "The SSP bound of Dai et al. with the measured staleness moments, beside the measured convergence (pace_mf runs of convergence.sh)" noenhanced
set grid
set xlabel 'staleness bound s'
set key top left
set xrange [-0.5:*]
set title 'staleness gamma per update (missing updates)'
set ylabel 'updates'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):8 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP mean', \
     '' using (strcol(1) eq 'ssp' ? \$2 : 1/0):9 with linespoints pt 6 lw 2 dt 2 lc rgb '#d95f02' title 'SSP sd', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):8 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP mean', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):9 with linespoints pt 6 lw 2 dt 2 lc rgb '#1b9e77' title 'ESSP sd'
set title 'bound / bound at zero staleness (same s, P, T)'
set ylabel 'ratio'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):5 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):5 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP'
set title 'measured: mean over the clocks, minus BSP'
set ylabel 'excess'
plot '$OUT/bound.csv' using (strcol(1) eq 'ssp' ? \$2 : 1/0):12 with linespoints pt 7 lw 2 lc rgb '#d95f02' title 'SSP training loss', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):12 with linespoints pt 7 lw 2 lc rgb '#1b9e77' title 'ESSP training loss', \
     '' using (strcol(1) eq 'ssp' ? \$2 : 1/0):7 with linespoints pt 6 lw 1 dt 2 lc rgb '#d95f02' title 'SSP test RMSE', \
     '' using (strcol(1) eq 'essp' ? \$2 : 1/0):7 with linespoints pt 6 lw 1 dt 2 lc rgb '#1b9e77' title 'ESSP test RMSE', \
     '' using (strcol(1) eq 'async' ? 16 : 1/0):12 with points pt 9 ps 2 lc rgb '#888888' title 'async training loss (at s = 16)'
unset multiplot
EOF
log "wrote $OUT/bound.png, $OUT/bound.csv"
