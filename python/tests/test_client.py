"""Round trips, the read rule and read-my-writes, no-copy reads and errors."""
import threading
import time

import numpy as np
import pytest

import pacedb

DTYPES = [np.float32, np.float64, np.int32, np.int64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_round_trip(client, dtype):
    t = client.create_table(f"d_{np.dtype(dtype).name}", 5, dtype=dtype, staleness=1)
    assert (t.width, t.dtype, t.kind, t.consistency, t.staleness) == (5, np.dtype(dtype),
                                                                      "dense", "essp", 1)
    w = client.worker()
    delta = np.arange(5).astype(dtype)
    w.inc(t, 3, delta)
    got = w.get(t, 3)  # read-my-writes before the clock
    assert got.dtype == np.dtype(dtype) and got.shape == (5,)
    np.testing.assert_array_equal(got, delta)
    w.inc_many(t, np.array([1, 3, 1]), np.ones((3, 5), dtype))  # duplicates add up
    w.clock()
    many = w.get_many(t, [1, 3, 9])
    assert many.dtype == np.dtype(dtype) and many.shape == (3, 5)
    np.testing.assert_array_equal(many, np.stack([np.full(5, 2), delta + 1, np.zeros(5)]))
    w.clock()
    w.global_barrier()
    client.flush()
    # A new handle and worker see the same values.
    t2 = client.table(t.name)
    np.testing.assert_array_equal(client.worker().get(t2, 3), delta + 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inc_diff_adds_current_minus_base(client, dtype):
    t = client.create_table(f"diff_{np.dtype(dtype).name}", 4, dtype=dtype)
    w = client.worker()
    rows = np.array([2, 7, 2])
    base = np.arange(12).reshape(3, 4).astype(dtype)
    current = (base * 3 + 1).astype(dtype)
    w.inc_diff(t, rows, current, base)
    got = w.get_many(t, [2, 7])
    np.testing.assert_array_equal(got[0], (current[0] - base[0]) + (current[2] - base[2]))
    np.testing.assert_array_equal(got[1], current[1] - base[1])
    with pytest.raises(pacedb.InvalidArgumentError, match="base must have shape"):
        w.inc_diff(t, rows, current, base[:2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_sparse_round_trip(client, dtype):
    t = client.create_table(f"s_{np.dtype(dtype).name}", 0, dtype=dtype, kind="sparse")
    w = client.worker()
    w.inc(t, 7, {4: 2, 1000000: 5})
    w.inc(t, 7, (np.array([4, 9], np.uint32), np.array([1, 3], dtype)))
    w.clock()
    cols, vals = w.get(t, 7)
    assert cols.dtype == np.uint32 and vals.dtype == np.dtype(dtype)
    assert cols.tolist() == [4, 9, 1000000] and vals.tolist() == [3, 3, 5]
    cols, vals = w.get(t, 8)
    assert len(cols) == 0 and len(vals) == 0


def test_initializers_and_listing(client):
    u = client.create_table("u", 8, init=("uniform", -0.5, 0.5, 7))
    n = client.create_table("n", 8, dtype=np.float64, consistency="ssp", staleness=2,
                            init=("normal", 1.0, 0.1, 3))
    b = client.create_table("b", 2, dtype=np.int64, consistency="bsp")
    w = client.worker()
    row = w.get(u, 11)
    assert np.all(row >= -0.5) and np.all(row < 0.5) and np.unique(row).size == 8
    np.testing.assert_array_equal(w.get_many(u, [11])[0], row)
    assert abs(float(np.mean(w.get_many(n, np.arange(50))) - 1.0)) < 0.05
    assert b.staleness == 0 and b.consistency == "bsp"
    assert sorted(s["name"] for s in client.tables()) == ["b", "n", "u"]
    assert client.create_table("u", 8, init=("uniform", -0.5, 0.5, 7)).id == u.id  # idempotent


def test_vap_table_has_a_value_bound(client):
    with pytest.raises(pacedb.InvalidArgumentError, match="value bound"):
        client.create_table("v0", 4, consistency="vap")
    v = client.create_table("v", 4, consistency="vap", value_bound=0.5)
    assert v.consistency == "vap"
    assert [s["value_bound"] for s in client.tables() if s["name"] == "v"] == [0.5]
    w = client.worker()
    for _ in range(3):  # over the bound each clock: Clock waits for the acks
        w.inc(v, 1, np.ones(4, np.float32))
        w.clock()
    client.flush()
    np.testing.assert_array_equal(w.get(v, 1), np.full(4, 3, np.float32))


def test_read_my_writes_from_two_threads(client):
    t = client.create_table("rmw", 4, dtype=np.int64, consistency="ssp", staleness=3)
    first_done = threading.Event()
    seen = {}

    def writer():
        w = client.worker()
        w.inc(t, 1, np.full(4, 5, np.int64))
        seen["own"] = w.get(t, 1).tolist()
        first_done.set()

    def reader():
        w = client.worker()
        first_done.wait()
        # The other thread's update of this process is in, though nobody clocked.
        seen["other"] = w.get(t, 1).tolist()
        w.inc(t, 1, np.ones(4, np.int64))
        seen["both"] = w.get(t, 1).tolist()

    threads = [threading.Thread(target=f) for f in (writer, reader)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen == {"own": [5] * 4, "other": [5] * 4, "both": [6] * 4}


@pytest.mark.parametrize("consistency", ["ssp", "essp"])
def test_read_rule_blocks_a_worker_too_far_ahead(client, consistency):
    """A worker at clock c may read only values of version >= c - s: with s = 1,
    the worker that reached clock 2 waits (GIL released) until the other ends clock 0."""
    s = 1
    t = client.create_table(f"rr_{consistency}", 2, dtype=np.int64, consistency=consistency,
                            staleness=s)
    ready, at_get, go = threading.Event(), threading.Event(), threading.Event()
    slow_clocked = threading.Event()
    result = {}

    def fast():
        w = client.worker()
        ready.wait()
        for _ in range(s + 1):
            w.inc(t, 0, np.ones(2, np.int64))
            w.clock()
        at_get.set()
        value = w.get(t, 5)  # needs version >= 1: the slow worker's clock 0
        result["slow_had_clocked"] = slow_clocked.is_set()
        result["value"] = value.tolist()
        result["clock"] = w.current_clock

    def slow():
        w = client.worker()
        ready.set()
        go.wait()
        slow_clocked.set()
        w.clock()
        w.clock()

    threads = [threading.Thread(target=slow), threading.Thread(target=fast)]
    for th in threads:
        th.start()
    at_get.wait()
    time.sleep(0.3)  # gives a broken read rule the chance to return early
    assert "clock" not in result  # the fast worker still waits, and this thread runs
    go.set()
    for th in threads:
        th.join()
    assert result == {"slow_had_clocked": True, "value": [0, 0], "clock": s + 1}
    hist = client.stats()["tables"][t.name]["staleness_hist"]
    assert len(hist) == s + 2 and hist[-1] == 0  # no read staler than s


def test_evict_first_keeps_hot_rows_of_a_stream(tmp_path):
    """A stream of rows read once each, evict_first after each block, and hot
    rows read every eighth block: the hint keeps the hot rows cached (the
    control run without it fetches them again); streamed rows stay readable,
    with this worker's own deltas."""
    def misses(c):
        # A Read, or the initializer made again by the client (the table is
        # this process's and none of its rows was written).
        s = c.stats()["tables"]["s"]
        return s["rows_fetched"] + s["rows_initialized"]

    def hot_fetches(hint, name):
        c = pacedb.Client(data_dir=str(tmp_path / name), memory_mb=4)
        t = c.create_table("s", 1024, dtype=np.float32, staleness=1)
        w = c.worker()
        hot = np.arange(10**6, 10**6 + 256, dtype=np.uint64)
        w.get_many(t, hot)
        fetched = 0
        for b in range(96):
            block = np.arange(b * 64, (b + 1) * 64, dtype=np.uint64)
            w.get_many(t, block)
            if hint:
                w.evict_first(t, block)
            before = misses(c)
            w.get_many(t, hot[(b % 8) * 32:(b % 8 + 1) * 32])
            fetched += misses(c) - before
        w.inc(t, 5, np.full(1024, 2, np.float32))
        w.evict_first(t, [5, 10**9])  # cached and never-read rows
        np.testing.assert_array_equal(w.get(t, 5), np.full(1024, 2, np.float32))
        return fetched, c, w

    (with_hint, c, w), (without, c2, _) = hot_fetches(True, "a"), hot_fetches(False, "b")
    assert with_hint * 4 < without, (with_hint, without)
    with pytest.raises(pacedb.InvalidArgumentError, match="another client"):
        w.evict_first(c2.table("s"), [1])


def test_get_many_into_preallocated_array_is_not_a_copy(client):
    t = client.create_table("nocopy", 16, dtype=np.float32)
    w = client.worker()
    rows = np.arange(100, dtype=np.uint64)
    w.inc_many(t, rows, np.tile(np.arange(100, dtype=np.float32)[:, None], (1, 16)))
    buf = np.full((200, 16), -1, np.float32)
    out = buf[50:150]  # a C-contiguous view
    res = w.get_many(t, rows, out=out)
    assert res is out and np.shares_memory(res, buf)
    assert res.__array_interface__["data"][0] == buf[50:].__array_interface__["data"][0]
    np.testing.assert_array_equal(buf[50:150, 3], np.arange(100))
    assert np.all(buf[:50] == -1) and np.all(buf[150:] == -1)
    row = np.empty(16, np.float32)
    assert w.get(t, 7, out=row) is row and row[0] == 7
    with pytest.raises(pacedb.InvalidArgumentError, match="dtype"):
        w.get_many(t, rows, out=np.empty((100, 16), np.float64))
    with pytest.raises(pacedb.InvalidArgumentError, match="shape"):
        w.get_many(t, rows, out=np.empty((99, 16), np.float32))
    with pytest.raises(pacedb.InvalidArgumentError, match="contiguous"):
        w.get_many(t, rows, out=np.empty((100, 32), np.float32)[:, ::2])


def test_errors_are_exceptions(client, tmp_path):
    t = client.create_table("e", 4, dtype=np.int32)
    w = client.worker()
    with pytest.raises(pacedb.NotFoundError, match="nope") as e:
        client.table("nope")
    assert isinstance(e.value, pacedb.Error) and e.value.code == 2
    assert e.value.code_name == "NotFound" and pacedb.ERRORS_BY_CODE[2] is pacedb.NotFoundError
    with pytest.raises(pacedb.InvalidArgumentError, match="width 4"):
        w.inc(t, 0, np.ones(3, np.int32))
    with pytest.raises(pacedb.InvalidArgumentError, match=r"shape \(2, 4\)"):
        w.inc_many(t, [0, 1], np.ones((2, 5), np.int32))
    with pytest.raises(pacedb.InvalidArgumentError, match="dtype"):
        w.inc(t, 0, np.ones(4, np.float32))  # a float delta into an integer table
    with pytest.raises(pacedb.InvalidArgumentError, match="not supported"):
        client.create_table("bad", 4, dtype=np.uint8)
    with pytest.raises(pacedb.InvalidArgumentError):
        client.create_table("bad", 4, dtype="no such dtype")
    with pytest.raises(pacedb.InvalidArgumentError):
        client.create_table("bad", 4, kind="ragged")
    with pytest.raises(pacedb.InvalidArgumentError):
        client.create_table("bad", 4, init=("uniform", 0.0, 1.0))
    with pytest.raises(pacedb.AlreadyExistsError):
        client.create_table("e", 5, dtype=np.int32)
    with pytest.raises(pacedb.InvalidArgumentError, match=">= 0"):
        w.get_many(t, np.array([1, -2]))
    with pytest.raises(pacedb.InvalidArgumentError, match="integers"):
        w.get_many(t, np.array([1.5]))
    with pytest.raises(pacedb.InvalidArgumentError, match="sparse"):
        w.get_many(client.create_table("sp", 0, kind="sparse"), [1])
    with pytest.raises(pacedb.InvalidArgumentError, match="servers"):
        pacedb.Client(servers="no-port-here", data_dir=str(tmp_path / "x"))
    with pytest.raises(pacedb.NotFoundError, match="token_file"):
        pacedb.Client(servers="127.0.0.1:1", token_file=str(tmp_path / "missing"))
    other = pacedb.Client(data_dir=str(tmp_path / "other"))
    with pytest.raises(pacedb.InvalidArgumentError, match="another client"):
        other.worker().get(t, 0)


def test_one_worker_is_one_threads(client):
    t = client.create_table("busy", 2, consistency="bsp")
    w = client.worker()
    peer = client.worker()  # holds the process clock at 0
    w.clock()
    entering = threading.Event()

    def blocked_get():
        entering.set()
        w.get(t, 0)  # waits for the peer's clock 0

    th = threading.Thread(target=blocked_get)
    th.start()
    entering.wait()
    time.sleep(0.2)
    # Ends the wait even if this thread's get below were (wrongly) let in.
    threading.Timer(3.0, peer.clock).start()
    with pytest.raises(pacedb.FailedPreconditionError, match="another thread"):
        w.get(t, 0)
    th.join()


def test_stats_and_barrier(client):
    t = client.create_table("st", 3)
    w = client.worker()
    errors = []

    def no_worker():
        try:
            client.global_barrier()
        except pacedb.FailedPreconditionError as e:
            errors.append(str(e))

    th = threading.Thread(target=no_worker)
    th.start()
    th.join()
    assert errors and "no worker" in errors[0]
    for c in range(3):
        w.get_many(t, np.arange(10))
        w.inc_many(t, np.arange(10), np.ones((10, 3), np.float32))
        w.clock()
    client.global_barrier()
    s = client.stats()
    ts = s["tables"]["st"]
    assert ts["reads"] == 30 and ts["incs"] == 30 and sum(ts["staleness_hist"]) == 30
    assert s["memory"]["cache_budget_bytes"] == 1024 << 20 and s["memory"]["cache_bytes"] > 0
    assert s["batches_sent"] >= 3 and s["get_blocked_seconds"] >= 0
    client.reset_stats()
    assert client.stats()["tables"]["st"]["reads"] == 0
    assert client.embedded and client.num_shards == 1 and client.client_id == 0


def test_memory_mb_is_the_cache_budget(tmp_path):
    c = pacedb.Client(data_dir=str(tmp_path / "m"), memory_mb=64)
    assert c.stats()["memory"]["cache_budget_bytes"] == 64 << 20
    with pytest.raises(pacedb.InvalidArgumentError):
        pacedb.Client(data_dir=str(tmp_path / "m2"), memory_mb=0)
