-- timeline_counters: GPU metric samples (gpu_metrics) in the timeline's window, for its counter tracks.
--
-- One row per sample inside [start_ns, end_ns) (either bound NULL = open), sorted by GPU, metric
-- and time.
--
-- @param start_ns BIGINT NULL  Window start (trace clock, ns).
-- @param end_ns BIGINT NULL  Window end (trace clock, ns).
-- @column run_id
-- @column gpu_id        id     The profiler's GPU number (gpu_metrics.gpu_id).
-- @column device_id     id     CUDA device ordinal of that GPU, when the export maps it.
-- @column metric_name   text   Metric name as nsys lists it.
-- @column timestamp_ns  ns     Sample time.
-- @column value         value  Sample value, in the unit the metric name states.
-- @key value
SELECT run_id, gpu_id, device_id, metric_name, timestamp_ns, value
FROM gpu_metrics
WHERE (getvariable('end_ns') IS NULL OR timestamp_ns < getvariable('end_ns'))
  AND (getvariable('start_ns') IS NULL OR timestamp_ns >= getvariable('start_ns'))
ORDER BY run_id, gpu_id, metric_name, timestamp_ns, value;
