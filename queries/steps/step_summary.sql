-- step_summary: One row per run, rank and training step: wall time, phase times, GPU busy time, throughput.
-- @include core
--
-- Steps come from tk_steps (queries/_macros.sql), the first source a run has: tracekit's NVTX
-- ranges `step N` / `step N (warmup)` (the Kineto collector maps the runners' record_function
-- ranges of the same names to domain tracekit), else PyTorch's `ProfilerStep#N` (Kineto user
-- annotations or nsys NVTX ranges), else the ranges named by --step-pattern, else iterations
-- detected in the kernel sequence; step_source says which. Phases are the ranges `data`,
-- `forward`, `backward`, `optimizer` and `comm ...` (e.g. `comm allreduce`, one per DDP gradient
-- bucket) of domain tracekit, and PyTorch's own annotations `enumerate(DataLoader)#...` (data)
-- and `Optimizer.step#...` / `Optimizer.zero_grad#...` (optimizer), in the same process, that
-- START inside the step's [start_ns, end_ns): each phase time is the length of the UNION of its
-- ranges clipped to the step, so overlapping all-reduce buckets count once. Phases may overlap
-- one another (comm_ns runs during backward_ns), so they do not add up to wall_ns. A phase with
-- no range in the step is 0 for tracekit steps; for other sources forward_ns, backward_ns and
-- comm_ns are NULL (PyTorch does not mark them) and data_ns / optimizer_ns are NULL unless the
-- run has such annotations. comm_ns is also NULL when a tracekit run is multi-rank and has no
-- comm range at all (communication not annotated, e.g. the torch profiler path).
--
-- rank: processes.rank, else the pid -> rank map `tracekit collect` writes in the manifest
-- (workload.ranks[].pid), else 0 when the run's steps all come from one process, else NULL.
-- gpu_busy_ns: GPU busy time, the one definition of every query (docs/metrics.md, "GPU busy"):
-- time at least one kernel, memcpy or memset ran, over the step's host-side window, unioned over
-- the streams of each GPU the step's process used and summed over those GPUs (tk_busy_between('any'),
-- as gpu_utilization busy_ns scope 'step' and rank_summary gpu_busy_ns); NULL when the run captured no kernels table (a CPU trace),
-- 0 when kernels were captured but none ran in the step. samples_per_s = the manifest's global
-- batch (workload.samples_per_step: per-rank batch x world size) / wall time; NULL without it.
-- Detected steps (step_source 'detected') that all lie inside one NVTX range of their process
-- (8 or more of them) get a note on stderr: repeats of one kernel sequence inside a single host
-- range are more likely the layers of one forward pass (a vLLM decoder's 35 layers) than
-- training steps; --step-pattern names the real steps.
--
-- @param include_warmup BOOLEAN true  Keep warm-up steps (marked by `warmup`).
-- @column run_id
-- @column rank          id         Distributed rank of the process (see above).
-- @column step          count      Step number: N of `step N` (counts from 0 over warm-up and measured steps) or of `ProfilerStep#N`, the pattern's first group, or the detected iteration (from 0).
-- @column wall_ns       ns         Step range duration (host side: end_ns - start_ns).
-- @column data_ns       ns         Time in `data` (or PyTorch `enumerate(DataLoader)#...`) ranges: batch creation / loading.
-- @column forward_ns    ns         Time in `forward` ranges; NULL for steps not from tracekit.
-- @column backward_ns   ns         Time in `backward` ranges; NULL for steps not from tracekit.
-- @column optimizer_ns  ns         Time in `optimizer` (or PyTorch `Optimizer.step#...`, `Optimizer.zero_grad#...`) ranges.
-- @column comm_ns       ns         Time at least one `comm ...` range was open (union), clipped to the step.
-- @column gpu_busy_ns   ns         Time at least one kernel, memcpy or memset ran on the process's GPUs in the step (union per GPU, summed over its GPUs); NULL when no kernels were captured.
-- @column samples_per_s value      Global samples per step / (wall_ns / 1e9): training samples (the workload's batch unit) per second.
-- @column warmup        flag       True for warm-up steps (`step N (warmup)`).
-- @column step_source   enum       Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps).
-- @column pid           id         OS process ID of the step's process.
-- @column start_ns      ns         Step start on the trace's clock.
-- @key wall_ns gpu_busy_ns
-- @notice SELECT 'step_summary: run ' || d.run_id || ', pid ' || d.pid || ': the ' || d.n || ' detected steps (' || CASE WHEN d.avg_ms < 1 THEN printf('%.1f µs', d.avg_ms * 1000) ELSE printf('%.3f ms', d.avg_ms) END || ' each on average) all lie inside one NVTX range, ' || to_json(r.name)::VARCHAR || ' (' || CASE WHEN r.ms < 1 THEN printf('%.1f µs', r.ms * 1000) ELSE printf('%.3f ms', r.ms) END || '): they may be the layers of one pass, not training steps; --step-pattern REGEX names the real steps' FROM (SELECT run_id, pid, count(*) AS n, avg(wall_ns) / 1e6 AS avg_ms, min(start_ns) AS s0, max(start_ns + wall_ns) AS s1 FROM result WHERE step_source = 'detected' GROUP BY run_id, pid HAVING count(*) >= 8) d JOIN (SELECT run_id, pid, name, start_ns, end_ns, (end_ns - start_ns) / 1e6 AS ms FROM nvtx_ranges WHERE end_ns IS NOT NULL) r ON r.run_id = d.run_id AND r.pid = d.pid AND r.start_ns <= d.s0 AND r.end_ns >= d.s1 QUALIFY row_number() OVER (PARTITION BY d.run_id, d.pid ORDER BY r.end_ns - r.start_ns, r.start_ns) = 1 ORDER BY d.run_id, d.pid
-- @requires nvtx_ranges
-- @empty no NVTX ranges named `step N` or `step N (warmup)` (the training steps tracekit's runners mark; docs/workloads.md)
WITH steps AS MATERIALIZED (
    SELECT * FROM tk_steps()
    WHERE getvariable('include_warmup') OR NOT is_warmup
),
meta AS (
    SELECT run_id,
           TRY_CAST(json_extract_string(manifest, '$.workload.samples_per_step') AS DOUBLE) AS samples_per_step,
           TRY_CAST(json_extract_string(manifest, '$.workload.world_size') AS INTEGER) AS world_size
    FROM runs
),
manifest_ranks AS (
    SELECT run_id, r.pid AS pid, r.rank AS rank
    FROM (SELECT run_id, unnest(from_json(json_extract(manifest, '$.workload.ranks'),
                                          '[{"rank": "INTEGER", "pid": "BIGINT"}]')) AS r
          FROM runs)
    WHERE r.pid IS NOT NULL
),
proc_ranks AS (
    SELECT run_id, pid, max(rank) AS rank FROM processes WHERE rank IS NOT NULL GROUP BY run_id, pid
),
one_process AS (
    SELECT run_id, count(DISTINCT pid) = 1 AS single FROM steps GROUP BY run_id
),
-- phase ranges, each attributed to the last step of its process starting at or before it (ASOF)
phase_ranges AS (SELECT * FROM tk_phase_ranges()),
in_step AS (
    SELECT s.run_id, s.step_id, p.phase,
           greatest(p.start_ns, s.start_ns) AS a, least(p.end_ns, s.end_ns) AS b
    FROM phase_ranges p ASOF JOIN steps s
      ON s.run_id = p.run_id AND s.pid = p.pid AND p.start_ns >= s.start_ns
    WHERE p.start_ns < s.end_ns
),
swept AS (
    SELECT *, max(b) OVER (PARTITION BY run_id, step_id, phase ORDER BY a, b
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_b
    FROM in_step WHERE b > a
),
-- union length = sum over intervals of the part past the running maximum of earlier ends
phase_time AS (
    SELECT run_id, step_id, phase,
           CAST(sum(greatest(b - greatest(a, coalesce(prev_b, a)), 0)) AS BIGINT) AS ns
    FROM swept GROUP BY run_id, step_id, phase
),
phases AS (
    SELECT run_id, step_id,
           sum(ns) FILTER (WHERE phase = 'data') AS data_ns,
           sum(ns) FILTER (WHERE phase = 'forward') AS forward_ns,
           sum(ns) FILTER (WHERE phase = 'backward') AS backward_ns,
           sum(ns) FILTER (WHERE phase = 'optimizer') AS optimizer_ns,
           sum(ns) FILTER (WHERE phase = 'comm') AS comm_ns
    FROM phase_time GROUP BY run_id, step_id
),
has_comm AS (
    SELECT DISTINCT run_id FROM phase_ranges WHERE phase = 'comm'
),
has_data AS (SELECT DISTINCT run_id FROM phase_ranges WHERE phase = 'data'),
has_opt AS (SELECT DISTINCT run_id FROM phase_ranges WHERE phase = 'optimizer'),
kernels_captured AS (
    SELECT run_id, bool_or(captured) AS captured FROM run_tables WHERE table_name = 'kernels' GROUP BY run_id
),
busy AS (
    SELECT run_id, step_id, CAST(sum(busy_ns) AS BIGINT) AS busy_ns
    FROM tk_busy_between('any') WHERE scope = 'step' GROUP BY run_id, step_id
)
SELECT s.run_id,
       CAST(coalesce(pr.rank, mr.rank, CASE WHEN op.single THEN 0 END) AS INTEGER) AS rank,
       s.step_number AS step,
       s.end_ns - s.start_ns AS wall_ns,
       CASE WHEN s.step_source = 'tracekit' OR pd.run_id IS NOT NULL THEN coalesce(ph.data_ns, 0) END::BIGINT AS data_ns,
       CASE WHEN s.step_source = 'tracekit' THEN coalesce(ph.forward_ns, 0) END::BIGINT AS forward_ns,
       CASE WHEN s.step_source = 'tracekit' THEN coalesce(ph.backward_ns, 0) END::BIGINT AS backward_ns,
       CASE WHEN s.step_source = 'tracekit' OR po.run_id IS NOT NULL THEN coalesce(ph.optimizer_ns, 0) END::BIGINT AS optimizer_ns,
       CASE WHEN ph.comm_ns IS NOT NULL THEN ph.comm_ns
            WHEN s.step_source <> 'tracekit' THEN NULL
            WHEN hc.run_id IS NULL AND coalesce(m.world_size, 1) > 1 THEN NULL
            ELSE 0 END::BIGINT AS comm_ns,
       CASE WHEN coalesce(kc.captured, false) THEN coalesce(b.busy_ns, 0) END::BIGINT AS gpu_busy_ns,
       m.samples_per_step / ((s.end_ns - s.start_ns) / 1e9) AS samples_per_s,
       s.is_warmup AS warmup,
       s.step_source,
       s.pid,
       s.start_ns
FROM steps s
LEFT JOIN meta m ON m.run_id = s.run_id
LEFT JOIN proc_ranks pr ON pr.run_id = s.run_id AND pr.pid = s.pid
LEFT JOIN manifest_ranks mr ON mr.run_id = s.run_id AND mr.pid = s.pid
LEFT JOIN one_process op ON op.run_id = s.run_id
LEFT JOIN phases ph ON ph.run_id = s.run_id AND ph.step_id = s.step_id
LEFT JOIN has_comm hc ON hc.run_id = s.run_id
LEFT JOIN has_data pd ON pd.run_id = s.run_id
LEFT JOIN has_opt po ON po.run_id = s.run_id
LEFT JOIN kernels_captured kc ON kc.run_id = s.run_id
LEFT JOIN busy b ON b.run_id = s.run_id AND b.step_id = s.step_id
ORDER BY s.run_id, rank NULLS LAST, s.pid, s.step_number, s.start_ns;
