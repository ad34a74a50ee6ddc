#!/usr/bin/env bash
# tools/bench/model_scale.sh [BUILD_DIR] — benchmark 8: pace_mf at
# model scale, embedded, against pace_mf --baseline on the same data in the
# same run. BENCH_REPS runs of each (default 3), interleaved; the medians
# count. Prints the runs, two RATIO lines and the peak RSS of each.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
reps=${BENCH_REPS:-3}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio_line() {  # ratio_line LABEL SUBJECT BASELINE TARGET
  awk -v l="$1" -v s="$2" -v b="$3" -v t="$4" 'BEGIN {
    r = (b > 0) ? s / b : 0
    printf "RATIO %s: %.3f (%.0f vs %.0f; target >= %.2f) %s\n", l, r, s, b, t, (r >= t) ? "MET" : "MISSED" }'
}
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
# The model-scale job: 700k ratings (413k users rated), 3 clocks of 40% of the
# ratings each; the factor tables are ~220 MB. 8a: default budgets (the model
# fits in the client cache); 8b: a tenth of the factor tables as the memory
# budget (--memory_mb if pace_mf has it, else --cache_mb and --block_cache_mb
# both at a tenth). The shard's store stays in the OS page cache here.
"$bin/pace_gen" ratings --users=600000 --items=20000 --rank=8 --ratings=700000 --seed=1 \
  --out="$work/ms-train.txt" --test_out="$work/ms-test.txt" --test_fraction=0.05 >/dev/null
ms=("$bin/pace_mf" --train="$work/ms-train.txt" --test="$work/ms-test.txt" --rank=128 --clocks=3
  --minibatch=0.4 --lr=0.08)
# Factor table bytes: (users + items) rows of rank + 1 f32 (the baseline's
# header line names the counts).
tables_mb=$("${ms[@]}" --baseline --clocks=1 --minibatch=0.01 2>&1 |
  awk '/ users, / { for (i = 1; i < NF; i++) { if ($(i+1) == "users,") u = $i; if ($(i+1) == "items,") it = $i } }
       END { printf "%d", (u + it) * 129 * 4 / 1048576 }')
tenth=$(( tables_mb / 10 > 1 ? tables_mb / 10 : 1 ))
help=$("$bin/pace_mf" --helpfull 2>&1 || true)  # (--helpfull exits 1)
if grep -q -- '-memory_mb ' <<< "$help"; then
  small=(--memory_mb=$tenth); small_desc="--memory_mb=$tenth"
else
  small=(--cache_mb=$tenth --block_cache_mb=$tenth)
  small_desc="--cache_mb=$tenth --block_cache_mb=$tenth (no --memory_mb in this pace_mf)"
fi
# run8 NAME ARGS...: one run; prints "RATE PEAK_RSS_KB" (rate from "# done:").
run8() {
  local name=$1; shift
  local log=$work/ms-$name.log rss=0
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f 'maxrss_kb %M' -o "$work/ms-$name.rss" "$@" > "$log" 2>&1 || true
    rss=$(awk '/^maxrss_kb/ { print $2 }' "$work/ms-$name.rss")
  else
    "$@" > "$log" 2>&1 || true
  fi
  awk -v r="$rss" '/^# done:/ { for (i = 1; i < NF; i++) if ($(i+1) == "ratings/s") v = $i } END { print v + 0, r + 0 }' "$log"
}
b8=() a8=() s8=() rb8=() ra8=() rs8=()
for ((i = 0; i < reps; i++)); do
  rm -rf "$work"/ms-pd*
  read -r v r < <(run8 "b$i" "${ms[@]}" --baseline); b8+=("$v"); rb8+=("$r")
  read -r v r < <(run8 "a$i" "${ms[@]}" --data_dir="$work/ms-pda$i"); a8+=("$v"); ra8+=("$r")
  read -r v r < <(run8 "s$i" "${ms[@]}" --data_dir="$work/ms-pds$i" "${small[@]}"); s8+=("$v"); rs8+=("$r")
done
echo "  factor tables ${tables_mb} MB; 8b budget: $small_desc"
echo "  ratings/s, $reps runs each: baseline ${b8[*]}; 8a fits ${a8[*]}; 8b a tenth ${s8[*]}"
echo "  peak RSS (VmHWM, kB): baseline ${rb8[*]}; 8a ${ra8[*]}; 8b ${rs8[*]}"
ratio_line "8a MF model scale, budgets that fit vs --baseline" "$(median "${a8[@]}")" "$(median "${b8[@]}")" 0.5
ratio_line "8b MF model scale, memory at a tenth of the tables vs --baseline" "$(median "${s8[@]}")" "$(median "${b8[@]}")" 0.25
awk -v b="$(median "${rb8[@]}")" -v a="$(median "${ra8[@]}")" -v s="$(median "${rs8[@]}")" 'BEGIN {
  printf "8 peak RSS (median): baseline %.0f MB, 8a %.0f MB, 8b %.0f MB (report only)\n", b / 1024, a / 1024, s / 1024 }'

echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
