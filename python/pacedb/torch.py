"""PyTorch modules and optimizers whose embedding rows live in PaceDB tables.

    import torch, pacedb, pacedb.torch as pt
    client = pacedb.Client(data_dir="/tmp/pace-torch")
    user = pt.Embedding(client, "mf.user", 16)          # a table of 16-wide rows
    item = pt.Embedding(client, "mf.item", 16)
    opt = pt.Adagrad([user, item], lr=0.1, clock_every=20)
    for u, i, r in batches:                             # LongTensors of any ids
        loss = ((user(u) * item(i)).sum(1) - r).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()    # additive updates of the rows
    opt.finish()                                        # ends the last, partial clock

A module's forward reads the distinct rows of the batch's ids with one batched
call (de-duplicated in C++, with the inverse index) into a leaf tensor autograd
tracks (Embedding: the rows of every id, gathered in the same call, so no
embedding op runs forward or backward; EmbeddingBag: the distinct rows, which
embedding_bag indexes); the optimizer's step turns that tensor's gradient (summed
per distinct id, in C++) into an additive
update of the rows (and of the optimizer's state rows, kept in PaceDB tables
beside the weights: "<name>.adagrad", "<name>.adam"). Ids are any
non-negative integers (no id map): a row exists once it is read or updated.

Threads: each thread reads and updates through its own worker
(thread_worker(client), created on first use), and the optimizer clocks the
calling thread's worker every `clock_every` steps. Give every thread the same
number of steps (split_batches) so that their clocks stay even.

Staleness: under ssp/essp (staleness s) a read may miss other workers' updates
of the last s clocks (never this process's own). For the weights that is the
usual bounded-staleness SGD. For the optimizer state it means: Adagrad divides
by the square root of an accumulator that may lack some other workers' recent
squared gradients, so its step for a row is at most that much larger than a
sequential run's; the accumulator itself is exact (its updates are sums).
Adam's moment updates are computed from the moments read, (1 - beta) * (g -
m): k workers that read the same stale m all decay it from that value, so
under staleness the moments are approximations (still weighted averages while
k * (1 - beta) < 1). With one worker every read is exact and a step equals
PyTorch's (torch.optim.SGD, Adagrad, SparseAdam on nn.Embedding(sparse=True));
bsp still misses other processes' updates of the current clock. See
python/README.md, "What a stale read of the optimizer state means".

Resume: the tables (weights and optimizer state) persist in the data dir or
on the servers. client.start_job(app, prefix, flags, inputs, resume=...)
checks the store against the job (the job record of the C++ apps: a fresh
run on a started job, or a resume with other flags or data, is refused in one
line) and returns the clock the job resumes at, the clock of every new
worker: with clock_every and split_batches each worker has done
optimizer.start_step = start_clock * clock_every batches before; skip them.

Export: export_table(source, name) gives (ids, rows) as NumPy arrays (every
stored row of an embedded client's table, or the rows of given ids),
Embedding.export() the same as tensors, and save(path, modules) writes the
tables of modules and optimizers with torch.save.
"""
import logging
import math
import threading
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

import pacedb

__all__ = ["Embedding", "EmbeddingBag", "SGD", "Adagrad", "Adam", "thread_worker",
           "close_thread_worker", "split_batches", "run_threads", "load_table", "export_table",
           "save"]

_local = threading.local()
_log = logging.getLogger("pacedb.torch")

#: Steps per clock by default. A clock costs about 2 ms embedded (sending and
#: applying the clock's coalesced updates), about two mini-batches of 1000
#: ids: every step, the MF example ran at 0.2-0.4x plain PyTorch; every 20, at
#: 0.4-0.7x (1 worker, Adagrad, loaded 2-core machine). Lower it for fresher
#: reads across workers (staleness counts clocks, so a read may miss up to
#: staleness * clock_every of other workers' steps).
CLOCK_EVERY = 20

#: A module's read or an optimizer's clock that has waited this long (seconds)
#: logs a warning naming the usual cause (a sibling worker that stopped
#: clocking). None: never.
wait_warning_seconds = 5.0


