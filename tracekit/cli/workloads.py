"""``tracekit workloads``: list the NVTX-annotated training workloads, their suites and presets."""

from __future__ import annotations

from typing import Optional

import typer

from tracekit.cli.app import app
from tracekit.errors import InputError


@app.command("workloads")
def workloads_cmd(
    name: Optional[str] = typer.Argument(None, help="Show one workload's preset shapes in full."),
    suite: Optional[str] = typer.Option(None, "--suite", help="Only this suite: mlperf, dawnbench, deepbench."),
    as_json: bool = typer.Option(False, "--json", help="Print the registry as JSON instead of a table."),
):
    """List the training workloads (run one with `python -m tracekit.workloads NAME`)."""
    import json

    from tracekit.workloads.registry import REGISTRY, SUITES

    if suite is not None and suite not in SUITES:
        raise InputError(f"unknown suite {suite!r}; choose one of: {', '.join(SUITES)}")
    if name is not None and name not in REGISTRY:
        raise InputError(f"unknown workload {name!r}; choose one of: {', '.join(REGISTRY)}")
    specs = [s for s in REGISTRY.values()
             if (suite is None or s.suite == suite) and (name is None or s.name == name)]
    if as_json:
        print(json.dumps([{"name": s.name, "suite": s.suite, "task": s.task, "description": s.description,
                           "batch_unit": s.sample,
                           "presets": {k: {"batch_size": p.batch_size, "shapes": p.shapes}
                                       for k, p in s.presets.items()}} for s in specs], indent=2))
        return
    from rich.console import Console
    from rich.markup import escape

    console = Console()
    if name is not None:
        s = specs[0]
        console.print(f"[bold]{s.name}[/bold] ({s.suite}, {s.task}): {escape(s.description)}")
        console.print(f"batch size unit: {escape(s.sample)}")
        for preset, p in s.presets.items():
            console.print(f"[bold]{preset}[/bold]: batch {p.batch_size}/rank; {escape(p.describe())}")
        return
    _table(specs)
    from tracekit.cli.termtable import terminal_width, wrap

    print("\n".join(wrap("batch: per rank, presets tiny (seconds on a CPU) / full (published "
                          "shapes); shapes and the "
                          "whole description: tracekit workloads NAME; run: python -m "
                          "tracekit.workloads NAME", terminal_width())))


def _table(specs) -> None:
    """One line per workload, fitting the terminal: the description is cut at the end (…) when
    there is no room (``tracekit workloads NAME`` prints it whole), never folded. batch: the
    per-rank batch of the tiny / full preset."""
    from tracekit.cli.termtable import Col, render_lines, terminal_width, visible

    cols = [
        Col("workload", "workload", [s.name for s in specs], kind="key", priority=6),
        Col("suite", "suite", [s.suite for s in specs], kind="key", priority=5),
        Col("task", "task", [visible(s.task) for s in specs], kind="text", priority=4),
        Col("batch", "batch", [f"{s.presets['tiny'].batch_size}/{s.presets['full'].batch_size}"
                                         for s in specs], align="right", priority=4),
        Col("description", "description", [visible(s.description) for s in specs], kind="text",
            priority=3, shortenable=True, where="end", min_width=12),
    ]
    lines, _ = render_lines(cols, terminal_width())
    print("\n".join(lines))
