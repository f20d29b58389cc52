-- osrt_summary: Host time per OS runtime function (poll, ioctl, pthread_*, read, ...), as `nsys stats --report osrtsum`.
-- @include core
--
-- One row per run and function name. Every traced call in osrt_api counts, whatever its thread,
-- nesting level or return value; durations are end_ns - start_ns, zero and negative ones
-- included, as nsys stats does. (nsys's own start/finish marker rows of OSRT_API, event classes
-- other than OS runtime calls, are not calls and are not in osrt_api.) time_pct is this name's
-- share of the summed OS runtime time of its run: the calls of all threads add up, so it is not
-- a share of wall time. Sorted by total time, descending.
--
-- @param top BIGINT 0 [>=0]  Keep only the N names with the most total time in each run (0 = all).
-- @column run_id
-- @column name       text   Function name.
-- @column calls      count  Number of calls.
-- @column total_ns   ns     Sum of call durations.
-- @column avg_ns     ns     Mean call duration.
-- @column med_ns     ns     Median call duration (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest call.
-- @column max_ns     ns     Longest call.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single call, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all OS runtime call time in the run.
-- @key total_ns time_pct
-- @few_rows
SELECT run_id, name, n AS calls, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, time_pct
FROM tk_duration_summary('osrt_api')
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, name;
