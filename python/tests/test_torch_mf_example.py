"""python/examples/torch_mf.py and torch_bow.py, small: PaceDB and the plain-PyTorch
twin; the README example."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

LINE = re.compile(r"^(plain PyTorch|PaceDB .*): test RMSE ([0-9.]+), ([0-9,]+) ratings/s", re.M)


def run(examples_dir, *args):
    r = subprocess.run([sys.executable, os.path.join(examples_dir, "torch_mf.py"), "--users=300",
                        "--items=200", "--ratings=30000", "--epochs=4", "--batch=256", *args],
                       capture_output=True, text=True, timeout=240)
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
