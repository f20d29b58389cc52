"""Decoding of nsys export tables: the per-export context (NVTX event types, lookup
dictionaries, enums) and each table's reading plan (:class:`TablePlan`): which source columns
feed which tracekit column (from :mod:`tracekit.collectors.nsys.mapping`), the SQL that reads
them, with or without per-value type guards, and the Arrow decoding of every batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.collectors.nsys import mapping as M
from tracekit.collectors.nsys.export import Export, TypeMismatch, decode_utf8
from tracekit.errors import InputError
from tracekit.schema import table as schema_table

# NVTX domain and category names (repeated on every range of theirs) are cut here, with a warning
MAX_LABEL_BYTES = 1024


# -- per-export context: event types and small lookup dictionaries ----------------------------

class Context:
    """What decoding needs beyond a row: NVTX event type ids, lookup dictionaries, enums."""

    def __init__(self, export: Export):
        self.export = export
        self._lookups: dict[str, dict[int, str]] = {}
        self._names: dict[str, dict[int, str]] | None = None  # NVTX names (_nvtx_names)
        self._lock = threading.Lock()
        self.event_types = dict(M.FALLBACK_EVENT_TYPES)
        if export.has("ENUM_NSYS_EVENT_TYPE", "id", "name"):
            for i, name in export.rows("SELECT id, name FROM ENUM_NSYS_EVENT_TYPE"):
                if name in self.event_types:
                    self.event_types[name] = int(i)

    def types(self, names: tuple[str, ...]) -> str:
        return ", ".join(str(self.event_types[n]) for n in names)

    def where(self, clause: str) -> str:
        return clause.format(**self.event_types)

    def lookup(self, name: str) -> dict[int, str]:
        with self._lock:  # tables decode on several threads: each lookup is read once
            if name not in self._lookups:
                self._lookups[name] = getattr(self, f"_lookup_{name}")()
            return self._lookups[name]

    def _nvtx_names(self, which: str) -> dict[int, str]:
        """The ``which`` ('domain' or 'category') names of the export's NVTX naming events.

        Both come from one scan of NVTX_EVENTS (millions of rows in a large export, no index on
        eventType): the first lookup asked reads the naming rows of both."""
        if self._names is not None:
            return self._names.get(which, {})
        self._names = {}
        ex = self.export
        if not ex.has("NVTX_EVENTS", "eventType", "globalTid", "domainId"):
            return {}
        text = M.NVTX_TEXT if ex.has("NVTX_EVENTS", "textId", "text") else M.NVTX_TEXT_OLD
        kinds = {"domain": (M.NVTX_DOMAIN_TYPES, M.NVTX_DOMAIN_KEY.sql)}
        if ex.has("NVTX_EVENTS", "category"):
            kinds["category"] = (M.NVTX_CATEGORY_TYPES, M.NVTX_CATEGORY_KEY.sql)
        # the first (earliest) naming event of each key wins, as nsys stats does for domains;
        # a name is repeated on every range of its domain, so it is cut at MAX_LABEL_BYTES (a
        # 64 MB domain name overflowed Arrow's take, a 900 MB one took 5.4 GB)
        cut = f"substr(CAST(({text.sql}) AS BLOB), 1, {MAX_LABEL_BYTES + 1})"
        keys = ", ".join(f"CASE WHEN t.eventType IN ({self.types(types)}) THEN {key_sql} END"
                         for types, key_sql in kinds.values())
        types = ", ".join(self.types(types) for types, _key in kinds.values())
        rows = ex.rows(f"SELECT {keys}, {cut} FROM NVTX_EVENTS AS t "
                       f"WHERE t.eventType IN ({types}) ORDER BY t.start DESC")
        out: dict[str, dict[int, str]] = {k: {} for k in kinds}
        for row in rows:
            for kind, k in zip(kinds, row):
                if k is not None:
                    out[kind][int(k)] = self._label(row[-1])
        self._names = out
        return out.get(which, {})

    def _label(self, value) -> str:
        """A name read as BLOB (at most MAX_LABEL_BYTES + 1 bytes) as text, cut and counted."""
        raw = value if isinstance(value, bytes) else str(value or "").encode()
        if len(raw) <= MAX_LABEL_BYTES:
            return raw.decode("utf-8", "replace")
        self.export.labels_cut += 1
        return raw[:MAX_LABEL_BYTES].decode("utf-8", "replace") + "…"

    def _lookup_nvtx_domain(self) -> dict[int, str]:
        return self._nvtx_names("domain")

    def _lookup_nvtx_category(self) -> dict[int, str]:
        if not self.export.has("NVTX_EVENTS", "category"):
            return {}
        return self._nvtx_names("category")

    def _lookup_gpu_metric(self) -> dict[int, str]:
        if not self.export.has("TARGET_INFO_GPU_METRICS", "typeId", "metricId", "metricName"):
            return {}
        rows = self.export.rows("SELECT (typeId << 32) | (metricId & 4294967295), metricName "
                                "FROM TARGET_INFO_GPU_METRICS")
        return {int(k): str(v) for k, v in rows}

    def _lookup_cuda_device(self) -> dict[int, str]:
        """GPU id -> CUDA device ordinal (as text, cast back by the schema)."""
        ex = self.export
        out: dict[int, str] = {}
        if ex.has("TARGET_INFO_GPU", "id", "cuDevice"):
            for gid, cu in ex.rows("SELECT id, cuDevice FROM TARGET_INFO_GPU"):
                out[int(gid)] = str(cu if cu is not None else gid)
        if ex.has("TARGET_INFO_CUDA_DEVICE", "gpuId", "cudaId"):
            for gid, cu in ex.rows("SELECT gpuId, min(cudaId) FROM TARGET_INFO_CUDA_DEVICE GROUP BY gpuId"):
                if gid is not None:
                    out[int(gid)] = str(cu)
        return out


# -- decoding -------------------------------------------------------------------------------

def _kind(t: pa.DataType | None, decode: str) -> str:
    if decode == "text":
        return "blob"
    if decode != "raw":
        return "int"
    if t is not None and pa.types.is_floating(t):
        return "float"
    if t is not None and pa.types.is_string(t):
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


def _decode_lookup(arr: pa.Array, name: str, ctx: Context) -> pa.Array:
    """Keys (int64, computed in SQL) -> names; keys without an entry get a visible label.

    The names are made for the batch's distinct keys and then taken for every row: a batch of
    NVTX ranges holds a few domains and categories (a process's), so the labels' text is built a
    few times, not 65,536 (1.2 s -> 0.6 s of CPU for the benchmark export's 5 M ranges)."""
    enc = arr.dictionary_encode()
    return _lookup_names(enc.dictionary, name, ctx).take(enc.indices)


def _lookup_names(arr: pa.Array, name: str, ctx: Context) -> pa.Array:
    """:func:`_decode_lookup` of each key of ``arr``."""
    mapping = ctx.lookup(name)
    if mapping:
        out = _decode_enum(arr, mapping)
        missing = pc.and_(pc.is_valid(arr), pc.invert(pc.is_in(arr, value_set=pa.array(list(mapping), pa.int64()))))
        if not pc.any(missing).as_py():
            return out
    low = pc.bit_wise_and(arr, pa.scalar(0xFFFFFFFF, pa.int64()))
    if name == "nvtx_domain":  # domain 0 is the default domain
        label = pc.if_else(pc.equal(low, 0), pa.scalar("", pa.string()),
                           pc.binary_join_element_wise("<unknown domain ", low.cast(pa.string()), ">", ""))
    elif name == "nvtx_category":  # an unnamed category is shown by its number
        label = low.cast(pa.string())
    elif name == "cuda_device":  # no mapping: the GPU id
        label = arr.cast(pa.string())
    else:
        label = pc.binary_join_element_wise(f"<unknown {name} ", low.cast(pa.string()), ">", "")
    # no mapping (an export without naming events: the usual case for NVTX domains and
    # categories): every key is missing and the label is null where the key is
    return pc.if_else(missing, label, out) if mapping else label


def _decode_style(arr: pa.Array, ctx: Context) -> pa.Array:
    pushpop = pa.array([ctx.event_types[n] for n in M.NVTX_PUSHPOP_TYPES], pa.int64())
    return pc.if_else(pc.is_in(arr, value_set=pushpop), pa.scalar("push/pop"), pa.scalar("start/end"))


def _from_sql(export: Export, table: str, numeric: set[str]) -> str:
    """``table`` with each column in ``numeric`` made NULL where it does not hold a number (text
    or blob in a damaged or hand-edited export: SQLite would cast 'abc' to 0) or holds a real
    outside int64. Other columns pass through. SQLite flattens this subquery."""
    if not numeric:
        return f'"{table}"'
    cols = ['rowid AS "rowid"']  # range_id and the scheduler order use the source rowid
    for c in export.columns[table]:
        if c in numeric:
            cols.append(f"CASE typeof(\"{c}\") WHEN 'integer' THEN \"{c}\" WHEN 'real' THEN "
                        f"CASE WHEN abs(\"{c}\") < 9.2e18 THEN \"{c}\" END END AS \"{c}\"")
        else:
            cols.append(f'"{c}"')
    return f'(SELECT {", ".join(cols)} FROM "{table}")'


def _relabel(arr: pa.Array, mapping: dict[str, str]) -> pa.Array:
    """Rename decoded labels listed in ``mapping`` (see mapping.RELABEL); others stay."""
    keys = pa.array(list(mapping), pa.string())
    vals = pa.array(list(mapping.values()), pa.string())
    idx = pc.index_in(arr, value_set=keys)
    return pc.if_else(pc.is_null(idx), arr, pc.take(vals, idx))


class TablePlan:
    """The resolved reading plan of one table for one export."""

    def __init__(self, export: Export, tmap: M.TableMap, ctx: Context):
        self.tmap = tmap
        self.ctx = ctx
        self.source = next((s for s in tmap.sources if s in export.columns), None)
        self.select: list[tuple[str, str, str]] = []
        self.decoders: dict[str, str] = {}
        self.missing: list[str] = []
        self.numeric: set[str] = set()  # source columns read as numbers (sanitized by _from_sql)
        self.required: dict[str, tuple[str, ...]] = {}
        self.arrow: dict[str, tuple[str, tuple[str, ...]]] = {}  # computed in Arrow (Expr.arrow)
        if self.source is None:
            return
        tdef = schema_table(tmap.table)
        chosen_of: dict[str, M.Expr] = {}
        for name, alts in tmap.columns.items():
            chosen = next((a for a in alts if self._available(export, a)), None)
            if chosen is None:
                self.missing.append(name)
                chosen = M.null()
            chosen_of[name] = chosen
            ctype = None if name.startswith("_") else tdef.column(name).type
            self.select.append((name, chosen.sql, _kind(ctype, chosen.decode)))
            self.decoders[name] = chosen.decode
            if self.select[-1][2] != "blob":
                self.numeric.update(n for n in chosen.needs if "." not in n)
            if ctype is not None and tdef.column(name).required:
                self.required[name] = chosen.needs
        # source columns read as they are, by the tracekit column holding them
        plain = {e.needs[0]: n for n, e in chosen_of.items()
                 if e.decode == "raw" and len(e.needs) == 1 and e.sql == f"t.{e.needs[0]}"}
        for name, e in chosen_of.items():
            if e.arrow and all(c in plain for c in e.arrow[1:]):
                self.arrow[name] = (e.arrow[0], tuple(plain[c] for c in e.arrow[1:]))
        computed = set(tmap.computed)
        for c in tdef.columns:
            if c.required and c.name not in self.decoders and c.name not in computed:
                raise InputError(
                    f"table {self.source} lacks the column(s) needed for {tmap.table}.{c.name}",
                    path=export.path)

    def _available(self, export: Export, expr: M.Expr) -> bool:
        for need in expr.needs:
            tab, _, column = need.rpartition(".")
            if not export.has(tab or self.source, column):
                return False
        return True

    @property
    def where(self) -> str:
        return self.ctx.where(self.tmap.where) if self.tmap.where else ""

    def count(self, export: Export) -> int:
        where = f" WHERE {self.where}" if self.where else ""
        return export.rows(f'SELECT count(*) FROM "{self.source}" AS t{where}')[0][0]

    def read_select(self, strict: bool) -> list[tuple[str, str, str]]:
        """What :meth:`batches` reads from SQLite: every column, less (``strict``) those
        computed in Arrow from others (:attr:`arrow`)."""
        return [c for c in self.select if not (strict and c[0] in self.arrow)]

    def _computed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (of :meth:`read_select`) with the columns of :attr:`arrow` computed, in
        the order of :attr:`select`; :class:`TypeMismatch` where SQLite's arithmetic would not
        have given an integer (an overflow: the guarded read evaluates the SQL)."""
        cols = {n: batch.column(n) for n in batch.schema.names}
        for name, (op, args) in self.arrow.items():
            a = [cols[x] for x in args]
            if op == "difference":
                try:
                    cols[name] = pc.subtract_checked(a[0], a[1])
                except pa.ArrowInvalid:
                    raise TypeMismatch(self.source) from None
            elif op == "is_null":  # as SQLite's 0/1
                cols[name] = pc.is_null(a[0]).cast(pa.int64())
            else:
                raise ValueError(f"mapping {self.tmap.table}.{name}: unknown Arrow computation {op!r}")
        return pa.RecordBatch.from_arrays([cols[n] for n, _e, _k in self.select],
                                          names=[n for n, _e, _k in self.select])

    def batches(self, export: Export, advance: Callable[[int], None], strict: bool = False,
                threads: int = 1) -> Iterator[pa.RecordBatch]:
        """Decoded batches of this table, in source rowid order. ``strict`` reads numbers
        unguarded (raises :class:`TypeMismatch` on a value of another type); ``threads`` > 1
        splits a large table into rowid ranges read ahead on that many threads."""
        source = f'"{self.source}"' if strict else _from_sql(export, self.source, self.numeric)
        conds = [self.where] if self.where else []
        ranges = export.rowid_ranges(self.source) if threads > 1 else None
        if ranges:
            sqls = [f"{source} AS t WHERE " + " AND ".join([f"t.rowid > {lo} AND t.rowid <= {hi}"] + conds)
                    for lo, hi in ranges]
        else:
            sqls = [f"{source} AS t" + (f" WHERE {conds[0]}" if conds else "")]
        for batch in export.scan_ranges(self.read_select(strict), sqls, threads, strict=strict):
            if strict and self.arrow:
                batch = self._computed(batch)
            for name, needs in self.required.items():
                if batch.column(name).null_count:
                    raise InputError(
                        f"table {self.source}: {batch.column(name).null_count} row(s) with a NULL or "
                        f"non-numeric {'/'.join(needs) or name} (needed for {self.tmap.table}.{name})",
                        path=export.path)
            cols = {}
            for name in batch.schema.names:
                arr = batch.column(name)
                dec = self.decoders[name]
                if dec == "string":
                    arr = export.resolve_strings(arr)
                elif dec == "string_api":
                    arr = pc.replace_substring_regex(export.resolve_strings(arr), r"_v\d{4,5}$", "")
                elif dec == "text":
                    arr = decode_utf8(arr)
                elif dec == "bool":
                    arr = pc.not_equal(arr, 0)
                elif dec == "nvtx_style":
                    arr = _decode_style(arr, self.ctx)
                elif dec.startswith("lookup:"):
                    arr = _decode_lookup(arr, dec[7:], self.ctx)
                elif dec.startswith("enum:"):
                    tab = dec[5:]
                    arr = _decode_enum(arr, export.enum(tab, M.FALLBACK_ENUMS.get(tab)))
                    relabel = M.RELABEL.get((self.tmap.table, name))
                    if relabel:
                        arr = _relabel(arr, relabel)
                elif pa.types.is_binary(arr.type):
                    arr = decode_utf8(arr)
                cols[name] = arr
            advance(batch.num_rows)
            yield pa.RecordBatch.from_pydict(cols)
