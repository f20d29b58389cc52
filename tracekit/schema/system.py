"""System tables: processes, threads, GPUs, CPU scheduling and sampled GPU metrics."""

from __future__ import annotations

from tracekit.schema.core import BOOL, F64, I32, I64, STR, Table, host_thread
from tracekit.schema.core import Column as C

i32, i64, f64, s, b = I32, I64, F64, STR, BOOL

PROCESSES = Table(
    "processes",
    "One row per profiled process.",
    (
        C("pid", i64, "id", "OS process ID.", required=True),
        C("name", s, "text", "Process name or command."),
        C("rank", i32, "id", "Distributed rank of the process when known (Kineto distributedInfo, "
          "tracekit collect's manifest), else null."),
    ),
    group="system",
)

THREADS = Table(
    "threads",
    "One row per named or traced thread.",
    (
        *host_thread(required=True),
        C("name", s, "text", "Thread name."),
        C("priority", i32, "value", "Scheduling priority, when recorded."),
    ),
    group="system",
)

DEVICES = Table(
    "devices",
    "One row per GPU as the input describes it. Values are as the export gives them; null when "
    "it does not record them.",
    (
        C("device_id", i32, "id", "CUDA device ordinal (matches kernels.device_id).", required=True),
        C("gpu_id", i32, "id", "The profiler's own GPU number (nsys TARGET_INFO_GPU.id), which can "
          "differ from the CUDA ordinal when CUDA_VISIBLE_DEVICES reorders GPUs."),
        C("name", s, "text", "GPU product name, e.g. 'NVIDIA H100 80GB HBM3'."),
        C("uuid", s, "id", "GPU UUID, when recorded."),
        C("pci_bus_id", s, "id", "PCI bus ID, when recorded."),
        C("compute_capability", s, "text", "Compute capability as 'major.minor'."),
        C("sm_count", i32, "count", "Number of streaming multiprocessors."),
        C("global_memory_bytes", i64, "bytes", "Global (device) memory size."),
        C("l2_cache_bytes", i64, "bytes", "L2 cache size."),
        C("memory_bandwidth_bytes_per_s", f64, "bytes/s", "Peak global memory bandwidth."),
        C("core_clock_hz", f64, "Hz", "SM (core) clock rate."),
        C("memory_clock_hz", f64, "Hz", "Memory clock rate."),
        C("max_warps_per_sm", i32, "count", "Maximum resident warps per SM."),
        C("threads_per_warp", i32, "count", "Threads per warp."),
    ),
    group="system",
)

CPU_THREAD_STATE = Table(
    "cpu_thread_state",
    "Intervals during which a thread ran on a CPU core, from OS scheduler events (nsys "
    "SCHED_EVENTS, captured with --cpuctxsw). A thread is off-CPU outside these intervals. Under "
    "the torch profiler, `tracekit collect` fills it from the runner's samples of each thread's "
    "CPU time (its CPU-time clock, else /proc/PID/task/TID/schedstat, every 20 ms): one row per "
    "thread and sample interval that starts at the interval's start and lasts the CPU time the "
    "thread gained, at most the interval (a late reading's excess goes to the next interval; "
    "out_state 'Sampled'; the manifest's collect.host_cpu_samples says so).",
    (
        C("start_ns", i64, "ns", "Thread switched in.", required=True),
        C("end_ns", i64, "ns", "Thread switched out; when no switch-out was recorded, the thread's next "
          "scheduling event or, failing that, the capture's last one (see is_clipped)."),
        C("duration_ns", i64, "ns", "end_ns - start_ns."),
        C("cpu", i32, "id", "Logical CPU core the thread ran on."),
        *host_thread(),
        C("out_state", s, "enum", "Thread state when switched out (Running = preempted, "
          "Sleeping, Waiting, ...), decoded from the export; 'Sampled' for rows made from CPU-time "
          "samples."),
        C("block_reason", s, "enum", "Why the thread blocked when switched out (Mutex, CondVar, "
          "Nanosleep, ...), decoded from the export; null when not recorded."),
        C("is_clipped", b, "flag", "True when the interval has no recorded switch-out (end_ns is "
          "then the thread's next switch-in or the capture's last scheduling event)."),
    ),
    group="system",
)

GPU_METRICS = Table(
    "gpu_metrics",
    "Sampled GPU counters (nsys --gpu-metrics-device): one row per sample and metric.",
    (
        C("timestamp_ns", i64, "ns", "Sample time.", required=True),
        C("gpu_id", i32, "id", "The profiler's GPU number the sample was taken on (devices.gpu_id)."),
        C("device_id", i32, "id", "CUDA device ordinal of that GPU, when the export maps it."),
        C("metric_name", s, "text", "Metric name as nsys lists it, e.g. 'NVLink RX Bandwidth [Throughput %]'.",
          required=True),
        C("value", f64, "value", "Sample value, in the unit the metric name states."),
    ),
    group="system",
)

TABLES = (PROCESSES, THREADS, DEVICES, CPU_THREAD_STATE, GPU_METRICS)
