-- launch_latency: Per kernel: launch call start to kernel start, launch call duration and queue delay; graph, driver and Ex/ExC launches included.
-- @include core
--
-- Each kernel is matched to the CUDA API call with the same (run_id, pid, correlation_id): the
-- runtime or driver launch (cudaLaunchKernel, cudaLaunchKernelEx/ExC, cudaLaunchCooperativeKernel,
-- cuLaunchKernel, cuLaunchKernelEx, HIP's hipLaunchKernel, hipExtModuleLaunchKernel, ...: the set
-- is tk_launch_kind in _macros.sql) or, for a kernel run as a node of a CUDA graph, the
-- cudaGraphLaunch/cuGraphLaunch/hipGraphLaunch call that launched the graph (CUPTI gives the graph's kernels that
-- call's correlation ID). CUPTI's version suffix (_v7000) is dropped from API names.
--   launch_latency_ns = kernel start - launch call start
--   api_duration_ns   = launch call end - launch call start
--   queue_delay_ns    = kernel start - launch call end (negative when the kernel started before
--                       the call returned, which is normal; nsys kernexecsum reports queue time
--                       only where this is >= 0 -- see has_queue)
--   total_ns          = max(call end, kernel end) - call start, as nsys kernexecsum.
-- Kernels with no matching API row are kept: has_api is false and the call columns are null.
-- A kernel that starts before its launch call started is impossible in real time: such rows keep
-- their negative launch_latency_ns (never clamped) and are flagged clock_skew.
--
-- @column run_id
-- @column pid from kernels
-- @column rank               id     Distributed rank of the process (processes.rank, else the manifest's workload.ranks); null when unknown.
-- @column device_id from kernels
-- @column stream_id from kernels
-- @column correlation_id from kernels
-- @column name from kernels
-- @column kernel_start_ns    ns     Kernel start.
-- @column kernel_duration_ns ns     Kernel duration.
-- @column has_api            flag   A CUDA API row with the kernel's correlation ID exists.
-- @column api_name           text   Launch call name without version suffix (null without API row).
-- @column launch_kind        enum   tk_launch_kind of the call: 'graph' (cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch), 'kernel' (a CUDA or HIP kernel launch call), 'other' (another call), null without API row.
-- @column tid                id     Host thread of the launch call.
-- @column api_start_ns       ns     Launch call start.
-- @column api_duration_ns    ns     Launch call duration.
-- @column launch_latency_ns  ns     Kernel start - launch call start (signed).
-- @column queue_delay_ns     ns     Kernel start - launch call end (signed).
-- @column has_queue          flag   queue_delay_ns >= 0 (the launches nsys kernexecsum counts in QCount).
-- @column total_ns           ns     max(call end, kernel end) - call start.
-- @column clock_skew         flag   launch_latency_ns < 0: the kernel started before its launch call (clock skew).
-- @key launch_latency_ns
-- @requires kernels cuda_api
-- @empty no kernel launch call (cuda_api) linked to a kernel by its correlation ID
SELECT k.run_id, k.pid, rk.rank, k.device_id, k.stream_id, k.correlation_id, k.name,
       k.start_ns AS kernel_start_ns, k.end_ns - k.start_ns AS kernel_duration_ns,
       l.correlation_id IS NOT NULL AS has_api,
       l.name AS api_name,
       CASE WHEN l.name IS NULL THEN NULL ELSE coalesce(tk_launch_kind(l.name), 'other') END AS launch_kind,
       l.tid, l.start_ns AS api_start_ns, l.end_ns - l.start_ns AS api_duration_ns,
       k.start_ns - l.start_ns AS launch_latency_ns,
       k.start_ns - l.end_ns AS queue_delay_ns,
       k.start_ns >= l.end_ns AS has_queue,
       greatest(l.end_ns, k.end_ns) - l.start_ns AS total_ns,
       k.start_ns < l.start_ns AS clock_skew
FROM kernels k
LEFT JOIN tk_launch_calls() l
  ON l.run_id = k.run_id AND l.pid = k.pid AND l.correlation_id = k.correlation_id
LEFT JOIN tk_ranks() rk ON rk.run_id = k.run_id AND rk.pid = k.pid
ORDER BY k.run_id, k.pid, k.start_ns, k.device_id, k.stream_id;
