"""Registry of Nsight Systems export schema versions, kept as data in ``schemas.json``.

For every export schema version seen in the project's fixtures (``EXPORT_SCHEMA_VERSION`` from
``EXPORT_META_DATA`` or ``META_DATA_EXPORT``; exports older than schema 3.0 have neither and are
filed as ``pre-3.0``) the registry lists the columns of each table tracekit reads
(:data:`READ_TABLES`). ``tests/test_bad_corpus.py`` checks it against every fixture.

:func:`check` runs before any table is converted:

- a column that a required tracekit column needs and that no mapping alternative can supply is a
  :class:`~tracekit.errors.MissingColumnError` naming the export table and column;
- an export whose schema version is newer than every registered one is read best-effort, with one
  warning (manifest ``warnings`` and one line on stderr) listing the columns no known version has
  (unknown) and the columns tracekit reads that the newest known version has but this export
  lacks (missing).

Regenerate the data file after adding a fixture or a table to :data:`READ_TABLES`::

    python -m tracekit.collectors.nsys.versions ../shared/fixtures/nsys/*.sqlite
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

from tracekit.collectors.nsys import mapping as M
from tracekit.errors import MissingColumnError

DATA_FILE = Path(__file__).with_name("schemas.json")
PRE_3 = "pre-3.0"

# Tables tracekit reads (or will read: NVTX, OS runtime, scheduling, GPU info), besides the
# sources of every TableMap in mapping.py (added by read_tables()).
_EXTRA_TABLES = (
    "StringIds", "EXPORT_META_DATA", "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME",
    "NVTX_EVENTS", "OSRT_API", "SCHED_EVENTS", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU",
    "TARGET_INFO_CUDA_DEVICE", "GPU_METRICS", "TARGET_INFO_GPU_METRICS", "ThreadNames", "PROCESSES",
)


def read_tables() -> tuple[str, ...]:
    """Every export table tracekit reads, sorted."""
    names = set(_EXTRA_TABLES)
    for tmap in M.TABLE_MAPS.values():
        names.update(tmap.sources)
    return tuple(sorted(names))


READ_TABLES = read_tables()

# Columns read from tables that no TableMap describes (the others: the mappings' ``needs``).
_EXTRA_COLUMNS = {
    "StringIds": ("id", "value"),
    "EXPORT_META_DATA": ("name", "value"),
    "META_DATA_EXPORT": ("name", "value"),
    "TARGET_INFO_SESSION_START_TIME": ("utcEpochNs", "utcTime"),
}


def read_columns(table: str) -> set[str] | None:
    """Columns of export ``table`` tracekit reads; None when not known column by column (a table
    read by a collector not described by a TableMap: every column counts)."""
    cols: set[str] = set(_EXTRA_COLUMNS.get(table, ()))
    for tmap in M.TABLE_MAPS.values():
        if table in tmap.sources:
            for alts in tmap.columns.values():
                for a in alts:
                    cols.update(n for n in a.needs if "." not in n)
    return cols or None


def version_key(version: str | None) -> str:
    return PRE_3 if version in (None, "") else str(version)


def _as_tuple(key: str) -> tuple[int, ...]:
    if key == PRE_3:
        return (2,)
    return tuple(int(x) for x in re.findall(r"\d+", key)) or (0,)


@lru_cache(maxsize=1)
def registry() -> dict:
    """The registry: ``{"versions": {version: {"nsys": [...], "fixtures": [...],
    "tables": {table: [columns]}}}, ...}``."""
    return json.loads(DATA_FILE.read_text(encoding="utf-8"))


def known_versions() -> list[str]:
    return sorted(registry()["versions"], key=_as_tuple)


def table_columns(export_columns: dict[str, list[str]]) -> dict[str, list[str]]:
    """The part of an export's ``{table: [columns]}`` the registry records."""
    return {t: list(export_columns[t]) for t in READ_TABLES if t in export_columns}


def _required_gaps(export) -> list[tuple[str, str, str]]:
    """(export table, export column(s), tracekit column) for required tracekit columns that no
    alternative of the mapping can fill from this export."""
    from tracekit.schema import table as schema_table

    gaps = []
    for tmap in M.TABLE_MAPS.values():
        source = next((s for s in tmap.sources if s in export.columns), None)
        if source is None:
            continue
        tdef = schema_table(tmap.table)
        for name, alts in tmap.columns.items():
            if name.startswith("_") or not tdef.column(name).required:
                continue
            if any(all(_has(export, source, n) for n in a.needs) for a in alts):
                continue
            need = next((a.needs for a in alts if a.needs), ())
            lacking = [n for n in need if not _has(export, source, n)] or list(need)
            gaps.append((source, ", ".join(lacking), f"{tmap.table}.{name}"))
    return gaps


def _has(export, source: str, need: str) -> bool:
    """``need`` is a column of ``source`` or ``TABLE.column`` of another table."""
    tab, _, column = need.rpartition(".")
    return export.has(tab or source, column)


