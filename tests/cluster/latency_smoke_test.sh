#!/usr/bin/env bash
# latency_smoke_test.sh BUILD_DIR — tools/experiments/latency.sh on tiny data
# at one latency (2 ms), 4 clocks: it writes its summary (ssp and essp rows
# for s = 2) and its figure. Exit 77 (skipped) without gnuplot when not root.
set -euo pipefail
build=$(cd "${1:?usage: latency_smoke_test.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v gnuplot >/dev/null && [ "$(id -u)" != 0 ]; then
  echo "SKIP: gnuplot-nox is not installed"
  exit 77
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/latency-smoke.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
BUILD=$build LATENCIES=2 USERS=300 ITEMS=200 RATINGS=20000 CLOCKS=4 S=2 S_LIST=2 \
  bash "$root/tools/experiments/latency.sh" "$out/lat" >"$out/lat.log" 2>&1 ||
  { cat "$out/lat.log"; fail "latency.sh exited $?"; }
[ -s "$out/lat/latency.png" ] || fail "no latency.png"
csv=$out/lat/latency_summary.csv
[ "$(head -1 "$csv")" = "latency_ms,model,mean_staleness,reads_0_2_pct,s,final_test_rmse,seconds,blocked_pct" ] ||
  fail "header: $(head -1 "$csv")"
[ "$(grep -c '^2,ssp,[0-9.]*,[0-9.]*,2,' "$csv")" = 1 ] || fail "no ssp row: $(cat "$csv")"
[ "$(grep -c '^2,essp,[0-9.]*,[0-9.]*,2,' "$csv")" = 1 ] || fail "no essp row: $(cat "$csv")"
# The runs really went through proxies.
ls "$out"/lat/lat-2/staleness/runs/*.csv >/dev/null || fail "no staleness runs"
echo "latency.sh OK"