class _WaitWatch:
    """Notes the calls that may wait on other workers, and warns from a
    daemon thread about one that has waited wait_warning_seconds."""

    def __init__(self):
        self._lock = threading.Lock()
        self._calls = {}  # thread ident -> [start, what, client, warned]
        self._thread = None

    def __call__(self, what, client, fn, *args):
        if wait_warning_seconds is None:
            return fn(*args)
        # Kept short (it runs with the GIL at every read and step): the
        # watcher looks the thread's name up when it warns.
        me = threading.get_ident()
        self._calls[me] = [time.monotonic(), what, client, False]
        if self._thread is None:
            self._start()
        try:
            return fn(*args)
        finally:
            del self._calls[me]

    def _start(self):
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="pacedb-wait-watch",
                                                daemon=True)
                self._thread.start()

    def _watch(self):
        while True:
            limit = wait_warning_seconds
            time.sleep(0.2 if limit is None else min(1.0, max(0.05, limit / 4)))
            if limit is None:
                continue
            now = time.monotonic()
            names = None
            for ident, call in list(self._calls.items()):
                if not call[3] and now - call[0] >= limit:
                    call[3] = True
                    if names is None:
                        names = {t.ident: t.name for t in threading.enumerate()}
                    _log.warning(
                        "pacedb.torch: thread %r has waited %.1f s in %s: it waits for another "
                        "worker's clock%s. A worker that ran out of data or stopped calling "
                        "step() holds the others back: give every worker the same number of "
                        "batches (split_batches), call finish() at its end and close it when "
                        "done (run_threads, `with client.worker()`).",
                        names.get(ident, ident), now - call[0], call[1], _laggards(call[2]))


def _laggards(client):
    """", held back by client 1 (not connected) at clock 0" when other client
    processes hold a shard clock back, else ""."""
    try:
        if client is None or client.num_clients < 2:
            return ""
        lags = [lag for lag in client.laggards() if lag["client"] != client.client_id]
    except pacedb.Error:
        return ""
    who = ", ".join(f"client {lag['client']}{'' if lag['connected'] else ' (not connected)'} "
                    f"at clock {lag['applied']}" for lag in lags)
    return f", held back by {who}" if who else ""


_wait = _WaitWatch()


def thread_worker(client):
    """The calling thread's worker of `client`, registered on first use and
    kept for the thread's lifetime (deregistered when the thread ends)."""
    workers = getattr(_local, "workers", None)
    if workers is None:
        workers = _local.workers = {}
    entry = workers.get(id(client))
    if entry is None or entry[0] is not client or entry[1].closed:
        entry = workers[id(client)] = (client, client.worker())
    return entry[1]


def close_thread_worker(client):
    """Closes and forgets the calling thread's worker of `client` (see
    thread_worker), if it has one: the process clock stops waiting for it, and
    the client is freed once nothing else holds it."""
    entry = getattr(_local, "workers", {}).pop(id(client), None)
    if entry is not None:
        entry[1].close()


_ID_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


def _numpy_dtype(dtype):
    if dtype in (torch.float32, np.float32, "float32", "f4"):
        return np.float32
    if dtype in (torch.float64, np.float64, "float64", "f8"):
        return np.float64
    raise ValueError(f"dtype must be float32 or float64, not {dtype!r}")