def compare(version: str | None, export_columns: dict[str, list[str]]) -> dict:
    """Compare an export's tables with the registry.

    Returns ``{"version", "status", "unknown_columns", "missing_columns"}`` where status is
    ``known`` (the version is registered), ``unlisted`` (not registered, but not newer than the
    newest registered one) or ``newer``; the column dicts are filled for ``newer`` only.
    """
    key = version_key(version)
    versions = registry()["versions"]
    out = {"version": key, "status": "known", "unknown_columns": {}, "missing_columns": {}}
    if key in versions:
        return out
    newest = known_versions()[-1]
    if _as_tuple(key) <= _as_tuple(newest):
        out["status"] = "unlisted"
        return out
    out["status"] = "newer"
    out["newest_known"] = newest
    seen: dict[str, set[str]] = {}
    for v in versions.values():
        for t, cols in v["tables"].items():
            seen.setdefault(t, set()).update(cols)
    latest = versions[newest]["tables"]
    for t, cols in table_columns(export_columns).items():
        unknown = [c for c in cols if c not in seen.get(t, set())]
        if unknown:
            out["unknown_columns"][t] = unknown
        read = read_columns(t)
        missing = [c for c in latest.get(t, []) if c not in cols and (read is None or c in read)]
        if missing:
            out["missing_columns"][t] = missing
    return out


def _fmt(d: dict[str, list[str]]) -> str:
    return "; ".join(f"{t}: {', '.join(c)}" for t, c in sorted(d.items())) or "none"


def check(export, writer, source: dict) -> dict:
    """Check an opened export against the registry before converting it.

    Raises :class:`MissingColumnError` when a required column cannot be read. Records the result
    under ``source["schema_registry"]``; for a newer schema adds a manifest warning and prints
    it on stderr.
    """
    gaps = _required_gaps(export)
    if gaps:
        table, column, needed = gaps[0]
        raise MissingColumnError(f"table {table} has no column {column} (needed for {needed})",
                                 path=export.path)
    result = compare(source.get("export_schema_version"), export.columns)
    source["schema_registry"] = result
    if result["status"] == "newer":
        msg = (f"export schema {result['version']} is newer than any tracekit knows "
               f"(newest: {result['newest_known']}); read best-effort. "
               f"Unknown columns: {_fmt(result['unknown_columns'])}. "
               f"Missing columns: {_fmt(result['missing_columns'])}")
        writer.warn(f"{export.path.name}: {msg}")  # the CLI prints it (tracekit.cli.messages)
    return result


def export_schema_version(kv: dict) -> str | None:
    """The export schema version of an export's metadata table ({name: value}):
    ``EXPORT_SCHEMA_VERSION``, else its ``_MAJOR``, ``_MINOR`` and ``_MICRO`` parts joined."""
    if kv.get("EXPORT_SCHEMA_VERSION"):
        return kv["EXPORT_SCHEMA_VERSION"]
    parts = [kv.get(k) for k in ("EXPORT_SCHEMA_VERSION_MAJOR", "EXPORT_SCHEMA_VERSION_MINOR",
                                  "EXPORT_SCHEMA_VERSION_MICRO")]
    return ".".join(str(p) for p in parts) if parts[0] is not None else None


# -- regeneration ----------------------------------------------------------------------------------

def build(paths: list[Path]) -> dict:
    """Registry data from fixture exports (versions merged; pre-3.0 exports: union of columns)."""
    from tracekit.collectors.nsys.export import Export

    versions: dict[str, dict] = {}
    for p in sorted(paths):
        with Export(p) as ex:
            kv: dict = {}
            for tab in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
                if ex.has(tab, "name", "value"):
                    kv = dict(ex.rows(f'SELECT name, value FROM "{tab}"'))
                    break
            key = version_key(export_schema_version(kv) if kv else None)
            entry = versions.setdefault(key, {"nsys": [], "fixtures": [], "tables": {}})
            nsys = kv.get("EXPORT_PRODUCT_VERSION")
            if nsys and nsys not in entry["nsys"]:
                entry["nsys"].append(nsys)
            entry["fixtures"].append(p.name)
            for t, cols in table_columns(ex.columns).items():
                have = entry["tables"].setdefault(t, [])
                have.extend(c for c in cols if c not in have)
    return {
        "about": "Columns of the Nsight Systems export tables tracekit reads, per export schema "
                 "version (EXPORT_SCHEMA_VERSION; 'pre-3.0' = no metadata table). Generated by "
                 "`python -m tracekit.collectors.nsys.versions FIXTURES...`; checked by "
                 "tests/test_bad_corpus.py.",
        "read_tables": list(READ_TABLES),
        "versions": {k: versions[k] for k in sorted(versions, key=_as_tuple)},
    }


def main(argv: list[str]) -> int:
    data = build([Path(a) for a in argv])
    DATA_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {DATA_FILE} ({len(data['versions'])} versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
