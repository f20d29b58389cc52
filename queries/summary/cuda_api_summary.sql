-- cuda_api_summary: Host time per CUDA API function, as `nsys stats --report cudaapisum`.
-- @include core
--
-- One row per run and API function name. Every call in cuda_api counts (runtime and driver
-- calls alike, as nsys's CUPTI_ACTIVITY_KIND_RUNTIME table holds both), whatever its thread or
-- return value; durations are end_ns - start_ns, zero and negative ones included, as nsys stats
-- does. Names have CUPTI's version suffix removed (cudaLaunchKernel_v7000 -> cudaLaunchKernel,
-- cudaGraphLaunch_v10000 -> cudaGraphLaunch), as nsys stats prints them (nsys 2022.4 removes only
-- 4-digit suffixes); nsys groups by the raw name, so two spellings of one function are one row
-- here and two there. time_pct is this name's share of
-- the summed API time of its run (not of wall time). Sorted by total time, descending.
--
-- @param top BIGINT 0 [>=0]  Keep only the N names with the most total time in each run (0 = all).
-- @column run_id
-- @column name       text   API function name, without CUPTI's _vNNNN suffix.
-- @column calls      count  Number of calls.
-- @column total_ns   ns     Sum of call durations.
-- @column avg_ns     ns     Mean call duration.
-- @column med_ns     ns     Median call duration (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest call.
-- @column max_ns     ns     Longest call.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single call, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all CUDA API time in the run.
-- @key total_ns time_pct
-- @few_rows
SELECT run_id, name, n AS calls, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, time_pct
FROM tk_duration_summary('cuda_api')
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, name;
