#!/usr/bin/env python3
"""Turns the files run_job (lib.sh) leaves per run into the experiments' numbers.

  traces.py summary RUNS NAME...   one CSV line per run (header first)
  traces.py bound MU VAR S P T     the paper's SSP bound (units of L*F) for these moments

A run NAME in RUNS has NAME.trace.I.csv (each client's --clock_trace),
NAME.hist.I.csv (each client's --staleness_hist) and NAME.shard-K.prom (each
shard's counters at the end). Standard library only; see docs/experiments.md.
"""
import glob
import math
import os
import sys

SUMMARY_COLUMNS = [
    "run", "clocks", "seconds_per_clock", "compute_s", "get_wait_s", "clock_wait_s", "cpu_s",
    "bytes_per_clock", "batches_per_clock", "rows_fetched_per_clock", "pushes_applied_per_clock",
    "shard_messages_per_clock", "staleness_mean", "staleness_var", "in_step_mean", "lead_mean",
    "reads_at_0_2_pct", "bound_rel", "gamma_mean", "gamma_var", "updates", "bound_lf"
]


def read_csv(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
        return [dict(zip(header, line.strip().split(","))) for line in f if line.strip()]


def traces_of(runs, name):
    out = []
    for path in sorted(glob.glob(os.path.join(runs, name + ".trace.*.csv"))):
        rows = [{k: float(v) for k, v in r.items()} for r in read_csv(path)]
        if rows:
            out.append(rows)
    return out


def histogram_moments(runs, name):
    """Mean, variance and share at 0..2 of the read staleness over all clients' histograms."""
    counts = {}
    for path in glob.glob(os.path.join(runs, name + ".hist.*.csv")):
        for r in read_csv(path):
            k = int(r["staleness"])
            counts[k] = counts.get(k, 0) + int(r["count"])
    n = sum(counts.values())
    if n == 0:
        return 0.0, 0.0, 0.0, 0
    mean = sum(k * c for k, c in counts.items()) / n
    var = sum((k - mean) ** 2 * c for k, c in counts.items()) / n
    low = sum(c for k, c in counts.items() if k <= 2) / n
    return mean, var, 100 * low, max(k for k, c in counts.items() if c)


def shard_counter(runs, name, metric):
    total = 0.0
    for path in glob.glob(os.path.join(runs, name + ".shard-*.prom")):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[0] == metric:
                    total += float(parts[1])
    return total


def in_step(traces):
    """Mean staleness after taking away each process's lead over the slowest.

    A read at clock c can see at most the updates of the clocks every process
    has finished, so its staleness is at least the reader's lead c - c_min.
    For each process clock, c_min is the least clock the other processes were
    in when this one ended it (from the common CLOCK_MONOTONIC time base);
    the lead is subtracted from that clock's mean staleness.
    """
    sum_in, sum_lead, reads = 0.0, 0.0, 0.0
    for p, rows in enumerate(traces):
        for i in range(1, len(rows)):
            n = rows[i]["reads"] - rows[i - 1]["reads"]
            if n <= 0:
                continue
            mean = (rows[i]["staleness_sum"] - rows[i - 1]["staleness_sum"]) / n
            c, t = rows[i]["clock"], rows[i]["t_s"]
            c_min = c
            for q, other in enumerate(traces):
                if q == p:
                    continue
                done = [r["clock"] for r in other if r["t_s"] <= t]
                c_min = min(c_min, (max(done) + 1) if done else other[0]["clock"])
            lead = max(0.0, c - c_min)
            sum_in += n * max(0.0, mean - lead)
            sum_lead += n * lead
            reads += n
    return (sum_in / reads, sum_lead / reads) if reads else (0.0, 0.0)


def update_moments(traces):
    """Mean and variance of the paper's staleness gamma_t over the updates.

    Dai et al. serialise the workers' updates (one per worker and clock, P
    workers) and let gamma_t count the updates missing from, or extra in, the
    view an update was computed on, against that serial order. A read of
    staleness k clocks can miss at most k clocks of the updates of every
    worker of the other processes (a worker always sees its own process's
    updates), so an update's gamma is taken as (P - workers of its process)
    times the mean staleness of the reads of that process clock. Extra
    (newer) updates and the other workers' updates of the same clock are not
    counted. Returns (mean, variance, number of updates T).
    """
    total = sum(rows[0]["workers"] for rows in traces)
    vals = []
    for rows in traces:
        w = rows[0]["workers"]
        for i in range(1, len(rows)):
            n = rows[i]["reads"] - rows[i - 1]["reads"]
            if n <= 0:
                continue
            mean = (rows[i]["staleness_sum"] - rows[i - 1]["staleness_sum"]) / n
            vals.append(((total - w) * mean, w))
    weight = sum(w for _, w in vals)
    if weight == 0:
        return 0.0, 0.0, 0
    mean = sum(g * w for g, w in vals) / weight
    var = sum((g - mean) ** 2 * w for g, w in vals) / weight
    return mean, var, int(weight)


def bound(mu, var, s, p, t, delta=0.05):
    """The SSP bound on R[X]/T, the regret per update, in units of L*F.

    Dai et al. (AAAI 2015, arXiv 1410.8043), SGD under SSP on f = sum of T
    convex, L-Lipschitz f_t over a domain of size F, step eta/sqrt(t), P
    workers, staleness bound s, gamma_t of mean mu and variance var: the
    probability that R[X]/T exceeds (eta L^2 + F^2/eta + 2 eta L^2 mu)/sqrt(T)
    by tau is at most exp(-T tau^2 / (2 eta_T var + 2/3 eta L^2 (2s+1) P tau)),
    eta_T = eta^2 L^4 (ln T + 1) / T. Setting that probability to delta and
    solving for tau gives the bound returned. eta = F / L (our choice: it
    balances the first two terms) puts everything in units of L*F.
    """
    log_d = math.log(1 / delta)
    b = log_d * (2.0 / 3.0) * (2 * s + 1) * p
    c = log_d * 2 * (math.log(t) + 1) / t * var
    tau = (b + math.sqrt(b * b + 4 * t * c)) / (2 * t)
    return (2 + 2 * mu) / math.sqrt(t) + tau


def summary(runs, name):
    traces = traces_of(runs, name)
    mean, var, low, max_seen = histogram_moments(runs, name)
    inst, lead = in_step(traces) if traces else (0.0, 0.0)
    row = {"run": name}
    # Per process and clock, over the clocks after the first (its loading and
    # barrier are not training).
    keys = ["seconds_per_clock", "compute_s", "get_wait_s", "clock_wait_s", "cpu_s",
            "bytes_per_clock", "batches_per_clock", "rows_fetched_per_clock",
            "pushes_applied_per_clock"]
    acc = {k: 0.0 for k in keys}
    clocks = 0
    for rows in traces:
        a, z = rows[0], rows[-1]
        n = z["clock"] - a["clock"]
        if n <= 0:
            continue
        clocks = max(clocks, int(n))
        w = a["workers"]
        wall = (z["t_s"] - a["t_s"]) / n
        get = (z["get_blocked_s"] - a["get_blocked_s"]) / n / w
        clk = (z["clock_blocked_s"] - a["clock_blocked_s"]) / n / w
        acc["seconds_per_clock"] += wall
        acc["compute_s"] += max(0.0, wall - get - clk)
        acc["get_wait_s"] += get
        acc["clock_wait_s"] += clk
        acc["cpu_s"] += (z["cpu_s"] - a["cpu_s"]) / n
        acc["bytes_per_clock"] += (z["bytes_sent"] + z["bytes_received"] - a["bytes_sent"] -
                                   a["bytes_received"]) / n
        acc["batches_per_clock"] += (z["batches_sent"] - a["batches_sent"]) / n
        acc["rows_fetched_per_clock"] += (z["rows_fetched"] - a["rows_fetched"]) / n
        acc["pushes_applied_per_clock"] += (z["pushes_applied"] - a["pushes_applied"]) / n
    procs = max(1, len(traces))
    for k in keys:
        row[k] = acc[k] / procs
    row["clocks"] = clocks
    # Messages the shards handled over the whole run (requests in, replies,
    # acks and pushes out), per process clock.
    total_clocks = max(1, max((rows[-1]["clock"] + 1 for rows in traces), default=1))
    reads = shard_counter(runs, name, "pace_shard_reads_total")
    applies = shard_counter(runs, name, "pace_shard_batches_applied_total")
    pushes = shard_counter(runs, name, "pace_shard_pushes_total")
    dones = shard_counter(runs, name, "pace_shard_push_dones_total")
    row["shard_messages_per_clock"] = (2 * (reads + applies) + pushes + dones) / total_clocks / procs
    row["staleness_mean"] = mean
    row["staleness_var"] = var
    row["in_step_mean"] = inst
    row["lead_mean"] = lead
    row["reads_at_0_2_pct"] = low
    # The bound with the run's per-update moments, and relative to a run
    # without staleness (mu = var = 0) and the same s, P and T: what the
    # measured staleness costs in the bound. s is the run's bound (NAME is
    # MODEL-sS); async has none (the theorem does not cover it) and is given
    # the largest staleness seen.
    tail = name.rsplit("-s", 1)
    s = int(tail[1]) if len(tail) == 2 and tail[1].isdigit() and not name.startswith("async") \
        else max_seen
    g_mean, g_var, updates = update_moments(traces) if traces else (0.0, 0.0, 0)
    workers = int(sum(rows[0]["workers"] for rows in traces)) if traces else 1
    t = max(2, updates)
    row["gamma_mean"] = g_mean
    row["gamma_var"] = g_var
    row["updates"] = updates
    row["bound_lf"] = bound(g_mean, g_var, s, workers, t)
    row["bound_rel"] = row["bound_lf"] / bound(0, 0, s, workers, t)
    return row


def fmt(v):
    return v if isinstance(v, str) else ("%d" % v if isinstance(v, int) else "%.6g" % v)


def main(argv):
    if len(argv) >= 3 and argv[0] == "summary":
        print(",".join(SUMMARY_COLUMNS))
        for name in argv[2:]:
            r = summary(argv[1], name)
            print(",".join(fmt(r[c]) for c in SUMMARY_COLUMNS))
        return 0
    if len(argv) == 6 and argv[0] == "bound":
        mu, var, s, p, t = (float(x) for x in argv[1:])
        print("%.6g" % bound(mu, var, s, p, t))
        return 0
    sys.stderr.write(__doc__)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
