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
from pathlib import Path

from tracekit.errors import InputError, UnsupportedFormatError

# package names under tracekit.collectors, in the order sniff() is tried
REGISTRY = ("nsys", "ncu", "kineto")


def collector_modules():
    return [importlib.import_module(f"tracekit.collectors.{m}") for m in REGISTRY]


def detect(path: str | Path):
    """Return the collector module that reads ``path``.

    Raises :class:`InputError` for a missing or empty file and :class:`UnsupportedFormatError`
    when no collector recognizes it.
    """
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", path=p)
    if p.is_file() and p.stat().st_size == 0:
        raise InputError("file is empty", path=p)
    for mod in collector_modules():
        if mod.sniff(p):
            return mod
    raise UnsupportedFormatError(
        "not a format tracekit reads (nsys .sqlite/.nsys-rep/.qdrep"
        + ", ncu .csv/.ncu-rep, Kineto .json[.gz])",
        path=p,
    )
