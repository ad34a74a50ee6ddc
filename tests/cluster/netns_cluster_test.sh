#!/usr/bin/env bash
# netns_cluster_test.sh SCENARIO BIN_DIR — a PaceDB job on three "hosts"
# (network namespaces on one bridge, tests/cluster/netns_lib.sh): shards 0
# and 1 on hosts 0 and 1 (10.77.0.1-2:7100, with a job token), one client
# process on each of the three hosts. Exit 0 pass, 1 fail, 77 skipped (not
# root, or `ip netns` not permitted).
#
# Scenarios:
#   mf          pace_mf (3 processes x 2 workers, bsp, 20 clocks) trains past
#               the bias baseline; then a fresh process on each host reads the
#               whole model (--resume --export): the 3 exports are identical.
#   kill        pace_client_proc (integer tables of every consistency model,
#               read rule and read-my-writes checked on every read); shard 1
#               is SIGKILLed mid-run and restarted: the stored totals equal the
#               exact sum of every client's increments.
#   link_short  host 1's link (shard 1) goes down for 3 s, well under the
#               clients' shard_timeout_ms (30 s), and up again: exact totals.
#   link_long   host 1's link goes down for longer than the clients'
#               shard_timeout_ms (3 s): every client ends with exit 1 and a
#               clear "unreachable" error naming the shard, none hangs.
set -uo pipefail
SCENARIO=${1:?usage: netns_cluster_test.sh mf|kill|link_short|link_long BIN_DIR}
# shellcheck source=tests/cluster/netns_lib.sh
source "$(dirname "$0")/netns_lib.sh"
netns_init "${2:?usage: netns_cluster_test.sh SCENARIO BIN_DIR}"
for b in paced pace_mf pace_gen pace_client_proc; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b is missing (build it first)"
done

# run_proc_clients FLAGS...: pace_client_proc on hosts 0..2 (client i on host i).
CLIENT_PIDS=()
run_proc_clients() {
  local h
  CLIENT_PIDS=()
  for ((h = 0; h < 3; h++)); do
    on_host "client$h" "$h" timeout 300 "$BIN/pace_client_proc" --servers="$SERVERS" \
      --client_id=$h --num_clients=3 --seed=$((h + 11)) --token_file="$LOG_DIR/job.token" "$@"
    CLIENT_PIDS+=("$LAST_PID")
  done
}

# wait_clients_started: every client of run_proc_clients has connected to
# both shards (printed START), so a fault injected next lands in the run of
# all three, also when the processes start slowly (sanitizer builds: under
# TSan a client took more than the fixed 1 s that was waited before).
wait_clients_started() {
  local h i
  for ((h = 0; h < 3; h++)); do
    for ((i = 0; i < 1200; i++)); do
      grep -qs '^START' "$LOG_DIR/client$h.log" && break
      kill -0 "${CLIENT_PIDS[$h]}" 2>/dev/null ||
        fail "client $h exited before it started: $(grep -m1 FAIL "$LOG_DIR/client$h.log")"
      sleep 0.05
    done
    grep -qs '^START' "$LOG_DIR/client$h.log" || fail "client $h did not start within 60 s"
  done
}

# wait_proc_clients: every client exits 0 with OK; their TOTAL lines summed
# per (table, row) go to $LOG_DIR/expected.
wait_proc_clients() {
  local h rc
  for ((h = 0; h < 3; h++)); do
    wait "${CLIENT_PIDS[$h]}"
    rc=$?
    [ "$rc" = 0 ] || fail "client $h exited $rc: $(grep -m1 FAIL "$LOG_DIR/client$h.log")"
    grep -qx OK "$LOG_DIR/client$h.log" || fail "client $h did not print OK"
  done
  awk '$1 == "TOTAL" { t[$2 " " $3] += $4 } END { for (k in t) print k, t[k] }' \
    "$LOG_DIR"/client[012].log | sort >"$LOG_DIR/expected"
}

# verify_totals: a reader process on host 2 reads every row from both shards;
# the stored values must equal the expected totals exactly.
verify_totals() {
  on_host verify 2 timeout 120 "$BIN/pace_client_proc" --servers="$SERVERS" --client_id=0 \
    --num_clients=3 --mode=verify --token_file="$LOG_DIR/job.token"
  wait "$LAST_PID" || fail "the verifier failed: $(grep -m1 FAIL "$LOG_DIR/verify.log")"
  awk '$1 == "ROW" { print $2, $3, $4 }' "$LOG_DIR/verify.log" | sort >"$LOG_DIR/stored"
  local rows sum
  rows=$(wc -l <"$LOG_DIR/stored")
  sum=$(awk '{ s += $3 } END { print s + 0 }' "$LOG_DIR/stored")
  [ "$rows" = 120 ] || fail "the verifier read $rows rows, expected 120"
  [ "$sum" -gt 0 ] || fail "every stored total is 0"
  diff "$LOG_DIR/expected" "$LOG_DIR/stored" >"$LOG_DIR/totals.diff" ||
    fail "stored totals differ from the clients' increments: $(head -5 "$LOG_DIR/totals.diff")"
  say "exact totals: $rows rows, sum $sum"
}

reconnected_clients() {
  local h n=0
  for ((h = 0; h < 3; h++)); do grep -qs reconnected "$LOG_DIR/client$h.log" && n=$((n + 1)); done
  echo $n
}

