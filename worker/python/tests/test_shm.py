"""The binding over shared memory (transport = "auto" in the cluster file,
docs/protocol.md "Shared memory"): the same calls give the same bits as
over TCP, dense and sparse; the payloads go through the segment; a view is
an array over the segment itself, not a copy."""
import numpy as np

import zeps
from zeps._native import ffi, lib


def segments():
    """The address ranges of this process's zeps segment mappings."""
    spans = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "memfd:zeps-shm" in line:
                lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
                spans.append((lo, hi))
    return spans


def train(cl):
    """A few async steps of one worker, dense and sparse; the end state,
    the segments mapped while connected, and where a view's array lies."""
    ids = np.array([3, 99, 2**40, 7, 3], dtype=np.uint64)
    with zeps.Client(cl.conf, 0) as c:
        w = c.declare("w", 100_000, optimizer="adam", lr=0.01, init="normal", init_scale=1.0,
                      seed=5)
        e = c.declare_sparse("e", 16, optimizer="adagrad", lr=0.1, init="uniform",
                             init_scale=0.1, seed=3)
        for step in range(5):
            p = w.pull(clock=step)
            w.push(np.sin(p * (step + 1)).astype(np.float32), clock=step)
            r = e.pull(ids, clock=step)
            e.push(ids, np.cos(r).astype(np.float32), clock=step)
        end = (w.pull().tobytes(), e.pull(ids).tobytes())
        with w.pull_view() as v:
            a = v.array()
            where = a.__array_interface__["data"][0]
            part = int(ffi.cast("uintptr_t", lib.zeps_view_part(v._bufs._v, 0, ffi.NULL, ffi.NULL)))
            assert where == part  # the view's own buffer, not a copy
            assert a.tobytes() == end[0]
        spans = segments()
    return end, spans, where


def test_same_bits_and_views_in_the_segment(make_cluster):
    tcp = make_cluster(servers=1, extra='  transport = "tcp";\n')
    shm = make_cluster(servers=1, extra='  transport = "auto";\n  shm_segment_mb = 16;\n')
    end_tcp, spans_tcp, _ = train(tcp)
    end_shm, spans_shm, where = train(shm)
    assert end_tcp == end_shm
    assert spans_tcp == []
    assert len(spans_shm) == 1
    lo, hi = spans_shm[0]
    assert lo <= where < hi  # the zero-copy view lies in the shared segment
    assert "worker 0 attached segment" in shm.log(0)
    assert segments() == []  # closing the client let the segment go
