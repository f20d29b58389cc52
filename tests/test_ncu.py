"""Nsight Compute collector: CSV (raw, details) and .ncu-rep inputs, units, sniffing, errors.

Independent checks: the .ncu-rep fixture against the CSV that ncu 2022.3 exported from the same
report, and (where the local ncu reads a report) against `ncu --import F --csv --page raw` run
now; the naive GEMM report against 2*M*N*K.
"""

from __future__ import annotations

import gzip
import math
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import FIXTURES

from tracekit.cli import run as cli_run
from tracekit.collectors import detect
from tracekit.collectors import ncu as ncu_collector
from tracekit.collectors.ncu.units import UNIT_TABLE, parse_values
from tracekit.collectors.ncu.units import convert as convert_units
from tracekit.convert import convert
from tracekit.errors import InputError
from tracekit.query.engine import Engine

NCU = FIXTURES / "ncu"
TWO = "ncu2022.3_rtx2080ti_two_kernels"
requires_ncu = pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu CLI not on PATH")
pytest.importorskip("ncu_report")


@pytest.fixture(scope="module")
def ncu_run(tmp_path_factory):
    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("ncu_runs")

    def get(*names: str) -> Path:
        key = "+".join(names)
        if key not in cache:
            cache[key] = convert([NCU / n if "/" not in n else Path(n) for n in names], base / key.replace("/", "_"))
        return cache[key]

    return get


def table(run: Path, sql: str) -> list[dict]:
    with Engine([run]) as eng:
        return eng.sql(sql).to_pylist()


# ---- units ---------------------------------------------------------------------------------

@pytest.mark.parametrize("unit,value,expected,base", [
    ("byte", 5, 5, "byte"),
    ("Kbyte", 32.768, 32768, "byte"),        # ncu prefixes are decimal: 32 KiB prints as 32.77 Kbyte
    ("Mbyte", 1.5, 1.5e6, "byte"),
    ("Gbyte", 2, 2e9, "byte"),
    ("Kibyte", 1, 1024, "byte"),
    ("nsecond", 7, 7, "ns"),
    ("usecond", 2.5, 2500, "ns"),
    ("msecond", 1.25, 1.25e6, "ns"),
    ("second", 1.168078, 1.168078e9, "ns"),
    ("cycle/nsecond", 1.36, 1.36e9, "Hz"),
    ("cycle/usecond", 1500, 1.5e9, "Hz"),
    ("cycle/second", 1309394950.84, 1309394950.84, "Hz"),
    ("hz", 5, 5, "Hz"),
    ("Ghz", 1.5, 1.5e9, "Hz"),
    ("byte/second", 10, 10, "byte/s"),
    ("Gbyte/second", 336, 336e9, "byte/s"),
    ("Tbyte/second", 3.35, 3.35e12, "byte/s"),
    ("byte/s", 7, 7, "byte/s"),
    ("%", 99.5, 99.5, "%"),
    ("inst", 12, 12, "inst"),
    ("inst/cycle", 1408, 1408, "inst/cycle"),
    ("cycle", 3, 3, "cycle"),
    ("some/unknown", 3, 3, "some/unknown"),  # kept as is
])
def test_unit_conversion(unit, value, expected, base):
    v, b = convert_units(pa.array([float(value)]), pa.array([unit]))
    assert v[0].as_py() == pytest.approx(expected, rel=1e-12) and b[0].as_py() == base


def test_kbyte_is_decimal_in_real_exports():
    """launch__shared_mem_config_size: the report stores 32768 bytes; the 2022.3 CSV prints 32.768 Kbyte."""
    rep = ncu_collector.read_one(NCU / f"{TWO}.ncu-rep", 0)[1].to_pylist()
    csv = ncu_collector.read_one(NCU / f"{TWO}.raw.csv", 0)[1].to_pylist()
    pick = lambda rows: next(r for r in rows if r["metric_name"] == "launch__shared_mem_config_size")  # noqa: E731
    assert pick(csv)["unit"] == "Kbyte" and pick(csv)["raw_value"] == "32.768000"
    assert pick(csv)["value"] == pytest.approx(32768) and pick(rep)["value"] == 32768
    assert set(UNIT_TABLE["Kbyte"]) == {"byte", 1000.0}