case $SCENARIO in
  mf)
    "$BIN/pace_gen" ratings --users=600 --items=300 --rank=4 --ratings=30000 --noise=0.5 --seed=1 \
      --out="$LOG_DIR/train.txt" --test_out="$LOG_DIR/test.txt" --test_fraction=0.1 \
      >"$LOG_DIR/gen.log" 2>&1 || fail "pace_gen failed"
    start_shard 0
    start_shard 1
    mf_flags=(--train="$LOG_DIR/train.txt" --test="$LOG_DIR/test.txt" --servers="$SERVERS"
      --num_clients=3 --token_file="$LOG_DIR/job.token" --consistency=bsp --rank=4 --clocks=20
      --workers=2)
    pids=()
    for ((h = 0; h < 3; h++)); do
      on_host "mf$h" "$h" timeout 300 "$BIN/pace_mf" "${mf_flags[@]}" --client_id=$h \
        --data_dir="$LOG_DIR/unused$h"
      pids+=("$LAST_PID")
    done
    for ((h = 0; h < 3; h++)); do
      wait "${pids[$h]}" || fail "pace_mf client $h failed"
    done
    # Client 0 reports; the model beat the bias-only baseline.
    line=$(grep '^# done: ' "$LOG_DIR/mf0.log")
    rmse=$(echo "$line" | sed -n 's/.*; test RMSE \([0-9.]*\) (bias baseline \([0-9.]*\)).*/\1 \2/p')
    [ -n "$rmse" ] || fail "client 0 printed no final test RMSE: $line"
    awk -v r="${rmse% *}" -v b="${rmse#* }" 'BEGIN { exit !(r < b - 0.05) }' ||
      fail "final test RMSE ${rmse% *} is not below the bias baseline ${rmse#* } - 0.05"
    for ((h = 1; h < 3; h++)); do
      grep -q '^# done: clocks 0\.\.19,' "$LOG_DIR/mf$h.log" || fail "client $h did not finish 20 clocks"
    done
    # The stored model as read by a fresh process on each host: identical.
    for h in 2 1 0; do
      on_host "export$h" "$h" timeout 120 "$BIN/pace_mf" "${mf_flags[@]}" --client_id=0 --resume \
        --export="$LOG_DIR/export$h" --data_dir="$LOG_DIR/unused$h"
      wait "$LAST_PID" || fail "export from host $h failed"
    done
    for f in user_factors.csv item_factors.csv; do
      [ "$(wc -l <"$LOG_DIR/export2/$f")" -gt 100 ] || fail "$f exported from host 2 is too short"
      for h in 1 0; do
        cmp -s "$LOG_DIR/export2/$f" "$LOG_DIR/export$h/$f" || fail "$f differs between hosts 2 and $h"
      done
    done
    say "pace_mf on 3 hosts: test RMSE, bias baseline: $rmse; exports from the 3 hosts identical"
    ;;
  kill)
    start_shard 0
    start_shard 1
    run_proc_clients --workers=2 --clocks=100 --ops=20 --sleep_us=20000
    wait_clients_started
    sleep 0.5
    kill -9 "${SHARD_PID[1]}"
    wait "${SHARD_PID[1]}" 2>/dev/null
    say "shard 1 killed (SIGKILL)"
    sleep 0.5
    start_shard 1 paced1.restarted
    say "shard 1 restarted"
    wait_proc_clients
    n=$(reconnected_clients)
    [ "$n" = 3 ] || fail "only $n of 3 clients reconnected: the kill missed the run"
    verify_totals
    ;;
  link_short)
    start_shard 0
    start_shard 1
    run_proc_clients --workers=2 --clocks=60 --ops=20 --sleep_us=20000 --shard_timeout_ms=30000
    wait_clients_started
    sleep 0.5
    link_down 1
    say "host 1's link down"
    sleep 3
    for p in "${CLIENT_PIDS[@]}"; do
      kill -0 "$p" 2>/dev/null || fail "a client finished during the outage: it missed the run"
    done
    link_up 1
    say "host 1's link up"
    wait_proc_clients
    verify_totals
    ;;
  link_long)
    start_shard 0
    start_shard 1
    run_proc_clients --workers=2 --clocks=400 --ops=20 --sleep_us=20000 --shard_timeout_ms=3000
    wait_clients_started
    sleep 0.5
    link_down 1
    say "host 1's link down (clients' shard_timeout_ms is 3000)"
    start=$(date +%s)
    for ((h = 0; h < 3; h++)); do
      wait "${CLIENT_PIDS[$h]}"
      rc=$?
      [ "$rc" = 1 ] || fail "client $h exited $rc, expected 1 (a clear error)"
      line=$(grep -m1 '^FAIL' "$LOG_DIR/client$h.log")
      # Host 1 lost shard 0, the other hosts lost shard 1.
      want=$(host_ip $((h == 1 ? 0 : 1))):7100
      case $line in
        *"$want"*unreachable*) ;;
        *) fail "client $h: expected an error naming the unreachable shard, got: $line" ;;
      esac
      say "client $h: $line"
    done
    took=$(($(date +%s) - start))
    link_up 1
    [ "$took" -lt 60 ] || fail "the clients took $took s to give up"
    say "every client gave up after ${took} s with a clear error"
    ;;
  *) fail "unknown scenario '$SCENARIO'" ;;
esac
say "$SCENARIO: PASS"
