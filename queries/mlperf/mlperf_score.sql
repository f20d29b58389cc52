-- mlperf_score: MLPerf training score per round, submitter, system and benchmark: the olympic mean of the runs' times to train, in minutes.
-- @include mlperf
--
-- One row per round, submitter, system (the SYSTEM folder, = the system description's file
-- name) and benchmark of mlperf_runs. score_min is the round's rule as mlperf_logging's result
-- summarizer applies it: each run's time to train is run_stop - run_start; of the runs, the
-- fastest and the slowest are dropped (the 4 fastest and 4 slowest for unet3d) and the rest
-- averaged; a failed run (no run_stop, or its status not 'success') is one of the dropped slowest;
-- more failed runs than that leave no score (NULL). Multiplied by scaling.json's factor where the
-- benchmark folder has one (4.0 onward). A result file in several run folders counts once.
--
-- @column round from mlperf_runs
-- @column submitter from mlperf_runs
-- @column system from mlperf_runs
-- @column benchmark from mlperf_runs
-- @column accelerators from mlperf_runs
-- @column runs          count  Result files of the system and benchmark.
-- @column score_min     min    The score: olympic mean of the times to train, minutes.
-- @key score_min
-- @requires mlperf_runs
SELECT round, submitter, system, benchmark, accelerators, runs, score_min
FROM tk_mlperf_score()
ORDER BY round, submitter, benchmark, accelerators, system;
