"""Collectors: one package per input format (``nsys/``, ``ncu/``, ``kineto/``), each with its
reader, its mapping to tracekit's columns as data and its post-steps; :mod:`.common` holds what
they share (input description, push/pop NVTX nesting). Each turns profiler output into run-folder
tables.

Collectors only rename, decode and cast (staging); they compute no metrics — metrics live in the
named queries. Every collector package exposes:

- ``NAME``: short format name written to the manifest (``nsys``, ``kineto``, ``ncu``)
- ``sniff(path) -> bool``: cheap check whether ``path`` is in this format (reads a few bytes)
- ``collect(paths, writer, progress) -> None``: write tables into a
  :class:`tracekit.runfolder.RunWriter` and fill ``writer.manifest["sources"][NAME]``

The registry below lists them in detection order.
"""

from __future__ import annotations

import importlib
import stat
from pathlib import Path

from tracekit.errors import InputError, UnsupportedFormatError

# package names under tracekit.collectors, in the order sniff() is tried
REGISTRY = ("nsys", "ncu", "kineto", "memsnapshot", "mllog")


def collector_modules():
    return [importlib.import_module(f"tracekit.collectors.{m}") for m in REGISTRY]


def detect(path: str | Path):
    """Return the collector module that reads ``path``.

    Raises :class:`InputError` for a missing or empty file and :class:`UnsupportedFormatError`
    when no collector recognizes it.
    """
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise InputError("no such file", path=p) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=p) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory, not a profiler output file (a folder is read only as an "
                         "MLPerf results tree, and this one holds no result_*.txt)", path=p)
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would hang the reader or never end
        raise InputError("is not a regular file (a pipe, device or socket); tracekit reads "
                         "profiler output files: save the stream to a file first", path=p)
    if st.st_size == 0:
        raise InputError("file is empty", path=p)
    for mod in collector_modules():
        if mod.sniff(p):
            return mod
    with open(p, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if gz:
        raise UnsupportedFormatError("a gzip file that is truncated or corrupt, or holds no "
                                     "Kineto trace (its start does not decompress to one)", path=p)
    raise UnsupportedFormatError(
        "not a format tracekit reads (nsys .sqlite/.nsys-rep/.qdrep"
        + ", ncu .csv/.ncu-rep, Kineto .json[.gz], PyTorch memory snapshot .pickle, MLPerf result log)",
        path=p,
    )
