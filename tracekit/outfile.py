"""Writing one output file for ``-o FILE`` the way a user expects of a Unix tool.

:func:`write_output` is used by ``tracekit query``, ``sql``, ``compare`` and ``plot``:

- ``-`` writes to standard output;
- a character device, FIFO or socket (``/dev/null``, ``/dev/stdout`` on a pipe, a named pipe) is
  opened and written through, never replaced by a regular file;
- a symbolic link is followed: the file it points to is replaced, the link stays;
- a regular file is written atomically (a temporary file beside it, then a rename), so a reader
  never sees half a file and an error leaves the old file as it was;
- a new file gets the mode the umask gives (0644 under umask 022); a replaced file keeps its mode;
- a directory, a missing parent folder, an empty name, a file inside a folder that is being read
  (``protect``), and every write error (a full disk: ENOSPC, read-only file system, permissions)
  are an :class:`~tracekit.errors.InputError` (exit 2) naming the file.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from tracekit.errors import InputError, one_line

STDOUT = "-"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _reason(exc: OSError) -> str:
    return exc.strerror or one_line(exc)


def check_output(path: str | os.PathLike, protect: Iterable[str | os.PathLike] = (), *,
                 create_parent: bool = False) -> None:
    """Refuse ``path`` as an output before any work is done: empty name, a directory, a missing
    parent folder (unless ``create_parent``: it is made when the file is written), or a place
    inside one of the ``protect`` folders (run folders being read)."""
    text = os.fspath(path)
    if text == STDOUT:
        return
    if text == "":
        raise InputError("the output file name is empty")
    real = Path(os.path.realpath(text))
    places = {real, *real.parents}  # resolved once, not once per run folder (300 folders)
    for folder in protect:
        if Path(os.path.realpath(folder)) in places:
            raise InputError(f"is inside the run folder {folder}, which this command reads; "
                             "write the output elsewhere", path=text)
    try:
        st = os.stat(text)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.realpath(text))
        if not create_parent and not os.path.isdir(parent):
            raise InputError(f"cannot write: the folder {parent} does not exist", path=text) from None
        return
    except OSError as exc:
        raise InputError(f"cannot write: {_reason(exc)}", path=text) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory; give a file name", path=text)


def write_output(path: str | os.PathLike, write: Callable[[BinaryIO], None],
                 protect: Iterable[str | os.PathLike] = (), *, create_parent: bool = False) -> None:
    """Call ``write(f)`` with a binary file object that ends up as ``path`` (see the module text).
    ``create_parent``: make a missing parent folder (``tracekit plot``) instead of refusing.

    Raises :class:`InputError` for the cases the module text lists; nothing is left behind."""
    check_output(path, protect, create_parent=create_parent)
    text = os.fspath(path)
    if create_parent and text != STDOUT:
        try:
            os.makedirs(os.path.dirname(os.path.realpath(text)), exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot write: {_reason(exc)}", path=text) from None
    if text == STDOUT:
        out = sys.stdout.buffer
        write(out)
        out.flush()
        return
    try:
        st = os.stat(text)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"cannot write: {_reason(exc)}", path=text) from None
    try:
        if st is not None and (not stat.S_ISREG(st.st_mode) or text.startswith("/dev/")):
            # a device, pipe or socket (or /dev/stdout redirected to a file): write through
            with open(text, "wb") as f:
                write(f)
            return
        _replace(os.path.realpath(text), write, None if st is None else stat.S_IMODE(st.st_mode))
    except OSError as exc:
        raise InputError(f"cannot write: {_reason(exc)}", path=text) from None


def _replace(real: str, write: Callable[[BinaryIO], None], mode: int | None) -> None:
    folder, name = os.path.split(real)
    fd, tmp = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fchmod(f.fileno(), (0o666 & ~_umask()) if mode is None else mode)
        os.replace(tmp, real)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
