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
-- Gloo collectives recorded by the PyTorch profiler (`gloo:<op>` ranges, on Gloo's worker
-- threads) are comm where no operator of the rank runs: an instant inside a gloo range and
-- outside every `pytorch.cpu_op` range of the process (on a thread without gloo ranges;
-- `c10d::<op>_` calls, which only hand the collective to Gloo, do not count as compute) is comm,
-- after data and before compute: the rank waited for the collective there (DDP's wait at the end
-- of backward, inside the `backward` range). Gloo time under an operator is overlapped and stays
-- compute.
--
-- @key wall_ns comm_ns
-- @column run_id
-- @column pid         id     OS process ID of the step's process.
-- @column step        count  Step number (as step_summary numbers it).
-- @column start_ns    ns     Step start on the trace's clock (step_summary's start_ns).
-- @column wall_ns     ns     Step range duration (step_summary's wall_ns).
-- @column data_ns     ns     Time in a data range.
-- @column comm_ns     ns     Time in a `comm ...` range, or in a Gloo collective range while no operator of the rank runs; and in no data range.
-- @column compute_ns  ns     Time in a forward, backward or optimizer range and in no data or comm range.
-- @column other_ns    ns     Time in no phase range: wall_ns - data_ns - comm_ns - compute_ns.
-- @column warmup      flag   The step is a warm-up step.
-- @param include_warmup BOOLEAN true  Keep warm-up steps (marked by `warmup`).
-- @requires nvtx_ranges
WITH steps AS MATERIALIZED (
    SELECT * FROM tk_steps()
    WHERE getvariable('include_warmup') OR NOT is_warmup
),
gloo AS (
    SELECT run_id, pid, tid, start_ns, end_ns FROM nvtx_ranges
    WHERE starts_with(domain, 'pytorch.') AND starts_with(name, 'gloo:') AND end_ns > start_ns
),
gloo_threads AS (SELECT DISTINCT run_id, pid, tid FROM gloo),
ops AS (  -- the rank's operators, in processes with Gloo ranges only
    SELECT o.run_id, o.pid, o.start_ns, o.end_ns FROM nvtx_ranges o
    SEMI JOIN (SELECT DISTINCT run_id, pid FROM gloo) g ON g.run_id = o.run_id AND g.pid = o.pid
    ANTI JOIN gloo_threads t ON t.run_id = o.run_id AND t.pid = o.pid AND t.tid = o.tid
    WHERE o.domain = 'pytorch.cpu_op' AND NOT starts_with(o.name, 'c10d::') AND o.end_ns > o.start_ns
),
phase_ranges AS (  -- data first, then comm, then compute; 4: a gloo range, 5: an operator
    SELECT run_id, pid, start_ns, end_ns,
           CASE phase WHEN 'data' THEN 1 WHEN 'comm' THEN 2 ELSE 3 END AS prio
    FROM tk_phase_ranges()
    UNION ALL SELECT run_id, pid, start_ns, end_ns, 4 FROM gloo
    UNION ALL SELECT run_id, pid, start_ns, end_ns, 5 FROM ops
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
    SELECT run_id, step_id, ns,
           CASE WHEN phase = 1 THEN 1 WHEN phase = 2 OR (in_gloo AND NOT in_op) THEN 2 ELSE phase END AS prio
    FROM (
        SELECT g.run_id, g.step_id, g.b - g.a AS ns, min(i.prio) FILTER (WHERE i.prio <= 3) AS phase,
               bool_or(i.prio = 4) AS in_gloo, bool_or(i.prio = 5) AS in_op
        FROM segs g JOIN in_step i
          ON i.run_id = g.run_id AND i.step_id = g.step_id AND i.a <= g.a AND i.b >= g.b
        WHERE g.b IS NOT NULL AND g.b > g.a
        GROUP BY g.run_id, g.step_id, g.a, g.b)
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