class _RowModule(nn.Module):
    """What Embedding and EmbeddingBag share: the table, the thread's worker,
    the batched read and the rows read since the optimizer's last step."""

    def __init__(self, source, name, dim, dtype, init, consistency, staleness):
        super().__init__()
        if isinstance(source, pacedb.Worker):
            self._worker = source
            self.client = source.client
        elif isinstance(source, pacedb.Client):
            self._worker = None
            self.client = source
        else:
            raise TypeError("the first argument must be a pacedb.Client or a pacedb.Worker, "
                            f"not {type(source).__name__}")
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.name = name
        self.dim = int(dim)
        self.table = self.client.create_table(name, self.dim, dtype=_numpy_dtype(dtype),
                                              consistency=consistency, staleness=staleness,
                                              init=init)
        self._prefetch = []  # state tables an optimizer reads at its step
        self._read_what = f"a read of table {name!r}"  # for the wait warning
        self._step_what = f"a step of table {name!r}"
        self._embedded = self.client.embedded
        self._pending = threading.local()

    def worker(self):
        """The worker this module reads through in the calling thread."""
        if self._worker is not None:
            return self._worker
        return thread_worker(self.client)

    def _fetch(self, ids, gather=False):
        """(inverse index as a LongTensor, rows as a leaf tensor) of ids; with
        gather, (None, the rows of ids as a leaf tensor of shape ids.shape +
        (dim,)), gathered in C++ in the same call."""
        if not isinstance(ids, torch.Tensor):
            ids = torch.as_tensor(ids)
        if ids.dtype not in _ID_DTYPES:
            raise TypeError(f"ids must be an integer tensor, not {ids.dtype}")
        w = self.worker()
        # Integer tensors never require grad, and on the CPU .numpy() shares
        # the memory: no torch op here (each would release and retake the
        # GIL, a hand-off to a sibling worker thread).
        cpu = ids.is_cpu
        got = _wait(self._read_what, self.client, w.get_unique, self.table,
                    ids.numpy() if cpu else ids.cpu().numpy(), None, gather)
        unique, inverse, rows = got[:3]
        if not self._embedded:  # start fetching the optimizer's state rows
            for t in self._prefetch:
                w.prefetch(t, unique)
        if gather:
            # The leaf autograd tracks is the gathered rows themselves: no
            # embedding op forward, none backward (the step sums the
            # gradients of a row's occurrences in C++, as nn.Embedding's
            # backward does), two GIL releases and a tensor fewer per read.
            weight = torch.from_numpy(got[3])
            if not cpu:
                weight = weight.to(ids.device)
            if self.training and torch.is_grad_enabled():
                weight.requires_grad = True
                self._rows_read().append((w, unique, weight, rows, inverse))
            return None, weight
        weight = torch.from_numpy(rows)
        inverse = torch.from_numpy(inverse)
        if not cpu:
            weight, inverse = weight.to(ids.device), inverse.to(ids.device)
        if self.training and torch.is_grad_enabled():
            weight.requires_grad = True
            self._rows_read().append((w, unique, weight, rows, None))
        return inverse, weight

    def rows(self, ids):
        """The current rows of ids (a tensor, no gradient), read through the
        calling thread's worker: to inspect or export rows while training."""
        ids = torch.as_tensor(ids)
        rows = self.worker().get_many(self.table, ids.reshape(-1).cpu().numpy())
        return torch.from_numpy(rows).reshape(*ids.shape, self.dim)

    def export(self, ids=None):
        """(ids, rows) of the table as tensors (int64, float), as
        export_table(self.worker(), self.name, ids)."""
        ids, rows = export_table(self.worker(), self.name, ids)
        return torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(rows)

    def _rows_read(self):
        rows = getattr(self._pending, "rows", None)
        if rows is None:
            rows = self._pending.rows = []
        return rows

    def _take_rows_read(self):
        rows = self._rows_read()
        self._pending.rows = []
        return rows

    def extra_repr(self):
        return f"table={self.name!r}, dim={self.dim}"


class Embedding(_RowModule):
    """nn.Embedding over the PaceDB table `name` (created if missing) of
    `dim`-wide rows: forward(ids) of any shape returns ids.shape + (dim,).

    source: a pacedb.Client (each thread uses its own worker, thread_worker)
    or a pacedb.Worker (used as is, from one thread). init: the table's
    initializer, default ("normal", 0, 1, seed) as nn.Embedding's N(0, 1).
    consistency/staleness: the table's (Client.create_table)."""

    def __init__(self, source, name, dim, dtype=torch.float32, init=None, consistency="essp",
                 staleness=None, seed=0):
        super().__init__(source, name, dim, dtype,
                         init if init is not None else ("normal", 0.0, 1.0, seed),
                         consistency, staleness)

    def forward(self, ids):
        return self._fetch(ids, gather=True)[1]


