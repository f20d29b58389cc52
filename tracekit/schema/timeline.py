"""Timeline tables: GPU activities, CPU-side API calls and annotations.

All timestamps are int64 nanoseconds on the input's own clock (nsys: the session's monotonic
clock; Kineto: the trace's clock). The manifest records the session start in UTC so absolute times
can be recovered. ``end_ns - start_ns == duration_ns`` in every row where both ends are known.
"""

from __future__ import annotations

from tracekit.schema.core import BOOL, F64, I8, I16, I32, I64, STR, Table, host_thread, launch_dims, list_of
from tracekit.schema.core import Column as C

i8, i16, i32, i64 = I8, I16, I32, I64
f64, s, b = F64, STR, BOOL


def _interval(what: str) -> tuple[C, ...]:
    return (
        C("start_ns", i64, "ns", f"Start of the {what}.", required=True),
        C("end_ns", i64, "ns", f"End of the {what}.", required=True),
        C("duration_ns", i64, "ns", "end_ns - start_ns. Rows with a zero or negative duration "
          "are kept and counted in the manifest (nonpositive_duration_rows); the nsys-stats-style "
          "summaries include them, as nsys stats does; interval metrics (busy time, idle gaps) "
          "treat them as empty intervals."),
    )


def _gpu_place() -> tuple[C, ...]:
    return (
        C("device_id", i32, "id", "CUDA device ordinal the activity ran on (as CUPTI numbers "
          "devices in the profiled process)."),
        C("context_id", i64, "id", "CUDA context ID."),
        C("stream_id", i64, "id", "CUDA stream ID. Unique only together with device_id (and "
          "pid): the same stream number on two devices is two streams."),
        C("correlation_id", i64, "id", "CUPTI correlation ID linking the activity to the API call "
          "that launched it (cuda_api.correlation_id, same pid)."),
        C("pid", i64, "id", "OS process ID of the process that issued the work."),
    )


KERNELS = Table(
    "kernels",
    "One row per CUDA kernel execution on a GPU (including kernels launched by a CUDA graph).",
    _interval("kernel execution on the GPU")
    + _gpu_place()
    + (
        C("name", s, "text", "Kernel name as `nsys stats` shows it: the demangled name "
          "(with template arguments and parameter list), or the only name the input has.",
          required=True),
        C("short_name", s, "text", "Base name without templates or parameters."),
        C("mangled_name", s, "text", "Mangled (linker) name, when the input records it."),
        *launch_dims(),
        C("registers_per_thread", i32, "count", "Registers allocated per thread."),
        C("static_shared_memory_bytes", i64, "bytes", "Static shared memory per block."),
        C("dynamic_shared_memory_bytes", i64, "bytes", "Dynamic shared memory per block."),
        C("local_memory_per_thread_bytes", i64, "bytes", "Local memory per thread."),
        C("launch_type", s, "enum", "How the kernel was launched (e.g. Regular, CooperativeSingleDevice), "
          "decoded from the input's own enumeration."),
        C("grid_id", i64, "id", "Unique grid ID assigned by CUPTI."),
        C("graph_id", i64, "id", "CUDA graph ID when the kernel ran as a graph node, else null."),
        C("graph_node_id", i64, "id", "CUDA graph node ID when launched from a graph, else null."),
    ),
)

CUDA_API = Table(
    "cuda_api",
    "One row per CUDA runtime or driver API call made by a host thread.",
    _interval("API call on the host thread")
    + (
        *host_thread(),
        C("correlation_id", i64, "id", "CUPTI correlation ID; the GPU work this call launched "
          "(kernels, memcpy, memset) carries the same value."),
        C("name", s, "text", "API function name, e.g. cudaLaunchKernel, cuLaunchKernelEx.", required=True),
        C("api", s, "enum", "Which API: 'runtime' or 'driver' (null when the input does not say)."),
        C("return_value", i64, "value", "The call's return code (0 = success)."),
    ),
)

_COPY_KINDS = "HtoD, DtoH, DtoD, HtoH, PtoP, HtoA, AtoH, AtoA, AtoD, DtoA, Unknown"

MEMCPY = Table(
    "memcpy",
    "One row per memory copy executed by a GPU copy engine (or by a kernel for PtoP).",
    _interval("copy on the GPU")
    + _gpu_place()
    + (
        C("bytes", i64, "bytes", "Bytes copied."),
        C("kind", s, "enum", f"Copy direction: {_COPY_KINDS}."),
        C("src_kind", s, "enum", "Source memory kind: Pageable, Pinned, Device, Array, Managed, ..."),
        C("dst_kind", s, "enum", "Destination memory kind, same values as src_kind."),
        C("src_device_id", i32, "id", "Source device for DtoD/PtoP copies."),
        C("dst_device_id", i32, "id", "Destination device for DtoD/PtoP copies."),
        C("graph_node_id", i64, "id", "CUDA graph node ID when launched from a graph, else null."),
        C("recorded_bytes_per_s", f64, "bytes/s", "Throughput of the copy as the profiler computed it "
          "from its own exact timestamps (Kineto: args['memory bandwidth (GB/s)'] x 1e9), for traces "
          "whose start_ns/end_ns are rounded (old Kineto traces write whole microseconds); null "
          "when not recorded (nsys: its timestamps are exact)."),
    ),
)

