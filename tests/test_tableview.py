"""The terminal table shows each query's main measures, folds constant columns into a line under
the title, keeps every ``--columns`` column and keeps shortened names distinct (issue 28)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from rich.cells import cell_len

from tracekit.cli import run as cli
from tracekit.cli.tableview import table_lines
from tracekit.cli.termtable import shorten_distinct
from tracekit.query.named_queries import all_queries

SLICE = "nsys2026_h100_2gpu_pytorch_slice"


def test_every_named_query_declares_main_measures_among_its_columns():
    for q in all_queries().values():
        cols = {c.name for c in q.columns}
        assert q.keys, f"{q.name}: no @key line"
        assert set(q.keys) <= cols, (q.name, set(q.keys) - cols)


def test_shortened_names_that_differ_in_the_middle_stay_distinct():
    a = "sm80_xmma_gemm_f32f32_tilesize64x256x8_stage3_warpsize1x4x1_execute_kernel__5x_cublas"
    b = "sm80_xmma_gemm_f32f32_tilesize128x128x8_stage3_warpsize2x2x1_execute_kernel__5x_cublas"
    c = "void at::native::reduce_kernel<512, 1>(T3)"
    out = shorten_distinct([a, b, a, c], 33)
    assert out[0] == out[2] and len(set(out)) == 3
    assert all(cell_len(x) <= 33 for x in out)
    # the plain shortening made a and b identical; the distinct one shows where they differ
    assert shorten_distinct([a], 33)[0] == shorten_distinct([b], 33)[0]
    assert "64x256" in out[0] and "128x128" in out[1]
    assert out[3] == shorten_distinct([c], 33)[0]  # a name that did not collide is unchanged


def _table():
    return pa.table({
        "run_id": ["r1", "r1", "r1"],
        "pid": [111, 111, 111],
        "device_id": [0, 1, 1],
        "name": ["k1", "k2", "k3"],
        "coverage_pct": [93.6, 93.6, 93.6],
        "min_ns": [1, 2, 3], "max_ns": [4, 5, 6], "stddev_ns": [1, 1, 2], "avg_ns": [2, 3, 4],
        "p90_ns": [4, 5, 6], "count": [10, 20, 30], "total_ns": [1500, 2500, 3500],
    })


def test_constant_columns_move_under_the_title_and_the_main_measure_stays():
    units = {"coverage_pct": ("%", ""), "min_ns": ("ns", ""), "max_ns": ("ns", ""),
             "stddev_ns": ("ns", ""), "avg_ns": ("ns", ""), "p90_ns": ("ns", ""),
             "count": ("count", ""), "total_ns": ("ns", ""), "device_id": ("id", ""),
             "pid": ("id", ""), "name": ("text", "")}
    lines = table_lines(_table(), "q", units, width=40, keys=["total_ns"])
    assert lines[0] == "q (run r1)"
    assert lines[1] == "same in every row: pid 111,"
    assert lines[2] == "coverage 93.6 %"  # a column's name stays beside its value
    head = lines[3].split()
    assert head[:2] == ["device_id", "name"] and head[-2:] == ["total", "ns"]
    assert lines[5].split() == ["0", "k1", "2", "10", "1500"]  # avg ns, count, total ns
    assert "stddev_ns" in " ".join(lines[-3:])  # named in the note, not silently lost


def test_explicit_columns_are_never_lost_but_printed_in_blocks():
    t = _table()
    lines = table_lines(t.select(["name", "min_ns", "max_ns", "stddev_ns", "avg_ns", "p90_ns",
                                  "count", "total_ns"]), None, None, width=30, explicit=True)
    text = "\n".join(lines)
    assert "not shown" not in text
    for header in ("min", "max", "stddev", "avg", "p90", "count", "total"):
        assert header in text
    blocks = text.split("\n\n")
    assert len(blocks) >= 2
    assert all(b.splitlines()[0].split()[0] == "name" for b in blocks)  # identifier repeated
    assert all(cell_len(x) <= 30 for x in lines)


@pytest.mark.parametrize("query,run,measures", [
    ("kernel_summary", "nsys", ["total", "time"]),
    ("gpu_idle", "nsys", ["idle", "idle %"]),
    ("step_summary", "nsys", ["wall", "gpu_busy"]),
    ("launch_latency_by_name", "nsys", ["count", "latency_p50"]),
    ("mfu", "nsys", ["mfu", "FLOP"]),
    ("nccl", "kineto", ["nccl", "exposed", "busbw"]),
])
def test_main_measures_show_at_80_columns_on_real_traces(query, run, measures, nsys_run,
                                                       kineto_run, capsys, monkeypatch):
    folder = nsys_run(SLICE) if run == "nsys" else kineto_run("kineto_a100_nccl_2ranks_rank0")
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["query", query, str(folder), "-n", "5"]) == 0
    out = capsys.readouterr().out
    lines = out.rstrip("\n").split("\n")
    assert max(cell_len(x) for x in lines) <= 80
    header = next(x for x in lines[1:] if not x.startswith(("same in every row", " ")) and "  " in x)
    note = " ".join(out[out.find("not shown: "):].split()) if "not shown: " in out else ""
    empty = note.split(" (empty in every row)")[0].split("; ")[-1] if "(empty in every row)" in note else ""
    for m in measures:  # a main measure empty in every row is named in the note (issue 36)
        assert m in header or m in empty, (query, m, out)


def test_kernel_summary_names_distinct_at_80_columns(nsys_run, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["query", "kernel_summary", str(nsys_run(SLICE)), "-n", "0"]) == 0
    out = capsys.readouterr().out.split("not shown")[0]
    names = [r.split("  ")[0] for r in out.split("\n")[3:] if r.strip()]
    assert len(names) == 41 and len(set(names)) == 41


def test_constant_list_columns_of_a_long_result(capsys, monkeypatch):
    """op_flops' input_dims are lists: the constant-column check of a result longer than the rows
    shown must not fail on them (ArrowNotImplementedError: 'unique' of list<list<int64>>)."""
    t = pa.table({"name": ["mm", "mm", "mm"], "input_dims": [[[2, 3]], [[2, 3]], [[4, 5]]],
                  "flop": [12.0, 12.0, 40.0]})
    lines = table_lines(t.slice(0, 2), "q", None, width=60, keys=["flop"], full=t)
    assert lines[1] == "same in every row: name mm"
    assert lines[2].split() == ["input_dims", "flop"]  # input_dims varies in the whole result
    lines = table_lines(t.slice(0, 2), "q", None, width=60, keys=["flop"],
                        full=pa.concat_tables([t.slice(0, 2)] * 2))
    assert lines[1] == "same in every row: name mm, input_dims [[2, 3]]"


def test_a_shortened_text_measure_is_printed_whole_under_the_table():
    why = "dram_bytes: no dram__bytes counter; fp32_flop: no sm__sass_thread_inst_executed_op_fadd counters"
    t = pa.table({"kernel_name": ["k1", "k2"], "flop": [None, 5.0], "missing": [why, None]})
    lines = table_lines(t, "roofline", {"flop": ("FLOP", ""), "missing": ("text", "")}, width=40,
                        keys=["flop", "missing"])
    assert "…" in lines[3]  # shortened in the row
    assert " ".join(lines[5:]) == f"missing: {why}"  # and whole below, wrapped to the width
    assert all(len(x) <= 40 for x in lines)


def test_op_flops_and_roofline_show_their_main_measures_at_80_columns(kineto_run, tmp_path, capsys,
                                                                   monkeypatch):
    from conftest import FIXTURES

    from tracekit.convert import convert

    monkeypatch.setenv("COLUMNS", "80")
    assert cli(["query", "op_flops", str(kineto_run("kineto_mi250_rocm")), "-n", "5"]) == 0
    out = capsys.readouterr().out.split("\n")
    header = out[next(i for i, x in enumerate(out) if x.startswith("─")) - 1]
    assert "FLOP" in header and max(cell_len(x) for x in out) <= 80
    ncu = convert([FIXTURES / "ncu" / "ncu_v100_gene_dram_time.ncu-rep",
                   FIXTURES / "ncu" / "ncu_v100_gene_flops_time.ncu-rep"], tmp_path / "gene")
    assert cli(["query", "roofline", str(ncu), "-p", "merge_passes=true"]) == 0
    out = capsys.readouterr().out.split("\n")
    header = out[next(i for i, x in enumerate(out) if x.startswith("─")) - 1].split()
    # the roofline's answer (issue 36): intensity, achieved rate, share of the roof, bound
    assert header == ["kernel_name", "dram_intensity", "GFLOP/s", "pct_of_roof", "%", "bound"], header
    assert max(cell_len(x) for x in out) <= 80


def test_constant_line_breaks_between_columns_not_inside_one():
    """'same in every row' wraps between items: a column's name stays beside its value (a
    step_summary at 80 columns once put 'pid' at the end of one line and '3453' on the next)."""
    from tracekit.cli.tableview import wrap_items
    from tracekit.cli.termtable import cell_len

    items = ["rank 0", "comm 0 ns", "warmup false", "step_source tracekit", "pid 3453"]
    assert wrap_items("same in every row: ", items, 80) == [
        "same in every row: rank 0, comm 0 ns, warmup false, step_source tracekit,", "pid 3453"]
    assert wrap_items("same in every row: ", items, 40) == [
        "same in every row: rank 0, comm 0 ns,", "warmup false, step_source tracekit,", "pid 3453"]
    for width in range(4, 90):  # narrower than an item: that item alone is cut at its spaces
        lines = wrap_items("same in every row: ", items + ["x" * 50], width)
        assert all(cell_len(x) <= width for x in lines)
        assert "".join(lines).replace(" ", "") == "sameineveryrow:" + "".join(
            i.replace(" ", "") + "," for i in items) + "x" * 50


def test_sizes_in_binary_units_one_unit_for_columns_alike():
    # issue 36 item 8: memory_summary showed "6629.51 MB" beside a column in GB while
    # `plot memory` said 6.174 GiB: sizes are binary, and columns of like magnitude share one
    t = pa.table({"device": ["cuda:0"], "peak_allocated_bytes": [6_629_510_000],
                  "peak_reserved_bytes": [11_811_160_064], "min_bytes": [512]})
    units = {"device": ("id", ""), "peak_allocated_bytes": ("bytes", ""),
             "peak_reserved_bytes": ("bytes", ""), "min_bytes": ("bytes", "")}
    lines = table_lines(t, "q", units, width=80)
    # 6629510000 / 2^30 = 6.174; 11811160064 / 2^30 = 11.000; 512 B keeps its own unit
    assert lines[1].split() == ["device", "peak_allocated", "GiB", "peak_reserved", "GiB", "min", "B"]
    assert lines[3].split() == ["cuda:0", "6.17", "11.00", "512"]


def test_a_column_of_plain_floats_keeps_its_digits_lined_up():
    """whatif's speedup column read 1.059 / 1 / 1.03 (trailing zeros dropped value by value)."""
    from tracekit.cli.display import columns_of

    t = pa.table({"speedup": [1.059, 1.0, 1.03, None], "ratio": [0.5, 2.0, 0.01234, 3.25]})
    speedup, ratio = columns_of(t)
    assert speedup.cells == ["1.059", "1.000", "1.030", ""]
    # values below 1 keep 4 significant digits, each value as written before
    assert ratio.cells == ["0.5", "2", "0.01234", "3.25"]
