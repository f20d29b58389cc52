-- launch_latency_by_name: launch_latency summarized per kernel name, launch call, thread and device, with percentiles.
--
-- Groups the rows of launch_latency (see there for every definition) by (run_id, pid, tid,
-- device_id, api_name, name) -- the grouping of `nsys stats --report kernexecsum`, whose Count,
-- QCount and API/queue/kernel averages these columns equal. Kernels with no API row form groups
-- with null tid and api_name. Percentiles are continuous (linear interpolation). Queue statistics
-- use only launches with queue_delay_ns >= 0, as kernexecsum does.
--
-- @column run_id              id     Run folder the row comes from.
-- @column pid                 id     Process.
-- @column tid                 id     Host thread of the launch calls (null: no API row).
-- @column device_id           id     CUDA device ordinal.
-- @column api_name            text   Launch call name (null: no API row).
-- @column name                text   Kernel name.
-- @column count               count  Kernels.
-- @column queued_count        count  Kernels with queue_delay_ns >= 0 (kernexecsum QCount).
-- @column clock_skew_count    count  Kernels that started before their launch call.
-- @column api_avg_ns          ns     Mean launch call duration.
-- @column queue_avg_ns        ns     Mean queue delay over queued kernels.
-- @column kernel_avg_ns       ns     Mean kernel duration.
-- @column total_avg_ns        ns     Mean of max(call end, kernel end) - call start.
-- @column latency_avg_ns      ns     Mean launch latency (call start to kernel start).
-- @column latency_p50_ns      ns     Median launch latency.
-- @column latency_p90_ns      ns     90th percentile launch latency.
-- @column latency_p99_ns      ns     99th percentile launch latency.
-- @column api_p50_ns          ns     Median launch call duration.
-- @column api_p90_ns          ns     90th percentile launch call duration.
-- @column api_p99_ns          ns     99th percentile launch call duration.
-- @column queue_p50_ns        ns     Median queue delay (signed, all kernels with an API row).
-- @column queue_p90_ns        ns     90th percentile queue delay.
-- @column queue_p99_ns        ns     99th percentile queue delay.
WITH ll AS (
    SELECT k.run_id, k.pid, k.device_id, k.name, k.start_ns, k.end_ns,
           l.tid, l.name AS api_name, l.start_ns AS api_start_ns, l.end_ns AS api_end_ns
    FROM kernels k
    LEFT JOIN tk_launch_calls() l
      ON l.run_id = k.run_id AND l.pid = k.pid AND l.correlation_id = k.correlation_id
)
SELECT run_id, pid, tid, device_id, api_name, name,
       count(*) AS count,
       count(*) FILTER (WHERE start_ns >= api_end_ns) AS queued_count,
       count(*) FILTER (WHERE start_ns < api_start_ns) AS clock_skew_count,
       avg(api_end_ns - api_start_ns) AS api_avg_ns,
       avg(start_ns - api_end_ns) FILTER (WHERE start_ns >= api_end_ns) AS queue_avg_ns,
       avg(end_ns - start_ns) AS kernel_avg_ns,
       avg(greatest(api_end_ns, end_ns) - api_start_ns) AS total_avg_ns,
       avg(start_ns - api_start_ns) AS latency_avg_ns,
       quantile_cont(start_ns - api_start_ns, 0.5) AS latency_p50_ns,
       quantile_cont(start_ns - api_start_ns, 0.9) AS latency_p90_ns,
       quantile_cont(start_ns - api_start_ns, 0.99) AS latency_p99_ns,
       quantile_cont(api_end_ns - api_start_ns, 0.5) AS api_p50_ns,
       quantile_cont(api_end_ns - api_start_ns, 0.9) AS api_p90_ns,
       quantile_cont(api_end_ns - api_start_ns, 0.99) AS api_p99_ns,
       quantile_cont(start_ns - api_end_ns, 0.5) AS queue_p50_ns,
       quantile_cont(start_ns - api_end_ns, 0.9) AS queue_p90_ns,
       quantile_cont(start_ns - api_end_ns, 0.99) AS queue_p99_ns
FROM ll
GROUP BY run_id, pid, tid, device_id, api_name, name
ORDER BY run_id, count(*) * avg(end_ns - start_ns) DESC, name, pid, tid, device_id;
