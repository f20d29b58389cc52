"""Study figures say why a panel is empty, use integer world-size ticks, keep legends off the
points and mark characterization points by their source (issue 28)."""

from __future__ import annotations

import math

import pandas as pd

import tracekit.plots.study as sf


def _capture(monkeypatch):
    figs = []

    def keep(fig):
        figs.append(fig)
        return "png"
    monkeypatch.setattr(sf, "_png", keep)
    return figs


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_empty_panel_says_why_and_world_sizes_are_integers(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["a", "a"], "precision": ["fp32", "fp32"], "interconnect": [None, None],
                       "world_size": [1.0, 16.0], "samples_per_s": [math.nan, math.nan],
                       "scaling_efficiency": [math.nan, math.nan]})
    sf._lines(sf._plt(), df, [("samples_per_s", "samples/s"), ("scaling_efficiency", "eff")], "t",
              {"samples_per_s": "no batch size"})
    [fig] = figs
    texts = _texts(fig)
    assert "no batch size" in texts and "no run has a value of eff" in texts
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "16"]  # not 1.0 / 16.0
    assert ax.get_xscale() == "log"  # 1 .. 16: evenly spaced powers of two, labels never touch


def test_legend_under_the_panels_and_labels_without_dot_zero(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["w"] * 2, "precision": ["bf16"] * 2, "interconnect": [None] * 2,
                       "world_size": [1.0, 2.0], "comm_share": [0.1, 0.2]})
    sf._lines(sf._plt(), df, [("comm_share", "share")], "t")
    [fig] = figs
    assert fig.legends and not fig.axes[0].get_legend()  # a figure legend, not one over the points
    assert sf._label_value(2.0) == "2" and sf._label_value(2.5) == "2.5"


def test_characterization_points_marked_by_source(monkeypatch):
    figs = _capture(monkeypatch)
    df = pd.DataFrame({"workload": ["gene", "mlp"], "precision": ["fp64", "fp32"], "suite": ["hpc", "micro"],
                       "flop_per_s": [2.2e11, 4e9], "dram_bytes_per_s": [7.9e11, 4.2e9],
                       "dram_transactions_per_s": [2.5e10, 1.3e8],
                       "source": ["ncu roofline (FLOP, dram_bytes, time_ns)", "operator model (op_flops)"]})
    sf._scatter(sf._plt(), df)
    [fig] = figs
    key = "\n".join(t.get_text() for t in fig.texts)
    assert "1: gene fp64 (ncu counters)" in key and "2: mlp fp32 (operator FLOP model)" in key
    faces = [tuple(c.get_facecolors()[0]) if len(c.get_facecolors()) else None
             for c in fig.axes[0].collections]
    assert faces[0] is not None and faces[0][3] > 0  # filled: ncu
    assert faces[1] is None or faces[1][3] == 0  # hollow: the operator model
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) <= 6  # one tick per decade over 3 decades: no overlapping labels


def _study(**tables):
    from types import SimpleNamespace

    from tracekit.study.tables import COLUMNS

    t = {n: pd.DataFrame(columns=c) for n, c in COLUMNS.items()}
    t.update(tables)
    return SimpleNamespace(tables=t, reasons={})


def test_figures_without_data_left_out_with_what_fills_them(monkeypatch):
    """Issue 36 item 7: no empty frames; one line per missing figure or panel; no trivial 1 for
    fp32 runs; memory bars in readable units with their labels inside the axes."""
    figs = _capture(monkeypatch)
    prec = pd.DataFrame({"workload": ["w", "w"], "precision": ["fp32", "amp"], "world_size": [1, 1],
                         "speedup_vs_fp32": [1.0, 1.57], "tensor_core_time_share": [0.0, 0.41]})
    gib = 2**30
    mem = pd.DataFrame({"workload": ["w", "w"], "precision": ["fp32", "amp"], "world_size": [1, 1],
                        "batch_size": [32, 32], "peak_allocated_bytes": [int(1.99 * gib), int(6.174 * gib)],
                        "peak_reserved_bytes": [2 * gib, 7 * gib], "device": ["cuda:0", "cuda:0"]})
    out = sf.figures(_study(precision=prec, memory=mem))
    for name in ("scaling", "cpu", "characterization", "communication", "interconnect", "scaling_loss"):
        assert [b for b, _ in out[name]] == [None] * len(out[name]), name  # no figure drawn
    assert [t for _, t in out["cpu"]] == [sf.FILL["cores_busy"]]  # one line, not one per panel
    assert [t for _, t in out["scaling"]] == [sf.FILL["samples_per_s"], sf.FILL["scaling_efficiency"]]
    assert "--cpuctxsw" in sf.FILL["cores_busy"] and "ncu" in out["characterization"][0][1]
    assert len(figs) == 2  # precision and memory
    p, m = figs
    speed = p.axes[0]
    assert [t.get_text() for t in speed.get_xticklabels()] == ["w amp 1"]  # not the fp32 run's 1
    assert [t.get_text() for t in speed.texts] == ["1.57"]
    assert m.axes[0].get_ylabel() == "peak allocated (GiB)"
    assert [t.get_text() for t in m.axes[0].texts] == ["1.99", "6.17"]  # not 1.99e+03 MiB
    for ax in m.axes:
        top = max(t.get_position()[1] for t in ax.texts)
        assert ax.get_ylim()[1] >= top * 1.1  # the tallest bar's label is inside the axes
    only_fp32 = sf.figures(_study(precision=prec.iloc[:1]))
    assert (None, sf.FILL["speedup_vs_fp32"]) in only_fp32["precision"]
    assert len(figs) == 3 and len(figs[2].axes) == 1  # the tensor-core panel alone


def test_report_memory_table_in_the_axis_unit():
    from tracekit.study.report import display_frame

    gib = 2**30
    df = pd.DataFrame({"peak_allocated_bytes": [int(1.5 * gib)], "peak_reserved_bytes": [2 * gib],
                       "runs": ["a,b"]})
    d = display_frame(df)
    assert list(d.columns) == ["peak allocated (GiB)", "peak reserved (GiB)", "runs"]
    assert d.iloc[0].tolist() == [1.5, 2.0, "a, b"]
    small = display_frame(df.assign(peak_allocated_bytes=[512 * 2**20], peak_reserved_bytes=[600 * 2**20]))
    assert small.columns[0] == "peak allocated (MiB)" and small.iloc[0, 0] == 512
