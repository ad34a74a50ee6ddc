#!/usr/bin/env bash
# tools/bench/out_of_core.sh [BUILD_DIR] — benchmark 8d: pace_mf larger than memory. The 8a
# job (600k users x 20k items, 700k ratings, rank 128, 3 clocks of 40%; factor tables ~220 MB)
# with --memory_mb=64, the process inside a memory cgroup of 192 MB that also holds its page
# cache (so rows come from the disk), against pace_mf --baseline_mmap (the same plain SGD with
# the factor tables in a file-backed mmap, MADV_RANDOM: the OS's demand paging) in a cgroup of
# the same size. Target: >= 2.0. Each run gets a fresh cgroup, a child of this shell's memory
# cgroup (cgroup v1: memory.limit_in_bytes; v2: memory.max under /sys/fs/cgroup), and the
# script first checks that a process in such a cgroup is held to the limit (a probe writes
# more page cache than the limit; its peak, memory.max_usage_in_bytes or memory.peak, must stay
# within it). Needs root and a writable memory cgroup; otherwise prints "SKIPPED: <reason>" and
# exits 0. BENCH_REPS runs of each (default 3), interleaved; the medians count.
# Settings: BENCH_CGROUP_MB (192), BENCH_OOC_MEMORY_MB (64); sizes for smoke runs as mf_scale.sh
# (BENCH_MS_*); BENCH_SKEW, BENCH_TIMEOUT_S: see model_scale.sh. Exits 1 if a comparison did
# not run.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d)
. "$(dirname "$0")/lib.sh"
reps=${BENCH_REPS:-3}
limit=${BENCH_TIMEOUT_S:-3600}
cg_mb=${BENCH_CGROUP_MB:-192}
mem_mb=${BENCH_OOC_MEMORY_MB:-64}
bench_8a_sizes
shape=""
[ "$users/$items/$ratings/$rank/$cg_mb/$mem_mb" != 600000/20000/700000/128/192/64 ] &&
  shape=" [$users users x $items items, $ratings ratings, rank $rank; cgroup $cg_mb MB, --memory_mb=$mem_mb]"

