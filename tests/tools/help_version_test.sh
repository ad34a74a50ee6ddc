#!/usr/bin/env bash
# help_version_test.sh BIN_DIR — every binary answers --help (its own flags,
# grouped, readable defaults, no build paths, exit 0) and --version (version
# and git revision, exit 0); pacectl COMMAND --help describes the command.
set -u
bin=${1:?usage: help_version_test.sh BIN_DIR}
fail=0
bad() { echo "FAIL: $*"; fail=1; }

for b in paced pace_mf pace_lda pace_gen pacectl; do
  [ -x "$bin/$b" ] || { bad "$b not built in $bin"; continue; }
  v=$("$bin/$b" --version); rc=$?
  [ $rc -eq 0 ] || bad "$b --version exit $rc"
  [[ $v =~ ^$b\ [0-9]+\.[0-9]+\.[0-9]+ ]] || bad "$b --version printed '$v'"
  h=$("$bin/$b" --help); rc=$?
  [ $rc -eq 0 ] || bad "$b --help exit $rc"
  [ "$(printf '%s\n' "$h" | wc -l)" -lt 100 ] || bad "$b --help is $(printf '%s\n' "$h" | wc -l) lines"
  for leak in flagfile tryfromenv '\.cc' '/work' '00000000000' 'e+01'; do
    printf '%s\n' "$h" | grep -q -- "$leak" && bad "$b --help shows '$leak'"
  done
done

# pace_mf's own flags are on the first screen, grouped.
head20=$("$bin/pace_mf" --help | head -20)
for want in 'usage:' 'data:' '--train=STR' '--test=STR' 'model:' '--rank=INT' 'default: 0.08'; do
  printf '%s\n' "$head20" | grep -q -- "$want" || bad "pace_mf --help | head -20 lacks '$want'"
done
h=$("$bin/pace_mf" --help)
for want in 'job:' 'cluster' 'memory:' '--servers=STR' '--cache_mb=INT' '--resume' '--baseline_mmap'; do
  printf '%s\n' "$h" | grep -q -- "$want" || bad "pace_mf --help lacks '$want'"
done
# --help wins over other flags, even bad ones.
"$bin/pace_mf" --train=x --help >/dev/null || bad "pace_mf --train=x --help exit $?"
"$bin/pace_lda" --help | grep -q -- '--topics=INT' || bad "pace_lda --help lacks --topics"
"$bin/paced" --help | grep -q -- '--listen=STR' || bad "paced --help lacks --listen"
"$bin/pace_gen" --help | grep -q -- '--noise=NUM' || bad "pace_gen --help lacks --noise"
"$bin/pace_gen" --help | grep -q -- '--skew=NUM' || bad "pace_gen --help lacks --skew"
"$bin/pace_gen" ratings --help | grep -q -- '--users=INT' || bad "pace_gen ratings --help"

# pacectl COMMAND --help: that command's usage and flags.
e=$("$bin/pacectl" export --help); rc=$?
[ $rc -eq 0 ] || bad "pacectl export --help exit $rc"
printf '%s\n' "$e" | grep -q -- 'usage: pacectl .*export NAME' || bad "pacectl export --help: $e"
printf '%s\n' "$e" | grep -q -- '--format=csv|npy' || bad "pacectl export --help lacks --format"
printf '%s\n' "$e" | grep -q -- 'Commands:' && bad "pacectl export --help prints the general usage"
c=$("$bin/pacectl" checkpoint create --help) || bad "pacectl checkpoint create --help exit $?"
printf '%s\n' "$c" | grep -q -- 'checkpoint create DIR' || bad "pacectl checkpoint create --help: $c"
"$bin/pacectl" --help | grep -q -- 'Commands:' || bad "pacectl --help lacks the command list"

[ $fail -eq 0 ] && echo "help_version_test: ok"
exit $fail
