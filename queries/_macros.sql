-- @private tk_step_ranges tk_detected_steps tk_launch_base_name tk_host_waits tk_gpu_window_edges tk_step_regex
-- Shared DuckDB table macros for named queries (loaded by tracekit.query.engine.Engine after the views).
--
-- Files whose name starts with "_" are not named queries: the engine creates each macro of this
-- file on a connection before the first statement that calls it (and the macros and views it
-- calls in turn; one CREATE statement per macro, in file order), so every named query can call
-- them. Every macro is linear in its input
-- (sorts, window functions, ASOF joins): nothing joins two event tables on an inequality, so
-- memory never grows with the product of two inputs. docs/metrics.md explains the definitions.
--
-- Identity: a GPU is (run_id, pid, device_id); a stream is (run_id, pid, device_id, stream_id).
-- A stream number alone never identifies anything.

-- tk_is_nccl(name): an NCCL kernel -- ncclKernel_* (NCCL < 2.19) or ncclDevKernel_* (NCCL >= 2.19),
-- also inside a longer demangled name ('void ncclDevKernel_...').
CREATE OR REPLACE TEMP MACRO tk_is_nccl(kname) AS
    regexp_matches(kname, '(^|[^A-Za-z0-9_])nccl(Dev)?Kernel_');

-- tk_stddev_samp(x): the sample standard deviation (n - 1) of an integer column x, an aggregate
-- (NULL below 2 values, as stddev_samp). Computed from exact integer sums, n * sum(x^2) - sum(x)^2
-- in HUGEINT, so the result does not depend on the order in which DuckDB's threads combine their
-- partial states (stddev_samp's running update in doubles does) and is exact but for the last
-- rounding. Overflow (a query error, never a wrong value) needs n * sum(x) past about 1.3e19,
-- e.g. 10^7 values of 22 minutes each in ns.
CREATE OR REPLACE TEMP MACRO tk_stddev_samp(x) AS
    CASE WHEN count(x) > 1 THEN
        sqrt(CAST(count(x) * sum(CAST(x AS HUGEINT) * x) - sum(CAST(x AS HUGEINT)) * sum(CAST(x AS HUGEINT))
                  AS DOUBLE) / (count(x) * (count(x) - 1)))
    END;

-- tk_ns_stats(x): the distribution of an integer column x of nanoseconds, the statistics block of
-- every nsys-stats-style summary written once: an aggregate returning a STRUCT whose fields
-- unnest() makes columns, avg_ns, med_ns (median, the mean of the two middle values for an even
-- count; DOUBLE), min_ns, max_ns and stddev_ns (sample, n - 1, tk_stddev_samp; 0 for a single
-- value, as nsys stats prints), e.g.
--   SELECT run_id, name, count(*) AS instances, unnest(tk_ns_stats(duration_ns)) FROM kernels GROUP BY ALL
CREATE OR REPLACE TEMP MACRO tk_ns_stats(x) AS
    {'avg_ns': avg(x), 'med_ns': median(x)::DOUBLE, 'min_ns': min(x), 'max_ns': max(x),
     'stddev_ns': coalesce(tk_stddev_samp(x), 0.0)};

-- Training steps (docs/metrics.md, "Steps"). One definition for every step-based query: tk_steps().
-- Each run takes its steps from the FIRST of these sources that gives it any step (all processes of
-- the run use the same source; step_source names it):
--   'tracekit': NVTX ranges of domain 'tracekit' (or the default domain '', which the workloads use
--               when they fall back to torch.cuda.nvtx) named `step N` or `step N (warmup)`
--               (tracekit.workloads.annotate.STEP_SQL_REGEX);
--   'profiler': PyTorch profiler steps, ranges named `ProfilerStep#N` in any domain except
--               'pytorch.gpu_user_annotation' (Kineto's GPU-side copy of a host annotation): Kineto
--               user annotations, and NVTX ranges of nsys exports of PyTorch (emit_nvtx /
--               record_function add `, op_id = N`, `, seq = N` or `, sizes = [...]` after the name,
--               which the match allows). N is the step number;
--   'pattern':  ranges whose name matches the user's regular expression (`--step-pattern REGEX` or
--               TRACEKIT_STEP_PATTERN; the engine sets the variable tk_step_pattern; RE2 syntax,
--               matched anywhere in the name unless anchored), same domains; the first capture
--               group is the step number when it is an integer, else steps are numbered 0, 1, ...
--               in start order per process;
--   'detected': iterations found in the kernel sequence (tk_detected_steps below).
-- Open or empty ranges are not steps. step_id is the range's range_id (detected steps: an ordinal
-- within the run).
-- tk_step_regex(): the name of a tracekit step range, `step N` or `step N (warmup)`: group 1 is N,
-- group 2 the warm-up mark (the same text as tracekit.workloads.annotate.STEP_SQL_REGEX).
CREATE OR REPLACE TEMP MACRO tk_step_regex() AS '^step (\d+)( \(warmup\))?$';

