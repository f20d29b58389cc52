-- rank_summary: One row per rank and training step: step time, GPU busy, compute, communication, exposed communication, idle and host overhead, each against the median rank.
-- @include core ranks
--
-- Steps are tk_steps() (queries/_macros.sql; as in step_summary: tracekit's step ranges, else
-- ProfilerStep#N, else --step-pattern, else detected iterations), one per process and step. GPU
-- columns are unions over all streams of each GPU the step's process used, cut to the step's
-- host-side window [start_ns, end_ns) and summed over those GPUs (tk_busy_between, as
-- gpu_utilization scope 'step'); null when the process ran no GPU activity at all (a CPU run):
--   gpu_busy_ns      = time any kernel, memcpy or memset ran (gpu_utilization busy_ns);
--   compute_ns       = time a non-NCCL kernel ran;
--   comm_ns          = time an NCCL kernel ran; for a process without GPU activity, the union of
--                      its CPU collective ranges (Gloo `gloo:<op>`, else `c10d::<op>_`; see
--                      collective_skew) clipped to the step; null when it has neither;
--   exposed_comm_ns  = time an NCCL kernel ran while no compute kernel did
--                      (= kernel union - compute union); null without GPU activity;
--   idle_ns          = step_ns - gpu_busy_ns per GPU (gpu_idle idle_ns);
--   host_overhead_ns = of the idle time, the gaps gpu_idle blames on the host (idle_host_ns: the
--                      next work's launch call had not returned when the GPU went idle).
-- Each *_vs_median column is the value / the median of that value over the run's ranks for the
-- same step number (null when the median is 0 or null): 1.0 is the typical rank, 1.5 a rank 50%
-- above it. rank: tk_ranks(); in a run where no step's process has a known rank, the process's
-- ordinal by pid (0-based), as collective_skew.
--
-- @param include_warmup BOOLEAN false  Keep warm-up steps (`step N (warmup)`).
-- @column run_id
-- @column rank                        id     Distributed rank of the step's process (see above).
-- @column step                        count  Step number N.
-- @column warmup                      flag   True for a warm-up step.
-- @column step_source                 enum   Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps).
-- @column pid                         id     OS process ID of the step's process.
-- @column step_ns                     ns     Step range duration (host side).
-- @column gpu_busy_ns                 ns     Time any GPU activity ran in the step (union per GPU, summed over the process's GPUs).
-- @column compute_ns                  ns     Time a non-NCCL kernel ran.
-- @column comm_ns                     ns     Time an NCCL kernel ran (CPU runs: time in CPU collectives).
-- @column exposed_comm_ns             ns     Time an NCCL kernel ran with no compute kernel running.
-- @column idle_ns                     ns     GPU idle time in the step.
-- @column host_overhead_ns            ns     GPU idle time waiting on the host (gpu_idle idle_host_ns).
-- @column step_ns_vs_median           value  step_ns / median over ranks of step_ns for this step.
-- @column gpu_busy_ns_vs_median       value  gpu_busy_ns / its median over ranks.
-- @column compute_ns_vs_median        value  compute_ns / its median over ranks.
-- @column comm_ns_vs_median           value  comm_ns / its median over ranks.
-- @column exposed_comm_ns_vs_median   value  exposed_comm_ns / its median over ranks.
-- @column idle_ns_vs_median           value  idle_ns / its median over ranks.
-- @column host_overhead_ns_vs_median  value  host_overhead_ns / its median over ranks.
-- @key step_ns step_ns_vs_median
WITH steps AS MATERIALIZED (
    SELECT * FROM tk_steps() WHERE getvariable('include_warmup') OR NOT is_warmup
),
ranked AS (
    SELECT p.run_id, p.pid, r.rank AS known_rank,
           count(r.rank) OVER (PARTITION BY p.run_id) AS known_in_run,
           row_number() OVER (PARTITION BY p.run_id ORDER BY p.pid) - 1 AS ordinal
    FROM (SELECT DISTINCT run_id, pid FROM steps) p
    LEFT JOIN tk_ranks() r ON r.run_id = p.run_id AND r.pid = p.pid
),
busy AS (
    SELECT run_id, step_id, 'any' AS kind, sum(busy_ns) AS ns FROM tk_busy_between('any')
    WHERE scope = 'step' GROUP BY run_id, step_id
    UNION ALL
    SELECT run_id, step_id, 'kernel', sum(busy_ns) FROM tk_busy_between('kernel')
    WHERE scope = 'step' GROUP BY run_id, step_id
    UNION ALL
    SELECT run_id, step_id, 'compute', sum(busy_ns) FROM tk_busy_between('compute')
    WHERE scope = 'step' GROUP BY run_id, step_id
    UNION ALL
    SELECT run_id, step_id, 'nccl', sum(busy_ns) FROM tk_busy_between('nccl')
    WHERE scope = 'step' GROUP BY run_id, step_id
),
gpu AS (
    SELECT run_id, step_id,
           max(ns) FILTER (WHERE kind = 'any') AS gpu_busy_ns,
           max(ns) FILTER (WHERE kind = 'kernel') AS kernel_ns,
           max(ns) FILTER (WHERE kind = 'compute') AS compute_ns,
           max(ns) FILTER (WHERE kind = 'nccl') AS nccl_ns
    FROM busy GROUP BY run_id, step_id
),
idle AS (
    SELECT run_id, step_id, sum(idle_ns) AS idle_ns, sum(idle_host_ns) AS host_ns
    FROM tk_idle_between() WHERE scope = 'step' GROUP BY run_id, step_id
),
-- CPU collectives of processes without GPU activity, each cut to the step of its process it
-- starts in (ASOF), then unioned per step by sort-and-sweep
cpu_calls AS (
    SELECT c.run_id, s.step_id, greatest(c.start_ns, s.start_ns) AS a, least(c.end_ns, s.end_ns) AS b
    FROM (SELECT * FROM tk_comm_calls() WHERE device_id IS NULL) c
    ASOF JOIN steps s ON s.run_id = c.run_id AND s.pid = c.pid AND c.start_ns >= s.start_ns
    WHERE c.start_ns < s.end_ns
),
cpu_swept AS (
    SELECT *, max(b) OVER (PARTITION BY run_id, step_id ORDER BY a, b
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_b
    FROM cpu_calls WHERE b > a
),
cpu_comm AS (
    SELECT run_id, step_id, sum(greatest(b - greatest(a, coalesce(prev_b, a)), 0)) AS ns
    FROM cpu_swept GROUP BY run_id, step_id
),
cpu_procs AS (
    SELECT DISTINCT run_id, pid FROM tk_comm_calls() WHERE device_id IS NULL
),
rows AS (
    SELECT s.run_id,
           CAST(CASE WHEN rk.known_in_run > 0 THEN rk.known_rank ELSE rk.ordinal END AS INTEGER) AS rank,
           s.step_number AS step, s.is_warmup AS warmup, s.step_source, s.pid,
           s.end_ns - s.start_ns AS step_ns,
           CAST(g.gpu_busy_ns AS BIGINT) AS gpu_busy_ns,
           CAST(g.compute_ns AS BIGINT) AS compute_ns,
           CAST(CASE WHEN g.step_id IS NOT NULL THEN g.nccl_ns
                     WHEN cp.pid IS NOT NULL THEN coalesce(cc.ns, 0) END AS BIGINT) AS comm_ns,
           CAST(g.kernel_ns - g.compute_ns AS BIGINT) AS exposed_comm_ns,
           CAST(i.idle_ns AS BIGINT) AS idle_ns,
           CAST(i.host_ns AS BIGINT) AS host_overhead_ns,
           s.start_ns
    FROM steps s
    JOIN ranked rk ON rk.run_id = s.run_id AND rk.pid = s.pid
    LEFT JOIN gpu g ON g.run_id = s.run_id AND g.step_id = s.step_id
    LEFT JOIN idle i ON i.run_id = s.run_id AND i.step_id = s.step_id
    LEFT JOIN cpu_comm cc ON cc.run_id = s.run_id AND cc.step_id = s.step_id
    LEFT JOIN cpu_procs cp ON cp.run_id = s.run_id AND cp.pid = s.pid
)
SELECT run_id, rank, step, warmup, step_source, pid, step_ns, gpu_busy_ns, compute_ns, comm_ns, exposed_comm_ns,
       idle_ns, host_overhead_ns,
       step_ns / nullif(median(step_ns) OVER w, 0) AS step_ns_vs_median,
       gpu_busy_ns / nullif(median(gpu_busy_ns) OVER w, 0) AS gpu_busy_ns_vs_median,
       compute_ns / nullif(median(compute_ns) OVER w, 0) AS compute_ns_vs_median,
       comm_ns / nullif(median(comm_ns) OVER w, 0) AS comm_ns_vs_median,
       exposed_comm_ns / nullif(median(exposed_comm_ns) OVER w, 0) AS exposed_comm_ns_vs_median,
       idle_ns / nullif(median(idle_ns) OVER w, 0) AS idle_ns_vs_median,
       host_overhead_ns / nullif(median(host_overhead_ns) OVER w, 0) AS host_overhead_ns_vs_median
FROM rows
WINDOW w AS (PARTITION BY run_id, step)
ORDER BY run_id, step, rank NULLS LAST, pid, start_ns;
