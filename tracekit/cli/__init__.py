"""Command-line interface: ``tracekit COMMAND``. One module per command group; errors end here.

Exit statuses: 0 success; 2 bad input or usage (one line on stderr); 1 internal error;
130 interrupted. ``tracekit --debug COMMAND`` shows tracebacks.
"""

from __future__ import annotations

import errno
import gc
import signal
import sys

import typer

from tracekit.cli import (  # noqa: F401  (registers commands)
    collect,  # noqa: F401,E402  (tracekit collect)
    convert,
    plot,  # noqa: F401,E402  (tracekit plot ...)
    query,
    schema_cmd,
    study,  # noqa: F401,E402  (tracekit study, tracekit compare)
    timeline,  # noqa: F401,E402  (tracekit timeline)
    verify,  # noqa: F401,E402  (tracekit verify)
    whatif,  # noqa: F401,E402  (tracekit whatif)
    workloads,  # noqa: F401,E402  (tracekit workloads)
)
from tracekit.cli.app import STATE, app
from tracekit.cli.helptext import reflow
from tracekit.cli.partial import app_for
from tracekit.errors import TracekitError, one_line

reflow(app)  # docstrings as paragraphs: no sentence broken where its source line ended

try:  # typer >= 0.16 vendors its own copy of click (and no longer depends on click)
    from typer._click import exceptions as _cx
except ImportError:  # pragma: no cover - older typer raises click's own exceptions
    from click import exceptions as _cx

_EXIT = tuple({typer.Exit, getattr(_cx, "Exit", typer.Exit)})
_ABORT = tuple({typer.Abort, getattr(_cx, "Abort", typer.Abort)})
_NO_ARGS = (_cx.NoArgsIsHelpError,)
_USAGE = (_cx.UsageError,)
_CLICK = (_cx.ClickException,)


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def _fail(message: str, code: int) -> int:
    if STATE["debug"] and sys.exc_info()[0] is not None:
        import traceback

        traceback.print_exc()
    from tracekit.cli.termtable import visible

    print(f"tracekit: error: {visible(message)}", file=sys.stderr)  # trace text is never an escape
    return code


def _usage_message(exc) -> str:
    """Click's usage error in one line; an unknown command or option gets one suggestion list."""
    from tracekit.suggest import did_you_mean

    ctx = exc.ctx
    name = getattr(exc, "command_name", None)
    if name is not None and ctx is not None:
        return f"unknown command {name!r}{did_you_mean(name, getattr(ctx.command, 'commands', {}))}"
    name = getattr(exc, "option_name", None)
    if name is not None and ctx is not None:
        opts = [o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
        return f"unknown option {name!r}{did_you_mean(name, opts)}"
    return " ".join(exc.format_message().split())


def run(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv``; returns the exit status instead of exiting."""
    argv = sys.argv[1:] if argv is None else list(argv)
    STATE["debug"] = "--debug" in argv
    try:
        signal.signal(signal.SIGTERM, _sigterm)
    except ValueError:  # not in the main thread
        pass
    from tracekit.labels import cut_warning, take_cuts

    take_cuts()  # counted per command
    try:
        rv = app_for(app, argv)(args=argv, prog_name="tracekit", standalone_mode=False)
        sys.stdout.flush()  # a full disk behind stdout fails here, not after the exit status
        if take_cuts_n := take_cuts():  # trace text cut for a plot, report or table
            from tracekit.cli.messages import warn

            warn(cut_warning(take_cuts_n))
        if rv == 130:  # typer turns KeyboardInterrupt (and so SIGTERM) into a silent Exit(130)
            return _fail("interrupted", 130)
        return rv if isinstance(rv, int) else 0
    except TracekitError as exc:
        return _fail(one_line(exc), exc.exit_code)
    except _EXIT as exc:
        return exc.exit_code
    except _ABORT:
        return _fail("aborted", 130)
    except _NO_ARGS as exc:  # `tracekit` or a group alone: the help text, as a usage error
        exc.show()
        return 2
    except _USAGE as exc:  # bad command, option or argument: one line naming it
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        return _fail(_usage_message(exc) + hint, 2)
    except _CLICK as exc:
        return _fail(" ".join(exc.format_message().split()), 2)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):  # stdout: /dev/full
            return _fail(f"cannot write the output: {exc.strerror}", 2)
        return _fail(f"internal error: OSError: {one_line(exc)} (run with --debug for the "
                     "traceback, and please report it)", 1)
    except MemoryError:
        return _fail("out of memory (run with --debug for the traceback)", 1)
    except Exception as exc:  # a bug in tracekit
        if type(exc).__name__ == "InterruptException" or "Query interrupted" in str(exc):
            return _fail("interrupted", 130)  # DuckDB stopped by Ctrl-C while streaming a result
        if type(exc).__name__ == "OutOfMemoryException":  # DuckDB, past a memory limit it cannot spill
            return _fail(f"out of memory: {one_line(exc)[:300]}", 1)
        return _fail(f"internal error: {type(exc).__name__}: {one_line(exc)} "
                     "(run with --debug for the traceback, and please report it)", 1)


def main() -> None:
    status = run()
    # The interpreter's last garbage collection, as it exits, walks every object the imports made
    # (typer, click, DuckDB, tracekit's modules): about 25 ms of a small query's 0.19 s here.
    # Frozen objects are left out of it; every atexit handler, thread join and flush of
    # standard output still runs (issue 39, docs/performance.md).
    gc.freeze()
    sys.exit(status)
