-- study_step_phases: Per step, its wall time split into exclusive phase times that add up to it: data, comm, compute, other (the scaling-loss attribution of runs without GPU work).
-- @include core
--
-- The phase ranges are step_summary's (tracekit's `data`, `forward`, `backward`, `optimizer`,
-- `comm ...` ranges; PyTorch's `enumerate(DataLoader)#...`, `Optimizer.step#...`,
-- `Optimizer.zero_grad#...`), attributed to the last step of their process that started at or
-- before them and clipped to it. Every instant of the step counts once, for the first phase of
-- data, comm, compute (forward, backward, optimizer) whose range covers it; `other_ns` is the
-- step's time in no phase range. So data_ns + comm_ns + compute_ns + other_ns = wall_ns exactly.
-- comm first: on a host without GPU work the rank's compute thread and its communication thread
-- share cores, and a `comm` range open during `backward` is time the step waits on the
-- collective as far as the trace can tell (docs/study.md, "Why scaling loses").
--
-- @key wall_ns comm_ns
-- @column run_id      id     Run folder the row comes from.
-- @column pid         id     OS process ID of the step's process.
-- @column step        count  Step number (as step_summary numbers it).
-- @column start_ns    ns     Step start on the trace's clock (step_summary's start_ns).
-- @column wall_ns     ns     Step range duration (step_summary's wall_ns).
-- @column data_ns     ns     Time in a data range.
-- @column comm_ns     ns     Time in a `comm ...` range and in no data range.
-- @column compute_ns  ns     Time in a forward, backward or optimizer range and in no data or comm range.
-- @column other_ns    ns     Time in no phase range: wall_ns - data_ns - comm_ns - compute_ns.
-- @column warmup      flag   The step is a warm-up step.
-- @param include_warmup BOOLEAN true  Keep warm-up steps (marked by `warmup`).
-- @requires nvtx_ranges
WITH steps AS MATERIALIZED (
    SELECT * FROM tk_steps()
    WHERE getvariable('include_warmup') OR NOT is_warmup
),
phase_ranges AS (  -- data first, then comm, then compute
    SELECT run_id, pid, start_ns, end_ns,
           CASE phase WHEN 'data' THEN 1 WHEN 'comm' THEN 2 ELSE 3 END AS prio
    FROM tk_phase_ranges()
),
in_step AS (
    SELECT s.run_id, s.step_id, p.prio,
           greatest(p.start_ns, s.start_ns) AS a, least(p.end_ns, s.end_ns) AS b
    FROM phase_ranges p ASOF JOIN steps s
      ON s.run_id = p.run_id AND s.pid = p.pid AND p.start_ns >= s.start_ns
    WHERE p.start_ns < s.end_ns
),
-- elementary segments between consecutive range boundaries of a step
cuts AS (
    SELECT DISTINCT run_id, step_id, t FROM (
        SELECT run_id, step_id, a AS t FROM in_step WHERE b > a
        UNION ALL SELECT run_id, step_id, b FROM in_step WHERE b > a)
),
segs AS (
    SELECT run_id, step_id, t AS a,
           lead(t) OVER (PARTITION BY run_id, step_id ORDER BY t) AS b
    FROM cuts
),
owned AS (
    SELECT g.run_id, g.step_id, g.b - g.a AS ns, min(i.prio) AS prio
    FROM segs g JOIN in_step i
      ON i.run_id = g.run_id AND i.step_id = g.step_id AND i.a <= g.a AND i.b >= g.b
    WHERE g.b IS NOT NULL AND g.b > g.a
    GROUP BY g.run_id, g.step_id, g.a, g.b
),
per_step AS (
    SELECT run_id, step_id,
           coalesce(sum(ns) FILTER (WHERE prio = 1), 0) AS data_ns,
           coalesce(sum(ns) FILTER (WHERE prio = 2), 0) AS comm_ns,
           coalesce(sum(ns) FILTER (WHERE prio = 3), 0) AS compute_ns
    FROM owned GROUP BY run_id, step_id
)
SELECT s.run_id, s.pid, s.step_number AS step, s.start_ns, s.end_ns - s.start_ns AS wall_ns,
       CAST(coalesce(p.data_ns, 0) AS BIGINT) AS data_ns,
       CAST(coalesce(p.comm_ns, 0) AS BIGINT) AS comm_ns,
       CAST(coalesce(p.compute_ns, 0) AS BIGINT) AS compute_ns,
       CAST(s.end_ns - s.start_ns - coalesce(p.data_ns, 0) - coalesce(p.comm_ns, 0)
            - coalesce(p.compute_ns, 0) AS BIGINT) AS other_ns,
       s.is_warmup AS warmup
FROM steps s LEFT JOIN per_step p ON p.run_id = s.run_id AND p.step_id = s.step_id
ORDER BY s.run_id, s.pid, s.step_number, s.start_ns;
