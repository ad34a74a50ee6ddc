#!/usr/bin/env bash
# check_layering.sh SRC_DIR — fails (exit 1, one line per violation) if a source
# file includes a header of a layer it may not depend on (docs/design.md, "Layers").
#
# Project includes are checked by their first path component; third-party
# includes by their prefix. gflags may be included only by binaries (files
# named *_main.cc, tests, benchmarks, examples, and anything under apps/,
# python/, tools/, tests/); glog only by .cc files in library layers. The public client
# header includes std and common/ only. python/ (the pacedb module) is held to
# apps/' rule, the public client API only, except its offline store reader
# (python/src/offline.cc), which may also use storage/ and tools/ (pacectl's
# export library, read-only), and its job record binding
# (python/src/job_bindings.cc), which may use apps/ (apps/shared/job_record.h,
# itself on the public client API); pybind11 only in python/.
set -u
src=${1:?usage: check_layering.sh SRC_DIR}
cd "$src" || exit 2
layers="common storage net consistency server client apps python tools tests"
dirs=$(for l in $layers; do [ -d "$l" ] && echo "$l"; done)
[ -n "$dirs" ] || { echo "layering: no source folders in $src"; exit 2; }

# One grep over every source; one awk pass applies the rules.
grep -rHE '^[[:space:]]*#[[:space:]]*include' --include='*.h' --include='*.cc' $dirs |
awk -v layers="$layers" '
BEGIN {
  # Project layers each layer may include (besides itself).
  allowed["common"] = ""
  allowed["storage"] = "common"
  allowed["net"] = "common"
  allowed["consistency"] = "common"
  allowed["server"] = "common storage net consistency"
  allowed["client"] = "common net consistency server"
  allowed["apps"] = "common client"
  allowed["python"] = "common client"
  allowed["python/src/offline.cc"] = "common client storage tools"
  allowed["python/src/job_bindings.cc"] = "common client apps"
  allowed["tools"] = "common storage net server client"
  allowed["tests"] = "common storage net consistency server client apps python tools"
  # Third-party libraries each layer may include.
  third["common"] = ""
  third["storage"] = "rocksdb"
  third["net"] = "boost flatbuffers"
  third["consistency"] = ""
  third["server"] = ""
  third["client"] = ""
  third["apps"] = ""
  third["python"] = "pybind11"
  third["tools"] = "rocksdb boost benchmark"
  third["tests"] = "rocksdb boost flatbuffers benchmark gtest gmock"
  nl = split(layers, L, " "); for (i = 1; i <= nl; i++) islayer[L[i]] = 1
  nk = split("rocksdb boost flatbuffers benchmark gtest gmock pybind11", K, " ")
  for (i = 1; i <= nk; i++) known[K[i]] = 1
  libs["common"] = libs["storage"] = libs["net"] = libs["consistency"] = libs["server"] = libs["client"] = 1
  bad = 0
}
function has(list, word) { return index(" " list " ", " " word " ") > 0 }
function violation(msg) { print "layering: " msg; bad = 1 }
{
  colon = index($0, ":"); file = substr($0, 1, colon - 1); line = substr($0, colon + 1)
  if (!match(line, /[<"][^>"]+[>"]/)) next
  inc = substr(line, RSTART + 1, RLENGTH - 2)
  split(file, parts, "/"); layer = parts[1]
  binary = (file ~ /(_main|_test|_bench|_fuzzer)\.cc$/ || file ~ /\/(testing|fuzz|examples|bench)\// ||
            layer == "apps" || layer == "python" || layer == "tools" || layer == "tests")
  if (file == "client/pace.h" && !(line ~ /"common\// || line ~ /<[a-z_]+>/))
    violation(file " includes " inc ": public client headers include only std and common/")
  slash = index(inc, "/"); top = slash ? substr(inc, 1, slash - 1) : inc
  # tools/cli/ (--help, --version) is a binaries-only library every binary may use.
  if (binary && inc ~ /^tools\/cli\//) next
  if (slash && (top in islayer)) {
    rules = (file in allowed) ? allowed[file] : allowed[layer]
    if (top != layer && !has(rules, top))
      violation(file " includes \"" inc "\": " layer "/ may not depend on " top "/")
    next
  }
  if (top == "gflags") {
    if (!binary) violation(file " includes <" inc ">: gflags only in binaries (*_main.cc, apps/, tools/, tests/)")
    next
  }
  if (top == "glog") {
    if ((layer in libs) && file ~ /\.h$/ && !binary) violation(file " includes <" inc ">: glog only in .cc files of library layers")
    next
  }
  lib = (top in known) ? top : ((inc ~ /\.h$/ && (substr(inc, 1, length(inc) - 2) in known)) ? substr(inc, 1, length(inc) - 2) : "")
  if (lib != "" && !has(third[layer], lib) && !(binary && (lib == "gtest" || lib == "gmock" || lib == "benchmark")))
    violation(file " includes <" inc ">: " layer "/ may not use " lib)
}
END { if (!bad) print "layering: ok"; exit bad }'
