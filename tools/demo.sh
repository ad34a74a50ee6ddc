#!/usr/bin/env bash
# tools/demo.sh BUILD_DIR DEMO_DIR — the main job on the embedded default:
# generates a synthetic low-rank ratings dataset (known noise sigma = 0.5) and
# trains matrix factorization with pace_mf in embedded mode, printing progress.
set -euo pipefail
build=${1:-build}
demo=${2:-$build/demo}
bin=$build/bin
mkdir -p "$demo"
if [ ! -x "$bin/pace_mf" ] || [ ! -x "$bin/pace_gen" ]; then
  echo "demo: $bin/pace_mf or $bin/pace_gen is missing; build first (make build)" >&2
  exit 1
fi
"$bin/pace_gen" ratings --users=2000 --items=1000 --rank=8 --ratings=200000 --noise=0.5 \
  --seed=1 --out="$demo/train.txt" --test_out="$demo/test.txt" --test_fraction=0.1
rm -rf "$demo/pace-data"
"$bin/pace_mf" --train="$demo/train.txt" --test="$demo/test.txt" --data_dir="$demo/pace-data" \
  --csv="$demo/mf.csv"
cat <<NEXT
demo: per-clock CSV in $demo/mf.csv; the model is in $demo/pace-data. Next, try:
  $bin/pacectl --data_dir=$demo/pace-data tables
  $bin/pacectl --data_dir=$demo/pace-data get mf.item 1 2
  $bin/pacectl --data_dir=$demo/pace-data export mf.item --format=npy --out=$demo/items.npy
  $bin/pace_mf --train=$demo/train.txt --test=$demo/test.txt --data_dir=$demo/pace-data --clocks=80 --resume
  $bin/pace_mf --help
and README.md "Use it" for LDA and a two-shard cluster.
NEXT
