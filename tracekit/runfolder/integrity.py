"""Checks of converted tables that no single collector can make while streaming.

:func:`count_nonpositive` counts rows with a zero or negative duration in every event table,
whatever the collector (manifest ``nonpositive_duration_rows``).

:func:`count_duplicates` finds rows identical in every column (a profiler that flushed a buffer
twice, a trace concatenated with itself). They are kept -- dropping rows silently would change
totals that ``nsys stats`` reports -- and counted in the manifest (``duplicate_rows``), said once
at convert (:func:`notes`), so a doubled total can be explained.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

# Event tables checked, and the columns left out of the comparison: IDs tracekit assigns per row
# (and values derived from them) would make every row unique.
EVENT_TABLES = {
    "kernels": (), "cuda_api": (), "memcpy": (), "memset": (), "cuda_sync": (),
    "nvtx_ranges": ("range_id", "parent_range_id", "depth"), "nvtx_marks": (), "osrt_api": (),
}


def compared_columns(name: str) -> list[str]:
    """The columns of event table ``name`` that :func:`count_duplicates` compares (all but the IDs
    tracekit assigns per row)."""
    from tracekit import schema

    skip = EVENT_TABLES[name]
    return [c for c in schema.table(name).column_names if c not in skip]


def duplicate_rows(con, relation: Callable[[], str], columns: list[str], rows: int | None = None) -> int:
    """Rows of a relation identical in ``columns`` to another of its rows (the extra copies: 1
    for a row present twice). ``relation()`` gives the SQL relation to scan (e.g.
    ``read_parquet('...')``), once per scan on ``con`` (a DuckDB connection). ``rows``: the
    relation's row count, when known: the rows' hashes are then sorted in NumPy (8 bytes a row)
    instead of counted in DuckDB's hash table (about three times that)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    # Identical rows have equal hashes, so when every row's hash is distinct there is no
    # duplicate (a third of the time and memory of the exact count, which runs only when some
    # hashes are shared).
    if rows is None:
        n = con.execute(f"SELECT count(*) - count(DISTINCT hash({cols})) FROM {relation()}").fetchall()[0][0]
    else:
        n = _shared_hashes(con, f"SELECT hash({cols}) FROM {relation()}", rows)
    if n:  # GROUP BY, as DISTINCT, takes NULLs as equal
        n = con.execute(f"SELECT coalesce(sum(n) - count(*), 0) FROM (SELECT count(*) AS n "
                        f"FROM {relation()} GROUP BY {cols})").fetchall()[0][0]
    return int(n)


def _shared_hashes(con, sql: str, rows: int) -> int:
    """Rows of the one-column result of ``sql`` (``rows`` of them, UBIGINT hashes) whose value
    another row has too (the extra copies), by sorting them."""
    import numpy as np

    h = np.empty(rows, np.uint64)
    at = 0
    rel = con.sql(sql)
    batches = (getattr(rel, "to_arrow_reader", None) or rel.record_batch)(1 << 20)
    for b in batches:
        a = b.column(0).to_numpy()
        if at + len(a) > rows:
            raise ValueError(f"more than the {rows} rows said")
        h[at:at + len(a)] = a
        at += len(a)
    if at != rows:
        raise ValueError(f"{at} rows, not the {rows} said")
    h.sort()
    return int(rows - 1 - np.count_nonzero(h[1:] != h[:-1])) if rows else 0


def _file_duplicates(con, path: Path, name: str) -> int:
    from tracekit.duck import file_literal

    lit = file_literal(path)
    return duplicate_rows(con, lambda: f"read_parquet({lit})", compared_columns(name))


def count_table_duplicates(writer, name: str) -> None:
    """Count the duplicate rows of event table ``name`` as soon as it is written (by the thread
    that wrote it, while other tables are still converted) into ``writer.counted_duplicates``,
    for :func:`count_duplicates`. Nothing for another table, or one counted already."""
    from tracekit.duck import scratch

    info = writer.manifest["tables"].get(name)
    if name not in EVENT_TABLES or name in writer.counted_duplicates or not info or "file" not in info:
        return
    folder = writer.path / f".dupcheck-{name}"
    con = scratch(memory_limit="256MB", threads=1, temp_directory=folder)
    try:
        writer.counted_duplicates[name] = _file_duplicates(con, writer.path / info["file"], name)
    finally:
        con.close()
        shutil.rmtree(folder, ignore_errors=True)


