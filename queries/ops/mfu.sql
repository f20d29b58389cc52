-- mfu: Model-FLOP utilization per run, rank and step (and whole run): modelled operator FLOP / (time x the GPU's peak for the dominant precision).
-- @include core ops roofline
--
-- FLOP are op_flops' counted operator calls (the shape-based model of docs/metrics.md; no ncu
-- pass needed) of the process: scope 'step' takes the calls that start inside a step (tk_steps:
-- `step N` ranges, and whatever step sources that macro knows), over the step's wall time (its
-- range on the host); scope 'run' takes every counted call of the process over the span from its
-- first to its last GPU activity (kernel, copy or memset). dtype is the element type with the
-- most counted FLOP in the row; its peak comes from tracekit's per-GPU table (gpu_peaks, dense
-- figures): fp16 / bf16 / fp8 / tf32 the tensor-core peak of that type, fp32 the SIMT (CUDA core)
-- fp32 peak unless -p fp32_math=tf32 (torch.backends.cuda.matmul.allow_tf32), fp64 the fp64
-- tensor peak where the GPU has one, else its SIMT fp64 peak. The GPU is the one the process ran
-- the most kernel time on, named as the trace names it (devices: Kineto deviceProperties, nsys
-- device tables), matched to the table by that name or a documented alias (e.g. Kineto's 'NVIDIA
-- A100-PG509-200', ROCm's 'AMD Radeon Graphics' with 104 compute units = one MI250 GCD);
-- -p gpu=NAME overrides it. mfu = flop / (time_ns / 1e9 x peak_flop_per_s); NULL when the GPU or
-- its peak for dtype is unknown (see missing). coverage_pct says how much of the kernel time
-- launched in the row's window ran inside counted calls: below 100, the FLOP of the rest are
-- not modelled and mfu is a lower bound.
--
-- @param gpu VARCHAR NULL  Look the peak up under this device_name of gpu_peaks instead of the trace's GPU name.
-- @param fp32_math VARCHAR simt  Peak used for fp32 FLOP: 'simt' (CUDA cores) or 'tf32' (tensor cores; matmuls with allow_tf32).
-- @param op_dtype VARCHAR NULL  Element type for traces that record no argument types (nsys NVTX): fp32, fp16, bf16, ...
-- @column run_id
-- @column pid                 id      Process.
-- @column rank                id      Distributed rank of the process (processes.rank, else the manifest); NULL when unknown.
-- @column scope               enum    'step' (one row per step) or 'run' (the process's whole trace).
-- @column step                text    Step range name; NULL for scope 'run'.
-- @column mfu                 value   flop / (time x peak_flop_per_s), a fraction (0-1).
-- @column time_ns             ns      Step wall time, or the process's GPU activity span for scope 'run'.
-- @column flop                FLOP    Their modelled FLOP.
-- @column dtype               enum    Element type with the most FLOP (fp32, fp16, bf16, fp8, fp64, ...).
-- @column achieved_flop_per_s value   flop / time (FLOP per second).
-- @column peak_flop_per_s     value   Dense peak of that GPU for dtype (FLOP per second); NULL when unknown.
-- @column gpu                 text    Its name as looked up (the -p gpu value when given).
-- @column coverage_pct        %       Kernel time launched in the window inside counted calls, as a percentage of all kernel time launched in it.
-- @column step_id             id      The step range (nvtx_ranges.range_id); NULL for scope 'run'.
-- @column step_number         count   N of `step N`; NULL for scope 'run'.
-- @column ops                 count   Counted operator calls in the row.
-- @column device_id           id      GPU the process ran the most kernel time on.
-- @column peak                text    Which peak: 'tensor fp16', 'flop fp32', ... (gpu_peaks resource and datatype).
-- @column missing             text    Why mfu is NULL, when it is.
-- @key mfu flop
WITH f0 AS MATERIALIZED (SELECT run_id, range_id, pid, start_ns, depth, dtype, flop, counted FROM tk_op_flops()),
f AS (SELECT * FROM f0 WHERE counted),
-- launches inside a counted operator call (counted calls never nest: the last one starting before
-- the launch is the only candidate)
keys AS MATERIALIZED (SELECT * FROM tk_op_keys()),
cov AS MATERIALIZED (
    SELECT l.run_id, l.pid, l.start_ns AS call_start_ns, l.kernel_ns, coalesce(o.o_end >= l.k_end, false) AS covered
    FROM (SELECT * FROM keys WHERE NOT is_op) AS l
    ASOF LEFT JOIN (
        SELECT k.k_start AS o_start, k.k_end AS o_end
        FROM keys AS k JOIN f ON f.run_id = k.run_id AND f.range_id = k.range_id WHERE k.is_op
    ) AS o ON l.k_start >= o.o_start
),
launched AS MATERIALIZED (
    -- every kernel launch, by the host time of its launching call
    SELECT c.run_id, c.pid, c.start_ns AS call_start_ns, sum(k.end_ns - k.start_ns) AS kernel_ns
    FROM kernels k JOIN cuda_api c ON c.run_id = k.run_id AND c.pid = k.pid AND c.correlation_id = k.correlation_id
    GROUP BY c.run_id, c.pid, c.correlation_id, c.start_ns
),
st AS MATERIALIZED (SELECT * FROM tk_steps()),
span AS (
    SELECT run_id, pid, min(start_ns) AS w0, max(end_ns) AS w1 FROM tk_gpu_activity() GROUP BY run_id, pid
),
windows AS (
    SELECT run_id, pid, 'step' AS scope, step_id, step, step_number, start_ns AS w0, end_ns AS w1 FROM st
    UNION ALL
    SELECT DISTINCT run_id, pid, 'run', NULL::BIGINT, NULL::VARCHAR, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT
    FROM (SELECT run_id, pid FROM f UNION SELECT run_id, pid FROM span)
),
-- counted calls, launches and covered launches per window (scope 'run': all of the process's)
f_in AS (
    SELECT w.run_id, w.pid, w.scope, w.step_id, f.dtype, count(*) AS ops, sum(f.flop) AS flop
    FROM windows w JOIN f ON f.run_id = w.run_id AND f.pid = w.pid
     AND (w.scope = 'run' OR (f.start_ns >= w.w0 AND f.start_ns < w.w1))
    GROUP BY w.run_id, w.pid, w.scope, w.step_id, f.dtype
),
by_window AS (
    SELECT run_id, pid, scope, step_id, sum(ops)::BIGINT AS ops, sum(flop) AS flop, arg_max(dtype, flop) AS dtype
    FROM f_in GROUP BY run_id, pid, scope, step_id
),
l_in AS (
    SELECT w.run_id, w.pid, w.scope, w.step_id, sum(l.kernel_ns) AS kernel_ns
    FROM windows w JOIN launched l ON l.run_id = w.run_id AND l.pid = w.pid
     AND (w.scope = 'run' OR (l.call_start_ns >= w.w0 AND l.call_start_ns < w.w1))
    GROUP BY w.run_id, w.pid, w.scope, w.step_id
),
c_in AS (
    SELECT w.run_id, w.pid, w.scope, w.step_id, sum(c.kernel_ns) AS covered_ns
    FROM windows w JOIN cov c ON c.run_id = w.run_id AND c.pid = w.pid AND c.covered
     AND (w.scope = 'run' OR (c.call_start_ns >= w.w0 AND c.call_start_ns < w.w1))
    GROUP BY w.run_id, w.pid, w.scope, w.step_id
),
dev AS (
    -- the process's main GPU and its name
    SELECT k.run_id, k.pid, arg_max(k.device_id, k.ns) AS device_id
    FROM (SELECT run_id, pid, device_id, sum(end_ns - start_ns) AS ns FROM kernels GROUP BY run_id, pid, device_id) k
    GROUP BY k.run_id, k.pid
),
named AS (
    SELECT d.run_id, d.pid, d.device_id,
           coalesce(getvariable('gpu'), tk_gpu_table_name(any_value(v.name), any_value(v.compute_capability), any_value(v.sm_count))) AS gpu,
           any_value(v.name) AS trace_gpu
    FROM dev d LEFT JOIN devices v ON v.run_id = d.run_id AND v.device_id = d.device_id
    GROUP BY d.run_id, d.pid, d.device_id
),
rows AS (
    SELECT w.run_id, w.pid, w.scope, w.step_id, w.step, w.step_number,
           CASE WHEN w.scope = 'step' THEN w.w1 - w.w0 ELSE s.w1 - s.w0 END AS time_ns,
           coalesce(b.ops, 0) AS ops, coalesce(b.flop, 0) AS flop, b.dtype,
           n.device_id, n.gpu, n.trace_gpu, l.kernel_ns, coalesce(c.covered_ns, 0) AS covered_ns,
           CASE WHEN b.dtype IN ('fp16', 'bf16', 'fp8', 'tf32') THEN 'tensor'
                WHEN b.dtype = 'fp32' AND lower(getvariable('fp32_math')) = 'tf32' THEN 'tensor'
                WHEN b.dtype = 'fp32' THEN 'flop'
                WHEN b.dtype = 'fp64' THEN 'tensor' END AS want_resource,
           CASE WHEN b.dtype = 'fp32' AND lower(getvariable('fp32_math')) = 'tf32' THEN 'tf32' ELSE b.dtype END AS want_datatype
    FROM windows w
    LEFT JOIN span s ON s.run_id = w.run_id AND s.pid = w.pid
    LEFT JOIN by_window b ON b.run_id = w.run_id AND b.pid = w.pid AND b.scope = w.scope AND b.step_id IS NOT DISTINCT FROM w.step_id
    LEFT JOIN l_in l ON l.run_id = w.run_id AND l.pid = w.pid AND l.scope = w.scope AND l.step_id IS NOT DISTINCT FROM w.step_id
    LEFT JOIN c_in c ON c.run_id = w.run_id AND c.pid = w.pid AND c.scope = w.scope AND c.step_id IS NOT DISTINCT FROM w.step_id
    LEFT JOIN named n ON n.run_id = w.run_id AND n.pid = w.pid
),
peaks AS (
    -- the wanted peak, else (fp64 without fp64 tensor cores, fp16 without tensor cores) the SIMT one
    SELECT r.run_id, r.pid, r.scope, r.step_id,
           coalesce(max(p.value) FILTER (WHERE p.resource = r.want_resource AND p.datatype = r.want_datatype),
                    max(p.value) FILTER (WHERE p.resource = 'flop' AND p.datatype = r.want_datatype)) AS peak_flop_per_s,
           CASE WHEN max(p.value) FILTER (WHERE p.resource = r.want_resource AND p.datatype = r.want_datatype) IS NOT NULL
                THEN r.want_resource || ' ' || r.want_datatype
                WHEN max(p.value) FILTER (WHERE p.resource = 'flop' AND p.datatype = r.want_datatype) IS NOT NULL
                THEN 'flop ' || r.want_datatype END AS peak,
           count(p.device_name) > 0 AS gpu_known
    FROM rows r
    LEFT JOIN gpu_peaks p ON p.device_name = r.gpu AND coalesce(p.sparsity, 'dense') IN ('dense', '')
    GROUP BY r.run_id, r.pid, r.scope, r.step_id, r.want_resource, r.want_datatype
),
checked AS (
    SELECT *, CASE WHEN lower(getvariable('fp32_math')) NOT IN ('simt', 'tf32')
                   THEN error('mfu: -p fp32_math=' || getvariable('fp32_math') || ' is not simt or tf32') END AS _chk
    FROM rows
)
SELECT r.run_id, r.pid, rk.rank, r.scope, r.step,
       r.flop / (r.time_ns / 1e9 * p.peak_flop_per_s) AS mfu,
       r.time_ns, r.flop, r.dtype, r.flop / (r.time_ns / 1e9) AS achieved_flop_per_s,
       p.peak_flop_per_s, r.gpu,
       100.0 * r.covered_ns / nullif(r.kernel_ns, 0) AS coverage_pct,
       r.step_id, r.step_number, r.ops, r.device_id, p.peak,
       CASE WHEN r.ops = 0 THEN 'no operator call with a FLOP model (a trace without shapes? record_shapes=True)'
            WHEN r.time_ns IS NULL THEN 'no GPU activity to time the run by'
            WHEN r.gpu IS NULL AND r.device_id IS NULL THEN 'no kernels: the GPU is unknown (pass -p gpu=NAME)'
            WHEN r.gpu IS NULL THEN 'GPU ' || coalesce('''' || r.trace_gpu || '''', r.device_id::VARCHAR) || ' is not named in the trace''s devices table (pass -p gpu=NAME)'
            WHEN NOT p.gpu_known THEN 'GPU ''' || r.gpu || ''' is not in the peak table (queries/data/gpu_peaks.csv; add it or pass -p gpu=NAME)'
            WHEN p.peak_flop_per_s IS NULL THEN 'the peak table has no ' || coalesce(r.want_resource || ' ' || r.want_datatype, r.dtype) || ' peak for ''' || r.gpu || ''''
       END AS missing
FROM checked r
LEFT JOIN peaks p ON p.run_id = r.run_id AND p.pid = r.pid AND p.scope = r.scope AND p.step_id IS NOT DISTINCT FROM r.step_id
LEFT JOIN tk_ranks() rk ON rk.run_id = r.run_id AND rk.pid = r.pid
ORDER BY r.run_id, r.pid, r.scope = 'run', r.step_number, r.step_id;
