"""Jobs of pacedb.torch: the job record (Client.start_job), a run killed with
SIGKILL and resumed, export and torch.save of tables."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pt = pytest.importorskip("pacedb.torch")

import pacedb  # noqa: E402

# Two worker threads train an Embedding with Adagrad and count, in an int64
# table, how often each id was seen and the sum of the batch numbers that saw
# it: the counts of a run killed and resumed must equal an uninterrupted
# run's exactly (no batch lost, none applied twice).
COUNTING = textwrap.dedent("""
    import json, sys, time, numpy as np, torch, pacedb, pacedb.torch as pt
    data_dir, resume, pause = sys.argv[1], sys.argv[2] == "resume", float(sys.argv[3])
    rng = np.random.default_rng(0)
    batches = rng.integers(0, 40, (120, 16))
    client = pacedb.Client(data_dir=data_dir)
    try:
        client.start_job("counting", "c", {"clock_every": 3, "lr": 0.1, "workers": 2},
                         [batches], "generated", resume=resume)
    except pacedb.FailedPreconditionError as e:
        sys.exit(str(e))
    emb = pt.Embedding(client, "c.emb", 4, seed=3)
    counts = client.create_table("c.count", 2, dtype=np.int64)
    opt = pt.Adagrad(emb, lr=0.1, clock_every=3)
    parts = pt.split_batches(len(batches), 2, 1)

    def train(rank, worker):
        for step, [b] in enumerate(parts[rank]):
            if step < opt.start_step:
                continue
            ids = batches[b]
            (emb(torch.from_numpy(ids)) - 1.0).pow(2).sum().backward()
            worker.inc_sum(counts, ids, np.stack([np.ones_like(ids), np.full_like(ids, b)], 1))
            opt.step()
            if rank == 0 and opt.steps_since_clock == 0:
                print("clock", worker.current_clock, flush=True)
                time.sleep(pause)
        opt.finish()
        return worker.current_clock

    start = client.start_clock
    clocks = pt.run_threads(client, train, 2)
    with client.worker() as w:
        w.global_barrier()
        print(json.dumps({"start_clock": start, "clocks": clocks,
                          "counts": w.get_many(counts, np.arange(40)).tolist()}))
""")


def run_script(args, kill_at=None, timeout=120):
    """Runs args; with kill_at, SIGKILLs it once it printed the line kill_at.
    Returns (returncode, stdout lines, stderr)."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        if kill_at is not None:
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if line.rstrip("\n") == kill_at:
                    proc.send_signal(signal.SIGKILL)
                    break
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, lines + out.splitlines(), err


def test_a_killed_job_resumes_to_the_counts_of_an_uninterrupted_run(tmp_path):
    def counting(name, mode, pause=0.0, kill_at=None):
        return run_script([sys.executable, "-c", COUNTING, str(tmp_path / name), mode,
                           str(pause)], kill_at)

    rc, whole, err = counting("whole", "fresh")
    assert rc == 0, err
    whole = json.loads(whole[-1])
    assert (whole["start_clock"], whole["clocks"]) == (0, [20, 20])  # 60 batches, 3 a clock

    rc, killed, _ = counting("split", "fresh", pause=0.1, kill_at="clock 5")
    assert rc == -signal.SIGKILL, killed
    rc, again, err = counting("split", "fresh")
    assert rc == 1 and len(err.strip().splitlines()) == 1, err
    assert "holds the counting job 'c' at clock" in err and "pass --resume" in err, err
    rc, resumed, err = counting("split", "resume")
    assert rc == 0, err
    resumed = json.loads(resumed[-1])
    assert 1 <= resumed["start_clock"] < 20 and resumed["clocks"] == [20, 20], resumed
    assert resumed["counts"] == whole["counts"]  # exact: nothing lost, nothing applied twice
    assert sum(c[0] for c in whole["counts"]) == 120 * 16


def test_start_job_refuses_other_flags_inputs_and_fresh_runs(tmp_path):
    data = np.arange(10)
    d = str(tmp_path / "d")
    c = pacedb.Client(data_dir=d)
    with pytest.raises(pacedb.FailedPreconditionError, match="no job to resume"):
        c.start_job("app", "p", {"lr": 0.1}, [data], resume=True)
    assert c.tables() == []  # a refused run creates nothing
    assert c.start_job("app", "p", {"lr": 0.1, "ok": True}, [data]) == 0
    t = c.create_table("p.w", 2)
    with c.worker() as w:
        w.inc(t, 0, np.ones(2, np.float32))
        w.clock()
    del w, t, c
    c = pacedb.Client(data_dir=d)
    assert c.start_clock == 1
    with pytest.raises(pacedb.FailedPreconditionError, match="pass --resume to continue it"):
        c.start_job("app", "p", {"lr": 0.1, "ok": True}, [data])
    with pytest.raises(pacedb.FailedPreconditionError,
                       match=r"it has --lr=0\.1, this run --lr=0\.2"):
        c.start_job("app", "p", {"lr": 0.2, "ok": True}, [data], resume=True)
    with pytest.raises(pacedb.FailedPreconditionError, match="input data differ"):
        c.start_job("app", "p", {"lr": 0.1, "ok": True}, [data + 1], resume=True)
    with pytest.raises(pacedb.FailedPreconditionError, match="it is a app job, not a other one"):
        c.start_job("other", "p", {"lr": 0.1, "ok": True}, [data], resume=True)
    assert c.start_job("app", "p", {"lr": 0.1, "ok": True}, [data], resume=True) == 1
    assert pacedb.input_fingerprint([data]) != pacedb.input_fingerprint([data.astype(np.int32)])


