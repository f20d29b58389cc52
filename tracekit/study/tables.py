"""The study's tables, computed from the named queries' results on the study's runs.

Every number comes from a named query (``queries/``) run by :class:`tracekit.query.Session` over
all runs at once, then aggregated per run and per group (workload, precision, world size,
interconnect); :data:`SOURCES` names the query behind each table. Definitions (docs/study.md):

- scaling: ``step_ns`` = mean ``step_summary.wall_ns`` over the measured steps (warm-up steps
  dropped) of all ranks; ``samples_per_s`` = the manifest's global batch / ``step_ns`` (the
  harmonic mean of ``step_summary.samples_per_s``); ``scaling_efficiency`` = samples/s at N ÷
  (N × samples/s at 1) against the 1-rank run of the same workload, precision and interconnect
  with the same per-GPU batch.
- precision: ``speedup_vs_fp32`` = fp32 ``step_ns`` ÷ this ``step_ns`` (same workload, world size,
  interconnect); ``tensor_core_time_share`` from ``roofline`` (time of kernels with tensor FLOPs ÷
  all profiled kernel time) on ncu passes of the same workload and precision, else from
  ``study_tensor_core_names`` (kernel names, a name-based estimate; ``tensor_core_source`` says
  which).
- cpu: ``host_cpu_utilization`` scope 'run', level 'all'.
- characterization: ``roofline`` per kernel on ncu passes (else ``op_flops`` on the timeline runs:
  the operator model; ``source`` says which): summed FLOPs / summed time, summed DRAM
  bytes / summed time; DRAM transactions are 32-byte sectors (``dram__sectors*`` counters when
  ncu recorded them, else DRAM bytes / 32, said in ``source``).
- communication: with NCCL kernels, ``nccl`` and ``gpu_utilization`` (share of each GPU's active
  span in NCCL kernels; exposed NCCL time per GPU and step); without (Gloo on CPUs), the
  ``comm allreduce`` ranges of ``step_summary`` (``comm_ns / wall_ns``; exposed time unknown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tracekit.query import Session
from tracekit.query.named_queries import macros_sql
from tracekit.study import memory as _memory
from tracekit.study import mlperf as _mlperf
from tracekit.study import scaling_loss as _loss
from tracekit.study.runs import RunInfo


def _tensor_core_patterns() -> tuple[str, str]:
    """The two patterns of tk_is_tensor_core_name (queries/study/_macros.sql, the one definition
    of the name-based tensor-core rule): the match and the exclusion, in file order."""
    text = macros_sql("study")
    body = text[text.index("MACRO tk_is_tensor_core_name"):]
    found = re.findall(r"regexp_matches\(coalesce\(kname, ''\), '([^']*)'\)", body)[:2]
    if len(found) != 2:
        raise RuntimeError("queries/study/_macros.sql: tk_is_tensor_core_name lost its two patterns")
    return found[0], found[1]


# The name-based tensor-core rule (queries/study/_macros.sql, tk_is_tensor_core_name), shown in
# the report; is_tensor_core_name applies it in Python.
TENSOR_CORE_NAME_RE, NOT_TENSOR_CORE_NAME_RE = _tensor_core_patterns()


def is_tensor_core_name(name: str | None) -> bool:
    """The name-based rule of ``tensor_core_time_share`` (tk_is_tensor_core_name in
    queries/study/_macros.sql; the study itself applies it in SQL, study_tensor_core_names)."""
    n = name or ""
    return bool(re.search(TENSOR_CORE_NAME_RE, n)) and not re.search(NOT_TENSOR_CORE_NAME_RE, n)


SOURCES = {
    "scaling": ["step_summary"],
    "precision": ["step_summary", "roofline", "study_tensor_core_names"],
    "cpu": ["host_cpu_utilization"],
    "characterization": ["roofline", "study_ncu_passes", "study_dram_sectors", "op_flops"],
    "communication": ["nccl", "gpu_utilization", "step_summary"],
    "interconnect": ["step_summary", "nccl", "gpu_utilization"],
    "memory": _memory.SOURCES,
    "scaling_loss": _loss.SOURCES,
    "mlperf_scaling": _mlperf.SOURCES,
}

COLUMNS = {
    "scaling": ["workload", "precision", "world_size", "samples_per_s", "step_ns",
                "scaling_efficiency", "interconnect", "batch_size", "threads_per_rank", "steps", "runs"],
    "precision": ["workload", "world_size", "precision", "speedup_vs_fp32",
                  "tensor_core_time_share", "tensor_core_source", "interconnect", "runs"],
    "cpu": ["workload", "world_size", "cores_busy", "cpu_utilization", "precision",
            "interconnect", "cpus", "runs"],
    "characterization": ["workload", "suite", "flop_per_s", "dram_bytes_per_s",
                         "dram_transactions_per_s", "source", "precision", "kernels", "runs"],
    "communication": ["workload", "world_size", "comm_share", "exposed_comm_ns", "precision",
                      "interconnect", "source", "runs"],
    "interconnect": ["workload", "precision", "world_size", "interconnect", "samples_per_s",
                     "step_ns", "comm_share", "exposed_comm_ns", "runs"],
    "memory": _memory.COLUMNS,
    "scaling_loss": _loss.COLUMNS,
    "mlperf_scaling": _mlperf.COLUMNS,
}


@dataclass
class Study:
    runs: list[RunInfo]
    pool: bool = False  # runs with equal keys averaged into one point (--pool)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # table -> why empty / partly empty
    per_run: pd.DataFrame | None = None  # one row per run with its measured values
    scaling_points: pd.DataFrame | None = None  # the scaling table with its grouping keys
    findings: list = field(default_factory=list)  # ranked causes of scaling loss (scaling_loss)


def _runs_col(s: pd.Series) -> str:
    return ",".join(sorted(set(s)))


def _q(eng: Session, name: str, params: dict | None = None) -> pd.DataFrame:
    """The rows of the named query ``name`` over the study's runs, through the front door."""
    return eng.run(name, params or {}).table.to_pandas()


