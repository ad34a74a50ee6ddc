#!/usr/bin/env python3
"""SGD matrix factorization on PaceDB in NumPy: the model of pace_mf.

    python3 python/examples/mf.py --train=ratings.csv --test=test.csv     # embedded
    python3 python/examples/mf.py --train=F --test_fraction=0.1 --servers=h:7100,h:7101

Same model, tables, flags and per-clock line as pace_mf (docs/apps.md):
rating(u, i) ~ mean + b_u + b_i + U_u . V_i with rows [f_0 .. f_{K-1}, b] in
the dense f32 tables <prefix>.user / <prefix>.item (row = raw id, initialized
uniform in [-init_scale, init_scale) by the table), per-row penalties
lambda / (mean ratings per user or item) on the factors and bias_lambda / n_u
on the biases, step size lr / (clock + 1)^lr_power, training data
partitioned by user over the job's workers (threads x client processes).

The difference: pace_mf updates one rating at a time, this example a batch of
--batch ratings at a time with NumPy (each row's gradients in a batch are
summed; a user or item appears about once per batch), which is what makes
Python fast enough. Each worker thread reads the rows of its clock with one
get_many per table (into preallocated arrays), trains on the local copy and
sends the changes with one inc_many per table; the GIL is released while
PaceDB waits or copies, so the threads overlap.

Reads the formats pace_mf reads: csv (MovieLens ratings.csv, optional
header), tsv (u.data), dat (ratings.dat, '::'), plain ('user item rating');
the timestamp is optional; blank lines and '#' lines are skipped.
Exit code 0 on success, 1 on a usage or input error, 2 if training failed.
"""
import argparse
import heapq
import math
import sys
import threading
import time

import numpy as np

import pacedb

COLUMNS = [("clock", "int"), ("seconds", "sec"), ("train_loss", "num"), ("test_rmse", "num"),
           ("staleness_mean", "num"), ("staleness_p99", "int"), ("blocked_pct", "num")]

# The stats row of a clock (f64, summed over all workers of all processes).
TRAIN_SQ, TRAIN_N, TEST_SQ, TEST_N, WALL, BLOCKED, READS, STALE_SUM, HIST = range(9)
HIST_BUCKETS = 66
STATS_WIDTH = HIST + HIST_BUCKETS


class UsageError(Exception):
    pass


# --- input ---------------------------------------------------------------------------------

def detect_format(line):
    if "::" in line:
        return "dat"
    if "," in line:
        return "csv"
    if "\t" in line:
        return "tsv"
    return "plain"


def split_fields(line, fmt):
    if fmt == "csv":
        return [f.strip() for f in line.split(",")]
    if fmt == "tsv":
        return [f.strip() for f in line.split("\t")]
    if fmt == "dat":
        return [f.strip() for f in line.split("::")]
    return line.split()


def read_ratings(path, fmt, skip_bad_lines):
    """(users u64, items u64, values f32, format used) of a ratings file."""
    users, items, values = [], [], []
    skipped, first_bad = 0, ""
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read '{path}': {e.strerror}")
    first = True
    with f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if first:
                first = False
                if fmt == "auto":
                    fmt = detect_format(line)
                if fmt == "csv" and not split_fields(line, fmt)[0].isdigit():
                    continue  # MovieLens ratings.csv header
            fields = split_fields(line, fmt)
            why = None
            if not 3 <= len(fields) <= 4:
                why = f"expected 3 or 4 fields ({fmt}), got {len(fields)}"
            elif not (fields[0].isdigit() and fields[1].isdigit()):
                why = "bad user or item id (expected unsigned integers)"
            else:
                try:
                    v = float(fields[2])
                    if not math.isfinite(v):
                        raise ValueError
                except ValueError:
                    why = f"bad rating '{fields[2][:32]}' (expected a finite number)"
            if why:
                if not skip_bad_lines:
                    raise UsageError(f"{path}:{lineno}: {why}")
                skipped += 1
                first_bad = first_bad or f"{path}:{lineno}: {why}"
                continue
            users.append(int(fields[0]))
            items.append(int(fields[1]))
            values.append(v)
    if not users:
        raise UsageError(f"'{path}' holds no ratings")
    if skipped:
        print(f"# {path}: {skipped} bad lines skipped (first: {first_bad})")
    return (np.array(users, np.uint64), np.array(items, np.uint64),
            np.array(values, np.float32), fmt)