class EmbeddingBag(_RowModule):
    """nn.EmbeddingBag over a PaceDB table: the sum or mean of each bag's rows.

    forward(input, offsets=None, per_sample_weights=None) as
    nn.EmbeddingBag's: input 2-D (bags of equal length), or 1-D with offsets
    (the start of each bag). per_sample_weights needs mode="sum"."""

    def __init__(self, source, name, dim, mode="mean", dtype=torch.float32, init=None,
                 consistency="essp", staleness=None, seed=0):
        if mode not in ("sum", "mean"):
            raise ValueError(f'mode must be "sum" or "mean", not {mode!r}')
        super().__init__(source, name, dim, dtype,
                         init if init is not None else ("normal", 0.0, 1.0, seed),
                         consistency, staleness)
        self.mode = mode

    def forward(self, input, offsets=None, per_sample_weights=None):
        inverse, weight = self._fetch(input)
        return F.embedding_bag(inverse, weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights)

    def extra_repr(self):
        return super().extra_repr() + f", mode={self.mode!r}"


def _row_modules(modules):
    if isinstance(modules, nn.Module):
        modules = [modules]
    found = []
    for m in modules:
        if not isinstance(m, nn.Module):
            raise TypeError(f"expected PaceDB modules (or modules holding them), not "
                            f"{type(m).__name__}: optimize plain parameters with torch.optim")
        for sub in m.modules():
            if isinstance(sub, _RowModule) and all(sub is not f for f in found):
                found.append(sub)
    if not found:
        raise ValueError("no pacedb.torch.Embedding or EmbeddingBag among the modules")
    return found


def _per_row(ids, rows, grad, inverse):
    """(ids, rows, grad) of a read with one gradient row per distinct id (a
    gathered read's gradient has one per occurrence: summed by inverse)."""
    if inverse is None:
        return ids, rows, grad
    return ids, rows, pacedb._pacedb._sum_rows(grad, inverse, len(ids))


def _merge(reads):
    """(ids, rows, grads) of several reads as one with distinct ids, the
    gradients of equal ids summed (their rows are the same read)."""
    reads = [_per_row(*r) for r in reads]
    ids = np.concatenate([r[0] for r in reads])
    rows = np.concatenate([r[1] for r in reads])
    grads = np.concatenate([r[2] for r in reads])
    unique, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    summed = np.zeros((len(unique), grads.shape[1]), grads.dtype)
    np.add.at(summed, inverse, grads)
    return unique, rows[first], summed