CREATE OR REPLACE TEMP MACRO tk_step_ranges() AS TABLE
WITH r AS (
    SELECT run_id, pid, range_id, name, start_ns, end_ns,
           CASE WHEN domain IN ('tracekit', '') AND regexp_matches(name, tk_step_regex()) THEN 1
                WHEN coalesce(domain, '') <> 'pytorch.gpu_user_annotation'
                     AND regexp_matches(name, '^ProfilerStep#(\d+)(, .*)?$') THEN 2
                WHEN getvariable('tk_step_pattern') IS NOT NULL
                     AND coalesce(domain, '') <> 'pytorch.gpu_user_annotation'
                     AND regexp_matches(name, getvariable('tk_step_pattern')) THEN 3
           END AS prio
    FROM nvtx_ranges
    WHERE end_ns IS NOT NULL AND end_ns > start_ns
),
best AS (
    SELECT run_id, min(prio) AS prio FROM r WHERE prio IS NOT NULL GROUP BY run_id
)
SELECT r.run_id, r.pid, r.range_id AS step_id, r.name AS step,
       CASE r.prio
           WHEN 1 THEN CAST(regexp_extract(r.name, tk_step_regex(), 1) AS BIGINT)
           WHEN 2 THEN CAST(regexp_extract(r.name, '^ProfilerStep#(\d+)', 1) AS BIGINT)
           ELSE coalesce(TRY_CAST(regexp_extract(r.name, getvariable('tk_step_pattern'), 1) AS BIGINT),
                         row_number() OVER (PARTITION BY r.run_id, r.pid ORDER BY r.start_ns, r.range_id) - 1)
       END AS step_number,
       r.prio = 1 AND regexp_extract(r.name, tk_step_regex(), 2) <> '' AS is_warmup,
       r.start_ns, r.end_ns,
       CASE r.prio WHEN 1 THEN 'tracekit' WHEN 2 THEN 'profiler' ELSE 'pattern' END AS step_source
FROM r JOIN best b ON b.run_id = r.run_id AND b.prio = r.prio;

