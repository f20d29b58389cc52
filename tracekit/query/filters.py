"""Filters of every named query, plot and ad-hoc SQL: ``--step``, ``--window``, ``--rank``,
``--device``, ``--nvtx`` (docs/metrics.md, "Filters").

A filter narrows the run-folder tables themselves, before any query reads them, so every query,
every output format (table, CSV, JSON, Parquet) and every plot sees the same events:

- ``--step N`` or ``--step A-B`` (inclusive): events that *start* inside the steps numbered N (or
  A to B) of tk_steps() -- a kernel belongs to the step its start falls in, [step start, step
  end), on the step's process (each rank's step N of a multi-rank run); tk_steps() itself returns
  only those steps;
- ``--window START:END``: events that start in [run start + START, run start + END); times in ns
  or with a unit (``1.5s``, ``200ms``, ``30us``), either side may be empty (open); the run start
  is the first timestamp of the run's kernels, copies, API calls and NVTX ranges;
- ``--rank R[,R...]``: events of the processes with those ranks (tk_ranks());
- ``--device D[,D...]``: GPU activities (kernels, memcpy, memset, syncs, GPU metrics, ncu
  launches, collectives) on those CUDA devices, and the devices table's rows; host-side tables
  are not narrowed by device;
- ``--nvtx REGEX``: work launched inside NVTX ranges whose name matches (RE2, searched): as nsys
  stats ``--filter-nvtx``, a GPU activity belongs when the CUDA API call that launched it lies
  inside the matching ranges of its thread (their union: a call across the boundary of two
  overlapping matching ranges counts too); host events (API calls, OS runtime calls, NVTX
  ranges and marks, scheduling) when they start inside them on the same thread (a row without
  a thread, as Kineto's GPU-side annotations: inside those without one; tables without a
  thread: of the same process). Each test is one sorted (ASOF) lookup per event. Steps
  (tk_steps()) are events too: a step is kept when it starts inside the matching ranges of its
  process (``--nvtx '^ProfilerStep#5$'`` keeps step 5 and its work).

Filters combine with AND. Tables without times (processes, threads, devices, ncu_metrics) keep
all rows except for the rank and device filters. Everything the filter needs (steps, run starts,
matching ranges, launch calls) is computed from the unfiltered tables first, on the engine's own
connection before its views are narrowed.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from dataclasses import dataclass

from tracekit.duck import re2_error
from tracekit.errors import InputError

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")

# tables whose rows are GPU activities (device filter, launch-based nvtx filter)
GPU_TABLES = ("kernels", "memcpy", "memset", "cuda_sync")
# time column of each timed table
TIME_COLUMN = {"kernels": "start_ns", "memcpy": "start_ns", "memset": "start_ns",
               "cuda_sync": "start_ns", "cuda_api": "start_ns", "nvtx_ranges": "start_ns",
               "osrt_api": "start_ns", "cpu_thread_state": "start_ns", "collectives": "start_ns",
               "nvtx_marks": "timestamp_ns", "gpu_metrics": "timestamp_ns"}
HAS_TID = ("cuda_api", "nvtx_ranges", "osrt_api", "cpu_thread_state", "nvtx_marks")
HAS_PID = ("kernels", "memcpy", "memset", "cuda_sync", "cuda_api", "nvtx_ranges", "osrt_api",
           "cpu_thread_state", "nvtx_marks", "collectives", "processes", "threads", "ncu_launches")
HAS_DEVICE = ("kernels", "memcpy", "memset", "cuda_sync", "gpu_metrics", "collectives",
              "devices", "ncu_launches")


def format_time(ns: int) -> str:
    """Integer ns in the largest unit that keeps it exact to 3 decimals, as --window takes it:
    200000000 -> '200ms', 1500000000 -> '1.5s', 5000000 -> '5ms', 1500 -> '1.5us', 7 -> '7ns'."""
    for unit, f in (("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)):
        if abs(ns) >= f and ns % (f // 1000 or 1) == 0:
            return f"{ns / f:.3f}".rstrip("0").rstrip(".") + unit
    return f"{ns}ns"


def parse_time(text: str, what: str = "--window") -> int:
    """``1.5s`` / ``200ms`` / ``30us`` / ``1500`` (ns) as integer nanoseconds."""
    m = _TIME.match(text)
    if not m:
        raise InputError(f"{what}: {text!r} is not a time (write 1500, 200ms, 1.5s or 30us)")
    return round(float(m.group(1)) * _UNITS[m.group(2) or "ns"])


def _ints(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        vals = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError(f"{what}: {text!r} is not a comma-separated list of whole numbers") from None
    if not vals:
        raise InputError(f"{what}: no value given")
    return vals


@dataclass(frozen=True)
class Filters:
    """Parsed filter options; :meth:`parse` checks them (:class:`InputError`, exit 2)."""

    steps: tuple[int, int] | None = None  # inclusive step-number range
    window: tuple[int | None, int | None] | None = None  # ns after the run start
    ranks: tuple[int, ...] | None = None
    devices: tuple[int, ...] | None = None
    nvtx: str | None = None

    @classmethod
    def parse(cls, step: str | None = None, window: str | None = None, rank: str | None = None,
              device: str | None = None, nvtx: str | None = None) -> Filters:
        steps = None
        if step is not None:
            m = re.match(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$", step)
            if not m:
                raise InputError(f"--step: {step!r} is not a step number N or a range A-B")
            a, b = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
            if b < a:
                raise InputError(f"--step {step}: the range ends before it starts")
            steps = (a, b)
        win = None
        if window is not None:
            if ":" not in window:
                raise InputError(f"--window: {window!r} is not START:END (e.g. 1s:2s, 500ms:, :2s)")
            s, _, e = window.partition(":")
            lo = parse_time(s) if s.strip() else None
            hi = parse_time(e) if e.strip() else None
            if lo is not None and hi is not None and hi <= lo:
                raise InputError(f"--window {window}: the end is not after the start")
            win = (lo, hi)
        if nvtx is not None and (why := re2_error(nvtx)) is not None:
            raise InputError(f"--nvtx {nvtx!r} is not a valid regular expression (RE2 syntax, which "
                             f"runs in linear time: no backreferences or lookaround): {why}")
        return cls(steps, win, _ints(rank, "--rank"), _ints(device, "--device"), nvtx)

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.steps, self.window, self.ranks, self.devices, self.nvtx))

    def describe(self) -> str:
        """``step 3-5, window 1s:2s after the run start, rank 0`` (for notes and titles)."""
        parts = []
        if self.steps:
            a, b = self.steps
            parts.append(f"step {a}" if a == b else f"steps {a}-{b}")
        if self.window:
            lo, hi = self.window
            parts.append(f"window {'' if lo is None else format_time(lo)}:"
                         f"{'' if hi is None else format_time(hi)} after the run start")
        if self.ranks:
            parts.append("rank " + ",".join(map(str, self.ranks)))
        if self.devices:
            parts.append("device " + ",".join(map(str, self.devices)))
        if self.nvtx:
            parts.append(f"launched in NVTX ranges matching {self.nvtx!r}")
        return ", ".join(parts)


def prepare(con, filters: Filters, need) -> None:
    """Create on ``con`` the tables the view predicates read, while ``con``'s views are still
    unfiltered (``need(text)`` creates the views and macros ``text`` reads): ``tk_filter_windows``
    (run_id, pid, w0, w1: kept time windows; pid NULL = every process), with ``--step`` the
    tables of :func:`prepare_steps` (``tk_filter_steps``: the kept steps), ``tk_filter_pids``
    (run_id, pid of the kept ranks), ``tk_filter_threads`` / ``tk_filter_procs`` (run_id, pid
    [, tid], w0, w1: the matching NVTX ranges' time, merged into disjoint windows per thread /
    process) and ``tk_filter_launches`` (run_id, pid, correlation_id launched inside them)."""

    def table(name: str, select: str) -> None:
        need(select)
        con.execute(f"CREATE TEMP TABLE {name} AS {select}")

    table("tk_filter_starts",
          "SELECT run_id, min(t) AS t0 FROM (SELECT run_id, min(start_ns) AS t FROM kernels GROUP BY ALL "
          "UNION ALL SELECT run_id, min(start_ns) FROM memcpy GROUP BY ALL "
          "UNION ALL SELECT run_id, min(start_ns) FROM cuda_api GROUP BY ALL "
          "UNION ALL SELECT run_id, min(start_ns) FROM nvtx_ranges GROUP BY ALL "
          "UNION ALL SELECT run_id, min(start_ns) FROM osrt_api GROUP BY ALL) GROUP BY run_id")
    win = ["SELECT s.run_id, NULL::BIGINT AS pid, "
           + ("s.t0 + " + str(filters.window[0]) if filters.window and filters.window[0] is not None
              else "-9223372036854775807") + " AS w0, "
           + ("s.t0 + " + str(filters.window[1]) if filters.window and filters.window[1] is not None
              else "9223372036854775807") + " AS w1 FROM tk_filter_starts s"]
    con.execute("CREATE TEMP TABLE tk_filter_run_windows AS " + win[0])
    if filters.ranks:
        table("tk_filter_pids", "SELECT run_id, pid FROM tk_ranks() WHERE rank IN ("
              + ", ".join(map(str, filters.ranks)) + ")")
        if not con.execute("SELECT count(*) FROM tk_filter_pids").fetchall()[0][0]:
            _no_such_rank(con, filters, need)
    if filters.nvtx:
        table("tk_filter_ranges",
              "SELECT run_id, pid, tid, start_ns AS w0, coalesce(end_ns, 9223372036854775807) AS w1 "
              "FROM nvtx_ranges WHERE regexp_matches(name, " + _lit(filters.nvtx) + ")")
        # disjoint windows per thread and per process: membership is then one ASOF lookup per
        # event (the last window starting at or before it), linear in the events
        con.execute("CREATE TEMP TABLE tk_filter_threads AS " + _merged("tk_filter_ranges", "run_id, pid, tid"))
        con.execute("CREATE TEMP TABLE tk_filter_procs AS " + _merged("tk_filter_ranges", "run_id, pid"))
        table("tk_filter_launches",
              "SELECT DISTINCT c.run_id, c.pid, c.correlation_id FROM cuda_api c "
              "ASOF JOIN tk_filter_threads m ON m.run_id = c.run_id AND m.pid = c.pid AND m.tid = c.tid "
              "AND c.start_ns >= m.w0 WHERE c.end_ns <= m.w1 AND c.correlation_id IS NOT NULL")
    if filters.steps:  # the windows are the kept steps
        prepare_steps(con, filters, need)
    else:  # tk_filter_steps: prepare_steps, when a statement first calls tk_steps()
        con.execute("CREATE TEMP TABLE tk_filter_windows AS SELECT * FROM tk_filter_run_windows")


def prepare_steps(con, filters: Filters, need) -> None:
    """The step tables of :func:`prepare`, while ``con``'s views are unfiltered:
    ``tk_filter_all_steps`` (tk_steps() of the whole run), with ``--step`` ``tk_filter_windows``
    (the kept steps, cut to the --window), and ``tk_filter_steps`` (the steps that start inside
    the kept windows). Detecting steps reads every kernel, so an engine filtered by anything but
    ``--step`` calls this only when a statement first needs tk_steps()."""
    need("SELECT * FROM tk_steps()")
    con.execute("CREATE TEMP TABLE tk_filter_all_steps AS SELECT * FROM tk_steps()")
    if filters.steps:
        a, b = filters.steps
        con.execute(f"""CREATE TEMP TABLE tk_filter_windows AS
            SELECT st.run_id, st.pid, greatest(st.start_ns, w.w0) AS w0, least(st.end_ns, w.w1) AS w1
            FROM tk_filter_all_steps st JOIN tk_filter_run_windows w USING (run_id)
            WHERE st.step_number BETWEEN {a} AND {b} AND st.start_ns < w.w1 AND st.end_ns > w.w0""")
        if not con.execute("SELECT count(*) FROM tk_filter_windows").fetchall()[0][0]:
            need("SELECT * FROM runs")
            _no_such_step(con, filters)
    kept = ("" if not filters.ranks else "\n        AND EXISTS (SELECT 1 FROM tk_filter_pids p "
            "WHERE p.run_id = st.run_id AND p.pid = st.pid)")
    if filters.nvtx:  # a step is an event: kept when it starts inside the matching ranges of its process
        kept += ("\n        AND EXISTS (SELECT 1 FROM tk_filter_procs r WHERE r.run_id = st.run_id "
                 "AND r.pid = st.pid AND st.start_ns >= r.w0 AND st.start_ns < r.w1)")
    con.execute(f"""CREATE TEMP TABLE tk_filter_steps AS
        SELECT st.* FROM tk_filter_all_steps st
        WHERE EXISTS (SELECT 1 FROM tk_filter_windows w WHERE w.run_id = st.run_id
                      AND (w.pid IS NULL OR w.pid = st.pid) AND st.start_ns >= w.w0 AND st.start_ns < w.w1){kept}""")


def _no_such_step(con, filters: Filters) -> None:
    """InputError: no run has the ``--step`` asked for; one line naming the steps each run has
    (``steps: 1009-1014``), the same steps (tk_steps()) every command and query uses."""
    a, b = filters.steps
    rows = con.execute("SELECT r.run_id, list(DISTINCT s.step_number ORDER BY s.step_number) "
                       "FROM runs r LEFT JOIN tk_filter_all_steps s USING (run_id) "
                       "GROUP BY r.run_id ORDER BY r.run_id").fetchall()
    have = [f"steps: {number_ranges(ns)}" if ns and ns[0] is not None else "no steps (docs/metrics.md, Steps)"
            for _, ns in rows]
    if len(rows) > 1:
        have = [f"run {run_id} {h}" for (run_id, _), h in zip(rows, have)]
    what = f"step {a}" if a == b else f"steps {a}-{b}"
    raise InputError(f"--step {a if a == b else f'{a}-{b}'}: no {what} in the run{'s' if len(rows) > 1 else ''} "
                     f"({'; '.join(have)})")


def _no_such_rank(con, filters: Filters, need) -> None:
    """InputError: no run has the ``--rank`` asked for; one line naming the ranks the runs have,
    or, for runs without ranks (one process, or processes that recorded none), the GPUs and
    processes ``--device`` and ``tracekit sql ... WHERE pid = ...`` can pick instead."""
    asked = ",".join(map(str, filters.ranks))
    need("SELECT * FROM tk_ranks(), kernels, runs")
    ranks = [r for (r,) in con.execute("SELECT DISTINCT rank FROM tk_ranks() WHERE rank IS NOT NULL "
                                       "ORDER BY rank").fetchall()]
    if ranks:
        raise InputError(f"--rank {asked}: no such rank in the run (ranks: {number_ranges(ranks)})")
    devices, pids = con.execute("SELECT list(DISTINCT device_id ORDER BY device_id), "
                                "list(DISTINCT pid ORDER BY pid) FROM kernels").fetchall()[0]
    devices, pids = [d for d in devices or [] if d is not None], [p for p in pids or [] if p is not None]
    hint = []
    if devices:
        hint.append(f"--device {number_ranges(devices)} picks its GPU{'s' if len(devices) > 1 else ''}")
    if pids:
        hint.append("its GPU work comes from process" + ("es " if len(pids) > 1 else " ")
                    + ", ".join(map(str, pids[:8])) + (", ..." if len(pids) > 8 else ""))
    raise InputError(f"--rank {asked}: the run records no ranks (no distributed rank in the trace "
                     f"or the manifest){'; ' + '; '.join(hint) if hint else ''}")


def number_ranges(numbers) -> str:
    """[0, 1, 2, 3, 7, 9, 10] -> '0-3, 7, 9-10' (sorted whole numbers)."""
    ns = sorted(int(x) for x in numbers)
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(str(ns[i]) if i == j else f"{ns[i]}-{ns[j]}")
        i = j + 1
    return ", ".join(out)


def _merged(table: str, keys: str) -> str:
    """SELECT of the union of the [w0, w1) intervals of ``table`` per ``keys``, as disjoint
    intervals (overlapping or touching ones merged)."""
    return f"""
        WITH s AS (SELECT {keys}, w0, w1,
                          max(w1) OVER (PARTITION BY {keys} ORDER BY w0, w1
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
                   FROM {table}),
        g AS (SELECT *, sum(CASE WHEN prev_end IS NULL OR w0 > prev_end THEN 1 ELSE 0 END)
                            OVER (PARTITION BY {keys} ORDER BY w0, w1) AS grp FROM s)
        SELECT {keys}, min(w0) AS w0, max(w1) AS w1 FROM g GROUP BY {keys}, grp"""


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def narrowed(select: str, name: str, filters: Filters, columns: set[str]) -> str:
    """``select`` (the view of table ``name``, its column names ``columns``) narrowed to the rows
    the filter keeps; ``select`` itself when it keeps every row."""
    conds, join = [], ""
    tcol = TIME_COLUMN.get(name)
    timed = bool(tcol and tcol in columns)
    if (filters.steps or filters.window) and timed:
        pid = "(w.pid IS NULL OR t.pid IS NULL OR w.pid = t.pid)" if "pid" in columns else "true"
        conds.append(f"EXISTS (SELECT 1 FROM tk_filter_windows w WHERE w.run_id = t.run_id AND {pid} "
                     f"AND t.{tcol} >= w.w0 AND t.{tcol} < w.w1)")
    if filters.ranks and "pid" in columns and name in HAS_PID:
        conds.append("EXISTS (SELECT 1 FROM tk_filter_pids p WHERE p.run_id = t.run_id AND p.pid = t.pid)")
    if filters.devices and "device_id" in columns and name in HAS_DEVICE:
        conds.append("t.device_id IN (" + ", ".join(map(str, filters.devices)) + ")")
    if filters.nvtx and timed:
        if name in GPU_TABLES:
            conds.append("EXISTS (SELECT 1 FROM tk_filter_launches l WHERE l.run_id = t.run_id "
                         "AND l.pid = t.pid AND l.correlation_id = t.correlation_id)")
        elif "pid" in columns:
            by_thread = "tid" in columns and name in HAS_TID
            windows = "tk_filter_threads" if by_thread else "tk_filter_procs"
            # a row without a thread (Kineto's GPU-side annotations) against the matching
            # ranges without one: a matching range is always inside itself
            tid = " AND r.tid IS NOT DISTINCT FROM t.tid" if by_thread else ""
            join = (f" ASOF JOIN {windows} AS r ON r.run_id = t.run_id AND r.pid = t.pid{tid} "
                    f"AND t.{tcol} >= r.w0")
            conds.append(f"t.{tcol} < r.w1")
        else:  # no process: inside any matching range
            conds.append(f"EXISTS (SELECT 1 FROM tk_filter_procs r WHERE r.run_id = t.run_id "
                         f"AND t.{tcol} >= r.w0 AND t.{tcol} < r.w1)")
    if not conds:
        return select
    return f"SELECT t.* FROM ({select}) AS t{join} WHERE {' AND '.join(conds)}"


NO_FILTER = Filters()
_ACTIVE: contextvars.ContextVar[Filters] = contextvars.ContextVar("tracekit_filters", default=NO_FILTER)


def current() -> Filters:
    """The filters in effect for engines created without an explicit ``filters`` argument (set by
    :func:`use`: ``tracekit plot --step 3 ...`` narrows the queries its figure runs)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def use(filters: Filters):
    """Make ``filters`` the default of every :class:`~tracekit.query.engine.Engine` created inside."""
    token = _ACTIVE.set(filters)
    try:
        yield filters
    finally:
        _ACTIVE.reset(token)
