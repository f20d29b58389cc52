-- host_cpu_utilization: Host CPU busy time per thread, process and run, over the run and per step, from scheduler events; cores busy on average.
-- @include core cpu
--
-- Busy time of a thread is the time it was running on a CPU core: the union of its
-- cpu_thread_state intervals (nsys SCHED_EVENTS, captured with --cpuctxsw; an interval with no
-- recorded switch-out was closed at the thread's last event, see is_clipped; under the torch
-- profiler, `tracekit collect` writes the runner's CPU-time samples there instead: out_state
-- 'Sampled'), cut to the window.
-- OS runtime calls (osrt_api: poll, read, pthread_cond_wait, ...) are reported beside it as
-- osrt_ns, the union of the thread's calls in the window: time spent inside (mostly blocking)
-- OS library calls. busy_ns is null when the run has no cpu_thread_state table (not captured),
-- and CPU samples are not used (no table holds them).
--
-- Windows: scope 'run' spans the first to the last scheduling or OS runtime event of the run;
-- scope 'step' is each training step (tk_steps: tracekit, profiler, pattern or detected), applied
-- to every process of the run (data-loader workers are other processes). Rows at three levels:
-- 'thread' (pid, tid), 'process' (pid; tid null) and 'all' (pid and tid null: every thread of the
-- run -- the study's host CPU utilization).
--   cores_busy      = busy_ns / wall_ns: average number of cores kept busy (0-1 for one thread);
--   cpus            = logical CPUs that appear in the run's scheduling data (a lower bound on
--                     the machine's CPU count), or the host's logical cores that `tracekit
--                     collect` records (manifest environment.host_cpu.cores) when more;
--   cpu_utilization = a fraction 0-1: for a thread (level 'thread'), of one core, busy_ns /
--                     wall_ns (a thread runs on one core at a time: 7.93 s busy in a 12.36 s
--                     window is 0.64, whatever the machine's size); for a process and for all
--                     threads (levels 'process', 'all'), of the machine, busy_ns / (wall_ns * cpus).
--
-- @column run_id
-- @column scope            enum   'run' or 'step'.
-- @column step_id          id     nvtx_ranges.range_id of the step; null for scope 'run'.
-- @column step             text   Step range message; null for scope 'run'.
-- @column step_number      count  Step number (N of `step N` or `ProfilerStep#N`); null for scope 'run'.
-- @column step_source      enum   Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps); null for scope 'run'.
-- @column level            enum   'thread', 'process' or 'all'.
-- @column pid              id     Process (null at level 'all').
-- @column rank             id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column tid              id     Thread (null at levels 'process' and 'all').
-- @column thread_name      text   Thread name from threads (level 'thread'), else the process name (level 'process').
-- @column window_start_ns  ns     Window start.
-- @column wall_ns          ns     Window length.
-- @column busy_ns          ns     Time running on a CPU core, summed over the level's threads.
-- @column osrt_ns          ns     Time inside traced OS runtime calls, summed over the level's threads.
-- @column cores_busy       value  busy_ns / wall_ns: cores kept busy on average.
-- @column cpus             count  Logical CPUs seen in the run's scheduling data, or the collect manifest's host cores when more.
-- @column cpu_utilization  value  A fraction 0-1: thread level, of one core (busy_ns / wall_ns); process and all levels, of the machine (busy_ns / (wall_ns * cpus)).
-- @key busy_ns cpu_utilization
-- @requires cpu_thread_state
WITH tagged AS (
    SELECT run_id, pid, tid, start_ns, end_ns, 'sched' AS cls FROM cpu_thread_state WHERE end_ns > start_ns
    UNION ALL
    SELECT run_id, pid, tid, start_ns, end_ns, 'osrt' FROM osrt_api WHERE end_ns > start_ns
),
-- per thread and class, the union of the intervals as islands (queries/cpu/_macros.sql); only
-- their length is used, so touching intervals may merge
cum AS (SELECT * FROM tk_interval_islands('tagged', true)),
windows AS (
    SELECT run_id, 'run' AS scope, CAST(NULL AS BIGINT) AS step_id, CAST(NULL AS VARCHAR) AS step,
           CAST(NULL AS BIGINT) AS step_number, CAST(NULL AS VARCHAR) AS step_source,
           min(start_ns) AS w0, max(end_ns) AS w1
    FROM tagged GROUP BY run_id
    UNION ALL
    SELECT s.run_id, 'step', s.step_id, s.step, s.step_number, s.step_source, s.start_ns, s.end_ns
    FROM tk_steps() s WHERE s.run_id IN (SELECT run_id FROM tagged)
),
wt AS (
    SELECT w.*, t.pid, t.tid, t.cls
    FROM windows w JOIN (SELECT DISTINCT run_id, pid, tid, cls FROM cum) t ON t.run_id = w.run_id
),
per_thread AS (
    SELECT run_id, scope, step_id, step, step_number, step_source, w0, w1, pid, tid,
           sum(union_ns) FILTER (WHERE cls = 'sched') AS busy_ns,
           sum(union_ns) FILTER (WHERE cls = 'osrt') AS osrt_ns
    FROM tk_union_between('wt', 'cum')
    GROUP BY run_id, scope, step_id, step, step_number, step_source, w0, w1, pid, tid
),
levels AS (
    SELECT run_id, scope, step_id, step, step_number, step_source, w0, w1,
           CASE WHEN GROUPING(pid) = 1 THEN 'all' WHEN GROUPING(tid) = 1 THEN 'process' ELSE 'thread' END AS level,
           pid, tid, sum(busy_ns) AS busy_ns, sum(osrt_ns) AS osrt_ns
    FROM per_thread
    GROUP BY GROUPING SETS ((run_id, scope, step_id, step, step_number, step_source, w0, w1, pid, tid),
                            (run_id, scope, step_id, step, step_number, step_source, w0, w1, pid),
                            (run_id, scope, step_id, step, step_number, step_source, w0, w1))
),
run_cpus AS (  -- CPUs seen in the scheduling data, or the host's cores the collect manifest records
    SELECT c.run_id, greatest(count(DISTINCT c.cpu),
                              coalesce(any_value(TRY_CAST(json_extract_string(r.manifest, '$.environment.host_cpu.cores') AS BIGINT)), 0)) AS cpus
    FROM cpu_thread_state c LEFT JOIN runs r ON r.run_id = c.run_id GROUP BY c.run_id
),
sched_captured AS (
    SELECT run_id FROM run_tables WHERE table_name = 'cpu_thread_state' AND captured
)
SELECT l.run_id, l.scope, l.step_id, l.step, l.step_number, l.step_source, l.level, l.pid, rk.rank, l.tid,
       CASE l.level WHEN 'thread' THEN th.name WHEN 'process' THEN p.name END AS thread_name,
       l.w0 AS window_start_ns, l.w1 - l.w0 AS wall_ns,
       CASE WHEN sc.run_id IS NOT NULL THEN CAST(coalesce(l.busy_ns, 0) AS BIGINT) END AS busy_ns,
       CAST(coalesce(l.osrt_ns, 0) AS BIGINT) AS osrt_ns,
       CASE WHEN sc.run_id IS NOT NULL THEN coalesce(l.busy_ns, 0) / nullif(l.w1 - l.w0, 0) END AS cores_busy,
       rc.cpus,
       CASE WHEN sc.run_id IS NULL THEN NULL
            WHEN l.level = 'thread' THEN coalesce(l.busy_ns, 0) / nullif(l.w1 - l.w0, 0)
            ELSE coalesce(l.busy_ns, 0) / nullif((l.w1 - l.w0) * rc.cpus, 0) END AS cpu_utilization
FROM levels l
LEFT JOIN sched_captured sc ON sc.run_id = l.run_id
LEFT JOIN run_cpus rc ON rc.run_id = l.run_id
LEFT JOIN (SELECT run_id, pid, tid, any_value(name) AS name FROM threads GROUP BY ALL) th
  ON l.level = 'thread' AND th.run_id = l.run_id AND th.pid = l.pid AND th.tid = l.tid
LEFT JOIN tk_ranks() rk ON rk.run_id = l.run_id AND rk.pid = l.pid
LEFT JOIN (SELECT run_id, pid, any_value(name) AS name FROM processes GROUP BY ALL) p
  ON l.level = 'process' AND p.run_id = l.run_id AND p.pid = l.pid
ORDER BY l.run_id, l.scope, l.w0, l.step_id,
         CASE l.level WHEN 'all' THEN 0 WHEN 'process' THEN 1 ELSE 2 END, l.pid, l.tid;
