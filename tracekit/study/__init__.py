"""Cross-run studies (``tracekit study``) and two-run comparisons (``tracekit compare``).

``build_study(run_dirs, out_dir)`` describes each run by workload, precision, world size and
interconnect (manifests, overridable by a TOML/YAML file, else inferred from the trace:
:mod:`tracekit.study.runs`), pools runs with equal keys only when asked (``pool``), computes
the study's tables from the named queries (:mod:`tracekit.study.tables`) and writes a
self-contained ``report.html`` plus every table as CSV and Parquet (:mod:`tracekit.study.report`).
See docs/study.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tracekit.study.compare import compare_runs
from tracekit.study.runs import RunInfo, load_runs
from tracekit.study.tables import COLUMNS, Study, build_tables

__all__ = ["COLUMNS", "RunInfo", "Study", "build_study", "compare_runs", "load_runs", "build_tables"]


def build_study(run_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike, *,
                override: str | os.PathLike | None = None, force: bool = False,
                title: str = "tracekit study", pool: bool = False,
                step_pattern: str | None = None) -> tuple[Study, Path]:
    """Compute the study over ``run_dirs`` and write it to ``out_dir``; returns (study, path).
    ``pool``: average runs with equal keys into one point (else each run is its own point);
    ``step_pattern``: ranges that are steps (see :class:`tracekit.query.engine.Engine`)."""
    from tracekit.runfolder import check_replaceable
    from tracekit.study.report import write_study

    check_replaceable(out_dir, force=force, inputs=run_dirs, marker="study.json", key="tables",
                      what="study folder")
    study = build_tables(load_runs(run_dirs, override, step_pattern=step_pattern), pool=pool,
                         step_pattern=step_pattern)
    return study, write_study(study, out_dir, force=force, title=title, inputs=run_dirs)
