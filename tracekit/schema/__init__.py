"""The one definition of every run-folder table.

``TABLES`` maps table name -> :class:`~tracekit.schema.core.Table`. Collectors conform their
output to it (:meth:`Table.conform`), the run-folder writer uses its Arrow schemas, the query
engine creates empty typed views from it, and ``docs/schema.md`` is generated from it
(``python -m tracekit.schema > docs/schema.md``).

To add a table: define it in the module of its group and add it to that module's ``TABLES``.
"""

from __future__ import annotations

from tracekit.errors import SchemaError
from tracekit.schema import comm as _comm
from tracekit.schema import memory as _memory
from tracekit.schema import mlperf as _mlperf
from tracekit.schema import ncu as _ncu
from tracekit.schema import system, timeline
from tracekit.schema.core import STR, UNITS, Column, Table

# One module per group of tables; a new group is imported here and added to _ALL.
_ALL: tuple[Table, ...] = timeline.TABLES + system.TABLES
_ALL += _ncu.TABLES
_ALL += _comm.TABLES
_ALL += _memory.TABLES
_ALL += _mlperf.TABLES

TABLES: dict[str, Table] = {t.name: t for t in _ALL}

RUN_ID = Column("run_id", STR, "id", "Run folder the row comes from.")
"""The leading column every query view adds to a table's columns (the run folder's ``run_id``,
tracekit/query/engine.py); a query's ``-- @column run_id`` line takes its unit and description
from here (tracekit/query/named_queries.py)."""

LAYOUT_VERSION = 2
"""Version of the run-folder layout (manifest + Parquet). Bumped on incompatible changes.
2: a multi-rank job's tables are folders of one file per rank (manifest ``"files"``) and the
manifest lists ``ranks``; version 1 folders (one file per table, ``"file"``) are still read."""

READABLE_LAYOUT_VERSIONS = (1, 2)
"""Layout versions this tracekit reads."""


def table(name: str) -> Table:
    """Return the table definition called ``name``; :class:`SchemaError` if unknown."""
    try:
        return TABLES[name]
    except KeyError:
        raise SchemaError(f"unknown table {name!r}; known: {', '.join(TABLES)}") from None


__all__ = ["TABLES", "RUN_ID", "LAYOUT_VERSION", "Table", "Column", "UNITS", "table"]
