"""get_unique / inc_sum (de-duplication in C++), Worker as a context manager,
the log level through the API and __version__."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pacedb


def test_get_unique_dedups_and_inverts(client):
    t = client.create_table("e", 3, init=("uniform", -1.0, 1.0, 5))
    w = client.worker()
    ids = np.array([[7, 2**40, 7], [3, 2**40, 7]])
    unique, inverse, rows = w.get_unique(t, ids)
    assert unique.tolist() == [7, 2**40, 3]  # first-occurrence order
    assert inverse.dtype == np.int64 and inverse.shape == ids.shape
    np.testing.assert_array_equal(unique[inverse], ids)
    assert rows.shape == (3, 3) and rows.dtype == np.float32
    np.testing.assert_array_equal(rows, w.get_many(t, unique))
    # uint64 ids keep their dtype (ids >= 2**63 are row ids too).
    u, _, _ = w.get_unique(t, np.array([2**63 + 1, 2**63 + 1], np.uint64))
    assert u.dtype == np.uint64 and u.tolist() == [2**63 + 1]
    # Empty batches work; negative ids and floats are refused with a message.
    u, inv, r = w.get_unique(t, np.zeros((0,), np.int64))
    assert u.size == 0 and inv.size == 0 and r.shape == (0, 3)
    with pytest.raises(pacedb.InvalidArgumentError, match=r"row ids must be >= 0, got -4"):
        w.get_unique(t, [1, -4])
    with pytest.raises(pacedb.InvalidArgumentError, match="ids must be integers"):
        w.get_unique(t, np.array([1.5]))


def test_get_unique_gathers_the_rows_of_every_id(client):
    t = client.create_table("eg", 3, init=("uniform", -1.0, 1.0, 6))
    w = client.worker()
    ids = np.array([[7, 2**40, 7], [3, 2**40, 7]])
    unique, inverse, rows, gathered = w.get_unique(t, ids, gather=True)
    assert gathered.shape == ids.shape + (3,) and gathered.dtype == np.float32
    np.testing.assert_array_equal(gathered, rows[inverse])
    np.testing.assert_array_equal(gathered.reshape(-1, 3), w.get_many(t, ids.reshape(-1)))
    assert len(w.get_unique(t, ids)) == 3  # without gather: as before
    _, _, r, g = w.get_unique(t, np.zeros((0,), np.int64), gather=True)
    assert r.shape == (0, 3) and g.shape == (0, 3)


def test_sum_rows_sums_occurrences(client):
    grads = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    out = pacedb._pacedb._sum_rows(grads, np.array([1, 0, 1]), 3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[3, 4], [6, 8], [0, 0]])
    with pytest.raises(pacedb.InvalidArgumentError, match="outside"):
        pacedb._pacedb._sum_rows(grads, np.array([1, 0, 3]), 3)


def test_inc_sum_adds_up_duplicates(client):
    t = client.create_table("g", 2, dtype=np.float64)
    w = client.worker()
    w.inc_sum(t, [4, 9, 4, 4], np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float64),
              scale=-0.5)
    w.clock()
    np.testing.assert_allclose(w.get_many(t, [4, 9]), [[-6.5, -8.0], [-1.5, -2.0]])
    with pytest.raises(pacedb.InvalidArgumentError, match="deltas must hold"):
        w.inc_sum(t, [1, 2], np.ones((3, 2)))
    i = client.create_table("i", 1, dtype=np.int64)
    with pytest.raises(pacedb.InvalidArgumentError, match="scale must be 1"):
        w.inc_sum(i, [1], np.ones((1, 1), np.int64), scale=2.0)


def test_adagrad_update_sums_duplicates_then_steps(client):
    t = client.create_table("a", 2, dtype=np.float64, init=("uniform", -1.0, 1.0, 2))
    acc = client.create_table("a.acc", 2, dtype=np.float64)
    w = client.worker()
    w0 = w.get_many(t, [3, 8])
    w.inc_many(acc, [3, 8], np.array([[0.5, 1.0], [2.0, 0.0]]))
    grads = np.array([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0]])
    w.adagrad_update(t, acc, [3, 8, 3], grads, lr=0.1, eps=1e-3, initial_accumulator_value=0.25)
    g = np.array([[4.0, -1.0], [0.5, 0.5]])  # rows 3 and 8, duplicates summed
    a = np.array([[0.5, 1.0], [2.0, 0.0]]) + g * g
    np.testing.assert_allclose(w.get_many(acc, [3, 8]), a)
    np.testing.assert_allclose(w.get_many(t, [3, 8]), w0 - 0.1 * g / (np.sqrt(a + 0.25) + 1e-3))
    with pytest.raises(pacedb.InvalidArgumentError, match="dtype and width"):
        w.adagrad_update(t, client.create_table("b", 3, dtype=np.float64), [1], np.ones((1, 2)),
                         lr=0.1)


def test_adagrad_update_with_inverse_equals_the_repeated_ids(client):
    # A gathered read's step: distinct ids, a gradient row per occurrence.
    t = client.create_table("ai", 2, dtype=np.float64, init=("uniform", -1.0, 1.0, 3))
    u = client.create_table("au", 2, dtype=np.float64, init=("uniform", -1.0, 1.0, 3))
    ta, ua = (client.create_table(n, 2, dtype=np.float64) for n in ("ai.acc", "au.acc"))
    w = client.worker()
    grads = np.array([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0], [-1.0, 0.25]])
    t0, u0 = w.get_many(t, [3, 8, 5]), w.get_many(u, [3, 8, 5])  # initialized apart
    for _ in range(3):  # the accumulators grow: the same both ways
        w.adagrad_update(t, ta, [3, 8, 3, 5], grads, lr=0.1, eps=1e-3,
                         initial_accumulator_value=0.25)
        w.adagrad_update(u, ua, np.array([3, 8, 5]), grads, lr=0.1, eps=1e-3,
                         initial_accumulator_value=0.25, inverse=np.array([0, 1, 0, 2]))
    np.testing.assert_allclose(w.get_many(u, [3, 8, 5]) - u0, w.get_many(t, [3, 8, 5]) - t0)
    assert not np.allclose(w.get_many(t, [3, 8, 5]), t0)
    np.testing.assert_allclose(w.get_many(ua, [3, 8, 5]), w.get_many(ta, [3, 8, 5]))
    with pytest.raises(pacedb.InvalidArgumentError, match="outside"):
        w.adagrad_update(u, ua, [3], grads, lr=0.1, inverse=np.array([0, 1, 0, 0]))
    with pytest.raises(pacedb.InvalidArgumentError, match="grads must have shape"):
        w.adagrad_update(u, ua, [3], grads, lr=0.1, inverse=np.array([0, 0]))


def test_worker_context_manager_closes(client):
    t = client.create_table("c", 1, consistency="bsp")
    with client.worker() as w:
        assert not w.closed and w.client is not None
        w.inc(t, 0, np.ones(1, np.float32))
        w.clock()
    assert w.closed
    with pytest.raises(pacedb.FailedPreconditionError, match="closed"):
        w.clock()
    assert w.client is None  # a closed worker no longer holds its client
    w.close()  # idempotent
    # A closed worker no longer holds the process clock back: a new worker
    # under bsp reads clock 1 without waiting for it.
    w2 = client.worker()
    w2.clock()
    assert w2.get(t, 0).tolist() == [1.0]


def test_a_closed_worker_lets_its_client_close(tmp_path):
    data_dir = str(tmp_path / "d")
    c = pacedb.Client(data_dir=data_dir)
    t = c.create_table("t", 1)
    with c.worker() as w:
        w.inc(t, 0, np.ones(1, np.float32))
        w.clock()
    del c, t  # `w` lives on, closed: the store must close now, so it opens again
    c2 = pacedb.Client(data_dir=data_dir)
    assert c2.worker().get(c2.table("t"), 0).tolist() == [1.0]


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", pacedb.__version__)


LOGGING_SCRIPT = textwrap.dedent("""
    import sys
    {pre_import}
    import pacedb
    {set_level}
    c = pacedb.Client(data_dir=sys.argv[1]{client_args})
    c.create_table("t", 4)  # the embedded shard logs the new table at INFO
    print(pacedb.get_log_level())
