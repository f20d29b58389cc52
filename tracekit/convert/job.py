"""Multi-rank jobs: many profiler outputs (one per rank) converted into ONE run folder.

Each input (an nsys export or report, or a Kineto trace) is a *rank part*: it is converted on its
own (in parallel: local worker processes, ``jobs``, or the workers of a Dask scheduler,
:mod:`tracekit.workers`) into a staging run folder inside the job's temporary folder, then its
tables are moved to ``TABLE/rank-NNNNN.parquet`` (one file per rank per table; a glob
``RUN/TABLE/*.parquet`` reads the table as one dataset in DuckDB, pyarrow.dataset or polars) and
the manifest gets ``ranks``: one entry per rank with its input file, host, pid(s), devices,
``clock_offset_ns`` and the worker that converted it. docs/multirank.md describes the layout.

Ranks come from the trace (Kineto ``distributedInfo.rank``; the ``RANK``-style variable in an nsys
export's recorded environment), else from the file name (``rank_pattern``: its first group, or
the whole match, is the number; default: the number after ``rank``, else the last number), else
from the file order. Each source is used only when it gives every input a rank and no two inputs
the same one.

Clocks: Kineto timestamps are Unix-epoch ns on each host's clock already (offset 0). nsys
timestamps count from each export's session start; the ranks of a job are put on the clock of the
earliest session start: ``clock_offset_ns`` = the rank's session start (UTC, ns) minus the
earliest, added to every timestamp column of its tables. The accuracy is that of the hosts' clock
synchronization (NTP: typically 0.1-10 ms between hosts; PTP: about 1 us); ranks on one host
share one clock.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracekit import schema
from tracekit.convert import clocks
from tracekit.convert import identity as jobid
from tracekit.convert.rank_names import number_rank, search_rank, valid_rank
from tracekit.errors import InputError, RunFolderError
from tracekit.runfolder import MANIFEST, RunWriter, open_run, parquet_options

JOB_FORMATS = ("nsys", "kineto")  # formats whose inputs are one rank each
DEFAULT_RANK_PATTERN = r"rank[^0-9]{0,3}(\d+)"
TIME_COLUMNS = ("start_ns", "end_ns", "timestamp_ns")
RANGE_ID_COLUMNS = ("range_id", "parent_range_id")


def is_job(formats: Sequence[str]) -> bool:
    """True when inputs of these collector formats make a multi-rank job: two or more inputs,
    all nsys or all Kineto."""
    return len(formats) > 1 and len(set(formats)) == 1 and formats[0] in JOB_FORMATS


def name_rank(path: str | os.PathLike, pattern: str | None = None) -> int | None:
    """The rank in a file name: ``pattern``'s first group (or whole match) as a number; without
    a pattern, the number after ``rank`` (``report_rank3.sqlite``, ``rank-03.json``), else the
    last number in the name (``trace.7.json.gz``). None when there is none."""
    name = Path(path).name
    if pattern is not None:  # RE2, linear time; checked numbers (tracekit/convert/rank_names.py)
        return search_rank(pattern, name)
    m = re.search(DEFAULT_RANK_PATTERN, name, re.IGNORECASE)
    if m:
        return number_rank(m.group(1))
    nums = re.findall(r"[0-9]+", name)
    return number_rank(nums[-1]) if nums else None


def convert_part(path: str, part_dir: str) -> dict:
    """Convert one rank's input into the staging run folder ``part_dir`` (run on a worker).
    Returns ``{"manifest": ..., "worker": address}``; raises the collector's InputError."""
    from tracekit.convert.single import convert_single

    # force: a retry of this task (its first worker lost after writing the part) replaces the
    # part the lost worker finished, atomically (RunWriter), instead of failing on it; a worker
    # still running after its job failed finds the staging folder gone and never makes it again
    convert_single([Path(path)], Path(part_dir), force=True, make_parents=False)
    return {"manifest": open_run(part_dir).manifest, "worker": _worker_address()}


