-- launch_latency_by_name: launch_latency per kernel name, GPU and launch kind, with p50/p90/p99 percentiles.
-- @include core
--
-- Groups the rows of launch_latency (see there for every definition: correlation-ID matching,
-- graph launches, clock skew) by (run_id, pid, device_id, name, launch_kind). Kernels with no API
-- row are kept as their own group (launch_kind null, latency columns null) so they are counted,
-- never dropped. Percentiles are continuous (linear interpolation) over the signed values; rows
-- flagged clock_skew are included with their negative latency. For the `nsys stats --report
-- kernexecsum` equivalent (means, medians, QCount per launching thread) use launch_overhead.
--
-- @column run_id
-- @column pid               id     Process.
-- @column rank              id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id         id     CUDA device ordinal the kernels ran on.
-- @column name              text   Kernel name.
-- @column launch_kind       enum   'kernel', 'graph', 'other' or null (no API row), as in launch_latency.
-- @column count             count  Kernels in the group.
-- @column clock_skew_count  count  Kernels that started before their launch call started.
-- @column latency_avg_ns    ns     Mean launch latency (launch call start to kernel start).
-- @column latency_p50_ns    ns     Median launch latency.
-- @column latency_p90_ns    ns     90th percentile launch latency.
-- @column latency_p99_ns    ns     99th percentile launch latency.
-- @column api_p50_ns        ns     Median launch call duration.
-- @column api_p90_ns        ns     90th percentile launch call duration.
-- @column api_p99_ns        ns     99th percentile launch call duration.
-- @column queue_p50_ns      ns     Median queue delay (kernel start - call end, signed).
-- @column queue_p90_ns      ns     90th percentile queue delay.
-- @column queue_p99_ns      ns     99th percentile queue delay.
-- @key count latency_p50_ns
-- @few_rows
-- @requires kernels cuda_api
-- @empty no kernel launch call (cuda_api) linked to a kernel by its correlation ID
WITH ll AS (
    SELECT k.run_id, k.pid, k.device_id, k.name, k.start_ns,
           l.start_ns AS api_start_ns, l.end_ns AS api_end_ns,
           CASE WHEN l.name IS NULL THEN NULL ELSE coalesce(tk_launch_kind(l.name), 'other') END AS launch_kind
    FROM kernels k
    LEFT JOIN tk_launch_calls() l
      ON l.run_id = k.run_id AND l.pid = k.pid AND l.correlation_id = k.correlation_id
)
SELECT ll.run_id, ll.pid, any_value(rk.rank) AS rank, device_id, name, launch_kind,
       count(*) AS count,
       count(*) FILTER (WHERE start_ns < api_start_ns) AS clock_skew_count,
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
LEFT JOIN tk_ranks() rk ON rk.run_id = ll.run_id AND rk.pid = ll.pid
GROUP BY ll.run_id, ll.pid, device_id, name, launch_kind
ORDER BY ll.run_id, ll.pid, device_id, count(*) DESC, name, launch_kind;
