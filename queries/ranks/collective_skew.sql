-- collective_skew: One row per collective instance across ranks: arrival skew, the last rank to arrive, its transfer time and bandwidth.
-- @include ranks
--
-- A collective instance is the seq-th call of one collective type on one process group, matched
-- across every participant of the run (tk_comm_calls / tk_comm_arrivals in queries/ranks/_macros.sql):
-- on GPUs each NCCL kernel (participant = GPU, process group and size from the collectives row
-- when the input records them: Kineto), on CPUs each Gloo execution range `gloo:<op>` of the
-- PyTorch profiler (else the `c10d::<op>_` operator range). seq is PyTorch's sequence number of
-- the collective in its process group when the trace records it (collectives.seq, the 'Seq'
-- argument: the same on every member rank), else the position of the call among its
-- participant's calls of the same process group and type, in start order (1 = first). A rank's arrival is the start of
-- its call (an NCCL kernel starts, then waits inside for its peers), put on rank 0's clock by the
-- run's clock model (clock_model, estimated at conversion from the collectives: see
-- `clock_offsets` and docs/multirank.md; a run of one input has one clock).
--   skew_ns     = last_start_ns - first_start_ns: how long the first rank waited for the last;
--   skew_bound_ns = how far the true skew can be from skew_ns given the clock model: 0 when all
--                 participants share one clock, else the sum of the two largest bounds of
--                 different clocks among them (each arrival can be off by its clock's bound;
--                 arrivals on one clock are off together); null when a clock was not estimated;
--   transfer_ns = duration of the last-arriving rank's call: the collective without waiting
--                 (ties for last: the lowest rank);
--   bytes       = the last rank's message size, as nccl-tests counts it: max(input, output
--                 buffer bytes) (AllGather: the gathered output; ReduceScatter: the input);
--   algo_bw_bytes_per_s = bytes / transfer_ns; bus_bw_bytes_per_s = algo_bw x bus factor with
--                 n = the communicator's group size (else ranks): AllReduce 2(n-1)/n;
--                 AllGather, ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce, SendRecv,
--                 Send, Recv 1; other types null.
-- A trace of a single rank gives instances with ranks = 1 and skew 0. Ranks come from
-- processes.rank or the manifest (tk_ranks); when a run records none (a multi-process nsys export),
-- each participant's ordinal by (pid, device_id), 0-based.
--
-- @column run_id
-- @column process_group       text     Process group name as the input records it (Kineto 'Process Group Name'); null when unrecorded (nsys, Gloo ranges).
-- @column collective          text     Collective type (AllReduce, AllGather, ReduceScatter, Broadcast, ...).
-- @column seq                 count    Position of the instance among the group's calls of this type on each rank (1 = first).
-- @column ranks               count    Participants (GPUs, or processes for CPU collectives) that made the call.
-- @column first_start_ns      ns       Earliest arrival (call start) over the participants.
-- @column last_start_ns       ns       Latest arrival.
-- @column skew_ns             ns       last_start_ns - first_start_ns.
-- @column skew_bound_ns       ns       Uncertainty of skew_ns from the clock model (0: one clock; null: a clock not estimated).
-- @column last_rank           id       Rank that arrived last.
-- @column transfer_ns         ns       Duration of the last rank's call (the collective without waiting for peers).
-- @column bytes               bytes    Message size of the last rank's call (max of input and output buffers); null when unrecorded.
-- @column algo_bw_bytes_per_s bytes/s  Algorithm bandwidth: bytes / transfer_ns.
-- @column bus_bw_bytes_per_s  bytes/s  Bus bandwidth: algo_bw_bytes_per_s x bus factor.
-- @key skew_ns
-- @column kind                enum     'collective', or 'p2p' for a send paired with its recv (collective 'Send/Recv').
-- @column peers               text     For p2p: 'sender->receiver' (global ranks); null for collectives.
-- @notice SELECT 'collective_skew: run ' || run_id || ': ' || count(*) || ' point-to-point call(s) (SendRecv/Send/Recv) left out: the trace does not record their peer, so their pairing (sender, receiver, sequence) is not provable' FROM tk_comm_calls_raw() WHERE kind = 'p2p' AND (sender IS NULL OR receiver IS NULL) GROUP BY run_id ORDER BY run_id
-- @notice SELECT 'collective_skew: run ' || run_id || ': its inputs may not be one job (merged with --merge-unrelated: ' || json_extract_string(manifest, '$.job.identity_conflicts[0]') || '); cross-rank results may be meaningless' FROM runs WHERE json_array_length(json_extract(manifest, '$.job.identity_conflicts')) > 0 ORDER BY run_id
WITH a AS (SELECT * FROM tk_comm_arrivals()),
clk AS (
    SELECT run_id, process_group, collective, sender, receiver, seq, clock_id,
           max(clock_bound_ns) AS b, bool_or(clock_bound_ns IS NULL) AS unknown
    FROM a GROUP BY run_id, process_group, collective, sender, receiver, seq, clock_id
),
cb AS (
    SELECT run_id, process_group, collective, sender, receiver, seq,
           CASE WHEN count(*) <= 1 THEN 0 WHEN bool_or(unknown) THEN NULL
                ELSE list_sort(list(b), 'DESC')[1] + list_sort(list(b), 'DESC')[2] END AS skew_bound_ns
    FROM clk GROUP BY run_id, process_group, collective, sender, receiver, seq
),
inst AS (
    SELECT run_id, process_group, collective, sender, receiver, seq, any_value(kind) AS kind,
           CAST(any_value(ranks) AS BIGINT) AS ranks,
           any_value(first_start_ns) AS first_start_ns,
           any_value(last_start_ns) AS last_start_ns,
           any_value(rank) FILTER (WHERE arrival_from_last = 1) AS last_rank,
           any_value(end_ns - start_ns) FILTER (WHERE arrival_from_last = 1) AS transfer_ns,
           any_value(bytes) FILTER (WHERE arrival_from_last = 1) AS bytes,
           max(group_size) AS group_size
    FROM a GROUP BY run_id, process_group, collective, sender, receiver, seq
),
f AS (
    SELECT *, coalesce(group_size, ranks) AS n FROM inst
)
SELECT f.run_id, f.process_group, f.collective, f.seq, f.ranks, f.first_start_ns, f.last_start_ns,
       f.last_start_ns - f.first_start_ns AS skew_ns, CAST(cb.skew_bound_ns AS BIGINT) AS skew_bound_ns,
       f.last_rank, f.transfer_ns, f.bytes,
       1e9 * f.bytes / nullif(f.transfer_ns, 0) AS algo_bw_bytes_per_s,
       1e9 * f.bytes / nullif(f.transfer_ns, 0) *
           CASE WHEN f.collective = 'AllReduce' THEN 2.0 * (f.n - 1) / f.n
                WHEN f.collective IN ('AllGather', 'ReduceScatter', 'AllToAll') THEN 1.0 * (f.n - 1) / f.n
                WHEN f.collective IN ('Broadcast', 'Reduce', 'SendRecv', 'Send', 'Recv') THEN 1.0
           END AS bus_bw_bytes_per_s,
       f.kind, CASE WHEN f.kind = 'p2p' THEN f.sender || '->' || f.receiver END AS peers
FROM f
LEFT JOIN cb ON cb.run_id = f.run_id AND cb.process_group IS NOT DISTINCT FROM f.process_group
            AND cb.collective = f.collective AND cb.seq = f.seq
            AND cb.sender IS NOT DISTINCT FROM f.sender AND cb.receiver IS NOT DISTINCT FROM f.receiver
ORDER BY f.run_id, f.first_start_ns, f.process_group NULLS FIRST, f.collective, f.sender, f.receiver, f.seq;