def _empty(name: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="object") for c in COLUMNS[name]})


def _keys(infos: list[RunInfo], pool: bool) -> pd.DataFrame:
    """One row per run with its keys; ``point`` is '' when runs with equal keys are pooled, else
    the run_id (every run its own point)."""
    return pd.DataFrame([{
        "run_id": i.run_id, "workload": i.workload, "suite": i.suite, "precision": i.precision,
        "world_size": i.world_size, "batch_size": i.batch_size, "interconnect": i.interconnect,
        "kind": i.kind, "samples_per_step": i.samples_per_step,
        "threads_per_rank": i.threads_per_rank, "point": "" if pool else i.run_id,
    } for i in infos])


def per_run_steps(eng: Session, keys: pd.DataFrame) -> pd.DataFrame:
    """step_summary aggregated per run: step_ns (mean wall of measured steps), comm_ns, steps."""
    s = _q(eng, "step_summary", {"include_warmup": "false"})
    if s.empty:
        return pd.DataFrame(columns=["run_id", "step_ns", "comm_ns_mean", "steps", "steps_all"])
    g = s.groupby("run_id")
    out = pd.DataFrame({
        "step_ns": g["wall_ns"].mean(),
        "comm_ns_mean": g["comm_ns"].mean(),  # NaN when NULL (not annotated)
        "wall_ns_sum": g["wall_ns"].sum(),
        "comm_ns_sum": g["comm_ns"].sum(min_count=1),
        "steps": g["step"].nunique(),
    }).reset_index()
    allsteps = _q(eng, "step_summary", {"include_warmup": "true"})
    n_all = allsteps.groupby("run_id")["step"].nunique().rename("steps_all").reset_index()
    return out.merge(n_all, on="run_id", how="left")


