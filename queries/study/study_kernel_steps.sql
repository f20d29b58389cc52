-- study_kernel_steps: Per run and kernel name, the launches and kernel time of the measured training steps (compare's per-step kernel columns).
-- @include core
--
-- A kernel belongs to the step in which it was launched: its launch call (the CUDA API row with
-- the same run_id, pid and correlation_id, as launch_latency) starts inside the step's range,
-- on a GPU of the step's process (the windows of step_summary's gpu_busy_ns, tk_gpu_windows
-- scope 'step'). A host far ahead of its GPU thus charges each kernel to the step that issued
-- it, not to the later step during which it ran. Kernels without a launch call, and every
-- kernel of a run whose steps are detected from the kernel sequence (GPU-side windows), belong
-- to the step in which they start. Warm-up steps (`step N (warmup)`) are left out.
-- steps counts the run's measured steps over all its processes (ranks): a 2-rank run with 3
-- steps each has 6, so launches_per_step and step_ns are per step of one rank, like
-- step_summary's mean wall_ns. Runs without steps on a GPU have no row; a kernel with no launch
-- inside a measured step has launches 0.
--
-- @key launches_per_step step_ns
-- @column run_id
-- @column name               text   Kernel name (demangled), as kernel_summary.
-- @column steps              count  Measured steps of the run, summed over its processes (ranks).
-- @column launches           count  Launches of this kernel in the measured steps.
-- @column total_ns           ns     Their summed duration (end_ns - start_ns).
-- @column launches_per_step  value  launches / steps.
-- @column step_ns            ns     total_ns / steps: this kernel's GPU time per step (of one rank).
-- @requires kernels
WITH w AS MATERIALIZED (
    SELECT w.run_id, w.pid, w.device_id, w.step_id, w.step_source, w.w0, w.w1
    FROM tk_gpu_windows() w
    JOIN (SELECT run_id, step_id FROM tk_steps() WHERE NOT is_warmup) s
      ON s.run_id = w.run_id AND s.step_id = w.step_id
    WHERE w.scope = 'step'
),
n AS (
    SELECT run_id, count(DISTINCT step_id) AS steps, bool_or(step_source = 'detected') AS gpu_side
    FROM w GROUP BY run_id
),
-- each kernel at its launch call's start (else its own start)
t AS (
    SELECT k.run_id, k.pid, k.device_id, k.name, k.duration_ns,
           CASE WHEN n.gpu_side THEN k.start_ns ELSE coalesce(l.start_ns, k.start_ns) END AS t
    FROM kernels k
    JOIN n ON n.run_id = k.run_id
    LEFT JOIN tk_launch_calls() l
      ON l.run_id = k.run_id AND l.pid = k.pid AND l.correlation_id = k.correlation_id
),
-- with the last window of its GPU that starts at or before it (the steps of one process do
-- not overlap), kept when it is before that window's end
k AS (
    SELECT t.run_id, t.name, t.duration_ns
    FROM t ASOF JOIN w
      ON t.run_id = w.run_id AND t.pid IS NOT DISTINCT FROM w.pid
     AND t.device_id IS NOT DISTINCT FROM w.device_id AND t.t >= w.w0
    WHERE t.t < w.w1
),
names AS (SELECT DISTINCT run_id, name FROM t),
g AS (
    SELECT x.run_id, x.name, count(k.duration_ns) AS launches,
           CAST(coalesce(sum(k.duration_ns), 0) AS BIGINT) AS total_ns
    FROM names x LEFT JOIN k ON k.run_id = x.run_id AND k.name = x.name
    GROUP BY x.run_id, x.name
)
SELECT g.run_id, g.name, n.steps, g.launches, g.total_ns,
       g.launches / n.steps AS launches_per_step, g.total_ns / n.steps AS step_ns
FROM g JOIN n ON n.run_id = g.run_id
ORDER BY g.run_id, g.total_ns DESC, g.name;
