-- mlperf_scaling: MLPerf speedup and scaling efficiency of every system against the submitter's smallest system with the same accelerator, per round and benchmark.
--
-- From mlperf_score's scores: per round, submitter, benchmark and accelerator model, the system
-- with the fewest accelerators is the baseline (a tie: the faster score, then the name). For
-- every system (the baseline included, at 1): speedup = baseline score / score and
-- scaling_efficiency = speedup / (accelerators / baseline accelerators): 1 is perfect strong
-- scaling, 0.5 half of it. Time to train is what is compared, not throughput: a larger system
-- often trains with a larger global batch and needs more epochs (mlperf_runs.epoch_num), which
-- is part of its loss of efficiency. Systems without a score or an accelerator count are left out.
--
-- @column round               text   MLPerf round.
-- @column submitter           text   Submitting organization.
-- @column benchmark           text   Benchmark folder.
-- @column accelerator_model   text   Accelerator of the systems compared (system description).
-- @column system              text   System folder.
-- @column accelerators        count  Accelerators of the system.
-- @column score_min           min    The system's score (mlperf_score).
-- @column baseline_system     text   The smallest system of the same submitter, round, benchmark and accelerator.
-- @column speedup             value  Baseline score / score (x).
-- @column scaling_efficiency  value  speedup / (accelerators / baseline accelerators), 0..1 typically.
-- @key speedup scaling_efficiency
-- @requires mlperf_runs
WITH s AS (
    SELECT * FROM tk_mlperf_score() WHERE score_min > 0 AND accelerators > 0
),
base AS (
    SELECT round, submitter, benchmark, accelerator_model,
           arg_min(system, (accelerators, score_min, system)) AS baseline_system,
           arg_min(accelerators, (accelerators, score_min, system)) AS base_accelerators,
           arg_min(score_min, (accelerators, score_min, system)) AS base_score
    FROM s GROUP BY ALL
)
SELECT s.round, s.submitter, s.benchmark, s.accelerator_model, s.system, s.accelerators,
       s.score_min, b.baseline_system, b.base_score / s.score_min AS speedup,
       (b.base_score / s.score_min) / (s.accelerators / b.base_accelerators) AS scaling_efficiency
FROM s JOIN base b
  ON s.round IS NOT DISTINCT FROM b.round AND s.submitter IS NOT DISTINCT FROM b.submitter
 AND s.benchmark IS NOT DISTINCT FROM b.benchmark
 AND s.accelerator_model IS NOT DISTINCT FROM b.accelerator_model
ORDER BY s.round, s.submitter, s.benchmark, s.accelerator_model, s.accelerators, s.system;
