"""What each run of a study is: workload, suite, precision, world size, batch, interconnect, pass.

Read from the manifest ``tracekit collect`` writes (``workload.*``, ``collect.profiler``), and
overridable per run by a small TOML or YAML file for runs collected elsewhere::

    [defaults]                 # applies to every run (manifest values win over defaults)
    interconnect = "NVLink"

    [runs.rn50_fp32_1gpu]      # a run_id (manifest run_id, by default the folder name)
    workload = "resnet50"
    suite = "mlperf"
    precision = "fp32"         # fp32, amp or bf16
    world_size = 1
    batch_size = 256           # per GPU
    interconnect = "PCIe"      # NVLink or PCIe (or any label)

Values under ``[runs.ID]`` win over the manifest. What neither gives is inferred from the trace
(:func:`infer`, the ``run_inventory`` query): the workload label from the main process's name and
the input file's name, the world size from the ranks or the GPUs the run used, the precision from
the number format its GEMM kernels' names state; what cannot be inferred is ``unknown`` (precision)
or None (world size, batch size), never a default. ``origin`` says where every key came from.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import InputError, one_line
from tracekit.runfolder import Run, open_run

WORKLOAD_CHARS = 120  # a workload label (a process name from the trace) is cut here for the report
FIELDS = ("workload", "suite", "precision", "world_size", "batch_size", "interconnect", "pass")
_INT_FIELDS = ("world_size", "batch_size")


@dataclass
class RunInfo:
    """One run of a study, with the grouping keys it was given (``origin`` says where from)."""

    run_id: str
    path: Path
    workload: str
    suite: str | None
    precision: str  # fp32, amp, bf16 (or any label given), or 'unknown'
    world_size: int | None  # None when unknown
    batch_size: int | None
    interconnect: str | None
    kind: str  # 'timeline' (nsys / torch profiler: steps) or 'ncu' (counters)
    profiler: str | None
    samples_per_step: int | None
    origin: dict = field(default_factory=dict)
    threads_per_rank: int | None = None  # torch intra-op threads of each rank (tracekit collect)
    step_source: str | None = None  # tk_steps source of the run's steps (None: no steps)

    @property
    def label(self) -> str:
        return f"{self.workload}/{self.precision}/{self.world_size}"


def load_override(path: str | os.PathLike | None) -> dict:
    """The override file as ``{"defaults": {...}, "runs": {run_id: {...}}}`` (TOML or YAML)."""
    if path is None:
        return {"defaults": {}, "runs": {}}
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: override file not found")
    text = p.read_bytes()
    try:
        if p.suffix.lower() in (".yaml", ".yml"):
            try:
                import yaml
            except ImportError:
                raise InputError(f"{p}: reading YAML needs PyYAML (pip install pyyaml); "
                                 "or write the file as TOML") from None
            data = yaml.safe_load(text.decode("utf-8")) or {}
        else:
            try:
                import tomllib
            except ImportError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef]
            data = tomllib.loads(text.decode("utf-8"))
    except InputError:
        raise
    except Exception as exc:  # tomllib.TOMLDecodeError, yaml.YAMLError, UnicodeDecodeError
        raise InputError(f"{p}: not a valid override file: {one_line(exc)}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: the override file must be a table with [defaults] and [runs.ID]")
    unknown = set(data) - {"defaults", "runs"}
    if unknown:
        raise InputError(f"{p}: unknown section(s) {', '.join(sorted(unknown))}; use [defaults] "
                         "and [runs.RUN_ID]")
    defaults = data.get("defaults") or {}
    runs = data.get("runs") or {}
    for where, d in [("defaults", defaults)] + [(f"runs.{k}", v) for k, v in runs.items()]:
        if not isinstance(d, dict):
            raise InputError(f"{p}: [{where}] must be a table of keys")
        bad = set(d) - set(FIELDS)
        if bad:
            raise InputError(f"{p}: [{where}] has unknown key(s) {', '.join(sorted(bad))}; "
                             f"known: {', '.join(FIELDS)}")
        for k in _INT_FIELDS:
            if k in d and (not isinstance(d[k], int) or d[k] < 1):
                raise InputError(f"{p}: [{where}] {k} must be a positive integer, got {d[k]!r}")
    return {"defaults": defaults, "runs": runs}


_SOURCE_PROFILER = {"nsys": "nsys", "kineto": "torch", "ncu": "ncu", "memsnapshot": "torch memory snapshot"}


def profiler_of(manifest: dict) -> str | None:
    """The profiler(s) a converted run's inputs came from, by the manifest's ``sources`` (nsys,
    torch for a PyTorch profiler trace, ncu; several joined with ``+``), as ``collect.profiler``
    names them; None when the manifest names none."""
    names = [_SOURCE_PROFILER.get(k, k) for k in (manifest.get("sources") or {})]
    return "+".join(names) or None


def _kind(run: Run, profiler: str | None) -> str:
    tables = run.manifest.get("tables", {})
    if profiler == "ncu" or ("ncu_launches" in tables and "nvtx_ranges" not in tables
                             and "kernels" not in tables):
        return "ncu"
    return "timeline"


_RANK_SUFFIX = re.compile(r"([._-]?rank[._-]?\d+)$", re.IGNORECASE)
_SUFFIXES = (".json.gz", ".json", ".pt.trace.json", ".sqlite", ".nsys-rep", ".ncu-rep", ".csv", ".gz")


def _input_label(run: Run) -> str | None:
    """The input files' common name: the first input's name without its extension and without a
    trailing rank number (``trace_rank0.json.gz`` -> ``trace``); None without inputs."""
    names = [str(i.get("name") or "") for i in run.manifest.get("inputs") or [] if i.get("name")]
    if not names:
        return None
    stem = names[0]
    for suf in _SUFFIXES:
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
            break
    stem = _RANK_SUFFIX.sub("", stem) if len(names) > 1 else stem
    return stem or None


def infer(run: Run, inv: dict | None) -> dict[str, tuple[object, str]]:
    """Keys inferred from the trace: {key: (value, where it came from)}. ``inv`` is the run's
    ``run_inventory`` row. Only keys with a value are returned."""
    out: dict[str, tuple[object, str]] = {}
    inv = inv or {}
    label, proc = _input_label(run), inv.get("main_process")
    where = "input file name"
    if label is None:
        label, where = run.run_id, "run_id"
    out["workload"] = (f"{proc}:{label}", f"process name and {where}") if proc else (label, where)
    kin = (run.manifest.get("sources") or {}).get("kineto") or {}
    if isinstance(kin.get("world_size"), int) and kin["world_size"] > 0:
        out["world_size"] = (kin["world_size"], "Kineto distributedInfo.world_size")
    elif (inv.get("ranks") or 0) > 1:
        out["world_size"] = (int(inv["ranks"]), "ranks in the run")
    elif (inv.get("gpus") or 0) > 0:
        out["world_size"] = (int(inv["gpus"]), f"GPUs used in the trace ({int(inv['gpus'])})")
    elif (inv.get("ranks") or 0) == 1:
        out["world_size"] = (1, "ranks in the run (1)")
    bf, hf, f32 = (int(inv.get(k) or 0) for k in ("gemm_bf16_ns", "gemm_fp16_ns", "gemm_fp32_ns"))
    total = bf + hf + f32
    if bf + hf > 0:
        prec = "bf16" if bf >= hf else "amp"
        out["precision"] = (prec, f"kernel names ({100.0 * (bf + hf) / total:.0f}% of GEMM time "
                                  f"{'bf16' if prec == 'bf16' else 'fp16'})")
    elif f32 > 0:
        out["precision"] = ("fp32", "kernel names (fp32/tf32 GEMMs only)")
    return out


def run_info(run: Run, override: dict, inv: dict | None = None) -> RunInfo:
    """The run's keys: override file ``[runs.ID]``, else the manifest, else ``[defaults]``, else
    inferred from the trace (``inv``: its ``run_inventory`` row), else unknown."""
    m = run.manifest
    w = m.get("workload") or {}
    coll = m.get("collect") or {}
    profiler = coll.get("profiler")
    from_manifest = {
        "workload": w.get("name"), "suite": w.get("suite"), "precision": w.get("precision"),
        "world_size": w.get("world_size"), "batch_size": w.get("batch_size"),
        "interconnect": w.get("interconnect") or m.get("interconnect"),
        "pass": "ncu" if profiler == "ncu" else None,
    }
    ov = override["runs"].get(run.run_id) or override["runs"].get(run.path.name) or {}
    inferred = infer(run, inv)
    values, origin = {}, {}
    for k in FIELDS:
        if k in ov:
            values[k], origin[k] = ov[k], "override"
        elif from_manifest.get(k) is not None:
            values[k], origin[k] = from_manifest[k], "manifest"
        elif k in override["defaults"]:
            values[k], origin[k] = override["defaults"][k], "defaults"
        elif k in inferred:
            values[k], origin[k] = inferred[k]
    if values.get("suite") is None:
        try:
            from tracekit.workloads.registry import REGISTRY

            spec = REGISTRY.get(values["workload"])
            if spec is not None:
                values["suite"], origin["suite"] = spec.suite, "registry"
        except Exception:  # noqa: BLE001 - the registry is optional here (torch-free installs)
            pass
    for k in ("precision", "world_size", "batch_size"):
        origin.setdefault(k, "unknown")
    spp = w.get("samples_per_step")
    ws = None if values.get("world_size") is None else int(values["world_size"])
    bs = values.get("batch_size")
    if origin.get("batch_size") == "override" or origin.get("world_size") == "override" or spp is None:
        spp = None if bs is None or ws is None else int(bs) * ws
    kind = "ncu" if values.get("pass") == "ncu" else _kind(run, profiler)
    tpr = coll.get("threads_per_rank")
    from tracekit.labels import label

    return RunInfo(run_id=run.run_id, path=run.path, workload=label(values["workload"], WORKLOAD_CHARS),
                   suite=values.get("suite"), precision=str(values.get("precision") or "unknown"),
                   world_size=ws, batch_size=None if bs is None else int(bs),
                   interconnect=values.get("interconnect"), kind=kind,
                   profiler=profiler or profiler_of(m),
                   samples_per_step=spp, origin=origin,
                   threads_per_rank=int(tpr) if isinstance(tpr, int) else None,
                   step_source=(inv or {}).get("step_source"))


def _inventory(runs: list[Run], step_pattern: str | None) -> dict[str, dict]:
    """``run_inventory`` rows by run_id (one engine over every run)."""
    from tracekit.query import Session

    with Session([r.path for r in runs], step_pattern=step_pattern) as eng:
        return {row["run_id"]: row for row in eng.query("run_inventory").to_pylist()}


def load_runs(run_dirs, override_path=None, *, step_pattern: str | None = None) -> list[RunInfo]:
    """Open every run folder and resolve its grouping keys (override file, manifest, defaults,
    then inferred from the trace)."""
    if not run_dirs:
        raise InputError("no run folders given")
    override = load_override(override_path)
    opened = [open_run(p) for p in run_dirs]
    stray = set(override["runs"]) - {r.run_id for r in opened} - {r.path.name for r in opened}
    if stray:
        raise InputError(f"override file names run(s) not given: {', '.join(sorted(stray))}")
    seen_ids: dict[str, Run] = {}
    for r in opened:
        if r.run_id in seen_ids:
            raise InputError(f"two run folders have run_id {r.run_id!r}: {seen_ids[r.run_id].path} "
                             f"and {r.path}")
        seen_ids[r.run_id] = r
    inv = _inventory(opened, step_pattern)
    return [run_info(r, override, inv.get(r.run_id)) for r in opened]