class _RowOptimizer:
    """The step and the clock policy; subclasses compute the update of rows."""

    state_suffix = None  # the state table: "<weights>.<suffix>", state_width(dim) wide

    def __init__(self, modules, lr, clock_every):
        if lr < 0:
            raise ValueError(f"lr must be >= 0, got {lr}")
        if int(clock_every) < 1:
            raise ValueError(f"clock_every must be >= 1, got {clock_every}")
        self.modules = _row_modules(modules)
        self.lr = float(lr)
        self.clock_every = int(clock_every)
        self._clocks = threading.local()
        self.state_tables = {}
        if self.state_suffix:
            for m in self.modules:
                t = m.table
                st = m.client.create_table(f"{m.name}.{self.state_suffix}",
                                           self.state_width(m.dim), dtype=t.dtype,
                                           consistency=t.consistency, staleness=t.staleness)
                self.state_tables[m.name] = st
                if all(t.name != st.name for t in m._prefetch):
                    m._prefetch.append(st)

    def state_width(self, dim):
        return dim

    def zero_grad(self, set_to_none=True):
        """Forgets the gradients of the rows read since the last step (as
        torch.optim's zero_grad; the rows themselves are read again by the
        next forward)."""
        for m in self.modules:
            for read in m._rows_read():
                weight = read[2]
                if weight.grad is not None:
                    if set_to_none:
                        weight.grad = None
                    else:
                        weight.grad.zero_()

    def step(self):
        """Applies the gradients of the rows each module read since the last
        step (in this thread) to their PaceDB rows, then counts the step for
        the clock policy: every clock_every steps the thread's workers clock.

        No torch op runs here (the rows and gradients are read as NumPy
        arrays of the same memory): each would release and retake the GIL,
        a hand-off between worker threads."""
        for m in self.modules:
            by_worker = {}
            for w, ids, weight, rows, inverse in m._take_rows_read():
                grad = weight.grad
                if grad is None:
                    continue
                # The gradient's Python object now holds the last reference:
                # freed with it below, not by the weight's destruction (which
                # would take the GIL again to free it).
                weight.grad = None
                if grad.requires_grad or not grad.is_cpu:  # backward(create_graph=True), a GPU
                    grad = grad.detach().cpu()
                grad = grad.numpy()
                if inverse is not None:  # gathered: a row per occurrence of an id
                    grad = grad.reshape(-1, m.dim)
                    inverse = inverse.reshape(-1)
                by_worker.setdefault(id(w), (w, []))[1].append((ids, rows, grad, inverse))
            for w, reads in by_worker.values():
                # Several forwards of a module in one step (a module used twice):
                # one update of the summed gradients, as torch.optim's (the
                # Adagrad and Adam updates are not additive in the gradient).
                if len(reads) == 1:
                    self._update_read(m, w, *reads[0])
                else:
                    self._update(m, w, *_merge(reads))
        count = getattr(self._clocks, "steps", 0) + 1
        if count >= self.clock_every:
            # Every worker of the modules in this thread: those read through
            # this step and the thread's own (a step without a read clocks too).
            for client, w in self._thread_workers():
                _wait("clock", client, w.clock)
            count = 0
        self._clocks.steps = count

    def finish(self):
        """Ends the calling thread's partial clock (the steps since the last
        clock), so that every thread ends with ceil(steps / clock_every)
        clocks. Call it once at the end of a thread's training."""
        if getattr(self._clocks, "steps", 0) > 0:
            for client, w in self._thread_workers():
                _wait("clock", client, w.clock)
        self._clocks.steps = 0

    def _thread_workers(self):
        """(client, worker) of each distinct worker the modules read through
        in this thread."""
        workers = {}
        for m in self.modules:
            w = m.worker()
            workers[id(w)] = (m.client, w)
        return workers.values()

    @property
    def start_step(self):
        """The steps each worker thread took before this process: a resumed
        job (client.start_job) starts at client.start_clock, and a worker
        clocks every clock_every steps, so start_clock * clock_every. Skip
        that many batches of each worker's sequence (split_batches)."""
        return self.modules[0].client.start_clock * self.clock_every

    @property
    def steps_since_clock(self):
        """Steps of the calling thread since its last clock."""
        return getattr(self._clocks, "steps", 0)

    def _update_read(self, module, worker, ids, rows, grad, inverse):
        """The update of one read: grad has a row per id, or with inverse (a
        gathered read) a row per occurrence, grad[k] of ids[inverse[k]]."""
        self._update(module, worker, *_per_row(ids, rows, grad, inverse))

    def _update(self, module, worker, ids, rows, grad):
        raise NotImplementedError


class SGD(_RowOptimizer):
    """Plain SGD: row -= lr * (grad + weight_decay * row), one additive update
    per distinct row. Exact under any staleness (the update does not depend on
    a read of optimizer state)."""

    def __init__(self, modules, lr, weight_decay=0.0, clock_every=CLOCK_EVERY):
        super().__init__(modules, lr, clock_every)
        self.weight_decay = float(weight_decay)

    def _update(self, module, worker, ids, rows, grad):
        if self.weight_decay:
            grad = grad + self.weight_decay * rows
        worker.inc_many(module.table, ids, (-self.lr) * grad)