def mf(examples_dir, tmp_path, *extra, kill_at=None):
    return run_script([sys.executable, os.path.join(examples_dir, "torch_mf.py"), "--users=200",
                       "--items=100", "--ratings=12000", "--epochs=3", "--batch=128",
                       "--clock_every=5", "--no_plain", *extra], kill_at, timeout=240)


def test_torch_mf_killed_and_resumed_ends_with_the_uninterrupted_rows(examples_dir, tmp_path):
    rc, out, err = mf(examples_dir, tmp_path, f"--data_dir={tmp_path / 'whole'}",
                      f"--save={tmp_path / 'whole.pt'}")
    assert rc == 0, err
    job = f"--data_dir={tmp_path / 'split'}"
    rc, out, err = mf(examples_dir, tmp_path, job, "--progress", kill_at="# clock 5")
    assert rc == -signal.SIGKILL, out
    rc, out, err = mf(examples_dir, tmp_path, job, "--lr=0.3", "--resume")
    assert rc == 1 and err.strip().splitlines() == [
        "torch_mf.py: --resume: the data dir holds the torch_mf.py job 'mf' at clock "
        f"{err.split('at clock ')[1].split()[0]} and it has --lr=0.2, this run --lr=0.3: rerun "
        "with the job's flags and data, or start a new job with another --data_dir (or delete "
        "this one)"], err
    rc, out, err = mf(examples_dir, tmp_path, job, "--resume", f"--save={tmp_path / 'split.pt'}")
    assert rc == 0, err
    assert any(line.startswith("# resuming at clock ") for line in out), out
    whole, split = torch.load(tmp_path / "whole.pt"), torch.load(tmp_path / "split.pt")
    assert sorted(whole) == ["mf.item", "mf.item.adagrad", "mf.user", "mf.user.adagrad"]
    for name in whole:
        assert torch.equal(whole[name]["ids"], split[name]["ids"])
        # One worker: the same steps; the sums may round differently.
        torch.testing.assert_close(split[name]["rows"], whole[name]["rows"], rtol=1e-4,
                                   atol=1e-5)
    rc, out, err = mf(examples_dir, tmp_path, job, "--resume")
    assert rc == 0 and any("nothing to train" in line for line in out), out


def test_export_table_and_save(client, tmp_path):
    emb = pt.Embedding(client, "e", 3, seed=2)
    opt = pt.Adam(emb, lr=0.1, clock_every=1)
    ids = torch.tensor([5, 2**40, 7])
    emb(ids).sum().backward()
    opt.step()
    got_ids, rows = pt.export_table(client, "e")  # every stored row (embedded)
    assert got_ids.dtype == np.int64 and got_ids.tolist() == [5, 7, 2**40]
    np.testing.assert_array_equal(rows, emb.rows(torch.from_numpy(got_ids)).numpy())
    some_ids, some = pt.export_table(client, "e", [7])
    assert some.shape == (1, 3) and some_ids.tolist() == [7]
    t_ids, t_rows = emb.export()
    assert t_ids.tolist() == [5, 7, 2**40] and torch.equal(t_rows, torch.from_numpy(rows))
    saved = pt.save(str(tmp_path / "m.pt"), [opt])
    loaded = torch.load(tmp_path / "m.pt")
    assert sorted(loaded) == ["e", "e.adam"] and loaded["e.adam"]["rows"].shape == (3, 6)
    torch.testing.assert_close(loaded["e"]["rows"], saved["e"]["rows"])
    torch.testing.assert_close(loaded["e"]["rows"], torch.from_numpy(rows))
    store_ids = pacedb.open_store(client.data_dir).table("e").row_ids()
    assert store_ids.dtype == np.uint64 and store_ids.tolist() == [5, 7, 2**40]


WAITING = textwrap.dedent("""
    import logging, sys, torch, pacedb, pacedb.torch as pt
    logging.basicConfig(format="%(message)s")
    pt.wait_warning_seconds = 0.3
    client = pacedb.Client(servers=sys.argv[1], data_dir=sys.argv[2], client_id=0, num_clients=2)
    emb = pt.Embedding(client, "w", 2, consistency="ssp", staleness=0)
    opt = pt.SGD(emb, lr=0.1, clock_every=1)
    for _ in range(3):  # the read of clock 1 waits for client 1, which never comes
        emb(torch.tensor([1])).sum().backward()
        opt.step()
""")


def test_a_worker_waiting_for_another_process_names_it(tmp_path, paced):
    server = paced(num_clients=2)
    proc = subprocess.Popen([sys.executable, "-c", WAITING, server.address, str(tmp_path / "c")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if "has waited" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    assert "has waited" in lines[-1], lines
    assert "in a read of table 'w'" in lines[-1]
    assert "held back by client 1 (not connected) at clock 0" in lines[-1], lines[-1]
