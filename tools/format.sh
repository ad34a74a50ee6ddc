#!/usr/bin/env bash
# tools/format.sh CLANG_FORMAT fix|check — formats or checks every C++ source in the repo.
set -euo pipefail
cf=${1:?clang-format binary}
mode=${2:?fix or check}
cd "$(dirname "$0")/.."
files=$(git ls-files '*.h' '*.cc' 2>/dev/null || find . -name '*.h' -o -name '*.cc' | grep -v '^./build')
[ -n "$files" ] || exit 0
if [ "$mode" = fix ]; then
  $cf -i $files
else
  $cf --dry-run --Werror $files
fi
