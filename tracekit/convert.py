"""Convert profiler outputs into a run folder (``tracekit convert``)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from tracekit.collectors import detect
from tracekit.errors import InputError, RunFolderError, one_line
from tracekit.integrity import count_duplicates, count_nonpositive
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter


def convert(inputs: Sequence[str | os.PathLike], run_dir: str | os.PathLike, *, force: bool = False,
            progress: Progress = NULL_PROGRESS, extra_manifest: dict | None = None,
            extra_tables: dict | None = None, rank_pattern: str | None = None,
            jobs: int | None = None, scheduler: str | None = None,
            skip_bad_ranks: bool = False, clock_model: str = "estimate",
            merge_unrelated: bool = False) -> Path:
    """Convert ``inputs`` (profiler output files) into the run folder ``run_dir``.

    Each input is recognized by its content (:func:`tracekit.collectors.detect`). Two or more
    nsys exports/reports, or two or more Kineto traces, are a multi-rank job
    (:mod:`tracekit.job`): one rank per input, converted in parallel (``jobs`` local worker
    processes, default one per core, or the workers of the Dask ``scheduler``), one Parquet file
    per rank per table, ranks listed in the manifest. Otherwise inputs of the same format go to
    that format's collector together (e.g. an nsys export and an ncu report); two collectors
    writing the same table is an :class:`InputError` (raised by the writer).
    ``extra_manifest`` entries (e.g. the workload description from ``tracekit collect``) are
    merged into the manifest; ``extra_tables`` ({table name: Arrow table}, e.g. the host CPU
    samples ``tracekit collect`` takes under the torch profiler) are written into the same run
    folder (one file each), for tables no input collector wrote.

    Returns the run folder's path. Raises :class:`InputError` subclasses for bad input (in a job,
    naming the broken input, unless ``skip_bad_ranks``); nothing is left behind on any error.
    ``clock_model`` and ``merge_unrelated``: see :func:`tracekit.job.convert_job` (a job only).
    """
    if not inputs:
        raise InputError("no input files given")
    from tracekit.job import convert_job, is_job

    mods = [detect(p) for p in inputs]
    formats = [m.NAME for m in mods]
    if not is_job(formats):
        return convert_single(inputs, run_dir, force=force, progress=progress,
                              extra_manifest=extra_manifest, extra_tables=extra_tables, modules=mods)
    with RunWriter(run_dir, force=force, inputs=inputs) as writer:
        convert_job([Path(p) for p in inputs], formats, writer, rank_pattern=rank_pattern,
                    jobs=jobs, scheduler=scheduler, skip_bad_ranks=skip_bad_ranks,
                    clock_model=clock_model, merge_unrelated=merge_unrelated,
                    hosts=_workload_hosts(extra_manifest))
        for name, table in (extra_tables or {}).items():
            if name in writer.manifest["tables"]:
                raise InputError(f"two inputs both provide table {name}")
            writer.write_table(name, [table])
        if extra_manifest:
            writer.manifest.update(extra_manifest)
    return Path(run_dir)


def _workload_hosts(extra: dict | None) -> dict[int, str]:
    """rank -> hostname from ``tracekit collect``'s workload description (its ranks' hosts)."""
    ranks = ((extra or {}).get("workload") or {}).get("ranks") or []
    return {r["rank"]: r["hostname"] for r in ranks
            if isinstance(r, dict) and isinstance(r.get("rank"), int) and isinstance(r.get("hostname"), str)}


def convert_single(inputs: Sequence[str | os.PathLike], run_dir: str | os.PathLike, *,
                   force: bool = False, progress: Progress = NULL_PROGRESS,
                   extra_manifest: dict | None = None, extra_tables: dict | None = None,
                   modules=None) -> Path:
    """Convert ``inputs`` into one run folder with one file per table (no rank split): what
    :func:`convert` does for anything but a multi-rank job, and for each rank of one."""
    groups: dict[str, tuple[object, list[Path]]] = {}
    for p, mod in zip(inputs, modules or [detect(p) for p in inputs]):
        groups.setdefault(mod.NAME, (mod, []))[1].append(Path(p))
    with RunWriter(run_dir, force=force, inputs=inputs) as writer:
        writer.manifest["sources"] = {}
        for name, (mod, paths) in groups.items():
            try:
                mod.collect(paths, writer, progress)
            except OSError as exc:  # not caught by the collector: a disk or an input gone
                raise _os_error(exc, writer, paths) from None
        count_duplicates(writer)  # manifest duplicate_rows + warning (tracekit.integrity)
        count_nonpositive(writer)  # manifest nonpositive_duration_rows + warning
        for name, table in (extra_tables or {}).items():
            writer.write_table(name, [table])  # InputError when a collector wrote it too
        if extra_manifest:
            writer.manifest.update(extra_manifest)
    return Path(run_dir)


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}


def _os_error(exc: OSError, writer: RunWriter, paths: list[Path]) -> InputError:
    """An OS error during a collector's run as a one-line error (exit 2): writing the run folder
    (full disk, quota, read-only) or reading an input (deleted or unreadable meanwhile)."""
    reason = exc.strerror or one_line(exc)
    name = exc.filename
    if exc.errno in _WRITE_ERRNOS or (name and str(writer.path) in str(name)) or "No space" in reason:
        return RunFolderError(f"cannot write the run folder: {reason}", path=writer.run_dir)
    where = name if name else ", ".join(str(p) for p in paths)
    return InputError(f"cannot read the input: {reason}", path=where)
