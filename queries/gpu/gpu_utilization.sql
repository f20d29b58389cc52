-- gpu_utilization: Busy time and utilization of each GPU, over the run and per training step, never above 100%.
-- @include core
--
-- A GPU is (run_id, pid, device_id): the device as numbered by the process that used it, so the same
-- stream number on two GPUs, or two processes on GPUs both numbered 0, are never merged. Busy time is
-- the length of the UNION of activity intervals over all streams of the GPU (sort-and-sweep:
-- tk_busy_islands in queries/_macros.sql), so overlapping streams count once and utilization <= 1.
-- kernel_busy_ns unions kernels (including kernels launched by CUDA graphs, which are kernel rows);
-- copy_busy_ns unions memcpy and memset; busy_ns unions all three, so a copy is busy time, never
-- idle. Activities with zero or negative duration are left out.
--
-- Windows: scope 'run' spans the GPU's first activity start to its last activity end; scope 'step'
-- is one row per step of the same process and GPU (tk_steps in queries/_macros.sql: tracekit's
-- `step N` ranges, else PyTorch's ProfilerStep#N, else --step-pattern ranges, else iterations
-- detected in the kernel sequence; step_source says which), with activity clipped to the step's
-- start and end (host side for ranges, GPU side for detected iterations). busy_ns + idle_ns = wall_ns.
--
-- @column run_id
-- @column scope             enum   'run' (the GPU's whole active span) or 'step' (one training step).
-- @column step_id           id     nvtx_ranges.range_id of the step range; null for scope 'run'.
-- @column step              text   Step range message (`step 3`, `step 0 (warmup)`); null for scope 'run'.
-- @column step_number       count  Step number (N of `step N` or `ProfilerStep#N`); null for scope 'run'.
-- @column step_source       enum   Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps); null for scope 'run'.
-- @column pid               id     Process that used the GPU.
-- @column rank              id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id         id     CUDA device ordinal in that process.
-- @column window_start_ns   ns     Start of the window.
-- @column wall_ns           ns     Window length (end - start).
-- @column kernel_busy_ns    ns     Time at least one kernel ran on the GPU (union over streams).
-- @column copy_busy_ns      ns     Time at least one memcpy or memset ran (union over streams).
-- @column overlap_ns        ns     Time a kernel and a copy ran together (kernel_busy + copy_busy - busy).
-- @column busy_ns           ns     Time any kernel, memcpy or memset ran (union of all).
-- @column idle_ns           ns     wall_ns - busy_ns: nothing ran (gpu_idle classifies it).
-- @column utilization       value  kernel_busy_ns / wall_ns, a fraction 0-1 (null for an empty window).
-- @column busy_fraction     value  busy_ns / wall_ns, a fraction 0-1: kernels or copies.
-- @key busy_ns utilization
-- @requires kernels
WITH k AS (SELECT * FROM tk_busy_between('kernel')),
c AS (SELECT * FROM tk_busy_between('copy')),
a AS (SELECT * FROM tk_busy_between('any'))
SELECT a.run_id, a.scope, a.step_id, a.step, a.step_number, a.step_source, a.pid, rk.rank, a.device_id,
       a.w0 AS window_start_ns, a.w1 - a.w0 AS wall_ns,
       k.busy_ns AS kernel_busy_ns, c.busy_ns AS copy_busy_ns,
       k.busy_ns + c.busy_ns - a.busy_ns AS overlap_ns,
       a.busy_ns, (a.w1 - a.w0) - a.busy_ns AS idle_ns,
       k.busy_ns / nullif(a.w1 - a.w0, 0) AS utilization,
       a.busy_ns / nullif(a.w1 - a.w0, 0) AS busy_fraction
FROM a
JOIN k ON k.run_id = a.run_id AND k.scope = a.scope AND k.step_id IS NOT DISTINCT FROM a.step_id
      AND k.pid IS NOT DISTINCT FROM a.pid AND k.device_id IS NOT DISTINCT FROM a.device_id
JOIN c ON c.run_id = a.run_id AND c.scope = a.scope AND c.step_id IS NOT DISTINCT FROM a.step_id
      AND c.pid IS NOT DISTINCT FROM a.pid AND c.device_id IS NOT DISTINCT FROM a.device_id
LEFT JOIN tk_ranks() rk ON rk.run_id = a.run_id AND rk.pid = a.pid
ORDER BY a.run_id, a.pid, a.device_id, a.scope, a.w0, a.step_id;
