-- critical_path_summary: Per step, category and rank: time on the step's critical path and its share of the step's wall time.
-- @include critical_path
--
-- The segments of critical_path (see there; docs/whatif.md) summed per run, step, category and
-- rank. For every step the time_ns of its rows add up to wall_ns, and share_pct to 100.
--
-- @key share_pct time_ns
-- @column run_id
-- @column step      count  Step number.
-- @column category  enum   Segment category (critical_path).
-- @column rank      id     Rank of the segments' events.
-- @column time_ns   ns     Time of this category and rank on the step's critical path.
-- @column segments  count  Segments summed.
-- @column share_pct %      100 x time_ns / wall_ns.
-- @column wall_ns   ns     The step's wall time (a job: its longest rank's step range; critical_path).
-- @empty no steps to replay (no `step N`, ProfilerStep#N or --step-pattern ranges, no iterations detected in the kernels)
SELECT run_id, step, category, rank, CAST(sum(dur_ns) AS BIGINT) AS time_ns, count(*) AS segments,
       100.0 * sum(dur_ns) / any_value(wall_ns) AS share_pct, any_value(wall_ns) AS wall_ns
FROM tk_critical_path
GROUP BY run_id, step, category, rank
ORDER BY run_id, step, time_ns DESC, category, rank;
