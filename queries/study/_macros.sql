-- Macros of the study's named queries (queries/study/; `tracekit study`, docs/study.md).

-- tk_is_tensor_core_name(name): the name-based tensor-core rule of the study's
-- tensor_core_time_share when no ncu pass exists: cuBLAS/cuDNN/CUTLASS spellings of HMMA/IMMA
-- tile kernels across Volta..Hopper (s884/h884/s1688/h1688/s16816 tiles, *_tensorop_*, tf32,
-- sm80_xmma_/sm90_xmma_ GEMM and convolution kernels, Hopper's nvjet_* cuBLAS kernels,
-- hmma/imma/wgmma in the name), minus CUDA-core spellings (ffma, simt, nvjet *_sss_ fp32, xmma
-- workspace set-up kernels). Matched anywhere in the name, case-insensitive. A name-based
-- estimate: a kernel that uses tensor cores under another name is missed. A null name is not one.
-- (tracekit.study.tables reads the two patterns from this macro for its report.)
CREATE OR REPLACE TEMP MACRO tk_is_tensor_core_name(kname) AS
    regexp_matches(coalesce(kname, ''), '(?i)(hmma|imma|wgmma|gmma|tensorop|tensor_op|tensorcore|mma_sync|[shid](884|1688|16816|8816|16832)|tf32|sm\d+_xmma_|nvjet_)')
    AND NOT regexp_matches(coalesce(kname, ''), '(?i)(ffma|simt|init_device_workspace|nvjet_\w*?_sss_)');
