# tools/bench/lib.sh — helpers of the end-to-end benchmark scripts (model_scale.sh and the
# scripts it runs). Sourced, not run. Expects $bin (the build's bin directory) and $work (a
# scratch directory the caller removes).
#
# Every comparison prints one line
#   RATIO <label>: <ratio> (<subject> vs <baseline>; target >= T) MET|MISSED
# or, when a run produced no rate,
#   RATIO <label>: not run (<why>; target >= T) FAILED
# and a script exits 1 if any comparison with a target printed FAILED (a missed target is
# reported, not a failure).

bench_failed=0

bench_load() {  # bench_load [after]: the load average, before and after the runs
  echo "# load average${1:+ $1}: $(cut -d' ' -f1-3 /proc/loadavg)"
}

bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
    END { print (NR == 0) ? 0 : (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# bench_ratio LABEL SUBJECT BASELINE TARGET [WHY]: rate ratio SUBJECT / BASELINE against
# "target >= TARGET". A zero or empty rate on either side is "not run" (WHY says why) and
# marks the script failed.
bench_ratio() {
  local label=$1 s=${2:-0} b=${3:-0} t=$4 why=${5:-a run produced no rate}
  if awk -v s="$s" -v b="$b" 'BEGIN { exit !(s > 0 && b > 0) }'; then
    awk -v l="$label" -v s="$s" -v b="$b" -v t="$t" 'BEGIN { r = s / b
      printf "RATIO %s: %.3f (%.0f vs %.0f; target >= %.2f) %s\n", l, r, s, b, t, (r >= t) ? "MET" : "MISSED" }'
  else
    printf 'RATIO %s: not run (%s; target >= %.2f) FAILED\n' "$label" "$why" "$t"
    bench_failed=1
  fi
}

# bench_ratio_at_most LABEL VALUE BOUND TARGET UNIT: VALUE / BOUND against "target <= TARGET"
# (e.g. a peak RSS against a memory budget). A zero VALUE is "not run".
bench_ratio_at_most() {
  local label=$1 v=${2:-0} b=$3 t=$4 unit=$5
  if awk -v v="$v" -v b="$b" 'BEGIN { exit !(v > 0 && b > 0) }'; then
    awk -v l="$label" -v v="$v" -v b="$b" -v t="$t" -v u="$unit" 'BEGIN { r = v / b
      printf "RATIO %s: %.3f (%.0f vs %.0f %s; target <= %.2f) %s\n", l, r, v, b, u, t, (r <= t) ? "MET" : "MISSED" }'
  else
    printf 'RATIO %s: not run (no measurement; target <= %.2f) FAILED\n' "$label" "$t"
    bench_failed=1
  fi
}

# bench_skew_suffix SKEW: the label suffix of a skewed data set ("" for uniform).
bench_skew_suffix() {
  awk -v s="$1" 'BEGIN { if (s + 0 > 0) printf ", skew %g", s }'
}

# bench_mf_shape DEFAULT: the label note of an MF job whose $users/$items/$ratings/$rank differ
# from DEFAULT ("USERS/ITEMS/RATINGS/RANK", the sizes the benchmark is defined with); "" if not.
bench_mf_shape() {
  [ "$users/$items/$ratings/$rank" = "$1" ] && return 0
  printf ' [%s users x %s items, %s ratings, rank %s]' "$users" "$items" "$ratings" "$rank"
}

# bench_8a_sizes: the 8a job's data sizes (users, items, ratings, rank; BENCH_MS_* for smoke runs).
bench_8a_sizes() {
  users=${BENCH_MS_USERS:-600000} items=${BENCH_MS_ITEMS:-20000}
  ratings=${BENCH_MS_RATINGS:-700000} rank=${BENCH_MS_RANK:-128}
}

# bench_8a_job SKEW: the 8a data at SKEW (generated once, bench_ratings) and the 8a pace_mf command
# in ms=(...): 3 clocks of 40% at rank $rank. REQUIRES: bench_8a_sizes, $bin.
bench_8a_job() {
  bench_ratings "$users" "$items" "$ratings" "$1" 0.05
  ms=("$bin/pace_mf" --train="$bench_train" --test="$bench_test" --rank="$rank" --clocks=3
    --minibatch=0.4 --lr=0.08)
}

