-- nvtx_summary: Time per NVTX range name, domain and style, as `nsys stats --report nvtxsum`.
-- @include nvtx core
--
-- One row per run, domain, range name and style ('push/pop' or 'start/end'). Every range of
-- nvtx_ranges counts, whatever its process, thread or category, including framework annotations
-- mapped to ranges (their domain says where they come from). nvtxsum prints one name per row,
-- 'DOMAIN:NAME' for ranges of a named domain and 'NAME' for the default domain; here domain and
-- name are separate columns. A range's time is end_ns - start_ns (zero and negative durations
-- included, as nsys stats does). A range never closed in the capture (is_open) ends, as in nsys
-- stats, at the last NVTX timestamp of its run: the latest range start or end or mark (nsys also
-- counts NVTX registration events, which are not in the run folder). time_pct is the row's share
-- of the summed range time of its run; nested ranges add up, so it is not a share of wall time.
-- Sorted by total time, descending.
--
-- PyTorch operator ranges (nsys exports of PyTorch with emit_nvtx / record_function) carry
-- per-call suffixes after the operator name: `, seq = N` (autograd sequence number), `, op_id = N`,
-- `, sizes = [...]` and `, input_op_ids = [...]` (with record_shapes), so every call has its own
-- text (`aten::empty_strided, op_id = 999730`). By default the name is cut at the first of those
-- suffixes and the ranges are grouped by operator (raw_names counts the distinct texts merged into
-- the row); with raw=true every text is its own row, as nsys stats prints.
--
-- @param top BIGINT 0 [>=0]  Keep only the N rows with the most total time in each run (0 = all).
-- @param raw BOOLEAN false  Group by the range's full text, PyTorch's `, op_id = N` / `, seq = N` / `, sizes = [...]` suffixes included (as nsys stats does).
-- @column run_id
-- @column domain from nvtx_ranges
-- @column name       text   Range name (message), without PyTorch's per-call suffixes unless raw=true.
-- @column style from nvtx_ranges
-- @column instances  count  Number of ranges.
-- @column total_ns   ns     Sum of range durations.
-- @column avg_ns     ns     Mean range duration.
-- @column med_ns     ns     Median range duration (mean of the two middle values for an even count).
-- @column min_ns     ns     Shortest range.
-- @column max_ns     ns     Longest range.
-- @column stddev_ns  ns     Sample standard deviation (n - 1); 0 for a single range, as nsys stats prints.
-- @column time_pct   %      total_ns as a percentage of all NVTX range time in the run.
-- @column raw_names  count  Distinct range texts grouped into the row (1 with raw=true).
-- @key total_ns time_pct
-- @few_rows unless raw=true
WITH last_ts AS (SELECT * FROM tk_nvtx_last_ns()),  -- queries/nvtx/_macros.sql
ranges AS (
    SELECT r.run_id, coalesce(r.domain, '') AS domain, r.name AS raw_name,
           CASE WHEN getvariable('raw') THEN r.name
                ELSE regexp_replace(r.name, '(, (seq|op_id) = \d+|, (sizes|input_op_ids) = \[).*$', '', 's')
           END AS name, r.style,
           coalesce(r.end_ns, l.last_ns) - r.start_ns AS duration_ns
    FROM nvtx_ranges AS r
    JOIN last_ts AS l USING (run_id)
),
per_name AS (
    SELECT
        run_id,
        domain,
        name,
        style,
        count(*) AS instances,
        sum(duration_ns) AS total_ns,
        unnest(tk_ns_stats(duration_ns)),
        count(DISTINCT raw_name) AS raw_names
    FROM ranges
    GROUP BY run_id, domain, name, style
),
ranked AS (
    SELECT
        *,
        100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS time_pct,
        row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, domain, name, style) AS rank_in_run
    FROM per_name
)
SELECT run_id, domain, name, style, instances, total_ns::BIGINT AS total_ns, avg_ns, med_ns,
       min_ns, max_ns, stddev_ns, time_pct, raw_names
FROM ranked
WHERE getvariable('top') = 0 OR rank_in_run <= getvariable('top')
ORDER BY run_id, total_ns DESC, domain, name, style;
