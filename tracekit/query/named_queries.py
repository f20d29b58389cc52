"""Named queries: the ``.sql`` files shipped in ``queries/`` (installed as ``tracekit.queries``).

Each file holds one query whose header is a block of ``--`` comment lines::

    -- kernel_summary: GPU time per kernel name, as `nsys stats --report gpukernsum`.
    --
    -- Free text explaining the definition precisely (what is included, what is excluded).
    --
    -- @param top INTEGER 0 [>=0]  Keep the N names with most total time per run (0 = all).
    -- @param per VARCHAR kernel [kernel|launch]  One row per kernel name or per launch.
    -- @column run_id     id     Run folder the row comes from.
    -- @column name       text   Demangled kernel name.
    -- @column total_ns   ns     Sum of kernel durations.
    -- @key total_ns
    -- @requires kernels
    -- @empty no kernel matched

``@key`` names the query's main measure(s), the columns a reader looks at first: the terminal
table never leaves them out (:mod:`tracekit.cli.tableview`); every query has one (tests enforce
it) and each name is one of its ``@column`` lines. ``@optional`` names columns that are NULL
unless a parameter asks for them (kernel_summary's grid and block without ``-p by=grid``): the
table leaves them out without a note when they are empty.

``-- @few_rows`` says the result has few rows whatever the size of the input (a row per kernel
name, API function, copy kind or run): ``tracekit query -f csv|json`` may then fetch it as Python
rows, without importing pyarrow, even over large run folders (:meth:`NamedQuery.has_few_rows`,
:func:`tracekit.duck.fetch_query`). ``-- @few_rows unless raw=true`` excepts a parameter's value
(nvtx_summary's ``raw=true`` has a row per distinct range text). A result that is not few after
all is still returned whole, as Arrow, at the cost of running the query a second time.

An optional ``-- @notice SELECT ...`` line holds one SQL statement over the view ``result`` (the
query's rows); each value of its first column is printed by ``tracekit query`` as one line on
stderr (a coverage figure, why a column is NULL and how to fill it).

The first line is ``NAME: one-line description`` and NAME must equal the file's stem. Parameters
are read in SQL with ``getvariable('top')`` and are set (cast to the declared DuckDB type) before
the query runs. A value must be of the declared type (``3.7`` is not an INTEGER, ``1,5`` not a
DOUBLE) and in the optional bracketed domain after the default: ``[>=0]``, ``[<=10]``,
``[0..100]`` (inclusive) or ``[kernel|launch]`` (one of the words); anything else is a
:class:`~tracekit.errors.QueryError` (exit 2), never an empty or rounded answer.
Every output column must have an ``@column`` line with a unit from :data:`tracekit.schema.UNITS`
(tests enforce it). A column passed through from a run-folder table takes its unit and
description from the schema instead of repeating them: ``-- @column pid from kernels`` (the
column ``pid`` of :data:`tracekit.schema.TABLES` ``kernels``), ``-- @column src_pid from
kernels.pid`` (another name), and ``-- @column run_id`` (the leading column of every view,
:data:`tracekit.schema.RUN_ID`).

``-- @include MODULE ...`` lines name the macro modules (and query-core extensions) whose names
the query uses, as Perfetto's ``INCLUDE PERFETTO MODULE`` does: ``core`` is ``queries/_macros.sql``,
``TOPIC`` is ``queries/TOPIC/_macros.sql``, ``roofline`` and ``critical_path`` are extensions
(:mod:`tracekit.query.hooks`). A ``_macros.sql`` declares its own includes the same way (they
fix the order modules load in, :func:`macro_topics`) and names its private helpers, which no
other file may call, on ``-- @private NAME ...`` lines (tests/test_sql_includes.py checks both
against what each file calls).

Two optional lines say what an empty result means (``tracekit query`` prints it on stderr,
:mod:`tracekit.query.explain`): ``@requires`` names the tables that must have rows for the query to
return any (default: every table the SQL reads), ``@empty`` the condition that selected none of
their rows when they do, e.g. ``@empty no NCCL kernels (names with ncclKernel_ or ncclDevKernel_)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tracekit import schema
from tracekit.errors import QueryError, SchemaError
from tracekit.schema import UNITS
from tracekit.suggest import did_you_mean

_PARAM = re.compile(r"^@param\s+(\w+)\s+(\w+)\s+(\S+)(?:\s+\[([^\]]*)\])?\s*(.*)$")
_INT = re.compile(r"^[+-]?\d+$")
_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}
_BOOL = {"true": "true", "t": "true", "1": "true", "yes": "true",
         "false": "false", "f": "false", "0": "false", "no": "false"}
_COLUMN = re.compile(r"^@column\s+(\w+)\s+(\S+)\s*(.*)$")
_PASSED = re.compile(r"^@column\s+(\w+)(?:\s+from\s+(\w+)(?:\.(\w+))?)?\s*$")
_NOTICE = re.compile(r"^@notice\s+(SELECT\b.*)$", re.IGNORECASE)
_DECLARATION = re.compile(r"^--\s*@(include|private)\s+(.*)$")


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # DuckDB type name: INTEGER, BIGINT, DOUBLE, VARCHAR, BOOLEAN
    default: str  # literal text; NULL for none
    domain: str  # '' (any value of the type), '>=0', '<=N', 'A..B' or 'word|word'
    description: str

    def check(self, value: str, query: str = "") -> str:
        """``value`` (text from ``--param``) as the text DuckDB casts, after checking it against
        the declared type and domain; :class:`QueryError` naming the parameter otherwise."""
        v = value.strip()
        where = f"query {query}: " if query else ""

        def bad(why: str):
            raise QueryError(f"{where}parameter {self.name}={value!r} {why}")

        t = self.type.upper()
        number = None
        if t in _INT_BITS:
            if not _INT.match(v):
                bad(f"is not a whole number ({t})")
            number = int(v)
            bits = _INT_BITS[t]
            if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
                bad(f"is out of range for {t}")
        elif t in ("DOUBLE", "FLOAT", "REAL"):
            try:
                number = float(v)
            except ValueError:
                bad("is not a number (write 1.5, not 1,5)")
            if number != number or number in (float("inf"), float("-inf")):
                bad("is not a finite number")
        elif t == "BOOLEAN":
            if v.lower() not in _BOOL:
                bad("is not true or false")
            v = _BOOL[v.lower()]
        else:
            v = value
        d = self.domain.strip()
        if d and number is not None:
            lo = hi = None
            if d.startswith(">="):
                lo, need = float(d[2:]), f"at least {d[2:]}"
            elif d.startswith("<="):
                hi, need = float(d[2:]), f"at most {d[2:]}"
            elif ".." in d:
                a, _, b = d.partition("..")
                lo, hi, need = float(a), float(b), f"between {a} and {b}"
            if (lo is not None and number < lo) or (hi is not None and number > hi):
                bad(f"must be {need}")
        elif d and "|" in d and v not in d.split("|"):
            bad(f"is not one of {', '.join(d.split('|'))}")
        return v


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
    requires: tuple[str, ...] = ()
    empty: str = ""
    notices: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # the main measures (@key)
    optional: tuple[str, ...] = ()  # columns NULL unless a parameter asks for them (@optional)
    includes: tuple[str, ...] = ()  # macro modules and extensions it uses (@include)
    few_rows: bool = False  # @few_rows: a result of few rows whatever the input's size
    few_rows_unless: tuple[tuple[str, str], ...] = ()  # ...except with these (param, value)
    _params_by_name: dict = field(default=None, init=False, repr=False, compare=False)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params) or "none"
        hint = did_you_mean(name, [p.name for p in self.params])
        raise QueryError(f"query {self.name} has no parameter {name!r}{hint} (parameters: {known})")

    def has_few_rows(self, params: dict[str, str]) -> bool:
        """Whether the query's ``@few_rows`` line holds with ``params`` (name -> text value, as
        given to the engine; a parameter not given takes its default)."""
        if not self.few_rows:
            return False
        for name, value in self.few_rows_unless:
            p = self.param(name)
            given = params.get(name, p.default)
            try:
                if p.check(given, self.name) == value:
                    return False
            except QueryError:  # a bad value fails where the parameters are set
                return False
        return True


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
    details, params, columns, requires, empty, notices, keys = [], [], [], [], "", [], []
    optional: list[str] = []
    few_rows: list[str] | None = None
    for line in header[1:]:
        if line.startswith("@include") or line.startswith("@private"):
            continue  # declarations(): what the file includes
        if line.startswith("@few_rows"):
            few_rows = line[len("@few_rows"):].split()
        elif line.startswith("@key"):
            keys += line[len("@key"):].split()
        elif line.startswith("@optional"):
            optional += line[len("@optional"):].split()
        elif line.startswith("@requires"):
            requires += line[len("@requires"):].split()
        elif line.startswith("@empty"):
            empty = line[len("@empty"):].strip()
        elif line.startswith("@notice"):
            m = _NOTICE.match(line)
            if not m:
                raise QueryError(f"{path}: malformed @notice line (expected '@notice SELECT ...'): {line!r}")
            notices.append(m.group(1))
        elif line.startswith("@param"):
            m = _PARAM.match(line)
            if not m:
                raise QueryError(f"{path}: malformed @param line: {line!r}")
            pname, ptype, default, domain, desc = m.groups()
            params.append(Param(pname, ptype, default, domain or "", desc))
        elif line.startswith("@column") and _PASSED.match(line):
            columns.append(passed_column(*_PASSED.match(line).groups(), path=path))
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
        requires=tuple(requires),
        empty=empty,
        notices=tuple(notices),
        keys=tuple(keys),
        optional=tuple(optional),
        includes=declarations(text)["include"],
        few_rows=few_rows is not None,
        few_rows_unless=_few_rows_unless(few_rows or [], params, path),
    )


def _few_rows_unless(words: list[str], params: list[Param], path: str) -> tuple[tuple[str, str], ...]:
    """The (parameter, checked value) pairs of a ``@few_rows unless NAME=VALUE ...`` line's words
    (after ``@few_rows``); :class:`QueryError` naming the file for anything else."""
    if not words:
        return ()
    by_name = {p.name: p for p in params}
    pairs = [w.partition("=") for w in words[1:]]
    if words[0] != "unless" or not pairs or any(not sep or n not in by_name for n, sep, _ in pairs):
        raise QueryError(f"{path}: malformed @few_rows line (expected '@few_rows' or "
                         f"'@few_rows unless PARAM=VALUE ...'): {' '.join(words)!r}")
    return tuple((n, by_name[n].check(v, path)) for n, _, v in pairs)


def passed_column(name: str, table: str | None, column: str | None, path: str = "") -> OutputColumn:
    """The :class:`OutputColumn` of ``-- @column NAME from TABLE[.COLUMN]`` (bare ``-- @column
    run_id``: :data:`tracekit.schema.RUN_ID`): the schema's unit and description of TABLE's
    column COLUMN (default NAME). :class:`QueryError` naming the file for an unknown table or
    column."""
    if table is None:
        if name != schema.RUN_ID.name:
            raise QueryError(f"{path}: @column {name}: no unit and description (write them, or "
                             f"'from TABLE' for a column passed through from a run-folder table)")
        return OutputColumn(name, schema.RUN_ID.unit, schema.RUN_ID.description)
    try:
        col = schema.table(table).column(column or name)
    except SchemaError as exc:
        raise QueryError(f"{path}: @column {name} from {table}: {exc}") from None
    return OutputColumn(name, col.unit, col.description)


def declarations(text: str) -> dict[str, tuple[str, ...]]:
    """The ``-- @include`` and ``-- @private`` names of a SQL file's leading comment block, as
    {"include": (...), "private": (...)} (names separated by spaces or commas)."""
    out: dict[str, list[str]] = {"include": [], "private": []}
    for line in text.splitlines():
        if not line.startswith("--") and line.strip():
            break
        if m := _DECLARATION.match(line):
            out[m.group(1)] += [w for w in re.split(r"[\s,]+", m.group(2)) if w]
    return {k: tuple(v) for k, v in out.items()}


def macros_sql(topic: str = "") -> str:
    """Text of ``queries/_macros.sql`` (or ``queries/TOPIC/_macros.sql``): DuckDB macros shared by
    the named queries (the engine runs the macros a statement calls on its connection, after the
    views they read); '' when the file is absent."""
    root = resources.files("tracekit.queries")
    f = (root / topic if topic else root) / "_macros.sql"
    return f.read_text(encoding="utf-8") if f.is_file() else ""


def macro_modules() -> dict[str, str]:
    """Every macro module as {name: topic}: ``core`` is ``queries/_macros.sql`` (topic ''),
    ``TOPIC`` is ``queries/TOPIC/_macros.sql``."""
    root = resources.files("tracekit.queries")
    topics = sorted(d.name for d in root.iterdir() if d.is_dir() and (d / "_macros.sql").is_file())
    return {"core": "", **{t: t for t in topics}}


def macro_topics() -> list[str]:
    """The topics whose ``_macros.sql`` every connection may need ('' for ``queries/_macros.sql``),
    in load order: each after the modules its ``-- @include`` lines name (a module's macros may
    call those), else by name. ``roofline`` is not among them: its macros need its data tables
    and are loaded with them (the roofline extension, :mod:`tracekit.roofline`).
    :class:`QueryError` for a module that includes an unknown module or itself, in a circle."""
    modules = {m: t for m, t in macro_modules().items() if m != "roofline"}
    deps = {m: [d for d in declarations(macros_sql(t))["include"] if d != "roofline"]
            for m, t in modules.items()}
    order: list[str] = []
    visiting: set[str] = set()

    def visit(m: str, via: str) -> None:
        if m in order:
            return
        if m not in modules:
            raise QueryError(f"{via}: @include {m}: no such macro module (queries/{m}/_macros.sql)")
        if m in visiting:
            raise QueryError(f"queries: the @include lines of the macro modules form a circle through {m}")
        visiting.add(m)
        for d in deps[m]:
            visit(d, f"the {m} macro module")
        visiting.discard(m)
        order.append(m)

    for m in modules:
        visit(m, "queries")
    return [modules[m] for m in order]


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
_ONE: dict[str, NamedQuery] = {}  # get_query's finds before all_queries() parsed every file


def _parse_file(f) -> NamedQuery:
    q = parse_query(f.read_text(encoding="utf-8"), str(f))
    stem = f.name[: -len(".sql")]
    if q.name != stem:
        raise QueryError(f"{f}: header names {q.name!r} but the file is {stem}.sql")
    return q


def all_queries() -> dict[str, NamedQuery]:
    """Every named query, by name (sorted by topic then name)."""
    global _CACHE
    if _CACHE is None:
        found = {}
        for f in _query_files():
            q = _parse_file(f)
            if q.name in found:
                raise QueryError(f"two named queries called {q.name}: {found[q.name].path} and {f}")
            found[q.name] = q
        _CACHE = dict(sorted(found.items(), key=lambda kv: (kv[1].topic, kv[0])))
    return _CACHE


def get_query(name: str) -> NamedQuery:
    """The named query ``name``; :class:`QueryError` listing the known names if unknown.

    Parses only ``name``'s file while :func:`all_queries` has not run: a ``tracekit query`` needs
    one query, and parsing all of them was a tenth of a small query's time (issue 39). An
    unknown name, or a name two files share, goes through :func:`all_queries` and its errors."""
    if _CACHE is None:
        if name not in _ONE:
            files = [f for f in _query_files() if f.name == f"{name}.sql"]
            if len(files) != 1:
                return _listed(name)
            _ONE[name] = _parse_file(files[0])
        return _ONE[name]
    return _listed(name)


def _listed(name: str) -> NamedQuery:
    qs = all_queries()
    if name not in qs:
        raise QueryError(f"unknown query {name!r}{did_you_mean(name, qs)}; "
                         "`tracekit queries` lists them")
    return qs[name]
