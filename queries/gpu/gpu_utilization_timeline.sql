-- gpu_utilization_timeline: Busy fraction of each GPU over time, in equal time bins (for `tracekit plot utilization`).
-- @include core
--
-- A GPU is (run_id, pid, device_id), as in gpu_utilization. The run's span, from its first GPU
-- activity start to its last activity end over all GPUs, is cut into bins of bin_ns, or, when
-- bin_ns is 0, of the smallest 1-2-5 step (1, 2, 5, 10, 20, ... ns) that gives at most `bins`
-- bins. Busy time in a bin is the length of the union of the GPU's activity intervals inside it
-- (tk_busy_islands, exact: B(bin end) - B(bin start) by ASOF lookups of the cumulative busy
-- time), so the bins of a GPU sum to gpu_utilization's kernel_busy_ns / busy_ns over the span.
--
-- @param bins BIGINT 200  Most bins when bin_ns is 0.
-- @param bin_ns BIGINT 0  Bin width in ns (0 = chosen from the run's length).
-- @column run_id
-- @column pid             id     Process that used the GPU.
-- @column rank            id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device_id       id     CUDA device ordinal in that process.
-- @column bin             count  Bin number, 0 = the run's first GPU activity.
-- @column bin_start_ns    ns     Bin start on the trace clock.
-- @column bin_ns          ns     Bin width.
-- @column wall_ns         ns     Part of the bin inside the run's span (the last bin can be shorter).
-- @column kernel_busy_ns  ns     Time at least one kernel ran on the GPU in the bin.
-- @column busy_ns         ns     Time any kernel, memcpy or memset ran in the bin.
-- @column utilization     value  kernel_busy_ns / wall_ns, a fraction 0-1.
-- @column busy_fraction   value  busy_ns / wall_ns, a fraction 0-1.
-- @key utilization
WITH act AS MATERIALIZED (SELECT run_id, pid, device_id, start_ns, end_ns FROM tk_gpu_activity()),
span AS (
    SELECT run_id, min(start_ns) AS t0, max(end_ns) AS t1,
           greatest(CAST(ceil((max(end_ns) - min(start_ns)) / greatest(coalesce(getvariable('bins'), 200), 1)) AS BIGINT), 1) AS raw
    FROM act GROUP BY run_id
),
width AS (
    SELECT run_id, t0, t1, w, CAST(ceil((t1 - t0) / w) AS BIGINT) AS nbins
    FROM (SELECT run_id, t0, t1,
                 CASE WHEN coalesce(getvariable('bin_ns'), 0) > 0 THEN getvariable('bin_ns')
                      ELSE (SELECT min(c) FROM (SELECT unnest([e, 2 * e, 5 * e, 10 * e]) AS c) WHERE c >= raw) END AS w
          FROM (SELECT *, CAST(pow(10, floor(log10(raw))) AS BIGINT) AS e FROM span))
),
gpus AS (SELECT DISTINCT run_id, pid, device_id FROM act),
edges AS (
    SELECT g.run_id, g.pid, g.device_id, w.t0, w.t1, w.w, i, least(w.t0 + i * w.w, w.t1) AS t
    FROM gpus g JOIN width w ON w.run_id = g.run_id, LATERAL (SELECT unnest(range(0, w.nbins + 1)) AS i)
),
k AS MATERIALIZED (SELECT * FROM tk_busy_islands('kernel')),
a AS MATERIALIZED (SELECT * FROM tk_busy_islands('any')),
pk AS (
    SELECT e.*, coalesce(k.cum_before_ns + least(e.t, k.end_ns) - k.start_ns, 0) AS bk
    FROM edges e ASOF LEFT JOIN k
      ON e.run_id = k.run_id AND e.pid IS NOT DISTINCT FROM k.pid AND e.device_id IS NOT DISTINCT FROM k.device_id
     AND e.t >= k.start_ns
),
pa AS (
    SELECT e.*, coalesce(a.cum_before_ns + least(e.t, a.end_ns) - a.start_ns, 0) AS ba
    FROM pk e ASOF LEFT JOIN a
      ON e.run_id = a.run_id AND e.pid IS NOT DISTINCT FROM a.pid AND e.device_id IS NOT DISTINCT FROM a.device_id
     AND e.t >= a.start_ns
),
bins AS (
    SELECT run_id, pid, device_id, i AS bin, t AS bin_start_ns, w AS bin_ns,
           lead(t) OVER g - t AS wall_ns, lead(bk) OVER g - bk AS kernel_busy_ns, lead(ba) OVER g - ba AS busy_ns
    FROM pa WINDOW g AS (PARTITION BY run_id, pid, device_id ORDER BY i)
)
SELECT b.run_id, b.pid, r.rank, b.device_id, b.bin, b.bin_start_ns, b.bin_ns, b.wall_ns,
       CAST(b.kernel_busy_ns AS BIGINT) AS kernel_busy_ns, CAST(b.busy_ns AS BIGINT) AS busy_ns,
       b.kernel_busy_ns / nullif(b.wall_ns, 0) AS utilization, b.busy_ns / nullif(b.wall_ns, 0) AS busy_fraction
FROM bins b LEFT JOIN tk_ranks() r ON r.run_id = b.run_id AND r.pid = b.pid
WHERE b.wall_ns IS NOT NULL AND b.wall_ns > 0
ORDER BY b.run_id, r.rank NULLS LAST, b.pid, b.device_id, b.bin;
