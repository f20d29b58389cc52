-- timeline_memory: Allocated and reserved totals after each memory event in the timeline's window, for its memory counter tracks.
-- @include memory
--
-- One row per memory event (tk_memory_events: Kineto [memory] events, nsys CUDA memory usage
-- events, allocator snapshot entries) inside [start_ns, end_ns) (either bound NULL = open), with
-- the device's totals right after it; sorted by process, device and time.
--
-- @param start_ns BIGINT NULL  Window start (trace clock, ns).
-- @param end_ns BIGINT NULL  Window end (trace clock, ns).
-- @column run_id
-- @column pid              id     Process (null for a snapshot).
-- @column device           id     'cpu' or e.g. 'cuda:0'.
-- @column source           enum   'kineto', 'nsys' or 'snapshot'.
-- @column timestamp_ns     ns     Event time.
-- @column allocated_bytes  bytes  Allocated total after the event.
-- @column reserved_bytes   bytes  Reserved total after the event (null for nsys).
-- @key allocated_bytes
-- @requires memory_events
SELECT run_id, pid, device, source, timestamp_ns, allocated_bytes, reserved_bytes
FROM tk_memory_events()
WHERE (getvariable('end_ns') IS NULL OR timestamp_ns < getvariable('end_ns'))
  AND (getvariable('start_ns') IS NULL OR timestamp_ns >= getvariable('start_ns'))
ORDER BY run_id, pid, device, source, timestamp_ns, ord;
