-- clock_offsets: One row per run and rank: the clock correction that puts the rank's timestamps on rank 0's clock, and the bound that holds the truth.
--
-- Reads the run's clock_model table, written by `tracekit convert` of a multi-rank job
-- (tracekit/convert/clocks.py, docs/multirank.md). The rank's clock reads
--   local = true + offset_ns + drift_ppm * 1e-6 * (true - t0_ns)
-- where true is rank 0's clock and t0_ns rank 0's first NCCL kernel start; every cross-rank query
-- (collective_skew, stragglers, the job timeline) subtracts it. Ranks on one host share one clock
-- (the same values by construction). Estimated from the NCCL collectives: each instance's kernels
-- end within a small window on all ranks (a line fitted per clock to the end differences), and no
-- collective ends on any rank before the last rank has started it (the interval the offset must
-- lie in). bound_ns: the half-width around offset_ns that holds the true offset; widen-or-act
-- advice in docs/multirank.md. A run of one input (one clock) has no rows.
--
-- @key offset_ns bound_ns
-- @column run_id
-- @column rank from clock_model
-- @column host from clock_model
-- @column offset_ns    ns     The rank's clock minus rank 0's clock at t0_ns.
-- @column drift_ppm    ppm    Rate of the rank's clock relative to rank 0's, minus 1.
-- @column bound_ns     ns     Half-width of the interval around offset_ns that holds the truth (0: rank 0's clock, or --clock-model none; null: not estimated).
-- @column method       enum   reference, collective_ends, offset_only, causality, none (--clock-model none), unestimated.
-- @column constraints  count  Collective instances the estimate used.
-- @notice SELECT 'clock_offsets: run ' || r.run_id || ': one clock (not a multi-rank job, or converted before clock models): no correction applied' FROM runs r WHERE NOT EXISTS (SELECT 1 FROM clock_model m WHERE m.run_id = r.run_id) ORDER BY r.run_id
-- @notice SELECT 'clock_offsets: run ' || run_id || ': ' || count(*) || ' rank(s) whose clock shares no collective with rank 0''s: not corrected, cross-rank results for them have no bound' FROM result WHERE method = 'unestimated' GROUP BY run_id ORDER BY run_id
SELECT run_id, rank, host, offset_ns, drift_ppm, bound_ns, method, constraints
FROM clock_model
ORDER BY run_id, rank;
