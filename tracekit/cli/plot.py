"""``tracekit plot roofline RUN_DIR -o roofline.png``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.query import parse_params

plot_app = typer.Typer(help="Draw figures from run folders.", no_args_is_help=True)
app.add_typer(plot_app, name="plot")


@plot_app.command("roofline")
def roofline(
    run_dirs: list[Path] = typer.Argument(..., help="Run folders holding ncu results."),
    output: Path = typer.Option(Path("roofline.png"), "-o", "--output", help="Image file (.png, .svg, .pdf)."),
    param: list[str] = typer.Option([], "--param", "-p", help="Parameter of the roofline query KEY=VALUE "
                                    "(ceilings, gpu, tensor_datatype, sparsity, min_roof_pct)."),
    title: str = typer.Option(None, "--title", help="Figure title."),
    top: int = typer.Option(8, "--top", help="Label the N kernels with the most time."),
):
    """Hierarchical roofline of the ncu kernels of one or more runs.

    Ceilings per precision and memory level, one point per kernel and level sized by its share of
    GPU time (see docs/roofline.md).
    """
    from tracekit.cli.messages import info as say
    from tracekit.plot import plot_roofline

    info = plot_roofline(run_dirs, output, params=parse_params(param), title=title, top=top)
    msg = f"wrote {output} ({len(info['plotted'])} kernels"
    if info["skipped"]:
        msg += f"; {len(info['skipped'])} without FLOP or byte counters not drawn"
    say(msg + ")")
