-- op_flops: FLOP, bytes and achieved rates of each PyTorch operator call, from the shapes the profiler recorded (no ncu pass needed).
-- @include ops
--
-- One row per operator call with a cost model (or, with -p all_ops=true, per call that recorded
-- shapes; flop NULL without a model). The shapes come from nvtx_ranges.input_dims /
-- input_types / concrete_inputs: Kineto cpu_op events of a trace taken with record_shapes=True,
-- or nsys PyTorch NVTX ranges (emit_nvtx(record_shapes=True): 'sizes = [[..], ..]'). FLOP and
-- bytes follow the formulas of docs/metrics.md ("FLOP and bytes from operator shapes"): matmul
-- family 2*B*M*K*N, convolution 2*N*Cout*prod(out)*Cin/groups*prod(kernel) (output size from the
-- stride, padding and dilation in concrete_inputs), attention 2*B*H*pairs*(E+Ev) forward
-- (pairs = L*S, or the causal triangle) and 2*B*H*pairs*(3E+2Ev) backward, norms 8 (RMS: 4)
-- FLOP per element, softmax 5, reductions 1, elementwise 1 per output element, copies and
-- embedding 0; bytes = tensor arguments read + output written (once each: a lower bound on
-- DRAM traffic). gpu_ns adds up the kernels launched inside the call (its child operators
-- included), matched as nvtx_gpu_projection does (launch on the operator's thread, inside its
-- time; kernels through pid and correlation ID), by running sums: linear in calls + launches. Operators nest (aten::linear -> aten::addmm):
-- `counted` marks the calls whose FLOP a sum should take (a model, and no modelled operator
-- inside), so sum(flop) FILTER (WHERE counted) counts each FLOP once. A coverage line on stderr
-- says, per run, how much of the GPU time ran inside counted operators.
--
-- @param all_ops BOOLEAN false  Also list operator calls without a model (flop and bytes NULL).
-- @param op_dtype VARCHAR NULL  Element type for traces that record no argument types (nsys NVTX): fp32, fp16, bf16, ...; without it their bytes are NULL.
-- @notice SELECT 'op_flops: run ' || r.run_id || ': FLOP modelled for ' || printf('%.1f', r.coverage_pct) || '% of GPU kernel time (' || printf('%.3f', r.covered_ms) || ' of ' || printf('%.3f', r.kernel_ms) || ' ms)' || coalesce('; most time without a model: ' || r.uncovered_top, '') || coalesce('; ' || b.n || ' call(s) of ' || b.ops || ' with shapes that do not fit the operator: FLOP NULL', '') FROM (SELECT DISTINCT run_id, coverage_pct, covered_ms, kernel_ms, uncovered_top FROM result WHERE coverage_pct IS NOT NULL) r LEFT JOIN (SELECT run_id, count(*) AS n, string_agg(DISTINCT name, ', ' ORDER BY name) AS ops FROM result WHERE family IS NOT NULL AND flop IS NULL AND family <> 'embedding' GROUP BY run_id) b ON b.run_id = r.run_id ORDER BY r.run_id
-- @column run_id
-- @column pid            id     Process of the operator call.
-- @column tid            id     Thread of the operator call.
-- @column range_id from nvtx_ranges
-- @column name           text   Operator name (aten::mm, ...; PyTorch's NVTX suffixes ', seq = ..' removed).
-- @column family         enum   Model used: matmul, convolution, attention, norm, softmax, reduction, elementwise, copy, embedding; NULL without a model.
-- @column input_dims from nvtx_ranges
-- @column dtype          enum   Element type of the first floating-point tensor argument (else the first tensor's): fp32, fp16, bf16, fp64, fp8, int64, ...
-- @column flop           FLOP   Modelled floating-point operations of the call (docs/metrics.md); NULL without a model.
-- @column bytes          bytes  Modelled bytes: tensor arguments read plus the output written; NULL without a model or element type.
-- @column start_ns       ns     Start of the call (CPU side).
-- @column duration_ns    ns     CPU duration of the call.
-- @column kernels        count  Kernels launched inside the call (child operators included); NULL when none.
-- @column gpu_ns         ns     Summed duration of those kernels; NULL when none.
-- @column flop_per_s     value  flop / gpu_ns, FLOP per second.
-- @column bytes_per_s    bytes/s  bytes / gpu_ns.
-- @column intensity      value  flop / bytes (FLOP per byte, arithmetic intensity).
-- @column counted        flag   True when the call's FLOP count toward totals (it has a model and no modelled operator runs inside it).
-- @column coverage_pct   %      Per run: kernel time launched inside counted calls as a percentage of all kernel time of the run; NULL without kernels.
-- @column covered_ms     value  Per run: that kernel time, in milliseconds.
-- @column kernel_ms      value  Per run: all kernel time, in milliseconds.
-- @column uncovered_top  text   Per run: the operators (innermost) with the most kernel time outside counted calls, with their share of the run's kernel time.
-- @key flop
WITH f0 AS MATERIALIZED (SELECT * FROM tk_op_flops()),
g AS (SELECT * FROM tk_op_gpu()),
f AS (SELECT f0.*, g.kernels, g.gpu_ns FROM f0 LEFT JOIN g USING (run_id, range_id)),
-- per launching call: covered when a counted operator encloses it (counted calls never nest, so
-- the last one starting before the launch is the only candidate), and the name of the innermost
-- operator enclosing it (the last one starting before it, when that one still runs)
keys AS MATERIALIZED (SELECT * FROM tk_op_keys()),
launch AS (SELECT run_id, k_start, k_end, kernel_ns FROM keys WHERE NOT is_op),
opk AS (
    SELECT k.run_id, k.range_id, k.k_start AS o_start, k.k_end AS o_end, f0.op, f0.counted, r.parent_range_id
    FROM keys AS k JOIN f0 ON f0.run_id = k.run_id AND f0.range_id = k.range_id
    JOIN nvtx_ranges AS r ON r.run_id = k.run_id AND r.range_id = k.range_id
    WHERE k.is_op
),
cov0 AS (
    SELECT l.*, o.o_end >= l.k_end AS covered
    FROM launch AS l ASOF LEFT JOIN (SELECT * FROM opk WHERE counted) AS o ON l.k_start >= o.o_start
),
-- the innermost enclosing operator: the last one starting before the launch if it still runs,
-- else its parent or grandparent (the last one may be a finished sibling)
cov AS (
    SELECT c.run_id, c.kernel_ns, coalesce(c.covered, false) AS covered,
           CASE WHEN o.o_end >= c.k_end THEN o.op WHEN p1.o_end >= c.k_end THEN p1.op
                WHEN p2.o_end >= c.k_end THEN p2.op ELSE '(no enclosing operator with shapes)' END AS innermost_op
    FROM cov0 AS c ASOF LEFT JOIN opk AS o ON c.run_id = o.run_id AND c.k_start >= o.o_start
    LEFT JOIN opk AS p1 ON p1.run_id = o.run_id AND p1.range_id = o.parent_range_id
    LEFT JOIN opk AS p2 ON p2.run_id = p1.run_id AND p2.range_id = p1.parent_range_id
),
tot AS (
    SELECT run_id, sum(end_ns - start_ns) AS kernel_ns FROM kernels GROUP BY run_id
),
covered AS (
    SELECT run_id, sum(kernel_ns) FILTER (WHERE covered) AS covered_ns FROM cov GROUP BY run_id
),
unc AS (
    SELECT run_id, string_agg(innermost_op || ' ' || printf('%.1f', pct) || '%', ', ' ORDER BY ns DESC, innermost_op) AS uncovered_top
    FROM (
        SELECT c.run_id, c.innermost_op, sum(c.kernel_ns) AS ns, 100.0 * sum(c.kernel_ns) / any_value(t.kernel_ns) AS pct,
               row_number() OVER (PARTITION BY c.run_id ORDER BY sum(c.kernel_ns) DESC, c.innermost_op) AS rk
        FROM cov AS c JOIN tot AS t USING (run_id)
        WHERE NOT c.covered
        GROUP BY c.run_id, c.innermost_op
    ) WHERE rk <= 3
    GROUP BY run_id
),
runcov AS (
    SELECT t.run_id, 100.0 * coalesce(c.covered_ns, 0) / t.kernel_ns AS coverage_pct,
           coalesce(c.covered_ns, 0) / 1e6 AS covered_ms, t.kernel_ns / 1e6 AS kernel_ms, u.uncovered_top
    FROM tot AS t LEFT JOIN covered AS c USING (run_id) LEFT JOIN unc AS u USING (run_id)
    WHERE t.kernel_ns > 0
)
SELECT f.run_id, f.pid, f.tid, f.range_id, f.op AS name, f.family, f.input_dims, f.dtype, f.flop, f.bytes,
       f.start_ns, f.end_ns - f.start_ns AS duration_ns, f.kernels, f.gpu_ns,
       f.flop / (f.gpu_ns / 1e9) AS flop_per_s, f.bytes / (f.gpu_ns / 1e9) AS bytes_per_s,
       f.flop / nullif(f.bytes, 0) AS intensity, f.counted,
       r.coverage_pct, r.covered_ms, r.kernel_ms, r.uncovered_top
FROM f LEFT JOIN runcov AS r USING (run_id)
WHERE f.family IS NOT NULL OR coalesce(getvariable('all_ops'), false)
ORDER BY f.run_id, f.start_ns, f.depth, f.range_id;
