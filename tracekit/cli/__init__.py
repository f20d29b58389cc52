"""Command-line interface: ``tracekit COMMAND``. One module per command group; errors end here.

Exit statuses: 0 success; 2 bad input or usage (one line on stderr); 1 internal error;
130 interrupted. ``tracekit --debug COMMAND`` shows tracebacks.
"""

from __future__ import annotations

import signal
import sys

import click

from tracekit.cli import convert, query, schema_cmd  # noqa: F401  (registers commands)
from tracekit.cli.app import STATE, app
from tracekit.errors import TracekitError


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def _fail(message: str, code: int) -> int:
    if STATE["debug"]:
        import traceback

        traceback.print_exc()
    print(f"tracekit: error: {message}", file=sys.stderr)
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv``; returns the exit status instead of exiting."""
    argv = sys.argv[1:] if argv is None else list(argv)
    STATE["debug"] = "--debug" in argv
    try:
        signal.signal(signal.SIGTERM, _sigterm)
    except ValueError:  # not in the main thread
        pass
    try:
        rv = app(args=argv, prog_name="tracekit", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except TracekitError as exc:
        return _fail(" ".join(str(exc).split()), exc.exit_code)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return _fail("aborted", 130)
    except click.ClickException as exc:
        exc.show()
        return 2
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug in tracekit
        return _fail(f"internal error: {type(exc).__name__}: {' '.join(str(exc).split())} "
                     "(run with --debug for the traceback, and please report it)", 1)


def main() -> None:
    sys.exit(run())
