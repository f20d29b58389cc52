-- study_ncu_passes: Per run, the ncu files its launches come from (several: separate passes whose counters the study pools with roofline merge_passes).
--
-- @key files
-- @column run_id
-- @column files   count  Distinct ncu_launches.source_file values of the run.
-- @requires ncu_launches
SELECT run_id, count(DISTINCT source_file) AS files
FROM ncu_launches GROUP BY run_id ORDER BY run_id;
