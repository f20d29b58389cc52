"""Building blocks of the schema: :class:`Column` and :class:`Table`.

A table definition is the single source of truth for a Parquet table in a run folder: its Arrow
types (used when writing), its validation (used by every collector), and its documentation
(``docs/schema.md`` is generated from it by :func:`tracekit.schema.docs.render_markdown`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from tracekit.errors import SchemaError

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


@dataclass(frozen=True)
class Column:
    """One column of a table.

    ``name``: snake_case, with the unit as a suffix where it has one.
    ``type``: the Arrow type written to Parquet.
    ``unit``: a key of :data:`UNITS`.
    ``description``: meaning; where it comes from in each input format is documented by the
    collectors' mappings and rendered next to it in ``docs/schema.md``.
    ``required``: when True a collector must provide a non-null value in every row.
    """

    name: str
    type: pa.DataType
    unit: str
    description: str
    required: bool = False

    def __post_init__(self):
        if self.unit not in UNITS:
            raise ValueError(f"column {self.name}: unknown unit {self.unit!r}")


def host_thread(tid: str = "OS thread ID.", *, required: bool = False) -> tuple[Column, Column]:
    """The ``pid`` and ``tid`` columns (int64 ids) of a row made on a host thread; ``tid``: the
    thread column's description."""
    return (Column("pid", pa.int64(), "id", "OS process ID.", required=required),
            Column("tid", pa.int64(), "id", tid, required=required))


def launch_dims(grid_from: str = "", block_from: str = "") -> tuple[Column, ...]:
    """``grid_x`` .. ``grid_z`` and ``block_x`` .. ``block_z`` (int32 counts) of a kernel launch;
    ``grid_from`` / ``block_from``: where the x column comes from, e.g. ``" (launch__grid_dim_x)"``,
    appended to its description."""
    return tuple(Column(f"{kind}_{axis}", pa.int32(), "count",
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
