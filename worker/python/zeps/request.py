"""Non-blocking requests (Request) and view pulls (View): what a request
keeps alive until its wait returns, and the received buffers a view holds."""
import numpy as np

from ._native import ffi, lib


class Request:
    """A non-blocking pull, push or clock in flight; `wait()` finishes it.

    It holds the arrays the request reads or writes until wait returns."""

    __slots__ = ("_client", "_pp", "_keep", "_result", "_done")

    def __init__(self, client, keep, result=None):
        self._client = client
        self._pp = ffi.new("zeps_req **")
        self._keep = keep
        self._result = result
        self._done = False

    def wait(self):
        """Wait for every shard's reply (retrying as configured). Returns the
        pulled array for pulls (a View for view pulls), None otherwise.
        Raises zeps.Error."""
        if self._done:
            return self._result
        c = self._client
        lib._zp_py_arm()  # the SIGINT chain, re-armed if replaced (Client._arm)
        rc = self._finish()
        self._done = True
        c._pending.discard(self)
        self._keep = None
        if rc != 0:
            c._raise(rc)
        return self._result

    @property
    def done(self):
        return self._done

    def _give_up(self):
        """Finish the request with the client's interrupt flag set: libzeps
        gives up at once and frees it. Its result is lost; wait() returns
        None from here."""
        self._finish()
        self._done = True
        self._client._pending.discard(self)
        self._keep = None
        self._result = None

    def _finish(self):
        return lib.zeps_wait(self._pp)


class _ViewRequest(Request):
    """A view pull in flight: its wait() gives a View."""

    __slots__ = ()

    def _finish(self):
        vp = ffi.new("zeps_view **")
        rc = lib.zeps_wait_view(self._pp, vp)
        if rc == 0:
            self._result = View(vp[0])
        return rc


class _ViewBuffers:
    """Owns one zeps_view: the buffers go back to libzeps
    (zeps_view_release) when the last reference to this goes, the View's
    or an array's. A view needs no client: it may outlive Client.close()."""

    __slots__ = ("_v", "__weakref__")

    def __init__(self, v):
        self._v = v

    def __del__(self):
        if self._v is not None:
            lib.zeps_view_release(ffi.new("zeps_view **", self._v))
            self._v = None


class _Part:
    """One part's memory as numpy takes it (__array_interface__, read-only):
    the array made from it keeps this as its base, and this keeps the
    buffers."""

    __slots__ = ("__array_interface__", "_bufs")

    def __init__(self, bufs, ptr, n):
        self._bufs = bufs
        self.__array_interface__ = {"data": (int(ffi.cast("uintptr_t", ptr)), True),
                                    "shape": (n,), "typestr": "<f4", "version": 3}


class View:
    """What a view pull brought, where ZeroMQ received it: `parts`, one
    (offset, array) per shard the range touched, in element order, each a
    read-only float32 array over the received buffer, nothing copied.

    Lifetime: every array taken from the view holds the buffers, so none
    can show freed memory. release() (or the end of a ``with`` block, or
    garbage collection) drops the view's own hold: the buffers go back at
    once if no array is left, else when the last one is collected."""

    __slots__ = ("_bufs", "_parts")

    def __init__(self, v):
        bufs = _ViewBuffers(v)  # owns v from here, whatever follows
        off, cnt = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        parts = []
        for i in range(lib.zeps_view_parts(v)):
            p = lib.zeps_view_part(v, i, off, cnt)
            parts.append((int(off[0]), np.asarray(_Part(bufs, p, int(cnt[0])))))
        self._bufs, self._parts = bufs, tuple(parts)

    @property
    def parts(self):
        """((offset, array), ...): the values of each part, read-only."""
        if self._parts is None:
            raise ValueError("the view was released")
        return self._parts

    @property
    def contiguous(self):
        """True when the range came in one part (array() copies nothing)."""
        return len(self.parts) <= 1

    def array(self):
        """The whole range as one array: the only part itself (read-only,
        not copied) when it lay on one shard, else a new array the parts are
        copied into (a range over several shards is not contiguous in
        memory)."""
        parts = self.parts
        if len(parts) == 1:
            return parts[0][1]
        return np.concatenate([a for _, a in parts])

    def release(self):
        """Drop the view's hold on the buffers (see the class). Idempotent."""
        self._parts = self._bufs = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
