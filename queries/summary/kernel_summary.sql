-- kernel_summary: GPU time per kernel name, as `nsys stats --report gpukernsum`.
-- @include core
--
-- One row per run and kernel name (the demangled name `nsys stats` shows), or with -p by=grid
-- per run, kernel name, grid and block dimensions, as gpukernsum prints it (a kernel launched
-- with two grid sizes is two rows there). Every kernel execution counts, whatever its device or
-- stream; durations are end_ns - start_ns. time_pct is this row's share of the summed kernel
-- time of its run (not of wall time). Sorted by total time, descending.
--
-- @param top BIGINT 0 [>=0]  Keep only the N rows with the most total time in each run (0 = all).
-- @param by VARCHAR name [name|grid]  One row per kernel name, or per name, grid and block (as nsys stats gpukernsum).
-- @column run_id
-- @column name       text   Kernel name (demangled).
-- @column grid       text   Grid dimensions XxYxZ (blocks) with -p by=grid; NULL by name.
-- @column block      text   Block dimensions XxYxZ (threads) with -p by=grid; NULL by name.
-- @column instances  count  Number of executions.
-- @column total_ns   ns     Sum of execution times.
-- @column avg_ns     ns     Mean execution time.
-- @column med_ns     ns     Median execution time (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest execution.
-- @column max_ns     ns     Longest execution.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single execution, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all kernel time in the run.
-- @key total_ns time_pct
-- @few_rows
-- @optional grid block
WITH k AS (
    SELECT run_id, name, duration_ns,
           CASE WHEN getvariable('by') = 'grid' THEN grid_x || 'x' || grid_y || 'x' || grid_z END AS grid,
           CASE WHEN getvariable('by') = 'grid' THEN block_x || 'x' || block_y || 'x' || block_z END AS block
    FROM kernels
),
g AS (
    SELECT run_id, name, grid, block, count(*) AS instances, sum(duration_ns)::BIGINT AS total_ns,
           unnest(tk_ns_stats(duration_ns))
    FROM k GROUP BY run_id, name, grid, block
),
s AS (
    SELECT *, 100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS time_pct,
           row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, name, grid, block) AS rank_in_run
    FROM g
)
SELECT run_id, name, grid, block, instances, total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns, time_pct
FROM s
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, name, grid, block;
