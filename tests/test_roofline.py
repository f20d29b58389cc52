"""Golden tests of the roofline queries on hand-written ncu (and nsys) tables.

Every expected number is worked out by hand in the comment beside it, from the counter values
written here; the fixtures from real GPUs lack L1/L2 byte and tensor counters, so these inputs
supply them.
"""

from __future__ import annotations

import pytest
from helpers.roofline import GEMM, PEAKS, counts, ncu_tables

from tracekit.cli import run as cli_run
from tracekit.errors import QueryError
from tracekit.query.engine import Engine
from tracekit.runfolder.checksums import reseal

OP = "sm__sass_thread_inst_executed_op_{}_pred_on.sum"




@pytest.fixture
def golden(run_factory):
    launches = [
        {"launch_id": 0, "kernel_name": GEMM, "device_name": "Test GPU", "compute_capability": "9.0"},
        {"launch_id": 1, "kernel_name": GEMM, "device_name": "Test GPU", "compute_capability": "9.0"},
        {"launch_id": 2, "kernel_name": "copy_kernel", "device_name": "NVIDIA H100 80GB HBM3",
         "compute_capability": "9.0"},
    ]
    metrics = {
        0: {"gpu__time_duration.sum": 2000, **counts(d=(0, 5, 10), f=(100, 50, 1000)),
            "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 1000,
            "sm__ops_path_tensor_src_fp16_dst_fp32_sparsity_off.sum": 1000,  # a split: not added again
            "dram__bytes.sum": 1000, "lts__t_bytes.sum": 2000, "l1tex__t_bytes.sum": 4000, **PEAKS},
        1: {"gpu__time_duration.sum": 3000, **counts(f=(0, 0, 2000)),
            "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 0,
            "dram__bytes.sum": 500, "lts__t_bytes.sum": 400, "l1tex__t_bytes.sum": 8000, **PEAKS},
        2: {"gpu__time_duration.sum": 1000, "dram__bytes.sum": 8000},
    }
    return run_factory(ncu_tables(launches, metrics), name="golden")


def rows(run, **params):
    with Engine([run]) as eng:
        return eng.query("roofline", {k: str(v) for k, v in params.items()}).to_pylist()


def test_per_launch_golden(golden):
    r = {x["launch_id"]: x for x in rows(golden, per="launch")}
    a = r[0]
    assert a["fp64_flop"] == 25            # dadd 0 + dmul 5 + 2 x dfma 10
    assert a["fp32_flop"] == 2150          # fadd 100 + fmul 50 + 2 x ffma 1000
    assert a["fp16_flop"] == 0             # measured zero stays zero
    assert a["tensor_flop"] == 1000        # sm__ops_path_tensor_src_fp16_dst_fp32 (the sparsity split not added)
    assert a["tensor_flop_estimated"] is False
    assert a["flop"] == 3175               # 25 + 2150 + 0 + 1000
    assert a["precision"] == "fp32"        # fp32 holds the most FLOPs
    assert (a["dram_bytes"], a["l2_bytes"], a["l1_bytes"]) == (1000, 2000, 4000)
    assert a["dram_intensity"] == pytest.approx(3.175)    # 3175 / 1000
    assert a["l2_intensity"] == pytest.approx(1.5875)     # 3175 / 2000
    assert a["l1_intensity"] == pytest.approx(0.79375)    # 3175 / 4000
    assert a["flop_per_s"] == pytest.approx(1.5875e9)     # 3175 FLOP / 2000 ns
    assert a["dram_bytes_per_s"] == pytest.approx(5e8)    # 1000 B / 2000 ns
    assert a["peak_flop_per_s"] == pytest.approx(1.28e11)  # 2 x 64 x 1e9
    assert a["peak_dram_bytes_per_s"] == pytest.approx(2e10)
    assert a["peak_l2_bytes_per_s"] == pytest.approx(4e10)
    assert a["peak_l1_bytes_per_s"] == pytest.approx(1e11)
    assert a["ridge_dram"] == pytest.approx(6.4)          # 1.28e11 / 2e10
    assert a["ridge_l2"] == pytest.approx(3.2)
    assert a["ridge_l1"] == pytest.approx(1.28)
    # roof at I=3.175: min(1.28e11, 3.175 x 2e10 = 6.35e10); 1.5875e9 / 6.35e10 = 2.5 %
    assert a["pct_of_roof"] == pytest.approx(2.5)
    assert (a["bound"], a["l2_bound"], a["l1_bound"]) == ("latency",) * 3  # below 20 % of the roof
    assert a["hierarchy_violation"] is False
    assert a["ceiling_source"] == "report"
    # launch 1: L2 bytes (400) below DRAM bytes (500): l2 intensity 10 > dram intensity 8
    b = r[1]
    assert b["flop"] == 4000 and b["dram_intensity"] == pytest.approx(8) and b["l2_intensity"] == pytest.approx(10)
    assert b["hierarchy_violation"] is True


