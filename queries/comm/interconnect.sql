-- interconnect: NVLink and PCIe receive/transmit throughput per GPU from sampled GPU metrics (nsys --gpu-metrics-devices), over the run and per step.
-- @include core
--
-- Reads gpu_metrics (one row per sample and metric) and keeps the metrics whose name mentions
-- NVLink (also NVL) or PCIe. Values are summarized as nsys sampled them, in the unit the metric
-- name states in brackets (e.g. 'PCIe RX Throughput [Throughput %]' is percent of the link's peak;
-- a '[bytes/s]'-style unit is a rate): tracekit converts nothing. direction is 'rx' or 'tx' from an
-- RX/TX word in the name (null otherwise, e.g. BAR1 requests). Scope 'run' covers every sample of
-- the GPU; scope 'step' the samples with step start <= timestamp < step end, for every step of
-- the run (samples carry no process, so in a multi-process run each process's steps get a row). Returns no rows when the capture had no GPU metrics (see
-- run_tables for whether gpu_metrics was captured).
--
-- @column run_id
-- @column scope        enum   'run' or 'step'.
-- @column step_id      id     nvtx_ranges.range_id of the step; null for scope 'run'.
-- @column step         text   Step range message; null for scope 'run'.
-- @column device_id    id     GPU the samples were taken on.
-- @column link         enum   'NVLink' or 'PCIe'.
-- @column direction    enum   'rx', 'tx' or null.
-- @column metric_name from gpu_metrics
-- @column unit         text   The unit in the metric name's last brackets ('Throughput %', ...); null when absent.
-- @column samples      count  Samples in the window.
-- @column avg_value    value  Mean sample value.
-- @column p50_value    value  Median sample value.
-- @column p90_value    value  90th percentile sample value.
-- @column max_value    value  Largest sample value.
-- @column first_ns     ns     First sample time.
-- @column last_ns      ns     Last sample time.
-- @key avg_value
-- @requires gpu_metrics
-- @empty no NVLink or PCIe metric (a name with NVLink, NVL or PCIe) among the GPU metric samples
WITH m AS (
    SELECT run_id, timestamp_ns, device_id, metric_name, value,
           CASE WHEN regexp_matches(metric_name, 'NVL(ink)?', 'i') THEN 'NVLink' ELSE 'PCIe' END AS link,
           CASE WHEN regexp_matches(metric_name, '\bRX\b', 'i') THEN 'rx'
                WHEN regexp_matches(metric_name, '\bTX\b', 'i') THEN 'tx' END AS direction,
           nullif(regexp_extract(metric_name, '\[([^\]]*)\]\s*$', 1), '') AS unit
    FROM gpu_metrics
    WHERE regexp_matches(metric_name, 'NVL(ink)?|PCIe', 'i') AND value IS NOT NULL
),
scoped AS (
    SELECT m.*, 'run' AS scope, CAST(NULL AS BIGINT) AS step_id, CAST(NULL AS VARCHAR) AS step FROM m
    UNION ALL
    SELECT mp.* EXCLUDE (step_pid), 'step', s.step_id, s.step
    FROM (SELECT m.*, p.pid AS step_pid
          FROM m JOIN (SELECT DISTINCT run_id, pid FROM tk_steps()) p ON p.run_id = m.run_id) mp
    ASOF JOIN tk_steps() s
      ON s.run_id = mp.run_id AND s.pid = mp.step_pid AND mp.timestamp_ns >= s.start_ns
    WHERE mp.timestamp_ns < s.end_ns
)
SELECT run_id, scope, step_id, step, device_id, link, direction, metric_name, unit,
       count(*) AS samples, avg(value) AS avg_value, quantile_cont(value, 0.5) AS p50_value,
       quantile_cont(value, 0.9) AS p90_value, max(value) AS max_value,
       min(timestamp_ns) AS first_ns, max(timestamp_ns) AS last_ns
FROM scoped
GROUP BY ALL
ORDER BY run_id, scope, first_ns, device_id, link, direction, metric_name;
