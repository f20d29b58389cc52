-- memory_summary: Peak allocated and reserved memory per run, rank, device and step, with when and where the peak happened.
-- @include core memory
--
-- A device is one allocator's view of one device in one process (tk_memory_events in
-- queries/memory/_macros.sql): the host ('cpu') or a GPU ('cuda:0'), per source ('kineto':
-- PyTorch profiler [memory] events; 'nsys': CUDA memory usage events, every cudaMalloc of the
-- process; 'snapshot': the caching allocator's history). One row per device with scope 'run'
-- (every event of the device), and one per step (tk_steps) with scope 'step' over the events
-- inside the step's [start_ns, end_ns) in the device's process. A step with no memory event on a
-- device has no row for it.
--
-- peak_allocated_bytes is the largest allocated total after any event of the scope: for Kineto
-- exactly the largest 'Total Allocated' the profiler wrote, for nsys the largest running sum of
-- allocations minus frees. It includes memory allocated before the profiler started (Kineto's
-- totals do; start_allocated_bytes shows what was held before the scope's first event). The
-- peak's time, step and operator are those of the first event reaching it.
--
-- @column run_id
-- @column scope                  enum   'run' (all events of the device) or 'step'.
-- @column rank                   id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device                 id     'cpu' (host memory) or e.g. 'cuda:0'.
-- @column step                   count  Step number (tk_steps.step_number); null for scope 'run'.
-- @column peak_allocated_bytes   bytes  Largest allocated total in the scope.
-- @column peak_reserved_bytes    bytes  Largest reserved total (caching allocator segments) in the scope; 0 for the CPU allocator; null for nsys.
-- @column peak_phase             text   Phase that event is in: data, forward, backward, optimizer (tk_memory_context); null when unknown.
-- @column peak_op                text   Outermost PyTorch operator open when that event happened (null: none, or no thread recorded).
-- @column peak_step              count  Step that event is in (null outside steps).
-- @column peak_at_ns                ns     Time of the first event reaching peak_allocated_bytes.
-- @column peak_inner_op          text   Innermost operator open then (usually the allocating aten::empty*).
-- @column start_allocated_bytes  bytes  Allocated total just before the scope's first event.
-- @column end_allocated_bytes    bytes  Allocated total after the scope's last event.
-- @column allocations            count  'alloc' events in the scope.
-- @column frees                  count  'free' events in the scope.
-- @column allocated_total_bytes  bytes  Sum of the sizes of the scope's allocations.
-- @column oom_events             count  Failed allocations ('oom') in the scope.
-- @column source                 enum   'kineto', 'nsys' or 'snapshot' (memory_events.source).
-- @column pid                    id     Process (null for a snapshot: the file does not say).
-- @key peak_allocated_bytes peak_reserved_bytes peak_op
-- @requires memory_events
-- @empty no memory events (a Kineto trace taken without profile_memory=True, an nsys report without --cuda-memory-usage=true)
WITH ev AS MATERIALIZED (
    SELECT *, allocated_bytes - CASE action WHEN 'alloc' THEN bytes WHEN 'free' THEN -bytes ELSE 0 END AS before_bytes
    FROM tk_memory_context()
),
scoped AS (
    SELECT *, 'run' AS scope, CAST(NULL AS BIGINT) AS scope_step FROM ev
    UNION ALL
    SELECT *, 'step', step FROM ev WHERE step IS NOT NULL
),
agg AS (
    SELECT run_id, dev_key, scope, scope_step,
           any_value(pid) AS pid, any_value(device) AS device, any_value(source) AS source,
           any_value(device_type) AS device_type, any_value(device_id) AS device_id,
           max(allocated_bytes) AS peak_allocated_bytes, max(reserved_bytes) AS peak_reserved_bytes,
           arg_min(before_bytes, ord) AS start_allocated_bytes,
           arg_max(allocated_bytes, ord) AS end_allocated_bytes,
           count(*) FILTER (WHERE action = 'alloc') AS allocations,
           count(*) FILTER (WHERE action = 'free') AS frees,
           coalesce(sum(bytes) FILTER (WHERE action = 'alloc'), 0) AS allocated_total_bytes,
           count(*) FILTER (WHERE action = 'oom') AS oom_events
    FROM scoped GROUP BY run_id, dev_key, scope, scope_step
),
at_peak AS (
    SELECT s.run_id, s.dev_key, s.scope, s.scope_step,
           arg_min({'t': s.timestamp_ns, 'step': s.step, 'phase': s.phase, 'op': s.op, 'inner': s.inner_op}, s.ord) AS p
    FROM scoped s JOIN agg a
      ON a.run_id = s.run_id AND a.dev_key = s.dev_key AND a.scope = s.scope
     AND a.scope_step IS NOT DISTINCT FROM s.scope_step AND s.allocated_bytes = a.peak_allocated_bytes
    GROUP BY s.run_id, s.dev_key, s.scope, s.scope_step
)
SELECT a.run_id, a.scope, r.rank, a.device, a.scope_step AS step,
       a.peak_allocated_bytes, a.peak_reserved_bytes, p.p.phase AS peak_phase, p.p.op AS peak_op,
       p.p.step AS peak_step, p.p.t AS peak_at_ns, p.p.inner AS peak_inner_op,
       CAST(a.start_allocated_bytes AS BIGINT) AS start_allocated_bytes, a.end_allocated_bytes,
       a.allocations, a.frees, CAST(a.allocated_total_bytes AS BIGINT) AS allocated_total_bytes, a.oom_events,
       a.source, a.pid
FROM agg a
JOIN at_peak p ON p.run_id = a.run_id AND p.dev_key = a.dev_key AND p.scope = a.scope
              AND p.scope_step IS NOT DISTINCT FROM a.scope_step
LEFT JOIN tk_ranks() r ON r.run_id = a.run_id AND r.pid = a.pid
ORDER BY a.run_id, r.rank NULLS LAST, a.pid, a.device_type, a.device_id, a.source, a.scope = 'step', a.scope_step;
