"""A worker's result file, as launchers read it (docs/python.md).

`zepsctl local --exec`, the Slurm script and the test suite sum a run up
from `worker-<rank>.json` in `$ZEPS_RESULT_DIR`, the file zeps-worker
writes. :func:`write_result` writes it for a Python worker (atomically:
a temporary file renamed), and from then on makes SIGTERM end the process
with status 0: the launchers stop every task once all results are there,
and a worker that finished must not count as killed (zeps-worker does the
same).
"""
import json
import os
import signal

from . import _native


def write_result(rank, result, directory=None):
    """Write `result` (a dict: final_accuracy, final_loss, final_auc,
    wall_s, compute_s, comm_s, examples_per_s, epochs, iterations,
    examples, stopped, ...) as worker-<rank>.json into `directory` (default
    $ZEPS_RESULT_DIR; nothing is written when neither is set). Returns the
    path written, or None."""
    directory = directory or os.environ.get("ZEPS_RESULT_DIR")
    if not directory:
        return None
    path = os.path.join(directory, f"worker-{rank}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(dict(result, rank=rank), f)
        f.flush()
        os.fsync(f.fileno())
    # From here on SIGTERM means "done": armed before the file appears, so
    # a launcher that sees the file and signals at once finds it armed.
    # Python's own record goes back to the default first, or its shutdown
    # would reset the signal over the binding's C handler.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _native.lib._zp_py_exit_on_term() != 0:
        raise OSError("cannot install the SIGTERM handler")
    os.replace(tmp, path)
    return path
