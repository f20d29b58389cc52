"""Building blocks of the schema: :class:`Column` and :class:`Table`.

A table definition is the single source of truth for a Parquet table in a run folder: its Arrow
types (used when writing), its validation (used by every collector), and its documentation
(``docs/schema.md`` is generated from it by :func:`tracekit.schema.docs.render_markdown`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracekit.errors import SchemaError

if TYPE_CHECKING:  # pyarrow is imported where Arrow types are built: `tracekit query` needs none
    import pyarrow as pa

# Units used in the schema. Column names carry the unit as a suffix where it has one
# (``start_ns``, ``bytes``, ``..._bytes_per_s``); this list documents the vocabulary.
UNITS = {
    "ns": "nanoseconds (int64); timestamps are on the profiler's own clock, see the manifest",
    "s": "seconds (float64)",
    "min": "minutes (float64)",
    "bytes": "bytes",
    "bytes/s": "bytes per second",
    "Hz": "cycles per second",
    "count": "a count of events, instructions, threads ...",
    "id": "an identifier; compare for equality only",
    "text": "free text",
    "enum": "a decoded enumeration value (the set of values is listed in the description)",
    "flag": "boolean",
    "value": "a value whose unit is given in a neighbouring column or row",
    "FLOP": "floating-point operations",
    "%": "percent, 0-100",
    "ppm": "parts per million (1e-6)",
}


class ColumnType:
    """A column's type, named without importing pyarrow (a query reads the schema but builds no
    Arrow type; importing pyarrow and numpy is most of a small query's start-up, issue 39).

    ``str()`` is the Arrow type's text (``int64``, ``list<item: string>``); :attr:`sql` is the
    DuckDB type (``BIGINT``, ``VARCHAR[]``); :attr:`arrow` is the :class:`pyarrow.DataType`,
    built on first use. Made by :data:`I8` ... :data:`BOOL` and :func:`list_of`."""

    __slots__ = ("_factory", "_item", "sql", "_arrow")

    def __init__(self, factory: str, sql: str, item: ColumnType | None = None):
        self._factory, self._item, self.sql, self._arrow = factory, item, sql, None

    @property
    def arrow(self) -> pa.DataType:
        if self._arrow is None:
            import pyarrow as pa

            fn = getattr(pa, self._factory)
            self._arrow = fn(self._item.arrow) if self._item is not None else fn()
        return self._arrow

    def __str__(self) -> str:
        if self._item is not None:
            return f"list<item: {self._item}>"
        return {"bool_": "bool", "float64": "double"}.get(self._factory, self._factory)

    def __repr__(self) -> str:
        return f"ColumnType({self})"


I8, I16, I32, I64 = (ColumnType(f"int{n}", sql) for n, sql in
                     ((8, "TINYINT"), (16, "SMALLINT"), (32, "INTEGER"), (64, "BIGINT")))
F64, STR, BOOL = ColumnType("float64", "DOUBLE"), ColumnType("string", "VARCHAR"), ColumnType("bool_", "BOOLEAN")


def list_of(item: ColumnType) -> ColumnType:
    """The type of a list column of ``item`` values (Arrow ``list<item: ...>``, DuckDB ``T[]``)."""
    return ColumnType("list_", item.sql + "[]", item)


@dataclass(frozen=True)
class Column:
    """One column of a table.

    ``name``: snake_case, with the unit as a suffix where it has one.
    ``kind``: the :class:`ColumnType`; :attr:`type` is its Arrow type, written to Parquet.
    ``unit``: a key of :data:`UNITS`.
    ``description``: meaning; where it comes from in each input format is documented by the
    collectors' mappings and rendered next to it in ``docs/schema.md``.
    ``required``: when True a collector must provide a non-null value in every row.
    """

    name: str
    kind: ColumnType
    unit: str
    description: str
    required: bool = False

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"column {self.name}: unknown unit {self.unit!r}")

    @property
    def type(self) -> pa.DataType:
        """The Arrow type written to Parquet (imports pyarrow)."""
        return self.kind.arrow


def host_thread(tid: str = "OS thread ID.", *, required: bool = False) -> tuple[Column, Column]:
    """The ``pid`` and ``tid`` columns (int64 ids) of a row made on a host thread; ``tid``: the
    thread column's description."""
    return (Column("pid", I64, "id", "OS process ID.", required=required),
            Column("tid", I64, "id", tid, required=required))


