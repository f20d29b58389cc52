-- memory_timeline: Allocated and reserved memory of each device over time, in equal time bins (for `tracekit plot memory`).
-- @include core memory
--
-- Devices as in memory_summary (tk_memory_events). The run's span, from its first to its last
-- memory event over all devices, is cut into bins of bin_ns, or, when bin_ns is 0, of the
-- smallest 1-2-5 step (1, 2, 5, 10, 20, ... ns) that gives at most `bins` bins, as
-- gpu_utilization_timeline; an event exactly at the span's end is in the last bin. Per bin:
-- the totals after the bin's last event (carried over from earlier bins when the bin has none),
-- and the largest totals in the bin, including the value carried in at its start, so the
-- maximum of max_allocated_bytes over a device's bins is memory_summary's run-wide
-- peak_allocated_bytes. Bins before a device's first event have NULL totals.
--
-- @param bins BIGINT 200 [>=1]  Most bins when bin_ns is 0.
-- @param bin_ns BIGINT 0 [>=0]  Bin width in ns (0 = chosen from the run's length).
-- @column run_id
-- @column rank                 id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device               id     'cpu' or e.g. 'cuda:0'.
-- @column bin                  count  Bin number, 0 = the run's first memory event.
-- @column bin_start_ns         ns     Bin start on the trace clock.
-- @column bin_ns               ns     Bin width.
-- @column allocated_bytes      bytes  Allocated total after the last event at or before the bin's end.
-- @column reserved_bytes       bytes  Reserved total then (null for nsys).
-- @column max_allocated_bytes  bytes  Largest allocated total during the bin.
-- @column max_reserved_bytes   bytes  Largest reserved total during the bin.
-- @column events               count  Memory events in the bin.
-- @column source               enum   'kineto', 'nsys' or 'snapshot'.
-- @column pid                  id     Process (null for a snapshot).
-- @key allocated_bytes reserved_bytes
-- @requires memory_events
-- @empty no memory events (a Kineto trace taken without profile_memory=True, an nsys report without --cuda-memory-usage=true)
WITH ev AS MATERIALIZED (SELECT * FROM tk_memory_events()),
span AS (
    SELECT run_id, min(timestamp_ns) AS t0, max(timestamp_ns) AS t1,
           greatest(CAST(ceil((max(timestamp_ns) - min(timestamp_ns)) / greatest(coalesce(getvariable('bins'), 200), 1)) AS BIGINT), 1) AS raw
    FROM ev GROUP BY run_id
),
width AS (
    SELECT run_id, t0, t1, w, greatest(CAST(ceil((t1 - t0) / w) AS BIGINT), 1) AS nbins
    FROM (SELECT run_id, t0, t1,
                 CASE WHEN coalesce(getvariable('bin_ns'), 0) > 0 THEN getvariable('bin_ns')
                      ELSE (SELECT min(c) FROM (SELECT unnest([e, 2 * e, 5 * e, 10 * e]) AS c) WHERE c >= raw) END AS w
          FROM (SELECT *, CAST(pow(10, floor(log10(raw))) AS BIGINT) AS e FROM span))
),
devs AS (
    SELECT run_id, dev_key, any_value(pid) AS pid, any_value(device) AS device, any_value(source) AS source
    FROM ev GROUP BY run_id, dev_key
),
grid AS (
    SELECT d.*, w.t0, w.w, i AS bin
    FROM devs d JOIN width w ON w.run_id = d.run_id, LATERAL (SELECT unnest(range(0, w.nbins)) AS i)
),
binned AS (
    SELECT e.dev_key, least(CAST(floor((e.timestamp_ns - w.t0) / w.w) AS BIGINT), w.nbins - 1) AS bin,
           max(e.allocated_bytes) AS mx_a, max(e.reserved_bytes) AS mx_r,
           arg_max(e.allocated_bytes, e.ord) AS last_a, arg_max(e.reserved_bytes, e.ord) AS last_r,
           count(*) AS events
    FROM ev e JOIN width w ON w.run_id = e.run_id
    GROUP BY ALL
),
filled AS (
    SELECT g.*, b.mx_a, b.mx_r, b.last_a, b.last_r, coalesce(b.events, 0) AS events,
           last_value(b.last_a IGNORE NULLS) OVER p AS in_a, last_value(b.last_r IGNORE NULLS) OVER p AS in_r
    FROM grid g LEFT JOIN binned b ON b.dev_key = g.dev_key AND b.bin = g.bin
    WINDOW p AS (PARTITION BY g.dev_key ORDER BY g.bin ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
)
SELECT f.run_id, k.rank, f.device, f.bin, f.t0 + f.bin * f.w AS bin_start_ns, f.w AS bin_ns,
       coalesce(f.last_a, f.in_a) AS allocated_bytes, coalesce(f.last_r, f.in_r) AS reserved_bytes,
       greatest(f.mx_a, f.in_a) AS max_allocated_bytes, greatest(f.mx_r, f.in_r) AS max_reserved_bytes,
       f.events, f.source, f.pid
FROM filled f LEFT JOIN tk_ranks() k ON k.run_id = f.run_id AND k.pid = f.pid
ORDER BY f.run_id, k.rank NULLS LAST, f.pid, f.device, f.source, f.bin;