# --- memory cgroups ----------------------------------------------------------------------
cg_version="" cg_parent="" cg_made=()
cleanup() {
  local d
  for d in "${cg_made[@]}"; do rmdir "$d" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Sets cg_version and cg_parent (where this script's cgroups go), or sets cg_why to the reason
# none can be made and returns 1.
cg_find() {
  if [ "$(id -u)" != 0 ]; then cg_why="not root (memory cgroups need root)"; return 1; fi
  local fs own
  fs=$(stat -fc %T /sys/fs/cgroup 2> /dev/null || echo none)
  if [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    # cgroup v1 (or hybrid with the memory controller on v1): under this shell's cgroup.
    cg_version=1
    own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
    cg_parent=/sys/fs/cgroup/memory${own%/}
  elif [ "$fs" = cgroup2fs ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers 2> /dev/null; then
    # cgroup v2: the root is exempt from the no-internal-processes rule, so the cgroups go
    # right under it, with the memory controller enabled for its children.
    cg_version=2
    cg_parent=/sys/fs/cgroup
    grep -qw memory "$cg_parent/cgroup.subtree_control" ||
      echo +memory > "$cg_parent/cgroup.subtree_control" 2> /dev/null ||
      { cg_why="cannot enable the memory controller in $cg_parent/cgroup.subtree_control"; return 1; }
  else
    cg_why="no memory cgroup controller under /sys/fs/cgroup ($fs)"
    return 1
  fi
  [ -w "$cg_parent" ] || { cg_why="$cg_parent is not writable"; return 1; }
}

# cg_make NAME: a new cgroup of cg_mb MB (memory and page cache; no swap) at cg_dir.
cg_make() {
  local d=$cg_parent/pace-bench-$$-$1 bytes=$((cg_mb << 20))
  cg_dir=$d
  mkdir "$d" || return 1
  cg_made+=("$d")
  if [ "$cg_version" = 1 ]; then
    echo "$bytes" > "$d/memory.limit_in_bytes" || return 1
    [ -f "$d/memory.memsw.limit_in_bytes" ] && { echo "$bytes" > "$d/memory.memsw.limit_in_bytes" || true; }
  else
    echo "$bytes" > "$d/memory.max" || return 1
    [ -f "$d/memory.swap.max" ] && { echo 0 > "$d/memory.swap.max" || true; }
  fi
}

cg_peak_mb() {  # cg_peak_mb DIR: the cgroup's peak charge (memory and page cache), MB
  local f=$1/memory.max_usage_in_bytes
  [ "$cg_version" = 2 ] && f=$1/memory.peak
  if [ -r "$f" ]; then awk '{ printf "%.0f", $1 / 1048576 }' "$f"; else echo 0; fi
}

cg_drop() { rmdir "$1" 2> /dev/null || true; }

echo "=== 8d: MF out of core: --memory_mb=$mem_mb in a $cg_mb MB memory cgroup vs --baseline_mmap in the same ==="
bench_load
cg_why=""
if ! cg_find; then
  echo "SKIPPED: $cg_why"
  bench_load after
  exit 0
fi
# The probe: a process in such a cgroup writes more page cache than the limit.
cg_make probe || { echo "SKIPPED: cannot create a memory cgroup under $cg_parent"; exit 0; }
probe=$cg_dir
sh -c 'echo $$ > "$0/cgroup.procs" && exec dd if=/dev/zero of="$1" bs=1M count="$2" status=none' \
  "$probe" "$work/probe.bin" $((cg_mb + 64)) || true
probe_peak=$(cg_peak_mb "$probe")
cg_drop "$probe"
rm -f "$work/probe.bin"
echo "# cgroup v$cg_version under $cg_parent, limit $cg_mb MB: a probe writing $((cg_mb + 64)) MB of page cache peaked at $probe_peak MB"
if [ "$probe_peak" -le 0 ] || [ "$probe_peak" -gt "$cg_mb" ]; then
  echo "SKIPPED: the cgroup does not hold a process to $cg_mb MB (probe peak $probe_peak MB)"
  bench_load after
  exit 0
fi

for skew in ${BENCH_SKEW:-0}; do
  suffix="$(bench_skew_suffix "$skew")$shape"
  bench_8a_job "$skew"
  b=() s=() pb=() ps=() why_b="" why_s=""
  for ((i = 0; i < reps; i++)); do
    rm -rf "$work"/pd*
    cg_make "b$i"
    cg=$cg_dir
    in_cg=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
    read -r v r st < <(bench_run "b$i" ratings "$limit" "${in_cg[@]}" "${ms[@]}" --baseline_mmap \
      --data_dir="$work/pdb$i")
    b+=("$v"); pb+=("$(cg_peak_mb "$cg")"); [ "$st" = ok ] || why_b="baseline: $(bench_why "$st" "$limit")"
    cg_drop "$cg"
    rm -rf "$work"/pd*
    cg_make "s$i"
    cg=$cg_dir
    in_cg=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg")
    read -r v r st < <(bench_run "s$i" ratings "$limit" "${in_cg[@]}" "${ms[@]}" --memory_mb="$mem_mb" \
      --data_dir="$work/pds$i")
    s+=("$v"); ps+=("$(cg_peak_mb "$cg")"); [ "$st" = ok ] || why_s="pace_mf: $(bench_why "$st" "$limit")"
    cg_drop "$cg"
  done
  echo "  skew $skew: ratings/s, $reps runs each: --baseline_mmap ${b[*]}; pace_mf --memory_mb=$mem_mb ${s[*]}"
  echo "  cgroup peak (MB, limit $cg_mb): --baseline_mmap ${pb[*]}; pace_mf ${ps[*]}"
  bench_ratio "8d MF out of core (--memory_mb=$mem_mb, $cg_mb MB cgroup) vs --baseline_mmap in the same cgroup$suffix" \
    "$(bench_median "${s[@]}")" "$(bench_median "${b[@]}")" 2.0 "${why_s:-${why_b:-no rate}}"
done
bench_load after
exit $bench_failed