def _worker_address() -> str:
    """The Dask worker's address when running on one, else ``local:<pid>``."""
    if "distributed" in sys.modules:  # never imported (1 s) just to find out
        try:
            return sys.modules["distributed"].get_worker().address
        except ValueError:
            pass
    return f"local:{os.getpid()}"


def convert_job(inputs: Sequence[Path], formats: Sequence[str], writer: RunWriter, *,
                rank_pattern: str | None = None, jobs: int | None = None,
                scheduler: str | None = None, skip_bad_ranks: bool = False,
                rejected: Sequence[tuple[Path, InputError]] = (),
                clock_model: str = "estimate", merge_unrelated: bool = False,
                hosts: dict[int, str] | None = None) -> None:
    """Convert the rank inputs into ``writer``'s run folder (see the module docstring).

    Inputs that cannot be one job (:mod:`tracekit.convert.identity`) are an :class:`InputError` naming two
    of them, unless ``merge_unrelated`` (then recorded in the manifest and warned about).
    ``clock_model``: 'estimate' (the ranks' clocks estimated from the collectives,
    :mod:`tracekit.convert.clocks`) or 'none' (the clocks are synchronized: no correction, bound 0);
    written as the table clock_model. ``hosts``: rank -> host name known from elsewhere
    (``tracekit collect``'s workload description), for ranks whose input records none.

    Raises :class:`InputError` naming the first broken input (nothing is written), unless
    ``skip_bad_ranks``: then broken inputs are listed in the manifest (``skipped_ranks``) and in
    its warnings, and the rest is converted; all broken is still an error. ``rejected``: inputs
    format detection already refused (with ``skip_bad_ranks``), skipped the same way."""
    from tracekit.workers import run_parts

    for i, p in enumerate(inputs):  # the same rank twice would double every total
        for q in inputs[:i]:
            if os.path.samefile(p, q):
                raise InputError(f"is given twice (as {q} too); give each rank's input once", path=p)
    staging = writer.path / ".parts"
    staging.mkdir()
    tasks = [(str(p), str(staging / f"{i:05d}")) for i, p in enumerate(inputs)]
    results = run_parts(convert_part, tasks, jobs=jobs, scheduler=scheduler, warn=writer.warn,
                        fail_fast=not skip_bad_ranks)
    parts = []
    skipped = [{"input": str(p), "rank": name_rank(p, rank_pattern), "error": str(e)} for p, e in rejected]
    for i, (path, res) in enumerate(zip(inputs, results)):
        if isinstance(res, InputError):
            # a rank whose run folder could not be written (disk full, ulimit -f) is no bad input
            if not skip_bad_ranks or isinstance(res, RunFolderError):
                raise res
            skipped.append({"input": str(path), "rank": name_rank(path, rank_pattern), "error": str(res)})
        elif isinstance(res, BaseException):
            raise res
        else:
            parts.append({"index": i, "path": Path(path), "dir": Path(tasks[i][1]), **res})
    if not parts:
        raise InputError(f"every one of the {len(inputs) + len(rejected)} inputs failed to convert; the first: "
                         f"{skipped[0]['error']}")
    _check_distinct(parts)
    ranks, rank_source = _assign_ranks(parts, rank_pattern)
    for p, r in zip(parts, ranks):
        p["rank"] = r
        p["trace_rank"] = _trace_rank(p["manifest"])
        p["host_hint"] = (hosts or {}).get(r)
    parts.sort(key=lambda p: p["rank"])
    _set_clock_offsets(parts)
    conflicts = jobid.conflicts(parts, [p["trace_rank"] for p in parts])
    if conflicts and not merge_unrelated:
        raise InputError(f"{conflicts[0]}: these inputs cannot be one job; give --merge-unrelated "
                         "to merge them anyway")
    for p in parts:
        p["pids"] = _main_pids(p)
    m = writer.manifest
    m["job"] = {"format": formats[0], "rank_source": rank_source, "ranks": len(parts),
                "clock_model": clock_model}
    if conflicts:
        m["job"]["identity_conflicts"] = conflicts
        for c in conflicts:
            writer.warn(f"merged although not one job (--merge-unrelated): {c}")
    _warn_renumbered(parts, writer)
    range_base = 0
    for p in parts:
        range_base = _move_tables(p, writer, range_base)
    _merge_manifests(parts, writer)
    m["ranks"] = [_rank_entry(p, writer) for p in parts]
    _warn_shared_pids(parts, writer)
    (writer.path / MANIFEST).write_text(json.dumps(m, default=str), encoding="utf-8")  # for the engine
    writer.write_table("clock_model", [clocks.model_for_job(writer.path, m, clock_model)])
    entry = m["tables"]["clock_model"]  # a job's tables list "files" (one file here: the job's)
    m["tables"]["clock_model"] = {"rows": entry["rows"], "files": [entry["file"]]}
    (writer.path / MANIFEST).unlink()
    if skipped:
        m["skipped_ranks"] = skipped
        for s in skipped:
            writer.warn(f"skipped rank {s['rank'] if s['rank'] is not None else '?'} "
                        f"({Path(s['input']).name}): {s['error']}")
    shutil.rmtree(staging)