def build_tables(infos: list[RunInfo], *, pool: bool = False,
                 step_pattern: str | None = None) -> Study:
    """The study's tables over ``infos``. ``pool``: average runs whose keys (workload, precision,
    world size, interconnect, per-GPU batch) are equal into one point; else each run is its own
    point. ``step_pattern``: see :class:`tracekit.query.engine.Engine`."""
    study = Study(runs=infos, pool=pool)
    keys = _keys(infos, pool)
    timeline = keys[keys.kind == "timeline"]
    ncu = keys[keys.kind == "ncu"]
    with Session([i.path for i in infos], step_pattern=step_pattern) as eng:
        steps = per_run_steps(eng, keys)
        rf = roofline_per_kernel(eng, ncu.run_id) if len(ncu) else None
        pr = timeline.merge(steps, on="run_id", how="left")
        pr["samples_per_s"] = pr["samples_per_step"].astype("float64") * 1e9 / pr["step_ns"]
        study.per_run = pr
        _scaling(study, pr)
        _precision(study, eng, pr, ncu, rf)
        _cpu(study, eng, timeline)
        _characterization(study, eng, ncu, keys, rf)
        _communication(study, eng, pr)
        _interconnect(study)
        study.tables["memory"], why = _memory.memory_table(eng, keys)
        if why:
            study.reasons["memory"] = why
        study.tables["mlperf_scaling"], why = _mlperf.mlperf_table(eng)
        if why:
            study.reasons["mlperf_scaling"] = why
    study.tables["scaling_loss"], study.findings, why = _loss.scaling_loss(
        study.per_run, {i.run_id: i.path for i in infos}, step_pattern)
    if why:
        study.reasons["scaling_loss"] = why
    for name in COLUMNS:
        study.tables.setdefault(name, _empty(name))
    return study


# -- scaling ------------------------------------------------------------------------------------
_GROUP = ["workload", "precision", "world_size", "interconnect", "point"]


def _group(df: pd.DataFrame, keys: list[str], agg: dict) -> pd.DataFrame:
    d = df.copy()
    for k in keys:  # groupby drops NaN keys
        d[k] = d[k].astype("object").where(d[k].notna(), "")
    out = d.groupby(keys, sort=True).agg(**agg).reset_index()
    for k in keys:
        out[k] = out[k].replace("", None)
        if k in ("world_size", "batch_size", "threads_per_rank"):
            out[k] = pd.to_numeric(out[k], errors="coerce")
    return out


def _scaling(study: Study, pr: pd.DataFrame) -> None:
    ok = pr[pr.step_ns.notna()]
    missing = sorted(set(pr.run_id) - set(ok.run_id))
    why = []
    if missing:
        why.append(f"no training steps (no step ranges and no GPU kernels to detect iterations "
                   f"from) in run(s) {', '.join(missing)}")
    if ok.empty:
        study.reasons["scaling"] = "no run has training steps (step ranges or GPU kernels)"
        return
    t = _group(ok, _GROUP + ["batch_size", "threads_per_rank"], dict(
        step_ns=("step_ns", "mean"), samples_per_s=("samples_per_s", "mean"),
        steps=("steps", "sum"), runs=("run_id", _runs_col)))
    base = t[t.world_size == 1].rename(columns={"samples_per_s": "sps1", "threads_per_rank": "tpr1",
                                                "runs": "runs1"})
    # the 1-GPU run has no interconnect of its own: match it whatever the N-GPU run's is
    on = ["workload", "precision", "batch_size"]
    b_any = base.groupby(on, dropna=False).agg(
        sps1=("sps1", "mean"), tpr1=("tpr1", lambda x: sorted(set(x.dropna().astype(int)))),
        runs1=("runs1", lambda x: ",".join(sorted(x)))).reset_index()
    t = t.merge(b_any, on=on, how="left")
    t["scaling_efficiency"] = t["samples_per_s"] / (t["world_size"] * t["sps1"])
    # runs whose ranks had different intra-op thread counts are not comparable (a 1-rank run
    # with every core against N ranks of one thread each measures the thread count, not scaling)
    differ = [isinstance(b, list) and pd.notna(n) and any(x != int(n) for x in b)
              for b, n in zip(t["tpr1"], t["threads_per_rank"])]
    t.loc[differ, "scaling_efficiency"] = np.nan
    for r in t[differ].itertuples():
        why.append(f"scaling_efficiency of {r.runs} not computed: it ran {int(r.threads_per_rank)} "
                   f"thread(s) per rank, the 1-rank run(s) {r.runs1} "
                   f"{'/'.join(str(x) for x in r.tpr1)} (collect both with the same "
                   "--threads-per-rank)")
    unknown = t.world_size.isna() | t.samples_per_s.isna()
    if unknown.any():
        why.append("scaling_efficiency and samples_per_s are empty where the world size or the "
                   "per-GPU batch is unknown (" + ", ".join(sorted(set(t.loc[unknown, "runs"]))) +
                   "; give them in an override file)")
    no1 = t.scaling_efficiency.isna() & ~unknown & t.sps1.isna()
    if no1.any():
        why.append("scaling_efficiency is empty where no 1-GPU run of the same workload, precision "
                   f"and per-GPU batch exists ({', '.join(sorted(set(t.loc[no1, 'workload'])))})")
    if why:
        study.reasons["scaling"] = "; ".join(why)
    study.scaling_points = t
    study.tables["scaling"] = t[COLUMNS["scaling"]].sort_values(
        ["workload", "precision", "world_size"], kind="stable").reset_index(drop=True)


