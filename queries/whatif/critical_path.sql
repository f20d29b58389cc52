-- critical_path: One row per segment of each step's critical path (the replay's chain of binding dependencies, across ranks); durations add up to the step's wall time.
--
-- tracekit replays the run's dependency graph (host threads in program order with the time
-- between calls as host time, launch -> GPU work by correlation ID, stream order, syncs -> the
-- work they waited for, event waits, collectives matched across ranks as collective_skew
-- matches them; docs/whatif.md) and walks back from the end of each step -- for a job, the
-- rank whose step range ends last -- along the dependency that set each node's time, to the
-- step's start (a job: the earliest start over its ranks). Each move back from time t to t'
-- is one segment [t', t), so a step's dur_ns add up to wall_ns exactly. Categories: kernel,
-- memcpy, memset, collective transfer (after the last rank arrived), host (between calls, and
-- CUDA API calls other than launches and syncs), launch (launch calls and launch latency),
-- sync wait (a sync call's time after the awaited work ended), stream wait (GPU work queued
-- behind earlier work of its stream or an event), other (before a thread's first event).
-- Steps are step_summary's step ranges (`step N`, ProfilerStep#N, --step-pattern); steps
-- detected in the kernel sequence have no host range and no critical path.
--
-- @column run_id    id     Run folder the row comes from.
-- @column step      count  Step number (as step_summary numbers it).
-- @column seq       count  Position of the segment on the path, from the step's start (0 = first).
-- @column rank      id     Rank of the segment's event (a job's path crosses ranks at collectives); without rank information, the process's ordinal in the run (by pid, from 0).
-- @column category  enum   What the time is (see above).
-- @column name      text   The event: kernel or API call name, 'collective transfer', a step mark.
-- @column start_ns  ns     Segment start on the trace clock.
-- @column dur_ns    ns     Segment length.
-- @column wall_ns   ns     The step's wall time (a job: latest end - earliest start over its ranks).
-- @empty no step ranges (`step N`, ProfilerStep#N or --step-pattern) with events to replay
SELECT run_id, step, seq, rank, category, name, start_ns, dur_ns, wall_ns
FROM tk_critical_path
ORDER BY run_id, step, seq;
