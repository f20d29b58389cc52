"""Checks of converted tables that no single collector can make while streaming.

:func:`count_nonpositive` counts rows with a zero or negative duration in every event table,
whatever the collector (manifest ``nonpositive_duration_rows``).

:func:`count_duplicates` finds rows identical in every column (a profiler that flushed a buffer
twice, a trace concatenated with itself). They are kept -- dropping rows silently would change
totals that ``nsys stats`` reports -- and counted in the manifest (``duplicate_rows``) with a
warning, so a doubled total can be explained.
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
    inside its with-block); record them in its manifest and warn. Returns {table: extra rows}."""
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
                found[name] = int(n)
                writer.warn(f"{n} duplicate row(s) in {name} (identical to another row in every "
                            "column); kept, so totals count them")
    finally:
        con.close()
        shutil.rmtree(writer.path / ".dupcheck", ignore_errors=True)
    writer.manifest["duplicate_rows"] = found
    return found


def count_nonpositive(writer) -> dict[str, int]:
    """Count rows with ``duration_ns <= 0`` per event table, for every collector (manifest
    ``nonpositive_duration_rows``). Such rows are kept; interval-based time metrics leave them
    out (docs/robustness.md). Warns unless the collector already warned about that table."""
    from tracekit import schema
    from tracekit.duck import file_literal, scratch

    found: dict[str, int] = {}
    con = scratch()
    try:
        for name in EVENT_TABLES:
            info = writer.manifest["tables"].get(name)
            if not info or not info["rows"] or "duration_ns" not in schema.table(name).column_names:
                continue  # nvtx_marks: instants, no duration
            path = file_literal(writer.path / info["file"])
            n = con.execute(f"SELECT count(*) FROM read_parquet({path}) "
                            "WHERE duration_ns <= 0").fetchall()[0][0]
            if n:
                found[name] = int(n)
                if not any(f"of {name} have a zero or negative duration" in w
                           for w in writer.manifest["warnings"]):
                    writer.warn(f"{n} row(s) of {name} have a zero or negative duration")
    finally:
        con.close()
    writer.manifest["nonpositive_duration_rows"] = found
    return found
