"""The study's MLPerf table: time-to-train scaling from MLPerf training result logs.

When run folders converted from MLPerf result logs (collectors/mllog: ``mlperf_runs``) are among
a study's runs, the study carries the ``mlperf_scaling`` named query's rows (speedup and scaling
efficiency of each system against the submitter's smallest system with the same accelerator,
from MLPerf's scores) beside the profile-based ``scaling`` table, with the run folders each row
comes from. Without such runs the table is empty and the report leaves its section out.
"""

from __future__ import annotations

import pandas as pd

from tracekit.query import Engine, run

SOURCES = ["mlperf_scaling", "mlperf_runs"]
COLUMNS = ["round", "submitter", "benchmark", "accelerator_model", "system", "accelerators",
           "score_min", "baseline_system", "speedup", "scaling_efficiency", "runs"]
INT = {"accelerators"}
TEXT = {"round", "submitter", "benchmark", "accelerator_model", "system", "baseline_system"}
_KEYS = ["round", "submitter", "system", "benchmark"]


def mlperf_table(eng: Engine) -> tuple[pd.DataFrame, str | None]:
    """The ``mlperf_scaling`` rows over the engine's runs, each with ``runs``: the run folders
    holding that system's result files; (table, why it is empty or None)."""
    df = run("mlperf_scaling", engine=eng, explain=False).table.to_pandas()
    if df.empty:
        n = eng.sql("SELECT count(*) AS n FROM mlperf_runs").to_pylist()[0]["n"]
        why = ("no MLPerf result logs among the runs (tracekit convert RESULTS_DIR; docs/mlperf.md)"
               if not n else f"{n} MLPerf result file(s) but no system with a score and an "
               "accelerator count (mlperf_score, mlperf_runs.accelerators)")
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS}), why
    src = eng.sql("SELECT round, submitter, system, benchmark, string_agg(DISTINCT run_id, ',' "
                  "ORDER BY run_id) AS runs FROM mlperf_runs GROUP BY ALL").to_pandas()
    out = df.merge(src, on=_KEYS, how="left")
    return out[COLUMNS], None


def shown(study) -> bool:
    """Whether the report has an MLPerf section: some run holds MLPerf result logs."""
    df = study.tables.get("mlperf_scaling")
    return df is not None and len(df) > 0
