"""op_flops and mfu (issue 18): FLOP and bytes from operator shapes, MFU per step.

Golden tests on run folders built here (every expected value worked out by hand next to it) and
checks on the shared Kineto fixtures recorded with shapes (the raw JSON read with ``json``).
"""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pytest

from tests.conftest import FIXTURES
from tracekit.query.engine import Engine

DIMS = pa.list_(pa.list_(pa.int64()))
STRS = pa.list_(pa.string())


def q(runs, name, params=None):
    with Engine(runs if isinstance(runs, list) else [runs]) as eng:
        rows = eng.query(name, params).to_pylist()
        return rows, eng.notices


def ops_table(rows, pid=1, tid=1):
    """rows: (range_id, name, start, end, depth, dims, types, concrete) -> nvtx_ranges."""
    return pa.table({
        "range_id": [r[0] for r in rows], "name": [r[1] for r in rows],
        "start_ns": [r[2] for r in rows], "end_ns": [r[3] for r in rows],
        "duration_ns": [r[3] - r[2] for r in rows], "depth": pa.array([r[4] for r in rows], pa.int32()),
        "pid": [pid] * len(rows), "tid": [tid] * len(rows), "style": ["push/pop"] * len(rows),
        "domain": [("tracekit" if r[1].startswith("step ") else "pytorch.cpu_op") for r in rows],
        "input_dims": pa.array([r[5] for r in rows], DIMS),
        "input_types": pa.array([r[6] for r in rows], STRS),
        "concrete_inputs": pa.array([r[7] for r in rows], STRS),
    })


def launches(rows, pid=1, tid=1):
    """rows: (call start, call end, correlation, kernel start, kernel end) -> cuda_api, kernels."""
    api = {"start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows],
           "duration_ns": [r[1] - r[0] for r in rows], "pid": [pid] * len(rows), "tid": [tid] * len(rows),
           "correlation_id": [r[2] for r in rows], "name": ["cudaLaunchKernel"] * len(rows)}
    k = {"start_ns": [r[3] for r in rows], "end_ns": [r[4] for r in rows],
         "duration_ns": [r[4] - r[3] for r in rows], "pid": [pid] * len(rows),
         "device_id": pa.array([0] * len(rows), pa.int32()), "stream_id": [7] * len(rows),
         "correlation_id": [r[2] for r in rows], "name": [f"k{r[2]}" for r in rows]}
    return api, k


F4 = ["float"]


@pytest.fixture
def model_run(run_factory):
    ops = ops_table([
        (1, "step 1", 0, 1000, 0, None, None, None),
        # linear(x [4, 8], w [16, 8], b [16]) -> addmm(b, x, w^T [8, 16]): 2*4*8*16 = 1024 FLOP
        (2, "aten::linear", 0, 100, 1, [[4, 8], [16, 8], [16]], F4 * 3, ["", "", ""]),
        (3, "aten::addmm", 10, 90, 2, [[16], [4, 8], [8, 16], [], []], F4 * 3 + ["Scalar"] * 2,
         ["", "", "", "1", "1"]),
        # bmm half [3, 4, 5] x [3, 5, 6]: 2*3*4*5*6 = 720 FLOP
        (4, "aten::bmm", 200, 300, 1, [[3, 4, 5], [3, 5, 6]], ["c10::Half"] * 2, ["", ""]),
        # conv2d x [2, 3, 8, 8], w [4, 3, 3, 3], stride 1, padding 1, dilation 1 -> out [2, 4, 8, 8]
        (5, "aten::conv2d", 400, 500, 1, [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],
         F4 * 3 + ["ScalarList"] * 3 + ["Scalar"], ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]),
        (6, "aten::empty", 600, 610, 1, [[], [], []], ["ScalarList", "", ""], ["[5]", "", ""]),
        (7, "aten::foo", 700, 800, 1, [[10]], F4, [""]),
    ])
    api, k = launches([(20, 30, 1, 100, 150), (210, 220, 2, 300, 400), (710, 720, 3, 800, 850)])
    dev = {"device_id": pa.array([0], pa.int32()), "name": ["NVIDIA A100-SXM4-40GB"],
           "compute_capability": ["8.0"]}
    return run_factory({"nvtx_ranges": ops, "cuda_api": api, "kernels": k, "devices": dev})


