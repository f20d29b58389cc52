"""Run a DuckDB statement so that Ctrl-C and SIGTERM stop it at once.

Python runs signal handlers only in the main thread, between bytecodes; while the main thread is
inside a long DuckDB call (a cross join, a recursive CTE, a sort spilling to disk) the handler
waits for DuckDB to look at Python's signal flag, which some operators do rarely. :func:`run`
therefore runs the call in a helper thread while the main thread waits in short joins: a signal
raises :class:`KeyboardInterrupt` there (the CLI turns SIGTERM into one), which calls the
connection's ``interrupt()``, waits for DuckDB to stop and re-raises, so the CLI exits 130 and the
engine's ``close()`` removes the spill folder. DuckDB's own "interrupted" errors
(``duckdb.InterruptException``, ``RuntimeError: Query interrupted``) become
:class:`KeyboardInterrupt` too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from tracekit.duck import native

if TYPE_CHECKING:
    import duckdb

T = TypeVar("T")
_db = native()  # the exception classes, without the duckdb package's Python layer
STOP_WAIT_S = 30.0  # how long to wait for DuckDB to stop after interrupt()


def is_interrupt(exc: BaseException) -> bool:
    """True for DuckDB's errors that mean the statement was interrupted."""
    return isinstance(exc, _db.InterruptException) or (
        isinstance(exc, RuntimeError) and "Query interrupted" in str(exc))


def run(con: duckdb.DuckDBPyConnection, fn: Callable[[], T]) -> T:
    """``fn()`` (which runs statements on ``con``), stopped by ``con.interrupt()`` on Ctrl-C or
    SIGTERM; raises :class:`KeyboardInterrupt` then. Outside the main thread ``fn`` runs
    directly (signals are not delivered there)."""
    if threading.current_thread() is not threading.main_thread():
        return _direct(fn)
    out: dict = {}
    done = threading.Event()  # not Thread.join: a join cut by KeyboardInterrupt returns at once after

    def target():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread below
            # without its traceback: the frames would keep the interrupted relation alive, and
            # DuckDB refuses to close a connection with a pending result ("is busy")
            out["error"] = exc.with_traceback(None)
        finally:
            done.set()

    worker = threading.Thread(target=target, name="tracekit-duckdb", daemon=True)
    worker.start()
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        con.interrupt()
        done.wait(STOP_WAIT_S)
        out.clear()
        raise KeyboardInterrupt from None
    if "error" in out:
        if is_interrupt(out["error"]):
            raise KeyboardInterrupt from None
        raise out["error"]
    return out["value"]


def _direct(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (_db.Error, RuntimeError) as exc:
        if is_interrupt(exc):
            raise KeyboardInterrupt from None
        raise
