-- Roofline macros (loaded by tracekit.roofline.register on every engine connection).
--
-- tk_roofline_launches(): one row per ncu launch (ncu_launches) with the roofline inputs taken
-- from ncu_metrics through tk_ncu_spec (tracekit.schema.ncu_metrics.INPUTS: for each input the metric
-- names that supply it, preferred first). All definitions are in docs/roofline.md. Reads the
-- variables gpu, ceilings, tensor_datatype, sparsity (set by the named queries; NULL = default).
-- A quantity whose inputs are absent is NULL and named in `missing`; never 0.

-- tk_kernel_key(name): a kernel name as nsys and ncu both spell it. Their demanglers differ:
-- nsys writes integer template arguments with a C cast ('<(int)4, (unsigned long)3>') and
-- anonymous namespaces as '<unnamed>'; ncu writes '<4, 3>' and '(anonymous namespace)'; spacing
-- differs ('float *' vs 'float*'). The key drops the casts, unifies the namespace and removes
-- all whitespace.
CREATE OR REPLACE TEMP MACRO tk_kernel_key(name) AS
    regexp_replace(
        regexp_replace(
            regexp_replace(name, '\((?:unsigned |signed )?(?:int|long long|long|short|char|bool|unsigned)\)\s*(-?[0-9])', '\1', 'g'),
            '<unnamed>|\(anonymous namespace\)', 'anon', 'g'),
        '\s+', '', 'g');

-- tk_gpu_table_name(name, cc, sms): the device_name of gpu_peaks for a GPU as a trace names it:
-- the name itself when the table has it; else the alias of queries/data/gpu_aliases.csv with that
-- name (and, where the alias row gives them, that compute capability and SM / CU count: one name
-- can stand for two parts); else the name with the 'NVIDIA ' prefix added or removed (drivers
-- before 2021 wrote 'GeForce RTX 3090' where newer ones write 'NVIDIA GeForce RTX 3090'); else
-- the name unchanged (not in the table: callers report it).
CREATE OR REPLACE TEMP MACRO tk_gpu_table_name(name, cc, sms) AS
    CASE
        WHEN name IS NULL THEN NULL
        WHEN EXISTS (SELECT 1 FROM gpu_peaks p WHERE p.device_name = name) THEN name
        ELSE coalesce(
            (SELECT min(a.device_name) FROM gpu_aliases a
             WHERE a.alias = name AND (a.compute_capability IS NULL OR a.compute_capability = cc)
               AND (a.sm_count IS NULL OR a.sm_count = sms)),
            (SELECT min(p.device_name) FROM gpu_peaks p
             WHERE p.device_name = 'NVIDIA ' || name OR 'NVIDIA ' || p.device_name = name),
            name)
    END;

CREATE OR REPLACE TEMP MACRO tk_bound(flop_per_s, intensity, peak_flop, peak_bw, min_roof_pct) AS
    CASE
        WHEN flop_per_s IS NULL OR intensity IS NULL OR peak_flop IS NULL OR peak_bw IS NULL THEN NULL
        WHEN flop_per_s < min_roof_pct / 100.0 * least(peak_flop, intensity * peak_bw) THEN 'latency'
        WHEN intensity < peak_flop / peak_bw THEN 'memory'
        ELSE 'compute'
    END;

