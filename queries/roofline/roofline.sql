-- roofline: Hierarchical roofline per kernel name (or per launch) from Nsight Compute counters.
-- @include roofline
--
-- One row per run, kernel name and GPU (per = 'kernel', the default) or per profiled launch
-- (per = 'launch', launch_id set). FLOPs: add and mul count 1, FMA 2 (fp32 paired add2/mul2 2,
-- fma2 4); tensor_flop from the per-datatype sm__ops_path_tensor_* counters, else estimated from
-- sm__inst_executed_pipe_tensor.sum with a documented per-architecture factor (tensor_flop_estimated).
-- Intensities divide all FLOPs the counters show by the bytes of each level; achieved rates divide
-- by time_ns (ncu's gpu__time_duration.sum, replayed kernel). Per kernel, sums run over its
-- launches and a sum is NULL when any launch lacks the input. Ceilings come from the report's own
-- peak metrics (*.peak_sustained x clock) or else from tracekit's per-GPU table
-- (queries/data/gpu_peaks.csv). A GPU in neither (a GPU the table lacks, or a --page details CSV,
-- which does not name its GPU) still gets every kernel's FLOP, bytes, intensities, achieved rates
-- and time; its ceilings, ridge points, pct_of_roof and bound are NULL, `missing` says why, and
-- one line per run on stderr says how to add them (-p gpu=NAME). Anything missing is NULL, with
-- the reason in `missing`; a counter the report holds with the value 0 is 0 (an integer-only
-- kernel has 0 fp32 FLOP). docs/roofline.md has every definition.
--
-- @param per VARCHAR kernel [kernel|launch]  'kernel' (one row per kernel name and GPU) or 'launch' (one row per launch).
-- @param ceilings VARCHAR auto [auto|report|table|none]  'auto' (report peaks, else the table), 'report', 'table', or 'none' (no ceilings, no GPU lookup).
-- @param gpu VARCHAR NULL  Look up the table under this device name instead of the report's (e.g. for --page details CSVs that do not name the GPU).
-- @param tensor_datatype VARCHAR NULL  Datatype of the tensor ceiling when the counters do not tell it (default fp16).
-- @param sparsity VARCHAR dense [dense|sparse]  Tensor ceiling from the table: 'dense' or 'sparse'.
-- @param merge_passes BOOLEAN false  Pool the metrics of the k-th launch of each kernel name across passes (input files / processes), for counters collected in separate ncu runs.
-- @param min_roof_pct DOUBLE 20 [0..100]  Below this percentage of the roof at its intensity a kernel is labelled 'latency' (neither memory- nor compute-bound).
-- @notice SELECT 'roofline: run ' || run_id || ': ' || string_agg(DISTINCT ceiling_note, '; ') || ' (' || count(*) || ' row(s) without ceilings or bound)' FROM result WHERE ceiling_note IS NOT NULL GROUP BY run_id ORDER BY run_id
-- @column run_id
-- @column kernel_name  text  Kernel name as ncu prints it (demangled).
-- @column device_name  text  GPU (device__attribute_display_name).
-- @column launch_id  id  ncu_launches.launch_id (per = 'launch'); NULL per kernel.
-- @column launches  count  Profiled launches aggregated in the row.
-- @column time_ns  ns  Summed gpu__time_duration.sum (or sm__cycles_elapsed.avg / clock, see notes).
-- @column fp64_flop  FLOP  dadd + dmul + 2 dfma thread instructions.
-- @column fp32_flop  FLOP  fadd + fmul + 2 ffma (+ 2 fadd2 + 2 fmul2 + 4 ffma2 where counted).
-- @column fp16_flop  FLOP  hadd + hmul + 2 hfma thread instructions.
-- @column tensor_flop  FLOP  Tensor-core FLOPs (sum of sm__ops_path_tensor_src_* ops, or the labelled estimate).
-- @column tensor_flop_estimated  flag  True when tensor_flop is the instruction-count estimate.
-- @column flop  FLOP  fp64 + fp32 + fp16 + tensor FLOPs, over the precisions that were measured (see missing).
-- @column precision  enum  Precision with the most FLOPs: fp64, fp32, fp16 or tensor (fp32 when every measured count is 0); its ceiling is peak_flop_per_s.
-- @column dram_bytes  bytes  dram__bytes.sum (or read + write).
-- @column l2_bytes  bytes  lts__t_bytes.sum.
-- @column l1_bytes  bytes  l1tex__t_bytes.sum.
-- @column dram_intensity  value  flop / dram_bytes (FLOP per byte).
-- @column l2_intensity  value  flop / l2_bytes (FLOP per byte).
-- @column l1_intensity  value  flop / l1_bytes (FLOP per byte).
-- @column flop_per_s  value  flop / time (FLOP per second).
-- @column dram_bytes_per_s  bytes/s  dram_bytes / time.
-- @column l2_bytes_per_s  bytes/s  l2_bytes / time.
-- @column l1_bytes_per_s  bytes/s  l1_bytes / time.
-- @column peak_flop_per_s  value  Ceiling of `precision` (FLOP per second).
-- @column peak_dram_bytes_per_s  bytes/s  DRAM bandwidth ceiling.
-- @column peak_l2_bytes_per_s  bytes/s  L2 bandwidth ceiling (report only).
-- @column peak_l1_bytes_per_s  bytes/s  L1 bandwidth ceiling (report only).
-- @column ridge_dram  value  peak_flop_per_s / peak_dram_bytes_per_s (FLOP per byte).
-- @column ridge_l2  value  peak_flop_per_s / peak_l2_bytes_per_s (FLOP per byte).
-- @column ridge_l1  value  peak_flop_per_s / peak_l1_bytes_per_s (FLOP per byte).
-- @column pct_of_roof  %  flop_per_s as a percentage of min(peak_flop_per_s, dram_intensity x peak_dram_bytes_per_s).
-- @column bound  enum  At the DRAM level: 'memory' (intensity below the ridge), 'compute', or 'latency' (below min_roof_pct of the roof).
-- @column l2_bound  enum  The same label at the L2 level.
-- @column l1_bound  enum  The same label at the L1 level.
-- @column hierarchy_violation  flag  l1_intensity > l2_intensity or l2_intensity > dram_intensity (counters inconsistent or caches bypassed); NULL when unknown.
-- @column ceiling_source  text  'report', 'table:GPU', 'report+table:GPU' or 'none'.
-- @column missing  text  What is absent and why (the NULL columns), '; '-separated; NULL when nothing is.
-- @column notes  text  How derived values were obtained (rates x time, cycles / clock, estimates).
-- @column ceiling_note  text  Why the row has no ceilings (GPU not in the peak table, or not named by the report) and how to add them; NULL when it has them.
-- @key dram_intensity flop_per_s pct_of_roof bound
-- @requires ncu_launches ncu_metrics
-- @empty no profiled launch matched
WITH l AS (
    SELECT *, coalesce(fp64_flop, 0) + coalesce(fp32_flop, 0) + coalesce(fp16_flop, 0) + coalesce(tensor_flop, 0) AS flop_any,
           (fp64_flop IS NULL AND fp32_flop IS NULL AND fp16_flop IS NULL AND tensor_flop IS NULL) AS no_flop
    FROM tk_roofline_launches()
),
per_launch AS (
    SELECT run_id, kernel_name, device_name, launch_id, 1::BIGINT AS launches, time_ns,
           fp64_flop, fp32_flop, fp16_flop, tensor_flop, tensor_flop_estimated,
           CASE WHEN no_flop THEN NULL ELSE flop_any END AS flop,
           dram_bytes, l2_bytes, l1_bytes,
           peak_fp64_flop_per_s, peak_fp32_flop_per_s, peak_fp16_flop_per_s, peak_tensor_flop_per_s,
           peak_dram_bytes_per_s, peak_l2_bytes_per_s, peak_l1_bytes_per_s, ceiling_source, missing, notes, ceiling_note
    FROM l WHERE lower(getvariable('per')) = 'launch'
),
per_kernel AS (
    -- a sum is NULL when any launch lacks the input (count(x) < count(*)), never a partial sum
    SELECT run_id, kernel_name, device_name, NULL::BIGINT AS launch_id, count(*) AS launches,
           CASE WHEN count(time_ns) = count(*) THEN sum(time_ns) END AS time_ns,
           CASE WHEN count(fp64_flop) = count(*) THEN sum(fp64_flop) END AS fp64_flop,
           CASE WHEN count(fp32_flop) = count(*) THEN sum(fp32_flop) END AS fp32_flop,
           CASE WHEN count(fp16_flop) = count(*) THEN sum(fp16_flop) END AS fp16_flop,
           CASE WHEN count(tensor_flop) = count(*) THEN sum(tensor_flop) END AS tensor_flop,
           bool_or(tensor_flop_estimated) AS tensor_flop_estimated,
           CASE WHEN bool_or(no_flop) THEN NULL ELSE sum(flop_any) END AS flop,
           CASE WHEN count(dram_bytes) = count(*) THEN sum(dram_bytes) END AS dram_bytes,
           CASE WHEN count(l2_bytes) = count(*) THEN sum(l2_bytes) END AS l2_bytes,
           CASE WHEN count(l1_bytes) = count(*) THEN sum(l1_bytes) END AS l1_bytes,
           avg(peak_fp64_flop_per_s) AS peak_fp64_flop_per_s, avg(peak_fp32_flop_per_s) AS peak_fp32_flop_per_s,
           avg(peak_fp16_flop_per_s) AS peak_fp16_flop_per_s, avg(peak_tensor_flop_per_s) AS peak_tensor_flop_per_s,
           avg(peak_dram_bytes_per_s) AS peak_dram_bytes_per_s, avg(peak_l2_bytes_per_s) AS peak_l2_bytes_per_s,
           avg(peak_l1_bytes_per_s) AS peak_l1_bytes_per_s,
           string_agg(DISTINCT ceiling_source, ', ' ORDER BY ceiling_source) AS ceiling_source,
           string_agg(DISTINCT missing, ' | ' ORDER BY missing) AS missing,
           string_agg(DISTINCT notes, ' | ' ORDER BY notes) AS notes,
           string_agg(DISTINCT ceiling_note, ' | ' ORDER BY ceiling_note) AS ceiling_note
    FROM l WHERE lower(coalesce(getvariable('per'), 'kernel')) = 'kernel'
    GROUP BY run_id, kernel_name, device_name
),
rows AS (
    SELECT * FROM per_launch UNION ALL SELECT * FROM per_kernel
),
checked AS (
    SELECT *,
        CASE WHEN lower(coalesce(getvariable('per'), 'kernel')) NOT IN ('kernel', 'launch')
             THEN error('roofline: --param per=' || getvariable('per') || ' is not kernel or launch') END AS _chk,
        CASE greatest(coalesce(fp64_flop, -1), coalesce(fp32_flop, -1), coalesce(fp16_flop, -1), coalesce(tensor_flop, -1))
            WHEN -1 THEN NULL
            -- no floating-point work at all (an integer-only kernel): rated against fp32
            WHEN 0 THEN CASE WHEN fp32_flop IS NOT NULL THEN 'fp32' WHEN fp64_flop IS NOT NULL THEN 'fp64'
                             WHEN fp16_flop IS NOT NULL THEN 'fp16' ELSE 'tensor' END
            WHEN coalesce(tensor_flop, -1) THEN 'tensor'
            WHEN coalesce(fp64_flop, -1) THEN 'fp64'
            WHEN coalesce(fp32_flop, -1) THEN 'fp32'
            ELSE 'fp16' END AS precision
    FROM rows
),
rates AS (
    SELECT *,
        CASE precision WHEN 'fp64' THEN peak_fp64_flop_per_s WHEN 'fp32' THEN peak_fp32_flop_per_s
                       WHEN 'fp16' THEN peak_fp16_flop_per_s WHEN 'tensor' THEN peak_tensor_flop_per_s END AS peak_flop_per_s,
        flop / nullif(dram_bytes, 0) AS dram_intensity,
        flop / nullif(l2_bytes, 0) AS l2_intensity,
        flop / nullif(l1_bytes, 0) AS l1_intensity,
        flop / nullif(time_ns, 0) * 1e9 AS flop_per_s,
        dram_bytes / nullif(time_ns, 0) * 1e9 AS dram_bytes_per_s,
        l2_bytes / nullif(time_ns, 0) * 1e9 AS l2_bytes_per_s,
        l1_bytes / nullif(time_ns, 0) * 1e9 AS l1_bytes_per_s
    FROM checked
)
SELECT run_id, kernel_name, device_name, launch_id, launches, time_ns::DOUBLE AS time_ns,
    fp64_flop, fp32_flop, fp16_flop, tensor_flop, tensor_flop_estimated, flop, precision,
    dram_bytes, l2_bytes, l1_bytes, dram_intensity, l2_intensity, l1_intensity,
    flop_per_s, dram_bytes_per_s, l2_bytes_per_s, l1_bytes_per_s,
    peak_flop_per_s, peak_dram_bytes_per_s, peak_l2_bytes_per_s, peak_l1_bytes_per_s,
    peak_flop_per_s / peak_dram_bytes_per_s AS ridge_dram,
    peak_flop_per_s / peak_l2_bytes_per_s AS ridge_l2,
    peak_flop_per_s / peak_l1_bytes_per_s AS ridge_l1,
    100.0 * flop_per_s / least(peak_flop_per_s, dram_intensity * peak_dram_bytes_per_s) AS pct_of_roof,
    tk_bound(flop_per_s, dram_intensity, peak_flop_per_s, peak_dram_bytes_per_s, getvariable('min_roof_pct')) AS bound,
    tk_bound(flop_per_s, l2_intensity, peak_flop_per_s, peak_l2_bytes_per_s, getvariable('min_roof_pct')) AS l2_bound,
    tk_bound(flop_per_s, l1_intensity, peak_flop_per_s, peak_l1_bytes_per_s, getvariable('min_roof_pct')) AS l1_bound,
    (l1_intensity > l2_intensity OR l2_intensity > dram_intensity) AS hierarchy_violation,
    ceiling_source,
    concat_ws('; ', missing,
        CASE WHEN precision IS NOT NULL AND peak_flop_per_s IS NULL AND ceiling_source <> 'none'
             THEN 'peak_flop_per_s: no ' || precision || ' ceiling in the report or the table' END) AS missing,
    notes, ceiling_note
FROM rates
ORDER BY run_id, time_ns DESC NULLS LAST, kernel_name, launch_id;