class Adagrad(_RowOptimizer):
    """Adagrad with its accumulators in the table "<name>.adagrad" (zeros,
    same width, consistency and staleness as the weights):
    acc += grad**2; row -= lr * grad / (sqrt(acc) + eps), as torch.optim.Adagrad
    (lr_decay 0). initial_accumulator_value is added at read time, so the
    state table starts at zero like any other."""

    state_suffix = "adagrad"

    def __init__(self, modules, lr=0.01, eps=1e-10, initial_accumulator_value=0.0,
                 weight_decay=0.0, clock_every=CLOCK_EVERY):
        super().__init__(modules, lr, clock_every)
        self.eps = float(eps)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.weight_decay = float(weight_decay)

    def _update_read(self, module, worker, ids, rows, grad, inverse):
        if self.weight_decay or inverse is None:
            super()._update_read(module, worker, ids, rows, grad, inverse)
            return
        # One call: sums the occurrences' gradients, reads and updates the
        # accumulators, updates the rows (C++, without the GIL).
        _wait(module._step_what, module.client, worker.adagrad_update, module.table,
              self.state_tables[module.name], ids, grad, self.lr, self.eps,
              self.initial_accumulator_value, module._embedded, inverse)

    def _update(self, module, worker, ids, rows, grad):
        if self.weight_decay:
            grad = grad + self.weight_decay * rows
        # One call: reads the accumulators, updates them and the rows (C++).
        # Embedded it prefetches the accumulators itself; with servers the
        # forward pass already asked for them (fetched while computing).
        _wait(module._step_what, module.client, worker.adagrad_update, module.table,
              self.state_tables[module.name], ids, grad, self.lr, self.eps,
              self.initial_accumulator_value, module._embedded)


class Adam(_RowOptimizer):
    """Lazy Adam (torch.optim.SparseAdam): only the rows of a batch move, their
    moments m, v in the table "<name>.adam" (2 * dim wide: m then v). The
    update of the moments is additive, (1 - beta) * (g - m), from the moments
    read: exact with one worker or bsp, an approximation under staleness (see
    the module docs). Bias correction counts this optimizer's steps in the
    calling thread, from client.start_clock * clock_every in a resumed job."""

    state_suffix = "adam"

    def __init__(self, modules, lr=0.001, betas=(0.9, 0.999), eps=1e-8, clock_every=CLOCK_EVERY):
        super().__init__(modules, lr, clock_every)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps = float(eps)
        self._steps = threading.local()
        # A resumed job continues the bias correction from its resume clock.
        self._first_step = self.start_step

    def state_width(self, dim):
        return 2 * dim

    def step(self):
        self._steps.count = getattr(self._steps, "count", self._first_step) + 1
        super().step()

    def _update(self, module, worker, ids, rows, grad):
        state = self.state_tables[module.name]
        d = module.dim
        mv = _wait(module._step_what, module.client, worker.get_many, state, ids)
        m, v = mv[:, :d], mv[:, d:]
        delta = np.empty_like(mv)
        dm, dv = delta[:, :d], delta[:, d:]
        np.subtract(grad, m, out=dm)
        dm *= 1 - self.beta1
        np.subtract(grad * grad, v, out=dv)
        dv *= 1 - self.beta2
        worker.inc_many(state, ids, delta)
        m_new = dm + m
        denom = np.sqrt(dv + v) + self.eps
        t = self._steps.count
        step_size = self.lr * math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        worker.inc_many(module.table, ids, (-step_size) * m_new / denom)


def load_table(data_dir, name):
    """A dense table of a data dir (a shard's; embedded, the client's) as a
    tensor of rows 0..max written id, read offline: after training, or while
    a client runs (once global_barrier() and flush() returned). For
    torch.save; ids of a hash space (2**40) are too many rows, use
    Embedding.rows(ids) instead."""
    return torch.from_numpy(pacedb.open_store(data_dir).table(name).to_numpy())


