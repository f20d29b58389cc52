"""The dependency graph of a job built in per-rank parts (docs/whatif.md, docs/benchmarks.md).

Every edge of the graph but a collective's lies inside one process (launches, syncs, event
waits, program and stream order), and a job's run folder holds each rank's events in its own
files (``TABLE/rank-NNNNN.parquet``). So the graph SQL (queries/whatif/_macros.sql) runs on
groups of consecutive ranks' files at a time, each on its own DuckDB connection, and only three
small things are computed over the whole job first: the steps (``tk_steps()``, whose source --
tracekit's ranges, ProfilerStep, a pattern, or detection -- is chosen per run), the collective
calls matched across ranks (``tk_comm_arrivals()``: NCCL kernels only), and whether every process
has a rank. The parts are joined by :func:`tracekit.whatif.graph.join`: the same arrays, node
for node, as the graph built over the whole job at once, with DuckDB's memory bounded by one
part instead of growing with the job (a 256-rank job's build: 55 s and 4.3 GB at once). The
parts are built a batch at a time and copied into the graph's arrays as they come (in files
mapped into memory past :data:`tracekit.whatif.store.DEFAULT_DISK_NODES` event rows).

Parts run in this process one after the other (``jobs`` 1), on local worker processes, or on
the workers of a Dask scheduler (``scheduler``, as convert and query do;
:mod:`tracekit.workers`). A run without per-rank files (one rank, an nsys export of
several processes), a run in which some process has no rank, and an engine with filters are
built whole.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tracekit.runfolder import Run
from tracekit.whatif import graph as _graph
from tracekit.whatif.store import Store, disk_nodes
from tracekit.workers import default_jobs, run_parts

PART_ROWS = 1_000_000
"""Event rows (API calls, GPU activities, NVTX ranges) per part: a part's DuckDB work is bounded
by this, not by the job (37 ranks of the NCCL Kineto trace, 27,000 rows each)."""

_RANK_FILE = re.compile(r"rank-(\d+)\.parquet$")
_EVENT_TABLES = ("cuda_api", "kernels", "memcpy", "memset", "nvtx_ranges")


def rank_groups(run: Run, part_rows: int = PART_ROWS) -> list[list[str]] | None:
    """Groups of consecutive rank numbers (as in the file names) of ``run``, each with at most
    ``part_rows`` event rows (one rank at least); None when the run has no per-rank files."""
    return _rank_groups(run, part_rows)[0]


def _rank_groups(run: Run, part_rows: int) -> tuple[list[list[str]] | None, int]:
    """:func:`rank_groups` and the event rows of the run's per-rank files (0 when none)."""
    rows: dict[str, int] = {}
    for info in (run.manifest.get("tables") or {}).values():
        files = info.get("files") if isinstance(info, dict) else None
        if not isinstance(files, list):
            return None, 0
        for f in files:
            if (m := _RANK_FILE.search(str(f))) is not None:
                rows[m.group(1)] = 0
    if len(rows) < 2:
        return None, 0
    sizes = _file_rows(run, rows)
    groups: list[list[str]] = [[]]
    total = 0
    for rank in sorted(rows, key=int):
        if groups[-1] and total + sizes[rank] > part_rows:
            groups.append([])
            total = 0
        groups[-1].append(rank)
        total += sizes[rank]
    return groups, sum(sizes.values())


def _file_rows(run: Run, ranks: dict[str, int]) -> dict[str, int]:
    """Event rows per rank from the Parquet footers (the files are checked once, by the run)."""
    import pyarrow.parquet as pq

    out = dict.fromkeys(ranks, 0)
    for name in _EVENT_TABLES:
        for p in run.table_files(name):
            m = _RANK_FILE.search(p.name)
            if m is not None and m.group(1) in out:
                out[m.group(1)] += pq.read_metadata(p).num_rows
    return out


def part_manifest(manifest: dict, ranks: list[str]) -> dict:
    """``manifest`` with each table's files (and their sizes and checksums) narrowed to those of
    ``ranks`` and the job-level files; the row totals are left out (they are the job's)."""
    keep = set(ranks)
    tables = {}
    for name, info in (manifest.get("tables") or {}).items():
        files = info["files"]
        idx = [i for i, f in enumerate(files)
               if (m := _RANK_FILE.search(str(f))) is None or m.group(1) in keep]
        entry = {"files": [files[i] for i in idx]}
        for key in ("bytes", "sha256"):
            if isinstance(info.get(key), list):
                entry[key] = [info[key][i] for i in idx if i < len(info[key])]
        tables[name] = entry
    return {**manifest, "tables": tables}