def test_op_flops_golden(model_run):
    rows, notices = q(model_run, "op_flops")
    by = {r["range_id"]: r for r in rows}
    assert set(by) == {2, 3, 4, 5}  # empty and foo have no model
    # addmm: bytes = (16 + 4*8 + 8*16) * 4 read + 4*16*4 written = 704 + 256 = 960
    assert (by[3]["flop"], by[3]["bytes"], by[3]["dtype"], by[3]["family"]) == (1024, 960, "fp32", "matmul")
    assert by[3]["counted"] and not by[2]["counted"] and by[2]["flop"] == 1024
    # kernel [100, 150) was launched inside addmm (and so inside linear)
    assert (by[3]["gpu_ns"], by[2]["gpu_ns"], by[3]["kernels"]) == (50, 50, 1)
    assert by[3]["flop_per_s"] == pytest.approx(1024 / 50e-9)
    assert by[3]["intensity"] == pytest.approx(1024 / 960)
    # bmm: bytes = (60 + 90) * 2 + 3*4*6 * 2 = 444
    assert (by[4]["flop"], by[4]["bytes"], by[4]["dtype"], by[4]["gpu_ns"]) == (720, 444, "fp16", 100)
    # conv: 2 * (N 2 * Cout 4 * 8*8 out * Cin 3 * 3*3) = 27648; bytes = (384 + 108 + 4)*4 + 512*4
    assert (by[5]["flop"], by[5]["bytes"], by[5]["gpu_ns"]) == (27648, 4032, None)
    # coverage: kernels 50 + 100 + 50 = 200 ns, 150 inside counted calls -> 75 %
    assert by[3]["coverage_pct"] == 75.0
    assert notices == ["op_flops: run run1: FLOP modelled for 75.0% of GPU kernel time "
                       "(0.000 of 0.000 ms); most time without a model: aten::foo 25.0%"]
    rows, _ = q(model_run, "op_flops", {"all_ops": "true"})
    assert {r["range_id"]: r["flop"] for r in rows if r["family"] is None} == {6: None, 7: None}


def test_mfu_golden(model_run):
    rows, _ = q(model_run, "mfu")
    by = {r["scope"]: r for r in rows}
    step, run = by["step"], by["run"]
    # counted: addmm 1024 (fp32) + bmm 720 (fp16) + conv 27648 (fp32) = 29392; fp32 dominates
    assert (step["flop"], step["ops"], step["dtype"], step["time_ns"]) == (29392, 3, "fp32", 1000)
    # A100 SXM4 40GB fp32 SIMT peak 19.5 TFLOP/s: 29392 / (1e-6 s x 19.5e12) = 0.0015073
    assert (step["gpu"], step["peak"], step["peak_flop_per_s"]) == ("NVIDIA A100-SXM4-40GB", "flop fp32", 19.5e12)
    assert step["mfu"] == pytest.approx(29392 / (1000e-9 * 19.5e12))
    assert step["coverage_pct"] == 75.0 and step["missing"] is None
    # whole run: the GPU activity spans [100, 850) = 750 ns
    assert run["time_ns"] == 750 and run["mfu"] == pytest.approx(29392 / (750e-9 * 19.5e12))
    # fp32 matmuls on tensor cores (allow_tf32): the TF32 dense peak, 156 TFLOP/s
    rows, _ = q(model_run, "mfu", {"fp32_math": "tf32"})
    assert {r["scope"]: r["peak"] for r in rows} == {"step": "tensor tf32", "run": "tensor tf32"}
    assert rows[0]["peak_flop_per_s"] == 156e12


def test_mfu_unknown_gpu_says_why(model_run):
    rows, _ = q(model_run, "mfu", {"gpu": "NVIDIA A10G"})
    assert all(r["mfu"] is None and "not in the peak table" in r["missing"] for r in rows)


# -- the shared Kineto fixtures recorded with shapes ---------------------------------------------

def _raw_ops(path):
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("cat") == "cpu_op" and "Input Dims" in (e.get("args") or {})]