def _assign_ranks(parts: list[dict], pattern: str | None) -> tuple[list[int], str]:
    def usable(rs):
        return all(r is not None for r in rs) and len(set(rs)) == len(rs)

    trace = [_trace_rank(p["manifest"]) for p in parts]
    if usable(trace):
        return trace, "trace"
    names = [name_rank(p["path"], pattern) for p in parts]
    if usable(names):
        return names, "file name" if pattern is None else f"file name ({pattern})"
    if pattern is not None:
        bad = next(p["path"].name for p, r in zip(parts, names) if r is None or names.count(r) > 1)
        raise InputError(f"--rank-pattern {pattern!r} gives no rank, or a rank another input has, "
                         f"for {bad}")
    return list(range(len(parts))), "file order"


def _check_distinct(parts: list[dict]) -> None:
    """Refuse two inputs with identical content (a copy of one rank's trace under another name):
    their rows would count twice. Compared by the SHA-256 each part's manifest records."""
    seen: dict[str, Path] = {}
    for p in parts:
        for inp in p["manifest"].get("inputs") or []:
            key = inp.get("sha256")
            if key and key in seen and seen[key] != p["path"]:
                raise InputError(f"is the same trace as {seen[key]} (identical content); give each "
                                 "rank's input once", path=p["path"])
            if key:
                seen[key] = p["path"]
    _check_same_tables(parts)


def _check_same_tables(parts: list[dict]) -> None:
    """Refuse two inputs whose converted tables are identical, file for file (the same trace
    re-gzipped or re-indented: other bytes, the same events), by the tables' checksums."""
    seen: dict[tuple, Path] = {}
    for p in parts:
        tables = p["manifest"].get("tables") or {}
        key = tuple(sorted((n, str(t.get("sha256"))) for n, t in tables.items() if t.get("rows")))
        if not key or any(sha == "None" for _, sha in key):
            continue
        if key in seen:
            raise InputError(f"is the same trace as {seen[key]} (every table converts to the same "
                             "rows); give each rank's input once", path=p["path"])
        seen[key] = p["path"]


def _trace_rank(manifest: dict) -> int | None:
    src = manifest.get("sources", {})
    k = src.get("kineto") or {}
    ranks = [r for r in k.get("ranks") or [] if r is not None]
    if len(ranks) == 1:
        return valid_rank(ranks[0])  # -1, true, 2^63-1: no rank (the file name or order decides)
    return valid_rank((src.get("nsys") or {}).get("env_rank"))


def _set_clock_offsets(parts: list[dict]) -> None:
    starts = [(p["manifest"].get("sources", {}).get("nsys") or {}).get("session_start_utc_epoch_ns")
              for p in parts]
    known = [s for s in starts if isinstance(s, int)]
    base = min(known) if known else 0
    for p, s in zip(parts, starts):
        p["clock_offset_ns"] = s - base if isinstance(s, int) else 0


