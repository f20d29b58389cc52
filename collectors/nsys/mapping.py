"""How each Nsight Systems export schema version names the data of each tracekit table — as data.

A :class:`TableMap` lists candidate export tables (the first one present is read) and, for every
tracekit column, alternatives (:class:`Expr`) tried in order: the first whose source columns all
exist in the export is used. So a column renamed between nsys versions is one more alternative
here, not an ``if version`` in code. Columns with no usable alternative are left NULL and listed
in the manifest's ``missing_columns``. ``docs/schema.md`` renders these mappings.

Decoders:
- ``raw``: the value as stored (int or float, per the schema type)
- ``string``: a StringIds ID resolved to its text (unknown IDs -> '<unknown string N>')
- ``text``: text stored inline
- ``enum:TABLE``: decoded with the export's ``TABLE`` (id -> label), or :data:`FALLBACK_ENUMS`
  for exports older than the ENUM tables
- ``lookup:NAME``: an int64 key (computed in SQL) looked up in a small per-export dictionary
  built by :mod:`tracekit.collectors.nsys` (NVTX domain and category names, GPU metric names)
- ``nvtx_style``: an NVTX eventType decoded to 'push/pop' or 'start/end'
- ``bool``: an SQL truth value (0/1) as a flag

Columns whose name starts with ``_`` are read for a structural step (:attr:`TableMap.post`) and
are not written. ``where`` clauses may name NVTX event types as ``{NvtxPushPopRange}``; the ids
come from the export's ENUM_NSYS_EVENT_TYPE (or :data:`FALLBACK_EVENT_TYPES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# globalTid / globalPid encode the process and thread IDs: pid in bits 24-47, tid in bits 0-23.
PID = "((t.{col} >> 24) & 16777215)"
TID = "(t.{col} & 16777215)"


@dataclass(frozen=True)
class Expr:
    sql: str
    needs: tuple[str, ...] = ()
    decode: str = "raw"
    doc: str = ""  # what docs/schema.md shows instead of the SQL, when set
    # The same value computed in Arrow from source columns the table reads as they are (``col``):
    # ("difference", A, B) is A - B (an overflow: the SQL, on the guarded read), ("is_null", A)
    # is 1 where A is NULL, else 0. A strict read then does not read it from SQLite (each value
    # costs the driver about 70 ns: 14 M values of the benchmark export).
    arrow: tuple[str, ...] = ()

    def describe(self, table: str) -> str:
        if self.doc:
            return self.doc
        src = self.sql.replace("t.", f"{table}.")
        if self.decode in ("string", "string_api"):
            return f"{src} -> StringIds"
        if self.decode.startswith("lookup:"):
            return f"{src} -> {LOOKUP_DOCS[self.decode[7:]]}"
        if self.decode == "nvtx_style":
            return (f"{src}: NvtxPushPopRange/NvtxtPushPopRange -> 'push/pop', "
                    "NvtxStartEndRange/NvtxtStartEndRange -> 'start/end'")
        if self.decode.startswith("enum:"):
            return f"{src} decoded by {self.decode[5:]}"
        return src


# ``needs`` entries are columns of the source table, or ``TABLE.column`` of another table.


def col(name: str, decode: str = "raw") -> Expr:
    return Expr(f"t.{name}", (name,), decode)


def pid(column: str) -> Expr:
    return Expr(PID.format(col=column), (column,))


def tid(column: str) -> Expr:
    return Expr(TID.format(col=column), (column,))


def duration() -> Expr:
    return Expr("t.\"end\" - t.start", ("start", "end"), arrow=("difference", "end", "start"))


def null() -> Expr:
    return Expr("NULL")


@dataclass(frozen=True)
class TableMap:
    """``post`` names a structural step of :mod:`tracekit.collectors.nsys` run over the decoded
    batches (in DuckDB, spilling to disk); ``computed`` documents the columns it adds."""

    table: str
    sources: tuple[str, ...]
    columns: dict[str, tuple[Expr, ...]] = field(default_factory=dict)
    where: str = ""
    post: str = ""
    computed: dict[str, str] = field(default_factory=dict)
    order_by: str = ""


def _interval() -> dict:
    return {"start_ns": (col("start"),), "end_ns": (col("end"),), "duration_ns": (duration(),)}


def _gpu_place() -> dict:
    return {
        "device_id": (col("deviceId"),),
        "context_id": (col("contextId"),),
        "stream_id": (col("streamId"),),
        "correlation_id": (col("correlationId"),),
        "pid": (pid("globalPid"),),
    }


# CUPTI enumerations, for exports that predate the ENUM_* tables (values from CUPTI's headers).
FALLBACK_ENUMS: dict[str, dict[int, str]] = {
    "ENUM_CUDA_MEMCPY_OPER": {
        0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
        4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
        8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer",
    },
    "ENUM_CUDA_MEM_KIND": {
        0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
        6: "Managed Static", 7: "Unknown",
    },
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": {
        0: "Unknown", 1: "Regular", 2: "Coop Single Device", 3: "Coop Multi Device", 4: "CBL Commandlist",
    },
    "ENUM_CUPTI_SYNC_TYPE": {
        0: "Unknown", 1: "Event sync", 2: "Stream wait event", 3: "Stream sync", 4: "Context sync",
    },
    "ENUM_NSYS_EVENT_CLASS": {0: "CUDA runtime", 1: "CUDA driver"},
}

# The memcpy kind labels above are NVIDIA's; tracekit's ``memcpy.kind`` uses the field's short forms.
COPY_KIND_SHORT = {
    "Host-to-Device": "HtoD", "Device-to-Host": "DtoH", "Host-to-Array": "HtoA",
    "Array-to-Host": "AtoH", "Array-to-Array": "AtoA", "Array-to-Device": "AtoD",
    "Device-to-Array": "DtoA", "Device-to-Device": "DtoD", "Host-to-Host": "HtoH",
    "Peer-to-Peer": "PtoP", "Unknown": "Unknown",
}

# Decoded enum labels that tracekit renames, per (table, column): the field's short forms for copy
# kinds, and 'runtime'/'driver' for the API of a CUDA call. Labels not listed are kept as decoded.
RELABEL: dict[tuple[str, str], dict[str, str]] = {
    ("memcpy", "kind"): COPY_KIND_SHORT,
    ("cuda_api", "api"): {"CUDA runtime": "runtime", "CUDA driver": "driver"},
}

KERNELS = TableMap(
    "kernels",
    ("CUPTI_ACTIVITY_KIND_KERNEL",),
    {
        **_interval(),
        **_gpu_place(),
        "name": (col("demangledName", "string"), col("shortName", "string")),
        "short_name": (col("shortName", "string"),),
        "mangled_name": (col("mangledName", "string"),),
        "grid_x": (col("gridX"),), "grid_y": (col("gridY"),), "grid_z": (col("gridZ"),),
        "block_x": (col("blockX"),), "block_y": (col("blockY"),), "block_z": (col("blockZ"),),
        "registers_per_thread": (col("registersPerThread"),),
        "static_shared_memory_bytes": (col("staticSharedMemory"),),
        "dynamic_shared_memory_bytes": (col("dynamicSharedMemory"),),
        "local_memory_per_thread_bytes": (col("localMemoryPerThread"),),
        "launch_type": (col("launchType", "enum:ENUM_CUDA_KERNEL_LAUNCH_TYPE"),),
        "grid_id": (col("gridId"),),
        "graph_id": (col("graphId"),),
        "graph_node_id": (Expr("NULLIF(t.graphNodeId, 0)", ("graphNodeId",)),),
    },
)

CUDA_API = TableMap(
    "cuda_api",
    ("CUPTI_ACTIVITY_KIND_RUNTIME",),
    {
        **_interval(),
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "correlation_id": (col("correlationId"),),
        # CUPTI's versioned entry names (cudaLaunchKernel_v7000) lose the _vNNNN suffix, as in nsys stats
        "name": (col("nameId", "string_api"),),
        "api": (col("eventClass", "enum:ENUM_NSYS_EVENT_CLASS"),),
        "return_value": (col("returnValue"),),
    },
)

MEMCPY = TableMap(
    "memcpy",
    ("CUPTI_ACTIVITY_KIND_MEMCPY",),
    {
        **_interval(),
        **_gpu_place(),
        "bytes": (col("bytes"),),
        "kind": (col("copyKind", "enum:ENUM_CUDA_MEMCPY_OPER"),),
        "src_kind": (col("srcKind", "enum:ENUM_CUDA_MEM_KIND"),),
        "dst_kind": (col("dstKind", "enum:ENUM_CUDA_MEM_KIND"),),
        "src_device_id": (col("srcDeviceId"),),
        "dst_device_id": (col("dstDeviceId"),),
        "graph_node_id": (Expr("NULLIF(t.graphNodeId, 0)", ("graphNodeId",)),),
    },
)

MEMSET = TableMap(
    "memset",
    ("CUPTI_ACTIVITY_KIND_MEMSET",),
    {
        **_interval(),
        **_gpu_place(),
        "bytes": (col("bytes"),),
        "value": (col("value"),),
        "mem_kind": (col("memKind", "enum:ENUM_CUDA_MEM_KIND"),),
        "graph_node_id": (Expr("NULLIF(t.graphNodeId, 0)", ("graphNodeId",)),),
    },
)

CUDA_SYNC = TableMap(
    "cuda_sync",
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",),
    {
        **_interval(),
        **_gpu_place(),
        "sync_type": (col("syncType", "enum:ENUM_CUPTI_SYNC_TYPE"),),
        "event_id": (col("eventId"),),
    },
)

PROCESSES = TableMap(
    "processes",
    ("PROCESSES",),
    {"pid": (col("pid"),), "name": (col("name", "text"),)},
)

THREADS = TableMap(
    "threads",
    ("ThreadNames",),
    {
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "name": (col("nameId", "string"),),
        "priority": (col("priority"),),
    },
)

# NVTX event types (ENUM_NSYS_EVENT_TYPE.name -> id) for exports without that table; values as
# nsys 2020.5-2026.2 number them (checked against the fixtures' ENUM_NSYS_EVENT_TYPE).
FALLBACK_EVENT_TYPES: dict[str, int] = {
    "NvtxCategory": 33, "NvtxMark": 34, "NvtxPushPopRange": 59, "NvtxStartEndRange": 60,
    "NvtxtCategory": 64, "NvtxtMark": 65, "NvtxtPushPopRange": 70, "NvtxtStartEndRange": 71,
    "NvtxDomainCreate": 75,
}
NVTX_RANGE_TYPES = ("NvtxPushPopRange", "NvtxStartEndRange", "NvtxtPushPopRange", "NvtxtStartEndRange")
NVTX_PUSHPOP_TYPES = ("NvtxPushPopRange", "NvtxtPushPopRange")
NVTX_MARK_TYPES = ("NvtxMark", "NvtxtMark")
NVTX_CATEGORY_TYPES = ("NvtxCategory", "NvtxtCategory")
NVTX_DOMAIN_TYPES = ("NvtxDomainCreate",)

LOOKUP_DOCS = {
    "nvtx_domain": "name of the domain from the NvtxDomainCreate row (eventType 75) of the same "
                   "process and domainId; '' for domainId 0 (default domain)",
    "nvtx_category": "name from the NvtxCategory row (eventType 33) of the same process, domain and "
                     "category; else the number; null for category 0",
    "gpu_metric": "TARGET_INFO_GPU_METRICS.metricName of the same typeId and metricId",
}

# Registered string (textId -> StringIds) else the inline text; '' when the event has neither.
NVTX_TEXT = Expr(
    "CASE WHEN t.textId IS NOT NULL THEN coalesce((SELECT s.value FROM StringIds AS s WHERE s.id = t.textId), "
    "'<unknown string ' || t.textId || '>') ELSE coalesce(t.text, '') END",
    ("textId", "text"), "text",
    "NVTX_EVENTS.textId -> StringIds (unknown ID -> '<unknown string N>'), else NVTX_EVENTS.text, else ''")
NVTX_TEXT_OLD = Expr("coalesce(t.text, '')", ("text",), "text")
PID_BITS = "((t.globalTid >> 24) & 16777215)"
NVTX_DOMAIN_KEY = Expr(f"({PID_BITS} << 32) | (coalesce(t.domainId, 0) & 4294967295)",
                       ("globalTid", "domainId"), "lookup:nvtx_domain",
                       "NVTX_EVENTS.domainId -> name (text or textId) of the NvtxDomainCreate row (eventType 75) "
                       "of the same process; '' for domainId 0; '<unknown domain N>' when no such row")
NVTX_CATEGORY_KEY = Expr(
    f"CASE WHEN coalesce(t.category, 0) = 0 THEN NULL ELSE ({PID_BITS} << 40) | "
    "((coalesce(t.domainId, 0) & 255) << 32) | (t.category & 4294967295) END",
    ("globalTid", "domainId", "category"), "lookup:nvtx_category",
    "NVTX_EVENTS.category -> name of the NvtxCategory row (eventType 33) of the same process, domain "
    "and category; else the number; null for category 0 or NULL")


def _in(names: tuple[str, ...]) -> str:
    return "t.eventType IN (" + ", ".join("{" + n + "}" for n in names) + ")"


NVTX_RANGES = TableMap(
    "nvtx_ranges",
    ("NVTX_EVENTS",),
    {
        "start_ns": (col("start"),),
        "end_ns": (col("end"),),
        "duration_ns": (duration(),),
        "is_open": (Expr('t."end" IS NULL', ("end",), "bool", arrow=("is_null", "end")),),
        "range_id": (Expr("t.rowid"),),
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "end_tid": (tid("endGlobalTid"),),
        "style": (col("eventType", "nvtx_style"),),
        "domain": (NVTX_DOMAIN_KEY,),
        "name": (NVTX_TEXT, NVTX_TEXT_OLD),
        "category": (NVTX_CATEGORY_KEY,),
        "color": (col("color"),),
    },
    where=_in(NVTX_RANGE_TYPES),
    post="nvtx_ranges_post",
    computed={
        "depth": "computed: for push/pop ranges, the number of push/pop ranges of the same thread "
                 "open at its start (ordered by start, longer first, then rowid; open ranges never end)",
        "parent_range_id": "computed: the latest-starting push/pop range of the same thread at depth - 1 "
                           "before this one (DuckDB ASOF join)",
        "input_dims": "parsed from PyTorch's NVTX op message ', sizes = [[4, 8], [8, 16]]' "
                      "(emit_nvtx(record_shapes=True); collectors/nsys/pytorch_nvtx.py)",
        "op_id": "parsed from PyTorch's NVTX op message ', op_id = N'",
        "sequence_number": "parsed from PyTorch's NVTX op message ', seq = N'",
    },
)

NVTX_MARKS = TableMap(
    "nvtx_marks",
    ("NVTX_EVENTS",),
    {
        "timestamp_ns": (col("start"),),
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "domain": (NVTX_DOMAIN_KEY,),
        "name": (NVTX_TEXT, NVTX_TEXT_OLD),
        "category": (NVTX_CATEGORY_KEY,),
        "color": (col("color"),),
    },
    where=_in(NVTX_MARK_TYPES),
)

OSRT_API = TableMap(
    "osrt_api",
    ("OSRT_API",),
    {
        **_interval(),
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "name": (col("nameId", "string"),),
        "nesting_level": (col("nestingLevel"),),
        "return_value": (col("returnValue"),),
    },
    # event class 27 = OS runtime call; 31/32 are nsys's zero-length "profiling started/finished"
    # marker rows, which nsys stats' osrtsum leaves out too
    where="t.eventClass = 27",
)

CPU_THREAD_STATE = TableMap(
    "cpu_thread_state",
    ("SCHED_EVENTS",),
    {
        "start_ns": (col("start"),),
        "cpu": (col("cpu"),),
        "pid": (pid("globalTid"),),
        "tid": (tid("globalTid"),),
        "out_state": (col("threadState", "enum:ENUM_SAMPLING_THREAD_STATE"),),
        "block_reason": (col("threadBlock", "enum:ENUM_SCHEDULING_THREAD_BLOCK"),),
        "_is_in": (Expr("t.isSchedIn <> 0", ("isSchedIn",)),),
        "_seq": (Expr("t.rowid"),),
    },
    post="sched_intervals",
    computed={
        "end_ns": "computed: start of the thread's next SCHED_EVENTS row (ordered by start, rowid); "
                  "the last event of the capture when the thread has none",
        "duration_ns": "computed: end_ns - start_ns",
        "is_clipped": "computed: true when the thread's next event is not a switch-out (isSchedIn = 0)",
        "out_state": "threadState of the switch-out row, decoded by ENUM_SAMPLING_THREAD_STATE",
        "block_reason": "threadBlock of the switch-out row, decoded by ENUM_SCHEDULING_THREAD_BLOCK",
    },
)

GPU_METRICS = TableMap(
    "gpu_metrics",
    ("GPU_METRICS",),
    {
        "timestamp_ns": (col("timestamp"),),
        "gpu_id": (Expr("t.typeId & 255", ("typeId",)),),
        "device_id": (Expr("t.typeId & 255", ("typeId",), "lookup:cuda_device",
                           "GPU_METRICS.typeId & 255 (GPU id) -> TARGET_INFO_CUDA_DEVICE.cudaId, else "
                           "TARGET_INFO_GPU.cuDevice, else the GPU id"),),
        "metric_name": (Expr("(t.typeId << 32) | (t.metricId & 4294967295)", ("typeId", "metricId"),
                             "lookup:gpu_metric", "TARGET_INFO_GPU_METRICS.metricName of the row with the "
                             "same typeId and metricId ('<unknown gpu_metric N>' when none)"),),
        "value": (col("value"),),
    },
)
LOOKUP_DOCS["cuda_device"] = "the CUDA device of that GPU id (see devices.gpu_id)"

# TARGET_INFO_CUDA_GPU (exports before ~2021.3) records memory in MiB in the oldest versions
# (values below 2^20 can only be MiB), the bandwidth in kB/s and the clock in kHz.
_OLD_MEM = ("CASE WHEN t.globalMemorySize < 1048576 THEN t.globalMemorySize * 1048576 "
            "ELSE t.globalMemorySize END")

DEVICES = TableMap(
    "devices",
    ("TARGET_INFO_CUDA_GPU", "TARGET_INFO_GPU"),
    {
        # TARGET_INFO_CUDA_GPU: one row per (process, device); TARGET_INFO_GPU: one per GPU
        "device_id": (
            col("deviceId"),
            Expr("coalesce((SELECT min(c.cudaId) FROM TARGET_INFO_CUDA_DEVICE AS c WHERE c.gpuId = t.id), "
                 "t.cuDevice, t.id)",
                 ("id", "cuDevice", "TARGET_INFO_CUDA_DEVICE.gpuId", "TARGET_INFO_CUDA_DEVICE.cudaId")),
            Expr("coalesce(t.cuDevice, t.id)", ("id", "cuDevice")),
            col("id"),
        ),
        "gpu_id": (col("id"), col("deviceId")),
        "name": (col("name", "text"),),
        "uuid": (col("uuid", "text"),),
        "pci_bus_id": (col("pciBusId", "text"), col("busLocation", "text")),
        "compute_capability": (
            Expr("t.computeCapabilityMajor || '.' || t.computeCapabilityMinor",
                 ("computeCapabilityMajor", "computeCapabilityMinor"), "text"),
            Expr("t.computeMajor || '.' || t.computeMinor", ("computeMajor", "computeMinor"), "text"),
        ),
        "sm_count": (col("numMultiprocessors"), col("smCount")),
        "global_memory_bytes": (Expr(_OLD_MEM, ("globalMemorySize",)), col("totalMemory")),
        "l2_cache_bytes": (col("l2CacheSize"),),
        "memory_bandwidth_bytes_per_s": (
            Expr("NULLIF(t.globalMemoryBandwidth, 0) * 1000.0", ("globalMemoryBandwidth",)),
            Expr("NULLIF(t.memoryBandwidth, 0) * 1.0", ("memoryBandwidth",)),
        ),
        "core_clock_hz": (
            Expr("NULLIF(t.coreClockRate, 0) * 1000.0", ("coreClockRate",)),
            Expr("NULLIF(t.clockRate, 0) * 1.0", ("clockRate",)),
        ),
        "max_warps_per_sm": (col("maxWarpsPerMultiprocessor"), col("maxWarpsPerSm")),
        "threads_per_warp": (col("numThreadsPerWarp"), col("threadsPerWarp")),
    },
    post="one_row_per_device",
    computed={},
)

# memory_events from CUDA_GPU_MEMORY_USAGE_EVENTS: reports recorded with `nsys profile
# --cuda-memory-usage=true` (CUDA tracing on): every device memory allocation and free CUPTI sees
# in the process (cudaMalloc, cudaMallocAsync, cuMemAlloc ... of every library: PyTorch's caching
# allocator, NCCL, cuBLAS). Columns used: start, globalPid, deviceId, address, bytes, memKind
# (ENUM_CUDA_MEM_KIND), memoryOperationType (ENUM_CUDA_DEV_MEM_EVENT_OPER: 0 Allocation,
# 1 Deallocation). No totals: the memory queries accumulate bytes. Host memory allocated through
# CUDA (Pageable, Pinned) is device_type 'cuda_host', device_id -1, so no GPU total counts it.
_HOST_KINDS = "(0, 1)"  # ENUM_CUDA_MEM_KIND Pageable, Pinned: host memory

MEMORY_EVENTS = TableMap(
    "memory_events",
    ("CUDA_GPU_MEMORY_USAGE_EVENTS",),
    {
        "timestamp_ns": (col("start"),),
        "pid": (pid("globalPid"),),
        "device_type": (Expr(f"CASE WHEN t.memKind IN {_HOST_KINDS} THEN 'cuda_host' ELSE 'cuda' END",
                             ("memKind",), "text",
                             "'cuda_host' for memKind Pageable/Pinned, else 'cuda'"),
                        Expr("'cuda'", (), "text")),
        "device_id": (Expr(f"CASE WHEN t.memKind IN {_HOST_KINDS} THEN -1 ELSE t.deviceId END",
                           ("memKind", "deviceId"), doc="deviceId (-1 for host memory kinds)"),
                      col("deviceId")),
        "action": (Expr("CASE t.memoryOperationType WHEN 0 THEN 'alloc' ELSE 'free' END",
                        ("memoryOperationType",), "text",
                        "memoryOperationType: 0 (Allocation) -> 'alloc', 1 (Deallocation) -> 'free'"),),
        "bytes": (col("bytes"),),
        "address": (col("address"),),
        "memory_kind": (col("memKind", "enum:ENUM_CUDA_MEM_KIND"),),
        "source": (Expr("'nsys'", (), "text"),),
        "seq": (Expr("t.rowid", (), doc="rowid of the CUDA_GPU_MEMORY_USAGE_EVENTS row"),),
    },
    where="t.memoryOperationType IN (0, 1)",
)


TABLE_MAPS: dict[str, TableMap] = {
    m.table: m for m in (KERNELS, CUDA_API, MEMCPY, MEMSET, CUDA_SYNC, NVTX_RANGES, NVTX_MARKS, OSRT_API,
                         PROCESSES, THREADS, DEVICES, CPU_THREAD_STATE, GPU_METRICS, MEMORY_EVENTS)
}

