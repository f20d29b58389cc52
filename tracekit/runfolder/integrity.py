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

# Event tables checked, and the columns left out of the comparison: IDs tracekit assigns per row
# (and values derived from them) would make every row unique.
EVENT_TABLES = {
    "kernels": (), "cuda_api": (), "memcpy": (), "memset": (), "cuda_sync": (),
    "nvtx_ranges": ("range_id", "parent_range_id", "depth"), "nvtx_marks": (), "osrt_api": (),
}


def count_duplicates(writer) -> dict[str, int]:
    """Count duplicated rows of the event tables written so far by ``writer`` (a RunWriter
    inside its with-block); record them in its manifest (:func:`notes` says them). Returns
    {table: extra rows}."""
    from tracekit import schema
    from tracekit.duck import file_literal, scratch

    found: dict[str, int] = {}
    # bounded memory on multi-GB runs: the DISTINCT spills beside the run folder being written
    con = scratch(memory_limit="512MB", temp_directory=writer.path / ".dupcheck")
    try:
        for name, skip in EVENT_TABLES.items():
            info = writer.manifest["tables"].get(name)
            if not info or info["rows"] < 2:
                continue
            cols = ", ".join(f'"{c}"' for c in schema.table(name).column_names if c not in skip)
            path = file_literal(writer.path / info["file"])
            # Identical rows have equal hashes, so when every row's hash is distinct there is no
            # duplicate (a third of the time and memory of the exact DISTINCT, which runs only
            # when some hashes are shared).
            n = con.execute(f"SELECT count(*) - count(DISTINCT hash({cols})) "
                            f"FROM read_parquet({path})").fetchall()[0][0]
            if n:
                n = con.execute(
                    f"SELECT count(*) - (SELECT count(*) FROM (SELECT DISTINCT {cols} "
                    f"FROM read_parquet({path}))) FROM read_parquet({path})").fetchall()[0][0]
            if n:
                found[name] = int(n)  # said once at convert (notes)
    finally:
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