def test_bound_labels_with_threshold(golden):
    r = {x["launch_id"]: x for x in rows(golden, per="launch", min_roof_pct=1)}
    # launch 0 above 1 % of the roof; every level's intensity is below its ridge
    assert (r[0]["bound"], r[0]["l2_bound"], r[0]["l1_bound"]) == ("memory", "memory", "memory")
    # launch 1: dram intensity 8 > ridge 6.4 -> compute; l1 intensity 0.5 < 1.28 -> memory
    # roof = min(1.28e11, 8 x 2e10) = 1.28e11; 4000 / 3000 ns = 1.333e9 = 1.04 % of it
    assert r[1]["bound"] == "compute" and r[1]["l1_bound"] == "memory"
    assert r[1]["pct_of_roof"] == pytest.approx(100 * (4000 / 3000e-9) / 1.28e11)


def test_per_kernel_aggregation(golden):
    r = {x["kernel_name"]: x for x in rows(golden)}
    g = r[GEMM]
    assert g["launch_id"] is None and g["launches"] == 2
    assert g["time_ns"] == 5000                          # 2000 + 3000
    assert (g["fp64_flop"], g["fp32_flop"], g["tensor_flop"]) == (25, 6150, 1000)  # 2150 + 4000
    assert g["flop"] == 7175
    assert (g["dram_bytes"], g["l2_bytes"], g["l1_bytes"]) == (1500, 2400, 12000)
    assert g["dram_intensity"] == pytest.approx(7175 / 1500)
    assert g["l2_intensity"] == pytest.approx(7175 / 2400)
    assert g["l1_intensity"] == pytest.approx(7175 / 12000)
    assert g["flop_per_s"] == pytest.approx(7175 / 5000e-9)
    assert g["hierarchy_violation"] is False
    # copy kernel: no FLOP counters -> NULL with reasons, never 0; ceilings from the table
    c = r["copy_kernel"]
    assert c["fp32_flop"] is None and c["flop"] is None and c["flop_per_s"] is None
    assert c["dram_bytes"] == 8000 and c["dram_bytes_per_s"] == pytest.approx(8e9)
    assert "fp32_flop: no sm__sass_thread_inst_executed_op_f" in c["missing"]
    assert "l2_bytes: no lts__t_bytes" in c["missing"]
    assert c["peak_dram_bytes_per_s"] == pytest.approx(3.35e12)  # gpu_peaks.csv, H100 SXM
    assert c["ceiling_source"] == "table:NVIDIA H100 80GB HBM3"
    assert c["bound"] is None


def test_ceilings_modes(golden):
    r = {x["launch_id"]: x for x in rows(golden, per="launch", ceilings="none")}
    assert r[0]["peak_flop_per_s"] is None and r[0]["ceiling_source"] == "none"
    assert "ceilings: not computed" in r[0]["missing"]
    assert r[0]["flop"] == 3175
    # not in the table: the counters still come back, ceilings NULL, the note names the GPU
    t = {x["launch_id"]: x for x in rows(golden, per="launch", ceilings="table")}
    assert t[0]["flop"] == 3175 and t[0]["peak_flop_per_s"] is None and t[0]["bound"] is None
    assert "'Test GPU' is not in the peak table" in t[0]["ceiling_note"]