def count_duplicates(writer) -> dict[str, int]:
    """Count duplicated rows of the event tables written so far by ``writer`` (a RunWriter
    inside its with-block); record them in its manifest (:func:`notes` says them). Returns
    {table: extra rows}. A table whose count a collector made while converting it
    (``writer.counted_duplicates``) is not read again."""
    from tracekit.duck import scratch

    found: dict[str, int] = {}
    con = None  # opened for the first table not counted yet (none after an nsys conversion)
    try:
        for name in EVENT_TABLES:
            info = writer.manifest["tables"].get(name)
            if not info or info["rows"] < 2:
                continue
            n = writer.counted_duplicates.get(name)
            if n is None:
                if con is None:  # bounded memory on multi-GB runs: spills beside the run folder
                    con = scratch(memory_limit="512MB", temp_directory=writer.path / ".dupcheck")
                n = _file_duplicates(con, writer.path / info["file"], name)
            if n:
                found[name] = int(n)  # said once at convert (notes)
    finally:
        if con is not None:
            con.close()
            shutil.rmtree(writer.path / ".dupcheck", ignore_errors=True)
    writer.manifest["duplicate_rows"] = found
    return found


def count_nonpositive(writer) -> dict[str, int]:
    """Count rows with ``duration_ns <= 0`` per event table, for every collector (manifest
    ``nonpositive_duration_rows``; of them, those of exactly 0 ns in ``zero_duration_rows``, and
    the tables whose durations are all whole microseconds in ``microsecond_tables``). Such rows
    are kept; interval-based time metrics leave them out (docs/robustness.md). A negative
    duration is a warning (repeated by every command that reads the table); 0 ns rows are a
    note said once, at convert (:func:`notes`)."""
    from tracekit import schema
    from tracekit.duck import file_literal, scratch

    found: dict[str, int] = {}
    zero: dict[str, int] = {}
    coarse: list[str] = []
    con = scratch()
    try:
        for name in EVENT_TABLES:
            info = writer.manifest["tables"].get(name)
            if not info or not info["rows"] or "duration_ns" not in schema.table(name).column_names:
                continue  # nvtx_marks: instants, no duration
            path = file_literal(writer.path / info["file"])
            n0, neg, fine = con.execute(
                f"SELECT count(*) FILTER (duration_ns = 0), count(*) FILTER (duration_ns < 0), "
                f"count(*) FILTER (duration_ns % 1000 <> 0) FROM read_parquet({path})").fetchall()[0]
            if n0 or neg:
                found[name] = int(n0 + neg)
            if n0:
                zero[name] = int(n0)
                if not fine:
                    coarse.append(name)
            if neg:
                writer.warn(f"{neg} row(s) of {name} end before they start (negative duration); "
                            "kept, time metrics leave them out")
    finally:
        con.close()
    writer.manifest["nonpositive_duration_rows"] = found
    writer.manifest["zero_duration_rows"] = zero
    writer.manifest["microsecond_tables"] = coarse
    return found


def notes(manifest: dict) -> list[str]:
    """What the conversion found that needs no action, said once by ``tracekit convert`` (not
    repeated by every command, as warnings are): rows of 0 ns (events shorter than a trace's
    1 µs resolution, as the PyTorch profiler writes them) and duplicate rows, per table."""
    out = []
    coarse = set(manifest.get("microsecond_tables") or [])
    for name, n in (manifest.get("zero_duration_rows") or {}).items():
        why = ("shorter than the trace's 1 µs resolution" if name in coarse
               else "start and end on the same timestamp")
        out.append(f"{n} row(s) of {name} last 0 ns ({why}); kept, they add no time")
    for name, n in (manifest.get("duplicate_rows") or {}).items():
        out.append(f"{n} duplicate row(s) in {name} (identical to another row in every column); "
                   "kept, so totals count them")
    return out