SHAPED = [p for p in sorted((FIXTURES / "kineto").glob("*.json.gz")) if _raw_ops(p)]


@pytest.fixture(scope="module")
def kineto_runs(tmp_path_factory):
    from tracekit.convert import convert

    base = tmp_path_factory.mktemp("kineto_shapes")
    return {p.name: convert([p], base / p.name.split(".")[0]) for p in SHAPED}


def _mkn(name, dims):
    """2*M*K*N (x B) from the raw JSON's Input Dims, by the aten signatures."""
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * k * n
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * k * n
    (b, m, k), (_, _, n) = dims[0], dims[1]  # aten::bmm
    return 2 * b * m * k * n


def test_fixtures_with_shapes_are_found():
    # the ROCm traces (MI250, MI300X), the CPU-only rank, the Triton trace and the H100 TimeSformer
    # trace record shapes; the others do not
    assert [p.name for p in SHAPED] == ["kineto_a100_triton.json.gz", "kineto_cpu_only_rank.json.gz",
                                        "kineto_h100_timesformer_infer.json.gz", "kineto_mi250_rocm.json.gz",
                                        "kineto_mi300_resnet_actckpt_train.json.gz"]


@pytest.mark.parametrize("path", SHAPED, ids=lambda p: p.name.split(".")[0])
def test_matmul_flop_exact_on_fixtures(kineto_runs, path):
    want = sorted((e["name"], _mkn(e["name"], e["args"]["Input Dims"])) for e in _raw_ops(path)
                  if e["name"] in ("aten::mm", "aten::addmm", "aten::bmm"))
    rows, _ = q(kineto_runs[path.name], "op_flops")
    got = sorted((r["name"], r["flop"]) for r in rows if r["name"] in ("aten::mm", "aten::addmm", "aten::bmm"))
    assert got == want
    # every recorded shape is kept as written; a TensorList's nested shapes become a null element
    flat = [[d if all(type(x) is int for x in d) else None for d in e["args"]["Input Dims"]] for e in _raw_ops(path)]
    raw = sorted(json.dumps(d) for d in flat)
    with Engine([kineto_runs[path.name]]) as eng:
        kept = eng.sql("SELECT input_dims FROM nvtx_ranges WHERE input_dims IS NOT NULL").column(0).to_pylist()
    assert sorted(json.dumps(d) for d in kept) == raw


def test_fixture_counts(kineto_runs):
    # MI250: 1 mm [128, 5] x [5, 128] and 1 addmm [5, 128] x [128, 128]: 2*128*5*128 each
    rows, notices = q(kineto_runs["kineto_mi250_rocm.json.gz"], "op_flops")
    assert [(r["name"], r["flop"]) for r in rows if r["family"] == "matmul" and r["counted"]] == \
        [("aten::addmm", 163840), ("aten::mm", 163840)]
    assert len(notices) == 1 and "FLOP modelled for" in notices[0]
    cpu, _ = q(kineto_runs["kineto_cpu_only_rank.json.gz"], "op_flops")
    assert sum(r["name"] == "aten::addmm" for r in cpu) == 99


def test_mfu_on_rocm_fixture(kineto_runs):
    # a GPU trace on a GPU of the peak table ('AMD Radeon Graphics', gfx90a, 104 CUs: one MI250 GCD)
    rows, _ = q(kineto_runs["kineto_mi250_rocm.json.gz"], "mfu")
    [run] = [r for r in rows if r["scope"] == "run"]
    assert run["gpu"] == "AMD Instinct MI250 (one GCD)" and run["peak"] == "flop fp32"
    assert run["peak_flop_per_s"] == 45.3e12 / 2
    assert 0 < run["mfu"] < 1
    assert run["mfu"] == pytest.approx(run["flop"] / (run["time_ns"] / 1e9 * 45.3e12 / 2))
    # per step (ProfilerStep#1 holds the whole training step; #2 only the profiler's tail)
    steps = {r["step"]: r for r in rows if r["scope"] == "step"}
    assert 0 < steps["ProfilerStep#1"]["mfu"] < 1 and steps["ProfilerStep#1"]["flop"] == run["flop"]
    # a CPU-only trace has FLOP but no GPU to time or rate them by
    [cpu] = [r for r in q(kineto_runs["kineto_cpu_only_rank.json.gz"], "mfu")[0] if r["scope"] == "run"]
    assert cpu["flop"] > 0 and cpu["mfu"] is None and cpu["missing"] == "no GPU activity to time the run by"


