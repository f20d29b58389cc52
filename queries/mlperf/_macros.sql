-- Macros of the MLPerf queries (queries/mlperf/; docs/mlperf.md).

-- tk_mlperf_score(): one row per round, submitter, system and benchmark of mlperf_runs (a result
-- file given twice, in two run folders, counts once) with MLPerf's score: the olympic mean of
-- the runs' times to train in minutes. The k fastest and the k slowest runs are dropped (k = 4
-- for unet3d, else 1: the rule of every round from 0.5 on, as mlperf_logging's result summarizer
-- applies it), a run that failed (no run_start/run_stop, or run_stop's status not 'success')
-- counting among the slowest dropped; more than k failed runs: no score (NULL). The mean is
-- multiplied by the benchmark folder's scaling.json factor when there is one (4.0 onward).
CREATE OR REPLACE TEMP MACRO tk_mlperf_score() AS TABLE
WITH runs AS (
    SELECT round, submitter, system, benchmark, accelerators, accelerator_model, scaling_factor,
           time_to_train_s / 60.0 AS minutes,
           time_to_train_s IS NOT NULL AND status = 'success' AS ok,
           CASE WHEN benchmark = 'unet3d' THEN 4 ELSE 1 END AS k
    FROM mlperf_runs
    QUALIFY row_number() OVER (PARTITION BY file ORDER BY run_id) = 1
),
ranked AS (
    SELECT *, count(*) OVER g AS runs, count(*) FILTER (WHERE NOT ok) OVER g AS failed,
           count(*) FILTER (WHERE ok) OVER g AS good,
           CASE WHEN ok THEN row_number() OVER (PARTITION BY round, submitter, system, benchmark, ok
                                                ORDER BY minutes) END AS pos
    FROM runs
    WINDOW g AS (PARTITION BY round, submitter, system, benchmark)
)
SELECT round, submitter, system, benchmark, max(accelerators) AS accelerators,
       max(accelerator_model) AS accelerator_model, max(runs) AS runs,
       CASE WHEN max(failed) <= max(k) THEN
           avg(minutes) FILTER (WHERE pos > k AND pos <= good - (k - failed))
           * coalesce(max(scaling_factor), 1.0) END AS score_min
FROM ranked
GROUP BY round, submitter, system, benchmark;
