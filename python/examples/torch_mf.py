#!/usr/bin/env python3
"""Matrix factorization in PyTorch, twice: embeddings in PaceDB (pacedb.torch)
and plain PyTorch (nn.Embedding(sparse=True) + torch.optim), same model, same
optimizer, same generated data; prints test RMSE and ratings/s of both.

    PYTHONPATH=build/python python3 python/examples/torch_mf.py --epochs=5
    PYTHONPATH=build/python python3 python/examples/torch_mf.py --optimizer=sgd --workers=2
    PYTHONPATH=build/python python3 python/examples/torch_mf.py --processes=2
    PYTHONPATH=build/python python3 python/examples/torch_mf.py \
        --train=data/insteval/train.txt --test=data/insteval/test.txt  # get-datasets.sh
    PYTHONPATH=build/python python3 python/examples/torch_mf.py --data_dir=/tmp/mf --no_plain
    PYTHONPATH=build/python python3 python/examples/torch_mf.py --data_dir=/tmp/mf --resume

Model: rating(u, i) ~ mean + p_u . q_i + b_u + b_i with rows [p_u, b_u] and
[q_i, b_i] of rank + 1 columns (one table per side), squared loss, mini-batches
of --batch ratings. Data: --train/--test files (ids as they are: PaceDB
needs no id map, the plain twin maps them to 0..n-1), or generated: --users x
--items, ratings = a rank --true_rank product plus Gaussian noise (--noise),
--test_fraction held out.

Job: with --data_dir the PaceDB run is a job (the job record of the C++ apps:
app torch_mf.py, table prefix "mf", the model's flags and a fingerprint of
the data): a run killed at any point continues with --resume (same flags and
data; another value of any is refused in one line) from the clock the store
reached, and ends with the rows of an uninterrupted run.

Workers: --workers threads in this process, with an embedded store (default);
or, with --processes=N, N worker processes of --workers threads each, every
one with its own interpreter (threads share one GIL, and this model is many
small torch ops), against a paced on 127.0.0.1 that this process starts on a
free port with a temporary store and stops at the end (also on an error or
Ctrl-C). Each process trains on its users' ratings (every user's ratings in
one process, as pace_mf splits them), shuffled every epoch; this process
reads the tables' initial rows for the plain twin, starts the workers
together and evaluates the trained tables. Ratings/s is the job's: all
ratings trained over the wall time from the start to the last worker's end.
"""
import argparse
import contextlib
import heapq
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import torch

import pacedb
import pacedb.torch as pt


def generate(args):
    """(train, test), each (users, items, ratings) NumPy arrays."""
    rng = np.random.default_rng(args.seed)
    p = rng.normal(0, 1, (args.users, args.true_rank)) / np.sqrt(args.true_rank)
    q = rng.normal(0, 1, (args.items, args.true_rank))
    u = rng.integers(0, args.users, args.ratings)
    i = rng.integers(0, args.items, args.ratings)
    r = 3.0 + (p[u] * q[i]).sum(1) + rng.normal(0, args.noise, args.ratings)
    n_test = int(args.ratings * args.test_fraction)
    return (u[n_test:], i[n_test:], r[n_test:]), (u[:n_test], i[:n_test], r[:n_test])


def read(args):
    """(train, test) of --train/--test (pace_mf's formats; without --test,
    every 1/test_fraction-th rating is held out)."""
    from mf import read_ratings  # python/examples/mf.py

    u, i, r, _ = read_ratings(args.train, "auto", False)
    if args.test:
        tu, ti, tr, _ = read_ratings(args.test, "auto", False)
    else:
        held = np.zeros(len(r), bool)
        if args.test_fraction > 0:
            held[::max(1, round(1 / args.test_fraction))] = True
        (u, tu), (i, ti), (r, tr) = ((a[~held], a[held]) for a in (u, i, r))
    if max(u.max(), i.max(), tu.max(initial=0), ti.max(initial=0)) >= 2**63:
        sys.exit("torch_mf.py: ids must be < 2**63 (torch has no uint64)")
    return (u, i, r), (tu, ti, tr)


def tensors(data):
    u, i, r = data
    return (torch.from_numpy(np.ascontiguousarray(u, np.int64)),
            torch.from_numpy(np.ascontiguousarray(i, np.int64)),
            torch.from_numpy(np.ascontiguousarray(r, np.float32)))


