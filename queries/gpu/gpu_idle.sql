-- gpu_idle: Idle time of each GPU (gaps in the union of all its activity), classified by cause, over the run and per step.
-- @include core
--
-- A GPU is (run_id, pid, device_id), as in gpu_utilization, with the same windows (scope 'run':
-- first to last activity of the GPU; scope 'step': each step of the process, tk_steps). Idle time is the
-- window minus the union of kernels, memcpy and memset over ALL streams of the GPU: one stream
-- waiting while another computes is not idle, and a copy is not idle. idle_ns = wall_ns - busy_ns
-- of gpu_utilization, exactly; idle_ns = idle_host_ns + idle_sync_ns + idle_copy_ns + idle_other_ns.
--
-- Each gap is classified by the activity that ends it (earliest start of the next busy island)
-- and its launch call (cuda_api row with the same pid and correlation ID; for a kernel of a CUDA
-- graph, the cudaGraphLaunch call), at the moment the GPU went idle (gap start):
--   other: the launch call had already returned: the work was queued but the GPU did not start it
--          (waits on events or other streams); also the gap after the last activity of a step.
--   sync:  the launch had not returned (or there is no API row) and the host was blocked in a CUDA
--          synchronization (cuda_sync rows other than stream waits; *Synchronize* API calls) that
--          began before the gap: the host waited for the GPU to drain, then had to issue work.
--   copy:  else the host was inside a cudaMemcpy*/cudaMemset* call, or a copy ran on another GPU of
--          the process: waiting on a copy.
--   host:  else the launch call had not been issued or had not returned: waiting on the host.
-- A gap cut by the window edge counts for its part inside the window.
--
-- @column run_id
-- @column scope           enum   'run' or 'step'.
-- @column step_id         id     nvtx_ranges.range_id of the step; null for scope 'run'.
-- @column step            text   Step range message; null for scope 'run'.
-- @column step_number     count  Step number (N of `step N` or `ProfilerStep#N`); null for scope 'run'.
-- @column step_source     enum   Where the step comes from: 'tracekit', 'profiler', 'pattern' or 'detected' (tk_steps); null for scope 'run'.
-- @column pid             id     Process that used the GPU.
-- @column rank            id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id       id     CUDA device ordinal in that process.
-- @column window_start_ns ns     Start of the window.
-- @column wall_ns         ns     Window length.
-- @column gaps            count  Idle gaps overlapping the window.
-- @column idle_ns         ns     Time nothing ran on the GPU.
-- @column idle_host_ns    ns     Idle waiting on the host to issue the next launch.
-- @column idle_sync_ns    ns     Idle while the host sat in a synchronization it asked for.
-- @column idle_copy_ns    ns     Idle while the host was in a copy call or a copy ran on another GPU.
-- @column idle_other_ns   ns     Idle with the next work already launched, or unexplained.
-- @column idle_fraction   value  idle_ns / wall_ns, a fraction 0-1.
-- @column host_fraction   value  idle_host_ns / wall_ns: share of the window the GPU waited on the host.
-- @key idle_ns idle_fraction
-- @requires kernels
SELECT i.run_id, scope, step_id, step, step_number, step_source, i.pid, rk.rank, device_id,
       w0 AS window_start_ns, w1 - w0 AS wall_ns, gaps, idle_ns,
       idle_host_ns, idle_sync_ns, idle_copy_ns, idle_other_ns,
       idle_ns / nullif(w1 - w0, 0) AS idle_fraction,
       idle_host_ns / nullif(w1 - w0, 0) AS host_fraction
FROM tk_idle_between() i
LEFT JOIN tk_ranks() rk ON rk.run_id = i.run_id AND rk.pid = i.pid
ORDER BY i.run_id, i.pid, device_id, scope, w0, step_id;
