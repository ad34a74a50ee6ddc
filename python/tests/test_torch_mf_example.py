"""python/examples/torch_mf.py and torch_bow.py, small: PaceDB and the plain-PyTorch
twin (worker threads, and worker processes against a paced the example starts);
the README example."""
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("torch")

LINE = re.compile(r"^(plain PyTorch|PaceDB .*): test RMSE ([0-9.]+), ([0-9,]+) ratings/s", re.M)


SMALL = ["--users=300", "--items=200", "--ratings=30000", "--epochs=4", "--batch=256"]


def run(examples_dir, *args, env=None):
    r = subprocess.run([sys.executable, os.path.join(examples_dir, "torch_mf.py"), *SMALL, *args],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    found = LINE.findall(r.stdout)
    assert [f[0].split(" ")[0] for f in found] == ["plain", "PaceDB"], r.stdout
    (_, plain_rmse, plain_rate), (_, pace_rmse, pace_rate) = found
    assert float(plain_rate.replace(",", "")) > 0 and float(pace_rate.replace(",", "")) > 0
    return float(plain_rmse), float(pace_rmse), r


@pytest.mark.parametrize("optimizer", ["adagrad", "sgd"])
def test_one_worker_matches_plain_pytorch(examples_dir, optimizer):
    plain, pace, r = run(examples_dir, f"--optimizer={optimizer}")
    # Same rows to start with, same batches, one worker: the same model.
    assert abs(plain - pace) <= 1e-3, r.stdout
    assert pace < 0.9, r.stdout  # learned (ratings' std is about 1.1 here)
    assert "W2" not in r.stderr and "E2" not in r.stderr, r.stderr  # closed cleanly


def test_ratings_files_with_large_ids(examples_dir, tmp_path):
    rng = np.random.default_rng(2)
    users = 10**12 + rng.integers(0, 100, 6000) * 7919  # raw ids: PaceDB rows as they are
    items = rng.integers(0, 50, 6000) * 10**9
    ratings = 3 + np.sin(users % 13) * np.cos(items % 11) + rng.normal(0, 0.3, 6000)
    lines = [f"{u} {i} {r:.3f}" for u, i, r in zip(users, items, ratings)]
    (tmp_path / "train.txt").write_text("\n".join(lines[600:]) + "\n")
    (tmp_path / "test.txt").write_text("\n".join(lines[:600]) + "\n")
    plain, pace, r = run(examples_dir, f"--train={tmp_path / 'train.txt'}",
                         f"--test={tmp_path / 'test.txt'}", "--l2=0.1")
    assert "5400 training and 600 test ratings, 100 users x 50 items" in r.stdout
    assert abs(plain - pace) <= 1e-3, r.stdout


def test_two_workers_learn_as_well(examples_dir):
    plain, pace, r = run(examples_dir, "--workers=2", "--clock_every=5")
    assert pace < plain + 0.05, r.stdout


def gone(pid):
    """The process has exited and been reaped (or is a zombie no one waits for)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


PIDS = re.compile(r"^# paced on \S+ \(pid (\d+)\), worker processes \(pids ([\d, ]+)\)", re.M)


def job_pids(stdout):
    """paced's pid and the worker processes' of each run of the output."""
    return [(int(m.group(1)), [int(p) for p in m.group(2).split(", ")])
            for m in PIDS.finditer(stdout)]


def test_worker_processes_learn_as_the_threads_do(examples_dir, tmp_path):
    """--processes: a paced on a free port, one worker per process, each its
    users' ratings; the job ends near the RMSE of worker threads, and paced,
    the workers and the temporary files are gone afterwards."""
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the run's temporary files land here
    plain, threads, r = run(examples_dir, "--workers=2", "--clock_every=5")
    plain_p, procs, r = run(examples_dir, "--processes=2", "--clock_every=5", env=env)
    assert plain_p == plain  # the same initial rows, from paced's tables
    assert abs(procs - threads) <= 0.02, r.stdout
    assert procs < plain + 0.02, r.stdout
    assert "PaceDB (2 processes x 1 worker, essp s=1" in r.stdout
    (paced, workers), = job_pids(r.stdout)
    assert len(workers) == 2 and all(gone(p) for p in [paced] + workers), r.stdout
    assert os.listdir(tmp_path) == [], "temporary files left"
    assert "E2" not in r.stderr and "W2" not in r.stderr, r.stderr  # stopped in order


def test_one_worker_process_matches_plain_pytorch(examples_dir):
    # One process trains every batch in order: the same model as the twin.
    plain, pace, r = run(examples_dir, "--processes=1")
    assert abs(plain - pace) <= 1e-3, r.stdout


def test_stopping_a_run_of_worker_processes_stops_them_and_paced(examples_dir, tmp_path):
    """SIGTERM (as Ctrl-C) in the middle of training: the run stops its worker
    processes and paced and removes its temporary files."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, os.path.join(examples_dir, "torch_mf.py"), *SMALL,
                             "--processes=2", "--epochs=100000", "--no_plain", "--progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out = []
        for line in proc.stdout:
            out.append(line)
            if line.startswith("# clock 2"):
                break
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    (paced, workers), = job_pids("".join(out))
    deadline = time.monotonic() + 10
    while not all(gone(p) for p in [paced] + workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(gone(p) for p in [paced] + workers)
    assert os.listdir(tmp_path) == [], "temporary files left"


def test_readme_example_runs(tmp_path):
    """The complete example of python/README.md's pacedb.torch section."""
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "README.md")
    text = open(readme).read()
    section = text[text.index("## PyTorch"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")].replace("/tmp/pace-torch", str(tmp_path / "pace"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "tensor(" in r.stdout


BOW = re.compile(r"^(plain PyTorch|PaceDB .*): test accuracy ([0-9.]+), ([0-9,]+) documents/s",
                 re.M)


@pytest.mark.parametrize("extra", [["--mode=mean"], ["--mode=sum", "--workers=2"]])
def test_bag_of_words_example(examples_dir, extra):
    r = subprocess.run([sys.executable, os.path.join(examples_dir, "torch_bow.py"), "--vocab=2000",
                        "--docs=4000", "--epochs=2", "--topic_words=50", "--signal=0.3",
                        "--clock_every=10", *extra],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    (_, plain, _), (_, pace, _) = BOW.findall(r.stdout)
    assert float(plain) > 0.5 and float(pace) > 0.5, r.stdout  # 8 classes: chance is 0.125
    if "--workers=2" not in extra:
        assert abs(float(plain) - float(pace)) <= 0.005, r.stdout  # one worker: the same model
    assert "E2" not in r.stderr, r.stderr


def test_insteval_when_downloaded(examples_dir):
    """torch_mf.py on real ratings: PACE_DATASETS=DIR, the output folder of
    ../shared/data/get-datasets.sh (skipped without it; the data are never
    committed)."""
    data = os.path.join(os.environ.get("PACE_DATASETS", "/nonexistent"), "insteval")
    if not os.path.isfile(os.path.join(data, "train.txt")):
        pytest.skip("PACE_DATASETS (the output of get-datasets.sh) has no insteval/")
    r = subprocess.run([sys.executable, os.path.join(examples_dir, "torch_mf.py"),
                        f"--train={data}/train.txt", f"--test={data}/test.txt", "--epochs=3",
                        "--batch=256", "--rank=4", "--lr=0.05", "--l2=0.2"],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "66079 training and 7342 test ratings, 2972 users x 1128 items" in r.stdout
    (_, plain, _), (_, pace, _) = LINE.findall(r.stdout)
    assert abs(float(plain) - float(pace)) <= 1e-3, r.stdout  # one worker: the same model
    assert float(pace) < 1.3, r.stdout  # ratings 1-5 with standard deviation 1.3
