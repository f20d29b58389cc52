"""What a user is told beside a result: the warnings of the runs a query reads, and why a result
is empty. Both come from the run folders' manifests (row counts, ``not_captured`` reasons,
``warnings``), so they cost no query.

- :func:`tables_read` (:mod:`tracekit.query.catalog`): the run-folder tables a statement reads,
  through the macros it calls;
- :func:`run_warnings`: the manifest warnings of the runs that concern those tables;
- :func:`why_empty`: one sentence saying why a named query or SQL statement returned no rows —
  a table not captured (with the manifest's reason and the profiler option that captures it),
  captured with zero rows, or rows present that the query's condition (its ``@empty`` header
  line, :mod:`tracekit.query.named_queries`) did not select.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tracekit import schema
from tracekit.query import catalog
from tracekit.query.catalog import tables_read
from tracekit.query.named_queries import NamedQuery
from tracekit.runfolder import Run

__all__ = ["CAPTURE", "run_warnings", "sql_error", "tables_read", "why_empty"]

CAPTURE = {
    "kernels": "nsys profile --trace=cuda, or the PyTorch profiler with ProfilerActivity.CUDA",
    "cuda_api": "nsys profile --trace=cuda, or the PyTorch profiler with ProfilerActivity.CUDA",
    "memcpy": "nsys profile --trace=cuda, or the PyTorch profiler with ProfilerActivity.CUDA",
    "memset": "nsys profile --trace=cuda, or the PyTorch profiler with ProfilerActivity.CUDA",
    "cuda_sync": "nsys profile --trace=cuda, or the PyTorch profiler with ProfilerActivity.CUDA",
    "nvtx_ranges": "nsys profile --trace=nvtx (tracekit's runners mark steps and phases with NVTX), "
                   "or record_function ranges in the PyTorch profiler",
    "nvtx_marks": "nsys profile --trace=nvtx",
    "osrt_api": "nsys profile --trace=osrt",
    "cpu_thread_state": "nsys profile --cpuctxsw=process-tree",
    "gpu_metrics": "nsys profile --gpu-metrics-device=all (Turing or newer GPUs)",
    "ncu_launches": "an Nsight Compute pass (tracekit collect --profiler ncu, or ncu --set full -o "
                    "report, then tracekit convert report.ncu-rep, with the nsys export for one run "
                    "folder)",
    "ncu_metrics": "an Nsight Compute pass (tracekit collect --profiler ncu, or ncu --set full -o "
                   "report, then tracekit convert report.ncu-rep, with the nsys export for one run "
                   "folder)",
    "collectives": "a PyTorch profiler (Kineto) trace of a distributed run; nsys exports do not "
                   "fill it yet",
    "processes": "nsys export --type sqlite of the whole report",
    "threads": "nsys export --type sqlite of the whole report",
    "devices": "nsys export --type sqlite of the whole report",
}
"""Per table: the profiler option that records it (named in empty-result explanations)."""

_WORD = re.compile(r"[a-z_]+")
_MISSING = re.compile(r"(Table|Scalar Function|Table Function|Macro Function) with name (\w+) does not "
                      r"exist!(?: Did you mean \"[^\"]*\"\?)?", re.IGNORECASE)


def sql_error(message: str) -> str:
    """DuckDB's error ``message`` with its suggestion for an unknown table or function replaced by
    the closest run-folder tables and tracekit macros (DuckDB only knows the views created so
    far, so it suggests its own catalog, e.g. ``pg_enum``)."""
    from tracekit.suggest import did_you_mean

    m = _MISSING.search(message)
    if not m:
        return message
    kind, name = m.group(1), m.group(2)
    hint = did_you_mean(name, catalog.all_names()) or (
        f" (tables: {', '.join(schema.TABLES)}, runs, run_tables)" if kind.lower() == "table" else "")
    return message[:m.start()] + f"{kind} {name} does not exist{hint}" + message[m.end():]


# what run folders converted before notes existed (tracekit.runfolder.integrity.notes) hold as warnings
_SAID_AT_CONVERT = re.compile(r"row\(s\) of \w+ have a zero or negative duration$|duplicate row\(s\) in \w+ ")


def run_warnings(runs: Sequence[Run], tables: set[str] | None = None) -> list[str]:
    """``run RUN_ID: WARNING`` for every manifest warning of ``runs``; with ``tables``, only the
    warnings that name one of them or name no table at all (e.g. a newer export schema). Counts
    of 0 ns and duplicate rows are not warnings: ``tracekit convert`` said them once."""
    out = []
    for r in runs:
        for w in r.manifest.get("warnings") or []:
            if _SAID_AT_CONVERT.search(str(w)):
                continue
            named = set(_WORD.findall(str(w).lower())) & set(schema.TABLES)
            if tables is None or not named or named & tables:
                out.append(f"run {r.run_id}: {w}")
    return out


def _runs_phrase(runs: list[Run], limit: int = 3) -> str:
    ids = [r.run_id for r in runs]
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ("run " if len(ids) == 1 else "runs ") + ", ".join(ids[:limit]) + more


def _lacking(run: Run, tables: list[str]) -> str:
    """What ``run`` lacks of ``tables``: "no t1, t2 (not captured: REASON)" / "0 rows of t"."""
    by_reason: dict[str, list[str]] = {}
    for t in tables:
        if run.table_rows(t) is None:
            reason = run.manifest.get("not_captured", {}).get(t) or "no reason recorded"
            by_reason.setdefault(f"not captured: {reason}", []).append(t)
        else:
            by_reason.setdefault("captured with 0 rows", []).append(t)
    return "; ".join(f"no {', '.join(ts)} ({why})" for why, ts in by_reason.items())


def why_empty(runs: Sequence[Run], query: NamedQuery | None = None, sql: str | None = None,
              params: dict | None = None) -> str:
    """One sentence saying why ``query`` (or ad-hoc ``sql``) returned no rows over ``runs``."""
    name = query.name if query is not None else "the statement"
    text = query.sql if query is not None else (sql or "")
    read = tables_read(text)
    need = [t for t in (query.requires if query is not None and query.requires else sorted(read))
            if t in schema.TABLES]
    declared = bool(query is not None and query.requires)
    if not need:
        return f"{name} returned no rows (it reads no run-folder table)"
    complete, parts, hints = [], [], []
    for r in runs:
        lacking = [t for t in need if not r.table_rows(t)]
        if declared and lacking or not declared and len(lacking) == len(need):
            parts.append(f"run {r.run_id} has {_lacking(r, lacking)}")
            hints += [t for t in lacking if t not in hints]
        else:
            complete.append(r)
    if not complete:
        how: dict[str, list[str]] = {}
        for t in hints:
            if t in CAPTURE:
                how.setdefault(CAPTURE[t], []).append(t)
        hint = "; ".join(f"{', '.join(ts)} {'come' if len(ts) > 1 else 'comes'} from {h}"
                         for h, ts in how.items())
        return f"{name} returned no rows: {'; '.join(parts)}" + (f". {hint}" if hint else "")
    counts = ", ".join(f"{n} row{'s' if n != 1 else ''} of {t}" for t in need
                       if (n := sum(r.table_rows(t) or 0 for r in complete)))
    cond = query.empty if query is not None and query.empty else "no row matched the query's conditions"
    given = ", ".join(f"{k}={v}" for k, v in (params or {}).items())
    return (f"{name} returned no rows: {cond}, among the {counts} in {_runs_phrase(complete)}"
            + (f" (with --param {given})" if given else ""))
