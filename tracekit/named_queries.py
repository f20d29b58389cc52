"""Named queries: the ``.sql`` files shipped in ``queries/`` (installed as ``tracekit.queries``).

Each file holds one query whose header is a block of ``--`` comment lines::

    -- kernel_summary: GPU time per kernel name, as `nsys stats --report gpukernsum`.
    --
    -- Free text explaining the definition precisely (what is included, what is excluded).
    --
    -- @param top INTEGER 0  Keep the N names with most total time per run (0 = all).
    -- @column run_id     id     Run folder the row comes from.
    -- @column name       text   Demangled kernel name.
    -- @column total_ns   ns     Sum of kernel durations.

The first line is ``NAME: one-line description`` and NAME must equal the file's stem. Parameters
are read in SQL with ``getvariable('top')`` and are set (cast to the declared DuckDB type) before
the query runs. Every output column must have an ``@column`` line with a unit from
:data:`tracekit.schema.UNITS` (tests enforce it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tracekit.errors import QueryError
from tracekit.schema import UNITS

_PARAM = re.compile(r"^@param\s+(\w+)\s+(\w+)\s+(\S+)\s*(.*)$")
_COLUMN = re.compile(r"^@column\s+(\w+)\s+(\S+)\s*(.*)$")


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # DuckDB type name: INTEGER, BIGINT, DOUBLE, VARCHAR, BOOLEAN
    default: str  # literal text; NULL for none
    description: str


@dataclass(frozen=True)
class OutputColumn:
    name: str
    unit: str
    description: str


@dataclass(frozen=True)
class NamedQuery:
    name: str
    description: str
    details: str
    params: tuple[Param, ...]
    columns: tuple[OutputColumn, ...]
    sql: str
    path: str
    topic: str = ""
    _params_by_name: dict = field(default=None, init=False, repr=False, compare=False)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        raise QueryError(f"query {self.name} has no parameter {name!r} (parameters: {known})")


def parse_query(text: str, path: str = "<string>") -> NamedQuery:
    """Parse a named query file's header. Raises :class:`QueryError` on a malformed header."""
    header, body_start = [], 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--"):
            header.append(line[2:].strip())
            body_start = i + 1
        elif line.strip() == "" and not header:
            continue
        else:
            break
    if not header or ":" not in header[0]:
        raise QueryError(f"{path}: the first line must be '-- NAME: description'")
    name, _, description = header[0].partition(":")
    name = name.strip()
    details, params, columns = [], [], []
    for line in header[1:]:
        if line.startswith("@param"):
            m = _PARAM.match(line)
            if not m:
                raise QueryError(f"{path}: malformed @param line: {line!r}")
            params.append(Param(*m.groups()))
        elif line.startswith("@column"):
            m = _COLUMN.match(line)
            if not m:
                raise QueryError(f"{path}: malformed @column line: {line!r}")
            col = OutputColumn(*m.groups())
            if col.unit not in UNITS:
                raise QueryError(f"{path}: column {col.name}: unknown unit {col.unit!r}")
            columns.append(col)
        elif not columns and not params:
            details.append(line)
    sql = "\n".join(lines[body_start:]).strip().rstrip(";")
    return NamedQuery(
        name=name,
        description=description.strip(),
        details="\n".join(details).strip(),
        params=tuple(params),
        columns=tuple(columns),
        sql=sql,
        path=path,
        topic=Path(path).parent.name,
    )


def macros_sql(topic: str = "") -> str:
    """Text of ``queries/_macros.sql`` (or ``queries/TOPIC/_macros.sql``): DuckDB macros shared by
    the named queries (the engine runs the macros a statement calls on its connection, after the
    views they read); '' when the file is absent."""
    root = resources.files("tracekit.queries")
    f = (root / topic if topic else root) / "_macros.sql"
    return f.read_text(encoding="utf-8") if f.is_file() else ""


def data_file(name: str) -> str:
    """Path of a data table shipped in ``queries/data/`` (``gpu_peaks.csv``, ``tensor_factors.csv``;
    documented in ``queries/data/README.md``)."""
    return str(resources.files("tracekit.queries") / "data" / name)


def _query_files():
    root = resources.files("tracekit.queries")
    stack = [root]
    while stack:
        d = stack.pop()
        for entry in d.iterdir():
            if entry.is_dir():
                stack.append(entry)
            elif entry.name.endswith(".sql") and not entry.name.startswith("_"):
                # files named _*.sql are not queries (queries/_macros.sql: shared macros)
                yield entry


_CACHE: dict[str, NamedQuery] | None = None


def all_queries() -> dict[str, NamedQuery]:
    """Every named query, by name (sorted by topic then name)."""
    global _CACHE
    if _CACHE is None:
        found = {}
        for f in _query_files():
            q = parse_query(f.read_text(encoding="utf-8"), str(f))
            stem = f.name[: -len(".sql")]
            if q.name != stem:
                raise QueryError(f"{f}: header names {q.name!r} but the file is {stem}.sql")
            if q.name in found:
                raise QueryError(f"two named queries called {q.name}: {found[q.name].path} and {f}")
            found[q.name] = q
        _CACHE = dict(sorted(found.items(), key=lambda kv: (kv[1].topic, kv[0])))
    return _CACHE


def get_query(name: str) -> NamedQuery:
    """The named query ``name``; :class:`QueryError` listing the known names if unknown."""
    qs = all_queries()
    if name not in qs:
        raise QueryError(f"unknown query {name!r}; run `tracekit queries` to list them")
    return qs[name]
