-- step_waits: One row per run, rank and step of a job: how long the rank waited at collectives in the step, and how long it held the other ranks up.
-- @include core ranks
--
-- The per-step view of `stragglers`, from the same arrivals (tk_judged_arrivals in
-- queries/ranks/_macros.sql: collective instances with two or more participants, and the
-- point-to-point pairs of a 2-rank communicator; times on rank 0's clock). An arrival belongs to
-- the step (tk_steps, as step_summary numbers it) of its own process whose [start_ns, end_ns),
-- put on rank 0's clock, holds it; arrivals outside every step are not counted.
--   collectives = instances whose arrival of this rank lies in the step;
--   wait_ns     = how long the rank waited for the last arrival: the union of [its arrival, the
--                 instance's last arrival] over those instances (waits that overlap, as Gloo's
--                 gradient buckets outstanding together, count once), clipped to the step's end;
--   last_arrivals = of which it arrived last, strictly after every other participant;
--   held_ns     = how long it held the others up: the union of [the next-latest arrival, its
--                 arrival] over its last arrivals, clipped to the step's end. stragglers'
--                 delay_caused_ns counts holds that overlap as the longest of them, so its
--                 per-step figure can be smaller (real Gloo DDP job, rank 1 doing 150 ms extra
--                 work a step: held_ns 88-181 ms a step, mean 144 ms; delay_caused_per_step 126 ms).
-- A straggler is the rank that never waits (wait_ns near 0) and holds the others up every step;
-- `tracekit plot steps` draws wait_ns per rank under the step times. A run of one rank, or
-- without collectives, has no rows.
--
-- @param include_warmup BOOLEAN true  Keep warm-up steps (marked by `warmup`).
-- @column run_id
-- @column rank          id     Distributed rank (as stragglers: processes.rank / manifest, else the participant ordinal).
-- @column step          count  Step number, as step_summary numbers it.
-- @column warmup        enum   true for a warm-up step (tracekit's `step N (warmup)`).
-- @column collectives   count  Instances whose arrival of this rank lies in the step.
-- @column wait_ns       ns     Union over them of [its arrival, the last arrival], clipped to the step's end.
-- @column last_arrivals count  Of which it arrived last, strictly after every other participant.
-- @column held_ns       ns     Union over its last arrivals of [the next-latest arrival, its arrival], clipped to the step's end.
-- @key wait_ns held_ns
-- @notice SELECT 'step_waits: run ' || run_id || ': each of its ' || count(*) || ' collective calls has one participant (one rank''s trace): waits across ranks need every rank''s trace in one run folder (tracekit convert TRACE... of the job)' FROM tk_comm_arrivals() GROUP BY run_id HAVING max(ranks) = 1 ORDER BY run_id
WITH arr AS (SELECT * FROM tk_judged_arrivals()),
st AS (
    SELECT s.run_id, s.pid, s.step_number AS step, s.is_warmup AS warmup,
           tk_clock_true(s.start_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS start_ns,
           tk_clock_true(s.end_ns, c.offset_ns, c.drift_ppm, c.t0_ns) AS end_ns
    FROM tk_steps() s LEFT JOIN tk_pid_clock() c ON c.run_id = s.run_id AND c.pid = s.pid
    WHERE getvariable('include_warmup') OR NOT s.is_warmup
),
placed AS (
    SELECT a.run_id, a.rank, s.step, s.end_ns AS step_end, a.arrival_ns, a.last_start_ns,
           a.next_latest_start_ns, a.arrival_from_last = 1 AND a.arrival_ns > a.next_latest_start_ns AS is_last
    FROM arr a JOIN st s ON s.run_id = a.run_id AND s.pid = a.pid
                       AND a.arrival_ns >= s.start_ns AND a.arrival_ns < s.end_ns
),
spans AS (  -- the intervals whose union is wait_ns (what = 'wait') and held_ns ('held')
    SELECT run_id, rank, step, 'wait' AS what, arrival_ns AS lo, least(last_start_ns, step_end) AS hi
    FROM placed WHERE last_start_ns > arrival_ns
    UNION ALL
    SELECT run_id, rank, step, 'held', next_latest_start_ns, least(arrival_ns, step_end)
    FROM placed WHERE is_last
),
ordered AS (
    SELECT *, max(hi) OVER (PARTITION BY run_id, rank, step, what ORDER BY lo, hi
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_hi
    FROM spans WHERE hi > lo
),
islands AS (
    SELECT *, sum(CASE WHEN prev_hi IS NULL OR lo > prev_hi THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, rank, step, what ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
    FROM ordered
),
unions AS (
    SELECT run_id, rank, step, what, sum(len) AS ns
    FROM (SELECT run_id, rank, step, what, island, max(hi) - min(lo) AS len
          FROM islands GROUP BY run_id, rank, step, what, island)
    GROUP BY run_id, rank, step, what
),
counts AS (
    SELECT run_id, rank, step, count(*) AS collectives, count(*) FILTER (WHERE is_last) AS last_arrivals
    FROM placed GROUP BY run_id, rank, step
),
rank_steps AS (  -- every step of every process that took part, so a step without arrivals is a 0
    SELECT DISTINCT s.run_id, p.rank, s.step, s.warmup
    FROM st s JOIN (SELECT DISTINCT run_id, pid, rank FROM arr) p ON p.run_id = s.run_id AND p.pid = s.pid
)
SELECT r.run_id, r.rank, r.step, r.warmup, coalesce(c.collectives, 0) AS collectives,
       CAST(coalesce(w.ns, 0) AS BIGINT) AS wait_ns, coalesce(c.last_arrivals, 0) AS last_arrivals,
       CAST(coalesce(h.ns, 0) AS BIGINT) AS held_ns
FROM rank_steps r
LEFT JOIN counts c ON c.run_id = r.run_id AND c.rank IS NOT DISTINCT FROM r.rank AND c.step = r.step
LEFT JOIN unions w ON w.run_id = r.run_id AND w.rank IS NOT DISTINCT FROM r.rank AND w.step = r.step AND w.what = 'wait'
LEFT JOIN unions h ON h.run_id = r.run_id AND h.rank IS NOT DISTINCT FROM r.rank AND h.step = r.step AND h.what = 'held'
ORDER BY r.run_id, r.step, r.rank;
