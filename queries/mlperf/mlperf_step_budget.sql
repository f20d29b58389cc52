-- mlperf_step_budget: Per run folder with both an MLPerf log and profiled steps: the log's steps times the profiled step time, against the log's time to train.
-- @include core
--
-- What a change of the profiled step time means for the whole run. log_steps is the number of
-- training steps the log's run took: the runners' tracked_stats metadata.step (tracekit collect,
-- warm-up steps included), else the samples trained to the target / global batch
-- (mlperf_runs.samples_count / global_batch_size), else NULL. profiled_step_ns is the mean wall
-- time of the run folder's measured steps (tk_steps, warm-up steps left out; every rank's steps
-- averaged). steps_time_s = log_steps x profiled_step_ns; step_share = steps_time_s /
-- time_to_train_s: the share of the time to train a change of the step time acts on (a step
-- 10 % faster saves 0.1 x steps_time_s); the rest is initialization, evaluation and anything
-- else between run_start and run_stop. A profiled step slower than the log's own (profiler
-- overhead, warm-up steps counted at the measured mean) can make the share exceed 1.
--
-- @column run_id
-- @column file              text   The MLPerf log (mlperf_runs.file).
-- @column log_steps         count  Training steps of the log's run.
-- @column profiled_steps    count  Measured (non-warm-up) steps of the profile, all ranks.
-- @column profiled_step_ns  ns     Mean wall time of those steps.
-- @column steps_time_s      s      log_steps x profiled_step_ns, seconds.
-- @column time_to_train_s   s      run_stop - run_start of the log (mlperf_runs).
-- @column step_share        value  steps_time_s / time_to_train_s.
-- @key steps_time_s step_share
-- @requires mlperf_runs
WITH logged AS (
    SELECT run_id, file, max(TRY_CAST(json_extract(metadata, '$.step') AS DOUBLE)) AS step
    FROM mlperf_events WHERE key = 'tracked_stats' GROUP BY ALL
),
steps AS (
    SELECT run_id, count(*) AS profiled_steps, avg(end_ns - start_ns) AS profiled_step_ns
    FROM tk_steps() WHERE NOT coalesce(is_warmup, false) AND end_ns > start_ns GROUP BY run_id
),
j AS (
    SELECT r.run_id, r.file, coalesce(l.step, r.samples_count / nullif(r.global_batch_size, 0)) AS log_steps,
           s.profiled_steps, s.profiled_step_ns, r.time_to_train_s
    FROM mlperf_runs r
    JOIN steps s ON s.run_id = r.run_id
    LEFT JOIN logged l ON l.run_id = r.run_id AND l.file = r.file
)
SELECT run_id, file, log_steps, profiled_steps, profiled_step_ns,
       log_steps * profiled_step_ns / 1e9 AS steps_time_s, time_to_train_s,
       log_steps * profiled_step_ns / 1e9 / nullif(time_to_train_s, 0) AS step_share
FROM j ORDER BY run_id, file;
