-- stragglers: One row per rank: how often it arrived last at a collective, the delay it caused the others, its own mean wait, its step time against the median rank.
--
-- Built on the collective instances of `collective_skew` (tk_comm_arrivals in queries/ranks/_macros.sql:
-- NCCL kernels on GPUs, Gloo ranges on CPUs, matched across ranks by process group, type and
-- order). Only instances with two or more participants count.
--   collectives       = instances the rank took part in;
--   last_arrivals     = instances where it arrived last, strictly after every other participant
--                       (when two ranks tie for last, neither alone held the collective up);
--   delay_caused_ns   = sum, over those, of its start - the next-latest start: time the
--                       collective was held up by this rank alone;
--   mean_wait_ns      = mean over its instances of last_start_ns - its start: how long it waited
--                       for the last arrival (0 where it was last);
--   step_ns_vs_median = its mean step time (tk_steps, warm-up steps excluded) / the median over the
--                       run's ranks of their mean step time; null without steps.
-- Rows are ordered by delay caused: the first row is the straggler.
--
-- @column run_id            id     Run folder the row comes from.
-- @column rank              id     Distributed rank (processes.rank / manifest; else the participant ordinal, see collective_skew).
-- @column collectives       count  Collective instances with two or more participants that the rank took part in.
-- @column last_arrivals     count  Of which it arrived last.
-- @column delay_caused_ns   ns     Sum over its last arrivals of its start - the next-latest start.
-- @column mean_wait_ns      ns     Mean over its collectives of the last arrival's start - its start.
-- @column step_ns_vs_median value  Mean step time of the rank / median over ranks of the mean step time.
-- @key delay_caused_ns
WITH a AS (SELECT * FROM tk_comm_arrivals() WHERE ranks > 1),
per_rank AS (
    SELECT run_id, rank, count(*) AS collectives,
           count(*) FILTER (WHERE arrival_from_last = 1 AND start_ns > next_latest_start_ns) AS last_arrivals,
           CAST(coalesce(sum(start_ns - next_latest_start_ns) FILTER (WHERE arrival_from_last = 1), 0) AS BIGINT)
               AS delay_caused_ns,
           avg(last_start_ns - start_ns) AS mean_wait_ns,
           list(DISTINCT pid) AS pids
    FROM a GROUP BY run_id, rank
),
steps AS (
    SELECT s.run_id, s.pid, avg(s.end_ns - s.start_ns) AS mean_step_ns
    FROM tk_steps() s WHERE NOT s.is_warmup GROUP BY s.run_id, s.pid
),
rank_steps AS (
    SELECT p.run_id, p.rank, avg(s.mean_step_ns) AS mean_step_ns
    FROM (SELECT run_id, rank, unnest(pids) AS pid FROM per_rank) p
    JOIN steps s ON s.run_id = p.run_id AND s.pid = p.pid
    GROUP BY p.run_id, p.rank
),
med AS (
    SELECT run_id, median(mean_step_ns) AS median_step_ns FROM rank_steps GROUP BY run_id
)
SELECT p.run_id, p.rank, p.collectives, p.last_arrivals, p.delay_caused_ns, p.mean_wait_ns,
       rs.mean_step_ns / nullif(m.median_step_ns, 0) AS step_ns_vs_median
FROM per_rank p
LEFT JOIN rank_steps rs ON rs.run_id = p.run_id AND rs.rank IS NOT DISTINCT FROM p.rank
LEFT JOIN med m ON m.run_id = p.run_id
ORDER BY p.run_id, p.delay_caused_ns DESC, p.last_arrivals DESC, p.rank;
