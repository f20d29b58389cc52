-- cpu_overhead: Host CUDA API cost per training step (and over the run): API time, launches, host time per launch, GPU idle waiting on the host.
-- @include core cpu
--
-- Windows, per process (run_id, pid): scope 'step' is each step of the process (tk_steps in
-- queries/_macros.sql: tracekit, profiler, pattern or detected steps); scope 'run' spans the process's first to
-- last CUDA API call or GPU activity. Time columns are exact clipped unions: on each thread the
-- CUDA API calls are merged into a union first (a driver call nested in a runtime call counts once),
-- then cut to the window and summed over the process's threads.
--   api_ns           time in any CUDA API call;
--   sync_api_ns      time in synchronization calls (name contains Synchronize) -- the host waiting;
--   launch_api_ns    time in launch calls, the set tk_launch_kind defines in _macros.sql:
--                    runtime and driver kernel launches (Ex, ExC, Cooperative variants; not
--                    cudaLaunchHostFunc), HIP launches on ROCm (hipLaunchKernel, hipExtLaunchKernel,
--                    hipModuleLaunchKernel, hipExtModuleLaunchKernel, ...) and graph launches
--                    (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch);
--   launches         launch calls that START in the window (a graph launch counts once; a launch
--                    call nested in another on the same thread, e.g. cuLaunchKernel inside
--                    cudaLaunchKernel when both are traced, is the same launch);
--   host_ns_per_launch = (api_ns - sync_api_ns) / launches: host CUDA time per launch, explicit
--                    synchronizations excluded (blocking cudaMemcpy calls, which also wait, stay in);
--   gpu_idle_host_ns = gpu_idle's idle_host_ns summed over the process's GPUs for the same step
--                    (scope 'run': over each GPU's own active span), and gpu_wall_ns the matching
--                    sum of GPU window lengths, so host_bound_fraction is the share of GPU time the
--                    GPUs sat idle waiting on this host.
-- Names lose CUPTI's version suffix (_v7000) before matching.
--
-- @column run_id
-- @column scope                enum   'run' or 'step'.
-- @column step_id              id     nvtx_ranges.range_id of the step; null for scope 'run'.
-- @column step                 text   Step range message; null for scope 'run'.
-- @column step_number          count  Step number (N of `step N` or `ProfilerStep#N`); null for scope 'run'.
-- @column step_source          enum   Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps); null for scope 'run'.
-- @column pid                  id     Process.
-- @column rank                 id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column window_start_ns      ns     Window start.
-- @column wall_ns              ns     Window length.
-- @column api_ns               ns     Time in CUDA API calls (union per thread, summed over threads).
-- @column sync_api_ns          ns     Of which in synchronization calls.
-- @column launch_api_ns        ns     Of which in kernel and graph launch calls.
-- @column launches             count  Launch calls starting in the window.
-- @column host_ns_per_launch   ns     (api_ns - sync_api_ns) / launches; null without launches.
-- @column launch_call_avg_ns   ns     launch_api_ns / launches; null without launches.
-- @column gpus                 count  GPUs of the process with activity (rows of gpu_idle summed).
-- @column gpu_wall_ns          ns     Sum of the GPU windows' lengths.
-- @column gpu_idle_host_ns     ns     GPU idle time waiting on the host, summed over the GPUs.
-- @column host_bound_fraction  value  gpu_idle_host_ns / gpu_wall_ns, a fraction 0-1.
-- @key host_ns_per_launch host_bound_fraction
-- @requires cuda_api
WITH api AS (
    SELECT run_id, pid, tid, start_ns, end_ns, regexp_replace(name, '_v\d+$', '') AS name
    FROM cuda_api WHERE end_ns > start_ns
),
tagged AS (
    SELECT run_id, pid, tid, start_ns, end_ns, 'all' AS cls FROM api
    UNION ALL
    SELECT run_id, pid, tid, start_ns, end_ns, 'sync' FROM api WHERE name ILIKE '%synchronize%'
    UNION ALL
    SELECT run_id, pid, tid, start_ns, end_ns, 'launch' FROM api
    WHERE tk_launch_kind(name) IS NOT NULL
),
-- per thread and class, the union of the calls as islands (queries/cpu/_macros.sql); touching
-- calls stay separate islands, so two back-to-back launch calls are two launches
cum AS (SELECT * FROM tk_interval_islands('tagged', false)),
-- a launch is an island of launch calls on one thread: a driver launch nested in a runtime
-- launch (both traced) is one launch
launch_calls AS (
    SELECT run_id, pid, start_ns, row_number() OVER (PARTITION BY run_id, pid ORDER BY start_ns) AS n
    FROM cum WHERE cls = 'launch'
),
proc_span AS (
    SELECT run_id, pid, min(start_ns) AS w0, max(end_ns) AS w1 FROM (
        SELECT run_id, pid, start_ns, end_ns FROM api
        UNION ALL SELECT run_id, pid, start_ns, end_ns FROM tk_gpu_activity()
    ) GROUP BY run_id, pid
),
windows AS (
    SELECT run_id, 'run' AS scope, CAST(NULL AS BIGINT) AS step_id, CAST(NULL AS VARCHAR) AS step,
           CAST(NULL AS BIGINT) AS step_number, CAST(NULL AS VARCHAR) AS step_source, pid, w0, w1
    FROM proc_span
    UNION ALL
    SELECT run_id, 'step', step_id, step, step_number, step_source, pid, start_ns, end_ns FROM tk_steps()
),
wt AS (
    SELECT w.*, t.tid, t.cls
    FROM windows w JOIN (SELECT DISTINCT run_id, pid, tid, cls FROM cum) t
      ON t.run_id = w.run_id AND t.pid = w.pid
),
host_time AS (
    SELECT run_id, scope, step_id, pid, w0, w1,
           CAST(sum(union_ns) FILTER (WHERE cls = 'all') AS BIGINT) AS api_ns,
           CAST(sum(union_ns) FILTER (WHERE cls = 'sync') AS BIGINT) AS sync_api_ns,
           CAST(sum(union_ns) FILTER (WHERE cls = 'launch') AS BIGINT) AS launch_api_ns
    FROM tk_union_between('wt', 'cum') GROUP BY run_id, scope, step_id, pid, w0, w1
),
-- launch calls starting in [w0, w1): (calls starting before w1) - (calls starting before w0)
launch_probes AS (
    SELECT w.*, false AS is_end, w0 AS t FROM windows w
    UNION ALL
    SELECT w.*, true, w1 FROM windows w
),
launch_counts AS (
    SELECT p.run_id, p.scope, p.step_id, p.pid, p.w0, p.w1,
           sum(CASE WHEN p.is_end THEN coalesce(l.n, 0) ELSE -coalesce(l.n, 0) END) AS launches
    FROM launch_probes p ASOF LEFT JOIN launch_calls l
      ON p.run_id = l.run_id AND p.pid = l.pid AND p.t > l.start_ns
    GROUP BY p.run_id, p.scope, p.step_id, p.pid, p.w0, p.w1
),
gpu AS (
    SELECT run_id, scope, step_id, pid, count(*) AS gpus, sum(w1 - w0) AS gpu_wall_ns,
           sum(idle_host_ns) AS gpu_idle_host_ns
    FROM tk_idle_between() GROUP BY run_id, scope, step_id, pid
)
SELECT w.run_id, w.scope, w.step_id, w.step, w.step_number, w.step_source, w.pid, rk.rank,
       w.w0 AS window_start_ns, w.w1 - w.w0 AS wall_ns,
       coalesce(h.api_ns, 0) AS api_ns, coalesce(h.sync_api_ns, 0) AS sync_api_ns,
       coalesce(h.launch_api_ns, 0) AS launch_api_ns,
       coalesce(lc.launches, 0) AS launches,
       (coalesce(h.api_ns, 0) - coalesce(h.sync_api_ns, 0)) / nullif(lc.launches, 0) AS host_ns_per_launch,
       coalesce(h.launch_api_ns, 0) / nullif(lc.launches, 0) AS launch_call_avg_ns,
       coalesce(g.gpus, 0) AS gpus,
       CAST(coalesce(g.gpu_wall_ns, 0) AS BIGINT) AS gpu_wall_ns,
       CAST(coalesce(g.gpu_idle_host_ns, 0) AS BIGINT) AS gpu_idle_host_ns,
       g.gpu_idle_host_ns / nullif(g.gpu_wall_ns, 0) AS host_bound_fraction
FROM windows w
LEFT JOIN host_time h
  ON h.run_id = w.run_id AND h.scope = w.scope AND h.step_id IS NOT DISTINCT FROM w.step_id
 AND h.pid = w.pid AND h.w0 = w.w0 AND h.w1 = w.w1
LEFT JOIN launch_counts lc
  ON lc.run_id = w.run_id AND lc.scope = w.scope AND lc.step_id IS NOT DISTINCT FROM w.step_id
 AND lc.pid = w.pid AND lc.w0 = w.w0 AND lc.w1 = w.w1
LEFT JOIN gpu g
  ON g.run_id = w.run_id AND g.scope = w.scope AND g.step_id IS NOT DISTINCT FROM w.step_id
 AND g.pid = w.pid
LEFT JOIN tk_ranks() rk ON rk.run_id = w.run_id AND rk.pid = w.pid
ORDER BY w.run_id, w.pid, w.scope, w.w0, w.step_id;
