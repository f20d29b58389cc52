-- roofline_time_share: Share of a run's nsys kernel time of each kernel an ncu pass profiled (the roofline's point sizes).
-- @include roofline
--
-- For runs holding both an nsys (or Kineto) timeline and ncu launches: each ncu kernel name is
-- matched to the timeline's kernels by tk_kernel_key (docs/roofline.md), and its share is the
-- matched kernels' summed duration over the run's summed kernel time (kernels with a positive
-- duration). Runs without timeline kernels have no rows.
--
-- @column run_id
-- @column kernel_name  text   Kernel name as ncu_launches spells it.
-- @column share        value  Share of the run's kernel time, a fraction 0-1.
-- @key share
WITH n AS (
    SELECT run_id, key, t / sum(t) OVER (PARTITION BY run_id) AS share
    FROM (SELECT run_id, tk_kernel_key(name) AS key, sum(end_ns - start_ns) AS t
          FROM kernels WHERE end_ns > start_ns GROUP BY 1, 2)
)
SELECT l.run_id, l.kernel_name, n.share
FROM (SELECT DISTINCT run_id, kernel_name FROM ncu_launches) l
JOIN n ON n.run_id = l.run_id AND n.key = tk_kernel_key(l.kernel_name)
ORDER BY l.run_id, l.kernel_name;
