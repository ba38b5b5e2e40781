"""What the modules of the package share: array coercion, cffi strings,
error codes, codec options, the sparse row record."""
import numpy as np

from ._native import ffi, lib

_F32 = np.dtype(np.float32)
_U64 = np.dtype(np.uint64)


def _f32(a, writable=False):
    """`a` as a C-contiguous float32 array: itself when it already is."""
    arr = np.asarray(a)
    if arr.dtype == _F32 and arr.flags.c_contiguous and (arr.flags.writeable or not writable):
        return arr
    if writable:
        raise ValueError("out must be a writable, C-contiguous float32 array")
    return np.ascontiguousarray(arr, dtype=_F32)


def _ids_u64(ids):
    """`ids` as a C-contiguous 1-D uint64 array: itself when it already is;
    signed ids in two's complement (-1 is 2^64-1). Ids that are not
    integers raise TypeError, as torch's embeddings do: a float id would
    be truncated to another id."""
    a = np.asarray(ids)
    if a.dtype == _U64 and a.ndim == 1 and a.flags.c_contiguous:
        return a
    if a.dtype.kind not in "iu":
        if a.size:
            raise TypeError(f"ids must be integers (int64, uint64, int32, ...), not {a.dtype}")
        a = a.astype(np.int64)  # [] is float64 to numpy
    if a.dtype != _U64:
        a = a.astype(np.int64, copy=False).view(np.uint64)
    return np.ascontiguousarray(a).reshape(-1)


def _spec_strings(keep, **fields):
    """cffi char* fields from str values; `keep` holds the buffers alive."""
    out = {}
    for k, v in fields.items():
        if v is None:
            out[k] = ffi.NULL
        else:
            b = ffi.new("char[]", str(v).encode())
            keep.append(b)
            out[k] = b
    return out


def _let_signal_handlers_run():
    """A Python-level call and loop: the interpreter checks for pending
    signals here and runs their handlers."""
    for _ in range(2):
        pass


def lib_code(name):
    """The number of zeps error `name` ("ECLOSED")."""
    from . import errors
    return getattr(errors, name).code


def _codec_opts(keep, codec, fraction, count, block, error_feedback, seed):
    o = ffi.new("zeps_codec_opts *")
    o.codec = _spec_strings(keep, c=codec)["c"]
    o.fraction, o.count, o.block = fraction, count, block
    o.error_feedback, o.seed = int(bool(error_feedback)), seed
    return o


def _record_dtype(dim, k):
    """A sparse row record of SCAN pages and PUT (zeps.h, ZEPS_ROW_RECORD_BYTES;
    the rows of a snapshot file): id, version, touches, last clock, values,
    k blocks of optimizer state; little-endian, packed."""
    return np.dtype([("id", "<u8"), ("version", "<u4"), ("touches", "<u4"),
                     ("last_clock", "<i8"), ("values", "<f4", (dim,)),
                     ("state", "<f4", (k, dim))])


def _set_lr(table, lr):
    c = table.client
    c._check()
    c._arm()
    c._call(lib.zeps_set_lr(c._c, table.handle, float(lr)))
    table.lr = float(lr)
