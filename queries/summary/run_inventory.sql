-- run_inventory: What each run holds: GPUs, processes, ranks, the main process, steps and their source, GEMM time by number format.
-- @include core roofline
--
-- One row per run; the facts `tracekit study` infers a run's world size and precision from when
-- its manifest does not say (docs/study.md, "Inferring what a run is").
--   gpus          distinct (pid, device_id) with a kernel, memcpy or memset of positive duration
--                 (the GPUs the traced processes used; the devices table lists every GPU of the
--                 machine, used or not);
--   ranks         distinct processes.rank values, else the ranks the manifest lists
--                 (workload.ranks[].rank from `tracekit collect`, or the Kineto traces' ranks);
--   main_process  the name of the process that ran the most kernels, else of the one with the
--                 most NVTX ranges / PyTorch annotations (ties: lowest pid); null when unnamed;
--                 a process named after a launcher (nsys-launcher, mpirun, srun, torchrun, ...)
--                 takes the name of its main thread (tid = pid): the program it ran;
--   steps, step_source: tk_steps (tracekit, profiler, pattern or detected), as step_summary;
--   gemm_*_ns     time of GEMM and convolution kernels -- names containing gemm, conv, fprop, dgrad,
--                 wgrad, xmma, cutlass, nvjet, cudnn, mma or matmul (case ignored) -- by the number
--                 format the name states, from the table of name tags
--                 queries/data/kernel_name_tags.csv (tk_kernel_tags(): cuBLASLt nvjet_tst_ = bf16,
--                 nvjet_hsh_ = fp16, nvjet_sss_ = fp32, HMMA tiles h884/s884/h16816/s16816 = fp16
--                 inputs, tf32, bf16, ...; each row names its source): bf16, fp16, and fp32 (fp32
--                 and tf32); fp8, int8, fp64 and names stating no format are in none of them.
--
-- @column run_id
-- @column gpus            count  GPUs (pid, device_id) with GPU activity.
-- @column gpu_processes   count  Processes with GPU activity.
-- @column ranks           count  Distinct ranks (processes.rank, else the manifest's ranks); 0 when none is known.
-- @column main_process    text   Name of the process with the most kernels (else the most ranges).
-- @column kernels         count  Kernel executions.
-- @column steps           count  Steps (tk_steps).
-- @column step_source     enum   'tracekit', 'profiler', 'pattern' or 'detected'; null without steps.
-- @column gemm_bf16_ns    ns     Time of GEMM/convolution kernels whose name says bf16.
-- @column gemm_fp16_ns    ns     Time of GEMM/convolution kernels whose name says fp16 / half.
-- @column gemm_fp32_ns    ns     Time of GEMM/convolution kernels whose name says fp32 / tf32.
-- @key kernels gpus
-- @few_rows
WITH act AS (
    SELECT run_id, count(DISTINCT (pid, device_id)) AS gpus, count(DISTINCT pid) AS gpu_processes
    FROM tk_gpu_activity() GROUP BY run_id
),
proc_ranks AS (
    SELECT run_id, count(DISTINCT rank) AS ranks FROM processes WHERE rank IS NOT NULL GROUP BY run_id
),
manifest_ranks AS (
    SELECT run_id, greatest(
               coalesce(json_array_length(json_extract(manifest, '$.workload.ranks')), 0),
               coalesce(json_array_length(json_extract(manifest, '$.sources.kineto.ranks')), 0)) AS ranks
    FROM runs
),
per_pid AS (
    SELECT run_id, pid, sum(k) AS k, sum(r) AS r FROM (
        SELECT run_id, pid, count(*) AS k, 0 AS r FROM kernels GROUP BY run_id, pid
        UNION ALL
        SELECT run_id, pid, 0, count(*) FROM nvtx_ranges GROUP BY run_id, pid
    ) GROUP BY run_id, pid
),
-- a process named after a launcher (nsys-launcher execs the MPI rank's program under
-- `mpirun nsys profile ./app`; the name nsys recorded is the launcher's) is named after its main
-- thread (tid = pid), which carries the program's name after the exec
launcher_named AS (
    SELECT pr.run_id, pr.pid,
           CASE WHEN lower(pr.name) IN ('nsys-launcher', 'nsys', 'mpirun', 'mpiexec', 'orted', 'prted',
                                        'hydra_pmi_proxy', 'srun', 'slurmstepd', 'torchrun', 'launcher')
                THEN coalesce(nullif(t.name, ''), pr.name) ELSE pr.name END AS name
    FROM (SELECT run_id, pid, any_value(name) AS name FROM processes WHERE coalesce(name, '') <> ''
          GROUP BY run_id, pid) pr
    LEFT JOIN (SELECT run_id, pid, any_value(name) AS name FROM threads WHERE tid = pid
               AND lower(coalesce(name, '')) NOT IN ('nsys-launcher', 'nsys', '') GROUP BY run_id, pid) t
      ON t.run_id = pr.run_id AND t.pid = pr.pid
),
main AS (
    SELECT p.run_id, arg_max(n.name, (p.k, p.r, -p.pid)) AS main_process
    FROM per_pid p
    JOIN launcher_named n ON n.run_id = p.run_id AND n.pid = p.pid
    GROUP BY p.run_id
),
typed AS (
    SELECT k.run_id, k.end_ns - k.start_ns AS d,
           CASE WHEN NOT regexp_matches(k.name, '(?i)(gemm|conv|fprop|dgrad|wgrad|xmma|cutlass|nvjet|cudnn|mma|matmul)') THEN NULL
                WHEN t.precision = 'tf32' THEN 'fp32'
                ELSE t.precision
           END AS fmt
    FROM kernels k LEFT JOIN tk_kernel_tags() t ON t.run_id = k.run_id AND t.name = k.name
    WHERE k.end_ns > k.start_ns
),
gemm AS (
    SELECT run_id, count(*) AS kernels,
           CAST(coalesce(sum(d) FILTER (WHERE fmt = 'bf16'), 0) AS BIGINT) AS gemm_bf16_ns,
           CAST(coalesce(sum(d) FILTER (WHERE fmt = 'fp16'), 0) AS BIGINT) AS gemm_fp16_ns,
           CAST(coalesce(sum(d) FILTER (WHERE fmt = 'fp32'), 0) AS BIGINT) AS gemm_fp32_ns
    FROM typed GROUP BY run_id
),
st AS (
    SELECT run_id, count(*) AS steps, any_value(step_source) AS step_source FROM tk_steps() GROUP BY run_id
)
SELECT r.run_id, coalesce(a.gpus, 0) AS gpus, coalesce(a.gpu_processes, 0) AS gpu_processes,
       CAST(coalesce(pr.ranks, nullif(mr.ranks, 0), 0) AS BIGINT) AS ranks, m.main_process,
       coalesce(g.kernels, 0) AS kernels, coalesce(st.steps, 0) AS steps, st.step_source,
       coalesce(g.gemm_bf16_ns, 0) AS gemm_bf16_ns, coalesce(g.gemm_fp16_ns, 0) AS gemm_fp16_ns,
       coalesce(g.gemm_fp32_ns, 0) AS gemm_fp32_ns
FROM runs r
LEFT JOIN act a ON a.run_id = r.run_id
LEFT JOIN proc_ranks pr ON pr.run_id = r.run_id
LEFT JOIN manifest_ranks mr ON mr.run_id = r.run_id
LEFT JOIN main m ON m.run_id = r.run_id
LEFT JOIN gemm g ON g.run_id = r.run_id
LEFT JOIN st ON st.run_id = r.run_id
ORDER BY r.run_id
