-- @private tk_dtype tk_dtype_bytes tk_numel tk_int_list tk_attn_pairs tk_op_model
-- Operator cost model (docs/metrics.md, "FLOP and bytes from operator shapes"): FLOP and bytes of a
-- PyTorch operator call from the argument shapes, types and scalar values the profiler recorded
-- (nvtx_ranges.input_dims / input_types / concrete_inputs). Loaded by the engine with
-- queries/_macros.sql, on demand; used by op_flops and mfu (queries/ops/).

-- tk_dtype(t): canonical element type of an argument type as PyTorch writes it ('float',
-- 'c10::Half', 'c10::BFloat16', 'double', 'c10::Float8_e4m3fn', 'long int', ...); NULL for a
-- non-tensor argument ('', 'Scalar', 'ScalarList', 'TensorList', ...) or an unknown name.
CREATE OR REPLACE TEMP MACRO tk_dtype(t) AS
    CASE lower(regexp_replace(coalesce(t, ''), '^(c10|at|torch)::', ''))
        WHEN 'float' THEN 'fp32' WHEN 'float32' THEN 'fp32'
        WHEN 'half' THEN 'fp16' WHEN 'float16' THEN 'fp16'
        WHEN 'bfloat16' THEN 'bf16'
        WHEN 'double' THEN 'fp64' WHEN 'float64' THEN 'fp64'
        WHEN 'float8_e4m3fn' THEN 'fp8' WHEN 'float8_e5m2' THEN 'fp8'
        WHEN 'float8_e4m3fnuz' THEN 'fp8' WHEN 'float8_e5m2fnuz' THEN 'fp8'
        WHEN 'long int' THEN 'int64' WHEN 'long' THEN 'int64' WHEN 'int64_t' THEN 'int64'
        WHEN 'int' THEN 'int32' WHEN 'short int' THEN 'int16' WHEN 'short' THEN 'int16'
        WHEN 'signed char' THEN 'int8' WHEN 'unsigned char' THEN 'uint8' WHEN 'bool' THEN 'bool'
        WHEN 'complex<float>' THEN 'complex64' WHEN 'complex<double>' THEN 'complex128'
        WHEN 'complex<c10::half>' THEN 'complex32'
    END;

-- tk_dtype_bytes(d): bytes per element of a tk_dtype name (or of fp32/fp16/bf16/... given by a user).
CREATE OR REPLACE TEMP MACRO tk_dtype_bytes(d) AS
    CASE d WHEN 'fp64' THEN 8 WHEN 'fp32' THEN 4 WHEN 'tf32' THEN 4 WHEN 'fp16' THEN 2 WHEN 'bf16' THEN 2
           WHEN 'fp8' THEN 1 WHEN 'int64' THEN 8 WHEN 'int32' THEN 4 WHEN 'int16' THEN 2
           WHEN 'int8' THEN 1 WHEN 'uint8' THEN 1 WHEN 'bool' THEN 1
           WHEN 'complex32' THEN 4 WHEN 'complex64' THEN 8 WHEN 'complex128' THEN 16 END;

-- tk_numel(dims): elements of a tensor of shape dims ([] = a 0-d tensor: 1); NULL for NULL.
CREATE OR REPLACE TEMP MACRO tk_numel(dims) AS
    CASE WHEN dims IS NULL THEN NULL WHEN len(dims) = 0 THEN 1.0 ELSE list_product(dims) END;

-- tk_int_list(text, i): the i-th value (1-based) of a scalar-list argument written as '[2, 2]' (a
-- single value '[2]' or '2' applies to every position); NULL when not a list of integers.
CREATE OR REPLACE TEMP MACRO tk_int_list(txt, i) AS
    coalesce(TRY_CAST(txt AS BIGINT[])[i], TRY_CAST(txt AS BIGINT[])[1], TRY_CAST(txt AS BIGINT));

