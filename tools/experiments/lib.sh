# shellcheck shell=bash
# Shared by the experiment scripts (sourced, not run). See docs/experiments.md.
#
# Sets ROOT (the repo), BUILD (from $BUILD, default build/; relative paths are
# taken from the repo root), BIN; provides data generation, gnuplot, and
# run_job, which runs one $APP job (pace_mf, the default, or APP=pace_lda with
# APP_DATA_FLAGS naming its corpus) on 2 paced shards with $CLIENTS client
# processes of $WORKERS workers each (all on loopback). PIN=1 (the default)
# pins client i to core i mod $(nproc) with taskset, and the shards to the
# cores after the clients' when there are more cores than clients (otherwise
# they float): one busy process per core where the machine has the cores.
# Every client writes its --clock_trace; the shards' Prometheus counters are
# saved at the end of the job. With PROXY_DELAY_MS
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
APP=${APP:-pace_mf}
PIN=${PIN:-1}
NCPU=$(nproc)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "$(basename "$0"): $*" >&2; exit 1; }

need_binaries() {
  local b
  local need=("$APP" pace_gen paced)
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

# pinned CORE: the taskset prefix that puts a process on CORE (none with PIN=0
# or without taskset).
pinned() {
  [ "$PIN" = 1 ] && command -v taskset >/dev/null && echo "taskset -c $(($1 % NCPU))"
  return 0
}

# prepare_corpus DIR: sets APP_DATA_FLAGS for pace_lda. CORPUS=foldoc
# (default): FOLDOC from ../shared/data/get-datasets.sh (never committed);
# CORPUS=generated: pace_gen corpus of $DOCS documents (30,000), vocabulary
# $VOCAB (10,000), 50 planted topics, mean length $DOC_LEN (100), seed 1.
prepare_corpus() {
  local dir=$1
  mkdir -p "$dir"
  case ${CORPUS:-foldoc} in
    foldoc)
      local get=$ROOT/../shared/data/get-datasets.sh
      [ -f "$get" ] || die "CORPUS=foldoc needs $get (the shared data folder beside the repo)"
      [ -s "$dir/datasets/foldoc/docword.txt" ] || bash "$get" "$dir/datasets" >&2 ||
        die "get-datasets.sh failed"
      APP_DATA_FLAGS="--docword=$dir/datasets/foldoc/docword.txt --vocab=$dir/datasets/foldoc/vocab.txt"
      ;;
    generated)
      local docs=${DOCS:-30000} vocab=${VOCAB:-10000} len=${DOC_LEN:-100}
      local f=$dir/corpus-$docs-$vocab-$len.docword.txt
      [ -s "$f" ] || "$BIN/pace_gen" corpus --docs="$docs" --vocab="$vocab" --topics=50 \
        --doc_len="$len" --seed=1 --out_docword="$f" >&2 || die "pace_gen corpus failed"
      APP_DATA_FLAGS="--docword=$f"
      ;;
    *) die "CORPUS must be foldoc or generated (got '$CORPUS')" ;;
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
  local pin=()
  for ((k = 0; k < SHARDS; k++)); do
    pin=()
    # shellcheck disable=SC2207  # the taskset prefix is a list of words
    [ "$NCPU" -gt "$CLIENTS" ] && pin=($(pinned $((CLIENTS + k))))
    "${pin[@]}" "$BIN/paced" --listen=127.0.0.1:0 --data_dir="$dir/shard$k" --shard=$k \
      --num_shards=$SHARDS --num_clients="$CLIENTS" --insecure \
      --metrics_listen=127.0.0.1:0 >"$dir/paced$k.log" 2>&1 &
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

# save_shard_metrics OUTPREFIX: each shard's /metrics to OUTPREFIX.shard-K.prom.
save_shard_metrics() {
  local k addr
  for ((k = 0; k < SHARDS; k++)); do
    addr=$(sed -n 's/^paced metrics on \(.*\)$/\1/p' "$SHARD_DIR/paced$k.log" | head -1)
    [ -n "$addr" ] && curl -s --max-time 5 "http://$addr/metrics" >"$1.shard-$k.prom"
  done
  return 0
}

