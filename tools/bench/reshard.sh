#!/usr/bin/env bash
# tools/bench/reshard.sh [BUILD_DIR] — benchmark 11: re-sharding a checkpoint. A dense table of
# BENCH_RS_ROWS (1,000,000) rows x BENCH_RS_WIDTH (128) f32 imported into a job of 2 shards and
# checkpointed; `pacectl checkpoint restore --num_shards=3` (every row read, routed by the
# placement hash and written in key order into one SST per new shard, ingested) against
# `pacectl export --format=npy` of the same rows from the same checkpoints (every row read and
# written to one array). Target: the re-shard takes at most 2x the export's time, i.e. a rate
# ratio re-shard / export >= 0.5. BENCH_REPS runs of each (default 3), interleaved; the medians
# count. The input array is generated once (numpy) and kept in the bench data cache. Any step
# that fails prints the RATIO line as "not run" with the step, and the script exits 1. Space: the
# input, the two stores, one re-shard and one export at a time, about 4x the array (2 GB at full
# size) under $TMPDIR and the cache.
set -uo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd) || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/lib.sh"
rows=${BENCH_RS_ROWS:-1000000} width=${BENCH_RS_WIDTH:-128} reps=${BENCH_REPS:-3}
shape=""
[ "$rows/$width" != 1000000/128 ] && shape=" [$rows rows x $width f32]"
label="11 re-shard 2->3 shards vs export, rows/s$shape"
python=${PACE_PYTHON:-/usr/bin/python3}

# not_run WHY [LOG]: the RATIO line of a comparison that could not run (and the log's tail).
not_run() {
  [ -n "${2:-}" ] && [ -s "$2" ] && tail -n 5 "$2" >&2
  bench_ratio "$label" 0 0 0.5 "$1" | tee -a "${PACE_BENCH_OUT:-/dev/null}"
  exit 1
}

# The input (512 MB at full size): generated once, kept in the bench data cache.
cache=$(bench_cache)
npy=$cache/emb-r$rows-w$width-seed1.npy
if [ ! -s "$npy" ]; then
  "$python" -c "import numpy as np, sys
a = np.random.default_rng(1).standard_normal((int(sys.argv[1]), int(sys.argv[2])), dtype=np.float32)
np.save(sys.argv[3], a)" "$rows" "$width" "$npy.tmp.npy" 2> "$work/gen.log" ||
    not_run "generating the input with $python (numpy) failed" "$work/gen.log"
  mv "$npy.tmp.npy" "$npy"
fi

# The job's two stores: created by paced, filled by pacectl import, checkpointed.
for s in 0 1; do
  "$bin/paced" --listen=127.0.0.1:0 --data_dir="$work/shard$s" --shard=$s --num_shards=2 \
    --num_clients=1 --insecure > "$work/paced$s.out" 2> "$work/paced$s.log" &
  pid=$!
  until grep -q listening "$work/paced$s.out" 2> /dev/null; do
    kill -0 $pid 2> /dev/null || not_run "paced did not start" "$work/paced$s.log"
    sleep 0.1
  done
  kill $pid && wait $pid
done
"$bin/pacectl" --data_dir="$work/shard0,$work/shard1" import emb "$npy" > "$work/import.log" 2>&1 ||
  not_run "pacectl import failed" "$work/import.log"
for s in 0 1; do
  "$bin/pacectl" --data_dir="$work/shard$s" checkpoint create "$work/ckpt$s" \
    > "$work/ckpt.log" 2>&1 || not_run "pacectl checkpoint create failed" "$work/ckpt.log"
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
  "$bin/pacectl" --data_dir="$ckpts" export emb --format=npy --out="$work/export.npy" \
    > /dev/null 2> "$work/export.log" || not_run "pacectl export failed" "$work/export.log"
  t1=$(now)
  export_rates+=("$(rate "$t0" "$t1")")
  rm -f "$work/export.npy" "$work/export.rows.npy"
  t0=$(now)
  "$bin/pacectl" checkpoint restore "$ckpts" --num_shards=3 --out="$work/resharded" \
    > "$work/reshard.log" 2>&1 || not_run "pacectl checkpoint restore failed" "$work/reshard.log"
  t1=$(now)
  reshard_rates+=("$(rate "$t0" "$t1")")
  grep -q "(1 table(s), $rows rows) onto 3 shard(s)" "$work/reshard.log" ||
    not_run "the re-shard did not carry $rows rows" "$work/reshard.log"
  rm -rf "$work/resharded"
  echo "# run $((i + 1)): export ${export_rates[-1]} rows/s, re-shard ${reshard_rates[-1]} rows/s"
done
bench_load after
bench_ratio "$label" "$(bench_median "${reshard_rates[@]}")" "$(bench_median "${export_rates[@]}")" \
  0.5 | tee -a "${PACE_BENCH_OUT:-/dev/null}"
exit $bench_failed
