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
import re
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
              scheduler: str | None = None, fail_fast: bool = False,
              warn: Callable[[str], None] | None = None) -> list:
    """``[fn(*t) for t in tasks]``, in parallel. A task's :class:`InputError` comes back as an
    InputError instance in its place (the caller decides whether it is fatal), or, with
    ``fail_fast``, is raised as soon as it happens (the other tasks are stopped); any other error
    is raised. ``fn`` must be importable by name (it runs in other processes). ``warn`` is told,
    in one line, when a lost local worker made tasks run again."""
    if scheduler:
        out = _on_dask(fn, tasks, scheduler, fail_fast)
    elif (jobs or default_jobs()) <= 1 or len(tasks) <= 1:
        out = []
        for t in tasks:
            out.append(_guarded(fn, t))
            _check(out[-1], fail_fast)
    else:
        out = _on_processes(fn, tasks, min(jobs or default_jobs(), len(tasks)), fail_fast,
                            warn or (lambda _message: None))
    return [InputError(r.message) if isinstance(r, _Failed) else r for r in out]


def _check(result, fail_fast: bool) -> None:
    if fail_fast and isinstance(result, _Failed):
        raise InputError(result.message)


def _die_with_parent(parent: int) -> None:
    """Worker initializer: the worker gets SIGKILL when the process that started it dies (Linux
    ``PR_SET_PDEATHSIG``), so a ``kill -9`` of ``tracekit convert --jobs N`` leaves no worker
    (and so no resource tracker) running on."""
    import signal

    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own checks remain
        return
    if os.getppid() != parent:  # the parent died before the call above
        os._exit(1)


def _on_processes(fn: Callable, tasks: Sequence[tuple], workers: int, fail_fast: bool,
                  warn: Callable[[str], None]) -> list:
    """The tasks on a pool of local worker processes. A worker that dies (killed, out of
    memory) breaks the pool: its other workers are stopped, and the tasks not finished run
    once more on a new pool (they are idempotent: a part is replaced atomically), with a
    warning; a second loss is a one-line error."""
    from concurrent.futures.process import BrokenProcessPool

    out: dict[int, object] = {}
    for attempt in (1, 2):
        todo = [i for i in range(len(tasks)) if i not in out]
        try:
            _pool_run(fn, [(i, tasks[i]) for i in todo], workers, fail_fast, out)
            break
        except BrokenProcessPool:
            if attempt == 2:
                raise InputError("a local worker process died twice (killed, or out of "
                                 "memory?) while converting; run again with fewer --jobs") from None
            left = len(tasks) - len(out)
            warn(f"a local worker process died (killed, or out of memory?); the {left} of "
                 f"{len(tasks)} task(s) not finished ran again on new worker processes")
    return [out[i] for i in range(len(tasks))]


def _pool_run(fn: Callable, tasks: list[tuple[int, tuple]], workers: int, fail_fast: bool,
              done: dict[int, object]) -> None:
    """Run ``tasks`` ((index, args) pairs) on one pool, each result into ``done`` as it ends."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn, not fork: the parent holds DuckDB/Arrow threads, which fork would copy mid-state
    ex = ProcessPoolExecutor(max_workers=min(workers, len(tasks)),
                             mp_context=multiprocessing.get_context("spawn"),
                             initializer=_die_with_parent, initargs=(os.getpid(),))
    futures: dict = {}
    try:
        # submitting inside the try: a worker lost while the pool still starts the others makes
        # submit() raise, and the workers started by then must be stopped here too
        for i, t in tasks:
            futures[ex.submit(_guarded, fn, t)] = i
        for f in as_completed(futures):
            done[futures[f]] = f.result()
            _check(done[futures[f]], fail_fast)
    except BaseException:
        # an error, an interrupt or a lost worker: stop the workers now (the caller removes the
        # temporary folder they write into) instead of waiting for every queued rank; after a
        # lost worker, a survivor must not write a part that the retry writes too
        for f in futures:
            f.cancel()
        # every worker submit() started (it runs in this thread, so the set is complete now);
        # the pool's own clean-up after a lost worker stops only those it had when it noticed
        procs = list((getattr(ex, "_processes", None) or {}).values())
        for proc in procs:
            proc.terminate()
        ex.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.join(10)
            if proc.is_alive():  # a worker that did not stop on SIGTERM in 10 s (a loaded machine)
                proc.kill()
                proc.join(10)
        raise
    ex.shutdown(wait=True)


SCHEDULER_TIMEOUT_ENV = "TRACEKIT_SCHEDULER_TIMEOUT"
DEFAULT_SCHEDULER_TIMEOUT_S = 30.0


def scheduler_timeout() -> float:
    """Seconds to wait for a scheduler to answer (``--scheduler-timeout``, also
    $TRACEKIT_SCHEDULER_TIMEOUT; default :data:`DEFAULT_SCHEDULER_TIMEOUT_S`)."""
    try:
        value = float(os.environ.get(SCHEDULER_TIMEOUT_ENV) or DEFAULT_SCHEDULER_TIMEOUT_S)
    except ValueError:
        raise InputError(f"${SCHEDULER_TIMEOUT_ENV} is not a number of seconds") from None
    if not value > 0:
        raise InputError(f"--scheduler-timeout must be more than 0 seconds, not {value:g}")
    return value


def _check_address(address: str) -> None:
    import re

    if not re.fullmatch(r"tcp://[^\s/:]+(:[0-9]{1,5})?/?", address):
        raise InputError(f"--scheduler {address!r}: expected tcp://HOST:PORT (tracekit reaches "
                         "Dask schedulers over plain TCP, e.g. tcp://10.0.0.5:8786)")


def connect(address: str):
    """A Dask distributed client of the scheduler at ``address``; one-line errors. The client is
    made in a helper thread and given :func:`scheduler_timeout` seconds in all: a server that
    accepts the connection but never answers (or speaks another protocol) is an error, never a
    hang."""
    _check_address(address)
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--scheduler needs Dask: pip install 'tracekit[dask]'") from None
    import threading

    limit = scheduler_timeout()
    out: dict = {}

    class _Client(Client):
        def __del__(self):  # a client that failed to connect: its __del__ would block 10-20 s
            if getattr(self, "_tracekit_connected", False):  # and print a traceback
                super().__del__()

    def make():
        try:
            # its own deadline a little earlier: a refused connection says why, not "no answer"
            client = _Client(address, timeout=f"{max(limit * 0.8, limit - 2)}s",
                             set_as_default=False)
            client._tracekit_connected = True
            out["client"] = client
        except Exception as exc:  # noqa: BLE001 - any failure to connect is told in one line
            out["error"] = f"{one_line(exc) or type(exc).__name__}"

    worker = threading.Thread(target=make, name="tracekit-dask-connect", daemon=True)
    worker.start()
    worker.join(limit)
    if "client" in out:
        return out["client"]
    if "error" in out:
        # Dask's own text prints float sums ('after 2.4000000000000004 s'): 3 significant digits
        why = re.sub(r"\d+\.\d{4,}", lambda m: f"{float(m.group()):.3g}", out["error"][:300])
        raise InputError(f"cannot reach the Dask scheduler at {address}: {why}")
    raise InputError(f"cannot reach the Dask scheduler at {address}: no answer within "
                     f"{limit:g} s (--scheduler-timeout, ${SCHEDULER_TIMEOUT_ENV})")


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
