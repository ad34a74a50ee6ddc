#!/usr/bin/env bash
# tests/apps/experiments_smoke_test.sh BUILD_DIR: runs the experiment
# scripts on tiny data for a few clocks and checks that they produce their
# figures and CSVs with the expected shape. Exit 77 (skipped) without gnuplot
# when not root (the scripts would only print how to install it).
set -euo pipefail
build=$(cd "${1:?usage: experiments_smoke_test.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v gnuplot >/dev/null && [ "$(id -u)" != 0 ]; then
  echo "gnuplot-nox is not installed: skipped"
  exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/experiments-smoke.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export BUILD=$build USERS=300 ITEMS=200 RATINGS=20000 CLOCKS=4

S=2 bash "$root/tools/experiments/staleness.sh" "$out/st" >"$out/st.log" 2>&1 ||
  { cat "$out/st.log"; fail "staleness.sh exited $?"; }
[ -s "$out/st/staleness.png" ] || fail "no staleness.png"
[ "$(head -1 "$out/st/staleness.csv")" = "staleness,ssp_reads,essp_reads,ssp_fraction,essp_fraction" ] ||
  fail "staleness.csv header: $(head -1 "$out/st/staleness.csv")"
[ "$(wc -l <"$out/st/staleness.csv")" = 5 ] || fail "staleness.csv should have buckets 0..s+1"
# Every read is in some bucket 0..s, none beyond s.
awk -F, 'NR > 1 { ssp += $2; essp += $3; if ($1 > 2 && $2 + $3 > 0) bad = 1 }
         END { exit !(ssp > 0 && essp > 0 && !bad) }' "$out/st/staleness.csv" ||
  fail "staleness.csv counts: $(cat "$out/st/staleness.csv")"

S_LIST="0 2" STRAGGLER_MS=10 bash "$root/tools/experiments/convergence.sh" "$out/cv" \
  >"$out/cv.log" 2>&1 || { cat "$out/cv.log"; fail "convergence.sh exited $?"; }
for f in loss_per_clock.png loss_per_second.png; do
  [ -s "$out/cv/$f" ] || fail "no $f"
done
# BSP, async, and 2 models x 2 bounds, x 4 clocks, plus the header.
[ "$(wc -l <"$out/cv/convergence.csv")" = 25 ] || fail "convergence.csv: $(cat "$out/cv/convergence.csv")"
[ "$(wc -l <"$out/cv/summary.csv")" = 7 ] || fail "summary.csv: $(cat "$out/cv/summary.csv")"
grep -q '^essp  *mean staleness .* in step ' "$out/st/summary.txt" || fail "no in-step staleness"

CONV=$out/cv bash "$root/tools/experiments/bound.sh" "$out/bd" >"$out/bd.log" 2>&1 ||
  { cat "$out/bd.log"; fail "bound.sh exited $?"; }
[ -s "$out/bd/bound.png" ] || fail "no bound.png"
# One line per run; BSP's bound ratio is 1 and its excess over itself 0.
awk -F, '$1 == "bsp" { ok = ($5 == 1 && $7 == 0) } END { exit !ok }' "$out/bd/bound.csv" ||
  fail "bound.csv: $(cat "$out/bd/bound.csv")"

V_LIST="0.01" S=2 STRAGGLER_MS=10 bash "$root/tools/experiments/vap.sh" "$out/vap" >"$out/vap.log" 2>&1 ||
  { cat "$out/vap.log"; fail "vap.sh exited $?"; }
[ -s "$out/vap/vap.png" ] || fail "no vap.png"
# bsp, ssp, essp, vap, async: a line each, every one finished with a test RMSE.
awk -F, 'NR > 1 && !/^#/ { n++; if ($2 == "") bad = 1 } END { exit !(n == 5 && !bad) }' \
  "$out/vap/summary.csv" || fail "vap summary.csv: $(cat "$out/vap/summary.csv")"
grep -q 'vap v=0.01' "$out/vap/runs/vap-v0.01.client-0.log" || fail "the vap run is not vap"

export CORPUS=generated DOCS=200 VOCAB=300 DOC_LEN=40
S_LIST="2" STRAGGLER_MS=10 bash "$root/tools/experiments/lda.sh" "$out/lda" >"$out/lda.log" 2>&1 ||
  { cat "$out/lda.log"; fail "lda.sh exited $?"; }
for f in loglik_per_clock.png loglik_per_second.png; do
  [ -s "$out/lda/$f" ] || fail "no $f"
done
# bsp, ssp, essp, async: 4 runs x (clock 0 + 4 sampling clocks) lines.
[ "$(wc -l <"$out/lda/lda.csv")" = 21 ] || fail "lda.csv: $(cat "$out/lda/lda.csv")"

S_LIST="2" bash "$root/tools/experiments/breakdown.sh" "$out/br" >"$out/br.log" 2>&1 ||
  { cat "$out/br.log"; fail "breakdown.sh exited $?"; }
[ -s "$out/br/breakdown.png" ] || fail "no breakdown.png"
# Every run moved bytes and spent time; BSP had no staleness.
awk -F, 'NR > 1 && !/^#/ { n++; if ($3 <= 0 || $8 <= 0) bad = 1; if ($1 == "bsp-s0" && $13 != 0) bad = 1 }
         END { exit !(n == 4 && !bad) }' "$out/br/breakdown-mf.csv" ||
  fail "breakdown-mf.csv: $(cat "$out/br/breakdown-mf.csv")"
echo "experiment scripts OK"
