#!/usr/bin/env bash
# Push latency in the paper's shape (BENCHMARKS.md, "Push latency in the paper's shape"):
# 2 paced shards, 2 pace_mf processes x 1 worker, 10k users x 4k items, 1M ratings, rank 16,
# --staleness=8, 30 clocks. Not in `make bench` (report only; minutes at high load).
#   bash tools/bench/push_paper_shape.sh BUILD/bin TAG essp|ssp PORTBASE [WORKDIR]
# Prints one summary line: staleness_mean (last clock, mean over clocks), each process's mean
# read staleness (--staleness_hist), paced CPU (10 ms ticks), the shards' push latency
# p50/p99 and, from the --v=1 lines of both sides (steady clock = CLOCK_MONOTONIC, shared by
# the processes of a host), the time from a clock's last Apply at the shard to its PushDone
# being visible at each client (p50, p99), the last clock's train RMSE (and test RMSE with
# MF_FLAGS="--test_fraction=0.1 --eval_every=30") and the load average. A second line (from
# pace_mf's --v=1 per-clock lines) says where each worker's wall time went: median CPU per
# clock, and the shares of the clocks' wall time on a CPU / runnable (waiting for one) /
# blocked; the share of the training ratings that used item values refreshed after a push
# (pushed share; the refresh happens at most once per push, at a look-ahead chunk boundary); and
# the most clocks one process ran ahead of the other (at a clock's end).
set -u
bin=$1; tag=$2; cons=$3; pb=$4; root=${5:-/tmp/pace-push-shape}
w=$root/$tag; rm -rf "$w"; mkdir -p "$w"
data=$root/r1m.txt
[ -f "$data" ] || "$bin/pace_gen" ratings --users=10000 --items=4000 --rank=8 --ratings=1000000 \
  --noise=0.5 --seed=3 --out="$data" > /dev/null
pids=""
for s in 0 1; do
  "$bin/paced" --data_dir="$w/s$s" --listen=127.0.0.1:$((pb + s)) --shard=$s --num_shards=2 \
    --num_clients=2 --insecure --v=1 ${PACED_FLAGS:-} > "$w/paced$s.log" 2>&1 &
  pids="$pids $!"
done
mfp=""
for c in 0 1; do
  "$bin/pace_mf" --train="$data" --rank=16 --staleness=8 --consistency="$cons" --clocks=30 \
    --workers=1 --servers=127.0.0.1:$pb,127.0.0.1:$((pb + 1)) --client_id=$c --num_clients=2 \
    --csv="$w/mf$c.csv" --staleness_hist="$w/hist$c.txt" --v=1 --minloglevel=0 ${MF_FLAGS:-} \
    > "$w/mf$c.log" 2>&1 &
  mfp="$mfp $!"
done
wait $mfp
cpu=""
for p in $pids; do cpu="$cpu$(awk '{print $14 + $15}' /proc/$p/stat)/"; done
kill -TERM $pids; wait $pids 2> /dev/null
python3 - "$w" "$cons" "$cpu" <<'PY'
import glob, math, re, sys
w, cons, cpu = sys.argv[1:4]
def q(v, p):
    v = sorted(v)
    return v[max(0, min(len(v), math.ceil(p * len(v))) - 1)] if v else float('nan')
rows = [l.split(',') for l in open(w + '/mf0.csv').read().split('\n')[1:] if l]
last, mean = float(rows[-1][4]), sum(float(r[4]) for r in rows) / len(rows)
rmse = 'train rmse %.4f' % math.sqrt(float(rows[-1][2]))
if rows[-1][3]: rmse += ' test rmse %.4f' % float(rows[-1][3])
hist = []
for c in (0, 1):
    n = s = 0
    for l in open('%s/hist%d.txt' % (w, c)).read().split('\n')[1:]:
        if l:
            _, k, cnt = l.split(',')
            n += int(cnt); s += int(k) * int(cnt)
    hist.append(s / max(1, n))
recv, lat, shard = {}, [], []
for f in sorted(glob.glob(w + '/paced*.log')):
    for line in open(f):
        m = re.search(r'shard (\d+): clock (\d+) pushed; last Apply received at (\d+) us', line)
        if m: recv[(m[1], m[2])] = int(m[3])
        m = re.search(r'push latency .*: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms', line)
        if m: shard.append('%s/%s' % (m[1], m[2]))
for f in glob.glob(w + '/mf*.log'):
    for line in open(f):
        m = re.search(r'PushDone (\d+) from shard (\d+) visible at (\d+) us', line)
        if m and (m[2], m[1]) in recv: lat.append((int(m[3]) - recv[(m[2], m[1])]) / 1000.0)
ends, trace = {}, []
for c in (0, 1):
    rs, fresh, total = [], 0, 0
    for line in open('%s/mf%d.log' % (w, c)):
        m = re.search(r'clock (\d+) wall (\S+) ms, on cpu (\S+) ms, runnable (\S+) ms, '
                      r'blocked (\S+) ms, ended at (\d+) us', line)
        if m: rs.append((float(m[2]), float(m[3]), float(m[4]), float(m[5]), int(m[6])))
        m = re.search(r'items refreshed after (\d+) of (\d+) ratings', line)
        if m:
            total += int(m[2])
            fresh += int(m[2]) - int(m[1]) if int(m[1]) > 0 else 0
    ends[c] = sorted(r[4] for r in rs)
    wall = sum(r[0] for r in rs) or float('nan')
    trace.append('client %d cpu/clock p50 %.1f ms, cpu/runnable/blocked %.0f/%.0f/%.0f%%, '
                 'pushed share %.0f%%' %
                 (c, q([r[1] for r in rs], .5), 100 * sum(r[1] for r in rs) / wall,
                  100 * sum(r[2] for r in rs) / wall, 100 * sum(r[3] for r in rs) / wall,
                  100 * fresh / max(1, total)))
lead = 0
for a, b in ((0, 1), (1, 0)):
    for k, t in enumerate(ends[a]):
        lead = max(lead, k + 1 - sum(1 for u in ends[b] if u <= t))
load = open('/proc/loadavg').read().split()[0]
print('%s: staleness last %.2f mean %.2f; per process %.2f / %.2f; paced cpu %s ticks; shard push '
      'p50/p99 %s ms; arrival p50 %.1f p99 %.1f ms (n %d); %s; load %s' %
      (cons, last, mean, hist[0], hist[1], cpu.rstrip('/'), ' '.join(shard) or '-',
       q(lat, .5), q(lat, .99), len(lat), rmse, load))
if any(ends.values()):
    print('  workers: %s; max lead %d clocks' % ('; '.join(trace), lead))
PY
