"""``tracekit timeline RUN -o FILE.json[.gz]``: the run as a Chrome trace-event file for Perfetto."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app
from tracekit.cli.options import MEMORY_LIMIT
from tracekit.limits import DEFAULT_MAX_EVENTS


def _time(value: str | None, option: str) -> str | int | None:
    if value is None:
        return None
    text = value.strip().replace("_", "")
    try:
        n = int(text[1:] if text.startswith("+") else text)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a whole number of nanoseconds (e.g. 1500000000, "
                                 "or +2000000 for 2 ms after the first event)", param_hint=option) from None
    return f"+{n}" if text.startswith("+") else n


@app.command(short_help="Write a run's timeline as Chrome trace-event JSON for Perfetto (ui.perfetto.dev).")
def timeline(
    run_dir: Path = typer.Argument(..., help="Run folder."),
    output: Path = typer.Option(..., "-o", "--output", help="Trace file to write: .json, or .json.gz (gzip)."),
    start: str = typer.Option(None, "--start", help="Window start, ns on the trace clock (the tables' "
                              "start_ns), or +N: N ns after the run's first event."),
    end: str = typer.Option(None, "--end", help="Window end, ns on the trace clock, or +N."),
    step: int = typer.Option(None, "--step", help="Window = training step N (the steps step_summary finds)."),
    ranks: str = typer.Option(None, "--ranks", help="Keep only these ranks' processes, e.g. 0,3."),
    max_events: int = typer.Option(DEFAULT_MAX_EVENTS, "--max-events",
                                   help="End the window early so at most N events are written "
                                   "(0 = no limit); Perfetto UI in a browser holds about 2 GB."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output file."),
    critical_path: bool = typer.Option(False, "--critical-path", help="Add a track with each step's "
                                       "critical path from the replay (tracekit whatif; docs/whatif.md)."),
    memory_limit: str = MEMORY_LIMIT,
):
    """Write the run's timeline as Chrome trace-event JSON: open it at https://ui.perfetto.dev
    (or chrome://tracing). One process per rank/host process, a track per GPU stream and host
    thread, flows from launches to kernels, GPU metrics as counters (docs/timeline.md)."""
    from tracekit.timeline import write_timeline

    if step is not None and (start is not None or end is not None):
        raise typer.BadParameter("use either --step or --start/--end", param_hint="--step")
    s = write_timeline(run_dir, output, start_ns=_time(start, "--start"), end_ns=_time(end, "--end"),
                       step=step, ranks=ranks, max_events=max_events, force=force,
                       memory_limit=memory_limit, critical_path=critical_path)
    if s["cut"]:
        c = s["cut"]
        typer.echo(f"warning: --max-events {max_events:,}: the run has {c['events_total']:,} events in the "
                   f"window; wrote the first {c['events_kept']:,} (up to {c['at_ns']} ns on the trace clock). "
                   "Narrow the window with --start/--end, --step or --ranks, or raise --max-events.", err=True)
    overlap = f", {s['overlap_tracks']} of them overlap tracks" if s["overlap_tracks"] else ""
    typer.echo(f"wrote {output}: {s['events']:,} events ({s['kernels']:,} kernels, {s['flows']:,} launch "
               f"flows) in {s['processes']} processes and {s['tracks']} tracks{overlap}; "
               "open it at https://ui.perfetto.dev", err=True)
