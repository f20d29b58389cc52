-- roofline_ceilings: The roofline's ceilings per GPU model: peak FLOP/s per precision and peak bandwidth per memory level (for `tracekit plot roofline`).
-- @include roofline
--
-- One row per device_name of the ncu launches, the mean over its launches of the peaks the
-- roofline macros give each launch (tk_roofline_launches: the report's own peaks, else the GPU
-- peak table; docs/roofline.md). NULL where neither knows a peak.
--
-- @column device_name      text     GPU product name as ncu reports it.
-- @column fp64             value    Peak FP64 FLOP/s.
-- @column fp32             value    Peak FP32 FLOP/s.
-- @column fp16             value    Peak FP16 FLOP/s (non-tensor).
-- @column tensor           value    Peak tensor-core FLOP/s of tensor_datatype.
-- @column dram             bytes/s  Peak DRAM bandwidth.
-- @column l2               bytes/s  Peak L2 bandwidth.
-- @column l1               bytes/s  Peak L1 bandwidth.
-- @column tensor_datatype  text     Datatype of the tensor ceiling.
-- @key tensor dram
SELECT device_name,
       avg(peak_fp64_flop_per_s) AS fp64, avg(peak_fp32_flop_per_s) AS fp32,
       avg(peak_fp16_flop_per_s) AS fp16, avg(peak_tensor_flop_per_s) AS tensor,
       avg(peak_dram_bytes_per_s) AS dram, avg(peak_l2_bytes_per_s) AS l2, avg(peak_l1_bytes_per_s) AS l1,
       any_value(tensor_datatype) AS tensor_datatype
FROM tk_roofline_launches() GROUP BY device_name ORDER BY device_name;