def test_parse_values_never_turns_missing_into_zero():
    got = parse_values(pa.array(["1,234,567.5", "n/a", "", "no data", "0", "(128, 1, 1)", "-2.5e3", None, "N/A"]))
    assert got.to_pylist() == [1234567.5, None, None, None, 0.0, None, -2500.0, None, None]


# ---- CSV edge cases -------------------------------------------------------------------------

RAW = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==WARNING== Found outstanding GPU clock reset, trying to revert...Success.
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","device__attribute_display_name","dram__bytes.sum","gpu__time_duration.sum","lts__t_bytes.sum","sm__sass_thread_inst_executed_op_ffma_pred_on.sum"
"","","","","","","","","","","","","Kbyte","usecond","Mbyte","inst"
"0","4242","python3","host","void gemm<float, 128>(const float *, float *, int, int)","1","7","(256, 1, 1)","(64, 32, 1)","0","8.0","NVIDIA A100-SXM4-80GB","1,234.5","12.5","2.5","1,048,576"
"1","4242","python3","host","copy(float *, const float *)","1","13","(128, 2, 1)","(10, 1, 1)","0","8.0","NVIDIA A100-SXM4-80GB","n/a","","0","0"
'''


def test_raw_csv_edge_cases(tmp_path):
    f = tmp_path / "weird-name.txt"  # sniffed by content, not suffix
    f.write_text(RAW)
    assert detect(f) is ncu_collector
    run = convert([f], tmp_path / "run")
    launches = table(run, "SELECT * FROM ncu_launches ORDER BY launch_id")
    a, b = launches
    assert a["kernel_name"] == "void gemm<float, 128>(const float *, float *, int, int)"
    assert a["function_name"] == "gemm" and b["function_name"] == "copy"
    assert (a["grid_x"], a["grid_y"], a["grid_z"], a["block_x"], a["block_y"]) == (64, 32, 1, 256, 1)
    assert (b["block_x"], b["block_y"], b["stream_id"], a["pid"]) == (128, 2, 13, 4242)
    assert a["compute_capability"] == "8.0" and a["device_name"] == "NVIDIA A100-SXM4-80GB"
    m = {(r["launch_id"], r["metric_name"]): r for r in table(run, "SELECT * FROM ncu_metrics")}
    assert m[(0, "dram__bytes.sum")]["value"] == pytest.approx(1234500)       # 1,234.5 Kbyte
    assert m[(0, "dram__bytes.sum")]["raw_value"] == "1,234.5"
    assert m[(0, "gpu__time_duration.sum")]["value"] == pytest.approx(12500)  # 12.5 usecond
    assert m[(0, "lts__t_bytes.sum")]["value"] == pytest.approx(2.5e6)
    assert m[(0, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum")]["value"] == 1048576
    assert m[(1, "dram__bytes.sum")]["value"] is None                        # n/a
    assert m[(1, "gpu__time_duration.sum")]["value"] is None                 # empty cell
    assert m[(1, "lts__t_bytes.sum")]["value"] == 0                          # a real zero
    captured = table(run, "SELECT table_name, rows FROM run_tables WHERE captured ORDER BY 1")
    assert captured == [{"table_name": "ncu_launches", "rows": 2}, {"table_name": "ncu_metrics", "rows": 10}]
    with Engine([run]) as eng:
        roof = {x["launch_id"]: x for x in eng.query("roofline", {"per": "launch"}).to_pylist()}
    assert roof[0]["fp32_flop"] is None  # fadd/fmul absent: not guessed
    assert roof[1]["time_ns"] is None and "time_ns" in roof[1]["missing"]
    assert roof[1]["dram_bytes"] is None and "dram_bytes" in roof[1]["missing"]


def test_details_csv(ncu_run):
    run = ncu_run("ncu_v100_gene_roofline_region.details.csv")
    # two ncu passes (different processes) with IDs 0..7 each: 16 launches, not 8
    launches = table(run, "SELECT launch_id, ncu_id, pid, function_name FROM ncu_launches ORDER BY launch_id")
    assert len(launches) == 16 and [x["ncu_id"] for x in launches[:3]] == [0, 1, 2]
    assert {x["pid"] for x in launches} == {85801, 127605}
    m = table(run, "SELECT * FROM ncu_metrics WHERE launch_id = 0 ORDER BY metric_name")
    d = {x["metric_name"]: x for x in m}
    assert d["dram__bytes.sum"]["value"] == 690960320 and d["dram__bytes.sum"]["raw_value"] == "690,960,320"
    assert d["sm__cycles_elapsed.avg.per_second"]["value"] == pytest.approx(1309394950.84)
    assert d["sm__cycles_elapsed.avg.per_second"]["base_unit"] == "Hz"
    assert d["dram__bytes.sum"]["section"] == "Command line profiler metrics"
    # the flops pass: launch 8 = first launch of pid 127605: dadd 0, dmul 55,050,240, dfma 137,625,600
    with Engine([run]) as eng:
        roof = {x["launch_id"]: x for x in eng.query(
            "roofline", {"per": "launch", "gpu": "Tesla V100-SXM2-16GB"}).to_pylist()}
        # without -p gpu the details CSV (no GPU name) still gets its counters, no ceilings
        bare = {x["launch_id"]: x for x in eng.query("roofline", {"per": "launch"}).to_pylist()}
        notices = eng.notices
    assert bare[8]["fp64_flop"] == roof[8]["fp64_flop"] and bare[0]["dram_bytes"] == 690960320
    assert bare[8]["peak_flop_per_s"] is None and bare[8]["bound"] is None
    assert "does not name its GPU" in bare[8]["ceiling_note"]
    assert len(notices) == 1 and "does not name its GPU" in notices[0] and "-p gpu=NAME" in notices[0]
    assert roof[8]["fp64_flop"] == 0 + 55050240 + 2 * 137625600
    assert roof[8]["peak_flop_per_s"] == pytest.approx(7.8e12)


def test_details_2022_3_rule_rows(ncu_run):
    run = ncu_run(f"{TWO}.details.csv")
    launches = table(run, "SELECT * FROM ncu_launches ORDER BY launch_id")
    assert [x["kernel_name"] for x in launches] == ["kernel_A(double *, int, int)", "kernel_C(double *, const double *, int)"]
    assert [x["stream_id"] for x in launches] == [7, 7]  # not the rule rows' odd '1'
    dur = table(run, "SELECT launch_id, value, unit FROM ncu_metrics WHERE metric_name = 'Duration' ORDER BY 1")
    assert dur[0]["unit"] == "second" and dur[0]["value"] == pytest.approx(1.17e9)
    with Engine([run]) as eng:
        roof = eng.query("roofline", {"per": "launch", "ceilings": "none"}).to_pylist()
    assert {r["launch_id"]: r["time_ns"] for r in roof} == {0: pytest.approx(1.17e9), 1: pytest.approx(993020)}  # 1.17 second, 993.02 usecond


# ---- every fixture ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in NCU.iterdir() if "no_kernels" not in p.name))
def test_every_fixture_converts(ncu_run, name):
    run = ncu_run(name)
    n = table(run, "SELECT count(*) AS n, count(DISTINCT launch_id) AS d, min(kernel_name) AS k FROM ncu_launches")[0]
    assert n["n"] == n["d"] > 0 and n["k"]
    assert table(run, "SELECT count(*) AS n FROM ncu_metrics")[0]["n"] > 0
    with Engine([run]) as eng:
        params = {"ceilings": "none"} if "details" in name else {}
        roof = eng.query("roofline", {"per": "launch", **params}).to_pylist()
    assert len(roof) == n["n"]
    for r in roof:  # honest: every NULL quantity is explained, no invented zeros
        for col, reason in (("dram_bytes", "dram_bytes:"), ("l2_bytes", "l2_bytes:"), ("l1_bytes", "l1_bytes:"),
                            ("fp32_flop", "fp32_flop:"), ("time_ns", "time_ns:")):
            if r[col] is None:
                assert reason in r["missing"], (col, r["missing"])


def test_b200_csvs_say_what_is_missing(ncu_run):
    for name, launches in (("ncu_raw_b200_sdpa_flash.csv", 16), ("ncu_raw_b200_paged_decode.csv", 64)):
        run = ncu_run(name)
        with Engine([run]) as eng:
            per_launch = eng.query("roofline", {"per": "launch"}).to_pylist()
            per_kernel = eng.query("roofline").to_pylist()
        assert len(per_launch) == launches
        assert sum(r["launches"] for r in per_kernel) == launches
        for r in per_launch:
            assert r["time_ns"] > 0 and r["device_name"] == "NVIDIA B200"
            for col in ("fp64_flop", "fp32_flop", "fp16_flop", "tensor_flop", "flop", "dram_bytes", "l2_bytes",
                        "l1_bytes", "dram_intensity", "flop_per_s", "bound"):
                assert r[col] is None, col
            for what in ("fp32_flop:", "dram_bytes:", "l2_bytes:", "l1_bytes:", "tensor_flop:"):
                assert what in r["missing"]
            assert r["peak_dram_bytes_per_s"] == pytest.approx(8e12)  # table: B200 HBM3e
    # gpu__time_duration.sum of the first flash launch, as printed: 687488 ns
    run = ncu_run("ncu_raw_b200_sdpa_flash.csv")
    t = table(run, "SELECT value FROM ncu_metrics WHERE launch_id = 0 AND metric_name = 'gpu__time_duration.sum'")
    assert t[0]["value"] == 687488


def test_no_kernel_csv_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli_run(["convert", str(NCU / "ncu_raw_no_kernels.csv"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "ncu profiled no kernel" in err and "\n" not in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".run")]


def test_sniffing(tmp_path):
    rep = tmp_path / "report.bin"  # an .ncu-rep without its suffix: by magic bytes
    rep.write_bytes((NCU / f"{TWO}.ncu-rep").read_bytes())
    assert detect(rep) is ncu_collector
    nsys = sorted((FIXTURES / "nsys").glob("*.sqlite"))[0]
    assert detect(nsys).NAME == "nsys"
    assert not ncu_collector.sniff(nsys)
    kin = sorted((FIXTURES / "kineto").glob("*.json.gz"))[0]
    assert not ncu_collector.sniff(kin)
    plain = tmp_path / "json.json"
    plain.write_text(gzip.decompress(kin.read_bytes())[:2000].decode("utf-8", "replace"))
    assert not ncu_collector.sniff(plain)
    other = tmp_path / "other.csv"
    other.write_text('"a","b"\n"1","2"\n')
    assert not ncu_collector.sniff(other)
    bad = tmp_path / "broken.ncu-rep"
    bad.write_bytes(b"NVR\x00garbage")
    with pytest.raises(InputError):
        convert([bad], tmp_path / "r")


# ---- .ncu-rep against CSV exports of the same report -------------------------------------------

def _close(rep_row: dict, csv_row: dict) -> bool:
    """Equal within the rounding of the CSV's printed digits."""
    raw = csv_row["raw_value"].replace(",", "")
    decimals = len(raw.split(".")[1]) if "." in raw else 0
    scale = abs(csv_row["value"] / float(raw)) if float(raw) else 1.0
    return math.isclose(rep_row["value"], csv_row["value"], rel_tol=1e-9, abs_tol=0.51 * 10 ** -decimals * scale)


def _compare(rep_run_rows, csv_run_rows):
    rep = {(r["launch_id"], r["metric_name"]): r for r in rep_run_rows}
    csv = {(r["launch_id"], r["metric_name"]): r for r in csv_run_rows}
    common = set(rep) & set(csv)
    numeric = [k for k in common if csv[k]["value"] is not None]
    assert len(numeric) > 100
    bad = [(k, rep[k]["value"], csv[k]["raw_value"], csv[k]["unit"]) for k in numeric
           if rep[k]["value"] is None or not _close(rep[k], csv[k])]
    assert not bad, bad[:5]
    # what the CSV leaves empty ('no data') the report does not invent either
    assert all(rep[k]["value"] is None for k in common if csv[k]["value"] is None and csv[k]["raw_value"] == "no data")
    return len(numeric)


def test_report_agrees_with_ncu_2022_3_csv_export(ncu_run):
    rep, csv = ncu_run(f"{TWO}.ncu-rep"), ncu_run(f"{TWO}.raw.csv")
    n = _compare(table(rep, "SELECT * FROM ncu_metrics"), table(csv, "SELECT * FROM ncu_metrics"))
    assert n > 400
    cols = "launch_id, kernel_name, function_name, grid_x, grid_y, block_x, device_name, compute_capability, stream_id, context_id"
    assert table(rep, f"SELECT {cols} FROM ncu_launches ORDER BY 1") == table(csv, f"SELECT {cols} FROM ncu_launches ORDER BY 1")
    # gpu__time_duration.sum: report 1168077824 ns; CSV 1.168078 second
    t = table(rep, "SELECT value FROM ncu_metrics WHERE launch_id = 0 AND metric_name = 'gpu__time_duration.sum'")
    assert t[0]["value"] == 1168077824


@requires_ncu
@pytest.mark.slow
@pytest.mark.parametrize("name", [f"{TWO}.ncu-rep", "ncu_v100_gene_dram_time.ncu-rep", "ncu_v100_gene_flops_time.ncu-rep"])
def test_report_agrees_with_local_ncu_import(ncu_run, tmp_path, name):
    out = subprocess.run(["ncu", "--import", str(NCU / name), "--csv", "--page", "raw"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    f = tmp_path / "export.csv"
    f.write_text(out.stdout)
    rep, csv = ncu_run(name), ncu_run(str(f))
    _compare(table(rep, "SELECT * FROM ncu_metrics"), table(csv, "SELECT * FROM ncu_metrics"))
    q = "SELECT launch_id, kernel_name, nvtx_range FROM ncu_launches ORDER BY 1"
    assert table(rep, q) == table(csv, q)


def test_v100_report_roofline_values(ncu_run):
    """The NERSC-style V100 passes: time from cycles / clock, fp64 FLOPs, DRAM bytes."""
    with Engine([ncu_run("ncu_v100_gene_flops_time.ncu-rep")]) as eng:
        r = eng.query("roofline", {"per": "launch"}).to_pylist()
    first = next(x for x in r if x["launch_id"] == 0)
    assert first["fp64_flop"] == 0 + 55050240 + 2 * 137625600  # same counts as the details CSV
    assert "sm__cycles_elapsed.avg / sm__cycles_elapsed.avg.per_second" in first["notes"]
    m = table(ncu_run("ncu_v100_gene_flops_time.ncu-rep"),
              "SELECT metric_name, value FROM ncu_metrics WHERE launch_id = 0 AND metric_name LIKE 'sm__cycles_elapsed.avg%'")
    d = {x["metric_name"]: x["value"] for x in m}
    assert first["time_ns"] == pytest.approx(d["sm__cycles_elapsed.avg"] / d["sm__cycles_elapsed.avg.per_second"] * 1e9)


def test_naive_gemm_flops_match_2mnk(ncu_run):
    """ncu2024.1 --set full on a naive 1024^3 fp32 GEMM (C = alpha*A@B + beta*C, one thread per
    output). The full set stores instruction *rates* (.sum.per_cycle_elapsed) and cycles, so the
    counts are rate x cycles: FFMA = M*N*K (inner products) + M*N (beta*C), FMUL = M*N (alpha)."""
    M = N = K = 1024
    with Engine([ncu_run("ncu2024.1_gtx1660_naive_gemm_full.ncu-rep")]) as eng:
        rows = eng.query("roofline", {"per": "launch"}).to_pylist()
    assert len(rows) == 2
    for r in rows:
        assert r["fp32_flop"] == pytest.approx(2 * M * N * K + 3 * M * N, rel=1e-6)
        assert abs(r["fp32_flop"] - 2 * M * N * K) / (2 * M * N * K) < 0.002  # within 0.2 % of 2MNK
        assert r["fp64_flop"] == 0 and r["precision"] == "fp32"
        assert "per_cycle_elapsed" in r["notes"]
        # DRAM bytes: read + write counters; at least A, B read and C read+written once (4 MiB each)
        assert r["dram_bytes"] >= 4 * 4 * M * N
        # ceilings from the report: 2 x 1408 FFMA/cycle x SM clock; 48 B/cycle x DRAM clock
        assert r["peak_flop_per_s"] == pytest.approx(2 * 1408 * 1.535e9, rel=0.01)
        assert r["peak_dram_bytes_per_s"] == pytest.approx(336e9, rel=0.01)
        assert r["precision"] == "fp32" and r["bound"] in ("compute", "latency")


def test_v100_separate_passes_merge(ncu_run):
    """NERSC-style runs: DRAM bytes in one report, fp64 counts in another, same 8 launches.
    merge_passes pools them: intensities exist only merged; time comes from the faster
    (uninstrumented) pass whatever the input order."""
    dram, flops = "ncu_v100_gene_dram_time.ncu-rep", "ncu_v100_gene_flops_time.ncu-rep"
    out = []
    for names in ((dram, flops), (flops, dram)):
        with Engine([ncu_run(*names)]) as eng:
            plain = eng.query("roofline").to_pylist()
            merged = {r["kernel_name"].split("(")[0]: r for r in eng.query("roofline", {"merge_passes": "true"}).to_pylist()}
        assert len(plain) == 2 and all(r["dram_intensity"] is None for r in plain)  # each pass alone: no intensity
        assert all(r["launches"] == 8 for r in plain)  # 4 per kernel and pass
        out.append(merged)
    for merged in out:
        ij = merged["ij_deriv_kernel"]
        assert ij["launches"] == 4 and "merged from 2 ncu passes" in ij["notes"]
        assert ij["fp64_flop"] == 4 * (0 + 55050240 + 2 * 137625600) == 1321205760
        assert ij["dram_bytes"] == pytest.approx(2763841248)
        assert ij["dram_intensity"] == pytest.approx(1321205760 / 2763841248)
        assert ij["bound"] == "memory"
    assert out[0]["ij_deriv_kernel"]["time_ns"] == pytest.approx(out[1]["ij_deriv_kernel"]["time_ns"], rel=0.005)
    assert out[0]["ij_deriv_kernel"]["time_ns"] < 4e6  # the FLOP-counting pass took 568 ms
    # the details CSV of the same two passes (one file, two processes) gives the same roofline
    with Engine([ncu_run("ncu_v100_gene_roofline_region.details.csv")]) as eng:
        d = {r["kernel_name"].split("(")[0]: r for r in eng.query(
            "roofline", {"merge_passes": "true", "gpu": "Tesla V100-SXM2-16GB"}).to_pylist()}
    for k, r in out[0].items():
        for col in ("fp64_flop", "dram_bytes", "time_ns", "dram_intensity", "flop_per_s"):
            assert d[k][col] == pytest.approx(r[col], rel=1e-6), (k, col)


@pytest.mark.parametrize("name", sorted(p.name for p in NCU.iterdir() if p.name != "ncu_raw_no_kernels.csv"))
def test_roofline_answers_on_every_fixture(ncu_run, name, capsys):
    """`tracekit query roofline` exits 0 with one row per kernel name on every shared ncu file,
    the --page details CSVs (no GPU name) included; there the ceilings are NULL and one stderr
    line says how to add them. (ncu_raw_no_kernels.csv profiled nothing: convert refuses it.)"""
    run = ncu_run(name)
    assert cli_run(["query", "roofline", str(run), "-f", "csv"]) == 0
    out, err = capsys.readouterr()
    kernels = {x["kernel_name"] for x in table(run, "SELECT DISTINCT kernel_name FROM ncu_launches")}
    assert len(out.strip().splitlines()) == 1 + len(kernels) > 1
    if name.endswith(".details.csv"):
        assert err.startswith("tracekit: roofline: run ") and "-p gpu=NAME" in err and err.count("\n") == 1
    else:
        assert err == ""
