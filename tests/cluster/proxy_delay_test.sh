#!/usr/bin/env bash
# proxy_delay_test.sh BIN_DIR — the read rule, read-my-writes and exact totals
# hold when every client<->shard connection goes through pace_delay_proxy
# with random per-chunk delays (1 + uniform[0, 8] ms one way), over loopback.
#
# 2 paced shards, one proxy in front of each, 3 pace_client_proc processes x 2
# workers on integer tables of every consistency model (each checks v >= c - s
# and read-my-writes on every read) connect through the proxies; a verifier
# connected directly reads every row: the stored totals equal the sum of the
# clients' increments exactly. The proxies really delayed: the run cannot be
# faster than one round trip (2 x 1 ms) per clock.
set -uo pipefail
BIN=${1:?usage: proxy_delay_test.sh BIN_DIR}
for b in paced pace_client_proc pace_delay_proxy; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b is missing"; exit 1; }
done
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pace-proxy.XXXXXX")
PIDS=()
cleanup() {
  local rc=$? p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  if [ "$rc" != 0 ]; then
    for f in "$DIR"/*.log; do echo "--- $f" >&2; tail -n 10 "$f" >&2; done
  fi
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# wait_port LOG PATTERN: the port from the first "PATTERN HOST:PORT" line.
wait_port() {
  local i port
  for ((i = 0; i < 200; i++)); do
    port=$(sed -n "s/^$2 .*:\([0-9]*\)$/\1/p" "$1" | head -1)
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.05
  done
  return 1
}

direct=() proxied=()
for k in 0 1; do
  "$BIN/paced" --listen=127.0.0.1:0 --data_dir="$DIR/shard$k" --shard=$k --num_shards=2 \
    --num_clients=3 --insecure >"$DIR/paced$k.log" 2>&1 &
  PIDS+=($!)
  port=$(wait_port "$DIR/paced$k.log" "paced listening on") || fail "paced $k did not start"
  direct+=("127.0.0.1:$port")
  "$BIN/pace_delay_proxy" --listen=127.0.0.1:0 --target="127.0.0.1:$port" --delay_ms=1 \
    --jitter_ms=8 --seed=$((k + 5)) >"$DIR/proxy$k.log" 2>&1 &
  PIDS+=($!)
  port=$(wait_port "$DIR/proxy$k.log" "proxy listening on") || fail "proxy $k did not start"
  proxied+=("127.0.0.1:$port")
done
SERVERS=$(IFS=,; echo "${proxied[*]}")
CLOCKS=30
start=$(date +%s%N)
clients=()
for id in 0 1 2; do
  "$BIN/pace_client_proc" --servers="$SERVERS" --client_id=$id --num_clients=3 --seed=$((id + 11)) \
    --workers=2 --clocks=$CLOCKS --ops=30 >"$DIR/client$id.log" 2>&1 &
  clients+=($!)
  PIDS+=($!)
done
for id in 0 1 2; do
  wait "${clients[$id]}" || fail "client $id: $(grep -m1 FAIL "$DIR/client$id.log")"
done
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
[ "$elapsed_ms" -ge $((CLOCKS * 2)) ] ||
  fail "$CLOCKS clocks in $elapsed_ms ms: faster than one delayed round trip per clock"
awk '$1 == "TOTAL" { t[$2 " " $3] += $4 } END { for (k in t) print k, t[k] }' \
  "$DIR"/client[012].log | sort >"$DIR/expected"
"$BIN/pace_client_proc" --servers="$(IFS=,; echo "${direct[*]}")" --client_id=0 --num_clients=3 \
  --mode=verify >"$DIR/verify.log" 2>&1 || fail "verifier: $(grep -m1 FAIL "$DIR/verify.log")"
awk '$1 == "ROW" { print $2, $3, $4 }' "$DIR/verify.log" | sort >"$DIR/stored"
[ "$(wc -l <"$DIR/stored")" = 120 ] || fail "the verifier read $(wc -l <"$DIR/stored") rows"
diff "$DIR/expected" "$DIR/stored" >/dev/null || fail "stored totals differ from the increments"
echo "PASS: $CLOCKS clocks through delaying proxies in $elapsed_ms ms; 120 rows exact," \
  "sum $(awk '{ s += $3 } END { print s }' "$DIR/stored")"
