# shellcheck shell=bash
# Sourced by the cluster tests (tests/cluster/*.sh): three "hosts" as Linux
# network namespaces joined by a bridge, the processes started in them, and a
# teardown that runs on every exit (success, failure, signal).
#
# Layout of one run (names unique per run: pc<pid><random>):
#   ${NS}h0 10.77.0.1   ${NS}h1 10.77.0.2   ${NS}h2 10.77.0.3   (each: eth0, lo)
#   ${NS}sw: the switch, bridge br0 with one veth port per host (p0, p1, p2)
# The addresses exist only inside these namespaces; nothing is added to the
# caller's namespace, so concurrent runs never collide.
#
# Needs root and a kernel that permits `ip netns`; otherwise `netns_init`
# exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77), with the
# reason on stderr.

NS=pc$$$((RANDOM % 1000))
HOSTS=3
PIDS=()
LOG_DIR=

say() { echo "[$(date +%H:%M:%S)] $*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: $*" >&2
  exit 77
}

host_ip() { echo "10.77.0.$(($1 + 1))"; }

teardown() {
  local rc=$? p h
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for h in h0 h1 h2 sw; do
    # Anything still running inside our namespaces was started by this run.
    for p in $(ip netns pids "${NS}$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  for h in h0 h1 h2 sw; do ip netns del "${NS}$h" 2>/dev/null; done
  if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ -n "$LOG_DIR" ]; then
    for f in "$LOG_DIR"/*.log; do
      [ -f "$f" ] || continue
      echo "--- tail of $f" >&2
      tail -n 15 "$f" >&2
    done
  fi
  [ -n "$LOG_DIR" ] && [ "${KEEP_LOGS:-0}" != 1 ] && rm -rf "$LOG_DIR"
  exit "$rc"
}

# netns_init BIN_DIR: checks permissions, builds the namespaces, sets BIN.
netns_init() {
  BIN=$1
  [ "$(id -u)" = 0 ] || skip "needs root to create network namespaces (ip netns)"
  command -v ip >/dev/null || skip "the ip command (iproute2) is missing"
  trap teardown EXIT
  trap 'exit 130' INT TERM
  ip netns add "${NS}sw" 2>/dev/null || skip "ip netns add is not permitted here"
  LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pace-cluster.XXXXXX")
  ip -n "${NS}sw" link add br0 type bridge || fail "cannot create a bridge"
  ip -n "${NS}sw" link set br0 up
  local h
  for ((h = 0; h < HOSTS; h++)); do
    ip netns add "${NS}h$h" || fail "ip netns add ${NS}h$h"
    ip link add eth0 netns "${NS}h$h" type veth peer name "p$h" netns "${NS}sw" ||
      fail "cannot create the veth pair of host $h"
    ip -n "${NS}sw" link set "p$h" master br0 up
    ip -n "${NS}h$h" addr add "$(host_ip $h)/24" dev eth0
    ip -n "${NS}h$h" link set eth0 up
    ip -n "${NS}h$h" link set lo up
  done
  # The hosts reach each other: a TCP connect to a closed port is refused
  # (an RST came back) rather than timing out.
  for ((h = 1; h < HOSTS; h++)); do
    case $(ip netns exec "${NS}h0" timeout 5 bash -c "exec 3<>/dev/tcp/$(host_ip $h)/9" 2>&1) in
      *refused*) ;;
      *) fail "host 0 cannot reach host $h ($(host_ip $h))" ;;
    esac
  done
  head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$LOG_DIR/job.token"
  say "namespaces ${NS}h0..h2 on bridge ${NS}sw, logs in $LOG_DIR"
}

# on_host NAME H CMD...: runs CMD in host H's namespace in the background,
# stdout and stderr to $LOG_DIR/NAME.log; sets LAST_PID.
on_host() {
  local name=$1 h=$2
  shift 2
  ip netns exec "${NS}h$h" "$@" >"$LOG_DIR/$name.log" 2>&1 &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
}

# start_shard K [NAME]: paced shard K of 2 on host K, port 7100 (a fixed port
# is safe: the address is this run's own), log NAME (default paced$K); waits
# until it listens. Sets SHARD_PID[K]. Extra flags: SHARD_FLAGS.
declare -a SHARD_PID
SHARD_FLAGS=()
NUM_CLIENTS=3
start_shard() {
  local k=$1 name=${2:-paced$1} i
  on_host "$name" "$k" "$BIN/paced" --listen="$(host_ip "$k"):7100" \
    --data_dir="$LOG_DIR/shard$k" --shard="$k" --num_shards=2 --num_clients="$NUM_CLIENTS" \
    --token_file="$LOG_DIR/job.token" "${SHARD_FLAGS[@]}"
  SHARD_PID[$k]=$LAST_PID
  for ((i = 0; i < 200; i++)); do
    grep -qs "^paced listening on" "$LOG_DIR/$name.log" && return 0
    kill -0 "$LAST_PID" 2>/dev/null || fail "paced shard $k exited: $(cat "$LOG_DIR/$name.log")"
    sleep 0.05
  done
  fail "paced shard $k did not start"
}

SERVERS="$(host_ip 0):7100,$(host_ip 1):7100"

# link_down H / link_up H: the switch port of host H (the host sees its
# carrier go away; its address and routes stay).
link_down() { ip -n "${NS}sw" link set "p$1" down; }
link_up() { ip -n "${NS}sw" link set "p$1" up; }
