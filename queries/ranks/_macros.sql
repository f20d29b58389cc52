-- @include core
-- Cross-rank macros (loaded by tracekit.query.engine.Engine like queries/_macros.sql, after it: they
-- call tk_is_nccl and tk_ranks from there). They match the communication calls of every rank into
-- collective instances for collective_skew, stragglers and rank_summary (docs/metrics.md,
-- "Cross-rank analysis"); nccl uses tk_collective_type.

-- tk_collective_type(raw): one spelling per collective type, from a collectives row's name or the
-- word after an NCCL kernel's prefix; case and non-letters ignored: allreduce* -> AllReduce,
-- allgather* (PyTorch's _allgather_base, allgather_into_tensor_coalesced, Gloo's all_gather) ->
-- AllGather, reducescatter* -> ReduceScatter, alltoall* (all_to_allv) -> AllToAll, broadcast,
-- reduce, sendrecv, send, recv, barrier; any other name is kept as written.
CREATE OR REPLACE TEMP MACRO tk_collective_type(raw) AS
    CASE WHEN starts_with(lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')), 'allreduce') THEN 'AllReduce'
         WHEN starts_with(lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')), 'allgather') THEN 'AllGather'
         WHEN starts_with(lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')), 'reducescatter') THEN 'ReduceScatter'
         WHEN starts_with(lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')), 'alltoall') THEN 'AllToAll'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'broadcast' THEN 'Broadcast'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'reduce' THEN 'Reduce'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'sendrecv' THEN 'SendRecv'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'send' THEN 'Send'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'recv' THEN 'Recv'
         WHEN lower(regexp_replace(raw, '[^A-Za-z]', '', 'g')) = 'barrier' THEN 'Barrier'
         ELSE raw END;

-- tk_comm_calls(): every communication call of every participant, one row per call:
--   GPU (backend 'nccl'): each NCCL kernel (tk_is_nccl) with a positive duration; participant =
--     the GPU (pid, device_id); process_group, bytes (nccl-tests size: max(in_bytes, out_bytes))
--     and group_size from its linked collectives row (same pid, device_id, correlation_id), when
--     there is one; collective = that row's name, else the word after the kernel's prefix;
--   CPU (backend 'gloo'): each PyTorch-profiler range `gloo:<op>` (the Gloo backend's execution
--     of a collective; PyTorch >= 2.1), and, for a process with neither NCCL kernels nor gloo
--     ranges, each `c10d::<op>_` operator range (the call into the process group, e.g.
--     c10d::allreduce_); participant = the process (device_id null); no process group or size.
-- arrival_ns: when the participant arrived at the call (tk_comm_arrivals orders arrivals by it):
--   an NCCL kernel's start (it waits inside for its peers); for a Gloo range, the start of the
--   rank's call into the process group that issued it, the k-th `c10d::<op>_` operator of the
--   process and collective type for its k-th range (both in start order, when the process has as
--   many of each and the call started no later than the range), else the range's start. Gloo runs
--   a rank's collectives on a pool of worker threads: a range can start well after the rank
--   called it, queued behind the rank's earlier collectives (DDP's gradient buckets), which are
--   themselves waiting for a late peer; the call is the rank's own arrival.
-- rank: tk_ranks(); in a run where no participant has a known rank, the participant's ordinal
-- (0-based) by (pid, device_id) instead, so a multi-process nsys export without rank
-- information still pairs its processes.
-- seq: the collective's sequence number in its process group when the input records it
-- (collectives.seq: PyTorch's 'Seq' argument, the same on every member rank, so ranks whose traces
-- start at different collectives still match); else the call's position (1 = first) among its
-- participant's calls of the same process group and collective type, by start: the i-th AllReduce of a process group on one rank is matched
-- with the i-th on every other rank (NCCL and Gloo require every member to issue a group's
-- collectives in the same order). A rank whose trace starts one collective late is therefore
-- misaligned; trace the same window on every rank (tracekit collect does).
-- kind: 'p2p' for point-to-point calls (SendRecv, Send, Recv), else 'collective'. sender and
-- receiver (global ranks) of a Send or Recv whose collectives row records the peer (peer_rank:
-- Kineto 'Dst Rank' / 'Src Rank'), else null; such a call's seq is its position among the
-- participant's calls of the same group, type and peer: NCCL matches the i-th send from A to B
-- with the i-th recv at B from A.
-- Times are on each rank's own clock (as recorded); tk_comm_calls() puts them on rank 0's.
CREATE OR REPLACE TEMP MACRO tk_comm_calls_raw() AS TABLE
WITH coll AS (
    SELECT run_id, pid, device_id, correlation_id, any_value(collective) AS collective,
           any_value(greatest(in_bytes, out_bytes)) AS bytes, any_value(group_size) AS group_size,
           any_value(process_group) AS process_group, any_value(seq) AS pg_seq,
           any_value(peer_rank) AS peer_rank
    FROM collectives WHERE correlation_id IS NOT NULL
    GROUP BY run_id, pid, device_id, correlation_id
),
gpu AS (
    SELECT k.run_id, k.pid, k.device_id, 'nccl' AS backend, c.process_group,
           tk_collective_type(coalesce(c.collective, regexp_extract(k.name, 'nccl(?:Dev)?Kernel_([A-Za-z]+)', 1)))
               AS collective,
           k.start_ns, k.end_ns, c.bytes, c.group_size, c.pg_seq, c.peer_rank
    FROM kernels k LEFT JOIN coll c
      ON c.run_id = k.run_id AND c.pid IS NOT DISTINCT FROM k.pid
     AND c.device_id IS NOT DISTINCT FROM k.device_id AND c.correlation_id = k.correlation_id
    WHERE tk_is_nccl(k.name) AND k.end_ns > k.start_ns
),
cpu_ranges AS (
    SELECT run_id, pid, start_ns, end_ns,
           CASE WHEN starts_with(name, 'gloo:') THEN 'gloo' ELSE 'c10d' END AS kind,
           CASE WHEN starts_with(name, 'gloo:') THEN substr(name, 6)
                ELSE regexp_extract(name, '^c10d::_?([A-Za-z_]+?)_?$', 1) END AS op
    FROM nvtx_ranges
    WHERE starts_with(domain, 'pytorch.') AND end_ns > start_ns
      AND (starts_with(name, 'gloo:') OR (starts_with(name, 'c10d::') AND regexp_matches(name, '^c10d::_?[A-Za-z_]+$')))
),
has AS (
    SELECT run_id, pid, bool_or(kind = 'gloo') AS gloo, false AS nccl FROM cpu_ranges GROUP BY run_id, pid
    UNION ALL
    SELECT DISTINCT run_id, pid, false, true FROM gpu
),
has_any AS (
    SELECT run_id, pid, bool_or(gloo) AS gloo, bool_or(nccl) AS nccl FROM has GROUP BY run_id, pid
),
cpu AS (
    SELECT r.run_id, r.pid, CAST(NULL AS INTEGER) AS device_id, 'gloo' AS backend,
           CAST(NULL AS VARCHAR) AS process_group, tk_collective_type(r.op) AS collective,
           r.start_ns, r.end_ns, CAST(NULL AS BIGINT) AS bytes, CAST(NULL AS INTEGER) AS group_size,
           CAST(NULL AS BIGINT) AS pg_seq, CAST(NULL AS INTEGER) AS peer_rank, r.kind AS range_kind
    FROM cpu_ranges r JOIN has_any h ON h.run_id = r.run_id AND h.pid IS NOT DISTINCT FROM r.pid
    WHERE NOT h.nccl AND (r.kind = 'gloo' OR NOT h.gloo) AND r.op <> ''
),
cpu_k AS (
    SELECT *, row_number() OVER w AS k, count(*) OVER w AS n
    FROM cpu WINDOW w AS (PARTITION BY run_id, pid, collective ORDER BY start_ns, end_ns)
),
c10d_calls AS (
    SELECT run_id, pid, tk_collective_type(op) AS collective, start_ns AS call_ns,
           row_number() OVER w AS k, count(*) OVER w AS n
    FROM cpu_ranges WHERE kind = 'c10d' AND op <> ''
    WINDOW w AS (PARTITION BY run_id, pid, tk_collective_type(op) ORDER BY start_ns, end_ns)
),
cpu_arr AS (
    SELECT c.* EXCLUDE (range_kind, k, n),
           CASE WHEN c.range_kind = 'gloo' AND d.call_ns <= c.start_ns THEN d.call_ns ELSE c.start_ns END
               AS arrival_ns
    FROM cpu_k c LEFT JOIN c10d_calls d
      ON d.run_id = c.run_id AND d.pid IS NOT DISTINCT FROM c.pid AND d.collective = c.collective
     AND d.k = c.k AND d.n = c.n
),
calls AS (
    SELECT *, start_ns AS arrival_ns FROM gpu UNION ALL SELECT * FROM cpu_arr
),
parts AS (
    SELECT p.run_id, p.pid, p.device_id, r.rank AS known_rank,
           count(r.rank) OVER (PARTITION BY p.run_id) AS known_in_run,
           row_number() OVER (PARTITION BY p.run_id ORDER BY p.pid, p.device_id) - 1 AS ordinal
    FROM (SELECT DISTINCT run_id, pid, device_id FROM calls) p
    LEFT JOIN tk_ranks() r ON r.run_id = p.run_id AND r.pid = p.pid
),
ranked AS (
    SELECT c.*, CAST(CASE WHEN p.known_in_run > 0 THEN p.known_rank ELSE p.ordinal END AS INTEGER) AS rank
    FROM calls c JOIN parts p
      ON p.run_id = c.run_id AND p.pid IS NOT DISTINCT FROM c.pid AND p.device_id IS NOT DISTINCT FROM c.device_id
),
-- a communicator (process group; the run when none is recorded) of exactly two ranks: the peer of
-- a point-to-point call whose peer the trace does not record is the other rank (issue 36)
pairs AS (
    SELECT run_id, process_group, min(rank) AS lo, max(rank) AS hi FROM ranked
    GROUP BY run_id, process_group HAVING count(DISTINCT rank) = 2 AND coalesce(max(group_size), 2) = 2
),
with_peer AS (
    SELECT c.* REPLACE (coalesce(c.peer_rank, CASE WHEN c.collective IN ('Send', 'Recv')
                                                   THEN q.lo + q.hi - c.rank END) AS peer_rank),
           q.lo AS pair_lo, q.hi AS pair_hi
    FROM ranked c LEFT JOIN pairs q
      ON q.run_id = c.run_id AND q.process_group IS NOT DISTINCT FROM c.process_group
)
SELECT c.* EXCLUDE (pair_lo, pair_hi),
       CASE WHEN c.collective IN ('SendRecv', 'Send', 'Recv') THEN 'p2p' ELSE 'collective' END AS kind,
       CAST(CASE WHEN c.collective = 'Send' THEN c.rank WHEN c.collective = 'Recv' THEN c.peer_rank
                 WHEN c.collective = 'SendRecv' AND c.peer_rank IS NULL THEN c.pair_lo END AS INTEGER) AS sender,
       CAST(CASE WHEN c.collective = 'Recv' THEN c.rank WHEN c.collective = 'Send' THEN c.peer_rank
                 WHEN c.collective = 'SendRecv' AND c.peer_rank IS NULL THEN c.pair_hi END AS INTEGER) AS receiver,
       CASE WHEN c.collective IN ('Send', 'Recv')
            THEN row_number() OVER (PARTITION BY c.run_id, c.pid, c.device_id, c.process_group, c.collective,
                                                 c.peer_rank ORDER BY c.start_ns, c.end_ns)
            ELSE coalesce(c.pg_seq, row_number() OVER (PARTITION BY c.run_id, c.pid, c.device_id, c.process_group,
                                                                c.collective ORDER BY c.start_ns, c.end_ns)) END AS seq
FROM with_peer c;

-- ---------------------------------------------------------------- the what-if graph of CPU ranks
-- (docs/whatif.md, "CPU ranks"; tk_wi_nodes and tk_wi_collectives of queries/whatif/ use them)
-- tk_cpu_procs(): (run_id, pid) of every process whose trace has PyTorch operators or Gloo
-- ranges and no CUDA API call: a CPU rank.
CREATE OR REPLACE TEMP MACRO tk_cpu_procs() AS TABLE
SELECT DISTINCT run_id, pid FROM nvtx_ranges
WHERE domain = 'pytorch.cpu_op' OR (starts_with(domain, 'pytorch.') AND starts_with(name, 'gloo:'))
EXCEPT SELECT DISTINCT run_id, pid FROM cuda_api;

-- tk_cpu_gloo(): the Gloo backend's execution of each collective on a CPU rank (`gloo:<op>`
-- ranges of a positive duration, on Gloo's worker threads), as tk_comm_calls_raw takes them.
CREATE OR REPLACE TEMP MACRO tk_cpu_gloo() AS TABLE
SELECT r.run_id, r.pid, r.tid, r.start_ns, r.end_ns, r.name
FROM nvtx_ranges r JOIN tk_cpu_procs() p ON p.run_id = r.run_id AND p.pid = r.pid
WHERE starts_with(r.domain, 'pytorch.') AND starts_with(r.name, 'gloo:') AND r.end_ns > r.start_ns;

-- tk_cpu_ops(): every PyTorch operator range (domain pytorch.cpu_op) of a CPU rank, on a thread
-- that runs no Gloo collective; top = true for one no other operator of its thread encloses
-- (those are the graph's host nodes: the operators they call are their own time).
CREATE OR REPLACE TEMP MACRO tk_cpu_ops() AS TABLE
WITH gt AS (SELECT DISTINCT run_id, pid, tid FROM tk_cpu_gloo()),
o AS (
    SELECT r.run_id, r.pid, r.tid, r.start_ns, greatest(r.end_ns, r.start_ns) AS end_ns, r.name,
           max(greatest(r.end_ns, r.start_ns)) OVER (PARTITION BY r.run_id, r.pid, r.tid ORDER BY r.start_ns, r.end_ns DESC
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS enclosing_end
    FROM nvtx_ranges r JOIN tk_cpu_procs() p ON p.run_id = r.run_id AND p.pid = r.pid
    LEFT JOIN gt ON gt.run_id = r.run_id AND gt.pid = r.pid AND gt.tid = r.tid
    WHERE r.domain = 'pytorch.cpu_op' AND r.end_ns IS NOT NULL AND gt.tid IS NULL
)
SELECT run_id, pid, tid, start_ns, end_ns, name, enclosing_end IS NULL OR end_ns > enclosing_end AS top FROM o;

-- tk_cpu_gloo_pick(cand, prior): one pass of tk_cpu_edges' 'gloo wait' rule. cand: (dst, p, w,
-- idle_min, src, src_start, src_end, first_end) per operator node dst that starts (w) after an
-- idle gap of its thread (from p; idle_min: 4 x the thread's median gap) and Gloo range node src
-- of its process on another thread that started before w and had not ended at p (first_end: when
-- its collective first ended on any rank); prior: an earlier pass's rows. A src found waited for
-- (ok) in prior by a wake at or before p had completed by then and is no candidate. ok: the
-- thread woke no later after the range's end than it had been idle before it; for a range whose
-- end is recorded after the wake, it closed no later after the wake than the thread had been
-- idle, or its collective first ended (on any rank) after the thread had been idle for idle_min
-- and no longer before the wake than it had been idle before. Per dst, the first-started src
-- that is ok, else the first-started (not ok: no edge).
CREATE OR REPLACE TEMP MACRO tk_cpu_gloo_pick(cand, prior) AS TABLE
SELECT * FROM (
    SELECT c.*, CASE WHEN c.src_end <= c.w THEN c.w - c.src_end <= c.src_end - c.p
                     ELSE c.src_end - c.w <= c.w - c.p
                          OR (c.first_end <= c.w AND c.first_end - c.p >= c.idle_min
                              AND c.w - c.first_end <= c.first_end - c.p) END AS ok
    FROM query_table(cand) c
    WHERE NOT EXISTS (SELECT 1 FROM query_table(prior) q WHERE q.ok AND q.src = c.src AND q.w <= c.p))
QUALIFY row_number() OVER (PARTITION BY dst ORDER BY ok DESC, src_start, src_end, src) = 1;

-- tk_cpu_edges(nodes): the dependencies between threads of a CPU rank that its trace shows only
-- by timing (nodes: tk_wi_nodes' table). rule 'gloo start' (a start edge: dst may start once
-- src has started): the k-th `c10d::<op>_` call of a process and collective type hands its k-th
-- Gloo range to a worker thread (paired as tk_comm_calls_raw pairs them); src = the top operator
-- node of the calling thread holding the call's start, dst = the Gloo range's node.
-- rules 'gloo wait' and 'thread wait' (after edges: dst may start once src has ended): an
-- operator node that starts after an idle gap of its thread at least 4 times the thread's median
-- gap. 'gloo wait' (tk_cpu_gloo_pick, three passes): the Gloo range the thread waited for is the
-- first issued (earliest start) of its process's ranges on other threads that had started before
-- the thread woke and had not completed when it went idle (a thread waits for its collectives in
-- the order it issued them: DDP's buckets) whose end explains the wake: the thread woke no later
-- after it than it had been idle before it. A range's end can be recorded after the wake (the
-- worker records it after completing the collective's future: ~0.1 ms later, ms when it was
-- descheduled; the range then stays a candidate of the thread's next gaps, which the next pass
-- drops); such a range explains the wake when it closed no later after the wake than the thread
-- had been idle, or when its collective first ended on another rank inside the idle time as the
-- first test asks (tracekit.whatif.cpu ends its node at the wake: it had completed by then).
-- 'thread wait': for an operator without a gloo wait, the latest end before its start being
-- another thread's operator (an autograd thread), under the first test.
CREATE OR REPLACE TEMP MACRO tk_cpu_edges(nodes) AS TABLE
WITH h AS (
    SELECT n.node_id, n.run_id, n.pid, n.thread_or_device AS tid, n.start_ns, n.end_ns, n.category,
           lag(n.end_ns) OVER (PARTITION BY n.chain_id ORDER BY n.node_id) AS prev_end
    FROM query_table(nodes) n JOIN tk_cpu_procs() p ON p.run_id = n.run_id AND p.pid = n.pid
    WHERE n.chain_kind = 0
),
ops AS (
    SELECT *, start_ns - prev_end AS gap,
           median(start_ns - prev_end) OVER (PARTITION BY run_id, pid, tid) AS typical
    FROM h WHERE category = 'op'
),
idle AS (SELECT * FROM ops WHERE gap > 0 AND gap >= 4 * typical),
arr AS (  -- each Gloo range's call (rank 0's clock) and when its instance first ended on any rank
    SELECT run_id, pid, start_ns, end_ns,
           min(end_ns) OVER (PARTITION BY run_id, process_group, collective, sender, receiver, seq) AS first_end_ns
    FROM tk_comm_arrivals() WHERE backend = 'gloo'
),
gloo AS (  -- first_end: when the range's collective first ended on any rank, on this rank's clock
    SELECT c.*, c.end_ns - coalesce(greatest(a.end_ns - a.first_end_ns, 0), 0) AS first_end
    FROM (SELECT * FROM h WHERE category = 'collective') c
    LEFT JOIN tk_pid_clock() k ON k.run_id = c.run_id AND k.pid = c.pid
    LEFT JOIN arr a ON a.run_id = c.run_id AND a.pid = c.pid
     AND a.start_ns = tk_clock_true(c.start_ns, k.offset_ns, k.drift_ppm, k.t0_ns)
     AND a.end_ns = tk_clock_true(c.end_ns, k.offset_ns, k.drift_ppm, k.t0_ns)
),
gloo_cand AS (
    SELECT o.node_id AS dst, o.prev_end AS p, o.start_ns AS w, 4 * o.typical AS idle_min, c.node_id AS src,
           c.start_ns AS src_start, c.end_ns AS src_end, c.first_end
    FROM idle o JOIN gloo c
      ON c.run_id = o.run_id AND c.pid = o.pid AND c.tid <> o.tid
     AND c.end_ns > o.prev_end AND c.start_ns < o.start_ns
),
-- a range closing late stays a candidate of the thread's next gaps: each pass drops the ranges
-- an earlier pass found waited for by a wake no later than the gap began (they had completed)
pass0 AS (SELECT *, true AS ok FROM gloo_cand WHERE false),
pass1 AS (SELECT * FROM tk_cpu_gloo_pick('gloo_cand', 'pass0')),
pass2 AS (SELECT * FROM tk_cpu_gloo_pick('gloo_cand', 'pass1')),
done2 AS (SELECT * FROM pass1 UNION ALL SELECT * FROM pass2),
gloo_waits AS (SELECT src, dst, 'gloo wait' AS rule FROM tk_cpu_gloo_pick('gloo_cand', 'done2') WHERE ok),
ends AS (SELECT node_id, run_id, pid, tid, end_ns, category FROM h WHERE category IN ('op', 'collective')),
waits AS (
    SELECT e.node_id AS src, o.node_id AS dst, 'thread wait' AS rule, e.category,
           o.start_ns, o.prev_end, e.end_ns AS src_end, e.tid AS src_tid, o.tid
    FROM idle o ASOF JOIN ends e ON e.run_id = o.run_id AND e.pid = o.pid AND e.end_ns <= o.start_ns
),
calls AS (
    SELECT run_id, pid, tid, start_ns AS call_ns,
           tk_collective_type(regexp_extract(name, '^c10d::_?([A-Za-z_]+?)_?$', 1)) AS collective
    FROM nvtx_ranges
    WHERE starts_with(domain, 'pytorch.') AND starts_with(name, 'c10d::') AND end_ns > start_ns
      AND regexp_matches(name, '^c10d::_?[A-Za-z_]+$') AND regexp_extract(name, '^c10d::_?([A-Za-z_]+?)_?$', 1) <> ''
),
calls_k AS (
    SELECT *, row_number() OVER w AS k, count(*) OVER w AS n FROM calls
    WINDOW w AS (PARTITION BY run_id, pid, collective ORDER BY call_ns)
),
gloo_k AS (
    SELECT g.run_id, g.pid, g.tid, g.start_ns, tk_collective_type(substr(g.name, 6)) AS collective,
           row_number() OVER w AS k, count(*) OVER w AS n
    FROM tk_cpu_gloo() g WINDOW w AS (PARTITION BY g.run_id, g.pid, tk_collective_type(substr(g.name, 6))
                                      ORDER BY g.start_ns, g.end_ns)
),
handed AS (
    SELECT c.run_id, c.pid, c.tid, c.call_ns, d.node_id AS dst
    FROM gloo_k g JOIN calls_k c ON c.run_id = g.run_id AND c.pid = g.pid AND c.collective = g.collective
                                 AND c.k = g.k AND c.n = g.n AND c.call_ns <= g.start_ns
    JOIN h d ON d.run_id = g.run_id AND d.pid = g.pid AND d.tid = g.tid AND d.start_ns = g.start_ns
            AND d.category = 'collective'
),
starts AS (
    SELECT s.node_id AS src, c.dst, 'gloo start' AS rule
    FROM handed c ASOF JOIN (SELECT * FROM h WHERE category = 'op') s
      ON s.run_id = c.run_id AND s.pid = c.pid AND s.tid = c.tid AND s.start_ns <= c.call_ns
)
SELECT src, dst, rule FROM starts
UNION ALL
SELECT src, dst, rule FROM gloo_waits
UNION ALL
SELECT src, dst, rule FROM waits
WHERE category = 'op' AND src_tid <> tid AND src_end > prev_end AND start_ns - src_end <= src_end - prev_end
  AND dst NOT IN (SELECT dst FROM gloo_waits);

-- tk_cpu_op_parts(nodes): every operator of a CPU rank (tk_cpu_ops, the top ones too) with the
-- node (tk_wi_nodes, category 'op') of the top operator it runs in: node_id, start_ns, end_ns
-- (as recorded), name. ops:REGEX=F scales the union of the matching operators inside each node.
CREATE OR REPLACE TEMP MACRO tk_cpu_op_parts(nodes) AS TABLE
SELECT n.node_id, o.start_ns, o.end_ns, o.name
FROM tk_cpu_ops() o ASOF JOIN (SELECT * FROM query_table(nodes) WHERE category = 'op') n
  ON n.run_id = o.run_id AND n.pid = o.pid AND n.thread_or_device = o.tid AND n.start_ns <= o.start_ns
WHERE o.start_ns < n.end_ns OR o.start_ns = n.start_ns;

-- tk_clock_true(t, m): timestamp t of a rank on rank 0's clock, with the rank's clock_model row
-- m (offset_ns, drift_ppm, t0_ns): t - offset - drift * 1e-6 * (t - t0), rounded to ns; t itself
-- where the run has no clock model (one input: one clock).
CREATE OR REPLACE TEMP MACRO tk_clock_true(t, off, drift, t0) AS
    t - coalesce(off, 0) - coalesce(CAST(round(drift * 1e-6 * (t - t0)) AS BIGINT), 0);

-- tk_pid_clock(): per (run_id, pid) with a rank: that rank's clock_model row (offset_ns, drift_ppm,
-- t0_ns), for putting any table's timestamps on rank 0's clock with tk_clock_true (the job
-- timeline). Processes without a rank or a model row are absent (their times stay as recorded).
CREATE OR REPLACE TEMP MACRO tk_pid_clock() AS TABLE
SELECT r.run_id, r.pid, r.rank, m.offset_ns, m.drift_ppm, m.t0_ns
FROM tk_ranks() r JOIN clock_model m ON m.run_id = r.run_id AND m.rank = r.rank;

-- tk_comm_calls(): tk_comm_calls_raw() with start_ns and end_ns on rank 0's clock (the run's
-- clock_model, estimated at conversion; docs/multirank.md), plus clock_id (null: the run's one
-- clock) and clock_bound_ns (the clock's bound; 0 for a run without a clock model, null for an
-- unestimated clock).
CREATE OR REPLACE TEMP MACRO tk_comm_calls() AS TABLE
SELECT c.* REPLACE (tk_clock_true(c.start_ns, m.offset_ns, m.drift_ppm, m.t0_ns) AS start_ns,
                    tk_clock_true(c.end_ns, m.offset_ns, m.drift_ppm, m.t0_ns) AS end_ns,
                    tk_clock_true(c.arrival_ns, m.offset_ns, m.drift_ppm, m.t0_ns) AS arrival_ns),
       m.clock_id, CASE WHEN m.rank IS NULL THEN 0 ELSE m.bound_ns END AS clock_bound_ns
FROM tk_comm_calls_raw() c
LEFT JOIN clock_model m ON m.run_id = c.run_id AND m.rank = c.rank;

-- tk_comm_arrivals(): tk_comm_calls() with what its collective instance says about it. An instance
-- is (run_id, process_group, collective, seq): the seq-th call of that group and type on every
-- participant. ranks = participants in the instance; first/last_start_ns = earliest and latest
-- arrival (arrival_ns: an NCCL kernel's start, a Gloo range's c10d call) over them; arrival_from_last = 1 for the participant that arrived last (ties:
-- the lowest rank, then pid, device), 2 for the next-latest, ...; next_latest_start_ns = the start of
-- the participant with arrival_from_last = 2 (null when the instance has one participant);
-- arrival_from_first = 1 for the earliest (ties: the lowest rank). Point-to-point calls (kind
-- 'p2p') with a known sender and receiver pair into instances (process_group, 'Send/Recv',
-- sender, receiver, seq): the i-th send from A to B with the i-th recv at B from A; those whose
-- peer the trace does not record (SendRecv kernels, older PyTorch) cannot be paired provably
-- and are left out (collective_skew counts them in a notice). For collectives sender and
-- receiver are null.
CREATE OR REPLACE TEMP MACRO tk_comm_arrivals() AS TABLE
SELECT *,
       row_number() OVER (inst ORDER BY arrival_ns, rank, pid, device_id) AS arrival_from_first,
       count(*) OVER inst AS ranks,
       min(arrival_ns) OVER inst AS first_start_ns,
       max(arrival_ns) OVER inst AS last_start_ns,
       row_number() OVER (inst ORDER BY arrival_ns DESC, rank, pid, device_id) AS arrival_from_last,
       nth_value(arrival_ns, 2) OVER (inst ORDER BY arrival_ns DESC, rank, pid, device_id
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS next_latest_start_ns
FROM (SELECT * REPLACE (CASE WHEN kind = 'p2p' THEN 'Send/Recv' ELSE collective END AS collective)
      FROM tk_comm_calls() WHERE kind = 'collective' OR (sender IS NOT NULL AND receiver IS NOT NULL))
WINDOW inst AS (PARTITION BY run_id, process_group, collective, sender, receiver, seq);

-- tk_judged_arrivals(): the arrivals stragglers and step_waits judge: tk_comm_arrivals() of
-- instances with two or more participants that are collectives, or point-to-point pairs of a
-- communicator (process group; the run when none is recorded) of exactly two ranks, whose peer is
-- provable (issue 36). Pairs of larger communicators (pipeline stages) are left out.
CREATE OR REPLACE TEMP MACRO tk_judged_arrivals() AS TABLE
SELECT * EXCLUDE (members)
FROM (SELECT *, count(DISTINCT rank) OVER (PARTITION BY run_id, process_group) AS members
      FROM tk_comm_arrivals() WHERE ranks > 1)
WHERE kind = 'collective' OR (kind = 'p2p' AND members = 2);