def dense_ids(train, test):
    """The plain twin's view: nn.Embedding needs ids 0..n-1, so raw ids are
    mapped (PaceDB uses them as they are). Returns the raw ids of rows
    0..n-1 of users and items, and train and test with mapped ids."""
    users = np.unique(np.concatenate([train[0].numpy(), test[0].numpy()]))
    items = np.unique(np.concatenate([train[1].numpy(), test[1].numpy()]))

    def remap(data):
        u, i, r = data
        return (torch.from_numpy(np.searchsorted(users, u.numpy())),
                torch.from_numpy(np.searchsorted(items, i.numpy())), r)

    return users, items, remap(train), remap(test)


# The model's arithmetic is TorchScript: one call runs the whole forward in
# C++ (and its intermediates never become Python objects), where eager code
# would run a dozen small torch ops, each of which releases and retakes the
# GIL: with worker threads, a hand-off to the other worker each time.
@torch.jit.script
def predict(mean: float, user_rows: torch.Tensor, item_rows: torch.Tensor) -> torch.Tensor:
    rank = user_rows.shape[1] - 1
    return (mean + (user_rows[:, :rank] * item_rows[:, :rank]).sum(1) + user_rows[:, rank]
            + item_rows[:, rank])


@torch.jit.script
def _loss(mean: float, user_rows: torch.Tensor, item_rows: torch.Tensor, ratings: torch.Tensor,
          l2: float) -> torch.Tensor:
    loss = ((predict(mean, user_rows, item_rows) - ratings) ** 2).mean()
    if l2 != 0.0:
        loss = loss + l2 * (user_rows.pow(2).sum() + item_rows.pow(2).sum()) / ratings.shape[0]
    return loss


def batch_loss(args, mean, user_rows, item_rows, ratings):
    """Mean squared error, plus --l2 times the rows' squared norms per rating
    (in the loss: torch's sparse Adagrad has no weight_decay)."""
    return _loss(mean, user_rows, item_rows, ratings, float(args.l2))


def warm_up(args, mean):
    """Runs the TorchScript loss forward and backward on random rows a few
    times: its first runs profile and compile it (about 100 ms), which a
    worker process would otherwise pay in its first batches (the plain twin
    pays it in a run with worker threads, which trains first)."""
    for _ in range(3):
        rows = [torch.randn(args.batch, args.rank + 1, requires_grad=True) for _ in range(2)]
        batch_loss(args, mean, *rows, torch.randn(args.batch)).backward()


def rmse(mean, user, item, test):
    u, i, r = test
    with torch.no_grad():
        return torch.sqrt(((predict(mean, user(u), item(i)) - r) ** 2).mean()).item()


def epoch_batches(data, args, epoch, workers=1, rank=0, ratings=None, per_worker=None):
    """This worker's batches of an epoch, each (users, items, ratings) as
    tensors: the same shuffle in both variants, the same number of batches
    for every worker (so the same clock count). Cut with NumPy: a torch
    index op per tensor and batch would release and retake the GIL.

    ratings: the indices of this process's ratings (default: all), cut into
    workers * per_worker batches (default: as few as --batch allows)."""
    n = len(data[2])
    order = np.random.default_rng(args.seed + epoch).permutation(n if ratings is None
                                                                 else len(ratings))
    if ratings is not None:
        order = ratings[order]
    arrays = [d.numpy() for d in data]
    if per_worker is None:
        parts = pt.split_batches(len(order), workers, args.batch, part=rank)
    else:
        parts = np.array_split(np.arange(len(order)), workers * per_worker)[rank::workers]
    return [tuple(torch.from_numpy(a[order[idx]]) for a in arrays) for idx in parts]


def partition_by_user(users, parts):
    """The ratings of each of `parts` processes (a list of index arrays):
    every user's ratings go to one process, the users dealt largest first to
    the process with the fewest ratings (as pace_mf's PartitionByUser). A
    user's row is then updated by one process only: no other process reads
    it stale, and paced pushes it to no other process."""
    ids, inverse, counts = np.unique(users, return_inverse=True, return_counts=True)
    loads = [(0, p) for p in range(parts)]
    part_of = np.empty(len(ids), np.int64)
    for u in np.argsort(-counts, kind="stable"):
        load, p = heapq.heappop(loads)
        part_of[u] = p
        heapq.heappush(loads, (load + int(counts[u]), p))
    of_rating = part_of[inverse]
    return [np.flatnonzero(of_rating == p) for p in range(parts)]


