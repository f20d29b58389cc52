"""Nsight Systems collector: SQLite exports (and .nsys-rep/.qdrep reports via the local nsys).

Reads every table listed in :mod:`tracekit.collectors.nsys.mapping` in Arrow batches (memory does
not grow with the export's size; no Python work per row) and writes the run-folder tables.
Structural steps that need all rows of a table in order (NVTX nesting, scheduler intervals) run
in DuckDB over the decoded batches, with a memory limit and spilling to a work folder inside the
temporary run folder (removed before the run folder is renamed into plac
Modules: :mod:`~tracekit.collectors.nsys.export` (SQLite access, Arrow scans),
:mod:`~tracekit.collectors.nsys.mapping` (the mapping to tracekit columns, as data),
:mod:`~tracekit.collectors.nsys.versions` (export schema registry, ``schemas.json``),
:mod:`~tracekit.collectors.nsys.decode` (reading plans and decoders),
:mod:`~tracekit.collectors.nsys.pipeline` (threads, cancellation, strict-then-guarded reads,
manifest statistics), :mod:`~tracekit.collectors.nsys.post_steps` (nesting, scheduler
intervals), :mod:`~tracekit.collectors.nsys.report` (``.nsys-rep`` export with the local nsys).
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracekit.collectors.common import describe_input
from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys.export import is_sqlite
from tracekit.collectors.nsys.pipeline import NAME, convert_export  # noqa: F401  (NAME: the collector interface)
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def sniff(path: Path) -> bool:
    """An SQLite file (any: a non-nsys SQLite gets a precise error in :func:`collect`) or an
    nsys report by its suffix."""
    return path.suffix in REPORT_SUFFIXES or is_sqlite(path)


def column_sources() -> dict[tuple[str, str], str]:
    """{(table, column): where the value comes from in nsys exports}, for docs/schema.md."""
    out = {}
    for m in M.TABLE_MAPS.values():
        src = " or ".join(m.sources)
        for c, alts in m.columns.items():
            if not c.startswith("_"):
                out[(m.table, c)] = "; else ".join(a.describe(src) for a in alts)
        for c, text in m.computed.items():
            out[(m.table, c)] = text
    return out


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one nsys export (or report) into ``writer``'s run folder.

    Raises :class:`InputError` for more than one export, a file SQLite cannot read, a required
    column missing, or an export without the StringIds table (not an nsys export).
    """
    if len(paths) != 1:
        raise InputError(f"give one nsys export per run folder (got {len(paths)})")
    path = Path(paths[0])
    if path.suffix in REPORT_SUFFIXES:
        from tracekit.collectors.nsys.report import export_report

        writer.manifest["inputs"].append(describe_input(path, "nsys-report"))
        sqlite_path = export_report(path, writer.path)
    else:
        sqlite_path = path
    hashing = None
    if sqlite_path == path:  # the SHA-256 of the input is computed while converting
        hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-sha256")
        described = hashing.submit(describe_input, path, "nsys-sqlite")
    try:
        convert_export(path, sqlite_path, writer, progress)
        if hashing is not None:
            writer.manifest["inputs"].append(described.result())
    except InputError as exc:
        if sqlite_path == path or exc.path != str(sqlite_path):
            raise
        raise type(exc)(str(exc)[len(exc.path) + 2:], path=path) from None
    finally:
        if hashing is not None:
            hashing.shutdown(wait=True)
        if sqlite_path != path:  # the export made from a report, in <run tmp>/.export/
            shutil.rmtree(Path(sqlite_path).parent, ignore_errors=True)


# Tables converted first (the largest in typical exports); the rest follow in TABLE_MAPS order.
