-- timeline_events: Every timeline event of a run in track order, for `tracekit timeline` (Chrome trace-event JSON for Perfetto).
-- @include core ranks
--
-- One row per kernel, memcpy and memset (track 'stream': one per (pid, device_id, stream_id)),
-- CUDA API call, push/pop NVTX range (and framework annotation), OS runtime call and NVTX mark
-- (track 'thread': one per (pid, tid)), start/end NVTX range (track 'ranges': one per process, as
-- such ranges may cross threads) and CUDA synchronization (track 'sync': one per (pid,
-- device_id, stream_id); the device is that of the sync's CUDA context -- the GPU its kernels,
-- copies and memsets ran on -- since nsys records device 0 for every sync; a sync of no single
-- stream, CUPTI's stream 0xFFFFFFFF: event and context-wide syncs, has stream_id NULL). Rows come sorted by track, then start_ns, then end_ns descending (an
-- enclosing event before the events inside it; open NVTX ranges, end_ns NULL, first), so a
-- writer can place each track's events on nesting lanes in one pass.
--
-- Window: an event is kept when it overlaps [start_ns, end_ns) (either bound NULL = open) and is
-- kept whole, never clipped. ranks: keep only processes whose rank (tk_ranks) is in the list.
-- Flows: every GPU activity whose (pid, correlation_id) has a CUDA API call gets a flow_id
-- (numbered 1.. in start order, ties broken by every column down to the arguments, so the same
-- run gets the same numbers every time); that API call lists the flow_ids of the activities it launched
-- (one for a kernel launch, one per kernel for a CUDA graph launch).
--
-- @param start_ns BIGINT NULL  Keep events ending at or after this time (trace clock, ns; a job: rank 0's clock).
-- @param end_ns BIGINT NULL  Keep events starting before this time (trace clock, ns).
-- @param ranks VARCHAR NULL  Comma-separated ranks to keep (e.g. '0,3'); NULL keeps every process.
-- @param origin_ns BIGINT 0  Time zero of the ts column (trace clock, ns).
-- @column run_id
-- @column pid             id     OS process of the event (GPU activity: the process that issued it); NULL when unknown.
-- @column rank            id     Distributed rank of that process (tk_ranks); NULL when unknown.
-- @column track           enum   'stream', 'thread', 'ranges' or 'sync' (see above).
-- @column device_id       id     CUDA device ordinal (stream and sync tracks).
-- @column stream_id       id     CUDA stream ID (stream and sync tracks).
-- @column tid             id     OS thread ID (thread tracks; the opening thread for 'ranges').
-- @column cat             enum   kernel, memcpy, memset, cuda_api, nvtx, osrt, cuda_sync, nvtx_mark, or the framework annotation kind (cpu_op, user_annotation, ...: the nvtx_ranges domain after 'pytorch.').
-- @column name            text   Event name: kernel name, 'Memcpy HtoD', 'Memset', API function, range message, ...
-- @column start_ns        ns     Start.
-- @column end_ns          ns     End; NULL for an NVTX range never closed; equal to start_ns for a mark.
-- @column flow_id         id     Flow from the launching API call to this GPU activity; NULL when none.
-- @column flow_out        id     The flow_ids of the GPU activities this API call launched (a list); NULL when none.
-- @column args            text   The event's details as a JSON object (correlation_id, grid, block, bytes, ...).
-- @column ts              text   start_ns - origin_ns in microseconds with exactly three decimals (Chrome trace 'ts'), from integer ns.
-- @column dur             text   end_ns - start_ns the same way (Chrome trace 'dur'); NULL for an open range.
-- @column fields          text   The event's Chrome trace fields as JSON members: "cat", "name", "ts", "dur" (when it ended), "args".
-- @key name start_ns
WITH rk AS (SELECT * FROM tk_ranks()),
-- the GPU of each CUDA context, from the kernels, copies and memsets it ran: nsys records
-- deviceId 0 for every synchronization (CUPTI leaves it unset), whichever GPU the context is on
ctx_device AS (
    SELECT run_id, pid, context_id, min(device_id) AS device_id
    FROM (SELECT run_id, pid, context_id, device_id FROM kernels
          UNION ALL SELECT run_id, pid, context_id, device_id FROM memcpy
          UNION ALL SELECT run_id, pid, context_id, device_id FROM memset)
    WHERE context_id IS NOT NULL AND device_id IS NOT NULL
    GROUP BY ALL
),
keep AS (
    SELECT CASE WHEN getvariable('ranks') IS NULL THEN NULL
                ELSE CAST(string_split(getvariable('ranks'), ',') AS INTEGER[]) END AS ranks
),
coll AS (
    SELECT run_id, pid, device_id, correlation_id, any_value(collective) AS collective,
           any_value(greatest(in_bytes, out_bytes)) AS message_bytes, any_value(group_size) AS group_size,
           any_value(dtype) AS dtype
    FROM collectives GROUP BY run_id, pid, device_id, correlation_id
),
api_keys AS (SELECT DISTINCT run_id, pid, correlation_id FROM cuda_api WHERE correlation_id IS NOT NULL),
gpu_raw AS (
    SELECT k.run_id, k.pid, k.device_id, k.stream_id, k.correlation_id, 'kernel' AS cat, k.name,
           k.start_ns, k.end_ns,
           to_json({correlation_id: k.correlation_id, device: k.device_id, stream: k.stream_id,
                    grid: [k.grid_x, k.grid_y, k.grid_z], block: [k.block_x, k.block_y, k.block_z],
                    registers_per_thread: k.registers_per_thread,
                    shared_memory_bytes: k.static_shared_memory_bytes + k.dynamic_shared_memory_bytes,
                    nccl: tk_is_nccl(k.name), collective: c.collective, message_bytes: c.message_bytes,
                    group_size: c.group_size, dtype: c.dtype, graph_id: k.graph_id})::VARCHAR AS args
    FROM kernels k
    LEFT JOIN coll c ON c.run_id = k.run_id AND c.pid IS NOT DISTINCT FROM k.pid
                    AND c.device_id IS NOT DISTINCT FROM k.device_id AND c.correlation_id = k.correlation_id
    UNION ALL
    SELECT run_id, pid, device_id, stream_id, correlation_id, 'memcpy', 'Memcpy ' || coalesce(kind, 'Unknown'),
           start_ns, end_ns,
           to_json({correlation_id: correlation_id, device: device_id, stream: stream_id, bytes: bytes,
                    kind: kind, src_kind: src_kind, dst_kind: dst_kind, src_device: src_device_id,
                    dst_device: dst_device_id})::VARCHAR
    FROM memcpy
    UNION ALL
    SELECT run_id, pid, device_id, stream_id, correlation_id, 'memset', 'Memset', start_ns, end_ns,
           to_json({correlation_id: correlation_id, device: device_id, stream: stream_id, bytes: bytes,
                    value: value, mem_kind: mem_kind})::VARCHAR
    FROM memset
),
gpu AS (
    SELECT g.*,
           CASE WHEN a.correlation_id IS NOT NULL THEN
                row_number() OVER (PARTITION BY a.correlation_id IS NOT NULL
                                   ORDER BY g.start_ns, g.end_ns, g.run_id, g.pid, g.device_id, g.stream_id,
                                            g.correlation_id, g.cat, g.name, g.args)
           END AS flow_id
    FROM gpu_raw g
    LEFT JOIN api_keys a ON a.run_id = g.run_id AND a.pid = g.pid AND a.correlation_id = g.correlation_id
),
flows_out AS (
    SELECT run_id, pid, correlation_id, list(flow_id ORDER BY flow_id) AS flow_out
    FROM gpu WHERE flow_id IS NOT NULL GROUP BY run_id, pid, correlation_id
),
ev AS (
    SELECT run_id, pid, 'stream' AS track, device_id, stream_id, CAST(NULL AS BIGINT) AS tid, 0 AS nest,
           cat, name, start_ns, end_ns, flow_id, CAST(NULL AS BIGINT[]) AS flow_out, args
    FROM gpu
    UNION ALL
    SELECT a.run_id, a.pid, 'thread', NULL, NULL, a.tid, 2, 'cuda_api', a.name, a.start_ns, a.end_ns,
           NULL, f.flow_out,
           to_json({correlation_id: a.correlation_id, api: a.api, return_value: a.return_value})::VARCHAR
    FROM cuda_api a
    LEFT JOIN flows_out f ON f.run_id = a.run_id AND f.pid = a.pid AND f.correlation_id = a.correlation_id
    UNION ALL
    SELECT run_id, pid, CASE WHEN style = 'start/end' THEN 'ranges' ELSE 'thread' END, NULL, NULL,
           CASE WHEN style = 'start/end' THEN NULL ELSE tid END, 0,
           CASE WHEN domain LIKE 'pytorch.%' THEN substr(domain, 9) ELSE 'nvtx' END, name, start_ns,
           CASE WHEN is_open THEN NULL ELSE end_ns END, NULL, NULL,
           to_json({domain: domain, category: category, style: style, tid: tid, end_tid: end_tid,
                    range_id: range_id, depth: depth})::VARCHAR
    FROM nvtx_ranges
    UNION ALL
    SELECT run_id, pid, 'thread', NULL, NULL, tid, 1, 'osrt', name, start_ns, end_ns, NULL, NULL,
           to_json({return_value: return_value, nesting_level: nesting_level})::VARCHAR
    FROM osrt_api
    UNION ALL
    SELECT run_id, pid, 'thread', NULL, NULL, tid, 3, 'nvtx_mark', name, timestamp_ns, timestamp_ns, NULL, NULL,
           to_json({domain: domain, category: category})::VARCHAR
    FROM nvtx_marks
    UNION ALL
    SELECT s.run_id, s.pid, 'sync', coalesce(cd.device_id, s.device_id),
           CASE WHEN s.stream_id = 4294967295 THEN NULL ELSE s.stream_id END, NULL, 0, 'cuda_sync',
           coalesce(s.sync_type, 'Synchronization'), s.start_ns, s.end_ns, NULL, NULL,
           to_json({correlation_id: s.correlation_id, device: coalesce(cd.device_id, s.device_id),
                    context: s.context_id,
                    stream: CASE WHEN s.stream_id = 4294967295 THEN NULL ELSE s.stream_id END,
                    event_id: s.event_id})::VARCHAR
    FROM cuda_sync s
    LEFT JOIN ctx_device cd ON cd.run_id = s.run_id AND cd.pid IS NOT DISTINCT FROM s.pid AND cd.context_id = s.context_id
),
evc AS (  -- a job's ranks on rank 0's clock (clock_model; docs/multirank.md)
    SELECT e.* REPLACE (tk_clock_true(e.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns,
                        tk_clock_true(e.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns)
    FROM ev e LEFT JOIN tk_pid_clock() c ON c.run_id = e.run_id AND c.pid = e.pid
)
SELECT e.run_id, e.pid, r.rank, e.track, e.device_id, e.stream_id, e.tid, e.cat, e.name, e.start_ns, e.end_ns,
       e.flow_id, e.flow_out, e.args,
       CASE WHEN e.start_ns < o.origin THEN '-' ELSE '' END
           || printf('%d.%03d', abs(e.start_ns - o.origin) // 1000, abs(e.start_ns - o.origin) % 1000) AS ts,
       printf('%d.%03d', (e.end_ns - e.start_ns) // 1000, (e.end_ns - e.start_ns) % 1000) AS dur,
       '"cat":' || to_json(e.cat) || ',"name":' || to_json(e.name) || ',"ts":' || ts
           || coalesce(',"dur":' || dur, '') || ',"args":' || e.args AS fields
FROM evc e
LEFT JOIN rk r ON r.run_id = e.run_id AND r.pid = e.pid, keep,
     (SELECT coalesce(getvariable('origin_ns'), 0) AS origin) o
WHERE (getvariable('end_ns') IS NULL OR e.start_ns < getvariable('end_ns'))
  AND (getvariable('start_ns') IS NULL OR e.end_ns IS NULL OR e.end_ns >= getvariable('start_ns'))
  AND (keep.ranks IS NULL OR list_contains(keep.ranks, r.rank))
ORDER BY e.run_id, e.pid NULLS LAST, e.track, e.device_id, e.stream_id, e.tid, e.start_ns,
         e.end_ns DESC NULLS FIRST, e.nest, e.name, e.flow_id, e.args;
