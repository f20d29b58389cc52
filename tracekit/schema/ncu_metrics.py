"""The Nsight Compute metric set behind tracekit's roofline, and the ncu arguments that collect it.

``ROOFLINE_METRICS`` is what ``tracekit collect --profiler ncu`` asks ncu for (pass
:func:`ncu_args` to the ncu command line). ``INPUTS`` says, for each quantity the roofline
queries use, which metric names supply it, in order of preference (the first one present in a
launch wins); the engine loads it as the table ``tk_ncu_spec`` (see :mod:`tracekit.roofline`).

Sources (facts, not text, from NVIDIA's documentation):

- Nsight Compute Kernel Profiling Guide, "Metrics Structure" and "Metrics Decoder": counters
  ``unit__subunit_quantity`` with roll-ups ``.sum/.avg/.max/.min`` and sub-metrics
  ``.per_second``, ``.per_cycle_elapsed``, ``.peak_sustained``.
- The guide's roofline sections (SpeedOfLight_RooflineChart and the hierarchical roofline
  sections): achieved FLOP/s from ``sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on``
  (FMA counted twice), peaks from ``*.peak_sustained`` times ``*__cycles_elapsed.avg.per_second``,
  bytes from ``dram__bytes``, ``lts__t_bytes``, ``l1tex__t_bytes``.
- ``ncu --query-metrics``: ``sm__ops_path_tensor_src_<type>[_dst_<type>]`` counts the math ops
  executed on the tensor path per source datatype (Ampere and newer).
- Yang, Kurth, Williams, "Hierarchical Roofline Analysis for GPUs" (NERSC; CCPE 2020): the
  metric list of the NERSC roofline methodology, and 512 FLOP per ``sm__inst_executed_pipe_tensor``
  instruction on V100.
"""

from __future__ import annotations

_OP = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"
_OP_SMSP = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"

FLOP_OPS = ("dadd", "dmul", "dfma", "fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
"""Per-thread floating-point instruction kinds counted (add/mul count 1 FLOP, fma 2)."""

PAIRED_FP32_OPS = ("fadd2", "fmul2", "ffma2")
"""Paired fp32 instructions (two lanes per thread instruction, compute capability 10.x):
add2/mul2 count 2 FLOP, fma2 counts 4."""

TENSOR_OPS = tuple(
    f"sm__ops_path_tensor_src_{s}.sum"
    for s in ("fp64", "tf32_dst_fp32", "fp16_dst_fp16", "fp16_dst_fp32", "bf16_dst_fp32",
              "fp8", "fp8_dst_fp16", "fp8_dst_fp32")
)
"""Tensor-path math op counters per source datatype (where the architecture has them)."""

ROOFLINE_METRICS: list[str] = [
    # time
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg",
    "sm__cycles_elapsed.avg.per_second",
    # FLOP counters per precision
    *[_OP.format(op) for op in FLOP_OPS],
    # tensor-core work
    "sm__inst_executed_pipe_tensor.sum",
    # bytes per memory level
    "dram__bytes.sum",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    # peaks, so a report carries its own ceilings
    *[_OP.format(op) + ".peak_sustained" for op in ("dfma", "ffma", "hfma")],
    "dram__bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
    "lts__t_bytes.sum.peak_sustained",
    "lts__cycles_elapsed.avg.per_second",
    "l1tex__t_bytes.sum.peak_sustained",
    "l1tex__cycles_elapsed.avg.per_second",
    # device identity (ceiling table lookup)
    "device__attribute_display_name",
    "device__attribute_compute_capability_major",
    "device__attribute_compute_capability_minor",
]

ARCH_METRICS: dict[int, list[str]] = {
    8: list(TENSOR_OPS[:5]),
    9: list(TENSOR_OPS),
    10: [*TENSOR_OPS, *[_OP.format(op) for op in PAIRED_FP32_OPS]],
}
"""Extra metrics by compute-capability major version (counters that older GPUs lack: ncu
refuses a metric list naming a counter the GPU does not have)."""


def roofline_metrics(cc_major: int | None = None) -> list[str]:
    """The metric list for a GPU of compute capability major version ``cc_major`` (None: the
    common set only)."""
    extra = ARCH_METRICS.get(cc_major, []) if cc_major is not None else []
    if cc_major is not None and cc_major > max(ARCH_METRICS):
        extra = ARCH_METRICS[max(ARCH_METRICS)]
    return ROOFLINE_METRICS + [m for m in extra if m not in ROOFLINE_METRICS]


def ncu_args(cc_major: int | None = None, *, nvtx_include: str | None = None,
             launch_skip: int | None = None, launch_count: int | None = None) -> list[str]:
    """ncu command-line arguments that collect :func:`roofline_metrics` (insert them after
    ``ncu`` and before the application). ``nvtx_include`` (e.g. ``'tracekit@step 3/'``) limits
    profiling to launches inside that NVTX range (adds ``--nvtx``), so the run can later be
    matched to an nsys pass by ``roofline_by_nvtx``."""
    args = ["--metrics", ",".join(roofline_metrics(cc_major))]
    if nvtx_include:
        args += ["--nvtx", "--nvtx-include", nvtx_include]
    if launch_skip is not None:
        args += ["--launch-skip", str(int(launch_skip))]
    if launch_count is not None:
        args += ["--launch-count", str(int(launch_count))]
    return args


def _spec(*names: str) -> list[str]:
    return list(names)


INPUTS: dict[str, list[str]] = {
    "dur": _spec("gpu__time_duration.sum", "Duration"),
    "cycles": _spec("sm__cycles_elapsed.avg", "smsp__cycles_elapsed.avg"),
    "sm_hz": _spec("sm__cycles_elapsed.avg.per_second", "smsp__cycles_elapsed.avg.per_second"),
    **{op: _spec(_OP.format(op), _OP_SMSP.format(op)) for op in FLOP_OPS + PAIRED_FP32_OPS},
    **{f"{op}_rate": _spec(_OP_SMSP.format(op) + ".per_cycle_elapsed", _OP.format(op) + ".per_cycle_elapsed")
       for op in FLOP_OPS + PAIRED_FP32_OPS},
    "tensor_inst": _spec("sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum"),
    "tensor_inst_rate": _spec("smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed",
                              "sm__inst_executed_pipe_tensor.sum.per_cycle_elapsed"),
    "dram": _spec("dram__bytes.sum"),
    "dram_read": _spec("dram__bytes_read.sum"),
    "dram_write": _spec("dram__bytes_write.sum"),
    "dram_rate": _spec("dram__bytes.sum.per_second"),
    "l2": _spec("lts__t_bytes.sum"),
    "l2_rate": _spec("lts__t_bytes.sum.per_second"),
    "l1": _spec("l1tex__t_bytes.sum"),
    "l1_rate": _spec("l1tex__t_bytes.sum.per_second"),
    "peak_dfma": _spec(_OP.format("dfma") + ".peak_sustained"),
    "peak_ffma": _spec(_OP.format("ffma") + ".peak_sustained"),
    "peak_hfma": _spec(_OP.format("hfma") + ".peak_sustained"),
    "peak_dram": _spec("dram__bytes.sum.peak_sustained"),
    "dram_hz": _spec("dram__cycles_elapsed.avg.per_second"),
    "peak_l2": _spec("lts__t_bytes.sum.peak_sustained"),
    "l2_hz": _spec("lts__cycles_elapsed.avg.per_second"),
    "peak_l1": _spec("l1tex__t_bytes.sum.peak_sustained"),
    "l1_hz": _spec("l1tex__cycles_elapsed.avg.per_second"),
}
"""Roofline input -> metric names supplying it, preferred first."""
