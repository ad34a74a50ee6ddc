#!/usr/bin/env bash
# readme_test.sh SRC_DIR BUILD_DIR [DOC] — runs the ```sh blocks of README.md as
# printed, in order, in one temporary directory where build/ points at
# BUILD_DIR. Blocks that call `make` (they install and build) are skipped.
# With DOC (a markdown file under SRC_DIR, e.g. docs/operations.md), only its
# ```sh blocks right after a line "<!-- docs_test: runs -->" run (the other
# blocks there show commands for many hosts).
# A block fails if it exits non-zero or leaves a process running 5 s after
# it ends (every block must stop what it starts).
set -uo pipefail
src=$(cd "${1:?usage: readme_test.sh SRC_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?usage: readme_test.sh SRC_DIR BUILD_DIR}" && pwd)
tmp=$(mktemp -d)
[ -n "${README_TEST_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
ln -s "$build" "$tmp/build"
mkdir "$tmp/blocks"
doc=${3:-README.md}
marked=0
[ $# -ge 3 ] && marked=1
awk -v dir="$tmp/blocks" -v marked=$marked '
  /^<!-- docs_test: runs -->$/ { mark = 1; next }
  /^```sh$/ && (!marked || mark) { n++; file = sprintf("%s/%02d.sh", dir, n); on = 1; mark = 0; next }
  { mark = 0 }
  on && /^```$/ { on = 0; next }
  on { print > file }' "$src/$doc"
ran=0
fail=0
for block in "$tmp"/blocks/*.sh; do
  if grep -qE '(^|[[:space:];&|])make( |$)' "$block"; then
    echo "--- skipped (builds): $(head -1 "$block")"
    continue
  fi
  echo "--- $(basename "$block"): $(head -1 "$block")"
  # Its own session, so that whatever it leaves running can be found.
  (cd "$tmp" && exec setsid bash -c 'ps -o sid= $$ > "$1.sid"; exec bash -e "$1"' _ "$block" \
     >"$block.out" 2>&1) &
  wait $!
  rc=$?
  sid=$(tr -d ' ' <"$block.sid")
  # A process of the block that is still exiting gets 5 s (a sanitizer
  # build's symbolizer, a child that exits once its parent's pipe closes).
  for _ in $(seq 50); do
    left=$(ps -eo pid=,sid= | awk -v s="$sid" '$2 == s {print $1}')
    [ -z "$left" ] && break
    sleep 0.1
  done
  if [ $rc -ne 0 ]; then
    echo "FAIL: block exited $rc:"; cat "$block"; echo "output:"; tail -n 30 "$block.out"; fail=1
  fi
  if [ -n "$left" ]; then
    echo "FAIL: block left processes running:"; ps -o pid=,args= -p "$(echo $left | tr ' ' ,)"
    cat "$block"; fail=1
    for p in $left; do kill "$p" 2>/dev/null; done
  fi
  ran=$((ran + 1))
done
least=3
[ $marked -eq 1 ] && least=1
[ $ran -ge $least ] || { echo "FAIL: only $ran blocks of $doc ran"; fail=1; }
[ $fail -eq 0 ] && echo "readme_test: $ran blocks of $doc ok"
exit $fail