-- tk_detected_steps(): training iterations of runs that have no step ranges, found from the kernels.
-- Per GPU (run_id, pid, device_id), the kernels that are not NCCL kernels, in start order, form a
-- sequence s[0..n). A kernel name is periodic with period P when it occurs at least 3 times and every
-- distance (in sequence positions) between its consecutive occurrences lies within P +- max(1, P/50)
-- (a few kernels of jitter from streams that interleave differently). The GPU's period is the P
-- shared by the most periodic names (ties: the larger P), among names whose occurrences cover at
-- least half the sequence (count x P >= n/2) -- in a training loop the kernels that run once per
-- iteration all repeat with the iteration's length. The iteration starts at the periodic name with
-- that P whose occurrences follow the longest GPU idle gap (median): the pause between steps
-- (data loading, host work, a synchronization) comes before an iteration's first kernel. Each
-- occurrence of that kernel starts a step, which ends where the next one starts; the last step
-- ends at the end of the last kernel within P positions, and counts only when at least P - max(1,
-- P/50) kernels follow its start (a cut-off iteration is not a step); kernels before the first
-- occurrence are not in a step. A GPU whose sequence has no period (fewer than three iterations
-- in the trace) is one step: its whole active span (all kernels, NCCL included). Detected steps
-- are GPU-side windows, start of the iteration's first kernel to the next one's start. A process
-- with several GPUs takes its steps from the one with the most kernels (ties: lowest device_id).
-- step_number counts from 0 per process; step is 'iteration N'.
CREATE OR REPLACE TEMP MACRO tk_detected_steps() AS TABLE
WITH ranged AS (SELECT DISTINCT run_id FROM tk_step_ranges()),
k AS MATERIALIZED (
    SELECT run_id, pid, device_id, name, start_ns, end_ns, correlation_id, tk_is_nccl(name) AS is_nccl
    FROM kernels
    WHERE end_ns > start_ns AND run_id NOT IN (SELECT run_id FROM ranged)
),
gpu AS (  -- the process's GPU with the most compute kernels
    SELECT run_id, pid, device_id, count(*) FILTER (WHERE NOT is_nccl) AS n,
           min(start_ns) AS span0, max(end_ns) AS span1
    FROM k GROUP BY run_id, pid, device_id
    QUALIFY row_number() OVER (PARTITION BY run_id, pid ORDER BY count(*) FILTER (WHERE NOT is_nccl) DESC,
                                                                  device_id NULLS LAST) = 1
),
seq AS MATERIALIZED (
    SELECT k.run_id, k.pid, k.device_id, k.name, k.start_ns, k.end_ns,
           row_number() OVER w - 1 AS idx,
           k.start_ns - max(k.end_ns) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS gap_ns
    FROM k JOIN gpu g ON g.run_id = k.run_id AND g.pid IS NOT DISTINCT FROM k.pid
                     AND g.device_id IS NOT DISTINCT FROM k.device_id
    WHERE NOT k.is_nccl
    WINDOW w AS (PARTITION BY k.run_id, k.pid, k.device_id ORDER BY k.start_ns, k.end_ns, k.correlation_id)
),
dist AS (
    SELECT run_id, pid, device_id, name, idx, gap_ns,
           idx - lag(idx) OVER (PARTITION BY run_id, pid, device_id, name ORDER BY idx) AS d
    FROM seq
),
names AS (
    SELECT run_id, pid, device_id, name, count(*) AS c, min(d) AS dmin, max(d) AS dmax,
           CAST(round(avg(d)) AS BIGINT) AS period, median(coalesce(gap_ns, 0)) AS med_gap,
           min(idx) AS first_idx
    FROM dist GROUP BY run_id, pid, device_id, name
),
periodic AS (
    SELECT p.* FROM names p JOIN gpu g ON g.run_id = p.run_id AND g.pid IS NOT DISTINCT FROM p.pid
                                     AND g.device_id IS NOT DISTINCT FROM p.device_id
    WHERE p.c >= 3 AND p.dmax - p.dmin <= greatest(1, p.dmax // 50) AND p.period * p.c * 2 >= g.n
),
best AS (
    SELECT run_id, pid, device_id, period FROM periodic GROUP BY run_id, pid, device_id, period
    QUALIFY row_number() OVER (PARTITION BY run_id, pid, device_id ORDER BY count(*) DESC, period DESC) = 1
),
anchor AS (
    SELECT p.run_id, p.pid, p.device_id, p.name, p.period FROM periodic p
    JOIN best b ON b.run_id = p.run_id AND b.pid IS NOT DISTINCT FROM p.pid
               AND b.device_id IS NOT DISTINCT FROM p.device_id AND b.period = p.period
    QUALIFY row_number() OVER (PARTITION BY p.run_id, p.pid, p.device_id ORDER BY p.med_gap DESC, p.first_idx) = 1
),
starts AS (
    SELECT s.run_id, s.pid, s.device_id, s.idx, s.start_ns, a.period,
           lead(s.start_ns) OVER (PARTITION BY s.run_id, s.pid, s.device_id ORDER BY s.idx) AS next_start
    FROM seq s JOIN anchor a ON a.run_id = s.run_id AND a.pid IS NOT DISTINCT FROM s.pid
                            AND a.device_id IS NOT DISTINCT FROM s.device_id AND a.name = s.name
),
-- the last step: end of the last kernel within P positions; complete when enough kernels follow
last_step AS (
    SELECT st.run_id, st.pid, st.device_id, st.idx, max(s.end_ns) AS end_ns, count(*) AS kernels
    FROM starts st JOIN seq s ON s.run_id = st.run_id AND s.pid IS NOT DISTINCT FROM st.pid
                             AND s.device_id IS NOT DISTINCT FROM st.device_id
                             AND s.idx >= st.idx AND s.idx < st.idx + st.period
    WHERE st.next_start IS NULL
    GROUP BY st.run_id, st.pid, st.device_id, st.idx, st.period
    HAVING count(*) >= st.period - greatest(1, st.period // 50)
),
iterations AS (
    SELECT st.run_id, st.pid, st.start_ns, coalesce(st.next_start, l.end_ns) AS end_ns
    FROM starts st LEFT JOIN last_step l
      ON l.run_id = st.run_id AND l.pid IS NOT DISTINCT FROM st.pid
     AND l.device_id IS NOT DISTINCT FROM st.device_id AND l.idx = st.idx
    WHERE st.next_start IS NOT NULL OR l.idx IS NOT NULL
    UNION ALL
    SELECT g.run_id, g.pid, g.span0, g.span1 FROM gpu g
    WHERE NOT EXISTS (SELECT 1 FROM anchor a WHERE a.run_id = g.run_id AND a.pid IS NOT DISTINCT FROM g.pid)
),
numbered AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, pid ORDER BY start_ns) - 1 AS step_number
    FROM iterations WHERE end_ns > start_ns
)
SELECT run_id, pid, row_number() OVER (PARTITION BY run_id ORDER BY pid, start_ns) AS step_id,
       'iteration ' || step_number AS step, step_number, false AS is_warmup, start_ns, end_ns,
       'detected' AS step_source
FROM numbered;

