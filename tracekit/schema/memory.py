"""Memory tables: allocations and frees over time, with the totals the profiler reports.

Three inputs record memory (docs/memory.md):

- PyTorch profiler traces taken with ``profile_memory=True``: one ``[memory]`` instant event per
  allocation or free made through PyTorch's allocators (CPU and each GPU), with the allocator's
  totals after it; ``[OutOfMemory]`` events for failed allocations.
- nsys exports of reports taken with ``--cuda-memory-usage=true``: ``CUDA_GPU_MEMORY_USAGE_EVENTS``,
  one row per CUDA device memory allocation or free seen by CUPTI (cudaMalloc, cudaMallocAsync,
  the driver's cuMemAlloc ... of every library in the process, PyTorch's caching allocator included).
- Allocator snapshots (``torch.cuda.memory._dump_snapshot``): the caching allocator's history of
  block allocations and frees and of the segments it took from and gave back to CUDA.

Profiler events (Kineto, nsys) go to ``memory_events``; a snapshot goes to ``allocator_events``,
the same columns, so that one run folder can hold a profiler's view and the allocator's view of
the same process (an nsys export and a snapshot taken in the same run: what CUDA gave the process
against what PyTorch's allocator holds). Totals a source does not record are NULL (never 0); the
memory queries then accumulate ``bytes`` (queries/memory/_macros.sql).
"""

from __future__ import annotations

from tracekit.schema.core import I32, I64, STR, Table
from tracekit.schema.core import Column as C

i32, i64, s = I32, I64, STR

ACTIONS = ("alloc", "free", "oom", "segment_alloc", "segment_free", "free_completed")
"""Values of ``memory_events.action``."""

SOURCES = ("kineto", "nsys", "snapshot")
"""Values of ``memory_events.source``."""

MEMORY_EVENTS = Table(
    "memory_events",
    "One row per memory allocation, free or failed allocation the input records, on the host "
    "(CPU) or a GPU, in time order per device. `bytes` is the size of the block (always >= 0); "
    "`action` says whether it was allocated or freed. A free carries the address of the block "
    "it frees; the allocation it ends is the latest earlier allocation at the same address on "
    "the same device and process (queries/memory/_macros.sql). Memory allocated before the "
    "profiler started has no allocation row; its frees have no matching allocation.",
    (
        C("timestamp_ns", i64, "ns", "When the allocation or free happened (the trace's clock, as "
          "the other timeline tables).", required=True),
        C("pid", i64, "id", "OS process ID of the process that allocated (Kineto: the event's pid; "
          "nsys: from globalPid; snapshot: NULL, the file does not say)."),
        C("tid", i64, "id", "OS thread ID that made the call (Kineto only)."),
        C("device_type", s, "enum", "'cpu' (host memory) or 'cuda' (GPU memory); other PyTorch "
          "device types by their lower-case name ('xpu', 'mps', ...).", required=True),
        C("device_id", i32, "id", "CUDA device ordinal in the process; -1 for host memory "
          "(as PyTorch writes it).", required=True),
        C("action", s, "enum", "'alloc', 'free', 'oom' (an allocation that failed: `bytes` is "
          "the request), 'segment_alloc' / 'segment_free' (snapshot: the caching allocator took "
          "memory from CUDA or gave it back), 'free_completed' (snapshot: a freed block "
          "returned to the cache once the streams using it were done; the allocated total "
          "already dropped at its 'free').", required=True),
        C("bytes", i64, "bytes", "Size of the block allocated or freed (the request, for 'oom').",
          required=True),
        C("address", i64, "id", "Address of the block (virtual address; compare for equality "
          "only). NULL for 'oom'."),
        C("stream_id", i64, "id", "CUDA stream the block belongs to (snapshot); NULL when the "
          "input does not record it (Kineto, nsys)."),
        C("total_allocated_bytes", i64, "bytes", "Bytes allocated on the device by this "
          "allocator right after the event, as the profiler reports it (Kineto 'Total "
          "Allocated'; snapshot: reconstructed from the segments at the snapshot, see "
          "docs/memory.md); NULL when not recorded (nsys)."),
        C("total_reserved_bytes", i64, "bytes", "Bytes the allocator held from the device right "
          "after the event (PyTorch's caching allocator: reserved = segments taken from CUDA, "
          "allocated or cached); Kineto 'Total Reserved' (0 for the CPU allocator, which caches "
          "nothing); snapshot: reconstructed like total_allocated_bytes; NULL for nsys."),
        C("memory_kind", s, "enum", "nsys: the memory kind (Device, Pinned, Managed, Device "
          "Static, ...), decoded from ENUM_CUDA_MEM_KIND; NULL for other sources."),
        C("frame", s, "text", "Where the allocation was made, when the input records it: the "
          "innermost Python frame of the snapshot's stack as 'file:line function', or the nsys "
          "variable name; NULL otherwise."),
        C("source", s, "enum", "Which input recorded the event: 'kineto', 'nsys' or 'snapshot'.",
          required=True),
        C("seq", i64, "count", "Order of the event in its input file (0, 1, ...): breaks ties "
          "between events with the same timestamp.", required=True),
    ),
    group="memory",
)

ALLOCATOR_EVENTS = Table(
    "allocator_events",
    "One row per event of a PyTorch CUDA caching-allocator snapshot (`torch.cuda.memory."
    "_dump_snapshot`, with `_record_memory_history` enabled): block allocations and frees, "
    "segments taken from and returned to CUDA, failed allocations. Same columns as "
    "memory_events (source 'snapshot'); pid and tid are NULL (the snapshot does not record "
    "them), timestamp_ns is the entry's time_us x 1000 on the allocator's clock (Unix epoch). Source "
    "(collectors/memsnapshot): device_traces[d][i] of the pickle: device_id = d, action from "
    "action (alloc; free_requested -> free; free_completed; segment_alloc / segment_map -> "
    "segment_alloc; segment_free / segment_unmap -> segment_free; oom), bytes = size, address = "
    "addr, stream_id = stream, frame = the innermost of frames outside torch's files; the totals "
    "are the device's segments (sum of allocated_size, total_size) minus the later changes.",
    MEMORY_EVENTS.columns,
    group="memory",
)

TABLES = (MEMORY_EVENTS, ALLOCATOR_EVENTS)
