"""Fixtures of the pacedb tests: binaries of the build (PACE_BIN_DIR, set by
ctest) and a paced server on a dynamic port."""
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("PACE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BIN_DIR = os.environ.get("PACE_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
if os.path.isdir(os.path.join(SOURCE_DIR, "build", "python")):
    sys.path.append(os.path.join(SOURCE_DIR, "build", "python"))


def binary(name):
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: build it first (cmake --build build)")
    return path


class Paced:
    """A paced process listening on 127.0.0.1:<dynamic port>."""

    def __init__(self, data_dir, num_clients=1, token_file=None):
        args = [binary("paced"), "--listen=127.0.0.1:0", f"--data_dir={data_dir}",
                f"--num_clients={num_clients}"]
        # Tests not about authentication run without a token.
        args.append(f"--token_file={token_file}" if token_file else "--insecure")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.output = []
        for line in self.proc.stdout:
            self.output.append(line)
            m = re.match(r"paced listening on (\S+):(\d+)", line)
            if m:
                self.address = f"{m.group(1)}:{m.group(2)}"
                break
        else:
            raise RuntimeError("paced exited before listening:\n" + "".join(self.output))
        # Keep draining its output so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def paced(tmp_path):
    servers = []

    def start(**kwargs):
        s = Paced(str(tmp_path / f"shard{len(servers)}"), **kwargs)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def client(tmp_path):
    import pacedb
    return pacedb.Client(data_dir=str(tmp_path / "pace-data"))


@pytest.fixture
def examples_dir():
    return os.path.join(SOURCE_DIR, "python", "examples")


@pytest.fixture
def pace_binary():
    return binary


@pytest.fixture
def cleanup_dirs():
    dirs = []
    yield dirs
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