MEMSET = Table(
    "memset",
    "One row per device memset.",
    _interval("memset on the GPU")
    + _gpu_place()
    + (
        C("bytes", i64, "bytes", "Bytes set."),
        C("value", i64, "value", "The byte value written."),
        C("mem_kind", s, "enum", "Memory kind: Device, Pinned, Managed, ..."),
        C("graph_node_id", i64, "id", "CUDA graph node ID when launched from a graph, else null."),
    ),
)

CUDA_SYNC = Table(
    "cuda_sync",
    "One row per CUDA synchronization observed by CUPTI (stream, event, context sync).",
    _interval("synchronization")
    + _gpu_place()
    + (
        C("sync_type", s, "enum", "Decoded synchronization type, e.g. Stream synchronize, Event "
          "synchronize, Context synchronize, Stream wait event."),
        C("event_id", i64, "id", "CUDA event ID for event synchronizations."),
    ),
)

NVTX_RANGES = Table(
    "nvtx_ranges",
    "One row per NVTX range (push/pop and start/end), and per framework annotation mapped to a "
    "range (PyTorch record_function, operators) with a domain saying where it came from.",
    (
        C("start_ns", i64, "ns", "Range start.", required=True),
        C("end_ns", i64, "ns", "Range end; null when the range was never closed (see is_open)."),
        C("duration_ns", i64, "ns", "end_ns - start_ns; null for open ranges."),
        C("is_open", b, "flag", "True when the range was never closed in the capture."),
        C("range_id", i64, "id", "tracekit's ID of the range, unique within the run "
          "(nsys: the NVTX_EVENTS rowid)."),
        *host_thread("OS thread ID that opened the range."),
        C("end_tid", i64, "id", "Thread that closed a start/end range, when it differs or is recorded."),
        C("style", s, "enum", "'push/pop' (thread-local, nested) or 'start/end' (may cross threads)."),
        C("domain", s, "text", "NVTX domain name; '' for the default domain. Framework "
          "annotations: 'pytorch.cpu_op', 'pytorch.user_annotation', ..."),
        C("name", s, "text", "Range message (registered strings resolved).", required=True),
        C("category", s, "text", "Category name (or the number when the category is unnamed)."),
        C("color", i64, "value", "ARGB color, when set."),
        C("depth", i32, "count", "Push/pop nesting depth on its thread (0 = outermost); null for "
          "start/end ranges."),
        C("parent_range_id", i64, "id", "range_id of the innermost enclosing push/pop range on the "
          "same thread; null at depth 0 and for start/end ranges."),
        C("input_dims", list_of(list_of(i64)), "count", "Operator ranges recorded with shapes: one "
          "list of dimensions per argument, in the operator's argument order (DuckDB: "
          "input_dims[1] is the first argument's shape, 1-based); [] for an argument that is not a "
          "tensor (or a 0-d tensor); a null element for an argument whose shape is not a flat list "
          "(a TensorList written as nested lists). Null when the range carries no shapes "
          "(record_shapes off, not an operator)."),
        C("input_types", list_of(s), "text", "Operator ranges: the argument types as PyTorch "
          "writes them ('float', 'c10::Half', 'c10::BFloat16', 'Scalar', 'ScalarList', "
          "'TensorList', '' ...), one per argument; null when not recorded (nsys NVTX)."),
        C("concrete_inputs", list_of(s), "text", "Operator ranges: the values of scalar and "
          "scalar-list arguments as text ('1', '[2, 2]', 'True', '' for a tensor), one per "
          "argument; null when not recorded (older PyTorch, nsys NVTX)."),
        C("op_id", i64, "id", "PyTorch's id of the operator call (nsys NVTX 'op_id = N'; Kineto "
          "args 'Record function id'); null when absent."),
        C("sequence_number", i64, "id", "Autograd sequence number of a forward operator, shared "
          "by the backward node it creates (nsys NVTX 'seq = N'; Kineto args 'Sequence "
          "number'); null when absent."),
    ),
)

NVTX_MARKS = Table(
    "nvtx_marks",
    "One row per NVTX instantaneous marker.",
    (
        C("timestamp_ns", i64, "ns", "Time of the mark.", required=True),
        *host_thread(),
        C("domain", s, "text", "NVTX domain name; '' for the default domain."),
        C("name", s, "text", "Mark message.", required=True),
        C("category", s, "text", "Category name (or number)."),
        C("color", i64, "value", "ARGB color, when set."),
    ),
)

OSRT_API = Table(
    "osrt_api",
    "One row per traced OS runtime call (pthread, poll, read, ioctl, ...).",
    _interval("OS runtime call")
    + (
        *host_thread(),
        C("name", s, "text", "Function name.", required=True),
        C("nesting_level", i32, "count", "Nesting level of the call (0 = outermost)."),
        C("return_value", i64, "value", "Return value, when recorded."),
    ),
)

TABLES = (KERNELS, CUDA_API, MEMCPY, MEMSET, CUDA_SYNC, NVTX_RANGES, NVTX_MARKS, OSRT_API)