def test_unknown_gpu_answers_what_it_can(run_factory, capsys):
    run = run_factory(ncu_tables(
        [{"launch_id": 0, "kernel_name": "k", "device_name": "Mystery GPU 9000", "compute_capability": "9.0"}],
        {0: {"gpu__time_duration.sum": 10, "dram__bytes.sum": 100}}))
    [r] = rows(run)
    # 100 bytes in 10 ns = 1e10 bytes/s; no ceilings, so no ridge, pct_of_roof or bound
    assert (r["dram_bytes"], r["dram_bytes_per_s"], r["time_ns"]) == (100, 1e10, 10)
    assert r["peak_dram_bytes_per_s"] is None and r["ridge_dram"] is None and r["bound"] is None
    assert "Mystery GPU 9000" in r["missing"]
    assert cli_run(["query", "roofline", str(run), "-f", "csv"]) == 0
    err = capsys.readouterr().err.strip()
    # one line on stderr: why, and how to add the ceilings
    assert "Mystery GPU 9000" in err and "-p gpu=NAME" in err and "\n" not in err
    # --param gpu names a listed GPU instead
    r = rows(run, gpu="Tesla T4")[0]
    assert r["peak_dram_bytes_per_s"] == pytest.approx(320e9)
    # and ceilings=none skips the lookup
    assert rows(run, ceilings="none")[0]["dram_bytes"] == 100


def test_tensor_estimate_paired_fp32_and_rates(run_factory):
    launches = [
        {"launch_id": 0, "kernel_name": "hmma_v100", "device_name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0"},
        {"launch_id": 1, "kernel_name": "hmma_a100", "device_name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0"},
        {"launch_id": 2, "kernel_name": "ffma2_b200", "device_name": "NVIDIA B200", "compute_capability": "10.0"},
        {"launch_id": 3, "kernel_name": "rates", "device_name": "NVIDIA B200", "compute_capability": "10.0"},
    ]
    rate = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
    metrics = {
        0: {"gpu__time_duration.sum": 100, "sm__inst_executed_pipe_tensor.sum": 10},
        1: {"gpu__time_duration.sum": 100, "sm__inst_executed_pipe_tensor.sum": 10},
        2: {"gpu__time_duration.sum": 100, **counts(f=(1, 1, 1)),
            OP.format("fadd2"): 10, OP.format("fmul2"): 20, OP.format("ffma2"): 100},
        3: {"gpu__time_duration.sum": 100, "sm__cycles_elapsed.avg": 1000,
            rate.format("fadd"): 0.0, rate.format("fmul"): 0.5, rate.format("ffma"): 2.5},
    }
    r = {x["launch_id"]: x for x in rows(run_factory(ncu_tables(launches, metrics)), per="launch")}
    assert r[0]["tensor_flop"] == 5120 and r[0]["tensor_flop_estimated"] is True  # 10 inst x 512 (V100)
    assert "estimated" in r[0]["notes"]
    assert r[0]["peak_flop_per_s"] == pytest.approx(125e12)  # V100 tensor fp16 dense (table)
    assert r[1]["tensor_flop"] is None                          # no documented factor for 8.0
    assert "compute capability 8.0" in r[1]["missing"]
    assert r[2]["fp32_flop"] == 1 + 1 + 2 + 2 * 10 + 2 * 20 + 4 * 100  # = 464
    assert "paired" not in (r[2]["missing"] or "")
    assert r[3]["fp32_flop"] == pytest.approx(0 + 500 + 2 * 2500)   # rates x 1000 cycles
    assert "per_cycle_elapsed" in r[3]["notes"]
    assert "paired fp32 counters" in r[3]["missing"]              # cc 10 without fadd2/fmul2/ffma2


# ---- roofline_by_nvtx ------------------------------------------------------------------

