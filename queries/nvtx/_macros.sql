-- NVTX macros shared by the named queries (loaded like queries/_macros.sql, created on a
-- connection before the first statement that calls them).

-- tk_nvtx_last_ns(): per run, the last NVTX timestamp: the latest start or end of any range and
-- the latest mark (run_id, last_ns). A range still open at the end of the capture (end_ns null)
-- is taken to end here (nvtx_summary, nvtx_gpu_projection), as nsys stats does.
CREATE OR REPLACE TEMP MACRO tk_nvtx_last_ns() AS TABLE
SELECT run_id, max(ts) AS last_ns
FROM (
    SELECT run_id, greatest(max(start_ns), max(end_ns)) AS ts FROM nvtx_ranges GROUP BY run_id
    UNION ALL
    SELECT run_id, max(timestamp_ns) AS ts FROM nvtx_marks GROUP BY run_id
)
GROUP BY run_id;
