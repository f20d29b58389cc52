-- critical_path_names: Per step, the work on its critical path by name: host time rolled up by the range around it (NVTX / record_function, else operator, else Python function), GPU time by kernel name; the top 10 of each step.
-- @include core critical_path
--
-- The segments of critical_path (docs/whatif.md) grouped per run, step and what they are. GPU
-- segments (kernel, memcpy, memset, collective transfer, and stream wait: work queued behind
-- earlier work of its stream) by their event's name. Host segments (host, launch, sync wait,
-- other) split at the ends of the ranges of the segment's process that it overlaps, each piece
-- named by the innermost range that covers it (a zero-length segment: that holds its start): a
-- user range first (`record_function` / `pytorch.user_annotation`, an NVTX range; not the step
-- range itself), else the innermost `pytorch.cpu_op` operator, else the innermost
-- `pytorch.python_function`, else the API call's own name (source 'api'). Ranges of every thread
-- of the process count (the trace does not say which thread a cross-thread wait was for).
-- For each step the 10 names with the most time, largest first; share_pct is of the step's wall time.
--
-- @key time_ns share_pct
-- @column run_id
-- @column step      count  Step number (as step_summary numbers it).
-- @column side      enum   'host' or 'gpu'.
-- @column source    enum   What names the row: range (NVTX / user annotation), cpu_op, python_function, api (a CUDA API call outside any range), or the GPU category (kernel, memcpy, memset, collective transfer, stream wait).
-- @column name      text   The range, operator, function, call or kernel name.
-- @column time_ns   ns     Time of the name on the step's critical path.
-- @column share_pct %      100 x time_ns / wall_ns.
-- @column segments  count  Segments with time under the name (a host segment split among several names counts for each).
-- @column wall_ns   ns     The step's wall time.
-- @empty no steps to replay (no `step N`, ProfilerStep#N or --step-pattern ranges, no iterations detected in the kernels)
WITH procs AS (
    SELECT p.run_id, p.pid,
           CAST(coalesce(k.rank, row_number() OVER (PARTITION BY p.run_id ORDER BY p.pid) - 1) AS INTEGER) AS rank
    FROM (SELECT DISTINCT run_id, pid FROM cuda_api UNION SELECT DISTINCT run_id, pid FROM kernels
          UNION SELECT DISTINCT run_id, pid FROM nvtx_ranges) p
    LEFT JOIN tk_ranks() k ON k.run_id = p.run_id AND k.pid = p.pid
),
seg AS (
    SELECT c.*, c.category IN ('host', 'launch', 'sync wait', 'other') AS on_host FROM tk_critical_path c
),
ranges AS (
    SELECT r.run_id, p.rank, r.start_ns, r.end_ns, r.name,
           CASE WHEN r.domain = 'pytorch.cpu_op' THEN 2 WHEN r.domain = 'pytorch.python_function' THEN 3
                ELSE 1 END AS pref
    FROM nvtx_ranges r JOIN procs p ON p.run_id = r.run_id AND p.pid = r.pid
    WHERE coalesce(r.domain, '') <> 'pytorch.gpu_user_annotation'
      AND NOT regexp_matches(r.name, '^(ProfilerStep#\d+|step \d+)$')
),
-- a host segment split at the ends of the ranges it overlaps: each piece named by the range
-- that covers it (zero-length segments: the range holding their start)
seg_h AS (
    SELECT run_id, step, seq, rank, start_ns AS s, start_ns + dur_ns AS e, name, wall_ns FROM seg WHERE on_host
),
ov AS (
    SELECT h.run_id, h.step, h.seq, greatest(r.start_ns, h.s) AS a, least(r.end_ns, h.e) AS b, r.name, r.pref,
           r.end_ns - r.start_ns AS len
    FROM seg_h h JOIN ranges r
      ON r.run_id = h.run_id AND r.rank = h.rank AND r.start_ns < greatest(h.e, h.s + 1) AND r.end_ns > h.s
),
pts AS (
    SELECT run_id, step, seq, s AS t FROM seg_h UNION SELECT run_id, step, seq, e FROM seg_h
    UNION SELECT run_id, step, seq, a FROM ov UNION SELECT run_id, step, seq, b FROM ov
),
pieces AS (
    SELECT * FROM (SELECT run_id, step, seq, t AS lo, lead(t) OVER (PARTITION BY run_id, step, seq ORDER BY t) AS hi
                   FROM pts) WHERE hi > lo
    UNION ALL
    SELECT run_id, step, seq, s, e FROM seg_h WHERE e = s
),
best AS (
    SELECT p.run_id, p.step, p.seq, p.hi - p.lo AS dur_ns,
           arg_min(o.name, (o.pref, o.len)) AS name, arg_min(o.pref, (o.pref, o.len)) AS pref
    FROM pieces p LEFT JOIN ov o
      ON o.run_id = p.run_id AND o.step = p.step AND o.seq = p.seq AND o.a <= p.lo AND o.b >= p.hi
    GROUP BY p.run_id, p.step, p.seq, p.lo, p.hi
),
host_named AS (
    SELECT b.run_id, b.step, b.seq, b.dur_ns, h.wall_ns, coalesce(b.name, h.name) AS name,
           coalesce(CASE b.pref WHEN 1 THEN 'range' WHEN 2 THEN 'cpu_op' WHEN 3 THEN 'python_function' END,
                    'api') AS source
    FROM best b JOIN seg_h h ON h.run_id = b.run_id AND h.step = b.step AND h.seq = b.seq
),
named AS (
    SELECT run_id, step, seq, 'host' AS side, source, name, dur_ns, wall_ns FROM host_named
    UNION ALL
    SELECT run_id, step, seq, 'gpu', category, name, dur_ns, wall_ns FROM seg WHERE NOT on_host
)
SELECT run_id, step, side, source, name, CAST(sum(dur_ns) AS BIGINT) AS time_ns,
       100.0 * sum(dur_ns) / any_value(wall_ns) AS share_pct, count(DISTINCT seq) AS segments,
       any_value(wall_ns) AS wall_ns
FROM named
GROUP BY run_id, step, side, source, name
QUALIFY row_number() OVER (PARTITION BY run_id, step ORDER BY sum(dur_ns) DESC, side, source, name) <= 10
ORDER BY run_id, step, time_ns DESC, side, source, name;
