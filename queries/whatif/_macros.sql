-- @include core ranks
-- @private tk_wi_steps
-- Dependency-graph macros for replay and what-if (tracekit.whatif; docs/whatif.md). Loaded by the
-- engine after the other topics' macros (tk_comm_arrivals from queries/ranks/, tk_steps and
-- tk_ranks from queries/_macros.sql). Every macro is linear in its input: sorts, window
-- functions, ASOF and equality joins only.
--
-- Nodes: one row per event that takes time in the replay, in chains:
--   host chain (run_id, pid, tid): the CUDA API calls of a host thread that no other call of the
--     thread encloses (a driver call inside a runtime call is part of the runtime call), in
--     program order, and a zero-length mark at the start and at the end of every step range of
--     the thread (category 'mark'); the time between two consecutive nodes of a thread is host
--     time (the replay keeps it as the later node's lead-in);
--   GPU chain (run_id, pid, device_id, stream_id): kernels, memcpy and memset of one stream in
--     start order (stream order).
-- chain_kind 0 = host, 1 = GPU. node_id is the row's position in (chain, start, end) order, from 0.
-- category: host: 'launch' (kernel/copy/memset launch), 'sync' (a call that blocks the thread
-- until GPU work ends: *Synchronize*, and copies that are not *Async*), 'api' (any other call),
-- 'mark'; GPU: 'kernel', 'memcpy', 'memset', 'collective' (an NCCL kernel). A CPU rank (no CUDA
-- API call: tk_cpu_procs) has 'op' nodes (its top operators, tk_cpu_ops) on each thread and a
-- 'collective' node per Gloo range on the Gloo worker's thread (tk_cpu_gloo).
CREATE OR REPLACE TEMP MACRO tk_wi_nodes() AS TABLE
WITH api AS (
    SELECT run_id, pid, tid, correlation_id, start_ns, end_ns, name,
           max(end_ns) OVER (PARTITION BY run_id, pid, tid ORDER BY start_ns, end_ns DESC
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS enclosing_end
    FROM cuda_api
),
host AS (
    SELECT run_id, pid, tid, start_ns, greatest(end_ns, start_ns) AS end_ns, correlation_id,
           regexp_replace(name, '_v\d+$', '') AS name,
           CASE WHEN name ILIKE '%synchronize%' THEN 'sync'
                WHEN (name ILIKE '%memcpy%' OR name ILIKE '%memset%') AND name NOT ILIKE '%async%'
                     AND name NOT ILIKE '%tosymbol%' THEN 'sync'
                WHEN tk_launch_kind(name) IS NOT NULL OR name ILIKE '%memcpy%' OR name ILIKE '%memset%'
                     THEN 'launch'
                ELSE 'api' END AS category
    FROM api WHERE enclosing_end IS NULL OR end_ns > enclosing_end
),
marks AS (
    SELECT s.run_id, s.pid, r.tid, s.start_ns AS start_ns, s.start_ns AS end_ns,
           CAST(NULL AS BIGINT) AS correlation_id, 'start ' || s.step AS name, 'mark' AS category
    FROM tk_steps() s JOIN nvtx_ranges r ON r.run_id = s.run_id AND r.range_id = s.step_id
    WHERE s.step_source <> 'detected'
    UNION ALL
    SELECT s.run_id, s.pid, r.tid, s.end_ns, s.end_ns, NULL, 'end ' || s.step, 'mark'
    FROM tk_steps() s JOIN nvtx_ranges r ON r.run_id = s.run_id AND r.range_id = s.step_id
    WHERE s.step_source <> 'detected'
),
gpu AS (
    SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, greatest(end_ns, start_ns) AS end_ns,
           name, CASE WHEN tk_is_nccl(name) THEN 'collective' ELSE 'kernel' END AS category
    FROM kernels
    UNION ALL
    SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, greatest(end_ns, start_ns),
           'Memcpy ' || coalesce(kind, 'Unknown'), 'memcpy' FROM memcpy
    UNION ALL
    SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, greatest(end_ns, start_ns),
           'Memset', 'memset' FROM memset
),
alln AS (
    SELECT run_id, pid, 0 AS chain_kind, tid AS thread_or_device, CAST(NULL AS BIGINT) AS stream_id,
           correlation_id, start_ns, end_ns, name, category, CASE category WHEN 'mark' THEN 0 ELSE 1 END AS ord
    FROM host
    UNION ALL
    SELECT run_id, pid, 0, tid, NULL, correlation_id, start_ns, end_ns, name, category, 0 FROM marks
    UNION ALL
    SELECT run_id, pid, 1, device_id, stream_id, correlation_id, start_ns, end_ns, name, category, 1 FROM gpu
    UNION ALL  -- CPU ranks (queries/ranks/_macros.sql): top operators, Gloo ranges on their threads
    SELECT run_id, pid, 0, tid, NULL, NULL, start_ns, end_ns, name, 'op', 1 FROM tk_cpu_ops() WHERE top
    UNION ALL
    SELECT run_id, pid, 0, tid, NULL, NULL, start_ns, end_ns, name, 'collective', 1 FROM tk_cpu_gloo()
)
SELECT row_number() OVER (ORDER BY run_id, pid, chain_kind, thread_or_device, stream_id, start_ns,
                                   ord, end_ns, correlation_id) - 1 AS node_id,
       dense_rank() OVER (ORDER BY run_id, pid, chain_kind, thread_or_device, stream_id) - 1 AS chain_id,
       run_id, pid, chain_kind, thread_or_device, stream_id, correlation_id, start_ns, end_ns,
       name, category
FROM alln;

-- tk_wi_launch_edges(nodes): launch -> GPU work: for every GPU node with a correlation ID, the
-- host node of the same process whose thread made the API call with that ID and which holds the
-- call's start (the call itself, or the runtime call enclosing a driver call). src = host node,
-- dst = GPU node; the GPU work may start once the launch call has started (src_point 'start').
CREATE OR REPLACE TEMP MACRO tk_wi_launch_edges(nodes) AS TABLE
WITH calls AS (
    SELECT run_id, pid, correlation_id, arg_min(tid, start_ns) AS tid, min(start_ns) AS call_ns
    FROM cuda_api WHERE correlation_id IS NOT NULL GROUP BY run_id, pid, correlation_id
),
g AS (
    SELECT n.node_id, n.run_id, n.pid, c.tid, c.call_ns
    FROM query_table(nodes) n JOIN calls c
      ON c.run_id = n.run_id AND c.pid = n.pid AND c.correlation_id = n.correlation_id
    WHERE n.chain_kind = 1
),
h AS (SELECT node_id, run_id, pid, thread_or_device AS tid, start_ns FROM query_table(nodes)
      WHERE chain_kind = 0 AND category <> 'mark')
SELECT h.node_id AS src, g.node_id AS dst
FROM g ASOF JOIN h ON h.run_id = g.run_id AND h.pid = g.pid AND h.tid = g.tid AND h.start_ns <= g.call_ns;

-- tk_wi_sync_edges(nodes): GPU work -> the host call that waited for it. For every host node of
-- category 'sync': the GPU node of the same process (of the same stream when cuda_sync records
-- a stream synchronization for the call's correlation ID) with the latest end at or before the
-- call's end, if that work was launched before the call started (launch edges): the call
-- returns once it has ended (dst_point 'end').
CREATE OR REPLACE TEMP MACRO tk_wi_sync_edges(nodes, launches) AS TABLE
WITH s AS (
    SELECT n.node_id, n.run_id, n.pid, n.start_ns, n.end_ns,
           any_value(cs.device_id) AS device_id, any_value(cs.stream_id) AS stream_id
    FROM query_table(nodes) n
    LEFT JOIN cuda_sync cs ON cs.run_id = n.run_id AND cs.pid = n.pid AND cs.correlation_id = n.correlation_id
         AND cs.sync_type = 'Stream synchronize'
    WHERE n.chain_kind = 0 AND n.category = 'sync'
    GROUP BY ALL
),
g AS (
    SELECT n.node_id, n.run_id, n.pid, n.thread_or_device AS device_id, n.stream_id, n.end_ns,
           h.start_ns AS launch_ns
    FROM query_table(nodes) n JOIN query_table(launches) l ON l.dst = n.node_id
    JOIN query_table(nodes) h ON h.node_id = l.src
    WHERE n.chain_kind = 1
),
any_stream AS (
    SELECT s.node_id AS dst, g.node_id AS src, g.launch_ns, s.start_ns AS sync_start
    FROM s ASOF JOIN g ON g.run_id = s.run_id AND g.pid = s.pid AND g.end_ns <= s.end_ns
    WHERE s.stream_id IS NULL
),
one_stream AS (
    SELECT s.node_id AS dst, g.node_id AS src, g.launch_ns, s.start_ns AS sync_start
    FROM s ASOF JOIN g ON g.run_id = s.run_id AND g.pid = s.pid AND g.device_id = s.device_id
                      AND g.stream_id = s.stream_id AND g.end_ns <= s.end_ns
    WHERE s.stream_id IS NOT NULL
)
SELECT src, dst FROM (SELECT * FROM any_stream UNION ALL SELECT * FROM one_stream)
WHERE launch_ns <= sync_start;

-- tk_wi_collectives(nodes): the GPU nodes that are calls of a collective instance matched across
-- ranks as collective_skew matches them (tk_comm_arrivals, queries/ranks/_macros.sql): instance
-- = a dense number per (run_id, process_group, collective, seq); is_last = the participant that
-- arrived last (its kernel duration is the instance's transfer time). A CPU rank's Gloo ranges
-- (category 'collective' on their worker thread) are matched the same way (device_id null).
-- The calls' times are on rank 0's clock (tk_comm_calls), the nodes' on their rank's own: each
-- node is moved by its rank's clock_model row the same way (tk_wi_clock) before the match.
CREATE OR REPLACE TEMP MACRO tk_wi_collectives(nodes) AS TABLE
WITH a AS (
    SELECT run_id, pid, device_id, start_ns, end_ns, rank, arrival_from_last,
           dense_rank() OVER (ORDER BY run_id, process_group, collective, seq) - 1 AS instance
    FROM tk_comm_arrivals() WHERE backend = 'nccl'
       OR (backend = 'gloo' AND (run_id, pid) IN (SELECT (run_id, pid) FROM tk_cpu_procs()))
),
n AS (
    SELECT n.node_id, n.run_id, n.pid, CASE WHEN n.chain_kind = 1 THEN n.thread_or_device END AS device_id,
           tk_clock_true(n.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns,
           tk_clock_true(n.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns
    FROM query_table(nodes) n JOIN tk_wi_clock(nodes) c ON c.run_id = n.run_id AND c.pid = n.pid
    WHERE n.category = 'collective'
)
SELECT n.node_id, a.instance, a.rank, a.arrival_from_last = 1 AS is_last
FROM n JOIN a
  ON a.run_id = n.run_id AND a.pid = n.pid AND a.device_id IS NOT DISTINCT FROM n.device_id
 AND a.start_ns = n.start_ns AND a.end_ns = n.end_ns
QUALIFY row_number() OVER (PARTITION BY n.node_id ORDER BY a.instance) = 1;

-- tk_wi_steps(): the steps the replay reports, as step_summary finds them (tk_steps): run_id,
-- pid, rank (tk_ranks, else 0 for a run of one process), step number, and the host thread of the
-- step range (null for steps detected in the kernel sequence), start_ns, end_ns.
CREATE OR REPLACE TEMP MACRO tk_wi_steps() AS TABLE
WITH one AS (SELECT run_id, count(DISTINCT pid) = 1 AS single FROM tk_steps() GROUP BY run_id)
SELECT s.run_id, s.pid,
       CAST(coalesce(k.rank, CASE WHEN o.single THEN 0 END) AS INTEGER) AS rank,
       s.step_number AS step, r.tid, s.start_ns, s.end_ns, s.step_source, s.is_warmup
FROM tk_steps() s
LEFT JOIN nvtx_ranges r ON r.run_id = s.run_id AND r.range_id = s.step_id AND s.step_source <> 'detected'
LEFT JOIN tk_ranks() k ON k.run_id = s.run_id AND k.pid = s.pid
LEFT JOIN one o ON o.run_id = s.run_id
ORDER BY s.run_id, rank, s.step_number, s.start_ns;

-- tk_wi_ranks(): rank per (run_id, pid) for every process with nodes: tk_ranks(), else the
-- process's ordinal in the run (0-based, by pid).
CREATE OR REPLACE TEMP MACRO tk_wi_ranks(nodes) AS TABLE
SELECT p.run_id, p.pid,
       CAST(coalesce(k.rank, row_number() OVER (PARTITION BY p.run_id ORDER BY p.pid) - 1) AS INTEGER) AS rank
FROM (SELECT DISTINCT run_id, pid FROM query_table(nodes)) p
LEFT JOIN tk_ranks() k ON k.run_id = p.run_id AND k.pid = p.pid;

-- tk_wi_clock(nodes): per (run_id, pid) of the nodes, its rank (tk_wi_ranks) and that rank's
-- clock_model row (offset_ns, drift_ppm, t0_ns; null where the run has none: one clock). The
-- graph's edges are found on each process's own clock (every edge but a collective's stays in
-- one process); its times are put on rank 0's clock with tk_clock_true, as the collectives'
-- calls are (tk_comm_calls), so that the replay compares ranks' times on one clock.
CREATE OR REPLACE TEMP MACRO tk_wi_clock(nodes) AS TABLE
SELECT r.run_id, r.pid, r.rank, m.offset_ns, m.drift_ppm, m.t0_ns
FROM tk_wi_ranks(nodes) r LEFT JOIN clock_model m ON m.run_id = r.run_id AND m.rank = r.rank;

-- tk_wi_step_nodes(nodes): every step (tk_wi_steps) with the node ids that bound it and its
-- measured wall time: a step range's start and end marks (tk_wi_nodes); a detected step's first
-- kernel (its start) and the next iteration's first kernel (its start, end_point 0) or the last
-- kernel (its end, end_point 1).
CREATE OR REPLACE TEMP MACRO tk_wi_step_nodes(nodes) AS TABLE
WITH s AS (
    SELECT s.*, t.step AS step_name FROM tk_wi_steps() s
    JOIN tk_steps() t ON t.run_id = s.run_id AND t.pid = s.pid AND t.start_ns = s.start_ns
                     AND t.end_ns = s.end_ns AND t.step_number = s.step
    WHERE s.tid IS NOT NULL
),
m AS (SELECT node_id, run_id, pid, thread_or_device AS tid, start_ns, name FROM query_table(nodes)
      WHERE category = 'mark'),
ranged AS (
    SELECT s.run_id, s.rank, s.step, a.node_id AS start_node, b.node_id AS end_node, 1 AS end_point,
           s.end_ns - s.start_ns AS measured_ns, s.pid, s.is_warmup AS warmup, s.start_ns
    FROM s
    JOIN m a ON a.run_id = s.run_id AND a.pid = s.pid AND a.tid = s.tid AND a.start_ns = s.start_ns
            AND a.name = 'start ' || s.step_name
    JOIN m b ON b.run_id = s.run_id AND b.pid = s.pid AND b.tid = s.tid AND b.start_ns = s.end_ns
            AND b.name = 'end ' || s.step_name
    QUALIFY row_number() OVER (PARTITION BY s.run_id, s.pid, s.step, s.start_ns ORDER BY a.node_id, b.node_id) = 1
),
-- detected steps are GPU windows: from the start of the iteration's first kernel to the start
-- of the next iteration's (end_point 0), or to the end of the last kernel (end_point 1)
d AS (SELECT * FROM tk_wi_steps() WHERE tid IS NULL),
k AS (SELECT node_id, run_id, pid, start_ns, end_ns FROM query_table(nodes) WHERE chain_kind = 1),
d_start AS (
    SELECT d.*, k.node_id AS start_node FROM d JOIN k
      ON k.run_id = d.run_id AND k.pid = d.pid AND k.start_ns = d.start_ns
    QUALIFY row_number() OVER (PARTITION BY d.run_id, d.pid, d.step ORDER BY k.node_id) = 1
),
-- (--step N keeps the kernels that start inside step N: without the next iteration's first
-- kernel the step ends at the end of its last kernel, the last to end by its end: ASOF)
d_end AS (
    SELECT run_id, pid, step, end_node, end_point FROM (
        SELECT d.run_id, d.pid, d.step, k.node_id AS end_node, 0 AS end_point
        FROM d JOIN k ON k.run_id = d.run_id AND k.pid = d.pid AND k.start_ns = d.end_ns
        UNION ALL
        SELECT d.run_id, d.pid, d.step, k.node_id, 1
        FROM d ASOF JOIN (SELECT * FROM k WHERE end_ns IS NOT NULL) k
          ON k.run_id = d.run_id AND k.pid = d.pid AND d.end_ns >= k.end_ns
        WHERE k.end_ns > d.start_ns)
    QUALIFY row_number() OVER (PARTITION BY run_id, pid, step ORDER BY end_point, end_node) = 1
),
detected AS (
    SELECT a.run_id, a.rank, a.step, a.start_node, b.end_node, b.end_point,
           a.end_ns - a.start_ns AS measured_ns, a.pid, a.is_warmup AS warmup, a.start_ns
    FROM d_start a JOIN d_end b ON b.run_id = a.run_id AND b.pid = a.pid AND b.step = a.step
)
SELECT run_id, rank, step, start_node, end_node, end_point, measured_ns, pid, warmup
FROM (SELECT * FROM ranged UNION ALL SELECT * FROM detected)
ORDER BY run_id, rank, step, start_ns;

-- tk_wi_event_edges(nodes, launches): cross-stream waits that the trace records only as host
-- calls: for every cudaStreamWaitEvent (cuStreamWaitEvent, hipStreamWaitEvent) call, the latest
-- cudaEventRecord call of the same thread before it marks the event; src = the GPU work launched
-- last by that thread before the record call, dst = the first GPU work the thread launches
-- after the wait call, when they run on different streams: dst may start once src has ended.
-- (Kineto and nsys do not record which stream an event was recorded on or waited by; the
-- pairing assumes the record-then-wait pattern of PyTorch's streams, docs/whatif.md.)
CREATE OR REPLACE TEMP MACRO tk_wi_event_edges(nodes, launches) AS TABLE
WITH calls AS (
    SELECT run_id, pid, tid, start_ns, regexp_replace(name, '_v\d+$', '') AS name FROM cuda_api
    WHERE regexp_replace(name, '_v\d+$', '') IN ('cudaStreamWaitEvent', 'cuStreamWaitEvent', 'hipStreamWaitEvent',
                                                 'cudaEventRecord', 'cuEventRecord', 'hipEventRecord',
                                                 'cudaEventRecordWithFlags', 'cuEventRecordWithFlags')
),
waits AS (SELECT * FROM calls WHERE name ILIKE '%WaitEvent'),
recs AS (SELECT * FROM calls WHERE name NOT ILIKE '%WaitEvent'),
launched AS (
    SELECT g.node_id, g.run_id, g.pid, h.thread_or_device AS tid, h.start_ns AS launch_ns,
           g.thread_or_device AS device_id, g.stream_id
    FROM query_table(launches) l JOIN query_table(nodes) g ON g.node_id = l.dst
    JOIN query_table(nodes) h ON h.node_id = l.src
),
paired AS (
    SELECT w.run_id, w.pid, w.tid, w.start_ns AS wait_ns, r.start_ns AS rec_ns
    FROM waits w ASOF JOIN recs r ON r.run_id = w.run_id AND r.pid = w.pid AND r.tid = w.tid
                                 AND r.start_ns <= w.start_ns
),
src AS (
    SELECT p.*, s.node_id AS src, s.device_id AS src_device, s.stream_id AS src_stream
    FROM paired p ASOF JOIN launched s ON s.run_id = p.run_id AND s.pid = p.pid AND s.tid = p.tid
                                      AND s.launch_ns < p.rec_ns
)
SELECT s.src, d.node_id AS dst
FROM src s ASOF JOIN launched d ON d.run_id = s.run_id AND d.pid = s.pid AND d.tid = s.tid
                               AND d.launch_ns > s.wait_ns
WHERE d.device_id = s.src_device AND d.stream_id <> s.src_stream;

-- tk_wi_wait_edges(nodes, launches): host calls that the trace shows waiting for the GPU without
-- a sync call (docs/whatif.md, "The GPU holding the host back"): src = the GPU node the call
-- waited for, dst = the call (it returns once src has ended, as a sync edge), rule = which rule
-- found it. Only calls of category 'launch' or 'api' (syncs have tk_wi_sync_edges); the GPU node
-- is of the same process, launched before the call began, and ends inside the call:
--   'pageable copy': a copy call whose own copy (its correlation ID) ended before it returned
--     (a cudaMemcpyAsync into pageable memory returns after the copy);
--   'implicit sync': an allocator, event-query or stream-query call (cudaMalloc/Free*,
--     cudaMallocHost/HostAlloc/FreeHost, cudaEventQuery, cudaStreamQuery; cu*, hip*) returning
--     after the latest GPU work that ended before its return, having waited for it at least as
--     long as it took after it;
--   'long call': any other call (a launch blocked on a full queue of pending launches) at least
--     twice its name's typical time (the 25th percentile of the name's calls in the run), whose
--     wait up to the latest GPU end before its return is at least that typical time, and which
--     returned within that typical time after it.
CREATE OR REPLACE TEMP MACRO tk_wi_wait_edges(nodes, launches) AS TABLE
WITH c AS (
    SELECT node_id, run_id, pid, start_ns, end_ns, name, end_ns - start_ns AS dur,
           quantile_disc(end_ns - start_ns, 0.25) OVER (PARTITION BY run_id, name) AS typical,
           CASE WHEN regexp_matches(name, '^(cuda|cu|hip)(Malloc|Free|MallocHost|HostAlloc|FreeHost|MemAlloc|MemFree|EventQuery|StreamQuery)', 'i')
                THEN 'implicit sync' ELSE 'long call' END AS rule
    FROM query_table(nodes) WHERE chain_kind = 0 AND category IN ('launch', 'api')
),
g AS (
    SELECT n.node_id, n.run_id, n.pid, n.end_ns, n.category, h.start_ns AS launch_ns, l.src AS launcher
    FROM query_table(nodes) n JOIN query_table(launches) l ON l.dst = n.node_id
    JOIN query_table(nodes) h ON h.node_id = l.src
    WHERE n.chain_kind = 1
),
own AS (
    SELECT g.node_id AS src, c.node_id AS dst, 'pageable copy' AS rule
    FROM c JOIN g ON g.launcher = c.node_id
    WHERE c.name ILIKE '%memcpy%' AND g.category = 'memcpy' AND g.end_ns <= c.end_ns AND g.end_ns > c.start_ns
    QUALIFY row_number() OVER (PARTITION BY c.node_id ORDER BY g.end_ns DESC, g.node_id) = 1
),
near AS (
    SELECT g.node_id AS src, c.node_id AS dst, c.rule, c.start_ns, c.end_ns, c.dur, c.typical,
           g.end_ns AS gpu_end, g.launch_ns
    FROM c ASOF JOIN g ON g.run_id = c.run_id AND g.pid = c.pid AND g.end_ns <= c.end_ns
    WHERE c.node_id NOT IN (SELECT dst FROM own)
)
SELECT src, dst, rule FROM own
UNION ALL
SELECT src, dst, rule FROM near
WHERE launch_ns <= start_ns AND gpu_end > start_ns
  AND ((rule = 'implicit sync' AND end_ns - gpu_end <= gpu_end - start_ns)
       OR (rule = 'long call' AND dur >= 2 * typical AND gpu_end - start_ns >= typical
           AND end_ns - gpu_end <= typical));
