"""One run folder from the inputs of one run (any formats, one collector per format)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from tracekit.collectors import detect
from tracekit.errors import InputError, RunFolderError, one_line
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter
from tracekit.runfolder.integrity import count_duplicates, count_nonpositive


def convert_single(inputs: Sequence[str | os.PathLike], run_dir: str | os.PathLike, *,
                   force: bool = False, progress: Progress = NULL_PROGRESS,
                   extra_manifest: dict | None = None, extra_tables: dict | None = None,
                   modules=None, make_parents: bool = True) -> Path:
    """Convert ``inputs`` into one run folder with one file per table (no rank split): what
    :func:`convert` does for anything but a multi-rank job, and for each rank of one.
    ``make_parents``: as :class:`~tracekit.runfolder.RunWriter`'s."""
    groups: dict[str, tuple[object, list[Path]]] = {}
    for p, mod in zip(inputs, modules or [detect(p) for p in inputs]):
        groups.setdefault(mod.NAME, (mod, []))[1].append(Path(p))
    with RunWriter(run_dir, force=force, inputs=inputs, make_parents=make_parents) as writer:
        writer.manifest["sources"] = {}
        for mod, paths in groups.values():
            try:
                mod.collect(paths, writer, progress)
            except OSError as exc:  # not caught by the collector: a disk or an input gone
                raise _os_error(exc, writer, paths) from None
        count_duplicates(writer)  # manifest duplicate_rows + warning (tracekit.runfolder.integrity)
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
