"""Nsight Systems collector: SQLite exports (and .nsys-rep/.qdrep reports via the local nsys).

Reads every table listed in :mod:`tracekit.collectors.nsys_mapping` in Arrow batches (memory does
not grow with the export's size; no Python work per row) and writes the run-folder tables.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.collectors import nsys_mapping as M
from tracekit.collectors import nsys_versions
from tracekit.collectors.sqlite_export import Export, decode_utf8, is_sqlite
from tracekit.errors import InputError, MissingTableError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter, describe_input
from tracekit.schema import table as schema_table

NAME = "nsys"
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
            out[(m.table, c)] = "; else ".join(a.describe(src) for a in alts)
    return out


def _kind(t: pa.DataType, decode: str) -> str:
    if decode != "raw":
        return "int" if decode in ("string", "string_api") or decode.startswith("enum:") else "blob"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_string(t):
        return "blob"
    return "int"


def _decode_enum(arr: pa.Array, mapping: dict[int, str]) -> pa.Array:
    keys = pa.array(list(mapping), pa.int64())
    values = pa.array(list(mapping.values()), pa.string())
    idx = pc.index_in(arr, value_set=keys)
    out = pc.take(values, idx)
    unknown = pc.and_(pc.is_null(idx), pc.is_valid(arr))
    if pc.any(unknown).as_py():
        out = pc.if_else(unknown, arr.cast(pa.string()), out)
    return out


class _TablePlan:
    """The resolved reading plan of one table for one export."""

    def __init__(self, export: Export, tmap: M.TableMap):
        self.tmap = tmap
        self.source = next((s for s in tmap.sources if s in export.columns), None)
        self.select: list[tuple[str, str, str]] = []
        self.decoders: dict[str, str] = {}
        self.missing: list[str] = []
        if self.source is None:
            return
        tdef = schema_table(tmap.table)
        for name, alts in tmap.columns.items():
            chosen = next((a for a in alts if export.has(self.source, *a.needs)), None)
            if chosen is None:
                self.missing.append(name)
                continue
            self.select.append((name, chosen.sql, _kind(tdef.column(name).type, chosen.decode)))
            self.decoders[name] = chosen.decode
        for c in tdef.columns:
            if c.required and c.name not in self.decoders:
                raise InputError(
                    f"table {self.source} lacks the column(s) needed for {tmap.table}.{c.name}",
                    path=export.path)

    def batches(self, export: Export, advance) -> "iter":
        where = f" WHERE {self.tmap.where}" if self.tmap.where else ""
        for batch in export.scan(self.select, f'"{self.source}" AS t{where}'):
            cols = {}
            for name in batch.schema.names:
                arr = batch.column(name)
                dec = self.decoders[name]
                if dec == "string":
                    arr = export.resolve_strings(arr)
                elif dec == "string_api":
                    arr = pc.replace_substring_regex(export.resolve_strings(arr), r"_v\d{4}$", "")
                elif dec == "text":
                    arr = decode_utf8(arr)
                elif dec.startswith("enum:"):
                    tab = dec[5:]
                    arr = _decode_enum(arr, export.enum(tab, M.FALLBACK_ENUMS.get(tab)))
                    if name == "kind" and self.tmap.table == "memcpy":
                        arr = _short_copy_kind(arr)
                elif pa.types.is_binary(arr.type):
                    arr = decode_utf8(arr)
                cols[name] = arr
            advance(batch.num_rows)
            yield pa.RecordBatch.from_pydict(cols)


def _short_copy_kind(arr: pa.Array) -> pa.Array:
    keys = pa.array(list(M.COPY_KIND_SHORT), pa.string())
    vals = pa.array(list(M.COPY_KIND_SHORT.values()), pa.string())
    idx = pc.index_in(arr, value_set=keys)
    return pc.if_else(pc.is_null(idx), arr, pc.take(vals, idx))


def _metadata(export: Export) -> dict:
    meta: dict = {}
    for tab in ("EXPORT_META_DATA", "META_DATA_EXPORT"):
        if export.has(tab, "name", "value"):
            kv = dict(export.rows(f'SELECT name, value FROM "{tab}"'))
            meta["export_metadata_table"] = tab
            meta["export_schema_version"] = kv.get("EXPORT_SCHEMA_VERSION") or _schema_version(kv)
            meta["nsys_version"] = kv.get("NSYS_VERSION") or kv.get("EXPORT_PROGRAM_VERSION")
            break
    else:
        meta["export_schema_version"] = None
        meta["nsys_version"] = None
    if export.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = export.rows("SELECT utcEpochNs, utcTime FROM TARGET_INFO_SESSION_START_TIME LIMIT 1")
        if row:
            meta["session_start_utc_epoch_ns"] = row[0][0]
            meta["session_start_utc"] = row[0][1]
    return meta


def _schema_version(kv: dict) -> str | None:
    parts = [kv.get(k) for k in ("EXPORT_SCHEMA_VERSION_MAJOR", "EXPORT_SCHEMA_VERSION_MINOR",
                                  "EXPORT_SCHEMA_VERSION_MICRO")]
    return ".".join(str(p) for p in parts) if parts[0] is not None else None


def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one nsys export (or report) into ``writer``'s run folder.

    Raises :class:`InputError` for more than one export, a file SQLite cannot read, or an export
    without the StringIds table (not an nsys export); :class:`MissingTableError` subclasses it.
    """
    if len(paths) != 1:
        raise InputError("give one nsys export per run folder (got %d)" % len(paths))
    path = paths[0]
    if path.suffix in REPORT_SUFFIXES:
        from tracekit.collectors.nsys_report import export_report

        writer.manifest["inputs"].append(describe_input(path, "nsys-report"))
        sqlite_path = export_report(path, writer.path)
    else:
        sqlite_path = path
        writer.manifest["inputs"].append(describe_input(path, "nsys-sqlite"))
    with Export(sqlite_path) as export:
        if "StringIds" not in export.columns:
            raise MissingTableError("no StringIds table: not an Nsight Systems SQLite export", path=path)
        source = {"format": "nsys-sqlite", **_metadata(export), "tables_read": {}, "missing_columns": {}}
        writer.manifest["sources"][NAME] = source
        nsys_versions.check(export, writer, source)  # schema registry: required columns, newer versions
        for tname, tmap in M.TABLE_MAPS.items():
            plan = _TablePlan(export, tmap)
            if plan.source is None:
                writer.not_captured(tname, f"export has no {' or '.join(tmap.sources)} table")
                continue
            total = export.rows(f'SELECT max(rowid) FROM "{plan.source}"')[0][0] if export.columns[plan.source] else None
            advance = progress.task(f"{tname:<16}", total=total)
            writer.write_table(tname, plan.batches(export, advance))
            source["tables_read"][tname] = plan.source
            if plan.missing:
                source["missing_columns"][tname] = plan.missing
    if sqlite_path is not path and Path(sqlite_path).exists():
        Path(sqlite_path).unlink()
