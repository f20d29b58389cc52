"""Checks of one table file a run folder's manifest lists, as :class:`tracekit.runfolder.Run`
opens it: the name is a plain file of the folder, its bytes are read once when small, the
columns the manifest lists, and whether its columns are another table's."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tracekit import schema

SMALL_FILE = 8 << 20


def small_file(path: Path) -> bytes | None:
    """The bytes of ``path`` when it holds at most 8 MiB (a run folder of one small input, or one
    rank's file of a job), else None: its footer and its checksum then come from one read
    instead of two opens and reads (many run folders: issue 39)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > SMALL_FILE:
            return None
        data = f.read(SMALL_FILE + 1)
    return data if len(data) <= SMALL_FILE else None


def plain_file_in(p: Path, file: str) -> bool:
    """Whether ``file`` is a plain name in the folder (no separator, not ``.`` or ``..``) and
    ``p`` a regular file, not a link: one ``lstat`` instead of resolving every part of the path
    (300 run folders: a third of opening their tables)."""
    if not file or "/" in file or os.sep in file or file in (".", ".."):
        return False
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return False


def listed_columns(info: dict) -> tuple[str, ...] | None:
    """The columns a table entry of one file lists (tracekit writes them beside its rows and
    checksum), or None where it does not list them all: a table of several files, no checksum
    to hold the file to, a value that is not a list of names."""
    cols, rows = info.get("columns"), info.get("rows")
    if ("file" not in info or "files" in info or not isinstance(info.get("sha256"), str)
            or not isinstance(rows, int) or isinstance(rows, bool)
            or not isinstance(cols, list) or not all(isinstance(c, str) for c in cols)):
        return None
    return tuple(cols)


def other_table(name: str, columns: tuple[str, ...]) -> str | None:
    """The other table whose columns ``columns`` are, when they are not all table ``name``'s
    (a file of cuda_api given as kernels); columns of a newer tracekit alone are not that."""
    own = {c.name for c in schema.table(name).columns}
    if set(columns) <= own:
        return None
    return next((t for t, tdef in schema.TABLES.items() if t != name
                 and set(columns) <= {c.name for c in tdef.columns}), None)