# -- nsys: PyTorch NVTX op ranges (emit_nvtx(record_shapes=True)) ---------------------------------

def test_nsys_pytorch_nvtx_sizes(tmp_path):
    # the H100 slice was taken with emit_nvtx() without shapes ('aten::mm, op_id = 314307'); one
    # message gets the sizes and seq that record_shapes=True writes
    from tests.conftest import edited_export
    from tracekit.convert import convert

    src = edited_export(tmp_path, "nsys2026_h100_2gpu_pytorch_slice", """
        UPDATE NVTX_EVENTS SET text = 'aten::mm, seq = 5, op_id = 314307, sizes = [[4, 8], [8, 16]], '
                                      || 'input_op_ids = [(314300, 0), (314301, 0)]' WHERE rowid = 27;
        UPDATE NVTX_EVENTS SET text = 'aten::add, op_id = 314349, sizes = [[3, [2]], []]' WHERE rowid = 107;""")
    run = convert([src], tmp_path / "run")
    with Engine([run]) as eng:
        t = eng.sql("SELECT range_id, op_id, sequence_number, input_dims FROM nvtx_ranges "
                    "WHERE range_id IN (27, 36, 107) ORDER BY range_id").to_pylist()
        n_ops = eng.sql("SELECT count(*) FROM nvtx_ranges WHERE op_id IS NOT NULL").column(0)[0].as_py()
        n_raw = eng.sql("SELECT count(*) FROM nvtx_ranges WHERE name LIKE '%, op_id = %'").column(0)[0].as_py()
    assert t == [{"range_id": 27, "op_id": 314307, "sequence_number": 5, "input_dims": [[4, 8], [8, 16]]},
                 {"range_id": 36, "op_id": 314286, "sequence_number": None, "input_dims": None},
                 {"range_id": 107, "op_id": 314349, "sequence_number": None, "input_dims": None}]
    assert n_ops == n_raw > 1000
    rows, _ = q(run, "op_flops")
    [mm] = [r for r in rows if r["range_id"] == 27]
    # 2*4*8*16 = 1024; nsys records no types: bytes only with -p op_dtype
    assert (mm["name"], mm["flop"], mm["bytes"], mm["dtype"]) == ("aten::mm", 1024, None, None)
    rows, _ = q(run, "op_flops", {"op_dtype": "bf16"})
    [mm] = [r for r in rows if r["range_id"] == 27]
    assert (mm["dtype"], mm["bytes"]) == ("bf16", (32 + 128 + 64) * 2)


def test_kineto_copies_use_the_recorded_rate(tmp_path):
    # AlexNet (integer-microsecond ts/dur): the 256-byte copy is written with dur 1 us, but Kineto
    # measured it at 0.14277746793084217 GB/s (1793 ns): that rate, not 256 B / 1 us = 0.256 GB/s
    from tracekit.convert import convert

    src = FIXTURES / "kineto" / "kineto_a100_alexnet.json.gz"
    with gzip.open(src, "rt") as f:
        copies = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "gpu_memcpy"]
    run = convert([src], tmp_path / "alexnet")
    with Engine([run]) as eng:
        kept = eng.sql("SELECT bytes, recorded_bytes_per_s FROM memcpy ORDER BY start_ns").to_pylist()
        [row] = eng.query("memcpy_throughput").to_pylist()
    assert kept == [{"bytes": e["args"]["bytes"], "recorded_bytes_per_s": e["args"]["memory bandwidth (GB/s)"] * 1e9}
                    for e in sorted(copies, key=lambda e: e["ts"])]
    durations = [e["args"]["bytes"] / (e["args"]["memory bandwidth (GB/s)"] * 1e9) * 1e9 for e in copies]
    assert row["count"] == 16 and row["total_ns"] == round(sum(durations))
    rates = sorted(e["args"]["memory bandwidth (GB/s)"] * 1e9 for e in copies)
    assert rates[0] == pytest.approx(0.14277746793084217e9)
    assert row["max_bytes_per_s"] == pytest.approx(rates[-1])
    assert row["bytes_per_s"] == pytest.approx(sum(e["args"]["bytes"] for e in copies) / sum(durations) * 1e9)


