"""Limits on ad-hoc SQL (``tracekit sql`` without ``--allow-external``).

``tracekit sql`` can be offered to people who may not read or write the machine's other files
(a notebook server, a shared analysis box). Without ``--allow-external`` two independent locks
hold:

- :func:`check_statements`: only statements that read or change the in-memory database run:
  SELECT (with WITH, DESCRIBE, SUMMARIZE, SHOW, PIVOT), CREATE and DROP of tables, views, macros,
  ... , INSERT, UPDATE, DELETE, and EXPLAIN / EXPLAIN ANALYZE / PREPARE / EXECUTE of those. Kinds
  are DuckDB's own parser's, after unwrapping (:mod:`tracekit.query.sql_statements`): ``EXPLAIN
  ANALYZE COPY ...`` is a COPY. ``COPY``, ``EXPORT``, ``ATTACH``, ``DETACH``, ``INSTALL``,
  ``LOAD``, ``SET``, ``PRAGMA``, ``CALL``, ``CREATE SECRET`` and the rest are refused with a
  :class:`~tracekit.errors.QueryError` (exit 2) before anything runs;
- :func:`lock`: DuckDB reads the run folders' table files and tracekit's data tables only
  through a read-only file system (:class:`ReadOnlyFS`, URLs ``tkro:///abs/path``) that opens
  files for reading and refuses every write, rename, removal or new folder; the local file
  system is then closed (``enable_external_access = false``, only the spill folder allowed),
  extensions can be neither installed nor loaded, and the configuration is locked. So even a
  statement the first lock let through cannot write a byte into a run folder or tracekit's data:
  ``read_text('/etc/passwd')``, ``glob('/etc/*')``, ``read_parquet('RUN/kernels.parquet')`` (use
  the view ``kernels``) and a ``SET`` back are refused by DuckDB itself.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable

import duckdb

from tracekit import schema
from tracekit.duck import glob_literal, lit_list
from tracekit.errors import QueryError
from tracekit.query.sql_statements import classify

ALLOWED = frozenset({"SELECT", "CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "DEALLOCATE"})
PROTOCOL = "tkro"
READ_ONLY_MARK = "tracekit-read-only"


def check_statements(text: str) -> None:
    """Raise :class:`QueryError` when ``text`` holds no statement, or one whose kind (after
    unwrapping EXPLAIN, EXPLAIN ANALYZE, PREPARE and EXECUTE) is outside :data:`ALLOWED`."""
    statements = classify(text)
    if not statements:
        raise QueryError(f"no SQL statement in {' '.join(text.split())[:60]!r}")
    for st in statements:
        if st.kind not in ALLOWED:
            raise QueryError(f"{st.kind} statements are not allowed in `tracekit sql` "
                             f"({st.words()!r}): it reads only the run folders; pass "
                             "--allow-external to lift this")


def url(path: str | os.PathLike) -> str:
    """The read-only URL of a local file or folder (absolute, symbolic links resolved)."""
    return f"{PROTOCOL}://" + os.path.realpath(path)


def _refuse(*args, **kwargs):
    path = next((a for a in args if isinstance(a, str)), "?")
    raise PermissionError(f"{READ_ONLY_MARK}: {path}")


class _PositionalFile:
    """A read-only file whose position is each thread's own.

    DuckDB reads a Python file system's file at an offset as two calls, ``seek`` then ``read``,
    and its scan threads share one handle per file: with one shared position, another thread's
    ``seek`` between the two calls returns the wrong bytes (a ZSTD decompression failure, a bad
    string, or a silently wrong sum: 18 of 20 eight-thread scans of a 2 M-row file). Here each
    thread keeps its own position and reads with ``os.pread``, so every read is at the offset
    that thread asked for.
    """

    def __init__(self, path: str):
        self.name = path
        self._fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size
        self._pos = threading.local()
        self.closed = False

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.tell(), 2: self._size}[whence]
        self._pos.at = base + offset
        return self._pos.at

    def tell(self) -> int:
        return getattr(self._pos, "at", 0)

    def read(self, size: int = -1) -> bytes:
        at = self.tell()
        if size is None or size < 0:
            size = max(self._size - at, 0)
        chunks = []
        while size > 0:
            got = os.pread(self._fd, size, at)
            if not got:
                break
            chunks.append(got)
            at += len(got)
            size -= len(got)
        self._pos.at = at
        return b"".join(chunks)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self._fd)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _read_only_fs(files: frozenset | None = None, dirs: tuple = ()):
    """The ``tkro://`` file system; with ``files``, a glob lists only those files and what lies
    under ``dirs``: a run folder named ``*`` (``g/*/kernels.parquet``) is a literal, never a
    pattern that lists its siblings' files."""
    from fsspec.implementations.local import LocalFileSystem

    class ReadOnlyFS(LocalFileSystem):
        """fsspec's local file system with every write refused (``tkro://`` URLs)."""

        protocol = (PROTOCOL,)
        cachable = False

        def glob(self, path, **kwargs):
            found = super().glob(path, **kwargs)
            if files is None:
                return found
            return [f for f in found if (f if isinstance(f, str) else str(f)) in files
                    or str(f).startswith(dirs)]

        @classmethod
        def _strip_protocol(cls, path):
            path = str(path)
            if path.startswith(f"{PROTOCOL}://"):
                path = path[len(PROTOCOL) + 3:]
            return LocalFileSystem._strip_protocol(path)

        def _open(self, path, mode="rb", **kwargs):
            if mode not in ("rb", "r"):
                _refuse(path)
            return _PositionalFile(self._strip_protocol(path))

    for name in ("mkdir", "makedirs", "rmdir", "rm_file", "rm", "_rm", "mv", "rename",
                 "cp_file", "copy", "put_file", "put", "get_file", "get", "touch", "pipe_file",
                 "pipe", "write_text", "write_bytes", "link", "symlink", "chmod", "created"):
        setattr(ReadOnlyFS, name, _refuse)
    return ReadOnlyFS()


def mount(con: duckdb.DuckDBPyConnection) -> None:
    """Register the read-only file system on ``con`` (before views use :func:`url` paths)."""
    con.register_filesystem(_read_only_fs())


def _data_dirs() -> list[str]:
    from tracekit.query.named_queries import data_file

    return [url(os.path.dirname(data_file("gpu_peaks.csv"))) + os.sep]


def lock(con: duckdb.DuckDBPyConnection, runs: Iterable, spill: str) -> None:
    """Allow ``con`` to read only the runs' table files (and tracekit's own data tables) through
    the read-only file system, then switch external access and extensions off and lock the
    configuration."""
    paths = []
    for run in runs:
        for name in schema.TABLES:
            for p in run.table_files(name):  # a job's tables have a file per rank
                # the engine reads each file through its literal glob pattern (run[12] -> run[[]12])
                paths += [url(p), glob_literal(url(p))]
    dirs = [spill.rstrip(os.sep) + os.sep] + _data_dirs()
    con.unregister_filesystem(PROTOCOL)  # again, its globs limited to the files allowed here
    con.register_filesystem(_read_only_fs(frozenset(os.path.realpath(p) for run in runs
                                                    for name in schema.TABLES for p in run.table_files(name)),
                                          tuple(d[len(PROTOCOL) + 3:] for d in _data_dirs())))
    for setting in ("autoload_known_extensions", "autoinstall_known_extensions",
                    "allow_community_extensions", "allow_persistent_secrets"):
        con.execute(f"SET {setting} = false")
    con.execute(f"SET allowed_paths = {lit_list(sorted(set(paths)))}")
    con.execute(f"SET allowed_directories = {lit_list(dirs)}")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def read_only_error(message: str) -> str | None:
    """The one-line error for a DuckDB ``message`` raised by a write refused by
    :class:`ReadOnlyFS`, else None."""
    at = message.find(READ_ONLY_MARK + ": ")
    if at < 0:
        if "file system operations are disabled" in message:
            return (f"SQL failed: {message} (without --allow-external, `tracekit sql` reads the "
                    "run folders through the views kernels, cuda_api, ...; `tracekit schema` "
                    "lists them)")
        return None
    path = message[at + len(READ_ONLY_MARK) + 2:].split(" ")[0].rstrip("'\"")
    return (f"{path}: the run folders and tracekit's data are read-only in `tracekit sql`; "
            "pass --allow-external to write files")
