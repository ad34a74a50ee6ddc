#!/usr/bin/env bash
# Proves check_layering.sh catches violations: builds tiny trees that break
# each rule and expects the check to fail on each, and pass on a clean tree.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
expect() {  # expect pass|fail NAME FILE CONTENT
  local want=$1 name=$2 file=$3 content=$4 dir="$tmp/$2"
  mkdir -p "$dir/$(dirname "$file")"
  printf '%s\n' "$content" > "$dir/$file"
  if "$here/check_layering.sh" "$dir" >/dev/null; then got=pass; else got=fail; fi
  if [ "$got" != "$want" ]; then echo "FAIL $name: expected $want, got $got"; fails=$((fails+1)); else echo "ok   $name"; fi
}
expect pass clean           storage/a.cc   '#include "common/status.h"'
expect fail storage_up      storage/a.cc   '#include "net/messages.h"'
expect pass storage_rule    storage/a.h    '#include "consistency/batch_rule.h"'
expect fail storage_engine  storage/a.cc   '#include "consistency/shard_engine.h"'
expect fail common_rocks    common/a.h     '#include <rocksdb/db.h>'
expect fail net_storage     net/a.cc       '#include "storage/shard_store.h"'
expect fail consist_net     consistency/a.cc '#include "net/session.h"'
expect fail client_rocks    client/a.cc    '#include <rocksdb/db.h>'
expect fail apps_server     apps/a.cc      '#include "server/shard_service.h"'
expect fail lib_gflags      storage/a.cc   '#include <gflags/gflags.h>'
expect pass main_gflags     server/paced_main.cc '#include <gflags/gflags.h>'
expect fail glog_in_header  net/a.h        '#include <glog/logging.h>'
expect fail public_boost    client/pace.h  '#include <boost/asio.hpp>'
expect fail public_net      client/pace.h  '#include "net/messages.h"'
expect pass public_std      client/pace.h  '#include <vector>'
expect pass python_client  python/src/a.cc '#include "client/pace.h"'
expect fail python_server  python/src/a.cc '#include "server/shard_service.h"'
expect fail python_storage python/src/a.cc '#include "storage/shard_store.h"'
expect pass python_offline python/src/offline.cc '#include "tools/ctl/export.h"'
expect fail python_offline_net python/src/offline.cc '#include "net/messages.h"'
expect pass python_pybind  python/src/a.cc '#include <pybind11/numpy.h>'
expect fail client_pybind  client/a.cc    '#include <pybind11/pybind11.h>'
expect fail python_rocks   python/src/offline.cc '#include <rocksdb/db.h>'
total=$(grep -c '^expect ' "$0")
echo "$((total - fails)) passed, $fails failed"
[ $fails = 0 ]
