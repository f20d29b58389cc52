"""``tracekit plot KIND RUN_DIR... -o FILE.png|.svg``: utilization, kernels, steps, idle, roofline
(figures of :mod:`tracekit.plots`, each drawn from named queries)."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.query import parse_params

plot_app = typer.Typer(help="Draw figures from run folders (PNG, SVG or PDF by the file's suffix).",
                       no_args_is_help=True, rich_markup_mode=None)
app.add_typer(plot_app, name="plot")

_RUNS = typer.Argument(..., help="Run folders.")
_TITLE = typer.Option(None, "--title", help="Figure title (default: the figure, runs and GPU).")


def _out(default: str):
    return typer.Option(Path(default), "-o", "--output", help="Image file (.png, .svg, .pdf).")


def _command(name: str):
    """plot_app.command with the docstring as one paragraph (typer would keep its line breaks)."""
    def deco(fn):
        from tracekit.cli.filter_opts import filtered

        return plot_app.command(name, help=" ".join((fn.__doc__ or "").split()))(filtered(fn))
    return deco


def _done(output: Path, what: str) -> None:
    from tracekit.cli.messages import info

    info(f"wrote {output} ({what})")


def _bin(ns: int) -> str:
    """A bin width as the user would write it (``5ms``, not 5,000,000 ns)."""
    from tracekit.query.filters import format_time

    return format_time(int(ns))


@_command("utilization")
def utilization(run_dirs: list[Path] = _RUNS, output: Path = _out("utilization.png"),
                bins: int = typer.Option(200, "--bins", help="At most N time bins (width a 1-2-5 step "
                                         "chosen from the run's length)."),
                bin_ns: int = typer.Option(0, "--bin-ns", help="Bin width in ns instead of --bins."),
                title: str = _TITLE):
    """GPU busy fraction over time, one row per GPU or rank (a heatmap past 4 GPUs); query
    gpu_utilization_timeline."""
    from tracekit.plots.utilization import plot_utilization

    info = plot_utilization(run_dirs, output, bins=bins, bin_ns=bin_ns, title=title)
    _done(output, f"{info['gpus']} GPUs, {info['bins']} bins of {_bin(info['bin_ns'])}")


@_command("kernels")
def kernels(run_dirs: list[Path] = _RUNS, output: Path = _out("kernels.png"),
            top: int = typer.Option(15, "--top", help="Show the N names with the most time."),
            title: str = _TITLE):
    """GPU time by category (compute, NCCL, memcpy, memset) and the top kernels by total time,
    with their share of GPU time; query gpu_time_breakdown."""
    from tracekit.plots.kernels import plot_kernels

    info = plot_kernels(run_dirs, output, top=top, title=title)
    _done(output, f"{len(info['runs'])} run(s), top {info['names']} names")


@_command("steps")
def steps(run_dirs: list[Path] = _RUNS, output: Path = _out("steps.png"),
          warmup: bool = typer.Option(True, "--warmup/--no-warmup", help="Include warm-up steps."),
          title: str = _TITLE):
    """Step time per step and rank, with the phases (data, forward, backward, optimizer, comm)
    the trace marks; query step_summary."""
    from tracekit.plots.steps import plot_steps

    info = plot_steps(run_dirs, output, include_warmup=warmup, title=title)
    _done(output, f"{info['steps']} steps, {info['ranks']} ranks; phases: {', '.join(info['phases']) or 'none'}")


@_command("idle")
def idle(run_dirs: list[Path] = _RUNS, output: Path = _out("idle.png"), title: str = _TITLE):
    """GPU idle time by cause (host, sync, copy, other) per GPU, and the idle-gap length
    histogram; queries gpu_idle and gpu_idle_gaps."""
    from tracekit.plots.idle import plot_idle

    info = plot_idle(run_dirs, output, title=title)
    _done(output, f"{info['gpus']} GPUs, {info['gaps']:,} gaps")


@_command("roofline")
def roofline(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders holding ncu results."),
    output: Path = _out("roofline.png"),
    param: list[str] = typer.Option([], "--param", "-p", help="Parameter of the roofline query KEY=VALUE "
                                    "(ceilings, gpu, tensor_datatype, sparsity, min_roof_pct)."),
    title: str = _TITLE,
    top: int = typer.Option(8, "--top", help="Number the N kernels with the most time."),
):
    """Hierarchical roofline: ceilings per precision and memory level, one point per kernel and
    level sized by its share of GPU time (see docs/roofline.md)."""
    from tracekit.plots.roofline import plot_roofline

    info = plot_roofline(run_dirs, output, params=parse_params(param), title=title, top=top)
    msg = f"{len(info['plotted'])} kernels"
    if info["skipped"]:
        msg += f"; {len(info['skipped'])} without FLOP or byte counters not drawn"
    _done(output, msg)


@_command("memory")
def memory(run_dirs: list[Path] = _RUNS, output: Path = _out("memory.png"),
           bins: int = typer.Option(400, "--bins", help="At most N time bins (width a 1-2-5 step "
                                    "chosen from the run's length)."),
           bin_ns: int = typer.Option(0, "--bin-ns", help="Bin width in ns instead of --bins."),
           title: str = _TITLE):
    """Allocated and reserved memory over time per device (host and each GPU), training steps
    shaded and each device's peak marked with its step, phase and operator; queries
    memory_timeline, memory_summary and step_summary."""
    from tracekit.plots.memory import plot_memory

    info = plot_memory(run_dirs, output, bins=bins, bin_ns=bin_ns, title=title)
    _done(output, f"{info['devices']} of {info['of']} device(s), {info['bins']} bins of {_bin(info['bin_ns'])}")


_CRITICAL_OUT = _out("critical-path.png")


@_command("critical-path")
def critical_path(run_dirs: list[Path] = _RUNS, output: Path = _CRITICAL_OUT, title: str = _TITLE):
    """Share of each step's wall time on its critical path by category (kernel, collective
    transfer, host, launch, sync wait, ...) and, for jobs, by rank; query critical_path_summary
    (the replay of tracekit whatif, docs/whatif.md)."""
    from tracekit.plots.critical_path import plot_critical_path

    info = plot_critical_path(run_dirs, output, title=title)
    _done(output, f"{info['steps']} steps, {info['ranks']} ranks; {', '.join(info['categories'])}")


@plot_app.command("scaling-loss")
def scaling_loss(study_dir: Path = typer.Argument(..., help="Study folder (tracekit study -o DIR)."),
                 output: Path = _out("scaling-loss.png"), title: str = _TITLE):
    """A waterfall per run of a study: the baseline's step time, each part of the loss (skew,
    exposed_comm, host_launch, compute_inflation, data, idle, residual) and the run's step time;
    the study's scaling_loss table (docs/study.md)."""
    from tracekit.plots.scaling_loss import plot_scaling_loss

    info = plot_scaling_loss(study_dir, output, title=title)
    _done(output, f"{info['runs']} run(s) against their baselines")
