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

    def describe(self, table: str) -> str:
        src = self.sql.replace("t.", f"{table}.") if self.needs else self.sql
        if self.decode == "string":
            return f"{src} -> StringIds"
        if self.decode.startswith("enum:"):
            return f"{src} decoded by {self.decode[5:]}"
        return src


def col(name: str, decode: str = "raw") -> Expr:
    return Expr(f"t.{name}", (name,), decode)


def pid(column: str) -> Expr:
    return Expr(PID.format(col=column), (column,))


def tid(column: str) -> Expr:
    return Expr(TID.format(col=column), (column,))


def duration() -> Expr:
    return Expr("t.\"end\" - t.start", ("start", "end"))


def null() -> Expr:
    return Expr("NULL")


@dataclass(frozen=True)
class TableMap:
    table: str
    sources: tuple[str, ...]
    columns: dict[str, tuple[Expr, ...]] = field(default_factory=dict)
    where: str = ""


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

TABLE_MAPS: dict[str, TableMap] = {
    m.table: m for m in (KERNELS, CUDA_API, MEMCPY, MEMSET, CUDA_SYNC, PROCESSES, THREADS)
}
