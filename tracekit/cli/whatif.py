"""``tracekit whatif RUN -s SCENARIO [-s ...]``: replay the run's dependency graph with changes."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import QUIET, app, jobs_option, scheduler_option, scheduler_timeout_option, set_quiet
from tracekit.cli.options import COLUMNS, FORMAT, MEMORY_LIMIT, OUTPUT, ROWS, STEP_PATTERN
from tracekit.cli.output import Format, render, select_columns

# from the scenario registry (tracekit.whatif.scenarios.SCENARIOS): the list goes at the foot of
# --help, at full width, not in the option's narrow column
_SCENARIO_HELP = "Scenario (repeatable; combine with +); the list is below."


class _ScenarioEpilog(typer.core.TyperCommand):
    """``whatif``'s command: its epilog (the scenario list) is read from the registry when the
    help is shown, so that importing the CLI (``tracekit --help``, every other command) does not
    import the registry and with it NumPy (issue 39)."""

    def format_epilog(self, ctx, formatter) -> None:
        from tracekit.whatif.scenarios import help_epilog

        self.epilog = help_epilog()
        super().format_epilog(ctx, formatter)


_RUN_DIRS = typer.Argument(..., help="Run folder (one rank or a job), or several.", show_default=False)
_SCENARIOS = typer.Option(["baseline"], "--scenario", "-s", help=_SCENARIO_HELP)


@app.command(short_help="Predict step times under changes: replay the run's dependency graph.",
             cls=_ScenarioEpilog)
def whatif(
    run_dirs: list[Path] = _RUN_DIRS,
    scenario: list[str] = _SCENARIOS,
    format: Format = FORMAT,
    output: Path = OUTPUT,
    columns: str | None = COLUMNS,
    rows: int | None = ROWS,
    memory_limit: str = MEMORY_LIMIT,
    quiet: bool = QUIET,
    step_pattern: str = STEP_PATTERN,
    jobs: int = jobs_option("Build a job's graph in per-rank parts on N local worker processes "
                            "(default: one part after the other in this process)."),
    scheduler: str = scheduler_option("Build a job's per-rank graph parts"),
    scheduler_timeout: float | None = scheduler_timeout_option(),
):
    """Replay the dependency graph of the run (host threads, launches, streams, syncs,
    collectives matched across ranks) with the measured durations and with each scenario's
    changes, and print per scenario, step and rank: measured_ns, the baseline replay's time and
    error, predicted_ns and speedup (baseline / predicted). Every prediction comes with the
    baseline's error beside it; docs/whatif.md says what the trace does not record. The
    terminal table shows scenario, step, rank, predicted, speedup, saved, the baseline's error
    and bound (a note where a scenario is n/a or a floor set it; measured and run-ahead in 100
    columns or more; the run-ahead's range also on stderr); -f csv/json hold every column."""
    from tracekit.outfile import check_output
    from tracekit.query import Session
    from tracekit.whatif import UNITS
    from tracekit.whatif import whatif as run_whatif
    from tracekit.workers.cluster import scheduler_address

    set_quiet(quiet)
    from tracekit.whatif.scenarios import parse_all

    parsed = parse_all(scenario)  # once: an unknown scenario fails before any run folder is read
    if output is not None and str(output) != "-":
        check_output(output, protect=run_dirs)
    terminal = columns is None and format == Format.table and (output is None or str(output) == "-")
    with Session(run_dirs, memory_limit=memory_limit, step_pattern=step_pattern) as s:
        result = run_whatif(s.engine, parsed, jobs=jobs or 1, scheduler=scheduler_address(scheduler))
        # the terminal table names the rank each step waits for (issue 36, item 3)
        waits = s.query("step_waits") if terminal else None
    from tracekit.cli.messages import note, warn
    from tracekit.whatif import notes

    for line in notes(result):
        warn(line.removeprefix("warning: ")) if line.startswith("warning: ") else note(line)
    if terminal:
        from tracekit.cli.termtable import terminal_width
        from tracekit.cli.whatif_output import job_rows, run_ahead_lines, short_notes, table_columns

        ahead = run_ahead_lines(result)
        result, lines = job_rows(result, waits)
        for line in lines + ahead:
            note(line)
        columns = ",".join(table_columns(result, terminal_width() >= 100))
        result = short_notes(result)
    result = select_columns(result, columns)
    render(result, format, output, title="whatif", units=UNITS, protect=run_dirs, rows=rows)
