"""A paced shard server on this machine, for a job of several processes.

    import pacedb
    with pacedb.LocalServer(num_clients=2) as server:   # paced on 127.0.0.1:<free port>
        ...                                             # start the job's 2 processes; each:
        client = pacedb.Client(servers=server.address, token_file=server.token_file,
                               client_id=rank, num_clients=2)
    # here paced has stopped (SIGTERM: a clean shutdown) and its temporary files are gone

One Python process per worker is how a model of many small torch ops uses
more than one core: worker threads of one process share its interpreter (the
GIL), worker processes do not. The embedded shard lives in one process, so
processes meet at a paced.
"""
import ctypes
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading

__all__ = ["LocalServer", "find_paced", "die_with_parent"]


def find_paced(path=None):
    """The paced binary: `path` if given, else $PACE_BIN_DIR/paced, else the
    build tree's (build/bin/paced beside build/python/pacedb), else paced on
    PATH. FileNotFoundError if none is executable."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [path] if path else [
        os.path.join(os.environ["PACE_BIN_DIR"], "paced") if os.environ.get("PACE_BIN_DIR")
        else None,
        os.path.join(here, "..", "..", "bin", "paced"),
        shutil.which("paced"),
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return os.path.abspath(c)
    raise FileNotFoundError(
        f"paced not found{' at ' + path if path else ''}: build it (cmake --build build "
        "--target paced), install it (make install), or name it (PACE_BIN_DIR=DIR)")


def die_with_parent():
    """A preexec_fn for subprocess.Popen: the child gets SIGTERM when the
    thread that started it ends (its process killed with SIGKILL included),
    so that a job's processes never outlive the one that started them."""
    _libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_libc = ctypes.CDLL(None, use_errno=True)


class LocalServer:
    """A paced process on 127.0.0.1 (a free port), for a job of num_clients
    client processes, with a new job token; stop() (or the end of a `with`
    block) stops it with SIGTERM and removes its temporary files.

    data_dir: the shard's store (default: a temporary dir, removed at stop;
    a given one is kept). paced: the binary (default: find_paced()). args:
    more paced flags. paced runs in a session of its own, so a Ctrl-C in the
    terminal reaches the program, which stops it after its clients, and it is
    bound to the thread that creates the server: it gets SIGTERM if that
    thread's process dies, even by SIGKILL. Not thread-safe; stop() may be
    called more than once.

    Attributes: address ("127.0.0.1:PORT"), token_file, data_dir, log (the
    file holding paced's log lines), num_clients."""

    def __init__(self, num_clients=1, data_dir=None, paced=None, args=()):
        self.num_clients = int(num_clients)
        self.proc = None
        self._drainer = None
        self._tmp = tempfile.mkdtemp(prefix="pacedb-server-")
        try:
            self.data_dir = data_dir or os.path.join(self._tmp, "data")
            self.token_file = os.path.join(self._tmp, "token")
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(16) + "\n")
            self.log = os.path.join(self._tmp, "paced.log")
            self.address = self._start(find_paced(paced), list(args))
        except BaseException:
            self.stop()
            raise

    def _start(self, binary, args):
        cmd = [binary, "--listen=127.0.0.1:0", f"--data_dir={self.data_dir}",
               f"--num_clients={self.num_clients}", f"--token_file={self.token_file}", *args]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=log, text=True, preexec_fn=die_with_parent,
                                         start_new_session=True)
        printed = []
        for line in self.proc.stdout:
            printed.append(line)
            m = re.match(r"paced listening on (\S+:\d+)", line)
            if m:
                # Keep reading what it prints, so that it never blocks on a full pipe.
                self._drainer = threading.Thread(target=self._drain, daemon=True)
                self._drainer.start()
                return m.group(1)
        self.proc.wait()
        with open(self.log) as f:
            tail = f.read()[-2000:]
        raise RuntimeError(f"paced exited with status {self.proc.returncode} before listening: "
                           f"{' '.join(cmd)}\n{''.join(printed)}{tail}")

    def _drain(self):
        for _ in self.proc.stdout:
            pass

    def client(self, client_id=0, **kwargs):
        """A pacedb.Client of this server's job as client `client_id` (of
        num_clients); kwargs go to pacedb.Client."""
        import pacedb
        return pacedb.Client(servers=self.address, token_file=self.token_file,
                             client_id=client_id, num_clients=self.num_clients, **kwargs)

    def stop(self, timeout=30):
        """Stops paced (SIGTERM, then SIGKILL after `timeout` seconds) and
        removes the temporary files. Returns paced's exit status (None if it
        never started)."""
        status = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            status = self.proc.returncode
            if self._drainer is not None:
                self._drainer.join(timeout)
            self.proc.stdout.close()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        running = self.proc is not None and self.proc.poll() is None
        return (f"<pacedb.LocalServer {getattr(self, 'address', '?')}, {self.num_clients} "
                f"clients, {'running' if running else 'stopped'}>")
