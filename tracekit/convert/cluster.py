"""Where per-rank and per-run work runs: in this process, in local worker processes (``jobs``),
or on the workers of a Dask distributed scheduler (``scheduler``, e.g. ``tcp://host:8786``; also
the ``TRACEKIT_SCHEDULER`` environment variable). Install Dask with ``pip install 'tracekit[dask]'``.

With a scheduler, inputs and run folders must be on a filesystem every worker and the client see
at the same paths (as NVIDIA's nsys recipes assume); workers only read inputs and write inside
the job's temporary folder, and the client combines and renames it into place. A worker lost
mid-job makes Dask retry its task on another worker; a task that still fails fails the command,
and the temporary folder is removed (never a half-written run folder).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from tracekit.errors import InputError, TracekitError, one_line

SCHEDULER_ENV = "TRACEKIT_SCHEDULER"


def scheduler_address(option: str | None) -> str | None:
    """The scheduler to use: the option, else TRACEKIT_SCHEDULER, else None (local)."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def default_jobs() -> int:
    """Local worker processes when ``--jobs`` is not given: the number of usable cores."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class _Failed:
    """An InputError raised by a task, carried back as text (exceptions do not always pickle)."""

    def __init__(self, message: str):
        self.message = message


def _guarded(fn: Callable, args: tuple):
    try:
        return fn(*args)
    except InputError as exc:
        return _Failed(str(exc))


def run_parts(fn: Callable, tasks: Sequence[tuple], *, jobs: int | None = None,
              scheduler: str | None = None, fail_fast: bool = False) -> list:
    """``[fn(*t) for t in tasks]``, in parallel. A task's :class:`InputError` comes back as an
    InputError instance in its place (the caller decides whether it is fatal), or, with
    ``fail_fast``, is raised as soon as it happens (the other tasks are stopped); any other error
    is raised. ``fn`` must be importable by name (it runs in other processes)."""
    if scheduler:
        out = _on_dask(fn, tasks, scheduler, fail_fast)
    elif (jobs or default_jobs()) <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            out.append(_guarded(fn, t))
            _check(out[-1], fail_fast)
    else:
        out = _on_processes(fn, tasks, min(jobs or default_jobs(), len(tasks)), fail_fast)
    return [InputError(r.message) if isinstance(r, _Failed) else r for r in out]


def _check(result, fail_fast: bool) -> None:
    if fail_fast and isinstance(result, _Failed):
        raise InputError(result.message)


def _on_processes(fn: Callable, tasks: Sequence[tuple], workers: int, fail_fast: bool) -> list:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: the parent holds DuckDB/Arrow threads, which fork would copy mid-state
    ex = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
    futures = [ex.submit(_guarded, fn, t) for t in tasks]
    try:
        for f in as_completed(futures):
            _check(f.result(), fail_fast)
        out = [f.result() for f in futures]
    except BaseException:
        # an error or an interrupt: stop the workers now (the caller removes the temporary
        # folder they write into) instead of waiting for every queued rank
        for f in futures:
            f.cancel()
        for proc in list(getattr(ex, "_processes", {}).values()):
            proc.terminate()
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return out


def connect(address: str):
    """A Dask distributed client of the scheduler at ``address``; one-line errors."""
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--scheduler needs Dask: pip install 'tracekit[dask]'") from None
    try:
        return Client(address, timeout="10s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address}: "
                         f"{one_line(exc) or type(exc).__name__}") from None


def _on_dask(fn: Callable, tasks: Sequence[tuple], address: str, fail_fast: bool) -> list:
    client = connect(address)
    try:
        # pure=False: two tasks with equal arguments still both run; retries: a lost worker's
        # task runs again elsewhere
        futures = [client.submit(_guarded, fn, t, pure=False, retries=1) for t in tasks]
        try:
            for f in futures:  # in order: a broken rank fails once the ones before it are done
                _check(f.result(), fail_fast)
            return client.gather(futures)
        except TracekitError:
            raise
        except Exception as exc:  # KilledWorker, CommClosedError, ...
            raise InputError(f"the Dask cluster at {address} failed a task: "
                             f"{type(exc).__name__}: {one_line(exc)}") from None
        finally:
            client.cancel(futures)
    finally:
        client.close()
