#!/usr/bin/env bash
# tools/bench/tcp_scale.sh [BUILD_DIR] — benchmark 8f: the 8a job over TCP. One paced on
# loopback (a free port, its own token file) and one pace_mf --servers process (600k users x
# 20k items, 700k ratings, rank 128, 3 clocks of 40%, default budgets), against pace_mf
# --baseline on the same data in the same run. Target: >= 0.4. A pace_mf run that does not end
# within BENCH_TCP_TIMEOUT_S seconds (default 900) is stopped and reported as "did not finish
# in N s" (the remaining runs are skipped): the comparison then counts as not run.
# BENCH_REPS runs of each (default 3), interleaved; the medians count. Sizes for smoke runs as
# mf_scale.sh (BENCH_MS_*); BENCH_SKEW: see model_scale.sh. Exits 1 if a comparison did not
# run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d)
paced_pid=""
cleanup() {
  if [ -n "$paced_pid" ]; then kill -TERM "$paced_pid" 2> /dev/null || true; wait "$paced_pid" 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
tcp_limit=${BENCH_TCP_TIMEOUT_S:-900}
bench_8a_sizes
shape=$(bench_mf_shape 600000/20000/700000/128)

# paced_start DIR: starts one paced for one client on a free loopback port; sets paced_pid
# and paced_port, or returns 1.
paced_start() {
  local dir=$1
  "$bin/paced" --listen=127.0.0.1:0 --data_dir="$dir" --num_clients=1 \
    > "$dir.paced.out" 2> "$dir.paced.err" &
  paced_pid=$!
  paced_port=""
  for _ in $(seq 300); do
    paced_port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$dir.paced.out")
    [ -n "$paced_port" ] && return 0
    kill -0 "$paced_pid" 2> /dev/null || break
    sleep 0.1
  done
  echo "  paced did not start: $(tail -3 "$dir.paced.err")" >&2
  return 1
}
paced_stop() {
  kill -TERM "$paced_pid" 2> /dev/null || true
  wait "$paced_pid" 2> /dev/null || true
  paced_pid=""
}

echo "=== 8f: MF at model scale over TCP ($users users x $items items, rank $rank): paced + pace_mf --servers vs --baseline ==="
bench_load
for skew in ${BENCH_SKEW:-0}; do
  suffix="$(bench_skew_suffix "$skew")$shape"
  bench_8a_job "$skew"
  b=() s=() why_b="" why_s="" timed_out=""
  for ((i = 0; i < reps; i++)); do
    rm -rf "$work"/pd*
    read -r v r st < <(bench_run "b$i" ratings "$limit" "${ms[@]}" --baseline)
    b+=("$v"); [ "$st" = ok ] || why_b="baseline: $(bench_why "$st" "$limit")"
    mkdir -p "$work/pd$i"
    if paced_start "$work/pd$i/shard"; then
      read -r v r st < <(bench_run "s$i" ratings "$tcp_limit" "${ms[@]}" \
        --servers="127.0.0.1:$paced_port" --token_file="$work/pd$i/shard/token")
      paced_stop
    else
      v=0 st=exit-paced
    fi
    s+=("$v")
    case $st in
      ok) ;;
      timeout)
        why_s="pace_mf --servers did not finish in $tcp_limit s" timed_out=1
        echo "  run $i: $why_s; the remaining runs are skipped"
        break
        ;;
      exit-paced) why_s="paced did not start" ;;
      *) why_s="pace_mf --servers: $(bench_why "$st" "$tcp_limit")"; tail -3 "$work/s$i.log" | sed 's/^/  | /' ;;
    esac
  done
  echo "  skew $skew: ratings/s: baseline ${b[*]}; paced + pace_mf --servers ${s[*]}"
  subject=$(bench_median "${s[@]}")
  [ -n "$timed_out" ] && subject=0  # a run that did not finish: no ratio
  bench_ratio "8f MF model scale over TCP, paced + pace_mf --servers vs --baseline$suffix" \
    "$subject" "$(bench_median "${b[@]}")" 0.4 "${why_s:-${why_b:-no rate}}"
done
bench_load after
exit $bench_failed
