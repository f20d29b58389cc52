"""Nsight Compute tables: one row per profiled kernel launch, and its metrics in long form.

ncu replays each profiled launch to read hardware counters; these tables keep what it measured
with no interpretation beyond unit conversion. The roofline (FLOPs, bytes, intensities, ceilings)
is computed from them by the named queries in ``queries/roofline/`` (see docs/roofline.md).
"""

from __future__ import annotations

from tracekit.schema.core import F64, I32, I64, STR, Table, launch_dims
from tracekit.schema.core import Column as C

i32, i64, f64, s = I32, I64, F64, STR

NCU_LAUNCHES = Table(
    "ncu_launches",
    "One row per kernel launch profiled by Nsight Compute (a result of `ncu`; replays of the same "
    "launch are one row).",
    (
        C("launch_id", i64, "id", "tracekit's launch ID, unique within the run: the launch's position "
          "in the input (0, 1, ...; inputs concatenated in order). ncu_metrics.launch_id refers to it.",
          required=True),
        C("ncu_id", i64, "id", "The result ID ncu printed (CSV column \"ID\"; for .ncu-rep, the "
          "action's index over the report). Not unique when one CSV holds several ncu passes."),
        C("pid", i64, "id", "OS process ID of the profiled process (CSV \"Process ID\")."),
        C("process_name", s, "text", "Process name (CSV \"Process Name\")."),
        C("kernel_name", s, "text", "Kernel name as ncu prints it (demangled, with parameter list when "
          "ncu had it).", required=True),
        C("function_name", s, "text", "Base function name without return type, template arguments or "
          "parameters (from .ncu-rep: ncu's FUNCTION name; from CSV: parsed from kernel_name)."),
        C("mangled_name", s, "text", "Mangled name (.ncu-rep only)."),
        *launch_dims(' (launch__grid_dim_x or CSV "Grid Size")', ' (launch__block_dim_x or CSV "Block Size")'),
        C("device_id", i32, "id", "CUDA device ordinal (CSV \"Device\", launch__device_id, or "
          "device__attribute_device_index)."),
        C("device_name", s, "text", "GPU name (device__attribute_display_name), e.g. 'NVIDIA B200'."),
        C("compute_capability", s, "text", "Compute capability 'major.minor' (CSV \"CC\" or "
          "device__attribute_compute_capability_major/minor)."),
        C("stream_id", i64, "id", "CUDA stream ID (CSV \"Stream\" or launch__stream_id)."),
        C("context_id", i64, "id", "CUDA context ID (CSV \"Context\" or launch__context_id)."),
        C("nvtx_range", s, "text", "NVTX push/pop ranges open at the launch, outermost first, joined "
          "with '/', prefixed 'DOMAIN@' outside the default domain (.ncu-rep profiled with --nvtx only)."),
        C("source_file", s, "text", "Input file the row comes from (file name)."),
    ),
    group="ncu",
)

NCU_METRICS = Table(
    "ncu_metrics",
    "One row per launch and metric ncu reported (long form). Values are converted to base units "
    "(docs/roofline.md, 'Units'); the raw text is kept.",
    (
        C("launch_id", i64, "id", "ncu_launches.launch_id of the launch.", required=True),
        C("metric_name", s, "text", "Raw metric name as ncu reports it (e.g. dram__bytes.sum). "
          "From a `--page details` CSV, the section's display name when that is all it has "
          "(e.g. 'Duration').", required=True),
        C("section", s, "text", "Section name (`--page details` only)."),
        C("unit", s, "text", "Unit as ncu printed it (e.g. Kbyte, usecond, cycle/nsecond); '' when "
          "none."),
        C("value", f64, "value", "Numeric value converted to base_unit; null when the raw value is "
          "empty, 'n/a', 'no data' or not a number (raw_value keeps the text). A unit tracekit does "
          "not know is kept as it is (value unscaled, base_unit = unit)."),
        C("base_unit", s, "text", "Unit of value: byte, ns, cycle, inst, byte/s, Hz (cycles per "
          "second), inst/cycle, byte/cycle, %, ... (the raw unit when no conversion applies)."),
        C("raw_value", s, "text", "The value as the input wrote it (thousands separators and all)."),
    ),
    group="ncu",
)

TABLES = (NCU_LAUNCHES, NCU_METRICS)
