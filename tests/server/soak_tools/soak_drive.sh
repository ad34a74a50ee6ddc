#!/bin/bash
# The soak of paced_soak_test by hand, for memory profiling (BENCHMARKS.md, "Soak RSS"):
# one paced (the test's flags) SIGKILLed every 30 s and restarted on its port, one
# pace_client_proc with the test's workload, optionally run under a wrapper (heaptrack, or env
# LD_PRELOAD=malloc_sampler.so). Not part of any test.
#
#   soak_drive.sh OUT SECONDS [WRAPPER...]
#     BIN=DIR          binaries (default: build/bin of this checkout)
#     CLIENT_BIN=PATH  another pace_client_proc (e.g. an older build, to compare)
#     OUTAGE_MAX=S     keep the shard down 0..S extra seconds after each kill
#   Writes OUT/rss ("seconds KiB" every second, "seconds kill" at each kill), OUT/client.err.
# Examples:
#   soak_drive.sh /tmp/h 300 heaptrack -o /tmp/h.data   # then heaptrack_live_diff.py /tmp/h.data.zst 60 120 180
#   soak_drive.sh /tmp/m 300 env LD_PRELOAD=$PWD/malloc_sampler.so MSAMPLE=/tmp/m/ms
set -u
OUT=$1; SECS=$2; shift 2
BIN=${BIN:-$(cd "$(dirname "$0")/../../.." && pwd)/build/bin}
rm -rf "$OUT"; mkdir -p "$OUT"
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
FLAGS="--write_buffer_mb=4 --block_cache_mb=16 --row_cache_mb=16"
start_paced() {  # $1: how many "paced listening" lines there will be
  "$BIN/paced" --listen=127.0.0.1:$PORT --data_dir="$OUT/shard0" --shard=0 --num_shards=1 \
    --num_clients=1 --insecure $FLAGS >>"$OUT/paced.out" 2>>"$OUT/paced.err" &
  PACED=$!
  for _ in $(seq 600); do
    [ "$(grep -c "paced listening" "$OUT/paced.out" 2>/dev/null)" -ge "$1" ] && return
    sleep 0.1
  done
  echo "paced did not start within 60 s" >&2
}
n=1; start_paced $n
"$@" "${CLIENT_BIN:-$BIN/pace_client_proc}" --servers=127.0.0.1:$PORT --client_id=0 --num_clients=1 \
  --mode=run --clocks=$((SECS * 105)) --ops=40 --rows=2000 --workers=2 --sleep_us=5000 \
  --shard_timeout_ms=120000 >"$OUT/client.out" 2>"$OUT/client.err" &
CL=$!
t0=$(date +%s); inc=$t0
while kill -0 $CL 2>/dev/null; do
  sleep 1
  now=$(date +%s)
  # The client itself (the newest process with its command line, not a wrapper).
  CPID=$(pgrep -n -f "pace_client_proc --servers=127.0.0.1:$PORT")
  [ -n "$CPID" ] && echo "$((now - t0)) $(awk '/VmRSS/{print $2}' /proc/$CPID/status 2>/dev/null)" >>"$OUT/rss"
  if [ $((now - inc)) -ge 30 ] && kill -0 $CL 2>/dev/null; then
    kill -9 $PACED; wait $PACED 2>/dev/null
    [ -n "${OUTAGE_MAX:-}" ] && sleep $((RANDOM % (OUTAGE_MAX + 1)))
    n=$((n + 1)); start_paced $n; inc=$(date +%s); echo "$((now - t0)) kill" >>"$OUT/rss"
  fi
done
wait $CL; echo "client exit $?" >"$OUT/info"
kill $PACED; wait $PACED 2>/dev/null
