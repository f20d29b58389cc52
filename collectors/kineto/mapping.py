"""Kineto collector, the mapping as data: event categories -> tables and domains, the column
types of the temporary parts, and the small per-event converters. Used by
:mod:`tracekit.collectors.kineto` (the pass over the events) and
:mod:`tracekit.collectors.kineto.finish` (the fix-ups at the end)."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tracekit.errors import InputError
from tracekit.schema import step_ranges

# Rows per table buffered in Python lists before they go to a Parquet part (16,384 rather than
# 65,536: a lower peak RSS at the same speed, docs/performance-history.md), and the DuckDB memory limit and
# threads of the end-of-trace sweep (nesting, flows; DuckDB spills to the run folder beyond the
# limit). 48 MB made that sweep fail now and then with out-of-memory (operators that cannot spill);
# memory DuckDB needs per thread is why the threads are capped.
CHUNK_ROWS = 16384
DUCKDB_MEMORY_LIMIT = "256MB"
DUCKDB_THREADS = 2

# Domains of nvtx_ranges rows made from PyTorch events (category -> domain).
ANNOTATION_DOMAINS = {
    "cpu_op": "pytorch.cpu_op",
    "user_annotation": "pytorch.user_annotation",
    "gpu_user_annotation": "pytorch.gpu_user_annotation",
    "python_function": "pytorch.python_function",
}
TRACEKIT_DOMAIN = "tracekit"
# tracekit's runners name their record_function ranges exactly like their NVTX ranges (domain
# `tracekit`, convention in tracekit.schema.step_ranges): `step N` / `step N (warmup)` per step,
# `data`, `forward`, `backward`, `optimizer`, `comm ...`. A user_annotation goes to domain
# `tracekit` when its trace has at least one user_annotation matching TRACEKIT_STEP and its own
# name matches TRACEKIT_STEP or TRACEKIT_PHASE (see docs/kineto.md).
TRACEKIT_STEP = step_ranges.STEP_SQL_REGEX
TRACEKIT_PHASE = "^(" + "|".join(step_ranges.PHASES) + ")$|^comm( .*)?$"

API_CATEGORIES = {"cuda_runtime": "runtime", "cuda_driver": "driver"}
SKIPPED_CATEGORIES = {"Trace", "ac2g", "fwdbwd"}
SYNC_TYPES = {
    "Stream Sync": "Stream synchronize",
    "Event Sync": "Event synchronize",
    "Context Sync": "Context synchronize",
    "Stream Wait Event": "Stream wait event",
}
MEMCPY_NAME = re.compile(r"^Memcpy\s+(\w+)\s*(?:\((\w+)\s*->\s*(\w+)\))?")
MEMSET_NAME = re.compile(r"^Memset\s*\((\w+)\)")
THREAD_NAME = re.compile(r"^thread \d+ \((.*)\)$")

i32, i64, s, b = pa.int32(), pa.int64(), pa.string(), pa.bool_()

# column name -> Arrow type of the temporary parts (before the fix-ups).
PART_COLUMNS = {
    "kernels": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
                "context_id": i64, "stream_id": i64, "correlation_id": i64, "name": s,
                "grid_x": i32, "grid_y": i32, "grid_z": i32, "block_x": i32, "block_y": i32,
                "block_z": i32, "registers_per_thread": i32},
    "cuda_api": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "pid": i64, "tid": i64,
                 "correlation_id": i64, "name": s, "api": s},
    "memcpy": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
               "context_id": i64, "stream_id": i64, "correlation_id": i64, "bytes": i64,
               "kind": s, "src_kind": s, "dst_kind": s, "src_device_id": i32, "dst_device_id": i32,
               "recorded_bytes_per_s": pa.float64()},
    "memset": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
               "context_id": i64, "stream_id": i64, "correlation_id": i64, "bytes": i64,
               "mem_kind": s},
    "cuda_sync": {"start_ns": i64, "end_ns": i64, "duration_ns": i64, "device_id": i32,
                  "context_id": i64, "stream_id": i64, "correlation_id": i64, "sync_type": s},
    "nvtx_ranges": {"seq": i64, "start_ns": i64, "end_ns": i64, "duration_ns": i64, "pid": i64,
                    "tid": i64, "style": s, "domain": s, "name": s, "category": s,
                    "input_dims": pa.list_(pa.list_(i64)), "input_types": pa.list_(s),
                    "concrete_inputs": pa.list_(s), "op_id": i64, "sequence_number": i64},
}
# ac2g flow ends: not a run-folder table; used for the manifest's flow counts and to find the
# correlation ID of a GPU activity whose args lack it (the flow end at the same track and time).
FLOW_COLUMNS = {"id": i64, "is_start": b, "pid": i64, "tid": i64, "ts_ns": i64}
# Communication calls with their sizes, for the collectives table (finish.collectives_table):
# one row per NCCL kernel (kernel=true: its args, when PyTorch >= 2.1 copied the collective's
# arguments onto it, and its External id) and per record_param_comms CPU operator (kernel=false;
# linked to the NCCL kernel with the same External id at the end). seq: order within the file;
# pg_seq: PyTorch's 'Seq' argument, the collective's sequence number in its process group;
# peer_rank: a send's 'Dst Rank', a recv's 'Src Rank' (PyTorch >= 2.4 writes them, as global ranks).
COMM_COLUMNS = {"seq": i64, "kernel": b, "external_id": i64, "start_ns": i64, "device_id": i32,
                "stream_id": i64, "correlation_id": i64, "collective": s, "dtype": s,
                "in_elements": i64, "out_elements": i64, "group_size": i32, "process_group": s,
                "pg_seq": i64, "peer_rank": i32}
# [memory] / [OutOfMemory] events, for memory_events (collectors/kineto/memory.py).
MEMORY_PART = "_memory"
MEMORY_COLUMNS = {"seq": i64, "timestamp_ns": i64, "pid": i64, "tid": i64, "device_type": s,
                  "device_id": i32, "action": s, "bytes": i64, "address": i64,
                  "total_allocated_bytes": i64, "total_reserved_bytes": i64}
ALL_PART_COLUMNS = {**PART_COLUMNS, "_flows": FLOW_COLUMNS, "_comms": COMM_COLUMNS,
                    MEMORY_PART: MEMORY_COLUMNS}
# An NCCL (or RCCL) kernel: ncclKernel_* (NCCL < 2.19) or ncclDevKernel_* (NCCL >= 2.19), as
# tk_is_nccl in queries/_macros.sql.
NCCL_KERNEL = re.compile(r"(^|[^A-Za-z0-9_])nccl(Dev)?Kernel_")
COMM_OP = "record_param_comms"
# Bytes per element of the dtype names Kineto writes ('dtype' arg: c10::ScalarType names, matched
# case-insensitively; torch dtype spellings accepted too). Packed sub-byte types (QUInt4x2,
# QUInt2x4, Bits1x8, ...) and unknown names get no size: the collective is kept, unsized.
DTYPE_BYTES = {
    "bool": 1, "byte": 1, "uint8": 1, "char": 1, "int8": 1, "qint8": 1, "quint8": 1, "bits8": 1,
    "float8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2fnuz": 1, "float8_e4m3fnuz": 1,
    "float8_e8m0fnu": 1,
    "short": 2, "int16": 2, "uint16": 2, "half": 2, "float16": 2, "bfloat16": 2, "bits16": 2,
    "int": 4, "int32": 4, "uint32": 4, "float": 4, "float32": 4, "qint32": 4, "complexhalf": 4,
    "long": 8, "int64": 8, "uint64": 8, "double": 8, "float64": 8, "complexfloat": 8,
    "complexdouble": 16,
}
GPU_TABLES = ("kernels", "memcpy", "memset", "cuda_sync")


def to_int(v):
    t = type(v)
    if t is int:
        return v
    if v is None or t is bool:
        return None
    if t is Decimal:
        return int(v) if v == v.to_integral_value() else None
    if t is str:
        v = v.strip()
        try:
            return int(v, 16) if v[:2].lower() == "0x" else int(v)
        except ValueError:
            return None
    if t is float:
        return int(v) if v.is_integer() else None
    return None


I64_LIMIT = 2**63
MAX_RANK = 2**31 - 1  # processes.rank is int32


def trace_rank(metadata: dict) -> int | None:
    """``distributedInfo.rank`` as processes.rank: a whole number 0..MAX_RANK, else None
    (2^63-1, -1, true: no rank; the collector warns)."""
    rank = to_int((metadata.get("distributedInfo") or {}).get("rank"))
    return rank if rank is not None and 0 <= rank <= MAX_RANK else None


def input_dims(v):
    """A cpu_op's args['Input Dims'] as a list of shapes (one per argument): a flat list of
    integers is a shape; anything else (a TensorList written as nested lists, a value that is
    not an integer or does not fit int64) is None; None when v is not a list."""
    if type(v) is not list:
        return None
    out = []
    for x in v:
        shape = None
        if type(x) is list:
            shape = []
            for y in x:
                y = y if type(y) is int else to_int(y)
                if y is None or not -I64_LIMIT <= y < I64_LIMIT:
                    shape = None
                    break
                shape.append(y)
        out.append(shape)
    return out


def text_list(v):
    """args['Input type'] / ['Concrete Inputs'] as a list of text (non-text items as JSON text);
    None when v is not a list."""
    if type(v) is not list:
        return None
    return [x if type(x) is str else (None if x is None else json.dumps(x, default=str)) for x in v]


def to_float(v):
    """A number (or numeric text) as a float; None otherwise."""
    if type(v) in (int, float) or type(v) is Decimal:
        return float(v)
    if type(v) is str:
        try:
            return float(v)
        except ValueError:
            return None
    return None


def dim(v, i):
    if type(v) is list and len(v) > i:
        return to_int(v[i])
    return None


class Columns:
    """Column lists of one temporary part of one table."""

    __slots__ = ("table", "cols", "n")

    def __init__(self, table):
        self.table = table
        self.cols = {c: [] for c in ALL_PART_COLUMNS[table]}
        self.n = 0


class FileState:
    """What one trace file contributes besides its events: metadata events, counters."""

    def __init__(self, index: int, path: Path):
        self.index = index
        self.path = path
        self.process_names: dict[int, str] = {}
        self.process_labels: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.cpu_threads: set[tuple[int, int]] = set()
        self.api_pids: set[int] = set()
        self.copy_sizes: dict[int, int] = {}  # correlation -> bytes, from API args (ROCm)
        self.comm_rows = 0  # rows of the _comms part (NCCL kernels, record_param_comms)
        self.comm_counts: dict[str, int] = {}  # manifest: where the collectives rows came from
        self.flow_counts: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.skipped: dict[str, int] = {}
        self.invalid_kernels = 0
        self.invalid_kernel_names: dict[str, int] = {}
        self.bad_timestamps = 0
        self.bad_devices = 0  # GPU events whose args.device is not a number (device_id NULL)
        self.nontext_cats: set[str] = set()  # categories that were not text (as JSON text)
        self.strings_truncated = 0  # text values cut at guard.MAX_STRING_BYTES
        self.surrogates_replaced = 0  # lone surrogate escapes made U+FFFD (kineto/surrogates.py)
        self.events_seen = 0
        self.has_tracekit_step = False
        self.nvtx_rows = 0
        self.memory_rows = 0  # [memory] / [OutOfMemory] events kept (collectors/kineto/memory.py)
        self.metadata: dict = {}
        self.metadata_complete = True


def _misfit(cols: Columns, types: dict, exc: BaseException) -> str:
    """The message for a batch Arrow refused: the column and the first value that does not fit
    its type (a timestamp or ID beyond int64)."""
    for c, v in cols.cols.items():
        try:
            pa.array(v, type=types[c])
        except (pa.ArrowInvalid, OverflowError):
            bad = next((x for x in v if x is not None and _fails(x, types[c])), None)
            shown = str(bad)[:40] if bad is not None else "?"
            return (f"a value of {cols.table}.{c} does not fit its type {types[c]} ({shown}); "
                    "the trace holds a number out of range")
    return f"a value does not fit table {cols.table} ({exc})"


def _fails(x, t) -> bool:
    try:
        pa.array([x], type=t)
    except (pa.ArrowInvalid, OverflowError):
        return True
    return False


class Parts:
    """Temporary Parquet parts under the run folder being written, per table and file."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()
        self.files: dict[str, list[tuple[int, Path]]] = {t: [] for t in ALL_PART_COLUMNS}
        self.n = 0
        self.current: Path | None = None  # the trace being read, for error messages

    def flush(self, cols: Columns, file_index: int):
        if not cols.n:
            return
        types = ALL_PART_COLUMNS[cols.table]
        try:
            batch = pa.RecordBatch.from_arrays(
                [pa.array(v, type=types[c]) for c, v in cols.cols.items()], names=list(types))
        except (pa.ArrowInvalid, OverflowError) as exc:
            raise InputError(_misfit(cols, types, exc), path=self.current) from None
        self.n += 1
        p = self.root / f"{cols.table}-{file_index}-{self.n}.parquet"
        pq.write_table(pa.Table.from_batches([batch]), p, compression="lz4")
        self.files[cols.table].append((file_index, p))
        for v in cols.cols.values():
            v.clear()
        cols.n = 0

