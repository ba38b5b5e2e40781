"""zeps: Python bindings of the zeps parameter server's client library.

A thin layer over libzeps (cffi, API mode, compiled at build time): the C
library stays the one implementation of the protocol, retries, codecs and
batching. numpy arrays cross by pointer. See docs/python.md.

    import zeps
    with zeps.Client("cluster.conf") as c:          # rank from ZEPS_RANK, ...
        w = c.declare("w", 1000, optimizer="adam", lr=1e-3)
        params = w.pull(clock=0)
        w.push(grad, clock=0)
        c.clock(0)
"""
from .errors import Error, error_class
from . import errors
from .client import Client, rank_from_env
from .dense import DenseTable
from .sparse import SparseTable, Batch
from .request import Request, View
from .result import write_result
from . import data

__all__ = ["Client", "DenseTable", "SparseTable", "Batch", "Request", "View", "Error", "errors",
           "error_class", "rank_from_env", "write_result", "data"]
__version__ = "0.1.0"