@pytest.fixture
def joined(run_factory):
    """nsys: steps 1 and 2, six kernels; ncu: the pass targeted step 2 (gemm, copy)."""
    steps = {"range_id": [1, 2], "start_ns": [0, 1000], "end_ns": [1000, 2000], "pid": [7, 7],
             "tid": [7, 7], "depth": [0, 0], "name": ["step 1", "step 2"], "domain": ["", ""]}
    api_t = [100, 200, 300, 1100, 1200, 1300]
    api = {"start_ns": api_t, "end_ns": [t + 5 for t in api_t], "pid": [7] * 6, "tid": [7] * 6,
           "correlation_id": [1, 2, 3, 4, 5, 6], "name": ["cudaLaunchKernel"] * 6}
    names = [GEMM, "copy_kernel", "gemm(float *, int)", GEMM, "copy_kernel", "other_kernel"]
    start = [150, 260, 310, 1150, 1310, 1340]
    end = [250, 300, 510, 1300, 1330, 1440]  # durations 100, 40, 200 | 150, 20, 100
    kernels = {"start_ns": start, "end_ns": end, "duration_ns": [e - s for s, e in zip(start, end)],
               "pid": [7] * 6, "device_id": [0] * 6, "stream_id": [7] * 6,
               "correlation_id": [1, 2, 3, 4, 5, 6], "name": names}
    full = {"dram__bytes.sum": 0, "lts__t_bytes.sum": 0, "l1tex__t_bytes.sum": 0,
            "sm__ops_path_tensor_src_fp16_dst_fp32.sum": 0}
    ncu = ncu_tables(
        [{"launch_id": 0, "kernel_name": "gemm(float *, int)", "device_name": "Test GPU"},
         {"launch_id": 1, "kernel_name": "copy_kernel", "device_name": "Test GPU"}],
        {0: {**full, "gpu__time_duration.sum": 500, **counts(f=(0, 0, 2000)),
             "dram__bytes.sum": 1000, "lts__t_bytes.sum": 2000, "l1tex__t_bytes.sum": 3000},
         1: {**full, "gpu__time_duration.sum": 100, **counts(),
             "dram__bytes.sum": 500, "lts__t_bytes.sum": 500, "l1tex__t_bytes.sum": 500}})
    return run_factory({"nvtx_ranges": steps, "cuda_api": api, "kernels": kernels, **ncu}, name="joined")


def by_nvtx(run, **params):
    with Engine([run]) as eng:
        return eng.query("roofline_by_nvtx", {k: str(v) for k, v in params.items()}).to_pylist()


def test_roofline_by_nvtx_golden(joined):
    r = {x["range_name"]: x for x in by_nvtx(joined, range="step 2", group_by="instance")}
    s2 = r["step 2"]
    assert s2["ncu_launches"] == 2 and s2["ncu_matched"] == 2   # gemm and copy of step 2 matched
    assert (s2["kernels"], s2["exact_kernels"], s2["estimated_kernels"]) == (3, 2, 0)
    assert s2["time_ns"] == 270 and s2["covered_time_ns"] == 170   # 150 + 20 + 100; other_kernel not profiled
    assert s2["coverage_pct"] == pytest.approx(100 * 170 / 270)
    assert s2["fp32_flop"] == 4000 and s2["flop"] == 4000          # gemm 2 x 2000 ffma; copy 0
    assert (s2["dram_bytes"], s2["l2_bytes"], s2["l1_bytes"]) == (1500, 2500, 3500)
    assert s2["flop_per_s"] == pytest.approx(4000 / 170e-9)        # weighted by nsys time
    assert s2["dram_intensity"] == pytest.approx(4000 / 1500)
    # step 1: not profiled; both gemms (one spelled 'float *') take the gemm launch's values
    s1 = r["step 1"]
    assert (s1["kernels"], s1["exact_kernels"], s1["estimated_kernels"]) == (3, 0, 3)
    assert s1["time_ns"] == 340 and s1["covered_time_ns"] == 340
    assert s1["fp32_flop"] == 8000 and s1["dram_bytes"] == 2500     # 2 x 1000 + 500
    assert s1["flop_per_s"] == pytest.approx(8000 / 340e-9)


def test_roofline_by_nvtx_by_name_and_errors(joined):
    r = by_nvtx(joined, name_regex="^step ")
    assert [x["range_name"] for x in r] == ["step 1", "step 2"] and r[0]["range_id"] is None
    # without a target range the order runs over the whole capture: ncu's gemm matches step 1's first gemm
    assert r[0]["exact_kernels"] == 2 and r[1]["exact_kernels"] == 0
    with pytest.raises(QueryError, match="step 9"):
        by_nvtx(joined, range="step 9")


# ---- plot ------------------------------------------------------------------------------------

