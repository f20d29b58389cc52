"""The typer application object; command modules register on it with ``@app.command()``."""

from __future__ import annotations

import typer

from tracekit.workers import SCHEDULER_ENV

app = typer.Typer(
    name="tracekit",
    help="Where GPU time goes in deep-learning training: convert Nsight Systems, Nsight Compute "
    "and PyTorch profiler output into Parquet run folders and query them with DuckDB.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    suggest_commands=False,  # tracekit.cli.run words the suggestion once
    rich_markup_mode=None,  # click's plain help: typer's rich help imports 0.25 s of rich (issue 39)
    context_settings={"help_option_names": ["-h", "--help"],
                      "max_content_width": 1000},  # help as wide as the terminal (click: 80)
)

STATE = {"debug": False, "quiet": False}

QUIET = typer.Option(False, "--quiet", "-q", help="Print no warnings or notes on stderr (errors "
                     "still print).")


def jobs_option(help_text: str):
    """``--jobs/-j N`` of the commands that spread work over local worker processes."""
    return typer.Option(None, "--jobs", "-j", min=1, help=help_text)


def scheduler_option(what: str):
    """``--scheduler ADDRESS`` (also $TRACEKIT_SCHEDULER): ``what`` runs on a Dask cluster."""
    return typer.Option(None, "--scheduler", metavar="ADDRESS", envvar=SCHEDULER_ENV,
                        help=f"{what} on this Dask scheduler's workers (tcp://host:8786; "
                             "pip install 'tracekit[dask]').")


def scheduler_timeout_option():
    """``--scheduler-timeout SECONDS`` (also $TRACEKIT_SCHEDULER_TIMEOUT): how long to wait for
    the scheduler (tracekit.cluster.connect reads it from the environment)."""
    import os

    from tracekit.workers import DEFAULT_SCHEDULER_TIMEOUT_S, SCHEDULER_TIMEOUT_ENV

    def store(value):
        if value is not None:
            os.environ[SCHEDULER_TIMEOUT_ENV] = str(value)
        return value

    return typer.Option(None, "--scheduler-timeout", metavar="SECONDS", min=0.001,
                        callback=store, help="Seconds to wait for the Dask scheduler to answer "
                        f"(default {DEFAULT_SCHEDULER_TIMEOUT_S:g}; also ${SCHEDULER_TIMEOUT_ENV}).")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"tracekit {version('tracekit')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("tracekit (not installed: no version)")
        raise typer.Exit()


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks on errors."),
          quiet: bool = QUIET,
          _version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                        help="Print tracekit's version and exit.")):
    STATE["debug"] = debug
    STATE["quiet"] = quiet


def set_quiet(quiet: bool) -> None:
    """A command's own --quiet (``tracekit query --quiet ...``) adds to the global one."""
    STATE["quiet"] = STATE["quiet"] or quiet
