-- memory_at_peak: What was allocated at each device's peak, by operator, by step phase and by size; each grouping adds up to the peak.
-- @include core memory
--
-- The peak of a device (tk_memory_events: one allocator's view of one device in one process) is
-- the first event at which allocated_bytes reaches its maximum, memory_summary's run-wide
-- peak_allocated_bytes. An allocation is live at the peak when it happened at or before that
-- event and the block was not freed by then: its free is the next 'alloc' or 'free' event at the
-- same address on the device (a next 'alloc' there means the free was not recorded; the block is
-- then taken as freed at that point). Live allocations are grouped three ways (`by`):
--   'operator': the outermost PyTorch operator open when the block was allocated
--               (tk_memory_context; '(no operator)' when none or no thread is recorded);
--   'phase':    the step phase then: data, forward, backward, optimizer, '(no phase)';
--   'size':     the block's size: < 1 MiB, 1-16 MiB, 16-256 MiB, >= 256 MiB.
-- Each grouping also has the row '(before the trace)': the peak minus the live allocations the
-- trace recorded, i.e. memory allocated before the profiler started (weights, optimizer state
-- of a profiler window opened mid-run) that was still allocated at the peak. So the bytes of each
-- grouping sum exactly to peak_allocated_bytes.
--
-- @column run_id
-- @column rank                  id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device                id     'cpu' or e.g. 'cuda:0'.
-- @column by                    enum   Grouping: 'operator', 'phase' or 'size'.
-- @column name                  text   The operator, phase or size class; '(before the trace)' for memory allocated before the first recorded event.
-- @column bytes                 bytes  Bytes live at the peak in this group.
-- @column share                 value  bytes / peak_allocated_bytes, a fraction 0-1.
-- @column allocations           count  Live allocations in the group (0 for '(before the trace)').
-- @column peak_allocated_bytes  bytes  The device's peak (memory_summary scope 'run').
-- @column peak_at_ns            ns     Time of the peak event.
-- @column source                enum   'kineto', 'nsys' or 'snapshot'.
-- @column pid                   id     Process (null for a snapshot).
-- @key bytes share
-- @requires memory_events
-- @empty no memory events (a Kineto trace taken without profile_memory=True, an nsys report without --cuda-memory-usage=true)
WITH ev AS MATERIALIZED (SELECT * FROM tk_memory_context()),
peaks AS (
    SELECT run_id, dev_key, any_value(pid) AS pid, any_value(device) AS device, any_value(source) AS source,
           max(allocated_bytes) AS peak_allocated_bytes,
           arg_min(ord, ord) FILTER (WHERE allocated_bytes = peak) AS peak_ord
    FROM (SELECT *, max(allocated_bytes) OVER (PARTITION BY dev_key) AS peak FROM ev)
    GROUP BY run_id, dev_key
),
blocks AS (
    SELECT *, lead(ord) OVER (PARTITION BY dev_key, address ORDER BY ord) AS end_ord
    FROM ev WHERE action IN ('alloc', 'free') AND address IS NOT NULL
),
live AS (
    SELECT b.dev_key, b.bytes, coalesce(b.op, '(no operator)') AS op, coalesce(b.phase, '(no phase)') AS phase,
           CASE WHEN b.bytes < 1048576 THEN '< 1 MiB' WHEN b.bytes < 16777216 THEN '1-16 MiB'
                WHEN b.bytes < 268435456 THEN '16-256 MiB' ELSE '>= 256 MiB' END AS size_class
    FROM blocks b JOIN peaks p ON p.dev_key = b.dev_key
    WHERE b.action = 'alloc' AND b.ord <= p.peak_ord AND (b.end_ord IS NULL OR b.end_ord > p.peak_ord)
),
groups AS (
    SELECT dev_key, 'operator' AS by, op AS key, sum(bytes) AS bytes, count(*) AS allocations FROM live GROUP BY dev_key, op
    UNION ALL
    SELECT dev_key, 'phase', phase, sum(bytes), count(*) FROM live GROUP BY dev_key, phase
    UNION ALL
    SELECT dev_key, 'size', size_class, sum(bytes), count(*) FROM live GROUP BY dev_key, size_class
),
recorded AS (SELECT dev_key, coalesce(sum(bytes), 0) AS bytes FROM live GROUP BY dev_key),
before AS (
    SELECT p.dev_key, b.by, '(before the trace)' AS key, p.peak_allocated_bytes - coalesce(r.bytes, 0) AS bytes,
           0 AS allocations
    FROM peaks p LEFT JOIN recorded r ON r.dev_key = p.dev_key
    CROSS JOIN (SELECT unnest(['operator', 'phase', 'size']) AS by) b
),
rows AS (SELECT * FROM groups UNION ALL SELECT * FROM before WHERE bytes <> 0)
SELECT p.run_id, k.rank, p.device, g.by, g.key AS name, CAST(g.bytes AS BIGINT) AS bytes,
       g.bytes / nullif(p.peak_allocated_bytes, 0) AS share, g.allocations,
       p.peak_allocated_bytes, e.timestamp_ns AS peak_at_ns, p.source, p.pid
FROM rows g
JOIN peaks p ON p.dev_key = g.dev_key
JOIN ev e ON e.dev_key = p.dev_key AND e.ord = p.peak_ord
LEFT JOIN tk_ranks() k ON k.run_id = p.run_id AND k.pid = p.pid
ORDER BY p.run_id, k.rank NULLS LAST, p.pid, p.device, p.source, g.by, g.bytes DESC, g.key;
