"""Communication tables: collective operations whose message size the input records.

Kernel rows say that an NCCL kernel ran and for how long; they do not say how many bytes it
moved. This group holds what the inputs record about each collective's size, linked to the kernel
that executed it, so the ``nccl`` query can compute algorithm and bus bandwidth.
"""

from __future__ import annotations

from tracekit.schema.core import F64, I32, I64, STR, Table
from tracekit.schema.core import Column as C

i32, i64, f64, s = I32, I64, F64, STR

COLLECTIVES = Table(
    "collectives",
    "One row per collective or point-to-point communication call whose size the input records: "
    "Kineto NCCL kernel arguments ('Collective name', 'In msg nelems', 'Out msg nelems', 'dtype', "
    "'Group size'), or, for a kernel without them, the `record_param_comms` operator with the "
    "kernel's External id (docs/kineto.md). Linked to the kernel that executed it by "
    "(pid, device_id, correlation_id). nsys exports do not fill it yet.",
    (
        C("start_ns", i64, "ns", "Start of the executing kernel (or of the range when no kernel is linked).",
          required=True),
        C("pid", i64, "id", "OS process ID (kernels.pid of the executing kernel)."),
        C("device_id", i32, "id", "Device the collective ran on (kernels.device_id)."),
        C("stream_id", i64, "id", "Stream of the executing kernel."),
        C("correlation_id", i64, "id", "Correlation ID of the executing kernel (kernels.correlation_id)."),
        C("collective", s, "text", "Collective as the input names it, e.g. allreduce, allgather, "
          "reduce_scatter, broadcast, reduce, send, recv, all_to_all."),
        C("dtype", s, "text", "Element type as the input names it, e.g. Float, BFloat16."),
        C("element_bytes", i32, "bytes", "Bytes per element of dtype."),
        C("in_elements", i64, "count", "Elements in this rank's input buffer."),
        C("out_elements", i64, "count", "Elements in this rank's output buffer."),
        C("in_bytes", i64, "bytes", "in_elements * element_bytes."),
        C("out_bytes", i64, "bytes", "out_elements * element_bytes."),
        C("group_size", i32, "count", "Ranks in the communicator (process group size)."),
        C("process_group", s, "text", "Process group name or description, when recorded."),
        C("seq", i64, "count", "Sequence number of the collective in its process group (PyTorch's 'Seq' "
          "argument): the same on every member rank, so it matches a collective across ranks; null "
          "when unrecorded (older PyTorch)."),
        C("peer_rank", i32, "id", "Peer of a point-to-point call as a global rank: the receiver of a send, "
          "the sender of a recv (Kineto 'Dst Rank' / 'Src Rank', PyTorch >= 2.4); null for collectives and "
          "when unrecorded."),
    ),
    group="comm",
)

CLOCK_MODEL = Table(
    "clock_model",
    "One row per rank of a multi-rank job: the correction that puts the rank's timestamps on rank "
    "0's clock, estimated at conversion from the job's NCCL collectives (tracekit.convert.clocks, "
    "docs/multirank.md): local = true + offset_ns + drift_ppm * 1e-6 * (true - t0_ns). Every "
    "cross-rank query (collective_skew, stragglers, the job timeline) subtracts it; the "
    "`clock_offsets` query shows it. Written by `tracekit convert` of a job only; "
    "`--clock-model none` writes offset 0 and bound 0 (clocks declared synchronized).",
    (
        C("rank", i32, "id", "Distributed rank (the manifest's ranks[].rank).", required=True),
        C("host", s, "text", "Host of the rank as the input records it (nsys Hostname, Kineto top-level "
          "'hostname'); null when unrecorded."),
        C("clock_id", s, "id", "The clock the rank's timestamps are on: 'host NAME', or 'rank N' when the "
          "host is unknown. Ranks with one clock_id share offset, drift and bound.", required=True),
        C("offset_ns", i64, "ns", "The rank's clock minus rank 0's clock at t0_ns (subtract to correct).",
          required=True),
        C("drift_ppm", f64, "ppm", "Rate of the rank's clock relative to rank 0's, minus 1, in ppm.",
          required=True),
        C("t0_ns", i64, "ns", "Reference time of the drift term: rank 0's first NCCL kernel start (on "
          "rank 0's clock).", required=True),
        C("bound_ns", i64, "ns", "Half-width of the interval around offset_ns that holds the true offset "
          "(0 for rank 0's clock); null when not estimated."),
        C("method", s, "enum", "How it was obtained: reference, collective_ends, offset_only, causality, "
          "none, unestimated (tracekit.convert.clocks.METHODS).", required=True),
        C("constraints", i64, "count", "Collective instances the estimate used.", required=True),
    ),
    group="comm",
)

TABLES = (COLLECTIVES, CLOCK_MODEL)
