#!/usr/bin/env bash
# tools/bench/reshard.sh [BUILD_DIR] — benchmark 11: re-sharding a checkpoint. A dense table of
# BENCH_RS_ROWS (1,000,000) rows x BENCH_RS_WIDTH (128) f32 imported into a job of 2 shards and
# checkpointed; `pacectl checkpoint restore --num_shards=3` (every row read, routed by the
# placement hash and written in key order into one SST per new shard, ingested) against
# `pacectl export --format=npy` of the same rows from the same checkpoints (every row read and
# written to one array). Target: the re-shard takes at most 2x the export's time, i.e. a rate
# ratio re-shard / export >= 0.5. BENCH_REPS runs of each (default 3), interleaved; the medians
# count. The input array is generated once (numpy) and kept in the bench data cache. Exits 1 if
# the comparison did not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
rows=${BENCH_RS_ROWS:-1000000} width=${BENCH_RS_WIDTH:-128} reps=${BENCH_REPS:-3}
shape=""
[ "$rows/$width" != 1000000/128 ] && shape=" [$rows rows x $width f32]"
python=${PACE_PYTHON:-/usr/bin/python3}

cache=$(bench_cache)
npy=$cache/emb-r$rows-w$width-seed1.npy
if [ ! -s "$npy" ]; then
  "$python" -c "import numpy as np, sys
a = np.random.default_rng(1).standard_normal((int(sys.argv[1]), int(sys.argv[2])), dtype=np.float32)
np.save(sys.argv[3], a)" "$rows" "$width" "$npy.tmp.npy"
  mv "$npy.tmp.npy" "$npy"
fi

# The job's two stores: created by paced, filled by pacectl import, checkpointed.
for s in 0 1; do
  "$bin/paced" --listen=127.0.0.1:0 --data_dir="$work/shard$s" --shard=$s --num_shards=2 \
    --num_clients=1 --insecure > "$work/paced$s.out" 2> "$work/paced$s.log" &
  pid=$!
  until grep -q listening "$work/paced$s.out" 2> /dev/null; do
    kill -0 $pid 2> /dev/null || { cat "$work/paced$s.log"; exit 1; }
    sleep 0.1
  done
  kill $pid && wait $pid
done
"$bin/pacectl" --data_dir="$work/shard0,$work/shard1" import emb "$npy" > /dev/null
for s in 0 1; do
  "$bin/pacectl" --data_dir="$work/shard$s" checkpoint create "$work/ckpt$s" > /dev/null
done
ckpts=$work/ckpt0,$work/ckpt1

now() { date +%s.%N; }
rate() {  # rate START END: rows per second
  awk -v r="$rows" -v a="$1" -v b="$2" 'BEGIN { print (b > a) ? r / (b - a) : 0 }'
}
bench_load
reshard_rates=() export_rates=()
for ((i = 0; i < reps; i++)); do
  t0=$(now)
  "$bin/pacectl" --data_dir="$ckpts" export emb --format=npy --out="$work/export.npy" > /dev/null
  t1=$(now)
  export_rates+=("$(rate "$t0" "$t1")")
  rm -f "$work/export.npy" "$work/export.rows.npy"
  t0=$(now)
  "$bin/pacectl" checkpoint restore "$ckpts" --num_shards=3 --out="$work/resharded" > /dev/null
  t1=$(now)
  reshard_rates+=("$(rate "$t0" "$t1")")
  rm -rf "$work/resharded"
  echo "# run $((i + 1)): export ${export_rates[-1]} rows/s, re-shard ${reshard_rates[-1]} rows/s"
done
bench_load after
bench_ratio "11 re-shard 2->3 shards vs export, rows/s$shape" \
  "$(bench_median "${reshard_rates[@]}")" "$(bench_median "${export_rates[@]}")" 0.5 |
  tee -a "${PACE_BENCH_OUT:-/dev/null}"
exit $bench_failed
