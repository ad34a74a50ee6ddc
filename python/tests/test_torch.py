"""pacedb.torch: modules and optimizers against plain PyTorch on tiny models
(one worker, bsp: every read exact), the clock policy and uneven data."""
import json
import logging
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pt = pytest.importorskip("pacedb.torch")

import pacedb  # noqa: E402

USERS, ITEMS, DIM = 6, 5, 3
# Batches with repeated ids (and one id of 2**40: ids need no map).
BATCHES = [
    (torch.tensor([0, 1, 1, 5, 2**40]), torch.tensor([4, 4, 0, 2, 1]),
     torch.tensor([1.0, -0.5, 2.0, 0.3, 1.5])),
    (torch.tensor([5, 5, 3, 0, 2**40]), torch.tensor([2, 3, 3, 4, 1]),
     torch.tensor([0.2, 0.1, -1.0, 0.7, 0.9])),
]
USER_IDS = torch.tensor([0, 1, 2, 3, 4, 5, 2**40])
ITEM_IDS = torch.arange(ITEMS)


def loss_of(u, i, r):
    return ((u * i).sum(1) - r).pow(2).mean()


def torch_twin(emb, ids):
    """An nn.Embedding(sparse=True) holding the PaceDB rows of ids, and the
    position of each id in it."""
    w = emb.worker().get_many(emb.table, ids.numpy())
    e = torch.nn.Embedding(len(ids), emb.dim, sparse=True)
    with torch.no_grad():
        e.weight.copy_(torch.from_numpy(w))
    pos = {int(x): k for k, x in enumerate(ids)}
    return e, lambda batch: torch.tensor([pos[int(x)] for x in batch])