def test_plot_roofline(golden, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "fig" / "roofline.png"
    assert cli_run(["plot", "roofline", str(golden), "-o", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert "1 without FLOP or byte counters" in capsys.readouterr().err  # copy_kernel: no FLOP counters
    assert not [p for p in out.parent.iterdir() if p.name != "roofline.png"]  # no temp file left
    from tracekit.plots.roofline import plot_roofline

    info = plot_roofline([golden], tmp_path / "r.svg")
    assert info["plotted"] == [GEMM] and list(info["skipped"]) == ["copy_kernel"]
    assert (tmp_path / "r.svg").read_text().lstrip().startswith("<?xml")


def test_plot_without_counters_is_a_one_line_error(run_factory, tmp_path, capsys):
    run = run_factory(ncu_tables(
        [{"launch_id": 0, "kernel_name": "k", "device_name": "NVIDIA B200", "compute_capability": "10.0"}],
        {0: {"gpu__time_duration.sum": 10}}))
    out = tmp_path / "x.png"
    assert cli_run(["plot", "roofline", str(run), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "nothing to plot" in err and "\n" not in err and not out.exists()


def test_gpu_peak_table_is_well_formed():
    from tracekit.roofline import load_peaks

    rows = load_peaks().to_pylist()
    keys = [(r["device_name"], r["resource"], r["datatype"], r["sparsity"]) for r in rows]
    assert len(keys) == len(set(keys))                      # one value per GPU, resource, datatype, sparsity
    assert all(r["value"] > 0 and r["source"] for r in rows)
    assert all(r["unit"] == ("bytes/s" if r["resource"] == "dram" else "FLOP/s") for r in rows)
    assert all(r["sparsity"] in ("dense", "sparse") for r in rows if r["resource"] != "dram")
    devices = {r["device_name"] for r in rows}
    assert all(any(r["device_name"] == d and r["resource"] == "dram" for r in rows) for d in devices)
    # sparse tensor peaks are twice the dense ones in every datasheet used
    val = {k: r["value"] for k, r in zip(keys, rows)}
    for (d, res, dt, sp), v in val.items():
        if sp == "sparse":
            assert v == pytest.approx(2 * val[(d, res, dt, "dense")], rel=1e-3)  # datasheets round


@pytest.mark.slow
def test_roofline_by_nvtx_on_a_real_nsys_export(tmp_path):
    """nsys: the H200 nvFuser benchmark export (19 kernels, NVTX ranges). ncu side: a raw CSV
    written here with one launch per nsys kernel, in launch order, spelled the way ncu's
    demangler spells names ('<4, ...>' for nsys's '<(int)4, ...>', '(anonymous namespace)' for
    '<unnamed>', 'float *' spacing). All 19 must match, and a range's FLOPs are its kernels'."""
    import csv
    import re

    from conftest import FIXTURES

    from tracekit.convert import convert

    nsys_file = FIXTURES / "nsys" / "nsys2024.6_h200_nvfuser_bench.sqlite"
    probe = convert([nsys_file], tmp_path / "probe")
    with Engine([probe]) as eng:
        ks = eng.sql("SELECT name FROM kernels ORDER BY start_ns, correlation_id").to_pylist()
    assert len(ks) == 19

    def as_ncu(name: str) -> str:
        name = re.sub(r"\((?:unsigned )?(?:int|long|bool|char|short)\)(-?\d)", r"\1", name)
        return name.replace("<unnamed>", "(anonymous namespace)").replace("*", " *").replace("  *", " *")

    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Device", "CC",
              "device__attribute_display_name", "gpu__time_duration.sum", "dram__bytes.sum",
              OP.format("fadd"), OP.format("fmul"), OP.format("ffma")]
    units = ["", "", "", "", "", "", "", "", "", "", "nsecond", "byte", "inst", "inst", "inst"]
    f = tmp_path / "bench.ncu.csv"
    with open(f, "w", newline="") as fh:
        fh.write("==PROF== Connected to process 1 (python)\n")
        w = csv.writer(fh, quoting=csv.QUOTE_ALL)
        w.writerow(header)
        w.writerow(units)
        for i, k in enumerate(ks):  # launch i: ffma = 1000 (i + 1), dram = 100 (i + 1) bytes
            w.writerow([i, 1, "python", "host", as_ncu(k["name"]), 1, 7, 0, "9.0", "NVIDIA H200",
                        1000, 100 * (i + 1), 0, 0, 1000 * (i + 1)])
    run = convert([nsys_file, f], tmp_path / "both")
    sel = {"max_depth": "9", "group_by": "instance", "name_regex": "^KernelExecutor::runFusion$"}
    with Engine([run]) as eng:
        whole = eng.query("roofline_by_nvtx", sel).to_pylist()
        order = {x["start_ns"]: i for i, x in enumerate(
            eng.sql("SELECT start_ns FROM kernels ORDER BY start_ns, correlation_id").to_pylist())}
        inside = eng.sql("""
            SELECT k.start_ns, k.end_ns - k.start_ns AS d FROM kernels k JOIN cuda_api a USING (run_id, pid, correlation_id)
            JOIN nvtx_ranges r ON r.run_id = k.run_id AND r.pid = k.pid AND a.start_ns BETWEEN r.start_ns AND r.end_ns
            WHERE r.name = 'KernelExecutor::runFusion' ORDER BY k.start_ns""").to_pylist()
    assert len(whole) == 1 and inside
    row = whole[0]
    assert row["ncu_launches"] == 19 and row["ncu_matched"] == 19   # every name matched despite the spelling
    assert row["kernels"] == row["exact_kernels"] == len(inside) and row["coverage_pct"] == 100
    assert row["time_ns"] == sum(x["d"] for x in inside)
    # launch i carries ffma 1000 (i + 1) -> 2000 (i + 1) FLOP, and 100 (i + 1) DRAM bytes
    assert row["fp32_flop"] == sum(2000 * (order[x["start_ns"]] + 1) for x in inside)
    assert row["dram_bytes"] == sum(100 * (order[x["start_ns"]] + 1) for x in inside)
    assert row["flop_per_s"] == pytest.approx(row["fp32_flop"] / row["covered_time_ns"] * 1e9)


def test_plot_sizes_points_by_nsys_time_when_the_run_has_it(joined, tmp_path):
    pytest.importorskip("matplotlib")
    from tracekit.plots.roofline import plot_roofline, roofline_data

    _, _, shares = roofline_data([joined], {"ceilings": "none"})
    # nsys durations: gemm 100 + 200 + 150 (both spellings), copy 40 + 20, other_kernel 100; total 610
    assert shares[("joined", "gemm(float *, int)")] == pytest.approx(450 / 610)
    assert shares[("joined", "copy_kernel")] == pytest.approx(60 / 610)
    info = plot_roofline([joined], tmp_path / "j.png", params={"ceilings": "none"})
    # copy_kernel has bytes but 0 FLOP: a zero intensity cannot sit on log axes, so it is skipped
    assert info["plotted"] == ["gemm(float *, int)"] and info["skipped"] == {"copy_kernel": "0 FLOP: no place on log axes"}


def test_present_zero_counters_are_zero_not_null(run_factory):
    # an integer-only kernel: the fp32 and fp64 counters are present with the value 0, the fp16
    # ones absent; 4096 DRAM bytes in 1000 ns on a T4 (320 GB/s, 8.1 TFLOP/s fp32)
    m = {"gpu__time_duration.sum": 1000, "dram__bytes.sum": 4096}
    m.update({k: v for k, v in counts(d=(0, 0, 0), f=(0, 0, 0)).items() if "_op_h" not in k})
    run = run_factory(ncu_tables(
        [{"launch_id": 0, "kernel_name": "int_kernel", "device_name": "Tesla T4", "compute_capability": "7.5"}],
        {0: m}))
    [r] = rows(run, per="launch")
    assert (r["fp64_flop"], r["fp32_flop"], r["fp16_flop"], r["flop"]) == (0, 0, None, 0)
    assert (r["dram_intensity"], r["flop_per_s"], r["precision"]) == (0, 0, "fp32")
    assert r["dram_bytes_per_s"] == pytest.approx(4.096e9)
    assert "fp16_flop: no sm__sass" in r["missing"] and "fp32_flop" not in r["missing"]


@pytest.mark.parametrize("name", ["$\\frac{$", "[/]", "a $x$ b"])
def test_plot_kernel_names_are_text_not_mathtext(golden, tmp_path, name):
    """A kernel name from the trace is drawn as text: `$\\frac{$` made matplotlib's mathtext
    parser fail the whole plot (issue 17)."""
    pytest.importorskip("matplotlib")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracekit.plots.style import text as plain

    p = golden / "ncu_launches.parquet"
    t = pq.read_table(p)
    names = [name if v == GEMM else v for v in t.column("kernel_name").to_pylist()]
    pq.write_table(t.set_column(t.column_names.index("kernel_name"), "kernel_name",
                                pa.array(names, pa.string())), p)
    reseal(golden)  # edited on purpose: new checksums
    out = tmp_path / "r.svg"
    assert cli_run(["plot", "roofline", str(golden), "-o", str(out)]) == 0
    assert out.read_text().lstrip().startswith("<?xml")
    assert plain(name).replace("\\$", "$") == name