def train_plain(args, train, test, mean, init):
    """init: the initial rows of the users and items (the PaceDB tables')."""
    user = torch.nn.Embedding(len(init[0]), args.rank + 1, sparse=True)
    item = torch.nn.Embedding(len(init[1]), args.rank + 1, sparse=True)
    with torch.no_grad():
        for e, rows in zip((user, item), init):
            e.weight.copy_(torch.from_numpy(rows))
    params = list(user.parameters()) + list(item.parameters())
    opt = (torch.optim.SGD(params, lr=args.lr) if args.optimizer == "sgd"
           else torch.optim.Adagrad(params, lr=args.lr))
    r = train[2]
    start = time.perf_counter()
    for epoch in range(args.epochs):
        for bu, bi, br in epoch_batches(train, args, epoch):
            loss = batch_loss(args, mean, user(bu), item(bi), br)
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    return rmse(mean, user, item, test), len(r) * args.epochs / seconds


# The flags that shape the PaceDB model (the job record's).
JOB_FLAGS = ("rank", "optimizer", "lr", "init_std", "l2", "batch", "epochs", "workers",
             "clock_every", "consistency", "staleness", "seed")


def open_store(args, data_dir):
    """The embedded client of a run with worker threads (the job's store)."""
    if args.resume and not os.path.isdir(data_dir):
        sys.exit(f"torch_mf.py: --resume: the data dir {data_dir} does not exist, so there is "
                 "no job to resume: run without --resume to start it")
    return pacedb.Client(data_dir=data_dir)


def make_pacedb_model(args, client, train=None, test=None):
    """(client, the two Embeddings); with train/test, the run is checked
    against (and recorded as) the job of the client's store first (--resume)."""
    if train is not None:
        flags = {f: getattr(args, f) for f in JOB_FLAGS}
        if args.processes:
            flags["processes"] = args.processes
        try:
            client.start_job("torch_mf.py", "mf", flags, [a.numpy() for a in train + test],
                             f"{args.train} + {args.test}" if args.train else "generated data",
                             resume=args.resume)
        except pacedb.FailedPreconditionError as e:
            sys.exit(f"torch_mf.py: {e}")
    kw = dict(consistency=args.consistency, staleness=args.staleness)
    user = pt.Embedding(client, "mf.user", args.rank + 1,
                        init=("normal", 0.0, args.init_std, args.seed), **kw)
    item = pt.Embedding(client, "mf.item", args.rank + 1,
                        init=("normal", 0.0, args.init_std, args.seed + 1), **kw)
    return client, user, item


def initial_rows(client, user, item, user_ids, item_ids):
    with client.worker() as w:
        return w.get_many(user.table, user_ids), w.get_many(item.table, item_ids)


def make_optimizer(args, user, item):
    if args.optimizer == "sgd":
        return pt.SGD([user, item], lr=args.lr, clock_every=args.clock_every)
    return pt.Adagrad([user, item], lr=args.lr, clock_every=args.clock_every)