OPTIMIZERS = {
    "sgd": (lambda mods: pt.SGD(mods, lr=0.1, clock_every=1),
            lambda params: torch.optim.SGD(params, lr=0.1)),
    "adagrad": (lambda mods: pt.Adagrad(mods, lr=0.3, initial_accumulator_value=0.1,
                                        clock_every=1),
                lambda params: torch.optim.Adagrad(params, lr=0.3,
                                                   initial_accumulator_value=0.1)),
    "adam": (lambda mods: pt.Adam(mods, lr=0.05, betas=(0.8, 0.9), clock_every=1),
             lambda params: torch.optim.SparseAdam(params, lr=0.05, betas=(0.8, 0.9))),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_steps_equal_plain_pytorch(client, name):
    check_steps_equal_plain_pytorch(client, name)


@pytest.mark.parametrize("name", ["adagrad", "adam"])
def test_steps_equal_plain_pytorch_against_paced(tmp_path, paced, name):
    server = paced()
    remote = pacedb.Client(servers=server.address, data_dir=str(tmp_path / "unused"))
    assert not remote.embedded  # the path that prefetches state rows in the forward pass
    check_steps_equal_plain_pytorch(remote, name)


def check_steps_equal_plain_pytorch(client, name):
    make_ours, make_theirs = OPTIMIZERS[name]
    user = pt.Embedding(client, "user", DIM, consistency="bsp", seed=1)
    item = pt.Embedding(client, "item", DIM, consistency="bsp", seed=2)
    t_user, upos = torch_twin(user, USER_IDS)
    t_item, ipos = torch_twin(item, ITEM_IDS)
    opt = make_ours([user, item])
    t_opt = make_theirs(list(t_user.parameters()) + list(t_item.parameters()))
    for u, i, r in BATCHES:
        ours = loss_of(user(u), item(i), r)
        theirs = loss_of(t_user(upos(u)), t_item(ipos(i)), r)
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
        opt.zero_grad()
        ours.backward()
        opt.step()
        t_opt.zero_grad()
        theirs.backward()
        t_opt.step()
    w = user.worker()
    assert w.current_clock == len(BATCHES)  # a clock per step
    np.testing.assert_allclose(w.get_many(user.table, USER_IDS.numpy()),
                               t_user.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.get_many(item.table, ITEM_IDS.numpy()),
                               t_item.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    # The optimizer's state is a PaceDB table beside the weights.
    if name != "sgd":
        assert f"user.{name}" in {s["name"] for s in client.tables()}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_module_used_twice_in_a_step_equals_plain_pytorch(client, name):
    make_ours, make_theirs = OPTIMIZERS[name]
    emb = pt.Embedding(client, "twice", DIM, consistency="bsp", seed=4)
    ref, pos = torch_twin(emb, USER_IDS)
    opt, ref_opt = make_ours(emb), make_theirs(list(ref.parameters()))
    for u, i, r in BATCHES:  # users against users: two forwards of one module
        for model, index, o in ((emb, lambda x: x, opt), (ref, pos, ref_opt)):
            o.zero_grad()
            loss_of(model(index(u)), model(index(i)), r).backward()
            o.step()
    np.testing.assert_allclose(emb.worker().get_many(emb.table, USER_IDS.numpy()),
                               ref.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_equals_pytorch(client, mode):
    bag = pt.EmbeddingBag(client, "words", 4, mode=mode, consistency="bsp", seed=3)
    ids = torch.arange(10)
    w0 = bag.worker().get_many(bag.table, ids.numpy())
    ref = torch.nn.EmbeddingBag(10, 4, mode=mode, sparse=True)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(w0))
    flat = torch.tensor([1, 2, 2, 7, 9, 1, 0, 3])
    offsets = torch.tensor([0, 3, 4])
    torch.testing.assert_close(bag(flat, offsets), ref(flat, offsets))
    square = torch.tensor([[1, 1, 4], [8, 0, 1]])
    torch.testing.assert_close(bag(square), ref(square))
    if mode == "sum":
        psw = torch.rand(len(flat))
        torch.testing.assert_close(bag(flat, offsets, psw), ref(flat, offsets, psw))
    # One SGD step on a bag loss moves the same rows by the same amounts.
    opt, ref_opt = pt.SGD(bag, lr=0.5), torch.optim.SGD(ref.parameters(), lr=0.5)
    opt.zero_grad()  # drops the grads of the forwards above
    target = torch.randn(3, 4)
    (bag(flat, offsets) - target).pow(2).sum().backward()
    (ref(flat, offsets) - target).pow(2).sum().backward()
    opt.step()
    ref_opt.step()
    np.testing.assert_allclose(bag.worker().get_many(bag.table, ids.numpy()),
                               ref.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_forward_shapes_eval_and_errors(client):
    emb = pt.Embedding(client, "e", 2)
    out = emb(torch.tensor([[1, 2, 3], [3, 2, 1]]))
    assert out.shape == (2, 3, 2) and out.requires_grad
    torch.testing.assert_close(out[0, 0], out[1, 2])
    emb.eval()
    with torch.no_grad():
        assert not emb(torch.tensor([1])).requires_grad
    assert emb._rows_read() and len(emb._rows_read()) == 1  # only the training forward
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.tensor([1.0]))
    with pytest.raises(pacedb.InvalidArgumentError, match=">= 0"):
        emb(torch.tensor([-1]))
    with pytest.raises(TypeError, match="pacedb.Client or a pacedb.Worker"):
        pt.Embedding("nope", "x", 2)
    with pytest.raises(ValueError, match="no pacedb.torch.Embedding"):
        pt.SGD(torch.nn.Linear(2, 2), lr=0.1)


def test_clock_every_and_finish(client):
    emb = pt.Embedding(client.worker(), "c", 2)
    opt = pt.SGD(emb, lr=0.1, clock_every=3)
    w = emb.worker()
    for step in range(7):
        emb(torch.tensor([step])).sum().backward()
        opt.step()
    assert w.current_clock == 2 and opt.steps_since_clock == 1
    opt.finish()
    assert w.current_clock == 3 and opt.steps_since_clock == 0
    opt.finish()  # nothing pending: no extra clock
    assert w.current_clock == 3


def test_split_batches_gives_equal_counts():
    parts = pt.split_batches(103, 3, 10)
    assert [len(p) for p in parts] == [4, 4, 4]
    every = np.concatenate([b for p in parts for b in p])
    assert sorted(every.tolist()) == list(range(103))
    sizes = [len(b) for p in parts for b in p]
    assert max(sizes) - min(sizes) <= 1
    assert [len(b) for b in pt.split_batches(5, 2, 100, part=1)] == [2]
    shuffled = pt.split_batches(50, 2, 5, shuffle=True, seed=4)
    assert sorted(np.concatenate(shuffled[0] + shuffled[1]).tolist()) == list(range(50))


UNEVEN = textwrap.dedent("""
    import sys, torch, pacedb, pacedb.torch as pt
    client = pacedb.Client(data_dir=sys.argv[1])
    emb = pt.Embedding(client, "u", 2, consistency="ssp", staleness=0)
    opt = pt.SGD(emb, lr=0.01, clock_every=2)
    batches = [30, 3]      # thread 0: 30 batches, thread 1: 3

    def train(rank, worker):
        # A worker starts at the process clock: the other thread may have
        # clocked alone before this one registered.
        start = worker.current_clock
        for b in range(batches[rank]):
            emb(torch.tensor([b % 4])).sum().backward()
            opt.step()
        opt.finish()
        return worker.current_clock - start

    print(pt.run_threads(client, train, 2))
    even = pt.split_batches(65, 2, 4)
    def train_even(rank, worker):
        start = worker.current_clock
        for b in even[rank]:
            emb(torch.from_numpy(b % 4)).sum().backward()
            opt.step()
        opt.finish()
        return worker.current_clock - start
    print(pt.run_threads(client, train_even, 2))
""")


def test_uneven_data_per_thread_does_not_hang(tmp_path):
    r = subprocess.run([sys.executable, "-c", UNEVEN, str(tmp_path / "d")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    uneven, even = r.stdout.splitlines()
    assert uneven == "[15, 2]"  # each thread's clocks: ceil(batches / 2)
    assert even == "[5, 5]"  # 65 items, 2 threads, batches of 4: 9 batches each, 5 clocks


def test_a_waiting_worker_says_why_and_resumes_when_the_laggard_closes(client, caplog,
                                                                        monkeypatch):
    caplog.set_level(logging.WARNING, logger="pacedb.torch")
    monkeypatch.setattr(pt, "wait_warning_seconds", 0.3)
    laggard = client.worker()  # registered, never clocks: holds the process clock at 0
    done = threading.Event()

    def train():
        with client.worker() as w:
            emb = pt.Embedding(w, "wait", 2, consistency="ssp", staleness=0)
            opt = pt.SGD(emb, lr=0.1, clock_every=1)
            for _ in range(3):
                emb(torch.tensor([1])).sum().backward()
                opt.step()
        done.set()

    t = threading.Thread(target=train, name="trainer")
    t.start()
    deadline = time.monotonic() + 20
    while not caplog.records and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not done.is_set()
    [record] = caplog.records
    assert "'trainer' has waited" in record.getMessage()
    assert "read of table 'wait'" in record.getMessage()
    assert "split_batches" in record.getMessage()
    laggard.close()
    t.join(timeout=30)
    assert done.is_set()


RESUMABLE = textwrap.dedent("""
    import json, sys, torch, pacedb, pacedb.torch as pt
    data_dir, optimizer, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = pacedb.Client(data_dir=data_dir)
    emb = pt.Embedding(client, "r", 3, consistency="bsp", seed=5)
    opt = (pt.Adagrad(emb, lr=0.2, clock_every=2) if optimizer == "adagrad"
           else pt.Adam(emb, lr=0.1, clock_every=2))
    start = client.start_clock * opt.clock_every      # batches done before
    ids = [torch.tensor([(7 * b) % 5, (3 * b) % 5, 2**40]) for b in range(8)]

    def train(rank, worker):
        for b in range(start, start + steps):
            (emb(ids[b]) ** 2).sum().backward()
            opt.step()
        opt.finish()
        return worker.current_clock

    [clock] = pt.run_threads(client, train, 1)
    print(json.dumps({"start_clock": client.start_clock, "clock": clock,
                      "rows": emb.rows(torch.tensor([0, 1, 2, 3, 4, 2**40])).tolist()}))
""")


@pytest.mark.parametrize("optimizer", ["adagrad", "adam"])
def test_resume_continues_as_an_uninterrupted_run(tmp_path, optimizer):
    def run(name, steps):
        r = subprocess.run([sys.executable, "-c", RESUMABLE, str(tmp_path / name), optimizer,
                            str(steps)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    whole = run("whole", 8)
    first, second = run("split", 4), run("split", 4)
    assert (whole["start_clock"], whole["clock"]) == (0, 4)
    assert (first["start_clock"], first["clock"]) == (0, 2)
    assert (second["start_clock"], second["clock"]) == (2, 4)
    # The weights and the optimizer's state persisted: the same rows.
    np.testing.assert_allclose(second["rows"], whole["rows"], rtol=1e-6)
    assert not np.allclose(first["rows"], whole["rows"])


def test_rows_and_load_table(client):
    emb = pt.Embedding(client, "x", 2, seed=9)
    got = emb.rows(torch.tensor([[3, 1]]))
    assert got.shape == (1, 2, 2) and not got.requires_grad
    opt = pt.SGD(emb, lr=1.0, clock_every=1)
    emb(torch.tensor([3])).sum().backward()
    opt.step()
    w = emb.worker()
    w.global_barrier()
    client.flush()
    table = pt.load_table(client.data_dir, "x")
    assert table.shape == (4, 2)
    torch.testing.assert_close(table[[1, 3]], emb.rows(torch.tensor([1, 3])))
    torch.testing.assert_close(table[3], got[0, 0] - 1.0)


def test_pacedb_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import pacedb\n"
            "try:\n    import pacedb.torch\nexcept ImportError:\n    print('no torch')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no torch"
