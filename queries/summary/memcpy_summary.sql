-- memcpy_summary: GPU memory copies (and memsets) per copy kind, as `nsys stats --report gpumemtimesum` and `gpumemsizesum`.
-- @include core
--
-- One row per run and copy kind (HtoD, DtoH, DtoD, HtoH, PtoP, ...; Unknown when CUPTI did not
-- say; unified-memory copies keep the export's label, e.g. 'Unified Host-to-Device'). Device memsets are one more row, kind 'memset', operation '[CUDA memset]', exactly as
-- nsys stats lists them next to the copies (turn off with include_memset=false). Every row of
-- memcpy/memset counts, whatever its device or stream; durations are end_ns - start_ns, zero and
-- negative ones included, as nsys stats does. time_pct is the row's share of the summed time of
-- all rows of its run (copies plus memsets when included), as gpumemtimesum's "Time (%)".
-- throughput_bytes_per_s = total_bytes / total_ns, in bytes per second: the average rate while
-- operations of this kind ran (NULL when total_ns is 0). Sorted by total time, descending.
--
-- @param include_memset BOOLEAN true  Include device memsets as the row kind='memset'.
-- @column run_id
-- @column kind                   enum     Copy kind: HtoD, DtoH, DtoD, HtoH, PtoP, HtoA, AtoH, AtoA, AtoD, DtoA, Unknown, or memset.
-- @column operation              text     The row's label in nsys stats: '[CUDA memcpy HtoD]', ..., '[CUDA Unified Memory memcpy HtoD]', '[CUDA memset]'.
-- @column count                  count    Number of operations.
-- @column total_bytes            bytes    Sum of bytes copied (set).
-- @column total_ns               ns       Sum of operation durations.
-- @column avg_ns                 ns       Mean duration.
-- @column med_ns                 ns       Median duration (mean of the two middle values for an even count).
-- @column min_ns                 ns       Shortest operation.
-- @column max_ns                 ns       Longest operation.
-- @column stddev_ns              ns       Sample standard deviation of durations (n - 1); 0 for a single operation.
-- @column time_pct               %        total_ns as a percentage of all copy (and memset) time in the run.
-- @column avg_bytes              bytes    Mean size.
-- @column med_bytes              bytes    Median size (mean of the two middle values for an even count).
-- @column min_bytes              bytes    Smallest operation.
-- @column max_bytes              bytes    Largest operation.
-- @column stddev_bytes           bytes    Sample standard deviation of sizes (n - 1); 0 for a single operation.
-- @column throughput_bytes_per_s bytes/s  total_bytes / total_ns * 1e9.
-- @key total_ns total_bytes
-- @few_rows
WITH ops AS (
    SELECT run_id, coalesce(kind, 'Unknown') AS kind, duration_ns, bytes FROM memcpy
    UNION ALL
    SELECT run_id, 'memset' AS kind, duration_ns, bytes FROM memset
    WHERE getvariable('include_memset')
),
per_kind AS (
    SELECT
        run_id,
        kind,
        count(*) AS count,
        sum(bytes) AS total_bytes,
        sum(duration_ns) AS total_ns,
        unnest(tk_ns_stats(duration_ns)),
        avg(bytes) AS avg_bytes,
        median(bytes) AS med_bytes,
        min(bytes) AS min_bytes,
        max(bytes) AS max_bytes,
        tk_stddev_samp(bytes) AS stddev_bytes
    FROM ops
    GROUP BY run_id, kind
)
SELECT
    run_id,
    kind,
    CASE
        WHEN kind = 'memset' THEN '[CUDA memset]'
        WHEN kind = 'Unified Host-to-Device' THEN '[CUDA Unified Memory memcpy HtoD]'
        WHEN kind = 'Unified Device-to-Host' THEN '[CUDA Unified Memory memcpy DtoH]'
        WHEN kind = 'Unified Device-to-Device' THEN '[CUDA Unified Memory memcpy DtoD]'
        ELSE '[CUDA memcpy ' || kind || ']'
    END AS operation,
    count,
    total_bytes::BIGINT AS total_bytes,
    total_ns::BIGINT AS total_ns,
    avg_ns,
    med_ns,
    min_ns,
    max_ns,
    stddev_ns,
    100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS time_pct,
    avg_bytes,
    med_bytes::DOUBLE AS med_bytes,
    min_bytes,
    max_bytes,
    coalesce(stddev_bytes, 0.0) AS stddev_bytes,
    CASE WHEN total_ns > 0 THEN total_bytes * 1e9 / total_ns END AS throughput_bytes_per_s
FROM per_kind
ORDER BY run_id, total_ns DESC, kind;
