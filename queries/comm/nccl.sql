-- nccl: NCCL kernels per GPU and collective type: count, time, overlap with compute kernels, exposed time, message size, algorithm and bus bandwidth.
-- @include core cpu ranks
--
-- NCCL kernels are kernels whose name contains ncclKernel_* (NCCL < 2.19) or ncclDevKernel_*
-- (NCCL >= 2.19; tk_is_nccl in queries/_macros.sql). The collective type is the word after the
-- prefix (ncclKernel_AllReduce_RING_LL_Sum_float -> AllReduce; ncclDevKernel_SendRecv -> SendRecv);
-- when a collectives row is linked to the kernel (same run, pid, device_id, correlation_id) its
-- `collective` names it instead (NCCL >= 2.19 runs most collectives in ncclDevKernel_Generic).
-- Names are normalized with case and non-letters ignored: allreduce* -> AllReduce, allgather*
-- (PyTorch's _allgather_base, allgather_into_tensor_coalesced) -> AllGather, reducescatter* ->
-- ReduceScatter, alltoall* (all_to_allv) -> AllToAll, broadcast, reduce, sendrecv, send, recv,
-- barrier (tk_collective_type);
-- any other name is kept as written.
-- A GPU is (run_id, pid, device_id). Every time column is a UNION, so NCCL kernels running at
-- the same time on two streams (e.g. data- and tensor-parallel communicators) count once:
--   nccl_ns     = length of the union of the row's NCCL kernels (this type and n) on the GPU;
--   overlap_ns  = length of the intersection of that union with the union of the GPU's non-NCCL
--                 ("compute") kernels over all streams;
--   exposed_ns  = nccl_ns - overlap_ns: communication time not hidden behind computation;
--   gpu_nccl_ns / gpu_overlap_ns / gpu_exposed_ns: the same over ALL NCCL kernels of the GPU
--                 (every type), repeated on each of the GPU's rows: sum these over GPUs, never
--                 nccl_ns over rows, for a GPU's total communication time (types may overlap).
-- Unions are computed by sort-and-sweep (tk_interval_islands) and the intersections by ASOF
-- lookups of the compute union's cumulative busy time (tk_busy_islands), linear in kernels.
-- Message size (when a collectives row gives it) follows nccl-tests: size = max(in_bytes,
-- out_bytes) of the rank's buffers (allgather: the gathered output; reduce_scatter: the input).
--   algbw_bytes_per_s = sized bytes / sized kernels' summed durations (each kernel moved its
--                       bytes in its own duration: a per-kernel rate, not a union);
--   busbw_bytes_per_s = algbw * bus_factor, with n = ranks:
--     AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce,
--     SendRecv, Send, Recv 1; other types: null.
-- ranks (n), per kernel = the `ranks` parameter when > 0, else the group_size of the kernel's own
-- collectives row, else the largest group_size of the run's collectives, else the world size
-- the manifest records (workload.world_size from `tracekit collect`, or the Kineto trace's
-- distributedInfo.world_size), else the number of GPUs (pid, device_id) of the run that ran NCCL
-- kernels (right for a trace of every rank). Kernels of one collective type on communicators of
-- different sizes (e.g. tensor- and data-parallel groups) are separate rows, one per n.
--
-- With per_step=true the rows are also split by training step (tk_steps, as step_summary: the
-- step of the kernel's process whose window holds the kernel's start; unions and overlaps are
-- then per step too); kernels outside every step are the rows with a null step_number.
--
-- @param ranks BIGINT 0 [>=0]  Ranks in the communicator for the bus-bandwidth factor (0 = infer, see above).
-- @param per_step BOOLEAN false  Also split rows by training step (step_number, step_source).
-- @column run_id
-- @column pid                 id       Process.
-- @column rank                id       Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id           id       CUDA device ordinal in that process.
-- @column step_number         count    Step number (tk_steps) of the kernels with per_step=true; null otherwise or outside every step.
-- @column step_source         enum     'tracekit', 'profiler', 'pattern' or 'detected' with per_step=true; else null.
-- @column collective          text     Collective type (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv, ...); one row per type and ranks.
-- @column count               count    NCCL kernels.
-- @column nccl_ns             ns       Union of their intervals (concurrent kernels count once).
-- @column overlap_ns          ns       Of which overlapped by compute kernels on other streams of the GPU (intersection of the unions).
-- @column exposed_ns          ns       nccl_ns - overlap_ns.
-- @column overlap_fraction    value    overlap_ns / nccl_ns, a fraction 0-1.
-- @column sized_count         count    Kernels with a known message size.
-- @column message_bytes       bytes    Sum of message sizes over sized kernels (null when none).
-- @column avg_message_bytes   bytes    message_bytes / sized_count.
-- @column ranks               count    n used for the bus factor.
-- @column bus_factor          value    busbw / algbw for this collective and n (null when unknown).
-- @column algbw_bytes_per_s   bytes/s  Algorithm bandwidth: message bytes / kernel time of sized kernels.
-- @column busbw_bytes_per_s   bytes/s  Bus bandwidth: algbw_bytes_per_s * bus_factor.
-- @column gpu_nccl_ns         ns       Union of ALL the GPU's NCCL kernels (every row of the GPU repeats it).
-- @column gpu_overlap_ns      ns       Of which overlapped by the GPU's compute kernels.
-- @column gpu_exposed_ns      ns       gpu_nccl_ns - gpu_overlap_ns.
-- @key nccl_ns exposed_ns busbw_bytes_per_s
-- @requires kernels
-- @empty no NCCL kernels (names with ncclKernel_ or ncclDevKernel_: the trace holds no NCCL communication)
WITH nk AS (
    SELECT k.run_id, k.pid, k.device_id, k.stream_id, k.correlation_id, k.name, k.start_ns, k.end_ns
    FROM kernels k WHERE tk_is_nccl(k.name) AND k.end_ns > k.start_ns
),
coll AS (
    SELECT run_id, pid, device_id, correlation_id,
           any_value(collective) AS collective, any_value(greatest(in_bytes, out_bytes)) AS msg_bytes,
           any_value(group_size) AS group_size
    FROM collectives WHERE correlation_id IS NOT NULL
    GROUP BY run_id, pid, device_id, correlation_id
),
named AS (
    SELECT nk.*, c.msg_bytes, c.group_size,
           tk_collective_type(coalesce(c.collective, regexp_extract(nk.name, 'nccl(?:Dev)?Kernel_([A-Za-z]+)', 1)))
               AS collective
    FROM nk LEFT JOIN coll c
      ON c.run_id = nk.run_id AND c.pid IS NOT DISTINCT FROM nk.pid
     AND c.device_id IS NOT DISTINCT FROM nk.device_id AND c.correlation_id = nk.correlation_id
),
comp AS MATERIALIZED (SELECT * FROM tk_busy_islands('compute')),
run_ranks AS (
    SELECT n.run_id, count(DISTINCT (n.pid, n.device_id)) AS gpus, max(n.group_size) AS group_size,
           any_value(coalesce(TRY_CAST(json_extract_string(r.manifest, '$.workload.world_size') AS INTEGER),
                              list_max(TRY_CAST(json_extract(r.manifest, '$.sources.*.files[*].world_size') AS INTEGER[]))))
               AS world_size
    FROM named n LEFT JOIN runs r ON r.run_id = n.run_id GROUP BY n.run_id
),
-- n per kernel: the parameter, else the kernel's own communicator size, else the run's
with_n AS (
    SELECT o.*, CASE WHEN getvariable('ranks') > 0 THEN getvariable('ranks')
                     ELSE coalesce(o.group_size, r.group_size, r.world_size, r.gpus) END AS ranks
    FROM named o JOIN run_ranks r USING (run_id)
),
stepped AS (
    SELECT n.*, CASE WHEN getvariable('per_step') AND n.start_ns < s.end_ns THEN s.step_number END AS step_number,
           CASE WHEN getvariable('per_step') AND n.start_ns < s.end_ns THEN s.step_source END AS step_source
    FROM with_n n ASOF LEFT JOIN tk_steps() s
      ON s.run_id = n.run_id AND s.pid = n.pid AND n.start_ns >= s.start_ns
),
-- unions at two levels: each (GPU, type, n)'s kernels (whole = false) and all the GPU's NCCL
-- kernels (whole = true), by tk_interval_islands (queries/cpu/_macros.sql) with the GPU as its
-- (pid, tid) key and the level as its cls; touching kernels merge (only lengths are used)
levels AS (
    SELECT run_id, pid, device_id AS tid, start_ns, end_ns,
           {'step_number': step_number, 'step_source': step_source, 'whole': false, 'collective': collective,
            'ranks': ranks} AS cls
    FROM stepped
    UNION ALL
    SELECT run_id, pid, device_id, start_ns, end_ns,
           {'step_number': step_number, 'step_source': step_source, 'whole': true, 'collective': NULL,
            'ranks': NULL}
    FROM stepped
),
islands AS (
    SELECT run_id, pid, tid AS device_id, cls.step_number, cls.step_source, cls.whole, cls.collective, cls.ranks,
           start_ns, end_ns
    FROM tk_interval_islands('levels', true)
),
-- compute busy time before t: C(t) = cum_before_ns + (min(t, end) - start) of the last compute
-- island starting at or before t; an island's overlap is C(end) - C(start)
i0 AS (
    SELECT n.*, coalesce(i.cum_before_ns + least(n.start_ns, i.end_ns) - i.start_ns, 0) AS c0
    FROM islands n ASOF LEFT JOIN comp i
      ON n.run_id = i.run_id AND n.pid IS NOT DISTINCT FROM i.pid
     AND n.device_id IS NOT DISTINCT FROM i.device_id AND n.start_ns >= i.start_ns
),
i1 AS (
    SELECT o.*, coalesce(i.cum_before_ns + least(o.end_ns, i.end_ns) - i.start_ns, 0) AS c1
    FROM i0 o ASOF LEFT JOIN comp i
      ON o.run_id = i.run_id AND o.pid IS NOT DISTINCT FROM i.pid
     AND o.device_id IS NOT DISTINCT FROM i.device_id AND o.end_ns >= i.start_ns
),
times AS (
    SELECT run_id, pid, device_id, step_number, step_source, whole, collective, ranks, CAST(sum(end_ns - start_ns) AS BIGINT) AS nccl_ns,
           CAST(sum(c1 - c0) AS BIGINT) AS overlap_ns
    FROM i1 GROUP BY run_id, pid, device_id, step_number, step_source, whole, collective, ranks
),
gpu AS (
    SELECT run_id, pid, device_id, step_number, nccl_ns AS gpu_nccl_ns, overlap_ns AS gpu_overlap_ns,
           nccl_ns - overlap_ns AS gpu_exposed_ns
    FROM times WHERE whole
),
agg0 AS (
    SELECT run_id, pid, device_id, step_number, step_source, collective, ranks, count(*) AS count,
           count(msg_bytes) AS sized_count,
           CAST(sum(msg_bytes) AS BIGINT) AS message_bytes,
           CAST(sum(end_ns - start_ns) FILTER (WHERE msg_bytes IS NOT NULL) AS BIGINT) AS sized_ns
    FROM stepped GROUP BY run_id, pid, device_id, step_number, step_source, collective, ranks
),
agg AS (
    SELECT a.*, t.nccl_ns, t.overlap_ns FROM agg0 a
    JOIN times t ON NOT t.whole AND t.run_id = a.run_id AND t.pid IS NOT DISTINCT FROM a.pid
     AND t.device_id IS NOT DISTINCT FROM a.device_id AND t.collective IS NOT DISTINCT FROM a.collective
     AND t.ranks = a.ranks AND t.step_number IS NOT DISTINCT FROM a.step_number
),
with_f AS (
    SELECT *, CASE WHEN collective = 'AllReduce' THEN 2.0 * (ranks - 1) / ranks
                   WHEN collective IN ('AllGather', 'ReduceScatter', 'AllToAll') THEN 1.0 * (ranks - 1) / ranks
                   WHEN collective IN ('Broadcast', 'Reduce', 'SendRecv', 'Send', 'Recv') THEN 1.0
              END AS bus_factor
    FROM agg
)
SELECT f.run_id, f.pid, rk.rank, f.device_id, f.step_number, f.step_source, collective, count, nccl_ns, overlap_ns, nccl_ns - overlap_ns AS exposed_ns,
       overlap_ns / nullif(nccl_ns, 0) AS overlap_fraction,
       sized_count, message_bytes, message_bytes / nullif(sized_count, 0) AS avg_message_bytes,
       ranks, bus_factor,
       1e9 * message_bytes / nullif(sized_ns, 0) AS algbw_bytes_per_s,
       1e9 * message_bytes / nullif(sized_ns, 0) * bus_factor AS busbw_bytes_per_s,
       g.gpu_nccl_ns, g.gpu_overlap_ns, g.gpu_exposed_ns
FROM with_f f
LEFT JOIN tk_ranks() rk ON rk.run_id = f.run_id AND rk.pid = f.pid
LEFT JOIN gpu g ON g.run_id = f.run_id AND g.pid IS NOT DISTINCT FROM f.pid AND g.device_id IS NOT DISTINCT FROM f.device_id
 AND g.step_number IS NOT DISTINCT FROM f.step_number
ORDER BY f.run_id, f.pid, f.device_id, f.step_number NULLS FIRST, nccl_ns DESC, collective, ranks;
