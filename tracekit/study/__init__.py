"""Cross-run studies (``tracekit study``) and two-run comparisons (``tracekit compare``).

``build_study(run_dirs, out_dir)`` groups runs by workload, precision, world size and
interconnect (manifests, overridable by a TOML/YAML file: :mod:`tracekit.study.runs`), computes
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
                title: str = "tracekit study") -> tuple[Study, Path]:
    """Compute the study over ``run_dirs`` and write it to ``out_dir``; returns (study, path)."""
    from tracekit.study.report import write_study

    from tracekit.runfolder import check_replaceable

    check_replaceable(out_dir, force=force, inputs=run_dirs, marker="study.json", key="tables",
                      what="study folder")
    study = build_tables(load_runs(run_dirs, override))
    return study, write_study(study, out_dir, force=force, title=title, inputs=run_dirs)