# -- precision ----------------------------------------------------------------------------------
def _tensor_share_ncu(rf: pd.DataFrame | None, ncu: pd.DataFrame) -> pd.DataFrame:
    """Per ncu run: time of kernels with tensor FLOPs / all profiled kernel time (roofline)."""
    if ncu.empty or rf is None or rf.empty:
        return pd.DataFrame(columns=["run_id", "tc_share"])
    rf = rf.assign(tc_ns=np.where(rf["tensor_flop"].fillna(0) > 0, rf["time_ns"], 0.0))
    g = rf.groupby("run_id").agg(tc=("tc_ns", "sum"), t=("time_ns", "sum"),
                                 known=("tensor_flop", lambda s: s.notna().any())).reset_index()
    g = g[g.known & (g.t > 0)]
    g["tc_share"] = g.tc / g.t
    return g[["run_id", "tc_share"]]


def _tensor_share_names(eng: Session) -> pd.DataFrame:
    """Per run: the name-based tensor-core share of kernel time (study_tensor_core_names)."""
    return _q(eng, "study_tensor_core_names")[["run_id", "tc_share"]]


def _precision(study: Study, eng: Session, pr: pd.DataFrame, ncu: pd.DataFrame,
               rf: pd.DataFrame | None) -> None:
    sc = study.scaling_points
    if sc is None or sc.empty:
        study.reasons["precision"] = "no run has training steps"
        return
    on = ["workload", "world_size", "interconnect", "batch_size"]
    fp32 = (sc[sc.precision == "fp32"].groupby(on, dropna=False)["step_ns"].mean()
            .rename("fp32_ns").reset_index())  # several fp32 points (not pooled): their mean
    t = sc.merge(fp32, on=["workload", "world_size", "interconnect", "batch_size"], how="left")
    t["speedup_vs_fp32"] = t["fp32_ns"] / t["step_ns"]
    # tensor-core share: ncu passes of the same workload and precision first
    by_ncu = _tensor_share_ncu(rf, ncu).merge(ncu[["run_id", "workload", "precision"]], on="run_id")
    by_ncu = by_ncu.groupby(["workload", "precision"]).agg(
        ncu_share=("tc_share", "mean"), ncu_runs=("run_id", _runs_col)).reset_index()
    by_name = _tensor_share_names(eng).merge(pr[["run_id"] + _GROUP], on="run_id")
    by_name = _group(by_name, _GROUP, dict(name_share=("tc_share", "mean")))
    t = t.merge(by_ncu, on=["workload", "precision"], how="left")
    t = t.merge(by_name, on=_GROUP, how="left")
    t["tensor_core_time_share"] = t["ncu_share"].where(t["ncu_share"].notna(), t["name_share"])
    t["tensor_core_source"] = np.select(
        [t["ncu_share"].notna(), t["name_share"].notna()],
        ["ncu counters (roofline tensor_flop, profiled launches)", "name-based estimate (kernel_summary)"],
        "no GPU kernels captured")
    t["runs"] = [",".join(sorted(set(filter(None, (r + "," + (n if isinstance(n, str) else "")).split(",")))))
                 for r, n in zip(t["runs"], t["ncu_runs"])]
    if not t["fp32_ns"].notna().all():
        study.reasons["precision"] = ("speedup_vs_fp32 is empty where no fp32 run of the same "
                                      "workload, world size and per-GPU batch exists")
    if t["tensor_core_time_share"].isna().any():
        r = ("tensor_core_time_share is empty for runs without GPU kernels (CPU runs) and "
             "without an ncu pass")
        study.reasons["precision"] = "; ".join(filter(None, [study.reasons.get("precision"), r]))
    study.tables["precision"] = t[COLUMNS["precision"]].sort_values(
        ["workload", "world_size", "precision"], kind="stable").reset_index(drop=True)


