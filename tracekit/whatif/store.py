"""Where the arrays of a graph and its replays live: in memory for a small graph, in files mapped
into memory (``numpy.memmap``) for a large one, so that a job's size is bounded by the disk, not
by RAM (docs/benchmarks.md). The mapped pages are the kernel's to write back and drop: the
process's own (anonymous) memory holds only what one chunk of :data:`CHUNK` nodes or one replay
window needs.

A :class:`Store` on disk writes into a private folder it makes under the system's temporary
folder (``$TMPDIR``, ``tracekit-whatif-*``); each file's name is removed as soon as it is
mapped (the data lives while an array uses it, and its disk space is freed with the last one,
even when the process is killed), and the folder is removed when the store is closed, freed, or
at exit. :data:`DISK_NODES_ENV` chooses the size from which a graph goes to disk.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator

import numpy as np

from tracekit.errors import InputError

CHUNK = 1 << 20
"""Nodes (or edges) per step of the chunked loops over a graph's arrays."""

DISK_NODES_ENV = "TRACEKIT_WHATIF_DISK_NODES"
DEFAULT_DISK_NODES = 2_000_000
"""Event nodes from which a graph's arrays go to disk (below it, a replay's arrays take at most
about 400 MB of memory: some 200 bytes per node)."""


def disk_nodes() -> int:
    """The threshold of :data:`DISK_NODES_ENV` (default :data:`DEFAULT_DISK_NODES`); 0: always
    on disk. ValueError when the variable is not a whole number."""
    text = os.environ.get(DISK_NODES_ENV, "").strip()
    if not text:
        return DEFAULT_DISK_NODES
    try:
        return max(0, int(text))
    except ValueError:
        raise ValueError(f"${DISK_NODES_ENV} is not a whole number of nodes: {text!r}") from None


def chunks(n: int, size: int | None = None) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive slices of ``range(n)``, ``size`` (default :data:`CHUNK`)
    long, the last shorter."""
    size = size or CHUNK
    for a in range(0, n, size):
        yield a, min(a + size, n)


def nonzero(n: int, mask) -> np.ndarray:
    """The positions in 0..n-1 where ``mask(a, b)`` (the booleans of positions a..b-1) is true,
    a chunk at a time: ``np.flatnonzero`` of a mask over a whole graph without holding it."""
    return np.concatenate([a + np.flatnonzero(mask(a, b)) for a, b in chunks(n)]
                          or [np.empty(0, np.int64)])


class Store:
    """Makes the arrays of one graph: ``np.empty``/``np.full`` in memory, or the same as files
    mapped into memory when ``disk`` (each array its own file in the store's folder)."""

    def __init__(self, disk: bool = False):
        self.disk = disk
        self.path: str | None = None
        self._count = 0
        self._finalizer = None
        if disk:
            try:
                self.path = tempfile.mkdtemp(prefix="tracekit-whatif-")
            except OSError as exc:
                raise _full(exc, tempfile.gettempdir()) from None
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)

    def empty(self, n: int, dtype) -> np.ndarray:
        """An array of ``n`` entries of ``dtype`` (uninitialized in memory, zeros on disk)."""
        if not self.disk or n == 0:
            return np.empty(n, dtype=dtype)
        name = self._new_file()
        with _open(name) as f:
            _reserve(f, n * np.dtype(dtype).itemsize)
        return _unlinked(_map(name, dtype, n), name)

    def full(self, n: int, value, dtype) -> np.ndarray:
        """An array of ``n`` entries, each ``value``."""
        out = self.empty(n, dtype)
        for a, b in chunks(n):
            out[a:b] = value
        return out

    def copy(self, x: np.ndarray) -> np.ndarray:
        """A copy of ``x`` in this store."""
        out = self.empty(len(x), x.dtype)
        for a, b in chunks(len(x)):
            out[a:b] = x[a:b]
        return out

    def _new_file(self) -> str:
        """The path of the store's next array file (on disk only)."""
        self._count += 1
        return os.path.join(self.path, f"{self._count:05d}.bin")

    def close(self) -> None:
        """Remove the store's folder (arrays of it must not be used after)."""
        if self._finalizer is not None:
            self._finalizer()