-- tk_attn_pairs(l, s, causal): query-key pairs an attention computes: l x s, or with a causal mask
-- (lower triangular, aligned top-left as torch's is_causal) sum over query rows i < l of min(i + 1, s).
CREATE OR REPLACE TEMP MACRO tk_attn_pairs(l, s, causal) AS
    CASE WHEN NOT coalesce(causal, false) THEN l * s
         WHEN l <= s THEN l * (l + 1) / 2
         ELSE s * (s + 1) / 2 + (l - s) * s END;

-- tk_op_model(): one row per operator call that recorded shapes (nvtx_ranges with input_dims,
-- push/pop, closed): op (the operator name without PyTorch's NVTX suffixes), dtype (of its first
-- tensor argument with a known type, else the variable op_dtype), family, flop and bytes (NULL when
-- the operator has no model, or its arguments do not fit it: e.g. an elementwise operator over
-- TensorLists, whose shapes are not flat lists). Formulas: docs/metrics.md.
CREATE OR REPLACE TEMP MACRO tk_op_model() AS TABLE
WITH o AS (
    SELECT run_id, range_id, pid, tid, start_ns, end_ns, depth, domain,
           regexp_replace(name, ', (seq|op_id|sizes|input_op_ids) = .*$', '') AS op,
           input_dims AS d, input_types AS ty, concrete_inputs AS ci,
           coalesce(list_filter(list_transform(input_types, lambda t: tk_dtype(t)),
                                lambda x: x IS NOT NULL AND x NOT IN ('int64', 'int32', 'int16', 'int8', 'uint8', 'bool'))[1],
                    list_filter(list_transform(input_types, lambda t: tk_dtype(t)), lambda x: x IS NOT NULL)[1],
                    getvariable('op_dtype')) AS dtype
    FROM nvtx_ranges
    WHERE input_dims IS NOT NULL AND style = 'push/pop' AND end_ns IS NOT NULL
),
a AS (
    SELECT o.*,
        tk_dtype_bytes(dtype) AS eb,
        -- bytes of every tensor argument (its own element type when recorded, else dtype's)
        list_sum(list_transform(range(1, len(d) + 1), lambda i:
            CASE WHEN d[i] IS NULL THEN 0
                 WHEN ty IS NULL THEN CASE WHEN len(d[i]) = 0 THEN 0 ELSE tk_numel(d[i]) * tk_dtype_bytes(dtype) END
                 WHEN tk_dtype(ty[i]) IS NULL THEN 0
                 ELSE tk_numel(d[i]) * tk_dtype_bytes(tk_dtype(ty[i])) END)) AS in_bytes,
        -- elements of the largest tensor argument (the output of an elementwise op)
        list_max(list_transform(range(1, len(d) + 1), lambda i:
            CASE WHEN d[i] IS NULL OR (ty IS NOT NULL AND tk_dtype(ty[i]) IS NULL) OR (ty IS NULL AND len(d[i]) = 0) THEN 0
                 ELSE tk_numel(d[i]) END)) AS max_numel,
        regexp_replace(op, '^aten::', '') AS base
    FROM o
),
f AS (
    SELECT a.*,
        CASE
            WHEN base IN ('mm', 'addmm', 'bmm', 'baddbmm', 'matmul', 'linear', 'addbmm') THEN 'matmul'
            WHEN base IN ('convolution', '_convolution', 'conv1d', 'conv2d', 'conv3d', 'cudnn_convolution',
                          'miopen_convolution', 'mkldnn_convolution', 'convolution_backward') THEN 'convolution'
            WHEN base IN ('scaled_dot_product_attention', '_scaled_dot_product_flash_attention',
                          '_scaled_dot_product_efficient_attention', '_scaled_dot_product_cudnn_attention',
                          '_scaled_dot_product_flash_attention_backward',
                          '_scaled_dot_product_efficient_attention_backward') THEN 'attention'
            WHEN base IN ('layer_norm', 'native_layer_norm', 'batch_norm', 'native_batch_norm', '_batch_norm_impl_index',
                          'cudnn_batch_norm', 'miopen_batch_norm', 'group_norm', 'native_group_norm',
                          'rms_norm', '_fused_rms_norm') THEN 'norm'
            WHEN base IN ('softmax', '_softmax', 'log_softmax', '_log_softmax', '_softmax_backward_data',
                          '_log_softmax_backward_data') THEN 'softmax'
            WHEN base IN ('embedding', 'embedding_bag', '_embedding_bag') THEN 'embedding'
            WHEN base IN ('sum', 'mean', 'amax', 'amin', 'max', 'min', 'norm', 'linalg_vector_norm', 'var', 'std',
                          'var_mean', 'std_mean', 'prod', 'argmax', 'argmin', 'logsumexp', 'any', 'all') THEN 'reduction'
            WHEN base IN ('copy_', 'fill_', 'zero_', 'clone', 'contiguous', '_to_copy', 'cat', 'stack',
                          'index_select', 'gather', 'scatter', 'scatter_add_', 'index', 'index_put_') THEN 'copy'
            WHEN regexp_matches(base, '^(add|sub|mul|div|rsub|neg|abs|exp|exp2|expm1|log|log1p|log2|sqrt|rsqrt|reciprocal|pow|square'
                                      '|relu|relu6|leaky_relu|gelu|silu|sigmoid|tanh|hardtanh|hardswish|hardsigmoid|elu|mish|softplus'
                                      '|sin|cos|erf|clamp|clamp_min|clamp_max|where|masked_fill|lerp|addcmul|addcdiv|maximum|minimum'
                                      '|threshold|threshold_backward|gelu_backward|silu_backward|sigmoid_backward|tanh_backward'
                                      '|native_dropout|native_dropout_backward|dropout|eq|ne|lt|le|gt|ge|logical_not|bitwise_and'
                                      '|_foreach_add|_foreach_mul|nan_to_num)_?$') THEN 'elementwise'
        END AS family
    FROM a
),
m AS (
    SELECT f.*,
        -- matmul shapes: x [.., M, K] times w [.., K, N] (linear: w is [N, K])
        CASE base WHEN 'addmm' THEN d[2] WHEN 'baddbmm' THEN d[2] WHEN 'addbmm' THEN d[2] ELSE d[1] END AS x,
        CASE base WHEN 'addmm' THEN d[3] WHEN 'baddbmm' THEN d[3] WHEN 'addbmm' THEN d[3] ELSE d[2] END AS w,
        -- convolution argument positions (1-based) of stride, padding, dilation, transposed, groups
        CASE base WHEN 'cudnn_convolution' THEN 4 WHEN 'miopen_convolution' THEN 5 WHEN 'mkldnn_convolution' THEN 5
                  WHEN 'convolution_backward' THEN 5 ELSE 4 END AS i_stride,
        CASE base WHEN 'cudnn_convolution' THEN 3 WHEN 'miopen_convolution' THEN 4 WHEN 'mkldnn_convolution' THEN 4
                  WHEN 'convolution_backward' THEN 6 ELSE 5 END AS i_pad,
        CASE base WHEN 'cudnn_convolution' THEN 5 WHEN 'miopen_convolution' THEN 6 WHEN 'mkldnn_convolution' THEN 6
                  WHEN 'convolution_backward' THEN 7 ELSE 6 END AS i_dil,
        CASE base WHEN 'convolution' THEN 7 WHEN '_convolution' THEN 7 WHEN 'convolution_backward' THEN 8 END AS i_transposed,
        CASE base WHEN 'cudnn_convolution' THEN 6 WHEN 'miopen_convolution' THEN 7 WHEN 'mkldnn_convolution' THEN 7
                  WHEN 'convolution' THEN 9 WHEN '_convolution' THEN 9 WHEN 'convolution_backward' THEN 10 ELSE 7 END AS i_groups,
        -- attention: q, k, v and is_causal positions
        CASE WHEN base LIKE '%backward' THEN 2 ELSE 1 END AS i_q,
        CASE base WHEN 'scaled_dot_product_attention' THEN 6 WHEN '_scaled_dot_product_flash_attention' THEN 5
                  WHEN '_scaled_dot_product_efficient_attention' THEN 7 WHEN '_scaled_dot_product_cudnn_attention' THEN 7
                  WHEN '_scaled_dot_product_flash_attention_backward' THEN 12
                  WHEN '_scaled_dot_product_efficient_attention_backward' THEN 12 END AS i_causal
    FROM f
),
mm AS (
    SELECT m.*,
        -- M, K, N and the batch of a matmul-family call, with torch.matmul's rules for 1-D
        -- operands: a 1-D x is a row vector (M = 1), a 1-D w a column vector (N = 1); batch dims
        -- are those before the last two (x [B, M, K] by w [K]: B x M x K multiply-adds)
        CASE WHEN family <> 'matmul' THEN NULL
             WHEN base = 'linear' THEN w[2] ELSE x[len(x)] END AS k_,
        CASE WHEN family <> 'matmul' THEN NULL
             WHEN base = 'linear' THEN w[1] WHEN len(w) >= 2 THEN w[len(w)] ELSE 1 END AS n_,
        CASE WHEN family <> 'matmul' THEN NULL
             WHEN base = 'linear' THEN CASE WHEN len(x) >= 2 THEN list_product(x[1:len(x) - 1]) ELSE 1 END
             WHEN len(x) >= 2 THEN x[len(x) - 1] ELSE 1 END AS m_,
        CASE WHEN family <> 'matmul' OR base = 'linear' THEN 1
             WHEN base IN ('bmm', 'baddbmm', 'addbmm') THEN x[1]
             WHEN base = 'matmul' THEN greatest(CASE WHEN len(x) > 2 THEN list_product(x[1:len(x) - 2]) ELSE 1 END,
                                                CASE WHEN len(w) > 2 THEN list_product(w[1:len(w) - 2]) ELSE 1 END)
             ELSE 1 END AS b_,
        -- the shapes fit the operator: the ranks it takes, matching inner (K) and batch sizes,
        -- no negative size; else its FLOP and bytes are NULL (counted as unmodelled)
        CASE WHEN family <> 'matmul' THEN NULL
             WHEN x IS NULL OR w IS NULL OR len(x) = 0 OR len(w) = 0
                  OR list_count(x) < len(x) OR list_count(w) < len(w)
                  OR list_min(x) < 0 OR list_min(w) < 0 THEN false
             WHEN base IN ('mm', 'addmm') THEN len(x) = 2 AND len(w) = 2 AND x[2] = w[1]
             WHEN base IN ('bmm', 'baddbmm', 'addbmm') THEN len(x) = 3 AND len(w) = 3 AND x[1] = w[1] AND x[3] = w[2]
             WHEN base = 'linear' THEN len(w) = 2 AND x[len(x)] = w[2]
             ELSE x[len(x)] = CASE WHEN len(w) >= 2 THEN w[len(w) - 1] ELSE w[1] END
        END AS mm_ok,
        -- convolution: transposed flag and the product over spatial dims of output x kernel size
        CASE WHEN family = 'convolution' AND i_transposed IS NOT NULL THEN lower(ci[i_transposed]) = 'true' ELSE false END AS transposed,
        CASE WHEN family = 'attention' THEN lower(ci[i_causal]) = 'true' END AS causal
    FROM m
),
conv AS (
    SELECT mm.*,
        CASE WHEN family <> 'convolution' OR len(x) < 3 OR len(w) <> len(x) THEN NULL
             WHEN base = 'convolution_backward' THEN
                 -- d[1] is grad_output (the forward output), d[2] the input, d[3] the weight
                 tk_numel(d[1]) * coalesce(list_product(d[3][2:len(d[3])]), 1)
             WHEN transposed THEN tk_numel(x) * coalesce(list_product(w[2:len(w)]), 1)
             ELSE
                 x[1] * w[1] * list_product(list_transform(range(1, len(x) - 1), lambda j:
                     (x[j + 2] + 2 * tk_int_list(ci[i_pad], j) - tk_int_list(ci[i_dil], j) * (w[j + 2] - 1) - 1)
                         // tk_int_list(ci[i_stride], j) + 1))
                 * coalesce(list_product(w[2:len(w)]), 1)
        END AS conv_macs,
        CASE WHEN base = 'convolution_backward' THEN
                 (CASE WHEN lower(coalesce(ci[len(ci)], '')) LIKE '[true%' THEN 1 ELSE 0 END)
               + (CASE WHEN regexp_matches(lower(coalesce(ci[len(ci)], '')), '^\[\w+,\s*true') THEN 1 ELSE 0 END)
             ELSE 1 END AS conv_passes
    FROM mm
)
SELECT run_id, range_id, pid, tid, start_ns, end_ns, depth, op, d AS input_dims, dtype, family,
    CASE WHEN list_count(d) < len(d) AND family IN ('elementwise', 'copy', 'reduction') THEN NULL
    ELSE CASE family
        WHEN 'matmul' THEN CASE WHEN mm_ok THEN 2.0 * b_ * m_ * k_ * n_ END
        WHEN 'convolution' THEN 2.0 * conv_macs * conv_passes
        WHEN 'attention' THEN
            2.0 * d[i_q][1] * d[i_q][2]
                * tk_attn_pairs(d[i_q][3], d[i_q + 1][3], causal)
                * CASE WHEN base LIKE '%backward' THEN 3 * d[i_q][4] + 2 * d[i_q + 2][4] ELSE d[i_q][4] + d[i_q + 2][4] END
        WHEN 'norm' THEN CASE WHEN base IN ('rms_norm', '_fused_rms_norm') THEN 4.0 ELSE 8.0 END * tk_numel(d[1])
        WHEN 'softmax' THEN CASE WHEN base LIKE '%backward%' THEN 3.0 ELSE 5.0 END * tk_numel(d[1])
        WHEN 'embedding' THEN 0.0
        WHEN 'reduction' THEN tk_numel(d[1])
        WHEN 'copy' THEN 0.0
        WHEN 'elementwise' THEN max_numel
    END END AS flop,
    CASE WHEN list_count(d) < len(d) AND family IN ('elementwise', 'copy', 'reduction') THEN NULL
    ELSE CASE family
        WHEN 'matmul' THEN CASE WHEN mm_ok THEN in_bytes + b_ * m_ * n_ * eb END
        WHEN 'convolution' THEN CASE WHEN conv_macs IS NOT NULL THEN in_bytes + CASE WHEN base = 'convolution_backward' THEN 0
            ELSE conv_macs / coalesce(list_product(w[2:len(w)]), 1) * eb END END
        WHEN 'attention' THEN in_bytes + CASE WHEN base LIKE '%backward' THEN 0 ELSE tk_numel(d[1]) / d[1][4] * d[3][4] * eb END
        WHEN 'norm' THEN in_bytes + tk_numel(d[1]) * eb
        WHEN 'softmax' THEN in_bytes + tk_numel(d[1]) * eb
        WHEN 'embedding' THEN tk_numel(d[2]) * d[1][len(d[1])] * eb * 2 + (in_bytes - tk_numel(d[1]) * eb)
        WHEN 'reduction' THEN in_bytes
        WHEN 'copy' THEN CASE WHEN base IN ('fill_', 'zero_') THEN max_numel * eb
                              WHEN base IN ('copy_', 'index_put_', 'scatter_add_') THEN in_bytes
                              ELSE in_bytes + max_numel * eb END
        WHEN 'elementwise' THEN in_bytes + max_numel * eb
    END END AS bytes
FROM conv;

-- tk_op_keys(): the operator calls with shapes (push/pop, closed) and the launching CUDA API calls
-- (those whose kernels are in the kernels table, found through pid and correlation_id), each
-- with a key (thread number in the high 64 bits, time in the low ones) so that "on the same
-- thread and inside" is "k_start <= key <= k_end". is_op: an operator (range_id, k_start, k_end)
-- or a launch (k_start, k_end, kernels, kernel_ns, and cum_kernels / cum_ns: the kernels and
-- kernel time of the thread's launches before it in key order).
CREATE OR REPLACE TEMP MACRO tk_op_keys() AS TABLE
WITH ops AS (
    SELECT run_id, range_id, pid, tid, start_ns, end_ns FROM nvtx_ranges
    WHERE input_dims IS NOT NULL AND style = 'push/pop' AND end_ns IS NOT NULL
),
calls AS (
    SELECT c.run_id, c.pid, c.tid, c.start_ns, c.end_ns, count(*) AS kernels, sum(k.end_ns - k.start_ns) AS kernel_ns
    FROM kernels AS k
    JOIN cuda_api AS c ON c.run_id = k.run_id AND c.pid = k.pid AND c.correlation_id = k.correlation_id
    GROUP BY c.run_id, c.pid, c.correlation_id, c.tid, c.start_ns, c.end_ns
),
threads_n AS (
    SELECT run_id, pid, tid, (row_number() OVER (ORDER BY run_id, pid, tid))::HUGEINT << 64 AS thread_key
    FROM (SELECT DISTINCT run_id, pid, tid FROM ops)
),
keyed_calls AS (
    SELECT c.run_id, c.pid, t.thread_key + c.start_ns AS k_start, t.thread_key + c.end_ns AS k_end,
           c.start_ns, c.kernels, c.kernel_ns
    FROM calls AS c
    JOIN threads_n AS t ON c.run_id = t.run_id AND c.pid IS NOT DISTINCT FROM t.pid AND c.tid IS NOT DISTINCT FROM t.tid
)
SELECT run_id, pid, false AS is_op, NULL::BIGINT AS range_id, k_start, k_end, start_ns, kernels, kernel_ns,
       coalesce(sum(kernels) OVER w, 0) AS cum_kernels, coalesce(sum(kernel_ns) OVER w, 0) AS cum_ns
FROM keyed_calls
WINDOW w AS (ORDER BY k_start ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
UNION ALL
SELECT o.run_id, o.pid, true, o.range_id, t.thread_key + o.start_ns, t.thread_key + o.end_ns, o.start_ns,
       NULL, NULL, NULL, NULL
FROM ops AS o
JOIN threads_n AS t ON o.run_id = t.run_id AND o.pid IS NOT DISTINCT FROM t.pid AND o.tid IS NOT DISTINCT FROM t.tid;

-- tk_op_gpu(): per operator call with shapes, the kernels launched inside it (its child operators
-- included): nvtx_gpu_projection's rule, a launch on the operator's thread inside its time, with
-- the kernels it launched found through (pid, correlation_id). Ranges on a thread nest, so the
-- launches inside [k_start, k_end] are those between the first launch at or after k_start and the
-- last one at or before k_end: two ASOF lookups of the running sums, linear in operators +
-- launches. kernels / gpu_ns NULL when none.
CREATE OR REPLACE TEMP MACRO tk_op_gpu() AS TABLE
WITH k AS MATERIALIZED (SELECT * FROM tk_op_keys()),
o AS (SELECT run_id, range_id, k_start, k_end FROM k WHERE is_op),
c AS (SELECT k_start AS c_start, cum_kernels, cum_ns, kernels, kernel_ns FROM k WHERE NOT is_op),
first_in AS (
    SELECT o.run_id, o.range_id, o.k_end, c.cum_kernels AS k0, c.cum_ns AS n0, c.c_start AS first_start
    FROM o ASOF LEFT JOIN c ON o.k_start <= c.c_start
),
last_in AS (
    SELECT f.*, c.cum_kernels + c.kernels AS k1, c.cum_ns + c.kernel_ns AS n1, c.c_start AS last_start
    FROM first_in AS f ASOF LEFT JOIN c ON f.k_end >= c.c_start
)
SELECT run_id, range_id,
       CASE WHEN first_start <= last_start THEN (k1 - k0)::BIGINT END AS kernels,
       CASE WHEN first_start <= last_start THEN (n1 - n0)::BIGINT END AS gpu_ns
FROM last_in;

-- tk_op_flops(): tk_op_model() with `counted`: the operator has a FLOP model (flop not NULL) and
-- no operator with a FLOP model runs inside it, so summing flop over counted rows counts every
-- modelled FLOP once (aten::linear -> aten::addmm: addmm is counted; AddmmBackward0 -> aten::mm x 2:
-- both mm are). The GPU time of a call comes from tk_op_gpu() (op_flops, mfu).
CREATE OR REPLACE TEMP MACRO tk_op_flops() AS TABLE
WITH m AS MATERIALIZED (SELECT * FROM tk_op_model()),
nxt AS (
    -- the next modelled operator on the same thread (by start, outer first); ranges on a thread are
    -- nested, so when it starts before this one ends it runs inside it
    SELECT run_id, range_id, lead(start_ns) OVER w AS next_start, lead(depth) OVER w AS next_depth
    FROM m WHERE flop IS NOT NULL
    WINDOW w AS (PARTITION BY run_id, pid, tid ORDER BY start_ns, depth, range_id)
)
SELECT m.*,
       m.flop IS NOT NULL AND NOT coalesce(n.next_start < m.end_ns OR (n.next_start = m.start_ns AND n.next_depth > m.depth), false) AS counted
FROM m LEFT JOIN nxt AS n USING (run_id, range_id);