# -- cpu ----------------------------------------------------------------------------------------
def _cpu(study: Study, eng: Session, timeline: pd.DataFrame) -> None:
    h = _q(eng, "host_cpu_utilization")
    h = h[(h.scope == "run") & (h.level == "all") & h.run_id.isin(timeline.run_id)]
    h = h[h.cores_busy.notna()]
    without = sorted(set(timeline.run_id) - set(h.run_id))
    if without:
        study.reasons["cpu"] = (f"no scheduler data (nsys --cpuctxsw; the torch profiler records "
                                f"none) in run(s) {', '.join(without)}")
    if h.empty:
        return
    d = h.merge(timeline, on="run_id")
    t = _group(d, _GROUP, dict(cores_busy=("cores_busy", "mean"),
                               cpu_utilization=("cpu_utilization", "mean"),
                               cpus=("cpus", "max"), runs=("run_id", _runs_col)))
    study.tables["cpu"] = t[COLUMNS["cpu"]].sort_values(
        ["workload", "precision", "world_size"], kind="stable").reset_index(drop=True)


# -- characterization ---------------------------------------------------------------------------
def roofline_per_kernel(eng: Session, run_ids) -> pd.DataFrame:
    """``roofline`` per kernel on the runs ``run_ids``; runs whose ncu rows come from several
    files pool their passes (``merge_passes``: separate ncu runs for DRAM and FLOP counters)."""
    files = _q(eng, "study_ncu_passes").rename(columns={"files": "n"})
    files = files[files.run_id.isin(set(run_ids))]
    parts = [pd.DataFrame(columns=["run_id", "kernel_name", "time_ns", "flop", "tensor_flop",
                                   "dram_bytes", "flop_per_s", "dram_bytes_per_s"])]
    for merge, ids in files.groupby(files.n > 1)["run_id"]:
        r = _q(eng, "roofline", {"ceilings": "none", "merge_passes": "true" if merge else "false"})
        parts.append(r[r.run_id.isin(set(ids))])
    return pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)


def _characterization(study: Study, eng: Session, ncu: pd.DataFrame, keys: pd.DataFrame,
                      rf: pd.DataFrame | None) -> None:
    """Compute rate against memory traffic per workload: from the ncu counters of an ncu pass, or,
    for a workload and precision without one, from the operator model (op_flops) of its timeline
    runs; ``source`` says which."""
    parts = []
    g = _ncu_rates(eng, rf) if len(ncu) and rf is not None and len(rf) else None
    if g is not None:
        parts.append(g)
    covered = set(map(tuple, keys[keys.run_id.isin(set(g.run_id))][["workload", "precision"]].values)) \
        if g is not None else set()
    tl = keys[(keys.kind == "timeline")
              & ~keys[["workload", "precision"]].apply(tuple, axis=1).isin(covered)]
    m = _model_rates(eng, tl.run_id) if len(tl) else None
    if m is not None and len(m):
        parts.append(m)
    if not parts:
        study.reasons["characterization"] = (
            "no ncu pass among the runs and no operator shapes with GPU time in the timeline runs: "
            "FLOP/s and memory traffic need Nsight Compute counters (`tracekit collect WORKLOAD "
            "--profiler ncu` on a GPU) or a GPU trace recorded with shapes (`--profiler torch`)")
        return
    g = pd.concat(parts, ignore_index=True)
    d = g.merge(keys[["run_id", "workload", "suite", "precision"]], on="run_id")
    t = _group(d, ["workload", "suite", "precision", "source"], dict(
        flop_per_s=("flop_per_s", "mean"), dram_bytes_per_s=("dram_bytes_per_s", "mean"),
        dram_transactions_per_s=("dram_transactions_per_s", "mean"),
        kernels=("kernels", "sum"), runs=("run_id", _runs_col)))
    if t[["flop_per_s", "dram_bytes_per_s"]].isna().any().any():
        study.reasons["characterization"] = ("empty values: the ncu pass lacks FLOP or DRAM byte "
                                             "counters (see the roofline query's `missing`)")
    study.tables["characterization"] = t[COLUMNS["characterization"]].sort_values(
        ["suite", "workload", "precision"], kind="stable").reset_index(drop=True)