def export_table(source, name, ids=None):
    """(ids, rows) of table `name` as NumPy arrays: ids (int64; uint64 if
    one is >= 2**63) and their rows (len(ids) x width), read through the
    worker of `source` (a Worker, or a Client: the calling thread's worker),
    so they include this process's updates.

    ids=None: every row stored in the table (written at least once), for an
    embedded client only: the ids come from its data dir, read after a
    client.flush(), so rows updated since the last clock may be missing.
    With servers pass the ids (e.g. those of the training data)."""
    worker = source if isinstance(source, pacedb.Worker) else thread_worker(source)
    client = worker.client
    table = client.table(name)
    if ids is None:
        if not client.embedded:
            raise ValueError("export_table: pass the ids with a client of servers (the rows "
                             "are listed from an embedded client's data dir only)")
        client.flush()
        ids = pacedb.open_store(client.data_dir).table(name).row_ids()
    ids = np.asarray(ids.cpu().numpy() if isinstance(ids, torch.Tensor) else ids).reshape(-1)
    if ids.dtype == np.uint64 and (len(ids) == 0 or ids.max() < 2**63):
        ids = ids.astype(np.int64)
    return ids, worker.get_many(table, ids)


def save(path, modules, ids=None):
    """torch.save of the tables of `modules` (Embedding / EmbeddingBag
    modules, modules holding them, and optimizers, whose state tables are
    saved too) as {table name: {"ids": int64 tensor, "rows": tensor}}.
    ids: None (every stored row, embedded clients only; see export_table) or
    {module name: ids}, also used for the module's state tables."""
    if isinstance(modules, (nn.Module, _RowOptimizer)):
        modules = [modules]
    tables = {}  # table name -> the module it belongs to
    for m in modules:
        state = m.state_tables if isinstance(m, _RowOptimizer) else {}
        for mod in (m.modules if isinstance(m, _RowOptimizer) else _row_modules(m)):
            tables[mod.name] = mod
            if mod.name in state:
                tables[state[mod.name].name] = mod
    out = {}
    for name, mod in tables.items():
        got_ids, rows = export_table(mod.worker(), name, None if ids is None else ids[mod.name])
        out[name] = {"ids": torch.from_numpy(got_ids.astype(np.int64)),
                     "rows": torch.from_numpy(rows)}
    torch.save(out, path)
    return out


def split_batches(num_items, num_parts, batch_size, part=None, shuffle=False, seed=0):
    """Index batches of range(num_items) for num_parts workers (threads, or
    threads x processes), every part with the same number of batches:
    ceil(num_items / (num_parts * batch_size)), the items spread so that batch
    sizes differ by at most one. With equal batch counts and one clock policy,
    every worker ends with the same number of clocks, so none waits forever
    for a sibling that ran out of data.

    Returns the list of parts (each a list of int64 arrays), or part `part`.
    With fewer items than parts some batches are empty: step() on them
    anyway, so that the clocks stay even."""
    if num_parts < 1 or batch_size < 1:
        raise ValueError("num_parts and batch_size must be >= 1")
    order = (np.random.default_rng(seed).permutation(num_items) if shuffle
             else np.arange(num_items, dtype=np.int64))
    per_part = max(1, math.ceil(num_items / (num_parts * batch_size)))
    batches = np.array_split(order, num_parts * per_part)
    parts = [batches[p::num_parts] for p in range(num_parts)]
    return parts if part is None else parts[part]


def run_threads(client, fn, num_threads):
    """Runs fn(rank, worker) in num_threads threads, each with its own worker
    of `client` (also thread_worker(client) in that thread), closed when fn
    returns or raises so that the other threads' clocks never wait for it.
    Re-raises the first exception; returns the list of results by rank."""
    results = [None] * num_threads
    errors = []

    def body(rank):
        try:
            with thread_worker(client) as w:
                results[rank] = fn(rank, w)
        except BaseException as e:  # noqa: B036 - re-raised in the caller
            errors.append(e)
        finally:
            close_thread_worker(client)

    threads = [threading.Thread(target=body, args=(r,), name=f"pacedb-worker-{r}")
               for r in range(num_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
