-- launch_overhead: Kernel launch cost per kernel name: API time, queue time and kernel time, as `nsys stats --report kernexecsum`.
-- @include core
--
-- Each kernel execution is joined to the CUDA API call that launched it (same run, pid and
-- correlation_id; kernels without a launching call in cuda_api are left out, as in nsys stats;
-- a CUDA graph launch counts once per kernel it ran). For each launch:
--   api time    = call end_ns - call start_ns (host time in the launch call),
--   queue time  = kernel start_ns - call end_ns, only when >= 0 (a kernel that starts before its
--                 launch call returns has no queue time and is left out of the queue statistics;
--                 `queued` counts the launches that have one),
--   kernel time = kernel end_ns - kernel start_ns,
--   total time  = max(call end_ns, kernel end_ns) - call start_ns (the phases may overlap).
-- One row per run, kernel name (demangled) and launching API function. With split=true rows are
-- also split by pid, tid (of the launching thread) and device_id, which is exactly the grouping
-- of nsys stats' kernexecsum. Sorted by mean total time, descending, as nsys stats.
--
-- @param split BOOLEAN false  Also split rows by pid, tid and device_id (the grouping of nsys stats).
-- @column run_id
-- @column name              text   Kernel name (demangled).
-- @column api_name          text   API function that launched it (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, ...).
-- @column pid               id     Launching process (with split=true; else NULL).
-- @column tid               id     Launching thread (with split=true; else NULL).
-- @column device_id         id     Device the kernel ran on (with split=true; else NULL).
-- @column launches          count  Number of kernel executions joined to a launch call.
-- @column queued            count  Launches with a queue time (kernel started at or after the call returned).
-- @column api_total_ns      ns     Sum of API times.
-- @column queue_total_ns    ns     Sum of queue times (over queued launches; NULL when none).
-- @column kernel_total_ns   ns     Sum of kernel times.
-- @column total_avg_ns      ns     Mean total time (call start to the later of call end and kernel end).
-- @column total_med_ns      ns     Median total time (call start to the later of call end and kernel end).
-- @column total_min_ns      ns     Smallest total time (call start to the later of call end and kernel end).
-- @column total_max_ns      ns     Largest total time (call start to the later of call end and kernel end).
-- @column total_stddev_ns   ns     Sample standard deviation of the total time (call start to the later of call end and kernel end) (n - 1); 0 for a single value.
-- @column api_avg_ns        ns     Mean API time.
-- @column api_med_ns        ns     Median API time.
-- @column api_min_ns        ns     Smallest API time.
-- @column api_max_ns        ns     Largest API time.
-- @column api_stddev_ns     ns     Sample standard deviation of the API time (n - 1); 0 for a single value.
-- @column queue_avg_ns      ns     Mean queue time, over queued launches (NULL when none).
-- @column queue_med_ns      ns     Median queue time, over queued launches (NULL when none).
-- @column queue_min_ns      ns     Smallest queue time, over queued launches (NULL when none).
-- @column queue_max_ns      ns     Largest queue time, over queued launches (NULL when none).
-- @column queue_stddev_ns   ns     Sample standard deviation of the queue time, over queued launches (NULL when none) (n - 1); 0 for a single value.
-- @column kernel_avg_ns     ns     Mean kernel time.
-- @column kernel_med_ns     ns     Median kernel time.
-- @column kernel_min_ns     ns     Smallest kernel time.
-- @column kernel_max_ns     ns     Largest kernel time.
-- @column kernel_stddev_ns  ns     Sample standard deviation of the kernel time (n - 1); 0 for a single value.
-- @key launches total_avg_ns
-- @few_rows
WITH launches AS (
    SELECT
        k.run_id,
        k.name,
        r.name AS api_name,
        r.pid,
        r.tid,
        k.device_id,
        r.end_ns - r.start_ns AS api_ns,
        CASE WHEN k.start_ns - r.end_ns >= 0 THEN k.start_ns - r.end_ns END AS queue_ns,
        k.end_ns - k.start_ns AS kernel_ns,
        greatest(r.end_ns, k.end_ns) - r.start_ns AS total_ns
    FROM kernels AS k
    JOIN cuda_api AS r
      ON r.run_id = k.run_id AND r.pid = k.pid AND r.correlation_id = k.correlation_id
)
SELECT
    run_id, name, api_name,
    CASE WHEN getvariable('split') THEN pid END AS pid,
    CASE WHEN getvariable('split') THEN tid END AS tid,
    CASE WHEN getvariable('split') THEN device_id END AS device_id,
    count(*) AS launches,
    count(queue_ns) AS queued,
    sum(api_ns)::BIGINT AS api_total_ns,
    sum(queue_ns)::BIGINT AS queue_total_ns,
    sum(kernel_ns)::BIGINT AS kernel_total_ns,
    avg(total_ns) AS total_avg_ns,
    median(total_ns)::DOUBLE AS total_med_ns,
    min(total_ns) AS total_min_ns,
    max(total_ns) AS total_max_ns,
    coalesce(tk_stddev_samp(total_ns), 0.0) AS total_stddev_ns,
    avg(api_ns) AS api_avg_ns,
    median(api_ns)::DOUBLE AS api_med_ns,
    min(api_ns) AS api_min_ns,
    max(api_ns) AS api_max_ns,
    coalesce(tk_stddev_samp(api_ns), 0.0) AS api_stddev_ns,
    avg(queue_ns) AS queue_avg_ns,
    median(queue_ns)::DOUBLE AS queue_med_ns,
    min(queue_ns) AS queue_min_ns,
    max(queue_ns) AS queue_max_ns,
    CASE WHEN count(queue_ns) > 0 THEN coalesce(tk_stddev_samp(queue_ns), 0.0) END AS queue_stddev_ns,
    avg(kernel_ns) AS kernel_avg_ns,
    median(kernel_ns)::DOUBLE AS kernel_med_ns,
    min(kernel_ns) AS kernel_min_ns,
    max(kernel_ns) AS kernel_max_ns,
    coalesce(tk_stddev_samp(kernel_ns), 0.0) AS kernel_stddev_ns
FROM launches
GROUP BY ALL
ORDER BY run_id, total_avg_ns DESC, name, api_name, pid, tid, device_id;
