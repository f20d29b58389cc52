"""Command lines that ``tracekit collect`` runs: the workload runner and each profiler around it.

Pure functions of their arguments (no process is started here), so tests check the exact command
lines, and the manifest records them as run.

Choices, per profiler:

- **nsys**: ``--trace`` gets ``cuda,nvtx,osrt,cublas,cudnn`` (and ``nccl`` when this nsys lists it;
  2022.4 does not, NCCL's own NVTX ranges still arrive through ``nvtx``) on a CUDA machine, else
  ``nvtx,osrt`` plus CPU IP sampling and OS thread scheduling of the whole process tree
  (``--sample=process-tree --cpuctxsw=process-tree``), so ``torchrun``'s worker ranks are
  captured too. GPU metrics (``--gpu-metrics-device=all``) when CUDA is present and this nsys has
  the option. No capture range: warm-up steps are captured and marked ``warmup`` by the
  ``step_summary`` query instead. Measured on nsys 2022.4.2 (CPU, nvtx 0.2.10):
  ``--capture-range=nvtx`` never started the collection and left nsys waiting after the
  application had exited, so a capture range is not used on any version (the step ranges carry
  the warm-up mark in their message, which is enough to exclude them).
- **ncu**: the ``roofline`` section set (:func:`ncu_metric_args`) on at most ``launch_count`` kernel
  launches inside the NVTX
  ranges of the chosen steps (``--nvtx --nvtx-include 'tracekit@step N/'``), written to a
  ``.ncu-rep`` that is then printed as CSV (``--page raw``).
- **torch**: the runner itself records ``torch.profiler`` (``--torch-profile DIR``: CPU and, when
  present, CUDA activities over the measured steps) and writes one Chrome trace per rank.
  ``--profile-memory`` adds ``profile_memory=True``: a ``[memory]`` event per allocation and free
  of PyTorch's allocators (host and GPU), read into ``memory_events`` (docs/memory.md).
  Under nsys, CUDA memory usage (``--cuda-memory-usage=true``) is recorded whenever CUDA is
  present and this nsys has the option, with or without ``--profile-memory``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tracekit.collect.tools import NsysInfo

RUNNER_MODULE = "tracekit.workloads"


@dataclass(frozen=True)
class Workload:
    """What to train: the runner's options (None = the runner's default)."""

    name: str
    preset: str = "tiny"
    steps: int | None = None
    warmup_steps: int | None = None
    batch_size: int | None = None
    precision: str | None = None
    nproc: int = 1
    device: str | None = None
    threads_per_rank: int | None = None  # None: $OMP_NUM_THREADS, else 1 (torchrun's rule)


def runner_command(w: Workload, result_json: str, *, python: str | None = None,
                   torch_profile: str | None = None, profile_memory: bool = False,
                   mllog: str | None = None) -> list[str]:
    """``python -m tracekit.workloads ...``, under ``torch.distributed.run`` (torchrun) with a
    standalone rendezvous on a free port when ``w.nproc > 1``. ``result_json`` may contain
    ``{rank}`` (one result file per rank)."""
    python = python or sys.executable
    if w.nproc > 1:
        head = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={w.nproc}",
                "-m", RUNNER_MODULE]
    else:
        head = [python, "-m", RUNNER_MODULE]
    args = [w.name, "--preset", w.preset]
    for flag, value in (("--steps", w.steps), ("--warmup-steps", w.warmup_steps),
                        ("--batch-size", w.batch_size), ("--precision", w.precision),
                        ("--device", w.device)):
        if value is not None:
            args += [flag, str(value)]
    args += ["--result-json", result_json]
    if mllog:  # rank 0's MLPerf log (tracekit/workloads/mlperflog.py)
        args += ["--mllog", mllog]
    if torch_profile:
        args += ["--torch-profile", torch_profile]
        if profile_memory:
            args.append("--profile-memory")
    return head + args


def nsys_traces(info: NsysInfo, cuda: bool) -> list[str]:
    """The ``--trace`` APIs for this nsys: those of our wish list that it accepts."""
    wanted = ["cuda", "nvtx", "osrt", "cublas", "cudnn", "nccl"] if cuda else ["nvtx", "osrt"]
    return [t for t in wanted if t in info.traces]


_NSYS_SHORT = {"-t": "--trace", "-s": "--sample", "-f": "--force-overwrite", "-o": "--output",
               "-c": "--capture-range", "-p": "--nvtx-capture", "-d": "--duration"}


def _option_names(args: list[str]) -> set[str]:
    names = set()
    for a in args:
        if a.startswith("-"):
            name = a.split("=", 1)[0]
            names.add(_NSYS_SHORT.get(name, name))
    return names


def nsys_profile_command(info: NsysInfo, target: list[str], output_base: str, *, cuda: bool,
                         extra: list[str] = ()) -> list[str]:
    """``nsys profile`` of ``target`` writing ``output_base.nsys-rep`` (see the module notes).
    An option given in ``extra`` replaces tracekit's choice for it (nsys refuses an option given
    twice), e.g. ``--trace=cuda,nvtx`` or ``--sample=none``; the output name cannot be changed."""
    mine = [f"--trace={','.join(nsys_traces(info, cuda))}"]
    if "process-tree" in info.sample_values:
        mine.append("--sample=process-tree")
    if info.supports("--cpuctxsw"):
        mine.append("--cpuctxsw=process-tree")
    if cuda and info.supports("--gpu-metrics-device"):
        mine.append("--gpu-metrics-device=all")
    if cuda and info.supports("--cuda-memory-usage"):
        mine.append("--cuda-memory-usage=true")
    mine += ["--stats=false", "--force-overwrite=true"]
    overridden = _option_names(list(extra))
    if "--output" in overridden:
        from tracekit.errors import InputError

        raise InputError("--extra-profiler-args cannot set nsys's output (-o): tracekit chooses it")
    mine = [a for a in mine if a.split("=", 1)[0] not in overridden]
    return [info.path, "profile", *mine, "-o", output_base, *extra, *target]


def nsys_export_command(info: NsysInfo, report: str, sqlite_path: str) -> list[str]:
    """``nsys export`` of a report to SQLite (the format tracekit's nsys collector reads)."""
    return [info.path, "export", "--type=sqlite", "--force-overwrite=true", "-o", sqlite_path, report]


ROOFLINE_SECTIONS = ("SpeedOfLight", "SpeedOfLight_RooflineChart")


def ncu_metric_args(sets: list[str]) -> list[str]:
    """``--set roofline`` (ncu >= 2022.2 lists it: SpeedOfLight and every roofline chart) else the
    two roofline sections; plus LaunchStats (grid, block, registers) and Occupancy."""
    head = ["--set", "roofline"] if "roofline" in sets else [
        a for s in ROOFLINE_SECTIONS for a in ("--section", s)]
    return head + ["--section", "LaunchStats", "--section", "Occupancy"]


def ncu_profile_command(ncu: str, target: list[str], report_base: str, *, steps: list[int],
                        warmup_steps: int, launch_count: int, metric_args: list[str],
                        extra: list[str] = ()) -> list[str]:
    """``ncu`` on at most ``launch_count`` kernel launches inside the NVTX ranges of ``steps``
    (step numbers count from 0 over warm-up and measured steps, as the runner names them)."""
    cmd = [ncu, "--target-processes", "all", "--nvtx"]
    for s in steps:
        msg = f"step {s} (warmup)" if s < warmup_steps else f"step {s}"
        cmd += ["--nvtx-include", f"tracekit@{msg}/"]
    cmd += metric_args
    cmd += ["--launch-count", str(launch_count), "--force-overwrite", "--export", report_base,
            *extra, *target]
    return cmd


def ncu_csv_command(ncu: str, report: str) -> list[str]:
    """Print every metric of every profiled launch as CSV (the ``raw`` page)."""
    return [ncu, "--import", report, "--csv", "--page", "raw"]