# Kineto event args -> run-folder columns, as data: {what is read: the args key}. The collector's
# pass over the events (collectors/kineto/__init__.py) looks every args key up here; the keys are
# those PyTorch's profiler (Kineto/CUPTI, and roctracer on ROCm) writes. column_sources() (docs/
# schema.md) says for each column which of these keys it reads; tests/test_kineto.py checks that
# every key here is named there. A "_alt" entry is read when its first key is absent.
ARG = {
    # GPU activities (cat kernel, gpu_memcpy, gpu_memset, cuda_sync): kernels, memcpy, memset,
    # cuda_sync columns device_id (else the event's pid), context_id, stream_id (else the
    # event's tid), correlation_id; cuda_api.correlation_id
    "device_id": "device",
    "context_id": "context",
    "stream_id": "stream",
    "correlation_id": "correlation",
    # kernels: grid_x/y/z and block_x/y/z from the 3-element lists, registers_per_thread
    "grid": "grid",
    "block": "block",
    "registers_per_thread": "registers per thread",
    # memcpy and memset bytes; ROCm's copy API calls carry the size instead (matched by correlation)
    "bytes": "bytes",
    "api_copy_bytes": "size",
    # memcpy: kind (when text, else from the event name), peer devices, recorded bandwidth (GB/s)
    "memcpy_kind": "kind",
    "src_device_id": "fromDevice",
    "src_device_id_alt": "src device",
    "dst_device_id": "toDevice",
    "dst_device_id_alt": "dst device",
    "recorded_bandwidth_gb_s": "memory bandwidth (GB/s)",
    # cuda_sync.sync_type (else the event name), decoded by SYNC_TYPES
    "sync_type": "cuda_sync_kind",
    # nvtx_ranges of cpu_op events (record_shapes=True for the inputs)
    "input_dims": "Input Dims",
    "input_types": "Input type",
    "concrete_inputs": "Concrete Inputs",
    "op_id": "Record function id",
    "sequence_number": "Sequence number",
    # collectives: from NCCL kernels or record_param_comms operators (matched by External id)
    "collective": "Collective name",
    "dtype": "dtype",
    "in_elements": "In msg nelems",
    "out_elements": "Out msg nelems",
    "group_size": "Group size",
    "process_group": "Process Group Name",
    "process_group_alt": "Process Group Description",
    "pg_seq": "Seq",
    "external_id": "External id",
}