class IdMap:
    """Raw ids -> dense indices 0..n-1 in order of first appearance (as pace_mf)."""

    def __init__(self, raw):
        uniq, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        self.raw = uniq[order]            # dense index -> raw id
        self.index = rank[inverse]        # dense index of every input entry
        self._sorted, self._rank = uniq, rank

    def __len__(self):
        return len(self.raw)

    def find(self, raw):
        """Dense indices of raw ids; -1 for ids not in the map."""
        pos = np.clip(np.searchsorted(self._sorted, raw), 0, len(self._sorted) - 1)
        return np.where(self._sorted[pos] == raw, self._rank[pos], -1)


class Dataset:
    def __init__(self, train, test, test_fraction, seed):
        tu, ti, tv = train[:3]
        rng = np.random.default_rng(seed)
        if test is None and test_fraction > 0:
            held = rng.random(len(tv)) < test_fraction
            test = (tu[held], ti[held], tv[held])
            tu, ti, tv = tu[~held], ti[~held], tv[~held]
        if len(tv) == 0:
            raise UsageError("no training ratings")
        self.users, self.items = IdMap(tu), IdMap(ti)
        order = rng.permutation(len(tv))  # SGD visits the ratings in this order
        self.u = self.users.index[order].astype(np.int64)
        self.i = self.items.index[order].astype(np.int64)
        self.r = tv[order]
        self.mean = float(np.mean(self.r, dtype=np.float64))
        self.lo, self.hi = float(self.r.min()), float(self.r.max())
        if test is None:
            test = (np.zeros(0, np.uint64),) * 2 + (np.zeros(0, np.float32),)
        self.test_u = self.users.find(test[0])
        self.test_i = self.items.find(test[1])
        self.test_r = test[2]
        self.test_unknown = int(np.sum((self.test_u < 0) | (self.test_i < 0)))

    def partition_by_user(self, parts):
        """Reorders the ratings so each part holds whole users (pace_mf's greedy balance)."""
        if parts <= 1:
            return [0, len(self.r)]
        count = np.bincount(self.u, minlength=len(self.users))
        part_of = np.zeros(len(count), np.int64)
        heap = [(0, p) for p in range(parts)]
        for user in np.argsort(-count, kind="stable"):
            load, p = heapq.heappop(heap)
            part_of[user] = p
            heapq.heappush(heap, (load + int(count[user]), p))
        order = np.argsort(part_of[self.u], kind="stable")
        self.u, self.i, self.r = self.u[order], self.i[order], self.r[order]
        sizes = np.bincount(part_of[self.u], minlength=parts)
        return [0] + list(np.cumsum(sizes))


def bias_baseline_rmse(d, reg=5.0, rounds=4):
    if len(d.test_r) == 0:
        return None
    bu, bi = np.zeros(len(d.users)), np.zeros(len(d.items))
    nu = np.bincount(d.u, minlength=len(bu))
    ni = np.bincount(d.i, minlength=len(bi))
    for _ in range(rounds):
        bi = np.bincount(d.i, d.r - d.mean - bu[d.u], len(bi)) / (ni + reg)
        bu = np.bincount(d.u, d.r - d.mean - bi[d.i], len(bu)) / (nu + reg)
    p = d.mean + np.where(d.test_u >= 0, bu[d.test_u], 0) + np.where(d.test_i >= 0, bi[d.test_i], 0)
    return float(np.sqrt(np.mean((d.test_r - np.clip(p, d.lo, d.hi)) ** 2)))


# --- report --------------------------------------------------------------------------------

