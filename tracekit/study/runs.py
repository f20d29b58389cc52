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

Values under ``[runs.ID]`` win over the manifest. A run whose workload is known from neither is
an :class:`~tracekit.errors.InputError` naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tracekit.errors import InputError
from tracekit.runfolder import Run, open_run

FIELDS = ("workload", "suite", "precision", "world_size", "batch_size", "interconnect", "pass")
_INT_FIELDS = ("world_size", "batch_size")


@dataclass
class RunInfo:
    """One run of a study, with the grouping keys it was given (``origin`` says where from)."""

    run_id: str
    path: Path
    workload: str
    suite: str | None
    precision: str
    world_size: int
    batch_size: int | None
    interconnect: str | None
    kind: str  # 'timeline' (nsys / torch profiler: steps) or 'ncu' (counters)
    profiler: str | None
    samples_per_step: int | None
    origin: dict = field(default_factory=dict)

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
        raise InputError(f"{p}: not a valid override file: {' '.join(str(exc).split())}") from None
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


def _kind(run: Run, profiler: str | None) -> str:
    tables = run.manifest.get("tables", {})
    if profiler == "ncu" or ("ncu_launches" in tables and "nvtx_ranges" not in tables
                             and "kernels" not in tables):
        return "ncu"
    return "timeline"


def run_info(run: Run, override: dict) -> RunInfo:
    m = run.manifest
    w = m.get("workload") or {}
    profiler = (m.get("collect") or {}).get("profiler")
    from_manifest = {
        "workload": w.get("name"), "suite": w.get("suite"), "precision": w.get("precision"),
        "world_size": w.get("world_size"), "batch_size": w.get("batch_size"),
        "interconnect": w.get("interconnect") or m.get("interconnect"),
        "pass": "ncu" if profiler == "ncu" else None,
    }
    ov = override["runs"].get(run.run_id) or override["runs"].get(run.path.name) or {}
    values, origin = {}, {}
    for k in FIELDS:
        if k in ov:
            values[k], origin[k] = ov[k], "override"
        elif from_manifest.get(k) is not None:
            values[k], origin[k] = from_manifest[k], "manifest"
        elif k in override["defaults"]:
            values[k], origin[k] = override["defaults"][k], "defaults"
    if not values.get("workload"):
        raise InputError(f"{run.path}: the manifest names no workload (not made by `tracekit "
                         "collect`); give it one in an override file (--override FILE, "
                         f"[runs.{run.run_id}] workload = \"...\")")
    if values.get("suite") is None:
        try:
            from tracekit.workloads.registry import REGISTRY

            spec = REGISTRY.get(values["workload"])
            if spec is not None:
                values["suite"], origin["suite"] = spec.suite, "registry"
        except Exception:  # noqa: BLE001 - the registry is optional here (torch-free installs)
            pass
    spp = w.get("samples_per_step")
    ws = int(values.get("world_size") or 1)
    bs = values.get("batch_size")
    if origin.get("batch_size") == "override" or origin.get("world_size") == "override" or spp is None:
        spp = None if bs is None else int(bs) * ws
    kind = "ncu" if values.get("pass") == "ncu" else _kind(run, profiler)
    return RunInfo(run_id=run.run_id, path=run.path, workload=str(values["workload"]),
                   suite=values.get("suite"), precision=str(values.get("precision") or "fp32"),
                   world_size=ws, batch_size=None if bs is None else int(bs),
                   interconnect=values.get("interconnect"), kind=kind, profiler=profiler,
                   samples_per_step=spp, origin=origin)


def load_runs(run_dirs, override_path=None) -> list[RunInfo]:
    """Open every run folder and resolve its grouping keys (manifest, then override file)."""
    if not run_dirs:
        raise InputError("no run folders given")
    override = load_override(override_path)
    opened = [open_run(p) for p in run_dirs]
    stray = set(override["runs"]) - {r.run_id for r in opened} - {r.path.name for r in opened}
    if stray:
        raise InputError(f"override file names run(s) not given: {', '.join(sorted(stray))}")
    infos = [run_info(r, override) for r in opened]
    seen: dict[str, RunInfo] = {}
    for i in infos:
        if i.run_id in seen:
            raise InputError(f"two run folders have run_id {i.run_id!r}: {seen[i.run_id].path} "
                             f"and {i.path}")
        seen[i.run_id] = i
    return infos
