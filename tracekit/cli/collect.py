"""``tracekit collect``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app


@app.command()
def collect(
    workload: str = typer.Argument(..., help="Workload ID, e.g. resnet50, transformer, resnet_cifar "
                                   "(`python -m tracekit.workloads --help` lists them)."),
    output: Path = typer.Option(..., "-o", "--output", help="Run folder to create."),
    preset: str = typer.Option("tiny", "--preset", help="Model size: tiny (seconds on a CPU) or full "
                               "(the published shapes, for GPUs)."),
    steps: int = typer.Option(None, "--steps", help="Measured steps (default: the runner's, 10)."),
    warmup_steps: int = typer.Option(None, "--warmup-steps", help="Warm-up steps before them "
                                     "(default: the runner's, 2)."),
    batch_size: int = typer.Option(None, "--batch-size", help="Per-rank batch size (default: the "
                                   "preset's)."),
    precision: str = typer.Option(None, "--precision", help="fp32 (default), amp (fp16 + GradScaler, "
                                  "CUDA only) or bf16."),
    nproc: int = typer.Option(1, "--nproc", help="Data-parallel processes (torchrun; NCCL on GPUs, "
                              "Gloo on CPUs)."),
    threads_per_rank: int = typer.Option(None, "--threads-per-rank", help="Intra-op threads of "
                                         "each rank (OMP_NUM_THREADS); default $OMP_NUM_THREADS, "
                                         "else 1 as torchrun sets, for 1-rank runs too; recorded "
                                         "in the manifest (collect.threads_per_rank)."),
    profiler: str = typer.Option("auto", "--profiler", help="nsys, ncu, torch, or auto (nsys when "
                                 "on PATH, else torch)."),
    extra_profiler_args: str = typer.Option("", "--extra-profiler-args", help="More options for "
                                            "the profiler, one shell-quoted string, added before "
                                            "the workload command (nsys, ncu)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing run folder."),
    keep_raw: bool = typer.Option(False, "--keep-raw", help="Keep the profiler's own output "
                                  "files in RUN_DIR/raw/ (deleted by default)."),
    timeout: float = typer.Option(None, "--timeout", help="Give up after this many seconds per "
                                  "profiler command."),
    ncu_steps: str = typer.Option(None, "--ncu-steps", help="ncu only: the steps whose kernels are "
                                  "profiled, comma-separated, numbered from 0 over warm-up and "
                                  "measured steps (default: the first measured step)."),
    ncu_launch_count: int = typer.Option(None, "--ncu-launch-count", help="ncu only: profile at most "
                                         "this many kernel launches in those steps (default: 50)."),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="Record every allocation "
                                        "and free (torch: profile_memory=True; nsys records CUDA "
                                        "memory usage on GPUs anyway) for memory_summary and "
                                        "`tracekit plot memory`."),
):
    """Train a workload under a profiler and convert its trace into a run folder.

    Then e.g. `tracekit query step_summary RUN_DIR`.
    """
    from tracekit.cli.messages import info, warn
    from tracekit.collect import CollectOptions, Workload
    from tracekit.collect import collect as do_collect
    from tracekit.runfolder import open_run

    w = Workload(name=workload, preset=preset, steps=steps, warmup_steps=warmup_steps,
                 batch_size=batch_size, precision=precision, nproc=nproc,
                 threads_per_rank=threads_per_rank)
    opts = CollectOptions(profiler=profiler, extra_profiler_args=extra_profiler_args, force=force,
                          keep_raw=keep_raw, timeout_s=timeout, ncu_steps=_steps(ncu_steps),
                          ncu_launch_count=(CollectOptions.ncu_launch_count if ncu_launch_count is None
                                            else ncu_launch_count),
                          profile_memory=profile_memory)
    do_collect(w, output, opts)
    m = open_run(output).manifest
    rows = ", ".join(f"{n} {t['rows']}" for n, t in m["tables"].items() if t["rows"])
    for w in m.get("warnings") or []:
        warn(w)
    info(f"wrote {output} ({m['collect']['profiler']}, {m['workload']['world_size']} rank(s), "
         f"{m['collect']['wall_s']:.1f} s under the profiler, start to stop; {rows or 'no rows'})")


def _steps(text: str | None) -> tuple[int, ...] | None:
    from tracekit.errors import InputError

    if text is None:
        return None
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError(f"--ncu-steps: expected step numbers like 2,3; got {text!r}") from None
