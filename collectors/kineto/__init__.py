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
:mod:`~tracekit.collectors.kineto.finish` (the end-of-trace fix-ups, nesting, collectives).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracekit.collectors.common import describe_input
from tracekit.collectors.kineto import memory as MEM
from tracekit.collectors.kineto import reader as R
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
    ALL_PART_COLUMNS,
    ANNOTATION_DOMAINS,
    API_CATEGORIES,
    ARG,
    CHUNK_ROWS,
    COMM_OP,
    GPU_TABLES,
    MEMCPY_NAME,
    MEMSET_NAME,
    NCCL_KERNEL,
    PART_COLUMNS,
    SYNC_TYPES,
    TRACEKIT_DOMAIN,
    TRACEKIT_PHASE,
    TRACEKIT_STEP,
    Columns,
    FileState,
    Parts,
    dim,
    input_dims,
    text_list,
    to_float,
    to_int,
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


# --- small converters (per event; kept lean) ----------------------------------------------
def _well_shaped(e: dict) -> bool:
    """name/cat are text (or absent) and args an object (or absent): true for every event
    PyTorch writes; the rest go through :func:`_reshape`."""
    n, c, a = e.get("name"), e.get("cat"), e.get("args")
    return (n is None or type(n) is str) and (c is None or type(c) is str) and \
        (a is None or type(a) is dict)


def _reshape(e) -> dict | None:
    """A damaged event made safe to read: None when it is not an object; a non-object args
    dropped; a non-text name or category written as JSON text."""
    if not isinstance(e, dict):
        return None
    e = dict(e)
    if not isinstance(e.get("args"), (dict, type(None))):
        e["args"] = None
    for k in ("name", "cat"):
        if e.get(k) is not None and not isinstance(e[k], str):
            e[k] = json.dumps(e[k], default=str)
    return e


I64_MAX, I32_MAX = 2**63 - 1, 2**31 - 1


def fit(v, hi):
    """v when it fits a signed integer column with maximum hi, else None (a damaged size is
    unknown, not a reason to reject the trace)."""
    return v if v is None or -hi - 1 <= v <= hi else None


