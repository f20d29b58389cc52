"""Run folders: ``manifest.json`` plus one Parquet file per captured table.

Writing is atomic: :class:`RunWriter` builds the folder under a hidden temporary name beside the
target and renames it into place only when every table and the manifest are written. On any
error, KeyboardInterrupt or SIGTERM (the CLI turns SIGTERM into KeyboardInterrupt) the temporary
folder is removed, so a run folder either appears whole or not at all.

Tables the input did not capture get no file; the manifest lists them under ``not_captured``
with the reason, so "not captured" never reads as zero rows.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import tracekit
from tracekit import schema
from tracekit.errors import InputError, RunFolderError, one_line
from tracekit.runfolder import checksums, tablefiles
from tracekit.runfolder.footer import read_footer

if TYPE_CHECKING:  # imported by the writer: opening a run folder to query it needs no pyarrow
    import pyarrow as pa

MANIFEST = "manifest.json"
PARQUET_COMPRESSION = "zstd"


def parquet_options(arrow_schema: pa.Schema) -> dict:
    """ParquetWriter options of every run-folder table: zstd; dictionary encoding for text
    columns; DELTA_BINARY_PACKED for 32- and 64-bit integer columns (timestamps, durations, IDs).
    On the benchmark export, integers delta-encoded cost a third less to write than plain-encoded
    (and those a quarter less than dictionary-encoded), came out smaller, and DuckDB scans them
    three times faster (docs/performance-history.md)."""
    import pyarrow as pa

    text = [f.name for f in arrow_schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    ints = {f.name: "DELTA_BINARY_PACKED" for f in arrow_schema
            if pa.types.is_int32(f.type) or pa.types.is_int64(f.type)}
    return {"compression": PARQUET_COMPRESSION, "use_dictionary": text, "column_encoding": ints}


def _written_by_tracekit(folder: Path, marker: str, key: str) -> bool:
    try:
        data = json.loads((folder / marker).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and key in data


def check_replaceable(target: str | os.PathLike, *, force: bool, inputs: Iterable = (),
                      marker: str = MANIFEST, key: str = "layout_version",
                      what: str = "run folder") -> None:
    """Refuse to write the folder ``target`` when that would lose data.

    ``target`` may be absent or an empty directory. Otherwise it must be a ``what`` tracekit
    wrote (its ``marker`` file is JSON with ``key``: ``manifest.json`` with ``layout_version`` for
    a run folder, ``study.json`` with ``tables`` for a study folder) and ``force`` must be given.
    Never replaced, even with ``force``: a file or any other directory, the working directory or
    a folder above it, a folder holding one of ``inputs`` and a folder inside one of them.
    Raises :class:`RunFolderError` (exit 2)."""
    t = Path(target).absolute()
    real = Path(os.path.realpath(t))
    cwd = Path(os.path.realpath(os.getcwd()))
    if real == cwd or real in cwd.parents:
        raise RunFolderError("is the working directory or a folder above it; write the "
                             f"{what} to a new folder", path=t)
    for src in inputs:
        s = Path(os.path.realpath(src))
        how = ("is the input" if s == real else "holds the input" if real in s.parents
               else "lies inside the input" if s in real.parents else None)
        if how:
            raise RunFolderError(f"{how} {src}; write the {what} to another folder", path=t)
    if not os.path.lexists(t):
        return
    if t.is_symlink() or not t.is_dir():
        raise RunFolderError(f"already exists and is not a {what}; it is not replaced", path=t)
    if not any(t.iterdir()):
        return
    if not _written_by_tracekit(t, marker, key):
        raise RunFolderError(f"already exists and is not a {what} written by tracekit (no "
                             f"{marker}); it is not replaced, even with --force", path=t)
    if not force:
        raise RunFolderError("already exists (use --force to replace it)", path=t)


class RunWriter:
    """Write one run folder atomically.

    Usage::

        with RunWriter(run_dir, force=False) as w:
            w.write_table("kernels", batches)       # iterable of Arrow tables/batches
            w.not_captured("osrt_api", "export has no OSRT_API table")
            w.manifest["source"] = {...}
        # renamed into place here; removed if the block raised

    Raises :class:`RunFolderError` if ``run_dir`` exists (and is not an empty folder) and
    ``force`` is false — checked both at start and at the final rename, so of two concurrent
    writers one wins and the other errors — and, even with ``force``, when ``run_dir`` is not a
    run folder tracekit wrote or holds one of ``inputs`` (:func:`check_replaceable`).
    Missing parent folders are made, unless ``make_parents`` is false: then a missing parent is a
    RunFolderError (a job's rank written by a worker into the job's staging folder, which a
    failed job has removed, is never made again).
    """

    def __init__(self, run_dir: str | os.PathLike, *, force: bool = False, inputs: Iterable = (),
                 make_parents: bool = True):
        self.run_dir = Path(run_dir).absolute()
        self.make_parents = make_parents
        self.force = force
        self.inputs = [str(p) for p in inputs]  # never inside the folder replaced
        self.manifest: dict = {
            "layout_version": schema.LAYOUT_VERSION,
            "tracekit_version": tracekit.__version__,
            "run_id": self.run_dir.name,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "inputs": [],
            "tables": {},
            "not_captured": {},
            "warnings": [],
        }
        self._tmp: Path | None = None
        # (bytes, sha256) of files whose digest is known already, by name relative to the folder
        self.known_digests: dict[str, tuple[int, str]] = {}
        # duplicate rows of a table counted by its collector while converting it, by table name
        # (tracekit.runfolder.integrity.count_duplicates takes them instead of reading the file)
        self.counted_duplicates: dict[str, int] = {}

    # -- context management -------------------------------------------------------------
    def __enter__(self) -> RunWriter:
        self._check_target()
        parent = self.run_dir.parent
        try:
            if self.make_parents:
                parent.mkdir(parents=True, exist_ok=True)
            # the temporary name keeps only plain characters: DuckDB reads `?` in a database
            # path as URL parameters and `[*?` in a Parquet path as a glob
            safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.run_dir.name)[:100]
            self._tmp = parent / f".{safe}.tmp-{uuid.uuid4().hex[:12]}"
            self._tmp.mkdir()
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder: {exc.strerror}", path=self.run_dir) from None
        except BaseException:  # Ctrl-C or SIGTERM right after mkdir: __exit__ will not run
            self._cleanup()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self._commit()
            finally:
                self._cleanup()
        else:
            self._cleanup()
        return False

    def _check_target(self):
        check_replaceable(self.run_dir, force=self.force, inputs=self.inputs)

    def _cleanup(self):
        # again while it is there: a worker process stopping meanwhile may still have added a file
        for attempt in range(5):
            if self._tmp is None or not os.path.lexists(self._tmp):
                break
            if attempt:
                time.sleep(0.1 * attempt)
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp = None

    # -- writing --------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The temporary folder being written (valid inside the ``with`` block)."""
        if self._tmp is None:
            raise RunFolderError("RunWriter used outside its with-block")
        return self._tmp

    def write_table(self, name: str, batches: Iterable[pa.RecordBatch | pa.Table]) -> int:
        """Conform each batch to the schema of table ``name`` and stream it to Parquet.

        Returns the number of rows written. An empty iterable still writes a file with the
        table's schema and 0 rows: the table was captured and had no events.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        tdef = schema.table(name)
        if name in self.manifest["tables"]:
            raise InputError(f"two inputs both provide table {name}; convert them into separate run folders")
        out = self.path / f"{name}.parquet"
        writer = None
        rows = 0
        try:
            for batch in batches:
                batch = tdef.conform(batch)
                with self._writing(name):
                    if writer is None:
                        writer = pq.ParquetWriter(out, batch.schema, **parquet_options(batch.schema))
                    if isinstance(batch, pa.RecordBatch):
                        writer.write_batch(batch)
                    else:
                        writer.write_table(batch)
                rows += batch.num_rows
            with self._writing(name):
                if writer is None:
                    pq.write_table(tdef.empty(), out, **parquet_options(tdef.empty().schema))
        finally:
            if writer is not None:
                with self._writing(name):
                    writer.close()
        # the file's columns: a reader takes them from here, not from 300 footers (checked later)
        self.manifest["tables"][name] = {"rows": rows, "file": out.name, "columns": list(tdef.column_names)}
        self.manifest["not_captured"].pop(name, None)
        return rows

    @contextlib.contextmanager
    def _writing(self, what: str):
        """Turn an OS error while writing (full disk, quota, permissions) into a one-line
        :class:`RunFolderError`; the with-block then removes the temporary folder."""
        try:
            yield
        except OSError as exc:
            reason = exc.strerror or one_line(exc)
            raise RunFolderError(f"cannot write {what}: {reason}", path=self.run_dir) from None

    def not_captured(self, name: str, reason: str) -> None:
        """Record that the input has no data for table ``name`` (no file is written)."""
        schema.table(name)
        if name not in self.manifest["tables"]:
            self.manifest["not_captured"][name] = reason

    def warn(self, message: str) -> None:
        self.manifest["warnings"].append(message)

    def _commit(self):
        for name in schema.TABLES:
            if name not in self.manifest["tables"] and name not in self.manifest["not_captured"]:
                self.manifest["not_captured"][name] = "no collector produced this table for this input"
        with self._writing("the checksums"):
            checksums.record(self.path, self.manifest["tables"], self.known_digests)
        mpath = self.path / MANIFEST
        with self._writing(MANIFEST), open(mpath, "w", encoding="utf-8") as f:
            json.dump(self.manifest, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        old = None
        if os.path.lexists(self.run_dir):
            if not self.force and (not self.run_dir.is_dir() or any(self.run_dir.iterdir())):
                raise RunFolderError("was created by another process meanwhile; not replaced", path=self.run_dir)
            check_replaceable(self.run_dir, force=self.force, inputs=self.inputs)
            old = self.run_dir.parent / f".{self.run_dir.name}.old-{uuid.uuid4().hex[:12]}"
            try:
                os.rename(self.run_dir, old)
            except OSError as exc:  # a mount point (EBUSY), a read-only parent (EROFS), ...
                raise RunFolderError(f"cannot replace it: {exc.strerror} (a mount point, or a folder "
                                     "in use?); nothing was changed", path=self.run_dir) from None
        try:
            os.rename(self._tmp, self.run_dir)
        except OSError as exc:
            if old is not None:
                os.rename(old, self.run_dir)
            raise RunFolderError(f"cannot move the new run folder into place: {exc.strerror}",
                                 path=self.run_dir) from None
        self._tmp = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


@dataclass
class Run:
    """A run folder opened for reading."""

    path: Path
    manifest: dict
    _columns: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _files: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _rows: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _real: Path | None = field(default=None, init=False, repr=False, compare=False)
    _pending: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def run_id(self) -> str:
        return self.manifest.get("run_id") or self.path.name

    def table_rows(self, name: str) -> int | None:
        """Rows of table ``name`` as the manifest records them (a count it lacks reads 0); None
        when the run did not capture the table. Reads no file."""
        info = (self.manifest.get("tables") or {}).get(name)
        return None if not isinstance(info, dict) else int(info.get("rows") or 0)

    def table_files(self, name: str, defer: bool = False) -> list[Path]:
        """The table's Parquet files: one for a run folder of one input (``"file"`` in the
        manifest), one per rank for a job (``"files"``, layout version 2); ``[]`` when the run
        did not capture the table.

        ``defer``: the checks are made in a helper thread (the query engine reads the file
        meanwhile) and raised by :meth:`settle`, which the caller must call before it uses
        anything read from the file: all of them for a file whose columns the manifest lists
        (its rows and columns taken from there now), else the SHA-256 of a file larger than
        8 MiB. Without it every check is done on return (waiting for one deferred by an earlier
        call).

        Raises :class:`RunFolderError` when the manifest lists the table but a file is missing
        or not readable Parquet (a damaged folder must not read as zero rows), and when a file
        name does not name a regular file inside the run folder (``../other/kernels.parquet``,
        an absolute path, a symbolic link leading out, a directory, ``/dev/zero``)."""
        tables = self.manifest.get("tables")
        info = tables.get(name) if isinstance(tables, dict) else None
        if info is None:
            return []
        if not isinstance(info, dict):
            raise RunFolderError(f"{MANIFEST}: the entry of table {name} is not an object", path=self.path)
        rel = info.get("files")
        if rel is None:
            rel = [info.get("file", f"{name}.parquet")]
        if not isinstance(rel, list) or not all(isinstance(f, str) for f in rel):
            raise RunFolderError(f"{MANIFEST}: the files of table {name} are not a list of names",
                                 path=self.path)
        if name not in self._files:  # checked once per Run: a view, the sql guard and a re-read share it
            if len(set(rel)) != len(rel):
                twice = next(f for f in rel if rel.count(f) > 1)
                raise RunFolderError(f"{MANIFEST} lists {twice!r} twice for table {name} (its rows "
                                     "would count twice): the run folder is damaged", path=self.path)
            files = [self._checked(name, f, info, i, defer) for i, f in enumerate(rel)]
            checksums.check_rows(self.path, name, info, (self._rows[p] for p in files))
            self._files[name] = files
        if not defer:
            self.settle(self._files[name])
        return list(self._files[name])

    def settle(self, paths: Iterable[Path] | None = None) -> None:
        """Wait for the checksums :meth:`table_files` deferred (of ``paths``; None: all) and raise
        :class:`RunFolderError` for a file that does not match (again at every call)."""
        for p in list(self._pending if paths is None else paths):
            if p in self._pending:
                self._pending[p].result()
                del self._pending[p]

    def table_path(self, name: str) -> Path | None:
        """Path of the table's one Parquet file, or None when the run did not capture it.

        Raises :class:`RunFolderError` for a job's table held in several files (use
        :meth:`table_files`), and as :meth:`table_files` does."""
        files = self.table_files(name)
        if len(files) > 1:
            raise RunFolderError(f"table {name} is held in {len(files)} files (one per rank); "
                                 "read them with Run.table_files", path=self.path)
        return files[0] if files else None

    def _checked(self, name: str, file: str, info: dict, index: int, defer: bool = False) -> Path:
        if "\0" in file or len(file) > 1024:
            raise RunFolderError(f"{MANIFEST} gives table {name} a file name that cannot be one "
                                 f"({len(file)} characters{', a NUL' if chr(0) in file else ''})",
                                 path=self.path)
        p = self.path / file
        if not tablefiles.plain_file_in(p, file):  # else: resolved and checked step by step
            self._inside(name, file, p)
        listed = tablefiles.listed_columns(info) if defer else None
        if listed is not None:  # footer, size, digest, then footer against the manifest, later
            self._rows[p], self._columns[p] = info["rows"], listed
            self._pending[p] = checksums.check_later(self.path, name, p, info, index,
                                                     footer=(info["rows"], listed))
            return self._not_other(name, file, p)
        try:
            data = tablefiles.small_file(p)  # read once for the footer and the checksum
            self._rows[p], self._columns[p] = read_footer(p, data)
        except (OSError, ValueError) as exc:
            raise RunFolderError(f"{p.name} is not readable Parquet ({one_line(exc)})",
                                 path=self.path) from None
        if defer and data is None:  # the size now, the digest in a helper thread (settle)
            checksums.check_file(self.path, name, p, info, index, content=False)
            self._pending[p] = checksums.check_later(self.path, name, p, info, index)
        else:
            checksums.check_file(self.path, name, p, info, index, data=data)
        checksums.check_columns(self.path, name, p, self._columns[p], tablefiles.listed_columns(info))
        return self._not_other(name, file, p)

    def _inside(self, name: str, file: str, p: Path) -> None:
        """Raise :class:`RunFolderError` unless ``p`` (``file`` of table ``name``) resolves to
        a regular file inside the run folder."""
        if self._real is None:  # once per run, not per file (300 folders: 1,800 files)
            self._real = Path(os.path.realpath(self.path))
        real, root = Path(os.path.realpath(p)), self._real
        if Path(file).is_absolute() or root not in real.parents:
            raise RunFolderError(f"{MANIFEST} gives table {name} the file {file!r}, which is not "
                                 "inside the run folder", path=self.path)
        if not p.exists():
            raise RunFolderError(f"{p.relative_to(self.path) if p.is_relative_to(self.path) else p.name} "
                                 f"is listed in {MANIFEST} but missing: the run folder is "
                                 "damaged; convert the input again", path=self.path)
        if not p.is_file():
            raise RunFolderError(f"{file} (table {name}) is not a regular file", path=self.path)

    def _not_other(self, name: str, file: str, p: Path) -> Path:
        other = tablefiles.other_table(name, self._columns[p])
        if other:
            raise RunFolderError(f"{file} is listed as table {name} but holds the columns of "
                                 f"table {other}: the run folder is damaged", path=self.path)
        return p

    def file_columns(self, path: Path) -> tuple[str, ...]:
        """Column names of one of :meth:`table_files`' files, from the footer it read to check
        the file (one footer read per file, however often a view is made)."""
        if path not in self._columns:
            self._columns[path] = read_footer(path)[1]
        return self._columns[path]


_PROFILER_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep", ".ncu-rep", ".csv", ".json", ".json.gz")


def open_run(path: str | os.PathLike) -> Run:
    """Open a run folder. Raises :class:`RunFolderError` when it is not one, or of an unknown
    layout version."""
    p = Path(path)
    m = p / MANIFEST
    if p.is_file():
        raise RunFolderError("is a file, not a run folder: convert a profiler output first, "
                             f"e.g. `tracekit convert {p} -o runs/NAME`, then use runs/NAME", path=p)
    if not p.is_dir():
        if p.name.lower().endswith(_PROFILER_SUFFIXES):
            raise RunFolderError("no such file or directory; a run folder is expected here (a "
                                 "profiler output becomes one with `tracekit convert FILE -o "
                                 "runs/NAME`)", path=p)
        raise RunFolderError("not a run folder (no such directory)", path=p)
    if not m.is_file():
        raise RunFolderError(f"not a run folder (no {MANIFEST}; create one with `tracekit convert`)", path=p)
    try:
        manifest = json.loads(m.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{MANIFEST} is not valid JSON: {exc}", path=p) from None
    except RecursionError:
        raise RunFolderError(f"{MANIFEST} is nested too deep to be a manifest", path=p) from None
    version = manifest.get("layout_version") if isinstance(manifest, dict) else None
    if version not in schema.READABLE_LAYOUT_VERSIONS:
        raise RunFolderError(
            f"run folder layout version {version!r} is not one this tracekit reads "
            f"({', '.join(map(str, schema.READABLE_LAYOUT_VERSIONS))}); convert the input again",
            path=p,
        )
    _check_manifest(manifest, p)
    return Run(path=p, manifest=manifest)


def _check_manifest(manifest: dict, path: Path) -> None:
    """The parts of a manifest the readers rely on have their types (a damaged or hand-edited
    manifest is a RunFolderError, never a crash or a silently empty table)."""
    def bad(what: str):
        raise RunFolderError(f"{MANIFEST} is damaged: {what}; convert the input again", path=path)

    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        bad(f'"tables" is {json.dumps(tables)[:40]}, not an object')
    for name, info in tables.items():
        if not isinstance(info, dict):
            bad(f"table {name!r} is {json.dumps(info)[:40]}, not an object")
        if not isinstance(info.get("file", ""), str) or info.get("file", "x") == "":
            bad(f"table {name!r} has the file {json.dumps(info.get('file'))[:40]}, not a file name")
        rows = info.get("rows", 0)
        if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 0):
            bad(f"table {name!r} has rows {json.dumps(rows)[:40]}, not a count")
    for key in ("not_captured",):
        if not isinstance(manifest.get(key, {}), dict):
            bad(f'"{key}" is not an object')
    if not isinstance(manifest.get("warnings", []), list):
        bad('"warnings" is not a list')
    run_id = manifest.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        bad(f'"run_id" is {json.dumps(run_id)[:40]}, not a name')
