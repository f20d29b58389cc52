"""PyTorch profiler (Kineto / CUPTI / roctracer) Chrome-trace JSON collector.

Reads ``.json``, ``.json.gz`` and ``*.pt.trace.json[.gz]`` traces (recognized by content) in one
streaming pass (:mod:`tracekit.collectors.kineto.reader`) and writes the same run-folder tables
as the nsys collector: ``kernels``, ``cuda_api``, ``memcpy``, ``memset``, ``cuda_sync``,
``nvtx_ranges`` (PyTorch operators and annotations, with a ``pytorch.*`` domain, or ``tracekit``
for the ranges of tracekit's own runners), ``processes``, ``threads``, ``devices``, and
``collectives`` (NCCL message sizes from the NCCL kernels' args or ``record_param_comms``).

Several traces (one per rank) go into one run folder together. The mapping is documented in
docs/kineto.md; :func:`column_sources` feeds docs/schema.md.

Memory: events are turned into columns in chunks of :data:`CHUNK_ROWS` rows, written to
temporary Parquet parts in the run folder being built, and copied into the final tables at the
end with vectorized fix-ups that need the whole trace (``baseTimeNanoseconds`` written after the
events, the host pid of GPU activities, bytes of ROCm copies, the ``tracekit`` domain). Peak
memory does not grow with the trace's size.

Modules: :mod:`~tracekit.collectors.kineto.reader` (streaming JSON, timestamps, metadata),
:mod:`~tracekit.collectors.kineto.mapping` (event categories and args to columns, as data),
:mod:`~tracekit.collectors.kineto.events` (the streaming pass: each event to its table's
columns), :mod:`~tracekit.collectors.kineto.finish` (the end-of-trace fix-ups, nesting,
collectives).
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracekit.collectors.common import describe_input
from tracekit.collectors.kineto import memory as MEM
from tracekit.collectors.kineto import reader as R
from tracekit.collectors.kineto.events import gc_paused, read_file
from tracekit.collectors.kineto.finish import (
    collectives_table,
    devices_table,
    file_base_ns,
    file_host_pid,
    flow_counts,
    jsonable,
    processes_table,
    source_entry,
    table_batches,
    threads_table,
)
from tracekit.collectors.kineto.mapping import (
    ANNOTATION_DOMAINS,
    CHUNK_ROWS,
    GPU_TABLES,
    MAX_RANK,
    PART_COLUMNS,
    TRACEKIT_DOMAIN,
    TRACEKIT_PHASE,
    TRACEKIT_STEP,
    FileState,
    Parts,
    trace_rank,
)
from tracekit.errors import InputError
from tracekit.progress import NULL_PROGRESS, Progress
from tracekit.runfolder import RunWriter

NAME = "kineto"
__all__ = ["NAME", "sniff", "collect", "column_sources", "TRACEKIT_DOMAIN", "TRACEKIT_STEP",
           "TRACEKIT_PHASE", "ANNOTATION_DOMAINS", "CHUNK_ROWS"]


def sniff(path: Path) -> bool:
    """A JSON object (plain or gzip) with ``traceEvents`` near its start, or named .json[.gz]."""
    return R.sniff_bytes(Path(path))


def column_sources() -> dict[tuple[str, str], str]:
    """{(table, column): where the value comes from in a Kineto trace}, for docs/schema.md."""
    ts = "ts (us) x 1000 + baseTimeNanoseconds"
    out = {}
    for t in ("kernels", "cuda_api", "memcpy", "memset", "cuda_sync", "nvtx_ranges"):
        out[(t, "start_ns")] = ts
        out[(t, "end_ns")] = "start_ns + dur (us) x 1000"
        out[(t, "duration_ns")] = "dur (us) x 1000"
    for t in GPU_TABLES:
        out[(t, "device_id")] = "args.device (else the event's pid)"
        out[(t, "context_id")] = "args.context"
        out[(t, "stream_id")] = "args.stream (else the event's tid)"
        out[(t, "correlation_id")] = "args.correlation (else the ac2g flow id)"
        out[(t, "pid")] = "pid of the trace's host process (the CPU events' pid)"
    out.update({
        ("kernels", "name"): "name of cat=kernel events",
        ("kernels", "grid_x"): "args.grid[0] (y, z: [1], [2])",
        ("kernels", "block_x"): "args.block[0] (y, z: [1], [2])",
        ("kernels", "registers_per_thread"): "args['registers per thread']",
        ("cuda_api", "name"): "name of cat=cuda_runtime / cuda_driver events",
        ("cuda_api", "api"): "'runtime' for cat=cuda_runtime, 'driver' for cat=cuda_driver",
        ("cuda_api", "correlation_id"): "args.correlation",
        ("memcpy", "bytes"): "args.bytes (ROCm: args.size of the API call with the same correlation)",
        ("memcpy", "kind"): "args.kind when text, else from the name 'Memcpy HtoD (Pageable -> Device)'",
        ("memcpy", "src_device_id"): "args.fromDevice (else args['src device'])",
        ("memcpy", "dst_device_id"): "args.toDevice (else args['dst device'])",
        ("memset", "bytes"): "args.bytes",
        ("memset", "mem_kind"): "from the name 'Memset (Device)'",
        ("cuda_sync", "sync_type"): "args.cuda_sync_kind (else name), e.g. 'Stream Sync' -> 'Stream synchronize'",
        ("nvtx_ranges", "domain"): "pytorch.cpu_op / pytorch.user_annotation / pytorch.gpu_user_annotation / "
                                   "pytorch.python_function from cat; tracekit for tracekit's runner ranges",
        ("nvtx_ranges", "name"): "event name (operator or record_function name)",
        ("nvtx_ranges", "input_dims"): "cpu_op args['Input Dims'] (traces taken with record_shapes=True)",
        ("nvtx_ranges", "input_types"): "cpu_op args['Input type']",
        ("nvtx_ranges", "concrete_inputs"): "cpu_op args['Concrete Inputs'] (PyTorch >= 2.1)",
        ("nvtx_ranges", "op_id"): "cpu_op args['Record function id']",
        ("nvtx_ranges", "sequence_number"): "cpu_op args['Sequence number']",
        ("memcpy", "recorded_bytes_per_s"): "args['memory bandwidth (GB/s)'] x 1e9",
        ("processes", "name"): "process_name metadata event",
        ("processes", "rank"): "distributedInfo.rank",
        ("threads", "name"): "thread_name metadata event ('thread N (NAME)' -> NAME)",
        ("devices", "name"): "deviceProperties[].name",
        ("collectives", "start_ns"): "start of the NCCL kernel (cat=kernel, ncclKernel_*/ncclDevKernel_* or args "
                                     "with 'Collective name')",
        ("collectives", "pid"): "pid of the trace's host process",
        ("collectives", "device_id"): "the NCCL kernel's args.device",
        ("collectives", "stream_id"): "the NCCL kernel's args.stream",
        ("collectives", "correlation_id"): "the NCCL kernel's args.correlation",
        ("collectives", "collective"): "args['Collective name'] of the NCCL kernel, else of the record_param_comms "
                                       "operator with the same args['External id']",
        ("collectives", "dtype"): "args.dtype (same source)",
        ("collectives", "element_bytes"): "size of dtype (DTYPE_BYTES in collectors/kineto/mapping.py)",
        ("collectives", "in_elements"): "args['In msg nelems'] (same source)",
        ("collectives", "out_elements"): "args['Out msg nelems'] (same source)",
        ("collectives", "group_size"): "args['Group size'] (same source)",
        ("collectives", "process_group"): "args['Process Group Name'] (else args['Process Group Description'])",
        ("collectives", "seq"): "args['Seq'] of the NCCL kernel, else of the record_param_comms operator",
        ("collectives", "peer_rank"): "args['Dst Rank'] of a send, args['Src Rank'] of a recv (same source)",
    })
    out.update(MEM.column_sources())
    return out


# Chrome trace event phases (ph): the ones tracekit does not read (instant, counter, async,
# flow steps, ...) are dropped without a warning; None (no ph) is warned about on its own
_CHROME_PHASES = frozenset("BEXiIsftCMPObneNDRcpv(),") | {"None"}


def _warn_dropped(st: FileState, writer: RunWriter) -> None:
    """Events dropped or text cut are said with counts (stderr and manifest), never silent."""
    from tracekit.collectors.kineto.guard import MAX_STRING_BYTES

    name, total = st.path.name, st.events_seen
    no_ph = st.skipped.get("ph=None", 0)
    not_obj = st.skipped.get("<event not a JSON object>", 0)
    if no_ph:
        writer.warn(f"{name}: {no_ph} of {total} event(s) have no ph (event type) and were dropped")
    if not_obj:
        writer.warn(f"{name}: {not_obj} of {total} event(s) are not JSON objects and were dropped")
    if st.bad_timestamps:
        writer.warn(f"{name}: {st.bad_timestamps} of {total} complete event(s) have a missing or "
                    "non-numeric ts or dur (text, true/false, null) and were dropped")
    if st.bad_devices:
        writer.warn(f"{name}: {st.bad_devices} GPU event(s) have an args.device that is not a "
                    "number (their device_id is NULL)")
    for key, n in st.skipped.items():
        if isinstance(key, str) and key.startswith("ph=") and key[3:] not in _CHROME_PHASES:
            writer.warn(f"{name}: {n} event(s) with ph {key[3:]!r}, not a Chrome trace event "
                        "type, were dropped")
        elif key in st.nontext_cats:
            writer.warn(f"{name}: {n} complete event(s) whose cat is not text ({key!r}) were "
                        "dropped")
    raw_rank = (st.metadata.get("distributedInfo") or {}).get("rank")
    if raw_rank is not None and trace_rank(st.metadata) is None:
        writer.warn(f"{name}: distributedInfo.rank {json.dumps(jsonable(raw_rank))[:40]} is not a rank (a "
                    f"whole number 0..{MAX_RANK}): processes.rank is NULL")
    if st.surrogates_replaced:
        writer.warn(f"{name}: {st.surrogates_replaced} lone UTF-16 surrogate escape(s) (such as "
                    "\\udfff, half of a character) in text values were replaced by U+FFFD")
    if st.strings_truncated:
        writer.warn(f"{name}: {st.strings_truncated} text value(s) longer than "
                    f"{MAX_STRING_BYTES >> 20} MiB were cut there (they end in …)")


def _check_distinct(states: list[FileState], described: list) -> None:
    """The same trace given twice (the same file, or a copy) would double every total."""
    seen: dict = {}
    for st in states:
        key = described[st.index].result()["sha256"]
        if key in seen:
            raise InputError(f"is the same trace as {seen[key]} (identical content); give each "
                             "rank's trace once", path=st.path)
        seen[key] = st.path


# --- finishing: fix-ups that need the whole trace ----------------------------------------
def collect(paths: list[Path], writer: RunWriter, progress: Progress = NULL_PROGRESS) -> None:
    """Convert one or more Kineto traces (e.g. one per rank) into ``writer``'s run folder.

    Raises :class:`InputError` for a file that is not JSON, is truncated, has no traceEvents
    array or no timed event in it (``{"traceEvents": []}``, metadata only), or has a malformed
    ``baseTimeNanoseconds``.
    """
    paths = [Path(p) for p in paths]
    for i, p in enumerate(paths):
        for q in paths[:i]:
            if os.path.samefile(p, q):
                raise InputError(f"is given twice (as {q} too); give each rank's trace once", path=p)
    states = [FileState(i, p) for i, p in enumerate(paths)]
    parts = Parts(writer.path / ".kineto-parts")
    range_counter = [1]
    # the inputs' SHA-256 on another thread, beside the parse (hashlib releases the GIL)
    hashing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracekit-sha256")
    try:
        described = [hashing.submit(describe_input, st.path, "kineto-json") for st in states]
        for st in states:
            with gc_paused():
                read_file(st, parts, progress, range_counter)
            if not st.counts:  # nothing timed: no run folder of empty tables (exit 2)
                raise InputError("holds no profiler events (traceEvents is empty or has only "
                                 "metadata): nothing to convert; was the profiler stopped before "
                                 "a step ran?", path=st.path)
            writer.manifest["inputs"].append(described[st.index].result())
            _warn_dropped(st, writer)
            MEM.warn_dropped(st, writer)
            st.base_ns = file_base_ns(st)
            st.flow_counts = flow_counts(parts, st)
            st.host_pid = file_host_pid(st)
            if st.host_pid is None and (parts.files["kernels"] or parts.files["memcpy"]):
                writer.warn(f"{st.path.name}: several host processes; GPU activities have no pid")
            if not st.metadata_complete:
                writer.warn(f"{st.path.name}: the metadata after traceEvents was not found "
                            "(more than 8 MiB of it?); baseTimeNanoseconds may be missing")
        _check_distinct(states, described)
        has_gpu = any(st.counts.get(c) for st in states for c in ("kernel", "cuda_runtime", "cuda_driver",
                                                                   "gpu_memcpy", "gpu_memset", "cuda_sync"))
        has_gpu = has_gpu or any(st.metadata.get("deviceProperties") for st in states)
        for table in PART_COLUMNS:
            if table in GPU_TABLES + ("cuda_api",) and not has_gpu:
                writer.not_captured(table, "CPU-only trace: no GPU activities were recorded (no CUPTI)")
                continue
            writer.write_table(table, table_batches(table, parts, states, range_counter))
        if has_gpu:
            writer.write_table("collectives", [collectives_table(parts, states)])
        else:
            writer.not_captured("collectives", "CPU-only trace: no GPU activities were recorded (no CUPTI)")
        if any(st.memory_rows for st in states):
            writer.write_table("memory_events", MEM.memory_batches(parts, states))
        else:
            writer.not_captured("memory_events", "no [memory] events (trace not taken with profile_memory=True)")
        writer.write_table("processes", [processes_table(states)])
        writer.write_table("threads", [threads_table(states)])
        if any(st.metadata.get("deviceProperties") for st in states):
            writer.write_table("devices", [devices_table(states)])
        else:
            writer.not_captured("devices", "trace has no deviceProperties")
        for t in ("nvtx_marks", "osrt_api", "cpu_thread_state", "gpu_metrics"):
            writer.not_captured(t, "not recorded by the PyTorch profiler")
    finally:
        hashing.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(parts.root, ignore_errors=True)
    ranks = [(st.metadata.get("distributedInfo") or {}).get("rank") for st in states]
    writer.manifest["sources"][NAME] = {
        "format": "kineto-json",
        "clock": "start_ns/end_ns are Unix epoch ns: ts (us) x 1000 + baseTimeNanoseconds when the "
                 "trace has it (Kineto's ts are then relative to it), else ts x 1000",
        "files": [source_entry(st) for st in states],
        "invalid_kernels": sum(st.invalid_kernels for st in states),
        "ranks": [jsonable(r) for r in ranks],
        "world_size": jsonable(next((w for st in states
                                     if (w := (st.metadata.get("distributedInfo") or {}).get("world_size"))),
                                    None)),
    }