""")


def run_logging(tmp_path, pre_import="", set_level="", client_args=""):
    script = LOGGING_SCRIPT.format(pre_import=pre_import, set_level=set_level,
                                   client_args=client_args)
    env = {k: v for k, v in os.environ.items() if k != "GLOG_minloglevel"}
    data_dir = tmp_path / f"d{len(list(tmp_path.iterdir()))}"  # a new store: the table is new
    r = subprocess.run([sys.executable, "-c", script, str(data_dir)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    info = [line for line in r.stderr.splitlines() if re.match(r"I\d{8} ", line)]
    return r.stdout.strip(), info


def test_log_level_default_is_quiet_and_settable(tmp_path):
    level, info = run_logging(tmp_path)
    assert level == "warning" and info == []
    level, info = run_logging(tmp_path, set_level='pacedb.set_log_level("info")')
    assert level == "info" and any("table t" in line for line in info), info
    level, info = run_logging(tmp_path, client_args=', log_level="INFO"')
    assert level == "info" and info
    with pytest.raises(pacedb.InvalidArgumentError, match="log level"):
        pacedb.set_log_level("verbose")
    with pytest.raises(pacedb.InvalidArgumentError, match="0..3"):
        pacedb.set_log_level(7)


def test_log_level_quiet_when_torch_is_imported_first(tmp_path):
    pytest.importorskip("torch")
    level, info = run_logging(tmp_path, pre_import="import torch")
    assert level == "warning" and info == []
    level, info = run_logging(tmp_path, pre_import="import torch",
                              set_level='pacedb.set_log_level("info")')
    assert info
