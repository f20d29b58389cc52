"""The entry point of ``tracekit convert``: one run folder from profiler outputs, as one run or as a
multi-rank job."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tracekit.collectors import detect
from tracekit.convert.job import convert_job, is_job
from tracekit.convert.single import convert_single
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter


def convert(inputs: Sequence[str | os.PathLike], run_dir: str | os.PathLike, *, force: bool = False,
            progress: Progress = NULL_PROGRESS, extra_manifest: dict | None = None,
            extra_tables: dict | None = None, rank_pattern: str | None = None,
            jobs: int | None = None, scheduler: str | None = None,
            skip_bad_ranks: bool = False, clock_model: str = "estimate",
            merge_unrelated: bool = False) -> Path:
    """Convert ``inputs`` (profiler output files) into the run folder ``run_dir``.

    Each input is recognized by its content (:func:`tracekit.collectors.detect`). Two or more
    nsys exports/reports, or two or more Kineto traces, are a multi-rank job
    (:mod:`tracekit.convert.job`): one rank per input, converted in parallel (``jobs`` local worker
    processes, default one per core, or the workers of the Dask ``scheduler``), one Parquet file
    per rank per table, ranks listed in the manifest. Otherwise inputs of the same format go to
    that format's collector together (e.g. an nsys export and an ncu report); two collectors
    writing the same table is an :class:`InputError` (raised by the writer).
    ``extra_manifest`` entries (e.g. the workload description from ``tracekit collect``) are
    merged into the manifest; ``extra_tables`` ({table name: Arrow table}, e.g. the host CPU
    samples ``tracekit collect`` takes under the torch profiler) are written into the same run
    folder (one file each), for tables no input collector wrote.

    Returns the run folder's path. Raises :class:`InputError` subclasses for bad input (in a job,
    naming the broken input, unless ``skip_bad_ranks``); nothing is left behind on any error.
    ``clock_model`` and ``merge_unrelated``: see :func:`tracekit.convert.job.convert_job` (a job only).
    """
    inputs = _expand_folders(inputs)
    if not inputs:
        raise InputError("no input files given")

    rejected: list[tuple[Path, InputError]] = []
    if skip_bad_ranks and len(inputs) > 1:  # a rank refused at detection is skipped too
        kept = []
        for p in inputs:
            try:
                kept.append((p, detect(p)))
            except InputError as exc:
                rejected.append((Path(p), exc))
        if not kept:
            raise rejected[0][1]
        inputs, mods = [p for p, _ in kept], [m for _, m in kept]
    else:
        mods = [detect(p) for p in inputs]
    formats = [m.NAME for m in mods]
    # MLPerf result logs beside a job's ranks: the ranks are the job, the logs go in beside them
    logs = [p for p, f in zip(inputs, formats) if f == "mllog"]
    if logs and len(logs) < len(inputs) and is_job([f for f in formats if f != "mllog"]):
        inputs, mods = zip(*[(p, m) for p, m in zip(inputs, mods) if m.NAME != "mllog"])
        inputs, mods, formats = list(inputs), list(mods), [m.NAME for m in mods]
    else:
        logs = []
    # one good rank left beside refused ones is still a job, with the others skipped
    if not is_job(formats if not rejected else formats * 2):
        if rejected:
            raise rejected[0][1]
        return convert_single(inputs, run_dir, force=force, progress=progress,
                              extra_manifest=extra_manifest, extra_tables=extra_tables, modules=mods)
    with RunWriter(run_dir, force=force, inputs=inputs) as writer:
        convert_job([Path(p) for p in inputs], formats, writer, rank_pattern=rank_pattern,
                    jobs=jobs, scheduler=scheduler, skip_bad_ranks=skip_bad_ranks,
                    rejected=rejected, clock_model=clock_model, merge_unrelated=merge_unrelated,
                    hosts=_workload_hosts(extra_manifest))
        if logs:
            from tracekit.collectors import mllog

            writer.manifest.setdefault("inputs", [])
            writer.manifest.setdefault("sources", {})
            mllog.collect([Path(p) for p in logs], writer)
        for name, table in (extra_tables or {}).items():
            if name in writer.manifest["tables"]:
                raise InputError(f"two inputs both provide table {name}")
            writer.write_table(name, [table])
        if extra_manifest:
            writer.manifest.update(extra_manifest)
    return Path(run_dir)


def _expand_folders(inputs: Sequence[str | os.PathLike]) -> list:
    """Each folder given is an MLPerf results tree: its ``result_*.txt`` files (collectors/mllog);
    a folder without any stays, for :func:`detect` to refuse."""
    from tracekit.collectors.mllog import expand_inputs

    out: list = []
    for p in inputs:
        found = expand_inputs(Path(p)) if os.path.isdir(p) else []
        out.extend(found or [p])
    return out


def _workload_hosts(extra: dict | None) -> dict[int, str]:
    """rank -> hostname from ``tracekit collect``'s workload description (its ranks' hosts)."""
    ranks = ((extra or {}).get("workload") or {}).get("ranks") or []
    return {r["rank"]: r["hostname"] for r in ranks
            if isinstance(r, dict) and isinstance(r.get("rank"), int) and isinstance(r.get("hostname"), str)}