def _move_tables(part: dict, writer: RunWriter, range_base: int) -> int:
    """Move (or rewrite, when its clock or range IDs shift) each table of one part to
    TABLE/rank-NNNNN.parquet; returns the next range-ID base (range IDs stay unique in the job)."""
    tables = writer.manifest["tables"]
    next_base = range_base
    for name, info in part["manifest"].get("tables", {}).items():
        src = part["dir"] / info["file"]
        rel = f"{name}/rank-{part['rank']:05d}.parquet"
        (writer.path / name).mkdir(exist_ok=True)
        shift = {c: part["clock_offset_ns"] for c in TIME_COLUMNS if part["clock_offset_ns"]}
        if name == "nvtx_ranges" or name == "nvtx_marks":
            ids = pq.read_table(src, columns=[c for c in RANGE_ID_COLUMNS
                                              if c in pq.read_schema(src).names])
            top = max((pc.max(ids[c]).as_py() or 0 for c in ids.column_names), default=0)
            if range_base:
                shift.update({c: range_base for c in RANGE_ID_COLUMNS})
            next_base = max(next_base, range_base + top)
        if name == "processes":
            _rank_processes(part, src, writer.path / rel)
        elif shift:
            _rewrite(src, writer.path / rel, shift)
        else:
            os.replace(src, writer.path / rel)
            if isinstance(info.get("sha256"), str) and isinstance(info.get("bytes"), int):
                writer.known_digests[rel] = (info["bytes"], info["sha256"])  # moved unchanged
        entry = tables.setdefault(name, {"rows": 0, "files": []})
        entry["rows"] += info["rows"]
        entry["files"].append(rel)
        writer.manifest["not_captured"].pop(name, None)
    return next_base


def _rewrite(src: Path, dst: Path, shift: dict[str, int]) -> None:
    f = pq.ParquetFile(src)
    with pq.ParquetWriter(dst, f.schema_arrow, **parquet_options(f.schema_arrow)) as w:
        for batch in f.iter_batches(batch_size=65536):
            cols = []
            for field, col in zip(batch.schema, batch.columns):
                if field.name in shift and pa.types.is_integer(field.type):
                    col = pc.add(col, pa.scalar(shift[field.name], field.type))
                cols.append(col)
            w.write_batch(pa.RecordBatch.from_arrays(cols, schema=batch.schema))


def _main_pids(part: dict) -> list[int]:
    """The rank's own process(es): those with kernels, else with CUDA API calls, else the
    process with the most NVTX ranges or (Kineto) the host process with a rank."""
    d, tables = part["dir"], part["manifest"].get("tables", {})
    for name in ("kernels", "cuda_api", "nvtx_ranges"):
        info = tables.get(name)
        if info and info["rows"]:
            pids = pq.read_table(d / info["file"], columns=["pid"]).column("pid")
            counts = pc.value_counts(pc.drop_null(pids)).to_pylist()
            if counts:
                if name == "nvtx_ranges":
                    return [max(counts, key=lambda c: c["counts"])["values"]]
                return sorted(c["values"] for c in counts)
    return []


def _rank_processes(part: dict, src: Path, dst: Path) -> None:
    """processes with ``rank`` set to the job's rank for the rank's own process (where the trace
    left it null, or recorded another number: local rank 0 of two nodes gets two job ranks).
    An input with several GPU processes (torchrun under one nsys) keeps them as recorded: which
    of them is which rank is not in the export."""
    t = pq.read_table(src)
    main = part["pids"]
    if len(main) == 1:
        is_main = pc.is_in(t.column("pid"), value_set=pa.array(main, t.schema.field("pid").type))
        rank = pc.if_else(is_main,
                          pa.scalar(part["rank"], t.schema.field("rank").type), t.column("rank"))
        t = t.set_column(t.schema.get_field_index("rank"), "rank", rank)
    pq.write_table(t, dst, **parquet_options(t.schema))


