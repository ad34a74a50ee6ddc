#!/usr/bin/env bash
# tools/bench/sync_procs.sh [BUILD_DIR] — benchmark 3f the way a user runs
# it: 8 pace_client_proc processes x 1 worker x 300 clocks against one paced,
# without and with --sync; prints the wall seconds of each and their ratio.
set -euo pipefail
bin=$(cd "${1:-build}/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
run() {  # run [--sync]: wall seconds of the 8 client processes
  rm -rf "$work/data"
  "$bin/paced" --listen=127.0.0.1:0 --data_dir="$work/data" --num_clients=8 "$@" \
    > "$work/paced.out" 2> "$work/paced.err" &
  local paced=$!
  for _ in $(seq 100); do grep -qs "listening on" "$work/paced.out" && break; sleep 0.1; done
  local port
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/paced.out")
  local start end pids=()
  start=$(date +%s.%N)
  for c in 0 1 2 3 4 5 6 7; do
    "$bin/pace_client_proc" --servers="127.0.0.1:$port" --client_id=$c --num_clients=8 \
      --workers=1 --clocks=300 --token_file="$work/data/token" > "$work/c$c.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  end=$(date +%s.%N)
  for c in 0 1 2 3 4 5 6 7; do grep -q '^OK' "$work/c$c.out" || echo "client $c failed" >&2; done
  kill -TERM "$paced"; wait "$paced" || true
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f\n", b - a }'
}
plain=$(run)
synced=$(run --sync)
awk -v p="$plain" -v s="$synced" 'BEGIN {
  printf "3f (processes): no sync %.3f s, --sync %.3f s: rate ratio %.3f (target >= 0.50)\n", p, s, p / s }'
