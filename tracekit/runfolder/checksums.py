"""Checksums of a run folder's table files: written at convert, checked when read.

Every table entry of ``manifest.json`` records, beside ``file`` (or ``files`` for a job, one per
rank), the SHA-256 (``sha256``) and the size in bytes (``bytes``) of each file: a string and an
integer for one file, lists parallel to ``files`` for several. :meth:`tracekit.runfolder.Run.table_files`
checks the size, the row count of the Parquet footers against ``rows`` and the digest of each
file it opens, so a flipped bit, a cut file or a table file swapped for another is a
:class:`~tracekit.errors.RunFolderError` (exit 2) naming the file, never different numbers.
``tracekit verify RUN`` checks every table file at once.

Run folders written before checksums (no ``sha256`` in an entry) are read as before: their size
and rows are still checked against the footers where the manifest has them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tracekit.errors import RunFolderError, one_line
from tracekit.runfolder.footer import read_footer
from tracekit.runfolder.tablefiles import small_file

if TYPE_CHECKING:
    from concurrent.futures import Future

_CHUNK = 4 << 20  # hashlib releases the GIL on chunks this large


def digest(path: str | os.PathLike) -> tuple[int, str]:
    """(size in bytes, SHA-256 hex digest) of one file, read in 4 MiB chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _names(info: dict) -> list[str]:
    files = info.get("files")
    return list(files) if isinstance(files, list) else [info.get("file")]


def record(folder: Path, tables: dict, known: dict[str, tuple[int, str]] | None = None) -> None:
    """Add ``sha256`` and ``bytes`` to every entry of ``tables`` (the manifest's, in place) for
    its files under ``folder``; ``known`` gives digests already computed, by relative name (a
    job's part files moved unchanged)."""
    known = known or {}
    for info in tables.values():
        names = _names(info)
        sums = [known.get(n) or digest(folder / n) for n in names]
        if isinstance(info.get("files"), list):
            info["bytes"] = [s for s, _ in sums]
            info["sha256"] = [d for _, d in sums]
        else:
            info["bytes"], info["sha256"] = sums[0]


def expected(info: dict, index: int) -> tuple[int | None, str | None]:
    """The recorded (bytes, sha256) of the table's ``index``-th file; None where not recorded."""
    size, sha = info.get("bytes"), info.get("sha256")
    if isinstance(info.get("files"), list):
        size = size[index] if isinstance(size, list) and index < len(size) else None
        sha = sha[index] if isinstance(sha, list) and index < len(sha) else None
    size = size if isinstance(size, int) and not isinstance(size, bool) else None
    return size, sha if isinstance(sha, str) else None


def check_file(run_path: Path, name: str, path: Path, info: dict, index: int,
               data: bytes | None = None, content: bool = True) -> None:
    """Raise :class:`RunFolderError` when ``path`` (table ``name``'s ``index``-th file) differs
    from the size and digest the manifest records; ``data``: the file's bytes, already read;
    ``content`` False: the size only."""
    size, sha = expected(info, index)
    rel = _rel(run_path, path)
    actual = len(data) if data is not None else path.stat().st_size
    if size is not None and actual != size:
        raise RunFolderError(f"{rel} (table {name}) has {actual} bytes, the manifest "
                             f"records {size}: the file was cut, replaced or damaged; convert the "
                             "input again", path=run_path)
    if content and sha is not None and (hashlib.sha256(data).hexdigest() if data is not None
                            else digest(path)[1]) != sha:
        raise RunFolderError(f"{rel} (table {name}) does not match its checksum in the manifest "
                             "(a changed byte or another file): the run folder is damaged; "
                             "convert the input again", path=run_path)


def _rel(run_path: Path, path: Path):
    """``path`` as the error messages name it: relative to the run folder where inside it."""
    return path.relative_to(run_path) if path.is_relative_to(run_path) else path.name


_POOL: list = []  # the one helper thread of check_later, started on first use