-- tk_steps(): the steps of every run (see above): run_id, pid, step_id, step (the range's name, or
-- 'iteration N'), step_number, is_warmup (tracekit's `step N (warmup)` only), start_ns, end_ns,
-- step_source ('tracekit', 'profiler', 'pattern' or 'detected').
CREATE OR REPLACE TEMP MACRO tk_steps() AS TABLE
SELECT * FROM tk_step_ranges()
UNION ALL BY NAME
SELECT * FROM tk_detected_steps();

-- tk_ranks(): distributed rank per (run_id, pid): processes.rank, else the pid -> rank map that
-- `tracekit collect` writes in the manifest (workload.ranks[].pid). Processes with neither are absent.
CREATE OR REPLACE TEMP MACRO tk_ranks() AS TABLE
WITH proc AS (
    SELECT run_id, pid, max(rank) AS rank FROM processes WHERE rank IS NOT NULL GROUP BY run_id, pid
),
man AS (
    SELECT run_id, max(r.rank) AS rank, r.pid AS pid
    FROM (SELECT run_id, unnest(from_json(json_extract(manifest, '$.workload.ranks'),
                                          '[{"rank": "INTEGER", "pid": "BIGINT"}]')) AS r FROM runs)
    WHERE r.pid IS NOT NULL GROUP BY run_id, r.pid
)
SELECT coalesce(p.run_id, m.run_id) AS run_id, coalesce(p.pid, m.pid) AS pid,
       CAST(coalesce(p.rank, m.rank) AS INTEGER) AS rank
FROM proc p FULL JOIN man m ON p.run_id = m.run_id AND p.pid = m.pid;

-- tk_gpu_activity(): every GPU activity with a positive duration: kernels, memcpy, memset.
CREATE OR REPLACE TEMP MACRO tk_gpu_activity() AS TABLE
SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, end_ns, 'kernel' AS activity,
       tk_is_nccl(name) AS is_nccl
FROM kernels WHERE end_ns > start_ns
UNION ALL
SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, end_ns, 'memcpy', false
FROM memcpy WHERE end_ns > start_ns
UNION ALL
SELECT run_id, pid, device_id, stream_id, correlation_id, start_ns, end_ns, 'memset', false
FROM memset WHERE end_ns > start_ns;

-- tk_busy_islands(busy_set): the union of GPU activity intervals per (run_id, pid, device_id), over
-- all streams, as disjoint "islands" [start_ns, end_ns). busy_set = 'kernel' (kernels only),
-- 'compute' (kernels that are not NCCL kernels), 'nccl' (NCCL kernels only), 'copy' (memcpy +
-- memset) or 'any' (all three). Sort-and-sweep: order by start; an interval opens a new
-- island when it starts after the running maximum of the ends before it. cum_before_ns is the
-- busy time of the device's earlier islands (for busy-time-before-t lookups by ASOF join).
-- first_correlation_id / first_activity: the activity that starts the island (earliest start,
-- then earliest end) -- the work whose arrival ended the idle gap before the island.
CREATE OR REPLACE TEMP MACRO tk_busy_islands(busy_set) AS TABLE
WITH iv AS (
    SELECT * FROM tk_gpu_activity()
    WHERE busy_set = 'any' OR (busy_set = 'kernel' AND activity = 'kernel')
       OR (busy_set = 'copy' AND activity <> 'kernel')
       OR (busy_set = 'compute' AND activity = 'kernel' AND NOT is_nccl)
       OR (busy_set = 'nccl' AND activity = 'kernel' AND is_nccl)
),
swept AS (
    SELECT *, max(end_ns) OVER (PARTITION BY run_id, pid, device_id ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_max_end
    FROM iv
),
-- an island starts at a row that starts after every earlier row ended; it ends at the running
-- maximum of ends just before the next island's first row (or at the last end of the GPU)
heads AS (
    SELECT run_id, pid, device_id, start_ns, end_ns, correlation_id, activity, prev_max_end
    FROM swept WHERE prev_max_end IS NULL OR start_ns > prev_max_end
),
last_end AS (
    SELECT run_id, pid, device_id, max(end_ns) AS max_end FROM iv GROUP BY run_id, pid, device_id
),
islands AS (
    SELECT h.run_id, h.pid, h.device_id, h.start_ns,
           coalesce(lead(h.prev_max_end) OVER (PARTITION BY h.run_id, h.pid, h.device_id
                                               ORDER BY h.start_ns, h.end_ns), l.max_end) AS end_ns,
           h.correlation_id AS first_correlation_id, h.activity AS first_activity
    FROM heads h JOIN last_end l
      ON l.run_id = h.run_id AND l.pid IS NOT DISTINCT FROM h.pid AND l.device_id IS NOT DISTINCT FROM h.device_id
)
SELECT *, coalesce(CAST(sum(end_ns - start_ns) OVER (PARTITION BY run_id, pid, device_id ORDER BY start_ns
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS BIGINT), 0) AS cum_before_ns
FROM islands;

-- tk_gpu_windows(): the time windows GPU metrics are reported over, per GPU (run_id, pid, device_id):
--   scope 'run':  from the device's first activity start to its last activity end;
--   scope 'step': each step (tk_steps) of the same process, on every GPU that process used;
--   step_source: the step's source (tk_steps), null for scope 'run'.
-- When a run's steps all lie in one process that used no GPU (a Kineto trace whose annotations
-- carry another pid than its GPU work), they apply to every GPU of the run.
CREATE OR REPLACE TEMP MACRO tk_gpu_windows() AS TABLE
WITH dev AS (
    SELECT run_id, pid, device_id, min(start_ns) AS w0, max(end_ns) AS w1
    FROM tk_gpu_activity() GROUP BY run_id, pid, device_id
),
steps AS MATERIALIZED (SELECT * FROM tk_steps()),
-- runs whose steps all lie in one process that has no GPU activity: a Kineto trace can give its
-- annotations one pid and its GPU work another (pid namespaces); its steps cover every GPU of the run
other_pid AS (
    SELECT s.run_id FROM steps s GROUP BY s.run_id
    HAVING count(DISTINCT s.pid) = 1
       AND NOT EXISTS (SELECT 1 FROM dev d WHERE d.run_id = s.run_id AND d.pid = any_value(s.pid))
)
SELECT run_id, 'run' AS scope, CAST(NULL AS BIGINT) AS step_id, CAST(NULL AS VARCHAR) AS step,
       CAST(NULL AS BIGINT) AS step_number, CAST(NULL AS VARCHAR) AS step_source, pid, device_id, w0, w1
FROM dev
UNION ALL
SELECT d.run_id, 'step', s.step_id, s.step, s.step_number, s.step_source, d.pid, d.device_id,
       s.start_ns, s.end_ns
FROM dev d JOIN steps s ON s.run_id = d.run_id
WHERE s.pid = d.pid OR d.run_id IN (SELECT run_id FROM other_pid);

-- tk_gpu_window_edges(): both edges of every tk_gpu_windows() window, a row each: the window's
-- columns, is_end (false at w0, true at w1) and t (that edge's time, ns), for the ASOF lookups of
-- cumulative sums that give a window's share as the value at w1 minus the value at w0.
CREATE OR REPLACE TEMP MACRO tk_gpu_window_edges() AS TABLE
WITH w AS MATERIALIZED (SELECT * FROM tk_gpu_windows())
SELECT w.*, false AS is_end, w0 AS t FROM w
UNION ALL
SELECT w.*, true, w1 FROM w;

-- tk_busy_between(busy_set): busy time of the busy_set union inside every tk_gpu_windows() window, as
-- B(w1) - B(w0) where B(t) = busy time before t = cum_before_ns + (min(t, end) - start) of the
-- last island starting at or before t (ASOF join). Exact, and linear in islands + windows.
CREATE OR REPLACE TEMP MACRO tk_busy_between(busy_set) AS TABLE
WITH isl AS MATERIALIZED (SELECT * FROM tk_busy_islands(busy_set)),
-- both edges of every window probe the islands in one ASOF join
probes AS (SELECT * FROM tk_gpu_window_edges()),
probed AS (
    SELECT p.*, coalesce(i.cum_before_ns + least(p.t, i.end_ns) - i.start_ns, 0) AS b
    FROM probes p ASOF LEFT JOIN isl i
      ON p.run_id = i.run_id AND p.pid IS NOT DISTINCT FROM i.pid
     AND p.device_id IS NOT DISTINCT FROM i.device_id AND p.t >= i.start_ns
)
SELECT run_id, scope, step_id, step, step_number, step_source, pid, device_id, w0, w1,
       CAST(sum(CASE WHEN is_end THEN b ELSE -b END) AS BIGINT) AS busy_ns
FROM probed GROUP BY run_id, scope, step_id, step, step_number, step_source, pid, device_id, w0, w1;

-- tk_launch_kind(api_name): the ONE definition of a launch call. 'graph' for a graph launch, 'kernel'
-- for a kernel launch, NULL for every other API call (including cudaLaunchHostFunc/cuLaunchHostFunc/
-- hipLaunchHostFunc, which run a host callback, not a kernel). CUPTI's version suffix (_v7000) and
-- the per-thread default-stream suffixes (_ptsz, _ptds, HIP's _spt) are ignored. The set:
--   CUDA runtime: cudaLaunch, cudaLaunchKernel, cudaLaunchKernelEx, cudaLaunchKernelExC,
--                 cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernelMultiDevice;
--   CUDA driver:  cuLaunch, cuLaunchGrid, cuLaunchGridAsync, cuLaunchKernel, cuLaunchKernelEx,
--                 cuLaunchCooperativeKernel, cuLaunchCooperativeKernelMultiDevice;
--   HIP (ROCm):   hipLaunchKernel, hipLaunchKernelExC, hipExtLaunchKernel, hipLaunchByPtr,
--                 hipModuleLaunchKernel, hipExtModuleLaunchKernel, hipHccModuleLaunchKernel,
--                 hipDrvLaunchKernelEx, hipLaunchCooperativeKernel(MultiDevice),
--                 hipModuleLaunchCooperativeKernel(MultiDevice), hipExtLaunchMultiKernelMultiDevice;
--   graphs:       cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch.
-- tk_launch_base_name(api_name): the name without those suffixes (used by tk_launch_kind).
CREATE OR REPLACE TEMP MACRO tk_launch_base_name(api_name) AS
    regexp_replace(regexp_replace(api_name, '_v\d+$', ''), '_(ptsz|ptds|spt)$', '');
CREATE OR REPLACE TEMP MACRO tk_launch_kind(api_name) AS
    CASE
        WHEN tk_launch_base_name(api_name) IN ('cudaGraphLaunch', 'cuGraphLaunch', 'hipGraphLaunch') THEN 'graph'
        WHEN tk_launch_base_name(api_name) IN ('cudaLaunch', 'cudaLaunchKernel', 'cudaLaunchKernelEx', 'cudaLaunchKernelExC',
                   'cudaLaunchCooperativeKernel', 'cudaLaunchCooperativeKernelMultiDevice',
                   'cuLaunch', 'cuLaunchGrid', 'cuLaunchGridAsync', 'cuLaunchKernel', 'cuLaunchKernelEx',
                   'cuLaunchCooperativeKernel', 'cuLaunchCooperativeKernelMultiDevice',
                   'hipLaunchKernel', 'hipLaunchKernelExC', 'hipExtLaunchKernel', 'hipLaunchByPtr',
                   'hipModuleLaunchKernel', 'hipExtModuleLaunchKernel', 'hipHccModuleLaunchKernel',
                   'hipDrvLaunchKernelEx', 'hipLaunchCooperativeKernel',
                   'hipLaunchCooperativeKernelMultiDevice', 'hipModuleLaunchCooperativeKernel',
                   'hipModuleLaunchCooperativeKernelMultiDevice', 'hipExtLaunchMultiKernelMultiDevice')
            THEN 'kernel'
    END;

-- tk_launch_calls(): CUDA API calls per (run_id, pid, correlation_id) -- the call that launched
-- a GPU activity carrying that correlation ID. name loses CUPTI's version suffix (_v7000).
CREATE OR REPLACE TEMP MACRO tk_launch_calls() AS TABLE
SELECT run_id, pid, correlation_id, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
       arg_min(regexp_replace(name, '_v\d+$', ''), start_ns) AS name,
       arg_min(tid, start_ns) AS tid, arg_min(api, start_ns) AS api
FROM cuda_api WHERE correlation_id IS NOT NULL
GROUP BY run_id, pid, correlation_id;

-- tk_host_waits(wait_kind): host-side calls of one kind as intervals per (run_id, pid), with the
-- running maximum of end over start order (cover_end_ns), so an ASOF join on start answers
-- "was a call of this kind in progress at time t?" as cover_end_ns >= t.
--   kind 'sync': CUDA synchronization the host blocks in -- cuda_sync rows except stream waits
--                (cudaStreamWaitEvent makes the GPU wait, not the host), and cuda_api calls named *Synchronize*
--                (cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventSynchronize, cuCtx/
--                cuStream/cuEventSynchronize) for exports without cuda_sync.
--   kind 'copy': CUDA API memcpy/memset calls (the host is inside a copy call) and copies
--                executing on any GPU of the process.
CREATE OR REPLACE TEMP MACRO tk_host_waits(wait_kind) AS TABLE
WITH iv AS (
    SELECT run_id, pid, start_ns, end_ns FROM cuda_sync
    WHERE wait_kind = 'sync' AND end_ns > start_ns AND coalesce(sync_type, '') NOT ILIKE '%wait%'
    UNION ALL
    SELECT run_id, pid, start_ns, end_ns FROM cuda_api
    WHERE wait_kind = 'sync' AND name ILIKE '%synchronize%' AND end_ns > start_ns
    UNION ALL
    SELECT run_id, pid, start_ns, end_ns FROM cuda_api
    WHERE wait_kind = 'copy' AND (name ILIKE '%memcpy%' OR name ILIKE '%memset%') AND end_ns > start_ns
    UNION ALL
    SELECT run_id, pid, start_ns, end_ns FROM memcpy
    WHERE wait_kind = 'copy' AND end_ns > start_ns
)
SELECT run_id, pid, start_ns,
       max(end_ns) OVER (PARTITION BY run_id, pid ORDER BY start_ns ROWS UNBOUNDED PRECEDING) AS cover_end_ns
FROM iv;

-- tk_gpu_gaps(): idle gaps of every GPU -- the complement of tk_busy_islands('any') -- from the
-- earliest window start to the latest window end of that GPU (tk_gpu_windows), classified by the
-- activity that ends the gap (the first activity of the next island) and its launch call:
--   'other': the launch call had returned by the time the GPU went idle (gap_start): the work
--            was queued but the GPU did not run it (stream/event waits, queueing); also the
--            trailing gap after the last activity, and gaps with no API row and no host wait;
--   'sync':  else (launch not yet returned, or no API row), the host was inside a synchronization
--            call (tk_host_waits('sync')) that began at or before gap_start and ended at or after
--            it: the host waited for the GPU to drain before issuing more work;
--   'copy':  else, the host was inside a memcpy/memset call, or a copy was running on another
--            GPU of the process, at gap_start;
--   'host':  else, when the launch call had not returned at gap_start (not issued yet, or still
--            inside the launch call): the GPU waited for the host to issue work.
-- A gap with no earlier activity (leading) has no 'sync'/'copy' test and is 'host' or 'other'.
-- cum_*_before_ns: idle time of each class in the GPU's earlier gaps (for window lookups).
CREATE OR REPLACE TEMP MACRO tk_gpu_gaps() AS TABLE
WITH isl AS MATERIALIZED (SELECT * FROM tk_busy_islands('any')),
bounds AS MATERIALIZED (
    SELECT run_id, pid, device_id, min(w0) AS lo, max(w1) AS hi
    FROM tk_gpu_windows() GROUP BY run_id, pid, device_id
),
gaps_inner AS (
    SELECT i.run_id, i.pid, i.device_id,
           coalesce(lag(i.end_ns) OVER (PARTITION BY i.run_id, i.pid, i.device_id ORDER BY i.start_ns),
                    least(b.lo, i.start_ns)) AS gap_start,
           i.start_ns AS gap_end, i.first_correlation_id AS next_correlation_id,
           i.first_activity AS next_activity,
           lag(i.end_ns) OVER (PARTITION BY i.run_id, i.pid, i.device_id ORDER BY i.start_ns) IS NULL AS leading
    FROM isl i JOIN bounds b ON b.run_id = i.run_id AND b.pid IS NOT DISTINCT FROM i.pid
                           AND b.device_id IS NOT DISTINCT FROM i.device_id
),
gaps_tail AS (
    SELECT i.run_id, i.pid, i.device_id, max(i.end_ns) AS gap_start, any_value(b.hi) AS gap_end,
           CAST(NULL AS BIGINT) AS next_correlation_id, CAST(NULL AS VARCHAR) AS next_activity,
           false AS leading
    FROM isl i JOIN bounds b ON b.run_id = i.run_id AND b.pid IS NOT DISTINCT FROM i.pid
                           AND b.device_id IS NOT DISTINCT FROM i.device_id
    GROUP BY i.run_id, i.pid, i.device_id
),
gaps AS (
    SELECT * FROM gaps_inner WHERE gap_end > gap_start
    UNION ALL
    SELECT * FROM gaps_tail WHERE gap_end > gap_start
),
with_sync AS (
    SELECT g.*, (NOT g.leading AND s.cover_end_ns >= g.gap_start) AS in_sync
    FROM gaps g ASOF LEFT JOIN tk_host_waits('sync') s
      ON g.run_id = s.run_id AND g.pid = s.pid AND g.gap_start >= s.start_ns
),
with_copy AS (
    SELECT g.*, (NOT g.leading AND c.cover_end_ns > g.gap_start) AS in_copy
    FROM with_sync g ASOF LEFT JOIN tk_host_waits('copy') c
      ON g.run_id = c.run_id AND g.pid = c.pid AND g.gap_start >= c.start_ns
),
classified AS (
    SELECT g.run_id, g.pid, g.device_id, g.gap_start, g.gap_end, g.gap_end - g.gap_start AS gap_ns,
           g.next_activity, g.next_correlation_id,
           l.name AS next_launch_name, l.start_ns AS next_launch_start_ns, l.end_ns AS next_launch_end_ns,
           CASE WHEN g.next_activity IS NULL OR l.end_ns <= g.gap_start THEN 'other'
                WHEN coalesce(g.in_sync, false) THEN 'sync'
                WHEN coalesce(g.in_copy, false) THEN 'copy'
                WHEN l.end_ns > g.gap_start THEN 'host'
                ELSE 'other' END AS cause
    FROM with_copy g
    LEFT JOIN tk_launch_calls() l
      ON l.run_id = g.run_id AND l.pid = g.pid AND l.correlation_id = g.next_correlation_id
)
SELECT *,
       coalesce(CAST(sum(gap_ns) OVER w AS BIGINT), 0) AS cum_idle_before_ns,
       coalesce(CAST(sum(CASE WHEN cause = 'host' THEN gap_ns ELSE 0 END) OVER w AS BIGINT), 0) AS cum_host_before_ns,
       coalesce(CAST(sum(CASE WHEN cause = 'sync' THEN gap_ns ELSE 0 END) OVER w AS BIGINT), 0) AS cum_sync_before_ns,
       coalesce(CAST(sum(CASE WHEN cause = 'copy' THEN gap_ns ELSE 0 END) OVER w AS BIGINT), 0) AS cum_copy_before_ns,
       coalesce(CAST(sum(CASE WHEN cause = 'other' THEN gap_ns ELSE 0 END) OVER w AS BIGINT), 0) AS cum_other_before_ns,
       count(*) OVER w AS gaps_before
FROM classified
WINDOW w AS (PARTITION BY run_id, pid, device_id ORDER BY gap_start ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING);

-- tk_idle_between(): idle time per class inside every tk_gpu_windows() window, by ASOF lookups
-- of the cumulative gap sums at w0 and w1 (a gap cut by a window edge counts for its part inside).
-- gaps counts the gaps that overlap the window.
CREATE OR REPLACE TEMP MACRO tk_idle_between() AS TABLE
WITH g AS MATERIALIZED (SELECT * FROM tk_gpu_gaps()),
probes AS (SELECT * FROM tk_gpu_window_edges()),
probed AS (
    SELECT p.*,
           coalesce(g.cum_idle_before_ns + least(p.t, g.gap_end) - g.gap_start, 0) AS i,
           coalesce(g.cum_host_before_ns + CASE WHEN g.cause = 'host' THEN least(p.t, g.gap_end) - g.gap_start ELSE 0 END, 0) AS h,
           coalesce(g.cum_sync_before_ns + CASE WHEN g.cause = 'sync' THEN least(p.t, g.gap_end) - g.gap_start ELSE 0 END, 0) AS s,
           coalesce(g.cum_copy_before_ns + CASE WHEN g.cause = 'copy' THEN least(p.t, g.gap_end) - g.gap_start ELSE 0 END, 0) AS c,
           coalesce(g.cum_other_before_ns + CASE WHEN g.cause = 'other' THEN least(p.t, g.gap_end) - g.gap_start ELSE 0 END, 0) AS o,
           -- at the window start: gaps wholly before it; at the end: gaps starting before it
           coalesce(g.gaps_before + CASE WHEN p.is_end AND g.gap_start < p.t THEN 1
                                         WHEN NOT p.is_end AND g.gap_end <= p.t THEN 1 ELSE 0 END, 0) AS n
    FROM probes p ASOF LEFT JOIN g
      ON p.run_id = g.run_id AND p.pid IS NOT DISTINCT FROM g.pid
     AND p.device_id IS NOT DISTINCT FROM g.device_id AND p.t >= g.gap_start
)
SELECT run_id, scope, step_id, step, step_number, step_source, pid, device_id, w0, w1,
       CAST(sum(CASE WHEN is_end THEN i ELSE -i END) AS BIGINT) AS idle_ns,
       CAST(sum(CASE WHEN is_end THEN h ELSE -h END) AS BIGINT) AS idle_host_ns,
       CAST(sum(CASE WHEN is_end THEN s ELSE -s END) AS BIGINT) AS idle_sync_ns,
       CAST(sum(CASE WHEN is_end THEN c ELSE -c END) AS BIGINT) AS idle_copy_ns,
       CAST(sum(CASE WHEN is_end THEN o ELSE -o END) AS BIGINT) AS idle_other_ns,
       CAST(sum(CASE WHEN is_end THEN n ELSE -n END) AS BIGINT) AS gaps
FROM probed GROUP BY run_id, scope, step_id, step, step_number, step_source, pid, device_id, w0, w1;

-- tk_duration_summary(tbl): the nsys-stats-style duration statistics per run and name of a table
-- with run_id, name and duration_ns (kernels, cuda_api, osrt_api). One row per (run_id, name):
-- n, total_ns, avg_ns, med_ns (median: mean of the two middle values for an even count), min_ns,
-- max_ns, stddev_ns (sample, n - 1; 0 for a single row, as nsys stats prints), time_pct (share
-- of the run's summed duration, 0-100) and rank_in_run (1 = most total time; ties by name).
CREATE OR REPLACE TEMP MACRO tk_duration_summary(tbl) AS TABLE
WITH per_name AS (
    SELECT run_id, name, count(*) AS n, sum(duration_ns) AS total_ns, unnest(tk_ns_stats(duration_ns))
    FROM query_table(tbl)
    GROUP BY run_id, name
)
SELECT run_id, name, n, total_ns::BIGINT AS total_ns, avg_ns, med_ns, min_ns, max_ns, stddev_ns,
       100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS time_pct,
       row_number() OVER (PARTITION BY run_id ORDER BY total_ns DESC, name) AS rank_in_run
FROM per_name;

-- tk_phase_ranges(): the NVTX ranges that mark a step's phases (step_summary's phase columns,
-- study_step_phases): tracekit's `data`, `forward`, `backward`, `optimizer` and `comm ...` ranges
-- (domain tracekit or none) and PyTorch's `enumerate(DataLoader)#...` (phase data),
-- `Optimizer.step#...` and `Optimizer.zero_grad#...` (phase optimizer) user annotations, closed
-- and longer than 0 ns: run_id, pid, start_ns, end_ns, phase (data, forward, backward,
-- optimizer, comm).
CREATE OR REPLACE TEMP MACRO tk_phase_ranges() AS TABLE
SELECT run_id, pid, start_ns, end_ns,
       CASE WHEN domain = 'pytorch.user_annotation' AND starts_with(name, 'enumerate(DataLoader)#') THEN 'data'
            WHEN domain = 'pytorch.user_annotation' THEN 'optimizer'
            WHEN name LIKE 'comm%' THEN 'comm' ELSE name END AS phase
FROM nvtx_ranges
WHERE end_ns IS NOT NULL AND end_ns > start_ns
  AND ((domain IN ('tracekit', '') AND (name IN ('data', 'forward', 'backward', 'optimizer') OR name LIKE 'comm%'))
       OR (domain = 'pytorch.user_annotation'
           AND (starts_with(name, 'enumerate(DataLoader)#') OR starts_with(name, 'Optimizer.step#')
                OR starts_with(name, 'Optimizer.zero_grad#'))));
