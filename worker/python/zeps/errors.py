"""zeps errors as Python exceptions.

Every failing call raises a subclass of :class:`zeps.Error` named after the
zeps error code (``zeps.errors.ETIMEDOUT``, ``zeps.errors.ETABLE``, ...; the
codes are libzeps' own, see docs/protocol.md). The exception carries the code,
its symbolic name and the library's message (for server replies, the
server's text). The classes are made from libzeps' error table at import, so
they cannot drift from the C library.
"""
from ._native import ffi, lib


class Error(Exception):
    """A zeps call failed: ``code`` (int), ``name`` ("ETIMEDOUT"), ``message``."""

    code = -1
    name = "UNKNOWN"

    def __init__(self, message, code=None):
        if code is not None:
            self.code = code
            self.name = ffi.string(lib.zeps_errname(code)).decode()
        self.message = message
        super().__init__(f"{self.name}: {message}")


_BY_CODE = {}


def _make_classes():
    for code in range(1, 64):
        name = ffi.string(lib.zeps_errname(code)).decode()
        if name == "UNKNOWN":
            continue
        doc = ffi.string(lib.zeps_strerror(code)).decode()
        cls = type(name, (Error,), {"code": code, "name": name, "__doc__": doc})
        _BY_CODE[code] = cls
        globals()[name] = cls


_make_classes()


def error_class(code):
    """The Error subclass for a zeps error code (Error itself if unknown)."""
    return _BY_CODE.get(code, Error)


def raise_for(code, message):
    """Raise the Error subclass of `code` with `message` (code != 0)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        raise Error(message, code)
    raise cls(message)
