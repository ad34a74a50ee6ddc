#!/usr/bin/env bash
# Usage: cmake/sanitizer_reports.sh BUILD_DIR CTEST_ARGS...
# Runs ctest in a sanitizer build dir (make asan / make tsan) and fails if any
# test failed or any process -- a test or a child it started (paced,
# pace_client_proc, pace_mf, ...) -- wrote a sanitizer report. Reports are
# files BUILD_DIR/sanitizer-logs/<test>.<pid> (log_path, cmake/Sanitizers.cmake);
# they are printed here, so a report in a child whose stderr or exit code a
# test ignores still fails the run.
set -uo pipefail
build=$1
shift
logs="$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
(cd "$build" && ctest --output-on-failure "$@")
status=$?
# A file whose every line is the runtime's note that a symbol's name was too
# long for its buffer (clang's runtime, symbolizing a suppressed race's
# frames to match the suppressions) holds no report.
benign='^==[0-9]+==WARNING: Symbolizer buffer too small$'
reports=$(for f in $(find "$logs" -type f -size +0 | sort); do
  grep -qvE "$benign" "$f" && echo "$f"
done)
if [ -n "$reports" ]; then
  for f in $reports; do
    echo "=== sanitizer report: $f"
    cat "$f"
  done
  echo "sanitizer reports: $(echo "$reports" | wc -l) file(s) in $logs" >&2
  status=1
else
  echo "sanitizer reports: none"
fi
exit $status
