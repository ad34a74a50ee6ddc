#!/usr/bin/env bash
# mpi_launch_test.sh BIN_DIR — `mpirun -np 3` launches the pace_mf client
# processes of a job whose 2 paced shards were started beforehand (loopback,
# job token), then pace_lda's on two fresh shards. No --client_id/--num_clients: each process takes them from
# OMPI_COMM_WORLD_RANK/SIZE. Checks that the three ranks are clients 0, 1, 2
# of 3, that all finish the 15 clocks, and that client 0's model beats the
# bias baseline. Exit 77 (skipped) when mpirun is missing (Debian: openmpi-bin,
# which `make test` installs as root).
set -uo pipefail
BIN=${1:?usage: mpi_launch_test.sh BIN_DIR}
command -v mpirun >/dev/null ||
  { echo "SKIP: mpirun not found (install openmpi-bin: make deps-test, as root)"; exit 77; }
for b in paced pace_mf pace_gen; do
  [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b is missing"; exit 1; }
done
DIR=$(mktemp -d "${TMPDIR:-/tmp}/pace-mpi.XXXXXX")
PIDS=()
cleanup() {
  local rc=$? p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  [ "$rc" = 0 ] || for f in "$DIR"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"$BIN/pace_gen" ratings --users=600 --items=300 --rank=4 --ratings=30000 --noise=0.5 --seed=1 \
  --out="$DIR/train.txt" --test_out="$DIR/test.txt" --test_fraction=0.1 >"$DIR/gen.log" 2>&1 ||
  fail "pace_gen failed"
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$DIR/job.token"
# start_shards NAME: 2 fresh shards for 3 clients; sets SERVERS.
start_shards() {
  local k i port servers=()
  for k in 0 1; do
    "$BIN/paced" --listen=127.0.0.1:0 --data_dir="$DIR/$1-shard$k" --shard=$k --num_shards=2 \
      --num_clients=3 --token_file="$DIR/job.token" >"$DIR/$1-paced$k.log" 2>&1 &
    PIDS+=($!)
    port=
    for ((i = 0; i < 200 && ${#port} == 0; i++)); do
      port=$(sed -n 's/^paced listening on .*:\([0-9]*\)$/\1/p' "$DIR/$1-paced$k.log" 2>/dev/null)
      [ -n "$port" ] || sleep 0.05
    done
    [ -n "$port" ] || fail "paced $k did not start"
    servers+=("127.0.0.1:$port")
  done
  SERVERS=$(IFS=,; echo "${servers[*]}")
}
start_shards mf

# Every rank's stdout goes to its own file (--output-filename DIR/out/1/rank.R/stdout).
timeout 300 mpirun --allow-run-as-root --oversubscribe -np 3 --output-filename "$DIR/out" \
  "$BIN/pace_mf" --train="$DIR/train.txt" --test="$DIR/test.txt" \
  --servers="$SERVERS" --token_file="$DIR/job.token" --rank=4 --clocks=15 \
  --workers=1 --consistency=essp --staleness=1 >"$DIR/mpirun.log" 2>&1 ||
  fail "mpirun exited $?: $(tail -3 "$DIR/mpirun.log")"
for r in 0 1 2; do
  out=$(find "$DIR/out" -path "*rank.$r/stdout" | head -1)
  [ -n "$out" ] || fail "no output of rank $r"
  grep -q "client $r of 3" "$out" || fail "rank $r is not client $r of 3: $(grep -m1 '^# servers' "$out")"
  grep -q '^# done: clocks 0\.\.14,' "$out" || fail "rank $r did not finish 15 clocks"
  [ "$r" = 0 ] && cp "$out" "$DIR/rank0.log"
done
rmse=$(sed -n 's/^# done: .*; test RMSE \([0-9.]*\) (bias baseline \([0-9.]*\)).*/\1 \2/p' \
  "$DIR/rank0.log")
[ -n "$rmse" ] || fail "rank 0 printed no final test RMSE"
awk -v r="${rmse% *}" -v b="${rmse#* }" 'BEGIN { exit !(r < b - 0.05) }' ||
  fail "final test RMSE ${rmse% *} is not below the bias baseline ${rmse#* } - 0.05"

# pace_lda the same way, on a fresh pair of shards.
"$BIN/pace_gen" corpus --docs=300 --vocab=200 --topics=5 --doc_len=50 --seed=2 \
  --out_docword="$DIR/docword.txt" --out_vocab="$DIR/vocab.txt" >"$DIR/gen-lda.log" 2>&1 ||
  fail "pace_gen corpus failed"
start_shards lda
timeout 300 mpirun --allow-run-as-root --oversubscribe -np 3 --output-filename "$DIR/out-lda" \
  "$BIN/pace_lda" --docword="$DIR/docword.txt" --vocab="$DIR/vocab.txt" --topics=5 --clocks=8 \
  --workers=1 --servers="$SERVERS" --token_file="$DIR/job.token" --topics_out=0 \
  >"$DIR/mpirun-lda.log" 2>&1 || fail "mpirun pace_lda exited $?: $(tail -3 "$DIR/mpirun-lda.log")"
for r in 0 1 2; do
  out=$(find "$DIR/out-lda" -path "*rank.$r/stdout" | head -1)
  [ -n "$out" ] || fail "no pace_lda output of rank $r"
  grep -q "client $r of 3" "$out" || fail "pace_lda rank $r is not client $r of 3"
  grep -q '^# done: [0-9]* tokens' "$out" || fail "pace_lda rank $r did not finish"
done
echo "PASS: mpirun -np 3: pace_mf and pace_lda clients 0..2 of 3 from OMPI_COMM_WORLD_*," \
  "pace_mf test RMSE ${rmse% *} (bias baseline ${rmse#* })"
