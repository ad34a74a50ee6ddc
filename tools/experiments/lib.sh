# shellcheck shell=bash
# Shared by the experiment scripts (sourced, not run). See docs/experiments.md.
#
# Sets ROOT (the repo), BUILD (from $BUILD, default build/; relative paths are
# taken from the repo root), BIN; provides data generation, gnuplot, and
# run_job, which runs one pace_mf job on 2 paced shards with $CLIENTS client
# processes of $WORKERS workers each (all on loopback). With PROXY_DELAY_MS
# set (> 0), clients reach each shard through a pace_delay_proxy
# (tools/proxy/) adding that one-way delay (plus uniform [0, PROXY_JITTER_MS])
# per chunk in each direction. MF_EXTRA_FLAGS (word-split) is added to every
# pace_mf command line, e.g. MF_EXTRA_FLAGS=--eval_every=1000.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
BIN=$BUILD/bin
SHARDS=2
CLIENTS=${CLIENTS:-2}
WORKERS=${WORKERS:-1}

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "$(basename "$0"): $*" >&2; exit 1; }

need_binaries() {
  local b
  local need=(pace_mf pace_gen paced)
  [ "${PROXY_DELAY_MS:-0}" = 0 ] || need+=(pace_delay_proxy)
  for b in "${need[@]}"; do
    [ -x "$BIN/$b" ] || die "$BIN/$b is missing: build first (make build, or BUILD=dir)"
  done
}

# gnuplot from Debian (gnuplot-nox): installed when missing if we are root.
need_gnuplot() {
  command -v gnuplot >/dev/null && return 0
  if [ "$(id -u)" = 0 ]; then
    log "installing gnuplot-nox"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox) \
      >/dev/null || die "apt-get install gnuplot-nox failed"
  else
    die "gnuplot is missing; run: sudo apt-get install -y gnuplot-nox"
  fi
}

# prepare_data DIR USERS ITEMS RATINGS: sets TRAIN and TEST. DATA=synthetic
# (default): pace_gen ratings of that size (rank 8, noise sigma 0.5, seed 1,
# 10% test). DATA=insteval: the real InstEval split from
# ../shared/data/get-datasets.sh (needs root and Debian's package archive the
# first time; never committed).
prepare_data() {
  local dir=$1 users=$2 items=$3 ratings=$4
  mkdir -p "$dir"
  case ${DATA:-synthetic} in
    synthetic)
      TRAIN=$dir/train-$users-$items-$ratings.txt
      TEST=$dir/test-$users-$items-$ratings.txt
      if [ ! -s "$TRAIN" ] || [ ! -s "$TEST" ]; then
        "$BIN/pace_gen" ratings --users="$users" --items="$items" --rank=8 --ratings="$ratings" \
          --noise=0.5 --seed=1 --out="$TRAIN" --test_out="$TEST" --test_fraction=0.1 >&2 ||
          die "pace_gen failed"
      fi
      ;;
    insteval)
      local get=$ROOT/../shared/data/get-datasets.sh
      [ -f "$get" ] || die "DATA=insteval needs $get (the shared data folder beside the repo)"
      bash "$get" "$dir/datasets" >&2 || die "get-datasets.sh failed"
      TRAIN=$dir/datasets/insteval/train.txt
      TEST=$dir/datasets/insteval/test.txt
      ;;
    *) die "DATA must be synthetic or insteval (got '$DATA')" ;;
  esac
}

PACED_PIDS=()
stop_shards() {
  local p
  for p in "${PACED_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PACED_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PACED_PIDS=()
}
trap stop_shards EXIT

# start_shards DIR: starts $SHARDS fresh paced shards on free loopback ports;
# sets SERVERS.
start_shards() {
  local dir=$1 k i port ports=()
  rm -rf "$dir"
  mkdir -p "$dir"
  for ((k = 0; k < SHARDS; k++)); do
    "$BIN/paced" --listen=127.0.0.1:0 --data_dir="$dir/shard$k" --shard=$k \
      --num_shards=$SHARDS --num_clients="$CLIENTS" --insecure >"$dir/paced$k.log" 2>&1 &
    PACED_PIDS+=($!)
  done
  for ((k = 0; k < SHARDS; k++)); do
    port=
    for ((i = 0; i < 100; i++)); do
      port=$(sed -n 's/^paced listening on .*:\([0-9]*\)$/\1/p' "$dir/paced$k.log" | head -1)
      [ -n "$port" ] && break
      kill -0 "${PACED_PIDS[$k]}" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$port" ] || die "paced shard $k did not start (see $dir/paced$k.log)"
    ports+=("127.0.0.1:$port")
  done
  if [ "${PROXY_DELAY_MS:-0}" != 0 ]; then
    for ((k = 0; k < SHARDS; k++)); do
      "$BIN/pace_delay_proxy" --listen=127.0.0.1:0 --target="${ports[$k]}" \
        --delay_ms="$PROXY_DELAY_MS" --jitter_ms="${PROXY_JITTER_MS:-0}" --seed=$((k + 1)) \
        >"$dir/proxy$k.log" 2>&1 &
      PACED_PIDS+=($!)
      port=
      for ((i = 0; i < 100; i++)); do
        port=$(sed -n 's/^proxy listening on .*:\([0-9]*\)$/\1/p' "$dir/proxy$k.log" 2>/dev/null | head -1)
        [ -n "$port" ] && break
        sleep 0.1
      done
      [ -n "$port" ] || die "pace_delay_proxy for shard $k did not start (see $dir/proxy$k.log)"
      ports[k]="127.0.0.1:$port"
    done
  fi
  SERVERS=$(IFS=,; echo "${ports[*]}")
}

# run_job NAME OUTDIR WORKDIR pace_mf-flags...: one job on fresh shards.
# Writes OUTDIR/NAME.csv (client 0's per-clock lines), OUTDIR/NAME.hist.I.csv
# (client I's staleness histogram) and OUTDIR/NAME.client-I.log; sets
# JOB_SECONDS (wall time of the clients).
run_job() {
  local name=$1 out=$2 work=$3 i rc=0 pids=() start
  shift 3
  start_shards "$work/$name"
  start=$(date +%s.%N)
  for ((i = 0; i < CLIENTS; i++)); do
    local extra=()
    [ "$i" = 0 ] && extra=(--csv="$out/$name.csv")
    # shellcheck disable=SC2086  # MF_EXTRA_FLAGS is a list of words
    "$BIN/pace_mf" --train="$TRAIN" --test="$TEST" --servers="$SERVERS" --client_id=$i \
      --num_clients="$CLIENTS" --workers="$WORKERS" --staleness_hist="$out/$name.hist.$i.csv" \
      "${extra[@]}" ${MF_EXTRA_FLAGS:-} "$@" >"$out/$name.client-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { rc=$?; log "$name: client $i exited $rc (see $out/$name.client-$i.log)"; }
  done
  # shellcheck disable=SC2034  # read by the scripts that source this file
  JOB_SECONDS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  stop_shards
  rm -rf "${work:?}/$name"
  return $rc
}
