#!/usr/bin/env python3
"""Matrix factorization in PyTorch, twice: embeddings in PaceDB (pacedb.torch)
and plain PyTorch (nn.Embedding(sparse=True) + torch.optim), same model, same
optimizer, same generated data; prints test RMSE and ratings/s of both.

    PYTHONPATH=build/python python3 python/examples/torch_mf.py --epochs=5
    PYTHONPATH=build/python python3 python/examples/torch_mf.py --optimizer=sgd --workers=2
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
"""
import argparse
import os
import sys
import tempfile
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


def rmse(mean, user, item, test):
    u, i, r = test
    with torch.no_grad():
        return torch.sqrt(((predict(mean, user(u), item(i)) - r) ** 2).mean()).item()


def epoch_batches(data, args, epoch, workers=1, rank=0):
    """This worker's batches of an epoch, each (users, items, ratings) as
    tensors: the same shuffle in both variants, the same number of batches
    for every worker (so the same clock count). Cut with NumPy: a torch
    index op per tensor and batch would release and retake the GIL."""
    n = len(data[2])
    order = np.random.default_rng(args.seed + epoch).permutation(n)
    arrays = [d.numpy() for d in data]
    return [tuple(torch.from_numpy(a[order[idx]]) for a in arrays)
            for idx in pt.split_batches(n, workers, args.batch, part=rank)]


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


def make_pacedb_model(args, data_dir, train=None, test=None):
    """The client and the two Embeddings; with train/test, the run is checked
    against (and recorded as) the job of data_dir first (--resume)."""
    if args.resume and not os.path.isdir(data_dir):
        sys.exit(f"torch_mf.py: --resume: the data dir {data_dir} does not exist, so there is "
                 "no job to resume: run without --resume to start it")
    client = pacedb.Client(data_dir=data_dir)
    if train is not None:
        try:
            client.start_job("torch_mf.py", "mf", {f: getattr(args, f) for f in JOB_FLAGS},
                             [a.numpy() for a in train + test],
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


def train_pacedb(args, train, test, mean, model):
    client, user, item = model
    if args.optimizer == "sgd":
        opt = pt.SGD([user, item], lr=args.lr, clock_every=args.clock_every)
    else:
        opt = pt.Adagrad([user, item], lr=args.lr, clock_every=args.clock_every)
    u, i, r = train
    steps = args.epochs * len(pt.split_batches(len(r), args.workers, args.batch, part=0))
    done = min(steps, opt.start_step)  # each worker's batches before (a resumed job)
    if done == steps:
        print(f"# the job is at clock {client.start_clock}, done: nothing to train", flush=True)
    elif done:
        print(f"# resuming at clock {client.start_clock}: {done} of {steps} batches per worker "
              "done", flush=True)

    def work(rank, worker):
        step = 0
        for epoch in range(args.epochs):
            for bu, bi, br in epoch_batches(train, args, epoch, args.workers, rank):
                step += 1
                if step <= done:
                    continue
                loss = batch_loss(args, mean, user(bu), item(bi), br)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if args.progress and rank == 0 and opt.steps_since_clock == 0:
                    print(f"# clock {worker.current_clock}", flush=True)
        opt.finish()

    start = time.perf_counter()
    pt.run_threads(client, work, args.workers)
    seconds = time.perf_counter() - start
    user.eval()
    item.eval()
    # Read through this thread's worker; the process's updates are all in.
    result = rmse(mean, user, item, test)
    if args.save:  # the rows of every id of the data, with the optimizer's state
        ids = {"mf.user": torch.cat([u, test[0]]).unique(),
               "mf.item": torch.cat([i, test[1]]).unique()}
        pt.save(args.save, [user, item, opt], ids)
    pt.close_thread_worker(client)
    # The ratings this process trained on (a resumed job skipped some).
    return result, len(r) * args.epochs * (steps - done) / steps / seconds


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
    p.add_argument("--workers", type=int, default=1, help="PaceDB worker threads")
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
    args = p.parse_args(argv)
    if args.repeat < 1 or args.workers < 1 or args.clock_every < 1:
        p.error("--repeat, --workers and --clock_every must be >= 1")
    if args.resume and (not args.data_dir or args.repeat != 1):
        p.error("--resume needs --data_dir (the job) and --repeat=1")
    args.no_plain = args.no_plain or args.resume
    if args.lr is None:
        args.lr = 20.0 if args.optimizer == "sgd" else 0.2
    torch.set_num_threads(args.threads)

    train, test = (tensors(d) for d in (read(args) if args.train else generate(args)))
    user_ids, item_ids, plain_train, plain_test = dense_ids(train, test)
    mean = train[2].mean().item()
    print(f"# {len(train[2])} training and {len(test[2])} test ratings, {len(user_ids)} users x "
          f"{len(item_ids)} items; rank {args.rank}, {args.optimizer} lr {args.lr}, batch "
          f"{args.batch}, {args.epochs} epochs")
    plain_runs, pace_runs = [], []
    with tempfile.TemporaryDirectory(prefix="torch-mf-") as d:
        for rep in range(args.repeat):  # alternating, so that both see the same machine load
            data_dir = (args.data_dir if args.data_dir and args.repeat == 1
                        else os.path.join(args.data_dir or d, f"run{rep}"))
            model = make_pacedb_model(args, data_dir, train, test)
            if not args.no_plain:
                # Both start from the same rows: the tables' initial values.
                init = initial_rows(*model, user_ids, item_ids)
                plain_runs.append(train_plain(args, plain_train, plain_test, mean, init))
            pace_runs.append(train_pacedb(args, train, test, mean, model))
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
    print(f"PaceDB ({args.workers} worker{'s' if args.workers > 1 else ''}, "
          f"{args.consistency} s={args.staleness}, clock every {args.clock_every} batches): "
          f"test RMSE {pace_rmse:.4f}, {speed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
