"""``tracekit convert``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tracekit.cli.app import (
    QUIET,
    app,
    jobs_option,
    scheduler_option,
    scheduler_timeout_option,
    set_quiet,
)
from tracekit.errors import InputError


@app.command()
def convert(
    inputs: list[Path] = typer.Argument(..., help="Profiler outputs: nsys .sqlite/.nsys-rep/.qdrep, "
                                        "ncu .csv/.ncu-rep, Kineto .json[.gz], MLPerf result logs "
                                        "(a folder: its result_*.txt). Several nsys exports "
                                        "or Kineto traces are one job: one rank each."),
    output: Path = typer.Option(..., "-o", "--output", help="Run folder to create."),
    force: bool = typer.Option(False, "--force", help="Replace an existing run folder."),
    rank_pattern: str = typer.Option(
        None, "--rank-pattern", metavar="REGEX",
        help="Rank from the file name when the trace has none: the first group (or the match) of "
             "REGEX (default: the number after 'rank', else the last number)."),
    jobs: int = jobs_option("Ranks converted at once, in local worker processes (default: one "
                            "per core)."),
    scheduler: str = scheduler_option("Convert the ranks"),
    scheduler_timeout: Optional[float] = scheduler_timeout_option(),
    skip_bad_ranks: bool = typer.Option(False, "--skip-bad-ranks",
                                        help="Convert the other ranks when one input is broken; "
                                             "the skipped ones are listed in the manifest."),
    clock_model: str = typer.Option(
        "estimate", "--clock-model", metavar="estimate|none",
        help="Ranks' clocks in a job: 'estimate' them from the collectives (see the "
             "clock_offsets query), or 'none': they are synchronized (one host, PTP); "
             "cross-rank results then use the timestamps as recorded."),
    merge_unrelated: bool = typer.Option(
        False, "--merge-unrelated",
        help="Merge inputs that do not look like one job (different world sizes, the same "
             "host and rank twice, disagreeing process groups, time windows apart); recorded "
             "in the manifest, and every cross-rank result says so."),
    quiet: bool = QUIET,
):
    """Convert profiler output files into one run folder (manifest.json + Parquet tables).

    The warnings the conversion records in the manifest (negative durations, an export schema
    newer than tested, skipped ranks) print on stderr, as every later command that reads the
    table does; what needs no action (0 ns rows, duplicate rows) prints once, here, as a note.
    """

    from tracekit.cli.messages import info, note, warn
    from tracekit.convert import convert as do_convert
    from tracekit.progress import Progress
    from tracekit.runfolder import open_run
    from tracekit.runfolder.integrity import notes

    if rank_pattern is not None:  # a Python and RE2 regular expression, checked before any work
        from tracekit.convert.rank_names import search_rank

        search_rank(rank_pattern, "")
    if clock_model not in ("estimate", "none"):
        raise InputError(f"--clock-model {clock_model!r}: expected 'estimate' or 'none'")
    with Progress() as progress:
        do_convert(inputs, output, force=force, progress=progress, rank_pattern=rank_pattern,
                   jobs=jobs, scheduler=scheduler, skip_bad_ranks=skip_bad_ranks,
                   clock_model=clock_model, merge_unrelated=merge_unrelated)
    run = open_run(output)
    tables = run.manifest["tables"]
    rows = ", ".join(f"{n} {t['rows']}" for n, t in tables.items() if t["rows"])
    ranks = run.manifest.get("ranks")
    job = f"{len(ranks)} ranks, " if ranks else ""
    set_quiet(quiet)
    for w in run.manifest.get("warnings") or []:
        warn(w)
    for line in notes(run.manifest):  # said here once; queries do not repeat them
        note(line)
    info(f"wrote {output} ({job}{len(tables)} tables: {rows or 'no rows'}; "
         f"not captured: {', '.join(run.manifest['not_captured']) or 'none'})")
