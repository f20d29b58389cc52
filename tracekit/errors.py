"""Typed exceptions. The library raises these; the CLI turns them into one line on stderr.

Exit statuses (see :func:`tracekit.cli.main`):

- :class:`InputError` and its subclasses: 2 (the user's input is bad: file, table, column, option)
- any other exception: 1 (a bug in tracekit; ``--debug`` shows the traceback)
"""

from __future__ import annotations


def one_line(exc: BaseException) -> str:
    """An exception's message with every run of whitespace (newlines too) as one space, for a
    one-line error; empty when the message is."""
    return " ".join(str(exc).split())


class TracekitError(Exception):
    """Base class of every error tracekit raises on purpose. ``exit_code`` is the CLI status."""

    exit_code = 1


class InputError(TracekitError):
    """The input cannot be read as asked: wrong, truncated or unsupported file; bad option."""

    exit_code = 2

    def __init__(self, message: str, *, path: object | None = None):
        self.path = None if path is None else str(path)
        super().__init__(f"{self.path}: {message}" if self.path else message)


class UnsupportedFormatError(InputError):
    """The file is not in a format tracekit reads (or a newer version than the local tool reads)."""


class MissingTableError(InputError):
    """A table the conversion requires is absent from the input export."""


class MissingColumnError(InputError):
    """A column the conversion requires is absent from a table of the input export."""


class SchemaError(TracekitError):
    """A table produced by a collector does not match :mod:`tracekit.schema` (a tracekit bug)."""


class RunFolderError(InputError):
    """A run folder is missing, incomplete, of an unknown layout version, or already exists."""


class QueryError(InputError):
    """A named query is unknown, a parameter is missing or malformed, or SQL fails."""


class ToolNotFoundError(InputError):
    """An external tool (nsys, ncu, torch, ...) needed for this step is not installed."""
