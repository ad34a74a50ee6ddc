#!/usr/bin/env bash
# install_test.sh BUILD_DIR SRC_DIR [SANITIZER_FLAGS [CXX]] — installs the build into a temporary
# prefix (cmake --install) and builds docs/client-example.md's program out of
# tree against it, once with CMake (find_package(PaceDB), PaceDB::client) and
# once with pkg-config (pacedb.pc), then runs both. Exit 77 (skipped) only if
# pkg-config is missing. SANITIZER_FLAGS (a sanitizer build's -fsanitize=...)
# are added to the user program's compile and link; CXX (default $CXX, else
# c++) compiles it: a sanitizer build's own compiler, whose sanitizer runtime
# its libraries were built against.
set -euo pipefail
build=$(cd "${1:?usage: install_test.sh BUILD_DIR SRC_DIR}" && pwd)
src=$(cd "${2:?usage: install_test.sh BUILD_DIR SRC_DIR}" && pwd)
san=${3:-}
cxx=${4:-${CXX:-c++}}
command -v pkg-config >/dev/null || { echo "pkg-config not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
test -f "$prefix/include/pace/client/pace.h"
test -f "$prefix/lib/cmake/PaceDB/PaceDBConfig.cmake"
test -x "$prefix/bin/pace_mf"
"$prefix/bin/pace_mf" --version

# The program of docs/client-example.md: its first ```c++ block.
mkdir -p "$tmp/app"
awk '/^```c\+\+$/ && !done {on = 1; next} on && /^```$/ {on = 0; done = 1} on' \
  "$src/docs/client-example.md" >"$tmp/app/main.cc"
grep -q 'int main' "$tmp/app/main.cc"

# The installed headers must not reach back into the source tree.
if grep -rhoE '#include "[a-z_]+/[a-z_]+\.h"' "$prefix/include/pace" | sed 's/#include "//; s/"$//' |
   while read -r h; do test -f "$prefix/include/pace/$h" || { echo "missing installed header $h"; exit 1; }; done
then :; else exit 1; fi

# 1. CMake package.
cat >"$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(pace_example_user LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(PaceDB 0.1 REQUIRED)
add_executable(example main.cc)
target_link_libraries(example PRIVATE PaceDB::client)
CM
cmake -S "$tmp/app" -B "$tmp/app-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" \
  >"$tmp/cmake.log" || { cat "$tmp/cmake.log"; exit 1; }
cmake --build "$tmp/app-build" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
"$tmp/app-build/example" "$tmp/data-cmake" >"$tmp/out-cmake" 2>"$tmp/err-cmake" ||
  { cat "$tmp/err-cmake"; exit 1; }
grep -q '^row 3: 20 20 20$' "$tmp/out-cmake" || { cat "$tmp/out-cmake"; exit 1; }

# 2. pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists pacedb
# shellcheck disable=SC2046
# shellcheck disable=SC2086
"$cxx" -std=c++17 -O1 $san "$tmp/app/main.cc" -o "$tmp/example-pc" \
  $(pkg-config --cflags --libs pacedb) 2>"$tmp/pc.log" || { cat "$tmp/pc.log"; exit 1; }
"$tmp/example-pc" "$tmp/data-pc" >"$tmp/out-pc" 2>"$tmp/err-pc" || { cat "$tmp/err-pc"; exit 1; }
grep -q '^row 3: 20 20 20$' "$tmp/out-pc" || { cat "$tmp/out-pc"; exit 1; }
echo "install_test: ok (CMake package and pkg-config)"
