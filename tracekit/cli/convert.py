"""``tracekit convert``."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import QUIET, app, set_quiet


@app.command()
def convert(
    inputs: list[Path] = typer.Argument(..., help="Profiler outputs: nsys .sqlite/.nsys-rep/.qdrep, "
                                        "ncu .csv/.ncu-rep, Kineto .json[.gz]."),
    output: Path = typer.Option(..., "-o", "--output", help="Run folder to create."),
    force: bool = typer.Option(False, "--force", help="Replace an existing run folder."),
    quiet: bool = QUIET,
):
    """Convert profiler output files into one run folder (manifest.json + Parquet tables).

    The warnings the conversion records in the manifest (rows with zero or negative durations,
    duplicate rows, an export schema newer than tested) also print on stderr.
    """
    from tracekit.cli.messages import info, warn
    from tracekit.convert import convert as do_convert
    from tracekit.progress import Progress
    from tracekit.runfolder import open_run

    with Progress() as progress:
        do_convert(inputs, output, force=force, progress=progress)
    run = open_run(output)
    tables = run.manifest["tables"]
    rows = ", ".join(f"{n} {t['rows']}" for n, t in tables.items() if t["rows"])
    set_quiet(quiet)
    for w in run.manifest.get("warnings") or []:
        warn(w)
    info(f"wrote {output} ({len(tables)} tables: {rows or 'no rows'}; "
         f"not captured: {', '.join(run.manifest['not_captured']) or 'none'})")
