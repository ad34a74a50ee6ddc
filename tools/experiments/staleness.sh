#!/usr/bin/env bash
# tools/experiments/staleness.sh [OUTDIR] — the paper's Figure 1 (left): the
# distribution of read staleness under SSP and ESSP with the same bound s.
#
# Runs pace_mf twice on the same data, once with --consistency=ssp and once
# with essp, each on 2 paced shards and $CLIENTS client processes (loopback),
# takes every client's staleness histogram of the factor tables (from
# Client::Stats(), written by --staleness_hist) and draws them side by side.
#
# Writes OUTDIR (default $BUILD/experiments/staleness):
#   staleness.csv   staleness, reads and fraction of reads under ssp and essp
#   staleness.png   the two distributions side by side
#   summary.txt     mean staleness, share of reads at 0-2, time per run
#   runs/           per-run CSVs, histograms and logs
#
# Data: pace_gen ratings, 10,000 users x 4,000 items, 1M ratings (rank 8,
# noise 0.5, seed 1), large enough that a clock lasts much longer than a push
# takes to arrive; or DATA=insteval.
#
# Settings (environment): BUILD (build dir, default build/), DATA=synthetic|
# insteval, S (staleness bound, 8), CLOCKS (30), CLIENTS (2), WORKERS (per
# client, 1), STRAGGLER_MS and STRAGGLER_PROB (each worker sleeps this long at
# the start of a clock with this probability; 0 and 0.1), USERS, ITEMS,
# RATINGS (the generated data's size), PIN (1: client i on core i, lib.sh).
# Takes ~1 minute. summary.txt also gives the "in step" staleness: the mean
# after taking away each read's share of the reader's lead over the slowest
# process (traces.py), which is what the model adds when every process has a
# core; on a machine with CLIENTS + 2 cores, CLIENTS=4 gives the paper's one
# worker per core with 4 processes (and a core per shard).
set -euo pipefail
# shellcheck source=tools/experiments/lib.sh
source "$(dirname "$0")/lib.sh"

OUT=${1:-$BUILD/experiments/staleness}
S=${S:-8}
CLOCKS=${CLOCKS:-30}
STRAGGLER_MS=${STRAGGLER_MS:-0}
STRAGGLER_PROB=${STRAGGLER_PROB:-0.1}

need_binaries
need_gnuplot
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pace-staleness.XXXXXX")
trap 'stop_shards; rm -rf "$WORK"' EXIT
prepare_data "$OUT/data" "${USERS:-10000}" "${ITEMS:-4000}" "${RATINGS:-1000000}"

declare -A SECONDS_OF
for model in ssp essp; do
  log "pace_mf --consistency=$model --staleness=$S: $CLIENTS clients x $WORKERS workers, $CLOCKS clocks"
  run_job "$model" "$OUT/runs" "$WORK" --consistency="$model" --staleness="$S" \
    --clocks="$CLOCKS" --straggler_ms="$STRAGGLER_MS" --straggler_prob="$STRAGGLER_PROB" ||
    die "the $model run failed"
  SECONDS_OF[$model]=$JOB_SECONDS
done

# Sum the histograms over clients and over both factor tables; s + 1 ("more
# than s") stays empty under ssp and essp.
awk -F, -v s="$S" '
  FNR == 1 { model = FILENAME; sub(/.*\//, "", model); sub(/\..*/, "", model); next }
  { n[model, $2] += $3; total[model] += $3 }
  END {
    print "staleness,ssp_reads,essp_reads,ssp_fraction,essp_fraction"
    for (k = 0; k <= s + 1; ++k) {
      printf "%d,%d,%d,%.6f,%.6f\n", k, n["ssp", k], n["essp", k],
        total["ssp"] ? n["ssp", k] / total["ssp"] : 0, total["essp"] ? n["essp", k] / total["essp"] : 0
    }
  }' "$OUT"/runs/ssp.hist.*.csv "$OUT"/runs/essp.hist.*.csv >"$OUT/staleness.csv"

summary() {
  awk -F, -v m="$1" -v secs="$2" '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    { r = $col[m "_reads"]; n += r; sum += $1 * r; if ($1 <= 2) low += r }
    END { printf "%-5s reads %9d  mean staleness %5.2f  at 0-2: %5.1f%%  run %6.1f s\n",
          m, n, n ? sum / n : 0, n ? 100 * low / n : 0, secs }' "$OUT/staleness.csv"
}
{
  echo "# staleness.sh: $CLIENTS clients x $WORKERS workers, 2 shards, s=$S, $CLOCKS clocks," \
    "data ${DATA:-synthetic}, straggler ${STRAGGLER_MS} ms p=${STRAGGLER_PROB}"
  summary ssp "${SECONDS_OF[ssp]}"
  summary essp "${SECONDS_OF[essp]}"
  for model in ssp essp; do
    printf '%-5s final test RMSE %s\n' "$model" \
      "$(sed -n 's/.*; test RMSE \([0-9.]*\).*/\1/p' "$OUT/runs/$model.client-0.log")"
  done
  # In step: the staleness left after taking away the reader's lead over the
  # slowest process (traces.py), i.e. what the model itself adds.
  python3 "$(dirname "$0")/traces.py" summary "$OUT/runs" ssp essp | awk -F, '
    NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
    { printf "%-5s mean staleness %5.2f  in step %5.2f  reader lead %5.2f  (variance %.2f)\n",
        $1, $col["staleness_mean"], $col["in_step_mean"], $col["lead_mean"], $col["staleness_var"] }'
  echo "# $(load_note)"
} | tee "$OUT/summary.txt"

gnuplot <<EOF
set terminal pngcairo size 900,500 font ',11'
set output '$OUT/staleness.png'
set datafile separator ','
set title "Read staleness of pace_mf's factor tables, s = $S ($CLIENTS clients x $WORKERS workers, ${DATA:-synthetic} data)" noenhanced
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xlabel 'staleness c - v of a read (clocks)'
set ylabel 'fraction of reads'
set yrange [0:*]
set grid ytics
set key top center
plot '$OUT/staleness.csv' every ::1::$((S + 1)) using 4:xtic(1) title 'SSP' lc rgb '#d95f02', \
     '' every ::1::$((S + 1)) using 5 title 'ESSP' lc rgb '#1b9e77'
EOF
log "wrote $OUT/staleness.png, $OUT/staleness.csv, $OUT/summary.txt"
