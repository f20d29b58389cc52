-- @include core
-- Macros of the memory queries (memory_summary, memory_timeline, memory_at_peak); docs/memory.md.
--
-- A memory "device" is one allocator's view of one device in one process: (run_id, pid,
-- device_type, device_id, source). The host (device_type 'cpu', device_id -1) is a device too.
-- Kineto and nsys events go to memory_events, allocator snapshots to allocator_events; both are
-- read here.

-- tk_memory_events(): every memory event with
--   ord             its position in its device's history (timestamp, then seq: the file order);
--   dev_key         a number per device (dense_rank of the key above; NULL pids compare equal);
--   device          device_type:device_id ('cuda:0'), or the device type alone for host memory
--                   (device_id -1: 'cpu', nsys's 'cuda_host');
--   allocated_bytes the allocator's allocated total right after the event: total_allocated_bytes
--                   when the input records it (Kineto, snapshot), else the running sum of
--                   +bytes per 'alloc' and -bytes per 'free' from 0 (nsys: CUPTI sees every
--                   allocation of the process from its start);
--   reserved_bytes  total_reserved_bytes, else the running sum of 'segment_alloc' - 'segment_free';
--                   NULL for nsys (the device totals there are allocated_bytes).
CREATE OR REPLACE TEMP MACRO tk_memory_events() AS TABLE
WITH e AS (
    SELECT run_id, timestamp_ns, pid, tid, device_type, device_id, action, bytes, address, stream_id,
           total_allocated_bytes, total_reserved_bytes, frame, source, seq FROM memory_events
    UNION ALL
    SELECT run_id, timestamp_ns, pid, tid, device_type, device_id, action, bytes, address, stream_id,
           total_allocated_bytes, total_reserved_bytes, frame, source, seq FROM allocator_events
),
d AS (
    SELECT *,
           CASE action WHEN 'alloc' THEN bytes WHEN 'free' THEN -bytes ELSE 0 END AS allocated_delta,
           CASE action WHEN 'segment_alloc' THEN bytes WHEN 'segment_free' THEN -bytes ELSE 0 END AS reserved_delta,
           row_number() OVER (PARTITION BY run_id, pid, device_type, device_id, source ORDER BY timestamp_ns, seq) AS ord,
           dense_rank() OVER (ORDER BY run_id, pid, device_type, device_id, source) AS dev_key
    FROM e
)
SELECT run_id, dev_key, ord, timestamp_ns, pid, tid, device_type, device_id,
       CASE WHEN device_id < 0 THEN device_type ELSE device_type || ':' || device_id END AS device,
       action, bytes, address, stream_id, frame, source, seq,
       CAST(coalesce(total_allocated_bytes, sum(allocated_delta) OVER w) AS BIGINT) AS allocated_bytes,
       CASE WHEN source <> 'nsys'
            THEN CAST(coalesce(total_reserved_bytes, sum(reserved_delta) OVER w) AS BIGINT) END AS reserved_bytes
FROM d
WINDOW w AS (PARTITION BY dev_key ORDER BY ord ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);

-- tk_memory_context(): tk_memory_events() plus what was running when each event happened:
--   op, inner_op  the outermost and the innermost PyTorch operator (nvtx_ranges of domain
--                 'pytorch.cpu_op') open on the event's thread at its time (start <= t <= end);
--                 NULL without a thread (nsys, snapshot) or outside every operator. Found per
--                 nesting depth by an ASOF join (the latest operator of that depth starting at
--                 or before t, kept when it is still open), so the cost grows with events x
--                 depths, not events x operators;
--   step          step_number of the step (tk_steps) of the event's process whose range
--                 [start_ns, end_ns) holds t; NULL outside steps;
--   phase         'data', 'forward', 'backward' or 'optimizer': the tracekit phase range of the
--                 process open at t, else 'backward' when the outermost operator is an autograd
--                 node (autograd::engine::evaluate_function: ...), else 'optimizer' / 'data' when
--                 a PyTorch annotation Optimizer.step#... / Optimizer.zero_grad#... /
--                 enumerate(DataLoader)#... of the process is open at t; else NULL.
CREATE OR REPLACE TEMP MACRO tk_memory_context() AS TABLE
WITH ev AS MATERIALIZED (SELECT * FROM tk_memory_events()),
ops AS MATERIALIZED (
    SELECT run_id, pid, tid, depth, start_ns, end_ns, name FROM nvtx_ranges
    WHERE domain = 'pytorch.cpu_op' AND end_ns IS NOT NULL AND depth IS NOT NULL
),
depths AS (SELECT DISTINCT run_id, pid, tid, depth FROM ops),
probe AS (
    SELECT e.run_id, e.dev_key, e.ord, e.pid, e.tid, e.timestamp_ns, d.depth
    FROM ev e JOIN depths d ON d.run_id = e.run_id AND d.pid = e.pid AND d.tid = e.tid
),
hit AS (
    SELECT p.dev_key, p.ord, p.depth, o.name
    FROM probe p ASOF JOIN ops o
      ON o.run_id = p.run_id AND o.pid = p.pid AND o.tid = p.tid AND o.depth = p.depth
     AND p.timestamp_ns >= o.start_ns
    WHERE p.timestamp_ns <= o.end_ns
),
op AS (
    SELECT dev_key, ord, arg_min(name, depth) AS op, arg_max(name, depth) AS inner_op
    FROM hit GROUP BY dev_key, ord
),
steps AS (SELECT run_id, pid, step_number, start_ns, end_ns FROM tk_steps()),
in_step AS (
    SELECT e.dev_key, e.ord, s.step_number
    FROM ev e ASOF JOIN steps s ON s.run_id = e.run_id AND s.pid = e.pid AND e.timestamp_ns >= s.start_ns
    WHERE e.timestamp_ns < s.end_ns
),
phases AS (
    SELECT run_id, pid, start_ns, end_ns,
           CASE WHEN starts_with(name, 'enumerate(DataLoader)#') THEN 'data'
                WHEN starts_with(name, 'Optimizer.') THEN 'optimizer' ELSE name END AS phase,
           CASE WHEN domain IN ('tracekit', '') THEN 1 ELSE 2 END AS prio
    FROM nvtx_ranges
    WHERE end_ns IS NOT NULL AND end_ns > start_ns
      AND ((domain IN ('tracekit', '') AND name IN ('data', 'forward', 'backward', 'optimizer'))
           OR (domain = 'pytorch.user_annotation'
               AND (starts_with(name, 'enumerate(DataLoader)#') OR starts_with(name, 'Optimizer.step#')
                    OR starts_with(name, 'Optimizer.zero_grad#'))))
),
in_phase AS (
    SELECT e.dev_key, e.ord, p.phase, p.prio
    FROM ev e ASOF JOIN (SELECT * FROM phases WHERE prio = 1) p
      ON p.run_id = e.run_id AND p.pid = e.pid AND e.timestamp_ns >= p.start_ns
    WHERE e.timestamp_ns < p.end_ns
    UNION ALL
    SELECT e.dev_key, e.ord, p.phase, p.prio
    FROM ev e ASOF JOIN (SELECT * FROM phases WHERE prio = 2) p
      ON p.run_id = e.run_id AND p.pid = e.pid AND e.timestamp_ns >= p.start_ns
    WHERE e.timestamp_ns < p.end_ns
)
SELECT e.*, o.op, o.inner_op, s.step_number AS step,
       coalesce(tk.phase, CASE WHEN starts_with(o.op, 'autograd::engine::evaluate_function') THEN 'backward' END,
                pt.phase) AS phase
FROM ev e
LEFT JOIN op o ON o.dev_key = e.dev_key AND o.ord = e.ord
LEFT JOIN in_step s ON s.dev_key = e.dev_key AND s.ord = e.ord
LEFT JOIN (SELECT * FROM in_phase WHERE prio = 1) tk ON tk.dev_key = e.dev_key AND tk.ord = e.ord
LEFT JOIN (SELECT * FROM in_phase WHERE prio = 2) pt ON pt.dev_key = e.dev_key AND pt.ord = e.ord;
