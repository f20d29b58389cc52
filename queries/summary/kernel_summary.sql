-- kernel_summary: GPU time per kernel name, as `nsys stats --report gpukernsum` (summed over grid/block).
--
-- One row per run and kernel name (the demangled name `nsys stats` shows). Every kernel execution
-- counts, whatever its device or stream; durations are end_ns - start_ns. time_pct is this name's
-- share of the summed kernel time of its run (not of wall time). Sorted by total time, descending.
--
-- @param top BIGINT 0 [>=0]  Keep only the N names with the most total time in each run (0 = all).
-- @column run_id     id     Run folder the row comes from.
-- @column name       text   Kernel name (demangled).
-- @column instances  count  Number of executions.
-- @column total_ns   ns     Sum of execution times.
-- @column avg_ns     ns     Mean execution time.
-- @column med_ns     ns     Median execution time (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest execution.
-- @column max_ns     ns     Longest execution.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single execution, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all kernel time in the run.
-- @key total_ns time_pct
SELECT run_id, name, n AS instances, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, time_pct
FROM tk_duration_summary('kernels')
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, name;