def _ncu_rates(eng: Session, rf: pd.DataFrame) -> pd.DataFrame:
    """Per ncu run: summed roofline FLOP and DRAM bytes over the profiled kernels' summed time."""
    g = rf.groupby("run_id").agg(
        time_ns=("time_ns", "sum"),
        flop=("flop", lambda s: s.sum(min_count=1)),
        dram_bytes=("dram_bytes", lambda s: s.sum(min_count=1)),
        kernels=("kernel_name", "nunique")).reset_index()
    sec = _q(eng, "study_dram_sectors")
    g = g.merge(sec[["run_id", "sectors"]], on="run_id", how="left")
    g["flop_per_s"] = g.flop * 1e9 / g.time_ns
    g["dram_bytes_per_s"] = g.dram_bytes * 1e9 / g.time_ns
    has_sec = g.sectors.notna()
    g["dram_transactions_per_s"] = np.where(has_sec, g.sectors * 1e9 / g.time_ns,
                                            g.dram_bytes_per_s / 32.0)
    g["source"] = np.where(
        has_sec, "ncu roofline (FLOP, dram_bytes, time_ns); transactions = dram__sectors (32 B)",
        "ncu roofline (FLOP, dram_bytes, time_ns); transactions = dram_bytes / 32 (sector size)")
    return g


MODEL_SOURCE = ("operator model (op_flops: FLOP and bytes from the recorded shapes over the kernel "
                "time of the modelled calls; bytes are a lower bound of DRAM traffic); "
                "transactions = bytes / 32")


def _model_rates(eng: Session, run_ids) -> pd.DataFrame:
    """Per timeline run: op_flops' counted calls that launched kernels: summed flop and bytes over
    their summed gpu_ns (calls without kernels, e.g. on a CPU, do not count)."""
    ops = _q(eng, "op_flops")
    ops = ops[ops.run_id.isin(set(run_ids)) & ops.counted.astype(bool) & (ops.gpu_ns.fillna(0) > 0)
              & ops.flop.notna() & ops.bytes.notna()]
    if ops.empty:
        return ops
    g = ops.groupby("run_id").agg(time_ns=("gpu_ns", "sum"), flop=("flop", "sum"), bytes=("bytes", "sum"),
                                  kernels=("kernels", "sum")).reset_index()
    g["flop_per_s"] = g.flop * 1e9 / g.time_ns
    g["dram_bytes_per_s"] = g.bytes * 1e9 / g.time_ns
    g["dram_transactions_per_s"] = g.dram_bytes_per_s / 32.0
    g["source"] = MODEL_SOURCE
    return g


