-- memcpy_throughput: Achieved copy throughput per GPU, copy kind and host memory kind (pinned vs pageable), with its distribution.
-- @include core
--
-- One row per (run_id, pid, device_id, kind, host_memory, src_device_id, dst_device_id) over the
-- memcpy rows with a positive duration and a known size. device_id is the GPU that executed the
-- copy; for peer copies (PtoP, and DtoD between two devices) src_device_id and dst_device_id say
-- which link was used (both null for other copies). host_memory is the host side's memory kind:
-- the source of HtoD/HtoA/HtoH copies, the destination of DtoH/AtoH copies (Pinned = page-locked,
-- Pageable = staged by the driver through a pinned buffer, so slower); null for device-only copies.
-- A copy's duration is end_ns - start_ns, except where the profiler recorded the copy's rate from
-- its own exact timestamps (memcpy.recorded_bytes_per_s: Kineto's 'memory bandwidth (GB/s)'),
-- whose ts/dur old traces round to whole microseconds: there it is bytes / that rate (a 256-byte
-- copy written as dur 1 us ran 1793 ns: 0.1428 GB/s, not 0.256).
--   bytes_per_s      = total_bytes / total_ns (time-weighted: the rate of the group as a whole);
--   p10/p50/p90 and max of the per-copy rate bytes / duration (each copy weighs the same).
--
-- @column run_id
-- @column pid                id       Process.
-- @column rank               id       Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id          id       GPU that executed the copies.
-- @column kind               enum     HtoD, DtoH, DtoD, PtoP, HtoH, ... (memcpy.kind).
-- @column host_memory        enum     Host side memory kind (Pinned, Pageable, Managed, ...); null for device-only copies.
-- @column src_device_id      id       Source GPU of peer / device-to-device copies; else null.
-- @column dst_device_id      id       Destination GPU of peer / device-to-device copies; else null.
-- @column count              count    Copies.
-- @column total_bytes        bytes    Bytes copied.
-- @column total_ns           ns       Sum of copy durations (exact durations where the profiler recorded the rate; rounded to ns).
-- @column bytes_per_s        bytes/s  total_bytes / total_ns.
-- @column p10_bytes_per_s    bytes/s  10th percentile of per-copy throughput.
-- @column p50_bytes_per_s    bytes/s  Median per-copy throughput.
-- @column p90_bytes_per_s    bytes/s  90th percentile of per-copy throughput.
-- @column max_bytes_per_s    bytes/s  Highest per-copy throughput.
-- @column avg_bytes          bytes    Mean copy size.
-- @key bytes_per_s total_bytes
-- @requires memcpy
WITH c AS (
    SELECT run_id, pid, device_id, kind,
           CASE WHEN kind IN ('HtoD', 'HtoA', 'HtoH') THEN src_kind
                WHEN kind IN ('DtoH', 'AtoH') THEN dst_kind END AS host_memory,
           CASE WHEN kind = 'PtoP' OR (kind = 'DtoD' AND src_device_id IS DISTINCT FROM dst_device_id)
                THEN src_device_id END AS src_device_id,
           CASE WHEN kind = 'PtoP' OR (kind = 'DtoD' AND src_device_id IS DISTINCT FROM dst_device_id)
                THEN dst_device_id END AS dst_device_id,
           bytes,
           -- the profiler's own exact rate when it recorded one (Kineto: its timestamps are rounded)
           coalesce(1e9 * bytes / recorded_bytes_per_s, end_ns - start_ns) AS dur_ns
    FROM memcpy WHERE (end_ns > start_ns OR recorded_bytes_per_s > 0) AND bytes IS NOT NULL
)
SELECT c.run_id, c.pid, any_value(rk.rank) AS rank, device_id, kind, host_memory, src_device_id, dst_device_id,
       count(*) AS count, CAST(sum(bytes) AS BIGINT) AS total_bytes, CAST(sum(dur_ns) AS BIGINT) AS total_ns,
       1e9 * sum(bytes) / sum(dur_ns) AS bytes_per_s,
       quantile_cont(1e9 * bytes / dur_ns, 0.1) AS p10_bytes_per_s,
       quantile_cont(1e9 * bytes / dur_ns, 0.5) AS p50_bytes_per_s,
       quantile_cont(1e9 * bytes / dur_ns, 0.9) AS p90_bytes_per_s,
       max(1e9 * bytes / dur_ns) AS max_bytes_per_s,
       avg(bytes) AS avg_bytes
FROM c
LEFT JOIN tk_ranks() rk ON rk.run_id = c.run_id AND rk.pid = c.pid
GROUP BY c.run_id, c.pid, device_id, kind, host_memory, src_device_id, dst_device_id
ORDER BY c.run_id, c.pid, device_id, kind, host_memory, src_device_id, dst_device_id;
