-- gpu_idle_gaps: Every idle gap of every GPU with its cause (the gaps gpu_idle sums), for the gap-length histogram of `tracekit plot idle`.
-- @include core
--
-- One row per gap of tk_gpu_gaps (queries/_macros.sql): a stretch with no kernel, memcpy or
-- memset on any stream of the GPU (run_id, pid, device_id), between its earliest window start
-- and latest window end (the GPU's first and last activity, extended to the steps of its
-- process), classified host / sync / copy / other as gpu_idle documents. Over scope 'run' the
-- gaps inside [first activity, last activity] sum to gpu_idle's idle_ns per cause.
--
-- @column run_id
-- @column pid               id     Process that used the GPU.
-- @column rank              id     Distributed rank of the process (tk_ranks); null when unknown.
-- @column device_id         id     CUDA device ordinal in that process.
-- @column start_ns          ns     Gap start (end of the previous busy stretch).
-- @column end_ns            ns     Gap end (start of the next activity).
-- @column gap_ns            ns     end_ns - start_ns.
-- @column cause             enum   host, sync, copy or other (see gpu_idle).
-- @column next_activity     enum   kernel, memcpy or memset that ended the gap; null for the gap after the last activity.
-- @column next_launch_name  text   The API call that launched that activity, when recorded.
-- @key gap_ns cause
SELECT g.run_id, g.pid, r.rank, g.device_id, g.gap_start AS start_ns, g.gap_end AS end_ns, g.gap_ns, g.cause,
       g.next_activity, g.next_launch_name
FROM tk_gpu_gaps() g LEFT JOIN tk_ranks() r ON r.run_id = g.run_id AND r.pid = g.pid
ORDER BY g.run_id, r.rank NULLS LAST, g.pid, g.device_id, g.gap_start;
