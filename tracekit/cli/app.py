"""The typer application object; command modules register on it with ``@app.command()``."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="tracekit",
    help="Where GPU time goes in deep-learning training: convert Nsight Systems, Nsight Compute "
    "and PyTorch profiler output into Parquet run folders and query them with DuckDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

STATE = {"debug": False}


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors.")):
    STATE["debug"] = debug
