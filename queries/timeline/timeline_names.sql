-- timeline_names: Names for the processes, threads and GPUs of a run, for the timeline's track labels.
-- @include core
--
-- kind 'process': processes rows (pid, name, rank from tk_ranks); kind 'thread': threads rows
-- (pid, tid, name); kind 'device': devices rows (device_id, name = GPU product name).
--
-- @column run_id
-- @column kind       enum   'process', 'thread' or 'device'.
-- @column pid        id     OS process ID (process and thread rows).
-- @column tid        id     OS thread ID (thread rows).
-- @column device_id  id     CUDA device ordinal (device rows).
-- @column rank       id     Distributed rank (process rows; NULL when unknown).
-- @column name       text   Process name, thread name or GPU product name.
-- @key name
SELECT p.run_id, 'process' AS kind, p.pid, CAST(NULL AS BIGINT) AS tid, CAST(NULL AS INTEGER) AS device_id,
       coalesce(r.rank, p.rank) AS rank, p.name
FROM processes p LEFT JOIN tk_ranks() r ON r.run_id = p.run_id AND r.pid = p.pid
UNION ALL
SELECT run_id, 'thread', pid, tid, NULL, NULL, name FROM threads
UNION ALL
SELECT run_id, 'device', NULL, NULL, device_id, NULL, name FROM devices
ORDER BY run_id, kind, pid, tid, device_id, name;
