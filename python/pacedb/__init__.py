"""PaceDB for Python: a parameter server built like an embedded database.

    import numpy as np, pacedb
    client = pacedb.Client(data_dir="/tmp/pace-demo")          # embedded
    w = client.create_table("w", 4, dtype=np.float32, consistency="essp", staleness=1)
    worker = client.worker()                                   # one per thread
    worker.inc(w, 7, np.ones(4, np.float32)); worker.clock()
    print(worker.get(w, 7))                                    # [1. 1. 1. 1.]

Errors are pacedb.Error subclasses named after the Status code
(pacedb.NotFoundError, pacedb.InvalidArgumentError, ...). Offline reading:
pacedb.open_store(data_dir).table(name).to_numpy(). Logging:
pacedb.set_log_level("info" | "warning" | "error" | "fatal"). A paced on this
machine for a job of several processes: pacedb.LocalServer. PyTorch modules
and optimizers over PaceDB tables: pacedb.torch. See python/README.md.
"""
import os as _os

# The embedded shard logs through glog; keep its INFO lines opt-in
# (GLOG_minloglevel=0), as the apps do. The variable is read when libglog
# loads, which is just below unless another extension (PyTorch) loaded it
# first: so the level is also set explicitly once the module is in.
_os.environ.setdefault("GLOG_minloglevel", "1")

from . import _pacedb  # noqa: E402
from ._pacedb import *  # noqa: E402,F401,F403
from ._pacedb import (  # noqa: E402,F401
    Client, Error, Store, StoreTable, Table, Worker, __version__, get_log_level, open_store,
    set_log_level)


def _initial_log_level():
    value = _os.environ.get("GLOG_minloglevel", "1")
    try:
        return min(max(int(value), 0), 3)
    except ValueError:
        return 1


set_log_level(_initial_log_level())

#: The Error subclass of each StatusCode number.
ERRORS_BY_CODE = {
    cls.code: cls
    for cls in (getattr(_pacedb, name) for name in dir(_pacedb))
    if isinstance(cls, type) and issubclass(cls, Error) and cls is not Error
}

from .server import LocalServer, find_paced  # noqa: E402,F401
