-- study_data_ranges: The input-pipeline ranges of every process: tracekit's `data` ranges and PyTorch's `enumerate(DataLoader)#...` (the scaling-loss attribution's data part).
--
-- The same ranges step_summary counts as data_ns. The attribution sets the host time between
-- calls that start inside them to 0 in the replay (docs/study.md, "Why scaling loses").
--
-- @key start_ns
-- @column run_id
-- @column pid       id    OS process ID of the range's process.
-- @column tid       id    Thread the range was recorded on.
-- @column start_ns  ns    Range start on the trace's clock.
-- @column end_ns    ns    Range end on the trace's clock.
-- @column name      text  Range name.
-- @requires nvtx_ranges
SELECT run_id, pid, tid, start_ns, end_ns, name
FROM nvtx_ranges
WHERE end_ns IS NOT NULL AND end_ns > start_ns
  AND ((domain IN ('tracekit', '') AND name = 'data')
       OR (domain = 'pytorch.user_annotation' AND starts_with(name, 'enumerate(DataLoader)#')))
ORDER BY run_id, pid, start_ns;