@contextlib.contextmanager
def _gc_paused():
    """The cyclic garbage collector off while a trace streams: the parse allocates a dict per
    event, freed by reference counting (events hold no cycles), and the collections those
    allocations trigger took 14 % of the conversion time of a 174 MB trace."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_file(st: FileState, parts: Parts, progress: Progress, range_counter: list[int]) -> None:
    """One streaming pass over one trace: fill parts and ``st``."""
    path = st.path
    parts.current = path
    advance = progress.task(f"kineto {path.name[:40]:<40}", total=path.stat().st_size)
    stream = R.TraceStream(path, on_bytes=advance)
    tabs = {t: Columns(t) for t in ALL_PART_COLUMNS}
    FL = tabs["_flows"]
    CM = tabs["_comms"]
    MEMC = tabs[MEM.PART]
    K, A, MC, MS, SY, NV = (tabs[t] for t in ("kernels", "cuda_api", "memcpy", "memset", "cuda_sync", "nvtx_ranges"))
    counts = st.counts
    skipped = st.skipped
    to_ns = R.to_ns
    step_re = re.compile(TRACEKIT_STEP)
    fi = st.index

    def gpu_common(c, e, a, start, dur):
        c["start_ns"].append(start)
        c["end_ns"].append(start + dur)
        c["duration_ns"].append(dur)
        dev = a.get(ARG["device_id"])
        dev_id = to_int(dev) if dev is not None else to_int(e.get("pid"))
        if dev_id is None and dev is not None:
            st.bad_devices += 1  # "cuda:0", true, [0]: NULL, and said (_warn_dropped)
        c["device_id"].append(dev_id)
        c["context_id"].append(to_int(a.get(ARG["context_id"])))
        stream_id = a.get(ARG["stream_id"])
        c["stream_id"].append(to_int(stream_id) if stream_id is not None else to_int(e.get("tid")))
        corr = a.get(ARG["correlation_id"])
        c["correlation_id"].append(to_int(corr))

    def comm_row(kernel, a, start=None, device=None, stream=None, corr=None):
        """A communication call's sizes (args of an NCCL kernel or of record_param_comms)."""
        c = CM.cols
        c["seq"].append(st.comm_rows)
        st.comm_rows += 1
        c["kernel"].append(kernel)
        c["external_id"].append(to_int(a.get(ARG["external_id"])))
        c["start_ns"].append(start)
        c["device_id"].append(device)
        c["stream_id"].append(stream)
        c["correlation_id"].append(corr)
        coll, dtype = a.get(ARG["collective"]), a.get(ARG["dtype"])
        c["collective"].append(coll if coll is None or type(coll) is str else str(coll))
        c["dtype"].append(dtype if dtype is None or type(dtype) is str else str(dtype))
        c["in_elements"].append(fit(to_int(a.get(ARG["in_elements"])), I64_MAX))
        c["out_elements"].append(fit(to_int(a.get(ARG["out_elements"])), I64_MAX))
        c["group_size"].append(fit(to_int(a.get(ARG["group_size"])), I32_MAX))
        pg = a.get(ARG["process_group"], a.get(ARG["process_group_alt"]))
        c["process_group"].append(pg if pg is None or type(pg) is str else str(pg))
        c["pg_seq"].append(fit(to_int(a.get(ARG["pg_seq"])), I64_MAX))
        kind = coll.lower() if type(coll) is str else ""
        peer = a.get("Dst Rank") if kind == "send" else a.get("Src Rank") if kind == "recv" else None
        c["peer_rank"].append(fit(to_int(peer), I32_MAX))
        CM.n += 1
        if CM.n >= CHUNK_ROWS:
            parts.flush(CM, fi)

    for e in stream:
        if type(e) is not dict or not _well_shaped(e):
            raw_cat = e.get("cat") if type(e) is dict else None
            e = _reshape(e)
            if raw_cat is not None and not isinstance(raw_cat, str):
                st.nontext_cats.add(e["cat"])
            if e is None:
                st.skipped["<event not a JSON object>"] = st.skipped.get("<event not a JSON object>", 0) + 1
                continue
        ph = e.get("ph")
        if ph == "X":
            cat = e.get("cat")
            try:
                start = to_ns(e.get("ts"))
                dur = to_ns(e.get("dur")) or 0
            except ValueError:
                st.bad_timestamps += 1
                continue
            if start is None:
                st.bad_timestamps += 1
                continue
            a = e.get("args") or {}
            if cat == "kernel":
                name = e.get("name") or ""
                if start == 0 and dur == 0:
                    st.invalid_kernels += 1
                    st.invalid_kernel_names[name] = st.invalid_kernel_names.get(name, 0) + 1
                    continue
                c = K.cols
                gpu_common(c, e, a, start, dur)
                c["name"].append(name)
                g = a.get(ARG["grid"])
                bl = a.get(ARG["block"])
                c["grid_x"].append(dim(g, 0))
                c["grid_y"].append(dim(g, 1))
                c["grid_z"].append(dim(g, 2))
                c["block_x"].append(dim(bl, 0))
                c["block_y"].append(dim(bl, 1))
                c["block_z"].append(dim(bl, 2))
                c["registers_per_thread"].append(to_int(a.get(ARG["registers_per_thread"])))
                if ARG["collective"] in a or ("nccl" in name and NCCL_KERNEL.search(name)):
                    comm_row(True, a, start, c["device_id"][-1], c["stream_id"][-1], c["correlation_id"][-1])
                K.n += 1
                if K.n >= CHUNK_ROWS:
                    parts.flush(K, fi)
            elif cat in API_CATEGORIES:
                c = A.cols
                pid = to_int(e.get("pid"))
                c["start_ns"].append(start)
                c["end_ns"].append(start + dur)
                c["duration_ns"].append(dur)
                c["pid"].append(pid)
                c["tid"].append(to_int(e.get("tid")))
                corr = to_int(a.get(ARG["correlation_id"]))
                c["correlation_id"].append(corr)
                c["name"].append(e.get("name") or "")
                c["api"].append(API_CATEGORIES[cat])
                st.api_pids.add(pid)
                size = a.get(ARG["api_copy_bytes"]) if ARG["bytes"] not in a else a.get(ARG["bytes"])
                if size is not None and corr is not None:
                    st.copy_sizes[corr] = to_int(size)
                A.n += 1
                if A.n >= CHUNK_ROWS:
                    parts.flush(A, fi)
            elif cat == "gpu_memcpy":
                c = MC.cols
                gpu_common(c, e, a, start, dur)
                name = e.get("name") or ""
                m = MEMCPY_NAME.match(name)
                kind = k if type(k := a.get(ARG["memcpy_kind"])) is str and not k.isdigit() else None
                c["kind"].append(kind or (m.group(1) if m else "Unknown"))
                c["src_kind"].append(m.group(2) if m else None)
                c["dst_kind"].append(m.group(3) if m else None)
                c["bytes"].append(to_int(a.get(ARG["bytes"])))
                c["src_device_id"].append(to_int(a.get(ARG["src_device_id"], a.get(ARG["src_device_id_alt"]))))
                c["dst_device_id"].append(to_int(a.get(ARG["dst_device_id"], a.get(ARG["dst_device_id_alt"]))))
                bw = to_float(a.get(ARG["recorded_bandwidth_gb_s"]))
                finite = bw is not None and bw > 0 and bw == bw and bw != float("inf")
                c["recorded_bytes_per_s"].append(bw * 1e9 if finite else None)
                MC.n += 1
                if MC.n >= CHUNK_ROWS:
                    parts.flush(MC, fi)
            elif cat == "gpu_memset":
                c = MS.cols
                gpu_common(c, e, a, start, dur)
                m = MEMSET_NAME.match(e.get("name") or "")
                c["mem_kind"].append(m.group(1) if m else None)
                c["bytes"].append(to_int(a.get(ARG["bytes"])))
                MS.n += 1
                if MS.n >= CHUNK_ROWS:
                    parts.flush(MS, fi)
            elif cat == "cuda_sync":
                c = SY.cols
                gpu_common(c, e, a, start, dur)
                kind = a.get(ARG["sync_type"]) or e.get("name") or ""
                c["sync_type"].append(SYNC_TYPES.get(kind, kind))
                SY.n += 1
                if SY.n >= CHUNK_ROWS:
                    parts.flush(SY, fi)
            elif cat in ANNOTATION_DOMAINS:
                c = NV.cols
                name = e.get("name") or ""
                c["seq"].append(st.nvtx_rows)
                st.nvtx_rows += 1
                c["start_ns"].append(start)
                c["end_ns"].append(start + dur)
                c["duration_ns"].append(dur)
                c["name"].append(name)
                c["domain"].append(ANNOTATION_DOMAINS[cat])
                if cat == "cpu_op" and ARG["input_dims"] in a:
                    # operator arguments (record_shapes=True): shapes, types, scalar values
                    c["input_dims"].append(input_dims(a.get(ARG["input_dims"])))
                    c["input_types"].append(text_list(a.get(ARG["input_types"])))
                    c["concrete_inputs"].append(text_list(a.get(ARG["concrete_inputs"])))
                else:
                    c["input_dims"].append(None)
                    c["input_types"].append(None)
                    c["concrete_inputs"].append(None)
                if cat == "cpu_op":
                    c["op_id"].append(fit(to_int(a.get(ARG["op_id"])), I64_MAX))
                    c["sequence_number"].append(fit(to_int(a.get(ARG["sequence_number"])), I64_MAX))
                else:
                    c["op_id"].append(None)
                    c["sequence_number"].append(None)
                if cat == "gpu_user_annotation":
                    c["pid"].append(None)  # the host pid, filled at the end
                    c["tid"].append(None)
                    c["style"].append("start/end")
                    c["category"].append(f"device {to_int(a.get('device', e.get('pid')))} "
                                         f"stream {to_int(a.get('stream', e.get('tid')))}")
                else:
                    pid, tid = to_int(e.get("pid")), to_int(e.get("tid"))
                    c["pid"].append(pid)
                    c["tid"].append(tid)
                    c["style"].append("push/pop")
                    c["category"].append(None)
                    st.cpu_threads.add((pid, tid))
                    if cat == "user_annotation" and not st.has_tracekit_step and step_re.match(name):
                        st.has_tracekit_step = True
                    elif name == COMM_OP:
                        comm_row(False, a)
                NV.n += 1
                if NV.n >= CHUNK_ROWS:
                    parts.flush(NV, fi)
            else:
                skipped[cat] = skipped.get(cat, 0) + 1
                continue
            counts[cat] = counts.get(cat, 0) + 1
        elif ph == "M":
            _metadata_event(st, e)
        elif ph == "s" or ph == "f":
            if e.get("cat") == "ac2g":
                try:
                    ts = to_ns(e.get("ts"))
                except ValueError:
                    ts = None
                c = FL.cols
                c["id"].append(to_int(e.get("id")))
                c["is_start"].append(ph == "s")
                c["pid"].append(to_int(e.get("pid")))
                c["tid"].append(to_int(e.get("tid")))
                c["ts_ns"].append(ts)
                FL.n += 1
                if FL.n >= CHUNK_ROWS:
                    parts.flush(FL, fi)
        elif ph == "i" and e.get("name") in MEM.EVENT_ACTIONS:
            MEM.add_event(MEMC, e, st)
            if MEMC.n >= CHUNK_ROWS:
                parts.flush(MEMC, fi)
        else:
            key = f"ph={ph}"
            skipped[key] = skipped.get(key, 0) + 1
    for c in tabs.values():
        parts.flush(c, fi)
    st.metadata = stream.metadata
    st.metadata_complete = stream.metadata_complete
    st.strings_truncated = stream.guard.truncated
    st.events_seen = stream.events_seen


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


def _metadata_event(st: FileState, e: dict) -> None:
    name = e.get("name")
    a = e.get("args") or {}
    pid = to_int(e.get("pid"))
    if pid is None:
        return
    if name == "process_name":
        st.process_names[pid] = str(a.get("name", ""))
    elif name == "process_labels":
        st.process_labels[pid] = str(a.get("labels", ""))
    elif name == "thread_name":
        tid = to_int(e.get("tid"))
        if tid is not None:
            st.thread_names[(pid, tid)] = str(a.get("name", ""))


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
            with _gc_paused():
                _read_file(st, parts, progress, range_counter)
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