CREATE OR REPLACE TEMP MACRO tk_roofline_launches() AS TABLE
WITH passes AS (
    -- merge_passes: the k-th launch of a kernel name in each pass (input file and process) is one
    -- launch profiled in several passes (NERSC-style separate time / FLOP / byte passes); its
    -- metrics are pooled under the first pass's launch_id. Otherwise every launch stands alone.
    SELECT run_id, launch_id,
        CASE WHEN coalesce(getvariable('merge_passes'), false)
             THEN min(launch_id) OVER (PARTITION BY run_id, kernel_name, occ) ELSE launch_id END AS rep_id,
        CASE WHEN coalesce(getvariable('merge_passes'), false)
             THEN count(*) OVER (PARTITION BY run_id, kernel_name, occ) ELSE 1 END AS passes
    FROM (SELECT run_id, launch_id, kernel_name,
                 row_number() OVER (PARTITION BY run_id, coalesce(source_file, ''), pid, kernel_name ORDER BY launch_id) AS occ
          FROM ncu_launches)
),
picked_all AS (
    SELECT m.run_id, p.rep_id, m.launch_id, s.alias, s.prio, m.value,
           min(s.prio) OVER (PARTITION BY m.run_id, p.rep_id, s.alias) AS best_prio
    FROM ncu_metrics m JOIN tk_ncu_spec s ON m.metric_name = s.metric_name
    JOIN passes p ON p.run_id = m.run_id AND p.launch_id = m.launch_id
    WHERE m.value IS NOT NULL
      AND (m.metric_name <> 'Duration' OR m.section LIKE 'GPU Speed Of Light%')
),
picked AS (
    -- the preferred metric of each input; across merged passes, time-like inputs take the
    -- smallest value (instrumented passes, e.g. SASS instruction counting, run slower), the
    -- others the first pass's value
    SELECT run_id, rep_id AS launch_id, alias,
           CASE WHEN alias IN ('dur', 'cycles') THEN min(value) ELSE arg_min(value, launch_id) END AS v
    FROM picked_all WHERE prio = best_prio
    GROUP BY run_id, rep_id, alias
),
wide AS (
    SELECT run_id, launch_id,
        max(v) FILTER (WHERE alias = 'dur') AS m_dur,
        max(v) FILTER (WHERE alias = 'cycles') AS m_cycles,
        max(v) FILTER (WHERE alias = 'sm_hz') AS m_sm_hz,
        max(v) FILTER (WHERE alias = 'dadd') AS m_dadd,
        max(v) FILTER (WHERE alias = 'dmul') AS m_dmul,
        max(v) FILTER (WHERE alias = 'dfma') AS m_dfma,
        max(v) FILTER (WHERE alias = 'fadd') AS m_fadd,
        max(v) FILTER (WHERE alias = 'fmul') AS m_fmul,
        max(v) FILTER (WHERE alias = 'ffma') AS m_ffma,
        max(v) FILTER (WHERE alias = 'hadd') AS m_hadd,
        max(v) FILTER (WHERE alias = 'hmul') AS m_hmul,
        max(v) FILTER (WHERE alias = 'hfma') AS m_hfma,
        max(v) FILTER (WHERE alias = 'fadd2') AS m_fadd2,
        max(v) FILTER (WHERE alias = 'fmul2') AS m_fmul2,
        max(v) FILTER (WHERE alias = 'ffma2') AS m_ffma2,
        max(v) FILTER (WHERE alias = 'dadd_rate') AS m_dadd_rate,
        max(v) FILTER (WHERE alias = 'dmul_rate') AS m_dmul_rate,
        max(v) FILTER (WHERE alias = 'dfma_rate') AS m_dfma_rate,
        max(v) FILTER (WHERE alias = 'fadd_rate') AS m_fadd_rate,
        max(v) FILTER (WHERE alias = 'fmul_rate') AS m_fmul_rate,
        max(v) FILTER (WHERE alias = 'ffma_rate') AS m_ffma_rate,
        max(v) FILTER (WHERE alias = 'hadd_rate') AS m_hadd_rate,
        max(v) FILTER (WHERE alias = 'hmul_rate') AS m_hmul_rate,
        max(v) FILTER (WHERE alias = 'hfma_rate') AS m_hfma_rate,
        max(v) FILTER (WHERE alias = 'fadd2_rate') AS m_fadd2_rate,
        max(v) FILTER (WHERE alias = 'fmul2_rate') AS m_fmul2_rate,
        max(v) FILTER (WHERE alias = 'ffma2_rate') AS m_ffma2_rate,
        max(v) FILTER (WHERE alias = 'tensor_inst') AS m_tensor_inst,
        max(v) FILTER (WHERE alias = 'tensor_inst_rate') AS m_tensor_inst_rate,
        max(v) FILTER (WHERE alias = 'dram') AS m_dram,
        max(v) FILTER (WHERE alias = 'dram_read') AS m_dram_read,
        max(v) FILTER (WHERE alias = 'dram_write') AS m_dram_write,
        max(v) FILTER (WHERE alias = 'dram_rate') AS m_dram_rate,
        max(v) FILTER (WHERE alias = 'l2') AS m_l2,
        max(v) FILTER (WHERE alias = 'l2_rate') AS m_l2_rate,
        max(v) FILTER (WHERE alias = 'l1') AS m_l1,
        max(v) FILTER (WHERE alias = 'l1_rate') AS m_l1_rate,
        max(v) FILTER (WHERE alias = 'peak_dfma') AS m_peak_dfma,
        max(v) FILTER (WHERE alias = 'peak_ffma') AS m_peak_ffma,
        max(v) FILTER (WHERE alias = 'peak_hfma') AS m_peak_hfma,
        max(v) FILTER (WHERE alias = 'peak_dram') AS m_peak_dram,
        max(v) FILTER (WHERE alias = 'dram_hz') AS m_dram_hz,
        max(v) FILTER (WHERE alias = 'peak_l2') AS m_peak_l2,
        max(v) FILTER (WHERE alias = 'l2_hz') AS m_l2_hz,
        max(v) FILTER (WHERE alias = 'peak_l1') AS m_peak_l1,
        max(v) FILTER (WHERE alias = 'l1_hz') AS m_l1_hz
    FROM picked GROUP BY run_id, launch_id
),
tensor_ops AS (
    -- per-datatype tensor-path op counters (not the _sparsity_on/_off splits, not integer sources);
    -- with merged passes, those of the first pass that has them
    SELECT p.run_id, p.rep_id AS launch_id, arg_min(o.ops, o.launch_id) AS ops, arg_min(o.dtype, o.launch_id) AS dtype
    FROM (
        SELECT run_id, launch_id, sum(value) AS ops,
               arg_max(regexp_extract(metric_name, '^sm__ops_path_tensor_src_([a-z0-9]+)', 1), value) AS dtype
        FROM ncu_metrics
        WHERE regexp_matches(metric_name, '^sm__ops_path_tensor_src_(fp64|tf32|fp16|bf16|fp8)(_dst_[a-z0-9]+)?\.sum$')
          AND value IS NOT NULL
        GROUP BY run_id, launch_id
    ) o JOIN passes p ON p.run_id = o.run_id AND p.launch_id = o.launch_id
    GROUP BY p.run_id, p.rep_id
),
base AS (
    SELECT l.run_id, l.launch_id, l.kernel_name, l.function_name, l.device_name,
           l.compute_capability, l.pid, l.nvtx_range,
           coalesce(getvariable('gpu'), tk_gpu_table_name(l.device_name, l.compute_capability, NULL)) AS gpu, ps.passes,
           w.m_cycles AS cycles, w.* EXCLUDE (run_id, launch_id), t.ops AS tensor_ops, t.dtype AS tensor_ops_dtype
    FROM ncu_launches l
    JOIN passes ps ON ps.run_id = l.run_id AND ps.launch_id = l.launch_id AND ps.rep_id = l.launch_id
    LEFT JOIN wide w ON w.run_id = l.run_id AND w.launch_id = l.launch_id
    LEFT JOIN tensor_ops t ON t.run_id = l.run_id AND t.launch_id = l.launch_id
),
counts AS (
    SELECT *,
        coalesce(m_dur, m_cycles / m_sm_hz * 1e9) AS time_ns,
        (m_dur IS NULL AND m_cycles IS NOT NULL AND m_sm_hz IS NOT NULL) AS time_from_cycles,
        coalesce(m_dadd, m_dadd_rate * cycles) AS dadd_n,
        (m_dadd IS NULL AND m_dadd_rate IS NOT NULL AND cycles IS NOT NULL) AS dadd_from_rate,
        coalesce(m_dmul, m_dmul_rate * cycles) AS dmul_n,
        (m_dmul IS NULL AND m_dmul_rate IS NOT NULL AND cycles IS NOT NULL) AS dmul_from_rate,
        coalesce(m_dfma, m_dfma_rate * cycles) AS dfma_n,
        (m_dfma IS NULL AND m_dfma_rate IS NOT NULL AND cycles IS NOT NULL) AS dfma_from_rate,
        coalesce(m_fadd, m_fadd_rate * cycles) AS fadd_n,
        (m_fadd IS NULL AND m_fadd_rate IS NOT NULL AND cycles IS NOT NULL) AS fadd_from_rate,
        coalesce(m_fmul, m_fmul_rate * cycles) AS fmul_n,
        (m_fmul IS NULL AND m_fmul_rate IS NOT NULL AND cycles IS NOT NULL) AS fmul_from_rate,
        coalesce(m_ffma, m_ffma_rate * cycles) AS ffma_n,
        (m_ffma IS NULL AND m_ffma_rate IS NOT NULL AND cycles IS NOT NULL) AS ffma_from_rate,
        coalesce(m_hadd, m_hadd_rate * cycles) AS hadd_n,
        (m_hadd IS NULL AND m_hadd_rate IS NOT NULL AND cycles IS NOT NULL) AS hadd_from_rate,
        coalesce(m_hmul, m_hmul_rate * cycles) AS hmul_n,
        (m_hmul IS NULL AND m_hmul_rate IS NOT NULL AND cycles IS NOT NULL) AS hmul_from_rate,
        coalesce(m_hfma, m_hfma_rate * cycles) AS hfma_n,
        (m_hfma IS NULL AND m_hfma_rate IS NOT NULL AND cycles IS NOT NULL) AS hfma_from_rate,
        coalesce(m_fadd2, m_fadd2_rate * cycles) AS fadd2_n,
        (m_fadd2 IS NULL AND m_fadd2_rate IS NOT NULL AND cycles IS NOT NULL) AS fadd2_from_rate,
        coalesce(m_fmul2, m_fmul2_rate * cycles) AS fmul2_n,
        (m_fmul2 IS NULL AND m_fmul2_rate IS NOT NULL AND cycles IS NOT NULL) AS fmul2_from_rate,
        coalesce(m_ffma2, m_ffma2_rate * cycles) AS ffma2_n,
        (m_ffma2 IS NULL AND m_ffma2_rate IS NOT NULL AND cycles IS NOT NULL) AS ffma2_from_rate,
        coalesce(m_dram, m_dram_read + m_dram_write, m_dram_rate * coalesce(m_dur, m_cycles / m_sm_hz * 1e9) / 1e9) AS dram_bytes,
        (m_dram IS NULL AND (m_dram_read IS NULL OR m_dram_write IS NULL) AND m_dram_rate IS NOT NULL) AS dram_from_rate,
        coalesce(m_l2, m_l2_rate * coalesce(m_dur, m_cycles / m_sm_hz * 1e9) / 1e9) AS l2_bytes,
        (m_l2 IS NULL AND m_l2_rate IS NOT NULL) AS l2_from_rate,
        coalesce(m_l1, m_l1_rate * coalesce(m_dur, m_cycles / m_sm_hz * 1e9) / 1e9) AS l1_bytes,
        (m_l1 IS NULL AND m_l1_rate IS NOT NULL) AS l1_from_rate,
        coalesce(m_tensor_inst, m_tensor_inst_rate * cycles) AS tensor_inst,
        TRY_CAST(split_part(compute_capability, '.', 1) AS INTEGER) AS cc_major
    FROM base
),
flops AS (
    SELECT c.*,
        dadd_n + dmul_n + 2 * dfma_n AS fp64_flop,
        fadd_n + fmul_n + 2 * ffma_n
            + coalesce(2 * fadd2_n, 0) + coalesce(2 * fmul2_n, 0) + coalesce(4 * ffma2_n, 0) AS fp32_flop,
        hadd_n + hmul_n + 2 * hfma_n AS fp16_flop,
        coalesce(tensor_ops, tensor_inst * tf.flop_per_inst) AS tensor_flop,
        (tensor_ops IS NULL AND tensor_inst IS NOT NULL AND tf.flop_per_inst IS NOT NULL) AS tensor_flop_estimated,
        coalesce(tensor_ops_dtype, getvariable('tensor_datatype'), 'fp16') AS tensor_datatype,
        tf.flop_per_inst AS tensor_flop_per_inst
    FROM counts c LEFT JOIN tensor_factors tf ON tf.compute_capability = c.compute_capability
),
table_peaks AS (
    SELECT device_name,
        max(value) FILTER (WHERE resource = 'flop' AND datatype = 'fp64') AS t_fp64,
        max(value) FILTER (WHERE resource = 'flop' AND datatype = 'fp32') AS t_fp32,
        max(value) FILTER (WHERE resource = 'flop' AND datatype = 'fp16') AS t_fp16,
        max(value) FILTER (WHERE resource = 'dram') AS t_dram
    FROM gpu_peaks GROUP BY device_name
),
ceil AS (
    SELECT f.*,
        lower(coalesce(getvariable('ceilings'), 'auto')) AS ceil_mode,
        2 * m_peak_dfma * m_sm_hz AS r_fp64, 2 * m_peak_ffma * m_sm_hz AS r_fp32, 2 * m_peak_hfma * m_sm_hz AS r_fp16,
        m_peak_dram * m_dram_hz AS r_dram, m_peak_l2 * m_l2_hz AS r_l2, m_peak_l1 * m_l1_hz AS r_l1,
        tp.t_fp64, tp.t_fp32, tp.t_fp16, tp.t_dram, pt.value AS t_tensor,
        tp.device_name IS NOT NULL AS gpu_known
    FROM flops f
    LEFT JOIN table_peaks tp ON tp.device_name = f.gpu
    LEFT JOIN gpu_peaks pt ON pt.device_name = f.gpu AND pt.resource = 'tensor'
        AND pt.datatype = f.tensor_datatype AND pt.sparsity = coalesce(getvariable('sparsity'), 'dense')
),
chosen AS (
    SELECT c.*,
        CASE ceil_mode WHEN 'report' THEN r_fp64 WHEN 'table' THEN t_fp64 WHEN 'none' THEN NULL ELSE coalesce(r_fp64, t_fp64) END AS peak_fp64_flop_per_s,
        CASE ceil_mode WHEN 'report' THEN r_fp32 WHEN 'table' THEN t_fp32 WHEN 'none' THEN NULL ELSE coalesce(r_fp32, t_fp32) END AS peak_fp32_flop_per_s,
        CASE ceil_mode WHEN 'report' THEN r_fp16 WHEN 'table' THEN t_fp16 WHEN 'none' THEN NULL ELSE coalesce(r_fp16, t_fp16) END AS peak_fp16_flop_per_s,
        CASE ceil_mode WHEN 'report' THEN NULL WHEN 'none' THEN NULL ELSE t_tensor END AS peak_tensor_flop_per_s,
        CASE ceil_mode WHEN 'report' THEN r_dram WHEN 'table' THEN t_dram WHEN 'none' THEN NULL ELSE coalesce(r_dram, t_dram) END AS peak_dram_bytes_per_s,
        CASE ceil_mode WHEN 'table' THEN NULL WHEN 'none' THEN NULL ELSE r_l2 END AS peak_l2_bytes_per_s,
        CASE ceil_mode WHEN 'table' THEN NULL WHEN 'none' THEN NULL ELSE r_l1 END AS peak_l1_bytes_per_s,
        CASE
            WHEN ceil_mode NOT IN ('auto', 'report', 'table', 'none')
                THEN error('roofline: --param ceilings=' || ceil_mode || ' is not one of auto, report, table, none')
            WHEN ceil_mode = 'none' OR gpu_known THEN NULL
            WHEN ceil_mode = 'auto' AND coalesce(r_fp64, r_fp32, r_fp16, r_dram) IS NOT NULL THEN NULL
            WHEN ceil_mode = 'report' THEN NULL
            -- no ceilings: the kernel's counters are still reported, ceilings and bound are NULL
            WHEN gpu IS NULL THEN 'ceilings: the report does not name its GPU (e.g. a --page details CSV) and carries '
                || 'no peak metrics; pass -p gpu=NAME (a device_name of queries/data/gpu_peaks.csv)'
            ELSE 'ceilings: GPU ' || chr(39) || gpu || chr(39) || ' is not in the peak table (queries/data/gpu_peaks.csv) '
                || 'and the report carries no peak metrics; add it there or pass -p gpu=NAME for a listed GPU'
        END AS _unknown_gpu_check
    FROM ceil c
),
src AS (
    SELECT *,
        ceil_mode <> 'none' AND ((peak_fp64_flop_per_s IS NOT NULL AND r_fp64 IS NOT NULL AND ceil_mode <> 'table')
            OR (peak_fp32_flop_per_s IS NOT NULL AND r_fp32 IS NOT NULL AND ceil_mode <> 'table')
            OR (peak_fp16_flop_per_s IS NOT NULL AND r_fp16 IS NOT NULL AND ceil_mode <> 'table')
            OR (peak_dram_bytes_per_s IS NOT NULL AND r_dram IS NOT NULL AND ceil_mode <> 'table')
            OR peak_l2_bytes_per_s IS NOT NULL OR peak_l1_bytes_per_s IS NOT NULL) AS from_report,
        ceil_mode <> 'none' AND ((peak_fp64_flop_per_s IS NOT NULL AND (r_fp64 IS NULL OR ceil_mode = 'table'))
            OR (peak_fp32_flop_per_s IS NOT NULL AND (r_fp32 IS NULL OR ceil_mode = 'table'))
            OR (peak_fp16_flop_per_s IS NOT NULL AND (r_fp16 IS NULL OR ceil_mode = 'table'))
            OR (peak_dram_bytes_per_s IS NOT NULL AND (r_dram IS NULL OR ceil_mode = 'table'))
            OR peak_tensor_flop_per_s IS NOT NULL) AS from_table
    FROM chosen
)
SELECT run_id, launch_id, kernel_name, function_name, device_name, compute_capability, pid, nvtx_range,
    time_ns, fp64_flop, fp32_flop, fp16_flop, tensor_flop, tensor_flop_estimated, tensor_datatype,
    dram_bytes, l2_bytes, l1_bytes,
    peak_fp64_flop_per_s, peak_fp32_flop_per_s, peak_fp16_flop_per_s, peak_tensor_flop_per_s,
    peak_dram_bytes_per_s, peak_l2_bytes_per_s, peak_l1_bytes_per_s,
    CASE WHEN ceil_mode = 'none' THEN 'none'
         WHEN from_report AND from_table THEN 'report+table:' || gpu
         WHEN from_report THEN 'report'
         WHEN from_table THEN 'table:' || gpu
    END AS ceiling_source,
    nullif(concat_ws('; ',
        CASE WHEN time_ns IS NULL THEN 'time_ns: no gpu__time_duration.sum (nor sm__cycles_elapsed.avg with .per_second)' END,
        CASE WHEN fp64_flop IS NULL THEN 'fp64_flop: no sm__sass_thread_inst_executed_op_d{add,mul,fma}_pred_on counters' END,
        CASE WHEN fp32_flop IS NULL THEN 'fp32_flop: no sm__sass_thread_inst_executed_op_f{add,mul,fma}_pred_on counters' END,
        CASE WHEN fp16_flop IS NULL THEN 'fp16_flop: no sm__sass_thread_inst_executed_op_h{add,mul,fma}_pred_on counters' END,
        CASE WHEN tensor_flop IS NULL AND tensor_inst IS NOT NULL
             THEN 'tensor_flop: no sm__ops_path_tensor_* counters and no documented FLOP per tensor instruction for compute capability ' || coalesce(compute_capability, '?')
             WHEN tensor_flop IS NULL THEN 'tensor_flop: no sm__ops_path_tensor_* or sm__inst_executed_pipe_tensor counters' END,
        CASE WHEN dram_bytes IS NULL THEN 'dram_bytes: no dram__bytes counter' END,
        CASE WHEN l2_bytes IS NULL THEN 'l2_bytes: no lts__t_bytes counter' END,
        CASE WHEN l1_bytes IS NULL THEN 'l1_bytes: no l1tex__t_bytes counter' END,
        CASE WHEN cc_major >= 10 AND fp32_flop IS NOT NULL AND (fadd2_n IS NULL OR fmul2_n IS NULL OR ffma2_n IS NULL)
             THEN 'fp32_flop: paired fp32 counters (fadd2/fmul2/ffma2) absent, their FLOPs are not counted' END,
        CASE WHEN ceil_mode <> 'none' AND peak_dram_bytes_per_s IS NULL THEN 'peak_dram_bytes_per_s: no dram__bytes.sum.peak_sustained and no table entry' END,
        CASE WHEN ceil_mode <> 'none' AND peak_l2_bytes_per_s IS NULL THEN 'peak_l2_bytes_per_s: no lts__t_bytes.sum.peak_sustained (the table has no L2 bandwidths)' END,
        CASE WHEN ceil_mode <> 'none' AND peak_l1_bytes_per_s IS NULL THEN 'peak_l1_bytes_per_s: no l1tex__t_bytes.sum.peak_sustained (the table has no L1 bandwidths)' END,
        CASE WHEN ceil_mode = 'none' THEN 'ceilings: not computed (--param ceilings=none)' END,
        _unknown_gpu_check
    ), '') AS missing,
    _unknown_gpu_check AS ceiling_note,
    nullif(concat_ws('; ',
        CASE WHEN passes > 1 THEN 'merged from ' || passes || ' ncu passes' END,
        CASE WHEN time_from_cycles THEN 'time_ns = sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second' END,
        CASE WHEN dfma_from_rate OR ffma_from_rate OR hfma_from_rate OR dadd_from_rate OR fadd_from_rate OR hadd_from_rate
                  OR dmul_from_rate OR fmul_from_rate OR hmul_from_rate
             THEN 'instruction counts = .sum.per_cycle_elapsed x sm__cycles_elapsed.avg (rates of another replay pass: approximate)' END,
        CASE WHEN dram_from_rate THEN 'dram_bytes = dram__bytes.sum.per_second x time' END,
        CASE WHEN l2_from_rate THEN 'l2_bytes = lts__t_bytes.sum.per_second x time' END,
        CASE WHEN l1_from_rate THEN 'l1_bytes = l1tex__t_bytes.sum.per_second x time' END,
        CASE WHEN tensor_flop_estimated THEN 'tensor_flop estimated: sm__inst_executed_pipe_tensor.sum x ' || tensor_flop_per_inst::BIGINT || ' FLOP/inst (compute capability ' || compute_capability || ')' END
    ), '') AS notes
FROM src;

