-- roofline_by_nvtx: FLOPs, bytes and nsys kernel time per NVTX range (or per range instance, e.g. per step), joining an ncu pass to the nsys timeline.
-- @include roofline
--
-- Needs a run folder with both an nsys export and ncu results of the same workload
-- (`tracekit convert run.sqlite run.ncu-rep -o RUN`). Matching rule: kernel names are compared
-- by tk_kernel_key (whitespace removed, nsys's '(int)4' casts and '<unnamed>' spelled as ncu
-- spells them: nsys and ncu demangle differently); the k-th ncu launch
-- of a name (by launch_id) matches the k-th nsys kernel of that name (by start time) among the
-- kernels whose launching CUDA API call lies inside the NVTX range instance the ncu pass targeted
-- (params range/instance; without range, the whole capture). Matched kernels take their own
-- launch's counters ("exact"); every other nsys kernel whose name ncu profiled takes the per-launch
-- mean of that name's ncu launches ("estimated"); kernels of names ncu never profiled count in
-- time_ns but not in covered_time_ns. A kernel belongs to a reported NVTX range when its launching
-- API call (else its own start) lies in the range's time window in the same process, any thread.
-- Rates divide by nsys kernel time of the covered kernels, so each kernel weighs by the time it
-- really took in the traced run (not ncu's replay time). Failure cases (docs/roofline.md):
-- ncu --launch-skip inside the range, kernels launched from other threads than the range's, JIT
-- names differing between passes, different process or rank; ncu_matched < ncu_launches shows it.
--
-- @param range VARCHAR NULL  Name of the NVTX range the ncu pass targeted (e.g. 'step 3'); NULL: match over the whole nsys capture.
-- @param instance BIGINT 1 [>=1]  Which occurrence of that range (by start time) the ncu pass profiled.
-- @param name_regex VARCHAR .*  Report NVTX ranges whose name matches this regular expression.
-- @param max_depth INTEGER 0 [>=0]  Report push/pop ranges up to this nesting depth (0 = outermost; start/end ranges always).
-- @param group_by VARCHAR name [name|instance]  'name' (one row per range name) or 'instance' (one row per range instance: per step).
-- @param ceilings VARCHAR none  Ceilings are not used here (see `roofline`).
-- @column run_id
-- @column range_name  text  NVTX range name.
-- @column range_id  id  nvtx_ranges.range_id of the instance (group_by = 'instance'); NULL per name.
-- @column start_ns  ns  Start of the first instance.
-- @column ranges  count  Range instances aggregated.
-- @column kernels  count  nsys kernels launched inside the range(s).
-- @column exact_kernels  count  Of those, kernels matched one-to-one to an ncu launch.
-- @column estimated_kernels  count  Kernels valued by their name's mean ncu launch.
-- @column time_ns  ns  Summed nsys duration of all kernels in the range(s).
-- @column covered_time_ns  ns  Summed nsys duration of the kernels with ncu values (exact or estimated).
-- @column coverage_pct  %  covered_time_ns / time_ns.
-- @column fp64_flop  FLOP  Sum over covered kernels (NULL when any lacks the counters).
-- @column fp32_flop  FLOP  Same for fp32 (paired instructions counted).
-- @column fp16_flop  FLOP  Same for fp16.
-- @column tensor_flop  FLOP  Same for tensor cores.
-- @column flop  FLOP  All measured precisions.
-- @column dram_bytes  bytes  Sum of DRAM bytes over covered kernels.
-- @column l2_bytes  bytes  Sum of L2 bytes.
-- @column l1_bytes  bytes  Sum of L1 bytes.
-- @column dram_intensity  value  flop / dram_bytes (FLOP per byte).
-- @column l2_intensity  value  flop / l2_bytes (FLOP per byte).
-- @column l1_intensity  value  flop / l1_bytes (FLOP per byte).
-- @column flop_per_s  value  flop / covered_time_ns (FLOP per second, nsys-time weighted).
-- @column dram_bytes_per_s  bytes/s  dram_bytes / covered_time_ns.
-- @column ncu_launches  count  ncu launches in the run.
-- @column ncu_matched  count  ncu launches matched to an nsys kernel of the targeted range.
-- @column missing  text  Why a column is NULL.
-- @key flop dram_bytes flop_per_s
-- @requires ncu_launches kernels nvtx_ranges
-- @empty no ncu launch matched a kernel of the nsys timeline inside an NVTX range (same name, in launch order; check --param range and name_regex)
WITH target AS (
    SELECT run_id, pid, start_ns, end_ns FROM (
        SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY start_ns, range_id) AS inst
        FROM nvtx_ranges WHERE name = getvariable('range') AND end_ns IS NOT NULL
    ) WHERE inst = getvariable('instance')
),
check_target AS (
    SELECT CASE WHEN getvariable('range') IS NOT NULL AND (SELECT count(*) FROM target) = 0
        THEN error('roofline_by_nvtx: no closed NVTX range named ' || chr(39) || getvariable('range') || chr(39)
                   || ' (instance ' || getvariable('instance') || ') in the run(s)') END AS ok,
           CASE WHEN lower(getvariable('group_by')) NOT IN ('name', 'instance')
        THEN error('roofline_by_nvtx: --param group_by=' || getvariable('group_by') || ' is not name or instance') END AS ok2
),
k AS (
    SELECT k.run_id, k.pid, k.device_id, k.correlation_id, k.start_ns, k.end_ns - k.start_ns AS dur_ns,
           tk_kernel_key(k.name) AS key,
           coalesce(a.start_ns, k.start_ns) AS launch_ns
    FROM kernels k
    LEFT JOIN cuda_api a ON a.run_id = k.run_id AND a.pid = k.pid AND a.correlation_id = k.correlation_id
),
k_target AS (
    SELECT k.*, row_number() OVER (PARTITION BY k.run_id, k.key ORDER BY k.start_ns, k.correlation_id) AS ord
    FROM k
    WHERE getvariable('range') IS NULL
       OR EXISTS (SELECT 1 FROM target t WHERE t.run_id = k.run_id AND t.pid = k.pid
                  AND k.launch_ns >= t.start_ns AND k.launch_ns <= t.end_ns)
),
ncu AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, key ORDER BY launch_id) AS ord
    FROM (SELECT *, tk_kernel_key(kernel_name) AS key FROM tk_roofline_launches())
),
matched AS (
    SELECT kt.run_id, kt.pid, kt.correlation_id, kt.start_ns, kt.key, n.launch_id,
           n.fp64_flop, n.fp32_flop, n.fp16_flop, n.tensor_flop, n.dram_bytes, n.l2_bytes, n.l1_bytes
    FROM k_target kt JOIN ncu n ON n.run_id = kt.run_id AND n.key = kt.key AND n.ord = kt.ord
),
name_avg AS (
    SELECT run_id, key,
        CASE WHEN count(fp64_flop) = count(*) THEN avg(fp64_flop) END AS fp64_flop,
        CASE WHEN count(fp32_flop) = count(*) THEN avg(fp32_flop) END AS fp32_flop,
        CASE WHEN count(fp16_flop) = count(*) THEN avg(fp16_flop) END AS fp16_flop,
        CASE WHEN count(tensor_flop) = count(*) THEN avg(tensor_flop) END AS tensor_flop,
        CASE WHEN count(dram_bytes) = count(*) THEN avg(dram_bytes) END AS dram_bytes,
        CASE WHEN count(l2_bytes) = count(*) THEN avg(l2_bytes) END AS l2_bytes,
        CASE WHEN count(l1_bytes) = count(*) THEN avg(l1_bytes) END AS l1_bytes
    FROM ncu GROUP BY run_id, key
),
kv AS (
    SELECT k.*, m.launch_id IS NOT NULL AS exact, (m.launch_id IS NULL AND a.key IS NOT NULL) AS estimated,
        CASE WHEN m.launch_id IS NOT NULL THEN m.fp64_flop ELSE a.fp64_flop END AS fp64_flop,
        CASE WHEN m.launch_id IS NOT NULL THEN m.fp32_flop ELSE a.fp32_flop END AS fp32_flop,
        CASE WHEN m.launch_id IS NOT NULL THEN m.fp16_flop ELSE a.fp16_flop END AS fp16_flop,
        CASE WHEN m.launch_id IS NOT NULL THEN m.tensor_flop ELSE a.tensor_flop END AS tensor_flop,
        CASE WHEN m.launch_id IS NOT NULL THEN m.dram_bytes ELSE a.dram_bytes END AS dram_bytes,
        CASE WHEN m.launch_id IS NOT NULL THEN m.l2_bytes ELSE a.l2_bytes END AS l2_bytes,
        CASE WHEN m.launch_id IS NOT NULL THEN m.l1_bytes ELSE a.l1_bytes END AS l1_bytes
    FROM k
    LEFT JOIN matched m ON m.run_id = k.run_id AND m.pid = k.pid AND m.correlation_id IS NOT DISTINCT FROM k.correlation_id
        AND m.start_ns = k.start_ns AND m.key = k.key
    LEFT JOIN name_avg a ON a.run_id = k.run_id AND a.key = k.key
),
r AS (
    SELECT run_id, range_id, pid, name, start_ns, end_ns FROM nvtx_ranges
    WHERE end_ns IS NOT NULL AND regexp_matches(name, coalesce(getvariable('name_regex'), '.*'))
      AND coalesce(depth, 0) <= getvariable('max_depth')
),
rk AS (
    SELECT r.run_id, r.name AS range_name, r.range_id, r.start_ns AS range_start_ns,
           kv.dur_ns, kv.exact, kv.estimated, kv.fp64_flop, kv.fp32_flop, kv.fp16_flop, kv.tensor_flop,
           kv.dram_bytes, kv.l2_bytes, kv.l1_bytes, kv.start_ns IS NOT NULL AS has_kernel
    FROM r LEFT JOIN kv ON kv.run_id = r.run_id AND kv.pid = r.pid
        AND kv.launch_ns >= r.start_ns AND kv.launch_ns <= r.end_ns
),
g AS (
    SELECT run_id, range_name,
        CASE WHEN lower(getvariable('group_by')) = 'instance' THEN range_id END AS range_id,
        min(range_start_ns) AS start_ns,
        count(DISTINCT range_id) AS ranges,
        count(*) FILTER (WHERE has_kernel) AS kernels,
        count(*) FILTER (WHERE exact) AS exact_kernels,
        count(*) FILTER (WHERE estimated) AS estimated_kernels,
        coalesce(sum(dur_ns), 0) AS time_ns,
        coalesce(sum(dur_ns) FILTER (WHERE exact OR estimated), 0) AS covered_time_ns,
        count(*) FILTER (WHERE exact OR estimated) AS covered,
        CASE WHEN count(fp64_flop) = count(*) FILTER (WHERE exact OR estimated) THEN sum(fp64_flop) END AS fp64_flop,
        CASE WHEN count(fp32_flop) = count(*) FILTER (WHERE exact OR estimated) THEN sum(fp32_flop) END AS fp32_flop,
        CASE WHEN count(fp16_flop) = count(*) FILTER (WHERE exact OR estimated) THEN sum(fp16_flop) END AS fp16_flop,
        CASE WHEN count(tensor_flop) = count(*) FILTER (WHERE exact OR estimated) THEN sum(tensor_flop) END AS tensor_flop,
        CASE WHEN count(dram_bytes) = count(*) FILTER (WHERE exact OR estimated) THEN sum(dram_bytes) END AS dram_bytes,
        CASE WHEN count(l2_bytes) = count(*) FILTER (WHERE exact OR estimated) THEN sum(l2_bytes) END AS l2_bytes,
        CASE WHEN count(l1_bytes) = count(*) FILTER (WHERE exact OR estimated) THEN sum(l1_bytes) END AS l1_bytes,
        count(*) FILTER (WHERE (exact OR estimated) AND fp64_flop IS NULL AND fp32_flop IS NULL
                         AND fp16_flop IS NULL AND tensor_flop IS NULL) AS no_flop
    FROM rk
    GROUP BY ALL
),
f AS (
    SELECT *,
        CASE WHEN covered = 0 OR no_flop > 0 THEN NULL
             ELSE coalesce(fp64_flop, 0) + coalesce(fp32_flop, 0) + coalesce(fp16_flop, 0) + coalesce(tensor_flop, 0) END AS flop
    FROM g
),
runs_ncu AS (
    SELECT n.run_id, count(*) AS ncu_launches,
           (SELECT count(*) FROM matched m WHERE m.run_id = n.run_id) AS ncu_matched
    FROM ncu n GROUP BY n.run_id
)
SELECT f.run_id, range_name, range_id, start_ns, ranges, kernels, exact_kernels, estimated_kernels,
    time_ns::BIGINT AS time_ns, covered_time_ns::BIGINT AS covered_time_ns,
    100.0 * covered_time_ns / nullif(time_ns, 0) AS coverage_pct,
    fp64_flop, fp32_flop, fp16_flop, tensor_flop, flop, dram_bytes, l2_bytes, l1_bytes,
    flop / nullif(dram_bytes, 0) AS dram_intensity,
    flop / nullif(l2_bytes, 0) AS l2_intensity,
    flop / nullif(l1_bytes, 0) AS l1_intensity,
    flop / nullif(covered_time_ns, 0) * 1e9 AS flop_per_s,
    dram_bytes / nullif(covered_time_ns, 0) * 1e9 AS dram_bytes_per_s,
    coalesce(rn.ncu_launches, 0) AS ncu_launches, coalesce(rn.ncu_matched, 0) AS ncu_matched,
    nullif(concat_ws('; ',
        CASE WHEN rn.ncu_launches IS NULL THEN 'the run has no ncu launches' END,
        CASE WHEN kernels = 0 THEN 'no kernel launched inside the range' END,
        CASE WHEN covered = 0 AND kernels > 0 THEN 'ncu profiled none of the kernel names in the range' END,
        CASE WHEN covered > 0 AND fp64_flop IS NULL THEN 'fp64_flop: a covered kernel lacks fp64 counters' END,
        CASE WHEN covered > 0 AND fp32_flop IS NULL THEN 'fp32_flop: a covered kernel lacks fp32 counters' END,
        CASE WHEN covered > 0 AND fp16_flop IS NULL THEN 'fp16_flop: a covered kernel lacks fp16 counters' END,
        CASE WHEN covered > 0 AND tensor_flop IS NULL THEN 'tensor_flop: a covered kernel lacks tensor counters' END,
        CASE WHEN covered > 0 AND dram_bytes IS NULL THEN 'dram_bytes: a covered kernel lacks dram__bytes' END,
        CASE WHEN covered > 0 AND l2_bytes IS NULL THEN 'l2_bytes: a covered kernel lacks lts__t_bytes' END,
        CASE WHEN covered > 0 AND l1_bytes IS NULL THEN 'l1_bytes: a covered kernel lacks l1tex__t_bytes' END
    ), '') AS missing
FROM f LEFT JOIN runs_ncu rn ON rn.run_id = f.run_id
WHERE (SELECT coalesce(ok, ok2) FROM check_target) IS NULL
ORDER BY f.run_id, start_ns, range_name, range_id;
