"""The study's ``memory`` table: peak memory per run (per point when runs are pooled).

From ``memory_summary`` (scope 'run'): of each run's devices, its GPUs when it recorded GPU
memory (device 'cuda:N'), else the host; the largest peak among them (in a multi-rank run, the
rank that decides whether the job fits), with the device and rank it happened on. Pooled runs
(--pool) show the largest peak of the pooled runs. Runs without memory events have no row; the
table's reason says how to record them.
"""

from __future__ import annotations

import pandas as pd

COLUMNS = ["workload", "precision", "world_size", "batch_size", "peak_allocated_bytes",
           "peak_reserved_bytes", "device", "source", "runs"]
SOURCES = ["memory_summary"]
TITLE = "Peak memory per run (allocated and reserved, on the device with the highest peak)"
NOT_RECORDED = ("no run recorded memory events: collect with `tracekit collect --profile-memory` "
                "(torch.profiler profile_memory=True), or nsys --cuda-memory-usage=true")


def memory_table(eng, keys: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """(the memory table, the reason it is empty or partial, or None)."""
    s = eng.query("memory_summary").to_pandas()
    if s.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS}), NOT_RECORDED
    s = s[s["scope"] == "run"].copy()
    s["gpu"] = s["device"].str.startswith("cuda:")
    has_gpu = s.groupby("run_id")["gpu"].transform("any")
    s = s[s["gpu"] == has_gpu]
    s = s.sort_values("peak_allocated_bytes", ascending=False).drop_duplicates("run_id")
    s["device"] = [d if pd.isna(r) else f"rank {int(r)} {d}" for r, d in zip(s["rank"], s["device"])]
    t = keys.merge(s[["run_id", "peak_allocated_bytes", "peak_reserved_bytes", "device", "source"]], on="run_id")
    rows = []
    for _, g in t.groupby(["workload", "precision", "world_size", "batch_size", "point"], dropna=False):
        top = g.sort_values("peak_allocated_bytes", ascending=False).iloc[0]
        rows.append({**{c: top[c] for c in COLUMNS if c != "runs"}, "runs": ",".join(sorted(g["run_id"]))})
    out = pd.DataFrame(rows, columns=COLUMNS).sort_values(["workload", "precision", "world_size"], kind="stable")
    missing = sorted(set(keys["run_id"]) - set(s["run_id"]))
    why = None
    if missing:
        why = (f"{len(missing)} run(s) without memory events ({', '.join(missing[:5])}): "
               + NOT_RECORDED.split(": ", 1)[1])
    return out.reset_index(drop=True), why
