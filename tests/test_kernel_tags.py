"""Kernel-name tags of number formats (queries/data/kernel_name_tags.csv, issue 28): current
cuBLASLt nvjet names and older cuBLAS/CUTLASS/cuDNN spellings, counted by run_inventory."""

from __future__ import annotations

import csv

from tracekit.query.engine import Engine
from tracekit.query.named_queries import data_file

NAMES = {  # name -> (precision, tensor_core): published kernel names of each family
    "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT": ("fp16", True),
    "nvjet_tst_128x8_64x12_2x1_v_bz_splitK_TNT": ("bf16", True),
    "nvjet_qqtst_128x256_128x6_2x1_2cta_v_bz_TNT": ("fp8", True),
    "nvjet_sss_128x64_32x8_1x2_h_bz_NNT": ("fp32", False),
    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn": ("bf16", True),
    "volta_s884gemm_fp16_128x128_ldg8_f2f_nn": ("fp16", True),
    "volta_h884gemm_64x64_ldg8_nn": ("fp16", True),
    "sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16_stage4": ("tf32", True),
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma": ("fp32", False),
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4>(Params)": ("tf32", True),
    "sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x64": ("fp16", True),
    "ampere_sgemm_32x128_nt": ("fp32", False),
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>": None,
}


def test_every_tag_row_names_a_source_and_a_known_format():
    with open(data_file("kernel_name_tags.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len({r["priority"] for r in rows}) == len(rows)
    for r in rows:
        assert r["precision"] in {"fp8", "bf16", "fp16", "tf32", "fp32", "fp64", "int8"}
        assert len(r["source"]) > 20 and r["library"]


def test_tags_of_published_kernel_names(run_factory):
    names = list(NAMES)
    run = run_factory({"kernels": {"start_ns": [i * 100 for i in range(len(names))],
                                   "end_ns": [i * 100 + 10 * (i + 1) for i in range(len(names))],
                                   "device_id": [0] * len(names), "pid": [1] * len(names),
                                   "name": names}})
    with Engine([run]) as eng:
        got = {r["name"]: (r["precision"], r["tensor_core"])
               for r in eng.sql("SELECT * FROM tk_kernel_tags()").to_pylist()}
        inv = eng.query("run_inventory").to_pylist()[0]
    assert got == {n: v for n, v in NAMES.items() if v is not None}  # no tag: no row
    # GEMM time by format: kernel i lasts 10 * (i + 1) ns; FillFunctor is not a GEMM
    dur = {n: 10 * (i + 1) for i, n in enumerate(names)}
    def total(*fmts):
        return sum(d for n, d in dur.items() if NAMES[n] and NAMES[n][0] in fmts)
    assert inv["gemm_fp16_ns"] == total("fp16") == 10 + 60 + 70 + 110
    assert inv["gemm_bf16_ns"] == total("bf16") == 20 + 50
    assert inv["gemm_fp32_ns"] == total("fp32", "tf32") == 40 + 80 + 90 + 100 + 120


def test_an_h200_bf16_nvjet_run_is_inferred_bf16(run_factory):
    """The issue's H200 case: nvjet_tst_ GEMMs (bf16) and nvjet_hsh_ (fp16) once were 'unknown'."""
    from tracekit.runfolder import open_run
    from tracekit.study.runs import infer

    names = ["nvjet_tst_128x256_64x6_2x1_2cta_v_bz_TNT"] * 3 + ["nvjet_hsh_96x128_64x7_2x1_v_bz_TNN"]
    run = run_factory({"kernels": {"start_ns": [0, 1000, 2000, 3000], "end_ns": [500, 1500, 2500, 3100],
                                   "device_id": [0] * 4, "pid": [1] * 4, "name": names}})
    with Engine([run]) as eng:
        inv = eng.query("run_inventory").to_pylist()[0]
    assert (inv["gemm_bf16_ns"], inv["gemm_fp16_ns"], inv["gemm_fp32_ns"]) == (1500, 100, 0)
    assert infer(open_run(run), inv)["precision"] == ("bf16", "kernel names (100% of GEMM time bf16)")


def test_an_mpi_rank_under_nsys_is_named_after_its_program(run_factory):
    """`mpirun -np 2 nsys profile ./jacobi`: nsys records the rank processes as nsys-launcher; the
    main thread (tid = pid) carries the program's name after the exec."""
    run = run_factory({
        "kernels": {"start_ns": [0, 10, 20], "end_ns": [5, 15, 25], "device_id": [0, 0, 1],
                    "pid": [10, 10, 11], "name": ["jacobi_kernel"] * 3},
        "processes": {"pid": [10, 11, 9], "name": ["nsys-launcher", "nsys-launcher", "mpirun"]},
        "threads": {"pid": [10, 10, 11], "tid": [10, 12, 11], "name": ["jacobi", "cuda-EvtHandlr", "jacobi"]},
    })
    with Engine([run]) as eng:
        inv = eng.query("run_inventory").to_pylist()[0]
    assert (inv["main_process"], inv["gpus"]) == ("jacobi", 2)