def _rank_entry(part: dict, writer: RunWriter) -> dict:
    m = part["manifest"]
    src = m.get("sources", {})
    inp = (m.get("inputs") or [{}])[0]
    pids = part.get("pids") or []
    devices = []
    info = writer.manifest["tables"].get("kernels")
    if info and pids:
        f = writer.path / f"kernels/rank-{part['rank']:05d}.parquet"
        if f.exists():
            t = pq.read_table(f, columns=["pid", "device_id"])
            mine = pc.is_in(t.column("pid"), value_set=pa.array(pids, t.schema.field("pid").type))
            devices = sorted({d for d in pc.unique(t.filter(mine).column("device_id")).to_pylist()
                              if d is not None})
    return {
        "rank": part["rank"],
        "input": inp.get("path", str(part["path"])),
        "host": jobid.trace_host(m) or part.get("host_hint"),
        "trace_rank": part.get("trace_rank"),
        "pids": pids,
        "pid": pids[0] if len(pids) == 1 else None,
        "devices": devices,
        "clock_offset_ns": part["clock_offset_ns"],
        "session_start_utc_epoch_ns": (src.get("nsys") or {}).get("session_start_utc_epoch_ns"),
        "worker": part["worker"],
    }


def _warn_renumbered(parts: list[dict], writer: RunWriter) -> None:
    moved = [p for p in parts if p["trace_rank"] is not None and p["trace_rank"] != p["rank"]]
    if moved:
        ex = moved[0]
        writer.warn(f"{len(moved)} rank(s) renumbered: their traces record ranks that other inputs "
                    f"record too (e.g. {ex['path'].name}: trace rank {ex['trace_rank']}, job rank "
                    f"{ex['rank']}); every table uses the job's rank (manifest ranks[].rank)")


def _merge_manifests(parts: list[dict], writer: RunWriter) -> None:
    m = writer.manifest
    m.setdefault("sources", {})
    for p in parts:
        pm = p["manifest"]
        m["inputs"] += pm.get("inputs", [])
        for w in pm.get("warnings", []):
            writer.warn(f"rank {p['rank']}: {w}")
        for name, reason in pm.get("not_captured", {}).items():
            if name not in m["tables"]:
                m["not_captured"].setdefault(name, reason)
        for t in pm.get("microsecond_tables") or []:
            if t not in m.setdefault("microsecond_tables", []):
                m["microsecond_tables"].append(t)
        for key in ("duplicate_rows", "nonpositive_duration_rows", "zero_duration_rows"):
            if isinstance(pm.get(key), dict):
                acc = m.setdefault(key, {})
                for t, n in pm[key].items():
                    acc[t] = acc.get(t, 0) + n if isinstance(n, int) else n
        for fmt, s in pm.get("sources", {}).items():
            if fmt not in m["sources"]:
                m["sources"][fmt] = {**s, "per_rank": []}
            merged = m["sources"][fmt]
            merged["per_rank"].append({"rank": p["rank"], **s})
    for merged in m["sources"].values():
        per = merged["per_rank"]
        for key in ("files", "ranks"):
            if all(isinstance(s.get(key), list) for s in per):
                merged[key] = [x for s in per for x in s[key]]
        for key in ("invalid_kernels",):
            if all(isinstance(s.get(key), int) for s in per):
                merged[key] = sum(s[key] for s in per)
    for name in schema.TABLES:
        if name not in m["tables"]:
            m["not_captured"].setdefault(name, "no rank of the job captured this table")


def _warn_shared_pids(parts: list[dict], writer: RunWriter) -> None:
    seen: dict[int, int] = {}
    for p in parts:
        for pid in p.get("pids") or []:
            if pid in seen:
                writer.warn(f"ranks {seen[pid]} and {p['rank']} both have pid {pid} (processes on "
                            "different hosts?): results per (run, pid) merge them")
            seen.setdefault(pid, p["rank"])


__all__ = ["MANIFEST", "convert_job", "is_job", "name_rank"]