# run_job NAME OUTDIR WORKDIR app-flags...: one job on fresh shards.
# Writes OUTDIR/NAME.csv (client 0's per-clock lines), OUTDIR/NAME.hist.I.csv
# (client I's staleness histogram), OUTDIR/NAME.trace.I.csv (client I's
# --clock_trace), OUTDIR/NAME.shard-K.prom (shard K's counters at the end) and
# OUTDIR/NAME.client-I.log; sets JOB_SECONDS (wall time of the clients).
run_job() {
  local name=$1 out=$2 work=$3 i rc=0 pids=() start data=()
  shift 3
  start_shards "$work/$name"
  SHARD_DIR=$work/$name
  if [ "$APP" = pace_mf ]; then
    data=(--train="$TRAIN" --test="$TEST")
  else
    # shellcheck disable=SC2206  # APP_DATA_FLAGS is a list of words
    data=($APP_DATA_FLAGS --topics_out=0)
  fi
  start=$(date +%s.%N)
  for ((i = 0; i < CLIENTS; i++)); do
    local extra=() pin=()
    [ "$i" = 0 ] && extra=(--csv="$out/$name.csv")
    # shellcheck disable=SC2207  # the taskset prefix is a list of words
    pin=($(pinned "$i"))
    # shellcheck disable=SC2086  # MF_EXTRA_FLAGS is a list of words
    "${pin[@]}" "$BIN/$APP" "${data[@]}" --servers="$SERVERS" --client_id=$i \
      --num_clients="$CLIENTS" --workers="$WORKERS" --staleness_hist="$out/$name.hist.$i.csv" \
      --clock_trace="$out/$name.trace.$i.csv" "${extra[@]}" ${MF_EXTRA_FLAGS:-} "$@" \
      >"$out/$name.client-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { rc=$?; log "$name: client $i exited $rc (see $out/$name.client-$i.log)"; }
  done
  # shellcheck disable=SC2034  # read by the scripts that source this file
  JOB_SECONDS=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  save_shard_metrics "$out/$name"
  stop_shards
  rm -rf "${work:?}/$name"
  return $rc
}

# run_specs: the runs of a comparison over S_LIST, "model:s" words: BSP and
# async (the two ends of every curve; not with ENDS=0), then SSP and ESSP at
# each s.
run_specs() {
  local model s
  [ "${ENDS:-1}" = 0 ] || echo "bsp:0"
  for model in ssp essp; do
    for s in $S_LIST; do echo "$model:$s"; done
  done
  [ "${ENDS:-1}" = 0 ] || echo "async:0"
}

# panel_lines CSV MODEL XCOL YCOL: the gnuplot plot clauses of one panel, a
# line per s of MODEL from CSV (columns model,s,...), and BSP (black) and
# async (grey, dashed) as the ends.
panel_lines() {
  local csv=$1 model=$2 x=$3 y=$4 s i=0 out color
  local colors=('#1b9e77' '#d95f02' '#7570b3' '#e7298a' '#66a61e' '#e6ab02')
  out="'$csv' using (strcol(1) eq 'bsp' ? \$$x : 1/0):$y with lines lw 3 lc rgb 'black' title 'BSP'"
  out+=", '$csv' using (strcol(1) eq 'async' ? \$$x : 1/0):$y with lines lw 2 dt 2 lc rgb '#888888' title 'async'"
  for s in $S_LIST; do
    color=${colors[$((i % ${#colors[@]}))]}
    out+=", '$csv' using (strcol(1) eq '$model' && \$2 == $s ? \$$x : 1/0):$y with linespoints pt 7 ps 0.4 lw 2 lc rgb '$color' title 's = $s'"
    i=$((i + 1))
  done
  echo "$out"
}

# load_note: the machine's load average now, for the figures' titles.
load_note() {
  echo "load $(cut -d' ' -f1-3 /proc/loadavg), $NCPU cores, pin=$PIN"
}
