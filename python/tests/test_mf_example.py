"""python/examples/mf.py against pace_mf on the same generated data."""
import os
import re
import subprocess
import sys


def final_rmse(output):
    m = re.search(r"^# done: .*; test RMSE ([0-9.]+)", output, re.M)
    assert m, output
    return float(m.group(1))


def test_mf_example_reaches_pace_mf_rmse(tmp_path, pace_binary, examples_dir):
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    subprocess.run([pace_binary("pace_gen"), "ratings", "--users=400", "--items=200", "--rank=4",
                    "--ratings=30000", "--noise=0.5", "--seed=3", f"--out={train}",
                    f"--test_out={test}", "--test_fraction=0.1"], check=True,
                   capture_output=True)
    common = [f"--train={train}", f"--test={test}", "--clocks=25", "--rank=8", "--workers=2"]
    cpp = subprocess.run([pace_binary("pace_mf"), *common, f"--data_dir={tmp_path / 'cpp'}"],
                         check=True, capture_output=True, text=True).stdout
    csv = tmp_path / "py.csv"
    py = subprocess.run([sys.executable, os.path.join(examples_dir, "mf.py"), *common,
                         f"--data_dir={tmp_path / 'py'}", f"--csv={csv}"],
                        check=True, capture_output=True, text=True, env=os.environ).stdout
    # The same per-clock line as pace_mf: its header, then one line per clock.
    header = [line for line in cpp.splitlines() if line.startswith(" clock")]
    assert header and header[0] in py.splitlines()
    lines = [line for line in py.splitlines() if re.match(r"^\s+\d+\s", line)]
    assert [int(line.split()[0]) for line in lines] == list(range(25))
    assert csv.read_text().splitlines()[0] == ("clock,seconds,train_loss,test_rmse,"
                                               "staleness_mean,staleness_p99,blocked_pct")
    cpp_rmse, py_rmse = final_rmse(cpp), final_rmse(py)
    bias = float(re.search(r"bias baseline ([0-9.]+)\)", py).group(1))
    assert py_rmse < 0.9 * bias  # it learned the factors, not just the biases
    assert abs(py_rmse - cpp_rmse) <= 0.05 * cpp_rmse, (py_rmse, cpp_rmse)


def test_mf_example_usage_errors(tmp_path, examples_dir):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n1,x,3\n")
    r = subprocess.run([sys.executable, os.path.join(examples_dir, "mf.py"), f"--train={bad}",
                        f"--data_dir={tmp_path / 'd'}"], capture_output=True, text=True)
    assert r.returncode == 1 and f"{bad}:2:" in r.stderr
