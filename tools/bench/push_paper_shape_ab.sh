#!/usr/bin/env bash
# Interleaved runs of push_paper_shape.sh (BENCHMARKS.md, "ESSP staleness"): N rounds,
# each running every NAME=BIN/DIR in turn on the same ports and work dir, one summary per run
# prefixed with the set, round, name and the load average before it. MF_FLAGS/PACED_FLAGS pass
# through.
#   bash tools/bench/push_paper_shape_ab.sh N essp|ssp SET PORTBASE WORKDIR NAME=BIN ...
# e.g. ... 3 essp G 27310 /tmp/pps main=/work/main/build/bin new=build/bin
set -u
n=$1; cons=$2; set_name=$3; pb=$4; root=$5; shift 5
here=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 1 "$n"); do
  for side in "$@"; do
    name=${side%%=*}; bin=${side#*=}
    load=$(cut -d' ' -f1 /proc/loadavg)
    out=$(bash "$here/push_paper_shape.sh" "$bin" "${set_name}_${name}_$i" "$cons" "$pb" "$root")
    echo "$set_name $i $name (load before $load): $out"
  done
done
