-- stragglers: One row per rank: how often it arrived last at a collective, the delay it caused, its typical lateness, and whether that is beyond the clock uncertainty and jitter (straggler).
-- @include core ranks
--
-- Built on the collective instances of `collective_skew` (tk_judged_arrivals in queries/ranks/_macros.sql:
-- NCCL kernels on GPUs, Gloo ranges on CPUs, matched across ranks by process group, type and
-- order). Only instances with two or more participants count: collectives, and the point-to-point
-- pairs (Send/Recv, SendRecv) of a communicator of exactly two ranks, whose peer is provable
-- (the other rank; NCCL matches a pair's sends and receives in issue order), so a 2-rank job of
-- point-to-point calls only is still judged. Point-to-point pairs of larger communicators
-- (pipeline stages) are shown by collective_skew, never averaged in here.
--   collectives       = instances the rank took part in;
--   last_arrivals     = instances where it arrived last, strictly after every other participant
--                       (when two ranks tie for last, neither alone held the collective up);
--   delay_caused_ns   = how long collectives were held up by this rank alone: over its last
--                       arrivals, the hold [the next-latest arrival, its arrival]; holds that
--                       overlap (collectives of one rank outstanding together, as DDP's gradient
--                       buckets on Gloo's worker threads, all waiting for the same late rank)
--                       are one wait and count once, as the longest of them; the sum over
--                       these waits;
--   delay_caused_per_step_ns = delay_caused_ns / the rank's steps (tk_steps, warm-up included:
--                       its collectives are recorded in every step); null without steps;
--   mean_wait_ns      = mean over its instances of last_start_ns - its arrival: how long it
--                       waited for the last arrival (0 where it was last);
--   step_ns_vs_median = its mean step time (tk_steps, warm-up steps excluded) / the median over the
--                       run's ranks of their mean step time; null without steps.
--   lateness_ns       = median over its instances of its arrival - the instance's median
--                       arrival: how late it typically arrives (negative: early);
--   jitter_ns         = the run's arrival jitter: the 90th percentile, over every arrival, of
--                       |its lateness in that instance - its rank's lateness_ns|: how much
--                       arrivals vary around each rank's typical lateness. A rank that is late
--                       by the same amount every time adds nothing to it, so with 2 ranks (where
--                       the median arrival lies halfway between them) a constant straggler is
--                       still told from noise;
--   bound_ns          = how much of lateness_ns the clocks can explain: 0 when the run has one
--                       clock (one input, or all ranks on one host: a notice says so), else the
--                       rank's clock bound + the largest clock bound of the run (clock_offsets);
--                       null when a clock was not estimated;
--   straggler         = true when the rank arrived last at half or more of its collectives AND
--                       its lateness exceeds 3 x jitter_ns / sqrt(collectives) + bound_ns: late
--                       beyond what the clock uncertainty explains and by more than ordinary
--                       jitter would move a median over that many arrivals (jitter_ns / sqrt(n)
--                       is about 1.3 standard errors of it: a real straggler on a loaded host,
--                       whose single arrivals vary by as much as its lateness, is still named
--                       once it is late consistently). Otherwise a notice says "no straggler
--                       beyond the clock uncertainty".
-- Arrivals are tk_comm_arrivals' (an NCCL kernel's start; for a Gloo range, the rank's
-- c10d::<op>_ call that issued it).
-- All times are on rank 0's clock (the run's clock model, see collective_skew).
-- Rows are ordered by straggler, then delay caused: a straggler is the first row.
--
-- @column run_id
-- @column rank              id     Distributed rank (processes.rank / manifest; else the participant ordinal, see collective_skew).
-- @column straggler         enum   true when last at >= half its collectives and lateness_ns > 3 x jitter_ns / sqrt(collectives) + bound_ns; else false.
-- @column collectives       count  Instances with two or more participants (collectives; point-to-point pairs of a 2-rank communicator) that the rank took part in.
-- @column last_arrivals     count  Of which it arrived last.
-- @column delay_caused_ns   ns     Sum over its last arrivals of its arrival - the next-latest arrival, overlapping holds counted once (the longest).
-- @column delay_caused_per_step_ns ns  delay_caused_ns / the rank's steps (warm-up included); null without steps.
-- @column mean_wait_ns      ns     Mean over its collectives of the last arrival - its arrival.
-- @column step_ns_vs_median value  Mean step time of the rank / median over ranks of the mean step time.
-- @key delay_caused_per_step_ns last_arrivals
-- @column lateness_ns       ns     Median over its collectives of its arrival - the instance's median arrival.
-- @column jitter_ns         ns     The run's arrival jitter: 90th percentile of |lateness in an instance - the rank's lateness_ns| over every arrival.
-- @column bound_ns          ns     Clock uncertainty of lateness_ns (0: one clock; null: a clock not estimated).
-- @notice SELECT 'stragglers: run ' || run_id || ': each of its ' || count(*) || ' collective calls has one participant (one rank''s trace): stragglers need every rank''s trace in one run folder (tracekit convert TRACE... of the job)' FROM tk_comm_arrivals() GROUP BY run_id HAVING max(ranks) = 1 ORDER BY run_id
-- @notice SELECT 'stragglers: run ' || run_id || ': its ' || count(*) || ' ranks are on one host (' || any_value(host) || '): one clock, so bound_ns is 0' FROM clock_model GROUP BY run_id HAVING count(*) > 1 AND count(DISTINCT clock_id) = 1 AND bool_and(host IS NOT NULL) ORDER BY run_id
-- @notice SELECT 'stragglers: run ' || run_id || ': no straggler beyond the clock uncertainty (clock bound up to ' || coalesce(printf('%.1f', max(bound_ns) / 1e3) || ' µs', 'unknown: a clock was not estimated') || ', arrival jitter ' || printf('%.1f', max(jitter_ns) / 1e3) || ' µs)' FROM result GROUP BY run_id HAVING NOT bool_or(coalesce(straggler, false)) ORDER BY run_id
-- @notice SELECT 'stragglers: run ' || run_id || ': its inputs may not be one job (merged with --merge-unrelated: ' || json_extract_string(manifest, '$.job.identity_conflicts[0]') || '); cross-rank results may be meaningless' FROM runs WHERE json_array_length(json_extract(manifest, '$.job.identity_conflicts')) > 0 ORDER BY run_id
WITH a0 AS (SELECT * FROM tk_judged_arrivals()),
a1 AS (
    -- relative to the first arrival: a median of epoch ns as a double would round to 256 ns
    SELECT *, (arrival_ns - first_start_ns)
              - median(arrival_ns - first_start_ns) OVER (PARTITION BY run_id, process_group, collective, seq)
              AS lateness
    FROM a0
),
a AS (
    SELECT *, median(lateness) OVER (PARTITION BY run_id, rank) AS rank_lateness FROM a1
),
jit AS (
    SELECT run_id, quantile_cont(abs(lateness - rank_lateness), 0.9) AS jitter_ns,
           count(DISTINCT coalesce(clock_id, '')) AS clocks,
           max(clock_bound_ns) AS max_bound, bool_or(clock_bound_ns IS NULL) AS unknown_bound
    FROM a GROUP BY run_id
),
holds AS (  -- [next-latest arrival, own arrival] of each last arrival, merged where they overlap
    SELECT run_id, rank, next_latest_start_ns AS lo, arrival_ns AS hi,
           max(arrival_ns) OVER (PARTITION BY run_id, rank ORDER BY next_latest_start_ns, arrival_ns
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_hi
    FROM a WHERE arrival_from_last = 1 AND arrival_ns > next_latest_start_ns
),
islands AS (
    SELECT *, sum(CASE WHEN prev_hi IS NULL OR lo > prev_hi THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, rank ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
    FROM holds
),
delay AS (
    SELECT run_id, rank, sum(hold) AS delay_ns
    FROM (SELECT run_id, rank, island, max(hi - lo) AS hold FROM islands GROUP BY run_id, rank, island)
    GROUP BY run_id, rank
),
per_rank AS (
    SELECT run_id, rank, count(*) AS collectives,
           count(*) FILTER (WHERE arrival_from_last = 1 AND arrival_ns > next_latest_start_ns) AS last_arrivals,
           avg(last_start_ns - arrival_ns) AS mean_wait_ns,
           any_value(rank_lateness) AS lateness_ns,
           max(clock_bound_ns) AS own_bound, bool_or(clock_bound_ns IS NULL) AS own_unknown,
           list(DISTINCT pid) AS pids
    FROM a GROUP BY run_id, rank
),
steps AS (
    SELECT s.run_id, s.pid, avg(s.end_ns - s.start_ns) FILTER (WHERE NOT s.is_warmup) AS mean_step_ns,
           count(*) AS steps
    FROM tk_steps() s GROUP BY s.run_id, s.pid
),
rank_steps AS (
    SELECT p.run_id, p.rank, avg(s.mean_step_ns) AS mean_step_ns, max(s.steps) AS steps
    FROM (SELECT run_id, rank, unnest(pids) AS pid FROM per_rank) p
    JOIN steps s ON s.run_id = p.run_id AND s.pid = p.pid
    GROUP BY p.run_id, p.rank
),
med AS (
    SELECT run_id, median(mean_step_ns) AS median_step_ns FROM rank_steps GROUP BY run_id
),
v AS (
    SELECT p.*, j.jitter_ns, CAST(coalesce(d.delay_ns, 0) AS BIGINT) AS delay_caused_ns,
           CASE WHEN j.clocks <= 1 THEN 0 WHEN p.own_unknown OR j.unknown_bound THEN NULL
                ELSE p.own_bound + j.max_bound END AS bound_ns
    FROM per_rank p JOIN jit j ON j.run_id = p.run_id
    LEFT JOIN delay d ON d.run_id = p.run_id AND d.rank IS NOT DISTINCT FROM p.rank
)
SELECT p.run_id, p.rank,
       coalesce(2 * p.last_arrivals >= p.collectives
                AND p.lateness_ns > 3 * p.jitter_ns / sqrt(p.collectives) + p.bound_ns, false) AS straggler,
       p.collectives, p.last_arrivals, p.delay_caused_ns,
       CAST(round(p.delay_caused_ns / nullif(rs.steps, 0)) AS BIGINT) AS delay_caused_per_step_ns,
       p.mean_wait_ns,
       rs.mean_step_ns / nullif(m.median_step_ns, 0) AS step_ns_vs_median,
       CAST(round(p.lateness_ns) AS BIGINT) AS lateness_ns, CAST(round(p.jitter_ns) AS BIGINT) AS jitter_ns,
       CAST(p.bound_ns AS BIGINT) AS bound_ns
FROM v p
LEFT JOIN rank_steps rs ON rs.run_id = p.run_id AND rs.rank IS NOT DISTINCT FROM p.rank
LEFT JOIN med m ON m.run_id = p.run_id
ORDER BY p.run_id, straggler DESC, p.delay_caused_ns DESC, p.last_arrivals DESC, p.rank;
