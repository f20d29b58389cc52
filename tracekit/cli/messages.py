"""Lines on stderr besides errors: warnings, notes and the one-line summaries of commands.

Every line is plain text with control characters made visible (a run id or kernel name from a
trace is never markup or a terminal escape) and is one line: whitespace runs become one space.
``--quiet`` (``STATE["quiet"]``) silences warnings and notes, not errors nor summaries.
"""

from __future__ import annotations

import sys

from tracekit.cli.app import STATE
from tracekit.labels import visible


def _line(text: str) -> str:
    return visible(" ".join(str(text).split()))


def warn(message: str) -> None:
    """``tracekit: warning: MESSAGE`` on stderr, unless --quiet."""
    if not STATE.get("quiet"):
        print(f"tracekit: warning: {_line(message)}", file=sys.stderr)


def note(message: str) -> None:
    """``tracekit: MESSAGE`` on stderr (e.g. why a result is empty), unless --quiet."""
    if not STATE.get("quiet"):
        print(f"tracekit: {_line(message)}", file=sys.stderr)


def info(message: str) -> None:
    """A command's one-line summary on stderr (``wrote runs/a (...)``), printed as is."""
    print(_line(message), file=sys.stderr)
