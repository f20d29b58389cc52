"""A named query computed in parts: the run folders cut into chunks, each chunk's result computed
on a worker (local processes or a Dask scheduler's, :mod:`tracekit.workers`), the parts
concatenated. Called by :func:`tracekit.query.run` with ``jobs`` > 1 or a ``scheduler``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa

from tracekit.query.named_queries import NamedQuery
from tracekit.runfolder import Run
from tracekit.workers import connect, default_jobs, run_parts


def query_chunk(run_dirs: list[str], name: str, params: dict, memory_limit: str | None,
                step_pattern: str | None = None) -> pa.Table:
    """One named query over some run folders (run on a worker)."""
    from tracekit.query.engine import Engine

    with Engine(run_dirs, memory_limit=memory_limit, step_pattern=step_pattern) as e:
        return e.query(name, params)


def compute_in_parts(runs: Sequence[Run], q: NamedQuery, params: dict | None = None, *,
                     jobs: int | None = None, scheduler: str | None = None,
                     memory_limit: str | None = None,
                     step_pattern: str | None = None) -> pa.Table:
    """Named query ``q`` over ``runs`` (opened run folders, checked), in parts on workers.

    A query that is per run (:func:`splittable`: each result row comes from one run's rows, its
    final ORDER BY starts with run_id; tests/test_cluster.py checks the results), the runs are cut
    into contiguous chunks in run_id order, each chunk's result is computed on a worker, and the
    concatenation in chunk order is exactly the result of the query over all runs at once."""
    runs = sorted(runs, key=lambda r: r.run_id)
    workers = _worker_count(scheduler, jobs)
    paths = [str(r.path) for r in runs]
    chunks = _chunks(paths, workers) if splittable(q) else [paths]
    tasks = [(c, q.name, dict(params or {}), memory_limit, step_pattern) for c in chunks]
    parts = run_parts(query_chunk, tasks, jobs=workers, scheduler=scheduler, fail_fast=True)
    for p in parts:
        if isinstance(p, BaseException):
            raise p
    return pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]


def splittable(q) -> bool:
    """Whether named query ``q`` can be computed per run and concatenated: its first output
    column is ``run_id`` (each row comes from one run) and its final ORDER BY starts with
    ``run_id`` (concatenating in run_id order keeps the order). A query that aggregates across
    runs (e.g. ``roofline_ceilings``, per GPU model) is computed whole."""
    body = re.sub(r"--[^\n]*", "", q.sql)
    up = body.upper()
    if "ORDER BY" not in up or not q.columns or q.columns[0].name != "run_id":
        return False
    first = body[up.rindex("ORDER BY") + 8:].split(",")[0].strip()
    return re.fullmatch(r"(\w+\.)?run_id", first) is not None


def _worker_count(scheduler: str | None, jobs: int | None) -> int:
    if not scheduler:
        return jobs or default_jobs()
    client = connect(scheduler)
    try:
        return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))
    finally:
        client.close()


def _chunks(paths: list[str], workers: int) -> list[list[str]]:
    """Contiguous chunks: about two per worker (so one slow chunk does not hold the rest), never
    more than the runs."""
    n = max(1, min(len(paths), 2 * workers))
    size, extra = divmod(len(paths), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (1 if k < extra else 0)
        out.append(paths[i:j])
        i = j
    return [c for c in out if c]