def build_part(path: str, manifest: dict, steps: pa.Table, arrivals: pa.Table,
               memory_limit: str | None, step_pattern: str | None) -> _graph.Part:
    """The graph part of the run folder ``path`` whose tables are those of ``manifest`` (a
    :func:`part_manifest`), with the job's ``steps`` and matched collective ``arrivals``
    (run on a worker)."""
    from tracekit.query.api import Session
    from tracekit.query.filters import NO_FILTER

    # through the front door like every other analysis: a Session over the part's run (the run
    # folder with its manifest narrowed to the part's ranks), no filters (the job's are refused
    # before parts are built), nothing to explain (no named query runs: the graph's own SQL does)
    with Session([Run(path=Path(path), manifest=manifest)], memory_limit=memory_limit,
                 step_pattern=step_pattern, filters=NO_FILTER, explain=False) as s:
        con = s.engine.con
        con.register("tk_wi_g_steps_arrow", steps)
        con.register("tk_wi_g_arrivals_arrow", arrivals)
        con.execute("CREATE TEMP TABLE tk_wi_p_pids AS SELECT DISTINCT run_id, pid FROM ("
                    + " UNION ALL ".join(f"SELECT run_id, pid FROM {t}" for t in _EVENT_TABLES) + ")")
        con.execute("CREATE TEMP TABLE tk_wi_g_steps AS SELECT s.* FROM tk_wi_g_steps_arrow s "
                    "SEMI JOIN tk_wi_p_pids p ON p.run_id = s.run_id AND p.pid = s.pid")
        con.execute("CREATE TEMP TABLE tk_wi_g_arrivals AS SELECT * FROM tk_wi_g_arrivals_arrow")
        con.execute("CREATE OR REPLACE TEMP MACRO tk_steps() AS TABLE SELECT * FROM tk_wi_g_steps")
        con.execute("CREATE OR REPLACE TEMP MACRO tk_comm_arrivals() AS TABLE "
                    "SELECT * FROM tk_wi_g_arrivals")
        return _graph.read_part(con)


def _job_inputs(con) -> tuple[pa.Table, pa.Table, bool]:
    """Over the whole job: its steps, its NCCL calls matched into instances, and whether every
    process with events has a rank."""
    steps = _graph.fetch(con, "SELECT * FROM tk_steps()")
    arrivals = _graph.fetch(con, "SELECT * FROM tk_comm_arrivals() WHERE backend IN ('nccl', 'gloo')")
    unranked = con.sql(
        "SELECT count(*) FROM (SELECT DISTINCT run_id, pid FROM ("
        + " UNION ALL ".join(f"SELECT run_id, pid FROM {t}" for t in _EVENT_TABLES)
        + ")) p ANTI JOIN tk_ranks() k ON k.run_id = p.run_id AND k.pid = p.pid").fetchall()[0][0]
    return steps, arrivals, unranked == 0


def load_in_parts(engine, *, part_rows: int = PART_ROWS, jobs: int | None = 1,
                  scheduler: str | None = None) -> _graph.Graph:
    """The graph of every run of ``engine`` (:class:`tracekit.query.Engine`), each job built in
    parts of at most ``part_rows`` event rows (:func:`rank_groups`) on ``jobs`` local processes
    or a Dask ``scheduler``; exactly :func:`tracekit.whatif.graph.load` of the whole engine.
    ValueError when there is nothing to replay; a part's InputError is raised."""
    runs = sorted(engine.runs, key=lambda r: r.run_id)
    sized = {r.run_id: _rank_groups(r, part_rows) for r in runs}
    groups = {k: v[0] for k, v in sized.items()}
    if engine.filters is not None or all(g is None for g in groups.values()):
        return _graph.load(engine.con)
    con = engine.con
    steps, arrivals, ranked = _job_inputs(con)
    if not ranked:
        return _graph.load(con)
    limit = con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0]
    tasks = []
    for r in runs:
        # one table per run, shared by its parts (not a copy per part: a 2,048-rank job has 56
        # parts); the arrivals of every run, as the whole build numbers the collective instances
        # over all runs (per run, two jobs' instances 0, 1, ... shared transfer nodes)
        run_steps = steps.filter(pc.equal(steps.column("run_id"), r.run_id))
        for ranks in groups[r.run_id] or [None]:
            man = r.manifest if ranks is None else part_manifest(r.manifest, ranks)
            tasks.append((str(r.path), man, run_steps, arrivals, limit, engine.step_pattern))
    store = Store(disk=sum(rows for _, rows in sized.values()) >= disk_nodes())
    try:
        return _graph.join(_parts(tasks, jobs, scheduler), store)
    except _SharedPid:  # a pid in two parts (containers): build it whole
        store.close()
        return _graph.load(con)


class _SharedPid(Exception):
    pass


def _parts(tasks: list[tuple], jobs: int | None, scheduler: str | None):
    """The parts of ``tasks``, in order, built a batch at a time (as many as the workers run at
    once; all at once on a scheduler), so that only one batch of parts is held in memory while
    :func:`tracekit.whatif.graph.join` copies them into the graph. :class:`_SharedPid` when a
    process is in two parts."""
    batch = len(tasks) if scheduler else 2 * max(1, jobs or default_jobs())
    seen: set = set()
    for at in range(0, len(tasks), batch):
        parts = run_parts(build_part, tasks[at:at + batch], jobs=jobs, scheduler=scheduler,
                          fail_fast=True)
        for p in parts:
            if isinstance(p, BaseException):
                raise p
        for p in parts:
            if seen & set(map(tuple, p.pids)):
                raise _SharedPid
            seen |= set(map(tuple, p.pids))
        while parts:
            yield parts.pop(0)