class Report:
    """The per-clock line of pace_mf on stdout, and the same as CSV with --csv."""

    def __init__(self, csv_path):
        self.csv = open(csv_path, "w") if csv_path else None
        if self.csv:
            self.csv.write(",".join(name for name, _ in COLUMNS) + "\n")

    @staticmethod
    def fmt(kind, v):
        if v is None:
            return ""
        if kind == "int":
            return str(int(round(v)))
        if kind == "sec":
            return f"{v:.3f}"
        return f"{v:.6g}"

    def header(self):
        print("".join(f"{n:>6}" if k == 0 else f" {n:>14}" for k, (n, _) in enumerate(COLUMNS)))
        sys.stdout.flush()

    def line(self, values):
        cells = [self.fmt(kind, v) for (_, kind), v in zip(COLUMNS, values)]
        print("".join(f"{c or '-':>6}" if k == 0 else f" {c or '-':>14}"
                      for k, c in enumerate(cells)))
        sys.stdout.flush()
        if self.csv:
            self.csv.write(",".join(cells) + "\n")
            self.csv.flush()

    def close(self):
        if self.csv:
            self.csv.close()


def summarize(row):
    """(staleness mean, p99, blocked %) of a stats row."""
    hist = row[HIST:HIST + HIST_BUCKETS]
    total = hist.sum()
    mean = row[STALE_SUM] / row[READS] if row[READS] > 0 else 0.0
    p99 = int(np.searchsorted(np.cumsum(hist), 0.99 * total - 1e-9)) if total > 0 else 0
    blocked = min(100.0, 100.0 * row[BLOCKED] / row[WALL]) if row[WALL] > 0 else 0.0
    return mean, p99, blocked


class ProcessMeasure:
    """Per clock, this process's read staleness and blocked time of the model tables.

    The last of the process's workers to end clock c adds the change of the
    client's stats since the previous clock into its stats row of clock c.
    """

    def __init__(self, client, tables, workers):
        self.client, self.tables, self.workers = client, tables, workers
        self.lock = threading.Lock()
        self.ended = {}
        self.prev = self._snapshot()

    def _snapshot(self):
        s = self.client.stats()
        hist = np.zeros(HIST_BUCKETS)
        stale_sum = reads = 0.0
        for name in self.tables:
            t = s["tables"].get(name)
            if not t:
                continue
            h = np.array(t["staleness_hist"], np.float64)[:HIST_BUCKETS]
            hist[:len(h)] += h
            reads += h.sum()
            stale_sum += t["staleness_mean"] * h.sum()
        return hist, round(stale_sum), reads, s["get_blocked_seconds"] + s["clock_blocked_seconds"]

    def end_clock(self, clock, cols):
        with self.lock:
            self.ended[clock] = self.ended.get(clock, 0) + 1
            if self.ended[clock] < self.workers:
                return
            del self.ended[clock]
            now = self._snapshot()
            cols[HIST:HIST + HIST_BUCKETS] += np.maximum(now[0] - self.prev[0], 0)
            cols[STALE_SUM] += max(0.0, now[1] - self.prev[1])
            cols[READS] += max(0.0, now[2] - self.prev[2])
            cols[BLOCKED] += max(0.0, now[3] - self.prev[3])
            self.prev = now


# --- training ------------------------------------------------------------------------------

