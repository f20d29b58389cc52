-- study_tensor_core_names: Per run, the share of kernel time in kernels whose name says they use tensor cores (the study's name-based tensor_core_time_share).
-- @include study
--
-- tc_ns sums the durations (duration_ns, as kernel_summary's total_ns) of the kernels that
-- tk_is_tensor_core_name (queries/study/_macros.sql) accepts; total_ns sums every kernel of the
-- run; tc_share = tc_ns / total_ns. A name-based estimate: `tracekit study` prefers the ncu
-- counters (roofline tensor_flop) when an ncu pass of the same workload exists. Runs without
-- kernel time have no row.
--
-- @key tc_share tc_ns
-- @column run_id
-- @column tc_ns     ns     Summed duration of kernels with a tensor-core name.
-- @column total_ns  ns     Summed duration of all kernels of the run.
-- @column tc_share  value  tc_ns / total_ns, a fraction 0-1.
-- @requires kernels
SELECT run_id, tc_ns, total_ns, tc_ns / total_ns AS tc_share
FROM (
    SELECT run_id,
           CAST(coalesce(sum(duration_ns) FILTER (WHERE tk_is_tensor_core_name(name)), 0) AS BIGINT) AS tc_ns,
           CAST(sum(duration_ns) AS BIGINT) AS total_ns
    FROM kernels GROUP BY run_id
)
WHERE total_ns > 0
ORDER BY run_id;
