"""Reading a store offline (open_store) and a client against a paced server."""
import os
import subprocess

import numpy as np
import pytest

import pacedb


def test_to_numpy_equals_pacectl_npy_export(tmp_path, pace_binary):
    data_dir = str(tmp_path / "store")
    c = pacedb.Client(data_dir=data_dir)
    dense = c.create_table("emb", 6, dtype=np.float32, init=("uniform", -1.0, 1.0, 5))
    ints = c.create_table("cnt", 3, dtype=np.int64)
    c.create_table("sp", 0, kind="sparse")
    w = c.worker()
    rows = np.array([0, 3, 10, 11])
    w.inc_many(dense, rows, np.arange(24, dtype=np.float32).reshape(4, 6))
    w.inc_many(ints, [2, 5], np.array([[1, 2, 3], [4, 5, 6]], np.int64))
    w.clock()
    w.global_barrier()
    c.flush()
    expect = w.get_many(dense, np.arange(12))

    store = pacedb.open_store(data_dir)  # read-only, while the client still has it open
    assert sorted(store.tables()) == ["cnt", "emb", "sp"]
    arr = store.table("emb").to_numpy()
    assert arr.dtype == np.float32 and arr.shape == (12, 6)
    np.testing.assert_array_equal(arr, expect)  # unwritten rows hold their initial values
    np.testing.assert_array_equal(store.table("cnt").to_numpy(),
                                  [[0, 0, 0], [0, 0, 0], [1, 2, 3], [0, 0, 0], [0, 0, 0],
                                   [4, 5, 6]])
    npy = tmp_path / "emb.npy"
    subprocess.run([pace_binary("pacectl"), "export", "emb", f"--data_dir={data_dir}",
                    "--format=npy", f"--out={npy}"], check=True, capture_output=True)
    np.testing.assert_array_equal(np.load(npy), arr)
    with pytest.raises(pacedb.InvalidArgumentError, match="sparse"):
        store.table("sp").to_numpy()
    with pytest.raises(pacedb.InvalidArgumentError, match="max_rows"):
        store.table("emb").to_numpy(max_rows=5)
    with pytest.raises(pacedb.NotFoundError):
        store.table("nope")
    with pytest.raises(pacedb.Error):
        pacedb.open_store(str(tmp_path / "no-such-dir"))


def test_remote_client_against_paced(tmp_path, paced):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    server = paced(token_file=str(token))
    c = pacedb.Client(servers=server.address, token_file=str(token), data_dir="unused")
    assert not c.embedded and c.num_shards == 1 and c.client_id == 0
    t = c.create_table("remote", 8, dtype=np.float64, consistency="ssp", staleness=0)
    workers = [c.worker(), c.worker()]
    for clock in range(3):
        for i, w in enumerate(workers):
            w.inc_many(t, np.arange(4), np.full((4, 8), i + 1, np.float64))
            w.clock()
    got = workers[0].get_many(t, np.arange(5))
    np.testing.assert_array_equal(got[:4], np.full((4, 8), 9.0))
    np.testing.assert_array_equal(got[4], np.zeros(8))
    c.global_barrier()
    c.flush()
    assert c.stats()["bytes_sent"] > 0
    # A second client process of the job (a new Client) reads the server's values.
    c2 = pacedb.Client(servers=[server.address], token_file=str(token))
    np.testing.assert_array_equal(c2.worker().get(c2.table("remote"), 2), np.full(8, 9.0))
    bad = tmp_path / "bad"
    bad.write_text("wrong")
    with pytest.raises(pacedb.PermissionDeniedError):
        pacedb.Client(servers=server.address, token_file=str(bad))


def test_local_server_serves_a_job_of_two_clients_and_cleans_up(pace_binary):
    with pacedb.LocalServer(num_clients=2, paced=pace_binary("paced")) as server:
        assert server.address.startswith("127.0.0.1:") and server.num_clients == 2
        assert os.stat(server.token_file).st_mode & 0o777 == 0o600
        clients = [server.client(i) for i in range(2)]
        assert [c.client_id for c in clients] == [0, 1] and clients[1].num_clients == 2
        tables = [c.create_table("t", 3, dtype=np.int64, consistency="ssp", staleness=0)
                  for c in clients]
        workers = [c.worker() for c in clients]
        for i, (t, w) in enumerate(zip(tables, workers)):
            w.inc(t, 4, np.full(3, i + 1, np.int64))
            w.clock()
        workers[0].global_barrier()
        np.testing.assert_array_equal(workers[0].get(tables[0], 4), [3, 3, 3])
        del workers, tables, clients  # closed before paced stops
        tmp, proc = server._tmp, server.proc
    assert proc.returncode == 0  # SIGTERM: a clean stop
    assert not os.path.exists(tmp)
    assert "stopped" in repr(server)
    with pytest.raises(FileNotFoundError, match="paced not found"):
        pacedb.LocalServer(paced="/nonexistent/paced")
    with pytest.raises(RuntimeError, match="before listening"):
        pacedb.LocalServer(paced=pace_binary("paced"), args=["--num_shards=0"])