class Trainer:
    def __init__(self, client, data, args):
        self.client, self.d, self.a = client, data, args
        self.k = args.rank
        self.width = args.rank + (1 if args.biases else 0)
        cons, s = args.consistency, args.staleness
        if cons == "bsp":
            s = 0
        init = ("uniform", -args.init_scale, args.init_scale, args.seed)
        self.ut = client.create_table(f"{args.table_prefix}.user", self.width, np.float32,
                                      consistency=cons, staleness=s, init=init)
        self.it = client.create_table(f"{args.table_prefix}.item", self.width, np.float32,
                                      consistency=cons, staleness=s, init=init)
        stats_cons, stats_s = (("bsp", 0) if cons == "async" else (cons, s))
        self.st = client.create_table(f"{args.table_prefix}.stats", STATS_WIDTH, np.float64,
                                      consistency=stats_cons, staleness=stats_s)
        self.stats_lag = stats_s  # a stats row is complete once the reader is this far past it
        self.parts = data.partition_by_user(client.num_clients * args.workers)
        n = len(data.r)
        self.wu = 1.0 / np.maximum(np.bincount(data.u, minlength=len(data.users)), 1)
        self.wv = 1.0 / np.maximum(np.bincount(data.i, minlength=len(data.items)), 1)
        self.lambda_u = args.reg_lambda / (n / max(len(data.users), 1))
        self.lambda_v = args.reg_lambda / (n / max(len(data.items), 1))
        self.measure = ProcessMeasure(client, [self.ut.name, self.it.name], args.workers)
        self.start_clock = client.start_clock
        self.errors = []
        self.final_rmse = None
        self.ratings = 0
        self.lock = threading.Lock()

    def predict(self, U, V):
        p = np.einsum("ij,ij->i", U[:, :self.k], V[:, :self.k])
        if self.a.biases:
            p += self.d.mean + U[:, self.k] + V[:, self.k]
        return p

    def sgd(self, U, V, uu, ii, users, items, r, lr):
        """One batch of SGD steps on local rows U[uu], V[ii]; returns the squared errors' sum.

        Every rating's step is computed from the rows before the batch; a row's
        steps in the batch add up (np.bincount, much faster than np.add.at).
        """
        k, Ub, Vb = self.k, U[uu], V[ii]
        e = (r - self.predict(Ub, Vb)).astype(np.float32)
        gu = np.empty_like(Ub)
        gv = np.empty_like(Vb)
        gu[:, :k] = lr * (e[:, None] * Vb[:, :k] - self.lambda_u * Ub[:, :k])
        gv[:, :k] = lr * (e[:, None] * Ub[:, :k] - self.lambda_v * Vb[:, :k])
        if self.a.biases:
            bl = self.a.bias_lambda
            gu[:, k] = lr * (e - bl * self.wu[users] * Ub[:, k])
            gv[:, k] = lr * (e - bl * self.wv[items] * Vb[:, k])
        cols = np.arange(self.width)
        U += np.bincount((uu[:, None] * self.width + cols).ravel(), gu.ravel(),
                         U.size).reshape(U.shape).astype(np.float32)
        V += np.bincount((ii[:, None] * self.width + cols).ravel(), gv.ravel(),
                         V.size).reshape(V.shape).astype(np.float32)
        return float(np.dot(e, e))

    def worker_loop(self, w, on_report):
        a, d = self.a, self.d
        worker = self.client.worker()
        parts = self.client.num_clients * a.workers
        part_id = self.client.client_id * a.workers + w
        begin, end = self.parts[part_id], self.parts[part_id + 1]
        size = end - begin
        tb, te = len(d.test_r) * part_id // parts, len(d.test_r) * (part_id + 1) // parts
        reporter = self.client.client_id == 0 and w == 0
        uslot = np.full(len(d.users), -1, np.int64)
        islot = np.full(len(d.items), -1, np.int64)
        clock_end = {}
        next_report = self.start_clock
        t0 = time.monotonic()

        def report_upto(last):
            nonlocal next_report
            while next_report <= last:
                c = next_report
                row = worker.get(self.st, c)
                mean, p99, blocked = summarize(row)
                rmse = math.sqrt(row[TEST_SQ] / row[TEST_N]) if row[TEST_N] > 0 else None
                if c == a.clocks - 1:
                    self.final_rmse = rmse
                on_report([c, clock_end.get(c, 0.0), row[TRAIN_SQ] / max(row[TRAIN_N], 1.0),
                           rmse, mean, p99, blocked])
                next_report += 1

        for c in range(worker.current_clock, a.clocks):
            clock_start = time.monotonic()
            lr = a.lr / (c + 1) ** a.lr_power
            count = max(1, min(size, round(a.minibatch * size))) if size else 0
            idx = begin + (c * count + np.arange(count)) % size if size else np.zeros(0, np.int64)
            users, items, r = d.u[idx], d.i[idx], d.r[idx]
            evaluate = (c + 1) % a.eval_every == 0 or c + 1 == a.clocks
            tu, ti, tr = d.test_u[tb:te], d.test_i[tb:te], d.test_r[tb:te]
            need_u = np.unique(np.concatenate([users, tu[tu >= 0]]) if evaluate else users)
            need_i = np.unique(np.concatenate([items, ti[ti >= 0]]) if evaluate else items)
            uslot[need_u] = np.arange(len(need_u))
            islot[need_i] = np.arange(len(need_i))
            urows, irows = d.users.raw[need_u], d.items.raw[need_i]
            # One batched read per table, written straight into the local buffers.
            U = np.empty((len(need_u) + 1, self.width), np.float32)
            V = np.empty((len(need_i) + 1, self.width), np.float32)
            worker.get_many(self.ut, urows, out=U[:-1])
            worker.get_many(self.it, irows, out=V[:-1])
            U[-1] = V[-1] = 0  # the zero row of unknown test users/items
            U0, V0 = U.copy(), V.copy()
            train_sq = 0.0
            uu, ii = uslot[users], islot[items]
            for s in range(0, count, a.batch):
                b = slice(s, s + a.batch)
                train_sq += self.sgd(U, V, uu[b], ii[b], users[b], items[b], r[b], lr)
            # One batched update per table: the clock's changes of the rows.
            du, dv = U[:-1] - U0[:-1], V[:-1] - V0[:-1]
            cu, cv = np.any(du != 0, axis=1), np.any(dv != 0, axis=1)
            worker.inc_many(self.ut, urows[cu], du[cu])
            worker.inc_many(self.it, irows[cv], dv[cv])
            cols = np.zeros(STATS_WIDTH)
            if evaluate and te > tb:
                tus = np.where(tu >= 0, uslot[np.maximum(tu, 0)], len(need_u))
                tis = np.where(ti >= 0, islot[np.maximum(ti, 0)], len(need_i))
                p = np.clip(self.predict(U[tus], V[tis]), d.lo, d.hi)
                cols[TEST_SQ] = float(np.sum((tr - p) ** 2, dtype=np.float64))
                cols[TEST_N] = te - tb
            uslot[need_u] = -1
            islot[need_i] = -1
            cols[TRAIN_SQ], cols[TRAIN_N] = train_sq, count
            cols[WALL] = time.monotonic() - clock_start
            self.measure.end_clock(c, cols)
            worker.inc(self.st, c, cols)
            worker.clock()
            if c == self.start_clock and c + 1 < a.clocks:
                worker.global_barrier()  # every worker of every process starts clock 1 together
            with self.lock:
                self.ratings += count
            if reporter:
                clock_end[c] = time.monotonic() - t0
                report_upto(worker.current_clock - 1 - self.stats_lag)
        if reporter:
            worker.global_barrier()
            report_upto(a.clocks - 1)

    def train(self, on_report):
        def run(w):
            try:
                self.worker_loop(w, on_report)
            except Exception as e:  # noqa: BLE001 - reported by train()
                self.errors.append(e)

        threads = [threading.Thread(target=run, args=(w,)) for w in range(self.a.workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            raise self.errors[0]
        self.client.flush()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="training ratings file")
    p.add_argument("--test", default="", help="test ratings file (same formats)")
    p.add_argument("--test_fraction", type=float, default=0.0,
                   help="hold out this fraction of --train as the test set")
    p.add_argument("--format", default="auto", choices=["auto", "csv", "tsv", "dat", "plain"])
    p.add_argument("--skip_bad_lines", action="store_true")
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.08)
    p.add_argument("--lr_power", type=float, default=1.0)
    p.add_argument("--lambda", dest="reg_lambda", type=float, default=4.0)
    p.add_argument("--bias_lambda", type=float, default=10.0)
    p.add_argument("--biases", dest="biases", action="store_true", default=True)
    p.add_argument("--nobiases", dest="biases", action="store_false")
    p.add_argument("--init_scale", type=float, default=0.01)
    p.add_argument("--minibatch", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=1000,
                   help="ratings per NumPy SGD step (Python only; pace_mf steps one at a time)")
    p.add_argument("--table_prefix", default="mf")
    p.add_argument("--consistency", default="essp", choices=["bsp", "ssp", "essp", "async"])
    p.add_argument("--staleness", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--clocks", type=int, default=60)
    p.add_argument("--eval_every", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--data_dir", default="./pace-data")
    p.add_argument("--servers", default="")
    p.add_argument("--client_id", type=int, default=None)
    p.add_argument("--num_clients", type=int, default=None)
    p.add_argument("--token_file", default=None)
    p.add_argument("--cache_mb", type=int, default=None, help="client cache budget (memory_mb)")
    p.add_argument("--csv", default="")
    a = p.parse_args(argv)
    checks = [(a.rank >= 1, "--rank must be >= 1"), (a.lr > 0, "--lr must be > 0"),
              (a.workers >= 1, "--workers must be >= 1"), (a.clocks >= 1, "--clocks must be >= 1"),
              (0 < a.minibatch <= 1, "--minibatch must be in (0, 1]"),
              (a.batch >= 1, "--batch must be >= 1"), (a.eval_every >= 1, "--eval_every >= 1"),
              (0 <= a.test_fraction < 1, "--test_fraction must be in [0, 1)"),
              (not (a.test and a.test_fraction > 0), "give either --test or --test_fraction")]
    for ok, msg in checks:
        if not ok:
            raise UsageError(msg)
    return a


def main(argv):
    try:
        a = parse_args(argv)
        train = read_ratings(a.train, a.format, a.skip_bad_lines)
        print(f"# train {a.train}: {len(train[2])} ratings ({train[3]} format)")
        test = read_ratings(a.test, a.format, a.skip_bad_lines)[:3] if a.test else None
        d = Dataset(train, test, a.test_fraction, a.seed)
        print(f"# {len(d.r)} train / {len(d.test_r)} test ratings, {len(d.users)} users, "
              f"{len(d.items)} items, mean {d.mean:.4f}, range [{d.lo:g}, {d.hi:g}]")
        bias = bias_baseline_rmse(d)
        if bias is not None:
            print(f"# bias baseline (mean + user + item biases): test RMSE {bias:.4f}")
        client = pacedb.Client(servers=a.servers or None, data_dir=a.data_dir,
                               client_id=a.client_id, num_clients=a.num_clients,
                               token_file=a.token_file, memory_mb=a.cache_mb)
        if client.start_clock > 0 and not a.resume:
            raise UsageError(f"the {'data dir' if client.embedded else 'servers'} already hold "
                             f"a job at clock {client.start_clock}: pass --resume to continue "
                             "it, or start fresh with another --data_dir")
        trainer = Trainer(client, d, a)
    except (UsageError, pacedb.Error) as e:
        print(f"mf.py: {e}", file=sys.stderr)
        return 1
    where = f"embedded in {a.data_dir}" if client.embedded else "servers"
    print(f"# {where}, client {client.client_id} of {client.num_clients}, {a.workers} workers, "
          f"{a.consistency} s={a.staleness}, rank {a.rank}, lr {a.lr:g}/(t+1)^{a.lr_power:g}, "
          f"lambda {a.reg_lambda:g}, bias_lambda {a.bias_lambda:g}, batch {a.batch}")
    report = Report(a.csv)
    if client.client_id == 0:
        report.header()
    start = time.monotonic()
    try:
        trainer.train(report.line)
    except pacedb.Error as e:
        print(f"mf.py: training failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    finally:
        report.close()
    secs = time.monotonic() - start
    line = (f"# done: clocks {trainer.start_clock}..{a.clocks - 1}, {trainer.ratings} ratings in "
            f"{secs:.3f} s: {trainer.ratings / max(secs, 1e-9):.0f} ratings/s in this process")
    if trainer.final_rmse is not None and bias is not None:
        line += f"; test RMSE {trainer.final_rmse:.4f} (bias baseline {bias:.4f})"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
