-- timeline_window: The time window `tracekit timeline` writes: the step's span for --step, the event count in it, and where a --max-events cut falls.
-- @include core ranks
--
-- The window is [start_ns, end_ns) as given, or, with step, from the earliest start to the latest
-- end of step N (tk_steps: the steps step_summary reports) of the kept processes. Events are counted as
-- timeline_events selects them (overlapping the window; kernels, memcpy, memset, CUDA API calls,
-- NVTX ranges and marks, OS runtime calls, CUDA synchronizations) plus the gpu_metrics samples
-- inside it. When there are more than max_events, cut_ns is the start of the first event past
-- max_events in start order: ending the window there keeps at most max_events events (flows and
-- metadata are not counted).
--
-- @param start_ns BIGINT NULL  Window start (trace clock, ns; a job: rank 0's clock); NULL: from the first event.
-- @param end_ns BIGINT NULL  Window end (trace clock, ns); NULL: to the last event.
-- @param step BIGINT NULL  Use the span of training step N (overrides start_ns and end_ns).
-- @param ranks VARCHAR NULL  Comma-separated ranks to keep (e.g. '0,3'); NULL keeps every process.
-- @param max_events BIGINT 0  Cut the window so it holds at most this many events (0 = no cut).
-- @column run_id
-- @column start_ns        ns     Window start (NULL: open).
-- @column end_ns          ns     Window end before any cut (NULL: open).
-- @column first_ns        ns     Earliest start of an event in the window: the timeline's time zero.
-- @column events          count  Events in the window.
-- @column cut_ns          ns     Where the max_events cut ends the window; NULL when no cut applies.
-- @column kept_events     count  Events written after the cut (events when no cut applies).
-- @column steps           text   The step numbers the run has (comma-separated), for messages.
-- @key events kept_events
WITH rk AS (SELECT * FROM tk_ranks()),
keep AS (
    SELECT CASE WHEN getvariable('ranks') IS NULL THEN NULL
                ELSE CAST(string_split(getvariable('ranks'), ',') AS INTEGER[]) END AS ranks
),
steps AS (
    SELECT s.* REPLACE (tk_clock_true(s.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns,
                        tk_clock_true(s.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns)
    FROM tk_steps() s LEFT JOIN rk r ON r.run_id = s.run_id AND r.pid = s.pid
    LEFT JOIN tk_pid_clock() c ON c.run_id = s.run_id AND c.pid = s.pid, keep
    WHERE keep.ranks IS NULL OR list_contains(keep.ranks, r.rank)
),
win AS (
    SELECT r.run_id,
           CASE WHEN getvariable('step') IS NULL THEN getvariable('start_ns')
                ELSE (SELECT min(start_ns) FROM steps s WHERE s.run_id = r.run_id AND s.step_number = getvariable('step')) END AS w0,
           CASE WHEN getvariable('step') IS NULL THEN getvariable('end_ns')
                ELSE (SELECT max(end_ns) FROM steps s WHERE s.run_id = r.run_id AND s.step_number = getvariable('step')) END AS w1,
           (SELECT string_agg(CAST(n AS VARCHAR), ',' ORDER BY n)
            FROM (SELECT DISTINCT step_number AS n FROM steps s WHERE s.run_id = r.run_id)) AS steps
    FROM runs r
),
ev AS (
    SELECT run_id, pid, start_ns, end_ns FROM kernels
    UNION ALL SELECT run_id, pid, start_ns, end_ns FROM memcpy
    UNION ALL SELECT run_id, pid, start_ns, end_ns FROM memset
    UNION ALL SELECT run_id, pid, start_ns, end_ns FROM cuda_api
    UNION ALL SELECT run_id, pid, start_ns, CASE WHEN is_open THEN NULL ELSE end_ns END FROM nvtx_ranges
    UNION ALL SELECT run_id, pid, start_ns, end_ns FROM osrt_api
    UNION ALL SELECT run_id, pid, timestamp_ns, timestamp_ns FROM nvtx_marks
    UNION ALL SELECT run_id, pid, start_ns, end_ns FROM cuda_sync
),
evc AS (  -- a job's ranks on rank 0's clock, as timeline_events puts them
    SELECT e.run_id, e.pid, tk_clock_true(e.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns,
           tk_clock_true(e.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns
    FROM ev e LEFT JOIN tk_pid_clock() c ON c.run_id = e.run_id AND c.pid = e.pid
),
sel AS (
    SELECT e.run_id, e.start_ns FROM evc e
    JOIN win w ON w.run_id = e.run_id
    LEFT JOIN rk r ON r.run_id = e.run_id AND r.pid = e.pid, keep
    WHERE (w.w1 IS NULL OR e.start_ns < w.w1) AND (w.w0 IS NULL OR e.end_ns IS NULL OR e.end_ns >= w.w0)
      AND (keep.ranks IS NULL OR list_contains(keep.ranks, r.rank))
    UNION ALL
    -- counters belong to a GPU, not a process: kept whatever the ranks
    SELECT m.run_id, m.timestamp_ns FROM gpu_metrics m JOIN win w ON w.run_id = m.run_id
    WHERE (w.w1 IS NULL OR m.timestamp_ns < w.w1) AND (w.w0 IS NULL OR m.timestamp_ns >= w.w0)
),
ranked AS (
    SELECT run_id, start_ns, row_number() OVER (PARTITION BY run_id ORDER BY start_ns) AS n
    FROM sel QUALIFY getvariable('max_events') > 0 AND n = getvariable('max_events') + 1
),
counted AS (SELECT run_id, count(*) AS events, min(start_ns) AS first_ns FROM sel GROUP BY run_id)
SELECT w.run_id, w.w0 AS start_ns, w.w1 AS end_ns, c.first_ns, coalesce(c.events, 0) AS events,
       k.start_ns AS cut_ns,
       CASE WHEN k.start_ns IS NULL THEN coalesce(c.events, 0)
            ELSE (SELECT count(*) FROM sel s WHERE s.run_id = w.run_id AND s.start_ns < k.start_ns) END AS kept_events,
       w.steps
FROM win w LEFT JOIN counted c ON c.run_id = w.run_id LEFT JOIN ranked k ON k.run_id = w.run_id
ORDER BY w.run_id;