# bench_cache: where generated inputs are kept between runs (they take a while to generate).
bench_cache() {
  local dir=${BENCH_DATA_DIR:-$build/bench/data}
  mkdir -p "$dir" && (cd "$dir" && pwd)
}

# bench_ratings USERS ITEMS RATINGS SKEW TEST_FRACTION: generates (once; kept in bench_cache)
# ratings of true rank 8, seed 1; sets bench_train and bench_test (empty without a test set).
bench_ratings() {
  local users=$1 items=$2 ratings=$3 skew=$4 tf=$5 cache key
  cache=$(bench_cache)
  key="ratings-u$users-i$items-r$ratings-skew$skew-test$tf-seed1"
  bench_train=$cache/$key.train.txt
  bench_test=""
  if awk -v f="$tf" 'BEGIN { exit !(f > 0) }'; then bench_test=$cache/$key.test.txt; fi
  if [ ! -s "$bench_train" ] || { [ -n "$bench_test" ] && [ ! -s "$bench_test" ]; }; then
    local args=(--users="$users" --items="$items" --rank=8 --ratings="$ratings" --seed=1
      --skew="$skew" --out="$bench_train.tmp")
    [ -n "$bench_test" ] && args+=(--test_out="$bench_test.tmp" --test_fraction="$tf")
    echo "# generating $key (kept in $cache)"
    "$bin/pace_gen" ratings "${args[@]}" > "$work/gen.log" 2>&1 || { cat "$work/gen.log" >&2; return 1; }
    [ -n "$bench_test" ] && mv "$bench_test.tmp" "$bench_test"
    mv "$bench_train.tmp" "$bench_train"
  fi
}

# bench_corpus DOCS DOC_LEN VOCAB TOPICS: a generated corpus (once; kept in bench_cache),
# seed 1; sets bench_docword.
bench_corpus() {
  local docs=$1 len=$2 vocab=$3 topics=$4 cache key
  cache=$(bench_cache)
  key="corpus-d$docs-l$len-v$vocab-k$topics-seed1"
  bench_docword=$cache/$key.docword.txt
  if [ ! -s "$bench_docword" ]; then
    echo "# generating $key (kept in $cache)"
    "$bin/pace_gen" corpus --docs="$docs" --doc_len="$len" --vocab="$vocab" --topics="$topics" \
      --seed=1 --out_docword="$bench_docword.tmp" > "$work/gen.log" 2>&1 || { cat "$work/gen.log" >&2; return 1; }
    mv "$bench_docword.tmp" "$bench_docword"
  fi
}

# bench_run NAME UNIT LIMIT_S CMD...: runs CMD (output in $work/NAME.log) under a timeout of
# LIMIT_S seconds and /usr/bin/time. Prints "RATE PEAK_RSS_KB STATUS": the number before
# " UNIT/s" on its "# done:" line (0 if none), its peak RSS (0 if unknown) and "ok",
# "timeout" or "exit-N".
bench_run() {
  local name=$1 unit=$2 limit=$3; shift 3
  local log=$work/$name.log rc=0 rss=0 status=ok
  local wrap=(timeout --kill-after=10 "$limit")
  if [ -x /usr/bin/time ]; then
    /usr/bin/time -f 'maxrss_kb %M' -o "$log.rss" "${wrap[@]}" "$@" > "$log" 2>&1 || rc=$?
    rss=$(awk '/^maxrss_kb/ { print $2 }' "$log.rss" 2> /dev/null)
  else
    "${wrap[@]}" "$@" > "$log" 2>&1 || rc=$?
  fi
  if [ "$rc" = 124 ]; then
    status=timeout
  elif [ "$rc" != 0 ]; then
    status=exit-$rc
  fi
  awk -v u="$unit/s" -v r="${rss:-0}" -v st="$status" '
    /^# done:/ { for (i = 1; i < NF; i++) if ($(i+1) == u) v = $i }
    END { print v + 0, r + 0, st }' "$log"
}

# bench_why STATUS LIMIT_S: the reason a run produced no rate, for a "not run" line.
bench_why() {
  case $1 in
    timeout) echo "did not finish in $2 s" ;;
    exit-137) echo "killed by SIGKILL (out of memory, or did not stop within 10 s of a timeout of $2 s)" ;;
    exit-*) echo "exited with status ${1#exit-}" ;;
    *) echo "no '# done' line" ;;
  esac
}
