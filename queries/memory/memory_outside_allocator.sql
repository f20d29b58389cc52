-- memory_outside_allocator: GPU memory of a process that PyTorch's caching allocator does not hold (NCCL buffers, cuBLAS/cuDNN workspaces, other libraries), where nsys and an allocator snapshot of the same run both exist.
-- @include core memory
--
-- Needs one run folder with both views of the same process: nsys CUDA memory usage events
-- (memory_events, source 'nsys': every device allocation of the process) and an allocator
-- snapshot (allocator_events), e.g. `tracekit convert report.sqlite snapshot.pickle -o RUN`.
-- The two clocks are not aligned (the snapshot's is the Unix epoch, nsys's its session), so no
-- time is compared: an nsys allocation belongs to the allocator when its address is that of a
-- segment the allocator took from CUDA (a 'segment_alloc' of the snapshot on the same device
-- ordinal); every other nsys allocation is outside it. Segments the allocator took before its
-- history starts are not in the snapshot's history and count as outside: record the history from
-- the start (`_record_memory_history` before the model is built, max_entries large enough).
-- Per nsys device: the peak of the device total, what of it was outside the allocator at that
-- moment, and the peak of the outside total on its own.
--
-- @column run_id
-- @column rank                   id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device                 id     e.g. 'cuda:0'.
-- @column peak_device_bytes      bytes  Largest total of the process's live device allocations (nsys).
-- @column outside_at_peak_bytes  bytes  Of it, allocations outside the allocator's segments at that moment.
-- @column allocator_at_peak_bytes bytes Of it, the allocator's segments (its reserved memory) at that moment.
-- @column outside_share          value  outside_at_peak_bytes / peak_device_bytes, a fraction 0-1.
-- @column peak_outside_bytes     bytes  Largest total outside the allocator at any time.
-- @column outside_allocations    count  nsys allocations outside the allocator over the run.
-- @column allocator_segments     count  nsys allocations at a segment address of the snapshot.
-- @column peak_at_ns             ns     Time of the device peak (nsys clock).
-- @column pid                    id     Process (nsys).
-- @key outside_at_peak_bytes outside_share
-- @requires memory_events allocator_events
-- @empty no device has both nsys memory usage events and an allocator snapshot in the same run folder
WITH ev AS MATERIALIZED (SELECT * FROM tk_memory_events() WHERE source = 'nsys' AND device_type = 'cuda'),
segs AS (
    SELECT DISTINCT run_id, device_id, address FROM allocator_events
    WHERE action = 'segment_alloc' AND address IS NOT NULL
),
both_views AS (SELECT DISTINCT run_id, device_id FROM segs),
cls AS (
    SELECT e.*, s.address IS NOT NULL AS owned
    FROM ev e JOIN both_views b ON b.run_id = e.run_id AND b.device_id = e.device_id
    LEFT JOIN segs s ON s.run_id = e.run_id AND s.device_id = e.device_id AND s.address = e.address
),
running AS (
    SELECT *, sum(CASE WHEN owned THEN 0 WHEN action = 'alloc' THEN bytes WHEN action = 'free' THEN -bytes ELSE 0 END)
                  OVER (PARTITION BY dev_key ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS outside_bytes
    FROM cls
),
agg AS (
    SELECT run_id, dev_key, any_value(pid) AS pid, any_value(device) AS device,
           max(allocated_bytes) AS peak_device_bytes, max(outside_bytes) AS peak_outside_bytes,
           arg_min({'t': timestamp_ns, 'outside': outside_bytes}, ord)
             FILTER (WHERE allocated_bytes = peak) AS at_peak,
           count(*) FILTER (WHERE action = 'alloc' AND NOT owned) AS outside_allocations,
           count(*) FILTER (WHERE action = 'alloc' AND owned) AS allocator_segments
    FROM (SELECT *, max(allocated_bytes) OVER (PARTITION BY dev_key) AS peak FROM running)
    GROUP BY run_id, dev_key
)
SELECT a.run_id, k.rank, a.device, a.peak_device_bytes, CAST(a.at_peak.outside AS BIGINT) AS outside_at_peak_bytes,
       CAST(a.peak_device_bytes - a.at_peak.outside AS BIGINT) AS allocator_at_peak_bytes,
       a.at_peak.outside / nullif(a.peak_device_bytes, 0) AS outside_share,
       CAST(a.peak_outside_bytes AS BIGINT) AS peak_outside_bytes, a.outside_allocations, a.allocator_segments,
       a.at_peak.t AS peak_at_ns, a.pid
FROM agg a LEFT JOIN tk_ranks() k ON k.run_id = a.run_id AND k.pid = a.pid
ORDER BY a.run_id, k.rank NULLS LAST, a.pid, a.device;