@pytest.mark.parametrize("name", ["op_flops", "mfu"])
def test_plans_stay_linear(model_run, name):
    # launches are matched to operators by running sums and ASOF lookups: no range join, which
    # DuckDB may plan as a piecewise merge join (quadratic) when its inputs are materialized (it
    # did: 50 k operator pairs took 13 s, 200 k 198 s; now 18 s and 77 s on a loaded machine).
    # Nested loops over the small peak and alias tables are fine.
    import re

    from tracekit.query.named_queries import get_query

    query = get_query(name)
    with Engine([model_run]) as eng:
        plan = "\n".join(r[1] for r in eng.con.sql("EXPLAIN " + query.sql).fetchall())
    assert not re.findall(r"Piecewise Merge Join|IE Join", plan)


def test_matmul_vector_cases_and_malformed_shapes(run_factory):
    """torch.matmul's 1-D rules (issue 28): a 1-D operand is a vector, not a batch."""
    ops = ops_table([
        # [64, 128] @ [128]: matrix-vector, 2*64*128 = 16384 (was 2,097,152: the 128 as a batch)
        (1, "aten::matmul", 0, 10, 0, [[64, 128], [128]], F4 * 2, ["", ""]),
        # [128] @ [128]: dot product, 2*128 = 256
        (2, "aten::matmul", 20, 30, 0, [[128], [128]], F4 * 2, ["", ""]),
        # [128] @ [128, 32]: vector-matrix, 2*128*32 = 8192
        (3, "aten::matmul", 40, 50, 0, [[128], [128, 32]], F4 * 2, ["", ""]),
        # [5, 64, 128] @ [128]: batched matrix-vector, 2*5*64*128 = 81920
        (4, "aten::matmul", 60, 70, 0, [[5, 64, 128], [128]], F4 * 2, ["", ""]),
        # [128] @ [5, 128, 32]: vector by a batch of matrices, 2*5*128*32 = 40960
        (5, "aten::matmul", 80, 90, 0, [[128], [5, 128, 32]], F4 * 2, ["", ""]),
        # malformed: inner sizes differ, mm of 3-D, a missing shape, bmm batch mismatch
        (6, "aten::matmul", 100, 110, 0, [[64, 128], [127]], F4 * 2, ["", ""]),
        (7, "aten::mm", 120, 130, 0, [[2, 64, 128], [128, 4]], F4 * 2, ["", ""]),
        (8, "aten::mm", 140, 150, 0, [[], [128, 4]], F4 * 2, ["", ""]),
        (9, "aten::bmm", 160, 170, 0, [[3, 4, 5], [2, 5, 6]], F4 * 2, ["", ""]),
    ])
    api, k = launches([(1, 2, 1, 3, 9), (101, 102, 2, 103, 109)])
    run = run_factory({"nvtx_ranges": ops, "cuda_api": api, "kernels": k})
    rows, notices = q(run, "op_flops")
    flop = {r["range_id"]: r["flop"] for r in rows}
    assert flop == {1: 16384, 2: 256, 3: 8192, 4: 81920, 5: 40960, 6: None, 7: None, 8: None, 9: None}
    by = {r["range_id"]: r for r in rows}
    # bytes of the matrix-vector: (64*128 + 128) * 4 read + 64 * 4 written
    assert by[1]["bytes"] == (64 * 128 + 128) * 4 + 64 * 4 and by[6]["bytes"] is None
    assert not by[6]["counted"]
    assert notices == [("op_flops: run run1: FLOP modelled for 50.0% of GPU kernel time "
                        "(0.000 of 0.000 ms); most time without a model: aten::matmul 50.0%; "
                        "4 call(s) of aten::bmm, aten::matmul, aten::mm with shapes that do not "
                        "fit the operator: FLOP NULL")]
