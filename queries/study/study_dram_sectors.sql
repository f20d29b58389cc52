-- study_dram_sectors: Per run, the DRAM sectors (32 bytes each) ncu counted, for the study's dram_transactions_per_s.
--
-- sectors sums the values of the dram__sectors.sum, dram__sectors_read.sum and
-- dram__sectors_write.sum counters over every profiled launch (null values skipped); runs whose
-- ncu pass recorded none of them have no row (the study then uses DRAM bytes / 32).
--
-- @key sectors
-- @column run_id
-- @column sectors   value  Summed DRAM sector counters (32-byte sectors).
-- @column launches  count  Profiled launches that recorded one of them.
-- @requires ncu_metrics
SELECT run_id, sum(value) AS sectors, count(DISTINCT launch_id) AS launches
FROM ncu_metrics
WHERE metric_name IN ('dram__sectors.sum', 'dram__sectors_read.sum', 'dram__sectors_write.sum')
  AND value IS NOT NULL
GROUP BY run_id ORDER BY run_id;