# -- communication ------------------------------------------------------------------------------
def _communication(study: Study, eng: Session, pr: pd.DataFrame) -> None:
    pr = pr[pr.step_ns.notna()]
    if pr.empty:
        study.reasons["communication"] = "no run has training steps"
        return
    nccl = _q(eng, "nccl")
    gu = _q(eng, "gpu_utilization")
    gu = gu[gu.scope == "run"]
    rows = []
    gpu_runs = set(gu.run_id)
    # per GPU: the union over every collective type (nccl repeats it on each of the GPU's rows);
    # summing nccl_ns over the rows would count concurrent collectives twice
    per_gpu = nccl.drop_duplicates(["run_id", "pid", "device_id"])
    n_by_run = per_gpu.groupby("run_id").agg(nccl_ns=("gpu_nccl_ns", "sum"), exposed_ns=("gpu_exposed_ns", "sum"))
    w_by_run = gu.groupby("run_id").agg(wall_ns=("wall_ns", "sum"), gpus=("device_id", "size"))
    for r in pr.itertuples():
        row = {"run_id": r.run_id}
        if r.world_size == 1 and r.run_id not in set(nccl.run_id):
            row["comm_share"], row["exposed_comm_ns"] = 0.0, 0.0
            row["source"] = "one process: no communication"
        elif r.run_id in gpu_runs:
            n = n_by_run.loc[r.run_id] if r.run_id in n_by_run.index else None
            w = w_by_run.loc[r.run_id]
            nccl_ns = 0.0 if n is None else float(n.nccl_ns)
            exposed = 0.0 if n is None else float(n.exposed_ns)
            row["comm_share"] = nccl_ns / w.wall_ns if w.wall_ns else np.nan
            steps = r.steps_all if r.steps_all and not pd.isna(r.steps_all) else np.nan
            row["exposed_comm_ns"] = exposed / w.gpus / steps
            row["source"] = "nccl kernels (nccl, gpu_utilization)"
        else:
            row["comm_share"] = (np.nan if pd.isna(r.comm_ns_sum) else r.comm_ns_sum / r.wall_ns_sum)
            row["exposed_comm_ns"] = np.nan
            row["source"] = ("comm ranges (step_summary comm_ns / wall_ns); exposed time needs "
                             "NCCL kernels" if not pd.isna(r.comm_ns_sum) else
                             "no comm ranges and no NCCL kernels (torch profiler on CPUs)")
        rows.append(row)
    d = pd.DataFrame(rows).merge(pr[["run_id"] + _GROUP], on="run_id")
    t = _group(d, _GROUP + ["source"], dict(
        comm_share=("comm_share", "mean"), exposed_comm_ns=("exposed_comm_ns", "mean"),
        runs=("run_id", _runs_col)))
    why = []
    if t.comm_share.isna().any():
        why.append("comm_share is empty for multi-process runs with neither NCCL kernels nor "
                   "`comm allreduce` ranges (the torch profiler path on CPUs; nsys records them)")
    if t.exposed_comm_ns.isna().any():
        why.append("exposed_comm_ns is empty for multi-process runs without NCCL kernels (Gloo on "
                   "CPUs): no GPU stream to overlap with")
    if why:
        study.reasons["communication"] = "; ".join(why)
    study.tables["communication"] = t[COLUMNS["communication"]].sort_values(
        ["workload", "precision", "world_size"], kind="stable").reset_index(drop=True)
    study.per_run = study.per_run.merge(d[["run_id", "comm_share", "exposed_comm_ns"]],
                                        on="run_id", how="left")


def _interconnect(study: Study) -> None:
    pr = study.per_run
    pr = pr[pr.step_ns.notna() & pr.interconnect.notna()]
    kinds = set(pr.interconnect)
    if len(kinds) < 2:
        study.reasons["interconnect"] = (
            "needs runs over two interconnects (e.g. NVLink and PCIe) of the same workload, "
            "precision and world size; found " + (", ".join(sorted(kinds)) or "none recorded") +
            " (set `interconnect` in an override file)")
        return
    multi = pr.groupby(["workload", "precision", "world_size"])["interconnect"].transform("nunique")
    pr = pr[multi > 1]
    if pr.empty:
        study.reasons["interconnect"] = ("no workload, precision and world size was run over more "
                                         "than one interconnect")
        return
    t = _group(pr, _GROUP, dict(samples_per_s=("samples_per_s", "mean"), step_ns=("step_ns", "mean"),
                                comm_share=("comm_share", "mean"),
                                exposed_comm_ns=("exposed_comm_ns", "mean"),
                                runs=("run_id", _runs_col)))
    study.tables["interconnect"] = t[COLUMNS["interconnect"]].sort_values(
        ["workload", "precision", "world_size", "interconnect"]).reset_index(drop=True)