def check_later(run_path: Path, name: str, path: Path, info: dict, index: int,
                footer: tuple[int, tuple[str, ...]] | None = None) -> Future:
    """:func:`check_file` of ``path`` in a helper thread (hashlib releases the GIL on each 4 MiB
    chunk): a future whose ``result()`` raises its :class:`RunFolderError`. One thread for all
    files, so the checks of a query over many large files take one core, not all. ``footer``:
    the (rows, columns) the caller took from the manifest instead of the file: the footer is
    parsed, the size and digest compared, then the footer's rows and columns with these."""
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-checksum"))
    if footer is None:
        return _POOL[0].submit(check_file, run_path, name, path, info, index)
    return _POOL[0].submit(_check_with_footer, run_path, name, path, info, index, footer)


def _check_with_footer(run_path: Path, name: str, path: Path, info: dict, index: int,
                       footer: tuple[int, tuple[str, ...]]) -> None:
    try:  # in the order of a read that parses the footer first: the footer, then the digest
        data = small_file(path)  # a small file is read once, for its footer and its digest
        got = read_footer(path, data)
    except (OSError, ValueError) as exc:
        raise RunFolderError(f"{_rel(run_path, path)} is not readable Parquet ({one_line(exc)})",
                             path=run_path) from None
    check_file(run_path, name, path, info, index, data=data)
    check_columns(run_path, name, path, got[1], footer[1])
    check_rows(run_path, name, {"rows": footer[0]}, [got[0]])


def check_columns(run_path: Path, name: str, path: Path, columns: tuple[str, ...],
                  listed: tuple[str, ...] | None) -> None:
    """Raise :class:`RunFolderError` when the ``columns`` of ``path``'s footer are not the ones
    its manifest entry lists (``listed``; None: it lists none)."""
    if listed is not None and tuple(columns) != tuple(listed):
        raise RunFolderError(f"{_rel(run_path, path)} (table {name}) holds other columns than the manifest lists "
                             f"({len(columns)} against {len(listed)}): the manifest was edited "
                             "or damaged; convert the input again", path=run_path)


def check_rows(run_path: Path, name: str, info: dict, counts: Iterable[int]) -> None:
    """Raise :class:`RunFolderError` when the Parquet footers' row counts do not add up to the
    manifest's ``rows`` (``"files": []`` with rows 1, a file listed twice, a file of another
    table)."""
    rows = info.get("rows")
    total = sum(counts)
    if isinstance(rows, int) and not isinstance(rows, bool) and total != rows:
        raise RunFolderError(f"table {name} has {total} rows in its files, the manifest records "
                             f"{rows}: the run folder is damaged; convert the input again",
                             path=run_path)


def verify(run) -> list[str]:
    """Check every table file of the open run folder ``run`` (a :class:`tracekit.runfolder.Run`);
    returns one line per table checked. :class:`RunFolderError` at the first damaged file, or
    when the manifest records no checksums."""
    lines = []
    tables = run.manifest.get("tables") or {}
    if tables and not any("sha256" in info for info in tables.values() if isinstance(info, dict)):
        raise RunFolderError("manifest.json records no checksums (written by a tracekit before "
                             "them); convert the input again to verify it", path=run.path)
    for name in tables:
        files = run.table_files(name)  # checks sizes, rows and digests
        size = sum(p.stat().st_size for p in files)
        lines.append(f"{name}: {len(files)} file(s), {size} bytes, {tables[name].get('rows')} rows: ok")
    return lines


def reseal(folder: str | os.PathLike) -> None:
    """Record the current size and SHA-256 of every table file of run folder ``folder`` in its
    manifest, and the columns of a one-file table that lists them: for a folder whose tables
    were edited on purpose (a test input derived from a real run). Rows are not recounted."""
    import json

    path = Path(folder) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    tables = manifest.get("tables") or {}
    record(Path(folder), tables)
    for info in tables.values():
        if isinstance(info.get("columns"), list) and isinstance(info.get("file"), str):
            try:
                info["columns"] = list(read_footer(Path(folder) / info["file"])[1])
            except (OSError, ValueError):  # a damaged footer: readers parse it, and say so
                del info["columns"]
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