def launch_dims(grid_from: str = "", block_from: str = "") -> tuple[Column, ...]:
    """``grid_x`` .. ``grid_z`` and ``block_x`` .. ``block_z`` (int32 counts) of a kernel launch;
    ``grid_from`` / ``block_from``: where the x column comes from, e.g. ``" (launch__grid_dim_x)"``,
    appended to its description."""
    return tuple(Column(f"{kind}_{axis}", I32, "count",
                        f"{what}, {axis}{source if axis == 'x' else ''}.")
                 for kind, what, source in (("grid", "Grid size in blocks", grid_from),
                                            ("block", "Block size in threads", block_from))
                 for axis in "xyz")


@dataclass(frozen=True)
class Table:
    """A table of a run folder: ``name.parquet`` (or a folder ``name/`` of Parquet parts)."""

    name: str
    description: str
    columns: tuple[Column, ...]
    group: str = "timeline"
    _by_name: dict = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name}: duplicate column names")
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise SchemaError(f"table {self.name} has no column {name!r}") from None

    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema written to Parquet (column order as defined here)."""
        import pyarrow as pa

        return pa.schema(
            [pa.field(c.name, c.type, nullable=not c.required) for c in self.columns],
            metadata={b"tracekit.table": self.name.encode()},
        )

    def empty(self) -> pa.Table:
        return self.arrow_schema().empty_table()

    def conform(self, data: pa.Table | pa.RecordBatch) -> pa.Table | pa.RecordBatch:
        """Return ``data`` with exactly this table's columns, order and types.

        Columns the schema has but ``data`` lacks are added as all-null (an input format that
        does not record a quantity leaves it NULL, never 0). Columns are cast with safe casts
        (no silent overflow or truncation); dictionary-encoded strings stay dictionary-encoded.

        Raises :class:`SchemaError` when ``data`` has a column the schema does not define, a
        value that cannot be cast, or a null in a required column. Those are collector bugs.
        """
        import pyarrow as pa

        extra = [n for n in data.schema.names if n not in self._by_name]
        if extra:
            raise SchemaError(f"table {self.name}: columns not in the schema: {', '.join(extra)}")
        n = data.num_rows
        arrays = []
        for col in self.columns:
            if col.name in data.schema.names:
                arr = data.column(col.name)
                arr = _cast(arr, col, self.name)
            else:
                if col.required:
                    raise SchemaError(f"table {self.name}: required column {col.name} missing")
                arr = pa.nulls(n, type=col.type)
            if col.required and arr.null_count:
                raise SchemaError(
                    f"table {self.name}: {arr.null_count} null value(s) in required column {col.name}"
                )
            arrays.append(arr)
        schema = self.arrow_schema()
        # dictionary-encoded strings keep their encoding in the written schema
        fields = [
            pa.field(f.name, a.type, nullable=f.nullable) for f, a in zip(schema, arrays)
        ]
        schema = pa.schema(fields, metadata=schema.metadata)
        if isinstance(data, pa.RecordBatch):
            return pa.RecordBatch.from_arrays(
                [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                schema=schema,
            )
        return pa.Table.from_arrays(arrays, schema=schema)


def _cast(arr, col: Column, table: str):
    import pyarrow as pa

    target = col.type
    t = arr.type
    if pa.types.is_dictionary(t) and pa.types.is_string(target):
        if pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type):
            return arr
    if t == target:
        return arr
    try:
        return arr.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"table {table}: column {col.name}: cannot cast {t} to {target}: {exc}") from None