class Appender:
    """An array built from pieces appended one after the other, then :meth:`finish`\\ ed with
    ``extra`` more entries at its end: in memory, the pieces are joined once; on disk, each
    piece is written to the array's file as it comes (nothing of it stays in memory)."""

    def __init__(self, store: Store, dtype):
        self.store, self.dtype = store, np.dtype(dtype)
        self.pieces: list[np.ndarray] = []
        self.n = 0
        self._file = None
        if store.disk:
            self._name = store._new_file()
            self._file = _open(self._name)  # closed by finish()

    def add(self, x: np.ndarray) -> None:
        """Append the entries of ``x`` (converted to the array's dtype). :class:`InputError`
        when the disk refuses them."""
        x = np.ascontiguousarray(x, dtype=self.dtype)
        if self._file is not None:
            try:
                self._file.write(memoryview(x).cast("B"))
            except OSError as exc:
                raise _full(exc, self.store.path) from None
        else:
            self.pieces.append(x)
        self.n += len(x)

    def finish(self, extra: int = 0) -> np.ndarray:
        """The whole array: every entry added, then ``extra`` more (uninitialized in memory,
        zeros on disk). The appender is done after this."""
        total = self.n + extra
        if self._file is None or total == 0:
            if self._file is not None:
                self._file.close()
            out = np.empty(total, dtype=self.dtype)
            if self.pieces:
                np.concatenate(self.pieces, out=out[: self.n])
            self.pieces = []
            return out
        self._file.flush()
        _reserve(self._file, total * self.dtype.itemsize)  # the extra entries: zeros
        self._file.close()
        return _unlinked(_map(self._name, self.dtype, total), self._name)


def _reserve(f, size: int) -> None:
    """Make the open file ``f`` ``size`` bytes long with its disk blocks allocated now: a full
    disk is then this one-line error, not a SIGBUS when a mapped page is first written."""
    try:
        f.truncate(size)
        if hasattr(os, "posix_fallocate") and size:
            os.posix_fallocate(f.fileno(), 0, size)
    except OSError as exc:
        raise _full(exc, os.path.dirname(f.name)) from None


def _open(name: str):
    """``name`` opened for writing; :class:`InputError` (one line) when it cannot be, e.g. the
    store's folder was removed while tracekit ran (a temporary-file cleaner)."""
    try:
        return open(name, "wb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise _full(exc, os.path.dirname(name)) from None


def _map(name: str, dtype, n: int) -> np.memmap:
    try:
        return np.memmap(name, dtype=dtype, mode="r+", shape=(n,))
    except OSError as exc:
        raise _full(exc, os.path.dirname(name)) from None


def _full(exc: OSError, folder: str | None) -> InputError:
    if folder and not os.path.isdir(folder):
        return InputError(f"the folder of the replay's arrays {folder} was removed while tracekit "
                          "ran (by a temporary-file cleaner?); nothing was written: run again")
    return InputError(f"cannot hold the replay's arrays in {folder}: {exc.strerror or exc} (set "
                      "TMPDIR to a folder on a disk with room: about 150 bytes per event, or "
                      f"${DISK_NODES_ENV} to a larger number to keep them in memory)")


def _unlinked(x: np.memmap, name: str) -> np.ndarray:
    """``x`` with its file's name removed at once: the mapping keeps the data, and the kernel
    frees the disk space when the last array using it is freed (even if the process is killed).
    Where a mapped file cannot be removed, the store's folder is removed at its close. Returned
    as a plain ndarray view of the mapping (its ``base``): ``np.memmap``'s Python-level
    ``__getitem__`` made each element read of the critical-path walk several times slower."""
    try:
        os.unlink(name)
    except OSError:
        pass
    return x.view(np.ndarray)
