"""``tracekit verify``: check every table file of run folders against their manifest's checksums."""

from __future__ import annotations

from pathlib import Path

import typer

from tracekit.cli.app import app

_RUNS = typer.Argument(..., help="One or more run folders.", show_default=False)


@app.command()
def verify(run_dirs: list[Path] = _RUNS):
    """Check run folders' table files against the checksums in their manifests.

    Every table file must have the size, rows and SHA-256 its manifest.json records: a changed
    byte, a cut file or a swapped file is an error naming the file (exit 2). Queries check the
    files they read the same way."""
    from tracekit.cli.termtable import visible
    from tracekit.runfolder import open_run
    from tracekit.runfolder.checksums import verify as check

    for d in run_dirs:
        run = open_run(d)
        lines = check(run)
        print(visible(f"{d}: {len(lines)} table(s) match their checksums"))
        for line in lines:
            print(visible(f"  {line}"))
