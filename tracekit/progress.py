"""Progress reporting for long conversions (a rich progress bar on a terminal, silent otherwise)."""

from __future__ import annotations

import sys


class Progress:
    """Minimal interface collectors use: ``task(description, total)`` returns a callable
    ``advance(n)``. With ``enabled=False`` (tests, pipes) it does nothing."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._bar = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as _P

            self._bar = _P(
                TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                transient=True,
            )
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)
            self._bar = None

    def task(self, description: str, total: int | None = None):
        if self._bar is None:
            return lambda n=1: None
        tid = self._bar.add_task(description, total=total)
        return lambda n=1: self._bar.advance(tid, n)


NULL_PROGRESS = Progress(enabled=False)