def train_pacedb(args, train, mean, model, process=0, before_start=None):
    """Trains with --workers threads as process `process` of the job (of
    --processes, or the only one): each thread its part of every epoch's
    batches. before_start() runs just before the threads start. Returns
    (optimizer, start, end, ratings trained): the start and the last
    thread's end (time.monotonic), and the ratings of this process."""
    client, user, item = model
    opt = make_optimizer(args, user, item)
    mine, per_worker = None, None
    if args.processes:
        # Each process its users' ratings, in as many batches per worker as
        # the largest part needs (the same clock count in every process).
        ratings_of = partition_by_user(train[0].numpy(), args.processes)
        mine = ratings_of[process]
        per_worker = max(1, -(-max(map(len, ratings_of)) // (args.workers * args.batch)))
        steps = args.epochs * per_worker
    else:
        steps = args.epochs * len(pt.split_batches(len(train[2]), args.workers, args.batch,
                                                   part=0))
    done = min(steps, opt.start_step)  # each worker's batches before (a resumed job)
    if done == steps:
        print(f"# the job is at clock {client.start_clock}, done: nothing to train", flush=True)
    elif done:
        print(f"# resuming at clock {client.start_clock}: {done} of {steps} batches per worker "
              "done", flush=True)
    ends = [0.0] * args.workers
    ratings = [0] * args.workers

    def work(rank, worker):
        step = 0
        for epoch in range(args.epochs):
            for bu, bi, br in epoch_batches(train, args, epoch, args.workers, rank, mine,
                                            per_worker):
                step += 1
                if step <= done:
                    continue
                loss = batch_loss(args, mean, user(bu), item(bi), br)
                opt.zero_grad()
                loss.backward()
                opt.step()
                ratings[rank] += len(br)
                if args.progress and process == rank == 0 and opt.steps_since_clock == 0:
                    print(f"# clock {worker.current_clock}", flush=True)
        opt.finish()
        ends[rank] = time.monotonic()
        if args.processes:
            # Every shard has applied every process's clocks: the tables are
            # complete for whoever reads them next.
            worker.global_barrier()

    if before_start is not None:
        before_start()
    start = time.monotonic()
    pt.run_threads(client, work, args.workers)
    end = time.monotonic() if not args.processes else max(ends)
    return opt, start, end, sum(ratings)


def evaluate(args, test, mean, model, opt, ids):
    """Test RMSE of the trained tables, read through this thread's worker;
    --save writes them (rows of the data's ids, the optimizer's state too)."""
    client, user, item = model
    user.eval()
    item.eval()
    result = rmse(mean, user, item, test)
    if args.save:
        pt.save(args.save, [user, item, opt], ids)
    pt.close_thread_worker(client)
    return result


def data_ids(train, test):
    return {"mf.user": torch.cat([train[0], test[0]]).unique(),
            "mf.item": torch.cat([train[1], test[1]]).unique()}


def run_with_threads(args, train, test, mean, model):
    """The PaceDB run of --workers threads in this process: (RMSE, ratings/s)."""
    opt, start, end, ratings = train_pacedb(args, train, mean, model)
    # Read through this thread's worker; the process's updates are all in.
    return evaluate(args, test, mean, model, opt, data_ids(train, test) if args.save else None), \
        ratings / (end - start)


# --- Worker processes (--processes) ------------------------------------------

def run_with_processes(args, argv, train, test, mean, plain_ids, plain):
    """One job of --processes worker processes against a paced this process
    starts: (the plain twin's result or None, (RMSE, ratings/s)). plain(init)
    trains the plain twin from the initial rows of the ids plain_ids (users,
    items) in the tables (None: no twin)."""
    try:
        server = pacedb.LocalServer(num_clients=args.processes, paced=args.paced or None)
    except (OSError, RuntimeError) as e:  # no paced binary, or it did not start
        sys.exit(f"torch_mf.py: --processes: {e}")
    with tempfile.TemporaryDirectory(prefix="torch-mf-") as d, server:
        np.savez(os.path.join(d, "data.npz"), *(a.numpy() for a in train + test))
        plain_result = None
        if plain is not None:
            # The initial rows, as client 0 before the workers connect (client
            # 0's worker process then connects as the same client, at clock 0).
            model = make_pacedb_model(args, server.client(0), train, test)
            init = initial_rows(*model, *plain_ids)
            del model
            plain_result = plain(init)
        start, end, ratings = run_workers(args, argv, server, d)
        # A new client 0 (the workers are gone): it reads every row from the
        # shard, whose clock every process's last clock has passed.
        model = make_pacedb_model(args, server.client(0))
        opt = make_optimizer(args, *model[1:]) if args.save else None
        result = evaluate(args, test, mean, model, opt,
                          data_ids(train, test) if args.save else None)
        del model, opt
        return plain_result, (result, ratings / (end - start))


def run_workers(args, argv, server, job_dir):
    """Starts the worker processes, lets them start training together once all
    are ready, and waits for them. Returns (start, end of the last, ratings
    trained), and exits with a message if one fails (stopping the others)."""
    events = queue.Queue()  # (rank, line or None at its end)

    def read(rank, proc):
        for line in proc.stdout:
            events.put((rank, line))
        events.put((rank, None))

    procs = []
    try:
        for rank in range(args.processes):
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), *argv, f"--job_process={rank}",
                 f"--job_servers={server.address}", f"--job_token={server.token_file}",
                 f"--job_dir={job_dir}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                preexec_fn=pacedb.server.die_with_parent)
            procs.append(proc)
            threading.Thread(target=read, args=(rank, proc), daemon=True).start()
        print(f"# paced on {server.address} (pid {server.proc.pid}), worker processes (pids "
              f"{', '.join(str(p.pid) for p in procs)})", flush=True)
        ready, finished, start = set(), {}, None
        while len(finished) < len(procs):
            rank, line = events.get()
            if line is None:
                if rank in finished:
                    continue
                status = procs[rank].wait()
                sys.exit(f"torch_mf.py: worker process {rank} exited with status {status} "
                         "before the end of its training")
            if line == "ready\n":
                ready.add(rank)
                if len(ready) == len(procs):  # all connected, tables open: go
                    start = time.monotonic()
                    for p in procs:
                        p.stdin.write("go\n")
                        p.stdin.flush()
            elif line.startswith("done "):
                end, ratings = line.split()[1:]
                finished[rank] = (float(end), int(ratings))
            else:
                sys.stdout.write(line)  # --progress
                sys.stdout.flush()
        for p in procs:
            p.stdin.close()
            if p.wait() != 0:
                sys.exit(f"torch_mf.py: worker process {procs.index(p)} exited with status "
                         f"{p.returncode}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return (start, max(e for e, _ in finished.values()),
            sum(r for _, r in finished.values()))


def worker_process(args):
    """The body of worker process --job_process: loads the job's data, opens
    the tables, says "ready", waits for "go" on stdin, trains its part and
    prints "done END RATINGS". A Ctrl-C is for the process that started it,
    which stops the workers (SIGTERM) and then paced."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with np.load(os.path.join(args.job_dir, "data.npz")) as f:
        arrays = [torch.from_numpy(f[f"arr_{k}"]) for k in range(6)]
    train, test = tuple(arrays[:3]), tuple(arrays[3:])
    mean = train[2].mean().item()
    client = pacedb.Client(servers=args.job_servers, token_file=args.job_token,
                           client_id=args.job_process, num_clients=args.processes)
    model = make_pacedb_model(args, client, train, test)
    warm_up(args, mean)

    def wait_for_go():
        print("ready", flush=True)
        if sys.stdin.readline() != "go\n":
            sys.exit(1)  # the job was called off

    _, _, end, ratings = train_pacedb(args, train, mean, model, args.job_process, wait_for_go)
    print(f"done {end!r} {ratings}", flush=True)
    return 0


def interrupt_on_sigterm():
    """SIGTERM ends this process as Ctrl-C does: the cleanup (the worker
    processes, paced, the temporary files) runs."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, handler)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", default="",
                   help="ratings file (pace_mf's formats: 'user item rating' lines, csv, ...); "
                   "default: generated data")
    p.add_argument("--test", default="", help="test ratings file (default: held out of --train)")
    p.add_argument("--users", type=int, default=2000)
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--ratings", type=int, default=200000)
    p.add_argument("--true_rank", type=int, default=4)
    p.add_argument("--noise", type=float, default=0.5)
    p.add_argument("--test_fraction", type=float, default=0.1)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--optimizer", choices=["sgd", "adagrad"], default="adagrad")
    p.add_argument("--lr", type=float, default=None,
                   help="step size (default: 0.2 for adagrad, 20 for sgd: the loss is a "
                   "batch mean)")
    p.add_argument("--init_std", type=float, default=0.1)
    p.add_argument("--l2", type=float, default=0.0, help="L2 penalty on the rows in a batch")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--workers", type=int, default=1,
                   help="PaceDB worker threads (of each process, with --processes)")
    p.add_argument("--processes", type=int, default=0,
                   help="PaceDB worker processes against a paced this run starts on 127.0.0.1 "
                   "(each with its own interpreter, so its own GIL); 0: the worker threads of "
                   "this process, with an embedded store")
    p.add_argument("--paced", default="",
                   help="the paced binary for --processes (default: $PACE_BIN_DIR/paced, the "
                   "build tree's, or paced on PATH)")
    p.add_argument("--clock_every", type=int, default=20, help="batches per clock")
    p.add_argument("--consistency", default="essp", choices=["bsp", "ssp", "essp", "async"])
    p.add_argument("--staleness", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--data_dir", default="",
                   help="the PaceDB data dir, a job (default: a temporary dir); with --repeat "
                   "> 1 one per run under it (run0, run1, ...)")
    p.add_argument("--resume", action="store_true",
                   help="continue the job of --data_dir (PaceDB only: the plain twin has no "
                   "stored state)")
    p.add_argument("--no_plain", action="store_true", help="train only the PaceDB variant")
    p.add_argument("--progress", action="store_true",
                   help="print '# clock N' after each clock of worker 0")
    p.add_argument("--save", default="",
                   help="torch.save the PaceDB tables (rows of the data's ids, optimizer state "
                   "included) to this file")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each variant, alternating; prints the first run's RMSE and the "
                   "best ratings/s")
    p.add_argument("--seed", type=int, default=1)
    # A worker process of --processes (started by this script).
    for flag in ("job_process", "job_servers", "job_token", "job_dir"):
        p.add_argument(f"--{flag}", type=int if flag == "job_process" else str,
                       help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    if args.repeat < 1 or args.workers < 1 or args.clock_every < 1 or args.processes < 0:
        p.error("--repeat, --workers and --clock_every must be >= 1, --processes >= 0")
    if args.resume and (not args.data_dir or args.repeat != 1):
        p.error("--resume needs --data_dir (the job) and --repeat=1")
    if args.processes and (args.data_dir or args.resume):
        p.error("--data_dir and --resume are for runs with worker threads: with --processes "
                "the job's store is paced's temporary one")
    args.no_plain = args.no_plain or args.resume
    if args.lr is None:
        args.lr = 20.0 if args.optimizer == "sgd" else 0.2
    torch.set_num_threads(args.threads)
    if args.job_process is not None:
        return worker_process(args)
    if args.processes:
        interrupt_on_sigterm()

    train, test = (tensors(d) for d in (read(args) if args.train else generate(args)))
    user_ids, item_ids, plain_train, plain_test = dense_ids(train, test)
    mean = train[2].mean().item()
    print(f"# {len(train[2])} training and {len(test[2])} test ratings, {len(user_ids)} users x "
          f"{len(item_ids)} items; rank {args.rank}, {args.optimizer} lr {args.lr}, batch "
          f"{args.batch}, {args.epochs} epochs")
    plain_runs, pace_runs = [], []

    def plain(init):  # both start from the same rows: the tables' initial values
        return train_plain(args, plain_train, plain_test, mean, init)

    # Worker processes keep their data in a temporary dir of each run's own.
    scratch = (contextlib.nullcontext() if args.processes
               else tempfile.TemporaryDirectory(prefix="torch-mf-"))
    with scratch as d:
        for rep in range(args.repeat):  # alternating, so that both see the same machine load
            if args.processes:
                try:
                    plain_run, pace_run = run_with_processes(args, argv, train, test, mean,
                                                             (user_ids, item_ids),
                                                             None if args.no_plain else plain)
                except KeyboardInterrupt:
                    print("torch_mf.py: interrupted (the worker processes and paced are "
                          "stopped)", file=sys.stderr)
                    return 130
                plain_runs += [plain_run] if plain_run else []
                pace_runs.append(pace_run)
                continue
            data_dir = (args.data_dir if args.data_dir and args.repeat == 1
                        else os.path.join(args.data_dir or d, f"run{rep}"))
            model = make_pacedb_model(args, open_store(args, data_dir), train, test)
            if not args.no_plain:
                plain_runs.append(plain(initial_rows(*model, user_ids, item_ids)))
            pace_runs.append(run_with_threads(args, train, test, mean, model))
            del model  # closes the client (the store) before its directory goes
    best = " (best of %d runs)" % args.repeat if args.repeat > 1 else ""
    pace_rmse, pace_rate = pace_runs[0][0], max(r for _, r in pace_runs)
    versus = ""
    if plain_runs:
        plain_rmse, plain_rate = plain_runs[0][0], max(r for _, r in plain_runs)
        print(f"plain PyTorch: test RMSE {plain_rmse:.4f}, {plain_rate:,.0f} ratings/s{best}")
        versus = f" ({pace_rate / plain_rate:.2f}x plain)"
    speed = (f"{pace_rate:,.0f} ratings/s{best}{versus}" if pace_rate > 0
             else "no training in this run")
    workers = f"{args.workers} worker{'s' if args.workers > 1 else ''}"
    if args.processes:
        workers = f"{args.processes} process{'es' if args.processes > 1 else ''} x {workers}"
    print(f"PaceDB ({workers}, "
          f"{args.consistency} s={args.staleness}, clock every {args.clock_every} batches): "
          f"test RMSE {pace_rmse:.4f}, {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
